/*
 * ops.h - the operations on sandboxes and snapshots: the only API the FUSE
 * layer (fs/) calls to change anything. Nothing here knows about FUSE.
 *
 * Adding an operation (git's builtin.h is the model), say `pause` on a
 * sandbox:
 *
 *   1. Declare it here: `int ops_sandbox_pause(const struct caller *who,
 *      const char *id, ops_done_fn done, void *ctx, struct err *e)`, with a
 *      comment saying what it refuses (errno and why).
 *   2. Write it in the ops file of its verb's object (ops_sandbox.c,
 *      ops_snapshot.c; a new verb family gets a new ops_<verb>.c, which the
 *      Makefile's glob builds): take the job's place first
 *      (sandbox_job_new() or op_job_new() with its JOB_* queue, ops/jobs.h),
 *      then check and move the state under the lock (sandbox_begin(),
 *      ops_internal.h), then op_job_queue(); nothing to undo on a refusal
 *      but op_job_drop().
 *   3. The job runs without the lock: it calls files below it
 *      (ops_container.c for runsc, ops_holds.c, ops_rows.c, ops_core.c),
 *      never one that calls it back (tests/check-circles.py fails on a
 *      circle; `--floors` prints each file's floor); it settles the state with
 *      sandbox_apply_if(), reports a failure with report_job_failure(), and
 *      ends with op_job_end() (ops_internal.h).
 *   4. Wire its control file in fs/sandboxes.c or fs/snapshots.c (the
 *      table of files: `.action = ops_sandbox_pause`).
 *   5. Document it: docs/control-files.md (the file, its errors, its
 *      queue in "Bounds"), docs/design.md (states), the man page in
 *      docs/man/.
 *   6. Test it: a tests/unit/test_ops_<family>.c over the harness
 *      tests/unit/t_ops.h (against tests/doubles/fake-runsc), and an
 *      integration test in tests/integration/.
 *
 * Every operation validates its input and the current state at once, under
 * the operations lock, and either refuses (a negative errno, with the
 * sentence in @e) or accepts. Accepted long work runs on job threads
 * (ops/jobs.c); when it ends, the job calls the caller's completion
 * exactly once:
 *
 *     done(ctx, rc, result, result_len)
 *
 * rc is 0 or a negative errno; result is operation-specific text (exec: the
 * combined output then "exit N\n"; wait: the status word and "\n") or NULL.
 * A NULL @done means "async": nobody is told. @done may run on the calling
 * thread before the operation returns (wait on a settled state, say), or on
 * any job thread; it must not call back into ops_* functions that take the
 * lock (reading the registry is fine).
 *
 * Who: every operation on a sandbox or snapshot names its caller (@who,
 * the credentials of the request; &access_root for the daemon itself) and
 * refuses one that may not see the object as if it did not exist (ENOENT);
 * creating needs access_check_create() (EACCES). What is created belongs
 * to @who (ops/access.h).
 *
 * Ids handed back through @id_out (snapshot, fork, new) are valid as soon
 * as the operation returns 0, before the work completes, so a control file
 * can be read for its id straight after an async write.
 *
 * Failure reporting: ops functions fill @e but write no logs for refusals.
 * The caller reports every refused or failed request with
 * ops_report_error(), which appends to the `errors` journal and, for a
 * sandbox, stores the sentence as its `error`. Failures of accepted work are
 * reported by the job itself.
 *
 * Ownership: the ops layer owns the registry, store, images and runsc
 * driver it opens in ops_open(); the accessors lend them to readers for the
 * daemon's lifetime.
 */
#ifndef SNAPFS_OPS_H
#define SNAPFS_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "backend/registry/registry.h"
#include "lib/strbuf.h"
#include "lib/util.h"
#include "ops/access.h"

struct logfile;

struct store;
struct images;
struct runsc;
struct logfile;

