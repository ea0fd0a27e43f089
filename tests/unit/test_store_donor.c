/*
 * test_store_donor.c - store_get_snapshot_from(): a get that copies the
 * chunks local images ("donors") hold reads only the rest from the store,
 * verifies every chunk whatever its source, and falls back to the store for
 * a donor that changed, is torn, or cannot be read.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/store/manifest.h"
#include "backend/store/store.h"
#include "lib/strbuf.h"
#include "lib/util.h"
#include "tests/unit/t.h"
#include "tests/unit/t_dir.h"
#include "tests/unit/t_reads.h"
#include "tests/unit/t_store.h"

#define PAGE 4096u
/* pages.img: random pages, then zeros; checkpoint.img: text. */
#define RANDOM_PAGES 2048u
#define ZERO_PAGES 256u
#define PAGES_LEN ((RANDOM_PAGES + ZERO_PAGES) * PAGE)
#define CKPT_LEN ((200u << 10) + 13)
/* The file the runtime keeps a cached image's manifest in (runtime/cache.h). */
#define MANIFEST_FILE ".manifest.json"

static unsigned char *pages, *ckpt;

/* Write pages.img and checkpoint.img into directory @rel. */
static void write_image(const char *rel)
{
	t_write_image(rel, pages, PAGES_LEN, ckpt, CKPT_LEN);
}

/* Directory @rel holds the current pages and checkpoint. */
static void check_image(const char *rel)
{
	char p[PATH_MAX];
	char *got = NULL;
	size_t len = 0;
	CHECK(t_entries(rel) == 2);
	snprintf(p, sizeof(p), "%s/%s/pages.img", t_base, rel);
	CHECK(read_file(p, &got, &len, PAGES_LEN) == 0);
	CHECK(got && len == PAGES_LEN && !memcmp(got, pages, len));
	free(got);
	got = NULL;
	snprintf(p, sizeof(p), "%s/%s/checkpoint.img", t_base, rel);
	CHECK(read_file(p, &got, &len, CKPT_LEN) == 0);
	CHECK(got && len == CKPT_LEN && !memcmp(got, ckpt, len));
	free(got);
}

/* Materialize @id into @rel with @donors: image directories, NULL-terminated, at most 4. */
static int get_from(struct store *st, const char *id, const char *rel, const char *const *donors,
		    struct store_get_result *res, struct err *e)
{
	char out[PATH_MAX], dirs[4][PATH_MAX], manifests[4][PATH_MAX];
	struct store_donor d[4];
	size_t n = 0;
	for (; donors && donors[n] && n < ARRAY_SIZE(d); n++) {
		t_path(dirs[n], donors[n]);
		snprintf(manifests[n], PATH_MAX, "%s/%s", dirs[n], MANIFEST_FILE);
		d[n] = (struct store_donor){.dir = dirs[n], .manifest = manifests[n]};
	}
	t_path(out, rel);
	return store_get_snapshot_from(st, id, out, d, n, res, e);
}

/* Keep @id's manifest in image @rel, as the runtime does for its cached images. */
static void keep_manifest(struct store *st, const char *id, const char *rel)
{
	char p[PATH_MAX];
	char *json = NULL;
	struct err e = {0};
	CHECK(store_get_manifest(st, id, &json, &e) == 0);
	snprintf(p, sizeof(p), "%s/%s/%s", t_base, rel, MANIFEST_FILE);
	CHECK(json && write_file_durable(p, json, strlen(json)) == 0);
	free(json);
}

/* Files @a and @b have the same bytes. */
static bool same_file(const char *a, const char *b)
{
	char pa[PATH_MAX], pb[PATH_MAX];
	_cleanup_free_ char *da = NULL, *db = NULL;
	size_t la = 0, lb = 0;
	t_path(pa, a);
	t_path(pb, b);
	return read_file(pa, &da, &la, PAGES_LEN) == 0 && read_file(pb, &db, &lb, PAGES_LEN) == 0 &&
	       la == lb && !memcmp(da, db, la);
}

