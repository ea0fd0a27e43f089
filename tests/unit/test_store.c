#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/store/chunker.h"
#include "backend/store/manifest.h"
#include "backend/store/store.h"
#include "lib/util.h"
#include "tests/unit/t.h"
#include "tests/unit/t_threads.h"
#include "tests/unit/t_dir.h"
#include "tests/unit/t_store.h"

#define PAGE 4096u
/* pages.img: random pages, a zero region, text pages, the same random page again and again. */
#define RANDOM_PAGES 512u
#define ZERO_PAGES 300u
#define TEXT_PAGES 256u
#define REPEAT_PAGES 64u
#define PAGES_LEN ((RANDOM_PAGES + ZERO_PAGES + TEXT_PAGES + REPEAT_PAGES) * PAGE)
#define CKPT_LEN ((300u << 10) + 77)

struct file {
	const char *name;
	unsigned char *data;
	size_t len;
};

static struct file files[3];

static void make_pages(unsigned char *p)
{
	t_random(p, RANDOM_PAGES * PAGE);
	p += RANDOM_PAGES * PAGE;
	memset(p, 0, ZERO_PAGES * PAGE);
	p += ZERO_PAGES * PAGE;
	for (size_t i = 0; i < TEXT_PAGES * PAGE; i++)
		p[i] = (unsigned char)"checkpoint text, compressible "[i % 30] + (i / 9973 % 3);
	p += TEXT_PAGES * PAGE;
	for (size_t i = 0; i < REPEAT_PAGES; i++)
		memcpy(p + i * PAGE, p - (TEXT_PAGES + ZERO_PAGES + 7) * PAGE, PAGE);
}

/* Write the files into directory @rel. */
static void write_source(const char *rel)
{
	char p[PATH_MAX];
	t_path(p, rel);
	CHECK(mkdir_p(p, 0755) == 0);
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		snprintf(p, sizeof(p), "%s/%s/%s", t_base, rel, files[i].name);
		CHECK(write_file_durable(p, files[i].data, files[i].len) == 0);
	}
}

static void make_source(void)
{
	files[0] = (struct file){"pages.img", malloc(PAGES_LEN), PAGES_LEN};
	make_pages(files[0].data);
	files[1] = (struct file){"checkpoint.img", malloc(CKPT_LEN), CKPT_LEN};
	for (size_t i = 0; i < CKPT_LEN; i++)
		files[1].data[i] = (unsigned char)(i % 251 < 200 ? 'a' + i % 7 : i * 31);
	files[2] = (struct file){"empty_file", (unsigned char *)strdup(""), 0};
	write_source("src");
	char p[PATH_MAX];
	t_path(p, "src/subdir");
	CHECK(mkdir_p(p, 0755) == 0); /* not a regular file: not stored */
}

/* Every source file is in directory @rel with the same bytes, and nothing else is. */
static void check_copy(const char *rel)
{
	CHECK(t_entries(rel) == (int)ARRAY_SIZE(files));
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		char p[PATH_MAX];
		char *got = NULL;
		size_t len = 0;
		snprintf(p, sizeof(p), "%s/%s/%s", t_base, rel, files[i].name);
		CHECK(read_file(p, &got, &len, PAGES_LEN) == 0);
		CHECK(got && len == files[i].len && !memcmp(got, files[i].data, len));
		free(got);
	}
}

struct progress_log {
	int calls;
	int64_t last_done, last_total;
	bool monotonic;
	struct store *st; /* set: delete @victim from inside the put */
	const char *victim;
	int deleted;
};

static void on_progress(void *arg, int64_t done, int64_t total)
{
	struct progress_log *p = arg;
	if (done < p->last_done)
		p->monotonic = false;
	p->calls++;
	p->last_done = done;
	p->last_total = total;
	if (p->st && p->victim && done > 0 && !p->deleted) {
		struct err e = {0};
		CHECK(store_delete_snapshot(p->st, p->victim, &e) == 0);
		p->deleted = 1;
	}
}

static cJSON *meta_for(const char *id)
{
	cJSON *meta = cJSON_CreateObject();
	cJSON_AddStringToObject(meta, "id", id);
	cJSON_AddStringToObject(meta, "sandbox_id", "sbx-0123456789abcdef");
	cJSON_AddNumberToObject(meta, "format", 99); /* replaced by the store */
	return meta;
}

