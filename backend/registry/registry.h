/*
 * registry.h - the SQLite registry of sandboxes and snapshots.
 *
 * One database file under --state (WAL mode, synchronous=NORMAL, a busy
 * timeout), one connection opened in serialized mode so any thread may call
 * any function. Each call is one statement or one transaction: a reader
 * always sees a whole row. The registry does no state-machine checks; the
 * operations layer (ops/ops_core.c) serialises read-check-write sequences
 * under its own lock and uses the registry as plain storage.
 *
 * Ownership: records are plain structs with fixed-size fields, filled by
 * copy; the caller owns them and nothing in them points into the registry.
 * Strings longer than a field are refused with -ENAMETOOLONG on write.
 *
 * Errors: 0 on success, -ENOENT when a row is missing, -EEXIST when an
 * insert hits an existing id, -EIO when SQLite fails (the SQLite message is
 * logged with error()).
 */
#ifndef SNAPFS_REGISTRY_H
#define SNAPFS_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/limits.h"
#include "lib/size.h"

enum sandbox_state {
	SB_CREATED,
	SB_STARTING,
	SB_RUNNING,
	SB_SNAPSHOTTING,
	SB_SUSPENDING,
	SB_SUSPENDED,
	SB_RESUMING,
	SB_TERMINATING,
	SB_TERMINATED,
	SB_FAILED,
	SB_WARM, /* a warm pool's member, restored and paused, nobody's until taken (ops/ops_warm.c)
		  */
};

enum snapshot_state {
	SNAP_PENDING,
	SNAP_IN_PROGRESS,
	SNAP_COMPLETED,
	SNAP_FAILED,
};

enum snapshot_kind {
	SNAP_KIND_SNAPSHOT, /* fork source; the sandbox keeps running */
	SNAP_KIND_SUSPEND,  /* taken by suspend; resume restores it */
};

const char *sandbox_state_name(enum sandbox_state s);
int sandbox_state_parse(const char *name, enum sandbox_state *out); /* -EINVAL */
/* starting, snapshotting, suspending, resuming, terminating */
bool sandbox_state_transitional(enum sandbox_state s);
const char *snapshot_state_name(enum snapshot_state s);
/* completed or failed: nothing moves it on (a wait for it ends) */
bool snapshot_state_settled(enum snapshot_state s);
int snapshot_state_parse(const char *name, enum snapshot_state *out);
const char *snapshot_kind_name(enum snapshot_kind k);
int snapshot_kind_parse(const char *name, enum snapshot_kind *out);

/* What a sandbox's timeout does when it expires (ops/ops_timer.c). */
enum timeout_action {
	TIMEOUT_TERMINATE,
	TIMEOUT_SUSPEND,
};
const char *timeout_action_name(enum timeout_action a);
/* A sandbox's network (runtime/net/net.h): none, or its own namespace with egress. */
enum sandbox_network { SB_NET_NONE, SB_NET_EGRESS };
#define SB_EGRESS_MAX 2048  /* the egress rules' text, NUL included */
#define SB_EXIT_CODE_MAX 12 /* an exit status in decimal, NUL included */
const char *sandbox_network_name(enum sandbox_network n);
int sandbox_network_parse(const char *name, enum sandbox_network *out); /* -EINVAL */
int timeout_action_parse(const char *name, enum timeout_action *out);	/* -EINVAL */

struct sandbox {
	char id[ID_MAX];
	char runtime_id[RUNTIME_ID_MAX]; /* fixed-length runsc container id */
	char image[IMAGE_NAME_MAX];
	char image_digest[DIGEST_MAX]; /* pinned when started; "" before */
	char entrypoint[ENTRYPOINT_MAX];
	char env[ENV_MAX]; /* KEY=VALUE lines; values never leave the daemon */
	bool gpu;
	enum sandbox_state state;
	char message[MESSAGE_MAX];     /* last failure's message, "" if none */
	int64_t created_at;	       /* ms since the epoch */
	char parent_snapshot[ID_MAX];  /* snapshot it was forked from, "" if none */
	char restore_snapshot[ID_MAX]; /* suspend snapshot it resumes from, "" if none */
	pid_t pid;		       /* runsc sandbox pid, 0 when not running */
	uid_t owner_uid;	       /* who created it (ops/access.h); 0: root */
	gid_t owner_gid;
	/* Limits (docs/limits.md): set while created, then fixed; a fork's may be raised. */
	struct resources res;
	/*
	 * Its lifetime (ops/ops_timer.c): the timeout, whose clock runs
	 * from each start, fork or resume, and the periodic snapshots. Times are
	 * ms since the epoch, so they mean the same after a daemon restart.
	 */
	int64_t timeout_s; /* seconds a run may last; 0: none */
	enum timeout_action timeout_action;
	int64_t deadline_at;	  /* when the timeout fires; 0: its clock is not running */
	int64_t autosnap_every_s; /* seconds between snapshots; 0: none taken */
	int64_t autosnap_keep;	  /* auto- snapshots kept; 0: none deleted */
	int64_t autosnap_next_at; /* when the next one is due; 0: none */
	/* Published ports (ops/ops_ports.c): "PORT HOSTPORT" lines, republished at start-up. */
	char ports[PORTS_TEXT_MAX];
	/* Its network (runtime/net/net.h): set while created; forks and resumes keep it. */
	enum sandbox_network network;
	char egress[SB_EGRESS_MAX]; /* `allow/deny CIDR` lines; changeable while it runs */
	/*
	 * The entrypoint's exit status in decimal (0-255; 128+N for signal N),
	 * once the monitor reaped its end; "" before it ended, and where
	 * nobody saw the status (terminated, a daemon restart in between).
	 */
	char exit_code[SB_EXIT_CODE_MAX];
	/*
	 * When what the tree shows of it last changed (ms since the epoch; its
	 * files' mtime: ops/ops_rows.c sets it); 0 in rows from before the
	 * column (schema 9): created_at stands in.
	 */
	int64_t changed_at;
};

