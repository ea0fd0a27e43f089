/*
 * agent.c - one sandbox's agent channel: attach, detach with proof,
 * requests and the reader thread that matches replies to them (agent.h).
 *
 * Locks. a->lock guards every field of struct agent but those named
 * otherwise; a->wlock is held while one frame is written on req_w, so
 * frames never interleave (a pipe write past PIPE_BUF is not atomic);
 * a->attach_lock serializes attach and detach. Order: attach_lock, then
 * lock; wlock is never held with lock.
 *
 * The reader thread belongs to one attachment: it reads rep_r until EOF or
 * a protocol error, then sets @eof and ends; detach joins it.
 */
#include "runtime/agent/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "lib/files.h"
#include "lib/strbuf.h"
#include "lib/util.h"
#include "runtime/agent/shmem.h"

struct slot {
	uint32_t tag; /* 0: free */
	uint16_t op;
	bool done;
	bool orphan;		/* agent_send(): nobody waits; the reply frees the slot */
	int rc;			/* once done: 0 or -errno */
	struct agent_reply rep; /* rep.attachment: the one the request went to */
	/* An exec's: where its output goes, its wait status. */
	agent_out_fn fn;
	void *arg;
	bool stopped; /* fn said stop: the rest of its output is dropped */
	int status;
	/* agent_post()'s: told of the answer instead of a waiter; the slot then goes. */
	agent_done_fn done_fn;
	void *done_arg;
	int64_t taken_ms; /* when the request was made (mono_ms()) */
	pthread_cond_t cond;
};

struct agent {
	pthread_mutex_t lock;
	pthread_mutex_t wlock;
	pthread_mutex_t attach_lock;
	int refs;
	const struct runsc *rs;
	char cid[RUNTIME_ID_MAX];
	int exe_fd;
	/* The attachment: our ends, -1 when detached. req_w is written under wlock. */
	int req_w, rep_r;
	pthread_t reader;
	bool reader_running;
	bool eof;		 /* the reader met EOF or a broken frame: the attachment is over */
	bool detaching;		 /* a detach is under way: execs wait for the next attachment */
	bool stop_reader;	 /* the reader is to end now, EOF or not */
	unsigned attachment;	 /* counts attachments: a reply says which one answered it */
	unsigned req_attachment; /* the attachment req_w is of; under wlock, with req_w */
	/*
	 * Writers on req_w give up (-EIO): the attachment is over. Read without
	 * lock by a writer, which holds wlock, never taken with lock.
	 */
	atomic_bool write_abort;
	int keeper_pid; /* from HELLO (the sandbox's word: only used to kill inside it) */
	/* The keeper's read memory (its own lock), and whether this attachment's keeper mapped it.
	 */
	struct shmem shm;
	bool shm_ok;
	uint32_t next_tag;
	pthread_cond_t eof_cond;
	unsigned posted;	    /* agent_post()'s requests not answered yet */
	pthread_cond_t posted_cond; /* posted went down */
	struct slot slots[AGENT_INFLIGHT_MAX];
};

