/*
 * The agent's protocol as the host reads it: runtime/agent/wire.c (the
 * codec, the header's bounds, names and paths, errnos), agent_decode.c (the
 * decoders of untrusted reply bodies) and ops_agent.c's
 * inside_link_contain(), which rewrites a link the sandbox made so that the
 * host kernel, following it, never leaves root/.
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/agent/agent.h"
#include "runtime/agent/wire.h"
#include "tests/unit/t.h"

static bool attr_eq(const struct wire_attr *a, const struct wire_attr *b)
{
	bool eq = a->mode == b->mode && a->nlink == b->nlink && a->uid == b->uid &&
		  a->gid == b->gid && a->size == b->size && a->blocks == b->blocks &&
		  a->ino == b->ino && a->rdev == b->rdev;
	for (int i = 0; i < 3; i++)
		eq = eq && a->sec[i] == b->sec[i] && a->nsec[i] == b->nsec[i];
	return eq;
}

/* --- the codec ------------------------------------------------------------- */

static struct wire_attr some_attr(void)
{
	struct wire_attr a = {
	    .mode = S_IFREG | 0644,
	    .nlink = 2,
	    .uid = 1000,
	    .gid = 65534,
	    .size = 1ull << 40,
	    .blocks = 8,
	    .ino = UINT64_MAX,
	    .rdev = 0x0801,
	    .sec = {-1, 0, INT64_MAX},
	    .nsec = {999999999, 0, 1},
	};
	return a;
}

static void test_round_trip(void)
{
	uint8_t buf[256];
	struct wire_out w = {.buf = buf, .cap = sizeof(buf)};
	struct wire_attr a = some_attr(), b;
	wire_put_u8(&w, 0xfe);
	wire_put_u16(&w, 0xbeef);
	wire_put_u32(&w, 0xdeadbeef);
	wire_put_u64(&w, 0x0123456789abcdefull);
	wire_put_str(&w, "hello", 5);
	wire_put_str(&w, "", 0);
	wire_put_bytes(&w, "\0\1\2", 3);
	wire_put_attr(&w, &a);
	CHECK(!w.overflow);
	CHECK(w.len == 1 + 2 + 4 + 8 + 7 + 2 + 7 + WIRE_ATTR_SIZE);
	/* Little-endian on the wire, whatever the host. */
	CHECK(buf[1] == 0xef && buf[2] == 0xbe && buf[3] == 0xef && buf[6] == 0xde);

	struct wire_in r = {.buf = buf, .len = w.len};
	const char *s;
	const void *p;
	size_t n;
	CHECK(wire_get_u8(&r) == 0xfe);
	CHECK(wire_get_u16(&r) == 0xbeef);
	CHECK(wire_get_u32(&r) == 0xdeadbeef);
	CHECK(wire_get_u64(&r) == 0x0123456789abcdefull);
	wire_get_str(&r, 5, &s, &n);
	CHECK(n == 5 && memcmp(s, "hello", 5) == 0);
	wire_get_str(&r, 5, &s, &n);
	CHECK(n == 0);
	wire_get_bytes(&r, 3, &p, &n);
	CHECK(n == 3 && memcmp(p, "\0\1\2", 3) == 0);
	CHECK(!wire_in_done(&r)); /* the attr is left */
	wire_get_attr(&r, &b);
	CHECK(wire_in_done(&r));
	CHECK(attr_eq(&a, &b));
	/* Past the end: zero, and bad from then on. */
	CHECK(wire_get_u32(&r) == 0 && r.bad && !wire_in_done(&r));
}

static void test_overflow(void)
{
	uint8_t buf[8];
	struct wire_out w = {.buf = buf, .cap = sizeof(buf)};
	wire_put_u32(&w, 1);
	wire_put_u64(&w, 2); /* does not fit: nothing written */
	CHECK(w.overflow && w.len == 4);
	wire_put_u8(&w, 3); /* would fit, but the writer has overflowed */
	CHECK(w.len == 4);

	struct wire_out w2 = {.buf = buf, .cap = sizeof(buf)};
	wire_put_str(&w2, "123456789", 9); /* the length fits, the bytes not */
	CHECK(w2.overflow);
	struct wire_out w3 = {.buf = buf, .cap = sizeof(buf)};
	wire_put_str(&w3, "x", (size_t)UINT16_MAX + 1);
	CHECK(w3.overflow && w3.len == 0);
}

