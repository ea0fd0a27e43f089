/*
 * t_store.h - open a store in the test's directory and store a source
 * directory of the test's as a snapshot, for the store's unit tests
 * (tests/unit/t_dir.h gives the directory).
 *
 *     struct store *st = t_store_open("store"); // file://<t_base>/store
 *     t_store_put(st, "snap-1", "src", &res);  // <t_base>/src as snap-1
 */
#ifndef SNAPFS_T_STORE_H
#define SNAPFS_T_STORE_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "backend/store.h"
#include "tests/unit/t_dir.h"

/* The store file://<t_base>/@rel, or NULL (a failed check). */
static inline struct store *t_store_open(const char *rel)
{
	char url[PATH_MAX + 8];
	struct store *st = NULL;
	struct err e = {0};
	snprintf(url, sizeof(url), "file://%s/%s", t_base, rel);
	CHECK(store_open(url, NULL, &st, &e) == 0);
	return st;
}

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
