/*
 * file.h - open files of the tree: what a read returns, what a write does,
 * and the completion contexts that carry long work's results back.
 *
 * Reads: a generated file's content is made by the read at offset 0 and
 * kept for the later offsets of the same open file, so one `cat` sees one
 * consistent text. Journals are read from their file at the offset. A
 * wait file's read at offset 0 is held until the object settles.
 *
 * Control files that answer (FS_STREAM: snapshot, fork, new, exec) are
 * read as streams, whatever the offset: on a read-write descriptor
 * (`exec 3<>exec; echo ls >&3; cat <&3`) the offset has already moved
 * past what was written. A read continues where the last read on the open
 * file stopped; a write that acts replaces the content with what it made
 * (an id, an exec's output) and starts again from its beginning; a read
 * before any write shows the row's read content.
 *
 * Writes: bytes are framed into lines (control.h); each whole line goes to
 * the row's write function, in order, and the write is answered once every
 * piece of work it started has completed (pending.h); exec's write is
 * answered once the command started (see sandboxes.c). The first line
 * refused stops the rest and is the write's answer, except a line over
 * CTL_LINE_MAX: it alone is dropped, the others act, and the write answers
 * EFBIG. Every refusal is reported with ops_report_error. What is left
 * without a newline acts at the FLUSH of the writer's own close: the
 * kernel also sends FLUSH when a child that inherited the descriptor exits
 * (`{ printf 1; sleep 1; printf '\n'; } >start`), and that must not cut
 * the line, so FLUSH compares lock owners (one per descriptor table) with
 * the last write's.
 *
 * Who: an open file acts with the credentials of whoever opened it, as a
 * Unix descriptor does (fork, exec and fd passing keep the opener's
 * rights); open checked them against the node's owner and mode.
 *
 * Ownership: an open file is reference-counted: the kernel's handle holds
 * one reference until RELEASE and each piece of work in flight holds one,
 * so work that outlives close() (after EINTR, say) still has somewhere to
 * put its result; the entry points hold one while they run, since an early
 * answer (EINTR) lets the kernel release the file. Handlers must not call
 * ops_* with f->lock held (a completion may run on the calling thread and
 * take it), and answers go out after the lock is dropped.
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
	int flags;	     /* open(2) flags */
	struct caller who;   /* who opened it: every read and write acts as them */
	struct logfile *log; /* .log rows: the view held from open to free */

	/* The rest is under lock. */
	struct strbuf content; /* what reads return: made by a read, or a write's result */
	bool has_content;
	size_t pos;		  /* FS_STREAM: where the next read starts */
	bool running;		  /* FS_STREAM: an exec is in flight; reads wait */
	struct waiter *waiters;	  /* reads held until it ends, oldest first */
	char seen[FILE_SEEN_MAX]; /* FS_STATUS: the status this file saw last */
	struct ctl_lines lines;	  /* the line being written */
	struct strbuf collected;  /* env, egress: every line written on this file */
	bool collect_pending;	  /* egress: lines taken, not yet applied (FLUSH) */
	bool collect_refused;	  /* egress: a line refused or too long: nothing applies */
	struct ctl_spec spec;	  /* sandboxes/new: the spec being written */
	/* FS_SCRIPT: the exec queue's place its script holds (ops_exec_slot), or NULL */
	struct ops_exec_slot *script_slot;
	uint64_t writer;		       /* lock owner (descriptor table) of the last write */
	struct fs_file *prev_open, *next_open; /* the list of files not yet freed */
};

/* Open @n for @who, whom tree_open_check() let in. */
int file_open(const struct fs_node *n, const struct caller *who, int flags, struct fs_file **out);
/* The kernel's RELEASE: drop its reference and its poll handle. */
void file_release(struct fs_file *f);
/* At shutdown, after the session ended: free every file the kernel never released. */
void file_free_all(void);

void file_read(fuse_req_t req, struct fs_file *f, size_t size, off_t off);
/* @owner: the request's fi->lock_owner. */
void file_write(fuse_req_t req, struct fs_file *f, const char *buf, size_t size, uint64_t owner);
void file_flush(fuse_req_t req, struct fs_file *f, uint64_t owner);
void file_poll(fuse_req_t req, struct fs_file *f, struct fuse_pollhandle *ph);
/*
 * A rename onto @n (fs/replace.c): @data as one open(O_WRONLY), write and
 * close of @n by @who would write it, through the same framing, acts and
 * reports; @req is answered with the result once the work is done.
 */
void file_replace(fuse_req_t req, const struct fs_node *n, const struct caller *who,
		  const char *data, size_t len);

/* --- for the row functions of sandboxes.c and snapshots.c ------------- */

/* What a completion does with the result besides answering the held request. */
enum file_op_result {
	FILE_OP_NONE,
	FILE_OP_CONTENT, /* keep it as the file's content (wait) */
	FILE_OP_EXEC,	 /* keep it as the exec output and answer waiting reads */
};

