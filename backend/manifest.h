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
 * lengths add up, pack indexes are in range, pack names are safe keys.
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
#define MANIFEST_FILES_MAX 4096
#define MANIFEST_NAME_MAX 255
/* A pack name: "<snapshot id>/<4 or more digits>". */
#define MANIFEST_PACK_MAX 80
#define SHA256_LEN 32
#define SHA256_HEX_LEN 64
/* The longest stored chunk a manifest may name (zero runs may be longer). */
#define MANIFEST_CHUNK_MAX (4 << 20)
/* The pack index of a run of zero bytes. */
#define MANIFEST_ZERO (-1)

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

/* Whether @name may be a snapshot's file: [A-Za-z0-9._-], no leading '.', no ".tmp.". */
bool manifest_name_ok(const char *name);
/* Whether @name may be a pack name: "<id>/<digits>", id as store ids are. */
bool manifest_pack_ok(const char *name);

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
