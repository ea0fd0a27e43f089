/*
 * t.h - a tiny unit-test harness: CHECK() records a failure and goes on,
 * t_done() prints "N passed, N failed" and returns the exit status.
 *
 *     int main(void) { CHECK(1 + 1 == 2); return t_done(); }
 */
#ifndef SNAPFS_T_H
#define SNAPFS_T_H

#include <stdio.h>
#include <string.h>

static int t_passed, t_failed;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (cond) {                                                                        \
			t_passed++;                                                                \
		} else {                                                                           \
			t_failed++;                                                                \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);            \
		}                                                                                  \
	} while (0)

#define CHECK_STR(a, b)                                                                            \
	do {                                                                                       \
		const char *a_ = (a), *b_ = (b);                                                   \
		if (a_ && b_ && strcmp(a_, b_) == 0) {                                             \
			t_passed++;                                                                \
		} else {                                                                           \
			t_failed++;                                                                \
			fprintf(stderr, "FAIL %s:%d: %s == %s (\"%s\" vs \"%s\")\n", __FILE__,     \
				__LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");         \
		}                                                                                  \
	} while (0)

static inline int t_done(void)
{
	printf("%d passed, %d failed\n", t_passed, t_failed);
	return t_failed ? 1 : 0;
}

#endif
