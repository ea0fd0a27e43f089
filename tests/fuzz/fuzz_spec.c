/*
 * fuzz_spec.c - libFuzzer target for spec_parse() (ops/spec.c): what any
 * user allowed to create a sandbox writes to sandboxes/new (a JSON object
 * or key=value lines), and what the per-sandbox settings files assemble.
 * The input is the spec text, NUL bytes and all, as the daemon passes it.
 *
 * An accepted spec must be what ops.h promises: a valid image name, a
 * one-line entrypoint, env as "KEY=VALUE\n" lines with valid, distinct
 * keys; every field NUL-terminated inside its array. A refused one leaves
 * the spec zeroed and says why.
 */
#include "ops/ops.h"
#include "tests/fuzz/fuzz.h"

static bool terminated(const char *s, size_t cap)
{
	return memchr(s, '\0', cap) != NULL;
}

static bool env_key_ok(const char *k, size_t n)
{
	if (n == 0 ||
	    !(k[0] == '_' || (k[0] >= 'A' && k[0] <= 'Z') || (k[0] >= 'a' && k[0] <= 'z')))
		return false;
	return strspn(k, "_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") >= n;
}

/* Each line "KEY=VALUE\n", keys distinct (quadratic: env is short). */
static void check_env(const char *env)
{
	for (const char *line = env; *line;) {
		const char *nl = strchr(line, '\n');
		const char *eq = strchr(line, '=');
		FUZZ_CHECK(nl && eq && eq < nl);
		size_t klen = (size_t)(eq - line);
		FUZZ_CHECK(env_key_ok(line, klen));
		for (const char *o = env; o < line; o = strchr(o, '\n') + 1)
			FUZZ_CHECK(strncmp(o, line, klen + 1) != 0);
		line = nl + 1;
	}
}

static void check_spec(const struct sandbox_spec *s)
{
	FUZZ_CHECK(terminated(s->image, sizeof(s->image)));
	FUZZ_CHECK(terminated(s->entrypoint, sizeof(s->entrypoint)));
	FUZZ_CHECK(terminated(s->env, sizeof(s->env)));
	size_t n = strlen(s->image);
	FUZZ_CHECK(n > 0 && strspn(s->image, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
					     "0123456789._-") == n);
	FUZZ_CHECK(s->image[0] != '.' && s->image[0] != '_' && s->image[0] != '-');
	FUZZ_CHECK(s->entrypoint[0] && !strchr(s->entrypoint, '\n'));
	check_env(s->env);
}

static bool all_zero(const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sandbox_spec spec; /* 20 KiB: not on the fuzzer's stack */
	struct err e = {0};
	/* A copy of its own size: spec_parse() takes a length, not a C string. */
	char *text = malloc(size ? size : 1);
	if (!text)
		abort();
	if (size)
		memcpy(text, data, size);
	memset(&spec, 0xa5, sizeof(spec));
	int rc = spec_parse(text, size, &spec, &e);
	if (rc == 0) {
		check_spec(&spec);
	} else {
		FUZZ_CHECK(rc == -EINVAL || rc == -ENOMEM);
		FUZZ_CHECK(e.code == -rc && e.msg[0] != '\0');
		FUZZ_CHECK(all_zero(&spec, sizeof(spec)));
	}
	free(text);
	return 0;
}