struct ops_config {
	const char *state_dir;	 /* --state */
	const char *images_dir;	 /* --images */
	const char *store_url;	 /* --store, NULL for <state>/store */
	const char *runsc_bin;	 /* --runsc, NULL for "runsc" on PATH */
	int64_t cache_max_bytes; /* --cache-max, 0 for a quarter of the disk (runtime/cache.h) */
	/*
	 * --gc-grace (backend/store/store_gc.c); -1: 0 for the default store, which
	 * only this daemon writes, and OPS_SHARED_GRACE_MS for a --store named,
	 * which other hosts may share.
	 */
	int64_t gc_grace_ms;
	/*
	 * --spool: checkpoints are written into a directory of this daemon's in
	 * it (made exclusively, random name, 0700, emptied at start-up:
	 * runtime/spool.h), e.g. on a tmpfs; NULL for <state>/spool.
	 */
	const char *spool_parent;
	/* --allow-group: who besides root may create sandboxes; NULL: nobody (ops/access.h) */
	const char *allow_group;
	/* --journal-max: bytes per generation of events.jsonl and errors.jsonl; 0 for the default.
	 */
	int64_t journal_max_bytes;
	int64_t runsc_timeout_ms;    /* --runsc-timeout; 0: RUNSC_TIMEOUT_DEFAULT_MS
					(runtime/runsc/runsc.h) */
	int64_t exec_timeout_ms;     /* --exec-timeout; 0: RUNSC_EXEC_TIMEOUT_DEFAULT_MS */
	const char *cuda_checkpoint; /* --cuda-checkpoint; NULL: cuda-checkpoint on PATH, if any */
	const char *agent; /* --agent; NULL: beside the daemon, else SNAPFS_AGENT_DEFAULT */
	/*
	 * The most ops_open() waits for runsc calls a killed daemon left running
	 * before it kills them; 0: until each one's own deadline.
	 */
	int64_t leftover_wait_ms;
	/*
	 * --cgroup-parent: each sandbox's cgroup is <this>/<container id>, never
	 * the daemon's (runtime/runsc/cgroup.h); NULL for CGROUP_PARENT_DEFAULT.
	 */
	const char *cgroup_parent;
	/* --net-pool: the addresses of egress sandboxes, a /30 each (runtime/net/net.h); NULL:
	 * default.
	 */
	const char *net_pool;
	/* --net-resolv: the resolv.conf egress sandboxes get; NULL: /etc/resolv.conf. */
	const char *net_resolv;
	/* --warm-max: all warm pools' members, a count ("16") or their memory ("8G"); NULL: 16. */
	const char *warm_max;
	/*
	 * --default-memory, --default-cpus, --default-pids: the limits of a
	 * sandbox that names none (lib/size.h; 0 in a field: unlimited). main.c
	 * starts from OPS_DEFAULT_*; a zeroed config (the unit tests) is unlimited.
	 */
	struct resources default_res;
	/*
	 * --max-memory, --max-cpus, --max-pids: the most a caller who is not
	 * root may ask for in a `memory`, `cpus` or `pids` file, a spec or a
	 * fork's words; 0 (unlimited) is root's alone (ops/ops_quota.c).
	 * 0 in a field: no bound. main.c starts from default_res; ops_open()
	 * refuses a default above its bound. A zeroed config has none.
	 */
	struct resources max_res;
	/*
	 * --max-sandboxes-per-user, --max-ports-per-user: the most sandboxes a
	 * user who is not root owns (whatever their state, until removed), and
	 * the most ports its live sandboxes publish; 0: no cap.
	 */
	unsigned max_sandboxes_per_user;
	unsigned max_ports_per_user;
	/* --default-timeout: the timeout of a sandbox whose spec names none; 0 s: none */
	int64_t default_timeout_s;
	enum timeout_action default_timeout_action;
	/* --publish-address: where published ports listen (runtime/net/forward.h); NULL: 127.0.0.1
	 */
	const char *publish_address;
};
#define OPS_SHARED_GRACE_MS (3600 * 1000)
/* The embedded defaults of --default-memory, --default-cpus, --default-pids (docs/limits.md). */
#define OPS_DEFAULT_MEMORY "2G"
#define OPS_DEFAULT_CPUS "2"
#define OPS_DEFAULT_PIDS "1024"
/* The embedded defaults of --max-sandboxes-per-user, --max-ports-per-user (docs/limits.md). */
#define OPS_DEFAULT_MAX_SANDBOXES_PER_USER 64
#define OPS_DEFAULT_MAX_PORTS_PER_USER 64

/*
 * Take the state directory's lock, open the registry, store, images and
 * runsc driver, wait for the runsc calls a killed predecessor left running
 * (cfg->leftover_wait_ms), and reconcile the registry with runsc and the
 * store:
 * snapshots left pending or in_progress become `completed` if their
 * manifest is whole, stay `in_progress` if their checkpoint is whole in the
 * spool (ops_start() stores it again), `failed` otherwise (their data is
 * removed); a sandbox
 * the registry calls running whose container is gone becomes `failed`; an
 * interrupted suspend ends `suspended` (stored, or once its whole
 * checkpoint is), running (never stopped, or restored from its spool) or
 * `failed`; an interrupted resume ends `suspended`. Starts no
 * thread, so the daemon may fork (daemonize) after it.
 */
int ops_open(const struct ops_config *cfg, struct err *e);
/* Start the job threads and the monitor; queue the stores ops_open() left to finish. */
int ops_start(struct err *e);
/*
 * Stop taking work, let running jobs finish (exec commands still running
 * are abandoned: their completions are dropped), stop the threads, close
 * everything. Sandboxes keep running.
 */
