#include "runtime/spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Random hex digits in a --spool directory's name, and how often a clash is retried. */
#define SPOOL_HEX 16
#define CREATE_TRIES 8

static struct {
	int parent_fd; /* the directory holding the spool */
	int fd;
	bool shared; /* in a --spool DIR, with a marker */
	char name[NAME_MAX + 1];
	char parent[PATH_MAX];
} spool = {.parent_fd = -1, .fd = -1};

int spool_fd(void)
{
	return spool.fd;
}

/* The open directory @dfd is one this daemon made for @state_dir (spool.h). */
static bool is_ours(int dfd, const char *state_dir)
{
	struct stat st;
	if (fstat(dfd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 07777) != 0700)
		return false;
	_cleanup_close_ int fd =
	    openat(dfd, SPOOL_MARKER, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 07777) != 0600)
		return false;
	char buf[PATH_MAX + 1];
	size_t len = strlen(state_dir);
	ssize_t n = read(fd, buf, sizeof(buf));
	return n >= 0 && (size_t)n == len + 1 && memcmp(buf, state_dir, len) == 0 &&
	       buf[len] == '\n';
}

/* In DIR: take over the spool a predecessor on @state_dir left; remove any second one. */
static void adopt(const char *state_dir)
{
	int dup_fd = dup(spool.parent_fd);
	DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return;
	}
	rewinddir(d);
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (!str_has_prefix(de->d_name, SPOOL_PREFIX))
			continue;
		int fd = openat(spool.parent_fd, de->d_name,
				O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!is_ours(fd, state_dir)) {
			close(fd);
			continue;
		}
		if (spool.fd < 0) {
			spool.fd = fd;
			snprintf(spool.name, sizeof(spool.name), "%s", de->d_name);
			continue;
		}
		close(fd);
		/* Ours and root's, in a directory no one else may rename entries of. */
		info("removing %s/%s, a second spool of the state directory %s", spool.parent,
		     de->d_name, state_dir);
		rm_rf_at(spool.parent_fd, de->d_name);
	}
	closedir(d);
}

