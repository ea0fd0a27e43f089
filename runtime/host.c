#include "runtime/host.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "backend/registry/registry.h"
#include "lib/names.h"
#include "lib/util.h"
#include "runtime/gpu/gpu.h"

#define CPU_FLAGS_MAX 8192
#define RUNSC_PLATFORM "systrap"
#define HOST_ID_FILE "host-id"
#define HOST_ID_PREFIX "host-"
/* The longest name of a profile member a manifest may carry, and how many it may carry. */
#define MEMBER_NAME_MAX 32
#define MEMBERS_MAX 32

/* Set once by host_id_init(), before any thread reads it. */
static char this_host[HOST_ID_MAX];

static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static char cpu_flags[CPU_FLAGS_MAX];

static int compare_words(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sort the space-separated words of @s in place. */
static void sort_words(char *s)
{
	char *words[1024];
	size_t n = 0;
	char *save = NULL;
	_cleanup_free_ char *copy = strdup(s);
	if (!copy)
		return;
	for (char *w = strtok_r(copy, " \t", &save); w && n < ARRAY_SIZE(words);
	     w = strtok_r(NULL, " \t", &save))
		words[n++] = w;
	qsort(words, n, sizeof(words[0]), compare_words);
	size_t off = 0;
	for (size_t i = 0; i < n; i++)
		off +=
		    (size_t)snprintf(s + off, CPU_FLAGS_MAX - off, "%s%s", i ? " " : "", words[i]);
}

static void read_cpu_flags(void)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/cpuinfo", "re");
	char line[CPU_FLAGS_MAX];
	while (f && fgets(line, sizeof(line), f)) {
		if (!str_has_prefix(line, "flags"))
			continue;
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		rstrip(colon + 1);
		snprintf(cpu_flags, sizeof(cpu_flags), "%s", colon + 1 + (colon[1] == ' '));
		sort_words(cpu_flags);
		return;
	}
}

/* --- this host's id ------------------------------------------------------ */

static int make_host_id(const char *path, struct err *e)
{
	char hex[GENERATED_ID_HEX + 1], text[HOST_ID_MAX + 1];
	int rc = random_hex(hex, GENERATED_ID_HEX);
	if (rc == 0) {
		snprintf(this_host, sizeof(this_host), HOST_ID_PREFIX "%s", hex);
		snprintf(text, sizeof(text), "%s\n", this_host);
		rc = write_file_durable(path, text, strlen(text));
	}
	if (rc < 0) {
		this_host[0] = '\0';
		return err_set(e, -rc, "cannot make this host's id in %s: %s", path, strerror(-rc));
	}
	info("this host's id is %s (kept in %s)", this_host, path);
	return 0;
}

int host_id_init(const char *state_dir, struct err *e)
{
	char path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	if (xsnprintf(path, sizeof(path), "%s/" HOST_ID_FILE, state_dir) < 0)
		return err_set(e, ENAMETOOLONG, "state directory path is too long");
	int rc = read_file(path, &text, NULL, HOST_ID_MAX + 1);
	if (rc == -ENOENT)
		return make_host_id(path, e);
	if (rc < 0 && rc != -EFBIG)
		return err_set(e, -rc, "cannot read this host's id from %s: %s", path,
			       strerror(-rc));
	if (rc == 0)
		rstrip(text);
	if (rc < 0 || !generated_id_ok(text, HOST_ID_PREFIX))
		return err_set(e, EINVAL,
			       "%s does not hold a host id (" HOST_ID_PREFIX
			       " and 16 hex digits); it names this host's snapshots, so snapfs "
			       "will not replace it",
			       path);
	memcpy(this_host, text, strlen(text) + 1);
	return 0;
}

const char *host_id(void)
{
	return this_host;
}

static const char *json_str(const cJSON *obj, const char *key)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsString(item) ? item->valuestring : "";
}

void host_origin(const char *host_json, char out[HOST_ID_MAX])
{
	cJSON *profile = cJSON_Parse(host_json);
	const char *id = json_str(profile, "host_id");
	/* A row's profile was checked on the way in; a longer id is none. */
	if (xsnprintf(out, HOST_ID_MAX, "%s", id) < 0)
		out[0] = '\0';
	cJSON_Delete(profile);
}

bool host_is_this(const char *host_json)
{
	char origin[HOST_ID_MAX];
	host_origin(host_json, origin);
	return this_host[0] && strcmp(origin, this_host) == 0;
}

/* --- a profile from a manifest -------------------------------------------- */

static bool member_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	return n > 0 && n <= MEMBER_NAME_MAX &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

/* One line of text, or a list of at most GPU_MAX (the longest list a profile has). */
static bool member_ok(const cJSON *m)
{
	if (cJSON_IsString(m))
		return text_ok(m->valuestring, HOST_JSON_MAX);
	if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) > GPU_MAX)
		return false;
	const cJSON *item;
	cJSON_ArrayForEach(item, m)
	{
		if (!cJSON_IsString(item) || !text_ok(item->valuestring, HOST_JSON_MAX))
			return false;
	}
	return true;
}

