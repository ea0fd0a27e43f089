/*
 * snapmeta.h - a snapshot's metadata as JSON, the one codec of it: the
 * manifest's metadata beside its chunk lists (backend/store/manifest.h passes it
 * through), written from a registry row by the host that took the
 * snapshot and read back into a row by every host that shares the store;
 * and the info.json view of a row. Each field is written once, in the
 * table of snapmeta.c, for both.
 *
 *   {"id": "snap-…", "name": LABEL, "kind": "snapshot"|"suspend",
 *    "sandbox_id": ID, "created_at_ms": MS, "pause_ms": MS, "image": NAME,
 *    "image_digest": "sha256:…", "entrypoint": LINE, "runsc_version": V,
 *    "host": PROFILE (runtime/host.h), "gpu": BOOL,
 *    "timeout_s": SECONDS, "timeout_action": "terminate"|"suspend"}
 *
 * and, from manifest_build(), "size_bytes" and "stored_bytes". The timeout
 * fields are newer than the rest: a manifest without them reads as no
 * timeout.
 *
 * Any host that can write the bucket can write a manifest, so
 * snapmeta_parse() holds each field to the rule the same text typed here
 * follows (lib/names.h): ids as docs/design.md "Ids" says, the label, the
 * image name and the entrypoint as their control files take them, the
 * digest as images make it, numbers whole and from 0 to 2^53 (exact in a
 * JSON double, far inside int64), the creation time after 1970 and no more
 * than SNAPMETA_SKEW_MS ahead of this host's clock, the host profile one
 * line per string (host_profile_check()). Nothing else of the manifest
 * reaches a row.
 */
#ifndef SNAPFS_SNAPMETA_H
#define SNAPFS_SNAPMETA_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/registry/registry.h"
#include "lib/strbuf.h"
#include "lib/util.h"

/* How far ahead of this host's clock another host's may be. */
#define SNAPMETA_SKEW_MS (5 * 60 * 1000)

/* The metadata of @snap, taken here with runsc @runsc_version; NULL without memory. */
cJSON *snapmeta_build(const struct snapshot *snap, const char *runsc_version);

/* Member @key of @obj as a whole number from 0 to 2^53; false if it is not one. */
bool snapmeta_count(const cJSON *obj, const char *key, int64_t *out);

/*
 * The row of manifest @json, stored as snapshot @id: `completed`, its fields
 * from the metadata checked as above against the time @now_ms. Returns 0; 1
 * when the manifest names @this_host as its origin: this host records its
 * own snapshots before their manifests exist, so a manifest it has no row
 * of is not its own, and the row's profile drops that host_id. -EINVAL with
 * the failed field in @e (no field's value is quoted: it may be anything).
 */
int snapmeta_parse(const char *id, const char *json, int64_t now_ms, const char *this_host,
		   struct snapshot *out, struct err *e);

/*
 * The sizes of @snap's manifest @json (size_bytes, stored_bytes) into
 * @snap, for a snapshot that completed while snapfs was down: the bucket
 * may have been written since, so one the manifest lacks, or holds as no
 * whole number from 0 to 2^53, is left as it was; -EINVAL if @json is no
 * manifest.
 */
int snapmeta_sizes(const char *json, struct snapshot *snap);

/*
 * snapshots/<id>/info.json of @snap, appended to @out: id, name, kind,
 * sandbox_id, created_at and completed_at (RFC 3339), status, message,
 * pause_ms, size_bytes, stored_bytes, image_digest, host, gpu; "" and 0
 * times as null. 0 or -ENOMEM (-EFBIG past @out's limit).
 */
int snapmeta_info(const struct snapshot *snap, struct strbuf *out);

#endif
