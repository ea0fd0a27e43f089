#include "runtime/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/registry.h"
#include "lib/util.h"

/* The default limit: this fraction of (cache + free space). */
#define DEFAULT_SHARE_DIV 4
/* The boot id the cache's images were written under (not an entry: a leading dot). */
#define BOOT_ID_FILE ".boot_id"
/* At most this many entries are considered in one trim. */
#define TRIM_ENTRIES_MAX 4096

struct held {
	char id[ID_MAX];
	int count;
	bool doomed; /* cache_remove() while held: removed at the last release */
};

static struct {
	pthread_mutex_t lock;
	char dir[PATH_MAX];
	int64_t max_bytes;
	struct held *held;
	size_t nheld, cap;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

void cache_init(const char *dir, int64_t max_bytes)
{
	pthread_mutex_lock(&cache.lock);
	snprintf(cache.dir, sizeof(cache.dir), "%s", dir);
	cache.max_bytes = max_bytes;
	pthread_mutex_unlock(&cache.lock);
}

static int entry_path(const char *snap_id, char path[PATH_MAX])
{
	return xsnprintf(path, PATH_MAX, "%s/%s", cache.dir, snap_id);
}

/* Under the lock. */
static struct held *find_held(const char *snap_id)
{
	for (size_t i = 0; i < cache.nheld; i++) {
		if (!strcmp(cache.held[i].id, snap_id))
			return &cache.held[i];
	}
	return NULL;
}

/* Under the lock: one more holder of @snap_id. */
static bool hold_locked(const char *snap_id)
{
	struct held *h = find_held(snap_id);
	if (!h && cache.nheld == cache.cap) {
		size_t ncap = cache.cap ? cache.cap * 2 : 16;
		struct held *bigger = reallocarray(cache.held, ncap, sizeof(*bigger));
		if (bigger) {
			cache.held = bigger;
			cache.cap = ncap;
		}
	}
	if (!h && cache.nheld < cache.cap) {
		h = &cache.held[cache.nheld++];
		*h = (struct held){0};
		snprintf(h->id, sizeof(h->id), "%s", snap_id);
	}
	/* Out of memory: unheld, so at worst a trim removes it under a restore, which then fails.
	 */
	if (h)
		h->count++;
	return h != NULL;
}

void cache_hold(const char *snap_id)
{
	char path[PATH_MAX];
	pthread_mutex_lock(&cache.lock);
	hold_locked(snap_id);
	if (entry_path(snap_id, path) >= 0)
		utimensat(AT_FDCWD, path, NULL, 0);
	pthread_mutex_unlock(&cache.lock);
}

void cache_release(const char *snap_id)
{
	char path[PATH_MAX];
	bool remove = false;
	pthread_mutex_lock(&cache.lock);
	struct held *h = find_held(snap_id);
	if (h && --h->count == 0) {
		remove = h->doomed;
		*h = cache.held[--cache.nheld];
	}
	/* Under the lock, so that a hold cannot find it half removed. */
	if (remove && entry_path(snap_id, path) >= 0)
		rm_rf(path);
	pthread_mutex_unlock(&cache.lock);
}

void cache_remove(const char *snap_id)
{
	char path[PATH_MAX];
	pthread_mutex_lock(&cache.lock);
	struct held *h = find_held(snap_id);
	if (h)
		h->doomed = true;
	else if (entry_path(snap_id, path) >= 0)
		rm_rf(path);
	pthread_mutex_unlock(&cache.lock);
}

/* Disk blocks under @dfd/@name, in bytes: holes (zero runs) cost nothing. */
static int64_t disk_bytes_at(int dfd, const char *name)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	int64_t total = (int64_t)st.st_blocks * 512;
	if (!S_ISDIR(st.st_mode))
		return total;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return total;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			total += disk_bytes_at(dirfd(d), de->d_name);
	}
	closedir(d);
	return total;
}

struct entry {
	char id[ID_MAX];
	int64_t mtime_ns;
	int64_t bytes;
};

static int by_age(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	return (x->mtime_ns > y->mtime_ns) - (x->mtime_ns < y->mtime_ns);
}

/*
 * Under the lock: the entries of the cache (temp dirs too, when @tmp) and,
 * when @sizes, their disk bytes and total (a walk of every file: skipped by
 * callers that only need the entries' ages).
 */
static size_t list_entries(struct entry *out, bool tmp, bool sizes, int64_t *total)
{
	DIR *d = opendir(cache.dir);
	size_t n = 0;
	*total = 0;
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL && n < TRIM_ENTRIES_MAX) {
		struct stat st;
		if (de->d_name[0] == '.' || strlen(de->d_name) >= ID_MAX ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		int64_t bytes = sizes ? disk_bytes_at(dirfd(d), de->d_name) : 0;
		*total += bytes;
		if (!tmp && strstr(de->d_name, ".tmp"))
			continue;
		snprintf(out[n].id, sizeof(out[n].id), "%s", de->d_name);
		out[n].mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		out[n].bytes = bytes;
		n++;
	}
	closedir(d);
	return n;
}

