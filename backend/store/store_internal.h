/*
 * store_internal.h - what the files of backend/store/ share. Not for other
 * modules. The files:
 *   store_open.c       store_open(), store_close()
 *   store_put.c, store_put_pack.c, store_put_reuse.c, store_put_manifest.c
 *                      a put: chunk, compress, deduplicate, write packs, the manifest
 *   store_get.c        a get (restore), with store_donor.c's donor map
 *   store_gc.c         delete a snapshot, collect packs no manifest uses
 *   store_hold.c       holds: a sandbox resuming from a snapshot keeps it
 *   store_ident.c      the store's identity, and tombstones of deleted snapshots
 *   store_refresh.c    the records follow the manifests listed
 *   store_records.c    the local copy of the records (SQLite)
 *   store.c            ids, keys, worker threads, puts in flight, listing, stats
 *   store_snaps.c      the records and the packs, their tables by name, room reserved
 *   store_index.c      the chunk index, the pack index codec, store_sha256()
 *   manifest.c, chunker.c  the manifest format, content-defined chunking
 *
 * In memory the store keeps, under st->lock:
 *   - one struct pack per pack object some manifest lists, with `refs` (how
 *     many manifests list it) and `pins` (how many puts in flight use chunks
 *     of it);
 *   - the chunk index: SHA-256 -> where the chunk is stored, for every chunk
 *     of every indexed pack; a put looks its chunks up here to store each
 *     one once;
 *   - one struct snap_rec per manifest: the packs it lists, its sizes;
 *   - the puts in flight, each with the packs it pinned.
 * store_refresh() makes this follow the manifests in the objstore, which
 * other hosts sharing it add and delete. A put uses a stored chunk only if
 * its pack is in use (refs or pins) and not condemned; packs leave under
 * the rules of backend/store/store_gc.c, their chunks leaving the index (under
 * the lock) before their objects leave the objstore.
 *
 * Objects: manifests/<id>.json, packs/<id>/<seq>.pack and
 * packs/<id>/<seq>.idx, where <id> is the snapshot whose put wrote the pack
 * (later snapshots may use its chunks too) and <seq> four or more digits;
 * trash/<id>/<seq>.<token>: the pack <id>/<seq> is condemned (store_gc.c).
 */
#ifndef SNAPFS_STORE_INTERNAL_H
#define SNAPFS_STORE_INTERNAL_H

#include <openssl/evp.h>
#include <pthread.h>
#include <zstd.h>

#include "backend/store/manifest.h"
#include "backend/objstore/objstore.h"
#include "backend/store/store.h"
#include "lib/cancel.h"
#include "lib/limits.h"
#include "lib/strbuf.h"
#include "lib/strset.h"

/* Threads one put or get runs on: the cores, at most this many. */
#define STORE_WORKERS_MAX 8

/*
 * Bounds on what the bucket's manifests and pack indexes can make this
 * process hold (any writer of the bucket writes them, every host reads them
 * at start-up); the manifest's own are in backend/store/manifest.h.
 *
 *   PACK_IDX_ENTRIES_MAX    chunks in one pack: 64 Ki. A put fills a pack to
 *                           ~32 MiB (store_put.c), ~400 chunks of the
 *                           chunker's mean length, and closes it at this many
 *                           whatever their size: only chunks that compress
 *                           below 512 bytes each ever reach it.
 *   PACK_IDX_MAX            an index object of that many entries, ~3 MiB.
 *   PACK_BYTES_MAX          where a chunk may end in its pack: 1 GiB, 32 times
 *                           what a put writes.
 *   STORE_INDEX_CHUNKS_MAX  chunks the packs' indexes add to the chunk index:
 *                           8 Mi, ~640 GiB of distinct data at the mean chunk
 *                           length, at most 16 Mi slots of 56 bytes (896 MiB).
 *                           Past it a pack is not indexed: puts store its
 *                           chunks again (a warning says so once); gets do not
 *                           use the index.
 *   STORE_PACKS_MAX         packs the records name: 1 Mi (32 TiB of packs),
 *                           ~130 MiB of records.
 *   STORE_PACK_REFS_MAX     packs the records list, summed over records (a
 *                           pointer each): 16 Mi, 128 MiB; a thousand
 *                           snapshots of a hundred packs each are 100 Ki.
 * A manifest that would pass either of the last two is not recorded and is
 * treated as one that cannot be read (a warning; collection waits). The last
 * three are copied into struct store_limits at open, where tests lower them.
 */