void ops_shutdown(void);

/* The registry, for tests that stage rows the way a crash leaves them. */
struct registry *ops_registry(void);
struct images *ops_images(void);

typedef void (*ops_done_fn)(void *ctx, int rc, const char *result, size_t result_len);

/* --- what the user asks for ------------------------------------------ */

/* A sandbox spec as written to sandboxes/new or assembled from the per-file settings. */
#define OPS_DEFAULT_ENTRYPOINT "while :; do sleep 3600; done"

struct sandbox_spec {
	char image[IMAGE_NAME_MAX];
	char entrypoint[ENTRYPOINT_MAX];
	char env[ENV_MAX];
	bool gpu;
	/* memory, cpus, pids: RES_UNSET in a field not given (the daemon's default applies) */
	struct resources res;
	/* `timeout` (ops_timeout_parse()); unset: --default-timeout */
	bool timeout_set;
	int64_t timeout_s;
	enum timeout_action timeout_action;
	/* `ports`: published when it is made, on host ports the kernel picks (lib/ports.h record)
	 */
	char ports[PORTS_TEXT_MAX];
	/* `network`: none (the default) or egress; `egress`: its rules' lines (runtime/net/net.h)
	 */
	enum sandbox_network network;
	char egress[SB_EGRESS_MAX];
};

/*
 * Parse a spec: a JSON object {"image":…, "entrypoint":…, "env":{K:V} or
 * ["K=V",…], "gpu":0|1|true|false}, or key=value lines (image=, entrypoint=,
 * env=K=V repeated, gpu=), each with memory, cpus and pids (lib/size.h; a
 * JSON number or string), timeout, ports ("8080 9090", or a JSON array
 * of numbers), network (none|egress) and egress (a rule a line, repeated;
 * in JSON an array of them). Unknown keys and malformed values: -EINVAL.
 * Missing image: -EINVAL. An empty entrypoint means OPS_DEFAULT_ENTRYPOINT.
 * Lives in ops/spec.c (pure: unit-tested).
 */
int spec_parse(const char *text, size_t len, struct sandbox_spec *out, struct err *e);

/* mkdir sandboxes/<name>: a sandbox in state `created`. -EINVAL bad name, -EEXIST taken. */
int ops_sandbox_create(const struct caller *who, const char *name, struct err *e);

/* sandboxes/new: create with a generated id and start it. */
int ops_sandbox_new(const struct caller *who, const struct sandbox_spec *spec, char id_out[ID_MAX],
		    ops_done_fn done, void *ctx, struct err *e);

enum sandbox_field {
	SB_FIELD_IMAGE,
	SB_FIELD_ENTRYPOINT,
	SB_FIELD_ENV,
	SB_FIELD_GPU,
	SB_FIELD_MEMORY, /* the limits (lib/size.h): -EINVAL where runsc cannot enforce one */
	SB_FIELD_CPUS,
	SB_FIELD_PIDS,
	SB_FIELD_NETWORK, /* none or egress (runtime/net/net.h) */
};
/* Write a field while `created` (-EBUSY after). @value is the whole file. */
int ops_sandbox_set(const struct caller *who, const char *id, enum sandbox_field field,
		    const char *value, struct err *e);

int ops_sandbox_start(const struct caller *who, const char *id, ops_done_fn done, void *ctx,
		      struct err *e);
/*
 * @label may be NULL or "". @snap_id_out gets the new snapshot's id, owned
 * by the sandbox's owner. done: when completed.
 */
int ops_sandbox_snapshot(const struct caller *who, const char *id, const char *label,
			 char snap_id_out[ID_MAX], ops_done_fn done, void *ctx, struct err *e);
int ops_sandbox_suspend(const struct caller *who, const char *id, ops_done_fn done, void *ctx,
			struct err *e);
int ops_sandbox_resume(const struct caller *who, const char *id, ops_done_fn done, void *ctx,
		       struct err *e);
int ops_sandbox_terminate(const struct caller *who, const char *id, ops_done_fn done, void *ctx,
			  struct err *e);
/*
 * An exec's output as it comes (the agent streams it; the slow way has
 * none until the end), from any thread, before the exec's @done.
 */
typedef void (*ops_progress_fn)(void *ctx, const char *data, size_t len);
/*
 * Run @cmdline with /bin/sh -c in the sandbox; result is the output then
 * "exit N\n". @progress (NULL: none) gets the output while it runs: the
 * result's first bytes are what it was given, in order.
 */
int ops_sandbox_exec(const struct caller *who, const char *id, const char *cmdline,
		     ops_progress_fn progress, ops_done_fn done, void *ctx, struct err *e);
