/*
 * fuzz_agent_reply.c - libFuzzer target for what the host reads from a
 * sandbox's agent (runtime/agent/agent_decode.c, wire.c), which sandbox code
 * may replace or impersonate, and for inside_link_contain() (ops_agent.c),
 * which turns the link targets it sends into ones the host kernel follows.
 *
 * The first byte picks what the rest is (its value modulo 8, but '8'; the
 * seeds in corpus/agent_reply begin with an ASCII digit):
 *   0 attr   1 READDIR reply   2 PS reply   3 u32   4 READ reply's data
 *   5 READLINK reply   6 a frame header (its first 16 bytes)
 *   7 a link's path, a NUL, its target
 *   '8' a byte n (modulo WIRE_MORE_MAX + 1), then an OPEN reply with a head
 *     and n WIRE_OPEN_MORE entries
 * An accepted body must give what agent.h promises: an attr with a known
 * type and nanoseconds below a second; names that are names (wire_name_ok);
 * an OPEN's head within WIRE_PEEK_MAX and each of its n entries a regular
 * file of fewer bytes, inside the body, or an errno alone;
 * processes with a pid, a state letter ps knows, a printable
 * NUL-terminated command; data inside the body and within its bound; a
 * target of 1..WIRE_PATH_MAX bytes, NUL-terminated. An accepted header is
 * within its bounds and writes back to the same bytes. A contained link,
 * followed from its directory, never climbs above root/, its ".."s all
 * lead (the kernel walks a ".." after a name from where the name led), and
 * a target that needs no rewriting is kept as the sandbox wrote it.
 */
#include "ops/ops_internal.h"
#include "runtime/agent/agent.h"
#include "runtime/agent/wire.h"
#include "tests/fuzz/fuzz.h"

#include <sys/stat.h>

static void check_attr(const struct wire_attr *a)
{
	for (int i = 0; i < 3; i++)
		FUZZ_CHECK(a->nsec[i] < 1000000000u);
	mode_t t = a->mode & S_IFMT;
	FUZZ_CHECK(t == S_IFREG || t == S_IFDIR || t == S_IFLNK || t == S_IFCHR || t == S_IFBLK ||
		   t == S_IFIFO || t == S_IFSOCK);
}

static int dir_one(const char *name, const struct wire_attr *attr, void *arg)
{
	size_t n = strlen(name);
	FUZZ_CHECK(wire_name_ok(name, n));
	check_attr(attr);
	++*(size_t *)arg;
	return 0;
}

static int ps_one(const struct agent_proc *p, void *arg)
{
	FUZZ_CHECK(p->pid != 0 && p->pid <= (1u << 22) && p->ppid <= (1u << 22));
	FUZZ_CHECK(p->state && strchr("RSDZTtXxKWIP", p->state));
	size_t n = strnlen(p->comm, sizeof(p->comm));
	FUZZ_CHECK(n < sizeof(p->comm));
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(p->comm[i] >= 0x20 && p->comm[i] < 0x7f);
	++*(size_t *)arg;
	return 0;
}

struct more_count {
	uint32_t n;
	const uint8_t *lo, *hi; /* the body */
};

static void more_one(uint32_t i, uint32_t err, const struct wire_attr *attr, const void *data,
		     size_t len, void *arg)
{
	struct more_count *c = arg;
	FUZZ_CHECK(i == c->n);
	c->n++;
	if (err) {
		FUZZ_CHECK(len == 0 && data == NULL);
		return;
	}
	check_attr(attr);
	FUZZ_CHECK(S_ISREG(attr->mode) && len < WIRE_PEEK_MAX);
	FUZZ_CHECK(len == 0 ||
		   ((const uint8_t *)data >= c->lo && (const uint8_t *)data + len <= c->hi));
}

static void fuzz_open(const uint8_t *body, size_t len)
{
	if (len == 0)
		return;
	uint32_t more = body[0] % (WIRE_MORE_MAX + 1), handle;
	struct more_count c = {.lo = body + 1, .hi = body + len};
	struct wire_attr attr;
	const void *head;
	size_t head_len;
	if (agent_decode_open(body + 1, len - 1, &handle, &attr, &head, &head_len, more, more_one,
			      &c) == 0) {
		check_attr(&attr);
		FUZZ_CHECK(head_len <= WIRE_PEEK_MAX && c.n == more);
	} else {
		FUZZ_CHECK(c.n == 0); /* nothing of a body that is not one is handed on */
	}
}

