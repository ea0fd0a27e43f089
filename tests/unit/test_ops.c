/*
 * test_ops.c - the operations layer (ops/ops.h) driven without root,
 * FUSE or gVisor: runsc is tests/doubles/fake-runsc, the store a local directory,
 * the state directory a temp one. Checks every state transition of a
 * sandbox and a snapshot (the statuses announced in events.jsonl, a repeat
 * left out), the undo of each failing runsc command, and the reconciliation
 * at start-up after each kind of interruption.
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
 */
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

#define CHECK_EVENTS(id, want)                                                                     \
	do {                                                                                       \
		char got_[1024];                                                                   \
		events_of(id, got_, sizeof(got_));                                                 \
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
	return OP_RUN(ops_sandbox_exec(root, id, cmdline, OP), out, len);
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

/* --- the life cycle ------------------------------------------------------- */

/* created -> starting -> running, and what a running sandbox answers. */
static void check_start(const char *id, char mem[64])
{
	char out[RESULT_MAX], want[RESULT_MAX];
	struct err e = {0};
	make_sandbox(id);
	CHECK_SB(id, SB_CREATED);
	CHECK(ops_sandbox_create(root, id, &e) == -EEXIST);
	CHECK(sb_start(id) == 0);
	CHECK_SB(id, SB_RUNNING);
	CHECK_EVENTS(id, "created starting running");
	struct sandbox sb = sb_get(id);
	CHECK(sb.pid > 0);
	CHECK(str_has_prefix(sb.image_digest, "sha256:"));
	fake_read(sb.runtime_id, "status", out, sizeof(out));
	CHECK_STR(out, "running");
	CHECK(sb_start(id) == -EBUSY);
	memory_of(id, mem, 64);
	CHECK(mem[0] != '\0');
	CHECK(sb_exec(id, "cat memory", out, sizeof(out)) == 0);
	xsnprintf(want, sizeof(want), "%s\nexit 0\n", mem);
	CHECK_STR(out, want);
	CHECK(OP_RUN(ops_sandbox_wait(root, id, OP), out, sizeof(out)) == 0);
	CHECK_STR(out, "running\n");
}

/* running -> snapshotting -> running; the snapshot pending -> in_progress -> completed. */
static void check_snapshot(const char *id, const char *mem, char snap[ID_MAX])
{
	char line[PATH_MAX + 128], out[RESULT_MAX];
	struct sandbox before = sb_get(id);
	CHECK(sb_snapshot(id, snap) == 0);
	CHECK_SNAP(snap, SNAP_COMPLETED);
	CHECK_EVENTS(snap, "pending in_progress completed");
	CHECK_EVENTS(id, "created starting running snapshotting running");
	struct snapshot s = snap_get(snap);
	CHECK(s.kind == SNAP_KIND_SNAPSHOT);
	CHECK(s.size_bytes > 0);
	CHECK_STR(s.sandbox_id, id);
	CHECK_STR(sb_get(id).runtime_id, before.runtime_id);
	memory_of(id, out, sizeof(out));
	CHECK_STR(out, mem);
	xsnprintf(line, sizeof(line),
		  "checkpoint --compression=none --image-path %s/spool/%s "
		  "--leave-running %s",
		  state, snap, before.runtime_id);
	CHECK_MSG(fake_called(line), "no call \"%s\"", line);
	CHECK(OP_RUN(ops_snapshot_wait(root, snap, OP), out, sizeof(out)) == 0);
	CHECK_STR(out, "completed\n");
}

/* A fork of @snap: starting -> running, with the snapshot's memory. */
static void check_fork(const char *snap, const char *mem, char fork_id[ID_MAX])
{
	char out[64];
	CHECK(snap_fork(snap, fork_id) == 0);
	CHECK_SB(fork_id, SB_RUNNING);
	CHECK_EVENTS(fork_id, "starting running");
	CHECK_STR(sb_get(fork_id).parent_snapshot, snap);
	memory_of(fork_id, out, sizeof(out));
	CHECK_STR(out, mem);
}

/* running -> suspending -> suspended -> resuming -> running, the memory kept. */
static void check_suspend_resume(const char *id, const char *mem)
{
	char out[64];
	struct sandbox before = sb_get(id);
	CHECK(sb_suspend(id) == 0);
	CHECK_SB(id, SB_SUSPENDED);
	struct sandbox sb = sb_get(id);
	CHECK_SNAP(sb.restore_snapshot, SNAP_COMPLETED);
	CHECK(snap_get(sb.restore_snapshot).kind == SNAP_KIND_SUSPEND);
	CHECK(sb.pid == 0);
	CHECK(!fake_has(before.runtime_id));
	CHECK(snap_delete(sb.restore_snapshot) == -EBUSY);
	CHECK(sb_snapshot(id, out) == -EBUSY);
	CHECK(sb_resume(id) == 0);
	CHECK_SB(id, SB_RUNNING);
	struct sandbox after = sb_get(id);
	CHECK(strcmp(after.runtime_id, before.runtime_id) != 0);
	CHECK_STR(after.restore_snapshot, "");
	CHECK(after.pid > 0);
	memory_of(id, out, sizeof(out));
	CHECK_STR(out, mem);
	CHECK(sb_resume(id) == -EBUSY);
	CHECK_EVENTS(id, "created starting running snapshotting running suspending suspended "
			 "resuming running");
}

/* running -> terminating -> terminated, then removed. */
static void check_terminate_remove(const char *id)
{
	struct err e = {0};
	struct sandbox before = sb_get(id);
	CHECK(ops_sandbox_remove(root, id, &e) == -EBUSY);
	CHECK_SB(id, SB_RUNNING);
	CHECK(sb_terminate(id) == 0);
	CHECK_SB(id, SB_TERMINATED);
	CHECK(!fake_has(before.runtime_id));
	CHECK(sb_get(id).pid == 0);
	CHECK(ops_sandbox_remove(root, id, &e) == 0);
	CHECK(registry_sandbox_get(ops_registry(), id, &before) == -ENOENT);
	CHECK(OP_RUN(ops_sandbox_wait(root, id, OP), NULL, 0) == -ENOENT);
}

/* The monitor: a running sandbox whose process exits becomes terminated. */
static void check_exit(const char *id)
{
	char pid[32];
	fake_read(sb_get(id).runtime_id, "pid", pid, sizeof(pid));
	CHECK(atoi(pid) > 0 && kill(atoi(pid), SIGKILL) == 0);
	if (sb_wait_state(id, SB_TERMINATED))
		CHECK_HAS(sb_get(id).message, "process exited");
	CHECK_EVENTS(id, "starting running terminated");
}

static void lifecycle_steps(void)
{
	char mem[64], snap[ID_MAX], fork_id[ID_MAX], id[ID_MAX];
	struct sandbox_spec spec = {.image = IMAGE};
	check_start("a", mem);
	check_snapshot("a", mem, snap);
	check_fork(snap, mem, fork_id);
	check_suspend_resume("a", mem);
	check_terminate_remove("a");
	CHECK_EVENTS("a", "created starting running snapshotting running suspending suspended "
			  "resuming running terminating terminated removed");
	check_exit(fork_id);
	CHECK(snap_delete(snap) == 0);
	CHECK_SNAP(snap, -1);
	CHECK_EVENTS(snap, "pending in_progress completed deleted");
	CHECK(OP_RUN(ops_sandbox_new(root, &spec, id, OP), NULL, 0) == 0);
	CHECK_SB(id, SB_RUNNING);
	CHECK_EVENTS(id, "created starting running");
	note_put("new", id);
}

/* The next life: a running sandbox is running still, and answers. */
static void restart_steps(void)
{
	char id[ID_MAX], mem[64], out[RESULT_MAX], want[RESULT_MAX];
	note_get("new", id, sizeof(id));
	CHECK_SB(id, SB_RUNNING);
	memory_of(id, mem, sizeof(mem));
	CHECK(sb_exec(id, "cat memory", out, sizeof(out)) == 0);
	xsnprintf(want, sizeof(want), "%s\nexit 0\n", mem);
	CHECK_STR(out, want);
	CHECK(sb_terminate(id) == 0);
	CHECK_EVENTS(id, "created starting running terminating terminated");
}

/* --- terminate from every state ------------------------------------------- */

static void terminate_settled_steps(void)
{
	struct err e = {0};
	char snap[ID_MAX];
	CHECK(ops_sandbox_create(root, "c", &e) == 0);
	CHECK(sb_terminate("c") == 0);
	CHECK(sb_terminate("c") == 0);
	CHECK_SB("c", SB_TERMINATED);
	CHECK_EVENTS("c", "created terminating terminated terminating terminated");
	CHECK(run_sandbox("s") && sb_suspend("s") == 0);
	xsnprintf(snap, sizeof(snap), "%s", sb_get("s").restore_snapshot);
	CHECK(sb_terminate("s") == 0);
	CHECK_SB("s", SB_TERMINATED);
	CHECK_STR(sb_get("s").restore_snapshot, "");
	CHECK_EVENTS("s", "created starting running suspending suspended terminating terminated");
	CHECK(snap_delete(snap) == 0); /* no longer pinned */
	make_sandbox("f");
	fake_set("FAKE_RUNSC_FAIL=run");
	CHECK(sb_start("f") < 0);
	fake_set("");
	CHECK(sb_terminate("f") == 0);
	CHECK_EVENTS("f", "created starting failed terminating terminated");
}

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

/*
 * Terminate sandbox @id while the runsc @cmd of @begin on it is blocked:
 * the call is cancelled, and the job that made it leaves the sandbox to the
 * terminate. Then @id's transitions are @events, then terminating and
 * terminated.
 */
static void terminate_during(const char *id, begin_fn begin, const char *cmd,
			     enum sandbox_state during, const char *events)
{
	char want[512];
	struct op *op = op_new();
	begin_blocked(id, begin, op, cmd, during, events);
	CHECK(sb_terminate(id) == 0);
	CHECK(op_wait(op, NULL, 0) < 0);
	CHECK_SB(id, SB_TERMINATED);
	xsnprintf(want, sizeof(want), "%s terminating terminated", events);
	CHECK_EVENTS(id, want);
	CHECK(!fake_has(sb_get(id).runtime_id));
	fake_release();
}

static void terminate_transitional_steps(void)
{
	char snap[ID_MAX];
	make_sandbox("x");
	terminate_during("x", begin_start, "run", SB_STARTING, "created starting");
	CHECK(run_sandbox("y"));
	terminate_during("y", begin_snapshot, "checkpoint", SB_SNAPSHOTTING,
			 "created starting running snapshotting");
	newest_of("y", snap);
	CHECK_SNAP(snap, SNAP_FAILED);
	CHECK_EVENTS(snap, "pending in_progress failed");
	CHECK(run_sandbox("z"));
	terminate_during("z", begin_suspend, "checkpoint", SB_SUSPENDING,
			 "created starting running suspending");
	newest_of("z", snap);
	CHECK_SNAP(snap, SNAP_FAILED);
	CHECK(run_sandbox("r") && sb_suspend("r") == 0);
	terminate_during("r", begin_resume, "restore", SB_RESUMING,
			 "created starting running suspending suspended resuming");
	CHECK_STR(sb_get("r").restore_snapshot, "");

	/* A second terminate while the first is blocked: both end, terminated. */
	struct op *op = op_new();
	CHECK(run_sandbox("w"));
	begin_blocked("w", begin_terminate, op, "kill", SB_TERMINATING,
		      "created starting running terminating");
	CHECK(sb_terminate("w") == 0);
	CHECK_SB("w", SB_TERMINATED);
	fake_release();
	CHECK(op_wait(op, NULL, 0) == 0);
	CHECK_SB("w", SB_TERMINATED);
	CHECK_EVENTS("w", "created starting running terminating terminated");
}

/* --- the undo of each failing runsc command ------------------------------ */

static bool journal_has(const char *name, const char *part)
{
	char path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	xsnprintf(path, sizeof(path), "%s/%s", state, name);
	return read_file(path, &text, NULL, EVENTS_MAX) == 0 && strstr(text, part);
}

/* A failed run: failed, the container deleted, the reason in `errors` and the sandbox. */
static void undo_start(void)
{
	char line[128];
	make_sandbox("u1");
	fake_set("FAKE_RUNSC_FAIL=run");
	CHECK(sb_start("u1") == -EIO);
	fake_set("");
	CHECK_SB("u1", SB_FAILED);
	CHECK_EVENTS("u1", "created starting failed");
	struct sandbox sb = sb_get("u1");
	CHECK_HAS(sb.message, "runsc run failed");
	CHECK_HAS(sb.message, "FAKE_RUNSC_FAIL");
	xsnprintf(line, sizeof(line), "delete --force %s", sb.runtime_id);
	CHECK_MSG(fake_called(line), "no call \"%s\"", line);
	CHECK(!fake_has(sb.runtime_id));
	CHECK(journal_has("errors.jsonl", "sandboxes/u1/start"));
}

/* A failed checkpoint: the snapshot failed, its spool gone; the sandbox as runsc left it. */
static void undo_checkpoint(const char *id, bool suspend, const char *fake, int want)
{
	char snap[ID_MAX], path[PATH_MAX], mem[64], out[64];
	CHECK(run_sandbox(id));
	memory_of(id, mem, sizeof(mem));
	fake_set(fake);
	CHECK((suspend ? sb_suspend(id) : sb_snapshot(id, snap)) < 0);
	fake_set("");
	newest_of(id, snap);
	CHECK_SNAP(snap, SNAP_FAILED);
	CHECK_EVENTS(snap, "pending in_progress failed");
	CHECK_HAS(snap_get(snap).message, "runsc checkpoint failed");
	xsnprintf(path, sizeof(path), "%s/spool/%s", state, snap);
	CHECK(access(path, F_OK) < 0);
	CHECK_SB(id, want);
	CHECK_STR(sb_get(id).restore_snapshot, "");
	if (want != SB_RUNNING)
		return;
	memory_of(id, out, sizeof(out));
	CHECK_STR(out, mem);
	CHECK(sb_snapshot(id, snap) == 0); /* and it can be tried again */
}

/*
 * A failed restore of a fork (the second: the first is left to succeed):
 * the fork failed, its container deleted, the snapshot free again.
 */
static void undo_fork(const char *snap)
{
	char id[ID_MAX] = "", line[128];
	fake_set("FAKE_RUNSC_FAIL=restore FAKE_RUNSC_FAIL_AFTER=1");
	CHECK(snap_fork(snap, id) == 0);
	CHECK_SB(id, SB_RUNNING);
	CHECK(snap_fork(snap, id) < 0);
	fake_set("");
	CHECK_SB(id, SB_FAILED);
	CHECK_EVENTS(id, "starting failed");
	struct sandbox sb = sb_get(id);
	CHECK_HAS(sb.message, "runsc restore failed");
	xsnprintf(line, sizeof(line), "delete --force %s", sb.runtime_id);
	CHECK_MSG(fake_called(line), "no call \"%s\"", line);
	CHECK(!fake_has(sb.runtime_id));
	CHECK_SNAP(snap, SNAP_COMPLETED);
	CHECK(snap_delete(snap) == 0); /* no restore of it is counted any more */
}

/* A failed restore of a resume: suspended again, and a second resume works. */
static void undo_resume(const char *id)
{
	char mem[64], out[64];
	CHECK(run_sandbox(id));
	memory_of(id, mem, sizeof(mem));
	CHECK(sb_suspend(id) == 0);
	struct sandbox before = sb_get(id);
	fake_set("FAKE_RUNSC_FAIL=restore");
	CHECK(sb_resume(id) < 0);
	fake_set("");
	CHECK_SB(id, SB_SUSPENDED);
	CHECK_STR(sb_get(id).restore_snapshot, before.restore_snapshot);
	CHECK_HAS(sb_get(id).message, "runsc restore failed");
	CHECK(sb_resume(id) == 0);
	CHECK_SB(id, SB_RUNNING);
	memory_of(id, out, sizeof(out));
	CHECK_STR(out, mem);
	CHECK_EVENTS(id, "created starting running suspending suspended resuming suspended "
			 "resuming running");
}

/* A failed delete: the terminate fails, the sandbox is failed; a second terminate ends it. */
static void undo_terminate(const char *id)
{
	CHECK(run_sandbox(id));
	const struct sandbox sb = sb_get(id);
	fake_set("FAKE_RUNSC_FAIL=delete");
	CHECK(sb_terminate(id) < 0);
	fake_set("");
	CHECK_SB(id, SB_FAILED);
	CHECK_HAS(sb_get(id).message, "runsc delete failed");
	CHECK(fake_has(sb.runtime_id));
	CHECK(sb_terminate(id) == 0);
	CHECK_SB(id, SB_TERMINATED);
	CHECK(!fake_has(sb.runtime_id));
	CHECK_EVENTS(id, "created starting running terminating failed terminating terminated");
}

/* A failed exec: its exit line says so, and the sandbox runs on. */
static void undo_exec(const char *id)
{
	char out[RESULT_MAX];
	fake_set("FAKE_RUNSC_FAIL=exec");
	CHECK(sb_exec(id, "true", out, sizeof(out)) == 0);
	fake_set("");
	size_t n = strlen(out);
	CHECK_MSG(n >= 9 && !strcmp(out + n - 9, "exit 128\n"), "exec result \"%s\"", out);
	CHECK_SB(id, SB_RUNNING);
}

/* The command ran but its output could not be read back: the result says so, under its exit. */
static void undo_exec_fetch(const char *id)
{
	char out[RESULT_MAX], path[PATH_MAX];
	/* The fake counts each subcommand's calls made while it is listed: from 0 again. */
	xsnprintf(path, sizeof(path), "%s/calls/exec", fake_dir);
	unlink(path);
	fake_set("FAKE_RUNSC_FAIL=exec FAKE_RUNSC_FAIL_AFTER=1");
	CHECK(sb_exec(id, "true", out, sizeof(out)) == 0);
	fake_set("");
	CHECK_MSG(strstr(out, "reading the output back failed") != NULL, "exec result \"%s\"", out);
	size_t n = strlen(out);
	CHECK_MSG(n >= 7 && !strcmp(out + n - 7, "exit 0\n"), "exec result \"%s\"", out);
	CHECK_SB(id, SB_RUNNING);
}

static void undo_steps(void)
{
	char snap[ID_MAX];
	undo_start();
	undo_checkpoint("u2", false, "FAKE_RUNSC_FAIL=checkpoint", SB_RUNNING);
	undo_checkpoint("u3", false, "FAKE_RUNSC_FAIL=checkpoint FAKE_RUNSC_FAIL_KILL=1",
			SB_FAILED);
	undo_checkpoint("u4", true, "FAKE_RUNSC_FAIL=checkpoint", SB_RUNNING);
	undo_checkpoint("u5", true, "FAKE_RUNSC_FAIL=checkpoint FAKE_RUNSC_FAIL_KILL=1", SB_FAILED);
	/* Paused by its suspend and never resumed: stopped, not left holding its memory. */
	undo_checkpoint("u8", true, "FAKE_RUNSC_FAIL=checkpoint,resume", SB_FAILED);
	CHECK_HAS(sb_get("u8").message, "would not resume and was stopped");
	CHECK(!fake_has(sb_get("u8").runtime_id));
	CHECK_EVENTS("u2", "created starting running snapshotting running snapshotting running");
	CHECK_EVENTS("u3", "created starting running snapshotting failed");
	CHECK_EVENTS("u4", "created starting running suspending running snapshotting running");
	CHECK_EVENTS("u5", "created starting running suspending failed");
	newest_of("u2", snap);
	undo_fork(snap);
	undo_resume("u6");
	undo_terminate("u7");
	undo_exec("u6");
	undo_exec_fetch("u6");
}

/*
 * --- reconciliation after an interruption ---------------------------------
 *
 * Each killed life checks what it left (the states, the transitions so
 * far); the next checks what ops_open() made of it. The reconciliation
 * writes the registry without announcing (no line in events.jsonl), so
 * after it the states are checked, not the transitions.
 */

/* Keep the memory and container of running @id for the next life. */
static void note_running(const char *id)
{
	char mem[64];
	memory_of(id, mem, sizeof(mem));
	note_put("memory", mem);
	note_put("runtime", sb_get(id).runtime_id);
}

/* Start @id and keep its memory and container for the next life. */
static void run_noted(const char *id)
{
	CHECK(run_sandbox(id));
	note_running(id);
}

static void check_memory_noted(const char *id)
{
	char mem[64], noted[64];
	note_get("memory", noted, sizeof(noted));
	memory_of(id, mem, sizeof(mem));
	CHECK_STR(mem, noted);
}

/* Is sandbox @id's container the one it had before the kill? */
static bool same_container(const char *id)
{
	char rid[RUNTIME_ID_MAX];
	note_get("runtime", rid, sizeof(rid));
	return strcmp(sb_get(id).runtime_id, rid) == 0;
}

/* The interrupted checkpoint's snapshot failed, and says it was @was. */
static void check_interrupted(const char *id, const char *was)
{
	char snap[ID_MAX], why[64];
	newest_of(id, snap);
	CHECK_SNAP(snap, SNAP_FAILED);
	xsnprintf(why, sizeof(why), "while it was %s", was);
	CHECK_HAS(snap_get(snap).message, why);
}

/* What the reconciliation made of sandbox x, beyond its state. */
static void starting_gone(void)
{
	CHECK_HAS(sb_get("x").message, "after a daemon restart");
}

static void starting_alive(void)
{
	char pid[32], out[RESULT_MAX];
	struct sandbox sb = sb_get("x");
	fake_read(sb.runtime_id, "pid", pid, sizeof(pid));
	CHECK(sb.pid == atoi(pid));
	CHECK(sb_exec("x", "cat memory", out, sizeof(out)) == 0);
	CHECK_HAS(out, "exit 0\n");
}

/* Killed before the checkpoint ran: it never stopped the sandbox. */
static void checkpoint_never_ran(void)
{
	CHECK(same_container("x"));
	check_interrupted("x", "in_progress");
	check_memory_noted("x");
}

/* Killed after a suspend's checkpoint, before it was marked whole: the paused sandbox runs on. */
static void suspending_ran_on(void)
{
	CHECK_HAS(sb_get("x").message, "runs on");
	CHECK(same_container("x"));
	check_interrupted("x", "in_progress");
	check_memory_noted("x");
}

/*
 * The same when it cannot be resumed: stopped and failed, never restored
 * from a spool a killed checkpoint may have half written.
 */
static void suspending_unresumable(void)
{
	CHECK_HAS(sb_get("x").message, "could not be resumed");
	CHECK(!fake_has(sb_get("x").runtime_id));
	CHECK(!fake_called_cmd("restore"));
	check_interrupted("x", "in_progress");
}

/* Killed before the restore ran: suspended, and a resume works. */
static void resuming_gone(void)
{
	CHECK(sb_resume("x") == 0);
	CHECK_SB("x", SB_RUNNING);
	check_memory_noted("x");
}

static void terminating_reconciled(void)
{
	char rid[RUNTIME_ID_MAX];
	note_get("runtime", rid, sizeof(rid));
	CHECK(!fake_has(rid));
}

/* Snapshots of five sandboxes: four checkpoints blocked, the fifth waiting for a worker. */
#define QUEUED_SANDBOXES 5
static const char *const queued[QUEUED_SANDBOXES] = {"q0", "q1", "q2", "q3", "x"};

static int count_state_cb(const struct snapshot *snap, void *arg)
{
	int *n = arg;
	n[snap->state]++;
	return 0;
}

static void queued_killed(void)
{
	struct err e = {0};
	char snap[ID_MAX];
	int n[SNAP_FAILED + 1] = {0};
	for (int i = 0; i < QUEUED_SANDBOXES; i++)
		CHECK(run_sandbox(queued[i]));
	fake_set("FAKE_RUNSC_HANG=checkpoint");
	for (int i = 0; i < QUEUED_SANDBOXES; i++)
		CHECK(ops_sandbox_snapshot(root, queued[i], NULL, snap, NULL, NULL, &e) == 0);
	fake_wait_hangs("checkpoint", QUEUED_SANDBOXES - 1);
	registry_snapshot_each(ops_registry(), count_state_cb, n);
	CHECK(n[SNAP_IN_PROGRESS] == QUEUED_SANDBOXES - 1);
	CHECK(n[SNAP_PENDING] == 1);
}

static void queued_reconciled(void)
{
	int n[SNAP_FAILED + 1] = {0}, pending = 0;
	registry_snapshot_each(ops_registry(), count_state_cb, n);
	CHECK(n[SNAP_FAILED] == QUEUED_SANDBOXES);
	for (int i = 0; i < QUEUED_SANDBOXES; i++) {
		char snap[ID_MAX];
		CHECK_SB(queued[i], SB_RUNNING);
		newest_of(queued[i], snap);
		pending += strstr(snap_get(snap).message, "while it was pending") != NULL;
	}
	CHECK(pending == 1);
}

/* A snapshot whose manifest was stored, its row not yet: the manifest decides. */
static void stored_killed(void)
{
	char snap[ID_MAX], size[32];
	CHECK(run_sandbox("x") && sb_snapshot("x", snap) == 0);
	struct snapshot s = snap_get(snap);
	xsnprintf(size, sizeof(size), "%lld", (long long)s.size_bytes);
	note_put("size", size);
	s.state = SNAP_IN_PROGRESS;
	s.size_bytes = s.stored_bytes = s.completed_at = 0;
	CHECK(registry_snapshot_update(ops_registry(), &s) == 0);
}

static void stored_reconciled(void)
{
	char snap[ID_MAX], size[32], id[ID_MAX];
	newest_of("x", snap);
	CHECK_SNAP(snap, SNAP_COMPLETED);
	note_get("size", size, sizeof(size));
	CHECK(snap_get(snap).size_bytes == atoll(size) && atoll(size) > 0);
	CHECK(snap_fork(snap, id) == 0);
	CHECK_SB(id, SB_RUNNING);
}

/*
 * x suspended and resumed once (its suspend snapshot completed), then a
 * second suspend killed before its snapshot row existed: the row is
 * suspending and names @restore (none, or no snapshot row). @stopped: its
 * container is gone too.
 */
static void suspend_unnamed_as(const char *restore, bool stopped)
{
	CHECK(run_sandbox("x") && sb_suspend("x") == 0 && sb_resume("x") == 0);
	note_running("x");
	struct sandbox sb = sb_get("x");
	sb.state = SB_SUSPENDING;
	xsnprintf(sb.restore_snapshot, sizeof(sb.restore_snapshot), "%s", restore);
	CHECK(registry_sandbox_update(ops_registry(), &sb) == 0);
	if (!stopped)
		return;
	/* Its process may linger as a zombie: the fake's record says it stopped. */
	char path[PATH_MAX];
	xsnprintf(path, sizeof(path), "%s/containers/%s/status", fake_dir, sb.runtime_id);
	CHECK(write_file_durable(path, "stopped\n", 8) == 0);
	fake_kill_sandboxes();
}

static void suspend_unnamed_killed(void)
{
	suspend_unnamed_as("", false);
}

static void suspend_misnamed_killed(void)
{
	suspend_unnamed_as("s-0123456789abcdef", false);
}

static void suspend_unnamed_stopped_killed(void)
{
	suspend_unnamed_as("", true);
}

/* The older suspend's snapshot is not this one's: x runs on in its container. */
static void suspend_unnamed_reconciled(void)
{
	char snap[ID_MAX];
	CHECK(same_container("x"));
	check_memory_noted("x");
	CHECK_STR(sb_get("x").restore_snapshot, "");
	newest_of("x", snap);
	CHECK_SNAP(snap, SNAP_COMPLETED);
}

/* Stopped, with no snapshot of this suspend: failed, not suspended on the older one. */
static void suspend_unnamed_lost(void)
{
	CHECK_HAS(sb_get("x").message, "cannot be restored");
	CHECK_STR(sb_get("x").restore_snapshot, "");
}

/* Resumed before the kill: it runs, and names no snapshot a later suspend could take. */
static void resuming_alive(void)
{
	check_memory_noted("x");
	CHECK_STR(sb_get("x").restore_snapshot, "");
}

struct interruption {
	const char *name;
	/*
	 * The killed life: @begin on sandbox x, @cmd blocked, while x is
	 * @during; or, when @killed is set, that instead.
	 */
	begin_fn begin;
	const char *cmd;
	enum sandbox_state during;
	void (*killed)(void);
	const char *fake;	  /* the fake's faults besides the hang */
	const char *reopen;	  /* those of the next life */
	enum sandbox_state after; /* x once reconciled */
	void (*reconciled)(void); /* and what else the next life checks */
};

#define AFTER "FAKE_RUNSC_HANG_AT=after"
#define CKPT "checkpoint"
static const struct interruption interruptions[] = {
    {"starting-gone", begin_start, "run", SB_STARTING, NULL, "", "", SB_FAILED, starting_gone},
    {"starting-alive", begin_start, "run", SB_STARTING, NULL, AFTER, "", SB_RUNNING,
     starting_alive},
    {"snapshotting", begin_snapshot, CKPT, SB_SNAPSHOTTING, NULL, "", "", SB_RUNNING,
     checkpoint_never_ran},
    {"suspending-alive", begin_suspend, CKPT, SB_SUSPENDING, NULL, "", "", SB_RUNNING,
     checkpoint_never_ran},
    {"suspending-paused", begin_suspend, CKPT, SB_SUSPENDING, NULL, AFTER, "", SB_RUNNING,
     suspending_ran_on},
    {"suspending-unresumable", begin_suspend, CKPT, SB_SUSPENDING, NULL, AFTER,
     "FAKE_RUNSC_FAIL=resume", SB_FAILED, suspending_unresumable},
    {"resuming-gone", begin_resume, "restore", SB_RESUMING, NULL, "", "", SB_SUSPENDED,
     resuming_gone},
    {"resuming-alive", begin_resume, "restore", SB_RESUMING, NULL, AFTER, "", SB_RUNNING,
     resuming_alive},
    {"terminating", begin_terminate, "kill", SB_TERMINATING, NULL, "", "", SB_TERMINATED,
     terminating_reconciled},
    {"snapshot-pending", NULL, NULL, SB_RUNNING, queued_killed, "", "", SB_RUNNING,
     queued_reconciled},
    {"snapshot-stored", NULL, NULL, SB_RUNNING, stored_killed, "", "", SB_RUNNING,
     stored_reconciled},
    {"suspend-unnamed", NULL, NULL, SB_RUNNING, suspend_unnamed_killed, "", "", SB_RUNNING,
     suspend_unnamed_reconciled},
    {"suspend-misnamed", NULL, NULL, SB_RUNNING, suspend_misnamed_killed, "", "", SB_RUNNING,
     suspend_unnamed_reconciled},
    {"suspend-unnamed-stopped", NULL, NULL, SB_RUNNING, suspend_unnamed_stopped_killed, "", "",
     SB_FAILED, suspend_unnamed_lost},
};

static const struct interruption *now; /* the one under way */

/* x's transitions so far, for a kill while it is @during. */
static const char *transitions_to(enum sandbox_state during)
{
	switch (during) {
	case SB_STARTING:
		return "created starting";
	case SB_SNAPSHOTTING:
		return "created starting running snapshotting";
	case SB_SUSPENDING:
		return "created starting running suspending";
	case SB_RESUMING:
		return "created starting running suspending suspended resuming";
	default:
		return "created starting running terminating";
	}
}

static void killed(void)
{
	char snap[ID_MAX];
	if (now->killed) {
		now->killed();
		return;
	}
	if (now->during == SB_STARTING)
		make_sandbox("x");
	else
		run_noted("x");
	if (now->during == SB_RESUMING)
		CHECK(sb_suspend("x") == 0);
	begin_blocked("x", now->begin, NULL, now->cmd, now->during, transitions_to(now->during));
	if (now->during != SB_SNAPSHOTTING && now->during != SB_SUSPENDING)
		return;
	newest_of("x", snap);
	CHECK_SNAP(snap, SNAP_IN_PROGRESS);
}

static void reconciled(void)
{
	char got[1024];
	const char *want = sandbox_state_name(now->after);
	CHECK_SB("x", now->after);
	/* The restart's verdict is announced, as every other change is. */
	events_of("x", got, sizeof(got));
	size_t n = strlen(got), w = strlen(want);
	CHECK_MSG(n >= w && !strcmp(got + n - w, want), "x's events \"%s\" do not end in %s", got,
		  want);
	now->reconciled();
}

static void interrupted(const struct interruption *in)
{
	now = in;
	scenario(in->name);
	fake_base = in->fake;
	life_killed(killed);
	fake_base = "";
	fake_set(in->reopen);
	life(reconciled);
	scenario_end();
}

/* --- registry writes refused ------------------------------------------------- */

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

/*
 * The registry refuses every update while @refuse: triggers added through a
 * second connection, as a full disk or an I/O error would (no root needed).
 */
static void registry_refuse(bool refuse)
{
	registry_exec(refuse ? "CREATE TRIGGER refuse_sb BEFORE UPDATE ON sandboxes "
			       "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;"
			       "CREATE TRIGGER refuse_snap BEFORE UPDATE ON snapshots "
			       "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;"
			     : "DROP TRIGGER refuse_sb; DROP TRIGGER refuse_snap;");
}

/* The registry's own row of sandbox (@snap: snapshot) @id: its state, -1 if none. */
static int registry_state(bool snap, const char *id)
{
	struct sandbox sb;
	struct snapshot sn;
	if (snap)
		return registry_snapshot_get(ops_registry(), id, &sn) == 0 ? (int)sn.state : -1;
	return registry_sandbox_get(ops_registry(), id, &sb) == 0 ? (int)sb.state : -1;
}

/* Wait until the registry's row of @id is @want: the monitor writes what it refused. */
static void registry_wait_state(int line, bool snap, const char *id, int want)
{
	int got = registry_state(snap, id);
	for (int i = 0; got != want && i < DEADLINE_S * 20; i++) {
		sleep_ms(50);
		got = registry_state(snap, id);
	}
	const char *(*name)(int) = snap ? snap_name : sb_name;
	t_count(got == want, __FILE__, line, "the registry's %s %s is %s, not %s",
		snap ? "snapshot" : "sandbox", id, name(got), name(want));
}
#define CHECK_REG_SB(id, want) registry_wait_state(__LINE__, false, id, (int)(want))
#define CHECK_REG_SNAP(id, want) registry_wait_state(__LINE__, true, id, (int)(want))

static int begin_wait(const char *id, ops_done_fn done, void *ctx, struct err *e)
{
	return ops_sandbox_wait(root, id, done, ctx, e);
}

/*
 * A snapshot whose checkpoint and store finish while the registry refuses
 * writes: the sandbox runs and the snapshot is completed for every reader,
 * the waits answer, and the registry says so once it takes writes again.
 */
static void refused_job_steps(void)
{
	char snap[ID_MAX], out[RESULT_MAX];
	struct err e = {0};
	struct op *job = op_new(), *sb_wait = op_new(), *snap_wait = op_new();
	CHECK(run_sandbox("a"));
	begin_blocked("a", begin_snapshot, job, "checkpoint", SB_SNAPSHOTTING,
		      "created starting running snapshotting");
	newest_of("a", snap);
	CHECK(begin_wait("a", op_done, sb_wait, &e) == 0);
	CHECK(ops_snapshot_wait(root, snap, op_done, snap_wait, &e) == 0);
	registry_refuse(true);
	fake_release();
	CHECK(op_wait(job, NULL, 0) == 0);
	CHECK(op_wait(sb_wait, out, sizeof(out)) == 0);
	CHECK_STR(out, "running\n");
	CHECK(op_wait(snap_wait, out, sizeof(out)) == 0);
	CHECK_STR(out, "completed\n");
	CHECK_SB("a", SB_RUNNING);
	CHECK_SNAP(snap, SNAP_COMPLETED);
	CHECK(registry_state(false, "a") == SB_SNAPSHOTTING);
	CHECK(registry_state(true, snap) == SNAP_IN_PROGRESS);
	/* Not EBUSY: the sandbox is running, for exec as for a second snapshot. */
	CHECK(sb_exec("a", "cat memory", out, sizeof(out)) == 0);
	registry_refuse(false);
	CHECK_REG_SB("a", SB_RUNNING);
	CHECK_REG_SNAP(snap, SNAP_COMPLETED);
	CHECK_EVENTS("a", "created starting running snapshotting running");
	CHECK(sb_snapshot("a", snap) == 0);
}

/* Terminate while the registry refuses writes: terminated, and the registry too after. */
static void refused_terminate_steps(void)
{
	struct err e = {0};
	CHECK(run_sandbox("b"));
	CHECK(ops_sandbox_create(root, "c", &e) == 0);
	char cid[RUNTIME_ID_MAX];
	xsnprintf(cid, sizeof(cid), "%s", sb_get("b").runtime_id);
	registry_refuse(true);
	CHECK(sb_terminate("b") == 0);
	CHECK(sb_terminate("c") == 0);
	CHECK_SB("b", SB_TERMINATED);
	CHECK_SB("c", SB_TERMINATED);
	CHECK(!fake_has(cid));
	CHECK(registry_state(false, "b") == SB_RUNNING);
	registry_refuse(false);
	CHECK_REG_SB("b", SB_TERMINATED);
	CHECK_REG_SB("c", SB_TERMINATED);
	CHECK_EVENTS("b", "created starting running terminating terminated");
}

/*
 * When even the memory cannot keep the row (REGISTRY_PENDING_MAX rows wait
 * already), a snapshot's `completed` is not recorded: its writer is told
 * it failed, its wait ends, and nobody reads it completed.
 */
static void refused_full_steps(void)
{
	char snap[ID_MAX], id[ID_MAX];
	struct err e = {0};
	struct op *job = op_new(), *snap_wait = op_new();
	enum { FILLERS = 300 }; /* more than REGISTRY_PENDING_MAX */
	for (int i = 0; i < FILLERS; i++) {
		xsnprintf(id, sizeof(id), "fill-%d", i);
		CHECK(ops_sandbox_create(root, id, &e) == 0);
	}
	CHECK(run_sandbox("d"));
	begin_blocked("d", begin_snapshot, job, "checkpoint", SB_SNAPSHOTTING,
		      "created starting running snapshotting");
	newest_of("d", snap);
	CHECK(ops_snapshot_wait(root, snap, op_done, snap_wait, &e) == 0);
	registry_refuse(true);
	int kept = 0;
	for (int i = 0; i < FILLERS; i++) {
		xsnprintf(id, sizeof(id), "fill-%d", i);
		if (ops_sandbox_set(root, id, SB_FIELD_ENTRYPOINT, "sleep 1", &e) < 0)
			break;
		kept++;
	}
	CHECK_MSG(kept > 0 && kept < FILLERS, "%d of %d updates kept", kept, FILLERS);
	fake_release();
	CHECK(op_wait(job, NULL, 0) < 0);
	CHECK(op_wait(snap_wait, NULL, 0) < 0);
	CHECK(snap_get(snap).state != SNAP_COMPLETED);
	registry_refuse(false);
	CHECK_REG_SB("fill-0", SB_CREATED);
	xsnprintf(id, sizeof(id), "fill-%d", kept - 1);
	CHECK_STR(sb_get(id).entrypoint, "sleep 1");
	CHECK(registry_state(true, snap) != SNAP_COMPLETED);
	/* Whatever was lost, terminate takes the sandbox from the state it is left in. */
	CHECK(sb_terminate("d") == 0);
	CHECK_REG_SB("d", SB_TERMINATED);
}

/*
 * A resume and a fork while the registry refuses writes fail with EIO
 * before runsc restores anything: the container id they would restore into
 * can only be kept in memory, and a kill -9 then would leave start-up
 * reading the old id, undoing the sandbox and orphaning the container.
 */
static void refused_restore_steps(void)
{
	char snap[ID_MAX], fork_id[ID_MAX];
	CHECK(run_sandbox("e"));
	CHECK(sb_snapshot("e", snap) == 0);
	CHECK(sb_suspend("e") == 0);
	char cid[RUNTIME_ID_MAX];
	xsnprintf(cid, sizeof(cid), "%s", sb_get("e").runtime_id);
	int restores = fake_calls("restore");
	registry_refuse(true);
	CHECK(sb_resume("e") == -EIO);
	CHECK(snap_fork(snap, fork_id) == -EIO);
	CHECK_MSG(fake_calls("restore") == restores, "%d restores run while the registry refused",
		  fake_calls("restore") - restores);
	CHECK_SB("e", SB_SUSPENDED);
	CHECK_STR(sb_get("e").runtime_id, cid);
	CHECK_SB(fork_id, SB_FAILED);
	CHECK(registry_state(false, "e") == SB_SUSPENDED);
	registry_refuse(false);
	CHECK_REG_SB("e", SB_SUSPENDED);
	CHECK(sb_resume("e") == 0);
	CHECK(fake_calls("restore") == restores + 1);
	CHECK_SB("e", SB_RUNNING);
}

/* --- the snapshot a suspended sandbox resumes from ------------------------- */

/* Does the store hold a hold on @snap (holds/<snap>/ has an object: docs/store.md)? */
static bool store_has_hold(const char *snap)
{
	char dir[PATH_MAX];
	xsnprintf(dir, sizeof(dir), "%s/store/holds/%s", state, snap);
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *de = d ? readdir(d) : NULL; de; de = readdir(d))
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n > 0;
}

