#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/util.h"
#include "runtime/cache.h"
#include "tests/unit/t.h"

#define ENTRY_BYTES (1u << 20)

static char base[64];

static bool exists(const char *rel)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", base, rel);
	return stat(p, &st) == 0;
}

/* Image @id was last used @age seconds ago. */
static void set_age(const char *id, int age)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", base, id);
	struct timespec t[2] = {{.tv_sec = time(NULL) - age}, {.tv_sec = time(NULL) - age}};
	CHECK(utimensat(AT_FDCWD, p, t, 0) == 0);
}

/* An image of ENTRY_BYTES of data, last used @age seconds ago. */
static void make_entry(const char *id, int age)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", base, id);
	CHECK(mkdir_p(p, 0755) == 0);
	char *data = malloc(ENTRY_BYTES);
	memset(data, 'x', ENTRY_BYTES);
	snprintf(p, sizeof(p), "%s/%s/pages.img", base, id);
	CHECK(write_file_durable(p, data, ENTRY_BYTES) == 0);
	free(data);
	set_age(id, age);
}

static int64_t age_of(const char *id)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", base, id);
	return stat(p, &st) == 0 ? time(NULL) - st.st_mtime : -1;
}

/* Images that keep their manifest lend chunks: most recently used first, held, not renewed. */
static void test_hold_recent(void)
{
	char p[PATH_MAX], ids[4][ID_MAX];
	make_entry("snap-a", 300);
	make_entry("snap-b", 200);
	make_entry("snap-c", 100);
	make_entry("snap-d", 50);
	const char *with[] = {"snap-a", "snap-c", "snap-d"};
	const int ages[] = {300, 100, 50};
	for (size_t i = 0; i < ARRAY_SIZE(with); i++) {
		snprintf(p, sizeof(p), "%s/%s/%s", base, with[i], CACHE_MANIFEST_FILE);
		CHECK(write_file_durable(p, "{}", 2) == 0);
		set_age(with[i], ages[i]);
	}
	CHECK(cache_hold_recent("snap-d", ids, 4) == 2);
	CHECK_STR(ids[0], "snap-c");
	CHECK_STR(ids[1], "snap-a");
	CHECK(age_of("snap-a") >= 299);
	cache_remove("snap-a"); /* held: goes at the release, and lends no more */
	CHECK(exists("snap-a"));
	CHECK(cache_hold_recent("snap-c", ids, 4) == 1);
	CHECK_STR(ids[0], "snap-d");
	cache_release("snap-d");
	cache_release("snap-a");
	CHECK(!exists("snap-a"));
	CHECK(cache_hold_recent("snap-d", ids, 1) == 1);
	CHECK_STR(ids[0], "snap-c");
	cache_release("snap-c");
	cache_release("snap-c");
}

/* A stored snapshot's spool becomes its image, manifest and all, and is gone. */
static void test_adopt(void)
{
	char spool[64], p[PATH_MAX];
	snprintf(spool, sizeof(spool), "/tmp/test_cache_spool.XXXXXX");
	CHECK(mkdtemp(spool) != NULL);
	snprintf(p, sizeof(p), "%s/pages.img", spool);
	CHECK(write_file_durable(p, "pages", 5) == 0);
	cache_adopt("snap-z", spool, "{\"files\":[]}");
	CHECK(exists("snap-z/pages.img") && exists("snap-z/" CACHE_MANIFEST_FILE));
	CHECK(access(spool, F_OK) < 0 && errno == ENOENT);
	char ids[1][ID_MAX];
	CHECK(cache_hold_recent("snap-none", ids, 1) == 1); /* it lends chunks now */
	CHECK_STR(ids[0], "snap-z");
	cache_release("snap-z");
	cache_remove("snap-z");
}

/* cache_open() makes the cache directory under the state directory. */
static void test_open(void)
{
	char p[PATH_MAX];
	struct err e = {0};
	struct stat st;
	CHECK(cache_open(base, 0, &e) == 0);
	snprintf(p, sizeof(p), "%s/cache", base);
	CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode));
}

static bool keep_even(const char *id, void *arg)
{
	(void)arg;
	return id[strlen(id) - 1] % 2 == 0;
}

/*
 * The recorded boot id is this boot's, read from /proc (whose files stat as
 * empty), and a cache from another boot is not trusted.
 */
