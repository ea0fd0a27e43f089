#include "backend/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/manifest.h"
#include "backend/objstore.h"
#include "lib/strbuf.h"

/* Read size for hashing, and so the step between two progress reports. */
#define HASH_BUF (1u << 20)
#define MANIFEST_MAX STRBUF_MAX
#define ID_MAX 63
#define TMP_HEX 16

struct store {
	struct objstore *os; /* the only state: everything else lives in the objstore */
};

/* [a-z0-9][a-z0-9._-]{0,62}, which also keeps ".tmp." out of keys. */
static bool id_ok(const char *id)
{
	size_t len = strlen(id);
	if (len == 0 || len > ID_MAX || strstr(id, ".tmp."))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = id[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && (i == 0 || !strchr("._-", c)))
			return false;
	}
	return true;
}

static int check_id(const char *id, struct err *e)
{
	if (!id_ok(id))
		return err_set(e, EINVAL, "invalid snapshot id \"%.*s\"", ID_MAX + 1, id);
	return 0;
}

static void manifest_key(const char *id, char key[OBJ_KEY_MAX])
{
	/* Cannot truncate: ids are at most ID_MAX bytes. */
	snprintf(key, OBJ_KEY_MAX, "manifests/%s.json", id);
}

static void data_key(const char *id, const char *name, char key[OBJ_KEY_MAX])
{
	/* Cannot truncate: ids and names are bounded well under OBJ_KEY_MAX. */
	snprintf(key, OBJ_KEY_MAX, "data/%s/%s", id, name);
}

/* Re-raise an objstore failure with "snapshot ID: " before its message. */
static int wrap(struct err *e, const char *id, int rc, const struct err *inner)
{
	return err_set(e, -rc, "snapshot %s: %s", id, inner->msg);
}

int store_open(const char *url, const char *state_dir, struct store **out, struct err *e)
{
	char dir[PATH_MAX];
	if (!url || url[0] == '\0') {
		if (!state_dir || xsnprintf(dir, sizeof(dir), "%s/store", state_dir) < 0)
			return err_set(e, EINVAL, "no store URL and no usable state directory");
	} else if (str_has_prefix(url, "s3://")) {
		dir[0] = '\0'; /* objstore_s3_open() reads the URL itself */
	} else if (str_has_prefix(url, "file:///")) {
		if (xsnprintf(dir, sizeof(dir), "%s", url + strlen("file://")) < 0)
			return err_set(e, EINVAL, "store path is too long");
	} else {
		/* Not echoed: an unknown URL might carry credentials. */
		return err_set(e, EINVAL, "store URL must be file:///path or s3://bucket/prefix");
	}
	_cleanup_free_ struct store *st = calloc(1, sizeof(*st));
	if (!st)
		return err_set(e, ENOMEM, "out of memory");
	int rc = dir[0] ? objstore_local_open(dir, &st->os, e) : objstore_s3_open(url, &st->os, e);
	if (rc < 0)
		return rc;
	*out = steal_ptr(st);
	return 0;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	objstore_close(st->os);
	free(st);
}

const char *store_url(const struct store *st)
{
	return st->os->url;
}

static void md_ctx_freep(EVP_MD_CTX **ctx)
{
	EVP_MD_CTX_free(*ctx);
}

struct progress {
	store_progress_fn fn; /* may be NULL */
	void *arg;
	int64_t done, total;
};

static void report(struct progress *p, int64_t add)
{
	p->done += add;
	if (p->fn)
		p->fn(p->arg, p->done, p->total);
}

/* Fill @buf from @fd unless the file ends first: returns the bytes read or -errno. */
static ssize_t read_full(int fd, unsigned char *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

static void to_hex(const unsigned char *md, unsigned int len, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	for (unsigned int i = 0; i < len; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 0xf];
	}
	hex[2 * len] = '\0';
}