/* Flip a byte of file @rel at @off. */
static void flip(const char *rel, off_t off)
{
	char p[PATH_MAX];
	unsigned char b = 0;
	t_path(p, rel);
	int fd = open(p, O_RDWR);
	CHECK(fd >= 0 && pread(fd, &b, 1, off) == 1);
	b ^= 0x5a;
	CHECK(pwrite(fd, &b, 1, off) == 1);
	close(fd);
}

/* Overwrite the first @len bytes of <t_base>/@rel with random ones. */
static void garble(const char *rel, size_t len)
{
	char p[PATH_MAX];
	unsigned char *junk = malloc(len);
	t_path(p, rel);
	int fd = open(p, O_WRONLY);
	CHECK(junk && fd >= 0);
	if (junk && fd >= 0) {
		t_random(junk, len);
		CHECK(pwrite(fd, junk, len, 0) == (ssize_t)len);
	}
	if (fd >= 0)
		close(fd);
	free(junk);
}

/* Without donors a get reads everything from the store, and says so. */
static void test_no_donors(struct store *st)
{
	struct store_get_result res;
	struct store_stats before, after;
	struct err e = {0};
	store_stats(st, &before);
	CHECK(get_from(st, "snap-1", "img1", NULL, &res, &e) == 0);
	check_image("img1");
	CHECK(res.size_bytes == (int64_t)(PAGES_LEN + CKPT_LEN));
	CHECK(res.local_bytes == 0);
	/* The random pages are stored plain: at least they came over. */
	CHECK(res.store_bytes > (int64_t)(RANDOM_PAGES * PAGE));
	CHECK(res.manifest && strstr(res.manifest, "\"files\""));
	store_stats(st, &after);
	CHECK(after.get_store_bytes - before.get_store_bytes == res.store_bytes);
	CHECK(after.get_local_bytes == before.get_local_bytes);
	free(res.manifest);
	keep_manifest(st, "snap-1", "img1");
}

/* snap-2 differs from snap-1 in a few pages: only their chunks come from the store. */
static void test_shared_chunks(struct store *st)
{
	struct store_get_result full, res;
	struct store_stats before, after;
	struct err e = {0};
	const char *donors[] = {"img1", NULL};
	for (unsigned i = 0; i < 4; i++)
		pages[(300 + i * 500) * PAGE + 7] ^= 0xff;
	write_image("src2");
	CHECK(t_store_put(st, "snap-2", "src2", NULL) == 0);
	CHECK(get_from(st, "snap-2", "full2", NULL, &full, &e) == 0);
	store_stats(st, &before);
	CHECK(get_from(st, "snap-2", "img2", donors, &res, &e) == 0);
	check_image("img2");
	store_stats(st, &after);
	/* Four changed chunks of ~80 KiB each, the manifest, and nothing else. */
	CHECK(res.local_bytes > (int64_t)(RANDOM_PAGES * PAGE) - (2 << 20));
	CHECK(res.store_bytes < (2 << 20) && res.store_bytes * 4 < full.store_bytes);
	CHECK(res.size_bytes == full.size_bytes);
	CHECK(after.get_store_bytes - before.get_store_bytes == res.store_bytes);
	CHECK(after.get_local_bytes - before.get_local_bytes == res.local_bytes);
	keep_manifest(st, "snap-2", "img2");
	/* Every chunk a donor has: only the manifest is read. */
	const char *both[] = {"img1", "img2", NULL};
	struct store_get_result again;
	CHECK(get_from(st, "snap-2", "img2b", both, &again, &e) == 0);
	check_image("img2b");
	CHECK(again.store_bytes == (int64_t)strlen(again.manifest));
	free(full.manifest);
	free(res.manifest);
	free(again.manifest);
}

