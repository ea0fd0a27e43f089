/*
 * test_store_records.c - the local copy of the store's records
 * (backend/store/store_records.c): a store opened again with the same state
 * directory reads no manifest it recorded before, and ends with the same
 * records; a manifest gone from the store takes its row with it; a row is
 * never a record without a manifest listed, of the length listed (a row of
 * an id not listed is dropped, one of another length or that does not
 * parse is read again from the store). The same for the pack indexes: a
 * restart reads none, one kept that does not verify is read again, one of
 * a pack no record lists goes.
 *
 * GETs are counted by wrapping objstore_local_open() (the Makefile links
 * this program with --wrap): the objstore store_open() makes gets ops that
 * count every get_buf of a manifest.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/store/store_internal.h"
#include "tests/unit/t_store.h"

int __real_objstore_local_open(const char *dir, struct objstore **out, struct err *e);
int __wrap_objstore_local_open(const char *dir, struct objstore **out, struct err *e);

static struct objstore_ops counting_ops;
static const struct objstore_ops *real_ops;
static int manifest_gets, idx_gets;

static int counting_get_buf(struct objstore *os, const char *key, char **out, size_t *len,
			    size_t max, struct err *e)
{
	if (!strncmp(key, "manifests/", strlen("manifests/")))
		__atomic_add_fetch(&manifest_gets, 1, __ATOMIC_RELAXED);
	if (strstr(key, ".idx"))
		__atomic_add_fetch(&idx_gets, 1, __ATOMIC_RELAXED);
	return real_ops->get_buf(os, key, out, len, max, e);
}

int __wrap_objstore_local_open(const char *dir, struct objstore **out, struct err *e)
{
	int rc = __real_objstore_local_open(dir, out, e);
	if (rc == 0) {
		real_ops = (*out)->ops;
		counting_ops = *real_ops;
		counting_ops.get_buf = counting_get_buf;
		(*out)->ops = &counting_ops;
	}
	return rc;
}

static struct store *open_store(void)
{
	char url[PATH_MAX + 8];
	struct store *st = NULL;
	struct err e = {0};
	if (xsnprintf(url, sizeof(url), "file://%s/store", t_base) < 0)
		abort(); /* a test's own paths are short */
	manifest_gets = idx_gets = 0;
	CHECK_MSG(store_open(url, t_base, &st, &e) == 0, "open %s: %s", url, e.msg);
	return st;
}

/* Run @sql on <t_base>/store-records.db, as another writer of the file would. */
static void db_exec(const char *sql)
{
	char path[PATH_MAX];
	sqlite3 *db = NULL;
	t_path(path, "store-records.db");
	CHECK(sqlite3_open(path, &db) == SQLITE_OK);
	CHECK_MSG(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK, "%s: %s", sql,
		  sqlite3_errmsg(db));
	sqlite3_close(db);
}

static int rows_in(const char *table, const char *where);

static int row_count(const char *where)
{
	return rows_in("records", where);
}

