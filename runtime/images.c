#include "runtime/images.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/files.h"
#include "lib/log.h"
#include "lib/names.h"
#include "runtime/tree_copy.h"

#define HASH_BUF_SIZE (256u << 10)

/*
 * A tree modified this close to the start of a digest is not cached: file
 * times come from a coarse clock, so a later change could carry the same
 * newest time and go unseen (git's "racy clean" problem).
 */
#define RACY_NS (1000 * 1000 * 1000LL)

/* What a cheap lstat walk sees; any change to the tree changes one of these. */
struct fingerprint {
	uint64_t entries;
	uint64_t bytes;	   /* sizes of regular files and symlinks */
	int64_t newest_ns; /* newest mtime or ctime: ctime also moves on chmod */
};

struct cached {
	char name[IMAGE_NAME_MAX];
	struct fingerprint fp;
	char digest[DIGEST_MAX];
	struct cached *next;
};

struct images {
	char dir[PATH_MAX];
	pthread_mutex_t lock; /* guards cache */
	struct cached *cache;
};

/* One walk of a tree: depth-first, each directory's entries in strcmp order. */
struct walk;
typedef int (*visit_fn)(struct walk *w, int dirfd, const char *name, const struct stat *st);

struct walk {
	char path[PATH_MAX]; /* relative path of the entry being visited, "." for the root */
	size_t path_len;
	visit_fn visit;
	struct fingerprint fp;
	EVP_MD_CTX *md;
	unsigned char *buf;
	struct err *e;
};

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int not_dots(const struct dirent *d)
{
	return strcmp(d->d_name, ".") != 0 && strcmp(d->d_name, "..") != 0;
}

static int walk_dir(struct walk *w, int dirfd);

/* Visit one entry (its path already in w->path), then its children if a directory. */
static int walk_entry(struct walk *w, int dirfd, const char *name)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return err_set(w->e, errno, "image walk: cannot stat %s: %s", w->path,
			       strerror(errno));
	int rc = w->visit(w, dirfd, name, &st);
	if (rc < 0 || !S_ISDIR(st.st_mode))
		return rc;
	_cleanup_close_ int fd =
	    openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return err_set(w->e, errno, "image walk: cannot open %s: %s", w->path,
			       strerror(errno));
	return walk_dir(w, fd);
}

static int walk_dir(struct walk *w, int dirfd)
{
	struct dirent **list;
	int n = scandirat(dirfd, ".", &list, not_dots, by_name);
	if (n < 0)
		return err_set(w->e, errno, "image walk: cannot list %s: %s", w->path,
			       strerror(errno));
	size_t base = w->path_len;
	int rc = 0;
	for (int i = 0; i < n; i++) {
		const char *name = list[i]->d_name;
		if (rc == 0 && xsnprintf(w->path + base, sizeof(w->path) - base, "%s%s",
					 base ? "/" : "", name) < 0)
			rc = err_set(w->e, ENAMETOOLONG, "image walk: path too long under %s",
				     w->path);
		if (rc == 0) {
			w->path_len = strlen(w->path);
			rc = walk_entry(w, dirfd, name);
		}
		w->path_len = base;
		w->path[base] = '\0';
		free(list[i]);
	}
	free(list);
	return rc;
}

/* Walk the tree at @root: the root itself as ".", then everything under it. */
static int walk_tree(struct walk *w, const char *root)
{
	w->path[0] = '.';
	w->path[1] = '\0';
	w->path_len = 0;
	struct stat st;
	if (stat(root, &st) < 0)
		return err_set(w->e, errno, "image %s: %s", root, strerror(errno));
	int rc = w->visit(w, AT_FDCWD, root, &st);
	if (rc < 0)
		return rc;
	w->path[0] = '\0';
	_cleanup_close_ int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return err_set(w->e, errno, "image %s: %s", root, strerror(errno));
	return walk_dir(w, fd);
}

static int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

static int visit_fingerprint(struct walk *w, int dirfd, const char *name, const struct stat *st)
{
	(void)dirfd;
	(void)name;
	int64_t m = ts_ns(&st->st_mtim), c = ts_ns(&st->st_ctim);
	w->fp.entries++;
	if (S_ISREG(st->st_mode) || S_ISLNK(st->st_mode))
		w->fp.bytes += (uint64_t)st->st_size;
	if (m > w->fp.newest_ns)
		w->fp.newest_ns = m;
	if (c > w->fp.newest_ns)
		w->fp.newest_ns = c;
	return 0;
}

