/*
 * ops_gpu.c - the operations' GPU hooks (declared in ops_internal.h): the
 * start check, cuda-checkpoint around a checkpoint, and after a restore.
 * runtime/gpu/gpu.c does the work; this file decides, with the daemon's
 * context (its images, its runsc), when and on which container.
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/strbuf.h"
#include "runtime/images.h"

int ops_gpu_start_check(const char *id, bool gpu, struct err *e)
{
	struct gpu_host h;
	char what[ID_MAX + 32];
	if (!gpu)
		return 0;
	if (id)
		snprintf(what, sizeof(what), "start sandbox %s", id);
	else
		snprintf(what, sizeof(what), "start a new sandbox");
	return gpu_host_ready(what, &h, e);
}

/* Who checkpoints @sb's CUDA processes (the rule: gpu.h, cuda_driver_for()). */
static enum cuda_driver driver_of(const struct sandbox *sb)
{
	char rootfs[PATH_MAX], hex[IMAGES_OCI_HEX + 1];
	/* The tree the sandbox got, resolved and checked as images_pin() does. */
	bool tool = images_resolve(ops.images, sb->image, rootfs, sizeof(rootfs), hex, NULL) == 0 &&
		    cuda_image_has_tool(rootfs);
	/* runsc drives CUDA only under --nvproxy: ask it only for GPU sandboxes. */
	bool runsc_can = sb->gpu && cuda_runsc_checkpoints(&ops.runsc);
	return cuda_driver_for(sb->gpu, tool, ops.cuda_tool.fd >= 0, runsc_can);
}

/* The first executable @name in the daemon's PATH into @out; -ENOENT if none. */
static int find_on_path(const char *name, char *out, size_t len)
{
	const char *path = getenv("PATH");
	for (const char *p = path ? path : ""; *p; p += (*p == ':')) {
		size_t n = strcspn(p, ":");
		if (n > 0 && xsnprintf(out, len, "%.*s/%s", (int)n, p, name) >= 0 &&
		    access(out, X_OK) == 0)
			return 0;
		p += n;
	}
	return -ENOENT;
}

int ops_gpu_tool_init(const char *cuda_checkpoint, struct err *e)
{
	char found[PATH_MAX];
	const char *path = cuda_checkpoint;
	ops.cuda_tool = (struct cuda_tool){.fd = -1};
	if (!path && find_on_path(GPU_TOOL_NAME, found, sizeof(found)) == 0)
		path = found;
	if (!path)
		return 0;
	int rc = cuda_tool_open(path, &ops.cuda_tool);
	if (rc < 0 && cuda_checkpoint)
		return err_set(e, -rc, "--cuda-checkpoint %s: %s", path, strerror(-rc));
	if (rc < 0)
		warning("cannot open %s: %s; GPU sandboxes cannot be snapshotted", path,
			strerror(-rc));
	else
		info("cuda-checkpoint: %s (%s), run in sandboxes from the host", path,
		     ops.cuda_tool.script ? "a script, run with the sandbox's /bin/sh"
					  : "loaded by runsc exec --exec-fd");
	return 0;
}

/*
 * The record goes into the spool twice: before the first lock (so a restart
 * after a crash knows which processes to look at, ops_gpu_reconcile()) and
 * after the last checkpoint, before the gVisor checkpoint (so a suspend can
 * never lose it).
 */
static int record(struct ops_gpu_checkpoint *gc, const char *spool, struct err *e)
{
	int rc = mkdir_p(spool, 0700);
	if (rc < 0)
		return err_set(e, -rc, "cannot create %s: %s", spool, strerror(-rc));
	return cuda_record_write(spool, &gc->procs, e);
}

