#include "runtime/runsc.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/spawn.h"
#include "lib/strbuf.h"

#define ARGV_MAX 24		/* runsc + global flags + the longest subcommand, NULL included */
#define CAPTURE_MAX (64u << 10) /* most of a command's output kept (state JSON, errors) */
#define QUOTE_MAX 300		/* most of one runsc line quoted in a message */
#define MIB (1ll << 20)

/* The PATH every sandbox gets unless its env sets one; also runsc's own. */
#define DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/*
 * runsc's environment: not the daemon's, which holds the store's credentials
 * (AWS_SECRET_ACCESS_KEY…) that neither runsc nor a sandbox process should see.
 */
static char *const runsc_env[] = {DEFAULT_PATH, NULL};

struct cmd {
	const char *argv[ARGV_MAX];
	size_t argc;
	const char *what; /* subcommand, for messages */
	const char *cid;  /* the container it acts on: runsc_cancel() ends it; NULL: none */
	bool
	    refuse_cancelled; /* do not start on a cancelled container (run, exec, checkpoint...) */
	int64_t timeout_ms;   /* its deadline */
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
 * runsc --root R [sandbox flags] [@extra flags] SUBCOMMAND: sandbox flags only
 * for run and restore; @extra is a RUNSC_* mask (the same for a run and the
 * restores of its checkpoints). The deadline is the plain one until a caller
 * scales it.
 */
static void cmd_init_flags(struct cmd *c, const struct runsc *rs, const char *what,
			   bool sandbox_flags, unsigned extra)
{
	c->argc = 0;
	c->what = what;
	c->cid = NULL;
	c->refuse_cancelled = false;
	c->timeout_ms = rs->timeout_ms;
	cmd_add(c, rs->bin);
	cmd_add(c, "--root");
	cmd_add(c, rs->root);
	if (sandbox_flags) {
		/*
		 * The overlay keeps root filesystem writes in sandbox memory, where the
		 * checkpoint captures them. A restore must use the same flags as the run.
		 */
		cmd_add(c, "--overlay2=root:memory");
		cmd_add(c, "--network=none");
	}
	if (extra & RUNSC_NVPROXY)
		cmd_add(c, "--nvproxy");
	cmd_add(c, what);
}

static void cmd_init(struct cmd *c, const struct runsc *rs, const char *what, bool sandbox_flags)
{
	cmd_init_flags(c, rs, what, sandbox_flags, 0);
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
 * string. The fd is a memfd: pread leaves other writers alone.
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
 * end of the console FIFO (runtime/console.h), never a pipe of ours. While
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
	int rc = run_cmd(c, &s, e);
	if (rc == 0)
		rc = end_error(c, &s, e);
	if (rc < 0 || (WIFEXITED(s.status) && WEXITSTATUS(s.status) == 0))
		return rc;
	return fail(c, s.status, strbuf_str(&text), e);
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
	c.argc = 0;
	c.what = "--version";
	c.cid = NULL;
	c.refuse_cancelled = false;
	c.timeout_ms = rs->timeout_ms;
	cmd_add(&c, rs->bin);
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
	char hex[25];
	int rc = random_hex(hex, 24);
	if (rc < 0)
		return rc;
	return xsnprintf(out, RUNTIME_ID_MAX, "snapfs-%s", hex) < 0 ? -ENAMETOOLONG : 0;
}

int runsc_run_flags(const struct runsc *rs, unsigned flags, const char *cid, const char *bundle,
		    const struct runsc_stdio *io, struct err *e)
{
	struct cmd c;
	cmd_init_flags(&c, rs, "run", true, flags);
	cmd_add(&c, "--detach");
	cmd_add(&c, "--bundle");
	cmd_add(&c, bundle);
	cmd_target(&c, cid, true);
	return run_detached(&c, io, e);
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

int runsc_restore_flags(const struct runsc *rs, unsigned flags, const char *cid, const char *bundle,
			const char *image_dir, const struct runsc_stdio *io, struct err *e)
{
	struct cmd c;
	cmd_init_flags(&c, rs, "restore", true, flags);
	cmd_add(&c, "--detach");
	cmd_add(&c, "--image-path");
	cmd_add(&c, image_dir);
	cmd_add(&c, "--bundle");
	cmd_add(&c, bundle);
	cmd_target(&c, cid, true);
	c.timeout_ms = runsc_scaled_timeout_ms(rs, image_bytes(image_dir));
	return run_detached(&c, io, e);
}

int runsc_checkpoint_cuda(const struct runsc *rs, const char *cid, const char *image_dir,
			  bool leave_running, const char *cuda_checkpoint, int64_t mem_bytes,
			  struct err *e)
{
	struct cmd c;
	char cuda_flag[4096];
	cmd_init(&c, rs, "checkpoint", false);
	cmd_add(&c, "--compression=none");
	/*
	 * Only where the pause matters: a suspend stops the sandbox anyway, and
	 * pages that went around the page cache must be read back from the disk.
	 */
	if (rs->checkpoint_direct && leave_running)
		cmd_add(&c, "--direct");
	cmd_add(&c, "--image-path");
	cmd_add(&c, image_dir);
	if (leave_running)
		cmd_add(&c, "--leave-running");
	if (cuda_checkpoint) {
		if (xsnprintf(cuda_flag, sizeof(cuda_flag), "--cuda-checkpoint-path=%s",
			      cuda_checkpoint) < 0)
			return err_set(e, ENAMETOOLONG, "cuda-checkpoint path too long");
		cmd_add(&c, cuda_flag);
	}
	cmd_target(&c, cid, true);
	c.timeout_ms = runsc_scaled_timeout_ms(rs, mem_bytes);
	return run_short(&c, NULL, e);
}

int runsc_help(const struct runsc *rs, const char *subcommand, char **text, struct err *e)
{
	struct cmd c;
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	cmd_init(&c, rs, "help", false);
	cmd_add(&c, subcommand);
	int rc = run_short(&c, &out, e);
	if (rc < 0)
		return rc;
	*text = strdup(strbuf_str(&out));
	return *text ? 0 : err_set(e, ENOMEM, "runsc help %s: out of memory", subcommand);
}
bool runsc_help_has_flag(const char *help, const char *flag)
{
	size_t n = strlen(flag);
	for (const char *p = help; *p; p += strcspn(p, "\n"), p += (*p == '\n')) {
		const char *w = p + strspn(p, " \t");
		if (*w != '-')
			continue;
		w += (w[1] == '-') ? 2 : 1;
		if (strncmp(w, flag, n) == 0 && strchr(" \t=\n", w[n]))
			return true;
	}
	return false;
}

/*
 * 0 if an aligned O_DIRECT write into a new file in directory @dfd works,
 * else why not (-errno). The file is new (O_EXCL, no symlink followed): the
 * probe never writes to or truncates anything that was there.
 */
static int dir_takes_direct(int dfd)
{
	char name[32], hex[17];
	int rc = random_hex(hex, 16);
	if (rc < 0)
		return rc;
	snprintf(name, sizeof(name), ".direct-probe-%s", hex);
	_cleanup_free_ void *block = NULL;
	if (posix_memalign(&block, 4096, 4096) != 0)
		return -ENOMEM;
	memset(block, 0, 4096);
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_DIRECT | O_CLOEXEC,
			0600);
	ssize_t n = fd < 0 ? -1 : write(fd, block, 4096);
	if (n < 0)
		rc = -errno;
	else if (n != 4096)
		rc = -EIO; /* short: this filesystem does not take whole O_DIRECT blocks */
	if (fd >= 0) {
		close(fd);
		unlinkat(dfd, name, 0);
	}
	return rc;
}

void runsc_probe_checkpoint(struct runsc *rs, int image_parent_fd, const char *image_parent)
{
	_cleanup_free_ char *help = NULL;
	struct err e = {0};
	if (runsc_help(rs, "checkpoint", &help, &e) < 0)
		warning("cannot ask runsc which checkpoint flags it has: %s", e.msg);
	rs->checkpoint_cuda = help && runsc_help_has_flag(help, "cuda-checkpoint-path");
	info("runsc %s %s --cuda-checkpoint-path: %s checkpoints CUDA processes", rs->version,
	     rs->checkpoint_cuda ? "has" : "lacks", rs->checkpoint_cuda ? "runsc" : "snapfs");
	if (!help || !runsc_help_has_flag(help, "direct")) {
		info("snapshots write their pages through the page cache (runsc lacks --direct)");
		return;
	}
	int rc = dir_takes_direct(image_parent_fd);
	rs->checkpoint_direct = rc == 0;
	if (rc == 0)
		info("snapshots write their pages with O_DIRECT (runsc --direct)");
	else
		info("snapshots write their pages through the page cache: an O_DIRECT write "
		     "into %s failed: %s",
		     image_parent, strerror(-rc));
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

/* The pid runsc wrote into @fd (--internal-pid-file): the process in the sandbox; 0 if none. */
static int read_pid(int fd)
{
	char buf[32] = "";
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	long pid = n > 0 ? strtol(buf, NULL, 10) : 0;
	return pid > 0 && pid <= INT_MAX ? (int)pid : 0;
}

int runsc_exec(const struct runsc *rs, const char *cid, struct runsc_exec *x, struct err *e)
{
	struct cmd c;
	_cleanup_close_ int pidfd = memfd_create("runsc-exec-pid", MFD_CLOEXEC);
	if (pidfd < 0)
		return err_set(e, EIO, "runsc exec failed: memfd: %s", strerror(errno));
	int fds[2] = {pidfd, x->exec_fd};
	cmd_init(&c, rs, "exec", false);
	/* runsc writes the pid inside the sandbox into our fd 3: no file on the host. */
	cmd_add(&c, "--internal-pid-file=/proc/self/fd/3");
	/* The program is the host's file on our fd 4, loaded by the sentry, not a path in the
	 * sandbox. */
	if (x->exec_fd > 0)
		cmd_add(&c, "--exec-fd=4");
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
	x->exit_code = -1;
	x->timed_out = x->truncated = false;
	x->pid = 0;
	struct spawn s = {.out_fd = -1, .err_fd = -1, .in_fd = -1, .pass = fds};
	s.stdin_fd = x->stdin_fd;
	s.npass = x->exec_fd > 0 ? 2 : 1;
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
	if (x->exit_code == 128 && runsc_state(rs, cid, NULL, 0, NULL, NULL) == -ENOENT)
		return err_set(e, ENOENT, "runsc exec failed: container %s does not exist", cid);
	return 0;
}

int runsc_kill(const struct runsc *rs, const char *cid, int sig, struct err *e)
{
	struct cmd c;
	char signo[16];
	snprintf(signo, sizeof(signo), "%d", sig);
	cmd_init(&c, rs, "kill", false);
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
	cmd_init(&c, rs, "kill", false);
	cmd_add(&c, pidarg);
	cmd_target(&c, cid, false);
	cmd_add(&c, signo);
	return run_short(&c, NULL, e);
}

int runsc_delete(const struct runsc *rs, const char *cid, struct err *e)
{
	struct cmd c;
	cmd_init(&c, rs, "delete", false);
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

/* A JSON array of pids ("[1,9]") into @pids; -EINVAL, or -E2BIG past @max. */
static int parse_pids(const char *text, int *pids, size_t max, size_t *n)
{
	cJSON *root = cJSON_Parse(text);
	const cJSON *p;
	int rc = cJSON_IsArray(root) ? 0 : -EINVAL;
	*n = 0;
	cJSON *arr = rc == 0 ? root : NULL;
	cJSON_ArrayForEach(p, arr)
	{
		if (!cJSON_IsNumber(p) || p->valuedouble < 1 || p->valuedouble > INT_MAX) {
			rc = -EINVAL;
			break;
		}
		if (*n == max) {
			rc = -E2BIG;
			break;
		}
		pids[(*n)++] = (int)p->valuedouble;
	}
	cJSON_Delete(root);
	return rc;
}

int runsc_ps(const struct runsc *rs, const char *cid, int *pids, size_t max, size_t *n,
	     struct err *e)
{
	struct cmd c;
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	cmd_init(&c, rs, "ps", false);
	cmd_add(&c, "--format=json");
	cmd_target(&c, cid, false);
	int rc = run_short(&c, &out, e);
	if (rc < 0)
		return rc;
	rc = parse_pids(strbuf_str(&out), pids, max, n);
	if (rc == -E2BIG)
		return err_set(e, E2BIG, "container %s has more than %zu processes", cid, max);
	if (rc < 0)
		return err_set(e, EIO, "runsc ps failed: unexpected output for %s", cid);
	return 0;
}

static int parse_state(const char *text, char *status, size_t status_len, pid_t *pid)
{
	cJSON *root = cJSON_Parse(text);
	int rc = -EINVAL;
	if (!root)
		return rc;
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "status");
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "pid");
	if (cJSON_IsString(st) && cJSON_IsNumber(p)) {
		rc = 0;
		if (status)
			rc = xsnprintf(status, status_len, "%s", st->valuestring) < 0 ? -EINVAL : 0;
		if (pid)
			*pid = (pid_t)p->valuedouble;
	}
	cJSON_Delete(root);
	return rc;
}

int runsc_state(const struct runsc *rs, const char *cid, char *status, size_t status_len,
		pid_t *pid, struct err *e)
{
	struct cmd c;
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	cmd_init(&c, rs, "state", false);
	cmd_target(&c, cid, false);
	int rc = run_short(&c, &out, e);
	if (rc < 0)
		return rc;
	if (parse_state(strbuf_str(&out), status, status_len, pid) < 0)
		return err_set(e, EIO, "runsc state failed: unexpected output for %s", cid);
	return 0;
}

/* Bundle: config.json, built with cJSON. */

/* Docker's default set: root in the sandbox can chown, bypass file modes, setuid… */
static const char *const capabilities[] = {
    "CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FSETID",	       "CAP_FOWNER",
    "CAP_MKNOD",   "CAP_NET_RAW",      "CAP_SETGID",	       "CAP_SETUID",
    "CAP_SETFCAP", "CAP_SETPCAP",      "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
    "CAP_KILL",	   "CAP_AUDIT_WRITE",
};

/* Add @item to @obj, or free it: the cJSON tree owns all or nothing. */
static bool add(cJSON *obj, const char *key, cJSON *item)
{
	if (!item)
		return false;
	if (key ? cJSON_AddItemToObject(obj, key, item) : cJSON_AddItemToArray(obj, item))
		return true;
	cJSON_Delete(item);
	return false;
}

static bool add_strings(cJSON *obj, const char *key, const char *const *strs, size_t n)
{
	return add(obj, key, cJSON_CreateStringArray(strs, (int)n));
}

static bool env_sets(const char *env, const char *key_eq)
{
	size_t n = strlen(key_eq);
	for (const char *p = env; *p; p += strcspn(p, "\n"), p += (*p == '\n')) {
		if (strncmp(p, key_eq, n) == 0)
			return true;
	}
	return false;
}

/* Fill @arr: PATH and HOME unless @env sets them, then @env's KEY=VALUE lines. */
static int bundle_env(cJSON *arr, const char *env, struct err *e)
{
	bool ok = true;
	if (!env_sets(env, "PATH="))
		ok = add(arr, NULL, cJSON_CreateString(DEFAULT_PATH));
	if (ok && !env_sets(env, "HOME="))
		ok = add(arr, NULL, cJSON_CreateString("HOME=/root"));
	int lineno = 0;
	for (const char *p = env; ok && *p; p += (*p == '\n')) {
		size_t n = strcspn(p, "\n");
		lineno++;
		/* Never quote the line: it may hold a secret. */
		if (n > 0 && (p[0] == '=' || !memchr(p, '=', n)))
			return err_set(e, EINVAL, "env line %d is not KEY=VALUE", lineno);
		if (n > 0) {
			_cleanup_free_ char *line = strndup(p, n);
			ok = line && add(arr, NULL, cJSON_CreateString(line));
		}
		p += n;
	}
	return ok ? 0 : err_set(e, ENOMEM, "cannot build bundle environment");
}

static bool bundle_process(cJSON *p, const char *entrypoint)
{
	const char *args[] = {"/bin/sh", "-c", entrypoint};
	const char *sets[] = {"bounding", "effective", "permitted"};
	cJSON *user = cJSON_AddObjectToObject(p, "user");
	cJSON *caps = cJSON_AddObjectToObject(p, "capabilities");
	bool ok = user && caps && cJSON_AddFalseToObject(p, "terminal") &&
		  cJSON_AddNumberToObject(user, "uid", 0) &&
		  cJSON_AddNumberToObject(user, "gid", 0) && add_strings(p, "args", args, 3) &&
		  cJSON_AddStringToObject(p, "cwd", "/");
	for (size_t i = 0; ok && i < ARRAY_SIZE(sets); i++)
		ok = add_strings(caps, sets[i], capabilities, ARRAY_SIZE(capabilities));
	return ok;
}

static bool bundle_mount(cJSON *arr, const char *dest, const char *type, const char *const *opts,
			 size_t nopts)
{
	cJSON *m = cJSON_CreateObject();
	if (!add(arr, NULL, m))
		return false;
	return cJSON_AddStringToObject(m, "destination", dest) &&
	       cJSON_AddStringToObject(m, "type", type) &&
	       cJSON_AddStringToObject(m, "source", type) &&
	       (nopts == 0 || add_strings(m, "options", opts, nopts));
}

/* /proc and a tmpfs /tmp; runsc itself provides /dev and /sys. */
static bool bundle_mounts(cJSON *cfg)
{
	static const char *const tmp_opts[] = {"nosuid", "nodev", "mode=1777"};
	cJSON *arr = cJSON_AddArrayToObject(cfg, "mounts");
	return arr && bundle_mount(arr, "/proc", "proc", NULL, 0) &&
	       bundle_mount(arr, "/tmp", "tmpfs", tmp_opts, ARRAY_SIZE(tmp_opts));
}

static bool bundle_linux(cJSON *cfg)
{
	static const char *const ns[] = {"pid", "ipc", "uts", "mount", "network"};
	cJSON *lnx = cJSON_AddObjectToObject(cfg, "linux");
	cJSON *arr = lnx ? cJSON_AddArrayToObject(lnx, "namespaces") : NULL;
	bool ok = arr != NULL;
	for (size_t i = 0; ok && i < ARRAY_SIZE(ns); i++) {
		cJSON *o = cJSON_CreateObject();
		ok = add(arr, NULL, o) && cJSON_AddStringToObject(o, "type", ns[i]);
	}
	return ok;
}

/*
 * root.readonly is false on purpose: runsc puts the --overlay2 memory overlay
 * only on a writable root, and with a read-only one every write in the
 * sandbox fails with EROFS. The image directory is still never written: the
 * overlay's upper layer is sandbox memory (docs/runsc-notes.md).
 */
static int bundle_config(cJSON *cfg, const char *rootfs, const char *entrypoint, const char *env,
			 struct err *e)
{
	cJSON *process = cJSON_AddObjectToObject(cfg, "process");
	cJSON *envs = process ? cJSON_AddArrayToObject(process, "env") : NULL;
	cJSON *root = cJSON_AddObjectToObject(cfg, "root");
	if (!envs || !root)
		return err_set(e, ENOMEM, "cannot build bundle config");
	int rc = bundle_env(envs, env, e);
	if (rc < 0)
		return rc;
	bool ok = cJSON_AddStringToObject(cfg, "ociVersion", "1.0.2") &&
		  bundle_process(process, entrypoint) &&
		  cJSON_AddStringToObject(root, "path", rootfs) &&
		  cJSON_AddFalseToObject(root, "readonly") &&
		  cJSON_AddStringToObject(cfg, "hostname", "snapfs") && bundle_mounts(cfg) &&
		  bundle_linux(cfg);
	return ok ? 0 : err_set(e, ENOMEM, "cannot build bundle config");
}

/* One linux.devices entry and its linux.resources.devices allow rule for host node @path. */
static int bundle_device(cJSON *devs, cJSON *rules, const char *path, struct err *e)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return err_set(e, errno == ENOENT ? ENODEV : EIO, "device %s: %s", path,
			       strerror(errno));
	if (!S_ISCHR(st.st_mode))
		return err_set(e, ENODEV, "device %s is not a character device", path);
	cJSON *dev = cJSON_CreateObject();
	cJSON *rule = cJSON_CreateObject();
	bool ok = add(devs, NULL, dev) && add(rules, NULL, rule) &&
		  cJSON_AddStringToObject(dev, "path", path) &&
		  cJSON_AddStringToObject(dev, "type", "c") &&
		  cJSON_AddNumberToObject(dev, "major", major(st.st_rdev)) &&
		  cJSON_AddNumberToObject(dev, "minor", minor(st.st_rdev)) &&
		  cJSON_AddNumberToObject(dev, "fileMode", st.st_mode & 0777) &&
		  cJSON_AddNumberToObject(dev, "uid", 0) &&
		  cJSON_AddNumberToObject(dev, "gid", 0) && cJSON_AddTrueToObject(rule, "allow") &&
		  cJSON_AddStringToObject(rule, "type", "c") &&
		  cJSON_AddNumberToObject(rule, "major", major(st.st_rdev)) &&
		  cJSON_AddNumberToObject(rule, "minor", minor(st.st_rdev)) &&
		  cJSON_AddStringToObject(rule, "access", "rwm");
	return ok ? 0 : err_set(e, ENOMEM, "cannot build bundle config");
}

