/*
 * channel.c - the keeper's end of the channel: the two pipes an attach
 * handed over (inside.h), frames read off one and written on the other.
 * One channel at a time; a newer attach replaces it, EOF or a write that
 * fails ends it, and the files it opened (fs.c) go with it.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/agent/inside/inside.h"

/* The channel: -1 when none is attached; its read memory, NULL if none. */
static int chan_in = -1, chan_out = -1;
static uint8_t *chan_shm;
/* A reply's frame, the largest a frame can be: replies are made in place (channel_body()). */
static uint8_t rep_buf[WIRE_HEADER_SIZE + WIRE_BODY_MAX];

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * Bytes read off the channel and not yet taken: one read() brings a whole
 * request, or several, where reading the header and the body apart cost
 * two (each a trip through the sentry).
 */
static struct {
	uint8_t b[64u << 10];
	size_t at, end;
} inbuf;

/* @n bytes of the channel into @p: what is buffered, then more; a large body straight in. */
static int read_all(int fd, void *p, size_t n)
{
	uint8_t *dst = p;
	while (n) {
		if (inbuf.at < inbuf.end) {
			size_t k = inbuf.end - inbuf.at < n ? inbuf.end - inbuf.at : n;
			memcpy(dst, inbuf.b + inbuf.at, k);
			inbuf.at += k, dst += k, n -= k;
			continue;
		}
		bool direct = n >= sizeof(inbuf.b);
		ssize_t r = direct ? read(fd, dst, n) : read(fd, inbuf.b, sizeof(inbuf.b));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		if (direct)
			dst += r, n -= (size_t)r;
		else
			inbuf.at = 0, inbuf.end = (size_t)r;
	}
	return 0;
}

bool channel_buffered(void)
{
	return chan_in >= 0 && inbuf.at < inbuf.end;
}

int channel_fd(void)
{
	return chan_in;
}

void channel_detach(void)
{
	/* The memory first: once the pipes close, the daemon's proof looks for it. */
	fs_read_memory(NULL);
	if (chan_shm)
		munmap(chan_shm, WIRE_SHM_BYTES);
	chan_shm = NULL;
	if (chan_in >= 0)
		close(chan_in);
	if (chan_out >= 0)
		close(chan_out);
	chan_in = chan_out = -1;
	inbuf.at = inbuf.end = 0;
	fs_close_all();
}

/*
 * @fd mapped, if it is a file of the read memory's size; NULL if not. (The
 * daemon sealed it; gVisor answers no F_GET_SEALS for a host file.)
 */
static uint8_t *shm_map(int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size != WIRE_SHM_BYTES)
		return NULL;
	void *p = mmap(NULL, WIRE_SHM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

void channel_attach(int in, int out, int shm)
{
	channel_detach();
	chan_in = in;
	chan_out = out;
	if (shm >= 0) {
		chan_shm = shm_map(shm);
		close(shm); /* the mapping is all it needs */
		fs_read_memory(chan_shm);
	}
}

uint8_t *channel_shm(void)
{
	return chan_shm;
}

uint8_t *channel_body(void)
{
	return rep_buf + WIRE_HEADER_SIZE;
}

int channel_read(uint8_t *buf, struct wire_header *h)
{
	if (chan_in < 0 || read_all(chan_in, buf, WIRE_HEADER_SIZE) < 0 ||
	    wire_header_get(buf, h) < 0 || read_all(chan_in, buf + WIRE_HEADER_SIZE, h->len) < 0) {
		channel_detach();
		return -1;
	}
	return 0;
}

int channel_send(uint32_t tag, uint16_t op, uint16_t flags, uint32_t err, const void *body,
		 size_t len)
{
	if (chan_out < 0)
		return -1;
	struct wire_header h = {
	    .len = (uint32_t)len, .tag = tag, .op = op, .flags = flags, .err = err};
	wire_header_put(rep_buf, &h);
	if (len && body != channel_body())
		memcpy(channel_body(), body, len);
	if (write_all(chan_out, rep_buf, WIRE_HEADER_SIZE + len) < 0) {
		channel_detach();
		return -1;
	}
	return 0;
}
