#include "fs/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fs/file.h"
#include "fs/inside.h"
#include "fs/inode.h"
#include "fs/notify.h"
#include "fs/replace.h"
#include "fs/scratch.h"
#include "fs/tree.h"

struct fs {
	struct fuse_session *se;
	bool mounted;
	bool signals;
	char *mountpoint;
	dev_t dev; /* the mount's device: is what the mountpoint shows still ours? */
};

/* An open directory: its listing, made by the read at offset 0. */
struct fs_dirh {
	pthread_mutex_t lock;
	struct fs_node node;
	/*
	 * fuse_add_direntry records, or fuse_add_direntry_plus ones (each
	 * without an entry: the kernel looks these files up itself) when the
	 * read at offset 0 was a READDIRPLUS; offsets are byte offsets into it.
	 */
	struct strbuf buf;
	bool plus;
};

static struct fs_file *file_of(const struct fuse_file_info *fi)
{
	return (struct fs_file *)(uintptr_t)fi->fh;
}

static struct fs_dirh *dirh_of(const struct fuse_file_info *fi)
{
	return (struct fs_dirh *)(uintptr_t)fi->fh;
}

/* --- who asks ----------------------------------------------------------- */

/*
 * The credentials of @req's caller, for ops/access.h to judge. The
 * supplementary groups cost a read of /proc, so only @groups asks for them
 * (who may create, and group-owned files), and never for root, whom no
 * group changes. Groups that cannot be read grant nothing.
 */
static void caller_of(fuse_req_t req, bool groups, struct caller *out)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	out->uid = ctx->uid;
	out->gid = ctx->gid;
	out->ngroups = 0;
	if (!groups || access_is_root(out))
		return;
	int n = fuse_req_getgroups(req, CALLER_GROUPS_MAX, out->groups);
	out->ngroups = n < 0 ? 0 : n > CALLER_GROUPS_MAX ? CALLER_GROUPS_MAX : (unsigned)n;
}

/* --- names and attributes --------------------------------------------- */

/* Count a lookup of @n and reply its entry; the count is undone if the reply fails. */
static int reply_entry(fuse_req_t req, const struct caller *who, struct fs_node *n)
{
	struct fuse_entry_param ep = {0};
	int rc = inode_ref(n);
	if (rc < 0)
		return rc;
	rc = tree_stat(n, who, &ep.attr);
	if (rc < 0) {
		inode_forget(n->ino, 1);
		return rc;
	}
	ep.ino = n->ino;
	ep.generation = 1;
	ep.attr_timeout = tree_timeout(n);
	ep.entry_timeout = tree_timeout(n);
	if (fuse_reply_entry(req, &ep) != 0)
		inode_forget(n->ino, 1);
	return 0;
}

/*
 * Requests under sandboxes/<id>/root/ go to fs/inside.c: those on a node
 * under it (an inside number) and those on root/'s own children. @root is
 * root/'s node when @ino is root/ itself.
 */
static bool goes_inside(fuse_ino_t ino, struct fs_node *root)
{
	if (inside_owns(ino))
		return true;
	return inode_get(ino, root) == 0 && inside_is_root(root);
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs_node dir, child;
	struct caller who;
	if (goes_inside(parent, &dir)) {
		inside_lookup(req, parent, &dir, name);
		return;
	}
	caller_of(req, false, &who);
	int rc = inode_get(parent, &dir);
	if (rc == 0)
		rc = replace_lookup(&dir, name, &who, &child); /* 1: a scratch file */
	if (rc == 0)
		rc = tree_child(&dir, name, &who, &child);
	if (rc >= 0)
		rc = reply_entry(req, &who, &child);
	/* A plain error, not an entry with ino 0: the kernel caches no negative entry. */
	if (rc < 0)
		fuse_reply_err(req, -rc);
}

static void forget_one(fuse_ino_t ino, uint64_t nlookup)
{
	if (inside_owns(ino))
		inside_forget(ino, nlookup);
	else
		inode_forget(ino, nlookup);
}

