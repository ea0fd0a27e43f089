#include "runtime/images.h"
#include "runtime/runsc/runsc.h"
#include "lib/strbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/t.h"

static char base[64];

/* The directory above @path (a static buffer). */
static const char *dirname_of(const char *path)
{
	static char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	return dir;
}

static void put(const char *rel, const char *data)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", base, rel);
	CHECK(write_file_durable(path, data, strlen(data)) == 0);
}

static void make_tree(const char *image)
{
	char path[PATH_MAX], rel[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s/etc/sub", base, image);
	CHECK(mkdir_p(path, 0755) == 0);
	snprintf(rel, sizeof(rel), "%s/etc/passwd", image);
	put(rel, "root:x:0:0:root:/root:/bin/sh\n");
	snprintf(rel, sizeof(rel), "%s/etc/sub/a", image);
	put(rel, "aaaa");
	snprintf(path, sizeof(path), "%s/%s/etc/link", base, image);
	CHECK(symlink("sub/a", path) == 0);
}

static int collect(const char *name, void *arg)
{
	struct strbuf *sb = arg;
	strbuf_addf(sb, "%s,", name);
	return strbuf_error(sb);
}

static void digest_of(struct images *im, const char *name, char out[DIGEST_MAX])
{
	struct err e = {0};
	out[0] = '\0';
	CHECK(images_digest(im, name, out, &e) == 0);
}

static void test_names(struct images *im)
{
	char path[PATH_MAX], want[PATH_MAX];
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	CHECK(images_exists(im, "one") == 0);
	CHECK(images_exists(im, "nope") == -ENOENT);
	CHECK(images_exists(im, "../one") == -ENOENT);
	CHECK(images_exists(im, ".hidden") == -ENOENT);
	CHECK(images_exists(im, "") == -ENOENT);
	CHECK(images_exists(im, "file") == -ENOENT); /* not a directory */
	CHECK(images_path(im, "one", path, sizeof(path)) == 0);
	snprintf(want, sizeof(want), "%s/one", images_dir(im));
	CHECK_STR(path, want);
	CHECK(path[0] == '/');
	CHECK(images_each(im, collect, &sb) == 0);
	CHECK_STR(strbuf_str(&sb), "one,two,");
}

static void test_digest(struct images *im)
{
	char d1[DIGEST_MAX], d2[DIGEST_MAX], d3[DIGEST_MAX];
	char path[PATH_MAX];
	struct err e = {0};
	digest_of(im, "one", d1);
	CHECK(str_has_prefix(d1, "sha256:") && strlen(d1) == 7 + 64);
	digest_of(im, "one", d2);
	CHECK_STR(d1, d2);
	/* Same tree elsewhere: same digest. */
	digest_of(im, "two", d3);
	CHECK_STR(d1, d3);
	CHECK(images_digest(im, "nope", d3, &e) == -ENOENT);

	put("images/one/etc/sub/a", "bbbb"); /* same size, same second */
	digest_of(im, "one", d2);
	CHECK(strcmp(d1, d2) != 0);

	snprintf(path, sizeof(path), "%s/images/one/etc/sub/a", base);
	CHECK(chmod(path, 0640) == 0);
	digest_of(im, "one", d3);
	CHECK(strcmp(d2, d3) != 0);

	put("images/one/etc/new", "");
	digest_of(im, "one", d2);
	CHECK(strcmp(d2, d3) != 0);

	snprintf(path, sizeof(path), "%s/images/one/etc/link", base);
	CHECK(unlink(path) == 0 && symlink("sub/b", path) == 0);
	digest_of(im, "one", d3);
	CHECK(strcmp(d2, d3) != 0);

	/* runsc's empty mount point of an egress sandbox's resolv.conf counts as absent... */
	put("images/one/etc/resolv.conf", "");
	digest_of(im, "one", d2);
	CHECK_STR(d2, d3);
	/* ...one with content does not, and neither does an empty one elsewhere. */
	put("images/one/etc/resolv.conf", "nameserver 10.0.0.1\n");
	digest_of(im, "one", d2);
	CHECK(strcmp(d2, d3) != 0);
	snprintf(path, sizeof(path), "%s/images/one/etc/resolv.conf", base);
	CHECK(unlink(path) == 0);
	put("images/one/etc/sub/resolv.conf", "");
	digest_of(im, "one", d2);
	CHECK(strcmp(d2, d3) != 0);
	snprintf(path, sizeof(path), "%s/images/one/etc/sub/resolv.conf", base);
	CHECK(unlink(path) == 0);
}

/* Once the tree is older than the racy window, the digest is cached and still sees changes. */
static void test_cache(struct images *im)
{
	char d1[DIGEST_MAX], d2[DIGEST_MAX];
	sleep(2);
	digest_of(im, "two", d1);
	digest_of(im, "two", d2); /* from the cache */
	CHECK_STR(d1, d2);
	put("images/two/etc/sub/a", "cccc");
	digest_of(im, "two", d2);
	CHECK(strcmp(d1, d2) != 0);
}

#define HEX_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HEX_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/* A link of the kind snapfs-image writes, and the ones it never does. */
static void test_oci_link(void)
{
	char hex[IMAGES_OCI_HEX + 1];
	CHECK(images_oci_link("web", ".oci/web/" HEX_A "/rootfs", hex));
	CHECK_STR(hex, HEX_A);
	CHECK(!images_oci_link("web", ".oci/we/" HEX_A "/rootfs", hex));
	CHECK(!images_oci_link("we", ".oci/web/" HEX_A "/rootfs", hex));
	CHECK(!images_oci_link("web", ".oci/web/" HEX_A "/rootfs/", hex));
	CHECK(!images_oci_link("web", ".oci/web/" HEX_A "a/rootfs", hex));
	CHECK(!images_oci_link(
	    "web",
	    ".oci/web/AAAAaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/rootfs",
	    hex));
	CHECK(!images_oci_link("web", ".oci/web/../../" HEX_A "/rootfs", hex));
	CHECK(!images_oci_link("web", "/srv/.oci/web/" HEX_A "/rootfs", hex));
	CHECK(!images_oci_link("web", ".oci/web/" HEX_A, hex));
	CHECK(!images_oci_link("web", "", hex));
}

static void oci_link(const char *target)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/images/three", base);
	unlink(path);
	CHECK(symlink(target, path) == 0);
}

