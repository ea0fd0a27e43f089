/*
 * logfile.h - an append-only file of lines under a size cap, and the view
 * of it that readers through the mount get (the journals, snapfs.log, and
 * each sandbox's console, whose appends are the bytes as read: not always
 * whole lines).
 *
 * On disk: when a line would take PATH past @max bytes, PATH becomes
 * PATH.1 (replacing the one before) and a fresh PATH is started, so the
 * two hold at most 2 * @max bytes (a single line longer than @max is
 * written whole, in a generation of its own). Each append is one write(2)
 * of whole lines on an O_APPEND descriptor.
 *
 * The view (docs/control-files.md, "Reading"): PATH.1 then PATH, as one
 * stream whose offsets only grow while anyone has it open. A rotation moves
 * no byte to another offset: the bytes of the old PATH.1 are dropped from
 * the front, and their offsets become a gap, read as spaces ending in one
 * newline (a blank line, where a reader that fell behind lost lines). So
 * st_size never shrinks under an open reader and `tail -f` goes on from
 * where it was. When the last reader closes, the gap is forgotten: the next
 * reader sees PATH.1 from offset 0.
 *
 * @also: a descriptor to keep pointing at the current generation (stderr,
 * for snapfs.log: what libfuse or a sanitizer writes there lands in the
 * file and counts toward the cap), or -1.
 *
 * Thread-safety: every function takes the file's lock; none logs (logging
 * appends to a logfile). Ownership: the caller owns the struct; open and
 * close its descriptors with logfile_open() and logfile_close().
 */
#ifndef SNAPFS_LOGFILE_H
#define SNAPFS_LOGFILE_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct logfile {
	pthread_mutex_t lock;
	char path[PATH_MAX];
	char prev_path[PATH_MAX]; /* PATH.1 */
	int fd;			  /* the current generation, O_RDWR | O_APPEND; -1 when closed */
	int also;
	mode_t mode;
	int64_t max;	  /* 0: never rotate */
	int64_t prev;	  /* bytes of PATH.1 in the view */
	int64_t gap;	  /* view offset of PATH.1's first byte */
	unsigned readers; /* open files on the view */
};

#define LOGFILE_INIT                                                                               \
	{                                                                                          \
		.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .also = -1                            \
	}

/* Open (create with @mode) @path for appending, rotated past @max bytes (0: never). */
int logfile_open(struct logfile *lf, const char *path, int64_t max, mode_t mode, int also);
void logfile_close(struct logfile *lf);
/* PATH again, after someone renamed it (SIGHUP, logrotate): 0 or -errno. */
int logfile_reopen(struct logfile *lf);
/* Append @len bytes of whole lines in one write, rotating first if they would pass the cap. */
int logfile_append(struct logfile *lf, const char *data, size_t len);

/* The view: up to @size bytes at @off into @buf; the count (0 at the end) or -errno. */
ssize_t logfile_read(struct logfile *lf, char *buf, size_t size, int64_t off);
/* The view's size and the time of the last append. */
int logfile_stat(struct logfile *lf, int64_t *size, struct timespec *mtime);
/* A reader opens (@open) or closes the view. */
void logfile_reader(struct logfile *lf, bool open);

#endif
