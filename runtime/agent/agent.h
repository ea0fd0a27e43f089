/*
 * agent.h - the host's side of a sandbox's agent (runtime/agent/DESIGN.md):
 * the channel to the keeper inside, requests and their replies.
 *
 * A struct agent is one sandbox's keeper as the daemon knows it. It is
 * attached (a channel: two pipes, a reader thread) or detached (none: a
 * checkpoint is being taken, or the keeper died). agent_attach() runs
 * `runsc exec --exec-fd snapfs-agent attach` with the pipes' far ends as its
 * stdin and stdout; the program hands them to the keeper inside (starting
 * one if none runs) and exits, so only the keeper and this daemon hold the
 * channel. agent_detach() asks the keeper to let go and proves it did: EOF
 * on our read end and POLLERR on our write end mean nothing in the sandbox
 * holds either pipe any more, and no descriptor of the read memory left in
 * the sentry (shmem.h: the memfd a keeper reads files into, passed with
 * each attach) means nothing maps it, so a checkpoint taken next restores.
 *
 * Every reply is untrusted: a frame that breaks the protocol (wire.h: a
 * length past its maximum, a tag no request has, a body left unread, an
 * errno outside wire_errno_ok()) detaches the agent and fails every request
 * in flight with EIO. The decoders (agent_decode.c) are what
 * tests/fuzz/fuzz_agent_reply.c runs.
 *
 * Execs survive a detach: the keeper keeps running them and holds their
 * output (bounded), and after the next attach it sends the rest under the
 * same tags, so agent_exec() waits on across a checkpoint. Any other
 * request in flight at a detach fails with EIO.
 *
 * Threads: every call from any thread. struct agent's fields are guarded by
 * its lock (agent.c says which); requests wait on their slot's condition.
 * Ownership: agent_new() gives the caller one reference; agent_ref() /
 * agent_unref() count the others; the last unref detaches and frees.
 */
#ifndef SNAPFS_AGENT_H
#define SNAPFS_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/log.h"
#include "runtime/agent/wire.h"
#include "runtime/runsc/runsc.h"

/* Requests in flight on one channel at once (the keeper answers in order). */
#define AGENT_INFLIGHT_MAX 64
/* How long a request may wait for its reply before the agent is taken for dead. */
#define AGENT_REPLY_TIMEOUT_MS 30000
/* Each channel pipe's size (F_SETPIPE_SZ): a largest frame, WIRE_BODY_MAX and its header, fits. */
#define AGENT_PIPE_BYTES (2u << 20)
/*
 * How long `snapfs-agent attach` may take (a runsc exec, which starts a
 * keeper where none runs): one that a sandbox's process holds the
 * keeper's name for and never answers fails in this, not runsc's 60 s.
 */
#define AGENT_ATTACH_TIMEOUT_MS 20000
/* How long a detach waits for the keeper to let go before it kills it. */
#define AGENT_DETACH_WAIT_MS 1000
/* agent_post()'s requests unanswered at once, at most; how long a detach lets them finish. */
#define AGENT_POSTED_MAX 32
#define AGENT_POSTED_WAIT_MS 10000

struct agent;

/* A new, detached agent of container @cid, run from the open file @exe_fd (kept, not owned). */
int agent_new(const struct runsc *rs, const char *cid, int exe_fd, struct agent **out,
	      struct err *e);
void agent_ref(struct agent *a);
void agent_unref(struct agent *a);

/* Attach a channel (no-op when attached) and say HELLO. 0, or -errno with @e. */
int agent_attach(struct agent *a, struct err *e);
/*
 * Let go of the channel and prove nothing in the sandbox holds it; kill the
 * keeper if it does not let go in time. 0 once proven, -EBUSY when even the
 * kill did not free it (a process inside holds a copy: then no checkpoint).
 */
int agent_detach(struct agent *a, struct err *e);
bool agent_attached(struct agent *a);
/*
 * A reply's body is no answer (a decoder refused it), or a request's
 * frame was cut short: the protocol is broken as by a bad frame, so the
 * attachment concerned (@attachment, the reply's) ends, unless another
 * has replaced it since, and every request in flight on it fails with
 * EIO. The next request closes our ends and attaches afresh; the keeper,
 * at that EOF, closes what it had open for the channel.
 */
void agent_break(struct agent *a, unsigned attachment);
/*
 * A posted request (agent_post()) may have gone unanswered for
 * AGENT_REPLY_TIMEOUT_MS: if one of the current attachment's has, the
 * keeper is stuck, so the attachment ends, its requests are told EIO and
 * the keeper is killed (inside the sandbox: one stuck in a call would not
 * answer the next attach either), as when a request of agent_call() times
 * out.
 */
void agent_stuck(struct agent *a);
/* Does an exec wait for its output (across a detach, for the next attach)? */
bool agent_execs_waiting(struct agent *a);

