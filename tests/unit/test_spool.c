/*
 * test_spool.c - the spool in a directory every user may write
 * (runtime/spool.h) and the private directories under it (lib/util.h):
 * what counts as the daemon's own, what is left alone, what is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "runtime/spool.h"
#include "tests/unit/t_dir.h"

#define STATE "/var/lib/snapfs-test-state"

static unsigned mode_of(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0;
}

static void write_text(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	CHECK(fd >= 0 && write_all(fd, text, strlen(text)) == 0);
	if (fd >= 0)
		close(fd);
	CHECK(chmod(path, mode) == 0);
}

/* A directory in @rel looking as the daemon's own would, with its marker naming @state. */
static void make_spool_like(const char *rel, mode_t mode, const char *state, mode_t marker_mode)
{
	char p[PATH_MAX], text[PATH_MAX];
	t_path(p, rel);
	CHECK(mkdir(p, 0700) == 0 && chmod(p, mode) == 0);
	snprintf(text, sizeof(text), "%s\n", state);
	snprintf(p + strlen(p), PATH_MAX - strlen(p), "/%s", SPOOL_MARKER);
	write_text(p, text, marker_mode);
}

/* A --spool parent <t_base>/@rel of @mode, its path into @parent. */
static void make_parent(const char *rel, mode_t mode, char parent[PATH_MAX])
{
	t_path(parent, rel);
	CHECK(mkdir(parent, 0700) == 0);
	CHECK(chmod(parent, mode) == 0);
}

static void test_fresh_spool(void)
{
	char parent[PATH_MAX], path[PATH_MAX], marker[PATH_MAX + 32];
	struct err e = {0};
	make_parent("shm", 01777, parent);
	CHECK(spool_open(parent, STATE, path, &e) == 0);
	CHECK(spool_fd() >= 0);
	CHECK(str_has_prefix(path, parent) && strstr(path, "/" SPOOL_PREFIX) != NULL);
	CHECK(mode_of(path) == 0700);
	snprintf(marker, sizeof(marker), "%s/%s", path, SPOOL_MARKER);
	char *text = NULL;
	CHECK(read_file(marker, &text, NULL, 4096) == 0);
	CHECK_STR(text, STATE "\n");
	free(text);
	CHECK(mode_of(marker) == 0600);
	spool_close();
	CHECK(spool_fd() == -1);
	CHECK(t_entries("shm") == 0); /* empty: removed, marker and all */
}

/* A spool left non-empty (an interrupted checkpoint) is found again, then emptied. */
static void test_restart_adopts(void)
{
	char parent[PATH_MAX], path[PATH_MAX], again[PATH_MAX], p[PATH_MAX + 32];
	struct err e = {0};
	t_path(parent, "shm");
	CHECK(spool_open(parent, STATE, path, &e) == 0);
	CHECK(mkdirat(spool_fd(), "snap-1", 0700) == 0);
	snprintf(p, sizeof(p), "%s/snap-1/pages.img", path);
	write_text(p, "pages", 0600);
	spool_close();
	CHECK(mode_of(path) == 0700); /* kept */
	CHECK(spool_open(parent, STATE, again, &e) == 0);
	CHECK_STR(again, path);
	spool_empty(NULL, NULL);
	snprintf(p, sizeof(p), "%s/snap-1", path);
	CHECK(mode_of(p) == 0);
	snprintf(p, sizeof(p), "%s/%s", path, SPOOL_MARKER);
	CHECK(mode_of(p) == 0600);
	spool_close();
	CHECK(t_entries("shm") == 0);
}

/* Things that look like a spool of ours but are not: never taken, never touched. */
static void test_foreign_left_alone(void)
{
	char parent[PATH_MAX], path[PATH_MAX], p[PATH_MAX], q[PATH_MAX];
	struct err e = {0};
	t_path(parent, "shm");
	make_spool_like("shm/" SPOOL_PREFIX "open", 0755, STATE, 0600);
	make_spool_like("shm/" SPOOL_PREFIX "other", 0700, "/srv/other-state", 0600);
	make_spool_like("shm/" SPOOL_PREFIX "marker-0644", 0700, STATE, 0644);
	/* A marker that is a symlink to a good one, and a spool that is a symlink. */
	make_spool_like("elsewhere", 0700, STATE, 0600);
	t_path(p, "shm/" SPOOL_PREFIX "marker-link");
	CHECK(mkdir(p, 0700) == 0);
	t_path(q, "elsewhere/" SPOOL_MARKER);
	snprintf(p + strlen(p), sizeof(p) - strlen(p), "/%s", SPOOL_MARKER);
	CHECK(symlink(q, p) == 0);
	t_path(p, "shm/" SPOOL_PREFIX "link");
	t_path(q, "elsewhere");
	CHECK(symlink(q, p) == 0);

	CHECK(spool_open(parent, STATE, path, &e) == 0);
	const char *foreign[] = {"open", "other", "marker-0644", "marker-link", "link"};
	for (size_t i = 0; i < ARRAY_SIZE(foreign); i++) {
		char rel[64];
		snprintf(rel, sizeof(rel), "shm/" SPOOL_PREFIX "%s", foreign[i]);
		t_path(p, rel);
		CHECK(strcmp(path, p) != 0);
		snprintf(rel, sizeof(rel), "shm/" SPOOL_PREFIX "%s/" SPOOL_MARKER, foreign[i]);
		CHECK(t_exists(rel));
	}
	CHECK(t_entries("shm") == 6);
	spool_close();
	CHECK(t_entries("shm") == 5);
	CHECK(t_entries("elsewhere") == 1);
	rm_rf(parent);
}

