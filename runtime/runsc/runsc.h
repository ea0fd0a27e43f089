/*
 * runsc.h - the gVisor runsc driver: every runsc invocation snapfs makes.
 *
 * Each call spawns `runsc` through lib/spawn.h (argv array, never a shell)
 * with the global flags --root <runsc root> and, for run/restore,
 * --overlay2=root:memory --network=none. Standard input is /dev/null; a
 * detached sandbox's stdout and stderr go to the write end of its console
 * FIFO (runtime/runsc/console.h), which runsc keeps open for the sandbox's
 * lifetime. A short command's output comes back through a pipe, at most
 * 64 KiB of it kept, so a failure's message can quote runsc's own line.
 *
 * Deadlines: every call has one, after which its whole process group is
 * killed: rs->timeout_ms (--runsc-timeout), for checkpoint and restore plus
 * RUNSC_PER_GIB_MS per GiB of the sandbox's memory or of the image read
 * (runsc_scaled_timeout_ms()), for a user's exec rs->exec_timeout_ms
 * (--exec-timeout). A call past its deadline fails with -ETIMEDOUT; an exec
 * says so in its result instead.
 *
 * Cancelling: runsc_cancel(CID) kills every call in flight on container CID
 * and refuses later run, restore, checkpoint and exec on it with
 * -ECANCELED; kill, delete and state still run (terminate needs them).
 *
 * Errors: 0 on success; -ENOENT when the container does not exist; -EIO when
 * runsc fails, with @e saying which command failed and runsc's own line;
 * -ETIMEDOUT, -ECANCELED as above. Every function may be called from any
 * thread.
 *
 * Container ids: runsc matches ids by prefix, so snapfs never passes a
 * sandbox name; runsc_new_container_id() makes a fixed-length id
 * (runtime_id_ok(), lib/names.h) so no id is a prefix of another.
 */
#ifndef SNAPFS_RUNSC_H
#define SNAPFS_RUNSC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend/registry/registry.h"
#include "lib/strbuf.h"
#include "lib/util.h"

struct runsc {
	char bin[4096];	   /* runsc binary (--runsc), default "runsc" from PATH */
	char root[4096];   /* runsc --root: <state>/runsc */
	char version[128]; /* first line of `runsc --version`, without "runsc version " */
	/* What runsc_probe_checkpoint() found; false until it runs. */
	bool checkpoint_direct;	 /* checkpoints that leave the sandbox running pass --direct */
	bool checkpoint_cuda;	 /* checkpoint takes --cuda-checkpoint-path */
	int64_t timeout_ms;	 /* a call's deadline (--runsc-timeout) */
	int64_t exec_timeout_ms; /* a user's exec's deadline (--exec-timeout) */
	/* Where calls in flight are recorded (runsc_record_calls()); "" for nowhere. */
	char records[4096];
};

/* The defaults of --runsc-timeout and --exec-timeout, and what checkpoint and restore add. */
#define RUNSC_TIMEOUT_DEFAULT_MS (60 * 1000)
#define RUNSC_EXEC_TIMEOUT_DEFAULT_MS (3600 * 1000)
#define RUNSC_PER_GIB_MS (60 * 1000)

int runsc_init(struct runsc *rs, const char *bin, const char *root, struct err *e);
/*
 * Record every call but a user's exec in @dir while it runs (lib/spawn.h):
 * runsc outlives a daemon killed with SIGKILL, and the next one must wait
 * for what it is still doing to a container before it asks what the
 * container became.
 */
int runsc_record_calls(struct runsc *rs, const char *dir, struct err *e);
/*
 * The calls a killed daemon left running (recorded in rs->records): wait
 * for them up to each one's deadline, at most @max_wait_ms (<= 0: no
 * bound but theirs), then kill them. Returns how many there were.
 */
int runsc_wait_leftovers(const struct runsc *rs, int64_t max_wait_ms);
/* Set the deadlines (milliseconds; 0 keeps the default). */
void runsc_set_timeouts(struct runsc *rs, int64_t timeout_ms, int64_t exec_timeout_ms);
/* rs->timeout_ms plus RUNSC_PER_GIB_MS for every GiB of @bytes (pro rata, by the MiB). */
int64_t runsc_scaled_timeout_ms(const struct runsc *rs, int64_t bytes);
/* Kill the calls in flight on @cid and refuse later work on it (above); returns how many. */
int runsc_cancel(const struct runsc *rs, const char *cid);

