/*
 * fuzz_s3_xml.c - libFuzzer target for backend/objstore/s3_xml.c, which reads every
 * answer an S3 endpoint (or a proxy on an http:// one) sends. The input is
 * one answer body, read the ways backend/objstore/objstore_s3.c and s3_request.c read
 * theirs, into buffers of the same sizes: a ListObjectsV2 page, a
 * ListMultipartUploads page, an InitiateMultipartUpload answer, an <Error>.
 *
 * The body is not NUL-terminated here (a NUL-terminated copy would hide a
 * read past its end), spans handed back lie inside the document, and a
 * decoded text is a C string of the length returned.
 */
#include "backend/objstore/s3_client.h"
#include "backend/objstore/s3_xml.h"
#include "tests/fuzz/fuzz.h"

/* As in backend/objstore/objstore_s3.c. */
#define UPLOAD_ID_MAX 1024
#define TOKEN_MAX 1024

static struct xml_span whole;

static void check_span(struct xml_span s)
{
	FUZZ_CHECK(s.p >= whole.p && s.len <= whole.len &&
		   (size_t)(s.p - whole.p) <= whole.len - s.len);
}

/* xml_text() into @cap bytes: what it returns agrees with what it wrote. */
static int text(struct xml_span doc, const char *tag, char *out, size_t cap)
{
	int n = xml_text(doc, tag, out, cap);
	FUZZ_CHECK(n >= 0 || n == -ENOENT || n == -ENAMETOOLONG || n == -EINVAL);
	if (n >= 0)
		FUZZ_CHECK((size_t)n < cap && strlen(out) == (size_t)n);
	return n;
}

/* Each element @tag in turn, as list_page() and sweep_page() walk them. */
static void walk(struct xml_span doc, const char *tag, void (*fn)(struct xml_span item))
{
	struct xml_span item;
	while (xml_next(&doc, tag, &item)) {
		check_span(doc);
		check_span(item);
		fn(item);
	}
	check_span(doc);
}

static void contents(struct xml_span item)
{
	char key[S3_KEY_MAX + 1];
	int64_t size = -1;
	text(item, "Key", key, sizeof(key));
	if (xml_int64(item, "Size", &size) == 0)
		FUZZ_CHECK(size >= 0);
}

static void upload(struct xml_span item)
{
	char key[S3_KEY_MAX + 1], id[UPLOAD_ID_MAX], when[64];
	text(item, "Key", key, sizeof(key));
	text(item, "UploadId", id, sizeof(id));
	text(item, "Initiated", when, sizeof(when));
}

static void error_answer(struct xml_span doc)
{
	struct xml_span error;
	char code[S3_CODE_MAX], msg[512];
	if (!xml_next(&doc, "Error", &error))
		return;
	check_span(error);
	text(error, "Code", code, sizeof(code));
	text(error, "Message", msg, sizeof(msg));
}

static void pages(struct xml_span doc)
{
	char truncated[8], token[TOKEN_MAX], marker[S3_KEY_MAX + 1], id[UPLOAD_ID_MAX];
	walk(doc, "Contents", contents);
	text(doc, "IsTruncated", truncated, sizeof(truncated));
	text(doc, "NextContinuationToken", token, sizeof(token));
	walk(doc, "Upload", upload);
	text(doc, "NextKeyMarker", marker, sizeof(marker));
	text(doc, "NextUploadIdMarker", id, sizeof(id));
	text(doc, "UploadId", id, sizeof(id));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy of its own size, so that ASan sees a read one byte past the end. */
	char *copy = malloc(size ? size : 1);
	if (!copy)
		abort();
	if (size)
		memcpy(copy, data, size);
	whole = (struct xml_span){copy, size};
	pages(whole);
	error_answer(whole);

	/* The decoder alone, on the whole body, into a roomy and a tight buffer. */
	char out[4096];
	int n = xml_decode(whole, out, sizeof(out));
	FUZZ_CHECK(n < 0 || strlen(out) == (size_t)n);
	n = xml_decode(whole, out, 8);
	FUZZ_CHECK(n < 0 || (n < 8 && strlen(out) == (size_t)n));
	free(copy);
	return 0;
}
