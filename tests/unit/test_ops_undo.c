/*
 * test_ops_undo.c - the undo of each failing runsc command (run, checkpoint,
 * restore, kill, exec).
 *
 * The harness (lives, scenarios, the fake runsc) is tests/unit/t_ops.h.
 */
#include "tests/unit/t_ops.h"

/* --- the undo of each failing runsc command ------------------------------ */

/* A failed run: failed, the container deleted, the reason in `errors` and the sandbox. */
static void undo_start(void)
{
	char line[128];
	make_sandbox("u1");
	fake_set("FAKE_RUNSC_FAIL=run");
	CHECK(sb_start("u1") == -EIO);
	fake_set("");
	CHECK_SB("u1", SB_FAILED);
	CHECK_EVENTS("u1", "created starting failed");
	struct sandbox sb = sb_get("u1");
	CHECK_HAS(sb.message, "runsc run failed");
	CHECK_HAS(sb.message, "FAKE_RUNSC_FAIL");
	xsnprintf(line, sizeof(line), "delete --force %s", sb.runtime_id);
	CHECK_MSG(fake_called(line), "no call \"%s\"", line);
	CHECK(!fake_has(sb.runtime_id));
	CHECK(journal_has("errors.jsonl", "sandboxes/u1/start"));
}

/* A failed checkpoint: the snapshot failed, its spool gone; the sandbox as runsc left it. */
static void undo_checkpoint(const char *id, bool suspend, const char *fake, int want)
{
	char snap[ID_MAX], path[PATH_MAX], mem[64], out[64];
	CHECK(run_sandbox(id));
	memory_of(id, mem, sizeof(mem));
	fake_set(fake);
	CHECK((suspend ? sb_suspend(id) : sb_snapshot(id, snap)) < 0);
	fake_set("");
	newest_of(id, snap);
	CHECK_SNAP(snap, SNAP_FAILED);
	CHECK_EVENTS(snap, "pending in_progress failed");
	CHECK_HAS(snap_get(snap).message, "runsc checkpoint failed");
	xsnprintf(path, sizeof(path), "%s/spool/%s", state, snap);
	CHECK(access(path, F_OK) < 0);
	CHECK_SB(id, want);
	CHECK_STR(sb_get(id).restore_snapshot, "");
	if (want != SB_RUNNING)
		return;
	memory_of(id, out, sizeof(out));
	CHECK_STR(out, mem);
	CHECK(sb_snapshot(id, snap) == 0); /* and it can be tried again */
}

/*
 * A failed restore of a fork (the second: the first is left to succeed):
 * the fork failed, its container deleted, the snapshot free again.
 */
static void undo_fork(const char *snap)
{
	char id[ID_MAX] = "", line[128];
	fake_set("FAKE_RUNSC_FAIL=restore FAKE_RUNSC_FAIL_AFTER=1");
	CHECK(snap_fork(snap, id) == 0);
	CHECK_SB(id, SB_RUNNING);
	CHECK(snap_fork(snap, id) < 0);
	fake_set("");
	CHECK_SB(id, SB_FAILED);
	CHECK_EVENTS(id, "starting failed");
	struct sandbox sb = sb_get(id);
	CHECK_HAS(sb.message, "runsc restore failed");
	xsnprintf(line, sizeof(line), "delete --force %s", sb.runtime_id);
	CHECK_MSG(fake_called(line), "no call \"%s\"", line);
	CHECK(!fake_has(sb.runtime_id));
	CHECK_SNAP(snap, SNAP_COMPLETED);
	CHECK(snap_delete(snap) == 0); /* no restore of it is counted any more */
}

/* A failed restore of a resume: suspended again, and a second resume works. */
static void undo_resume(const char *id)
{
	char mem[64], out[64];
	CHECK(run_sandbox(id));
	memory_of(id, mem, sizeof(mem));
	CHECK(sb_suspend(id) == 0);
	struct sandbox before = sb_get(id);
	fake_set("FAKE_RUNSC_FAIL=restore");
	CHECK(sb_resume(id) < 0);
	fake_set("");
	CHECK_SB(id, SB_SUSPENDED);
	CHECK_STR(sb_get(id).restore_snapshot, before.restore_snapshot);
	CHECK_HAS(sb_get(id).message, "runsc restore failed");
	CHECK(sb_resume(id) == 0);
	CHECK_SB(id, SB_RUNNING);
	memory_of(id, out, sizeof(out));
	CHECK_STR(out, mem);
	CHECK_EVENTS(id, "created starting running suspending suspended resuming suspended "
			 "resuming running");
}