static void test_header(void)
{
	uint8_t raw[WIRE_HEADER_SIZE];
	struct wire_header h = {.len = WIRE_BODY_MAX,
				.tag = 77,
				.op = WIRE_PS,
				.flags = WIRE_F_MORE,
				.err = ENOENT},
			   g;
	wire_header_put(raw, &h);
	CHECK(raw[0] == (WIRE_BODY_MAX & 0xff) && raw[4] == 77 && raw[8] == WIRE_PS);
	CHECK(wire_header_get(raw, &g) == 0);
	CHECK(memcmp(&h, &g, sizeof(h)) == 0);

	h.len = WIRE_BODY_MAX + 1;
	wire_header_put(raw, &h);
	CHECK(wire_header_get(raw, &g) == -1);
	h.len = UINT32_MAX;
	wire_header_put(raw, &h);
	CHECK(wire_header_get(raw, &g) == -1);
	h.len = 0;
	h.op = 0;
	wire_header_put(raw, &h);
	CHECK(wire_header_get(raw, &g) == -1);
	h.op = WIRE_OP_END;
	wire_header_put(raw, &h);
	CHECK(wire_header_get(raw, &g) == -1);
	h.op = 0xffff;
	wire_header_put(raw, &h);
	CHECK(wire_header_get(raw, &g) == -1);
	h.op = WIRE_OP_END - 1;
	wire_header_put(raw, &h);
	CHECK(wire_header_get(raw, &g) == 0 && g.op == WIRE_READ_SHM);
	h.op = WIRE_HELLO;
	wire_header_put(raw, &h);
	CHECK(wire_header_get(raw, &g) == 0 && g.len == 0);
}

static void test_in_done(void)
{
	const uint8_t five[5] = {1, 0, 0, 0, 9};
	struct wire_in r = {.buf = five, .len = 5};
	CHECK(wire_get_u32(&r) == 1);
	CHECK(!wire_in_done(&r)); /* a trailing byte */

	struct wire_in s = {.buf = five, .len = 3};
	CHECK(wire_get_u32(&s) == 0 && s.bad && !wire_in_done(&s)); /* short */

	/* A string whose length says more than the body holds, and one past its max. */
	const uint8_t str[] = {4, 0, 'a', 'b', 'c'};
	const char *p;
	size_t n;
	struct wire_in t = {.buf = str, .len = sizeof(str)};
	wire_get_str(&t, 100, &p, &n);
	CHECK(t.bad && n == 0 && p && !wire_in_done(&t));
	const uint8_t str2[] = {3, 0, 'a', 'b', 'c'};
	struct wire_in u = {.buf = str2, .len = sizeof(str2)};
	wire_get_str(&u, 2, &p, &n);
	CHECK(u.bad && n == 0 && !wire_in_done(&u));
	const uint8_t bytes[] = {0xff, 0xff, 0xff, 0xff, 'a'};
	const void *d;
	struct wire_in v = {.buf = bytes, .len = sizeof(bytes)};
	wire_get_bytes(&v, SIZE_MAX, &d, &n);
	CHECK(v.bad && n == 0 && !wire_in_done(&v));
	struct wire_in empty = {.buf = NULL, .len = 0};
	CHECK(wire_in_done(&empty));
}