#define PACK_IDX_ENTRIES_MAX (64u << 10)
#define PACK_IDX_MAX (PACK_IDX_HEADER + PACK_IDX_ENTRIES_MAX * PACK_IDX_ENTRY + SHA256_LEN)
#define PACK_BYTES_MAX (1u << 30)
#define STORE_INDEX_CHUNKS_MAX (8u << 20)
#define STORE_PACKS_MAX (1u << 20)
#define STORE_PACK_REFS_MAX (16u << 20)

/*
 * What this process knows of a pack's bytes (store_put.c): a put reuses
 * chunks of a pack only once it read one of them back and it verified,
 * and never of a pack whose check failed. One worker checks a pack at a
 * time; others wait for its verdict (st->checked).
 */
enum pack_check {
	PACK_UNCHECKED,
	PACK_CHECKING,
	PACK_SOUND,
	PACK_BAD,
};

struct pack {
	char name[MANIFEST_PACK_MAX + 1]; /* "<id>/<seq>" */
	int refs;
	int pins;
	int64_t bytes;	       /* the pack object */
	int64_t idx_bytes;     /* its index object */
	bool indexed;	       /* its chunks are in the chunk index */
	bool idx_read;	       /* its index object was read, or could not be: not read again */
	bool condemned;	       /* a trash/ marker names it: no new put may use it */
	bool listed, present;  /* during a collection pass: a manifest listed names it; in packs/ */
	enum pack_check check; /* under st->lock */
};

/* Whether a put may use chunks of @p (under st->lock). */
static inline bool pack_usable(const struct pack *p)
{
	return p->indexed && !p->condemned && p->check != PACK_BAD && (p->refs > 0 || p->pins > 0);
}

/* Where one chunk is stored. An empty index slot has pack == NULL. */
struct chunk_ref {
	unsigned char sha256[SHA256_LEN];
	struct pack *pack;
	int64_t off;
	uint32_t len;  /* plain bytes */
	uint32_t zlen; /* stored bytes; == len: stored plain */
};

/* Open addressing by digest_slot() (lib/digest_slot.h), linear probing, at most half full. */
struct chunk_index {
	struct chunk_ref *slots;
	size_t cap; /* a power of two, or 0 */
	size_t count;
	int64_t plain_bytes; /* sum of len */
};

struct snap_rec {
	char id[NAME_LEN_MAX + 1];
	struct pack **packs;
	size_t npacks;
	int64_t size_bytes;
	int64_t stored_bytes;
	int64_t manifest_bytes;
	uint64_t seq; /* st->seq when it was recorded: see store_refresh() */
	bool cached;  /* under lock: a row of <state>/store-records.db holds it (store_records.c) */
};

struct inflight {
	char id[NAME_LEN_MAX + 1];
	struct pack **pinned; /* packs of other snapshots whose chunks this put uses */
	size_t npinned, cap;
	struct inflight *next;
};

struct store_limits {
	size_t index_chunks; /* STORE_INDEX_CHUNKS_MAX */
	size_t packs;	     /* STORE_PACKS_MAX */
	size_t pack_refs;    /* STORE_PACK_REFS_MAX */
};

