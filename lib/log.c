/*
 * log.c - logging (lib/log.h) and err_set()/err_wrap()/err_clear() (lib/util.h): one
 * line per event, to stderr or, once log_to_file() ran, to snapfs.log
 * through lib/logfile.c. Everything here is safe from any thread.
 */
#include "lib/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/logfile.h"
#include "lib/util.h"

bool log_debug_enabled;

/* snapfs.log in the background (log_to_file()); until then, stderr as it is. */
static struct logfile log_file = LOGFILE_INIT;
static atomic_bool log_file_open;
/* stderr is the journal's stream (log_init()): no timestamp, a <N> priority instead. */
static atomic_bool log_journal;

void log_init(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char tail;
	/* sd-daemon(3): JOURNAL_STREAM is "DEV:INO" of the stream systemd connected. */
	if (js && sscanf(js, "%llu:%llu%c", &dev, &ino, &tail) == 2 &&
	    fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino)
		atomic_store(&log_journal, true);
}

int log_to_file(const char *path, int64_t max_bytes)
{
	int rc = logfile_open(&log_file, path, max_bytes, 0600, STDERR_FILENO);
	atomic_store(&log_file_open, rc == 0);
	if (rc == 0)
		atomic_store(&log_journal, false);
	return rc;
}

int log_reopen(void)
{
	if (!atomic_load(&log_file_open))
		return 0;
	int rc = logfile_reopen(&log_file);
	return rc < 0 ? rc : 1;
}

/* The syslog priority (sd-daemon(3) prefixes) of each level vlog() is given. */
static int log_priority(const char *level)
{
	switch (level[0]) {
	case 'e':
		return 3; /* LOG_ERR */
	case 'w':
		return 4; /* LOG_WARNING */
	case 'i':
		return 6; /* LOG_INFO */
	default:
		return 7; /* LOG_DEBUG */
	}
}

/* One event, one line: `TIME snapfs LEVEL: MESSAGE`, or `<N>LEVEL: MESSAGE` to the journal. */
static void vlog(const char *level, const char *fmt, va_list ap)
{
	char line[ERR_MSG_MAX + 64];
	char when[32];
	int n;
	if (atomic_load(&log_journal)) {
		n = snprintf(line, sizeof(line), "<%d>%s: ", log_priority(level), level);
	} else {
		format_time(now_ms(), when);
		n = snprintf(line, sizeof(line), "%s snapfs %s: ", when, level);
	}
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	/* A message quoting what runsc or a user wrote must not start a line of its own. */
	for (char *p = line + n; (p = strpbrk(p, "\r\n")) != NULL;)
		*p = ' ';
	if (atomic_load(&log_file_open)) {
		/* One write per line, and the file rotated at its cap. */
		size_t len = strlen(line);
		line[len] = '\n';
		logfile_append(&log_file, line, len + 1);
		return;
	}
	/* One fprintf per line keeps lines of concurrent threads whole. */
	fprintf(stderr, "%s\n", line);
}

int error(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog("error", fmt, ap);
	va_end(ap);
	return code > 0 ? -code : -EIO;
}

void warning(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog("warning", fmt, ap);
	va_end(ap);
}

void info(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog("info", fmt, ap);
	va_end(ap);
}

void debug(const char *fmt, ...)
{
	if (!log_debug_enabled)
		return;
	va_list ap;
	va_start(ap, fmt);
	vlog("debug", fmt, ap);
	va_end(ap);
}

int err_set(struct err *e, int code, const char *fmt, ...)
{
	char msg[ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	debug("%s (%s)", msg, strerror(code));
	if (e) {
		e->code = code;
		memcpy(e->msg, msg, sizeof(msg));
	}
	return -code;
}

int err_wrap(struct err *e, const char *fmt, ...)
{
	char ctx[ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ctx, sizeof(ctx), fmt, ap);
	va_end(ap);
	if (!e || !e->code)
		return err_set(e, EIO, "%s", ctx);
	char inner[ERR_MSG_MAX];
	memcpy(inner, e->msg, sizeof(inner));
	return err_set(e, e->code, "%s: %s", ctx, inner);
}

void err_clear(struct err *e)
{
	e->code = 0;
	e->msg[0] = '\0';
}
