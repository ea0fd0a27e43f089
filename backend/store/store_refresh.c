/*
 * store_refresh.c - the store's records follow the manifests in the
 * objstore.
 *
 * Hosts that share a store add and delete manifests behind each other's
 * backs. store_refresh() lists manifests/ and
 *   - records every manifest it does not know (its packs gain a ref, and
 *     the chunks of packs new to it enter the index, so later puts here
 *     deduplicate against other hosts' snapshots too);
 *   - forgets every record whose manifest is gone (its packs lose a ref,
 *     and a pack no manifest uses is no longer offered to puts).
 * A record added after the listing began (a put of this process that
 * finished meanwhile) is never forgotten by that listing: records carry the
 * sequence number they were added under. Store open runs the same walk.
 * A manifest or pack index the local copy of the records holds
 * (store_records.c: by id and listed length, by pack name) is taken from
 * it instead of the objstore, and each walk whose listing succeeded saves
 * the records back to it.
 */
#include "backend/store/store_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib/strbuf.h"
#include "lib/strset.h"

/*
 * Under st->lock: record manifest @m of @id unless a record of it exists;
 * -EFBIG past STORE_PACKS_MAX or STORE_PACK_REFS_MAX (counting every pack it
 * lists as new: the bound is checked before anything is looked up).
 */
static int record_manifest(struct store *st, const char *id, const struct manifest *m, size_t len,
			   bool cached, struct err *e)
{
	if (store_find_snap(st, id))
		return 0;
	if (st->npacks + m->npacks > st->limits.packs ||
	    st->nrefs + m->npacks > st->limits.pack_refs)
		return err_set(e, EFBIG,
			       "the store's records would name more than %zu packs or list more "
			       "than %zu in all",
			       st->limits.packs, st->limits.pack_refs);
	struct snap_rec rec = {.size_bytes = m->size_bytes,
			       .stored_bytes = m->stored_bytes,
			       .manifest_bytes = (int64_t)len,
			       .npacks = m->npacks,
			       .cached = cached};
	snprintf(rec.id, sizeof(rec.id), "%s", id);
	rec.packs = calloc(m->npacks + 1, sizeof(*rec.packs));
	int rc = rec.packs ? 0 : -ENOMEM;
	for (size_t i = 0; rc == 0 && i < m->npacks; i++) {
		rec.packs[i] = store_pack_get_or_add(st, m->packs[i]);
		if (!rec.packs[i])
			rc = -ENOMEM;
	}
	if (rc == 0)
		rc = store_add_snap(st, &rec);
	free(rec.packs);
	return rc;
}

/* Under sync_lock: a manifest that cannot be read is said once, not every refresh. */
static void warn_once(struct store *st, const char *id, const struct err *e)
{
	char needle[NAME_LEN_MAX + 3];
	snprintf(needle, sizeof(needle), "\n%s\n", id);
	if (st->unreadable.len == 0)
		strbuf_adds(&st->unreadable, "\n");
	if (strstr(strbuf_str(&st->unreadable), needle)) {
		debug("store: cannot read snapshot %s: %s", id, e->msg);
		return;
	}
	warning("store: cannot read snapshot %s: %s", id, e->msg);
	strbuf_addf(&st->unreadable, "%s\n", id);
	if (strbuf_error(&st->unreadable) < 0)
		strbuf_reset(&st->unreadable); /* full: start over, each said once more */
}

/*
 * Read and record the manifest of @id. A manifest deleted since the listing
 * is nothing; one that cannot be read leaves *@complete false.
 */
static int load_manifest(struct store *st, const char *id, bool *complete)
{
	_cleanup_free_ char *json = NULL;
	size_t len = 0;
	struct err e = {0};
	struct manifest m;
	char key[OBJ_KEY_MAX];
	store_manifest_key(id, key);
	int rc = objstore_get_buf(st->os, key, &json, &len, MANIFEST_BYTES_MAX, &e);
	if (rc == -ENOENT)
		return 0;
	if (rc == 0)
		rc = manifest_parse(json, id, &m, &e);
	if (rc == 0) {
		pthread_mutex_lock(&st->lock);
		rc = record_manifest(st, id, &m, len, false, &e);
		pthread_mutex_unlock(&st->lock);
		manifest_free(&m);
	}
	if (rc < 0 && rc != -ENOMEM) {
		warn_once(st, id, &e);
		*complete = false;
		return 0;
	}
	return rc;
}

