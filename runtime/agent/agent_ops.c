/*
 * agent_ops.c - the typed requests of agent.h: each encodes its body,
 * makes one agent_call() and decodes the reply (agent_decode.c). Paths are
 * checked here before they leave (wire_path_ok()): the daemon never sends
 * "..", ".", or an absolute path.
 */
#include "runtime/agent/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"

/* A request body: the largest is a WRITE, made apart (agent_write()). */
#define BODY_SMALL_MAX (2 * (WIRE_PATH_MAX + 2) + 64)

struct body {
	uint8_t buf[BODY_SMALL_MAX];
	struct wire_out w;
};

static void body_init(struct body *b)
{
	b->w = (struct wire_out){.buf = b->buf, .cap = sizeof(b->buf)};
}

static int put_path(struct body *b, const char *path, struct err *e)
{
	size_t n = strlen(path);
	if (!wire_path_ok(path, n))
		return err_set(e, EINVAL, "not a path inside a sandbox: %s", path);
	wire_put_str(&b->w, path, n);
	return 0;
}

/*
 * @rc, a decoder's of @r: a body that is no answer (-EPROTO) ends the
 * attachment that sent it (agent_break()), as a bad frame does, so that
 * nothing the keeper made for the refused reply (an open handle) outlives
 * it, and is -EIO; any other errno is the decoder's callback's.
 */
static int decoded(struct agent *a, const struct agent_reply *r, int rc)
{
	if (rc != -EPROTO)
		return rc;
	agent_break(a, r->attachment);
	return -EIO;
}

/* One call with @b; the reply's body goes to @rep (NULL: none expected). */
static int call(struct agent *a, uint16_t op, struct body *b, struct agent_reply *rep,
		struct err *e)
{
	struct agent_reply r = {0};
	int rc = agent_call(a, op, b->buf, b->w.len, &r, e);
	if (rc == 0 && !rep && r.len && decoded(a, &r, -EPROTO))
		rc = err_set(e, EIO, "the agent answered op %u with an unasked body", op);
	if (rc == 0 && rep)
		*rep = r;
	else
		free(r.body);
	return rc;
}

/* A call whose reply is one attr (or nothing, with @attr NULL and a path op). */
static int call_attr(struct agent *a, uint16_t op, struct body *b, struct wire_attr *attr,
		     struct err *e)
{
	struct agent_reply r;
	int rc = call(a, op, b, &r, e);
	if (rc < 0)
		return rc;
	rc = decoded(a, &r, agent_decode_attr(r.body, r.len, attr));
	free(r.body);
	return rc < 0 ? err_set(e, EIO, "the agent's attributes are not ones") : 0;
}

int agent_lstat(struct agent *a, const char *path, struct wire_attr *attr, struct err *e)
{
	struct body b;
	body_init(&b);
	int rc = put_path(&b, path, e);
	return rc < 0 ? rc : call_attr(a, WIRE_LSTAT, &b, attr, e);
}

int agent_readdir(struct agent *a, const char *path, uint64_t cookie, agent_dir_fn fn, void *arg,
		  uint64_t *next, struct err *e)
{
	struct body b;
	struct agent_reply r;
	body_init(&b);
	int rc = put_path(&b, path, e);
	wire_put_u64(&b.w, cookie);
	if (rc == 0)
		rc = call(a, WIRE_READDIR, &b, &r, e);
	if (rc < 0)
		return rc;
	rc = decoded(a, &r, agent_decode_dir(r.body, r.len, fn, arg, next));
	free(r.body);
	return rc == -EIO ? err_set(e, EIO, "the agent's listing of /%s is not one", path) : rc;
}

/* One OPEN asking @ask (WIRE_OPEN_PEEK, WIRE_OPEN_WHOLE or none) besides @flags. */
static int open_asking(struct agent *a, const char *path, uint32_t flags, uint32_t ask,
		       uint32_t mode, uint32_t *handle, struct wire_attr *attr, void *head,
		       size_t *head_len, struct err *e)
{
	struct body b;
	struct agent_reply r = {0};
	body_init(&b);
	int rc = put_path(&b, path, e);
	wire_put_u32(&b.w, flags | ask);
	wire_put_u32(&b.w, mode);
	if (rc == 0)
		rc = call(a, WIRE_OPEN, &b, &r, e);
	if (rc < 0)
		return rc;
	const void *h = NULL;
	bool peek = ask & WIRE_OPEN_PEEK;
	rc = decoded(a, &r,
		     agent_decode_open(r.body, r.len, handle, attr, peek ? &h : NULL, head_len, 0,
				       NULL, NULL));
	if (rc == 0 && peek)
		memcpy(head, h, *head_len);
	else if (head_len)
		*head_len = 0;
	free(r.body);
	return rc < 0 ? err_set(e, EIO, "the agent's open of /%s is not an answer", path) : 0;
}

