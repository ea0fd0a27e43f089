#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "lib/logfile.h"

/* First buffer for a file that stats as empty (/proc, cgroupfs); it doubles from there. */
#define READ_FILE_FIRST 4096

bool log_debug_enabled;

/* snapfs.log in the background (log_to_file()); until then, stderr as it is. */
static struct logfile log_file = LOGFILE_INIT;
static atomic_bool log_file_open;
/* stderr is the journal's stream (log_init()): no timestamp, a <N> priority instead. */
static atomic_bool log_journal;

void log_init(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char tail;
	/* sd-daemon(3): JOURNAL_STREAM is "DEV:INO" of the stream systemd connected. */
	if (js && sscanf(js, "%llu:%llu%c", &dev, &ino, &tail) == 2 &&
	    fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino)
		atomic_store(&log_journal, true);
}

int log_to_file(const char *path, int64_t max_bytes)
{
	int rc = logfile_open(&log_file, path, max_bytes, 0600, STDERR_FILENO);
	atomic_store(&log_file_open, rc == 0);
	if (rc == 0)
		atomic_store(&log_journal, false);
	return rc;
}

int log_reopen(void)
{
	if (!atomic_load(&log_file_open))
		return 0;
	int rc = logfile_reopen(&log_file);
	return rc < 0 ? rc : 1;
}

void freep(void *p)
{
	free(*(void **)p);
}

void closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}

void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

/* The syslog priority (sd-daemon(3) prefixes) of each level vlog() is given. */
static int log_priority(const char *level)
{
	switch (level[0]) {
	case 'e':
		return 3; /* LOG_ERR */
	case 'w':
		return 4; /* LOG_WARNING */
	case 'i':
		return 6; /* LOG_INFO */
	default:
		return 7; /* LOG_DEBUG */
	}
}

/* One event, one line: `TIME snapfs LEVEL: MESSAGE`, or `<N>LEVEL: MESSAGE` to the journal. */
static void vlog(const char *level, const char *fmt, va_list ap)
{
	char line[ERR_MSG_MAX + 64];
	char when[32];
	int n;
	if (atomic_load(&log_journal)) {
		n = snprintf(line, sizeof(line), "<%d>%s: ", log_priority(level), level);
	} else {
		format_time(now_ms(), when);
		n = snprintf(line, sizeof(line), "%s snapfs %s: ", when, level);
	}
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	/* A message quoting what runsc or a user wrote must not start a line of its own. */
	for (char *p = line + n; (p = strpbrk(p, "\r\n")) != NULL;)
		*p = ' ';
	if (atomic_load(&log_file_open)) {
		/* One write per line, and the file rotated at its cap. */
		size_t len = strlen(line);
		line[len] = '\n';
		logfile_append(&log_file, line, len + 1);
		return;
	}
	/* One fprintf per line keeps lines of concurrent threads whole. */
	fprintf(stderr, "%s\n", line);
}

int error(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog("error", fmt, ap);
	va_end(ap);
	return code > 0 ? -code : -EIO;
}

void warning(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog("warning", fmt, ap);
	va_end(ap);
}

void info(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog("info", fmt, ap);
	va_end(ap);
}

void debug(const char *fmt, ...)
{
	if (!log_debug_enabled)
		return;
	va_list ap;
	va_start(ap, fmt);
	vlog("debug", fmt, ap);
	va_end(ap);
}

int err_set(struct err *e, int code, const char *fmt, ...)
{
	char msg[ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	debug("%s (%s)", msg, strerror(code));
	if (e) {
		e->code = code;
		memcpy(e->msg, msg, sizeof(msg));
	}
	return -code;
}

int err_wrap(struct err *e, const char *fmt, ...)
{
	char ctx[ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ctx, sizeof(ctx), fmt, ap);
	va_end(ap);
	if (!e || !e->code)
		return err_set(e, EIO, "%s", ctx);
	char inner[ERR_MSG_MAX];
	memcpy(inner, e->msg, sizeof(inner));
	return err_set(e, e->code, "%s: %s", ctx, inner);
}

void err_clear(struct err *e)
{
	e->code = 0;
	e->msg[0] = '\0';
}

int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void format_time(int64_t ms, char out[32])
{
	time_t secs = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&secs, &tm);
	size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 32 - n, ".%03dZ", (int)(ms % 1000));
}

