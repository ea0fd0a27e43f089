/*
 * registry_internal.h - what the registry's files share: registry.c (enum
 * names, statements, row codecs), registry_schema.c (schema and
 * migration), registry_open.c (open and close, above the others),
 * registry_sandbox.c and registry_snapshot.c (each table's queries). Not
 * for other modules: they use registry.h.
 *
 * struct registry is written once by registry_open(); its one connection is
 * in SQLite's serialized mode, so SQLite's own mutex guards every use.
 */
#ifndef SNAPFS_REGISTRY_INTERNAL_H
#define SNAPFS_REGISTRY_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>

#include "backend/registry/registry.h"

/* Statement texts kept prepared (registry.c): more than registry_*.c use. */
#define STMT_KEPT 32

struct registry {
	sqlite3 *db; /* one connection, serialized mode: SQLite's mutex guards it */
	pthread_mutex_t
	    stmt_lock; /* guards stmt[]; taken under SQLite's mutex, never the reverse */
	struct {
		sqlite3_stmt *st; /* NULL: a free slot */
		bool busy;	  /* a call is using it */
	} stmt[STMT_KEPT];
};

/* The sandboxes' columns, in the order of registry.c's sandbox_cols[]. */
#define SB_COLS                                                                                    \
	"id, runtime_id, image, image_digest, entrypoint, env, gpu, state, message, created_at, "  \
	"parent_snapshot, restore_snapshot, pid, owner_uid, owner_gid, "                           \
	"memory_bytes, cpu_milli, pids, "                                                          \
	"timeout_s, timeout_action, deadline_at, autosnap_every_s, autosnap_keep, "                \
	"autosnap_next_at, "                                                                       \
	"ports, network, egress, exit_code, changed_at"
#define SB_PARAMS                                                                                  \
	"?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "                       \
	"?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29"
#define SB_SELECT "SELECT " SB_COLS " FROM sandboxes "

/* The snapshots' columns, in the order of registry.c's snapshot_cols[]. */
#define SNAP_COLS                                                                                  \
	"id, name, kind, sandbox_id, created_at, completed_at, state, message, pause_ms, "         \
	"size_bytes, stored_bytes, image, image_digest, entrypoint, host_json, gpu, env, "         \
	"owner_uid, owner_gid, "                                                                   \
	"memory_bytes, cpu_milli, pids, "                                                          \
	"timeout_s, timeout_action, "                                                              \
	"ports, network, egress, autosnap, changed_at"
#define SNAP_PARAMS                                                                                \
	"?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, "   \
	"?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29"
#define SNAP_SELECT "SELECT " SNAP_COLS " FROM snapshots "
/* What a listing shows (registry_snapshot_each_listed()), all in the index snapshots_listed. */
#define SNAP_LISTED_COLS "id, state, sandbox_id, owner_uid, name, created_at"

/* Which table's records a statement binds or reads (registry.c holds their columns). */
enum reg_table {
	REG_SANDBOXES,	      /* struct sandbox, SB_COLS */
	REG_SNAPSHOTS,	      /* struct snapshot, SNAP_COLS */
	REG_KEY,	      /* no record: the string given is ?1 */
	REG_SNAPSHOTS_LISTED, /* struct snapshot, SNAP_LISTED_COLS only */
};

/*
 * Run a query, with @key (if not NULL) as ?1, and call @row for each row
 * until it returns non-zero, which is returned; 0 after the last row.
 */
int reg_query(struct registry *reg, const char *sql, const char *key,
	      int (*row)(sqlite3_stmt *st, void *ctx), void *ctx);
/* Run @sql (one or more statements, no rows): 0, or -EIO logged. */
int reg_exec(struct registry *reg, const char *sql);
/* Bring the file @path opened as @reg to this snapfs's schema (registry_schema.c). */
int reg_migrate(struct registry *reg, const char *path);
/* A @row for reg_query() that copies the first row's first column into @ctx (REG_WORD_MAX bytes).
 */
#define REG_WORD_MAX 16
int reg_word_row(sqlite3_stmt *st, void *ctx);
/* A @row for reg_query() that stops at the first row: the query returns 1 if there is one. */
int reg_found_row(sqlite3_stmt *st, void *ctx);
/* Copy the first row of @sql (@key as ?1) into @out, a record of table @t; -ENOENT: none. */
int reg_get(struct registry *reg, const char *sql, const char *key, enum reg_table t, void *out);

/* A walk's callback: one of the two, for the table the query reads. */
struct reg_walk {
	int (*sandbox)(const struct sandbox *sb, void *arg);
	int (*snapshot)(const struct snapshot *snap, void *arg);
	void *arg;
	bool listed; /* a snapshot walk of SNAP_LISTED_COLS: the other fields are 0 */
};
/* reg_query() with each row read into a record and given to @fn; the record lives on the heap. */
int reg_walk(struct registry *reg, const char *sql, const char *key, struct reg_walk fn);

/* An INSERT whose parameters are @rec's fields (a record of table @t). */
int reg_insert(struct registry *reg, const char *sql, enum reg_table t, const void *rec);
/* An UPDATE or DELETE that ends in RETURNING: -ENOENT if no row matched. */
int reg_change(struct registry *reg, const char *sql, enum reg_table t, const void *rec);

#endif
