#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/store.h"
#include "lib/util.h"
#include "tests/unit/t.h"

#define BIG_LEN ((5u << 20) + 123)

static char base[64];

struct file {
	const char *name;
	char *data;
	size_t len;
};

static struct file files[3];

static void path_in(char *out, const char *rel)
{
	snprintf(out, PATH_MAX, "%s/%s", base, rel);
}

static bool exists(const char *rel)
{
	char p[PATH_MAX];
	struct stat st;
	path_in(p, rel);
	return stat(p, &st) == 0;
}

/* Entries in @rel other than "." and "..", or -1 if it cannot be read. */
static int count_entries(const char *rel)
{
	char p[PATH_MAX];
	path_in(p, rel);
	DIR *d = opendir(p);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

static void write_rel(const char *rel, const void *data, size_t len)
{
	char p[PATH_MAX];
	path_in(p, rel);
	CHECK(write_file_durable(p, data, len) == 0);
}

static void make_source(void)
{
	static const char text[] = "checkpoint header\n";
	files[0] = (struct file){"pages.img", malloc(BIG_LEN), BIG_LEN};
	for (size_t off = 0; off < BIG_LEN;)
		off += (size_t)getrandom(files[0].data + off, BIG_LEN - off, 0);
	files[1] = (struct file){"checkpoint.img", strdup(text), strlen(text)};
	files[2] = (struct file){"empty_file", strdup(""), 0};
	char p[PATH_MAX];
	path_in(p, "src/subdir");
	CHECK(mkdir_p(p, 0755) == 0); /* not a regular file: not stored */
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		snprintf(p, sizeof(p), "%s/src/%s", base, files[i].name);
		CHECK(write_file_durable(p, files[i].data, files[i].len) == 0);
	}
}

static void sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
	for (unsigned int i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* Every source file is in directory @rel with the same bytes, and nothing else is. */
static void check_copy(const char *rel)
{
	CHECK(count_entries(rel) == (int)ARRAY_SIZE(files));
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		char p[PATH_MAX];
		char *got = NULL;
		size_t len = 0;
		snprintf(p, sizeof(p), "%s/%s/%s", base, rel, files[i].name);
		CHECK(read_file(p, &got, &len, BIG_LEN) == 0);
		CHECK(got && len == files[i].len && !memcmp(got, files[i].data, len));
		free(got);
	}
}

struct progress_log {
	int calls;
	int64_t last_done, last_total;
	bool monotonic;
};

static void on_progress(void *arg, int64_t done, int64_t total)
{
	struct progress_log *p = arg;
	if (done < p->last_done)
		p->monotonic = false;
	p->calls++;
	p->last_done = done;
	p->last_total = total;
}

static cJSON *meta_for(const char *id)
{
	cJSON *meta = cJSON_CreateObject();
	cJSON_AddStringToObject(meta, "id", id);
	cJSON_AddStringToObject(meta, "sandbox_id", "sbx-0123456789abcdef");
	cJSON_AddNumberToObject(meta, "format", 99); /* replaced by the store */
	return meta;
}

static int put(struct store *st, const char *id, struct err *e)
{
	char src[PATH_MAX];
	path_in(src, "src");
	cJSON *meta = meta_for(id);
	int rc = store_put_snapshot(st, id, src, meta, NULL, NULL, NULL, e);
	cJSON_Delete(meta);
	return rc;
}

static void test_open(void)
{
	struct store *st = NULL;
	struct err e = {0};
	char want[PATH_MAX + 16];
	CHECK(store_open(NULL, base, &st, &e) == 0);
	snprintf(want, sizeof(want), "file://%s/store", base);
	CHECK_STR(st ? store_url(st) : NULL, want);
	store_close(st);
	/* s3:// goes to objstore_s3_open(), which wants credentials in the environment. */
	unsetenv("AWS_ACCESS_KEY_ID");
	CHECK(store_open("s3://bucket/prefix", base, &st, &e) == -EINVAL);
	CHECK(strstr(e.msg, "AWS_ACCESS_KEY_ID") != NULL);
	CHECK(store_open("http://user:secret@host/x", base, &st, &e) == -EINVAL);
	CHECK(strstr(e.msg, "secret") == NULL);
	CHECK(store_open("file://relative", base, &st, &e) == -EINVAL);
}

