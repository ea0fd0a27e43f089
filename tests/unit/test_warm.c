/* ops/warm_plan.c: the warm pools' arithmetic (the `warm` text, --warm-max, the backoff). */
#include "ops/warm_plan.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/t.h"

static int want_of(const char *s)
{
	unsigned v = 999;
	struct err e = {0};
	return warm_want_parse(s, &v, &e) == 0 ? (int)v : -1;
}

static void test_want(void)
{
	CHECK(want_of("0") == 0);
	CHECK(want_of("3") == 3);
	CHECK(want_of("3\n") == 3);
	CHECK(want_of("64") == 64);
	CHECK(want_of("65") == -1);
	CHECK(want_of("-1") == -1);
	CHECK(want_of("") == -1);
	CHECK(want_of("\n") == -1);
	CHECK(want_of("1x") == -1);
	CHECK(want_of("100") == -1);
	CHECK(want_of(" 3") == -1);
	struct err e = {0};
	unsigned v;
	CHECK(warm_want_parse("65", &v, &e) == -EINVAL);
	CHECK(strstr(e.msg, "0 to 64") != NULL);
}

static void test_max(void)
{
	struct warm_max m;
	struct err e = {0};
	CHECK(warm_max_parse("16", &m, &e) == 0 && !m.bytes && m.value == 16);
	CHECK(warm_max_parse("0", &m, &e) == 0 && !m.bytes && m.value == 0);
	CHECK(warm_max_parse("8G", &m, &e) == 0 && m.bytes && m.value == 8LL << 30);
	CHECK(warm_max_parse("512M", &m, &e) == 0 && m.bytes && m.value == 512LL << 20);
	CHECK(warm_max_parse("x", &m, &e) == -EINVAL);
	CHECK(warm_max_parse("", &m, &e) == -EINVAL);
	CHECK(warm_max_parse("-3", &m, &e) == -EINVAL);
}

static void test_allows(void)
{
	struct warm_max count = {.bytes = false, .value = 3};
	CHECK(warm_max_allows(&count, 0, 0, 1 << 20));
	CHECK(warm_max_allows(&count, 2, 0, 1 << 20));
	CHECK(!warm_max_allows(&count, 3, 0, 1 << 20));
	struct warm_max none = {.bytes = false, .value = 0};
	CHECK(!warm_max_allows(&none, 0, 0, 0));
	struct warm_max bytes = {.bytes = true, .value = 100};
	CHECK(warm_max_allows(&bytes, 5, 60, 40));
	CHECK(!warm_max_allows(&bytes, 5, 60, 41));
	CHECK(!warm_max_allows(&bytes, 5, 101, 0));
	CHECK(!warm_max_allows(&bytes, 0, 0, -1));
	struct warm_max huge = {.bytes = true, .value = INT64_MAX};
	CHECK(warm_max_allows(&huge, 0, INT64_MAX - 1, 1));
	CHECK(!warm_max_allows(&huge, 0, INT64_MAX - 1, 2));
}

static void test_backoff(void)
{
	CHECK(warm_backoff_next(0) == WARM_BACKOFF_FIRST_MS);
	CHECK(warm_backoff_next(5000) == 10000);
	CHECK(warm_backoff_next(10000) == 20000);
	int64_t b = 0;
	for (int i = 0; i < 20; i++)
		b = warm_backoff_next(b);
	CHECK(b == WARM_BACKOFF_MAX_MS);
	CHECK(warm_backoff_next(WARM_BACKOFF_MAX_MS) == WARM_BACKOFF_MAX_MS);
	CHECK(warm_backoff_next(160000) == WARM_BACKOFF_MAX_MS);
}

int main(void)
{
	test_want();
	test_max();
	test_allows();
	test_backoff();
	return t_done();
}