int runsc_new_container_id(char out[RUNTIME_ID_MAX]);

/*
 * Extra global flags for run and restore, a mask: a restore must be given
 * the flags of the run whose checkpoint it restores.
 */
#define RUNSC_NVPROXY 0x1u /* --nvproxy: the sandbox gets NVIDIA GPUs (docs/gpu.md) */
/*
 * --network=sandbox in the bundle's network namespace, runsc started
 * through `snapfs --net-exec` (runtime/net/net.h net_exec_main()).
 */
#define RUNSC_NETWORK 0x2u

/*
 * A detached sandbox's stdio: @child_fd is its stdout and stderr (the write
 * end of its console FIFO); while runsc runs, what arrives on @read_fd goes
 * to @sink (lib/spawn.h), and after it the console reader takes over. With
 * no @read_fd (-1), @child_fd may be a regular file opened for reading and
 * writing: a failure then quotes what runsc wrote into it.
 */
struct runsc_stdio {
	int child_fd;
	int read_fd;
	int (*sink)(void *arg, const char *data, size_t len);
	void *sink_arg;
};

/*
 * `runsc [RUNSC_* @flags] run --detach --bundle B CID`, stdio @io; deadline
 * rs->timeout_ms. The bundle is runtime/runsc/bundle.h's. *@pid: the
 * sandbox process's, from runsc's --pid-file (B/runsc.pid), so known even
 * when the entrypoint has already ended; 0 if runsc wrote none.
 */
int runsc_run(const struct runsc *rs, unsigned flags, const char *cid, const char *bundle,
	      const struct runsc_stdio *io, pid_t *pid, struct err *e);

/*
 * `runsc [@flags] restore --detach --image-path IMG --bundle B CID`, stdio @io;
 * the deadline scaled to the size of IMG's files; *@pid as runsc_run()'s.
 */
int runsc_restore(const struct runsc *rs, unsigned flags, const char *cid, const char *bundle,
		  const char *image_dir, const struct runsc_stdio *io, pid_t *pid, struct err *e);

/* What a checkpoint is asked for; every field but @image_dir may be left zero. */
struct runsc_checkpoint_opts {
	const char *image_dir; /* --image-path: where the checkpoint is written */
	bool leave_running;    /* --leave-running: a snapshot; false: the sandbox stops */
	/*
	 * --direct (O_DIRECT for the pages file), where runsc_probe_checkpoint()
	 * found it works (rs->checkpoint_direct); else ignored.
	 */
	bool direct;
	const char *compression; /* --compression=; NULL: "none" */
	/*
	 * --cuda-checkpoint-path=, NULL for none: a runsc that has the flag
	 * (releases from 20260608) then checkpoints the sandbox's CUDA
	 * processes itself (docs/gpu.md).
	 */
	const char *cuda_checkpoint;
	int64_t mem_bytes; /* the sandbox's memory: the deadline is scaled to it */
};

/*
 * `runsc checkpoint --compression=C [--direct] --image-path IMG
 * [--leave-running] [--cuda-checkpoint-path=P] CID`, as @o says.
 * Note: a failed checkpoint kills the sandbox even with leave_running.
 */
int runsc_checkpoint(const struct runsc *rs, const char *cid, const struct runsc_checkpoint_opts *o,
		     struct err *e);

/* `runsc help SUBCOMMAND`: its output into *@text (caller frees). */
int runsc_help(const struct runsc *rs, const char *subcommand, char **text, struct err *e);
/* Does the `runsc help SUBCOMMAND` text @help list flag @flag (no dashes)? */
bool runsc_help_has_flag(const char *help, const char *flag);

/*
 * Ask `runsc help checkpoint` once, at start-up, and log the answers:
 * rs->checkpoint_cuda if it takes --cuda-checkpoint-path (docs/gpu.md);
 * rs->checkpoint_direct if it has --direct (O_DIRECT for the pages file) and
 * the filesystem of the directory @image_parent_fd (@image_parent, where
 * checkpoints are written) takes O_DIRECT writes; the probe's file is
 * created there with O_EXCL | O_NOFOLLOW and a random name. Written
 * through the page cache, the pages of a large sandbox cost the pause far
 * more, and far more unevenly, than the disk's own speed does
 * (docs/runsc-notes.md).
 */
void runsc_probe_checkpoint(struct runsc *rs, int image_parent_fd, const char *image_parent);

