/*
 * manifest.h - the JSON manifest of a stored snapshot: built by
 * store_put_snapshot(), read back by store_get_snapshot(). Format 1 is the
 * caller's meta object with three fields added (replacing any of that name):
 *
 *   { ...meta..., "format": 1, "size_bytes": N,
 *     "files": [{"name": "pages.img", "size": N, "sha256": "<64 hex>"}, ...] }
 *
 * A manifest may come from a store other hosts write, so manifest_parse()
 * checks every field it returns: a name is safe to join to a directory.
 *
 * Ownership: the caller frees the text manifest_build() returns and the
 * array manifest_parse() returns, with free().
 */
#ifndef SNAPFS_MANIFEST_H
#define SNAPFS_MANIFEST_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/util.h"

#define MANIFEST_FORMAT 1
#define MANIFEST_FILES_MAX 4096
#define MANIFEST_NAME_MAX 255
#define SHA256_HEX_LEN 64

struct manifest_file {
	char name[MANIFEST_NAME_MAX + 1];
	int64_t size;
	char sha256[SHA256_HEX_LEN + 1]; /* lowercase hex */
};

/* Whether @name may be a snapshot's file: [A-Za-z0-9._-], no leading '.', no ".tmp.". */
bool manifest_name_ok(const char *name);

/* The manifest text (pretty-printed, ending in a newline) and its length. */
int manifest_build(const cJSON *meta, const struct manifest_file *files, size_t nfiles, char **json,
		   size_t *len, struct err *e);

/* The file list of manifest @json of snapshot @id (named in messages); -EIO if malformed. */
int manifest_parse(const char *json, const char *id, struct manifest_file **files, size_t *nfiles,
		   struct err *e);

#endif
