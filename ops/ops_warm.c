/*
 * ops_warm.c - warm pools: sandboxes restored from a snapshot ahead of
 * time and paused, so that a fork takes one in milliseconds
 * (`snapshots/<id>/warm`; docs/control-files.md, "Warm pools").
 *
 * Design:
 *   - A member is a sandbox row of its own (its id, bundle, container,
 *     network identity and cgroup), in state SB_WARM, owned by the
 *     snapshot's owner (uid and gid): its egress chain is that owner's from
 *     the restore on (ops_net.c reads the owner off the row: a rule of a
 *     non-root owner inside a denied range comes after the denies), also
 *     for what its processes run between the restore and the pause. The
 *     rows' walks (ops_rows.c, quotas' counts included) and
 *     sandbox_get_as() skip that state, so no user sees a member in
 *     sandboxes/, sandboxes/index, metrics' lines, a snapshot's `fork`
 *     list or a lookup; the row is what lets the network code and a
 *     restart find it.
 *   - A member is restored at the snapshot's own limits and network, then
 *     `runsc pause`d (runsc restore here has no paused flag). A fork whose
 *     sandbox is what a member is (the member's owner, no raised limits, no
 *     GPU, the same egress rules) takes one (warm_take(), under ops.lock):
 *     the row becomes the fork's (its owner, timeout, ports), state
 *     starting; the fork's lifecycle job sets its egress chain again from
 *     the row and resumes it (ops_restore.c). Anything else restores as
 *     before (root's fork of a user's snapshot too); so does a fork that
 *     finds no member ready. A member whose process ended while paused (OOM,
 *     a runsc crash) is not taken: the take forgets it, and the thread
 *     deletes it (`doomed`) and restores a replacement.
 *   - One thread of its own fills the pools, one restore at a time and only
 *     while the lifecycle and checkpoint queues are idle: it never holds a
 *     place a user's fork or snapshot needs, and never runs two restores
 *     beside a user's.
 *   - --warm-max (a count, or the memory the members may hold) bounds all
 *     pools of the host. A `warm` write above what is left is accepted: the
 *     read then shows READY below WANT for as long as the bound holds.
 *   - A failed restore makes its pool wait WARM_BACKOFF_FIRST_MS, doubled
 *     at each failure in a row up to WARM_BACKOFF_MAX_MS; the snapshot's
 *     `error` says why (cleared by the next member made).
 *   - `warm 0` deletes the ready members before it returns; a restore in
 *     flight is deleted when it ends. A snapshot's delete drains its pool
 *     first (warm_drain(): it waits for that restore). A snapshot row that
 *     goes another way (the sync pass forgets one another host deleted,
 *     ops_sync.c; the start-up reconciliation) or turns failed: the thread
 *     drops its pool at its next pass (pools_prune_locked()), its members
 *     and its saved want with it.
 *   - What a pool wants is kept in <state>/warm/<snapshot id>; its members
 *     are not: a restart deletes every SB_WARM row's container and
 *     directory (warm_reconcile()), and the pool refills. A clean shutdown
 *     deletes them too (warm_stop()).
 *
 * Locks: the pools are under ops.lock (the take is one step with the
 * registry's update); nothing slow runs under it. The thread waits on
 * warm_cond with ops.lock.
 */
#include "ops/ops_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/files.h"
#include "ops/warm_plan.h"
#include "runtime/cache.h"
#include "runtime/runsc/cgroup.h"
#include "runtime/runsc/console.h"

struct pool {
	char snap_id[ID_MAX];
	unsigned want;
	unsigned filling; /* 0 or 1: the restore in flight */
	unsigned ready;
	char ids[WARM_WANT_MAX][ID_MAX]; /* the ready members, oldest first */
	int64_t bytes[WARM_WANT_MAX];	 /* the memory each holds */
	int64_t backoff_ms;		 /* 0: the last restore did not fail */
	int64_t retry_at;		 /* mono_ms() before which it does not try */
	struct pool *next;
};

