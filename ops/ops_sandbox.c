/*
 * ops_sandbox.c - operations on one sandbox: create, configure, start,
 * terminate, remove and wait, and the monitor's check for exited ones.
 * Exec is in ops_exec.c; snapshot and suspend in ops_checkpoint.c; resume
 * and fork in ops_restore.c; what start-up makes of each sandbox in
 * ops_reconcile.c.
 */
#include "runtime/net/net.h"
#include "ops/ops_internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/pidfd.h>
#include <unistd.h>

#include "lib/names.h"
#include "lib/spawn.h"
#include "lib/strbuf.h"
#include "runtime/runsc/bundle.h"
#include "runtime/runsc/cgroup.h"
#include "runtime/runsc/console.h"
#include "runtime/net/forward.h"
#include "runtime/images.h"
#include "runtime/spool.h"

OP_JOB_CHECK(struct sandbox_job);

struct sandbox_job *sandbox_job_new(enum job_kind kind, const char *id, ops_done_fn done, void *ctx,
				    struct err *e)
{
	struct sandbox_job *job = op_job_new(sizeof(*job), kind, done, ctx, e);
	if (job)
		snprintf(job->id, sizeof(job->id), "%s", id);
	return job;
}

static int start_reserved(const struct caller *who, struct sandbox_job *job, struct err *e);

/* --- names and creation --------------------------------------------------- */

static int insert_sandbox(const struct caller *who, const char *id, const struct sandbox_spec *spec,
			  struct err *e)
{
	struct sandbox sb = {0};
	snprintf(sb.id, sizeof(sb.id), "%s", id);
	sb.owner_uid = who->uid;
	sb.owner_gid = who->gid;
	int rc = runsc_new_container_id(sb.runtime_id);
	if (rc < 0)
		return err_set(e, -rc, "cannot make a container id: %s", strerror(-rc));
	sb.res = ops.default_res;
	if (spec) {
		memcpy(sb.image, spec->image, sizeof(sb.image));
		memcpy(sb.entrypoint, spec->entrypoint, sizeof(sb.entrypoint));
		memcpy(sb.env, spec->env, sizeof(sb.env));
		sb.gpu = spec->gpu;
		memcpy(sb.ports, spec->ports, sizeof(sb.ports));
		sb.network = spec->network;
		memcpy(sb.egress, spec->egress, sizeof(sb.egress));
		rc = quota_limits(who, &spec->res, "the sandbox spec", e);
		if (rc < 0)
			return rc;
		res_apply(&sb.res, &spec->res);
		rc = cgroup_can_limit(&sb.res, "sandbox", e);
		if (rc < 0)
			return rc;
	}
	lifetime_init_sandbox(&sb, spec);
	sb.state = SB_CREATED;
	sb.created_at = now_ms();
	pthread_mutex_lock(&ops.lock);
	rc = quota_owner_locked(who, 1, quota_ports_published(&sb), e);
	if (rc == 0)
		rc = row_sandbox_insert(&sb);
	pthread_mutex_unlock(&ops.lock);
	if (rc == -EDQUOT)
		return rc;
	if (rc == -EEXIST)
		return err_set(e, EEXIST, "sandbox %s already exists", id);
	if (rc < 0)
		return err_set(e, EIO, "cannot record sandbox %s: %s", id, strerror(-rc));
	if (sb.ports[0])
		ops_ports_reopen(id); /* the spec's ports, on host ports the kernel picks */
	announce_sandbox(id, sb.state, NULL);
	ops_notify(OPS_OBJ_LIST, id);
	return 0;
}

int ops_sandbox_create(const struct caller *who, const char *name, struct err *e)
{
	int rc = access_check_create(who, "create a sandbox", e);
	if (rc < 0)
		return rc;
	if (!sandbox_id_ok(name))
		return err_set(e, EINVAL,
			       "invalid sandbox name '%s': use [a-z0-9][a-z0-9._-]{0,62}, not "
			       "index or new",
			       name);
	return insert_sandbox(who, name, NULL, e);
}

