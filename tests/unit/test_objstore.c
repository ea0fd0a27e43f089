#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/objstore/objstore.h"
#include "lib/util.h"
#include "tests/unit/t.h"
#include "tests/unit/t_dir.h"

struct seen {
	int n;
	bool has_ab, has_tmp;
	int64_t ab_size;
};

static int on_key(const char *key, int64_t size, void *arg)
{
	struct seen *s = arg;
	s->n++;
	if (!strcmp(key, "a/b/c")) {
		s->has_ab = true;
		s->ab_size = size;
	}
	if (strstr(key, ".tmp."))
		s->has_tmp = true;
	return 0;
}

static int stop_at_first(const char *key, int64_t size, void *arg)
{
	(void)key;
	(void)size;
	(*(int *)arg)++;
	return 7;
}

static void test_buf(struct objstore *os)
{
	struct err e = {0};
	char *got = NULL;
	size_t len = 0;
	CHECK(objstore_put_buf(os, "a/b/c", "hello", 5, &e) == 0);
	CHECK(objstore_get_buf(os, "a/b/c", &got, &len, 100, &e) == 0);
	CHECK(len == 5 && got && !memcmp(got, "hello", 5));
	free(got);
	CHECK(objstore_put_buf(os, "a/b/c", "bye", 3, &e) == 0);
	got = NULL;
	CHECK(objstore_get_buf(os, "a/b/c", &got, &len, 100, &e) == 0);
	CHECK(len == 3 && got && !strcmp(got, "bye"));
	free(got);
	CHECK(objstore_get_buf(os, "a/b/c", &got, &len, 2, &e) == -EFBIG);
	CHECK(objstore_get_buf(os, "a/nope", &got, &len, 100, &e) == -ENOENT);
	CHECK(e.code == ENOENT && strstr(e.msg, "a/nope"));
}

static void test_bad_keys(struct objstore *os)
{
	static const char *const bad[] = {"",	   "/abs", "../x", "a/../b",	   "a//b",
					  "a/./b", "a/",   "a b",  "a/b.tmp.1234", "x?y"};
	struct err e = {0};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		CHECK(objstore_put_buf(os, bad[i], "x", 1, &e) == -EINVAL);
	CHECK(objstore_del(os, "../x", &e) == -EINVAL);
}

static void test_file(struct objstore *os)
{
	struct err e = {0};
	char src[PATH_MAX], dst[PATH_MAX];
	size_t len = (3u << 20) + 17;
	char *data = malloc(len);
	for (size_t i = 0; i < len; i++)
		data[i] = (char)(i * 7 + i / 4096);
	t_path(src, "src.bin");
	t_path(dst, "dst.bin");
	CHECK(write_file_durable(src, data, len) == 0);
	CHECK(objstore_put_file(os, "f/big", src, &e) == 0);
	CHECK(objstore_get_file(os, "f/big", dst, &e) == 0);
	char *got = NULL;
	size_t got_len = 0;
	CHECK(read_file(dst, &got, &got_len, len) == 0);
	CHECK(got_len == len && got && !memcmp(got, data, len));
	CHECK(objstore_get_file(os, "f/none", dst, &e) == -ENOENT);
	CHECK(objstore_put_file(os, "f/x", "/nonexistent/file", &e) == -EIO);
	free(got);
	free(data);
}

static void test_list_and_del(struct objstore *os)
{
	struct err e = {0};
	char p[PATH_MAX];
	t_path(p, "store/a/b/leftover.tmp.abcd");
	CHECK(write_file_durable(p, "junk", 4) == 0);
	struct seen s = {0};
	CHECK(objstore_list(os, "a/", on_key, &s, &e) == 0);
	CHECK(s.n == 1 && s.has_ab && !s.has_tmp && s.ab_size == 3);
	memset(&s, 0, sizeof(s));
	CHECK(objstore_list(os, "", on_key, &s, &e) == 0);
	CHECK(s.n == 2 && s.has_ab);
	memset(&s, 0, sizeof(s));
	CHECK(objstore_list(os, "a/b/d", on_key, &s, &e) == 0);
	CHECK(s.n == 0);
	CHECK(objstore_list(os, "zzz/", on_key, &s, &e) == 0);
	int calls = 0;
	CHECK(objstore_list(os, "", stop_at_first, &calls, &e) == 7);
	CHECK(calls == 1);

	unlink(p);
	CHECK(objstore_del(os, "a/b/c", &e) == 0);
	CHECK(!t_exists("store/a/b/c"));
	CHECK(!t_exists("store/a")); /* empty parents pruned */
	CHECK(t_exists("store"));    /* but never the root */
	CHECK(objstore_del(os, "a/b/c", &e) == 0);
	CHECK(objstore_del(os, "f/big", &e) == 0);
	CHECK(!t_exists("store/f"));
}

