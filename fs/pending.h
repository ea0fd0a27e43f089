/*
 * pending.h - FUSE requests answered later, by whichever thread finishes
 * the work, so that no FUSE worker thread ever waits (docs/design.md, "Writing
 * to a control file").
 *
 * A held request counts the completions it waits for. The thread that
 * takes it holds one share; each piece of work started for it takes
 * another with pending_hold(); each share ends with pending_done(). The
 * last share answers the request with the first error seen, or with
 * success: the full write size, 0, or the data given (sliced at the
 * read's offset). Work may complete on the calling thread before the call
 * that started it returns; the shares make that safe without locks.
 *
 * An interrupt (Ctrl-C, `timeout`) answers EINTR at once; the work goes on
 * and its completion answers nothing more. Work that only waits (a `wait`
 * read, a read held while an exec runs) goes away with its caller: it sets
 * a drop hook (pending_on_interrupt()), and an interrupt takes it out of the
 * list it waits on and ends it at once, so nothing is left behind.
 *
 * Ownership: held requests come from a pool that is never returned to
 * malloc, because libfuse may run the interrupt callback with a pointer to
 * a request that has just been answered; the callback then finds a
 * different or answered request and does nothing.
 */
#ifndef SNAPFS_FS_PENDING_H
#define SNAPFS_FS_PENDING_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "fs/fs.h"

enum pending_reply {
	PENDING_WRITE, /* fuse_reply_write of the whole size */
	PENDING_ERR,   /* fuse_reply_err(0): flush, rmdir */
	PENDING_BUF,   /* fuse_reply_buf of the data, from @off, at most @size bytes */
};

struct pending;

/* Hold @req; the caller has the first share. NULL when out of memory (nothing was replied). */
struct pending *pending_start(fuse_req_t req, enum pending_reply how, size_t size, off_t off);
/* One more completion to wait for. */
void pending_hold(struct pending *p);
/* End one share with @rc (0 or a negative errno) and, for PENDING_BUF, the data. */
void pending_done(struct pending *p, int rc, const char *data, size_t len);

/*
 * Work for @p that only waits, held by @arg: on an interrupt, @drop(@arg)
 * runs under @p's lock (it may take other locks, never @p's) and takes the
 * work out of the list it waits on, true if it was still there; then
 * @end(@arg) runs without locks and ends that work's share of @p. Set it
 * before the work is listed: an interrupt that comes before the listing is
 * acted on by the next pending_done(). The work calls pending_forget()
 * before it ends its share on its own, so @arg is never used once freed.
 */
void pending_on_interrupt(struct pending *p, bool (*drop)(void *arg), void (*end)(void *arg),
			  void *arg);
/* @arg no longer waits (it is completing): forget its hook, if it is @p's. */
void pending_forget(struct pending *p, void *arg);
/* Requests held now (metrics). */
unsigned pending_held(void);

#endif
