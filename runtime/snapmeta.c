#include "runtime/snapmeta.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "backend/store/manifest.h"
#include "lib/json.h"
#include "lib/names.h"
#include "lib/ports.h"
#include "runtime/host.h"
#include "runtime/net/net.h"

/* JSON numbers are doubles: integers up to 2^53 are exact. */
#define COUNT_MAX 9007199254740992.0

static bool label_field_ok(const char *s)
{
	return label_ok(s, LABEL_MAX);
}

static bool entrypoint_ok(const char *s)
{
	return text_ok(s, ENTRYPOINT_MAX);
}

/*
 * The source's egress rules, as the egress file takes them (runtime/net/net.h),
 * with no allow inside a range denied by default: from a bucket, such a rule
 * would open cloud metadata or the other sandboxes to a fork root makes,
 * whose rules inside those ranges come first.
 */
static bool egress_ok(const char *s)
{
	struct net_rule rules[NET_RULES_MAX];
	int n;
	if (net_rules_parse(s, rules, &n, NULL) < 0)
		return false;
	for (int i = 0; i < n; i++)
		if (rules[i].allow && net_rule_in_denied_here(&rules[i]))
			return false;
	return true;
}

/* How a field is written, and read back from a manifest. */
enum field_type {
	FIELD_ID,    /* read: the id the manifest is stored under */
	FIELD_TEXT,  /* char[size] at off; read: held to ok, which rule says in words */
	FIELD_COUNT, /* int64_t at off: a whole number from 0 to 2^53 */
	FIELD_KIND,  /* "snapshot" or "suspend" */
	FIELD_STATE, /* the state's name */
	FIELD_GPU,   /* true or false */
	FIELD_HOST,  /* the host profile, a JSON object (runtime/host.h) */
	FIELD_RUNSC, /* the runsc that took it: the builder's, never read into a row */
	FIELD_LIMIT, /* int64_t at off, limit @res (lib/size.h); absent: 0, taken before limits */
	/* the source's timeout (ops/ops_timer.c): seconds, 0..LIFETIME_SECONDS_MAX */
	FIELD_TIMEOUT,
	FIELD_TIMEOUT_ACTION, /* "terminate" or "suspend" */
	FIELD_NETWORK,	      /* the source's network: "none" or "egress" */
};

enum field_flags {
	BY_STORE = 1 << 0,  /* manifest_build() writes it: read here, never built */
	INFO_NULL = 1 << 1, /* the info view shows "" as null */
	INFO_TIME = 1 << 2, /* the info view shows the ms as an RFC 3339 time, 0 as null */
	OPTIONAL = 1 << 3,  /* older manifests lack it: absent, it reads as 0 */
};

/*
 * Every field, once, in the order both views write them: @key names it in
 * the manifest (NULL: not there), @info in info.json (NULL: not shown).
 * Each text rule bounds the length below its field's size.
 */
static const struct field {
	const char *key, *info;
	enum field_type type;
	unsigned flags;
	size_t off, size;
	bool (*ok)(const char *s);
	const char *rule;
	enum res_kind res; /* FIELD_LIMIT: which one (info.json shows cpus as a CPU count) */
} fields[] = {
#define MEMBER(m) .off = offsetof(struct snapshot, m), .size = sizeof(((struct snapshot *)0)->m)
#define TEXT(k, i, fl, m, ok_, rule_)                                                              \
	{                                                                                          \
		.key = k, .info = i, .type = FIELD_TEXT, .flags = fl, MEMBER(m), .ok = ok_,        \
		.rule = rule_                                                                      \
	}
#define COUNT(k, i, fl, m)                                                                         \
	{                                                                                          \
		.key = k, .info = i, .type = FIELD_COUNT, .flags = fl, MEMBER(m)                   \
	}
#define LIMIT(k, i, m, r)                                                                          \
	{                                                                                          \
		.key = k, .info = i, .type = FIELD_LIMIT, MEMBER(m), .res = r                      \
	}
#define OTHER(k, i, t)                                                                             \
	{                                                                                          \
		.key = k, .info = i, .type = t                                                     \
	}
    OTHER("id", "id", FIELD_ID),
    TEXT("name", "name", INFO_NULL, name, label_field_ok,
	 "a snapshot name (no space or control character)"),
    OTHER("kind", "kind", FIELD_KIND),
    TEXT("sandbox_id", "sandbox_id", 0, sandbox_id, sandbox_id_ok,
	 "a sandbox id ([a-z0-9][a-z0-9._-]{0,62})"),
    COUNT("created_at_ms", "created_at", INFO_TIME, created_at),
    COUNT(NULL, "completed_at", INFO_TIME, completed_at),
    OTHER(NULL, "status", FIELD_STATE),
    TEXT(NULL, "message", 0, message, NULL, NULL),
    COUNT("pause_ms", "pause_ms", 0, pause_ms),
    COUNT("size_bytes", "size_bytes", BY_STORE, size_bytes),
    COUNT("stored_bytes", "stored_bytes", BY_STORE, stored_bytes),
    TEXT("image", NULL, 0, image, image_name_ok,
	 "an image name ([A-Za-z0-9][A-Za-z0-9._-]{0,127})"),
    TEXT("image_digest", "image_digest", INFO_NULL, image_digest, image_digest_ok,
	 "sha256: and 64 hex digits"),
    TEXT("entrypoint", NULL, 0, entrypoint, entrypoint_ok, "one line of at most 4096 bytes"),
    OTHER("runsc_version", NULL, FIELD_RUNSC),
    OTHER("host", "host", FIELD_HOST),
    OTHER("gpu", "gpu", FIELD_GPU),
    LIMIT("memory_bytes", "memory", res.memory_bytes, RES_MEMORY),
    LIMIT("cpu_milli", "cpus", res.cpu_milli, RES_CPUS),
    LIMIT("pids", "pids", res.pids, RES_PIDS),
    {.key = "timeout_s",
     .info = "timeout_s",
     .type = FIELD_TIMEOUT,
     .flags = OPTIONAL,
     MEMBER(timeout_s)},
    {.key = "timeout_action",
     .info = "timeout_action",
     .type = FIELD_TIMEOUT_ACTION,
     .flags = OPTIONAL},
    TEXT("ports", NULL, OPTIONAL, ports, ports_record_ok, "\"PORT 0\" lines (lib/ports.h)"),
    {.key = "network", .info = "network", .type = FIELD_NETWORK, .flags = OPTIONAL},
    TEXT("egress", NULL, OPTIONAL, egress, egress_ok,
	 "allow CIDR and deny CIDR lines (docs/network.md), no allow inside link-local, "
	 "multicast or the pool"),
#undef OTHER
#undef LIMIT
#undef COUNT
#undef TEXT
#undef MEMBER
};