/* An imported image: its digest is its version's file, checked, and its root that version's. */
static void test_oci(struct images *im)
{
	char d[DIGEST_MAX], tree[DIGEST_MAX], root[PATH_MAX], want[PATH_MAX];
	struct err e = {0};
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	make_tree("images/.oci/three/" HEX_A "/rootfs");
	make_tree("images/.oci/three/" HEX_B "/rootfs");
	put("images/.oci/three/" HEX_A "/digest", "sha256:" HEX_A "\n");
	put("images/.oci/three/" HEX_B "/digest", "sha256:" HEX_B);
	oci_link(".oci/three/" HEX_A "/rootfs");
	CHECK(images_each(im, collect, &sb) == 0);
	CHECK_STR(strbuf_str(&sb), "one,three,two,"); /* .oci is no image */
	CHECK(images_pin(im, "three", root, sizeof(root), d, &e) == 0);
	CHECK_STR(d, "sha256:" HEX_A);
	snprintf(want, sizeof(want), "%s/.oci/three/" HEX_A "/rootfs", images_dir(im));
	CHECK_STR(root, want);
	oci_link(".oci/three/" HEX_B "/rootfs"); /* a re-import */
	digest_of(im, "three", d);
	CHECK_STR(d, "sha256:" HEX_B);
	/* A digest file that is not its version's, or not a digest at all. */
	put("images/.oci/three/" HEX_B "/digest", "sha256:" HEX_A "\n");
	CHECK(images_digest(im, "three", d, &e) == -EIO);
	put("images/.oci/three/" HEX_B "/digest", "sha256:" HEX_B "\n\n");
	CHECK(images_digest(im, "three", d, &e) == -EIO);
	put("images/.oci/three/" HEX_B "/digest", "sha512:" HEX_B);
	CHECK(images_digest(im, "three", d, &e) == -EIO);
	put("images/.oci/three/" HEX_B "/digest", HEX_B HEX_B HEX_B);
	CHECK(images_digest(im, "three", d, &e) == -EIO);
	snprintf(want, sizeof(want), "%s/images/.oci/three/" HEX_B "/digest", base);
	CHECK(unlink(want) == 0);
	CHECK(images_digest(im, "three", d, &e) == -EIO);
	/* Any other link is a plain tree, hashed. */
	oci_link("one");
	digest_of(im, "three", d);
	digest_of(im, "one", tree);
	CHECK_STR(d, tree);
}

