/*
 * strbuf.h - a growable byte buffer with a hard maximum, after git's strbuf;
 * failures are sticky, as in SQLite's sqlite3_str.
 *
 * Ownership: a strbuf owns its `buf`. strbuf_release() frees it and leaves
 * the strbuf empty and reusable; strbuf_detach() hands `buf` to the caller,
 * who frees it. `buf` is always NUL-terminated once anything was added, so
 * it can be used as a C string; it may also hold binary data (use `len`).
 *
 * Failure: every strbuf has a limit (STRBUF_MAX unless set). An append that
 * would pass it fails with -EFBIG, one that finds no memory with -ENOMEM.
 * A failed append adds nothing, and the failure is sticky: it is kept in
 * `err`, and every later append adds nothing either, so the buffer always
 * holds a whole prefix of the text, never one with a piece missing in the
 * middle. The appends return nothing; a caller appends all its pieces and
 * checks once, with strbuf_error(). strbuf_reset(), strbuf_setlen(),
 * strbuf_release() and strbuf_detach() forget the failure.
 *
 *     strbuf_addf(out, "%s %s\n", id, state);
 *     strbuf_adds(out, "more\n");
 *     return strbuf_error(out);
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
	int err;    /* 0, or the negative errno of the first append that failed */
};

#define STRBUF_INIT                                                                                \
	{                                                                                          \
		NULL, 0, 0, 0, 0                                                                   \
	}

void strbuf_add(struct strbuf *sb, const void *data, size_t len);
void strbuf_adds(struct strbuf *sb, const char *s);
void strbuf_addf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap);
/* 0, or the negative errno of the first append that failed since @sb was last reset. */
int strbuf_error(const struct strbuf *sb) __attribute__((warn_unused_result));
/* Empty @sb (its memory is kept) and forget a failure. */
void strbuf_reset(struct strbuf *sb);
/* Cut @sb to its first @len bytes (at most all): what is left is whole, so it has no failure. */
void strbuf_setlen(struct strbuf *sb, size_t len);
void strbuf_release(struct strbuf *sb);
/*
 * Hand the contents to the caller (who frees them) and leave @sb empty;
 * *@len, if given, gets their length. NULL when an append failed (the cut
 * text is freed, never handed on) or when no memory is left for an empty one.
 */
char *strbuf_detach(struct strbuf *sb, size_t *len) __attribute__((warn_unused_result));
/* The contents as a C string: "" while nothing was added. */
const char *strbuf_str(const struct strbuf *sb);
void strbuf_releasep(struct strbuf *sb);
/*
 * Call @fn(line, @arg) with each non-empty "\n"-separated line of @sb, in order. It cuts
 * @sb's buffer into those lines (NULs replace the newlines), so @sb holds
 * them only until it is reset or released.
 */
void strbuf_each_line(struct strbuf *sb, void (*fn)(const char *line, void *arg), void *arg);

#define _cleanup_strbuf_ __attribute__((cleanup(strbuf_releasep)))

#endif
