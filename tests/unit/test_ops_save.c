/*
 * A registry update that fails keeps the row's truth in memory
 * (ops/ops_rows.c): the operations read the new row at once, the
 * registry gets it when it takes writes again, and past
 * REGISTRY_PENDING_MAX kept rows an update fails with the registry's errno
 * (-EIO), not error()'s old -1. The failure is a trigger that refuses every
 * update, added through a second connection: no root, no full disk.
 */
#include "backend/registry/registry.h"

#include <errno.h>
#include <sqlite3.h>
#include <string.h>

#include "lib/util.h"
#include "ops/ops_internal.h"
#include "tests/unit/t.h"
#include "tests/unit/t_dir.h"

static bool sql(const char *db_path, const char *text)
{
	sqlite3 *db = NULL;
	int rc = sqlite3_open(db_path, &db);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, text, NULL, NULL, NULL);
	sqlite3_close(db);
	return rc == SQLITE_OK;
}

static bool refuse_updates(const char *db_path)
{
	return sql(db_path, "CREATE TRIGGER refuse_sb BEFORE UPDATE ON sandboxes "
			    "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;"
			    "CREATE TRIGGER refuse_snap BEFORE UPDATE ON snapshots "
			    "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;");
}

static bool take_updates(const char *db_path)
{
	return sql(db_path, "DROP TRIGGER refuse_sb; DROP TRIGGER refuse_snap;");
}

static void insert_sandbox(const char *id)
{
	struct sandbox sb = {.state = SB_RUNNING, .pid = -1};
	snprintf(sb.id, sizeof(sb.id), "%s", id);
	snprintf(sb.image, sizeof(sb.image), "alpine");
	CHECK(registry_sandbox_insert(ops.reg, &sb) == 0);
}

static int registry_state(const char *id)
{
	struct sandbox sb;
	return registry_sandbox_get(ops.reg, id, &sb) == 0 ? (int)sb.state : -1;
}

static int true_state(const char *id)
{
	struct sandbox sb;
	return row_sandbox_get(id, &sb) == 0 ? (int)sb.state : -1;
}

static int count_running(const struct sandbox *sb, void *arg)
{
	*(int *)arg += sb->state == SB_RUNNING;
	return 0;
}

int main(void)
{
	char path[PATH_MAX];
	if (!t_dir_make("test_ops_save"))
		return 1;
	t_path(path, "registry.db");
	CHECK(registry_open(path, &ops.reg) == 0);

	insert_sandbox("sb-1");
	struct snapshot snap = {.state = SNAP_PENDING};
	snprintf(snap.id, sizeof(snap.id), "snap-1");
	snprintf(snap.sandbox_id, sizeof(snap.sandbox_id), "sb-1");
	CHECK(registry_snapshot_insert(ops.reg, &snap) == 0);

	/* While the registry takes writes, both save. */
	CHECK(sandbox_apply_if("sb-1", ~0u, SB_PATCH(SB_SUSPENDED)) == 0);
	CHECK(snapshot_save(&snap) == 0);
	CHECK(rows_pending() == 0);

	/* Refused: the truth is kept, the registry's row is the old one. */
	CHECK(refuse_updates(path));
	CHECK(sandbox_apply_if("sb-1", ~0u, SB_PATCH(SB_RESUMING)) == 0);
	CHECK(sandbox_apply("sb-1", SB_PATCH(SB_RUNNING)) == 0);
	snap.state = SNAP_COMPLETED;
	CHECK(snapshot_save(&snap) == 0);
	CHECK(rows_pending() == 2);
	CHECK(true_state("sb-1") == SB_RUNNING);
	CHECK(registry_state("sb-1") == SB_SUSPENDED);
	/* A check of the state sees the kept row: running is not resuming. */
	CHECK(sandbox_apply_if("sb-1", STATE_BIT(SB_RESUMING), SB_PATCH(SB_FAILED)) == -EBUSY);
	int running = 0;
	CHECK(row_sandbox_each(count_running, &running) == 0 && running == 1);
	struct snapshot now;
	CHECK(row_snapshot_get("snap-1", &now) == 0 && now.state == SNAP_COMPLETED);
	CHECK(registry_snapshot_get(ops.reg, "snap-1", &now) == 0 && now.state == SNAP_PENDING);

	/* A retry that is refused again keeps them. */
	rows_flush(true);
	CHECK(rows_pending() == 2);

	/* Past the bound, an update fails as the registry did: -EIO, nothing kept. */
	char id[ID_MAX];
	for (int i = 0; i < REGISTRY_PENDING_MAX; i++) {
		snprintf(id, sizeof(id), "fill-%d", i);
		CHECK(take_updates(path));
		insert_sandbox(id);
		CHECK(refuse_updates(path));
		CHECK(sandbox_apply(id, SB_PATCH(SB_TERMINATED)) ==
		      (i < REGISTRY_PENDING_MAX - 2 ? 0 : -EIO));
	}
	CHECK(rows_pending() == REGISTRY_PENDING_MAX);
	CHECK(true_state(id) == SB_RUNNING);
	snap.state = SNAP_FAILED;
	CHECK(snapshot_save(&snap) == 0); /* its row is kept already: replaced */
	CHECK(row_snapshot_get("snap-1", &now) == 0 && now.state == SNAP_FAILED);

	/* Writes work again: the next update writes every kept row. */
	CHECK(take_updates(path));
	CHECK(sandbox_apply(id, SB_PATCH(SB_TERMINATED)) == 0);
	CHECK(rows_pending() == 0);
	CHECK(registry_state("sb-1") == SB_RUNNING);
	CHECK(registry_state("fill-0") == SB_TERMINATED);
	CHECK(registry_state(id) == SB_TERMINATED);
	CHECK(registry_snapshot_get(ops.reg, "snap-1", &now) == 0 && now.state == SNAP_FAILED);

	/* A delete drops the kept row with the registry's. */
	CHECK(refuse_updates(path));
	CHECK(sandbox_apply("sb-1", SB_PATCH(SB_TERMINATED)) == 0);
	CHECK(rows_pending() == 1);
	CHECK(row_sandbox_delete("sb-1") == 0);
	CHECK(rows_pending() == 0);
	CHECK(true_state("sb-1") == -1);

	rows_close();
	registry_close(ops.reg);
	ops.reg = NULL;
	rm_rf(t_base);
	return t_done();
}
