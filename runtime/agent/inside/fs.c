/*
 * fs.c - the agent's file requests: a path from the daemon is one inside
 * the sandbox, resolved by this process of the sandbox, so a link it meets
 * leads where it leads inside and nowhere else. The last component is
 * never followed (lstat, O_NOFOLLOW): the daemon's kernel resolves links
 * itself, through READLINK.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/agent/inside/inside.h"

/* Open files, by handle; -1 is a free slot. Handles go with the channel (fs_close_all()). */
static int handles[INSIDE_HANDLES_MAX];
static int handles_ready;

static void handles_init(void)
{
	if (handles_ready)
		return;
	for (int i = 0; i < INSIDE_HANDLES_MAX; i++)
		handles[i] = -1;
	handles_ready = 1;
}

void fs_close_all(void)
{
	handles_init();
	for (int i = 0; i < INSIDE_HANDLES_MAX; i++)
		if (handles[i] >= 0) {
			close(handles[i]);
			handles[i] = -1;
		}
}

static int handle_fd(uint32_t h)
{
	handles_init();
	return h < INSIDE_HANDLES_MAX ? handles[h] : -1;
}

/* Read a path off the request into @abs ("/" + it); 0 or an errno. */
static uint32_t get_path(struct wire_in *in, char abs[WIRE_PATH_MAX + 2])
{
	const char *p;
	size_t n;
	wire_get_str(in, WIRE_PATH_MAX, &p, &n);
	if (in->bad || !wire_path_ok(p, n))
		return EINVAL;
	abs[0] = '/';
	memcpy(abs + 1, p, n);
	abs[n + 1] = '\0';
	return 0;
}

static void attr_of(const struct stat *st, struct wire_attr *a)
{
	*a = (struct wire_attr){
	    .mode = st->st_mode,
	    .nlink = (uint32_t)st->st_nlink,
	    .uid = st->st_uid,
	    .gid = st->st_gid,
	    .size = (uint64_t)st->st_size,
	    .blocks = (uint64_t)st->st_blocks,
	    .ino = st->st_ino,
	    .rdev = st->st_rdev,
	    .sec = {st->st_atim.tv_sec, st->st_mtim.tv_sec, st->st_ctim.tv_sec},
	    .nsec = {(uint32_t)st->st_atim.tv_nsec, (uint32_t)st->st_mtim.tv_nsec,
		     (uint32_t)st->st_ctim.tv_nsec},
	};
}

/* The attributes of @abs into the reply; 0 or an errno. */
static uint32_t put_lstat(const char *abs, struct inside_reply *r)
{
	struct stat st;
	struct wire_attr a;
	if (lstat(abs, &st) < 0)
		return (uint32_t)errno;
	attr_of(&st, &a);
	wire_put_attr(&r->body, &a);
	return 0;
}

/*
 * Entries from the @cookie-th on (".", ".." left out), each with its
 * attributes (lstat), until WIRE_DIR_BYTES_MAX: an `ls -l` then needs no
 * request per file.
 */
static uint32_t do_readdir(struct wire_in *in, const char *abs, struct inside_reply *r)
{
	uint64_t cookie = wire_get_u64(in), i = 0;
	if (!wire_in_done(in))
		return EINVAL;
	DIR *d = opendir(abs);
	if (!d)
		return (uint32_t)errno;
	/* `next` and the count are written last, at their place. */
	size_t head = r->body.len;
	wire_put_u64(&r->body, 0);
	wire_put_u32(&r->body, 0);
	uint32_t n = 0;
	uint64_t next = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (i++ < cookie)
			continue;
		size_t len = strlen(de->d_name);
		if (r->body.len - head + WIRE_ATTR_SIZE + 2 + len > WIRE_DIR_BYTES_MAX) {
			next = i - 1;
			break;
		}
		struct stat st;
		struct wire_attr a;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone meanwhile */
		attr_of(&st, &a);
		wire_put_attr(&r->body, &a);
		wire_put_str(&r->body, de->d_name, len);
		n++;
	}
	closedir(d);
	struct wire_out at = {.buf = r->body.buf + head, .cap = 12};
	wire_put_u64(&at, next);
	wire_put_u32(&at, n);
	return 0;
}

/*
 * @fd's bytes from 0 into @w as `bytes`, at most @max: 0 or an errno (a
 * head we cannot read must not read as an empty file); *@got the count.
 */
static uint32_t put_head(int fd, struct wire_out *w, size_t max, ssize_t *got)
{
	size_t at = w->len;
	wire_put_u32(w, 0); /* the length, written once known */
	if (w->overflow || w->cap - w->len < max)
		return E2BIG;
	do
		*got = pread(fd, w->buf + w->len, max, 0);
	while (*got < 0 && errno == EINTR);
	if (*got < 0)
		return (uint32_t)errno;
	w->len += (size_t)*got;
	struct wire_out len = {.buf = w->buf + at, .cap = 4};
	wire_put_u32(&len, (uint32_t)*got);
	return 0;
}

