/*
 * registry_schema.c - the registry's schema and its migrations: the SQL
 * that makes a new registry file, and one step per older version, applied
 * in turn when snapfs opens a file an older snapfs wrote. A new column
 * goes into schema_sql, into a new migrate_vN_sql step, and into
 * registry.c's column tables (sandbox_cols[], snapshot_cols[]) with
 * registry_internal.h's SB_COLS / SNAP_COLS, in the same order.
 */
#include "backend/registry/registry_internal.h"

#include <errno.h>
#include <sqlite3.h>

#include "lib/util.h"

#define SCHEMA_VERSION 10
#define STR_(x) #x
#define STR(x) STR_(x)

/* --- SQL -------------------------------------------------------------------- */

/* The lifetime's columns (ops/ops_timer.c) in the schema; migrate_v3_sql adds them. */
#define LIFETIME_TIMEOUT_COLS                                                                      \
	" timeout_s INTEGER NOT NULL DEFAULT 0,"                                                   \
	" timeout_action TEXT NOT NULL DEFAULT 'terminate'"
#define LIFETIME_SANDBOX_COLS                                                                      \
	LIFETIME_TIMEOUT_COLS ", deadline_at INTEGER NOT NULL DEFAULT 0,"                          \
			      " autosnap_every_s INTEGER NOT NULL DEFAULT 0,"                      \
			      " autosnap_keep INTEGER NOT NULL DEFAULT 0,"                         \
			      " autosnap_next_at INTEGER NOT NULL DEFAULT 0"

/* Published ports (ops/ops_ports.c): a sandbox's, and the source's in a snapshot; v4 adds it.
 */
#define PORTS_COL " ports TEXT NOT NULL DEFAULT ''"
/* The network's columns of both tables (runtime/net/net.h); migrate_v5_sql adds them. */
#define NETWORK_COLS ", network TEXT NOT NULL DEFAULT 'none', egress TEXT NOT NULL DEFAULT ''"
/* A snapshot the autosnapshot timer took (ops/ops_timer.c); migrate_v7_sql adds it. */
#define AUTOSNAP_COL " autosnap INTEGER NOT NULL DEFAULT 0"
/* A sandbox's entrypoint's exit status, "" when not seen (ops/ops_sandbox.c); v8 adds it. */
#define EXIT_CODE_COL " exit_code TEXT NOT NULL DEFAULT ''"
/* When what the tree shows of a row last changed (its files' mtime); migrate_v9_sql adds it. */
#define CHANGED_AT_COL " changed_at INTEGER NOT NULL DEFAULT 0"

/*
 * The snapshots in creation order, with what a listing shows: the index
 * covers registry_snapshot_each_listed(); migrate_v6_sql adds it in place
 * of snapshots_created (created_at, id), which it also serves, and
 * migrate_v9_sql makes it again with the name (snapshots/index, by-name/).
 */
#define SNAPSHOTS_LISTED_INDEX                                                                     \
	"CREATE INDEX IF NOT EXISTS snapshots_listed ON snapshots"                                 \
	" (created_at, id, state, sandbox_id, owner_uid, name);"

