/*
 * ops_snapshot.c - snapshots as objects: delete, wait, progress,
 * restorable, and their reconciliation at start-up. Which are a sandbox's
 * is ops_rows.c's.
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

int ops_snapshot_delete(const struct caller *who, const char *snap_id, ops_done_fn done, void *ctx,
			struct err *e)
{
	struct snapshot snap;
	bool pinned = false;
	struct snapshot_use *use = NULL;
	pthread_mutex_lock(&ops.lock);
	int rc = snapshot_get_as(who, snap_id, &snap);
	if (rc == 0)
		rc = row_snapshot_pinned(snap_id, &pinned);
	if (rc == 0 && !pinned && snapshot_state_settled(snap.state)) {
		use = snapshot_use_get(snap_id, true);
		rc = use ? 0 : -ENOMEM; /* unmarked, a fork could start from what is deleted */
	}
	if (use && (use->restores || use->deleting)) {
		pthread_mutex_unlock(&ops.lock);
		return err_set(e, EBUSY, "cannot delete snapshot %s: %s", snap_id,
			       use->deleting ? "it is being deleted" : "a fork of it is starting");
	}
	if (use)
		use->deleting = true;
	pthread_mutex_unlock(&ops.lock);
	if (rc == -ENOENT)
		return err_set(e, ENOENT, "snapshot %s does not exist", snap_id);
	if (rc == -ENOMEM)
		return err_set(e, ENOMEM, "cannot delete snapshot %s: out of memory", snap_id);
	if (rc < 0)
		return err_set(e, EIO, "cannot read snapshot %s from the registry", snap_id);
	if (!snapshot_state_settled(snap.state))
		return err_set(e, EBUSY, "cannot delete snapshot %s: it is still %s", snap_id,
			       snapshot_state_name(snap.state));
	if (pinned)
		return err_set(e, EBUSY,
			       "cannot delete snapshot %s: suspended sandbox %s needs it to resume",
			       snap_id, snap.sandbox_id);
	struct delete_job *job = op_job_new(sizeof(*job), JOB_LIFECYCLE, done, ctx, e);
	if (!job) {
		delete_end(snap_id);
		return -e->code;
	}
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

/* --- start-up reconciliation --------------------------------------------- */

/*
 * The manifest is written last, so it decides what a row left by a
 * restart is: an interrupted snapshot with a manifest is whole; one without
 * failed, and what it stored is removed; a completed row without one was
 * being deleted. The store decides only when it answers and is the store
 * this state follows (ops_store_followed()): otherwise, down or another
 * store, the row keeps its state and the sync thread decides it once the
 * store answers (sync_reconcile_later()). Before the store is asked, an
 * image in the cache that keeps a whole manifest proves its put completed
 * (cache_manifest()).
 */
static void snapshot_settle(struct snapshot *snap, const char *manifest)
{
	enum snapshot_state was = snap->state;
	snap->state = manifest ? SNAP_COMPLETED : SNAP_FAILED;
	snap->completed_at = now_ms();
	if (manifest)
		snapmeta_sizes(manifest, snap);
	else
		snprintf(snap->message, sizeof(snap->message),
			 "snapshot %s was interrupted: snapfs stopped while it was %s", snap->id,
			 snapshot_state_name(was));
	pthread_mutex_lock(&ops.lock);
	row_snapshot_update(snap);
	pthread_mutex_unlock(&ops.lock);
	announce_snapshot(snap->id, snap->state, snap->message);
}

/* A completed row whose manifest the store, ours, does not hold. */
static void snapshot_unstored(struct snapshot *snap)
{
	int rc = sync_may_forget(snap, NULL);
	if (rc < 0) {
		sync_reconcile_later(snap->id);
	} else if (rc == 1) {
		pthread_mutex_lock(&ops.lock);
		row_snapshot_delete(snap->id);
		pthread_mutex_unlock(&ops.lock);
		announce_gone(OPS_OBJ_SNAPSHOT, snap->id, NULL);
	}
}

