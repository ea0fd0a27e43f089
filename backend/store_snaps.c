/*
 * store_snaps.c - the store's records of the manifests it knows (struct
 * snap_rec in st->snaps, in no order) and their index by id.
 *
 * A refresh looks up every listed id, and each put and hold looks up its
 * own: with a scan of st->snaps that is O(n^2) a refresh, which at 10,000
 * snapshots took a sync pass ~0.5 s of CPU every 3 s (docs/benchmarks-scale.md).
 * st->snap_slots is an open-addressing table (linear probing, at most half
 * full) of positions in st->snaps plus one, 0 for an empty slot; a record
 * moved by a removal has its slot rewritten. Everything here is under
 * st->lock.
 */
#include "backend/store_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS_MIN 64

/* FNV-1a: ids are random hex, any spread will do. */
static size_t id_hash(const char *id)
{
	uint64_t h = 14695981039346656037ull;
	for (const unsigned char *p = (const unsigned char *)id; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return (size_t)h;
}

/* The slot holding @id, or the empty slot where it would go (the table is never full). */
static size_t slot_of(const struct store *st, const char *id)
{
	size_t mask = st->snap_slots_cap - 1;
	for (size_t h = id_hash(id) & mask;; h = (h + 1) & mask) {
		size_t v = st->snap_slots[h];
		if (v == 0 || strcmp(st->snaps[v - 1].id, id) == 0)
			return h;
	}
}

/* A table of @cap slots (a power of two) holding every record. */
static int slots_rebuild(struct store *st, size_t cap)
{
	size_t *slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	free(st->snap_slots);
	st->snap_slots = slots;
	st->snap_slots_cap = cap;
	for (size_t i = 0; i < st->nsnaps; i++)
		st->snap_slots[slot_of(st, st->snaps[i].id)] = i + 1;
	return 0;
}

int store_snaps_reserve(struct store *st)
{
	int rc = STORE_GROW(st->snaps, st->snaps_cap, st->nsnaps);
	if (rc == 0 && (st->nsnaps + 1) * 2 > st->snap_slots_cap)
		rc = slots_rebuild(st, st->snap_slots_cap ? st->snap_slots_cap * 2 : SLOTS_MIN);
	return rc;
}

struct snap_rec *store_find_snap(struct store *st, const char *id)
{
	size_t v = st->snap_slots_cap ? st->snap_slots[slot_of(st, id)] : 0;
	return v ? &st->snaps[v - 1] : NULL;
}

int store_add_snap(struct store *st, struct snap_rec *rec)
{
	int rc = store_snaps_reserve(st);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < rec->npacks; i++)
		rec->packs[i]->refs++;
	st->nrefs += rec->npacks;
	rec->seq = ++st->seq;
	st->snaps[st->nsnaps++] = *rec;
	st->snap_slots[slot_of(st, rec->id)] = st->nsnaps;
	rec->packs = NULL;
	return 0;
}

/* Is @k cyclically in (@i, @j]? Then the entry at @j, whose home is @k, may not move to @i. */
static bool home_between(size_t i, size_t k, size_t j)
{
	return i <= j ? i < k && k <= j : i < k || k <= j;
}

/* Empty slot @i, moving back the entries after it that probing would no longer reach. */
static void slot_clear(struct store *st, size_t i)
{
	size_t mask = st->snap_slots_cap - 1;
	for (size_t j = (i + 1) & mask; st->snap_slots[j]; j = (j + 1) & mask) {
		size_t k = id_hash(st->snaps[st->snap_slots[j] - 1].id) & mask;
		if (home_between(i, k, j))
			continue;
		st->snap_slots[i] = st->snap_slots[j];
		i = j;
	}
	st->snap_slots[i] = 0;
}

bool store_forget_snap(struct store *st, const char *id)
{
	size_t h = st->snap_slots_cap ? slot_of(st, id) : 0;
	if (!st->snap_slots_cap || !st->snap_slots[h])
		return false;
	size_t i = st->snap_slots[h] - 1, last = st->nsnaps - 1;
	struct snap_rec *r = &st->snaps[i];
	for (size_t j = 0; j < r->npacks; j++)
		r->packs[j]->refs--;
	st->nrefs -= r->npacks;
	free(r->packs);
	slot_clear(st, h);
	/* The last record fills the hole, and its slot follows it. */
	if (i != last) {
		st->snap_slots[slot_of(st, st->snaps[last].id)] = i + 1;
		st->snaps[i] = st->snaps[last];
	}
	st->nsnaps--;
	return true;
}
