/*
 * ops_rows.c - the rows of sandboxes and snapshots as the daemon knows
 * them: the registry's, or the update of one the registry refused.
 *
 * A registry update can fail (a full disk, an I/O error) after the work it
 * records was done: a container started, a checkpoint stored. Losing the
 * change would strand the object in its transitional state: every request
 * refused with EBUSY, `wait` never answered. So a refused update is kept
 * here, whole, as the row's truth: every read in runtime/ goes through
 * row_*() and sees it; the monitor thread writes it again with backoff
 * (rows_flush()), and so does the next update that gets through. Only
 * updates are kept: an insert or a delete the registry refuses fails its
 * request, which has changed nothing yet. So does a durable update
 * (row_sandbox_update_durable()): the container id recorded before runsc
 * makes that container, which start-up must find in the registry after a
 * kill -9, or it undoes the operation and leaves the container no one's.
 *
 * If snapfs stops before a kept row is written, the registry holds the row
 * from before, always a state start-up reconciles from runsc and the store
 * (ops_open(), docs/limits.md). At most REGISTRY_PENDING_MAX rows are kept;
 * past that an update fails as the registry did, and its caller says so.
 *
 * Locking: `rows_lock` guards the list and the backoff, and is held across
 * the registry's update of a row, so a retry never writes a row older than
 * one written meanwhile. It is a leaf below ops.lock: nothing else is
 * taken with it held.
 *
 * Change times (docs/design.md, "Times"): every insert and update here
 * stamps the row's changed_at when what it holds differs from the row
 * before, and every insert, such change and delete moves the tree's
 * change time, the indexes' mtime. The tree's is the daemon's memory: a
 * restart starts it at the start (what changed while no daemon ran is not
 * known), as ops_started_at() is.
 *
 * Also the walks over these rows that name a sandbox's own snapshots
 * (ops_snapshot_of(), ops_sandbox_snapshots_each()), used by the verbs and
 * the GPU hooks alike: no lock of their own, as the walks they wrap.
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/host.h"

/* The first retry after a refusal, doubled after each failed one up to the most. */
#define RETRY_FIRST_MS 1000
#define RETRY_MOST_MS 16000

struct pending_row {
	enum ops_object kind; /* OPS_OBJ_SANDBOX or OPS_OBJ_SNAPSHOT */
	union {
		struct sandbox sb;
		struct snapshot snap;
	} row;
	struct pending_row *next;
};

static pthread_mutex_t rows_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pending_row *pending; /* newest first */
static unsigned pending_n;
static int64_t retry_at_ms; /* mono_ms() of the next retry */
static int64_t retry_delay_ms = RETRY_FIRST_MS;

/* --- change times ------------------------------------------------------- */

/* __atomic: read by every stat of an index. [0] the sandboxes' rows, [1] the snapshots'. */
static int64_t started_ms, tree_changed_ms[2];

void rows_times_init(void)
{
	int64_t now = now_ms();
	__atomic_store_n(&started_ms, now, __ATOMIC_RELAXED);
	__atomic_store_n(&tree_changed_ms[0], now, __ATOMIC_RELAXED);
	__atomic_store_n(&tree_changed_ms[1], now, __ATOMIC_RELAXED);
}

static void tree_changed(enum ops_object kind, int64_t at)
{
	int64_t *t = &tree_changed_ms[kind == OPS_OBJ_SNAPSHOT];
	int64_t was = __atomic_load_n(t, __ATOMIC_RELAXED);
	while (at > was && !__atomic_compare_exchange_n(t, &was, at, true, __ATOMIC_RELAXED,
							__ATOMIC_RELAXED)) {
	}
}

int64_t ops_started_at(void)
{
	return __atomic_load_n(&started_ms, __ATOMIC_RELAXED);
}

int64_t ops_tree_changed_at(enum ops_object kind)
{
	return __atomic_load_n(&tree_changed_ms[kind == OPS_OBJ_SNAPSHOT], __ATOMIC_RELAXED);
}

