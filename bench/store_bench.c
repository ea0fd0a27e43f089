/*
 * store_bench.c - the store alone (no runsc, no FUSE), on a directory of
 * checkpoint files, in a fresh store directory. Built and run by
 * bench/store.sh:
 *
 *   store_bench STORE_DIR SRC_DIR OUT_DIR
 *
 * 1. put SRC_DIR as snapshot "bench-1": every chunk is new, so this is
 *    chunking + SHA-256 + zstd + writing the packs;
 * 2. put it again as "bench-2": every chunk is known, so this is chunking +
 *    SHA-256 only;
 * 3. verify "bench-1": ranged reads, decompression, SHA-256 verification;
 * 4. get "bench-1" into OUT_DIR: the same, and writing the files.
 * Prints "name seconds MB/s" lines (MB of plain data, 10^6 bytes) and the
 * bytes stored by the first put.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/store/store.h"
#include "lib/util.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int put(struct store *st, const char *id, const char *src, const char *name,
	       struct store_put_result *res, struct err *e)
{
	cJSON *meta = cJSON_CreateObject();
	double t0 = now_s();
	int rc = store_put_snapshot(st, id, src, meta, NULL, NULL, res, e);
	double s = now_s() - t0;
	cJSON_Delete(meta);
	if (rc == 0)
		printf("%s %.3f %.0f\n", name, s, (double)res->size_bytes / s / 1e6);
	return rc;
}

int main(int argc, char **argv)
{
	struct store *st = NULL;
	struct err e = {0};
	struct store_put_result r1 = {0}, r2 = {0};
	char url[4096 + 8];
	if (argc != 4) {
		fprintf(stderr, "usage: store_bench STORE_DIR SRC_DIR OUT_DIR\n");
		return 2;
	}
	snprintf(url, sizeof(url), "file://%s", argv[1]);
	int rc = store_open(url, NULL, &st, &e);
	if (rc == 0)
		rc = put(st, "bench-1", argv[2], "put_new", &r1, &e);
	if (rc == 0)
		rc = put(st, "bench-2", argv[2], "put_known", &r2, &e);
	if (rc == 0) {
		double t0 = now_s();
		rc = store_verify_snapshot(st, "bench-1", &e);
		double s = now_s() - t0;
		if (rc == 0)
			printf("verify %.3f %.0f\n", s, (double)r1.size_bytes / s / 1e6);
	}
	if (rc == 0) {
		double t0 = now_s();
		rc = store_get_snapshot(st, "bench-1", argv[3], &e);
		double s = now_s() - t0;
		if (rc == 0)
			printf("get %.3f %.0f\n", s, (double)r1.size_bytes / s / 1e6);
	}
	if (rc == 0)
		printf("size_bytes %lld\nstored_bytes %lld\n", (long long)r1.size_bytes,
		       (long long)r1.stored_bytes);
	else
		fprintf(stderr, "store_bench: %s\n", e.msg);
	store_close(st);
	return rc < 0 ? 1 : 0;
}