static void test_names_paths(void)
{
	char name[WIRE_NAME_MAX + 1];
	memset(name, 'n', sizeof(name));
	CHECK(wire_name_ok("a", 1) && wire_name_ok("...", 3) && wire_name_ok(".x", 2));
	CHECK(wire_name_ok(name, WIRE_NAME_MAX));
	CHECK(!wire_name_ok(name, WIRE_NAME_MAX + 1));
	CHECK(!wire_name_ok("", 0) && !wire_name_ok(".", 1) && !wire_name_ok("..", 2));
	CHECK(!wire_name_ok("a/b", 3) && !wire_name_ok("a\0b", 3) && !wire_name_ok("/", 1));

	CHECK(wire_path_ok("", 0) && wire_path_ok("a", 1) && wire_path_ok("a/b/c", 5));
	CHECK(!wire_path_ok(".", 1) && !wire_path_ok("..", 2) && !wire_path_ok("a/../b", 6));
	CHECK(!wire_path_ok("a/./b", 5) && !wire_path_ok("a//b", 4) && !wire_path_ok("/a", 2));
	CHECK(!wire_path_ok("a/", 2) && !wire_path_ok("/", 1) && !wire_path_ok("a\0b", 3));
	char path[WIRE_PATH_MAX + 2];
	memset(path, 'p', sizeof(path));
	for (size_t i = WIRE_NAME_MAX; i < sizeof(path); i += WIRE_NAME_MAX + 1)
		path[i] = '/';
	CHECK(wire_path_ok(path, WIRE_PATH_MAX) || path[WIRE_PATH_MAX - 1] == '/');
	CHECK(!wire_path_ok(path, WIRE_PATH_MAX + 1));
	CHECK(!wire_path_ok(name, WIRE_NAME_MAX + 1)); /* one name of 256 bytes */

	CHECK(wire_errno_ok(ENOENT) && wire_errno_ok(EACCES) && wire_errno_ok(ENODATA));
	CHECK(!wire_errno_ok(0) && !wire_errno_ok(EFAULT) && !wire_errno_ok(ENOTCONN));
	CHECK(!wire_errno_ok(4096) && !wire_errno_ok(UINT32_MAX));
}

/* --- the decoders ------------------------------------------------------------ */

static void test_decode_attr(void)
{
	uint8_t buf[WIRE_ATTR_SIZE + 1];
	struct wire_out w = {.buf = buf, .cap = sizeof(buf)};
	struct wire_attr a = some_attr(), b;
	wire_put_attr(&w, &a);
	CHECK(agent_decode_attr(buf, w.len, &b) == 0 && attr_eq(&a, &b));
	CHECK(agent_decode_attr(buf, w.len - 1, &b) == -EPROTO);
	CHECK(agent_decode_attr(buf, w.len + 1, &b) == -EPROTO);
	static const uint32_t types[] = {S_IFDIR, S_IFLNK, S_IFCHR, S_IFBLK, S_IFIFO, S_IFSOCK};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		a.mode = types[i] | 0755;
		w.len = 0;
		wire_put_attr(&w, &a);
		CHECK(agent_decode_attr(buf, w.len, &b) == 0);
	}
	a.mode = 0644; /* no type */
	w.len = 0;
	wire_put_attr(&w, &a);
	CHECK(agent_decode_attr(buf, w.len, &b) == -EPROTO);
	a.mode = 0170000 | 0644; /* all type bits */
	w.len = 0;
	wire_put_attr(&w, &a);
	CHECK(agent_decode_attr(buf, w.len, &b) == -EPROTO);
	a = some_attr();
	a.nsec[2] = 1000000000;
	w.len = 0;
	wire_put_attr(&w, &a);
	CHECK(agent_decode_attr(buf, w.len, &b) == -EPROTO);
}

struct seen {
	int n;
	char names[4][WIRE_NAME_MAX + 1];
};

static int dir_one(const char *name, const struct wire_attr *attr, void *arg)
{
	struct seen *s = arg;
	(void)attr;
	if (s->n < 4)
		snprintf(s->names[s->n], sizeof(s->names[0]), "%s", name);
	s->n++;
	return 0;
}

/* A READDIR reply of @count saying @claimed entries, named @names. */
static size_t dir_body(uint8_t *buf, size_t cap, uint32_t claimed, const char *const *names,
		       int count)
{
	struct wire_out w = {.buf = buf, .cap = cap};
	struct wire_attr a = some_attr();
	wire_put_u64(&w, 42);
	wire_put_u32(&w, claimed);
	for (int i = 0; i < count; i++) {
		wire_put_attr(&w, &a);
		wire_put_str(&w, names[i], strlen(names[i]));
	}
	return w.len;
}

