#include "backend/store/store_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/digest_slot.h"
#include "lib/names.h"
#include "lib/strbuf.h"

/* --- ids and keys ----------------------------------------------------------- */

/* A name (lib/names.h) without TMP_MARK (lib/util.h), which marks temp files and objects. */
bool store_id_ok(const char *id)
{
	return name_ok(id) && !strstr(id, TMP_MARK);
}

int store_check_id(const char *id, struct err *e)
{
	if (!store_id_ok(id))
		return err_set(e, EINVAL, "invalid snapshot id \"%.*s\"", NAME_LEN_MAX + 1, id);
	return 0;
}

void store_manifest_key(const char *id, char key[OBJ_KEY_MAX])
{
	/* Cannot truncate: ids are at most NAME_LEN_MAX bytes. */
	snprintf(key, OBJ_KEY_MAX, "manifests/%s.json", id);
}

int store_checked_key(const char *id, char key[OBJ_KEY_MAX], struct err *e)
{
	int rc = store_check_id(id, e);
	if (rc == 0)
		store_manifest_key(id, key);
	return rc;
}

void store_pack_key(const char *name, const char *ext, char key[OBJ_KEY_MAX])
{
	/* Cannot truncate: pack names are at most MANIFEST_PACK_MAX bytes. */
	snprintf(key, OBJ_KEY_MAX, "packs/%s.%s", name, ext);
}

int store_wrap(struct err *e, const char *id, int rc, const struct err *inner)
{
	return err_set(e, -rc, "snapshot %s: %s", id, inner->msg);
}

/* --- hashing and threads ---------------------------------------------------- */

bool store_sha256(const struct store *st, EVP_MD_CTX *ctx, const void *data, size_t len,
		  unsigned char out[SHA256_LEN])
{
	unsigned int n = 0;
	return EVP_DigestInit_ex2(ctx, st->sha256, NULL) && EVP_DigestUpdate(ctx, data, len) &&
	       EVP_DigestFinal_ex(ctx, out, &n) && n == SHA256_LEN;
}

struct par_thread {
	pthread_t tid;
	void (*fn)(void *arg, unsigned worker);
	void *arg;
	unsigned worker;
	bool started;
	struct cancel *cancel; /* the caller's token (lib/cancel.h) */
};

static void *par_main(void *arg)
{
	struct par_thread *t = arg;
	cancel_bind(t->cancel);
	t->fn(t->arg, t->worker);
	return NULL;
}

void store_parallel(unsigned n, void (*fn)(void *arg, unsigned worker), void *arg)
{
	struct par_thread threads[STORE_WORKERS_MAX] = {0};
	if (n > STORE_WORKERS_MAX)
		n = STORE_WORKERS_MAX;
	/* A thread that cannot start leaves its share to the others: fn pulls its work. */
	for (unsigned i = 1; i < n; i++) {
		threads[i] = (struct par_thread){
		    .fn = fn, .arg = arg, .worker = i, .cancel = cancel_current()};
		threads[i].started =
		    pthread_create(&threads[i].tid, NULL, par_main, &threads[i]) == 0;
	}
	fn(arg, 0);
	for (unsigned i = 1; i < n; i++) {
		if (threads[i].started)
			pthread_join(threads[i].tid, NULL);
	}
}

/* --- the chunk index -------------------------------------------------------- */

static size_t slot_of(const struct chunk_index *ix, const unsigned char sha[SHA256_LEN])
{
	return digest_slot(sha, ix->cap);
}

const struct chunk_ref *chunk_index_find(const struct chunk_index *ix,
					 const unsigned char sha[SHA256_LEN])
{
	if (ix->cap == 0)
		return NULL;
	for (size_t i = slot_of(ix, sha);; i = (i + 1) & (ix->cap - 1)) {
		const struct chunk_ref *r = &ix->slots[i];
		if (!r->pack)
			return NULL;
		if (!memcmp(r->sha256, sha, SHA256_LEN))
			return r;
	}
}

