/* ops/ahead.c: a sandbox's files read ahead (kept once, for a second, dropped at a change). */
#include "ops/ahead.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/t.h"

/* A file of @len bytes of @c at @path, asked at @at_ms. */
static struct ahead_file file(const char *path, size_t len, char c, int64_t at_ms)
{
	struct ahead_file f = {.path = strdup(path), .len = len, .asked_ms = at_ms};
	f.attr.mode = 0100644;
	f.attr.size = len;
	if (len) {
		f.data = malloc(len);
		memset(f.data, c, len);
	}
	return f;
}

static void test_take_once(void)
{
	struct ahead_set s = {0};
	struct ahead_file f = file("tmp/a", 3, 'a', 1000), got;
	ahead_keep(&s, ahead_epoch(&s), &f, 1000);
	CHECK(f.path == NULL && f.data == NULL); /* the set owns it */
	CHECK(s.bytes == 3);
	CHECK(ahead_has(&s, "tmp/a", 1500));
	CHECK(!ahead_has(&s, "tmp/b", 1500));
	CHECK(ahead_take(&s, "tmp/a", 1500, &got));
	CHECK(got.len == 3 && memcmp(got.data, "aaa", 3) == 0 && strcmp(got.path, "tmp/a") == 0);
	ahead_file_release(&got);
	CHECK(s.bytes == 0);
	/* One open each: the second asks the agent. */
	CHECK(!ahead_take(&s, "tmp/a", 1500, &got));
	ahead_clear(&s);
}

static void test_fresh(void)
{
	struct ahead_set s = {0};
	struct ahead_file f = file("x", 1, 'x', 1000), got;
	ahead_keep(&s, ahead_epoch(&s), &f, 1200);
	CHECK(ahead_has(&s, "x", 1000 + AHEAD_FRESH_MS - 1));
	CHECK(!ahead_has(&s, "x", 1000 + AHEAD_FRESH_MS));
	/* Its second counts from when it was asked, not kept. */
	CHECK(!ahead_take(&s, "x", 1000 + AHEAD_FRESH_MS, &got));
	CHECK(s.bytes == 0);
	/* An answer already a second old is not kept at all. */
	f = file("y", 1, 'y', 1000);
	ahead_keep(&s, ahead_epoch(&s), &f, 1000 + AHEAD_FRESH_MS);
	CHECK(f.path == NULL && !ahead_has(&s, "y", 1000));
	ahead_clear(&s);
}

static void test_epoch(void)
{
	struct ahead_set s = {0};
	struct ahead_file f = file("a", 1, 'a', 0), got;
	uint64_t asked = ahead_epoch(&s);
	ahead_keep(&s, asked, &f, 10);
	ahead_clear(&s); /* a change through root/ */
	CHECK(!ahead_take(&s, "a", 20, &got));
	/* A reply asked before the change is dropped, not kept. */
	f = file("b", 1, 'b', 0);
	ahead_keep(&s, asked, &f, 30);
	CHECK(f.path == NULL);
	CHECK(!ahead_has(&s, "b", 30) && s.bytes == 0);
	f = file("b", 1, 'b', 0);
	ahead_keep(&s, ahead_epoch(&s), &f, 30);
	CHECK(ahead_has(&s, "b", 30));
	ahead_clear(&s);
}

static void test_bounds(void)
{
	struct ahead_set s = {0};
	char path[32];
	for (int i = 0; i < AHEAD_KEPT_MAX + 10; i++) {
		snprintf(path, sizeof(path), "f%d", i);
		struct ahead_file f = file(path, 10, 'f', 0);
		ahead_keep(&s, ahead_epoch(&s), &f, 0);
	}
	int kept = 0;
	for (int i = 0; i < AHEAD_KEPT_MAX + 10; i++) {
		snprintf(path, sizeof(path), "f%d", i);
		kept += ahead_has(&s, path, 0);
	}
	CHECK(kept == AHEAD_KEPT_MAX && s.bytes == 10u * AHEAD_KEPT_MAX);
	ahead_clear(&s);
	/* Bytes: past AHEAD_BYTES_MAX nothing more is kept. */
	size_t big = WIRE_PEEK_MAX - 1, n = 0;
	for (int i = 0; i < AHEAD_KEPT_MAX; i++) {
		snprintf(path, sizeof(path), "g%d", i);
		struct ahead_file f = file(path, big, 'g', 0);
		ahead_keep(&s, ahead_epoch(&s), &f, 0);
		n += ahead_has(&s, path, 0);
	}
	CHECK(n == AHEAD_BYTES_MAX / big && s.bytes <= AHEAD_BYTES_MAX);
	/* Stale ones make room. */
	struct ahead_file f = file("late", big, 'l', AHEAD_FRESH_MS);
	ahead_keep(&s, ahead_epoch(&s), &f, AHEAD_FRESH_MS);
	CHECK(ahead_has(&s, "late", AHEAD_FRESH_MS) && s.bytes == big);
	ahead_clear(&s);
}