/* SHA-256 and size of the file at @path, reporting progress (if @p) after each buffer. */
static int hash_file(const char *path, struct manifest_file *f, struct progress *p, struct err *e)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, EIO, "cannot open %s: %s", path, strerror(errno));
	_cleanup_free_ unsigned char *buf = malloc(HASH_BUF);
	_cleanup_(md_ctx_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!buf || !ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL))
		return err_set(e, ENOMEM, "cannot start a SHA-256 digest");
	f->size = 0;
	for (;;) {
		ssize_t n = read_full(fd, buf, HASH_BUF);
		if (n < 0)
			return err_set(e, EIO, "cannot read %s: %s", path, strerror((int)-n));
		if (n == 0)
			break;
		if (!EVP_DigestUpdate(ctx, buf, (size_t)n))
			return err_set(e, EIO, "SHA-256 of %s failed", path);
		f->size += n;
		if (p)
			report(p, n);
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int md_len = 0;
	if (!EVP_DigestFinal_ex(ctx, md, &md_len) || md_len * 2 != SHA256_HEX_LEN)
		return err_set(e, EIO, "SHA-256 of %s failed", path);
	to_hex(md, md_len, f->sha256);
	return 0;
}

static void free_namelist(struct dirent **names, int n)
{
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* Accept one entry of a snapshot directory: regular files only, with names keys can hold. */
static int scan_entry(int dfd, const char *dir, const char *name, struct manifest_file *f,
		      int64_t *total, struct err *e)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return err_set(e, EIO, "cannot stat %s/%s: %s", dir, name, strerror(errno));
	if (!S_ISREG(st.st_mode)) {
		warning("snapshot store: skipping %s/%s: not a regular file", dir, name);
		return 0;
	}
	if (!manifest_name_ok(name))
		return err_set(e, EINVAL, "cannot store %s/%s: unsupported file name", dir, name);
	memcpy(f->name, name, strlen(name) + 1);
	*total += st.st_size;
	return 1;
}

/* The regular files of @dir, sorted by name, and their total size (for progress). */
static int scan_dir(const char *dir, struct manifest_file **files, size_t *nfiles, int64_t *total,
		    struct err *e)
{
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent **names = NULL;
	int n = dfd < 0 ? -1 : scandir(dir, &names, NULL, alphasort);
	if (n < 0)
		return err_set(e, EIO, "cannot read %s: %s", dir, strerror(errno));
	int rc = 0;
	_cleanup_free_ struct manifest_file *out = calloc((size_t)n + 1, sizeof(*out));
	size_t count = 0;
	*total = 0;
	if (!out)
		rc = err_set(e, ENOMEM, "out of memory");
	for (int i = 0; rc == 0 && i < n; i++) {
		if (!strcmp(names[i]->d_name, ".") || !strcmp(names[i]->d_name, ".."))
			continue;
		rc = scan_entry(dfd, dir, names[i]->d_name, &out[count], total, e);
		if (rc > 0) {
			count++;
			rc = 0;
		}
	}
	free_namelist(names, n);
	if (rc == 0 && count > MANIFEST_FILES_MAX)
		rc = err_set(e, EINVAL, "cannot store %s: more than %d files", dir,
			     MANIFEST_FILES_MAX);
	if (rc < 0)
		return rc;
	*files = steal_ptr(out);
	*nfiles = count;
	return 0;
}

/* Append every key under @prefix to @keys, each NUL-terminated. */
static int add_key(const char *key, int64_t size, void *arg)
{
	(void)size;
	return strbuf_add(arg, key, strlen(key) + 1);
}

static int list_keys(struct store *st, const char *prefix, struct strbuf *keys, struct err *e)
{
	int rc = objstore_list(st->os, prefix, add_key, keys, e);
	if (rc == -EFBIG || rc == -ENOMEM)
		rc = err_set(e, -rc, "too many objects under %s in %s", prefix, st->os->url);
	return rc;
}