struct store {
	struct objstore *os;
	struct store_limits limits;
	EVP_MD *sha256; /* fetched once: an implicit fetch per digest costs a lock */
	unsigned workers;
	pthread_mutex_t lock;	/* everything below */
	pthread_cond_t checked; /* some pack's check ended (with lock) */
	struct pack **packs;
	size_t npacks, packs_cap;
	size_t *pack_slots; /* packs by name (store_snaps.c): a position + 1, 0 when empty */
	size_t pack_slots_cap;
	struct chunk_index index;
	struct snap_rec *snaps;
	size_t nsnaps, snaps_cap;
	size_t *snap_slots; /* snaps by id (store_snaps.c): a position + 1, 0 when empty */
	size_t snap_slots_cap;
	struct inflight *inflight;
	size_t nrefs;	   /* the records' npacks, summed */
	uint64_t seq;	   /* counts records added */
	int64_t condemned; /* packs the last collection pass left condemned */
	int64_t grace_ms;  /* see store_set_grace() */
	/*
	 * Held by store_refresh() and the collection (store_gc.c): one at a
	 * time, so neither frees a pack the other is reading. Taken before
	 * st->lock, never while holding it.
	 */
	pthread_mutex_t sync_lock;
	pthread_mutex_t gc_lock;  /* one collection pass at a time; taken before sync_lock */
	struct marker_seen *seen; /* under gc_lock: store_gc.c */
	size_t nseen, seen_cap;
	struct strbuf unreadable; /* under sync_lock: "\n"-separated ids already warned about */
	bool index_full;	  /* under lock: STORE_INDEX_CHUNKS_MAX was reached and said */
	int64_t get_store_bytes;  /* under lock: see struct store_stats */
	int64_t get_local_bytes;
	/* The local copy of the records (store_records.c): rdb under sync_lock, the rest under
	 * lock. */
	struct sqlite3 *rdb;	       /* NULL: none (no state directory, or it failed) */
	struct sqlite3_stmt *rdb_find; /* a row by id */
	struct sqlite3_stmt *rdb_idx;  /* a pack index by name */
	struct strbuf idx_written;     /* under lock: name NUL, length (size_t), bytes; for each */
	size_t idx_rows;	       /* pack indexes kept (about: pruned in bulk) */
	struct strbuf forgotten;       /* ids of saved records forgotten since the last save */
	bool records_rescan;	       /* the next save drops every row without a record */
	bool records_warned;	       /* under sync_lock: a failed save was said */
};

/*
 * Pack index objects (packs/<id>/<seq>.idx, store_index.c encodes and
 * decodes them): a header, one entry per chunk of the pack, in the order the
 * chunks were written, and a SHA-256 of all before it. Every integer is
 * little-endian.
 *
 *   Header (PACK_IDX_HEADER, 16 bytes)
 *   offset  size  field
 *        0     8  magic: "SNAPFSPI" (PACK_IDX_MAGIC, no NUL)
 *        8     4  version: 1 (PACK_IDX_VERSION)
 *       12     4  count: entries that follow, at most PACK_IDX_ENTRIES_MAX
 *
 *   Entry (PACK_IDX_ENTRY, 48 bytes), at 16 + 48 * i
 *   offset  size  field
 *        0    32  SHA-256 of the chunk's plain bytes
 *       32     8  off: where its stored bytes start in the .pack object
 *       40     4  len: plain bytes, 1 to MANIFEST_CHUNK_MAX
 *       44     4  zlen: stored bytes; == len: stored plain, else zstd
 *
 *   Trailer, at 16 + 48 * count
 *   offset  size  field
 *        0    32  SHA-256 of every byte before it
 *
 * The object is exactly 16 + 48 * count + 32 bytes long; a decode rejects
 * any other length, a bad sum, and entries past PACK_BYTES_MAX.
 */
#define PACK_IDX_MAGIC "SNAPFSPI"
#define PACK_IDX_VERSION 1u
#define PACK_IDX_HEADER 16 /* magic, version, count */
#define PACK_IDX_ENTRY 48
struct pack_idx_entry {
	unsigned char sha256[SHA256_LEN];
	uint64_t off; /* little-endian, as every field */
	uint32_t len;
	uint32_t zlen;
};

bool store_id_ok(const char *id);
int store_check_id(const char *id, struct err *e);
void store_manifest_key(const char *id, char key[OBJ_KEY_MAX]);
/* store_check_id(), then @id's manifest key. */
int store_checked_key(const char *id, char key[OBJ_KEY_MAX], struct err *e);
/* "packs/<name>.pack" or ".idx". */
void store_pack_key(const char *name, const char *ext, char key[OBJ_KEY_MAX]);
/* Re-raise an objstore failure with "snapshot ID: " before its message. */
int store_wrap(struct err *e, const char *id, int rc, const struct err *inner);

