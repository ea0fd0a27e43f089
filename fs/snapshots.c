/* snapshots/ and snapshots/<id>/ (docs/design.md, "The tree"). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/store.h"
#include "fs/file.h"

/* --- snapshots/<id>/: reads ---------------------------------------------- */

static int status_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	_cleanup_free_ struct snapshot *snap = NULL;
	int rc = tree_snapshot(who, n->id, &snap);
	return rc < 0 ? rc : tree_line(out, snapshot_state_name(snap->state));
}

static int error_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	_cleanup_free_ struct snapshot *snap = NULL;
	int rc = tree_snapshot(who, n->id, &snap);
	return rc < 0 ? rc : tree_line(out, snap->message);
}

static void add_host(cJSON *info, const char *host_json)
{
	cJSON *host = *host_json ? cJSON_Parse(host_json) : NULL;
	if (host)
		cJSON_AddItemToObject(info, "host", host);
	else
		cJSON_AddNullToObject(info, "host");
}

static int info_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	_cleanup_free_ struct snapshot *snap = NULL;
	int rc = tree_snapshot(who, n->id, &snap);
	if (rc < 0)
		return rc;
	cJSON *info = cJSON_CreateObject();
	cJSON_AddStringToObject(info, "id", snap->id);
	tree_json_str(info, "name", snap->name);
	cJSON_AddStringToObject(info, "kind", snapshot_kind_name(snap->kind));
	cJSON_AddStringToObject(info, "sandbox_id", snap->sandbox_id);
	tree_json_time(info, "created_at", snap->created_at);
	tree_json_time(info, "completed_at", snap->completed_at);
	cJSON_AddStringToObject(info, "status", snapshot_state_name(snap->state));
	cJSON_AddStringToObject(info, "message", snap->message);
	cJSON_AddNumberToObject(info, "pause_ms", (double)snap->pause_ms);
	cJSON_AddNumberToObject(info, "size_bytes", (double)snap->size_bytes);
	cJSON_AddNumberToObject(info, "stored_bytes", (double)snap->stored_bytes);
	tree_json_str(info, "image_digest", snap->image_digest);
	add_host(info, snap->host_json);
	cJSON_AddBoolToObject(info, "gpu", snap->gpu);
	return tree_json(out, info);
}

static int progress_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	(void)who; /* the node was checked for @who at open */
	int64_t done = 0, total = 0;
	int rc = ops_snapshot_progress(n->id, &done, &total);
	if (rc < 0)
		return rc;
	strbuf_addf(out, "%" PRId64 " %" PRId64 "\n", done, total);
	return strbuf_error(out);
}

static int restorable_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	(void)who; /* the node was checked for @who at open */
	return ops_snapshot_restorable(n->id, out);
}

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
		if (kept.slot[i].json && strcmp(kept.slot[i].id, id) == 0)
			rc = tree_line(out, kept.slot[i].json) < 0 ? -ENOMEM : 1;
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

/* The stored manifest; empty until the snapshot is completed. */
static int manifest_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	_cleanup_free_ struct snapshot *snap = NULL;
	_cleanup_free_ char *json = NULL;
	struct err e = {0};
	int rc = tree_snapshot(who, n->id, &snap);
	/* The manifest is stored last: before that the store is not asked at all. */
	if (rc < 0 || snap->state != SNAP_COMPLETED)
		return rc;
	rc = manifest_kept(n->id, out);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	rc = store_get_manifest(ops_store(), n->id, &json, &e);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return -EIO;
	rc = tree_line(out, json);
	if (rc == 0)
		manifest_keep(n->id, steal_ptr(json));
	return rc;
}

static int forked_line(const struct sandbox *sb, void *walk)
{
	const struct tree_walk *w = walk;
	if (!access_may_see(w->who, sb->owner_uid))
		return 0;
	strbuf_addf(w->out, "%s\n", sb->id);
	return strbuf_error(w->out);
}

/* A fresh read of `fork`: the sandboxes forked from this snapshot that @who may see. */
static int forked_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	struct tree_walk w = {who, out};
	return registry_sandbox_each_forked_from(ops_registry(), n->id, forked_line, &w);
}

static int settled(const struct fs_node *n, const struct caller *who)
{
	_cleanup_free_ struct snapshot *snap = NULL;
	int rc = tree_snapshot(who, n->id, &snap);
	return rc < 0 ? rc : snapshot_state_settled(snap->state);
}

/*
 * `source` is a sandbox of this host's only: another host's of that name is
 * another sandbox, and so is a later one of that name (ops_snapshot_of).
 * A source that is gone, or that @who may not see, leaves the link
 * dangling: a snapshot outlives its sandbox.
 */
