/*
 * pending.h - FUSE requests answered later, by whichever thread finishes
 * the work, so that no FUSE worker thread ever waits (design.md, "Writing
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
 * and its completion answers nothing more.
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

#endif