static void test_decode_dir(void)
{
	uint8_t buf[1024];
	const char *good[] = {"a", "b.txt"};
	struct seen s = {0};
	uint64_t next = 0;
	size_t len = dir_body(buf, sizeof(buf), 2, good, 2);
	CHECK(agent_decode_dir(buf, len, dir_one, &s, &next) == 0);
	CHECK(s.n == 2 && next == 42);
	CHECK_STR(s.names[0], "a");
	CHECK_STR(s.names[1], "b.txt");

	s.n = 0;
	len = dir_body(buf, sizeof(buf), 3, good, 2); /* says 3, holds 2 */
	CHECK(agent_decode_dir(buf, len, dir_one, &s, &next) == -EPROTO);
	len = dir_body(buf, sizeof(buf), 1, good, 2); /* says 1, holds 2 */
	CHECK(agent_decode_dir(buf, len, dir_one, &s, &next) == -EPROTO);
	len = dir_body(buf, sizeof(buf), UINT32_MAX, good, 2);
	CHECK(agent_decode_dir(buf, len, dir_one, &s, &next) == -EPROTO);
	static const char *const bad[] = {"a/b", ".", "..", "", "aXb"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *one[] = {bad[i]};
		len = dir_body(buf, sizeof(buf), 1, one, 1);
		if (i == 4) /* a NUL in the name */
			buf[len - 2] = '\0';
		CHECK_MSG(agent_decode_dir(buf, len, dir_one, &s, &next) == -EPROTO, "name %zu", i);
	}
	len = dir_body(buf, sizeof(buf), 0, good, 0);
	s.n = 0;
	CHECK(agent_decode_dir(buf, len, dir_one, &s, &next) == 0 && s.n == 0);
	CHECK(agent_decode_dir(buf, 11, dir_one, &s, &next) == -EPROTO);
}

struct procs {
	int n;
	struct agent_proc last;
};

static int ps_one(const struct agent_proc *p, void *arg)
{
	struct procs *ps = arg;
	ps->n++;
	ps->last = *p;
	return 0;
}

static size_t ps_body(uint8_t *buf, size_t cap, uint32_t pid, uint8_t state, const char *comm,
		      size_t comm_len)
{
	struct wire_out w = {.buf = buf, .cap = cap};
	wire_put_u32(&w, 1);
	wire_put_u32(&w, pid);
	wire_put_u32(&w, 1);
	wire_put_u32(&w, 0);
	wire_put_u8(&w, state);
	wire_put_u64(&w, 4096 * 1024);
	wire_put_u64(&w, 1500);
	wire_put_str(&w, comm, comm_len);
	return w.len;
}

static void test_decode_ps(void)
{
	uint8_t buf[1024];
	struct procs ps = {0};
	size_t len = ps_body(buf, sizeof(buf), 7, 'S', "sleep 1000", 10);
	CHECK(agent_decode_ps(buf, len, ps_one, &ps) == 0 && ps.n == 1);
	CHECK(ps.last.pid == 7 && ps.last.ppid == 1 && ps.last.state == 'S');
	CHECK(ps.last.rss == 4096 * 1024 && ps.last.cpu_ms == 1500);
	CHECK_STR(ps.last.comm, "sleep 1000");
	CHECK(agent_decode_ps(buf, len - 1, ps_one, &ps) == -EPROTO);
	CHECK(agent_decode_ps(buf, len + 1, ps_one, &ps) == -EPROTO);

	len = ps_body(buf, sizeof(buf), 7, 'S', "a\x01\x1b[2J\x7f\xff", 8);
	CHECK(agent_decode_ps(buf, len, ps_one, &ps) == 0);
	CHECK_STR(ps.last.comm, "a??[2J??");
	len = ps_body(buf, sizeof(buf), 7, 'S', "a\0b", 3);
	CHECK(agent_decode_ps(buf, len, ps_one, &ps) == 0);
	CHECK_STR(ps.last.comm, "a?b");

	CHECK(agent_decode_ps(buf, ps_body(buf, sizeof(buf), 7, 'Q', "x", 1), ps_one, &ps) ==
	      -EPROTO);
	CHECK(agent_decode_ps(buf, ps_body(buf, sizeof(buf), 7, 0, "x", 1), ps_one, &ps) ==
	      -EPROTO);
	CHECK(agent_decode_ps(buf, ps_body(buf, sizeof(buf), 7, 's', "x", 1), ps_one, &ps) ==
	      -EPROTO);
	CHECK(agent_decode_ps(buf, ps_body(buf, sizeof(buf), 0, 'R', "x", 1), ps_one, &ps) ==
	      -EPROTO);
	CHECK(agent_decode_ps(buf, ps_body(buf, sizeof(buf), (1u << 22) + 1, 'R', "x", 1), ps_one,
			      &ps) == -EPROTO);
	char comm[WIRE_COMM_MAX];
	memset(comm, 'c', sizeof(comm));
	CHECK(agent_decode_ps(buf, ps_body(buf, sizeof(buf), 7, 'R', comm, WIRE_COMM_MAX - 1),
			      ps_one, &ps) == 0);
	CHECK(strlen(ps.last.comm) == WIRE_COMM_MAX - 1);
	CHECK(agent_decode_ps(buf, ps_body(buf, sizeof(buf), 7, 'R', comm, WIRE_COMM_MAX), ps_one,
			      &ps) == -EPROTO);

	/* A count past WIRE_PS_MAX, and one past what the body holds. */
	struct wire_out w = {.buf = buf, .cap = sizeof(buf)};
	wire_put_u32(&w, WIRE_PS_MAX + 1);
	CHECK(agent_decode_ps(buf, w.len, ps_one, &ps) == -EPROTO);
	len = ps_body(buf, sizeof(buf), 7, 'R', "x", 1);
	buf[0] = 2;
	CHECK(agent_decode_ps(buf, len, ps_one, &ps) == -EPROTO);
	buf[0] = 0;
	ps.n = 0;
	CHECK(agent_decode_ps(buf, 4, ps_one, &ps) == 0 && ps.n == 0);
}

