/*
 * ops_internal.h - what the ops_*.c files share: the daemon's context, the
 * operations lock, and the helpers that change and announce state.
 *
 * The files, by floor, as the declarations below are grouped (a file calls
 * files of its own group or below, never a group above, and no two files
 * call each other; `python3 tests/check-circles.py --floors` gives each
 * file's exact floor): ops_rows.c; ops_core.c (lock and state helpers,
 * announcements, waiters, jobs, progress, paths, ids, snapshots in use)
 * and ops_quota.c; the helpers ops_lifetime.c, ops_holds.c, ops_follow.c,
 * ops_gpu.c, ops_ports.c, ops_net.c, ops_text.c; ops_container.c and
 * ops_view.c; the verbs ops_sandbox.c (create, set, start, terminate,
 * remove, wait, the monitor's checks), ops_restore.c (fork, resume; the
 * cache's mechanics are runtime/cache.c's), ops_exec.c, ops_checkpoint.c
 * (snapshot, suspend, the store job), ops_fanout.c, ops_snapshot.c
 * (delete, wait, progress, restorable); ops_reconcile.c (sandboxes and
 * snapshots at start-up); the threads ops_sync.c and ops_timer.c;
 * ops_life.c (open, start, monitor thread, shutdown).
 *
 * The lock: every read-check-write of a sandbox or snapshot state happens
 * under `ops.lock`, so two requests can never both see `running` and both
 * start a snapshot. Nothing slow runs under it (no runsc, no store I/O),
 * and no callback (listener, waiter completion) is called with it held.
 *
 * Ownership of transitional states: once an operation moved a sandbox into
 * a transitional state (starting, snapshotting, suspending, resuming,
 * terminating), only the job that did so moves it out again; every other
 * request sees the transitional state and is refused with EBUSY.
 */
#ifndef SNAPFS_OPS_INTERNAL_H
#define SNAPFS_OPS_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>

#include "lib/cancel.h"
#include "lib/limits.h"
#include "runtime/gpu/cuda.h"
#include "runtime/gpu/gpu.h"
#include "ops/jobs.h"
#include "ops/ops.h"
#include "runtime/runsc/runsc.h"

/* ======== floor 0: the context ============================================== */
/*
 * What every ops file reads: the daemon's context and the state bits.
 * Below everything; calls nothing.
 */

/*
 * The daemon's context. Which lock guards what:
 *   - the paths, cuda_tool, store, images, runsc and lock_fd are set by
 *     ops_open() and only read after it, so they need none;
 *   - reg: the registry serialises its own calls; every read-check-write
 *     of a row holds `lock`; rows are read and updated through row_*()
 *     (ops_rows.c, its own leaf lock below `lock`);
 *   - running: written under `gate` held for writing, read under it held
 *     for reading (exec jobs);
 *   - store_stop: a token (lib/cancel.h, thread-safe itself) every store
 *     job binds; shutdown sets its deadline.
 * Elsewhere: the waiters list under waiters_lock and the progress list
 * under progress_lock (ops_core.c, leaf locks: nothing is called with them
 * held); the snapshot uses (struct snapshot_use) under `lock`; the cache's
 * holds under its own lock (runtime/cache.c), never taken with `lock`
 * held.
 */
struct ops_context {
	char state_dir[PATH_MAX];
	char spool_dir[PATH_MAX];	       /* checkpoint images being stored */
	char sandbox_dir[PATH_MAX];	       /* per sandbox: bundle/, console.fifo, console.log */
	char cgroup_parent[CGROUP_PARENT_MAX]; /* --cgroup-parent (runtime/runsc/cgroup.h) */
	struct resources default_res; /* --default-memory, --default-cpus, --default-pids */
	struct cuda_tool
	    cuda_tool; /* the host's cuda-checkpoint (runtime/gpu/cuda.h); fd -1: none */
	struct registry *reg;
	struct store *store;
	struct images *images;
	struct runsc runsc;
	pthread_mutex_t lock;
	/*
	 * Exec jobs are abandoned at shutdown, not joined: they hold the gate
	 * for reading while they touch shared state after `runsc exec`
	 * returns, and shutdown takes it for writing to clear `running`.
	 */
	pthread_rwlock_t gate;
	bool running; /* between ops_start and ops_shutdown */
	int lock_fd;  /* flock on <state>/lock */
	/*
	 * Shutdown gives the store jobs STORE_STOP_GRACE_MS, then their puts to
	 * a store that does not answer give up; each such snapshot is left whole
	 * in the spool for the next start to store (ops_checkpoint.c).
	 */
	struct cancel store_stop;
};

extern struct ops_context ops;

#define STATE_BIT(s) (1u << (s))

/* ======== floor 1: the rows (ops_rows.c) ==================================== */
/*
 * The rows as the daemon knows them, and the walks over a sandbox's own
 * snapshots. Calls only the registry; its lock is a leaf below ops.lock.
 */

