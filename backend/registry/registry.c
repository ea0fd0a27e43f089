/*
 * registry.c - the registry's schema (registry.h): the names of the enums
 * it stores, the tables and their migration, the statements every query
 * runs through, the rows as records. Open and close are registry_open.c's,
 * the tables and their migration registry_schema.c's; the queries of each
 * table are in registry_sandbox.c and registry_snapshot.c.
 */
#include "backend/registry/registry_internal.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"

/* Bump with a migration in registry_migrate() whenever the tables change. */

/* --- enum names ---------------------------------------------------------- */

static const char *const sb_state_names[] = {
    [SB_CREATED] = "created",
    [SB_STARTING] = "starting",
    [SB_RUNNING] = "running",
    [SB_SNAPSHOTTING] = "snapshotting",
    [SB_SUSPENDING] = "suspending",
    [SB_SUSPENDED] = "suspended",
    [SB_RESUMING] = "resuming",
    [SB_TERMINATING] = "terminating",
    [SB_TERMINATED] = "terminated",
    [SB_FAILED] = "failed",
    [SB_WARM] = "warm",
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

static const char *const timeout_action_names[] = {
    [TIMEOUT_TERMINATE] = "terminate", [TIMEOUT_SUSPEND] = "suspend"};

/* A sandbox's network (runtime/net/net.h). */
static const char *const network_names[] = {[SB_NET_NONE] = "none", [SB_NET_EGRESS] = "egress"};

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

/*
 * X_name() and X_parse() (registry.h) for enum @type, whose names are
 * @names: "unknown" for a value without a name, -EINVAL for a name of none.
 */
#define ENUM_NAMES(x, type, names)                                                                 \
	const char *x##_name(type v)                                                               \
	{                                                                                          \
		return name_of(names, ARRAY_SIZE(names), v);                                       \
	}                                                                                          \
	int x##_parse(const char *name, type *out)                                                 \
	{                                                                                          \
		int v = index_of(names, ARRAY_SIZE(names), name);                                  \
		if (v >= 0)                                                                        \
			*out = (type)v;                                                            \
		return v < 0 ? v : 0;                                                              \
	}

ENUM_NAMES(sandbox_state, enum sandbox_state, sb_state_names)
ENUM_NAMES(snapshot_state, enum snapshot_state, snap_state_names)
ENUM_NAMES(snapshot_kind, enum snapshot_kind, snap_kind_names)
ENUM_NAMES(timeout_action, enum timeout_action, timeout_action_names)
ENUM_NAMES(sandbox_network, enum sandbox_network, network_names)

bool sandbox_state_transitional(enum sandbox_state s)
{
	return s == SB_STARTING || s == SB_SNAPSHOTTING || s == SB_SUSPENDING || s == SB_RESUMING ||
	       s == SB_TERMINATING;
}

bool snapshot_state_settled(enum snapshot_state s)
{
	return s == SNAP_COMPLETED || s == SNAP_FAILED;
}

/* --- statements ------------------------------------------------------------- */

/*
 * Prepared statements are kept and reused (reset, bindings cleared): a
 * lookup is mostly parsing otherwise, and start-up and each sync pass look
 * up every snapshot (at 10,000 snapshots, 2/3 of start-up's CPU was
 * sqlite3_prepare: docs/bench/scale.md). A statement is found by its
 * text; one in use (a walk whose callback looks up a row of the same kind,
 * or another thread's) is not shared: that call prepares its own, as does
 * every call once STMT_KEPT texts are kept.
 */
static int stmt_get(struct registry *reg, const char *sql, sqlite3_stmt **st)
{
	sqlite3_stmt *found = NULL;
	size_t room = STMT_KEPT;
	pthread_mutex_lock(&reg->stmt_lock);
	for (size_t i = 0; i < STMT_KEPT && !found; i++) {
		if (!reg->stmt[i].st)
			room = room < STMT_KEPT ? room : i;
		else if (!reg->stmt[i].busy && !strcmp(sqlite3_sql(reg->stmt[i].st), sql))
			reg->stmt[i].busy = true, found = reg->stmt[i].st;
	}
	int rc = found ? SQLITE_OK
		       : sqlite3_prepare_v3(reg->db, sql, -1,
					    room < STMT_KEPT ? SQLITE_PREPARE_PERSISTENT : 0,
					    &found, NULL);
	if (rc == SQLITE_OK && room < STMT_KEPT && !reg->stmt[room].st)
		reg->stmt[room].st = found, reg->stmt[room].busy = true;
	pthread_mutex_unlock(&reg->stmt_lock);
	*st = found;
	return rc;
}

/* Done with @st: kept ones are reset for the next call, others finalized. */
static void stmt_put(struct registry *reg, sqlite3_stmt *st)
{
	bool kept = false;
	if (!st)
		return;
	sqlite3_mutex *m = sqlite3_db_mutex(reg->db); /* first, as prepare() takes them */
	sqlite3_mutex_enter(m);
	pthread_mutex_lock(&reg->stmt_lock);
	for (size_t i = 0; i < STMT_KEPT && !kept; i++) {
		if (reg->stmt[i].st == st) {
			sqlite3_reset(st);
			sqlite3_clear_bindings(st);
			reg->stmt[i].busy = false;
			kept = true;
		}
	}
	pthread_mutex_unlock(&reg->stmt_lock);
	if (!kept)
		sqlite3_finalize(st);
	sqlite3_mutex_leave(m);
}

/* A statement of @reg, handed back to it at the end of the scope. */
struct stmt {
	struct registry *reg;
	sqlite3_stmt *st;
};
static void stmt_putp(struct stmt *s)
{
	stmt_put(s->reg, s->st);
}
#define _cleanup_stmt_ _cleanup_(stmt_putp)

/*
 * prepare() and step() hold the connection's (recursive) mutex across the
 * call and sqlite3_errmsg(), so another thread cannot replace the message
 * before it is logged.
 */
static int prepare(struct registry *reg, const char *sql, struct stmt *s)
{
	sqlite3_mutex *m = sqlite3_db_mutex(reg->db);
	sqlite3_mutex_enter(m);
	s->reg = reg;
	int rc = stmt_get(reg, sql, &s->st);
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

int reg_exec(struct registry *reg, const char *sql)
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

static int bind_i64(sqlite3_stmt *st, int i, int64_t v)
{
	return bind_ok(sqlite3_bind_int64(st, i, v));
}

static int bind_key(sqlite3_stmt *st, const void *key)
{
	return bind_ok(sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC));
}

/* --- rows <-> records ------------------------------------------------------- */

/* How a column holds a field of a record. */
enum col_type {
	COL_TEXT, /* char[]: refused on write if it fills its field (no NUL), cut on read */
	COL_I64,  /* int64_t */
	COL_BOOL, /* bool, 0 or 1 */
	COL_PID,  /* pid_t */
	COL_ENUM, /* an enum, by its name in names[] */
	COL_UID,  /* uid_t, gid_t: a value no id can have is refused on read */
	COL_GID,
};

struct column {
	enum col_type type;
	size_t off, size; /* the field in the record */
	const char *const *names;
	size_t nnames;
};

/* A table's columns, in SB_COLS or SNAP_COLS order (registry_internal.h). */
struct table {
	const struct column *cols;
	size_t ncols;
	size_t size; /* of a record */
};

/* The enums are stored as unsigned ints (COL_ENUM): every one of them is that size. */
_Static_assert(sizeof(enum sandbox_state) == sizeof(unsigned) &&
		   sizeof(enum snapshot_state) == sizeof(unsigned) &&
		   sizeof(enum snapshot_kind) == sizeof(unsigned),
	       "registry enums are unsigned ints");

/* A column entry's type and field @f of struct @rec; NAMES() adds an enum's names. */
#define FIELD(t, rec, f) .type = (t), .off = offsetof(rec, f), .size = sizeof(((rec *)0)->f)
#define SB(t, f) FIELD(t, struct sandbox, f)
#define SNAP(t, f) FIELD(t, struct snapshot, f)
#define NAMES(n) .names = (n), .nnames = ARRAY_SIZE(n)
/* A sandbox's timeout and the one a snapshot records of it: the same two columns (@rec SB or SNAP).
 */
#define TIMEOUT_COLS(rec)                                                                          \
	{rec(COL_I64, timeout_s)},                                                                 \
	{                                                                                          \
		rec(COL_ENUM, timeout_action), NAMES(timeout_action_names)                         \
	}

static const struct column sandbox_cols[] = {
    {SB(COL_TEXT, id)},
    {SB(COL_TEXT, runtime_id)},
    {SB(COL_TEXT, image)},
    {SB(COL_TEXT, image_digest)},
    {SB(COL_TEXT, entrypoint)},
    {SB(COL_TEXT, env)},
    {SB(COL_BOOL, gpu)},
    {SB(COL_ENUM, state), NAMES(sb_state_names)},
    {SB(COL_TEXT, message)},
    {SB(COL_I64, created_at)},
    {SB(COL_TEXT, parent_snapshot)},
    {SB(COL_TEXT, restore_snapshot)},
    {SB(COL_PID, pid)},
    {SB(COL_UID, owner_uid)},
    {SB(COL_GID, owner_gid)},
    {SB(COL_I64, res.memory_bytes)},
    {SB(COL_I64, res.cpu_milli)},
    {SB(COL_I64, res.pids)},
    TIMEOUT_COLS(SB),
    {SB(COL_I64, deadline_at)},
    {SB(COL_I64, autosnap_every_s)},
    {SB(COL_I64, autosnap_keep)},
    {SB(COL_I64, autosnap_next_at)},
    {SB(COL_TEXT, ports)},
    {SB(COL_ENUM, network), NAMES(network_names)},
    {SB(COL_TEXT, egress)},
    {SB(COL_TEXT, exit_code)},
    {SB(COL_I64, changed_at)},
};

static const struct column snapshot_cols[] = {
    {SNAP(COL_TEXT, id)},
    {SNAP(COL_TEXT, name)},
    {SNAP(COL_ENUM, kind), NAMES(snap_kind_names)},
    {SNAP(COL_TEXT, sandbox_id)},
    {SNAP(COL_I64, created_at)},
    {SNAP(COL_I64, completed_at)},
    {SNAP(COL_ENUM, state), NAMES(snap_state_names)},
    {SNAP(COL_TEXT, message)},
    {SNAP(COL_I64, pause_ms)},
    {SNAP(COL_I64, size_bytes)},
    {SNAP(COL_I64, stored_bytes)},
    {SNAP(COL_TEXT, image)},
    {SNAP(COL_TEXT, image_digest)},
    {SNAP(COL_TEXT, entrypoint)},
    {SNAP(COL_TEXT, host_json)},
    {SNAP(COL_BOOL, gpu)},
    {SNAP(COL_TEXT, env)},
    {SNAP(COL_UID, owner_uid)},
    {SNAP(COL_GID, owner_gid)},
    {SNAP(COL_I64, res.memory_bytes)},
    {SNAP(COL_I64, res.cpu_milli)},
    {SNAP(COL_I64, res.pids)},
    TIMEOUT_COLS(SNAP),
    {SNAP(COL_TEXT, ports)},
    {SNAP(COL_ENUM, network), NAMES(network_names)},
    {SNAP(COL_TEXT, egress)},
    {SNAP(COL_BOOL, autosnap)},
    {SNAP(COL_I64, changed_at)},
};

/* What a listing shows of a snapshot, in SNAP_LISTED_COLS order: the index covers them. */
static const struct column snapshot_listed_cols[] = {
    {SNAP(COL_TEXT, id)},	  {SNAP(COL_ENUM, state), NAMES(snap_state_names)},
    {SNAP(COL_TEXT, sandbox_id)}, {SNAP(COL_UID, owner_uid)},
    {SNAP(COL_TEXT, name)},	  {SNAP(COL_I64, created_at)},
};

/* A listed record is not cleared row by row (size 0): its walk's record starts zeroed. */
static const struct table tables[] = {
    [REG_SANDBOXES] = {sandbox_cols, ARRAY_SIZE(sandbox_cols), sizeof(struct sandbox)},
    [REG_SNAPSHOTS] = {snapshot_cols, ARRAY_SIZE(snapshot_cols), sizeof(struct snapshot)},
    [REG_SNAPSHOTS_LISTED] = {snapshot_listed_cols, ARRAY_SIZE(snapshot_listed_cols), 0},
};

/* Bind field @f (of column @c) as ?@i. A string that fills its whole field has no NUL. */
static int bind_column(sqlite3_stmt *st, int i, const struct column *c, const void *f)
{
	unsigned v;
	switch (c->type) {
	case COL_TEXT:
		if (strnlen(f, c->size) == c->size)
			return -ENAMETOOLONG;
		return bind_ok(sqlite3_bind_text(st, i, f, -1, SQLITE_STATIC));
	case COL_I64:
		return bind_i64(st, i, *(const int64_t *)f);
	case COL_BOOL:
		return bind_i64(st, i, *(const bool *)f);
	case COL_PID:
		return bind_i64(st, i, *(const pid_t *)f);
	case COL_ENUM:
		memcpy(&v, f, sizeof(v));
		if (v >= c->nnames)
			return -EINVAL;
		return bind_ok(sqlite3_bind_text(st, i, c->names[v], -1, SQLITE_STATIC));
	case COL_UID:
		return bind_i64(st, i, *(const uid_t *)f);
	case COL_GID:
		return bind_i64(st, i, *(const gid_t *)f);
	}
	return -EINVAL;
}

/* Copy text column @i into @dst, cut to @size - 1 bytes (only a foreign writer makes it longer). */
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
 * An owner's uid or gid in column @i. A value no id can have (only a foreign
 * writer makes one) is refused: read as root's, it would hand the row to
 * root, and as anyone's, to them.
 */