int ops_gpu_before_checkpoint(const struct sandbox *sb, const char *spool,
			      struct ops_gpu_checkpoint *gc, struct err *e)
{
	memset(gc, 0, sizeof(*gc));
	snprintf(gc->what, sizeof(gc->what), "%s sandbox %s",
		 sb->state == SB_SUSPENDING ? "suspend" : "snapshot", sb->id);
	snprintf(gc->cid, sizeof(gc->cid), "%s", sb->runtime_id);
	switch (driver_of(sb)) {
	case CUDA_NONE:
		return 0;
	case CUDA_BY_RUNSC:
		gc->runsc_cuda = GPU_IMAGE_TOOL;
		return 0;
	case CUDA_UNAVAILABLE:
		return err_set(e, EINVAL,
			       "cannot %s: this host has no cuda-checkpoint to checkpoint its CUDA "
			       "state with (--cuda-checkpoint PATH)",
			       gc->what);
	case CUDA_BY_SNAPFS:
		break;
	}
	struct cuda_target t = {&ops.runsc, &ops.cuda_tool, gc->cid, gc->what};
	char why[ERR_MSG_MAX];
	int rc = cuda_find(&t, &gc->procs, e);
	if (rc < 0 || !gc->procs.n)
		return rc;
	rc = record(gc, spool, e);
	if (rc < 0)
		return err_set(e, -rc, "cannot %s: %s", gc->what, e->msg);
	rc = cuda_suspend(&t, &gc->procs, e);
	if (rc < 0)
		return rc;
	rc = record(gc, spool, e);
	if (rc == 0)
		return 0;
	snprintf(why, sizeof(why), "%s", e->msg);
	return cuda_rollback(&t, &gc->procs, -rc, why, e);
}

static bool container_running(const char *cid)
{
	return runsc_state(&ops.runsc, cid, NULL, NULL) == RUNSC_RUNNING;
}

int ops_gpu_after_checkpoint(struct ops_gpu_checkpoint *gc, bool leave_running, int rc,
			     struct err *e)
{
	struct cuda_target t = {&ops.runsc, &ops.cuda_tool, gc->cid, gc->what};
	char why[ERR_MSG_MAX];
	if (!gc->procs.n)
		return rc;
	if (rc < 0) {
		int code = e->code ? e->code : EIO;
		snprintf(why, sizeof(why), "gVisor checkpoint failed: %.900s", e->msg);
		if (container_running(gc->cid))
			return cuda_rollback(&t, &gc->procs, code, why, e);
		return err_set(e, code,
			       "cannot %s: %s; the sandbox stopped, its CUDA processes with it",
			       gc->what, why);
	}
	/* A suspend's source stopped with the checkpoint: the resume restores and unlocks. */
	if (!leave_running)
		return 0;
	return cuda_undo(&t, &gc->procs, e);
}

int ops_gpu_after_restore(const char *sandbox_id, const char *snap_id, const char *runtime_id,
			  const char *image_dir, struct err *e)
{
	struct cuda_procs procs;
	char what[2 * ID_MAX + 32];
	snprintf(what, sizeof(what), "restore snapshot %s into sandbox %s", snap_id, sandbox_id);
	int rc = cuda_record_read(image_dir, &procs, e);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return err_set(e, -rc, "cannot %s: %s", what, e->msg);
	struct cuda_target t = {&ops.runsc, &ops.cuda_tool, runtime_id, what};
	return cuda_undo(&t, &procs, e);
}

static int newest_snapshot(const struct snapshot *snap, void *arg)
{
	*(struct snapshot *)arg = *snap; /* oldest first: the last one wins */
	return 0;
}

void ops_gpu_reconcile(struct sandbox *sb)
{
	struct snapshot *newest = calloc(1, sizeof(*newest));
	char spool[PATH_MAX], what[ID_MAX + 64];
	struct cuda_procs procs;
	struct err e = {0};
	_cleanup_strbuf_ struct strbuf outcome = STRBUF_INIT;
	if (!newest)
		return;
	ops_sandbox_snapshots_each(sb, newest_snapshot, newest);
	int rc = newest->id[0] ? ops_spool_path(newest->id, spool, sizeof(spool)) : -ENOENT;
	free(newest);
	if (rc < 0 || cuda_record_read(spool, &procs, NULL) < 0)
		return;
	snprintf(what, sizeof(what), "bring back the CUDA processes of sandbox %s", sb->id);
	struct cuda_target t = {&ops.runsc, &ops.cuda_tool, sb->runtime_id, what};
	/* How far the interrupted sequence got: ask, do not trust the record. */
	cuda_refresh(&t, &procs);
	rc = cuda_undo(&t, &procs, &e);
	cuda_outcome(&procs, &outcome);
	if (rc < 0)
		snprintf(sb->message, sizeof(sb->message), "%s", e.msg);
	else
		snprintf(sb->message, sizeof(sb->message),
			 "snapfs stopped during a checkpoint of this sandbox; %s",
			 strbuf_str(&outcome));
}