static void ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	forget_one(ino, nlookup);
	fuse_reply_none(req);
}

static void ll_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		forget_one(forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

/* Node @ino and its attributes as the caller of @req sees them. */
static int node_stat(fuse_req_t req, fuse_ino_t ino, struct fs_node *n, struct caller *who,
		     struct stat *st)
{
	caller_of(req, false, who);
	int rc = inode_get(ino, n);
	return rc < 0 ? rc : tree_stat(n, who, st);
}

static void reply_attr(fuse_req_t req, int rc, const struct fs_node *n, const struct stat *st)
{
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, st, tree_timeout(n));
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct fs_node n;
	struct stat st;
	struct caller who;
	if (inside_owns(ino)) {
		inside_getattr(req, ino);
		return;
	}
	reply_attr(req, node_stat(req, ino, &n, &who, &st), &n, &st);
}

/*
 * Shells truncate what they write to: a size of 0 on a control file is a
 * no-op. A read-only file's refusal is its mode's, as at open (fs/tree.h),
 * and recorded nowhere; a size other than 0 is a bad request, and is.
 */
static int setattr_check(const struct fs_node *n, const struct caller *who, const struct stat *attr,
			 int to_set)
{
	struct err e = {0};
	int rc = 0;
	if ((to_set & FUSE_SET_ATTR_SIZE) && !n->ent->write)
		return -EACCES;
	if ((to_set & FUSE_SET_ATTR_SIZE) && attr->st_size != 0)
		rc = err_set(&e, EINVAL, "%s: only a truncate to 0 is accepted", n->path);
	if (rc < 0)
		tree_report(n, who, rc, &e);
	else if ((to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) &&
		 !n->ent->write)
		rc = -EPERM; /* a writable file's are taken and ignored: fs/replace.h */
	return rc;
}

/*
 * The size a truncate to 0 (a shell's `>`) leaves in the kernel until its
 * next GETATTR: a control file's lines fit in it. The kernel sends writes
 * of several writers to one file at once (reply_open()) only while they end
 * within the size it knows, and a write past it waits for every other;
 * the truncate's reply is what it knows when the line is written next.
 */
static void truncate_size(const struct fs_node *n, int to_set, struct stat *st)
{
	if ((to_set & FUSE_SET_ATTR_SIZE) && n->ent->write && st->st_size < CTL_LINE_MAX)
		st->st_size = CTL_LINE_MAX;
}

static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct fs_node n;
	struct stat st;
	struct caller who;
	if (inside_owns(ino)) {
		inside_setattr(req, ino, attr, to_set);
		return;
	}
	int rc = node_stat(req, ino, &n, &who, &st);
	if (rc == 0 && replace_is_scratch(&n)) {
		replace_setattr(req, &n, &who, attr, to_set, fi);
		return;
	}
	if (rc == 0)
		rc = setattr_check(&n, &who, attr, to_set);
	if (rc == 0)
		truncate_size(&n, to_set, &st);
	reply_attr(req, rc, &n, &st);
}

static void ll_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct fs_node n;
	char target[FS_PATH_MAX];
	struct caller who;
	if (inside_owns(ino)) {
		inside_readlink(req, ino);
		return;
	}
	caller_of(req, false, &who);
	int rc = inode_get(ino, &n);
	if (rc == 0)
		rc = tree_check(&n, &who);
	if (rc == 0)
		rc = n.ent->link ? n.ent->link(&n, &who, target, sizeof(target)) : -EINVAL;
	/* Its target may change: the kernel keeps none (notify.h), queued before the answer. */
	bool dropped = rc < 0 || (n.ent->flags & FS_STABLE_LINK) || notify_link_read(ino);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_readlink(req, target);
	if (!dropped)
		notify_link_drop(ino);
}

/* --- mkdir and rmdir -------------------------------------------------- */

