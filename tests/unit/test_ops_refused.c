/*
 * test_ops_refused.c - registry writes refused (a full disk, an I/O error):
 * a job, a terminate, a snapshot and a restore whose writes fail.
 *
 * The harness (lives, scenarios, the fake runsc) is tests/unit/t_ops.h.
 */
#include "tests/unit/t_ops.h"

/* --- registry writes refused ------------------------------------------------- */

/*
 * The registry refuses every update while @refuse: triggers added through a
 * second connection, as a full disk or an I/O error would (no root needed).
 */
static void registry_refuse(bool refuse)
{
	registry_exec(refuse ? "CREATE TRIGGER refuse_sb BEFORE UPDATE ON sandboxes "
			       "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;"
			       "CREATE TRIGGER refuse_snap BEFORE UPDATE ON snapshots "
			       "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;"
			     : "DROP TRIGGER refuse_sb; DROP TRIGGER refuse_snap;");
}

/* The registry's own row of sandbox (@snap: snapshot) @id: its state, -1 if none. */
static int registry_state(bool snap, const char *id)
{
	struct sandbox sb;
	struct snapshot sn;
	if (snap)
		return registry_snapshot_get(ops_registry(), id, &sn) == 0 ? (int)sn.state : -1;
	return registry_sandbox_get(ops_registry(), id, &sb) == 0 ? (int)sb.state : -1;
}

/* Wait until the registry's row of @id is @want: the monitor writes what it refused. */
static void registry_wait_state(int line, bool snap, const char *id, int want)
{
	int got = registry_state(snap, id);
	for (int i = 0; got != want && i < DEADLINE_S * 20; i++) {
		sleep_ms(50);
		got = registry_state(snap, id);
	}
	const char *(*name)(int) = snap ? snap_name : sb_name;
	t_count(got == want, __FILE__, line, "the registry's %s %s is %s, not %s",
		snap ? "snapshot" : "sandbox", id, name(got), name(want));
}
#define CHECK_REG_SB(id, want) registry_wait_state(__LINE__, false, id, (int)(want))
#define CHECK_REG_SNAP(id, want) registry_wait_state(__LINE__, true, id, (int)(want))

static int begin_wait(const char *id, ops_done_fn done, void *ctx, struct err *e)
{
	return ops_sandbox_wait(root, id, done, ctx, e);
}

/*
 * A snapshot whose checkpoint and store finish while the registry refuses
 * writes: the sandbox runs and the snapshot is completed for every reader,
 * the waits answer, and the registry says so once it takes writes again.
 */
static void refused_job_steps(void)
{
	char snap[ID_MAX], out[RESULT_MAX];
	struct err e = {0};
	struct op *job = op_new(), *sb_wait = op_new(), *snap_wait = op_new();
	CHECK(run_sandbox("a"));
	begin_blocked("a", begin_snapshot, job, "checkpoint", SB_SNAPSHOTTING,
		      "created starting running snapshotting");
	newest_of("a", snap);
	CHECK(begin_wait("a", op_done, sb_wait, &e) == 0);
	CHECK(ops_snapshot_wait(root, snap, op_done, snap_wait, &e) == 0);
	registry_refuse(true);
	fake_release();
	CHECK(op_wait(job, NULL, 0) == 0);
	CHECK(op_wait(sb_wait, out, sizeof(out)) == 0);
	CHECK_STR(out, "running\n");
	CHECK(op_wait(snap_wait, out, sizeof(out)) == 0);
	CHECK_STR(out, "completed\n");
	CHECK_SB("a", SB_RUNNING);
	CHECK_SNAP(snap, SNAP_COMPLETED);
	CHECK(registry_state(false, "a") == SB_SNAPSHOTTING);
	CHECK(registry_state(true, snap) == SNAP_IN_PROGRESS);
	/* Not EBUSY: the sandbox is running, for exec as for a second snapshot. */
	CHECK(sb_exec("a", "cat memory", out, sizeof(out)) == 0);
	registry_refuse(false);
	CHECK_REG_SB("a", SB_RUNNING);
	CHECK_REG_SNAP(snap, SNAP_COMPLETED);
	CHECK_EVENTS("a", "created starting running snapshotting running");
	CHECK(sb_snapshot("a", snap) == 0);
}

