/*
 * store_snaps.c - the store's records of the manifests it knows (struct
 * snap_rec in st->snaps, in no order) and their index by id; the packs
 * (st->packs, in no order) and their index by name.
 *
 * A refresh looks up every listed id, and each put and hold looks up its
 * own: with a scan of st->snaps that is O(n^2) a refresh, which at 10,000
 * snapshots took a sync pass ~0.5 s of CPU every 3 s (docs/bench/scale.md).
 * st->snap_slots is an open-addressing table (linear probing, at most half
 * full) of positions in st->snaps plus one, 0 for an empty slot; a record
 * moved by a removal has its slot rewritten. Each manifest read names its
 * packs, found the same way in st->pack_slots (a scan was O(n^2) a start
 * at 10,000 packs). store_reserve() makes room in all of them, and in the
 * chunk index, before a put records its snapshot (it may not fail after).
 * Everything here is under st->lock.
 */
#include "backend/store/store_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define SLOTS_MIN 64

/* FNV-1a: ids are random hex, any spread will do. */
static size_t id_hash(const char *id)
{
	return (size_t)fnv1a(id);
}

/*
 * A table of positions (plus one) in an array whose elements have names:
 * st->snap_slots for st->snaps (by id), st->pack_slots for st->packs (by
 * name). @key gives the name at a position.
 */
struct slots {
	size_t **v;
	size_t *cap;
	const char *(*key)(const struct store *st, size_t pos);
};

static const char *snap_key(const struct store *st, size_t pos)
{
	return st->snaps[pos].id;
}

static const char *pack_key(const struct store *st, size_t pos)
{
	return st->packs[pos]->name;
}

#define SNAP_SLOTS(st) ((struct slots){&(st)->snap_slots, &(st)->snap_slots_cap, snap_key})
#define PACK_SLOTS(st) ((struct slots){&(st)->pack_slots, &(st)->pack_slots_cap, pack_key})

/* The slot holding @name, or the empty slot where it would go (the table is never full). */
static size_t slot_of(const struct store *st, struct slots t, const char *name)
{
	size_t mask = *t.cap - 1;
	for (size_t h = id_hash(name) & mask;; h = (h + 1) & mask) {
		size_t v = (*t.v)[h];
		if (v == 0 || strcmp(t.key(st, v - 1), name) == 0)
			return h;
	}
}

/* A table of @cap slots (a power of two) holding the @n elements. */
static int slots_rebuild(struct store *st, struct slots t, size_t n, size_t cap)
{
	size_t *slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	free(*t.v);
	*t.v = slots;
	*t.cap = cap;
	for (size_t i = 0; i < n; i++)
		slots[slot_of(st, t, t.key(st, i))] = i + 1;
	return 0;
}

/* Room in @t for @more elements beyond the @n it holds, and one more. */
static int slots_reserve(struct store *st, struct slots t, size_t n, size_t more)
{
	size_t cap = *t.cap ? *t.cap : SLOTS_MIN;
	while ((n + more + 1) * 2 > cap)
		cap *= 2;
	return cap == *t.cap ? 0 : slots_rebuild(st, t, n, cap);
}

/* The position of @name, or -1. */
static ssize_t slots_find(const struct store *st, struct slots t, const char *name)
{
	size_t v = *t.cap ? (*t.v)[slot_of(st, t, name)] : 0;
	return (ssize_t)v - 1;
}

/* Is @k cyclically in (@i, @j]? Then the entry at @j, whose home is @k, may not move to @i. */
static bool home_between(size_t i, size_t k, size_t j)
{
	return i <= j ? i < k && k <= j : i < k || k <= j;
}

/* Empty slot @i, moving back the entries after it that probing would no longer reach. */
static void slot_clear(const struct store *st, struct slots t, size_t i)
{
	size_t mask = *t.cap - 1, *v = *t.v;
	for (size_t j = (i + 1) & mask; v[j]; j = (j + 1) & mask) {
		size_t k = id_hash(t.key(st, v[j] - 1)) & mask;
		if (home_between(i, k, j))
			continue;
		v[i] = v[j];
		i = j;
	}
	v[i] = 0;
}

