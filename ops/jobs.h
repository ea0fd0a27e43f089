/*
 * jobs.h - background job queues, one per kind of work, after Redis's bio.c.
 *
 * Long work never runs on a FUSE worker thread. The operations layer
 * submits a job (a function and its argument) to the queue of its kind, and
 * a fixed set of worker threads per kind runs them in order of submission:
 *
 *   JOB_LIFECYCLE   start, fork, resume, terminate, delete: mostly waiting
 *                   on runsc, so several run at once
 *   JOB_CHECKPOINT  the `runsc checkpoint` of a snapshot or suspend: the
 *                   only part that pauses a sandbox; never queued behind
 *                   storing
 *   JOB_STORE       hashing, compressing and storing a checkpoint: CPU
 *                   bound, one worker per core
 *   JOB_EXEC        commands run with `exec`: may last as long as the user
 *                   wants, so they get many workers of their own
 *
 * Separate queues mean a slow upload never delays a pause-critical
 * checkpoint, and a long `exec` never delays a snapshot.
 *
 * Bounds, all here (docs/control-files.md, "Bounds"): each kind runs at
 * most JOBS_*_WORKERS jobs at once and lets at most JOBS_*_QUEUE more wait.
 * A request takes its places first (jobs_reserve(), before it changes any
 * state), so a full queue refuses it with EAGAIN and there is nothing to
 * undo. A snapshot takes its place in the store queue with its checkpoint's,
 * so a checkpoint taken is always stored.
 *
 * Ownership: a queued job's argument belongs to the job function, which
 * frees it. A reserved place is used once, by jobs_queue(), or given back
 * with jobs_cancel(). jobs_stop() lets queued and reserved jobs of every
 * kind but JOB_EXEC run, then joins those workers. Queued exec jobs are
 * dropped (their arguments leak: the process is ending) and running ones are
 * left to end with the process, since a user's command may run for ever.
 */
#ifndef SNAPFS_JOBS_H
#define SNAPFS_JOBS_H

#include "lib/util.h"

enum job_kind {
	JOB_LIFECYCLE,
	JOB_CHECKPOINT,
	JOB_STORE,
	JOB_EXEC,
	JOB_KINDS,
};

/*
 * The numbers (docs/control-files.md, "Bounds"). No benchmark chose them
 * (commit 997d99d set them with the bounds); each states its trade-off.
 */
/* A lifecycle job mostly waits on runsc, so 8 overlap those waits; more would boot more sandboxes
 * (each a runsc run or restore, memory-heavy) on the host at once. */
#define JOBS_LIFECYCLE_WORKERS 8
/* Room for two whole fork fan-outs (FORK_COUNT_MAX 100 each) and a script's burst; a place is
 * a few bytes until it runs. */
#define JOBS_LIFECYCLE_QUEUE 256
/* Each checkpoint pauses its sandbox while it writes its memory to the spool: more at once
 * share the disk and lengthen every pause, fewer make a pause wait behind another's. */
#define JOBS_CHECKPOINT_WORKERS 4
/* Each waiting one holds spool room (ops_checkpoint.c) and a store place: this bounds both. */
#define JOBS_CHECKPOINT_QUEUE 64
#define JOBS_STORE_WORKERS_MAX 8 /* one per core, up to this: hashing and compressing is CPU */
/* As the checkpoint queue: a snapshot takes its store place with its checkpoint's. */
#define JOBS_STORE_QUEUE 64
/* A command runs as long as its user wants, so many run at once; 32 bounds the threads and
 * `runsc exec` processes one daemon holds. */
#define JOBS_EXEC_WORKERS 32 /* commands running at once, per daemon */
/* Short commands from a script arrive in bursts: they wait rather than fail with EAGAIN. */
#define JOBS_EXEC_QUEUE 256

typedef void (*job_fn)(void *arg);
struct job;

int jobs_start(void);
void jobs_stop(void);

/* A place in @kind's queue; NULL with -EAGAIN (full), -ESHUTDOWN or -ENOMEM in @e. */
struct job *jobs_reserve(enum job_kind kind, struct err *e);
/* Run @fn(@arg) in the place @j (NULL: nothing). */
void jobs_queue(struct job *j, job_fn fn, void *arg);
/* Give the place @j back unused (NULL: nothing). */
void jobs_cancel(struct job *j);
/* jobs_reserve() and jobs_queue() in one: 0, or -EAGAIN, -ESHUTDOWN, -ENOMEM. */
int jobs_submit(enum job_kind kind, job_fn fn, void *arg);

/* For metrics: places taken (reserved, queued or running), the most there may be, refusals. */
unsigned jobs_pending(enum job_kind kind);
unsigned jobs_limit(enum job_kind kind);
unsigned long long jobs_refused(enum job_kind kind);
const char *jobs_kind_name(enum job_kind kind);

#endif