/* Under the lock: whether entry @id may lend chunks: it keeps its manifest, no delete waits. */
static bool lends(const char *id)
{
	char path[PATH_MAX];
	const struct held *h = find_held(id);
	return !(h && h->doomed) &&
	       xsnprintf(path, sizeof(path), "%s/%s/%s", cache.dir, id, CACHE_MANIFEST_FILE) >= 0 &&
	       access(path, F_OK) == 0;
}

size_t cache_hold_recent(const char *except, char (*ids)[ID_MAX], size_t max)
{
	int64_t total = 0;
	size_t got = 0;
	_cleanup_free_ struct entry *e = calloc(TRIM_ENTRIES_MAX, sizeof(*e));
	if (!e)
		return 0;
	pthread_mutex_lock(&cache.lock);
	size_t n = list_entries(e, false, false, &total);
	qsort(e, n, sizeof(*e), by_age);
	for (size_t i = n; i-- > 0 && got < max;) {
		/* Unheld (out of memory) it must not be listed: its release would drop another
		 * hold. */
		if (strcmp(e[i].id, except) == 0 || !lends(e[i].id) || !hold_locked(e[i].id))
			continue;
		memcpy(ids[got++], e[i].id, ID_MAX);
	}
	pthread_mutex_unlock(&cache.lock);
	return got;
}

/* Under the lock. */
static int64_t limit_for(int64_t total)
{
	if (cache.max_bytes > 0)
		return cache.max_bytes;
	int64_t free = free_bytes(cache.dir);
	return free < 0 ? INT64_MAX : (free + total) / DEFAULT_SHARE_DIV;
}

void cache_trim(void)
{
	char path[PATH_MAX];
	int64_t total = 0;
	_cleanup_free_ struct entry *e = calloc(TRIM_ENTRIES_MAX, sizeof(*e));
	if (!e)
		return;
	pthread_mutex_lock(&cache.lock);
	size_t n = list_entries(e, false, true, &total);
	int64_t limit = limit_for(total);
	qsort(e, n, sizeof(*e), by_age);
	for (size_t i = 0; i < n && total > limit; i++) {
		if (find_held(e[i].id) || entry_path(e[i].id, path) < 0)
			continue;
		info("cache: removing %s (%lld MiB) to stay under %lld MiB", e[i].id,
		     (long long)(e[i].bytes >> 20), (long long)(limit >> 20));
		rm_rf(path);
		total -= e[i].bytes;
	}
	pthread_mutex_unlock(&cache.lock);
}

/*
 * Whether the images in the cache may be trusted: they were written without
 * fsync (runsc writes the spool without it), so a crash of the machine may
 * have torn them. A new boot id says the machine restarted since.
 */
static bool same_boot(void)
{
	char path[PATH_MAX];
	_cleanup_free_ char *now = NULL, *then = NULL;
	if (xsnprintf(path, sizeof(path), "%s/%s", cache.dir, BOOT_ID_FILE) < 0 ||
	    read_file("/proc/sys/kernel/random/boot_id", &now, NULL, 128) < 0)
		return false;
	bool same = read_file(path, &then, NULL, 128) == 0 && !strcmp(now, then);
	if (!same && write_file_durable(path, now, strlen(now)) < 0)
		warning("cache: cannot record the boot id in %s", path);
	return same;
}

void cache_clean(bool (*keep)(const char *snap_id, void *arg), void *arg)
{
	char path[PATH_MAX];
	int64_t total = 0;
	_cleanup_free_ struct entry *e = calloc(TRIM_ENTRIES_MAX, sizeof(*e));
	if (!e)
		return;
	pthread_mutex_lock(&cache.lock);
	bool trusted = same_boot();
	size_t n = list_entries(e, true, false, &total);
	for (size_t i = 0; i < n; i++) {
		if ((trusted && !strstr(e[i].id, ".tmp") && keep(e[i].id, arg)) ||
		    entry_path(e[i].id, path) < 0)
			continue;
		info("cache: removing %s %s", trusted ? "leftover" : "image from before a reboot",
		     e[i].id);
		rm_rf(path);
	}
	pthread_mutex_unlock(&cache.lock);
}

void cache_stats(struct cache_stats *out)
{
	_cleanup_free_ struct entry *e = calloc(TRIM_ENTRIES_MAX, sizeof(*e));
	int64_t total = 0;
	pthread_mutex_lock(&cache.lock);
	size_t n = e ? list_entries(e, false, true, &total) : 0;
	out->bytes = total;
	out->entries = (int64_t)n;
	out->limit_bytes = limit_for(total);
	pthread_mutex_unlock(&cache.lock);
}