/* Close *@fd if open, and mark it closed. */
static void close_reset(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int agent_new(const struct runsc *rs, const char *cid, int exe_fd, struct agent **out,
	      struct err *e)
{
	struct agent *a = calloc(1, sizeof(*a));
	if (!a)
		return err_set(e, ENOMEM, "cannot start an agent: out of memory");
	pthread_mutex_init(&a->lock, NULL);
	pthread_mutex_init(&a->wlock, NULL);
	pthread_mutex_init(&a->attach_lock, NULL);
	cond_init_mono(&a->eof_cond);
	cond_init_mono(&a->posted_cond);
	for (int i = 0; i < AGENT_INFLIGHT_MAX; i++)
		cond_init_mono(&a->slots[i].cond);
	a->refs = 1;
	a->rs = rs;
	snprintf(a->cid, sizeof(a->cid), "%s", cid);
	a->exe_fd = exe_fd;
	a->req_w = a->rep_r = -1;
	shmem_init(&a->shm);
	/* Tags from a random start: a keeper's execs of an earlier daemon never match ours. */
	a->next_tag = (uint32_t)(fnv1a(cid) ^ (uint64_t)now_ms()) | 1u;
	*out = a;
	return 0;
}

void agent_ref(struct agent *a)
{
	pthread_mutex_lock(&a->lock);
	a->refs++;
	pthread_mutex_unlock(&a->lock);
}

void agent_unref(struct agent *a)
{
	pthread_mutex_lock(&a->lock);
	bool last = --a->refs == 0;
	pthread_mutex_unlock(&a->lock);
	if (!last)
		return;
	agent_detach(a, NULL);
	for (int i = 0; i < AGENT_INFLIGHT_MAX; i++)
		pthread_cond_destroy(&a->slots[i].cond);
	pthread_cond_destroy(&a->eof_cond);
	pthread_cond_destroy(&a->posted_cond);
	shmem_close(&a->shm);
	pthread_mutex_destroy(&a->lock);
	pthread_mutex_destroy(&a->wlock);
	pthread_mutex_destroy(&a->attach_lock);
	free(a);
}

bool agent_attached(struct agent *a)
{
	pthread_mutex_lock(&a->lock);
	bool on = a->rep_r >= 0 && !a->eof;
	pthread_mutex_unlock(&a->lock);
	return on;
}

bool agent_execs_waiting(struct agent *a)
{
	pthread_mutex_lock(&a->lock);
	bool any = false;
	for (int i = 0; i < AGENT_INFLIGHT_MAX && !any; i++)
		any = a->slots[i].tag && !a->slots[i].done && a->slots[i].op == WIRE_EXEC;
	pthread_mutex_unlock(&a->lock);
	return any;
}

/* --- the reader ---------------------------------------------------------- */

static struct slot *slot_of(struct agent *a, uint32_t tag)
{
	for (int i = 0; i < AGENT_INFLIGHT_MAX; i++)
		if (a->slots[i].tag == tag && tag)
			return &a->slots[i];
	return NULL;
}

static void slot_free_locked(struct slot *s);

/*
 * @s is answered (@rc): its waiter wakes, or its agent_post() caller is
 * told and the slot goes; -EPROTO when that caller found the reply no
 * answer. Under a->lock.
 */
static int finish(struct agent *a, struct slot *s, int rc)
{
	if (!s->done_fn) {
		s->done = true;
		s->rc = rc;
		pthread_cond_broadcast(&s->cond);
		return 0;
	}
	int told = s->done_fn(s->done_arg, rc, &s->rep);
	slot_free_locked(s);
	a->posted--;
	pthread_cond_broadcast(&a->posted_cond);
	return told;
}

/*
 * The attachment is over: what waits for a reply fails, except execs when
 * the end is a detach (they go on after the next attach).
 */
static void end_attachment_locked(struct agent *a)
{
	a->eof = true;
	atomic_store(&a->write_abort, true);
	for (int i = 0; i < AGENT_INFLIGHT_MAX; i++) {
		struct slot *s = &a->slots[i];
		if (s->tag && s->orphan)
			slot_free_locked(s);
		else if (s->tag && !s->done && !(s->op == WIRE_EXEC && a->detaching))
			finish(a, s, -EIO);
	}
	pthread_cond_broadcast(&a->eof_cond);
}

void agent_break(struct agent *a, unsigned attachment)
{
	pthread_mutex_lock(&a->lock);
	if (a->rep_r >= 0 && !a->eof && a->attachment == attachment) {
		warning("agent of %s: a reply that was no answer, or a request cut short: the "
			"channel goes",
			a->cid);
		end_attachment_locked(a);
	}
	pthread_mutex_unlock(&a->lock);
}

/*
 * A request of @attachment went unanswered for AGENT_REPLY_TIMEOUT_MS. The
 * keeper serves its channel in order, so every request behind it would
 * wait as long: the attachment ends (its requests fail with EIO), and the
 * keeper that said it was @attachment's is killed, since one stuck in a
 * call (or stopped by the sandbox) would not answer the next attach
 * either. Under a->lock; returns that pid for the caller to kill once it
 * has let go of the lock (kill_keeper()), or 0.
 */
static int stuck_locked(struct agent *a, unsigned attachment, const char *what)
{
	if (a->rep_r < 0 || a->eof || a->attachment != attachment)
		return 0; /* ended already, or another has replaced it */
	warning("agent of %s: %s unanswered for %d s: the channel goes, and its keeper (pid %d)",
		a->cid, what, AGENT_REPLY_TIMEOUT_MS / 1000, a->keeper_pid);
	end_attachment_locked(a);
	return a->keeper_pid;
}

/* @pid (the sandbox's word, from HELLO: only ever killed inside it), if any. */
static void kill_keeper(struct agent *a, int pid)
{
	if (pid > 0)
		runsc_kill_pid(a->rs, a->cid, pid, SIGKILL, NULL);
}

void agent_stuck(struct agent *a)
{
	pthread_mutex_lock(&a->lock);
	bool stuck = false;
	int64_t now = mono_ms();
	for (int i = 0; i < AGENT_INFLIGHT_MAX && !stuck; i++) {
		const struct slot *s = &a->slots[i];
		stuck = s->tag && s->done_fn && s->rep.attachment == a->attachment &&
			now - s->taken_ms >= AGENT_REPLY_TIMEOUT_MS;
	}
	int pid = stuck ? stuck_locked(a, a->attachment, "posted requests") : 0;
	pthread_mutex_unlock(&a->lock);
	kill_keeper(a, pid);
}

/* A reply of @h with @body (taken) for its request: 0, or -EIO when it answers none. */
static int deliver_locked(struct agent *a, const struct wire_header *h, uint8_t *body)
{
	struct slot *s = slot_of(a, h->tag);
	bool stream = h->op == WIRE_OUT || h->op == WIRE_EXIT;
	/* KILL and DETACH are answered (empty) but nobody waits for them: dropped. */
	if ((h->op == WIRE_KILL || h->op == WIRE_DETACH) && !s) {
		free(body);
		return h->len ? -EIO : 0;
	}
	if (!s || s->done) {
		free(body);
		/* An exec of an earlier daemon's, which the keeper still reports: dropped. */
		return stream ? 0 : -EIO;
	}
	if (s->orphan && !stream && h->op == s->op) {
		/* Its errno, if any, had nobody to go to (a CLOSE's never does). */
		free(body);
		slot_free_locked(s);
		return 0;
	}
	if (stream != (s->op == WIRE_EXEC) || (!stream && h->op != s->op)) {
		free(body);
		return -EIO;
	}
	if (h->op == WIRE_OUT) {
		if (!s->stopped && s->fn(s->arg, (const char *)body, h->len)) {
			s->stopped = true; /* its waiter kills it (agent_exec()) */
			pthread_cond_broadcast(&s->cond);
		}
		free(body);
		return 0;
	}
	if (h->err && !wire_errno_ok(h->err)) {
		free(body);
		return -EIO;
	}
	s->rep.body = body;
	s->rep.len = h->len;
	if (h->op == WIRE_EXIT) {
		uint32_t st;
		if (agent_decode_u32(body, h->len, &st) < 0)
			return -EIO;
		s->status = (int)st;
	}
	return finish(a, s, h->err ? -(int)h->err : 0) == -EPROTO ? -EIO : 0;
}

static bool stopping(struct agent *a)
{
	pthread_mutex_lock(&a->lock);
	bool stop = a->stop_reader;
	pthread_mutex_unlock(&a->lock);
	return stop;
}

/*
 * The reader's bytes not yet taken: one read() brings whatever the pipe
 * holds, often a whole frame or several, instead of one read (and poll)
 * for the header and another for the body. Owned by the reader thread.
 */
#define RBUF_BYTES (64u << 10)

struct rbuf {
	uint8_t b[RBUF_BYTES];
	size_t at, end; /* unread: b[at..end) */
};

/* Wait for @fd to be readable, in slices so that a detach can stop the reader; 0 or -EIO. */
static int wait_readable(struct agent *a, int fd)
{
	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (stopping(a))
			return -EIO;
		int ready = poll(&pf, 1, 250);
		if (ready < 0 && errno != EINTR)
			return -EIO;
		if (ready > 0)
			return 0;
	}
}

