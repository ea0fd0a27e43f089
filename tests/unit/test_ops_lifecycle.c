/*
 * test_ops_lifecycle.c - the life cycle of a sandbox and a snapshot
 * (created, starting, running, snapshotting, suspended, forks, exit,
 * terminate and remove) and a daemon restart that keeps it.
 *
 * The harness (lives, scenarios, the fake runsc) is tests/unit/t_ops.h.
 */
#include "tests/unit/t_ops.h"

/* --- the life cycle ------------------------------------------------------- */

/* created -> starting -> running, and what a running sandbox answers. */
static void check_start(const char *id, char mem[64])
{
	char out[RESULT_MAX], want[RESULT_MAX];
	struct err e = {0};
	make_sandbox(id);
	CHECK_SB(id, SB_CREATED);
	CHECK(ops_sandbox_create(root, id, &e) == -EEXIST);
	CHECK(sb_start(id) == 0);
	CHECK_SB(id, SB_RUNNING);
	CHECK_EVENTS(id, "created starting running");
	struct sandbox sb = sb_get(id);
	CHECK(sb.pid > 0);
	CHECK(str_has_prefix(sb.image_digest, "sha256:"));
	fake_read(sb.runtime_id, "status", out, sizeof(out));
	CHECK_STR(out, "running");
	CHECK(sb_start(id) == -EBUSY);
	memory_of(id, mem, 64);
	CHECK(mem[0] != '\0');
	CHECK(sb_exec(id, "cat memory", out, sizeof(out)) == 0);
	xsnprintf(want, sizeof(want), "%s\nexit 0\n", mem);
	CHECK_STR(out, want);
	CHECK(OP_RUN(ops_sandbox_wait(root, id, OP), out, sizeof(out)) == 0);
	CHECK_STR(out, "running\n");
}

/* running -> snapshotting -> running; the snapshot pending -> in_progress -> completed. */
static void check_snapshot(const char *id, const char *mem, char snap[ID_MAX])
{
	char line[PATH_MAX + 128], out[RESULT_MAX];
	struct sandbox before = sb_get(id);
	CHECK(sb_snapshot(id, snap) == 0);
	CHECK_SNAP(snap, SNAP_COMPLETED);
	CHECK_EVENTS(snap, "pending in_progress completed");
	CHECK_EVENTS(id, "created starting running snapshotting running");
	struct snapshot s = snap_get(snap);
	CHECK(s.kind == SNAP_KIND_SNAPSHOT);
	CHECK(s.size_bytes > 0);
	CHECK_STR(s.sandbox_id, id);
	CHECK_STR(sb_get(id).runtime_id, before.runtime_id);
	memory_of(id, out, sizeof(out));
	CHECK_STR(out, mem);
	xsnprintf(line, sizeof(line),
		  "checkpoint --compression=none --image-path %s/spool/%s "
		  "--leave-running %s",
		  state, snap, before.runtime_id);
	CHECK_MSG(fake_called(line), "no call \"%s\"", line);
	CHECK(OP_RUN(ops_snapshot_wait(root, snap, OP), out, sizeof(out)) == 0);
	CHECK_STR(out, "completed\n");
}

/* A fork of @snap: starting -> running, with the snapshot's memory. */
static void check_fork(const char *snap, const char *mem, char fork_id[ID_MAX])
{
	char out[64];
	CHECK(snap_fork(snap, fork_id) == 0);
	CHECK_SB(fork_id, SB_RUNNING);
	CHECK_EVENTS(fork_id, "starting running");
	CHECK_STR(sb_get(fork_id).parent_snapshot, snap);
	memory_of(fork_id, out, sizeof(out));
	CHECK_STR(out, mem);
}

/* running -> suspending -> suspended -> resuming -> running, the memory kept. */
static void check_suspend_resume(const char *id, const char *mem)
{
	char out[64];
	struct sandbox before = sb_get(id);
	CHECK(sb_suspend(id) == 0);
	CHECK_SB(id, SB_SUSPENDED);
	struct sandbox sb = sb_get(id);
	CHECK_SNAP(sb.restore_snapshot, SNAP_COMPLETED);
	CHECK(snap_get(sb.restore_snapshot).kind == SNAP_KIND_SUSPEND);
	CHECK(sb.pid == 0);
	CHECK(!fake_has(before.runtime_id));
	CHECK(snap_delete(sb.restore_snapshot) == -EBUSY);
	CHECK(sb_snapshot(id, out) == -EBUSY);
	CHECK(sb_resume(id) == 0);
	CHECK_SB(id, SB_RUNNING);
	struct sandbox after = sb_get(id);
	CHECK(strcmp(after.runtime_id, before.runtime_id) != 0);
	CHECK_STR(after.restore_snapshot, "");
	CHECK(after.pid > 0);
	memory_of(id, out, sizeof(out));
	CHECK_STR(out, mem);
	CHECK(sb_resume(id) == -EBUSY);
	CHECK_EVENTS(id, "created starting running snapshotting running suspending suspended "
			 "resuming running");
}

