#include "lib/size.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Most decimals a size's fraction keeps: more would only round below a byte. */
#define FRACTION_DIGITS_MAX 18

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* The digits at *@p as a number into @out, *@p moved past them; -ERANGE past @max. */
static int digits(const char **p, unsigned __int128 max, unsigned __int128 *out, int *ndigits)
{
	*out = 0;
	*ndigits = 0;
	for (; is_digit(**p); (*p)++, (*ndigits)++) {
		*out = *out * 10 + (unsigned)(**p - '0');
		if (*out > max)
			return -ERANGE;
	}
	return 0;
}

/*
 * The unit at *@p (K, M, G, T, P or E in either case, then an optional
 * "i", then an optional "B": "M", "Mi", "MiB", "MB", "mb") as a power of
 * 1024 into @shift, *@p moved past it; a lone "B" or nothing is 0. The
 * letter decides alone: "MB" and "MiB" are both 2^20
 * (docs/control-files.md, "Sizes": why GB is 2^30 here and not 10^9).
 */
static void unit(const char **p, int *shift)
{
	static const char units[] = "kmgtpe";
	const char *u = **p ? strchr(units, **p | 0x20) : NULL;
	*shift = 0;
	if (u) {
		*shift = 10 * (int)(u - units + 1);
		(*p)++;
		if (**p == 'i' || **p == 'I')
			(*p)++;
	}
	if (**p == 'b' || **p == 'B')
		(*p)++;
}

int size_parse(const char *s, int64_t *out)
{
	unsigned __int128 whole, frac = 0, scale = 1;
	int nwhole, nfrac = 0, shift;
	const char *p = s;
	if (strnlen(s, RES_WORD_MAX) == RES_WORD_MAX)
		return -EINVAL;
	int rc = digits(&p, INT64_MAX, &whole, &nwhole);
	if (rc < 0 || nwhole == 0)
		return rc < 0 ? rc : -EINVAL;
	if (*p == '.') {
		p++;
		rc = digits(&p, (unsigned __int128)-1 / 10, &frac, &nfrac);
		if (rc < 0 || nfrac == 0 || nfrac > FRACTION_DIGITS_MAX)
			return -EINVAL;
		for (int i = 0; i < nfrac; i++)
			scale *= 10;
	}
	unit(&p, &shift);
	if (*p)
		return -EINVAL;
	/* whole < 2^63 and shift <= 60: no overflow in 128 bits; nor frac < 10^18 << 60. */
	unsigned __int128 bytes = (whole << shift) + ((frac << shift) / scale);
	if (bytes > INT64_MAX)
		return -ERANGE;
	*out = (int64_t)bytes;
	return 0;
}

int cpus_parse(const char *s, int64_t *milli)
{
	unsigned __int128 whole, frac = 0;
	int nwhole, nfrac = 0;
	const char *p = s;
	if (strnlen(s, RES_WORD_MAX) == RES_WORD_MAX)
		return -EINVAL;
	int rc = digits(&p, INT64_MAX / 1000, &whole, &nwhole);
	if (rc < 0 || nwhole == 0)
		return rc < 0 ? rc : -EINVAL;
	if (*p == '.') {
		p++;
		rc = digits(&p, 999, &frac, &nfrac);
		if (rc < 0 || nfrac == 0 || nfrac > 3)
			return -EINVAL;
		for (int i = nfrac; i < 3; i++)
			frac *= 10;
	}
	if (*p)
		return -EINVAL;
	*milli = (int64_t)(whole * 1000 + frac);
	return 0;
}

int count_parse(const char *s, int64_t *out)
{
	unsigned __int128 n;
	int nd;
	const char *p = s;
	if (strnlen(s, RES_WORD_MAX) == RES_WORD_MAX)
		return -EINVAL;
	int rc = digits(&p, INT64_MAX, &n, &nd);
	if (rc < 0 || nd == 0 || *p)
		return rc < 0 ? rc : -EINVAL;
	*out = (int64_t)n;
	return 0;
}

static const char *const res_names[] = {
    [RES_MEMORY] = "memory",
    [RES_CPUS] = "cpus",
    [RES_PIDS] = "pids",
};

const char *res_name(enum res_kind kind)
{
	return res_names[kind];
}

int res_kind_parse(const char *name, enum res_kind *out)
{
	for (size_t i = 0; i < ARRAY_SIZE(res_names); i++)
		if (strcmp(name, res_names[i]) == 0) {
			*out = (enum res_kind)i;
			return 0;
		}
	return -ENOENT;
}

static int64_t *res_field(struct resources *r, enum res_kind kind)
{
	return kind == RES_MEMORY ? &r->memory_bytes : kind == RES_CPUS ? &r->cpu_milli : &r->pids;
}

