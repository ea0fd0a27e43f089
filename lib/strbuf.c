#include "strbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t strbuf_limit(const struct strbuf *sb)
{
	return sb->max ? sb->max : STRBUF_MAX;
}

static int strbuf_grow(struct strbuf *sb, size_t extra)
{
	size_t need = sb->len + extra + 1;
	if (extra > strbuf_limit(sb) || sb->len + extra > strbuf_limit(sb))
		return -EFBIG;
	if (need <= sb->alloc)
		return 0;
	size_t alloc = sb->alloc ? sb->alloc : 64;
	while (alloc < need)
		alloc *= 2;
	char *p = realloc(sb->buf, alloc);
	if (!p)
		return -ENOMEM;
	sb->buf = p;
	sb->alloc = alloc;
	return 0;
}

int strbuf_add(struct strbuf *sb, const void *data, size_t len)
{
	int rc = strbuf_grow(sb, len);
	if (rc < 0)
		return rc;
	if (len)
		memcpy(sb->buf + sb->len, data, len);
	sb->len += len;
	sb->buf[sb->len] = '\0';
	return 0;
}

int strbuf_adds(struct strbuf *sb, const char *s)
{
	return strbuf_add(sb, s, strlen(s));
}

int strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap)
{
	va_list cp;
	va_copy(cp, ap);
	int n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0)
		return -EINVAL;
	int rc = strbuf_grow(sb, (size_t)n);
	if (rc < 0)
		return rc;
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	sb->len += (size_t)n;
	return 0;
}

int strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = strbuf_vaddf(sb, fmt, ap);
	va_end(ap);
	return rc;
}

void strbuf_reset(struct strbuf *sb)
{
	sb->len = 0;
	if (sb->buf)
		sb->buf[0] = '\0';
}

void strbuf_release(struct strbuf *sb)
{
	free(sb->buf);
	sb->buf = NULL;
	sb->len = 0;
	sb->alloc = 0;
}

void strbuf_releasep(struct strbuf *sb)
{
	strbuf_release(sb);
}

char *strbuf_detach(struct strbuf *sb, size_t *len)
{
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

void strbuf_each_line(struct strbuf *sb, void (*fn)(const char *line))
{
	char *save = NULL;
	if (!sb->len)
		return;
	for (char *line = strtok_r(sb->buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		fn(line);
}

const char *strbuf_str(const struct strbuf *sb)
{
	return sb->buf ? sb->buf : "";
}