/* A reply's body: malloc'd, the caller frees it. */
struct agent_reply {
	uint8_t *body;
	size_t len;
	unsigned attachment; /* which attachment answered: for agent_break() */
};

/*
 * One request and its reply. -errno: the agent's answer (an allowed
 * errno), -EIO for a broken or dead agent (@e says which), -ENOTCONN when
 * detached. A reply that does not come in AGENT_REPLY_TIMEOUT_MS is EIO,
 * ends the attachment and kills its keeper, as agent_stuck() does for a
 * posted request.
 */
int agent_call(struct agent *a, uint16_t op, const void *body, size_t len, struct agent_reply *rep,
	       struct err *e);
/* As agent_call(), the body being @body then @data: no copy of a WRITE's bytes. */
int agent_call2(struct agent *a, uint16_t op, const void *body, size_t len, const void *data,
		size_t dlen, struct agent_reply *rep, struct err *e);
/*
 * agent_call2() without the wait: the frame goes, and @fn(@arg, rc, reply)
 * is called once, when the reply comes (@rc 0 or the agent's -errno) or
 * the attachment ends first (-EIO). It runs on the reader's thread under
 * the agent's lock: it only records (under a leaf lock at most), keeps
 * nothing of the reply, and returns 0, or -EPROTO for a reply that is no
 * answer (the attachment then ends, as for a bad frame). At most
 * AGENT_POSTED_MAX are unanswered per agent: -EBUSY past that, so that
 * posted requests never take every slot (the caller calls and waits
 * instead). A detach lets them be answered first, AGENT_POSTED_WAIT_MS at
 * most. The keeper serves its channel in order: what is sent after a
 * posted request is served after it. 0: @fn will be (or was) told once;
 * -errno: it never is.
 */
typedef int (*agent_done_fn)(void *arg, int rc, const struct agent_reply *rep);
int agent_post(struct agent *a, uint16_t op, const void *body, size_t len, const void *data,
	       size_t dlen, agent_done_fn fn, void *arg, struct err *e);
/*
 * A request whose reply nobody waits for (a CLOSE: the kernel ignores what a
 * release answers): sent, and its slot freed when the reply comes or the
 * attachment ends. The keeper answers in order, so what is sent after it is
 * served after it. 0, -EAGAIN with every slot in use, -ENOTCONN, -EIO.
 */
int agent_send(struct agent *a, uint16_t op, const void *body, size_t len);

/* --- typed requests (agent_ops.c) --------------------------------------- */

int agent_lstat(struct agent *a, const char *path, struct wire_attr *attr, struct err *e);
/* @fn per entry (@name NUL-terminated and checked, @attr checked); *@next 0 at the end. */
typedef int (*agent_dir_fn)(const char *name, const struct wire_attr *attr, void *arg);
int agent_readdir(struct agent *a, const char *path, uint64_t cookie, agent_dir_fn fn, void *arg,
		  uint64_t *next, struct err *e);
/*
 * With @head (room for WIRE_PEEK_MAX; @flags O_RDONLY alone) the file's first
 * bytes come with the open (WIRE_OPEN_PEEK), *@head_len of them.
 */
int agent_open(struct agent *a, const char *path, uint32_t flags, uint32_t mode, uint32_t *handle,
	       struct wire_attr *attr, void *head, size_t *head_len, struct err *e);
/*
 * agent_open() of @path read-only with its head, asking besides for the
 * files @names[0..@n) of its directory whole (WIRE_OPEN_MORE, n at most
 * WIRE_MORE_MAX): @fn gets entry @i of each once the reply is checked,
 * @err 0 with a regular file's @attr and all its @len bytes (pointing into
 * the reply, which is freed after), else the errno that kept it out.
 * -EINVAL from a keeper older than the flag: nothing was opened.
 */
typedef void (*agent_more_fn)(uint32_t i, uint32_t err, const struct wire_attr *attr,
			      const void *data, size_t len, void *arg);
int agent_open_more(struct agent *a, const char *path, const char *const *names, uint32_t n,
		    agent_more_fn fn, void *arg, uint32_t *handle, struct wire_attr *attr,
		    void *head, size_t *head_len, struct err *e);
/*
 * The keeper's read memory (shmem.h), for READ_SHM: a slot lent for one
 * request (false: none free, or this attachment's keeper has none), given
 * back once its bytes are copied out; a slot's bytes, the sandbox's to
 * write at any time.
 */
bool agent_shm_take(struct agent *a, uint32_t *slot);
void agent_shm_give(struct agent *a, uint32_t slot);
const uint8_t *agent_shm_slot(struct agent *a, uint32_t slot);

/*
 * What holds a read's bytes (agent_read()): the reply's body, or a slot of
 * the read memory lent until agent_hold_release() (with a reference to
 * the agent, so the memory outlives its last other user), which frees it.
 */
