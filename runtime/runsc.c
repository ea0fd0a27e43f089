#include "runtime/runsc.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#define ARGV_MAX 24		/* runsc + global flags + the longest subcommand, NULL included */
#define CAPTURE_MAX (64u << 10) /* most of a command's output read back (state JSON, errors) */
#define QUOTE_MAX 300		/* most of one runsc line quoted in a message */

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
 * restores of its checkpoints).
 */
static void cmd_init_flags(struct cmd *c, const struct runsc *rs, const char *what,
			   bool sandbox_flags, unsigned extra)
{
	c->argc = 0;
	c->what = what;
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

static int spawn_attrs(posix_spawnattr_t *attr)
{
	sigset_t none, dfl;
	sigemptyset(&none);
	sigemptyset(&dfl);
	/* libfuse ignores SIGPIPE and a daemon may block signals; runsc gets neither. */
	sigaddset(&dfl, SIGPIPE);
	sigaddset(&dfl, SIGINT);
	sigaddset(&dfl, SIGTERM);
	sigaddset(&dfl, SIGHUP);
	sigaddset(&dfl, SIGQUIT);
	int rc = posix_spawnattr_setsigmask(attr, &none);
	if (rc == 0)
		rc = posix_spawnattr_setsigdefault(attr, &dfl);
	/* Its own session: a Ctrl-C at a foreground snapfs must not reach runsc or a sandbox. */
	if (rc == 0)
		rc = posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
							POSIX_SPAWN_SETSID);
	return -rc;
}

/* stdin @in_fd, or /dev/null for -1. */
static int spawn_files(posix_spawn_file_actions_t *fa, int in_fd, int out_fd, int err_fd)
{
	int rc = in_fd >= 0 ? posix_spawn_file_actions_adddup2(fa, in_fd, 0)
			    : posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0);
	if (rc == 0)
		rc = posix_spawn_file_actions_adddup2(fa, out_fd, 1);
	if (rc == 0)
		rc = posix_spawn_file_actions_adddup2(fa, err_fd, 2);
	/* runsc and the sandbox it starts keep nothing of ours: not /dev/fuse, no other fd. */
	if (rc == 0)
		rc = posix_spawn_file_actions_addclosefrom_np(fa, 3);
	return -rc;
}

/*
 * Run @c with stdin on @in_fd (-1: /dev/null), stdout on @out_fd and stderr
 * on @err_fd, wait, and return its wait status.
 */
