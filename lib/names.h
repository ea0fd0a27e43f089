/*
 * names.h - the rules for the names, ids and one-line text that reach
 * snapfs from a user (mkdir, control files, specs) and from the bucket
 * (another host's manifests): one rule each, used by both, so nothing the
 * bucket carries passes where the same text typed here would not
 * (docs/design.md "Ids", "Untrusted input").
 *
 * All are pure checks on a NUL-terminated string; none allocates, so any
 * thread may call them.
 */
#ifndef SNAPFS_NAMES_H
#define SNAPFS_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/limits.h"

/* The hex digits of a generated id: "sbx-", "snap-" or "host-" and these. */
#define GENERATED_ID_HEX 16
/* A runsc container id snapfs makes: the prefix and this many hex digits. */
#define RUNTIME_ID_PREFIX "snapfs-"
#define RUNTIME_ID_HEX 24
/*
 * Every interface snapfs makes starts with this (runtime/net/net.h): the host
 * end of a sandbox's veth is the prefix and 12 hex digits of its runtime
 * id, 15 characters, IFNAMSIZ's most. Cleanup touches no other name.
 */
#define NET_IF_PREFIX "snf"
#define NET_IF_MAX 16 /* IFNAMSIZ: an interface name, NUL included */

/*
 * [a-z0-9][a-z0-9._-]{0,62}: a sandbox name, and a store id. No '/', no
 * leading '.', so a name joined to a directory stays in it.
 */
bool name_ok(const char *s);
/* A sandbox id: name_ok() and not a name sandboxes/ itself holds (index, new). */
bool sandbox_id_ok(const char *s);
/* @prefix and GENERATED_ID_HEX lowercase hex digits: "snap-0123456789abcdef". */
bool generated_id_ok(const char *s, const char *prefix);
/* RUNTIME_ID_PREFIX and RUNTIME_ID_HEX lowercase hex digits: a container (and cgroup) of ours. */
bool runtime_id_ok(const char *s);
/* [A-Za-z0-9][A-Za-z0-9._-]{0,127}: an image, a directory of --images. */
bool image_name_ok(const char *s);
/* An image digest: "sha256:" and 64 lowercase hex digits. */
bool image_digest_ok(const char *s);
/* A snapshot label (`name=LABEL`): fewer than @size bytes, no space, no control. */
bool label_ok(const char *s, size_t size);
/*
 * A label that is also a file name, as snapshots/by-name/<label> shows it:
 * label_ok(), not empty, no '/', not "." or "..", and not "-" (what
 * snapshots/index shows for no name). What `name=` takes from now on.
 */
bool label_file_ok(const char *s, size_t size);
/*
 * Text shown as one line (an entrypoint, a version string): fewer than
 * @size bytes and no control character but tab, so it can neither end a
 * line nor start another.
 */
bool text_ok(const char *s, size_t size);
/*
 * A --cgroup-parent: an absolute cgroupfs path of components
 * [A-Za-z0-9][A-Za-z0-9._-]*, shorter than CGROUP_PARENT_MAX. No "." or "..",
 * no "//", no trailing '/', no ':' (runsc would take a relative or a
 * "slice:prefix:name" path under the daemon's own cgroup: docs/cgroups.md).
 */
bool cgroup_parent_ok(const char *s);

#endif
