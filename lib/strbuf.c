#include "strbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t strbuf_limit(const struct strbuf *sb)
{
	return sb->max ? sb->max : STRBUF_MAX;
}

/* Keep the first failure: later appends add nothing (strbuf.h). */
static int strbuf_fail(struct strbuf *sb, int rc)
{
	sb->err = rc;
	return rc;
}

static int strbuf_grow(struct strbuf *sb, size_t extra)
{
	size_t need = sb->len + extra + 1;
	if (extra > strbuf_limit(sb) || sb->len + extra > strbuf_limit(sb))
		return strbuf_fail(sb, -EFBIG);
	if (need <= sb->alloc)
		return 0;
	size_t alloc = sb->alloc ? sb->alloc : 64;
	while (alloc < need)
		alloc *= 2;
	char *p = realloc(sb->buf, alloc);
	if (!p)
		return strbuf_fail(sb, -ENOMEM);
	sb->buf = p;
	sb->alloc = alloc;
	return 0;
}

void strbuf_add(struct strbuf *sb, const void *data, size_t len)
{
	if (sb->err || strbuf_grow(sb, len) < 0)
		return;
	if (len)
		memcpy(sb->buf + sb->len, data, len);
	sb->len += len;
	sb->buf[sb->len] = '\0';
}

void strbuf_adds(struct strbuf *sb, const char *s)
{
	strbuf_add(sb, s, strlen(s));
}

void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap)
{
	if (sb->err)
		return;
	va_list cp;
	va_copy(cp, ap);
	int n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0) {
		strbuf_fail(sb, -EINVAL);
		return;
	}
	if (strbuf_grow(sb, (size_t)n) < 0)
		return;
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	sb->len += (size_t)n;
}

void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(sb, fmt, ap);
	va_end(ap);
}

int strbuf_error(const struct strbuf *sb)
{
	return sb->err;
}

void strbuf_reset(struct strbuf *sb)
{
	strbuf_setlen(sb, 0);
}

void strbuf_setlen(struct strbuf *sb, size_t len)
{
	if (len < sb->len)
		sb->len = len;
	if (sb->buf)
		sb->buf[sb->len] = '\0';
	sb->err = 0;
}

void strbuf_release(struct strbuf *sb)
{
	free(sb->buf);
	sb->buf = NULL;
	sb->len = 0;
	sb->alloc = 0;
	sb->err = 0;
}

void strbuf_releasep(struct strbuf *sb)
{
	strbuf_release(sb);
}

char *strbuf_detach(struct strbuf *sb, size_t *len)
{
	if (sb->err) {
		strbuf_release(sb);
		return NULL;
	}
	char *p = sb->buf;
	if (!p)
		p = calloc(1, 1);
	if (len)
		*len = sb->len;
	sb->buf = NULL;
	sb->len = 0;
	sb->alloc = 0;
	return p;
}

void strbuf_each_line(struct strbuf *sb, void (*fn)(const char *line, void *arg), void *arg)
{
	char *save = NULL;
	if (!sb->len)
		return;
	for (char *line = strtok_r(sb->buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		fn(line, arg);
}

const char *strbuf_str(const struct strbuf *sb)
{
	return sb->buf ? sb->buf : "";
}