/*
 * An exec: `runsc exec CID ARGV...` (or `/bin/sh -c CMDLINE`). Its stdout and
 * stderr, written by the sandbox, come back through a pipe into @out, and
 * only up to @cap bytes: past that the exec is killed and @truncated set.
 * At its deadline (@timeout_ms; 0: rs->timeout_ms) it is killed and
 * @timed_out set. Killing `runsc exec` does not end the process in the
 * sandbox: @pid names it, for runsc_kill_pid().
 */
struct runsc_exec {
	const char *const *argv; /* NULL-terminated, or NULL for /bin/sh -c @cmdline */
	const char *cmdline;
	int exec_fd; /* > 0: run this host file (runsc --exec-fd), argv[0] only names it */
	/*
	 * > 0: the command's stdin; else /dev/null. Every local user reads
	 * runsc's command line (/proc/PID/cmdline): what is not for them, a
	 * user's exec command, goes in here instead.
	 */
	int stdin_fd;
	/*
	 * > 0: the command's stdout (the agent's channel, runtime/agent/);
	 * its stderr then still comes back into @out.
	 */
	int stdout_fd;
	/* > 0, with @exec_fd: a host fd the command gets as its fd 3 (runsc --pass-fd). */
	int pass_fd;
	int64_t timeout_ms;
	struct strbuf *out; /* appended to */
	size_t cap;	    /* @out's length it may reach */
	/* The outcome. */
	int exit_code; /* 128+N for signal N; -1 when snapfs killed it */
	bool timed_out;
	bool truncated;
	int pid; /* the process in the sandbox's pid namespace; 0 if unknown */
};

/* 0 once it ended (see @x); -ENOENT, -ECANCELED, -EIO when it could not run. */
int runsc_exec(const struct runsc *rs, const char *cid, struct runsc_exec *x, struct err *e);

/*
 * `runsc ps --format=json CID`: the pids of its processes (the sandbox's pid
 * namespace, as runsc's sentry reports them), at most @max (-E2BIG past it).
 */
int runsc_ps(const struct runsc *rs, const char *cid, int *pids, size_t max, size_t *n,
	     struct err *e);

int runsc_kill(const struct runsc *rs, const char *cid, int sig, struct err *e);
/* `runsc kill --all CID SIG`: every process of the container (a view stops them). */
int runsc_kill_all(const struct runsc *rs, const char *cid, int sig, struct err *e);
/* `runsc kill --pid PID CID SIG`: one process of the sandbox. */
int runsc_kill_pid(const struct runsc *rs, const char *cid, int pid, int sig, struct err *e);
/*
 * `runsc pause CID` / `runsc resume CID`: the sandbox's tasks stop and go
 * on; its processes and container stay (a suspend checkpoints a paused
 * sandbox, ops_checkpoint.c).
 */
int runsc_pause(const struct runsc *rs, const char *cid, struct err *e);
int runsc_resume(const struct runsc *rs, const char *cid, struct err *e);
/* `runsc delete --force CID`; a missing container is 0. */
int runsc_delete(const struct runsc *rs, const char *cid, struct err *e);

/* A container's state as runsc reports it (gVisor's container.Status), or why not. */
enum runsc_status {
	RUNSC_CREATING,
	RUNSC_CREATED,
	RUNSC_RUNNING,
	RUNSC_PAUSED,
	RUNSC_STOPPED,
	RUNSC_GONE,    /* runsc does not know the container */
	RUNSC_UNKNOWN, /* runsc state failed (@e says why) or said another word */
};

/* `runsc ps --format=json` output, a JSON array of pids, into @pids; -EINVAL, or -E2BIG past @max.
 */
int runsc_parse_pids(const char *text, int *pids, size_t max, size_t *n);
/* `runsc state` JSON: its status (RUNSC_UNKNOWN for a word runsc has no state for) and pid; -EINVAL
 * without both. */
int runsc_parse_state(const char *text, enum runsc_status *status, pid_t *pid);

/* runsc's word for @s ("running", ...); "gone" and "unknown" for the last two. */
const char *runsc_status_name(enum runsc_status s);

/*
 * `runsc state CID`: its status, and *@pid (may be NULL) the sandbox pid,
 * left alone unless runsc said it.
 */
enum runsc_status runsc_state(const struct runsc *rs, const char *cid, pid_t *pid, struct err *e);

#endif