static void test_decode_small(void)
{
	const uint8_t u[5] = {0x78, 0x56, 0x34, 0x12, 0};
	uint32_t v;
	CHECK(agent_decode_u32(u, 4, &v) == 0 && v == 0x12345678);
	CHECK(agent_decode_u32(u, 5, &v) == -EPROTO && agent_decode_u32(u, 3, &v) == -EPROTO);

	const uint8_t data[] = {3, 0, 0, 0, 'a', 'b', 'c', 'd'};
	const void *d;
	size_t n;
	CHECK(agent_decode_data(data, 7, 3, &d, &n) == 0 && n == 3 && memcmp(d, "abc", 3) == 0);
	CHECK(agent_decode_data(data, 7, 2, &d, &n) == -EPROTO); /* past the asked-for count */
	CHECK(agent_decode_data(data, 8, 3, &d, &n) == -EPROTO);
	CHECK(agent_decode_data(data, 6, 3, &d, &n) == -EPROTO);

	char buf[8];
	const uint8_t link[] = {3, 0, '/', 'e', 't'};
	CHECK(agent_decode_link(link, 5, buf, sizeof(buf)) == 0);
	CHECK_STR(buf, "/et");
	CHECK(agent_decode_link(link, 5, buf, 3) == -EPROTO); /* no room for the NUL */
	CHECK(agent_decode_link(link, 4, buf, sizeof(buf)) == -EPROTO);
	const uint8_t empty[] = {0, 0};
	CHECK(agent_decode_link(empty, 2, buf, sizeof(buf)) == -EPROTO);
	const uint8_t nul[] = {2, 0, 'a', '\0'};
	CHECK(agent_decode_link(nul, 4, buf, sizeof(buf)) == -EPROTO);
}

/* --- inside_link_contain() ----------------------------------------------------- */

/* Directories between root/ and the link at @link_path. */
static int dir_depth(const char *link_path)
{
	int d = 0;
	for (const char *p = link_path; *p; p++)
		d += *p == '/';
	return d;
}

/* Does @out, followed lexically from the link's directory @depth below root/, stay under it? */
static bool lexically_inside(const char *out, int depth)
{
	if (out[0] == '/')
		return false;
	for (const char *p = out; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (--depth < 0)
				return false;
		} else if (n && !(n == 1 && p[0] == '.')) {
			depth++;
		}
		p += n;
		p += strspn(p, "/");
	}
	return true;
}

/*
 * A pretend tree under root/ for the kernel's walk: every name is a
 * directory but those @links name, whose targets the sandbox wrote;
 * readlink() hands out inside_link_contain() of them, as ops does.
 */
#define LINKS_MAX 16
#define WALK_DEPTH_MAX 48
struct tree {
	int n;
	char path[LINKS_MAX][32];
	char target[LINKS_MAX][64];
};

struct walk {
	const struct tree *t;
	char at[WALK_DEPTH_MAX][8]; /* where the walk is, below root/ */
	int depth, follows;
	bool escaped, stopped;
};

static const char *link_of(const struct walk *w, const char *name, size_t n)
{
	char path[WALK_DEPTH_MAX * 9 + 8] = "";
	for (int i = 0; i < w->depth; i++)
		strcat(strcat(path, w->at[i]), "/");
	strncat(path, name, n);
	for (int i = 0; i < w->t->n; i++)
		if (strcmp(w->t->path[i], path) == 0)
			return w->t->target[i];
	return NULL;
}

