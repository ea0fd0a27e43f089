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
	snprintf(snap.ports, sizeof(snap.ports), "8080 0\n22 0\n");
	snap.network = SB_NET_EGRESS;
	snprintf(snap.egress, sizeof(snap.egress), "deny 10.0.0.0/8\nallow 0.0.0.0/0\n");
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
	CHECK_STR(s.ports, "8080 0\n22 0\n");
	CHECK(s.kind == SNAP_KIND_SUSPEND && s.state == SNAP_COMPLETED && s.gpu);
	CHECK(s.created_at == NOW - 1000 && s.completed_at == NOW - 1000);
	CHECK(s.pause_ms == 42 && s.size_bytes == 1 << 20 && s.stored_bytes == 4096);
	CHECK(strstr(s.host_json, "\"host_id\":\"" OTHER "\"") != NULL);
	CHECK(strstr(s.host_json, "\"runsc_version\":\"0.0~20240729.0\"") != NULL);

	CHECK(s.timeout_s == 0 && s.timeout_action == TIMEOUT_TERMINATE);
	/* The source's timeout comes back; a manifest from before timeouts has none. */
	cJSON *t = good();
	cJSON_ReplaceItemInObject(t, "timeout_s", cJSON_CreateNumber(600));
	cJSON_ReplaceItemInObject(t, "timeout_action", cJSON_CreateString("suspend"));
	CHECK(parse(t, HERE, &s, &e) == 0 && s.timeout_s == 600 &&
	      s.timeout_action == TIMEOUT_SUSPEND);
	t = good();
	cJSON_DeleteItemFromObject(t, "timeout_s");
	cJSON_DeleteItemFromObject(t, "timeout_action");
	CHECK(parse(t, HERE, &s, &e) == 0 && s.timeout_s == 0 &&
	      s.timeout_action == TIMEOUT_TERMINATE);

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
	/* Published ports: the one strict record (lib/ports.h); absent (older manifests) is none.
	 */
	refused("ports", cJSON_CreateString("8080 0\n8080 0\n"), "ports");
	refused("ports", cJSON_CreateString("8080"), "ports");
	refused("ports", cJSON_CreateNumber(8080), "ports");
	static struct snapshot s;
	struct err e = {0};
	cJSON *m = good();
	cJSON_DeleteItemFromObjectCaseSensitive(m, "ports");
	CHECK(parse(m, HERE, &s, &e) == 0 && s.ports[0] == '\0');
}

/* The source's network and egress rules travel in the manifest, so a fork on another host keeps
 * them. */
