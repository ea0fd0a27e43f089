#include "ops/jobs.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct job {
	job_fn fn;
	void *arg;
	enum job_kind kind;
	struct job *next;
};

struct job_queue {
	pthread_mutex_t lock;
	pthread_cond_t ready;
	struct job *head, *tail;
	/* Places taken: reserved (not queued yet), queued, running. */
	unsigned reserved, queued, running;
	unsigned long long refused;
	bool stopping;
	unsigned nworkers;
	pthread_t workers[JOBS_EXEC_WORKERS];
};

static const struct {
	const char *name;
	unsigned workers, queue;
} kinds[JOB_KINDS] = {
    [JOB_LIFECYCLE] = {"lifecycle", JOBS_LIFECYCLE_WORKERS, JOBS_LIFECYCLE_QUEUE},
    [JOB_CHECKPOINT] = {"checkpoint", JOBS_CHECKPOINT_WORKERS, JOBS_CHECKPOINT_QUEUE},
    [JOB_STORE] = {"store", 0 /* cores */, JOBS_STORE_QUEUE},
    [JOB_EXEC] = {"exec", JOBS_EXEC_WORKERS, JOBS_EXEC_QUEUE},
};

_Static_assert(JOBS_LIFECYCLE_WORKERS <= JOBS_EXEC_WORKERS &&
		   JOBS_CHECKPOINT_WORKERS <= JOBS_EXEC_WORKERS &&
		   JOBS_STORE_WORKERS_MAX <= JOBS_EXEC_WORKERS,
	       "struct job_queue holds JOBS_EXEC_WORKERS threads, the most of any kind");

static struct job_queue queues[JOB_KINDS];

static unsigned workers_for(enum job_kind kind)
{
	if (kinds[kind].workers)
		return kinds[kind].workers;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	return cores > 1
		   ? (unsigned)(cores < JOBS_STORE_WORKERS_MAX ? cores : JOBS_STORE_WORKERS_MAX)
		   : 1;
}

unsigned jobs_limit(enum job_kind kind)
{
	return workers_for(kind) + kinds[kind].queue;
}

/*
 * The next job, or NULL once the worker should end: at shutdown, when
 * nothing is queued and no reserved place is still to be queued (exec:
 * at once, dropping what is queued; see jobs.h).
 */
static struct job *queue_take(struct job_queue *q)
{
	bool exec = q == &queues[JOB_EXEC];
	pthread_mutex_lock(&q->lock);
	while (!q->head && !(q->stopping && (exec || q->reserved == 0)))
		pthread_cond_wait(&q->ready, &q->lock);
	struct job *j = q->stopping && exec ? NULL : q->head;
	if (j) {
		q->head = j->next;
		if (!q->head)
			q->tail = NULL;
		q->queued--;
		q->running++;
	}
	pthread_mutex_unlock(&q->lock);
	return j;
}

static void *worker_main(void *arg)
{
	struct job_queue *q = arg;
	for (;;) {
		struct job *j = queue_take(q);
		if (!j)
			break;
		j->fn(j->arg);
		free(j);
		pthread_mutex_lock(&q->lock);
		q->running--;
		pthread_mutex_unlock(&q->lock);
	}
	return NULL;
}

int jobs_start(void)
{
	for (int k = 0; k < JOB_KINDS; k++) {
		struct job_queue *q = &queues[k];
		pthread_mutex_init(&q->lock, NULL);
		pthread_cond_init(&q->ready, NULL);
		unsigned n = workers_for(k);
		for (q->nworkers = 0; q->nworkers < n; q->nworkers++) {
			int rc = pthread_create(&q->workers[q->nworkers], NULL, worker_main, q);
			if (rc != 0)
				return -rc;
		}
	}
	return 0;
}

void jobs_stop(void)
{
	for (int k = 0; k < JOB_KINDS; k++) {
		struct job_queue *q = &queues[k];
		pthread_mutex_lock(&q->lock);
		q->stopping = true;
		pthread_cond_broadcast(&q->ready);
		pthread_mutex_unlock(&q->lock);
	}
	for (int k = 0; k < JOB_KINDS; k++) {
		struct job_queue *q = &queues[k];
		for (unsigned i = 0; i < q->nworkers; i++) {
			if (k == JOB_EXEC)
				pthread_detach(q->workers[i]);
			else
				pthread_join(q->workers[i], NULL);
		}
		q->nworkers = 0;
	}
}

struct job *jobs_reserve(enum job_kind kind, struct err *e)
{
	struct job_queue *q = &queues[kind];
	struct job *j = calloc(1, sizeof(*j));
	if (!j) {
		err_set(e, ENOMEM, "cannot queue the work: out of memory");
		return NULL;
	}
	j->kind = kind;
	unsigned limit = jobs_limit(kind);
	pthread_mutex_lock(&q->lock);
	unsigned taken = q->reserved + q->queued + q->running;
	bool full = taken >= limit, stopping = q->stopping;
	if (full && !stopping)
		q->refused++;
	if (!full && !stopping)
		q->reserved++;
	pthread_mutex_unlock(&q->lock);
	if (!full && !stopping)
		return j;
	free(j);
	if (stopping)
		err_set(e, ESHUTDOWN, "cannot queue the work: snapfs is shutting down");
	else
		err_set(e, EAGAIN,
			"cannot queue the work: the %s queue is full (%u jobs running or waiting, "
			"at most %u); try again later",
			kinds[kind].name, taken, limit);
	return NULL;
}

void jobs_queue(struct job *j, job_fn fn, void *arg)
{
	if (!j)
		return;
	struct job_queue *q = &queues[j->kind];
	j->fn = fn;
	j->arg = arg;
	pthread_mutex_lock(&q->lock);
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
	q->reserved--;
	q->queued++;
	/* At shutdown every idle worker waits for the last reserved place. */
	if (q->stopping)
		pthread_cond_broadcast(&q->ready);
	else
		pthread_cond_signal(&q->ready);
	pthread_mutex_unlock(&q->lock);
}

void jobs_cancel(struct job *j)
{
	if (!j)
		return;
	struct job_queue *q = &queues[j->kind];
	pthread_mutex_lock(&q->lock);
	q->reserved--;
	/* A worker at shutdown may wait for this place. */
	pthread_cond_broadcast(&q->ready);
	pthread_mutex_unlock(&q->lock);
	free(j);
}

int jobs_submit(enum job_kind kind, job_fn fn, void *arg)
{
	struct err e = {0};
	struct job *j = jobs_reserve(kind, &e);
	if (!j)
		return -e.code;
	jobs_queue(j, fn, arg);
	return 0;
}

unsigned jobs_pending(enum job_kind kind)
{
	struct job_queue *q = &queues[kind];
	pthread_mutex_lock(&q->lock);
	unsigned n = q->reserved + q->queued + q->running;
	pthread_mutex_unlock(&q->lock);
	return n;
}

unsigned long long jobs_refused(enum job_kind kind)
{
	struct job_queue *q = &queues[kind];
	pthread_mutex_lock(&q->lock);
	unsigned long long n = q->refused;
	pthread_mutex_unlock(&q->lock);
	return n;
}

const char *jobs_kind_name(enum job_kind kind)
{
	return kinds[kind].name;
}