/* Delete each NUL-separated key of @keys; returns how many, or the first failure. */
static int del_keys(struct store *st, const struct strbuf *keys, struct err *e)
{
	int count = 0;
	for (size_t off = 0; off < keys->len; off += strlen(keys->buf + off) + 1) {
		int rc = objstore_del(st->os, keys->buf + off, e);
		if (rc < 0)
			return rc;
		count++;
	}
	return count;
}

/* Remove the data objects of snapshot @id; returns how many. */
static int delete_data(struct store *st, const char *id, struct err *e)
{
	char prefix[OBJ_KEY_MAX];
	snprintf(prefix, sizeof(prefix), "data/%s/", id);
	_cleanup_strbuf_ struct strbuf keys = STRBUF_INIT;
	int rc = list_keys(st, prefix, &keys, e);
	return rc < 0 ? rc : del_keys(st, &keys, e);
}

/* Ids are never reused; refusing keeps a put from mixing data with a completed snapshot. */
static int check_absent(struct store *st, const char *id, struct err *e)
{
	char key[OBJ_KEY_MAX];
	manifest_key(id, key);
	_cleanup_free_ char *json = NULL;
	struct err inner = {0};
	int rc = objstore_get_buf(st->os, key, &json, NULL, MANIFEST_MAX, &inner);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return wrap(e, id, rc, &inner);
	return err_set(e, EEXIST, "snapshot %s is already in the store", id);
}

static int put_file(struct store *st, const char *id, const char *dir, struct manifest_file *f,
		    struct progress *p, struct err *e)
{
	char path[PATH_MAX], key[OBJ_KEY_MAX];
	if (xsnprintf(path, sizeof(path), "%s/%s", dir, f->name) < 0)
		return err_set(e, EINVAL, "path %s/%s is too long", dir, f->name);
	int rc = hash_file(path, f, p, e);
	if (rc < 0)
		return rc;
	data_key(id, f->name, key);
	struct err inner = {0};
	rc = objstore_put_file(st->os, key, path, &inner);
	return rc < 0 ? wrap(e, id, rc, &inner) : 0;
}

/* Undo a failed put: the manifest (if its put got that far) goes first, then the data. */
static void put_cleanup(struct store *st, const char *id)
{
	char key[OBJ_KEY_MAX];
	struct err ignored = {0};
	manifest_key(id, key);
	if (objstore_del(st->os, key, &ignored) < 0 || delete_data(st, id, &ignored) < 0)
		warning("snapshot %s: leaving data for store_collect(): %s", id, ignored.msg);
}

int store_put_snapshot(struct store *st, const char *id, const char *dir, const cJSON *meta,
		       store_progress_fn progress, void *arg, struct store_put_result *res,
		       struct err *e)
{
	int rc = check_id(id, e);
	if (rc == 0)
		rc = check_absent(st, id, e);
	_cleanup_free_ struct manifest_file *files = NULL;
	size_t nfiles = 0;
	struct progress p = {.fn = progress, .arg = arg};
	if (rc == 0)
		rc = scan_dir(dir, &files, &nfiles, &p.total, e);
	if (rc < 0)
		return rc;
	report(&p, 0);
	int64_t size = 0;
	for (size_t i = 0; rc == 0 && i < nfiles; i++) {
		rc = put_file(st, id, dir, &files[i], &p, e);
		size += files[i].size;
	}
	_cleanup_free_ char *json = NULL;
	size_t len = 0;
	if (rc == 0)
		rc = manifest_build(meta, files, nfiles, &json, &len, e);
	char key[OBJ_KEY_MAX];
	manifest_key(id, key);
	struct err inner = {0};
	if (rc == 0) {
		rc = objstore_put_buf(st->os, key, json, len, &inner);
		if (rc < 0)
			rc = wrap(e, id, rc, &inner);
	}
	if (rc < 0) {
		put_cleanup(st, id);
		return rc;
	}
	p.total = p.done;
	report(&p, 0);
	if (res) {
		res->size_bytes = size;
		/* Whole files: everything written is new, the manifest included. */
		res->stored_bytes = size + (int64_t)len;
	}
	return 0;
}

