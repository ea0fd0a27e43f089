#include "lib/strset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int strset_add(struct strset *s, const char *str)
{
	/* The strbuf may move: the sorted pointers would dangle. */
	free(s->v);
	s->v = NULL;
	s->n = 0;
	strbuf_add(&s->buf, str, strlen(str) + 1);
	return strbuf_error(&s->buf);
}

static int compare(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int strset_seal(struct strset *s)
{
	size_t count = 0;
	for (size_t off = 0; off < s->buf.len; off += strlen(s->buf.buf + off) + 1)
		count++;
	const char **v = calloc(count + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	size_t i = 0;
	for (size_t off = 0; off < s->buf.len; off += strlen(s->buf.buf + off) + 1)
		v[i++] = s->buf.buf + off;
	qsort(v, count, sizeof(*v), compare);
	size_t n = 0;
	for (i = 0; i < count; i++) {
		if (n == 0 || strcmp(v[n - 1], v[i]))
			v[n++] = v[i];
	}
	free(s->v);
	s->v = v;
	s->n = n;
	return 0;
}

bool strset_has(const struct strset *s, const char *str)
{
	return s->n > 0 && bsearch(&str, s->v, s->n, sizeof(*s->v), compare) != NULL;
}

void strset_release(struct strset *s)
{
	strbuf_release(&s->buf);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

void strset_releasep(struct strset *s)
{
	strset_release(s);
}