static struct pool *pools; /* under ops.lock */
static struct warm_max warm_max = {.bytes = false, .value = 16};
static pthread_cond_t warm_cond = PTHREAD_COND_INITIALIZER;
static pthread_t warm_thread;
static bool warm_started, warm_stopping;
/* Members forgotten under the lock (one that died while paused): the thread deletes them. */
static struct strbuf doomed = STRBUF_INIT;

/* --- the pools (ops.lock held) --------------------------------------------- */

static struct pool *pool_get(const char *snap_id, bool create)
{
	for (struct pool *p = pools; p; p = p->next)
		if (strcmp(p->snap_id, snap_id) == 0)
			return p;
	if (!create)
		return NULL;
	struct pool *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	snprintf(p->snap_id, sizeof(p->snap_id), "%s", snap_id);
	p->next = pools;
	pools = p;
	return p;
}

/* Forget @p once it wants nothing and holds nothing. */
static void pool_drop_if_empty(struct pool *p)
{
	if (p->want || p->ready || p->filling)
		return;
	for (struct pool **pp = &pools; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			free(p);
			return;
		}
}

static void totals_locked(unsigned *members, int64_t *bytes)
{
	*members = 0;
	*bytes = 0;
	for (struct pool *p = pools; p; p = p->next) {
		*members += p->ready + p->filling;
		for (unsigned i = 0; i < p->ready; i++)
			*bytes += p->bytes[i];
	}
}

/* Move the ready members past @keep into @out (ids a line each), for deletion outside the lock. */
static void pool_trim_locked(struct pool *p, unsigned keep, struct strbuf *out)
{
	while (p->ready > keep) {
		p->ready--;
		strbuf_addf(out, "%s\n", p->ids[p->ready]);
	}
}

/* Forget @p's oldest ready member (taken, or gone). */
static void pool_shift_locked(struct pool *p)
{
	p->ready--;
	memmove(p->ids, p->ids + 1, p->ready * sizeof(p->ids[0]));
	memmove(p->bytes, p->bytes + 1, p->ready * sizeof(p->bytes[0]));
}

static bool snapshot_deleting(const char *snap_id)
{
	struct snapshot_use *u = snapshot_use_get(snap_id, false);
	return u && u->deleting;
}

/* --- a member's container ---------------------------------------------------- */

/* Delete member @id: its container, console, directory and row. */
static void member_delete(const char *id)
{
	struct sandbox *sb = malloc(sizeof(*sb));
	char tomb[PATH_MAX] = "";
	struct err e = {0};
	if (!sb)
		return;
	if (row_sandbox_get(id, sb) == 0 && sb->state == SB_WARM) {
		console_detach(id);
		/* Resumed first, so that the kill reaches a sandbox that runs. */
		if (sb->runtime_id[0])
			runsc_resume(&ops.runsc, sb->runtime_id, NULL);
		if (sb->runtime_id[0] && container_stop(sb->runtime_id, &e) < 0)
			warning("cannot delete warm sandbox %s's container %s: %s", id,
				sb->runtime_id, e.msg);
		ops_agent_forget(id);
		pthread_mutex_lock(&ops.lock);
		row_sandbox_delete(id);
		sandbox_bury(id, tomb, sizeof(tomb));
		pthread_mutex_unlock(&ops.lock);
		if (tomb[0])
			rm_rf(tomb);
	}
	free(sb);
}

static void member_delete_line(const char *id, void *arg)
{
	(void)arg;
	member_delete(id);
}

/* The memory member @runtime_id holds: its cgroup's count, else the snapshot's image size. */
static int64_t member_bytes(const char *runtime_id, const struct snapshot *snap)
{
	struct cgroup_usage u = {0};
	if (cgroup_usage(ops.cgroup_parent, runtime_id, &u) == 0 && u.memory_bytes > 0)
		return u.memory_bytes;
	return snap->size_bytes;
}

