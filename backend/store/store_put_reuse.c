/*
 * store_put_reuse.c - whether a put may reuse a chunk the store holds
 * already (the look-up each worker of store_put.c makes for each chunk).
 *
 * Reuse trusts nothing of the bucket it has not checked (docs/design.md,
 * "Untrusted input"). A chunk found in the store's index is reused only if
 * the index gives it the chunk's own length, and only from a pack this
 * process has checked: the first time a put would reuse a chunk of a pack,
 * it reads that chunk's stored bytes back with one ranged read, decompresses
 * and hashes them, and reads the pack's last byte (the object is as long as
 * its index says). A pack that passes is trusted for the rest of the
 * process's life; one that fails, or whose index lies about a length, is
 * never used again (a warning names it) and the put stores the chunk itself.
 *
 * Every pack is checked, those this process wrote too: a pack in the bucket
 * is what the bucket holds now, not what its put wrote (anyone who can write
 * the bucket can overwrite it), and after a restart nothing in the bucket
 * tells this host's packs from others' (names and manifests are written by
 * whoever writes). A restart only makes each pack cost one check again.
 *
 * One chunk and the length are enough for what dedup must prevent: building
 * new snapshots on a pack that is gone, truncated, overwritten, or not the
 * pack its index describes, each of which the check catches. A pack damaged
 * in one chunk other than the one read, or changed after its check, is not
 * caught here; the get catches it (every chunk is verified before it is
 * written) and fails with EIO naming it. Reading every reused chunk would
 * cost a download of all a put deduplicates, and still not protect a
 * snapshot from a writer who overwrites its packs after the put.
 */
#include "backend/store/store_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "lib/strset.h"

/* Packs of other snapshots one put reuses chunks of, at most: see reusable(). */
#define REUSE_PACKS_MAX (MANIFEST_PACKS_MAX / 2)

/* Under st->lock: never reuse chunks of @p again, and say why once. */
static void pack_bad(struct pack *p, const char *why)
{
	if (p->check != PACK_BAD)
		warning("store: not deduplicating against pack %s: %s", p->name, why);
	p->check = PACK_BAD;
}

/*
 * Under st->lock: may @w reuse stored chunk @r? Not if its index gives it
 * another length (then the pack is bad), nor, once the put uses chunks of
 * REUSE_PACKS_MAX packs, from a further one: a manifest lists at most
 * MANIFEST_PACKS_MAX packs, and the put's own need room too.
 */
static bool reusable(struct put *put, const struct chunk_ref *r, const struct work *w)
{
	char why[128];
	if (!pack_usable(r->pack) || strset_has(&put->condemned, r->pack->name))
		return false;
	if (r->len != w->len) {
		snprintf(why, sizeof(why), "its index gives a chunk %u bytes where it has %zu",
			 r->len, w->len);
		pack_bad(r->pack, why);
		return false;
	}
	return put->fl->npinned < REUSE_PACKS_MAX || store_inflight_pinned(put->fl, r->pack);
}

/*
 * Chunk @w's stored copy at w->ref, read back: 0 if it verifies and its pack
 * has its last byte (@pack_bytes long); -EIO (with @why) if not, -ENOMEM.
 */
static int read_back(struct put *put, const struct work *w, int64_t pack_bytes, unsigned worker,
		     char *why, size_t why_len)
{
	const struct chunk_ref *r = &w->ref;
	char key[OBJ_KEY_MAX];
	unsigned char sha[SHA256_LEN], last;
	struct err e = {0};
	_cleanup_free_ unsigned char *stored = malloc(r->zlen);
	_cleanup_free_ unsigned char *plain = malloc(r->len);
	if (!stored || !plain)
		return -ENOMEM;
	store_pack_key(r->pack->name, "pack", key);
	int rc = objstore_get_range(put->st->os, key, r->off, r->zlen, stored, &e);
	if (rc == 0 && r->off + r->zlen < pack_bytes)
		rc = objstore_get_range(put->st->os, key, pack_bytes - 1, 1, &last, &e);
	if (rc < 0) {
		snprintf(why, why_len, "it cannot be read: %.400s", e.msg);
		return -EIO;
	}
	size_t n = r->len;
	if (r->zlen != r->len)
		n = ZSTD_decompress(plain, r->len, stored, r->zlen);
	else
		memcpy(plain, stored, r->len);
	if (ZSTD_isError(n) || n != r->len ||
	    !store_sha256(put->st, put->md[worker], plain, r->len, sha) ||
	    memcmp(sha, w->sha256, SHA256_LEN)) {
		char hex[SHA256_HEX_LEN + 1];
		sha256_to_hex(w->sha256, hex);
		snprintf(why, why_len, "chunk %s at byte %lld does not verify", hex,
			 (long long)r->off);
		return -EIO;
	}
	return 0;
}

/*
 * Under st->lock: wait out another worker's check of @p; then whether this
 * one must check it (it is PACK_CHECKING now, for this worker).
 */
static bool claim_check(struct store *st, struct pack *p)
{
	while (p->check == PACK_CHECKING)
		pthread_cond_wait(&st->checked, &st->lock);
	if (p->check != PACK_UNCHECKED)
		return false;
	p->check = PACK_CHECKING;
	return true;
}

/* Check the pack of w->ref, claimed by claim_check(): whether the chunk may be reused. */
static bool check_pack(struct put *put, const struct work *w, int64_t pack_bytes, unsigned worker)
{
	struct pack *p = w->ref.pack;
	char why[ERR_MSG_MAX / 2];
	int rc = read_back(put, w, pack_bytes, worker, why, sizeof(why));
	pthread_mutex_lock(&put->st->lock);
	if (rc == -EIO)
		pack_bad(p, why);
	else if (p->check == PACK_CHECKING) /* not found bad meanwhile */
		p->check = rc == 0 ? PACK_SOUND : PACK_UNCHECKED;
	pthread_cond_broadcast(&put->st->checked);
	pthread_mutex_unlock(&put->st->lock);
	return rc == 0;
}

/*
 * Is the chunk stored already, in a pack a put may use? A hit in the
 * store's index pins its pack for this put; the first hit in a pack not
 * checked yet reads the chunk back (outside the lock) before it is reused.
 */
int put_look_up(struct put *put, struct work *w, unsigned worker)
{
	struct store *st = put->st;
	int rc = 0;
	bool check = false;
	int64_t pack_bytes = 0;
	pthread_mutex_lock(&st->lock);
	const struct chunk_ref *r = chunk_index_find(&st->index, w->sha256);
	if (r && reusable(put, r, w)) {
		w->ref = *r; /* r may move while claim_check() waits */
		pack_bytes = r->pack->bytes;
		/* Pinned: the pack stays, and its name with it. */
		rc = store_inflight_pin(put->fl, w->ref.pack);
		check = rc == 0 && claim_check(st, w->ref.pack);
		w->found = rc < 0 || w->ref.pack->check != PACK_BAD;
	}
	pthread_mutex_unlock(&st->lock);
	if (check)
		w->found = check_pack(put, w, pack_bytes, worker);
	if (w->found)
		return rc;
	pthread_mutex_lock(&put->local_lock);
	r = chunk_index_find(&put->local, w->sha256);
	if (r) {
		w->ref = *r;
		w->found = true;
	}
	pthread_mutex_unlock(&put->local_lock);
	return rc;
}