/* A failed delete: the terminate fails, the sandbox is failed; a second terminate ends it. */
static void undo_terminate(const char *id)
{
	CHECK(run_sandbox(id));
	const struct sandbox sb = sb_get(id);
	fake_set("FAKE_RUNSC_FAIL=delete");
	CHECK(sb_terminate(id) < 0);
	fake_set("");
	CHECK_SB(id, SB_FAILED);
	CHECK_HAS(sb_get(id).message, "runsc delete failed");
	CHECK(fake_has(sb.runtime_id));
	CHECK(sb_terminate(id) == 0);
	CHECK_SB(id, SB_TERMINATED);
	CHECK(!fake_has(sb.runtime_id));
	CHECK_EVENTS(id, "created starting running terminating failed terminating terminated");
}

/* A failed exec: its exit line says so, and the sandbox runs on. */
static void undo_exec(const char *id)
{
	char out[RESULT_MAX];
	fake_set("FAKE_RUNSC_FAIL=exec");
	CHECK(sb_exec(id, "true", out, sizeof(out)) == 0);
	fake_set("");
	size_t n = strlen(out);
	CHECK_MSG(n >= 9 && !strcmp(out + n - 9, "exit 128\n"), "exec result \"%s\"", out);
	CHECK_SB(id, SB_RUNNING);
}

/* The command ran but its output could not be read back: the result says so, under its exit. */
static void undo_exec_fetch(const char *id)
{
	char out[RESULT_MAX], path[PATH_MAX];
	/* The fake counts each subcommand's calls made while it is listed: from 0 again. */
	xsnprintf(path, sizeof(path), "%s/calls/exec", fake_dir);
	unlink(path);
	fake_set("FAKE_RUNSC_FAIL=exec FAKE_RUNSC_FAIL_AFTER=1");
	CHECK(sb_exec(id, "true", out, sizeof(out)) == 0);
	fake_set("");
	CHECK_MSG(strstr(out, "reading the output back failed") != NULL, "exec result \"%s\"", out);
	size_t n = strlen(out);
	CHECK_MSG(n >= 7 && !strcmp(out + n - 7, "exit 0\n"), "exec result \"%s\"", out);
	CHECK_SB(id, SB_RUNNING);
}

static void undo_steps(void)
{
	char snap[ID_MAX];
	undo_start();
	undo_checkpoint("u2", false, "FAKE_RUNSC_FAIL=checkpoint", SB_RUNNING);
	undo_checkpoint("u3", false, "FAKE_RUNSC_FAIL=checkpoint FAKE_RUNSC_FAIL_KILL=1",
			SB_FAILED);
	undo_checkpoint("u4", true, "FAKE_RUNSC_FAIL=checkpoint", SB_RUNNING);
	undo_checkpoint("u5", true, "FAKE_RUNSC_FAIL=checkpoint FAKE_RUNSC_FAIL_KILL=1", SB_FAILED);
	/* Paused by its suspend and never resumed: stopped, not left holding its memory. */
	undo_checkpoint("u8", true, "FAKE_RUNSC_FAIL=checkpoint,resume", SB_FAILED);
	CHECK_HAS(sb_get("u8").message, "would not resume and was stopped");
	CHECK(!fake_has(sb_get("u8").runtime_id));
	CHECK_EVENTS("u2", "created starting running snapshotting running snapshotting running");
	CHECK_EVENTS("u3", "created starting running snapshotting failed");
	CHECK_EVENTS("u4", "created starting running suspending running snapshotting running");
	CHECK_EVENTS("u5", "created starting running suspending failed");
	newest_of("u2", snap);
	undo_fork(snap);
	undo_resume("u6");
	undo_terminate("u7");
	undo_exec("u6");
	undo_exec_fetch("u6");
}

int main(void)
{
	if (!t_ops_begin("test_ops_undo"))
		return t_done() || 1;
	one_life("undo", undo_steps, NULL);
	return t_ops_done("test_ops_undo");
}
