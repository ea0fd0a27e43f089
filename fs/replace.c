#include "fs/replace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/file.h"
#include "fs/scratch.h"

/* An open scratch file: the kernel's handle, from CREATE or OPEN to RELEASE. */
struct replace_file {
	uint64_t id;	     /* the store's entry */
	struct fs_node node; /* a copy: the inode may be forgotten while the file is open */
	struct caller who;   /* who opened it: a bound file's close writes as them */
	atomic_bool wrote;   /* written since the last FLUSH */
	/*
	 * The descriptor table (lock_owner) of the last write: only its close
	 * applies a bound file, as fs/file.c's flush_take() decides, so a
	 * child that inherited the descriptor and exits applies nothing.
	 */
	_Atomic uint64_t writer;
};

static struct replace_file *rfile_of(const struct fuse_file_info *fi)
{
	return (struct replace_file *)(uintptr_t)(fi->fh & ~(uint64_t)1);
}

/* --- the scratch row -------------------------------------------------- */

static int scratch_exists(const struct fs_node *n, const struct caller *who)
{
	uint64_t id;
	return scratch_lookup(who->uid, n->path, &id) == 1 ? 0 : -ENOENT;
}

/* Its bytes, for stat's honest size (fs/tree.c). */
static int scratch_content(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	uint64_t id;
	struct scratch_info si;
	if (scratch_lookup(who->uid, n->path, &id) != 1 || scratch_info(id, &si) < 0)
		return -ENOENT;
	_cleanup_free_ char *buf = malloc(si.size ? si.size : 1);
	ssize_t len = buf ? scratch_read(id, buf, si.size, 0) : -ENOMEM;
	if (len < 0)
		return (int)len;
	strbuf_add(out, buf, (size_t)len);
	return strbuf_error(out);
}

const struct fs_entry replace_scratch_entry = {"", S_IFREG | 0600, .read = scratch_content,
					       .exists = scratch_exists};

/* --- names ------------------------------------------------------------ */

/*
 * Scratch files live in an object's directory (a sandbox's, a snapshot's)
 * that has a file to write: sandboxes/ itself, images and the tree's other
 * directories take none.
 */
static bool scratch_dir(const struct fs_node *dir)
{
	const struct fs_dir *d = dir->ent->dir;
	if (!d || !(dir->ent->flags & FS_OBJECT) ||
	    (dir->scope != SCOPE_SANDBOX && dir->scope != SCOPE_SNAPSHOT))
		return false;
	for (size_t i = 0; i < d->nentries; i++)
		if (d->entries[i].write)
			return true;
	return false;
}

static int scratch_node(const struct fs_node *dir, const char *name, struct fs_node *out)
{
	*out = (struct fs_node){
	    .parent = dir->ino, .ent = &replace_scratch_entry, .scope = dir->scope};
	memcpy(out->id, dir->id, sizeof(out->id));
	if (xsnprintf(out->name, sizeof(out->name), "%s", name) < 0 ||
	    xsnprintf(out->path, sizeof(out->path), "%s/%s", dir->path, name) < 0)
		return -ENAMETOOLONG;
	return 0;
}

/*
 * A scratch file's name no longer names it: the node the inode table
 * keeps for the path is numbered afresh, so the tree's file of that name
 * (a bound file's control file) is not taken for the scratch file.
 */
static void name_gone(const char *path)
{
	struct fs_node old;
	fuse_ino_t ino = inode_find(path);
	if (ino && inode_get(ino, &old) == 0 && replace_is_scratch(&old))
		inode_detach(path);
}

int replace_lookup(const struct fs_node *dir, const char *name, const struct caller *who,
		   struct fs_node *out)
{
	uint64_t id;
	if (!scratch_dir(dir))
		return 0;
	int rc = scratch_node(dir, name, out);
	if (rc < 0)
		return 0; /* too long for a scratch file: the tree's answer */
	rc = scratch_lookup(who->uid, out->path, &id);
	if (rc == 0)
		name_gone(out->path); /* it expired, or another user's: the tree answers */
	return rc;
}

struct list_walk {
	const struct fs_node *dir;
	tree_fill_fn fn;
	void *arg;
};

static int list_one(const char *name, void *arg)
{
	struct list_walk *w = arg;
	struct fs_node n;
	if (scratch_node(w->dir, name, &n) < 0)
		return 0;
	fuse_ino_t ino = inode_find(n.path);
	return w->fn(name, S_IFREG, ino ? ino : fnv1a(n.path) | (1ull << 63), w->arg);
}

int replace_list(const struct fs_node *dir, const struct caller *who, tree_fill_fn fn, void *arg)
{
	struct list_walk w = {dir, fn, arg};
	return scratch_dir(dir) ? scratch_each(who->uid, dir->path, list_one, &w) : 0;
}

