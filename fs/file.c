#include "fs/file.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/notify.h"

/* --- lifetime --------------------------------------------------------- */

static void file_ref(struct fs_file *f)
{
	atomic_fetch_add(&f->refs, 1);
}

static void file_unref(struct fs_file *f)
{
	if (atomic_fetch_sub(&f->refs, 1) != 1)
		return;
	strbuf_release(&f->content);
	strbuf_release(&f->collected);
	strbuf_release(&f->result);
	ctl_spec_release(&f->spec);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

static int check_access(const struct fs_node *n, int flags, struct err *e)
{
	int acc = flags & O_ACCMODE;
	mode_t mode = n->ent->mode;
	/* Root bypasses mode bits in the kernel, so the modes are enforced here. */
	if (acc != O_RDONLY && !(mode & 0222))
		return err_set(e, EACCES, "%s is read-only", n->path);
	if (acc != O_WRONLY && !(mode & 0444))
		return err_set(e, EACCES, "%s is write-only", n->path);
	return 0;
}

/* FS_STATUS: what the status is now, for poll to compare with what was seen. */
static void status_now(const struct fs_node *n, char out[FILE_SEEN_MAX])
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	int rc = n->ent->read(n, &sb);
	snprintf(out, FILE_SEEN_MAX, "%s", rc < 0 ? "" : strbuf_str(&sb));
}

int file_open(const struct fs_node *n, int flags, struct fs_file **out, struct err *e)
{
	int rc = check_access(n, flags, e);
	if (rc < 0)
		return rc;
	struct fs_file *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	pthread_mutex_init(&f->lock, NULL);
	atomic_init(&f->refs, 1);
	f->node = *n;
	f->flags = flags;
	f->collected.max = ENV_MAX - 1;
	if (n->ent->flags & FS_STATUS)
		status_now(n, f->seen);
	*out = f;
	return 0;
}

void file_release(struct fs_file *f)
{
	notify_unwatch(f);
	file_unref(f);
}

/* --- completions ------------------------------------------------------ */

struct op {
	struct pending *p;
	struct fs_file *f;
	enum op_result what;
};

int op_new(struct fs_file *f, struct pending *p, enum op_result what, struct op **out)
{
	struct op *op = malloc(sizeof(*op));
	if (!op)
		return -ENOMEM;
	*op = (struct op){p, f, what};
	if (p)
		pending_hold(p);
	if (f)
		file_ref(f);
	*out = op;
	return 0;
}

int op_begin(struct fs_file *f, struct pending *p, bool async, struct op **out)
{
	*out = NULL;
	return async ? 0 : op_new(f, p, OP_RESULT_NONE, out);
}

static void set_content(struct fs_file *f, const char *data, size_t len)
{
	pthread_mutex_lock(&f->lock);
	strbuf_reset(&f->content);
	f->has_content = strbuf_add(&f->content, data, len) == 0;
	pthread_mutex_unlock(&f->lock);
}

static void exec_end(struct fs_file *f, int rc, const char *result, size_t len)
{
	pthread_mutex_lock(&f->lock);
	strbuf_reset(&f->result);
	if (rc == 0 && result)
		strbuf_add(&f->result, result, len);
	f->running = false;
	struct pending *waiters = steal_ptr(f->waiters);
	pthread_mutex_unlock(&f->lock);

	struct pending *w;
	while ((w = pending_pop(&waiters)))
		pending_done(w, rc, result ? result : "", result ? len : 0);
}

void op_done(void *ctx, int rc, const char *result, size_t len)
{
	struct op *op = ctx;
	if (op->what == OP_RESULT_EXEC)
		exec_end(op->f, rc, result, len);
	else if (op->what == OP_RESULT_CONTENT && rc == 0 && result)
		set_content(op->f, result, len);
	if (op->p)
		pending_done(op->p, rc, result, len);
	if (op->f)
		file_unref(op->f);
	free(op);
}

int op_end(struct op *op, int rc)
{
	if (rc < 0 && op)
		op_done(op, rc, NULL, 0);
	return rc;
}

/* --- reads ------------------------------------------------------------ */

static void reply_slice(fuse_req_t req, const char *data, size_t len, size_t size, off_t off)
{
	size_t from = (size_t)off < len ? (size_t)off : len;
	fuse_reply_buf(req, data + from, len - from < size ? len - from : size);
}

