/* sandboxes/ and sandboxes/<id>/ (docs/design.md, "The tree"). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fs/file.h"

/* --- sandboxes/<id>/: reads ---------------------------------------------- */

/* A text field of the sandbox, at @field's offset in struct sandbox, as a line. */
static int text_read(const struct fs_node *n, const struct caller *who, struct strbuf *out,
		     size_t field)
{
	_cleanup_free_ struct sandbox *sb = NULL;
	int rc = tree_sandbox(who, n->id, &sb);
	return rc < 0 ? rc : tree_line(out, (const char *)sb + field);
}

static int error_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	return text_read(n, who, out, offsetof(struct sandbox, message));
}

static int image_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	return text_read(n, who, out, offsetof(struct sandbox, image));
}

static int entrypoint_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	return text_read(n, who, out, offsetof(struct sandbox, entrypoint));
}

static int env_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	return text_read(n, who, out, offsetof(struct sandbox, env));
}

static int status_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	_cleanup_free_ struct sandbox *sb = NULL;
	int rc = tree_sandbox(who, n->id, &sb);
	return rc < 0 ? rc : tree_line(out, sandbox_state_name(sb->state));
}

static int gpu_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	_cleanup_free_ struct sandbox *sb = NULL;
	int rc = tree_sandbox(who, n->id, &sb);
	return rc < 0 ? rc : tree_line(out, sb->gpu ? "1" : "0");
}

/* --- memory, cpus, pids: the limits (lib/size.h), each file named as its limit --- */

static int limit_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	char text[RES_WORD_MAX];
	enum res_kind kind;
	_cleanup_free_ struct sandbox *sb = NULL;
	int rc = res_kind_parse(n->ent->name, &kind);
	if (rc == 0)
		rc = tree_sandbox(who, n->id, &sb);
	if (rc == 0)
		res_format(&sb->res, kind, text);
	return rc < 0 ? rc : tree_line(out, text);
}

static int limit_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	enum res_kind kind;
	(void)p;
	int rc = res_kind_parse(f->node.ent->name, &kind);
	_Static_assert(SB_FIELD_CPUS == SB_FIELD_MEMORY + RES_CPUS - RES_MEMORY &&
			   SB_FIELD_PIDS == SB_FIELD_MEMORY + RES_PIDS - RES_MEMORY,
		       "the limit fields follow enum res_kind");
	return rc < 0 ? rc
		      : ops_sandbox_set(&f->who, f->node.id,
					SB_FIELD_MEMORY + (enum sandbox_field)(kind - RES_MEMORY),
					line, e);
}

/* A view of the sandbox that ops makes of its row: info.json, timeout, autosnapshot. */
static int view_read(const struct fs_node *n, const struct caller *who, struct strbuf *out,
		     int (*view)(const struct sandbox *sb, struct strbuf *out))
{
	_cleanup_free_ struct sandbox *sb = NULL;
	int rc = tree_sandbox(who, n->id, &sb);
	return rc < 0 ? rc : view(sb, out);
}

/* What ops shows of it: env's names, never its values. */
static int info_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	return view_read(n, who, out, ops_sandbox_info);
}

/*
 * The processes inside, as its agent lists them (ops/ops_agent.c). A read
 * asks the agent (and starts it, as root/ does: the list is the agent's);
 * a stat does not (FS_NOSIZE), so `ls -l` and `du` start nothing.
 */
static int ps_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	struct err e = {0};
	return ops_sandbox_ps(who, n->id, out, &e);
}

/* ps is there while it may answer: a listing leaves out one that would fail tar's stat. */
static int ps_exists(const struct fs_node *n, const struct caller *who)
{
	_cleanup_free_ struct sandbox *sb = NULL;
	int rc = tree_sandbox(who, n->id, &sb);
	if (rc < 0)
		return rc;
	return ops_sandbox_has_ps(sb) ? 0 : -ENOENT;
}

/* The lifetime's files (ops/ops_timer.c). */
static int timeout_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	return view_read(n, who, out, ops_sandbox_timeout_text);
}

