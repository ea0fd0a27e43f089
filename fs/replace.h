/*
 * replace.h - atomic replace on the tree: the FUSE requests that create,
 * unlink and rename names in a sandbox's or a snapshot's directory, and
 * the open files of the scratch files they make (docs/control-files.md,
 * "Atomic replace"; the bytes live in fs/scratch.h).
 *
 *  - create: a name the tree does not have becomes the caller's scratch
 *    file; a writable control file's name the caller just unlinked (a
 *    mark) becomes a *bound* scratch file, whose close applies it to that
 *    file (install, mv across filesystems). Nothing else is created.
 *  - rename of the caller's scratch file onto a writable file of the same
 *    directory: its whole content is one write of that file
 *    (file_replace(): the write path's framing, errno and reports), and
 *    the scratch file is gone whatever the answer; onto a name the tree
 *    does not have: the scratch file takes that name.
 *  - unlink of the caller's scratch file removes it; of a writable control
 *    file the caller may write, it leaves a mark and changes nothing else.
 *  - chmod, chown and utimes of a scratch file or a writable control file
 *    are taken and ignored (the tree's modes are fixed; Ansible and mv
 *    copy attributes): fs.c's setattr.
 *
 * Why fs/: a scratch file is the kernel's view of bytes on their way to a
 * control file, as an open file's line buffer is (fs/control.c); the state
 * it ends up changing changes only through the write path into ops/.
 *
 * Threads: every call may run on any FUSE worker; the store has its own
 * lock, and an open scratch file's handle is the kernel's until RELEASE.
 */
#ifndef SNAPFS_FS_REPLACE_H
#define SNAPFS_FS_REPLACE_H

#include <stdbool.h>
#include <stdint.h>

#include "fs/fs.h"
#include "fs/tree.h"

/* The row of every scratch file's node. */
extern const struct fs_entry replace_scratch_entry;

/* Is @n a scratch file's node? */
static inline bool replace_is_scratch(const struct fs_node *n)
{
	return n->ent == &replace_scratch_entry;
}

/* Is @fi an open scratch file's (the low bit of fh marks them)? */
static inline bool replace_handle(const struct fuse_file_info *fi)
{
	return fi && (fi->fh & 1);
}

/*
 * LOOKUP of @name in @dir for @who: 1 with @out filled when it is @who's
 * scratch file, -ENOENT when @who's mark hides the tree's file there, 0
 * when the tree answers.
 */
int replace_lookup(const struct fs_node *dir, const char *name, const struct caller *who,
		   struct fs_node *out);
/* readdir: each of @who's scratch files in @dir, as tree_list's @fn takes them. */
int replace_list(const struct fs_node *dir, const struct caller *who, tree_fill_fn fn, void *arg);
void replace_create(fuse_req_t req, const struct fs_node *dir, const struct caller *who,
		    const char *name, struct fuse_file_info *fi);
/*
 * UNLINK of @name in @dir for @who: 0 when it was @who's scratch file (gone)
 * or a file @who may write (hidden from @who a moment, for the create that
 * follows: install, mv across filesystems); -EPERM for any other name of
 * the tree (fs.c's remove_part() decides those), or another errno.
 */
int replace_unlink(const struct fs_node *dir, const struct caller *who, const char *name);
void replace_rename(fuse_req_t req, const struct fs_node *dir, const char *name,
		    const struct fs_node *newdir, const char *newname, unsigned flags,
		    const struct caller *who);

/* The open files of scratch nodes (@n: replace_is_scratch()). */
void replace_open(fuse_req_t req, const struct fs_node *n, const struct caller *who,
		  struct fuse_file_info *fi);
void replace_read(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi);
void replace_write(fuse_req_t req, const char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi);
void replace_flush(fuse_req_t req, struct fuse_file_info *fi);
void replace_release(fuse_req_t req, struct fuse_file_info *fi);
/* SETATTR of scratch node @n: a size truncates it, the rest is taken and ignored. */
void replace_setattr(fuse_req_t req, const struct fs_node *n, const struct caller *who,
		     const struct stat *attr, int to_set, struct fuse_file_info *fi);

#endif
