/*
 * notify.h - telling the kernel that something changed: poll wake-ups and
 * cache invalidations.
 *
 * The ops change listener runs on any thread, FUSE workers included, and a
 * notify call writes to /dev/fuse and may wait on the kernel (an entry
 * invalidation takes the directory's lock, which a request in flight may
 * hold). So the listener only queues; one notifier thread makes every
 * notify call:
 *   OPS_OBJ_EVENTS/ERRORS  invalidate that journal's inode (tail -f sees growth)
 *   OPS_OBJ_SANDBOX/SNAPSHOT  wake the polls watching that object
 *   OPS_OBJ_LIST  wake them too, and invalidate sandboxes/<id> and snapshots/<id>
 * The queue is bounded; when it overflows, the notifier does all of the
 * above for every object once, which is never wrong.
 *
 * Links: the kernel keeps a link's target once read (FUSE_CAP_CACHE_SYMLINKS,
 * so that every path through sandboxes/<id>/root is not a READLINK more).
 * Only root -> .root never changes; every other link's target is dropped
 * again right after its READLINK (notify_link_read()): a link inside a
 * sandbox changes with it, and its rewritten target with the link's depth
 * (a rename through root/ moves it). The page is locked while the kernel
 * waits for the READLINK's answer, so the notifier, which serves no
 * request, makes that call.
 *
 * Poll watches are kept per open file (@key): a file has at most one poll
 * handle, replaced by its next poll and destroyed when it fires or the
 * file is released.
 */
#ifndef SNAPFS_FS_NOTIFY_H
#define SNAPFS_FS_NOTIFY_H

#include <stdbool.h>

#include "fs/fs.h"
#include "ops/ops.h"

/* Start the notifier thread for @se. */
int notify_start(struct fuse_session *se);
/*
 * Stop it: no notify call is made after the one in progress, if any, and
 * queued notifications are dropped. That call may be waiting on a
 * directory lock held by a request nobody will serve once the loop has
 * ended: abort the connection (unmount) before notify_join().
 */
void notify_stop(void);
/* notify_stop() and wait for the thread to end; watches are destroyed. */
void notify_join(void);

/* The ops change listener. Never blocks. */
void notify_changed(enum ops_object kind, const char *id, void *arg);

/* Wake @ph on the next change of @kind/@id; takes @ph. */
void notify_watch(const void *key, enum ops_object kind, const char *id,
		  struct fuse_pollhandle *ph);
/* Forget @key's watch, if any. */
void notify_unwatch(const void *key);
/*
 * Link @ino's target is being read: have the kernel drop its copy once it
 * has it. Called before the READLINK is answered (the drop waits for the
 * page the answer fills), so that notify_links_flush() finds it. Never
 * blocks. False when thousands wait already (the notifier stuck): then the
 * caller drops it itself after its answer, with notify_link_drop().
 */
bool notify_link_read(fuse_ino_t ino);
/* Have the kernel drop link @ino's target now, in this thread (after the READLINK's answer). */
void notify_link_drop(fuse_ino_t ino);
/*
 * Drop now, in this thread, every target notify_link_read() queued and
 * the notifier has not dropped yet: a rename through root/ calls it before
 * it answers, so no target rewritten for a link's old depth outlives it.
 * Waits on pages locked by READLINKs, which other threads answer; one of
 * them waiting for this rename (fs/inside.c, moves) gives up after a second.
 * SNAPFS_NOTIFY_LINK_DELAY_MS (tests only) holds the notifier up that long
 * before each drop, as a busy one is (test_inside_linkcache.sh).
 */
void notify_links_flush(void);

#endif