/* Two spools of this state directory (say, from a crash in between): one is kept. */
static void test_second_removed(void)
{
	static const char *const spools[] = {"shm/" SPOOL_PREFIX "a", "shm/" SPOOL_PREFIX "b"};
	char parent[PATH_MAX], path[PATH_MAX];
	struct err e = {0};
	make_parent("shm", 0700, parent);
	for (size_t i = 0; i < ARRAY_SIZE(spools); i++)
		make_spool_like(spools[i], 0700, STATE, 0600);
	CHECK(spool_open(parent, STATE, path, &e) == 0);
	CHECK(t_entries("shm") == 1);
	CHECK(strstr(path, "/" SPOOL_PREFIX "a") || strstr(path, "/" SPOOL_PREFIX "b"));
	spool_close();
	CHECK(t_entries("shm") == 0);
	rm_rf(parent);
}

/* A parent others may write (not sticky) could have our directory swapped: refused. */
static void test_untrusted_parent(void)
{
	char parent[PATH_MAX], path[PATH_MAX];
	struct err e = {0};
	make_parent("open", 0777, parent);
	CHECK(spool_open(parent, STATE, path, &e) == -EPERM);
	CHECK(strstr(e.msg, "writable by every user") != NULL);
	CHECK(t_entries("open") == 0);
	CHECK(chmod(parent, 0770) == 0);
	CHECK(spool_open(parent, STATE, path, &e) == -EPERM);
	CHECK(strstr(e.msg, "writable by its group") != NULL);
	rm_rf(parent);
}

static void test_private_dir(void)
{
	char p[PATH_MAX], q[PATH_MAX], canon[PATH_MAX];
	struct err e = {0};
	t_path(p, "state/deep");
	int fd = private_dir_open(p, canon, &e);
	CHECK(fd >= 0);
	CHECK_STR(canon, p);
	CHECK(mode_of(p) == 0700);
	t_path(q, "state");
	CHECK(mode_of(q) == 0700); /* a missing parent too */
	close(fd);
	CHECK(chmod(p, 0755) == 0);
	fd = private_dir_open(p, canon, &e);
	CHECK(fd >= 0 && mode_of(p) == 0700); /* an earlier version's, tightened */
	close(fd);
	/* Trailing slashes, and a parent reached through a symlink: the canonical path. */
	t_path(q, "state-link");
	CHECK(symlink(p, q) == 0);
	snprintf(q + strlen(q), sizeof(q) - strlen(q), "/");
	CHECK(private_dir_open(q, canon, &e) == -ELOOP);
	CHECK(strstr(e.msg, "is a symlink") != NULL);
	t_path(q, "state-link2");
	t_path(p, "state");
	CHECK(symlink(p, q) == 0);
	snprintf(q + strlen(q), sizeof(q) - strlen(q), "/deep//");
	fd = private_dir_open(q, canon, &e);
	CHECK(fd >= 0);
	t_path(p, "state/deep");
	CHECK_STR(canon, p);
	if (fd >= 0)
		close(fd);
	CHECK(private_dir_open("/", canon, &e) == -EINVAL);
	t_path(p, "state/..");
	CHECK(private_dir_open(p, canon, &e) == -EINVAL);
	t_path(p, "file");
	write_text(p, "x", 0600);
	CHECK(private_dir_open(p, canon, &e) == -ENOTDIR);
	if (geteuid() == 0) {
		t_path(p, "nobodys");
		CHECK(mkdir(p, 0700) == 0 && chown(p, 65534, 65534) == 0);
		CHECK(private_dir_open(p, canon, &e) == -EPERM);
		CHECK(strstr(e.msg, "owned by uid 65534") != NULL);
		CHECK(mode_of(p) == 0700);
	}
}

int main(void)
{
	static void (*const tests[])(void) = {
	    test_fresh_spool,	 test_restart_adopts,	test_foreign_left_alone,
	    test_second_removed, test_untrusted_parent, test_private_dir,
	};
	return t_dir_main("test_spool", tests, ARRAY_SIZE(tests));
}
