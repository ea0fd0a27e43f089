#include "runtime/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util.h"

static const char *const journal_names[] = {
    [JOURNAL_EVENTS] = "events.jsonl",
    [JOURNAL_ERRORS] = "errors.jsonl",
};

static struct {
	int fd[2];
	char path[2][PATH_MAX];
} journal = {{-1, -1}, {"", ""}};

int journal_open(const char *state_dir)
{
	for (int k = JOURNAL_EVENTS; k <= JOURNAL_ERRORS; k++) {
		int rc = xsnprintf(journal.path[k], sizeof(journal.path[k]), "%s/%s", state_dir,
				   journal_names[k]);
		if (rc < 0)
			return rc;
		/* Events and errors name sandboxes and commands: root's alone (docs/design.md). */
		journal.fd[k] = open(journal.path[k],
				     O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (journal.fd[k] < 0)
			return -errno;
		/* One an earlier version made 0644 keeps its mode through O_CREAT. */
		if (fchmod(journal.fd[k], 0600) < 0)
			return -errno;
	}
	return 0;
}

void journal_close(void)
{
	for (int k = JOURNAL_EVENTS; k <= JOURNAL_ERRORS; k++) {
		if (journal.fd[k] >= 0)
			close(journal.fd[k]);
		journal.fd[k] = -1;
	}
}

const char *journal_path(enum journal_kind kind)
{
	return journal.path[kind];
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
	int rc = 0;
	ssize_t n = write(journal.fd[kind], text, len + 1);
	if (n < 0)
		rc = -errno;
	else if ((size_t)n != len + 1)
		rc = -EIO;
	free(text);
	return rc;
}
