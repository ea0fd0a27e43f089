/* forward.c - published ports: the forwarder thread (forward.h says how it works). */
#include "runtime/net/forward.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/net/net.h"

#define EVENTS_MAX 64
#define BACKLOG 64

/* One direction of a connection: bytes read from one side, not yet written to the other. */
struct flow {
	char buf[FORWARD_BUF_BYTES];
	size_t len, off; /* buf[off..len) is still to write */
	bool eof;	 /* its reader saw the end */
	bool shut;	 /* and the other side was shut for writing after the last byte */
};

struct tally {
	char sandbox_id[ID_MAX];
	struct forward_stats st;
	struct tally *next;
};

struct port {
	char sandbox_id[ID_MAX];
	uint16_t port; /* the sandbox's */
	int fd;	       /* listening */
	uint64_t serial;
	unsigned conns;
	struct tally *tally;
	bool paused; /* out of the epoll set until accepts_resume_ms (out of fds) */
	struct port *next;
};

struct conn {
	uint64_t serial;     /* tags serial (the client's fd) and serial + 1 (the sandbox's) */
	int fd[2];	     /* 0: the client, 1: the sandbox */
	uint32_t events[2];  /* what each fd is in the epoll set for; 0: it is not */
	struct flow flow[2]; /* flow[s] is read from fd[s] and written to fd[!s] */
	bool connecting;     /* until the sandbox's side is connected */
	int64_t deadline_ms; /* mono_ms() it is closed at: connect or idle timeout */
	int64_t active_ms;   /* mono_ms() it last moved a byte, or began: the eviction's order */
	struct port *port;
	struct conn *next;
};

/* All of it under one lock (forward.h); the resolver is called without it. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct port *ports;
static struct conn *conns;
static struct tally *tallies;
static unsigned nports, nconns;
static uint64_t next_serial = 1; /* 0 tags the wake-up eventfd */
static int epfd = -1, wakefd = -1;
static int spare_fd = -1; /* given up to accept one connection to close when out of fds */
static pthread_t thread;
static bool started, stopping;
static forward_resolve_fn resolver;
static struct in_addr listen_addr;
static char listen_text[INET_ADDRSTRLEN] = "127.0.0.1";
static unsigned connect_timeout_ms = FORWARD_CONNECT_TIMEOUT_MS;
static unsigned idle_timeout_ms = FORWARD_IDLE_TIMEOUT_MS;
static unsigned evict_idle_ms = FORWARD_EVICT_IDLE_MS;
static int64_t accepts_resume_ms; /* when paused listeners accept again; 0: none is */

/* --- clocks: connect and idle timeouts, the back-off out of fds ----------- */

/* @c did something (or began): its clock starts again. */
static void conn_touch(struct conn *c)
{
	c->active_ms = mono_ms();
	c->deadline_ms = c->active_ms + (c->connecting ? connect_timeout_ms : idle_timeout_ms);
}

/*
 * Out of fds (or kernel memory) with a client waiting: the listener leaves
 * the epoll set for FORWARD_ACCEPT_BACKOFF_MS. Left in, its level-triggered
 * readiness would wake the thread at once, again and again, for an accept
 * that fails the same way.
 */
static void port_pause(struct port *p)
{
	if (p->paused)
		return;
	epoll_ctl(epfd, EPOLL_CTL_DEL, p->fd, NULL);
	p->paused = true;
	if (!accepts_resume_ms)
		accepts_resume_ms = mono_ms() + FORWARD_ACCEPT_BACKOFF_MS;
}