static void reconcile_snapshot(struct snapshot *snap, bool store_ours)
{
	_cleanup_free_ char *manifest = NULL;
	bool settled = snapshot_state_settled(snap->state);
	if (settled && snap->state != SNAP_COMPLETED)
		return;
	if (snapshot_store_unfinished(snap))
		return; /* reconcile_stores() finishes it */
	if (!settled && cache_manifest(snap->id, &manifest) == 0 &&
	    snapmeta_sizes(manifest, snap) == 0) {
		snapshot_settle(snap, manifest);
		return;
	}
	free(manifest);
	manifest = NULL;
	if (settled && store_ours && store_has_record(ops.store, snap->id))
		return; /* listed and read at open: a GET would say the same */
	int mrc = store_ours ? store_get_manifest(ops.store, snap->id, &manifest, NULL) : -EIO;
	if (mrc < 0 && mrc != -ENOENT) {
		/* A store that cannot answer (down, bad credentials, another store) proves nothing.
		 */
		if (!settled)
			sync_reconcile_later(snap->id);
		return;
	}
	if (settled) {
		if (mrc == -ENOENT)
			snapshot_unstored(snap);
		return;
	}
	if (mrc == -ENOENT) /* what it stored before the crash is garbage */
		store_delete_snapshot(ops.store, snap->id, NULL);
	snapshot_settle(snap, manifest);
}

static int collect_snapshot_ids(const struct snapshot *snap, void *arg)
{
	strbuf_addf(arg, "%s\n", snap->id);
	return strbuf_error(arg);
}

/* A cache entry stays while its snapshot is known and not failed: an undecided one may be whole. */
static bool cache_entry_wanted(const char *snap_id, void *arg)
{
	struct snapshot snap;
	(void)arg;
	return row_snapshot_get(snap_id, &snap) == 0 && snap.state != SNAP_FAILED;
}

void reconcile_snapshot_id(const char *id)
{
	struct snapshot snap;
	if (row_snapshot_get(id, &snap) == 0)
		reconcile_snapshot(&snap, true);
}

static bool store_ours_at_start;

static void reconcile_at_start(const char *id)
{
	struct snapshot snap;
	if (row_snapshot_get(id, &snap) == 0)
		reconcile_snapshot(&snap, store_ours_at_start);
}

/*
 * Interrupted before it was stored, its checkpoint whole: pending too, as
 * the in_progress of its checkpoint may never have reached the registry (a
 * refused write kept in memory, ops_rows.c) before the kill.
 */
bool snapshot_store_unfinished(const struct snapshot *snap)
{
	return !snapshot_state_settled(snap->state) && ops_snapshot_taken_here(snap) &&
	       spool_is_whole(snap->id);
}

bool reconcile_spool_wanted(const char *snap_id, void *arg)
{
	struct snapshot snap;
	(void)arg;
	return row_snapshot_get(snap_id, &snap) == 0 && snapshot_store_unfinished(&snap);
}

static void store_again_id(const char *id)
{
	struct snapshot snap;
	if (reconcile_spool_wanted(id, NULL) && row_snapshot_get(id, &snap) == 0)
		snapshot_store_again(&snap);
}

void reconcile_stores(void)
{
	_cleanup_strbuf_ struct strbuf ids = STRBUF_INIT;
	row_snapshot_each(collect_snapshot_ids, &ids);
	strbuf_each_line(&ids, store_again_id);
}

/* Walk ids collected first: store reads run outside the registry walk. */
void reconcile_snapshots(void)
{
	_cleanup_strbuf_ struct strbuf ids = STRBUF_INIT;
	struct err e = {0};
	int rc = ops_store_followed(&e);
	store_ours_at_start = rc == 0;
	if (rc < 0 && rc != -EXDEV)
		warning("the store does not answer; snapshots are decided once it does: %s", e.msg);
	row_snapshot_each(collect_snapshot_ids, &ids);
	strbuf_each_line(&ids, reconcile_at_start);
	/*
	 * Nothing is being stored here yet: what interrupted puts left is
	 * condemned now, or removed at once where the grace period is 0
	 * (backend/store/store_gc.c). Not in a store that is not this state's.
	 */
	int n = store_ours_at_start ? store_collect(ops.store, STORE_COLLECT_AT_START, &e) : 0;
	if (n > 0)
		info("removed %d objects left by interrupted snapshots", n);
	else if (n < 0)
		warning("cannot collect the store's garbage: %s", e.msg);
	cache_clean(cache_entry_wanted, NULL);
	cache_trim();
}
