#include "runtime/net/net.h"
#include "runtime/runsc/runsc.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/names.h"
#include "lib/spawn.h"
#include "lib/strbuf.h"
#include "runtime/runsc/bundle.h"

#define ARGV_MAX 24		/* runsc + global flags + the longest subcommand, NULL included */
#define CAPTURE_MAX (64u << 10) /* most of a command's output kept (state JSON, errors) */
#define QUOTE_MAX 300		/* most of one runsc line quoted in a message */
#define MIB (1ll << 20)

/*
 * runsc's environment: not the daemon's, which holds the store's credentials
 * (AWS_SECRET_ACCESS_KEY…) that neither runsc nor a sandbox process should see.
 */
static char *const runsc_env[] = {BUNDLE_DEFAULT_PATH, NULL};

struct cmd {
	const char *argv[ARGV_MAX];
	size_t argc;
	const char *what; /* subcommand, for messages */
	const char *cid;  /* the container it acts on: runsc_cancel() ends it; NULL: none */
	bool
	    refuse_cancelled; /* do not start on a cancelled container (run, exec, checkpoint...) */
	int64_t timeout_ms;   /* its deadline */
	bool unrecorded;      /* not in rs->records: a user's exec, which may run for hours */
	const char *records;  /* rs->records, or NULL */
};

static void cmd_add(struct cmd *c, const char *arg)
{
	/* The argument lists below are fixed; running out is a bug. */
	if (c->argc + 1 >= ARGV_MAX)
		abort();
	c->argv[c->argc++] = arg;
	c->argv[c->argc] = NULL;
}

/*
 * `runsc [--root R]`, nothing else yet (only --version goes without the
 * root); the deadline is the plain one until a caller scales it.
 */
static void cmd_start(struct cmd *c, const struct runsc *rs, const char *what, bool root)
{
	c->argc = 0;
	c->what = what;
	c->cid = NULL;
	c->refuse_cancelled = false;
	c->timeout_ms = rs->timeout_ms;
	c->unrecorded = false;
	c->records = rs->records[0] ? rs->records : NULL;
	cmd_add(c, rs->bin);
	if (root) {
		cmd_add(c, "--root");
		cmd_add(c, rs->root);
	}
}

/* runsc --root R SUBCOMMAND */
static void cmd_init(struct cmd *c, const struct runsc *rs, const char *what)
{
	cmd_start(c, rs, what, true);
	cmd_add(c, what);
}

/*
 * runsc --root R <sandbox flags> [@flags] SUBCOMMAND, for run and restore:
 * @flags is a RUNSC_* mask, the same for a run and the restores of its
 * checkpoints.
 */
static void cmd_init_sandbox(struct cmd *c, const struct runsc *rs, const char *what,
			     unsigned flags)
{
	cmd_start(c, rs, what, true);
	if (flags & RUNSC_NETWORK) {
		/* Through this binary (still /proc/self/exe at exec): it hides /proc/sys/net
		 * (net.h). */
		const char *pre[] = {"/proc/self/exe", NET_EXEC_FLAG, rs->bin, "--root", rs->root};
		c->argc = 0;
		for (size_t i = 0; i < ARRAY_SIZE(pre); i++)
			cmd_add(c, pre[i]);
	}
	/*
	 * The overlay keeps root filesystem writes in sandbox memory, where the
	 * checkpoint captures them. A restore must use the same flags as the run.
	 */
	cmd_add(c, "--overlay2=root:memory");
	cmd_add(c, flags & RUNSC_NETWORK ? "--network=sandbox" : "--network=none");
	/*
	 * A checkpoint resets the TCP connections the sandbox holds (TIME_WAIT
	 * ones too) instead of refusing while any is there (docs/network.md).
	 */
	if (flags & RUNSC_NETWORK)
		cmd_add(c, "--net-disconnect-ok");
	if (flags & RUNSC_NVPROXY)
		cmd_add(c, "--nvproxy");
	cmd_add(c, what);
}