/*
 * The rows as the daemon knows them (ops_rows.c): the registry's, or an
 * update of one it refused, kept and written again until it takes it. Every
 * read and update of a sandbox or snapshot row in runtime/ goes through
 * these; inserts go to the registry itself (one refused fails its
 * request). An update is 0 once the registry has it or it is kept; it
 * fails with the registry's errno when more than REGISTRY_PENDING_MAX
 * rows wait already. Deletes drop the kept row once the registry's is gone.
 */
int row_sandbox_get(const char *id, struct sandbox *out);
int row_snapshot_get(const char *id, struct snapshot *out);
/* A new row into the registry, its changed_at stamped (now); the tree's change time moves. */
int row_sandbox_insert(struct sandbox *sb);
int row_snapshot_insert(struct snapshot *snap);
/* The daemon's start, the first tree change time: ops_open() calls it first. */
void rows_times_init(void);
int row_sandbox_update(const struct sandbox *sb);
/* The same, but in the registry itself or not at all: a refused write fails, nothing kept. */
int row_sandbox_update_durable(const struct sandbox *sb);
int row_snapshot_update(const struct snapshot *snap);
int row_sandbox_delete(const char *id);
int row_snapshot_delete(const char *id);
int row_sandbox_each(int (*fn)(const struct sandbox *sb, void *arg), void *arg);
/* The warm pools' members (state SB_WARM), which every other walk skips (ops_warm.c). */
int row_warm_each(int (*fn)(const struct sandbox *sb, void *arg), void *arg);
int row_sandbox_each_forked_from(const char *snap_id,
				 int (*fn)(const struct sandbox *sb, void *arg), void *arg);
int row_snapshot_each(int (*fn)(const struct snapshot *snap, void *arg), void *arg);
/* registry_snapshot_each_listed()'s walk: a kept row comes whole. */
int row_snapshot_each_listed(int (*fn)(const struct snapshot *snap, void *arg), void *arg);
int row_snapshot_each_of_sandbox(const char *sandbox_id,
				 int (*fn)(const struct snapshot *snap, void *arg), void *arg);
int row_snapshot_pinned(const char *snap_id, bool *pinned);
/* Write the kept rows again: when their backoff is over, or @now. */
void rows_flush(bool now);
/* Rows kept now (metrics). */
unsigned rows_pending(void);
/* At shutdown: a last flush; what is still kept is dropped (start-up reconciles it). */
void rows_close(void);

/* ======== floor 2: the core (ops_core.c, ops_quota.c) ======================= */
/*
 * State changes under ops.lock and their announcements, waiters, progress,
 * paths, ids, the jobs' base and the snapshots in use; and what a user
 * may ask for. Calls the rows only.
 */

/* A change to a sandbox row: fields left NULL (or pid -1) are kept. */
struct sb_patch {
	enum sandbox_state state;
	const char *message;
	const char *runtime_id;
	const char *image_digest;
	const char *restore_snapshot;
	pid_t pid;
	const char
	    *exit_code;	  /* the entrypoint's exit status; NULL: unchanged (a new run clears it) */
	bool durable;	  /* written to the registry or failed, never kept in memory (ops_rows.c) */
	bool arm_timeout; /* it runs anew: its timeout's clock starts (timeout_deadline()) */
};
#define SB_PATCH(st) ((struct sb_patch){.state = (st), .pid = -1})

/*
 * Load sandbox or snapshot @id as @who sees it: -ENOENT when it is missing
 * and when it is another user's, which @who may not learn exists
 * (ops/access.h). No lock taken; no sentence.
 */
int sandbox_get_as(const struct caller *who, const char *id, struct sandbox *out);
/* The same, with the sentence a user reads when there is none (or it is not theirs): -ENOENT. */
int sandbox_find(const struct caller *who, const char *id, struct sandbox *out, struct err *e);
int snapshot_get_as(const struct caller *who, const char *id, struct snapshot *out);

/*
 * Under the lock: load sandbox @id as @who sees it and check that its
 * state is one of @allowed (a bit mask of 1u << state); if so, move it to
 * @to and copy the row as it was *before* the change to @out (so a caller
 * can undo). -ENOENT or -EBUSY with a sentence naming @verb ("snapshot",
 * "start", ...) otherwise. Announces the change.
 */
int sandbox_begin(const struct caller *who, const char *id, unsigned allowed, enum sandbox_state to,
		  const char *verb, struct sandbox *out, struct err *e);
/* Apply @patch to sandbox @id under the lock, then announce the change. */
int sandbox_apply(const char *id, struct sb_patch patch);
/* The same, only while its state is in @allowed (-EBUSY otherwise, nothing changed). */
int sandbox_apply_if(const char *id, unsigned allowed, struct sb_patch patch);
/* Save @snap (whole row) and announce it. */
int snapshot_save(const struct snapshot *snap);

/*
 * A job's failure: journal it under <kind>/<id>/<what>; a sandbox's `error`
 * gets it too. OPS_OBJ_LIST for a sandbox's job whose sandbox is gone:
 * journalled only, not written into a later sandbox of that id.
 */
void report_job_failure(enum ops_object kind, const char *id, const char *what,
			const struct err *e);