static int do_mkdir(const struct fs_node *dir, const struct caller *who, const char *name,
		    struct fs_node *child)
{
	const struct fs_dir *d = dir->ent->dir;
	struct err e = {0};
	int rc = tree_child(dir, name, who, child);
	if (rc == 0)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	if (!d->mkdir || child->ent != d->child)
		rc = err_set(&e, EPERM, "%s: directories are made in sandboxes/ only", child->path);
	else
		rc = d->mkdir(dir, who, name, &e);
	/* A new object: not the removed one of that name the kernel may still hold (fs/inode.h). */
	if (rc == 0)
		inode_detach(child->path);
	if (rc < 0)
		tree_report(child, who, rc, &e);
	return rc;
}

static void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct fs_node dir, child = {0};
	struct caller who;
	if (goes_inside(parent, &dir)) {
		inside_mkdir(req, parent, &dir, name, mode);
		return;
	}
	caller_of(req, true, &who);
	int rc = inode_get(parent, &dir);
	if (rc == 0)
		rc = do_mkdir(&dir, &who, name, &child);
	if (rc == 0)
		rc = reply_entry(req, &who, &child);
	if (rc < 0)
		fuse_reply_err(req, -rc);
}

/*
 * A name of the tree removed by unlink, or a fixed directory of it by
 * rmdir: `rm -rf sandboxes/<id>` removes each file and subdirectory of the
 * directory before the directory itself. A sandbox's own names go with the
 * sandbox: while rmdir would take it (created, terminated, failed) their
 * removal is accepted and changes nothing (the rmdir after it removes the
 * whole); otherwise EBUSY and nothing changes. Anything else is EPERM.
 * Recorded nowhere: the directory's rmdir is the request, and reports its
 * refusal once, not once per file.
 */
static int remove_part(const struct fs_node *dir, const char *name, const struct caller *who)
{
	struct fs_node child;
	struct err e = {0};
	int rc = tree_child(dir, name, who, &child);
	if (rc < 0)
		return rc;
	if (child.scope != SCOPE_SANDBOX || (child.ent->flags & (FS_OBJECT | FS_INSIDE)))
		return -EPERM;
	return ops_sandbox_may_remove(who, child.id, &e);
}

/* rmdir of a fixed directory (a sandbox's snapshots/): as an unlink (remove_part()). */
static bool is_part(const struct fs_node *dir, const char *name)
{
	const struct fs_dir *d = dir->ent->dir;
	for (size_t i = 0; d && i < d->nentries; i++)
		if (strcmp(d->entries[i].name, name) == 0)
			return dir->scope == SCOPE_SANDBOX;
	return false;
}

static void ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs_node dir, child = {0};
	struct err e = {0};
	struct caller who;
	if (goes_inside(parent, &dir)) {
		inside_remove(parent, req, &dir, name, true);
		return;
	}
	caller_of(req, false, &who);
	int rc = inode_get(parent, &dir);
	if (rc == 0 && is_part(&dir, name)) {
		fuse_reply_err(req, -remove_part(&dir, name, &who));
		return;
	}
	if (rc == 0)
		rc = tree_child(&dir, name, &who, &child);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	const struct fs_dir *d = dir.ent->dir;
	struct pending *p = pending_start(req, PENDING_ERR, 0, 0);
	if (!p) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (!d->rmdir || child.ent != d->child)
		rc = err_set(&e, EPERM, "%s is part of the tree and cannot be removed", child.path);
	else
		rc = d->rmdir(&child, &who, p, &e);
	if (rc == 0) /* its scratch files and marks go with it (a new one may take the name) */
		scratch_forget_dir(child.path);
	if (rc < 0)
		tree_report(&child, &who, rc, &e);
	pending_done(p, rc, NULL, 0);
}

/*
 * The tree's names are fixed: nothing is linked, only scratch files are
 * created and renamed (fs/replace.h), and unlinked but with their sandbox
 * (remove_part()), but under root/
 * (fs/inside.c), where only device nodes, FIFOs and sockets are not made
 * (EPERM: the mount is nodev).
 */
static void ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	(void)parent, (void)name, (void)mode, (void)rdev;
	struct fs_node dir;
	fuse_reply_err(req, goes_inside(parent, &dir) ? EPERM : EACCES);
}

