/*
 * ops_snapshot.c - snapshot, suspend, resume, fork and delete.
 *
 * A snapshot or suspend runs in two jobs:
 *   1. JOB_CHECKPOINT: `runsc checkpoint` into <state>/spool/<snap>. This is
 *      the only time the sandbox pauses (pause_ms). A snapshot leaves the
 *      sandbox running; a suspend stops it and deletes its container.
 *   2. JOB_STORE: store the spool into the store (chunked, deduplicated,
 *      compressed; backend/store.h), manifest last; then the snapshot is
 *      `completed` and the spool becomes the snapshot's local cache
 *      (<state>/cache/<snap>, runtime/cache.h), which forks and resume reuse.
 * A fork or resume (JOB_LIFECYCLE) materializes the snapshot into the cache
 * when it is not there (every chunk verified), writes a bundle and runs
 * `runsc restore --detach`. The cache is bounded: least recently used
 * images go first, never one a restore is reading. Every image keeps its
 * manifest, so a materialize copies the chunks that images already cached
 * hold (earlier snapshots of the same sandbox share most) and downloads
 * only the rest.
 */
#include "runtime/ops_internal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/manifest.h"
#include "backend/store.h"
#include "lib/names.h"
#include "lib/strbuf.h"
#include "runtime/cache.h"
#include "runtime/host.h"
#include "runtime/images.h"
#include "runtime/jobs.h"
#include "runtime/snapmeta.h"

/* Room the spool needs beyond the sandbox's resident memory. */
#define SPOOL_MARGIN_BYTES (64ll << 20)
/*
 * A materialize looks at the DONORS_SCAN most recently used cached images
 * and copies chunks from DONORS_USED of them, those of the same sandbox
 * first: each costs a parse of its manifest, and a sandbox's own earlier
 * snapshots hold nearly every chunk of its next one.
 */
#define DONORS_SCAN 32
#define DONORS_USED 8

struct snap_job {
	char snap_id[ID_MAX];
	char sandbox_id[ID_MAX];
	enum snapshot_kind kind;
	ops_done_fn done;
	void *ctx;
	/* Places in the queues, both taken before anything changes (jobs.h). */
	struct job *checkpoint, *store;
};

/* A job for sandbox @sandbox_id, with its places; NULL (@e says why) when one is not free. */
static struct snap_job *snap_job_new(const char *sandbox_id, enum snapshot_kind kind,
				     ops_done_fn done, void *ctx, struct err *e)
{
	struct snap_job *job = calloc(1, sizeof(*job));
	if (!job) {
		err_set(e, ENOMEM, "out of memory");
		return NULL;
	}
	job->checkpoint = jobs_reserve(JOB_CHECKPOINT, e);
	job->store = job->checkpoint ? jobs_reserve(JOB_STORE, e) : NULL;
	if (!job->store) {
		jobs_cancel(job->checkpoint);
		free(job);
		return NULL;
	}
	snprintf(job->sandbox_id, sizeof(job->sandbox_id), "%s", sandbox_id);
	job->kind = kind;
	job->done = done;
	job->ctx = ctx;
	return job;
}

/* Free @job and give back the places it did not use. */
static void snap_job_free(struct snap_job *job)
{
	jobs_cancel(job->checkpoint);
	jobs_cancel(job->store);
	free(job);
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
	complete(job->done, job->ctx, -(e->code ? e->code : EIO), NULL, 0);
}

