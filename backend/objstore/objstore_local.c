/*
 * objstore_local.c - the object store on a local (or mounted) directory.
 *
 * Packs are sandbox memory (keys, tokens, env values): the store's
 * directories are 0700 and its objects 0600, and a root another user could
 * enter is made 0700 at open (docs/design.md, "Who may do what").
 */
#include "backend/objstore/objstore.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Temp files are KEY + TMP_MARK + random hex (lib/util.h tmp_name()). */
/* How often a put retries when a concurrent del pruned the directory it just made. */
#define PUT_TRIES 5

struct local_store {
	struct objstore os; /* first: the ops get a struct objstore * */
	char root[PATH_MAX];
	size_t root_len;
};

static struct local_store *to_local(struct objstore *os)
{
	return (struct local_store *)os;
}

static int key_path(struct local_store *ls, const char *key, char path[PATH_MAX], struct err *e)
{
	if (!objstore_key_ok(key))
		return err_set(e, EINVAL, "invalid object key \"%.*s\"", OBJ_KEY_MAX, key);
	if (xsnprintf(path, PATH_MAX, "%s/%s", ls->root, key) < 0)
		return err_set(e, EINVAL, "object key %s is too long", key);
	return 0;
}

static int fill(int fd, const struct objstore_source *src)
{
	if (src->fd >= 0)
		return copy_fd(src->fd, fd);
	return write_all(fd, src->data, (size_t)src->len);
}

/*
 * Create @path durably (struct durable_file, lib/util.h). A missing directory
 * is @missing: ENOENT for a put, which makes it again; EIO for a get_file.
 */
static int write_atomic(const char *path, const struct objstore_source *src, int missing,
			struct err *e)
{
	struct durable_file d;
	int rc = durable_open(&d, path);
	if (rc == 0)
		rc = fill(d.fd, src);
	rc = durable_end(&d, rc);
	return rc < 0 ? objstore_durable_fail(e, rc, &d, missing) : 0;
}

/* An ENOENT means a concurrent del pruned a directory on the way: put retries. */
static int dir_fail(struct err *e, int code, const char *what, const char *dir)
{
	if (code == ENOENT)
		return err_set(e, ENOENT, "cannot %s %s: %s", what, dir, strerror(code));
	return objstore_io_fail(e, code, what, dir);
}

/* mkdir each directory of @key under the root; a new one is made durable in its parent. */
static int make_parents(struct local_store *ls, const char *key, struct err *e)
{
	char dir[PATH_MAX], parent[PATH_MAX];
	for (const char *slash = strchr(key, '/'); slash; slash = strchr(slash + 1, '/')) {
		if (xsnprintf(dir, sizeof(dir), "%s/%.*s", ls->root, (int)(slash - key), key) < 0)
			return err_set(e, EINVAL, "object key %s is too long", key);
		if (mkdir(dir, 0700) < 0) {
			if (errno == EEXIST)
				continue;
			return dir_fail(e, errno, "create directory", dir);
		}
		path_parent(dir, parent);
		int rc = fsync_dir(parent);
		if (rc < 0)
			return dir_fail(e, -rc, "fsync", parent);
	}
	return 0;
}

static void prune_parents(struct local_store *ls, const char *path);

static int put_source(struct local_store *ls, const char *key, const struct objstore_source *src,
		      struct err *e)
{
	char path[PATH_MAX];
	int rc = key_path(ls, key, path, e);
	if (rc < 0)
		return rc;
	/* A del of a sibling key may prune a directory between our mkdir and create. */
	for (int tries = 1;; tries++) {
		rc = make_parents(ls, key, e);
		if (rc == 0)
			rc = write_atomic(path, src, ENOENT, e);
		/* A failed put leaves no directories behind it (a full disk, say). */
		if (rc < 0 && rc != -ENOENT)
			prune_parents(ls, path);
		if (rc != -ENOENT)
			return rc;
		if (tries == PUT_TRIES)
			return err_set(e, EIO, "cannot store %s: its directory keeps vanishing",
				       key);
	}
}

static int local_put_buf(struct objstore *os, const char *key, const void *data, size_t len,
			 struct err *e)
{
	struct objstore_source src = {.data = data, .len = (int64_t)len, .fd = -1};
	return put_source(to_local(os), key, &src, e);
}

static int local_put_file(struct objstore *os, const char *key, const char *path, struct err *e)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, EIO, "cannot open %s: %s", path, strerror(errno));
	struct objstore_source src = {.fd = fd};
	/* put_source() retries only before it has read anything from @fd. */
	return put_source(to_local(os), key, &src, e);
}

/* Open object @key to read it (@path: its file): the descriptor, or -errno with @e filled. */
static int open_object(struct objstore *os, const char *key, char path[PATH_MAX], struct err *e)
{
	int rc = key_path(to_local(os), key, path, e);
	if (rc < 0)
		return rc;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return err_set(e, ENOENT, "no object %s in %s", key, os->url);
	return fd < 0 ? objstore_io_fail(e, errno, "open", path) : fd;
}

