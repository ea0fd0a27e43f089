/*
 * test_store_trust.c - deduplication trusts no pack it has not checked
 * (issue 9, item 6): a put reuses a stored chunk only at the length the
 * chunk has, and only from a pack it read one chunk of back; a pack that is
 * overwritten, truncated or whose index lies is dropped, and the next
 * snapshot stores those chunks itself, so it restores. Packs this process
 * wrote are checked too, once; a restart does not make them unusable.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/store/manifest.h"
#include "backend/store/store.h"
#include "backend/store/store_internal.h" /* pack index objects */
#include "lib/util.h"
#include "tests/unit/t.h"
#include "tests/unit/t_dir.h"
#include "tests/unit/t_reads.h"
#include "tests/unit/t_store.h"

#define PAGES_LEN (2u << 20)
#define CKPT_LEN ((300u << 10) + 77)

/* Source directory @rel: random pages (stored plain) and compressible text. */
static void write_source(const char *rel)
{
	unsigned char *pages = malloc(PAGES_LEN), *ckpt = malloc(CKPT_LEN);
	CHECK(pages && ckpt);
	if (!pages || !ckpt)
		goto out;
	t_random(pages, PAGES_LEN);
	for (size_t i = 0; i < CKPT_LEN; i++)
		ckpt[i] = (unsigned char)"kernel state, compressible "[i % 27] + pages[i / 4096];
	t_write_image(rel, pages, PAGES_LEN, ckpt, CKPT_LEN);
out:
	free(pages);
	free(ckpt);
}

/* Whether snapshot @id's manifest lists pack @pack. */
static bool lists_pack(struct store *st, const char *id, const char *pack)
{
	char *json = NULL;
	struct manifest m;
	struct err e = {0};
	bool found = false;
	CHECK(store_get_manifest(st, id, &json, &e) == 0);
	CHECK(json && manifest_parse(json, id, &m, &e) == 0);
	free(json);
	for (size_t i = 0; e.code == 0 && i < m.npacks; i++)
		found |= !strcmp(m.packs[i], pack);
	if (e.code == 0)
		manifest_free(&m);
	return found;
}

/* Snapshot @id restores, every chunk verified, into @rel, which then holds the files of @src. */
static bool restores(struct store *st, const char *id, const char *rel, const char *src)
{
	char out[PATH_MAX];
	struct err e = {0};
	t_path(out, rel);
	int rc = store_get_snapshot(st, id, out, &e);
	if (rc < 0)
		fprintf(stderr, "get %s: %s\n", id, e.msg);
	bool same = rc == 0;
	const char *names[] = {"pages.img", "checkpoint.img"};
	for (size_t i = 0; same && i < ARRAY_SIZE(names); i++) {
		char a[PATH_MAX], b[PATH_MAX];
		_cleanup_free_ char *da = NULL, *db = NULL;
		size_t la = 0, lb = 0;
		snprintf(a, sizeof(a), "%s/%s/%s", t_base, rel, names[i]);
		snprintf(b, sizeof(b), "%s/%s/%s", t_base, src, names[i]);
		same = read_file(a, &da, &la, PAGES_LEN) == 0 &&
		       read_file(b, &db, &lb, PAGES_LEN) == 0 && la == lb && !memcmp(da, db, la);
	}
	rm_rf(out);
	return same;
}

/* The store file of pack @pack with extension @ext. */
static void pack_path(const char *pack, const char *ext, char p[PATH_MAX])
{
	snprintf(p, PATH_MAX, "%s/store/packs/%s.%s", t_base, pack, ext);
}

/* Replace pack @pack by as many random bytes. */
static void junk_pack(const char *pack)
{
	char p[PATH_MAX];
	struct stat sb;
	pack_path(pack, "pack", p);
	CHECK(stat(p, &sb) == 0 && sb.st_size > 0);
	unsigned char *junk = malloc((size_t)sb.st_size);
	CHECK(junk != NULL);
	if (junk) {
		t_random(junk, (size_t)sb.st_size);
		CHECK(write_file_durable(p, junk, (size_t)sb.st_size) == 0);
	}
	free(junk);
}

/* A put of @id from @rel that counts its ranged reads into t_range_reads. */
static int counted_put(struct store *st, const char *id, const char *rel,
		       struct store_put_result *res)
{
	t_reads_count(st);
	int rc = t_store_put(st, id, rel, res);
	t_reads_end(st);
	return rc;
}

/* The store opened again, as after a daemon restart. */
static void reopen(struct store **st)
{
	store_close(*st);
	*st = t_store_open("store");
}

/*
 * The test of the issue: a pack overwritten with junk, then a snapshot of
 * the same data. It does not use the junk (it stores the chunks again) and
 * restores. Then the verdicts are kept: a sound pack is read back once.
 */
