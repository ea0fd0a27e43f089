/*
 * store_records.c - a local copy of the store's records, so that a restart
 * against a bucket this state knows costs one listing, not a GET of every
 * manifest and pack index (docs/bench/scale.md: 1,000 manifests on
 * s3rver took 8.4 s).
 *
 * A manifest is written once under its id and only ever deleted (a put of
 * an id the store holds fails, put_check_absent()), so what the store keeps
 * of it (struct snap_rec: its packs and sizes) holds for as long as that id
 * is listed. <state>/store-records.db (SQLite, 0600) keeps one row per
 * record this process held at its last refresh, with the URL of the store
 * it was read from. A refresh takes a row only for an id the listing shows,
 * of the length the listing shows: a row is never a snapshot by itself, and
 * a manifest replaced behind snapfs' back by one of another length is read
 * again. Rows come only from records, and records only from a manifest that
 * passed manifest_parse() or from this process's own put. Table
 * pack_indexes keeps the index objects of packs (as read, or as a put here
 * wrote them); each is verified by its own SHA-256 when used, and only a
 * pack some record lists is looked up.
 *
 * After each refresh whose listing succeeded, and at close,
 * store_records_save() makes the rows follow the records: rows of records
 * forgotten since (st->forgotten) are deleted, records not yet saved
 * (snap_rec.cached false) inserted, and where st->records_rescan is set (at
 * open, after a failed save, when st->forgotten overflowed) every row
 * without a record goes, but only after a listing: the records of a store
 * that never answered are none. Pack indexes of packs the store no longer
 * has go in bulk. The file is a cache: one that cannot be opened or written
 * is warned of and the store reads every manifest as before.
 *
 * Locks: rdb and its statements are used under st->sync_lock (store_open()
 * and store_close() run alone); forgotten, idx_written, records_rescan and
 * the cached flags are under st->lock.
 */
#include "backend/store/store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RECORDS_FILE "store-records.db"
#define RECORDS_FORMAT "1"
/* Ids of cached records forgotten between two saves; past it, the next save compares all. */
#define FORGOTTEN_MAX (1u << 20)

static const char schema_sql[] =
    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
    "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS records (id TEXT PRIMARY KEY, manifest_bytes INTEGER NOT NULL,"
    " size_bytes INTEGER NOT NULL, stored_bytes INTEGER NOT NULL, packs TEXT NOT NULL)"
    " WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS pack_indexes (name TEXT PRIMARY KEY, idx BLOB NOT NULL)"
    " WITHOUT ROWID;";

static const char find_sql[] =
    "SELECT manifest_bytes, size_bytes, stored_bytes, packs FROM records WHERE id = ?";
static const char find_idx_sql[] = "SELECT idx FROM pack_indexes WHERE name = ?";

static void records_warn(struct store *st, const char *what)
{
	warning("store: the local copy of the store's records: %s: %s (manifests are read "
		"from the store)",
		what, st->rdb ? sqlite3_errmsg(st->rdb) : "cannot open");
}

