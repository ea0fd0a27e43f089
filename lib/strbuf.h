/*
 * strbuf.h - a growable byte buffer with a hard maximum, after git's strbuf.
 *
 * Ownership: a strbuf owns its `buf`. strbuf_release() frees it and leaves
 * the strbuf empty and reusable; strbuf_detach() hands `buf` to the caller,
 * who frees it. `buf` is always NUL-terminated once anything was added, so
 * it can be used as a C string; it may also hold binary data (use `len`).
 *
 * Every strbuf has a limit (STRBUF_MAX unless set): an add that would pass
 * it fails with -EFBIG and leaves the buffer as it was.
 */
#ifndef SNAPFS_STRBUF_H
#define SNAPFS_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

#define STRBUF_MAX (64u << 20)

struct strbuf {
	char *buf;
	size_t len;
	size_t alloc;
	size_t max; /* 0 means STRBUF_MAX */
};

#define STRBUF_INIT                                                                                \
	{                                                                                          \
		NULL, 0, 0, 0                                                                      \
	}

int strbuf_add(struct strbuf *sb, const void *data, size_t len);
int strbuf_adds(struct strbuf *sb, const char *s);
int strbuf_addf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap);
void strbuf_reset(struct strbuf *sb);
void strbuf_release(struct strbuf *sb);
char *strbuf_detach(struct strbuf *sb, size_t *len);
/* The contents as a C string: "" while nothing was added. */
const char *strbuf_str(const struct strbuf *sb);
void strbuf_releasep(struct strbuf *sb);
/*
 * Call @fn with each non-empty "\n"-separated line of @sb, in order. It cuts
 * @sb's buffer into those lines (NULs replace the newlines), so @sb holds
 * them only until it is reset or released.
 */
void strbuf_each_line(struct strbuf *sb, void (*fn)(const char *line));

#define _cleanup_strbuf_ __attribute__((cleanup(strbuf_releasep)))

#endif