static int put_dir(struct store *st, const char *id, const char *rel, struct store_put_result *res,
		   struct err *e)
{
	char src[PATH_MAX];
	t_path(src, rel);
	cJSON *meta = meta_for(id);
	int rc = store_put_snapshot(st, id, src, meta, NULL, NULL, res, e);
	cJSON_Delete(meta);
	return rc;
}

static int put(struct store *st, const char *id, struct err *e)
{
	return put_dir(st, id, "src", NULL, e);
}

static bool parse(struct store *st, const char *id, struct manifest *m)
{
	char *json = NULL;
	struct err e = {0};
	bool ok =
	    store_get_manifest(st, id, &json, &e) == 0 && manifest_parse(json, id, m, &e) == 0;
	free(json);
	return ok;
}

static void test_open(void)
{
	struct store *st = NULL;
	struct err e = {0};
	char want[PATH_MAX + 16];
	CHECK(store_open(NULL, t_base, &st, &e) == 0);
	snprintf(want, sizeof(want), "file://%s/store", t_base);
	CHECK_STR(st ? store_url(st) : NULL, want);
	store_close(st);
	/* s3:// goes to objstore_s3_open(), which wants credentials in the environment. */
	unsetenv("AWS_ACCESS_KEY_ID");
	CHECK(store_open("s3://bucket/prefix", t_base, &st, &e) == -EINVAL);
	CHECK(strstr(e.msg, "AWS_ACCESS_KEY_ID") != NULL);
	CHECK(store_open("http://user:secret@host/x", t_base, &st, &e) == -EINVAL);
	CHECK(strstr(e.msg, "secret") == NULL);
	CHECK(store_open("file://relative", t_base, &st, &e) == -EINVAL);
	rm_rf(want + strlen("file://"));
}

static void test_put_get(struct store *st)
{
	struct err e = {0};
	char src[PATH_MAX], out[PATH_MAX];
	t_path(src, "src");
	t_path(out, "out");
	cJSON *meta = meta_for("snap-1");
	struct progress_log pl = {.monotonic = true};
	struct store_put_result res = {0};
	CHECK(store_put_snapshot(st, "snap-1", src, meta, on_progress, &pl, &res, &e) == 0);
	int64_t total = (int64_t)(PAGES_LEN + CKPT_LEN);
	CHECK(pl.calls >= 3 && pl.monotonic);
	CHECK(pl.last_done == total && pl.last_total == total);
	CHECK(res.size_bytes == total);
	/* Zero pages cost nothing, text compresses, repeated pages are stored once. */
	CHECK(res.stored_bytes > (int64_t)(RANDOM_PAGES * PAGE));
	CHECK(res.stored_bytes < (int64_t)((RANDOM_PAGES + TEXT_PAGES / 2) * PAGE + CKPT_LEN / 2));
	CHECK(!strcmp(cJSON_GetObjectItem(meta, "id")->valuestring, "snap-1")); /* not consumed */
	cJSON_Delete(meta);
	CHECK(t_exists("store/packs/snap-1/0000.pack") && t_exists("store/packs/snap-1/0000.idx"));

	CHECK(put(st, "snap-1", &e) == -EEXIST);
	CHECK(store_get_snapshot(st, "snap-1", out, &e) == 0);
	check_copy("out");
	/* The zero region is a hole. */
	struct stat sb;
	char p[PATH_MAX];
	t_path(p, "out/pages.img");
	CHECK(stat(p, &sb) == 0 && sb.st_blocks * 512 < (blkcnt_t)PAGES_LEN);
	CHECK(store_get_snapshot(st, "snap-nope", out, &e) == -ENOENT);
	rm_rf(out);
}

