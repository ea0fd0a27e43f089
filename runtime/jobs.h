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
 * Ownership: a submitted job's argument belongs to the job function, which
 * frees it. jobs_stop() lets queued jobs of every kind but JOB_EXEC finish,
 * then joins those workers. Queued exec jobs are dropped (their arguments
 * leak: the process is ending) and running ones are left to end with the
 * process, since a user's command may run for ever.
 */
#ifndef SNAPFS_JOBS_H
#define SNAPFS_JOBS_H

enum job_kind {
	JOB_LIFECYCLE,
	JOB_CHECKPOINT,
	JOB_STORE,
	JOB_EXEC,
	JOB_KINDS,
};

typedef void (*job_fn)(void *arg);

int jobs_start(void);
void jobs_stop(void);
/* Queue @fn(@arg) on @kind's workers; -ESHUTDOWN once stopping, -ENOMEM. */
int jobs_submit(enum job_kind kind, job_fn fn, void *arg);
/* Jobs queued or running, for metrics. */
unsigned jobs_pending(enum job_kind kind);
const char *jobs_kind_name(enum job_kind kind);

#endif
