/* snapshots/ and snapshots/<id>/ (design.md, "The tree"). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "backend/store.h"
#include "fs/file.h"

/* --- snapshots/<id>/: reads ---------------------------------------------- */

static int status_read(const struct fs_node *n, struct strbuf *out)
{
	_cleanup_free_ struct snapshot *snap = NULL;
	int rc = tree_snapshot(n->id, &snap);
	return rc < 0 ? rc : tree_line(out, snapshot_state_name(snap->state));
}

static int error_read(const struct fs_node *n, struct strbuf *out)
{
	_cleanup_free_ struct snapshot *snap = NULL;
	int rc = tree_snapshot(n->id, &snap);
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

static int info_read(const struct fs_node *n, struct strbuf *out)
{
	_cleanup_free_ struct snapshot *snap = NULL;
	int rc = tree_snapshot(n->id, &snap);
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

static int progress_read(const struct fs_node *n, struct strbuf *out)
{
	int64_t done = 0, total = 0;
	int rc = ops_snapshot_progress(n->id, &done, &total);
	return rc < 0 ? rc : strbuf_addf(out, "%" PRId64 " %" PRId64 "\n", done, total);
}

static int restorable_read(const struct fs_node *n, struct strbuf *out)
{
	return ops_snapshot_restorable(n->id, out);
}

/* The stored manifest; empty until the snapshot has one. */
static int manifest_read(const struct fs_node *n, struct strbuf *out)
{
	_cleanup_free_ char *json = NULL;
	struct err e = {0};
	int rc = store_get_manifest(ops_store(), n->id, &json, &e);
	if (rc == -ENOENT)
		return 0;
	return rc < 0 ? -EIO : tree_line(out, json);
}

static int forked_line(const struct sandbox *sb, void *arg)
{
	return strbuf_addf(arg, "%s\n", sb->id);
}

/* A fresh read of `fork`: the sandboxes forked from this snapshot. */
static int forked_read(const struct fs_node *n, struct strbuf *out)
{
	return registry_sandbox_each_forked_from(ops_registry(), n->id, forked_line, out);
}

static int settled(const struct fs_node *n)
{
	_cleanup_free_ struct snapshot *snap = NULL;
	int rc = tree_snapshot(n->id, &snap);
	return rc < 0 ? rc : snap->state == SNAP_COMPLETED || snap->state == SNAP_FAILED;
}

static int source_link(const struct fs_node *n, char *buf, size_t size)
{
	_cleanup_free_ struct snapshot *snap = NULL;
	int rc = tree_snapshot(n->id, &snap);
	return rc < 0 ? rc : xsnprintf(buf, size, "../../sandboxes/%s", snap->sandbox_id);
}

/* --- snapshots/<id>/: writes --------------------------------------------- */

static int fork_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	struct ctl_words w;
	struct file_op *op;
	char id[ID_MAX];
	int rc = ctl_words_parse(line, "fork", 0, &w, e);
	if (rc == 0)
		rc = file_op_begin(f, p, w.async, &op);
	if (rc < 0)
		return rc;
	rc = ops_snapshot_fork(f->node.id, id, file_op_fn(op), op, e);
	if (rc == 0)
		file_set_id(f, id);
	return file_op_end(op, rc);
}

static const struct fs_entry snapshot_files[] = {
    {"status", S_IFREG | 0444, .flags = FS_STATUS, .read = status_read},
    {"info.json", S_IFREG | 0444, .read = info_read},
    {"error", S_IFREG | 0444, .read = error_read},
    {"progress", S_IFREG | 0444, .read = progress_read},
    {"fork", S_IFREG | 0644, .flags = FS_STREAM, .read = forked_read, .write = fork_write},
    {"delete", S_IFREG | 0200, .write = file_action_write, .action = ops_snapshot_delete},
    {"wait", S_IFREG | 0444, .flags = FS_WAIT, .action = ops_snapshot_wait, .settled = settled},
    {"restorable", S_IFREG | 0444, .read = restorable_read},
    {"manifest.json", S_IFREG | 0444, .read = manifest_read},
    {"source", S_IFLNK | 0777, .link = source_link},
};

static const struct fs_dir snapshot_dir = FS_DIR(snapshot_files);

/* --- snapshots/ ------------------------------------------------------------ */

static int index_line(const struct snapshot *snap, void *arg)
{
	return strbuf_addf(arg, "%s %s %s\n", snap->id, snapshot_state_name(snap->state),
			   snap->sandbox_id);
}

static int index_read(const struct fs_node *n, struct strbuf *out)
{
	(void)n;
	return registry_snapshot_each(ops_registry(), index_line, out);
}

static int add_snapshot(const struct snapshot *snap, void *arg)
{
	return tree_names_add(arg, snap->id);
}

static int snapshots_list(const struct fs_node *dir, int (*fn)(const char *name, void *arg),
			  void *arg)
{
	(void)dir;
	_cleanup_strbuf_ struct strbuf names = STRBUF_INIT;
	int rc = registry_snapshot_each(ops_registry(), add_snapshot, &names);
	return rc < 0 ? rc : tree_names_each(&names, fn, arg);
}

/* rmdir snapshots/<id> is `delete`: held until the snapshot is gone. */
static int snapshot_rmdir(const struct fs_node *child, struct pending *p, struct err *e)
{
	struct file_op *op;
	int rc = file_op_new(NULL, p, FILE_OP_NONE, &op);
	if (rc < 0)
		return rc;
	return file_op_end(op, ops_snapshot_delete(child->id, file_op_done, op, e));
}

static const struct fs_entry snapshots_files[] = {
    {"index", S_IFREG | 0444, .read = index_read},
};

static const struct fs_entry snapshot_entry = {
    .mode = S_IFDIR | 0755,
    .scope = SCOPE_SNAPSHOT,
    .flags = FS_OBJECT,
    .dir = &snapshot_dir,
};

const struct fs_dir fs_snapshots_dir = FS_DIR(snapshots_files, .child = &snapshot_entry,
					      .each = snapshots_list, .rmdir = snapshot_rmdir);
