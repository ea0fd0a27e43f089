/*
 * ops_sync.c - the registry follows the store's manifests, on a thread of
 * its own.
 *
 * The store's manifests are the truth about snapshots: with a store that
 * several daemons share, a snapshot another host completed must appear
 * here, and one another host deleted must go. A sync pass lists the
 * manifests and
 *   - adds a `completed` row for every manifest the registry does not know,
 *     from the metadata the manifest carries (not the source's env: its
 *     values never leave the host that ran the sandbox), checked first by
 *     the rules local input follows (runtime/snapmeta.h): a manifest that
 *     fails is not listed, with one warning naming it;
 *   - removes a `completed` row whose manifest is gone when
 *     follow_may_forget() allows it (below), unless a suspended sandbox here
 *     depends on it (that one turns `failed`, so resume says why instead of
 *     finding nothing); a row the store still holds (store.h: no host
 *     deletes a held snapshot) stays, whatever the listing showed;
 *   - decides the rows start-up left undecided because the store did not
 *     answer (reconcile_snapshot_id(), ops/ops_reconcile.c).
 * Rows still pending or in progress are this host's own work and are left
 * alone. The same listing refreshes the store's own records
 * (store_refresh()), so puts here deduplicate against other hosts' packs and
 * stop using packs of deleted snapshots; and a collection pass of the store
 * (backend/store/store_gc.c) is queued on the store queue every
 * store_collect_period_ms().
 *
 * Nothing else waits for the store to follow it (docs/store.md, "Following
 * the store"): FUSE requests read the registry only, and a lookup that
 * misses may ops_sync_ask() for a pass soon, never waiting for it. A pass
 * runs every SYNC_PERIOD_MS while the store answers; after a failure the
 * next waits SYNC_BACKOFF_MIN_MS, doubling up to SYNC_BACKOFF_MAX_MS, and
 * a pass that succeeds resets it. Asks do not shorten a backoff.
 *
 * Which store: the registry records the id of the store it follows
 * (<state>/store-id, from the store's snapfs-store.json, written by the
 * first daemon to use it: backend/store/store_ident.c). While the store names
 * another id, or none, no row is forgotten and no start-up row decided
 * from its listing: that is another store (a typo in --store), and an
 * error says so. A row this host took is forgotten only when a tombstone
 * says it was deleted: a manifest gone without one is a fault, warned of
 * once, and the row stays.
 *
 * Locks: sync.lock guards the fields of `sync` (a leaf lock, never held
 * across store I/O); pass_lock serialises passes (the thread's, and
 * ops_sync_snapshots() of tests) and guards what only a pass touches:
 * `rejected`, and ops_follow.c's `missing` and `followed` (also
 * written by ops_store_followed() at start-up, before the thread runs).
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/store/store.h"
#include "lib/cancel.h"
#include "lib/strbuf.h"
#include "lib/strset.h"
#include "runtime/host.h"
#include "ops/jobs.h"
#include "runtime/snapmeta.h"

#define SYNC_PERIOD_MS 3000
#define SYNC_ASKED_MIN_MS 1000 /* an ask runs a pass at most this soon after the last */
#define SYNC_BACKOFF_MIN_MS 1000
#define SYNC_BACKOFF_MAX_MS 30000

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake; /* CLOCK_MONOTONIC */
	pthread_t thread;
	bool started, stop, asked;
	int64_t last_try_ms; /* mono: when the last pass began */
	int64_t next_ms;     /* mono: when the next pass is due */
	int64_t backoff_ms;  /* 0 while the store answers */
	int64_t last_collect_ms;
	bool collect_queued;
	struct cancel
	    cancel; /* its thread's and collect_job()'s: ops_sync_stop() ends their work */
} sync = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER;

/* A completed row whose manifest is gone, deleted on purpose. */
static void forget(const struct snapshot *snap)
{
	bool pinned = false;
	struct snapshot copy = *snap;
	pthread_mutex_lock(&ops.lock);
	row_snapshot_pinned(snap->id, &pinned);
	if (pinned) {
		copy.state = SNAP_FAILED;
		snprintf(copy.message, sizeof(copy.message),
			 "snapshot %s was deleted from the store by another host", snap->id);
		row_snapshot_update(&copy);
	} else {
		row_snapshot_delete(snap->id);
	}
	pthread_mutex_unlock(&ops.lock);
	if (pinned)
		announce_snapshot(snap->id, copy.state, copy.message);
	else
		announce_gone(OPS_OBJ_SNAPSHOT, snap->id, copy.message);
}