/*
 * What a create of @name in @dir by @who makes: 0 and *@bound for a
 * scratch file (bound: over @who's mark of a control file @who may
 * write); EEXIST for a name the tree has; EACCES where nothing is made.
 */
static int create_kind(const struct fs_node *dir, const struct caller *who, const char *name,
		       bool *bound)
{
	struct fs_node child;
	uint64_t id;
	int rc = tree_check(dir, who);
	if (rc < 0)
		return rc;
	if (!scratch_dir(dir))
		return -EACCES;
	rc = tree_child(dir, name, who, &child);
	*bound = rc == 0;
	if (rc == -ENOENT)
		return child.ent ? -EACCES : 0; /* a row absent now (parent): not to be made */
	if (rc < 0)
		return rc;
	if (scratch_lookup(who->uid, child.path, &id) != -ENOENT)
		return -EEXIST; /* no mark: the tree's file is there */
	return tree_open_check(&child, who, O_WRONLY) < 0 ? -EACCES : 0;
}

static void reply_created(fuse_req_t req, const struct caller *who, struct fs_node *n, uint64_t id,
			  struct fuse_file_info *fi)
{
	struct fuse_entry_param ep = {0};
	struct replace_file *rf = calloc(1, sizeof(*rf));
	/* A new file: not the tree's file, nor an older scratch file, of that name (fs/inode.h). */
	inode_detach(n->path);
	int rc = rf ? inode_ref(n) : -ENOMEM;
	if (rc == 0) {
		rc = tree_stat(n, who, &ep.attr);
		if (rc < 0)
			inode_forget(n->ino, 1);
	}
	if (rc < 0) {
		free(rf);
		scratch_close(id);
		fuse_reply_err(req, -rc);
		return;
	}
	*rf = (struct replace_file){.id = id, .node = *n, .who = *who};
	ep.ino = n->ino;
	ep.generation = 1;
	fi->fh = (uintptr_t)rf | 1;
	fi->direct_io = 1;
	if (fuse_reply_create(req, &ep, fi) != 0) {
		inode_forget(n->ino, 1);
		scratch_close(id);
		free(rf);
	}
}

void replace_create(fuse_req_t req, const struct fs_node *dir, const struct caller *who,
		    const char *name, struct fuse_file_info *fi)
{
	struct fs_node n;
	bool bound = false;
	uint64_t id;
	int rc = create_kind(dir, who, name, &bound);
	if (rc == 0)
		rc = scratch_node(dir, name, &n);
	if (rc == 0)
		rc = scratch_create(who->uid, n.path, bound, &id);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		reply_created(req, who, &n, id, fi);
}

int replace_unlink(const struct fs_node *dir, const struct caller *who, const char *name)
{
	struct fs_node n, child;
	int rc = scratch_dir(dir) ? scratch_node(dir, name, &n) : -EPERM;
	if (rc == 0 && scratch_unlink(who->uid, n.path) == 0) {
		name_gone(n.path);
		return 0;
	}
	if (rc == 0)
		rc = tree_child(dir, name, who, &child);
	/* A file @who may write: hidden from @who a moment, for the create that follows. */
	if (rc == 0)
		rc = child.ent->write && tree_open_check(&child, who, O_WRONLY) == 0 ? 0 : -EPERM;
	return rc == 0 ? scratch_mark(who->uid, child.path) : rc;
}

/*
 * Where a rename of @who's scratch file lands: 1 onto the tree's writable
 * file @target (its mark, if any, taken back), 0 onto a name the tree
 * does not have, else the errno.
 */
static int rename_target(const struct fs_node *newdir, const char *newname,
			 const struct caller *who, struct fs_node *target)
{
	uint64_t id;
	int rc = scratch_node(newdir, newname, target);
	if (rc < 0)
		return rc;
	int seen = scratch_lookup(who->uid, target->path, &id);
	if (seen == 1)
		return 0; /* another scratch file: replaced */
	rc = tree_child(newdir, newname, who, target);
	if (rc == -ENOENT)
		return target->ent ? -EACCES : 0;
	/* A file without a write (a link: root, parent, source) is no target, whatever its mode. */
	if (rc == 0 && (!target->ent->write || tree_open_check(target, who, O_WRONLY) < 0))
		rc = -EACCES;
	if (rc == 0 && seen == -ENOENT)
		scratch_unlink(who->uid, target->path);
	return rc < 0 ? rc : 1;
}