static char type_char(mode_t mode)
{
	static const struct {
		mode_t type;
		char c;
	} types[] = {{S_IFREG, 'f'}, {S_IFDIR, 'd'}, {S_IFLNK, 'l'},
		     {S_IFCHR, 'c'}, {S_IFBLK, 'b'}, {S_IFIFO, 'p'}};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if ((mode & S_IFMT) == types[i].type)
			return types[i].c;
	return 's';
}

static int hash_file(struct walk *w, int dirfd, const char *name)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return err_set(w->e, errno, "image digest: cannot open %s: %s", w->path,
			       strerror(errno));
	for (;;) {
		ssize_t n = read(fd, w->buf, HASH_BUF_SIZE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return err_set(w->e, errno, "image digest: cannot read %s: %s", w->path,
				       strerror(errno));
		if (n == 0)
			return 0;
		EVP_DigestUpdate(w->md, w->buf, (size_t)n);
	}
}

static int hash_symlink(struct walk *w, int dirfd, const char *name)
{
	ssize_t n = readlinkat(dirfd, name, (char *)w->buf, HASH_BUF_SIZE);
	if (n < 0)
		return err_set(w->e, errno, "image digest: cannot read link %s: %s", w->path,
			       strerror(errno));
	EVP_DigestUpdate(w->md, w->buf, (size_t)n);
	return 0;
}

/*
 * An empty regular etc/resolv.conf is the mount point of an egress
 * sandbox's resolv.conf (docs/network.md), which runsc makes in the image's
 * own directory when the image lacks one: it counts as absent, so the first
 * egress start on a host changes no digest (a snapshot taken before it, or
 * on a host where none ran, stays forkable).
 */
static bool resolv_mount_point(const struct walk *w, const struct stat *st)
{
	return S_ISREG(st->st_mode) && st->st_size == 0 && strcmp(w->path, "etc/resolv.conf") == 0;
}

/*
 * Each entry is "<path>\0<type> <mode> <size>\n" and then its contents.
 * Directories and special files count as size 0: a directory's st_size
 * differs between filesystems holding the same tree.
 */
static int visit_hash(struct walk *w, int dirfd, const char *name, const struct stat *st)
{
	char head[64];
	if (resolv_mount_point(w, st))
		return 0;
	bool has_data = S_ISREG(st->st_mode) || S_ISLNK(st->st_mode);
	long long size = has_data ? (long long)st->st_size : 0;
	int n = snprintf(head, sizeof(head), "%c %04o %lld\n", type_char(st->st_mode),
			 (unsigned)(st->st_mode & 07777), size);
	EVP_DigestUpdate(w->md, w->path, strlen(w->path) + 1);
	EVP_DigestUpdate(w->md, head, (size_t)n);
	if (S_ISREG(st->st_mode))
		return hash_file(w, dirfd, name);
	if (S_ISLNK(st->st_mode))
		return hash_symlink(w, dirfd, name);
	return 0;
}