int ops_sandbox_new(const struct caller *who, const struct sandbox_spec *spec, char id_out[ID_MAX],
		    ops_done_fn done, void *ctx, struct err *e)
{
	int rc = access_check_create(who, "create a sandbox", e);
	if (rc < 0)
		return rc;
	if (images_exists(ops.images, spec->image) < 0)
		return err_set(e, ENOENT, "image %s does not exist in %s", spec->image,
			       images_dir(ops.images));
	rc = ops_gpu_start_check(NULL, spec->gpu, e);
	if (rc < 0)
		return rc;
	rc = new_object_id("sbx-", id_out);
	if (rc < 0)
		return err_set(e, -rc, "cannot make a sandbox id: %s", strerror(-rc));
	/* Its place first: a full queue must not leave a sandbox behind. */
	struct sandbox_job *job = sandbox_job_new(JOB_LIFECYCLE, id_out, done, ctx, e);
	if (!job)
		return -e->code;
	rc = insert_sandbox(who, id_out, spec, e);
	if (rc < 0)
		return op_job_drop(job, rc);
	return start_reserved(who, job, e);
}

/* --- settings while created ---------------------------------------------- */

static int set_field(const struct caller *who, struct sandbox *sb, enum sandbox_field field,
		     const char *value, struct err *e)
{
	_cleanup_free_ char *v = strdup(value);
	if (!v)
		return -ENOMEM;
	if (field != SB_FIELD_ENV)
		rstrip(v);
	switch (field) {
	case SB_FIELD_IMAGE:
		if (images_exists(ops.images, v) < 0)
			return err_set(e, ENOENT, "image %s does not exist in %s", v,
				       images_dir(ops.images));
		return xsnprintf(sb->image, sizeof(sb->image), "%s", v) < 0 ? -ENAMETOOLONG : 0;
	case SB_FIELD_ENTRYPOINT:
		if (strlen(v) >= sizeof(sb->entrypoint))
			return -EFBIG;
		if (!text_ok(v, sizeof(sb->entrypoint)))
			return err_set(e, EINVAL,
				       "entrypoint of %s may not hold a control character", sb->id);
		memcpy(sb->entrypoint, v, strlen(v) + 1);
		return 0;
	case SB_FIELD_ENV: {
		struct sandbox_spec spec;
		_cleanup_strbuf_ struct strbuf text = STRBUF_INIT;
		/* Reuse the spec parser's env checks: each line is env=K=V. */
		strbuf_adds(&text, "image=x\n");
		for (char *save = NULL, *line = strtok_r(v, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save))
			strbuf_addf(&text, "env=%s\n", line);
		int rc = strbuf_error(&text);
		if (rc < 0)
			return err_set(e, -rc, "cannot check the env of %s: %s", sb->id,
				       strerror(-rc));
		rc = spec_parse(text.buf, text.len, &spec, e);
		if (rc < 0)
			return rc;
		memcpy(sb->env, spec.env, sizeof(sb->env));
		return 0;
	}
	case SB_FIELD_NETWORK:
		return sandbox_network_parse(v, &sb->network) < 0
			   ? err_set(e, EINVAL, "network must be none or egress, not '%.20s'", v)
			   : 0;
	case SB_FIELD_GPU:
		if (strcmp(v, "0") && strcmp(v, "1"))
			return err_set(e, EINVAL, "gpu must be 0 or 1, not '%s'", v);
		sb->gpu = v[0] == '1';
		return 0;
	case SB_FIELD_MEMORY:
	case SB_FIELD_CPUS:
	case SB_FIELD_PIDS: {
		struct resources r = sb->res;
		enum res_kind kind = RES_MEMORY + (field - SB_FIELD_MEMORY);
		struct resources given = {RES_UNSET, RES_UNSET, RES_UNSET};
		char what[ID_MAX + 16];
		snprintf(what, sizeof(what), "sandbox %s", sb->id);
		int rc = res_parse(kind, v, what, &r, e);
		if (rc == 0) {
			res_set(&given, kind, res_get(&r, kind));
			rc = quota_limits(who, &given, what, e);
		}
		if (rc == 0)
			rc = cgroup_can_limit(&r, "sandbox", e);
		if (rc == 0)
			sb->res = r;
		return rc;
	}
	}
	return -EINVAL;
}

int ops_sandbox_set(const struct caller *who, const char *id, enum sandbox_field field,
		    const char *value, struct err *e)
{
	static const char *const names[] = {"image",  "entrypoint", "env",  "gpu",
					    "memory", "cpus",	    "pids", "network"};
	struct sandbox sb;
	pthread_mutex_lock(&ops.lock);
	int rc = sandbox_find(who, id, &sb, e);
	if (rc == 0 && sb.state != SB_CREATED)
		rc = err_set(e, EBUSY, "cannot change %s of sandbox %s: it is %s, not created",
			     names[field], id, sandbox_state_name(sb.state));
	else if (rc == 0)
		rc = set_field(who, &sb, field, value, e);
	if (rc == -EFBIG || rc == -ENAMETOOLONG)
		rc = err_set(e, EFBIG, "%s of sandbox %s is too long", names[field], id);
	if (rc == 0)
		rc = row_sandbox_update(&sb);
	pthread_mutex_unlock(&ops.lock);
	if (rc == 0)
		ops_notify(OPS_OBJ_SANDBOX, id);
	return rc;
}