/* Wait until the hold on @snap is gone: a job releases it after it answered. */
static bool hold_released(const char *snap)
{
	for (int i = 0; store_has_hold(snap) && i < DEADLINE_S * 20; i++)
		sleep_ms(50);
	return !store_has_hold(snap);
}

/* Another host on this store: its delete of @snap, the message in @msg. */
static int other_host_delete(const char *snap, char *msg, size_t len)
{
	char url[PATH_MAX];
	struct store *other = NULL;
	struct err e = {0};
	xsnprintf(url, sizeof(url), "file://%s/store", state);
	if (!CHECK_MSG(store_open(url, NULL, &other, &e) == 0, "store_open: %s", e.msg))
		return -EIO;
	int rc = store_delete_snapshot(other, snap, &e);
	xsnprintf(msg, len, "%s", e.msg);
	store_close(other);
	return rc;
}

/* A delete tried by the first waiter of a snapshot to wake: where `cat wait && delete` runs. */
struct wake_delete {
	char snap[ID_MAX];
	int rc;		 /* the delete's refusal or its completion */
	struct op *woke; /* done once it was tried */
};

static void delete_on_wake(void *ctx, int rc, const char *result, size_t len)
{
	struct wake_delete *w = ctx;
	(void)rc, (void)result, (void)len;
	w->rc = OP_RUN(ops_snapshot_delete(root, w->snap, OP), NULL, 0);
	op_done(w->woke, 0, NULL, 0);
}

