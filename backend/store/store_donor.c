/*
 * store_donor.c - the donor map of a get (store_internal.h): which chunks
 * of the snapshot being materialized local images already hold, and where.
 *
 * Only the chunks the get wants are keys, so the map costs 24 bytes a slot
 * for the target's chunks however much the donors hold; each donor's
 * manifest is parsed, walked and freed in turn. The first donor that holds
 * a chunk serves it, so the caller lists the likeliest first. A donor says
 * only where to look: the get verifies every chunk it reads there.
 */
#include "backend/store/store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/digest_slot.h"

/* Donor files one get keeps open at most; chunks of further files come from the store. */
#define DONOR_FILES_MAX 256

static size_t slot_of(const struct donor_map *dm, const unsigned char sha[SHA256_LEN])
{
	return digest_slot(sha, dm->cap);
}

/* The slot of @sha, or the empty slot where it would go. */
static struct donor_ref *probe(const struct donor_map *dm, const unsigned char sha[SHA256_LEN])
{
	for (size_t i = slot_of(dm, sha);; i = (i + 1) & (dm->cap - 1)) {
		struct donor_ref *r = &dm->slots[i];
		if (!r->chunk || !memcmp(r->chunk->sha256, sha, SHA256_LEN))
			return r;
	}
}

const struct donor_ref *donor_map_find(const struct donor_map *dm,
				       const unsigned char sha[SHA256_LEN])
{
	if (dm->cap == 0)
		return NULL;
	const struct donor_ref *r = probe(dm, sha);
	return r->chunk && r->fd >= 0 ? r : NULL;
}

/* Key every stored chunk of @want, none found yet: -ENOMEM. */
static int want_chunks(struct donor_map *dm, const struct manifest *want)
{
	size_t n = 0, cap = 16;
	for (size_t i = 0; i < want->nfiles; i++)
		n += want->files[i].nchunks;
	while (cap < 2 * n)
		cap *= 2;
	dm->slots = calloc(cap, sizeof(*dm->slots));
	dm->fds = calloc(DONOR_FILES_MAX, sizeof(*dm->fds));
	if (!dm->slots || !dm->fds)
		return -ENOMEM;
	dm->cap = cap;
	for (size_t i = 0; i < want->nfiles; i++) {
		for (size_t j = 0; j < want->files[i].nchunks; j++) {
			const struct manifest_chunk *c = &want->files[i].chunks[j];
			struct donor_ref *r =
			    c->pack == MANIFEST_ZERO ? NULL : probe(dm, c->sha256);
			if (r && !r->chunk)
				*r = (struct donor_ref){.chunk = c, .fd = -1};
		}
	}
	return 0;
}

/* @dir/@name opened for reading and kept in @dm, or -1 (unreadable, or too many open). */
static int open_donor_file(struct donor_map *dm, const char *dir, const char *name)
{
	char path[PATH_MAX];
	if (dm->nfds == DONOR_FILES_MAX || xsnprintf(path, sizeof(path), "%s/%s", dir, name) < 0)
		return -1;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0)
		dm->fds[dm->nfds++] = fd;
	return fd;
}

/* Point the wanted chunks not found yet at donor file @f of @dir; their plain bytes. */
static int64_t add_file(struct donor_map *dm, const char *dir, const struct manifest_file *f)
{
	int fd = -1;
	bool tried = false;
	int64_t found = 0, pos = 0;
	for (size_t i = 0; i < f->nchunks; pos += f->chunks[i].len, i++) {
		const struct manifest_chunk *c = &f->chunks[i];
		struct donor_ref *r = c->pack == MANIFEST_ZERO ? NULL : probe(dm, c->sha256);
		if (!r || !r->chunk || r->fd >= 0 || r->chunk->len != c->len)
			continue;
		/* Opened at its first useful chunk: most files of an older image hold none. */
		if (!tried)
			fd = open_donor_file(dm, dir, f->name);
		tried = true;
		if (fd < 0)
			return found;
		r->fd = fd;
		r->off = pos;
		found += c->len;
	}
	return found;
}

static int64_t add_donor(struct donor_map *dm, const struct store_donor *d, const char *id)
{
	_cleanup_free_ char *json = NULL;
	struct manifest m;
	struct err e = {0};
	int rc = read_file(d->manifest, &json, NULL, MANIFEST_BYTES_MAX);
	const char *slash = strrchr(d->dir, '/');
	if (rc == 0) /* named in messages by its directory's name, its snapshot's id in the cache */
		rc = manifest_parse(json, slash ? slash + 1 : d->dir, &m, &e);
	if (rc < 0) {
		warning("snapshot %s: not using local image %s: cannot read its manifest %s: %s",
			id, d->dir, d->manifest, e.code ? e.msg : strerror(-rc));
		return 0;
	}
	int64_t found = 0;
	for (size_t i = 0; i < m.nfiles; i++)
		found += add_file(dm, d->dir, &m.files[i]);
	manifest_free(&m);
	return found;
}

int64_t donor_map_build(struct donor_map *dm, const struct manifest *want,
			const struct store_donor *donors, size_t n, const char *id)
{
	*dm = (struct donor_map){0};
	if (n == 0)
		return 0;
	if (want_chunks(dm, want) < 0) {
		warning("snapshot %s: no memory to look for its chunks in local images", id);
		donor_map_free(dm);
		return 0;
	}
	int64_t found = 0;
	for (size_t i = 0; i < n && i < STORE_DONORS_MAX; i++)
		found += add_donor(dm, &donors[i], id);
	return found;
}

void donor_map_free(struct donor_map *dm)
{
	for (size_t i = 0; i < dm->nfds; i++)
		close(dm->fds[i]);
	free(dm->fds);
	free(dm->slots);
	*dm = (struct donor_map){0};
}