int64_t res_get(const struct resources *r, enum res_kind kind)
{
	return kind == RES_MEMORY ? r->memory_bytes : kind == RES_CPUS ? r->cpu_milli : r->pids;
}

void res_set(struct resources *r, enum res_kind kind, int64_t v)
{
	*res_field(r, kind) = v;
}

/* Say why @value is no @kind, quoting at most RES_WORD_MAX bytes of it. */
static int bad_value(enum res_kind kind, const char *value, const char *what, struct err *e)
{
	static const char *const forms[] = {
	    [RES_MEMORY] = "bytes as 512M, 512MiB, 0.5G, 2GB or 1073741824, at least 32M, or 0",
	    [RES_CPUS] = "a CPU count as 0.5 or 2, from 0.01 to 1024, or 0 for unlimited",
	    [RES_PIDS] = "a task count from 32 to 4194304, or 0 for unlimited",
	};
	return err_set(e, EINVAL, "bad %s for %s: must be %s, not '%.*s'", res_names[kind], what,
		       forms[kind], RES_WORD_MAX, value);
}

bool res_value_ok(enum res_kind kind, int64_t v)
{
	bool in_range = kind == RES_MEMORY ? v >= RES_MEMORY_MIN && v <= RES_MEMORY_MAX
			: kind == RES_CPUS ? v >= RES_CPU_MILLI_MIN && v <= RES_CPU_MILLI_MAX
					   : v >= RES_PIDS_MIN && v <= RES_PIDS_MAX;
	return v == 0 || in_range;
}

int res_parse(enum res_kind kind, const char *value, const char *what, struct resources *r,
	      struct err *e)
{
	int64_t v = 0;
	int rc = kind == RES_MEMORY ? size_parse(value, &v)
		 : kind == RES_CPUS ? cpus_parse(value, &v)
				    : count_parse(value, &v);
	if (rc < 0 || !res_value_ok(kind, v))
		return bad_value(kind, value, what, e);
	*res_field(r, kind) = v;
	return 0;
}

void res_apply(struct resources *r, const struct resources *given)
{
	for (enum res_kind k = RES_MEMORY; k <= RES_PIDS; k++)
		if (res_get(given, k) != RES_UNSET)
			res_set(r, k, res_get(given, k));
}

void res_format(const struct resources *r, enum res_kind kind, char out[RES_WORD_MAX])
{
	int64_t v = res_get(r, kind);
	if (kind != RES_CPUS || v % 1000 == 0)
		snprintf(out, RES_WORD_MAX, "%lld", (long long)(kind == RES_CPUS ? v / 1000 : v));
	else
		snprintf(out, RES_WORD_MAX, "%lld.%03lld", (long long)(v / 1000),
			 (long long)(v % 1000));
	/* "0.500" reads as "0.5". */
	size_t n = strlen(out);
	while (kind == RES_CPUS && strchr(out, '.') && out[n - 1] == '0')
		out[--n] = '\0';
}

int res_not_lower(const struct resources *want, const struct resources *have, struct err *e)
{
	for (enum res_kind k = RES_MEMORY; k <= RES_PIDS; k++) {
		int64_t w = res_get(want, k), h = res_get(have, k);
		char hs[RES_WORD_MAX];
		if (h == 0 ? w != 0 : w != 0 && w < h) {
			res_format(have, k, hs);
			return err_set(e, EINVAL,
				       "%s may only be raised from the snapshot's %s, not lowered",
				       res_names[k], h ? hs : "0 (unlimited)");
		}
	}
	return 0;
}

int res_within(enum res_kind kind, int64_t v, int64_t max, const char *what, struct err *e)
{
	char vs[RES_WORD_MAX], ms[RES_WORD_MAX];
	struct resources r = {0};
	if (max == 0 || (v != 0 && v <= max))
		return 0;
	res_set(&r, kind, max);
	res_format(&r, kind, ms);
	if (v == 0)
		return err_set(e, EPERM,
			       "%s of %s may not be 0 (unlimited): only root lifts a limit; a "
			       "user may ask for up to %s (--max-%s)",
			       res_names[kind], what, ms, res_names[kind]);
	res_set(&r, kind, v);
	res_format(&r, kind, vs);
	return err_set(e, EPERM,
		       "%s of %s may not be %s: a user may ask for up to %s (--max-%s); only root "
		       "goes past it",
		       res_names[kind], what, vs, ms, res_names[kind]);
}

int res_given_within(const struct resources *given, const struct resources *max, const char *what,
		     struct err *e)
{
	for (enum res_kind k = RES_MEMORY; k <= RES_PIDS; k++) {
		int64_t v = res_get(given, k);
		int rc = v == RES_UNSET ? 0 : res_within(k, v, res_get(max, k), what, e);
		if (rc < 0)
			return rc;
	}
	return 0;
}