/* The row of a new member of @snap, into @sb. */
static void member_row(const struct snapshot *snap, struct sandbox *sb)
{
	memset(sb, 0, sizeof(*sb));
	memcpy(sb->image, snap->image, sizeof(sb->image));
	memcpy(sb->image_digest, snap->image_digest, sizeof(sb->image_digest));
	memcpy(sb->entrypoint, snap->entrypoint, sizeof(sb->entrypoint));
	memcpy(sb->env, snap->env, sizeof(sb->env));
	memcpy(sb->parent_snapshot, snap->id, sizeof(sb->parent_snapshot));
	memcpy(sb->egress, snap->egress, sizeof(sb->egress));
	sb->network = snap->network;
	sb->res = snap->res;
	/* The snapshot's owner: the network code builds its chain as that owner's (ops_net.c). */
	sb->owner_uid = snap->owner_uid;
	sb->owner_gid = snap->owner_gid;
	sb->state = SB_WARM;
	sb->created_at = now_ms();
}

/* Restore the image of @snap into member @sb (its row in the registry), then pause it. */
static int member_restore(const struct snapshot *snap, struct sandbox *sb, struct err *e)
{
	char image_dir[PATH_MAX], digest[DIGEST_MAX];
	const char *entry = snap->entrypoint[0] ? snap->entrypoint : OPS_DEFAULT_ENTRYPOINT;
	cache_hold(snap->id);
	int rc = cache_materialize(ops.store, snap->id, NULL, NULL, image_dir, e);
	memcpy(digest, snap->image_digest, DIGEST_MAX);
	if (rc == 0)
		rc = container_prepare(sb->id, sb->runtime_id, snap->image, entry, snap->env,
				       CONTAINER_BACKGROUND, /* below users' work */
				       &sb->res, digest, e);
	if (rc == 0)
		rc = container_start(sb->id, sb->runtime_id, false, image_dir, &sb->pid, e);
	cache_release(snap->id);
	cache_trim();
	if (rc == 0)
		rc = runsc_pause(&ops.runsc, sb->runtime_id, e);
	return rc;
}

/*
 * Make one member of snapshot @snap_id: its row first (a crash then
 * leaves a row a restart deletes, never a container nobody names), then
 * the restore and the pause. Its id in @id, its memory in @bytes.
 */
static int member_make(const char *snap_id, char id[ID_MAX], int64_t *bytes, struct err *e)
{
	_cleanup_free_ struct snapshot *snap = malloc(sizeof(*snap));
	_cleanup_free_ struct sandbox *sb = malloc(sizeof(*sb));
	if (!snap || !sb)
		return err_set(e, ENOMEM, "out of memory");
	if (row_snapshot_get(snap_id, snap) < 0)
		return err_set(e, ENOENT, "snapshot %s no longer exists", snap_id);
	member_row(snap, sb);
	int rc = new_object_id("sbx-", sb->id);
	if (rc == 0)
		rc = runsc_new_container_id(sb->runtime_id);
	if (rc == 0)
		rc = row_sandbox_insert(sb);
	if (rc < 0)
		return err_set(e, -rc, "cannot record a warm sandbox: %s", strerror(-rc));
	memcpy(id, sb->id, ID_MAX);
	rc = member_restore(snap, sb, e);
	if (rc == 0) {
		*bytes = member_bytes(sb->runtime_id, snap);
		pthread_mutex_lock(&ops.lock);
		rc = row_sandbox_update(sb); /* its pid */
		pthread_mutex_unlock(&ops.lock);
		if (rc < 0)
			err_set(e, -rc, "cannot record warm sandbox %s: %s", sb->id, strerror(-rc));
	}
	if (rc < 0)
		member_delete(sb->id);
	return rc;
}

/* --- the snapshot's `error` -------------------------------------------------- */

#define WARM_ERROR_PREFIX "warm pool: "

/* Say @why in snapshot @snap_id's `error` (NULL: clear what the pool said there). */
static void pool_say(const char *snap_id, const char *why)
{
	struct snapshot *snap = malloc(sizeof(*snap));
	pthread_mutex_lock(&ops.lock);
	if (snap && row_snapshot_get(snap_id, snap) == 0) {
		bool ours =
		    strncmp(snap->message, WARM_ERROR_PREFIX, strlen(WARM_ERROR_PREFIX)) == 0;
		if (why) {
			snprintf(snap->message, sizeof(snap->message), WARM_ERROR_PREFIX "%.900s",
				 why);
			row_snapshot_update(snap);
		} else if (ours) {
			snap->message[0] = '\0';
			row_snapshot_update(snap);
		}
	}
	pthread_mutex_unlock(&ops.lock);
	free(snap);
	ops_notify(OPS_OBJ_SNAPSHOT, snap_id);
}

