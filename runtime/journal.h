/*
 * journal.h - the two append-only JSON-lines logs under --state that the
 * tree shows as `events` (one line per state change) and `errors` (one line
 * per refused or failed request).
 *
 * Each append is one write(2) of one whole line on an O_APPEND descriptor,
 * so readers (tail -f through the mount) never see half a line. The files
 * grow for the daemon's lifetime and survive restarts.
 *
 * Thread-safety: journal_* may be called from any thread.
 * Ownership: the journal owns the object passed to journal_append() (it is
 * freed whether or not the append succeeds).
 */
#ifndef SNAPFS_JOURNAL_H
#define SNAPFS_JOURNAL_H

#include <cjson/cJSON.h>

enum journal_kind {
	JOURNAL_EVENTS,
	JOURNAL_ERRORS,
};

int journal_open(const char *state_dir);
void journal_close(void);
const char *journal_path(enum journal_kind kind);
/* A new entry: an object whose first member is "time" (RFC 3339). NULL on ENOMEM. */
cJSON *journal_entry(void);
/* Print @obj as one line and append it. Takes ownership of @obj (NULL: -ENOMEM). */
int journal_append(enum journal_kind kind, cJSON *obj);

#endif
