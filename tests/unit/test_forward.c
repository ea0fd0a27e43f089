/*
 * The port forwarder (runtime/net/forward.h) on plain loopback sockets: a
 * backend echo server on 127.0.0.1 stands for the sandbox, the resolver
 * names 127.0.0.1 for it. No namespace, no interface is touched.
 */
#include "runtime/net/forward.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#include "tests/unit/t.h"
#include "tests/unit/t_echo.h"

/* Bytes both ways, the client's half-close passed on, the counters. */
static void test_both_ways(uint16_t echo_port)
{
	struct err e = {0};
	uint16_t host = 0;
	CHECK(forward_open("web", echo_port, 0, &host, &e) == 0 && host != 0);
	int fd = t_tcp_connect(host);
	CHECK(fd >= 0);
	CHECK(t_round_trip(fd, "hello\n"));
	CHECK(t_round_trip(fd, "again\n"));
	/* Half-close: the server sees the end of input and still answers after it. */
	CHECK(write(fd, "last\n", 5) == 5);
	CHECK(shutdown(fd, SHUT_WR) == 0);
	char buf[64];
	CHECK(t_read_all(fd, buf, sizeof(buf)) == 9);
	CHECK_STR(buf, "last\nbye\n");
	close(fd);
	struct forward_stats st;
	CHECK(forward_stats("web", &st) == 0);
	CHECK(st.connections == 1);
	CHECK(st.bytes_in == 6 + 6 + 5);
	CHECK(st.bytes_out == 6 + 6 + 5 + 4);
	CHECK(forward_stats("nobody", &st) == -ENOENT);

	/* Published twice, a host port in use. */
	uint16_t other;
	CHECK(forward_open("web", echo_port, 0, &other, &e) == -EEXIST);
	CHECK(forward_open("db", echo_port, host, &other, &e) == -EADDRINUSE);
	CHECK(forward_close("web", echo_port) == 0);
	CHECK(forward_close("web", echo_port) == -ENOENT);
	/* A chosen host port, once free again. */
	CHECK(forward_open("db", echo_port, host, &other, &e) == 0 && other == host);
	fd = t_tcp_connect(host);
	CHECK(fd >= 0 && t_round_trip(fd, "db\n"));
	if (fd >= 0)
		close(fd);
	forward_close_sandbox("db", true);
	CHECK(forward_stats("db", &st) == -ENOENT);
}

/* Closing a port stops its listener and the connections it forwards, now. */
static void test_close_stops(uint16_t echo_port)
{
	struct err e = {0};
	uint16_t host = 0;
	char buf[64];
	CHECK(forward_open("web", echo_port, 0, &host, &e) == 0);
	int fd = t_tcp_connect(host);
	CHECK(fd >= 0 && t_round_trip(fd, "x\n"));
	CHECK(forward_close("web", echo_port) == 0);
	CHECK(t_read_all(fd, buf, sizeof(buf)) == 0); /* its end, not the server's "bye" */
	close(fd);
	CHECK(t_tcp_connect(host) < 0 && errno == ECONNREFUSED);
}

/* A sandbox that cannot be reached: its connection is closed at once, nothing hangs. */
static void test_unreachable(uint16_t echo_port)
{
	struct err e = {0};
	uint16_t host = 0, dead = 0; /* dead: any free port */
	char buf[64];
	int gone = t_tcp_bound(false, &dead); /* bound, never listening: refuses */
	CHECK(gone >= 0);
	CHECK(forward_open("web", dead, 0, &host, &e) == 0);
	int fd = t_tcp_connect(host);
	CHECK(fd >= 0);
	CHECK(t_read_all(fd, buf, sizeof(buf)) <= 0 && errno != EAGAIN);
	close(fd);
	close(gone);
	forward_close_sandbox("web", true);

	/* The resolver says there is no network: accepted, then closed. */
	forward_set_resolver(t_resolve_none);
	CHECK(forward_open("web", echo_port, 0, &host, &e) == 0);
	fd = t_tcp_connect(host);
	CHECK(fd >= 0 && t_read_all(fd, buf, sizeof(buf)) == 0);
	close(fd);
	struct forward_stats st;
	CHECK(forward_stats("web", &st) == 0 && st.connections == 1 && st.open == 0);
	forward_close_sandbox("web", true);
	forward_set_resolver(t_resolve_loopback);
}

/*
 * One port forwards FORWARD_CONNS_PORT_MAX connections at once; with none
 * of them idle long enough to give way (the bar set far off), the next is
 * closed at once.
 */
