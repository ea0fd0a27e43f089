/*
 * test_ops_timer.c - the lifetime: timeouts (ops/ops_timer.c) while
 * transitional, their values, a failing suspend, and across a restart.
 *
 * The harness (lives, scenarios, the fake runsc) is tests/unit/t_ops.h.
 */
#include "tests/unit/t_ops.h"

/* --- the lifetime: timeouts (ops/ops_timer.c) ------------------------ */

/*
 * A deadline that passes while the sandbox is snapshotting (the checkpoint
 * blocked in the fake) waits for the snapshot, then fires: terminated, its
 * events giving the reason.
 */
static void timeout_transitional_steps(void)
{
	struct err e = {0};
	struct op *op = op_new();
	if (!run_sandbox("tt"))
		return;
	begin_blocked("tt", begin_snapshot, op, "checkpoint", SB_SNAPSHOTTING,
		      "created starting running snapshotting");
	CHECK(ops_sandbox_set_timeout(root, "tt", "1", &e) == 0);
	sleep_ms(1500); /* past the deadline, which must not take the sandbox from its job */
	CHECK_SB("tt", SB_SNAPSHOTTING);
	fake_release();
	CHECK(op_wait(op, NULL, 0) == 0);
	sb_wait_state("tt", SB_TERMINATED);
	CHECK_EVENTS("tt", "created starting running snapshotting running terminating terminated");
	CHECK(journal_has("events.jsonl", "\"status\":\"terminating\",\"reason\":\"timeout\""));
	CHECK(sb_get("tt").deadline_at == 0 || sb_get("tt").state == SB_TERMINATED);
}

/*
 * A timeout's suspend whose checkpoint always fails (security-3 N11): each
 * try leaves the sandbox running with its deadline due. After three tries,
 * 2 s then 4 s apart (not every 500 ms), the timeout terminates it instead,
 * and says why in its error, the errors journal and the events' reason.
 */
static void timeout_suspend_fails_steps(void)
{
	struct err e = {0};
	if (!run_sandbox("tf"))
		return;
	fake_set("FAKE_RUNSC_FAIL=checkpoint");
	int64_t t0 = now_ms();
	CHECK(ops_sandbox_set_timeout(root, "tf", "1 suspend", &e) == 0);
	sb_wait_state("tf", SB_TERMINATED);
	int64_t took = now_ms() - t0;
	fake_set("");
	int tries = fake_calls("checkpoint");
	CHECK_MSG(tries == 3, "the timeout's suspend was tried %d times, not 3", tries);
	CHECK_MSG(took >= 1000 + 2000 + 4000, "the tries were backed off: all in %lld ms",
		  (long long)took);
	CHECK_EVENTS("tf", "created starting running suspending running suspending running "
			   "suspending running terminating terminated");
	CHECK(journal_has("events.jsonl",
			  "\"status\":\"terminating\",\"reason\":\"timeout-suspend-failed\""));
	CHECK_HAS(sb_get("tf").message, "the suspend failed");
	CHECK_HAS(sb_get("tf").message, "runsc checkpoint failed");
	CHECK(journal_has("errors.jsonl", "the sandbox was terminated instead"));
	CHECK(sb_get("tf").deadline_at == 0);
}

/* Bad values are refused with a sentence; the spec and the fork take the same words. */
static void timeout_values_steps(void)
{
	struct err e = {0};
	int64_t s, keep;
	enum timeout_action a;
	make_sandbox("tv");
	const char *bad[] = {"1e99", "-1", "abc", "3 explode", "", "99999999999", "3 suspend x"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		memset(&e, 0, sizeof(e));
		CHECK(ops_sandbox_set_timeout(root, "tv", bad[i], &e) == -EINVAL);
		CHECK_MSG(e.msg[0] != '\0', "timeout '%s' is refused with a sentence", bad[i]);
	}
	CHECK(ops_timeout_parse("42 suspend", &s, &a, &e) == 0 && s == 42 && a == TIMEOUT_SUSPEND);
	CHECK(ops_timeout_parse("7", &s, &a, &e) == 0 && s == 7 && a == TIMEOUT_TERMINATE);
	CHECK(ops_autosnap_parse("keep=3 every=2", &s, &keep, &e) == 0 && s == 2 && keep == 3);
	CHECK(ops_autosnap_parse("every=2 keep=0", &s, &keep, &e) == -EINVAL);
	CHECK(ops_autosnap_parse("keep=3", &s, &keep, &e) == -EINVAL);
	/* A created sandbox's clock stands: it shows the whole setting. */
	CHECK(ops_sandbox_set_timeout(root, "tv", "30 suspend", &e) == 0);
	CHECK(sb_get("tv").deadline_at == 0 && sb_get("tv").timeout_s == 30);
	CHECK(sb_start("tv") == 0);
	int64_t at = sb_get("tv").deadline_at;
	CHECK_MSG(at >= now_ms() + 25000, "the start set the deadline (%lld)", (long long)at);
	CHECK(ops_sandbox_set_timeout(root, "tv", "0", &e) == 0);
	CHECK(sb_get("tv").deadline_at == 0 && sb_get("tv").timeout_s == 0);
}

