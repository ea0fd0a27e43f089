#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend/store/manifest.h"
#include "lib/strbuf.h"
#include "lib/util.h"
#include "tests/unit/t.h"

static struct manifest_chunk chunk(unsigned char fill, int64_t len, int32_t pack, int64_t off,
				   int64_t zlen)
{
	struct manifest_chunk c = {.len = len, .pack = pack, .off = off, .zlen = zlen};
	if (pack != MANIFEST_ZERO)
		memset(c.sha256, fill, SHA256_LEN);
	return c;
}

static void test_round_trip(void)
{
	struct manifest_chunk pages[] = {
	    chunk(0xab, 81920, 0, 0, 20000),
	    chunk(0, 1 << 30, MANIFEST_ZERO, 0, 0),
	    chunk(0x01, 4096, 1, 12345, 4096),
	};
	struct manifest_chunk ckpt[] = {chunk(0xcd, 100, 1, 0, 60)};
	struct manifest_file files[] = {
	    {.name = "pages.img", .size = 81920 + (1 << 30) + 4096, .chunks = pages, .nchunks = 3},
	    {.name = "checkpoint.img", .size = 100, .chunks = ckpt, .nchunks = 1},
	    {.name = "empty", .size = 0},
	};
	char packs[2][MANIFEST_PACK_MAX + 1] = {"snap-a/0000", "snap-b/0012"};
	struct manifest m = {.files = files,
			     .nfiles = 3,
			     .packs = packs,
			     .npacks = 2,
			     .size_bytes = 81920 + (1 << 30) + 4096 + 100,
			     .stored_bytes = 777};
	cJSON *meta = cJSON_CreateObject();
	cJSON_AddStringToObject(meta, "id", "snap-b");
	cJSON_AddNumberToObject(meta, "format", 99);
	cJSON_AddStringToObject(meta, "files", "replaced");
	char *json = NULL;
	size_t len = 0;
	struct err e = {0};
	CHECK(manifest_build(meta, &m, &json, &len, &e) == 0);
	CHECK(json && strlen(json) == len && json[len - 1] == '\n');
	cJSON *j = cJSON_Parse(json);
	CHECK(cJSON_IsObject(j));
	CHECK_STR(cJSON_GetObjectItem(j, "id")->valuestring, "snap-b");
	CHECK(cJSON_GetObjectItem(j, "format")->valueint == MANIFEST_FORMAT);
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "files")) == 3);
	cJSON_Delete(j);
	cJSON_Delete(meta);

	struct manifest got;
	CHECK(manifest_parse(json, "snap-b", &got, &e) == 0);
	CHECK(got.nfiles == 3 && got.npacks == 2 && got.stored_bytes == 777);
	CHECK(got.size_bytes == m.size_bytes);
	CHECK_STR(got.packs[1], "snap-b/0012");
	for (size_t i = 0; i < got.nfiles && i < 3; i++) {
		CHECK_STR(got.files[i].name, files[i].name);
		CHECK(got.files[i].size == files[i].size);
		CHECK(got.files[i].nchunks == files[i].nchunks);
		for (size_t k = 0; k < got.files[i].nchunks && k < files[i].nchunks; k++)
			CHECK(!memcmp(&got.files[i].chunks[k], &files[i].chunks[k],
				      sizeof(struct manifest_chunk)));
	}
	manifest_free(&got);
	free(json);
}

/* @json must be refused with -EIO. */
static void refused(const char *json, const char *why)
{
	struct manifest m;
	struct err e = {0};
	int rc = manifest_parse(json, "snap-x", &m, &e);
	if (rc != -EIO)
		fprintf(stderr, "not refused: %s\n", why);
	CHECK(rc == -EIO);
	CHECK(strstr(e.msg, "snapshot snap-x: ") == e.msg);
}

#define SHA "\"abababababababababababababababababababababababababababababababab\""