static const char schema_sql[] =
    "BEGIN IMMEDIATE;"
    "CREATE TABLE IF NOT EXISTS sandboxes ("
    " id TEXT PRIMARY KEY NOT NULL, runtime_id TEXT NOT NULL, image TEXT NOT NULL,"
    " image_digest TEXT NOT NULL, entrypoint TEXT NOT NULL, env TEXT NOT NULL,"
    " gpu INTEGER NOT NULL, state TEXT NOT NULL, message TEXT NOT NULL,"
    " created_at INTEGER NOT NULL, parent_snapshot TEXT NOT NULL,"
    " restore_snapshot TEXT NOT NULL, pid INTEGER NOT NULL,"
    " owner_uid INTEGER NOT NULL DEFAULT 0, owner_gid INTEGER NOT NULL DEFAULT 0,"
    " memory_bytes INTEGER NOT NULL DEFAULT 0, cpu_milli INTEGER NOT NULL DEFAULT 0,"
    " pids INTEGER NOT NULL DEFAULT 0," LIFETIME_SANDBOX_COLS "," PORTS_COL NETWORK_COLS
    "," EXIT_CODE_COL "," CHANGED_AT_COL ");"
    "CREATE INDEX IF NOT EXISTS sandboxes_created ON sandboxes (created_at, id);"
    "CREATE INDEX IF NOT EXISTS sandboxes_parent ON sandboxes (parent_snapshot, created_at, id);"
    "CREATE INDEX IF NOT EXISTS sandboxes_restore ON sandboxes (restore_snapshot);"
    "CREATE TABLE IF NOT EXISTS snapshots ("
    " id TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,"
    " sandbox_id TEXT NOT NULL, created_at INTEGER NOT NULL, completed_at INTEGER NOT NULL,"
    " state TEXT NOT NULL, message TEXT NOT NULL, pause_ms INTEGER NOT NULL,"
    " size_bytes INTEGER NOT NULL, stored_bytes INTEGER NOT NULL, image TEXT NOT NULL,"
    " image_digest TEXT NOT NULL, entrypoint TEXT NOT NULL, host_json TEXT NOT NULL,"
    " gpu INTEGER NOT NULL, env TEXT NOT NULL,"
    " owner_uid INTEGER NOT NULL DEFAULT 0, owner_gid INTEGER NOT NULL DEFAULT 0,"
    " memory_bytes INTEGER NOT NULL DEFAULT 0, cpu_milli INTEGER NOT NULL DEFAULT 0,"
    " pids INTEGER NOT NULL DEFAULT 0," LIFETIME_TIMEOUT_COLS "," PORTS_COL NETWORK_COLS
    "," AUTOSNAP_COL "," CHANGED_AT_COL ");" SNAPSHOTS_LISTED_INDEX
    "CREATE INDEX IF NOT EXISTS snapshots_sandbox ON snapshots (sandbox_id, created_at, id);"
    "PRAGMA user_version = " STR(SCHEMA_VERSION) "; COMMIT;";

/* Version 1 had no owners: its rows were made when only root could reach the mount. */
static const char migrate_v1_sql[] =
    "BEGIN IMMEDIATE;"
    "ALTER TABLE sandboxes ADD COLUMN owner_uid INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE sandboxes ADD COLUMN owner_gid INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE snapshots ADD COLUMN owner_uid INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE snapshots ADD COLUMN owner_gid INTEGER NOT NULL DEFAULT 0;"
    "PRAGMA user_version = 2; COMMIT;";

/*
 * Version 2 had no limits: its sandboxes were started without any, which
 * 0 (unlimited) says truthfully.
 */
static const char migrate_v2_sql[] =
    "BEGIN IMMEDIATE;"
    "ALTER TABLE sandboxes ADD COLUMN memory_bytes INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE sandboxes ADD COLUMN cpu_milli INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE sandboxes ADD COLUMN pids INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE snapshots ADD COLUMN memory_bytes INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE snapshots ADD COLUMN cpu_milli INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE snapshots ADD COLUMN pids INTEGER NOT NULL DEFAULT 0;"
    "PRAGMA user_version = 3; COMMIT;";

/* Version 3 had no lifetime: its sandboxes have no timeout and take no periodic snapshots. */
static const char migrate_v3_sql[] =
    "BEGIN IMMEDIATE;"
    "ALTER TABLE sandboxes ADD COLUMN timeout_s INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE sandboxes ADD COLUMN timeout_action TEXT NOT NULL DEFAULT 'terminate';"
    "ALTER TABLE sandboxes ADD COLUMN deadline_at INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE sandboxes ADD COLUMN autosnap_every_s INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE sandboxes ADD COLUMN autosnap_keep INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE sandboxes ADD COLUMN autosnap_next_at INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE snapshots ADD COLUMN timeout_s INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE snapshots ADD COLUMN timeout_action TEXT NOT NULL DEFAULT 'terminate';"
    "PRAGMA user_version = 4; COMMIT;";
