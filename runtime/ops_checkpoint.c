/*
 * ops_checkpoint.c - snapshot and suspend: the checkpoint and store jobs.
 *
 * A snapshot or suspend runs in two jobs:
 *   1. JOB_CHECKPOINT: `runsc checkpoint` into <state>/spool/<snap>. This is
 *      the only time the sandbox pauses (pause_ms). A snapshot leaves the
 *      sandbox running; a suspend stops it and deletes its container.
 *   2. JOB_STORE: store the spool into the store (chunked, deduplicated,
 *      compressed; backend/store.h), manifest last; then the snapshot is
 *      `completed` and the spool becomes the snapshot's cached image
 *      (cache_adopt(), runtime/cache.h), which forks and resume reuse.
 */
#include "runtime/ops_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "backend/store.h"
#include "lib/names.h"
#include "lib/strbuf.h"
#include "runtime/cache.h"
#include "runtime/host.h"
#include "runtime/snapmeta.h"

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
};
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

/* The states a checkpoint job owns; a terminate may take the sandbox from it meanwhile. */
#define CHECKPOINTING (STATE_BIT(SB_SNAPSHOTTING) | STATE_BIT(SB_SUSPENDING))

/*
 * After a checkpoint failed (or ran past its deadline and was killed):
 * runsc may have killed the sandbox, so ask what is left.
 */
static void sandbox_after_failed_checkpoint(const char *id, const char *runtime_id,
					    const struct err *e)
{
	struct sb_patch p = SB_PATCH(SB_FAILED);
	if (runsc_state(&ops.runsc, runtime_id, NULL, NULL) == RUNSC_RUNNING)
		p.state = SB_RUNNING;
	p.message = e->msg;
	sandbox_apply_if(id, CHECKPOINTING, p);
}

static void store_job(void *arg);
static void store_failed(struct snap_job *job, struct snapshot *snap, struct err *e);

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
	spool_path(snap.id, spool, sizeof(spool));
	rm_rf(spool);
	/* CUDA state first (ops_gpu.c); the pause is the gVisor checkpoint alone. */
	struct gpu_checkpoint gpu;
	int rc = gpu_before_checkpoint(&sb, spool, &gpu, &e);
	if (rc == 0) {
		int64_t t0 = mono_ms();
		/*
		 * --direct only where the pause matters: a suspend stops the sandbox
		 * anyway, and pages that went around the page cache must be read back.
		 */
		struct runsc_checkpoint_opts o = {.image_dir = spool,
						  .leave_running = leave_running,
						  .direct = leave_running,
						  .cuda_checkpoint = gpu.runsc_cuda,
						  .mem_bytes = sandbox_memory_bytes(sb.pid)};
		rc = runsc_checkpoint(&ops.runsc, sb.runtime_id, &o, &e);
		snap.pause_ms = mono_ms() - t0;
		rc = gpu_after_checkpoint(&gpu, leave_running, rc, &e);
	}
	if (rc < 0) {
		rm_rf(spool);
		sandbox_after_failed_checkpoint(sb.id, sb.runtime_id, &e);
		snapshot_fail(&snap, job, &e);
		snap_job_free(job);
		return;
	}
	if (leave_running) {
		sandbox_apply_if(sb.id, STATE_BIT(SB_SNAPSHOTTING), SB_PATCH(SB_RUNNING));
	} else {
		/* The container stopped with the checkpoint: release it. */
		runsc_delete(&ops.runsc, sb.runtime_id, NULL);
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
	if (job->kind == SNAP_KIND_SUSPEND)
		suspend_not_stored(job, e);
	spool_path(job->snap_id, spool, sizeof(spool));
	rm_rf(spool);
	snapshot_fail(snap, job, e);
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
		if (job->kind == SNAP_KIND_SUSPEND)
			suspend_not_stored(job, &e);
		snapshot_fail_id(job, &e);
		return;
	}
	cJSON *meta = snapmeta_build(&snap, ops.runsc.version);
	int rc = meta ? 0 : err_set(&e, ENOMEM, "cannot build the manifest of %s", snap.id);
	spool_path(job->snap_id, spool, sizeof(spool));
	int64_t t0 = mono_ms();
	if (meta)
		gpu_manifest_meta(meta, spool);
	if (rc == 0)
		rc = store_put_snapshot(ops.store, snap.id, spool, meta, store_progress, snap.id,
					&res, &e);
	cJSON_Delete(meta);
	if (rc < 0) {
		store_failed(job, &snap, &e);
		return;
	}
	info("stored snapshot %s: %lld MiB, %lld MiB new in the store, in %lld ms", snap.id,
	     (long long)(res.size_bytes >> 20), (long long)(res.stored_bytes >> 20),
	     (long long)(mono_ms() - t0));
	cache_adopt(snap.id, spool, manifest);
	cache_trim();
	snap.state = SNAP_COMPLETED;
	snap.completed_at = now_ms();
	snap.size_bytes = res.size_bytes;
	snap.stored_bytes = res.stored_bytes;
	progress_clear(snap.id);
	rc = snapshot_save(&snap);
	if (job->kind == SNAP_KIND_SUSPEND) {
		struct sb_patch p = SB_PATCH(SB_SUSPENDED);
		p.restore_snapshot = job->snap_id;
		sandbox_apply_if(job->sandbox_id, STATE_BIT(SB_SUSPENDING), p);
	}
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

