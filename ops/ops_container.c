/*
 * ops_container.c - the container of a sandbox, one object with one word
 * order (crun's libcrun_container_*): prepare its bundle, start it (runsc
 * run or restore), stop, delete, drop and unpause it. Below every verb
 * (start, terminate, snapshot, suspend, resume, fork, reconcile), which all
 * call these; nothing here takes ops.lock or changes a row.
 *
 * Also the cgroup counters last seen of each container (limit_seen_*,
 * under limit_seen_lock, a leaf lock): a start forgets them, the monitor
 * (ops_sandbox.c) reads and notes them.
 */
#include "runtime/net/net.h"
#include "ops/ops_internal.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "runtime/runsc/bundle.h"
#include "runtime/runsc/cgroup.h"
#include "runtime/runsc/console.h"
#include "runtime/images.h"

int container_prepare(const char *id, const char *runtime_id, const char *image,
		      const char *entrypoint, const char *env, unsigned flags,
		      const struct resources *res, char digest[DIGEST_MAX], struct err *e)
{
	bool gpu = flags & CONTAINER_GPU;
	char rootfs[PATH_MAX], bundle[PATH_MAX], cgroup[PATH_MAX], want[DIGEST_MAX];
	const char *argv[] = {"/bin/sh", "-c", entrypoint, NULL};
	const char *nodes[GPU_NODES_MAX];
	struct gpu_host h;
	char netns[PATH_MAX], resolv[PATH_MAX];
	struct bundle_spec spec = {.rootfs = rootfs,
				   .argv = argv,
				   .env = env,
				   .cgroups_path = cgroup,
				   .res = *res,
				   .netns = netns,
				   .resolv = resolv,
				   .cpu_shares =
				       flags & CONTAINER_BACKGROUND ? CGROUP_SHARES_BACKGROUND : 0};
	/* A restore may run from a version the image no longer is (images_take()). */
	int rc = digest[0] ? 0 : images_exists(ops.images, image);
	if (rc < 0)
		return err_set(e, ENOENT, "image %s does not exist in %s", image,
			       images_dir(ops.images));
	rc = sandbox_path(id, "bundle", bundle, sizeof(bundle));
	if (rc == 0)
		rc = cgroup_path(ops.cgroup_parent, runtime_id, cgroup, sizeof(cgroup));
	if (rc < 0)
		return err_set(e, -rc, "cannot build the bundle of sandbox %s: path too long", id);
	memcpy(want, digest, DIGEST_MAX);
	/* Held until the bundle names the version: a prune keeps what a bundle names. */
	_cleanup_close_ int lock = -1;
	rc = images_take(ops.images, image, want, rootfs, sizeof(rootfs), digest, &lock, e);
	if (rc < 0)
		return rc;
	if (gpu) {
		rc = gpu_host_ready("write the bundle of a GPU sandbox", &h, e);
		if (rc < 0)
			return rc;
		spec.devices = nodes;
		spec.ndevices = gpu_host_nodes(&h, nodes);
	}
	rc = ops_net_prepare(id, runtime_id, netns, resolv, e);
	if (rc == 0)
		rc = bundle_write(bundle, &spec, e);
	if (rc < 0)
		net_down(runtime_id);
	return rc;
}

/*
 * cgroup_adopt() for a container just started. A failure only warns, is
 * journalled and is the sandbox's error: deleting the container would lose
 * a sandbox restored from a spool, and fail every start on a host whose
 * unified tree is read-only (cgroup_open() only warns there too). Such a
 * sandbox stays in the daemon's cgroup, where a stop of the daemon's
 * systemd unit kills it (docs/cgroups.md): its error says so.
 */
static void adopt_or_warn(const char *id, const char *runtime_id)
{
	struct err e = {0};
	if (cgroup_adopt(ops.cgroup_parent, runtime_id, &e) == 0)
		return;
	err_wrap(&e, "sandbox %s stays in the daemon's cgroup, where a stop of its unit kills it",
		 id);
	warning("%s", e.msg);
	report_job_failure(OPS_OBJ_SANDBOX, id, "cgroup", &e);
}

/*
 * The cgroup counters (OOM kills, pids.max refusals) last seen of
 * sandboxes that survived an event they count: they only grow over the
 * cgroup's life, so an end is explained by a limit only when one moved
 * past these. In memory, by runtime id, forgotten at each start (a new
 * cgroup); past LIMIT_SEEN_MAX the oldest is reused. A daemon restart
 * forgets them: the first failed exec after it waits once.
 */
#define LIMIT_SEEN_MAX 64
static struct limit_seen {
	char runtime_id[RUNTIME_ID_MAX];
	struct cgroup_usage u;
} limit_seen[LIMIT_SEEN_MAX];
static size_t limit_seen_next;
static pthread_mutex_t limit_seen_lock = PTHREAD_MUTEX_INITIALIZER;

