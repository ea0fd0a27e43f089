#include "fs/control.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <string.h>

static const char blanks[] = " \t\r";

/*
 * One piece of written data up to a newline (@complete) or the end of the
 * write: 1 when it completes a line (in cl->buf, NUL-terminated), 0 when
 * the line goes on, -EFBIG when it belongs to a line that is too long.
 */
static int lines_add(struct ctl_lines *cl, const char *seg, size_t n, bool complete)
{
	if (cl->toolong) {
		cl->toolong = !complete;
		return -EFBIG;
	}
	if (n > CTL_LINE_MAX - cl->len) {
		cl->len = 0;
		cl->toolong = !complete;
		return -EFBIG;
	}
	memcpy(cl->buf + cl->len, seg, n);
	cl->len += n;
	if (!complete)
		return 0;
	/* A line written from a CRLF file means the same as without the CR. */
	if (cl->len > 0 && cl->buf[cl->len - 1] == '\r')
		cl->len--;
	cl->buf[cl->len] = '\0';
	cl->len = 0;
	return 1;
}

int ctl_lines_feed(struct ctl_lines *cl, const char *data, size_t len, ctl_line_fn fn, void *arg)
{
	int framing = 0;
	while (len > 0) {
		const char *nl = memchr(data, '\n', len);
		size_t n = nl ? (size_t)(nl - data) : len;
		int got = lines_add(cl, data, n, nl != NULL);
		int rc = got > 0 ? fn(cl->buf, arg) : 0;
		if (rc < 0)
			return rc;
		/* A line too long is dropped alone: the lines after it still count. */
		if (got < 0)
			framing = got;
		n += nl ? 1 : 0;
		data += n;
		len -= n;
	}
	return framing;
}

int ctl_lines_flush(struct ctl_lines *cl, ctl_line_fn fn, void *arg)
{
	if (cl->toolong || cl->len == 0) {
		/* A line refused as too long was already reported by its write. */
		cl->toolong = false;
		cl->len = 0;
		return 0;
	}
	lines_add(cl, "", 0, true);
	return fn(cl->buf, arg);
}

static bool word_is(const char *w, size_t n, const char *s)
{
	return n == strlen(s) && memcmp(w, s, n) == 0;
}

static int word_label(const char *v, size_t n, const char *what, struct ctl_words *out,
		      struct err *e)
{
	if (n == 0)
		return err_set(e, EINVAL, "name= needs a label for %s", what);
	if (n >= sizeof(out->label))
		return err_set(e, EINVAL, "name is longer than %zu bytes for %s",
			       sizeof(out->label) - 1, what);
	memcpy(out->label, v, n);
	out->label[n] = '\0';
	return 0;
}

/* memory=SIZE or cpus=N (@w, @n bytes) into @out->res; -ENOENT for another word. */
static int word_res(const char *w, size_t n, const char *what, struct ctl_words *out, struct err *e)
{
	char key[8], value[RES_WORD_MAX];
	enum res_kind kind;
	const char *eq = memchr(w, '=', n);
	size_t klen = eq ? (size_t)(eq - w) : 0;
	if (!eq || klen >= sizeof(key))
		return -ENOENT;
	memcpy(key, w, klen);
	key[klen] = '\0';
	if (res_kind_parse(key, &kind) < 0 || kind == RES_PIDS)
		return -ENOENT;
	size_t vlen = n - klen - 1;
	if (vlen >= sizeof(value))
		return err_set(e, EINVAL, "%s: %s= takes at most %d characters", what, key,
			       RES_WORD_MAX - 1);
	memcpy(value, eq + 1, vlen);
	value[vlen] = '\0';
	return res_parse(kind, value, what, &out->res, e);
}

/*
 * timeout=SECONDS, count=N: the value @v (@n bytes) kept as written in
 * @out (@size bytes); the operation says what it makes of it.
 */
static int word_keep(const char *v, size_t n, char *out, size_t size, const char *key,
		     const char *need, const char *what, struct err *e)
{
	if (n == 0 || n >= size)
		return err_set(e, EINVAL, "%s needs %s for %s", key, need, what);
	memcpy(out, v, n);
	out[n] = '\0';
	return 0;
}

static int word_apply(const char *w, size_t n, const char *what, unsigned allow,
		      struct ctl_words *out, struct err *e)
{
	static const char name_eq[] = "name=";
	const size_t name_len = sizeof(name_eq) - 1;
	static const char timeout_eq[] = "timeout=";
	const size_t timeout_len = sizeof(timeout_eq) - 1;
	static const char count_eq[] = "count=";
	const size_t count_len = sizeof(count_eq) - 1;

