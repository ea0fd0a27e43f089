/*
 * registry.c - the registry's schema (registry.h): the names of the enums
 * it stores, the tables and their migration, the statements every query
 * runs through, the rows as records, open and close. The queries of each
 * table are in registry_sandbox.c and registry_snapshot.c.
 */
#include "backend/registry_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util.h"

#define BUSY_TIMEOUT_MS 5000

/* Bump with a migration in registry_migrate() whenever the tables change. */
#define SCHEMA_VERSION 2
#define STR_(x) #x
#define STR(x) STR_(x)

/* --- enum names ---------------------------------------------------------- */

static const char *const sb_state_names[] = {
    [SB_CREATED] = "created",	    [SB_STARTING] = "starting",
    [SB_RUNNING] = "running",	    [SB_SNAPSHOTTING] = "snapshotting",
    [SB_SUSPENDING] = "suspending", [SB_SUSPENDED] = "suspended",
    [SB_RESUMING] = "resuming",	    [SB_TERMINATING] = "terminating",
    [SB_TERMINATED] = "terminated", [SB_FAILED] = "failed",
};

static const char *const snap_state_names[] = {
    [SNAP_PENDING] = "pending",
    [SNAP_IN_PROGRESS] = "in_progress",
    [SNAP_COMPLETED] = "completed",
    [SNAP_FAILED] = "failed",
};

static const char *const snap_kind_names[] = {
    [SNAP_KIND_SNAPSHOT] = "snapshot",
    [SNAP_KIND_SUSPEND] = "suspend",
};

static const char *name_of(const char *const *names, size_t n, size_t v)
{
	return v < n ? names[v] : "unknown";
}

/* The index of @name in @names, or -EINVAL. */
static int index_of(const char *const *names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return (int)i;
	return -EINVAL;
}

const char *sandbox_state_name(enum sandbox_state s)
{
	return name_of(sb_state_names, ARRAY_SIZE(sb_state_names), s);
}

int sandbox_state_parse(const char *name, enum sandbox_state *out)
{
	int v = index_of(sb_state_names, ARRAY_SIZE(sb_state_names), name);
	if (v < 0)
		return v;
	*out = (enum sandbox_state)v;
	return 0;
}

bool sandbox_state_transitional(enum sandbox_state s)
{
	return s == SB_STARTING || s == SB_SNAPSHOTTING || s == SB_SUSPENDING || s == SB_RESUMING ||
	       s == SB_TERMINATING;
}

const char *snapshot_state_name(enum snapshot_state s)
{
	return name_of(snap_state_names, ARRAY_SIZE(snap_state_names), s);
}

bool snapshot_state_settled(enum snapshot_state s)
{
	return s == SNAP_COMPLETED || s == SNAP_FAILED;
}

int snapshot_state_parse(const char *name, enum snapshot_state *out)
{
	int v = index_of(snap_state_names, ARRAY_SIZE(snap_state_names), name);
	if (v < 0)
		return v;
	*out = (enum snapshot_state)v;
	return 0;
}

const char *snapshot_kind_name(enum snapshot_kind k)
{
	return name_of(snap_kind_names, ARRAY_SIZE(snap_kind_names), k);
}

int snapshot_kind_parse(const char *name, enum snapshot_kind *out)
{
	int v = index_of(snap_kind_names, ARRAY_SIZE(snap_kind_names), name);
	if (v < 0)
		return v;
	*out = (enum snapshot_kind)v;
	return 0;
}

/* --- SQL -------------------------------------------------------------------- */

static const char schema_sql[] =
    "BEGIN IMMEDIATE;"
    "CREATE TABLE IF NOT EXISTS sandboxes ("
    " id TEXT PRIMARY KEY NOT NULL, runtime_id TEXT NOT NULL, image TEXT NOT NULL,"
    " image_digest TEXT NOT NULL, entrypoint TEXT NOT NULL, env TEXT NOT NULL,"
    " gpu INTEGER NOT NULL, state TEXT NOT NULL, message TEXT NOT NULL,"
    " created_at INTEGER NOT NULL, parent_snapshot TEXT NOT NULL,"
    " restore_snapshot TEXT NOT NULL, pid INTEGER NOT NULL,"
    " owner_uid INTEGER NOT NULL DEFAULT 0, owner_gid INTEGER NOT NULL DEFAULT 0);"
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
    " owner_uid INTEGER NOT NULL DEFAULT 0, owner_gid INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX IF NOT EXISTS snapshots_created ON snapshots (created_at, id);"
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