/*
 * A suspend's snapshot cannot be deleted from the request on: not while its
 * checkpoint runs, not by a delete the snapshot's `completed` woke (before
 * the store job ends), not by another host (the hold), not after; once
 * resumed it can. And the sandbox resumes with its memory.
 */
static void hold_window_steps(void)
{
	char mem[64], out[64], msg[MESSAGE_MAX];
	struct wake_delete w = {.rc = 1, .woke = op_new()};
	struct op *suspend = op_new();
	struct err e = {0};
	CHECK(run_sandbox("h"));
	memory_of("h", mem, sizeof(mem));
	fake_set("FAKE_RUNSC_HANG=checkpoint");
	CHECK(ops_sandbox_suspend(root, "h", op_done, suspend, &e) == 0);
	fake_wait_hangs("checkpoint", 1);
	fake_set("");
	newest_of("h", w.snap);
	CHECK_STR(sb_get("h").restore_snapshot, w.snap);
	CHECK_MSG(store_has_hold(w.snap), "no hold on %s before its checkpoint", w.snap);
	CHECK(ops_snapshot_wait(root, w.snap, delete_on_wake, &w, &e) == 0);
	fake_release();
	CHECK(op_wait(suspend, NULL, 0) == 0);
	CHECK(op_wait(w.woke, NULL, 0) == 0);
	CHECK_MSG(w.rc == -EBUSY, "a delete as the snapshot completed: %d, not -EBUSY", w.rc);
	CHECK_SB("h", SB_SUSPENDED);
	CHECK_SNAP(w.snap, SNAP_COMPLETED);
	CHECK(other_host_delete(w.snap, msg, sizeof(msg)) == -EBUSY);
	CHECK_HAS(msg, "sandbox h of host");
	CHECK(snap_delete(w.snap) == -EBUSY);
	CHECK(sb_resume("h") == 0);
	CHECK_SB("h", SB_RUNNING);
	memory_of("h", out, sizeof(out));
	CHECK_STR(out, mem);
	CHECK_MSG(hold_released(w.snap), "the hold on %s outlived the resume", w.snap);
	CHECK(snap_delete(w.snap) == 0);
	/* A terminate of a suspended sandbox releases its hold too. */
	CHECK(sb_suspend("h") == 0);
	xsnprintf(w.snap, sizeof(w.snap), "%s", sb_get("h").restore_snapshot);
	CHECK(store_has_hold(w.snap));
	CHECK(sb_terminate("h") == 0);
	CHECK(hold_released(w.snap));
	CHECK(other_host_delete(w.snap, msg, sizeof(msg)) == 0);
}