static void test_manifest(struct store *st)
{
	char *json = NULL;
	struct err e = {0};
	CHECK(store_get_manifest(st, "snap-1", &json, &e) == 0);
	cJSON *j = cJSON_Parse(json);
	CHECK(cJSON_GetObjectItem(j, "format")->valueint == 2);
	CHECK_STR(cJSON_GetObjectItem(j, "sandbox_id")->valuestring, "sbx-0123456789abcdef");
	cJSON_Delete(j);
	free(json);
	struct manifest m;
	CHECK(parse(st, "snap-1", &m));
	CHECK(m.nfiles == ARRAY_SIZE(files) && m.size_bytes == (int64_t)(PAGES_LEN + CKPT_LEN));
	CHECK(m.npacks == 1 && !strcmp(m.packs[0], "snap-1/0000"));
	size_t zero_runs = 0, plain = 0;
	for (size_t i = 0; i < m.nfiles; i++) {
		for (size_t j2 = 0; j2 < m.files[i].nchunks; j2++) {
			const struct manifest_chunk *c = &m.files[i].chunks[j2];
			zero_runs += c->pack == MANIFEST_ZERO;
			plain += c->pack != MANIFEST_ZERO && c->zlen == c->len;
		}
	}
	CHECK(zero_runs >= 1); /* the zero region, merged */
	CHECK(plain >= 1);     /* random pages: stored plain */
	manifest_free(&m);
	CHECK(store_get_manifest(st, "snap-nope", &json, &e) == -ENOENT);
	CHECK(store_get_manifest(st, "../etc/passwd", &json, &e) == -EINVAL);
}

/*
 * A second snapshot that differs in one byte costs the chunks around it: the
 * one that holds it, and the next when the change moves a cut point (the
 * chunker's window reaches past it). The data is random, so either happens.
 */
static void test_dedup(struct store *st)
{
	struct err e = {0};
	struct store_put_result r2 = {0}, r3 = {0};
	files[0].data[100 * PAGE + 5] ^= 0xff;
	write_source("src2");
	CHECK(put_dir(st, "snap-2", "src2", &r2, &e) == 0);
	CHECK(r2.size_bytes == (int64_t)(PAGES_LEN + CKPT_LEN));
	CHECK(r2.stored_bytes < (int64_t)(2 * CHUNK_MAX + (64u << 10)));
	CHECK(put_dir(st, "snap-3", "src2", &r3, &e) == 0);
	CHECK(r3.stored_bytes < (64 << 10)); /* the manifest only */
	CHECK(!t_exists("store/packs/snap-3"));
	struct manifest m;
	CHECK(parse(st, "snap-3", &m));
	CHECK(m.npacks == 2); /* snap-1's pack and snap-2's */
	manifest_free(&m);
	char out[PATH_MAX];
	t_path(out, "out3");
	CHECK(store_get_snapshot(st, "snap-3", out, &e) == 0);
	check_copy("out3");
	rm_rf(out);
	files[0].data[100 * PAGE + 5] ^= 0xff; /* the source again */
	struct store_stats s;
	store_stats(st, &s);
	CHECK(s.snapshots == 3 && s.packs == 2 && s.puts_in_flight == 0);
	CHECK(s.logical_bytes == 3 * r2.size_bytes && s.chunks > 0);
	CHECK(s.stored_bytes < s.logical_bytes / 3);
}

/* Flip a byte of the first chunk stored in pack @pack; returns its hex. */
static void corrupt_first_chunk(struct store *st, const char *id, const char *pack, char hex[65])
{
	struct manifest m;
	CHECK(parse(st, id, &m));
	const struct manifest_chunk *c = NULL;
	for (size_t i = 0; !c && i < m.nfiles; i++) {
		for (size_t j = 0; !c && j < m.files[i].nchunks; j++) {
			const struct manifest_chunk *x = &m.files[i].chunks[j];
			if (x->pack != MANIFEST_ZERO && !strcmp(m.packs[x->pack], pack))
				c = x;
		}
	}
	CHECK(c != NULL);
	if (!c) {
		manifest_free(&m);
		return;
	}
	sha256_to_hex(c->sha256, hex);
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/store/packs/%s.pack", t_base, pack);
	int fd = open(p, O_RDWR);
	unsigned char b = 0;
	CHECK(fd >= 0 && pread(fd, &b, 1, c->off + c->zlen / 2) == 1);
	b ^= 0x40;
	CHECK(pwrite(fd, &b, 1, c->off + c->zlen / 2) == 1);
	close(fd);
	manifest_free(&m);
}

