#include "backend/registry/registry.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <sqlite3.h>
#include <string.h>

#include "lib/util.h"
#include "tests/unit/t.h"
#include "tests/unit/t_threads.h"

#define THREADS 4
#define PER_THREAD 50

static void make_sandbox(struct sandbox *sb, const char *id, int64_t created_at)
{
	memset(sb, 0, sizeof(*sb));
	snprintf(sb->id, sizeof(sb->id), "%s", id);
	snprintf(sb->runtime_id, sizeof(sb->runtime_id), "snapfs-%s", id);
	snprintf(sb->image, sizeof(sb->image), "alpine");
	snprintf(sb->image_digest, sizeof(sb->image_digest), "sha256:%064d", 7);
	snprintf(sb->entrypoint, sizeof(sb->entrypoint), "sleep 1000 && echo 'it''s'");
	snprintf(sb->env, sizeof(sb->env), "A=1\nB=two words\n");
	sb->gpu = true;
	sb->state = SB_RUNNING;
	snprintf(sb->message, sizeof(sb->message), "no message");
	sb->created_at = created_at;
	sb->pid = 4242;
	sb->owner_uid = 4000000000u; /* past INT32_MAX: uids are unsigned */
	sb->owner_gid = 1002;
}

static void make_snapshot(struct snapshot *snap, const char *id, const char *sandbox_id,
			  enum snapshot_kind kind, int64_t created_at)
{
	memset(snap, 0, sizeof(*snap));
	snprintf(snap->id, sizeof(snap->id), "%s", id);
	snprintf(snap->name, sizeof(snap->name), "label-%s", id);
	snap->kind = kind;
	snprintf(snap->sandbox_id, sizeof(snap->sandbox_id), "%s", sandbox_id);
	snap->created_at = created_at;
	snap->completed_at = created_at + 5;
	snap->state = SNAP_COMPLETED;
	snprintf(snap->message, sizeof(snap->message), "ok");
	snap->pause_ms = 12;
	snap->size_bytes = (int64_t)1 << 40;
	snap->stored_bytes = 123456789;
	snprintf(snap->image, sizeof(snap->image), "ubuntu");
	snprintf(snap->image_digest, sizeof(snap->image_digest), "sha256:abc");
	snprintf(snap->entrypoint, sizeof(snap->entrypoint), "/bin/true");
	snprintf(snap->host_json, sizeof(snap->host_json), "{\"cpu\":[\"avx2\"]}");
	snap->gpu = false;
	snap->owner_uid = 1001;
	snap->owner_gid = 1002;
}

/* Ids seen by a walk, space-separated. */
struct ids {
	char buf[1024];
	int stop_after; /* stop the walk after this many rows; 0: never */
	int n;
};

static int collect(struct ids *ids, const char *id)
{
	size_t len = strlen(ids->buf);
	snprintf(ids->buf + len, sizeof(ids->buf) - len, "%s%s", len ? " " : "", id);
	ids->n++;
	return ids->stop_after && ids->n >= ids->stop_after ? 7 : 0;
}

static int collect_sandbox(const struct sandbox *sb, void *arg)
{
	return collect(arg, sb->id);
}

static int collect_snapshot(const struct snapshot *snap, void *arg)
{
	return collect(arg, snap->id);
}

/* A listed row: what a listing shows, and nothing else (a registry_snapshot_each_listed() walk). */
static int collect_listed(const struct snapshot *snap, void *arg)
{
	CHECK(snap->state == SNAP_COMPLETED && snap->sandbox_id[0] == 's');
	CHECK(snap->owner_uid == 1001 && snap->created_at > 0);
	CHECK(strncmp(snap->name, "label-", 6) == 0 && strcmp(snap->name + 6, snap->id) == 0);
	CHECK(snap->host_json[0] == '\0' && snap->pause_ms == 0);
	return collect(arg, snap->id);
}

/* A walk inside a walk of the same statement: the inner one cannot share the kept statement. */
static int walk_again(const struct snapshot *snap, void *arg)
{
	struct registry *reg = arg;
	struct ids inner = {0};
	CHECK(registry_snapshot_each(reg, collect_snapshot, &inner) == 0);
	CHECK_STR(inner.buf, "n5 n1 n2 n0 n3 n4");
	return strcmp(snap->id, "n2") == 0 ? 9 : 0;
}

