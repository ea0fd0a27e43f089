/*
 * store.h - the snapshot store: content-addressed, deduplicated, compressed
 * and verified, kept in an objstore (local directory or S3).
 *
 * A put cuts each checkpoint file into chunks (backend/store/chunker.h), names
 * each chunk by the SHA-256 of its plain bytes, and stores only chunks the
 * store does not hold yet, zstd-compressed, appended into pack objects of
 * about 32 MiB; all-zero chunks are stored nowhere. Layout in the objstore:
 *   packs/<snapshot-id>/<seq>.pack   chunks a put of that snapshot added
 *   packs/<snapshot-id>/<seq>.idx    the chunks in that pack (binary)
 *   manifests/<snapshot-id>.json     written last; lists every chunk of
 *                                    every file and where it is stored
 *                                    (backend/store/manifest.h)
 * A put stores every pack first (each pack before its index), then the
 * manifest: a crash at any point leaves a snapshot with a manifest and all
 * its data, or no manifest (and possibly packs no manifest lists, which
 * store_collect() removes). A get reads only the byte ranges of packs it
 * needs and checks every chunk's SHA-256 before it writes it; a corrupt or
 * missing chunk fails the get with -EIO naming the snapshot and the chunk,
 * and the get removes what it wrote. What the objstore holds may come from
 * any writer: manifests and pack indexes are validated and bounded before
 * use (backend/store/manifest.h, store_internal.h), and a put reuses a stored
 * chunk only at its own length and from a pack it has read a chunk of back
 * (store_put.c); a pack that fails is no longer deduplicated against.
 *
 * Deletion removes the manifest first; packs that no manifest lists any
 * more and no put in flight uses go under the rules of backend/store/store_gc.c:
 * at once in a store only this process writes, after a grace period in a
 * store that several hosts share (docs/store.md). The store keeps in
 * memory which packs each manifest lists and where every stored chunk is,
 * read at open and kept up to date with store_refresh().
 *
 * Thread-safety: every function may be called from any thread at once.
 * A put or get uses up to one thread per core.
 * Ownership: the store owns its objstore; callers own @meta and free what
 * store_get_manifest() returns with free().
 */
#ifndef SNAPFS_STORE_H
#define SNAPFS_STORE_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "lib/limits.h"
#include "lib/util.h"

struct store;

/* Called as bytes are stored; @done and @total in plain bytes. */
typedef void (*store_progress_fn)(void *arg, int64_t done, int64_t total);

struct store_put_result {
	int64_t size_bytes;   /* plain bytes of all files */
	int64_t stored_bytes; /* bytes this put added to the store: new packs, their indexes,
				 manifest */
	char **manifest;      /* set by the caller, or NULL: receives the manifest text
				 written (the caller frees it) */
};

/* The store's totals, for metrics. */
struct store_stats {
	int64_t snapshots;     /* manifests */
	int64_t packs;	       /* pack objects */
	int64_t chunks;	       /* distinct chunks stored */
	int64_t chunk_bytes;   /* their plain bytes */
	int64_t stored_bytes;  /* bytes of packs, pack indexes and manifests */
	int64_t logical_bytes; /* plain bytes of every snapshot, as if each were stored whole */
	int64_t puts_in_flight;
	int64_t condemned_packs; /* packs waiting for the grace period to end (store_gc.c) */
	int64_t grace_ms;
	int64_t get_store_bytes; /* read from the objstore by gets since open (as stored) */
	int64_t get_local_bytes; /* copied from donors by gets since open (plain) */
};

/*
 * Open the store named by @url: "file:///abs/dir", or NULL/"" for the
 * default "<state_dir>/store". Other schemes: -EINVAL with a message.
 * Lists the manifests; reads each, and the index of every pack they list,
 * unless <state_dir>/store-records.db kept it (backend/store/store_records.c).
 */
int store_open(const char *url, const char *state_dir, struct store **out, struct err *e);
void store_close(struct store *st);
/* The URL as users see it (never a secret). */
const char *store_url(const struct store *st);

/*
 * Store every regular file in directory @dir as snapshot @id, then write
 * the manifest: the object @meta (the caller's fields: id, sandbox, image,
 * host, ...) with the fields of backend/store/manifest.h added. @meta is not
 * consumed. @progress is called as chunks are stored, in plain bytes.
 * -EEXIST if @id is stored already, -EBUSY if a put of @id is in flight.
 */
int store_put_snapshot(struct store *st, const char *id, const char *dir, const cJSON *meta,
		       store_progress_fn progress, void *arg, struct store_put_result *res,
		       struct err *e);

/*
 * Materialize snapshot @id into directory @dir (created if missing), every
 * chunk verified against its SHA-256; the files are written, not fsynced
 * (the caller decides what must survive a crash). -ENOENT if there is
 * no manifest; -EIO naming the snapshot, the chunk and its file if data is
 * missing or corrupt; -ENOSPC if @dir's filesystem is full.
 */
int store_get_snapshot(struct store *st, const char *id, const char *dir, struct err *e);

/*
 * A local image a get may copy chunks from instead of reading them from the
 * store: the files of some snapshot in directory @dir, and @manifest, a file
 * holding that snapshot's manifest text (as store_get_manifest() returns
 * it), which says which chunk is where in them.
 */
struct store_donor {
	const char *dir;
	const char *manifest;
};
/* Donors a get looks at; more are ignored. */
#define STORE_DONORS_MAX 16