static void test_network(void)
{
	static struct snapshot s;
	struct err e = {0};
	CHECK(parse(good(), HERE, &s, &e) == 0);
	CHECK(s.network == SB_NET_EGRESS);
	CHECK_STR(s.egress, "deny 10.0.0.0/8\nallow 0.0.0.0/0\n");
	refused("network", cJSON_CreateString("host"), "network");
	refused("network", cJSON_CreateBool(1), "network");
	refused("egress", cJSON_CreateString("allow 10.0.0.0/33"), "egress");
	refused("egress", cJSON_CreateString("permit 0.0.0.0/0"), "egress");
	/* A bucket's manifest opens nothing denied by default, not even to root's forks. */
	refused("egress", cJSON_CreateString("allow 169.254.169.254/32"), "egress");
	refused("egress", cJSON_CreateString("deny 8.8.8.8\nallow 10.213.0.4/30"), "egress");
	refused("egress", cJSON_CreateString("allow 224.0.0.251"), "egress");
	refused("egress", cJSON_CreateNumber(1), "egress");
	/* A manifest from before networks: none, and no rules. */
	cJSON *m = good();
	cJSON_DeleteItemFromObjectCaseSensitive(m, "network");
	cJSON_DeleteItemFromObjectCaseSensitive(m, "egress");
	CHECK(parse(m, HERE, &s, &e) == 0 && s.network == SB_NET_NONE && s.egress[0] == '\0');
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
	refused("timeout_s", cJSON_CreateNumber(1e99), "timeout_s");
	refused("timeout_s", cJSON_CreateNumber(LIFETIME_SECONDS_MAX + 1.0), "timeout_s");
	refused("timeout_s", cJSON_CreateNumber(-1), "timeout_s");
	refused("timeout_action", cJSON_CreateString("explode"), "timeout_action");

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

/* A row as this host records it, completed: what info.json shows. */
static void info_row(struct snapshot *snap)
{
	memset(snap, 0, sizeof(*snap));
	snprintf(snap->id, sizeof(snap->id), ID);
	snprintf(snap->name, sizeof(snap->name), "before-upgrade");
	snprintf(snap->sandbox_id, sizeof(snap->sandbox_id), "web");
	snprintf(snap->image, sizeof(snap->image), "busybox");
	snprintf(snap->image_digest, sizeof(snap->image_digest), DIGEST);
	snprintf(snap->entrypoint, sizeof(snap->entrypoint), "sleep 1");
	snprintf(snap->env, sizeof(snap->env), "SECRET=never-in-info\n");
	snprintf(snap->message, sizeof(snap->message), "stored");
	snprintf(snap->host_json, sizeof(snap->host_json),
		 "{\"host_id\":\"" OTHER "\",\"gpus\":[]}");
	snap->kind = SNAP_KIND_SUSPEND;
	snap->state = SNAP_COMPLETED;
	snap->created_at = NOW - 1000;
	snap->completed_at = NOW + 1;
	snap->pause_ms = 42;
	snap->size_bytes = 1 << 20;
	snap->stored_bytes = 4096;
	snap->gpu = true;
	snap->res = (struct resources){.memory_bytes = 256 << 20, .cpu_milli = 500, .pids = 64};
}

/* info.json of @snap, parsed back; NULL if it is not one JSON object and a newline. */
static cJSON *info_of(const struct snapshot *snap)
{
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	if (snapmeta_info(snap, &out) < 0 || out.len < 2 || out.buf[out.len - 1] != '\n')
		return NULL;
	cJSON *j = cJSON_Parse(strbuf_str(&out));
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

static const char *info_str(const cJSON *info, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(info, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool info_null(const cJSON *info, const char *key)
{
	return cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(info, key));
}

static double info_num(const cJSON *info, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(info, key);
	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static void test_info_fields(void)
{
	static struct snapshot snap;
	info_row(&snap);
	cJSON *info = info_of(&snap);
	CHECK(info != NULL);
	CHECK_STR(info_str(info, "id"), ID);
	CHECK_STR(info_str(info, "name"), "before-upgrade");
	CHECK_STR(info_str(info, "kind"), "suspend");
	CHECK_STR(info_str(info, "sandbox_id"), "web");
	CHECK_STR(info_str(info, "created_at"), "2025-12-31T23:59:59.000Z");
	CHECK_STR(info_str(info, "completed_at"), "2026-01-01T00:00:00.001Z");
	CHECK_STR(info_str(info, "status"), "completed");
	CHECK_STR(info_str(info, "message"), "stored");
	CHECK(info_num(info, "pause_ms") == 42);
	CHECK(info_num(info, "size_bytes") == 1 << 20);
	CHECK(info_num(info, "stored_bytes") == 4096);
	CHECK_STR(info_str(info, "image_digest"), DIGEST);
	const cJSON *host = cJSON_GetObjectItemCaseSensitive(info, "host");
	CHECK(cJSON_IsObject(host));
	CHECK_STR(info_str(host, "host_id"), OTHER);
	CHECK(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(host, "gpus")));
	CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(info, "gpu")));
	/* The limits: cpus as a CPU count, the others as they are. */
	CHECK(info_num(info, "memory") == 256 << 20);
	CHECK(info_num(info, "cpus") == 0.5);
	CHECK(info_num(info, "pids") == 64);
	CHECK(info_num(info, "timeout_s") == 0);
	CHECK_STR(info_str(info, "timeout_action"), "terminate");
	CHECK_STR(info_str(info, "network"), "none");
	/* Those twenty, and nothing else: not the env, not the manifest's fields. */
	CHECK(cJSON_GetArraySize(info) == 20);
	CHECK(!cJSON_GetObjectItem(info, "env") && !cJSON_GetObjectItem(info, "image"));
	CHECK(!cJSON_GetObjectItem(info, "entrypoint") &&
	      !cJSON_GetObjectItem(info, "created_at_ms"));
	cJSON_Delete(info);
}

/* What a row lacks is null, where info.json has always said so; the rest stays as it is. */
static void test_info_nulls(void)
{
	static struct snapshot snap;
	info_row(&snap);
	snap.name[0] = snap.image_digest[0] = snap.message[0] = '\0';
	snap.completed_at = 0;
	snap.state = SNAP_PENDING;
	snap.kind = SNAP_KIND_SNAPSHOT;
	snap.gpu = false;
	snap.host_json[0] = '\0';
	cJSON *info = info_of(&snap);
	CHECK(info != NULL);
	CHECK(info_null(info, "name") && info_null(info, "image_digest"));
	CHECK(info_null(info, "completed_at") && info_null(info, "host"));
	CHECK_STR(info_str(info, "message"), "");
	CHECK_STR(info_str(info, "status"), "pending");
	CHECK_STR(info_str(info, "kind"), "snapshot");
	CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(info, "gpu")));
	cJSON_Delete(info);
	/* A profile that is not JSON shows as none. */
	snprintf(snap.host_json, sizeof(snap.host_json), "{\"host_id\":");
	info = info_of(&snap);
	CHECK(info && info_null(info, "host"));
	cJSON_Delete(info);
}

