/*
 * ops_restore.c - fork and resume: restoring a snapshot into a sandbox.
 *
 * A fork or resume (JOB_LIFECYCLE) materializes the snapshot into the cache
 * when it is not there (every chunk verified), writes a bundle and runs
 * `runsc restore --detach`. The cache is bounded: least recently used
 * images go first, never one a restore is reading. Every image keeps its
 * manifest, so a materialize copies the chunks that images already cached
 * hold (earlier snapshots of the same sandbox share most) and downloads
 * only the rest.
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/strbuf.h"
#include "runtime/cache.h"
#include "runtime/runsc/cgroup.h"
#include "runtime/host.h"
#include "runtime/images.h"

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

/* Cached image @donor_id lends chunks first if it is of snapshot @arg's sandbox. */
static bool same_source(const char *donor_id, void *arg)
{
	struct snapshot s;
	return row_snapshot_get(donor_id, &s) == 0 && same_sandbox(&s, arg);
}

struct restore_job {
	struct op_job base; /* in JOB_LIFECYCLE */
	char sandbox_id[ID_MAX];
	char snap_id[ID_MAX];
	bool resume;	      /* false: a fork into a new sandbox */
	struct resources res; /* the sandbox's limits, for its bundle */
};
OP_JOB_CHECK(struct restore_job);

/*
 * Bundle for @sandbox_id from @snap's image and spec and the sandbox's
 * limits @res, then `runsc restore` from @image_dir.
 */
static int restore_image(const char *sandbox_id, const struct snapshot *snap,
			 const struct resources *res, const char *image_dir, const char *runtime_id,
			 char digest[DIGEST_MAX], pid_t *pid, struct err *e)
{
	const char *entry = snap->entrypoint[0] ? snap->entrypoint : OPS_DEFAULT_ENTRYPOINT;
	/* Held to the snapshot's digest: the image may have been re-imported since the fork was
	 * accepted. */
	memcpy(digest, snap->image_digest, DIGEST_MAX);
	int rc = container_prepare(sandbox_id, runtime_id, snap->image, entry, snap->env,
				   snap->gpu ? CONTAINER_GPU : 0, res, digest, e);
	if (rc < 0)
		return rc;
	int64_t t0 = mono_ms();
	rc = container_start(sandbox_id, runtime_id, snap->gpu, image_dir, pid, e);
	int64_t restore_ms = mono_ms() - t0;
	if (rc == 0)
		rc = ops_gpu_after_restore(sandbox_id, snap->id, runtime_id, image_dir, e);
	if (rc < 0)
		runsc_delete(&ops.runsc, runtime_id, NULL);
	else
		info("restored snapshot %s into %s: runsc restore took %lld ms", snap->id,
		     sandbox_id, (long long)restore_ms);
	return rc;
}

/*
 * Record @p's new container id for sandbox @id (while its state is in
 * @mine) in the registry itself before runsc makes that container: a row
 * kept only in memory is lost with a kill -9, and start-up, reading the
 * old id, would undo the sandbox and leave the container running no one's.
 */
static int record_container(const char *id, unsigned mine, struct sb_patch p, struct err *e)
{
	p.durable = true;
	int rc = sandbox_apply_if(id, mine, p);
	if (rc == -EBUSY)
		return err_set(e, ECANCELED, "sandbox %s is no longer %s", id,
			       sandbox_state_name(p.state));
	if (rc < 0)
		return err_set(e, EIO,
			       "cannot record container %s of sandbox %s before its restore: %s",
			       p.runtime_id, id, strerror(-rc));
	return 0;
}

int restore_from_spool(struct sandbox *sb, const char *snap_id, struct err *e)
{
	struct snapshot snap;
	char spool[PATH_MAX], digest[DIGEST_MAX];
	if (row_snapshot_get(snap_id, &snap) < 0)
		return err_set(e, ENOENT, "snapshot %s no longer exists", snap_id);
	ops_spool_path(snap_id, spool, sizeof(spool));
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
	rc = record_container(sb->id, STATE_BIT(SB_SUSPENDING), id_only, e);
	if (rc < 0)
		return rc;
	return restore_image(sb->id, &snap, &sb->res, spool, sb->runtime_id, digest, &sb->pid, e);
}

