#include "fs/pending.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct pending {
	pthread_mutex_t lock;
	fuse_req_t req; /* NULL while in the pool */
	enum pending_reply how;
	size_t size;
	off_t off;
	int shares;
	int rc;
	bool answered;	  /* replied, or claimed by the interrupt */
	bool registering; /* inside fuse_req_interrupt_func() */
	bool interrupted; /* interrupted while registering */
	bool has_data;
	char *data; /* PENDING_BUF: the slice to reply */
	size_t len;
	/* pending_on_interrupt(): work that only waits, dropped on an interrupt. */
	bool (*drop)(void *arg);
	void (*end)(void *arg);
	void *drop_arg;
	struct pending *next; /* the pool's free list */
};

static struct {
	pthread_mutex_t lock;
	struct pending *free;
	unsigned held;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct pending *pool_get(void)
{
	pthread_mutex_lock(&pool.lock);
	struct pending *p = pool.free;
	if (p)
		pool.free = p->next;
	pool.held++;
	pthread_mutex_unlock(&pool.lock);
	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (p) {
		pthread_mutex_init(&p->lock, NULL);
		return p;
	}
	pthread_mutex_lock(&pool.lock);
	pool.held--;
	pthread_mutex_unlock(&pool.lock);
	return NULL;
}

static void pool_put(struct pending *p)
{
	pthread_mutex_lock(&p->lock);
	p->req = NULL;
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_lock(&pool.lock);
	p->next = pool.free;
	pool.free = p;
	pool.held--;
	pthread_mutex_unlock(&pool.lock);
}

unsigned pending_held(void)
{
	pthread_mutex_lock(&pool.lock);
	unsigned n = pool.held;
	pthread_mutex_unlock(&pool.lock);
	return n;
}

struct dropped {
	void (*end)(void *arg);
	void *arg;
};

/* Answered by an interrupt and work that only waits: take it out of its list. */
static struct dropped drop_locked(struct pending *p)
{
	struct dropped d = {0};
	if (!p->answered || !p->drop || !p->drop(p->drop_arg))
		return d;
	d = (struct dropped){p->end, p->drop_arg};
	p->drop = NULL;
	p->end = NULL;
	p->drop_arg = NULL;
	return d;
}

void pending_on_interrupt(struct pending *p, bool (*drop)(void *arg), void (*end)(void *arg),
			  void *arg)
{
	pthread_mutex_lock(&p->lock);
	p->drop = drop;
	p->end = end;
	p->drop_arg = arg;
	pthread_mutex_unlock(&p->lock);
}

void pending_forget(struct pending *p, void *arg)
{
	pthread_mutex_lock(&p->lock);
	if (p->drop_arg == arg) {
		p->drop = NULL;
		p->end = NULL;
		p->drop_arg = NULL;
	}
	pthread_mutex_unlock(&p->lock);
}

/*
 * libfuse calls this from the thread that read the INTERRUPT, possibly
 * just after the request was answered and @p went back to the pool, or
 * from inside fuse_req_interrupt_func() where replying would free the
 * request under libfuse's feet: then pending_start() replies instead.
 */
static void on_interrupt(fuse_req_t req, void *data)
{
	struct pending *p = data;
	bool reply = false;
	struct dropped d = {0};
	pthread_mutex_lock(&p->lock);
	if (p->req == req && !p->answered) {
		if (p->registering) {
			p->interrupted = true;
		} else {
			p->answered = true;
			reply = true;
			d = drop_locked(p);
		}
	}
	pthread_mutex_unlock(&p->lock);
	if (reply)
		fuse_reply_err(req, EINTR);
	if (d.end)
		d.end(d.arg);
}

struct pending *pending_start(fuse_req_t req, enum pending_reply how, size_t size, off_t off)
{
	struct pending *p = pool_get();
	if (!p)
		return NULL;
	pthread_mutex_lock(&p->lock);
	p->req = req;
	p->how = how;
	p->size = size;
	p->off = off;
	p->shares = 1;
	p->rc = 0;
	p->answered = false;
	p->registering = true;
	p->interrupted = false;
	p->has_data = false;
	p->drop = NULL;
	p->end = NULL;
	p->drop_arg = NULL;
	pthread_mutex_unlock(&p->lock);

	fuse_req_interrupt_func(req, on_interrupt, p);

	pthread_mutex_lock(&p->lock);
	p->registering = false;
	bool eintr = p->interrupted && !p->answered;
	p->answered = p->answered || eintr;
	pthread_mutex_unlock(&p->lock);
	if (eintr)
		fuse_reply_err(req, EINTR);
	return p;
}

void pending_hold(struct pending *p)
{
	pthread_mutex_lock(&p->lock);
	p->shares++;
	pthread_mutex_unlock(&p->lock);
}

/* Keep the part of @data the read asked for. */
static int keep_slice(struct pending *p, const char *data, size_t len)
{
	size_t from = (size_t)p->off < len ? (size_t)p->off : len;
	size_t n = len - from < p->size ? len - from : p->size;
	p->data = malloc(n ? n : 1);
	if (!p->data)
		return -ENOMEM;
	memcpy(p->data, data + from, n);
	p->len = n;
	p->has_data = true;
	return 0;
}

static void reply(fuse_req_t req, enum pending_reply how, int rc, size_t size, const char *data,
		  size_t len)
{
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else if (how == PENDING_WRITE)
		fuse_reply_write(req, size);
	else if (how == PENDING_BUF)
		fuse_reply_buf(req, data, len);
	else
		fuse_reply_err(req, 0);
}

static void finish(struct pending *p)
{
	pthread_mutex_lock(&p->lock);
	bool answer = !p->answered;
	p->answered = true;
	fuse_req_t req = p->req;
	enum pending_reply how = p->how;
	int rc = p->rc;
	size_t size = p->size;
	_cleanup_free_ char *data = steal_ptr(p->data);
	size_t len = p->len;
	pthread_mutex_unlock(&p->lock);
	if (answer)
		reply(req, how, rc, size, data, len);
	pool_put(p);
}

void pending_done(struct pending *p, int rc, const char *data, size_t len)
{
	pthread_mutex_lock(&p->lock);
	if (p->how == PENDING_BUF && rc == 0 && data && !p->has_data)
		rc = keep_slice(p, data, len);
	if (rc < 0 && p->rc == 0)
		p->rc = rc;
	/* An interrupt that came before the waiting work was listed. */
	struct dropped d = drop_locked(p);
	bool last = --p->shares == 0;
	pthread_mutex_unlock(&p->lock);
	/* Not last when @d is set: the dropped work still holds its share. */
	if (d.end)
		d.end(d.arg);
	if (last)
		finish(p);
}
