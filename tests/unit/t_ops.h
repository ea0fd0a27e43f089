/*
 * t_ops.h - the harness of the test_ops_*.c programs: the operations layer
 * (ops/ops.h) driven without root, FUSE or gVisor: runsc is
 * tests/doubles/fake-runsc, the store a local directory, the state
 * directory a temp one. Each program holds one family of checks (the life
 * cycle, terminate, undo, refused writes, holds, limits, timeouts, ports,
 * fan-out, callers, interruptions); this header holds what they share:
 * the fake's environment, completions, reading the state, lives,
 * scenarios and main's begin and end.
 *
 * A daemon's life is a child process (life()): ops_open, ops_start, the
 * scenario's steps, ops_shutdown. An interruption is a life killed with
 * SIGKILL while a runsc call it made is blocked in the fake
 * (FAKE_RUNSC_HANG; life_killed()); the next life on the same state
 * directory reconciles. The children's checks are counted in memory the
 * parent shares (t_share()).
 *
 * Waits are on the operations' own completions (ops_done_fn, a condition
 * variable); the deadline only stops a hung test, and passing it is a
 * failure, never a timing result.
 *
 * Everything here is static and each program uses a part of it: the
 * unused-function and unused-variable warnings are off for this header only.
 * Single-threaded globals: the parent sets them between lives, a life reads them.
 */
#ifndef SNAPFS_T_OPS_H
#define SNAPFS_T_OPS_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/store/store.h"
#include "runtime/net/forward.h"
#include "ops/ops.h"
#include "tests/unit/t.h"
#include "tests/unit/t_dir.h"
#include "tests/unit/t_echo.h"

#define DEADLINE_S 120	      /* for any one completion, state or hang: only a hung test */
#define RESULT_MAX 4096	      /* an operation's result kept */
#define EVENTS_MAX (1u << 20) /* events.jsonl read */
#define IMAGE "img"

static const struct caller *const root = &access_root;

static char fake_bin[PATH_MAX]; /* tests/doubles/fake-runsc */
static char images[PATH_MAX];	/* <t_base>/images, with IMAGE */
/* The scenario's: <t_base>/NAME, its state, the wrapper that is --runsc, the fake's root. */
static char sc_dir[PATH_MAX], state[PATH_MAX], wrapper[PATH_MAX], fake_dir[PATH_MAX];
static const char *fake_base = ""; /* the faults every fake_set() keeps */
static const char *spool_parent;   /* --spool of the next lives; NULL: <state>/spool */

/* --- the fake runsc ----------------------------------------------------- */

/*
 * Make --runsc a wrapper that exports @settings ("FAKE_RUNSC_FAIL=run ...",
 * space-separated; "" for none) and fake_base's, and execs the fake: snapfs
 * hands runsc no environment of its own. Replaced whole, so a call never
 * reads half of it.
 */
static void fake_set(const char *settings)
{
	char text[4096], tmp[PATH_MAX + 8], copy[1024];
	/* A test that dies leaves no sandbox process for long. */
	size_t n = (size_t)snprintf(text, sizeof(text),
				    "#!/bin/sh\nexport FAKE_RUNSC_SANDBOX_SECONDS=600\n");
	xsnprintf(copy, sizeof(copy), "%s %s", fake_base, settings);
	for (char *save = NULL, *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save))
		n += (size_t)snprintf(text + n, sizeof(text) - n, "export %s\n", w);
	xsnprintf(text + n, sizeof(text) - n, "exec '%s' \"$@\"\n", fake_bin);
	xsnprintf(tmp, sizeof(tmp), "%s.tmp", wrapper);
	CHECK(write_file_durable(tmp, text, strlen(text)) == 0);
	CHECK(chmod(tmp, 0755) == 0);
	CHECK(rename(tmp, wrapper) == 0);
}

/* The fake's file @leaf of container @cid into @out ("" if none), its last newline cut. */
static void fake_read(const char *cid, const char *leaf, char *out, size_t len)
{
	char path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	out[0] = '\0';
	xsnprintf(path, sizeof(path), "%s/containers/%s/%s", fake_dir, cid, leaf);
	if (read_file(path, &text, NULL, 4096) == 0) {
		rstrip(text);
		xsnprintf(out, len, "%s", text);
	}
}