/* Reply from f->content; made afresh at offset 0 or when there is none yet. */
static void read_generated(fuse_req_t req, struct fs_file *f, size_t size, off_t off)
{
	const struct fs_entry *ent = f->node.ent;
	_cleanup_strbuf_ struct strbuf made = STRBUF_INIT;
	pthread_mutex_lock(&f->lock);
	bool fresh = off == 0 || !f->has_content;
	pthread_mutex_unlock(&f->lock);
	int rc = fresh && ent->read ? ent->read(&f->node, &made) : 0;
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	pthread_mutex_lock(&f->lock);
	if (fresh) {
		struct strbuf old = f->content;
		f->content = made;
		made = old;
		f->has_content = true;
		if (ent->flags & FS_STATUS)
			snprintf(f->seen, sizeof(f->seen), "%s", strbuf_str(&f->content));
	}
	/* fuse_reply_buf copies into the kernel at once: safe under the lock. */
	reply_slice(req, f->content.buf, f->content.len, size, off);
	pthread_mutex_unlock(&f->lock);
}

static void read_journal(fuse_req_t req, struct fs_file *f, size_t size, off_t off)
{
	_cleanup_close_ int fd = open(f->node.ent->journal(), O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			fuse_reply_buf(req, NULL, 0);
		else
			fuse_reply_err(req, errno);
		return;
	}
	_cleanup_free_ char *buf = malloc(size ? size : 1);
	ssize_t n = buf ? pread(fd, buf, size, off) : -1;
	if (n < 0)
		fuse_reply_err(req, buf ? errno : ENOMEM);
	else
		fuse_reply_buf(req, buf, (size_t)n);
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
	struct op *op;
	int rc = op_new(f, p, OP_RESULT_CONTENT, &op);
	if (rc == 0)
		rc = op_end(op, f->node.ent->action(f->node.id, op_done, op, &e));
	pending_done(p, rc, NULL, 0);
}

/* exec: the last command's output, held while it still runs. */
static void read_exec(fuse_req_t req, struct fs_file *f, size_t size, off_t off)
{
	struct pending *p = pending_start(req, PENDING_BUF, size, off);
	if (!p) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&f->lock);
	if (f->running) {
		pending_hold(p);
		pending_push(&f->waiters, p);
		pthread_mutex_unlock(&f->lock);
		pending_done(p, 0, NULL, 0);
		return;
	}
	/* Answering under the lock is safe: it copies the slice and writes to the kernel. */
	pending_done(p, 0, strbuf_str(&f->result), f->result.len);
	pthread_mutex_unlock(&f->lock);
}

/* A control file's read after a write on the same open file: the id it made. */
static bool read_result(fuse_req_t req, struct fs_file *f, size_t size, off_t off)
{
	char line[ID_MAX + 1];
	pthread_mutex_lock(&f->lock);
	bool has = f->has_id;
	int n = snprintf(line, sizeof(line), "%s\n", f->id);
	pthread_mutex_unlock(&f->lock);
	if (has)
		reply_slice(req, line, (size_t)n, size, off);
	return has;
}

void file_read(fuse_req_t req, struct fs_file *f, size_t size, off_t off)
{
	const struct fs_entry *ent = f->node.ent;
	if (ent->journal)
		read_journal(req, f, size, off);
	else if (ent->flags & FS_WAIT)
		read_wait(req, f, size, off);
	else if (ent->flags & FS_EXEC)
		read_exec(req, f, size, off);
	else if (!(ent->flags & FS_RESULT) || !read_result(req, f, size, off))
		read_generated(req, f, size, off);
}

/* --- writes ----------------------------------------------------------- */

/* Lines are collected under the lock and acted on after it: acting calls ops_*. */
static int collect_line(const char *line, void *arg)
{
	return strbuf_add(arg, line, strlen(line) + 1);
}