static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct fs_node dir;
	struct caller who;
	if (goes_inside(parent, &dir)) {
		inside_create(req, parent, &dir, name, mode, fi);
		return;
	}
	/* Groups too: a bound scratch file's close writes as an open file would (fork). */
	caller_of(req, true, &who);
	int rc = inode_get(parent, &dir);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		replace_create(req, &dir, &who, name, fi);
}

/*
 * An unlink's answer from remove_part()'s @part (0: a part of a sandbox
 * rmdir would remove, rm -rf's) and replace_unlink()'s @scratch (0: a
 * scratch file gone, or a writable file marked for the create of install
 * or mv). Either taken is 0: a removable sandbox's file is taken even when
 * no mark could be made (EDQUOT), so rm -rf never fails on the count.
 * Else the scratch store's errno, unless it only says "not mine" (EPERM)
 * of a tree file remove_part() refused (EBUSY while its sandbox runs).
 */
static int unlink_answer(int part, int scratch)
{
	if (part == 0 || scratch == 0)
		return 0;
	return scratch == -EPERM && part != -ENOENT ? part : scratch;
}

static void ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs_node dir;
	struct caller who;
	if (goes_inside(parent, &dir)) {
		inside_remove(parent, req, &dir, name, false);
		return;
	}
	caller_of(req, false, &who);
	int rc = inode_get(parent, &dir);
	if (rc == 0)
		rc = unlink_answer(remove_part(&dir, name, &who), replace_unlink(&dir, &who, name));
	fuse_reply_err(req, -rc);
}

static void ll_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct fs_node dir;
	if (goes_inside(parent, &dir))
		inside_symlink(req, link, parent, &dir, name);
	else
		fuse_reply_err(req, EPERM);
}

static void ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct fs_node dir, newdir;
	bool from = goes_inside(parent, &dir), to = goes_inside(newparent, &newdir);
	struct caller who;
	if (from && to) {
		inside_rename(req, parent, &dir, name, newparent, &newdir, newname, flags);
		return;
	}
	if (from || to) {
		fuse_reply_err(req, EXDEV);
		return;
	}
	/* Groups too: a rename onto sandboxes' files writes as an open file would (file.c). */
	caller_of(req, true, &who);
	int rc = inode_get(parent, &dir);
	if (rc == 0)
		rc = inode_get(newparent, &newdir);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		replace_rename(req, &dir, name, &newdir, newname, flags, &who);
}

static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct fs_node dir;
	if (inside_owns(ino) && goes_inside(newparent, &dir))
		inside_link(req, ino, newparent, &dir, newname);
	else
		fuse_reply_err(req, inside_owns(ino) ? EXDEV : EPERM);
}

/* --- open files -------------------------------------------------------- */

/*
 * Content is made per read: direct_io, so no page cache, and reads past
 * st_size still reach us. A control file also lets the kernel send writes
 * of several writers at once (FOPEN_PARALLEL_DIRECT_WRITES, Linux 6.2):
 * without it the kernel holds the inode lock for the whole write, so four
 * `echo 1 > fork` on one snapshot would run one after another. libfuse 3.14
 * has no field for that flag (3.15 adds fi->parallel_direct_writes), and
 * fuse_reply_open() is fuse_reply_buf() of a struct fuse_open_out, the
 * kernel's ABI, so we send that ourselves (docs/control-files.md).
 */
static int reply_open(fuse_req_t req, const struct fuse_file_info *fi, bool writable)
{
	struct fuse_open_out out = {.fh = fi->fh, .open_flags = FOPEN_DIRECT_IO};
	if (writable)
		out.open_flags |= FOPEN_PARALLEL_DIRECT_WRITES;
	return fuse_reply_buf(req, (const char *)&out, sizeof(out));
}

