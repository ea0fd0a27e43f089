/*
 * registry_sandbox.c - the sandboxes table (registry.h): insert, get, update, delete
 * and the walks, on the statements and row codecs of registry.c.
 */
#include "backend/registry/registry_internal.h"

#include <stddef.h>

int registry_sandbox_insert(struct registry *reg, const struct sandbox *sb)
{
	return reg_insert(reg, "INSERT INTO sandboxes (" SB_COLS ") VALUES (" SB_PARAMS ")",
			  REG_SANDBOXES, sb);
}

int registry_sandbox_get(struct registry *reg, const char *id, struct sandbox *out)
{
	return reg_get(reg, SB_SELECT "WHERE id = ?1", id, REG_SANDBOXES, out);
}

int registry_sandbox_update(struct registry *reg, const struct sandbox *sb)
{
	return reg_change(
	    reg, "UPDATE sandboxes SET (" SB_COLS ") = (" SB_PARAMS ") WHERE id = ?1 RETURNING id",
	    REG_SANDBOXES, sb);
}

int registry_sandbox_delete(struct registry *reg, const char *id)
{
	return reg_change(reg, "DELETE FROM sandboxes WHERE id = ?1 RETURNING id", REG_KEY, id);
}

int registry_sandbox_each(struct registry *reg, int (*fn)(const struct sandbox *sb, void *arg),
			  void *arg)
{
	return reg_walk(reg, SB_SELECT "ORDER BY created_at, id", NULL,
			(struct reg_walk){.sandbox = fn, .arg = arg});
}

int registry_sandbox_each_forked_from(struct registry *reg, const char *snapshot_id,
				      int (*fn)(const struct sandbox *sb, void *arg), void *arg)
{
	return reg_walk(reg, SB_SELECT "WHERE parent_snapshot = ?1 ORDER BY created_at, id",
			snapshot_id, (struct reg_walk){.sandbox = fn, .arg = arg});
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
