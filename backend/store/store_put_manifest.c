/*
 * store_put_manifest.c - the end of a put (store_put.c): the manifest text,
 * the snapshot recorded in the store before the manifest is written, the
 * write itself; and the check, before a put starts, that no manifest has
 * its id already.
 */
#include "backend/store/store_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* Ids are never reused; refusing keeps a put from mixing data with a completed snapshot. */
int put_check_absent(struct store *st, const char *id, struct err *e)
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

/* Write the manifest; on failure take the snapshot back out of the store's records. */
int put_manifest(struct put *put, const cJSON *meta, struct store_put_result *res, struct err *e)
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
			store_records_forget(st, put->id);
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