/*
 * The kernel lets several writers of one file in at once only for writes
 * that end within the size it knows (a write past it takes the inode lock
 * alone). The files that answer their writes (fork, snapshot, new, exec)
 * show their honest size, often 0, so that tar and rsync copy what cat
 * shows; a writable open of one raises the size the kernel knows to a
 * line's most first, with a FUSE_NOTIFY_STORE of one byte at its end (a
 * page never marked up to date: direct_io reads do not use it). The next
 * GETATTR, a stat's, makes it honest again; meanwhile writers only run one
 * after another, as a shell's `>` does: its truncate waits for them all.
 */
static void open_for_writers(fuse_req_t req, fuse_ino_t ino, const struct fs_node *n, int flags)
{
	static const char end = '\n';
	const struct fs *fs = fuse_req_userdata(req);
	if ((flags & O_ACCMODE) == O_RDONLY || !(n->ent->flags & FS_STREAM) || !n->ent->write)
		return;
	struct fuse_bufvec one = FUSE_BUFVEC_INIT(1);
	one.buf[0].mem = (void *)&end;
	/* Best effort: without it the writes are right, only one at a time. */
	fuse_lowlevel_notify_store(fs->se, ino, CTL_LINE_MAX - 1, &one, 0);
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_node n;
	struct fs_file *f = NULL;
	/* Groups too: the file keeps them for what its writes create (new, fork). */
	struct caller who;
	if (inside_owns(ino)) {
		inside_open(req, ino, fi);
		return;
	}
	caller_of(req, true, &who);
	int rc = inode_get(ino, &n);
	if (rc == 0 && replace_is_scratch(&n)) {
		replace_open(req, &n, &who, fi);
		return;
	}
	if (rc == 0 && S_ISDIR(n.ent->mode))
		rc = -EISDIR;
	/* A refusal here is the mode's, not a request's: nothing is recorded (fs/tree.h). */
	if (rc == 0)
		rc = tree_open_check(&n, &who, fi->flags);
	if (rc == 0)
		rc = file_open(&n, &who, fi->flags, &f);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uintptr_t)f;
	open_for_writers(req, ino, &n, fi->flags);
	if (reply_open(req, fi, n.ent->write != NULL) != 0)
		file_release(f);
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	if (inside_owns(ino))
		inside_read(req, size, off, fi);
	else if (replace_handle(fi))
		replace_read(req, size, off, fi);
	else
		file_read(req, file_of(fi), size, off);
}

static void ll_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	if (inside_owns(ino))
		inside_write(req, buf, size, off, fi);
	else if (replace_handle(fi))
		replace_write(req, buf, size, off, fi);
	else /* control files are streams of lines: no offset */
		file_write(req, file_of(fi), buf, size, fi->lock_owner);
}

static void ll_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (inside_owns(ino))
		inside_flush(req, fi);
	else if (replace_handle(fi))
		replace_flush(req, fi);
	else
		file_flush(req, file_of(fi), fi->lock_owner);
}

static void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (inside_owns(ino)) {
		inside_release(req, fi);
		return;
	}
	if (replace_handle(fi)) {
		replace_release(req, fi);
		return;
	}
	file_release(file_of(fi));
	fuse_reply_err(req, 0);
}

static void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	if (inside_owns(ino))
		inside_fsync(req, fi);
	else
		fuse_reply_err(req, 0); /* a control file has nothing to sync */
}

static void ll_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		    struct fuse_pollhandle *ph)
{
	if (inside_owns(ino) || replace_handle(fi))
		fuse_reply_err(req, ENOSYS); /* the kernel then takes files as always ready */
	else
		file_poll(req, file_of(fi), ph);
}

/* --- directories ------------------------------------------------------- */

static void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_node n;
	struct caller who;
	if (goes_inside(ino, &n)) {
		inside_opendir(req, ino, &n, fi);
		return;
	}
	caller_of(req, false, &who);
	int rc = inode_get(ino, &n);
	if (rc == 0)
		rc = tree_check(&n, &who);
	if (rc == 0 && !n.ent->dir)
		rc = -ENOTDIR;
	struct fs_dirh *dh = rc == 0 ? calloc(1, sizeof(*dh)) : NULL;
	if (rc == 0 && !dh)
		rc = -ENOMEM;
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	pthread_mutex_init(&dh->lock, NULL);
	dh->node = n;
	fi->fh = (uintptr_t)dh;
	if (fuse_reply_open(req, fi) != 0) {
		pthread_mutex_destroy(&dh->lock);
		free(dh);
	}
}

