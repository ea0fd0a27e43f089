/* Unit tests for fs/control.c: line framing and word parsing of control files. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/control.h"
#include "lib/util.h"
#include "tests/unit/t.h"

/* Collects the lines handed on, "|"-separated. */
struct seen {
	char text[16384];
	int n;
	int fail_at; /* return -EIO for this line number (1-based), 0 never */
};

static int collect(const char *line, void *arg)
{
	struct seen *s = arg;
	s->n++;
	if (s->fail_at == s->n)
		return -EIO;
	size_t used = strlen(s->text);
	snprintf(s->text + used, sizeof(s->text) - used, "%s|", line);
	return 0;
}

static int feed(struct ctl_lines *cl, const char *data, struct seen *s)
{
	return ctl_lines_feed(cl, data, strlen(data), collect, s);
}

/*
 * Writes fed to one ctl_lines in order (NULL: a flush, as at close), and
 * after each the lines handed on so far and how many.
 */
static const struct {
	const char *what;
	struct {
		const char *write;
		const char *text;
		int n;
	} steps[4]; /* up to the first without text */
} framing[] = {
    {"a line in two writes", {{"1", "", 0}, {"\n", "1|", 1}, {NULL, "1|", 1}}},
    {"two lines in one write", {{"A=1\nB=2\n", "A=1|B=2|", 2}}},
    {"an empty line and CRLF", {{"\n1\r\n", "|1|", 2}}},
    {"a last line without a newline, at flush",
     {{"x\nname=a", "x|", 1}, {NULL, "x|name=a|", 2}, {NULL, "x|name=a|", 2}}},
};

static void test_framing(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(framing); i++) {
		struct ctl_lines cl = {0};
		struct seen s = {0};
		for (size_t k = 0; k < ARRAY_SIZE(framing[i].steps) && framing[i].steps[k].text;
		     k++) {
			const char *w = framing[i].steps[k].write, *want = framing[i].steps[k].text;
			int rc = w ? feed(&cl, w, &s) : ctl_lines_flush(&cl, collect, &s);
			CHECK_MSG(rc == 0, "%s, step %zu: rc %d", framing[i].what, k, rc);
			CHECK_MSG(!strcmp(s.text, want), "%s, step %zu: lines \"%s\", not \"%s\"",
				  framing[i].what, k, s.text, want);
			CHECK_MSG(s.n == framing[i].steps[k].n, "%s, step %zu: %d lines, not %d",
				  framing[i].what, k, s.n, framing[i].steps[k].n);
		}
	}
}

static void test_line_too_long(void)
{
	struct ctl_lines cl = {0};
	struct seen s = {0};
	char *big = malloc(CTL_LINE_MAX + 2);
	memset(big, 'a', CTL_LINE_MAX + 1);
	big[CTL_LINE_MAX + 1] = '\0';

	/* 4097 bytes, no newline: refused, and the rest of that line too. */
	CHECK(feed(&cl, big, &s) == -EFBIG);
	CHECK(feed(&cl, "tail\n", &s) == -EFBIG);
	CHECK(feed(&cl, "1\n", &s) == 0);
	CHECK_STR(s.text, "1|");

	/* Exactly 4096 bytes is a line. */
	big[CTL_LINE_MAX] = '\n';
	s = (struct seen){0};
	CHECK(feed(&cl, big, &s) == 0);
	CHECK(s.n == 1);
	CHECK(strlen(s.text) == CTL_LINE_MAX + 1);

	/* Split over writes, the limit still holds. */
	big[CTL_LINE_MAX] = '\0';
	CHECK(feed(&cl, big, &s) == 0);
	CHECK(feed(&cl, "b", &s) == -EFBIG);
	CHECK(ctl_lines_flush(&cl, collect, &s) == 0);
	CHECK(s.n == 1);
	free(big);
}

static void test_line_too_long_keeps_the_rest(void)
{
	struct ctl_lines cl = {0};
	struct seen s = {0};
	const size_t big_len = CTL_LINE_MAX + 1;
	char *data = malloc(big_len + 32);
	memcpy(data, "A=1\n", 4);
	memset(data + 4, 'a', big_len);
	snprintf(data + 4 + big_len, 32, "\nB=2\nC");

	/* The line too long is dropped alone; the write still answers EFBIG. */
	CHECK(feed(&cl, data, &s) == -EFBIG);
	CHECK_STR(s.text, "A=1|B=2|");
	CHECK(ctl_lines_flush(&cl, collect, &s) == 0);
	CHECK_STR(s.text, "A=1|B=2|C|");
	free(data);
}