static struct limit_seen *limit_seen_find(const char *runtime_id)
{
	for (size_t i = 0; i < LIMIT_SEEN_MAX; i++)
		if (limit_seen[i].runtime_id[0] &&
		    strcmp(limit_seen[i].runtime_id, runtime_id) == 0)
			return &limit_seen[i];
	return NULL;
}

/* The counters noted for @runtime_id into @base; all 0 if none were. */
void limit_seen_get(const char *runtime_id, struct cgroup_usage *base)
{
	pthread_mutex_lock(&limit_seen_lock);
	struct limit_seen *s = limit_seen_find(runtime_id);
	*base = s ? s->u : (struct cgroup_usage){0};
	pthread_mutex_unlock(&limit_seen_lock);
}

/* Note @u for @runtime_id; NULL forgets it. */
void limit_seen_note(const char *runtime_id, const struct cgroup_usage *u)
{
	pthread_mutex_lock(&limit_seen_lock);
	struct limit_seen *s = limit_seen_find(runtime_id);
	if (!s && u) {
		s = &limit_seen[limit_seen_next];
		limit_seen_next = (limit_seen_next + 1) % LIMIT_SEEN_MAX;
		snprintf(s->runtime_id, sizeof(s->runtime_id), "%s", runtime_id);
	}
	if (s && u)
		s->u = *u;
	else if (s)
		s->runtime_id[0] = '\0';
	pthread_mutex_unlock(&limit_seen_lock);
}

int container_start(const char *id, const char *runtime_id, bool gpu, const char *image_dir,
		    pid_t *pid, struct err *e)
{
	char bundle[PATH_MAX], dir[PATH_MAX];
	struct console *con = NULL;
	struct runsc_stdio io;
	struct in_addr addr;
	unsigned flags = (gpu ? RUNSC_NVPROXY : 0) |
			 (net_sandbox_addr(runtime_id, &addr) == 0 ? RUNSC_NETWORK : 0);
	sandbox_path(id, "bundle", bundle, sizeof(bundle));
	sandbox_path(id, NULL, dir, sizeof(dir));
	int rc = console_open(dir, &con, e);
	if (rc < 0)
		return rc;
	console_stdio(con, &io);
	limit_seen_note(runtime_id, NULL); /* a new cgroup counts from 0 */
	rc = image_dir
		 ? runsc_restore(&ops.runsc, flags, runtime_id, bundle, image_dir, &io, pid, e)
		 : runsc_run(&ops.runsc, flags, runtime_id, bundle, &io, pid, e);
	if (rc == 0)
		adopt_or_warn(id, runtime_id);
	if (rc < 0) {
		console_free(con);
		runsc_delete(&ops.runsc, runtime_id, NULL);
		net_down(runtime_id);
		return rc;
	}
	console_attach(con, id);
	return 0;
}

int container_run(const struct sandbox *sb, char digest[DIGEST_MAX], pid_t *pid, struct err *e)
{
	const char *entry = sb->entrypoint[0] ? sb->entrypoint : OPS_DEFAULT_ENTRYPOINT;
	int rc = container_prepare(sb->id, sb->runtime_id, sb->image, entry, sb->env,
				   sb->gpu ? CONTAINER_GPU : 0, &sb->res, digest, e);
	if (rc < 0)
		return rc;
	return container_start(sb->id, sb->runtime_id, sb->gpu, NULL, pid, e);
}

/* A job that made a container for @id which a terminate took over meanwhile: remove it. */
void container_drop(const char *id, const char *runtime_id)
{
	console_detach(id);
	runsc_delete(&ops.runsc, runtime_id, NULL);
}

int container_stop(const char *runtime_id, struct err *e)
{
	runsc_kill(&ops.runsc, runtime_id, SIGKILL, NULL);
	return container_delete(runtime_id, e);
}

int container_delete(const char *runtime_id, struct err *e)
{
	int rc = runsc_delete(&ops.runsc, runtime_id, e);
	if (rc < 0)
		return rc;
	enum runsc_status st = runsc_state(&ops.runsc, runtime_id, NULL, NULL);
	if (st != RUNSC_GONE)
		return err_set(e, EIO, "container %s is still %s after runsc delete", runtime_id,
			       runsc_status_name(st));
	/* The network goes with its container (runtime/net/net.h). */
	net_down(runtime_id);
	return 0;
}

/* Resumes that may fail once (a busy host) before a paused sandbox counts as lost. */
#define UNPAUSE_TRIES 3

enum runsc_status container_unpause(const char *runtime_id, struct err *e)
{
	enum runsc_status st = runsc_state(&ops.runsc, runtime_id, NULL, NULL);
	for (int i = 0; i < UNPAUSE_TRIES && st == RUNSC_PAUSED; i++) {
		runsc_resume(&ops.runsc, runtime_id, e);
		st = runsc_state(&ops.runsc, runtime_id, NULL, NULL);
	}
	return st;
}