/* --- statements ------------------------------------------------------------- */

static void finalizep(sqlite3_stmt **st)
{
	sqlite3_finalize(*st);
}
#define _cleanup_stmt_ _cleanup_(finalizep)

/*
 * prepare() and step() hold the connection's (recursive) mutex across the
 * call and sqlite3_errmsg(), so another thread cannot replace the message
 * before it is logged.
 */
static int prepare(struct registry *reg, const char *sql, sqlite3_stmt **st)
{
	sqlite3_mutex *m = sqlite3_db_mutex(reg->db);
	sqlite3_mutex_enter(m);
	int rc = sqlite3_prepare_v3(reg->db, sql, -1, 0, st, NULL);
	if (rc != SQLITE_OK)
		error(EIO, "registry: preparing \"%s\" failed: %s", sql, sqlite3_errmsg(reg->db));
	sqlite3_mutex_leave(m);
	return rc == SQLITE_OK ? 0 : -EIO;
}

/* 1 for a row, 0 when done, -EEXIST for a duplicate id, -EIO on failure. */
static int step(struct registry *reg, sqlite3_stmt *st)
{
	sqlite3_mutex *m = sqlite3_db_mutex(reg->db);
	sqlite3_mutex_enter(m);
	int rc = sqlite3_step(st);
	int r = -EIO;
	if (rc == SQLITE_ROW)
		r = 1;
	else if (rc == SQLITE_DONE)
		r = 0;
	else if (rc == SQLITE_CONSTRAINT_PRIMARYKEY)
		r = -EEXIST;
	else
		error(EIO, "registry: \"%s\" failed: %s", sqlite3_sql(st), sqlite3_errmsg(reg->db));
	sqlite3_mutex_leave(m);
	return r;
}

static int exec(struct registry *reg, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(reg->db, sql, NULL, NULL, &msg);
	if (rc == SQLITE_OK)
		return 0;
	int r = error(EIO, "registry: %s", msg ? msg : sqlite3_errstr(rc));
	sqlite3_free(msg);
	return r;
}

static int bind_ok(int rc)
{
	if (rc == SQLITE_OK)
		return 0;
	return error(EIO, "registry: binding a value failed: %s", sqlite3_errstr(rc));
}

/* A string that fills its whole field has no NUL: it is too long for the field. */
static int bind_text(sqlite3_stmt *st, int i, const char *s, size_t size)
{
	size_t n = strnlen(s, size);
	if (n == size)
		return -ENAMETOOLONG;
	return bind_ok(sqlite3_bind_text(st, i, s, (int)n, SQLITE_STATIC));
}
#define BIND_TEXT(st, i, field) bind_text(st, i, field, sizeof(field))

static int bind_i64(sqlite3_stmt *st, int i, int64_t v)
{
	return bind_ok(sqlite3_bind_int64(st, i, v));
}

static int bind_name(sqlite3_stmt *st, int i, const char *const *names, size_t n, size_t v)
{
	if (v >= n)
		return -EINVAL;
	return bind_ok(sqlite3_bind_text(st, i, names[v], -1, SQLITE_STATIC));
}

int reg_bind_key(sqlite3_stmt *st, const void *key)
{
	return bind_ok(sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC));
}

static int first_error(const int *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (r[i] < 0)
			return r[i];
	return 0;
}

/* Copy column @i into @dst, cut to @size - 1 bytes (only a foreign writer makes it longer). */
static void column_text(sqlite3_stmt *st, int i, char *dst, size_t size)
{
	const char *s = (const char *)sqlite3_column_text(st, i);
	size_t n = s ? (size_t)sqlite3_column_bytes(st, i) : 0;
	if (n >= size) {
		warning("registry: %s of a row is %zu bytes, cut to %zu",
			sqlite3_column_name(st, i), n, size - 1);
		n = size - 1;
	}
	if (n)
		memcpy(dst, s, n);
	dst[n] = '\0';
}
#define COLUMN_TEXT(st, i, field) column_text(st, i, field, sizeof(field))