static int column_id(sqlite3_stmt *st, int i, int64_t *id)
{
	*id = sqlite3_column_int64(st, i);
	if (*id >= 0 && *id < (int64_t)(uid_t)-1 && *id < (int64_t)(gid_t)-1)
		return 0;
	return error(EIO, "registry: %s %lld of a row is no id", sqlite3_column_name(st, i),
		     (long long)*id);
}

/* Read column @i (of column @c) into field @f. */
static int read_column(sqlite3_stmt *st, int i, const struct column *c, void *f)
{
	int64_t id;
	int r = 0;
	switch (c->type) {
	case COL_TEXT:
		column_text(st, i, f, c->size);
		break;
	case COL_I64:
		*(int64_t *)f = sqlite3_column_int64(st, i);
		break;
	case COL_BOOL:
		*(bool *)f = sqlite3_column_int(st, i) != 0;
		break;
	case COL_PID:
		*(pid_t *)f = (pid_t)sqlite3_column_int64(st, i);
		break;
	case COL_ENUM:
		r = column_name(st, i, c->names, c->nnames);
		if (r >= 0)
			memcpy(f, &(unsigned){(unsigned)r}, sizeof(unsigned));
		break;
	case COL_UID:
	case COL_GID:
		r = column_id(st, i, &id);
		if (r == 0 && c->type == COL_UID)
			*(uid_t *)f = (uid_t)id;
		else if (r == 0)
			*(gid_t *)f = (gid_t)id;
		break;
	}
	return r < 0 ? r : 0;
}