/*
 * The same in two steps, for a script written a line at a time (fs/:
 * exec): _reserve() checks @cmdline and takes a place in the exec queue
 * (EAGAIN when it is full); _start() runs the whole script in it and
 * consumes @slot; _unreserve() gives back one never started.
 */
struct ops_exec_slot;
int ops_sandbox_exec_reserve(const struct caller *who, const char *id, const char *cmdline,
			     struct ops_exec_slot **out, struct err *e);
int ops_sandbox_exec_start(const struct caller *who, struct ops_exec_slot *slot,
			   const char *cmdline, ops_progress_fn progress, ops_done_fn done,
			   void *ctx, struct err *e);
void ops_sandbox_exec_unreserve(struct ops_exec_slot *slot);
/* The checks ops_sandbox_exec() makes before it queues anything: 0, or -errno with @e. */
int ops_sandbox_exec_check(const struct caller *who, const char *id, const char *cmdline,
			   struct err *e);
/*
 * Follow the newest exec @who started on sandbox @id: @progress gets what
 * it printed so far at once, then what it prints next; @done its whole
 * result once it ended (at once if it has). -ENOENT when @who started none
 * there since the daemon started (or the sandbox was removed since).
 */
int ops_sandbox_exec_follow(const struct caller *who, const char *id, ops_progress_fn progress,
			    ops_done_fn done, void *ctx, struct err *e);
/* rmdir: only `created`, `terminated` or `failed` (-EBUSY otherwise); synchronous. */
int ops_sandbox_remove(const struct caller *who, const char *id, struct err *e);
/*
 * Would ops_sandbox_remove() take it now? 0, -EBUSY (the sentence in @e),
 * -ENOENT; changes nothing (`rm -rf`'s unlinks of its files before its rmdir).
 */
int ops_sandbox_may_remove(const struct caller *who, const char *id, struct err *e);
/* done(ctx, 0, "status\n") once the sandbox is not in a transitional state. */
int ops_sandbox_wait(const struct caller *who, const char *id, ops_done_fn done, void *ctx,
		     struct err *e);

/*
 * Sandbox names are per host, and a store may be shared with other hosts
 * whose sandboxes have the same names: a snapshot is one of this host's
 * sandbox named in its sandbox_id only if this host took it (its profile
 * names this host's id: runtime/host.h). Wherever "the snapshots of this
 * sandbox" or "its newest" is meant, these are the ones.
 */
bool ops_snapshot_taken_here(const struct snapshot *snap);
/*
 * Was @snap taken of @sb? Of its name, here, and for its owner: a name
 * removed and taken again by another user is another sandbox, and the
 * snapshots of the earlier one (its memory, its env) are not the new one's
 * to list, to call its newest, or to resume from after a crash.
 */
bool ops_snapshot_of(const struct snapshot *snap, const struct sandbox *sb);
/* The snapshots taken of @sb (any kind, ops_snapshot_of), oldest first; as registry walks. */
int ops_sandbox_snapshots_each(const struct sandbox *sb,
			       int (*fn)(const struct snapshot *snap, void *arg), void *arg);
/* The newest of them of kind SNAP_KIND_SNAPSHOT into @out; -ENOENT if none. */
int ops_sandbox_newest_snapshot(const struct sandbox *sb, struct snapshot *out);

/* What a fork write changes of what the snapshot records; all unset: nothing. */
struct fork_opts {
	struct resources raise; /* `memory=`, `cpus=`: RES_UNSET in a field not given */
	/* `timeout=SECONDS`: its timeout instead of the snapshot's (its action stays) */
	bool timeout_set;
	int64_t timeout_s;
	/* `count=N` (ops_fork_count_parse()): N sandboxes from one write; 0 is one */
	unsigned count;
};

/*
 * Restore snapshot @snap_id into a new sandbox owned by @who (who must see
 * the snapshot and may create), with @opts (NULL: none); @id_out gets its
 * id. done: when running. The fork keeps the snapshot's limits; a field of
 * @opts->raise that is not RES_UNSET replaces one, never lower (-EINVAL).
 */
int ops_snapshot_fork(const struct caller *who, const char *snap_id, const struct fork_opts *opts,
		      char id_out[ID_MAX], ops_done_fn done, void *ctx, struct err *e);
/*
 * The fork write (ops_fanout.c): @opts->count sandboxes (0: one) forked
 * from @snap_id as ops_snapshot_fork() forks one, their ids appended to
 * @ids a line each, their restores run at once as far as the lifecycle
 * queue's workers go. All or none are accepted: the queue's places and the
 * snapshot's checks are taken first. done: once every one is running or
 * failed, with 0, or the first failure's errno (the others still run); a
 * failure also journals "K of N forks of S failed: why" in `errors`.
 */