static void test_corrupt(struct store *st)
{
	struct err e = {0};
	char out[PATH_MAX], existing[PATH_MAX], hex[65] = "";
	t_path(out, "bad");
	t_path(existing, "existing");
	/* snap-2's own pack holds the changed chunk: snap-2 and snap-3 use it, snap-1 does not. */
	CHECK(store_verify_snapshot(st, "snap-2", &e) == 0);
	corrupt_first_chunk(st, "snap-2", "snap-2/0000", hex);
	CHECK(store_verify_snapshot(st, "snap-2", &e) == -EIO && strstr(e.msg, hex));
	CHECK(store_verify_snapshot(st, "snap-1", &e) == 0);
	CHECK(store_get_snapshot(st, "snap-2", out, &e) == -EIO);
	CHECK(strstr(e.msg, "snapshot snap-2: chunk ") && strstr(e.msg, hex) &&
	      strstr(e.msg, "of pages.img") && strstr(e.msg, "is corrupt"));
	CHECK(!t_exists("bad")); /* made by the get, so removed with what it wrote */
	CHECK(mkdir(existing, 0755) == 0);
	CHECK(store_get_snapshot(st, "snap-3", existing, &e) == -EIO);
	CHECK(strstr(e.msg, "snapshot snap-3: chunk ") && strstr(e.msg, hex));
	CHECK(t_entries("existing") == 0);
	CHECK(store_get_snapshot(st, "snap-1", out, &e) == 0);
	rm_rf(out);

	/* A missing pack. */
	char p[PATH_MAX];
	t_path(p, "store/packs/snap-2/0000.pack");
	char *saved = NULL;
	size_t len = 0;
	CHECK(read_file(p, &saved, &len, 1u << 30) == 0);
	CHECK(unlink(p) == 0);
	CHECK(store_get_snapshot(st, "snap-2", existing, &e) == -EIO);
	CHECK(strstr(e.msg, "is missing from the store (pack snap-2/0000)") != NULL);
	CHECK(t_entries("existing") == 0);
	rmdir(existing);
	CHECK(write_file_durable(p, saved, len) == 0);
	free(saved);
}

/* The identity is made once, on request, and then read back the same. */
static void test_identity(struct store *st)
{
	struct err e = {0};
	char id[STORE_ID_MAX], again[STORE_ID_MAX];
	CHECK(store_identity(st, false, id, &e) == -ENOENT);
	CHECK(store_identity(st, true, id, &e) == 0);
	CHECK(strncmp(id, "store-", 6) == 0 && strlen(id) == 38);
	CHECK(store_identity(st, false, again, &e) == 0 && strcmp(id, again) == 0);
	CHECK(store_identity(st, true, again, &e) == 0 && strcmp(id, again) == 0);
	t_write("store/snapfs-store.json", "{\"store_id\": \"x\"}", 17);
	CHECK(store_identity(st, false, again, &e) == -EIO);
}

static void test_delete(struct store *st)
{
	struct err e = {0};
	char *json = NULL;
	CHECK(store_tombstone_get(st, "snap-1", &e) == 0);
	CHECK(store_delete_snapshot(st, "snap-1", &e) == 0);
	CHECK(store_get_manifest(st, "snap-1", &json, &e) == -ENOENT);
	CHECK(!t_exists("store/manifests/snap-1.json"));
	/* The delete left a tombstone, so a host that took snap-1 may forget its row. */
	CHECK(store_tombstone_get(st, "snap-1", &e) == 1);
	CHECK(store_tombstone_get(st, "snap-9", &e) == 0);
	CHECK(store_tombstone_get(st, "bad/id", &e) == -EINVAL);
	CHECK(t_exists("store/packs/snap-1/0000.pack")); /* snap-2 and snap-3 use it */
	CHECK(store_delete_snapshot(st, "snap-1", &e) == 0);
	CHECK(store_delete_snapshot(st, "bad/id", &e) == -EINVAL);
	CHECK(store_delete_snapshot(st, "snap-2", &e) == 0);
	CHECK(t_exists("store/packs/snap-2/0000.pack")); /* snap-3 uses it */
	CHECK(store_delete_snapshot(st, "snap-3", &e) == 0);
	CHECK(t_entries("store/packs") <= 0);
	CHECK(t_entries("store/manifests") <= 0);
	struct store_stats s;
	store_stats(st, &s);
	CHECK(s.snapshots == 0 && s.packs == 0 && s.chunks == 0 && s.stored_bytes == 0);
}

