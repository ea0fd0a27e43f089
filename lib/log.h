/*
 * log.h - logging (lib/log.c): one line per event to stderr, the journal's
 * stream, or snapfs.log (lib/logfile.c), with a level prefix. err_set() and
 * err_clear() (declared in lib/util.h beside struct err) are log.c's too:
 * err_set() logs what it records at debug level. Thread-safe: one write per
 * line; log_init() runs before any thread.
 */
#ifndef SNAPFS_LOG_H
#define SNAPFS_LOG_H

#include <stdbool.h>
#include <stdint.h>

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

#endif
