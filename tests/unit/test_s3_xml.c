#include <errno.h>
#include <string.h>

#include "backend/objstore/s3_xml.h"
#include "tests/unit/t.h"

static struct xml_span span(const char *s)
{
	return (struct xml_span){s, strlen(s)};
}

static void test_elements(void)
{
	const char *doc = "<?xml version=\"1.0\"?><ListBucketResult xmlns=\"x\">"
			  "<Contents><Key>a</Key><Size>1</Size></Contents>"
			  "<Contents><Key>b&amp;c</Key><Size>22</Size></Contents>"
			  "<Keys>not a key</Keys><Empty/><IsTruncated>true</IsTruncated>"
			  "</ListBucketResult>";
	struct xml_span d = span(doc), item;
	char text[64];
	int64_t size = 0;
	CHECK(xml_next(&d, "Contents", &item));
	CHECK(xml_text(item, "Key", text, sizeof(text)) == 1 && !strcmp(text, "a"));
	CHECK(xml_int64(item, "Size", &size) == 0 && size == 1);
	CHECK(xml_next(&d, "Contents", &item));
	CHECK(xml_text(item, "Key", text, sizeof(text)) == 3 && !strcmp(text, "b&c"));
	CHECK(xml_int64(item, "Size", &size) == 0 && size == 22);
	CHECK(!xml_next(&d, "Contents", &item));
	/* "<Keys>" is not "<Key>"; a self-closing element is empty. */
	CHECK(xml_text(span("<Keys>x</Keys>"), "Key", text, sizeof(text)) == -ENOENT);
	CHECK(xml_text(span(doc), "Empty", text, sizeof(text)) == 0 && !text[0]);
	CHECK(xml_text(span(doc), "IsTruncated", text, sizeof(text)) == 4);
	CHECK(xml_text(span("<A attr=\"1\">v</A>"), "A", text, sizeof(text)) == 1);
	/* A cut answer: no closing tag. */
	CHECK(xml_text(span("<Key>abc"), "Key", text, sizeof(text)) == -ENOENT);
	CHECK(xml_text(span("<Key"), "Key", text, sizeof(text)) == -ENOENT);
	CHECK(xml_text(span(""), "Key", text, sizeof(text)) == -ENOENT);
}

static void test_entities(void)
{
	char text[64];
	CHECK(xml_decode(span("&lt;a&gt; &quot;&apos;&amp;"), text, sizeof(text)) == 7);
	CHECK_STR(text, "<a> \"'&");
	CHECK(xml_decode(span("&#65;&#x42;&#x263A;&#128512;"), text, sizeof(text)) == 9);
	CHECK_STR(text, "AB\xe2\x98\xba\xf0\x9f\x98\x80");
	static const char *const bad[] = {"&",	   "&amp",	 "&nope;",	     "&#;",
					  "&#x;",  "&#0;",	 "&#xD800;",	     "&#-1;",
					  "&# 1;", "&#x110000;", "&#12345678901234;"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(xml_decode(span(bad[i]), text, sizeof(text)) == -EINVAL);
	/* Hard maximum: the NUL must fit too. */
	CHECK(xml_decode(span("abcd"), text, 4) == -ENAMETOOLONG);
	CHECK(xml_decode(span("abc"), text, 4) == 3);
	CHECK(xml_decode(span("&#x263A;"), text, 3) == -ENAMETOOLONG);
	int64_t v;
	CHECK(xml_int64(span("<S>-1</S>"), "S", &v) == -EINVAL);
	CHECK(xml_int64(span("<S></S>"), "S", &v) == -EINVAL);
	CHECK(xml_int64(span("<S>99999999999999999999999</S>"), "S", &v) == -EINVAL);
	CHECK(xml_int64(span("<S>5368709120</S>"), "S", &v) == 0 && v == 5368709120LL);
}

/*
 * A raw NUL is no more XML than &#0;: decoded into a C string it would cut
 * the text short of the length returned, and a listed key "a\0b" would read
 * as "a" (found by tests/fuzz/fuzz_s3_xml.c).
 */
static void test_raw_nul(void)
{
	static const char doc[] = "<Contents><Key>a\0b</Key><Size>1</Size></Contents>";
	struct xml_span d = {doc, sizeof(doc) - 1}, item;
	char text[64];
	CHECK(xml_decode((struct xml_span){"a\0b", 3}, text, sizeof(text)) == -EINVAL);
	CHECK(xml_next(&d, "Contents", &item));
	CHECK(xml_text(item, "Key", text, sizeof(text)) == -EINVAL);
}

int main(void)
{
	test_elements();
	test_entities();
	test_raw_nul();
	return t_done();
}