/* Does a member before @m have its name? Readers see the first one only. */
static bool named_before(const cJSON *profile, const cJSON *m)
{
	for (const cJSON *p = profile->child; p && p != m; p = p->next)
		if (strcmp(p->string, m->string) == 0)
			return true;
	return false;
}

int host_profile_check(const cJSON *profile, struct err *e)
{
	if (!cJSON_IsObject(profile))
		return err_set(e, EINVAL, "its host profile is not a JSON object");
	if (cJSON_GetArraySize(profile) > MEMBERS_MAX)
		return err_set(e, EINVAL, "its host profile has more than %d members", MEMBERS_MAX);
	const cJSON *m;
	cJSON_ArrayForEach(m, profile)
	{
		/* Names are checked first: a bad one is not quoted in a message. */
		if (!member_name_ok(m->string))
			return err_set(e, EINVAL, "its host profile has a member with a bad name");
		/*
		 * A second host_id would stay when the first is dropped for
		 * naming this host, and be read as the origin.
		 */
		if (named_before(profile, m))
			return err_set(e, EINVAL, "its host profile has two members %s", m->string);
		if (!member_ok(m))
			return err_set(e, EINVAL,
				       "its host profile's %s is not one line of text or a list "
				       "of at most %d",
				       m->string, GPU_MAX);
	}
	const char *id = json_str(profile, "host_id");
	if (cJSON_GetObjectItemCaseSensitive(profile, "host_id") &&
	    !generated_id_ok(id, HOST_ID_PREFIX))
		return err_set(e, EINVAL, "its host profile's host_id is not a host id");
	return 0;
}

/* --- the profile ------------------------------------------------------------ */

int host_profile_json(const char *runsc_version, struct strbuf *out)
{
	pthread_once(&cpu_once, read_cpu_flags);
	struct utsname un;
	uname(&un);
	cJSON *obj = cJSON_CreateObject();
	if (!obj)
		return -ENOMEM;
	cJSON_AddStringToObject(obj, "host_id", this_host);
	cJSON_AddStringToObject(obj, "cpu_features", cpu_flags);
	cJSON_AddStringToObject(obj, "runsc_version", runsc_version);
	cJSON_AddStringToObject(obj, "platform", RUNSC_PLATFORM);
	cJSON_AddStringToObject(obj, "kernel", un.release);
	struct gpu_host gpu;
	gpu_host_probe("", &gpu);
	if (gpu_profile_add(obj, &gpu) < 0) {
		cJSON_Delete(obj);
		return -ENOMEM;
	}
	_cleanup_free_ char *text = cJSON_PrintUnformatted(obj);
	cJSON_Delete(obj);
	if (!text)
		return -ENOMEM;
	strbuf_adds(out, text);
	return strbuf_error(out);
}

/* Flags in @recorded missing from this host, as one line; returns how many. */
static int missing_cpu_features(const char *recorded, struct strbuf *out)
{
	_cleanup_free_ char *copy = strdup(recorded);
	char host[CPU_FLAGS_MAX + 2];
	snprintf(host, sizeof(host), " %s ", cpu_flags);
	int missing = 0;
	char *save = NULL;
	if (!copy)
		return -ENOMEM;
	for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		char needle[128];
		if (xsnprintf(needle, sizeof(needle), " %s ", w) < 0 || strstr(host, needle))
			continue;
		strbuf_adds(out, missing ? " " : "CPU features missing on this host: ");
		strbuf_adds(out, w);
		missing++;
	}
	if (missing)
		strbuf_adds(out, "\n");
	int rc = strbuf_error(out);
	return rc < 0 ? rc : missing;
}

int host_compare(const char *recorded_json, const char *runsc_version, struct strbuf *out)
{
	pthread_once(&cpu_once, read_cpu_flags);
	cJSON *rec = cJSON_Parse(recorded_json);
	if (!rec) {
		strbuf_adds(out, "the snapshot records no readable host profile\n");
		int rc = strbuf_error(out);
		return rc < 0 ? rc : 1;
	}
	int diffs = 0;
	const char *rv = json_str(rec, "runsc_version");
	if (strcmp(rv, runsc_version) != 0) {
		strbuf_addf(out, "runsc version differs: snapshot %s, host %s\n", rv,
			    runsc_version);
		diffs++;
	}
	const char *platform = json_str(rec, "platform");
	if (strcmp(platform, RUNSC_PLATFORM) != 0) {
		strbuf_addf(out, "platform differs: snapshot %s, host %s\n", platform,
			    RUNSC_PLATFORM);
		diffs++;
	}
	int missing = missing_cpu_features(json_str(rec, "cpu_features"), out);
	cJSON_Delete(rec);
	if (missing < 0)
		return missing;
	return diffs + (missing > 0);
}