/* A donor whose files changed, shrank or went: the image is still right. */
static void test_torn_donor(struct store *st)
{
	struct store_get_result res;
	struct err e = {0};
	const char *donors[] = {"img2", NULL};
	char p[PATH_MAX];
	flip("img2/pages.img", 100);		   /* the first chunk */
	flip("img2/checkpoint.img", CKPT_LEN / 2); /* a text chunk */
	CHECK(get_from(st, "snap-2", "torn", donors, &res, &e) == 0);
	check_image("torn");
	CHECK(res.store_bytes > (int64_t)strlen(res.manifest));
	CHECK(res.local_bytes > (int64_t)(RANDOM_PAGES * PAGE) - (2 << 20));
	free(res.manifest);

	t_path(p, "img2/pages.img");
	CHECK(truncate(p, PAGES_LEN / 2) == 0);
	CHECK(get_from(st, "snap-2", "short", donors, &res, &e) == 0);
	check_image("short");
	CHECK(res.local_bytes < (int64_t)(PAGES_LEN / 2 + CKPT_LEN));
	CHECK(res.local_bytes > (int64_t)(PAGES_LEN / 4));
	free(res.manifest);

	/* No files at all, a manifest that is not one, a directory that is not there. */
	t_path(p, "img2/pages.img");
	CHECK(unlink(p) == 0);
	t_write("img2/" MANIFEST_FILE, "{not json", 9);
	const char *bad[] = {"img2", "nowhere", NULL};
	CHECK(get_from(st, "snap-2", "bad", bad, &res, &e) == 0);
	check_image("bad");
	CHECK(res.local_bytes == 0);
	free(res.manifest);
}

/*
 * A donor whose every chunk is wrong (its file was rewritten): the chunks
 * come from the store with as few ranged reads as a fetch without donors
 * makes, not one a chunk.
 */
static void test_garbled_donor(struct store *st)
{
	const char *donors[] = {"g1", NULL};
	struct store_get_result res;
	struct err e = {0};
	CHECK(get_from(st, "snap-1", "g1", NULL, &res, &e) == 0);
	free(res.manifest);
	keep_manifest(st, "snap-1", "g1");
	garble("g1/pages.img", RANDOM_PAGES * PAGE);
	t_reads_count(st);
	CHECK(get_from(st, "snap-1", "g1out", donors, &res, &e) == 0);
	t_reads_end(st);
	CHECK(same_file("g1out/pages.img", "img1/pages.img"));
	CHECK(same_file("g1out/checkpoint.img", "img1/checkpoint.img"));
	/* 8 MiB of random pages: over a hundred chunks, in ranges of up to 4 MiB. */
	CHECK(t_range_reads > 0 && t_range_reads <= 8);
	CHECK(res.local_bytes == (int64_t)CKPT_LEN); /* the checkpoint file was left as it was */
	free(res.manifest);
}

/* Write manifest @json of @id and a sparse pack @pack of @len bytes, as any writer of the bucket
 * can. */
static void hostile_put(const char *id, const char *json, const char *pack, off_t len)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/store/manifests/%s.json", t_base, id);
	CHECK(write_file_durable(p, json, strlen(json)) == 0);
	snprintf(p, sizeof(p), "%s/store/packs/%s", t_base, pack);
	*strrchr(p, '/') = '\0';
	CHECK(mkdir_p(p, 0700) == 0);
	snprintf(p, sizeof(p), "%s/store/packs/%s.pack", t_base, pack);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && ftruncate(fd, len) == 0);
	if (fd >= 0)
		close(fd);
}

/* The crafted stored length of issue 9: the most parse_chunk() accepted for any chunk. */
#define CRAFTED_ZLEN 4228096
#define CRAFTED_RUN 4

/*
 * Issue 9, item 1: a manifest whose chunks repeat the hash of a chunk a
 * local image holds, with length 1 and a stored length of 4 MiB at
 * consecutive offsets of a large pack. The donor's copy is read at length
 * 1 and fails, so the run was read back from the store, 16 MiB into a
 * buffer of 8: the get must fail with EIO naming the snapshot and the chunk.
 */