static int restore_container(const struct restore_job *job, const char *runtime_id,
			     char digest[DIGEST_MAX], pid_t *pid, struct err *e)
{
	char image_dir[PATH_MAX];
	struct snapshot snap;
	if (row_snapshot_get(job->snap_id, &snap) < 0)
		return err_set(e, ENOENT, "snapshot %s no longer exists", job->snap_id);
	/* Held from before the check that it is there until runsc has read it. */
	cache_hold(snap.id);
	int rc = cache_materialize(ops.store, snap.id, same_source, &snap, image_dir, e);
	if (rc == 0)
		rc = restore_image(job->sandbox_id, &snap, &job->res, image_dir, runtime_id, digest,
				   pid, e);
	cache_release(snap.id);
	cache_trim();
	return rc;
}

static void restore_job_run(void *arg)
{
	struct restore_job *job = arg;
	struct err e = {0};
	char runtime_id[RUNTIME_ID_MAX], digest[DIGEST_MAX] = "";
	pid_t pid = 0;
	/* The state this job owns; a terminate may take the sandbox from it meanwhile. */
	unsigned mine = STATE_BIT(job->resume ? SB_RESUMING : SB_STARTING);
	/*
	 * A fresh container id every time (runsc refuses one it still knows),
	 * recorded before the restore, so a crash in between leaves no
	 * container the registry cannot name.
	 */
	int rc = runsc_new_container_id(runtime_id);
	struct snapshot snap;
	if (rc == 0 && row_snapshot_get(job->snap_id, &snap) < 0)
		rc = err_set(&e, ENOENT, "snapshot %s no longer exists", job->snap_id);
	if (rc == 0) {
		struct sb_patch id_only = SB_PATCH(job->resume ? SB_RESUMING : SB_STARTING);
		id_only.runtime_id = runtime_id;
		/*
		 * And the image digest the restore is held to (check_forkable()): a
		 * crash once runsc restored it leaves a sandbox whose record is whole.
		 */
		id_only.image_digest = snap.image_digest;
		rc = record_container(job->sandbox_id, mine, id_only, &e);
	}
	if (rc == 0)
		rc = restore_container(job, runtime_id, digest, &pid, &e);
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
		p.arm_timeout = true; /* from the whole setting: a resume's clock starts again */
		if (job->resume)
			p.restore_snapshot = "";
	}
	bool unhold = false;
	if (sandbox_apply_if(job->sandbox_id, mine, p) < 0) {
		if (rc == 0)
			runsc_delete(&ops.runsc, runtime_id, NULL);
		rc = err_set(&e, EIO, "sandbox %s was terminated while snapshot %s was restored",
			     job->sandbox_id, job->snap_id);
	} else if (rc < 0) {
		report_job_failure(OPS_OBJ_SANDBOX, job->sandbox_id,
				   job->resume ? "resume" : "start", &e);
	} else {
		unhold = job->resume; /* it runs: the snapshot is free */
		lifetime_kick();
	}
	op_job_end_unhold(job, rc < 0 ? -e.code : 0, unhold ? job->sandbox_id : NULL, job->snap_id);
}

static int submit_restore(struct restore_job *job, const char *sandbox_id, const char *snap_id,
			  bool resume, const struct resources *res)
{
	job->res = *res;
	snprintf(job->sandbox_id, sizeof(job->sandbox_id), "%s", sandbox_id);
	snprintf(job->snap_id, sizeof(job->snap_id), "%s", snap_id);
	job->resume = resume;
	return op_job_queue(job, restore_job_run);
}

int ops_sandbox_resume(const struct caller *who, const char *id, ops_done_fn done, void *ctx,
		       struct err *e)
{
	struct sandbox sb;
	struct restore_job *job = op_job_new(sizeof(*job), JOB_LIFECYCLE, done, ctx, e);
	if (!job)
		return -e->code;
	int rc = sandbox_begin(who, id, STATE_BIT(SB_SUSPENDED), SB_RESUMING, "resume", &sb, e);
	if (rc < 0)
		return op_job_drop(job, rc);
	rc = snapshot_restore_begin(sb.restore_snapshot, e);
	if (rc < 0) {
		sandbox_apply(id, SB_PATCH(SB_SUSPENDED));
		return op_job_drop(job, rc);
	}
	return submit_restore(job, id, sb.restore_snapshot, true, &sb.res);
}