int agent_open(struct agent *a, const char *path, uint32_t flags, uint32_t mode, uint32_t *handle,
	       struct wire_attr *attr, void *head, size_t *head_len, struct err *e)
{
	/*
	 * With @head: the head, and a small file closed again inside
	 * (WIRE_OPEN_WHOLE). A keeper older than either (it outlives daemons)
	 * refuses it with EINVAL: ask for less.
	 */
	static const uint32_t asks[] = {WIRE_OPEN_PEEK | WIRE_OPEN_WHOLE, WIRE_OPEN_PEEK, 0};
	int rc = -EINVAL;
	for (size_t i = head ? 0 : 2; i < 3 && rc == -EINVAL; i++)
		rc = open_asking(a, path, flags, asks[i], mode, handle, attr, head, head_len, e);
	return rc;
}

/* A WIRE_OPEN_MORE request's most: its path, flags, mode and names. */
#define BODY_MORE_MAX (BODY_SMALL_MAX + 4 + WIRE_MORE_MAX * (2 + WIRE_NAME_MAX))

int agent_open_more(struct agent *a, const char *path, const char *const *names, uint32_t n,
		    agent_more_fn fn, void *arg, uint32_t *handle, struct wire_attr *attr,
		    void *head, size_t *head_len, struct err *e)
{
	uint8_t *buf = malloc(BODY_MORE_MAX);
	if (!buf)
		return err_set(e, ENOMEM, "out of memory");
	struct wire_out w = {.buf = buf, .cap = BODY_MORE_MAX};
	size_t plen = strlen(path);
	bool ok = n && n <= WIRE_MORE_MAX && wire_path_ok(path, plen);
	wire_put_str(&w, path, plen);
	wire_put_u32(&w, O_RDONLY | WIRE_OPEN_PEEK | WIRE_OPEN_WHOLE | WIRE_OPEN_MORE);
	wire_put_u32(&w, 0);
	wire_put_u32(&w, n);
	for (uint32_t i = 0; ok && i < n; i++) {
		size_t len = strlen(names[i]);
		ok = wire_name_ok(names[i], len);
		wire_put_str(&w, names[i], len);
	}
	struct agent_reply r = {0};
	int rc = !ok || w.overflow ? err_set(e, EINVAL, "not a request for files of /%s", path)
				   : agent_call(a, WIRE_OPEN, buf, w.len, &r, e);
	free(buf);
	if (rc < 0)
		return rc;
	const void *h;
	rc = decoded(a, &r,
		     agent_decode_open(r.body, r.len, handle, attr, &h, head_len, n, fn, arg));
	if (rc == 0)
		memcpy(head, h, *head_len);
	free(r.body);
	return rc < 0 ? err_set(e, EIO, "the agent's open of /%s is not an answer", path) : 0;
}

struct agent_hold {
	uint8_t *body;	 /* a reply's, freed */
	struct agent *a; /* with a slot lent: a reference, dropped */
	uint32_t slot;
};

void agent_hold_release(struct agent_hold *h)
{
	if (!h)
		return;
	if (h->a) {
		agent_shm_give(h->a, h->slot);
		agent_unref(h->a);
	}
	free(h->body);
	free(h);
}

/*
 * READ_SHM into the read memory's slot that *@hold has lent: the count,
 * the bytes left in the slot (the sandbox may change them at any time,
 * which only changes its own file's bytes).
 */
static ssize_t read_shm(struct agent *a, uint32_t handle, uint64_t off, size_t n,
			struct agent_hold *hold, const void **data, struct err *e)
{
	struct body b;
	struct agent_reply r;
	uint32_t got = 0;
	body_init(&b);
	wire_put_u32(&b.w, handle);
	wire_put_u64(&b.w, off);
	wire_put_u32(&b.w, (uint32_t)n);
	wire_put_u32(&b.w, hold->slot);
	int rc = call(a, WIRE_READ_SHM, &b, &r, e);
	if (rc < 0)
		return rc;
	rc = agent_decode_u32(r.body, r.len, &got) < 0 || got > n ? -EPROTO : 0;
	rc = decoded(a, &r, rc);
	free(r.body);
	if (rc < 0)
		return err_set(e, EIO, "the agent's read is longer than asked");
	*data = agent_shm_slot(a, hold->slot);
	return (ssize_t)got;
}

