/*
 * size.h - sizes and quotas as users write them, and a sandbox's resource
 * limits (docs/limits.md, "Resource limits").
 *
 * One parser for every place a user hands us a size or a CPU count: the
 * command line (--journal-max, --cache-max, --default-memory, ...), the
 * `memory`, `cpus` and `pids` control files, the keys of sandboxes/new
 * and the words of a fork. Sizes are written as Docker, systemd and
 * Kubernetes write them: digits with an optional fraction, then an optional
 * unit K, M, G, T, P or E (either case), "i" and "B" each optional after it:
 * "1073741824", "512M", "512m", "512Mi", "512MiB", "0.5G", "2GB", "64mb",
 * "100B". Every unit is a power of 1024, with or without the "i": "2GB" is
 * 2^31 bytes as Docker and systemd read it, not Kubernetes' 2 * 10^9
 * (docs/control-files.md, "Sizes", says why). CPUs are a decimal count
 * with at most three decimals ("0.5", "2"), kept in thousandths.
 *
 * Pure functions of their arguments: any thread may call them.
 */
#ifndef SNAPFS_SIZE_H
#define SNAPFS_SIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/limits.h"
#include "lib/util.h"

/* A sandbox's limits; 0 in a field is unlimited (bounds in lib/limits.h). */
struct resources {
	int64_t memory_bytes; /* linux.resources.memory.limit */
	int64_t cpu_milli;    /* thousandths of a CPU: the CFS quota over a 100 ms period */
	int64_t pids;	      /* tasks inside: RLIMIT_NPROC, and pids.limit with headroom */
};

/* Which limit a word names. */
enum res_kind {
	RES_MEMORY,
	RES_CPUS,
	RES_PIDS,
};

/* A field of struct resources unset (a spec key not given: the default applies). */
#define RES_UNSET (-1)

/*
 * @s as bytes (0 allowed) into @out: -EINVAL for anything but the forms
 * above (a sign, blanks, an unknown unit, an exponent, trailing bytes, more
 * than RES_WORD_MAX bytes), -ERANGE past INT64_MAX. A fraction is rounded
 * down to whole bytes, as Docker does ("0.001K" is 1).
 */
int size_parse(const char *s, int64_t *out);
/* "0.5" as 500: -EINVAL past three decimals or for anything but digits and one '.'. */
int cpus_parse(const char *s, int64_t *milli);
/* "64" as 64: plain decimal, -ERANGE past INT64_MAX. */
int count_parse(const char *s, int64_t *out);

/* The name a key, a file and info.json give @kind: "memory", "cpus", "pids". */
const char *res_name(enum res_kind kind);
/* @name as a kind: -ENOENT for a name that is none of them. */
int res_kind_parse(const char *name, enum res_kind *out);
/*
 * Parse @value as limit @kind into @r, checked against its bounds (0 is
 * unlimited): -EINVAL with a sentence in @e naming @what (e.g. "sandbox
 * spec", "sandbox web") for a bad value.
 */
int res_parse(enum res_kind kind, const char *value, const char *what, struct resources *r,
	      struct err *e);
/* Is @v a value limit @kind may hold: 0, or within its bounds (lib/limits.h)? */
bool res_value_ok(enum res_kind kind, int64_t v);
/* Field @kind of @r; set it to @v. */
int64_t res_get(const struct resources *r, enum res_kind kind);
void res_set(struct resources *r, enum res_kind kind, int64_t v);
/* Each field of @given that is not RES_UNSET into @r (a spec's or a fork's over the defaults). */
void res_apply(struct resources *r, const struct resources *given);
/* @r's @kind as a file shows it: "536870912", "0.5", "64"; "0" when unlimited. */
void res_format(const struct resources *r, enum res_kind kind, char out[RES_WORD_MAX]);
/*
 * Is @want at least @have in every field (0 is more than any number)? If
 * not, -EINVAL with @e naming the first lower field.
 */
int res_not_lower(const struct resources *want, const struct resources *have, struct err *e);
/*
 * May a caller who is not root ask for @v as limit @kind, where the
 * operator's bound is @max (--max-memory, --max-cpus, --max-pids; 0: no
 * bound)? 0 (unlimited) and anything above @max are root's alone: -EPERM,
 * with a sentence naming @what ("sandbox web") and the option. A bound of
 * 0 lets every value through, 0 included: the operator lifted it.
 */
int res_within(enum res_kind kind, int64_t v, int64_t max, const char *what, struct err *e);
/* res_within() for each field of @given that is set (not RES_UNSET), against @max's. */
int res_given_within(const struct resources *given, const struct resources *max, const char *what,
		     struct err *e);

#endif
