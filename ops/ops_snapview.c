/*
 * ops_snapview.c - snapshots/<id>/root/: a snapshot's files, read through
 * a hidden restore of it (docs/design.md, "snapshots/<id>/root/").
 *
 * A view is a container restored from the snapshot that no user sees: no
 * row, nothing in sandboxes/ or its index; its bundle in
 * <state>/sandboxes/.view-<snapshot id>/ (a dot name: no sandbox id starts
 * with one) beside a file `container` naming it, written before the
 * restore so a daemon that dies leaves nothing the next start-up cannot
 * name; no network (runsc --network=none, no namespace or veth made, what
 * the snapshot's sandbox had notwithstanding: an egress one's view gets only
 * the resolv.conf mount runsc's restore asks for, ops_net.c's view_net_prepare(),
 * and a loopback); every process of its own
 * stopped by `runsc kill --all SIGSTOP` right after the restore, before
 * anything else is asked of it. The agent (ops/ops_agent.c, keyed by the
 * view id) is then exec'd in it and asked for reads only: every call that
 * would change a view answers EROFS (there, and first in fs/inside.c).
 *
 * States: STARTING (a JOB_LIFECYCLE job restores it; requests wait on its
 * list and are called back at the end, never blocking a FUSE thread),
 * READY, STOPPING (a job deletes it; requests wait, and a new start
 * follows) and FAILED (requests answer EIO for VIEW_RETRY_MS, the
 * snapshot's `error` says why; then a request tries again). The monitor's
 * pass (snapview_tick()) tears down a READY view no request used for the
 * idle time (VIEW_IDLE_DEFAULT_S; SNAPFS_SNAPSHOT_VIEW_IDLE, seconds,
 * changes it: tests only), forgets a FAILED one once its retry time passed,
 * and tears down the view of a snapshot whose row went or is no longer
 * completed (another host deleted it: ops_sync.c forget(), start-up's
 * reconcile) without waiting for the idle time.
 *
 * Bounds: a view is a whole restore at its snapshot's memory limit that no
 * quota counts, so views STARTING or READY are bounded per owner of the
 * snapshot (VIEW_MAX_PER_OWNER) and in all (VIEW_MAX_ALL; the environment
 * variables SNAPFS_SNAPSHOT_VIEW_MAX_PER_OWNER and SNAPFS_SNAPSHOT_VIEW_MAX
 * change them: tests only). A start past a bound evicts the least recently
 * used READY view of that owner (of anyone, for the bound in all) that no
 * request used for VIEW_BUSY_MS; with none to evict it is refused, EAGAIN,
 * and the snapshot's `error` says why (view_admit_locked()).
 *
 * Lock: views.lock, a leaf: nothing is called with it held; callbacks run
 * without it.
 */
#include "ops/ops_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/files.h"
#include "lib/names.h"
#include "lib/spawn.h"
#include "ops/jobs.h"
#include "runtime/cache.h"
#include "runtime/runsc/cgroup.h"

#define VIEW_IDLE_DEFAULT_S 60
/* How long a failed restore answers EIO at once before a request may try again. */
#define VIEW_RETRY_MS 10000
/* How long a delete waits for a view's start or stop under way. */
#define VIEW_DROP_WAIT_MS 120000
/* Views starting or ready: of one owner's snapshots, and in all. */
#define VIEW_MAX_PER_OWNER 2
#define VIEW_MAX_ALL 8
/* A view used this recently is in use: never evicted for another. */
#define VIEW_BUSY_MS 5000
/* The most views one monitor pass looks at the snapshot of (more than VIEW_MAX_ALL's default). */
#define VIEW_TICK_MAX 64

enum view_state { VIEW_STARTING, VIEW_READY, VIEW_STOPPING, VIEW_FAILED };

struct view_waiter {
	ops_view_ready_fn fn;
	void *arg;
	struct view_waiter *next;
};

