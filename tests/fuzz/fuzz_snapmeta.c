/*
 * fuzz_snapmeta.c - libFuzzer target for snapmeta_parse() (runtime/snapmeta.c):
 * a manifest's metadata as any host that can write the bucket may write it,
 * becoming a registry row. The input is the manifest text, read as
 * snapshot ID by this host (HERE) at NOW.
 *
 * An accepted manifest must give the row snapmeta.h promises: completed,
 * its id ID, each text field NUL-terminated and held to its rule
 * (lib/names.h), no env, counts from 0 to 2^53, a creation time after 1970
 * and at most SNAPMETA_SKEW_MS ahead, a timeout within its bound, a ports
 * record ports_decode() takes; 1 only when the profile named HERE, which
 * the row then no longer names. And snapmeta_build() of that row (with the
 * sizes manifest_build() adds) must parse back to the same row. A refused
 * one is -EINVAL (or -ENOMEM) with a sentence.
 */
#include "lib/limits.h"
#include "lib/names.h"
#include "lib/ports.h"
#include "runtime/snapmeta.h"
#include "tests/fuzz/fuzz.h"

#define ID "snap-0123456789abcdef"
#define NOW 1767225600000LL /* 2026-01-01 */
#define HERE "host-aaaaaaaaaaaaaaaa"
#define COUNT_MAX (1LL << 53)

static bool terminated(const char *s, size_t cap)
{
	return memchr(s, '\0', cap) != NULL;
}

static bool count_ok(int64_t v)
{
	return v >= 0 && v <= COUNT_MAX;
}

static void check_row(const struct snapshot *s, int rc)
{
	FUZZ_CHECK(strcmp(s->id, ID) == 0);
	FUZZ_CHECK(s->state == SNAP_COMPLETED);
	FUZZ_CHECK(terminated(s->name, sizeof(s->name)) && label_ok(s->name, LABEL_MAX));
	FUZZ_CHECK(terminated(s->sandbox_id, sizeof(s->sandbox_id)) &&
		   sandbox_id_ok(s->sandbox_id));
	FUZZ_CHECK(terminated(s->image, sizeof(s->image)) && image_name_ok(s->image));
	FUZZ_CHECK(terminated(s->image_digest, sizeof(s->image_digest)) &&
		   image_digest_ok(s->image_digest));
	FUZZ_CHECK(terminated(s->entrypoint, sizeof(s->entrypoint)) &&
		   text_ok(s->entrypoint, ENTRYPOINT_MAX));
	FUZZ_CHECK(s->env[0] == '\0' && s->message[0] == '\0');
	FUZZ_CHECK(terminated(s->host_json, sizeof(s->host_json)));
	FUZZ_CHECK(terminated(s->ports, sizeof(s->ports)) && ports_record_ok(s->ports));
	FUZZ_CHECK(terminated(s->egress, sizeof(s->egress)));
	FUZZ_CHECK(s->created_at >= 1 && s->created_at <= NOW + SNAPMETA_SKEW_MS);
	FUZZ_CHECK(s->completed_at == s->created_at);
	FUZZ_CHECK(count_ok(s->pause_ms) && count_ok(s->size_bytes) && count_ok(s->stored_bytes));
	FUZZ_CHECK(s->timeout_s >= 0 && s->timeout_s <= LIFETIME_SECONDS_MAX);
	FUZZ_CHECK(s->owner_uid == 0 && s->owner_gid == 0 && !s->autosnap);
	/* The profile naming this host is dropped from the row: it names no host_id HERE. */
	if (rc == 1)
		FUZZ_CHECK(!strstr(s->host_json, "\"host_id\":\"" HERE "\""));
}

/* The row @s as its own host writes it, read back: the same row. */
static void check_round_trip(const struct snapshot *s)
{
	static struct snapshot again; /* 30 KiB: not on the fuzzer's stack */
	struct err e = {0};
	cJSON *m = snapmeta_build(s, "0.0~20240729.0");
	if (!m)
		abort();
	/* What manifest_build() adds. */
	cJSON_AddNumberToObject(m, "format", 2);
	cJSON_AddNumberToObject(m, "size_bytes", (double)s->size_bytes);
	cJSON_AddNumberToObject(m, "stored_bytes", (double)s->stored_bytes);
	char *text = cJSON_PrintUnformatted(m);
	cJSON_Delete(m);
	if (!text)
		abort();
	int rc = snapmeta_parse(ID, text, NOW, HERE, &again, &e);
	if (rc < 0)
		fprintf(stderr, "round trip refused: %s\n%s\n", e.msg, text);
	FUZZ_CHECK(rc == 0);
	FUZZ_CHECK(memcmp(s, &again, sizeof(again)) == 0);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct snapshot row;
	struct err e = {0};
	char *json = fuzz_strndup(data, size);
	memset(&row, 0xa5, sizeof(row));
	int rc = snapmeta_parse(ID, json, NOW, HERE, &row, &e);
	if (rc >= 0) {
		FUZZ_CHECK(rc == 0 || rc == 1);
		check_row(&row, rc);
		check_round_trip(&row);
	} else {
		FUZZ_CHECK(rc == -EINVAL || rc == -ENOMEM);
		FUZZ_CHECK(e.msg[0] != '\0');
	}
	free(json);
	return 0;
}
