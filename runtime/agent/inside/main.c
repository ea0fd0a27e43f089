/*
 * main.c - the agent's two modes (inside.h): attach hands the channel to the
 * keeper; the keeper serves it.
 *
 * Why a keeper and a separate attach. A process of the sandbox that holds a
 * host file at checkpoint time (a pipe `runsc exec` donated, or the
 * executable `--exec-fd` loaded) makes the checkpoint unrestorable, though
 * it exits 0 (docs/runsc-notes.md). The keeper holds neither while no
 * channel is attached: the daemon detaches it before every checkpoint and
 * proves it (EOF and POLLERR on its own ends). Its execs live on meanwhile,
 * their output kept here (bounded), and go on streaming once a new channel
 * is attached after the checkpoint. runsc kills exec-born processes after a
 * restore, so a fork or a resumed sandbox never runs this keeper: the
 * daemon starts a new one at first use.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#include "runtime/agent/inside/inside.h"

/* A request's frame: the largest a frame can be. */
static uint8_t req_buf[WIRE_HEADER_SIZE + WIRE_BODY_MAX];

/* --- serving ------------------------------------------------------------- */

static void serve_one(const struct wire_header *h, struct wire_in *in)
{
	struct inside_reply r = {
	    .body = {.buf = channel_body(), .cap = WIRE_BODY_MAX},
	};
	switch (h->op) {
	case WIRE_HELLO: {
		/* Features only when asked: a daemon from before them reads two fields. */
		(void)wire_get_u32(in);
		uint32_t asked = in->len - in->off >= 4 ? wire_get_u32(in) : 0;
		bool ask = in->len >= 8;
		wire_put_u32(&r.body, WIRE_VERSION);
		wire_put_u32(&r.body, (uint32_t)getpid());
		if (ask)
			wire_put_u32(&r.body, asked & (channel_shm() ? WIRE_HELLO_SHM : 0));
		break;
	}
	case WIRE_DETACH:
		channel_send(h->tag, h->op, 0, 0, NULL, 0);
		channel_detach();
		return;
	case WIRE_PS:
		ps_serve(&r);
		break;
	case WIRE_EXEC: {
		const char *cmd;
		size_t n;
		wire_get_str(in, WIRE_CMD_MAX, &cmd, &n);
		r.err = wire_in_done(in) ? exec_start(h->tag, cmd, n) : EINVAL;
		if (!r.err)
			return; /* its replies are OUT and EXIT frames */
		break;
	}
	case WIRE_KILL: {
		uint32_t tag = wire_get_u32(in);
		if (wire_in_done(in))
			exec_kill(tag);
		else
			r.err = EINVAL;
		break;
	}
	default:
		fs_serve(h, in, &r);
	}
	if (r.body.overflow && !r.err)
		r.err = E2BIG;
	channel_send(h->tag, h->op, 0, r.err, channel_body(), r.err ? 0 : r.body.len);
}

/* One request off the channel; the channel goes at EOF or a frame that is not one. */
static void serve_channel(void)
{
	struct wire_header h;
	if (channel_read(req_buf, &h) < 0)
		return;
	struct wire_in in = {.buf = req_buf + WIRE_HEADER_SIZE, .len = h.len};
	serve_one(&h, &in);
}

/*
 * One message of @c: its byte into *@byte and up to @max fds into @fds
 * (close-on-exec); how many came, or -1.
 */
