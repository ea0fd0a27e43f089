#include "lib/digest_slot.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "lib/util.h"

/* a[0..3] multiply the digest's words, a[4] is added. */
static unsigned __int128 key[5];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void key_init(void)
{
	if (getrandom(key, sizeof(key), 0) == (ssize_t)sizeof(key))
		return;
	/* No getrandom (an old kernel): a weaker key is still no fixed one. */
	warning("digest slots: getrandom failed; keying from the clock");
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uintptr_t)&ts;
	for (size_t i = 0; i < 5; i++) {
		/* splitmix64: spreads one seed over every key word. */
		uint64_t z = (x += 0x9e3779b97f4a7c15u);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
		key[i] = ((unsigned __int128)(z ^ (z >> 31)) << 64) | (z * 0x2545f4914f6cdd1du);
	}
}

size_t digest_slot(const unsigned char *sha256, size_t cap)
{
	pthread_once(&key_once, key_init);
	unsigned __int128 h = key[4];
	for (size_t i = 0; i < 4; i++) {
		uint64_t w;
		memcpy(&w, sha256 + 8 * i, sizeof(w));
		h += key[i] * w;
	}
	/* The top bits are the universal ones. */
	uint64_t top = (uint64_t)(h >> 64);
	return cap <= 1 ? 0 : (size_t)(top >> (64 - __builtin_ctzll(cap)));
}