static void index_insert(struct chunk_index *ix, const struct chunk_ref *ref)
{
	size_t i = slot_of(ix, ref->sha256);
	while (ix->slots[i].pack)
		i = (i + 1) & (ix->cap - 1);
	ix->slots[i] = *ref;
	ix->count++;
	ix->plain_bytes += ref->len;
}

static int index_grow(struct chunk_index *ix)
{
	size_t cap = ix->cap ? ix->cap * 2 : 1024;
	struct chunk_index bigger = {.slots = calloc(cap, sizeof(struct chunk_ref)), .cap = cap};
	if (!bigger.slots)
		return -ENOMEM;
	for (size_t i = 0; i < ix->cap; i++) {
		if (ix->slots[i].pack)
			index_insert(&bigger, &ix->slots[i]);
	}
	free(ix->slots);
	*ix = bigger;
	return 0;
}

int chunk_index_add(struct chunk_index *ix, const struct chunk_ref *ref)
{
	struct chunk_ref *found = (struct chunk_ref *)chunk_index_find(ix, ref->sha256);
	if (found) {
		/* A chunk stored again because its pack was condemned: the new copy serves. */
		if (!pack_usable(found->pack) && pack_usable(ref->pack))
			*found = *ref;
		return 0;
	}
	if ((ix->count + 1) * 2 > ix->cap) {
		int rc = index_grow(ix);
		if (rc < 0)
			return rc;
	}
	index_insert(ix, ref);
	return 0;
}

void chunk_index_free(struct chunk_index *ix)
{
	free(ix->slots);
	memset(ix, 0, sizeof(*ix));
}

int chunk_index_drop_unindexed(struct chunk_index *ix)
{
	struct chunk_index kept = {0};
	for (size_t i = 0; i < ix->cap; i++) {
		const struct chunk_ref *r = &ix->slots[i];
		if (r->pack && r->pack->indexed && chunk_index_add(&kept, r) < 0) {
			chunk_index_free(&kept);
			return -ENOMEM;
		}
	}
	chunk_index_free(ix);
	*ix = kept;
	return 0;
}

/* --- pack index objects ----------------------------------------------------- */

