/*
 * t_echo.h - a TCP echo server on 127.0.0.1 for the forwarder's tests
 * (test_forward.c, test_ops_ports.c): each connection is echoed back as it is
 * read; at the client's end of input it writes "bye\n" and closes, so a
 * half-close passed on through a forwarder is seen as that last line.
 */
#ifndef SNAPFS_T_ECHO_H
#define SNAPFS_T_ECHO_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

struct t_echo {
	int fd;
	uint16_t port;
	pthread_t thread;
};

static void *t_echo_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[4096];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (write(fd, buf, (size_t)n) != n)
			break;
	if (n == 0 && write(fd, "bye\n", 4) != 4)
		n = -1;
	close(fd);
	return NULL;
}

static void *t_echo_main(void *arg)
{
	struct t_echo *s = arg;
	for (;;) {
		int fd = accept(s->fd, NULL, NULL);
		if (fd < 0)
			return NULL; /* shut down: t_echo_stop() */
		pthread_t t;
		if (pthread_create(&t, NULL, t_echo_conn, (void *)(intptr_t)fd) == 0)
			pthread_detach(t);
		else
			close(fd);
	}
}

/*
 * A socket on 127.0.0.1 bound to *@port (0: one the kernel picks, then
 * in *@port), listening if @listening; -1 on failure.
 */
static inline int t_tcp_bound(bool listening, uint16_t *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(*port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    (listening && listen(fd, 128) < 0) ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

/* An echo server on 127.0.0.1:@port (0: one the kernel picks; s->port says which). */
static inline int t_echo_start(struct t_echo *s, uint16_t port)
{
	s->port = port;
	s->fd = t_tcp_bound(true, &s->port);
	if (s->fd < 0)
		return -1;
	return pthread_create(&s->thread, NULL, t_echo_main, s) == 0 ? 0 : -1;
}

static inline void t_echo_stop(struct t_echo *s)
{
	shutdown(s->fd, SHUT_RDWR); /* wakes its accept() */
	pthread_join(s->thread, NULL);
	close(s->fd);
}

/*
 * A client connected to 127.0.0.1:@port; its reads give up after 20 s, so
 * a forwarder that wrongly keeps a connection open fails the test rather
 * than hangs it. -1 if the connect fails.
 */
static inline int t_tcp_connect(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct timeval tv = {.tv_sec = 20};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Read until the end into @buf (NUL-terminated): the bytes, or -1 on an error or timeout. */
static inline ssize_t t_read_all(int fd, char *buf, size_t size)
{
	size_t got = 0;
	for (;;) {
		ssize_t n = read(fd, buf + got, size - 1 - got);
		if (n < 0)
			return -1;
		if (n == 0 || got + (size_t)n == size - 1) {
			got += (size_t)n;
			buf[got] = '\0';
			return (ssize_t)got;
		}
		got += (size_t)n;
	}
}

/* Write @text, read back as many bytes: true if they came back the same. */
static inline bool t_round_trip(int fd, const char *text)
{
	size_t len = strlen(text), got = 0;
	char buf[256];
	if (len >= sizeof(buf) || write(fd, text, len) != (ssize_t)len)
		return false;
	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);
		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	return memcmp(buf, text, len) == 0;
}

/*
 * A resolver (runtime/net/forward.h) that puts every sandbox at 127.0.0.1,
 * where the echo server is.
 */
static inline int t_resolve_loopback(const char *sandbox_id, struct sockaddr_in *out)
{
	(void)sandbox_id;
	out->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return 0;
}

/* One that finds no network for any sandbox. */
static inline int t_resolve_none(const char *sandbox_id, struct sockaddr_in *out)
{
	(void)sandbox_id;
	(void)out;
	return -ENETUNREACH;
}

#endif