struct view {
	char snap_id[ID_MAX];
	char runtime_id[RUNTIME_ID_MAX];
	enum view_state state;
	uid_t owner;	   /* the snapshot's owner: whose bound it counts in */
	int64_t used_ms;   /* the last request's time */
	int64_t failed_ms; /* VIEW_FAILED: when */
	char why[MESSAGE_MAX];
	struct view_waiter *waiters;
	struct view *next;
};

static struct {
	pthread_mutex_t lock;
	struct view *list;
	int64_t idle_ms;	 /* 0 until first asked */
	long max_owner, max_all; /* 0 until first asked */
} views = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int64_t idle_ms(void)
{
	if (!views.idle_ms) {
		views.idle_ms =
		    env_count("SNAPFS_SNAPSHOT_VIEW_IDLE", VIEW_IDLE_DEFAULT_S) * 1000LL;
	}
	return views.idle_ms;
}

static struct view *find_locked(const char *snap_id)
{
	for (struct view *v = views.list; v; v = v->next)
		if (strcmp(v->snap_id, snap_id) == 0)
			return v;
	return NULL;
}

static void unlink_locked(struct view *gone)
{
	for (struct view **p = &views.list; *p; p = &(*p)->next)
		if (*p == gone) {
			*p = gone->next;
			return;
		}
}

/* Call every waiter of a list taken from a view, with @rc. */
static void waiters_call(struct view_waiter *w, int rc)
{
	while (w) {
		struct view_waiter *next = w->next;
		w->fn(w->arg, rc);
		free(w);
		w = next;
	}
}

/* <state>/sandboxes/.view-<snap_id>[/@leaf]. */
static int view_path(const char *snap_id, const char *leaf, char *out, size_t size)
{
	char dir_id[ID_MAX + sizeof(VIEW_DIR_PREFIX)];
	snprintf(dir_id, sizeof(dir_id), VIEW_DIR_PREFIX "%s", snap_id);
	return sandbox_path(dir_id, leaf, out, size);
}

/* --- restore and delete ----------------------------------------------------------- */

/*
 * Delete view container @runtime_id and the directory of @snap_id's view.
 * A delete that fails keeps the directory: its `container` file is how the
 * next start-up (snapview_sweep()) or the next view of it (view_prepare())
 * finds the container to delete again.
 */
static void view_remove(const char *snap_id, const char *runtime_id)
{
	char dir[PATH_MAX];
	struct err e = {0};
	/* Its agent entry goes at the monitor's next pass (ops_agent_prune_views()). */
	if (runtime_id[0] && runsc_delete(&ops.runsc, runtime_id, &e) < 0) {
		warning("cannot delete the view of snapshot %s (container %s), its directory "
			"stays for the next start-up: %s",
			snap_id, runtime_id, e.msg);
		return;
	}
	if (view_path(snap_id, NULL, dir, sizeof(dir)) == 0)
		rm_rf(dir);
}

static void recorded_container(const char *dir_name, char out[RUNTIME_ID_MAX]);

