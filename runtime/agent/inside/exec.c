/*
 * exec.c - the agent's execs: `/bin/sh -c CMD` with stdout and stderr on a
 * pipe the keeper reads, sent as OUT frames while a channel is attached, an
 * EXIT frame once the command ended and its pipe is drained. While none is
 * attached (a checkpoint is being taken), each exec's output waits here, up
 * to INSIDE_EXEC_BACKLOG_MAX; past that its pipe is not read, so the
 * command blocks on its next write instead of losing output.
 *
 * The command leads a process group of its own: KILL ends the group. Its
 * output ends when the command has ended and nothing more can be read at
 * once: a background job left holding the pipe does not keep the exec open.
 *
 * The ready shell: once a sandbox has run an exec, one `sh` waits here,
 * already spawned with its output pipe, blocked reading its script from a
 * pipe on its fd 3 (`sh /proc/self/fd/3`). The next exec writes `exec
 * 3<&-` and the command to that pipe and closes it: the exec of /bin/sh
 * (about 14 ms in gVisor, most of an exec of `true`) was paid before the
 * request came. A shell reading a script forks for an external command
 * where `sh -c` would exec it: about the same cost as the exec of sh it
 * saves, so no command is slower. The keeper makes the next one when it is
 * idle (exec_ready_fill()); it is left out of `ps`. One simple command
 * naming a program is written as `exec CMD`, so the shell becomes it without
 * a fork (plain.c says which). If the sandbox's code
 * killed it, the exec spawns `sh -c` as without one. The shell ends by
 * itself (an empty script) when the keeper does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#include "runtime/agent/inside/inside.h"

#define OUT_FRAME_MAX (64u << 10)

struct exec {
	uint32_t tag; /* 0: a free slot */
	pid_t pid;    /* 0 once reaped */
	int out;      /* the pipe's read end, -1 once drained */
	int status;
	size_t held;   /* bytes waiting in buf */
	char *buf;     /* INSIDE_EXEC_BACKLOG_MAX bytes, while it runs: the keeper stays small */
	long start_ms; /* CLOCK_MONOTONIC: a young exec holds back the next ready shell */
};

/* How long an exec holds back the next ready shell: most end sooner, and their EXIT goes first. */
#define READY_HOLD_MS 100

static long mono_ms_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

static struct exec execs[INSIDE_EXECS_MAX];

static struct exec *find(uint32_t tag)
{
	for (int i = 0; i < INSIDE_EXECS_MAX; i++)
		if (execs[i].tag == tag && tag)
			return &execs[i];
	return NULL;
}

/*
 * Run @cmd with stdout and stderr on @out, stdin /dev/null, in a process
 * group of its own. posix_spawn, not fork: in gVisor a fork copies the
 * keeper's address space (a new one on the host, with systrap), and that
 * costs most of an exec's round trip; musl spawns with CLONE_VM|CLONE_VFORK.
 */
static int spawn_sh(int out, int script, char *const argv[], pid_t *pid)
{
	static const char *const shells[] = {"/bin/sh", "/usr/bin/sh"};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out, 1);
	posix_spawn_file_actions_adddup2(&fa, out, 2);
	if (script >= 0)
		posix_spawn_file_actions_adddup2(&fa, script, 3);
	posix_spawnattr_init(&at);
	posix_spawnattr_setpgroup(&at, 0);
	sigset_t none;
	sigemptyset(&none);
	posix_spawnattr_setsigmask(&at, &none);
	sigset_t dfl;
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	sigaddset(&dfl, SIGCHLD);
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
					  POSIX_SPAWN_SETSIGDEF);
	/* The environment is the container's: runsc exec gave it to the attach, which kept it. */
	int rc = ENOENT;
	for (size_t i = 0; i < sizeof(shells) / sizeof(shells[0]) && rc == ENOENT; i++)
		rc = posix_spawn(pid, shells[i], &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	return rc;
}

/* The ready shell (above), or pid 0: its script pipe's write end and its output's read end. */
static struct {
	pid_t pid;
	int script, out;
	int wanted; /* an exec ran: keep one ready (no shell in the image: never again) */
} ready = {.script = -1, .out = -1};