/* A resume or terminate's answer, and whether the hold on @snap was still there at it. */
struct answer_hold {
	char snap[ID_MAX];
	bool held;
	struct op *op;
};

static void hold_at_answer(void *ctx, int rc, const char *result, size_t len)
{
	struct answer_hold *a = ctx;
	a->held = store_has_hold(a->snap);
	op_done(a->op, rc, result, len);
}

typedef int (*sandbox_op_fn)(const struct caller *who, const char *id, ops_done_fn done, void *ctx,
			     struct err *e);

/* Suspend @id, then @fn (a resume or terminate): the hold is there at its answer, gone after. */
static void answers_before_unhold(const char *id, sandbox_op_fn fn, const char *verb)
{
	struct answer_hold a = {.op = op_new()};
	struct err e = {0};
	CHECK(sb_suspend(id) == 0);
	xsnprintf(a.snap, sizeof(a.snap), "%s", sb_get(id).restore_snapshot);
	CHECK(fn(root, id, hold_at_answer, &a, &e) == 0);
	CHECK(op_wait(a.op, NULL, 0) == 0);
	CHECK_MSG(a.held, "the %s answered only after the store released its hold", verb);
	CHECK(hold_released(a.snap));
}

/*
 * A resume and a terminate answer before they release the hold (a store
 * delete, which waits out the retries while the store is down): the hold
 * is still there when the answer comes, and goes after.
 */
static void hold_answer_steps(void)
{
	CHECK(run_sandbox("j"));
	answers_before_unhold("j", ops_sandbox_resume, "resume");
	CHECK_SB("j", SB_RUNNING);
	answers_before_unhold("j", ops_sandbox_terminate, "terminate");
	CHECK_SB("j", SB_TERMINATED);
}

/* linux.resources.memory.limit in the bundle of sandbox @id (0 without one). */
static double bundle_memory(const char *id)
{
	char path[PATH_MAX], *text = NULL;
	size_t len;
	xsnprintf(path, sizeof(path), "%s/sandboxes/%s/bundle/config.json", state, id);
	if (!CHECK(read_file(path, &text, &len, 1 << 20) == 0))
		return -1;
	cJSON *cfg = cJSON_Parse(text);
	free(text);
	cJSON *res = cJSON_GetObjectItem(cJSON_GetObjectItem(cfg, "linux"), "resources");
	double v =
	    cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(res, "memory"), "limit"));
	cJSON_Delete(cfg);
	return v != v ? 0 : v; /* NaN: no such member */
}

/*
 * Limits: set while created (a bad one EINVAL with a sentence), fixed
 * after start, recorded in its snapshots, kept by a fork and a resume,
 * raised by a fork's words and never lowered; every bundle has them.
 */
static void limits_steps(void)
{
	struct err e = {0};
	char snap[ID_MAX], f1[ID_MAX], f2[ID_MAX];
	make_sandbox("lm");
	CHECK(ops_sandbox_set(root, "lm", SB_FIELD_MEMORY, "-1", &e) == -EINVAL);
	CHECK(strstr(e.msg, "bad memory for sandbox lm") != NULL);
	CHECK(ops_sandbox_set(root, "lm", SB_FIELD_PIDS, "abc", &e) == -EINVAL);
	CHECK(ops_sandbox_set(root, "lm", SB_FIELD_MEMORY, "256M\n", &e) == 0);
	CHECK(ops_sandbox_set(root, "lm", SB_FIELD_CPUS, "0.5", &e) == 0);
	CHECK(sb_start("lm") == 0);
	CHECK(ops_sandbox_set(root, "lm", SB_FIELD_MEMORY, "512M", &e) == -EBUSY);
	CHECK(bundle_memory("lm") == 256 << 20);
	CHECK(sb_snapshot("lm", snap) == 0);
	struct snapshot sn = snap_get(snap);
	CHECK(sn.res.memory_bytes == 256 << 20 && sn.res.cpu_milli == 500 && sn.res.pids == 0);
	CHECK(snap_fork(snap, f1) == 0);
	CHECK(sb_get(f1).res.memory_bytes == 256 << 20 && sb_get(f1).res.cpu_milli == 500);
	CHECK(bundle_memory(f1) == 256 << 20);
	struct fork_opts lower = {.raise = {128 << 20, RES_UNSET, RES_UNSET}};
	e = (struct err){0};
	CHECK(ops_snapshot_fork(root, snap, &lower, f2, op_done, NULL, &e) == -EINVAL);
	CHECK(strstr(e.msg, "memory may only be raised") != NULL);
	struct fork_opts raise = {.raise = {512 << 20, 1000, RES_UNSET}};
	CHECK(OP_RUN(ops_snapshot_fork(root, snap, &raise, f2, OP), NULL, 0) == 0);
	CHECK_SB(f2, SB_RUNNING);
	CHECK(sb_get(f2).res.memory_bytes == 512 << 20 && sb_get(f2).res.cpu_milli == 1000);
	CHECK(bundle_memory(f2) == 512 << 20);
	CHECK(sb_suspend(f2) == 0 && sb_resume(f2) == 0);
	CHECK(sb_get(f2).res.memory_bytes == 512 << 20);
	CHECK(bundle_memory(f2) == 512 << 20);
}

/*
 * Parallel checkpoints share the spool: on a 100 MiB one, two sandboxes
 * that each fit (64 MiB of margin and a fake's few pages) do not together.
 * While the first's checkpoint runs the second is refused with ENOSPC, and
 * both run on; once the first ended, the second fits again.
 */
static void spool_reserve_steps(void)
{
	char snap[ID_MAX], other[ID_MAX];
	struct op *first = op_new();
	struct err e = {0};
	CHECK(run_sandbox("p1") && run_sandbox("p2"));
	fake_set("FAKE_RUNSC_HANG=checkpoint");
	CHECK(ops_sandbox_snapshot(root, "p1", NULL, snap, op_done, first, &e) == 0);
	fake_wait_hangs("checkpoint", 1);
	fake_set("");
	int rc = OP_RUN(ops_sandbox_snapshot(root, "p2", NULL, other, OP), NULL, 0);
	CHECK_MSG(rc == -ENOSPC, "a second checkpoint on the full spool: %d, not -ENOSPC", rc);
	fake_release();
	CHECK(op_wait(first, NULL, 0) == 0);
	CHECK_SNAP(snap, SNAP_COMPLETED);
	CHECK_SB("p1", SB_RUNNING);
	CHECK_SB("p2", SB_RUNNING);
	CHECK(sb_snapshot("p2", other) == 0);
	CHECK_SB("p2", SB_RUNNING);
}