/*
 * Tell listeners and waiters that sandbox or snapshot @id is now in @state
 * (with @message, may be NULL); appends an event. Waiters are woken once it
 * is settled: a sandbox in no transitional state, a snapshot completed or
 * failed.
 */
void announce_sandbox(const char *id, enum sandbox_state state, const char *message);
void announce_snapshot(const char *id, enum snapshot_state state, const char *message);
/* The same for @kind/@id gone (a sandbox removed, a snapshot deleted): its waiters end. */
void announce_gone(enum ops_object kind, const char *id, const char *message);

/* Completion helper: calls done(ctx, rc, result) if done is not NULL. */
static inline void complete(ops_done_fn done, void *ctx, int rc, const char *result, size_t len)
{
	if (done)
		done(ctx, rc, result, len);
}

/* Waiters: completions held until an object settles, for @who, who may see it. */
void waiters_add(const struct caller *who, enum ops_object kind, const char *id, ops_done_fn done,
		 void *ctx);
void waiters_wake(enum ops_object kind, const char *id, const char *status, bool settled);
/* End the waiters of an object that is gone with -ENOENT. */
void waiters_fail(enum ops_object kind, const char *id);
/* Waiters listed now (metrics). */
unsigned waiters_count(void);
/* Tell the change listener (only) that @kind/@id changed. */
void ops_notify(enum ops_object kind, const char *id);

/* Live progress of snapshots being stored. */
void progress_set(const char *snap_id, int64_t done, int64_t total);
void progress_clear(const char *snap_id);
bool progress_get(const char *snap_id, int64_t *done, int64_t *total);

/* Paths: <sandbox_dir>/<id>, its bundle, its console log; the spool dir of a snapshot. */
int sandbox_path(const char *id, const char *leaf, char *out, size_t len);
/*
 * Rename sandbox @id's directory to a name no sandbox can have, in @tomb (""
 * if it had none), for the caller to remove outside the lock; the start-up
 * removes what a crash left of these.
 */
void sandbox_bury(const char *id, char *tomb, size_t len);
int ops_spool_path(const char *snap_id, char *out, size_t len);

/* No sandbox id starts with a dot (lib/names.h): these names are never a sandbox's. */
#define SANDBOX_TOMB_PREFIX ".removed-"

/* A fresh id: @prefix + 16 hex digits. */
int new_object_id(const char *prefix, char out[ID_MAX]);

/*
 * What every job of the operations starts with: who to tell when it ends,
 * and its place in a queue (ops/jobs.h), taken before the request
 * changes anything, so that a full queue refuses it with nothing to undo.
 * Each job type has it as its first member, `base`: the op_job_*()
 * functions take the job by it.
 */
