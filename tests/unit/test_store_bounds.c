/*
 * test_store_bounds.c - what the bucket's pack indexes and manifests can
 * make a store hold is bounded (issue 9, item 8; the bounds are in
 * backend/store/store_internal.h): index entries within the manifest's bounds,
 * entries per index, chunks in the chunk index, packs and pack references
 * in the records; totals of sizes saturate rather than wrap. The store-wide
 * bounds are lowered through struct store_limits, as the real ones take
 * gigabytes to reach. Digests chosen to collide do not make the index
 * quadratic.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/store/manifest.h"
#include "backend/store/store.h"
#include "backend/store/store_internal.h"
#include "lib/util.h"
#include "tests/unit/t.h"
#include "tests/unit/t_dir.h"
#include "tests/unit/t_store.h"

#define DATA_LEN (1u << 20)

/* A source directory @rel of one file of DATA_LEN random bytes. */
static void write_source(const char *rel)
{
	char p[PATH_MAX];
	unsigned char *data = malloc(DATA_LEN);
	CHECK(data != NULL);
	if (!data)
		return;
	t_random(data, DATA_LEN);
	t_path(p, rel);
	CHECK(mkdir_p(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/%s/pages.img", t_base, rel);
	CHECK(write_file_durable(p, data, DATA_LEN) == 0);
	free(data);
}

/* Decode an index of one entry (@len, @zlen at @off): pack_idx_decode()'s answer. */
static int decode_one(struct store *st, uint32_t len, uint32_t zlen, uint64_t off)
{
	struct pack_idx_entry ent = {.off = off, .len = len, .zlen = zlen}, *got = NULL;
	char *idx = NULL;
	size_t idx_len = 0, n = 0;
	memset(ent.sha256, 0xab, SHA256_LEN);
	CHECK(pack_idx_encode(st, &ent, 1, &idx, &idx_len) == 0);
	int rc = pack_idx_decode(st, idx, idx_len, &got, &n);
	CHECK(rc < 0 || (n == 1 && got[0].zlen == zlen && got[0].off == off));
	free(got);
	free(idx);
	return rc;
}

/* An index entry is within the bounds of manifest.h: dedup copies it into manifests. */
static void test_index_entries(struct store *st)
{
	CHECK(decode_one(st, 1, 64, 0) == 0);
	CHECK(decode_one(st, 1, 65, 0) == -EIO);
	CHECK(decode_one(st, 1, 4228096, 0) == -EIO); /* the crafted chunk of item 1 */
	CHECK(decode_one(st, 65536, 65824, 0) == 0);
	CHECK(decode_one(st, 65536, 65825, 0) == -EIO);
	CHECK(decode_one(st, MANIFEST_CHUNK_MAX + 1, 100, 0) == -EIO);
	CHECK(decode_one(st, 100, 100, PACK_BYTES_MAX - 100) == 0);
	CHECK(decode_one(st, 100, 100, PACK_BYTES_MAX - 99) == -EIO);
	CHECK(decode_one(st, 100, 100, 1ull << 62) == -EIO);
	CHECK(decode_one(st, 100, 100, UINT64_MAX - 10) == -EIO); /* off + zlen would wrap */
}

/* At most PACK_IDX_ENTRIES_MAX entries an index, and the put closes its packs there too. */
static void test_index_count(struct store *st)
{
	size_t n = PACK_IDX_ENTRIES_MAX + 1;
	struct pack_idx_entry *ents = calloc(n, sizeof(*ents)), *got = NULL;
	CHECK(ents != NULL);
	if (!ents)
		return;
	for (size_t i = 0; i < n; i++)
		ents[i] = (struct pack_idx_entry){.off = i, .len = 1, .zlen = 1};
	char *idx = NULL;
	size_t idx_len = 0, got_n = 0;
	CHECK(pack_idx_encode(st, ents, n - 1, &idx, &idx_len) == 0);
	CHECK(idx_len <= PACK_IDX_MAX);
	CHECK(pack_idx_decode(st, idx, idx_len, &got, &got_n) == 0 && got_n == n - 1);
	free(got);
	free(idx);
	CHECK(pack_idx_encode(st, ents, n, &idx, &idx_len) == 0);
	CHECK(pack_idx_decode(st, idx, idx_len, &got, &got_n) == -EIO);
	free(idx);
	free(ents);
}

/* One store's index: its entries and its count. */
static void test_index(void)
{
	struct store *st = t_store_open("s0");
	if (!st)
		return;
	test_index_entries(st);
	test_index_count(st);
	store_close(st);
}

/* Entries of pack @pack's index object in the store at @rel. */
static size_t index_entries(struct store *st, const char *rel, const char *pack)
{
	char p[PATH_MAX];
	_cleanup_free_ char *data = NULL;
	_cleanup_free_ struct pack_idx_entry *ents = NULL;
	size_t len = 0, n = 0;
	snprintf(p, sizeof(p), "%s/%s/packs/%s.idx", t_base, rel, pack);
	CHECK(read_file(p, &data, &len, PACK_IDX_MAX) == 0);
	CHECK(data && pack_idx_decode(st, data, len, &ents, &n) == 0);
	return n;
}

/*
 * Past limits.index_chunks another host's packs are not indexed: puts do
 * not deduplicate against them (they store the chunks themselves), gets of
 * their snapshots work.
 */
static void test_index_bound(struct store *a, struct store *b)
{
	struct store_put_result res = {0};
	struct store_stats stats;
	struct err e = {0};
	write_source("src1");
	write_source("src2");
	CHECK(t_store_put(b, "b1", "src1", NULL) == 0 && t_store_put(b, "b2", "src2", NULL) == 0);
	a->limits.index_chunks = index_entries(a, "s1", "b1/0000");
	CHECK(store_refresh(a, NULL, &e) == 0);
	store_stats(a, &stats);
	CHECK(stats.snapshots == 2 && stats.chunks == (int64_t)a->limits.index_chunks);
	CHECK(t_store_put(a, "a1", "src1", &res) == 0 && res.stored_bytes < (64 << 10));
	CHECK(t_store_put(a, "a2", "src2", &res) == 0 && res.stored_bytes > (int64_t)DATA_LEN);
	char out[PATH_MAX];
	t_path(out, "out-b2");
	CHECK(store_get_snapshot(a, "b2", out, &e) == 0);
}

/* Host @b puts @ids[i] of <t_base>/@srcs[i]; host @a refreshes, and counts what it has. */
static void put_three(struct store *a, struct store *b, const char *const ids[3],
		      const char *const srcs[3], struct store_stats *stats)
{
	struct err e = {0};
	for (int i = 0; i < 3; i++)
		CHECK(t_store_put(b, ids[i], srcs[i], NULL) == 0);
	CHECK(store_refresh(a, NULL, &e) == 0);
	store_stats(a, stats);
}

/*
 * Past limits.packs a manifest is not recorded: it is one that cannot be
 * read (a warning), and collection waits.
 */
static void test_packs_bound(struct store *a, struct store *b)
{
	static const char *const ids[] = {"c1", "c2", "c3"}, *const srcs[] = {"src3", "src4",
									      "src5"};
	struct store_stats stats;
	struct err e = {0};
	for (int i = 0; i < 3; i++)
		write_source(srcs[i]);
	/* Three snapshots of a pack each. */
	a->limits.packs = 2;
	put_three(a, b, ids, srcs, &stats);
	CHECK(stats.snapshots == 2 && stats.packs == 2);
	CHECK(store_collect(a, 0, &e) == -EIO && strstr(e.msg, "cannot be read"));
}

/* Past limits.pack_refs too: three snapshots of one pack (src3, test_packs_bound's). */
static void test_refs_bound(struct store *a, struct store *b)
{
	static const char *const ids[] = {"d1", "d2", "d3"}, *const srcs[] = {"src3", "src3",
									      "src3"};
	struct store_stats stats;
	a->limits.pack_refs = 2;
	put_three(a, b, ids, srcs, &stats);
	CHECK(stats.snapshots == 2 && stats.packs == 1);
}

/* Stores @a and @b on one directory @rel, as two hosts sharing it: @fn(a, b), then closed. */
static void two_hosts(const char *rel, void (*fn)(struct store *a, struct store *b))
{
	struct store *b = t_store_open(rel), *a = t_store_open(rel);
	if (a && b)
		fn(a, b);
	store_close(a);
	store_close(b);
}

/* Sizes from 1100 manifests of 2^53 bytes each: the total saturates (it wrapped before). */
static void test_totals(void)
{
	char p[PATH_MAX];
	const char *json = "{\"format\": 2, \"size_bytes\": 9007199254740992, \"packs\": [], "
			   "\"files\": [{\"name\": \"f\", \"size\": 9007199254740992, "
			   "\"chunks\": [[9007199254740992]]}]}";
	t_path(p, "s4/manifests");
	CHECK(mkdir_p(p, 0700) == 0);
	bool written = true;
	for (int i = 0; written && i < 1100; i++) {
		snprintf(p, sizeof(p), "%s/s4/manifests/huge-%d.json", t_base, i);
		FILE *f = fopen(p, "w"); /* not durable: 1100 fsyncs would only slow the test */
		written = f && fputs(json, f) >= 0;
		if (f)
			written &= fclose(f) == 0;
	}
	CHECK(written);
	struct store *st = t_store_open("s4");
	struct store_stats stats;
	if (!st)
		return;
	store_stats(st, &stats);
	CHECK(stats.snapshots == 1100 && stats.logical_bytes == INT64_MAX);
	store_close(st);
}

/*
 * Digests a bucket writer chose to share their first 8 bytes spread over
 * the chunk index as random ones do (lib/digest_slot.h): the longest run
 * of occupied slots, which every probe of an absent digest may walk, stays
 * short. With slots from the first 8 bytes it was every entry.
 */
static void test_index_flood(void)
{
	enum { N = 20000 };
	static struct pack pack;
	struct chunk_index ix = {0};
	struct chunk_ref ref = {.pack = &pack, .len = 1, .zlen = 1};
	int rc = 0;
	for (uint32_t i = 0; i < N && rc == 0; i++) {
		memcpy(ref.sha256 + 8, &i, sizeof(i));
		rc = chunk_index_add(&ix, &ref);
	}
	CHECK(rc == 0 && ix.count == N);
	size_t run = 0, longest = 0;
	for (size_t i = 0; i < ix.cap; i++) {
		run = ix.slots[i].pack ? run + 1 : 0;
		longest = run > longest ? run : longest;
	}
	if (longest >= 200)
		fprintf(stderr, "crafted digests: a probe run of %zu slots\n", longest);
	CHECK(longest < 200);
	unsigned char absent[SHA256_LEN] = {0};
	memset(absent + 16, 0xff, 16);
	CHECK(chunk_index_find(&ix, absent) == NULL);
	chunk_index_free(&ix);
}

int main(void)
{
	if (!t_store_begin("test_store_bounds"))
		return 1;
	test_index();
	two_hosts("s1", test_index_bound);
	two_hosts("s2", test_packs_bound);
	two_hosts("s3", test_refs_bound);
	test_totals();
	test_index_flood();
	rm_rf(t_base);
	return t_done();
}