/* The context of one ops_* call: answers @p (NULL: none) and files results in @f. */
struct file_op;
int file_op_new(struct fs_file *f, struct pending *p, enum file_op_result what,
		struct file_op **out);
/* The ops_done_fn for an op. */
void file_op_done(void *ctx, int rc, const char *result, size_t len);
/* After the ops_* call: a refused call never completes, so end @op here. Returns @rc. */
int file_op_end(struct file_op *op, int rc);

static inline ops_done_fn file_op_fn(const struct file_op *op)
{
	return op ? file_op_done : NULL;
}

/* A one-word control file: parse the words, run the row's action. */
int file_action_write(struct fs_file *f, const char *line, struct pending *p, struct err *e);
/*
 * Its read: nothing. An action has no value to give back, but the file is
 * 0600, not 0200: `tar`, `rsync -a` and `cat *` of a directory then take it
 * as an empty file instead of failing on it (issue 24).
 */
int file_empty_read(const struct fs_node *n, const struct caller *who, struct strbuf *out);
/* An ops_* call that makes an object for object @id (snapshot, fork, new): its id into @made. */
typedef int (*file_make_fn)(const struct caller *who, const char *id, const void *arg,
			    char made[ID_MAX], ops_done_fn done, void *ctx, struct err *e);
/*
 * Run @make with @arg for @f's object, answering @p when the work is done
 * (at once if @async). The id it made is what reads on @f return next.
 */
int file_id_action(struct fs_file *f, struct pending *p, bool async, file_make_fn make,
		   const void *arg, struct err *e);
/* The same for an ops_* call that makes several (fork count=N): their ids appended to @made, a line
 * each. */
typedef int (*file_ids_fn)(const struct caller *who, const char *id, const void *arg,
			   struct strbuf *made, ops_done_fn done, void *ctx, struct err *e);
/* As file_id_action(); reads on @f return the ids, one a line. */
int file_ids_action(struct fs_file *f, struct pending *p, bool async, file_ids_fn make,
		    const void *arg, struct err *e);
/* Apply @text, every line written on a file, to object @id (env: ops_sandbox_set). */
typedef int (*file_apply_fn)(const struct caller *who, const char *id, const char *text,
			     struct err *e);
/*
 * Add @line to the lines written on @f and @apply them all. A refused line
 * is taken back, so the lines written after it are judged without it.
 */
int file_collect(struct fs_file *f, const char *line, file_apply_fn apply, struct err *e);
/* Judge @text, every line written on a file, as a whole (egress: ops_egress_check). */
typedef int (*file_check_fn)(const char *text, struct err *e);
/*
 * The lines of one open file as one whole, applied at FLUSH (egress): add
 * @line and @check them all; nothing is applied yet, so no part of them is
 * ever in force alone. A refused line fails its write and marks the file:
 * its FLUSH then applies nothing (what was before stays whole).
 */
int file_collect_check(struct fs_file *f, const char *line, file_check_fn check, struct err *e);
/* At FLUSH: @apply every line written on @f, if any came since the last FLUSH and none was refused.
 */
int file_collect_flush(struct fs_file *f, file_apply_fn apply, struct err *e);
/* sandboxes/new: add @line; 1 with the spec in @text when it should act now. */
int file_spec_add(struct fs_file *f, const char *line, struct strbuf *text, bool *async,
		  struct err *e);
/* sandboxes/new at FLUSH: 1 with the spec collected so far, 0 when there is none. */
int file_spec_take(struct fs_file *f, struct strbuf *text, bool *async);
/* exec: mark a command running on @f and make its op (EBUSY while one runs). */
int file_exec_begin(struct fs_file *f, struct file_op **out, struct err *e);
/* The ops_progress_fn for an exec's op: its output so far, for the reads held. */
void file_op_progress(void *ctx, const char *data, size_t len);
/*
 * FS_SCRIPT: add @line to the script being written on @f, once @check
 * takes the whole script (EBUSY while a command runs on @f). It runs when
 * @f is read or closed: file_script_take() hands it over then.
 */
typedef int (*file_script_check_fn)(const struct caller *who, const char *id, const char *text,
				    struct err *e);
int file_script_add(struct fs_file *f, const char *line, file_script_check_fn check, struct err *e);
/*
 * The script written on @f, if any (1; 0 when none), into @text, and the
 * queue place it holds into *@slot (NULL: none).
 */
int file_script_take(struct fs_file *f, struct strbuf *text, struct ops_exec_slot **slot);
/* Give @f the queue place @slot its script holds (released with @f if never taken). */
void file_script_hold(struct fs_file *f, struct ops_exec_slot *slot);
/* Does @f's script hold a place already? */
bool file_script_held(struct fs_file *f);

#endif
