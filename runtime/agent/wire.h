/*
 * wire.h - the agent's protocol: frames between the daemon and the agent in
 * a sandbox, and the codec both halves compile (the one file they share).
 *
 * The channel is two pipes: requests go daemon -> agent, replies come back.
 * Each message is one frame, a fixed header and a body:
 *
 *   offset size field
 *   0      4    len    body bytes after the header, <= WIRE_BODY_MAX
 *   4      4    tag    the request's; its replies carry it back
 *   8      2    op     enum wire_op
 *   10     2    flags  WIRE_F_*: WIRE_F_MORE on the frames of a stream but its last
 *   12     4    err    replies: 0, or the positive errno the agent met; requests: 0
 *
 * All integers little-endian. In a body, a string is `u16 n` then n bytes
 * (no NUL); bytes are `u32 n` then n bytes. Each op's body, request and
 * reply, is tabled beside its enum below. A reply with err != 0 has an empty
 * body.
 *
 * Trust. The daemon decodes every reply as hostile: sandbox code can kill,
 * replace, trace or impersonate the agent. The decoders here check every
 * length against what is left and against its maximum, and a body must be
 * read to its last byte (trailing bytes are an error); the host side
 * (runtime/agent/agent.c) then checks the values: an errno outside
 * wire_errno_ok() becomes EIO, names and paths are checked by the caller.
 * tests/fuzz/fuzz_agent_reply.c runs the decoders on arbitrary bytes.
 *
 * Memory: struct wire_out writes into a buffer its caller owns; struct
 * wire_in reads a buffer its caller owns, and the pointers it hands out
 * point into that buffer. Nothing here allocates, and nothing is shared
 * between threads.
 */
#ifndef SNAPFS_AGENT_WIRE_H
#define SNAPFS_AGENT_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WIRE_VERSION 1
#define WIRE_HEADER_SIZE 16
/* Most file bytes in one READ reply or WRITE request: FUSE's largest request. */
#define WIRE_DATA_MAX (1u << 20)
/*
 * The keeper's read memory (READ_SHM; runtime/agent/shmem.h): a memfd of
 * this many slots of WIRE_DATA_MAX bytes, which an attach passes as the
 * attach program's fd WIRE_SHM_FD, and it to the keeper with the channel.
 */
#define WIRE_SHM_SLOTS 8u
#define WIRE_SHM_BYTES (WIRE_SHM_SLOTS * WIRE_DATA_MAX)
#define WIRE_SHM_FD 3
/* HELLO's feature: the keeper has mapped the read memory, so READ_SHM works. */
#define WIRE_HELLO_SHM 1u
/* Longest body: a WRITE's data and its fields. */
#define WIRE_BODY_MAX (WIRE_DATA_MAX + 64u)
/* A path inside the sandbox, relative to its /, and one name in it. */
#define WIRE_PATH_MAX 4096
#define WIRE_NAME_MAX 255
/* A READDIR reply's entries take at most this many bytes. */
#define WIRE_DIR_BYTES_MAX (64u << 10)
/* An exec's command line (a control-file line). */
#define WIRE_CMD_MAX 4096
/* A PS reply's processes, and one's command. */
#define WIRE_PS_MAX 4096
#define WIRE_COMM_MAX 256

#define WIRE_F_MORE 1u

/*
 * OPEN's flag for a read-only open: the reply also carries the file's first
 * bytes, at most WIRE_PEEK_MAX (fewer: the file ends there), so that a small
 * file's read needs no second crossing.
 */
#define WIRE_OPEN_PEEK (1u << 31)
#define WIRE_PEEK_MAX (64u << 10)
/*
 * With WIRE_OPEN_PEEK, an OPEN flag: a file that ends within its head (fewer
 * than WIRE_PEEK_MAX bytes read) is closed again at once and the handle is
 * WIRE_HANDLE_NONE, so its close needs no crossing (a `cp -r` out of root/
 * opens thousands of small files). Keepers older than it refuse it: EINVAL.
 */