static int compute_digest(const char *root, char out[DIGEST_MAX], struct err *e)
{
	struct walk w = {.visit = visit_hash, .e = e};
	unsigned char raw[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	_cleanup_free_ unsigned char *buf = malloc(HASH_BUF_SIZE);
	w.md = EVP_MD_CTX_new();
	w.buf = buf;
	int rc = buf && w.md ? 0 : err_set(e, ENOMEM, "image digest: out of memory");
	if (rc == 0 && !EVP_DigestInit_ex(w.md, EVP_sha256(), NULL))
		rc = err_set(e, EIO, "image digest: SHA-256 unavailable");
	if (rc == 0)
		rc = walk_tree(&w, root);
	if (rc == 0 && !EVP_DigestFinal_ex(w.md, raw, &len))
		rc = err_set(e, EIO, "image digest: SHA-256 failed");
	EVP_MD_CTX_free(w.md);
	if (rc < 0)
		return rc;
	memcpy(out, "sha256:", 7);
	hex_encode(raw, len, out + 7);
	return 0;
}

/*
 * The images directory, as the state and the spool: runsc's gofer reads an
 * image's tree as root, and whoever may add or swap an entry there chooses
 * the tree a sandbox gets (`host -> /`). So it and every directory above it
 * must be root's (or the daemon's) and writable by no one else unless
 * sticky (path_trusted(): a sticky /tmp above a 0700 directory passes).
 */
static int dir_trusted(const char *dir, struct err *e)
{
	struct err why = {0};
	int rc = path_trusted(dir, &why);
	if (rc < 0)
		return err_set(
		    e, -rc,
		    "the images directory %s is not one only root can change: %s (make it "
		    "and its parents root's and writable by root alone)",
		    dir, why.msg);
	return 0;
}

int images_open(const char *dir, struct images **out, struct err *e)
{
	/* 0700: image trees keep their modes, setuid programs and device nodes included. */
	int rc = mkdir_p(dir, 0700);
	if (rc < 0)
		return err_set(e, -rc, "cannot create images directory %s: %s", dir, strerror(-rc));
	struct images *im = calloc(1, sizeof(*im));
	if (!im)
		return err_set(e, ENOMEM, "images: out of memory");
	if (!realpath(dir, im->dir))
		rc = err_set(e, errno, "images directory %s: %s", dir, strerror(errno));
	else
		rc = dir_trusted(im->dir, e);
	if (rc < 0) {
		free(im);
		return rc;
	}
	pthread_mutex_init(&im->lock, NULL);
	*out = im;
	return 0;
}

void images_close(struct images *im)
{
	if (!im)
		return;
	while (im->cache) {
		struct cached *next = im->cache->next;
		free(im->cache);
		im->cache = next;
	}
	pthread_mutex_destroy(&im->lock);
	free(im);
}

const char *images_dir(const struct images *im)
{
	return im->dir;
}

int images_exists(struct images *im, const char *name)
{
	char path[PATH_MAX];
	struct stat st;
	if (!image_name_ok(name))
		return -ENOENT;
	if (xsnprintf(path, sizeof(path), "%s/%s", im->dir, name) < 0)
		return -ENOENT;
	/*
	 * stat, not lstat: an image may be a symlink within the directory (an
	 * imported one's link to its version). One leading out of it is listed
	 * still, so that images_pin() can refuse it with a sentence.
	 */
	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return -ENOENT;
	return 0;
}

int images_path(struct images *im, const char *name, char *out, size_t len)
{
	int rc = images_exists(im, name);
	if (rc < 0)
		return rc;
	return xsnprintf(out, len, "%s/%s", im->dir, name) < 0 ? -ENAMETOOLONG : 0;
}

/* Under im->lock. */
static struct cached *cache_find(struct images *im, const char *name)
{
	for (struct cached *c = im->cache; c; c = c->next) {
		if (strcmp(c->name, name) == 0)
			return c;
	}
	return NULL;
}

static bool cache_get(struct images *im, const char *name, const struct fingerprint *fp,
		      char out[DIGEST_MAX])
{
	pthread_mutex_lock(&im->lock);
	struct cached *c = cache_find(im, name);
	bool hit = c && memcmp(&c->fp, fp, sizeof(*fp)) == 0;
	if (hit)
		memcpy(out, c->digest, DIGEST_MAX);
	pthread_mutex_unlock(&im->lock);
	return hit;
}

static void cache_put(struct images *im, const char *name, const struct fingerprint *fp,
		      const char digest[DIGEST_MAX])
{
	pthread_mutex_lock(&im->lock);
	struct cached *c = cache_find(im, name);
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (c) {
			snprintf(c->name, sizeof(c->name), "%s", name);
			c->next = im->cache;
			im->cache = c;
		}
	}
	if (c) {
		c->fp = *fp;
		memcpy(c->digest, digest, DIGEST_MAX);
	}
	pthread_mutex_unlock(&im->lock);
}

/*
 * The hash walk runs without the lock, so a slow image does not hold up
 * others; two threads may then hash the same image at once, which is only
 * wasted work. The fingerprint is taken before hashing, so a change made
 * during the hash shows up as a mismatch next time.
 */
