/*
 * wire.c - the agent protocol's codec (wire.h tables the layout). Compiled
 * into the daemon and into the agent, so it uses the C library alone.
 */
#include "runtime/agent/wire.h"

#include <errno.h>
#include <string.h>

static void put_le(uint8_t *p, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

void wire_header_put(uint8_t out[WIRE_HEADER_SIZE], const struct wire_header *h)
{
	put_le(out, h->len, 4);
	put_le(out + 4, h->tag, 4);
	put_le(out + 8, h->op, 2);
	put_le(out + 10, h->flags, 2);
	put_le(out + 12, h->err, 4);
}

int wire_header_get(const uint8_t in[WIRE_HEADER_SIZE], struct wire_header *h)
{
	h->len = (uint32_t)get_le(in, 4);
	h->tag = (uint32_t)get_le(in + 4, 4);
	h->op = (uint16_t)get_le(in + 8, 2);
	h->flags = (uint16_t)get_le(in + 10, 2);
	h->err = (uint32_t)get_le(in + 12, 4);
	if (h->len > WIRE_BODY_MAX || h->op == 0 || h->op >= WIRE_OP_END)
		return -1;
	return 0;
}

/* Room for @n more bytes, or none at all: the writer then overflowed. */
static uint8_t *room(struct wire_out *w, size_t n)
{
	if (w->overflow || n > w->cap - w->len) {
		w->overflow = true;
		return NULL;
	}
	uint8_t *p = w->buf + w->len;
	w->len += n;
	return p;
}

static void put_int(struct wire_out *w, uint64_t v, size_t n)
{
	uint8_t *p = room(w, n);
	if (p)
		put_le(p, v, n);
}

void wire_put_u8(struct wire_out *w, uint8_t v)
{
	put_int(w, v, 1);
}

void wire_put_u16(struct wire_out *w, uint16_t v)
{
	put_int(w, v, 2);
}

void wire_put_u32(struct wire_out *w, uint32_t v)
{
	put_int(w, v, 4);
}

void wire_put_u64(struct wire_out *w, uint64_t v)
{
	put_int(w, v, 8);
}

void wire_put_str(struct wire_out *w, const char *s, size_t n)
{
	if (n > UINT16_MAX) {
		w->overflow = true;
		return;
	}
	wire_put_u16(w, (uint16_t)n);
	uint8_t *p = room(w, n);
	if (p && n)
		memcpy(p, s, n);
}

void wire_put_bytes(struct wire_out *w, const void *data, size_t n)
{
	if (n > UINT32_MAX) {
		w->overflow = true;
		return;
	}
	wire_put_u32(w, (uint32_t)n);
	uint8_t *p = room(w, n);
	if (p && n)
		memcpy(p, data, n);
}

void wire_put_attr(struct wire_out *w, const struct wire_attr *a)
{
	wire_put_u32(w, a->mode);
	wire_put_u32(w, a->nlink);
	wire_put_u32(w, a->uid);
	wire_put_u32(w, a->gid);
	wire_put_u64(w, a->size);
	wire_put_u64(w, a->blocks);
	wire_put_u64(w, a->ino);
	wire_put_u64(w, a->rdev);
	for (int i = 0; i < 3; i++) {
		wire_put_u64(w, (uint64_t)a->sec[i]);
		wire_put_u32(w, a->nsec[i]);
	}
}

/* The next @n bytes, or NULL (and @bad) when fewer are left. */
static const uint8_t *take(struct wire_in *r, size_t n)
{
	if (r->bad || n > r->len - r->off) {
		r->bad = true;
		return NULL;
	}
	const uint8_t *p = r->buf + r->off;
	r->off += n;
	return p;
}

static uint64_t get_int(struct wire_in *r, size_t n)
{
	const uint8_t *p = take(r, n);
	return p ? get_le(p, n) : 0;
}

uint8_t wire_get_u8(struct wire_in *r)
{
	return (uint8_t)get_int(r, 1);
}

uint16_t wire_get_u16(struct wire_in *r)
{
	return (uint16_t)get_int(r, 2);
}

uint32_t wire_get_u32(struct wire_in *r)
{
	return (uint32_t)get_int(r, 4);
}

uint64_t wire_get_u64(struct wire_in *r)
{
	return get_int(r, 8);
}

void wire_get_str(struct wire_in *r, size_t max, const char **s, size_t *n)
{
	size_t len = wire_get_u16(r);
	const uint8_t *p = len > max ? NULL : take(r, len);
	if (len > max)
		r->bad = true;
	*s = p ? (const char *)p : "";
	*n = p ? len : 0;
}

void wire_get_bytes(struct wire_in *r, size_t max, const void **data, size_t *n)
{
	size_t len = wire_get_u32(r);
	const uint8_t *p = len > max ? NULL : take(r, len);
	if (len > max)
		r->bad = true;
	*data = p ? (const void *)p : (const void *)"";
	*n = p ? len : 0;
}

void wire_get_attr(struct wire_in *r, struct wire_attr *a)
{
	a->mode = wire_get_u32(r);
	a->nlink = wire_get_u32(r);
	a->uid = wire_get_u32(r);
	a->gid = wire_get_u32(r);
	a->size = wire_get_u64(r);
	a->blocks = wire_get_u64(r);
	a->ino = wire_get_u64(r);
	a->rdev = wire_get_u64(r);
	for (int i = 0; i < 3; i++) {
		a->sec[i] = (int64_t)wire_get_u64(r);
		a->nsec[i] = wire_get_u32(r);
	}
}

bool wire_in_done(const struct wire_in *r)
{
	return !r->bad && r->off == r->len;
}

bool wire_errno_ok(uint32_t err)
{
	static const uint32_t ok[] = {
	    ENOENT,  EEXIST,	   ENOTDIR, EISDIR, ENOTEMPTY, EACCES, EPERM,	EINVAL,
	    EBADF,   ENAMETOOLONG, ELOOP,   EXDEV,  EFBIG,     ENOSPC, EROFS,	EOPNOTSUPP,
	    ETXTBSY, EMLINK,	   EBUSY,   ENXIO,  EMFILE,    ENFILE, EAGAIN,	EINTR,
	    EIO,     ENOMEM,	   EDQUOT,  ERANGE, ESRCH,     E2BIG,  ENOEXEC, ENODATA,
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (err == ok[i])
			return true;
	return false;
}

bool wire_name_ok(const char *s, size_t n)
{
	if (n == 0 || n > WIRE_NAME_MAX || memchr(s, '/', n) || memchr(s, '\0', n))
		return false;
	return !(n == 1 && s[0] == '.') && !(n == 2 && s[0] == '.' && s[1] == '.');
}

bool wire_path_ok(const char *s, size_t n)
{
	if (n > WIRE_PATH_MAX)
		return false;
	size_t start = 0;
	for (size_t i = 0; i <= n && n; i++) {
		if (i < n && s[i] != '/')
			continue;
		if (!wire_name_ok(s + start, i - start))
			return false;
		start = i + 1;
	}
	return true;
}
