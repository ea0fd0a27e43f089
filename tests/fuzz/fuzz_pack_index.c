/*
 * fuzz_pack_index.c - libFuzzer target for pack_idx_decode() (backend/store/store.c),
 * which reads the index object of a pack from the bucket at every refresh,
 * and the chunk index its entries go into (store_refresh.c index_pack()).
 *
 * An index ends in a SHA-256 of all before it, which random bytes never
 * match, so the first input byte says how to take the rest:
 *   0  as it is: the object exactly as the bucket could hold it;
 *   1  with its SHA-256 appended;
 *   2  as entries only: header (magic, version, count) put before them,
 *      SHA-256 after, so mutations reach the checks on each entry.
 * What decodes must be within the entry bounds (a stored length at most
 * zstd's bound for its plain length), encode back to the same
 * bytes, and every entry must be found in a chunk index after it is added.
 */
#include <openssl/evp.h>
#include <zstd.h>

#include "backend/store/store_internal.h"
#include "tests/fuzz/fuzz.h"

/* The layout backend/store/store.c writes: magic, le32 version, le32 count; 48-byte entries. */
#define IDX_HEADER 16
#define IDX_ENTRY 48

static struct store st;
static EVP_MD_CTX *md;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	st.sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	md = EVP_MD_CTX_new();
	if (!st.sha256 || !md)
		abort();
	return 0;
}

static void put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* The object mode @mode makes of @rest (@n bytes) into @obj; returns its length. */
static size_t make_object(int mode, const uint8_t *rest, size_t n, unsigned char *obj)
{
	size_t len = 0;
	if (mode == 2) {
		memcpy(obj, PACK_IDX_MAGIC, 8);
		put_le32(obj + 8, PACK_IDX_VERSION);
		put_le32(obj + 12, (uint32_t)(n / IDX_ENTRY));
		len = IDX_HEADER;
		n -= n % IDX_ENTRY;
	}
	if (n)
		memcpy(obj + len, rest, n);
	len += n;
	if (mode != 0) {
		FUZZ_CHECK(store_sha256(&st, md, obj, len, obj + len));
		len += SHA256_LEN;
	}
	return len;
}

static void check_entries(const struct pack_idx_entry *ents, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		FUZZ_CHECK(ents[i].len >= 1 && ents[i].len <= MANIFEST_CHUNK_MAX);
		FUZZ_CHECK(ents[i].zlen >= 1 && ents[i].off <= INT64_MAX / 2);
		/* docs/design.md: a stored length within its plain length plus zstd's bound. */
		FUZZ_CHECK(ents[i].zlen <= ZSTD_COMPRESSBOUND((size_t)ents[i].len));
	}
}

/* As index_pack() does: every entry into a chunk index; each hash is then found there. */
static void check_index(const struct pack_idx_entry *ents, size_t n)
{
	struct pack p = {.name = "snap-fuzz/0000", .refs = 1, .indexed = true};
	struct chunk_index ix = {0};
	for (size_t i = 0; i < n; i++) {
		struct chunk_ref r = {.pack = &p,
				      .off = (int64_t)ents[i].off,
				      .len = ents[i].len,
				      .zlen = ents[i].zlen};
		memcpy(r.sha256, ents[i].sha256, SHA256_LEN);
		FUZZ_CHECK(chunk_index_add(&ix, &r) == 0);
	}
	for (size_t i = 0; i < n; i++) {
		const struct chunk_ref *r = chunk_index_find(&ix, ents[i].sha256);
		FUZZ_CHECK(r && !memcmp(r->sha256, ents[i].sha256, SHA256_LEN));
	}
	FUZZ_CHECK(ix.count <= n && ix.count * 2 <= ix.cap);
	chunk_index_free(&ix);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	int mode = data[0] % 3;
	unsigned char *obj = malloc(size + IDX_HEADER + SHA256_LEN);
	if (!obj)
		abort();
	size_t len = make_object(mode, data + 1, size - 1, obj);
	struct pack_idx_entry *ents = NULL;
	size_t n = 0;
	int rc = pack_idx_decode(&st, (const char *)obj, len, &ents, &n);
	if (rc == 0) {
		char *again = NULL;
		size_t again_len = 0;
		check_entries(ents, n);
		FUZZ_CHECK(pack_idx_encode(&st, ents, n, &again, &again_len) == 0);
		FUZZ_CHECK(again_len == len && !memcmp(again, obj, len));
		check_index(ents, n);
		free(again);
		free(ents);
	} else {
		FUZZ_CHECK(rc == -EIO || rc == -ENOMEM);
		FUZZ_CHECK(!ents);
	}
	free(obj);
	return 0;
}
