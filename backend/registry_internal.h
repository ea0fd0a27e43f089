/*
 * registry_internal.h - what registry.c (enum names, schema and migration,
 * statements, row codecs, open and close), registry_sandbox.c and
 * registry_snapshot.c share. Not for other modules: they use registry.h.
 *
 * struct registry is written once by registry_open(); its one connection is
 * in SQLite's serialized mode, so SQLite's own mutex guards every use.
 */
#ifndef SNAPFS_REGISTRY_INTERNAL_H
#define SNAPFS_REGISTRY_INTERNAL_H

#include <sqlite3.h>

#include "backend/registry.h"

struct registry {
	sqlite3 *db; /* one connection, serialized mode: SQLite's mutex guards it */
};

/* Column order shared by reg_sandbox_bind() and reg_sandbox_read(). */
#define SB_COLS                                                                                    \
	"id, runtime_id, image, image_digest, entrypoint, env, gpu, state, message, created_at, "  \
	"parent_snapshot, restore_snapshot, pid, owner_uid, owner_gid"
#define SB_PARAMS "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15"
#define SB_SELECT "SELECT " SB_COLS " FROM sandboxes "

/* Column order shared by reg_snapshot_bind() and reg_snapshot_read(). */
#define SNAP_COLS                                                                                  \
	"id, name, kind, sandbox_id, created_at, completed_at, state, message, pause_ms, "         \
	"size_bytes, stored_bytes, image, image_digest, entrypoint, host_json, gpu, env, "         \
	"owner_uid, owner_gid"
#define SNAP_PARAMS                                                                                \
	"?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19"
#define SNAP_SELECT "SELECT " SNAP_COLS " FROM snapshots "
/* Fill ?1.. of @st from the record @obj, in SB_COLS / SNAP_COLS order. */
int reg_sandbox_bind(sqlite3_stmt *st, const void *obj);
int reg_snapshot_bind(sqlite3_stmt *st, const void *obj);
/* Read the row @st is on (SB_SELECT / SNAP_SELECT) into a record; -EIO for a foreign value. */
int reg_sandbox_read(sqlite3_stmt *st, struct sandbox *sb);
int reg_snapshot_read(sqlite3_stmt *st, struct snapshot *snap);
/* Bind the string @key as ?1. */
int reg_bind_key(sqlite3_stmt *st, const void *key);

/*
 * Run a query, with @key (if not NULL) as ?1, and call @row for each row
 * until it returns non-zero, which is returned; 0 after the last row.
 */
int reg_query(struct registry *reg, const char *sql, const char *key,
	      int (*row)(sqlite3_stmt *st, void *ctx), void *ctx);
/* An INSERT whose parameters @bind fills from @obj. */
int reg_insert(struct registry *reg, const char *sql,
	       int (*bind)(sqlite3_stmt *st, const void *obj), const void *obj);
/* For UPDATE and DELETE statements that end in RETURNING: -ENOENT if no row matched. */
int reg_change(struct registry *reg, const char *sql,
	       int (*bind)(sqlite3_stmt *st, const void *obj), const void *obj);
/* A @row for reg_query() that stops at the first row: the query returns 1 if there is one. */
int reg_found_row(sqlite3_stmt *st, void *ctx);

#endif
