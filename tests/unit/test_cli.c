/* lib/cli.c: one table of options parses a command line and prints --help. */
#include "lib/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"
#include "tests/unit/t.h"

struct vals {
	bool flag;
	const char *dir;
	int64_t size, grace_ms, timeout_ms;
	unsigned count;
	int calls;
	const char *last;
};

static int record(const struct cli_opt *opt, const char *arg)
{
	struct vals *v = opt->value;
	if (strcmp(arg, "bad") == 0)
		return error(EINVAL, "-%c: bad", opt->letter);
	v->calls++;
	v->last = arg;
	return 0;
}

/* The table a test parses with: each kind once. */
#define TABLE(v)                                                                                   \
	const struct cli_opt opts[] = {                                                            \
	    {CLI_FLAG('f', NULL, &(v)->flag, "a flag")},                                           \
	    {CLI_STRING(0, "dir", "DIR", &(v)->dir, "a string")},                                  \
	    {CLI_SIZE("size", "SIZE", &(v)->size, "a size")},                                      \
	    {CLI_SECONDS("grace", 0, &(v)->grace_ms, "seconds from 0")},                           \
	    {CLI_SECONDS("timeout", 1, &(v)->timeout_ms, "seconds from 1, default %d"),            \
	     .help_args = {42}},                                                                   \
	    {CLI_COUNT("count", 10, &(v)->count, "a count")},                                      \
	    {CLI_CALLBACK('x', NULL, "WORD", record, (v), "a callback")},                          \
	    {CLI_HELP()},                                                                          \
	    {CLI_VERSION()},                                                                       \
	    {CLI_END},                                                                             \
	};                                                                                         \
	const struct cli cli = {.prog = "prog",                                                    \
				.operands = "OPERAND",                                             \
				.version = "1.2",                                                  \
				.footer = "the end\n",                                             \
				.opts = opts}

/* Parse @args (NULL-terminated, after the program's name) into @v: cli_parse's return. */
static int parse(struct vals *v, const char **args)
{
	TABLE(v);
	char *argv[16] = {"prog"};
	int argc = 1;
	for (; args[argc - 1]; argc++)
		argv[argc] = (char *)args[argc - 1];
	return cli_parse(&cli, argc, argv);
}

#define PARSE(v, ...) parse((v), (const char *[]){__VA_ARGS__, NULL})

static void test_kinds(void)
{
	struct vals v = {0};
	int first = PARSE(&v, "-f", "--dir", "/d", "--size", "2G", "--grace=0", "--timeout", "5",
			  "--count", "10", "-x", "a", "-xb2", "op");
	CHECK(first == 14);
	CHECK(v.flag);
	CHECK_STR(v.dir, "/d");
	CHECK(v.size == 2LL << 30);
	CHECK(v.grace_ms == 0);
	CHECK(v.timeout_ms == 5000);
	CHECK(v.count == 10);
	CHECK(v.calls == 2);
	CHECK_STR(v.last, "b2");
	/* An abbreviation that names one option is that option, as getopt_long has it. */
	v = (struct vals){0};
	CHECK(PARSE(&v, "--ti", "7", "op") == 3 && v.timeout_ms == 7000);
	/* A size option takes every unit a file does (lib/size.h): one parser. */
	v = (struct vals){0};
	CHECK(PARSE(&v, "--size", "512MiB", "op") == 3 && v.size == 512LL << 20);
	CHECK(PARSE(&v, "--size=0.5GB", "op") == 2 && v.size == 1LL << 29);
	/* No operand: the index past the options, for the caller to judge. */
	v = (struct vals){0};
	CHECK(PARSE(&v, "-f") == 2 && v.flag);
}

static void test_refusals(void)
{
	struct vals v = {0};
	CHECK(PARSE(&v, "--size", "0", "op") == -EINVAL); /* a size is from 1 byte */
	CHECK(PARSE(&v, "--size", "x", "op") == -EINVAL);
	CHECK(PARSE(&v, "--grace", "-1", "op") == -EINVAL);
	CHECK(PARSE(&v, "--grace", "99999999999", "op") == -EINVAL); /* past a year */
	CHECK(PARSE(&v, "--timeout", "0", "op") == -EINVAL);	     /* from 1 */
	CHECK(PARSE(&v, "--count", "11", "op") == -EINVAL);	     /* to 10 */
	CHECK(PARSE(&v, "--count", "-1", "op") == -EINVAL);
	CHECK(PARSE(&v, "-x", "bad", "op") == -EINVAL); /* the callback's refusal */
	CHECK(PARSE(&v, "--unknown", "op") == -EINVAL);
	CHECK(PARSE(&v, "--dir") == -EINVAL); /* its argument missing */
	CHECK(v.size == 0 && v.grace_ms == 0 && v.timeout_ms == 0 && v.count == 0 && v.calls == 0);
	/* The options before a refused one were stored. */
	CHECK(PARSE(&v, "--dir", "/a", "--count", "99", "op") == -EINVAL);
	CHECK_STR(v.dir, "/a");
}

static void test_usage(void)
{
	struct vals v = {0};
	TABLE(&v);
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	if (!CHECK(out))
		return;
	cli_usage(&cli, out);
	fclose(out);
	const char *start = "usage: prog [-f] [--dir DIR] [--size SIZE]";
	CHECK(strncmp(text, start, strlen(start)) == 0);
	CHECK(strstr(text, "[-x WORD] OPERAND\n       prog --help | --version\n"));
	CHECK(strstr(text, "\n  -f              a flag\n"));
	CHECK(strstr(text, "\n  --dir DIR       a string\n"));
	CHECK(strstr(text, "\n  --timeout SECONDS  seconds from 1, default 42\n"));
	CHECK(strstr(text, "\n  -x WORD         a callback\n"));
	CHECK(strstr(text, "\n  -h, --help      print this and exit\n"));
	CHECK(strstr(text, "\n  --version       print the version and exit\n\nthe end\n"));
	for (char *line = text; line && *line;
	     line = strchr(line, '\n'), line = line ? line + 1 : 0)
		CHECK_MSG(strcspn(line, "\n") <= 79, "a line of the usage over 79 columns: %.*s",
			  (int)strcspn(line, "\n"), line);
	free(text);
}

/* A long help sentence wraps at 79 columns, under the help column; a synopsis word never splits. */
static void test_wrap(void)
{
	bool f = false;
	const char *s = NULL;
	const struct cli_opt opts[] = {
	    {CLI_FLAG('f', NULL, &f,
		      "one two three four five six seven eight nine ten eleven twelve thirteen "
		      "fourteen fifteen sixteen")},
	    {CLI_STRING(0, "a-rather-long-option-name", "ARGUMENT", &s, "x")},
	    {CLI_STRING(0, "another-rather-long-option", "ARGUMENT", &s, "y")},
	    {CLI_END},
	};
	const struct cli cli = {.prog = "prog", .operands = "OPERAND", .opts = opts};
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	if (!CHECK(out))
		return;
	cli_usage(&cli, out);
	fclose(out);
	CHECK_STR(text,
		  "usage: prog [-f] [--a-rather-long-option-name ARGUMENT]\n"
		  "            [--another-rather-long-option ARGUMENT] OPERAND\n"
		  "\n"
		  "  -f              one two three four five six seven eight nine ten eleven\n"
		  "                  twelve thirteen fourteen fifteen sixteen\n"
		  "  --a-rather-long-option-name ARGUMENT  x\n"
		  "  --another-rather-long-option ARGUMENT  y\n");
	free(text);
}

int main(void)
{
	test_kinds();
	test_refusals();
	test_usage();
	test_wrap();
	return t_done();
}