static int autosnap_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	return view_read(n, who, out, ops_sandbox_autosnap_text);
}

/* Published ports (ops/ops_ports.c). */
static int ports_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	return view_read(n, who, out, ops_sandbox_ports_text);
}

/* A fresh read of `snapshot`: the newest snapshot's id, or nothing. */
static int newest_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	_cleanup_free_ struct sandbox *sb = NULL;
	_cleanup_free_ struct snapshot *snap = malloc(sizeof(*snap));
	if (!snap)
		return -ENOMEM;
	int rc = tree_sandbox(who, n->id, &sb);
	if (rc == 0)
		rc = ops_sandbox_newest_snapshot(sb, snap);
	if (rc == -ENOENT)
		return 0;
	return rc < 0 ? rc : tree_line(out, snap->id);
}

static int settled(const struct fs_node *n, const struct caller *who)
{
	_cleanup_free_ struct sandbox *sb = NULL;
	int rc = tree_sandbox(who, n->id, &sb);
	return rc < 0 ? rc : !sandbox_state_transitional(sb->state);
}

/* --- sandboxes/<id>/: writes --------------------------------------------- */

static int image_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	(void)p;
	return ops_sandbox_set(&f->who, f->node.id, SB_FIELD_IMAGE, line, e);
}

static int entrypoint_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	(void)p;
	return ops_sandbox_set(&f->who, f->node.id, SB_FIELD_ENTRYPOINT, line, e);
}

static int gpu_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	(void)p;
	return ops_sandbox_set(&f->who, f->node.id, SB_FIELD_GPU, line, e);
}

/* The network's files (runtime/net/net.h). */
static int network_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	_cleanup_free_ struct sandbox *sb = NULL;
	int rc = tree_sandbox(who, n->id, &sb);
	return rc < 0 ? rc : tree_line(out, sandbox_network_name(sb->network));
}

static int network_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	(void)p;
	return ops_sandbox_set(&f->who, f->node.id, SB_FIELD_NETWORK, line, e);
}

static int egress_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	return text_read(n, who, out, offsetof(struct sandbox, egress));
}

/*
 * The lines of one open file are one rule set (first match wins): each
 * line is checked with those before it, and the whole is applied once, at
 * FLUSH (close), so the chain never holds a part of it that lacks a later
 * deny. A refused line fails its write; the rules in force then stay.
 */
static int egress_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	(void)p;
	return file_collect_check(f, line, ops_egress_check, e);
}

static int egress_apply(const struct caller *who, const char *id, const char *text, struct err *e)
{
	return ops_sandbox_set_egress(who, id, text, e);
}

static int egress_flush(struct fs_file *f, struct pending *p, struct err *e)
{
	(void)p;
	return file_collect_flush(f, egress_apply, e);
}

static int timeout_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	(void)p;
	return ops_sandbox_set_timeout(&f->who, f->node.id, line, e);
}

static int autosnap_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	(void)p;
	return ops_sandbox_set_autosnap(&f->who, f->node.id, line, e);
}

static int ports_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	(void)p;
	return ops_sandbox_ports(&f->who, f->node.id, line, e);
}

static int env_apply(const struct caller *who, const char *id, const char *env, struct err *e)
{
	return ops_sandbox_set(who, id, SB_FIELD_ENV, env, e);
}

/* Each line re-applies every line written on this open file: they are the whole env. */
static int env_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	(void)p;
	return file_collect(f, line, env_apply, e);
}

static int snapshot_make(const struct caller *who, const char *id, const void *label,
			 char made[ID_MAX], ops_done_fn done, void *ctx, struct err *e)
{
	return ops_sandbox_snapshot(who, id, label, made, done, ctx, e);
}

static int snapshot_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	struct ctl_words w;
	int rc = ctl_words_parse(line, "snapshot", CTL_ALLOW_NAME, &w, e);
	return rc < 0 ? rc : file_id_action(f, p, w.async, snapshot_make, w.label, e);
}

