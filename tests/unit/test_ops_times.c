/*
 * Change times (ops/ops_rows.c): a row's changed_at moves when what it
 * holds changes and only then, and the sandboxes' and snapshots' tree
 * times move with their own rows' inserts, changes and deletes, each
 * apart. Rows go straight into a registry: no runsc.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "lib/util.h"
#include "ops/ops_internal.h"
#include "tests/unit/t.h"
#include "tests/unit/t_dir.h"

/* Past the millisecond now_ms() counts in, so a new stamp is a later one. */
static void tick(void)
{
	nanosleep(&(struct timespec){.tv_nsec = 3 * 1000 * 1000}, NULL);
}

static struct sandbox get_sb(const char *id)
{
	struct sandbox sb = {0};
	CHECK(row_sandbox_get(id, &sb) == 0);
	return sb;
}

int main(void)
{
	char path[PATH_MAX];
	if (!t_dir_make("test_ops_times"))
		return 1;
	t_path(path, "registry.db");
	CHECK(registry_open(path, &ops.reg) == 0);
	rows_times_init();
	const int64_t t0 = ops_started_at();
	CHECK(t0 > 0 && ops_tree_changed_at(OPS_OBJ_SANDBOX) == t0);
	CHECK(ops_tree_changed_at(OPS_OBJ_SNAPSHOT) == t0);

	tick();
	struct sandbox sb = {.state = SB_CREATED, .pid = -1, .created_at = t0 - 5000};
	snprintf(sb.id, sizeof(sb.id), "web");
	CHECK(row_sandbox_insert(&sb) == 0);
	const int64_t t1 = get_sb("web").changed_at;
	CHECK_MSG(t1 > t0, "an insert stamps the row (%lld > %lld)", (long long)t1, (long long)t0);
	CHECK(ops_sandbox_changed_at(&(struct sandbox){.created_at = 9, .changed_at = 0}) == 9);
	CHECK(ops_tree_changed_at(OPS_OBJ_SANDBOX) == t1);
	CHECK(ops_tree_changed_at(OPS_OBJ_SNAPSHOT) == t0); /* a sandbox is no snapshot */

	/* The same row again: no change, no time. */
	tick();
	sb = get_sb("web");
	CHECK(row_sandbox_update(&sb) == 0);
	CHECK(get_sb("web").changed_at == t1);
	CHECK(ops_tree_changed_at(OPS_OBJ_SANDBOX) == t1);

	/* A setting, then a state: each moves it. */
	sb.res.memory_bytes = 64LL << 20;
	CHECK(row_sandbox_update(&sb) == 0);
	const int64_t t2 = get_sb("web").changed_at;
	CHECK(t2 > t1 && ops_tree_changed_at(OPS_OBJ_SANDBOX) == t2);
	tick();
	CHECK(sandbox_apply("web", SB_PATCH(SB_TERMINATED)) == 0);
	const int64_t t3 = get_sb("web").changed_at;
	CHECK(t3 > t2 && ops_sandbox_changed_at(&(struct sandbox){.changed_at = t3}) == t3);

	/* A snapshot's row: its own tree time. */
	tick();
	struct snapshot snap = {.state = SNAP_PENDING, .created_at = t0};
	snprintf(snap.id, sizeof(snap.id), "snap-1");
	snprintf(snap.sandbox_id, sizeof(snap.sandbox_id), "web");
	CHECK(row_snapshot_insert(&snap) == 0);
	const int64_t t4 = ops_tree_changed_at(OPS_OBJ_SNAPSHOT);
	CHECK(t4 > t3 && ops_tree_changed_at(OPS_OBJ_SANDBOX) == t3);
	tick();
	snap.state = SNAP_COMPLETED;
	CHECK(snapshot_save(&snap) == 0);
	struct snapshot now;
	CHECK(row_snapshot_get("snap-1", &now) == 0 && now.changed_at > t4);
	CHECK(ops_snapshot_changed_at(&now) == now.changed_at);

	/* A delete moves its tree's time. */
	tick();
	CHECK(row_sandbox_delete("web") == 0);
	CHECK(ops_tree_changed_at(OPS_OBJ_SANDBOX) > t3);
	registry_close(ops.reg);
	ops.reg = NULL;
	return t_done();
}