/* --- a pass --------------------------------------------------------------------- */

struct sync_walk {
	struct strset stored;	/* ids with a manifest */
	struct strbuf gone;	/* completed rows without a manifest */
	struct strset rejected; /* listed ids whose manifest failed its checks */
	struct strset missing;	/* gone rows kept: no tombstone */
	struct strset rows;	/* the registry's ids: only the others are adopted */
};

/*
 * Manifests that failed snapmeta_parse(), as of the last listing: warned
 * about once, not fetched and checked again every pass (an id leaves the
 * set when its manifest leaves the store). Under pass_lock.
 */
static struct strset rejected = STRSET_INIT;

/* Is manifest @id one that failed before? Then it stays rejected. */
static bool still_rejected(struct sync_walk *w, const char *id)
{
	if (!strset_has(&rejected, id))
		return false;
	strset_add(&w->rejected, id);
	return true;
}

/* The row of another host's manifest @id; -EINVAL (warned, remembered) if it fails its checks. */
static int adoptable(struct sync_walk *w, const char *id, struct snapshot *snap)
{
	_cleanup_free_ char *text = NULL;
	struct err e = {0};
	if (store_get_manifest(ops.store, id, &text, NULL) < 0)
		return -EIO; /* asked again next time */
	int rc = snapmeta_parse(id, text, now_ms(), host_id(), snap, &e);
	if (rc < 0) {
		warning("store: snapshot %s is not listed: %s", id, e.msg);
		strset_add(&w->rejected, id);
	} else if (rc == 1) {
		warning("store: snapshot %s names this host as its origin, but this host has no "
			"record of taking it: it is listed as another host's",
			id);
	}
	return rc < 0 ? rc : 0;
}

static void adopt(struct sync_walk *w, const char *id)
{
	struct snapshot snap;
	if (strset_has(&w->rows, id) || row_snapshot_get(id, &snap) == 0 || still_rejected(w, id) ||
	    adoptable(w, id, &snap) < 0)
		return;
	pthread_mutex_lock(&ops.lock);
	int rc = row_snapshot_insert(&snap);
	pthread_mutex_unlock(&ops.lock);
	if (rc == 0) {
		announce_snapshot(id, SNAP_COMPLETED, NULL);
		ops_notify(OPS_OBJ_LIST, id);
	}
}

static int collect_gone(const struct snapshot *snap, void *arg)
{
	struct sync_walk *w = arg;
	if (snap->state == SNAP_COMPLETED && !strset_has(&w->stored, snap->id))
		strbuf_addf(&w->gone, "%s\n", snap->id);
	/* A set too big to grow only costs the lookups adopt() makes without it. */
	strset_add(&w->rows, snap->id);
	return strbuf_error(&w->gone);
}

static void forget_gone(struct sync_walk *w)
{
	for (const char *line = strbuf_str(&w->gone); *line;) {
		size_t len = strcspn(line, "\n");
		char id[ID_MAX];
		struct snapshot snap;
		snprintf(id, sizeof(id), "%.*s", (int)len, line);
		line += len + (line[len] == '\n');
		if (row_snapshot_get(id, &snap) == 0 && snap.state == SNAP_COMPLETED &&
		    follow_may_forget(&snap, &w->missing) == 1)
			forget(&snap);
	}
}

/* Replace the set @old by @fresh, sealed. */
static void set_replace(struct strset *old, struct strset *fresh)
{
	strset_seal(fresh);
	strset_release(old);
	*old = *fresh;
	*fresh = (struct strset)STRSET_INIT;
}

static void collect_if_due(void);

int ops_sync_snapshots(void)
{
	struct sync_walk w = {STRSET_INIT, STRBUF_INIT, STRSET_INIT, STRSET_INIT, STRSET_INIT};
	struct err e = {0};
	pthread_mutex_lock(&pass_lock);
	int ours = ops_store_followed(&e);
	int rc = ours == 0 || ours == -EXDEV ? store_refresh(ops.store, &w.stored, &e) : ours;
	if (rc == 0 && ours == 0) {
		row_snapshot_each_listed(collect_gone, &w);
		strset_seal(&w.rows);
		forget_gone(&w);
		for (size_t i = 0; i < w.stored.n; i++)
			adopt(&w, w.stored.v[i]);
		set_replace(&rejected, &w.rejected);
		follow_missing_replace(&w.missing);
		reconcile_settle();
		collect_if_due();
	} else if (rc < 0) {
		warning("cannot list the store's snapshots: %s", e.msg);
	}
	pthread_mutex_unlock(&pass_lock);
	strset_release(&w.stored);
	strbuf_release(&w.gone);
	strset_release(&w.rejected);
	strset_release(&w.missing);
	strset_release(&w.rows);
	return rc;
}