/* link NAME TARGET: <images>/NAME -> TARGET, whatever was there before. */
static void link_image(const char *name, const char *target)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/images/%s", base, name);
	unlink(path);
	CHECK(symlink(target, path) == 0);
}

/* Where an imported version came from: its reference and index digest, each checked. */
static void test_info(struct images *im)
{
	char d[DIGEST_MAX], big[IMAGES_REF_MAX + 8];
	struct image_source src;
	struct err e = {0};
	make_tree("images/.oci/five/" HEX_A "/rootfs");
	put("images/.oci/five/" HEX_A "/digest", "sha256:" HEX_A "\n");
	link_image("five", ".oci/five/" HEX_A "/rootfs");
	/* Neither file: both left empty (imported before snapfs-image kept them). */
	CHECK(images_info(im, "five", d, &src, &e) == 0);
	CHECK_STR(d, "sha256:" HEX_A);
	CHECK_STR(src.reference, "");
	CHECK_STR(src.index_digest, "");
	put("images/.oci/five/" HEX_A "/reference", "docker://127.0.0.1:5000/app:v1\n");
	put("images/.oci/five/" HEX_A "/index-digest", "sha256:" HEX_B "\n");
	CHECK(images_info(im, "five", d, &src, &e) == 0);
	CHECK_STR(src.reference, "docker://127.0.0.1:5000/app:v1");
	CHECK_STR(src.index_digest, "sha256:" HEX_B);
	/* Two lines, a control character, empty, too long, or an index digest that is none: EIO. */
	put("images/.oci/five/" HEX_A "/reference", "a\nb\n");
	CHECK(images_info(im, "five", d, &src, &e) == -EIO);
	CHECK(strstr(e.msg, "/reference is not one line of text") != NULL);
	put("images/.oci/five/" HEX_A "/reference", "a\033[2Jb");
	CHECK(images_info(im, "five", d, &src, &e) == -EIO);
	put("images/.oci/five/" HEX_A "/reference", "\n");
	CHECK(images_info(im, "five", d, &src, &e) == -EIO);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	put("images/.oci/five/" HEX_A "/reference", big);
	CHECK(images_info(im, "five", d, &src, &e) == -EIO);
	big[IMAGES_REF_MAX - 1] = '\0'; /* the longest that fits */
	put("images/.oci/five/" HEX_A "/reference", big);
	CHECK(images_info(im, "five", d, &src, &e) == 0);
	CHECK(strlen(src.reference) == IMAGES_REF_MAX - 1);
	put("images/.oci/five/" HEX_A "/index-digest", "sha256:" HEX_B "x\n");
	CHECK(images_info(im, "five", d, &src, &e) == -EIO);
	CHECK(strstr(e.msg, "/index-digest is not a digest sha256:HEX") != NULL);
	/* A hand-made tree: its tree digest, no source. */
	CHECK(images_info(im, "one", d, &src, &e) == 0);
	CHECK_STR(src.reference, "");
}