static void test_newer_wins(void)
{
	struct ahead_set s = {0};
	struct ahead_file f = file("a", 2, '1', 0), got;
	ahead_keep(&s, ahead_epoch(&s), &f, 0);
	f = file("a", 3, '2', 5);
	ahead_keep(&s, ahead_epoch(&s), &f, 5);
	CHECK(s.bytes == 3);
	CHECK(ahead_take(&s, "a", 6, &got) && got.len == 3 && got.data[0] == '2');
	ahead_file_release(&got);
	CHECK(!ahead_has(&s, "a", 6));
	/* An empty file is kept too, with no data. */
	f = file("e", 0, 0, 0);
	ahead_keep(&s, ahead_epoch(&s), &f, 0);
	CHECK(ahead_take(&s, "e", 0, &got) && got.len == 0 && got.data == NULL);
	ahead_file_release(&got);
	ahead_clear(&s);
}

static void test_review(void)
{
	/* A late reply, asked before a change, leaves the copy kept since alone. */
	struct ahead_set s = {0};
	uint64_t before = ahead_epoch(&s);
	ahead_clear(&s);
	struct ahead_file f = file("a", 3, 'n', 10), got;
	ahead_keep(&s, ahead_epoch(&s), &f, 10);
	f = file("a", 2, 'o', 5);
	ahead_keep(&s, before, &f, 11);
	CHECK(ahead_take(&s, "a", 12, &got) && got.len == 3 && got.data[0] == 'n');
	ahead_file_release(&got);
	ahead_clear(&s);

	/* Of two replies asked under one epoch, the one asked later is kept, whichever came last.
	 */
	f = file("b", 1, 'L', 20);
	ahead_keep(&s, ahead_epoch(&s), &f, 21);
	f = file("b", 1, 'E', 15);
	ahead_keep(&s, ahead_epoch(&s), &f, 22);
	CHECK(ahead_take(&s, "b", 23, &got) && got.data[0] == 'L');
	ahead_file_release(&got);
	/* ahead_prune() frees what is over its second, used or not. */
	f = file("c", 5, 'c', 100);
	ahead_keep(&s, ahead_epoch(&s), &f, 100);
	ahead_prune(&s, 100 + AHEAD_FRESH_MS - 1);
	CHECK(s.bytes == 5);
	ahead_prune(&s, 100 + AHEAD_FRESH_MS);
	CHECK(s.bytes == 0 && !ahead_has(&s, "c", 100));
	ahead_clear(&s);

	/* Two sets, or one made again, never share an epoch. */
	struct ahead_set t = {0}, u = {0};
	CHECK(ahead_epoch(&t) != ahead_epoch(&u));

	/* All sets together keep at most AHEAD_TOTAL_MAX bytes. */
	enum { SETS = AHEAD_TOTAL_MAX / AHEAD_BYTES_MAX + 2 };
	static struct ahead_set many[SETS];
	size_t kept = 0, len = WIRE_PEEK_MAX - 1;
	char path[32];
	for (int k = 0; k < SETS; k++)
		for (int i = 0; i < AHEAD_KEPT_MAX; i++) {
			snprintf(path, sizeof(path), "f%d", i);
			f = file(path, len, 'x', 0);
			ahead_keep(&many[k], ahead_epoch(&many[k]), &f, 0);
			kept += ahead_has(&many[k], path, 0) ? len : 0;
		}
	CHECK(kept <= AHEAD_TOTAL_MAX && kept > AHEAD_TOTAL_MAX - AHEAD_BYTES_MAX);
	for (int k = 0; k < SETS; k++)
		ahead_clear(&many[k]);
	/* Freed again: a set has room once more. */
	f = file("again", len, 'y', 0);
	ahead_keep(&s, ahead_epoch(&s), &f, 0);
	CHECK(ahead_has(&s, "again", 0));
	ahead_clear(&s);
}

int main(void)
{
	test_take_once();
	test_fresh();
	test_epoch();
	test_bounds();
	test_newer_wins();
	test_review();
	return t_done();
}