/* --- the thread ---------------------------------------------------------------- */

/* Is the host's work queue idle, so that a member's restore delays nobody's? */
static bool queues_idle(void)
{
	return jobs_pending(JOB_LIFECYCLE) == 0 && jobs_pending(JOB_CHECKPOINT) == 0;
}

/* The pool that should get a member now, its restore marked in flight; NULL: none. */
static struct pool *pool_next_locked(int64_t *wait_ms)
{
	unsigned members;
	int64_t bytes, now = mono_ms();
	totals_locked(&members, &bytes);
	*wait_ms = 1000;
	if (!queues_idle())
		return NULL;
	for (struct pool *p = pools; p; p = p->next) {
		if (p->want <= p->ready + p->filling || snapshot_deleting(p->snap_id))
			continue;
		if (now < p->retry_at) {
			if (p->retry_at - now < *wait_ms)
				*wait_ms = p->retry_at - now;
			continue;
		}
		int64_t next = p->ready ? p->bytes[0] : 0;
		if (!warm_max_allows(&warm_max, members, bytes, next))
			continue;
		p->filling = 1;
		return p;
	}
	return NULL;
}

/* A member of @p's snapshot was made (@rc 0) or not: keep it, or say why and back off. */
static void pool_filled(const char *snap_id, int rc, const char *id, int64_t bytes,
			const struct err *e)
{
	bool extra = false;
	pthread_mutex_lock(&ops.lock);
	struct pool *p = pool_get(snap_id, false);
	if (p) {
		p->filling = 0;
		if (rc < 0) {
			p->backoff_ms = warm_backoff_next(p->backoff_ms);
			p->retry_at = mono_ms() + p->backoff_ms;
		} else if (p->ready < p->want && !snapshot_deleting(snap_id)) {
			memcpy(p->ids[p->ready], id, ID_MAX);
			p->bytes[p->ready++] = bytes;
			p->backoff_ms = 0;
		} else {
			extra = true;
		}
	}
	int64_t backoff = p ? p->backoff_ms : 0;
	if (p)
		pool_drop_if_empty(p);
	pthread_cond_broadcast(&warm_cond);
	pthread_mutex_unlock(&ops.lock);
	if (rc == 0 && (extra || !p))
		member_delete(id);
	if (rc < 0) {
		char why[MESSAGE_MAX];
		snprintf(why, sizeof(why), "%.800s (next try in %lld s)", e->msg,
			 (long long)(backoff / 1000));
		warning("warm pool of snapshot %s: %s", snap_id, why);
		pool_say(snap_id, why);
	} else if (!extra) {
		pool_say(snap_id, NULL);
	}
	ops_notify(OPS_OBJ_SNAPSHOT, snap_id);
}

/* Is snapshot @snap_id's row gone, or no longer one a member can be restored from? */
static bool snapshot_gone_locked(const char *snap_id)
{
	struct snapshot *snap = malloc(sizeof(*snap));
	bool gone = snap && (row_snapshot_get(snap_id, snap) < 0 || snap->state != SNAP_COMPLETED);
	free(snap);
	return gone;
}

/*
 * Drop the pools whose snapshot row is gone without warm_drain() (the sync
 * pass forgot it, or it turned failed): their ready members into @ids, their
 * snapshots into @snaps (their saved wants go), for the work outside the
 * lock. One with a restore in flight wants 0: pool_filled() deletes the
 * member and drops it.
 */
static void pools_prune_locked(struct strbuf *ids, struct strbuf *snaps)
{
	for (struct pool **pp = &pools; *pp;) {
		struct pool *p = *pp;
		if (!p->want || !snapshot_gone_locked(p->snap_id)) {
			pp = &p->next;
			continue;
		}
		strbuf_addf(snaps, "%s\n", p->snap_id);
		p->want = 0;
		pool_trim_locked(p, 0, ids);
		if (p->filling) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		free(p);
	}
	/* And the members the takes forgot. */
	strbuf_addf(ids, "%s", strbuf_str(&doomed));
	strbuf_reset(&doomed);
}