/* Write the marker naming @state_dir into the new spool. */
static int write_marker(const char *state_dir, struct err *e)
{
	_cleanup_close_ int fd = openat(spool.fd, SPOOL_MARKER,
					O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int rc = fd < 0 ? -errno : 0;
	if (rc == 0)
		rc = write_all(fd, state_dir, strlen(state_dir));
	if (rc == 0)
		rc = write_all(fd, "\n", 1);
	if (rc < 0)
		return err_set(e, -rc, "cannot write %s/%s/%s: %s", spool.parent, spool.name,
			       SPOOL_MARKER, strerror(-rc));
	return 0;
}

/* In DIR: a new directory of a random name, made by mkdir (never one already there). */
static int create(const char *state_dir, struct err *e)
{
	int rc = -EEXIST;
	for (int i = 0; i < CREATE_TRIES && rc == -EEXIST; i++) {
		rc = random_name(SPOOL_PREFIX, SPOOL_HEX, spool.name, sizeof(spool.name));
		if (rc == 0 && mkdirat(spool.parent_fd, spool.name, 0700) < 0)
			rc = -errno;
	}
	if (rc < 0)
		return err_set(e, -rc, "cannot create a spool directory in %s: %s", spool.parent,
			       strerror(-rc));
	spool.fd =
	    openat(spool.parent_fd, spool.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (spool.fd < 0)
		rc = err_set(e, errno, "cannot open %s/%s: %s", spool.parent, spool.name,
			     strerror(errno));
	else
		rc = write_marker(state_dir, e);
	if (rc < 0)
		rm_rf_at(spool.parent_fd, spool.name);
	return rc;
}

/* --spool @parent: a directory root alone can change, made root's 0700 if it is not there. */
static int open_parent(const char *parent, struct err *e)
{
	int rc = mkdir_p(parent, 0700);
	if (rc < 0)
		return err_set(e, -rc, "cannot create the spool directory %s: %s", parent,
			       strerror(-rc));
	if (!realpath(parent, spool.parent))
		return err_set(e, errno, "cannot resolve the spool directory %s: %s", parent,
			       strerror(errno));
	rc = path_trusted(spool.parent, e);
	if (rc < 0)
		return rc;
	spool.parent_fd = open(spool.parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (spool.parent_fd < 0)
		return err_set(e, errno, "cannot open the spool directory %s: %s", spool.parent,
			       strerror(errno));
	return 0;
}

static int open_in_state(const char *state_dir, struct err *e)
{
	snprintf(spool.parent, sizeof(spool.parent), "%s", state_dir);
	snprintf(spool.name, sizeof(spool.name), "spool");
	spool.parent_fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (spool.parent_fd < 0)
		return err_set(e, errno, "cannot open %s: %s", state_dir, strerror(errno));
	if (mkdirat(spool.parent_fd, spool.name, 0700) < 0 && errno != EEXIST)
		return err_set(e, errno, "cannot create %s/spool: %s", state_dir, strerror(errno));
	spool.fd = private_dir_at(spool.parent_fd, state_dir, spool.name, e);
	return spool.fd < 0 ? spool.fd : 0;
}

int spool_open(const char *parent, const char *state_dir, char path[PATH_MAX], struct err *e)
{
	int rc;
	spool.shared = parent != NULL;
	if (!spool.shared) {
		rc = open_in_state(state_dir, e);
	} else {
		rc = open_parent(parent, e);
		if (rc == 0)
			adopt(state_dir);
		if (rc == 0 && spool.fd < 0)
			rc = create(state_dir, e);
	}
	if (rc == 0 && xsnprintf(path, PATH_MAX, "%s/%s", spool.parent, spool.name) < 0)
		rc = err_set(e, ENAMETOOLONG, "the spool path %s/%s is too long", spool.parent,
			     spool.name);
	if (rc < 0)
		spool_close();
	return rc;
}

/* <snap_id>.whole, the name of @snap_id's wholeness mark. */
static int whole_name(const char *snap_id, char name[NAME_MAX + 1])
{
	return xsnprintf(name, NAME_MAX + 1, "%s" SPOOL_WHOLE_SUFFIX, snap_id) < 0 ? -ENAMETOOLONG
										   : 0;
}

int spool_mark_whole(const char *snap_id)
{
	char name[NAME_MAX + 1];
	int rc = whole_name(snap_id, name);
	if (rc < 0)
		return rc;
	/* What runsc wrote reaches the disk before the mark says it is there. */
	if (syncfs(spool.fd) < 0)
		return -errno;
	int fd = openat(spool.fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

bool spool_is_whole(const char *snap_id)
{
	char name[NAME_MAX + 1];
	struct stat st;
	return whole_name(snap_id, name) == 0 &&
	       fstatat(spool.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

void spool_unmark(const char *snap_id)
{
	char name[NAME_MAX + 1];
	if (whole_name(snap_id, name) == 0)
		unlinkat(spool.fd, name, 0);
}

/* Is @name a checkpoint @keep wants, or the mark of one? */
static bool kept(const char *name, bool (*keep)(const char *snap_id, void *arg), void *arg)
{
	char id[NAME_MAX + 1];
	size_t n = strlen(name), sn = strlen(SPOOL_WHOLE_SUFFIX);
	snprintf(id, sizeof(id), "%s", name);
	if (n > sn && !strcmp(name + n - sn, SPOOL_WHOLE_SUFFIX))
		id[n - sn] = '\0';
	return keep && keep(id, arg);
}

/*
 * Apply rm_rf_at (when @remove) to each entry but the marker and those
 * @keep wants; how many there are.
 */
static int each_entry(bool remove, bool (*keep)(const char *snap_id, void *arg), void *arg)
{
	int dup_fd = spool.fd < 0 ? -1 : dup(spool.fd);
	DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return -1;
	}
	rewinddir(d); /* the dup shares its offset with every earlier walk's */
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    (spool.shared && !strcmp(de->d_name, SPOOL_MARKER)))
			continue;
		n++;
		if (remove && !kept(de->d_name, keep, arg))
			rm_rf_at(spool.fd, de->d_name);
	}
	closedir(d);
	return n;
}

void spool_empty(bool (*keep)(const char *snap_id, void *arg), void *arg)
{
	each_entry(true, keep, arg);
}

void spool_close(void)
{
	/* Kept when a checkpoint was interrupted: the restart reconciles it. */
	if (spool.fd >= 0 && each_entry(false, NULL, NULL) == 0) {
		if (spool.shared)
			unlinkat(spool.fd, SPOOL_MARKER, 0);
		unlinkat(spool.parent_fd, spool.name, AT_REMOVEDIR);
	}
	if (spool.fd >= 0)
		close(spool.fd);
	if (spool.parent_fd >= 0)
		close(spool.parent_fd);
	spool.fd = spool.parent_fd = -1;
}