/* By the pipe: the bytes in the reply, which *@hold keeps. */
static ssize_t read_pipe(struct agent *a, uint32_t handle, uint64_t off, size_t n,
			 struct agent_hold *hold, const void **data, struct err *e)
{
	struct body b;
	struct agent_reply r;
	size_t got;
	body_init(&b);
	wire_put_u32(&b.w, handle);
	wire_put_u64(&b.w, off);
	wire_put_u32(&b.w, (uint32_t)n);
	int rc = call(a, WIRE_READ, &b, &r, e);
	if (rc < 0)
		return rc;
	hold->body = r.body;
	if (decoded(a, &r, agent_decode_data(r.body, r.len, n, data, &got)) < 0)
		return err_set(e, EIO, "the agent's read is longer than asked");
	return (ssize_t)got;
}

ssize_t agent_read(struct agent *a, uint32_t handle, uint64_t off, size_t n,
		   struct agent_hold **hold, const void **data, struct err *e)
{
	n = n < WIRE_DATA_MAX ? n : WIRE_DATA_MAX;
	*hold = calloc(1, sizeof(**hold));
	if (!*hold)
		return err_set(e, ENOMEM, "read: out of memory");
	ssize_t got = -EOPNOTSUPP;
	if (agent_shm_take(a, &(*hold)->slot)) {
		agent_ref(a);
		(*hold)->a = a;
		got = read_shm(a, handle, off, n, *hold, data, e);
		if (got == -EOPNOTSUPP) { /* the slot back at once */
			agent_shm_give(a, (*hold)->slot);
			agent_unref(a);
			(*hold)->a = NULL;
		}
	}
	/* No slot free, no memory in this keeper, or one without it after all. */
	if (got == -EOPNOTSUPP)
		got = read_pipe(a, handle, off, n, *hold, data, e);
	return got;
}

/* The body of a WRITE of @n at @off through @handle, less the bytes (sent from where they are). */
static size_t write_body(uint8_t body[16], uint32_t handle, uint64_t off, size_t n)
{
	struct wire_out w = {.buf = body, .cap = 16};
	wire_put_u32(&w, handle);
	wire_put_u64(&w, off);
	wire_put_u32(&w, (uint32_t)n);
	return w.len;
}

/* The count a WRITE of @n answered in @r: 0 with *@done, or -EPROTO. */
static int write_count(const struct agent_reply *r, size_t n, uint32_t *done)
{
	return agent_decode_u32(r->body, r->len, done) < 0 || *done > n ? -EPROTO : 0;
}

ssize_t agent_write(struct agent *a, uint32_t handle, uint64_t off, const void *buf, size_t n,
		    struct err *e)
{
	uint8_t body[16];
	if (n > WIRE_DATA_MAX)
		n = WIRE_DATA_MAX;
	struct agent_reply r;
	int rc = agent_call2(a, WIRE_WRITE, body, write_body(body, handle, off, n), buf, n, &r, e);
	if (rc < 0)
		return rc;
	uint32_t done;
	rc = decoded(a, &r, write_count(&r, n, &done));
	free(r.body);
	return rc < 0 ? err_set(e, EIO, "the agent's write answer is not one") : (ssize_t)done;
}

/* A posted WRITE's: whom to tell, and how much it asked to write. */
struct wrote {
	agent_wrote_fn fn;
	void *arg;
	size_t n;
};

static int wrote_told(void *arg, int rc, const struct agent_reply *r)
{
	struct wrote *w = arg;
	uint32_t done = 0;
	if (rc == 0)
		rc = write_count(r, w->n, &done);
	w->fn(w->arg, rc < 0 ? (rc == -EPROTO ? -EIO : rc) : (ssize_t)done, w->n);
	free(w);
	return rc == -EPROTO ? rc : 0;
}

int agent_write_post(struct agent *a, uint32_t handle, uint64_t off, const void *buf, size_t n,
		     agent_wrote_fn fn, void *arg, struct err *e)
{
	uint8_t body[16];
	if (n > WIRE_DATA_MAX)
		return err_set(e, EINVAL, "a write of more than %u bytes", WIRE_DATA_MAX);
	struct wrote *w = malloc(sizeof(*w));
	if (!w)
		return err_set(e, ENOMEM, "out of memory");
	*w = (struct wrote){fn, arg, n};
	int rc = agent_post(a, WIRE_WRITE, body, write_body(body, handle, off, n), buf, n,
			    wrote_told, w, e);
	if (rc < 0)
		free(w); /* not sent: never told */
	return rc;
}