/* WIRE_OPEN_MORE's names, all read and checked before anything is opened. */
struct more {
	uint32_t n;
	const char *name[WIRE_MORE_MAX];
	size_t len[WIRE_MORE_MAX];
};

static bool get_more(struct wire_in *in, struct more *m)
{
	m->n = wire_get_u32(in);
	if (m->n == 0 || m->n > WIRE_MORE_MAX)
		return false;
	for (uint32_t i = 0; i < m->n; i++) {
		wire_get_str(in, WIRE_NAME_MAX, &m->name[i], &m->len[i]);
		if (in->bad || !wire_name_ok(m->name[i], m->len[i]))
			return false;
	}
	return true;
}

/*
 * One regular file @abs whole into @w (attr, bytes) if it has fewer than
 * @max bytes: 0 or the entry's errno (EFBIG past WIRE_PEEK_MAX, EAGAIN past
 * a smaller @max: the reply's room).
 */
static uint32_t put_whole(const char *abs, struct wire_out *w, size_t max)
{
	int fd = open(abs, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return (uint32_t)errno;
	struct stat st;
	uint32_t err = fstat(fd, &st) < 0 ? (uint32_t)errno : S_ISREG(st.st_mode) ? 0 : ENXIO;
	struct wire_attr a;
	ssize_t got = 0;
	if (!err) {
		attr_of(&st, &a);
		wire_put_attr(w, &a);
		err = put_head(fd, w, max, &got);
	}
	close(fd);
	return err ? err : got < (ssize_t)max ? 0 : max == WIRE_PEEK_MAX ? EFBIG : EAGAIN;
}

/* The entries of @m, files beside @abs, each whole or an errno, while @w has room. */
static void put_more(const char *abs, const struct more *m, struct wire_out *w)
{
	const char *slash = strrchr(abs, '/');
	size_t dir = (size_t)(slash - abs) + 1; /* "/" included */
	char path[WIRE_PATH_MAX + 2];
	memcpy(path, abs, dir);
	for (uint32_t i = 0; i < m->n; i++) {
		size_t at = w->len;
		/* What its bytes may fill: its err, attr and length, and an err for each after it.
		 */
		size_t fixed = 4 + WIRE_ATTR_SIZE + 4 + 4 * (m->n - i - 1);
		size_t room = w->cap - w->len > fixed ? w->cap - w->len - fixed : 0;
		uint32_t err = !room				     ? EAGAIN
			       : dir + m->len[i] > WIRE_PATH_MAX + 1 ? ENAMETOOLONG
								     : 0;
		wire_put_u32(w, err);
		if (err)
			continue;
		memcpy(path + dir, m->name[i], m->len[i]);
		path[dir + m->len[i]] = '\0';
		err = put_whole(path, w, room < WIRE_PEEK_MAX ? room : WIRE_PEEK_MAX);
		if (err) {
			w->len = at; /* only the errno */
			wire_put_u32(w, err);
		}
	}
}

static uint32_t do_open(struct wire_in *in, const char *abs, struct inside_reply *r)
{
	const uint32_t allowed = O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_APPEND |
				 WIRE_OPEN_PEEK | WIRE_OPEN_WHOLE | WIRE_OPEN_MORE;
	uint32_t flags = wire_get_u32(in), mode = wire_get_u32(in);
	bool peek = flags & WIRE_OPEN_PEEK, whole = flags & WIRE_OPEN_WHOLE;
	struct more m = {0};
	if ((flags & WIRE_OPEN_MORE) && !get_more(in, &m))
		return EINVAL;
	if (!wire_in_done(in) || (flags & ~allowed) || (whole && !peek) || (m.n && !whole))
		return EINVAL;
	flags &= ~(WIRE_OPEN_PEEK | WIRE_OPEN_WHOLE | WIRE_OPEN_MORE);
	if (peek && flags != O_RDONLY)
		return EINVAL;
	handles_init();
	int slot = 0;
	while (slot < INSIDE_HANDLES_MAX && handles[slot] >= 0)
		slot++;
	if (slot == INSIDE_HANDLES_MAX)
		return EMFILE;
	/* Non-blocking: a FIFO must not stall the one thread that serves the channel. */
	int fd =
	    open(abs, (int)flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, mode & 07777);
	if (fd < 0)
		return (uint32_t)errno;
	struct stat st;
	uint32_t err = fstat(fd, &st) < 0 ? (uint32_t)errno : S_ISREG(st.st_mode) ? 0 : ENXIO;
	if (err) {
		close(fd);
		return err;
	}
	struct wire_attr a;
	attr_of(&st, &a);
	size_t handle_at = r->body.len;
	wire_put_u32(&r->body, (uint32_t)slot);
	wire_put_attr(&r->body, &a);
	ssize_t got = WIRE_PEEK_MAX;
	err = peek ? put_head(fd, &r->body, WIRE_PEEK_MAX, &got) : 0;
	if (err) {
		close(fd);
		return err;
	}
	put_more(abs, &m, &r->body);
	if (whole && got < (ssize_t)WIRE_PEEK_MAX) {
		/* All of it is in the reply: no handle to keep, none to close. */
		struct wire_out h = {.buf = r->body.buf + handle_at, .cap = 4};
		wire_put_u32(&h, WIRE_HANDLE_NONE);
		close(fd);
		return 0;
	}
	handles[slot] = fd;
	return 0;
}

static uint32_t do_read(struct wire_in *in, struct inside_reply *r)
{
	int fd = handle_fd(wire_get_u32(in));
	uint64_t off = wire_get_u64(in);
	uint32_t n = wire_get_u32(in);
	if (!wire_in_done(in) || n > WIRE_DATA_MAX || off > INT64_MAX)
		return EINVAL;
	if (fd < 0)
		return EBADF;
	/* Read straight into the reply, after the u32 length written last. */
	size_t at = r->body.len;
	wire_put_u32(&r->body, 0);
	ssize_t got;
	do
		got = pread(fd, r->body.buf + r->body.len, n, (off_t)off);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return (uint32_t)errno;
	r->body.len += (size_t)got;
	struct wire_out len = {.buf = r->body.buf + at, .cap = 4};
	wire_put_u32(&len, (uint32_t)got);
	return 0;
}

/*
 * READ_SHM: the bytes into the read memory's slot the daemon lent for this
 * request, not into the reply, so they cross without a write into the
 * channel pipe (which copies them again in the sentry and in the host).
 */
static uint8_t *read_mem; /* fs_read_memory() */

void fs_read_memory(uint8_t *mem)
{
	read_mem = mem;
}

static uint32_t do_read_shm(struct wire_in *in, struct inside_reply *r)
{
	int fd = handle_fd(wire_get_u32(in));
	uint64_t off = wire_get_u64(in);
	uint32_t n = wire_get_u32(in), slot = wire_get_u32(in);
	uint8_t *shm = read_mem;
	if (!wire_in_done(in) || n > WIRE_DATA_MAX || off > INT64_MAX || slot >= WIRE_SHM_SLOTS)
		return EINVAL;
	if (!shm)
		return EOPNOTSUPP;
	if (fd < 0)
		return EBADF;
	ssize_t got;
	do
		got = pread(fd, shm + (size_t)slot * WIRE_DATA_MAX, n, (off_t)off);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return (uint32_t)errno;
	wire_put_u32(&r->body, (uint32_t)got);
	return 0;
}

static uint32_t do_write(struct wire_in *in, struct inside_reply *r)
{
	int fd = handle_fd(wire_get_u32(in));
	uint64_t off = wire_get_u64(in);
	const void *data;
	size_t n;
	wire_get_bytes(in, WIRE_DATA_MAX, &data, &n);
	if (!wire_in_done(in) || off > INT64_MAX)
		return EINVAL;
	if (fd < 0)
		return EBADF;
	size_t done = 0;
	while (done < n) {
		ssize_t w = pwrite(fd, (const char *)data + done, n - done, (off_t)(off + done));
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && !done)
			return (uint32_t)errno;
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	wire_put_u32(&r->body, (uint32_t)done);
	return 0;
}

static uint32_t do_handle(const struct wire_header *h, struct wire_in *in)
{
	uint32_t slot = wire_get_u32(in);
	int fd = handle_fd(slot);
	if (!wire_in_done(in))
		return EINVAL;
	if (fd < 0)
		return EBADF;
	if (h->op == WIRE_FSYNC)
		return fsync(fd) < 0 ? (uint32_t)errno : 0;
	close(fd);
	handles[slot] = -1;
	return 0;
}

static uint32_t do_truncate(struct wire_in *in, const char *abs)
{
	uint64_t size = wire_get_u64(in);
	if (!wire_in_done(in) || size > INT64_MAX)
		return EINVAL;
	int fd = open(abs, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return (uint32_t)errno;
	uint32_t err = ftruncate(fd, (off_t)size) < 0 ? (uint32_t)errno : 0;
	close(fd);
	return err;
}

/* Two paths: RENAME and LINK. */
static uint32_t do_two(const struct wire_header *h, struct wire_in *in, const char *from,
		       struct inside_reply *r)
{
	char to[WIRE_PATH_MAX + 2];
	uint32_t err = get_path(in, to);
	uint32_t flags = h->op == WIRE_RENAME ? wire_get_u32(in) : 0;
	if (err || !wire_in_done(in))
		return EINVAL;
	if (h->op == WIRE_LINK)
		return linkat(AT_FDCWD, from, AT_FDCWD, to, 0) < 0 ? (uint32_t)errno
								   : put_lstat(to, r);
	long rc = syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, flags);
	if (rc < 0 && errno == ENOSYS && flags == 0)
		rc = rename(from, to);
	return rc < 0 ? (uint32_t)errno : 0;
}

static uint32_t do_symlink(struct wire_in *in, struct inside_reply *r)
{
	const char *target;
	size_t n;
	char abs[WIRE_PATH_MAX + 2], t[WIRE_PATH_MAX + 1];
	wire_get_str(in, WIRE_PATH_MAX, &target, &n);
	uint32_t err = get_path(in, abs);
	if (err || !wire_in_done(in) || n == 0 || memchr(target, '\0', n))
		return EINVAL;
	memcpy(t, target, n);
	t[n] = '\0';
	return symlink(t, abs) < 0 ? (uint32_t)errno : put_lstat(abs, r);
}

static uint32_t do_readlink(const char *abs, struct inside_reply *r)
{
	char t[WIRE_PATH_MAX + 1];
	ssize_t n = readlink(abs, t, sizeof(t));
	if (n < 0)
		return (uint32_t)errno;
	if ((size_t)n > WIRE_PATH_MAX)
		return ENAMETOOLONG;
	wire_put_str(&r->body, t, (size_t)n);
	return 0;
}

static uint32_t do_utimens(struct wire_in *in, const char *abs)
{
	struct timespec ts[2];
	for (int i = 0; i < 2; i++) {
		ts[i].tv_sec = (time_t)wire_get_u64(in);
		ts[i].tv_nsec = (long)wire_get_u32(in);
	}
	if (!wire_in_done(in))
		return EINVAL;
	return utimensat(AT_FDCWD, abs, ts, AT_SYMLINK_NOFOLLOW) < 0 ? (uint32_t)errno : 0;
}

/* The requests that take one path and at most two numbers. */
static uint32_t do_path_op(const struct wire_header *h, struct wire_in *in, const char *abs,
			   struct inside_reply *r)
{
	uint32_t a = 0, b = 0;
	if (h->op == WIRE_MKDIR || h->op == WIRE_CHMOD)
		a = wire_get_u32(in);
	if (h->op == WIRE_CHOWN)
		a = wire_get_u32(in), b = wire_get_u32(in);
	if (!wire_in_done(in))
		return EINVAL;
	int rc = 0;
	switch (h->op) {
	case WIRE_LSTAT:
		return put_lstat(abs, r);
	case WIRE_UNLINK:
		rc = unlink(abs);
		break;
	case WIRE_RMDIR:
		rc = rmdir(abs);
		break;
	case WIRE_MKDIR:
		return mkdir(abs, a & 07777) < 0 ? (uint32_t)errno : put_lstat(abs, r);
	case WIRE_CHMOD:
		rc = fchmodat(AT_FDCWD, abs, a & 07777, 0);
		break;
	case WIRE_CHOWN:
		rc = lchown(abs, a, b);
		break;
	case WIRE_READLINK:
		return do_readlink(abs, r);
	default:
		return EINVAL;
	}
	return rc < 0 ? (uint32_t)errno : 0;
}

void fs_serve(const struct wire_header *h, struct wire_in *in, struct inside_reply *r)
{
	char abs[WIRE_PATH_MAX + 2];
	switch (h->op) {
	case WIRE_READ:
		r->err = do_read(in, r);
		return;
	case WIRE_READ_SHM:
		r->err = do_read_shm(in, r);
		return;
	case WIRE_WRITE:
		r->err = do_write(in, r);
		return;
	case WIRE_CLOSE:
	case WIRE_FSYNC:
		r->err = do_handle(h, in);
		return;
	case WIRE_SYMLINK:
		r->err = do_symlink(in, r);
		return;
	default:
		break;
	}
	r->err = get_path(in, abs);
	if (r->err)
		return;
	switch (h->op) {
	case WIRE_READDIR:
		r->err = do_readdir(in, abs, r);
		break;
	case WIRE_OPEN:
		r->err = do_open(in, abs, r);
		break;
	case WIRE_TRUNCATE:
		r->err = do_truncate(in, abs);
		break;
	case WIRE_RENAME:
	case WIRE_LINK:
		r->err = do_two(h, in, abs, r);
		break;
	case WIRE_UTIMENS:
		r->err = do_utimens(in, abs);
		break;
	default:
		r->err = do_path_op(h, in, abs, r);
	}
}
