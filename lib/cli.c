/*
 * cli.c - parse a command line against a table of options, and print the
 * table as --help (lib/cli.h).
 */
#include "lib/cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "lib/size.h"
#include "lib/util.h"

/* Enough for any table of ours; cli_parse() refuses a longer one. */
#define CLI_MAX_OPTS 64
/* --help: options at 2, their help at HELP_COL or after the name, lines up to WIDTH. */
#define HELP_COL 18
#define WIDTH 79
/* In a word of wrap()'s, a space that is no place to break the line. */
#define NBSP '\x1f'
/* A long option with no letter: getopt_long's value is this plus its row. */
#define CLI_VAL_BASE 256

/* A seconds value: 0 or more, at most a year; the row's least checked by the caller. */
static int parse_seconds(const char *s, int64_t *out_ms)
{
	char *end = NULL;
	errno = 0;
	unsigned long n = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || n > 366ul * 24 * 3600)
		return -EINVAL;
	*out_ms = (int64_t)n * 1000;
	return 0;
}

/* @arg into @opt's target as its kind says: 0, or -EINVAL once it said why. */
static int store(const struct cli *cli, const struct cli_opt *opt, const char *arg)
{
	int64_t v = 0;
	switch (opt->kind) {
	case CLI_FLAG:
		*(bool *)opt->value = true;
		return 0;
	case CLI_STRING:
		*(const char **)opt->value = arg;
		return 0;
	case CLI_SIZE:
		if (size_parse(arg, &v) < 0 || v == 0)
			return error(EINVAL, "--%s: not a size: %s", opt->name, arg);
		*(int64_t *)opt->value = v;
		return 0;
	case CLI_SECONDS:
		if (parse_seconds(arg, &v) < 0 || v < opt->num * 1000)
			return opt->num
				   ? error(EINVAL, "--%s: not a number of seconds from %lld: %s",
					   opt->name, (long long)opt->num, arg)
				   : error(EINVAL, "--%s: not a number of seconds: %s", opt->name,
					   arg);
		*(int64_t *)opt->value = v;
		return 0;
	case CLI_COUNT:
		if (count_parse(arg, &v) < 0 || v > opt->num)
			return error(EINVAL, "--%s: not a whole number from 0 to %lld: %s",
				     opt->name, (long long)opt->num, arg);
		*(unsigned *)opt->value = (unsigned)v;
		return 0;
	case CLI_HELP:
		cli_usage(cli, stdout);
		exit(0);
	case CLI_VERSION:
		printf("%s %s\n", cli->prog, cli->version);
		exit(0);
	case CLI_CALLBACK:
		return opt->cb(opt, arg) < 0 ? -EINVAL : 0;
	case CLI_END_KIND:
		break;
	}
	return -EINVAL;
}

/* getopt_long's value for row @i. */
static int opt_val(const struct cli_opt *opt, size_t i)
{
	return opt->letter ? opt->letter : CLI_VAL_BASE + (int)i;
}

/*
 * getopt_long's tables from @cli's: @longopts in the rows' order (an
 * abbreviation's "ambiguous" message lists them so), @shorts "fo:h".
 */
static int make_getopt(const struct cli *cli, struct option *longopts, char *shorts)
{
	size_t nlong = 0, nshort = 0;
	for (size_t i = 0; cli->opts[i].kind != CLI_END_KIND; i++) {
		const struct cli_opt *opt = &cli->opts[i];
		if (i == CLI_MAX_OPTS - 1)
			return error(E2BIG, "more than %d options", CLI_MAX_OPTS - 1);
		int has_arg = opt->arg ? required_argument : no_argument;
		if (opt->name)
			longopts[nlong++] =
			    (struct option){opt->name, has_arg, NULL, opt_val(opt, i)};
		if (opt->letter) {
			shorts[nshort++] = opt->letter;
			if (opt->arg)
				shorts[nshort++] = ':';
		}
	}
	longopts[nlong] = (struct option){0};
	shorts[nshort] = '\0';
	return 0;
}

static const struct cli_opt *find_val(const struct cli *cli, int val)
{
	for (size_t i = 0; cli->opts[i].kind != CLI_END_KIND; i++)
		if (opt_val(&cli->opts[i], i) == val)
			return &cli->opts[i];
	return NULL;
}