static void test_crafted_manifest(struct store *st)
{
	struct store_get_result res;
	struct manifest m;
	struct err e = {0};
	char *json = NULL, hex[SHA256_HEX_LEN + 1];
	CHECK(get_from(st, "snap-1", "h1", NULL, &res, &e) == 0);
	free(res.manifest);
	keep_manifest(st, "snap-1", "h1");
	CHECK(store_get_manifest(st, "snap-1", &json, &e) == 0);
	CHECK(manifest_parse(json, "snap-1", &m, &e) == 0);
	free(json);
	const struct manifest_chunk *c = &m.files[1].chunks[0]; /* pages.img, a donor holds it */
	CHECK(!strcmp(m.files[1].name, "pages.img") && c->pack != MANIFEST_ZERO);
	sha256_to_hex(c->sha256, hex);
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb,
		    "{\"format\": 2, \"size_bytes\": %lld, \"packs\": [\"%s\", \"evil/0000\"], "
		    "\"files\": [{\"name\": \"pages.img\", \"size\": %lld, \"chunks\": "
		    "[[\"%s\", %lld, 0, %lld, %lld]",
		    (long long)c->len + CRAFTED_RUN, m.packs[c->pack],
		    (long long)c->len + CRAFTED_RUN, hex, (long long)c->len, (long long)c->off,
		    (long long)c->zlen);
	for (int k = 0; k < CRAFTED_RUN; k++)
		strbuf_addf(&sb, ", [\"%s\", 1, 1, %d, %d]", hex, k * CRAFTED_ZLEN, CRAFTED_ZLEN);
	strbuf_adds(&sb, "]}]}");
	CHECK(strbuf_error(&sb) == 0);
	hostile_put("evil", strbuf_str(&sb), "evil/0000", (off_t)CRAFTED_RUN * CRAFTED_ZLEN);
	strbuf_release(&sb);
	manifest_free(&m);

	const char *donors[] = {"h1", NULL};
	CHECK(get_from(st, "evil", "evil-out", donors, &res, &e) == -EIO);
	CHECK(strstr(e.msg, "snapshot evil: ") == e.msg);
	CHECK(strstr(e.msg, "chunk 1 (") && strstr(e.msg, hex) && strstr(e.msg, "of pages.img"));
	CHECK(!t_exists("evil-out"));
	CHECK(res.manifest == NULL);
	/* The store and the donor serve on. */
	CHECK(get_from(st, "snap-1", "after-evil", donors, &res, &e) == 0);
	CHECK(same_file("after-evil/pages.img", "src1/pages.img"));
	free(res.manifest);
}

/* sha256("x"): a chunk of one byte. */
#define X_SHA "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
#define TINY_RUN 140000

/*
 * Each stored length within zstd's bound (64 bytes for 1 plain byte), but
 * 140,000 chunks of one byte that a donor holds and that fail there: 4 MiB
 * of plain bytes is 9 MB of stored ones, more than the read buffer holds.
 * A local job's stored bytes are bounded as a fetched job's are.
 */