static void spool_reserve(void)
{
	char dir[PATH_MAX];
	scenario("spool-reserve");
	if (!t_tmpfs("spool-reserve/spool", "100m", dir)) {
		scenario_end();
		return;
	}
	spool_parent = dir;
	life(spool_reserve_steps);
	spool_parent = NULL;
	scenario_end();
	umount2(dir, MNT_DETACH);
}

/*
 * What a checkpoint reserves in the spool is its sandbox's memory limit
 * where it has one, not its resident memory at the request (security-3
 * N12), and the job checks the spool again as it starts. On a 330 MiB
 * spool: a sandbox limited to 512 MiB is refused at once (its timeout's
 * suspend then terminates it, the refusal being for good); four
 * checkpoints hung in the fake take every worker and 4 x 64 MiB, a fifth
 * is queued, and once 280 MiB is written into the spool the fifth fails as
 * it starts, its sandbox running on.
 */
static void spool_recheck_steps(void)
{
	char snaps[4][ID_MAX], late[ID_MAX], path[PATH_MAX];
	const char *ids[] = {"r1", "r2", "r3", "r4"};
	struct op *ops_[4], *waiting = op_new();
	struct err e = {0};
	make_sandbox("big");
	CHECK(ops_sandbox_set(root, "big", SB_FIELD_MEMORY, "512M", &e) == 0);
	CHECK(sb_start("big") == 0);
	int rc = OP_RUN(ops_sandbox_snapshot(root, "big", NULL, late, OP), NULL, 0);
	CHECK_MSG(rc == -ENOSPC, "a 512 MiB sandbox's checkpoint on a 330 MiB spool: %d", rc);
	CHECK_SB("big", SB_RUNNING);
	CHECK(ops_sandbox_set_timeout(root, "big", "1 suspend", &e) == 0);
	sb_wait_state("big", SB_TERMINATED);
	CHECK(journal_has("events.jsonl",
			  "\"status\":\"terminating\",\"reason\":\"timeout-suspend-failed\""));
	CHECK_HAS(sb_get("big").message, "the spool");
	CHECK(!fake_called_cmd("checkpoint"));

	CHECK(run_sandbox("r5"));
	fake_set("FAKE_RUNSC_HANG=checkpoint");
	for (int i = 0; i < 4; i++) {
		ops_[i] = op_new();
		CHECK(run_sandbox(ids[i]));
		CHECK(ops_sandbox_snapshot(root, ids[i], NULL, snaps[i], op_done, ops_[i], &e) ==
		      0);
	}
	fake_wait_hangs("checkpoint", 4);
	fake_set("");
	CHECK(ops_sandbox_snapshot(root, "r5", NULL, late, op_done, waiting, &e) == 0);
	xsnprintf(path, sizeof(path), "%s/filler", spool_parent);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0 && posix_fallocate(fd, 0, 280ll << 20) == 0);
	if (fd >= 0)
		close(fd);
	fake_release();
	for (int i = 0; i < 4; i++)
		CHECK(op_wait(ops_[i], NULL, 0) == 0);
	rc = op_wait(waiting, NULL, 0);
	CHECK_MSG(rc == -ENOSPC, "the queued checkpoint, the spool filled meanwhile: %d", rc);
	CHECK_SNAP(late, SNAP_FAILED);
	CHECK_HAS(snap_get(late).message, "as the checkpoint starts");
	CHECK_SB("r5", SB_RUNNING);
	unlink(path);
	CHECK(sb_snapshot("r5", late) == 0); /* room again */
}

static void spool_recheck(void)
{
	char dir[PATH_MAX];
	scenario("spool-recheck");
	if (!t_tmpfs("spool-recheck/spool", "330m", dir)) {
		scenario_end();
		return;
	}
	spool_parent = dir;
	life(spool_recheck_steps);
	spool_parent = NULL;
	scenario_end();
	umount2(dir, MNT_DETACH);
}

/*
 * --- kill -9 at each phase of a suspend and of a snapshot's store ----------
 *
 * The runsc call of the phase is left running after the kill, as a real
 * daemon's children are (their own sessions): the next life must wait for
 * it (leftovers released while it waits) or kill it at its bound (timed
 * out) before it decides, and then leave one container, the sandbox
 * suspended or running with its memory, the snapshot completed where its
 * checkpoint was whole, no spool, no runsc call and no record left.
 */

enum leftover {
	LEFT_RELEASED,	/* the blocked call goes on once the next life waits for it */
	LEFT_TIMED_OUT, /* it stays blocked: the next life kills it at its bound */
	LEFT_STORE,	/* the kill came while storing: the call had returned */
};

struct phase {
	const char *name;
	bool suspend;	  /* else a snapshot */
	const char *fake; /* the killed life's hang: "FAKE_RUNSC_HANG=... [AT]" */
	const char *cmd;  /* the call blocked */
	enum leftover leftover;
	enum sandbox_state after; /* x once settled */
	enum snapshot_state snap; /* and its snapshot */
	bool same;    /* x's runtime id is the one it had (else it was restored into another) */
	bool pending; /* the row left pending: its in_progress never reached the registry */
};

/* Long enough for a late stop (1 s) and the monitor seeing it (a period, 1 s) before the checks. */
#define STOP_LATE "FAKE_RUNSC_STOP_LATE=1"
#define STOP_LATE_WAIT_MS 3500

static const struct phase phases[] = {
    {"kill9-suspend-checkpoint", true, "FAKE_RUNSC_HANG=" CKPT, CKPT, LEFT_RELEASED, SB_RUNNING,
     SNAP_FAILED, true, false},
    /* A checkpoint that stopped its sandbox after it returned lost it once: no longer. */
    {"kill9-suspend-checkpoint-late", true, "FAKE_RUNSC_HANG=" CKPT " " STOP_LATE, CKPT,
     LEFT_RELEASED, SB_RUNNING, SNAP_FAILED, true, false},
    {"kill9-suspend-checkpoint-bound", true, "FAKE_RUNSC_HANG=" CKPT, CKPT, LEFT_TIMED_OUT,
     SB_RUNNING, SNAP_FAILED, true, false},
    {"kill9-suspend-checkpointed", true, "FAKE_RUNSC_HANG=" CKPT " " AFTER, CKPT, LEFT_RELEASED,
     SB_RUNNING, SNAP_FAILED, true, false},
    {"kill9-suspend-delete", true, "FAKE_RUNSC_HANG=delete", "delete", LEFT_RELEASED, SB_SUSPENDED,
     SNAP_COMPLETED, true, false},
    /* Killed before the delete: paused, its checkpoint whole, it is stored. */
    {"kill9-suspend-delete-bound", true, "FAKE_RUNSC_HANG=delete", "delete", LEFT_TIMED_OUT,
     SB_SUSPENDED, SNAP_COMPLETED, true, false},
    {"kill9-suspend-store", true, "FAKE_RUNSC_HANG=" CKPT " " AFTER, CKPT, LEFT_STORE, SB_SUSPENDED,
     SNAP_COMPLETED, true, false},
    {"kill9-snapshot-checkpoint", false, "FAKE_RUNSC_HANG=" CKPT, CKPT, LEFT_RELEASED, SB_RUNNING,
     SNAP_FAILED, true, false},
    {"kill9-snapshot-store", false, "FAKE_RUNSC_HANG=" CKPT " " AFTER, CKPT, LEFT_STORE, SB_RUNNING,
     SNAP_COMPLETED, true, false},
    {"kill9-suspend-store-pending", true, "FAKE_RUNSC_HANG=" CKPT " " AFTER, CKPT, LEFT_STORE,
     SB_SUSPENDED, SNAP_COMPLETED, true, true},
    {"kill9-snapshot-store-pending", false, "FAKE_RUNSC_HANG=" CKPT " " AFTER, CKPT, LEFT_STORE,
     SB_RUNNING, SNAP_COMPLETED, true, true},
};

static const struct phase *ph; /* the one under way */

/* Is process @pid running (not gone, not a zombie)? */
static bool pid_alive(pid_t pid)
{
	char path[64];
	_cleanup_fclose_ FILE *f = NULL;
	char st = 'X';
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (f && fscanf(f, "%*d (%*[^)]) %c", &st) != 1)
		st = 'X';
	return f && st != 'Z' && st != 'X';
}

static int live_hangs;
static void count_live(const char *name, pid_t pid)
{
	(void)name;
	live_hangs += pid_alive(pid);
}

