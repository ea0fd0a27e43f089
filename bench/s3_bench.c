/*
 * s3_bench URL put|get FILE KEY - one transfer through the S3 objstore,
 * configured from the environment as snapfs is (AWS_ENDPOINT_URL...).
 * Prints "seconds S" on success. bench/s3.sh builds and runs it.
 */
#include <stdio.h>
#include <string.h>

#include "backend/objstore/objstore.h"
#include "lib/util.h"

int main(int argc, char **argv)
{
	struct objstore *os = NULL;
	struct err e = {0};
	if (argc != 5 || (strcmp(argv[2], "put") && strcmp(argv[2], "get"))) {
		fprintf(stderr, "usage: s3_bench URL put|get FILE KEY\n");
		return 2;
	}
	if (objstore_s3_open(argv[1], &os, &e) < 0) {
		fprintf(stderr, "s3_bench: %s\n", e.msg);
		return 1;
	}
	int64_t start = mono_ms();
	int rc = !strcmp(argv[2], "put") ? objstore_put_file(os, argv[4], argv[3], &e)
					 : objstore_get_file(os, argv[4], argv[3], &e);
	int64_t ms = mono_ms() - start;
	objstore_close(os);
	if (rc < 0) {
		fprintf(stderr, "s3_bench: %s\n", e.msg);
		return 1;
	}
	printf("seconds %.3f\n", (double)ms / 1000.0);
	return 0;
}