/*
 * exec: the lines written on one open file are one script (FS_SCRIPT),
 * checked as each comes and run by one shell at the first read or the
 * close, so that `printf 'a\nb\n' >exec` (which bash writes a line at a
 * time) runs whole. The write returns at once; a read streams the output
 * as the command prints it. A `cat exec` on a file nothing was written on
 * follows the newest exec its opener started on the sandbox.
 */
static int exec_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	(void)p;
	struct ops_exec_slot *slot;
	/* Its first line takes the script's place in the queue: a full one refuses this write. */
	if (!file_script_held(f)) {
		int rc = ops_sandbox_exec_reserve(&f->who, f->node.id, line, &slot, e);
		if (rc < 0)
			return rc;
		file_script_hold(f, slot);
	}
	return file_script_add(f, line, ops_sandbox_exec_check, e);
}

static int exec_start(struct fs_file *f, struct pending *p, struct err *e)
{
	(void)p;
	_cleanup_strbuf_ struct strbuf script = STRBUF_INIT;
	struct file_op *op;
	struct ops_exec_slot *slot;
	int rc = file_script_take(f, &script, &slot);
	if (rc <= 0)
		return rc;
	rc = slot ? file_exec_begin(f, &op, e) : err_set(e, EIO, "exec: no place in the queue");
	if (rc < 0) {
		ops_sandbox_exec_unreserve(slot);
		return rc;
	}
	return file_op_end(op, ops_sandbox_exec_start(&f->who, slot, strbuf_str(&script),
						      file_op_progress, file_op_done, op, e));
}

static int exec_follow(struct fs_file *f, struct err *e)
{
	struct file_op *op;
	int rc = file_exec_begin(f, &op, e);
	if (rc < 0)
		return rc;
	rc = file_op_end(op, ops_sandbox_exec_follow(&f->who, f->node.id, file_op_progress,
						     file_op_done, op, e));
	return rc == -ENOENT ? 0 : rc; /* none to follow: an empty read */
}

/* --- sandboxes/<id>/: console and usage (ops/ops_console.c) ----------- */

static int console_open(const struct fs_node *n, const struct caller *who, struct logfile **out)
{
	return ops_sandbox_console_open(who, n->id, out);
}

/* The entrypoint's output, read at the offset as events is: `tail -f` follows it. */
static const struct fs_log console_log = {
    .open = console_open,
    .close = ops_sandbox_console_close,
    .read = ops_console_read,
    .stat = ops_console_stat,
};

/* Memory, CPU, processes and traffic while it runs; empty otherwise. */
static int usage_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	return view_read(n, who, out, ops_sandbox_usage_text);
}

/* --- sandboxes/<id>/: links and the snapshots/ directory ----------------- */

static int parent_exists(const struct fs_node *n, const struct caller *who)
{
	_cleanup_free_ struct sandbox *sb = NULL;
	int rc = tree_sandbox(who, n->id, &sb);
	return rc < 0 ? rc : sb->parent_snapshot[0] ? 0 : -ENOENT;
}

static int parent_link(const struct fs_node *n, const struct caller *who, char *buf, size_t size)
{
	_cleanup_free_ struct sandbox *sb = NULL;
	int rc = tree_sandbox(who, n->id, &sb);
	return rc < 0 ? rc : xsnprintf(buf, size, "../../snapshots/%s", sb->parent_snapshot);
}

/* sandboxes/<id>/snapshots/<snap-id>: any snapshot taken of this sandbox (ops_snapshot_of). */
static int snaplink_exists(const struct fs_node *n, const struct caller *who)
{
	_cleanup_free_ struct sandbox *sb = NULL;
	_cleanup_free_ struct snapshot *snap = NULL;
	int rc = tree_sandbox(who, n->id, &sb);
	if (rc == 0)
		rc = tree_snapshot(who, n->name, &snap);
	if (rc < 0)
		return rc;
	return ops_snapshot_of(snap, sb) ? 0 : -ENOENT;
}

static int snaplink_link(const struct fs_node *n, const struct caller *who, char *buf, size_t size)
{
	(void)who;
	return xsnprintf(buf, size, "../../../snapshots/%s", n->name);
}

