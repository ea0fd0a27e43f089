/*
 * journal.h - the two append-only JSON-lines logs under --state that the
 * tree shows as `events` (one line per state change) and `errors` (one line
 * per refused or failed request).
 *
 * Each append is one write(2) of one whole line on an O_APPEND descriptor,
 * so readers (tail -f through the mount) never see half a line. Each file
 * is capped (--journal-max, JOURNAL_MAX_DEFAULT): past it, it becomes
 * events.jsonl.1 (errors.jsonl.1) and a new one starts, so the journals
 * keep their newest lines across restarts and never grow without bound.
 * The tree reads them through their logfile (lib/logfile.h), whose offsets
 * only grow across a rotation.
 *
 * Thread-safety: journal_* may be called from any thread.
 * Ownership: the journal owns the object passed to journal_append() (it is
 * freed whether or not the append succeeds).
 */
#ifndef SNAPFS_JOURNAL_H
#define SNAPFS_JOURNAL_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "lib/logfile.h"

/* Bytes per generation of each journal, and of snapfs.log, unless --journal-max says. */
#define JOURNAL_MAX_DEFAULT (64ll << 20)

enum journal_kind {
	JOURNAL_EVENTS,
	JOURNAL_ERRORS,
};

/* Open the journals in @state_dir, each rotated past @max_bytes (0: JOURNAL_MAX_DEFAULT). */
int journal_open(const char *state_dir, int64_t max_bytes);
void journal_close(void);
struct logfile *journal_file(enum journal_kind kind);
/* A new entry: an object whose first member is "time" (RFC 3339). NULL on ENOMEM. */
cJSON *journal_entry(void);
/* Print @obj as one line and append it. Takes ownership of @obj (NULL: -ENOMEM). */
int journal_append(enum journal_kind kind, cJSON *obj);
/* Lines @kind's journal took since the daemon started (the metrics' counters). */
uint64_t journal_lines(enum journal_kind kind);

#endif
