/*
 * runsc_output.c - what runsc prints, read: the pids `runsc ps
 * --format=json` lists, the status and pid `runsc state` gives, and
 * runsc's words for its states. runsc.c runs the commands.
 */
#include "runtime/runsc/runsc.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <string.h>

int runsc_parse_pids(const char *text, int *pids, size_t max, size_t *n)
{
	cJSON *root = cJSON_Parse(text);
	const cJSON *p;
	int rc = cJSON_IsArray(root) ? 0 : -EINVAL;
	*n = 0;
	cJSON *arr = rc == 0 ? root : NULL;
	cJSON_ArrayForEach(p, arr)
	{
		if (!cJSON_IsNumber(p) || p->valuedouble < 1 || p->valuedouble > INT_MAX) {
			rc = -EINVAL;
			break;
		}
		if (*n == max) {
			rc = -E2BIG;
			break;
		}
		pids[(*n)++] = (int)p->valuedouble;
	}
	cJSON_Delete(root);
	return rc;
}

/* runsc's words for its states (gVisor's container.Status), in enum runsc_status order. */
static const char *const status_names[] = {
    [RUNSC_CREATING] = "creating", [RUNSC_CREATED] = "created", [RUNSC_RUNNING] = "running",
    [RUNSC_PAUSED] = "paused",	   [RUNSC_STOPPED] = "stopped", [RUNSC_GONE] = "gone",
    [RUNSC_UNKNOWN] = "unknown",
};

const char *runsc_status_name(enum runsc_status s)
{
	return (size_t)s < ARRAY_SIZE(status_names) ? status_names[s] : "unknown";
}

/* One of runsc's own words (not "gone"): its status; RUNSC_UNKNOWN for any other. */
static enum runsc_status status_parse(const char *word)
{
	for (size_t s = 0; s < RUNSC_GONE; s++)
		if (!strcmp(word, status_names[s]))
			return (enum runsc_status)s;
	return RUNSC_UNKNOWN;
}

int runsc_parse_state(const char *text, enum runsc_status *status, pid_t *pid)
{
	cJSON *root = cJSON_Parse(text);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "status");
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "pid");
	int rc = cJSON_IsString(st) && cJSON_IsNumber(p) ? 0 : -EINVAL;
	if (rc == 0) {
		*status = status_parse(st->valuestring);
		if (pid)
			*pid = (pid_t)p->valuedouble;
	}
	cJSON_Delete(root);
	return rc;
}
