/*
 * t_objstore.h - what the object store tests (test_objstore, test_s3) do to
 * every backend alike.
 *
 *     t_put_back(os, "a/b", "hello", 5, 100);  // put, get (at most 100), the same bytes
 */
#ifndef SNAPFS_T_OBJSTORE_H
#define SNAPFS_T_OBJSTORE_H

#include <stdlib.h>
#include <string.h>

#include "backend/objstore/objstore.h"
#include "tests/unit/t.h"

/* Put @len bytes of @data as @key and get them back, NUL-terminated, reading at most @max. */
static inline void t_put_back(struct objstore *os, const char *key, const char *data, size_t len,
			      size_t max)
{
	struct err e = {0};
	char *got = NULL;
	size_t n = 0;
	CHECK_MSG(objstore_put_buf(os, key, data, len, &e) == 0, "put %s: %s", key, e.msg);
	CHECK_MSG(objstore_get_buf(os, key, &got, &n, max, &e) == 0, "get %s: %s", key, e.msg);
	CHECK_MSG(n == len && got && !memcmp(got, data, len) && got[len] == '\0',
		  "%s read back as %zu bytes, not the %zu put", key, n, len);
	free(got);
}

#endif