int ops_snapshot_forks(const struct caller *who, const char *snap_id, const struct fork_opts *opts,
		       struct strbuf *ids, ops_done_fn done, void *ctx, struct err *e);
/*
 * A snapshot's warm pool (ops/ops_warm.c; docs/control-files.md, "Warm
 * pools"): what it wants, what is ready, the memory the ready hold.
 */
struct ops_warm {
	unsigned want;
	unsigned ready;
	int64_t bytes;
};
/*
 * `warm` write: keep @text (0..64) sandboxes restored from @snap_id and
 * paused. -EINVAL for another number; -ENOENT where @who may not see it
 * (or it is being deleted); -EACCES where @who may not fork; -EBUSY while
 * it is not completed; -EOPNOTSUPP for a GPU snapshot. 0 deletes its
 * ready members before it returns.
 */
int ops_snapshot_warm_set(const struct caller *who, const char *snap_id, const char *text,
			  struct err *e);
/* `warm` read and info.json's "warm": snapshot @snap_id's pool (all 0 without one). */
int ops_snapshot_warm_get(const char *snap_id, struct ops_warm *out);
/* All pools of the host together (metrics). */
void ops_warm_totals(struct ops_warm *out);
/* `count=N`: 1..FORK_COUNT_MAX (lib/limits.h), else -EINVAL. */
int ops_fork_count_parse(const char *text, unsigned *count, struct err *e);
/* Delete a snapshot (-EBUSY while a suspended sandbox depends on it). */
int ops_snapshot_delete(const struct caller *who, const char *snap_id, ops_done_fn done, void *ctx,
			struct err *e);
/* done(ctx, 0, "status\n") once completed or failed. */
int ops_snapshot_wait(const struct caller *who, const char *snap_id, ops_done_fn done, void *ctx,
		      struct err *e);
/*
 * Take back the wait whose completion context is @ctx (its caller went
 * away): true if it was still waiting; its done is then never called. The
 * caller must know @ctx is alive (a wait not yet completed).
 */
bool ops_wait_cancel(void *ctx);

/*
 * --- a sandbox's lifetime (ops/ops_timer.c) --------------------------
 *
 * `timeout`: "SECONDS [terminate|suspend]" (1..LIFETIME_SECONDS_MAX, the
 * action terminate unless named; "0" clears). Its clock runs from each
 * start, fork and resume to the deadline, where the timer thread
 * terminates or suspends the sandbox as a write to that file would.
 * `autosnapshot`: "every=SECONDS keep=N" (keep 1..AUTOSNAP_KEEP_MAX,
 * default 1), "0" stops taking them. Both parsers are pure: -EINVAL with
 * the sentence in @e.
 */
int ops_timeout_parse(const char *text, int64_t *seconds, enum timeout_action *action,
		      struct err *e);
int ops_autosnap_parse(const char *text, int64_t *every_s, int64_t *keep, struct err *e);
/*
 * Write `timeout` or `autosnapshot` of sandbox @id (any state but terminated
 * or failed). The setting in force written again changes nothing, its
 * countdown included; another arms the clock anew.
 */
int ops_sandbox_set_timeout(const struct caller *who, const char *id, const char *text,
			    struct err *e);
int ops_sandbox_set_autosnap(const struct caller *who, const char *id, const char *text,
			     struct err *e);
/*
 * What a read of them shows of row @sb, the settings as written:
 * "SECONDS ACTION\n" or "0\n" (the seconds left are info.json's);
 * "every=S keep=N\n" or "0\n".
 */
int ops_sandbox_timeout_text(const struct sandbox *sb, struct strbuf *out);
/*
 * The `egress` file (runtime/net/net.h): allow/deny CIDR lines, first match
 * wins; in any state, and a running sandbox's chain is replaced at once
 * by the whole of @text. -EINVAL with a sentence for a bad line.
 */
int ops_sandbox_set_egress(const struct caller *who, const char *id, const char *text,
			   struct err *e);
/* Whether @text would be taken as a whole egress file: -EINVAL, -EFBIG with a sentence. */
int ops_egress_check(const char *text, struct err *e);
int ops_sandbox_autosnap_text(const struct sandbox *sb, struct strbuf *out);

/*
 * --- published ports (ops/ops_ports.c, docs/network.md) ---------------
 *
 * A line written to `ports`: `PORT` publishes the sandbox's port on a host
 * port the kernel picks, `PORT HOSTPORT` (or `PORT ADDRESS:HOSTPORT`, as a
 * read shows it) on that one, `close PORT` stops it. A line asking for a
 * port published already on that host port changes nothing, so a read's
 * lines written back are taken (EINVAL for another line or another
 * address, EADDRINUSE for a host port taken, EEXIST for a port published
 * already on another host port, or named bare, ENOENT to close one that
 * is not, EACCES
 * for a host port below 1024 but for root, ENOSPC past PORTS_SANDBOX_MAX,
 * EBUSY once the sandbox is terminating, terminated or failed).
 */
