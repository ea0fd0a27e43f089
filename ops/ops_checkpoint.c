/*
 * ops_checkpoint.c - snapshot and suspend: the checkpoint and store jobs.
 *
 * A snapshot or suspend runs in two jobs:
 *   1. JOB_CHECKPOINT: `runsc checkpoint` into <state>/spool/<snap>. This is
 *      the only time the sandbox pauses (pause_ms). A snapshot leaves the
 *      sandbox running; a suspend pauses it, checkpoints it and deletes its
 *      container once the checkpoint is whole (take_checkpoint()).
 *   2. JOB_STORE: store the spool into the store (chunked, deduplicated,
 *      compressed; backend/store/store.h), manifest last; then the snapshot is
 *      `completed` and the spool becomes the snapshot's cached image
 *      (cache_adopt(), runtime/cache.h), which forks and resume reuse.
 *
 * A suspend's snapshot is all that is left of its sandbox, so from the
 * request on no delete may take it: the sandbox names it in
 * restore_snapshot (set under ops.lock before the job is queued, so a
 * local delete is refused from the start), and before the checkpoint a
 * hold in the store (store.h) refuses every other host's delete and keeps
 * collection off its packs. The hold goes when the sandbox stops needing
 * the snapshot: a failed suspend, a resume, a terminate (suspend_unhold()).
 *
 * The spool is shared by every checkpoint in flight: each reserves, under
 * ops.lock, what it may write (spool_reserved) from its request until its
 * checkpoint ends, so parallel ones cannot together overcommit the spool
 * and fail in runsc, which kills the sandbox. What it may write is its
 * memory limit where it has one (a queued checkpoint may start once the
 * sandbox has grown to it), else its resident memory, and a margin; the
 * job checks again when it starts, against the spool's free space then
 * and its resident memory then, and fails with the sandbox running rather
 * than write past it.
 */
#include "ops/ops_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/store/store.h"
#include "lib/names.h"
#include "lib/strbuf.h"
#include "runtime/cache.h"
#include "runtime/host.h"
#include "runtime/snapmeta.h"
#include "runtime/spool.h"

/* Room the spool needs beyond the sandbox's resident memory. */
#define SPOOL_MARGIN_BYTES (64ll << 20)

/*
 * Both places are taken before anything changes (jobs.h): the checkpoint's
 * in base, the store's in `store`, so a checkpoint taken is always stored.
 */
struct snap_job {
	struct op_job base; /* in JOB_CHECKPOINT */
	char snap_id[ID_MAX];
	char sandbox_id[ID_MAX];
	enum snapshot_kind kind;
	struct job *store; /* in JOB_STORE; NULL once queued */
	int64_t reserved;  /* spool bytes reserved for the checkpoint, under ops.lock */
};

/* Spool bytes the checkpoints in flight reserved, under ops.lock. */
static int64_t spool_reserved;

/* Give back what @job reserved in the spool: its checkpoint ended, either way. */
static void spool_release(struct snap_job *job)
{
	pthread_mutex_lock(&ops.lock);
	spool_reserved -= job->reserved;
	job->reserved = 0;
	pthread_mutex_unlock(&ops.lock);
}
OP_JOB_CHECK(struct snap_job);

/* A job for sandbox @sandbox_id, with its places; NULL (@e says why) when one is not free. */
static struct snap_job *snap_job_new(const char *sandbox_id, enum snapshot_kind kind,
				     ops_done_fn done, void *ctx, struct err *e)
{
	struct snap_job *job = op_job_new(sizeof(*job), JOB_CHECKPOINT, done, ctx, e);
	if (!job)
		return NULL;
	job->store = jobs_reserve(JOB_STORE, e);
	if (!job->store) {
		op_job_drop(job, 0);
		return NULL;
	}
	snprintf(job->sandbox_id, sizeof(job->sandbox_id), "%s", sandbox_id);
	job->kind = kind;
	return job;
}

/* Free @job and give back the places it did not use. */
static void snap_job_free(struct snap_job *job)
{
	spool_release(job);
	jobs_cancel(job->store);
	op_job_drop(job, 0);
}