int64_t ops_sandbox_changed_at(const struct sandbox *sb)
{
	return sb->changed_at > sb->created_at ? sb->changed_at : sb->created_at;
}

int64_t ops_snapshot_changed_at(const struct snapshot *snap)
{
	return snap->changed_at > snap->created_at ? snap->changed_at : snap->created_at;
}

/*
 * @next's changed_at: now when it differs from @prev (@size bytes; NULL:
 * a new row), else @prev's @prev_at. Rows are compared whole: a write of
 * the same value (the same memory limit again) changes no time.
 */
static void stamp(enum ops_object kind, void *next, int64_t *next_at, const void *prev,
		  int64_t prev_at, size_t size)
{
	*next_at = prev_at;
	if (prev && memcmp(prev, next, size) == 0)
		return;
	*next_at = now_ms();
	tree_changed(kind, *next_at);
}

static void stamp_sandbox(struct sandbox *next)
{
	struct sandbox prev;
	bool had = row_sandbox_get(next->id, &prev) == 0;
	stamp(OPS_OBJ_SANDBOX, next, &next->changed_at, had ? &prev : NULL,
	      had ? prev.changed_at : 0, sizeof(prev));
}

static void stamp_snapshot(struct snapshot *next)
{
	struct snapshot prev;
	bool had = row_snapshot_get(next->id, &prev) == 0;
	stamp(OPS_OBJ_SNAPSHOT, next, &next->changed_at, had ? &prev : NULL,
	      had ? prev.changed_at : 0, sizeof(prev));
}

int row_sandbox_insert(struct sandbox *sb)
{
	stamp(OPS_OBJ_SANDBOX, sb, &sb->changed_at, NULL, 0, sizeof(*sb));
	return registry_sandbox_insert(ops.reg, sb);
}

int row_snapshot_insert(struct snapshot *snap)
{
	stamp(OPS_OBJ_SNAPSHOT, snap, &snap->changed_at, NULL, 0, sizeof(*snap));
	return registry_snapshot_insert(ops.reg, snap);
}

/* --- kept rows -------------------------------------------------------------- */

static const char *row_id(const struct pending_row *p)
{
	return p->kind == OPS_OBJ_SANDBOX ? p->row.sb.id : p->row.snap.id;
}

/* Under rows_lock: the kept row of @kind/@id, NULL if none. */
static struct pending_row **pending_find(enum ops_object kind, const char *id)
{
	for (struct pending_row **pp = &pending; *pp; pp = &(*pp)->next)
		if ((*pp)->kind == kind && !strcmp(row_id(*pp), id))
			return pp;
	return NULL;
}

static void pending_unlink(struct pending_row **pp)
{
	struct pending_row *p = *pp;
	*pp = p->next;
	free(p);
	pending_n--;
}

static void pending_drop(enum ops_object kind, const char *id)
{
	struct pending_row **pp = pending_find(kind, id);
	if (pp)
		pending_unlink(pp);
}

static int registry_write(const struct pending_row *p)
{
	return p->kind == OPS_OBJ_SANDBOX ? registry_sandbox_update(ops.reg, &p->row.sb)
					  : registry_snapshot_update(ops.reg, &p->row.snap);
}

/* Under rows_lock: write every kept row again; false if one was refused again. */
static bool flush_locked(void)
{
	unsigned before = pending_n;
	for (struct pending_row **pp = &pending; *pp;) {
		int rc = registry_write(*pp);
		/* -ENOENT: the row was deleted meanwhile, and its update with it. */
		if (rc == 0 || rc == -ENOENT)
			pending_unlink(pp);
		else
			pp = &(*pp)->next;
	}
	if (pending_n == 0) {
		retry_delay_ms = RETRY_FIRST_MS;
		info("the registry takes writes again: %u kept rows written", before);
		return true;
	}
	retry_at_ms = mono_ms() + retry_delay_ms;
	if (retry_delay_ms < RETRY_MOST_MS)
		retry_delay_ms *= 2;
	return false;
}

