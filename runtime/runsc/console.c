#include "runtime/runsc/console.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/logfile.h"

#define FIFO_NAME "console.fifo"
#define LOG_NAME "console.log"
#define ID_LEN 128
#define READ_BYTES (64u << 10)
#define EVENTS_MAX 32

struct console {
	char id[ID_LEN];
	char dir[PATH_MAX];
	int child_fd;	     /* the sandbox's end (O_RDWR), until attached */
	int read_fd;	     /* O_RDONLY | O_NONBLOCK */
	struct logfile *log; /* console.log and .1, shared with readers (console_log_get) */
	uint64_t serial;     /* its epoll tag, never reused */
	struct console *next;
};

/*
 * The logs, one per sandbox directory, shared by its console (the writer)
 * and the readers through the mount, so that a reader's offsets only grow
 * across the writer's rotations (lib/logfile.h). Counted: freed with the
 * last holder. A retired one (its sandbox removed) is no longer found.
 */
struct console_log {
	struct logfile lf; /* first: console_log_put() gets it back from &lf */
	char dir[PATH_MAX];
	unsigned refs;
	bool retired;
	struct console_log *next;
};

static pthread_mutex_t logs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct console_log *logs;

/* The attached consoles and the reader's epoll set, under one lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct console *attached;
static uint64_t next_serial = 1; /* 0 tags the wake-up eventfd */
static int epfd = -1, wakefd = -1;
static pthread_t reader;
static bool started, stopping;

static int path_in(const struct console *c, const char *name, char *out, size_t len)
{
	return xsnprintf(out, len, "%s/%s", c->dir, name) < 0 ? -ENAMETOOLONG : 0;
}

/* Open @name in @c's directory with @flags (never following a link): an fd or -errno. */
static int open_in(const struct console *c, const char *name, int flags)
{
	char path[PATH_MAX];
	int rc = path_in(c, name, path, sizeof(path));
	if (rc < 0)
		return rc;
	int fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW, 0600);
	return fd < 0 ? -errno : fd;
}

/* Under logs_lock: open @l's file if it is not (it exists, or @create). */
static int log_open_locked(struct console_log *l, bool create)
{
	char path[PATH_MAX];
	struct stat st;
	if (l->lf.fd >= 0)
		return 0;
	if (xsnprintf(path, sizeof(path), "%s/%s", l->dir, LOG_NAME) < 0)
		return -ENAMETOOLONG;
	/* A reader of a sandbox never started makes no file: it reads nothing. */
	if (!create && lstat(path, &st) < 0)
		return -errno;
	return logfile_open(&l->lf, path, CONSOLE_LOG_MAX, 0600, -1);
}

static int log_get(const char *dir, bool create, struct logfile **out)
{
	struct console_log *l;
	int rc = 0;
	pthread_mutex_lock(&logs_lock);
	for (l = logs; l; l = l->next)
		if (!l->retired && !strcmp(l->dir, dir))
			break;
	if (!l) {
		l = calloc(1, sizeof(*l));
		if (!l || xsnprintf(l->dir, sizeof(l->dir), "%s", dir) < 0) {
			free(l);
			pthread_mutex_unlock(&logs_lock);
			return -ENOMEM;
		}
		l->lf = (struct logfile)LOGFILE_INIT;
		l->next = logs;
		logs = l;
	}
	l->refs++;
	rc = log_open_locked(l, create);
	pthread_mutex_unlock(&logs_lock);
	*out = &l->lf;
	return rc;
}

struct logfile *console_log_get(const char *dir)
{
	struct logfile *lf = NULL;
	log_get(dir, false, &lf); /* a log not there (yet) reads as empty */
	return lf;
}

void console_log_put(struct logfile *lf)
{
	if (!lf)
		return;
	struct console_log *l = (struct console_log *)lf;
	pthread_mutex_lock(&logs_lock);
	bool last = --l->refs == 0;
	if (last) {
		for (struct console_log **pp = &logs; *pp; pp = &(*pp)->next) {
			if (*pp == l) {
				*pp = l->next;
				break;
			}
		}
	}
	pthread_mutex_unlock(&logs_lock);
	if (last) {
		logfile_close(&l->lf);
		pthread_mutex_destroy(&l->lf.lock);
		free(l);
	}
}