static void test_limit(uint16_t echo_port)
{
	struct err e = {0};
	uint16_t host = 0;
	int fds[FORWARD_CONNS_PORT_MAX];
	char buf[64];
	forward_set_evict_idle(3600 * 1000);
	CHECK(forward_open("web", echo_port, 0, &host, &e) == 0);
	int ok = 0;
	for (int i = 0; i < FORWARD_CONNS_PORT_MAX; i++) {
		fds[i] = t_tcp_connect(host);
		ok += fds[i] >= 0 && t_round_trip(fds[i], "n\n"); /* forwarded, so counted */
	}
	CHECK(ok == FORWARD_CONNS_PORT_MAX);
	int over = t_tcp_connect(host);
	CHECK(over >= 0 && t_read_all(over, buf, sizeof(buf)) == 0);
	close(over);
	struct forward_stats st;
	CHECK(forward_stats("web", &st) == 0 && st.open == FORWARD_CONNS_PORT_MAX);
	/* One ends: once the forwarder has seen it (bounded wait, no timing), room for one more. */
	close(fds[0]);
	fds[0] = -1;
	for (int i = 0;
	     i < 20000 && forward_stats("web", &st) == 0 && st.open >= FORWARD_CONNS_PORT_MAX; i++)
		usleep(1000);
	int again = t_tcp_connect(host);
	CHECK(again >= 0 && t_round_trip(again, "m\n"));
	CHECK(again >= 0);
	if (again >= 0)
		close(again);
	for (int i = 1; i < FORWARD_CONNS_PORT_MAX; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	forward_close_sandbox("web", true);
	forward_set_evict_idle(0);
}

/*
 * A port full of idle connections (any local user may open them) still
 * serves a new one (security-3 N8): the one idle longest is closed to make
 * room, the others are left alone. The bar is 200 ms here; the table is
 * filled, then left idle past it.
 */
static void test_full_of_idle(uint16_t echo_port)
{
	struct err e = {0};
	uint16_t host = 0;
	int fds[FORWARD_CONNS_PORT_MAX];
	char buf[64];
	forward_set_evict_idle(200);
	CHECK(forward_open("web", echo_port, 0, &host, &e) == 0);
	int ok = 0;
	for (int i = 0; i < FORWARD_CONNS_PORT_MAX; i++) {
		fds[i] = t_tcp_connect(host);
		ok += fds[i] >= 0 && t_round_trip(fds[i], "n\n");
	}
	CHECK(ok == FORWARD_CONNS_PORT_MAX);
	usleep(400 * 1000); /* every one idle past the bar */
	/* The last one speaks again: it is no longer the idlest. */
	CHECK(fds[0] >= 0 && t_round_trip(fds[0], "still here\n"));
	int late = t_tcp_connect(host);
	CHECK_MSG(late >= 0 && t_round_trip(late, "served\n"),
		  "a new connection to a port full of idle ones is served");
	/* The one idle longest (the second opened) was closed; the first, which spoke, was not. */
	CHECK(fds[1] >= 0 && t_read_all(fds[1], buf, sizeof(buf)) == 0);
	CHECK(fds[0] >= 0 && t_round_trip(fds[0], "and still\n"));
	struct forward_stats st;
	CHECK(forward_stats("web", &st) == 0 && st.evicted == 1);
	CHECK(st.open == FORWARD_CONNS_PORT_MAX);
	if (late >= 0)
		close(late);
	for (int i = 0; i < FORWARD_CONNS_PORT_MAX; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	forward_close_sandbox("web", true);
	forward_set_evict_idle(0);
}

/* Out of fds: a connection is accepted and closed at once, and the port serves again after. */
static void test_out_of_fds(uint16_t echo_port)
{
	struct err e = {0};
	struct rlimit was;
	uint16_t host = 0;
	char buf[64];
	CHECK(forward_open("web", echo_port, 0, &host, &e) == 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(host),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct timeval tv = {.tv_sec = 20};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int lowest = dup(0); /* the lowest free fd: from it on, none is left */
	CHECK(fd >= 0 && lowest > fd && getrlimit(RLIMIT_NOFILE, &was) == 0);
	close(lowest);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct rlimit low = {.rlim_cur = (rlim_t)lowest, .rlim_max = was.rlim_max};
	CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(t_read_all(fd, buf, sizeof(buf)) <= 0 && errno != EAGAIN); /* closed, no hang */
	CHECK(setrlimit(RLIMIT_NOFILE, &was) == 0);
	close(fd);
	fd = t_tcp_connect(host);
	CHECK(fd >= 0 && t_round_trip(fd, "after\n"));
	if (fd >= 0)
		close(fd);
	forward_close_sandbox("web", true);
}

/* CPU time this process used, in ms. */
static long cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * In a child (its own fd limit): accept() fails with EMFILE while a client
 * waits and no spare descriptor can help (the limit below every free fd).
 * The forwarder backs off rather than spins: over half a second it uses a
 * few ms of CPU, not the whole of it; once fds are back the client is served.
 */
static void spin_child(void)
{
	struct err e = {0};
	uint16_t host = 0, dead = 0;
	char buf[64];
	struct rlimit was;
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0)
			open("/dev/null", O_RDWR); /* takes the lowest, fd */
	int gone = t_tcp_bound(false, &dead);	   /* a port that refuses: served means closed */
	if (!CHECK(forward_start(NULL, t_resolve_loopback, &e) == 0) ||
	    !CHECK(forward_open("spin", dead, 0, &host, &e) == 0))
		_exit(t_done());
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(host),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct timeval tv = {.tv_sec = 20};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	CHECK(getrlimit(RLIMIT_NOFILE, &was) == 0);
	/* Only fds 0 to 2: none is free, the spare's own slot is past the limit too. */
	struct rlimit low = {.rlim_cur = 3, .rlim_max = was.rlim_max};
	CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	long t0 = cpu_ms();
	usleep(500 * 1000);
	long used = cpu_ms() - t0;
	CHECK_MSG(used < 100, "the forwarder used %ld ms of CPU in 500 ms out of fds", used);
	CHECK(setrlimit(RLIMIT_NOFILE, &was) == 0);
	CHECK(t_read_all(fd, buf, sizeof(buf)) <= 0 && errno != EAGAIN); /* served: closed */
	close(fd);
	close(gone);
	forward_stop();
	_exit(t_done());
}

static void test_no_spin(void)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		spin_child();
	int st = 0;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
	CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the out-of-fds child failed (%#x)", st);
}

/*
 * A sandbox address that never answers: the forwarder gives up on the
 * connect after the connect timeout and closes the client. A listener
 * with a full backlog stands for it: the kernel drops the SYNs it gets.
 */
static void test_connect_timeout(void)
{
	struct err e = {0};
	uint16_t host = 0, deaf = 0;
	char buf[64];
	int lfd = t_tcp_bound(false, &deaf);
	CHECK(lfd >= 0 && listen(lfd, 0) == 0);
	int fill[2];
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(deaf),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	for (int i = 0; i < 2; i++) {
		fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		connect(fill[i], (struct sockaddr *)&a, sizeof(a));
	}
	forward_set_timeouts(300, 0);
	CHECK(forward_open("deaf", deaf, 0, &host, &e) == 0);
	int fd = t_tcp_connect(host); /* reads give up after 20 s: far past 300 ms */
	CHECK(fd >= 0 && t_read_all(fd, buf, sizeof(buf)) <= 0 && errno != EAGAIN);
	if (fd >= 0)
		close(fd);
	forward_close_sandbox("deaf", true);
	forward_set_timeouts(0, 0);
	for (int i = 0; i < 2; i++)
		close(fill[i]);
	close(lfd);
}

/* A connection that moves nothing for the idle timeout is closed. */
static void test_idle_timeout(uint16_t echo_port)
{
	struct err e = {0};
	uint16_t host = 0;
	char buf[64];
	forward_set_timeouts(0, 300);
	CHECK(forward_open("idle", echo_port, 0, &host, &e) == 0);
	int fd = t_tcp_connect(host);
	CHECK(fd >= 0 && t_round_trip(fd, "busy\n"));
	/* Then nothing: the forwarder's end, well before the client's 20 s. */
	CHECK(fd >= 0 && t_read_all(fd, buf, sizeof(buf)) == 0);
	if (fd >= 0)
		close(fd);
	forward_close_sandbox("idle", true);
	forward_set_timeouts(0, 0);
}

int main(void)
{
	struct err e = {0};
	struct t_echo echo;
	uint16_t port;
	test_no_spin(); /* first: no thread yet, so the child forks clean */
	CHECK(forward_open("web", 80, 0, &port, &e) == -EAGAIN); /* not started */
	CHECK(forward_start("not an address", t_resolve_loopback, &e) == -EINVAL);
	if (!CHECK(t_echo_start(&echo, 0) == 0) ||
	    !CHECK(forward_start(NULL, t_resolve_loopback, &e) == 0))
		return t_done();
	CHECK_STR(forward_address(), "127.0.0.1");
	test_both_ways(echo.port);
	test_close_stops(echo.port);
	test_unreachable(echo.port);
	test_limit(echo.port);
	test_full_of_idle(echo.port);
	test_out_of_fds(echo.port);
	test_connect_timeout();
	test_idle_timeout(echo.port);
	forward_stop();
	t_echo_stop(&echo);
	return t_done();
}