#define WIRE_OPEN_WHOLE (1u << 30)
#define WIRE_HANDLE_NONE UINT32_MAX
/*
 * With WIRE_OPEN_WHOLE, an OPEN flag: the request goes on with u32 n
 * (1..WIRE_MORE_MAX) and n names of the path's directory, and the reply with
 * one entry for each, in their order: u32 err, then with 0 the file's attr
 * and bytes, all of it (fewer than WIRE_PEEK_MAX). err is EFBIG for a file
 * not that small, ENXIO for one not regular, EAGAIN where the reply had no
 * room left. Nothing of them stays open. A `cp -r` or `grep -r` out of
 * root/ then costs a crossing for many files, not one each (ops_agent.c,
 * "Files read ahead"). Keepers older than it refuse it: EINVAL.
 */
#define WIRE_OPEN_MORE (1u << 29)
#define WIRE_MORE_MAX 64

/*
 * The ops. "path" is a string: relative to the sandbox's /, "" for / itself,
 * components without "." or ".." (the daemon builds it, the agent checks it).
 * attr is tabled at struct wire_attr.
 *
 *   op         request body                          reply body
 *   HELLO      u32 version[, u32 features asked]     u32 version, u32 pid[, u32 features
 *                                                    had: when asked] (WIRE_HELLO_*)
 *   LSTAT      path                                  attr
 *   READDIR    path, u64 cookie                      u64 next (0: the end), u32 n,
 *                                                    n x (attr, string name)
 *   OPEN       path, u32 flags, u32 mode             u32 handle, attr
 *              [, u32 n, n x string name:            [, bytes head: with WIRE_OPEN_PEEK]
 *                 with WIRE_OPEN_MORE]               [, n x (u32 err[, attr, bytes]):
 *                                                       with WIRE_OPEN_MORE]
 *   READ       u32 handle, u64 off, u32 n            bytes
 *   READ_SHM   u32 handle, u64 off, u32 n, u32 slot  u32 got: the bytes are in the read
 *                                                    memory's slot (EOPNOTSUPP: no memory)
 *   WRITE      u32 handle, u64 off, bytes            u32 n
 *   CLOSE      u32 handle                            -
 *   FSYNC      u32 handle                            -
 *   TRUNCATE   path, u64 size                        -
 *   UNLINK     path                                  -
 *   RMDIR      path                                  -
 *   MKDIR      path, u32 mode                        attr
 *   RENAME     path from, path to, u32 flags         -
 *   SYMLINK    string target, path                   attr
 *   READLINK   path                                  string target (<= WIRE_PATH_MAX)
 *   CHMOD      path, u32 mode                        -
 *   CHOWN      path, u32 uid, u32 gid (-1: keep)     -
 *   UTIMENS    path, 2 x (i64 sec, u32 nsec)         -
 *   LINK       path from, path to                    attr
 *   EXEC       string cmdline                        OUT frames (MORE), then EXIT
 *   OUT        -                                     bytes (<= 64 KiB), flags MORE
 *   EXIT       -                                     i32 wait status
 *   KILL       u32 exec tag                          -
 *   PS         -                                     u32 n, n x (u32 pid, u32 ppid, u32 uid,
 *                                                    u8 state, u64 rss, u64 cpu_ms, string comm)
 *   DETACH     -                                     - (then the agent closes the channel)
 */
enum wire_op {
	WIRE_HELLO = 1,
	WIRE_LSTAT,
	WIRE_READDIR,
	WIRE_OPEN,
	WIRE_READ,
	WIRE_WRITE,
	WIRE_CLOSE,
	WIRE_FSYNC,
	WIRE_TRUNCATE,
	WIRE_UNLINK,
	WIRE_RMDIR,
	WIRE_MKDIR,
	WIRE_RENAME,
	WIRE_SYMLINK,
	WIRE_READLINK,
	WIRE_CHMOD,
	WIRE_CHOWN,
	WIRE_UTIMENS,
	WIRE_LINK,
	WIRE_EXEC,
	WIRE_OUT,
	WIRE_EXIT,
	WIRE_KILL,
	WIRE_PS,
	WIRE_DETACH,
	WIRE_READ_SHM,
	WIRE_OP_END,
};

