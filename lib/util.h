/*
 * util.h - small helpers every module uses: cleanup attributes, logging,
 * error reporting, time, random ids and durable file I/O.
 *
 * Error convention: functions return 0 (or a count) on success and a
 * negative errno on failure. When a failure needs a sentence for the user
 * (the `error` control file, the `errors` log), the caller passes a
 * `struct err` and the callee fills it with err_set(), which returns the
 * negative errno so failures read `return err_set(e, EIO, "...")`. A
 * failure only the log hears of reads `return error(EIO, "...")`: error()
 * takes the errno to return as err_set() does, so no failure path returns
 * git's bare -1, which here would read as -EPERM. Messages say what failed
 * first and carry no full stop.
 */
#ifndef SNAPFS_UTIL_H
#define SNAPFS_UTIL_H

#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Ownership through cleanup attributes, as lxcfs and systemd do. */
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
void freep(void *p);
void closep(int *fd);
void fclosep(FILE **f);

/* Hand ownership out of a cleanup variable: `return steal_ptr(buf);`. */
#define steal_ptr(p)                                                                               \
	({                                                                                         \
		__typeof__(p) tmp_ = (p);                                                          \
		(p) = NULL;                                                                        \
		tmp_;                                                                              \
	})

/* Longest message a struct err keeps; longer ones are cut. */
#define ERR_MSG_MAX 1024

/* A failure's errno and the sentence that explains it to the user. */
struct err {
	int code; /* positive errno, 0 when nothing failed */
	char msg[ERR_MSG_MAX];
};

