/* snapshots/ and snapshots/<id>/ (docs/design.md, "The tree"). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

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

static int info_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	_cleanup_free_ struct snapshot *snap = NULL;
	int rc = tree_snapshot(who, n->id, &snap);
	return rc < 0 ? rc : ops_snapshot_info(snap, out);
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

/* The stored manifest; empty until the snapshot is completed. */
static int manifest_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	_cleanup_strbuf_ struct strbuf text = STRBUF_INIT;
	int rc = ops_snapshot_manifest(who, n->id, &text);
	return rc < 0 ? rc : tree_line(out, strbuf_str(&text));
}

static int forked_line(const struct sandbox *sb, void *out)
{
	strbuf_addf(out, "%s\n", sb->id);
	return strbuf_error(out);
}

/* A fresh read of `fork`: the sandboxes forked from this snapshot that @who may see. */
static int forked_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	return ops_snapshot_forks_each(who, n->id, forked_line, out);
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

/* `WANT READY` of its warm pool (ops/ops_warm.c). */
static int warm_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	(void)who; /* the node was checked for @who at open */
	struct ops_warm w;
	int rc = ops_snapshot_warm_get(n->id, &w);
	if (rc < 0)
		return rc;
	strbuf_addf(out, "%u %u\n", w.want, w.ready);
	return strbuf_error(out);
}

/* --- snapshots/<id>/: writes --------------------------------------------- */

static int warm_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	(void)p;
	return ops_snapshot_warm_set(&f->who, f->node.id, line, e);
}

static int fork_make(const struct caller *who, const char *id, const void *arg, struct strbuf *made,
		     ops_done_fn done, void *ctx, struct err *e)
{
	return ops_snapshot_forks(who, id, arg, made, done, ctx, e);
}

/*
 * `memory=`, `cpus=` raise the snapshot's limits; `timeout=SECONDS` names the
 * fork's timeout; `count=N` makes N forks, whose ids a read gives a line each.
 */
static int fork_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	struct ctl_words w;
	struct fork_opts opts = {0};
	enum timeout_action ignored;
	int rc = ctl_words_parse(line, "fork",
				 CTL_ALLOW_RAISE | CTL_ALLOW_TIMEOUT | CTL_ALLOW_COUNT, &w, e);
	opts.raise = w.res;
	if (rc == 0 && w.timeout[0]) {
		opts.timeout_set = true;
		rc = ops_timeout_parse(w.timeout, &opts.timeout_s, &ignored, e);
	}
	if (rc == 0 && w.count[0])
		rc = ops_fork_count_parse(w.count, &opts.count, e);
	return rc < 0 ? rc : file_ids_action(f, p, w.async, fork_make, &opts, e);
}

/*
 * root -> .root: the snapshot's own files, read-only, as sandboxes/<id>/root
 * is a sandbox's (fs/sandboxes.c): a crawler follows no link, so a walk of
 * the mount starts no view (a hidden restore, ops/ops_snapview.c).
 */
#define VIEW_DIR ".root"

static int root_link(const struct fs_node *n, const struct caller *who, char *buf, size_t size)
{
	(void)n, (void)who;
	return xsnprintf(buf, size, "%s", VIEW_DIR);
}

/* Its owner's alone (ops/access.h), as the sandbox it was taken of. */
static const struct fs_entry snapshot_files[] = {
    {"status", S_IFREG | 0400, .flags = FS_STATUS, .read = status_read},
    {"info.json", S_IFREG | 0400, .read = info_read},
    {"error", S_IFREG | 0400, .read = error_read},
    {"progress", S_IFREG | 0400, .read = progress_read},
    {"fork", S_IFREG | 0600, .flags = FS_STREAM, .read = forked_read, .write = fork_write},
    {"delete", S_IFREG | 0600, .read = file_empty_read, .write = file_action_write,
     .action = ops_snapshot_delete},
    {"wait", S_IFREG | 0400, .flags = FS_WAIT | FS_UNLISTED, .action = ops_snapshot_wait,
     .settled = settled},
    {"restorable", S_IFREG | 0400, .read = restorable_read},
    {"manifest.json", S_IFREG | 0400, .read = manifest_read},
    {"source", S_IFLNK | 0777, .exists = source_exists, .link = source_link},
    {"root", S_IFLNK | 0777, .flags = FS_STABLE_LINK, .link = root_link},
    {VIEW_DIR, S_IFDIR | 0500, .flags = FS_INSIDE | FS_UNLISTED},
    {"warm", S_IFREG | 0600, .read = warm_read, .write = warm_write},
};

static const struct fs_dir snapshot_dir = FS_DIR(snapshot_files);

/* --- snapshots/ ------------------------------------------------------------ */

/* `<id> <status> <sandbox-id> <name>`, `-` for no name (a name has no blank: label_ok()). */
static int index_line(const struct snapshot *snap, void *out)
{
	strbuf_addf(out, "%s %s %s %s\n", snap->id, snapshot_state_name(snap->state),
		    snap->sandbox_id, snap->name[0] ? snap->name : "-");
	return strbuf_error(out);
}

static int index_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	(void)n;
	return ops_snapshots_each(who, index_line, out);
}

static int snapshots_list(const struct fs_node *dir, const struct caller *who,
			  int (*fn)(const char *name, void *arg), void *arg)
{
	(void)dir;
	_cleanup_strbuf_ struct strbuf names = STRBUF_INIT;
	int rc = ops_snapshots_each(who, tree_snapshot_name, &names);
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

/* --- snapshots/by-name/ ---------------------------------------------------- */

/* by-name/<name>: the newest snapshot of that name @who may see (ops_snapshot_named). */
static int named_exists(const struct fs_node *n, const struct caller *who)
{
	char id[ID_MAX];
	return ops_snapshot_named(who, n->name, id);
}

static int named_link(const struct fs_node *n, const struct caller *who, char *buf, size_t size)
{
	char id[ID_MAX];
	int rc = ops_snapshot_named(who, n->name, id);
	return rc < 0 ? rc : xsnprintf(buf, size, "../%s", id);
}

static int names_list(const struct fs_node *dir, const struct caller *who,
		      int (*fn)(const char *name, void *arg), void *arg)
{
	(void)dir;
	return ops_snapshot_names_each(who, fn, arg);
}

static const struct fs_entry named_entry = {
    .mode = S_IFLNK | 0777,
    .exists = named_exists,
    .link = named_link,
};

static const struct fs_dir names_dir = {.child = &named_entry, .each = names_list};

static const struct fs_entry snapshots_files[] = {
    {"index", S_IFREG | 0444, .flags = FS_SNAPSHOTS_TIME, .read = index_read},
    {"by-name", S_IFDIR | 0555, .flags = FS_SNAPSHOTS_TIME, .dir = &names_dir},
};

static const struct fs_entry snapshot_entry = {
    .mode = S_IFDIR | 0700,
    .scope = SCOPE_SNAPSHOT,
    .flags = FS_OBJECT,
    .dir = &snapshot_dir,
};

const struct fs_dir fs_snapshots_dir = FS_DIR(snapshots_files, .child = &snapshot_entry,
					      .each = snapshots_list, .rmdir = snapshot_rmdir);