static bool out_of_fds(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

/* --- connections ------------------------------------------------------------ */

static void conn_free(struct conn *c)
{
	for (struct conn **pp = &conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	for (int s = 0; s < 2; s++) {
		if (c->events[s])
			epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd[s], NULL);
		closep(&c->fd[s]);
	}
	c->port->conns--;
	c->port->tally->st.open--;
	nconns--;
	free(c);
}

/* What side @s waits for: a read while its flow has room, a write while the other's has bytes. */
static uint32_t wanted(const struct conn *c, int s)
{
	if (c->connecting)
		return s == 1 ? EPOLLOUT : 0;
	uint32_t ev = 0;
	if (!c->flow[s].eof && c->flow[s].len == 0)
		ev |= EPOLLIN;
	if (c->flow[!s].off < c->flow[!s].len)
		ev |= EPOLLOUT;
	return ev;
}

/*
 * Register each side for what it waits for; a side that waits for nothing
 * leaves the set, so a hang-up it cannot act on yet does not wake the
 * thread again and again.
 */
static int conn_update(struct conn *c)
{
	for (int s = 0; s < 2; s++) {
		uint32_t want = wanted(c, s);
		if (want == c->events[s])
			continue;
		struct epoll_event ev = {.events = want, .data.u64 = c->serial + (uint64_t)s};
		int op = !c->events[s] ? EPOLL_CTL_ADD : want ? EPOLL_CTL_MOD : EPOLL_CTL_DEL;
		if (epoll_ctl(epfd, op, c->fd[s], &ev) < 0)
			return -errno;
		c->events[s] = want;
	}
	return 0;
}

static bool again(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

/* Move what flows from side @s to the other: 0, or -1 when the connection is broken. */
static int pump(struct conn *c, int s)
{
	struct flow *f = &c->flow[s];
	if (!f->eof && f->len == 0) {
		ssize_t n = recv(c->fd[s], f->buf, sizeof(f->buf), 0);
		if (n > 0)
			f->len = (size_t)n;
		else if (n == 0)
			f->eof = true;
		else if (!again())
			return -1;
	}
	while (f->off < f->len) {
		ssize_t n = send(c->fd[!s], f->buf + f->off, f->len - f->off, MSG_NOSIGNAL);
		if (n < 0 && again())
			break;
		if (n < 0)
			return -1;
		f->off += (size_t)n;
		struct forward_stats *st = &c->port->tally->st;
		*(s == 0 ? &st->bytes_in : &st->bytes_out) += (uint64_t)n;
	}
	if (f->off == f->len)
		f->len = f->off = 0;
	/* The half-close is passed on once every byte before it is. */
	if (f->eof && f->len == 0 && !f->shut) {
		shutdown(c->fd[!s], SHUT_WR);
		f->shut = true;
	}
	return 0;
}

static void conn_event(struct conn *c, uint32_t ev)
{
	if (c->connecting) {
		int err = 0;
		socklen_t len = sizeof(err);
		if (getsockopt(c->fd[1], SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
			conn_free(
			    c); /* the sandbox cannot be reached: the client sees its end now */
			return;
		}
		c->connecting = false;
	} else if (ev & EPOLLERR) {
		conn_free(c);
		return;
	}
	conn_touch(c);
	if (pump(c, 0) < 0 || pump(c, 1) < 0 || (c->flow[0].shut && c->flow[1].shut) ||
	    conn_update(c) < 0)
		conn_free(c);
}

/* Connect accepted @client of @p to @to, without waiting; it is closed if that cannot begin. */
static void conn_open(struct port *p, int client, struct sockaddr_in *to)
{
	struct conn *c = calloc(1, sizeof(*c));
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	/*
	 * The mark that lets it through the inbound filter (runtime/net/net.h).
	 * Without CAP_NET_ADMIN (a unit test) it stays unmarked: the filter,
	 * which only a daemon with it sets up, is not in its way then.
	 */
	int mark = NET_FORWARD_MARK;
	if (fd >= 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof(mark));
	to->sin_family = AF_INET;
	to->sin_port = htons(p->port);
	int rc = c && fd >= 0 ? connect(fd, (struct sockaddr *)to, sizeof(*to)) : -1;
	if (rc < 0 && (!c || fd < 0 || errno != EINPROGRESS)) {
		free(c);
		closep(&fd);
		close(client);
		return;
	}
	c->fd[0] = client;
	c->fd[1] = fd;
	c->connecting = rc < 0;
	conn_touch(c);
	c->serial = next_serial;
	next_serial += 2;
	c->port = p;
	c->next = conns;
	conns = c;
	p->conns++;
	p->tally->st.open++;
	nconns++;
	if (conn_update(c) < 0)
		conn_free(c);
}

/* --- listeners --------------------------------------------------------------- */

static struct port *port_by_serial(uint64_t serial)
{
	for (struct port *p = ports; p; p = p->next)
		if (p->serial == serial)
			return p;
	return NULL;
}

static bool over_limit(const struct port *p)
{
	return p->conns >= FORWARD_CONNS_PORT_MAX || nconns >= FORWARD_CONNS_MAX;
}

/*
 * Room for one more connection on @p: when its table (or the daemon's) is
 * full, the connection of that table that has moved no byte for longest
 * is closed, if that is evict_idle_ms or more. Any local user may connect
 * (docs/network.md), so idle sockets must not hold a port until the idle
 * timeout; a client that keeps every slot busy with traffic still can.
 */
static bool make_room(struct port *p)
{
	if (!over_limit(p))
		return true;
	bool port_full = p->conns >= FORWARD_CONNS_PORT_MAX;
	int64_t idle_since = mono_ms() - evict_idle_ms;
	struct conn *oldest = NULL;
	for (struct conn *c = conns; c; c = c->next) {
		if ((port_full && c->port != p) || c->active_ms > idle_since)
			continue;
		/* Idle as long: the one opened first (the smaller serial) goes. */
		if (!oldest || c->active_ms < oldest->active_ms ||
		    (c->active_ms == oldest->active_ms && c->serial < oldest->serial))
			oldest = c;
	}
	if (!oldest)
		return false;
	oldest->port->tally->st.evicted++;
	conn_free(oldest);
	return !over_limit(p);
}

/*
 * Out of fds: the waiting client is accepted on the spare descriptor and
 * closed at once; where even that fails (no spare, or its slot is past the
 * limit) the listener backs off (port_pause()).
 */
static void accept_starved(struct port *p)
{
	int fd = -1;
	if (spare_fd >= 0) {
		closep(&spare_fd);
		fd = accept4(p->fd, NULL, NULL, SOCK_CLOEXEC);
		spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0)
		port_pause(p);
	closep(&fd);
}

/* Accept one connection on @p, ask where its sandbox is (the lock dropped meanwhile), connect. */
static void port_event(struct port *p)
{
	int fd = accept4(p->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0 && out_of_fds(errno)) {
		accept_starved(p);
		return;
	}
	if (fd < 0)
		return;
	p->tally->st.connections++;
	if (!make_room(p)) {
		close(fd);
		return;
	}
	char id[ID_MAX];
	memcpy(id, p->sandbox_id, sizeof(id));
	uint64_t serial = p->serial;
	forward_resolve_fn resolve = resolver;
	struct sockaddr_in to = {0};
	pthread_mutex_unlock(&lock);
	int rc = resolve ? resolve(id, &to) : -ENETUNREACH;
	pthread_mutex_lock(&lock);
	p = port_by_serial(serial); /* closed meanwhile: NULL */
	if (rc < 0 || !p || stopping || !make_room(p))
		close(fd);
	else
		conn_open(p, fd, &to);
}

static struct port *port_get(const char *sandbox_id, uint16_t port)
{
	for (struct port *p = ports; p; p = p->next)
		if (p->port == port && !strcmp(p->sandbox_id, sandbox_id))
			return p;
	return NULL;
}

static struct tally *tally_get(const char *sandbox_id, bool create)
{
	for (struct tally *t = tallies; t; t = t->next)
		if (!strcmp(t->sandbox_id, sandbox_id))
			return t;
	struct tally *t = create ? calloc(1, sizeof(*t)) : NULL;
	if (!t || xsnprintf(t->sandbox_id, sizeof(t->sandbox_id), "%s", sandbox_id) < 0) {
		free(t);
		return NULL;
	}
	t->next = tallies;
	tallies = t;
	return t;
}

/* Close @p and every connection it forwards. */
static void port_free(struct port *p)
{
	for (struct conn *c = conns, *next; c; c = next) {
		next = c->next;
		if (c->port == p)
			conn_free(c);
	}
	for (struct port **pp = &ports; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	epoll_ctl(epfd, EPOLL_CTL_DEL, p->fd, NULL);
	closep(&p->fd);
	nports--;
	free(p);
}

/* A listening socket on the publish address, port @host_port (0: the kernel's pick). */
static int listen_on(uint16_t host_port, uint16_t *bound)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(host_port)};
	socklen_t len = sizeof(a);
	int one = 1;
	a.sin_addr = listen_addr;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	/* A port left in TIME_WAIT by the daemon before a restart is bound again. */
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, BACKLOG) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		int rc = -errno;
		closep(&fd);
		return rc;
	}
	*bound = ntohs(a.sin_port);
	return fd;
}

