#include "fs/tree.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "fs/control.h"
#include "lib/logfile.h"
#include "lib/util.h"
#include "runtime/images.h"

#define DIR_TIMEOUT 0.5 /* seconds; files get none: their content changes any time */

/* Sandbox or snapshot @id as @who sees it (ops applies the rule), in a new allocation. */
static int object_load(enum fs_scope scope, const struct caller *who, const char *id, void **out)
{
	const bool sandbox = scope == SCOPE_SANDBOX;
	_cleanup_free_ void *obj =
	    malloc(sandbox ? sizeof(struct sandbox) : sizeof(struct snapshot));
	if (!obj)
		return -ENOMEM;
	int rc = sandbox ? ops_sandbox_get(who, id, obj) : ops_snapshot_get(who, id, obj);
	if (rc == 0)
		*out = steal_ptr(obj);
	return rc;
}

int tree_sandbox(const struct caller *who, const char *id, struct sandbox **out)
{
	void *obj = NULL;
	int rc = object_load(SCOPE_SANDBOX, who, id, &obj);
	*out = obj;
	return rc;
}

int tree_snapshot(const struct caller *who, const char *id, struct snapshot **out)
{
	void *obj = NULL;
	int rc = object_load(SCOPE_SNAPSHOT, who, id, &obj);
	*out = obj;
	return rc;
}

/* What stat shows of a node besides its row. */
struct node_attr {
	int64_t ms; /* its mtime: its object's last change; the daemon's start when it has none */
	uid_t uid;  /* its object's owner; root's when it has none */
	gid_t gid;
};

/* Does @n's object exist for @who? Its time and owner into @a. */
static int scope_load(const struct fs_node *n, const struct caller *who, struct node_attr *a)
{
	_cleanup_free_ struct sandbox *sb = NULL;
	_cleanup_free_ struct snapshot *snap = NULL;
	int rc = 0;

	*a = (struct node_attr){ops_started_at(), access_root_uid(), access_root_gid()};
	switch (n->scope) {
	case SCOPE_NONE:
		break;
	case SCOPE_IMAGE:
		rc = images_exists(ops_images(), n->id);
		break;
	case SCOPE_SANDBOX:
		rc = tree_sandbox(who, n->id, &sb);
		if (rc == 0)
			*a = (struct node_attr){ops_sandbox_changed_at(sb), sb->owner_uid,
						sb->owner_gid};
		break;
	case SCOPE_SNAPSHOT:
		rc = tree_snapshot(who, n->id, &snap);
		if (rc == 0)
			*a = (struct node_attr){ops_snapshot_changed_at(snap), snap->owner_uid,
						snap->owner_gid};
		break;
	}
	return rc;
}

static int node_load(const struct fs_node *n, const struct caller *who, struct node_attr *a)
{
	int rc = scope_load(n, who, a);
	if (rc == 0 && n->ent->exists)
		rc = n->ent->exists(n, who);
	if (n->ent->flags & FS_CREATORS)
		a->gid = access_create_gid();
	if (n->ent->flags & FS_SANDBOXES_TIME)
		a->ms = ops_tree_changed_at(OPS_OBJ_SANDBOX);
	if (n->ent->flags & FS_SNAPSHOTS_TIME)
		a->ms = ops_tree_changed_at(OPS_OBJ_SNAPSHOT);
	if (n->ent->flags & FS_LIVE_TIME)
		a->ms = now_ms();
	return rc;
}

int tree_check(const struct fs_node *n, const struct caller *who)
{
	struct node_attr a;
	return node_load(n, who, &a);
}

int tree_open_check(const struct fs_node *n, const struct caller *who, int flags)
{
	struct node_attr a;
	int rc = node_load(n, who, &a);
	if (rc < 0 || access_may_open(who, a.uid, a.gid, n->ent->mode, flags & O_ACCMODE))
		return rc;
	return -EACCES;
}

static const struct fs_entry *fixed_entry(const struct fs_dir *d, const char *name)
{
	for (size_t i = 0; i < d->nentries; i++)
		if (strcmp(d->entries[i].name, name) == 0)
			return &d->entries[i];
	return NULL;
}

