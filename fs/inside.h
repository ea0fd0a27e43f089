/*
 * inside.h - sandboxes/<id>/root/: the sandbox's own filesystem, as its
 * processes see it (docs/design.md, "root/"). fs.c hands every request on a
 * node under root/ (and those on root/'s own children) to these; each
 * translates it into an ops_inside_*() call (ops/ops.h) and replies.
 *
 * Inode numbers. root/ itself is a node of the tree (fs/inode.h, a row of
 * sandboxes.c with FS_INSIDE); everything under it gets a number with
 * INSIDE_INO_BIT set, from a table here keyed by (parent number, name),
 * not by path: a rename moves one node and everything under it follows, and
 * a directory is never shown under two parents, so the host kernel's idea
 * of each node's parent is this table's. The path sent to the sandbox is
 * made from that chain, and a link's target is rewritten against the same
 * chain (ops_inside_readlink()): that is what keeps the kernel inside
 * root/ when it follows a link (docs/security.md).
 *
 * Threads: every function from any FUSE thread; the table has its own
 * lock, a leaf. Open files and directories are the kernel's until release.
 */
#ifndef SNAPFS_FS_INSIDE_H
#define SNAPFS_FS_INSIDE_H

#include <stdbool.h>

#include "fs/fs.h"
#include "fs/inode.h"

#define INSIDE_INO_BIT (1ULL << 62)

/* Is @ino a node under some root/? */
static inline bool inside_owns(fuse_ino_t ino)
{
	return (ino & INSIDE_INO_BIT) != 0;
}

/* Is tree node @n a sandbox's root/? */
bool inside_is_root(const struct fs_node *n);

void inside_fini(void);

/* @parent: an inside number, or root/'s node (@root, NULL otherwise). */
void inside_lookup(fuse_req_t req, fuse_ino_t parent, const struct fs_node *root, const char *name);
void inside_forget(fuse_ino_t ino, uint64_t nlookup);
void inside_getattr(fuse_req_t req, fuse_ino_t ino);
void inside_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set);
void inside_readlink(fuse_req_t req, fuse_ino_t ino);
void inside_mkdir(fuse_req_t req, fuse_ino_t parent, const struct fs_node *root, const char *name,
		  mode_t mode);
void inside_remove(fuse_ino_t parent, fuse_req_t req, const struct fs_node *root, const char *name,
		   bool dir);
void inside_symlink(fuse_req_t req, const char *target, fuse_ino_t parent,
		    const struct fs_node *root, const char *name);
void inside_rename(fuse_req_t req, fuse_ino_t parent, const struct fs_node *root, const char *name,
		   fuse_ino_t newparent, const struct fs_node *newroot, const char *newname,
		   unsigned flags);
void inside_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		 const struct fs_node *newroot, const char *newname);
void inside_create(fuse_req_t req, fuse_ino_t parent, const struct fs_node *root, const char *name,
		   mode_t mode, struct fuse_file_info *fi);
void inside_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void inside_read(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi);
void inside_write(fuse_req_t req, const char *buf, size_t size, off_t off,
		  struct fuse_file_info *fi);
void inside_fsync(fuse_req_t req, struct fuse_file_info *fi);
void inside_flush(fuse_req_t req, struct fuse_file_info *fi);
void inside_release(fuse_req_t req, struct fuse_file_info *fi);
/* Directories: root/ itself (@root) or one under it. */
void inside_opendir(fuse_req_t req, fuse_ino_t ino, const struct fs_node *root,
		    struct fuse_file_info *fi);
void inside_readdir(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi);
/* As inside_readdir(), each entry with its attributes and a lookup counted. */
void inside_readdirplus(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi);
void inside_releasedir(fuse_req_t req, struct fuse_file_info *fi);

#endif
