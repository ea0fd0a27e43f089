/*
 * ops_view.c - the read side of the operations, for the tree: loading a
 * sandbox or snapshot, walking them, and the views made of them (info.json,
 * manifest.json). Every one shows the caller what runtime/access.h lets it
 * see, so fs/ never applies the rule itself: another user's object is
 * -ENOENT, and walks leave it out.
 *
 * Nothing here changes state or takes the operations lock: each call reads
 * the registry afresh. The only state of this file is the manifest cache
 * below, guarded by its own lock.
 */
#include "runtime/ops_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/store.h"
#include "lib/json.h"
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
	int rc = registry_snapshot_get(ops.reg, id, out);
	if (rc == -ENOENT) {
		/* Perhaps another host sharing the store just made it. */
		ops_sync_if_stale();
		rc = registry_snapshot_get(ops.reg, id, out);
	}
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
	return registry_sandbox_each(ops.reg, sandbox_seen, &w);
}

int ops_snapshots_each(const struct caller *who, int (*fn)(const struct snapshot *snap, void *arg),
		       void *arg)
{
	struct seen_walk w = {who, {.snapshot = fn}, arg};
	ops_sync_if_stale(); /* other hosts' snapshots, if the store is shared */
	return registry_snapshot_each(ops.reg, snapshot_seen, &w);
}

int ops_snapshot_forks_each(const struct caller *who, const char *snap_id,
			    int (*fn)(const struct sandbox *sb, void *arg), void *arg)
{
	struct seen_walk w = {who, {.sandbox = fn}, arg};
	return registry_sandbox_each_forked_from(ops.reg, snap_id, sandbox_seen, &w);
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
	    json_add(info, "pid", sb->pid > 0 ? cJSON_CreateNumber(sb->pid) : cJSON_CreateNull());
	return ok ? steal_ptr(info) : NULL;
}

int ops_sandbox_info(const struct sandbox *sb, struct strbuf *out)
{
	return json_print(out, sandbox_info(sb));
}

int ops_snapshot_info(const struct snapshot *snap, struct strbuf *out)
{
	return snapmeta_info(snap, out);
}

/* --- manifest.json -------------------------------------------------------- */

/*
 * A completed snapshot's manifest never changes, and stat makes the content
 * for an honest size (`ls -l` stats every file), so the last few are kept
 * and the store is asked once per snapshot instead of on every stat and
 * read. Entries of deleted snapshots are never served: the registry is
 * asked first.
 */
#define MANIFEST_KEPT 8
#define MANIFEST_KEPT_MAX (1u << 20) /* bytes; a bigger manifest is fetched every time */

static struct {
	pthread_mutex_t lock;
	struct {
		char id[ID_MAX];
		char *json;
	} slot[MANIFEST_KEPT];
	size_t next; /* the slot replaced next: the oldest */
} kept = {.lock = PTHREAD_MUTEX_INITIALIZER};

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

/* Keep @json (taken) as @id's manifest. */
static void manifest_keep(const char *id, char *json)
{
	if (strlen(json) > MANIFEST_KEPT_MAX || strlen(id) >= ID_MAX) {
		free(json);
		return;
	}
	pthread_mutex_lock(&kept.lock);
	free(kept.slot[kept.next].json);
	kept.slot[kept.next].json = json;
	memcpy(kept.slot[kept.next].id, id, strlen(id) + 1);
	kept.next = (kept.next + 1) % MANIFEST_KEPT;
	pthread_mutex_unlock(&kept.lock);
}

int ops_snapshot_manifest(const struct caller *who, const char *id, struct strbuf *out)
{
	_cleanup_free_ struct snapshot *snap = malloc(sizeof(*snap));
	_cleanup_free_ char *json = NULL;
	if (!snap)
		return -ENOMEM;
	int rc = ops_snapshot_get(who, id, snap);
	/* The manifest is stored last: before that the store is not asked at all. */
	if (rc < 0 || snap->state != SNAP_COMPLETED)
		return rc;
	rc = manifest_kept(id, out);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	rc = store_get_manifest(ops.store, id, &json, NULL);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return -EIO;
	strbuf_adds(out, json);
	rc = strbuf_error(out);
	if (rc == 0)
		manifest_keep(id, steal_ptr(json));
	return rc;
}