static int port_add(const char *sandbox_id, uint16_t port, uint16_t host_port, uint16_t *bound,
		    struct err *e)
{
	struct port *p = calloc(1, sizeof(*p));
	struct tally *t = p ? tally_get(sandbox_id, true) : NULL;
	if (!t || xsnprintf(p->sandbox_id, sizeof(p->sandbox_id), "%s", sandbox_id) < 0) {
		free(p);
		return err_set(e, ENOMEM, "cannot publish port %u of sandbox %s: out of memory",
			       port, sandbox_id);
	}
	p->fd = listen_on(host_port, bound);
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = next_serial};
	int rc = p->fd < 0 ? p->fd : epoll_ctl(epfd, EPOLL_CTL_ADD, p->fd, &ev) < 0 ? -errno : 0;
	if (rc < 0) {
		closep(&p->fd);
		free(p);
		return err_set(e, -rc, "cannot listen on %s:%u for port %u of sandbox %s: %s",
			       listen_text, host_port, port, sandbox_id, strerror(-rc));
	}
	p->port = port;
	p->serial = next_serial++;
	p->tally = t;
	p->next = ports;
	ports = p;
	nports++;
	return 0;
}

/* --- the API --------------------------------------------------------------- */

int forward_open(const char *sandbox_id, uint16_t port, uint16_t host_port, uint16_t *bound,
		 struct err *e)
{
	int rc;
	pthread_mutex_lock(&lock);
	if (!started)
		rc = err_set(e, EAGAIN, "cannot publish port %u of sandbox %s: no forwarder runs",
			     port, sandbox_id);
	else if (port_get(sandbox_id, port))
		rc = err_set(e, EEXIST, "port %u of sandbox %s is published already", port,
			     sandbox_id);
	else if (nports >= FORWARD_PORTS_MAX)
		rc = err_set(e, ENOSPC, "cannot publish port %u of sandbox %s: %d ports are", port,
			     sandbox_id, FORWARD_PORTS_MAX);
	else
		rc = port_add(sandbox_id, port, host_port, bound, e);
	pthread_mutex_unlock(&lock);
	return rc;
}

