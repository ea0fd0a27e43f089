/*
 * bundle.h - a sandbox's OCI bundle: the config.json runsc run and runsc
 * restore read, built from one struct bundle_spec with cJSON.
 *
 * What every bundle has, whatever the spec: ociVersion 1.0.2, hostname
 * "snapfs", user 0:0 with Docker's default capabilities, cwd "/", PATH and
 * HOME unless the env sets them, a /proc mount and a tmpfs /tmp (runsc
 * itself provides /dev and /sys), and pid/ipc/uts/mount/network
 * namespaces. root.readonly is false: runsc puts its --overlay2 memory
 * overlay only on a writable root, so the image directory is still never
 * written (docs/runsc-notes.md).
 *
 * Ownership: the spec's strings and arrays are the caller's and only read;
 * bundle_write() keeps nothing. Every function may be called from any
 * thread.
 */
#ifndef SNAPFS_BUNDLE_H
#define SNAPFS_BUNDLE_H

#include <stddef.h>

#include "lib/size.h"
#include "lib/util.h"

/* The PATH a sandbox gets unless its env sets one; runsc's own too (runtime/runsc/runsc.c). */
#define BUNDLE_DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
/* Most words of a process's argv. */
#define BUNDLE_ARGV_MAX 64
/* Most host devices in one bundle: a GPU sandbox's NVIDIA nodes (GPU_NODES_MAX). */
#define BUNDLE_DEVICES_MAX 32

/*
 * What a bundle says, one field per part of config.json. Each part has one
 * builder in bundle.c, named after the config key it fills.
 */
struct bundle_spec {
	const char *rootfs;	 /* root.path: absolute, the image's directory */
	const char *const *argv; /* process.args: NULL-terminated, at least one word */
	const char *env;	 /* process.env: KEY=VALUE lines; NULL or "" for none */
	/*
	 * linux.devices with each node's major, minor and mode, and an allow
	 * rule in linux.resources.devices: host character devices (absolute
	 * paths), a GPU sandbox's NVIDIA nodes (runtime/gpu/gpu.h). A missing
	 * node is -ENODEV.
	 */
	const char *const *devices;
	size_t ndevices;
	/*
	 * linux.cgroupsPath: the sandbox's own cgroup, absolute (a
	 * --cgroup-parent and the container id: docs/cgroups.md); NULL or ""
	 * leaves it to runsc, which then picks "/<container id>".
	 */
	const char *cgroups_path;
	/*
	 * linux.resources.memory.limit, .cpu.quota and .period, .pids.limit,
	 * beside the device rules (bundle_resources()); a field 0 (or
	 * negative) is left out: unlimited. runsc writes them into the host
	 * cgroup (docs/limits.md).
	 */
	struct resources res;
	/*
	 * The network (runtime/net/net.h): @netns, the "path" of the network entry
	 * in linux.namespaces (bundle_namespaces()); @resolv, a host file
	 * bind-mounted read-only on /etc/resolv.conf (bundle_mounts()). NULL or
	 * "": a new empty namespace, the image's own resolv.conf.
	 */
	const char *netns;
	const char *resolv;
	/*
	 * linux.resources.cpu.shares: 0 leaves it out (the host's default
	 * weight); a warm pool's member is restored at CGROUP_SHARES_BACKGROUND
	 * so its restore yields the CPU to users' work (runtime/runsc/cgroup.h).
	 */
	unsigned cpu_shares;
};

/*
 * Write @spec's config.json into @dir (created 0700 if missing), durably.
 * -EINVAL for a relative rootfs or cgroups_path, an empty or too long argv,
 * or an env line that is not KEY=VALUE (the message gives its number, never the line: it
 * may hold a secret); -E2BIG past BUNDLE_DEVICES_MAX devices; -ENODEV for a
 * device that is missing or not a character device; -ENAMETOOLONG,
 * -ENOMEM, or the errno of a failed write.
 */
int bundle_write(const char *dir, const struct bundle_spec *spec, struct err *e);

#endif