struct wire_header {
	uint32_t len;
	uint32_t tag;
	uint16_t op;
	uint16_t flags;
	uint32_t err;
};

/*
 * A file's attributes as the sandbox sees them (uids inside):
 *   u32 mode, u32 nlink, u32 uid, u32 gid, u64 size, u64 blocks, u64 ino,
 *   u64 rdev, then atime, mtime, ctime each as i64 sec, u32 nsec   (84 bytes)
 */
struct wire_attr {
	uint32_t mode, nlink, uid, gid;
	uint64_t size, blocks, ino, rdev;
	int64_t sec[3]; /* atime, mtime, ctime */
	uint32_t nsec[3];
};
#define WIRE_ATTR_SIZE 84

/* One process of a PS reply. */
struct wire_proc {
	uint32_t pid, ppid, uid;
	uint8_t state;
	uint64_t rss, cpu_ms;
	const char *comm; /* into the reply's buffer, not NUL-terminated */
	uint16_t comm_len;
};

/* A writer into @buf[0..cap): a field that does not fit sets @overflow and writes nothing. */
struct wire_out {
	uint8_t *buf;
	size_t cap, len;
	bool overflow;
};

/* A reader of @buf[0..len): a field past the end sets @bad and reads as zero. */
struct wire_in {
	const uint8_t *buf;
	size_t len, off;
	bool bad;
};

void wire_header_put(uint8_t out[WIRE_HEADER_SIZE], const struct wire_header *h);
/* 0, or -1 when @len is past WIRE_BODY_MAX or @op is not one of enum wire_op. */
int wire_header_get(const uint8_t in[WIRE_HEADER_SIZE], struct wire_header *h);

void wire_put_u8(struct wire_out *w, uint8_t v);
void wire_put_u16(struct wire_out *w, uint16_t v);
void wire_put_u32(struct wire_out *w, uint32_t v);
void wire_put_u64(struct wire_out *w, uint64_t v);
/* A string of @n bytes (at most UINT16_MAX). */
void wire_put_str(struct wire_out *w, const char *s, size_t n);
/* Bytes: u32 n, then the bytes. */
void wire_put_bytes(struct wire_out *w, const void *p, size_t n);
void wire_put_attr(struct wire_out *w, const struct wire_attr *a);

uint8_t wire_get_u8(struct wire_in *r);
uint16_t wire_get_u16(struct wire_in *r);
uint32_t wire_get_u32(struct wire_in *r);
uint64_t wire_get_u64(struct wire_in *r);
/* A string of at most @max bytes; *@s points into the buffer (no NUL). */
void wire_get_str(struct wire_in *r, size_t max, const char **s, size_t *n);
/* Bytes of at most @max; *@p points into the buffer. */
void wire_get_bytes(struct wire_in *r, size_t max, const void **p, size_t *n);
void wire_get_attr(struct wire_in *r, struct wire_attr *a);
/* The whole body was read, nothing less, nothing more, and nothing past its end. */
bool wire_in_done(const struct wire_in *r);

/*
 * May an agent's reply carry errno @err? The errors a file operation
 * inside can meet; anything else is a lie or a bug, and the host answers EIO.
 */
bool wire_errno_ok(uint32_t err);

/*
 * Is @s[0..n) a name (1..WIRE_NAME_MAX bytes, no '/', no NUL, not "." or
 * "..")? A path ("" or names joined by single '/', at most WIRE_PATH_MAX)?
 */
bool wire_name_ok(const char *s, size_t n);
bool wire_path_ok(const char *s, size_t n);

#endif