static void test_refused(void)
{
	refused("[]", "not an object");
	refused("{\"format\": 1, \"packs\": [], \"files\": []}", "format 1");
	refused("{\"format\": 2, \"files\": []}", "no packs");
	refused("{\"format\": 2, \"packs\": [\"../x/0000\"], \"files\": []}", "bad pack name");
	refused("{\"format\": 2, \"packs\": [\"snap-a/12\"], \"files\": []}", "short seq");
	refused("{\"format\": 2, \"packs\": [], \"files\": [{\"name\": \"../x\", \"size\": 0, "
		"\"chunks\": []}]}",
		"bad file name");
	refused("{\"format\": 2, \"packs\": [\"a/0000\"], \"files\": [{\"name\": \"f\", "
		"\"size\": 10, \"chunks\": [[" SHA ", 10, 1, 0, 5]]}]}",
		"pack index out of range");
	refused("{\"format\": 2, \"packs\": [\"a/0000\"], \"files\": [{\"name\": \"f\", "
		"\"size\": 11, \"chunks\": [[" SHA ", 10, 0, 0, 5]]}]}",
		"sizes do not add up");
	refused("{\"format\": 2, \"packs\": [\"a/0000\"], \"files\": [{\"name\": \"f\", "
		"\"size\": 10, \"chunks\": [[\"abc\", 10, 0, 0, 5]]}]}",
		"bad hash");
	refused("{\"format\": 2, \"packs\": [], \"files\": [{\"name\": \"f\", "
		"\"size\": 10, \"chunks\": [[1e300]]}]}",
		"huge zero run");
	refused("{\"format\": 2, \"packs\": [\"a/0000\"], \"files\": [{\"name\": \"f\", "
		"\"size\": 10, \"chunks\": [[" SHA ", 10, 0, -1, 5]]}]}",
		"negative offset");
	refused("{\"format\": 2, \"packs\": [\"a/0000\"], \"files\": [{\"name\": \"f\", "
		"\"size\": 99999999, \"chunks\": [[" SHA ", 99999999, 0, 0, 5]]}]}",
		"chunk too long");
}

/* @json must be refused with -EIO, the message naming the snapshot and saying @what. */
static void refused_for(const char *json, const char *what)
{
	struct manifest m;
	struct err e = {0};
	int rc = manifest_parse(json, "snap-x", &m, &e);
	if (rc != -EIO || !strstr(e.msg, what))
		fprintf(stderr, "not refused for \"%s\": rc %d, %s\n", what, rc, e.msg);
	CHECK(rc == -EIO);
	CHECK(strstr(e.msg, "snapshot snap-x: ") == e.msg && strstr(e.msg, what));
}

static bool accepted(const char *json)
{
	struct manifest m;
	struct err e = {0};
	int rc = manifest_parse(json, "snap-x", &m, &e);
	if (rc != 0)
		fprintf(stderr, "refused: %s\n", e.msg);
	if (rc == 0)
		manifest_free(&m);
	return rc == 0;
}

/* A manifest of one file "f" of @size bytes whose chunk list is @chunks, over pack "a/0000". */
static char *one_file(long long size, const char *chunks)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb,
		    "{\"format\": 2, \"size_bytes\": %lld, \"packs\": [\"a/0000\"], "
		    "\"files\": [{\"name\": \"f\", \"size\": %lld, \"chunks\": [%s]}]}",
		    size, size, chunks);
	CHECK(strbuf_error(&sb) == 0);
	return strbuf_detach(&sb, NULL);
}

/*
 * A stored length is at most zstd's frame bound of its plain length: the
 * crafted chunk of issue 9 (1 byte stored as 4,228,096) is refused, naming it.
 */
static void test_stored_length(void)
{
	static const struct {
		long long size;
		const char *chunks;
		const char *why[2]; /* what the refusal names; none: accepted */
	} cases[] = {
	    {1, "[" SHA ", 1, 0, 0, 64]", {NULL}},
	    {1,
	     "[" SHA ", 1, 0, 0, 65]",
	     {"bad chunk 0 (abababab",
	      "of f: its stored length 65 is above 64, the most 1 bytes take"}},
	    {2,
	     "[" SHA ", 1, 0, 0, 1], [" SHA ", 1, 0, 1, 4228096]",
	     {"bad chunk 1 (abab", "stored length 4228096 is above 64"}},
	    {65536, "[" SHA ", 65536, 0, 0, 65824]", {NULL}},
	    {65536, "[" SHA ", 65536, 0, 0, 65825]", {"stored length 65825 is above 65824"}},
	    /* An offset at the bound, and one that ends past it. */
	    {10, "[" SHA ", 10, 0, 9007199254740982, 10]", {NULL}},
	    {10, "[" SHA ", 10, 0, 9007199254740983, 10]", {"ends past byte 2^53"}},
	};
	CHECK(manifest_zlen_max(1) == 64);
	CHECK(manifest_zlen_max(65536) == 65536 + 256 + 32);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *j = one_file(cases[i].size, cases[i].chunks);
		if (!cases[i].why[0])
			CHECK(accepted(j));
		for (size_t k = 0; k < ARRAY_SIZE(cases[i].why) && cases[i].why[k]; k++)
			refused_for(j, cases[i].why[k]);
		free(j);
	}
}