/* The chunk index (store_index.c). add: -ENOMEM; a hash already there is left as it is (returns 0).
 */
const struct chunk_ref *chunk_index_find(const struct chunk_index *ix,
					 const unsigned char sha[SHA256_LEN]);
int chunk_index_add(struct chunk_index *ix, const struct chunk_ref *ref);
/* Room for @more chunks beyond the count, and one more, without a rebuild later; -ENOMEM. */
int chunk_index_reserve(struct chunk_index *ix, size_t more);
void chunk_index_free(struct chunk_index *ix);
/* Rebuild @ix without the chunks of packs no longer indexed; -ENOMEM leaves it as it was. */
int chunk_index_drop_unindexed(struct chunk_index *ix);

/* The pack index object of @n entries (caller frees *out), and its parse. */
int pack_idx_encode(const struct store *st, const struct pack_idx_entry *ents, size_t n, char **out,
		    size_t *len);
int pack_idx_decode(const struct store *st, const char *data, size_t len,
		    struct pack_idx_entry **ents, size_t *n);

/* SHA-256 of @len bytes with a context the caller keeps; false on a libcrypto failure. */
bool store_sha256(const struct store *st, EVP_MD_CTX *ctx, const void *data, size_t len,
		  unsigned char out[SHA256_LEN]);

/* Run fn(arg, worker) on @n threads (the caller's is worker 0); returns when all did. */
void store_parallel(unsigned n, void (*fn)(void *arg, unsigned worker), void *arg);

/* Under st->lock: the pack named @name, or NULL. */
struct pack *store_find_pack(struct store *st, const char *name);
/* Under st->lock: the pack @name, added (unindexed, no refs) if it is new; NULL: ENOMEM. */
struct pack *store_pack_get_or_add(struct store *st, const char *name);
/* Under st->lock: the record of snapshot @id, or NULL. */
struct snap_rec *store_find_snap(struct store *st, const char *id);

/*
 * Under sync_lock (store_refresh.c): make the records follow the manifests
 * listed now. *@complete: every manifest listed could be read. @listed (if
 * not NULL, empty) receives the ids listed, sealed.
 */
int store_refresh_locked(struct store *st, struct strset *listed, bool *complete, struct err *e);

/*
 * The local copy of the records (store_records.c). open: from
 * <state_dir>/store-records.db, nothing if @state_dir is NULL or it fails
 * (warned). find (under sync_lock): the saved record of @id whose manifest
 * is @manifest_bytes long, as a manifest with packs and sizes only (the
 * caller frees it): 1, 0 for none, -ENOMEM. note_forgotten (under lock):
 * @rec leaves the records. save (under sync_lock, after a refresh, or at
 * close): the rows follow the records; @listed: a listing that succeeded
 * just made them, so rows without a record may go.
 */
void store_records_open(struct store *st, const char *state_dir);
void store_records_close(struct store *st);
int store_records_find(struct store *st, const char *id, int64_t manifest_bytes,
		       struct manifest *m);
void store_records_note_forgotten(struct store *st, const struct snap_rec *rec);
/* Under st->lock: store_forget_snap(), noting the record's leaving (note_forgotten) first. */
bool store_records_forget(struct store *st, const char *id);
void store_records_save(struct store *st, bool listed);
/*
 * Under sync_lock: the kept index object of pack @name (*@data malloc'd,
 * the caller verifies it): 1, 0 for none, -ENOMEM; add keeps one read from
 * the objstore (verified); batch: the adds between a begin and an end are
 * one transaction.
 */
int store_records_idx_find(struct store *st, const char *name, char **data, size_t *len);
void store_records_idx_add(struct store *st, const char *name, const char *data, size_t len);
void store_records_batch(struct store *st, bool begin);
/* A put wrote the index object of pack @name: kept at the next save (takes st->lock). */
void store_records_idx_written(struct store *st, const char *name, const char *data, size_t len);
/* The manifests listed, each with the length of its object (store.c). */
int store_list_manifests(struct store *st, int (*fn)(const char *id, int64_t size, void *arg),
			 void *arg, struct err *e);