static int exec(struct store *st, const char *sql)
{
	return sqlite3_exec(st->rdb, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -EIO;
}

/* Whether meta @k is @v. */
static bool meta_is(struct store *st, const char *k, const char *v)
{
	sqlite3_stmt *s = NULL;
	bool same = false;
	if (sqlite3_prepare_v2(st->rdb, "SELECT v FROM meta WHERE k = ?", -1, &s, NULL) ==
		SQLITE_OK &&
	    sqlite3_bind_text(s, 1, k, -1, SQLITE_STATIC) == SQLITE_OK &&
	    sqlite3_step(s) == SQLITE_ROW)
		same = !strcmp((const char *)sqlite3_column_text(s, 0), v);
	sqlite3_finalize(s);
	return same;
}

static int meta_set(struct store *st, const char *k, const char *v)
{
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(st->rdb, "INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)", -1,
				    &s, NULL);
	if (rc == SQLITE_OK && sqlite3_bind_text(s, 1, k, -1, SQLITE_STATIC) == SQLITE_OK &&
	    sqlite3_bind_text(s, 2, v, -1, SQLITE_STATIC) == SQLITE_OK)
		rc = sqlite3_step(s);
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

/* Rows of another store (the state follows a new --store) or another format are dropped. */
static int records_adopt(struct store *st)
{
	if (meta_is(st, "format", RECORDS_FORMAT) && meta_is(st, "url", st->os->url))
		return 0;
	int rc = exec(st, "BEGIN; DELETE FROM records; DELETE FROM pack_indexes;");
	if (rc == 0)
		rc = meta_set(st, "format", RECORDS_FORMAT);
	if (rc == 0)
		rc = meta_set(st, "url", st->os->url);
	return rc == 0 ? exec(st, "COMMIT") : (exec(st, "ROLLBACK"), rc);
}

void store_records_open(struct store *st, const char *state_dir)
{
	char path[PATH_MAX];
	if (!state_dir || xsnprintf(path, sizeof(path), "%s/" RECORDS_FILE, state_dir) < 0)
		return;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0)
		close(fd); /* made 0600 before SQLite opens it */
	int rc = sqlite3_open_v2(path, &st->rdb, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc == SQLITE_OK)
		sqlite3_busy_timeout(st->rdb, 1000);
	if (rc != SQLITE_OK || exec(st, schema_sql) < 0 || records_adopt(st) < 0 ||
	    sqlite3_prepare_v2(st->rdb, find_sql, -1, &st->rdb_find, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(st->rdb, find_idx_sql, -1, &st->rdb_idx, NULL) != SQLITE_OK) {
		records_warn(st, path);
		store_records_close(st);
		return;
	}
	st->records_rescan = true; /* rows of ids gone while no daemon ran */
	sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(st->rdb, "SELECT count(*) FROM pack_indexes", -1, &s, NULL) ==
		SQLITE_OK &&
	    sqlite3_step(s) == SQLITE_ROW)
		st->idx_rows = (size_t)sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
}

void store_records_close(struct store *st)
{
	store_records_save(st, false); /* what puts added since the last refresh */
	sqlite3_finalize(st->rdb_find);
	sqlite3_finalize(st->rdb_idx);
	sqlite3_close(st->rdb);
	st->rdb_find = NULL;
	st->rdb_idx = NULL;
	st->rdb = NULL;
	strbuf_release(&st->forgotten);
	strbuf_release(&st->idx_written);
}

/* @text, pack names separated by spaces, into @m's packs: -EIO unless each is a pack name. */
static int decode_packs(const char *text, struct manifest *m)
{
	size_t n = text[0] ? 1 : 0;
	for (const char *p = text; *p; p++)
		n += *p == ' ';
	if (n > MANIFEST_PACKS_MAX)
		return -EIO;
	m->packs = calloc(n + 1, sizeof(*m->packs));
	if (!m->packs)
		return -ENOMEM;
	for (const char *p = text; m->npacks < n; m->npacks++) {
		size_t len = strcspn(p, " ");
		if (len > MANIFEST_PACK_MAX)
			return -EIO;
		memcpy(m->packs[m->npacks], p, len);
		if (!manifest_pack_ok(m->packs[m->npacks]))
			return -EIO;
		p += len + (p[len] == ' ');
	}
	return 0;
}

int store_records_find(struct store *st, const char *id, int64_t manifest_bytes, struct manifest *m)
{
	sqlite3_stmt *s = st->rdb_find;
	int rc = 0;
	memset(m, 0, sizeof(*m));
	if (!s || sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC) != SQLITE_OK)
		return 0;
	if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int64(s, 0) == manifest_bytes) {
		m->size_bytes = sqlite3_column_int64(s, 1);
		m->stored_bytes = sqlite3_column_int64(s, 2);
		const char *packs = (const char *)sqlite3_column_text(s, 3);
		rc = m->size_bytes < 0 || m->stored_bytes < 0 || !packs ? -EIO
									: decode_packs(packs, m);
		rc = rc == 0 ? 1 : rc;
	}
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	if (rc < 0)
		manifest_free(m);
	return rc == -EIO ? 0 : rc; /* a row that does not parse is as none: the manifest is read */
}

static int delete_where(struct store *st, const char *sql, const struct strbuf *ids);

int store_records_idx_find(struct store *st, const char *name, char **data, size_t *len)
{
	sqlite3_stmt *s = st->rdb_idx;
	int rc = 0;
	if (!s || sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC) != SQLITE_OK)
		return 0;
	if (sqlite3_step(s) == SQLITE_ROW) {
		int n = sqlite3_column_bytes(s, 0);
		const void *blob = sqlite3_column_blob(s, 0);
		if (blob && n > 0 && (size_t)n <= PACK_IDX_MAX) {
			*data = malloc((size_t)n + 1);
			rc = *data ? 1 : -ENOMEM;
			if (rc == 1) {
				memcpy(*data, blob, (size_t)n);
				(*data)[n] = '\0';
				*len = (size_t)n;
			}
		}
	}
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return rc;
}