/* Mark @snap failed with @e's message, report it, and tell the waiting writer. */
static void snapshot_fail(struct snapshot *snap, struct snap_job *job, const struct err *e)
{
	snap->state = SNAP_FAILED;
	snap->completed_at = now_ms();
	snprintf(snap->message, sizeof(snap->message), "%s", e->msg);
	snapshot_save(snap);
	progress_clear(snap->id);
	report_job_failure(OPS_OBJ_SNAPSHOT, snap->id, "status", e);
	complete(job->base.done, job->base.ctx, -(e->code ? e->code : EIO), NULL, 0);
}

/* The same when the row could not be read: fail it by id. Frees @job. */
static void snapshot_fail_id(struct snap_job *job, const struct err *e)
{
	struct snapshot snap;
	if (row_snapshot_get(job->snap_id, &snap) < 0) {
		complete(job->base.done, job->base.ctx, -(e->code ? e->code : EIO), NULL, 0);
		snap_job_free(job);
		return;
	}
	snapshot_fail(&snap, job, e);
	snap_job_free(job);
}

/* --- checkpoint ------------------------------------------------------------ */

/* Resident memory of the sandbox process: what its checkpoint will need at most. */
static int64_t sandbox_memory_bytes(pid_t pid)
{
	char path[64];
	long pages = 0, resident = 0;
	snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
	_cleanup_fclose_ FILE *f = pid > 0 ? fopen(path, "re") : NULL;
	if (!f || fscanf(f, "%ld %ld", &pages, &resident) != 2)
		return 0;
	return (int64_t)resident * sysconf(_SC_PAGESIZE);
}

/*
 * The spool bytes @sb's checkpoint may write: its memory limit where it
 * has one, for it may grow to it before a queued checkpoint starts; its
 * resident memory now where that is more, or where it has none; and the
 * margin.
 */
static int64_t spool_need(const struct sandbox *sb)
{
	int64_t rss = sandbox_memory_bytes(sb->pid), limit = sb->res.memory_bytes;
	return (limit > rss ? limit : rss) + SPOOL_MARGIN_BYTES;
}

/*
 * When @job's checkpoint starts: the spool's free space now, less what the
 * others in flight reserved, must still hold what it may write (@sb
 * resident now may be more than at the request, with no limit), which it
 * then reserves. -ENOSPC (in @e) if it does not: a file written into the
 * spool, or a sandbox grown, since the request.
 */
static int spool_recheck(struct snap_job *job, const struct sandbox *sb, struct err *e)
{
	int64_t need = spool_need(sb);
	int rc = 0;
	pthread_mutex_lock(&ops.lock);
	if (need < job->reserved)
		need = job->reserved;
	int64_t have = free_bytes(ops.spool_dir), others = spool_reserved - job->reserved;
	if (have >= 0 && have - others < need) {
		rc = -ENOSPC;
	} else {
		spool_reserved += need - job->reserved;
		job->reserved = need;
	}
	pthread_mutex_unlock(&ops.lock);
	if (rc < 0)
		return err_set(
		    e, ENOSPC,
		    "cannot checkpoint sandbox %s: the spool %s has %lld MiB free as the "
		    "checkpoint starts, %lld MiB of it reserved by other checkpoints; it "
		    "needs %lld MiB",
		    sb->id, ops.spool_dir, (long long)(have >> 20), (long long)(others >> 20),
		    (long long)(need >> 20));
	return 0;
}

/* The states a checkpoint job owns; a terminate may take the sandbox from it meanwhile. */
#define CHECKPOINTING (STATE_BIT(SB_SNAPSHOTTING) | STATE_BIT(SB_SUSPENDING))

/*
 * After a checkpoint failed (or ran past its deadline and was killed):
 * runsc may have killed the sandbox, so ask what is left.
 */
