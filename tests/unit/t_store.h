/*
 * t_store.h - store a source directory of the test's as a snapshot, for the
 * store's unit tests (tests/unit/t_dir.h gives the directory).
 *
 *     t_store_begin("test_x");                 // TEST_DEBUG=1: debug logs; t_dir_make()
 *     st = t_store_open("store");              // file://<t_base>/store, or NULL
 *     t_write_image("src", pages, n, ckpt, m); // <t_base>/src/pages.img, checkpoint.img
 *     t_store_put(st, "snap-1", "src", &res);  // <t_base>/src as snap-1
 */
#ifndef SNAPFS_T_STORE_H
#define SNAPFS_T_STORE_H

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/store/store.h"
#include "tests/unit/t_dir.h"

/* A store test's start: debug logging when TEST_DEBUG is set, and its temp dir (t_dir_make). */
static inline bool t_store_begin(const char *name)
{
	log_debug_enabled = getenv("TEST_DEBUG") != NULL;
	return t_dir_make(name);
}

/* The store at file://<t_base>/@rel; NULL, a failed check saying why, if it does not open. */
static inline struct store *t_store_open(const char *rel)
{
	char url[PATH_MAX + 8];
	struct store *st = NULL;
	struct err e = {0};
	if (xsnprintf(url, sizeof(url), "file://%s/%s", t_base, rel) < 0)
		abort(); /* a test's own paths are short */
	CHECK_MSG(store_open(url, NULL, &st, &e) == 0, "open %s: %s", url, e.msg);
	return st;
}

/* A checkpoint image in directory <t_base>/@rel (made if missing): pages.img and checkpoint.img. */
static inline void t_write_image(const char *rel, const void *pages, size_t pages_len,
				 const void *ckpt, size_t ckpt_len)
{
	char p[PATH_MAX];
	t_path(p, rel);
	CHECK(mkdir_p(p, 0755) == 0);
	if (xsnprintf(p, sizeof(p), "%s/pages.img", rel) < 0)
		abort(); /* a test's own paths are short */
	t_write(p, pages, pages_len);
	if (xsnprintf(p, sizeof(p), "%s/checkpoint.img", rel) < 0)
		abort();
	t_write(p, ckpt, ckpt_len);
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