int restore_blockers(const struct snapshot *snap, struct strbuf *why)
{
	char image_why[2 * IMAGE_NAME_MAX + 3 * DIGEST_MAX + 256];
	int n = 0;
	if (snap->state != SNAP_COMPLETED) {
		strbuf_addf(why, "snapshot %s is %s, not completed\n", snap->id,
			    snapshot_state_name(snap->state));
		n++;
	}
	if (images_blocker(ops.images, snap->image, snap->image_digest, image_why,
			   sizeof(image_why))) {
		strbuf_addf(why, "%s\n", image_why);
		n++;
	}
	int diffs = host_compare(snap->host_json, ops.runsc.version, why);
	int gpu_diffs = snap->gpu ? gpu_compare_host(snap->host_json, why) : 0;
	int rc = diffs < 0 ? diffs : gpu_diffs < 0 ? gpu_diffs : strbuf_error(why);
	return rc < 0 ? rc : n + diffs + gpu_diffs;
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
	rc = restore_blockers(snap, &why);
	if (rc < 0)
		return err_set(e, -rc, "cannot fork snapshot %s: cannot compare this host: %s",
			       snap_id, strerror(-rc));
	if (rc > 0) {
		rstrip(why.buf);
		for (char *nl = strchr(why.buf, '\n'); nl; nl = strchr(nl, '\n'))
			*nl = ';';
		return err_set(e, EINVAL, "cannot fork snapshot %s on this host: %s", snap_id,
			       why.buf);
	}
	return 0;
}

/*
 * @snap's limits, with the fields of @raise that are set (never lower), into
 * @out. What @who asks for is bounded (quota_limits()); a limit the fork
 * keeps from its snapshot was the source's and is not asked for again.
 */
static int fork_limits(const struct caller *who, const struct snapshot *snap,
		       const struct resources *raise, struct resources *out, struct err *e)
{
	struct resources asked = {RES_UNSET, RES_UNSET, RES_UNSET};
	char what[ID_MAX + 32];
	*out = snap->res;
	if (raise) {
		for (enum res_kind k = RES_MEMORY; k <= RES_PIDS; k++)
			if (res_get(raise, k) != res_get(&snap->res, k))
				res_set(&asked, k, res_get(raise, k));
		res_apply(out, raise);
	}
	snprintf(what, sizeof(what), "the fork of %s", snap->id);
	int rc = quota_limits(who, &asked, what, e);
	if (rc == 0)
		rc = res_not_lower(out, &snap->res, e);
	return rc < 0 ? rc : cgroup_can_limit(out, "fork", e);
}

void *fork_job_new(ops_done_fn done, void *ctx, struct err *e)
{
	/* Its place first: a full queue refuses at once and leaves no sandbox behind. */
	return op_job_new(sizeof(struct restore_job), JOB_LIFECYCLE, done, ctx, e);
}

int fork_prepare(const struct caller *who, const char *snap_id, const struct fork_opts *opts,
		 struct snapshot *snap, struct sandbox *sb, struct err *e)
{
	*sb = (struct sandbox){.owner_uid = who->uid, .owner_gid = who->gid};
	int rc = check_forkable(who, snap_id, snap, e);
	if (rc == 0)
		rc = fork_limits(who, snap, opts ? &opts->raise : NULL, &sb->res, e);
	if (rc < 0)
		return rc;
	/* runtime_id stays empty: the restore job picks and records one. */
	memcpy(sb->image, snap->image, sizeof(sb->image));
	memcpy(sb->entrypoint, snap->entrypoint, sizeof(sb->entrypoint));
	memcpy(sb->env, snap->env, sizeof(sb->env));
	memcpy(sb->parent_snapshot, snap->id, sizeof(sb->parent_snapshot));
	sb->gpu = snap->gpu;
	lifetime_init_fork(sb, snap, opts);
	ops_ports_fork(sb, snap);
	sb->network = snap->network;
	memcpy(sb->egress, snap->egress, sizeof(sb->egress));
	ops_net_fork_rules(who, snap, sb);
	sb->state = SB_STARTING;
	return 0;
}

/*
 * A member was restored at the least CPU weight (CONTAINER_BACKGROUND): the
 * fork runs at the host's default. A failure only warns: the sandbox runs,
 * slower only while other work competes.
 */
static void cpu_normal(const char *id, const char *runtime_id)
{
	struct err e = {0};
	if (cgroup_cpu_normal(ops.cgroup_parent, runtime_id, &e) < 0 && e.code != ENOENT)
		warning("sandbox %s keeps a warm member's low CPU weight: %s", id, e.msg);
}

/*
 * A fork that took a warm member (warm_take()): set its egress chain again
 * from its row, resume its paused container in the place the fork took, and
 * it runs, its timeout armed from now.
 */