static void test_crafted_tiny_chunks(struct store *st)
{
	struct store_get_result res;
	struct err e = {0};
	char p[PATH_MAX];
	t_path(p, "tiny");
	CHECK(mkdir_p(p, 0755) == 0);
	t_write("tiny/pages.img", "y", 1); /* not what its manifest says: the copy fails */
	const char *donor_manifest =
	    "{\"format\": 2, \"size_bytes\": 1, \"packs\": [\"tiny/0000\"], \"files\": "
	    "[{\"name\": \"pages.img\", \"size\": 1, \"chunks\": [[\"" X_SHA "\", 1, 0, 0, 1]]}]}";
	t_write("tiny/" MANIFEST_FILE, donor_manifest, strlen(donor_manifest));
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb,
		    "{\"format\": 2, \"size_bytes\": %d, \"packs\": [\"evil2/0000\"], "
		    "\"files\": [{\"name\": \"pages.img\", \"size\": %d, \"chunks\": [",
		    TINY_RUN, TINY_RUN);
	for (int k = 0; k < TINY_RUN; k++)
		strbuf_addf(&sb, "%s[\"" X_SHA "\", 1, 0, %d, 64]", k ? ", " : "", k * 64);
	strbuf_adds(&sb, "]}]}");
	CHECK(strbuf_error(&sb) == 0);
	hostile_put("evil2", strbuf_str(&sb), "evil2/0000", (off_t)TINY_RUN * 64);
	strbuf_release(&sb);
	const char *donors[] = {"tiny", NULL};
	CHECK(get_from(st, "evil2", "evil2-out", donors, &res, &e) == -EIO);
	CHECK(strstr(e.msg, "snapshot evil2: chunk " X_SHA " of pages.img (at byte 0) is corrupt"));
	CHECK(!t_exists("evil2-out"));
}

/*
 * The store's copy is bad and the donor's too: the get fails naming the
 * chunk and removes what it wrote. A good donor copy of a chunk whose
 * stored copy is bad is used (it verifies).
 */
static void test_bad_store(struct store *st)
{
	struct store_get_result res;
	struct manifest m;
	struct err e = {0};
	char *json = NULL, hex[SHA256_HEX_LEN + 1], p[PATH_MAX];
	CHECK(store_get_manifest(st, "snap-1", &json, &e) == 0);
	CHECK(manifest_parse(json, "snap-1", &m, &e) == 0);
	free(json);
	const struct manifest_chunk *c = &m.files[1].chunks[0]; /* pages.img, sorted second */
	CHECK(!strcmp(m.files[1].name, "pages.img") && c->pack != MANIFEST_ZERO);
	sha256_to_hex(c->sha256, hex);
	snprintf(p, sizeof(p), "store/packs/%s.pack", m.packs[c->pack]);
	flip(p, c->off + c->zlen / 2);
	const char *donors[] = {"img1", NULL};
	CHECK(get_from(st, "snap-1", "good-donor", donors, &res, &e) == 0);
	CHECK(same_file("good-donor/pages.img", "src1/pages.img"));
	free(res.manifest);
	flip("img1/pages.img", 200); /* now the donor's copy is bad too */
	CHECK(get_from(st, "snap-1", "bad-both", donors, &res, &e) == -EIO);
	CHECK(strstr(e.msg, "snapshot snap-1: chunk ") && strstr(e.msg, hex) &&
	      strstr(e.msg, "of pages.img (at byte 0) is corrupt"));
	CHECK(!t_exists("bad-both"));
	CHECK(res.manifest == NULL);
	manifest_free(&m);
}

int main(void)
{
	if (!t_store_begin("test_store_donor"))
		return 1;
	pages = malloc(PAGES_LEN);
	ckpt = malloc(CKPT_LEN);
	t_random(pages, RANDOM_PAGES * PAGE);
	memset(pages + RANDOM_PAGES * PAGE, 0, ZERO_PAGES * PAGE);
	for (size_t i = 0; i < CKPT_LEN; i++)
		ckpt[i] = (unsigned char)"kernel state, compressible "[i % 27] + (i / 7919 % 5);
	write_image("src1");

	struct store *st = t_store_open("store");
	CHECK(st && t_store_put(st, "snap-1", "src1", NULL) == 0);
	if (st) {
		test_no_donors(st);
		test_shared_chunks(st);
		test_torn_donor(st);
		test_garbled_donor(st);
		test_crafted_manifest(st);
		test_crafted_tiny_chunks(st);
		test_bad_store(st);
		store_close(st);
	}
	free(pages);
	free(ckpt);
	rm_rf(t_base);
	return t_done();
}