/* The enum value named by column @i, or -EIO for a name this build does not know. */
static int column_name(sqlite3_stmt *st, int i, const char *const *names, size_t n)
{
	const char *s = (const char *)sqlite3_column_text(st, i);
	int v = s ? index_of(names, n, s) : -EINVAL;
	if (v >= 0)
		return v;
	return error(EIO, "registry: unknown %s '%s' in a row", sqlite3_column_name(st, i),
		     s ? s : "");
}

/*
 * The owner's uid and gid in columns @i and @i + 1. A value no uid can have
 * (only a foreign writer makes one) is refused: read as root's, it would
 * hand the row to root, and as anyone's, to them.
 */
static int column_id(sqlite3_stmt *st, int i, uid_t *uid, gid_t *gid)
{
	int64_t u = sqlite3_column_int64(st, i), g = sqlite3_column_int64(st, i + 1);
	if (u < 0 || u >= (int64_t)(uid_t)-1 || g < 0 || g >= (int64_t)(gid_t)-1)
		return error(EIO, "registry: owner %lld:%lld of a row is no uid:gid", (long long)u,
			     (long long)g);
	*uid = (uid_t)u;
	*gid = (gid_t)g;
	return 0;
}

/* --- rows <-> structs ------------------------------------------------------- */

int reg_sandbox_bind(sqlite3_stmt *st, const void *obj)
{
	const struct sandbox *sb = obj;
	const int r[] = {
	    BIND_TEXT(st, 1, sb->id),
	    BIND_TEXT(st, 2, sb->runtime_id),
	    BIND_TEXT(st, 3, sb->image),
	    BIND_TEXT(st, 4, sb->image_digest),
	    BIND_TEXT(st, 5, sb->entrypoint),
	    BIND_TEXT(st, 6, sb->env),
	    bind_i64(st, 7, sb->gpu),
	    bind_name(st, 8, sb_state_names, ARRAY_SIZE(sb_state_names), sb->state),
	    BIND_TEXT(st, 9, sb->message),
	    bind_i64(st, 10, sb->created_at),
	    BIND_TEXT(st, 11, sb->parent_snapshot),
	    BIND_TEXT(st, 12, sb->restore_snapshot),
	    bind_i64(st, 13, sb->pid),
	    bind_i64(st, 14, sb->owner_uid),
	    bind_i64(st, 15, sb->owner_gid),
	};
	return first_error(r, ARRAY_SIZE(r));
}

int reg_sandbox_read(sqlite3_stmt *st, struct sandbox *sb)
{
	memset(sb, 0, sizeof(*sb));
	COLUMN_TEXT(st, 0, sb->id);
	COLUMN_TEXT(st, 1, sb->runtime_id);
	COLUMN_TEXT(st, 2, sb->image);
	COLUMN_TEXT(st, 3, sb->image_digest);
	COLUMN_TEXT(st, 4, sb->entrypoint);
	COLUMN_TEXT(st, 5, sb->env);
	sb->gpu = sqlite3_column_int(st, 6) != 0;
	int state = column_name(st, 7, sb_state_names, ARRAY_SIZE(sb_state_names));
	if (state < 0)
		return state;
	sb->state = (enum sandbox_state)state;
	COLUMN_TEXT(st, 8, sb->message);
	sb->created_at = sqlite3_column_int64(st, 9);
	COLUMN_TEXT(st, 10, sb->parent_snapshot);
	COLUMN_TEXT(st, 11, sb->restore_snapshot);
	sb->pid = (pid_t)sqlite3_column_int64(st, 12);
	return column_id(st, 13, &sb->owner_uid, &sb->owner_gid);
}