static void sandbox_after_failed_checkpoint(const struct snap_job *job, const char *runtime_id,
					    const struct err *e)
{
	char msg[MESSAGE_MAX];
	struct sb_patch p = SB_PATCH(SB_FAILED);
	enum runsc_status st = runsc_state(&ops.runsc, runtime_id, NULL, NULL);
	snprintf(msg, sizeof(msg), "%s", e->msg);
	if (st == RUNSC_RUNNING)
		p.state = SB_RUNNING;
	/* A suspend's pause that would not end: stopped rather than left holding its memory. */
	if (st == RUNSC_PAUSED && container_delete(runtime_id, NULL) == 0)
		snprintf(msg, sizeof(msg), "%.900s; the sandbox would not resume and was stopped",
			 e->msg);
	p.message = msg;
	p.restore_snapshot = "";
	sandbox_apply_if(job->sandbox_id, CHECKPOINTING, p);
	if (job->kind == SNAP_KIND_SUSPEND)
		suspend_unhold(job->sandbox_id, job->snap_id);
}

static void store_job(void *arg);
static void store_failed(struct snap_job *job, struct snapshot *snap, struct err *e);

/*
 * The checkpoint itself, CUDA state first (ops_gpu.c); the pause is the
 * gVisor checkpoint alone. A suspend pauses the sandbox, checkpoints it
 * with --leave-running and leaves the delete to its caller, once the
 * checkpoint is marked whole: were snapfs killed meanwhile, the container
 * a restart finds says what happened (paused: resume it or store a whole
 * checkpoint; gone: the checkpoint is whole), where a checkpoint that
 * stops the sandbox itself may stop it after the restart saw it running.
 * runsc's own CUDA checkpoint runs inside the sandbox, which a pause would
 * stop: that suspend keeps the checkpoint that stops the sandbox.
 */
static int take_checkpoint(const struct snap_job *job, const struct sandbox *sb, const char *spool,
			   struct snapshot *snap, struct err *e)
{
	bool leave_running = job->kind == SNAP_KIND_SNAPSHOT;
	struct ops_gpu_checkpoint gpu;
	/* Nothing inside may hold a host file when runsc saves it: the agent lets go first. */
	int rc = ops_agent_detach(sb, e);
	if (rc < 0)
		return rc;
	rc = ops_gpu_before_checkpoint(sb, spool, &gpu, e);
	if (rc < 0)
		return rc;
	bool paused = !leave_running && !gpu.runsc_cuda;
	int64_t t0 = mono_ms();
	if (paused)
		rc = runsc_pause(&ops.runsc, sb->runtime_id, e);
	/*
	 * --direct only where the pause matters: a suspend stops the sandbox
	 * anyway, and pages that went around the page cache must be read back.
	 */
	struct runsc_checkpoint_opts o = {.image_dir = spool,
					  .leave_running = leave_running || paused,
					  .direct = leave_running,
					  .cuda_checkpoint = gpu.runsc_cuda,
					  .mem_bytes = sandbox_memory_bytes(sb->pid)};
	if (rc == 0)
		rc = runsc_checkpoint(&ops.runsc, sb->runtime_id, &o, e);
	/* A suspend that failed runs on; a failed checkpoint may have ended it (runsc.h). */
	if (rc < 0 && paused)
		container_unpause(sb->runtime_id, NULL);
	snap->pause_ms = mono_ms() - t0;
	if (rc == 0 && leave_running)
		metrics_pause_observe(snap->pause_ms);
	ops_agent_after_checkpoint(sb, leave_running || rc < 0);
	return ops_gpu_after_checkpoint(&gpu, leave_running, rc, e);
}

