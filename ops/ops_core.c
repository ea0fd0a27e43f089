/*
 * ops_core.c - the operations layer's core: the lock and state helpers,
 * announcements (events, listener, waiters), progress, error reporting,
 * the snapshots in use (shared by fork, resume and delete),
 * paths and ids. Start-up and shutdown are in ops_life.c; the operations
 * themselves in ops_sandbox.c, ops_exec.c, ops_checkpoint.c, ops_restore.c
 * and ops_snapshot.c; see ops_internal.h for the rules they follow.
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "runtime/net/forward.h"
#include "runtime/images.h"
#include "backend/journal/journal.h"

struct ops_context ops = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .gate = PTHREAD_RWLOCK_INITIALIZER,
    .lock_fd = -1,
};

/* --- listener, waiters and announcements ------------------------------- */

static struct {
	void (*fn)(enum ops_object kind, const char *id, void *arg);
	void *arg;
} listener;

struct waiter {
	enum ops_object kind;
	char id[ID_MAX];
	uid_t uid; /* who waits: told only of an object of that id that uid may see */
	ops_done_fn done;
	void *ctx;
	struct waiter *next;
};

static pthread_mutex_t waiters_lock = PTHREAD_MUTEX_INITIALIZER;
static struct waiter *waiters;
static unsigned waiters_n; /* for metrics: a leak shows there */

void ops_set_change_listener(void (*fn)(enum ops_object kind, const char *id, void *arg), void *arg)
{
	listener.fn = fn;
	listener.arg = arg;
}

void ops_notify(enum ops_object kind, const char *id)
{
	if (listener.fn)
		listener.fn(kind, id, listener.arg);
}

void waiters_add(const struct caller *who, enum ops_object kind, const char *id, ops_done_fn done,
		 void *ctx)
{
	struct waiter *w = calloc(1, sizeof(*w));
	if (!w) {
		complete(done, ctx, -ENOMEM, NULL, 0);
		return;
	}
	w->kind = kind;
	snprintf(w->id, sizeof(w->id), "%s", id);
	w->uid = who->uid;
	w->done = done;
	w->ctx = ctx;
	pthread_mutex_lock(&waiters_lock);
	w->next = waiters;
	waiters = w;
	waiters_n++;
	pthread_mutex_unlock(&waiters_lock);
}

/* Unlink from the list whatever @match keeps; returns what it took, newest last. */
static struct waiter *waiters_take_if(bool (*match)(const struct waiter *w, const void *arg),
				      const void *arg)
{
	struct waiter *taken = NULL;
	pthread_mutex_lock(&waiters_lock);
	struct waiter **pp = &waiters;
	while (*pp) {
		struct waiter *w = *pp;
		if (match(w, arg)) {
			*pp = w->next;
			w->next = taken;
			taken = w;
			waiters_n--;
		} else {
			pp = &w->next;
		}
	}
	pthread_mutex_unlock(&waiters_lock);
	return taken;
}

static bool has_ctx(const struct waiter *w, const void *ctx)
{
	return w->ctx == ctx;
}

bool ops_wait_cancel(void *ctx)
{
	struct waiter *w = waiters_take_if(has_ctx, ctx);
	bool found = w != NULL;
	while (w) {
		struct waiter *next = w->next;
		free(w);
		w = next;
	}
	return found;
}

unsigned waiters_count(void)
{
	pthread_mutex_lock(&waiters_lock);
	unsigned n = waiters_n;
	pthread_mutex_unlock(&waiters_lock);
	return n;
}

struct object_ref {
	enum ops_object kind;
	const char *id;
};

static bool is_object(const struct waiter *w, const void *arg)
{
	const struct object_ref *o = arg;
	return w->kind == o->kind && strcmp(w->id, o->id) == 0;
}

/* Detach the waiters of @kind/@id from the list; the caller completes them. */
static struct waiter *waiters_take(enum ops_object kind, const char *id)
{
	return waiters_take_if(is_object, &(struct object_ref){kind, id});
}

