/*
 * agent-impostor.c - what a sandbox's code can do to its agent: take its
 * place. test_inside.sh builds it with musl and the agent's own wire codec
 * (runtime/agent/wire.c), copies it into a sandbox through root/ and runs
 * it there:
 *
 *   agent-impostor LOG junk   every request but HELLO is answered with a
 *                             body that is no answer (three bytes)
 *   agent-impostor LOG full   a file system that is full: "" and "tmp" are
 *                             directories, other names absent; an OPEN
 *                             (create) succeeds, every WRITE fails ENOSPC
 *   agent-impostor LOG mute   as full until the first WRITE, then reads
 *                             nothing more and lives on (a keeper that
 *                             stopped): the daemon's writes fill the pipe
 *   agent-impostor LOG hold   as full, but takes the read memory too, says
 *                             so in HELLO, and leaves a child that keeps it
 *                             mapped (and nothing else) before it serves: at
 *                             DETACH it lets go of the channel, while the
 *                             child still holds a host file
 *   agent-impostor LOG deaf   answers HELLO, then at the next request
 *                             stops for good and keeps the name (a keeper
 *                             stuck in a call): the request waits for its
 *                             reply until the daemon gives up, and a next
 *                             attach finds the name held and never answered
 *
 * It binds the keeper's abstract socket once the real keeper is gone and
 * takes one channel from the next attach. It serves that one channel only
 * (the listener closes once it has it, but for deaf's), so the next
 * attach after the daemon lets go finds no impostor and starts a real
 * keeper. LOG gets
 * "bound" once it holds the name, "op N" per request, and "eof" when the
 * daemon has closed the channel; then it exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "runtime/agent/inside/inside.h"

static FILE *logf;
static int full_mode, mute_mode, deaf_mode, hold_mode;
static int shm_fd = -1; /* the read memory, when the attach handed one */

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

static void say(const char *fmt, unsigned v)
{
	fprintf(logf, fmt, v);
	fflush(logf);
}

/* Bind the keeper's name, waiting for the keeper to die (EADDRINUSE till then). */
static int listener(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	memcpy(a.sun_path + 1, INSIDE_SOCKET, strlen(INSIDE_SOCKET));
	socklen_t len =
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(INSIDE_SOCKET));
	for (int i = 0; i < 3000; i++) {
		int s = socket(AF_UNIX, SOCK_STREAM, 0);
		if (s >= 0 && bind(s, (struct sockaddr *)&a, len) == 0 && listen(s, 4) == 0)
			return s;
		close(s);
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	}
	return -1;
}

/* @n fds of one message of @c into @fds, its byte into *@byte; 0 or -1. */
static int recv_n(int c, char *byte, int *fds, size_t n)
{
	char ctl[CMSG_SPACE(2 * sizeof(int))];
	struct iovec iov = {.iov_base = byte, .iov_len = 1};
	struct msghdr m = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	if (recvmsg(c, &m, 0) != 1)
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	if (!cm || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(n * sizeof(int)))
		return -1;
	memcpy(fds, CMSG_DATA(cm), n * sizeof(int));
	return 0;
}

/* The channel's two fds (requests in, replies out) from one attach, and the read memory's. */
static int take(int l, int fds[2])
{
	int c = accept(l, NULL, NULL);
	char byte, more;
	if (c < 0 || recv_n(c, &byte, fds, 2) < 0)
		return -1;
	if (byte == INSIDE_ATTACH_SHM && recv_n(c, &more, &shm_fd, 1) < 0)
		shm_fd = -1;
	int rc = write(c, "k", 1) == 1 ? 0 : -1;
	close(c);
	return rc;
}

/*
 * hold: a child that keeps the read memory mapped, with no other fd of
 * ours (the channel's ends closed), so that only the memory stays held.
 */