/* Walk @path from where @w is, as the kernel does: ".." is the parent of where it is. */
static void walk(struct walk *w, const char *path)
{
	for (const char *p = path; *p && !w->escaped && !w->stopped;) {
		size_t n = strcspn(p, "/");
		const char *raw = n ? link_of(w, p, n) : NULL;
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (w->depth-- == 0)
				w->escaped = true;
		} else if (raw) {
			char lp[WALK_DEPTH_MAX * 9 + 8] = "", out[256];
			for (int i = 0; i < w->depth; i++)
				strcat(strcat(lp, w->at[i]), "/");
			strncat(lp, p, n);
			if (++w->follows > 40 || inside_link_contain(lp, raw, out, sizeof(out)) < 0)
				w->stopped = true; /* ELOOP, ENAMETOOLONG */
			else if (out[0] == '/')
				w->escaped = true;
			else
				walk(w, out);
		} else if (n && !(n == 1 && p[0] == '.')) {
			if (w->depth == WALK_DEPTH_MAX || n >= sizeof(w->at[0]))
				w->stopped = true;
			else
				snprintf(w->at[w->depth++], sizeof(w->at[0]), "%.*s", (int)n, p);
		}
		p += n;
		p += strspn(p, "/");
	}
}

static bool walk_escapes(const struct tree *t, const char *path)
{
	struct walk w = {.t = t};
	walk(&w, path);
	return w.escaped;
}

static void test_link_table(void)
{
	static const struct {
		const char *link, *target, *want;
	} cases[] = {
	    {"l", "/etc/shadow", "etc/shadow"},
	    {"a/l", "/etc/shadow", "../etc/shadow"},
	    {"a/b/c/l", "/etc/shadow", "../../../etc/shadow"},
	    {"l", "../../../../etc/shadow", "etc/shadow"},
	    {"a/l", "../../../../etc/shadow", "../etc/shadow"},
	    {"a/b/c/l", "../../../../etc/shadow", "../../../etc/shadow"},
	    {"a/b/c/l", "../../../etc/shadow", "../../../etc/shadow"}, /* stays: kept */
	    {"l", "/", "."},
	    {"a/l", "/", ".."},
	    {"a/b/l", "/", "../.."},
	    {"a/b/l", "//", "../.."},
	    {"l", "..", "."},
	    {"a/l", "../..", ".."},
	    {"l", "x", "x"},
	    {"a/l", "../x", "../x"},
	    {"a/b/l", "c/d", "c/d"},
	    {"l", "./x/./y", "./x/./y"},
	    {"l", "", ""},
	    {"l", ".", "."},
	    {"a/b/l", "/a/./b//c/", "../../a/b/c"},
	    {"a/b/l", "/x/../y", "../../y"},
	    /* A ".." after a name climbs from where the name led (a link to "."?): resolved. */
	    {"l", "x/..", "."},
	    {"a/l", "x/../..", ".."},
	    {"a/l", "x/../y", "../a/y"},
	    {"a/b/l", "../x/../../y", "../../y"},
	};
	char out[WIRE_PATH_MAX + 1];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = inside_link_contain(cases[i].link, cases[i].target, out, sizeof(out));
		CHECK_MSG(rc == 0 && strcmp(out, cases[i].want) == 0,
			  "%s -> %s: rc %d, \"%s\", want \"%s\"", cases[i].link, cases[i].target,
			  rc, rc == 0 ? out : "", cases[i].want);
		CHECK_MSG(lexically_inside(out, dir_depth(cases[i].link)), "%s -> %s climbs: %s",
			  cases[i].link, cases[i].target, out);
	}

	/* Too long for the buffer: -1, whichever way it is written. */
	CHECK(inside_link_contain("a/b/l", "/etc", out, 9) == -1); /* "../../etc" takes 10 */
	CHECK(inside_link_contain("a/b/l", "/etc", out, 11) == 0);
	CHECK_STR(out, "../../etc");
	CHECK(inside_link_contain("l", "abcdef", out, 6) == -1);
	CHECK(inside_link_contain("l", "abcdef", out, 7) == 0);
	CHECK(inside_link_contain("a/b/l", "/", out, 5) == -1); /* "../.." is 6 */
	CHECK(inside_link_contain("l", "/", out, 1) == -1);
	/* More components than a path holds. */
	char *lp = malloc(2600), *tg = malloc(2600);
	memset(lp, 'a', 2500);
	strcpy(lp + 2500, "/l");
	strcpy(tg, "x/../");
	memset(tg + 5, 'b', 2500);
	tg[2505] = '\0';
	CHECK(inside_link_contain(lp, tg, out, sizeof(out)) == -1);
	free(lp);
	free(tg);
}

