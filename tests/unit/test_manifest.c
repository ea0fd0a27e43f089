#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend/manifest.h"
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
	test_names();
	return t_done();
}