/* Complete and free the waiters of @kind/@id with @rc and @line. */
static void waiters_end(enum ops_object kind, const char *id, int rc, const char *line, size_t len)
{
	struct waiter *w = waiters_take(kind, id);
	while (w) {
		struct waiter *next = w->next;
		w->done(w->ctx, rc, line, len);
		free(w);
		w = next;
	}
}

/* The owner of @kind/@id as it is now: 0, or -ENOENT when there is none. */
static int object_owner(enum ops_object kind, const char *id, uid_t *owner)
{
	if (kind == OPS_OBJ_SANDBOX) {
		struct sandbox sb;
		int rc = row_sandbox_get(id, &sb);
		if (rc == 0)
			*owner = sb.owner_uid;
		return rc;
	}
	struct snapshot snap;
	int rc = row_snapshot_get(id, &snap);
	if (rc == 0)
		*owner = snap.owner_uid;
	return rc;
}

/*
 * A waiter registered when @id was another object (one of its own, since
 * removed, or none) must not be told the status of another user's made
 * since under that id: it gets -ENOENT instead.
 */
void waiters_wake(enum ops_object kind, const char *id, const char *status, bool settled)
{
	if (!settled)
		return;
	struct waiter *w = waiters_take(kind, id);
	uid_t owner = 0;
	bool known = w && object_owner(kind, id, &owner) == 0;
	char line[64];
	int n = snprintf(line, sizeof(line), "%s\n", status);
	while (w) {
		struct waiter *next = w->next;
		struct caller c = {.uid = w->uid};
		if (known && access_may_see(&c, owner))
			w->done(w->ctx, 0, line, (size_t)n);
		else
			w->done(w->ctx, -ENOENT, NULL, 0);
		free(w);
		w = next;
	}
}

/* Gone objects end their waiters with ENOENT. */
void waiters_fail(enum ops_object kind, const char *id)
{
	waiters_end(kind, id, -ENOENT, NULL, 0);
}

static const char *object_name(enum ops_object kind)
{
	return kind == OPS_OBJ_SNAPSHOT ? "snapshot" : "sandbox";
}

/* This thread's reason for the events it announces (announce_reason()); NULL: none. */
static _Thread_local const char *event_reason;

void announce_reason(const char *reason)
{
	event_reason = reason;
}

const char *announced_reason(void)
{
	return event_reason;
}

/* Append the event "@kind @id is @status" to the journal and tell the events file. */
static void announce_event(enum ops_object kind, const char *id, const char *status,
			   const char *message)
{
	cJSON *ev = journal_entry();
	if (ev) {
		cJSON_AddStringToObject(ev, "object", object_name(kind));
		cJSON_AddStringToObject(ev, "id", id);
		cJSON_AddStringToObject(ev, "status", status);
		if (message && *message)
			cJSON_AddStringToObject(ev, "message", message);
		if (event_reason)
			cJSON_AddStringToObject(ev, "reason", event_reason);
	}
	journal_append(JOURNAL_EVENTS, ev);
	ops_notify(OPS_OBJ_EVENTS, "");
}

/* The event, then the object's listeners, then its waiters if it @settled. */
static void announce_state(enum ops_object kind, const char *id, const char *status, bool settled,
			   const char *message)
{
	announce_event(kind, id, status, message);
	ops_notify(kind, id);
	waiters_wake(kind, id, status, settled);
}

void announce_sandbox(const char *id, enum sandbox_state state, const char *message)
{
	/* Its published ports stop as soon as it ends (docs/network.md, "Published ports"). */
	if (state == SB_TERMINATING || state == SB_TERMINATED || state == SB_FAILED)
		forward_close_sandbox(id, false);
	announce_state(OPS_OBJ_SANDBOX, id, sandbox_state_name(state),
		       !sandbox_state_transitional(state), message);
}

void announce_snapshot(const char *id, enum snapshot_state state, const char *message)
{
	announce_state(OPS_OBJ_SNAPSHOT, id, snapshot_state_name(state),
		       snapshot_state_settled(state), message);
}

void announce_gone(enum ops_object kind, const char *id, const char *message)
{
	/* The events' words for it: no state has these names. */
	announce_event(kind, id, kind == OPS_OBJ_SNAPSHOT ? "deleted" : "removed", message);
	ops_notify(OPS_OBJ_LIST, id);
	waiters_fail(kind, id);
}