static void test_callback_error_stops(void)
{
	struct ctl_lines cl = {0};
	struct seen s = {.fail_at = 2};
	CHECK(feed(&cl, "a\nb\nc\n", &s) == -EIO);
	CHECK_STR(s.text, "a|");
	CHECK(s.n == 2);
}

static void test_words(void)
{
	struct ctl_words w;
	struct err e = {0};
	CHECK(ctl_words_parse("", "start", 0, &w, &e) == 0);
	CHECK(!w.async);
	CHECK(ctl_words_parse("1", "start", 0, &w, &e) == 0);
	CHECK(ctl_words_parse("  async ", "start", 0, &w, &e) == 0);
	CHECK(w.async);
	CHECK(ctl_words_parse("name=base async", "snapshot", CTL_ALLOW_NAME, &w, &e) == 0);
	CHECK_STR(w.label, "base");
	CHECK(w.async);
	CHECK(ctl_words_parse("1\tname=x", "snapshot", CTL_ALLOW_NAME, &w, &e) == 0);
	CHECK_STR(w.label, "x");
}

/* A fork's memory= longer than a value can be is refused, never cut to a smaller size. */
static void test_raise_too_long(void)
{
	struct ctl_words w;
	struct err e = {0};
	CHECK(ctl_words_parse("memory=2G", "fork", CTL_ALLOW_RAISE, &w, &e) == 0);
	CHECK(w.res.memory_bytes == 2LL << 30);
	/* 32 characters: 1 TiB written with leading zeros; cut at 31 it read 1 GiB once. */
	CHECK(ctl_words_parse("memory=0000000000000000000001073741824K", "fork", CTL_ALLOW_RAISE,
			      &w, &e) == -EINVAL);
	CHECK(strstr(e.msg, "at most") != NULL);
}

static void test_unknown_words(void)
{
	struct ctl_words w;
	struct err e = {0};
	CHECK(ctl_words_parse("1 now", "snapshot", CTL_ALLOW_NAME, &w, &e) == -EINVAL);
	CHECK_STR(e.msg, "unknown word 'now' for snapshot");
	CHECK(e.code == EINVAL);
	CHECK(ctl_words_parse("name=x", "start", 0, &w, &e) == -EINVAL);
	CHECK_STR(e.msg, "unknown word 'name=x' for start");
	CHECK(ctl_words_parse("0", "fork", 0, &w, &e) == -EINVAL);
	CHECK(ctl_words_parse("name=", "snapshot", CTL_ALLOW_NAME, &w, &e) == -EINVAL);
	char label[LABEL_MAX + 8] = "name=";
	memset(label + 5, 'l', LABEL_MAX);
	label[5 + LABEL_MAX] = '\0';
	CHECK(ctl_words_parse(label, "snapshot", CTL_ALLOW_NAME, &w, &e) == -EINVAL);
}

static int spec_feed(struct ctl_spec *s, const char *lines[], size_t n)
{
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = ctl_spec_add(s, lines[i]);
	return rc;
}

static void test_spec_key_value(void)
{
	struct ctl_spec s = {0};
	struct strbuf text;
	bool async;
	const char *lines[] = {"image=busybox", "async", "env=A=1"};
	CHECK(spec_feed(&s, lines, ARRAY_SIZE(lines)) == 0);
	CHECK(ctl_spec_pending(&s));
	CHECK(ctl_spec_add(&s, "") == 1);
	ctl_spec_take(&s, &text, &async);
	CHECK_STR(strbuf_str(&text), "image=busybox\nenv=A=1\n");
	CHECK(async);
	CHECK(!ctl_spec_pending(&s));
	strbuf_release(&text);

	/* Blank lines before anything is collected are ignored. */
	CHECK(ctl_spec_add(&s, "") == 0);
	CHECK(!ctl_spec_pending(&s));
	ctl_spec_release(&s);
}

