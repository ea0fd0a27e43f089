/*
 * fuzz.h - what every libFuzzer target in tests/fuzz/ shares.
 *
 * A target checks more than "no crash, leak or UB": FUZZ_CHECK states what
 * its parser promises of what it accepts, and a broken promise aborts,
 * which libFuzzer reports as a crash with the input that caused it.
 */
#ifndef SNAPFS_FUZZ_H
#define SNAPFS_FUZZ_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: broken promise: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* @len bytes of @data as a NUL-terminated copy (the caller frees it); aborts on ENOMEM. */
static inline char *fuzz_strndup(const uint8_t *data, size_t len)
{
	char *s = malloc(len + 1);
	if (!s)
		abort();
	if (len) /* libFuzzer may pass NULL with 0 bytes: memcpy's arguments must not be NULL */
		memcpy(s, data, len);
	s[len] = '\0';
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
