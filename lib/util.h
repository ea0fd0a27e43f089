/*
 * util.h - small helpers every module uses: cleanup attributes, growing
 * arrays, error reporting, time, random ids, bounded formatting. Logging
 * is lib/log.h's and file I/O lib/files.h's; this header includes both, so
 * a module includes util.h alone. Pure functions, safe from any thread.
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
#include <pthread.h>
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
#define _cleanup_closedir_ _cleanup_(closedirp)
/* Each leaves errno as it found it (lxcfs's close_prot_errno_disarm): cleanup runs on return
 * paths that already chose what to report. */
void freep(void *p);
void closep(int *fd);
void fclosep(FILE **f);
void closedirp(DIR **d);

/* Hand ownership out of a cleanup variable: `return steal_ptr(buf);`. */
#define steal_ptr(p)                                                                               \
	({                                                                                         \
		__typeof__(p) tmp_ = (p);                                                          \
		(p) = NULL;                                                                        \
		tmp_;                                                                              \
	})

/*
 * Room for one more element in a growing array, after git's ALLOC_GROW
 * (git-compat-util.h), but failing instead of dying: @arr holds @used of
 * @cap elements; when full it doubles (16 at first). Evaluates to 0, or
 * -ENOMEM with @arr and @cap left as they were. alloc_grow() is its
 * function: the bigger array (or @arr when there is room), NULL on ENOMEM.
 */
void *alloc_grow(void *arr, size_t *cap, size_t used, size_t size);
#define ALLOC_GROW(arr, cap, used)                                                                 \
	({                                                                                         \
		__typeof__(arr) grown_ = alloc_grow((arr), &(cap), (used), sizeof(*(arr)));        \
		if (grown_)                                                                        \
			(arr) = grown_;                                                            \
		grown_ ? 0 : -ENOMEM;                                                              \
	})

/* Longest message a struct err keeps; longer ones are cut. */
#define ERR_MSG_MAX 1024

/* A failure's errno and the sentence that explains it to the user. */
struct err {
	int code; /* positive errno, 0 when nothing failed */
	char msg[ERR_MSG_MAX];
};

/* Record a failure in @e (which may be NULL) and log it (lib/log.c); returns -code. */
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

/* A condition variable whose waits are timed on CLOCK_MONOTONIC, as mono_ms(). */
void cond_init_mono(pthread_cond_t *c);
/* Wait on @c (init'd by cond_init_mono()) until signalled or @deadline_ms; false at the deadline.
 */
bool cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, int64_t deadline_ms);

/* Milliseconds since the epoch (CLOCK_REALTIME) and since boot (CLOCK_MONOTONIC). */
int64_t now_ms(void);
int64_t mono_ms(void);
/* RFC 3339 UTC with milliseconds: 2026-11-29T10:32:12.123Z. @out holds 32 bytes. */
void format_time(int64_t ms, char out[32]);

/* FNV-1a, 64 bits, of the string @s: a hash for tables and made-up inode numbers, not for trust. */
uint64_t fnv1a(const char *s);

/* @nhex random lowercase hex digits into @out (nhex + 1 bytes); @nhex at most RANDOM_HEX_MAX. */
#define RANDOM_HEX_MAX 128
int random_hex(char *out, size_t nhex);
/* @prefix then @nhex random hex digits into @out (@size bytes); -ENAMETOOLONG, or random_hex()'s
 * failure. */
int random_name(const char *prefix, size_t nhex, char *out, size_t size);
/* @len bytes as 2 * @len lowercase hex digits into @out, NUL-terminated (2 * len + 1 bytes). */
void hex_encode(const unsigned char *raw, size_t len, char *out);

/* Environment variable @name as a count above 0, or @fallback (a knob for tests). */
long env_count(const char *name, long fallback);

/* snprintf that fails with -ENAMETOOLONG instead of truncating. */
int xsnprintf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Strip trailing newlines and spaces in place; returns the new length. */
size_t rstrip(char *s);
bool str_has_prefix(const char *s, const char *prefix);

#include "lib/files.h" /* after struct err: callers of util.h see both */
#include "lib/log.h"

#endif