static void checkpoint_job(void *arg)
{
	struct snap_job *job = arg;
	struct snapshot snap;
	struct sandbox sb;
	struct err e = {0};
	char spool[PATH_MAX];
	bool leave_running = job->kind == SNAP_KIND_SNAPSHOT;
	if (row_snapshot_get(job->snap_id, &snap) < 0 ||
	    row_sandbox_get(job->sandbox_id, &sb) < 0) {
		/* Only a broken registry gets here: leave nothing transitional. */
		err_set(&e, EIO, "cannot read snapshot %s or sandbox %s from the registry",
			job->snap_id, job->sandbox_id);
		sandbox_apply(job->sandbox_id, SB_PATCH(SB_RUNNING));
		snapshot_fail_id(job, &e);
		return;
	}
	snap.state = SNAP_IN_PROGRESS;
	snapshot_save(&snap);
	ops_spool_path(snap.id, spool, sizeof(spool));
	rm_rf(spool);
	int rc = spool_recheck(job, &sb, &e);
	/* Held before the container can go: from then on no host deletes the snapshot. */
	if (rc == 0 && !leave_running)
		rc = suspend_hold(sb.id, snap.id, &e);
	if (rc == 0)
		rc = take_checkpoint(job, &sb, spool, &snap, &e);
	spool_release(job); /* what it wrote is in the spool's free space now */
	/* A restart stores a whole checkpoint rather than lose it (spool.h). */
	if (rc == 0 && spool_mark_whole(snap.id) < 0)
		warning("cannot mark the checkpoint of %s whole: a restart will not store it",
			snap.id);
	if (rc < 0) {
		rm_rf(spool);
		sandbox_after_failed_checkpoint(job, sb.runtime_id, &e);
		snapshot_fail(&snap, job, &e);
		snap_job_free(job);
		return;
	}
	if (leave_running) {
		sandbox_apply_if(sb.id, STATE_BIT(SB_SNAPSHOTTING), SB_PATCH(SB_RUNNING));
	} else {
		/* Marked whole: the container goes, paused (or stopped by runsc's CUDA checkpoint).
		 */
		if (container_delete(sb.runtime_id, &e) < 0)
			warning("suspend of sandbox %s: %s; the next start-up deletes it", sb.id,
				e.msg);
		err_clear(&e);
		struct sb_patch p = SB_PATCH(SB_SUSPENDING);
		p.pid = 0;
		sandbox_apply_if(sb.id, STATE_BIT(SB_SUSPENDING), p);
	}
	snapshot_save(&snap);
	jobs_queue(steal_ptr(job->store), store_job, job);
}

/* --- store ----------------------------------------------------------------- */

static void store_progress(void *arg, int64_t done, int64_t total)
{
	progress_set(arg, done, total);
}

/*
 * A suspend whose snapshot could not be stored: its container is gone, but
 * the checkpoint is still in the spool, so run the sandbox again from it
 * rather than lose it.
 */
static void suspend_not_stored(const struct snap_job *job, const struct err *why)
{
	struct sandbox sb;
	struct err e = {0};
	char msg[MESSAGE_MAX];
	int rc = row_sandbox_get(job->sandbox_id, &sb);
	/* Terminated meanwhile: nothing to bring back. */
	if (rc < 0 || sb.state != SB_SUSPENDING)
		return;
	rc = restore_from_spool(&sb, job->snap_id, &e);
	struct sb_patch p = SB_PATCH(rc == 0 ? SB_RUNNING : SB_FAILED);
	snprintf(msg, sizeof(msg), "suspend failed: %.400s; %s%.400s", why->msg,
		 rc == 0 ? "the sandbox runs again" : "the sandbox could not be restored: ",
		 rc == 0 ? "" : e.msg);
	p.message = msg;
	p.restore_snapshot = "";
	if (rc == 0) {
		p.runtime_id = sb.runtime_id;
		p.pid = sb.pid;
	}
	if (sandbox_apply_if(job->sandbox_id, STATE_BIT(SB_SUSPENDING), p) < 0 && rc == 0)
		runsc_delete(&ops.runsc, sb.runtime_id, NULL);
}

static void store_failed(struct snap_job *job, struct snapshot *snap, struct err *e)
{
	char spool[PATH_MAX];
	if (!e->code)
		err_set(e, EIO, "cannot store snapshot %s", job->snap_id);
	if (job->kind == SNAP_KIND_SUSPEND) {
		suspend_not_stored(job, e);
		suspend_unhold(job->sandbox_id, job->snap_id);
	}
	ops_spool_path(job->snap_id, spool, sizeof(spool));
	spool_unmark(job->snap_id);
	rm_rf(spool);
	snapshot_fail(snap, job, e);
	snap_job_free(job);
}

