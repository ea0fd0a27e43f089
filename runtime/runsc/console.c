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

#define FIFO_NAME "console.fifo"
#define LOG_NAME "console.log"
#define OLD_LOG_NAME "console.log.1"
#define ID_LEN 128
#define READ_BYTES (64u << 10)
#define EVENTS_MAX 32

struct console {
	char id[ID_LEN];
	char dir[PATH_MAX];
	int child_fd; /* the sandbox's end (O_RDWR), until attached */
	int read_fd;  /* O_RDONLY | O_NONBLOCK */
	int log_fd;
	int64_t log_size;
	uint64_t serial; /* its epoll tag, never reused */
	struct console *next;
};

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

static int open_log(struct console *c)
{
	struct stat st;
	int fd = open_in(c, LOG_NAME, O_WRONLY | O_CREAT | O_APPEND | O_NOCTTY);
	if (fd < 0)
		return fd;
	c->log_fd = fd;
	c->log_size = fstat(c->log_fd, &st) == 0 ? st.st_size : 0;
	return 0;
}

/* console.log becomes console.log.1 (replacing it) and a new one begins. */
static void rotate(struct console *c)
{
	char cur[PATH_MAX], old[PATH_MAX];
	closep(&c->log_fd);
	c->log_fd = -1;
	if (path_in(c, LOG_NAME, cur, sizeof(cur)) == 0 &&
	    path_in(c, OLD_LOG_NAME, old, sizeof(old)) == 0 && rename(cur, old) < 0)
		unlink(cur); /* cannot keep the old one: at least bound the new one */
	c->log_size = 0;
	if (open_log(c) < 0)
		c->log_fd = -1;
}

int console_sink(void *console, const char *data, size_t len)
{
	struct console *c = console;
	while (len > 0) {
		if (c->log_size >= CONSOLE_LOG_MAX)
			rotate(c);
		size_t room = (size_t)(CONSOLE_LOG_MAX - c->log_size);
		size_t n = len < room ? len : room;
		/* A full disk loses console output, never the sandbox: the count goes on. */
		if (c->log_fd >= 0)
			write_all(c->log_fd, data, n);
		c->log_size += (int64_t)n;
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
	closep(&c->log_fd);
	free(c);
}

static struct console *console_new(const char *dir)
{
	struct console *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->child_fd = c->read_fd = c->log_fd = -1;
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
	return open_log(c);
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

void console_detach(const char *id)
{
	pthread_mutex_lock(&lock);
	struct console *c = find_locked(id, 0);
	if (c)
		remove_locked(c);
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