static void test_put_get(struct store *st)
{
	struct err e = {0};
	char src[PATH_MAX], out[PATH_MAX];
	path_in(src, "src");
	path_in(out, "out");
	cJSON *meta = meta_for("snap-1");
	struct progress_log pl = {.monotonic = true};
	struct store_put_result res = {0};
	CHECK(store_put_snapshot(st, "snap-1", src, meta, on_progress, &pl, &res, &e) == 0);
	int64_t total = (int64_t)(BIG_LEN + files[1].len);
	CHECK(pl.calls >= 7 && pl.monotonic); /* a start, one per MiB, an end */
	CHECK(pl.last_done == total && pl.last_total == total);
	CHECK(res.size_bytes == total && res.stored_bytes > total);
	CHECK(!strcmp(cJSON_GetObjectItem(meta, "id")->valuestring, "snap-1")); /* not consumed */
	cJSON_Delete(meta);

	CHECK(put(st, "snap-1", &e) == -EEXIST);
	CHECK(store_get_snapshot(st, "snap-1", out, &e) == 0);
	check_copy("out");
	CHECK(store_get_snapshot(st, "snap-nope", out, &e) == -ENOENT);
}

static void test_manifest(struct store *st)
{
	struct err e = {0};
	char *json = NULL;
	CHECK(store_get_manifest(st, "snap-1", &json, &e) == 0);
	cJSON *m = cJSON_Parse(json);
	CHECK(cJSON_IsObject(m));
	CHECK(cJSON_GetObjectItem(m, "format")->valueint == 1);
	CHECK_STR(cJSON_GetObjectItem(m, "sandbox_id")->valuestring, "sbx-0123456789abcdef");
	CHECK(cJSON_GetObjectItem(m, "size_bytes")->valuedouble ==
	      (double)(BIG_LEN + files[1].len));
	const cJSON *arr = cJSON_GetObjectItem(m, "files");
	CHECK(cJSON_GetArraySize(arr) == (int)ARRAY_SIZE(files));
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		const cJSON *f;
		bool found = false;
		char want[65];
		sha256_hex(files[i].data, files[i].len, want);
		cJSON_ArrayForEach(f, arr)
		{
			if (strcmp(cJSON_GetObjectItem(f, "name")->valuestring, files[i].name))
				continue;
			found = true;
			CHECK(cJSON_GetObjectItem(f, "size")->valuedouble == (double)files[i].len);
			CHECK_STR(cJSON_GetObjectItem(f, "sha256")->valuestring, want);
		}
		CHECK(found);
	}
	cJSON_Delete(m);
	free(json);
	CHECK(store_get_manifest(st, "snap-nope", &json, &e) == -ENOENT);
	CHECK(store_get_manifest(st, "../etc/passwd", &json, &e) == -EINVAL);
}

struct ids {
	int n;
	char seen[8][64];
};

static int on_id(const char *id, void *arg)
{
	struct ids *ids = arg;
	if (ids->n < 8)
		snprintf(ids->seen[ids->n++], 64, "%s", id);
	return 0;
}

static bool listed(struct store *st, const char *id)
{
	struct ids ids = {0};
	struct err e = {0};
	CHECK(store_list_snapshots(st, on_id, &ids, &e) == 0);
	for (int i = 0; i < ids.n; i++) {
		if (!strcmp(ids.seen[i], id))
			return true;
	}
	return false;
}

