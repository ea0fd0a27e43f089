/*
 * registry_snapshot.c - the snapshots table (registry.h): insert, get,
 * update, delete and the walks, on the statements and row codecs of
 * registry.c.
 */
#include "backend/registry_internal.h"

#include <errno.h>
#include <stdlib.h>

#include "lib/util.h"

/* --- snapshots -------------------------------------------------------------- */

struct snapshot_walk {
	int (*fn)(const struct snapshot *snap, void *arg);
	void *arg;
	struct snapshot snap;
};

static int snapshot_walk_row(sqlite3_stmt *st, void *ctx)
{
	struct snapshot_walk *w = ctx;
	int r = reg_snapshot_read(st, &w->snap);
	return r < 0 ? r : w->fn(&w->snap, w->arg);
}

static int snapshot_walk(struct registry *reg, const char *sql, const char *key,
			 int (*fn)(const struct snapshot *snap, void *arg), void *arg)
{
	_cleanup_free_ struct snapshot_walk *w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fn = fn;
	w->arg = arg;
	return reg_query(reg, sql, key, snapshot_walk_row, w);
}

static int snapshot_copy_row(sqlite3_stmt *st, void *ctx)
{
	int r = reg_snapshot_read(st, ctx);
	return r < 0 ? r : 1;
}

static int snapshot_get_by(struct registry *reg, const char *sql, const char *key,
			   struct snapshot *out)
{
	int r = reg_query(reg, sql, key, snapshot_copy_row, out);
	if (r < 0)
		return r;
	return r ? 0 : -ENOENT;
}

int registry_snapshot_insert(struct registry *reg, const struct snapshot *snap)
{
	return reg_insert(reg, "INSERT INTO snapshots (" SNAP_COLS ") VALUES (" SNAP_PARAMS ")",
			  reg_snapshot_bind, snap);
}

int registry_snapshot_get(struct registry *reg, const char *id, struct snapshot *out)
{
	return snapshot_get_by(reg, SNAP_SELECT "WHERE id = ?1", id, out);
}

int registry_snapshot_update(struct registry *reg, const struct snapshot *snap)
{
	return reg_change(reg,
			  "UPDATE snapshots SET (" SNAP_COLS ") = (" SNAP_PARAMS
			  ") WHERE id = ?1 RETURNING id",
			  reg_snapshot_bind, snap);
}

int registry_snapshot_delete(struct registry *reg, const char *id)
{
	return reg_change(reg, "DELETE FROM snapshots WHERE id = ?1 RETURNING id", reg_bind_key,
			  id);
}

int registry_snapshot_each(struct registry *reg, int (*fn)(const struct snapshot *snap, void *arg),
			   void *arg)
{
	return snapshot_walk(reg, SNAP_SELECT "ORDER BY created_at, id", NULL, fn, arg);
}

int registry_snapshot_each_of_sandbox(struct registry *reg, const char *sandbox_id,
				      int (*fn)(const struct snapshot *snap, void *arg), void *arg)
{
	return snapshot_walk(reg, SNAP_SELECT "WHERE sandbox_id = ?1 ORDER BY created_at, id",
			     sandbox_id, fn, arg);
}