void console_log_retire(const char *dir)
{
	pthread_mutex_lock(&logs_lock);
	for (struct console_log *l = logs; l; l = l->next)
		if (!strcmp(l->dir, dir))
			l->retired = true;
	pthread_mutex_unlock(&logs_lock);
}

ssize_t console_log_read(struct logfile *lf, char *buf, size_t size, int64_t off)
{
	int64_t len;
	struct timespec mtime;
	/* Not open: no log yet (or it could not be made), an empty file. */
	if (!lf || logfile_stat(lf, &len, &mtime) < 0)
		return 0;
	return logfile_read(lf, buf, size, off);
}

int console_sink(void *console, const char *data, size_t len)
{
	struct console *c = console;
	/* Pieces no longer than the cap: each generation stays within it. */
	while (len > 0) {
		size_t n = len < (size_t)CONSOLE_LOG_MAX ? len : (size_t)CONSOLE_LOG_MAX;
		/* A full disk loses console output, never the sandbox. */
		if (c->log)
			logfile_append(c->log, data, n);
		data += n;
		len -= n;
	}
	return 0;
}

void console_free(struct console *c)
{
	if (!c)
		return;
	closep(&c->child_fd);
	closep(&c->read_fd);
	console_log_put(c->log);
	free(c);
}

static struct console *console_new(const char *dir)
{
	struct console *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->child_fd = c->read_fd = -1;
	if (xsnprintf(c->dir, sizeof(c->dir), "%s", dir) < 0) {
		free(c);
		return NULL;
	}
	return c;
}

/* Open @c's FIFO for reading, and its log; -ENOTSUP if the name is not a FIFO. */
static int open_reader(struct console *c)
{
	struct stat st;
	int fd = open_in(c, FIFO_NAME, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		return fd;
	c->read_fd = fd;
	if (fstat(c->read_fd, &st) < 0 || !S_ISFIFO(st.st_mode))
		return -ENOTSUP;
	/* More room than the default 64 KiB: fewer stalls of a sandbox that writes in bursts. */
	fcntl(c->read_fd, F_SETPIPE_SZ, CONSOLE_PIPE_BYTES);
	return log_get(c->dir, true, &c->log);
}

int console_open(const char *dir, struct console **out, struct err *e)
{
	char path[PATH_MAX];
	struct console *c = console_new(dir);
	int rc = c ? mkdir_p(dir, 0700) : -ENOMEM;
	if (rc == 0)
		rc = path_in(c, FIFO_NAME, path, sizeof(path));
	if (rc == 0 && unlink(path) < 0 && errno != ENOENT)
		rc = -errno;
	if (rc == 0 && mkfifo(path, 0600) < 0)
		rc = -errno;
	if (rc == 0)
		rc = open_reader(c);
	if (rc == 0) {
		c->child_fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (c->child_fd < 0)
			rc = -errno;
	}
	if (rc < 0) {
		console_free(c);
		return err_set(e, -rc, "cannot make the console of %s: %s", dir, strerror(-rc));
	}
	*out = c;
	return 0;
}

void console_stdio(struct console *c, struct runsc_stdio *io)
{
	io->child_fd = c->child_fd;
	io->read_fd = c->read_fd;
	io->sink = console_sink;
	io->sink_arg = c;
}

static int ensure_epoll(void)
{
	if (epfd >= 0)
		return 0;
	epfd = epoll_create1(EPOLL_CLOEXEC);
	wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
	if (epfd < 0 || wakefd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, wakefd, &ev) < 0) {
		int rc = -errno;
		closep(&epfd);
		closep(&wakefd);
		epfd = wakefd = -1;
		return rc;
	}
	return 0;
}

