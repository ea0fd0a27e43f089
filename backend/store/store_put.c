/*
 * store_put.c - store_put_snapshot(): chunk, hash, deduplicate, compress,
 * pack, then the manifest.
 *
 * Three stages run at once:
 *   - this thread maps each file and cuts it into chunks
 *     (backend/store/chunker.h), a batch at a time, two batches in flight;
 *   - one worker thread per core takes the chunks of the oldest batch in
 *     turn: zero test, SHA-256, look-up in the store's index (a hit pins its
 *     pack for this put) and in this put's own chunks, zstd if it is new;
 *   - this thread then walks each processed batch in order: zero runs and
 *     known chunks become references, new chunks are appended to the pack
 *     being filled, and a full pack goes to a flusher thread that writes it
 *     and its index; at most one pack waits for it.
 *
 * The look-up and what a put trusts of the bucket are in store_put_reuse.c,
 * the walk in order and the packs in store_put_pack.c, the manifest in
 * store_put_manifest.c; struct put, shared by the four, is in
 * store_internal.h.
 */
#include "backend/store/store_internal.h"

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

#include "backend/store/chunker.h"
#include "lib/strset.h"

#define BATCH_BYTES (8u << 20)
#define BATCH_CHUNKS 1024u
/* zstd's fastest level: as small as levels 2-5 on checkpoints, at twice the speed. */
#define ZSTD_LEVEL 1
#define ARENA_BYTES (BATCH_BYTES + CHUNK_MAX + (1u << 20))

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

/* --- the worker phase ------------------------------------------------------- */

static bool all_zero(const unsigned char *p, size_t len)
{
	return p[0] == 0 && memcmp(p, p + 1, len - 1) == 0;
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
	w->rc = put_look_up(put, w, worker);
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
		int rc = put_commit_chunk(put, b, &b->w[i], e);
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

/* --- the end ---------------------------------------------------------------- */

/* Undo a failed put: the packs it wrote, unless register_put() gave them to the store. */
static void abort_put(struct put *put)
{
	char key[OBJ_KEY_MAX];
	struct err e = {0};
	put_flusher_finish(put, NULL);
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
	put_pack_out_free(put->out);
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
		rc = put_flush_out(put, e);
	int frc = put_flusher_finish(put, rc == 0 ? e : NULL);
	return rc < 0 ? rc : frc;
}

int store_put_snapshot(struct store *st, const char *id, const char *dir, const cJSON *meta,
		       store_progress_fn progress, void *arg, struct store_put_result *res,
		       struct err *e)
{
	struct put put = {.st = st, .id = id, .progress = {.fn = progress, .arg = arg}};
	int rc = store_check_id(id, e);
	if (rc == 0)
		rc = put_check_absent(st, id, e);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&st->lock);
	rc = store_inflight_begin(st, id, &put.fl);
	pthread_mutex_unlock(&st->lock);
	if (rc == -EBUSY)
		return err_set(e, EBUSY, "snapshot %s is being stored already", id);
	if (rc < 0)
		return err_set(e, -rc, "cannot store snapshot %s: %s", id,
			       rc == -ENOMEM ? "out of memory" : strerror(-rc));
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