/* Sums of lengths from the bucket are checked (UBSan caught `total += len` wrapping). */
static void test_sums(void)
{
	struct strbuf sb = STRBUF_INIT;
	for (int i = 0; i < 1100; i++) /* 1100 zero runs of 2^53: past INT64_MAX */
		strbuf_addf(&sb, "%s[9007199254740992]", i ? ", " : "");
	CHECK(strbuf_error(&sb) == 0);
	char *j = one_file(9007199254740992LL, strbuf_str(&sb));
	refused_for(j, "the chunks of f add up to more than its size");
	free(j);
	strbuf_release(&sb);

	/* 1100 files of 2^53 bytes each: their sum wraps too. */
	strbuf_adds(&sb, "{\"format\": 2, \"size_bytes\": 0, \"packs\": [], \"files\": [");
	for (int i = 0; i < 1100; i++)
		strbuf_addf(&sb,
			    "%s{\"name\": \"f%d\", \"size\": 9007199254740992, "
			    "\"chunks\": [[9007199254740992]]}",
			    i ? ", " : "", i);
	strbuf_adds(&sb, "]}");
	CHECK(strbuf_error(&sb) == 0);
	refused_for(strbuf_str(&sb), "manifest's file sizes overflow");
	strbuf_release(&sb);

	refused_for("{\"format\": 2, \"size_bytes\": 11, \"packs\": [], \"files\": "
		    "[{\"name\": \"f\", \"size\": 10, \"chunks\": [[10]]}]}",
		    "file sizes do not add up to its size_bytes");
	refused_for("{\"format\": 2, \"packs\": [], \"files\": []}", "no valid size_bytes");
}

/* The manifest text for @nfiles files of @per_file zero runs of one byte each, and @extra. */
static char *zero_runs(size_t nfiles, size_t per_file, const char *extra)
{
	struct strbuf sb = {.max = MANIFEST_BYTES_MAX + (1u << 20)};
	strbuf_addf(&sb, "{\"format\": 2, \"size_bytes\": %zu, %s\"packs\": [], \"files\": [",
		    nfiles * per_file, extra);
	for (size_t f = 0; f < nfiles; f++) {
		strbuf_addf(&sb, "%s{\"name\": \"f%zu\", \"size\": %zu, \"chunks\": [",
			    f ? ", " : "", f, per_file);
		for (size_t i = 0; i < per_file; i++)
			strbuf_add(&sb, i ? ",[1]" : "[1]", i ? 4 : 3);
		strbuf_adds(&sb, "]}");
	}
	strbuf_adds(&sb, "]}");
	CHECK(strbuf_error(&sb) == 0);
	return strbuf_detach(&sb, NULL);
}