static void test_list_and_ids(struct store *st)
{
	struct err e = {0};
	CHECK(put(st, "snap-2", &e) == 0);
	struct ids ids = {0};
	CHECK(store_list_snapshots(st, on_id, &ids, &e) == 0);
	CHECK(ids.n == 2 && listed(st, "snap-1") && listed(st, "snap-2"));
	static const char *const bad[] = {
	    "",
	    "Snap",
	    "-x",
	    "a/b",
	    "../x",
	    "a.tmp.b",
	    "0123456789012345678901234567890123456789012345678901234567890123"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		CHECK(put(st, bad[i], &e) == -EINVAL);
	CHECK(put(st, "012345678901234567890123456789012345678901234567890123456789012", &e) == 0);
}

/* Flip one byte in the middle of the stored pages.img of @id. */
static void corrupt(const char *id)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/store/data/%s/pages.img", base, id);
	int fd = open(p, O_RDWR);
	unsigned char c = 0;
	CHECK(fd >= 0 && pread(fd, &c, 1, 3 << 20) == 1);
	c ^= 0x40;
	CHECK(pwrite(fd, &c, 1, 3 << 20) == 1);
	close(fd);
}

static void test_corrupt(struct store *st)
{
	struct err e = {0};
	char out[PATH_MAX], existing[PATH_MAX];
	path_in(out, "bad");
	path_in(existing, "existing");
	corrupt("snap-1");
	CHECK(store_get_snapshot(st, "snap-1", out, &e) == -EIO);
	CHECK_STR(e.msg, "snapshot snap-1: file pages.img is corrupt (sha256 mismatch)");
	CHECK(!exists("bad")); /* made by the get, so removed with what it wrote */
	CHECK(mkdir(existing, 0755) == 0);
	CHECK(store_get_snapshot(st, "snap-1", existing, &e) == -EIO);
	CHECK(count_entries("existing") == 0);

	char p[PATH_MAX];
	path_in(p, "store/data/snap-2/pages.img");
	CHECK(unlink(p) == 0);
	CHECK(store_get_snapshot(st, "snap-2", existing, &e) == -EIO);
	CHECK_STR(e.msg, "snapshot snap-2: file pages.img is missing from the store");
	CHECK(count_entries("existing") == 0);
}

static void test_delete(struct store *st)
{
	struct err e = {0};
	char *json = NULL;
	CHECK(store_delete_snapshot(st, "snap-2", &e) == 0);
	CHECK(store_get_manifest(st, "snap-2", &json, &e) == -ENOENT);
	CHECK(!exists("store/manifests/snap-2.json"));
	CHECK(!exists("store/data/snap-2"));
	CHECK(!listed(st, "snap-2") && listed(st, "snap-1"));
	CHECK(store_delete_snapshot(st, "snap-2", &e) == 0);
	CHECK(store_delete_snapshot(st, "bad/id", &e) == -EINVAL);
}

/* What a crash mid-put leaves: data, maybe a temp file, and no manifest. */
static void test_crash_and_collect(struct store *st)
{
	struct err e = {0};
	char p[PATH_MAX];
	path_in(p, "store/data/snap-crash");
	CHECK(mkdir_p(p, 0755) == 0);
	write_rel("store/data/snap-crash/pages.img", "partial", 7);
	write_rel("store/data/snap-crash/checkpoint.img.tmp.0123abcd", "x", 1);
	write_rel("store/manifests/snap-crash.json.tmp.0123abcd", "{}", 2);
	path_in(p, "store/data/snap-busy");
	CHECK(mkdir_p(p, 0755) == 0);
	write_rel("store/data/snap-busy/a.img", "a", 1);
	write_rel("store/data/snap-busy/b.img", "b", 1);
	CHECK(!listed(st, "snap-crash") && !listed(st, "snap-busy"));

	const char *const keep[] = {"snap-busy"};
	CHECK(store_collect(st, keep, ARRAY_SIZE(keep), &e) == 1);
	CHECK(!exists("store/data/snap-crash/pages.img"));
	CHECK(exists("store/data/snap-busy/a.img") && exists("store/data/snap-busy/b.img"));
	CHECK(exists("store/data/snap-1/pages.img"));
	CHECK(store_collect(st, NULL, 0, &e) == 2);
	CHECK(!exists("store/data/snap-busy"));
	CHECK(store_collect(st, NULL, 0, &e) == 0);
	CHECK(listed(st, "snap-1"));
}

