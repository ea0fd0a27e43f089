/*
 * test_store_snaps.c - the store's records of manifests and their index by
 * id (backend/store/store_snaps.c): every record added is found, every one
 * forgotten is not, through growth and removals that move records and
 * shift probe chains; the same of the packs' index by name.
 */
#include <stdio.h>
#include <stdlib.h>

#include "backend/store/store_internal.h"
#include "tests/unit/t.h"

#define N 3000

static void id_of(int i, char out[NAME_LEN_MAX + 1])
{
	snprintf(out, NAME_LEN_MAX + 1, "snap-%016x", (unsigned)i * 2654435761u);
}

static int add(struct store *st, int i)
{
	struct snap_rec rec = {.size_bytes = i};
	id_of(i, rec.id);
	return store_add_snap(st, &rec);
}

/* Is record @i found, and the right one, exactly when @present? */
static bool found_as(struct store *st, int i, bool present)
{
	char id[NAME_LEN_MAX + 1];
	id_of(i, id);
	struct snap_rec *r = store_find_snap(st, id);
	return present ? r && r->size_bytes == i && !strcmp(r->id, id) : r == NULL;
}

/* The packs' index: the same through growth and removals, by pointer. */
static void packs(void)
{
	struct store *st = calloc(1, sizeof(*st));
	static struct pack p[N];
	int failed = 0;
	CHECK(st != NULL);
	for (int i = 0; i < N; i++) {
		snprintf(p[i].name, sizeof(p[i].name), "snap-%016x/%04d", (unsigned)i * 2654435761u,
			 i % 7);
		failed += store_add_pack(st, &p[i]) != 0;
	}
	CHECK(failed == 0 && st->npacks == N);
	for (int i = 0; i < N; i += 3)
		store_remove_pack(st, &p[i]);
	for (int i = 0; i < N; i++)
		failed += store_find_pack(st, p[i].name) != (i % 3 ? &p[i] : NULL);
	CHECK(failed == 0 && st->npacks == N - (N + 2) / 3);
	/* Reserved room: adding them back cannot fail, and finds each. */
	CHECK(store_packs_reserve(st, (N + 2) / 3) == 0);
	size_t cap = st->pack_slots_cap;
	for (int i = 0; i < N; i += 3)
		failed += store_add_pack(st, &p[i]) != 0;
	for (int i = 0; i < N; i++)
		failed += store_find_pack(st, p[i].name) != &p[i];
	CHECK(failed == 0 && st->pack_slots_cap == cap);
	free(st->packs);
	free(st->pack_slots);
	free(st);
}

int main(void)
{
	struct store *st = calloc(1, sizeof(*st));
	char id[NAME_LEN_MAX + 1];
	CHECK(st != NULL);
	if (!st)
		return t_done();
	CHECK(store_find_snap(st, "snap-none") == NULL); /* nothing yet: no table at all */
	CHECK(!store_forget_snap(st, "snap-none"));
	int failed = 0;
	for (int i = 0; i < N; i++)
		failed += add(st, i) != 0;
	CHECK(failed == 0 && st->nsnaps == N);
	/* Forget every third: the last record moves into each hole. */
	for (int i = 0; i < N; i += 3) {
		id_of(i, id);
		failed += !store_forget_snap(st, id);
	}
	CHECK(failed == 0 && st->nsnaps == N - (N + 2) / 3);
	for (int i = 0; i < N; i++)
		failed += !found_as(st, i, i % 3 != 0);
	CHECK(failed == 0);
	id_of(0, id);
	CHECK(!store_forget_snap(st, id)); /* forgotten already */
	/* Added again after a removal, found again; the others stay. */
	for (int i = 0; i < N; i += 3)
		failed += add(st, i) != 0;
	for (int i = 0; i < N; i++)
		failed += !found_as(st, i, true);
	CHECK(failed == 0 && st->nsnaps == N);
	for (int i = 0; i < N; i++) {
		id_of(i, id);
		failed += !store_forget_snap(st, id);
	}
	CHECK(failed == 0 && st->nsnaps == 0);
	for (int i = 0; i < N; i++)
		failed += !found_as(st, i, false);
	CHECK(failed == 0);
	free(st->snaps);
	free(st->snap_slots);
	free(st);
	packs();
	return t_done();
}