/* Bind @rec, a record of table @t, to ?1.. of @st. */
static int bind_record(sqlite3_stmt *st, enum reg_table t, const void *rec)
{
	int r = 0;
	for (size_t i = 0; r == 0 && i < tables[t].ncols; i++) {
		const struct column *c = &tables[t].cols[i];
		r = bind_column(st, (int)i + 1, c, (const char *)rec + c->off);
	}
	return r;
}

/* Read the row @st is on into @rec, a record of table @t. */
static int read_record(sqlite3_stmt *st, enum reg_table t, void *rec)
{
	int r = 0;
	memset(rec, 0, tables[t].size);
	for (size_t i = 0; r == 0 && i < tables[t].ncols; i++) {
		const struct column *c = &tables[t].cols[i];
		r = read_column(st, (int)i, c, (char *)rec + c->off);
	}
	return r;
}

/* --- generic runners -------------------------------------------------------- */

/*
 * Run one writing statement whose parameters are the fields of @rec, a
 * record of table @t, or (@t REG_KEY) the string @rec as ?1. Returns 1 if it
 * returned a row (RETURNING: the row existed), 0 if not, or a negative errno.
 */
static int write_one(struct registry *reg, const char *sql, enum reg_table t, const void *rec)
{
	_cleanup_stmt_ struct stmt s = {reg, NULL};
	int r = prepare(reg, sql, &s);
	sqlite3_stmt *st = s.st;
	if (r < 0)
		return r;
	r = t == REG_KEY ? bind_key(st, rec) : bind_record(st, t, rec);
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
 * While a walk is open, writes made on this connection (by @row's callers
 * or other threads) are visible at once but commit when it ends, so
 * callbacks should be short.
 */
int reg_query(struct registry *reg, const char *sql, const char *key,
	      int (*row)(sqlite3_stmt *st, void *ctx), void *ctx)
{
	_cleanup_stmt_ struct stmt s = {reg, NULL};
	int r = prepare(reg, sql, &s);
	sqlite3_stmt *st = s.st;
	if (r < 0)
		return r;
	if (key) {
		r = bind_key(st, key);
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

int reg_insert(struct registry *reg, const char *sql, enum reg_table t, const void *rec)
{
	int r = write_one(reg, sql, t, rec);
	return r < 0 ? r : 0;
}

int reg_change(struct registry *reg, const char *sql, enum reg_table t, const void *rec)
{
	int r = write_one(reg, sql, t, rec);
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

struct get {
	enum reg_table t;
	void *out;
};

static int get_row(sqlite3_stmt *st, void *ctx)
{
	struct get *g = ctx;
	int r = read_record(st, g->t, g->out);
	return r < 0 ? r : 1;
}

int reg_get(struct registry *reg, const char *sql, const char *key, enum reg_table t, void *out)
{
	struct get g = {t, out};
	int r = reg_query(reg, sql, key, get_row, &g);
	if (r < 0)
		return r;
	return r ? 0 : -ENOENT;
}

/* A walk and its row, on the heap: a sandbox is 22 KiB and job threads may have small stacks. */
struct walk {
	struct reg_walk fn;
	union {
		struct sandbox sb;
		struct snapshot snap;
	} rec;
};

static int walk_row(sqlite3_stmt *st, void *ctx)
{
	struct walk *w = ctx;
	enum reg_table t = w->fn.sandbox  ? REG_SANDBOXES
			   : w->fn.listed ? REG_SNAPSHOTS_LISTED
					  : REG_SNAPSHOTS;
	int r = read_record(st, t, &w->rec);
	if (r < 0)
		return r;
	return w->fn.sandbox ? w->fn.sandbox(&w->rec.sb, w->fn.arg)
			     : w->fn.snapshot(&w->rec.snap, w->fn.arg);
}

int reg_walk(struct registry *reg, const char *sql, const char *key, struct reg_walk fn)
{
	_cleanup_free_ struct walk *w = fn.listed ? calloc(1, sizeof(*w)) : malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fn = fn;
	return reg_query(reg, sql, key, walk_row, w);
}

int reg_word_row(sqlite3_stmt *st, void *ctx)
{
	column_text(st, 0, ctx, REG_WORD_MAX);
	return 1;
}
