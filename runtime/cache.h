/*
 * cache.h - the local cache of snapshot images: <state>/cache/<snap-id>/
 * holds the checkpoint files of one snapshot on local disk, either the
 * spool a snapshot was stored from or an image materialized from the
 * store. Forks and resume restore from it instead of the store.
 *
 * An image comes in one of two ways: cache_adopt() takes the spool a
 * snapshot was just stored from, and cache_materialize() gets a snapshot
 * from the store. Each image also keeps its snapshot's manifest text in
 * CACHE_MANIFEST_FILE, written before the directory takes its name: a
 * materialize copies the chunks it needs from such images (donors, held
 * while it runs) rather than download them (store_get_snapshot_from()).
 * Only this module names the cache directory and its entries' paths.
 *
 * Bounded in size: cache_trim() removes least recently used directories
 * (by the directory's mtime, which cache_hold() renews) until the disk
 * blocks they use fit the limit: --cache-max, or by default a quarter of
 * what the cache holds plus the free space of its filesystem. A directory
 * held by a restore is never removed; cache_remove() of a held one waits
 * for the last cache_release().
 *
 * Temp directories (names holding ".tmp") are made by materializing
 * restores; cache_clean() removes leftovers at start-up, and every image
 * if the machine rebooted since they were written (cache/.boot_id): spool
 * files are not fsynced, so a machine crash may have torn them.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef SNAPFS_CACHE_H
#define SNAPFS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/registry/registry.h"
#include "lib/util.h"

struct store;

/* In an image's directory: its manifest. The leading dot keeps it apart from checkpoint files. */
#define CACHE_MANIFEST_FILE ".manifest.json"

struct cache_stats {
	int64_t bytes;	     /* disk blocks used, in bytes */
	int64_t limit_bytes; /* what cache_trim() keeps it under */
	int64_t entries;
};

/* Make the cache directory under @state_dir and cache_init() it. */
int cache_open(const char *state_dir, int64_t max_bytes, struct err *e);

/* @dir is the cache directory (it exists); @max_bytes 0 for the default limit. */
void cache_init(const char *dir, int64_t max_bytes);

/*
 * The checkpoint of snapshot @snap_id in @spool, just stored, becomes its
 * image, keeping @manifest (as stored; NULL: none, and it lends no chunks).
 * A spool on another filesystem is copied. @spool is gone afterwards; a
 * failure only costs later forks a read of the store, so it is a warning.
 */
void cache_adopt(const char *snap_id, const char *spool, const char *manifest);

/*
 * The manifest text image @snap_id keeps (the caller frees it), or a
 * negative errno (-ENOENT: none). cache_adopt() runs only after the put
 * stored the manifest, so a whole one proves the snapshot completed; a
 * machine crash may tear it (not fsynced), so parse it before trusting it.
 */
int cache_manifest(const char *snap_id, char **json);

/* Whether cached image @donor_id should lend chunks before the others. */
typedef bool cache_prefer_fn(const char *donor_id, void *arg);

/*
 * Make sure the cache holds the verified checkpoint image of @snap_id, and
 * put its path in @dir: there already, or got from @store (every chunk
 * verified), copying chunks from other cached images, those @prefer (may
 * be NULL) says yes to first. The caller holds @snap_id (cache_hold()).
 * Holders that ask for one image at once (the forks of one fan-out) get
 * it made once: while one materializes it the others wait, then use it.
 */
int cache_materialize(struct store *store, const char *snap_id, cache_prefer_fn *prefer, void *arg,
		      char dir[PATH_MAX], struct err *e);

/* A restore reads cache/<snap_id>: keep it, and make it the most recently used. */
void cache_hold(const char *snap_id);
void cache_release(const char *snap_id);

/*
 * Hold up to @max images that keep their manifest, most recently used
 * first, none named @except, and put their ids in @ids: a materialize
 * copies chunks from them. Unlike cache_hold() this leaves their mtimes: to
 * lend chunks is not to be used. Returns how many; cache_release() each.
 */
size_t cache_hold_recent(const char *except, char (*ids)[ID_MAX], size_t max);

/* Remove cache/<snap_id> now, or when the last holder releases it. */
void cache_remove(const char *snap_id);

/* Remove least recently used entries that nobody holds until the cache fits its limit. */
void cache_trim(void);

/*
 * At start-up: remove temp directories, each entry for which @keep returns
 * false, and every entry after a reboot.
 */
void cache_clean(bool (*keep)(const char *snap_id, void *arg), void *arg);

void cache_stats(struct cache_stats *out);

#endif
