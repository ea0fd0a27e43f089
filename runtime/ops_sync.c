/*
 * ops_sync.c - the registry follows the store's manifests.
 *
 * The store's manifests are the truth about snapshots: with a store that
 * several daemons share, a snapshot another host completed must appear
 * here, and one another host deleted must go. ops_sync_snapshots() lists
 * the manifests and
 *   - adds a `completed` row for every manifest the registry does not know,
 *     from the metadata the manifest carries (not the source's env: its
 *     values never leave the host that ran the sandbox), checked first by
 *     the rules local input follows (runtime/snapmeta.h): a manifest that
 *     fails is not listed, with one warning naming it;
 *   - removes every `completed` row whose manifest is gone, unless a
 *     suspended sandbox here depends on it (that one turns `failed`, so
 *     resume says why instead of finding nothing); a row the store still
 *     holds (store.h: no host deletes a held snapshot) stays, whatever
 *     the listing showed.
 * Rows still pending or in progress are this host's own work and are left
 * alone. The same listing refreshes the store's own records
 * (store_refresh()), so puts here deduplicate against other hosts' packs and
 * stop using packs of deleted snapshots. The monitor thread calls it every
 * SYNC_PERIOD_MS; readers of snapshots/ call ops_sync_if_stale() so a
 * listing is never older than that.
 *
 * ops_collect_if_due() queues a collection pass of the store (condemn and
 * delete unused packs: backend/store_gc.c) on the store queue every
 * store_collect_period_ms().
 */
#include "runtime/ops_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend/store.h"
#include "lib/strbuf.h"
#include "lib/strset.h"
#include "runtime/host.h"
#include "runtime/jobs.h"
#include "runtime/snapmeta.h"

#define SYNC_PERIOD_MS 3000

static pthread_mutex_t sync_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t last_sync_ms;

struct sync_walk {
	struct strset stored;	/* ids with a manifest */
	struct strbuf gone;	/* completed rows without a manifest */
	struct strset rejected; /* listed ids whose manifest failed its checks */
};

/*
 * Manifests that failed snapmeta_parse(), as of the last listing: warned
 * about once, not fetched and checked again every SYNC_PERIOD_MS (an id
 * leaves the set when its manifest leaves the store). Under sync_lock.
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
	if (registry_snapshot_get(ops.reg, id, &snap) == 0 || still_rejected(w, id) ||
	    adoptable(w, id, &snap) < 0)
		return;
	pthread_mutex_lock(&ops.lock);
	int rc = registry_snapshot_insert(ops.reg, &snap);
	pthread_mutex_unlock(&ops.lock);
	if (rc == 0) {
		announce_snapshot(id, SNAP_COMPLETED, NULL);
		notify(OPS_OBJ_LIST, id);
	}
}

/* A completed row whose manifest is gone: deleted by another host. */
static void forget(const struct snapshot *snap)
{
	bool pinned = false;
	struct snapshot copy = *snap;
	pthread_mutex_lock(&ops.lock);
	registry_snapshot_pinned(ops.reg, snap->id, &pinned);
	if (pinned) {
		copy.state = SNAP_FAILED;
		snprintf(copy.message, sizeof(copy.message),
			 "snapshot %s was deleted from the store by another host", snap->id);
		registry_snapshot_update(ops.reg, &copy);
	} else {
		registry_snapshot_delete(ops.reg, snap->id);
	}
	pthread_mutex_unlock(&ops.lock);
	if (pinned)
		announce_snapshot(snap->id, copy.state, copy.message);
	else
		announce_gone(OPS_OBJ_SNAPSHOT, snap->id, copy.message);
}

static int collect_gone(const struct snapshot *snap, void *arg)
{
	struct sync_walk *w = arg;
	if (snap->state == SNAP_COMPLETED && !strset_has(&w->stored, snap->id))
		strbuf_addf(&w->gone, "%s\n", snap->id);
	return strbuf_error(&w->gone);
}

static void forget_id(const char *id)
{
	struct snapshot snap;
	/* A held one cannot have been deleted (store.h): its manifest was not listed, that is all.
	 */
	if (registry_snapshot_get(ops.reg, id, &snap) == 0 && snap.state == SNAP_COMPLETED &&
	    store_held(ops.store, id, NULL, NULL) == 0)
		forget(&snap);
}

int ops_sync_snapshots(void)
{
	struct sync_walk w = {STRSET_INIT, STRBUF_INIT, STRSET_INIT};
	struct err e = {0};
	pthread_mutex_lock(&sync_lock);
	int rc = store_refresh(ops.store, &w.stored, &e);
	if (rc == 0) {
		registry_snapshot_each(ops.reg, collect_gone, &w);
		strbuf_each_line(&w.gone, forget_id);
		for (size_t i = 0; i < w.stored.n; i++)
			adopt(&w, w.stored.v[i]);
		strset_seal(&w.rejected);
		strset_release(&rejected);
		rejected = w.rejected;
		w.rejected = (struct strset)STRSET_INIT;
		last_sync_ms = mono_ms();
	} else {
		warning("cannot list the store's snapshots: %s", e.msg);
	}
	pthread_mutex_unlock(&sync_lock);
	strset_release(&w.stored);
	strbuf_release(&w.gone);
	strset_release(&w.rejected);
	return rc;
}

void ops_sync_if_stale(void)
{
	pthread_mutex_lock(&sync_lock);
	bool stale = mono_ms() - last_sync_ms >= SYNC_PERIOD_MS;
	pthread_mutex_unlock(&sync_lock);
	if (stale)
		ops_sync_snapshots();
}

static int64_t last_collect_ms;
static bool collect_queued; /* under sync_lock */

static void collect_job(void *arg)
{
	struct err e = {0};
	(void)arg;
	int n = store_collect(ops.store, 0, &e);
	if (n > 0)
		info("store: removed %d unused objects", n);
	else if (n < 0)
		warning("cannot collect the store's garbage: %s", e.msg);
	pthread_mutex_lock(&sync_lock);
	collect_queued = false;
	last_collect_ms = mono_ms();
	pthread_mutex_unlock(&sync_lock);
}

void ops_collect_if_due(void)
{
	pthread_mutex_lock(&sync_lock);
	bool due =
	    !collect_queued && mono_ms() - last_collect_ms >= store_collect_period_ms(ops.store);
	if (due && jobs_submit(JOB_STORE, collect_job, NULL) == 0)
		collect_queued = true;
	pthread_mutex_unlock(&sync_lock);
}