/* --- start ---------------------------------------------------------------- */

/* Ask runsc for the sandbox pid; 0 if it cannot say. */
static void start_job(void *arg)
{
	struct sandbox_job *job = arg;
	struct err e = {0};
	char digest[DIGEST_MAX] = "";
	struct sandbox sb;
	pid_t pid = 0;
	int rc = row_sandbox_get(job->id, &sb);
	if (rc == 0)
		rc = container_run(&sb, digest, &pid, &e);
	/* Only while still starting: a terminate may have taken the sandbox over. */
	if (rc < 0) {
		if (!e.code)
			err_set(&e, EIO, "cannot start sandbox %s: %s", job->id, strerror(-rc));
		struct sb_patch p = SB_PATCH(SB_FAILED);
		p.message = e.msg;
		if (sandbox_apply_if(job->id, STATE_BIT(SB_STARTING), p) == 0)
			report_job_failure(OPS_OBJ_SANDBOX, job->id, "start", &e);
	} else {
		struct sb_patch p = SB_PATCH(SB_RUNNING);
		p.image_digest = digest;
		/* From runsc's pid file: an entrypoint that already ended is seen ended. */
		p.pid = pid;
		p.arm_timeout = true;
		if (sandbox_apply_if(job->id, STATE_BIT(SB_STARTING), p) < 0) {
			container_drop(job->id, sb.runtime_id);
			rc =
			    err_set(&e, EIO, "sandbox %s was terminated while it started", job->id);
		}
		lifetime_kick();
	}
	op_job_end(job, rc < 0 ? -e.code : 0, NULL, 0);
}

/* Start @job's sandbox in the place @job holds. */
static int start_reserved(const struct caller *who, struct sandbox_job *job, struct err *e)
{
	const char *id = job->id;
	struct sandbox sb;
	pthread_mutex_lock(&ops.lock);
	bool created = sandbox_get_as(who, id, &sb) == 0 && sb.state == SB_CREATED;
	pthread_mutex_unlock(&ops.lock);
	int rc = 0;
	if (created && !sb.image[0])
		rc = err_set(e, EINVAL,
			     "cannot start sandbox %s: no image set (write one to image)", id);
	else if (created && images_exists(ops.images, sb.image) < 0)
		rc = err_set(e, ENOENT, "cannot start sandbox %s: image %s does not exist", id,
			     sb.image);
	else if (created)
		rc = ops_gpu_start_check(id, sb.gpu, e);
	if (rc == 0)
		rc = sandbox_begin(who, id, STATE_BIT(SB_CREATED), SB_STARTING, "start", &sb, e);
	if (rc < 0)
		return op_job_drop(job, rc);
	return op_job_queue(job, start_job);
}

int ops_sandbox_start(const struct caller *who, const char *id, ops_done_fn done, void *ctx,
		      struct err *e)
{
	struct sandbox_job *job = sandbox_job_new(JOB_LIFECYCLE, id, done, ctx, e);
	return job ? start_reserved(who, job, e) : -e->code;
}

/* --- terminate and remove ------------------------------------------------ */

static void terminate_job(void *arg)
{
	struct sandbox_job *job = arg;
	struct sandbox sb;
	struct err e = {0};
	int rc = row_sandbox_get(job->id, &sb);
	bool sb_found = rc == 0;
	if (rc == 0)
		rc = container_stop(sb.runtime_id, &e);
	console_detach(job->id);
	struct sb_patch p = SB_PATCH(SB_TERMINATED);
	p.pid = 0;
	p.restore_snapshot = "";
	if (rc < 0) {
		if (!e.code)
			err_set(&e, -rc, "cannot terminate sandbox %s: %s", job->id, strerror(-rc));
		p.state = SB_FAILED;
		p.message = e.msg;
		report_job_failure(OPS_OBJ_SANDBOX, job->id, "terminate", &e);
	}
	/* A second terminate of a terminating sandbox may have settled it first: both end. */
	sandbox_apply_if(job->id, STATE_BIT(SB_TERMINATING), p);
	bool held = sb_found && sb.restore_snapshot[0];
	op_job_end_unhold(job, rc < 0 ? -e.code : 0, held ? job->id : NULL, sb.restore_snapshot);
}

