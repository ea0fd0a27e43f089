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

#include "backend/store/manifest.h"
#include "backend/registry/registry.h"
#include "backend/store/store.h"
#include "lib/util.h"

/* The default limit: this fraction of (cache + free space). */
#define DEFAULT_SHARE_DIV 4
/* The boot id the cache's images were written under (not an entry: a leading dot). */
#define BOOT_ID_FILE ".boot_id"
/* At most this many entries are considered in one trim. */
#define TRIM_ENTRIES_MAX 4096
/* The cache's directory under the state directory. */
#define CACHE_DIR_NAME "cache"
/*
 * A materialize looks at the DONORS_SCAN most recently used cached images
 * and copies chunks from DONORS_USED of them, those its caller prefers
 * (the same sandbox's) first: each costs a parse of its manifest, and a
 * sandbox's own earlier snapshots hold nearly every chunk of its next one.
 */
#define DONORS_SCAN 32
#define DONORS_USED 8

struct held {
	char id[ID_MAX];
	int count;
	bool doomed;	    /* cache_remove() while held: removed at the last release */
	bool materializing; /* a cache_materialize() of it runs: the others wait for it */
	unsigned turns;	    /* materializations ended */
	struct err failed;  /* how the last one ended (code 0: it did not fail) */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t materialized; /* a held entry's materializing went false */
	char dir[PATH_MAX];
	int64_t max_bytes;
	struct held *held;
	size_t nheld, cap;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER, .materialized = PTHREAD_COND_INITIALIZER};

void cache_init(const char *dir, int64_t max_bytes)
{
	pthread_mutex_lock(&cache.lock);
	snprintf(cache.dir, sizeof(cache.dir), "%s", dir);
	cache.max_bytes = max_bytes;
	pthread_mutex_unlock(&cache.lock);
}