/*
 * Under st->lock: the chunks of @p's index into the chunk index, unless
 * they would pass STORE_INDEX_CHUNKS_MAX (the first time, a warning).
 */
static int index_pack(struct store *st, struct pack *p, const struct pack_idx_entry *ents, size_t n,
		      size_t len)
{
	p->idx_bytes = (int64_t)len;
	if (st->index.count + n > st->limits.index_chunks) {
		if (!st->index_full)
			warning("store: the chunk index holds %zu chunks, near its bound of %zu: "
				"pack %s and later ones are not used for deduplication",
				st->index.count, st->limits.index_chunks, p->name);
		st->index_full = true;
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		struct chunk_ref r = {.pack = p,
				      .off = (int64_t)ents[i].off,
				      .len = ents[i].len,
				      .zlen = ents[i].zlen};
		memcpy(r.sha256, ents[i].sha256, SHA256_LEN);
		if (r.off + r.zlen > p->bytes) /* cannot wrap: pack_idx_decode() bounds both */
			p->bytes = r.off + r.zlen;
		int rc = chunk_index_add(&st->index, &r);
		if (rc < 0)
			return rc;
	}
	p->indexed = true;
	return 0;
}

/*
 * The index object of pack @name, decoded: the local copy's if it has one
 * that verifies (store_records.c), else the objstore's, kept locally then.
 */
static int read_pack_index(struct store *st, const char *name, char **data, size_t *len,
			   struct pack_idx_entry **ents, size_t *n, struct err *e)
{
	char key[OBJ_KEY_MAX];
	int rc = store_records_idx_find(st, name, data, len);
	if (rc < 0)
		return rc;
	if (rc == 1 && pack_idx_decode(st, *data, *len, ents, n) == 0)
		return 0;
	free(*data);
	*data = NULL;
	store_pack_key(name, "idx", key);
	rc = objstore_get_buf(st->os, key, data, len, PACK_IDX_MAX, e);
	if (rc == 0)
		rc = pack_idx_decode(st, *data, *len, ents, n);
	if (rc == 0)
		store_records_idx_add(st, name, *data, *len);
	return rc;
}

/*
 * Read the index object of pack @name and add its chunks to the chunk
 * index. A pack without a usable index still restores (its manifests say
 * where each chunk is); new puts do not use it, and it is not read again.
 */
static int load_pack_index(struct store *st, const char *name)
{
	_cleanup_free_ char *data = NULL;
	_cleanup_free_ struct pack_idx_entry *ents = NULL;
	size_t len = 0, n = 0;
	struct err e = {0};
	int rc = read_pack_index(st, name, &data, &len, &ents, &n, &e);
	if (rc < 0 && rc != -ENOMEM)
		warning("store: pack %s has no usable index: %s", name,
			e.code ? e.msg : "malformed");
	pthread_mutex_lock(&st->lock);
	/* Under sync_lock nothing frees packs: it is still there. */
	struct pack *p = store_find_pack(st, name);
	if (p) {
		p->idx_read = true;
		if (rc == 0)
			rc = index_pack(st, p, ents, n, len);
	}
	pthread_mutex_unlock(&st->lock);
	return rc == -ENOMEM ? rc : 0;
}

/* Under st->lock: NUL-separated names of packs whose index is still to read. */
static int packs_to_index(struct store *st, struct strbuf *names)
{
	for (size_t i = 0; i < st->npacks; i++) {
		const struct pack *p = st->packs[i];
		if (!p->indexed && !p->idx_read)
			strbuf_add(names, p->name, strlen(p->name) + 1);
	}
	return strbuf_error(names);
}

/* Under st->lock: forget the records, older than the listing, of manifests it did not show. */
static void forget_unlisted(struct store *st, const struct strset *listed, uint64_t listed_at_seq)
{
	for (size_t i = 0; i < st->nsnaps;) {
		const struct snap_rec *rec = &st->snaps[i];
		if (rec->seq > listed_at_seq || store_find_inflight(st, rec->id) ||
		    strset_has(listed, rec->id))
			i++;
		else
			store_records_forget(st, rec->id); /* moves the last record to i */
	}
}