/*
 * Every state may be terminated, transitional ones too: the runsc calls in
 * flight on the container are killed at once (their jobs fail with
 * -ECANCELED, and no later run, restore, checkpoint or exec starts on it),
 * and a job that finds its sandbox no longer in its transitional state
 * leaves it alone (ops_internal.h).
 */
int ops_sandbox_terminate(const struct caller *who, const char *id, ops_done_fn done, void *ctx,
			  struct err *e)
{
	struct sandbox sb;
	struct sandbox_job *job = sandbox_job_new(JOB_LIFECYCLE, id, done, ctx, e);
	if (!job)
		return -e->code;
	int rc = sandbox_begin(who, id, ~0u, SB_TERMINATING, "terminate", &sb, e);
	if (rc < 0)
		return op_job_drop(job, rc);
	/* A terminate already under way is left to finish: its kill and delete are this one's. */
	if (sb.state != SB_TERMINATING && sb.runtime_id[0])
		runsc_cancel(&ops.runsc, sb.runtime_id);
	return op_job_queue(job, terminate_job);
}

/* May @sb be removed? Only once nothing runs it: created, terminated or failed; else EBUSY. */
static int remove_check(const struct sandbox *sb, struct err *e)
{
	const unsigned removable =
	    STATE_BIT(SB_CREATED) | STATE_BIT(SB_TERMINATED) | STATE_BIT(SB_FAILED);
	if (removable & STATE_BIT(sb->state))
		return 0;
	return err_set(e, EBUSY, "cannot remove sandbox %s: it is %s (terminate it first)", sb->id,
		       sandbox_state_name(sb->state));
}

int ops_sandbox_may_remove(const struct caller *who, const char *id, struct err *e)
{
	struct sandbox sb;
	pthread_mutex_lock(&ops.lock);
	int rc = sandbox_find(who, id, &sb, e);
	if (rc == 0)
		rc = remove_check(&sb, e);
	pthread_mutex_unlock(&ops.lock);
	return rc;
}

int ops_sandbox_remove(const struct caller *who, const char *id, struct err *e)
{
	struct sandbox sb;
	char tomb[PATH_MAX] = "";
	pthread_mutex_lock(&ops.lock);
	int rc = sandbox_find(who, id, &sb, e);
	if (rc == 0)
		rc = remove_check(&sb, e);
	if (rc == 0)
		rc = row_sandbox_delete(id);
	/*
	 * Its console and directory go under the lock: once it is unlocked a new
	 * sandbox may take the name, and its bundle and console must not be the
	 * ones removed. The directory is renamed away and emptied outside.
	 */
	if (rc == 0) {
		char dir[PATH_MAX];
		console_detach(id);
		if (sandbox_path(id, NULL, dir, sizeof(dir)) == 0)
			console_log_retire(
			    dir); /* its readers keep theirs; a new one of the name won't */
		forward_close_sandbox(id, true); /* a created one's ports, and its counters */
		sandbox_bury(id, tomb, sizeof(tomb));
	}
	pthread_mutex_unlock(&ops.lock);
	if (rc < 0)
		return rc;
	ops_agent_forget(id);
	ops_exec_forget(id);
	/* A failed sandbox may still have a stopped container (runtime ids are never reused). */
	runsc_delete(&ops.runsc, sb.runtime_id, NULL);
	if (tomb[0])
		rm_rf(tomb);
	announce_gone(OPS_OBJ_SANDBOX, id, NULL);
	return 0;
}

/* --- wait ------------------------------------------------------------------ */

int ops_sandbox_wait(const struct caller *who, const char *id, ops_done_fn done, void *ctx,
		     struct err *e)
{
	struct sandbox sb;
	/*
	 * Another's sandbox is refused before waiting: waiters_fail() would
	 * end its owner's waiters too. One made under this id meanwhile is
	 * never reported to us: waiters_wake() checks who may see it.
	 */
	if (row_sandbox_get(id, &sb) == 0 &&
	    (sb.state == SB_WARM || !access_may_see(who, sb.owner_uid))) /* no one's until taken */
		return err_set(e, ENOENT, "sandbox %s does not exist", id);
	/* Register first, then look: a change in between still wakes us. */
	waiters_add(who, OPS_OBJ_SANDBOX, id, done, ctx);
	int rc = row_sandbox_get(id, &sb);
	if (rc < 0) {
		waiters_fail(OPS_OBJ_SANDBOX, id);
		return 0;
	}
	waiters_wake(OPS_OBJ_SANDBOX, id, sandbox_state_name(sb.state),
		     !sandbox_state_transitional(sb.state));
	return 0;
}