/* pin NAME: images_pin()'s result; its sentence into @e. */
static int pin(struct images *im, const char *name, struct err *e)
{
	char root[PATH_MAX], d[DIGEST_MAX];
	err_clear(e);
	return images_pin(im, name, root, sizeof(root), d, e);
}

/* An image that leads out of the images directory is refused, with a sentence (N13). */
static void test_links_out(struct images *im)
{
	char root[PATH_MAX], d[DIGEST_MAX], want[PATH_MAX], path[PATH_MAX];
	struct err e = {0};
	link_image("host", "/");
	CHECK(images_exists(im, "host") == 0); /* listed, so the refusal can say why */
	CHECK(pin(im, "host", &e) == -EACCES);
	CHECK(strstr(e.msg, "image host leads to /, outside the images directory") != NULL);
	CHECK(images_digest(im, "host", d, &e) == -EACCES);
	/* A tree beside the images directory, by an absolute or a relative link. */
	make_tree("elsewhere");
	snprintf(path, sizeof(path), "%s/elsewhere", base);
	link_image("abs", path);
	CHECK(pin(im, "abs", &e) == -EACCES);
	link_image("rel", "../elsewhere");
	CHECK(pin(im, "rel", &e) == -EACCES);
	/* The images directory itself is no image. */
	link_image("self", ".");
	CHECK(pin(im, "self", &e) == -EACCES);
	/* A link to an image inside stays one, and the bundle gets the tree it resolves to. */
	link_image("alias", "one");
	CHECK(images_pin(im, "alias", root, sizeof(root), d, &e) == 0);
	snprintf(want, sizeof(want), "%s/one", images_dir(im));
	CHECK_STR(root, want);
	/* An imported image's version that is itself a link out. */
	snprintf(path, sizeof(path), "%s/images/.oci/four/" HEX_A, base);
	CHECK(mkdir_p(path, 0700) == 0);
	put("images/.oci/four/" HEX_A "/digest", "sha256:" HEX_A "\n");
	snprintf(path, sizeof(path), "%s/images/.oci/four/" HEX_A "/rootfs", base);
	CHECK(symlink("/", path) == 0);
	link_image("four", ".oci/four/" HEX_A "/rootfs");
	CHECK(pin(im, "four", &e) == -EACCES);
	CHECK(strstr(e.msg, "image four leads to /") != NULL);
	static const char *const links[] = {"host", "abs", "rel", "self", "alias", "four"};
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(path, sizeof(path), "%s/images/%s", base, links[i]);
		CHECK(unlink(path) == 0);
	}
}

/*
 * An image below a directory of the images directory that others could
 * change (images/team/, group-writable: its group could swap it for
 * `team -> /` after the check) is refused, and so is a tree that is itself
 * such a directory (review 4).
 */
static void test_subdir_trust(struct images *im)
{
	char team[PATH_MAX], web[PATH_MAX], root[PATH_MAX], d[DIGEST_MAX];
	struct err e = {0};
	make_tree("images/team/web");
	snprintf(team, sizeof(team), "%s/images/team", base);
	snprintf(web, sizeof(web), "%s/images/team/web", base);
	CHECK(chmod(team, 0755) == 0 && chmod(web, 0755) == 0);
	link_image("web", "team/web");
	CHECK(images_pin(im, "web", root, sizeof(root), d, &e) == 0);
	CHECK_STR(root, web);
	CHECK(chmod(team, 0775) == 0);
	CHECK(pin(im, "web", &e) == -EPERM);
	CHECK(strstr(e.msg, "image web is not safe to use: ") != NULL &&
	      strstr(e.msg, "writable by its group") != NULL && strstr(e.msg, "/team") != NULL);
	CHECK(images_resolve(im, "web", root, sizeof(root), d, &e) == -EPERM);
	CHECK(chmod(team, 0755) == 0 && chmod(web, 0757) == 0);
	CHECK(pin(im, "web", &e) == -EPERM);
	CHECK(strstr(e.msg, "writable by every user") != NULL);
	CHECK(chmod(web, 0755) == 0);
	/* Owned by another user, who could rename what is below it. */
	if (geteuid() == 0) {
		CHECK(chown(team, 1000, 1000) == 0);
		CHECK(pin(im, "web", &e) == -EPERM);
		CHECK(strstr(e.msg, "owned by uid 1000") != NULL);
		CHECK(chown(team, 0, 0) == 0);
	}
	CHECK(pin(im, "web", &e) == 0);
	snprintf(root, sizeof(root), "%s/images/web", base);
	CHECK(unlink(root) == 0 && rm_rf(team) == 0);
}

