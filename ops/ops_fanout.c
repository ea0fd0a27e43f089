/*
 * ops_fanout.c - one fork write, N sandboxes: `count=N` on a snapshot's
 * `fork` file (docs/design.md, the fork control file).
 *
 * The N forks are N ordinary forks (ops_restore.c) that share what one
 * write decides once: the snapshot's checks and the sandbox every fork of
 * it gets (fork_prepare()), and all N places in the lifecycle queue, taken
 * before any sandbox is made, so a full queue refuses the write whole and
 * leaves nothing behind. Their restores are N jobs on the lifecycle queue,
 * which runs JOBS_LIFECYCLE_WORKERS of them at once (ops/jobs.h); they
 * read one image, the snapshot's in the cache (runtime/cache.c), which is
 * materialized once. The write is answered when the last fork is running
 * or failed: with 0, or the errno of the first failure, while the others
 * run on; the failures are summed up in one line of `errors`.
 *
 * Ownership: a struct fanout is freed by the last of its shares: one per
 * fork queued, and the caller's own, ended once every fork is queued, so
 * that a fork completing at once cannot end the fan-out before the rest are
 * queued. Its counters are under its own lock, never held with ops.lock.
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct fanout;

/* One fork's completion context: its fan-out and the sandbox it made. */
struct fanout_one {
	struct fanout *fan;
	char id[ID_MAX];
};

struct fanout {
	pthread_mutex_t lock;
	unsigned count;	 /* forks asked for */
	unsigned shares; /* forks not yet completed, and the caller's share */
	unsigned failed;
	int first_rc; /* the first failure's errno, negative */
	char first_msg[MESSAGE_MAX];
	char snap_id[ID_MAX];
	ops_done_fn done;
	void *ctx;
	struct fanout_one one[]; /* count of them */
};

int ops_fork_count_parse(const char *text, unsigned *count, struct err *e)
{
	char *end = NULL;
	errno = 0;
	long v = strtol(text, &end, 10);
	bool digits = text[0] >= '0' && text[0] <= '9' && end && *end == '\0' && errno == 0;
	if (!digits || v < 1 || v > FORK_COUNT_MAX)
		return err_set(e, EINVAL, "count must be a whole number from 1 to %d, not '%.32s'",
			       FORK_COUNT_MAX, text);
	*count = (unsigned)v;
	return 0;
}

/* The reason sandbox @id failed, as its row says, into @out. */
static void failure_reason(const char *id, int rc, char out[MESSAGE_MAX])
{
	struct sandbox *sb = malloc(sizeof(*sb));
	if (sb && row_sandbox_get(id, sb) == 0 && sb->message[0])
		snprintf(out, MESSAGE_MAX, "%s: %.900s", id, sb->message);
	else
		snprintf(out, MESSAGE_MAX, "%s: %s", id, strerror(-rc));
	free(sb);
}

/* Count @n failures with @rc (the first one's reason @why, NULL: read from fork @id's row). */
static void fanout_failed(struct fanout *fan, unsigned n, int rc, const char *id, const char *why)
{
	char msg[MESSAGE_MAX];
	if (why)
		snprintf(msg, sizeof(msg), "%s", why);
	else
		failure_reason(id, rc, msg);
	pthread_mutex_lock(&fan->lock);
	fan->failed += n;
	if (fan->first_rc == 0) {
		fan->first_rc = rc;
		memcpy(fan->first_msg, msg, sizeof(msg));
	}
	pthread_mutex_unlock(&fan->lock);
}

/* End one share of @fan; the last one answers the write and frees it. */
static void fanout_put(struct fanout *fan)
{
	pthread_mutex_lock(&fan->lock);
	bool last = --fan->shares == 0;
	pthread_mutex_unlock(&fan->lock);
	if (!last)
		return;
	if (fan->failed) {
		struct err e = {0};
		char path[ID_MAX + 32];
		snprintf(path, sizeof(path), "snapshots/%s/fork", fan->snap_id);
		err_set(&e, -fan->first_rc, "%u of %u forks of snapshot %s failed: %s", fan->failed,
			fan->count, fan->snap_id, fan->first_msg);
		ops_report_error(&access_root, OPS_OBJ_SNAPSHOT, fan->snap_id, path, &e);
	}
	complete(fan->done, fan->ctx, fan->first_rc, NULL, 0);
	pthread_mutex_destroy(&fan->lock);
	free(fan);
}

/* A fork's completion: running (0) or failed. */
static void fanout_one_done(void *ctx, int rc, const char *result, size_t len)
{
	(void)result, (void)len;
	struct fanout_one *one = ctx;
	struct fanout *fan = one->fan;
	if (rc < 0)
		fanout_failed(fan, 1, rc, one->id, NULL);
	fanout_put(fan);
}

