/* lib/size.c: sizes, CPU counts and the limits of a sandbox as users write them. */
#include "lib/size.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/t.h"

static int64_t size_of(const char *s)
{
	int64_t v = -42;
	return size_parse(s, &v) == 0 ? v : -1;
}

static int64_t milli_of(const char *s)
{
	int64_t v = -42;
	return cpus_parse(s, &v) == 0 ? v : -1;
}

/* Every form Docker, systemd and Kubernetes take for a memory size; each unit is a power of 1024.
 */
static const struct {
	const char *text;
	int64_t bytes;
} sizes[] = {
    {"0", 0},
    {"1073741824", 1073741824},
    {"100b", 100},
    {"100B", 100},
    {"1k", 1024},
    {"1K", 1024},
    {"1Ki", 1024},
    {"1KiB", 1024},
    {"1kb", 1024},
    {"1KB", 1024},
    {"512M", 512LL << 20},
    {"512m", 512LL << 20},
    {"512Mi", 512LL << 20},
    {"512MiB", 512LL << 20},
    {"512mib", 512LL << 20},
    {"512MB", 512LL << 20},
    {"64MB", 64LL << 20},
    {"2G", 2LL << 30},
    {"2g", 2LL << 30},
    {"1g", 1LL << 30},
    {"2GB", 2LL << 30}, /* not 2 * 10^9: docs/control-files.md, "Sizes" */
    {"2Gi", 2LL << 30},
    {"2GiB", 2LL << 30},
    {"1T", 1LL << 40},
    {"1Ti", 1LL << 40},
    {"1TB", 1LL << 40},
    {"1P", 1LL << 50},
    {"1PiB", 1LL << 50},
    {"1E", 1LL << 60},
    {"7Ei", 7LL << 60},
    {"0.5G", 1LL << 29},
    {"0.5Gi", 1LL << 29},
    {"1.5G", 3LL << 29},
    {"1.5GB", 3LL << 29},
    {"0.5k", 512},
    {"0.25KiB", 256},
    {"0.001k", 1}, /* 1.024 bytes: a fraction of a byte is rounded down */
    {"1.0000001", 1},
    {"0.0000001M", 0},
    {"9223372036854775807", INT64_MAX},
    {"007M", 7LL << 20},
};

static void test_sizes(void)
{
	int64_t v;
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++)
		CHECK_MSG(size_of(sizes[i].text) == sizes[i].bytes,
			  "size '%s': want %lld, got %lld", sizes[i].text,
			  (long long)sizes[i].bytes, (long long)size_of(sizes[i].text));
	const char *too_big[] = {"9223372036854775808",	  "8E",	 "8EiB", "8388608T", "8192P",
				 "99999999999999999999G", "8.5E"};
	for (size_t i = 0; i < ARRAY_SIZE(too_big); i++)
		CHECK_MSG(size_parse(too_big[i], &v) == -ERANGE, "size '%s' is too big",
			  too_big[i]);
	const char *bad[] = {"",      "-1",    "+1",	" 1",
			     "1 ",    "1X",    "M",	"Mi",
			     "1.",    ".5",    "1..5",	"1MBB",
			     "1MiBB", "1iB",   "1i",	"1Bi",
			     "1M B",  "1 MiB", "0x10",	"1e9",
			     "1,5",   "1Z",    "1Y",	"1KiBi",
			     "1.5.5", "1M\n",  "-0.5G", "1GiB ",
			     "\t1G",  "1m1",   "1Gb1",	"12345678901234567890123456789012"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		CHECK_MSG(size_parse(bad[i], &v) == -EINVAL, "size '%s' is refused", bad[i]);
	/* What a memory file reads back is a size again, the same one. */
	struct resources r = {.memory_bytes = 3LL << 29}, back = {0};
	struct err e = {0};
	char text[RES_WORD_MAX];
	res_format(&r, RES_MEMORY, text);
	CHECK(res_parse(RES_MEMORY, text, "x", &back, &e) == 0 && back.memory_bytes == 3LL << 29);
	/* A refusal says what a size looks like, Mi included. */
	CHECK(res_parse(RES_MEMORY, "512XB", "sandbox web", &back, &e) == -EINVAL);
	CHECK_MSG(strstr(e.msg, "512MiB") && strstr(e.msg, "'512XB'"), "%s", e.msg);
}