/* --- snapshot and suspend ------------------------------------------------ */

static int check_label(const char *label, struct err *e)
{
	if (strlen(label) >= LABEL_MAX)
		return err_set(e, EINVAL, "snapshot name is longer than %d bytes", LABEL_MAX - 1);
	if (!label_ok(label, LABEL_MAX))
		return err_set(e, EINVAL, "snapshot name may not hold spaces or controls");
	return 0;
}

static int check_spool_room(const struct sandbox *sb, struct err *e)
{
	int64_t need = sandbox_memory_bytes(sb->pid) + SPOOL_MARGIN_BYTES;
	int64_t have = free_bytes(ops.spool_dir);
	if (have >= 0 && have < need)
		return err_set(e, ENOSPC,
			       "cannot checkpoint sandbox %s: the spool %s has %lld MiB free, it "
			       "needs %lld MiB",
			       sb->id, ops.spool_dir, (long long)(have >> 20),
			       (long long)(need >> 20));
	return 0;
}

static int insert_snapshot(const struct sandbox *sb, enum snapshot_kind kind, const char *label,
			   char id_out[ID_MAX], struct err *e)
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
	snprintf(snap.sandbox_id, sizeof(snap.sandbox_id), "%s", sb->id);
	snap.created_at = now_ms();
	snap.state = SNAP_PENDING;
	memcpy(snap.image, sb->image, sizeof(snap.image));
	memcpy(snap.image_digest, sb->image_digest, sizeof(snap.image_digest));
	memcpy(snap.entrypoint, sb->entrypoint, sizeof(snap.entrypoint));
	memcpy(snap.env, sb->env, sizeof(snap.env));
	snap.gpu = sb->gpu;
	snap.owner_uid = sb->owner_uid;
	snap.owner_gid = sb->owner_gid;
	pthread_mutex_lock(&ops.lock);
	rc = registry_snapshot_insert(ops.reg, &snap);
	pthread_mutex_unlock(&ops.lock);
	if (rc < 0)
		return err_set(e, EIO, "cannot record a snapshot of %s: %s", sb->id, strerror(-rc));
	memcpy(id_out, snap.id, ID_MAX);
	announce_snapshot(snap.id, snap.state, NULL);
	notify(OPS_OBJ_LIST, snap.id);
	return 0;
}

/* The common start of snapshot and suspend: checks, transition, record, queue. */
static int begin_checkpoint(const struct caller *who, const char *id, enum snapshot_kind kind,
			    const char *label, char snap_id[ID_MAX], ops_done_fn done, void *ctx,
			    struct err *e)
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
	rc = check_spool_room(&sb, e);
	if (rc == 0)
		rc = insert_snapshot(&sb, kind, label, snap_id, e);
	if (rc < 0) {
		snap_job_free(job);
		sandbox_apply(id, SB_PATCH(SB_RUNNING));
		return rc;
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
	return begin_checkpoint(who, id, SNAP_KIND_SNAPSHOT, label, snap_id_out, done, ctx, e);
}

int ops_sandbox_suspend(const struct caller *who, const char *id, ops_done_fn done, void *ctx,
			struct err *e)
{
	char snap_id[ID_MAX];
	return begin_checkpoint(who, id, SNAP_KIND_SUSPEND, NULL, snap_id, done, ctx, e);
}