/* Fill @out as @dir's child @name of kind @ent (NULL: none), without checking it exists. */
static int node_make(const struct fs_node *dir, const struct fs_entry *ent, const char *name,
		     struct fs_node *out)
{
	const bool object = ent && (ent->flags & FS_OBJECT);
	int rc;

	out->ino = 0;
	out->parent = dir->ino;
	out->ent = ent;
	out->scope = object ? ent->scope : dir->scope;
	rc = xsnprintf(out->id, sizeof(out->id), "%s", object ? name : dir->id);
	if (rc >= 0)
		rc = xsnprintf(out->name, sizeof(out->name), "%s", name);
	if (rc >= 0 && dir->path[0])
		rc = xsnprintf(out->path, sizeof(out->path), "%s/%s", dir->path, name);
	else if (rc >= 0)
		rc = xsnprintf(out->path, sizeof(out->path), "%s", name);
	return rc < 0 ? -ENOENT : 0;
}

int tree_child(const struct fs_node *dir, const char *name, const struct caller *who,
	       struct fs_node *out)
{
	const struct fs_dir *d = dir->ent->dir;
	if (!d)
		return -ENOTDIR;
	const struct fs_entry *ent = fixed_entry(d, name);
	if (!ent)
		ent = d->child;
	/* Even a name with no row gets its path: refusals name it in `errors`. */
	int rc = node_make(dir, ent, name, out);
	if (rc == 0 && !ent)
		rc = -ENOENT;
	return rc < 0 ? rc : tree_check(out, who);
}

static int journal_stat(const struct fs_node *n, struct stat *st)
{
	int64_t size;
	struct timespec mtime;
	if (logfile_stat(n->ent->journal(), &size, &mtime) < 0)
		return 0; /* not open (yet): empty */
	st->st_size = size;
	st->st_mtim = mtime;
	st->st_ctim = mtime;
	return 0;
}

static int log_stat(const struct fs_node *n, const struct caller *who, struct stat *st)
{
	int64_t size;
	struct timespec mtime;
	struct logfile *lf;
	int rc = n->ent->log->open(n, who, &lf);
	if (rc < 0)
		return rc;
	rc = n->ent->log->stat(lf, &size, &mtime);
	n->ent->log->close(lf);
	if (rc == 0 && mtime.tv_sec) {
		st->st_mtim = mtime;
		st->st_ctim = mtime;
	}
	if (rc == 0)
		st->st_size = size;
	return rc;
}

static int content_size(const struct fs_node *n, const struct caller *who, struct stat *st)
{
	const struct fs_entry *ent = n->ent;
	if (ent->journal)
		return journal_stat(n, st);
	if (ent->log)
		return log_stat(n, who, st);
	if (S_ISLNK(ent->mode)) {
		char target[FS_PATH_MAX];
		int rc = ent->link(n, who, target, sizeof(target));
		st->st_size = rc < 0 ? 0 : (off_t)strlen(target);
		return rc;
	}
	if (!S_ISREG(ent->mode) || !ent->read || (ent->flags & FS_NOSIZE))
		return 0;
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	int rc = ent->read(n, who, &sb);
	st->st_size = (off_t)sb.len;
	return rc;
}

int tree_stat(const struct fs_node *n, const struct caller *who, struct stat *st)
{
	struct node_attr a;
	int rc = node_load(n, who, &a);
	if (rc < 0)
		return rc;
	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_mode = n->ent->mode;
	st->st_nlink = S_ISDIR(n->ent->mode) ? 2 : 1;
	/* What the kernel checks the modes against under default_permissions. */
	st->st_uid = a.uid;
	st->st_gid = a.gid;
	st->st_blksize = 4096;
	st->st_mtim = (struct timespec){.tv_sec = a.ms / 1000, .tv_nsec = (a.ms % 1000) * 1000000};
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
	/*
	 * Honest, the files that answer their writes (fork, snapshot, new,
	 * exec) too, so that tar and rsync archive what cat shows; the size
	 * their parallel writers need is raised for them alone (fs.c,
	 * open_for_writers()).
	 */
	rc = content_size(n, who, st);
	st->st_blocks = (st->st_size + 511) / 512;
	/* A failing generator (the store unreachable, say) is for read to report, not stat. */
	return rc == -ENOENT ? rc : 0;
}