/* The text itself, as info.json has always held it: cJSON's indented form and a newline. */
static void test_info_text(void)
{
	static struct snapshot snap;
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	info_row(&snap);
	snap.name[0] = '\0';
	snprintf(snap.host_json, sizeof(snap.host_json), "{\"host_id\":\"" OTHER "\"}");
	CHECK(snapmeta_info(&snap, &out) == 0);
	CHECK_STR(strbuf_str(&out), "{\n"
				    "\t\"id\":\t\"" ID "\",\n"
				    "\t\"name\":\tnull,\n"
				    "\t\"kind\":\t\"suspend\",\n"
				    "\t\"sandbox_id\":\t\"web\",\n"
				    "\t\"created_at\":\t\"2025-12-31T23:59:59.000Z\",\n"
				    "\t\"completed_at\":\t\"2026-01-01T00:00:00.001Z\",\n"
				    "\t\"status\":\t\"completed\",\n"
				    "\t\"message\":\t\"stored\",\n"
				    "\t\"pause_ms\":\t42,\n"
				    "\t\"size_bytes\":\t1048576,\n"
				    "\t\"stored_bytes\":\t4096,\n"
				    "\t\"image_digest\":\t\"" DIGEST "\",\n"
				    "\t\"host\":\t{\n"
				    "\t\t\"host_id\":\t\"" OTHER "\"\n"
				    "\t},\n"
				    "\t\"gpu\":\ttrue,\n"
				    "\t\"memory\":\t268435456,\n"
				    "\t\"cpus\":\t0.5,\n"
				    "\t\"pids\":\t64,\n"
				    "\t\"timeout_s\":\t0,\n"
				    "\t\"timeout_action\":\t\"terminate\",\n"
				    "\t\"network\":\t\"none\"\n"
				    "}\n");
	/* Appended: what @out held stays. */
	strbuf_reset(&out);
	strbuf_adds(&out, "x");
	CHECK(snapmeta_info(&snap, &out) == 0);
	CHECK(out.len > 2 && strncmp(out.buf, "x{\n", 3) == 0);
}

/* The sizes a restart takes from a manifest stored before its row was completed. */
static void test_sizes(void)
{
	static struct snapshot snap;
	info_row(&snap);
	snap.size_bytes = snap.stored_bytes = 7;
	CHECK(snapmeta_sizes("{\"id\": \"" ID "\", \"size_bytes\": 123, \"stored_bytes\": 45}",
			     &snap) == 0);
	CHECK(snap.size_bytes == 123 && snap.stored_bytes == 45);
	/* One it lacks, or one that is no whole number, is left as it was. */
	CHECK(snapmeta_sizes("{\"size_bytes\": 9, \"stored_bytes\": -1}", &snap) == 0);
	CHECK(snap.size_bytes == 9 && snap.stored_bytes == 45);
	CHECK(snapmeta_sizes("{}", &snap) == 0 && snap.size_bytes == 9 && snap.stored_bytes == 45);
	CHECK(snapmeta_sizes("not json", &snap) == -EINVAL);
	CHECK(snapmeta_sizes("[1]", &snap) == -EINVAL);
	CHECK(snap.size_bytes == 9 && snap.stored_bytes == 45);
	/* Built metadata leaves them to the store (manifest_build()). */
	cJSON *meta = snapmeta_build(&snap, "v");
	CHECK(meta && !cJSON_GetObjectItem(meta, "size_bytes") &&
	      !cJSON_GetObjectItem(meta, "stored_bytes"));
	cJSON_Delete(meta);
}

