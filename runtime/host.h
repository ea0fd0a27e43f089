/*
 * host.h - the host profile a restore depends on, and the comparison of a
 * snapshot's recorded profile with this host.
 *
 * The profile is a JSON object: {"host_id": "host-0123456789abcdef",
 * "cpu_features": "sse sse2 ...", "runsc_version": "...", "platform":
 * "systrap", "kernel": "6.1.0", "gpu_driver": "550.54.15", "gpus":
 * ["NVIDIA H100 80GB HBM3"]}.
 * host_id names the daemon that took the snapshot: "host-" and 16 random
 * hex digits, made once and kept in <state>/host-id, so it is one per
 * --state (two daemons on one machine are two hosts, as they are in the
 * tests) and survives restarts. Sandbox names are per host: only a
 * snapshot of this host's id is one of this host's sandboxes.
 * cpu_features is the sorted, space-separated flag list of /proc/cpuinfo.
 * kernel is informational: gVisor does not depend on it. gpu_driver ("" on
 * a host without NVIDIA driver) and gpus (sorted models, one per GPU) are
 * recorded for every snapshot; host_compare() leaves them alone, and
 * gpu_compare_host() (runtime/gpu/gpu.h) compares them for GPU snapshots.
 *
 * Threads: host_id_init() runs once at start-up, before any thread; from
 * then on the id is read-only, the CPU flags are read once (pthread_once),
 * and every other function is pure, so any thread may call them.
 */
#ifndef SNAPFS_HOST_H
#define SNAPFS_HOST_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "lib/strbuf.h"
#include "lib/util.h"

/* "host-" + 16 hex digits + NUL. */
#define HOST_ID_MAX 22

/*
 * Read this host's id from <@state_dir>/host-id, or make one and keep it
 * there when there is none yet. A file that holds no valid id is an error:
 * a new id would disown every snapshot taken under the old one.
 */
int host_id_init(const char *state_dir, struct err *e);
/* This host's id; "" before host_id_init(). */
const char *host_id(void);
/* The host_id of profile @host_json (a registry row's) into @out; "" if it names none. */
void host_origin(const char *host_json, char out[HOST_ID_MAX]);
/* Whether profile @host_json names this host as the snapshot's origin. */
bool host_is_this(const char *host_json);
/*
 * Check a profile read from a manifest: an object whose members are each
 * one line of text (lib/names.h text_ok) or an array of at most GPU_MAX such
 * lines, whose host_id, if any, is a host id; -EINVAL with the member in @e.
 */
int host_profile_check(const cJSON *profile, struct err *e);

/* Compute this host's profile once (cached) and append its JSON text to @out. */
int host_profile_json(const char *runsc_version, struct strbuf *out);
/*
 * Append one line to @out for every difference that prevents restoring a
 * snapshot with profile @recorded_json on this host; nothing when it can.
 * Returns the number of differences, or a negative errno.
 */
int host_compare(const char *recorded_json, const char *runsc_version, struct strbuf *out);

#endif