int agent_handle_op(struct agent *a, uint16_t op, uint32_t handle, struct err *e)
{
	struct body b;
	body_init(&b);
	wire_put_u32(&b.w, handle);
	return call(a, op, &b, NULL, e);
}

void agent_close_nowait(struct agent *a, uint32_t handle)
{
	struct body b;
	body_init(&b);
	wire_put_u32(&b.w, handle);
	if (agent_send(a, WIRE_CLOSE, b.buf, b.w.len) == -EAGAIN)
		agent_handle_op(a, WIRE_CLOSE, handle, NULL);
}

int agent_path_op(struct agent *a, uint16_t op, const char *path, uint64_t x, uint32_t y,
		  struct err *e)
{
	struct body b;
	body_init(&b);
	int rc = put_path(&b, path, e);
	if (op == WIRE_TRUNCATE)
		wire_put_u64(&b.w, x);
	if (op == WIRE_CHMOD || op == WIRE_CHOWN)
		wire_put_u32(&b.w, (uint32_t)x);
	if (op == WIRE_CHOWN)
		wire_put_u32(&b.w, y);
	return rc < 0 ? rc : call(a, op, &b, NULL, e);
}

int agent_mkdir(struct agent *a, const char *path, uint32_t mode, struct wire_attr *attr,
		struct err *e)
{
	struct body b;
	body_init(&b);
	int rc = put_path(&b, path, e);
	wire_put_u32(&b.w, mode);
	return rc < 0 ? rc : call_attr(a, WIRE_MKDIR, &b, attr, e);
}

int agent_rename(struct agent *a, const char *from, const char *to, uint32_t flags, struct err *e)
{
	struct body b;
	body_init(&b);
	int rc = put_path(&b, from, e);
	if (rc == 0)
		rc = put_path(&b, to, e);
	wire_put_u32(&b.w, flags);
	return rc < 0 ? rc : call(a, WIRE_RENAME, &b, NULL, e);
}

int agent_link(struct agent *a, const char *from, const char *to, struct wire_attr *attr,
	       struct err *e)
{
	struct body b;
	body_init(&b);
	int rc = put_path(&b, from, e);
	if (rc == 0)
		rc = put_path(&b, to, e);
	return rc < 0 ? rc : call_attr(a, WIRE_LINK, &b, attr, e);
}

int agent_symlink(struct agent *a, const char *target, const char *path, struct wire_attr *attr,
		  struct err *e)
{
	struct body b;
	body_init(&b);
	size_t n = strlen(target);
	if (n == 0 || n > WIRE_PATH_MAX)
		return err_set(e, ENAMETOOLONG, "a link's target is empty or too long");
	wire_put_str(&b.w, target, n);
	int rc = put_path(&b, path, e);
	return rc < 0 ? rc : call_attr(a, WIRE_SYMLINK, &b, attr, e);
}

int agent_readlink(struct agent *a, const char *path, char *buf, size_t size, struct err *e)
{
	struct body b;
	struct agent_reply r;
	body_init(&b);
	int rc = put_path(&b, path, e);
	if (rc == 0)
		rc = call(a, WIRE_READLINK, &b, &r, e);
	if (rc < 0)
		return rc;
	rc = decoded(a, &r, agent_decode_link(r.body, r.len, buf, size));
	free(r.body);
	return rc < 0 ? err_set(e, EIO, "the agent's link target of /%s is not one", path) : 0;
}

int agent_utimens(struct agent *a, const char *path, const struct timespec ts[2], struct err *e)
{
	struct body b;
	body_init(&b);
	int rc = put_path(&b, path, e);
	for (int i = 0; i < 2; i++) {
		wire_put_u64(&b.w, (uint64_t)ts[i].tv_sec);
		wire_put_u32(&b.w, (uint32_t)ts[i].tv_nsec);
	}
	return rc < 0 ? rc : call(a, WIRE_UTIMENS, &b, NULL, e);
}

int agent_ps(struct agent *a, agent_ps_fn fn, void *arg, struct err *e)
{
	struct agent_reply r;
	int rc = agent_call(a, WIRE_PS, NULL, 0, &r, e);
	if (rc < 0)
		return rc;
	rc = decoded(a, &r, agent_decode_ps(r.body, r.len, fn, arg));
	free(r.body);
	return rc == -EIO ? err_set(e, EIO, "the agent's process list is not one") : rc;
}
