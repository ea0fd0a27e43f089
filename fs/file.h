/*
 * file.h - open files of the tree: what a read returns, what a write does,
 * and the completion contexts that carry long work's results back.
 *
 * Reads: a generated file's content is made by the read at offset 0 and
 * kept for the later offsets of the same open file, so one `cat` sees one
 * consistent text. Journals are read from their file at the offset. A
 * wait file's read at offset 0 is held until the object settles. On a
 * control file a read after a write on the same open file returns what
 * the write made (an id, an exec's output); a fresh read returns the row's
 * read content.
 *
 * Writes: bytes are framed into lines (control.h); each whole line goes to
 * the row's write function, and the write is answered once every piece of
 * work it started has completed (pending.h). Every refusal is reported
 * with ops_report_error.
 *
 * Ownership: an open file is reference-counted: the kernel's handle holds
 * one reference until RELEASE and each piece of work in flight holds one,
 * so work that outlives close() (after EINTR, say) still has somewhere to
 * put its result. Handlers must not call ops_* with f->lock held: a
 * completion may run on the calling thread and take it.
 */
#ifndef SNAPFS_FS_FILE_H
#define SNAPFS_FS_FILE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "fs/control.h"
#include "fs/tree.h"

#define FILE_SEEN_MAX 64

struct fs_file {
	pthread_mutex_t lock;
	atomic_int refs;
	struct fs_node node; /* a copy: the inode may be forgotten while the file is open */
	int flags;           /* open(2) flags */

	/* The rest is under lock. */
	struct strbuf content;     /* made by the read at offset 0 */
	bool has_content;
	char seen[FILE_SEEN_MAX]; /* FS_STATUS: the status this file saw last */
	struct ctl_lines lines;    /* the line being written */
	struct strbuf collected;   /* env: every line written on this file */
	struct ctl_spec spec;      /* sandboxes/new: the spec being written */
	char id[ID_MAX];           /* FS_RESULT: what the last write made */
	bool has_id;
	struct strbuf result;      /* FS_EXEC: the last command's output */
	bool running;              /* FS_EXEC: a command is in flight */
	struct pending *waiters;   /* reads held until it ends */
};

/* Open @n; -EACCES (with @e's sentence) for a mode the file does not have. */
int file_open(const struct fs_node *n, int flags, struct fs_file **out, struct err *e);
/* The kernel's RELEASE: drop its reference and its poll handle. */
void file_release(struct fs_file *f);

void file_read(fuse_req_t req, struct fs_file *f, size_t size, off_t off);
void file_write(fuse_req_t req, struct fs_file *f, const char *buf, size_t size);
void file_flush(fuse_req_t req, struct fs_file *f);
void file_poll(fuse_req_t req, struct fs_file *f, struct fuse_pollhandle *ph);

/* --- for the row functions of sandboxes.c and snapshots.c ------------- */

/* What a completion does with the result besides answering the held request. */
enum op_result {
	OP_RESULT_NONE,
	OP_RESULT_CONTENT, /* keep it as the file's content (wait) */
	OP_RESULT_EXEC,    /* keep it as the exec output and answer waiting reads */
};

/* The context of one ops_* call: answers @p (NULL: none) and files results in @f. */
struct op;
int op_new(struct fs_file *f, struct pending *p, enum op_result what, struct op **out);
/* op_new unless @async: then *out is NULL and nobody is told. */
int op_begin(struct fs_file *f, struct pending *p, bool async, struct op **out);
/* The ops_done_fn for an op. */
void op_done(void *ctx, int rc, const char *result, size_t len);
/* After the ops_* call: a refused call never completes, so end @op here. Returns @rc. */
int op_end(struct op *op, int rc);

static inline ops_done_fn op_fn(const struct op *op)
{
	return op ? op_done : NULL;
}

/* A one-word control file: parse the words, run the row's action. */
int file_action_write(struct fs_file *f, const char *line, struct pending *p, struct err *e);
/* Remember the id a write made, for reads on the same open file. */
void file_set_id(struct fs_file *f, const char *id);
/* Add @line to the lines written on @f and copy them all into @all. */
int file_collect(struct fs_file *f, const char *line, struct strbuf *all, struct err *e);
/* sandboxes/new: add @line; 1 with the spec in @text when it should act now. */
int file_spec_add(struct fs_file *f, const char *line, struct strbuf *text, bool *async,
		  struct err *e);
/* sandboxes/new at FLUSH: 1 with the spec collected so far, 0 when there is none. */
int file_spec_take(struct fs_file *f, struct strbuf *text, bool *async);
/* exec: mark a command running on @f and make its op (EBUSY while one runs). */
int file_exec_begin(struct fs_file *f, struct pending *p, struct op **out, struct err *e);

#endif