static int tree_digest(struct images *im, const char *name, const char *root, char out[DIGEST_MAX],
		       struct fingerprint *seen, struct err *e)
{
	struct walk w = {.visit = visit_fingerprint, .e = e};
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int rc = walk_tree(&w, root);
	if (rc < 0)
		return rc;
	if (seen)
		*seen = w.fp;
	if (cache_get(im, name, &w.fp, out))
		return 0;
	rc = compute_digest(root, out, e);
	if (rc < 0)
		return rc;
	if (w.fp.newest_ns < ts_ns(&now) - RACY_NS)
		cache_put(im, name, &w.fp, out);
	return 0;
}

/* --- images snapfs-image imported (docs/images.md) --------------------- */

#define OCI_DIR ".oci"

/*
 * The version HEX of @target, the link <dir>/@name holds, into @hex when
 * it is exactly ".oci/@name/HEX/rootfs" as snapfs-image writes it; false
 * for any other link (a tree kept elsewhere is an image of the plain kind).
 */
bool images_oci_link(const char *name, const char *target, char hex[IMAGES_OCI_HEX + 1])
{
	size_t n = strlen(name), prefix = sizeof(OCI_DIR "/") - 1;
	static const char tail[] = "/rootfs";
	if (strncmp(target, OCI_DIR "/", prefix) != 0 || strncmp(target + prefix, name, n) != 0 ||
	    target[prefix + n] != '/')
		return false;
	const char *h = target + prefix + n + 1;
	if (strspn(h, "0123456789abcdef") != IMAGES_OCI_HEX ||
	    strcmp(h + IMAGES_OCI_HEX, tail) != 0)
		return false;
	memcpy(hex, h, IMAGES_OCI_HEX);
	hex[IMAGES_OCI_HEX] = '\0';
	return true;
}

/*
 * The digest file of version @hex of @name under @kind (.oci or .tree):
 * "sha256:HEX", one line. It is read as untrusted text (bounded, checked by
 * image_digest_ok(), and it must name its own version), since anyone with
 * the images directory could have written it.
 */