static void want_save(const char *snap_id, unsigned want);

static void want_drop_line(const char *snap_id, void *arg)
{
	(void)arg;
	info("warm pool of snapshot %s dropped: the snapshot is gone", snap_id);
	want_save(snap_id, 0);
}

/* pools_prune_locked(), and its deletions with ops.lock dropped meanwhile (held on return). */
static void pools_prune(void)
{
	_cleanup_strbuf_ struct strbuf ids = STRBUF_INIT, snaps = STRBUF_INIT;
	pools_prune_locked(&ids, &snaps);
	if (!ids.len && !snaps.len)
		return;
	pthread_mutex_unlock(&ops.lock);
	strbuf_each_line(&snaps, want_drop_line, NULL);
	strbuf_each_line(&ids, member_delete_line, NULL);
	pthread_mutex_lock(&ops.lock);
}

static void *warm_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&ops.lock);
	while (!warm_stopping) {
		int64_t wait_ms;
		pools_prune();
		if (warm_stopping)
			break;
		struct pool *p = pool_next_locked(&wait_ms);
		if (!p) {
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += wait_ms / 1000;
			until.tv_nsec += (wait_ms % 1000) * 1000000;
			if (until.tv_nsec >= 1000000000) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&warm_cond, &ops.lock, &until);
			continue;
		}
		char snap_id[ID_MAX], id[ID_MAX] = "";
		memcpy(snap_id, p->snap_id, ID_MAX);
		pthread_mutex_unlock(&ops.lock);
		struct err e = {0};
		int64_t bytes = 0;
		int rc = member_make(snap_id, id, &bytes, &e);
		pool_filled(snap_id, rc, id, bytes, &e);
		pthread_mutex_lock(&ops.lock);
	}
	pthread_mutex_unlock(&ops.lock);
	return NULL;
}

/* --- want, kept on disk ---------------------------------------------------------- */

static int want_path(const char *snap_id, char out[PATH_MAX])
{
	return xsnprintf(out, PATH_MAX, "%s/warm/%s", ops.state_dir, snap_id);
}

static void want_save(const char *snap_id, unsigned want)
{
	char path[PATH_MAX], text[16];
	if (want_path(snap_id, path) < 0)
		return;
	if (want == 0) {
		unlink(path);
		return;
	}
	int n = snprintf(text, sizeof(text), "%u\n", want);
	int rc = write_file_durable(path, text, (size_t)n);
	if (rc < 0)
		warning("cannot keep the warm pool of snapshot %s in %s: %s", snap_id, path,
			strerror(-rc));
}

/* The wants kept: each file names a snapshot; one no longer here is removed. */
static void wants_load(void)
{
	char dir[PATH_MAX];
	if (xsnprintf(dir, sizeof(dir), "%s/warm", ops.state_dir) < 0 || mkdir_p(dir, 0700) < 0)
		return;
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char path[PATH_MAX], *text = NULL;
		size_t len = 0;
		unsigned want = 0;
		struct snapshot *snap = malloc(sizeof(*snap));
		if (de->d_name[0] == '.' || strlen(de->d_name) >= ID_MAX ||
		    want_path(de->d_name, path) < 0) {
			free(snap);
			continue;
		}
		bool keep = snap && read_file(path, &text, &len, 16) == 0 &&
			    warm_want_parse(text, &want, NULL) == 0 &&
			    row_snapshot_get(de->d_name, snap) == 0 &&
			    snap->state == SNAP_COMPLETED;
		struct pool *p = keep && want ? pool_get(de->d_name, true) : NULL;
		if (p)
			p->want = want;
		else
			unlink(path);
		free(text);
		free(snap);
	}
	if (d)
		closedir(d);
}

/* --- the operations ---------------------------------------------------------------- */

int warm_configure(const char *max, struct err *e)
{
	return warm_max_parse(max ? max : WARM_MAX_DEFAULT, &warm_max, e);
}

static int collect_warm(const struct sandbox *sb, void *arg)
{
	if (sb->state == SB_WARM)
		strbuf_addf(arg, "%s\n", sb->id);
	return strbuf_error(arg);
}