/* A delete while a put uses the deleted snapshot's chunks: they stay until the put ends. */
static void test_delete_during_put(struct store *st)
{
	struct err e = {0};
	char src[PATH_MAX], out[PATH_MAX];
	CHECK(put(st, "snap-a", &e) == 0);
	t_path(src, "src");
	t_path(out, "outb");
	cJSON *meta = meta_for("snap-b");
	struct progress_log pl = {.monotonic = true, .st = st, .victim = "snap-a"};
	struct store_put_result res = {0};
	CHECK(store_put_snapshot(st, "snap-b", src, meta, on_progress, &pl, &res, &e) == 0);
	cJSON_Delete(meta);
	CHECK(pl.deleted == 1);
	CHECK(!t_exists("store/manifests/snap-a.json"));
	CHECK(t_exists("store/packs/snap-a/0000.pack")); /* snap-b uses it */
	CHECK(res.stored_bytes < (64 << 10));
	CHECK(store_get_snapshot(st, "snap-b", out, &e) == 0);
	check_copy("outb");
	rm_rf(out);
	CHECK(store_delete_snapshot(st, "snap-b", &e) == 0);
	CHECK(t_entries("store/packs") <= 0);
}

/* What a crash mid-put leaves: packs, temp files, no manifest. */
static void test_crash_and_collect(struct store *st)
{
	struct err e = {0};
	char p[PATH_MAX];
	CHECK(put(st, "snap-live", &e) == 0);
	t_path(p, "store/packs/snap-crash");
	CHECK(mkdir_p(p, 0755) == 0);
	t_write("store/packs/snap-crash/0000.pack", "partial", 7);
	t_write("store/packs/snap-crash/0000.idx", "x", 1);
	t_write("store/packs/snap-crash/0001.pack.tmp.0123abcd", "x", 1);
	t_write("store/manifests/snap-crash.json.tmp.0123abcd", "{}", 2);

	/* Temp files are recent: a put may be writing them. Packs no manifest lists go. */
	CHECK(store_collect(st, 0, &e) == 2);
	CHECK(!t_exists("store/packs/snap-crash/0000.pack"));
	CHECK(t_exists("store/packs/snap-crash/0001.pack.tmp.0123abcd"));
	CHECK(t_exists("store/packs/snap-live/0000.pack"));
	/* At start-up nothing is being written: every temp file goes. */
	CHECK(store_collect(st, STORE_COLLECT_AT_START, &e) == 2);
	CHECK(!t_exists("store/packs/snap-crash"));
	CHECK(!t_exists("store/manifests/snap-crash.json.tmp.0123abcd"));
	CHECK(store_collect(st, STORE_COLLECT_AT_START, &e) == 0);
	CHECK(t_exists("store/packs/snap-live/0000.pack"));
}

/* Reopened, the store knows its chunks again: the same data costs only a manifest. */
static void test_reopen(struct store **st)
{
	struct err e = {0};
	struct store_stats before, after;
	store_stats(*st, &before);
	store_close(*st);
	*st = t_store_open("store");
	if (!*st)
		return;
	store_stats(*st, &after);
	CHECK(after.snapshots == before.snapshots && after.packs == before.packs);
	CHECK(after.chunks == before.chunks && after.stored_bytes == before.stored_bytes);
	struct store_put_result res = {0};
	CHECK(put_dir(*st, "snap-again", "src", &res, &e) == 0);
	CHECK(res.stored_bytes < (64 << 10));
	CHECK(store_delete_snapshot(*st, "snap-live", &e) == 0);
	CHECK(t_exists("store/packs/snap-live/0000.pack"));
	CHECK(store_delete_snapshot(*st, "snap-again", &e) == 0);
	CHECK(t_entries("store/packs") <= 0);
}