void store_records_idx_add(struct store *st, const char *name, const char *data, size_t len)
{
	sqlite3_stmt *s = NULL;
	if (!st->rdb)
		return;
	int rc = sqlite3_prepare_v2(
	    st->rdb, "INSERT OR REPLACE INTO pack_indexes (name, idx) VALUES (?, ?)", -1, &s, NULL);
	if (rc == SQLITE_OK && sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC) == SQLITE_OK &&
	    sqlite3_bind_blob(s, 2, data, (int)len, SQLITE_STATIC) == SQLITE_OK)
		rc = sqlite3_step(s);
	sqlite3_finalize(s);
	if (rc == SQLITE_DONE)
		st->idx_rows++;
	else if (!st->records_warned)
		records_warn(st, "cannot save a pack index"), st->records_warned = true;
}

/* Past this many bytes of index objects waiting for a save, the puts' are read back once later. */
#define IDX_WRITTEN_MAX (64u << 20)

void store_records_idx_written(struct store *st, const char *name, const char *data, size_t len)
{
	pthread_mutex_lock(&st->lock);
	if (st->rdb) {
		st->idx_written.max = IDX_WRITTEN_MAX;
		strbuf_add(&st->idx_written, name, strlen(name) + 1);
		strbuf_add(&st->idx_written, &len, sizeof(len));
		strbuf_add(&st->idx_written, data, len);
		if (strbuf_error(&st->idx_written) < 0)
			strbuf_reset(&st->idx_written);
	}
	pthread_mutex_unlock(&st->lock);
}

/* The index objects puts wrote, taken from store_records_idx_written(). */
static void add_written(struct store *st, const struct strbuf *w)
{
	for (size_t off = 0; off < w->len;) {
		const char *name = w->buf + off;
		size_t len;
		off += strlen(name) + 1;
		memcpy(&len, w->buf + off, sizeof(len));
		off += sizeof(len);
		store_records_idx_add(st, name, w->buf + off, len);
		off += len;
	}
}

void store_records_batch(struct store *st, bool begin)
{
	if (st->rdb)
		exec(st, begin ? "BEGIN" : "COMMIT");
}

/* Under sync_lock: drop the pack indexes of packs the store no longer has. */
static int prune_indexes(struct store *st)
{
	_cleanup_strset_ struct strset names = STRSET_INIT;
	_cleanup_strbuf_ struct strbuf gone = STRBUF_INIT;
	sqlite3_stmt *s = NULL;
	int rc = 0;
	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; rc == 0 && i < st->npacks; i++)
		rc = strset_add(&names, st->packs[i]->name);
	pthread_mutex_unlock(&st->lock);
	if (rc == 0)
		rc = strset_seal(&names);
	if (rc == 0 &&
	    sqlite3_prepare_v2(st->rdb, "SELECT name FROM pack_indexes", -1, &s, NULL) != SQLITE_OK)
		rc = -EIO;
	size_t kept = 0;
	while (rc == 0 && sqlite3_step(s) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(s, 0);
		if (name && strset_has(&names, name))
			kept++;
		else
			strbuf_add(&gone, name ? name : "", name ? strlen(name) + 1 : 1);
	}
	sqlite3_finalize(s);
	if (rc == 0)
		rc = strbuf_error(&gone);
	if (rc == 0)
		rc = delete_where(st, "DELETE FROM pack_indexes WHERE name = ?", &gone);
	if (rc == 0)
		st->idx_rows = kept;
	return rc;
}

void store_records_note_forgotten(struct store *st, const struct snap_rec *rec)
{
	if (!rec->cached)
		return;
	st->forgotten.max = FORGOTTEN_MAX;
	strbuf_add(&st->forgotten, rec->id, strlen(rec->id) + 1);
	if (strbuf_error(&st->forgotten) < 0) {
		strbuf_reset(&st->forgotten);
		st->records_rescan = true;
	}
}

bool store_records_forget(struct store *st, const char *id)
{
	const struct snap_rec *rec = store_find_snap(st, id);
	if (rec)
		store_records_note_forgotten(st, rec);
	return store_forget_snap(st, id);
}

/* Under st->lock: a line per record not saved yet, "id\tmb\tsize\tstored\tpacks"; now saved. */
static int take_unsaved(struct store *st, struct strbuf *out)
{
	for (size_t i = 0; i < st->nsnaps; i++) {
		struct snap_rec *r = &st->snaps[i];
		if (r->cached)
			continue;
		strbuf_addf(out, "%s\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t", r->id,
			    r->manifest_bytes, r->size_bytes, r->stored_bytes);
		for (size_t j = 0; j < r->npacks; j++)
			strbuf_addf(out, "%s%s", j ? " " : "", r->packs[j]->name);
		strbuf_adds(out, "\n");
		r->cached = true;
	}
	return strbuf_error(out);
}

