/*
 * t_threads.h - run one test function on several threads at once and check
 * each thread's count of failures.
 *
 *     static int work(void *obj, int index) { ...; return failures; }
 *     t_threads(4, work, store);   // work(store, 0) .. work(store, 3) at once
 *
 * Each thread's start is a check, and each thread's result another: no
 * failures.
 */
#ifndef SNAPFS_T_THREADS_H
#define SNAPFS_T_THREADS_H

#include <pthread.h>
#include <stdlib.h>

#include "tests/unit/t.h"

#define T_THREADS_MAX 16

/* One thread's work on the shared @obj: its failures, 0 when all went well. */
typedef int (*t_thread_fn)(void *obj, int index);

struct t_thread {
	t_thread_fn fn;
	void *obj;
	int index;
	int failures;
	pthread_t id;
};

static inline void *t_thread_main(void *arg)
{
	struct t_thread *t = arg;
	t->failures = t->fn(t->obj, t->index);
	return NULL;
}

static inline void t_threads(int n, t_thread_fn fn, void *obj)
{
	struct t_thread t[T_THREADS_MAX];
	int started = 0;
	if (n > T_THREADS_MAX)
		abort(); /* a test's own numbers */
	while (started < n) {
		t[started] = (struct t_thread){.fn = fn, .obj = obj, .index = started};
		if (!CHECK(pthread_create(&t[started].id, NULL, t_thread_main, &t[started]) == 0))
			break;
		started++;
	}
	for (int i = 0; i < started; i++) {
		pthread_join(t[i].id, NULL);
		CHECK_MSG(t[i].failures == 0, "thread %d: %d failures", i, t[i].failures);
	}
}

#endif