int store_get_manifest(struct store *st, const char *id, char **json, struct err *e)
{
	int rc = check_id(id, e);
	if (rc < 0)
		return rc;
	char key[OBJ_KEY_MAX];
	manifest_key(id, key);
	struct err inner = {0};
	rc = objstore_get_buf(st->os, key, json, NULL, MANIFEST_MAX, &inner);
	if (rc == -ENOENT)
		return err_set(e, ENOENT, "snapshot %s is not in the store", id);
	return rc < 0 ? wrap(e, id, rc, &inner) : 0;
}

/* Fetch one file into @dir under a temp name, verify it, then give it its name. */
static int get_file(struct store *st, const char *id, const char *dir,
		    const struct manifest_file *want, struct err *e)
{
	char path[PATH_MAX], tmp[PATH_MAX], hex[TMP_HEX + 1], key[OBJ_KEY_MAX];
	int rc = random_hex(hex, TMP_HEX);
	if (rc < 0)
		return err_set(e, EIO, "cannot make a temp name: %s", strerror(-rc));
	if (xsnprintf(path, sizeof(path), "%s/%s", dir, want->name) < 0 ||
	    xsnprintf(tmp, sizeof(tmp), "%s.tmp.%s", path, hex) < 0)
		return err_set(e, EINVAL, "snapshot %s: path %s/%s is too long", id, dir,
			       want->name);
	data_key(id, want->name, key);
	struct err inner = {0};
	rc = objstore_get_file(st->os, key, tmp, &inner);
	if (rc == -ENOENT)
		return err_set(e, EIO, "snapshot %s: file %s is missing from the store", id,
			       want->name);
	if (rc < 0)
		return wrap(e, id, rc == -ENOSPC ? rc : -EIO, &inner);
	struct manifest_file got = {0};
	rc = hash_file(tmp, &got, NULL, e);
	if (rc == 0 && got.size != want->size)
		rc = err_set(e, EIO, "snapshot %s: file %s is corrupt (size %lld, expected %lld)",
			     id, want->name, (long long)got.size, (long long)want->size);
	if (rc == 0 && strcmp(got.sha256, want->sha256))
		rc = err_set(e, EIO, "snapshot %s: file %s is corrupt (sha256 mismatch)", id,
			     want->name);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = err_set(e, EIO, "snapshot %s: cannot rename %s: %s", id, tmp, strerror(errno));
	if (rc < 0)
		unlink(tmp);
	return rc;
}

/* Take back what a failed get wrote: its first @n files, and @dir if the get made it. */
static void get_cleanup(const char *dir, bool made_dir, const struct manifest_file *files, size_t n)
{
	char path[PATH_MAX];
	for (size_t i = 0; i < n; i++) {
		if (xsnprintf(path, sizeof(path), "%s/%s", dir, files[i].name) >= 0)
			unlink(path);
	}
	if (made_dir)
		rmdir(dir);
}

int store_get_snapshot(struct store *st, const char *id, const char *dir, struct err *e)
{
	_cleanup_free_ char *json = NULL;
	int rc = store_get_manifest(st, id, &json, e);
	if (rc < 0)
		return rc;
	_cleanup_free_ struct manifest_file *files = NULL;
	size_t nfiles = 0;
	rc = manifest_parse(json, id, &files, &nfiles, e);
	if (rc < 0)
		return rc;
	struct stat sb;
	bool made_dir = stat(dir, &sb) < 0;
	rc = mkdir_p(dir, 0755);
	if (rc < 0)
		return err_set(e, -rc == ENOSPC ? ENOSPC : EIO, "snapshot %s: cannot create %s: %s",
			       id, dir, strerror(-rc));
	size_t done = 0;
	while (rc == 0 && done < nfiles) {
		rc = get_file(st, id, dir, &files[done], e);
		if (rc == 0)
			done++;
	}
	if (rc == 0) {
		rc = fsync_dir(dir);
		if (rc < 0)
			rc = err_set(e, EIO, "snapshot %s: cannot fsync %s: %s", id, dir,
				     strerror(-rc));
	}
	if (rc < 0)
		get_cleanup(dir, made_dir, files, done);
	return rc;
}