int ops_sandbox_ports(const struct caller *who, const char *id, const char *line, struct err *e);
/* What a read shows of row @sb: "PORT ADDRESS:HOSTPORT" lines; none once it ended. */
int ops_sandbox_ports_text(const struct sandbox *sb, struct strbuf *out);

/* --- what the tree shows ---------------------------------------------- */

/*
 * The read side (ops/ops_view.c): each reads the registry afresh and
 * shows @who only what it may see (ops/access.h): another user's
 * sandbox or snapshot is -ENOENT, and the walks leave it out. The walks
 * are registry walks: the row passed to @fn is valid only during the call,
 * and a non-zero return stops the walk and is returned.
 */
/* Sandbox @id into @out; -ENOENT when there is none @who may see. */
int ops_sandbox_get(const struct caller *who, const char *id, struct sandbox *out);
/* The same for a snapshot: one missing here may be another host's, just stored (ops_sync_ask()). */
int ops_snapshot_get(const struct caller *who, const char *id, struct snapshot *out);
/*
 * The sandboxes, and the snapshots, that @who may see; a snapshot as a
 * listing shows it: its id, state, sandbox_id, owner_uid, name and
 * created_at (the rest 0).
 */
int ops_sandboxes_each(const struct caller *who, int (*fn)(const struct sandbox *sb, void *arg),
		       void *arg);
int ops_snapshots_each(const struct caller *who, int (*fn)(const struct snapshot *snap, void *arg),
		       void *arg);
/*
 * Snapshots by name (snapshots/by-name/): the id of the newest snapshot
 * named @name that @who may see (by created_at, then id) into @id_out;
 * -ENOENT when none is (or @name is no label_file_ok() name).
 */
int ops_snapshot_named(const struct caller *who, const char *name, char id_out[ID_MAX]);
/* Each name (label_file_ok()) of a snapshot @who may see, once, in byte order. */
int ops_snapshot_names_each(const struct caller *who, int (*fn)(const char *name, void *arg),
			    void *arg);
/* The sandboxes forked from snapshot @snap_id that @who may see, oldest first. */
int ops_snapshot_forks_each(const struct caller *who, const char *snap_id,
			    int (*fn)(const struct sandbox *sb, void *arg), void *arg);
/*
 * info.json of a row loaded as above, appended to @out: a sandbox's shows
 * the names of its env and never the values; a snapshot's is
 * snapmeta_info()'s (runtime/snapmeta.h).
 */
int ops_sandbox_info(const struct sandbox *sb, struct strbuf *out);
int ops_snapshot_info(const struct snapshot *snap, struct strbuf *out);
/*
 * Snapshot @id's manifest text, as stored, appended to @out: nothing until
 * the snapshot is completed; -EIO when the store cannot say.
 */
int ops_snapshot_manifest(const struct caller *who, const char *id, struct strbuf *out);

/* `DONE TOTAL` bytes for progress: live figures while storing, else from the registry. */
int ops_snapshot_progress(const char *snap_id, int64_t *done, int64_t *total);
/* "yes\n", or one line per reason this host cannot restore @snap_id. */
int ops_snapshot_restorable(const char *snap_id, struct strbuf *out);
/* The `version` file: snapfs version, runsc version, store URL. */
int ops_version_text(struct strbuf *out);
/*
 * The `metrics` file: Prometheus text exposition, as @who may see it: the
 * per-sandbox series and the counts of sandboxes and snapshots cover only
 * what @who may see (all of it for root); the daemon's and the store's own
 * totals name no object and are everyone's (docs/metrics.md).
 */
int ops_metrics_text(const struct caller *who, struct strbuf *out);

enum ops_object {
	OPS_OBJ_SANDBOX,
	OPS_OBJ_SNAPSHOT,
	OPS_OBJ_EVENTS, /* the events journal grew; id is "" */
	OPS_OBJ_ERRORS, /* the errors journal grew; id is "" */
	OPS_OBJ_LIST,	/* an object appeared or went away; id is the object's */
};

/*
 * Times for the tree's mtimes (docs/design.md, "Times"), ms since the
 * epoch: when what a loaded row shows last changed (state, message,
 * settings; created_at for a row from before schema 10), when any row of
 * @kind (OPS_OBJ_SANDBOX or OPS_OBJ_SNAPSHOT) was last made, changed or
 * removed (their index and directory), and the daemon's start
 * (files whose content never changes while it runs).
 */
