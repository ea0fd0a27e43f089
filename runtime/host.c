#include "runtime/host.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "lib/util.h"
#include "runtime/gpu.h"

#define CPU_FLAGS_MAX 8192
#define RUNSC_PLATFORM "systrap"

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

int host_profile_json(const char *runsc_version, struct strbuf *out)
{
	pthread_once(&cpu_once, read_cpu_flags);
	struct utsname un;
	uname(&un);
	cJSON *obj = cJSON_CreateObject();
	if (!obj)
		return -ENOMEM;
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
	return strbuf_adds(out, text);
}

static const char *json_str(const cJSON *obj, const char *key)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsString(item) ? item->valuestring : "";
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
	return missing;
}

int host_compare(const char *recorded_json, const char *runsc_version, struct strbuf *out)
{
	pthread_once(&cpu_once, read_cpu_flags);
	cJSON *rec = cJSON_Parse(recorded_json);
	if (!rec) {
		strbuf_adds(out, "the snapshot records no readable host profile\n");
		return 1;
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
