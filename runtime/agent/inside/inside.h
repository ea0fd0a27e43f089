/*
 * inside.h - the agent, the program snapfs runs inside each sandbox
 * (runtime/agent/DESIGN.md). Built static with musl, alone: the C library
 * and runtime/agent/wire.c, nothing of the daemon's.
 *
 * Two modes, one binary:
 *   snapfs-agent attach   run by `runsc exec --exec-fd` with the channel's
 *                         two host pipes as stdin and stdout: hands them to
 *                         the keeper (starting one if none listens) and exits.
 *   snapfs-agent keep     the keeper: a process of the sandbox with no host
 *                         file at all (its executable is a memfd copy, its
 *                         stdio the sandbox's /dev/null), so a checkpoint
 *                         taken while it runs restores. It serves the
 *                         channel it is handed, one at a time, until
 *                         DETACH or EOF, then waits for the next.
 *
 * The keeper is single-threaded: main.c polls the listening socket, the
 * channel and the pipes of running execs; channel.c reads and writes the
 * frames; fs.c answers file requests; exec.c runs commands; ps.c lists
 * processes. Everything it holds is in
 * the globals below, touched from the one thread only.
 */
#ifndef SNAPFS_AGENT_INSIDE_H
#define SNAPFS_AGENT_INSIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <poll.h>
#include <stdint.h>
#include <sys/types.h>

#include "runtime/agent/wire.h"

/* The keeper's abstract socket: per protocol version, so an old keeper is never handed a channel.
 */
#define INSIDE_SOCKET "snapfs-agent-1"
/* An attach's first message's byte when a second, with the read memory, follows. */
#define INSIDE_ATTACH_SHM 's'
/* Files open through the channel at once, and execs running at once. */
#define INSIDE_HANDLES_MAX 1024
#define INSIDE_EXECS_MAX 64
/* Output an exec may have waiting while no channel is attached: then its pipe is not read. */
#define INSIDE_EXEC_BACKLOG_MAX (64u << 10)

/* A reply being made: main.c sends it after the handler returns. */
struct inside_reply {
	struct wire_out body;
	uint32_t err; /* 0, or the errno to answer */
};

/* Answer a file request (every op but EXEC, KILL, PS, HELLO, DETACH). */
void fs_serve(const struct wire_header *h, struct wire_in *in, struct inside_reply *r);
/* Close every handle (the channel went away: its handles with it). */
/* The read memory READ_SHM reads into (NULL: none): the channel's, set as it attaches and detaches.
 */
void fs_read_memory(uint8_t *mem);
void fs_close_all(void);

/* Answer PS. */
void ps_serve(struct inside_reply *r);

/* Start EXEC's command (replies come later, as OUT and EXIT frames). 0, or an errno. */
uint32_t exec_start(uint32_t tag, const char *cmd, size_t n);
void exec_kill(uint32_t tag);
/* Poll set: the fds of running execs' pipes to watch (room for INSIDE_EXECS_MAX). */
size_t exec_poll_fds(struct pollfd *fds, int attached);
/* After poll: read their output, reap ended commands, send what may go (when @attached). */
void exec_step(int attached);
/*
 * Make the ready shell (exec.c) if an exec ran and none waits: main.c calls
 * it after each wake-up. -1, or the milliseconds after which to call it
 * again (a young exec held it back).
 */
int exec_ready_fill(void);
/* Its pid (left out of PS), 0 if none. */
pid_t exec_ready_pid(void);
/* plain.c: may the ready shell `exec` @cmd (@n bytes) in its own process, without a fork? */
bool exec_is_plain(const char *cmd, size_t n);

/* --- channel.c: the channel the attach handed over --------------------------- */

/* Its read end (to poll), -1 when none is attached. */
int channel_fd(void);
/* Bytes of a request are buffered already: serve it without waiting for the fd. */
bool channel_buffered(void);
/*
 * Take the pipes @in and @out as the channel (a newer attach replaces the
 * older), and @shm (-1: none) as its read memory, mapped if it is the
 * daemon's (a file of WIRE_SHM_BYTES) and closed either way.
 */
void channel_attach(int in, int out, int shm);
/*
 * Let go of it: both ends closed, the read memory unmapped (nothing of the
 * host's may be left mapped at a checkpoint), every file it opened closed
 * (fs_close_all()).
 */
void channel_detach(void);
/* The read memory's WIRE_SHM_BYTES, NULL when the channel has none. */
uint8_t *channel_shm(void);
/* Where a reply's body is made in place (WIRE_BODY_MAX bytes). */
uint8_t *channel_body(void);
/* The next request into @buf (a frame's size); -1 at EOF or a frame that is not one (detached). */
int channel_read(uint8_t *buf, struct wire_header *h);
/* Send one frame on the channel; -1 once the channel is gone (it is then detached). */
int channel_send(uint32_t tag, uint16_t op, uint16_t flags, uint32_t err, const void *body,
		 size_t len);

#endif
