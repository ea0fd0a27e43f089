/*
 * ops_reconcile.c - what start-up makes of each sandbox the registry left
 * in a state runsc has to confirm: running, or in the middle of a start,
 * checkpoint, suspend, resume or terminate when the daemon was killed. It
 * runs from ops_open() once the runsc calls a killed daemon left have
 * ended (ops/ops_life.c), after the snapshots were reconciled (below,
 * reconcile_snapshots()), before any job thread runs: nothing else changes
 * the rows meanwhile.
 *
 * Also the snapshots' reconciliation, and its "decide later" list: the
 * rows start-up could not decide while the store did not answer
 * (reconcile_later()), which the sync pass settles once it does
 * (reconcile_settle()). So ops_sync.c calls this file, and this file calls
 * ops_follow.c for which store is ours: one way.
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/store/store.h"
#include "lib/strbuf.h"
#include "runtime/cache.h"
#include "runtime/host.h"
#include "runtime/snapmeta.h"
#include "runtime/runsc/console.h"
#include "runtime/spool.h"

/*
 * The snapshot an interrupted suspend was taking: the one the sandbox names
 * (begin_checkpoint() names it once its row exists), and only a suspend
 * snapshot this host took of it. Never just its newest: that may be an
 * older suspend's, resumed since, and taking it would delete a running
 * container and lose all it did after that resume. {0} if it names none.
 */
static void suspend_snapshot(const struct sandbox *sb, struct snapshot *snap)
{
	if (sb->restore_snapshot[0] && row_snapshot_get(sb->restore_snapshot, snap) == 0 &&
	    snap->kind == SNAP_KIND_SUSPEND && ops_snapshot_of(snap, sb))
		return;
	memset(snap, 0, sizeof(*snap));
}

/* A paused sandbox that would not resume: stopped, and failed with why. */
static bool suspend_unresumable(struct sandbox *sb, enum runsc_status st, const struct err *why)
{
	struct err e = {0};
	int rc = container_delete(sb->runtime_id, &e);
	sb->state = SB_FAILED;
	sb->pid = 0;
	snprintf(sb->message, sizeof(sb->message),
		 "the suspend of sandbox %s was interrupted before its checkpoint was whole, and "
		 "its paused container could not be resumed (%s%s%.300s)%s%.300s",
		 sb->id, runsc_status_name(st), why->code ? ": " : "", why->msg,
		 rc < 0 ? "; stopping it failed: " : "", rc < 0 ? e.msg : "");
	return false;
}

/*
 * A suspend interrupted by a crash, once the runsc calls it made ended. Its
 * checkpoint pauses the sandbox and leaves it paused (ops_checkpoint.c):
 * running, the checkpoint never began; paused, it runs on unless its
 * checkpoint is whole (one that cannot be resumed is stopped: its spool
 * may be half written, so nothing is restored from it); gone, the
 * checkpoint was whole before the delete. Then stored means suspended, a
 * whole checkpoint suspending until reconcile_stores() stored it, and a
 * checkpoint in the spool is restored from (a mark that failed, or
 * runsc's own CUDA checkpoint, which stops the sandbox itself, and only
 * at its end). True if it runs on in the container it had.
 */
static bool reconcile_suspend(struct sandbox *sb, enum runsc_status st)
{
	struct snapshot snap;
	struct err e = {0};
	suspend_snapshot(sb, &snap);
	/* Named from the request on; kept only while it may still be resumed from. */
	sb->restore_snapshot[0] = '\0';
	bool stored = snap.id[0] && snap.state == SNAP_COMPLETED;
	bool whole = stored || (snap.id[0] && snapshot_store_unfinished(&snap));
	if (st == RUNSC_PAUSED && !whole) {
		st = container_unpause(sb->runtime_id, &e);
		if (st != RUNSC_RUNNING)
			return suspend_unresumable(sb, st, &e);
		snprintf(sb->message, sizeof(sb->message),
			 "the suspend was interrupted before its checkpoint was whole; the sandbox "
			 "runs on");
	}
	/* Running with a whole checkpoint: runsc's CUDA checkpoint, stopping it late. */
	if (st == RUNSC_RUNNING && !whole) {
		sb->state = SB_RUNNING; /* the checkpoint never stopped it */
		ops_gpu_reconcile(sb);	/* CUDA processes it may have left locked */
		return true;
	}
	/*
	 * Paused with a whole checkpoint, or stopped: released first, before a
	 * restore names another container in its place and this one is no one's.
	 */
	runsc_delete(&ops.runsc, sb->runtime_id, NULL);
	sb->pid = 0;
	if (stored) {
		sb->state = SB_SUSPENDED;
		snprintf(sb->restore_snapshot, sizeof(sb->restore_snapshot), "%s", snap.id);
	} else if (snap.id[0] && snapshot_store_unfinished(&snap)) {
		sb->state = SB_SUSPENDING; /* reconcile_stores() ends it */
		snprintf(sb->restore_snapshot, sizeof(sb->restore_snapshot), "%s", snap.id);
	} else if (snap.id[0] && restore_from_spool(sb, snap.id, &e) == 0) {
		sb->state = SB_RUNNING;
		snprintf(
		    sb->message, sizeof(sb->message),
		    "the suspend was interrupted; the sandbox was restored from its checkpoint");
	} else {
		sb->state = SB_FAILED;
		snprintf(
		    sb->message, sizeof(sb->message),
		    "sandbox %s was suspending when snapfs stopped and cannot be restored%s%.600s",
		    sb->id, e.code ? ": " : "", e.msg);
	}
	return false;
}

