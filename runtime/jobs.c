#include "runtime/jobs.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/util.h"

struct job {
	job_fn fn;
	void *arg;
	struct job *next;
};

struct job_queue {
	pthread_mutex_t lock;
	pthread_cond_t ready;
	struct job *head, *tail;
	unsigned pending; /* queued plus running */
	bool stopping;
	unsigned nworkers;
	pthread_t workers[32];
};

static const char *const kind_names[JOB_KINDS] = {
    [JOB_LIFECYCLE] = "lifecycle",
    [JOB_CHECKPOINT] = "checkpoint",
    [JOB_STORE] = "store",
    [JOB_EXEC] = "exec",
};

static struct job_queue queues[JOB_KINDS];

static unsigned workers_for(enum job_kind kind)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	switch (kind) {
	case JOB_LIFECYCLE:
		return 8;
	case JOB_CHECKPOINT:
		return 4;
	case JOB_STORE:
		return cores > 1 ? (unsigned)(cores < 8 ? cores : 8) : 1;
	case JOB_EXEC:
		return 32;
	default:
		return 1;
	}
}

static struct job *queue_take(struct job_queue *q)
{
	pthread_mutex_lock(&q->lock);
	while (!q->head && !q->stopping)
		pthread_cond_wait(&q->ready, &q->lock);
	/* Exec jobs still queued at shutdown are dropped, not run: see jobs.h. */
	struct job *j = q->stopping && q == &queues[JOB_EXEC] ? NULL : q->head;
	if (j) {
		q->head = j->next;
		if (!q->head)
			q->tail = NULL;
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
		q->pending--;
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
		if (n > ARRAY_SIZE(q->workers))
			n = ARRAY_SIZE(q->workers);
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

int jobs_submit(enum job_kind kind, job_fn fn, void *arg)
{
	struct job_queue *q = &queues[kind];
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->fn = fn;
	j->arg = arg;
	pthread_mutex_lock(&q->lock);
	if (q->stopping) {
		pthread_mutex_unlock(&q->lock);
		free(j);
		return -ESHUTDOWN;
	}
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
	q->pending++;
	pthread_cond_signal(&q->ready);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

unsigned jobs_pending(enum job_kind kind)
{
	struct job_queue *q = &queues[kind];
	pthread_mutex_lock(&q->lock);
	unsigned n = q->pending;
	pthread_mutex_unlock(&q->lock);
	return n;
}

const char *jobs_kind_name(enum job_kind kind)
{
	return kind_names[kind];
}