static void fuzz_header(const uint8_t *body, size_t len)
{
	struct wire_header h;
	uint8_t again[WIRE_HEADER_SIZE];
	if (len < WIRE_HEADER_SIZE)
		return;
	if (wire_header_get(body, &h) < 0)
		return;
	FUZZ_CHECK(h.len <= WIRE_BODY_MAX && h.op > 0 && h.op < WIRE_OP_END);
	wire_header_put(again, &h);
	FUZZ_CHECK(memcmp(again, body, WIRE_HEADER_SIZE) == 0);
}

/* The directories between root/ and the link at @path. */
static size_t depth_of(const char *path)
{
	size_t d = 0;
	for (const char *p = path; *p; p++)
		d += *p == '/';
	return d;
}

/* Is @out relative, with its ".."s first and at most @depth of them? */
static bool contained(const char *out, size_t depth)
{
	bool named = false;
	if (out[0] == '/')
		return false;
	for (const char *p = out; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (named || depth == 0)
				return false;
			depth--;
		} else if (n && !(n == 1 && p[0] == '.')) {
			named = true;
		}
		p += n;
		p += strspn(p, "/");
	}
	return true;
}

static void fuzz_link(const uint8_t *body, size_t len)
{
	const uint8_t *nul = memchr(body, '\0', len);
	if (!nul)
		return;
	size_t plen = (size_t)(nul - body), tlen = len - plen - 1;
	/* What ops hands it: the link's own path (wire_path_ok, not ""), a target from READLINK. */
	if (!plen || !wire_path_ok((const char *)body, plen) || !tlen || tlen > WIRE_PATH_MAX ||
	    memchr(nul + 1, '\0', tlen))
		return;
	char *path = fuzz_strndup(body, plen), *target = fuzz_strndup(nul + 1, tlen);
	char out[PATH_MAX];
	memset(out, 0xa5, sizeof(out));
	int rc = inside_link_contain(path, target, out, sizeof(out));
	FUZZ_CHECK(rc == 0 || rc == -1);
	if (rc == 0) {
		FUZZ_CHECK(memchr(out, '\0', sizeof(out)) != NULL);
		FUZZ_CHECK(contained(out, depth_of(path)));
		if (contained(target, depth_of(path)))
			FUZZ_CHECK(strcmp(out, target) == 0);
	}
	free(path);
	free(target);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	const uint8_t *body = data + 1;
	size_t len = size - 1, n = 0;
	struct wire_attr attr;
	uint64_t next;
	uint32_t v;
	const void *p;
	char link[WIRE_PATH_MAX + 1];
	switch (data[0] == '8' ? 8 : data[0] % 8) {
	case 0:
		if (agent_decode_attr(body, len, &attr) == 0) {
			FUZZ_CHECK(len == WIRE_ATTR_SIZE);
			check_attr(&attr);
		}
		break;
	case 1:
		if (agent_decode_dir(body, len, dir_one, &n, &next) == 0)
			FUZZ_CHECK(12 + n * (WIRE_ATTR_SIZE + 3) <= len);
		break;
	case 2:
		if (agent_decode_ps(body, len, ps_one, &n) == 0)
			FUZZ_CHECK(4 + n * 31 <= len); /* 31: a process with no command */
		break;
	case 3:
		FUZZ_CHECK((agent_decode_u32(body, len, &v) == 0) == (len == 4));
		break;
	case 4:
		/* The asked-for count from the first byte's high bits: short bounds are met too. */
		if (agent_decode_data(body, len, (data[0] >> 3) * 64u, &p, &n) == 0) {
			FUZZ_CHECK(n <= (data[0] >> 3) * 64u && len == 4 + n);
			FUZZ_CHECK(n == 0 || (const uint8_t *)p == body + 4);
		}
		break;
	case 5:
		if (agent_decode_link(body, len, link, sizeof(link)) == 0) {
			size_t l = strlen(link);
			FUZZ_CHECK(l >= 1 && l <= WIRE_PATH_MAX && len == 2 + l);
		}
		break;
	case 6:
		fuzz_header(body, len);
		break;
	case 8:
		fuzz_open(body, len);
		break;
	default:
		fuzz_link(body, len);
		break;
	}
	return 0;
}