/* --- errors --------------------------------------------------------------- */

static void journal_error(const char *path, const struct err *e)
{
	cJSON *ev = journal_entry();
	if (ev) {
		cJSON_AddStringToObject(ev, "path", path);
		const char *name = strerrorname_np(e->code);
		cJSON_AddStringToObject(ev, "errno", name ? name : "");
		cJSON_AddStringToObject(ev, "error", e->msg);
	}
	journal_append(JOURNAL_ERRORS, ev);
	ops_notify(OPS_OBJ_ERRORS, "");
}

static void sandbox_set_message(const struct caller *who, const char *id, const char *msg)
{
	struct sandbox sb;
	pthread_mutex_lock(&ops.lock);
	if (sandbox_get_as(who, id, &sb) == 0) {
		snprintf(sb.message, sizeof(sb.message), "%s", msg);
		row_sandbox_update(&sb);
	}
	pthread_mutex_unlock(&ops.lock);
	ops_notify(OPS_OBJ_SANDBOX, id);
}

void ops_report_error(const struct caller *who, enum ops_object kind, const char *id,
		      const char *path, const struct err *e)
{
	journal_error(path, e);
	if (kind == OPS_OBJ_SANDBOX && id && *id)
		sandbox_set_message(who, id, e->msg);
}

void report_job_failure(enum ops_object kind, const char *id, const char *what, const struct err *e)
{
	char path[ID_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s/%s",
		 kind == OPS_OBJ_SNAPSHOT ? "snapshots" : "sandboxes", id, what);
	ops_report_error(&access_root, kind, id, path, e);
}

/* --- state helpers -------------------------------------------------------- */

int sandbox_find(const struct caller *who, const char *id, struct sandbox *out, struct err *e)
{
	if (sandbox_get_as(who, id, out) < 0)
		return err_set(e, ENOENT, "sandbox %s does not exist", id);
	return 0;
}

int sandbox_get_as(const struct caller *who, const char *id, struct sandbox *out)
{
	int rc = row_sandbox_get(id, out);
	/* A warm pool's member is nobody's until taken (ops_warm.c). */
	if (rc == 0 && (!access_may_see(who, out->owner_uid) || out->state == SB_WARM))
		rc = -ENOENT;
	return rc;
}

int snapshot_get_as(const struct caller *who, const char *id, struct snapshot *out)
{
	int rc = row_snapshot_get(id, out);
	if (rc == 0 && !access_may_see(who, out->owner_uid))
		rc = -ENOENT;
	return rc;
}

int sandbox_begin(const struct caller *who, const char *id, unsigned allowed, enum sandbox_state to,
		  const char *verb, struct sandbox *out, struct err *e)
{
	int rc = 0;
	pthread_mutex_lock(&ops.lock);
	rc = sandbox_get_as(who, id, out);
	if (rc == -ENOENT) {
		rc = err_set(e, ENOENT, "cannot %s sandbox %s: it does not exist", verb, id);
		goto out;
	}
	if (rc < 0) {
		rc = err_set(e, EIO, "cannot %s sandbox %s: registry read failed", verb, id);
		goto out;
	}
	if (!(allowed & STATE_BIT(out->state))) {
		rc = err_set(e, EBUSY, "cannot %s sandbox %s: it is %s", verb, id,
			     sandbox_state_name(out->state));
		goto out;
	}
	struct sandbox next = *out;
	next.state = to;
	next.message[0] = '\0';
	/* A suspend names its own snapshot once its row exists, never an older one. */
	if (to == SB_SUSPENDING)
		next.restore_snapshot[0] = '\0';
	rc = row_sandbox_update(&next);
	if (rc < 0)
		rc = err_set(e, EIO, "cannot %s sandbox %s: registry write failed", verb, id);
out:
	pthread_mutex_unlock(&ops.lock);
	if (rc == 0)
		announce_sandbox(id, to, NULL);
	return rc;
}

static pthread_once_t kick_once = PTHREAD_ONCE_INIT;
static int kick_fd = -1;

