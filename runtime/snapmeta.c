#include "runtime/snapmeta.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "backend/manifest.h"
#include "lib/names.h"
#include "runtime/host.h"

/* JSON numbers are doubles: integers up to 2^53 are exact. */
#define COUNT_MAX 9007199254740992.0

static void json_deletep(cJSON **j)
{
	cJSON_Delete(*j);
}
#define _cleanup_json_ _cleanup_(json_deletep)

cJSON *snapmeta_build(const struct snapshot *snap, const char *runsc_version)
{
	cJSON *meta = cJSON_CreateObject();
	if (!meta)
		return NULL;
	cJSON_AddStringToObject(meta, "id", snap->id);
	cJSON_AddStringToObject(meta, "name", snap->name);
	cJSON_AddStringToObject(meta, "kind", snapshot_kind_name(snap->kind));
	cJSON_AddStringToObject(meta, "sandbox_id", snap->sandbox_id);
	cJSON_AddNumberToObject(meta, "created_at_ms", (double)snap->created_at);
	cJSON_AddNumberToObject(meta, "pause_ms", (double)snap->pause_ms);
	cJSON_AddStringToObject(meta, "image", snap->image);
	cJSON_AddStringToObject(meta, "image_digest", snap->image_digest);
	cJSON_AddStringToObject(meta, "entrypoint", snap->entrypoint);
	cJSON_AddStringToObject(meta, "runsc_version", runsc_version);
	cJSON_AddBoolToObject(meta, "gpu", snap->gpu);
	cJSON *host = cJSON_Parse(snap->host_json);
	if (host)
		cJSON_AddItemToObject(meta, "host", host);
	return meta;
}

bool snapmeta_count(const cJSON *obj, const char *key, int64_t *out)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(obj, key);
	/* The range first: a double outside int64 has no defined conversion. */
	if (!cJSON_IsNumber(n) || !(n->valuedouble >= 0 && n->valuedouble <= COUNT_MAX) ||
	    n->valuedouble != (double)(int64_t)n->valuedouble)
		return false;
	*out = (int64_t)n->valuedouble;
	return true;
}

static bool label_field_ok(const char *s)
{
	return label_ok(s, LABEL_MAX);
}

static bool entrypoint_ok(const char *s)
{
	return text_ok(s, ENTRYPOINT_MAX);
}

/* The text fields: each rule bounds the length below its field's size. */
static const struct text_field {
	const char *key;
	size_t off, size;
	bool (*ok)(const char *s);
	const char *rule;
} text_fields[] = {
#define FIELD(key, member, ok, rule)                                                               \
	{                                                                                          \
		key, offsetof(struct snapshot, member), sizeof(((struct snapshot *)0)->member),    \
		    ok, rule                                                                       \
	}
    FIELD("name", name, label_field_ok, "a snapshot name (no space or control character)"),
    FIELD("sandbox_id", sandbox_id, sandbox_id_ok, "a sandbox id ([a-z0-9][a-z0-9._-]{0,62})"),
    FIELD("image", image, image_name_ok, "an image name ([A-Za-z0-9][A-Za-z0-9._-]{0,127})"),
    FIELD("image_digest", image_digest, image_digest_ok, "sha256: and 64 hex digits"),
    FIELD("entrypoint", entrypoint, entrypoint_ok, "one line of at most 4096 bytes"),
#undef FIELD
};

static int parse_texts(const cJSON *m, struct snapshot *snap, struct err *e)
{
	for (size_t i = 0; i < ARRAY_SIZE(text_fields); i++) {
		const struct text_field *f = &text_fields[i];
		const cJSON *item = cJSON_GetObjectItemCaseSensitive(m, f->key);
		const char *s = cJSON_IsString(item) ? item->valuestring : NULL;
		if (!s || !f->ok(s) || strlen(s) >= f->size)
			return err_set(e, EINVAL, "its %s is not %s", f->key, f->rule);
		memcpy((char *)snap + f->off, s, strlen(s) + 1);
	}
	return 0;
}