/* running -> terminating -> terminated, then removed. */
static void check_terminate_remove(const char *id)
{
	struct err e = {0};
	struct sandbox before = sb_get(id);
	CHECK(ops_sandbox_remove(root, id, &e) == -EBUSY);
	CHECK_SB(id, SB_RUNNING);
	CHECK(sb_terminate(id) == 0);
	CHECK_SB(id, SB_TERMINATED);
	CHECK(!fake_has(before.runtime_id));
	CHECK(sb_get(id).pid == 0);
	CHECK(ops_sandbox_remove(root, id, &e) == 0);
	CHECK(registry_sandbox_get(ops_registry(), id, &before) == -ENOENT);
	CHECK(OP_RUN(ops_sandbox_wait(root, id, OP), NULL, 0) == -ENOENT);
}

/* The monitor: a running sandbox whose process exits becomes terminated. */
static void check_exit(const char *id)
{
	char pid[32];
	fake_read(sb_get(id).runtime_id, "pid", pid, sizeof(pid));
	CHECK(atoi(pid) > 0 && kill(atoi(pid), SIGKILL) == 0);
	if (sb_wait_state(id, SB_TERMINATED))
		CHECK_HAS(sb_get(id).message, "process exited");
	CHECK_EVENTS(id, "starting running terminated");
}

/*
 * An entrypoint that ends before the start returns (runsc then names no
 * pid): terminated all the same. It stayed running, pid 0, before the pid
 * came from runsc's --pid-file.
 */
static void check_exit_at_once(const char *id)
{
	fake_set("FAKE_RUNSC_SANDBOX_SECONDS=0");
	make_sandbox(id);
	int rc = sb_start(id);
	fake_set("");
	CHECK(rc == 0);
	CHECK(sb_wait_state(id, SB_TERMINATED));
	CHECK_EVENTS(id, "created starting running terminated");
}

static void lifecycle_steps(void)
{
	char mem[64], snap[ID_MAX], fork_id[ID_MAX], id[ID_MAX];
	struct sandbox_spec spec = {.image = IMAGE};
	check_start("a", mem);
	check_snapshot("a", mem, snap);
	check_fork(snap, mem, fork_id);
	check_suspend_resume("a", mem);
	check_terminate_remove("a");
	CHECK_EVENTS("a", "created starting running snapshotting running suspending suspended "
			  "resuming running terminating terminated removed");
	check_exit(fork_id);
	check_exit_at_once("quick");
	CHECK(snap_delete(snap) == 0);
	CHECK_SNAP(snap, -1);
	CHECK_EVENTS(snap, "pending in_progress completed deleted");
	CHECK(OP_RUN(ops_sandbox_new(root, &spec, id, OP), NULL, 0) == 0);
	CHECK_SB(id, SB_RUNNING);
	CHECK_EVENTS(id, "created starting running");
	note_put("new", id);
}

/* The next life: a running sandbox is running still, and answers. */
static void restart_steps(void)
{
	char id[ID_MAX], mem[64], out[RESULT_MAX], want[RESULT_MAX];
	note_get("new", id, sizeof(id));
	CHECK_SB(id, SB_RUNNING);
	memory_of(id, mem, sizeof(mem));
	CHECK(sb_exec(id, "cat memory", out, sizeof(out)) == 0);
	xsnprintf(want, sizeof(want), "%s\nexit 0\n", mem);
	CHECK_STR(out, want);
	CHECK(sb_terminate(id) == 0);
	CHECK_EVENTS(id, "created starting running terminating terminated");
}

int main(void)
{
	if (!t_ops_begin("test_ops_lifecycle"))
		return t_done() || 1;
	one_life("lifecycle", lifecycle_steps, restart_steps);
	return t_ops_done("test_ops_lifecycle");
}