/*
 * Shutdown gave up on a store that does not answer (ops.store_stop): the
 * checkpoint stays whole in the spool and the row in_progress, so the next
 * start stores it (snapshot_store_again()); a suspend's sandbox stays
 * suspending until then.
 */
static void store_left_to_restart(struct snap_job *job, const struct err *e)
{
	warning("left snapshot %s to the next start: the store did not answer at shutdown (%s)",
		job->snap_id, e->msg);
	complete(job->base.done, job->base.ctx, -ESHUTDOWN, NULL, 0);
	snap_job_free(job);
}

static void store_job(void *arg)
{
	struct snap_job *job = arg;
	struct snapshot snap;
	_cleanup_free_ char *manifest = NULL;
	struct store_put_result res = {.manifest = &manifest};
	struct err e = {0};
	char spool[PATH_MAX];
	if (row_snapshot_get(job->snap_id, &snap) < 0) {
		err_set(&e, EIO, "cannot read snapshot %s from the registry", job->snap_id);
		if (job->kind == SNAP_KIND_SUSPEND) {
			suspend_not_stored(job, &e);
			suspend_unhold(job->sandbox_id, job->snap_id);
		}
		snapshot_fail_id(job, &e);
		return;
	}
	cJSON *meta = snapmeta_build(&snap, ops.runsc.version);
	int rc = meta ? 0 : err_set(&e, ENOMEM, "cannot build the manifest of %s", snap.id);
	ops_spool_path(job->snap_id, spool, sizeof(spool));
	int64_t t0 = mono_ms();
	if (meta)
		cuda_manifest_meta(meta, spool);
	cancel_bind(&ops.store_stop);
	if (rc == 0)
		rc = store_put_snapshot(ops.store, snap.id, spool, meta, store_progress, snap.id,
					&res, &e);
	bool given_up = rc < 0 && cancel_requested();
	cancel_bind(NULL);
	cJSON_Delete(meta);
	if (given_up) {
		store_left_to_restart(job, &e);
		return;
	}
	if (rc < 0) {
		store_failed(job, &snap, &e);
		return;
	}
	info("stored snapshot %s: %lld MiB, %lld MiB new in the store, in %lld ms", snap.id,
	     (long long)(res.size_bytes >> 20), (long long)(res.stored_bytes >> 20),
	     (long long)(mono_ms() - t0));
	spool_unmark(snap.id);
	cache_adopt(snap.id, spool, manifest);
	cache_trim();
	snap.state = SNAP_COMPLETED;
	snap.completed_at = now_ms();
	snap.size_bytes = res.size_bytes;
	snap.stored_bytes = res.stored_bytes;
	progress_clear(snap.id);
	rc = snapshot_save(&snap);
	/* Terminated meanwhile: its terminate may have gone before the hold did. */
	if (job->kind == SNAP_KIND_SUSPEND &&
	    sandbox_apply_if(job->sandbox_id, STATE_BIT(SB_SUSPENDING), SB_PATCH(SB_SUSPENDED)) < 0)
		suspend_unhold(job->sandbox_id, job->snap_id);
	/* Not recorded, not even in memory (ops_rows.c): no success for what nobody can read. */
	if (rc < 0) {
		err_set(&e, -rc,
			"cannot record snapshot %s as completed: %s (it is whole in the store: a "
			"restart finds it)",
			snap.id, strerror(-rc));
		report_job_failure(OPS_OBJ_SNAPSHOT, snap.id, "status", &e);
	}
	complete(job->base.done, job->base.ctx, rc, NULL, 0);
	snap_job_free(job);
}

/*
 * A store a killed daemon left unfinished, its checkpoint whole in the spool
 * (ops_open() kept it): store it as the checkpoint job would have, with no
 * one waiting. Only the store's place is taken: the checkpoint is done.
 */