/* --- collection ------------------------------------------------------------------ */

static void collect_job(void *arg)
{
	struct err e = {0};
	(void)arg;
	cancel_bind(
	    &sync.cancel); /* the sync's work: a stop gives it up, and it deletes nothing then */
	int n = store_collect(ops.store, 0, &e);
	cancel_bind(NULL);
	if (n > 0)
		info("store: removed %d unused objects", n);
	else if (n < 0)
		warning("cannot collect the store's garbage: %s", e.msg);
	pthread_mutex_lock(&sync.lock);
	sync.collect_queued = false;
	sync.last_collect_ms = mono_ms();
	pthread_mutex_unlock(&sync.lock);
}

/* Queue a collection pass of the store if its period is over (after a pass that found it ours). */
static void collect_if_due(void)
{
	pthread_mutex_lock(&sync.lock);
	bool due = !sync.collect_queued &&
		   mono_ms() - sync.last_collect_ms >= store_collect_period_ms(ops.store);
	if (due && jobs_submit(JOB_STORE, collect_job, NULL) == 0)
		sync.collect_queued = true;
	pthread_mutex_unlock(&sync.lock);
}

/* --- the thread ------------------------------------------------------------------- */

void ops_sync_ask(void)
{
	pthread_mutex_lock(&sync.lock);
	if (!sync.asked) {
		sync.asked = true;
		pthread_cond_signal(&sync.wake);
	}
	pthread_mutex_unlock(&sync.lock);
}

/* Under sync.lock: when the next pass is due. */
static int64_t due_ms(void)
{
	int64_t due = sync.next_ms;
	if (sync.asked && sync.backoff_ms == 0 && sync.last_try_ms + SYNC_ASKED_MIN_MS < due)
		due = sync.last_try_ms + SYNC_ASKED_MIN_MS;
	return due;
}

/* Under sync.lock: the outcome @rc of the pass that began at @began. */
static void pass_done(int rc, int64_t began)
{
	if (rc == 0) {
		sync.backoff_ms = 0;
		sync.next_ms = began + SYNC_PERIOD_MS;
		return;
	}
	sync.backoff_ms = sync.backoff_ms ? sync.backoff_ms * 2 : SYNC_BACKOFF_MIN_MS;
	if (sync.backoff_ms > SYNC_BACKOFF_MAX_MS)
		sync.backoff_ms = SYNC_BACKOFF_MAX_MS;
	sync.next_ms = mono_ms() + sync.backoff_ms;
	info("store: next sync in %lld ms", (long long)sync.backoff_ms);
}

static void wait_until(int64_t due)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t left = due - mono_ms();
	ts.tv_sec += left / 1000;
	ts.tv_nsec += (left % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&sync.wake, &sync.lock, &ts);
}

static void *sync_main(void *arg)
{
	(void)arg;
	cancel_bind(&sync.cancel);
	pthread_mutex_lock(&sync.lock);
	while (!sync.stop) {
		int64_t due = due_ms();
		if (mono_ms() < due) {
			wait_until(due);
			continue;
		}
		sync.asked = false;
		sync.last_try_ms = mono_ms();
		int64_t began = sync.last_try_ms;
		pthread_mutex_unlock(&sync.lock);
		int rc = ops_sync_snapshots();
		pthread_mutex_lock(&sync.lock);
		pass_done(rc, began);
	}
	pthread_mutex_unlock(&sync.lock);
	return NULL;
}

int ops_sync_start(void)
{
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&sync.wake, &attr);
	pthread_condattr_destroy(&attr);
	sync.next_ms = mono_ms(); /* a first pass at once: start-up may have left rows undecided */
	cancel_init(&sync.cancel);
	int rc = pthread_create(&sync.thread, NULL, sync_main, NULL);
	sync.started = rc == 0;
	return -rc;
}

void ops_sync_stop(void)
{
	if (!sync.started)
		return;
	pthread_mutex_lock(&sync.lock);
	sync.stop = true;
	pthread_cond_signal(&sync.wake);
	pthread_mutex_unlock(&sync.lock);
	/* A pass in flight gives up on a store that hangs, rather than wait out its timeouts. */
	cancel_now(&sync.cancel);
	pthread_join(sync.thread, NULL);
	sync.started = false;
}