int forward_close(const char *sandbox_id, uint16_t port)
{
	pthread_mutex_lock(&lock);
	struct port *p = port_get(sandbox_id, port);
	if (p)
		port_free(p);
	pthread_mutex_unlock(&lock);
	return p ? 0 : -ENOENT;
}

void forward_close_sandbox(const char *sandbox_id, bool forget)
{
	pthread_mutex_lock(&lock);
	for (struct port *p = ports, *next; p; p = next) {
		next = p->next;
		if (!strcmp(p->sandbox_id, sandbox_id))
			port_free(p);
	}
	for (struct tally **tp = &tallies; forget && *tp; tp = &(*tp)->next) {
		if (!strcmp((*tp)->sandbox_id, sandbox_id)) {
			struct tally *t = *tp;
			*tp = t->next;
			free(t);
			break;
		}
	}
	pthread_mutex_unlock(&lock);
}

int forward_stats(const char *sandbox_id, struct forward_stats *out)
{
	pthread_mutex_lock(&lock);
	struct tally *t = tally_get(sandbox_id, false);
	if (t)
		*out = t->st;
	pthread_mutex_unlock(&lock);
	return t ? 0 : -ENOENT;
}

int forward_resolve(const char *sandbox_id, struct sockaddr_in *out)
{
	pthread_mutex_lock(&lock);
	forward_resolve_fn resolve = resolver;
	pthread_mutex_unlock(&lock);
	return resolve ? resolve(sandbox_id, out) : -ENETUNREACH;
}

void forward_set_resolver(forward_resolve_fn resolve)
{
	pthread_mutex_lock(&lock);
	resolver = resolve;
	pthread_mutex_unlock(&lock);
}

void forward_set_timeouts(unsigned connect_ms, unsigned idle_ms)
{
	pthread_mutex_lock(&lock);
	connect_timeout_ms = connect_ms ? connect_ms : FORWARD_CONNECT_TIMEOUT_MS;
	idle_timeout_ms = idle_ms ? idle_ms : FORWARD_IDLE_TIMEOUT_MS;
	pthread_mutex_unlock(&lock);
}

void forward_set_evict_idle(unsigned ms)
{
	pthread_mutex_lock(&lock);
	evict_idle_ms = ms ? ms : FORWARD_EVICT_IDLE_MS;
	pthread_mutex_unlock(&lock);
}

const char *forward_address(void)
{
	return listen_text;
}

/* --- the thread ---------------------------------------------------------- */

