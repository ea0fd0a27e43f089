/*
 * A registry write that fails reaches the operations' callers as -EIO, the
 * errno the registry gave, not as error()'s old -1 (which reads -EPERM,
 * "Operation not permitted"). The failure is a trigger that refuses every
 * update, added through a second connection: no root, no full disk.
 */
#include "backend/registry.h"

#include <errno.h>
#include <sqlite3.h>
#include <string.h>

#include "lib/util.h"
#include "runtime/ops_internal.h"
#include "tests/unit/t.h"
#include "tests/unit/t_dir.h"

static bool refuse_updates(const char *db_path)
{
	sqlite3 *db = NULL;
	int rc = sqlite3_open(db_path, &db);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db,
				  "CREATE TRIGGER refuse_sb BEFORE UPDATE ON sandboxes "
				  "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;"
				  "CREATE TRIGGER refuse_snap BEFORE UPDATE ON snapshots "
				  "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
				  NULL, NULL, NULL);
	sqlite3_close(db);
	return rc == SQLITE_OK;
}

int main(void)
{
	char path[PATH_MAX];
	if (!t_dir_make("test_ops_save"))
		return 1;
	t_path(path, "registry.db");
	CHECK(registry_open(path, &ops.reg) == 0);

	struct sandbox sb = {.state = SB_RUNNING, .pid = -1};
	snprintf(sb.id, sizeof(sb.id), "sb-1");
	snprintf(sb.image, sizeof(sb.image), "alpine");
	CHECK(registry_sandbox_insert(ops.reg, &sb) == 0);
	struct snapshot snap = {.state = SNAP_PENDING};
	snprintf(snap.id, sizeof(snap.id), "snap-1");
	snprintf(snap.sandbox_id, sizeof(snap.sandbox_id), "sb-1");
	CHECK(registry_snapshot_insert(ops.reg, &snap) == 0);

	/* While the registry takes writes, both save. */
	CHECK(sandbox_apply_if("sb-1", ~0u, SB_PATCH(SB_SUSPENDED)) == 0);
	CHECK(snapshot_save(&snap) == 0);

	CHECK(refuse_updates(path));
	CHECK(sandbox_apply_if("sb-1", ~0u, SB_PATCH(SB_RUNNING)) == -EIO);
	CHECK(sandbox_apply("sb-1", SB_PATCH(SB_RUNNING)) == -EIO);
	snap.state = SNAP_COMPLETED;
	CHECK(snapshot_save(&snap) == -EIO);
	/* Nothing changed. */
	struct sandbox now;
	CHECK(registry_sandbox_get(ops.reg, "sb-1", &now) == 0 && now.state == SB_SUSPENDED);

	registry_close(ops.reg);
	ops.reg = NULL;
	rm_rf(t_base);
	return t_done();
}