static struct fanout *fanout_new(const char *snap_id, unsigned count, ops_done_fn done, void *ctx)
{
	struct fanout *fan = calloc(1, sizeof(*fan) + count * sizeof(fan->one[0]));
	if (!fan)
		return NULL;
	pthread_mutex_init(&fan->lock, NULL);
	fan->count = count;
	fan->shares = count + 1;
	snprintf(fan->snap_id, sizeof(fan->snap_id), "%s", snap_id);
	fan->done = done;
	fan->ctx = ctx;
	for (unsigned i = 0; i < count; i++)
		fan->one[i].fan = fan;
	return fan;
}

/* Every fork's place, or none: -EAGAIN (with the queue's reason) when the queue has too few. */
static int take_places(struct fanout *fan, void *jobs[], struct err *e)
{
	for (unsigned i = 0; i < fan->count; i++) {
		jobs[i] = fork_job_new(fanout_one_done, &fan->one[i], e);
		if (jobs[i])
			continue;
		while (i-- > 0)
			op_job_drop(jobs[i], 0);
		return -e->code;
	}
	return 0;
}

/*
 * Queue every fork, counting in @made those queued: 0, or the first
 * refusal's errno: then the jobs left are dropped.
 */
static int submit_all(struct fanout *fan, void *jobs[], const struct snapshot *snap,
		      struct sandbox *sb, struct strbuf *ids, unsigned *made, struct err *e)
{
	for (*made = 0; *made < fan->count; (*made)++) {
		unsigned i = *made;
		int rc = fork_submit(jobs[i], snap, sb, fan->one[i].id, e);
		if (rc < 0) {
			for (unsigned j = i + 1; j < fan->count; j++)
				op_job_drop(jobs[j], 0);
			return rc;
		}
		strbuf_addf(ids, "%s\n", fan->one[i].id);
	}
	return 0;
}

/* @count forks that share one snapshot and one sandbox's settings. */
static int fork_many(const struct caller *who, const char *snap_id, const struct fork_opts *opts,
		     unsigned count, struct strbuf *ids, ops_done_fn done, void *ctx, struct err *e)
{
	void *jobs[FORK_COUNT_MAX];
	_cleanup_free_ struct snapshot *snap = malloc(sizeof(*snap));
	_cleanup_free_ struct sandbox *sb = malloc(sizeof(*sb));
	struct fanout *fan = snap && sb ? fanout_new(snap_id, count, done, ctx) : NULL;
	if (!fan)
		return err_set(e, ENOMEM, "out of memory");
	int rc = take_places(fan, jobs, e);
	if (rc == 0) {
		rc = fork_prepare(who, snap_id, opts, snap, sb, e);
		/* All N within the caps, or none made (each fork_submit() counts again). */
		if (rc == 0) {
			pthread_mutex_lock(&ops.lock);
			rc = quota_owner_locked(who, count, count * quota_ports_published(sb), e);
			pthread_mutex_unlock(&ops.lock);
		}
		if (rc < 0)
			for (unsigned i = 0; i < count; i++)
				op_job_drop(jobs[i], 0);
	}
	unsigned made = 0;
	if (rc == 0)
		rc = submit_all(fan, jobs, snap, sb, ids, &made, e);
	if (rc < 0 && made == 0) {
		/* Nothing was made: a refusal, answered by the caller, never completed. */
		pthread_mutex_destroy(&fan->lock);
		free(fan);
		return rc;
	}
	/* Some run already: a held write's answer is theirs, with this failure in it. */
	if (rc < 0) {
		pthread_mutex_lock(&fan->lock);
		fan->shares -= count - made;
		pthread_mutex_unlock(&fan->lock);
		fanout_failed(fan, count - made, rc, NULL, e->msg);
	}
	fanout_put(fan);
	/* An async write (nothing waits: no @done) is answered now: with the refusal. */
	return done ? 0 : rc;
}

int ops_snapshot_forks(const struct caller *who, const char *snap_id, const struct fork_opts *opts,
		       struct strbuf *ids, ops_done_fn done, void *ctx, struct err *e)
{
	unsigned count = opts && opts->count ? opts->count : 1;
	if (count > FORK_COUNT_MAX)
		return err_set(e, EINVAL, "count must be a whole number from 1 to %d",
			       FORK_COUNT_MAX);
	if (count > 1)
		return fork_many(who, snap_id, opts, count, ids, done, ctx, e);
	char id[ID_MAX];
	int rc = ops_snapshot_fork(who, snap_id, opts, id, done, ctx, e);
	if (rc == 0)
		strbuf_addf(ids, "%s\n", id);
	return rc;
}