static int version_digest(struct images *im, const char *kind, const char *name, const char *hex,
			  char out[DIGEST_MAX], struct err *e)
{
	char path[PATH_MAX];
	_cleanup_free_ char *buf = NULL;
	size_t n = 0;
	if (xsnprintf(path, sizeof(path), "%s/%s/%s/%s/digest", im->dir, kind, name, hex) < 0)
		return err_set(e, ENAMETOOLONG, "image %s: path too long", name);
	int rc = read_file(path, &buf, &n, DIGEST_MAX);
	if (rc < 0)
		return err_set(e, EIO, "image %s: cannot read %s: %s", name, path, strerror(-rc));
	if (n > 0 && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	if (!image_digest_ok(buf) || strcmp(buf + sizeof("sha256:") - 1, hex) != 0)
		return err_set(e, EIO, "image %s: %s is not the digest sha256:%s of its version",
			       name, path, hex);
	snprintf(out, DIGEST_MAX, "%s", buf);
	return 0;
}

static int oci_read_digest(struct images *im, const char *name, const char *hex,
			   char out[DIGEST_MAX], struct err *e)
{
	return version_digest(im, OCI_DIR, name, hex, out, e);
}

/*
 * @path (an image, or an imported image's version) resolved, into @out: it
 * must lie below the images directory. A symlink out of it (`host -> /`)
 * would give a sandbox whatever tree the link names, read by runsc's gofer
 * as root: refused, EACCES. A tree kept elsewhere is bind-mounted into the
 * images directory by root, not linked (docs/images.md).
 */
static int resolve_inside(const struct images *im, const char *name, const char *path,
			  char out[PATH_MAX], struct err *e)
{
	if (!realpath(path, out))
		return err_set(e, errno == ENOENT ? ENOENT : EIO, "image %s: cannot resolve %s: %s",
			       name, path, strerror(errno));
	size_t n = strlen(im->dir);
	bool below = strncmp(out, im->dir, n) == 0 && out[n] == '/' && out[n + 1] != '\0';
	if (!below)
		return err_set(e, EACCES,
			       "image %s leads to %s, outside the images directory %s: an image's "
			       "tree must lie in the images directory (bind-mount a tree kept "
			       "elsewhere there instead of linking to it)",
			       name, out, im->dir);
	return 0;
}

/*
 * The tree @path of @name resolved into @root, held to images_resolve()'s
 * rules: below the images directory, and every directory from / down to it
 * root's and writable by root alone. The tree checked is the tree used: the
 * bundle gets the resolved path.
 */
static int check_tree(struct images *im, const char *name, const char *path, char *root, size_t len,
		      struct err *e)
{
	char real[PATH_MAX];
	struct err why = {0};
	int rc = resolve_inside(im, name, path, real, e);
	if (rc < 0)
		return rc;
	/* From / down to the tree: below the images directory, too (images/team/web). */
	rc = path_trusted(real, &why);
	if (rc < 0)
		return err_set(e, -rc,
			       "image %s is not safe to use: %s (every directory from the images "
			       "directory down to an image's tree must be root's and writable by "
			       "root alone)",
			       name, why.msg);
	if (xsnprintf(root, len, "%s", real) < 0)
		return err_set(e, ENAMETOOLONG, "image %s: path too long", name);
	return 0;
}

int images_resolve(struct images *im, const char *name, char *root, size_t len,
		   char hex[IMAGES_OCI_HEX + 1], struct err *e)
{
	char link[PATH_MAX], target[PATH_MAX], path[PATH_MAX];
	hex[0] = '\0';
	if (images_path(im, name, link, sizeof(link)) < 0)
		return err_set(e, ENOENT, "image %s does not exist", name);
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = '\0';
	bool oci = n >= 0 && images_oci_link(name, target, hex);
	if (!oci)
		hex[0] = '\0';
	/* An imported image: the version itself, not the link (a re-import swaps the link). */
	if (xsnprintf(path, sizeof(path), "%s/%s", im->dir, oci ? target : name) < 0)
		return err_set(e, ENAMETOOLONG, "image %s: path too long", name);
	return check_tree(im, name, path, root, len, e);
}

int images_pin(struct images *im, const char *name, char *root, size_t len, char digest[DIGEST_MAX],
	       struct err *e)
{
	char hex[IMAGES_OCI_HEX + 1];
	int rc = images_resolve(im, name, root, len, hex, e);
	if (rc < 0)
		return rc;
	return hex[0] ? oci_read_digest(im, name, hex, digest, e)
		      : tree_digest(im, name, root, digest, NULL, e);
}

int images_digest(struct images *im, const char *name, char out[DIGEST_MAX], struct err *e)
{
	char root[PATH_MAX];
	return images_pin(im, name, root, sizeof(root), out, e);
}

/* --- hand-made trees, taken in as versions (images.h) ------------------- */

#define TREE_DIR ".tree"

/* <dir>/.tree/@name[/@hex[/@leaf]] into @out. */
static int tree_path(const struct images *im, const char *name, const char *hex, const char *leaf,
		     char out[PATH_MAX])
{
	int rc = xsnprintf(out, PATH_MAX, "%s/" TREE_DIR "/%s%s%s%s%s", im->dir, name,
			   hex ? "/" : "", hex ? hex : "", leaf ? "/" : "", leaf ? leaf : "");
	return rc < 0 ? -ENAMETOOLONG : 0;
}

/* Whether version @hex of @name is whole: its digest file names it and its tree is there. */
static bool tree_version_whole(struct images *im, const char *name, const char *hex)
{
	char digest[DIGEST_MAX], path[PATH_MAX];
	struct err ignored = {0};
	struct stat st;
	if (!image_name_ok(name) || version_digest(im, TREE_DIR, name, hex, digest, &ignored) < 0)
		return false;
	return tree_path(im, name, hex, "rootfs", path) == 0 && lstat(path, &st) == 0 &&
	       S_ISDIR(st.st_mode);
}

/*
 * The lock of @name's versions, held (flock) until the returned fd is
 * closed: <dir>/.tree/NAME/lock, which snapfs-image's prune takes too, so
 * a version is never removed while a start takes it in or writes a bundle
 * that names it. Creates .tree/NAME (0700) if missing.
 */
static int tree_lock(struct images *im, const char *name, struct err *e)
{
	char path[PATH_MAX];
	int rc = tree_path(im, name, NULL, NULL, path);
	if (rc == 0)
		rc = mkdir_p(path, 0700);
	if (rc == 0)
		rc = tree_path(im, name, "lock", NULL, path);
	if (rc < 0)
		return err_set(e, -rc, "image %s: cannot make %s/" TREE_DIR "/%s: %s", name,
			       im->dir, name, strerror(-rc));
	int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_set(e, errno, "image %s: cannot open %s: %s", name, path,
			       strerror(errno));
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			int err = errno;
			close(fd);
			return err_set(e, err, "image %s: cannot lock %s: %s", name, path,
				       strerror(err));
		}
	}
	return fd;
}

