/*
 * ops_view.c - the read side of the operations, for the tree: loading a
 * sandbox or snapshot, walking them, and the views made of them (info.json,
 * manifest.json). Every one shows the caller what ops/access.h lets it
 * see, so fs/ never applies the rule itself: another user's object is
 * -ENOENT, and walks leave it out.
 *
 * Nothing here changes state, takes the operations lock or waits for the
 * store (a manifest.json read waits a bounded time, below): each call
 * reads the registry afresh. The only state of this file is the manifest
 * cache below, guarded by its own lock.
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/store/store.h"
#include "lib/cancel.h"
#include "lib/json.h"
#include "lib/names.h"
#include "lib/strset.h"
#include "ops/jobs.h"
#include "runtime/snapmeta.h"

/* --- objects ------------------------------------------------------------ */

int ops_sandbox_get(const struct caller *who, const char *id, struct sandbox *out)
{
	if (strlen(id) >= ID_MAX)
		return -ENOENT;
	return sandbox_get_as(who, id, out);
}

int ops_snapshot_get(const struct caller *who, const char *id, struct snapshot *out)
{
	if (strlen(id) >= ID_MAX)
		return -ENOENT;
	int rc = row_snapshot_get(id, out);
	if (rc == -ENOENT)
		ops_sync_ask(); /* perhaps another host sharing the store just made it */
	/* Another user's snapshot does not exist for @who: not even its id is confirmed. */
	return rc == 0 && !access_may_see(who, out->owner_uid) ? -ENOENT : rc;
}

/* --- walks -------------------------------------------------------------- */

/* A registry walk on behalf of @who: the rows it may not see are skipped. */
struct seen_walk {
	const struct caller *who;
	union {
		int (*sandbox)(const struct sandbox *sb, void *arg);
		int (*snapshot)(const struct snapshot *snap, void *arg);
	} fn;
	void *arg;
};

static int sandbox_seen(const struct sandbox *sb, void *arg)
{
	const struct seen_walk *w = arg;
	return access_may_see(w->who, sb->owner_uid) ? w->fn.sandbox(sb, w->arg) : 0;
}

static int snapshot_seen(const struct snapshot *snap, void *arg)
{
	const struct seen_walk *w = arg;
	return access_may_see(w->who, snap->owner_uid) ? w->fn.snapshot(snap, w->arg) : 0;
}

int ops_sandboxes_each(const struct caller *who, int (*fn)(const struct sandbox *sb, void *arg),
		       void *arg)
{
	struct seen_walk w = {who, {.sandbox = fn}, arg};
	return row_sandbox_each(sandbox_seen, &w);
}

int ops_snapshots_each(const struct caller *who, int (*fn)(const struct snapshot *snap, void *arg),
		       void *arg)
{
	struct seen_walk w = {who, {.snapshot = fn}, arg};
	return row_snapshot_each_listed(snapshot_seen, &w);
}

/* The newest snapshot of a name so far (snapshots/by-name/). */
struct named_walk {
	const char *name;
	char id[ID_MAX]; /* "" until one is found */
	int64_t created_at;
};

static int newest_named(const struct snapshot *snap, void *arg)
{
	struct named_walk *w = arg;
	if (strcmp(snap->name, w->name) != 0)
		return 0;
	/* Not the walk's order: a kept row (a registry write to retry) may come out of it. */
	if (!w->id[0] || snap->created_at > w->created_at ||
	    (snap->created_at == w->created_at && strcmp(snap->id, w->id) > 0)) {
		memcpy(w->id, snap->id, ID_MAX);
		w->created_at = snap->created_at;
	}
	return 0;
}

int ops_snapshot_named(const struct caller *who, const char *name, char id_out[ID_MAX])
{
	struct named_walk w = {.name = name};
	if (!label_file_ok(name, LABEL_MAX))
		return -ENOENT;
	int rc = ops_snapshots_each(who, newest_named, &w);
	if (rc < 0)
		return rc;
	if (!w.id[0])
		return -ENOENT;
	memcpy(id_out, w.id, ID_MAX);
	return 0;
}

/* A name another host or an older snapfs gave ('a/b', '..') is listed by id only. */
static int add_name(const struct snapshot *snap, void *names)
{
	return label_file_ok(snap->name, LABEL_MAX) ? strset_add(names, snap->name) : 0;
}