static void put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_le32(const unsigned char *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get_le64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void md_ctx_freep(EVP_MD_CTX **ctx)
{
	EVP_MD_CTX_free(*ctx);
}

int pack_idx_encode(const struct store *st, const struct pack_idx_entry *ents, size_t n, char **out,
		    size_t *len)
{
	size_t total = PACK_IDX_HEADER + n * PACK_IDX_ENTRY + SHA256_LEN;
	_cleanup_free_ unsigned char *buf = malloc(total);
	_cleanup_(md_ctx_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!buf || !ctx || n > UINT32_MAX)
		return -ENOMEM;
	memcpy(buf, PACK_IDX_MAGIC, 8);
	put_le32(buf + 8, PACK_IDX_VERSION);
	put_le32(buf + 12, (uint32_t)n);
	unsigned char *p = buf + PACK_IDX_HEADER;
	for (size_t i = 0; i < n; i++, p += PACK_IDX_ENTRY) {
		memcpy(p, ents[i].sha256, SHA256_LEN);
		put_le64(p + 32, ents[i].off);
		put_le32(p + 40, ents[i].len);
		put_le32(p + 44, ents[i].zlen);
	}
	if (!store_sha256(st, ctx, buf, (size_t)(p - buf), p))
		return -EIO;
	*len = total;
	*out = (char *)steal_ptr(buf);
	return 0;
}

/* The bounds of store_internal.h and manifest.h: dedup copies these fields into manifests. */
static bool idx_entry_ok(const struct pack_idx_entry *ent)
{
	return ent->len > 0 && ent->len <= MANIFEST_CHUNK_MAX && ent->zlen > 0 &&
	       ent->zlen <= manifest_zlen_max(ent->len) && ent->off <= PACK_BYTES_MAX &&
	       ent->off + ent->zlen <= PACK_BYTES_MAX; /* cannot wrap: both are small now */
}

int pack_idx_decode(const struct store *st, const char *data, size_t len,
		    struct pack_idx_entry **ents, size_t *n)
{
	const unsigned char *buf = (const unsigned char *)data;
	unsigned char sum[SHA256_LEN];
	_cleanup_(md_ctx_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx)
		return -ENOMEM;
	if (len < PACK_IDX_HEADER + SHA256_LEN || memcmp(buf, PACK_IDX_MAGIC, 8) ||
	    get_le32(buf + 8) != PACK_IDX_VERSION)
		return -EIO;
	size_t count = get_le32(buf + 12);
	if (count > PACK_IDX_ENTRIES_MAX ||
	    len != PACK_IDX_HEADER + count * PACK_IDX_ENTRY + SHA256_LEN ||
	    !store_sha256(st, ctx, buf, len - SHA256_LEN, sum) ||
	    memcmp(sum, buf + len - SHA256_LEN, SHA256_LEN))
		return -EIO;
	_cleanup_free_ struct pack_idx_entry *out = calloc(count + 1, sizeof(*out));
	if (!out)
		return -ENOMEM;
	const unsigned char *p = buf + PACK_IDX_HEADER;
	for (size_t i = 0; i < count; i++, p += PACK_IDX_ENTRY) {
		memcpy(out[i].sha256, p, SHA256_LEN);
		out[i].off = get_le64(p + 32);
		out[i].len = get_le32(p + 40);
		out[i].zlen = get_le32(p + 44);
		if (!idx_entry_ok(&out[i]))
			return -EIO;
	}
	*ents = steal_ptr(out);
	*n = count;
	return 0;
}

/* --- packs, snapshots, puts in flight (all under st->lock) ---------------- */

struct pack *store_pack_get_or_add(struct store *st, const char *name)
{
	struct pack *p = store_find_pack(st, name);
	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	snprintf(p->name, sizeof(p->name), "%s", name);
	if (store_add_pack(st, p) < 0) {
		free(p);
		return NULL;
	}
	return p;
}

void *store_grow(void *arr, size_t *cap, size_t used, size_t size)
{
	if (used < *cap)
		return arr;
	size_t ncap = *cap ? *cap * 2 : 16;
	void *bigger = reallocarray(arr, ncap, size);
	if (bigger)
		*cap = ncap;
	return bigger;
}

int store_reserve(struct store *st, size_t packs, size_t chunks)
{
	int rc = 0;
	while (rc == 0 && st->npacks + packs > st->packs_cap)
		rc = STORE_GROW(st->packs, st->packs_cap, st->packs_cap);
	if (rc == 0)
		rc = store_packs_reserve(st, packs);
	if (rc == 0)
		rc = store_snaps_reserve(st);
	while (rc == 0 && (st->index.count + chunks + 1) * 2 > st->index.cap)
		rc = index_grow(&st->index);
	return rc;
}

struct inflight *store_find_inflight(struct store *st, const char *id)
{
	for (struct inflight *fl = st->inflight; fl; fl = fl->next) {
		if (!strcmp(fl->id, id))
			return fl;
	}
	return NULL;
}

int store_inflight_begin(struct store *st, const char *id, struct inflight **out)
{
	if (store_find_inflight(st, id))
		return -EBUSY;
	struct inflight *fl = calloc(1, sizeof(*fl));
	if (!fl)
		return -ENOMEM;
	snprintf(fl->id, sizeof(fl->id), "%s", id);
	fl->next = st->inflight;
	st->inflight = fl;
	*out = fl;
	return 0;
}

bool store_inflight_pinned(const struct inflight *fl, const struct pack *p)
{
	for (size_t i = 0; i < fl->npinned; i++) {
		if (fl->pinned[i] == p)
			return true;
	}
	return false;
}

int store_inflight_pin(struct inflight *fl, struct pack *p)
{
	if (store_inflight_pinned(fl, p))
		return 0;
	int rc = STORE_GROW(fl->pinned, fl->cap, fl->npinned);
	if (rc < 0)
		return rc;
	fl->pinned[fl->npinned++] = p;
	p->pins++;
	return 0;
}

void store_inflight_end(struct store *st, struct inflight *fl)
{
	for (struct inflight **pp = &st->inflight; *pp; pp = &(*pp)->next) {
		if (*pp == fl) {
			*pp = fl->next;
			break;
		}
	}
	for (size_t i = 0; i < fl->npinned; i++)
		fl->pinned[i]->pins--;
	free(fl->pinned);
	free(fl);
}

/* --- open and close --------------------------------------------------------- */

static int store_dir(const char *url, const char *state_dir, char dir[PATH_MAX], struct err *e)
{
	if (!url || url[0] == '\0') {
		if (!state_dir || xsnprintf(dir, PATH_MAX, "%s/store", state_dir) < 0)
			return err_set(e, EINVAL, "no store URL and no usable state directory");
		return 0;
	}
	if (str_has_prefix(url, "s3://")) {
		dir[0] = '\0'; /* objstore_s3_open() reads the URL itself */
		return 0;
	}
	if (!str_has_prefix(url, "file:///")) {
		/* Not echoed: an unknown URL might carry credentials. */
		return err_set(e, EINVAL, "store URL must be file:///path or s3://bucket/prefix");
	}
	if (xsnprintf(dir, PATH_MAX, "%s", url + strlen("file://")) < 0)
		return err_set(e, EINVAL, "store path is too long");
	return 0;
}

int store_open(const char *url, const char *state_dir, struct store **out, struct err *e)
{
	char dir[PATH_MAX];
	int rc = store_dir(url, state_dir, dir, e);
	if (rc < 0)
		return rc;
	struct store *st = calloc(1, sizeof(*st));
	if (!st)
		return err_set(e, ENOMEM, "out of memory");
	pthread_mutex_init(&st->lock, NULL);
	pthread_cond_init(&st->checked, NULL);
	pthread_mutex_init(&st->sync_lock, NULL);
	pthread_mutex_init(&st->gc_lock, NULL); /* calloc'd: st->unreadable is empty */
	st->limits = (struct store_limits){.index_chunks = STORE_INDEX_CHUNKS_MAX,
					   .packs = STORE_PACKS_MAX,
					   .pack_refs = STORE_PACK_REFS_MAX};
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	st->workers = cores < 1			  ? 1
		      : cores > STORE_WORKERS_MAX ? STORE_WORKERS_MAX
						  : (unsigned)cores;
	st->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	if (!st->sha256)
		rc = err_set(e, EIO, "libcrypto has no SHA-256");
	if (rc == 0)
		rc = dir[0] ? objstore_local_open(dir, &st->os, e)
			    : objstore_s3_open(url, &st->os, e);
	bool complete = false;
	if (rc == 0)
		store_records_open(st, state_dir);
	if (rc == 0)
		rc = store_refresh_locked(st, NULL, &complete, e);
	if (rc < 0 && rc != -ENOMEM && st->os) {
		/* Serve anyway: puts and gets fail with the store's own reason until it answers. */
		warning("cannot read the store %s: %s", st->os->url, e->msg);
		err_clear(e);
		rc = 0;
	}
	if (rc < 0) {
		store_close(st);
		return rc;
	}
	*out = st;
	return 0;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	/* Puts and gets have returned: nothing is in flight. */
	store_records_close(st); /* first: it saves the records */
	for (size_t i = 0; i < st->nsnaps; i++)
		free(st->snaps[i].packs);
	for (size_t i = 0; i < st->npacks; i++)
		free(st->packs[i]);
	free(st->snaps);
	free(st->snap_slots);
	free(st->pack_slots);
	free(st->packs);
	chunk_index_free(&st->index);
	EVP_MD_free(st->sha256);
	objstore_close(st->os);
	free(st->seen);
	strbuf_release(&st->unreadable);
	pthread_mutex_destroy(&st->lock);
	pthread_cond_destroy(&st->checked);
	pthread_mutex_destroy(&st->sync_lock);
	pthread_mutex_destroy(&st->gc_lock);
	free(st);
}

const char *store_url(const struct store *st)
{
	return st->os->url;
}

/* --- manifests -------------------------------------------------------------- */

int store_get_manifest(struct store *st, const char *id, char **json, struct err *e)
{
	char key[OBJ_KEY_MAX];
	struct err inner = {0};
	int rc = store_checked_key(id, key, e);
	if (rc < 0)
		return rc;
	rc = objstore_get_buf(st->os, key, json, NULL, MANIFEST_BYTES_MAX, &inner);
	if (rc == -ENOENT)
		return err_set(e, ENOENT, "snapshot %s is not in the store", id);
	return rc < 0 ? store_wrap(e, id, rc, &inner) : 0;
}

struct list_ctx {
	int (*fn)(const char *id, int64_t size, void *arg);
	void *arg;
	int rc; /* what fn returned when it stopped the walk */
};

/* "manifests/<id>.json" → fn(id, size); other names in manifests/ are not snapshots. */
static int list_one(const char *key, int64_t size, void *arg)
{
	struct list_ctx *ctx = arg;
	const char *name = key + strlen("manifests/");
	size_t len = strlen(name);
	char id[NAME_LEN_MAX + 1];
	if (strchr(name, '/') || len <= strlen(".json") || strcmp(name + len - 5, ".json"))
		return 0;
	len -= strlen(".json");
	if (len > NAME_LEN_MAX)
		return 0;
	memcpy(id, name, len);
	id[len] = '\0';
	if (!store_id_ok(id))
		return 0;
	ctx->rc = ctx->fn(id, size, ctx->arg);
	return ctx->rc;
}

int store_list_manifests(struct store *st, int (*fn)(const char *id, int64_t size, void *arg),
			 void *arg, struct err *e)
{
	struct list_ctx ctx = {.fn = fn, .arg = arg};
	int rc = objstore_list(st->os, "manifests/", list_one, &ctx, e);
	return ctx.rc ? ctx.rc : rc;
}

struct id_only {
	int (*fn)(const char *id, void *arg);
	void *arg;
};

static int id_only(const char *id, int64_t size, void *arg)
{
	const struct id_only *o = arg;
	(void)size;
	return o->fn(id, o->arg);
}

int store_list_snapshots(struct store *st, int (*fn)(const char *id, void *arg), void *arg,
			 struct err *e)
{
	struct id_only o = {.fn = fn, .arg = arg};
	return store_list_manifests(st, id_only, &o, e);
}

/* Totals of numbers manifests gave: they saturate rather than wrap. */
static void add_sat(int64_t *sum, int64_t v)
{
	if (__builtin_add_overflow(*sum, v, sum))
		*sum = INT64_MAX;
}

void store_stats(struct store *st, struct store_stats *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&st->lock);
	out->snapshots = (int64_t)st->nsnaps;
	out->packs = (int64_t)st->npacks;
	out->chunks = (int64_t)st->index.count;
	out->chunk_bytes = st->index.plain_bytes;
	for (size_t i = 0; i < st->npacks; i++) {
		add_sat(&out->stored_bytes, st->packs[i]->bytes);
		add_sat(&out->stored_bytes, st->packs[i]->idx_bytes);
	}
	out->condemned_packs = st->condemned;
	out->grace_ms = st->grace_ms;
	out->get_store_bytes = st->get_store_bytes;
	out->get_local_bytes = st->get_local_bytes;
	for (size_t i = 0; i < st->nsnaps; i++) {
		add_sat(&out->stored_bytes, st->snaps[i].manifest_bytes);
		add_sat(&out->logical_bytes, st->snaps[i].size_bytes);
	}
	for (struct inflight *fl = st->inflight; fl; fl = fl->next)
		out->puts_in_flight++;
	pthread_mutex_unlock(&st->lock);
}