/* Terminate while the registry refuses writes: terminated, and the registry too after. */
static void refused_terminate_steps(void)
{
	struct err e = {0};
	CHECK(run_sandbox("b"));
	CHECK(ops_sandbox_create(root, "c", &e) == 0);
	char cid[RUNTIME_ID_MAX];
	xsnprintf(cid, sizeof(cid), "%s", sb_get("b").runtime_id);
	registry_refuse(true);
	CHECK(sb_terminate("b") == 0);
	CHECK(sb_terminate("c") == 0);
	CHECK_SB("b", SB_TERMINATED);
	CHECK_SB("c", SB_TERMINATED);
	CHECK(!fake_has(cid));
	CHECK(registry_state(false, "b") == SB_RUNNING);
	registry_refuse(false);
	CHECK_REG_SB("b", SB_TERMINATED);
	CHECK_REG_SB("c", SB_TERMINATED);
	CHECK_EVENTS("b", "created starting running terminating terminated");
}

/*
 * When even the memory cannot keep the row (REGISTRY_PENDING_MAX rows wait
 * already), a snapshot's `completed` is not recorded: its writer is told
 * it failed, its wait ends, and nobody reads it completed.
 */
static void refused_full_steps(void)
{
	char snap[ID_MAX], id[ID_MAX];
	struct err e = {0};
	struct op *job = op_new(), *snap_wait = op_new();
	enum { FILLERS = 300 }; /* more than REGISTRY_PENDING_MAX */
	for (int i = 0; i < FILLERS; i++) {
		xsnprintf(id, sizeof(id), "fill-%d", i);
		CHECK(ops_sandbox_create(root, id, &e) == 0);
	}
	CHECK(run_sandbox("d"));
	begin_blocked("d", begin_snapshot, job, "checkpoint", SB_SNAPSHOTTING,
		      "created starting running snapshotting");
	newest_of("d", snap);
	CHECK(ops_snapshot_wait(root, snap, op_done, snap_wait, &e) == 0);
	registry_refuse(true);
	int kept = 0;
	for (int i = 0; i < FILLERS; i++) {
		xsnprintf(id, sizeof(id), "fill-%d", i);
		if (ops_sandbox_set(root, id, SB_FIELD_ENTRYPOINT, "sleep 1", &e) < 0)
			break;
		kept++;
	}
	CHECK_MSG(kept > 0 && kept < FILLERS, "%d of %d updates kept", kept, FILLERS);
	fake_release();
	CHECK(op_wait(job, NULL, 0) < 0);
	CHECK(op_wait(snap_wait, NULL, 0) < 0);
	CHECK(snap_get(snap).state != SNAP_COMPLETED);
	registry_refuse(false);
	CHECK_REG_SB("fill-0", SB_CREATED);
	xsnprintf(id, sizeof(id), "fill-%d", kept - 1);
	CHECK_STR(sb_get(id).entrypoint, "sleep 1");
	CHECK(registry_state(true, snap) != SNAP_COMPLETED);
	/* Whatever was lost, terminate takes the sandbox from the state it is left in. */
	CHECK(sb_terminate("d") == 0);
	CHECK_REG_SB("d", SB_TERMINATED);
}

/*
 * A resume and a fork while the registry refuses writes fail with EIO
 * before runsc restores anything: the container id they would restore into
 * can only be kept in memory, and a kill -9 then would leave start-up
 * reading the old id, undoing the sandbox and orphaning the container.
 */
static void refused_restore_steps(void)
{
	char snap[ID_MAX], fork_id[ID_MAX];
	CHECK(run_sandbox("e"));
	CHECK(sb_snapshot("e", snap) == 0);
	CHECK(sb_suspend("e") == 0);
	char cid[RUNTIME_ID_MAX];
	xsnprintf(cid, sizeof(cid), "%s", sb_get("e").runtime_id);
	int restores = fake_calls("restore");
	registry_refuse(true);
	CHECK(sb_resume("e") == -EIO);
	CHECK(snap_fork(snap, fork_id) == -EIO);
	CHECK_MSG(fake_calls("restore") == restores, "%d restores run while the registry refused",
		  fake_calls("restore") - restores);
	CHECK_SB("e", SB_SUSPENDED);
	CHECK_STR(sb_get("e").runtime_id, cid);
	CHECK_SB(fork_id, SB_FAILED);
	CHECK(registry_state(false, "e") == SB_SUSPENDED);
	registry_refuse(false);
	CHECK_REG_SB("e", SB_SUSPENDED);
	CHECK(sb_resume("e") == 0);
	CHECK(fake_calls("restore") == restores + 1);
	CHECK_SB("e", SB_RUNNING);
}

int main(void)
{
	if (!t_ops_begin("test_ops_refused"))
		return t_done() || 1;
	one_life("refused-job", refused_job_steps, NULL);
	one_life("refused-terminate", refused_terminate_steps, NULL);
	one_life("refused-full", refused_full_steps, NULL);
	one_life("refused-restore", refused_restore_steps, NULL);
	return t_ops_done("test_ops_refused");
}