/* Version 4 had no published ports. */
static const char migrate_v4_sql[] =
    "BEGIN IMMEDIATE; ALTER TABLE sandboxes ADD COLUMN" PORTS_COL
    "; ALTER TABLE snapshots ADD COLUMN" PORTS_COL "; PRAGMA user_version = 5; COMMIT;";

/* Version 5 had no network: its sandboxes ran with none. */
static const char migrate_v5_sql[] =
    "BEGIN IMMEDIATE;"
    "ALTER TABLE sandboxes ADD COLUMN network TEXT NOT NULL DEFAULT 'none';"
    "ALTER TABLE sandboxes ADD COLUMN egress TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE snapshots ADD COLUMN network TEXT NOT NULL DEFAULT 'none';"
    "ALTER TABLE snapshots ADD COLUMN egress TEXT NOT NULL DEFAULT '';"
    "PRAGMA user_version = 6; COMMIT;";

/* Version 6 listed snapshots from their rows (docs/bench/scale.md). */
static const char migrate_v6_sql[] =
    "BEGIN IMMEDIATE; DROP INDEX IF EXISTS snapshots_created;" SNAPSHOTS_LISTED_INDEX
    "PRAGMA user_version = 7; COMMIT;";

/*
 * Version 7 did not mark the timer's snapshots: its `auto-` ones are
 * unmarked, so the prune, which deletes only marked ones, keeps them (a
 * user's own `auto-` label cannot be told from the timer's by its name).
 */
static const char migrate_v7_sql[] =
    "BEGIN IMMEDIATE; ALTER TABLE snapshots ADD COLUMN" AUTOSNAP_COL
    "; PRAGMA user_version = 8; COMMIT;";

/* Version 8 kept no exit status: its ended sandboxes read exit_code null. */
static const char migrate_v8_sql[] =
    "BEGIN IMMEDIATE; ALTER TABLE sandboxes ADD COLUMN" EXIT_CODE_COL
    "; PRAGMA user_version = 9; COMMIT;";

/*
 * Version 9's listing index had no name (a listing would read every row
 * for it), and its rows no change time: created_at stands in (ops_rows.c).
 */
static const char migrate_v9_sql[] =
    "BEGIN IMMEDIATE; DROP INDEX IF EXISTS snapshots_listed;" SNAPSHOTS_LISTED_INDEX
    "ALTER TABLE sandboxes ADD COLUMN" CHANGED_AT_COL ";"
    "ALTER TABLE snapshots ADD COLUMN" CHANGED_AT_COL ";"
    "PRAGMA user_version = 10; COMMIT;";

static int int_row(sqlite3_stmt *st, void *ctx)
{
	*(int *)ctx = sqlite3_column_int(st, 0);
	return 1;
}

int reg_migrate(struct registry *reg, const char *path)
{
	int version = -1;
	int r = reg_query(reg, "PRAGMA user_version", NULL, int_row, &version);
	if (r < 0)
		return r;
	if (version == SCHEMA_VERSION)
		return 0;
	/* A new file gets the whole schema; an older one the steps since its version, in turn. */
	const char *steps[] = {schema_sql,     migrate_v1_sql, migrate_v2_sql, migrate_v3_sql,
			       migrate_v4_sql, migrate_v5_sql, migrate_v6_sql, migrate_v7_sql,
			       migrate_v8_sql, migrate_v9_sql};
	if (version < 0 || version >= (int)ARRAY_SIZE(steps))
		return error(EIO,
			     "registry: %s has schema version %d; this snapfs knows version %d",
			     path, version, SCHEMA_VERSION);
	r = 0;
	for (int v = version; r == 0 && v < (int)ARRAY_SIZE(steps); v = v ? v + 1 : SCHEMA_VERSION)
		r = reg_exec(reg, steps[v]);
	if (r < 0 && !sqlite3_get_autocommit(reg->db))
		reg_exec(reg, "ROLLBACK");
	return r;
}
