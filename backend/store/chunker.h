/*
 * chunker.h - where the store cuts a checkpoint file into chunks.
 *
 * Both methods are content-defined: whether a chunk ends at some point
 * depends only on the bytes just before it, so when runsc writes a few
 * pages more or fewer early in a file, the boundaries after them move with
 * the data and every later chunk is still found in the store. Fixed-size
 * blocks lose that (docs/store.md has the measurements).
 *
 *   CHUNK_PAGES  runsc's pages.img (page-aligned guest memory). Chunks are
 *                whole 4 KiB pages: a chunk ends after a page, from its
 *                CHUNK_PAGES_MIN-th page on, whose 64-bit page hash has its
 *                low 4 bits zero (one page in 16), or after CHUNK_PAGES_MAX
 *                pages. Mean length about 80 KiB.
 *   CHUNK_GEAR   every other file: a gear rolling hash (as in FastCDC) over
 *                a fixed table; a chunk ends where the top 16 bits of the
 *                hash are zero, at least CHUNK_GEAR_MIN and at most
 *                CHUNK_MAX bytes in. Mean length about 80 KiB.
 *
 * Only a file's last chunk may be shorter than the minimum (or, for
 * CHUNK_PAGES, not a whole number of pages). The hash functions and the
 * gear table are part of the store format in one sense only: changing them
 * never breaks a restore (manifests list every chunk), it loses
 * deduplication against what is already stored.
 *
 * Pure functions, safe from any thread.
 */
#ifndef SNAPFS_CHUNKER_H
#define SNAPFS_CHUNKER_H

#include <stddef.h>
#include <stdint.h>

#define CHUNK_PAGE_SIZE 4096u
#define CHUNK_PAGES_MIN 4u
#define CHUNK_PAGES_MAX 64u
#define CHUNK_GEAR_MIN (16u << 10)
/* No chunk is longer than this, whatever the method. */
#define CHUNK_MAX (256u << 10)

enum chunk_method {
	CHUNK_PAGES,
	CHUNK_GEAR,
};

/* The method for a checkpoint file named @name: CHUNK_PAGES for "pages.img". */
enum chunk_method chunk_method_for(const char *name);

/* The length of the chunk that starts at @data, where @len > 0 bytes are left in the file. */
size_t chunk_next(enum chunk_method method, const unsigned char *data, size_t len);

/* The 64-bit hash CHUNK_PAGES decides on, of one CHUNK_PAGE_SIZE page. */
uint64_t chunk_page_hash(const unsigned char *page);

#endif
