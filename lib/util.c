/*
 * util.c - the small helpers of lib/util.h: cleanup functions, growing
 * arrays, time, random hex, bounded formatting, string tails. It calls
 * nothing else in lib/: logging is log.c's, file I/O files.c's.
 */
#include "lib/util.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

void freep(void *p)
{
	free(*(void **)p);
}

void *alloc_grow(void *arr, size_t *cap, size_t used, size_t size)
{
	if (used < *cap)
		return arr;
	size_t ncap = *cap ? *cap * 2 : 16;
	void *bigger = reallocarray(arr, ncap, size);
	if (bigger)
		*cap = ncap;
	return bigger;
}

void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}

void fclosep(FILE **f)
{
	if (*f) {
		int saved = errno;
		fclose(*f);
		errno = saved;
	}
}

void closedirp(DIR **d)
{
	if (*d) {
		int saved = errno;
		closedir(*d);
		errno = saved;
	}
}

int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cond_init_mono(pthread_cond_t *c)
{
	pthread_condattr_t at;
	pthread_condattr_init(&at);
	pthread_condattr_setclock(&at, CLOCK_MONOTONIC);
	pthread_cond_init(c, &at);
	pthread_condattr_destroy(&at);
}

bool cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, int64_t deadline_ms)
{
	struct timespec ts = {.tv_sec = deadline_ms / 1000,
			      .tv_nsec = (deadline_ms % 1000) * 1000000};
	return pthread_cond_timedwait(c, m, &ts) != ETIMEDOUT;
}

int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void format_time(int64_t ms, char out[32])
{
	time_t secs = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&secs, &tm);
	size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 32 - n, ".%03dZ", (int)(ms % 1000));
}

void hex_encode(const unsigned char *raw, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[raw[i] >> 4];
		out[2 * i + 1] = digits[raw[i] & 0xf];
	}
	out[2 * len] = '\0';
}

int random_hex(char *out, size_t nhex)
{
	unsigned char raw[RANDOM_HEX_MAX / 2];
	char hex[RANDOM_HEX_MAX + 1];
	size_t nbytes = (nhex + 1) / 2;
	if (nbytes > sizeof(raw))
		return -EINVAL;
	if (getrandom(raw, nbytes, 0) != (ssize_t)nbytes)
		return -errno;
	hex_encode(raw, nbytes, hex);
	memcpy(out, hex, nhex);
	out[nhex] = '\0';
	return 0;
}

uint64_t fnv1a(const char *s)
{
	uint64_t h = 14695981039346656037ull;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return h;
}

int random_name(const char *prefix, size_t nhex, char *out, size_t size)
{
	char hex[RANDOM_HEX_MAX + 1];
	int rc = random_hex(hex, nhex);
	if (rc < 0)
		return rc;
	return xsnprintf(out, size, "%s%s", prefix, hex) < 0 ? -ENAMETOOLONG : 0;
}

long env_count(const char *name, long fallback)
{
	const char *s = getenv(name);
	long v = s ? strtol(s, NULL, 10) : 0;
	return v > 0 ? v : fallback;
}

int xsnprintf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	return n;
}

size_t rstrip(char *s)
{
	size_t n = strlen(s);
	while (n > 0 &&
	       (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		s[--n] = '\0';
	return n;
}

bool str_has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}