static void test_cpus(void)
{
	int64_t v;
	CHECK(milli_of("0") == 0);
	CHECK(milli_of("0.5") == 500);
	CHECK(milli_of("1.5") == 1500);
	CHECK(milli_of("2") == 2000);
	CHECK(milli_of("0.01") == 10);
	CHECK(milli_of("0.125") == 125);
	CHECK(milli_of("0.0001") == -1);
	CHECK(cpus_parse("9223372036854775807", &v) == -ERANGE);
	const char *bad[] = {"", "abc", "-1", "1.", ".5", "1/2", "0.5 ", "1e3", "2c"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		CHECK_MSG(cpus_parse(bad[i], &v) < 0, "cpus '%s' is refused", bad[i]);
	CHECK(count_parse("64", &v) == 0 && v == 64);
	CHECK(count_parse("6 4", &v) == -EINVAL);
	CHECK(count_parse("99999999999999999999", &v) == -ERANGE);
}

static void test_limits(void)
{
	struct resources r = {0};
	struct err e = {0};
	char text[RES_WORD_MAX];
	enum res_kind k;
	CHECK(res_parse(RES_MEMORY, "128M", "sandbox web", &r, &e) == 0);
	CHECK(r.memory_bytes == 128LL << 20);
	CHECK(res_parse(RES_MEMORY, "0", "sandbox web", &r, &e) == 0 && r.memory_bytes == 0);
	CHECK(res_parse(RES_MEMORY, "1M", "sandbox web", &r, &e) == -EINVAL);
	CHECK(strstr(e.msg, "bad memory for sandbox web") && strstr(e.msg, "'1M'"));
	CHECK(res_parse(RES_MEMORY, "-1", "sandbox spec", &r, &e) == -EINVAL);
	/* Past 1 PiB a limit no longer reads back exactly from config.json's JSON number. */
	CHECK(res_parse(RES_MEMORY, "9223372036854775807", "x", &r, &e) == -EINVAL);
	CHECK(res_parse(RES_MEMORY, "1025T", "x", &r, &e) == -EINVAL);
	CHECK(res_parse(RES_MEMORY, "1024T", "x", &r, &e) == 0 && r.memory_bytes == 1LL << 50);
	r.memory_bytes = 0;
	CHECK(res_parse(RES_CPUS, "abc", "sandbox spec", &r, &e) == -EINVAL);
	CHECK(strstr(e.msg, "bad cpus for sandbox spec") != NULL);
	CHECK(res_parse(RES_CPUS, "0.005", "x", &r, &e) == -EINVAL);
	CHECK(res_parse(RES_CPUS, "1025", "x", &r, &e) == -EINVAL);
	CHECK(res_parse(RES_CPUS, "0.5", "x", &r, &e) == 0 && r.cpu_milli == 500);
	CHECK(res_parse(RES_PIDS, "31", "x", &r, &e) == -EINVAL);
	CHECK(res_parse(RES_PIDS, "64", "x", &r, &e) == 0 && r.pids == 64);
	CHECK(r.memory_bytes == 0); /* a refused value leaves the field */
	res_format(&r, RES_CPUS, text);
	CHECK_STR(text, "0.5");
	r.cpu_milli = 2000;
	res_format(&r, RES_CPUS, text);
	CHECK_STR(text, "2");
	r.cpu_milli = 1250;
	res_format(&r, RES_CPUS, text);
	CHECK_STR(text, "1.25");
	res_format(&r, RES_PIDS, text);
	CHECK_STR(text, "64");
	CHECK(res_kind_parse("memory", &k) == 0 && k == RES_MEMORY);
	CHECK(res_kind_parse("pids", &k) == 0 && k == RES_PIDS);
	CHECK(res_kind_parse("gpu", &k) == -ENOENT);
	CHECK_STR(res_name(RES_CPUS), "cpus");

	struct resources over = {1, 2, 3};
	res_apply(&over, &(struct resources){RES_UNSET, 750, RES_UNSET});
	CHECK(over.memory_bytes == 1 && over.cpu_milli == 750 && over.pids == 3);

	/* Raising: every field at least the snapshot's; 0 (unlimited) is more than any. */
	struct resources have = {.memory_bytes = 256LL << 20, .cpu_milli = 1000, .pids = 128};
	struct resources want = have;
	CHECK(res_not_lower(&want, &have, &e) == 0);
	want.memory_bytes = 512LL << 20;
	CHECK(res_not_lower(&want, &have, &e) == 0);
	want.memory_bytes = 0;
	CHECK(res_not_lower(&want, &have, &e) == 0);
	want.cpu_milli = 500;
	CHECK(res_not_lower(&want, &have, &e) == -EINVAL);
	CHECK(strstr(e.msg, "cpus may only be raised from the snapshot's 1") != NULL);
	have.cpu_milli = 0;
	CHECK(res_not_lower(&want, &have, &e) == -EINVAL);
	CHECK(strstr(e.msg, "unlimited") != NULL);
}

/* What a user who is not root may ask for: within --max-*, never 0; a bound of 0 is none. */
static void test_within(void)
{
	struct err e = {0};
	const int64_t g2 = 2LL << 30;
	CHECK(res_within(RES_MEMORY, 512LL << 20, g2, "sandbox web", &e) == 0);
	CHECK(res_within(RES_MEMORY, g2, g2, "sandbox web", &e) == 0); /* the bound itself */
	CHECK(res_within(RES_MEMORY, g2 + 1, g2, "sandbox web", &e) == -EPERM);
	CHECK(strstr(e.msg, "memory of sandbox web may not be 2147483649") &&
	      strstr(e.msg, "up to 2147483648 (--max-memory)") && strstr(e.msg, "only root"));
	e = (struct err){0};
	CHECK(res_within(RES_MEMORY, RES_MEMORY_MAX, g2, "sandbox web", &e) == -EPERM);
	CHECK(e.code == EPERM);
	CHECK(res_within(RES_MEMORY, 0, g2, "sandbox web", &e) == -EPERM);
	CHECK(strstr(e.msg, "memory of sandbox web may not be 0 (unlimited)") &&
	      strstr(e.msg, "only root lifts a limit"));
	CHECK(res_within(RES_CPUS, 0, 2000, "sandbox spec", &e) == -EPERM);
	CHECK(strstr(e.msg, "cpus of sandbox spec may not be 0") && strstr(e.msg, "--max-cpus"));
	CHECK(res_within(RES_CPUS, 2500, 2000, "x", &e) == -EPERM);
	CHECK(strstr(e.msg, "may not be 2.5: a user may ask for up to 2 (--max-cpus)") != NULL);
	CHECK(res_within(RES_CPUS, 1500, 2000, "x", &e) == 0);
	CHECK(res_within(RES_PIDS, 0, 1024, "x", &e) == -EPERM);
	CHECK(res_within(RES_PIDS, 1025, 1024, "x", &e) == -EPERM);
	CHECK(strstr(e.msg, "--max-pids") != NULL);
	CHECK(res_within(RES_PIDS, 64, 1024, "x", &e) == 0);
	/* A bound of 0: the operator lifted it, unlimited included. */
	CHECK(res_within(RES_MEMORY, 0, 0, "x", &e) == 0);
	CHECK(res_within(RES_MEMORY, RES_MEMORY_MAX, 0, "x", &e) == 0);

	/* Only the fields given are checked: RES_UNSET is the default's (or the snapshot's). */
	struct resources max = {g2, 2000, 1024};
	CHECK(res_given_within(&(struct resources){RES_UNSET, RES_UNSET, RES_UNSET}, &max, "x",
			       &e) == 0);
	CHECK(res_given_within(&(struct resources){g2, 1000, RES_UNSET}, &max, "x", &e) == 0);
	CHECK(res_given_within(&(struct resources){RES_UNSET, RES_UNSET, 0}, &max, "fork", &e) ==
	      -EPERM);
	CHECK(strstr(e.msg, "pids of fork may not be 0") != NULL);
	CHECK(res_given_within(&(struct resources){RES_MEMORY_MAX, RES_UNSET, RES_UNSET}, &max,
			       "fork", &e) == -EPERM);
	CHECK(strstr(e.msg, "memory of fork may not be 1125899906842624") != NULL);
}

int main(void)
{
	test_sizes();
	test_cpus();
	test_limits();
	test_within();
	return t_done();
}
