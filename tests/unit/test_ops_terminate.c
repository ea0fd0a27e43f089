/*
 * test_ops_terminate.c - terminate from every state: settled ones and each
 * transitional one, its runsc call blocked in the fake.
 *
 * The harness (lives, scenarios, the fake runsc) is tests/unit/t_ops.h.
 */
#include "tests/unit/t_ops.h"

/* --- terminate from every state ------------------------------------------- */

static void terminate_settled_steps(void)
{
	struct err e = {0};
	char snap[ID_MAX];
	CHECK(ops_sandbox_create(root, "c", &e) == 0);
	CHECK(sb_terminate("c") == 0);
	CHECK(sb_terminate("c") == 0);
	CHECK_SB("c", SB_TERMINATED);
	CHECK_EVENTS("c", "created terminating terminated terminating terminated");
	CHECK(run_sandbox("s") && sb_suspend("s") == 0);
	xsnprintf(snap, sizeof(snap), "%s", sb_get("s").restore_snapshot);
	CHECK(sb_terminate("s") == 0);
	CHECK_SB("s", SB_TERMINATED);
	CHECK_STR(sb_get("s").restore_snapshot, "");
	CHECK_EVENTS("s", "created starting running suspending suspended terminating terminated");
	CHECK(snap_delete(snap) == 0); /* no longer pinned */
	make_sandbox("f");
	fake_set("FAKE_RUNSC_FAIL=run");
	CHECK(sb_start("f") < 0);
	fake_set("");
	CHECK(sb_terminate("f") == 0);
	CHECK_EVENTS("f", "created starting failed terminating terminated");
}

/*
 * Terminate sandbox @id while the runsc @cmd of @begin on it is blocked:
 * the call is cancelled, and the job that made it leaves the sandbox to the
 * terminate. Then @id's transitions are @events, then terminating and
 * terminated.
 */
static void terminate_during(const char *id, begin_fn begin, const char *cmd,
			     enum sandbox_state during, const char *events)
{
	char want[512];
	struct op *op = op_new();
	begin_blocked(id, begin, op, cmd, during, events);
	CHECK(sb_terminate(id) == 0);
	CHECK(op_wait(op, NULL, 0) < 0);
	CHECK_SB(id, SB_TERMINATED);
	xsnprintf(want, sizeof(want), "%s terminating terminated", events);
	CHECK_EVENTS(id, want);
	CHECK(!fake_has(sb_get(id).runtime_id));
	fake_release();
}

static void terminate_transitional_steps(void)
{
	char snap[ID_MAX];
	make_sandbox("x");
	terminate_during("x", begin_start, "run", SB_STARTING, "created starting");
	CHECK(run_sandbox("y"));
	terminate_during("y", begin_snapshot, "checkpoint", SB_SNAPSHOTTING,
			 "created starting running snapshotting");
	newest_of("y", snap);
	CHECK_SNAP(snap, SNAP_FAILED);
	CHECK_EVENTS(snap, "pending in_progress failed");
	CHECK(run_sandbox("z"));
	terminate_during("z", begin_suspend, "checkpoint", SB_SUSPENDING,
			 "created starting running suspending");
	newest_of("z", snap);
	CHECK_SNAP(snap, SNAP_FAILED);
	CHECK(run_sandbox("r") && sb_suspend("r") == 0);
	terminate_during("r", begin_resume, "restore", SB_RESUMING,
			 "created starting running suspending suspended resuming");
	CHECK_STR(sb_get("r").restore_snapshot, "");

	/* A second terminate while the first is blocked: both end, terminated. */
	struct op *op = op_new();
	CHECK(run_sandbox("w"));
	begin_blocked("w", begin_terminate, op, "kill", SB_TERMINATING,
		      "created starting running terminating");
	CHECK(sb_terminate("w") == 0);
	CHECK_SB("w", SB_TERMINATED);
	fake_release();
	CHECK(op_wait(op, NULL, 0) == 0);
	CHECK_SB("w", SB_TERMINATED);
	CHECK_EVENTS("w", "created starting running terminating terminated");
}

int main(void)
{
	if (!t_ops_begin("test_ops_terminate"))
		return t_done() || 1;
	one_life("terminate-settled", terminate_settled_steps, NULL);
	one_life("terminate-transitional", terminate_transitional_steps, NULL);
	return t_ops_done("test_ops_terminate");
}
