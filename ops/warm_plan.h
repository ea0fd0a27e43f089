/*
 * warm_plan.h - the warm pools' arithmetic (ops/ops_warm.c): what a `warm`
 * write and --warm-max say, whether the host's bound has room for one
 * more member, and how long a pool that failed waits before it tries
 * again. Pure functions: no state, no lock, no I/O (tests/unit/test_warm.c).
 */
#ifndef SNAPFS_WARM_PLAN_H
#define SNAPFS_WARM_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/util.h"

/* The most members one snapshot's pool may want (`warm` takes 0..this). */
#define WARM_WANT_MAX 64
/* --warm-max's default: members of all pools together. */
#define WARM_MAX_DEFAULT "16"
/* A failed restore's pool waits this long, doubled at each failure in a row, up to the most. */
#define WARM_BACKOFF_FIRST_MS 5000
#define WARM_BACKOFF_MAX_MS (300 * 1000)

/* --warm-max: a count of members (digits only), or the memory they may hold (a size). */
struct warm_max {
	bool bytes;    /* false: @value is a count */
	int64_t value; /* 0: no member at all */
};

/* `warm`'s text: a whole number 0..WARM_WANT_MAX, a newline allowed; -EINVAL otherwise. */
int warm_want_parse(const char *text, unsigned *want, struct err *e);
/* --warm-max's text: "16" (members) or "8G" (bytes, lib/size.h); -EINVAL otherwise. */
int warm_max_parse(const char *text, struct warm_max *out, struct err *e);
/*
 * May one more member, holding @next_bytes, join the @members members
 * (restoring ones included) holding @bytes under @max?
 */
bool warm_max_allows(const struct warm_max *max, unsigned members, int64_t bytes,
		     int64_t next_bytes);
/* The wait after a failure, @prev_ms the wait before it (0: the first failure in a row). */
int64_t warm_backoff_next(int64_t prev_ms);

#endif