/* Under rows_lock: keep @p's row after the registry refused it with @rc; @rc if it cannot be. */
static int pending_keep(const struct pending_row *p, int rc)
{
	struct pending_row **pp = pending_find(p->kind, row_id(p));
	if (pp) {
		(*pp)->row = p->row;
		return 0;
	}
	if (pending_n >= REGISTRY_PENDING_MAX)
		return error(-rc,
			     "cannot update %s %s: the registry refuses writes (%s) and %d "
			     "rows wait for it already",
			     p->kind == OPS_OBJ_SANDBOX ? "sandbox" : "snapshot", row_id(p),
			     strerror(-rc), REGISTRY_PENDING_MAX);
	struct pending_row *copy = malloc(sizeof(*copy));
	if (!copy)
		return rc;
	*copy = *p;
	copy->next = pending;
	pending = copy;
	if (pending_n++ == 0) {
		retry_at_ms = mono_ms() + RETRY_FIRST_MS;
		warning("the registry refuses writes (%s): %s %s and later changes are kept in "
			"memory and written again when it takes them",
			strerror(-rc), p->kind == OPS_OBJ_SANDBOX ? "sandbox" : "snapshot",
			row_id(p));
	}
	return 0;
}

/* Update @p's row in the registry, or keep it if @keep; 0, or why it could be neither. */
static int row_update(const struct pending_row *p, bool keep)
{
	pthread_mutex_lock(&rows_lock);
	int rc = registry_write(p);
	if (rc == 0) {
		pending_drop(p->kind, row_id(p));
		if (pending_n) /* it takes writes again: the others need not wait */
			flush_locked();
	} else if (rc != -ENOENT && keep) {
		rc = pending_keep(p, rc);
	}
	pthread_mutex_unlock(&rows_lock);
	return rc;
}

int row_sandbox_update(const struct sandbox *sb)
{
	struct pending_row p = {.kind = OPS_OBJ_SANDBOX, .row.sb = *sb};
	stamp_sandbox(&p.row.sb);
	return row_update(&p, true);
}

int row_sandbox_update_durable(const struct sandbox *sb)
{
	struct pending_row p = {.kind = OPS_OBJ_SANDBOX, .row.sb = *sb};
	stamp_sandbox(&p.row.sb);
	return row_update(&p, false);
}

int row_snapshot_update(const struct snapshot *snap)
{
	struct pending_row p = {.kind = OPS_OBJ_SNAPSHOT, .row.snap = *snap};
	stamp_snapshot(&p.row.snap);
	return row_update(&p, true);
}

/* Delete @kind/@id's row from the registry, and then the row kept of it. */
static int row_delete(enum ops_object kind, const char *id)
{
	pthread_mutex_lock(&rows_lock);
	int rc = kind == OPS_OBJ_SANDBOX ? registry_sandbox_delete(ops.reg, id)
					 : registry_snapshot_delete(ops.reg, id);
	if (rc == 0)
		pending_drop(kind, id);
	pthread_mutex_unlock(&rows_lock);
	if (rc == 0)
		tree_changed(kind, now_ms());
	return rc;
}

int row_sandbox_delete(const char *id)
{
	return row_delete(OPS_OBJ_SANDBOX, id);
}

int row_snapshot_delete(const char *id)
{
	return row_delete(OPS_OBJ_SNAPSHOT, id);
}

/* The kept row of @kind/@id into @out (a sandbox or snapshot): true if there is one. */
static bool pending_get(enum ops_object kind, const char *id, void *out)
{
	pthread_mutex_lock(&rows_lock);
	struct pending_row **pp = pending_n ? pending_find(kind, id) : NULL;
	if (pp && kind == OPS_OBJ_SANDBOX)
		*(struct sandbox *)out = (*pp)->row.sb;
	else if (pp)
		*(struct snapshot *)out = (*pp)->row.snap;
	pthread_mutex_unlock(&rows_lock);
	return pp != NULL;
}