/* How long the thread may wait for an event: to the nearest deadline; -1: none. */
static int clocks_wait_ms(void)
{
	int64_t next = accepts_resume_ms;
	for (struct conn *c = conns; c; c = c->next)
		if (!next || c->deadline_ms < next)
			next = c->deadline_ms;
	if (!next)
		return -1;
	int64_t left = next - mono_ms();
	return left <= 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

/* Close the connections past their deadline; put paused listeners back once their time is up. */
static void clocks_run(void)
{
	int64_t now = mono_ms();
	for (struct conn *c = conns, *next; c; c = next) {
		next = c->next;
		if (c->deadline_ms <= now)
			conn_free(c);
	}
	if (!accepts_resume_ms || now < accepts_resume_ms)
		return;
	accepts_resume_ms = 0;
	if (spare_fd < 0)
		spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (struct port *p = ports; p; p = p->next) {
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = p->serial};
		if (p->paused && epoll_ctl(epfd, EPOLL_CTL_ADD, p->fd, &ev) == 0)
			p->paused = false;
		else if (p->paused) /* out of memory for the epoll entry too: later */
			accepts_resume_ms = now + FORWARD_ACCEPT_BACKOFF_MS;
	}
}

static void dispatch(uint64_t tag, uint32_t ev)
{
	struct port *p = port_by_serial(tag);
	if (p) {
		port_event(p);
		return;
	}
	for (struct conn *c = conns; c; c = c->next) {
		if (tag - c->serial < 2) {
			conn_event(c, ev);
			return;
		}
	}
}

static void *forward_main(void *arg)
{
	(void)arg;
	struct epoll_event evs[EVENTS_MAX];
	for (;;) {
		pthread_mutex_lock(&lock);
		int wait_ms = clocks_wait_ms();
		pthread_mutex_unlock(&lock);
		int n = epoll_wait(epfd, evs, EVENTS_MAX, wait_ms);
		if (n < 0 && errno != EINTR)
			break;
		pthread_mutex_lock(&lock);
		bool stop = stopping;
		if (!stop)
			clocks_run();
		for (int i = 0; i < n && !stopping; i++)
			if (evs[i].data.u64)
				dispatch(evs[i].data.u64, evs[i].events);
		pthread_mutex_unlock(&lock);
		if (stop)
			break;
	}
	return NULL;
}

/*
 * Each forwarded connection holds two fds: room for FORWARD_CONNS_MAX, the
 * monitor's MONITOR_WATCH_MAX pidfds and 1024 for the rest, as far as the
 * hard limit allows.
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	rlim_t want = 2 * FORWARD_CONNS_MAX + FORWARD_PORTS_MAX + MONITOR_WATCH_MAX + 1024;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		warning("forward: cannot raise the open files limit to %llu: %s",
			(unsigned long long)rl.rlim_cur, strerror(errno));
}

int forward_start(const char *address, forward_resolve_fn resolve, struct err *e)
{
	const char *a = address && address[0] ? address : "127.0.0.1";
	if (inet_pton(AF_INET, a, &listen_addr) != 1)
		return err_set(e, EINVAL, "--publish-address %s is no IPv4 address", a);
	inet_ntop(AF_INET, &listen_addr, listen_text, sizeof(listen_text));
	resolver = resolve;
	raise_fd_limit();
	spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
	int rc = epfd < 0 || wakefd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, wakefd, &ev) < 0
		     ? errno
		     : pthread_create(&thread, NULL, forward_main, NULL);
	if (rc) {
		closep(&epfd);
		closep(&wakefd);
		closep(&spare_fd);
		spare_fd = epfd = wakefd = -1;
		return err_set(e, rc, "cannot start the port forwarder: %s", strerror(rc));
	}
	started = true;
	return 0;
}

void forward_stop(void)
{
	uint64_t one = 1;
	pthread_mutex_lock(&lock);
	bool was_started = started;
	stopping = started;
	pthread_mutex_unlock(&lock);
	if (!was_started)
		return;
	if (write(wakefd, &one, sizeof(one)) < 0)
		warning("forward: cannot wake the forwarder thread: %s", strerror(errno));
	pthread_join(thread, NULL);
	pthread_mutex_lock(&lock);
	while (ports)
		port_free(ports);
	while (tallies) {
		struct tally *t = tallies;
		tallies = t->next;
		free(t);
	}
	closep(&epfd);
	closep(&wakefd);
	closep(&spare_fd);
	spare_fd = epfd = wakefd = -1;
	started = stopping = false;
	accepts_resume_ms = 0;
	pthread_mutex_unlock(&lock);
}
