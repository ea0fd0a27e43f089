/*
 * objstore.h - a flat key/value object store: the layer the local-directory
 * and (later) S3 backends implement, and the only thing store.c talks to.
 *
 * Keys are relative paths of printable ASCII ([A-Za-z0-9._/-]), never
 * starting with '/' and never containing ".." (objstore_key_ok()). Objects are immutable once
 * put: a put of an existing key replaces it atomically (readers see the old
 * or the new object, never a mix).
 *
 * Durability: a put returns only once the object is durable (local: write
 * to a temp file, fsync, rename, fsync the directory; S3: the PUT answered
 * 200). A crash leaves no partial object under a listed key.
 *
 * Ownership: the objstore owns its backend state; callers own every buffer
 * they pass in, and free what *out points to after a get_buf.
 *
 * Errors: negative errno; -ENOENT for a missing key; -ENOSPC when the
 * backend is full; -EIO for anything else, with the reason in @e.
 */
#ifndef SNAPFS_OBJSTORE_H
#define SNAPFS_OBJSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/util.h"

#define OBJ_KEY_MAX 512

struct objstore;

/*
 * What a put writes into an object, inside a backend (objstore_local.c,
 * objstore_s3.c): @len bytes at @data, or the contents of @fd (its length
 * @len where the backend needs it) when @fd >= 0. Borrowed for the call.
 */
struct objstore_source {
	const char *data;
	int64_t len;
	int fd;
};

struct objstore_ops {
	int (*put_file)(struct objstore *os, const char *key, const char *path, struct err *e);
	int (*put_buf)(struct objstore *os, const char *key, const void *data, size_t len,
		       struct err *e);
	int (*get_file)(struct objstore *os, const char *key, const char *path, struct err *e);
	int (*get_buf)(struct objstore *os, const char *key, char **out, size_t *len, size_t max,
		       struct err *e);
	/* @len bytes at @off of @key into @buf; -EIO if the object ends before @off + @len. */
	int (*get_range)(struct objstore *os, const char *key, int64_t off, size_t len, void *buf,
			 struct err *e);
	int (*del)(struct objstore *os, const char *key, struct err *e); /* missing: 0 */
	/* Keys starting with @prefix, any order. @fn returning non-zero stops the walk. */
	int (*list)(struct objstore *os, const char *prefix,
		    int (*fn)(const char *key, int64_t size, void *arg), void *arg, struct err *e);
	/*
	 * Remove what interrupted puts left behind (temp files, unfinished uploads) that is at
	 * least @min_age_ms old. Returns how many were removed.
	 */
	int (*sweep)(struct objstore *os, int64_t min_age_ms, struct err *e);
	void (*close)(struct objstore *os);
};

struct objstore {
	const struct objstore_ops *ops;
	char url[1024]; /* as shown to users: never holds a secret */
};

/*
 * The key rule both stores apply: 1 to OBJ_KEY_MAX - 1 bytes of [A-Za-z0-9._/-]
 * in components that are not empty, "." or "..", and no TMP_MARK (lib/util.h),
 * which marks the local store's temp files.
 */
bool objstore_key_ok(const char *key);
/* The errno contract for a local file: ENOSPC for a full disk, EIO for the rest. */
int objstore_io_fail(struct err *e, int code, const char *what, const char *path);
/*
 * The failure @rc of a struct durable_file (lib/util.h) as the objstore reports
 * it: as objstore_io_fail(), but -EINVAL for a path too long and @missing (ENOENT
 * where the caller makes the directory again, else EIO) for a missing directory.
 */
int objstore_durable_fail(struct err *e, int rc, const struct durable_file *d, int missing);

/* file:///abs/path; creates the directory. */
int objstore_local_open(const char *dir, struct objstore **out, struct err *e);
/*
 * s3://bucket[/prefix] on any S3-compatible server, configured from the environment as the AWS
 * tools are (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN); see backend/objstore/s3_client.h and docs/s3.md. Checks nothing on the
 * server.
 */
int objstore_s3_open(const char *url, struct objstore **out, struct err *e);

static inline int objstore_put_file(struct objstore *os, const char *key, const char *path,
				    struct err *e)
{
	return os->ops->put_file(os, key, path, e);
}
static inline int objstore_put_buf(struct objstore *os, const char *key, const void *data,
				   size_t len, struct err *e)
{
	return os->ops->put_buf(os, key, data, len, e);
}
static inline int objstore_get_file(struct objstore *os, const char *key, const char *path,
				    struct err *e)
{
	return os->ops->get_file(os, key, path, e);
}
static inline int objstore_get_buf(struct objstore *os, const char *key, char **out, size_t *len,
				   size_t max, struct err *e)
{
	return os->ops->get_buf(os, key, out, len, max, e);
}
static inline int objstore_get_range(struct objstore *os, const char *key, int64_t off, size_t len,
				     void *buf, struct err *e)
{
	return os->ops->get_range(os, key, off, len, buf, e);
}
static inline int objstore_del(struct objstore *os, const char *key, struct err *e)
{
	return os->ops->del(os, key, e);
}
static inline int objstore_list(struct objstore *os, const char *prefix,
				int (*fn)(const char *key, int64_t size, void *arg), void *arg,
				struct err *e)
{
	return os->ops->list(os, prefix, fn, arg, e);
}
static inline int objstore_sweep(struct objstore *os, int64_t min_age_ms, struct err *e)
{
	return os->ops->sweep(os, min_age_ms, e);
}
static inline void objstore_close(struct objstore *os)
{
	if (os)
		os->ops->close(os);
}

#endif