/*
 * Drop @name (at position @pos of an array of @n) from @t before the caller
 * moves the last element to @pos: its slot follows it.
 */
static void slots_remove(const struct store *st, struct slots t, const char *name, size_t pos,
			 size_t n)
{
	slot_clear(st, t, slot_of(st, t, name));
	if (pos != n - 1)
		(*t.v)[slot_of(st, t, t.key(st, n - 1))] = pos + 1;
}

int store_snaps_reserve(struct store *st)
{
	int rc = ALLOC_GROW(st->snaps, st->snaps_cap, st->nsnaps);
	return rc == 0 ? slots_reserve(st, SNAP_SLOTS(st), st->nsnaps, 0) : rc;
}

struct snap_rec *store_find_snap(struct store *st, const char *id)
{
	ssize_t pos = slots_find(st, SNAP_SLOTS(st), id);
	return pos >= 0 ? &st->snaps[pos] : NULL;
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
	(*SNAP_SLOTS(st).v)[slot_of(st, SNAP_SLOTS(st), rec->id)] = st->nsnaps;
	rec->packs = NULL;
	return 0;
}

bool store_forget_snap(struct store *st, const char *id)
{
	ssize_t pos = slots_find(st, SNAP_SLOTS(st), id);
	if (pos < 0)
		return false;
	size_t i = (size_t)pos, last = st->nsnaps - 1;
	struct snap_rec *r = &st->snaps[i];
	for (size_t j = 0; j < r->npacks; j++)
		r->packs[j]->refs--;
	st->nrefs -= r->npacks;
	slots_remove(st, SNAP_SLOTS(st), id, i, st->nsnaps);
	free(r->packs);
	/* The last record fills the hole. */
	if (i != last)
		st->snaps[i] = st->snaps[last];
	st->nsnaps--;
	return true;
}

int store_reserve(struct store *st, size_t packs, size_t chunks)
{
	int rc = 0;
	while (rc == 0 && st->npacks + packs > st->packs_cap)
		rc = ALLOC_GROW(st->packs, st->packs_cap, st->packs_cap);
	if (rc == 0)
		rc = store_packs_reserve(st, packs);
	if (rc == 0)
		rc = store_snaps_reserve(st);
	if (rc == 0)
		rc = chunk_index_reserve(&st->index, chunks);
	return rc;
}

struct pack *store_find_pack(struct store *st, const char *name)
{
	ssize_t pos = slots_find(st, PACK_SLOTS(st), name);
	return pos >= 0 ? st->packs[pos] : NULL;
}

int store_add_pack(struct store *st, struct pack *p)
{
	int rc = ALLOC_GROW(st->packs, st->packs_cap, st->npacks);
	if (rc == 0)
		rc = slots_reserve(st, PACK_SLOTS(st), st->npacks, 0);
	if (rc < 0)
		return rc;
	st->packs[st->npacks++] = p;
	(*PACK_SLOTS(st).v)[slot_of(st, PACK_SLOTS(st), p->name)] = st->npacks;
	return 0;
}

struct pack *store_pack_get_or_add(struct store *st, const char *name)
{
	struct pack *p = store_find_pack(st, name);
	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	snprintf(p->name, sizeof(p->name), "%s", name);
	if (store_add_pack(st, p) < 0) {
		free(p);
		return NULL;
	}
	return p;
}

int store_packs_reserve(struct store *st, size_t more)
{
	return slots_reserve(st, PACK_SLOTS(st), st->npacks, more);
}

void store_remove_pack(struct store *st, struct pack *p)
{
	ssize_t pos = slots_find(st, PACK_SLOTS(st), p->name);
	if (pos < 0 || st->packs[pos] != p)
		return;
	slots_remove(st, PACK_SLOTS(st), p->name, (size_t)pos, st->npacks);
	st->packs[pos] = st->packs[--st->npacks];
}

bool store_has_record(struct store *st, const char *id)
{
	pthread_mutex_lock(&st->lock);
	bool found = store_find_snap(st, id) != NULL;
	pthread_mutex_unlock(&st->lock);
	return found;
}
