/*
 * agent-impostor.c - what a sandbox's code can do to its agent: take its
 * place. test_inside.sh builds it (musl, static), copies it into a sandbox
 * through root/ and runs it there. It binds the keeper's abstract socket
 * once the real keeper is gone, takes one channel from the next attach,
 * answers HELLO as a keeper does and every other request with a body that
 * is no answer (three bytes where an attribute or a listing belongs).
 *
 * It serves that one channel only (the listener closes once it has it), so
 * the next attach after the daemon lets go finds no impostor and starts a
 * real keeper. LOG (argv[1]) gets "bound" once it holds the name, one line
 * per request ("op N"), and "eof" when the daemon has closed the channel;
 * then it exits.
 *
 * The frame is runtime/agent/wire.h's: u32 len | u32 tag | u16 op |
 * u16 flags | u32 err, little-endian; a HELLO's reply is u32 version, u32 pid.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The keeper's socket and protocol version: test_inside.sh passes them from the headers. */
#ifndef SOCKET_NAME
#error "build with -DSOCKET_NAME=\"...\" (runtime/agent/inside/inside.h INSIDE_SOCKET)"
#endif
#ifndef VERSION
#error "build with -DVERSION=N (runtime/agent/wire.h WIRE_VERSION)"
#endif
#define HELLO 1
#define BODY_MAX (2u << 20)

static FILE *logf;

static int full(int fd, void *p, size_t n, int writing)
{
	for (size_t done = 0; done < n;) {
		ssize_t r = writing ? write(fd, (char *)p + done, n - done)
				    : read(fd, (char *)p + done, n - done);
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Bind the keeper's name, waiting for the keeper to die (EADDRINUSE till then). */
static int listener(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	memcpy(a.sun_path + 1, SOCKET_NAME, strlen(SOCKET_NAME));
	socklen_t len =
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(SOCKET_NAME));
	for (int i = 0; i < 3000; i++) {
		int s = socket(AF_UNIX, SOCK_STREAM, 0);
		if (s >= 0 && bind(s, (struct sockaddr *)&a, len) == 0 && listen(s, 4) == 0)
			return s;
		close(s);
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	}
	return -1;
}

/* The channel's two fds (requests in, replies out) from one attach. */
static int take(int l, int fds[2])
{
	int c = accept(l, NULL, NULL);
	char byte, ctl[CMSG_SPACE(2 * sizeof(int))];
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr m = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	if (c < 0 || recvmsg(c, &m, 0) != 1)
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	if (!cm || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(2 * sizeof(int)))
		return -1;
	memcpy(fds, CMSG_DATA(cm), 2 * sizeof(int));
	int rc = write(c, "k", 1) == 1 ? 0 : -1;
	close(c);
	return rc;
}

static int reply(int out, const uint8_t req[16], const void *body, uint32_t len)
{
	uint8_t h[16];
	memcpy(h, req, 16);
	put32(h, len);
	put32(h + 12, 0);
	return full(out, h, 16, 1) == 0 && full(out, (void *)body, len, 1) == 0 ? 0 : -1;
}

static void serve(int in, int out)
{
	static uint8_t body[BODY_MAX];
	uint8_t h[16];
	while (full(in, h, 16, 0) == 0) {
		uint32_t len = get32(h);
		unsigned op = h[8] | h[9] << 8;
		if (len > BODY_MAX || full(in, body, len, 0) < 0)
			break;
		fprintf(logf, "op %u\n", op);
		fflush(logf);
		uint8_t hello[8];
		put32(hello, VERSION);
		put32(hello + 4, (uint32_t)getpid());
		static const uint8_t junk[3] = {0xff, 0xff, 0xff};
		if (op == HELLO ? reply(out, h, hello, 8) : reply(out, h, junk, sizeof(junk)))
			break;
	}
	fprintf(logf, "eof\n");
	fflush(logf);
}

int main(int argc, char **argv)
{
	if (argc != 2 || !(logf = fopen(argv[1], "a")))
		return 2;
	int fds[2], l = listener();
	if (l < 0)
		return 1;
	fprintf(logf, "bound\n");
	fflush(logf);
	if (take(l, fds) < 0)
		return 1;
	close(l);
	serve(fds[0], fds[1]);
	return 0;
}
