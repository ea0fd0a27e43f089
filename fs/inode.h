/*
 * inode.h - the inode table: inode numbers the kernel holds <-> nodes of
 * the tree.
 *
 * A node is named by its path relative to the mount: the tree is a pure
 * function of the path (sandboxes/web/status is always web's status file),
 * so the path is the node's identity and one path has at most one inode
 * number while the kernel remembers it. Numbers are never reused; the root
 * is FUSE_ROOT_ID and is never forgotten.
 *
 * Except across a removal: a sandbox removed and made again under its name
 * (by another user, say) is another directory. Had it the old number, the
 * kernel would take it for the removed one, which it marked dead and which
 * a process of the old owner may still hold (its cwd, an open file): the
 * new directory would be unusable to all, root included. So mkdir detaches
 * the old numbers from the path (inode_detach) before it answers: they
 * live on until forgotten, and the new directory gets a new one.
 *
 * The table counts lookups as the kernel does (each reply of an entry is
 * one) and drops a node when FORGET brings its count to zero. It says
 * nothing about whether the object still exists: tree.c checks that on
 * every lookup and getattr.
 *
 * Ownership and threads: the table owns its nodes; callers get copies, so
 * a node forgotten meanwhile never leaves a dangling pointer. Every
 * function may be called from any thread.
 */
#ifndef SNAPFS_FS_INODE_H
#define SNAPFS_FS_INODE_H

#include <stdint.h>

#include "lib/limits.h"
#include "fs/fs.h"

#define FS_PATH_MAX 512

struct fs_entry;

/* What a node is. */
enum fs_scope {
	SCOPE_NONE,	/* top of the tree */
	SCOPE_IMAGE,	/* in images/<name>/ */
	SCOPE_SANDBOX,	/* in sandboxes/<id>/ */
	SCOPE_SNAPSHOT, /* in snapshots/<id>/ */
};

struct fs_node {
	fuse_ino_t ino;
	fuse_ino_t parent;
	const struct fs_entry *ent; /* what the node is: its row in a directory table */
	enum fs_scope scope;
	char id[IMAGE_NAME_MAX]; /* the image, sandbox or snapshot of the scope; "" for none */
	char name[IMAGE_NAME_MAX];
	char path[FS_PATH_MAX]; /* "" for the root */
};

/* Set up the table with the root node for @root_entry. */
int inode_init(const struct fs_entry *root_entry);
void inode_fini(void);

/* Find or add the node of @n->path, count one lookup and set n->ino. */
int inode_ref(struct fs_node *n);
/* Copy node @ino into @out; -ESTALE when the kernel has forgotten it. */
int inode_get(fuse_ino_t ino, struct fs_node *out);
/* The inode number of @path, or 0 when the kernel holds none. */
fuse_ino_t inode_find(const char *path);
/* The kernel forgets @nlookup lookups of @ino. */
void inode_forget(fuse_ino_t ino, uint64_t nlookup);
/*
 * @path (not the root) and every node under it are to be numbered afresh:
 * the kernel's numbers keep working until forgotten, inode_find() and the
 * next lookup no longer see them.
 */
void inode_detach(const char *path);

#endif