/* What the manifest carries of a row: its fields, the builder's runsc, never the env. */
static void test_build(void)
{
	static struct snapshot snap;
	info_row(&snap);
	cJSON *m = snapmeta_build(&snap, "0.0~20240729.0");
	CHECK(m != NULL);
	CHECK_STR(info_str(m, "id"), ID);
	CHECK_STR(info_str(m, "name"), "before-upgrade");
	CHECK_STR(info_str(m, "kind"), "suspend");
	CHECK_STR(info_str(m, "sandbox_id"), "web");
	CHECK(info_num(m, "created_at_ms") == NOW - 1000);
	CHECK(info_num(m, "pause_ms") == 42);
	CHECK_STR(info_str(m, "image"), "busybox");
	CHECK_STR(info_str(m, "image_digest"), DIGEST);
	CHECK_STR(info_str(m, "entrypoint"), "sleep 1");
	CHECK_STR(info_str(m, "runsc_version"), "0.0~20240729.0");
	CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "gpu")));
	CHECK(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(m, "host")));
	CHECK(info_num(m, "memory_bytes") == 256 << 20);
	CHECK(info_num(m, "cpu_milli") == 500);
	CHECK(info_num(m, "pids") == 64);
	CHECK(info_num(m, "timeout_s") == 0);
	CHECK_STR(info_str(m, "ports"), ""); /* published ports: none (lib/ports.h) */
	CHECK_STR(info_str(m, "network"), "none");
	CHECK_STR(info_str(m, "egress"), "");
	CHECK(cJSON_GetArraySize(m) == 20);
	cJSON_Delete(m);
	/* "" stays a string in the manifest; a profile that is not JSON is left out. */
	snap.name[0] = '\0';
	snprintf(snap.host_json, sizeof(snap.host_json), "{");
	m = snapmeta_build(&snap, "v");
	CHECK(m && info_str(m, "name") && !*info_str(m, "name"));
	CHECK(m && !cJSON_GetObjectItem(m, "host") && cJSON_GetArraySize(m) == 19);
	cJSON_Delete(m);
}

/* The limits: absent in a manifest from before them (0: the source ran unlimited), else bounded. */
static void test_limits(void)
{
	static struct snapshot s;
	struct err e = {0};
	const char *keys[] = {"memory_bytes", "cpu_milli", "pids"};
	cJSON *m = good();
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
		cJSON_DeleteItemFromObjectCaseSensitive(m, keys[i]);
	CHECK(parse(m, HERE, &s, &e) == 0);
	CHECK(s.res.memory_bytes == 0 && s.res.cpu_milli == 0 && s.res.pids == 0);
	m = good();
	cJSON_ReplaceItemInObjectCaseSensitive(m, "memory_bytes", cJSON_CreateNumber(128 << 20));
	cJSON_ReplaceItemInObjectCaseSensitive(m, "cpu_milli", cJSON_CreateNumber(1500));
	cJSON_ReplaceItemInObjectCaseSensitive(m, "pids", cJSON_CreateNumber(64));
	CHECK(parse(m, HERE, &s, &e) == 0);
	CHECK(s.res.memory_bytes == 128 << 20 && s.res.cpu_milli == 1500 && s.res.pids == 64);
	refused("memory_bytes", cJSON_CreateNumber(1024), "memory_bytes");
	refused("memory_bytes", cJSON_CreateNumber(-1), "memory_bytes");
	refused("cpu_milli", cJSON_CreateNumber(1e12), "cpu_milli");
	refused("cpu_milli", cJSON_CreateString("0.5"), "cpu_milli");
	refused("pids", cJSON_CreateNumber(1.5), "pids");
	refused("pids", cJSON_CreateNumber(5), "pids");
}

int main(void)
{
	test_good();
	test_limits();
	test_claims_this_host();
	test_texts();
	test_network();
	test_numbers();
	test_identity();
	test_host();
	test_host_id();
	test_info_fields();
	test_info_nulls();
	test_info_text();
	test_sizes();
	test_build();
	return t_done();
}
