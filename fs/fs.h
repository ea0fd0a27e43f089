/*
 * fs.h - the FUSE layer: mounts the snapfs tree (docs/design.md, "The tree") with
 * the libfuse3 low-level API and translates each request into a read of the
 * registry or a call of ops/ops.h. It holds no state of its own beyond
 * the kernel's view: inode numbers, open files and held requests.
 *
 * Lifecycle, as main.c drives it:
 *
 *     fs_create(mountpoint, &args, &fs, &e);   session and mount, no threads
 *     fuse_daemonize(...) unless -f;           so fs_create starts no thread
 *     ops_start(...);
 *     fs_loop(fs);                             until unmounted or signalled
 *     ops_shutdown();                          held requests still get answers
 *     fs_destroy(fs);                          unmount and free
 *
 * Only one struct fs exists per process: the inode table, the notifier
 * thread and the pool of held requests are process-wide.
 */
#ifndef SNAPFS_FS_H
#define SNAPFS_FS_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>

#include "lib/util.h"

struct fs;

/*
 * Create the FUSE session with @args (the -o options; consumed by libfuse)
 * and mount it on @mountpoint; with allow_other, default_permissions is
 * added (ops/access.h). On failure @e says why and nothing is left
 * mounted.
 */
int fs_create(const char *mountpoint, struct fuse_args *args, struct fs **out, struct err *e);

/*
 * Serve requests: installs libfuse's handlers where a signal has the
 * default action (main.c catches SIGTERM, SIGINT and SIGHUP itself, and
 * ends the loop with fs_exit()), registers the ops change listener, starts the notifier thread and
 * runs the multi-threaded loop. Returns 0 when unmounted or signalled, or
 * a negative errno.
 */
int fs_loop(struct fs *fs);

/*
 * Make fs_loop() return (or return at once if it has not started), as
 * libfuse's own SIGTERM handler does: async-signal-safe, it only sets the
 * session's flag, which the loop's thread sees once a signal interrupts
 * its wait.
 */
void fs_exit(struct fs *fs);

/*
 * Stop the notifier, remove the signal handlers, unmount (aborting the
 * requests nobody will serve now), wait for the notifier and free. NULL is
 * fine.
 */
void fs_destroy(struct fs *fs);

#endif
