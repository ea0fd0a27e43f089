/*
 * test_store_snaps.c - the store's records of manifests and their index by
 * id (backend/store_snaps.c): every record added is found, every one
 * forgotten is not, through growth and removals that move records and
 * shift probe chains.
 */
#include <stdio.h>
#include <stdlib.h>

#include "backend/store_internal.h"
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
	return t_done();
}