/* What a listing gathers: every id, and "id size" lines of those not recorded then. */
struct listing {
	struct store *st;
	struct strset *listed;
	struct strbuf wanted;
};

static int note_listed(const char *id, int64_t size, void *arg)
{
	struct listing *l = arg;
	int rc = strset_add(l->listed, id);
	if (rc == 0 && !store_has_record(l->st, id)) {
		strbuf_addf(&l->wanted, "%s %" PRId64 "\n", id, size);
		rc = strbuf_error(&l->wanted);
	}
	return rc;
}

/*
 * Record @id from its row in the local copy (store_records.c), if it has
 * one of the length listed: 1, 0 for none (the manifest is read), -ENOMEM.
 */
static int load_saved(struct store *st, const char *id, int64_t size)
{
	struct manifest m;
	struct err e = {0};
	int rc = store_records_find(st, id, size, &m);
	if (rc <= 0)
		return rc;
	pthread_mutex_lock(&st->lock);
	rc = record_manifest(st, id, &m, (size_t)size, true, &e);
	pthread_mutex_unlock(&st->lock);
	manifest_free(&m);
	return rc == 0 ? 1 : rc == -ENOMEM ? rc : 0; /* past a bound: read, and warned, as before */
}

static int load_new(struct store *st, char *wanted, bool *complete)
{
	int rc = 0;
	char *save = NULL;
	for (char *line = strtok_r(wanted, "\n", &save); rc == 0 && line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(line, ' ');
		if (!sp)
			continue; /* cannot be: note_listed() wrote it */
		*sp = '\0';
		if (store_has_record(st, line))
			continue;
		rc = load_saved(st, line, strtoll(sp + 1, NULL, 10));
		if (rc == 0)
			rc = load_manifest(st, line, complete);
		rc = rc == 1 ? 0 : rc;
	}
	return rc;
}

static int load_new_indexes(struct store *st)
{
	_cleanup_strbuf_ struct strbuf names = STRBUF_INIT;
	pthread_mutex_lock(&st->lock);
	int rc = packs_to_index(st, &names);
	pthread_mutex_unlock(&st->lock);
	store_records_batch(st, true);
	for (size_t off = 0; rc == 0 && off < names.len; off += strlen(names.buf + off) + 1)
		rc = load_pack_index(st, names.buf + off);
	store_records_batch(st, false);
	return rc;
}

int store_refresh_locked(struct store *st, struct strset *listed, bool *complete, struct err *e)
{
	_cleanup_strset_ struct strset own = STRSET_INIT;
	struct listing l = {.st = st, .listed = listed ? listed : &own, .wanted = STRBUF_INIT};
	*complete = false;
	pthread_mutex_lock(&st->lock);
	uint64_t listed_at_seq = st->seq;
	pthread_mutex_unlock(&st->lock);
	int rc = store_list_manifests(st, note_listed, &l, e);
	if (rc == 0 && strset_seal(l.listed) < 0)
		rc = -ENOMEM;
	if (rc < 0)
		goto out;
	*complete = true;
	pthread_mutex_lock(&st->lock);
	forget_unlisted(st, l.listed, listed_at_seq);
	pthread_mutex_unlock(&st->lock);
	rc = l.wanted.len ? load_new(st, l.wanted.buf, complete) : 0;
	if (rc == 0)
		rc = load_new_indexes(st);
	if (rc == 0)
		store_records_save(st, true);
out:
	strbuf_release(&l.wanted);
	if (rc == -ENOMEM || rc == -EFBIG)
		rc = err_set(e, -rc, "too many snapshots in %s", st->os->url);
	return rc;
}

int store_refresh(struct store *st, struct strset *listed, struct err *e)
{
	bool complete = false;
	pthread_mutex_lock(&st->sync_lock);
	int rc = store_refresh_locked(st, listed, &complete, e);
	pthread_mutex_unlock(&st->sync_lock);
	return rc;
}