static int local_get_file(struct objstore *os, const char *key, const char *path, struct err *e)
{
	char src_path[PATH_MAX];
	_cleanup_close_ int fd = open_object(os, key, src_path, e);
	if (fd < 0)
		return fd;
	struct objstore_source src = {.fd = fd};
	/* Here a missing directory is the caller's destination, not a missing key. */
	return write_atomic(path, &src, EIO, e);
}

static int local_get_buf(struct objstore *os, const char *key, char **out, size_t *len, size_t max,
			 struct err *e)
{
	struct local_store *ls = to_local(os);
	char path[PATH_MAX];
	int rc = key_path(ls, key, path, e);
	if (rc < 0)
		return rc;
	rc = read_file(path, out, len, max);
	if (rc == -ENOENT)
		return err_set(e, ENOENT, "no object %s in %s", key, os->url);
	if (rc == -EFBIG)
		return err_set(e, EFBIG, "object %s is larger than %zu bytes", key, max);
	return rc < 0 ? objstore_io_fail(e, -rc, "read", path) : 0;
}

static int local_get_range(struct objstore *os, const char *key, int64_t off, size_t len, void *buf,
			   struct err *e)
{
	char path[PATH_MAX];
	if (off < 0)
		return err_set(e, EINVAL, "negative offset in object %s", key);
	_cleanup_close_ int fd = open_object(os, key, path, e);
	if (fd < 0)
		return fd;
	int rc = pread_all(fd, buf, len, off);
	if (rc == -ENODATA)
		return err_set(e, EIO, "object %s ends before byte %lld", key,
			       (long long)(off + (int64_t)len));
	return rc < 0 ? objstore_io_fail(e, -rc, "read", path) : 0;
}

/* rmdir empty directories from @path's parent up to, not including, the root. */
static void prune_parents(struct local_store *ls, const char *path)
{
	char dir[PATH_MAX];
	bool pruned = false;
	if (path_parent(path, dir) < 0)
		return;
	/* ENOTEMPTY (or a concurrent prune) ends the climb. */
	while (strlen(dir) > ls->root_len && rmdir(dir) == 0) {
		pruned = true;
		*strrchr(dir, '/') = '\0';
	}
	/* Durable, so that a del that raced with this prune (see local_del) is too. */
	if (pruned)
		fsync_dir(dir);
}

static int local_del(struct objstore *os, const char *key, struct err *e)
{
	struct local_store *ls = to_local(os);
	char path[PATH_MAX], dir[PATH_MAX];
	int rc = key_path(ls, key, path, e);
	if (rc < 0)
		return rc;
	if (unlink(path) < 0)
		return errno == ENOENT ? 0 : objstore_io_fail(e, errno, "delete", path);
	/*
	 * A delete undone by a crash could resurrect a manifest without its data.
	 * ENOENT: a concurrent del pruned the directory, and fsyncs its parent.
	 */
	path_parent(path, dir);
	rc = fsync_dir(dir);
	if (rc < 0 && rc != -ENOENT)
		return objstore_io_fail(e, -rc, "fsync", dir);
	prune_parents(ls, path);
	return 0;
}

struct walk {
	const char *prefix;
	int (*fn)(const char *key, int64_t size, void *arg);
	void *arg;
	struct err *e;
	char key[OBJ_KEY_MAX]; /* the key of the directory being read, ending in '/' */
};

static int walk_dir(struct walk *w, int dfd, size_t key_len);

/* Visit one directory entry; returns the callback's non-zero value to stop the walk. */
static int walk_entry(struct walk *w, int dfd, const char *name, size_t key_len)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : objstore_io_fail(w->e, errno, "stat", name);
	bool is_dir = S_ISDIR(st.st_mode);
	if (!is_dir && (!S_ISREG(st.st_mode) || strstr(name, TMP_MARK)))
		return 0;
	int n =
	    snprintf(w->key + key_len, sizeof(w->key) - key_len, "%s%s", name, is_dir ? "/" : "");
	if (n < 0 || (size_t)n >= sizeof(w->key) - key_len || !str_has_prefix(w->key, w->prefix))
		return 0;
	if (!is_dir)
		return w->fn(w->key, st.st_size, w->arg);
	int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return errno == ENOENT ? 0
				       : objstore_io_fail(w->e, errno, "open directory", w->key);
	return walk_dir(w, sub, key_len + (size_t)n);
}

/* Walk the directory @dfd (consumed) whose key so far is w->key[0..key_len). */
static int walk_dir(struct walk *w, int dfd, size_t key_len)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		int rc = objstore_io_fail(w->e, errno, "read directory", w->key);
		close(dfd);
		return rc;
	}
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = dir_next(d)))
		rc = walk_entry(w, dirfd(d), de->d_name, key_len);
	if (rc == 0 && errno)
		rc = objstore_io_fail(w->e, errno, "read directory", w->key);
	closedir(d);
	return rc;
}