/* --- the monitor: sandboxes whose process ended on its own ---------------- */

/*
 * Has process @pid ended, waiting up to @wait_ms for it? A zombie has: the
 * sandbox's process is runsc's child, reparented to PID 1 once runsc
 * returned, and it stays a zombie until PID 1 reaps it (measured: 1.3 s
 * under a slow init), while kill(pid, 0) still succeeds. A pidfd is
 * readable from the exit on.
 */
bool process_ended(pid_t pid, int wait_ms)
{
	_cleanup_close_ int fd = pidfd_open(pid, 0);
	/*
	 * No pidfd for another reason (EMFILE, ENFILE, ENOMEM): unknown, so
	 * ask kill(): it misses a zombie, but sees the end once it is reaped.
	 */
	if (fd < 0)
		return errno == ESRCH || (kill(pid, 0) < 0 && errno == ESRCH);
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int n;
	while ((n = poll(&p, 1, wait_ms)) < 0 && errno == EINTR)
		;
	return n > 0;
}

/*
 * The statuses exits_collect() reaped, newest last, in a ring: a sandbox's
 * is taken within a monitor period of its reaping, and a ring of
 * EXITS_MAX outlasts the four or so processes each sandbox's end brings
 * (E7: runsc-sandbox with the entrypoint's status, runsc-gofer, and the
 * sandbox's helpers, killed).
 */
#define EXITS_MAX 256
static struct exit_seen {
	pid_t pid; /* 0: a free slot */
	int code;
} exits[EXITS_MAX];
static size_t exits_next;
static pthread_mutex_t exits_lock = PTHREAD_MUTEX_INITIALIZER;

static void exit_note(pid_t pid, int code, void *arg)
{
	(void)arg;
	pthread_mutex_lock(&exits_lock);
	exits[exits_next] = (struct exit_seen){pid, code};
	exits_next = (exits_next + 1) % EXITS_MAX;
	pthread_mutex_unlock(&exits_lock);
}

void exits_collect(void)
{
	spawn_reap_adopted(exit_note, NULL);
}

/* The newest status noted for @pid, taken out; false if none. */
static bool exit_take(pid_t pid, int *code)
{
	bool found = false;
	pthread_mutex_lock(&exits_lock);
	for (size_t i = 1; i <= EXITS_MAX && !found; i++) {
		struct exit_seen *x = &exits[(exits_next + EXITS_MAX - i) % EXITS_MAX];
		if (x->pid == pid) {
			*code = x->code;
			x->pid = 0;
			found = true;
		}
	}
	pthread_mutex_unlock(&exits_lock);
	return found;
}

static int collect_exited(const struct sandbox *sb, void *arg)
{
	struct strbuf *ids = arg;
	if (sb->state == SB_RUNNING && sb->pid > 0 && process_ended(sb->pid, 0))
		strbuf_addf(ids, "%s\n", sb->id);
	return strbuf_error(ids);
}