static void kick_make(void)
{
	kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

int monitor_kick_fd(void)
{
	pthread_once(&kick_once, kick_make);
	return kick_fd;
}

static void monitor_kick(void)
{
	uint64_t one = 1;
	int fd = monitor_kick_fd();
	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0)
		return; /* the counter is full: it is readable already */
}

static void patch_sandbox(struct sandbox *sb, const struct sb_patch *p)
{
	sb->state = p->state;
	if (p->message)
		snprintf(sb->message, sizeof(sb->message), "%s", p->message);
	if (p->runtime_id)
		snprintf(sb->runtime_id, sizeof(sb->runtime_id), "%s", p->runtime_id);
	if (p->image_digest)
		snprintf(sb->image_digest, sizeof(sb->image_digest), "%s", p->image_digest);
	if (p->restore_snapshot)
		snprintf(sb->restore_snapshot, sizeof(sb->restore_snapshot), "%s",
			 p->restore_snapshot);
	if (p->pid >= 0)
		sb->pid = p->pid;
	if (p->arm_timeout) /* it runs anew: no exit status yet */
		sb->exit_code[0] = '\0';
	if (p->exit_code)
		snprintf(sb->exit_code, sizeof(sb->exit_code), "%s", p->exit_code);
	if (p->arm_timeout)
		sb->deadline_at = timeout_deadline(sb->timeout_s, now_ms());
}

int sandbox_apply_if(const char *id, unsigned allowed, struct sb_patch patch)
{
	struct sandbox sb;
	pthread_mutex_lock(&ops.lock);
	int rc = row_sandbox_get(id, &sb);
	if (rc == 0 && !(allowed & STATE_BIT(sb.state)))
		rc = -EBUSY;
	if (rc == 0) {
		patch_sandbox(&sb, &patch);
		rc = patch.durable ? row_sandbox_update_durable(&sb) : row_sandbox_update(&sb);
	}
	pthread_mutex_unlock(&ops.lock);
	if (rc == -EBUSY)
		return rc;
	if (rc < 0) {
		/* A state nobody can read never settles: its waiters must not wait for it. */
		if (!sandbox_state_transitional(patch.state))
			waiters_end(OPS_OBJ_SANDBOX, id, rc, NULL, 0);
		return error(-rc, "cannot update sandbox %s: %s", id, strerror(-rc));
	}
	announce_sandbox(id, sb.state, patch.message);
	if (sb.state == SB_RUNNING && patch.pid > 0)
		monitor_kick();
	return 0;
}

int sandbox_apply(const char *id, struct sb_patch patch)
{
	return sandbox_apply_if(id, ~0u, patch);
}

int snapshot_save(const struct snapshot *snap)
{
	pthread_mutex_lock(&ops.lock);
	int rc = row_snapshot_update(snap);
	pthread_mutex_unlock(&ops.lock);
	if (rc < 0 && snapshot_state_settled(snap->state))
		waiters_end(OPS_OBJ_SNAPSHOT, snap->id, rc, NULL, 0);
	if (rc < 0)
		return error(-rc, "cannot update snapshot %s: %s", snap->id, strerror(-rc));
	announce_snapshot(snap->id, snap->state, snap->message);
	return 0;
}

/* --- progress ------------------------------------------------------------- */

struct progress {
	char id[ID_MAX];
	int64_t done, total;
	struct progress *next;
};

static pthread_mutex_t progress_lock = PTHREAD_MUTEX_INITIALIZER;
static struct progress *progress_list;

static struct progress *progress_find(const char *id)
{
	for (struct progress *p = progress_list; p; p = p->next)
		if (!strcmp(p->id, id))
			return p;
	return NULL;
}

void progress_set(const char *snap_id, int64_t done, int64_t total)
{
	pthread_mutex_lock(&progress_lock);
	struct progress *p = progress_find(snap_id);
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (p) {
			snprintf(p->id, sizeof(p->id), "%s", snap_id);
			p->next = progress_list;
			progress_list = p;
		}
	}
	if (p) {
		p->done = done;
		p->total = total;
	}
	pthread_mutex_unlock(&progress_lock);
}

