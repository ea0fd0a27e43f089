/*
 * fuzz_size.c - libFuzzer target for lib/size.c: what a user writes to the
 * memory, cpus and pids files, the keys of sandboxes/new and the words of
 * a fork. The input is the value's text.
 *
 * An accepted value is what size.h promises: size_parse() never negative,
 * res_parse() within the bounds of lib/limits.h (or 0), and the text
 * res_format() gives back parses to the same value. A refused one is
 * -EINVAL or -ERANGE, and res_parse() says why. size_parse() takes
 * exactly the grammar size.h writes down (checked against a second,
 * plainer reading of it below): no other text, and every text of it short
 * enough, with its unit's "i" and "B" optional and in either case.
 */
#include <ctype.h>
#include <stdbool.h>

#include "lib/size.h"
#include "tests/fuzz/fuzz.h"

/* Does @s read as DIGITS[.DIGITS][K|M|G|T|P|E[i]][B], the unit in either case? */
static bool size_grammar(const char *s, size_t *fraction_digits)
{
	const char *p = s;
	while (isdigit((unsigned char)*p))
		p++;
	if (p == s)
		return false;
	*fraction_digits = 0;
	if (*p == '.') {
		const char *f = ++p;
		while (isdigit((unsigned char)*p))
			p++;
		if (p == f)
			return false;
		*fraction_digits = (size_t)(p - f);
	}
	if (*p && strchr("kmgtpeKMGTPE", *p)) {
		p++;
		if (*p == 'i' || *p == 'I')
			p++;
	}
	if (*p == 'b' || *p == 'B')
		p++;
	return *p == '\0';
}

/* The grammar and size_parse() agree: accepted is in it; in it is accepted unless too long. */
static void check_grammar(const char *s, int rc)
{
	size_t frac = 0;
	bool in = size_grammar(s, &frac);
	FUZZ_CHECK(rc != 0 || in);
	if (in && strlen(s) < RES_WORD_MAX && frac <= 18)
		FUZZ_CHECK(rc == 0 || rc == -ERANGE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_strndup(data, size);
	int64_t v = 0;
	int rc = size_parse(s, &v);
	FUZZ_CHECK(rc == 0 ? v >= 0 : rc == -EINVAL || rc == -ERANGE);
	check_grammar(s, rc);
	rc = cpus_parse(s, &v);
	FUZZ_CHECK(rc == 0 ? v >= 0 : rc == -EINVAL || rc == -ERANGE);
	for (enum res_kind k = RES_MEMORY; k <= RES_PIDS; k++) {
		struct resources r = {0}, back = {0};
		struct err e = {0};
		char text[RES_WORD_MAX];
		rc = res_parse(k, s, "fuzz", &r, &e);
		if (rc < 0) {
			FUZZ_CHECK(rc == -EINVAL && e.code == EINVAL && e.msg[0]);
			continue;
		}
		FUZZ_CHECK(res_value_ok(k, res_get(&r, k)));
		res_format(&r, k, text);
		FUZZ_CHECK(res_parse(k, text, "fuzz", &back, &e) == 0);
		FUZZ_CHECK(res_get(&back, k) == res_get(&r, k));
	}
	free(s);
	return 0;
}