/* Under the lock: take @c out of the list and the epoll set, and free it. */
static void remove_locked(struct console *c)
{
	for (struct console **pp = &attached; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	epoll_ctl(epfd, EPOLL_CTL_DEL, c->read_fd, NULL);
	console_free(c);
}

static struct console *find_locked(const char *id, uint64_t serial)
{
	for (struct console *c = attached; c; c = c->next)
		if (id ? !strcmp(c->id, id) : c->serial == serial)
			return c;
	return NULL;
}

void console_attach(struct console *c, const char *id)
{
	/* Only the sandbox holds its end now: its exit ends the FIFO. */
	closep(&c->child_fd);
	c->child_fd = -1;
	snprintf(c->id, sizeof(c->id), "%s", id);
	pthread_mutex_lock(&lock);
	struct console *old = find_locked(id, 0);
	if (old)
		remove_locked(old);
	int rc = ensure_epoll();
	c->serial = next_serial++;
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = c->serial};
	if (rc == 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, c->read_fd, &ev) < 0)
		rc = -errno;
	if (rc == 0) {
		c->next = attached;
		attached = c;
	}
	pthread_mutex_unlock(&lock);
	if (rc < 0) {
		warning("cannot read the console of sandbox %s: %s", id, strerror(-rc));
		console_free(c);
	}
}

int console_reopen(const char *id, const char *dir)
{
	struct console *c = console_new(dir);
	int rc = c ? open_reader(c) : -ENOMEM;
	if (rc < 0) {
		console_free(c);
		return rc;
	}
	console_attach(c, id);
	return 0;
}

/*
 * What the FIFO still holds, into the log: the last lines a sandbox wrote
 * before it ended may not have been read yet (the reader thread serves
 * its consoles in turn). Never more than two FIFOs' worth: a sandbox that
 * still writes does not hold the caller.
 */
static void drain_locked(struct console *c)
{
	static char buf[READ_BYTES];
	size_t total = 0;
	while (total < 2 * (size_t)CONSOLE_PIPE_BYTES) {
		ssize_t got = read(c->read_fd, buf, sizeof(buf));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return;
		console_sink(c, buf, (size_t)got);
		total += (size_t)got;
	}
}

void console_detach(const char *id)
{
	pthread_mutex_lock(&lock);
	struct console *c = find_locked(id, 0);
	if (c) {
		drain_locked(c);
		remove_locked(c);
	}
	pthread_mutex_unlock(&lock);
}

/* One read of each ready console; a console whose every writer is gone is dropped. */
static void serve(const struct epoll_event *ev, int n, char *buf)
{
	for (int i = 0; i < n; i++) {
		if (ev[i].data.u64 == 0) {
			uint64_t v;
			if (read(wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				warning("console reader: eventfd: %s", strerror(errno));
			continue;
		}
		struct console *c = find_locked(NULL, ev[i].data.u64);
		if (!c)
			continue; /* detached since epoll_wait returned */
		ssize_t got = read(c->read_fd, buf, READ_BYTES);
		if (got > 0)
			console_sink(c, buf, (size_t)got);
		else if (got == 0 || (errno != EAGAIN && errno != EINTR))
			remove_locked(c);
	}
}

static void *reader_main(void *arg)
{
	static char buf[READ_BYTES];
	struct epoll_event ev[EVENTS_MAX];
	(void)arg;
	for (;;) {
		int n = epoll_wait(epfd, ev, EVENTS_MAX, -1);
		if (n < 0 && errno != EINTR) {
			warning("console reader: epoll_wait: %s", strerror(errno));
			break;
		}
		pthread_mutex_lock(&lock);
		bool stop = stopping;
		if (!stop && n > 0)
			serve(ev, n, buf);
		pthread_mutex_unlock(&lock);
		if (stop)
			break;
	}
	return NULL;
}

int console_start(void)
{
	pthread_mutex_lock(&lock);
	int rc = ensure_epoll();
	pthread_mutex_unlock(&lock);
	if (rc < 0)
		return rc;
	rc = -pthread_create(&reader, NULL, reader_main, NULL);
	started = rc == 0;
	return rc;
}

void console_stop(void)
{
	uint64_t one = 1;
	pthread_mutex_lock(&lock);
	stopping = true;
	pthread_mutex_unlock(&lock);
	if (started) {
		if (write(wakefd, &one, sizeof(one)) < 0)
			warning("console reader: cannot wake it: %s", strerror(errno));
		pthread_join(reader, NULL);
		started = false;
	}
	/* The sandboxes keep their ends: their output waits in the FIFOs for the next daemon. */
	pthread_mutex_lock(&lock);
	while (attached)
		remove_locked(attached);
	pthread_mutex_unlock(&lock);
}