int64_t ops_sandbox_changed_at(const struct sandbox *sb);
int64_t ops_snapshot_changed_at(const struct snapshot *snap);
int64_t ops_tree_changed_at(enum ops_object kind);
int64_t ops_started_at(void);

/*
 * Record a refused or failed request of @who: append {time, path, errno,
 * error} to the errors journal and, for OPS_OBJ_SANDBOX when @who may see
 * the sandbox, store e->msg as its `error` (no user writes into another's).
 * @path is the control file relative to the mount, e.g.
 * "sandboxes/web/start".
 */
void ops_report_error(const struct caller *who, enum ops_object kind, const char *id,
		      const char *path, const struct err *e);

/*
 * Register the one change listener: called after every state change of an
 * object and every journal append, from whatever thread made it, without
 * the operations lock held. The FUSE layer uses it to wake poll() and to
 * invalidate cached attributes.
 */
void ops_set_change_listener(void (*fn)(enum ops_object kind, const char *id, void *arg),
			     void *arg);

/*
 * Make the registry follow the store's manifests (snapshots other hosts
 * sharing the store completed or deleted), on the sync thread
 * (ops/ops_sync.c): ops_sync_start() starts it, ops_sync_stop() ends
 * it after the pass in flight. ops_sync_ask() asks it for a pass soon and
 * returns at once: for a lookup of a name the registry lacks. One pass on
 * the caller's thread: ops_sync_snapshots() (tests).
 */
int ops_sync_start(void);
void ops_sync_stop(void);
void ops_sync_ask(void);
int ops_sync_snapshots(void);

/* --- sandboxes/<id>/root/: the sandbox's own files (ops/ops_agent.c) --------- */
/*
 * Each call asks the sandbox's agent (runtime/agent/), started at the first
 * use. @path is relative to the sandbox's / ("" for / itself), made of
 * names the kernel looked up: no ".", "..", or empty component. Only the
 * sandbox's owner (and root) may; a sandbox that is not running answers
 * EBUSY (starting, snapshotting, suspending, suspended, resuming) or ENOENT
 * (created, terminated, failed) at once, and none of these write `error`.
 * Attributes are as inside: its uids, gids and modes.
 */
struct ops_inside_file;

/*
 * snapshots/<id>/root/ (ops/ops_snapview.c) uses the same calls with a view
 * id: OPS_VIEW_MARK then the snapshot's id (no sandbox id starts with it).
 * Every call that would change a view answers EROFS; a view is asked only
 * once ops_snapview_want() said it is ready.
 */
#define OPS_VIEW_MARK '@'
#define OPS_VIEW_ID_MAX (ID_MAX + 1)
static inline bool ops_is_view(const char *id)
{
	return id[0] == OPS_VIEW_MARK;
}
typedef void (*ops_view_ready_fn)(void *arg, int rc);
/*
 * Is the view @view_id ready for @who (who may see the snapshot)? 0: ask
 * it now. 1: it is being restored: with @fn, @fn(@arg, 0 or -errno) is
 * called once, from another thread, when it is ready or failed; without,
 * nothing is kept. -errno: ENOENT (no such snapshot), EBUSY (not
 * completed), EIO (its restore failed: the snapshot's `error` says why).
 */
int ops_snapview_want(const struct caller *who, const char *view_id, ops_view_ready_fn fn,
		      void *arg, struct err *e);
/* The sandbox or view id an open file is of. */
const char *ops_inside_file_id(const struct ops_inside_file *f);

/* One entry of a listing: its name and attributes (st_ino the number inside the sandbox). */
typedef int (*ops_inside_list_fn)(const char *name, const struct stat *st, void *arg);

enum {
	OPS_INSIDE_MODE = 1 << 0,
	OPS_INSIDE_UID = 1 << 1,
	OPS_INSIDE_GID = 1 << 2,
	OPS_INSIDE_SIZE = 1 << 3,
	OPS_INSIDE_TIMES = 1 << 4, /* times[]: tv_nsec may be UTIME_NOW or UTIME_OMIT */
};

struct ops_inside_attr {
	unsigned what;
	mode_t mode;
	uint32_t uid, gid;
	off_t size;
	struct timespec times[2]; /* atime, mtime */
};

int ops_inside_stat(const struct caller *who, const char *id, const char *path, struct stat *st,
		    struct err *e);
/* Each entry of directory @path; the root of a sandbox that is not running lists nothing. */
int ops_inside_list(const struct caller *who, const char *id, const char *path,
		    ops_inside_list_fn fn, void *arg, struct err *e);