int reg_snapshot_bind(sqlite3_stmt *st, const void *obj)
{
	const struct snapshot *snap = obj;
	const int r[] = {
	    BIND_TEXT(st, 1, snap->id),
	    BIND_TEXT(st, 2, snap->name),
	    bind_name(st, 3, snap_kind_names, ARRAY_SIZE(snap_kind_names), snap->kind),
	    BIND_TEXT(st, 4, snap->sandbox_id),
	    bind_i64(st, 5, snap->created_at),
	    bind_i64(st, 6, snap->completed_at),
	    bind_name(st, 7, snap_state_names, ARRAY_SIZE(snap_state_names), snap->state),
	    BIND_TEXT(st, 8, snap->message),
	    bind_i64(st, 9, snap->pause_ms),
	    bind_i64(st, 10, snap->size_bytes),
	    bind_i64(st, 11, snap->stored_bytes),
	    BIND_TEXT(st, 12, snap->image),
	    BIND_TEXT(st, 13, snap->image_digest),
	    BIND_TEXT(st, 14, snap->entrypoint),
	    BIND_TEXT(st, 15, snap->host_json),
	    bind_i64(st, 16, snap->gpu),
	    BIND_TEXT(st, 17, snap->env),
	    bind_i64(st, 18, snap->owner_uid),
	    bind_i64(st, 19, snap->owner_gid),
	};
	return first_error(r, ARRAY_SIZE(r));
}

int reg_snapshot_read(sqlite3_stmt *st, struct snapshot *snap)
{
	memset(snap, 0, sizeof(*snap));
	COLUMN_TEXT(st, 0, snap->id);
	COLUMN_TEXT(st, 1, snap->name);
	int kind = column_name(st, 2, snap_kind_names, ARRAY_SIZE(snap_kind_names));
	if (kind < 0)
		return kind;
	snap->kind = (enum snapshot_kind)kind;
	COLUMN_TEXT(st, 3, snap->sandbox_id);
	snap->created_at = sqlite3_column_int64(st, 4);
	snap->completed_at = sqlite3_column_int64(st, 5);
	int state = column_name(st, 6, snap_state_names, ARRAY_SIZE(snap_state_names));
	if (state < 0)
		return state;
	snap->state = (enum snapshot_state)state;
	COLUMN_TEXT(st, 7, snap->message);
	snap->pause_ms = sqlite3_column_int64(st, 8);
	snap->size_bytes = sqlite3_column_int64(st, 9);
	snap->stored_bytes = sqlite3_column_int64(st, 10);
	COLUMN_TEXT(st, 11, snap->image);
	COLUMN_TEXT(st, 12, snap->image_digest);
	COLUMN_TEXT(st, 13, snap->entrypoint);
	COLUMN_TEXT(st, 14, snap->host_json);
	snap->gpu = sqlite3_column_int(st, 15) != 0;
	COLUMN_TEXT(st, 16, snap->env);
	return column_id(st, 17, &snap->owner_uid, &snap->owner_gid);
}

/* --- generic runners -------------------------------------------------------- */

/*
 * Run one writing statement whose parameters @bind fills from @obj.
 * Returns 1 if it returned a row (RETURNING: the row existed), 0 if not,
 * or a negative errno.
 */
static int write_one(struct registry *reg, const char *sql,
		     int (*bind)(sqlite3_stmt *st, const void *obj), const void *obj)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = prepare(reg, sql, &st);
	if (r < 0)
		return r;
	r = bind(st, obj);
	if (r < 0)
		return r;
	bool returned = false;
	r = step(reg, st);
	while (r == 1) {
		returned = true;
		r = step(reg, st);
	}
	return r < 0 ? r : returned;
}

/*
 * Run a query, with @key (if not NULL) as ?1, and call @row for each row
 * until it returns non-zero, which is returned; 0 after the last row.
 *
 * While a walk is open, writes made on this connection (by @row's callers
 * or other threads) are visible at once but commit when it ends, so
 * callbacks should be short.
 */
int reg_query(struct registry *reg, const char *sql, const char *key,
	      int (*row)(sqlite3_stmt *st, void *ctx), void *ctx)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = prepare(reg, sql, &st);
	if (r < 0)
		return r;
	if (key) {
		r = reg_bind_key(st, key);
		if (r < 0)
			return r;
	}
	r = step(reg, st);
	while (r == 1) {
		r = row(st, ctx);
		if (r != 0)
			return r;
		r = step(reg, st);
	}
	return r;
}