static int recv_fds(int c, char *byte, int *fds, size_t max)
{
	char ctl[CMSG_SPACE(3 * sizeof(int))];
	struct iovec iov = {.iov_base = byte, .iov_len = 1};
	struct msghdr m = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	if (max > 3 || recvmsg(c, &m, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
		return 0;
	size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
	int got[3];
	memcpy(got, CMSG_DATA(cm), (n < 3 ? n : 3) * sizeof(int));
	for (size_t i = 0; i < n && i < 3; i++) {
		/*
		 * Close-on-exec for certain (not every kernel honours
		 * MSG_CMSG_CLOEXEC): a command the keeper runs must not hold
		 * the channel, or no checkpoint could be proven safe.
		 */
		fcntl(got[i], F_SETFD, FD_CLOEXEC);
		if (i < max)
			fds[i] = got[i];
		else
			close(got[i]);
	}
	return n < max ? (int)n : (int)max;
}

/* Does @c have a message within a second (an attach that said one follows)? */
static bool more_soon(int c)
{
	struct pollfd p = {.fd = c, .events = POLLIN};
	return poll(&p, 1, 1000) == 1;
}

/*
 * Take the channel from an attach on @listener: its two pipes, then, if
 * its first message's byte says so (INSIDE_ATTACH_SHM), its read memory in
 * a second message. A newer channel replaces an older. (A keeper of
 * before the read memory took the first message and closed: the second's
 * fd went with the connection, so a newer attach works with it too.)
 */
static void take_channel(int listener)
{
	int c = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		return;
	char byte, more;
	int fds[2], shm = -1;
	int n = recv_fds(c, &byte, fds, 2);
	if (n == 2) {
		if (byte == INSIDE_ATTACH_SHM && more_soon(c) && recv_fds(c, &more, &shm, 1) != 1)
			shm = -1;
		channel_attach(fds[0], fds[1], shm);
		(void)!write(c, "k", 1);
	}
	for (int i = 0; n == 1 && i < n; i++)
		close(fds[i]);
	close(c);
}

static int listen_socket(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	memcpy(a.sun_path + 1, INSIDE_SOCKET, strlen(INSIDE_SOCKET));
	socklen_t len =
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(INSIDE_SOCKET));
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&a, len) < 0 || listen(s, 4) < 0)
		return -1;
	return s;
}

/* SIGCHLD's self-pipe: an ended exec wakes the poll at once. */
static int child_pipe[2] = {-1, -1};

static void on_child(int sig)
{
	(void)sig;
	int saved = errno;
	(void)!write(child_pipe[1], "c", 1);
	errno = saved;
}