#define THREADS 4
#define ROUNDS 15

struct worker {
	struct store *st;
	int index;
	int failures;
};

/* Each thread puts, gets and deletes its own snapshots, racing on shared directories. */
static void *work(void *arg)
{
	struct worker *w = arg;
	struct err e = {0};
	char src[PATH_MAX], out[PATH_MAX], id[32];
	path_in(src, "small");
	snprintf(out, sizeof(out), "%s/tout%d", base, w->index);
	cJSON *meta = cJSON_CreateObject();
	for (int j = 0; j < ROUNDS; j++) {
		snprintf(id, sizeof(id), "snap-t%d-%d", w->index, j);
		if (store_put_snapshot(w->st, id, src, meta, NULL, NULL, NULL, &e) < 0 ||
		    store_get_snapshot(w->st, id, out, &e) < 0 ||
		    store_delete_snapshot(w->st, id, &e) < 0 || rm_rf(out) < 0) {
			fprintf(stderr, "thread %d: %s\n", w->index, e.msg);
			w->failures++;
		}
	}
	cJSON_Delete(meta);
	return NULL;
}

static void test_threads(void)
{
	struct store *st = NULL;
	struct err e = {0};
	char url[PATH_MAX], src[PATH_MAX];
	path_in(src, "small");
	CHECK(mkdir(src, 0755) == 0);
	snprintf(url, sizeof(url), "file://%s/tstore", base);
	write_rel("small/a.img", "aaaa", 4);
	write_rel("small/b.img", "bb", 2);
	CHECK(store_open(url, NULL, &st, &e) == 0);
	pthread_t tids[THREADS];
	struct worker workers[THREADS];
	for (int i = 0; i < THREADS; i++) {
		workers[i] = (struct worker){.st = st, .index = i};
		CHECK(pthread_create(&tids[i], NULL, work, &workers[i]) == 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(tids[i], NULL);
		CHECK(workers[i].failures == 0);
	}
	CHECK(count_entries("tstore") == 0); /* every delete pruned its directories */
	store_close(st);
}

/* A put that runs out of room fails with ENOSPC and takes back what it wrote. */
static void test_enospc(void)
{
	char dir[PATH_MAX], src[PATH_MAX], url[PATH_MAX + 8];
	path_in(dir, "small-fs");
	path_in(src, "src");
	mkdir(dir, 0755);
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", dir, "tmpfs", 0, "size=2m") < 0) {
		printf("skipping ENOSPC test: %s\n", strerror(errno));
		return;
	}
	struct store *st = NULL;
	struct err e = {0};
	snprintf(url, sizeof(url), "file://%s", dir);
	CHECK(store_open(url, NULL, &st, &e) == 0);
	cJSON *meta = cJSON_CreateObject();
	CHECK(store_put_snapshot(st, "snap-full", src, meta, NULL, NULL, NULL, &e) == -ENOSPC);
	CHECK(strstr(e.msg, "snapshot snap-full: ") && strstr(e.msg, "No space left"));
	CHECK(count_entries("small-fs") == 0);
	cJSON_Delete(meta);
	store_close(st);
	umount(dir);
}

int main(void)
{
	snprintf(base, sizeof(base), "/tmp/test_store.XXXXXX");
	if (!mkdtemp(base))
		return 1;
	make_source();
	test_open();

	struct store *st = NULL;
	struct err e = {0};
	char url[PATH_MAX];
	snprintf(url, sizeof(url), "file://%s/store", base);
	CHECK(store_open(url, NULL, &st, &e) == 0);
	if (st) {
		test_put_get(st);
		test_manifest(st);
		test_list_and_ids(st);
		test_corrupt(st);
		test_delete(st);
		test_crash_and_collect(st);
		store_close(st);
	}
	test_threads();
	test_enospc();
	for (size_t i = 0; i < ARRAY_SIZE(files); i++)
		free(files[i].data);
	rm_rf(base);
	return t_done();
}