/* Collect if some pack lost its last user (store_gc.c): after a delete or a put. */
void store_gc(struct store *st);
/*
 * For a put, when it starts (store_gc.c, rule 3): the names of the packs
 * trash/ condemns, into @names (empty; sealed on return), flagged in the
 * records too. Nothing when the grace period is 0.
 */
int store_list_condemned(struct store *st, struct strset *names, struct err *e);
/*
 * For a put about to write its manifest (rule 4): 0, or -ETIMEDOUT if more
 * than 3/4 of the grace period passed since @since_ms (mono_ms()).
 */
int store_put_deadline(struct store *st, const char *id, int64_t since_ms, struct err *e);

/*
 * The chunks of a get's snapshot that its donors (local images, struct
 * store_donor) hold: SHA-256 -> a donor file and the chunk's offset in it.
 * Built from the donors' manifests (store_donor.c) before the get plans its
 * jobs; a chunk read from a donor is still verified like any other.
 */
struct donor_ref {
	const struct manifest_chunk *chunk; /* a wanted chunk (the key); NULL: an empty slot */
	int fd;				    /* a donor file that holds it, or -1: none does */
	int64_t off;			    /* where in that file */
};

/* Open addressing by digest_slot() (lib/digest_slot.h), linear probing, at most half full. */
struct donor_map {
	struct donor_ref *slots;
	size_t cap; /* a power of two, or 0: no donors */
	int *fds;   /* the donor files opened, closed by donor_map_free() */
	size_t nfds;
};

/*
 * Find the chunks of @want (snapshot @id) that @donors hold. Best effort: a
 * donor whose manifest or files cannot be read adds nothing, and without
 * memory the map stays empty. Returns the plain bytes found.
 */
int64_t donor_map_build(struct donor_map *dm, const struct manifest *want,
			const struct store_donor *donors, size_t n, const char *id);
/* The donor copy of the chunk of hash @sha, or NULL. */
const struct donor_ref *donor_map_find(const struct donor_map *dm,
				       const unsigned char sha[SHA256_LEN]);
void donor_map_free(struct donor_map *dm);

/* Under st->lock: the put of @id in flight in this process, or NULL. */
struct inflight *store_find_inflight(struct store *st, const char *id);
/* Under st->lock: register a put of @id; NULL (-ENOMEM) or -EBUSY if one is in flight. */
int store_inflight_begin(struct store *st, const char *id, struct inflight **out);
/* Under st->lock: whether @fl pinned @p. */
bool store_inflight_pinned(const struct inflight *fl, const struct pack *p);
/* Under st->lock: pin @p for @fl once; -ENOMEM. */
int store_inflight_pin(struct inflight *fl, struct pack *p);
/* Under st->lock: unpin all of @fl's packs, unlink and free @fl. */
void store_inflight_end(struct store *st, struct inflight *fl);

/* Under st->lock: room for @packs more packs, one more snapshot, @chunks more chunks. */
int store_reserve(struct store *st, size_t packs, size_t chunks);
/* Under st->lock: add @p (refs 0, pins 0) to the store's packs. -ENOMEM. */
int store_add_pack(struct store *st, struct pack *p);
/* Under st->lock: room in the packs' index for @more packs; -ENOMEM. */
int store_packs_reserve(struct store *st, size_t more);
/* Under st->lock: take @p out of the store's packs (the caller frees it). */
void store_remove_pack(struct store *st, struct pack *p);
/* Under st->lock: room for one more record of a manifest; -ENOMEM. */
int store_snaps_reserve(struct store *st);
/* Under st->lock: drop the record of @id, its packs lose a ref; false if there was none. */
bool store_forget_snap(struct store *st, const char *id);
/* Under st->lock: record manifest @rec (takes its packs array, sets its seq), refs++ on each pack.
 */
int store_add_snap(struct store *st, struct snap_rec *rec);

