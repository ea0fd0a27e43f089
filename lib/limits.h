/*
 * limits.h - the project's size limits, in one place.
 *
 * Every fixed-size field of a record, every bound on a name or a line a
 * user or the bucket hands us, is one of these. Sizes named *_MAX count the
 * terminating NUL (they size char arrays); *_LEN_MAX are string lengths.
 * The rules for what a name may contain are in lib/names.h.
 * Constants only: nothing here is state, so threads do not come into it.
 */
#ifndef SNAPFS_LIMITS_H
#define SNAPFS_LIMITS_H

/* The longest name_ok() name (a sandbox name, a store id), and image name. */
#define NAME_LEN_MAX 63
#define IMAGE_NAME_LEN_MAX 128

#define ID_MAX (NAME_LEN_MAX + 1) /* sandbox and snapshot ids, NUL included */
#define RUNTIME_ID_MAX 40	  /* runsc container ids, NUL included */
#define IMAGE_NAME_MAX 256
#define DIGEST_MAX 80 /* "sha256:" + 64 hex + NUL */
#define LABEL_MAX 128
#define ENTRYPOINT_MAX 4097 /* one control-file line, NUL included */
#define ENV_MAX 16384	    /* KEY=VALUE lines */
#define MESSAGE_MAX 1024
#define HOST_JSON_MAX 4096
/* A store's identity: "store-" + 32 hex + NUL (backend/store/store_ident.c). */
#define STORE_ID_MAX 40
/* Row updates the registry refused, kept in memory until it takes them (ops/ops_rows.c). */
#define REGISTRY_PENDING_MAX 256
#define CGROUP_PARENT_MAX 256 /* --cgroup-parent, NUL included (lib/names.h cgroup_parent_ok()) */

/*
 * A sandbox's resource limits (lib/size.h, docs/limits.md): 0 is unlimited,
 * anything else within these bounds. runsc's sentry and gofer alone use
 * about 15 MiB, so a lower memory limit would kill the sandbox as it
 * boots; a shell and an exec need a few tasks.
 */
#define RES_MEMORY_MIN (32LL << 20)	  /* bytes */
#define RES_MEMORY_MAX (1LL << 50)	  /* 1 PiB: exact as a JSON number (config.json) */
#define RES_CPU_MILLI_MIN 10		  /* 0.01 CPUs: the kernel's least CFS quota, 1 ms */
#define RES_CPU_MILLI_MAX (1024LL * 1000) /* 1024 CPUs */
#define RES_PIDS_MIN 32			  /* tasks */
#define RES_PIDS_MAX 4194304		  /* the kernel's PID_MAX_LIMIT */
#define RES_WORD_MAX 32			  /* the longest value text: "9223372036854775807B" */
/* A sandbox's lifetime (ops/ops_timer.c): the longest timeout or snapshot interval, a year. */
#define LIFETIME_SECONDS_MAX (366LL * 24 * 3600)
#define AUTOSNAP_KEEP_MAX 100 /* auto- snapshots one sandbox keeps */
#define FORK_COUNT_MAX 100    /* sandboxes one fork write makes (count=N) */

/*
 * pids is enforced twice (docs/limits.md): inside the sandbox as
 * RLIMIT_NPROC, which the sentry checks at each fork and clone, so a fork
 * bomb fails there with EAGAIN; and as the host cgroup's pids.max, a
 * backstop so that a sandbox never takes the host's tasks. The host counts
 * the runtime's own tasks too: measured with runsc 20240729 (systrap), the
 * sentry and gofer hold about 22 at rest, and each process inside adds
 * about 2 (its stub process and thread) and each thread about 0.1. The
 * backstop leaves 3 per task and 64 for the runtime, so the inside limit is
 * what a fork bomb hits first: pids 64 is a pids.max of 256.
 */
#define RES_PIDS_HOST_PER_TASK 3
#define RES_PIDS_HOST_BASE 64

/* Published ports (runtime/net/forward.h, ops/ops_ports.c). */
#define PORTS_SANDBOX_MAX 16	     /* ports one sandbox publishes */
#define PORTS_TEXT_MAX 256	     /* their record, "PORT HOSTPORT" lines (16 * 12 < 256) */
#define FORWARD_PORTS_MAX 1024	     /* listeners of the daemon in all */
#define FORWARD_CONNS_PORT_MAX 64    /* connections forwarded at once by one port */
#define FORWARD_CONNS_MAX 1024	     /* and by all of them */
#define FORWARD_BUF_BYTES (16 << 10) /* bytes in flight per direction of a connection */
/* Pidfds the sandbox monitor polls at once (ops/ops_life.c); in the open files budget. */
#define MONITOR_WATCH_MAX 1024
/*
 * A forwarded connection's clocks (runtime/net/forward.c): the connect to the
 * sandbox gives up after FORWARD_CONNECT_TIMEOUT_MS (an address that drops
 * SYNs would otherwise hold two fds for the kernel's two minutes of
 * retries); one that moves no byte either way for FORWARD_IDLE_TIMEOUT_MS
 * is closed, generous for a shell or a long poll, so abandoned ones do not
 * hold the FORWARD_CONNS_MAX slots for ever. Out of fds, a listener stops
 * accepting for FORWARD_ACCEPT_BACKOFF_MS instead of being woken at once.
 * A new connection to a port (or a daemon) whose table is full closes the
 * one that has moved no byte for longest, if that is at least
 * FORWARD_EVICT_IDLE_MS, to make room: idle sockets, any local user's,
 * cannot hold a port for the idle timeout (docs/network.md).
 */
#define FORWARD_CONNECT_TIMEOUT_MS 10000
#define FORWARD_IDLE_TIMEOUT_MS (60 * 60 * 1000)
#define FORWARD_EVICT_IDLE_MS 10000
#define FORWARD_ACCEPT_BACKOFF_MS 100

#endif
