/*
 * console.h - a sandbox's console (its stdout and stderr), bounded on the host.
 *
 * The sandbox writes into a FIFO, <sandbox dir>/console.fifo, through an fd
 * opened O_RDWR that runsc hands it and keeps for the sandbox's lifetime.
 * The daemon reads the FIFO and writes a rotating log: console.log grows to
 * CONSOLE_LOG_MAX bytes, then becomes console.log.1 (the one before is
 * removed) and a new console.log begins. So a sandbox's console never holds
 * more than 2 * CONSOLE_LOG_MAX bytes of the host's disk, and the newest
 * output is what is kept, however fast the sandbox writes.
 *
 * Why a FIFO opened O_RDWR, not a pipe: the sandbox's own end counts as a
 * reader, so while no daemon reads (it restarts, or is stopped) the
 * sandbox's writes block once the FIFO's buffer (CONSOLE_PIPE_BYTES) is
 * full, instead of failing with EPIPE for the rest of its life; a restarted
 * daemon opens the FIFO again by its name and reads on (docs/runsc-notes.md,
 * "The console").
 *
 * Who reads: while `runsc run` or `runsc restore` runs, the job that runs it
 * (console_stdio() gives it the fds and console_sink() as lib/spawn.h's
 * sink); after a start that worked, console_attach() hands the console to
 * one reader thread that serves every attached console (console_start()).
 * The log is a lib/logfile.h file shared with the readers through the
 * mount (console_log_get()), so their offsets only grow across rotations.
 *
 * Ownership: console_open() gives the caller a console; console_attach()
 * takes it over (also on failure), console_free() drops one never attached.
 * Threads: every function may be called from any thread; console_open()
 * and console_attach() before console_start() too (at start-up, before the
 * daemon forks: no thread runs until console_start()).
 */
#ifndef SNAPFS_CONSOLE_H
#define SNAPFS_CONSOLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct logfile;

#include "lib/util.h"
#include "runtime/runsc/runsc.h"

#define CONSOLE_LOG_MAX (1ll << 20)
#define CONSOLE_PIPE_BYTES (1 << 20)

struct console;

/* A new FIFO (replacing an old one) and log in @dir, the sandbox's directory. */
int console_open(const char *dir, struct console **out, struct err *e);
/* The fds and sink for runsc_run() / runsc_restore(). */
void console_stdio(struct console *c, struct runsc_stdio *io);
/* Write @len bytes of console output to the log (a lib/spawn.h sink; never stops). */
int console_sink(void *console, const char *data, size_t len);
/* Hand @c to the reader thread as sandbox @id's console (replacing an older one of @id). */
void console_attach(struct console *c, const char *id);
void console_free(struct console *c);
/* At start-up: read on from the FIFO of running sandbox @id in @dir; -ENOENT if it has none. */
int console_reopen(const char *id, const char *dir);
/* Stop reading sandbox @id's console (terminated, removed), after reading what the FIFO holds. */
void console_detach(const char *id);

/*
 * The reader's view of the log in sandbox directory @dir (lib/logfile.h:
 * offsets only grow across rotations while it is open), shared with the
 * console that writes it: console_log_get() takes a hold (NULL: no memory),
 * console_log_put() drops it. A log not made yet reads as empty
 * (console_log_read()). console_log_retire(): the sandbox is removed; a
 * later get of @dir (a new sandbox of the name) gets a log of its own.
 */
struct logfile *console_log_get(const char *dir);
void console_log_put(struct logfile *lf);
void console_log_retire(const char *dir);
ssize_t console_log_read(struct logfile *lf, char *buf, size_t size, int64_t off);

int console_start(void);
void console_stop(void);

#endif