/*
 * A put in flight (store_put*.c only). store_put.c's thread owns struct put.
 * The workers (struct pool) write only their struct work and its room in the
 * batch's arena, use cctx[] and md[] by their worker number, and read
 * put->local under local_lock and the store's index under st->lock; a
 * batch's next and done are under pool.lock. The flusher thread writes the
 * pack handed to it, and struct flusher's fields under flusher.lock.
 */
struct work {
	const unsigned char *data;
	size_t len;
	size_t zoff; /* where its compressed bytes go in the arena */
	size_t zlen; /* compressed length; == len: stored plain */
	bool zero;
	bool found; /* stored already: see ref */
	struct chunk_ref ref;
	unsigned char sha256[SHA256_LEN];
	int rc;
};

/* A batch: cut by this thread, processed by the workers, committed in order. */
struct batch {
	struct work *w;
	size_t n;
	unsigned char *arena; /* compressed chunks */
	size_t next;	      /* under pool.lock: the next chunk a worker takes */
	size_t done;	      /* under pool.lock: chunks processed */
};

struct pool_thread {
	pthread_t tid;
	struct put *put;
	unsigned worker;
};

struct pool {
	struct pool_thread threads[STORE_WORKERS_MAX];
	unsigned n; /* started */
	pthread_mutex_t lock;
	pthread_cond_t work;	/* a batch was queued, or stop */
	pthread_cond_t done;	/* a batch is done */
	struct batch *queue[2]; /* oldest first; a batch leaves once done */
	size_t nqueued;
	bool stop;
};

/* A pack being filled, then written by the flusher. */
struct pack_out {
	struct pack *pack;
	char *data;
	size_t len;
	struct pack_idx_entry *ents;
	size_t nents, cap;
};

struct flusher {
	pthread_t tid;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct pack_out *pending; /* handed over and not written yet */
	char *spare[2];		  /* pack buffers to reuse */
	size_t nspare;
	bool stop;
	int rc; /* the first failure, with err */
	struct err err;
	struct cancel *cancel; /* the put's thread's token (lib/cancel.h), bound by the flusher */
};

struct progress {
	store_progress_fn fn; /* may be NULL */
	void *arg;
	int64_t done, total;
};

struct put {
	struct store *st;
	const char *id;
	struct inflight *fl;
	struct chunk_index local;   /* chunks in this put's own packs */
	pthread_mutex_t local_lock; /* workers read local while this thread adds to it */
	struct pack **own;	    /* this put's packs, in order */
	size_t nown, own_cap;
	struct pack **mpacks; /* the manifest's pack list */
	size_t nmpacks, mpacks_cap, last_mpack;
	struct manifest_file *files;
	size_t nfiles, chunks_cap;
	struct pack_out *out; /* being filled */
	struct flusher flusher;
	ZSTD_CCtx *cctx[STORE_WORKERS_MAX];
	EVP_MD_CTX *md[STORE_WORKERS_MAX];
	struct batch batches[2];
	struct pool pool;
	struct progress progress;
	int64_t size_bytes, pack_bytes;
	int64_t trash_listed_ms; /* mono_ms() when condemned packs were listed: store_gc.c */
	struct strset condemned; /* their names: never used by this put */
};

/* store_put_reuse.c: whether chunk @w is stored already (w->found, w->ref); -ENOMEM. */
int put_look_up(struct put *put, struct work *w, unsigned worker);
/* store_put_pack.c: the walk in order, one processed chunk into the manifest and the packs. */
int put_commit_chunk(struct put *put, const struct batch *b, struct work *w, struct err *e);
/* Hand the filled pack to the flusher, once it wrote the one before. */
int put_flush_out(struct put *put, struct err *e);
/* Wait until every handed-over pack is written, end the flusher; its first failure. */
int put_flusher_finish(struct put *put, struct err *e);
void put_pack_out_free(struct pack_out *o);
/* store_put_manifest.c: -EEXIST if the store has a manifest for @id already. */
int put_check_absent(struct store *st, const char *id, struct err *e);
/* Write the manifest; on failure take the snapshot back out of the store's records. */
int put_manifest(struct put *put, const cJSON *meta, struct store_put_result *res, struct err *e);

#endif