static void ready_drop(void)
{
	if (ready.pid > 0) {
		kill(-ready.pid, SIGKILL);
		waitpid(ready.pid, NULL, 0);
	}
	if (ready.script >= 0)
		close(ready.script);
	if (ready.out >= 0)
		close(ready.out);
	ready.pid = 0, ready.script = -1, ready.out = -1;
}

/*
 * The milliseconds until the youngest exec is READY_HOLD_MS old, 0 when
 * none is younger; -1 while one has ended and its EXIT waits (its fd or
 * SIGCHLD wakes the keeper, or the next attach).
 */
static long exec_hold_ms(void)
{
	long now = mono_ms_now(), hold = 0;
	for (int i = 0; i < INSIDE_EXECS_MAX; i++) {
		const struct exec *x = &execs[i];
		if (!x->tag)
			continue;
		if (x->pid == 0)
			return -1;
		if (now - x->start_ms < READY_HOLD_MS && READY_HOLD_MS - (now - x->start_ms) > hold)
			hold = READY_HOLD_MS - (now - x->start_ms);
	}
	return hold;
}

int exec_ready_fill(void)
{
	/*
	 * Not behind a young or ended exec: a spawn holds the keeper until the
	 * child has exec'd (vfork, about 10 ms in gVisor), and that exec's EXIT
	 * would wait behind it (an exec of `true` took 6 ms instead of 2.6).
	 * An exec that runs on (a server, `tail -f`) holds it back no longer.
	 */
	if (!ready.wanted || ready.pid > 0)
		return -1;
	long hold = exec_hold_ms();
	if (hold != 0)
		return hold > 0 ? (int)hold : -1;
	int out[2], script[2];
	if (pipe2(out, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(script, O_CLOEXEC) < 0) {
		close(out[0]), close(out[1]);
		return -1;
	}
	char *argv[] = {"sh", "/proc/self/fd/3", NULL};
	int rc = spawn_sh(out[1], script[0], argv, &ready.pid);
	close(out[1]), close(script[0]);
	ready.script = script[1], ready.out = out[0];
	if (rc) {
		ready.pid = 0;
		ready_drop();
		ready.wanted = rc != ENOENT;
	}
	return -1;
}

pid_t exec_ready_pid(void)
{
	return ready.pid;
}

/*
 * Hand @line to the ready shell: its pid and output into *@pid and *@out;
 * -1 if there is none, or it is gone (the sandbox's code may kill it).
 */
static int ready_take(const char *line, size_t n, pid_t *pid, int *out)
{
	static const char prefix[] = "exec 3<&-\n", in_place[] = "exec ";
	char script[sizeof(prefix) + sizeof(in_place) + WIRE_CMD_MAX + 1];
	if (ready.pid <= 0 || waitpid(ready.pid, NULL, WNOHANG) != 0) {
		ready_drop();
		return -1;
	}
	size_t len = sizeof(prefix) - 1;
	memcpy(script, prefix, len);
	if (exec_is_plain(line, n)) { /* plain.c: no fork for one external command */
		memcpy(script + len, in_place, sizeof(in_place) - 1);
		len += sizeof(in_place) - 1;
	}
	memcpy(script + len, line, n);
	len += n;
	script[len++] = '\n';
	/* Less than a pipe's capacity, into an empty pipe: all of it or nothing. */
	fcntl(ready.script, F_SETFL, O_NONBLOCK);
	if (write(ready.script, script, len) != (ssize_t)len) {
		ready_drop();
		return -1;
	}
	close(ready.script);
	*pid = ready.pid, *out = ready.out;
	ready.pid = 0, ready.script = -1, ready.out = -1;
	return 0;
}

/* Start @line (NUL-terminated) by `sh -c`: its pid and output into *@pid and *@out. */
static uint32_t spawn_cmd(char *line, pid_t *pid, int *out)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return (uint32_t)errno;
	char *argv[] = {"sh", "-c", line, NULL};
	int rc = spawn_sh(p[1], -1, argv, pid);
	close(p[1]);
	if (rc) {
		close(p[0]);
		return rc == ENOENT ? ENOEXEC : (uint32_t)rc;
	}
	*out = p[0];
	return 0;
}