/* Enough random data for two packs: ~100 objects a GiB, not one a chunk. */
static void test_packs(struct store *st)
{
	struct err e = {0};
	size_t len = 40u << 20;
	unsigned char *big = malloc(len);
	t_random(big, len);
	char dir[PATH_MAX];
	t_path(dir, "bigsrc");
	CHECK(mkdir(dir, 0755) == 0);
	t_write("bigsrc/pages.img", big, len);
	struct store_put_result res = {0};
	CHECK(put_dir(st, "snap-big", "bigsrc", &res, &e) == 0);
	CHECK(t_entries("store/packs/snap-big") == 4); /* 2 packs, 2 indexes */
	char out[PATH_MAX], p[PATH_MAX];
	t_path(out, "bigout");
	CHECK(store_get_snapshot(st, "snap-big", out, &e) == 0);
	char *got = NULL;
	size_t got_len = 0;
	t_path(p, "bigout/pages.img");
	CHECK(read_file(p, &got, &got_len, len) == 0);
	CHECK(got && got_len == len && !memcmp(got, big, len));
	free(got);
	free(big);
	rm_rf(out);
	CHECK(store_delete_snapshot(st, "snap-big", &e) == 0);
}

#define THREADS 4
#define ROUNDS 10

/* Each thread puts, gets and deletes its own snapshots of the same data, sharing chunks. */
static int work(void *obj, int index)
{
	struct store *st = obj;
	struct err e = {0};
	char src[PATH_MAX], out[PATH_MAX], id[32];
	int failures = 0;
	t_path(src, "small");
	snprintf(out, sizeof(out), "%s/tout%d", t_base, index);
	cJSON *meta = cJSON_CreateObject();
	for (int j = 0; j < ROUNDS; j++) {
		snprintf(id, sizeof(id), "snap-t%d-%d", index, j);
		if (store_put_snapshot(st, id, src, meta, NULL, NULL, NULL, &e) < 0 ||
		    store_get_snapshot(st, id, out, &e) < 0 ||
		    store_delete_snapshot(st, id, &e) < 0 || rm_rf(out) < 0) {
			fprintf(stderr, "thread %d: %s\n", index, e.msg);
			failures++;
		}
	}
	cJSON_Delete(meta);
	return failures;
}

static void test_threads(void)
{
	char src[PATH_MAX];
	t_path(src, "small");
	CHECK(mkdir(src, 0755) == 0);
	t_write("small/a.img", "aaaa", 4);
	t_write("small/pages.img", files[0].data, 64 * PAGE);
	struct store *st = t_store_open("tstore");
	t_threads(THREADS, work, st);
	/* Every delete pruned its directories and left its tombstone (store_ident.c), nothing else.
	 */
	CHECK(t_entries("tstore") == 1);
	CHECK(t_entries("tstore/tombstones") == THREADS * ROUNDS);
	store_close(st);
}

/* A put that runs out of room fails with ENOSPC and takes back what it wrote. */
static void test_enospc(void)
{
	char dir[PATH_MAX], src[PATH_MAX], url[PATH_MAX + 8];
	t_path(src, "src");
	if (!t_small_fs("small-fs", dir))
		return;
	struct store *st = NULL;
	struct err e = {0};
	snprintf(url, sizeof(url), "file://%s", dir);
	CHECK(store_open(url, NULL, &st, &e) == 0);
	cJSON *meta = cJSON_CreateObject();
	CHECK(store_put_snapshot(st, "snap-full", src, meta, NULL, NULL, NULL, &e) == -ENOSPC);
	CHECK(strstr(e.msg, "No space left") != NULL);
	CHECK(t_entries("small-fs") == 0);
	cJSON_Delete(meta);
	store_close(st);
	umount(dir);
}

int main(void)
{
	if (!t_store_begin("test_store"))
		return 1;
	make_source();
	test_open();

	struct store *st = t_store_open("store");
	if (st) {
		test_put_get(st);
		test_manifest(st);
		test_dedup(st);
		test_corrupt(st);
		test_identity(st);
		test_delete(st);
		test_delete_during_put(st);
		test_crash_and_collect(st);
		test_reopen(&st);
		test_packs(st);
		store_close(st);
	}
	test_threads();
	test_enospc();
	for (size_t i = 0; i < ARRAY_SIZE(files); i++)
		free(files[i].data);
	rm_rf(t_base);
	return t_done();
}
