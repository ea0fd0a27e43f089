/*
 * strset.h - a set of strings: add them, seal it once (sort, drop
 * duplicates), then look them up in O(log n).
 *
 *     struct strset s = STRSET_INIT;
 *     strset_add(&s, "b"); strset_add(&s, "a"); strset_add(&s, "b");
 *     strset_seal(&s);                      // s.n == 2, s.v = {"a", "b"}
 *     strset_has(&s, "a");                  // true
 *     strset_release(&s);
 *
 * Ownership: the set owns copies of its strings (in one strbuf, so the same
 * hard maximum applies) and the sorted array of pointers into them.
 * strset_has() finds nothing until strset_seal(); an add unseals the set.
 */
#ifndef SNAPFS_STRSET_H
#define SNAPFS_STRSET_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/strbuf.h"

struct strset {
	struct strbuf buf; /* the strings, each NUL-terminated */
	const char **v;	   /* sealed: sorted, distinct */
	size_t n;
};

#define STRSET_INIT                                                                                \
	{                                                                                          \
		STRBUF_INIT, NULL, 0                                                               \
	}

/* -EFBIG past the strbuf's maximum, -ENOMEM. */
int strset_add(struct strset *s, const char *str);
/* Sort and drop duplicates: -ENOMEM. */
int strset_seal(struct strset *s);
bool strset_has(const struct strset *s, const char *str);
void strset_release(struct strset *s);
void strset_releasep(struct strset *s);

#define _cleanup_strset_ __attribute__((cleanup(strset_releasep)))

#endif
