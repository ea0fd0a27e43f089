/*
 * runtime/snapmeta.c and the host profile checks of runtime/host.c: a
 * manifest's metadata, as another (or a hostile) host may write it, becomes
 * a registry row only when every field passes the rule local input follows.
 */
#include "runtime/snapmeta.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/names.h"
#include "runtime/host.h"
#include "tests/unit/t.h"
#include "tests/unit/t_dir.h"

#define ID "snap-0123456789abcdef"
#define NOW 1767225600000LL /* 2026-01-01 */
#define HERE "host-aaaaaaaaaaaaaaaa"
#define OTHER "host-bbbbbbbbbbbbbbbb"
#define DIGEST "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* The metadata of a snapshot another host took, as its put stores it. */
static cJSON *good(void)
{
	static struct snapshot snap;
	memset(&snap, 0, sizeof(snap));
	snprintf(snap.id, sizeof(snap.id), ID);
	snprintf(snap.name, sizeof(snap.name), "before-upgrade");
	snprintf(snap.sandbox_id, sizeof(snap.sandbox_id), "web");
	snprintf(snap.image, sizeof(snap.image), "busybox");
	snprintf(snap.image_digest, sizeof(snap.image_digest), DIGEST);
	snprintf(snap.entrypoint, sizeof(snap.entrypoint), "while :; do\tsleep 1; done");
	snprintf(snap.env, sizeof(snap.env), "SECRET=never-in-a-manifest\n");
	snprintf(snap.host_json, sizeof(snap.host_json),
		 "{\"host_id\":\"" OTHER "\",\"cpu_features\":\"avx sse\",\"runsc_version\":"
		 "\"0.0~20240729.0\",\"platform\":\"systrap\",\"gpu_driver\":\"\",\"gpus\":[]}");
	snap.kind = SNAP_KIND_SUSPEND;
	snap.created_at = NOW - 1000;
	snap.pause_ms = 42;
	snap.gpu = true;
	cJSON *m = snapmeta_build(&snap, "0.0~20240729.0");
	/* What manifest_build() adds. */
	cJSON_AddNumberToObject(m, "format", 2);
	cJSON_AddNumberToObject(m, "size_bytes", 1 << 20);
	cJSON_AddNumberToObject(m, "stored_bytes", 4096);
	return m;
}

static int parse(cJSON *m, const char *this_host, struct snapshot *out, struct err *e)
{
	char *text = cJSON_PrintUnformatted(m);
	int rc = snapmeta_parse(ID, text, NOW, this_host, out, e);
	free(text);
	cJSON_Delete(m);
	return rc;
}

static void test_good(void)
{
	static struct snapshot s;
	struct err e = {0};
	CHECK(parse(good(), HERE, &s, &e) == 0);
	CHECK_STR(s.id, ID);
	CHECK_STR(s.name, "before-upgrade");
	CHECK_STR(s.sandbox_id, "web");
	CHECK_STR(s.image, "busybox");
	CHECK_STR(s.image_digest, DIGEST);
	CHECK_STR(s.entrypoint, "while :; do\tsleep 1; done");
	CHECK_STR(s.env, "");
	CHECK(s.kind == SNAP_KIND_SUSPEND && s.state == SNAP_COMPLETED && s.gpu);
	CHECK(s.created_at == NOW - 1000 && s.completed_at == NOW - 1000);
	CHECK(s.pause_ms == 42 && s.size_bytes == 1 << 20 && s.stored_bytes == 4096);
	CHECK(strstr(s.host_json, "\"host_id\":\"" OTHER "\"") != NULL);
	CHECK(strstr(s.host_json, "\"runsc_version\":\"0.0~20240729.0\"") != NULL);

	/* Another host's clock a little ahead of this one's is no reason to refuse. */
	cJSON *m = good();
	cJSON_ReplaceItemInObject(m, "created_at_ms", cJSON_CreateNumber(NOW + SNAPMETA_SKEW_MS));
	CHECK(parse(m, HERE, &s, &e) == 0 && s.created_at == NOW + SNAPMETA_SKEW_MS);
	/* A host from before host ids records none: another host's. */
	m = good();
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(m, "host"), "host_id");
	CHECK(parse(m, HERE, &s, &e) == 0 && !strstr(s.host_json, "host_id"));
	/* No profile at all: restorable says so. */
	m = good();
	cJSON_DeleteItemFromObject(m, "host");
	CHECK(parse(m, HERE, &s, &e) == 0 && s.host_json[0] == '\0');
}

/* A manifest that names this host as its origin: listed, but not as this host's. */
static void test_claims_this_host(void)
{
	static struct snapshot s;
	struct err e = {0};
	CHECK(parse(good(), OTHER, &s, &e) == 1);
	CHECK(!strstr(s.host_json, "host_id"));
	CHECK(strstr(s.host_json, "\"platform\":\"systrap\"") != NULL);
	/* Before this host knows its id, nothing is its own. */
	CHECK(parse(good(), "", &s, &e) == 0 && strstr(s.host_json, OTHER));
}