int random_hex(char *out, size_t nhex)
{
	static const char digits[] = "0123456789abcdef";
	unsigned char raw[64];
	size_t nbytes = (nhex + 1) / 2;
	if (nbytes > sizeof(raw))
		return -EINVAL;
	if (getrandom(raw, nbytes, 0) != (ssize_t)nbytes)
		return -errno;
	for (size_t i = 0; i < nhex; i++)
		out[i] = digits[(raw[i / 2] >> ((i % 2) * 4)) & 0xf];
	out[nhex] = '\0';
	return 0;
}

int xsnprintf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	return n;
}

int fsync_dir(const char *dir)
{
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		return -errno;
	return 0;
}

/* write(2), or pwrite(2) at @off when @off >= 0, all of @data. */
static int write_loop(int fd, const char *p, size_t len, int64_t off)
{
	while (len > 0) {
		ssize_t n = off < 0 ? write(fd, p, len) : pwrite(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
		off = off < 0 ? off : off + n;
	}
	return 0;
}

int write_all(int fd, const void *data, size_t len)
{
	return write_loop(fd, data, len, -1);
}

int pwrite_all(int fd, const void *data, size_t len, int64_t off)
{
	return off < 0 ? -EINVAL : write_loop(fd, data, len, off);
}

int pread_all(int fd, void *buf, size_t len, int64_t off)
{
	for (size_t got = 0; got < len;) {
		ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + (int64_t)got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ENODATA;
		got += (size_t)n;
	}
	return 0;
}

#define COPY_CHUNK (1u << 20)

/* A copy method that cannot handle these files says so before copying anything. */
static bool copy_unsupported(int code)
{
	return code == ENOSYS || code == EXDEV || code == EINVAL || code == EOPNOTSUPP;
}

static ssize_t copy_range(int in, int out)
{
	return copy_file_range(in, NULL, out, NULL, COPY_CHUNK, 0);
}

static ssize_t copy_sendfile(int in, int out)
{
	return sendfile(out, in, NULL, COPY_CHUNK);
}

/* 0 when all was copied, 1 when @fn cannot copy these files (nothing copied), or -errno. */
static int copy_with(ssize_t (*fn)(int, int), int in, int out)
{
	bool started = false;
	for (;;) {
		ssize_t n = fn(in, out);
		if (n == 0)
			return 0;
		if (n > 0) {
			started = true;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (!started && copy_unsupported(errno))
			return 1;
		return -errno;
	}
}

static int copy_read_write(int in, int out)
{
	_cleanup_free_ char *buf = malloc(COPY_CHUNK);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(in, buf, COPY_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : 0;
		int rc = write_all(out, buf, (size_t)n);
		if (rc < 0)
			return rc;
	}
}

int copy_fd(int in, int out)
{
	int rc = copy_with(copy_range, in, out);
	if (rc == 1)
		rc = copy_with(copy_sendfile, in, out);
	if (rc == 1)
		rc = copy_read_write(in, out);
	return rc;
}

int tmp_name(const char *path, char tmp[PATH_MAX])
{
	char hex[TMP_HEX + 1];
	int rc = random_hex(hex, TMP_HEX);
	if (rc < 0)
		return rc;
	rc = xsnprintf(tmp, PATH_MAX, "%s%s%s", path, TMP_MARK, hex);
	return rc < 0 ? rc : 0;
}

int path_parent(const char *path, char dir[PATH_MAX])
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return xsnprintf(dir, PATH_MAX, ".");
	if (slash == path)
		return xsnprintf(dir, PATH_MAX, "/");
	return xsnprintf(dir, PATH_MAX, "%.*s", (int)(slash - path), path);
}

/* Record the step of @d that failed with -@code, on @on; returns -code. */
static int durable_fail(struct durable_file *d, const char *what, const char *on, int code)
{
	d->what = what;
	d->on = on;
	return -code;
}

int durable_open(struct durable_file *d, const char *path)
{
	*d = (struct durable_file){.fd = -1, .path = path, .on = path};
	int rc = tmp_name(path, d->tmp);
	/* The directory is shorter than the temp name: it cannot be too long now. */
	if (rc < 0 || path_parent(path, d->dir) < 0)
		return rc < 0 ? rc : -ENAMETOOLONG;
	d->fd = open(d->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	return d->fd < 0 ? durable_fail(d, "create", d->tmp, errno) : 0;
}

int durable_end(struct durable_file *d, int rc)
{
	if (d->fd < 0)
		return rc < 0 ? rc : -EBADF;
	if (rc < 0)
		durable_fail(d, "write", d->tmp, -rc);
	else if (fsync(d->fd) < 0)
		rc = durable_fail(d, "fsync", d->tmp, errno);
	close(d->fd);
	d->fd = -1;
	if (rc == 0 && rename(d->tmp, d->path) < 0)
		rc = durable_fail(d, "rename to", d->path, errno);
	if (rc < 0) {
		unlink(d->tmp);
		return rc;
	}
	rc = fsync_dir(d->dir);
	return rc < 0 ? durable_fail(d, "fsync", d->dir, -rc) : 0;
}

int write_file_durable(const char *path, const void *data, size_t len)
{
	struct durable_file d;
	int rc = durable_open(&d, path);
	if (rc == 0)
		rc = write_all(d.fd, data, len);
	return durable_end(&d, rc);
}

int read_file(const char *path, char **out, size_t *len, size_t max)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if ((size_t)st.st_size > max)
		return -EFBIG;
	/*
	 * Files of /proc and cgroupfs stat as empty and are read to their end:
	 * up to @max, and one byte more to tell a longer one. The buffer grows
	 * as they do, so an empty file costs no @max-sized allocation.
	 */
	bool sized = st.st_size > 0;
	size_t first = max + 1 < READ_FILE_FIRST ? max + 1 : READ_FILE_FIRST;
	size_t cap = sized ? (size_t)st.st_size : first;
	_cleanup_free_ char *buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	size_t got = 0;
	for (;;) {
		if (got == cap && (sized || cap > max))
			break;
		if (got == cap) {
			size_t next = cap > (max + 1) / 2 ? max + 1 : cap * 2;
			char *grown = realloc(buf, next + 1);
			if (!grown)
				return -ENOMEM;
			buf = grown;
			cap = next;
		}
		ssize_t n = read(fd, buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got > max)
		return -EFBIG;
	buf[got] = '\0';
	if (len)
		*len = got;
	*out = steal_ptr(buf);
	return 0;
}

int mkdir_p(const char *path, mode_t mode)
{
	char tmp[PATH_MAX];
	int rc = xsnprintf(tmp, sizeof(tmp), "%s", path);
	if (rc < 0)
		return rc;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

struct dirent *dir_next(DIR *d)
{
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de || (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")))
			return de;
	}
}

int rm_rf_at(int parent, const char *name)
{
	if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = dir_next(d)) != NULL)
		rc = rm_rf_at(dirfd(d), de->d_name);
	closedir(d);
	if (rc == 0 && unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		rc = -errno;
	return rc;
}

int rm_rf(const char *path)
{
	return rm_rf_at(AT_FDCWD, path);
}

/* One directory of path_trusted()'s walk. */
static int trusted_one(const char *path, struct err *e)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return err_set(e, errno, "cannot stat %s: %s", path, strerror(errno));
	if (S_ISLNK(st.st_mode))
		return err_set(e, ELOOP, "%s is a symlink", path);
	if (!S_ISDIR(st.st_mode))
		return err_set(e, ENOTDIR, "%s is not a directory", path);
	if (st.st_uid != 0 && st.st_uid != geteuid())
		return err_set(e, EPERM,
			       "%s is owned by uid %u, who could replace what is below it", path,
			       (unsigned)st.st_uid);
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
		return err_set(e, EPERM,
			       "%s is writable by %s and not sticky: they could replace what is "
			       "below it",
			       path, (st.st_mode & S_IWOTH) ? "every user" : "its group");
	return 0;
}

int path_trusted(const char *dir, struct err *e)
{
	char p[PATH_MAX];
	if (dir[0] != '/')
		return err_set(e, EINVAL, "%s is not an absolute path", dir);
	if (xsnprintf(p, sizeof(p), "%s", dir) < 0)
		return err_set(e, ENAMETOOLONG, "path %s is too long", dir);
	int rc = trusted_one("/", e);
	for (char *s = p + 1; rc == 0 && *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		rc = trusted_one(p, e);
		*s = '/';
	}
	if (rc == 0 && p[1])
		rc = trusted_one(p, e);
	return rc;
}

int dir_tighten(int fd, const char *path, mode_t mode, struct err *e)
{
	if (!(mode & 077))
		return 0;
	if (fchmod(fd, 0700) < 0)
		return err_set(e, errno, "cannot make %s 0700: %s", path, strerror(errno));
	/* An earlier version made it 0755: what its user expects now is 0700, and word of it. */
	info("%s was open to other users (mode %04o): it is 0700 now", path,
	     (unsigned)(mode & 07777));
	return 0;
}

/* Why openat(O_DIRECTORY | O_NOFOLLOW) of @name failed with @code, as a sentence in @e. */
static int private_dir_fail(int dfd, const char *dir, const char *name, int code, struct err *e)
{
	struct stat st;
	if ((code == ELOOP || code == ENOTDIR) && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return S_ISLNK(st.st_mode)
			   ? err_set(e, ELOOP, "%s/%s is a symlink", dir, name)
			   : err_set(e, ENOTDIR, "%s/%s is not a directory", dir, name);
	return err_set(e, code, "cannot open %s/%s: %s", dir, name, strerror(code));
}

int private_dir_at(int dfd, const char *dir, const char *name, struct err *e)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return private_dir_fail(dfd, dir, name, errno, e);
	struct stat st;
	int rc = fstat(fd, &st) < 0
		     ? err_set(e, errno, "cannot stat %s/%s: %s", dir, name, strerror(errno))
		     : 0;
	if (rc == 0 && st.st_uid != geteuid())
		rc = err_set(e, EPERM, "%s/%s is owned by uid %u, not by this daemon's uid %u", dir,
			     name, (unsigned)st.st_uid, (unsigned)geteuid());
	if (rc == 0 && (st.st_mode & 077)) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		rc = dir_tighten(fd, path, st.st_mode, e);
	}
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

/* @path as the directory @parent holding entry @name; "/", "." and ".." have none. */
static int split_path(const char *path, char parent[PATH_MAX], char name[NAME_MAX + 1])
{
	char tmp[PATH_MAX];
	if (xsnprintf(tmp, sizeof(tmp), "%s", path) < 0)
		return -ENAMETOOLONG;
	size_t n = strlen(tmp);
	while (n > 1 && tmp[n - 1] == '/')
		tmp[--n] = '\0';
	char *slash = strrchr(tmp, '/');
	const char *leaf = slash ? slash + 1 : tmp;
	if (!*leaf || !strcmp(leaf, ".") || !strcmp(leaf, ".."))
		return -EINVAL;
	if (xsnprintf(name, NAME_MAX + 1, "%s", leaf) < 0)
		return -ENAMETOOLONG;
	if (slash)
		*(slash == tmp ? slash + 1 : slash) = '\0';
	return xsnprintf(parent, PATH_MAX, "%s", slash ? tmp : ".") < 0 ? -ENAMETOOLONG : 0;
}

int private_dir_open(const char *path, char canon[PATH_MAX], struct err *e)
{
	char parent[PATH_MAX], real[PATH_MAX], name[NAME_MAX + 1];
	int rc = split_path(path, parent, name);
	if (rc < 0)
		return err_set(e, -rc, "%s does not name a directory snapfs may use", path);
	rc = mkdir_p(parent, 0700);
	if (rc < 0)
		return err_set(e, -rc, "cannot create %s: %s", parent, strerror(-rc));
	if (!realpath(parent, real))
		return err_set(e, errno, "cannot resolve %s: %s", parent, strerror(errno));
	rc = path_trusted(real, e);
	if (rc < 0)
		return rc;
	if (xsnprintf(canon, PATH_MAX, "%s/%s", strcmp(real, "/") ? real : "", name) < 0)
		return err_set(e, ENAMETOOLONG, "path %s is too long", path);
	_cleanup_close_ int dfd = open(real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return err_set(e, errno, "cannot open %s: %s", real, strerror(errno));
	if (mkdirat(dfd, name, 0700) < 0 && errno != EEXIST)
		return err_set(e, errno, "cannot create %s: %s", canon, strerror(errno));
	return private_dir_at(dfd, real, name, e);
}

int64_t free_bytes(const char *path)
{
	struct statvfs sv;
	if (statvfs(path, &sv) < 0)
		return -errno;
	return (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
}

size_t rstrip(char *s)
{
	size_t n = strlen(s);
	while (n > 0 &&
	       (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		s[--n] = '\0';
	return n;
}

bool str_has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}