static void test_names(void)
{
	for (int s = SB_CREATED; s <= SB_FAILED; s++) {
		enum sandbox_state back = SB_FAILED + 1;
		CHECK(sandbox_state_parse(sandbox_state_name(s), &back) == 0);
		CHECK(back == (enum sandbox_state)s);
	}
	for (int s = SNAP_PENDING; s <= SNAP_FAILED; s++) {
		enum snapshot_state back = SNAP_FAILED + 1;
		CHECK(snapshot_state_parse(snapshot_state_name(s), &back) == 0);
		CHECK(back == (enum snapshot_state)s);
	}
	for (int k = SNAP_KIND_SNAPSHOT; k <= SNAP_KIND_SUSPEND; k++) {
		enum snapshot_kind back = SNAP_KIND_SUSPEND + 1;
		CHECK(snapshot_kind_parse(snapshot_kind_name(k), &back) == 0);
		CHECK(back == (enum snapshot_kind)k);
	}
	CHECK_STR(sandbox_state_name(SB_SNAPSHOTTING), "snapshotting");
	CHECK_STR(snapshot_state_name(SNAP_IN_PROGRESS), "in_progress");
	CHECK_STR(snapshot_kind_name(SNAP_KIND_SUSPEND), "suspend");
	CHECK_STR(sandbox_state_name((enum sandbox_state)99), "unknown");

	enum sandbox_state s;
	CHECK(sandbox_state_parse("Running", &s) == -EINVAL);
	CHECK(sandbox_state_parse("", &s) == -EINVAL);
	enum snapshot_state ss;
	CHECK(snapshot_state_parse("done", &ss) == -EINVAL);
	enum snapshot_kind k;
	CHECK(snapshot_kind_parse("fork", &k) == -EINVAL);

	CHECK(sandbox_state_transitional(SB_STARTING));
	CHECK(sandbox_state_transitional(SB_SNAPSHOTTING));
	CHECK(sandbox_state_transitional(SB_SUSPENDING));
	CHECK(sandbox_state_transitional(SB_RESUMING));
	CHECK(sandbox_state_transitional(SB_TERMINATING));
	CHECK(!sandbox_state_transitional(SB_CREATED));
	CHECK(!sandbox_state_transitional(SB_RUNNING));
	CHECK(!sandbox_state_transitional(SB_SUSPENDED));
	CHECK(!sandbox_state_transitional(SB_TERMINATED));
	CHECK(!sandbox_state_transitional(SB_FAILED));

	CHECK(snapshot_state_settled(SNAP_COMPLETED));
	CHECK(snapshot_state_settled(SNAP_FAILED));
	CHECK(!snapshot_state_settled(SNAP_PENDING));
	CHECK(!snapshot_state_settled(SNAP_IN_PROGRESS));
}