int ops_snapshot_names_each(const struct caller *who, int (*fn)(const char *name, void *arg),
			    void *arg)
{
	_cleanup_strset_ struct strset names = STRSET_INIT;
	int rc = ops_snapshots_each(who, add_name, &names);
	if (rc == 0)
		rc = strset_seal(&names);
	for (size_t i = 0; rc == 0 && i < names.n; i++)
		rc = fn(names.v[i], arg);
	return rc;
}

int ops_snapshot_forks_each(const struct caller *who, const char *snap_id,
			    int (*fn)(const struct sandbox *sb, void *arg), void *arg)
{
	struct seen_walk w = {who, {.sandbox = fn}, arg};
	return row_sandbox_each_forked_from(snap_id, sandbox_seen, &w);
}

/* --- info.json ------------------------------------------------------------ */

/* The names of KEY=VALUE lines: values never leave the daemon. */
static cJSON *env_names(const char *env)
{
	cJSON *names = cJSON_CreateArray();
	for (const char *line = env; names && *line;) {
		size_t len = strcspn(line, "\n");
		size_t name = strcspn(line, "=\n");
		_cleanup_free_ char *key = name > 0 ? strndup(line, name) : NULL;
		if (key)
			cJSON_AddItemToArray(names, cJSON_CreateString(key));
		line += len + (line[len] == '\n');
	}
	return names;
}

/*
 * exit_code: the entrypoint's status once the daemon saw it end; null
 * before, and null where it ended unseen, with exit_code_unknown saying
 * why (added only then).
 */
static cJSON *exit_code_info(const struct sandbox *sb)
{
	return sb->exit_code[0] ? cJSON_CreateNumber(atoi(sb->exit_code)) : cJSON_CreateNull();
}

static const char *exit_unknown(const struct sandbox *sb)
{
	if (sb->exit_code[0] || (sb->state != SB_TERMINATED && sb->state != SB_FAILED))
		return NULL;
	if (sb->state == SB_FAILED)
		return "its end was not seen: it failed, or its process ended while no daemon ran "
		       "(error says which)";
	if (!strncmp(sb->message, SANDBOX_EXITED_MSG, strlen(SANDBOX_EXITED_MSG)))
		return "its process ended where the daemon could not read its status (it ended "
		       "while no daemon ran, or before this version)";
	return "it was terminated: its entrypoint did not exit on its own";
}

static cJSON *sandbox_info(const struct sandbox *sb)
{
	_cleanup_json_ cJSON *info = cJSON_CreateObject();
	bool ok =
	    info && json_add(info, "id", cJSON_CreateString(sb->id)) &&
	    json_add(info, "image", cJSON_CreateString(sb->image)) &&
	    json_add(info, "image_digest", json_text_or_null(sb->image_digest)) &&
	    json_add(info, "entrypoint", cJSON_CreateString(sb->entrypoint)) &&
	    json_add(info, "env", env_names(sb->env)) &&
	    json_add(info, "created_at", json_time_or_null(sb->created_at)) &&
	    json_add(info, "status", cJSON_CreateString(sandbox_state_name(sb->state))) &&
	    json_add(info, "message", cJSON_CreateString(sb->message)) &&
	    json_add(info, "parent_snapshot", json_text_or_null(sb->parent_snapshot)) &&
	    json_add(info, "gpu", cJSON_CreateBool(sb->gpu)) &&
	    json_add(info, "runtime_id", json_text_or_null(sb->runtime_id)) &&
	    json_add(info, "pid", sb->pid > 0 ? cJSON_CreateNumber(sb->pid) : cJSON_CreateNull()) &&
	    /* The limits, as a snapshot's info.json shows them (runtime/snapmeta.c); 0: none. */
	    json_add(info, "memory", cJSON_CreateNumber((double)sb->res.memory_bytes)) &&
	    json_add(info, "cpus", cJSON_CreateNumber((double)sb->res.cpu_milli / 1000)) &&
	    json_add(info, "pids", cJSON_CreateNumber((double)sb->res.pids)) &&
	    json_add(info, "timeout", lifetime_info_timeout(sb)) &&
	    json_add(info, "autosnapshot", lifetime_info_autosnap(sb)) &&
	    json_add(info, "ports", ops_ports_info(sb)) &&
	    json_add(info, "exit_code", exit_code_info(sb));
	const char *why = exit_unknown(sb);
	if (ok && why)
		ok = json_add(info, "exit_code_unknown", cJSON_CreateString(why));
	json_add(info, "network", ops_net_info(sb));
	return ok ? steal_ptr(info) : NULL;
}

