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
 * Thread-safety: all functions may be called from any thread.
 */
#ifndef SNAPFS_IMAGES_H
#define SNAPFS_IMAGES_H

#include <stddef.h>

#include "backend/registry.h"
#include "lib/util.h"

struct images;

int images_open(const char *dir, struct images **out, struct err *e);
void images_close(struct images *im);
const char *images_dir(const struct images *im);

/* Valid names: [A-Za-z0-9][A-Za-z0-9._-]{0,127}, existing directory. -ENOENT otherwise. */
int images_exists(struct images *im, const char *name);
/* Absolute path of the image's root filesystem into @out. */
int images_path(struct images *im, const char *name, char *out, size_t len);
int images_digest(struct images *im, const char *name, char out[DIGEST_MAX], struct err *e);
/* Image names, sorted. @fn returning non-zero stops the walk. */
int images_each(struct images *im, int (*fn)(const char *name, void *arg), void *arg);

#endif