void replace_rename(fuse_req_t req, const struct fs_node *dir, const char *name,
		    const struct fs_node *newdir, const char *newname, unsigned flags,
		    const struct caller *who)
{
	struct fs_node from, to;
	uint64_t id;
	int rc = scratch_dir(dir) && scratch_dir(newdir) ? scratch_node(dir, name, &from) : -EPERM;
	if (rc == 0 && scratch_lookup(who->uid, from.path, &id) != 1)
		rc = -EPERM; /* the tree's own files are never renamed */
	if (rc == 0 && dir->ino != newdir->ino)
		rc = -EXDEV; /* mv copies then: a create and a close */
	if (rc == 0 && (flags & ~RENAME_NOREPLACE))
		rc = -EINVAL;
	if (rc == 0)
		rc = rename_target(newdir, newname, who, &to);
	if (rc > 0 && (flags & RENAME_NOREPLACE))
		rc = -EEXIST;
	if (rc == -EACCES)
		scratch_unlink(who->uid,
			       from.path); /* refused by the tree's file: gone, as its write */
	if (rc == 0)
		rc = scratch_rename(who->uid, from.path, to.path);
	if (rc <= 0) {
		name_gone(from.path);
		fuse_reply_err(req, -rc);
		return;
	}
	/* Onto the tree's file: the scratch file goes whatever the write answers. */
	_cleanup_strbuf_ struct strbuf data = STRBUF_INIT;
	rc = scratch_take(id, false, &data);
	name_gone(from.path);
	/* The kernel drops its entry of the target: a new number for the file (fs/inode.h). */
	inode_detach(to.path);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		file_replace(req, &to, who, strbuf_str(&data), data.len);
}

/* --- open files ------------------------------------------------------- */

void replace_open(fuse_req_t req, const struct fs_node *n, const struct caller *who,
		  struct fuse_file_info *fi)
{
	uint64_t id;
	int rc = scratch_lookup(who->uid, n->path, &id) == 1 ? scratch_open(id) : -ENOENT;
	struct replace_file *rf = rc == 0 ? calloc(1, sizeof(*rf)) : NULL;
	if (rc == 0 && !rf) {
		scratch_close(id);
		rc = -ENOMEM;
	}
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	*rf = (struct replace_file){.id = id, .node = *n, .who = *who};
	fi->fh = (uintptr_t)rf | 1;
	fi->direct_io = 1;
	if (fuse_reply_open(req, fi) != 0) {
		scratch_close(id);
		free(rf);
	}
}

void replace_read(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct replace_file *rf = rfile_of(fi);
	_cleanup_free_ char *buf = malloc(size ? size : 1);
	ssize_t n = buf ? scratch_read(rf->id, buf, size, off) : -ENOMEM;
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

void replace_write(fuse_req_t req, const char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct replace_file *rf = rfile_of(fi);
	ssize_t n = scratch_write(rf->id, buf, size, off);
	if (n < 0) {
		fuse_reply_err(req, (int)-n);
		return;
	}
	atomic_store(&rf->writer, fi->lock_owner);
	atomic_store(&rf->wrote, true);
	fuse_reply_write(req, (size_t)n);
}

/*
 * A bound file's close applies what was written since the last close to
 * its control file, answering with the write's errno (install and mv
 * report a failed close); a plain scratch file waits for its rename.
 */
void replace_flush(fuse_req_t req, struct fuse_file_info *fi)
{
	struct replace_file *rf = rfile_of(fi);
	struct scratch_info si;
	struct fs_node dir, target;
	_cleanup_strbuf_ struct strbuf data = STRBUF_INIT;
	const uint64_t writer = atomic_load(&rf->writer);
	if ((writer && writer != fi->lock_owner) || !atomic_exchange(&rf->wrote, false) ||
	    scratch_info(rf->id, &si) < 0 || !si.bound) {
		fuse_reply_err(req, 0);
		return;
	}
	int rc = scratch_take(rf->id, true, &data);
	if (rc == 0) {
		fuse_reply_err(req, 0); /* applied at an earlier close */
		return;
	}
	if (rc > 0)
		rc = inode_get(rf->node.parent, &dir);
	if (rc == 0)
		rc = tree_child(&dir, rf->node.name, &rf->who, &target);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else if (!target.ent || !target.ent->write)
		fuse_reply_err(req, EACCES);
	else
		file_replace(req, &target, &rf->who, strbuf_str(&data), data.len);
}

void replace_release(fuse_req_t req, struct fuse_file_info *fi)
{
	struct replace_file *rf = rfile_of(fi);
	struct scratch_info si;
	scratch_close(rf->id);
	if (scratch_info(rf->id, &si) < 0)
		name_gone(rf->node.path);
	free(rf);
	fuse_reply_err(req, 0);
}

void replace_setattr(fuse_req_t req, const struct fs_node *n, const struct caller *who,
		     const struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	uint64_t id;
	struct stat st;
	int rc = 0;
	if (replace_handle(fi))
		id = rfile_of(fi)->id;
	else if (scratch_lookup(who->uid, n->path, &id) != 1)
		rc = -ENOENT;
	if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE))
		rc = scratch_truncate(id, attr->st_size);
	if (rc == 0)
		rc = tree_stat(n, who, &st);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, 0.0);
}
