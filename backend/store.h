/*
 * store.h - the snapshot store: a snapshot's checkpoint files plus one JSON
 * manifest, kept in an objstore (local directory or S3).
 *
 * Layout in the objstore (this version stores files whole; the chunked,
 * deduplicated layout replaces the data part, not this interface):
 *   data/<snapshot-id>/<file-name>      one object per checkpoint file
 *   manifests/<snapshot-id>.json        written last; its presence means
 *                                       "completed", its absence "never was"
 *
 * A put stores every file first, then the manifest: a crash at any point
 * leaves a snapshot with a manifest and all its data, or no manifest (and
 * possibly orphaned data, which store_collect() removes). A get verifies
 * each file's SHA-256 against the manifest before it reports success, and
 * removes what it wrote on failure.
 *
 * Thread-safety: every function may be called from any thread at once.
 * Ownership: the store owns its objstore; callers own @meta and free what
 * store_get_manifest() returns with free().
 */
#ifndef SNAPFS_STORE_H
#define SNAPFS_STORE_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "lib/util.h"

struct store;

/* Called as bytes are stored; @done and @total in plain bytes. */
typedef void (*store_progress_fn)(void *arg, int64_t done, int64_t total);

struct store_put_result {
	int64_t size_bytes;   /* plain bytes of all files */
	int64_t stored_bytes; /* bytes this put added to the store */
};

/*
 * Open the store named by @url: "file:///abs/dir", or NULL/"" for the
 * default "<state_dir>/store". Other schemes: -EINVAL with a message.
 */
int store_open(const char *url, const char *state_dir, struct store **out, struct err *e);
void store_close(struct store *st);
/* The URL as users see it (never a secret). */
const char *store_url(const struct store *st);

/*
 * Store every regular file in directory @dir as snapshot @id, then write
 * the manifest: the object @meta (the caller's fields: id, sandbox, image,
 * host, ...) with a "files" array added: [{"name","size","sha256"}], and
 * "format": 1. @meta is not consumed.
 */
int store_put_snapshot(struct store *st, const char *id, const char *dir, const cJSON *meta,
		       store_progress_fn progress, void *arg, struct store_put_result *res,
		       struct err *e);

/*
 * Materialize snapshot @id into directory @dir (created if missing), each
 * file verified against its SHA-256. -ENOENT if there is no manifest; -EIO
 * naming the snapshot and file if data is missing or corrupt.
 */
int store_get_snapshot(struct store *st, const char *id, const char *dir, struct err *e);

/* The manifest text of @id (caller frees), -ENOENT if none. */
int store_get_manifest(struct store *st, const char *id, char **json, struct err *e);

/* Call @fn with the id of every snapshot that has a manifest. */
int store_list_snapshots(struct store *st, int (*fn)(const char *id, void *arg), void *arg,
			 struct err *e);

/* Delete the manifest first, then the data of @id. A missing snapshot is 0. */
int store_delete_snapshot(struct store *st, const char *id, struct err *e);

/*
 * Remove data that no manifest references and whose id is not in
 * @keep_ids (snapshots still being stored). Returns the number of objects
 * removed or a negative errno.
 */
int store_collect(struct store *st, const char *const *keep_ids, size_t nkeep, struct err *e);

#endif