/* A sandbox's snapshots are its owner's (ops_snapshot_of): who sees it sees them. */
static int snaplinks_list(const struct fs_node *dir, const struct caller *who,
			  int (*fn)(const char *name, void *arg), void *arg)
{
	_cleanup_free_ struct sandbox *sb = NULL;
	_cleanup_strbuf_ struct strbuf names = STRBUF_INIT;
	int rc = tree_sandbox(who, dir->id, &sb);
	if (rc == 0)
		rc = ops_sandbox_snapshots_each(sb, tree_snapshot_name, &names);
	return rc < 0 ? rc : tree_names_each(&names, fn, arg);
}

static const struct fs_entry snaplink_entry = {
    .mode = S_IFLNK | 0777,
    .exists = snaplink_exists,
    .link = snaplink_link,
};

static const struct fs_dir snaplinks_dir = {.child = &snaplink_entry, .each = snaplinks_list};

/*
 * root is a symlink to .root, the directory itself, as /proc/<pid>/root is
 * a link: crawlers (grep -r, find, tar, rsync -a, cp -r, du, ls -R) follow
 * no links, so a walk of the mount never walks a sandbox's own filesystem,
 * starts no agent and meets no EBUSY of a transition. .root is unlisted and
 * answers its name (FS_UNLISTED).
 */
#define INSIDE_DIR ".root"

static int root_link(const struct fs_node *n, const struct caller *who, char *buf, size_t size)
{
	(void)n, (void)who;
	return xsnprintf(buf, size, "%s", INSIDE_DIR);
}

/* --- sandboxes/<id>/ ------------------------------------------------------ */

/* Its owner's alone (ops/access.h): no group or other bits, env's values are secrets. */
static const struct fs_entry sandbox_files[] = {
    {"status", S_IFREG | 0400, .flags = FS_STATUS, .read = status_read},
    {"info.json", S_IFREG | 0400, .read = info_read},
    {"error", S_IFREG | 0400, .read = error_read},
    {"image", S_IFREG | 0600, .read = image_read, .write = image_write},
    {"entrypoint", S_IFREG | 0600, .read = entrypoint_read, .write = entrypoint_write},
    {"env", S_IFREG | 0600, .read = env_read, .write = env_write},
    {"gpu", S_IFREG | 0600, .read = gpu_read, .write = gpu_write},
    {"timeout", S_IFREG | 0600, .read = timeout_read, .write = timeout_write},
    {"autosnapshot", S_IFREG | 0600, .read = autosnap_read, .write = autosnap_write},
    {"memory", S_IFREG | 0600, .read = limit_read, .write = limit_write},
    {"cpus", S_IFREG | 0600, .read = limit_read, .write = limit_write},
    {"pids", S_IFREG | 0600, .read = limit_read, .write = limit_write},
    {"ports", S_IFREG | 0600, .read = ports_read, .write = ports_write},
    {"network", S_IFREG | 0600, .read = network_read, .write = network_write},
    {"egress", S_IFREG | 0600, .read = egress_read, .write = egress_write, .flush = egress_flush},
    {"start", S_IFREG | 0600, .read = file_empty_read, .write = file_action_write,
     .action = ops_sandbox_start},
    {"snapshot", S_IFREG | 0600, .flags = FS_STREAM, .read = newest_read, .write = snapshot_write},
    {"suspend", S_IFREG | 0600, .read = file_empty_read, .write = file_action_write,
     .action = ops_sandbox_suspend},
    {"resume", S_IFREG | 0600, .read = file_empty_read, .write = file_action_write,
     .action = ops_sandbox_resume},
    {"terminate", S_IFREG | 0600, .read = file_empty_read, .write = file_action_write,
     .action = ops_sandbox_terminate},
    {"exec", S_IFREG | 0600, .flags = FS_STREAM | FS_SCRIPT, .write = exec_write,
     .flush = exec_start, .follow = exec_follow},
    {"wait", S_IFREG | 0400, .flags = FS_WAIT | FS_UNLISTED, .action = ops_sandbox_wait,
     .settled = settled},
    {"console", S_IFREG | 0400, .log = &console_log},
    {"usage", S_IFREG | 0400, .flags = FS_NOSIZE, .read = usage_read},
    {"snapshots", S_IFDIR | 0700, .dir = &snaplinks_dir},
    {"root", S_IFLNK | 0777, .flags = FS_STABLE_LINK, .link = root_link},
    {INSIDE_DIR, S_IFDIR | 0700, .flags = FS_INSIDE | FS_UNLISTED},
    {"ps", S_IFREG | 0400, .flags = FS_NOSIZE, .read = ps_read, .exists = ps_exists},
    {"parent", S_IFLNK | 0777, .exists = parent_exists, .link = parent_link},
};

