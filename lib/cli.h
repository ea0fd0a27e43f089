/*
 * cli.h - a program's command-line options as one table, which both parses
 * them (getopt_long, its struct option array and optstring made from the
 * table) and prints --help, so the two cannot drift apart (after git's
 * parse-options.h). tests/integration/test_options.sh checks README.md,
 * docs/design.md and docs/man/snapfs.8.scd against the --help it prints.
 *
 * A row: the long name and/or short letter, the argument's name (NULL: it
 * takes none), the help sentence, and how the argument is stored (the
 * kind, and where). Rows are written with the CLI_* macros below, whose
 * pointer checks make a wrong target a compile error. The table ends with
 * {CLI_END}. A help sentence is a printf format whose %d take the row's
 * help_args (a default from a #define), so a literal percent sign is %%.
 *
 * The caller owns the table and every target; nothing here keeps state
 * between calls but getopt's own globals (optind, optarg): one thread, at
 * start-up.
 */
#ifndef SNAPFS_CLI_H
#define SNAPFS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum cli_kind {
	CLI_END_KIND, /* the row that ends a table */
	CLI_FLAG,     /* sets a bool to true */
	CLI_STRING,   /* keeps the argument: a const char * (argv's own string) */
	CLI_SIZE,     /* a size from 1 byte, "1073741824", "512M", "20G" (lib/size.h): int64_t */
	CLI_SECONDS,  /* whole seconds from @min to a year: int64_t milliseconds */
	CLI_COUNT,    /* a whole number from 0 to @max: unsigned */
	CLI_HELP,     /* prints the usage on stdout and exits 0 */
	CLI_VERSION,  /* prints "PROG VERSION" on stdout and exits 0 */
	CLI_CALLBACK, /* the row's own parser */
};

struct cli_opt;
/* A CLI_CALLBACK's parser: 0, or -EINVAL once it has said why (error()). */
typedef int (*cli_cb)(const struct cli_opt *opt, const char *arg);

struct cli_opt {
	const char *name; /* the long name, without "--"; NULL for a letter only */
	char letter;	  /* the short option; 0 for none */
	const char *arg;  /* the argument's name in --help; NULL: takes none */
	enum cli_kind kind;
	void *value;	  /* where the value goes, its type as the kind says */
	int64_t num;	  /* CLI_SECONDS: the least; CLI_COUNT: the most; a callback's own */
	cli_cb cb;	  /* CLI_CALLBACK's parser */
	const char *help; /* a printf format: its %d take help_args */
	int help_args[2];
	bool alone; /* used alone (--help, --version): on the usage's second line */
};

/*
 * A row's fields, written inside the row's braces, where more may follow:
 * {CLI_SECONDS("exec-timeout", 1, &o->exec_ms, "... (default %d)"), .help_args = {3600}}.
 * Each checks its target's type at compile time.
 */
#define CLI_PTR_(T, p) ((void *)(1 ? (p) : (T *)0))
#define CLI_FLAG(l, n, p, h)                                                                       \
	.name = (n), .letter = (l), .kind = CLI_FLAG, .value = CLI_PTR_(bool, p), .help = (h)
#define CLI_STRING(l, n, a, p, h)                                                                  \
	.name = (n), .letter = (l), .arg = (a), .kind = CLI_STRING,                                \
	.value = CLI_PTR_(const char *, p), .help = (h)
#define CLI_SIZE(n, a, p, h)                                                                       \
	.name = (n), .arg = (a), .kind = CLI_SIZE, .value = CLI_PTR_(int64_t, p), .help = (h)
#define CLI_SECONDS(n, min, p, h)                                                                  \
	.name = (n), .arg = "SECONDS", .kind = CLI_SECONDS, .value = CLI_PTR_(int64_t, p),         \
	.num = (min), .help = (h)
#define CLI_COUNT(n, max, p, h)                                                                    \
	.name = (n), .arg = "N", .kind = CLI_COUNT, .value = CLI_PTR_(unsigned, p), .num = (max),  \
	.help = (h)
#define CLI_HELP()                                                                                 \
	.name = "help", .letter = 'h', .kind = CLI_HELP, .help = "print this and exit",            \
	.alone = true
#define CLI_VERSION()                                                                              \
	.name = "version", .kind = CLI_VERSION, .help = "print the version and exit", .alone = true
/* @p: the callback's target, any type; the row's .num, if set, its own. */
#define CLI_CALLBACK(l, n, a, fn, p, h)                                                            \
	.name = (n), .letter = (l), .arg = (a), .kind = CLI_CALLBACK, .value = (p), .cb = (fn),    \
	.help = (h)
#define CLI_END .kind = CLI_END_KIND

/* What --help says around the table: "usage: PROG [options] OPERANDS", then the footer. */
struct cli {
	const char *prog;     /* "snapfs" */
	const char *operands; /* "MOUNTPOINT" */
	const char *version;  /* what --version prints after PROG */
	const char *footer;   /* printed after the options; NULL: none */
	const struct cli_opt *opts;
};

/*
 * Parse @argv's options into the table's targets, in the order given: the
 * index of the first operand, or -EINVAL once it has said why (a bad value,
 * or getopt's word and the usage on stderr for an unknown option or a
 * missing argument). CLI_HELP and CLI_VERSION exit.
 */
int cli_parse(const struct cli *cli, int argc, char **argv);
/* The usage: the synopsis, each option with its help, the footer. */
void cli_usage(const struct cli *cli, FILE *out);

#endif