int ops_sandbox_info(const struct sandbox *sb, struct strbuf *out)
{
	return json_print(out, sandbox_info(sb));
}

/* snapmeta_info()'s object, and its warm pool's: {"want", "ready", "memory_bytes"}. */
int ops_snapshot_info(const struct snapshot *snap, struct strbuf *out)
{
	_cleanup_strbuf_ struct strbuf meta = STRBUF_INIT;
	struct ops_warm w;
	int rc = snapmeta_info(snap, &meta);
	if (rc < 0)
		return rc;
	ops_snapshot_warm_get(snap->id, &w);
	_cleanup_json_ cJSON *info = cJSON_Parse(strbuf_str(&meta));
	cJSON *warm = cJSON_CreateObject();
	bool ok = info && warm && json_add(warm, "want", cJSON_CreateNumber(w.want)) &&
		  json_add(warm, "ready", cJSON_CreateNumber(w.ready)) &&
		  json_add(warm, "memory_bytes", cJSON_CreateNumber((double)w.bytes));
	if (!ok || !json_add(info, "warm", warm)) {
		if (!ok)
			cJSON_Delete(warm);
		return -ENOMEM;
	}
	return json_print(out, steal_ptr(info));
}

/* --- manifest.json -------------------------------------------------------- */

/*
 * A completed snapshot's manifest never changes, and stat makes the content
 * for an honest size (`ls -l` stats every file), so the last few are kept
 * and the store is asked once per snapshot instead of on every stat and
 * read. Entries of deleted snapshots are never served: the registry is
 * asked first.
 *
 * One not kept is fetched by a job (JOB_LIFECYCLE: it waits on the network
 * as lifecycle jobs wait on runsc), and the request waits for it at most
 * MANIFEST_WAIT_MS: FUSE has a few worker threads, and a store that hangs
 * (a request times out after 30 s, and is tried 5 times: docs/s3.md) must
 * not take them. Past the deadline the read fails with ETIMEDOUT (stat
 * then shows size 0: tree_stat() leaves errors to read); the fetch goes on
 * and keeps what it gets, so the next read finds it. Requests for one id
 * share its fetch and its deadline (a `cat` is a lookup, a getattr and a
 * read: together they wait MANIFEST_WAIT_MS, not three times that); with
 * MANIFEST_FETCHES_MAX in flight, one for another id fails at once with
 * EAGAIN.
 */
#define MANIFEST_KEPT 8
#define MANIFEST_KEPT_MAX (1u << 20) /* bytes; a bigger manifest is fetched every time */
#define MANIFEST_WAIT_MS 1000
#define MANIFEST_FETCHES_MAX 2

/* A fetch in flight, shared by its job and its waiters (refs, under kept.lock). */
struct fetch {
	char id[ID_MAX];
	int refs;
	bool done;
	int rc;		       /* store_get_manifest()'s, once done */
	char *json;	       /* once done with rc 0 */
	struct timespec until; /* CLOCK_REALTIME: every request for it waits until then at most */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t fetched; /* CLOCK_REALTIME: a fetch is done */
	struct {
		char id[ID_MAX];
		char *json;
	} slot[MANIFEST_KEPT];
	size_t next; /* the slot replaced next: the oldest */
	struct fetch *inflight[MANIFEST_FETCHES_MAX];
} kept = {.lock = PTHREAD_MUTEX_INITIALIZER, .fetched = PTHREAD_COND_INITIALIZER};

/* 1 with @id's manifest added to @out, 0 when it is not kept, or a negative errno. */
static int manifest_kept(const char *id, struct strbuf *out)
{
	int rc = 0;
	pthread_mutex_lock(&kept.lock);
	for (size_t i = 0; i < MANIFEST_KEPT && rc == 0; i++)
		if (kept.slot[i].json && strcmp(kept.slot[i].id, id) == 0) {
			strbuf_adds(out, kept.slot[i].json);
			rc = strbuf_error(out) < 0 ? -ENOMEM : 1;
		}
	pthread_mutex_unlock(&kept.lock);
	return rc;
}