/* @id's `timeout` as a read shows it. */
static void timeout_reads(const char *id, const char *want)
{
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	struct sandbox sb = sb_get(id);
	CHECK(ops_sandbox_timeout_text(&sb, &out) == 0);
	CHECK_STR(strbuf_str(&out), want);
}

/*
 * Settings read back as written (issue 24): `timeout` reads the setting,
 * not a countdown; the setting in force written again keeps the deadline
 * (and autosnapshot's next tick); another one arms it anew.
 */
static void timeout_rewrite_steps(void)
{
	struct err e = {0};
	if (!run_sandbox("tw"))
		return;
	CHECK(ops_sandbox_set_timeout(root, "tw", "300", &e) == 0);
	int64_t at = sb_get("tw").deadline_at;
	CHECK(at > 0);
	timeout_reads("tw", "300 terminate\n");
	usleep(20 * 1000);
	CHECK(ops_sandbox_set_timeout(root, "tw", "300 terminate", &e) == 0);
	CHECK_MSG(sb_get("tw").deadline_at == at, "the same setting kept the deadline (%lld, %lld)",
		  (long long)sb_get("tw").deadline_at, (long long)at);
	CHECK(ops_sandbox_set_timeout(root, "tw", "300 suspend", &e) == 0);
	CHECK_MSG(sb_get("tw").deadline_at > at, "another setting re-armed it");
	timeout_reads("tw", "300 suspend\n");
	CHECK(ops_sandbox_set_autosnap(root, "tw", "every=3600 keep=2", &e) == 0);
	at = sb_get("tw").autosnap_next_at;
	usleep(20 * 1000);
	CHECK(ops_sandbox_set_autosnap(root, "tw", "keep=2 every=3600", &e) == 0);
	CHECK_MSG(sb_get("tw").autosnap_next_at == at, "the same autosnapshot kept its next tick");
	CHECK(ops_sandbox_set_autosnap(root, "tw", "every=3600 keep=3", &e) == 0);
	CHECK(sb_get("tw").autosnap_next_at > at && sb_get("tw").autosnap_keep == 3);
	CHECK(ops_sandbox_set_timeout(root, "tw", "0", &e) == 0);
	timeout_reads("tw", "0\n");
}

/* Run sandbox @id with timeout @text; note its deadline for the next life. */
static void timeout_noted(const char *id, const char *text)
{
	struct err e = {0};
	char at[32];
	if (!run_sandbox(id))
		return;
	CHECK(ops_sandbox_set_timeout(root, id, text, &e) == 0);
	xsnprintf(at, sizeof(at), "%lld", (long long)sb_get(id).deadline_at);
	note_put("deadline", at);
}

/* The deadline is in the registry: a restart keeps one not yet due... */
static void timeout_kept_before(void)
{
	timeout_noted("tk", "3600");
}

static void timeout_kept_after(void)
{
	char at[32];
	note_get("deadline", at, sizeof(at));
	CHECK_MSG(sb_get("tk").deadline_at == atoll(at), "the deadline %lld is kept (%s)",
		  (long long)sb_get("tk").deadline_at, at);
	CHECK_SB("tk", SB_RUNNING);
}

/* ...and fires one that passed while the daemon was down. */
static void timeout_restart_before(void)
{
	timeout_noted("tr", "3600 suspend");
}

static void timeout_restart_after(void)
{
	sb_wait_state("tr", SB_SUSPENDED);
	CHECK(journal_has("events.jsonl", "\"status\":\"suspending\",\"reason\":\"timeout\""));
	/* Suspended, the clock stands; the setting stays for the resume. */
	CHECK(sb_get("tr").timeout_s == 3600 && sb_get("tr").timeout_action == TIMEOUT_SUSPEND);
}

static void timeout_restart(void)
{
	scenario("timeout-kept");
	life(timeout_kept_before);
	life(timeout_kept_after);
	scenario_end();
	scenario("timeout-restart");
	life(timeout_restart_before);
	/* As though the daemon was down past the deadline. */
	registry_exec("UPDATE sandboxes SET deadline_at = 1 WHERE id = 'tr'");
	life(timeout_restart_after);
	scenario_end();
}

int main(void)
{
	if (!t_ops_begin("test_ops_timer"))
		return t_done() || 1;
	one_life("timeout-transitional", timeout_transitional_steps, NULL);
	one_life("timeout-values", timeout_values_steps, NULL);
	one_life("timeout-rewrite", timeout_rewrite_steps, NULL);
	one_life("timeout-suspend-fails", timeout_suspend_fails_steps, NULL);
	timeout_restart();
	return t_ops_done("test_ops_timer");
}