static int keep(void)
{
	signal(SIGPIPE, SIG_IGN);
	int listener = listen_socket();
	if (listener < 0)
		return 1; /* another keeper listens: the attach hands it the channel */
	if (pipe2(child_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return 1;
	struct sigaction sa = {.sa_handler = on_child, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
	sigaction(SIGCHLD, &sa, NULL);
	int retry_ms = -1; /* a ready shell held back: try again then */
	for (;;) {
		struct pollfd fds[3 + INSIDE_EXECS_MAX];
		size_t n = 0;
		fds[n++] = (struct pollfd){.fd = listener, .events = POLLIN};
		fds[n++] = (struct pollfd){.fd = child_pipe[0], .events = POLLIN};
		if (channel_fd() >= 0)
			fds[n++] = (struct pollfd){.fd = channel_fd(), .events = POLLIN};
		const bool has_chan = n == 3;
		n += exec_poll_fds(fds + n, channel_fd() >= 0);
		int wait_ms = channel_buffered() ? 0 : retry_ms >= 0 ? retry_ms : 1000;
		if (poll(fds, n, wait_ms) < 0 && errno != EINTR)
			return 1;
		char junk[64];
		while (read(child_pipe[0], junk, sizeof(junk)) > 0)
			;
		if (fds[0].revents & POLLIN)
			take_channel(listener);
		if (has_chan && (fds[2].revents || channel_buffered()) && channel_fd() >= 0)
			serve_channel();
		exec_step(channel_fd() >= 0);
		/* After the requests this wakeup brought: the next exec finds its shell waiting. */
		retry_ms = exec_ready_fill();
	}
}

/* --- attach -------------------------------------------------------------- */

static int connect_keeper(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	memcpy(a.sun_path + 1, INSIDE_SOCKET, strlen(INSIDE_SOCKET));
	socklen_t len =
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(INSIDE_SOCKET));
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s >= 0 && connect(s, (struct sockaddr *)&a, len) == 0)
		return s;
	if (s >= 0)
		close(s);
	return -1;
}

/*
 * Start a keeper: a child in a session of its own, with the sandbox's
 * /dev/null for stdio and, for its executable, a memfd copy of this one
 * (which the sentry loaded from a host file: the keeper must not keep it).
 */
static void start_keeper(void)
{
	pid_t pid = fork();
	if (pid != 0)
		return;
	setsid();
	close(WIRE_SHM_FD); /* the read memory goes to the keeper with the channel, not by birth */
	int null = open("/dev/null", O_RDWR);
	int exe = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	int mem = syscall(SYS_memfd_create, "snapfs-agent", 1u /* MFD_CLOEXEC */);
	if (null < 0 || exe < 0 || mem < 0)
		_exit(127);
	dup2(null, 0), dup2(null, 1), dup2(null, 2);
	static char buf[65536];
	ssize_t r;
	while ((r = read(exe, buf, sizeof(buf))) > 0)
		for (ssize_t done = 0, w; done < r; done += w)
			if ((w = write(mem, buf + done, (size_t)(r - done))) <= 0)
				_exit(127);
	close(exe);
	/* The container's environment, which runsc exec gave us: the keeper's execs get it. */
	char *argv[] = {"snapfs-agent", "keep", NULL};
	syscall(SYS_execveat, mem, "", argv, environ, AT_EMPTY_PATH);
	_exit(127);
}

/* Did the daemon pass this attach the read memory (WIRE_SHM_FD)? */
static bool shm_passed;

/* One message on @s: @byte, with @n fds of @fds (n <= 3); 0 or -1. */
static int send_fds(int s, char byte, const int *fds, size_t n)
{
	char ctl[CMSG_SPACE(3 * sizeof(int))] = {0};
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = ctl,
			   .msg_controllen = CMSG_SPACE(n * sizeof(int))};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
	return n <= 3 && sendmsg(s, &m, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

/*
 * Hand our stdin and stdout to the keeper over @s, then the read memory if
 * the daemon passed one (WIRE_SHM_FD: take_channel() says why apart); 0
 * once it said it has them.
 */
static int hand_over(int s)
{
	static const int pipes[2] = {0, 1}, shm[1] = {WIRE_SHM_FD};
	char ack;
	if (send_fds(s, shm_passed ? INSIDE_ATTACH_SHM : 'c', pipes, 2) < 0)
		return -1;
	/*
	 * Its failure is no attach's: a keeper from before the memory has taken
	 * the pipes and closed, and HELLO tells the daemon it has none.
	 */
	if (shm_passed)
		(void)send_fds(s, 'm', shm, 1);
	return read(s, &ack, 1) == 1 ? 0 : -1;
}

static int attach(void)
{
	int s = connect_keeper();
	if (s < 0) {
		start_keeper();
		for (int i = 0; i < 200 && s < 0; i++) {
			struct timespec ts = {0, 10 * 1000 * 1000};
			nanosleep(&ts, NULL);
			s = connect_keeper();
		}
	}
	if (s < 0) {
		fprintf(stderr, "snapfs-agent: no keeper to attach to\n");
		return 1;
	}
	int rc = hand_over(s);
	if (rc < 0)
		fprintf(stderr, "snapfs-agent: the keeper did not take the channel\n");
	return rc < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	/* Before this program opens a file of its own, which could take fd 3. */
	struct stat st;
	shm_passed =
	    fstat(WIRE_SHM_FD, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == WIRE_SHM_BYTES;
	if (argc == 2 && strcmp(argv[1], "keep") == 0)
		return keep();
	if (argc == 2 && strcmp(argv[1], "attach") == 0)
		return attach();
	fprintf(stderr, "usage: snapfs-agent attach|keep (run by snapfs inside a sandbox)\n");
	return 2;
}
