/*
 * spool.h - the directory checkpoints are written into before they are
 * stored: <state>/spool, or with --spool DIR this daemon's own directory in
 * DIR (a tmpfs such as /dev/shm, which every user may write).
 *
 * Why a path inside it is safe to hand to runsc, which writes a checkpoint
 * by path into its --image-path: the directory is made by this daemon with
 * mkdir(2), which fails on anything already there, so no one else's
 * directory or symlink is ever taken for it; it is 0700 and root's, so no
 * one else may add, rename or remove anything in it; every directory above
 * it is root's and writable by no one else unless sticky (path_trusted()),
 * so no one else may rename or replace it, or anything on the way to it (in
 * a sticky DIR only an entry's owner may rename or remove it). A path below
 * it names only what the daemon or runsc made there. The daemon's own work
 * in it (the O_DIRECT probe, emptying it) goes through a descriptor on it
 * all the same, and creates with O_EXCL | O_NOFOLLOW.
 *
 * In DIR its name is snapfs-spool-<random hex>: nothing about it can be
 * guessed, so nothing can be planted there first. A marker file in it
 * (SPOOL_MARKER) names the state directory, so a restart finds the spool
 * its predecessor left (an interrupted checkpoint is kept there for the
 * reconciliation) among those of other daemons sharing DIR. A directory
 * counts as this daemon's only if it is a directory (no symlink), root's,
 * exactly 0700, and holds a marker that is a regular file, root's, 0600,
 * naming this state directory: only root can make that. Everything else in
 * DIR is left alone.
 *
 * Not thread-safe: called at start-up and shutdown only, with no job
 * thread running (spool_fd() is read-only after spool_open()); but the
 * marks of whole checkpoints, which job threads set and clear, each
 * through the spool's descriptor.
 */
#ifndef SNAPFS_SPOOL_H
#define SNAPFS_SPOOL_H

#include <limits.h>
#include <stdbool.h>

#include "lib/util.h"

#define SPOOL_PREFIX "snapfs-spool-"
#define SPOOL_MARKER ".snapfs-state"
/*
 * A checkpoint is whole once runsc said so: runsc checkpoint exited 0.
 * Which of its image files runsc writes last is not relied on (runsc opens
 * them all before the sentry writes them); snapfs then marks <snap>.whole
 * beside the image dir, after a syncfs of the spool. A checkpoint a killed daemon never heard the
 * end of is not whole, even if runsc finished it.
 */
#define SPOOL_WHOLE_SUFFIX ".whole"

/*
 * Open the spool of state directory @state_dir (canonical, already
 * private): in @parent (--spool) if not NULL, else <state_dir>/spool. Its
 * path (with no symlink in it) goes into @path. Refuses a @parent that
 * another user could change. Call after the state directory's lock is held:
 * a second spool of the same state directory found in @parent is removed.
 */
int spool_open(const char *parent, const char *state_dir, char path[PATH_MAX], struct err *e);
/* A descriptor on the spool, or -1 before spool_open(). */
int spool_fd(void);
/*
 * Remove everything in the spool but its marker and the checkpoints (with
 * their marks) of the snapshot ids @keep wants (NULL: none).
 */
void spool_empty(bool (*keep)(const char *snap_id, void *arg), void *arg);
/* Mark the checkpoint of @snap_id whole (above); 0 or -errno. */
int spool_mark_whole(const char *snap_id);
bool spool_is_whole(const char *snap_id);
/* Remove the mark (before the checkpoint itself goes, or once it moved on). */
void spool_unmark(const char *snap_id);
/* Close it; remove it if nothing but its marker is left in it. */
void spool_close(void);

#endif