void warm_reconcile(void)
{
	_cleanup_strbuf_ struct strbuf ids = STRBUF_INIT;
	row_warm_each(collect_warm, &ids);
	if (ids.len)
		info("deleting the warm sandboxes the last run left:\n%s", ids.buf);
	strbuf_each_line(&ids, member_delete_line, NULL);
	wants_load();
}

int warm_start(void)
{
	warm_stopping = false;
	int rc = pthread_create(&warm_thread, NULL, warm_main, NULL);
	if (rc != 0)
		return -rc;
	warm_started = true;
	return 0;
}

void warm_stop(void)
{
	_cleanup_strbuf_ struct strbuf ids = STRBUF_INIT;
	if (warm_started) {
		pthread_mutex_lock(&ops.lock);
		warm_stopping = true;
		pthread_cond_broadcast(&warm_cond);
		pthread_mutex_unlock(&ops.lock);
		pthread_join(warm_thread, NULL);
		warm_started = false;
	}
	pthread_mutex_lock(&ops.lock);
	while (pools) {
		struct pool *p = pools;
		pool_trim_locked(p, 0, &ids);
		pools = p->next;
		free(p);
	}
	strbuf_addf(&ids, "%s", strbuf_str(&doomed));
	strbuf_release(&doomed);
	pthread_mutex_unlock(&ops.lock);
	strbuf_each_line(&ids, member_delete_line, NULL);
}

/* May @who set @snap_id's pool: whoever may fork it. */
static int warm_access(const struct caller *who, const char *snap_id, struct err *e)
{
	_cleanup_free_ struct snapshot *snap = malloc(sizeof(*snap));
	if (!snap)
		return err_set(e, ENOMEM, "out of memory");
	if (snapshot_get_as(who, snap_id, snap) < 0)
		return err_set(e, ENOENT, "snapshot %s does not exist", snap_id);
	int rc = access_check_create(who, "warm", e);
	if (rc < 0)
		return rc;
	if (snap->state != SNAP_COMPLETED)
		return err_set(e, EBUSY, "cannot keep sandboxes warm from snapshot %s: it is %s",
			       snap_id, snapshot_state_name(snap->state));
	if (snap->gpu)
		return err_set(e, EOPNOTSUPP,
			       "cannot keep sandboxes warm from snapshot %s: it has a GPU",
			       snap_id);
	return 0;
}

int ops_snapshot_warm_set(const struct caller *who, const char *snap_id, const char *text,
			  struct err *e)
{
	unsigned want;
	int rc = warm_want_parse(text, &want, e);
	if (rc == 0)
		rc = warm_access(who, snap_id, e);
	if (rc < 0)
		return rc;
	_cleanup_strbuf_ struct strbuf extra = STRBUF_INIT;
	pthread_mutex_lock(&ops.lock);
	struct pool *p = snapshot_deleting(snap_id) ? NULL : pool_get(snap_id, want > 0);
	if (snapshot_deleting(snap_id))
		rc = err_set(e, ENOENT, "snapshot %s is being deleted", snap_id);
	else if (want > 0 && !p)
		rc = err_set(e, ENOMEM, "out of memory");
	if (p) {
		p->want = want;
		p->retry_at = 0; /* a write tries again at once */
		pool_trim_locked(p, want, &extra);
		pool_drop_if_empty(p);
		pthread_cond_broadcast(&warm_cond);
	}
	pthread_mutex_unlock(&ops.lock);
	if (rc < 0)
		return rc;
	want_save(snap_id, want);
	strbuf_each_line(&extra, member_delete_line, NULL);
	ops_notify(OPS_OBJ_SNAPSHOT, snap_id);
	return 0;
}

int ops_snapshot_warm_get(const char *snap_id, struct ops_warm *out)
{
	*out = (struct ops_warm){0};
	pthread_mutex_lock(&ops.lock);
	struct pool *p = pool_get(snap_id, false);
	if (p) {
		out->want = p->want;
		out->ready = p->ready;
		for (unsigned i = 0; i < p->ready; i++)
			out->bytes += p->bytes[i];
	}
	pthread_mutex_unlock(&ops.lock);
	return 0;
}