	if (word_is(w, n, "1"))
		return 0;
	if (word_is(w, n, "async")) {
		out->async = true;
		return 0;
	}
	if ((allow & CTL_ALLOW_NAME) && n >= name_len && memcmp(w, name_eq, name_len) == 0)
		return word_label(w + name_len, n - name_len, what, out, e);
	if ((allow & CTL_ALLOW_TIMEOUT) && n >= timeout_len &&
	    memcmp(w, timeout_eq, timeout_len) == 0)
		return word_keep(w + timeout_len, n - timeout_len, out->timeout,
				 sizeof(out->timeout), timeout_eq, "a number of seconds", what, e);
	if ((allow & CTL_ALLOW_COUNT) && n >= count_len && memcmp(w, count_eq, count_len) == 0)
		return word_keep(w + count_len, n - count_len, out->count, sizeof(out->count),
				 count_eq, "a number of sandboxes", what, e);
	int rc = allow & CTL_ALLOW_RAISE ? word_res(w, n, what, out, e) : -ENOENT;
	if (rc != -ENOENT)
		return rc;
	return err_set(e, EINVAL, "unknown word '%.*s' for %s", (int)n, w, what);
}

int ctl_words_parse(const char *line, const char *what, unsigned allow, struct ctl_words *out,
		    struct err *e)
{
	memset(out, 0, sizeof(*out));
	out->res = (struct resources){RES_UNSET, RES_UNSET, RES_UNSET};
	const char *p = line + strspn(line, blanks);
	while (*p) {
		size_t n = strcspn(p, blanks);
		int rc = word_apply(p, n, what, allow, out, e);
		if (rc < 0)
			return rc;
		p += n;
		p += strspn(p, blanks);
	}
	return 0;
}

static bool all_blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strchr(blanks, s[i]) && s[i] != '\n')
			return false;
	return true;
}

/*
 * Scan the JSON added since the last line: true when its outermost braces
 * closed (or a closer has nothing to close), or a string runs past its
 * line, which JSON does not allow. Exact for valid JSON, where a brace or
 * bracket in a string never counts; whatever it makes of broken JSON, the
 * spec parser has the last word.
 */
static bool json_closed(struct ctl_spec *s)
{
	while (s->scanned < s->text.len) {
		char c = s->text.buf[s->scanned++];
		if (s->in_string) {
			if (c == '\n')
				return true;
			if (s->escaped)
				s->escaped = false;
			else if (c == '\\')
				s->escaped = true;
			else if (c == '"')
				s->in_string = false;
		} else if (c == '"') {
			s->in_string = true;
		} else if (c == '{' || c == '[') {
			s->depth++;
		} else if (c == '}' || c == ']') {
			if (s->depth <= 1)
				return true;
			s->depth--;
		}
	}
	return false;
}

/*
 * Is the collected JSON ready to act on? Yes when it is complete, and also
 * when it fails to parse before its end: no further line can mend it, so
 * the spec parser should say what is wrong now, on the write that made it
 * so. The parse is only tried on a short text: re-parsing all of a long one
 * at every line would cost its size times its lines.
 */
static int json_ready(struct ctl_spec *s)
{
	const struct strbuf *t = &s->text;
	if (json_closed(s))
		return 1;
	if (t->len > CTL_SPEC_EARLY)
		return 0;
	const char *end = NULL;
	cJSON *j = cJSON_ParseWithLengthOpts(t->buf, t->len, &end, false);
	if (j) {
		cJSON_Delete(j);
		return 1;
	}
	if (!end || end < t->buf || end > t->buf + t->len)
		return 0;
	return !all_blank(end, (size_t)(t->buf + t->len - end));
}

/* Everything but the text, which the caller has moved out or released. */
static void spec_reset(struct ctl_spec *s)
{
	struct strbuf text = s->text;
	*s = (struct ctl_spec){.text = text};
}

int ctl_spec_add(struct ctl_spec *s, const char *line)
{
	const char *word = line + strspn(line, blanks);
	size_t n = strcspn(word, blanks);
	bool blank = all_blank(line, strlen(line));

	s->text.max = CTL_SPEC_MAX;
	if (!s->json) {
		if (blank)
			return s->text.len > 0;
		if (word_is(word, n, "async") && all_blank(word + n, strlen(word + n))) {
			s->async = true;
			return 0;
		}
		s->json = s->text.len == 0 && *word == '{';
	}
	strbuf_adds(&s->text, line);
	strbuf_add(&s->text, "\n", 1);
	int rc = strbuf_error(&s->text);
	if (rc < 0)
		return rc;
	return s->json ? json_ready(s) : 0;
}

int ctl_spec_pending(const struct ctl_spec *s)
{
	return s->text.len > 0;
}

void ctl_spec_take(struct ctl_spec *s, struct strbuf *text, bool *async)
{
	*text = s->text;
	*async = s->async;
	s->text = (struct strbuf)STRBUF_INIT;
	spec_reset(s);
}

void ctl_spec_release(struct ctl_spec *s)
{
	strbuf_release(&s->text);
	spec_reset(s);
}