int row_sandbox_get(const char *id, struct sandbox *out)
{
	return pending_get(OPS_OBJ_SANDBOX, id, out) ? 0 : registry_sandbox_get(ops.reg, id, out);
}

int row_snapshot_get(const char *id, struct snapshot *out)
{
	return pending_get(OPS_OBJ_SNAPSHOT, id, out) ? 0 : registry_snapshot_get(ops.reg, id, out);
}

/* --- walks: the registry's, each row replaced by the one kept -------------- */

/* A walk's callback: .sandbox for a walk of sandboxes, .snapshot of snapshots. */
union walk_fn {
	int (*sandbox)(const struct sandbox *sb, void *arg);
	int (*snapshot)(const struct snapshot *snap, void *arg);
};

struct row_walk {
	union walk_fn fn;
	void *arg;
	bool warm; /* the walk of warm members (row_warm_each()); the others skip them */
	union {
		struct sandbox sb;
		struct snapshot snap;
	} kept; /* rows are large: here, not on the walk's stack */
};

static int sandbox_kept(const struct sandbox *sb, void *arg)
{
	struct row_walk *w = arg;
	bool kept = pending_get(OPS_OBJ_SANDBOX, sb->id, &w->kept.sb);
	const struct sandbox *row = kept ? &w->kept.sb : sb;
	/* A warm pool's member is nobody's until taken (ops_warm.c): no listing shows it. */
	if ((row->state == SB_WARM) != w->warm)
		return 0;
	return w->fn.sandbox(row, w->arg);
}

static int snapshot_kept(const struct snapshot *snap, void *arg)
{
	struct row_walk *w = arg;
	bool kept = pending_get(OPS_OBJ_SNAPSHOT, snap->id, &w->kept.snap);
	return w->fn.snapshot(kept ? &w->kept.snap : snap, w->arg);
}

/* Which registry walk row_walk() makes. */
enum walk_of {
	ALL_SANDBOXES,
	FORKS_OF,
	ALL_SNAPSHOTS,
	SNAPSHOTS_OF,
	SNAPSHOTS_LISTED,
	WARM_SANDBOXES
};

/* The registry's walk @of (@key: the snapshot or sandbox it is of), each row as kept. */
static int row_walk(enum walk_of of, const char *key, union walk_fn fn, void *arg)
{
	struct row_walk *w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fn = fn;
	w->arg = arg;
	w->warm = of == WARM_SANDBOXES;
	int rc = of == ALL_SANDBOXES || of == WARM_SANDBOXES
		     ? registry_sandbox_each(ops.reg, sandbox_kept, w)
		 : of == FORKS_OF ? registry_sandbox_each_forked_from(ops.reg, key, sandbox_kept, w)
		 : of == ALL_SNAPSHOTS ? registry_snapshot_each(ops.reg, snapshot_kept, w)
		 : of == SNAPSHOTS_LISTED
		     ? registry_snapshot_each_listed(ops.reg, snapshot_kept, w)
		     : registry_snapshot_each_of_sandbox(ops.reg, key, snapshot_kept, w);
	free(w);
	return rc;
}

int row_sandbox_each(int (*fn)(const struct sandbox *sb, void *arg), void *arg)
{
	return row_walk(ALL_SANDBOXES, NULL, (union walk_fn){.sandbox = fn}, arg);
}

int row_warm_each(int (*fn)(const struct sandbox *sb, void *arg), void *arg)
{
	return row_walk(WARM_SANDBOXES, NULL, (union walk_fn){.sandbox = fn}, arg);
}

int row_sandbox_each_forked_from(const char *snap_id,
				 int (*fn)(const struct sandbox *sb, void *arg), void *arg)
{
	return row_walk(FORKS_OF, snap_id, (union walk_fn){.sandbox = fn}, arg);
}

int row_snapshot_each(int (*fn)(const struct snapshot *snap, void *arg), void *arg)
{
	return row_walk(ALL_SNAPSHOTS, NULL, (union walk_fn){.snapshot = fn}, arg);
}