/* `runsc restore` of the bundle in @snap's view directory from @image_dir, then stop it. */
static int view_run(const struct snapshot *snap, const char *runtime_id, const char *image_dir,
		    struct err *e)
{
	char bundle[PATH_MAX], console[PATH_MAX];
	pid_t pid = 0;
	view_path(snap->id, "bundle", bundle, sizeof(bundle));
	view_path(snap->id, "console", console, sizeof(console));
	/* Its output goes to a file of its own: nothing of a view reaches a console. */
	int fd = open(console, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_set(e, errno, "cannot create %s: %s", console, strerror(errno));
	struct runsc_stdio io = {.child_fd = fd, .read_fd = -1};
	int rc = runsc_restore(&ops.runsc, 0, runtime_id, bundle, image_dir, &io, &pid, e);
	close(fd);
	/* Its own processes stop before anything else is asked of it. */
	if (rc == 0)
		rc = runsc_kill_all(&ops.runsc, runtime_id, SIGSTOP, e);
	if (rc == 0 && cgroup_adopt(ops.cgroup_parent, runtime_id, e) < 0) {
		warning("the view of snapshot %s stays in the daemon's cgroup: %s", snap->id,
			e->msg);
		*e = (struct err){0};
	}
	return rc;
}

static int view_prepare(const struct snapshot *snap, const char *runtime_id, struct err *e)
{
	char dir[PATH_MAX], record[PATH_MAX], digest[DIGEST_MAX];
	int rc = view_path(snap->id, NULL, dir, sizeof(dir));
	if (rc == 0)
		rc = view_path(snap->id, "container", record, sizeof(record));
	if (rc < 0)
		return err_set(e, ENAMETOOLONG, "the view of %s: path too long", snap->id);
	/* A view this daemon left half made, or whose delete failed: its container first. */
	char dir_id[ID_MAX + sizeof(VIEW_DIR_PREFIX)], left[RUNTIME_ID_MAX];
	snprintf(dir_id, sizeof(dir_id), VIEW_DIR_PREFIX "%s", snap->id);
	recorded_container(dir_id, left);
	if (left[0] && strcmp(left, runtime_id) != 0 && runsc_delete(&ops.runsc, left, e) < 0)
		return err_wrap(e, "cannot delete container %s of an earlier view", left);
	rm_rf(dir);
	rc = mkdir_p(dir, 0700);
	if (rc == 0)
		rc = write_file_durable(record, runtime_id, strlen(runtime_id));
	if (rc < 0)
		return err_set(e, -rc, "cannot write %s: %s", record, strerror(-rc));
	const char *entry = snap->entrypoint[0] ? snap->entrypoint : OPS_DEFAULT_ENTRYPOINT;
	memcpy(digest, snap->image_digest, DIGEST_MAX);
	/* No row of that id: ops_net_prepare() makes no network (its view_net_prepare()). */
	return container_prepare(dir_id, runtime_id, snap->image, entry, snap->env, 0, &snap->res,
				 digest, e);
}

/* Restore @snap_id's view into container @runtime_id. */
static int view_restore(const char *snap_id, const char *runtime_id, struct err *e)
{
	struct snapshot snap;
	char image_dir[PATH_MAX];
	if (row_snapshot_get(snap_id, &snap) < 0)
		return err_set(e, ENOENT, "snapshot %s no longer exists", snap_id);
	if (snap.gpu)
		return err_set(e, EIO, "the files of GPU snapshot %s cannot be read without a fork",
			       snap_id);
	int rc = snapshot_restore_begin(snap_id, e);
	if (rc < 0)
		return rc;
	cache_hold(snap_id);
	rc = cache_materialize(ops.store, snap_id, NULL, NULL, image_dir, e);
	if (rc == 0)
		rc = view_prepare(&snap, runtime_id, e);
	if (rc == 0)
		rc = view_run(&snap, runtime_id, image_dir, e);
	cache_release(snap_id);
	cache_trim();
	snapshot_restore_end(snap_id);
	if (rc < 0)
		view_remove(snap_id, runtime_id);
	return rc;
}

/* What `error` of a snapshot says of its view: a failure, cleared by a later success. */
#define VIEW_ERROR_PREFIX "root/: "

/* Snapshot @snap_id's `error`: why its view failed (@e), or none once one is ready. */
static void view_note(const char *snap_id, const struct err *e)
{
	struct snapshot snap;
	bool changed = false;
	pthread_mutex_lock(&ops.lock);
	if (row_snapshot_get(snap_id, &snap) == 0) {
		if (e)
			snprintf(snap.message, sizeof(snap.message), VIEW_ERROR_PREFIX "%.*s",
				 (int)(sizeof(snap.message) - sizeof(VIEW_ERROR_PREFIX)), e->msg);
		else if (str_has_prefix(snap.message, VIEW_ERROR_PREFIX))
			snap.message[0] = '\0';
		changed = e || !snap.message[0];
		if (changed)
			row_snapshot_update(&snap);
	}
	pthread_mutex_unlock(&ops.lock);
	if (changed)
		ops_notify(OPS_OBJ_SNAPSHOT, snap_id);
}

/* --- the jobs ------------------------------------------------------------------- */

struct view_job {
	char snap_id[ID_MAX];
	char runtime_id[RUNTIME_ID_MAX];
	const char *why; /* a stop's, for the log: "was idle", ... */
};

static void start_job_run(void *arg);
static void stop_job_run(void *arg);

/* Queue the delete of READY view @v (views.lock held), @why for the log; false when it cannot. */
static bool stop_locked(struct view *v, const char *why)
{
	struct view_job *job = calloc(1, sizeof(*job));
	if (!job)
		return false;
	snprintf(job->snap_id, sizeof(job->snap_id), "%s", v->snap_id);
	snprintf(job->runtime_id, sizeof(job->runtime_id), "%s", v->runtime_id);
	job->why = why;
	if (jobs_submit(JOB_LIFECYCLE, stop_job_run, job) < 0) {
		free(job); /* the next pass, or the next start, tries again */
		return false;
	}
	v->state = VIEW_STOPPING;
	return true;
}

/* The least recently used READY view not in use of @owner (-1: any) but @self, @chosen; or NULL. */
static struct view *evictable_locked(long owner, const struct view *self, const struct view *chosen,
				     int64_t now)
{
	struct view *lru = NULL;
	for (struct view *v = views.list; v; v = v->next)
		if (v != self && v != chosen && v->state == VIEW_READY &&
		    (owner < 0 || v->owner == (uid_t)owner) && now - v->used_ms >= VIEW_BUSY_MS &&
		    (!lru || v->used_ms < lru->used_ms))
			lru = v;
	return lru;
}

/*
 * May view @v start (views.lock held)? Views STARTING or READY but @v
 * count: past a bound, the least recently used one not in use goes (of
 * @v's owner, then of anyone); with none that may, -EAGAIN and why.
 * Victims are chosen before any goes: a refusal evicts nothing.
 */
static int view_admit_locked(struct view *v, struct err *e)
{
	if (!views.max_all) {
		views.max_owner =
		    env_count("SNAPFS_SNAPSHOT_VIEW_MAX_PER_OWNER", VIEW_MAX_PER_OWNER);
		views.max_all = env_count("SNAPFS_SNAPSHOT_VIEW_MAX", VIEW_MAX_ALL);
	}
	long mine = 0, all = 0;
	int64_t now = mono_ms();
	for (struct view *o = views.list; o; o = o->next)
		if (o != v && (o->state == VIEW_STARTING || o->state == VIEW_READY)) {
			all++;
			mine += o->owner == v->owner;
		}
	struct view *own_victim = NULL, *any_victim = NULL;
	if (mine >= views.max_owner) {
		own_victim = evictable_locked(v->owner, v, NULL, now);
		if (!own_victim)
			return err_set(e, EAGAIN,
				       "%ld views of uid %u's snapshots are up and in use "
				       "(at most %ld): try again later",
				       mine, (unsigned)v->owner, views.max_owner);
		all--;
	}
	if (all >= views.max_all) {
		any_victim = evictable_locked(-1, v, own_victim, now);
		if (!any_victim)
			return err_set(e, EAGAIN,
				       "%ld views of snapshots are up and in use (at most %ld): "
				       "try again later",
				       all, views.max_all);
	}
	if ((own_victim && !stop_locked(own_victim, "made room for another: deleted")) ||
	    (any_victim && !stop_locked(any_victim, "made room for another: deleted")))
		return err_set(e, EAGAIN, "cannot delete a view to make room for %s's", v->snap_id);
	return 0;
}

/* Queue @v's start with a fresh container id (views.lock held); -errno when it cannot. */
static int start_locked(struct view *v, struct err *e)
{
	int rc = view_admit_locked(v, e);
	if (rc < 0)
		return rc;
	struct view_job *job = calloc(1, sizeof(*job));
	rc = job ? runsc_new_container_id(v->runtime_id) : -ENOMEM;
	if (rc == 0) {
		snprintf(job->snap_id, sizeof(job->snap_id), "%s", v->snap_id);
		snprintf(job->runtime_id, sizeof(job->runtime_id), "%s", v->runtime_id);
		rc = jobs_submit(JOB_LIFECYCLE, start_job_run, job);
	}
	if (rc < 0) {
		free(job);
		return err_set(e, -rc, "cannot start the view of snapshot %s: %s", v->snap_id,
			       strerror(-rc));
	}
	v->state = VIEW_STARTING;
	return 0;
}

static void start_job_run(void *arg)
{
	struct view_job *job = arg;
	struct err e = {0};
	int64_t t0 = mono_ms();
	int rc = view_restore(job->snap_id, job->runtime_id, &e);
	view_note(job->snap_id, rc < 0 ? &e : NULL);
	if (rc < 0)
		report_job_failure(OPS_OBJ_SNAPSHOT, job->snap_id, "root", &e);
	else
		info("the view of snapshot %s is ready (container %s) in %lld ms", job->snap_id,
		     job->runtime_id, (long long)(mono_ms() - t0));
	pthread_mutex_lock(&views.lock);
	struct view *v = find_locked(job->snap_id);
	struct view_waiter *w = v ? v->waiters : NULL;
	if (v) {
		v->waiters = NULL;
		v->state = rc < 0 ? VIEW_FAILED : VIEW_READY;
		v->used_ms = v->failed_ms = mono_ms();
		snprintf(v->why, sizeof(v->why), "%s", rc < 0 ? e.msg : "");
	}
	pthread_mutex_unlock(&views.lock);
	if (!v && rc == 0) /* dropped meanwhile */
		view_remove(job->snap_id, job->runtime_id);
	waiters_call(w, rc < 0 ? -EIO : 0);
	free(job);
}

static void stop_job_run(void *arg)
{
	struct view_job *job = arg;
	view_remove(job->snap_id, job->runtime_id);
	info("the view of snapshot %s %s (container %s)", job->snap_id, job->why, job->runtime_id);
	struct err e = {0};
	struct view_waiter *w = NULL;
	pthread_mutex_lock(&views.lock);
	struct view *v = find_locked(job->snap_id);
	/* Requests came while it stopped: they get a new one, within the bounds. */
	if (v && v->waiters && start_locked(v, &e) < 0) {
		w = v->waiters;
		v->waiters = NULL;
	}
	if (v && !v->waiters) {
		unlink_locked(v);
		free(v);
	}
	pthread_mutex_unlock(&views.lock);
	if (w && e.code == EAGAIN)
		view_note(job->snap_id, &e);
	waiters_call(w, -(e.code ? e.code : EIO));
	free(job);
}

/* Is snapshot @snap_id's row gone, or no longer completed? (a registry read: no lock held) */
static bool snapshot_went(const char *snap_id)
{
	struct snapshot snap;
	return row_snapshot_get(snap_id, &snap) < 0 || snap.state != SNAP_COMPLETED;
}

void snapview_tick(void)
{
	int64_t now = mono_ms(), idle = idle_ms();
	/* Which snapshots went, asked before the lock: the registry is no leaf. */
	char went[VIEW_TICK_MAX][ID_MAX];
	size_t n_went = 0;
	pthread_mutex_lock(&views.lock);
	char ids[VIEW_TICK_MAX][ID_MAX];
	size_t n = 0;
	for (struct view *v = views.list; v && n < VIEW_TICK_MAX; v = v->next)
		if (v->state == VIEW_READY)
			memcpy(ids[n++], v->snap_id, ID_MAX);
	pthread_mutex_unlock(&views.lock);
	for (size_t i = 0; i < n; i++)
		if (snapshot_went(ids[i]))
			memcpy(went[n_went++], ids[i], ID_MAX);
	pthread_mutex_lock(&views.lock);
	for (size_t i = 0; i < n_went; i++) {
		struct view *v = find_locked(went[i]);
		if (v && v->state == VIEW_READY)
			stop_locked(v, "lost its snapshot: deleted");
	}
	for (struct view **p = &views.list; *p;) {
		struct view *v = *p;
		/* A failure answered for its retry time: forgotten, its container is gone. */
		if (v->state == VIEW_FAILED && !v->waiters && now - v->failed_ms >= VIEW_RETRY_MS) {
			info("forgot the failed view of snapshot %s", v->snap_id);
			*p = v->next;
			free(v);
			continue;
		}
		if (v->state == VIEW_READY && now - v->used_ms >= idle)
			stop_locked(v, "was idle: deleted");
		p = &v->next;
	}
	pthread_mutex_unlock(&views.lock);
}

/* --- asking for one ------------------------------------------------------------- */

/* Snapshot @snap_id as @who may read its files: 0 and its @owner (may be NULL), or why not. */
static int view_allowed(const struct caller *who, const char *snap_id, uid_t *owner, struct err *e)
{
	struct snapshot snap;
	if (snapshot_get_as(who, snap_id, &snap) < 0)
		return err_set(e, ENOENT, "snapshot %s does not exist", snap_id);
	if (snap.state != SNAP_COMPLETED)
		return err_set(e, EBUSY, "snapshot %s is %s, not completed", snap_id,
			       snapshot_state_name(snap.state));
	if (owner)
		*owner = snap.owner_uid;
	return 0;
}

/* What a request on @v answers now (views.lock held): 0 ready, 1 wait, or -errno. */
static int view_answer_locked(struct view *v, bool start, struct err *e)
{
	switch (v->state) {
	case VIEW_READY:
		v->used_ms = mono_ms();
		return 0;
	case VIEW_FAILED:
		if (mono_ms() - v->failed_ms < VIEW_RETRY_MS)
			return err_set(e, EIO, "%s", v->why);
		if (!start)
			return 1;
		return start_locked(v, e) < 0 ? -e->code : 1;
	default:
		return 1;
	}
}

int ops_snapview_want(const struct caller *who, const char *view_id, ops_view_ready_fn fn,
		      void *arg, struct err *e)
{
	const char *snap_id = view_id + 1;
	uid_t owner = 0;
	int rc = view_allowed(who, snap_id, &owner, e);
	if (rc < 0)
		return rc;
	struct view_waiter *w = fn ? calloc(1, sizeof(*w)) : NULL;
	if (fn && !w)
		return err_set(e, ENOMEM, "out of memory");
	pthread_mutex_lock(&views.lock);
	struct view *v = find_locked(snap_id);
	if (!v && fn) {
		v = calloc(1, sizeof(*v));
		if (v) {
			snprintf(v->snap_id, sizeof(v->snap_id), "%s", snap_id);
			v->owner = owner;
			rc = start_locked(v, e);
			if (rc == 0) {
				v->next = views.list;
				views.list = v;
			} else {
				free(v);
				v = NULL;
			}
		} else {
			rc = err_set(e, ENOMEM, "out of memory");
		}
		rc = rc < 0 ? rc : 1;
	} else {
		rc = v ? view_answer_locked(v, fn != NULL, e) : 1;
	}
	if (rc == 1 && w) {
		*w = (struct view_waiter){fn, arg, v->waiters};
		v->waiters = w;
		w = NULL;
	}
	pthread_mutex_unlock(&views.lock);
	free(w);
	if (rc == -EAGAIN) /* past a bound: the snapshot's `error` says why */
		view_note(snap_id, e);
	return rc;
}

bool snapview_current(const char *view_id, const char *runtime_id)
{
	pthread_mutex_lock(&views.lock);
	struct view *v = find_locked(view_id + 1);
	bool current = v && v->state == VIEW_READY && strcmp(v->runtime_id, runtime_id) == 0;
	pthread_mutex_unlock(&views.lock);
	return current;
}

int snapview_container(const struct caller *who, const char *view_id,
		       char runtime_id[RUNTIME_ID_MAX], struct err *e)
{
	const char *snap_id = view_id + 1;
	int rc = view_allowed(who, snap_id, NULL, e);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&views.lock);
	struct view *v = find_locked(snap_id);
	if (v && v->state == VIEW_READY) {
		v->used_ms = mono_ms();
		memcpy(runtime_id, v->runtime_id, RUNTIME_ID_MAX);
	} else {
		rc = err_set(e, EAGAIN, "the view of snapshot %s is not ready", snap_id);
	}
	pthread_mutex_unlock(&views.lock);
	return rc;
}