/* A running sandbox whose process is gone: its entrypoint exited or it was killed. */
static void mark_exited(const char *id, void *arg)
{
	(void)arg;
	struct sandbox sb;
	pid_t pid = 0;
	pthread_mutex_lock(&ops.lock);
	int rc = row_sandbox_get(id, &sb);
	pthread_mutex_unlock(&ops.lock);
	if (rc < 0 || sb.state != SB_RUNNING)
		return;
	struct sb_patch p = SB_PATCH(SB_TERMINATED);
	struct cgroup_usage u, base;
	char why[MESSAGE_MAX];
	p.pid = 0;
	p.message = SANDBOX_EXITED_MSG;
	/* Before container_drop(): runsc delete removes the cgroup that counted it. */
	limit_seen_get(sb.runtime_id, &base);
	bool hit = cgroup_usage(ops.cgroup_parent, sb.runtime_id, &u) == 0 &&
		   cgroup_limit_hit(&u, &base, &sb.res, why, sizeof(why));
	if (hit)
		p.message = why;
	/*
	 * runsc is asked whether the container runs on under another pid (a
	 * row behind its container), unless its cgroup says the host killed
	 * it since the last look (a counter past the one noted then): `runsc
	 * state` took 1 to 1.3 s on a loaded host, most of the time between an
	 * OOM kill and `terminated` (docs/runsc-notes.md).
	 */
	if (!hit && runsc_state(&ops.runsc, sb.runtime_id, &pid, NULL) == RUNSC_RUNNING &&
	    pid != sb.pid)
		return;
	/*
	 * The sandbox process exits with its entrypoint's status (128+N for
	 * signal N): reaped here if the daemon adopted it (lib/spawn.h). One
	 * that ended while no daemon ran (init reaped it) leaves none.
	 */
	char code_text[SB_EXIT_CODE_MAX], exited[MESSAGE_MAX];
	int code;
	exits_collect();
	if (exit_take(sb.pid, &code)) {
		snprintf(code_text, sizeof(code_text), "%d", code);
		p.exit_code = code_text;
		if (!hit) {
			snprintf(exited, sizeof(exited), SANDBOX_EXITED_MSG " with status %d",
				 code);
			p.message = exited;
		}
	}
	/* Only if nothing else moved it meanwhile: a job owns transitional states. */
	if (sandbox_apply_if(id, STATE_BIT(SB_RUNNING), p) == 0)
		container_drop(id, sb.runtime_id);
}

/* What monitor_watch() fills: pidfds of running sandboxes' processes, at most @max. */
struct watch {
	struct pollfd *p;
	size_t n, max;
};

static int watch_one(const struct sandbox *sb, void *arg)
{
	struct watch *w = arg;
	if (sb->state != SB_RUNNING || sb->pid <= 0 || w->n >= w->max)
		return 0;
	int fd = pidfd_open(sb->pid, 0);
	if (fd < 0) /* the periodic look sees its end (process_ended() falls back to kill()) */
		return 0;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	/* Ended already: the check after this sees it, and a poll on it would never sleep. */
	if (poll(&p, 1, 0) != 0) {
		close(fd);
		return 0;
	}
	w->p[w->n++] = p;
	return 0;
}

size_t monitor_watch(struct pollfd *p, size_t max)
{
	struct watch w = {.p = p, .max = max};
	row_sandbox_each(watch_one, &w);
	return w.n;
}

/*
 * After an exec in sandbox @id (born @created_at) failed: did the sandbox
 * end under it? Its cgroup counts an OOM kill (or a pids backstop hit)
 * before the host has ended its process, so then wait for that end, up to
 * ENDED_WAIT_MS; else look once. A sandbox whose process ended is marked
 * terminated at once, as the monitor would a moment later, and @why gets
 * its `error`, the sentence of its end.
 */
#define ENDED_WAIT_MS 5000
bool sandbox_ended_under(const char *id, int64_t created_at, char *why, size_t size)
{
	struct sandbox sb;
	struct cgroup_usage u, base;
	char limit[MESSAGE_MAX];
	pthread_mutex_lock(&ops.lock);
	int rc = row_sandbox_get(id, &sb);
	pthread_mutex_unlock(&ops.lock);
	if (rc < 0 || sb.created_at != created_at)
		return false;
	if (sb.state == SB_RUNNING && sb.pid > 0) {
		limit_seen_get(sb.runtime_id, &base);
		bool read = cgroup_usage(ops.cgroup_parent, sb.runtime_id, &u) == 0;
		bool hit = read && cgroup_limit_hit(&u, &base, &sb.res, limit, sizeof(limit));
		if (process_ended(sb.pid, hit ? ENDED_WAIT_MS : 0))
			mark_exited(id, NULL);
		else if (read) /* it survived what these count: the next look starts here */
			limit_seen_note(sb.runtime_id, &u);
	}
	pthread_mutex_lock(&ops.lock);
	rc = row_sandbox_get(id, &sb);
	pthread_mutex_unlock(&ops.lock);
	/* A terminate leaves no sentence: that exec ends as terminated (-ECANCELED), not here. */
	if (rc < 0 || sb.created_at != created_at || sb.state != SB_TERMINATED || !sb.message[0])
		return false;
	snprintf(why, size, "%s", sb.message);
	return true;
}

void monitor_sandboxes(void)
{
	_cleanup_strbuf_ struct strbuf ids = STRBUF_INIT;
	row_sandbox_each(collect_exited, &ids);
	strbuf_each_line(&ids, mark_exited, NULL);
}