static void test_boot_id(void)
{
	_cleanup_free_ char *now = NULL, *then = NULL;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/.boot_id", base);
	CHECK(read_file("/proc/sys/kernel/random/boot_id", &now, NULL, 128) == 0);
	CHECK(now && strlen(now) == 37); /* 36 characters and a newline */
	CHECK(read_file(path, &then, NULL, 128) == 0);
	CHECK(then && now && !strcmp(then, now));
	CHECK(write_file_durable(path, "another boot\n", 13) == 0);
	make_entry("snap-9", 10);
	cache_clean(keep_even, NULL);
	CHECK(!exists("snap-9") && !exists("snap-8"));
}

/*
 * read_file() of a file that stats as empty: an empty regular file costs no
 * buffer of @max (1 TiB here: more than malloc gives), and a /proc file
 * longer than the first buffer is read whole.
 */
static void test_read_empty_stat(void)
{
	_cleanup_free_ char *empty = NULL, *maps = NULL, *big = NULL;
	char path[PATH_MAX];
	size_t len = 1, n = 0;
	snprintf(path, sizeof(path), "%s/empty", base);
	CHECK(write_file_durable(path, "", 0) == 0);
	CHECK(read_file(path, &empty, &len, (size_t)1 << 40) == 0);
	CHECK(empty && len == 0 && empty[0] == '\0');
	/* Long enough for the buffer to grow: an allocation mapped per line. */
	for (int i = 0; i < 64; i++)
		(void)mmap(NULL, 4096, i % 2 ? PROT_READ : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
			   -1, 0);
	CHECK(read_file("/proc/self/maps", &maps, &len, 16u << 20) == 0);
	CHECK_MSG(maps && len > 4096 && strlen(maps) == len && maps[len - 1] == '\n',
		  "/proc/self/maps read as %zu bytes", len);
	CHECK(read_file("/proc/self/maps", &big, &n, 100) == -EFBIG);
}

int main(void)
{
	snprintf(base, sizeof(base), "/tmp/test_cache.XXXXXX");
	if (!mkdtemp(base))
		return 1;
	/* Room for three images and a bit. */
	cache_init(base, 3 * ENTRY_BYTES + ENTRY_BYTES / 2);
	make_entry("snap-1", 500);
	make_entry("snap-2", 400);
	make_entry("snap-3", 300);
	make_entry("snap-4", 200);
	make_entry("snap-5", 100);
	make_entry("snap-6.tmp-abcd", 1000); /* being materialized: never trimmed */
	struct cache_stats s;
	cache_stats(&s);
	CHECK(s.entries == 5 && s.bytes >= 6 * ENTRY_BYTES);

	cache_hold("snap-1"); /* in use, and now the most recently used */
	cache_trim();
	CHECK(exists("snap-1"));
	CHECK(!exists("snap-2") && !exists("snap-3") && !exists("snap-4"));
	CHECK(exists("snap-5") && exists("snap-6.tmp-abcd"));

	cache_remove("snap-1"); /* held: goes at the last release */
	CHECK(exists("snap-1"));
	cache_hold("snap-1");
	cache_release("snap-1");
	CHECK(exists("snap-1"));
	cache_release("snap-1");
	CHECK(!exists("snap-1"));
	cache_remove("snap-5");
	CHECK(!exists("snap-5"));

	/* The first clean records the boot id: images from an unknown boot go. */
	make_entry("snap-8", 10);
	cache_clean(keep_even, NULL);
	CHECK(!exists("snap-8") && exists(".boot_id"));
	make_entry("snap-7", 10);
	make_entry("snap-8", 10);
	cache_clean(keep_even, NULL);
	CHECK(!exists("snap-7") && exists("snap-8") && !exists("snap-6.tmp-abcd"));
	cache_stats(&s);
	CHECK(s.entries == 1 && s.limit_bytes == 3 * ENTRY_BYTES + ENTRY_BYTES / 2);
	test_boot_id();
	test_read_empty_stat();

	test_hold_recent();
	test_adopt();
	test_open();

	/* The default limit: a quarter of the cache and the free space together. */
	cache_init(base, 0);
	cache_stats(&s);
	CHECK(s.limit_bytes > 0 && s.limit_bytes < INT64_MAX);
	rm_rf(base);
	return t_done();
}