void snapshot_store_again(const struct snapshot *snap)
{
	struct err e = {0};
	struct snap_job *job = calloc(1, sizeof(*job));
	if (job)
		job->store = jobs_reserve(JOB_STORE, &e);
	if (!job || !job->store) {
		free(job);
		warning("cannot store snapshot %s again: %s", snap->id,
			e.code ? e.msg : "out of memory");
		return; /* left in_progress, and whole: the next start tries again */
	}
	memcpy(job->snap_id, snap->id, ID_MAX);
	memcpy(job->sandbox_id, snap->sandbox_id, ID_MAX);
	job->kind = snap->kind;
	info("storing snapshot %s, interrupted by a restart, from its checkpoint", snap->id);
	jobs_queue(steal_ptr(job->store), store_job, job);
}

/* --- snapshot and suspend ------------------------------------------------ */

static int check_label(const char *label, struct err *e)
{
	if (strlen(label) >= LABEL_MAX)
		return err_set(e, EINVAL, "snapshot name is longer than %d bytes", LABEL_MAX - 1);
	if (!label_ok(label, LABEL_MAX))
		return err_set(e, EINVAL, "snapshot name may not hold spaces or controls");
	/* It names a file in snapshots/by-name/ (an empty label is no name: none given). */
	if (label[0] && !label_file_ok(label, LABEL_MAX))
		return err_set(
		    e, EINVAL,
		    "snapshot name '%s' is no file name: no '/', and not '.', '..' or '-'", label);
	return 0;
}

/*
 * Reserve room in the spool for @sb's checkpoint (@job->reserved): what it
 * may write (spool_need()), out of what is free less what checkpoints in
 * flight reserved. -ENOSPC if it does not fit.
 */
static int reserve_spool_room(const struct sandbox *sb, struct snap_job *job, struct err *e)
{
	int64_t need = spool_need(sb);
	int rc = 0;
	pthread_mutex_lock(&ops.lock);
	int64_t have = free_bytes(ops.spool_dir), reserved = spool_reserved;
	if (have >= 0 && have - reserved < need)
		rc = -ENOSPC;
	else
		spool_reserved += job->reserved = need;
	pthread_mutex_unlock(&ops.lock);
	if (rc < 0)
		return err_set(e, ENOSPC,
			       "cannot checkpoint sandbox %s: the spool %s has %lld MiB free, %lld "
			       "MiB of it reserved by checkpoints in flight; it needs %lld MiB",
			       sb->id, ops.spool_dir, (long long)(have >> 20),
			       (long long)(reserved >> 20), (long long)(need >> 20));
	return 0;
}

static int insert_snapshot(const struct sandbox *sb, enum snapshot_kind kind, const char *label,
			   bool autosnap, char id_out[ID_MAX], struct err *e)
{
	struct snapshot snap = {0};
	_cleanup_strbuf_ struct strbuf host = STRBUF_INIT;
	int rc = new_object_id("snap-", snap.id);
	if (rc == 0)
		rc = host_profile_json(ops.runsc.version, &host);
	/* Cut, it would name no host: the snapshot would be no sandbox's here. */
	if (rc == 0)
		rc = xsnprintf(snap.host_json, sizeof(snap.host_json), "%s", strbuf_str(&host));
	if (rc < 0)
		return err_set(e, -rc, "cannot prepare snapshot of %s: %s", sb->id, strerror(-rc));
	snprintf(snap.name, sizeof(snap.name), "%s", label ? label : "");
	snap.kind = kind;
	snap.autosnap = autosnap;
	snprintf(snap.sandbox_id, sizeof(snap.sandbox_id), "%s", sb->id);
	snap.created_at = now_ms();
	snap.state = SNAP_PENDING;
	memcpy(snap.image, sb->image, sizeof(snap.image));
	memcpy(snap.image_digest, sb->image_digest, sizeof(snap.image_digest));
	memcpy(snap.entrypoint, sb->entrypoint, sizeof(snap.entrypoint));
	memcpy(snap.env, sb->env, sizeof(snap.env));
	snap.gpu = sb->gpu;
	snap.res = sb->res;
	snap.timeout_s = sb->timeout_s;
	snap.timeout_action = sb->timeout_action;
	ops_ports_snapshot(&snap, sb);
	snap.network = sb->network;
	memcpy(snap.egress, sb->egress, sizeof(snap.egress));
	snap.owner_uid = sb->owner_uid;
	snap.owner_gid = sb->owner_gid;
	pthread_mutex_lock(&ops.lock);
	rc = row_snapshot_insert(&snap);
	pthread_mutex_unlock(&ops.lock);
	if (rc < 0)
		return err_set(e, EIO, "cannot record a snapshot of %s: %s", sb->id, strerror(-rc));
	memcpy(id_out, snap.id, ID_MAX);
	announce_snapshot(snap.id, snap.state, NULL);
	ops_notify(OPS_OBJ_LIST, snap.id);
	return 0;
}