/* A tree over the bounds is refused before any copy (images.h). */
static int tree_bounds(struct images *im, const char *name, const struct fingerprint *fp,
		       struct err *e)
{
	if (fp->bytes > IMAGES_TREE_MAX_BYTES || fp->entries > IMAGES_TREE_MAX_ENTRIES)
		return err_set(
		    e, EFBIG,
		    "image %s is a tree of %llu bytes in %llu entries, more than a "
		    "start copies in as a version (%llu bytes, %llu entries): make it an "
		    "OCI image and import it with snapfs-image (docs/images.md)",
		    name, (unsigned long long)fp->bytes, (unsigned long long)fp->entries,
		    (unsigned long long)IMAGES_TREE_MAX_BYTES,
		    (unsigned long long)IMAGES_TREE_MAX_ENTRIES);
	int64_t room = free_bytes(im->dir);
	if (room >= 0 && (uint64_t)room < fp->bytes)
		return err_set(
		    e, ENOSPC,
		    "image %s: its tree of %llu bytes does not fit in the %lld bytes free "
		    "in %s, where a start keeps the version it runs from (snapfs-image "
		    "prune %s frees versions no sandbox or snapshot uses)",
		    name, (unsigned long long)fp->bytes, (long long)room, im->dir, name);
	return 0;
}

/*
 * The whole scratch @scratch (its rootfs/ and digest file, synced) becomes
 * version @hex of @name by one rename. A version already whole under that
 * name (the tree was taken in before) is kept and @scratch removed; a torn
 * one is renamed to a scratch name before it is deleted, so no half tree
 * ever has a version's name.
 */
static int tree_install(struct images *im, const char *name, const char *scratch, const char *hex,
			struct err *e)
{
	char final[PATH_MAX], parent[PATH_MAX], trash[PATH_MAX], tmp[PATH_MAX];
	if (tree_path(im, name, hex, NULL, final) < 0 ||
	    tree_path(im, name, NULL, NULL, parent) < 0)
		return err_set(e, ENAMETOOLONG, "image %s: path too long", name);
	if (tree_version_whole(im, name, hex))
		return rm_rf(scratch), 0;
	if (xsnprintf(trash, sizeof(trash), "%s/.trash.XXXXXX", parent) < 0 || !mkdtemp(trash) ||
	    xsnprintf(tmp, sizeof(tmp), "%s/v", trash) < 0)
		return err_set(e, EIO, "image %s: cannot make a scratch name in %s: %s", name,
			       parent, strerror(errno));
	if (rename(final, tmp) < 0 && errno != ENOENT)
		return err_set(e, errno, "image %s: cannot move the torn version %s away: %s", name,
			       final, strerror(errno));
	rm_rf(trash);
	if (rename(scratch, final) < 0)
		return err_set(e, errno, "image %s: cannot rename %s to %s: %s", name, scratch,
			       final, strerror(errno));
	int rc = fsync_dir(parent);
	if (rc < 0)
		return err_set(e, -rc, "image %s: cannot sync %s: %s", name, parent, strerror(-rc));
	return 0;
}

/*
 * Copy the tree @src of @name (seen as @fp) in as a version, under its
 * lock: into a scratch name (.tree/NAME/.take.*), hashed there (the copy's
 * digest names the version, whatever changed in @src during the copy), its
 * digest file written durably, then renamed whole. Its digest into @digest.
 */