int cache_open(const char *state_dir, int64_t max_bytes, struct err *e)
{
	char dir[PATH_MAX];
	int rc = xsnprintf(dir, sizeof(dir), "%s/" CACHE_DIR_NAME, state_dir);
	if (rc >= 0)
		rc = mkdir_p(dir, 0700);
	if (rc < 0)
		return err_set(e, -rc, "cannot create %s/" CACHE_DIR_NAME ": %s", state_dir,
			       strerror(-rc));
	cache_init(dir, max_bytes);
	return 0;
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
 * unless @total is NULL, their disk bytes and total (a walk of every file:
 * skipped by callers that only need the entries' ages).
 */
static size_t list_entries(struct entry *out, bool tmp, int64_t *total)
{
	DIR *d = opendir(cache.dir);
	size_t n = 0;
	int64_t sum = 0;
	if (total)
		*total = 0;
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL && n < TRIM_ENTRIES_MAX) {
		struct stat st;
		if (de->d_name[0] == '.' || strlen(de->d_name) >= ID_MAX ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		int64_t bytes = total ? disk_bytes_at(dirfd(d), de->d_name) : 0;
		sum += bytes;
		if (!tmp && strstr(de->d_name, ".tmp"))
			continue;
		snprintf(out[n].id, sizeof(out[n].id), "%s", de->d_name);
		out[n].mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		out[n].bytes = bytes;
		n++;
	}
	closedir(d);
	if (total)
		*total = sum;
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
	size_t got = 0;
	_cleanup_free_ struct entry *e = calloc(TRIM_ENTRIES_MAX, sizeof(*e));
	if (!e)
		return 0;
	pthread_mutex_lock(&cache.lock);
	size_t n = list_entries(e, false, NULL);
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
	size_t n = list_entries(e, false, &total);
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
	_cleanup_free_ struct entry *e = calloc(TRIM_ENTRIES_MAX, sizeof(*e));
	if (!e)
		return;
	pthread_mutex_lock(&cache.lock);
	bool trusted = same_boot();
	size_t n = list_entries(e, true, NULL);
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
	size_t n = e ? list_entries(e, false, &total) : 0;
	out->bytes = total;
	out->entries = (int64_t)n;
	out->limit_bytes = limit_for(total);
	pthread_mutex_unlock(&cache.lock);
}

/* --- adopting a spool -------------------------------------------------- */

/*
 * Keep manifest @json in image directory @dir (CACHE_MANIFEST_FILE), so
 * later materializes may copy its chunks. Not fsynced, as the image is not
 * (cache.h); a torn one is only a donor the store skips.
 */
static void keep_manifest(const char *dir, const char *json)
{
	char path[PATH_MAX];
	_cleanup_close_ int fd = -1;
	if (xsnprintf(path, sizeof(path), "%s/%s", dir, CACHE_MANIFEST_FILE) >= 0)
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int rc = fd < 0 ? -errno : write_all(fd, json, strlen(json));
	if (rc == 0)
		return;
	warning("cannot keep the manifest in %s: %s; no fork will copy chunks from it", dir,
		strerror(-rc));
	if (fd >= 0)
		unlink(path);
}

/* Copy regular file @name of @from into @to. */
static int copy_image_file(const char *from, const char *to, const char *name)
{
	char src[PATH_MAX], dst[PATH_MAX];
	if (xsnprintf(src, sizeof(src), "%s/%s", from, name) < 0 ||
	    xsnprintf(dst, sizeof(dst), "%s/%s", to, name) < 0)
		return -ENAMETOOLONG;
	_cleanup_close_ int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return -errno;
	_cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0)
		return -errno;
	return copy_fd(in, out);
}

static bool is_regular(DIR *d, const struct dirent *de)
{
	struct stat st;
	if (de->d_type != DT_UNKNOWN)
		return de->d_type == DT_REG;
	return fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/* The regular files of image directory @from into a new directory @to, which appears whole. */
static int copy_image(const char *from, const char *to)
{
	char tmp[PATH_MAX];
	if (xsnprintf(tmp, sizeof(tmp), "%s.tmp-copy", to) < 0)
		return -ENAMETOOLONG;
	rm_rf(tmp);
	int rc = mkdir(tmp, 0700) < 0 ? -errno : 0;
	_cleanup_closedir_ DIR *d = rc == 0 ? opendir(from) : NULL;
	if (rc == 0 && !d)
		rc = -errno;
	while (rc == 0) {
		errno = 0;
		const struct dirent *de = readdir(d);
		if (!de) {
			rc = -errno;
			break;
		}
		if (is_regular(d, de))
			rc = copy_image_file(from, tmp, de->d_name);
	}
	if (rc == 0 && rename(tmp, to) < 0)
		rc = -errno;
	if (rc < 0)
		rm_rf(tmp);
	return rc;
}

int cache_manifest(const char *snap_id, char **json)
{
	char path[PATH_MAX];
	if (xsnprintf(path, sizeof(path), "%s/%s/%s", cache.dir, snap_id, CACHE_MANIFEST_FILE) < 0)
		return -ENAMETOOLONG;
	return read_file(path, json, NULL, MANIFEST_BYTES_MAX);
}

void cache_adopt(const char *snap_id, const char *spool, const char *manifest)
{
	char path[PATH_MAX];
	/* Before the rename: an image is never seen without its manifest. */
	if (manifest)
		keep_manifest(spool, manifest);
	int rc = entry_path(snap_id, path) < 0 ? -ENAMETOOLONG : 0;
	if (rc == 0) {
		rm_rf(path);
		rc = rename(spool, path) < 0 ? -errno : 0;
	}
	/* A spool on another filesystem (--spool on a tmpfs) is copied. */
	if (rc == -EXDEV)
		rc = copy_image(spool, path);
	if (rc < 0)
		warning("cannot keep snapshot %s in the cache: %s; forks will read the store",
			snap_id, strerror(-rc));
	rm_rf(spool);
}

/* --- materializing from the store ---------------------------------------- */

/* Cached images a materialize copies chunks from, held while it runs. */
struct donors {
	char ids[DONORS_USED][ID_MAX];
	size_t n;
	char dirs[DONORS_USED][PATH_MAX];
	char manifests[DONORS_USED][PATH_MAX];
	struct store_donor list[DONORS_USED];
};

/* Held image @id, if @now: the next donor while there is room, else released. */
static void donor_pick(struct donors *d, const char *id, bool now)
{
	size_t i = d->n;
	if (!now)
		return;
	if (i < DONORS_USED && entry_path(id, d->dirs[i]) >= 0 &&
	    xsnprintf(d->manifests[i], PATH_MAX, "%s/%s", d->dirs[i], CACHE_MANIFEST_FILE) >= 0) {
		d->list[i] = (struct store_donor){d->dirs[i], d->manifests[i]};
		memcpy(d->ids[i], id, ID_MAX);
		d->n++;
		return;
	}
	cache_release(id);
}

/*
 * Hold the most recently used cached images and keep DONORS_USED of them:
 * those @prefer says yes to first, then the others. Returns how many.
 */
static size_t donors_hold(struct donors *d, const char *snap_id, cache_prefer_fn *prefer, void *arg)
{
	char held[DONORS_SCAN][ID_MAX];
	bool first[DONORS_SCAN];
	size_t n = cache_hold_recent(snap_id, held, DONORS_SCAN);
	for (size_t i = 0; i < n; i++)
		first[i] = prefer && prefer(held[i], arg);
	for (size_t i = 0; i < n; i++)
		donor_pick(d, held[i], first[i]);
	for (size_t i = 0; i < n; i++)
		donor_pick(d, held[i], !first[i]);
	return d->n;
}

static void donors_release(struct donors *d)
{
	for (size_t i = 0; i < d->n; i++)
		cache_release(d->ids[i]);
}

/* Get @snap_id from @store into @tmp, copying what cached images hold; then keep its manifest. */
static int materialize_into(struct store *store, const char *snap_id, cache_prefer_fn *prefer,
			    void *arg, const char *tmp, struct err *e)
{
	_cleanup_free_ struct donors *d = calloc(1, sizeof(*d));
	struct store_get_result res = {0};
	if (!d)
		return err_set(e, ENOMEM, "out of memory");
	int64_t t0 = mono_ms();
	size_t n = donors_hold(d, snap_id, prefer, arg);
	int rc = store_get_snapshot_from(store, snap_id, tmp, d->list, n, &res, e);
	donors_release(d);
	if (rc < 0)
		return rc;
	keep_manifest(tmp, res.manifest);
	free(res.manifest);
	/* Tenths of MiB: what the store gave is often well under one. */
	info("materialized snapshot %s: %.1f MiB, %.1f MiB copied from local images (%zu looked "
	     "at), %.1f MiB read from the store, in %lld ms",
	     snap_id, (double)res.size_bytes / (1 << 20), (double)res.local_bytes / (1 << 20), n,
	     (double)res.store_bytes / (1 << 20), (long long)(mono_ms() - t0));
	return 0;
}

/*
 * Wait while another holder of @snap_id materializes it, then take the
 * turn: 1 when this caller materializes and must end_turn(). The forks of
 * one fan-out (ops/ops_fanout.c) so read one image, made once. A turn
 * waited for that failed is this caller's failure too (its errno, its
 * sentence in @e): a hundred forks of a broken snapshot fail once, not a
 * hundred times one after another. Unheld (out of memory), it does not
 * wait (0): the rename below still keeps a second copy out.
 */
static int take_turn(const char *snap_id, struct err *e)
{
	int rc = 0;
	pthread_mutex_lock(&cache.lock);
	struct held *h = find_held(snap_id);
	unsigned seen = h ? h->turns : 0;
	while (h && h->materializing) {
		pthread_cond_wait(&cache.materialized, &cache.lock);
		h = find_held(snap_id);
	}
	if (h && h->turns != seen && h->failed.code) {
		rc = -h->failed.code;
		if (e)
			*e = h->failed;
	} else if (h) {
		h->materializing = true;
		rc = 1;
	}
	pthread_mutex_unlock(&cache.lock);
	return rc;
}

static void end_turn(const char *snap_id, int rc, const struct err *e)
{
	pthread_mutex_lock(&cache.lock);
	struct held *h = find_held(snap_id);
	if (h) {
		h->materializing = false;
		h->turns++;
		h->failed = rc < 0 ? *e : (struct err){0};
		if (rc < 0 && !h->failed.code)
			h->failed.code = -rc;
	}
	pthread_cond_broadcast(&cache.materialized);
	pthread_mutex_unlock(&cache.lock);
}

static int materialize_once(struct store *store, const char *snap_id, cache_prefer_fn *prefer,
			    void *arg, const char *dir, struct err *e)
{
	char tmp[PATH_MAX + 32], hex[9];
	if (access(dir, F_OK) == 0)
		return 0; /* made meanwhile, by the turn before this one */
	random_hex(hex, 8);
	snprintf(tmp, sizeof(tmp), "%s.tmp-%s", dir, hex);
	int rc = materialize_into(store, snap_id, prefer, arg, tmp, e);
	if (rc < 0) {
		warning("cannot materialize snapshot %s: %s", snap_id, e->msg);
		rm_rf(tmp);
		return rc;
	}
	/* Another fork may have won the race: then use its copy. */
	if (rename(tmp, dir) < 0)
		rm_rf(tmp);
	return 0;
}

int cache_materialize(struct store *store, const char *snap_id, cache_prefer_fn *prefer, void *arg,
		      char dir[PATH_MAX], struct err *e)
{
	if (entry_path(snap_id, dir) < 0)
		return err_set(e, ENAMETOOLONG, "cache path of %s is too long", snap_id);
	if (access(dir, F_OK) == 0)
		return 0;
	struct err mine = {0};
	int turn = take_turn(snap_id, e);
	if (turn < 0)
		return turn;
	int rc = materialize_once(store, snap_id, prefer, arg, dir, &mine);
	if (turn)
		end_turn(snap_id, rc, &mine);
	if (rc < 0 && e)
		*e = mine;
	return rc;
}
