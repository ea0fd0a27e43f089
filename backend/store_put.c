/*
 * store_put.c - store_put_snapshot(): chunk, hash, deduplicate, compress,
 * pack, then the manifest.
 *
 * Three stages run at once:
 *   - this thread maps each file and cuts it into chunks
 *     (backend/chunker.h), a batch at a time, two batches in flight;
 *   - one worker thread per core takes the chunks of the oldest batch in
 *     turn: zero test, SHA-256, look-up in the store's index (a hit pins its
 *     pack for this put) and in this put's own chunks, zstd if it is new;
 *   - this thread then walks each processed batch in order: zero runs and
 *     known chunks become references, new chunks are appended to the pack
 *     being filled, and a full pack goes to a flusher thread that writes it
 *     and its index; at most one pack waits for it.
 * The pack buffers are reused, so their pages are faulted in once.
 *
 * Reuse trusts nothing of the bucket it has not checked (docs/design.md,
 * "Untrusted input"). A chunk found in the store's index is reused only if
 * the index gives it the chunk's own length, and only from a pack this
 * process has checked: the first time a put would reuse a chunk of a pack,
 * it reads that chunk's stored bytes back with one ranged read, decompresses
 * and hashes them, and reads the pack's last byte (the object is as long as
 * its index says). A pack that passes is trusted for the rest of the
 * process's life; one that fails, or whose index lies about a length, is
 * never used again (a warning names it) and the put stores the chunk itself.
 *
 * Every pack is checked, those this process wrote too: a pack in the bucket
 * is what the bucket holds now, not what its put wrote (anyone who can write
 * the bucket can overwrite it), and after a restart nothing in the bucket
 * tells this host's packs from others' (names and manifests are written by
 * whoever writes). A restart only makes each pack cost one check again.
 *
 * One chunk and the length are enough for what dedup must prevent: building
 * new snapshots on a pack that is gone, truncated, overwritten, or not the
 * pack its index describes, each of which the check catches. A pack damaged
 * in one chunk other than the one read, or changed after its check, is not
 * caught here; the get catches it (every chunk is verified before it is
 * written) and fails with EIO naming it. Reading every reused chunk would
 * cost a download of all a put deduplicates, and still not protect a
 * snapshot from a writer who overwrites its packs after the put.
 */
#include "backend/store_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "backend/chunker.h"
#include "lib/strset.h"

/* A pack is written once it holds this much: a GiB of new data is 32 packs and 32 indexes. */
#define PACK_TARGET (32u << 20)
#define BATCH_BYTES (8u << 20)
#define BATCH_CHUNKS 1024u
/* Packs of other snapshots one put reuses chunks of, at most: see reusable(). */
#define REUSE_PACKS_MAX (MANIFEST_PACKS_MAX / 2)
/* zstd's fastest level: as small as levels 2-5 on checkpoints, at twice the speed. */
#define ZSTD_LEVEL 1
#define ARENA_BYTES (BATCH_BYTES + CHUNK_MAX + (1u << 20))

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

static void report(struct progress *p, int64_t add)
{
	p->done += add;
	if (p->fn)
		p->fn(p->arg, p->done, p->total);
}

/* --- the directory ---------------------------------------------------------- */

static void free_namelist(struct dirent **names, int n)
{
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* Accept one entry of a snapshot directory: regular files only, with names keys can hold. */
static int scan_entry(int dfd, const char *dir, const char *name, struct manifest_file *f,
		      int64_t *total, struct err *e)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return err_set(e, EIO, "cannot stat %s/%s: %s", dir, name, strerror(errno));
	if (!S_ISREG(st.st_mode)) {
		warning("snapshot store: skipping %s/%s: not a regular file", dir, name);
		return 0;
	}
	if (!manifest_name_ok(name))
		return err_set(e, EINVAL, "cannot store %s/%s: unsupported file name", dir, name);
	memcpy(f->name, name, strlen(name) + 1);
	*total += st.st_size;
	return 1;
}

/* The regular files of @dir, sorted by name, and their total size (for progress). */
static int scan_dir(const char *dir, struct put *put, struct err *e)
{
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent **names = NULL;
	int n = dfd < 0 ? -1 : scandir(dir, &names, NULL, alphasort);
	if (n < 0)
		return err_set(e, EIO, "cannot read %s: %s", dir, strerror(errno));
	int rc = 0;
	put->files = calloc((size_t)n + 1, sizeof(*put->files));
	if (!put->files)
		rc = err_set(e, ENOMEM, "out of memory");
	for (int i = 0; rc == 0 && i < n; i++) {
		if (!strcmp(names[i]->d_name, ".") || !strcmp(names[i]->d_name, ".."))
			continue;
		rc = scan_entry(dfd, dir, names[i]->d_name, &put->files[put->nfiles],
				&put->progress.total, e);
		if (rc > 0) {
			put->nfiles++;
			rc = 0;
		}
	}
	free_namelist(names, n);
	if (rc == 0 && put->nfiles > MANIFEST_FILES_MAX)
		rc = err_set(e, EINVAL, "cannot store %s: more than %d files", dir,
			     MANIFEST_FILES_MAX);
	return rc;
}

