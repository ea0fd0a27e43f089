/*
 * store_put_pack.c - the walk of a put's processed batches in order
 * (store_put.c): zero runs and known chunks become references in the
 * manifest's files, new chunks are appended to the pack being filled, and
 * a full pack goes to a flusher thread that writes it and its index; at
 * most one pack waits for it. The pack buffers are reused, so their pages
 * are faulted in once.
 */
#include "backend/store/store_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "backend/store/chunker.h"
#include "lib/cancel.h"

/* A pack is written once it holds this much: a GiB of new data is 32 packs and 32 indexes. */
#define PACK_TARGET (32u << 20)

/* --- the flusher ------------------------------------------------------------ */

void put_pack_out_free(struct pack_out *o)
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
	if (rc == 0)
		store_records_idx_written(put->st, o->pack->name, idx, idx_len);
	o->pack->bytes = (int64_t)o->len;
	o->pack->idx_bytes = (int64_t)idx_len;
	return rc < 0 ? store_wrap(e, put->id, rc, &inner) : 0;
}

static void *flusher_main(void *arg)
{
	struct put *put = arg;
	struct flusher *f = &put->flusher;
	cancel_bind(f->cancel);
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
		put_pack_out_free(o);
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
int put_flush_out(struct put *put, struct err *e)
{
	struct flusher *f = &put->flusher;
	struct pack_out *o = steal_ptr(put->out);
	if (!f->started) {
		f->cancel = cancel_current();
		int rc = pthread_create(&f->tid, NULL, flusher_main, put);
		if (rc != 0) {
			put_pack_out_free(o);
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
int put_flusher_finish(struct put *put, struct err *e)
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
	if (ALLOC_GROW(put->mpacks, put->mpacks_cap, put->nmpacks) < 0)
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
	if (ALLOC_GROW(f->chunks, put->chunks_cap, f->nchunks) < 0)
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
	int rc = (o && p) ? ALLOC_GROW(put->own, put->own_cap, put->nown) : -ENOMEM;
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
		put_pack_out_free(o);
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
		rc = put_flush_out(put, e);
	if (rc == 0 && !put->out)
		rc = new_pack_out(put, e);
	struct pack_out *o = put->out;
	if (rc == 0 && ALLOC_GROW(o->ents, o->cap, o->nents) < 0)
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

int put_commit_chunk(struct put *put, const struct batch *b, struct work *w, struct err *e)
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