static void test_junk_pack(struct store *st)
{
	struct store_put_result res = {0};
	write_source("src");
	CHECK(t_store_put(st, "j1", "src", NULL) == 0);
	junk_pack("j1/0000");
	CHECK(t_store_put(st, "j2", "src", &res) == 0);
	CHECK(!lists_pack(st, "j2", "j1/0000"));
	CHECK(lists_pack(st, "j2", "j2/0000"));
	CHECK(res.stored_bytes > (int64_t)PAGES_LEN); /* it stored the chunks again */
	struct err e = {0};
	CHECK(store_verify_snapshot(st, "j2", &e) == 0);
	CHECK(restores(st, "j2", "j2out", "src"));

	/* j2's pack, written by this process, is checked once (a chunk and the last byte)... */
	CHECK(counted_put(st, "j3", "src", &res) == 0);
	CHECK(t_range_reads >= 1 && t_range_reads <= 2);
	CHECK(res.stored_bytes < (64 << 10)); /* the manifest only */
	CHECK(lists_pack(st, "j3", "j2/0000") && !lists_pack(st, "j3", "j1/0000"));
	/* ... and then trusted. */
	CHECK(counted_put(st, "j4", "src", &res) == 0);
	CHECK(t_range_reads == 0);
	CHECK(restores(st, "j4", "j4out", "src"));
}

/* A pack cut short: the chunk read back may be whole, its last byte is not there. */
static void test_truncated_pack(struct store *st)
{
	char p[PATH_MAX];
	struct stat sb;
	write_source("src-t");
	CHECK(t_store_put(st, "t1", "src-t", NULL) == 0);
	pack_path("t1/0000", "pack", p);
	CHECK(stat(p, &sb) == 0 && truncate(p, sb.st_size - 1) == 0);
	CHECK(t_store_put(st, "t2", "src-t", NULL) == 0);
	CHECK(!lists_pack(st, "t2", "t1/0000"));
	CHECK(restores(st, "t2", "t2out", "src-t"));
}

/*
 * A pack index that gives its chunks the wrong lengths: the chunks are
 * never reused at those lengths (the manifest would not add up), the pack
 * is dropped. The index is read at open: the store is opened again.
 */
static void test_index_lies(struct store **st)
{
	char p[PATH_MAX];
	_cleanup_free_ char *data = NULL, *idx = NULL;
	_cleanup_free_ struct pack_idx_entry *ents = NULL;
	size_t len = 0, n = 0, idx_len = 0;
	struct err e = {0};
	write_source("src-l");
	CHECK(t_store_put(*st, "l1", "src-l", NULL) == 0);
	pack_path("l1/0000", "idx", p);
	CHECK(read_file(p, &data, &len, PACK_IDX_MAX) == 0);
	CHECK(pack_idx_decode(*st, data, len, &ents, &n) == 0 && n > 0);
	for (size_t i = 0; i < n; i++)
		ents[i].len += 1;
	CHECK(pack_idx_encode(*st, ents, n, &idx, &idx_len) == 0);
	CHECK(write_file_durable(p, idx, idx_len) == 0);
	reopen(st);
	if (!*st)
		return;
	CHECK(t_store_put(*st, "l2", "src-l", NULL) == 0);
	CHECK(!lists_pack(*st, "l2", "l1/0000"));
	CHECK(store_verify_snapshot(*st, "l2", &e) == 0);
	CHECK(restores(*st, "l2", "l2out", "src-l"));
}

/*
 * After a restart this process's own packs are checked again, once, pass,
 * and serve; the junk one is dropped again (its chunks may be stored once
 * more: which copy of a chunk the index holds after a restart is not known).
 */
static void test_restart(struct store **st)
{
	struct store_put_result res = {0};
	write_source("src-r");
	CHECK(t_store_put(*st, "r1", "src-r", NULL) == 0);
	reopen(st);
	if (!*st)
		return;
	CHECK(counted_put(*st, "r2", "src-r", &res) == 0);
	CHECK(t_range_reads >= 1 && t_range_reads <= 2);
	CHECK(res.stored_bytes < (64 << 10));
	CHECK(lists_pack(*st, "r2", "r1/0000"));
	CHECK(t_store_put(*st, "j5", "src", NULL) == 0);
	CHECK(!lists_pack(*st, "j5", "j1/0000"));
	CHECK(restores(*st, "j5", "j5out", "src"));
}

/* Another host's pack, junk since it wrote it: found at a refresh, dropped at its first reuse. */
static void test_foreign_pack(struct store *st)
{
	struct store *other = t_store_open("store");
	struct err e = {0};
	if (!other)
		return;
	write_source("src-f");
	CHECK(t_store_put(other, "f1", "src-f", NULL) == 0);
	store_close(other);
	CHECK(store_refresh(st, NULL, &e) == 0);
	junk_pack("f1/0000");
	CHECK(t_store_put(st, "f2", "src-f", NULL) == 0);
	CHECK(!lists_pack(st, "f2", "f1/0000"));
	CHECK(restores(st, "f2", "f2out", "src-f"));
}

int main(void)
{
	if (!t_store_begin("test_store_trust"))
		return 1;
	struct store *st = t_store_open("store");
	if (st) {
		test_junk_pack(st);
		test_truncated_pack(st);
		test_foreign_pack(st);
		test_index_lies(&st);
	}
	if (st)
		test_restart(&st);
	store_close(st);
	rm_rf(t_base);
	return t_done();
}
