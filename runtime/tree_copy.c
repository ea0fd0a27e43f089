/*
 * tree_copy.c - tree_copy(): cp -a --reflink=auto, then syncfs (tree_copy.h).
 */
#include "runtime/tree_copy.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "lib/spawn.h"
#include "lib/util.h"

/* The first line cp says, kept to this. */
#define CP_SAYS_MAX 512

struct said {
	char text[CP_SAYS_MAX];
	size_t len;
};

static int keep_text(void *arg, const char *data, size_t len)
{
	struct said *s = arg;
	size_t room = sizeof(s->text) - 1 - s->len;
	size_t n = len < room ? len : room;
	memcpy(s->text + s->len, data, n);
	s->len += n;
	s->text[s->len] = '\0';
	return 0;
}

/* Not the daemon's environment, which may hold the store's credentials. */
static char *const cp_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};

int tree_copy(const char *src, const char *dst, struct err *e)
{
	const char *argv[] = {"cp", "-a", "--reflink=auto", "--no-target-directory", "--", src,
			      dst,  NULL};
	struct said said = {.len = 0};
	struct spawn s = {.argv = argv,
			  .envp = cp_env,
			  .out_fd = -1,
			  .err_fd = -1,
			  .in_fd = -1,
			  .sink = keep_text,
			  .sink_arg = &said,
			  .timeout_ms = TREE_COPY_TIMEOUT_MS};
	int rc = spawn_run(&s);
	if (rc < 0)
		return err_set(e, EIO, "cannot run cp to copy %s: %s", src, strerror(-rc));
	char *nl = strchr(said.text, '\n');
	if (nl)
		*nl = '\0';
	if (s.end == SPAWN_TIMED_OUT)
		return err_set(e, EIO, "copying %s to %s took over %lld s and was stopped", src,
			       dst, TREE_COPY_TIMEOUT_MS / 1000);
	if (s.end != SPAWN_EXITED || spawn_code(s.status) != 0)
		return err_set(e, EIO, "cannot copy %s to %s: %s", src, dst,
			       said.text[0] ? said.text : "cp failed");
	_cleanup_close_ int fd = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || syncfs(fd) < 0)
		return err_set(e, EIO, "cannot sync the copy %s: %s", dst, strerror(errno));
	return 0;
}
