/*
 * t_dir.h - a temporary directory for a unit test, and paths inside it.
 *
 *     t_dir_make("test_x");            // /tmp/test_x.XXXXXX, into t_base
 *     t_path(p, "store/packs");        // "<t_base>/store/packs"
 *     t_small_fs("small", p);          // a 1 MiB tmpfs on <t_base>/small, or a skip
 *     ...
 *     rm_rf(t_base);
 *
 * or main() as t_dir_main("test_x", tests, n): the dir, each test, the dir gone.
 *
 * Paths are PATH_MAX buffers the caller owns.
 */
#ifndef SNAPFS_T_DIR_H
#define SNAPFS_T_DIR_H

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "lib/util.h"
#include "tests/unit/t.h"

static char t_base[64];

/* Create the directory; false (and a message) if it cannot be made. */
static inline bool t_dir_make(const char *name)
{
	snprintf(t_base, sizeof(t_base), "/tmp/%s.XXXXXX", name);
	if (mkdtemp(t_base))
		return true;
	perror("mkdtemp");
	return false;
}

static inline void t_path(char out[PATH_MAX], const char *rel)
{
	if (snprintf(out, PATH_MAX, "%s/%s", t_base, rel) >= PATH_MAX)
		abort(); /* a test's own paths are short */
}

static inline bool t_exists(const char *rel)
{
	char p[PATH_MAX];
	struct stat st;
	t_path(p, rel);
	return stat(p, &st) == 0;
}

/* Entries in @rel other than "." and "..", or -1 if it cannot be read. */
static inline int t_entries(const char *rel)
{
	char p[PATH_MAX];
	t_path(p, rel);
	DIR *d = opendir(p);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

/* Write @rel durably (its directory must exist); a failure is a failed check. */
static inline void t_write(const char *rel, const void *data, size_t len)
{
	char p[PATH_MAX];
	t_path(p, rel);
	CHECK(write_file_durable(p, data, len) == 0);
}

/*
 * A tmpfs of @size ("1m", "100m") on <t_base>/@rel (path into @dir), in a
 * mount namespace of this process's own, for what a full disk does; false,
 * and a skip, where that needs a privilege this run lacks. The caller
 * unmounts @dir.
 */
static inline bool t_tmpfs(const char *rel, const char *size, char dir[PATH_MAX])
{
	char opts[64];
	t_path(dir, rel);
	mkdir(dir, 0755);
	snprintf(opts, sizeof(opts), "size=%s", size);
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", dir, "tmpfs", 0, opts) < 0) {
		SKIP("a full disk: cannot mount a %s tmpfs: %s", size, strerror(errno));
		return false;
	}
	return true;
}

/* A 1 MiB one. */
static inline bool t_small_fs(const char *rel, char dir[PATH_MAX])
{
	return t_tmpfs(rel, "1m", dir);
}

/* main() of a test in a temp dir: the dir (/tmp/@name.XXXXXX), each of @tests, the dir gone. */
static inline int t_dir_main(const char *name, void (*const tests[])(void), size_t n)
{
	if (!t_dir_make(name))
		return 1;
	for (size_t i = 0; i < n; i++)
		tests[i]();
	rm_rf(t_base);
	return t_done();
}

static inline void t_random(unsigned char *p, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = getrandom(p + off, len - off, 0);
		if (n > 0)
			off += (size_t)n;
	}
}

#endif
