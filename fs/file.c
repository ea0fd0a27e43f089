#include "fs/file.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/notify.h"
#include "lib/logfile.h"

/* --- lifetime --------------------------------------------------------- */

/*
 * Every file not yet freed, so fs_destroy() can free the ones the kernel
 * never released (a file still open when the mount was lazily detached).
 */
static pthread_mutex_t open_files_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fs_file *open_files;

static void file_ref(struct fs_file *f)
{
	atomic_fetch_add(&f->refs, 1);
}

static void file_free(struct fs_file *f)
{
	ops_sandbox_exec_unreserve(f->script_slot); /* a script written, never read nor closed */
	if (f->log)
		f->node.ent->log->close(f->log);
	strbuf_release(&f->content);
	strbuf_release(&f->collected);
	ctl_spec_release(&f->spec);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

static void file_unlink(struct fs_file *f)
{
	pthread_mutex_lock(&open_files_lock);
	if (f->prev_open)
		f->prev_open->next_open = f->next_open;
	else
		open_files = f->next_open;
	if (f->next_open)
		f->next_open->prev_open = f->prev_open;
	pthread_mutex_unlock(&open_files_lock);
}

static void file_unref(struct fs_file *f)
{
	if (atomic_fetch_sub(&f->refs, 1) != 1)
		return;
	file_unlink(f);
	file_free(f);
}

void file_free_all(void)
{
	pthread_mutex_lock(&open_files_lock);
	struct fs_file *f = open_files;
	open_files = NULL;
	pthread_mutex_unlock(&open_files_lock);
	while (f) {
		struct fs_file *next = f->next_open;
		file_free(f);
		f = next;
	}
}

/* FS_STATUS: what the status is now, for poll to compare with what was seen. */
static void status_now(const struct fs_file *f, char out[FILE_SEEN_MAX])
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	int rc = f->node.ent->read(&f->node, &f->who, &sb);
	snprintf(out, FILE_SEEN_MAX, "%s", rc < 0 ? "" : strbuf_str(&sb));
}

int file_open(const struct fs_node *n, const struct caller *who, int flags, struct fs_file **out)
{
	struct fs_file *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	pthread_mutex_init(&f->lock, NULL);
	atomic_init(&f->refs, 1);
	f->node = *n;
	f->flags = flags;
	f->who = *who;
	f->collected.max = ENV_MAX - 1;
	int rc = n->ent->log ? n->ent->log->open(n, who, &f->log) : 0;
	if (rc < 0) {
		pthread_mutex_destroy(&f->lock);
		free(f);
		return rc;
	}
	if (n->ent->flags & FS_STATUS)
		status_now(f, f->seen);
	/* An open reader keeps the journal's offsets across rotations (logfile.h). */
	if (n->ent->journal)
		logfile_reader(n->ent->journal(), true);
	pthread_mutex_lock(&open_files_lock);
	f->next_open = open_files;
	if (open_files)
		open_files->prev_open = f;
	open_files = f;
	pthread_mutex_unlock(&open_files_lock);
	*out = f;
	return 0;
}

void file_release(struct fs_file *f)
{
	notify_unwatch(f);
	if (f->node.ent->journal)
		logfile_reader(f->node.ent->journal(), false);
	file_unref(f);
}

/* --- completions ------------------------------------------------------ */

struct file_op {
	struct pending *p;
	struct fs_file *f;
	enum file_op_result what;
};

int file_op_new(struct fs_file *f, struct pending *p, enum file_op_result what,
		struct file_op **out)
{
	struct file_op *op = malloc(sizeof(*op));
	if (!op)
		return -ENOMEM;
	*op = (struct file_op){p, f, what};
	if (p)
		pending_hold(p);
	if (f)
		file_ref(f);
	*out = op;
	return 0;
}

/* file_op_new unless @async: then *out is NULL and nobody is told. */
static int file_op_begin(struct fs_file *f, struct pending *p, bool async, struct file_op **out)
{
	*out = NULL;
	return async ? 0 : file_op_new(f, p, FILE_OP_NONE, out);
}

