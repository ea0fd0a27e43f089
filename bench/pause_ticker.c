/*
 * pause_ticker.c - the app of bench/first-checkpoint.sh, built static and
 * copied into the busybox image: it holds MIB mebibytes of memory filled
 * with pseudo-random bytes (so no page is zero and none compresses), then
 * wakes every 5 ms and appends "GAP_MS" to /tmp/gaps whenever more than
 * 30 ms passed since the last wake: the pause a checkpoint made, as the app
 * saw it (CLOCK_REALTIME goes on while the sandbox is paused).
 *
 *   pause_ticker MIB [zero]
 *
 * With `zero` the memory is written with zeros instead (pages committed
 * but zero-filled, as a zeroed buffer or a freed heap is).
 *
 * /tmp/ready is written once the memory is filled.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void append(const char *path, const char *line)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd >= 0) {
		ssize_t n = write(fd, line, strlen(line));
		(void)n;
		close(fd);
	}
}

int main(int argc, char **argv)
{
	size_t bytes = (size_t)(argc > 1 ? atol(argv[1]) : 256) << 20;
	uint64_t *mem = malloc(bytes), x = 88172645463325252ull;
	if (!mem)
		return 1;
	bool zero = argc > 2 && strcmp(argv[2], "zero") == 0;
	for (size_t i = 0; i < bytes / 8; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		mem[i] = zero ? 0 : x;
	}
	append("/tmp/ready", "ready\n");
	int64_t last = now_ms();
	for (;;) {
		struct timespec d = {0, 5 * 1000000};
		nanosleep(&d, NULL);
		int64_t t = now_ms();
		if (t - last > 30) {
			char line[64];
			snprintf(line, sizeof(line), "%lld\n", (long long)(t - last));
			append("/tmp/gaps", line);
		}
		last = t;
	}
}
