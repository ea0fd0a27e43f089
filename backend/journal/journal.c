#include "backend/journal/journal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"

static const char *const journal_names[] = {
    [JOURNAL_EVENTS] = "events.jsonl",
    [JOURNAL_ERRORS] = "errors.jsonl",
};

static struct logfile journals[] = {
    [JOURNAL_EVENTS] = LOGFILE_INIT,
    [JOURNAL_ERRORS] = LOGFILE_INIT,
};

/* Lines appended since the daemon started: the metrics' counters, which a rotation does not reset.
 */
static _Atomic uint64_t appended[] = {[JOURNAL_EVENTS] = 0, [JOURNAL_ERRORS] = 0};

int journal_open(const char *state_dir, int64_t max_bytes)
{
	char path[PATH_MAX];
	for (int k = JOURNAL_EVENTS; k <= JOURNAL_ERRORS; k++) {
		int rc = xsnprintf(path, sizeof(path), "%s/%s", state_dir, journal_names[k]);
		if (rc < 0)
			return rc;
		rc = logfile_open(&journals[k], path,
				  max_bytes > 0 ? max_bytes : JOURNAL_MAX_DEFAULT, 0600, -1);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void journal_close(void)
{
	for (int k = JOURNAL_EVENTS; k <= JOURNAL_ERRORS; k++)
		logfile_close(&journals[k]);
}

struct logfile *journal_file(enum journal_kind kind)
{
	return &journals[kind];
}

cJSON *journal_entry(void)
{
	char when[32];
	format_time(now_ms(), when);
	cJSON *obj = cJSON_CreateObject();
	if (obj && !cJSON_AddStringToObject(obj, "time", when)) {
		cJSON_Delete(obj);
		return NULL;
	}
	return obj;
}

int journal_append(enum journal_kind kind, cJSON *obj)
{
	if (!obj)
		return -ENOMEM;
	char *text = cJSON_PrintUnformatted(obj);
	cJSON_Delete(obj);
	if (!text)
		return -ENOMEM;
	size_t len = strlen(text);
	text[len] = '\n'; /* replace the NUL: write() takes a length */
	int rc = logfile_append(&journals[kind], text, len + 1);
	free(text);
	if (rc == 0)
		appended[kind]++;
	return rc;
}

uint64_t journal_lines(enum journal_kind kind)
{
	return appended[kind];
}