static int source_exists(const struct fs_node *n, const struct caller *who)
{
	_cleanup_free_ struct snapshot *snap = NULL;
	_cleanup_free_ struct sandbox *sb = NULL;
	int rc = tree_snapshot(who, n->id, &snap);
	if (rc < 0)
		return rc;
	if (!ops_snapshot_taken_here(snap))
		return -ENOENT;
	if (tree_sandbox(who, snap->sandbox_id, &sb) < 0)
		return 0;
	return ops_snapshot_of(snap, sb) ? 0 : -ENOENT;
}

static int source_link(const struct fs_node *n, const struct caller *who, char *buf, size_t size)
{
	_cleanup_free_ struct snapshot *snap = NULL;
	int rc = tree_snapshot(who, n->id, &snap);
	return rc < 0 ? rc : xsnprintf(buf, size, "../../sandboxes/%s", snap->sandbox_id);
}

/* --- snapshots/<id>/: writes --------------------------------------------- */

static int fork_make(const struct caller *who, const char *id, const void *arg, char made[ID_MAX],
		     ops_done_fn done, void *ctx, struct err *e)
{
	(void)arg;
	return ops_snapshot_fork(who, id, made, done, ctx, e);
}

static int fork_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	struct ctl_words w;
	int rc = ctl_words_parse(line, "fork", 0, &w, e);
	return rc < 0 ? rc : file_id_action(f, p, w.async, fork_make, NULL, e);
}

/* Its owner's alone (runtime/access.h), as the sandbox it was taken of. */
static const struct fs_entry snapshot_files[] = {
    {"status", S_IFREG | 0400, .flags = FS_STATUS, .read = status_read},
    {"info.json", S_IFREG | 0400, .read = info_read},
    {"error", S_IFREG | 0400, .read = error_read},
    {"progress", S_IFREG | 0400, .read = progress_read},
    {"fork", S_IFREG | 0600, .flags = FS_STREAM, .read = forked_read, .write = fork_write},
    {"delete", S_IFREG | 0200, .write = file_action_write, .action = ops_snapshot_delete},
    {"wait", S_IFREG | 0400, .flags = FS_WAIT, .action = ops_snapshot_wait, .settled = settled},
    {"restorable", S_IFREG | 0400, .read = restorable_read},
    {"manifest.json", S_IFREG | 0400, .read = manifest_read},
    {"source", S_IFLNK | 0777, .exists = source_exists, .link = source_link},
};

static const struct fs_dir snapshot_dir = FS_DIR(snapshot_files);

/* --- snapshots/ ------------------------------------------------------------ */

static int index_line(const struct snapshot *snap, void *walk)
{
	const struct tree_walk *w = walk;
	if (!access_may_see(w->who, snap->owner_uid))
		return 0;
	strbuf_addf(w->out, "%s %s %s\n", snap->id, snapshot_state_name(snap->state),
		    snap->sandbox_id);
	return strbuf_error(w->out);
}

static int index_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	(void)n;
	struct tree_walk w = {who, out};
	ops_sync_if_stale(); /* other hosts' snapshots, if the store is shared */
	return registry_snapshot_each(ops_registry(), index_line, &w);
}

static int snapshots_list(const struct fs_node *dir, const struct caller *who,
			  int (*fn)(const char *name, void *arg), void *arg)
{
	(void)dir;
	_cleanup_strbuf_ struct strbuf names = STRBUF_INIT;
	struct tree_walk w = {who, &names};
	ops_sync_if_stale(); /* other hosts' snapshots, if the store is shared */
	int rc = registry_snapshot_each(ops_registry(), tree_snapshot_name, &w);
	return rc < 0 ? rc : tree_names_each(&names, fn, arg);
}

/* rmdir snapshots/<id> is `delete`: held until the snapshot is gone. */
static int snapshot_rmdir(const struct fs_node *child, const struct caller *who, struct pending *p,
			  struct err *e)
{
	struct file_op *op;
	int rc = file_op_new(NULL, p, FILE_OP_NONE, &op);
	if (rc < 0)
		return rc;
	return file_op_end(op, ops_snapshot_delete(who, child->id, file_op_done, op, e));
}

static const struct fs_entry snapshots_files[] = {
    {"index", S_IFREG | 0444, .read = index_read},
};

static const struct fs_entry snapshot_entry = {
    .mode = S_IFDIR | 0700,
    .scope = SCOPE_SNAPSHOT,
    .flags = FS_OBJECT,
    .dir = &snapshot_dir,
};

const struct fs_dir fs_snapshots_dir = FS_DIR(snapshots_files, .child = &snapshot_entry,
					      .each = snapshots_list, .rmdir = snapshot_rmdir);
