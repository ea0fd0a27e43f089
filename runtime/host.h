/*
 * host.h - the host profile a restore depends on, and the comparison of a
 * snapshot's recorded profile with this host.
 *
 * The profile is a JSON object: {"cpu_features": "sse sse2 ...",
 * "runsc_version": "...", "platform": "systrap", "kernel": "6.1.0",
 * "gpu_driver": "550.54.15", "gpus": ["NVIDIA H100 80GB HBM3"]}.
 * cpu_features is the sorted, space-separated flag list of /proc/cpuinfo.
 * kernel is informational: gVisor does not depend on it. gpu_driver ("" on
 * a host without NVIDIA driver) and gpus (sorted models, one per GPU) are
 * recorded for every snapshot; host_compare() leaves them alone, and
 * gpu_compare_host() (runtime/gpu.h) compares them for GPU snapshots.
 */
#ifndef SNAPFS_HOST_H
#define SNAPFS_HOST_H

#include "lib/strbuf.h"

/* Compute this host's profile once (cached) and append its JSON text to @out. */
int host_profile_json(const char *runsc_version, struct strbuf *out);
/*
 * Append one line to @out for every difference that prevents restoring a
 * snapshot with profile @recorded_json on this host; nothing when it can.
 * Returns the number of differences, or a negative errno.
 */
int host_compare(const char *recorded_json, const char *runsc_version, struct strbuf *out);

#endif