int row_snapshot_each_listed(int (*fn)(const struct snapshot *snap, void *arg), void *arg)
{
	return row_walk(SNAPSHOTS_LISTED, NULL, (union walk_fn){.snapshot = fn}, arg);
}

int row_snapshot_each_of_sandbox(const char *sandbox_id,
				 int (*fn)(const struct snapshot *snap, void *arg), void *arg)
{
	return row_walk(SNAPSHOTS_OF, sandbox_id, (union walk_fn){.snapshot = fn}, arg);
}

/*
 * The registry's answer, or a kept sandbox row that pins @snap_id. A kept
 * row that unpins what the registry's row pinned still reads pinned: a
 * delete refused a little longer, never one let through.
 */
int row_snapshot_pinned(const char *snap_id, bool *pinned)
{
	unsigned pins = STATE_BIT(SB_SUSPENDING) | STATE_BIT(SB_SUSPENDED) | STATE_BIT(SB_RESUMING);
	int rc = registry_snapshot_pinned(ops.reg, snap_id, pinned);
	pthread_mutex_lock(&rows_lock);
	for (struct pending_row *p = pending; rc == 0 && !*pinned && p; p = p->next)
		*pinned = p->kind == OPS_OBJ_SANDBOX && (pins & STATE_BIT(p->row.sb.state)) &&
			  !strcmp(p->row.sb.restore_snapshot, snap_id);
	pthread_mutex_unlock(&rows_lock);
	return rc;
}

/* --- retries ---------------------------------------------------------------- */

void rows_flush(bool now)
{
	pthread_mutex_lock(&rows_lock);
	if (pending_n && (now || mono_ms() >= retry_at_ms))
		flush_locked();
	pthread_mutex_unlock(&rows_lock);
}

unsigned rows_pending(void)
{
	pthread_mutex_lock(&rows_lock);
	unsigned n = pending_n;
	pthread_mutex_unlock(&rows_lock);
	return n;
}

void rows_close(void)
{
	rows_flush(true);
	pthread_mutex_lock(&rows_lock);
	if (pending_n)
		warning("%u rows the registry refused are lost; start-up reconciles them",
			pending_n);
	while (pending)
		pending_unlink(&pending);
	pthread_mutex_unlock(&rows_lock);
}

/* --- this host's snapshots ------------------------------------------------ */

bool ops_snapshot_taken_here(const struct snapshot *snap)
{
	return host_is_this(snap->host_json);
}

bool ops_snapshot_of(const struct snapshot *snap, const struct sandbox *sb)
{
	return strcmp(snap->sandbox_id, sb->id) == 0 && snap->owner_uid == sb->owner_uid &&
	       ops_snapshot_taken_here(snap);
}

struct of_walk {
	const struct sandbox *sb;
	int (*fn)(const struct snapshot *snap, void *arg);
	void *arg;
};

static int of_only(const struct snapshot *snap, void *arg)
{
	const struct of_walk *w = arg;
	return ops_snapshot_of(snap, w->sb) ? w->fn(snap, w->arg) : 0;
}

int ops_sandbox_snapshots_each(const struct sandbox *sb,
			       int (*fn)(const struct snapshot *snap, void *arg), void *arg)
{
	struct of_walk w = {sb, fn, arg};
	return row_snapshot_each_of_sandbox(sb->id, of_only, &w);
}

static int newest_kept(const struct snapshot *snap, void *arg)
{
	if (snap->kind == SNAP_KIND_SNAPSHOT)
		*(struct snapshot *)arg = *snap; /* oldest first: the last one wins */
	return 0;
}

int ops_sandbox_newest_snapshot(const struct sandbox *sb, struct snapshot *out)
{
	out->id[0] = '\0';
	int rc = ops_sandbox_snapshots_each(sb, newest_kept, out);
	return rc < 0 ? rc : out->id[0] ? 0 : -ENOENT;
}
