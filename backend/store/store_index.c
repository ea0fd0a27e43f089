/*
 * store_index.c - the chunk index (SHA-256 -> where the chunk is stored,
 * struct chunk_index) and the codec of pack index objects (packs/<name>.idx,
 * whose byte layout store_internal.h tables), with store_sha256() that both
 * the codec and the puts use. Pure functions of their arguments: the
 * callers hold st->lock for st->index.
 */
#include "backend/store/store_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/digest_slot.h"

bool store_sha256(const struct store *st, EVP_MD_CTX *ctx, const void *data, size_t len,
		  unsigned char out[SHA256_LEN])
{
	unsigned int n = 0;
	return EVP_DigestInit_ex2(ctx, st->sha256, NULL) && EVP_DigestUpdate(ctx, data, len) &&
	       EVP_DigestFinal_ex(ctx, out, &n) && n == SHA256_LEN;
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

int chunk_index_reserve(struct chunk_index *ix, size_t more)
{
	int rc = 0;
	while (rc == 0 && (ix->count + more + 1) * 2 > ix->cap)
		rc = index_grow(ix);
	return rc;
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