/*
 * @n bytes into @buf: first what @rb holds, then from @fd, straight into
 * @buf for a large body. The sandbox may hold the pipe's write end and send
 * half a frame: waits are in slices (wait_readable()). 0, or -EIO at EOF,
 * an error or a stop.
 */
static int read_full(struct agent *a, int fd, struct rbuf *rb, void *buf, size_t n)
{
	uint8_t *p = buf;
	while (n) {
		if (rb->at < rb->end) {
			size_t k = rb->end - rb->at < n ? rb->end - rb->at : n;
			memcpy(p, rb->b + rb->at, k);
			rb->at += k, p += k, n -= k;
			continue;
		}
		if (wait_readable(a, fd) < 0)
			return -EIO;
		bool direct = n >= RBUF_BYTES;
		ssize_t got = direct ? read(fd, p, n) : read(fd, rb->b, RBUF_BYTES);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got <= 0)
			return -EIO;
		if (direct)
			p += got, n -= (size_t)got;
		else
			rb->at = 0, rb->end = (size_t)got;
	}
	return 0;
}

static int read_frame(struct agent *a, int fd, struct rbuf *rb, struct wire_header *h,
		      uint8_t **body)
{
	uint8_t hdr[WIRE_HEADER_SIZE];
	*body = NULL;
	if (read_full(a, fd, rb, hdr, sizeof(hdr)) < 0 || wire_header_get(hdr, h) < 0)
		return -EIO;
	/* A reply with an errno has no body; a stream frame at most its bound. */
	if ((h->err && h->len) || (h->op == WIRE_OUT && h->len > (64u << 10)))
		return -EIO;
	*body = malloc(h->len ? h->len : 1);
	if (!*body)
		return -ENOMEM;
	if (h->len && read_full(a, fd, rb, *body, h->len) < 0) {
		free(*body);
		*body = NULL;
		return -EIO;
	}
	return 0;
}

static void *reader_main(void *arg)
{
	struct agent *a = arg;
	int fd = a->rep_r; /* set before the thread starts, closed only after it is joined */
	struct rbuf *rb = malloc(sizeof(*rb));
	if (rb)
		rb->at = rb->end = 0;
	for (;;) {
		struct wire_header h;
		uint8_t *body = NULL;
		int rc = rb ? read_frame(a, fd, rb, &h, &body) : -ENOMEM;
		pthread_mutex_lock(&a->lock);
		if (rc == 0)
			rc = deliver_locked(a, &h, body);
		if (rc < 0) {
			if (!a->detaching)
				warning("agent of %s: the channel ended or broke the protocol",
					a->cid);
			end_attachment_locked(a);
			pthread_mutex_unlock(&a->lock);
			free(rb);
			return NULL;
		}
		pthread_mutex_unlock(&a->lock);
	}
}