/* Open (or create, with O_CREAT and @mode) regular file @path; *@st its attributes. */
int ops_inside_open(const struct caller *who, const char *id, const char *path, int flags,
		    mode_t mode, struct ops_inside_file **out, struct stat *st, struct err *e);
/* A read's bytes (@data), and what holds them until ops_read_release(). */
struct agent_hold;
struct ops_read {
	const void *data;
	void *mem;		 /* a copy of a file's head: freed */
	struct agent_hold *hold; /* the agent's reply or read memory: released */
};
void ops_read_release(struct ops_read *r);
/*
 * At most @n bytes at @off into @r (zeroed by the caller, released by it
 * also after an error): the count. No copy of a large read.
 */
ssize_t ops_inside_read(struct ops_inside_file *f, const struct caller *who, size_t n, off_t off,
			struct ops_read *r, struct err *e);
/*
 * Up to 1 MiB of @buf at @off: the count, once the bytes are in the
 * agent's channel (write-behind, ops_agent.c); a failure of one of @f's
 * earlier writes is this call's answer, or a later one's.
 */
ssize_t ops_inside_write(struct ops_inside_file *f, const struct caller *who, const void *buf,
			 size_t n, off_t off, struct err *e);
int ops_inside_fsync(struct ops_inside_file *f, const struct caller *who, struct err *e);
/*
 * A close of @f (FLUSH): waits for its writes still in the agent's hands
 * (write-behind, ops_agent.c) and reports the first that failed.
 */
int ops_inside_flush(struct ops_inside_file *f, struct err *e);
void ops_inside_close(struct ops_inside_file *f);
int ops_inside_setattr(const struct caller *who, const char *id, const char *path,
		       const struct ops_inside_attr *set, struct err *e);
int ops_inside_mkdir(const struct caller *who, const char *id, const char *path, mode_t mode,
		     struct stat *st, struct err *e);
int ops_inside_remove(const struct caller *who, const char *id, const char *path, bool dir,
		      struct err *e);
int ops_inside_rename(const struct caller *who, const char *id, const char *from, const char *to,
		      unsigned flags, struct err *e);
int ops_inside_symlink(const struct caller *who, const char *id, const char *target,
		       const char *path, struct stat *st, struct err *e);
int ops_inside_link(const struct caller *who, const char *id, const char *from, const char *to,
		    struct stat *st, struct err *e);
/*
 * A link's target, rewritten so that the host's kernel, following it from
 * the link's place under root/, stays under root/ (inside_link_contain()).
 */
int ops_inside_readlink(const struct caller *who, const char *id, const char *path, char *buf,
			size_t size, struct err *e);
/*
 * sandboxes/<id>/ps: a header line, then one line per process inside (not
 * the agent's keeper): PID PPID UID STATE RSS (KiB) TIME ([[DD-]HH:]MM:SS
 * of CPU) COMMAND, appended to @out; nothing of it on an error. Asks the
 * agent, so it answers as root/ does when the sandbox is not running.
 */
int ops_sandbox_ps(const struct caller *who, const char *id, struct strbuf *out, struct err *e);
/* Has @sb processes ps may list (it has not ended, nor is it only `created`)? */
bool ops_sandbox_has_ps(const struct sandbox *sb);

/*
 * A sandbox seen from the host without entering it (ops/ops_console.c).
 *
 * Its console (the entrypoint's stdout and stderr, console.log and .1):
 * ops_sandbox_console_open() gives @who, who may see sandbox @id, a hold
 * on the view (offsets that only grow across rotations while held, as
 * the journals'); it reads with ops_console_read() and ends with
 * ops_sandbox_console_close(). Readable in every state, after termination
 * too, until rmdir; one never started reads as empty. -ENOENT: no such
 * sandbox for @who.
 */
int ops_sandbox_console_open(const struct caller *who, const char *id, struct logfile **out);
void ops_sandbox_console_close(struct logfile *lf);
ssize_t ops_console_read(struct logfile *lf, char *buf, size_t size, int64_t off);
int ops_console_stat(struct logfile *lf, int64_t *size, struct timespec *mtime);
/*
 * Its usage, `key value` lines: memory_bytes, memory_peak_bytes,
 * cpu_seconds (decimal), pids (processes inside, `runsc ps`), and
 * rx_bytes, tx_bytes with a network of its own. Only while it runs:
 * nothing (an empty file) in every other state, as there is no process to
 * measure; never `runsc events --stats` (runtime/agent/DESIGN.md §4).
 */
int ops_sandbox_usage_text(const struct sandbox *sb, struct strbuf *out);

/* The journals, for the tree's `events` and `errors` (a view with growing offsets: logfile.h). */
struct logfile *ops_events_journal(void);
struct logfile *ops_errors_journal(void);

#endif
