/*
 * tree_copy.h - copy a directory tree whole, as `cp -a --reflink=auto`
 * does (owners, modes, times, hard links, xattrs where it can; shared
 * extents on a filesystem with reflinks, btrfs or XFS, else bytes), and
 * sync it. Used to take a hand-made image in as a version (images.c).
 *
 * Runs cp(1) through spawn_run() (an argv, never a shell) with a deadline;
 * what cp says on stderr, bounded, is the error's sentence. The caller owns
 * both paths; any thread.
 */
#ifndef SNAPFS_TREE_COPY_H
#define SNAPFS_TREE_COPY_H

struct err;

/* Longest a copy may run before it is killed (a tree of many GiB on slow disks). */
#define TREE_COPY_TIMEOUT_MS (30LL * 60 * 1000)

/*
 * Copy the directory @src to @dst (which must not exist) and sync the
 * filesystem @dst is on (syncfs), so that a rename of its parent after this
 * names a whole tree even across a crash. EIO with cp's sentence.
 */
int tree_copy(const char *src, const char *dst, struct err *e);

#endif
