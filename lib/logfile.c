#include "lib/logfile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util.h"

static int open_current(const struct logfile *lf, int extra)
{
	return open(lf->path, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | extra,
		    lf->mode);
}

int logfile_open(struct logfile *lf, const char *path, int64_t max, mode_t mode, int also)
{
	struct stat st;
	pthread_mutex_lock(&lf->lock);
	int rc = xsnprintf(lf->path, sizeof(lf->path), "%s", path);
	if (rc >= 0)
		rc = xsnprintf(lf->prev_path, sizeof(lf->prev_path), "%s.1", path);
	lf->mode = mode;
	int fd = rc < 0 ? -1 : open_current(lf, 0);
	if (rc >= 0 && fd < 0)
		rc = -errno;
	/* O_CREAT keeps the mode of a file an earlier version made wider (0644). */
	if (rc >= 0 && fchmod(fd, mode) < 0)
		rc = -errno;
	if (rc >= 0 && also >= 0 && dup2(fd, also) < 0)
		rc = -errno;
	if (rc >= 0) {
		lf->fd = fd;
		lf->also = also;
		lf->max = max > 0 ? max : 0;
		lf->prev = stat(lf->prev_path, &st) == 0 ? st.st_size : 0;
		lf->gap = 0;
	} else if (fd >= 0) {
		close(fd);
	}
	pthread_mutex_unlock(&lf->lock);
	return rc < 0 ? rc : 0;
}

void logfile_close(struct logfile *lf)
{
	pthread_mutex_lock(&lf->lock);
	if (lf->fd >= 0)
		close(lf->fd);
	lf->fd = -1;
	pthread_mutex_unlock(&lf->lock);
}

/*
 * After an operator moved PATH away (logrotate, `mv`): a fresh PATH, @also
 * pointed at it. A PATH that is still the file we write is left as it is.
 * Open readers keep their offsets: what was before becomes the gap.
 */
int logfile_reopen(struct logfile *lf)
{
	struct stat old, cur, prev;
	pthread_mutex_lock(&lf->lock);
	int fd = lf->fd < 0 ? -1 : open_current(lf, 0);
	int rc = lf->fd < 0 ? -EBADF : fd < 0 ? -errno : 0;
	if (rc == 0 && (fstat(lf->fd, &old) < 0 || fstat(fd, &cur) < 0))
		rc = -errno;
	if (rc == 0 && old.st_dev == cur.st_dev && old.st_ino == cur.st_ino)
		goto out; /* nothing moved */
	if (rc == 0 && fchmod(fd, lf->mode) < 0)
		rc = -errno;
	if (rc == 0 && lf->also >= 0 && dup2(fd, lf->also) < 0)
		rc = -errno;
	if (rc < 0)
		goto out;
	lf->gap = lf->readers ? lf->gap + lf->prev + old.st_size : 0;
	lf->prev = !lf->readers && stat(lf->prev_path, &prev) == 0 ? prev.st_size : 0;
	close(lf->fd);
	lf->fd = fd;
	fd = -1;
out:
	if (fd >= 0)
		close(fd);
	pthread_mutex_unlock(&lf->lock);
	return rc;
}

/*
 * PATH becomes PATH.1 and a fresh PATH is opened. If that open fails, PATH
 * is put back and appends go on there: an oversize file beats lost lines.
 */
static void rotate_locked(struct logfile *lf, int64_t size)
{
	if (rename(lf->path, lf->prev_path) < 0)
		return;
	int fd = open_current(lf, O_EXCL);
	if (fd < 0 || (lf->also >= 0 && dup2(fd, lf->also) < 0)) {
		if (fd >= 0)
			close(fd);
		rename(lf->prev_path, lf->path);
		/* The old PATH.1 is gone all the same. */
		lf->gap = lf->readers ? lf->gap + lf->prev : 0;
		lf->prev = 0;
		return;
	}
	close(lf->fd);
	lf->fd = fd;
	/* Open readers keep their offsets: the old PATH.1's become the gap. */
	lf->gap = lf->readers ? lf->gap + lf->prev : 0;
	lf->prev = size;
}

