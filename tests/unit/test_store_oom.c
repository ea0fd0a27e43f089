/*
 * test_store_oom.c - a put that cannot register itself says why: out of
 * memory is ENOMEM with a message that says so, another put of the same id
 * in flight is EBUSY, "being stored already" (issue 10: ENOMEM was reported
 * as the latter).
 *
 * The allocation fails for real: this program is linked with
 * -Wl,--wrap=calloc (Makefile), so every calloc of the store comes through
 * __wrap_calloc(), which refuses the one of a struct inflight while armed
 * and calls the real one otherwise.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend/store/store.h"
#include "backend/store/store_internal.h"
#include "lib/util.h"
#include "tests/unit/t.h"
#include "tests/unit/t_dir.h"
#include "tests/unit/t_store.h"

static bool fail_inflight; /* the test's thread arms it; the put fails before it starts others */

void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);

void *__wrap_calloc(size_t n, size_t size)
{
	if (fail_inflight && n == 1 && size == sizeof(struct inflight)) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_calloc(n, size);
}

static int put(struct store *st, const char *id, struct err *e)
{
	char src[PATH_MAX];
	t_path(src, "src");
	cJSON *meta = cJSON_CreateObject();
	int rc = store_put_snapshot(st, id, src, meta, NULL, NULL, NULL, e);
	cJSON_Delete(meta);
	return rc;
}

static void test_enomem(struct store *st)
{
	struct err e = {0};
	fail_inflight = true;
	int rc = put(st, "snap-oom", &e);
	fail_inflight = false;
	CHECK(rc == -ENOMEM);
	CHECK(e.code == ENOMEM);
	CHECK(strstr(e.msg, "out of memory") != NULL);
	CHECK(strstr(e.msg, "being stored already") == NULL);
	CHECK(strstr(e.msg, "snap-oom") != NULL);
	/* Nothing of the failed put stays registered: the same id goes in now. */
	err_clear(&e);
	CHECK(put(st, "snap-oom", &e) == 0);
}

static void test_ebusy(struct store *st)
{
	struct err e = {0};
	struct inflight *fl = NULL;
	pthread_mutex_lock(&st->lock);
	int rc = store_inflight_begin(st, "snap-busy", &fl);
	pthread_mutex_unlock(&st->lock);
	CHECK(rc == 0);
	if (rc < 0)
		return;
	CHECK(put(st, "snap-busy", &e) == -EBUSY);
	CHECK(e.code == EBUSY && strstr(e.msg, "snapshot snap-busy is being stored already"));
	pthread_mutex_lock(&st->lock);
	store_inflight_end(st, fl);
	pthread_mutex_unlock(&st->lock);
}

/* The store, and a source directory of one small file to put. */
static struct store *setup(void)
{
	char src[PATH_MAX];
	t_path(src, "src");
	CHECK(mkdir_p(src, 0755) == 0);
	t_write("src/pages.img", "some pages", 10);
	return t_store_open("store");
}

int main(void)
{
	if (!t_store_begin("test_store_oom"))
		return 1;
	struct store *st = setup();
	if (st) {
		test_enomem(st);
		test_ebusy(st);
	}
	store_close(st);
	rm_rf(t_base);
	return t_done();
}