static int parse_numbers(const cJSON *m, int64_t now_ms, struct snapshot *snap, struct err *e)
{
	const struct {
		const char *key;
		int64_t *out;
	} counts[] = {
	    {"created_at_ms", &snap->created_at},
	    {"pause_ms", &snap->pause_ms},
	    {"size_bytes", &snap->size_bytes},
	    {"stored_bytes", &snap->stored_bytes},
	};
	for (size_t i = 0; i < ARRAY_SIZE(counts); i++)
		if (!snapmeta_count(m, counts[i].key, counts[i].out))
			return err_set(e, EINVAL, "its %s is not a whole number from 0 to 2^53",
				       counts[i].key);
	if (snap->created_at < 1 || snap->created_at > now_ms + SNAPMETA_SKEW_MS)
		return err_set(e, EINVAL,
			       "its created_at_ms is before 1970 or more than %d s ahead of this "
			       "host's clock",
			       SNAPMETA_SKEW_MS / 1000);
	snap->completed_at = snap->created_at;
	return 0;
}

/* The profile, checked, as the row keeps it; 1 when it named @this_host (dropped). */
static int parse_host(cJSON *m, const char *this_host, struct snapshot *snap, struct err *e)
{
	cJSON *host = cJSON_GetObjectItemCaseSensitive(m, "host");
	if (!host)
		return 0; /* restorable says the snapshot records no profile */
	int rc = host_profile_check(host, e);
	if (rc < 0)
		return rc;
	const cJSON *origin = cJSON_GetObjectItemCaseSensitive(host, "host_id");
	bool claims_here =
	    cJSON_IsString(origin) && this_host[0] && strcmp(origin->valuestring, this_host) == 0;
	if (claims_here)
		cJSON_DeleteItemFromObjectCaseSensitive(host, "host_id");
	_cleanup_free_ char *text = cJSON_PrintUnformatted(host);
	if (!text)
		return err_set(e, ENOMEM, "out of memory");
	if (xsnprintf(snap->host_json, sizeof(snap->host_json), "%s", text) < 0)
		return err_set(e, EINVAL, "its host profile is longer than %d bytes",
			       HOST_JSON_MAX - 1);
	return claims_here;
}

/* id, kind and gpu: what says which snapshot this is and how to restore it. */
static int parse_identity(const char *id, const cJSON *m, struct snapshot *snap, struct err *e)
{
	const cJSON *own = cJSON_GetObjectItemCaseSensitive(m, "id");
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(m, "kind");
	const cJSON *gpu = cJSON_GetObjectItemCaseSensitive(m, "gpu");
	if (!generated_id_ok(id, "snap-"))
		return err_set(e, EINVAL, "its id is not snap- and 16 hex digits");
	if (!cJSON_IsString(own) || strcmp(own->valuestring, id) != 0)
		return err_set(e, EINVAL, "its id field is not the id it is stored under");
	if (!cJSON_IsString(kind) || snapshot_kind_parse(kind->valuestring, &snap->kind) < 0)
		return err_set(e, EINVAL, "its kind is not snapshot or suspend");
	if (!cJSON_IsBool(gpu))
		return err_set(e, EINVAL, "its gpu is not true or false");
	memcpy(snap->id, id, strlen(id) + 1);
	snap->gpu = cJSON_IsTrue(gpu);
	return 0;
}

int snapmeta_parse(const char *id, const char *json, int64_t now_ms, const char *this_host,
		   struct snapshot *out, struct err *e)
{
	memset(out, 0, sizeof(*out));
	/* Bounded before it is parsed: a bucket's manifest may be built to cost gigabytes. */
	_cleanup_json_ cJSON *m = NULL;
	int rc = manifest_json(json, id, &m, e);
	if (rc < 0)
		return -EINVAL;
	rc = parse_identity(id, m, out, e);
	if (rc == 0)
		rc = parse_texts(m, out, e);
	if (rc == 0)
		rc = parse_numbers(m, now_ms, out, e);
	if (rc == 0)
		rc = parse_host(m, this_host, out, e);
	if (rc >= 0)
		out->state = SNAP_COMPLETED;
	return rc;
}