/* Entries in @dir but dot files; -1 if it cannot be read. */
static int entries(const char *dir)
{
	int n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	for (struct dirent *de = readdir(d); de; de = readdir(d))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

static int entries_in(const char *leaf)
{
	char dir[PATH_MAX];
	xsnprintf(dir, sizeof(dir), "%s/%s", state, leaf);
	return entries(dir);
}

static void phase_killed(void)
{
	struct err e = {0};
	char snap[ID_MAX];
	run_noted("x");
	fake_set(ph->fake);
	CHECK((ph->suspend ? begin_suspend : begin_snapshot)("x", NULL, NULL, &e) == 0);
	fake_wait_hangs(ph->cmd, 1);
	fake_set("");
	newest_of("x", snap);
	CHECK_SNAP(snap, SNAP_IN_PROGRESS);
	note_put("snap", snap);
}

/*
 * Before the kill of a store phase: the checkpoint is written, its call
 * blocked before it returns. A write lease on its pages file, then the call
 * let go: the store's open of the file waits for the lease, and the kill
 * comes once the kernel says it does (the lease breaking).
 */
static int lease_fd = -1;
static void lease_pages(void)
{
	char snap[ID_MAX], path[PATH_MAX];
	if (ph->leftover != LEFT_STORE)
		return;
	note_get("snap", snap, sizeof(snap));
	xsnprintf(path, sizeof(path), "%s/spool/%s/pages.img", state, snap);
	lease_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (!CHECK_MSG(lease_fd >= 0 && fcntl(lease_fd, F_SETLEASE, F_WRLCK) == 0,
		       "cannot take a lease on %s: %s", path, strerror(errno)))
		return;
	fake_release();
	int i = 0;
	while (i++ < DEADLINE_S * 20 && fcntl(lease_fd, F_GETLEASE) == F_WRLCK)
		sleep_ms(50);
	CHECK_MSG(fcntl(lease_fd, F_GETLEASE) != F_WRLCK, "the store never opened %s", path);
	/* As a refused write kept in memory leaves it (ops_rows.c): pending, its spool whole. */
	if (ph->pending)
		registry_exec("UPDATE snapshots SET state = 'pending'");
}

/* Has the life @pid ended (left for life_end() to reap)? */
static bool life_over(pid_t pid)
{
	siginfo_t si = {0};
	return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid;
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

/* While the next life starts: let the blocked call go on once it waits for it. */
static void release_when_waited(pid_t pid)
{
	int i = 0;
	while (i++ < DEADLINE_S * 20 && !log_has("a killed snapfs left running") && !life_over(pid))
		sleep_ms(50);
	CHECK_MSG(log_has("a killed snapfs left running"),
		  "the next life did not wait for the runsc call the killed one left");
	fake_release();
}

/* Wait until snapshot @id is settled (a store the start-up queued may still run). */
static void snap_wait_settled(const char *id)
{
	for (int i = 0; i < DEADLINE_S * 20 && !snapshot_state_settled(snap_get(id).state); i++)
		sleep_ms(50);
}

static void phase_settled(void)
{
	char snap[ID_MAX], id[ID_MAX];
	note_get("snap", snap, sizeof(snap));
	if (strstr(ph->fake, STOP_LATE))
		sleep_ms(STOP_LATE_WAIT_MS);
	if (ph->after == SB_SUSPENDED)
		sb_wait_state("x", SB_SUSPENDED);
	snap_wait_settled(snap);
	CHECK_SB("x", ph->after);
	CHECK_SNAP(snap, ph->snap);
	CHECK_MSG(same_container("x") == ph->same, "%s: x %s its container", ph->name,
		  ph->same ? "lost" : "kept");
	/* One container, x's; none while it is suspended. */
	struct sandbox sb = sb_get("x");
	int want = sb.state == SB_RUNNING;
	CHECK_MSG(entries_in("runsc/fake-runsc/containers") == want, "%d containers, not %d",
		  entries_in("runsc/fake-runsc/containers"), want);
	if (want)
		CHECK(fake_has(sb.runtime_id));
	/* Nothing left over: no spool, no runsc call running, no record of one. */
	CHECK_MSG(entries_in("spool") == 0, "%d entries left in the spool", entries_in("spool"));
	live_hangs = 0;
	fake_hangs_each(NULL, count_live);
	CHECK_MSG(live_hangs == 0, "%d runsc calls of the killed life still run", live_hangs);
	CHECK(entries_in("runsc-calls") == 0);
	if (ph->after == SB_SUSPENDED) {
		CHECK(sb_resume("x") == 0);
		CHECK_SB("x", SB_RUNNING);
	}
	check_memory_noted("x");
	if (ph->snap == SNAP_COMPLETED) {
		CHECK(snap_fork(snap, id) == 0);
		CHECK_SB(id, SB_RUNNING);
	}
}

static void killed_at(const struct phase *p)
{
	ph = p;
	scenario(p->name);
	before_kill = lease_pages;
	leftovers_live = true;
	life_killed(phase_killed);
	before_kill = NULL;
	if (lease_fd >= 0)
		close(lease_fd);
	lease_fd = -1;
	leftover_wait_ms = p->leftover == LEFT_TIMED_OUT ? 1 : 0;
	while_life = p->leftover == LEFT_RELEASED ? release_when_waited : NULL;
	life(phase_settled);
	while_life = NULL;
	leftovers_live = false;
	leftover_wait_ms = 0;
	fake_hangs_each(NULL, hang_kill); /* what a failed check left blocked */
	scenario_end();
}

/* --- main --------------------------------------------------------------------- */

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

/* --- the lifetime: timeouts (ops/ops_timer.c) ------------------------ */

/*
 * A deadline that passes while the sandbox is snapshotting (the checkpoint
 * blocked in the fake) waits for the snapshot, then fires: terminated, its
 * events giving the reason.
 */
static void timeout_transitional_steps(void)
{
	struct err e = {0};
	struct op *op = op_new();
	if (!run_sandbox("tt"))
		return;
	begin_blocked("tt", begin_snapshot, op, "checkpoint", SB_SNAPSHOTTING,
		      "created starting running snapshotting");
	CHECK(ops_sandbox_set_timeout(root, "tt", "1", &e) == 0);
	sleep_ms(1500); /* past the deadline, which must not take the sandbox from its job */
	CHECK_SB("tt", SB_SNAPSHOTTING);
	fake_release();
	CHECK(op_wait(op, NULL, 0) == 0);
	sb_wait_state("tt", SB_TERMINATED);
	CHECK_EVENTS("tt", "created starting running snapshotting running terminating terminated");
	CHECK(journal_has("events.jsonl", "\"status\":\"terminating\",\"reason\":\"timeout\""));
	CHECK(sb_get("tt").deadline_at == 0 || sb_get("tt").state == SB_TERMINATED);
}

/*
 * A timeout's suspend whose checkpoint always fails (security-3 N11): each
 * try leaves the sandbox running with its deadline due. After three tries,
 * 2 s then 4 s apart (not every 500 ms), the timeout terminates it instead,
 * and says why in its error, the errors journal and the events' reason.
 */
static void timeout_suspend_fails_steps(void)
{
	struct err e = {0};
	if (!run_sandbox("tf"))
		return;
	fake_set("FAKE_RUNSC_FAIL=checkpoint");
	int64_t t0 = now_ms();
	CHECK(ops_sandbox_set_timeout(root, "tf", "1 suspend", &e) == 0);
	sb_wait_state("tf", SB_TERMINATED);
	int64_t took = now_ms() - t0;
	fake_set("");
	int tries = fake_calls("checkpoint");
	CHECK_MSG(tries == 3, "the timeout's suspend was tried %d times, not 3", tries);
	CHECK_MSG(took >= 1000 + 2000 + 4000, "the tries were backed off: all in %lld ms",
		  (long long)took);
	CHECK_EVENTS("tf", "created starting running suspending running suspending running "
			   "suspending running terminating terminated");
	CHECK(journal_has("events.jsonl",
			  "\"status\":\"terminating\",\"reason\":\"timeout-suspend-failed\""));
	CHECK_HAS(sb_get("tf").message, "the suspend failed");
	CHECK_HAS(sb_get("tf").message, "runsc checkpoint failed");
	CHECK(journal_has("errors.jsonl", "the sandbox was terminated instead"));
	CHECK(sb_get("tf").deadline_at == 0);
}

/* Bad values are refused with a sentence; the spec and the fork take the same words. */
static void timeout_values_steps(void)
{
	struct err e = {0};
	int64_t s, keep;
	enum timeout_action a;
	make_sandbox("tv");
	const char *bad[] = {"1e99", "-1", "abc", "3 explode", "", "99999999999", "3 suspend x"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		memset(&e, 0, sizeof(e));
		CHECK(ops_sandbox_set_timeout(root, "tv", bad[i], &e) == -EINVAL);
		CHECK_MSG(e.msg[0] != '\0', "timeout '%s' is refused with a sentence", bad[i]);
	}
	CHECK(ops_timeout_parse("42 suspend", &s, &a, &e) == 0 && s == 42 && a == TIMEOUT_SUSPEND);
	CHECK(ops_timeout_parse("7", &s, &a, &e) == 0 && s == 7 && a == TIMEOUT_TERMINATE);
	CHECK(ops_autosnap_parse("keep=3 every=2", &s, &keep, &e) == 0 && s == 2 && keep == 3);
	CHECK(ops_autosnap_parse("every=2 keep=0", &s, &keep, &e) == -EINVAL);
	CHECK(ops_autosnap_parse("keep=3", &s, &keep, &e) == -EINVAL);
	/* A created sandbox's clock stands: it shows the whole setting. */
	CHECK(ops_sandbox_set_timeout(root, "tv", "30 suspend", &e) == 0);
	CHECK(sb_get("tv").deadline_at == 0 && sb_get("tv").timeout_s == 30);
	CHECK(sb_start("tv") == 0);
	int64_t at = sb_get("tv").deadline_at;
	CHECK_MSG(at >= now_ms() + 25000, "the start set the deadline (%lld)", (long long)at);
	CHECK(ops_sandbox_set_timeout(root, "tv", "0", &e) == 0);
	CHECK(sb_get("tv").deadline_at == 0 && sb_get("tv").timeout_s == 0);
}

/* Run sandbox @id with timeout @text; note its deadline for the next life. */
static void timeout_noted(const char *id, const char *text)
{
	struct err e = {0};
	char at[32];
	if (!run_sandbox(id))
		return;
	CHECK(ops_sandbox_set_timeout(root, id, text, &e) == 0);
	xsnprintf(at, sizeof(at), "%lld", (long long)sb_get(id).deadline_at);
	note_put("deadline", at);
}

/* The deadline is in the registry: a restart keeps one not yet due... */
static void timeout_kept_before(void)
{
	timeout_noted("tk", "3600");
}

static void timeout_kept_after(void)
{
	char at[32];
	note_get("deadline", at, sizeof(at));
	CHECK_MSG(sb_get("tk").deadline_at == atoll(at), "the deadline %lld is kept (%s)",
		  (long long)sb_get("tk").deadline_at, at);
	CHECK_SB("tk", SB_RUNNING);
}

/* ...and fires one that passed while the daemon was down. */
static void timeout_restart_before(void)
{
	timeout_noted("tr", "3600 suspend");
}

static void timeout_restart_after(void)
{
	sb_wait_state("tr", SB_SUSPENDED);
	CHECK(journal_has("events.jsonl", "\"status\":\"suspending\",\"reason\":\"timeout\""));
	/* Suspended, the clock stands; the setting stays for the resume. */
	CHECK(sb_get("tr").timeout_s == 3600 && sb_get("tr").timeout_action == TIMEOUT_SUSPEND);
}

static void timeout_restart(void)
{
	scenario("timeout-kept");
	life(timeout_kept_before);
	life(timeout_kept_after);
	scenario_end();
	scenario("timeout-restart");
	life(timeout_restart_before);
	/* As though the daemon was down past the deadline. */
	registry_exec("UPDATE sandboxes SET deadline_at = 1 WHERE id = 'tr'");
	life(timeout_restart_after);
	scenario_end();
}

/* --- published ports (ops/ops_ports.c, runtime/net/forward.h) ------------ */

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

/* A connection to 127.0.0.1:@host carries a line there and back. */
static bool echoes(unsigned host)
{
	int fd = t_tcp_connect((uint16_t)host);
	bool ok = fd >= 0 && t_round_trip(fd, "ping\n");
	if (fd >= 0)
		close(fd);
	return ok;
}

static int ports_line(const char *id, const char *fmt, unsigned a, unsigned b)
{
	struct err e = {0};
	char line[64];
	xsnprintf(line, sizeof(line), fmt, a, b);
	return ops_sandbox_ports(root, id, line, &e);
}

/* The metrics as @who reads them contain @part. */
static bool metrics_have_as(const struct caller *who, const char *part)
{
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	return ops_metrics_text(who, &out) == 0 && strstr(strbuf_str(&out), part) != NULL;
}

static bool metrics_have(const char *part)
{
	return metrics_have_as(root, part);
}

/* Sandbox @id's info.json lists one port: @port on 127.0.0.1:@host, reachable or not. */
static bool info_port_is(const char *id, unsigned port, unsigned host, bool reachable)
{
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	struct sandbox sb = sb_get(id);
	char want[32];
	xsnprintf(want, sizeof(want), "127.0.0.1:%u", host);
	cJSON *info = ops_sandbox_info(&sb, &out) == 0 ? cJSON_Parse(strbuf_str(&out)) : NULL;
	cJSON *ports = cJSON_GetObjectItemCaseSensitive(info, "ports");
	cJSON *p = cJSON_GetArrayItem(ports, 0);
	cJSON *h = cJSON_GetObjectItemCaseSensitive(p, "host");
	bool ok = cJSON_GetArraySize(ports) == 1 &&
		  cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(p, "port")) == port &&
		  cJSON_IsString(h) && !strcmp(h->valuestring, want) &&
		  cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "reachable")) == reachable;
	cJSON_Delete(info);
	return ok;
}

/* Publish, the refusals, close; a fork's own host port; suspend keeps it; terminate and rmdir
 * close. */
static void ports_steps(void)
{
	struct err e = {0};
	struct t_echo echo;
	char snap[ID_MAX], fork_id[ID_MAX], text[128];
	forward_set_resolver(t_resolve_loopback);
	if (!CHECK(t_echo_start(&echo, 0) == 0) || !run_sandbox("p"))
		return;
	CHECK(ops_sandbox_ports(root, "p", "http", &e) == -EINVAL &&
	      strstr(e.msg, "PORT HOSTPORT"));
	CHECK(ports_line("p", "%u", echo.port, 0) == 0);
	unsigned host = host_port_of("p", echo.port);
	CHECK(host != 0 && echoes(host));
	CHECK(ports_line("p", "%u", echo.port, 0) == -EEXIST);
	CHECK(ports_line("p", "%u %u", 1, host) == -EADDRINUSE); /* taken: by p's own */
	CHECK(host_port_of("p", 1) == 0);
	uint16_t chosen = 0;
	int fd = t_tcp_bound(false, &chosen); /* a free port, then let go */
	CHECK(fd >= 0);
	close(fd);
	CHECK(ports_line("p", "%u %u", 2, chosen) == 0 && host_port_of("p", 2) == chosen);
	CHECK(ports_line("p", "close %u", 2, 0) == 0 && host_port_of("p", 2) == 0);
	CHECK(ports_line("p", "close %u", 2, 0) == -ENOENT);
	CHECK(t_tcp_connect(chosen) < 0 && errno == ECONNREFUSED);
	CHECK(info_port_is("p", echo.port, host, true));
	CHECK(metrics_have("snapfs_sandbox_forward_connections_total{sandbox=\"p\"} 1\n"));
	CHECK(
	    metrics_have("snapfs_sandbox_forward_bytes_total{sandbox=\"p\",direction=\"in\"} 5\n"));
	/* Another user reads the families, not root's sandbox in them (security-3 N5). */
	const struct caller other = {.uid = 4343, .gid = 4343};
	CHECK(metrics_have_as(&other, "# TYPE snapfs_sandbox_forward_connections_total counter\n"));
	CHECK(!metrics_have_as(&other, "sandbox=\"p\""));
	CHECK(!metrics_have_as(&other, "snapfs_sandboxes{state=\"running\"} 1"));
	CHECK(metrics_have_as(&other, "snapfs_sandboxes{state=\"running\"} 0\n"));

	/* A fork publishes its snapshot's ports on host ports of its own; the source keeps its. */
	CHECK(sb_snapshot("p", snap) == 0);
	xsnprintf(text, sizeof(text), "%u 0\n", echo.port);
	CHECK_STR(snap_get(snap).ports, text);
	CHECK(snap_fork(snap, fork_id) == 0);
	unsigned fork_host = host_port_of(fork_id, echo.port);
	CHECK(fork_host != 0 && fork_host != host && echoes(fork_host));
	CHECK(echoes(host));
	/* A snapshot naming a host port (a manifest from the bucket may): the fork binds its own.
	 */
	struct snapshot named = snap_get(snap);
	char fork2[ID_MAX];
	xsnprintf(named.ports, sizeof(named.ports), "%u 1023\n", echo.port);
	CHECK(registry_snapshot_update(ops_registry(), &named) == 0);
	CHECK(snap_fork(snap, fork2) == 0);
	unsigned fork2_host = host_port_of(fork2, echo.port);
	CHECK_MSG(fork2_host != 0 && fork2_host != 1023, "the fork took host port %u", fork2_host);
	CHECK(sb_terminate(fork2) == 0);
	/* Suspended, the port stays (its connections go where the resolver says); resumed, it
	 * serves. */
	CHECK(sb_suspend(fork_id) == 0 && host_port_of(fork_id, echo.port) == fork_host);
	CHECK(sb_resume(fork_id) == 0 && echoes(fork_host));
	/* No network to reach: accepted and closed at once. */
	forward_set_resolver(t_resolve_none);
	fd = t_tcp_connect((uint16_t)fork_host);
	CHECK(fd >= 0 && t_read_all(fd, text, sizeof(text)) == 0);
	if (fd >= 0)
		close(fd);
	CHECK(info_port_is(fork_id, echo.port, fork_host, false));
	forward_set_resolver(t_resolve_loopback);
	/* Terminate closes it at once, and no port can be published any more. */
	CHECK(sb_terminate(fork_id) == 0);
	CHECK(host_port_of(fork_id, echo.port) == 0);
	CHECK(t_tcp_connect((uint16_t)fork_host) < 0 && errno == ECONNREFUSED);
	CHECK(ports_line(fork_id, "%u", echo.port, 0) == -EBUSY);
	/* A spec's ports are published as it is made. */
	struct sandbox_spec spec = {.image = IMAGE};
	char spec_id[ID_MAX];
	xsnprintf(spec.ports, sizeof(spec.ports), "%u 0\n", echo.port);
	CHECK(OP_RUN(ops_sandbox_new(root, &spec, spec_id, OP), NULL, 0) == 0);
	unsigned spec_host = host_port_of(spec_id, echo.port);
	CHECK(spec_host != 0 && echoes(spec_host));
	CHECK(sb_terminate(spec_id) == 0);
	/* A created sandbox publishes too; rmdir closes it. */
	make_sandbox("c");
	CHECK(ports_line("c", "%u", 7, 0) == 0);
	unsigned created_host = host_port_of("c", 7);
	CHECK(created_host != 0 && ops_sandbox_remove(root, "c", &e) == 0);
	CHECK(t_tcp_connect((uint16_t)created_host) < 0 && errno == ECONNREFUSED);
	xsnprintf(text, sizeof(text), "%u", echo.port);
	note_put("ports-echo", text);
	xsnprintf(text, sizeof(text), "%u", host);
	note_put("ports-host", text);
	t_echo_stop(&echo);
}