static const struct fs_dir sandbox_dir = FS_DIR(sandbox_files);

/* --- sandboxes/ ------------------------------------------------------------ */

static int index_line(const struct sandbox *sb, void *out)
{
	strbuf_addf(out, "%s %s\n", sb->id, sandbox_state_name(sb->state));
	return strbuf_error(out);
}

static int index_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	(void)n;
	return ops_sandboxes_each(who, index_line, out);
}

static int new_make(const struct caller *who, const char *id, const void *spec, char made[ID_MAX],
		    ops_done_fn done, void *ctx, struct err *e)
{
	(void)id; /* sandboxes/new belongs to no sandbox */
	return ops_sandbox_new(who, spec, made, done, ctx, e);
}

/* sandboxes/new: act on a spec: a JSON object or key=value lines. */
static int new_act(struct fs_file *f, const struct strbuf *text, bool async, struct pending *p,
		   struct err *e)
{
	_cleanup_free_ struct sandbox_spec *spec = calloc(1, sizeof(*spec));
	if (!spec)
		return -ENOMEM;
	int rc = spec_parse(strbuf_str(text), text->len, spec, e);
	return rc < 0 ? rc : file_id_action(f, p, async, new_make, spec, e);
}

static int new_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	_cleanup_strbuf_ struct strbuf text = STRBUF_INIT;
	bool async = false;
	int rc = file_spec_add(f, line, &text, &async, e);
	return rc <= 0 ? rc : new_act(f, &text, async, p, e);
}

static int new_flush(struct fs_file *f, struct pending *p, struct err *e)
{
	_cleanup_strbuf_ struct strbuf text = STRBUF_INIT;
	bool async = false;
	int rc = file_spec_take(f, &text, &async);
	return rc <= 0 ? rc : new_act(f, &text, async, p, e);
}

static int sandboxes_list(const struct fs_node *dir, const struct caller *who,
			  int (*fn)(const char *name, void *arg), void *arg)
{
	(void)dir;
	_cleanup_strbuf_ struct strbuf names = STRBUF_INIT;
	int rc = ops_sandboxes_each(who, tree_sandbox_name, &names);
	return rc < 0 ? rc : tree_names_each(&names, fn, arg);
}

static int sandbox_mkdir(const struct fs_node *dir, const struct caller *who, const char *name,
			 struct err *e)
{
	(void)dir;
	return ops_sandbox_create(who, name, e);
}

static int sandbox_rmdir(const struct fs_node *child, const struct caller *who, struct pending *p,
			 struct err *e)
{
	(void)p;
	return ops_sandbox_remove(who, child->id, e);
}

/* index lists what the reader may see; new is for who may create (FS_CREATORS). */
static const struct fs_entry sandboxes_files[] = {
    {"index", S_IFREG | 0444, .flags = FS_SANDBOXES_TIME, .read = index_read},
    {"new", S_IFREG | 0660, .flags = FS_STREAM | FS_CREATORS, .write = new_write,
     .flush = new_flush},
};

static const struct fs_entry sandbox_entry = {
    .mode = S_IFDIR | 0700,
    .scope = SCOPE_SANDBOX,
    .flags = FS_OBJECT,
    .dir = &sandbox_dir,
};

const struct fs_dir fs_sandboxes_dir =
    FS_DIR(sandboxes_files, .child = &sandbox_entry, .each = sandboxes_list, .mkdir = sandbox_mkdir,
	   .rmdir = sandbox_rmdir);