/* linux.devices and the matching linux.resources.devices rules for @devices. */
static int bundle_devices(cJSON *cfg, const char *const *devices, size_t ndevices, struct err *e)
{
	cJSON *lnx = cJSON_GetObjectItemCaseSensitive(cfg, "linux");
	cJSON *devs = lnx ? cJSON_AddArrayToObject(lnx, "devices") : NULL;
	cJSON *res = lnx ? cJSON_AddObjectToObject(lnx, "resources") : NULL;
	cJSON *rules = res ? cJSON_AddArrayToObject(res, "devices") : NULL;
	if (!devs || !rules)
		return err_set(e, ENOMEM, "cannot build bundle config");
	for (size_t i = 0; i < ndevices; i++) {
		int rc = bundle_device(devs, rules, devices[i], e);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int runsc_write_bundle(const char *bundle_dir, const char *rootfs, const char *entrypoint,
		       const char *env, struct err *e)
{
	return runsc_write_bundle_devices(bundle_dir, rootfs, entrypoint, env, NULL, 0, e);
}

int runsc_write_bundle_devices(const char *bundle_dir, const char *rootfs, const char *entrypoint,
			       const char *env, const char *const *devices, size_t ndevices,
			       struct err *e)
{
	char path[4096];
	if (rootfs[0] != '/')
		return err_set(e, EINVAL, "bundle root %s is not an absolute path", rootfs);
	if (xsnprintf(path, sizeof(path), "%s/config.json", bundle_dir) < 0)
		return err_set(e, ENAMETOOLONG, "bundle path too long: %s", bundle_dir);
	int rc = mkdir_p(bundle_dir, 0700);
	if (rc < 0)
		return err_set(e, -rc, "cannot create bundle %s: %s", bundle_dir, strerror(-rc));
	cJSON *cfg = cJSON_CreateObject();
	if (!cfg)
		return err_set(e, ENOMEM, "cannot build bundle config");
	rc = bundle_config(cfg, rootfs, entrypoint, env ? env : "", e);
	if (rc == 0 && ndevices > 0)
		rc = bundle_devices(cfg, devices, ndevices, e);
	_cleanup_free_ char *text = rc == 0 ? cJSON_Print(cfg) : NULL;
	cJSON_Delete(cfg);
	if (rc < 0)
		return rc;
	if (!text)
		return err_set(e, ENOMEM, "cannot build bundle config");
	rc = write_file_durable(path, text, strlen(text));
	if (rc < 0)
		return err_set(e, -rc, "cannot write %s: %s", path, strerror(-rc));
	return 0;
}