static void test_sandboxes(struct registry *reg)
{
	static struct sandbox sb, got;
	make_sandbox(&sb, "web", 1000);
	CHECK(registry_sandbox_insert(reg, &sb) == 0);
	CHECK(registry_sandbox_insert(reg, &sb) == -EEXIST);
	CHECK(registry_sandbox_get(reg, "web", &got) == 0);
	CHECK(memcmp(&sb, &got, sizeof(sb)) == 0);
	CHECK(registry_sandbox_get(reg, "nope", &got) == -ENOENT);
	CHECK(registry_sandbox_get(reg, "we", &got) == -ENOENT);

	sb.state = SB_SUSPENDED;
	sb.gpu = false;
	sb.pid = 0;
	sb.created_at = INT64_MAX;
	snprintf(sb.message, sizeof(sb.message), "runsc said \"no\"; DROP TABLE sandboxes; --");
	snprintf(sb.restore_snapshot, sizeof(sb.restore_snapshot), "snap-1");
	CHECK(registry_sandbox_update(reg, &sb) == 0);
	CHECK(registry_sandbox_get(reg, "web", &got) == 0);
	CHECK(memcmp(&sb, &got, sizeof(sb)) == 0);

	static struct sandbox other;
	make_sandbox(&other, "ghost", 1);
	CHECK(registry_sandbox_update(reg, &other) == -ENOENT);
	CHECK(registry_sandbox_get(reg, "ghost", &got) == -ENOENT);

	/* Too long for a field: refused, nothing written. */
	make_sandbox(&other, "long", 1);
	memset(other.image, 'x', sizeof(other.image));
	CHECK(registry_sandbox_insert(reg, &other) == -ENAMETOOLONG);
	CHECK(registry_sandbox_get(reg, "long", &got) == -ENOENT);
	memset(sb.env, 'E', sizeof(sb.env));
	CHECK(registry_sandbox_update(reg, &sb) == -ENAMETOOLONG);
	sb.env[sizeof(sb.env) - 1] = '\0'; /* the longest that fits */
	CHECK(registry_sandbox_update(reg, &sb) == 0);
	CHECK(registry_sandbox_get(reg, "web", &got) == 0);
	CHECK(strlen(got.env) == ENV_MAX - 1);
	CHECK(memcmp(&sb, &got, sizeof(sb)) == 0);

	/* A bad enum value is refused. */
	make_sandbox(&other, "badstate", 1);
	other.state = (enum sandbox_state)42;
	CHECK(registry_sandbox_insert(reg, &other) == -EINVAL);

	CHECK(registry_sandbox_delete(reg, "web") == 0);
	CHECK(registry_sandbox_delete(reg, "web") == -ENOENT);
	CHECK(registry_sandbox_get(reg, "web", &got) == -ENOENT);
}

static void test_snapshots(struct registry *reg)
{
	static struct snapshot snap, got;
	make_snapshot(&snap, "snap-a", "sbx", SNAP_KIND_SNAPSHOT, 10);
	CHECK(registry_snapshot_insert(reg, &snap) == 0);
	CHECK(registry_snapshot_insert(reg, &snap) == -EEXIST);
	CHECK(registry_snapshot_get(reg, "snap-a", &got) == 0);
	CHECK(memcmp(&snap, &got, sizeof(snap)) == 0);
	CHECK(registry_snapshot_get(reg, "snap-b", &got) == -ENOENT);

	snap.state = SNAP_FAILED;
	snap.kind = SNAP_KIND_SUSPEND;
	snap.gpu = true;
	snap.completed_at = -1;
	snprintf(snap.message, sizeof(snap.message), "store: 'disk' full");
	CHECK(registry_snapshot_update(reg, &snap) == 0);
	CHECK(registry_snapshot_get(reg, "snap-a", &got) == 0);
	CHECK(memcmp(&snap, &got, sizeof(snap)) == 0);

	static struct snapshot other;
	make_snapshot(&other, "snap-ghost", "sbx", SNAP_KIND_SNAPSHOT, 1);
	CHECK(registry_snapshot_update(reg, &other) == -ENOENT);
	memset(other.host_json, '{', sizeof(other.host_json));
	CHECK(registry_snapshot_insert(reg, &other) == -ENAMETOOLONG);
	make_snapshot(&other, "snap-ghost", "sbx", SNAP_KIND_SNAPSHOT, 1);
	memset(other.id, 'i', sizeof(other.id));
	CHECK(registry_snapshot_insert(reg, &other) == -ENAMETOOLONG);
	make_snapshot(&other, "snap-ghost", "sbx", (enum snapshot_kind)5, 1);
	CHECK(registry_snapshot_insert(reg, &other) == -EINVAL);

	CHECK(registry_snapshot_delete(reg, "snap-a") == 0);
	CHECK(registry_snapshot_delete(reg, "snap-a") == -ENOENT);
	CHECK(registry_snapshot_get(reg, "snap-a", &got) == -ENOENT);
}

