/*
 * ahead.h - files of a sandbox's root/ read ahead: small files of a listed
 * directory that came whole with the open of one of them (WIRE_OPEN_MORE,
 * runtime/agent/wire.h), kept for the opens that follow. A `cp -r`,
 * `grep -r` or `tar -c` out of root/ opens every file of a directory it
 * just listed; each open of a small file used to be one crossing into the
 * sandbox (150-250 us in gVisor), now a directory's are a few.
 *
 * What a kept file may be: the file as it was when asked for, for at most
 * AHEAD_FRESH_MS, like the listing's attributes the kernel keeps for that
 * second (docs/control-files.md, root/). It answers one open, then is gone.
 * Any change through root/ and any exec through snapfs drop them all
 * (ahead_clear()), and a reply asked before such a change is not kept
 * (ahead_epoch()).
 *
 * Memory: a set holds at most AHEAD_KEPT_MAX files and AHEAD_BYTES_MAX
 * bytes of them, and all sets together AHEAD_TOTAL_MAX; what a set keeps
 * it owns, and what is over its second goes at the set's next use or the
 * caller's next ahead_prune() (the monitor's pass). Every
 * call on any set is made under one lock of the caller's (ops_agent.c:
 * agents.lock), which also guards what the sets share (the epochs handed
 * out, the bytes of all): nothing here locks, sleeps or does I/O
 * (tests/unit/test_ahead.c).
 */
#ifndef SNAPFS_OPS_AHEAD_H
#define SNAPFS_OPS_AHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/agent/wire.h"

#define AHEAD_FRESH_MS 1000
#define AHEAD_KEPT_MAX 128
#define AHEAD_BYTES_MAX (2u << 20)
#define AHEAD_TOTAL_MAX (64u << 20)

/* One file read ahead: @path (in the sandbox, as the daemon names it) and all its bytes. */
struct ahead_file {
	char *path;
	struct wire_attr attr;
	uint8_t *data; /* NULL when @len is 0 */
	size_t len;
	int64_t asked_ms; /* when the request that brought it was sent (mono_ms()) */
};

/* A sandbox's files read ahead; zeroed is empty. */
struct ahead_set {
	struct ahead_file v[AHEAD_KEPT_MAX]; /* path NULL: a free slot */
	size_t bytes;			     /* of data kept */
	uint64_t epoch;			     /* changed at each ahead_clear(); 0: none yet */
};

/* Free @f's path and data; it is empty after. */
void ahead_file_release(struct ahead_file *f);

/* Something changed inside: drop every file, and a reply asked before now will not be kept. */
void ahead_clear(struct ahead_set *s);

/*
 * The epoch to ask under: ahead_keep() of a reply asked then keeps nothing
 * once it moved. Unique across sets, so a set made again is not fooled.
 */
uint64_t ahead_epoch(struct ahead_set *s);

/* Is @path kept and fresh at @now_ms? */
bool ahead_has(const struct ahead_set *s, const char *path, int64_t now_ms);

/* Drop what is over its second at @now_ms (the caller's monitor pass, and each use). */
void ahead_prune(struct ahead_set *s, int64_t now_ms);

/* Keep @f (asked under @epoch) and own it, or release it: stale, changed since, or no room. */
void ahead_keep(struct ahead_set *s, uint64_t epoch, struct ahead_file *f, int64_t now_ms);

/* Take @path's fresh file into @out (the caller's to release): false when none. */
bool ahead_take(struct ahead_set *s, const char *path, int64_t now_ms, struct ahead_file *out);

#endif