static int local_list(struct objstore *os, const char *prefix,
		      int (*fn)(const char *key, int64_t size, void *arg), void *arg, struct err *e)
{
	struct local_store *ls = to_local(os);
	struct walk w = {.prefix = prefix, .fn = fn, .arg = arg, .e = e};
	/* Start in the deepest directory the prefix names: "data/x" reads only data/. */
	const char *slash = strrchr(prefix, '/');
	size_t base_len = slash ? (size_t)(slash - prefix) + 1 : 0;
	if (base_len >= sizeof(w.key))
		return 0;
	memcpy(w.key, prefix, base_len);
	w.key[base_len] = '\0';
	char dir[PATH_MAX];
	if (xsnprintf(dir, sizeof(dir), "%s/%s", ls->root, w.key) < 0)
		return 0;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return (errno == ENOENT || errno == ENOTDIR)
			   ? 0
			   : objstore_io_fail(e, errno, "open", dir);
	return walk_dir(&w, dfd, base_len);
}

struct sweep {
	struct local_store *ls;
	int64_t cutoff_ms; /* temp files modified at or before this are removed */
	int count;
	struct err *e;
};

static int sweep_dir(struct sweep *s, const char *dir);

/* One entry of a directory under the root: descend, or remove a stale temp file. */
static int sweep_entry(struct sweep *s, const char *dir, const char *name)
{
	char path[PATH_MAX];
	struct stat st;
	if (xsnprintf(path, sizeof(path), "%s/%s", dir, name) < 0)
		return 0;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : objstore_io_fail(s->e, errno, "stat", path);
	if (S_ISDIR(st.st_mode))
		return sweep_dir(s, path);
	int64_t mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
	if (!S_ISREG(st.st_mode) || !strstr(name, TMP_MARK) || mtime_ms > s->cutoff_ms)
		return 0;
	if (unlink(path) < 0)
		return errno == ENOENT ? 0 : objstore_io_fail(s->e, errno, "delete", path);
	s->count++;
	prune_parents(s->ls, path);
	return 0;
}

static int sweep_dir(struct sweep *s, const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : objstore_io_fail(s->e, errno, "read directory", dir);
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = dir_next(d)))
		rc = sweep_entry(s, dir, de->d_name);
	if (rc == 0 && errno)
		rc = objstore_io_fail(s->e, errno, "read directory", dir);
	closedir(d);
	return rc;
}

static int local_sweep(struct objstore *os, int64_t min_age_ms, struct err *e)
{
	struct sweep s = {.ls = to_local(os), .cutoff_ms = now_ms() - min_age_ms, .e = e};
	int rc = sweep_dir(&s, s.ls->root);
	return rc < 0 ? rc : s.count;
}

static void local_close(struct objstore *os)
{
	free(to_local(os));
}

static const struct objstore_ops local_ops = {
    .put_file = local_put_file,
    .put_buf = local_put_buf,
    .get_file = local_get_file,
    .get_buf = local_get_buf,
    .get_range = local_get_range,
    .del = local_del,
    .list = local_list,
    .sweep = local_sweep,
    .close = local_close,
};

/*
 * The root, 0700 if it is ours. Another owner's (a share mounted with
 * root_squash, say) is the operator's choice and only warned about: the
 * store is untrusted input anyway, but that owner can read every snapshot.
 */
static int make_root_private(const char *root, struct err *e)
{
	_cleanup_close_ int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return err_set(e, EIO, "cannot open store directory %s: %s", root, strerror(errno));
	if (st.st_uid != geteuid()) {
		warning("store directory %s is owned by uid %u, who can read every snapshot in it",
			root, (unsigned)st.st_uid);
		return 0;
	}
	int rc = dir_tighten(fd, root, st.st_mode, NULL);
	return rc < 0
		   ? err_set(e, EIO, "cannot make store directory %s 0700: %s", root, strerror(-rc))
		   : 0;
}

int objstore_local_open(const char *dir, struct objstore **out, struct err *e)
{
	if (str_has_prefix(dir, "file://"))
		dir += strlen("file://");
	if (dir[0] == '\0')
		return err_set(e, EINVAL, "the store directory is empty");
	int rc = mkdir_p(dir, 0700);
	if (rc < 0)
		return err_set(e, -rc == ENOSPC ? ENOSPC : EIO,
			       "cannot create store directory %s: %s", dir, strerror(-rc));
	_cleanup_free_ struct local_store *ls = calloc(1, sizeof(*ls));
	if (!ls)
		return err_set(e, ENOMEM, "out of memory");
	if (!realpath(dir, ls->root))
		return err_set(e, EIO, "cannot resolve store directory %s: %s", dir,
			       strerror(errno));
	rc = make_root_private(ls->root, e);
	if (rc < 0)
		return rc;
	ls->root_len = strlen(ls->root);
	/* Every key must fit under the root, so key_path() cannot fail on length. */
	if (ls->root_len + 1 + OBJ_KEY_MAX + strlen(TMP_MARK) + TMP_HEX >= sizeof(ls->root) ||
	    xsnprintf(ls->os.url, sizeof(ls->os.url), "file://%s", ls->root) < 0)
		return err_set(e, EINVAL, "store directory %s is too long", ls->root);
	ls->os.ops = &local_ops;
	*out = &steal_ptr(ls)->os;
	return 0;
}
