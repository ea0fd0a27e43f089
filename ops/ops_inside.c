/*
 * ops_inside.c - what is inside a sandbox, seen from the host without
 * entering it: its console (runtime/runsc/console.h) and its usage
 * (runtime/runsc/cgroup.h, runtime/net/net.h).
 *
 * Nothing here changes state or takes the operations lock: each call
 * loads the row afresh, as ops_view.c does, and shows only what
 * ops/access.h lets the caller see. No state of its own.
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <string.h>

#include "lib/logfile.h"
#include "runtime/runsc/console.h"

/* --- console ------------------------------------------------------------- */

int ops_sandbox_console_open(const struct caller *who, const char *id, struct logfile **out)
{
	struct sandbox sb;
	char dir[PATH_MAX];
	int rc = ops_sandbox_get(who, id, &sb);
	if (rc == 0)
		rc = sandbox_path(id, NULL, dir, sizeof(dir));
	if (rc < 0)
		return rc;
	struct logfile *lf = console_log_get(dir);
	if (!lf)
		return -ENOMEM;
	/* An open reader keeps its offsets across rotations (lib/logfile.h). */
	logfile_reader(lf, true);
	*out = lf;
	return 0;
}

void ops_sandbox_console_close(struct logfile *lf)
{
	if (!lf)
		return;
	logfile_reader(lf, false);
	console_log_put(lf);
}

ssize_t ops_console_read(struct logfile *lf, char *buf, size_t size, int64_t off)
{
	return console_log_read(lf, buf, size, off);
}

int ops_console_stat(struct logfile *lf, int64_t *size, struct timespec *mtime)
{
	/* No log yet: empty. */
	if (logfile_stat(lf, size, mtime) < 0) {
		*size = 0;
		*mtime = (struct timespec){0};
	}
	return 0;
}
