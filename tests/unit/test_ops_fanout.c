/*
 * test_ops_fanout.c - count=N forks from one call (ops/ops_fanout.c).
 *
 * The harness (lives, scenarios, the fake runsc) is tests/unit/t_ops.h.
 */
#include "tests/unit/t_ops.h"

/*
 * count=N (ops/ops_fanout.c): N forks from one call, their ids a line
 * each; the third of three restores failing leaves two running, fails the
 * call with its errno and sums it up in `errors`; a count out of 1..100 is
 * EINVAL before anything is made.
 */
static void fanout_steps(void)
{
	char snap[ID_MAX], ids[RESULT_MAX];
	struct err e = {0};
	struct fork_opts opts = {0};
	_cleanup_strbuf_ struct strbuf made = STRBUF_INIT;
	CHECK(run_sandbox("fan"));
	CHECK(sb_snapshot("fan", snap) == 0);
	CHECK(ops_fork_count_parse("0", &opts.count, &e) == -EINVAL);
	CHECK(ops_fork_count_parse("101", &opts.count, &e) == -EINVAL);
	CHECK(ops_fork_count_parse("4x", &opts.count, &e) == -EINVAL);
	CHECK(ops_fork_count_parse("-1", &opts.count, &e) == -EINVAL);
	CHECK(ops_fork_count_parse("100", &opts.count, &e) == 0 && opts.count == 100);
	opts.count = 101;
	CHECK(ops_snapshot_forks(root, snap, &opts, &made, op_done, NULL, &e) == -EINVAL);
	CHECK(made.len == 0);

	opts.count = 4;
	CHECK(OP_RUN(ops_snapshot_forks(root, snap, &opts, &made, OP), NULL, 0) == 0);
	xsnprintf(ids, sizeof(ids), "%s", strbuf_str(&made));
	int n = 0;
	for (char *save = NULL, *id = strtok_r(ids, "\n", &save); id;
	     id = strtok_r(NULL, "\n", &save)) {
		CHECK_SB(id, SB_RUNNING);
		CHECK_STR(sb_get(id).parent_snapshot, snap);
		n++;
	}
	CHECK(n == 4);

	strbuf_reset(&made);
	opts.count = 3;
	fake_set("FAKE_RUNSC_FAIL=restore FAKE_RUNSC_FAIL_AFTER=2");
	int restores = fake_calls("restore");
	CHECK(OP_RUN(ops_snapshot_forks(root, snap, &opts, &made, OP), NULL, 0) == -EIO);
	fake_set("");
	CHECK(fake_calls("restore") == restores + 3);
	xsnprintf(ids, sizeof(ids), "%s", strbuf_str(&made));
	int running = 0, failed = 0;
	n = 0;
	for (char *save = NULL, *id = strtok_r(ids, "\n", &save); id;
	     id = strtok_r(NULL, "\n", &save)) {
		enum sandbox_state st = sb_get(id).state;
		running += st == SB_RUNNING;
		failed += st == SB_FAILED;
		n++;
	}
	CHECK(n == 3 && running == 2 && failed == 1);
	char line[128];
	xsnprintf(line, sizeof(line), "1 of 3 forks of snapshot %s failed: sbx-", snap);
	CHECK(journal_has("errors.jsonl", line));
	CHECK(journal_has("errors.jsonl", "runsc restore failed"));

	/* Not in the cache any more: the four forks materialize it once and share it. */
	char dir[PATH_MAX], line2[128];
	xsnprintf(dir, sizeof(dir), "%s/cache/%s", state, snap);
	CHECK(rm_rf(dir) == 0);
	strbuf_reset(&made);
	opts.count = 4;
	CHECK(OP_RUN(ops_snapshot_forks(root, snap, &opts, &made, OP), NULL, 0) == 0);
	xsnprintf(line2, sizeof(line2), "materialized snapshot %s:", snap);
	CHECK_MSG(log_count(line2) == 1, "%d materializes of %s", log_count(line2), snap);

	/* Its packs gone: the four forks' one materialization fails, and they all fail with it. */
	char packs[PATH_MAX];
	xsnprintf(packs, sizeof(packs), "%s/store/packs", state);
	CHECK(rm_rf(dir) == 0 && rm_rf(packs) == 0);
	strbuf_reset(&made);
	int tries = log_count("cannot materialize snapshot");
	CHECK(OP_RUN(ops_snapshot_forks(root, snap, &opts, &made, OP), NULL, 0) < 0);
	CHECK_MSG(log_count("cannot materialize snapshot") - tries == 1,
		  "%d materializations failed", log_count("cannot materialize snapshot") - tries);
}

int main(void)
{
	if (!t_ops_begin("test_ops_fanout"))
		return t_done() || 1;
	one_life("fanout", fanout_steps, NULL);
	return t_ops_done("test_ops_fanout");
}
