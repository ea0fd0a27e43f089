/*
 * control.h - what a write to a control file means, before anything acts
 * on it: line framing and word parsing (docs/design.md, "Writing to a control
 * file"). Pure code: no FUSE, no registry; unit-tested in
 * tests/unit/test_control.c.
 *
 * Shells may split one line over several writes, so bytes are buffered per
 * open file in a struct ctl_lines and handed on one whole line at a time;
 * the last line without a newline is handed on at FLUSH. A line longer
 * than CTL_LINE_MAX bytes is refused with -EFBIG, and the rest of it, up to
 * its newline, is dropped with the same error; the lines around it are
 * handed on as usual.
 *
 * Ownership: the structs are embedded in the open file that owns them;
 * ctl_spec_release() frees what a struct ctl_spec holds.
 */
#ifndef SNAPFS_FS_CONTROL_H
#define SNAPFS_FS_CONTROL_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/size.h"
#include "lib/limits.h"
#include "lib/strbuf.h"
#include "lib/util.h"

#define CTL_LINE_MAX 4096

struct ctl_lines {
	char buf[CTL_LINE_MAX + 1];
	size_t len;
	bool toolong; /* dropping the rest of a line that was too long */
};

/* Called with each whole line, newline stripped, NUL-terminated. */
typedef int (*ctl_line_fn)(const char *line, void *arg);

/*
 * Add @len written bytes; call @fn for every line they complete, in order.
 * Returns 0; -EFBIG when they held (part of) a line over CTL_LINE_MAX,
 * which is dropped while every other line is handed on; or the first
 * negative return of @fn, which stops the walk.
 */
int ctl_lines_feed(struct ctl_lines *cl, const char *data, size_t len, ctl_line_fn fn, void *arg);
/* At FLUSH: hand on the buffered last line, if there is one. */
int ctl_lines_flush(struct ctl_lines *cl, ctl_line_fn fn, void *arg);

/* The words of an action line: "1" or nothing (do it), "async", "name=LABEL". */
struct ctl_words {
	bool async;
	char label[LABEL_MAX]; /* "" unless name=LABEL was given */
	struct resources res;  /* memory=, cpus= (lib/size.h); RES_UNSET unless given */
	char timeout[24];      /* "" unless timeout=SECONDS was given: SECONDS, unchecked */
	char count[8];	       /* "" unless count=N was given (fork): N, unchecked */
};

#define CTL_ALLOW_NAME 0x1    /* name=LABEL is a word of this file (snapshot) */
#define CTL_ALLOW_RAISE 0x2   /* memory=SIZE and cpus=N are words of this file (fork) */
#define CTL_ALLOW_TIMEOUT 0x4 /* timeout=SECONDS is a word of this file (fork) */
#define CTL_ALLOW_COUNT 0x8   /* count=N is a word of this file (fork) */

/*
 * Parse @line written to the control file @what ("snapshot", "start"...).
 * Unknown words: -EINVAL with "unknown word 'x' for <what>".
 */
int ctl_words_parse(const char *line, const char *what, unsigned allow, struct ctl_words *out,
		    struct err *e);

/*
 * sandboxes/new framing: a line that starts a JSON object collects lines
 * until the object is complete (or cannot be completed: then it acts, and
 * the spec parser says what is wrong); key=value lines collect until an
 * empty line or FLUSH; a line "async" outside a JSON object makes the spec
 * async. Blank lines with nothing collected are ignored.
 *
 * Each line costs time in proportion to its own length: a scan of the new
 * bytes says when the object's braces close. Only while the collected JSON
 * is at most CTL_SPEC_EARLY bytes is it also parsed at every line, so that
 * broken JSON in an ordinary spec is refused on the write that breaks it;
 * past that, at the latest when its braces close, or at FLUSH.
 */
#define CTL_SPEC_MAX (64u << 10)
#define CTL_SPEC_EARLY 1024

struct ctl_spec {
	struct strbuf text;
	bool json;
	bool async;
	/* The scan of the JSON so far: bytes scanned, open braces and brackets, in a string. */
	size_t scanned;
	size_t depth;
	bool in_string, escaped;
};

/* Add one line: 1 when the spec is ready to act on, 0 to wait, -EFBIG. */
int ctl_spec_add(struct ctl_spec *s, const char *line);
/* At FLUSH: 1 when lines were collected and should act now, else 0. */
int ctl_spec_pending(const struct ctl_spec *s);
/* Move the collected text (caller releases it) and the async flag out; reset @s. */
void ctl_spec_take(struct ctl_spec *s, struct strbuf *text, bool *async);
void ctl_spec_release(struct ctl_spec *s);

#endif
