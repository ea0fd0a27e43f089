/*
 * agent_decode.c - the host's decoders of the agent's reply bodies. The
 * bytes come from the sandbox: every field is bounded and checked here, and
 * a body must be read to its end. tests/fuzz/fuzz_agent_reply.c runs these.
 */
#include "runtime/agent/agent.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

/* An attr's values: nanoseconds below a second, a type the kernel knows. */
static bool attr_ok(const struct wire_attr *attr)
{
	for (int i = 0; i < 3; i++)
		if (attr->nsec[i] >= 1000000000u)
			return false;
	switch (attr->mode & S_IFMT) {
	case S_IFREG:
	case S_IFDIR:
	case S_IFLNK:
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
	case S_IFSOCK:
		return true;
	default:
		return false;
	}
}

int agent_decode_attr(const uint8_t *body, size_t len, struct wire_attr *attr)
{
	struct wire_in in = {.buf = body, .len = len};
	wire_get_attr(&in, attr);
	return wire_in_done(&in) && attr_ok(attr) ? 0 : -EPROTO;
}

int agent_decode_dir(const uint8_t *body, size_t len, agent_dir_fn fn, void *arg, uint64_t *next)
{
	struct wire_in in = {.buf = body, .len = len};
	*next = wire_get_u64(&in);
	uint32_t n = wire_get_u32(&in);
	if (len > WIRE_DIR_BYTES_MAX + 12)
		return -EPROTO;
	for (uint32_t i = 0; i < n && !in.bad; i++) {
		struct wire_attr attr;
		const char *s;
		size_t slen;
		char name[WIRE_NAME_MAX + 1];
		wire_get_attr(&in, &attr);
		wire_get_str(&in, WIRE_NAME_MAX, &s, &slen);
		if (in.bad || !wire_name_ok(s, slen) || !attr_ok(&attr))
			return -EPROTO;
		memcpy(name, s, slen);
		name[slen] = '\0';
		int rc = fn(name, &attr, arg);
		if (rc)
			return rc < 0 ? rc : 0;
	}
	return wire_in_done(&in) ? 0 : -EPROTO;
}

/* Printable ASCII only: the line goes to a terminal. */
static void comm_copy(char *out, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	out[n] = '\0';
}

int agent_decode_ps(const uint8_t *body, size_t len, agent_ps_fn fn, void *arg)
{
	struct wire_in in = {.buf = body, .len = len};
	uint32_t n = wire_get_u32(&in);
	if (n > WIRE_PS_MAX)
		return -EPROTO;
	for (uint32_t i = 0; i < n && !in.bad; i++) {
		struct agent_proc p = {0};
		const char *s;
		size_t slen;
		p.pid = wire_get_u32(&in);
		p.ppid = wire_get_u32(&in);
		p.uid = wire_get_u32(&in);
		p.state = (char)wire_get_u8(&in);
		p.rss = wire_get_u64(&in);
		p.cpu_ms = wire_get_u64(&in);
		wire_get_str(&in, WIRE_COMM_MAX - 1, &s, &slen);
		if (in.bad || !strchr("RSDZTtXxKWIP", p.state) || !p.state || p.pid == 0 ||
		    p.pid > (1u << 22) || p.ppid > (1u << 22))
			return -EPROTO;
		comm_copy(p.comm, s, slen);
		int rc = fn(&p, arg);
		if (rc)
			return rc < 0 ? rc : 0;
	}
	return wire_in_done(&in) ? 0 : -EPROTO;
}

int agent_decode_u32(const uint8_t *body, size_t len, uint32_t *v)
{
	struct wire_in in = {.buf = body, .len = len};
	*v = wire_get_u32(&in);
	return wire_in_done(&in) ? 0 : -EPROTO;
}

int agent_decode_data(const uint8_t *body, size_t len, size_t max, const void **data, size_t *n)
{
	struct wire_in in = {.buf = body, .len = len};
	wire_get_bytes(&in, max, data, n);
	return wire_in_done(&in) ? 0 : -EPROTO;
}

/* WIRE_OPEN_MORE's @n entries off @in; @fn (NULL: only check them) gets each. */
static int more_entries(struct wire_in *in, uint32_t n, agent_more_fn fn, void *arg)
{
	for (uint32_t i = 0; i < n; i++) {
		struct wire_attr attr = {0};
		const void *data = NULL;
		size_t len = 0;
		uint32_t err = wire_get_u32(in);
		if (!err) {
			/* Whole: fewer than WIRE_PEEK_MAX bytes, of a regular file. */
			wire_get_attr(in, &attr);
			wire_get_bytes(in, WIRE_PEEK_MAX - 1, &data, &len);
			if (!attr_ok(&attr) || !S_ISREG(attr.mode))
				return -EPROTO;
		}
		if (in->bad)
			return -EPROTO;
		if (fn)
			fn(i, err, &attr, data, len, arg);
	}
	return 0;
}

int agent_decode_open(const uint8_t *body, size_t len, uint32_t *handle, struct wire_attr *attr,
		      const void **head, size_t *head_len, uint32_t more, agent_more_fn fn,
		      void *arg)
{
	struct wire_in in = {.buf = body, .len = len};
	*handle = wire_get_u32(&in);
	wire_get_attr(&in, attr);
	if (head)
		wire_get_bytes(&in, WIRE_PEEK_MAX, head, head_len);
	size_t more_at = in.off;
	if (more_entries(&in, more, NULL, NULL) < 0 || !wire_in_done(&in) || !attr_ok(attr))
		return -EPROTO;
	/* Only a body checked to its end is handed on. */
	in.off = more_at;
	if (fn)
		more_entries(&in, more, fn, arg);
	return 0;
}

int agent_decode_link(const uint8_t *body, size_t len, char *buf, size_t size)
{
	struct wire_in in = {.buf = body, .len = len};
	const char *s;
	size_t n;
	wire_get_str(&in, WIRE_PATH_MAX, &s, &n);
	if (!wire_in_done(&in) || n == 0 || n >= size || memchr(s, '\0', n))
		return -EPROTO;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return 0;
}
