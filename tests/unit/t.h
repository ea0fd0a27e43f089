/*
 * t.h - a tiny unit-test harness: CHECK() records a failure and goes on,
 * SKIP() counts a check that could not be made on this run and says why,
 * t_done() prints "N skipped" (when there were any) and then the result
 * line "N passed, N failed", and returns the exit status.
 *
 *     int main(void) { CHECK(1 + 1 == 2); return t_done(); }
 *
 * The counts may be shared with forked children (t_share(), before the
 * first fork): a child's checks are then the parent's, even when the child
 * is killed. They are counted atomically, so any thread may check.
 */
#ifndef SNAPFS_T_H
#define SNAPFS_T_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

struct t_counts {
	int passed, failed, skipped;
};

static struct t_counts t_counts_own;
static struct t_counts *t_n = &t_counts_own;
/* Where failures are said; NULL: stderr (a test whose stderr becomes a log sets it). */
static FILE *t_err;

/* Count @ok; a failure prints "FAIL file:line: " and the rest as printf would. */
__attribute__((format(printf, 4, 5))) static inline bool t_count(bool ok, const char *file,
								 int line, const char *fmt, ...)
{
	if (ok) {
		__atomic_add_fetch(&t_n->passed, 1, __ATOMIC_RELAXED);
		return true;
	}
	__atomic_add_fetch(&t_n->failed, 1, __ATOMIC_RELAXED);
	va_list ap;
	FILE *out = t_err ? t_err : stderr;
	va_start(ap, fmt);
	fprintf(out, "FAIL %s:%d: ", file, line);
	vfprintf(out, fmt, ap);
	fputc('\n', out);
	fflush(out);
	va_end(ap);
	return false;
}

#define CHECK(cond) t_count((cond), __FILE__, __LINE__, "%s", #cond)
/* CHECK with a message of its own (printf-style) in place of the condition's text. */
#define CHECK_MSG(cond, ...) t_count((cond), __FILE__, __LINE__, __VA_ARGS__)

#define CHECK_STR(a, b)                                                                            \
	do {                                                                                       \
		const char *a_ = (a), *b_ = (b);                                                   \
		CHECK_MSG(a_ &&b_ &&strcmp(a_, b_) == 0, "%s == %s (\"%s\" vs \"%s\")", #a, #b,    \
			  a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                 \
	} while (0)

/* A check this run cannot make (no privilege, no server): counted and said, never a pass. */
#define SKIP(...) t_skip(__FILE__, __LINE__, __VA_ARGS__)

__attribute__((format(printf, 3, 4))) static inline void t_skip(const char *file, int line,
								const char *fmt, ...)
{
	va_list ap;
	__atomic_add_fetch(&t_n->skipped, 1, __ATOMIC_RELAXED);
	va_start(ap, fmt);
	printf("SKIP %s:%d: ", file, line);
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
	fflush(stdout);
}

/* Move the counts into memory that children forked from now on share; false if it cannot. */
static inline bool t_share(void)
{
	struct t_counts *shared =
	    mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED) {
		perror("t_share: mmap");
		return false;
	}
	*shared = *t_n;
	t_n = shared;
	return true;
}

static inline int t_done(void)
{
	if (t_n->skipped)
		printf("%d skipped\n", t_n->skipped);
	printf("%d passed, %d failed\n", t_n->passed, t_n->failed);
	return t_n->failed ? 1 : 0;
}

#endif