static const char *text_of(const struct snapshot *snap, const struct field *f)
{
	return (const char *)snap + f->off;
}

static int64_t count_at(const struct snapshot *snap, const struct field *f)
{
	int64_t n;
	memcpy(&n, (const char *)snap + f->off, sizeof(n));
	return n;
}

static int64_t *count_of(struct snapshot *snap, const struct field *f)
{
	return (int64_t *)(void *)((char *)snap + f->off);
}

/* --- to JSON ----------------------------------------------------------------- */

/*
 * Field @f of @snap as the info view (@info) or the manifest shows it; NULL
 * without memory, and for a profile that is not JSON (the manifest leaves
 * it out: restorable then says the snapshot records none).
 */
static cJSON *field_value(const struct field *f, const struct snapshot *snap, bool info)
{
	cJSON *host;

	switch (f->type) {
	case FIELD_ID:
		return cJSON_CreateString(snap->id);
	case FIELD_TEXT:
		return info && (f->flags & INFO_NULL) ? json_text_or_null(text_of(snap, f))
						      : cJSON_CreateString(text_of(snap, f));
	case FIELD_COUNT:
		return info && (f->flags & INFO_TIME)
			   ? json_time_or_null(count_at(snap, f))
			   : cJSON_CreateNumber((double)count_at(snap, f));
	case FIELD_KIND:
		return cJSON_CreateString(snapshot_kind_name(snap->kind));
	case FIELD_STATE:
		return cJSON_CreateString(snapshot_state_name(snap->state));
	case FIELD_GPU:
		return cJSON_CreateBool(snap->gpu);
	case FIELD_HOST:
		host = cJSON_Parse(snap->host_json);
		return host || !info ? host : cJSON_CreateNull();
	case FIELD_LIMIT:
		return cJSON_CreateNumber(info && f->res == RES_CPUS
					      ? (double)count_at(snap, f) / 1000
					      : (double)count_at(snap, f));
	case FIELD_TIMEOUT:
		return cJSON_CreateNumber((double)snap->timeout_s);
	case FIELD_TIMEOUT_ACTION:
		return cJSON_CreateString(timeout_action_name(snap->timeout_action));
	case FIELD_NETWORK:
		return cJSON_CreateString(sandbox_network_name(snap->network));
	case FIELD_RUNSC:
		break;
	}
	return NULL;
}

cJSON *snapmeta_build(const struct snapshot *snap, const char *runsc_version)
{
	_cleanup_json_ cJSON *meta = cJSON_CreateObject();
	for (size_t i = 0; meta && i < ARRAY_SIZE(fields); i++) {
		const struct field *f = &fields[i];
		if (!f->key || (f->flags & BY_STORE))
			continue;
		cJSON *v = f->type == FIELD_RUNSC ? cJSON_CreateString(runsc_version)
						  : field_value(f, snap, false);
		if (!v && f->type == FIELD_HOST)
			continue;
		if (!json_add(meta, f->key, v))
			return NULL;
	}
	return steal_ptr(meta);
}

