/*
 * registry_sandbox.c - the sandboxes table (registry.h): insert, get,
 * update, delete and the walks, on the statements and row codecs of
 * registry.c.
 */
#include "backend/registry_internal.h"

#include <errno.h>
#include <stdlib.h>

#include "lib/util.h"

/* --- sandboxes -------------------------------------------------------------- */

struct sandbox_walk {
	int (*fn)(const struct sandbox *sb, void *arg);
	void *arg;
	struct sandbox sb;
};

static int sandbox_walk_row(sqlite3_stmt *st, void *ctx)
{
	struct sandbox_walk *w = ctx;
	int r = reg_sandbox_read(st, &w->sb);
	return r < 0 ? r : w->fn(&w->sb, w->arg);
}

static int sandbox_walk(struct registry *reg, const char *sql, const char *key,
			int (*fn)(const struct sandbox *sb, void *arg), void *arg)
{
	/* Heap, not stack: a sandbox is 22 KiB and job threads may have small stacks. */
	_cleanup_free_ struct sandbox_walk *w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fn = fn;
	w->arg = arg;
	return reg_query(reg, sql, key, sandbox_walk_row, w);
}

static int sandbox_copy_row(sqlite3_stmt *st, void *ctx)
{
	int r = reg_sandbox_read(st, ctx);
	return r < 0 ? r : 1;
}

int registry_sandbox_insert(struct registry *reg, const struct sandbox *sb)
{
	return reg_insert(reg, "INSERT INTO sandboxes (" SB_COLS ") VALUES (" SB_PARAMS ")",
			  reg_sandbox_bind, sb);
}

int registry_sandbox_get(struct registry *reg, const char *id, struct sandbox *out)
{
	int r = reg_query(reg, SB_SELECT "WHERE id = ?1", id, sandbox_copy_row, out);
	if (r < 0)
		return r;
	return r ? 0 : -ENOENT;
}

int registry_sandbox_update(struct registry *reg, const struct sandbox *sb)
{
	return reg_change(
	    reg, "UPDATE sandboxes SET (" SB_COLS ") = (" SB_PARAMS ") WHERE id = ?1 RETURNING id",
	    reg_sandbox_bind, sb);
}

int registry_sandbox_delete(struct registry *reg, const char *id)
{
	return reg_change(reg, "DELETE FROM sandboxes WHERE id = ?1 RETURNING id", reg_bind_key,
			  id);
}

int registry_sandbox_each(struct registry *reg, int (*fn)(const struct sandbox *sb, void *arg),
			  void *arg)
{
	return sandbox_walk(reg, SB_SELECT "ORDER BY created_at, id", NULL, fn, arg);
}

int registry_sandbox_each_forked_from(struct registry *reg, const char *snapshot_id,
				      int (*fn)(const struct sandbox *sb, void *arg), void *arg)
{
	return sandbox_walk(reg, SB_SELECT "WHERE parent_snapshot = ?1 ORDER BY created_at, id",
			    snapshot_id, fn, arg);
}

int registry_snapshot_pinned(struct registry *reg, const char *snapshot_id, bool *pinned)
{
	/* suspending too: its suspend snapshot is being written and will be restored from. */
	int r = reg_query(reg,
			  "SELECT 1 FROM sandboxes WHERE restore_snapshot = ?1"
			  " AND state IN ('suspending', 'suspended', 'resuming') LIMIT 1",
			  snapshot_id, reg_found_row, NULL);
	if (r < 0)
		return r;
	*pinned = r == 1;
	return 0;
}