int logfile_append(struct logfile *lf, const char *data, size_t len)
{
	struct stat st;
	pthread_mutex_lock(&lf->lock);
	/* fstat, not a count of our own writes: @also's writers add to the file too. */
	if (lf->max && fstat(lf->fd, &st) == 0 && st.st_size > 0 &&
	    (uint64_t)st.st_size + len > (uint64_t)lf->max)
		rotate_locked(lf, st.st_size);
	ssize_t n = write(lf->fd, data, len);
	int rc = n < 0 ? -errno : (size_t)n != len ? -EIO : 0;
	pthread_mutex_unlock(&lf->lock);
	return rc;
}

/* Bytes the view has no data for: spaces, and a newline as the gap's last byte. */
static size_t fill(char *buf, size_t n, bool ends_gap)
{
	memset(buf, ' ', n);
	if (n && ends_gap)
		buf[n - 1] = '\n';
	return n;
}

/* Up to @size bytes of PATH.1 at @at (< lf->prev); what it lacks reads as filler. */
static ssize_t read_prev_locked(struct logfile *lf, char *buf, size_t size, int64_t at)
{
	size_t want = (uint64_t)(lf->prev - at) < size ? (size_t)(lf->prev - at) : size;
	_cleanup_close_ int fd = open(lf->prev_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n = fd >= 0 ? pread(fd, buf, want, at) : 0;
	if (n < 0)
		return -errno;
	/* Shorter than when it was rotated (someone truncated it): keep the offsets. */
	if ((size_t)n < want)
		n += (ssize_t)fill(buf + n, want - (size_t)n, at + (int64_t)want == lf->prev);
	return n;
}

/* The part of a read at @off that one region (gap, PATH.1, PATH) holds. */
static ssize_t read_region_locked(struct logfile *lf, char *buf, size_t size, int64_t off)
{
	int64_t base = lf->gap + lf->prev;
	if (off < lf->gap) {
		size_t n = (uint64_t)(lf->gap - off) < size ? (size_t)(lf->gap - off) : size;
		return (ssize_t)fill(buf, n, off + (int64_t)n == lf->gap);
	}
	if (off < base)
		return read_prev_locked(lf, buf, size, off - lf->gap);
	ssize_t n = pread(lf->fd, buf, size, off - base);
	return n < 0 ? -errno : n;
}

ssize_t logfile_read(struct logfile *lf, char *buf, size_t size, int64_t off)
{
	size_t got = 0;
	ssize_t rc = 0;
	if (off < 0)
		return -EINVAL;
	/* @off is the reader's: nothing lies past INT64_MAX, and no sum below may pass it. */
	if ((uint64_t)(INT64_MAX - off) < size)
		size = (size_t)(INT64_MAX - off);
	pthread_mutex_lock(&lf->lock);
	while (got < size) {
		rc = read_region_locked(lf, buf + got, size - got, off + (int64_t)got);
		if (rc <= 0)
			break;
		got += (size_t)rc;
	}
	pthread_mutex_unlock(&lf->lock);
	return got || rc >= 0 ? (ssize_t)got : rc;
}

int logfile_stat(struct logfile *lf, int64_t *size, struct timespec *mtime)
{
	struct stat st;
	pthread_mutex_lock(&lf->lock);
	int rc = fstat(lf->fd, &st) < 0 ? -errno : 0;
	if (rc == 0) {
		*size = lf->gap + lf->prev + st.st_size;
		*mtime = st.st_mtim;
	}
	pthread_mutex_unlock(&lf->lock);
	return rc;
}

void logfile_reader(struct logfile *lf, bool open)
{
	pthread_mutex_lock(&lf->lock);
	if (open)
		lf->readers++;
	else if (lf->readers && --lf->readers == 0)
		lf->gap = 0; /* nobody holds an offset: start again at PATH.1 */
	pthread_mutex_unlock(&lf->lock);
}