/* Replace (or with NULL, delete) member @key of the metadata, or of its host profile. */
static void refused_in(bool in_host, const char *key, cJSON *value, const char *needle)
{
	static struct snapshot s;
	struct err e = {0};
	cJSON *m = good();
	cJSON *obj = in_host ? cJSON_GetObjectItem(m, "host") : m;
	cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
	if (value)
		cJSON_AddItemToObject(obj, key, value);
	int rc = parse(m, HERE, &s, &e);
	CHECK(rc == -EINVAL);
	if (rc != -EINVAL || !strstr(e.msg, needle))
		fprintf(stderr, "  %s%s: rc %d, \"%s\", wanted \"%s\"\n", in_host ? "host." : "",
			key, rc, e.msg, needle);
	CHECK(strstr(e.msg, needle) != NULL);
}
#define refused(key, value, needle) refused_in(false, key, value, needle)
#define refused_host(key, value, needle) refused_in(true, key, value, needle)

static void test_texts(void)
{
	char big[ENTRYPOINT_MAX + 1];
	memset(big, 'x', sizeof(big));
	big[ENTRYPOINT_MAX] = '\0';
	refused("sandbox_id", cJSON_CreateString("web\nsnap-00000000000000ff completed web"),
		"sandbox_id");
	refused("sandbox_id", cJSON_CreateString("../../.."), "sandbox_id");
	refused("sandbox_id", cJSON_CreateString("index"), "sandbox_id");
	refused("sandbox_id", cJSON_CreateString(""), "sandbox_id");
	refused("sandbox_id", cJSON_CreateNumber(7), "sandbox_id");
	refused("sandbox_id", NULL, "sandbox_id");
	refused("image", cJSON_CreateString("busybox\nyes\n"), "image");
	refused("image", cJSON_CreateString("../../etc"), "image");
	refused("image", cJSON_CreateString(""), "image");
	refused("image_digest", cJSON_CreateString("sha256:yes\n"), "image_digest");
	refused("image_digest", NULL, "image_digest");
	refused("name", cJSON_CreateString("a b"), "its name");
	refused("name", cJSON_CreateString("x\nyes"), "its name");
	refused("entrypoint", cJSON_CreateString("sleep 1\nyes"), "entrypoint");
	refused("entrypoint", cJSON_CreateString("sleep 1\r"), "entrypoint");
	refused("entrypoint", cJSON_CreateString(big), "entrypoint");
}

static void test_numbers(void)
{
	refused("created_at_ms", cJSON_CreateNumber(1e300), "created_at_ms");
	refused("created_at_ms", cJSON_CreateNumber(-1), "created_at_ms");
	refused("created_at_ms", cJSON_CreateNumber(0), "created_at_ms");
	refused("created_at_ms", cJSON_CreateNumber(1.5), "created_at_ms");
	refused("created_at_ms", cJSON_CreateNumber((double)(NOW + SNAPMETA_SKEW_MS + 1)),
		"ahead of this host's clock");
	refused("created_at_ms", cJSON_CreateNumber(NOW + 10 * 365 * 86400000.0),
		"ahead of this host's clock");
	refused("created_at_ms", cJSON_CreateString("1767225600000"), "created_at_ms");
	refused("pause_ms", cJSON_CreateNumber(1e19), "pause_ms");
	refused("pause_ms", cJSON_CreateNumber(-5), "pause_ms");
	refused("size_bytes", cJSON_CreateNumber(9007199254740994.0), "size_bytes");
	refused("size_bytes", NULL, "size_bytes");
	refused("stored_bytes", cJSON_CreateNumber(-1), "stored_bytes");

	int64_t v = -1;
	cJSON *m = cJSON_Parse("{\"a\": 9007199254740992, \"b\": 1e19, \"c\": -0.5, \"d\": true}");
	CHECK(snapmeta_count(m, "a", &v) && v == 9007199254740992LL);
	CHECK(!snapmeta_count(m, "b", &v) && !snapmeta_count(m, "c", &v));
	CHECK(!snapmeta_count(m, "d", &v) && !snapmeta_count(m, "none", &v));
	CHECK(!snapmeta_count(NULL, "a", &v) && v == 9007199254740992LL);
	cJSON_Delete(m);
}

static void test_identity(void)
{
	static struct snapshot s;
	struct err e = {0};
	refused("id", cJSON_CreateString("snap-fedcba9876543210"), "stored under");
	refused("id", NULL, "stored under");
	refused("kind", cJSON_CreateString("yes"), "kind");
	refused("gpu", cJSON_CreateNumber(1), "gpu");
	CHECK(snapmeta_parse("snap-../../x", "{}", NOW, HERE, &s, &e) == -EINVAL);
	CHECK(snapmeta_parse(ID, "not json", NOW, HERE, &s, &e) == -EINVAL);
	CHECK(snapmeta_parse(ID, "[1, 2]", NOW, HERE, &s, &e) == -EINVAL);
}