/* --- requests ------------------------------------------------------------ */

/*
 * All of @iov's @n buffers to @a's req_w (non-blocking); 0, or -1. A keeper
 * that stops reading (stopped, or an impostor) fills the pipe: the writer,
 * who holds wlock, waits in slices and gives up when the attachment ends
 * (write_abort) or after AGENT_REPLY_TIMEOUT_MS, so that neither it nor
 * an attach or detach waiting for wlock hangs on the sandbox.
 */
static int writev_all(struct agent *a, struct iovec *iov, int n)
{
	int64_t deadline = mono_ms() + AGENT_REPLY_TIMEOUT_MS;
	while (n > 0) {
		ssize_t w = writev(a->req_w, iov, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd p = {.fd = a->req_w, .events = POLLOUT};
			if (atomic_load(&a->write_abort) || mono_ms() >= deadline)
				return -1;
			(void)poll(&p, 1, 100);
			continue;
		}
		if (w <= 0)
			return -1;
		for (; n > 0 && (size_t)w >= iov->iov_len; iov++, n--)
			w -= (ssize_t)iov->iov_len;
		if (n > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

/*
 * A frame whose body is @body then @data (a WRITE's bytes, sent from where
 * they are), in one write where the pipe takes it at once: the keeper then
 * wakes once per request, not once for the header and again for the body
 * (a wake-up inside gVisor costs tens of microseconds).
 */
static int send_frame2(struct agent *a, uint32_t tag, uint16_t op, const void *body, size_t len,
		       const void *data, size_t dlen)
{
	uint8_t hdr[WIRE_HEADER_SIZE];
	struct wire_header h = {.len = (uint32_t)(len + dlen), .tag = tag, .op = op};
	wire_header_put(hdr, &h);
	struct iovec iov[3] = {{hdr, sizeof(hdr)}, {(void *)body, len}, {(void *)data, dlen}};
	pthread_mutex_lock(&a->wlock);
	unsigned attachment = a->req_attachment;
	int rc = a->req_w < 0 ? -ENOTCONN : writev_all(a, iov, dlen ? 3 : len ? 2 : 1);
	pthread_mutex_unlock(&a->wlock);
	/* A frame cut short (a keeper that stopped reading) leaves no frame boundary to go on from.
	 */
	if (rc == -1)
		agent_break(a, attachment);
	return rc < 0 ? -EIO : 0;
}

static int send_frame(struct agent *a, uint32_t tag, uint16_t op, const void *body, size_t len)
{
	return send_frame2(a, tag, op, body, len, NULL, 0);
}

/* A new tag, never 0 nor one a slot still holds (slots can be held long); under a->lock. */
static uint32_t tag_next_locked(struct agent *a)
{
	do
		if (++a->next_tag == 0)
			a->next_tag = 1;
	while (slot_of(a, a->next_tag));
	return a->next_tag;
}

/* A free slot for @op with a new tag, or NULL; under a->lock. */
static struct slot *slot_take_locked(struct agent *a, uint16_t op)
{
	struct slot *s = NULL;
	for (int i = 0; i < AGENT_INFLIGHT_MAX && !s; i++)
		if (!a->slots[i].tag)
			s = &a->slots[i];
	if (!s)
		return NULL;
	s->tag = tag_next_locked(a);
	s->taken_ms = mono_ms();
	s->op = op;
	s->done_fn = NULL;
	s->done = s->stopped = s->orphan = false;
	s->rc = 0;
	s->rep = (struct agent_reply){.attachment = a->attachment};
	s->fn = NULL;
	return s;
}

static void slot_free_locked(struct slot *s)
{
	free(s->rep.body);
	s->rep = (struct agent_reply){0};
	s->tag = 0;
}

static int call_error(const struct agent *a, int rc, uint16_t op, struct err *e)
{
	if (rc == -ENOTCONN)
		return err_set(e, ENOTCONN, "the agent of %s is not attached", a->cid);
	if (rc == -EIO)
		return err_set(
		    e, EIO,
		    "the agent of %s failed a request (op %u): it died or broke the protocol",
		    a->cid, op);
	return rc; /* the agent's own errno: the caller's to word */
}

int agent_call(struct agent *a, uint16_t op, const void *body, size_t len, struct agent_reply *rep,
	       struct err *e)
{
	return agent_call2(a, op, body, len, NULL, 0, rep, e);
}

/*
 * Take a slot for @op and send its frame: 0 with *@sp, or -errno with @e.
 * With @fn, the slot is agent_post()'s and counts in a->posted.
 */
static int slot_send(struct agent *a, uint16_t op, const void *body, size_t len, const void *data,
		     size_t dlen, agent_done_fn fn, void *arg, struct slot **sp, struct err *e)
{
	pthread_mutex_lock(&a->lock);
	bool up = a->rep_r >= 0 && !a->eof && !a->detaching;
	bool room = !fn || a->posted < AGENT_POSTED_MAX;
	struct slot *s = up && room ? slot_take_locked(a, op) : NULL;
	uint32_t tag = s ? s->tag : 0;
	if (s && fn) {
		s->done_fn = fn, s->done_arg = arg;
		a->posted++;
	}
	pthread_mutex_unlock(&a->lock);
	if (up && !room)
		return -EBUSY; /* the caller calls and waits instead */
	if (!s && up)
		return err_set(e, EAGAIN, "the agent of %s has %d requests in flight", a->cid,
			       AGENT_INFLIGHT_MAX);
	if (!s)
		return call_error(a, -ENOTCONN, op, e);
	int rc = send_frame2(a, tag, op, body, len, data, dlen);
	pthread_mutex_lock(&a->lock);
	if (rc < 0 && s->tag == tag) {
		/* Not sent whole: the slot goes, and @fn is never told. */
		if (fn) {
			a->posted--;
			pthread_cond_broadcast(&a->posted_cond);
		}
		slot_free_locked(s);
	} else if (rc < 0 && fn) {
		rc = 0; /* the attachment ended meanwhile and told @fn (-EIO): as if sent */
	}
	pthread_mutex_unlock(&a->lock);
	*sp = s;
	return rc < 0 ? call_error(a, rc, op, e) : 0;
}

int agent_post(struct agent *a, uint16_t op, const void *body, size_t len, const void *data,
	       size_t dlen, agent_done_fn fn, void *arg, struct err *e)
{
	struct slot *s;
	return slot_send(a, op, body, len, data, dlen, fn, arg, &s, e);
}

int agent_call2(struct agent *a, uint16_t op, const void *body, size_t len, const void *data,
		size_t dlen, struct agent_reply *rep, struct err *e)
{
	struct slot *s;
	int rc = slot_send(a, op, body, len, data, dlen, NULL, NULL, &s, e);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&a->lock);
	int64_t deadline = mono_ms() + AGENT_REPLY_TIMEOUT_MS;
	while (rc == 0 && !s->done)
		if (!cond_wait_until(&s->cond, &a->lock, deadline))
			rc = -EIO;
	int stuck_pid = 0;
	if (rc < 0 && s->done)
		rc = 0; /* a timeout that raced the reply is none */
	else if (rc < 0)
		stuck_pid = stuck_locked(a, s->rep.attachment, "a request");
	if (rc == 0)
		rc = s->rc;
	if (rc == 0 && rep) {
		*rep = s->rep;
		s->rep.body = NULL;
	}
	slot_free_locked(s);
	pthread_mutex_unlock(&a->lock);
	kill_keeper(a, stuck_pid);
	return call_error(a, rc, op, e);
}

int agent_send(struct agent *a, uint16_t op, const void *body, size_t len)
{
	pthread_mutex_lock(&a->lock);
	bool up = a->rep_r >= 0 && !a->eof && !a->detaching;
	struct slot *s = up ? slot_take_locked(a, op) : NULL;
	if (s)
		s->orphan = true;
	uint32_t tag = s ? s->tag : 0;
	pthread_mutex_unlock(&a->lock);
	if (!s)
		return up ? -EAGAIN : -ENOTCONN;
	int rc = send_frame(a, tag, op, body, len);
	if (rc < 0) {
		/* Not sent whole: the reader may have freed the slot already at EOF. */
		pthread_mutex_lock(&a->lock);
		if (s->tag == tag && s->orphan)
			slot_free_locked(s);
		pthread_mutex_unlock(&a->lock);
	}
	return rc;
}

/* --- the read memory (shmem.h) ------------------------------------------------ */

bool agent_shm_take(struct agent *a, uint32_t *slot)
{
	pthread_mutex_lock(&a->lock);
	bool ok = a->shm_ok && a->rep_r >= 0 && !a->eof;
	pthread_mutex_unlock(&a->lock);
	return ok && shmem_take(&a->shm, slot);
}

void agent_shm_give(struct agent *a, uint32_t slot)
{
	shmem_give(&a->shm, slot);
}

const uint8_t *agent_shm_slot(struct agent *a, uint32_t slot)
{
	return shmem_slot(&a->shm, slot);
}

/* --- attach and detach ----------------------------------------------------- */

/*
 * HELLO: the keeper's protocol, pid and features. The features are asked
 * for, so a keeper from before them (which ignores the body) answers
 * without, and one of ours answers an earlier daemon without.
 */
static int hello(struct agent *a, struct err *e)
{
	uint8_t b[8];
	struct wire_out w = {.buf = b, .cap = sizeof(b)};
	struct agent_reply rep;
	wire_put_u32(&w, WIRE_VERSION);
	wire_put_u32(&w, a->shm.fd >= 0 ? WIRE_HELLO_SHM : 0);
	int rc = agent_call(a, WIRE_HELLO, b, w.len, &rep, e);
	if (rc < 0)
		return rc;
	struct wire_in in = {.buf = rep.body, .len = rep.len};
	uint32_t version = wire_get_u32(&in), pid = wire_get_u32(&in);
	uint32_t features = in.len - in.off >= 4 ? wire_get_u32(&in) : 0;
	free(rep.body);
	if (!wire_in_done(&in) || version != WIRE_VERSION)
		return err_set(e, EIO, "the agent of %s speaks another protocol", a->cid);
	pthread_mutex_lock(&a->lock);
	a->shm_ok = a->shm.fd >= 0 && (features & WIRE_HELLO_SHM);
	int was = a->keeper_pid;
	a->keeper_pid = pid > 0 && pid < (1u << 22) ? (int)pid : 0;
	/* Another keeper: the execs the old one ran are gone with it. */
	for (int i = 0; was && was != a->keeper_pid && i < AGENT_INFLIGHT_MAX; i++)
		if (a->slots[i].tag && !a->slots[i].done && a->slots[i].op == WIRE_EXEC)
			finish(a, &a->slots[i], -EIO);
	pthread_mutex_unlock(&a->lock);
	return 0;
}

/* Run `snapfs-agent attach` with @in and @out as its stdin and stdout. */
static int run_attach(struct agent *a, int in, int out, struct err *e)
{
	static const char *const argv[] = {"snapfs-agent", "attach", NULL};
	_cleanup_strbuf_ struct strbuf said = STRBUF_INIT;
	struct runsc_exec x = {.argv = argv,
			       .exec_fd = a->exe_fd,
			       .stdin_fd = in,
			       .stdout_fd = out,
			       .pass_fd = a->shm.fd,
			       .timeout_ms = AGENT_ATTACH_TIMEOUT_MS,
			       .out = &said,
			       .cap = 4096};
	int rc = runsc_exec(a->rs, a->cid, &x, e);
	if (rc < 0)
		return rc;
	if (x.exit_code != 0)
		return err_set(e, EIO, "cannot start the agent in %s: %s (exit %d)", a->cid,
			       said.len ? strbuf_str(&said) : "no message", x.exit_code);
	return 0;
}

/* @fd's pipe to AGENT_PIPE_BYTES, or to pipe-max-size where that is all we may have. */
static void pipe_grow(int fd)
{
	if (fcntl(fd, F_SETPIPE_SZ, AGENT_PIPE_BYTES) < 0)
		(void)fcntl(fd, F_SETPIPE_SZ, 1 << 20);
}

/*
 * The end of an attachment: the reader stops (the sandbox may still hold
 * the write end), is joined, and our two ends close. Under attach_lock.
 */
static void attachment_close(struct agent *a)
{
	atomic_store(&a->write_abort, true); /* a writer stuck on a full pipe lets go of wlock */
	pthread_mutex_lock(&a->wlock);
	close_reset(&a->req_w);
	pthread_mutex_unlock(&a->wlock);
	pthread_mutex_lock(&a->lock);
	a->stop_reader = true;
	bool running = a->reader_running;
	pthread_mutex_unlock(&a->lock);
	if (running)
		pthread_join(a->reader, NULL);
	pthread_mutex_lock(&a->lock);
	a->reader_running = false;
	a->stop_reader = false;
	/* A reader that never ran (or met no end) told nobody: what waits is told now. */
	if (a->rep_r >= 0 && !a->eof)
		end_attachment_locked(a);
	close_reset(&a->rep_r);
	pthread_mutex_unlock(&a->lock);
}

int agent_attach(struct agent *a, struct err *e)
{
	pthread_mutex_lock(&a->attach_lock);
	if (agent_attached(a)) {
		pthread_mutex_unlock(&a->attach_lock);
		return 0;
	}
	/*
	 * An attachment that ended by itself (the keeper died, or broke the
	 * protocol) still has its ends and its reader: each would stay for
	 * good, two descriptors a death, for a sandbox to kill its keeper in a
	 * loop.
	 */
	attachment_close(a);
	pthread_mutex_lock(&a->lock);
	a->shm_ok = false; /* until this attachment's HELLO says */
	pthread_mutex_unlock(&a->lock);
	struct err shm_e = {0};
	if (shmem_open(&a->shm, &shm_e) < 0) /* best effort: reads then go by the pipe */
		debug("agent of %s: %s", a->cid, shm_e.msg);
	int req[2] = {-1, -1}, rep[2] = {-1, -1};
	int rc = pipe2(req, O_CLOEXEC) < 0 || pipe2(rep, O_CLOEXEC) < 0 ? -errno : 0;
	if (rc < 0)
		rc = err_set(e, -rc, "cannot make the agent's channel: %s", strerror(-rc));
	if (rc == 0) {
		/*
		 * Room for a whole READ reply or WRITE request (1 MiB and its
		 * header) in each pipe: a frame then crosses in one write and one
		 * read, not 16 wake-ups of 64 KiB. Best effort: a smaller pipe
		 * only costs time.
		 */
		pipe_grow(req[1]);
		pipe_grow(rep[0]);
		/* Our writes wait in slices, so that a keeper that stops reading cannot hold them.
		 */
		rc = fcntl(req[1], F_SETFL, O_NONBLOCK) < 0
			 ? err_set(e, errno, "cannot make the agent's channel: %s", strerror(errno))
			 : run_attach(a, req[0], rep[1], e);
	}
	/* Only the keeper holds the far ends now. */
	closep(&req[0]);
	closep(&rep[1]);
	if (rc == 0) {
		/* attach_lock held: nothing else changes the attachment meanwhile. */
		pthread_mutex_lock(&a->lock);
		unsigned next = a->attachment + 1;
		pthread_mutex_unlock(&a->lock);
		pthread_mutex_lock(&a->wlock);
		a->req_w = req[1], a->req_attachment = next;
		pthread_mutex_unlock(&a->wlock);
		pthread_mutex_lock(&a->lock);
		a->rep_r = rep[0];
		req[1] = rep[0] = -1;
		a->eof = a->detaching = false;
		a->attachment = next;
		atomic_store(&a->write_abort, false);
		rc = -pthread_create(&a->reader, NULL, reader_main, a);
		a->reader_running = rc == 0;
		pthread_mutex_unlock(&a->lock);
		if (rc < 0)
			err_set(e, -rc, "cannot start the agent's reader: %s", strerror(-rc));
	}
	closep(&req[1]);
	closep(&rep[0]);
	pthread_mutex_unlock(&a->attach_lock);
	if (rc == 0)
		rc = hello(a, e);
	if (rc < 0)
		agent_detach(a, NULL);
	return rc;
}

/* Nothing in the sandbox reads our request pipe any more. */
static bool no_reader(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	return poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

/* Has the pipe whose read end is @fd no writer left (POLLHUP)? */
static bool no_writer(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 0) == 1 && (p.revents & POLLHUP);
}

/*
 * The attachment over, no reader of req_w and no writer of rep_r left: the
 * proof; waits up to @ms. Both ends are checked: @eof also follows a
 * reply refused (agent_break()), which no EOF proves.
 */
static bool proven_locked(struct agent *a, int64_t ms)
{
	int64_t deadline = mono_ms() + ms;
	while (!a->eof && cond_wait_until(&a->eof_cond, &a->lock, deadline))
		;
	while (a->eof && !(no_reader(a->req_w) && no_writer(a->rep_r)) && mono_ms() < deadline) {
		pthread_mutex_unlock(&a->lock);
		usleep(10000);
		pthread_mutex_lock(&a->lock);
	}
	return a->eof && no_reader(a->req_w) && no_writer(a->rep_r);
}

/*
 * The read memory's part of the proof: no descriptor of it left in a
 * sentry (shmem_held_inside(): what gVisor holds while anything inside
 * maps it or has it open), waited for up to @ms. Without a->lock. True
 * when the agent never had the memory.
 */
static bool shm_let_go(struct agent *a, int64_t ms)
{
	if (a->shm.fd < 0)
		return true;
	int64_t deadline = mono_ms() + ms;
	bool held;
	while ((held = shmem_held_inside(&a->shm)) && mono_ms() < deadline)
		usleep(10000);
	return !held;
}

static int not_proven(const struct agent *a, struct err *e)
{
	return err_set(e, EBUSY,
		       "a process in sandbox %s holds the agent's channel or its read memory, so a "
		       "checkpoint now would not restore",
		       a->cid);
}

int agent_detach(struct agent *a, struct err *e)
{
	pthread_mutex_lock(&a->attach_lock);
	pthread_mutex_lock(&a->lock);
	if (a->rep_r < 0) {
		pthread_mutex_unlock(&a->lock);
		/*
		 * No channel, but the read memory an earlier one had (a checkpoint
		 * refused before, an attach that failed after the hand-over) may
		 * still be held: checked again before every checkpoint. Nobody is
		 * killed: the keeper's pid is of an attachment gone, and may be
		 * another process's by now.
		 */
		bool proven = !e || shm_let_go(a, AGENT_DETACH_WAIT_MS);
		pthread_mutex_unlock(&a->attach_lock);
		return proven ? 0 : not_proven(a, e);
	}
	a->detaching = true;
	/*
	 * Posted requests (writes answered to the kernel already) are let
	 * through first: the DETACH follows them in the channel, but the keeper
	 * that serves them slowly is killed after AGENT_DETACH_WAIT_MS.
	 */
	int64_t posted_deadline = mono_ms() + AGENT_POSTED_WAIT_MS;
	while (a->posted && !a->eof && cond_wait_until(&a->posted_cond, &a->lock, posted_deadline))
		;
	uint32_t tag = tag_next_locked(a);
	pthread_mutex_unlock(&a->lock);
	send_frame(a, tag, WIRE_DETACH, NULL, 0); /* its reply is a tag nobody waits for */
	pthread_mutex_lock(&a->lock);
	bool proven = proven_locked(a, AGENT_DETACH_WAIT_MS);
	int pid = a->keeper_pid;
	pthread_mutex_unlock(&a->lock);
	/* Only before a checkpoint (@e): an agent's end or a failed attach checks no memory. */
	bool checkpoint = e != NULL;
	proven = proven && (!checkpoint || shm_let_go(a, AGENT_DETACH_WAIT_MS));
	if (!proven && pid > 0) {
		warning("agent of %s did not let go of its channel: killing it (pid %d)", a->cid,
			pid);
		runsc_kill_pid(a->rs, a->cid, pid, SIGKILL, NULL);
		pthread_mutex_lock(&a->lock);
		proven = proven_locked(a, AGENT_DETACH_WAIT_MS);
		pthread_mutex_unlock(&a->lock);
		proven = proven && (!checkpoint || shm_let_go(a, AGENT_DETACH_WAIT_MS));
	}
	attachment_close(a);
	pthread_mutex_unlock(&a->attach_lock);
	return proven ? 0 : not_proven(a, e);
}

/* --- exec ------------------------------------------------------------------- */

/* Wait for @s's EXIT until @deadline_ms (0: none); false at the deadline. */
static bool exec_wait_locked(struct agent *a, struct slot *s, int64_t deadline_ms, bool any_stop)
{
	while (!s->done && !(any_stop && s->stopped)) {
		/* Detached, execs wait for the next attach; the keeper is then asked again. */
		int64_t until = deadline_ms ? deadline_ms : mono_ms() + 60000;
		if (!cond_wait_until(&s->cond, &a->lock, until) && deadline_ms)
			return false;
	}
	return true;
}

static void exec_kill(struct agent *a, uint32_t tag)
{
	uint8_t b[4];
	struct wire_out w = {.buf = b, .cap = sizeof(b)};
	wire_put_u32(&w, tag);
	uint32_t kill_tag;
	pthread_mutex_lock(&a->lock);
	kill_tag = tag_next_locked(a);
	pthread_mutex_unlock(&a->lock);
	send_frame(a, kill_tag, WIRE_KILL, b, w.len); /* its reply answers no slot: dropped */
}

int agent_exec(struct agent *a, const char *cmd, agent_out_fn fn, void *arg, int64_t deadline_ms,
	       int *status, struct err *e)
{
	size_t n = strlen(cmd);
	_cleanup_free_ uint8_t *b = malloc(n + 2);
	if (!b)
		return err_set(e, ENOMEM, "exec: out of memory");
	struct wire_out w = {.buf = b, .cap = n + 2};
	wire_put_str(&w, cmd, n);
	if (w.overflow || n > WIRE_CMD_MAX)
		return err_set(e, E2BIG, "exec: the command line is too long");
	pthread_mutex_lock(&a->lock);
	bool up = a->rep_r >= 0 && !a->eof && !a->detaching;
	struct slot *s = up ? slot_take_locked(a, WIRE_EXEC) : NULL;
	if (s)
		s->fn = fn, s->arg = arg;
	uint32_t tag = s ? s->tag : 0;
	pthread_mutex_unlock(&a->lock);
	if (!s && up)
		return err_set(e, EAGAIN, "the agent of %s has %d requests in flight", a->cid,
			       AGENT_INFLIGHT_MAX);
	if (!s)
		return err_set(e, ENOTCONN, "the agent of %s is not attached", a->cid);
	int rc = send_frame(a, tag, WIRE_EXEC, b, w.len);
	pthread_mutex_lock(&a->lock);
	bool ended = rc == 0 && exec_wait_locked(a, s, deadline_ms, true);
	bool stopped = s->stopped && !s->done;
	pthread_mutex_unlock(&a->lock);
	if (rc == 0 && (!ended || stopped)) {
		exec_kill(a, tag);
		pthread_mutex_lock(&a->lock);
		exec_wait_locked(a, s, mono_ms() + 5000, false);
		pthread_mutex_unlock(&a->lock);
		if (!ended)
			rc = -ETIMEDOUT;
	}
	pthread_mutex_lock(&a->lock);
	if (rc == 0)
		rc = s->done ? s->rc : -EIO;
	*status = s->status;
	slot_free_locked(s);
	pthread_mutex_unlock(&a->lock);
	if (rc == -ETIMEDOUT)
		return rc;
	return call_error(a, rc, WIRE_EXEC, e);
}