struct snapshot {
	char id[ID_MAX];
	char name[LABEL_MAX]; /* `name=LABEL`, "" if none */
	enum snapshot_kind kind;
	char sandbox_id[ID_MAX];
	int64_t created_at;
	int64_t completed_at; /* 0 until completed or failed */
	enum snapshot_state state;
	char message[MESSAGE_MAX];
	int64_t pause_ms;
	int64_t size_bytes;   /* plain bytes of the checkpoint image */
	int64_t stored_bytes; /* bytes this snapshot added to the store */
	char image[IMAGE_NAME_MAX];
	char image_digest[DIGEST_MAX];
	char entrypoint[ENTRYPOINT_MAX]; /* the source's, so a fork can rebuild its bundle */
	char env[ENV_MAX]; /* the source's: `runsc exec` in a fork takes it from the bundle */
	char host_json[HOST_JSON_MAX]; /* host profile as a JSON object text */
	bool gpu;
	uid_t owner_uid; /* its source sandbox's owner; 0 (root) for another host's */
	gid_t owner_gid;
	struct resources res; /* its source's limits, which a fork or resume keeps */
	/* The source's timeout when it was taken: a fork's starts from it (ops/ops_timer.c). */
	int64_t timeout_s;
	enum timeout_action timeout_action;
	/* The source's published ports, "PORT 0" lines: a fork publishes them on new host ports. */
	char ports[PORTS_TEXT_MAX];
	/* The source's network: a fork gets the same mode and rules (runtime/net/net.h). */
	enum sandbox_network network;
	char egress[SB_EGRESS_MAX];
	/*
	 * Taken by the autosnapshot timer (ops/ops_timer.c): only these are
	 * its prune's to delete, whatever their name. False in rows from before
	 * the column (schema 7): those are never pruned.
	 */
	bool autosnap;
	int64_t changed_at; /* as a sandbox's: its files' mtime; 0 before schema 10 */
};

struct registry;

int registry_open(const char *path, struct registry **out);
void registry_close(struct registry *reg);

int registry_sandbox_insert(struct registry *reg, const struct sandbox *sb);
int registry_sandbox_get(struct registry *reg, const char *id, struct sandbox *out);
/* Replace the whole row with the same id; -ENOENT if there is none. */
int registry_sandbox_update(struct registry *reg, const struct sandbox *sb);
int registry_sandbox_delete(struct registry *reg, const char *id);
/*
 * Call @fn for every sandbox, ordered by created_at then id. A non-zero
 * return from @fn stops the walk and is returned. The row passed to @fn is
 * valid only during the call.
 */
int registry_sandbox_each(struct registry *reg, int (*fn)(const struct sandbox *sb, void *arg),
			  void *arg);
/* Sandboxes whose parent_snapshot is @snapshot_id, oldest first. */
int registry_sandbox_each_forked_from(struct registry *reg, const char *snapshot_id,
				      int (*fn)(const struct sandbox *sb, void *arg), void *arg);
/* Is any sandbox with restore_snapshot == @snapshot_id suspending, suspended or resuming? */
int registry_snapshot_pinned(struct registry *reg, const char *snapshot_id, bool *pinned);

int registry_snapshot_insert(struct registry *reg, const struct snapshot *snap);
int registry_snapshot_get(struct registry *reg, const char *id, struct snapshot *out);
int registry_snapshot_update(struct registry *reg, const struct snapshot *snap);
int registry_snapshot_delete(struct registry *reg, const char *id);
/* Every snapshot, ordered by created_at then id. */
int registry_snapshot_each(struct registry *reg, int (*fn)(const struct snapshot *snap, void *arg),
			   void *arg);
/*
 * The same walk for a listing (snapshots/index, ls, by-name/): each row
 * has its id, state, sandbox_id, owner_uid, name and created_at only, the
 * rest 0. At 10,000 snapshots
 * it is a walk of one index, not of every row's 30 KiB record.
 */
int registry_snapshot_each_listed(struct registry *reg,
				  int (*fn)(const struct snapshot *snap, void *arg), void *arg);
/*
 * Snapshots whose sandbox_id is @sandbox_id (any kind), oldest first (by
 * created_at, then id). Of every host sharing the store: a sandbox's own
 * are ops_sandbox_snapshots_each()'s (ops/ops.h).
 */
int registry_snapshot_each_of_sandbox(struct registry *reg, const char *sandbox_id,
				      int (*fn)(const struct snapshot *snap, void *arg), void *arg);

#endif