/* The result of a write: what reads return next, from its beginning. */
static void set_result_locked(struct fs_file *f, const char *data, size_t len)
{
	strbuf_reset(&f->content);
	strbuf_add(&f->content, data, len);
	f->has_content = strbuf_error(&f->content) == 0;
	f->pos = 0;
}

static void set_result(struct fs_file *f, const char *data, size_t len)
{
	pthread_mutex_lock(&f->lock);
	set_result_locked(f, data, len);
	pthread_mutex_unlock(&f->lock);
}

/*
 * A copy of up to @size bytes of @sb from @from. Replies are sent from
 * copies after the lock is dropped: once the kernel has its answer it may
 * release the file, and nothing may touch it after that.
 */
static char *slice_dup(const struct strbuf *sb, size_t from, size_t size, size_t *n)
{
	from = from < sb->len ? from : sb->len;
	*n = sb->len - from < size ? sb->len - from : size;
	char *copy = malloc(*n ? *n : 1);
	if (copy)
		memcpy(copy, strbuf_str(sb) + from, *n);
	return copy;
}

/* FS_STREAM: up to @size bytes from where the last read stopped. */
static char *stream_take_locked(struct fs_file *f, size_t size, size_t *n)
{
	char *copy = slice_dup(&f->content, f->pos, size, n);
	if (copy)
		f->pos = (f->pos < f->content.len ? f->pos : f->content.len) + *n;
	return copy;
}

/* A stream read: answered at once, or held while an exec runs. */
struct waiter {
	struct waiter *next;
	struct pending *p;
	struct fs_file *f;
	size_t size;
	char *data;
	size_t len;
};

static void waiter_answer(struct waiter *w, int rc)
{
	if (rc == 0 && !w->data)
		rc = -ENOMEM;
	pending_forget(w->p, w);
	pending_done(w->p, rc, w->data, w->len);
	free(w->data);
	free(w);
}

/*
 * An exec's end: its whole result. What streamed (file_op_progress()) is
 * its beginning, so reads go on from where they are; a result that is not
 * (the sandbox ended and its sentence replaced the output) comes after it.
 */
static void exec_result_locked(struct fs_file *f, const char *result, size_t len)
{
	size_t streamed = f->content.len, pos = f->pos;
	if (streamed && len >= streamed && memcmp(f->content.buf, result, streamed) == 0) {
		strbuf_add(&f->content, result + streamed, len - streamed);
		f->has_content = strbuf_error(&f->content) == 0;
	} else if (streamed) {
		strbuf_add(&f->content, result, len);
		f->has_content = strbuf_error(&f->content) == 0;
	} else {
		set_result_locked(f, result, len);
	}
	f->pos = streamed ? pos : 0;
}

static void exec_end(struct fs_file *f, int rc, const char *result, size_t len)
{
	pthread_mutex_lock(&f->lock);
	exec_result_locked(f, rc == 0 && result ? result : "", rc == 0 && result ? len : 0);
	f->running = false;
	struct waiter *waiters = steal_ptr(f->waiters);
	for (struct waiter *w = waiters; w && rc == 0; w = w->next)
		w->data = stream_take_locked(f, w->size, &w->len);
	pthread_mutex_unlock(&f->lock);

	while (waiters) {
		struct waiter *w = waiters;
		waiters = w->next;
		waiter_answer(w, rc);
	}
}

/* Reads held while an exec runs take what came; those that find nothing new wait on. */
void file_op_progress(void *ctx, const char *data, size_t len)
{
	struct file_op *op = ctx;
	struct fs_file *f = op->f;
	struct waiter *ready = NULL, **tail = &ready;
	pthread_mutex_lock(&f->lock);
	if (f->running)
		strbuf_add(&f->content, data, len);
	while (f->waiters && f->pos < f->content.len) {
		struct waiter *w = f->waiters;
		f->waiters = w->next;
		w->next = NULL;
		w->data = stream_take_locked(f, w->size, &w->len);
		*tail = w;
		tail = &w->next;
	}
	pthread_mutex_unlock(&f->lock);
	while (ready) {
		struct waiter *w = ready;
		ready = w->next;
		waiter_answer(w, 0);
	}
}

