/*
 * manifest.h - the JSON manifest of a stored snapshot: built by the store's
 * put, read back by its get, delete and open. It says everything a restore
 * needs, so a restore reads no other index. Format 2 is the caller's meta
 * object with these fields added (replacing any of that name):
 *
 *   { ...meta..., "format": 2, "size_bytes": N, "stored_bytes": N,
 *     "packs": ["snap-1234abcd/0000", ...],
 *     "files": [{"name": "pages.img", "size": N,
 *                "chunks": [["<sha256 hex>", LEN, PACK, OFF, ZLEN], [LEN], ...]}, ...] }
 *
 * A file is the concatenation of its chunks. ["<sha256>", LEN, PACK, OFF,
 * ZLEN] is a chunk of LEN plain bytes whose SHA-256 is given, stored as
 * ZLEN bytes at offset OFF of pack packs[PACK]: a zstd frame, or the plain
 * bytes when ZLEN == LEN. [LEN] is a run of LEN zero bytes, stored nowhere.
 * "stored_bytes" is what this snapshot added to the store.
 *
 * A manifest may come from a store other hosts write, so manifest_parse()
 * checks every field it returns: names are safe to join to a directory,
 * lengths add up, pack indexes are in range, pack names are safe keys, and
 * the bounds below hold.
 *
 * Ownership: the caller frees the text manifest_build() returns, and what
 * manifest_parse() fills in with manifest_free().
 */
#ifndef SNAPFS_MANIFEST_H
#define SNAPFS_MANIFEST_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/util.h"

#define MANIFEST_FORMAT 2
#define MANIFEST_NAME_MAX 255
/* A pack name: "<snapshot id>/<4 or more digits>". */
#define MANIFEST_PACK_MAX 80
#define SHA256_LEN 32
#define SHA256_HEX_LEN 64
/* The pack index of a run of zero bytes. */
#define MANIFEST_ZERO (-1)

/*
 * Bounds on a manifest. Every host parses every manifest of the bucket at
 * start-up, and any writer of the bucket may write one, so each is checked
 * before anything is allocated for what it bounds; manifest_build() refuses
 * (EFBIG) what would pass them, so no put writes a manifest a get refuses.
 * The chunker (backend/store/chunker.h) cuts chunks of 16 to 256 KiB, ~80 KiB on
 * average, and a stored chunk takes ~100 bytes of text.
 *
 *   MANIFEST_BYTES_MAX   the text: 64 MiB holds ~670,000 stored chunks,
 *                        ~50 GiB of non-zero data at the mean chunk length.
 *   MANIFEST_CHUNKS_MAX  chunk entries of all files together (a file's own
 *                        count is part of it): 1.5 Mi, above the ~1.36 Mi
 *                        stored chunks and zero runs between them that the
 *                        text bound leaves room for.
 *   MANIFEST_VALUES_MAX  JSON values in all (6 a stored chunk, 2 a zero run,
 *                        4 a file, 1 a pack, the caller's metadata): what
 *                        cJSON allocates, ~80 bytes a value, so a parse costs
 *                        at most ~500 MiB plus the text, whatever the text
 *                        is (a 64 MiB array of 1s would be 32 Mi values).
 *                        Honest manifests need at most ~5.4 Mi.
 *   MANIFEST_FILES_MAX   files: a checkpoint has a dozen.
 *   MANIFEST_PACKS_MAX   packs listed: 16 Ki packs of ~32 MiB is 512 GiB; a
 *                        put reuses chunks of at most half that many packs of
 *                        other snapshots (backend/store/store_put.c) and writes
 *                        fewer of its own than the chunk bound allows.
 *   MANIFEST_CHUNK_MAX   the plain length of a stored chunk (zero runs may be
 *                        longer): 16 times the chunker's longest.
 * A stored length is at most manifest_zlen_max() of its plain length: the
 * longest zstd frame of that many bytes (ZSTD_COMPRESSBOUND), or the plain
 * bytes. Offsets and lengths are at most 2^53 (JSON numbers are doubles)
 * and every sum of them is checked.
 */
#define MANIFEST_BYTES_MAX (64u << 20)
#define MANIFEST_CHUNKS_MAX (3u << 19)
#define MANIFEST_VALUES_MAX (6u << 20)
#define MANIFEST_FILES_MAX 4096
#define MANIFEST_PACKS_MAX (16u << 10)
#define MANIFEST_CHUNK_MAX (4 << 20)

struct manifest_chunk {
	unsigned char sha256[SHA256_LEN]; /* all zero for a zero run */
	int64_t len;			  /* plain bytes */
	int32_t pack;			  /* index into manifest.packs, or MANIFEST_ZERO */
	int64_t off;			  /* of the stored bytes in the pack */
	int64_t zlen;			  /* stored bytes; == len: stored plain */
};

struct manifest_file {
	char name[MANIFEST_NAME_MAX + 1];
	int64_t size;
	struct manifest_chunk *chunks;
	size_t nchunks;
};

struct manifest {
	struct manifest_file *files;
	size_t nfiles;
	char (*packs)[MANIFEST_PACK_MAX + 1];
	size_t npacks;
	int64_t size_bytes;
	int64_t stored_bytes;
};

/* Whether @name may be a snapshot's file: [A-Za-z0-9._-], no leading '.', no TMP_MARK. */
bool manifest_name_ok(const char *name);
/* Whether @name may be a pack name: "<id>/<digits>", id as store ids are. */
bool manifest_pack_ok(const char *name);

/* The longest stored form of a chunk of @len plain bytes (0 < @len <= MANIFEST_CHUNK_MAX). */
int64_t manifest_zlen_max(int64_t len);

/*
 * The JSON tree of manifest text @json of snapshot @id (named in messages),
 * for callers that want its metadata; -EIO if it is longer than
 * MANIFEST_BYTES_MAX, has more than MANIFEST_VALUES_MAX values (both checked
 * before it is parsed) or is not a JSON object. The caller frees *@root
 * with cJSON_Delete().
 */
int manifest_json(const char *json, const char *id, cJSON **root, struct err *e);

/* The manifest text (ending in a newline) and its length; @m is not changed. */
int manifest_build(const cJSON *meta, const struct manifest *m, char **json, size_t *len,
		   struct err *e);

/* Parse manifest @json of snapshot @id (named in messages) into @m; -EIO if malformed. */
int manifest_parse(const char *json, const char *id, struct manifest *m, struct err *e);

/* Free what manifest_parse() allocated in @m (and the chunk arrays of its files). */
void manifest_free(struct manifest *m);

/* Lowercase hex of a SHA-256 into @hex (SHA256_HEX_LEN + 1 bytes). */
void sha256_to_hex(const unsigned char sha[SHA256_LEN], char *hex);

#endif