struct dir_fill {
	fuse_req_t req;
	struct strbuf *buf;
	bool plus;
};

static int dir_add(const char *name, mode_t mode, fuse_ino_t ino, void *arg)
{
	struct dir_fill *df = arg;
	char rec[512]; /* a record: its header (24, or 152 plus) and a name of at most 255 */
	struct fuse_entry_param ep = {.attr = {.st_ino = ino, .st_mode = mode}}; /* .ino 0 */
	size_t need = df->plus ? fuse_add_direntry_plus(df->req, NULL, 0, name, NULL, 0)
			       : fuse_add_direntry(df->req, NULL, 0, name, NULL, 0);
	if (need > sizeof(rec))
		return -ENAMETOOLONG;
	off_t next = (off_t)(df->buf->len + need);
	if (df->plus)
		fuse_add_direntry_plus(df->req, rec, sizeof(rec), name, &ep, next);
	else
		fuse_add_direntry(df->req, rec, sizeof(rec), name, &ep.attr, next);
	strbuf_add(df->buf, rec, need);
	return strbuf_error(df->buf);
}

static void dir_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi, bool plus)
{
	struct fs_node root;
	if (goes_inside(ino, &root)) {
		(plus ? inside_readdirplus : inside_readdir)(req, size, off, fi);
		return;
	}
	struct fs_dirh *dh = dirh_of(fi);
	_cleanup_free_ char *copy = NULL;
	size_t n = 0;
	int rc = 0;
	pthread_mutex_lock(&dh->lock);
	/* A listing made for one form is not served to the other: the records differ. */
	if (off != 0 && plus != dh->plus)
		rc = -EINVAL;
	if (off == 0) {
		struct dir_fill df = {req, &dh->buf, plus};
		dh->plus = plus;
		struct caller who;
		caller_of(req, false, &who);
		strbuf_reset(&dh->buf);
		rc = tree_list(&dh->node, &who, dir_add, &df);
		if (rc == 0) /* and the caller's scratch files (fs/replace.h) */
			rc = replace_list(&dh->node, &who, dir_add, &df);
	}
	/* The kernel stops at a record cut by @size and asks again from its offset. */
	if (rc == 0) {
		size_t from = (size_t)off < dh->buf.len ? (size_t)off : dh->buf.len;
		n = dh->buf.len - from < size ? dh->buf.len - from : size;
		copy = malloc(n ? n : 1);
		rc = copy ? 0 : -ENOMEM;
		if (copy)
			memcpy(copy, strbuf_str(&dh->buf) + from, n);
	}
	pthread_mutex_unlock(&dh->lock);
	/* After the answer the kernel may release @dh: it is not touched again. */
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, copy, n);
}

static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	dir_read(req, ino, size, off, fi, false);
}

static void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	dir_read(req, ino, size, off, fi, true);
}

static void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_node root;
	if (goes_inside(ino, &root)) {
		inside_releasedir(req, fi);
		return;
	}
	struct fs_dirh *dh = dirh_of(fi);
	strbuf_release(&dh->buf);
	pthread_mutex_destroy(&dh->lock);
	free(dh);
	fuse_reply_err(req, 0);
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs st = {.f_bsize = 4096, .f_frsize = 4096, .f_namemax = 255};
	fuse_reply_statfs(req, &st);
}

static void ll_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/*
	 * O_TRUNC as a SETATTR (truncate_size()), not with the open (libfuse's
	 * default): the kernel then sets the file's size to 0 itself, and takes
	 * every write past that size one at a time.
	 */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	/*
	 * READDIRPLUS for every read of a directory, not only the first of
	 * each (the "auto" mode): a listing of root/ then carries each
	 * entry's attributes, and `ls -l` or `cp -r` of a directory of any
	 * size looks none of them up. The control tree answers it without
	 * entries, as a plain listing.
	 */
	conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	/* root -> .root read once, not at every path through it (fs/notify.h: links). */
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
}