static int spawn_wait_in(const struct cmd *c, int in_fd, int out_fd, int err_fd, int *status)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	pid_t pid;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	int rc = spawn_files(&fa, in_fd, out_fd, err_fd);
	if (rc == 0)
		rc = spawn_attrs(&attr);
	if (rc == 0)
		rc = -posix_spawnp(&pid, c->argv[0], &fa, &attr, (char *const *)c->argv, runsc_env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (rc < 0)
		return rc;
	while (waitpid(pid, status, 0) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

static int spawn_wait(const struct cmd *c, int out_fd, int err_fd, int *status)
{
	return spawn_wait_in(c, -1, out_fd, err_fd, status);
}

/* The command's exit code as a shell reports it: 128+N for signal N. */
static int wait_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

/*
 * Read up to CAPTURE_MAX bytes of @fd from @off into a new NUL-terminated
 * string. The fd is a memfd or a log file: pread leaves other writers alone.
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

/* Turn a failed command's captured output (@fd from @off) into -ENOENT or -EIO with a message. */
static int fail(const struct cmd *c, const char *cid, int status, int fd, off_t off, struct err *e)
{
	_cleanup_free_ char *text = fd >= 0 ? read_from(fd, off) : NULL;
	char line[QUOTE_MAX + 1] = "";
	if (text && says_no_container(text))
		return err_set(e, ENOENT, "runsc %s failed: container %s does not exist", c->what,
			       cid);
	if (text)
		pick_line(text, line, sizeof(line));
	if (!line[0])
		snprintf(line, sizeof(line), "exit status %d", wait_code(status));
	return err_set(e, EIO, "runsc %s failed: %s", c->what, line);
}

static int spawn_failed(const struct cmd *c, int rc, struct err *e)
{
	return err_set(e, EIO, "runsc %s failed: cannot run %s: %s", c->what, c->argv[0],
		       strerror(-rc));
}

/*
 * A short command: stderr (and stdout unless @out_fd >= 0) into a memfd, not
 * a pipe, so nothing can block on it or keep it open.
 */
static int run_short(const struct cmd *c, const char *cid, int out_fd, struct err *e)
{
	_cleanup_close_ int cap = memfd_create("runsc-stderr", MFD_CLOEXEC);
	int status;
	if (cap < 0)
		return err_set(e, EIO, "runsc %s failed: memfd: %s", c->what, strerror(errno));
	int rc = spawn_wait(c, out_fd >= 0 ? out_fd : cap, cap, &status);
	if (rc < 0)
		return spawn_failed(c, rc, e);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	return fail(c, cid, status, cap, 0, e);
}

/*
 * run/restore --detach: runsc returns once the sandbox runs, and the sandbox
 * keeps stdout/stderr for its lifetime, so both go to the log file. O_APPEND
 * because the sandbox writes through its own offsets (pwrite), which would
 * overwrite what is there. A failure quotes what runsc added to the log.
 */
static int run_detached(const struct cmd *c, const char *cid, const char *log_path, struct err *e)
{
	_cleanup_close_ int log =
	    open(log_path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0640);
	int status;
	if (log < 0)
		return err_set(e, EIO, "runsc %s failed: cannot open log %s: %s", c->what, log_path,
			       strerror(errno));
	off_t start = lseek(log, 0, SEEK_END);
	int rc = spawn_wait(c, log, log, &status);
	if (rc < 0)
		return spawn_failed(c, rc, e);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	return fail(c, cid, status, log, start < 0 ? 0 : start, e);
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
	int status;
	memset(rs, 0, sizeof(*rs));
	if (xsnprintf(rs->bin, sizeof(rs->bin), "%s", bin ? bin : "runsc") < 0 ||
	    xsnprintf(rs->root, sizeof(rs->root), "%s", root) < 0)
		return err_set(e, ENAMETOOLONG, "runsc path or root too long");
	int rc = mkdir_p(rs->root, 0700);
	if (rc < 0)
		return err_set(e, -rc, "cannot create runsc root %s: %s", rs->root, strerror(-rc));
	c.argc = 0;
	c.what = "--version";
	cmd_add(&c, rs->bin);
	cmd_add(&c, "--version");
	_cleanup_close_ int out = memfd_create("runsc-version", MFD_CLOEXEC);
	if (out < 0)
		return err_set(e, EIO, "runsc --version failed: memfd: %s", strerror(errno));
	rc = spawn_wait(&c, out, out, &status);
	if (rc == -ENOENT)
		return err_set(e, ENOENT,
			       "runsc not found: %s (install runsc, or pass --runsc PATH)",
			       rs->bin);
	if (rc < 0)
		return spawn_failed(&c, rc, e);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return fail(&c, "", status, out, 0, e);
	_cleanup_free_ char *text = read_from(out, 0);
	if (!text || parse_version(rs, text) < 0)
		return err_set(e, EIO, "runsc --version: unexpected output from %s", rs->bin);
	check_release(rs);
	return 0;
}

int runsc_new_container_id(char out[RUNTIME_ID_MAX])
{
	char hex[25];
	int rc = random_hex(hex, 24);
	if (rc < 0)
		return rc;
	return xsnprintf(out, RUNTIME_ID_MAX, "snapfs-%s", hex) < 0 ? -ENAMETOOLONG : 0;
}

int runsc_run(const struct runsc *rs, const char *cid, const char *bundle, const char *log_path,
	      struct err *e)
{
	return runsc_run_flags(rs, 0, cid, bundle, log_path, e);
}

int runsc_run_flags(const struct runsc *rs, unsigned flags, const char *cid, const char *bundle,
		    const char *log_path, struct err *e)
{
	struct cmd c;
	cmd_init_flags(&c, rs, "run", true, flags);
	cmd_add(&c, "--detach");
	cmd_add(&c, "--bundle");
	cmd_add(&c, bundle);
	cmd_add(&c, cid);
	return run_detached(&c, cid, log_path, e);
}

int runsc_restore(const struct runsc *rs, const char *cid, const char *bundle,
		  const char *image_dir, const char *log_path, struct err *e)
{
	return runsc_restore_flags(rs, 0, cid, bundle, image_dir, log_path, e);
}

int runsc_restore_flags(const struct runsc *rs, unsigned flags, const char *cid, const char *bundle,
			const char *image_dir, const char *log_path, struct err *e)
{
	struct cmd c;
	cmd_init_flags(&c, rs, "restore", true, flags);
	cmd_add(&c, "--detach");
	cmd_add(&c, "--image-path");
	cmd_add(&c, image_dir);
	cmd_add(&c, "--bundle");
	cmd_add(&c, bundle);
	cmd_add(&c, cid);
	return run_detached(&c, cid, log_path, e);
}

int runsc_checkpoint(const struct runsc *rs, const char *cid, const char *image_dir,
		     bool leave_running, struct err *e)
{
	return runsc_checkpoint_cuda(rs, cid, image_dir, leave_running, NULL, e);
}

int runsc_checkpoint_cuda(const struct runsc *rs, const char *cid, const char *image_dir,
			  bool leave_running, const char *cuda_checkpoint, struct err *e)
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
	cmd_add(&c, cid);
	return run_short(&c, cid, -1, e);
}

int runsc_help(const struct runsc *rs, const char *subcommand, char **text, struct err *e)
{
	struct cmd c;
	cmd_init(&c, rs, "help", false);
	cmd_add(&c, subcommand);
	_cleanup_close_ int out = memfd_create("runsc-help", MFD_CLOEXEC);
	if (out < 0)
		return err_set(e, EIO, "runsc help failed: memfd: %s", strerror(errno));
	int rc = run_short(&c, "", out, e);
	if (rc < 0)
		return rc;
	*text = read_from(out, 0);
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

/*
 * The sandbox writes an exec's output through its own file offset, starting
 * at 0, so on a regular file without O_APPEND it overwrites what is there
 * (docs/runsc-notes.md). Appending is what every caller means.
 */
static int ensure_append(int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return 0;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -errno;
	if (!(fl & O_APPEND) && fcntl(fd, F_SETFL, fl | O_APPEND) < 0)
		return -errno;
	return 0;
}

int runsc_exec(const struct runsc *rs, const char *cid, const char *cmdline, int out_fd,
	       int *exit_code, struct err *e)
{
	return runsc_exec_in(rs, cid, cmdline, -1, out_fd, exit_code, e);
}

int runsc_exec_in(const struct runsc *rs, const char *cid, const char *cmdline, int in_fd,
		  int out_fd, int *exit_code, struct err *e)
{
	struct cmd c;
	int status;
	cmd_init(&c, rs, "exec", false);
	cmd_add(&c, cid);
	cmd_add(&c, "/bin/sh");
	cmd_add(&c, "-c");
	cmd_add(&c, cmdline);
	int rc = ensure_append(out_fd);
	if (rc < 0)
		return err_set(e, EIO, "runsc exec failed: output file: %s", strerror(-rc));
	rc = spawn_wait_in(&c, in_fd, out_fd, out_fd, &status);
	if (rc < 0)
		return spawn_failed(&c, rc, e);
	*exit_code = wait_code(status);
	/* runsc exits 128 for its own failures (their message went to @out_fd). */
	if (*exit_code == 128 && runsc_state(rs, cid, NULL, 0, NULL, NULL) == -ENOENT)
		return err_set(e, ENOENT, "runsc exec failed: container %s does not exist", cid);
	return 0;
}

int runsc_kill(const struct runsc *rs, const char *cid, int sig, struct err *e)
{
	struct cmd c;
	char signo[16];
	snprintf(signo, sizeof(signo), "%d", sig);
	cmd_init(&c, rs, "kill", false);
	cmd_add(&c, cid);
	cmd_add(&c, signo);
	return run_short(&c, cid, -1, e);
}

int runsc_delete(const struct runsc *rs, const char *cid, struct err *e)
{
	struct cmd c;
	cmd_init(&c, rs, "delete", false);
	cmd_add(&c, "--force");
	cmd_add(&c, cid);
	int rc = run_short(&c, cid, -1, e);
	if (rc == -ENOENT) {
		if (e)
			err_clear(e);
		return 0;
	}
	return rc;
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
	cmd_init(&c, rs, "state", false);
	cmd_add(&c, cid);
	_cleanup_close_ int out = memfd_create("runsc-state", MFD_CLOEXEC);
	if (out < 0)
		return err_set(e, EIO, "runsc state failed: memfd: %s", strerror(errno));
	int rc = run_short(&c, cid, out, e);
	if (rc < 0)
		return rc;
	_cleanup_free_ char *text = read_from(out, 0);
	if (!text || parse_state(text, status, status_len, pid) < 0)
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