static void reopen_console(const char *id)
{
	char dir[PATH_MAX];
	int rc = sandbox_path(id, NULL, dir, sizeof(dir));
	if (rc == 0)
		rc = console_reopen(id, dir);
	/* A sandbox started before consoles were FIFOs writes its log file itself. */
	if (rc < 0 && rc != -ENOENT)
		warning("cannot read the console of sandbox %s: %s", id, strerror(-rc));
}

/* `runsc state` asked again this often before start-up decides without it. */
#define STATE_TRIES 2
#define STATE_RETRY_MS 1000

/* The paused container of a suspend whose delete failed (ops_checkpoint.c) goes now. */
static void suspended_leftover(const struct sandbox *sb)
{
	struct err e = {0};
	if (runsc_state(&ops.runsc, sb->runtime_id, NULL, NULL) != RUNSC_GONE &&
	    container_delete(sb->runtime_id, &e) < 0)
		warning("cannot delete the container %s that suspended sandbox %s left: %s",
			sb->runtime_id, sb->id, e.msg);
}

/* What a sandbox the registry left in @sb->state became while snapfs was down. */
static void reconcile_one(struct sandbox *sb)
{
	pid_t pid = 0;
	enum sandbox_state was = sb->state;
	if (was == SB_SUSPENDED)
		suspended_leftover(sb);
	if (was == SB_SUSPENDED || was == SB_CREATED || was == SB_TERMINATED || was == SB_FAILED)
		return;
	enum runsc_status st = runsc_state(&ops.runsc, sb->runtime_id, &pid, NULL);
	/* A runsc that does not answer says nothing of the container: ask again, then leave it. */
	for (int i = 0; i < STATE_TRIES && st == RUNSC_UNKNOWN; i++) {
		nanosleep(&(struct timespec){.tv_sec = STATE_RETRY_MS / 1000}, NULL);
		st = runsc_state(&ops.runsc, sb->runtime_id, &pid, NULL);
	}
	if (st == RUNSC_UNKNOWN && was == SB_RUNNING) {
		warning("runsc cannot say what sandbox %s's container is; it stays running (the "
			"monitor watches its process)",
			sb->id);
		return;
	}
	/*
	 * runsc calls a container running while kill(pid, 0) succeeds, and so
	 * on a zombie: the sandbox's process ended while no daemon ran, and a
	 * PID 1 that does not reap leaves it one (seen in CI). It is stopped,
	 * and `runsc delete` would wait for its end until our deadline (60 s
	 * here, at every start-up): rmdir deletes it.
	 */
	bool zombie = st == RUNSC_RUNNING && pid > 0 && process_ended(pid, 0);
	if (zombie) {
		warning("sandbox %s's process %d ended while no daemon ran and nothing reaps it "
			"(the host's PID 1 should): its container is deleted at rmdir",
			sb->id, (int)pid);
		st = RUNSC_STOPPED;
	}
	bool alive = st == RUNSC_RUNNING;
	sb->pid = alive ? pid : 0;
	if (was == SB_TERMINATING) {
		container_stop(sb->runtime_id, NULL);
		sb->state = SB_TERMINATED;
	} else if (was == SB_SUSPENDING) {
		alive = reconcile_suspend(sb, st);
	} else if (was == SB_RESUMING && !alive) {
		runsc_delete(&ops.runsc, sb->runtime_id, NULL);
		sb->state = SB_SUSPENDED; /* a failed resume can be tried again */
	} else if (alive) {
		sb->state = SB_RUNNING;
		if (was == SB_RESUMING) /* resumed: it no longer needs the snapshot */
			sb->restore_snapshot[0] = '\0';
		if (was == SB_SNAPSHOTTING)
			ops_gpu_reconcile(sb); /* CUDA processes it may have left locked */
	} else {
		if (!zombie)
			runsc_delete(&ops.runsc, sb->runtime_id, NULL);
		sb->state = SB_FAILED;
		snprintf(sb->message, sizeof(sb->message),
			 "sandbox %s was %s and its container is %s after a daemon restart", sb->id,
			 sandbox_state_name(was), runsc_status_name(st));
	}
	/* Its output waited in the console FIFO for us (a restored one has its console). */
	if (sb->state == SB_RUNNING && alive)
		reopen_console(sb->id);
	row_sandbox_update(sb);
	/* `tail -f events` tells what a restart made of it, as of any other change. */
	if (sb->state != was)
		announce_sandbox(sb->id, sb->state, sb->message);
}

