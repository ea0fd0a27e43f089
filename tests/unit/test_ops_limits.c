/*
 * test_ops_limits.c - resource limits in the bundle, and the spool's room
 * reserved by parallel checkpoints and checked again before a store.
 *
 * The harness (lives, scenarios, the fake runsc) is tests/unit/t_ops.h.
 */
#include "tests/unit/t_ops.h"

/* linux.resources.memory.limit in the bundle of sandbox @id (0 without one). */
static double bundle_memory(const char *id)
{
	char path[PATH_MAX], *text = NULL;
	size_t len;
	xsnprintf(path, sizeof(path), "%s/sandboxes/%s/bundle/config.json", state, id);
	if (!CHECK(read_file(path, &text, &len, 1 << 20) == 0))
		return -1;
	cJSON *cfg = cJSON_Parse(text);
	free(text);
	cJSON *res = cJSON_GetObjectItem(cJSON_GetObjectItem(cfg, "linux"), "resources");
	double v =
	    cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(res, "memory"), "limit"));
	cJSON_Delete(cfg);
	return v != v ? 0 : v; /* NaN: no such member */
}

/*
 * Limits: set while created (a bad one EINVAL with a sentence), fixed
 * after start, recorded in its snapshots, kept by a fork and a resume,
 * raised by a fork's words and never lowered; every bundle has them.
 */
static void limits_steps(void)
{
	struct err e = {0};
	char snap[ID_MAX], f1[ID_MAX], f2[ID_MAX];
	make_sandbox("lm");
	CHECK(ops_sandbox_set(root, "lm", SB_FIELD_MEMORY, "-1", &e) == -EINVAL);
	CHECK(strstr(e.msg, "bad memory for sandbox lm") != NULL);
	CHECK(ops_sandbox_set(root, "lm", SB_FIELD_PIDS, "abc", &e) == -EINVAL);
	CHECK(ops_sandbox_set(root, "lm", SB_FIELD_MEMORY, "256M\n", &e) == 0);
	CHECK(ops_sandbox_set(root, "lm", SB_FIELD_CPUS, "0.5", &e) == 0);
	CHECK(sb_start("lm") == 0);
	CHECK(ops_sandbox_set(root, "lm", SB_FIELD_MEMORY, "512M", &e) == -EBUSY);
	CHECK(bundle_memory("lm") == 256 << 20);
	CHECK(sb_snapshot("lm", snap) == 0);
	struct snapshot sn = snap_get(snap);
	CHECK(sn.res.memory_bytes == 256 << 20 && sn.res.cpu_milli == 500 && sn.res.pids == 0);
	CHECK(snap_fork(snap, f1) == 0);
	CHECK(sb_get(f1).res.memory_bytes == 256 << 20 && sb_get(f1).res.cpu_milli == 500);
	CHECK(bundle_memory(f1) == 256 << 20);
	struct fork_opts lower = {.raise = {128 << 20, RES_UNSET, RES_UNSET}};
	e = (struct err){0};
	CHECK(ops_snapshot_fork(root, snap, &lower, f2, op_done, NULL, &e) == -EINVAL);
	CHECK(strstr(e.msg, "memory may only be raised") != NULL);
	struct fork_opts raise = {.raise = {512 << 20, 1000, RES_UNSET}};
	CHECK(OP_RUN(ops_snapshot_fork(root, snap, &raise, f2, OP), NULL, 0) == 0);
	CHECK_SB(f2, SB_RUNNING);
	CHECK(sb_get(f2).res.memory_bytes == 512 << 20 && sb_get(f2).res.cpu_milli == 1000);
	CHECK(bundle_memory(f2) == 512 << 20);
	CHECK(sb_suspend(f2) == 0 && sb_resume(f2) == 0);
	CHECK(sb_get(f2).res.memory_bytes == 512 << 20);
	CHECK(bundle_memory(f2) == 512 << 20);
}

/*
 * Parallel checkpoints share the spool: on a 100 MiB one, two sandboxes
 * that each fit (64 MiB of margin and a fake's few pages) do not together.
 * While the first's checkpoint runs the second is refused with ENOSPC, and
 * both run on; once the first ended, the second fits again.
 */
