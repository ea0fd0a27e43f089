/*
 * cgroup.h - where a sandbox's host processes live: its own cgroup under
 * --cgroup-parent, never the daemon's, so a stop of the daemon's service
 * (systemd kills its whole cgroup) kills no sandbox (docs/cgroups.md).
 *
 * The path: <parent>/<container id>, absolute, in the bundle's
 * linux.cgroupsPath. runsc creates it in every cgroup v1 hierarchy (or
 * the cgroup v2 tree, when /sys/fs/cgroup is one), moves the gofer and
 * the sandbox into it before they start anything, and removes it at
 * `runsc delete`.
 *
 * The hybrid layout (cgroup v1 controllers, and a controller-less cgroup v2
 * tree at /sys/fs/cgroup/unified, where systemd tracks and kills a
 * service's processes): runsc 20240729 uses v1 there and leaves the v2
 * tree alone, so the sandbox would stay in the daemon's service there.
 * cgroup_adopt() moves it into <unified>/<parent> (one cgroup for all
 * sandboxes: the v2 tree there has no controller to account with).
 *
 * Nothing here keeps state; every function may be called from any thread.
 */
#ifndef SNAPFS_CGROUP_H
#define SNAPFS_CGROUP_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/limits.h"
#include "lib/size.h"
#include "lib/util.h"

/* The default --cgroup-parent: a slice of its own beside the daemon's service. */
#define CGROUP_PARENT_DEFAULT "/snapfs.slice"

/* Where systemd's hybrid layout mounts the cgroup v2 tree, and the v1 tree runsc fills. */
#define CGROUP_UNIFIED_MOUNT "/sys/fs/cgroup/unified"
#define CGROUP_V1_TRACKER "/sys/fs/cgroup/systemd"

/* Most passes of cgroup_adopt() over a container that keeps forking. */
#define CGROUP_ADOPT_PASSES 16

/*
 * Check --cgroup-parent @parent (NULL: CGROUP_PARENT_DEFAULT) against
 * cgroup_parent_ok() (lib/names.h) and copy it into @out; then adopt what
 * every container under it left in the daemon's cgroup (a daemon killed
 * between a run and its cgroup_adopt()): a failure there is only logged.
 * -EINVAL with @e naming the rule for a parent that breaks it.
 */
int cgroup_open(const char *parent, char out[CGROUP_PARENT_MAX], struct err *e);

/* @out = "<parent>/<cid>", the bundle's linux.cgroupsPath; -ENAMETOOLONG past @size. */
int cgroup_path(const char *parent, const char *cid, char *out, size_t size);

/*
 * On a hybrid host, move every process of container @cid (every container
 * under @parent when @cid is NULL, as at start-up after a crash between a
 * run and its adoption) into <unified>/<parent>; elsewhere nothing. Their
 * list is the v1 cgroup runsc made (CGROUP_V1_TRACKER/<parent>/<cid>),
 * read again until a pass finds nobody new (a child forked meanwhile).
 * 0, or -errno with @e saying which cgroup could not be written.
 */
int cgroup_adopt(const char *parent, const char *cid, struct err *e);
/*
 * cgroup_adopt() with the v1 tree at @v1 and the v2 tree at @v2, on any
 * host (a test's own directories); under @parent only directories that are
 * runtime ids (runtime_id_ok()) are containers: another's cgroup stays.
 */
int cgroup_adopt_from(const char *v1, const char *v2, const char *parent, const char *cid,
		      struct err *e);

/*
 * Can runsc enforce every limit @r sets (non-zero) on this host? It does so
 * through the host cgroup's memory, cpu and pids controllers
 * (docs/limits.md): -EINVAL with @e naming @what and the controller this
 * host lacks.
 */
int cgroup_can_limit(const struct resources *r, const char *what, struct err *e);

/*
 * A container's CPU weight against the other cgroups under the parent: a
 * warm pool's member is restored at CGROUP_SHARES_BACKGROUND (its bundle's
 * cpu.shares: v1's least; runsc writes cpu.weight 1 on a v2 tree), so the
 * restore yields the CPU to users' work, and set back to the host's default
 * (v1 cpu.shares 1024, v2 cpu.weight 100) when a fork takes it.
 * cgroup_cpu_normal_at() works under @root (a test's directory): -errno
 * with @e when the file cannot be written (a host without the controller
 * answers -ENOENT: the weight was never lowered there either).
 */
#define CGROUP_SHARES_BACKGROUND 2
int cgroup_cpu_normal_at(const char *root, bool v2, const char *parent, const char *cid,
			 struct err *e);
int cgroup_cpu_normal(const char *parent, const char *cid, struct err *e);

/* What a container's cgroup has counted (docs/limits.md). */
struct cgroup_usage {
	int64_t memory_bytes; /* memory.usage_in_bytes (v1), memory.current (v2) */
	int64_t memory_peak;  /* memory.max_usage_in_bytes (v1), memory.peak (v2, Linux 5.19) */
	int64_t cpu_ns;	      /* cpuacct.usage (v1), cpu.stat usage_usec (v2) */
	int64_t oom_kills;    /* oom_kill of memory.oom_control (v1), memory.events (v2) */
	int64_t pids_max;     /* times pids.max refused a task (pids.events max) */
};
/*
 * The counters of container @cid's cgroup under @parent; each one it
 * cannot read is -1. -ENOENT when the cgroup is gone (all -1).
 */
int cgroup_usage(const char *parent, const char *cid, struct cgroup_usage *u);
/* cgroup_usage() with the hierarchies under @root, v1 or (@v2) one v2 tree: a test's own. */
int cgroup_usage_at(const char *root, bool v2, const char *parent, const char *cid,
		    struct cgroup_usage *u);
/*
 * Did a container with limits @res and counters @u end because it hit one
 * since counters @base were noted (NULL: since its cgroup was made)? The
 * counters only grow over a cgroup's life, and a sandbox may survive an
 * event (a kill of one of its other processes): only a counter that moved
 * past @base says anything about an end now. A counter below @base is a
 * new cgroup's, compared against 0.
 * runsc 20240729 cannot fail the task inside: the host's OOM killer ends
 * the whole sandbox at its memory limit, and the sentry panics when
 * pids.max (the host's backstop over the RLIMIT_NPROC inside) refuses it a
 * thread (docs/limits.md). 1 with the reason in
 * @msg, 0 if neither counter says so.
 */
int cgroup_limit_hit(const struct cgroup_usage *u, const struct cgroup_usage *base,
		     const struct resources *res, char *msg, size_t size);

#endif