static bool hold_memory(int l, const int fds[2])
{
	void *p = shm_fd < 0
		      ? MAP_FAILED
		      : mmap(NULL, WIRE_SHM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
	if (p == MAP_FAILED)
		return false;
	if (fork() == 0) {
		close(fds[0]), close(fds[1]), close(l), close(shm_fd);
		for (;;)
			pause();
	}
	say("holding\n", 0);
	return true;
}

static void put_dir_or_file(struct wire_out *w, bool dir)
{
	struct wire_attr a = {.mode = dir ? S_IFDIR | 0755 : S_IFREG | 0644, .nlink = 1, .ino = 7};
	wire_put_attr(w, &a);
}

/* The full file system's answer to @op on @body: an errno, or 0 and @w. */
static uint32_t answer_full(uint16_t op, const uint8_t *body, uint32_t len, struct wire_out *w)
{
	struct wire_in in = {.buf = body, .len = len};
	const char *path = "";
	size_t n = 0;
	if (op == WIRE_LSTAT || op == WIRE_READDIR || op == WIRE_OPEN)
		wire_get_str(&in, WIRE_PATH_MAX, &path, &n);
	bool dir = n == 0 || (n == 3 && !memcmp(path, "tmp", 3));
	switch (op) {
	case WIRE_LSTAT:
		if (!dir)
			return ENOENT;
		put_dir_or_file(w, true);
		return 0;
	case WIRE_READDIR:
		wire_put_u64(w, 0);
		wire_put_u32(w, 0);
		return 0;
	case WIRE_OPEN:
		wire_put_u32(w, 1);
		put_dir_or_file(w, false);
		return 0;
	case WIRE_WRITE:
		return ENOSPC;
	case WIRE_CLOSE:
	case WIRE_FSYNC:
		return 0;
	default:
		return EIO;
	}
}

static int reply(int out, const struct wire_header *req, uint32_t err, const struct wire_out *w)
{
	uint8_t h[WIRE_HEADER_SIZE];
	struct wire_header rh = *req;
	rh.err = err;
	rh.len = err ? 0 : (uint32_t)w->len;
	wire_header_put(h, &rh);
	return full(out, h, sizeof(h), 1) == 0 && full(out, w->buf, rh.len, 1) == 0 ? 0 : -1;
}

static void serve(int in, int out)
{
	static uint8_t body[WIRE_BODY_MAX], ans[1024];
	uint8_t h[WIRE_HEADER_SIZE];
	struct wire_header rh;
	while (full(in, h, sizeof(h), 0) == 0 && wire_header_get(h, &rh) == 0 &&
	       full(in, body, rh.len, 0) == 0) {
		say("op %u\n", rh.op);
		struct wire_out w = {.buf = ans, .cap = sizeof(ans)};
		uint32_t err = 0;
		if (rh.op == WIRE_HELLO) {
			wire_put_u32(&w, WIRE_VERSION);
			wire_put_u32(&w, (uint32_t)getpid());
			if (rh.len >= 8) /* features asked */
				wire_put_u32(&w, hold_mode ? WIRE_HELLO_SHM : 0);
		} else if (hold_mode && rh.op == WIRE_DETACH) {
			reply(out, &rh, 0, &w);
			break; /* lets go of the channel, as a keeper does */
		} else if (mute_mode && rh.op == WIRE_WRITE) {
			say("mute\n", 0);
			for (;;)
				pause();
		} else if (deaf_mode) {
			say("deaf\n", 0);
			for (;;) /* stuck in a call: no more reads, no EOF seen */
				pause();
		} else if (full_mode || mute_mode || hold_mode) {
			err = answer_full(rh.op, body, rh.len, &w);
		} else {
			for (int i = 0; i < 3; i++) /* no reply is three bytes long */
				wire_put_u8(&w, 0xff);
		}
		if (reply(out, &rh, err, &w) < 0)
			break;
	}
	say("eof\n", 0);
}

int main(int argc, char **argv)
{
	if (argc != 3 || !(logf = fopen(argv[1], "a")))
		return 2;
	full_mode = !strcmp(argv[2], "full");
	mute_mode = !strcmp(argv[2], "mute");
	deaf_mode = !strcmp(argv[2], "deaf");
	hold_mode = !strcmp(argv[2], "hold");
	int fds[2], l = listener();
	if (l < 0)
		return 1;
	say("bound\n", 0);
	if (take(l, fds) < 0 || (hold_mode && !hold_memory(l, fds)))
		return 1;
	if (!deaf_mode)
		close(l);
	serve(fds[0], fds[1]);
	close(fds[0]), close(fds[1]);
	return 0;
}