/* The same when the row could not be read: fail it by id. Frees @job. */
static void snapshot_fail_id(struct snap_job *job, const struct err *e)
{
	struct snapshot snap;
	if (registry_snapshot_get(ops.reg, job->snap_id, &snap) < 0) {
		complete(job->done, job->ctx, -(e->code ? e->code : EIO), NULL, 0);
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
	char status[32] = "";
	pid_t pid = 0;
	int rc = runsc_state(&ops.runsc, runtime_id, status, sizeof(status), &pid, NULL);
	struct sb_patch p = SB_PATCH(SB_FAILED);
	if (rc == 0 && !strcmp(status, "running"))
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
	if (registry_snapshot_get(ops.reg, job->snap_id, &snap) < 0 ||
	    registry_sandbox_get(ops.reg, job->sandbox_id, &sb) < 0) {
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
		rc = runsc_checkpoint_cuda(&ops.runsc, sb.runtime_id, spool, leave_running,
					   gpu.runsc_cuda, sandbox_memory_bytes(sb.pid), &e);
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
 * Keep manifest @json in image directory @dir (CACHE_MANIFEST_FILE), so
 * later materializes may copy its chunks. Not fsynced, as the image is not
 * (runtime/cache.h); a torn one is only a donor the store skips.
 */
static void keep_manifest(const char *dir, const char *json)
{
	char path[PATH_MAX];
	_cleanup_close_ int fd = -1;
	if (xsnprintf(path, sizeof(path), "%s/%s", dir, CACHE_MANIFEST_FILE) >= 0)
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int rc = fd < 0 ? -errno : write_all(fd, json, strlen(json));
	if (rc == 0)
		return;
	warning("cannot keep the manifest in %s: %s; no fork will copy chunks from it", dir,
		strerror(-rc));
	if (fd >= 0)
		unlink(path);
}

/* Copy regular file @name of @from into @to. */
static int copy_image_file(const char *from, const char *to, const char *name)
{
	char src[PATH_MAX], dst[PATH_MAX];
	if (xsnprintf(src, sizeof(src), "%s/%s", from, name) < 0 ||
	    xsnprintf(dst, sizeof(dst), "%s/%s", to, name) < 0)
		return -ENAMETOOLONG;
	_cleanup_close_ int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return -errno;
	_cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0)
		return -errno;
	return copy_fd(in, out);
}

static bool is_regular(DIR *d, const struct dirent *de)
{
	struct stat st;
	if (de->d_type != DT_UNKNOWN)
		return de->d_type == DT_REG;
	return fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/* The regular files of image directory @from into a new directory @to, which appears whole. */
static int copy_image(const char *from, const char *to)
{
	char tmp[PATH_MAX];
	if (xsnprintf(tmp, sizeof(tmp), "%s.tmp-copy", to) < 0)
		return -ENAMETOOLONG;
	rm_rf(tmp);
	int rc = mkdir(tmp, 0700) < 0 ? -errno : 0;
	DIR *d = rc == 0 ? opendir(from) : NULL;
	if (rc == 0 && !d)
		rc = -errno;
	while (rc == 0) {
		errno = 0;
		const struct dirent *de = readdir(d);
		if (!de) {
			rc = -errno;
			break;
		}
		if (is_regular(d, de))
			rc = copy_image_file(from, tmp, de->d_name);
	}
	if (d)
		closedir(d);
	if (rc == 0 && rename(tmp, to) < 0)
		rc = -errno;
	if (rc < 0)
		rm_rf(tmp);
	return rc;
}

/*
 * The stored snapshot's spool becomes its local cache, with @manifest (as
 * stored; may be NULL); forks and resume reuse it.
 */
static void keep_spool_as_cache(const char *snap_id, const char *manifest)
{
	char spool[PATH_MAX], cache[PATH_MAX];
	spool_path(snap_id, spool, sizeof(spool));
	cache_path(snap_id, cache, sizeof(cache));
	/* Before the rename: an image is never seen without its manifest. */
	if (manifest)
		keep_manifest(spool, manifest);
	rm_rf(cache);
	int rc = rename(spool, cache) < 0 ? -errno : 0;
	/* A spool on another filesystem (--spool on a tmpfs) is copied. */
	if (rc == -EXDEV)
		rc = copy_image(spool, cache);
	if (rc < 0)
		warning("cannot keep snapshot %s in the cache: %s; forks will read the store",
			snap_id, strerror(-rc));
	rm_rf(spool);
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
	int rc = registry_sandbox_get(ops.reg, job->sandbox_id, &sb);
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
	if (registry_snapshot_get(ops.reg, job->snap_id, &snap) < 0) {
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
	keep_spool_as_cache(snap.id, manifest);
	cache_trim();
	snap.state = SNAP_COMPLETED;
	snap.completed_at = now_ms();
	snap.size_bytes = res.size_bytes;
	snap.stored_bytes = res.stored_bytes;
	progress_clear(snap.id);
	snapshot_save(&snap);
	if (job->kind == SNAP_KIND_SUSPEND) {
		struct sb_patch p = SB_PATCH(SB_SUSPENDED);
		p.restore_snapshot = job->snap_id;
		sandbox_apply_if(job->sandbox_id, STATE_BIT(SB_SUSPENDING), p);
	}
	complete(job->done, job->ctx, 0, NULL, 0);
	snap_job_free(job);
}

/* --- this host's snapshots ------------------------------------------------ */

bool ops_snapshot_taken_here(const struct snapshot *snap)
{
	return host_is_this(snap->host_json);
}

bool ops_snapshot_of(const struct snapshot *snap, const struct sandbox *sb)
{
	return strcmp(snap->sandbox_id, sb->id) == 0 && snap->owner_uid == sb->owner_uid &&
	       ops_snapshot_taken_here(snap);
}

struct of_walk {
	const struct sandbox *sb;
	int (*fn)(const struct snapshot *snap, void *arg);
	void *arg;
};

static int of_only(const struct snapshot *snap, void *arg)
{
	const struct of_walk *w = arg;
	return ops_snapshot_of(snap, w->sb) ? w->fn(snap, w->arg) : 0;
}

int ops_sandbox_snapshots_each(const struct sandbox *sb,
			       int (*fn)(const struct snapshot *snap, void *arg), void *arg)
{
	struct of_walk w = {sb, fn, arg};
	return registry_snapshot_each_of_sandbox(ops.reg, sb->id, of_only, &w);
}

static int newest_kept(const struct snapshot *snap, void *arg)
{
	if (snap->kind == SNAP_KIND_SNAPSHOT)
		*(struct snapshot *)arg = *snap; /* oldest first: the last one wins */
	return 0;
}

int ops_sandbox_newest_snapshot(const struct sandbox *sb, struct snapshot *out)
{
	out->id[0] = '\0';
	int rc = ops_sandbox_snapshots_each(sb, newest_kept, out);
	return rc < 0 ? rc : out->id[0] ? 0 : -ENOENT;
}

/* Do @a and @b come from one sandbox: the same name on the same host? */
static bool same_sandbox(const struct snapshot *a, const struct snapshot *b)
{
	char from_a[HOST_ID_MAX], from_b[HOST_ID_MAX];
	if (strcmp(a->sandbox_id, b->sandbox_id) != 0)
		return false;
	host_origin(a->host_json, from_a);
	host_origin(b->host_json, from_b);
	return strcmp(from_a, from_b) == 0;
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
	announce(OPS_OBJ_SNAPSHOT, snap.id, "pending", NULL);
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
	jobs_queue(steal_ptr(job->checkpoint), checkpoint_job, job);
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

/* --- restore: fork and resume -------------------------------------------- */

/* Cached images a materialize copies chunks from, held while it runs. */
struct donors {
	char ids[DONORS_USED][ID_MAX];
	size_t n;
	char dirs[DONORS_USED][PATH_MAX];
	char manifests[DONORS_USED][PATH_MAX];
	struct store_donor list[DONORS_USED];
};

/* Held image @id, if @now: the next donor while there is room, else released. */
static void donor_pick(struct donors *d, const char *id, bool now, size_t *used)
{
	if (!now)
		return;
	if (*used < DONORS_USED && cache_path(id, d->dirs[*used], PATH_MAX) == 0 &&
	    xsnprintf(d->manifests[*used], PATH_MAX, "%s/%s", d->dirs[*used],
		      CACHE_MANIFEST_FILE) >= 0) {
		d->list[*used] = (struct store_donor){d->dirs[*used], d->manifests[*used]};
		memcpy(d->ids[*used], id, ID_MAX);
		(*used)++;
		return;
	}
	cache_release(id);
}

/*
 * Hold the most recently used cached images and keep DONORS_USED of them:
 * those of @snap's sandbox first, then the others. Returns how many.
 */
static size_t donors_hold(struct donors *d, const struct snapshot *snap)
{
	char held[DONORS_SCAN][ID_MAX];
	bool same[DONORS_SCAN];
	size_t n = cache_hold_recent(snap->id, held, DONORS_SCAN), used = 0;
	for (size_t i = 0; i < n; i++) {
		struct snapshot s;
		same[i] =
		    registry_snapshot_get(ops.reg, held[i], &s) == 0 && same_sandbox(&s, snap);
	}
	for (size_t i = 0; i < n; i++)
		donor_pick(d, held[i], same[i], &used);
	for (size_t i = 0; i < n; i++)
		donor_pick(d, held[i], !same[i], &used);
	d->n = used;
	return used;
}

static void donors_release(struct donors *d)
{
	for (size_t i = 0; i < d->n; i++)
		cache_release(d->ids[i]);
}

/* Get @snap from the store into @tmp, copying what cached images hold; then keep its manifest. */
static int materialize_into(const struct snapshot *snap, const char *tmp, struct err *e)
{
	_cleanup_free_ struct donors *d = calloc(1, sizeof(*d));
	struct store_get_result res = {0};
	if (!d)
		return err_set(e, ENOMEM, "out of memory");
	int64_t t0 = mono_ms();
	size_t n = donors_hold(d, snap);
	int rc = store_get_snapshot_from(ops.store, snap->id, tmp, d->list, n, &res, e);
	donors_release(d);
	if (rc < 0)
		return rc;
	keep_manifest(tmp, res.manifest);
	free(res.manifest);
	/* Tenths of MiB: what the store gave is often well under one. */
	info("materialized snapshot %s: %.1f MiB, %.1f MiB copied from local images (%zu looked "
	     "at), %.1f MiB read from the store, in %lld ms",
	     snap->id, (double)res.size_bytes / (1 << 20), (double)res.local_bytes / (1 << 20), n,
	     (double)res.store_bytes / (1 << 20), (long long)(mono_ms() - t0));
	return 0;
}

/* Make sure cache/<snap> holds the verified checkpoint image; the caller holds it. */
static int materialize(const struct snapshot *snap, char *dir, size_t len, struct err *e)
{
	char tmp[PATH_MAX + 32], hex[9];
	int rc = cache_path(snap->id, dir, len);
	if (rc < 0)
		return err_set(e, ENAMETOOLONG, "cache path of %s is too long", snap->id);
	if (access(dir, F_OK) == 0)
		return 0;
	random_hex(hex, 8);
	snprintf(tmp, sizeof(tmp), "%s.tmp-%s", dir, hex);
	rc = materialize_into(snap, tmp, e);
	if (rc < 0) {
		rm_rf(tmp);
		return rc;
	}
	/* Another fork may have won the race: then use its copy. */
	if (rename(tmp, dir) < 0)
		rm_rf(tmp);
	return 0;
}

/*
 * Snapshots in use: forks and resumes still restoring from one, or a delete
 * under way. A delete waits for no restore (it is refused with EBUSY while
 * one runs) and a fork of a snapshot being deleted is refused, so a restore
 * never reads data a delete is removing. Guarded by ops.lock.
 */
struct snapshot_use {
	char id[ID_MAX];
	unsigned restores;
	bool deleting;
	struct snapshot_use *next;
};

static struct snapshot_use *snapshot_uses;

static struct snapshot_use *snapshot_use_get(const char *id, bool create)
{
	for (struct snapshot_use *u = snapshot_uses; u; u = u->next)
		if (!strcmp(u->id, id))
			return u;
	struct snapshot_use *u = create ? calloc(1, sizeof(*u)) : NULL;
	if (u) {
		snprintf(u->id, sizeof(u->id), "%s", id);
		u->next = snapshot_uses;
		snapshot_uses = u;
	}
	return u;
}

static void snapshot_use_drop_if_idle(const char *id)
{
	for (struct snapshot_use **pp = &snapshot_uses; *pp; pp = &(*pp)->next) {
		struct snapshot_use *u = *pp;
		if (strcmp(u->id, id) != 0)
			continue;
		if (!u->restores && !u->deleting) {
			*pp = u->next;
			free(u);
		}
		return;
	}
}

/* Count a restore from @id; -ENOENT while it is being deleted. */
static int snapshot_restore_begin(const char *id, struct err *e)
{
	int rc = 0;
	pthread_mutex_lock(&ops.lock);
	struct snapshot_use *u = snapshot_use_get(id, true);
	if (!u)
		rc = err_set(e, ENOMEM, "out of memory");
	else if (u->deleting)
		rc = err_set(e, ENOENT, "snapshot %s is being deleted", id);
	else
		u->restores++;
	pthread_mutex_unlock(&ops.lock);
	return rc;
}

static void snapshot_restore_end(const char *id)
{
	pthread_mutex_lock(&ops.lock);
	struct snapshot_use *u = snapshot_use_get(id, false);
	if (u && u->restores)
		u->restores--;
	snapshot_use_drop_if_idle(id);
	pthread_mutex_unlock(&ops.lock);
}

struct restore_job {
	char sandbox_id[ID_MAX];
	char snap_id[ID_MAX];
	bool resume; /* false: a fork into a new sandbox */
	ops_done_fn done;
	void *ctx;
	struct job *slot; /* its place in the queue, taken before anything changes */
};

/* Bundle for @sandbox_id from @snap's image and spec, then `runsc restore` from @image_dir. */
static int restore_image(const char *sandbox_id, const struct snapshot *snap, const char *image_dir,
			 const char *runtime_id, char digest[DIGEST_MAX], struct err *e)
{
	const char *entry = snap->entrypoint[0] ? snap->entrypoint : OPS_DEFAULT_ENTRYPOINT;
	int rc = prepare_bundle(sandbox_id, snap->image, entry, snap->env, snap->gpu, digest, e);
	if (rc < 0)
		return rc;
	int64_t t0 = mono_ms();
	rc = container_start(sandbox_id, runtime_id, snap->gpu, image_dir, e);
	int64_t restore_ms = mono_ms() - t0;
	if (rc == 0)
		rc = gpu_after_restore(sandbox_id, snap->id, runtime_id, image_dir, e);
	if (rc < 0)
		runsc_delete(&ops.runsc, runtime_id, NULL);
	else
		info("restored snapshot %s into %s: runsc restore took %lld ms", snap->id,
		     sandbox_id, (long long)restore_ms);
	return rc;
}

int restore_from_spool(struct sandbox *sb, const char *snap_id, struct err *e)
{
	struct snapshot snap;
	char spool[PATH_MAX], digest[DIGEST_MAX], status[32];
	if (registry_snapshot_get(ops.reg, snap_id, &snap) < 0)
		return err_set(e, ENOENT, "snapshot %s no longer exists", snap_id);
	spool_path(snap_id, spool, sizeof(spool));
	if (access(spool, F_OK) < 0)
		return err_set(e, ENOENT, "the checkpoint of %s is no longer in the spool",
			       snap_id);
	int rc = runsc_new_container_id(sb->runtime_id);
	if (rc < 0)
		return err_set(e, -rc, "cannot make a container id: %s", strerror(-rc));
	/*
	 * The fresh id in the registry first, as restore_job_run() does: a
	 * terminate cancels the container the registry names, and this restore
	 * must be among the calls it ends.
	 */
	struct sb_patch id_only = SB_PATCH(SB_SUSPENDING);
	id_only.runtime_id = sb->runtime_id;
	if (sandbox_apply_if(sb->id, STATE_BIT(SB_SUSPENDING), id_only) < 0)
		return err_set(e, ECANCELED, "sandbox %s is no longer suspending", sb->id);
	rc = restore_image(sb->id, &snap, spool, sb->runtime_id, digest, e);
	if (rc == 0)
		runsc_state(&ops.runsc, sb->runtime_id, status, sizeof(status), &sb->pid, NULL);
	return rc;
}

static int restore_container(const struct restore_job *job, const char *runtime_id,
			     char digest[DIGEST_MAX], struct err *e)
{
	char image_dir[PATH_MAX];
	struct snapshot snap;
	if (registry_snapshot_get(ops.reg, job->snap_id, &snap) < 0)
		return err_set(e, ENOENT, "snapshot %s no longer exists", job->snap_id);
	/* Held from before the check that it is there until runsc has read it. */
	cache_hold(snap.id);
	int rc = materialize(&snap, image_dir, sizeof(image_dir), e);
	if (rc == 0)
		rc = restore_image(job->sandbox_id, &snap, image_dir, runtime_id, digest, e);
	cache_release(snap.id);
	cache_trim();
	return rc;
}

static void restore_job_run(void *arg)
{
	struct restore_job *job = arg;
	struct err e = {0};
	char runtime_id[RUNTIME_ID_MAX], digest[DIGEST_MAX] = "", status[32];
	pid_t pid = 0;
	/* The state this job owns; a terminate may take the sandbox from it meanwhile. */
	unsigned mine = STATE_BIT(job->resume ? SB_RESUMING : SB_STARTING);
	/*
	 * A fresh container id every time (runsc refuses one it still knows),
	 * recorded before the restore, so a crash in between leaves no
	 * container the registry cannot name.
	 */
	int rc = runsc_new_container_id(runtime_id);
	if (rc == 0) {
		struct sb_patch id_only = SB_PATCH(job->resume ? SB_RESUMING : SB_STARTING);
		id_only.runtime_id = runtime_id;
		rc = sandbox_apply_if(job->sandbox_id, mine, id_only);
	}
	if (rc == 0)
		rc = restore_container(job, runtime_id, digest, &e);
	if (rc == 0)
		runsc_state(&ops.runsc, runtime_id, status, sizeof(status), &pid, NULL);
	snapshot_restore_end(job->snap_id);
	struct sb_patch p = SB_PATCH(SB_RUNNING);
	if (rc < 0) {
		if (!e.code)
			err_set(&e, -rc, "cannot restore snapshot %s: %s", job->snap_id,
				strerror(-rc));
		/* A failed resume leaves the sandbox suspended, so it can be tried again. */
		p.state = job->resume ? SB_SUSPENDED : SB_FAILED;
		p.message = e.msg;
	} else {
		p.image_digest = digest;
		p.pid = pid;
		if (job->resume)
			p.restore_snapshot = "";
	}
	if (sandbox_apply_if(job->sandbox_id, mine, p) < 0) {
		if (rc == 0)
			runsc_delete(&ops.runsc, runtime_id, NULL);
		rc = err_set(&e, EIO, "sandbox %s was terminated while snapshot %s was restored",
			     job->sandbox_id, job->snap_id);
	} else if (rc < 0) {
		report_job_failure(OPS_OBJ_SANDBOX, job->sandbox_id,
				   job->resume ? "resume" : "start", &e);
	}
	complete(job->done, job->ctx, rc < 0 ? -e.code : 0, NULL, 0);
	free(job);
}

/* A restore job with its place in the queue; NULL (@e says why) when none is free. */
static struct restore_job *restore_job_new(ops_done_fn done, void *ctx, struct err *e)
{
	struct restore_job *job = calloc(1, sizeof(*job));
	if (!job) {
		err_set(e, ENOMEM, "out of memory");
		return NULL;
	}
	job->slot = jobs_reserve(JOB_LIFECYCLE, e);
	if (!job->slot) {
		free(job);
		return NULL;
	}
	job->done = done;
	job->ctx = ctx;
	return job;
}

/* The request was refused after all: give its place back. Returns @rc. */
static int restore_job_drop(struct restore_job *job, int rc)
{
	jobs_cancel(job->slot);
	free(job);
	return rc;
}

static int submit_restore(struct restore_job *job, const char *sandbox_id, const char *snap_id,
			  bool resume)
{
	snprintf(job->sandbox_id, sizeof(job->sandbox_id), "%s", sandbox_id);
	snprintf(job->snap_id, sizeof(job->snap_id), "%s", snap_id);
	job->resume = resume;
	jobs_queue(steal_ptr(job->slot), restore_job_run, job);
	return 0;
}

int ops_sandbox_resume(const struct caller *who, const char *id, ops_done_fn done, void *ctx,
		       struct err *e)
{
	struct sandbox sb;
	struct restore_job *job = restore_job_new(done, ctx, e);
	if (!job)
		return -e->code;
	int rc = sandbox_begin(who, id, STATE_BIT(SB_SUSPENDED), SB_RESUMING, "resume", &sb, e);
	if (rc < 0)
		return restore_job_drop(job, rc);
	rc = snapshot_restore_begin(sb.restore_snapshot, e);
	if (rc < 0) {
		sandbox_apply(id, SB_PATCH(SB_SUSPENDED));
		return restore_job_drop(job, rc);
	}
	return submit_restore(job, id, sb.restore_snapshot, true);
}

/* Can @snap be restored here? Appends one line per reason it cannot; returns their count. */
static int restore_blockers(const struct snapshot *snap, struct strbuf *why)
{
	char digest[DIGEST_MAX];
	struct err e = {0};
	int n = 0;
	if (snap->state != SNAP_COMPLETED) {
		strbuf_addf(why, "snapshot %s is %s, not completed\n", snap->id,
			    snapshot_state_name(snap->state));
		n++;
	}
	if (images_exists(ops.images, snap->image) < 0) {
		strbuf_addf(why, "image %s does not exist on this host\n", snap->image);
		n++;
	} else if (images_digest(ops.images, snap->image, digest, &e) == 0 &&
		   strcmp(digest, snap->image_digest) != 0) {
		strbuf_addf(why, "image %s changed: snapshot has %s, host has %s\n", snap->image,
			    snap->image_digest, digest);
		n++;
	}
	int diffs = host_compare(snap->host_json, ops.runsc.version, why);
	int gpu_diffs = snap->gpu ? gpu_compare_host(snap->host_json, why) : 0;
	return n + (diffs > 0 ? diffs : 0) + (gpu_diffs > 0 ? gpu_diffs : 0);
}

static int check_forkable(const struct caller *who, const char *snap_id, struct snapshot *snap,
			  struct err *e)
{
	_cleanup_strbuf_ struct strbuf why = STRBUF_INIT;
	if (snapshot_get_as(who, snap_id, snap) < 0)
		return err_set(e, ENOENT, "snapshot %s does not exist", snap_id);
	int rc = access_check_create(who, "fork", e);
	if (rc < 0)
		return rc;
	if (snap->state == SNAP_FAILED)
		return err_set(e, EINVAL, "cannot fork snapshot %s: it failed (%s)", snap_id,
			       snap->message);
	if (snap->state != SNAP_COMPLETED)
		return err_set(e, EBUSY, "cannot fork snapshot %s: it is still %s", snap_id,
			       snapshot_state_name(snap->state));
	if (restore_blockers(snap, &why) > 0) {
		rstrip(why.buf);
		for (char *nl = strchr(why.buf, '\n'); nl; nl = strchr(nl, '\n'))
			*nl = ';';
		return err_set(e, EINVAL, "cannot fork snapshot %s on this host: %s", snap_id,
			       why.buf);
	}
	return 0;
}

int ops_snapshot_fork(const struct caller *who, const char *snap_id, char id_out[ID_MAX],
		      ops_done_fn done, void *ctx, struct err *e)
{
	struct snapshot snap;
	struct sandbox sb = {.owner_uid = who->uid, .owner_gid = who->gid};
	/* Its place first: a full queue refuses at once and leaves no sandbox behind. */
	struct restore_job *job = restore_job_new(done, ctx, e);
	if (!job)
		return -e->code;
	int rc = check_forkable(who, snap_id, &snap, e);
	if (rc < 0)
		return restore_job_drop(job, rc);
	rc = new_object_id("sbx-", sb.id);
	if (rc < 0)
		rc = err_set(e, -rc, "cannot make a sandbox id: %s", strerror(-rc));
	if (rc == 0)
		rc = snapshot_restore_begin(snap_id, e);
	if (rc < 0)
		return restore_job_drop(job, rc);
	/* runtime_id stays empty: the restore job picks and records one. */
	memcpy(sb.image, snap.image, sizeof(sb.image));
	memcpy(sb.entrypoint, snap.entrypoint, sizeof(sb.entrypoint));
	memcpy(sb.env, snap.env, sizeof(sb.env));
	memcpy(sb.parent_snapshot, snap.id, sizeof(sb.parent_snapshot));
	sb.gpu = snap.gpu;
	sb.state = SB_STARTING;
	sb.created_at = now_ms();
	pthread_mutex_lock(&ops.lock);
	rc = registry_sandbox_insert(ops.reg, &sb);
	pthread_mutex_unlock(&ops.lock);
	if (rc < 0) {
		snapshot_restore_end(snap_id);
		return restore_job_drop(job, err_set(e, EIO, "cannot record the fork of %s: %s",
						     snap_id, strerror(-rc)));
	}
	memcpy(id_out, sb.id, ID_MAX);
	announce(OPS_OBJ_SANDBOX, sb.id, "starting", NULL);
	notify(OPS_OBJ_LIST, sb.id);
	notify(OPS_OBJ_SNAPSHOT, snap_id);
	return submit_restore(job, sb.id, snap_id, false);
}

/* --- delete ---------------------------------------------------------------- */

struct delete_job {
	char snap_id[ID_MAX];
	ops_done_fn done;
	void *ctx;
};

static void delete_end(const char *snap_id)
{
	pthread_mutex_lock(&ops.lock);
	struct snapshot_use *u = snapshot_use_get(snap_id, false);
	if (u)
		u->deleting = false;
	snapshot_use_drop_if_idle(snap_id);
	pthread_mutex_unlock(&ops.lock);
}

static void delete_job_run(void *arg)
{
	struct delete_job *job = arg;
	struct err e = {0};
	int rc = store_delete_snapshot(ops.store, job->snap_id, &e);
	if (rc == 0) {
		cache_remove(job->snap_id);
		pthread_mutex_lock(&ops.lock);
		rc = registry_snapshot_delete(ops.reg, job->snap_id);
		pthread_mutex_unlock(&ops.lock);
		if (rc == -ENOENT)
			rc = 0;
	}
	if (rc < 0) {
		if (!e.code)
			err_set(&e, -rc, "cannot delete snapshot %s: %s", job->snap_id,
				strerror(-rc));
		report_job_failure(OPS_OBJ_SNAPSHOT, job->snap_id, "delete", &e);
	} else {
		announce(OPS_OBJ_SNAPSHOT, job->snap_id, "deleted", NULL);
	}
	delete_end(job->snap_id);
	complete(job->done, job->ctx, rc < 0 ? -e.code : 0, NULL, 0);
	free(job);
}

int ops_snapshot_delete(const struct caller *who, const char *snap_id, ops_done_fn done, void *ctx,
			struct err *e)
{
	struct snapshot snap;
	bool pinned = false;
	struct snapshot_use *use = NULL;
	pthread_mutex_lock(&ops.lock);
	int rc = snapshot_get_as(who, snap_id, &snap);
	if (rc == 0)
		rc = registry_snapshot_pinned(ops.reg, snap_id, &pinned);
	if (rc == 0 && !pinned && snap.state != SNAP_PENDING && snap.state != SNAP_IN_PROGRESS)
		use = snapshot_use_get(snap_id, true);
	if (use && (use->restores || use->deleting)) {
		pthread_mutex_unlock(&ops.lock);
		return err_set(e, EBUSY, "cannot delete snapshot %s: %s", snap_id,
			       use->deleting ? "it is being deleted" : "a fork of it is starting");
	}
	if (use)
		use->deleting = true;
	pthread_mutex_unlock(&ops.lock);
	if (rc == -ENOENT)
		return err_set(e, ENOENT, "snapshot %s does not exist", snap_id);
	if (rc < 0)
		return err_set(e, EIO, "cannot read snapshot %s from the registry", snap_id);
	if (snap.state == SNAP_PENDING || snap.state == SNAP_IN_PROGRESS)
		return err_set(e, EBUSY, "cannot delete snapshot %s: it is still %s", snap_id,
			       snapshot_state_name(snap.state));
	if (pinned)
		return err_set(e, EBUSY,
			       "cannot delete snapshot %s: suspended sandbox %s needs it to resume",
			       snap_id, snap.sandbox_id);
	struct job *slot = jobs_reserve(JOB_LIFECYCLE, e);
	struct delete_job *job = slot ? calloc(1, sizeof(*job)) : NULL;
	if (!job) {
		jobs_cancel(slot);
		delete_end(snap_id);
		return slot ? err_set(e, ENOMEM, "out of memory") : -e->code;
	}
	snprintf(job->snap_id, sizeof(job->snap_id), "%s", snap_id);
	job->done = done;
	job->ctx = ctx;
	jobs_queue(slot, delete_job_run, job);
	return 0;
}

/* --- wait, progress, restorable -------------------------------------------- */

int ops_snapshot_wait(const struct caller *who, const char *snap_id, ops_done_fn done, void *ctx,
		      struct err *e)
{
	struct snapshot snap;
	/* As ops_sandbox_wait: another's is refused before its owner's waiters could be ended. */
	if (registry_snapshot_get(ops.reg, snap_id, &snap) == 0 &&
	    !access_may_see(who, snap.owner_uid))
		return err_set(e, ENOENT, "snapshot %s does not exist", snap_id);
	waiters_add(who, OPS_OBJ_SNAPSHOT, snap_id, done, ctx);
	if (registry_snapshot_get(ops.reg, snap_id, &snap) < 0) {
		waiters_fail(OPS_OBJ_SNAPSHOT, snap_id);
		return 0;
	}
	bool settled = snap.state == SNAP_COMPLETED || snap.state == SNAP_FAILED;
	waiters_wake(OPS_OBJ_SNAPSHOT, snap_id, snapshot_state_name(snap.state), settled);
	return 0;
}

int ops_snapshot_progress(const char *snap_id, int64_t *done, int64_t *total)
{
	struct snapshot snap;
	if (progress_get(snap_id, done, total))
		return 0;
	int rc = registry_snapshot_get(ops.reg, snap_id, &snap);
	if (rc < 0)
		return rc;
	*done = snap.state == SNAP_COMPLETED ? snap.size_bytes : 0;
	*total = snap.size_bytes;
	return 0;
}

int ops_snapshot_restorable(const char *snap_id, struct strbuf *out)
{
	struct snapshot snap;
	int rc = registry_snapshot_get(ops.reg, snap_id, &snap);
	if (rc < 0)
		return rc;
	if (restore_blockers(&snap, out) == 0)
		return strbuf_adds(out, "yes\n");
	return 0;
}

/* --- start-up reconciliation --------------------------------------------- */

/*
 * A manifest's sizes, for a snapshot that completed while snapfs was down.
 * The bucket may have been written since: a size out of range is left 0.
 */
static void sizes_from_manifest(const char *json, struct snapshot *snap)
{
	cJSON *m = NULL;
	struct err e = {0};
	if (manifest_json(json, snap->id, &m, &e) < 0)
		return;
	snapmeta_count(m, "size_bytes", &snap->size_bytes);
	snapmeta_count(m, "stored_bytes", &snap->stored_bytes);
	cJSON_Delete(m);
}

/*
 * One snapshot after a restart. The manifest is written last, so it decides:
 * an interrupted snapshot with a manifest is whole; one without failed, and
 * what it stored is removed. A completed row without a manifest was being
 * deleted: the delete is finished.
 */
static void reconcile_snapshot(struct snapshot *snap)
{
	_cleanup_free_ char *manifest = NULL;
	int mrc = store_get_manifest(ops.store, snap->id, &manifest, NULL);
	bool stored = mrc == 0;
	enum snapshot_state was = snap->state;
	/* A store that cannot answer (down, bad credentials) proves nothing. */
	if (mrc < 0 && mrc != -ENOENT && was == SNAP_COMPLETED)
		return;
	if (was == SNAP_COMPLETED && !stored) {
		registry_snapshot_delete(ops.reg, snap->id);
		return;
	}
	if (was != SNAP_PENDING && was != SNAP_IN_PROGRESS)
		return;
	snap->state = stored ? SNAP_COMPLETED : SNAP_FAILED;
	snap->completed_at = now_ms();
	if (stored)
		sizes_from_manifest(manifest, snap);
	if (!stored) {
		if (mrc == -ENOENT) /* what it stored before the crash is garbage */
			store_delete_snapshot(ops.store, snap->id, NULL);
		snprintf(snap->message, sizeof(snap->message),
			 "snapshot %s was interrupted: snapfs stopped while it was %s", snap->id,
			 snapshot_state_name(was));
	}
	registry_snapshot_update(ops.reg, snap);
}

static int collect_snapshot_ids(const struct snapshot *snap, void *arg)
{
	return strbuf_addf(arg, "%s\n", snap->id);
}

/* A cache entry stays if its snapshot is still known and completed. */
static bool cache_entry_wanted(const char *snap_id, void *arg)
{
	struct snapshot snap;
	(void)arg;
	return registry_snapshot_get(ops.reg, snap_id, &snap) == 0 && snap.state == SNAP_COMPLETED;
}

static void reconcile_snapshot_id(const char *id)
{
	struct snapshot snap;
	if (registry_snapshot_get(ops.reg, id, &snap) == 0)
		reconcile_snapshot(&snap);
}

/* Walk ids collected first: store reads run outside the registry walk. */
void reconcile_snapshots(void)
{
	_cleanup_strbuf_ struct strbuf ids = STRBUF_INIT;
	struct err e = {0};
	registry_snapshot_each(ops.reg, collect_snapshot_ids, &ids);
	strbuf_each_line(&ids, reconcile_snapshot_id);
	/*
	 * Nothing is being stored here yet: what interrupted puts left is
	 * condemned now, or removed at once where the grace period is 0
	 * (backend/store_gc.c).
	 */
	int n = store_collect(ops.store, STORE_COLLECT_AT_START, &e);
	if (n > 0)
		info("removed %d objects left by interrupted snapshots", n);
	else if (n < 0)
		warning("cannot collect the store's garbage: %s", e.msg);
	cache_clean(cache_entry_wanted, NULL);
	cache_trim();
}
