/*
 * t_store.h - store a source directory of the test's as a snapshot, for the
 * store's unit tests (tests/unit/t_dir.h gives the directory).
 *
 *     t_store_put(st, "snap-1", "src", &res);  // <t_base>/src as snap-1
 */
#ifndef SNAPFS_T_STORE_H
#define SNAPFS_T_STORE_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "backend/store.h"
#include "tests/unit/t_dir.h"

/* Put <t_base>/@rel as snapshot @id with empty metadata; @res may be NULL. A failure is said. */
static inline int t_store_put(struct store *st, const char *id, const char *rel,
			      struct store_put_result *res)
{
	char src[PATH_MAX];
	struct err e = {0};
	t_path(src, rel);
	cJSON *meta = cJSON_CreateObject();
	int rc = store_put_snapshot(st, id, src, meta, NULL, NULL, res, &e);
	if (rc < 0)
		fprintf(stderr, "put %s: %s\n", id, e.msg);
	cJSON_Delete(meta);
	return rc;
}

#endif