static void test_order(struct registry *reg)
{
	static struct sandbox sb;
	/* Inserted out of order; equal created_at is ordered by id. */
	const struct {
		const char *id;
		int64_t at;
		const char *parent;
	} sbs[] = {
	    {"s3", 300, "p1"},	{"s1", 100, ""},  {"s2b", 200, "p1"},
	    {"s2a", 200, "p1"}, {"s4", 50, "p2"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(sbs); i++) {
		make_sandbox(&sb, sbs[i].id, sbs[i].at);
		snprintf(sb.parent_snapshot, sizeof(sb.parent_snapshot), "%s", sbs[i].parent);
		CHECK(registry_sandbox_insert(reg, &sb) == 0);
	}
	struct ids ids = {0};
	CHECK(registry_sandbox_each(reg, collect_sandbox, &ids) == 0);
	CHECK_STR(ids.buf, "s4 s1 s2a s2b s3");
	ids = (struct ids){.stop_after = 2};
	CHECK(registry_sandbox_each(reg, collect_sandbox, &ids) == 7);
	CHECK_STR(ids.buf, "s4 s1");
	ids = (struct ids){0};
	CHECK(registry_sandbox_each_forked_from(reg, "p1", collect_sandbox, &ids) == 0);
	CHECK_STR(ids.buf, "s2a s2b s3");
	ids = (struct ids){0};
	CHECK(registry_sandbox_each_forked_from(reg, "none", collect_sandbox, &ids) == 0);
	CHECK_STR(ids.buf, "");

	static struct snapshot snap;
	const struct {
		const char *id, *sandbox;
		enum snapshot_kind kind;
		int64_t at;
	} snaps[] = {
	    {"n3", "s1", SNAP_KIND_SNAPSHOT, 30}, {"n1", "s1", SNAP_KIND_SNAPSHOT, 10},
	    {"n4", "s1", SNAP_KIND_SUSPEND, 40},  {"n2", "s2a", SNAP_KIND_SNAPSHOT, 20},
	    {"n0", "s1", SNAP_KIND_SNAPSHOT, 30}, {"n5", "s3", SNAP_KIND_SUSPEND, 5},
	};
	for (size_t i = 0; i < ARRAY_SIZE(snaps); i++) {
		make_snapshot(&snap, snaps[i].id, snaps[i].sandbox, snaps[i].kind, snaps[i].at);
		CHECK(registry_snapshot_insert(reg, &snap) == 0);
	}
	ids = (struct ids){0};
	CHECK(registry_snapshot_each(reg, collect_snapshot, &ids) == 0);
	CHECK_STR(ids.buf, "n5 n1 n2 n0 n3 n4");
	ids = (struct ids){0};
	CHECK(registry_snapshot_each_of_sandbox(reg, "s1", collect_snapshot, &ids) == 0);
	CHECK_STR(ids.buf, "n1 n0 n3 n4");
	ids = (struct ids){.stop_after = 1};
	CHECK(registry_snapshot_each_of_sandbox(reg, "s1", collect_snapshot, &ids) == 7);
	CHECK_STR(ids.buf, "n1");
	ids = (struct ids){0};
	CHECK(registry_snapshot_each_listed(reg, collect_listed, &ids) == 0);
	CHECK_STR(ids.buf, "n5 n1 n2 n0 n3 n4");
	/* Stopped mid-walk, the kept statement is reset: the next walk starts from the first row.
	 */
	CHECK(registry_snapshot_each(reg, walk_again, reg) == 9);
	ids = (struct ids){0};
	CHECK(registry_snapshot_each(reg, collect_snapshot, &ids) == 0);
	CHECK_STR(ids.buf, "n5 n1 n2 n0 n3 n4");
}

static void test_pinned(struct registry *reg)
{
	static struct sandbox sb;
	bool pinned = true;
	CHECK(registry_snapshot_pinned(reg, "snap-p", &pinned) == 0);
	CHECK(!pinned);

	make_sandbox(&sb, "pin", 1);
	snprintf(sb.restore_snapshot, sizeof(sb.restore_snapshot), "snap-p");
	CHECK(registry_sandbox_insert(reg, &sb) == 0);
	const struct {
		enum sandbox_state state;
		bool pinned;
	} cases[] = {
	    {SB_RUNNING, false},      {SB_SUSPENDING, true},  {SB_SUSPENDED, true},
	    {SB_RESUMING, true},      {SB_TERMINATED, false}, {SB_FAILED, false},
	    {SB_SNAPSHOTTING, false},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		sb.state = cases[i].state;
		CHECK(registry_sandbox_update(reg, &sb) == 0);
		pinned = !cases[i].pinned;
		CHECK(registry_snapshot_pinned(reg, "snap-p", &pinned) == 0);
		CHECK(pinned == cases[i].pinned);
	}
	sb.state = SB_SUSPENDED;
	CHECK(registry_sandbox_update(reg, &sb) == 0);
	CHECK(registry_snapshot_pinned(reg, "snap-other", &pinned) == 0);
	CHECK(!pinned);
}

/* One of THREADS: its own sandboxes and snapshots, inserted, updated and read back. */
static int insert_many(void *obj, int index)
{
	struct registry *reg = obj;
	struct sandbox *sb = malloc(sizeof(*sb));
	struct snapshot *snap = malloc(sizeof(*snap));
	char id[ID_MAX];
	int failures = !sb || !snap;
	for (int i = 0; sb && snap && i < PER_THREAD; i++) {
		snprintf(id, sizeof(id), "t%d-%d", index, i);
		make_sandbox(sb, id, i);
		make_snapshot(snap, id, id, SNAP_KIND_SNAPSHOT, i);
		failures += registry_sandbox_insert(reg, sb) != 0;
		failures += registry_snapshot_insert(reg, snap) != 0;
		sb->state = SB_TERMINATED;
		failures += registry_sandbox_update(reg, sb) != 0;
		failures += registry_snapshot_get(reg, id, snap) != 0;
	}
	free(sb);
	free(snap);
	return failures;
}

static int count_sandbox(const struct sandbox *sb, void *arg)
{
	*(int *)arg += sb->id[0] == 't' && sb->state == SB_TERMINATED;
	return 0;
}

static void test_threads(struct registry *reg)
{
	t_threads(THREADS, insert_many, reg);
	int n = 0;
	CHECK(registry_sandbox_each(reg, count_sandbox, &n) == 0);
	CHECK(n == THREADS * PER_THREAD);
}

/*
 * The registry at @path opened again, sandbox @sb_id and snapshot @snap_id
 * read from it into @sb and @snap; NULL (a failed check) if it does not open.
 */
static struct registry *reopen_with(const char *path, const char *sb_id, struct sandbox *sb,
				    const char *snap_id, struct snapshot *snap)
{
	struct registry *reg = NULL;
	CHECK(registry_open(path, &reg) == 0);
	if (!reg)
		return NULL;
	CHECK(registry_sandbox_get(reg, sb_id, sb) == 0);
	CHECK(registry_snapshot_get(reg, snap_id, snap) == 0);
	return reg;
}

static void test_reopen(const char *path)
{
	static struct sandbox sb;
	static struct snapshot snap;
	struct registry *reg = reopen_with(path, "pin", &sb, "n4", &snap);
	if (!reg)
		return;
	CHECK(sb.state == SB_SUSPENDED);
	CHECK_STR(sb.restore_snapshot, "snap-p");
	CHECK_STR(sb.env, "A=1\nB=two words\n");
	CHECK(snap.kind == SNAP_KIND_SUSPEND);
	CHECK_STR(snap.host_json, "{\"cpu\":[\"avx2\"]}");
	int n = 0;
	CHECK(registry_sandbox_each(reg, count_sandbox, &n) == 0);
	CHECK(n == THREADS * PER_THREAD);
	registry_close(reg);
}

/* Change the database behind the registry's back, as another program could. */
static void raw_exec(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	CHECK(sqlite3_open(path, &db) == SQLITE_OK);
	CHECK(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);
}

/* The first column of @sql's first row, as a number; -1 if it fails. */
static int raw_count(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int n = -1;
	if (sqlite3_open(path, &db) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

static void test_foreign_rows(const char *path)
{
	struct registry *reg = NULL;
	raw_exec(path, "PRAGMA user_version = 11");
	CHECK(registry_open(path, &reg) == -EIO);
	raw_exec(path, "PRAGMA user_version = 10");

	/* 100 bytes into a 40-byte field, and a state this build does not know. */
	raw_exec(path, "UPDATE sandboxes SET runtime_id = replace(hex(zeroblob(50)), '0', 'r')"
		       " WHERE id = 'pin';"
		       "UPDATE sandboxes SET state = 'dancing' WHERE id = 's1';"
		       "UPDATE sandboxes SET owner_uid = -1 WHERE id = 's2a';"
		       "UPDATE snapshots SET owner_gid = 4294967295 WHERE id = 'n4'");
	CHECK(registry_open(path, &reg) == 0);
	if (!reg)
		return;
	static struct sandbox sb;
	CHECK(registry_sandbox_get(reg, "pin", &sb) == 0);
	CHECK(strlen(sb.runtime_id) == RUNTIME_ID_MAX - 1);
	CHECK(sb.runtime_id[0] == 'r');
	CHECK(registry_sandbox_get(reg, "s1", &sb) == -EIO);
	/* An owner no uid can be is refused, not read as root's or anyone's. */
	CHECK(registry_sandbox_get(reg, "s2a", &sb) == -EIO);
	static struct snapshot snap;
	CHECK(registry_snapshot_get(reg, "n4", &snap) == -EIO);
	registry_close(reg);
}

/* A registry of version 1 (before owners) opens, its rows root's, and takes owners after. */
static void test_migrate_v1(const char *dir)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/v1.db", dir);
	raw_exec(path,
		 "CREATE TABLE sandboxes ("
		 " id TEXT PRIMARY KEY NOT NULL, runtime_id TEXT NOT NULL, image TEXT NOT NULL,"
		 " image_digest TEXT NOT NULL, entrypoint TEXT NOT NULL, env TEXT NOT NULL,"
		 " gpu INTEGER NOT NULL, state TEXT NOT NULL, message TEXT NOT NULL,"
		 " created_at INTEGER NOT NULL, parent_snapshot TEXT NOT NULL,"
		 " restore_snapshot TEXT NOT NULL, pid INTEGER NOT NULL);"
		 "CREATE TABLE snapshots ("
		 " id TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,"
		 " sandbox_id TEXT NOT NULL, created_at INTEGER NOT NULL,"
		 " completed_at INTEGER NOT NULL, state TEXT NOT NULL, message TEXT NOT NULL,"
		 " pause_ms INTEGER NOT NULL, size_bytes INTEGER NOT NULL,"
		 " stored_bytes INTEGER NOT NULL, image TEXT NOT NULL, image_digest TEXT NOT NULL,"
		 " entrypoint TEXT NOT NULL, host_json TEXT NOT NULL, gpu INTEGER NOT NULL,"
		 " env TEXT NOT NULL);"
		 "INSERT INTO sandboxes VALUES ('old', 'snapfs-x', 'busybox', '', '', 'A=1', 0,"
		 " 'running', '', 5, '', '', 77);"
		 "INSERT INTO snapshots VALUES ('snap-old', '', 'snapshot', 'old', 6, 7,"
		 " 'completed', '', 1, 2, 3, 'busybox', '', '', '{}', 0, '');"
		 "PRAGMA user_version = 1");
	static struct sandbox sb;
	static struct snapshot snap;
	struct registry *reg = reopen_with(path, "old", &sb, "snap-old", &snap);
	if (!reg)
		return;
	CHECK(sb.owner_uid == 0 && sb.owner_gid == 0);
	CHECK(sb.pid == 77);
	CHECK_STR(sb.env, "A=1");
	CHECK(snap.owner_uid == 0 && snap.owner_gid == 0);
	CHECK_STR(snap.sandbox_id, "old");
	/* Started before limits: unlimited, as it ran (version 3). */
	CHECK(sb.res.memory_bytes == 0 && sb.res.cpu_milli == 0 && sb.res.pids == 0);
	CHECK(snap.res.memory_bytes == 0 && snap.res.cpu_milli == 0 && snap.res.pids == 0);
	/* And through version 3 (before lifetimes): no timeout, no periodic snapshots. */
	CHECK(sb.timeout_s == 0 && sb.timeout_action == TIMEOUT_TERMINATE && sb.deadline_at == 0);
	CHECK(sb.autosnap_every_s == 0 && sb.autosnap_keep == 0);
	CHECK(snap.timeout_s == 0 && snap.timeout_action == TIMEOUT_TERMINATE);
	/* And through version 4 (before published ports): none. */
	CHECK_STR(sb.ports, "");
	CHECK_STR(snap.ports, "");
	/* And through version 5 (before networks): none, no rules. */
	CHECK(sb.network == SB_NET_NONE && sb.egress[0] == '\0' && snap.network == SB_NET_NONE);
	/* And through version 7 (before the timer's mark): unmarked, so never pruned. */
	CHECK(!snap.autosnap);
	/* And through version 8 (before exit statuses): none seen. */
	CHECK_STR(sb.exit_code, "");
	snprintf(sb.exit_code, sizeof(sb.exit_code), "7");
	sb.network = SB_NET_EGRESS;
	snprintf(sb.egress, sizeof(sb.egress), "deny 0.0.0.0/0\n");
	sb.owner_uid = 1234;
	sb.res = (struct resources){.memory_bytes = 1LL << 30, .cpu_milli = 500, .pids = 64};
	sb.timeout_s = 30;
	sb.timeout_action = TIMEOUT_SUSPEND;
	sb.deadline_at = 12345;
	snprintf(sb.ports, sizeof(sb.ports), "8080 40001\n");
	CHECK(registry_sandbox_update(reg, &sb) == 0);
	snap.res = sb.res;
	snap.autosnap = true;
	CHECK(registry_snapshot_update(reg, &snap) == 0);
	registry_close(reg);

	reg = NULL;
	/* And through version 6: the listing's covering index replaces snapshots_created. */
	CHECK(raw_count(path,
			"SELECT count(*) FROM sqlite_master WHERE name = 'snapshots_listed'") == 1);
	CHECK(raw_count(path,
			"SELECT count(*) FROM sqlite_master WHERE name = 'snapshots_created'") ==
	      0);
	/* And through version 9: the listing's index holds the name. */
	CHECK(raw_count(path, "SELECT count(*) FROM pragma_index_info('snapshots_listed')"
			      " WHERE name = 'name'") == 1);
	CHECK(registry_open(path, &reg) == 0); /* version 10 now: opened as it is */
	if (!reg)
		return;
	CHECK(registry_sandbox_get(reg, "old", &sb) == 0);
	CHECK_STR(sb.exit_code, "7");
	CHECK(sb.owner_uid == 1234);
	CHECK(sb.network == SB_NET_EGRESS);
	CHECK_STR(sb.egress, "deny 0.0.0.0/0\n");
	CHECK(sb.res.memory_bytes == 1LL << 30 && sb.res.cpu_milli == 500 && sb.res.pids == 64);
	CHECK_STR(sb.ports, "8080 40001\n");
	CHECK(registry_snapshot_get(reg, "snap-old", &snap) == 0);
	CHECK(snap.res.memory_bytes == 1LL << 30 && snap.res.cpu_milli == 500 &&
	      snap.res.pids == 64);
	CHECK(snap.autosnap);
	CHECK(sb.timeout_s == 30 && sb.timeout_action == TIMEOUT_SUSPEND &&
	      sb.deadline_at == 12345);
	registry_close(reg);
}

int main(void)
{
	char dir[] = "/tmp/test_registry.XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	char path[sizeof(dir) + 32];
	snprintf(path, sizeof(path), "%s/registry.db", dir);

	test_names();
	struct registry *reg = NULL;
	CHECK(registry_open(path, &reg) == 0);
	if (reg) {
		test_sandboxes(reg);
		test_snapshots(reg);
		test_order(reg);
		test_pinned(reg);
		test_threads(reg);
		registry_close(reg);
		test_reopen(path);
		test_foreign_rows(path);
	}
	test_migrate_v1(dir);
	CHECK(registry_open("/nonexistent-dir/registry.db", &reg) < 0);
	rm_rf(dir);
	return t_done();
}