/* The next life: the running sandbox's port is published again on its host port. */
static void ports_restart_steps(void)
{
	struct t_echo echo;
	char text[32];
	forward_set_resolver(t_resolve_loopback);
	note_get("ports-echo", text, sizeof(text));
	uint16_t port = (uint16_t)atoi(text);
	note_get("ports-host", text, sizeof(text));
	unsigned host = (unsigned)atoi(text);
	if (!CHECK(t_echo_start(&echo, port) == 0))
		return;
	CHECK_SB("p", SB_RUNNING);
	CHECK(host != 0 && host_port_of("p", port) == host);
	CHECK(echoes(host));
	CHECK(sb_terminate("p") == 0);
	CHECK(t_tcp_connect((uint16_t)host) < 0 && errno == ECONNREFUSED);
	t_echo_stop(&echo);
}

/*
 * count=N (ops/ops_fanout.c): N forks from one call, their ids a line
 * each; the third of three restores failing leaves two running, fails the
 * call with its errno and sums it up in `errors`; a count out of 1..100 is
 * EINVAL before anything is made.
 */
static void fanout_steps(void)
{
	char snap[ID_MAX], ids[RESULT_MAX];
	struct err e = {0};
	struct fork_opts opts = {0};
	_cleanup_strbuf_ struct strbuf made = STRBUF_INIT;
	CHECK(run_sandbox("fan"));
	CHECK(sb_snapshot("fan", snap) == 0);
	CHECK(ops_fork_count_parse("0", &opts.count, &e) == -EINVAL);
	CHECK(ops_fork_count_parse("101", &opts.count, &e) == -EINVAL);
	CHECK(ops_fork_count_parse("4x", &opts.count, &e) == -EINVAL);
	CHECK(ops_fork_count_parse("-1", &opts.count, &e) == -EINVAL);
	CHECK(ops_fork_count_parse("100", &opts.count, &e) == 0 && opts.count == 100);
	opts.count = 101;
	CHECK(ops_snapshot_forks(root, snap, &opts, &made, op_done, NULL, &e) == -EINVAL);
	CHECK(made.len == 0);

	opts.count = 4;
	CHECK(OP_RUN(ops_snapshot_forks(root, snap, &opts, &made, OP), NULL, 0) == 0);
	xsnprintf(ids, sizeof(ids), "%s", strbuf_str(&made));
	int n = 0;
	for (char *save = NULL, *id = strtok_r(ids, "\n", &save); id;
	     id = strtok_r(NULL, "\n", &save)) {
		CHECK_SB(id, SB_RUNNING);
		CHECK_STR(sb_get(id).parent_snapshot, snap);
		n++;
	}
	CHECK(n == 4);

	strbuf_reset(&made);
	opts.count = 3;
	fake_set("FAKE_RUNSC_FAIL=restore FAKE_RUNSC_FAIL_AFTER=2");
	int restores = fake_calls("restore");
	CHECK(OP_RUN(ops_snapshot_forks(root, snap, &opts, &made, OP), NULL, 0) == -EIO);
	fake_set("");
	CHECK(fake_calls("restore") == restores + 3);
	xsnprintf(ids, sizeof(ids), "%s", strbuf_str(&made));
	int running = 0, failed = 0;
	n = 0;
	for (char *save = NULL, *id = strtok_r(ids, "\n", &save); id;
	     id = strtok_r(NULL, "\n", &save)) {
		enum sandbox_state st = sb_get(id).state;
		running += st == SB_RUNNING;
		failed += st == SB_FAILED;
		n++;
	}
	CHECK(n == 3 && running == 2 && failed == 1);
	char line[128];
	xsnprintf(line, sizeof(line), "1 of 3 forks of snapshot %s failed: sbx-", snap);
	CHECK(journal_has("errors.jsonl", line));
	CHECK(journal_has("errors.jsonl", "runsc restore failed"));

	/* Not in the cache any more: the four forks materialize it once and share it. */
	char dir[PATH_MAX], line2[128];
	xsnprintf(dir, sizeof(dir), "%s/cache/%s", state, snap);
	CHECK(rm_rf(dir) == 0);
	strbuf_reset(&made);
	opts.count = 4;
	CHECK(OP_RUN(ops_snapshot_forks(root, snap, &opts, &made, OP), NULL, 0) == 0);
	xsnprintf(line2, sizeof(line2), "materialized snapshot %s:", snap);
	CHECK_MSG(log_count(line2) == 1, "%d materializes of %s", log_count(line2), snap);

	/* Its packs gone: the four forks' one materialization fails, and they all fail with it. */
	char packs[PATH_MAX];
	xsnprintf(packs, sizeof(packs), "%s/store/packs", state);
	CHECK(rm_rf(dir) == 0 && rm_rf(packs) == 0);
	strbuf_reset(&made);
	int tries = log_count("cannot materialize snapshot");
	CHECK(OP_RUN(ops_snapshot_forks(root, snap, &opts, &made, OP), NULL, 0) < 0);
	CHECK_MSG(log_count("cannot materialize snapshot") - tries == 1,
		  "%d materializations failed", log_count("cannot materialize snapshot") - tries);
}

/* --- callers: a non-root owner (ops/access.h) ------------------------- */

/* A local user in the group this life's --allow-group names (access_init()). */
static const struct caller user = {.uid = 4242, .gid = 4242};

/*
 * `set` of a field and `remove`, on a sandbox that is not there and on one
 * another owns: ENOENT and the same sentence for both (a name tells the
 * user nothing more than that it is taken), and the foreign one untouched.
 */
static void foreign_steps(void)
{
	struct err e = {0};
	struct sandbox sb;
	CHECK(access_init("4242", &e) == 0);
	CHECK(ops_sandbox_create(root, "roots", &e) == 0);
	CHECK(ops_sandbox_set(root, "ghost", SB_FIELD_ENTRYPOINT, "sleep 1", &e) == -ENOENT);
	CHECK_STR(e.msg, "sandbox ghost does not exist");
	CHECK(ops_sandbox_set(&user, "roots", SB_FIELD_ENTRYPOINT, "sleep 1", &e) == -ENOENT);
	CHECK_STR(e.msg, "sandbox roots does not exist");
	CHECK(ops_sandbox_set(&user, "roots", SB_FIELD_NETWORK, "egress", &e) == -ENOENT);
	CHECK(ops_sandbox_set_egress(&user, "roots", "deny 0.0.0.0/0", &e) == -ENOENT);
	CHECK_STR(e.msg, "sandbox roots does not exist");
	CHECK(ops_sandbox_remove(root, "ghost", &e) == -ENOENT);
	CHECK_STR(e.msg, "sandbox ghost does not exist");
	CHECK(ops_sandbox_remove(&user, "roots", &e) == -ENOENT);
	CHECK_STR(e.msg, "sandbox roots does not exist");
	/* Untouched: still there, still without an entrypoint or network, still removable. */
	CHECK(ops_sandbox_get(root, "roots", &sb) == 0 && sb.entrypoint[0] == '\0' &&
	      sb.network == SB_NET_NONE && sb.egress[0] == '\0');
	CHECK(ops_sandbox_remove(root, "roots", &e) == 0);
	/* The user's own: set and remove work for it. */
	CHECK(ops_sandbox_create(&user, "theirs", &e) == 0);
	CHECK(ops_sandbox_set(&user, "theirs", SB_FIELD_ENTRYPOINT, "sleep 1", &e) == 0);
	CHECK(ops_sandbox_remove(&user, "theirs", &e) == 0);
}

/* Write @value to /proc/sys/net/ipv4/ip_unprivileged_port_start of this thread's namespace. */
static bool unpriv_start(const char *value)
{
	int fd = open("/proc/sys/net/ipv4/ip_unprivileged_port_start", O_WRONLY | O_CLOEXEC);
	bool ok = fd >= 0 && write(fd, value, strlen(value)) == (ssize_t)strlen(value);
	if (fd >= 0)
		close(fd);
	return ok;
}

/*
 * The host-port rule follows the kernel's ip_unprivileged_port_start in the
 * daemon's namespace, not a fixed 1024. This thread moves to a network
 * namespace of its own (the daemon's other threads stay), with its lo up,
 * where the test may set the line: nothing of the host's is touched.
 */
static void ports_unprivileged_steps(void)
{
	struct err e = {0};
	struct ifreq lo = {.ifr_name = "lo"};
	int s = -1;
	if (unshare(CLONE_NEWNET) < 0) {
		SKIP("no network namespace of its own (%s): needs root", strerror(errno));
		return;
	}
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CHECK(s >= 0 && ioctl(s, SIOCGIFFLAGS, &lo) == 0);
	lo.ifr_flags |= IFF_UP;
	CHECK(ioctl(s, SIOCSIFFLAGS, &lo) == 0); /* the new namespace's own lo */
	close(s);
	CHECK(access_init("4242", &e) == 0);
	CHECK(ops_sandbox_create(&user, "u", &e) == 0);
	if (!CHECK(unpriv_start("2000")))
		return;
	CHECK(ops_sandbox_ports(&user, "u", "80 1500", &e) == -EACCES);
	CHECK(strstr(e.msg, "below 2000") != NULL);
	CHECK(ops_sandbox_ports(root, "u", "81 1500", &e) == 0); /* root may */
	CHECK(ops_sandbox_ports(&user, "u", "82 2000", &e) == 0);
	CHECK(unpriv_start("500"));
	CHECK(ops_sandbox_ports(&user, "u", "83 600", &e) == 0);
	CHECK(ops_sandbox_ports(&user, "u", "84 499", &e) == -EACCES);
	CHECK(strstr(e.msg, "below 500") != NULL);
}

/* --- what a user other than root may ask for (ops/ops_quota.c) ------- */

/* Set field @field of the user's sandbox @id to @value: its errno, its sentence in @e. */
static int user_set(const char *id, enum sandbox_field field, const char *value, struct err *e)
{
	*e = (struct err){0};
	return ops_sandbox_set(&user, id, field, value, e);
}

/* A running sandbox @id of the user's, and its snapshot in @snap. */
static bool user_sandbox_snapshot(const char *id, char snap[ID_MAX])
{
	struct err e = {0};
	return CHECK(ops_sandbox_create(&user, id, &e) == 0) &&
	       CHECK(user_set(id, SB_FIELD_IMAGE, IMAGE, &e) == 0) &&
	       CHECK(user_set(id, SB_FIELD_ENTRYPOINT, "sleep 1000", &e) == 0) &&
	       CHECK(OP_RUN(ops_sandbox_start(&user, id, OP), NULL, 0) == 0) &&
	       CHECK(OP_RUN(ops_sandbox_snapshot(&user, id, NULL, snap, OP), NULL, 0) == 0);
}

/*
 * --default-memory 256M, --max-memory 1G (cpus 1 and 2, pids 128 and 512):
 * the user stays within them in every entry (the files, a spec, a fork's
 * words) and may not write 0; root may do both. A refusal is EPERM and
 * changes nothing.
 */