/* The escape of a link to root/ itself: "x" -> ".", then "y" -> "x/..". */
static void test_link_chain(void)
{
	struct tree t = {.n = 2};
	strcpy(t.path[0], "x");
	strcpy(t.target[0], ".");
	strcpy(t.path[1], "y");
	strcpy(t.target[1], "x/..");
	CHECK(!walk_escapes(&t, "x/x/x"));
	CHECK(!walk_escapes(&t, "y"));
	CHECK(!walk_escapes(&t, "y/etc/shadow"));
	CHECK(!walk_escapes(&t, "a/b/../y/.."));
	CHECK(walk_escapes(&t, "..")); /* the walker can tell */
	CHECK(walk_escapes(&t, "x/.."));
	/* One level down: "a/x" -> "..", "a/y" -> "x/../..". */
	strcpy(t.path[0], "a/x");
	strcpy(t.target[0], "..");
	strcpy(t.path[1], "a/y");
	strcpy(t.target[1], "x/../..");
	CHECK(!walk_escapes(&t, "a/y"));
	CHECK(!walk_escapes(&t, "a/y/a/y/a/y"));
}

static const char *const comp[] = {"..", ".", "", "a", "b", "x", "y", "z"};

static void random_path(char *out, size_t size, int max_comps, bool may_be_absolute)
{
	int n = 1 + rand() % max_comps;
	out[0] = '\0';
	if (may_be_absolute && rand() % 5 == 0)
		strcat(out, "/");
	for (int i = 0; i < n && strlen(out) + 4 < size; i++) {
		if (i)
			strcat(out, "/");
		strcat(out, comp[rand() % 8]);
	}
}

static void test_link_random(void)
{
	static const char *const dirs[] = {"", "a/", "a/b/", "b/", "a/a/b/"};
	static const char *const names[] = {"x", "y", "z"};
	char out[WIRE_PATH_MAX + 1];
	int climbed = 0, escaped = 0, contained = 0, walks = 0;
	srand(23);
	for (int round = 0; round < 4000; round++) {
		/* One link, lexically. */
		char lp[64], tg[64];
		snprintf(lp, sizeof(lp), "%s%s", dirs[rand() % 5], names[rand() % 3]);
		random_path(tg, sizeof(tg), 8, true);
		if (inside_link_contain(lp, tg, out, sizeof(out)) == 0) {
			contained++;
			if (!lexically_inside(out, dir_depth(lp))) {
				if (climbed++ < 5)
					CHECK_MSG(0, "%s -> %s gives %s, which climbs", lp, tg,
						  out);
			}
		}
		/* A tree of links, walked as the kernel walks. */
		struct tree t = {.n = 1 + rand() % 6};
		for (int i = 0; i < t.n; i++) {
			snprintf(t.path[i], sizeof(t.path[i]), "%s%s", dirs[rand() % 5],
				 names[rand() % 3]);
			random_path(t.target[i], sizeof(t.target[i]), 6, true);
		}
		for (int i = 0; i < 4; i++) {
			char p[64];
			random_path(p, sizeof(p), 8, false);
			/* Without "..": a host path that climbs by itself is its own affair. */
			if (strstr(p, ".."))
				continue;
			walks++;
			if (walk_escapes(&t, p) && escaped++ < 5) {
				fprintf(stderr, "walk %s escapes root/ through:\n", p);
				for (int k = 0; k < t.n; k++)
					fprintf(stderr, "  %s -> %s\n", t.path[k], t.target[k]);
			}
		}
	}
	CHECK_MSG(climbed == 0, "%d of %d contained links climb", climbed, contained);
	CHECK_MSG(escaped == 0, "%d of %d walks leave root/", escaped, walks);
	CHECK(contained > 3000 && walks > 3000);
}

/* --- OPEN's reply with WIRE_OPEN_MORE --------------------------------------------- */

