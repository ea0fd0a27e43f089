/*
 * store_bench.c - time the store alone (no runsc, no FUSE): put a directory of
 * checkpoint files as a snapshot, then get it back, and print throughput.
 * Built and run by bench/store.sh:
 *
 *   store_bench STORE_DIR SNAP_ID SRC_DIR OUT_DIR
 *
 * Prints one line: put_s put_MBps stored_bytes size_bytes get_s get_MBps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/store.h"
#include "lib/util.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct store *st = NULL;
	struct err e = {0};
	struct store_put_result res = {0};
	char url[4096 + 8];
	if (argc != 5) {
		fprintf(stderr, "usage: store_bench STORE_DIR SNAP_ID SRC_DIR OUT_DIR\n");
		return 2;
	}
	snprintf(url, sizeof(url), "file://%s", argv[1]);
	if (store_open(url, NULL, &st, &e) < 0) {
		fprintf(stderr, "store_bench: %s\n", e.msg);
		return 1;
	}
	cJSON *meta = cJSON_CreateObject();
	double t0 = now_s();
	int rc = store_put_snapshot(st, argv[2], argv[3], meta, NULL, NULL, &res, &e);
	double put_s = now_s() - t0;
	cJSON_Delete(meta);
	double get_s = 0;
	if (rc == 0) {
		t0 = now_s();
		rc = store_get_snapshot(st, argv[2], argv[4], &e);
		get_s = now_s() - t0;
	}
	if (rc < 0)
		fprintf(stderr, "store_bench: %s\n", e.msg);
	else
		printf("%.3f %.0f %lld %lld %.3f %.0f\n", put_s, res.size_bytes / put_s / 1e6,
		       (long long)res.stored_bytes, (long long)res.size_bytes, get_s,
		       res.size_bytes / get_s / 1e6);
	store_close(st);
	return rc < 0 ? 1 : 0;
}