static const struct fuse_lowlevel_ops ll_ops = {
    .init = ll_init,
    .lookup = ll_lookup,
    .forget = ll_forget,
    .forget_multi = ll_forget_multi,
    .getattr = ll_getattr,
    .setattr = ll_setattr,
    .readlink = ll_readlink,
    .mknod = ll_mknod,
    .mkdir = ll_mkdir,
    .unlink = ll_unlink,
    .rmdir = ll_rmdir,
    .symlink = ll_symlink,
    .rename = ll_rename,
    .link = ll_link,
    .open = ll_open,
    .read = ll_read,
    .write = ll_write,
    .flush = ll_flush,
    .release = ll_release,
    .fsync = ll_fsync,
    .opendir = ll_opendir,
    .readdir = ll_readdir,
    .readdirplus = ll_readdirplus,
    .releasedir = ll_releasedir,
    .statfs = ll_statfs,
    .create = ll_create,
    .poll = ll_poll,
};

/* --- the session -------------------------------------------------------- */

/*
 * The device the file at @path is on, without asking the filesystem: a
 * FUSE mount nobody serves must not be sent a request.
 */
static int mount_dev(const char *path, dev_t *dev)
{
	struct statx sx;
	if (statx(AT_FDCWD, path, AT_STATX_DONT_SYNC | AT_SYMLINK_NOFOLLOW, 0, &sx) < 0)
		return -errno;
	*dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
	return 0;
}

static bool still_mounted(const struct fs *fs)
{
	dev_t dev;
	return mount_dev(fs->mountpoint, &dev) == 0 && dev == fs->dev;
}

/*
 * Once the loop has ended nobody serves requests, and one in flight may
 * hold a directory lock that the notifier's call waits for. MNT_FORCE
 * aborts the connection first, which fails every such request, and then
 * unmounts unless the mount is busy; a busy one is detached. Only our own
 * mount: after `fusermount3 -u` the mountpoint may show another one.
 * fuse_session_unmount() then only closes the device, or, where we may not
 * unmount (not root), unmounts the usual way.
 */
static void unmount(struct fs *fs)
{
	if (still_mounted(fs))
		umount2(fs->mountpoint, MNT_FORCE | UMOUNT_NOFOLLOW);
	if (still_mounted(fs))
		umount2(fs->mountpoint, MNT_DETACH | UMOUNT_NOFOLLOW);
	fuse_session_unmount(fs->se);
}

/* fuse_opt_parse's callback: note allow_other, keep every argument as it is. */
static int opt_seen(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	(void)arg, (void)outargs;
	if (key == 0)
		*(bool *)data = true;
	return 1;
}

/*
 * With allow_other every local user's requests arrive: default_permissions
 * makes the kernel check the tree's modes and owners against the caller
 * before snapfs sees the request, as the rules of ops/access.h say.
 */
static int add_default_permissions(struct fuse_args *args, struct err *e)
{
	static const struct fuse_opt allow_other[] = {FUSE_OPT_KEY("allow_other", 0), FUSE_OPT_END};
	bool multi_user = false;
	if (fuse_opt_parse(args, &multi_user, allow_other, opt_seen) != 0)
		return err_set(e, EINVAL, "cannot parse the -o options");
	tree_set_shared(multi_user);
	if (!multi_user)
		return 0;
	if (fuse_opt_add_arg(args, "-odefault_permissions") != 0)
		return err_set(e, ENOMEM, "out of memory");
	info("allow_other: other users may use the mount, each its own sandboxes "
	     "(default_permissions added)");
	return 0;
}