/* images_open() refuses a directory others could change, as --state and --spool (N13). */
static void test_open_trust(void)
{
	char dir[PATH_MAX];
	struct images *im = NULL;
	struct err e = {0};
	snprintf(dir, sizeof(dir), "%s/shared", base);
	CHECK(mkdir_p(dir, 0700) == 0 && chmod(dir, 0770) == 0);
	CHECK(images_open(dir, &im, &e) == -EPERM);
	CHECK(strstr(e.msg, "the images directory") != NULL &&
	      strstr(e.msg, "writable by its group") != NULL);
	images_close(im);
	im = NULL;
	/* Below a world-writable parent that is not sticky. */
	snprintf(dir, sizeof(dir), "%s/shared/images", base);
	CHECK(chmod(dirname_of(dir), 0777) == 0);
	CHECK(images_open(dir, &im, &e) == -EPERM);
	images_close(im);
	im = NULL;
	/* Sticky and world-writable, as /tmp: an images directory of root's below it is fine. */
	CHECK(chmod(dirname_of(dir), 01777) == 0);
	CHECK(images_open(dir, &im, &e) == 0);
	images_close(im);
}

static void test_container_id(void)
{
	char a[RUNTIME_ID_MAX], b[RUNTIME_ID_MAX];
	CHECK(runsc_new_container_id(a) == 0 && runsc_new_container_id(b) == 0);
	CHECK(str_has_prefix(a, "snapfs-") && strlen(a) == 7 + 24);
	CHECK(strspn(a + 7, "0123456789abcdef") == 24);
	CHECK(strcmp(a, b) != 0);
}

/* take NAME WANT: images_take()'s result, its tree into @root, its digest into @d. */
static int take(struct images *im, const char *name, const char *want, char *root, char *d,
		struct err *e)
{
	int lock = -1;
	int rc = images_take(im, name, want, root, PATH_MAX, d, &lock, e);
	CHECK(rc == 0 ? lock >= 0 : lock == -1);
	if (lock >= 0)
		close(lock);
	return rc;
}

/* The file @rel under the tree @root, read whole (a static buffer; "" if absent). */
static const char *read_in(const char *root, const char *rel)
{
	static char text[256];
	char path[PATH_MAX];
	_cleanup_free_ char *buf = NULL;
	size_t n = 0;
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	text[0] = '\0';
	if (read_file(path, &buf, &n, sizeof(text) - 1) == 0)
		snprintf(text, sizeof(text), "%s", buf);
	return text;
}

/*
 * A hand-made tree runs from a version (.tree/NAME/HEX/rootfs) taken in at
 * its first start; an edit makes a new one and keeps the old, which a
 * restore of the old digest runs from; without it the restore is refused
 * with both digests, and images_blocker() says so.
 */
