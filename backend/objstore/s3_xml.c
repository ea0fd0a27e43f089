#include "backend/objstore/s3_xml.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest entity we decode, "&#x10FFFF;" with room to spare. */
#define ENTITY_MAX 12

/* After the name of the first "<@tag" in [p, end) that is followed by '>', '/' or a space. */
static const char *open_tag(const char *p, const char *end, const char *tag, size_t tlen)
{
	for (;;) {
		const char *lt = memchr(p, '<', (size_t)(end - p));
		if (!lt || (size_t)(end - lt) < tlen + 2)
			return NULL;
		const char *after = lt + 1 + tlen;
		if (!memcmp(lt + 1, tag, tlen) && (*after == '>' || *after == '/' || *after == ' '))
			return after;
		p = lt + 1;
	}
}

bool xml_next(struct xml_span *doc, const char *tag, struct xml_span *content)
{
	const char *end = doc->p + doc->len;
	size_t tlen = strlen(tag);
	const char *after = open_tag(doc->p, end, tag, tlen);
	if (!after)
		return false;
	const char *gt = memchr(after, '>', (size_t)(end - after));
	if (!gt)
		return false;
	if (gt[-1] == '/') {
		*content = (struct xml_span){gt, 0};
		doc->len = (size_t)(end - (gt + 1));
		doc->p = gt + 1;
		return true;
	}
	char close[64];
	int n = snprintf(close, sizeof(close), "</%s>", tag);
	if (n < 0 || (size_t)n >= sizeof(close))
		return false;
	const char *body = gt + 1;
	const char *stop = memmem(body, (size_t)(end - body), close, (size_t)n);
	if (!stop)
		return false;
	*content = (struct xml_span){body, (size_t)(stop - body)};
	doc->p = stop + n;
	doc->len = (size_t)(end - doc->p);
	return true;
}

/* Append @cp as UTF-8; the caller keeps a byte for the NUL. */
static int put_utf8(unsigned long cp, char *out, size_t cap, size_t *n)
{
	unsigned char b[4];
	size_t len;
	if (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return -EINVAL;
	if (cp < 0x80) {
		b[0] = (unsigned char)cp;
		len = 1;
	} else if (cp < 0x800) {
		b[0] = (unsigned char)(0xc0 | (cp >> 6));
		b[1] = (unsigned char)(0x80 | (cp & 0x3f));
		len = 2;
	} else if (cp < 0x10000) {
		b[0] = (unsigned char)(0xe0 | (cp >> 12));
		b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (unsigned char)(0x80 | (cp & 0x3f));
		len = 3;
	} else {
		b[0] = (unsigned char)(0xf0 | (cp >> 18));
		b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (unsigned char)(0x80 | (cp & 0x3f));
		len = 4;
	}
	if (*n + len >= cap)
		return -ENAMETOOLONG;
	memcpy(out + *n, b, len);
	*n += len;
	return 0;
}

/* The code point of the entity @name (what lies between '&' and ';'), or 0. */
static unsigned long entity(const char *name, size_t len)
{
	static const struct {
		const char *name;
		char c;
	} named[] = {{"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		if (strlen(named[i].name) == len && !memcmp(name, named[i].name, len))
			return (unsigned char)named[i].c;
	}
	if (len < 2 || name[0] != '#')
		return 0;
	char digits[ENTITY_MAX];
	bool hex = name[1] == 'x' || name[1] == 'X';
	size_t skip = hex ? 2 : 1;
	if (len - skip == 0 || len - skip >= sizeof(digits))
		return 0;
	memcpy(digits, name + skip, len - skip);
	digits[len - skip] = '\0';
	/* strtoul would take a sign and spaces: only digits here. */
	if (strspn(digits, hex ? "0123456789abcdefABCDEF" : "0123456789") != len - skip)
		return 0;
	return strtoul(digits, NULL, hex ? 16 : 10);
}

int xml_decode(struct xml_span in, char *out, size_t cap)
{
	size_t n = 0;
	if (cap == 0)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < in.len; i++) {
		/* XML has no U+0000, raw or as &#0;: in a C string it would cut the text short. */
		if (in.p[i] == '\0')
			return -EINVAL;
		if (in.p[i] != '&') {
			if (n + 1 >= cap)
				return -ENAMETOOLONG;
			out[n++] = in.p[i];
			continue;
		}
		size_t room = in.len - i - 1 < ENTITY_MAX ? in.len - i - 1 : ENTITY_MAX;
		const char *semi = memchr(in.p + i + 1, ';', room);
		if (!semi)
			return -EINVAL;
		size_t len = (size_t)(semi - (in.p + i + 1));
		int rc = put_utf8(entity(in.p + i + 1, len), out, cap, &n);
		if (rc < 0)
			return rc;
		i += len + 1;
	}
	out[n] = '\0';
	return (int)n;
}

int xml_text(struct xml_span doc, const char *tag, char *out, size_t cap)
{
	struct xml_span content;
	if (!xml_next(&doc, tag, &content))
		return -ENOENT;
	return xml_decode(content, out, cap);
}

int xml_int64(struct xml_span doc, const char *tag, int64_t *out)
{
	char text[32];
	int n = xml_text(doc, tag, text, sizeof(text));
	if (n < 0)
		return n == -ENOENT ? n : -EINVAL;
	if (n == 0 || (size_t)n != strspn(text, "0123456789"))
		return -EINVAL;
	errno = 0;
	long long v = strtoll(text, NULL, 10);
	if (errno)
		return -EINVAL;
	*out = v;
	return 0;
}