/* --- delete, start-up, shutdown -------------------------------------------------- */

void snapview_drop(const char *snap_id)
{
	int64_t until = mono_ms() + VIEW_DROP_WAIT_MS;
	for (;;) {
		char runtime_id[RUNTIME_ID_MAX] = "";
		struct view_waiter *w = NULL;
		bool busy = false;
		pthread_mutex_lock(&views.lock);
		struct view *v = find_locked(snap_id);
		busy = v && (v->state == VIEW_STARTING || v->state == VIEW_STOPPING);
		if (v && (!busy || mono_ms() > until)) {
			if (v->state == VIEW_READY)
				memcpy(runtime_id, v->runtime_id, sizeof(runtime_id));
			w = v->waiters;
			unlink_locked(v);
			free(v);
			busy = false;
		}
		pthread_mutex_unlock(&views.lock);
		if (!busy) {
			if (runtime_id[0])
				view_remove(snap_id, runtime_id);
			waiters_call(w, -ENOENT);
			return;
		}
		usleep(50 * 1000);
	}
}

/* The container a view directory names, into @out ("" if none). */
static void recorded_container(const char *dir_name, char out[RUNTIME_ID_MAX])
{
	char path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	out[0] = '\0';
	if (sandbox_path(dir_name, "container", path, sizeof(path)) < 0 ||
	    read_file(path, &text, &len, RUNTIME_ID_MAX) < 0)
		return;
	if (len < RUNTIME_ID_MAX && runtime_id_ok(text))
		memcpy(out, text, len + 1);
}