void file_op_done(void *ctx, int rc, const char *result, size_t len)
{
	struct file_op *op = ctx;
	if (op->p)
		pending_forget(op->p, op);
	if (op->what == FILE_OP_EXEC)
		exec_end(op->f, rc, result, len);
	else if (op->what == FILE_OP_CONTENT && rc == 0 && result)
		set_result(op->f, result, len);
	if (op->p)
		pending_done(op->p, rc, result, len);
	if (op->f)
		file_unref(op->f);
	free(op);
}

int file_op_end(struct file_op *op, int rc)
{
	if (rc < 0 && op)
		file_op_done(op, rc, NULL, 0);
	return rc;
}

/* --- reads ------------------------------------------------------------ */

/* Reply from f->content; made afresh at offset 0 or when there is none yet. */
static void read_generated(fuse_req_t req, struct fs_file *f, size_t size, off_t off)
{
	const struct fs_entry *ent = f->node.ent;
	_cleanup_strbuf_ struct strbuf made = STRBUF_INIT;
	pthread_mutex_lock(&f->lock);
	bool fresh = off == 0 || !f->has_content;
	pthread_mutex_unlock(&f->lock);
	int rc = fresh && ent->read ? ent->read(&f->node, &f->who, &made) : 0;
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	size_t n;
	pthread_mutex_lock(&f->lock);
	if (fresh) {
		struct strbuf old = f->content;
		f->content = made;
		made = old;
		f->has_content = true;
		if (ent->flags & FS_STATUS)
			snprintf(f->seen, sizeof(f->seen), "%s", strbuf_str(&f->content));
	}
	_cleanup_free_ char *copy = slice_dup(&f->content, (size_t)off, size, &n);
	pthread_mutex_unlock(&f->lock);
	if (copy)
		fuse_reply_buf(req, copy, n);
	else
		fuse_reply_err(req, ENOMEM);
}

