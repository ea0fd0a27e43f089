/*
 * cancel.h - a token a thread names so that the slow I/O it starts can be
 * given up: once the token's deadline passes or another thread cancels it,
 * the calls that check it (S3 requests, backend/objstore/s3_request.c) end
 * and fail. Start-up bounds its wait for a store that does not answer with
 * one (ops/ops_life.c); shutdown cancels the sync thread's
 * (ops/ops_sync.c), so neither waits out the S3 client's own timeouts
 * and retries (minutes against a black-holed endpoint).
 *
 * Ownership: the caller owns the token and keeps it alive while any thread
 * has it bound. Thread-safety: cancel_set_deadline() and cancel_now() on a
 * token from any thread; a binding is the calling thread's own.
 */
#ifndef SNAPFS_CANCEL_H
#define SNAPFS_CANCEL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct cancel {
	_Atomic int64_t deadline_ms; /* mono_ms() (lib/util.h) past which it gives up; 0: none */
	atomic_bool cancelled;
};

/* A token with no deadline, not cancelled. */
void cancel_init(struct cancel *c);
/* The calling thread's token from now on; NULL: none (nothing it starts is given up). */
void cancel_bind(struct cancel *c);
/* Give up past @deadline_ms (mono_ms(); 0: no deadline). */
void cancel_set_deadline(struct cancel *c, int64_t deadline_ms);
/* Give up now: the bound thread's calls end within about a second. */
void cancel_now(struct cancel *c);
/* Whether the calling thread's token says to give up (false with none bound). */
bool cancel_requested(void);
/*
 * The calling thread's token (NULL: none): a thread started to do part of
 * the same work binds it, so that giving up the work gives up its part too
 * (the store's flusher, store_parallel(), S3 multipart uploads).
 */
struct cancel *cancel_current(void);

#endif
