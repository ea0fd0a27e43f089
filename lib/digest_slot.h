/*
 * digest_slot.h - the slot of a SHA-256 digest in an open-addressing table.
 *
 * The digests in the store's tables (the chunk index, a restore's donor
 * map) come from the bucket: a manifest or pack index names any 32 bytes it
 * likes, unchecked until a chunk is read back. Slots taken from the
 * digest's first bytes let a bucket writer put every entry in one probe
 * run, so a table of N crafted entries costs N^2 probes, under the store's
 * lock, on every host that reads them (measured at -O2: 80,000 entries
 * sharing their first 8 bytes took 9.8 s of CPU, random ones 0.05 s).
 *
 * So the slot is a keyed hash of all 32 bytes with a key drawn once per
 * process from getrandom(): multiply-add-shift over the four 64-bit words
 * in 128-bit arithmetic (Dietzfelbinger), a strongly universal family.
 * Entries chosen without knowing the key collide no more often than random
 * ones, and the key never leaves the process. A keyed PRF from libcrypto
 * (SipHash through EVP_MAC) would give the same here at the cost of an
 * allocation and a provider call per probe, on tables of millions.
 */
#ifndef SNAPFS_DIGEST_SLOT_H
#define SNAPFS_DIGEST_SLOT_H

#include <stddef.h>

/* The slot of @sha256 (32 bytes) in a table of @cap slots, a power of two. */
size_t digest_slot(const unsigned char *sha256, size_t cap);

#endif