int reg_insert(struct registry *reg, const char *sql,
	       int (*bind)(sqlite3_stmt *st, const void *obj), const void *obj)
{
	int r = write_one(reg, sql, bind, obj);
	return r < 0 ? r : 0;
}

/* For UPDATE and DELETE statements that end in RETURNING. */
int reg_change(struct registry *reg, const char *sql,
	       int (*bind)(sqlite3_stmt *st, const void *obj), const void *obj)
{
	int r = write_one(reg, sql, bind, obj);
	if (r < 0)
		return r;
	return r ? 0 : -ENOENT;
}

int reg_found_row(sqlite3_stmt *st, void *ctx)
{
	(void)st;
	(void)ctx;
	return 1;
}

static int int_row(sqlite3_stmt *st, void *ctx)
{
	*(int *)ctx = sqlite3_column_int(st, 0);
	return 1;
}

#define WORD_MAX 16

static int word_row(sqlite3_stmt *st, void *ctx)
{
	column_text(st, 0, ctx, WORD_MAX);
	return 1;
}

/* --- open / close ----------------------------------------------------------- */

static void registry_closep(struct registry **reg)
{
	registry_close(*reg);
}

/* Create the file ourselves so it is 0600: its env column holds secrets, and -wal/-shm copy the
 * mode. */
static int create_private(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return error(errno, "registry: opening %s failed: %s", path, strerror(errno));
	if (fchmod(fd, 0600) < 0)
		warning("registry: chmod 0600 %s failed: %s", path, strerror(errno));
	return 0;
}

static int configure(struct registry *reg, const char *path)
{
	sqlite3_extended_result_codes(reg->db, 1);
	sqlite3_busy_timeout(reg->db, BUSY_TIMEOUT_MS);
	int r = exec(reg, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = OFF;");
	if (r < 0)
		return r;
	char mode[WORD_MAX] = "";
	r = reg_query(reg, "PRAGMA journal_mode = WAL", NULL, word_row, mode);
	if (r < 0)
		return r;
	if (strcmp(mode, "wal") != 0)
		warning("registry: %s stays in journal mode %s, not WAL", path, mode);
	return 0;
}

static int migrate(struct registry *reg, const char *path)
{
	int version = -1;
	int r = reg_query(reg, "PRAGMA user_version", NULL, int_row, &version);
	if (r < 0)
		return r;
	if (version == SCHEMA_VERSION)
		return 0;
	/* A new file gets the whole schema; an older one the steps since its version. */
	const char *sql = version == 0 ? schema_sql : version == 1 ? migrate_v1_sql : NULL;
	if (!sql)
		return error(EIO,
			     "registry: %s has schema version %d; this snapfs knows version %d",
			     path, version, SCHEMA_VERSION);
	r = exec(reg, sql);
	if (r < 0 && !sqlite3_get_autocommit(reg->db))
		exec(reg, "ROLLBACK");
	return r;
}

int registry_open(const char *path, struct registry **out)
{
	_cleanup_(registry_closep) struct registry *reg = calloc(1, sizeof(*reg));
	if (!reg)
		return -ENOMEM;
	int r = create_private(path);
	if (r < 0)
		return r;
	int flags = SQLITE_OPEN_FULLMUTEX | SQLITE_OPEN_CREATE | SQLITE_OPEN_READWRITE;
	int rc = sqlite3_open_v2(path, &reg->db, flags, NULL);
	if (rc != SQLITE_OK)
		return error(EIO, "registry: opening %s failed: %s", path,
			     reg->db ? sqlite3_errmsg(reg->db) : sqlite3_errstr(rc));
	r = configure(reg, path);
	if (r < 0)
		return r;
	r = migrate(reg, path);
	if (r < 0)
		return r;
	*out = steal_ptr(reg);
	return 0;
}

void registry_close(struct registry *reg)
{
	if (!reg)
		return;
	int rc = sqlite3_close(reg->db);
	if (rc != SQLITE_OK)
		error(EIO, "registry: closing failed: %s", sqlite3_errstr(rc));
	free(reg);
}