static int step_text(sqlite3_stmt *s, const char *const *v, size_t n)
{
	int rc = SQLITE_OK;
	for (size_t i = 0; rc == SQLITE_OK && i < n; i++)
		rc = sqlite3_bind_text(s, (int)i + 1, v[i], -1, SQLITE_STATIC);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(s);
	sqlite3_reset(s);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

/* Run @sql (one parameter) once for each of the NUL-separated @ids. */
static int delete_where(struct store *st, const char *sql, const struct strbuf *ids)
{
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(st->rdb, sql, -1, &s, NULL) == SQLITE_OK ? 0 : -EIO;
	for (size_t off = 0; rc == 0 && off < ids->len; off += strlen(ids->buf + off) + 1) {
		const char *id = ids->buf + off;
		rc = step_text(s, &id, 1);
	}
	sqlite3_finalize(s);
	return rc;
}

/* The ids of rows without a record, NUL-separated, into @out. */
static int rows_unrecorded(struct store *st, struct strbuf *out)
{
	sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(st->rdb, "SELECT id FROM records", -1, &s, NULL) != SQLITE_OK)
		return -EIO;
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *id = (const char *)sqlite3_column_text(s, 0);
		pthread_mutex_lock(&st->lock);
		bool recorded = id && store_find_snap(st, id);
		pthread_mutex_unlock(&st->lock);
		if (!recorded)
			strbuf_add(out, id ? id : "", id ? strlen(id) + 1 : 1);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? strbuf_error(out) : -EIO;
}

static int insert_lines(struct store *st, char *lines)
{
	sqlite3_stmt *s = NULL;
	int rc =
	    sqlite3_prepare_v2(st->rdb,
			       "INSERT OR REPLACE INTO records (id, manifest_bytes, size_bytes, "
			       "stored_bytes, packs) VALUES (?, ?, ?, ?, ?)",
			       -1, &s, NULL) == SQLITE_OK
		? 0
		: -EIO;
	char *save = NULL;
	for (char *line = strtok_r(lines, "\n", &save); rc == 0 && line;
	     line = strtok_r(NULL, "\n", &save)) {
		const char *v[5];
		char *fs = NULL;
		v[0] = strtok_r(line, "\t", &fs);
		for (int i = 1; i < 4; i++)
			v[i] = strtok_r(NULL, "\t", &fs);
		v[4] = fs ? fs : ""; /* the packs, possibly none */
		rc = v[3] ? step_text(s, v, 5) : -EIO;
	}
	sqlite3_finalize(s);
	return rc;
}

void store_records_save(struct store *st, bool listed)
{
	_cleanup_strbuf_ struct strbuf gone = STRBUF_INIT, unsaved = STRBUF_INIT;
	_cleanup_strbuf_ struct strbuf written = STRBUF_INIT;
	if (!st->rdb)
		return;
	pthread_mutex_lock(&st->lock);
	written = st->idx_written;
	st->idx_written = (struct strbuf)STRBUF_INIT;
	bool rescan = listed && st->records_rescan; /* else the records may not follow a listing */
	st->records_rescan = st->records_rescan && !listed;
	gone = st->forgotten;
	st->forgotten = (struct strbuf)STRBUF_INIT;
	int rc = take_unsaved(st, &unsaved);
	/* Pack indexes leave in bulk: those of collected packs pass an eighth more than packs. */
	bool prune = listed && (rescan || st->idx_rows > st->npacks + st->npacks / 8 + 16);
	pthread_mutex_unlock(&st->lock);
	if (rc == 0 && gone.len == 0 && unsaved.len == 0 && written.len == 0 && !rescan && !prune)
		return;
	if (rc == 0)
		rc = exec(st, "BEGIN");
	if (rc == 0 && prune)
		rc = prune_indexes(st);
	if (rc == 0)
		rc = delete_where(st, "DELETE FROM records WHERE id = ?", &gone);
	if (rc == 0 && rescan) {
		strbuf_reset(&gone);
		rc = rows_unrecorded(st, &gone);
		if (rc == 0)
			rc = delete_where(st, "DELETE FROM records WHERE id = ?", &gone);
	}
	if (rc == 0 && unsaved.len)
		rc = insert_lines(st, unsaved.buf);
	if (rc == 0)
		add_written(st, &written);
	if (rc == 0)
		rc = exec(st, "COMMIT");
	if (rc == 0)
		return;
	exec(st, "ROLLBACK");
	if (!st->records_warned)
		records_warn(st, "cannot save");
	st->records_warned = true;
	/* Everything again at the next save. */
	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->nsnaps; i++)
		st->snaps[i].cached = false;
	st->records_rescan = true;
	pthread_mutex_unlock(&st->lock);
}
