/*
 * test_ops_interrupted.c - reconciliation at start-up after each kind of
 * interruption: a life killed while a runsc call is blocked (each
 * transitional state), and kill -9 at each phase of a suspend and of a
 * snapshot's store with the call left running.
 *
 * The harness (lives, scenarios, the fake runsc) is tests/unit/t_ops.h.
 */
#include "tests/unit/t_ops.h"

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

int main(void)
{
	if (!t_ops_begin("test_ops_interrupted"))
		return t_done() || 1;
	for (size_t i = 0; i < ARRAY_SIZE(interruptions); i++)
		interrupted(&interruptions[i]);
	signal(SIGIO, SIG_IGN); /* a lease breaking (lease_pages()) must not end us */
	for (size_t i = 0; i < ARRAY_SIZE(phases); i++)
		killed_at(&phases[i]);
	return t_ops_done("test_ops_interrupted");
}
