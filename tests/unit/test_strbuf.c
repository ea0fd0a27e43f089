/* strbuf: appends, the hard maximum, and sticky failure (lib/strbuf.h). */
#include "lib/strbuf.h"

#include <errno.h>
#include <stdlib.h>

#include "tests/unit/t.h"

static void test_appends(void)
{
	struct strbuf sb = STRBUF_INIT;
	CHECK_STR(strbuf_str(&sb), "");
	CHECK(strbuf_error(&sb) == 0);
	strbuf_adds(&sb, "snap");
	strbuf_add(&sb, "-0", 2);
	strbuf_addf(&sb, "%03d", 7);
	CHECK(strbuf_error(&sb) == 0);
	CHECK(sb.len == 9);
	CHECK_STR(strbuf_str(&sb), "snap-0007");
	strbuf_add(&sb, "\0x", 2); /* binary data: len counts it */
	CHECK(sb.len == 11 && sb.buf[9] == '\0' && sb.buf[10] == 'x' && sb.buf[11] == '\0');
	strbuf_release(&sb);
	CHECK(sb.buf == NULL && sb.len == 0 && strbuf_error(&sb) == 0);
}

/* Past the maximum nothing is added, and nothing after it either: a whole prefix is left. */
static void test_sticky_limit(void)
{
	struct strbuf sb = {.max = 8};
	strbuf_adds(&sb, "12345");
	strbuf_adds(&sb, "6789"); /* 9 bytes: one past the maximum */
	CHECK(strbuf_error(&sb) == -EFBIG);
	CHECK(sb.len == 5);
	CHECK_STR(strbuf_str(&sb), "12345");
	strbuf_adds(&sb, "6"); /* would fit, but the text would have a hole */
	strbuf_addf(&sb, "%d", 7);
	CHECK(strbuf_error(&sb) == -EFBIG);
	CHECK_STR(strbuf_str(&sb), "12345");
	/* A failed buffer's text is never handed on; detaching forgets the failure. */
	size_t len = 1;
	CHECK(strbuf_detach(&sb, &len) == NULL);
	CHECK(sb.buf == NULL && sb.len == 0 && strbuf_error(&sb) == 0);
	strbuf_adds(&sb, "again");
	CHECK(strbuf_error(&sb) == 0);
	char *p = strbuf_detach(&sb, &len);
	CHECK(p && len == 5 && strcmp(p, "again") == 0);
	free(p);
	strbuf_release(&sb);
}

/* An addf past the maximum adds no part of its text. */
static void test_addf_limit(void)
{
	_cleanup_strbuf_ struct strbuf sb = {.max = 4};
	strbuf_addf(&sb, "%s", "abcde");
	CHECK(strbuf_error(&sb) == -EFBIG);
	CHECK(sb.len == 0);
	CHECK_STR(strbuf_str(&sb), "");
}

/* Reset and setlen leave a whole text, so they forget the failure. */
static void test_forget(void)
{
	_cleanup_strbuf_ struct strbuf sb = {.max = 6};
	strbuf_adds(&sb, "abcd");
	strbuf_adds(&sb, "efg");
	CHECK(strbuf_error(&sb) == -EFBIG);
	strbuf_setlen(&sb, 2);
	CHECK(strbuf_error(&sb) == 0);
	CHECK_STR(strbuf_str(&sb), "ab");
	strbuf_adds(&sb, "cdef");
	CHECK(strbuf_error(&sb) == 0);
	CHECK_STR(strbuf_str(&sb), "abcdef");
	strbuf_setlen(&sb, 99); /* never longer than it is */
	CHECK(sb.len == 6);
	strbuf_adds(&sb, "g");
	CHECK(strbuf_error(&sb) == -EFBIG);
	strbuf_reset(&sb);
	CHECK(strbuf_error(&sb) == 0 && sb.len == 0);
	CHECK_STR(strbuf_str(&sb), "");
	strbuf_adds(&sb, "xyz");
	CHECK(strbuf_error(&sb) == 0);
	CHECK_STR(strbuf_str(&sb), "xyz");
}

/* An empty strbuf detaches as "", not NULL: only a failure gives NULL. */
static void test_detach_empty(void)
{
	struct strbuf sb = STRBUF_INIT;
	size_t len = 1;
	char *p = strbuf_detach(&sb, &len);
	CHECK(p && *p == '\0' && len == 0);
	free(p);
}

int main(void)
{
	test_appends();
	test_sticky_limit();
	test_addf_limit();
	test_forget();
	test_detach_empty();
	return t_done();
}