struct list_ctx {
	int (*fn)(const char *id, void *arg);
	void *arg;
	int rc; /* what fn returned when it stopped the walk */
};

/* "manifests/<id>.json" → fn(id); other names in manifests/ are not snapshots. */
static int list_one(const char *key, int64_t size, void *arg)
{
	struct list_ctx *ctx = arg;
	(void)size;
	const char *name = key + strlen("manifests/");
	size_t len = strlen(name);
	char id[ID_MAX + 1];
	if (strchr(name, '/') || len <= strlen(".json") || strcmp(name + len - 5, ".json"))
		return 0;
	len -= strlen(".json");
	if (len > ID_MAX)
		return 0;
	memcpy(id, name, len);
	id[len] = '\0';
	if (!id_ok(id))
		return 0;
	ctx->rc = ctx->fn(id, ctx->arg);
	return ctx->rc;
}

int store_list_snapshots(struct store *st, int (*fn)(const char *id, void *arg), void *arg,
			 struct err *e)
{
	struct list_ctx ctx = {.fn = fn, .arg = arg};
	int rc = objstore_list(st->os, "manifests/", list_one, &ctx, e);
	return ctx.rc ? ctx.rc : rc;
}

int store_delete_snapshot(struct store *st, const char *id, struct err *e)
{
	int rc = check_id(id, e);
	if (rc < 0)
		return rc;
	char key[OBJ_KEY_MAX];
	manifest_key(id, key);
	struct err inner = {0};
	rc = objstore_del(st->os, key, &inner);
	if (rc == 0)
		rc = delete_data(st, id, &inner);
	return rc < 0 ? wrap(e, id, rc, &inner) : 0;
}

static int add_id(const char *id, void *arg)
{
	return strbuf_add(arg, id, strlen(id) + 1);
}

/* Whether @id is one of the NUL-separated strings of @set. */
static bool in_set(const struct strbuf *set, const char *id, size_t id_len)
{
	for (size_t off = 0; off < set->len; off += strlen(set->buf + off) + 1) {
		if (strlen(set->buf + off) == id_len && !memcmp(set->buf + off, id, id_len))
			return true;
	}
	return false;
}

struct orphans {
	const struct strbuf *live; /* ids with a manifest or in keep_ids */
	struct strbuf keys;	   /* data keys to delete */
};

static int add_orphan(const char *key, int64_t size, void *arg)
{
	struct orphans *o = arg;
	(void)size;
	const char *id = key + strlen("data/");
	const char *slash = strchr(id, '/');
	if (!slash || in_set(o->live, id, (size_t)(slash - id)))
		return 0;
	return strbuf_add(&o->keys, key, strlen(key) + 1);
}

int store_collect(struct store *st, const char *const *keep_ids, size_t nkeep, struct err *e)
{
	/* Manifests are read before data: a put that completes in between is in @keep_ids. */
	_cleanup_strbuf_ struct strbuf live = STRBUF_INIT;
	int rc = store_list_snapshots(st, add_id, &live, e);
	for (size_t i = 0; rc == 0 && i < nkeep; i++)
		rc = strbuf_add(&live, keep_ids[i], strlen(keep_ids[i]) + 1);
	if (rc == -EFBIG || rc == -ENOMEM)
		return err_set(e, -rc, "too many snapshots in %s", st->os->url);
	if (rc < 0)
		return rc;
	struct orphans o = {.live = &live, .keys = STRBUF_INIT};
	rc = objstore_list(st->os, "data/", add_orphan, &o, e);
	if (rc == -EFBIG || rc == -ENOMEM)
		rc = err_set(e, -rc, "too many objects in %s", st->os->url);
	if (rc == 0)
		rc = del_keys(st, &o.keys, e);
	strbuf_release(&o.keys);
	return rc;
}
