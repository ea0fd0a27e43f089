/*
 * ops_snapshot.c - snapshots as objects: delete, wait, progress and
 * restorable. Which are a sandbox's is ops_rows.c's; their reconciliation
 * at start-up is ops_reconcile.c's.
 * Taking one (snapshot, suspend) is in ops_checkpoint.c, restoring one
 * (fork, resume) in ops_restore.c.
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend/store/store.h"
#include "lib/strbuf.h"
#include "runtime/cache.h"
#include "runtime/host.h"
#include "runtime/snapmeta.h"
#include "runtime/spool.h"

/* --- delete ---------------------------------------------------------------- */

struct delete_job {
	struct op_job base; /* in JOB_LIFECYCLE */
	char snap_id[ID_MAX];
	const char *reason; /* the requester's announce_reason(), a literal: its deleted event's */
};
OP_JOB_CHECK(struct delete_job);

static void delete_end(const char *snap_id)
{
	pthread_mutex_lock(&ops.lock);
	struct snapshot_use *u = snapshot_use_get(snap_id, false);
	if (u)
		u->deleting = false;
	snapshot_use_drop_if_idle(snap_id);
	pthread_mutex_unlock(&ops.lock);
}

static void delete_job_run(void *arg)
{
	struct delete_job *job = arg;
	struct err e = {0};
	snapview_drop(job->snap_id); /* its files' view first: nothing reads what goes */
	warm_drain(job->snap_id);    /* a delete drains the snapshot's warm pool (ops_warm.c) */
	int rc = store_delete_snapshot(ops.store, job->snap_id, &e);
	if (rc == 0) {
		cache_remove(job->snap_id);
		pthread_mutex_lock(&ops.lock);
		rc = row_snapshot_delete(job->snap_id);
		pthread_mutex_unlock(&ops.lock);
		if (rc == -ENOENT)
			rc = 0;
	}
	if (rc < 0) {
		if (!e.code)
			err_set(&e, -rc, "cannot delete snapshot %s: %s", job->snap_id,
				strerror(-rc));
		report_job_failure(OPS_OBJ_SNAPSHOT, job->snap_id, "delete", &e);
	} else {
		announce_reason(job->reason);
		announce_gone(OPS_OBJ_SNAPSHOT, job->snap_id, NULL);
		announce_reason(NULL);
	}
	delete_end(job->snap_id);
	op_job_end(job, rc < 0 ? -e.code : 0, NULL, 0);
}

/*
 * Under ops.lock: may @snap_id be deleted, and if so mark it deleting, so
 * that no fork starts from what is deleted. The refusals, in the order a
 * user meets them after the queue's own (EAGAIN full, ESHUTDOWN stopping:
 * the place is taken first): no such snapshot, not settled, pinned by a
 * suspended sandbox, a fork starting or a delete under way.
 */
static int delete_begin(const struct caller *who, const char *snap_id, struct err *e)
{
	struct snapshot snap;
	bool pinned = false;
	int rc = snapshot_get_as(who, snap_id, &snap);
	if (rc == 0)
		rc = row_snapshot_pinned(snap_id, &pinned);
	if (rc == -ENOENT)
		return err_set(e, ENOENT, "snapshot %s does not exist", snap_id);
	if (rc < 0)
		return err_set(e, EIO, "cannot read snapshot %s from the registry", snap_id);
	if (!snapshot_state_settled(snap.state))
		return err_set(e, EBUSY, "cannot delete snapshot %s: it is still %s", snap_id,
			       snapshot_state_name(snap.state));
	if (pinned)
		return err_set(e, EBUSY,
			       "cannot delete snapshot %s: suspended sandbox %s needs it to resume",
			       snap_id, snap.sandbox_id);
	struct snapshot_use *use = snapshot_use_get(snap_id, true);
	if (!use) /* unmarked, a fork could start from what is deleted */
		return err_set(e, ENOMEM, "cannot delete snapshot %s: out of memory", snap_id);
	if (use->restores || use->deleting)
		return err_set(e, EBUSY, "cannot delete snapshot %s: %s", snap_id,
			       use->deleting ? "it is being deleted" : "a fork of it is starting");
	use->deleting = true;
	return 0;
}

/* The queue place first, as every verb takes it (ops/jobs.h): a refusal has nothing to undo. */
int ops_snapshot_delete(const struct caller *who, const char *snap_id, ops_done_fn done, void *ctx,
			struct err *e)
{
	struct delete_job *job = op_job_new(sizeof(*job), JOB_LIFECYCLE, done, ctx, e);
	if (!job)
		return -e->code;
	pthread_mutex_lock(&ops.lock);
	int rc = delete_begin(who, snap_id, e);
	pthread_mutex_unlock(&ops.lock);
	if (rc < 0)
		return op_job_drop(job, rc);
	snprintf(job->snap_id, sizeof(job->snap_id), "%s", snap_id);
	job->reason = announced_reason();
	return op_job_queue(job, delete_job_run);
}

/* --- wait, progress, restorable -------------------------------------------- */

int ops_snapshot_wait(const struct caller *who, const char *snap_id, ops_done_fn done, void *ctx,
		      struct err *e)
{
	struct snapshot snap;
	/* As ops_sandbox_wait: another's is refused before its owner's waiters could be ended. */
	if (row_snapshot_get(snap_id, &snap) == 0 && !access_may_see(who, snap.owner_uid))
		return err_set(e, ENOENT, "snapshot %s does not exist", snap_id);
	waiters_add(who, OPS_OBJ_SNAPSHOT, snap_id, done, ctx);
	if (row_snapshot_get(snap_id, &snap) < 0) {
		waiters_fail(OPS_OBJ_SNAPSHOT, snap_id);
		return 0;
	}
	waiters_wake(OPS_OBJ_SNAPSHOT, snap_id, snapshot_state_name(snap.state),
		     snapshot_state_settled(snap.state));
	return 0;
}

int ops_snapshot_progress(const char *snap_id, int64_t *done, int64_t *total)
{
	struct snapshot snap;
	if (progress_get(snap_id, done, total))
		return 0;
	int rc = row_snapshot_get(snap_id, &snap);
	if (rc < 0)
		return rc;
	*done = snap.state == SNAP_COMPLETED ? snap.size_bytes : 0;
	*total = snap.size_bytes;
	return 0;
}

int ops_snapshot_restorable(const char *snap_id, struct strbuf *out)
{
	struct snapshot snap;
	int rc = row_snapshot_get(snap_id, &snap);
	if (rc < 0)
		return rc;
	rc = restore_blockers(&snap, out);
	if (rc == 0)
		strbuf_adds(out, "yes\n");
	return rc < 0 ? rc : strbuf_error(out);
}
