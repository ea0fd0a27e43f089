/*
 * ops_exec_run.c - one exec's output, for its writer and for readers that
 * follow it (ops_sandbox_exec_follow()).
 *
 * An exec run by the agent streams its output: its writer reads it as it
 * comes, and so does a fresh `cat exec` of the same user on the sandbox,
 * which follows the newest exec that user started there (docs/design.md).
 * A struct exec_run is one exec's output so far and who follows it; the
 * newest of each (sandbox, uid) stays after it ended, for a later `cat`,
 * until a newer one replaces it or the sandbox is removed
 * (ops_exec_forget()). All of it under runs_lock, a leaf but for the
 * followers' callbacks (fs/ takes its file's lock in them, and never calls
 * ops with it held).
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct follower {
	ops_progress_fn progress;
	ops_done_fn done;
	void *ctx;
	struct follower *next;
};

struct exec_run {
	char sandbox_id[ID_MAX];
	uid_t uid;
	int refs; /* the job's, and the newest list's */
	struct strbuf out;
	bool ended;
	int rc;
	char *result; /* once ended: the whole answer (or the error's sentence) */
	size_t len;
	struct follower *followers;
	struct exec_run *next; /* in `newest` */
};

static pthread_mutex_t runs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct exec_run *newest;

static void unref_locked(struct exec_run *r)
{
	if (--r->refs > 0)
		return;
	strbuf_release(&r->out);
	free(r->result);
	while (r->followers) {
		struct follower *f = r->followers;
		r->followers = f->next;
		free(f);
	}
	free(r);
}

/* Make @r the newest of its (sandbox, uid): the one it replaces goes. */
static void publish_locked(struct exec_run *r)
{
	for (struct exec_run **pp = &newest; *pp; pp = &(*pp)->next) {
		struct exec_run *old = *pp;
		if (old->uid == r->uid && strcmp(old->sandbox_id, r->sandbox_id) == 0) {
			*pp = old->next;
			unref_locked(old);
			break;
		}
	}
	r->refs++;
	r->next = newest;
	newest = r;
}

void ops_exec_forget(const char *id)
{
	pthread_mutex_lock(&runs_lock);
	for (struct exec_run **pp = &newest; *pp;) {
		struct exec_run *r = *pp;
		if (strcmp(r->sandbox_id, id) == 0) {
			*pp = r->next;
			unref_locked(r);
		} else {
			pp = &r->next;
		}
	}
	pthread_mutex_unlock(&runs_lock);
}

static int follower_add_locked(struct exec_run *r, ops_progress_fn progress, ops_done_fn done,
			       void *ctx)
{
	struct follower *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	*f = (struct follower){progress, done, ctx, r->followers};
	r->followers = f;
	return 0;
}

/* The agent's output as it comes: to every follower, under the gate (they are fs/'s). */
void exec_run_progress(void *arg, const char *data, size_t len)
{
	struct exec_run *r = arg;
	pthread_rwlock_rdlock(&ops.gate);
	pthread_mutex_lock(&runs_lock);
	strbuf_add(&r->out, data, len);
	for (struct follower *f = r->followers; ops.running && f; f = f->next)
		if (f->progress)
			f->progress(f->ctx, data, len);
	pthread_mutex_unlock(&runs_lock);
	pthread_rwlock_unlock(&ops.gate);
}

/* Its end: the result kept for later followers, and each follower's done. */
void exec_run_end(struct exec_run *r, int rc, const char *result, size_t len)
{
	pthread_mutex_lock(&runs_lock);
	r->ended = true;
	r->rc = rc;
	r->result = malloc(len + 1);
	if (r->result) {
		memcpy(r->result, result, len);
		r->result[len] = '\0';
	}
	r->len = r->result ? len : 0;
	struct follower *list = steal_ptr(r->followers);
	pthread_mutex_unlock(&runs_lock);
	while (list) {
		struct follower *f = list;
		list = f->next;
		complete(f->done, f->ctx, rc, result, len);
		free(f);
	}
}

/* A new exec_run of @who on @id, its writer following it, published as the newest. */
struct exec_run *exec_run_new(const struct caller *who, const char *id, ops_progress_fn progress,
			      ops_done_fn done, void *ctx)
{
	struct exec_run *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", id);
	r->uid = who->uid;
	r->refs = 1;
	r->out = (struct strbuf)STRBUF_INIT;
	pthread_mutex_lock(&runs_lock);
	if (follower_add_locked(r, progress, done, ctx) < 0) {
		pthread_mutex_unlock(&runs_lock);
		free(r);
		return NULL;
	}
	publish_locked(r);
	pthread_mutex_unlock(&runs_lock);
	return r;
}

int ops_sandbox_exec_follow(const struct caller *who, const char *id, ops_progress_fn progress,
			    ops_done_fn done, void *ctx, struct err *e)
{
	struct sandbox sb;
	int rc = sandbox_find(who, id, &sb, e);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&runs_lock);
	struct exec_run *r = newest;
	while (r && !(r->uid == who->uid && strcmp(r->sandbox_id, id) == 0))
		r = r->next;
	if (!r) {
		pthread_mutex_unlock(&runs_lock);
		return err_set(e, ENOENT, "no exec of yours on sandbox %s to read", id);
	}
	if (!r->ended) {
		/* What it printed so far first, under the lock: nothing comes in between. */
		if (r->out.len && progress)
			progress(ctx, r->out.buf, r->out.len);
		rc = follower_add_locked(r, progress, done, ctx);
		pthread_mutex_unlock(&runs_lock);
		return rc < 0 ? err_set(e, ENOMEM, "exec: out of memory") : 0;
	}
	_cleanup_free_ char *result = r->result ? strdup(r->result) : NULL;
	size_t len = r->len;
	int end_rc = r->rc;
	pthread_mutex_unlock(&runs_lock);
	if (r && !result && len)
		return err_set(e, ENOMEM, "exec: out of memory");
	complete(done, ctx, end_rc, result ? result : "", result ? len : 0);
	return 0;
}

void exec_run_unref(struct exec_run *r)
{
	pthread_mutex_lock(&runs_lock);
	unref_locked(r);
	pthread_mutex_unlock(&runs_lock);
}
