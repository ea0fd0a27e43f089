/*
 * images.h - the images directory (--images): each subdirectory is a root
 * filesystem tree, named by its directory name.
 *
 * The digest is "sha256:" + hex of a SHA-256 over the tree walked in
 * byte-wise sorted order: for each entry its relative path, type, mode,
 * size, and the contents (file bytes, or the symlink target). It is cached
 * in memory per image and recomputed only when the tree's newest mtime or
 * entry count changed (a cheap stat walk).
 *
 * An image snapfs-image imported (docs/images.md) is pinned by its OCI
 * manifest digest instead: <dir>/NAME is a symlink ".oci/NAME/HEX/rootfs"
 * and <dir>/.oci/NAME/HEX/digest holds "sha256:HEX". Its tree is not
 * walked; its digest is that file's, checked (images_pin()).
 *
 * A sandbox never runs from a hand-made tree itself, which may be edited
 * in place while it runs: images_take() takes the tree in as a version
 * the first time a sandbox starts from it (and again after each edit),
 * a copy (cp -a --reflink=auto: shared extents where the filesystem has
 * reflinks) that nothing changes afterwards:
 *
 *   <dir>/.tree/NAME/HEX/rootfs/   the copy, HEX its tree digest's hex
 *   <dir>/.tree/NAME/HEX/digest    "sha256:HEX", written before the rename
 *   <dir>/.tree/NAME/lock          flock: one take-in (or prune) of NAME at a time
 *   <dir>/.tree/NAME/.take.*, .trash.*   scratch names (a copy under way, a removal)
 *
 * A version is whole once it has its name: copied and synced under a
 * scratch name, hashed there (its digest is the copy's), given its digest
 * file, renamed. A restore (fork, resume) runs from the version of its
 * snapshot's digest while this host keeps it, whatever the tree is now.
 * snapfs-image prune removes versions no bundle and no snapshot names.
 *
 * Thread-safety: all functions may be called from any thread; the images
 * directory is only read, and the digest cache is guarded inside images.c.
 */
#ifndef SNAPFS_IMAGES_H
#define SNAPFS_IMAGES_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/registry/registry.h"
#include "lib/util.h"

struct images;

/*
 * Open (creating it 0700) the images directory @dir: it and every directory
 * above it must be root's and writable by no one else unless sticky
 * (path_trusted()), or EPERM with a sentence.
 */
int images_open(const char *dir, struct images **out, struct err *e);
void images_close(struct images *im);
const char *images_dir(const struct images *im);

/* Valid names: [A-Za-z0-9][A-Za-z0-9._-]{0,127}, existing directory. -ENOENT otherwise. */
int images_exists(struct images *im, const char *name);
/* Absolute path of the image's root filesystem into @out. */
int images_path(struct images *im, const char *name, char *out, size_t len);
int images_digest(struct images *im, const char *name, char out[DIGEST_MAX], struct err *e);
/*
 * The tree a sandbox of @name gets into @root and its digest, from one
 * look at the image: for an imported one, its version's own directory (a
 * re-import meanwhile swaps the link, not this tree, so @root and @digest
 * always agree); for a plain one, its path and tree digest. @root is
 * resolved (realpath) and must lie below the images directory: an image
 * that leads out of it (`host -> /`) is refused, EACCES with a sentence.
 * So is one below a directory another user could change (images_resolve()).
 */
int images_pin(struct images *im, const char *name, char *root, size_t len, char digest[DIGEST_MAX],
	       struct err *e);
/* The sentence for an image whose digest is not the snapshot's (restorable, fork, resume). */
#define IMAGES_CHANGED_FMT "image %s changed: snapshot has %s, host has %s"
/* The same for a hand-made tree whose version of the snapshot's digest this host no longer keeps.
 */
#define IMAGES_NO_VERSION_FMT                                                                      \
	"image %s changed: snapshot has %s, host has %s, and this host keeps no version of the "   \
	"snapshot's tree (snapfs-image prune removed it, or the snapshot was taken on another "    \
	"host)"
/*
 * The most a hand-made tree taken in as a version may hold: regular files'
 * and links' bytes, and entries. A larger one is refused at its start
 * (EFBIG, with a sentence): a copy that size would hold the start for
 * minutes and fill the disk of the images directory; import it instead
 * (an OCI image is unpacked once, never copied). A tree that does not fit
 * in the space free there is refused (ENOSPC) before any copy.
 */
#define IMAGES_TREE_MAX_BYTES (64ULL << 30)
#define IMAGES_TREE_MAX_ENTRIES (4ULL << 20)
/*
 * The tree a new sandbox of @name runs from (@want ""), or a restore of a
 * snapshot whose digest is @want, into @root, and its digest into @digest.
 * A hand-made image runs from its version: the one of its tree as it is
 * now (taken in if this host keeps none, the lock of @name held), or for
 * a restore the one of @want, while this host keeps it, whatever the tree
 * is now. An imported image runs from its version as images_pin() says.
 * A restore whose digest is neither is refused, EINVAL with
 * IMAGES_CHANGED_FMT or IMAGES_NO_VERSION_FMT. *@lock is the held lock of
 * @name's versions (or -1): the caller closes it once its bundle names
 * @root, so a prune never removes the version in between.
 */
int images_take(struct images *im, const char *name, const char *want, char *root, size_t len,
		char digest[DIGEST_MAX], int *lock, struct err *e);
/*
 * Whether a snapshot of @name whose digest is @want cannot be restored on
 * this host (no version of @want kept, and @name is not that tree now):
 * true with the sentence in @why.
 */
bool images_blocker(struct images *im, const char *name, const char *want, char *why, size_t len);
#define IMAGES_OCI_HEX 64 /* an imported image's version: its manifest's sha256, in hex */
/* The version of an imported image's link @target, or false. */
bool images_oci_link(const char *name, const char *target, char hex[IMAGES_OCI_HEX + 1]);
/*
 * The tree of @name, resolved, into @root (@hex: an imported image's
 * version, else ""), refused unless it lies below the images directory and
 * every directory from there down to it, itself included, is root's and
 * writable by root alone (path_trusted()): one another user could change
 * (`images/team/`, group-writable) could be swapped for `team -> /` after
 * the check. EACCES/EPERM with a sentence.
 */
int images_resolve(struct images *im, const char *name, char *root, size_t len,
		   char hex[IMAGES_OCI_HEX + 1], struct err *e);
/*
 * Where an imported image's version came from, as snapfs-image left it
 * beside the version (docs/images.md): the SOURCE it was last imported
 * from (`docker://HOST/REPO:TAG`, a layout's path) and, for a registry's
 * multi-platform index, that index's digest (the version's own digest is
 * this host's platform manifest's). "" where unknown: a hand-made tree, or
 * an image imported before snapfs-image kept them.
 */
#define IMAGES_REF_MAX 1024 /* a reference, NUL included (snapfs-image writes <= 1000 bytes) */
struct image_source {
	char reference[IMAGES_REF_MAX];
	char index_digest[DIGEST_MAX];
};
/*
 * images_pin()'s digest of @name and, for an imported image, the source of
 * that same version (one look at the link, so the two always agree).
 * Files that are there but not one line of text (a reference) or not a
 * digest (the index's) fail with EIO and a sentence, as a bad digest does.
 */
int images_info(struct images *im, const char *name, char digest[DIGEST_MAX],
		struct image_source *src, struct err *e);
/* Image names, sorted. @fn returning non-zero stops the walk. */
int images_each(struct images *im, int (*fn)(const char *name, void *arg), void *arg);

#endif