/* Counts and sizes are bounded before anything is parsed or allocated for them. */
static void test_bounds(void)
{
	/* Chunks in all files together. */
	char *j = zero_runs(2, MANIFEST_CHUNKS_MAX / 2 + 1, "");
	refused_for(j, "manifest has more than 1572864 chunks");
	free(j);
	j = zero_runs(2, 1000, "");
	CHECK(accepted(j));
	free(j);

	/* JSON values, whatever they are: here a metadata array of 6 Mi ones. */
	struct strbuf sb = {.max = MANIFEST_BYTES_MAX + (1u << 20)};
	strbuf_adds(&sb, "\"junk\": [1");
	for (size_t i = 0; i < MANIFEST_VALUES_MAX; i++)
		strbuf_add(&sb, ",1", 2);
	strbuf_adds(&sb, "], ");
	CHECK(strbuf_error(&sb) == 0);
	j = zero_runs(1, 1, strbuf_str(&sb));
	refused_for(j, "manifest has more than 6291456 JSON values");
	free(j);
	strbuf_release(&sb);

	/* The text: a valid manifest with spaces after it, one byte too many. */
	j = zero_runs(1, 1, "");
	size_t len = strlen(j);
	char *big = malloc(MANIFEST_BYTES_MAX + 2);
	CHECK(big != NULL);
	if (big) {
		memset(big, ' ', MANIFEST_BYTES_MAX + 1);
		memcpy(big, j, len);
		big[MANIFEST_BYTES_MAX] = '\0';
		CHECK(accepted(big));
		big[MANIFEST_BYTES_MAX] = ' ';
		big[MANIFEST_BYTES_MAX + 1] = '\0';
		refused_for(big, "manifest is longer than 67108864 bytes");
	}
	free(big);
	free(j);

	/* Packs listed. */
	for (size_t n = MANIFEST_PACKS_MAX; n <= MANIFEST_PACKS_MAX + 1; n++) {
		sb = (struct strbuf)STRBUF_INIT;
		strbuf_adds(&sb, "{\"format\": 2, \"size_bytes\": 0, \"packs\": [");
		for (size_t i = 0; i < n; i++)
			strbuf_addf(&sb, "%s\"a/%04zu\"", i ? ", " : "", i);
		strbuf_adds(&sb, "], \"files\": []}");
		CHECK(strbuf_error(&sb) == 0);
		if (n == MANIFEST_PACKS_MAX)
			CHECK(accepted(strbuf_str(&sb)));
		else
			refused_for(strbuf_str(&sb), "manifest lists more than 16384 packs");
		strbuf_release(&sb);
	}

	cJSON *root = NULL;
	struct err e = {0};
	CHECK(manifest_json("{\"id\": \"x\"}", "snap-x", &root, &e) == 0 && cJSON_IsObject(root));
	cJSON_Delete(root);
	CHECK(manifest_json("[1]", "snap-x", &root, &e) == -EIO && root == NULL);
}

/* manifest_build() refuses what manifest_parse() would. */
static void test_build_bounds(void)
{
	struct manifest_chunk *chunks = calloc(MANIFEST_CHUNKS_MAX + 1, sizeof(*chunks));
	struct manifest_file f = {
	    .name = "f", .chunks = chunks, .nchunks = MANIFEST_CHUNKS_MAX + 1};
	for (size_t i = 0; chunks && i < f.nchunks; i++)
		chunks[i] = chunk(0, 1, MANIFEST_ZERO, 0, 0);
	f.size = (int64_t)f.nchunks;
	struct manifest m = {.files = &f, .nfiles = 1, .size_bytes = f.size};
	cJSON *meta = cJSON_CreateObject();
	char *json = NULL;
	size_t len = 0;
	struct err e = {0};
	CHECK(chunks && manifest_build(meta, &m, &json, &len, &e) == -EFBIG);
	CHECK(strstr(e.msg, "1572865 chunks") != NULL);
	CHECK(json == NULL);
	free(chunks);

	/* Metadata that brings the text past MANIFEST_VALUES_MAX. */
	cJSON *junk = cJSON_AddArrayToObject(meta, "junk");
	for (size_t i = 0; i < MANIFEST_VALUES_MAX; i++)
		cJSON_AddItemToArray(junk, cJSON_CreateTrue());
	f = (struct manifest_file){.name = "f"};
	m = (struct manifest){.files = &f, .nfiles = 1};
	CHECK(manifest_build(meta, &m, &json, &len, &e) == -EFBIG);
	CHECK(strstr(e.msg, "the manifest has more than 6291456 JSON values") != NULL);
	cJSON_Delete(meta);
}

static void test_names(void)
{
	CHECK(manifest_pack_ok("snap-0123456789abcdef/0000"));
	CHECK(manifest_pack_ok("a/00001"));
	CHECK(!manifest_pack_ok("a/b/0000"));
	CHECK(!manifest_pack_ok("/0000"));
	CHECK(!manifest_pack_ok("A/0000"));
	CHECK(!manifest_pack_ok("a.tmp.b/0000"));
	CHECK(manifest_name_ok("pages.img") && !manifest_name_ok(".x") && !manifest_name_ok("a/b"));
	unsigned char sha[SHA256_LEN];
	char hex[SHA256_HEX_LEN + 1];
	for (size_t i = 0; i < SHA256_LEN; i++)
		sha[i] = (unsigned char)(i * 9);
	sha256_to_hex(sha, hex);
	CHECK(strlen(hex) == SHA256_HEX_LEN && !strncmp(hex, "0009121b", 8));
}

int main(void)
{
	test_round_trip();
	test_refused();
	test_stored_length();
	test_sums();
	test_bounds();
	test_build_bounds();
	test_names();
	return t_done();
}
