/*
 * spawn.h - run a helper program (runsc) with a deadline, its output bounded
 * where it is read.
 *
 * spawn_run() starts argv[0] (posix_spawnp: an argv array, never a shell) in
 * a session and process group of its own, with @envp, stdin @stdin_fd (if > 0;
 * /dev/null otherwise),
 * stdout on @out_fd and stderr on @err_fd, @pass[0..npass) as fds 3, 4, and no other fd
 * of the caller's; default signal dispositions, an empty signal mask.
 *
 * Output: with @out_fd -1 the child's stdout (and stderr, with @err_fd -1)
 * is a pipe that spawn_run() reads; otherwise it reads @in_fd (-1: nothing),
 * e.g. the read end of a FIFO whose other end @out_fd is. What it reads goes
 * to @sink while the child runs. Once the child exited, what the fd still
 * holds is read too (at most SPAWN_DRAIN_MAX bytes), but EOF is never waited
 * for: a process the child left behind (a sandbox, a background job in it)
 * may hold the write end for ever.
 *
 * Ending it: the child's whole process group gets SIGKILL when the deadline
 * passes (SPAWN_TIMED_OUT), when @sink returns non-zero (SPAWN_STOPPED, e.g.
 * its cap was reached), or when spawn_cancel() names the call's @tag
 * (SPAWN_CANCELLED). Processes the child put in sessions of their own (a
 * detached sandbox) are not in its group and live on.
 *
 * Cancelling: spawn_cancel(TAG) kills every call in flight tagged TAG and
 * remembers TAG (the last SPAWN_CANCELLED_MAX of them): a later call tagged
 * TAG with @refuse_cancelled set does not start and ends SPAWN_CANCELLED.
 * Calls without @refuse_cancelled start as usual (the kill and delete that
 * follow a cancel).
 *
 * Records: with @record_dir set, the child is recorded there while it runs,
 * as the file <record_dir>/<pid> holding "BOOT_ID STARTTIME DEADLINE\n"
 * (/proc/sys/kernel/random/boot_id, field 22 of /proc/PID/stat, the
 * deadline in CLOCK_BOOTTIME ms), so a process that succeeds one killed
 * with SIGKILL finds the children it left (they are in sessions of their
 * own and live on): spawn_leftovers_wait(). The boot id and start time
 * tell a leftover from a process that reused its pid. A kill between the
 * spawn and the record's write leaves one unrecorded: a window of a few
 * system calls.
 *
 * Ownership: the caller owns struct spawn and every fd it names; spawn_run()
 * owns the child and reaps it before it returns, so no child outlives the
 * call (but one whose parent was killed). Threads: spawn_run() and
 * spawn_cancel() from any thread.
 */
#ifndef SNAPFS_SPAWN_H
#define SNAPFS_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Most read after the child exited. */
#define SPAWN_DRAIN_MAX (1u << 20)
/* Longest tag; cancelled tags remembered. */
#define SPAWN_TAG_MAX 64
#define SPAWN_CANCELLED_MAX 256
#define SPAWN_PASS_MAX 3
/* Most leftover children spawn_leftovers_wait() waits for at once (more: in batches). */
#define SPAWN_LEFTOVERS_MAX 256

enum spawn_end {
	SPAWN_EXITED,	 /* it ended on its own: see status */
	SPAWN_TIMED_OUT, /* killed at its deadline */
	SPAWN_STOPPED,	 /* killed because @sink said stop */
	SPAWN_CANCELLED, /* killed (or never started) by spawn_cancel() */
};

/* Take @len bytes of output; 0 to go on, non-zero to stop (the child is killed). */
typedef int (*spawn_sink_fn)(void *arg, const char *data, size_t len);

struct spawn {
	/* What to run. */
	const char *const *argv;
	char *const *envp;
	int out_fd;	 /* the child's stdout; -1: a pipe read into @sink */
	int err_fd;	 /* the child's stderr; -1: the same as stdout */
	int in_fd;	 /* read into @sink while it runs when @out_fd is not -1; -1: none */
	int stdin_fd;	 /* > 0: the child's stdin; 0 or -1: /dev/null */
	const int *pass; /* the child's fds 3 and on */
	size_t npass;	 /* at most SPAWN_PASS_MAX */
	spawn_sink_fn sink;
	void *sink_arg;
	int64_t timeout_ms; /* > 0 */
	const char *tag;    /* NULL: spawn_cancel() cannot end it */
	bool refuse_cancelled;
	const char *record_dir; /* NULL: not recorded (above) */

	/* The outcome, once spawn_run() returned 0. */
	enum spawn_end end;
	int status; /* wait status; 0 when it never started (SPAWN_CANCELLED) */
	int64_t ran_ms;

	/* spawn_run()'s own, while it runs. */
	pid_t pid_;
	bool cancelled_;
	struct spawn *next_;
};

/* Run @s to its end. 0 (see @s->end and @s->status), or -errno if it could not start. */
int spawn_run(struct spawn *s);

/* Kill every call tagged @tag and refuse later ones that ask; returns how many were killed. */
int spawn_cancel(const char *tag);

/*
 * The children a killed predecessor recorded in @dir that still run: wait
 * for each until its own deadline, at most @max_wait_ms (<= 0: no bound but
 * the deadlines), then kill its process group, as its parent would have.
 * A record is removed once its process ended (or it is not one of ours), so
 * one still running when this wait is itself killed stays for the next.
 * Returns how many were still running when called.
 */
int spawn_leftovers_wait(const char *dir, int64_t max_wait_ms);

/*
 * The daemon as a subreaper (PR_SET_CHILD_SUBREAPER): a detached sandbox's
 * processes (runsc-sandbox, runsc-gofer and theirs), orphaned when `runsc
 * run` returns, become its children instead of init's, so their exit
 * status can be read (the sandbox's is its entrypoint's). Whoever calls it
 * must call spawn_reap_adopted() often, or they stay zombies.
 *
 * spawn_reap_adopted(): reap every ended child this process did not make
 * itself, at most SPAWN_REAP_MAX a call, telling @fn each one's pid and
 * code (as spawn_code()). It never takes a child spawn_run() or
 * spawn_fork() made (they are recorded from their start to their
 * reaping, under the lock it checks them under): a waitpid(-1) would steal
 * their statuses. Any other fork in the process must go through
 * spawn_fork() and spawn_wait() (but one made before spawn_become_reaper()
 * that has ended, or after the reaping stopped: libfuse's fusermount).
 */
#define SPAWN_REAP_MAX 64
int spawn_become_reaper(void);
int spawn_reap_adopted(void (*fn)(pid_t pid, int code, void *arg), void *arg);
/* fork() for a child its caller reaps itself with spawn_wait() (0 or -errno). */
pid_t spawn_fork(void);
int spawn_wait(pid_t pid, int *status);

/* A wait status as a shell reports it: the exit code, or 128+N for signal N. */
int spawn_code(int status);

#endif