static int tree_take_in(struct images *im, const char *name, const char *src,
			const struct fingerprint *fp, char digest[DIGEST_MAX], struct err *e)
{
	char scratch[PATH_MAX], rootfs[PATH_MAX], file[PATH_MAX], line[DIGEST_MAX + 1];
	int rc = tree_bounds(im, name, fp, e);
	if (rc < 0)
		return rc;
	if (tree_path(im, name, ".take.XXXXXX", NULL, scratch) < 0 || !mkdtemp(scratch))
		return err_set(
		    e, EIO, "image %s: cannot make a scratch directory in %s/" TREE_DIR "/%s: %s",
		    name, im->dir, name, strerror(errno));
	if (xsnprintf(rootfs, sizeof(rootfs), "%s/rootfs", scratch) < 0 ||
	    xsnprintf(file, sizeof(file), "%s/digest", scratch) < 0)
		rc = err_set(e, ENAMETOOLONG, "image %s: path too long", name);
	if (rc == 0)
		rc = tree_copy(src, rootfs, e);
	if (rc == 0)
		rc = compute_digest(rootfs, digest, e);
	if (rc == 0) {
		int n = snprintf(line, sizeof(line), "%s\n", digest);
		rc = write_file_durable(file, line, (size_t)n);
		if (rc < 0)
			err_set(e, -rc, "image %s: cannot write %s: %s", name, file, strerror(-rc));
	}
	if (rc == 0)
		rc = tree_install(im, name, scratch, digest + sizeof("sha256:") - 1, e);
	if (rc < 0)
		rm_rf(scratch);
	else
		info("image %s: took its tree in as version %s", name, digest);
	return rc;
}

/*
 * The version of hand-made @name whose tree is @src now (its digest, from
 * the cache when a stat walk sees no change), taken in if this host keeps
 * none: its tree into @root, its digest into @digest. With @want set (a
 * restore), a tree whose digest is not @want is refused before any copy.
 * The caller holds @name's lock (tree_lock()).
 */
static int tree_take(struct images *im, const char *name, const char *src, const char *want,
		     char *root, size_t len, char digest[DIGEST_MAX], struct err *e)
{
	char path[PATH_MAX];
	struct fingerprint fp = {0};
	int rc = tree_digest(im, name, src, digest, &fp, e);
	if (rc < 0)
		return rc;
	if (want[0] && strcmp(want, digest) != 0)
		return err_set(e, EINVAL, IMAGES_NO_VERSION_FMT, name, want, digest);
	if (!tree_version_whole(im, name, digest + sizeof("sha256:") - 1))
		rc = tree_take_in(im, name, src, &fp, digest, e);
	if (rc == 0 && want[0] && strcmp(want, digest) != 0)
		return err_set(e, EINVAL, IMAGES_NO_VERSION_FMT, name, want, digest);
	if (rc == 0 && tree_path(im, name, digest + sizeof("sha256:") - 1, "rootfs", path) < 0)
		rc = err_set(e, ENAMETOOLONG, "image %s: path too long", name);
	return rc < 0 ? rc : check_tree(im, name, path, root, len, e);
}

/* The version of @want kept for @name, if whole, into @root; -ENOENT if none. Under the lock. */
static int tree_kept(struct images *im, const char *name, const char *want, char *root, size_t len,
		     struct err *e)
{
	char path[PATH_MAX];
	const char *hex = want + sizeof("sha256:") - 1;
	if (!image_digest_ok(want) || !tree_version_whole(im, name, hex))
		return -ENOENT;
	if (tree_path(im, name, hex, "rootfs", path) < 0)
		return err_set(e, ENAMETOOLONG, "image %s: path too long", name);
	return check_tree(im, name, path, root, len, e);
}

/*
 * A restore of @want from the version this host keeps of it: 0 with the
 * lock held in *@lock, -ENOENT if none is kept (or it was pruned before the
 * lock was taken), another error with its sentence.
 */
static int take_kept(struct images *im, const char *name, const char *want, char *root, size_t len,
		     int *lock, struct err *e)
{
	if (!image_digest_ok(want) || !tree_version_whole(im, name, want + 7))
		return -ENOENT;
	int fd = tree_lock(im, name, e);
	if (fd < 0)
		return fd;
	int rc = tree_kept(im, name, want, root, len, e);
	if (rc < 0)
		close(fd);
	else
		*lock = fd;
	return rc;
}