static void test_spec_json(void)
{
	struct ctl_spec s = {0};
	struct strbuf text;
	bool async;
	CHECK(ctl_spec_add(&s, "{\"image\": \"busybox\"}") == 1);
	ctl_spec_take(&s, &text, &async);
	CHECK(!async);
	strbuf_release(&text);

	/* An object over several lines acts when it is complete. */
	const char *lines[] = {"{", "  \"image\": \"busybox\",", "", "  \"env\": [\"A=1\"]"};
	CHECK(spec_feed(&s, lines, ARRAY_SIZE(lines)) == 0);
	CHECK(ctl_spec_add(&s, "}") == 1);
	ctl_spec_take(&s, &text, &async);
	strbuf_release(&text);

	/* Broken JSON acts at once so the write reports it. */
	CHECK(ctl_spec_add(&s, "{\"image\": busybox}") == 1);
	ctl_spec_release(&s);
	/* A string cannot go on past its line: that is broken too. */
	CHECK(ctl_spec_add(&s, "{\"image\": \"bus") == 1);
	ctl_spec_release(&s);
	CHECK(ctl_spec_add(&s, "{\"image\": \"busybox\",") == 0);
	CHECK(ctl_spec_pending(&s));
	ctl_spec_release(&s);
}

static size_t json_allocs;

static void *count_malloc(size_t n)
{
	json_allocs++;
	return malloc(n);
}

/*
 * A JSON spec over many lines costs work in proportion to its size, not to
 * its size times its lines: each line used to parse the whole object so
 * far, so 60 KiB in 1000 lines cost ~500,000 allocations (in 20,000 short
 * lines, minutes of a FUSE worker). Counted by cJSON's allocations, not by
 * time: each parse allocates one item per value it reads.
 */
static void test_spec_json_linear(void)
{
	struct ctl_spec s = {0};
	struct strbuf text;
	bool async;
	char line[64];
	int rc = 0, lines = 1000;
	cJSON_InitHooks(&(cJSON_Hooks){.malloc_fn = count_malloc, .free_fn = free});
	json_allocs = 0;
	CHECK(ctl_spec_add(&s, "{\"image\": \"busybox\", \"env\": {") == 0);
	for (int i = 0; i < lines && rc == 0; i++) {
		snprintf(line, sizeof(line),
			 "  \"KEY_%04d\": \"a value of some forty bytes .....\",", i);
		rc = ctl_spec_add(&s, line);
	}
	CHECK(rc == 0);
	CHECK(ctl_spec_add(&s, "\"LAST\": \"x\"}}") == 1);
	ctl_spec_take(&s, &text, &async);
	CHECK(text.len > 50000 && text.len <= CTL_SPEC_MAX);
	strbuf_release(&text);
	cJSON_InitHooks(NULL);
	/* Only the first CTL_SPEC_EARLY bytes are parsed at every line: ~700 allocations here. */
	if (json_allocs > (size_t)lines * 4)
		fprintf(stderr, "a spec of %d lines cost %zu JSON allocations\n", lines,
			json_allocs);
	CHECK(json_allocs <= (size_t)lines * 4);
}

/* Past CTL_SPEC_EARLY bytes only the scan decides: what it must get right. */
static void test_spec_json_long(void)
{
	struct ctl_spec s = {0};
	struct strbuf text;
	bool async;
	char line[80];
	CHECK(ctl_spec_add(&s, "{\"image\": \"busybox\", \"env\": {") == 0);
	for (int i = 0; s.text.len <= CTL_SPEC_EARLY; i++) {
		snprintf(line, sizeof(line), "\"K%d\": \"v\",", i);
		CHECK(ctl_spec_add(&s, line) == 0);
	}
	/* Braces, brackets and escaped quotes in strings close nothing. */
	CHECK(ctl_spec_add(&s, "\"A\": \"}]\\\"}\\\\\",") == 0);
	CHECK(ctl_spec_add(&s, "\"B\": [{}, [\"]\"]],") == 0);
	CHECK(ctl_spec_add(&s, "\"C\": \"x\"}") == 0);
	CHECK(ctl_spec_add(&s, "}") == 1);
	ctl_spec_take(&s, &text, &async);
	CHECK(s.text.len == 0 && !s.json && s.depth == 0 && s.scanned == 0);
	strbuf_release(&text);

	/* A string that runs past its line can never be mended: it acts. */
	CHECK(ctl_spec_add(&s, "{\"image\": \"busybox\", \"env\": {") == 0);
	while (s.text.len <= CTL_SPEC_EARLY)
		CHECK(ctl_spec_add(&s, "\"K\": \"v\",") == 0);
	CHECK(ctl_spec_add(&s, "\"A\": \"no end") == 1);
	ctl_spec_release(&s);
	CHECK(!s.in_string && !s.escaped);
}

int main(void)
{
	test_framing();
	test_line_too_long();
	test_line_too_long_keeps_the_rest();
	test_callback_error_stops();
	test_words();
	test_raise_too_long();
	test_unknown_words();
	test_spec_key_value();
	test_spec_json();
	test_spec_json_linear();
	test_spec_json_long();
	return t_done();
}