struct agent_hold;
void agent_hold_release(struct agent_hold *h);
/*
 * At most @n (<= WIRE_DATA_MAX) bytes at @off: the count, or -errno.
 * *@data is the bytes, not copied: in the reply, or where the keeper read
 * them, its read memory (READ_SHM); *@hold holds them, the caller's to
 * release (also after an error: NULL).
 */
ssize_t agent_read(struct agent *a, uint32_t handle, uint64_t off, size_t n,
		   struct agent_hold **hold, const void **data, struct err *e);
ssize_t agent_write(struct agent *a, uint32_t handle, uint64_t off, const void *buf, size_t n,
		    struct err *e);
/*
 * agent_write() posted (agent_post()): @fn(@arg, count written or -errno, @n)
 * is told of its answer, on the reader's thread under the agent's lock.
 * @n at most WIRE_DATA_MAX. 0, -EBUSY (agent_post()), or -errno with @e.
 */
typedef void (*agent_wrote_fn)(void *arg, ssize_t done, size_t n);
int agent_write_post(struct agent *a, uint32_t handle, uint64_t off, const void *buf, size_t n,
		     agent_wrote_fn fn, void *arg, struct err *e);
/* CLOSE, FSYNC: @op. */
int agent_handle_op(struct agent *a, uint16_t op, uint32_t handle, struct err *e);
/* CLOSE without waiting for its answer (agent_send()); waits only when every slot is in use. */
void agent_close_nowait(struct agent *a, uint32_t handle);
/* UNLINK, RMDIR, CHMOD (@x mode), CHOWN (@x uid, @y gid), TRUNCATE (@x size). */
int agent_path_op(struct agent *a, uint16_t op, const char *path, uint64_t x, uint32_t y,
		  struct err *e);
int agent_mkdir(struct agent *a, const char *path, uint32_t mode, struct wire_attr *attr,
		struct err *e);
int agent_rename(struct agent *a, const char *from, const char *to, uint32_t flags, struct err *e);
int agent_link(struct agent *a, const char *from, const char *to, struct wire_attr *attr,
	       struct err *e);
int agent_symlink(struct agent *a, const char *target, const char *path, struct wire_attr *attr,
		  struct err *e);
/* The target, NUL-terminated, into @buf of @size (> WIRE_PATH_MAX). */
int agent_readlink(struct agent *a, const char *path, char *buf, size_t size, struct err *e);
/* @ts: atime, mtime; tv_nsec UTIME_NOW / UTIME_OMIT as utimensat(2). */
int agent_utimens(struct agent *a, const char *path, const struct timespec ts[2], struct err *e);

/* One process (checked: @comm printable, NUL-terminated). */
struct agent_proc {
	uint32_t pid, ppid, uid;
	char state;
	uint64_t rss, cpu_ms;
	char comm[WIRE_COMM_MAX];
};
typedef int (*agent_ps_fn)(const struct agent_proc *p, void *arg);
int agent_ps(struct agent *a, agent_ps_fn fn, void *arg, struct err *e);

/*
 * Run @cmd (sh -c) inside: @fn gets its output as it comes, until it
 * returns non-zero (then the command is killed); *@status its wait status
 * once it ended. At @deadline_ms (CLOCK_MONOTONIC, 0: none) it is killed
 * and -ETIMEDOUT returned. Waits across detaches (above).
 */
typedef int (*agent_out_fn)(void *arg, const char *data, size_t len);
int agent_exec(struct agent *a, const char *cmd, agent_out_fn fn, void *arg, int64_t deadline_ms,
	       int *status, struct err *e);

/*
 * --- the decoders (agent_decode.c): each 0, or -EPROTO for a body that is
 * not one; a callback's own errno passes through.
 */

int agent_decode_attr(const uint8_t *body, size_t len, struct wire_attr *attr);
int agent_decode_dir(const uint8_t *body, size_t len, agent_dir_fn fn, void *arg, uint64_t *next);
int agent_decode_ps(const uint8_t *body, size_t len, agent_ps_fn fn, void *arg);
int agent_decode_u32(const uint8_t *body, size_t len, uint32_t *v);
/* A READ reply's bytes: *@data points into @body. */
int agent_decode_data(const uint8_t *body, size_t len, size_t max, const void **data, size_t *n);
/*
 * OPEN's reply; with @head (a WIRE_OPEN_PEEK open) its head too, pointing into
 * @body; with @more (a WIRE_OPEN_MORE open of that many names) @fn, if any,
 * gets each of their entries once the whole body is checked.
 */
int agent_decode_open(const uint8_t *body, size_t len, uint32_t *handle, struct wire_attr *attr,
		      const void **head, size_t *head_len, uint32_t more, agent_more_fn fn,
		      void *arg);
int agent_decode_link(const uint8_t *body, size_t len, char *buf, size_t size);

#endif