static int rows_in(const char *table, const char *where)
{
	char path[PATH_MAX], sql[256];
	sqlite3 *db = NULL;
	sqlite3_stmt *s = NULL;
	int n = -1;
	t_path(path, "store-records.db");
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE %s", table, where);
	if (sqlite3_open(path, &db) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
		n = sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(db);
	return n;
}

static bool same_stats(const struct store_stats *a, const struct store_stats *b)
{
	return a->snapshots == b->snapshots && a->packs == b->packs && a->chunks == b->chunks &&
	       a->chunk_bytes == b->chunk_bytes && a->stored_bytes == b->stored_bytes &&
	       a->logical_bytes == b->logical_bytes;
}

/* Three snapshots of different bytes (packs of their own), then the store closed. */
static void fill(struct store_stats *before)
{
	static char pages[3][256 << 10];
	struct store *st = open_store();
	if (!st)
		return;
	for (int i = 0; i < 3; i++) {
		char id[32];
		for (size_t j = 0; j < sizeof(pages[i]); j++)
			pages[i][j] = (char)(rand() & 0xff);
		t_write_image("src", pages[i], sizeof(pages[i]), "ckpt", 4);
		snprintf(id, sizeof(id), "snap-000000000000000%d", i);
		CHECK(t_store_put(st, id, "src", NULL) == 0);
	}
	store_stats(st, before);
	CHECK(before->snapshots == 3 && before->packs >= 3);
	store_close(st);
	CHECK(row_count("1") == 3);
}

int main(void)
{
	struct store_stats before, after; /* before: as the last open left the store */
	struct err e = {0};
	char path[PATH_MAX];
	if (!t_store_begin("test_store_records"))
		return t_done();
	fill(&before);

	/* A restart: no manifest read, the same records and chunk index. */
	struct store *st = open_store();
	CHECK_MSG(manifest_gets == 0, "a restart read %d manifests", manifest_gets);
	CHECK_MSG(idx_gets == 0, "a restart read %d pack indexes", idx_gets);
	store_stats(st, &after);
	CHECK(same_stats(&before, &after));
	CHECK(store_has_record(st, "snap-0000000000000001"));

	/* Another host deletes snap-...1: the refresh forgets it, and its row goes. */
	t_path(path, "store/manifests/snap-0000000000000001.json");
	CHECK(unlink(path) == 0);
	CHECK(store_refresh(st, NULL, &e) == 0);
	CHECK(!store_has_record(st, "snap-0000000000000001"));
	CHECK(row_count("id = 'snap-0000000000000001'") == 0 && row_count("1") == 2);
	store_close(st);

	/*
	 * Rows no manifest backs, written while no daemon ran: one of an id not
	 * listed (a record would keep its packs from collection and offer
	 * them to puts), one of a listed id with another length, one whose
	 * packs do not parse. None becomes a record; the last two are read.
	 */
	db_exec("INSERT INTO records VALUES ('snap-00000000000000ff', 10, 1, 1, "
		"'snap-0000000000000000/0000');"
		"UPDATE records SET manifest_bytes = manifest_bytes + 1 WHERE id = "
		"'snap-0000000000000000';"
		"UPDATE records SET packs = '../etc/0000' WHERE id = 'snap-0000000000000002';");
	st = open_store();
	CHECK_MSG(manifest_gets == 2, "read %d manifests, not the 2 whose rows do not serve",
		  manifest_gets);
	CHECK(!store_has_record(st, "snap-00000000000000ff"));
	store_stats(st, &after);
	CHECK(after.snapshots == 2);
	CHECK(row_count("id = 'snap-00000000000000ff'") == 0 && row_count("1") == 2);
	CHECK(row_count("packs LIKE '%..%'") == 0);
	store_close(st);

	/* Rows written again from the manifests: the next restart reads none. */
	st = open_store();
	CHECK_MSG(manifest_gets == 0 && idx_gets == 0, "a restart read %d manifests, %d indexes",
		  manifest_gets, idx_gets);
	store_stats(st, &before);
	store_close(st);

	/*
	 * A kept pack index that does not verify is read again, and the same
	 * chunks are indexed; one of a pack no record lists goes.
	 */
	db_exec("UPDATE pack_indexes SET idx = x'00' WHERE name = (SELECT min(name) FROM "
		"pack_indexes);"
		"INSERT INTO pack_indexes VALUES ('snap-00000000000000ff/0000', x'00');");
	st = open_store();
	CHECK_MSG(idx_gets == 1, "read %d pack indexes, not the 1 kept corrupt", idx_gets);
	store_stats(st, &after);
	CHECK(same_stats(&before, &after) && after.snapshots == 2);
	CHECK(rows_in("pack_indexes", "name LIKE 'snap-00000000000000ff/%'") == 0);
	CHECK(rows_in("pack_indexes", "length(idx) < 16") == 0);
	store_close(st);

	/* Rows of another store (the state follows a new --store) are dropped. */
	db_exec("UPDATE meta SET v = 'file:///elsewhere' WHERE k = 'url'");
	st = open_store();
	CHECK(manifest_gets == 2);
	store_close(st);
	rm_rf(t_base);
	return t_done();
}