/* The last word of the command line: the container (@cancellable: work that terminate ends). */
static void cmd_target(struct cmd *c, const char *cid, bool cancellable)
{
	c->cid = cid;
	c->refuse_cancelled = cancellable;
	cmd_add(c, cid);
}

/* @cap bytes into a strbuf, the rest dropped (runsc's own output: only the start matters). */
struct capture {
	struct strbuf *sb;
	size_t cap;
};

static int capture_sink(void *arg, const char *data, size_t len)
{
	struct capture *c = arg;
	size_t room = c->sb->len < c->cap ? c->cap - c->sb->len : 0;
	/* Unchecked: a failure is sticky, and run_short() checks @out once. */
	if (room)
		strbuf_add(c->sb, data, len < room ? len : room);
	return 0;
}

/*
 * Read up to CAPTURE_MAX bytes of @fd from @off into a new NUL-terminated
 * string. The fd is a memfd or a file: pread leaves other writers alone.
 */
static char *read_from(int fd, off_t off)
{
	char *buf = malloc(CAPTURE_MAX + 1);
	if (!buf)
		return NULL;
	size_t got = 0;
	while (got < CAPTURE_MAX) {
		ssize_t n = pread(fd, buf + got, CAPTURE_MAX - got, off + (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	return buf;
}

/*
 * runsc prints its fatal message first, then (for a panic in the sandbox) a
 * Go stack trace and state dumps: the first line that is not indented is the
 * one that says what went wrong. Copies it, cut to QUOTE_MAX, into @out.
 */
static void pick_line(const char *text, char *out, size_t len)
{
	const char *p = text;
	out[0] = '\0';
	while (*p) {
		size_t n = strcspn(p, "\n");
		if (n > 0 && p[0] != ' ' && p[0] != '\t') {
			if (n > QUOTE_MAX)
				n = QUOTE_MAX;
			snprintf(out, len, "%.*s", (int)n, p);
			break;
		}
		p += n + (p[n] == '\n');
	}
	/* A panic's first line ends in ':' before the trace. */
	size_t n = rstrip(out);
	while (n > 0 && out[n - 1] == ':')
		out[--n] = '\0';
}

/* runsc says "loading container: file does not exist" (or "loading sandbox: …"). */
static bool says_no_container(const char *text)
{
	return strstr(text, "file does not exist") &&
	       (strstr(text, "loading container") || strstr(text, "loading sandbox"));
}

/* Turn a failed command's output @text (may be NULL) into -ENOENT or -EIO with a message. */
static int fail(const struct cmd *c, int status, const char *text, struct err *e)
{
	char line[QUOTE_MAX + 1] = "";
	if (text && says_no_container(text))
		return err_set(e, ENOENT, "runsc %s failed: container %s does not exist", c->what,
			       c->cid ? c->cid : "");
	if (text)
		pick_line(text, line, sizeof(line));
	if (!line[0])
		snprintf(line, sizeof(line), "exit status %d", spawn_code(status));
	return err_set(e, EIO, "runsc %s failed: %s", c->what, line);
}

/* Run @c as @s says (its fds and sink); -errno only when it could not start. */
static int run_cmd(const struct cmd *c, struct spawn *s, struct err *e)
{
	s->argv = c->argv;
	s->envp = runsc_env;
	s->timeout_ms = c->timeout_ms;
	s->tag = c->cid;
	s->refuse_cancelled = c->refuse_cancelled;
	s->record_dir = c->unrecorded ? NULL : c->records;
	int rc = spawn_run(s);
	if (rc < 0)
		return err_set(e, rc == -ENOENT ? ENOENT : EIO,
			       "runsc %s failed: cannot run %s: %s", c->what, c->argv[0],
			       strerror(-rc));
	return 0;
}

/*
 * A call that ran past its deadline or was cancelled: -ETIMEDOUT or
 * -ECANCELED for the caller, EIO (the runtime failed) and the sentence for
 * the user; else 0.
 */
static int end_error(const struct cmd *c, const struct spawn *s, struct err *e)
{
	if (s->end == SPAWN_TIMED_OUT) {
		err_set(e, EIO, "runsc %s timed out after %lld s and was killed", c->what,
			(long long)(s->ran_ms / 1000));
		return -ETIMEDOUT;
	}
	if (s->end == SPAWN_CANCELLED) {
		err_set(e, EIO, "runsc %s was cancelled: container %s is being terminated", c->what,
			c->cid ? c->cid : "");
		return -ECANCELED;
	}
	return 0;
}

/*
 * A short command. Without @out, stdout and stderr go to one pipe, kept for
 * a failure's message. With @out, stdout goes to @out (at most CAPTURE_MAX)
 * and stderr to a memfd: what is parsed (state JSON, help) never mixes with
 * runsc's warnings; runsc is the operator's program, its stderr trusted.
 */
static int run_short(const struct cmd *c, struct strbuf *out, struct err *e)
{
	_cleanup_strbuf_ struct strbuf all = STRBUF_INIT;
	_cleanup_close_ int errfd = out ? memfd_create("runsc-stderr", MFD_CLOEXEC) : -1;
	struct capture cap = {out ? out : &all, CAPTURE_MAX};
	struct spawn s = {.out_fd = -1, .err_fd = errfd, .in_fd = -1};
	if (out && errfd < 0)
		return err_set(e, EIO, "runsc %s failed: memfd: %s", c->what, strerror(errno));
	s.sink = capture_sink;
	s.sink_arg = &cap;
	int rc = run_cmd(c, &s, e);
	if (rc == 0)
		rc = end_error(c, &s, e);
	int kept = out ? strbuf_error(out) : 0;
	if (rc == 0 && kept < 0)
		rc = err_set(e, -kept, "runsc %s: cannot keep its output: %s", c->what,
			     strerror(-kept));
	if (rc < 0 || (WIFEXITED(s.status) && WEXITSTATUS(s.status) == 0))
		return rc;
	_cleanup_free_ char *text = out ? read_from(errfd, 0) : NULL;
	return fail(c, s.status, out ? text : strbuf_str(&all), e);
}

/* runsc's own start: forwards to the console's sink and keeps CAPTURE_MAX for a message. */
struct detached_tee {
	const struct runsc_stdio *io;
	struct capture cap;
};

static int tee_sink(void *arg, const char *data, size_t len)
{
	struct detached_tee *t = arg;
	capture_sink(&t->cap, data, len);
	return t->io->sink ? t->io->sink(t->io->sink_arg, data, len) : 0;
}

/*
 * run/restore --detach: runsc returns once the sandbox runs, and the sandbox
 * keeps stdout/stderr for its lifetime, so both are @io->child_fd, the write
 * end of the console FIFO (runtime/runsc/console.h), never a pipe of ours. While
 * runsc runs, what arrives on @io->read_fd goes to @io->sink (the console
 * log); a failure quotes what runsc wrote.
 */
static int run_detached(const struct cmd *c, const struct runsc_stdio *io, struct err *e)
{
	_cleanup_strbuf_ struct strbuf text = STRBUF_INIT;
	struct detached_tee tee = {io, {&text, CAPTURE_MAX}};
	struct spawn s = {.out_fd = io->child_fd,
			  .err_fd = -1,
			  .in_fd = io->read_fd,
			  .sink = tee_sink,
			  .sink_arg = &tee};
	/* Without a reader, a file's new bytes are runsc's (runsc_stdio): kept from here. */
	off_t off = io->read_fd < 0 ? lseek(io->child_fd, 0, SEEK_CUR) : -1;
	int rc = run_cmd(c, &s, e);
	if (rc == 0)
		rc = end_error(c, &s, e);
	if (rc < 0 || (WIFEXITED(s.status) && WEXITSTATUS(s.status) == 0))
		return rc;
	_cleanup_free_ char *written = off >= 0 ? read_from(io->child_fd, off) : NULL;
	return fail(c, s.status, written && written[0] ? written : strbuf_str(&text), e);
}

/* "runsc version 0.0~20240729.0\nspec: 1.0.2-dev\n" -> "0.0~20240729.0" */
static int parse_version(struct runsc *rs, const char *text)
{
	static const char prefix[] = "runsc version ";
	if (!str_has_prefix(text, prefix))
		return -EINVAL;
	const char *v = text + strlen(prefix);
	size_t n = strcspn(v, "\n");
	if (n == 0 || n >= sizeof(rs->version))
		return -EINVAL;
	memcpy(rs->version, v, n);
	rs->version[n] = '\0';
	return 0;
}

/*
 * Older runsc lacks --compression=none and hangs in --leave-running; a
 * custom build may name itself differently, so this only warns.
 */
static void check_release(const struct runsc *rs)
{
	const char *tilde = strchr(rs->version, '~');
	if (!tilde || strtol(tilde + 1, NULL, 10) < 20240729)
		warning("runsc %s: snapfs needs release 20240729 or later", rs->version);
}

int runsc_init(struct runsc *rs, const char *bin, const char *root, struct err *e)
{
	struct cmd c;
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	memset(rs, 0, sizeof(*rs));
	rs->timeout_ms = RUNSC_TIMEOUT_DEFAULT_MS;
	rs->exec_timeout_ms = RUNSC_EXEC_TIMEOUT_DEFAULT_MS;
	if (xsnprintf(rs->bin, sizeof(rs->bin), "%s", bin ? bin : "runsc") < 0 ||
	    xsnprintf(rs->root, sizeof(rs->root), "%s", root) < 0)
		return err_set(e, ENAMETOOLONG, "runsc path or root too long");
	int rc = mkdir_p(rs->root, 0700);
	if (rc < 0)
		return err_set(e, -rc, "cannot create runsc root %s: %s", rs->root, strerror(-rc));
	cmd_start(&c, rs, "--version", false);
	cmd_add(&c, "--version");
	rc = run_short(&c, &out, e);
	if (rc == -ENOENT)
		return err_set(e, ENOENT,
			       "runsc not found: %s (install runsc, or pass --runsc PATH)",
			       rs->bin);
	if (rc < 0)
		return rc;
	if (parse_version(rs, strbuf_str(&out)) < 0)
		return err_set(e, EIO, "runsc --version: unexpected output from %s", rs->bin);
	check_release(rs);
	return 0;
}

int runsc_record_calls(struct runsc *rs, const char *dir, struct err *e)
{
	if (xsnprintf(rs->records, sizeof(rs->records), "%s", dir) < 0)
		return err_set(e, ENAMETOOLONG, "runsc records path too long");
	int rc = mkdir_p(rs->records, 0700);
	if (rc < 0) {
		rs->records[0] = '\0';
		return err_set(e, -rc, "cannot create %s: %s", dir, strerror(-rc));
	}
	return 0;
}

int runsc_wait_leftovers(const struct runsc *rs, int64_t max_wait_ms)
{
	return rs->records[0] ? spawn_leftovers_wait(rs->records, max_wait_ms) : 0;
}

void runsc_set_timeouts(struct runsc *rs, int64_t timeout_ms, int64_t exec_timeout_ms)
{
	if (timeout_ms > 0)
		rs->timeout_ms = timeout_ms;
	if (exec_timeout_ms > 0)
		rs->exec_timeout_ms = exec_timeout_ms;
}

int64_t runsc_scaled_timeout_ms(const struct runsc *rs, int64_t bytes)
{
	int64_t mib = bytes > 0 ? bytes / MIB : 0, extra, total;
	/* Checked: a sandbox's memory is the kernel's number, but a restore's image is a file size.
	 */
	if (__builtin_mul_overflow(mib, (int64_t)RUNSC_PER_GIB_MS, &extra) ||
	    __builtin_add_overflow(rs->timeout_ms, extra / 1024, &total))
		return INT64_MAX / 2;
	return total;
}

int runsc_cancel(const struct runsc *rs, const char *cid)
{
	(void)rs;
	return spawn_cancel(cid);
}

int runsc_new_container_id(char out[RUNTIME_ID_MAX])
{
	return random_name(RUNTIME_ID_PREFIX, RUNTIME_ID_HEX, out, RUNTIME_ID_MAX);
}

/* The pid runsc wrote into @fd (--internal-pid-file, --pid-file); 0 if none. */
static int read_pid(int fd)
{
	char buf[32] = "";
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	long pid = n > 0 ? strtol(buf, NULL, 10) : 0;
	return pid > 0 && pid <= INT_MAX ? (int)pid : 0;
}

/*
 * Where runsc writes the sandbox process's pid (--pid-file): in the bundle,
 * root's alone. runsc state gives no pid once that process has ended, and an
 * entrypoint that exits at once ends before a state could be asked; the
 * file still names it, and the monitor sees it ended (ops_sandbox.c).
 */
static int pid_file_path(const char *bundle, char *out, size_t size, struct err *e)
{
	if (xsnprintf(out, size, "%s/runsc.pid", bundle) < 0)
		return err_set(e, ENAMETOOLONG, "runsc: bundle path %s too long", bundle);
	if (unlink(out) < 0 && errno != ENOENT)
		return err_set(e, EIO, "runsc: cannot remove %s: %s", out, strerror(errno));
	return 0;
}

/* The pid in @path (runsc's --pid-file), 0 if none can be read. */
static pid_t pid_file_read(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	return fd < 0 ? 0 : read_pid(fd);
}

/* Run @c detached with --pid-file in @bundle: *@pid the sandbox process's (0 if unknown). */
static int run_sandbox(struct cmd *c, const char *bundle, const char *cid,
		       const struct runsc_stdio *io, pid_t *pid, struct err *e)
{
	char path[PATH_MAX];
	*pid = 0;
	int rc = pid_file_path(bundle, path, sizeof(path), e);
	if (rc < 0)
		return rc;
	cmd_add(c, "--pid-file");
	cmd_add(c, path);
	cmd_add(c, "--bundle");
	cmd_add(c, bundle);
	cmd_target(c, cid, true);
	rc = run_detached(c, io, e);
	if (rc == 0)
		*pid = pid_file_read(path);
	return rc;
}

int runsc_run(const struct runsc *rs, unsigned flags, const char *cid, const char *bundle,
	      const struct runsc_stdio *io, pid_t *pid, struct err *e)
{
	struct cmd c;
	cmd_init_sandbox(&c, rs, "run", flags);
	cmd_add(&c, "--detach");
	return run_sandbox(&c, bundle, cid, io, pid, e);
}

/* The bytes of the regular files in @dir: what a restore reads. */
static int64_t image_bytes(const char *dir)
{
	int64_t total = 0;
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	for (struct dirent *de = readdir(d); de; de = readdir(d)) {
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode) && __builtin_add_overflow(total, st.st_size, &total)) {
			total = INT64_MAX;
			break;
		}
	}
	closedir(d);
	return total;
}

int runsc_restore(const struct runsc *rs, unsigned flags, const char *cid, const char *bundle,
		  const char *image_dir, const struct runsc_stdio *io, pid_t *pid, struct err *e)
{
	struct cmd c;
	cmd_init_sandbox(&c, rs, "restore", flags);
	cmd_add(&c, "--detach");
	cmd_add(&c, "--image-path");
	cmd_add(&c, image_dir);
	c.timeout_ms = runsc_scaled_timeout_ms(rs, image_bytes(image_dir));
	return run_sandbox(&c, bundle, cid, io, pid, e);
}

int runsc_checkpoint(const struct runsc *rs, const char *cid, const struct runsc_checkpoint_opts *o,
		     struct err *e)
{
	struct cmd c;
	char compression[64], cuda_flag[4096];
	if (xsnprintf(compression, sizeof(compression), "--compression=%s",
		      o->compression ? o->compression : "none") < 0)
		return err_set(e, EINVAL, "runsc checkpoint: compression %s too long",
			       o->compression);
	cmd_init(&c, rs, "checkpoint");
	cmd_add(&c, compression);
	if (o->direct && rs->checkpoint_direct)
		cmd_add(&c, "--direct");
	cmd_add(&c, "--image-path");
	cmd_add(&c, o->image_dir);
	if (o->leave_running)
		cmd_add(&c, "--leave-running");
	if (o->cuda_checkpoint) {
		if (xsnprintf(cuda_flag, sizeof(cuda_flag), "--cuda-checkpoint-path=%s",
			      o->cuda_checkpoint) < 0)
			return err_set(e, ENAMETOOLONG, "cuda-checkpoint path too long");
		cmd_add(&c, cuda_flag);
	}
	cmd_target(&c, cid, true);
	c.timeout_ms = runsc_scaled_timeout_ms(rs, o->mem_bytes);
	return run_short(&c, NULL, e);
}

int runsc_help(const struct runsc *rs, const char *subcommand, char **text, struct err *e)
{
	struct cmd c;
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	cmd_init(&c, rs, "help");
	cmd_add(&c, subcommand);
	int rc = run_short(&c, &out, e);
	if (rc < 0)
		return rc;
	*text = strdup(strbuf_str(&out));
	return *text ? 0 : err_set(e, ENOMEM, "runsc help %s: out of memory", subcommand);
}

/* An exec's output into x->out, until it would pass x->cap: then stop, and the exec is killed. */
static int exec_sink(void *arg, const char *data, size_t len)
{
	struct runsc_exec *x = arg;
	size_t room = x->out->len < x->cap ? x->cap - x->out->len : 0;
	if (len <= room) {
		strbuf_add(x->out, data, len);
		return strbuf_error(x->out) < 0;
	}
	strbuf_add(x->out, data, room);
	x->truncated = true;
	return 1;
}

int runsc_exec(const struct runsc *rs, const char *cid, struct runsc_exec *x, struct err *e)
{
	struct cmd c;
	_cleanup_close_ int pidfd = memfd_create("runsc-exec-pid", MFD_CLOEXEC);
	if (pidfd < 0)
		return err_set(e, EIO, "runsc exec failed: memfd: %s", strerror(errno));
	int fds[3] = {pidfd, x->exec_fd, x->pass_fd};
	cmd_init(&c, rs, "exec");
	/* runsc writes the pid inside the sandbox into our fd 3: no file on the host. */
	cmd_add(&c, "--internal-pid-file=/proc/self/fd/3");
	/* The program is the host's file on our fd 4, loaded by the sentry, not a path in the
	 * sandbox. */
	if (x->exec_fd > 0)
		cmd_add(&c, "--exec-fd=4");
	if (x->exec_fd > 0 && x->pass_fd > 0)
		cmd_add(&c, "--pass-fd=5:3");
	cmd_target(&c, cid, true);
	if (x->argv) {
		for (size_t i = 0; x->argv[i]; i++)
			cmd_add(&c, x->argv[i]);
	} else {
		cmd_add(&c, "/bin/sh");
		cmd_add(&c, "-c");
		cmd_add(&c, x->cmdline);
	}
	c.timeout_ms = x->timeout_ms > 0 ? x->timeout_ms : rs->timeout_ms;
	c.unrecorded = true;
	x->exit_code = -1;
	x->timed_out = x->truncated = false;
	x->pid = 0;
	struct spawn s = {.out_fd = -1, .err_fd = -1, .in_fd = -1, .pass = fds};
	/* stdout elsewhere: stderr alone comes back, through a pipe read into the sink. */
	_cleanup_close_ int err_r = -1, err_w = -1;
	if (x->stdout_fd > 0) {
		int p[2];
		if (pipe2(p, O_CLOEXEC) < 0)
			return err_set(e, EIO, "runsc exec failed: pipe: %s", strerror(errno));
		err_r = p[0], err_w = p[1];
		s.out_fd = x->stdout_fd, s.err_fd = err_w, s.in_fd = err_r;
	}
	s.stdin_fd = x->stdin_fd;
	s.npass = x->exec_fd <= 0 ? 1 : x->pass_fd > 0 ? 3 : 2;
	s.sink = exec_sink;
	s.sink_arg = x;
	int rc = run_cmd(&c, &s, e);
	if (rc < 0)
		return rc;
	x->pid = read_pid(pidfd);
	if (s.end == SPAWN_CANCELLED)
		return end_error(&c, &s, e);
	x->timed_out = s.end == SPAWN_TIMED_OUT;
	if (s.end != SPAWN_EXITED)
		return 0;
	x->exit_code = spawn_code(s.status);
	/* runsc exits 128 for its own failures (their message went to x->out). */
	if (x->exit_code == 128 && runsc_state(rs, cid, NULL, NULL) == RUNSC_GONE)
		return err_set(e, ENOENT, "runsc exec failed: container %s does not exist", cid);
	return 0;
}

int runsc_kill(const struct runsc *rs, const char *cid, int sig, struct err *e)
{
	struct cmd c;
	char signo[16];
	snprintf(signo, sizeof(signo), "%d", sig);
	cmd_init(&c, rs, "kill");
	cmd_target(&c, cid, false);
	cmd_add(&c, signo);
	return run_short(&c, NULL, e);
}

int runsc_kill_all(const struct runsc *rs, const char *cid, int sig, struct err *e)
{
	struct cmd c;
	char signo[16];
	snprintf(signo, sizeof(signo), "%d", sig);
	cmd_init(&c, rs, "kill");
	cmd_add(&c, "--all");
	cmd_target(&c, cid, false);
	cmd_add(&c, signo);
	return run_short(&c, NULL, e);
}

int runsc_kill_pid(const struct runsc *rs, const char *cid, int pid, int sig, struct err *e)
{
	struct cmd c;
	char signo[16], pidarg[32];
	snprintf(signo, sizeof(signo), "%d", sig);
	snprintf(pidarg, sizeof(pidarg), "--pid=%d", pid);
	cmd_init(&c, rs, "kill");
	cmd_add(&c, pidarg);
	cmd_target(&c, cid, false);
	cmd_add(&c, signo);
	return run_short(&c, NULL, e);
}

static int run_on_container(const struct runsc *rs, const char *what, const char *cid,
			    struct err *e)
{
	struct cmd c;
	cmd_init(&c, rs, what);
	cmd_target(&c, cid, false);
	return run_short(&c, NULL, e);
}

int runsc_pause(const struct runsc *rs, const char *cid, struct err *e)
{
	return run_on_container(rs, "pause", cid, e);
}

int runsc_resume(const struct runsc *rs, const char *cid, struct err *e)
{
	return run_on_container(rs, "resume", cid, e);
}

int runsc_delete(const struct runsc *rs, const char *cid, struct err *e)
{
	struct cmd c;
	cmd_init(&c, rs, "delete");
	cmd_add(&c, "--force");
	cmd_target(&c, cid, false);
	int rc = run_short(&c, NULL, e);
	if (rc == -ENOENT) {
		if (e)
			err_clear(e);
		return 0;
	}
	return rc;
}

int runsc_ps(const struct runsc *rs, const char *cid, int *pids, size_t max, size_t *n,
	     struct err *e)
{
	struct cmd c;
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	cmd_init(&c, rs, "ps");
	cmd_add(&c, "--format=json");
	cmd_target(&c, cid, false);
	int rc = run_short(&c, &out, e);
	if (rc < 0)
		return rc;
	rc = runsc_parse_pids(strbuf_str(&out), pids, max, n);
	if (rc == -E2BIG)
		return err_set(e, E2BIG, "container %s has more than %zu processes", cid, max);
	if (rc < 0)
		return err_set(e, EIO, "runsc ps failed: unexpected output for %s", cid);
	return 0;
}

enum runsc_status runsc_state(const struct runsc *rs, const char *cid, pid_t *pid, struct err *e)
{
	struct cmd c;
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	enum runsc_status status = RUNSC_UNKNOWN;
	cmd_init(&c, rs, "state");
	cmd_target(&c, cid, false);
	int rc = run_short(&c, &out, e);
	if (rc == -ENOENT)
		return RUNSC_GONE;
	if (rc == 0 && runsc_parse_state(strbuf_str(&out), &status, pid) < 0)
		err_set(e, EIO, "runsc state failed: unexpected output for %s", cid);
	return status;
}