static bool fake_has(const char *cid)
{
	char path[PATH_MAX];
	xsnprintf(path, sizeof(path), "%s/containers/%s", fake_dir, cid);
	return access(path, F_OK) == 0;
}

/* Did the fake get any call of subcommand @cmd? */
static bool fake_called_cmd(const char *cmd)
{
	char path[PATH_MAX], want[64];
	_cleanup_free_ char *log = NULL;
	xsnprintf(path, sizeof(path), "%s/calls.log", fake_dir);
	xsnprintf(want, sizeof(want), "\n%s ", cmd);
	return read_file(path, &log, NULL, EVENTS_MAX) == 0 &&
	       (!strncmp(log, want + 1, strlen(want + 1)) || strstr(log, want));
}

/* Did the fake get a call whose line in calls.log is @line? */
static bool fake_called(const char *line)
{
	char path[PATH_MAX];
	_cleanup_free_ char *log = NULL;
	xsnprintf(path, sizeof(path), "%s/calls.log", fake_dir);
	if (read_file(path, &log, NULL, EVENTS_MAX) < 0)
		return false;
	size_t n = strlen(line);
	for (const char *p = log; (p = strstr(p, line)) != NULL; p += n)
		if ((p == log || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

/* How many calls of subcommand @cmd the fake got (lines of calls.log starting "@cmd "). */
static int fake_calls(const char *cmd)
{
	char path[PATH_MAX];
	_cleanup_free_ char *log = NULL;
	int n = 0;
	xsnprintf(path, sizeof(path), "%s/calls.log", fake_dir);
	if (read_file(path, &log, NULL, EVENTS_MAX) < 0)
		return 0;
	size_t len = strlen(cmd);
	for (const char *l = log; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
		n += !strncmp(l, cmd, len) && l[len] == ' ';
	return n;
}

/* Apply @fn to each call blocked in the fake (hang/CMD.PID): its name and pid. */
static int fake_hangs_each(const char *cmd, void (*fn)(const char *name, pid_t pid))
{
	char dir[PATH_MAX];
	int n = 0;
	xsnprintf(dir, sizeof(dir), "%s/hang", fake_dir);
	DIR *d = opendir(dir);
	for (struct dirent *de = d ? readdir(d) : NULL; de; de = readdir(d)) {
		const char *dot = strrchr(de->d_name, '.');
		size_t len = dot ? (size_t)(dot - de->d_name) : 0;
		/* "." and "..", and a pid of 0, which kill() would take for our group. */
		if (de->d_name[0] == '.' || !dot || atoi(dot + 1) <= 0)
			continue;
		if (cmd && (strlen(cmd) != len || strncmp(de->d_name, cmd, len) != 0))
			continue;
		n++;
		if (fn)
			fn(de->d_name, (pid_t)atoi(dot + 1));
	}
	if (d)
		closedir(d);
	return n;
}

static void hang_release(const char *name, pid_t pid)
{
	char path[PATH_MAX];
	(void)pid;
	xsnprintf(path, sizeof(path), "%s/hang/%s", fake_dir, name);
	unlink(path);
}

static void hang_kill(const char *name, pid_t pid)
{
	kill(-pid, SIGKILL); /* spawn made it a session leader: its sleep goes too */
	kill(pid, SIGKILL);
	hang_release(name, pid);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Wait until @n calls of @cmd are blocked in the fake; a failed check if they never are. */
static bool fake_wait_hangs(const char *cmd, int n)
{
	for (int i = 0; i < DEADLINE_S * 20; i++) {
		if (fake_hangs_each(cmd, NULL) >= n)
			return true;
		sleep_ms(50);
	}
	return CHECK_MSG(false, "%d runsc %s calls did not block within %d s", n, cmd, DEADLINE_S);
}

/* Let the blocked calls go on (the markers of killed ones go too). */
static void fake_release(void)
{
	fake_hangs_each(NULL, hang_release);
}

/* End every sandbox process the fake started in this scenario. */
static void fake_kill_sandboxes(void)
{
	char dir[PATH_MAX], pid[32];
	xsnprintf(dir, sizeof(dir), "%s/containers", fake_dir);
	DIR *d = opendir(dir);
	for (struct dirent *de = d ? readdir(d) : NULL; de; de = readdir(d)) {
		if (de->d_name[0] == '.')
			continue;
		fake_read(de->d_name, "pid", pid, sizeof(pid));
		if (atoi(pid) > 0)
			kill(atoi(pid), SIGKILL);
	}
	if (d)
		closedir(d);
}

/* --- completions ----------------------------------------------------------- */

struct op {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int rc;
	char result[RESULT_MAX];
};

static struct op *op_new(void)
{
	struct op *op = calloc(1, sizeof(*op));
	if (!op)
		abort();
	pthread_mutex_init(&op->lock, NULL);
	pthread_cond_init(&op->cond, NULL);
	return op;
}

static void op_done(void *ctx, int rc, const char *result, size_t len)
{
	struct op *op = ctx;
	pthread_mutex_lock(&op->lock);
	op->rc = rc;
	xsnprintf(op->result, sizeof(op->result), "%.*s", (int)len, result ? result : "");
	op->done = true;
	pthread_cond_signal(&op->cond);
	pthread_mutex_unlock(&op->lock);
}

/*
 * The operation's rc once it completed; frees @op. Past the deadline a
 * failed check and -ETIMEDOUT, and @op is left to the job that may still
 * complete it.
 */
static int op_wait(struct op *op, char *result, size_t len)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += DEADLINE_S;
	pthread_mutex_lock(&op->lock);
	while (!op->done && pthread_cond_timedwait(&op->cond, &op->lock, &ts) != ETIMEDOUT)
		;
	bool done = op->done;
	pthread_mutex_unlock(&op->lock);
	if (!CHECK_MSG(done, "an operation did not complete within %d s", DEADLINE_S))
		return -ETIMEDOUT;
	int rc = op->rc;
	if (result)
		xsnprintf(result, len, "%s", op->result);
	free(op);
	return rc;
}

/*
 * Call an ops_* function with op_done, then wait: its refusal, else the
 * completion's rc. @call is the call with `OP` where done and ctx go.
 */
#define OP_RUN(call, result, len)                                                                  \
	({                                                                                         \
		struct op *op_ = op_new();                                                         \
		struct err e_ = {0};                                                               \
		int rc_ = call;                                                                    \
		if (rc_ < 0)                                                                       \
			free(op_);                                                                 \
		rc_ < 0 ? rc_ : op_wait(op_, result, len);                                         \
	})
#define OP op_done, op_, &e_

/* --- reading the state --------------------------------------------------- */

/* What the operations read (ops/ops_rows.c: a row the registry refused included). */
static struct sandbox sb_get(const char *id)
{
	struct sandbox sb = {0};
	if (ops_sandbox_get(root, id, &sb) < 0)
		sb.state = (enum sandbox_state) - 1;
	return sb;
}

static struct snapshot snap_get(const char *id)
{
	struct snapshot snap = {0};
	if (ops_snapshot_get(root, id, &snap) < 0)
		snap.state = (enum snapshot_state) - 1;
	return snap;
}

static const char *sb_name(int s)
{
	return s < 0 ? "missing" : sandbox_state_name((enum sandbox_state)s);
}

static const char *snap_name(int s)
{
	return s < 0 ? "missing" : snapshot_state_name((enum snapshot_state)s);
}

/* Is sandbox (@snap: snapshot) @id in state @want (-1: missing)? When not, with its message. */
static void check_state(int line, bool snap, const char *id, int want)
{
	struct sandbox sb = snap ? (struct sandbox){0} : sb_get(id);
	struct snapshot sn = snap ? snap_get(id) : (struct snapshot){0};
	int got = snap ? (int)sn.state : (int)sb.state;
	const char *(*name)(int) = snap ? snap_name : sb_name;
	t_count(got == want, __FILE__, line, "%s %s is %s, not %s (%s)",
		snap ? "snapshot" : "sandbox", id, name(got), name(want),
		snap ? sn.message : sb.message);
}

#define CHECK_SB(id, want) check_state(__LINE__, false, id, (int)(want))
#define CHECK_SNAP(id, want) check_state(__LINE__, true, id, (int)(want))

#define CHECK_HAS(text, part)                                                                      \
	do {                                                                                       \
		const char *t_ = (text);                                                           \
		CHECK_MSG(strstr(t_, part) != NULL, "%s: \"%s\" lacks \"%s\"", #text, t_, part);   \
	} while (0)

/*
 * The statuses announced for @id, oldest first, space-separated, each
 * repeat of the one before left out: the transitions it went through.
 */
static void events_of(const char *id, char *out, size_t len)
{
	char path[PATH_MAX], last[64] = "";
	_cleanup_free_ char *text = NULL;
	size_t n = 0;
	out[0] = '\0';
	xsnprintf(path, sizeof(path), "%s/events.jsonl", state);
	if (read_file(path, &text, NULL, EVENTS_MAX) < 0)
		return;
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		cJSON *ev = cJSON_Parse(l);
		const cJSON *evid = cJSON_GetObjectItemCaseSensitive(ev, "id");
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(ev, "status");
		if (cJSON_IsString(evid) && cJSON_IsString(st) && !strcmp(evid->valuestring, id) &&
		    strcmp(st->valuestring, last) != 0) {
			n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%s%s", n ? " " : "",
					      st->valuestring);
			xsnprintf(last, sizeof(last), "%s", st->valuestring);
		}
		cJSON_Delete(ev);
	}
}

/*
 * The transitions of @id are @want: polled for up to 2 s, as a job announces a
 * state just after it writes the row that sb_wait_state() sees.
 */
#define CHECK_EVENTS(id, want)                                                                     \
	do {                                                                                       \
		char got_[1024];                                                                   \
		for (int try_ = 0; try_ < 40; try_++) {                                            \
			events_of(id, got_, sizeof(got_));                                         \
			if (!strcmp(got_, want))                                                   \
				break;                                                             \
			sleep_ms(50);                                                              \
		}                                                                                  \
		CHECK_MSG(!strcmp(got_, want), "transitions of %s: \"%s\", not \"%s\"", id, got_,  \
			  want);                                                                   \
	} while (0)

/* Poll until sandbox @id is @want (what a thread of the daemon does on its own). */
static bool sb_wait_state(const char *id, enum sandbox_state want)
{
	for (int i = 0; i < DEADLINE_S * 20; i++) {
		if (sb_get(id).state == want)
			return true;
		sleep_ms(50);
	}
	CHECK_SB(id, want);
	return false;
}

/* The sandbox's "memory": the token its fake container was made with or restored to. */
static void memory_of(const char *id, char *out, size_t len)
{
	fake_read(sb_get(id).runtime_id, "memory", out, len);
}

/* --- sandboxes -------------------------------------------------------------- */

static void make_sandbox(const char *id)
{
	struct err e = {0};
	CHECK(ops_sandbox_create(root, id, &e) == 0);
	CHECK(ops_sandbox_set(root, id, SB_FIELD_IMAGE, IMAGE, &e) == 0);
	CHECK(ops_sandbox_set(root, id, SB_FIELD_ENTRYPOINT, "sleep 1000", &e) == 0);
}

static int sb_start(const char *id)
{
	return OP_RUN(ops_sandbox_start(root, id, OP), NULL, 0);
}

/* A running sandbox @id; false (a failed check) if it does not start. */
static bool run_sandbox(const char *id)
{
	make_sandbox(id);
	return CHECK(sb_start(id) == 0);
}

static int sb_snapshot(const char *id, char snap[ID_MAX])
{
	return OP_RUN(ops_sandbox_snapshot(root, id, NULL, snap, OP), NULL, 0);
}

static int sb_suspend(const char *id)
{
	return OP_RUN(ops_sandbox_suspend(root, id, OP), NULL, 0);
}

static int sb_resume(const char *id)
{
	return OP_RUN(ops_sandbox_resume(root, id, OP), NULL, 0);
}

static int sb_terminate(const char *id)
{
	return OP_RUN(ops_sandbox_terminate(root, id, OP), NULL, 0);
}

static int snap_fork(const char *snap, char id[ID_MAX])
{
	return OP_RUN(ops_snapshot_fork(root, snap, NULL, id, OP), NULL, 0);
}

static int snap_delete(const char *snap)
{
	return OP_RUN(ops_snapshot_delete(root, snap, OP), NULL, 0);
}

/* An exec's whole result: the output, then "exit N". */
static int sb_exec(const char *id, const char *cmdline, char *out, size_t len)
{
	return OP_RUN(ops_sandbox_exec(root, id, cmdline, NULL, OP), out, len);
}

static int last_snapshot_cb(const struct snapshot *snap, void *arg)
{
	*(struct snapshot *)arg = *snap; /* oldest first */
	return 0;
}

/* The newest snapshot of sandbox @id, of any kind, into @out ("" if none). */
static void newest_of(const char *id, char out[ID_MAX])
{
	struct sandbox sb = sb_get(id);
	struct snapshot snap = {0};
	ops_sandbox_snapshots_each(&sb, last_snapshot_cb, &snap);
	memcpy(out, snap.id, ID_MAX);
}

/* --- lives ------------------------------------------------------------------ */

/* The next lives' bound on waiting for runsc calls a killed life left (0: their deadlines). */
static int64_t leftover_wait_ms;
/*
 * What the parent does in a killed life once it is ready, before the kill
 * (NULL: nothing); whether the runsc calls it left blocked live on after
 * it (as a daemon's do) rather than being killed with it; what the parent
 * does while the next life runs (NULL: nothing).
 */
static void (*before_kill)(void);
static bool leftovers_live;
static void (*while_life)(pid_t pid);
/*
 * The next lives' --default-*, --max-* and per-user caps (a zeroed config:
 * unlimited, no bound, no cap).
 */
static struct ops_config quota_cfg;

static bool ops_up(void)
{
	struct err e = {0};
	struct ops_config cfg = {
	    .state_dir = state,
	    .images_dir = images,
	    .runsc_bin = wrapper,
	    .agent = "", /* the fake runsc runs no agent: exec takes the slow way */
	    .gc_grace_ms = -1,
	    .spool_parent = spool_parent,
	    .leftover_wait_ms = leftover_wait_ms,
	    /* A parent nothing is under: ops_open() adopts none of this host's real sandboxes. */
	    .cgroup_parent = "/snapfs-test-ops-none",
	    .default_res = quota_cfg.default_res,
	    .max_res = quota_cfg.max_res,
	    .max_sandboxes_per_user = quota_cfg.max_sandboxes_per_user,
	    .max_ports_per_user = quota_cfg.max_ports_per_user,
	};
	if (!CHECK_MSG(ops_open(&cfg, &e) == 0, "ops_open: %s", e.msg))
		return false;
	return CHECK_MSG(ops_start(&e) == 0, "ops_start: %s", e.msg);
}

/* The child's side of a life: the daemon's log into the scenario's, our failures where they were.
 */
static void child_begin(void)
{
	char log[PATH_MAX];
	t_err = fdopen(dup(STDERR_FILENO), "w");
	xsnprintf(log, sizeof(log), "%s/daemon.log", sc_dir);
	log_to_file(log, 0);
}

static void life_end(pid_t pid, bool killed)
{
	int status = 0;
	if (killed)
		kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	if (killed)
		CHECK_MSG(WIFSIGNALED(status), "a life that was killed ended with status %#x",
			  status);
	else
		CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			  "a daemon life ended with status %#x (see %s/daemon.log)", status,
			  sc_dir);
}

/*
 * One daemon life on the scenario's state directory: open, @fn, shut down.
 * @killed: @fn starts what the fake blocks and waits until it is blocked;
 * then the daemon gets SIGKILL, and the blocked runsc calls are killed too
 * (a crash of the host's daemon, as far as the registry, the spool and the
 * store can tell).
 */
static void life_run(void (*fn)(void), bool killed)
{
	char ready[PATH_MAX];
	xsnprintf(ready, sizeof(ready), "%s/ready", sc_dir);
	unlink(ready);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		child_begin();
		if (ops_up())
			fn();
		if (!killed) {
			ops_shutdown();
			fflush(NULL);
			exit(0);
		}
		/* Not a check: the parent may kill us before it is counted. It checks. */
		write_file_durable(ready, "", 0);
		for (;;)
			pause();
	}
	if (!CHECK(pid > 0))
		return;
	for (int i = 0; killed && i < DEADLINE_S * 20 && access(ready, F_OK) < 0; i++)
		sleep_ms(50);
	if (killed)
		CHECK_MSG(access(ready, F_OK) == 0, "the life to be killed was not ready in %d s",
			  DEADLINE_S);
	if (killed && before_kill)
		before_kill();
	if (!killed && while_life)
		while_life(pid);
	life_end(pid, killed);
	if (killed && !leftovers_live)
		fake_hangs_each(NULL, hang_kill);
}

static void life(void (*fn)(void))
{
	life_run(fn, false);
}

static void life_killed(void (*fn)(void))
{
	life_run(fn, true);
}

/* A fresh state directory <t_base>/@name and a fake without faults. */
static void scenario(const char *name)
{
	xsnprintf(sc_dir, sizeof(sc_dir), "%s/%s", t_base, name);
	xsnprintf(state, sizeof(state), "%s/state", sc_dir);
	xsnprintf(wrapper, sizeof(wrapper), "%s/runsc", sc_dir);
	xsnprintf(fake_dir, sizeof(fake_dir), "%s/runsc/fake-runsc", state);
	CHECK(mkdir_p(state, 0700) == 0);
	fake_set("");
}

static void scenario_end(void)
{
	fake_kill_sandboxes();
}

/* A value one life leaves for the next: <sc_dir>/@name. */
static void note_put(const char *name, const char *value)
{
	char path[PATH_MAX];
	xsnprintf(path, sizeof(path), "%s/%s", sc_dir, name);
	CHECK(write_file_durable(path, value, strlen(value)) == 0);
}

static void note_get(const char *name, char *out, size_t len)
{
	char path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	xsnprintf(path, sizeof(path), "%s/%s", sc_dir, name);
	out[0] = '\0';
	if (CHECK(read_file(path, &text, NULL, 4096) == 0))
		xsnprintf(out, len, "%s", text);
}

/* --- operations that change a sandbox's state, and blocking one in the fake ---- */

/* An operation on a sandbox that changes its state, as an ops_* call without @who. */
typedef int (*begin_fn)(const char *id, ops_done_fn done, void *ctx, struct err *e);

static int begin_start(const char *id, ops_done_fn done, void *ctx, struct err *e)
{
	return ops_sandbox_start(root, id, done, ctx, e);
}

static int begin_snapshot(const char *id, ops_done_fn done, void *ctx, struct err *e)
{
	char snap[ID_MAX];
	return ops_sandbox_snapshot(root, id, NULL, snap, done, ctx, e);
}

static int begin_suspend(const char *id, ops_done_fn done, void *ctx, struct err *e)
{
	return ops_sandbox_suspend(root, id, done, ctx, e);
}

static int begin_resume(const char *id, ops_done_fn done, void *ctx, struct err *e)
{
	return ops_sandbox_resume(root, id, done, ctx, e);
}

static int begin_terminate(const char *id, ops_done_fn done, void *ctx, struct err *e)
{
	return ops_sandbox_terminate(root, id, done, ctx, e);
}

/*
 * @begin on sandbox @id (@op its completion, may be NULL) with runsc @cmd
 * blocked in the fake; once it is, @id must be @during, its transitions so
 * far @events. The fake's faults are fake_base's again after it.
 */
static void begin_blocked(const char *id, begin_fn begin, struct op *op, const char *cmd,
			  enum sandbox_state during, const char *events)
{
	char hang[64];
	struct err e = {0};
	xsnprintf(hang, sizeof(hang), "FAKE_RUNSC_HANG=%s", cmd);
	fake_set(hang);
	CHECK(begin(id, op ? op_done : NULL, op, &e) == 0);
	fake_wait_hangs(cmd, 1);
	fake_set("");
	CHECK_SB(id, during);
	CHECK_EVENTS(id, events);
}

/* --- the scenario's journals and log ------------------------------------- */

static bool journal_has(const char *name, const char *part)
{
	char path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	xsnprintf(path, sizeof(path), "%s/%s", state, name);
	return read_file(path, &text, NULL, EVENTS_MAX) == 0 && strstr(text, part);
}

/* How many times @part is in the scenario's daemon.log (-1: unreadable). */
static int log_count(const char *part)
{
	char path[PATH_MAX];
	_cleanup_free_ char *log = NULL;
	int n = 0;
	xsnprintf(path, sizeof(path), "%s/daemon.log", sc_dir);
	if (read_file(path, &log, NULL, EVENTS_MAX) < 0)
		return -1;
	for (const char *at = log; (at = strstr(at, part)) != NULL; at++)
		n++;
	return n;
}

static bool log_has(const char *part)
{
	return log_count(part) > 0;
}

/* --- the registry, as another writer ---------------------------------------- */

/* Run @sql on the scenario's registry through a second connection, as another writer would. */
static bool registry_exec(const char *sql)
{
	char path[PATH_MAX];
	sqlite3 *db = NULL;
	xsnprintf(path, sizeof(path), "%s/registry.db", state);
	int rc = sqlite3_open(path, &db);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	sqlite3_close(db);
	return CHECK_MSG(rc == SQLITE_OK, "cannot run \"%.60s\" on the registry", sql);
}

/* --- published ports --------------------------------------------------------- */

/* The host port sandbox @id's `ports` lists for its port @port; 0: none. */
static unsigned host_port_of(const char *id, unsigned port)
{
	struct sandbox sb = sb_get(id);
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	char want[32];
	if (ops_sandbox_ports_text(&sb, &out) < 0)
		return 0;
	char text[PORTS_TEXT_MAX * 2];
	xsnprintf(want, sizeof(want), "\n%u 127.0.0.1:", port);
	xsnprintf(text, sizeof(text), "\n%s", strbuf_str(&out)); /* each line after a newline */
	const char *at = strstr(text, want);
	return at ? (unsigned)atoi(at + strlen(want)) : 0;
}

/* --- main ------------------------------------------------------------------- */

/* tests/doubles/fake-runsc: $FAKE_RUNSC, or beside this binary's build/asan/tests/unit/. */
static bool find_fake(void)
{
	char exe[PATH_MAX];
	const char *env = getenv("FAKE_RUNSC");
	if (env)
		return xsnprintf(fake_bin, sizeof(fake_bin), "%s", env) >= 0;
	if (!realpath("/proc/self/exe", exe))
		return false;
	for (int i = 0; i < 5; i++) {
		char *slash = strrchr(exe, '/');
		if (!slash)
			return false;
		*slash = '\0';
	}
	return xsnprintf(fake_bin, sizeof(fake_bin), "%s/tests/doubles/fake-runsc", exe) >= 0 &&
	       access(fake_bin, X_OK) == 0;
}

static bool setup(void)
{
	if (!CHECK_MSG(find_fake(), "no tests/doubles/fake-runsc (set FAKE_RUNSC)"))
		return false;
	t_path(images, "images");
	CHECK(mkdir_p(images, 0755) == 0);
	CHECK(mkdir_p(strcat(strcat(images, "/"), IMAGE "/etc"), 0755) == 0);
	t_path(images, "images/" IMAGE "/etc/hostname");
	CHECK(write_file_durable(images, "fake\n", 5) == 0);
	t_path(images, "images");
	return true;
}

static void one_life(const char *name, void (*fn)(void), void (*next)(void))
{
	scenario(name);
	life(fn);
	if (next)
		life(next);
	scenario_end();
}

/* A program's begin: the shared counts, its directory /tmp/@name.XXXXXX, the fake and the image. */
static bool t_ops_begin(const char *name)
{
	return t_share() && t_dir_make(name) && setup();
}

/* A program's end: its directory gone when all passed, else kept and said. */
static int t_ops_done(const char *name)
{
	if (t_n->failed == 0)
		rm_rf(t_base);
	else
		printf("%s: kept %s (each scenario's daemon.log is there)\n", name, t_base);
	return t_done();
}

#pragma GCC diagnostic pop

#endif