static void test_versions(struct images *im)
{
	char root[PATH_MAX], r2[PATH_MAX], want[PATH_MAX], d1[DIGEST_MAX], d2[DIGEST_MAX],
	    d[DIGEST_MAX], why[1024], path[PATH_MAX], aside[PATH_MAX];
	struct err e = {0};
	make_tree("images/ver");
	CHECK(take(im, "ver", "", root, d1, &e) == 0);
	digest_of(im, "ver", d);
	CHECK_STR(d1, d);
	snprintf(want, sizeof(want), "%s/images/.tree/ver/%s/rootfs", base, d1 + 7);
	CHECK_STR(root, want);
	CHECK_STR(read_in(root, "etc/sub/a"), "aaaa");
	CHECK(take(im, "ver", "", r2, d, &e) == 0); /* the same tree: the same version */
	CHECK_STR(r2, root);
	CHECK_STR(d, d1);
	put("images/ver/etc/sub/a", "edited");
	CHECK(take(im, "ver", "", r2, d2, &e) == 0);
	CHECK(strcmp(d1, d2) != 0);
	CHECK_STR(read_in(r2, "etc/sub/a"), "edited");
	CHECK_STR(read_in(root, "etc/sub/a"), "aaaa"); /* the old version is untouched */
	CHECK(!images_blocker(im, "ver", d1, why, sizeof(why)));
	CHECK(take(im, "ver", d1, r2, d, &e) == 0); /* a restore of the old digest */
	CHECK_STR(r2, root);
	CHECK_STR(d, d1);
	/* Its version gone: refused, both digests named. */
	snprintf(path, sizeof(path), "%s/images/.tree/ver/%s", base, d1 + 7);
	snprintf(aside, sizeof(aside), "%s/images/.tree/ver/.aside", base);
	CHECK(rename(path, aside) == 0);
	CHECK(images_blocker(im, "ver", d1, why, sizeof(why)));
	CHECK(strstr(why, "keeps no version") && strstr(why, d1) && strstr(why, d2));
	CHECK(take(im, "ver", d1, r2, d, &e) == -EINVAL);
	CHECK(strstr(e.msg, "keeps no version") != NULL);
	/* A torn version (its digest file empty) is not used: the next start copies again. */
	CHECK(rename(aside, path) == 0);
	put("images/ver/etc/sub/a", "aaaa");
	snprintf(aside, sizeof(aside), "images/.tree/ver/%s/digest", d1 + 7);
	put(aside, "");
	CHECK(images_blocker(im, "ver", d1, why, sizeof(why)) == false); /* the tree is d1 again */
	CHECK(take(im, "ver", "", r2, d, &e) == 0);
	CHECK_STR(d, d1);
	CHECK_STR(read_in(r2, "etc/sub/a"), "aaaa");
	CHECK(strncmp(read_in(path, "digest"), d1, strlen(d1)) == 0); /* written again */
	/* Gone from the images directory: a restore still runs from its version. */
	snprintf(path, sizeof(path), "%s/images/ver", base);
	CHECK(rm_rf(path) == 0);
	CHECK(!images_blocker(im, "ver", d1, why, sizeof(why)));
	CHECK(take(im, "ver", d1, r2, d, &e) == 0);
	CHECK(take(im, "ver", "", r2, d, &e) == -ENOENT);
}

int main(void)
{
	struct images *im = NULL;
	struct err e = {0};
	char dir[PATH_MAX];
	snprintf(base, sizeof(base), "/tmp/snapfs-test-images-XXXXXX");
	if (!mkdtemp(base))
		return 1;
	make_tree("images/one");
	make_tree("images/two");
	put("images/file", "not an image");
	snprintf(dir, sizeof(dir), "%s/images", base);
	CHECK(images_open(dir, &im, &e) == 0);
	if (im) {
		test_names(im);
		test_oci_link();
		test_oci(im);
		test_info(im);
		test_links_out(im);
		test_subdir_trust(im);
		test_digest(im);
		test_cache(im);
		test_versions(im);
		images_close(im);
	}
	test_open_trust();
	test_container_id();
	rm_rf(base);
	return t_done();
}
