/*
 * test_ops_holds.c - the store's hold on the snapshot a suspended sandbox
 * resumes from: its window, and the answers given before it is released.
 *
 * The harness (lives, scenarios, the fake runsc) is tests/unit/t_ops.h.
 */
#include "tests/unit/t_ops.h"

/* --- the snapshot a suspended sandbox resumes from ------------------------- */

/* Does the store hold a hold on @snap (holds/<snap>/ has an object: docs/store.md)? */
static bool store_has_hold(const char *snap)
{
	char dir[PATH_MAX];
	xsnprintf(dir, sizeof(dir), "%s/store/holds/%s", state, snap);
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *de = d ? readdir(d) : NULL; de; de = readdir(d))
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n > 0;
}

/* Wait until the hold on @snap is gone: a job releases it after it answered. */
static bool hold_released(const char *snap)
{
	for (int i = 0; store_has_hold(snap) && i < DEADLINE_S * 20; i++)
		sleep_ms(50);
	return !store_has_hold(snap);
}

/* Another host on this store: its delete of @snap, the message in @msg. */
static int other_host_delete(const char *snap, char *msg, size_t len)
{
	char url[PATH_MAX];
	struct store *other = NULL;
	struct err e = {0};
	xsnprintf(url, sizeof(url), "file://%s/store", state);
	if (!CHECK_MSG(store_open(url, NULL, &other, &e) == 0, "store_open: %s", e.msg))
		return -EIO;
	int rc = store_delete_snapshot(other, snap, &e);
	xsnprintf(msg, len, "%s", e.msg);
	store_close(other);
	return rc;
}

/* A delete tried by the first waiter of a snapshot to wake: where `cat wait && delete` runs. */
struct wake_delete {
	char snap[ID_MAX];
	int rc;		 /* the delete's refusal or its completion */
	struct op *woke; /* done once it was tried */
};

static void delete_on_wake(void *ctx, int rc, const char *result, size_t len)
{
	struct wake_delete *w = ctx;
	(void)rc, (void)result, (void)len;
	w->rc = OP_RUN(ops_snapshot_delete(root, w->snap, OP), NULL, 0);
	op_done(w->woke, 0, NULL, 0);
}

/*
 * A suspend's snapshot cannot be deleted from the request on: not while its
 * checkpoint runs, not by a delete the snapshot's `completed` woke (before
 * the store job ends), not by another host (the hold), not after; once
 * resumed it can. And the sandbox resumes with its memory.
 */
static void hold_window_steps(void)
{
	char mem[64], out[64], msg[MESSAGE_MAX];
	struct wake_delete w = {.rc = 1, .woke = op_new()};
	struct op *suspend = op_new();
	struct err e = {0};
	CHECK(run_sandbox("h"));
	memory_of("h", mem, sizeof(mem));
	fake_set("FAKE_RUNSC_HANG=checkpoint");
	CHECK(ops_sandbox_suspend(root, "h", op_done, suspend, &e) == 0);
	fake_wait_hangs("checkpoint", 1);
	fake_set("");
	newest_of("h", w.snap);
	CHECK_STR(sb_get("h").restore_snapshot, w.snap);
	CHECK_MSG(store_has_hold(w.snap), "no hold on %s before its checkpoint", w.snap);
	CHECK(ops_snapshot_wait(root, w.snap, delete_on_wake, &w, &e) == 0);
	fake_release();
	CHECK(op_wait(suspend, NULL, 0) == 0);
	CHECK(op_wait(w.woke, NULL, 0) == 0);
	CHECK_MSG(w.rc == -EBUSY, "a delete as the snapshot completed: %d, not -EBUSY", w.rc);
	CHECK_SB("h", SB_SUSPENDED);
	CHECK_SNAP(w.snap, SNAP_COMPLETED);
	CHECK(other_host_delete(w.snap, msg, sizeof(msg)) == -EBUSY);
	CHECK_HAS(msg, "sandbox h of host");
	CHECK(snap_delete(w.snap) == -EBUSY);
	CHECK(sb_resume("h") == 0);
	CHECK_SB("h", SB_RUNNING);
	memory_of("h", out, sizeof(out));
	CHECK_STR(out, mem);
	CHECK_MSG(hold_released(w.snap), "the hold on %s outlived the resume", w.snap);
	CHECK(snap_delete(w.snap) == 0);
	/* A terminate of a suspended sandbox releases its hold too. */
	CHECK(sb_suspend("h") == 0);
	xsnprintf(w.snap, sizeof(w.snap), "%s", sb_get("h").restore_snapshot);
	CHECK(store_has_hold(w.snap));
	CHECK(sb_terminate("h") == 0);
	CHECK(hold_released(w.snap));
	CHECK(other_host_delete(w.snap, msg, sizeof(msg)) == 0);
}

/* A resume or terminate's answer, and whether the hold on @snap was still there at it. */
struct answer_hold {
	char snap[ID_MAX];
	bool held;
	struct op *op;
};

static void hold_at_answer(void *ctx, int rc, const char *result, size_t len)
{
	struct answer_hold *a = ctx;
	a->held = store_has_hold(a->snap);
	op_done(a->op, rc, result, len);
}

typedef int (*sandbox_op_fn)(const struct caller *who, const char *id, ops_done_fn done, void *ctx,
			     struct err *e);

/* Suspend @id, then @fn (a resume or terminate): the hold is there at its answer, gone after. */
static void answers_before_unhold(const char *id, sandbox_op_fn fn, const char *verb)
{
	struct answer_hold a = {.op = op_new()};
	struct err e = {0};
	CHECK(sb_suspend(id) == 0);
	xsnprintf(a.snap, sizeof(a.snap), "%s", sb_get(id).restore_snapshot);
	CHECK(fn(root, id, hold_at_answer, &a, &e) == 0);
	CHECK(op_wait(a.op, NULL, 0) == 0);
	CHECK_MSG(a.held, "the %s answered only after the store released its hold", verb);
	CHECK(hold_released(a.snap));
}

/*
 * A resume and a terminate answer before they release the hold (a store
 * delete, which waits out the retries while the store is down): the hold
 * is still there when the answer comes, and goes after.
 */
static void hold_answer_steps(void)
{
	CHECK(run_sandbox("j"));
	answers_before_unhold("j", ops_sandbox_resume, "resume");
	CHECK_SB("j", SB_RUNNING);
	answers_before_unhold("j", ops_sandbox_terminate, "terminate");
	CHECK_SB("j", SB_TERMINATED);
}

int main(void)
{
	if (!t_ops_begin("test_ops_holds"))
		return t_done() || 1;
	one_life("hold-window", hold_window_steps, NULL);
	one_life("hold-answer", hold_answer_steps, NULL);
	return t_ops_done("test_ops_holds");
}