static void read_journal(fuse_req_t req, struct fs_file *f, size_t size, off_t off)
{
	_cleanup_free_ char *buf = malloc(size ? size : 1);
	ssize_t n = buf ? logfile_read(f->node.ent->journal(), buf, size, off) : -ENOMEM;
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void read_log(fuse_req_t req, struct fs_file *f, size_t size, off_t off)
{
	_cleanup_free_ char *buf = malloc(size ? size : 1);
	ssize_t n = buf ? f->node.ent->log->read(f->log, buf, size, off) : -ENOMEM;
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

/* An interrupted wait read: its waiter goes at once (pending_on_interrupt()). */
static bool wait_drop(void *op)
{
	return ops_wait_cancel(op);
}

static void wait_end(void *op)
{
	file_op_done(op, -EINTR, NULL, 0);
}

/* A wait file: the read at offset 0 is held until .action completes with the status line. */
static void read_wait(fuse_req_t req, struct fs_file *f, size_t size, off_t off)
{
	if (off > 0) {
		read_generated(req, f, size, off);
		return;
	}
	struct pending *p = pending_start(req, PENDING_BUF, size, off);
	if (!p) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	struct err e = {0};
	struct file_op *op = NULL;
	int rc = file_op_new(f, p, FILE_OP_CONTENT, &op);
	if (rc == 0) {
		pending_on_interrupt(p, wait_drop, wait_end, op);
		rc =
		    file_op_end(op, f->node.ent->action(&f->who, f->node.id, file_op_done, op, &e));
	}
	pending_done(p, rc, NULL, 0);
}

/* FS_STREAM before any write: the row's read content, made once. */
static int stream_fill(struct fs_file *f)
{
	_cleanup_strbuf_ struct strbuf made = STRBUF_INIT;
	pthread_mutex_lock(&f->lock);
	bool need = !f->has_content && !f->running;
	pthread_mutex_unlock(&f->lock);
	int rc = need && f->node.ent->read ? f->node.ent->read(&f->node, &f->who, &made) : 0;
	if (rc < 0 || !need)
		return rc;
	pthread_mutex_lock(&f->lock);
	if (!f->has_content && !f->running) {
		set_result_locked(f, strbuf_str(&made), made.len);
		rc = f->has_content ? 0 : -ENOMEM;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/* An interrupted stream read leaves the file's list at once (pending_on_interrupt()). */
static bool stream_drop(void *arg)
{
	struct waiter *w = arg;
	bool found = false;
	pthread_mutex_lock(&w->f->lock);
	for (struct waiter **pp = &w->f->waiters; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&w->f->lock);
	return found;
}

static void stream_end(void *arg)
{
	waiter_answer(arg, -EINTR);
}

/*
 * FS_SCRIPT (exec): the lines written wait for a read or the close; a read
 * starts them first (the row's .flush). A file that never had lines written
 * follows the newest command of its opener instead (the row's .follow).
 */
static int script_before_read(struct fs_file *f)
{
	const struct fs_entry *ent = f->node.ent;
	struct err e = {0};
	pthread_mutex_lock(&f->lock);
	bool pending = f->collect_pending, fresh = !f->has_content && !f->running;
	pthread_mutex_unlock(&f->lock);
	int rc = 0;
	if (pending)
		rc = ent->flush(f, NULL, &e);
	else if (fresh && ent->follow)
		rc = ent->follow(f, &e);
	if (rc < 0)
		tree_report(&f->node, &f->who, rc, &e);
	return rc;
}

static void read_stream(fuse_req_t req, struct fs_file *f, size_t size)
{
	int rc = f->node.ent->flags & FS_SCRIPT ? script_before_read(f) : 0;
	if (rc == 0)
		rc = stream_fill(f);
	struct waiter *w = rc == 0 ? calloc(1, sizeof(*w)) : NULL;
	struct pending *p = w ? pending_start(req, PENDING_BUF, size, 0) : NULL;
	if (!p) {
		fuse_reply_err(req, rc < 0 ? -rc : ENOMEM);
		free(w);
		return;
	}
	/* The waiter's share; ours ends below, after it is listed (pending.h). */
	pending_hold(p);
	*w = (struct waiter){.p = p, .f = f, .size = size};
	pending_on_interrupt(p, stream_drop, stream_end, w);
	pthread_mutex_lock(&f->lock);
	bool held = f->running && f->pos >= f->content.len;
	if (held) {
		struct waiter **tail = &f->waiters;
		while (*tail)
			tail = &(*tail)->next;
		*tail = w;
	} else {
		w->data = stream_take_locked(f, size, &w->len);
	}
	pthread_mutex_unlock(&f->lock);
	if (!held)
		waiter_answer(w, 0);
	pending_done(p, 0, NULL, 0);
}

void file_read(fuse_req_t req, struct fs_file *f, size_t size, off_t off)
{
	const struct fs_entry *ent = f->node.ent;
	/* An early answer (EINTR) lets the kernel release @f while this still runs. */
	file_ref(f);
	if (ent->journal)
		read_journal(req, f, size, off);
	else if (ent->log)
		read_log(req, f, size, off);
	else if (ent->flags & FS_WAIT)
		read_wait(req, f, size, off);
	else if (ent->flags & FS_STREAM)
		read_stream(req, f, size);
	else
		read_generated(req, f, size, off);
	file_unref(f);
}

/* --- writes ----------------------------------------------------------- */

/* Lines are collected under the lock and acted on after it: acting calls ops_*. */
static int collect_line(const char *line, void *arg)
{
	strbuf_add(arg, line, strlen(line) + 1);
	return strbuf_error(arg);
}

static int act_lines(struct fs_file *f, const struct strbuf *lines, struct pending *p)
{
	for (size_t at = 0; at < lines->len;) {
		const char *line = lines->buf + at;
		struct err e = {0};
		int rc = f->node.ent->write(f, line, p, &e);
		if (rc < 0) {
			tree_report(&f->node, &f->who, rc, &e);
			return rc;
		}
		at += strlen(line) + 1;
	}
	return 0;
}

static void report_framing(struct fs_file *f, int rc)
{
	struct err e = {0};
	if (rc == -EFBIG)
		err_set(&e, EFBIG, "%s: a line is longer than %d bytes", f->node.path,
			CTL_LINE_MAX);
	tree_report(&f->node, &f->who, rc, &e);
}

/* Frame @size bytes written by @owner and act on the lines they complete, under @p: the write's
 * answer. */
static int write_act(struct fs_file *f, const char *buf, size_t size, uint64_t owner,
		     struct pending *p)
{
	_cleanup_strbuf_ struct strbuf lines = STRBUF_INIT;
	pthread_mutex_lock(&f->lock);
	f->writer = owner;
	int framing = ctl_lines_feed(&f->lines, buf, size, collect_line, &lines);
	/*
	 * A line too long was dropped: the set of this file lacks it, so its
	 * FLUSH applies nothing (egress: file_collect_flush()).
	 */
	if (framing < 0)
		f->collect_refused = true;
	pthread_mutex_unlock(&f->lock);

	/* The line too long is refused first and answers the write; the others still act. */
	if (framing < 0)
		report_framing(f, framing);
	int rc = act_lines(f, &lines, p);
	return framing < 0 ? framing : rc;
}

static void write_lines(fuse_req_t req, struct fs_file *f, const char *buf, size_t size,
			uint64_t owner)
{
	struct pending *p = pending_start(req, PENDING_WRITE, size, 0);
	if (!p) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pending_done(p, write_act(f, buf, size, owner, p), NULL, 0);
}

/*
 * Is @owner's FLUSH of @f the writer's close? Then the line left without a
 * newline goes into @lines (*@framing: its framing error).
 */
static bool flush_take(struct fs_file *f, uint64_t owner, struct strbuf *lines, int *framing)
{
	const struct fs_entry *ent = f->node.ent;
	pthread_mutex_lock(&f->lock);
	/*
	 * Another descriptor table closing its copy: the writer may go on
	 * writing. A file opened for reading wrote nothing: its close acts on
	 * nothing and reports nothing (`cat *` closes every file it read).
	 */
	bool writers = ent->write && (f->flags & O_ACCMODE) != O_RDONLY &&
		       (f->writer == 0 || f->writer == owner);
	*framing = writers ? ctl_lines_flush(&f->lines, collect_line, lines) : 0;
	pthread_mutex_unlock(&f->lock);
	return writers;
}

/* The writer's close: the last line and the row's .flush act under @p; the close's answer. */
static int flush_act(struct fs_file *f, const struct strbuf *lines, int framing, struct pending *p)
{
	const struct fs_entry *ent = f->node.ent;
	int rc = framing < 0 ? framing : act_lines(f, lines, p);
	if (rc == 0 && ent->flush) {
		struct err e = {0};
		rc = ent->flush(f, p, &e);
		if (rc < 0)
			tree_report(&f->node, &f->who, rc, &e);
	}
	return rc;
}

static void flush_lines(fuse_req_t req, struct fs_file *f, uint64_t owner)
{
	_cleanup_strbuf_ struct strbuf lines = STRBUF_INIT;
	int framing;
	if (!flush_take(f, owner, &lines, &framing)) {
		fuse_reply_err(req, 0);
		return;
	}
	struct pending *p = pending_start(req, PENDING_ERR, 0, 0);
	if (!p) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pending_done(p, flush_act(f, &lines, framing, p), NULL, 0);
}

/*
 * What open(O_WRONLY), one write of @data and close() do, as one request:
 * the open file is @who's, so the lines act, are refused and are reported
 * exactly as a shell's `printf ... > file` would; @req gets the write's
 * error, else the close's, once all the work they started has completed.
 */
void file_replace(fuse_req_t req, const struct fs_node *n, const struct caller *who,
		  const char *data, size_t len)
{
	struct fs_file *f;
	/* Its callers check; a row without a write must never get here (act_lines() calls it). */
	int rc = n->ent->write ? file_open(n, who, O_WRONLY, &f) : -EACCES;
	struct pending *p = rc == 0 ? pending_start(req, PENDING_ERR, 0, 0) : NULL;
	if (!p) {
		fuse_reply_err(req, rc < 0 ? -rc : ENOMEM);
		if (rc == 0)
			file_release(f);
		return;
	}
	const uint64_t owner = (uintptr_t)f; /* the one writer: this call */
	_cleanup_strbuf_ struct strbuf lines = STRBUF_INIT;
	int framing;
	rc = len ? write_act(f, data, len, owner, p) : 0;
	int closed = flush_take(f, owner, &lines, &framing) ? flush_act(f, &lines, framing, p) : 0;
	pending_done(p, rc < 0 ? rc : closed, NULL, 0);
	file_release(f);
}

/* An early answer (EINTR) lets the kernel release @f while these still run. */
void file_write(fuse_req_t req, struct fs_file *f, const char *buf, size_t size, uint64_t owner)
{
	file_ref(f);
	write_lines(req, f, buf, size, owner);
	file_unref(f);
}

void file_flush(fuse_req_t req, struct fs_file *f, uint64_t owner)
{
	file_ref(f);
	flush_lines(req, f, owner);
	file_unref(f);
}

/* --- poll ------------------------------------------------------------- */

static unsigned default_events(const struct fs_entry *ent)
{
	unsigned ev = 0;
	if (ent->mode & 0444)
		ev |= POLLIN | POLLRDNORM;
	if (ent->mode & 0222)
		ev |= POLLOUT | POLLWRNORM;
	return ev;
}

/* As sysfs does: always readable, POLLPRI once the status differs from what this file saw. */
static unsigned status_events(struct fs_file *f)
{
	char now[FILE_SEEN_MAX];
	status_now(f, now);
	pthread_mutex_lock(&f->lock);
	bool changed = strcmp(now, f->seen) != 0;
	pthread_mutex_unlock(&f->lock);
	unsigned ev = POLLIN | POLLRDNORM | (changed ? POLLPRI : 0);
	return *now ? ev : ev | POLLERR;
}

static unsigned wait_events(struct fs_file *f)
{
	int rc = f->node.ent->settled(&f->node, &f->who);
	if (rc < 0)
		return POLLIN | POLLRDNORM | POLLERR;
	return rc > 0 ? POLLIN | POLLRDNORM : 0;
}

void file_poll(fuse_req_t req, struct fs_file *f, struct fuse_pollhandle *ph)
{
	const struct fs_entry *ent = f->node.ent;
	const enum ops_object kind =
	    f->node.scope == SCOPE_SNAPSHOT ? OPS_OBJ_SNAPSHOT : OPS_OBJ_SANDBOX;
	unsigned ev = default_events(ent);

	if (ent->flags & (FS_STATUS | FS_WAIT)) {
		/* Watch before looking, so a change in between still wakes. */
		if (ph)
			notify_watch(f, kind, f->node.id, steal_ptr(ph));
		ev = ent->flags & FS_STATUS ? status_events(f) : wait_events(f);
	}
	if (ph)
		fuse_pollhandle_destroy(ph);
	fuse_reply_poll(req, ev);
}

/* --- helpers for the rows --------------------------------------------- */

int file_empty_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	(void)n, (void)who, (void)out;
	return 0;
}

int file_action_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	struct ctl_words w;
	struct file_op *op = NULL;
	int rc = ctl_words_parse(line, f->node.name, 0, &w, e);
	if (rc == 0)
		rc = file_op_begin(f, p, w.async, &op);
	if (rc < 0)
		return rc;
	return file_op_end(op, f->node.ent->action(&f->who, f->node.id, file_op_fn(op), op, e));
}

int file_ids_action(struct fs_file *f, struct pending *p, bool async, file_ids_fn make,
		    const void *arg, struct err *e)
{
	struct file_op *op;
	_cleanup_strbuf_ struct strbuf ids = STRBUF_INIT;
	int rc = file_op_begin(f, p, async, &op);
	if (rc < 0)
		return rc;
	rc = make(&f->who, f->node.id, arg, &ids, file_op_fn(op), op, e);
	/* The ids a write made: what reads on the same open file return next. */
	if (ids.len > 0)
		set_result(f, ids.buf, ids.len);
	return file_op_end(op, rc);
}

/* A file_make_fn, and its argument, as a file_ids_fn takes them. */
struct one_id {
	file_make_fn make;
	const void *arg;
};

static int one_id_make(const struct caller *who, const char *id, const void *arg,
		       struct strbuf *made, ops_done_fn done, void *ctx, struct err *e)
{
	const struct one_id *one = arg;
	char new_id[ID_MAX];
	int rc = one->make(who, id, one->arg, new_id, done, ctx, e);
	if (rc == 0)
		strbuf_addf(made, "%s\n", new_id);
	return rc;
}

int file_id_action(struct fs_file *f, struct pending *p, bool async, file_make_fn make,
		   const void *arg, struct err *e)
{
	const struct one_id one = {make, arg};
	return file_ids_action(f, p, async, one_id_make, &one, e);
}

/* Take back what file_collect added between @from and @to, unless a line came after it. */
static void uncollect(struct fs_file *f, size_t from, size_t to)
{
	pthread_mutex_lock(&f->lock);
	if (f->collected.len == to && from < to)
		strbuf_setlen(&f->collected, from);
	pthread_mutex_unlock(&f->lock);
}

/* Add @line to what @f collected, and copy all of it into @all; -EFBIG past the bound. */
static int collect_add(struct fs_file *f, const char *line, struct strbuf *all, size_t *from,
		       size_t *to, struct err *e)
{
	pthread_mutex_lock(&f->lock);
	*from = f->collected.len;
	/* strbuf_addf adds all or nothing, so a refusal here leaves no part of @line. */
	if (*line)
		strbuf_addf(&f->collected, "%s\n", line);
	int rc = strbuf_error(&f->collected);
	if (rc < 0)
		strbuf_setlen(&f->collected, *from); /* forget the refusal: a later line may fit */
	*to = f->collected.len;
	if (rc == 0) {
		strbuf_add(all, f->collected.buf, f->collected.len);
		rc = strbuf_error(all);
	}
	pthread_mutex_unlock(&f->lock);
	if (rc == -EFBIG)
		rc = err_set(e, EFBIG, "%s: more than %d bytes", f->node.path, ENV_MAX - 1);
	return rc;
}

int file_collect(struct fs_file *f, const char *line, file_apply_fn apply, struct err *e)
{
	_cleanup_strbuf_ struct strbuf all = STRBUF_INIT;
	size_t from, to;
	int rc = collect_add(f, line, &all, &from, &to, e);
	if (rc == 0)
		rc = apply(&f->who, f->node.id, strbuf_str(&all), e);
	/* A refused line is not part of what the next lines are judged with. */
	if (rc < 0)
		uncollect(f, from, to);
	return rc;
}

int file_collect_check(struct fs_file *f, const char *line, file_check_fn check, struct err *e)
{
	_cleanup_strbuf_ struct strbuf all = STRBUF_INIT;
	size_t from, to;
	int rc = collect_add(f, line, &all, &from, &to, e);
	if (rc == 0)
		rc = check(strbuf_str(&all), e);
	pthread_mutex_lock(&f->lock);
	if (rc < 0)
		f->collect_refused = true;
	else
		f->collect_pending = true;
	pthread_mutex_unlock(&f->lock);
	return rc;
}

int file_collect_flush(struct fs_file *f, file_apply_fn apply, struct err *e)
{
	_cleanup_strbuf_ struct strbuf all = STRBUF_INIT;
	pthread_mutex_lock(&f->lock);
	bool go = f->collect_pending && !f->collect_refused;
	f->collect_pending = false;
	if (go)
		strbuf_add(&all, f->collected.buf, f->collected.len);
	int rc = go ? strbuf_error(&all) : 0;
	pthread_mutex_unlock(&f->lock);
	if (rc < 0)
		return err_set(e, -rc, "%s: cannot copy the lines written", f->node.path);
	return go ? apply(&f->who, f->node.id, strbuf_str(&all), e) : 0;
}

int file_spec_add(struct fs_file *f, const char *line, struct strbuf *text, bool *async,
		  struct err *e)
{
	pthread_mutex_lock(&f->lock);
	int rc = ctl_spec_add(&f->spec, line);
	if (rc > 0)
		ctl_spec_take(&f->spec, text, async);
	else if (rc < 0)
		ctl_spec_release(&f->spec);
	pthread_mutex_unlock(&f->lock);
	if (rc == -EFBIG)
		return err_set(e, EFBIG, "%s: spec longer than %u bytes", f->node.path,
			       CTL_SPEC_MAX);
	return rc;
}

int file_spec_take(struct fs_file *f, struct strbuf *text, bool *async)
{
	pthread_mutex_lock(&f->lock);
	int rc = ctl_spec_pending(&f->spec);
	if (rc)
		ctl_spec_take(&f->spec, text, async);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

int file_exec_begin(struct fs_file *f, struct file_op **out, struct err *e)
{
	pthread_mutex_lock(&f->lock);
	bool busy = f->running;
	if (!busy) {
		f->running = true;
		set_result_locked(f, "", 0); /* what it prints streams in (file_op_progress()) */
	}
	pthread_mutex_unlock(&f->lock);
	if (busy)
		return err_set(e, EBUSY, "%s: a command is still running on this open file",
			       f->node.path);
	int rc = file_op_new(f, NULL, FILE_OP_EXEC, out);
	if (rc < 0)
		exec_end(f, rc, NULL, 0);
	return rc;
}

int file_script_add(struct fs_file *f, const char *line, file_script_check_fn check, struct err *e)
{
	_cleanup_strbuf_ struct strbuf text = STRBUF_INIT;
	pthread_mutex_lock(&f->lock);
	bool busy = f->running;
	strbuf_add(&text, f->collected.buf, f->collected.len);
	pthread_mutex_unlock(&f->lock);
	if (busy)
		return err_set(e, EBUSY, "%s: a command is still running on this open file",
			       f->node.path);
	if (text.len)
		strbuf_adds(&text, "\n");
	strbuf_adds(&text, line);
	int rc = strbuf_error(&text);
	if (rc < 0)
		return err_set(e, -rc, "%s: out of memory", f->node.path);
	rc = check(&f->who, f->node.id, strbuf_str(&text), e);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&f->lock);
	struct strbuf old = f->collected;
	f->collected = text;
	text = old;
	f->collect_pending = true;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

void file_script_hold(struct fs_file *f, struct ops_exec_slot *slot)
{
	pthread_mutex_lock(&f->lock);
	struct ops_exec_slot *old = f->script_slot;
	f->script_slot = slot;
	pthread_mutex_unlock(&f->lock);
	ops_sandbox_exec_unreserve(old);
}

bool file_script_held(struct fs_file *f)
{
	pthread_mutex_lock(&f->lock);
	bool held = f->script_slot != NULL;
	pthread_mutex_unlock(&f->lock);
	return held;
}

int file_script_take(struct fs_file *f, struct strbuf *text, struct ops_exec_slot **slot)
{
	pthread_mutex_lock(&f->lock);
	bool pending = f->collect_pending;
	*slot = pending ? steal_ptr(f->script_slot) : NULL;
	if (pending) {
		struct strbuf old = *text;
		*text = f->collected;
		f->collected = old;
		strbuf_reset(&f->collected);
		f->collect_pending = false;
	}
	pthread_mutex_unlock(&f->lock);
	return pending ? 1 : 0;
}