/* Keep a copy of @json as @id's manifest. */
static void manifest_keep(const char *id, const char *json)
{
	char *copy = strlen(json) <= MANIFEST_KEPT_MAX ? strdup(json) : NULL;
	if (!copy)
		return;
	pthread_mutex_lock(&kept.lock);
	free(kept.slot[kept.next].json);
	kept.slot[kept.next].json = copy;
	memcpy(kept.slot[kept.next].id, id, strlen(id) + 1);
	kept.next = (kept.next + 1) % MANIFEST_KEPT;
	pthread_mutex_unlock(&kept.lock);
}

/* Under kept.lock. */
static void fetch_put(struct fetch *f)
{
	if (--f->refs > 0)
		return;
	free(f->json);
	free(f);
}

/* The fetches' token: shutdown gives up a fetch from a store that hangs (ops_view_stop()). */
static struct cancel fetches;

void ops_view_start(void)
{
	cancel_init(&fetches);
}

void ops_view_stop(void)
{
	cancel_now(&fetches);
}

static void fetch_job(void *arg)
{
	struct fetch *f = arg;
	char *json = NULL;
	cancel_bind(&fetches);
	int rc = store_get_manifest(ops.store, f->id, &json, NULL);
	cancel_bind(NULL);
	if (rc == 0)
		manifest_keep(f->id, json);
	pthread_mutex_lock(&kept.lock);
	for (size_t i = 0; i < MANIFEST_FETCHES_MAX; i++)
		if (kept.inflight[i] == f)
			kept.inflight[i] = NULL;
	f->rc = rc;
	f->json = json;
	f->done = true;
	pthread_cond_broadcast(&kept.fetched);
	fetch_put(f);
	pthread_mutex_unlock(&kept.lock);
}

/* Under kept.lock: @id's fetch in flight, or a new one (NULL: as many as may run). */
static struct fetch *fetch_start(const char *id)
{
	size_t free_slot = MANIFEST_FETCHES_MAX;
	for (size_t i = 0; i < MANIFEST_FETCHES_MAX; i++) {
		if (kept.inflight[i] && strcmp(kept.inflight[i]->id, id) == 0)
			return kept.inflight[i];
		if (!kept.inflight[i])
			free_slot = i;
	}
	struct fetch *f = free_slot < MANIFEST_FETCHES_MAX ? calloc(1, sizeof(*f)) : NULL;
	if (!f)
		return NULL;
	snprintf(f->id, sizeof(f->id), "%s", id);
	f->refs = 1; /* the job's */
	clock_gettime(CLOCK_REALTIME, &f->until);
	f->until.tv_sec += MANIFEST_WAIT_MS / 1000;
	if (jobs_submit(JOB_LIFECYCLE, fetch_job, f) < 0) {
		free(f);
		return NULL;
	}
	kept.inflight[free_slot] = f;
	return f;
}

/* @id's manifest from the store into @out, waiting at most MANIFEST_WAIT_MS. */
static int manifest_fetch(const char *id, struct strbuf *out)
{
	pthread_mutex_lock(&kept.lock);
	struct fetch *f = fetch_start(id);
	int rc = f ? 0 : -EAGAIN;
	if (f)
		f->refs++;
	while (f && !f->done && rc == 0)
		rc = -pthread_cond_timedwait(&kept.fetched, &kept.lock, &f->until);
	if (f && f->done) {
		rc = f->rc == -ENOENT ? 0 : f->rc < 0 ? -EIO : 0;
		if (f->rc == 0)
			strbuf_adds(out, f->json);
	}
	if (f)
		fetch_put(f);
	pthread_mutex_unlock(&kept.lock);
	return rc < 0 ? rc : strbuf_error(out);
}

int ops_snapshot_manifest(const struct caller *who, const char *id, struct strbuf *out)
{
	_cleanup_free_ struct snapshot *snap = malloc(sizeof(*snap));
	if (!snap)
		return -ENOMEM;
	int rc = ops_snapshot_get(who, id, snap);
	/* The manifest is stored last: before that the store is not asked at all. */
	if (rc < 0 || snap->state != SNAP_COMPLETED)
		return rc;
	rc = manifest_kept(id, out);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	return manifest_fetch(id, out);
}