/* Other users' requests arrive (allow_other): see tree_set_shared(). */
static bool shared;

void tree_set_shared(bool on)
{
	shared = on;
}

double tree_timeout(const struct fs_node *n)
{
	if (shared && (n->ent->flags & FS_OBJECT))
		return 0.0;
	return S_ISDIR(n->ent->mode) || (n->ent->flags & FS_STABLE_LINK) ? DIR_TIMEOUT : 0.0;
}

/* The inode number a listing shows: the kernel's if it holds one, else a stable made-up one. */
static fuse_ino_t list_ino(const struct fs_node *child)
{
	fuse_ino_t ino = inode_find(child->path);
	if (ino)
		return ino;
	return fnv1a(child->path) | (1ull << 63);
}

struct list_walk {
	const struct fs_node *dir;
	const struct caller *who;
	tree_fill_fn fn;
	void *arg;
};

static int list_one(const struct fs_entry *ent, const char *name, struct list_walk *w)
{
	struct fs_node child;
	/* A file that blocks (wait) or leads into a sandbox (.root): `grep -r`, `tar` never meet
	 * it. */
	if (ent->flags & FS_UNLISTED)
		return 0;
	if (node_make(w->dir, ent, name, &child) < 0)
		return 0;
	if (ent->exists && ent->exists(&child, w->who) < 0)
		return 0;
	return w->fn(name, ent->mode, list_ino(&child), w->arg);
}

static int list_dynamic(const char *name, void *arg)
{
	struct list_walk *w = arg;
	const struct fs_dir *d = w->dir->ent->dir;
	/* A fixed name wins over an object of the same name, in lookups as here. */
	if (fixed_entry(d, name))
		return 0;
	return list_one(d->child, name, w);
}

int tree_list(const struct fs_node *dir, const struct caller *who, tree_fill_fn fn, void *arg)
{
	const struct fs_dir *d = dir->ent->dir;
	struct list_walk w = {dir, who, fn, arg};
	int rc = fn(".", S_IFDIR, dir->ino, arg);
	if (rc == 0)
		rc = fn("..", S_IFDIR, dir->parent, arg);
	for (size_t i = 0; rc == 0 && i < d->nentries; i++)
		rc = list_one(&d->entries[i], d->entries[i].name, &w);
	if (rc == 0 && d->each)
		rc = d->each(dir, who, list_dynamic, &w);
	return rc;
}

void tree_report(const struct fs_node *n, const struct caller *who, int rc, struct err *e)
{
	if (e->code == 0)
		err_set(e, -rc, "%s: %s", n->path, strerror(-rc));
	switch (n->scope) {
	case SCOPE_SANDBOX:
		ops_report_error(who, OPS_OBJ_SANDBOX, n->id, n->path, e);
		break;
	case SCOPE_SNAPSHOT:
		ops_report_error(who, OPS_OBJ_SNAPSHOT, n->id, n->path, e);
		break;
	default:
		ops_report_error(who, OPS_OBJ_LIST, "", n->path, e);
		break;
	}
}

int tree_names_add(struct strbuf *names, const char *name)
{
	strbuf_add(names, name, strlen(name) + 1);
	return strbuf_error(names);
}

int tree_sandbox_name(const struct sandbox *sb, void *names)
{
	return tree_names_add(names, sb->id);
}

int tree_snapshot_name(const struct snapshot *snap, void *names)
{
	return tree_names_add(names, snap->id);
}

int tree_names_each(const struct strbuf *names, int (*fn)(const char *name, void *arg), void *arg)
{
	int rc = 0;
	for (size_t at = 0; rc == 0 && at < names->len; at += strlen(names->buf + at) + 1)
		rc = fn(names->buf + at, arg);
	return rc;
}

int tree_line(struct strbuf *out, const char *s)
{
	if (!*s)
		return 0;
	strbuf_adds(out, s);
	if (s[strlen(s) - 1] != '\n')
		strbuf_add(out, "\n", 1);
	return strbuf_error(out);
}
