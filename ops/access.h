/*
 * access.h - who may see and do what (docs/design.md, "Who may do what").
 *
 * The mount is root's. Without -o allow_other the kernel lets only root's
 * requests in; with it (fs/ then adds default_permissions) every local
 * user's requests arrive, and these rules decide what each may do:
 *
 *   - root (uid 0, or the uid the daemon runs as) sees and may do
 *     everything;
 *   - a sandbox is owned by the uid that created it (mkdir, sandboxes/new,
 *     a fork), a snapshot by the owner of its source sandbox; a snapshot
 *     taken on another host sharing the store has no local owner and is
 *     root's;
 *   - an owner sees what it owns and may do everything to it; to anybody
 *     else it does not exist (ENOENT), so a name or id tells them nothing
 *     more than that it is taken;
 *   - creating a sandbox, a fork included, needs root or membership of the
 *     --allow-group group (EACCES otherwise); without --allow-group only
 *     root creates.
 *
 * The tree's mode bits say the same to the kernel, which checks them
 * itself under default_permissions (fs/tree.c): an object's directory is
 * 0700 and its files 0600, 0400 or 0200 for its owner; the journals are
 * root's 0400 (they name every user's objects); sandboxes/ and
 * sandboxes/new belong to the --allow-group group.
 *
 * Every function is pure over the caller's credentials (fs/ takes them
 * from the FUSE request); they are unit-tested in tests/unit/test_access.c.
 */
#ifndef SNAPFS_ACCESS_H
#define SNAPFS_ACCESS_H

#include <stdbool.h>
#include <sys/types.h>

#include "lib/util.h"

/* Supplementary groups kept per caller; a caller in more may lose the ones past it. */
#define CALLER_GROUPS_MAX 256

/* The credentials of one request. */
struct caller {
	uid_t uid;
	gid_t gid;	  /* primary group */
	unsigned ngroups; /* supplementary groups known (0 when not asked) */
	gid_t groups[CALLER_GROUPS_MAX];
};

/* The daemon acting on its own (jobs, start-up): root. */
extern const struct caller access_root;

/*
 * --allow-group: @group is a group name or a number; NULL or "" lets only
 * root create. Called once at start-up, before any request.
 */
int access_init(const char *group, struct err *e);

/* Root, or the uid the daemon runs as: sees and may do everything. */
bool access_is_root(const struct caller *c);
/* May @c see (and so act on) an object owned by @owner? */
bool access_may_see(const struct caller *c, uid_t owner);
/* May @c create sandboxes? 0, or -EACCES with a sentence naming @what. */
int access_check_create(const struct caller *c, const char *what, struct err *e);
/* The group that may create: owner group of sandboxes/ and sandboxes/new. */
gid_t access_create_gid(void);
/* The owner of what belongs to no user (the top of the tree, images). */
uid_t access_root_uid(void);
gid_t access_root_gid(void);

/*
 * May @c open a file of @mode owned by @uid:@gid for @accmode (O_RDONLY,
 * O_WRONLY, O_RDWR)? The class bits as the kernel reads them; root needs
 * the bit in any class, so no one writes a read-only file.
 */
bool access_may_open(const struct caller *c, uid_t uid, gid_t gid, mode_t mode, int accmode);

#endif
