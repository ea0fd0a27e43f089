#include "lib/cancel.h"

#include <stddef.h>

#include "lib/util.h"

static _Thread_local struct cancel *bound;

void cancel_init(struct cancel *c)
{
	atomic_init(&c->deadline_ms, 0);
	atomic_init(&c->cancelled, false);
}

void cancel_bind(struct cancel *c)
{
	bound = c;
}

void cancel_set_deadline(struct cancel *c, int64_t deadline_ms)
{
	atomic_store(&c->deadline_ms, deadline_ms);
}

void cancel_now(struct cancel *c)
{
	atomic_store(&c->cancelled, true);
}

struct cancel *cancel_current(void)
{
	return bound;
}

bool cancel_requested(void)
{
	if (!bound)
		return false;
	if (atomic_load(&bound->cancelled))
		return true;
	int64_t deadline = atomic_load(&bound->deadline_ms);
	return deadline > 0 && mono_ms() >= deadline;
}