static void quota_limits_steps(void)
{
	struct err e = {0};
	char snap[ID_MAX], id[ID_MAX];
	CHECK(access_init("4242", &e) == 0);
	CHECK(ops_sandbox_create(&user, "ql", &e) == 0);
	CHECK(user_set("ql", SB_FIELD_MEMORY, "0", &e) == -EPERM);
	CHECK(strstr(e.msg, "memory of sandbox ql may not be 0 (unlimited)") != NULL);
	CHECK(sb_get("ql").res.memory_bytes == 256 << 20); /* unchanged */
	CHECK(user_set("ql", SB_FIELD_MEMORY, "1024T", &e) == -EPERM);
	CHECK(strstr(e.msg, "up to 1073741824 (--max-memory)") != NULL);
	CHECK(user_set("ql", SB_FIELD_MEMORY, "1025M", &e) == -EPERM);
	CHECK(sb_get("ql").res.memory_bytes == 256 << 20);
	CHECK(user_set("ql", SB_FIELD_MEMORY, "1G", &e) == 0);
	CHECK(sb_get("ql").res.memory_bytes == 1 << 30);
	CHECK(user_set("ql", SB_FIELD_CPUS, "0", &e) == -EPERM);
	CHECK(user_set("ql", SB_FIELD_CPUS, "2.5", &e) == -EPERM);
	CHECK(strstr(e.msg, "--max-cpus") != NULL);
	CHECK(user_set("ql", SB_FIELD_CPUS, "1.5", &e) == 0);
	CHECK(user_set("ql", SB_FIELD_PIDS, "0", &e) == -EPERM);
	CHECK(user_set("ql", SB_FIELD_PIDS, "513", &e) == -EPERM);
	CHECK(user_set("ql", SB_FIELD_PIDS, "512", &e) == 0);
	CHECK(sb_get("ql").res.cpu_milli == 1500 && sb_get("ql").res.pids == 512);
	/* Root lifts a limit of the user's sandbox; the user's other fields stay its own. */
	CHECK(ops_sandbox_set(root, "ql", SB_FIELD_MEMORY, "0", &e) == 0);
	CHECK(sb_get("ql").res.memory_bytes == 0);
	CHECK(user_set("ql", SB_FIELD_CPUS, "1", &e) == 0);
	CHECK(ops_sandbox_set(root, "ql", SB_FIELD_CPUS, "1024", &e) == 0);

	/* A spec: the keys it names are asked for; none made on a refusal. */
	struct sandbox_spec spec = {.image = IMAGE, .res = {0, RES_UNSET, RES_UNSET}};
	e = (struct err){0};
	CHECK(ops_sandbox_new(&user, &spec, id, NULL, NULL, &e) == -EPERM);
	CHECK(strstr(e.msg, "memory of the sandbox spec may not be 0") != NULL);
	spec.res = (struct resources){RES_UNSET, 4000, RES_UNSET};
	CHECK(ops_sandbox_new(&user, &spec, id, NULL, NULL, &e) == -EPERM);
	spec.res = (struct resources){512 << 20, 2000, 64};
	CHECK(OP_RUN(ops_sandbox_new(&user, &spec, id, OP), NULL, 0) == 0);
	CHECK(sb_get(id).res.memory_bytes == 512 << 20 && sb_get(id).owner_uid == user.uid);
	spec.res = (struct resources){0, 0, 0};
	CHECK(OP_RUN(ops_sandbox_new(root, &spec, id, OP), NULL, 0) == 0);
	CHECK(sb_get(id).res.memory_bytes == 0 && sb_get(id).res.cpu_milli == 0);

	/* A fork's words: raised within the bound, never to 0 or past it, but by root. */
	if (!user_sandbox_snapshot("qf", snap))
		return;
	struct fork_opts big = {.raise = {1LL << 50, RES_UNSET, RES_UNSET}};
	e = (struct err){0};
	CHECK(ops_snapshot_fork(&user, snap, &big, id, NULL, NULL, &e) == -EPERM);
	CHECK(strstr(e.msg, "memory of the fork of snap-") && strstr(e.msg, "--max-memory"));
	struct fork_opts unlimited = {.raise = {0, RES_UNSET, RES_UNSET}};
	CHECK(ops_snapshot_fork(&user, snap, &unlimited, id, NULL, NULL, &e) == -EPERM);
	struct fork_opts cpus = {.raise = {RES_UNSET, 3000, RES_UNSET}};
	CHECK(ops_snapshot_fork(&user, snap, &cpus, id, NULL, NULL, &e) == -EPERM);
	struct fork_opts within = {.raise = {1 << 30, 2000, RES_UNSET}};
	CHECK(OP_RUN(ops_snapshot_fork(&user, snap, &within, id, OP), NULL, 0) == 0);
	CHECK(sb_get(id).res.memory_bytes == 1 << 30 && sb_get(id).res.cpu_milli == 2000);
	CHECK(OP_RUN(ops_snapshot_fork(root, snap, &unlimited, id, OP), NULL, 0) == 0);
	CHECK(sb_get(id).res.memory_bytes == 0);
	/* A snapshot root lifted: the user's fork keeps its 0, asked for by nobody. */
	CHECK(ops_sandbox_create(&user, "qz", &e) == 0);
	CHECK(ops_sandbox_set(root, "qz", SB_FIELD_MEMORY, "0", &e) == 0);
	CHECK(user_set("qz", SB_FIELD_IMAGE, IMAGE, &e) == 0);
	CHECK(user_set("qz", SB_FIELD_ENTRYPOINT, "sleep 1000", &e) == 0);
	CHECK(OP_RUN(ops_sandbox_start(&user, "qz", OP), NULL, 0) == 0);
	CHECK(OP_RUN(ops_sandbox_snapshot(&user, "qz", NULL, snap, OP), NULL, 0) == 0);
	CHECK(OP_RUN(ops_snapshot_fork(&user, snap, NULL, id, OP), NULL, 0) == 0);
	CHECK(sb_get(id).res.memory_bytes == 0);
}

/* The number of sandboxes the user owns. */
static int owned_cb(const struct sandbox *sb, void *arg)
{
	int *n = arg;
	*n += sb->owner_uid == user.uid;
	return 0;
}

static int user_owns(void)
{
	int n = 0;
	ops_sandboxes_each(root, owned_cb, &n);
	return n;
}

static int user_ports(const char *id, const char *line, struct err *e)
{
	*e = (struct err){0};
	return ops_sandbox_ports(&user, id, line, e);
}

/*
 * --max-sandboxes-per-user 4, --max-ports-per-user 3: the user's (N+1)th
 * sandbox, by mkdir, a spec or a fork (count=N whole), and its (N+1)th
 * port, by a write, a spec or a fork, are EDQUOT and make nothing; root is
 * not capped; a removed sandbox and a closed port make room.
 */
static void quota_caps_steps(void)
{
	struct err e = {0};
	char snap[ID_MAX], id[ID_MAX];
	_cleanup_strbuf_ struct strbuf made = STRBUF_INIT;
	CHECK(access_init("4242", &e) == 0);
	if (!user_sandbox_snapshot("s1", snap)) /* 1 */
		return;
	struct fork_opts four = {.count = 4};
	CHECK(ops_snapshot_forks(&user, snap, &four, &made, NULL, NULL, &e) == -EDQUOT);
	CHECK(strstr(e.msg, "uid 4242 owns 1 sandboxes and asks for 4 more, past the 4") &&
	      strstr(e.msg, "--max-sandboxes-per-user"));
	CHECK(made.len == 0 && user_owns() == 1);
	struct fork_opts two = {.count = 2};
	CHECK(OP_RUN(ops_snapshot_forks(&user, snap, &two, &made, OP), NULL, 0) == 0); /* 3 */
	CHECK(ops_sandbox_create(&user, "s4", &e) == 0);			       /* 4 */
	e = (struct err){0};
	CHECK(ops_sandbox_create(&user, "s5", &e) == -EDQUOT);
	CHECK(ops_snapshot_fork(&user, snap, NULL, id, NULL, NULL, &e) == -EDQUOT);
	struct sandbox_spec spec = {.image = IMAGE, .res = {RES_UNSET, RES_UNSET, RES_UNSET}};
	CHECK(ops_sandbox_new(&user, &spec, id, NULL, NULL, &e) == -EDQUOT);
	CHECK(user_owns() == 4);
	CHECK(ops_sandbox_create(root, "r1", &e) == 0); /* root: no cap */
	CHECK(OP_RUN(ops_snapshot_forks(root, snap, &two, &made, OP), NULL, 0) == 0);
	CHECK(ops_sandbox_remove(&user, "s4", &e) == 0);
	CHECK(ops_sandbox_create(&user, "s5", &e) == 0); /* 4 again */

	/* Ports: three in all over the user's sandboxes. */
	CHECK(user_ports("s5", "7001", &e) == 0 && user_ports("s5", "7002", &e) == 0);
	CHECK(user_ports("s1", "7003", &e) == 0);
	CHECK(user_ports("s1", "7004", &e) == -EDQUOT);
	CHECK(strstr(e.msg, "uid 4242 publishes 3 ports and asks for 1 more, past the 3") &&
	      strstr(e.msg, "--max-ports-per-user"));
	CHECK(host_port_of("s1", 7004) == 0);
	CHECK(ops_sandbox_ports(root, "r1", "7005", &e) == 0); /* root: no cap */
	CHECK(user_ports("s5", "close 7002", &e) == 0);
	CHECK(user_ports("s1", "7004", &e) == 0);
	/* A fork of a snapshot with ports publishes them: counted, with the sandbox. */
	char psnap[ID_MAX];
	CHECK(OP_RUN(ops_sandbox_snapshot(&user, "s1", NULL, psnap, OP), NULL, 0) == 0);
	CHECK(ops_sandbox_remove(&user, "s5", &e) == 0); /* 3 sandboxes, 2 ports (s1's) */
	e = (struct err){0};
	CHECK(ops_snapshot_fork(&user, psnap, NULL, id, NULL, NULL, &e) == -EDQUOT);
	CHECK(strstr(e.msg, "publishes 2 ports and asks for 2 more") != NULL);
	CHECK(user_owns() == 3);
	/* A spec's ports likewise. */
	xsnprintf(spec.ports, sizeof(spec.ports), "8001 0\n8002 0\n");
	CHECK(ops_sandbox_new(&user, &spec, id, NULL, NULL, &e) == -EDQUOT);
	CHECK(user_owns() == 3);
	xsnprintf(spec.ports, sizeof(spec.ports), "8001 0\n");
	CHECK(OP_RUN(ops_sandbox_new(&user, &spec, id, OP), NULL, 0) == 0);
	CHECK(host_port_of(id, 8001) != 0 && user_owns() == 4);
	/* A terminated sandbox's ports are closed and count no more; the sandbox still does. */
	CHECK(sb_terminate(id) == 0);
	CHECK(user_ports("s1", "7006", &e) == 0);
	CHECK(ops_sandbox_create(&user, "s6", &e) == -EDQUOT);
}

int main(void)
{
	if (!t_share() || !t_dir_make("test_ops") || !setup())
		return t_done() || 1;
	one_life("lifecycle", lifecycle_steps, restart_steps);
	one_life("terminate-settled", terminate_settled_steps, NULL);
	one_life("terminate-transitional", terminate_transitional_steps, NULL);
	one_life("undo", undo_steps, NULL);
	one_life("refused-job", refused_job_steps, NULL);
	one_life("refused-terminate", refused_terminate_steps, NULL);
	one_life("refused-full", refused_full_steps, NULL);
	one_life("refused-restore", refused_restore_steps, NULL);
	one_life("hold-window", hold_window_steps, NULL);
	one_life("hold-answer", hold_answer_steps, NULL);
	one_life("limits", limits_steps, NULL);
	one_life("timeout-transitional", timeout_transitional_steps, NULL);
	one_life("timeout-values", timeout_values_steps, NULL);
	one_life("timeout-suspend-fails", timeout_suspend_fails_steps, NULL);
	one_life("ports", ports_steps, ports_restart_steps);
	one_life("fanout", fanout_steps, NULL);
	one_life("foreign", foreign_steps, NULL);
	one_life("ports-unprivileged", ports_unprivileged_steps, NULL);
	quota_cfg = (struct ops_config){.default_res = {256 << 20, 1000, 128},
					.max_res = {1 << 30, 2000, 512}};
	one_life("quota-limits", quota_limits_steps, NULL);
	quota_cfg = (struct ops_config){.max_sandboxes_per_user = 4, .max_ports_per_user = 3};
	one_life("quota-caps", quota_caps_steps, NULL);
	quota_cfg = (struct ops_config){0};
	timeout_restart();
	spool_reserve();
	spool_recheck();
	for (size_t i = 0; i < ARRAY_SIZE(interruptions); i++)
		interrupted(&interruptions[i]);
	signal(SIGIO, SIG_IGN); /* a lease breaking (lease_pages()) must not end us */
	for (size_t i = 0; i < ARRAY_SIZE(phases); i++)
		killed_at(&phases[i]);
	if (t_n->failed == 0)
		rm_rf(t_base);
	else
		printf("test_ops: kept %s (each scenario's daemon.log is there)\n", t_base);
	return t_done();
}