int snapmeta_info(const struct snapshot *snap, struct strbuf *out)
{
	_cleanup_json_ cJSON *info = cJSON_CreateObject();
	for (size_t i = 0; info && i < ARRAY_SIZE(fields); i++) {
		const struct field *f = &fields[i];
		if (f->info && !json_add(info, f->info, field_value(f, snap, true)))
			return -ENOMEM;
	}
	return json_print(out, steal_ptr(info));
}

/* --- from JSON --------------------------------------------------------------- */

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

/* The profile @host (NULL: none), checked, as the row keeps it; 1 when it named @this_host. */
static int parse_host(cJSON *host, const char *this_host, struct snapshot *snap, struct err *e)
{
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

static int parse_text(const struct field *f, const char *s, struct snapshot *snap, struct err *e)
{
	if (!s || !f->ok(s) || strlen(s) >= f->size)
		return err_set(e, EINVAL, "its %s is not %s", f->key, f->rule);
	memcpy((char *)snap + f->off, s, strlen(s) + 1);
	return 0;
}

/* Field @f of manifest @m into @snap (its id set): 0; 1 for a profile that names @this_host. */
static int parse_field(const struct field *f, cJSON *m, const char *this_host,
		       struct snapshot *snap, struct err *e)
{
	cJSON *item = cJSON_GetObjectItemCaseSensitive(m, f->key);
	const char *s = cJSON_IsString(item) ? item->valuestring : NULL;
	if (!item && (f->flags & OPTIONAL))
		return 0; /* the row was zeroed: 0, and the enum's first value */

	switch (f->type) {
	case FIELD_ID:
		if (!s || strcmp(s, snap->id) != 0)
			return err_set(e, EINVAL, "its id field is not the id it is stored under");
		return 0;
	case FIELD_TEXT:
		return parse_text(f, s, snap, e);
	case FIELD_COUNT:
		if (!snapmeta_count(m, f->key, count_of(snap, f)))
			return err_set(e, EINVAL, "its %s is not a whole number from 0 to 2^53",
				       f->key);
		return 0;
	case FIELD_KIND:
		if (!s || snapshot_kind_parse(s, &snap->kind) < 0)
			return err_set(e, EINVAL, "its kind is not snapshot or suspend");
		return 0;
	case FIELD_GPU:
		if (!cJSON_IsBool(item))
			return err_set(e, EINVAL, "its gpu is not true or false");
		snap->gpu = cJSON_IsTrue(item);
		return 0;
	case FIELD_HOST:
		return parse_host(item, this_host, snap, e);
	case FIELD_TIMEOUT:
		if (!snapmeta_count(m, f->key, &snap->timeout_s) ||
		    snap->timeout_s > LIFETIME_SECONDS_MAX)
			return err_set(e, EINVAL,
				       "its timeout_s is not a whole number from 0 to %lld",
				       LIFETIME_SECONDS_MAX);
		return 0;
	case FIELD_TIMEOUT_ACTION:
		if (!s || timeout_action_parse(s, &snap->timeout_action) < 0)
			return err_set(e, EINVAL, "its timeout_action is not terminate or suspend");
		return 0;
	case FIELD_NETWORK:
		if (!s || sandbox_network_parse(s, &snap->network) < 0)
			return err_set(e, EINVAL, "its network is not none or egress");
		return 0;
	case FIELD_LIMIT:
		if (item && (!snapmeta_count(m, f->key, count_of(snap, f)) ||
			     !res_value_ok(f->res, *count_of(snap, f))))
			return err_set(e, EINVAL, "its %s is not 0 or a %s limit runsc takes",
				       f->key, res_name(f->res));
		return 0;
	case FIELD_STATE:
	case FIELD_RUNSC:
		break;
	}
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
	if (!generated_id_ok(id, "snap-"))
		return err_set(e, EINVAL, "its id is not snap- and 16 hex digits");
	memcpy(out->id, id, strlen(id) + 1);
	int claims_here = 0;
	for (size_t i = 0; i < ARRAY_SIZE(fields) && rc >= 0; i++) {
		rc = fields[i].key ? parse_field(&fields[i], m, this_host, out, e) : 0;
		claims_here |= rc > 0;
	}
	if (rc < 0)
		return rc;
	if (out->created_at < 1 || out->created_at > now_ms + SNAPMETA_SKEW_MS)
		return err_set(e, EINVAL,
			       "its created_at_ms is before 1970 or more than %d s ahead of this "
			       "host's clock",
			       SNAPMETA_SKEW_MS / 1000);
	out->completed_at = out->created_at;
	out->state = SNAP_COMPLETED;
	return claims_here;
}

int snapmeta_sizes(const char *json, struct snapshot *snap)
{
	_cleanup_json_ cJSON *m = NULL;
	int rc = manifest_json(json, snap->id, &m, NULL);
	if (rc < 0)
		return -EINVAL;
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
		if (fields[i].flags & BY_STORE)
			snapmeta_count(m, fields[i].key, count_of(snap, &fields[i]));
	return 0;
}