uint32_t exec_start(uint32_t tag, const char *cmd, size_t n)
{
	if (!tag || find(tag) || n == 0 || n > WIRE_CMD_MAX || memchr(cmd, '\0', n))
		return EINVAL;
	struct exec *x = find(0);
	for (int i = 0; !x && i < INSIDE_EXECS_MAX; i++)
		if (!execs[i].tag)
			x = &execs[i];
	if (!x)
		return EAGAIN;
	char line[WIRE_CMD_MAX + 1];
	memcpy(line, cmd, n);
	line[n] = '\0';
	char *buf = malloc(INSIDE_EXEC_BACKLOG_MAX);
	if (!buf)
		return ENOMEM;
	pid_t pid = 0;
	int out = -1;
	uint32_t rc = 0;
	if (ready_take(line, n, &pid, &out) < 0)
		rc = spawn_cmd(line, &pid, &out);
	if (rc) {
		free(buf);
		return rc;
	}
	ready.wanted = 1;
	fcntl(out, F_SETFL, O_NONBLOCK);
	*x = (struct exec){
	    .tag = tag, .pid = pid, .out = out, .buf = buf, .start_ms = mono_ms_now()};
	return 0;
}

void exec_kill(uint32_t tag)
{
	struct exec *x = find(tag);
	if (x && x->pid > 0)
		kill(-x->pid, SIGKILL), kill(x->pid, SIGKILL);
}

size_t exec_poll_fds(struct pollfd *fds, int attached)
{
	size_t n = 0;
	for (int i = 0; i < INSIDE_EXECS_MAX; i++) {
		struct exec *x = &execs[i];
		if (x->tag && x->out >= 0 && (attached || x->held < INSIDE_EXEC_BACKLOG_MAX))
			fds[n++] = (struct pollfd){.fd = x->out, .events = POLLIN};
	}
	return n;
}

/* Read what the pipe has now; -1 at EOF. */
static int drain(struct exec *x)
{
	while (x->held < INSIDE_EXEC_BACKLOG_MAX) {
		ssize_t r = read(x->out, x->buf + x->held, INSIDE_EXEC_BACKLOG_MAX - x->held);
		if (r > 0) {
			x->held += (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		return r == 0 ? -1 : 0;
	}
	return 0;
}

/* Send what is held, then EXIT if it is all over; the slot is freed once EXIT went. */
static void flush(struct exec *x)
{
	size_t off = 0;
	while (off < x->held) {
		size_t n = x->held - off < OUT_FRAME_MAX ? x->held - off : OUT_FRAME_MAX;
		if (channel_send(x->tag, WIRE_OUT, WIRE_F_MORE, 0, x->buf + off, n) < 0)
			break;
		off += n;
	}
	memmove(x->buf, x->buf + off, x->held - off);
	x->held -= off;
	if (x->held || x->pid > 0 || x->out >= 0)
		return;
	uint8_t st[4];
	struct wire_out w = {.buf = st, .cap = sizeof(st)};
	wire_put_u32(&w, (uint32_t)x->status);
	if (channel_send(x->tag, WIRE_EXIT, 0, 0, st, sizeof(st)) == 0) {
		free(x->buf);
		*x = (struct exec){.out = -1};
	}
}

void exec_step(int attached)
{
	for (int i = 0; i < INSIDE_EXECS_MAX; i++) {
		struct exec *x = &execs[i];
		if (!x->tag)
			continue;
		if (x->pid > 0 && waitpid(x->pid, &x->status, WNOHANG) == x->pid)
			x->pid = 0;
		/* Ended: what the pipe holds now is its last output, EOF or not. */
		if (x->out >= 0 &&
		    (drain(x) < 0 || (x->pid == 0 && x->held < INSIDE_EXEC_BACKLOG_MAX))) {
			close(x->out);
			x->out = -1;
		}
		if (attached)
			flush(x);
	}
}
