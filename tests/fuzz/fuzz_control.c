/*
 * fuzz_control.c - libFuzzer target for fs/control.c: how the bytes any
 * user writes to a control file become lines (ctl_lines_feed/flush), the
 * words of an action line (ctl_words_parse), and the framing of a spec
 * written to sandboxes/new (ctl_spec_add/take), handed on to spec_parse()
 * as fs/sandboxes.c does.
 *
 * The first input byte says which file and how the rest is written: its
 * low two bits pick an action file (0, 3: "start", no words but async),
 * "snapshot" (name=LABEL too) or sandboxes/new (2); the other six give
 * the size of each write(), 1 to 62 bytes, or (0 or 63) all in one. Then
 * FLUSH, as close() sends it. Lines handed on carry no newline and fit
 * CTL_LINE_MAX; words keep their bounds; a JSON spec acts as soon as it is
 * a complete object.
 */
#include <cjson/cJSON.h>

#include "fs/control.h"
#include "ops/ops.h"
#include "tests/fuzz/fuzz.h"

enum { FILE_START, FILE_SNAPSHOT, FILE_NEW };

/* Up to here the harness parses the JSON again to check it waits rightly (quadratic). */
#define JSON_CHECK_MAX (4u << 10)

struct target {
	int file;
	struct ctl_lines lines;
	struct ctl_spec spec;
};

static void act_spec(struct strbuf *text)
{
	static struct sandbox_spec spec;
	struct err e = {0};
	int rc = spec_parse(strbuf_str(text), text->len, &spec, &e);
	FUZZ_CHECK(rc == 0 || e.code == -rc);
	strbuf_release(text);
}

static void spec_line(struct target *t, const char *line)
{
	struct strbuf text = STRBUF_INIT;
	bool async = false;
	int rc = ctl_spec_add(&t->spec, line);
	FUZZ_CHECK(rc == 0 || rc == 1 || rc == -EFBIG || rc == -ENOMEM);
	FUZZ_CHECK(t->spec.text.len <= CTL_SPEC_MAX);
	/* A JSON object acts once it is complete (after a line that closes something). */
	if (rc == 0 && t->spec.json && t->spec.text.len <= JSON_CHECK_MAX && strpbrk(line, "}]")) {
		cJSON *j =
		    cJSON_ParseWithLengthOpts(t->spec.text.buf, t->spec.text.len, NULL, false);
		FUZZ_CHECK(!j);
	}
	if (rc > 0) {
		ctl_spec_take(&t->spec, &text, &async);
		act_spec(&text);
	} else if (rc < 0) {
		ctl_spec_release(&t->spec);
	}
}

static void words_line(const char *line, const char *what, unsigned allow)
{
	struct ctl_words w;
	struct err e = {0};
	int rc = ctl_words_parse(line, what, allow, &w, &e);
	if (rc < 0) {
		FUZZ_CHECK(rc == -EINVAL && e.code == EINVAL);
		return;
	}
	FUZZ_CHECK(memchr(w.label, '\0', sizeof(w.label)));
	FUZZ_CHECK((allow & CTL_ALLOW_NAME) || w.label[0] == '\0');
	FUZZ_CHECK(!strpbrk(w.label, " \t\r\n"));
}

static int on_line(const char *line, void *arg)
{
	struct target *t = arg;
	FUZZ_CHECK(strlen(line) <= CTL_LINE_MAX && !strchr(line, '\n'));
	if (t->file == FILE_NEW)
		spec_line(t, line);
	else if (t->file == FILE_SNAPSHOT)
		words_line(line, "snapshot", CTL_ALLOW_NAME);
	else
		words_line(line, "start", 0);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct target t;
	if (size == 0)
		return 0;
	memset(&t, 0, sizeof(t));
	t.file = data[0] & 3;
	t.file = t.file == 3 ? FILE_START : t.file;
	size_t step = (size_t)(data[0] >> 2);
	const char *p = (const char *)data + 1;
	size_t left = size - 1;
	if (step == 63 || step == 0)
		step = left ? left : 1;
	while (left > 0) {
		size_t n = left < step ? left : step;
		int rc = ctl_lines_feed(&t.lines, p, n, on_line, &t);
		FUZZ_CHECK(rc == 0 || rc == -EFBIG);
		FUZZ_CHECK(t.lines.len <= CTL_LINE_MAX);
		p += n;
		left -= n;
	}
	FUZZ_CHECK(ctl_lines_flush(&t.lines, on_line, &t) == 0);
	FUZZ_CHECK(t.lines.len == 0 && !t.lines.toolong);
	if (t.file == FILE_NEW && ctl_spec_pending(&t.spec)) {
		struct strbuf text = STRBUF_INIT;
		bool async = false;
		ctl_spec_take(&t.spec, &text, &async);
		act_spec(&text);
	}
	ctl_spec_release(&t.spec);
	return 0;
}