static void test_range(struct objstore *os)
{
	struct err e = {0};
	char buf[16] = "";
	CHECK(objstore_put_buf(os, "r/obj", "0123456789", 10, &e) == 0);
	CHECK(objstore_get_range(os, "r/obj", 3, 4, buf, &e) == 0);
	CHECK(!memcmp(buf, "3456", 4));
	CHECK(objstore_get_range(os, "r/obj", 0, 10, buf, &e) == 0);
	CHECK(!memcmp(buf, "0123456789", 10));
	CHECK(objstore_get_range(os, "r/obj", 8, 3, buf, &e) == -EIO);
	CHECK(strstr(e.msg, "r/obj") != NULL);
	CHECK(objstore_get_range(os, "r/none", 0, 1, buf, &e) == -ENOENT);
	CHECK(objstore_get_range(os, "../x", 0, 1, buf, &e) == -EINVAL);
	CHECK(objstore_del(os, "r/obj", &e) == 0);
}

/* Temp files of interrupted puts: swept when old enough, with their emptied directories. */
static void test_sweep(struct objstore *os)
{
	struct err e = {0};
	char p[PATH_MAX], q[PATH_MAX];
	t_path(p, "store/s/t/x.pack.tmp.0123abcd");
	t_path(q, "store/s/t");
	CHECK(mkdir_p(q, 0755) == 0);
	t_path(q, "store/s/keep.tmp.fresh");
	CHECK(write_file_durable(p, "junk", 4) == 0);
	CHECK(write_file_durable(q, "junk", 4) == 0);
	struct timespec old[2] = {{.tv_sec = time(NULL) - 7200}, {.tv_sec = time(NULL) - 7200}};
	CHECK(utimensat(AT_FDCWD, p, old, 0) == 0);
	CHECK(objstore_put_buf(os, "s/real", "x", 1, &e) == 0);
	CHECK(objstore_sweep(os, 3600 * 1000, &e) == 1);
	CHECK(!t_exists("store/s/t")); /* emptied, so pruned */
	CHECK(t_exists("store/s/keep.tmp.fresh") && t_exists("store/s/real"));
	CHECK(objstore_sweep(os, 0, &e) == 1);
	CHECK(!t_exists("store/s/keep.tmp.fresh") && t_exists("store/s/real"));
	CHECK(objstore_del(os, "s/real", &e) == 0);
	CHECK(!t_exists("store/s"));
}

/* A 1 MiB tmpfs in a private mount namespace; skipped where that needs privileges we lack. */
static void test_enospc(void)
{
	char dir[PATH_MAX];
	t_path(dir, "small");
	mkdir(dir, 0755);
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", dir, "tmpfs", 0, "size=1m") < 0) {
		printf("skipping ENOSPC test: %s\n", strerror(errno));
		return;
	}
	struct objstore *os = NULL;
	struct err e = {0};
	CHECK(objstore_local_open(dir, &os, &e) == 0);
	size_t len = 2u << 20;
	char *data = calloc(1, len);
	CHECK(objstore_put_buf(os, "x/big", data, len, &e) == -ENOSPC);
	CHECK(e.code == ENOSPC && strstr(e.msg, "No space"));
	struct seen s = {0};
	CHECK(objstore_list(os, "", on_key, &s, &e) == 0);
	CHECK(s.n == 0); /* the temp file is gone */
	free(data);
	objstore_close(os);
	umount(dir);
}

int main(void)
{
	if (!t_dir_make("test_objstore"))
		return 1;
	char dir[PATH_MAX];
	t_path(dir, "store");
	struct objstore *os = NULL;
	struct err e = {0};
	CHECK(objstore_local_open(dir, &os, &e) == 0);
	char url[PATH_MAX + 8];
	char real[PATH_MAX];
	CHECK(realpath(dir, real) != NULL);
	snprintf(url, sizeof(url), "file://%s", real);
	CHECK_STR(os->url, url);

	test_buf(os);
	test_bad_keys(os);
	test_file(os);
	test_list_and_del(os);
	test_range(os);
	test_sweep(os);
	objstore_close(os);
	test_enospc();
	rm_rf(t_base);
	return t_done();
}