static void take_job_run(void *arg)
{
	struct restore_job *job = arg;
	struct err e = {0};
	struct sandbox *sb = malloc(sizeof(*sb));
	bool found = sb && row_sandbox_get(job->sandbox_id, sb) == 0;
	if (found)
		cpu_normal(sb->id, sb->runtime_id);
	/*
	 * Its chain from the fork's row before anything runs: the member was
	 * restored as the same owner (ops_warm.c), so this only makes sure.
	 * Not set: it does not run under rules that may not be its own.
	 */
	int rc = found ? ops_net_egress_again(sb->id, &e)
		       : err_set(&e, ENOENT, "sandbox %s is gone", job->sandbox_id);
	if (rc == 0)
		rc = runsc_resume(&ops.runsc, sb->runtime_id, &e);
	struct sb_patch p = SB_PATCH(rc < 0 ? SB_FAILED : SB_RUNNING);
	p.arm_timeout = rc == 0;
	p.message = rc < 0 ? e.msg : NULL;
	if (rc < 0 && sb)
		container_stop(sb->runtime_id, NULL);
	if (sandbox_apply_if(job->sandbox_id, STATE_BIT(SB_STARTING), p) < 0)
		rc = err_set(&e, EIO,
			     "sandbox %s was terminated while it was taken from a warm pool",
			     job->sandbox_id);
	else if (rc < 0)
		report_job_failure(OPS_OBJ_SANDBOX, job->sandbox_id, "start", &e);
	else
		lifetime_kick();
	free(sb);
	op_job_end(job, rc < 0 ? -e.code : 0, NULL, 0);
}

/* @sb (fork_prepare()'s) took a warm member of @snap: announce it and queue its resume in @job. */
static int take_submit(void *job, const struct snapshot *snap, const struct sandbox *sb,
		       char id_out[ID_MAX])
{
	struct restore_job *rj = job;
	memcpy(id_out, sb->id, ID_MAX);
	ops_ports_reopen(sb->id); /* the source's ports, on new host ports */
	announce_sandbox(sb->id, sb->state, NULL);
	ops_notify(OPS_OBJ_LIST, sb->id);
	ops_notify(OPS_OBJ_SNAPSHOT, snap->id);
	snprintf(rj->sandbox_id, sizeof(rj->sandbox_id), "%s", sb->id);
	snprintf(rj->snap_id, sizeof(rj->snap_id), "%s", snap->id);
	return op_job_queue(job, take_job_run);
}

int fork_submit(void *job, const struct snapshot *snap, struct sandbox *sb, char id_out[ID_MAX],
		struct err *e)
{
	/* A warm member first (ops_warm.c); none that fits: a restore. */
	int rc = warm_take(snap, sb, e);
	if (rc == 0)
		return take_submit(job, snap, sb, id_out);
	if (rc != -ENOENT)
		return op_job_drop(job, rc);
	/* A fan-out's @sb may be the row of the member the fork before took: none of its container.
	 */
	sb->runtime_id[0] = sb->image_digest[0] = '\0';
	sb->pid = 0;
	sb->state = SB_STARTING;
	rc = new_object_id("sbx-", sb->id);
	if (rc < 0)
		rc = err_set(e, -rc, "cannot make a sandbox id: %s", strerror(-rc));
	if (rc == 0)
		rc = snapshot_restore_begin(snap->id, e);
	if (rc < 0)
		return op_job_drop(job, rc);
	sb->created_at = now_ms();
	/* The fork's owner is its forker (fork_prepare()): that user's caps. */
	struct caller owner = {.uid = sb->owner_uid, .gid = sb->owner_gid};
	pthread_mutex_lock(&ops.lock);
	rc = quota_owner_locked(&owner, 1, quota_ports_published(sb), e);
	if (rc == 0)
		rc = row_sandbox_insert(sb);
	pthread_mutex_unlock(&ops.lock);
	if (rc < 0) {
		snapshot_restore_end(snap->id);
		if (rc != -EDQUOT)
			rc = err_set(e, EIO, "cannot record the fork of %s: %s", snap->id,
				     strerror(-rc));
		return op_job_drop(job, rc);
	}
	memcpy(id_out, sb->id, ID_MAX);
	ops_ports_reopen(sb->id); /* the source's ports, on new host ports */
	announce_sandbox(sb->id, sb->state, NULL);
	ops_notify(OPS_OBJ_LIST, sb->id);
	ops_notify(OPS_OBJ_SNAPSHOT, snap->id);
	return submit_restore(job, sb->id, snap->id, false, &sb->res);
}

int ops_snapshot_fork(const struct caller *who, const char *snap_id, const struct fork_opts *opts,
		      char id_out[ID_MAX], ops_done_fn done, void *ctx, struct err *e)
{
	struct snapshot snap;
	struct sandbox sb;
	void *job = fork_job_new(done, ctx, e);
	if (!job)
		return -e->code;
	int rc = fork_prepare(who, snap_id, opts, &snap, &sb, e);
	if (rc < 0)
		return op_job_drop(job, rc);
	return fork_submit(job, &snap, &sb, id_out, e);
}