/* Record a failure in @e (which may be NULL) and log it; returns -code. */
int err_set(struct err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/*
 * On the way up, as crun_error_wrap(): prefix @fmt's context to the inner
 * sentence in @e, "context: inner", keeping its errno; logs it and
 * returns -code. An @e with no code yet (a callee that failed without a
 * sentence) gets EIO and the context alone, so a failure never reads as
 * success or as an empty sentence. @e may be NULL: only logged, -EIO.
 */
int err_wrap(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void err_clear(struct err *e);

/*
 * Logging to stderr with a level prefix. error() returns -@code (a positive
 * errno, as for err_set; anything else returns -EIO, never success).
 */
int error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern bool log_debug_enabled;
/*
 * From now on log to @path (snapfs.log), with stderr pointing there too,
 * rotated past @max_bytes as the journals are (lib/logfile.h).
 */
int log_to_file(const char *path, int64_t max_bytes);
/*
 * At start-up, before any thread: when stderr is the journal's stream
 * (JOURNAL_STREAM names its device and inode, sd-daemon(3)), lines carry a
 * `<N>` syslog priority and no timestamp of their own.
 */
void log_init(void);
/* snapfs.log again, after it was renamed (SIGHUP): 1, or 0 when logging to stderr, or -errno. */
int log_reopen(void);

/* Milliseconds since the epoch (CLOCK_REALTIME) and since boot (CLOCK_MONOTONIC). */
int64_t now_ms(void);
int64_t mono_ms(void);
/* RFC 3339 UTC with milliseconds: 2026-11-29T10:32:12.123Z. @out holds 32 bytes. */
void format_time(int64_t ms, char out[32]);

/* @nhex random lowercase hex digits into @out (nhex + 1 bytes). */
int random_hex(char *out, size_t nhex);

/* snprintf that fails with -ENAMETOOLONG instead of truncating. */
int xsnprintf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* write(2) all of @data, retrying short writes and EINTR; 0 or -errno. */
int write_all(int fd, const void *data, size_t len);
/* The same with pwrite(2) at @off. */
int pwrite_all(int fd, const void *data, size_t len, int64_t off);
/* pread(2) all @len bytes at @off, retrying short reads and EINTR; -ENODATA if the file ends. */
int pread_all(int fd, void *buf, size_t len, int64_t off);
/* Copy @in to @out from their current offsets to @in's end, in the kernel where it can. */
int copy_fd(int in, int out);

/*
 * Temp files are the final path, TMP_MARK and TMP_HEX random hex digits:
 * no name or object key may hold TMP_MARK, so no temp file is ever taken
 * for one, and what interrupted writes leave is found by its name.
 */
#define TMP_MARK ".tmp."
#define TMP_HEX 16
/* The temp name of @path into @tmp; -ENAMETOOLONG, or random_hex()'s failure. */
int tmp_name(const char *path, char tmp[PATH_MAX]);
/* The directory @path is in: "." for a name without '/', "/" for "/x"; -ENAMETOOLONG. */
int path_parent(const char *path, char dir[PATH_MAX]);

/*
 * A file written durably, as git's lockfile is: durable_open() creates a
 * temp file (tmp_name(), 0600) next to @path, the caller writes to @fd, and
 * durable_end() fsyncs it, renames it over @path and fsyncs the directory,
 * or, given a failure, removes it. A crash leaves @path old or new, never
 * partial. The struct is the caller's; @path must outlive it.
 */
struct durable_file {
	int fd; /* the temp file, open for writing; -1 when none is open */
	const char *path;
	char tmp[PATH_MAX];
	char dir[PATH_MAX];
	/* After a failure: the step, "create", "write", "fsync" or "rename to" (NULL: no
	 * temp name could be made), and what it failed on: path, tmp or dir. */
	const char *what;
	const char *on;
};
int durable_open(struct durable_file *d, const char *path);
/* Commit @d if @rc is 0, else (the caller's write failed: "write") remove it; 0 or -errno. */
int durable_end(struct durable_file *d, int rc);
/* Write @len bytes to @path durably (a struct durable_file). */
int write_file_durable(const char *path, const void *data, size_t len);
/*
 * Read a whole file of at most @max bytes (-EFBIG if longer), a /proc or
 * cgroupfs file too (they stat as empty); *out is NUL-terminated, caller frees.
 */
int read_file(const char *path, char **out, size_t *len, size_t max);
int fsync_dir(const char *dir);
/* mkdir -p: every directory it creates gets @mode (less the umask); existing ones are kept. */
int mkdir_p(const char *path, mode_t mode);
/* The next entry of @d but "." and "..", or NULL: errno is 0 at the end, else the failure. */
struct dirent *dir_next(DIR *d);
/* Remove a tree; a missing path is success. Never follows a symlink. */
int rm_rf(const char *path);
/* The same for entry @name of the open directory @dfd. */
int rm_rf_at(int dfd, const char *name);

/*
 * Directories no other user can change. The daemon is root and hands paths,
 * not descriptors, to runsc, so what it uses by path must lie below
 * directories only root can change: each directory from / down to @dir
 * (absolute, no symlink in it) is owned by root or by our euid and writable
 * by no one else, unless sticky (a sticky /tmp or /dev/shm lets others add
 * entries, never rename or remove ours). EPERM/ELOOP/ENOTDIR with a
 * sentence naming the culprit otherwise.
 */
int path_trusted(const char *dir, struct err *e);
/* Make the open directory @fd (@path, of @mode) 0700 if group or others could use it; logged. */
int dir_tighten(int fd, const char *path, mode_t mode, struct err *e);
/*
 * Open entry @name of @dfd (the directory @dir, for messages) as a private
 * directory: refused if it is a symlink, not a directory, or not ours;
 * tightened to 0700 (and logged) if group or others could use it. Returns
 * the descriptor or -errno.
 */
int private_dir_at(int dfd, const char *dir, const char *name, struct err *e);
/*
 * Open @path as a private directory (as private_dir_at), creating it 0700
 * with any missing parents, below trusted directories (path_trusted).
 * @canon gets its absolute path with no symlink in it, the one to use from
 * then on. Returns the descriptor or -errno.
 */
int private_dir_open(const char *path, char canon[PATH_MAX], struct err *e);
/* Free bytes on the filesystem holding @path, or a negative errno. */
int64_t free_bytes(const char *path);

/* Strip trailing newlines and spaces in place; returns the new length. */
size_t rstrip(char *s);
bool str_has_prefix(const char *s, const char *prefix);

#endif
