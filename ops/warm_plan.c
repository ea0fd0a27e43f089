/* warm_plan.c - the warm pools' arithmetic (warm_plan.h). */
#include "ops/warm_plan.h"

#include <errno.h>
#include <string.h>

#include "lib/size.h"

int warm_want_parse(const char *text, unsigned *want, struct err *e)
{
	size_t n = strlen(text);
	if (n && text[n - 1] == '\n')
		n--;
	unsigned v = 0;
	bool ok = n > 0 && n <= 2;
	for (size_t i = 0; ok && i < n; i++) {
		ok = text[i] >= '0' && text[i] <= '9';
		v = v * 10 + (unsigned)(text[i] - '0');
	}
	if (!ok || v > WARM_WANT_MAX)
		return err_set(e, EINVAL, "warm takes a whole number from 0 to %d, not '%.*s'",
			       WARM_WANT_MAX, (int)(n < 32 ? n : 32), text);
	*want = v;
	return 0;
}

int warm_max_parse(const char *text, struct warm_max *out, struct err *e)
{
	size_t digits = strspn(text, "0123456789");
	bool count = digits > 0 && text[digits] == '\0';
	int64_t v = 0;
	int rc = count ? count_parse(text, &v) : size_parse(text, &v);
	if (rc < 0 || v < 0)
		return err_set(e, EINVAL,
			       "--warm-max takes a count of sandboxes (16) or a memory size (8G), "
			       "not '%.32s'",
			       text);
	*out = (struct warm_max){.bytes = !count, .value = v};
	return 0;
}

bool warm_max_allows(const struct warm_max *max, unsigned members, int64_t bytes,
		     int64_t next_bytes)
{
	if (!max->bytes)
		return (int64_t)members + 1 <= max->value;
	return next_bytes >= 0 && bytes <= max->value && next_bytes <= max->value - bytes;
}

int64_t warm_backoff_next(int64_t prev_ms)
{
	if (prev_ms <= 0)
		return WARM_BACKOFF_FIRST_MS;
	return prev_ms >= WARM_BACKOFF_MAX_MS / 2 ? WARM_BACKOFF_MAX_MS : prev_ms * 2;
}