int images_take(struct images *im, const char *name, const char *want, char *root, size_t len,
		char digest[DIGEST_MAX], int *lock, struct err *e)
{
	char hex[IMAGES_OCI_HEX + 1], src[PATH_MAX];
	*lock = -1;
	if (!image_name_ok(name))
		return err_set(e, ENOENT, "image %s does not exist", name);
	/* A restore: the version of the snapshot's tree, whatever the image is now. */
	int rc = want[0] ? take_kept(im, name, want, root, len, lock, e) : -ENOENT;
	if (rc == 0)
		snprintf(digest, DIGEST_MAX, "%s", want);
	if (rc != -ENOENT)
		return rc;
	rc = images_resolve(im, name, root, len, hex, e);
	if (rc < 0)
		return rc;
	if (hex[0]) {
		rc = oci_read_digest(im, name, hex, digest, e);
		if (rc == 0 && want[0] && strcmp(want, digest) != 0)
			return err_set(e, EINVAL, IMAGES_CHANGED_FMT, name, want, digest);
		return rc;
	}
	snprintf(src, sizeof(src), "%s", root);
	int fd = tree_lock(im, name, e);
	if (fd < 0)
		return fd;
	rc = tree_take(im, name, src, want, root, len, digest, e);
	if (rc < 0)
		close(fd);
	else
		*lock = fd;
	return rc;
}

bool images_blocker(struct images *im, const char *name, const char *want, char *why, size_t len)
{
	char root[PATH_MAX], hex[IMAGES_OCI_HEX + 1], now[DIGEST_MAX];
	struct err e = {0};
	if (image_digest_ok(want) && tree_version_whole(im, name, want + 7))
		return false;
	if (images_exists(im, name) < 0) {
		snprintf(why, len, "image %s does not exist on this host", name);
		return true;
	}
	/* A tree that cannot be read is no blocker here: the restore says why it fails. */
	if (images_resolve(im, name, root, sizeof(root), hex, &e) < 0)
		return false;
	int rc = hex[0] ? oci_read_digest(im, name, hex, now, &e)
			: tree_digest(im, name, root, now, NULL, &e);
	if (rc < 0 || strcmp(now, want) == 0)
		return false;
	snprintf(why, len, hex[0] ? IMAGES_CHANGED_FMT : IMAGES_NO_VERSION_FMT, name, want, now);
	return true;
}

int images_each(struct images *im, int (*fn)(const char *name, void *arg), void *arg)
{
	struct dirent **list;
	int n = scandir(im->dir, &list, not_dots, by_name);
	if (n < 0)
		return -errno;
	int rc = 0;
	for (int i = 0; i < n; i++) {
		if (rc == 0 && images_exists(im, list[i]->d_name) == 0)
			rc = fn(list[i]->d_name, arg);
		free(list[i]);
	}
	free(list);
	return rc;
}

/*
 * One line of version @hex's file @file into @out ("" when it is absent),
 * read bounded as untrusted text: without its newline it must pass
 * text_ok(), and an index digest image_digest_ok() too.
 */
static int oci_read_line(struct images *im, const char *name, const char *hex, const char *file,
			 char *out, size_t len, struct err *e)
{
	char path[PATH_MAX];
	_cleanup_free_ char *buf = NULL;
	size_t n = 0;
	out[0] = '\0';
	if (xsnprintf(path, sizeof(path), "%s/" OCI_DIR "/%s/%s/%s", im->dir, name, hex, file) < 0)
		return err_set(e, ENAMETOOLONG, "image %s: path too long", name);
	int rc = read_file(path, &buf, &n, len);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return err_set(e, EIO, "image %s: cannot read %s: %s", name, path, strerror(-rc));
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	bool digest = strcmp(file, "index-digest") == 0;
	if (n == 0 || strlen(buf) != n || !text_ok(buf, len) || (digest && !image_digest_ok(buf)))
		return err_set(e, EIO, "image %s: %s is not %s", name, path,
			       digest ? "a digest sha256:HEX" : "one line of text");
	snprintf(out, len, "%s", buf);
	return 0;
}

int images_info(struct images *im, const char *name, char digest[DIGEST_MAX],
		struct image_source *src, struct err *e)
{
	char root[PATH_MAX], hex[IMAGES_OCI_HEX + 1];
	memset(src, 0, sizeof(*src));
	int rc = images_resolve(im, name, root, sizeof(root), hex, e);
	if (rc < 0)
		return rc;
	if (!hex[0])
		return tree_digest(im, name, root, digest, NULL, e);
	rc = oci_read_digest(im, name, hex, digest, e);
	if (rc == 0)
		rc = oci_read_line(im, name, hex, "reference", src->reference,
				   sizeof(src->reference), e);
	if (rc == 0)
		rc = oci_read_line(im, name, hex, "index-digest", src->index_digest,
				   sizeof(src->index_digest), e);
	return rc;
}