/*
 * The common start of snapshot and suspend: checks, transition, record,
 * queue. @autosnap marks the snapshot the timer's (struct snapshot).
 */
static int begin_checkpoint(const struct caller *who, const char *id, enum snapshot_kind kind,
			    const char *label, bool autosnap, char snap_id[ID_MAX],
			    ops_done_fn done, void *ctx, struct err *e)
{
	const char *verb = kind == SNAP_KIND_SNAPSHOT ? "snapshot" : "suspend";
	enum sandbox_state during = kind == SNAP_KIND_SNAPSHOT ? SB_SNAPSHOTTING : SB_SUSPENDING;
	struct sandbox sb;
	/* Places first: a full queue refuses with the sandbox still running. */
	struct snap_job *job = snap_job_new(id, kind, done, ctx, e);
	if (!job)
		return -e->code;
	int rc = sandbox_begin(who, id, STATE_BIT(SB_RUNNING), during, verb, &sb, e);
	if (rc < 0) {
		snap_job_free(job);
		return rc;
	}
	rc = reserve_spool_room(&sb, job, e);
	if (rc == 0)
		rc = insert_snapshot(&sb, kind, label, autosnap, snap_id, e);
	if (rc < 0) {
		snap_job_free(job);
		sandbox_apply(id, SB_PATCH(SB_RUNNING));
		return rc;
	}
	/*
	 * Named before the checkpoint: from here on a delete of the snapshot is
	 * refused. A terminate in between keeps it from being named; the job
	 * then finds its checkpoint cancelled.
	 */
	if (kind == SNAP_KIND_SUSPEND) {
		struct sb_patch p = SB_PATCH(SB_SUSPENDING);
		p.restore_snapshot = snap_id;
		sandbox_apply_if(id, STATE_BIT(SB_SUSPENDING), p);
	}
	memcpy(job->snap_id, snap_id, ID_MAX);
	op_job_queue(job, checkpoint_job);
	return 0;
}

int ops_sandbox_snapshot(const struct caller *who, const char *id, const char *label,
			 char snap_id_out[ID_MAX], ops_done_fn done, void *ctx, struct err *e)
{
	int rc = label ? check_label(label, e) : 0;
	if (rc < 0)
		return rc;
	return begin_checkpoint(who, id, SNAP_KIND_SNAPSHOT, label, false, snap_id_out, done, ctx,
				e);
}

int autosnap_take(const char *id, const char *label, char snap_id_out[ID_MAX], ops_done_fn done,
		  void *ctx, struct err *e)
{
	int rc = check_label(label, e);
	if (rc < 0)
		return rc;
	return begin_checkpoint(&access_root, id, SNAP_KIND_SNAPSHOT, label, true, snap_id_out,
				done, ctx, e);
}

int ops_sandbox_suspend(const struct caller *who, const char *id, ops_done_fn done, void *ctx,
			struct err *e)
{
	char snap_id[ID_MAX];
	return begin_checkpoint(who, id, SNAP_KIND_SUSPEND, NULL, false, snap_id, done, ctx, e);
}