void progress_clear(const char *snap_id)
{
	pthread_mutex_lock(&progress_lock);
	for (struct progress **pp = &progress_list; *pp; pp = &(*pp)->next) {
		if (!strcmp((*pp)->id, snap_id)) {
			struct progress *p = *pp;
			*pp = p->next;
			free(p);
			break;
		}
	}
	pthread_mutex_unlock(&progress_lock);
}

bool progress_get(const char *snap_id, int64_t *done, int64_t *total)
{
	pthread_mutex_lock(&progress_lock);
	struct progress *p = progress_find(snap_id);
	if (p) {
		*done = p->done;
		*total = p->total;
	}
	pthread_mutex_unlock(&progress_lock);
	return p != NULL;
}

/* --- jobs ----------------------------------------------------------------- */

void *op_job_new(size_t size, enum job_kind kind, ops_done_fn done, void *ctx, struct err *e)
{
	struct op_job *job = calloc(1, size);
	if (!job) {
		err_set(e, ENOMEM, "out of memory");
		return NULL;
	}
	job->slot = jobs_reserve(kind, e);
	if (!job->slot) {
		free(job);
		return NULL;
	}
	job->done = done;
	job->ctx = ctx;
	return job;
}

int op_job_drop(void *job, int rc)
{
	struct op_job *j = job;
	jobs_cancel(j->slot);
	free(j);
	return rc;
}

int op_job_queue(void *job, void (*fn)(void *))
{
	struct op_job *j = job;
	jobs_queue(steal_ptr(j->slot), fn, job);
	return 0;
}

void op_job_end(void *job, int rc, const char *result, size_t len)
{
	struct op_job *j = job;
	complete(j->done, j->ctx, rc, result, len);
	free(j);
}

/* --- paths and ids -------------------------------------------------------- */

int sandbox_path(const char *id, const char *leaf, char *out, size_t len)
{
	int rc = leaf ? xsnprintf(out, len, "%s/%s/%s", ops.sandbox_dir, id, leaf)
		      : xsnprintf(out, len, "%s/%s", ops.sandbox_dir, id);
	return rc < 0 ? rc : 0;
}

void sandbox_bury(const char *id, char *tomb, size_t len)
{
	char dir[PATH_MAX], hex[17];
	int rc = sandbox_path(id, NULL, dir, sizeof(dir));
	if (rc == 0)
		rc = random_hex(hex, 16);
	if (rc == 0)
		rc = xsnprintf(tomb, len, "%s/" SANDBOX_TOMB_PREFIX "%s", ops.sandbox_dir, hex);
	if (rc >= 0 && rename(dir, tomb) < 0)
		rc = -errno;
	if (rc < 0)
		tomb[0] = '\0';
	/* A sandbox never started has no directory. */
	if (rc < 0 && rc != -ENOENT)
		warning("cannot set sandbox %s's directory aside: %s", id, strerror(-rc));
}

int ops_spool_path(const char *snap_id, char *out, size_t len)
{
	int rc = xsnprintf(out, len, "%s/%s", ops.spool_dir, snap_id);
	return rc < 0 ? rc : 0;
}

int new_object_id(const char *prefix, char out[ID_MAX])
{
	return random_name(prefix, 16, out, ID_MAX);
}

/* --- accessors ------------------------------------------------------------ */

struct registry *ops_registry(void)
{
	return ops.reg;
}

struct images *ops_images(void)
{
	return ops.images;
}

struct logfile *ops_events_journal(void)
{
	return journal_file(JOURNAL_EVENTS);
}

struct logfile *ops_errors_journal(void)
{
	return journal_file(JOURNAL_ERRORS);
}

/* --- snapshots in use (struct snapshot_use, under ops.lock) ----------------- */

static struct snapshot_use *snapshot_uses;

struct snapshot_use *snapshot_use_get(const char *id, bool create)
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

void snapshot_use_drop_if_idle(const char *id)
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
int snapshot_restore_begin(const char *id, struct err *e)
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

void snapshot_restore_end(const char *id)
{
	pthread_mutex_lock(&ops.lock);
	struct snapshot_use *u = snapshot_use_get(id, false);
	if (u && u->restores)
		u->restores--;
	snapshot_use_drop_if_idle(id);
	pthread_mutex_unlock(&ops.lock);
}