int cli_parse(const struct cli *cli, int argc, char **argv)
{
	struct option longopts[CLI_MAX_OPTS];
	char shorts[2 * CLI_MAX_OPTS + 1];
	if (make_getopt(cli, longopts, shorts) < 0)
		return -EINVAL;
	optind = 0; /* from the start, also on a second call */
	for (;;) {
		int c = getopt_long(argc, argv, shorts, longopts, NULL);
		if (c == -1)
			return optind;
		const struct cli_opt *opt = find_val(cli, c);
		if (!opt) { /* '?': getopt said why */
			cli_usage(cli, stderr);
			return -EINVAL;
		}
		if (store(cli, opt, optarg) < 0)
			return -EINVAL;
	}
}

/* "-h, --help", "--state DIR", "-o FUSE_OPTS" into @buf; @sep between name and argument. */
static void opt_label(const struct cli_opt *opt, char sep, char *buf, size_t size)
{
	char letter[4] = "";
	if (opt->letter)
		xsnprintf(letter, sizeof(letter), "-%c", opt->letter);
	xsnprintf(buf, size, "%s%s%s%s%.*s%s", letter, opt->letter && opt->name ? ", " : "",
		  opt->name ? "--" : "", opt->name ? opt->name : "", opt->arg ? 1 : 0, &sep,
		  opt->arg ? opt->arg : "");
}

/*
 * @text's words, the first at column @col (the cursor's), lines up to
 * WIDTH, each further line indented by @indent; ends the line.
 */
static void wrap(FILE *out, const char *text, int col, int indent)
{
	bool first = true;
	for (const char *p = text + strspn(text, " "); *p; p += strspn(p, " ")) {
		int n = (int)strcspn(p, " ");
		if (!first && col + 1 + n > WIDTH) {
			fprintf(out, "\n%*s", indent, "");
			col = indent;
		} else if (!first) {
			fputc(' ', out);
			col++;
		}
		for (int i = 0; i < n; i++)
			fputc(p[i] == NBSP ? ' ' : p[i], out);
		col += n;
		p += n;
		first = false;
	}
	fputc('\n', out);
}

/* "usage: snapfs [-f] [--state DIR] ... MOUNTPOINT", then the options used alone. */
static void synopsis(const struct cli *cli, FILE *out)
{
	char words[4096] = "", label[128];
	size_t len = 0;
	for (const struct cli_opt *opt = cli->opts; opt->kind != CLI_END_KIND; opt++) {
		if (opt->alone)
			continue;
		/* The long name where there is one: "[--state DIR]"; else "[-o FUSE_OPTS]". */
		struct cli_opt shown = *opt;
		if (shown.name)
			shown.letter = 0;
		opt_label(&shown, NBSP, label, sizeof(label));
		len += (size_t)xsnprintf(words + len, sizeof(words) - len, "[%s] ", label);
	}
	xsnprintf(words + len, sizeof(words) - len, "%s", cli->operands);
	int col = fprintf(out, "usage: %s ", cli->prog);
	wrap(out, words, col, col);
	bool first = true;
	for (const struct cli_opt *opt = cli->opts; opt->kind != CLI_END_KIND; opt++) {
		if (!opt->alone)
			continue;
		if (first)
			fprintf(out, "%*s%s ", (int)strlen("usage: "), "", cli->prog);
		fprintf(out, "%s--%s", first ? "" : " | ", opt->name);
		first = false;
	}
	if (!first)
		fputc('\n', out);
}

void cli_usage(const struct cli *cli, FILE *out)
{
	char label[128], help[1024];
	synopsis(cli, out);
	fputc('\n', out);
	for (const struct cli_opt *opt = cli->opts; opt->kind != CLI_END_KIND; opt++) {
		opt_label(opt, ' ', label, sizeof(label));
		int col = fprintf(out, "  %s", label);
		col += fprintf(out, "%*s", col + 2 <= HELP_COL ? HELP_COL - col : 2, "");
		snprintf(help, sizeof(help), opt->help, opt->help_args[0], opt->help_args[1]);
		wrap(out, help, col, HELP_COL);
	}
	if (cli->footer)
		fprintf(out, "\n%s", cli->footer);
}