static int collect_ids(const struct sandbox *sb, void *arg)
{
	strbuf_addf(arg, "%s\n", sb->id);
	return strbuf_error(arg);
}

static void reconcile_id(const char *id, void *arg)
{
	(void)arg;
	struct sandbox sb;
	if (row_sandbox_get(id, &sb) == 0)
		reconcile_one(&sb);
}

/* Walk ids collected first: runsc runs outside the registry walk. */
void reconcile_sandboxes(void)
{
	_cleanup_strbuf_ struct strbuf ids = STRBUF_INIT;
	row_sandbox_each(collect_ids, &ids);
	strbuf_each_line(&ids, reconcile_id, NULL);
}

/* --- start-up reconciliation --------------------------------------------- */

/*
 * The manifest is written last, so it decides what a row left by a
 * restart is: an interrupted snapshot with a manifest is whole; one without
 * failed, and what it stored is removed; a completed row without one was
 * being deleted. The store decides only when it answers and is the store
 * this state follows (ops_store_followed()): otherwise, down or another
 * store, the row keeps its state and the sync thread decides it once the
 * store answers (reconcile_later()). Before the store is asked, an
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
	int rc = follow_may_forget(snap, NULL);
	if (rc < 0) {
		reconcile_later(snap->id);
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
			reconcile_later(snap->id);
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

/* @arg: a bool, whether the store answers and is the one this state follows. */
static void reconcile_at_start(const char *id, void *arg)
{
	const bool *store_ours = arg;
	struct snapshot snap;
	if (row_snapshot_get(id, &snap) == 0)
		reconcile_snapshot(&snap, *store_ours);
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

static void store_again_id(const char *id, void *arg)
{
	(void)arg;
	struct snapshot snap;
	if (reconcile_spool_wanted(id, NULL) && row_snapshot_get(id, &snap) == 0)
		snapshot_store_again(&snap);
}

void reconcile_stores(void)
{
	_cleanup_strbuf_ struct strbuf ids = STRBUF_INIT;
	row_snapshot_each(collect_snapshot_ids, &ids);
	strbuf_each_line(&ids, store_again_id, NULL);
}

/* Walk ids collected first: store reads run outside the registry walk. */
void reconcile_snapshots(void)
{
	_cleanup_strbuf_ struct strbuf ids = STRBUF_INIT;
	struct err e = {0};
	int rc = ops_store_followed(&e);
	bool store_ours = rc == 0;
	if (rc < 0 && rc != -EXDEV)
		warning("the store does not answer; snapshots are decided once it does: %s", e.msg);
	row_snapshot_each(collect_snapshot_ids, &ids);
	strbuf_each_line(&ids, reconcile_at_start, &store_ours);
	/*
	 * Nothing is being stored here yet: what interrupted puts left is
	 * condemned now, or removed at once where the grace period is 0
	 * (backend/store/store_gc.c). Not in a store that is not this state's.
	 */
	int n = store_ours ? store_collect(ops.store, STORE_COLLECT_AT_START, &e) : 0;
	if (n > 0)
		info("removed %d objects left by interrupted snapshots", n);
	else if (n < 0)
		warning("cannot collect the store's garbage: %s", e.msg);
	cache_clean(cache_entry_wanted, NULL);
	cache_trim();
}

/* --- decided later ----------------------------------------------------------- */

/* Ids start-up left for the store to decide, one a line; under unsettled_lock (a leaf). */
static struct strbuf unsettled = STRBUF_INIT;
static pthread_mutex_t unsettled_lock = PTHREAD_MUTEX_INITIALIZER;

static void settle_line(const char *id, void *arg)
{
	(void)arg;
	reconcile_snapshot_id(id);
}

/* The rows start-up could not decide: decide them now that the store answers. */
void reconcile_settle(void)
{
	_cleanup_strbuf_ struct strbuf ids = STRBUF_INIT;
	pthread_mutex_lock(&unsettled_lock);
	ids = unsettled;
	unsettled = (struct strbuf)STRBUF_INIT;
	pthread_mutex_unlock(&unsettled_lock);
	strbuf_each_line(&ids, settle_line, NULL);
}

void reconcile_later(const char *id)
{
	pthread_mutex_lock(&unsettled_lock);
	strbuf_addf(&unsettled, "%s\n", id);
	pthread_mutex_unlock(&unsettled_lock);
}