/* --- the flusher ------------------------------------------------------------ */

static void pack_out_free(struct pack_out *o)
{
	if (!o)
		return;
	free(o->data);
	free(o->ents);
	free(o);
}

/* Write the pack, then its index: a pack without an index is never used. */
static int write_pack(struct put *put, struct pack_out *o, struct err *e)
{
	char key[OBJ_KEY_MAX];
	_cleanup_free_ char *idx = NULL;
	size_t idx_len = 0;
	struct err inner = {0};
	store_pack_key(o->pack->name, "pack", key);
	int rc = objstore_put_buf(put->st->os, key, o->data, o->len, &inner);
	if (rc == 0) {
		rc = pack_idx_encode(put->st, o->ents, o->nents, &idx, &idx_len);
		if (rc < 0)
			err_set(&inner, -rc, "cannot encode the index of pack %s", o->pack->name);
	}
	store_pack_key(o->pack->name, "idx", key);
	if (rc == 0)
		rc = objstore_put_buf(put->st->os, key, idx, idx_len, &inner);
	o->pack->bytes = (int64_t)o->len;
	o->pack->idx_bytes = (int64_t)idx_len;
	return rc < 0 ? store_wrap(e, put->id, rc, &inner) : 0;
}

static void *flusher_main(void *arg)
{
	struct put *put = arg;
	struct flusher *f = &put->flusher;
	pthread_mutex_lock(&f->lock);
	for (;;) {
		while (!f->pending && !f->stop)
			pthread_cond_wait(&f->cond, &f->lock);
		if (!f->pending)
			break;
		struct pack_out *o = f->pending;
		struct err e = {0};
		pthread_mutex_unlock(&f->lock);
		int rc = f->rc == 0 ? write_pack(put, o, &e) : 0;
		pthread_mutex_lock(&f->lock);
		if (f->nspare < ARRAY_SIZE(f->spare))
			f->spare[f->nspare++] = steal_ptr(o->data);
		pack_out_free(o);
		if (rc < 0 && f->rc == 0) {
			f->rc = rc;
			f->err = e;
		}
		f->pending = NULL;
		pthread_cond_broadcast(&f->cond);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

/* Hand the filled pack to the flusher, once it wrote the one before. */
static int flush_out(struct put *put, struct err *e)
{
	struct flusher *f = &put->flusher;
	struct pack_out *o = steal_ptr(put->out);
	if (!f->started) {
		int rc = pthread_create(&f->tid, NULL, flusher_main, put);
		if (rc != 0) {
			pack_out_free(o);
			return err_set(e, rc, "cannot start a thread: %s", strerror(rc));
		}
		f->started = true;
	}
	pthread_mutex_lock(&f->lock);
	while (f->pending)
		pthread_cond_wait(&f->cond, &f->lock);
	f->pending = o;
	pthread_cond_broadcast(&f->cond);
	int rc = f->rc;
	if (rc < 0)
		*e = f->err;
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/* Wait until every handed-over pack is written, end the flusher; its first failure. */
static int flusher_finish(struct put *put, struct err *e)
{
	struct flusher *f = &put->flusher;
	if (!f->started)
		return 0;
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	pthread_join(f->tid, NULL);
	f->started = false;
	if (f->rc < 0 && e)
		*e = f->err;
	return f->rc;
}

/* --- the worker phase ------------------------------------------------------- */

static bool all_zero(const unsigned char *p, size_t len)
{
	return p[0] == 0 && memcmp(p, p + 1, len - 1) == 0;
}

/* Under st->lock: never reuse chunks of @p again, and say why once. */
static void pack_bad(struct pack *p, const char *why)
{
	if (p->check != PACK_BAD)
		warning("store: not deduplicating against pack %s: %s", p->name, why);
	p->check = PACK_BAD;
}

/*
 * Under st->lock: may @w reuse stored chunk @r? Not if its index gives it
 * another length (then the pack is bad), nor, once the put uses chunks of
 * REUSE_PACKS_MAX packs, from a further one: a manifest lists at most
 * MANIFEST_PACKS_MAX packs, and the put's own need room too.
 */
static bool reusable(struct put *put, const struct chunk_ref *r, const struct work *w)
{
	char why[128];
	if (!pack_usable(r->pack) || strset_has(&put->condemned, r->pack->name))
		return false;
	if (r->len != w->len) {
		snprintf(why, sizeof(why), "its index gives a chunk %u bytes where it has %zu",
			 r->len, w->len);
		pack_bad(r->pack, why);
		return false;
	}
	return put->fl->npinned < REUSE_PACKS_MAX || store_inflight_pinned(put->fl, r->pack);
}

/*
 * Chunk @w's stored copy at w->ref, read back: 0 if it verifies and its pack
 * has its last byte (@pack_bytes long); -EIO (with @why) if not, -ENOMEM.
 */
static int read_back(struct put *put, const struct work *w, int64_t pack_bytes, unsigned worker,
		     char *why, size_t why_len)
{
	const struct chunk_ref *r = &w->ref;
	char key[OBJ_KEY_MAX];
	unsigned char sha[SHA256_LEN], last;
	struct err e = {0};
	_cleanup_free_ unsigned char *stored = malloc(r->zlen);
	_cleanup_free_ unsigned char *plain = malloc(r->len);
	if (!stored || !plain)
		return -ENOMEM;
	store_pack_key(r->pack->name, "pack", key);
	int rc = objstore_get_range(put->st->os, key, r->off, r->zlen, stored, &e);
	if (rc == 0 && r->off + r->zlen < pack_bytes)
		rc = objstore_get_range(put->st->os, key, pack_bytes - 1, 1, &last, &e);
	if (rc < 0) {
		snprintf(why, why_len, "it cannot be read: %.400s", e.msg);
		return -EIO;
	}
	size_t n = r->len;
	if (r->zlen != r->len)
		n = ZSTD_decompress(plain, r->len, stored, r->zlen);
	else
		memcpy(plain, stored, r->len);
	if (ZSTD_isError(n) || n != r->len ||
	    !store_sha256(put->st, put->md[worker], plain, r->len, sha) ||
	    memcmp(sha, w->sha256, SHA256_LEN)) {
		char hex[SHA256_HEX_LEN + 1];
		sha256_to_hex(w->sha256, hex);
		snprintf(why, why_len, "chunk %s at byte %lld does not verify", hex,
			 (long long)r->off);
		return -EIO;
	}
	return 0;
}

/*
 * Under st->lock: wait out another worker's check of @p; then whether this
 * one must check it (it is PACK_CHECKING now, for this worker).
 */
static bool claim_check(struct store *st, struct pack *p)
{
	while (p->check == PACK_CHECKING)
		pthread_cond_wait(&st->checked, &st->lock);
	if (p->check != PACK_UNCHECKED)
		return false;
	p->check = PACK_CHECKING;
	return true;
}

/* Check the pack of w->ref, claimed by claim_check(): whether the chunk may be reused. */
static bool check_pack(struct put *put, const struct work *w, int64_t pack_bytes, unsigned worker)
{
	struct pack *p = w->ref.pack;
	char why[ERR_MSG_MAX / 2];
	int rc = read_back(put, w, pack_bytes, worker, why, sizeof(why));
	pthread_mutex_lock(&put->st->lock);
	if (rc == -EIO)
		pack_bad(p, why);
	else if (p->check == PACK_CHECKING) /* not found bad meanwhile */
		p->check = rc == 0 ? PACK_SOUND : PACK_UNCHECKED;
	pthread_cond_broadcast(&put->st->checked);
	pthread_mutex_unlock(&put->st->lock);
	return rc == 0;
}

/*
 * Is the chunk stored already, in a pack a put may use? A hit in the
 * store's index pins its pack for this put; the first hit in a pack not
 * checked yet reads the chunk back (outside the lock) before it is reused.
 */
static int look_up(struct put *put, struct work *w, unsigned worker)
{
	struct store *st = put->st;
	int rc = 0;
	bool check = false;
	int64_t pack_bytes = 0;
	pthread_mutex_lock(&st->lock);
	const struct chunk_ref *r = chunk_index_find(&st->index, w->sha256);
	if (r && reusable(put, r, w)) {
		w->ref = *r; /* r may move while claim_check() waits */
		pack_bytes = r->pack->bytes;
		/* Pinned: the pack stays, and its name with it. */
		rc = store_inflight_pin(put->fl, w->ref.pack);
		check = rc == 0 && claim_check(st, w->ref.pack);
		w->found = rc < 0 || w->ref.pack->check != PACK_BAD;
	}
	pthread_mutex_unlock(&st->lock);
	if (check)
		w->found = check_pack(put, w, pack_bytes, worker);
	if (w->found)
		return rc;
	pthread_mutex_lock(&put->local_lock);
	r = chunk_index_find(&put->local, w->sha256);
	if (r) {
		w->ref = *r;
		w->found = true;
	}
	pthread_mutex_unlock(&put->local_lock);
	return rc;
}

static void compress_chunk(struct put *put, struct batch *b, struct work *w, unsigned worker)
{
	size_t cap = ZSTD_compressBound(w->len);
	size_t n = ZSTD_compressCCtx(put->cctx[worker], b->arena + w->zoff, cap, w->data, w->len,
				     ZSTD_LEVEL);
	/* Incompressible (random pages): stored plain, which also reads back fastest. */
	w->zlen = (ZSTD_isError(n) || n >= w->len) ? w->len : n;
}

static void process_chunk(struct put *put, struct batch *b, struct work *w, unsigned worker)
{
	if (all_zero(w->data, w->len)) {
		w->zero = true;
		return;
	}
	if (!store_sha256(put->st, put->md[worker], w->data, w->len, w->sha256)) {
		w->rc = -EIO;
		return;
	}
	w->rc = look_up(put, w, worker);
	if (w->rc == 0 && !w->found)
		compress_chunk(put, b, w, worker);
}

/* Under pool.lock: the oldest queued batch with chunks left to take, or NULL. */
static struct batch *pool_next(struct pool *pool)
{
	for (size_t i = 0; i < pool->nqueued; i++) {
		if (pool->queue[i]->next < pool->queue[i]->n)
			return pool->queue[i];
	}
	return NULL;
}

/* Under pool.lock: one more chunk of @b done; the last one takes @b off the queue. */
static void chunk_done(struct pool *pool, struct batch *b)
{
	if (++b->done < b->n)
		return;
	for (size_t i = 0; i < pool->nqueued; i++) {
		if (pool->queue[i] != b)
			continue;
		memmove(&pool->queue[i], &pool->queue[i + 1],
			(pool->nqueued - i - 1) * sizeof(pool->queue[0]));
		pool->nqueued--;
		break;
	}
	pthread_cond_broadcast(&pool->done);
}

/*
 * Chunks are taken and counted under the lock (a few thousand a GiB): a
 * worker never looks at a batch after its last chunk is done, when this
 * thread may be cutting the next batch into it.
 */
static void *pool_main(void *arg)
{
	struct pool_thread *t = arg;
	struct pool *pool = &t->put->pool;
	struct batch *b = NULL;
	pthread_mutex_lock(&pool->lock);
	for (;;) {
		if (b)
			chunk_done(pool, b);
		b = pool_next(pool);
		while (!b && !pool->stop) {
			pthread_cond_wait(&pool->work, &pool->lock);
			b = pool_next(pool);
		}
		if (!b)
			break;
		struct work *w = &b->w[b->next++];
		pthread_mutex_unlock(&pool->lock);
		process_chunk(t->put, b, w, t->worker);
		pthread_mutex_lock(&pool->lock);
	}
	pthread_mutex_unlock(&pool->lock);
	return NULL;
}

static void pool_submit(struct pool *pool, struct batch *b)
{
	pthread_mutex_lock(&pool->lock);
	pool->queue[pool->nqueued++] = b;
	pthread_cond_broadcast(&pool->work);
	pthread_mutex_unlock(&pool->lock);
}

static void pool_wait(struct pool *pool, struct batch *b)
{
	pthread_mutex_lock(&pool->lock);
	while (b->done < b->n)
		pthread_cond_wait(&pool->done, &pool->lock);
	pthread_mutex_unlock(&pool->lock);
}

static int pool_start(struct put *put, struct err *e)
{
	struct pool *pool = &put->pool;
	for (unsigned i = 0; i < put->st->workers; i++) {
		struct pool_thread *t = &pool->threads[pool->n];
		*t = (struct pool_thread){.put = put, .worker = i};
		if (pthread_create(&t->tid, NULL, pool_main, t) != 0)
			break;
		pool->n++;
	}
	return pool->n > 0 ? 0 : err_set(e, EAGAIN, "cannot start the store's threads");
}

static void pool_stop(struct pool *pool)
{
	pthread_mutex_lock(&pool->lock);
	pool->stop = true;
	pthread_cond_broadcast(&pool->work);
	pthread_mutex_unlock(&pool->lock);
	for (unsigned i = 0; i < pool->n; i++)
		pthread_join(pool->threads[i].tid, NULL);
	pool->n = 0;
}

/* --- the walk in order ------------------------------------------------------ */

/* The index of @p in the manifest's pack list, added if new; -ENOMEM. */
static int mpack_index(struct put *put, struct pack *p)
{
	if (put->last_mpack < put->nmpacks && put->mpacks[put->last_mpack] == p)
		return (int)put->last_mpack;
	for (size_t i = 0; i < put->nmpacks; i++) {
		if (put->mpacks[i] == p) {
			put->last_mpack = i;
			return (int)i;
		}
	}
	if (STORE_GROW(put->mpacks, put->mpacks_cap, put->nmpacks) < 0)
		return -ENOMEM;
	put->mpacks[put->nmpacks] = p;
	put->last_mpack = put->nmpacks;
	return (int)put->nmpacks++;
}

static int add_chunk(struct put *put, const struct manifest_chunk *c)
{
	struct manifest_file *f = &put->files[put->nfiles - 1];
	struct manifest_chunk *last = f->nchunks ? &f->chunks[f->nchunks - 1] : NULL;
	/* Zero runs merge: a GiB of unused memory is one entry. */
	if (c->pack == MANIFEST_ZERO && last && last->pack == MANIFEST_ZERO) {
		last->len += c->len;
		return 0;
	}
	if (STORE_GROW(f->chunks, put->chunks_cap, f->nchunks) < 0)
		return -ENOMEM;
	f->chunks[f->nchunks++] = *c;
	return 0;
}

static int add_ref(struct put *put, const struct chunk_ref *r)
{
	int idx = mpack_index(put, r->pack);
	if (idx < 0)
		return idx;
	struct manifest_chunk c = {.len = r->len, .pack = idx, .off = r->off, .zlen = r->zlen};
	memcpy(c.sha256, r->sha256, SHA256_LEN);
	return add_chunk(put, &c);
}

static int new_pack_out(struct put *put, struct err *e)
{
	struct pack_out *o = calloc(1, sizeof(*o));
	struct pack *p = calloc(1, sizeof(*p));
	int rc = (o && p) ? STORE_GROW(put->own, put->own_cap, put->nown) : -ENOMEM;
	if (rc == 0) {
		pthread_mutex_lock(&put->flusher.lock);
		if (put->flusher.nspare > 0)
			o->data = put->flusher.spare[--put->flusher.nspare];
		pthread_mutex_unlock(&put->flusher.lock);
		if (!o->data)
			o->data = malloc(PACK_TARGET + ZSTD_COMPRESSBOUND(CHUNK_MAX));
		rc = o->data ? 0 : -ENOMEM;
	}
	if (rc < 0) {
		pack_out_free(o);
		free(p);
		return err_set(e, ENOMEM, "out of memory");
	}
	snprintf(p->name, sizeof(p->name), "%s/%04zu", put->id, put->nown);
	put->own[put->nown++] = p;
	o->pack = p;
	put->out = o;
	return 0;
}

/* Append a new chunk to the pack being filled; a full pack goes to the flusher first. */
static int append_new(struct put *put, const struct batch *b, struct work *w, struct err *e)
{
	int rc = 0;
	if (put->out &&
	    (put->out->len + w->zlen > PACK_TARGET || put->out->nents == PACK_IDX_ENTRIES_MAX))
		rc = flush_out(put, e);
	if (rc == 0 && !put->out)
		rc = new_pack_out(put, e);
	struct pack_out *o = put->out;
	if (rc == 0 && STORE_GROW(o->ents, o->cap, o->nents) < 0)
		rc = err_set(e, ENOMEM, "out of memory");
	if (rc < 0)
		return rc;
	const void *src = w->zlen == w->len ? (const void *)w->data : b->arena + w->zoff;
	memcpy(o->data + o->len, src, w->zlen);
	struct pack_idx_entry *ent = &o->ents[o->nents++];
	memcpy(ent->sha256, w->sha256, SHA256_LEN);
	ent->off = o->len;
	ent->len = (uint32_t)w->len;
	ent->zlen = (uint32_t)w->zlen;
	struct chunk_ref r = {
	    .pack = o->pack, .off = (int64_t)o->len, .len = ent->len, .zlen = ent->zlen};
	memcpy(r.sha256, w->sha256, SHA256_LEN);
	o->len += w->zlen;
	put->pack_bytes += (int64_t)w->zlen;
	pthread_mutex_lock(&put->local_lock);
	rc = chunk_index_add(&put->local, &r);
	pthread_mutex_unlock(&put->local_lock);
	if (rc < 0)
		return err_set(e, ENOMEM, "out of memory");
	return add_ref(put, &r);
}

static int commit_chunk(struct put *put, const struct batch *b, struct work *w, struct err *e)
{
	if (w->rc < 0)
		return err_set(e, -w->rc, "cannot hash a chunk: %s", strerror(-w->rc));
	if (w->zero) {
		struct manifest_chunk c = {.len = (int64_t)w->len, .pack = MANIFEST_ZERO};
		return add_chunk(put, &c) < 0 ? err_set(e, ENOMEM, "out of memory") : 0;
	}
	/* A chunk twice in a batch: the first is in put->local by now (only this thread adds). */
	const struct chunk_ref *r = w->found ? &w->ref : chunk_index_find(&put->local, w->sha256);
	if (r)
		return add_ref(put, r) < 0 ? err_set(e, ENOMEM, "out of memory") : 0;
	return append_new(put, b, w, e);
}

/* --- files ------------------------------------------------------------------ */

/* Cut the next batch from @data[*off..size): as many chunks as the arena holds. */
static void cut_batch(struct batch *b, enum chunk_method method, const unsigned char *data,
		      size_t size, size_t *off)
{
	size_t zoff = 0, bytes = 0;
	b->n = 0;
	while (*off < size && b->n < BATCH_CHUNKS && bytes < BATCH_BYTES) {
		size_t len = chunk_next(method, data + *off, size - *off);
		size_t bound = ZSTD_compressBound(len);
		if (zoff + bound > ARENA_BYTES)
			break;
		b->w[b->n++] = (struct work){.data = data + *off, .len = len, .zoff = zoff};
		zoff += bound;
		bytes += len;
		*off += len;
	}
	b->next = 0;
	b->done = 0;
}

static int commit_batch(struct put *put, const struct batch *b, struct err *e)
{
	int64_t bytes = 0;
	for (size_t i = 0; i < b->n; i++) {
		int rc = commit_chunk(put, b, &b->w[i], e);
		if (rc < 0)
			return rc;
		bytes += (int64_t)b->w[i].len;
	}
	report(&put->progress, bytes);
	return 0;
}

/* Cut batch k + 1 while the workers process batch k, then commit batch k. */
static int put_mapped(struct put *put, enum chunk_method method, const unsigned char *data,
		      size_t size, struct err *e)
{
	struct batch *prev = NULL;
	size_t off = 0, slot = 0;
	int rc = 0;
	while (rc == 0 && (off < size || prev)) {
		struct batch *cur = NULL;
		if (off < size) {
			cur = &put->batches[slot];
			slot ^= 1;
			cut_batch(cur, method, data, size, &off);
			pool_submit(&put->pool, cur);
		}
		if (prev) {
			pool_wait(&put->pool, prev);
			rc = commit_batch(put, prev, e);
		}
		prev = cur;
	}
	/* The workers must be done with the mapping before it goes. */
	if (prev)
		pool_wait(&put->pool, prev);
	return rc;
}

static int put_file(struct put *put, const char *dir, struct manifest_file *f, struct err *e)
{
	char path[PATH_MAX];
	struct stat sb;
	if (xsnprintf(path, sizeof(path), "%s/%s", dir, f->name) < 0)
		return err_set(e, EINVAL, "path %s/%s is too long", dir, f->name);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) < 0)
		return err_set(e, EIO, "cannot open %s: %s", path, strerror(errno));
	f->size = sb.st_size;
	put->size_bytes += f->size;
	put->chunks_cap = 0;
	if (f->size == 0)
		return 0;
	void *map = mmap(NULL, (size_t)f->size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	if (map == MAP_FAILED)
		return err_set(e, EIO, "cannot map %s: %s", path, strerror(errno));
	madvise(map, (size_t)f->size, MADV_SEQUENTIAL);
	/* Populated: one call maps the page cache, not a fault a page in the workers. */
	int rc = put_mapped(put, chunk_method_for(f->name), map, (size_t)f->size, e);
	munmap(map, (size_t)f->size);
	return rc;
}

/* --- the manifest and the end ----------------------------------------------- */

/*
 * The manifest text: its "stored_bytes" counts the manifest itself, so
 * build until its length stops changing (twice, unless a digit is added).
 */
static int build_manifest(struct put *put, const cJSON *meta, char **json, size_t *len,
			  struct err *e)
{
	struct manifest m = {
	    .files = put->files, .nfiles = put->nfiles, .size_bytes = put->size_bytes};
	m.packs = calloc(put->nmpacks + 1, sizeof(*m.packs));
	if (!m.packs)
		return err_set(e, ENOMEM, "out of memory");
	m.npacks = put->nmpacks;
	for (size_t i = 0; i < put->nmpacks; i++)
		memcpy(m.packs[i], put->mpacks[i]->name, sizeof(m.packs[i]));
	int64_t stored = put->pack_bytes;
	for (size_t i = 0; i < put->nown; i++)
		stored += put->own[i]->idx_bytes;
	size_t mlen = 0;
	int rc = 0;
	*json = NULL;
	for (int round = 0; rc == 0 && round < 4; round++) {
		free(*json);
		m.stored_bytes = stored + (int64_t)mlen;
		rc = manifest_build(meta, &m, json, len, e);
		if (rc == 0 && *len == mlen)
			break;
		mlen = *len;
	}
	free(m.packs);
	return rc;
}

/*
 * Under st->lock, before the manifest is written: the store takes this
 * put's packs and chunks and records the snapshot, so that once the
 * manifest is there, nothing can collect its packs. Nothing here can fail
 * half-way: room is reserved first.
 */
static int register_put(struct put *put, int64_t stored, int64_t manifest_len)
{
	struct store *st = put->st;
	struct snap_rec rec = {.npacks = put->nmpacks,
			       .size_bytes = put->size_bytes,
			       .stored_bytes = stored,
			       .manifest_bytes = manifest_len};
	snprintf(rec.id, sizeof(rec.id), "%s", put->id);
	rec.packs = calloc(put->nmpacks + 1, sizeof(*rec.packs));
	if (!rec.packs || store_reserve(st, put->nown, put->local.count) < 0) {
		free(rec.packs);
		return -ENOMEM;
	}
	memcpy(rec.packs, put->mpacks, put->nmpacks * sizeof(*rec.packs));
	for (size_t i = 0; i < put->nown; i++) {
		put->own[i]->indexed = true;
		store_add_pack(st, put->own[i]);
	}
	put->nown = 0; /* the store owns them now */
	int rc =
	    store_add_snap(st, &rec); /* first: a chunk of a used pack replaces a condemned copy */
	for (size_t i = 0; rc == 0 && i < put->local.cap; i++) {
		if (put->local.slots[i].pack)
			chunk_index_add(&st->index, &put->local.slots[i]);
	}
	return rc;
}

/* Undo a failed put: the packs it wrote, unless register_put() gave them to the store. */
static void abort_put(struct put *put)
{
	char key[OBJ_KEY_MAX];
	struct err e = {0};
	flusher_finish(put, NULL);
	for (size_t i = 0; i < put->nown; i++) {
		const char *ext[] = {"idx", "pack"};
		for (size_t j = 0; j < ARRAY_SIZE(ext); j++) {
			store_pack_key(put->own[i]->name, ext[j], key);
			if (objstore_del(put->st->os, key, &e) < 0)
				warning("snapshot %s: leaving %s for store_collect(): %s", put->id,
					key, e.msg);
		}
		free(put->own[i]);
	}
	put->nown = 0;
}

/* Before any chunk is looked up: which packs other hosts condemned (store_gc.c, rule 3). */
static int note_condemned(struct put *put, struct err *e)
{
	struct err inner = {0};
	put->trash_listed_ms = mono_ms();
	int rc = store_list_condemned(put->st, &put->condemned, &inner);
	return rc < 0 ? store_wrap(e, put->id, rc, &inner) : 0;
}

/* Ids are never reused; refusing keeps a put from mixing data with a completed snapshot. */
static int check_absent(struct store *st, const char *id, struct err *e)
{
	char key[OBJ_KEY_MAX];
	store_manifest_key(id, key);
	_cleanup_free_ char *json = NULL;
	struct err inner = {0};
	int rc = objstore_get_buf(st->os, key, &json, NULL, MANIFEST_BYTES_MAX, &inner);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return store_wrap(e, id, rc, &inner);
	return err_set(e, EEXIST, "snapshot %s is already in the store", id);
}

static int put_setup(struct put *put, struct err *e)
{
	pthread_mutex_init(&put->flusher.lock, NULL);
	pthread_cond_init(&put->flusher.cond, NULL);
	pthread_mutex_init(&put->local_lock, NULL);
	pthread_mutex_init(&put->pool.lock, NULL);
	pthread_cond_init(&put->pool.work, NULL);
	pthread_cond_init(&put->pool.done, NULL);
	for (unsigned i = 0; i < put->st->workers; i++) {
		put->cctx[i] = ZSTD_createCCtx();
		put->md[i] = EVP_MD_CTX_new();
		if (!put->cctx[i] || !put->md[i])
			return err_set(e, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < ARRAY_SIZE(put->batches); i++) {
		put->batches[i].arena = malloc(ARENA_BYTES);
		put->batches[i].w = calloc(BATCH_CHUNKS, sizeof(struct work));
		if (!put->batches[i].arena || !put->batches[i].w)
			return err_set(e, ENOMEM, "out of memory");
	}
	return pool_start(put, e);
}

static void put_teardown(struct put *put)
{
	pool_stop(&put->pool);
	for (unsigned i = 0; i < STORE_WORKERS_MAX; i++) {
		ZSTD_freeCCtx(put->cctx[i]);
		EVP_MD_CTX_free(put->md[i]);
	}
	for (size_t i = 0; i < ARRAY_SIZE(put->batches); i++) {
		free(put->batches[i].arena);
		free(put->batches[i].w);
	}
	for (size_t i = 0; put->files && i < put->nfiles; i++)
		free(put->files[i].chunks);
	for (size_t i = 0; i < put->flusher.nspare; i++)
		free(put->flusher.spare[i]);
	pack_out_free(put->out);
	pthread_mutex_destroy(&put->flusher.lock);
	pthread_cond_destroy(&put->flusher.cond);
	pthread_mutex_destroy(&put->local_lock);
	pthread_mutex_destroy(&put->pool.lock);
	pthread_cond_destroy(&put->pool.work);
	pthread_cond_destroy(&put->pool.done);
	chunk_index_free(&put->local);
	strset_release(&put->condemned);
	free(put->files);
	free(put->own);
	free(put->mpacks);
}

/* Every file, then the last pack, then wait until every pack is written. */
static int put_files(struct put *put, const char *dir, struct err *e)
{
	int rc = scan_dir(dir, put, e);
	size_t nfiles = put->nfiles;
	if (rc == 0)
		report(&put->progress, 0);
	/* nfiles counts the files done: add_chunk() appends to the last one. */
	put->nfiles = 0;
	for (size_t i = 0; rc == 0 && i < nfiles; i++) {
		put->nfiles = i + 1;
		rc = put_file(put, dir, &put->files[i], e);
	}
	put->nfiles = nfiles;
	if (rc == 0 && put->out && put->out->len > 0)
		rc = flush_out(put, e);
	int frc = flusher_finish(put, rc == 0 ? e : NULL);
	return rc < 0 ? rc : frc;
}

/* Write the manifest; on failure take the snapshot back out of the store's records. */
static int put_manifest(struct put *put, const cJSON *meta, struct store_put_result *res,
			struct err *e)
{
	struct store *st = put->st;
	_cleanup_free_ char *json = NULL;
	size_t len = 0;
	char key[OBJ_KEY_MAX];
	struct err inner = {0};
	int rc = store_put_deadline(st, put->id, put->trash_listed_ms, e);
	if (rc == 0)
		rc = build_manifest(put, meta, &json, &len, e);
	if (rc < 0)
		return rc;
	int64_t stored = put->pack_bytes + (int64_t)len;
	for (size_t i = 0; i < put->nown; i++)
		stored += put->own[i]->idx_bytes;
	pthread_mutex_lock(&st->lock);
	rc = register_put(put, stored, (int64_t)len);
	pthread_mutex_unlock(&st->lock);
	if (rc < 0)
		return err_set(e, ENOMEM, "out of memory");
	store_manifest_key(put->id, key);
	rc = objstore_put_buf(st->os, key, json, len, &inner);
	if (rc < 0) {
		rc = store_wrap(e, put->id, rc, &inner);
		/* Only once the manifest is surely gone may its packs go. */
		if (objstore_del(st->os, key, &inner) == 0) {
			pthread_mutex_lock(&st->lock);
			store_forget_snap(st, put->id);
			pthread_mutex_unlock(&st->lock);
		}
		return rc;
	}
	/*
	 * A refresh that listed before the manifest was there must not forget
	 * the record once this put is no longer in flight: it is newer now.
	 */
	pthread_mutex_lock(&st->lock);
	struct snap_rec *rec = store_find_snap(st, put->id);
	if (rec)
		rec->seq = ++st->seq;
	pthread_mutex_unlock(&st->lock);
	if (res) {
		res->size_bytes = put->size_bytes;
		res->stored_bytes = stored;
		if (res->manifest)
			*res->manifest = steal_ptr(json);
	}
	return 0;
}

int store_put_snapshot(struct store *st, const char *id, const char *dir, const cJSON *meta,
		       store_progress_fn progress, void *arg, struct store_put_result *res,
		       struct err *e)
{
	struct put put = {.st = st, .id = id, .progress = {.fn = progress, .arg = arg}};
	int rc = store_check_id(id, e);
	if (rc == 0)
		rc = check_absent(st, id, e);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&st->lock);
	rc = store_inflight_begin(st, id, &put.fl);
	pthread_mutex_unlock(&st->lock);
	if (rc < 0)
		return err_set(e, -rc, "snapshot %s is being stored already", id);
	rc = note_condemned(&put, e);
	if (rc == 0)
		rc = put_setup(&put, e);
	if (rc == 0)
		rc = put_files(&put, dir, e);
	if (rc == 0)
		rc = put_manifest(&put, meta, res, e);
	if (rc < 0)
		abort_put(&put);
	pthread_mutex_lock(&st->lock);
	store_inflight_end(st, put.fl);
	pthread_mutex_unlock(&st->lock);
	put_teardown(&put);
	/* Packs whose last user was this put, or a delete while it ran, go now. */
	store_gc(st);
	if (rc == 0) {
		put.progress.total = put.progress.done;
		report(&put.progress, 0);
	}
	return rc;
}