struct more_seen {
	int n, whole;
	uint32_t errs[4];
	size_t lens[4];
};

static void more_one(uint32_t i, uint32_t err, const struct wire_attr *attr, const void *data,
		     size_t len, void *arg)
{
	struct more_seen *s = arg;
	(void)data;
	if (i < 4) {
		s->errs[i] = err;
		s->lens[i] = len;
	}
	s->whole += !err && S_ISREG(attr->mode);
	s->n++;
}

/* An OPEN reply: handle, attr, a head of 3 bytes, then @n entries: err @errs[i], a whole file of
 * @lens[i] bytes. */
static size_t open_body(uint8_t *buf, size_t cap, int n, const uint32_t *errs, const size_t *lens,
			uint32_t mode)
{
	static uint8_t data[WIRE_PEEK_MAX + 1];
	struct wire_out w = {.buf = buf, .cap = cap};
	struct wire_attr a = some_attr();
	wire_put_u32(&w, WIRE_HANDLE_NONE);
	wire_put_attr(&w, &a);
	wire_put_bytes(&w, "abc", 3);
	a.mode = mode;
	for (int i = 0; i < n; i++) {
		wire_put_u32(&w, errs[i]);
		if (errs[i])
			continue;
		wire_put_attr(&w, &a);
		wire_put_bytes(&w, data, lens[i]);
	}
	return w.len;
}

static void test_decode_open_more(void)
{
	static uint8_t buf[2 * WIRE_PEEK_MAX];
	const uint32_t errs[] = {0, EAGAIN, 0};
	const size_t lens[] = {10, 0, 0};
	uint32_t h;
	struct wire_attr a;
	const void *head;
	size_t head_len;
	struct more_seen s = {0};
	size_t len = open_body(buf, sizeof(buf), 3, errs, lens, S_IFREG | 0644);
	CHECK(agent_decode_open(buf, len, &h, &a, &head, &head_len, 3, more_one, &s) == 0);
	CHECK(h == WIRE_HANDLE_NONE && head_len == 3 && memcmp(head, "abc", 3) == 0);
	CHECK(s.n == 3 && s.whole == 2 && s.errs[1] == EAGAIN && s.lens[0] == 10 && s.lens[2] == 0);
	/* Fewer entries than asked, more, or a byte after them: nothing is handed on. */
	memset(&s, 0, sizeof(s));
	CHECK(agent_decode_open(buf, len, &h, &a, &head, &head_len, 4, more_one, &s) == -EPROTO);
	CHECK(agent_decode_open(buf, len, &h, &a, &head, &head_len, 2, more_one, &s) == -EPROTO);
	CHECK(agent_decode_open(buf, len - 1, &h, &a, &head, &head_len, 3, more_one, &s) ==
	      -EPROTO);
	CHECK(s.n == 0);
	/* Not a regular file, or not whole (WIRE_PEEK_MAX bytes): not one. */
	len = open_body(buf, sizeof(buf), 1, errs, lens, S_IFIFO | 0644);
	CHECK(agent_decode_open(buf, len, &h, &a, &head, &head_len, 1, more_one, &s) == -EPROTO);
	const size_t full[] = {WIRE_PEEK_MAX};
	len = open_body(buf, sizeof(buf), 1, errs, full, S_IFREG | 0644);
	CHECK(agent_decode_open(buf, len, &h, &a, &head, &head_len, 1, more_one, &s) == -EPROTO);
	const size_t most[] = {WIRE_PEEK_MAX - 1};
	len = open_body(buf, sizeof(buf), 1, errs, most, S_IFREG | 0644);
	CHECK(agent_decode_open(buf, len, &h, &a, &head, &head_len, 1, more_one, &s) == 0);
	CHECK(s.n == 1 && s.lens[0] == WIRE_PEEK_MAX - 1);
	/* Without WIRE_OPEN_MORE the entries are trailing bytes. */
	CHECK(agent_decode_open(buf, len, &h, &a, &head, &head_len, 0, NULL, NULL) == -EPROTO);
}

int main(void)
{
	test_round_trip();
	test_overflow();
	test_header();
	test_in_done();
	test_names_paths();
	test_decode_attr();
	test_decode_dir();
	test_decode_ps();
	test_decode_small();
	test_decode_open_more();
	test_link_table();
	test_link_chain();
	test_link_random();
	return t_done();
}