struct store_get_result {
	int64_t size_bytes;  /* plain bytes of the files */
	int64_t store_bytes; /* bytes read from the objstore: the packs' ranges and the manifest */
	int64_t local_bytes; /* plain bytes copied from donors (verified) */
	char *manifest;	     /* the manifest text the get followed; the caller frees it */
};

/*
 * store_get_snapshot() that copies every chunk one of @donors holds from
 * there rather than from the store. A chunk is verified against its SHA-256
 * wherever it comes from; one a donor holds that does not verify (the file
 * changed or is torn) is read from the store instead, and a donor that
 * cannot be read is skipped: donors never make a get fail. Errors as
 * store_get_snapshot(). @res (may be NULL) is filled on success.
 */
int store_get_snapshot_from(struct store *st, const char *id, const char *dir,
			    const struct store_donor *donors, size_t ndonors,
			    struct store_get_result *res, struct err *e);

/*
 * Read and check every chunk of snapshot @id (decompress, SHA-256) without
 * writing anything: 0 if all are there and sound, else as store_get_snapshot().
 */
int store_verify_snapshot(struct store *st, const char *id, struct err *e);

/* The manifest text of @id (caller frees), -ENOENT if none. */
int store_get_manifest(struct store *st, const char *id, char **json, struct err *e);

/*
 * Whether the store's records hold @id: its manifest was listed and read at
 * the last refresh (or open), or a put here stored it. No request: start-up
 * asks this of every completed row instead of a GET of each manifest.
 */
bool store_has_record(struct store *st, const char *id);

/*
 * Follow the manifests other hosts sharing the store added or deleted: the
 * records this store keeps (and so which chunks puts deduplicate against
 * and which packs are in use) match the manifests listed now. @listed (if
 * not NULL, an empty set) receives the ids of the snapshots listed, sealed.
 */
struct strset;
int store_refresh(struct store *st, struct strset *listed, struct err *e);

/*
 * The grace period, in ms, before a pack that no manifest lists may be
 * deleted: 0 (the default) when this process is the only writer of the
 * store, so packs go at once; otherwise longer than any put takes (a put
 * that outlasts 3/4 of it may fail with ETIMEDOUT). See backend/store/store_gc.c.
 */
void store_set_grace(struct store *st, int64_t grace_ms);
/* How often the daemon should run store_collect(): a quarter of the grace, 1 s to 10 min. */
#define STORE_COLLECT_PERIOD_MAX_MS (600 * 1000)
int64_t store_collect_period_ms(const struct store *st);

/*
 * Holds (store_hold.c): a hold on snapshot @snap_id says sandbox @sandbox
 * of host @host will be restored from it (a suspended sandbox: its
 * snapshot is all that is left of it), so no host may delete it. The
 * object, holds/<snap_id>/<host>.<sandbox>.json, is written by the host
 * that holds it before the sandbox's container goes, and removed by it
 * once the sandbox no longer needs the snapshot. store_delete_snapshot()
 * refuses a held snapshot with -EBUSY, and store_collect() leaves the
 * packs its put writes alone.
 */
struct store_holder {
	char host[ID_MAX];
	char sandbox[ID_MAX];
};
int store_hold(struct store *st, const char *snap_id, const char *host, const char *sandbox,
	       struct err *e);
/* A hold that is not there is 0. */
int store_unhold(struct store *st, const char *snap_id, const char *host, const char *sandbox,
		 struct err *e);
/* 1 if @snap_id is held (@who, may be NULL, names one holder), 0 if not, or a negative errno. */
int store_held(struct store *st, const char *snap_id, struct store_holder *who, struct err *e);
/* Call @fn for every hold in the store; its non-zero value stops the walk and is returned. */
int store_holds_each(struct store *st,
		     int (*fn)(const char *snap_id, const struct store_holder *who, void *arg),
		     void *arg, struct err *e);

/*
 * Write the tombstone of @id (tombstones/<id>.json), then delete its
 * manifest, then collect the packs no manifest lists any more and no put in
 * flight uses. A missing snapshot is 0; a held one (above) -EBUSY, with the
 * holder in @e (and no tombstone).
 */
int store_delete_snapshot(struct store *st, const char *id, struct err *e);

/*
 * One collection pass (backend/store/store_gc.c): condemn packs that no manifest
 * lists and no put in flight in this process writes or uses; delete those
 * condemned longer than the grace period (with a grace of 0: at once);
 * rescue condemned packs a manifest lists again. Also sweeps what
 * interrupted puts left behind (temp objects) that is older than an hour or
 * the grace period, or all of it with STORE_COLLECT_AT_START and a grace of
 * 0: the caller then promises that no put runs in this process during the
 * pass, and the grace of 0 that no other process writes the store.
 * Returns the number of objects removed or a negative errno.
 */
#define STORE_COLLECT_AT_START 1u
int store_collect(struct store *st, unsigned flags, struct err *e);

/*
 * Which store this is (backend/store/store_ident.c): the id its snapfs-store.json
 * names into @id. -ENOENT if it has none, unless @create: then one is
 * written (the store's first use) and read back. -EIO if it cannot say.
 */
int store_identity(struct store *st, bool create, char id[STORE_ID_MAX], struct err *e);
/* Record that snapshot @id was deleted on purpose (store_delete_snapshot() does). */
int store_tombstone_put(struct store *st, const char *id, struct err *e);
/* 1 if a tombstone says @id was deleted, 0 if none does, or a negative errno. */
int store_tombstone_get(struct store *st, const char *id, struct err *e);

/* The store's totals as this process knows them. */
void store_stats(struct store *st, struct store_stats *out);

#endif
