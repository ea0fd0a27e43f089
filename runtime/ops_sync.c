/*
 * ops_sync.c - the registry follows the store's manifests.
 *
 * The store's manifests are the truth about snapshots: with a store that
 * several daemons share, a snapshot another host completed must appear
 * here, and one another host deleted must go. ops_sync_snapshots() lists
 * the manifests and
 *   - adds a `completed` row for every manifest the registry does not know,
 *     from the metadata the manifest carries (not the source's env: its
 *     values never leave the host that ran the sandbox);
 *   - removes every `completed` row whose manifest is gone, unless a
 *     suspended sandbox here depends on it (that one turns `failed`, so
 *     resume says why instead of finding nothing).
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
#include "runtime/jobs.h"

#define SYNC_PERIOD_MS 3000

static pthread_mutex_t sync_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t last_sync_ms;

static const char *json_string(const cJSON *obj, const char *key)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsString(item) ? item->valuestring : "";
}

static int64_t json_int(const cJSON *obj, const char *key)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsNumber(item) ? (int64_t)item->valuedouble : 0;
}

/* A registry row from a manifest's metadata; -EINVAL if it is not one of ours. */
static int snapshot_from_manifest(const char *id, const char *text, struct snapshot *snap)
{
	cJSON *m = cJSON_Parse(text);
	if (!m)
		return -EINVAL;
	memset(snap, 0, sizeof(*snap));
	int rc = xsnprintf(snap->id, sizeof(snap->id), "%s", id) < 0 ? -EINVAL : 0;
	if (rc == 0 && snapshot_kind_parse(json_string(m, "kind"), &snap->kind) < 0)
		rc = -EINVAL;
	if (rc == 0) {
		snprintf(snap->name, sizeof(snap->name), "%s", json_string(m, "name"));
		snprintf(snap->sandbox_id, sizeof(snap->sandbox_id), "%s",
			 json_string(m, "sandbox_id"));
		snprintf(snap->image, sizeof(snap->image), "%s", json_string(m, "image"));
		snprintf(snap->image_digest, sizeof(snap->image_digest), "%s",
			 json_string(m, "image_digest"));
		snprintf(snap->entrypoint, sizeof(snap->entrypoint), "%s",
			 json_string(m, "entrypoint"));
		snap->created_at = json_int(m, "created_at_ms");
		snap->completed_at = snap->created_at;
		snap->pause_ms = json_int(m, "pause_ms");
		snap->size_bytes = json_int(m, "size_bytes");
		snap->stored_bytes = json_int(m, "stored_bytes");
		snap->gpu = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "gpu"));
		snap->state = SNAP_COMPLETED;
		char *host = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(m, "host"));
		snprintf(snap->host_json, sizeof(snap->host_json), "%s", host ? host : "");
		free(host);
	}
	cJSON_Delete(m);
	return rc;
}

struct sync_walk {
	struct strset stored; /* ids with a manifest */
	struct strbuf gone;   /* completed rows without a manifest */
};

static void adopt(const char *id)
{
	struct snapshot snap;
	_cleanup_free_ char *text = NULL;
	if (registry_snapshot_get(ops.reg, id, &snap) == 0)
		return;
	if (store_get_manifest(ops.store, id, &text, NULL) < 0 ||
	    snapshot_from_manifest(id, text, &snap) < 0)
		return;
	pthread_mutex_lock(&ops.lock);
	int rc = registry_snapshot_insert(ops.reg, &snap);
	pthread_mutex_unlock(&ops.lock);
	if (rc == 0) {
		announce(OPS_OBJ_SNAPSHOT, id, "completed", NULL);
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
	announce(OPS_OBJ_SNAPSHOT, snap->id, pinned ? "failed" : "deleted", copy.message);
}

static int collect_gone(const struct snapshot *snap, void *arg)
{
	struct sync_walk *w = arg;
	if (snap->state == SNAP_COMPLETED && !strset_has(&w->stored, snap->id))
		return strbuf_addf(&w->gone, "%s\n", snap->id);
	return 0;
}

static void forget_id(const char *id)
{
	struct snapshot snap;
	if (registry_snapshot_get(ops.reg, id, &snap) == 0 && snap.state == SNAP_COMPLETED)
		forget(&snap);
}

int ops_sync_snapshots(void)
{
	struct sync_walk w = {STRSET_INIT, STRBUF_INIT};
	struct err e = {0};
	pthread_mutex_lock(&sync_lock);
	int rc = store_refresh(ops.store, &w.stored, &e);
	if (rc == 0) {
		registry_snapshot_each(ops.reg, collect_gone, &w);
		strbuf_each_line(&w.gone, forget_id);
		for (size_t i = 0; i < w.stored.n; i++)
			adopt(w.stored.v[i]);
		last_sync_ms = mono_ms();
	} else {
		warning("cannot list the store's snapshots: %s", e.msg);
	}
	pthread_mutex_unlock(&sync_lock);
	strset_release(&w.stored);
	strbuf_release(&w.gone);
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