struct op_job {
	ops_done_fn done;
	void *ctx;
	struct job *slot; /* NULL once queued */
};
#define OP_JOB_CHECK(type)                                                                         \
	_Static_assert(offsetof(type, base) == 0, #type " must begin with its struct op_job")

/* A zeroed job of @size bytes, its place in @kind's queue taken; NULL (@e says why) if none is
 * free. */
void *op_job_new(size_t size, enum job_kind kind, ops_done_fn done, void *ctx, struct err *e);
/* Give back the place @job did not use and free it. Returns @rc. */
int op_job_drop(void *job, int rc);
/* Run @fn(@job) in the place @job holds. Returns 0. */
int op_job_queue(void *job, void (*fn)(void *));
/* Tell @job's requester how it ended (@rc, @result), and free @job. */
void op_job_end(void *job, int rc, const char *result, size_t len);

/*
 * Snapshots in use: forks and resumes still restoring from one, or a delete
 * under way. A delete waits for no restore (it is refused with EBUSY while
 * one runs) and a fork of a snapshot being deleted is refused, so a restore
 * never reads data a delete is removing. Guarded by ops.lock (ops_core.c).
 */
struct snapshot_use {
	char id[ID_MAX];
	unsigned restores;
	bool deleting;
	struct snapshot_use *next;
};

/* The use of snapshot @id, made if @create; NULL if there is none (or no memory). */
struct snapshot_use *snapshot_use_get(const char *id, bool create);
/* Forget the use of @id once nothing restores or deletes it. */
void snapshot_use_drop_if_idle(const char *id);

/*
 * The reason the next events this thread announces give ("timeout",
 * "autosnapshot"; NULL: none): the timer thread names it around the
 * operations it starts, which announce on the calling thread (ops_core.c).
 */
void announce_reason(const char *reason);
/* This thread's reason now: a job queued under it carries it to the thread that announces. */
const char *announced_reason(void);

/*
 * --- what a user who is not root may ask for (ops_quota.c; docs/limits.md,
 * "What a user may ask for") ----------------------------------------------
 *
 * Keep the bounds and caps of @cfg, refusing a default above its bound
 * (ops_open).
 */
int quota_configure(const struct ops_config *cfg, struct err *e);
/*
 * May @who ask for the limits of @given (the fields not RES_UNSET), in the
 * request @what names? Root always; anybody else within --max-memory,
 * --max-cpus, --max-pids and never 0: -EPERM with the sentence.
 */
int quota_limits(const struct caller *who, const struct resources *given, const char *what,
		 struct err *e);
/*
 * Under ops.lock, so that the count and the insert or publish that follows
 * are one step: may @who own @sandboxes more sandboxes and publish @ports
 * more ports? Root always; anybody else within --max-sandboxes-per-user
 * and --max-ports-per-user: -EDQUOT with the sentence.
 */
int quota_owner_locked(const struct caller *who, unsigned sandboxes, unsigned ports, struct err *e);
/*
 * The ports @sb's row publishes, which count against its owner's cap:
 * those it records while it is live (PORTS_LIVE), 0 after its end.
 */
unsigned quota_ports_published(const struct sandbox *sb);
/* The states a sandbox has published ports in: every one before its end. */
#define PORTS_LIVE                                                                                 \
	(STATE_BIT(SB_CREATED) | STATE_BIT(SB_STARTING) | STATE_BIT(SB_RUNNING) |                  \
	 STATE_BIT(SB_SNAPSHOTTING) | STATE_BIT(SB_SUSPENDING) | STATE_BIT(SB_SUSPENDED) |         \
	 STATE_BIT(SB_RESUMING))

/* ======== floor 3: the helpers every verb calls ============================= */
/*
 * Lifetime rules and the timer's kick (ops_lifetime.c), store holds
 * (ops_holds.c), which store (ops_follow.c), GPU hooks (ops_gpu.c), ports
 * (ops_ports.c), network (ops_net.c), metrics (ops_text.c). Each calls
 * the floors below and none calls another at its floor or above.
 */

/*
 * --- the lifetime: timeouts and periodic snapshots (ops_lifetime.c) -------
 *
 * The deadline a timeout of @timeout_s seconds set at @now (ms since the
 * epoch) has: 0 (none) for 0. Inline: ops_core.c applies it with a patch's
 * arm_timeout, and calls no other ops file.
 */
static inline int64_t timeout_deadline(int64_t timeout_s, int64_t now)
{
	return timeout_s > 0 ? now + timeout_s * 1000 : 0;
}
/* Read --default-timeout (ops_open). */
void lifetime_configure(const struct ops_config *cfg);
/* A new sandbox's lifetime from @spec (NULL: mkdir), or the default. */
void lifetime_init_sandbox(struct sandbox *sb, const struct sandbox_spec *spec);
/* A fork's: the snapshot's timeout, unless @opts names another. */
void lifetime_init_fork(struct sandbox *sb, const struct snapshot *snap,
			const struct fork_opts *opts);
/* info.json's "timeout" and "autosnapshot" of @sb (ops_view.c); NULL without memory. */
cJSON *lifetime_info_timeout(const struct sandbox *sb);
cJSON *lifetime_info_autosnap(const struct sandbox *sb);
/*
 * The timer's kick. lifetime_kick(): a deadline or a setting changed, or a
 * sandbox began to run: the timer looks again. The timer thread
 * (ops_timer.c) loops while lifetime_pass_begin() (false once
 * lifetime_halt(true); it clears the kick), and between passes sleeps in
 * lifetime_wait() until @until (ms since the epoch), a kick or the halt.
 */
void lifetime_kick(void);
void lifetime_halt(bool halt);
bool lifetime_pass_begin(void);
void lifetime_wait(int64_t until);

/*
 * The hold on a suspend's snapshot in the store (backend/store/store.h), named
 * by this host and sandbox @sandbox_id (ops_holds.c): taken before the
 * checkpoint of a suspend, released once the sandbox no longer resumes
 * from it (a failed suspend, a resume, a terminate); a failed release only
 * warns. holds_reconcile(), at start-up after the sandboxes are, releases
 * this host's holds that no sandbox needs any more.
 */
int suspend_hold(const char *sandbox_id, const char *snap_id, struct err *e);
void suspend_unhold(const char *sandbox_id, const char *snap_id);
/*
 * End @job with @rc (op_job_end()), then release @sandbox_id's hold on
 * @snap_id (none if @sandbox_id is NULL): the answer does not wait out a
 * store that is down, and a hold left behind only keeps the snapshot until
 * holds_reconcile() at the next start-up.
 */
void op_job_end_unhold(void *job, int rc, const char *sandbox_id, const char *snap_id);
void holds_reconcile(void);

/*
 * Which store (ops/ops_follow.c): 0 if the store is the one this state
 * follows (recorded on its first use), -EXDEV if it is another (journalled
 * once), another negative errno if it cannot say; the reason in @e.
 */
int ops_store_followed(struct err *e);
/*
 * Whether completed row @snap, whose manifest the store (ours) lacks, may
 * be forgotten: 1 if it is not held and another host took it or a
 * tombstone says it was deleted, 0 if not (its id is added to @kept, may be NULL), or a negative
 * errno if the store cannot say.
 */
struct strset;
int follow_may_forget(const struct snapshot *snap, struct strset *kept);
/* The pass's set of missing manifests becomes @fresh (emptied): the sync pass, under pass_lock. */
void follow_missing_replace(struct strset *fresh);

/*
 * --- published ports (ops_ports.c; docs/network.md, "Published ports") ----
 *
 * Read --publish-address (ops_open); start the forwarder and open the
 * forwarders of every live sandbox's row (ops_start); stop it (shutdown).
 */
void ops_ports_configure(const struct ops_config *cfg);
int ops_ports_start(struct err *e);
void ops_ports_stop(void);
/* Open sandbox @id's forwarders from its row, recording the host ports bound (a fork's). */
void ops_ports_reopen(const char *id);
/* A fork's row gets its snapshot's ports (host ports 0: new ones when it opens them). */
void ops_ports_fork(struct sandbox *sb, const struct snapshot *snap);
/* A snapshot records its source's ports, without their host ports. */
void ops_ports_snapshot(struct snapshot *snap, const struct sandbox *sb);
/* info.json's "ports" of @sb; NULL without memory. */
cJSON *ops_ports_info(const struct sandbox *sb);

/*
 * The network of sandbox @id for container @runtime_id when its row says
 * egress (ops/ops_net.c): set up, with @netns and @resolv for the
 * bundle; both "" for none. Leaves nothing on failure. A snapshot's view
 * (VIEW_DIR_PREFIX, no row) never gets a network, but an egress
 * snapshot's view gets @resolv, the mount its sandbox had.
 */
int ops_net_prepare(const char *id, const char *runtime_id, char netns[PATH_MAX],
		    char resolv[PATH_MAX], struct err *e);
/* info.json's "network": {"mode", "address"}, the address null while it has none. */
/* Sandbox @id's egress chain set again from its row (a warm member taken: ops_net.c). */
int ops_net_egress_again(const char *id, struct err *e);
struct cJSON *ops_net_info(const struct sandbox *sb);
/*
 * A fork's rules by where they came from: when @who (root) forks @snap of
 * a non-root owner, the rules of @sb (copied from @snap) inside a denied
 * range are commented out (net_rules_disarm()), so the user's `allow
 * 169.254.169.254` stays as inert in root's fork as it was in theirs.
 */
void ops_net_fork_rules(const struct caller *who, const struct snapshot *snap, struct sandbox *sb);

/*
 * --- GPU sandboxes and cuda-checkpoint (ops_gpu.c; docs/gpu.md) ----------
 *
 * The hooks the operations call around a start, a checkpoint and a
 * restore. Each does nothing for a sandbox without GPU whose image ships
 * no cuda-checkpoint.
 */

/*
 * Open the host's cuda-checkpoint into ops.cuda_tool: @cuda_checkpoint
 * (--cuda-checkpoint; a failure to open it is an error), else the one on
 * PATH, else none (GPU sandboxes then cannot be snapshotted). Held open for
 * the daemon's life: a file replaced meanwhile does not change what runs.
 */
int ops_gpu_tool_init(const char *cuda_checkpoint, struct err *e);

/* Before a start of @id (NULL: sandboxes/new): a GPU sandbox needs a GPU and driver (-ENODEV). */
int ops_gpu_start_check(const char *id, bool gpu, struct err *e);

/* What ops_gpu_before_checkpoint() did, for ops_gpu_after_checkpoint(). */
struct ops_gpu_checkpoint {
	char what[ID_MAX + 32];	  /* "snapshot sandbox web", for messages */
	char cid[RUNTIME_ID_MAX]; /* the source's container */
	struct cuda_procs procs;  /* the CUDA processes snapfs locked and checkpointed */
	const char *runsc_cuda;	  /* for runsc_checkpoint(): set when runsc drives CUDA */
};

/*
 * Before the gVisor checkpoint of @sb into @spool: lock and checkpoint its
 * CUDA processes and record them in @spool; on a failure nothing is left
 * locked or checkpointed and @e says which step failed.
 */
int ops_gpu_before_checkpoint(const struct sandbox *sb, const char *spool,
			      struct ops_gpu_checkpoint *gc, struct err *e);
/*
 * After it (@rc: how it went): a snapshot restores and unlocks the source's
 * CUDA processes; a failed checkpoint does the same if the source still
 * runs, and says so in @e. Returns @rc, or the undo's failure.
 */
int ops_gpu_after_checkpoint(struct ops_gpu_checkpoint *gc, bool leave_running, int rc,
			     struct err *e);
/* After `runsc restore` of @image_dir into @runtime_id: restore and unlock what it records. */
int ops_gpu_after_restore(const char *sandbox_id, const char *snap_id, const char *runtime_id,
			  const char *image_dir, struct err *e);
/*
 * At start-up, for a sandbox that was snapshotting or suspending and still
 * runs: bring back the CUDA processes the interrupted checkpoint's spool
 * records, and say so in @sb->message (the caller saves @sb).
 */
void ops_gpu_reconcile(struct sandbox *sb);

/* --- metrics (ops_text.c; docs/metrics.md) --------------------------------- */

/* A snapshot's checkpoint paused its sandbox @ms: one observation of snapfs_snapshot_pause_seconds.
 */
void metrics_pause_observe(int64_t ms);

/* ======== floor 4: the container (ops_container.c) ============================= */
/*
 * runsc, the bundle, console and cgroup of one sandbox: below every verb.
 * (ops_view_start/stop sit here only by age: ops_view.c, the readers, is
 * a top file, which calls the sync thread's ask.)
 */

/*
 * --- the container of a sandbox (ops_container.c) ----------------------
 */
/*
 * Write sandbox @id's bundle (runtime/runsc/bundle.h) for container @runtime_id
 * (its cgroup: runtime/runsc/cgroup.h) of @image, its process
 * `/bin/sh -c @entrypoint` with @env, and the host's NVIDIA devices when
 * @flags has CONTAINER_GPU; at the least CPU weight when it has
 * CONTAINER_BACKGROUND (a warm pool's member: cgroup_cpu_normal() raises it
 * when a fork takes it); pins the image's digest into @digest. A @digest that is not empty
 * on entry is the one the image must have (a restore's: the snapshot's):
 * another is refused with EINVAL and both digests, before the bundle or the
 * network exists.
 */
#define CONTAINER_GPU 1u
#define CONTAINER_BACKGROUND 2u
int container_prepare(const char *id, const char *runtime_id, const char *image,
		      const char *entrypoint, const char *env, unsigned flags,
		      const struct resources *res, char digest[DIGEST_MAX], struct err *e);

/*
 * `runsc run` (@image_dir NULL) or `runsc restore` of sandbox @id's bundle
 * into container @runtime_id, its stdio the sandbox's console
 * (runtime/runsc/console.h), read from then on; its processes then leave the
 * daemon's cgroup on a hybrid host too (cgroup_adopt(): a failure there is
 * warned and journalled, the container kept); a failure to start deletes
 * the container. *@pid: the sandbox process's (runsc_run()), 0 if unknown.
 */
int container_start(const char *id, const char *runtime_id, bool gpu, const char *image_dir,
		    pid_t *pid, struct err *e);
/* container_prepare() then container_start() for @sb's first run (a start). */
int container_run(const struct sandbox *sb, char digest[DIGEST_MAX], pid_t *pid, struct err *e);
/* Kill and delete container @runtime_id; -EIO if runsc still knows it afterwards. */
int container_stop(const char *runtime_id, struct err *e);
/* The same without the kill: a paused or stopped container. */
int container_delete(const char *runtime_id, struct err *e);
/* Resume @runtime_id if runsc has it paused, a few tries: its status after. */
enum runsc_status container_unpause(const char *runtime_id, struct err *e);
/* A job that made a container for @id which a terminate took over meanwhile: remove it. */
void container_drop(const char *id, const char *runtime_id);
/*
 * The cgroup counters (OOM kills, pids.max refusals) last noted for
 * @runtime_id into @base (all 0 if none were); note @u for it (NULL
 * forgets). container_start() forgets them; the monitor notes them.
 */
struct cgroup_usage;
void limit_seen_get(const char *runtime_id, struct cgroup_usage *base);
void limit_seen_note(const char *runtime_id, const struct cgroup_usage *u);

/* Manifest fetches (ops_view.c) may run; at shutdown, those in flight give up a store that hangs.
 */
void ops_view_start(void);
void ops_view_stop(void);

/* ======== floor 5: what the verbs share (ops_sandbox.c, ops_restore.c, ops_checkpoint.c) === */
/*
 * The pieces one verb file lends another: the sandbox job, the restore
 * from a spool and the fork's steps, the store again, the timer's
 * snapshot, the monitor's checks.
 */

/* A sandbox job's argument: which sandbox, and what to do (ops_sandbox.c, ops_exec.c). */
struct sandbox_job {
	struct op_job base;
	char id[ID_MAX];
	/*
	 * exec only: the command, and which sandbox of that id it was written
	 * to. An exec waits for a worker, and meanwhile its sandbox may be
	 * removed and another made under the name, another user's perhaps.
	 */
	char cmdline[ENTRYPOINT_MAX];
	int64_t created_at;
	uid_t owner_uid;
	struct exec_run *run; /* its output and who follows it (ops_exec.c) */
};

/* The job for sandbox @id and its place in @kind's queue; NULL (@e says why) if none is free. */
struct sandbox_job *sandbox_job_new(enum job_kind kind, const char *id, ops_done_fn done, void *ctx,
				    struct err *e);

/*
 * Bring sandbox @sb back to running from the checkpoint still in the spool
 * of snapshot @snap_id (a suspend whose storing failed): a fresh container
 * id, recorded in the registry while the sandbox is still suspending
 * (-ECANCELED once it is not: a terminate took it), then `runsc restore`.
 * Updates @sb (runtime_id, pid); the registry only for the id.
 */
int restore_from_spool(struct sandbox *sb, const char *snap_id, struct err *e);
/*
 * A fork, in three steps, so that a fan-out (ops_fanout.c) takes every
 * place and checks the snapshot once: fork_job_new() takes a place in the
 * lifecycle queue; fork_prepare() checks that @who may fork @snap_id here
 * and makes in @sb the sandbox every fork of it with @opts gets;
 * fork_submit() gives @sb (changed: its id, ports) a new id in @id_out,
 * records it and queues its restore in @job, which it drops on a refusal.
 */
void *fork_job_new(ops_done_fn done, void *ctx, struct err *e);
int fork_prepare(const struct caller *who, const char *snap_id, const struct fork_opts *opts,
		 struct snapshot *snap, struct sandbox *sb, struct err *e);
int fork_submit(void *job, const struct snapshot *snap, struct sandbox *sb, char id_out[ID_MAX],
		struct err *e);

/*
 * Can @snap be restored here? Appends one line per reason it cannot; returns their count, or a
 * negative errno when they could not be found or told.
 */
int restore_blockers(const struct snapshot *snap, struct strbuf *why);

/* Queue the store of @snap, in_progress with its checkpoint whole in the spool (ops_checkpoint.c).
 */
void snapshot_store_again(const struct snapshot *snap);

/*
 * The timer's snapshot of sandbox @id (ops_checkpoint.c): as a `snapshot`
 * write by the daemon, the row marked autosnap, which alone the prune may
 * delete.
 */
int autosnap_take(const char *id, const char *label, char snap_id_out[ID_MAX], ops_done_fn done,
		  void *ctx, struct err *e);

/* Mark running sandboxes whose process ended as terminated (the monitor thread). */
void monitor_sandboxes(void);
/* The `error` of a sandbox whose process ended under no limit it went over. */
#define SANDBOX_EXITED_MSG "the sandbox's process exited"
/*
 * The exit statuses of processes the daemon adopted (it is their
 * subreaper, lib/spawn.h): reaped by the monitor (exits_collect()), kept
 * until the sandbox whose pid it was is marked ended (exit_take()).
 */
void exits_collect(void);
/*
 * Has process @pid ended, waiting up to @wait_ms for it? A zombie has
 * (kill(pid, 0) still succeeds on one, and runsc asks just that).
 */
bool process_ended(pid_t pid, int wait_ms);
/*
 * Pidfds of up to @max running sandboxes' processes whose end is yet to
 * come, into @p (POLLIN): the monitor sleeps on them, so that an end is
 * seen as it happens. The caller closes them.
 */
struct pollfd;
size_t monitor_watch(struct pollfd *p, size_t max);
/*
 * An eventfd (made at the first call, never closed) that turns readable
 * when a sandbox starts running (sandbox_apply_if() to `running`): the
 * monitor watches its new pid at once rather than at its next period, so
 * an entrypoint that exits at once reads `terminated` within a second.
 */
int monitor_kick_fd(void);
/*
 * After an exec in sandbox @id (born @created_at) failed: true if the
 * sandbox ended under it (marked terminated now if the monitor had not),
 * with its `error` in @why ("out of memory: ..." for an OOM kill).
 */
bool sandbox_ended_under(const char *id, int64_t created_at, char *why, size_t size);

/*
 * --- warm pools (ops_warm.c) ------------------------------------------------
 *
 * warm_configure(): --warm-max (NULL: WARM_MAX_DEFAULT), at ops_open.
 * warm_reconcile(): at start-up, before the sandboxes are: delete the
 * members a last run left, load the pools' wants. warm_start() and
 * warm_stop() (which deletes every member) the filling thread.
 * warm_take(): under no lock, for fork @sb of @snap (fork_prepare()'s):
 * 0 with @sb now a ready member's row (its id, container, pid; state
 * starting, recorded durably), for the caller to resume; -ENOENT when no
 * member fits (restore as any fork); -EDQUOT over the owner's caps.
 * warm_drain(): a snapshot's delete empties its pool first, waiting for a
 * restore in flight.
 */
int warm_configure(const char *max, struct err *e);
void warm_reconcile(void);
int warm_start(void);
void warm_stop(void);
int warm_take(const struct snapshot *snap, struct sandbox *sb, struct err *e);
void warm_drain(const char *snap_id);

/* ======== floor 6: the top (ops_reconcile.c, ops_sync.c, ops_timer.c, ops_life.c) === */
/*
 * Start-up reconciliation (which the sync thread also calls, one way)
 * and the threads: called by ops_life.c's open, start and shutdown only.
 */

/* ops_reconcile.c's hooks used by ops_open. */
void reconcile_sandboxes(void);
void reconcile_snapshots(void);
/* Decide snapshot @id, left undecided by start-up, from the store (found ours just now). */
void reconcile_snapshot_id(const char *id);
/*
 * Leave snapshot @id for the store to decide (reconcile_snapshot_id()) once
 * it answers; the sync pass calls reconcile_settle() when it does.
 */
void reconcile_later(const char *id);
void reconcile_settle(void);

/*
 * Is @snap's a checkpoint to finish storing: this host's, pending or
 * in_progress, whole in the spool? The one rule reconcile_snapshots() leaves
 * it by, reconcile_sandboxes() keeps a suspend on, spool_empty() keeps its
 * spool by (reconcile_spool_wanted(), by id) and reconcile_stores() stores.
 */
bool snapshot_store_unfinished(const struct snapshot *snap);
bool reconcile_spool_wanted(const char *snap_id, void *arg);
/* A network start-up keeps (runtime/net/net.h net_sweep()): its sandbox's container runs on. */
bool reconcile_net_wanted(const char *runtime_id, void *arg);
/* After the job threads started: queue the stores of those (ops_start). */
void reconcile_stores(void);

/* --- the timer thread (ops_timer.c): start it (ops_start), stop it (ops_shutdown) --- */
int timer_start(void);
void timer_stop(void);

/*
 * --- the agents (ops_agent.c; runtime/agent/) -----------------------------
 *
 * Open the agent program (--agent @path; NULL: beside the daemon's
 * executable, else SNAPFS_AGENT_DEFAULT; none found is a warning, and
 * root/ answers EIO), held open for the daemon's life.
 */
int ops_agent_init(const char *path, struct err *e);
void ops_agent_fini(void);
/*
 * Before a checkpoint of @sb: its agent lets go of the channel, proven
 * (agent_detach()); -EBUSY when something inside still holds it.
 */
int ops_agent_detach(const struct sandbox *sb, struct err *e);
/* After it: attach again for execs that wait, or forget the agent of a sandbox that stopped. */
void ops_agent_after_checkpoint(const struct sandbox *sb, bool still_running);
/* Sandbox @id's container is gone: its agent with it. */
void ops_agent_forget(const char *id);
/*
 * Something changed inside sandbox @id: what root/ keeps of it (listing,
 * attributes, files read ahead) goes. ops_inside_exec_done(): an exec
 * ended, either way: also the names known absent in directories just made
 * through root/ (the command may have made them).
 */
void ops_inside_changed(const char *id);
void ops_inside_exec_done(const char *id);
/*
 * The monitor's pass: forget the agents of views no longer up
 * (snapview_current()), and the files read ahead that no open took.
 */
void ops_agent_prune_views(void);
/* An exec's output on its way (ops_agent_exec()). */
struct exec_stream {
	struct strbuf *out;					   /* appended to */
	size_t cap;						   /* @out's length it may reach */
	void (*progress)(void *ctx, const char *data, size_t len); /* NULL: none */
	void *ctx;
	/* The outcome. */
	bool truncated; /* past @cap: the command was killed */
	bool timed_out; /* at --exec-timeout: killed */
	int code;	/* the exit line's code */
};
/*
 * Run @cmdline in running sandbox @sb through its agent, its output into
 * @s as it comes. -ENOTCONN when the agent could not be had and nothing
 * was sent (the caller may take the slow way); -EIO when it died with the
 * command sent.
 */
int ops_agent_exec(const struct sandbox *sb, const char *cmdline, struct exec_stream *s,
		   struct err *e);
/*
 * --- one exec's output and who follows it (ops_exec_run.c) -----------------
 *
 * exec_run_new() makes @who's exec on @id, its writer (@progress, @done,
 * @ctx) its first follower, and the newest of (@id, @who's uid): a fresh
 * `cat exec` follows it (ops_sandbox_exec_follow()). exec_run_progress()
 * (an exec_stream's progress) hands output to every follower;
 * exec_run_end() the whole result, kept for later followers.
 */
struct exec_run;
struct exec_run *exec_run_new(const struct caller *who, const char *id, ops_progress_fn progress,
			      ops_done_fn done, void *ctx);
void exec_run_progress(void *run, const char *data, size_t len);
void exec_run_end(struct exec_run *r, int rc, const char *result, size_t len);
void exec_run_unref(struct exec_run *r);
/* Sandbox @id was removed: the output of its newest execs goes. */
void ops_exec_forget(const char *id);
/*
 * --- snapshots' views (ops_snapview.c) --------------------------------------
 *
 * The container of view @view_id when it is ready, and its use noted (the
 * idle clock starts again): -EAGAIN when it is not (torn down since the
 * caller's ops_snapview_want()).
 */
int snapview_container(const struct caller *who, const char *view_id,
		       char runtime_id[RUNTIME_ID_MAX], struct err *e);
/* Is @runtime_id the container of view @view_id, and is it ready? */
bool snapview_current(const char *view_id, const char *runtime_id);
/* The monitor's pass: tear down the views idle past their time. */
void snapview_tick(void);
/* Start-up: delete the views a daemon that ended left (their containers, directories). */
void snapview_sweep(void);
/* Before snapshot @snap_id is deleted: its view goes first (waits for a start under way). */
void snapview_drop(const char *snap_id);
/* Shutdown, once the jobs ended: delete every view. */
void snapview_fini(void);
/* A view's directory in <state>/sandboxes/: this, then its snapshot's id. */
#define VIEW_DIR_PREFIX ".view-"
/* ops_core.c: count a restore from snapshot @id (a delete is refused meanwhile); -ENOENT
 * while deleted. */
int snapshot_restore_begin(const char *id, struct err *e);
void snapshot_restore_end(const char *id);
/* A link target rewritten to stay under root/ (ops_inside_readlink()); -1: too long. */
int inside_link_contain(const char *link_path, const char *target, char *buf, size_t size);

#endif