void snapview_sweep(void)
{
	DIR *d = opendir(ops.sandbox_dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		char cid[RUNTIME_ID_MAX];
		struct err e = {0};
		if (strncmp(de->d_name, VIEW_DIR_PREFIX, strlen(VIEW_DIR_PREFIX)) != 0)
			continue;
		recorded_container(de->d_name, cid);
		if (cid[0] && runsc_delete(&ops.runsc, cid, &e) < 0) {
			/* Kept: the next start-up, or the next view of it, tries again. */
			warning("cannot delete the view container %s left by the last run: %s", cid,
				e.msg);
			continue;
		}
		if (cid[0])
			info("deleted the view container %s left by the last run", cid);
		rm_rf_at(dirfd(d), de->d_name);
	}
	closedir(d);
}

/*
 * Shutdown reaps for itself: the monitor, which reaps what runsc leaves to
 * the daemon (exits_collect(), lib/spawn.h), has ended, and `runsc delete`
 * waits for a view's killed sandbox process to be gone: unreaped, a zombie,
 * it never is, and each delete ran into its deadline (60 s). The statuses
 * are dropped: no one asks for a sandbox's exit status any more.
 */
static atomic_bool fini_reaping;

static void *fini_reaper(void *arg)
{
	(void)arg;
	while (atomic_load(&fini_reaping)) {
		spawn_reap_adopted(NULL, NULL);
		usleep(20 * 1000);
	}
	return NULL;
}

void snapview_fini(void)
{
	pthread_mutex_lock(&views.lock);
	struct view *list = views.list;
	views.list = NULL;
	pthread_mutex_unlock(&views.lock);
	pthread_t reaper;
	atomic_store(&fini_reaping, true);
	bool reaping = list && pthread_create(&reaper, NULL, fini_reaper, NULL) == 0;
	while (list) {
		struct view *next = list->next;
		/* A FAILED view's container went with its failure; a STARTING one's never came. */
		if (list->state == VIEW_READY || list->state == VIEW_STOPPING)
			view_remove(list->snap_id, list->runtime_id);
		waiters_call(list->waiters, -EIO);
		free(list);
		list = next;
	}
	atomic_store(&fini_reaping, false);
	if (reaping)
		pthread_join(reaper, NULL);
}
