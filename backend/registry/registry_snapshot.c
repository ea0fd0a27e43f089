/*
 * registry_snapshot.c - the snapshots table (registry.h): insert, get, update, delete
 * and the walks, on the statements and row codecs of registry.c.
 */
#include "backend/registry/registry_internal.h"

#include <stddef.h>

int registry_snapshot_insert(struct registry *reg, const struct snapshot *snap)
{
	return reg_insert(reg, "INSERT INTO snapshots (" SNAP_COLS ") VALUES (" SNAP_PARAMS ")",
			  REG_SNAPSHOTS, snap);
}

int registry_snapshot_get(struct registry *reg, const char *id, struct snapshot *out)
{
	return reg_get(reg, SNAP_SELECT "WHERE id = ?1", id, REG_SNAPSHOTS, out);
}

int registry_snapshot_update(struct registry *reg, const struct snapshot *snap)
{
	return reg_change(reg,
			  "UPDATE snapshots SET (" SNAP_COLS ") = (" SNAP_PARAMS
			  ") WHERE id = ?1 RETURNING id",
			  REG_SNAPSHOTS, snap);
}

int registry_snapshot_delete(struct registry *reg, const char *id)
{
	return reg_change(reg, "DELETE FROM snapshots WHERE id = ?1 RETURNING id", REG_KEY, id);
}

int registry_snapshot_each(struct registry *reg, int (*fn)(const struct snapshot *snap, void *arg),
			   void *arg)
{
	return reg_walk(reg, SNAP_SELECT "ORDER BY created_at, id", NULL,
			(struct reg_walk){.snapshot = fn, .arg = arg});
}

int registry_snapshot_each_listed(struct registry *reg,
				  int (*fn)(const struct snapshot *snap, void *arg), void *arg)
{
	return reg_walk(reg, "SELECT " SNAP_LISTED_COLS " FROM snapshots ORDER BY created_at, id",
			NULL, (struct reg_walk){.snapshot = fn, .arg = arg, .listed = true});
}

int registry_snapshot_each_of_sandbox(struct registry *reg, const char *sandbox_id,
				      int (*fn)(const struct snapshot *snap, void *arg), void *arg)
{
	return reg_walk(reg, SNAP_SELECT "WHERE sandbox_id = ?1 ORDER BY created_at, id",
			sandbox_id, (struct reg_walk){.snapshot = fn, .arg = arg});
}