int fs_create(const char *mountpoint, struct fuse_args *args, struct fs **out, struct err *e)
{
	int rc = add_default_permissions(args, e);
	if (rc < 0)
		return rc;
	struct fs *fs = calloc(1, sizeof(*fs));
	if (!fs)
		return err_set(e, ENOMEM, "out of memory");
	rc = inode_init(&fs_root_entry);
	if (rc < 0) {
		err_set(e, -rc, "cannot set up the inode table");
		goto fail;
	}
	fs->mountpoint = strdup(mountpoint);
	if (!fs->mountpoint) {
		rc = err_set(e, ENOMEM, "out of memory");
		goto fail;
	}
	fs->se = fuse_session_new(args, &ll_ops, sizeof(ll_ops), fs);
	if (!fs->se) {
		rc = err_set(e, EINVAL, "cannot create the FUSE session (see the -o options)");
		goto fail;
	}
	if (fuse_session_mount(fs->se, mountpoint) != 0) {
		rc = err_set(e, EIO, "cannot mount on %s", mountpoint);
		goto fail;
	}
	fs->mounted = true;
	rc = mount_dev(mountpoint, &fs->dev);
	if (rc < 0) {
		err_set(e, -rc, "cannot stat the mount on %s", mountpoint);
		goto fail;
	}
	*out = fs;
	return 0;
fail:
	fs_destroy(fs);
	return rc;
}

/*
 * How far the kernel reads ahead on the mount: 1 MiB, one READ of root/
 * at FUSE's largest, where its default of 128 KiB makes a `cat` of a big
 * file eight crossings to the agent per MiB (each one a wake-up inside
 * gVisor). The INIT reply can only lower the mount's readahead, and the
 * kernel applies it after INIT, so a thread sets it once a first request
 * (a stat of the mount) has been answered. Best effort: without root, or
 * without /sys, reads are only slower.
 */
#define READAHEAD_KB 1024

struct readahead_arg {
	char *mountpoint;
	dev_t dev;
};

static void *readahead_raise(void *p)
{
	struct readahead_arg *a = p;
	struct stat st;
	char path[64];
	if (stat(a->mountpoint, &st) == 0 && st.st_dev == a->dev &&
	    xsnprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", major(a->dev),
		      minor(a->dev)) >= 0) {
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (dprintf(fd, "%d\n", READAHEAD_KB) < 0)
				debug("cannot set %s: %s", path, strerror(errno));
			close(fd);
		}
	}
	free(a->mountpoint);
	free(a);
	return NULL;
}

static void readahead_start(const struct fs *fs)
{
	struct readahead_arg *a = malloc(sizeof(*a));
	char *mp = a ? strdup(fs->mountpoint) : NULL;
	pthread_t t;
	pthread_attr_t at;
	if (!mp) {
		free(a);
		return;
	}
	*a = (struct readahead_arg){mp, fs->dev};
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &at, readahead_raise, a) != 0) {
		free(mp);
		free(a);
	}
	pthread_attr_destroy(&at);
}

int fs_loop(struct fs *fs)
{
	if (fuse_set_signal_handlers(fs->se) != 0)
		return -EIO;
	fs->signals = true;
	int rc = notify_start(fs->se);
	if (rc < 0)
		return rc;
	ops_set_change_listener(notify_changed, NULL);

	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	if (!cfg)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(cfg, 0);
	fuse_loop_cfg_set_idle_threads(cfg, 10);
	fuse_loop_cfg_set_max_threads(cfg, 64);
	readahead_start(fs);
	rc = fuse_session_loop_mt(fs->se, cfg);
	fuse_loop_cfg_destroy(cfg);
	/* A positive value is the signal that ended the loop: a normal end. */
	return rc < 0 ? rc : 0;
}

void fs_exit(struct fs *fs)
{
	fuse_session_exit(fs->se);
}

void fs_destroy(struct fs *fs)
{
	if (!fs)
		return;
	ops_set_change_listener(NULL, NULL);
	notify_stop();
	if (fs->signals)
		fuse_remove_signal_handlers(fs->se);
	/* Before the join: the notifier's call in progress may wait for the unmount. */
	if (fs->mounted)
		unmount(fs);
	notify_join();
	if (fs->se)
		fuse_session_destroy(fs->se);
	file_free_all();
	inode_fini();
	free(fs->mountpoint);
	free(fs);
}