static void spool_reserve_steps(void)
{
	char snap[ID_MAX], other[ID_MAX];
	struct op *first = op_new();
	struct err e = {0};
	CHECK(run_sandbox("p1") && run_sandbox("p2"));
	fake_set("FAKE_RUNSC_HANG=checkpoint");
	CHECK(ops_sandbox_snapshot(root, "p1", NULL, snap, op_done, first, &e) == 0);
	fake_wait_hangs("checkpoint", 1);
	fake_set("");
	int rc = OP_RUN(ops_sandbox_snapshot(root, "p2", NULL, other, OP), NULL, 0);
	CHECK_MSG(rc == -ENOSPC, "a second checkpoint on the full spool: %d, not -ENOSPC", rc);
	fake_release();
	CHECK(op_wait(first, NULL, 0) == 0);
	CHECK_SNAP(snap, SNAP_COMPLETED);
	CHECK_SB("p1", SB_RUNNING);
	CHECK_SB("p2", SB_RUNNING);
	CHECK(sb_snapshot("p2", other) == 0);
	CHECK_SB("p2", SB_RUNNING);
}

static void spool_reserve(void)
{
	char dir[PATH_MAX];
	scenario("spool-reserve");
	if (!t_tmpfs("spool-reserve/spool", "100m", dir)) {
		scenario_end();
		return;
	}
	spool_parent = dir;
	life(spool_reserve_steps);
	spool_parent = NULL;
	scenario_end();
	umount2(dir, MNT_DETACH);
}

/*
 * What a checkpoint reserves in the spool is its sandbox's memory limit
 * where it has one, not its resident memory at the request (security-3
 * N12), and the job checks the spool again as it starts. On a 330 MiB
 * spool: a sandbox limited to 512 MiB is refused at once (its timeout's
 * suspend then terminates it, the refusal being for good); four
 * checkpoints hung in the fake take every worker and 4 x 64 MiB, a fifth
 * is queued, and once 280 MiB is written into the spool the fifth fails as
 * it starts, its sandbox running on.
 */
static void spool_recheck_steps(void)
{
	char snaps[4][ID_MAX], late[ID_MAX], path[PATH_MAX];
	const char *ids[] = {"r1", "r2", "r3", "r4"};
	struct op *ops_[4], *waiting = op_new();
	struct err e = {0};
	make_sandbox("big");
	CHECK(ops_sandbox_set(root, "big", SB_FIELD_MEMORY, "512M", &e) == 0);
	CHECK(sb_start("big") == 0);
	int rc = OP_RUN(ops_sandbox_snapshot(root, "big", NULL, late, OP), NULL, 0);
	CHECK_MSG(rc == -ENOSPC, "a 512 MiB sandbox's checkpoint on a 330 MiB spool: %d", rc);
	CHECK_SB("big", SB_RUNNING);
	CHECK(ops_sandbox_set_timeout(root, "big", "1 suspend", &e) == 0);
	sb_wait_state("big", SB_TERMINATED);
	CHECK(journal_has("events.jsonl",
			  "\"status\":\"terminating\",\"reason\":\"timeout-suspend-failed\""));
	CHECK_HAS(sb_get("big").message, "the spool");
	CHECK(!fake_called_cmd("checkpoint"));

	CHECK(run_sandbox("r5"));
	fake_set("FAKE_RUNSC_HANG=checkpoint");
	for (int i = 0; i < 4; i++) {
		ops_[i] = op_new();
		CHECK(run_sandbox(ids[i]));
		CHECK(ops_sandbox_snapshot(root, ids[i], NULL, snaps[i], op_done, ops_[i], &e) ==
		      0);
	}
	fake_wait_hangs("checkpoint", 4);
	fake_set("");
	CHECK(ops_sandbox_snapshot(root, "r5", NULL, late, op_done, waiting, &e) == 0);
	xsnprintf(path, sizeof(path), "%s/filler", spool_parent);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0 && posix_fallocate(fd, 0, 280ll << 20) == 0);
	if (fd >= 0)
		close(fd);
	fake_release();
	for (int i = 0; i < 4; i++)
		CHECK(op_wait(ops_[i], NULL, 0) == 0);
	rc = op_wait(waiting, NULL, 0);
	CHECK_MSG(rc == -ENOSPC, "the queued checkpoint, the spool filled meanwhile: %d", rc);
	CHECK_SNAP(late, SNAP_FAILED);
	CHECK_HAS(snap_get(late).message, "as the checkpoint starts");
	CHECK_SB("r5", SB_RUNNING);
	unlink(path);
	CHECK(sb_snapshot("r5", late) == 0); /* room again */
}

static void spool_recheck(void)
{
	char dir[PATH_MAX];
	scenario("spool-recheck");
	if (!t_tmpfs("spool-recheck/spool", "330m", dir)) {
		scenario_end();
		return;
	}
	spool_parent = dir;
	life(spool_recheck_steps);
	spool_parent = NULL;
	scenario_end();
	umount2(dir, MNT_DETACH);
}

int main(void)
{
	if (!t_ops_begin("test_ops_limits"))
		return t_done() || 1;
	one_life("limits", limits_steps, NULL);
	spool_reserve();
	spool_recheck();
	return t_ops_done("test_ops_limits");
}
