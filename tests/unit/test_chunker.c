#include <stdlib.h>
#include <string.h>

#include "backend/store/chunker.h"
#include "lib/util.h"
#include "tests/unit/t.h"

#define DATA_LEN ((8u << 20) + 1000)
#define CUTS_MAX 4096

/* A fixed pseudo-random stream, so boundaries are the same on every run and host. */
static void fill(unsigned char *p, size_t len, uint64_t seed)
{
	uint64_t x = seed;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)(x >> 24);
	}
}

/* The chunk lengths of @data; returns how many. */
static size_t cut_all(enum chunk_method m, const unsigned char *data, size_t len, size_t *lens)
{
	size_t n = 0;
	for (size_t off = 0; off < len && n < CUTS_MAX; n++) {
		lens[n] = chunk_next(m, data + off, len - off);
		off += lens[n];
	}
	return n;
}

/* How many chunk ends of @b, moved back by @shift, are chunk ends of @a. */
static size_t common_ends(const size_t *a, size_t na, const size_t *b, size_t nb, size_t shift)
{
	size_t same = 0, ia = 0, ea = 0, eb = 0;
	for (size_t ib = 0; ib < nb; ib++) {
		eb += b[ib];
		if (eb < shift)
			continue;
		while (ia < na && ea < eb - shift)
			ea += a[ia++];
		same += ea == eb - shift;
	}
	return same;
}

static void test_method_for(void)
{
	CHECK(chunk_method_for("pages.img") == CHUNK_PAGES);
	CHECK(chunk_method_for("checkpoint.img") == CHUNK_GEAR);
	CHECK(chunk_method_for("pages_meta.img") == CHUNK_GEAR);
}

static void test_pages(const unsigned char *data)
{
	static size_t lens[CUTS_MAX];
	size_t n = cut_all(CHUNK_PAGES, data, DATA_LEN, lens);
	size_t total = 0;
	bool aligned = true, bounded = true;
	for (size_t i = 0; i < n; i++) {
		total += lens[i];
		if (i + 1 < n && lens[i] % CHUNK_PAGE_SIZE)
			aligned = false;
		if (lens[i] > CHUNK_MAX ||
		    (i + 1 < n && lens[i] <= CHUNK_PAGES_MIN * CHUNK_PAGE_SIZE))
			bounded = false;
	}
	CHECK(total == DATA_LEN);
	CHECK(aligned && bounded);
	CHECK(lens[n - 1] % CHUNK_PAGE_SIZE == 1000); /* the partial page ends the last chunk */
	/* Determinism: the page hash is fixed, so these never change. */
	CHECK(n == 112 && lens[0] == 20480 && lens[1] == 163840 && lens[2] == 61440);
	/* Mean about 80 KiB: 20 pages. */
	CHECK(n > DATA_LEN / (120u << 10) && n < DATA_LEN / (50u << 10));
	/* Short input: one chunk. */
	CHECK(chunk_next(CHUNK_PAGES, data, 3 * CHUNK_PAGE_SIZE) == 3 * CHUNK_PAGE_SIZE);
	CHECK(chunk_next(CHUNK_PAGES, data, 100) == 100);
	/* Zero pages never end a chunk early: the maximum, a zero run in the manifest. */
	unsigned char *zero = calloc(1, CHUNK_MAX * 2);
	CHECK(chunk_next(CHUNK_PAGES, zero, CHUNK_MAX * 2) == CHUNK_MAX);
	free(zero);
}

/*
 * @shift bytes more at the start (filled from @seed): after a chunk or two,
 * @m's boundaries are the same again, moved with the data.
 */
static void test_shift(enum chunk_method m, const unsigned char *data, size_t shift, uint64_t seed)
{
	static size_t a[CUTS_MAX], b[CUTS_MAX];
	unsigned char *moved = malloc(DATA_LEN + shift);
	fill(moved, shift, seed);
	memcpy(moved + shift, data, DATA_LEN);
	size_t na = cut_all(m, data, DATA_LEN, a);
	size_t nb = cut_all(m, moved, DATA_LEN + shift, b);
	CHECK(common_ends(a, na, b, nb, shift) + 3 >= na);
	free(moved);
}

static void test_gear(const unsigned char *data)
{
	static size_t lens[CUTS_MAX];
	size_t n = cut_all(CHUNK_GEAR, data, DATA_LEN, lens);
	size_t total = 0;
	bool bounded = true;
	for (size_t i = 0; i < n; i++) {
		total += lens[i];
		if (lens[i] > CHUNK_MAX || (i + 1 < n && lens[i] <= CHUNK_GEAR_MIN))
			bounded = false;
	}
	CHECK(total == DATA_LEN && bounded);
	CHECK(n > DATA_LEN / (120u << 10) && n < DATA_LEN / (50u << 10));
	/* Determinism: the gear table and hash are fixed, so these never change. */
	CHECK(n == 102 && lens[0] == 128061 && lens[1] == 101780 && lens[2] == 110989);
	CHECK(chunk_next(CHUNK_GEAR, data, 1000) == 1000);
}

int main(void)
{
	unsigned char *data = malloc(DATA_LEN);
	fill(data, DATA_LEN, 0x1234567);
	test_method_for();
	test_pages(data);
	test_shift(CHUNK_PAGES, data, 3 * CHUNK_PAGE_SIZE, 99); /* three pages */
	test_gear(data);
	test_shift(CHUNK_GEAR, data, 1234, 7);
	free(data);
	return t_done();
}