static int act_lines(struct fs_file *f, const struct strbuf *lines, struct pending *p)
{
	for (size_t at = 0; at < lines->len;) {
		const char *line = lines->buf + at;
		struct err e = {0};
		int rc = f->node.ent->write(f, line, p, &e);
		if (rc < 0) {
			tree_report(&f->node, rc, &e);
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
		err_set(&e, EFBIG, "%s: a line is longer than %d bytes", f->node.path, CTL_LINE_MAX);
	tree_report(&f->node, rc, &e);
}

void file_write(fuse_req_t req, struct fs_file *f, const char *buf, size_t size)
{
	_cleanup_strbuf_ struct strbuf lines = STRBUF_INIT;
	pthread_mutex_lock(&f->lock);
	int framing = ctl_lines_feed(&f->lines, buf, size, collect_line, &lines);
	pthread_mutex_unlock(&f->lock);

	struct pending *p = pending_start(req, PENDING_WRITE, size, 0);
	if (!p) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int rc = act_lines(f, &lines, p);
	if (rc == 0 && framing < 0) {
		report_framing(f, framing);
		rc = framing;
	}
	pending_done(p, rc, NULL, 0);
}

void file_flush(fuse_req_t req, struct fs_file *f)
{
	const struct fs_entry *ent = f->node.ent;
	_cleanup_strbuf_ struct strbuf lines = STRBUF_INIT;
	if (!ent->write) {
		fuse_reply_err(req, 0);
		return;
	}
	pthread_mutex_lock(&f->lock);
	int framing = ctl_lines_flush(&f->lines, collect_line, &lines);
	pthread_mutex_unlock(&f->lock);

	struct pending *p = pending_start(req, PENDING_ERR, 0, 0);
	if (!p) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int rc = framing < 0 ? framing : act_lines(f, &lines, p);
	if (rc == 0 && ent->flush) {
		struct err e = {0};
		rc = ent->flush(f, p, &e);
		if (rc < 0)
			tree_report(&f->node, rc, &e);
	}
	pending_done(p, rc, NULL, 0);
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
	status_now(&f->node, now);
	pthread_mutex_lock(&f->lock);
	bool changed = strcmp(now, f->seen) != 0;
	pthread_mutex_unlock(&f->lock);
	unsigned ev = POLLIN | POLLRDNORM | (changed ? POLLPRI : 0);
	return *now ? ev : ev | POLLERR;
}

static unsigned wait_events(struct fs_file *f)
{
	int rc = f->node.ent->settled(&f->node);
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

int file_action_write(struct fs_file *f, const char *line, struct pending *p, struct err *e)
{
	struct ctl_words w;
	struct op *op;
	int rc = ctl_words_parse(line, f->node.name, 0, &w, e);
	if (rc == 0)
		rc = op_begin(f, p, w.async, &op);
	if (rc < 0)
		return rc;
	return op_end(op, f->node.ent->action(f->node.id, op_fn(op), op, e));
}

void file_set_id(struct fs_file *f, const char *id)
{
	pthread_mutex_lock(&f->lock);
	snprintf(f->id, sizeof(f->id), "%s", id);
	f->has_id = true;
	pthread_mutex_unlock(&f->lock);
}

int file_collect(struct fs_file *f, const char *line, struct strbuf *all, struct err *e)
{
	int rc = 0;
	pthread_mutex_lock(&f->lock);
	if (*line) {
		rc = strbuf_adds(&f->collected, line);
		rc = rc < 0 ? rc : strbuf_add(&f->collected, "\n", 1);
	}
	if (rc == 0)
		rc = strbuf_add(all, f->collected.buf, f->collected.len);
	pthread_mutex_unlock(&f->lock);
	if (rc == -EFBIG)
		return err_set(e, EFBIG, "%s: more than %d bytes", f->node.path, ENV_MAX - 1);
	return rc;
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
		return err_set(e, EFBIG, "%s: spec longer than %u bytes", f->node.path, CTL_SPEC_MAX);
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

int file_exec_begin(struct fs_file *f, struct pending *p, struct op **out, struct err *e)
{
	pthread_mutex_lock(&f->lock);
	bool busy = f->running;
	f->running = true;
	pthread_mutex_unlock(&f->lock);
	if (busy)
		return err_set(e, EBUSY, "%s: a command is still running on this open file",
			       f->node.path);
	int rc = op_new(f, p, OP_RESULT_EXEC, out);
	if (rc < 0)
		exec_end(f, rc, NULL, 0);
	return rc;
}