static void test_host(void)
{
	char big[HOST_JSON_MAX + 1];
	memset(big, 'f', sizeof(big));
	big[HOST_JSON_MAX] = '\0';
	refused_host("runsc_version", cJSON_CreateString("0\nyes\n"), "runsc_version");
	refused_host("platform", cJSON_CreateString("systrap\r"), "platform");
	refused_host("cpu_features", cJSON_CreateString(big), "cpu_features");
	refused_host("kernel", cJSON_CreateNumber(6), "kernel");
	refused_host("gpus", cJSON_CreateString("x\nyes"), "gpus");
	const char *many[17];
	for (size_t i = 0; i < 17; i++)
		many[i] = "NVIDIA H100";
	refused_host("gpus", cJSON_CreateStringArray(many, 17), "gpus");
	const char *bad_model[] = {"NVIDIA H100", "yes\n"};
	refused_host("gpus", cJSON_CreateStringArray(bad_model, 2), "gpus");
	refused_host("host_id", cJSON_CreateString("host-../../x"), "host_id");
	refused_host("host_id", cJSON_CreateNumber(1), "host_id");
	refused_host("nested", cJSON_CreateObject(), "nested");
	refused_host("bad\nname", cJSON_CreateString("x"), "a member with a bad name");

	/* Two host_ids, the first this host's: dropping it must not leave the second. */
	static struct snapshot s;
	struct err e = {0};
	cJSON *m = good();
	cJSON *host = cJSON_GetObjectItem(m, "host");
	cJSON_AddStringToObject(host, "platform", "systrap");
	CHECK(parse(m, HERE, &s, &e) == -EINVAL && strstr(e.msg, "two members platform"));
	m = good();
	host = cJSON_GetObjectItem(m, "host");
	cJSON_DeleteItemFromObject(host, "host_id");
	cJSON_AddStringToObject(host, "host_id", OTHER);
	cJSON_AddStringToObject(host, "host_id", HERE);
	CHECK(parse(m, OTHER, &s, &e) == -EINVAL && strstr(e.msg, "two members host_id"));
	m = good();
	host = cJSON_GetObjectItem(m, "host");
	for (int i = 0; i < 32; i++) {
		char name[16];
		snprintf(name, sizeof(name), "extra%d", i);
		cJSON_AddStringToObject(host, name, "x");
	}
	CHECK(parse(m, HERE, &s, &e) == -EINVAL && strstr(e.msg, "more than 32 members"));
	/* Each member fits, the whole does not. */
	big[HOST_JSON_MAX / 2] = '\0';
	m = good();
	host = cJSON_GetObjectItem(m, "host");
	cJSON_AddStringToObject(host, "a", big);
	cJSON_AddStringToObject(host, "b", big);
	CHECK(parse(m, HERE, &s, &e) == -EINVAL && strstr(e.msg, "longer than"));
	refused("host", cJSON_CreateString("{}"), "host profile is not a JSON object");
}

static void test_host_id(void)
{
	char path[PATH_MAX], first[HOST_ID_MAX];
	struct err e = {0};
	_cleanup_strbuf_ struct strbuf profile = STRBUF_INIT;
	if (!t_dir_make("test_snapmeta"))
		return;
	CHECK(host_id_init(t_base, &e) == 0);
	CHECK(generated_id_ok(host_id(), "host-"));
	snprintf(first, sizeof(first), "%s", host_id());
	/* Kept: the same id after a restart. */
	CHECK(host_id_init(t_base, &e) == 0);
	CHECK_STR(host_id(), first);
	/* Recorded in every profile, and recognised. */
	CHECK(host_profile_json("0.0~20240729.0", &profile) == 0);
	CHECK(host_is_this(strbuf_str(&profile)));
	CHECK(!host_is_this("{\"host_id\":\"" OTHER "\"}") && !host_is_this("{}"));
	CHECK(!host_is_this("") && !host_is_this("{\"host_id\": 1}"));
	/* A file that holds no id is not replaced: it names this host's snapshots. */
	t_path(path, "host-id");
	CHECK(write_file_durable(path, "host-xyz\n", 9) == 0);
	CHECK(host_id_init(t_base, &e) == -EINVAL && strstr(e.msg, "does not hold a host id"));
	char text[64] = "";
	FILE *f = fopen(path, "re");
	CHECK(f && fgets(text, sizeof(text), f));
	if (f)
		fclose(f);
	CHECK_STR(text, "host-xyz\n");
	rm_rf(t_base);
}

int main(void)
{
	test_good();
	test_claims_this_host();
	test_texts();
	test_numbers();
	test_identity();
	test_host();
	test_host_id();
	return t_done();
}