void ops_warm_totals(struct ops_warm *out)
{
	*out = (struct ops_warm){0};
	pthread_mutex_lock(&ops.lock);
	for (struct pool *p = pools; p; p = p->next) {
		out->want += p->want;
		out->ready += p->ready;
		for (unsigned i = 0; i < p->ready; i++)
			out->bytes += p->bytes[i];
	}
	pthread_mutex_unlock(&ops.lock);
}

void warm_drain(const char *snap_id)
{
	_cleanup_strbuf_ struct strbuf ids = STRBUF_INIT;
	pthread_mutex_lock(&ops.lock);
	struct pool *p;
	while ((p = pool_get(snap_id, false)) && p->filling)
		pthread_cond_wait(&warm_cond, &ops.lock);
	if (p) {
		p->want = 0;
		pool_trim_locked(p, 0, &ids);
		pool_drop_if_empty(p);
	}
	pthread_mutex_unlock(&ops.lock);
	want_save(snap_id, 0);
	strbuf_each_line(&ids, member_delete_line, NULL);
}

/*
 * Can a member (the snapshot's owner, limits and rules, no GPU) be the fork
 * @sb of @snap? Only its owner's: the member's chain was built, and its
 * processes ran, under that owner's rules (root's fork of a user's snapshot
 * has its rules disarmed instead, ops_net_fork_rules(): it restores cold).
 */
static bool member_fits(const struct snapshot *snap, const struct sandbox *sb,
			const struct sandbox *m)
{
	return !snap->gpu && m->owner_uid == sb->owner_uid && m->owner_gid == sb->owner_gid &&
	       memcmp(&sb->res, &snap->res, sizeof(sb->res)) == 0 && sb->network == m->network &&
	       strcmp(sb->egress, m->egress) == 0;
}

/* The fork @sb made of member @m: its settings, @m's container. */
static void member_become(struct sandbox *sb, const struct sandbox *m)
{
	memcpy(sb->id, m->id, sizeof(sb->id));
	memcpy(sb->runtime_id, m->runtime_id, sizeof(sb->runtime_id));
	memcpy(sb->image_digest, m->image_digest, sizeof(sb->image_digest));
	sb->pid = m->pid;
	sb->state = SB_STARTING;
	sb->created_at = now_ms();
}

int warm_take(const struct snapshot *snap, struct sandbox *sb, struct err *e)
{
	_cleanup_free_ struct sandbox *m = malloc(sizeof(*m));
	_cleanup_free_ struct sandbox *row = malloc(sizeof(*row));
	if (!m || !row)
		return -ENOENT; /* restored as any fork */
	int rc = -ENOENT;
	struct caller owner = {.uid = sb->owner_uid, .gid = sb->owner_gid};
	pthread_mutex_lock(&ops.lock);
	struct pool *p = snapshot_deleting(snap->id) ? NULL : pool_get(snap->id, false);
	while (p && p->ready && rc == -ENOENT) {
		const char *id = p->ids[0];
		if (row_sandbox_get(id, m) < 0 || m->state != SB_WARM) {
			pool_shift_locked(p); /* gone meanwhile: forget it */
			continue;
		}
		/* Died while paused (OOM, runsc): a resume would fail the fork. The thread deletes
		 * it. */
		if (m->pid > 0 && process_ended(m->pid, 0)) {
			warning(
			    "warm sandbox %s of snapshot %s ended while paused: deleted, not taken",
			    id, snap->id);
			strbuf_addf(&doomed, "%s\n", id);
			pool_shift_locked(p);
			pthread_cond_broadcast(&warm_cond);
			continue;
		}
		if (!member_fits(snap, sb, m))
			break;
		rc = quota_owner_locked(&owner, 1, quota_ports_published(sb), e);
		if (rc < 0)
			break;
		*row = *sb;
		member_become(row, m);
		rc = row_sandbox_update_durable(row);
		if (rc < 0) {
			rc = -ENOENT; /* the registry refused: a restore as any fork */
			break;
		}
		*sb = *row;
		pool_shift_locked(p);
		pthread_cond_broadcast(&warm_cond); /* a replacement */
	}
	pthread_mutex_unlock(&ops.lock);
	return rc;
}
