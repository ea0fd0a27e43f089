#include "runtime/runsc/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "lib/names.h"

/* Most processes of one container moved in one pass: its gofer, sandbox and stubs. */
#define PIDS_MAX 8192

int cgroup_path(const char *parent, const char *cid, char *out, size_t size)
{
	return xsnprintf(out, size, "%s/%s", parent, cid) < 0 ? -ENAMETOOLONG : 0;
}

/* systemd's hybrid layout: /sys/fs/cgroup holds v1 hierarchies, CGROUP_UNIFIED_MOUNT is v2. */
static bool hybrid(void)
{
	struct statfs fs;
	if (statfs("/sys/fs/cgroup", &fs) < 0 || fs.f_type == CGROUP2_SUPER_MAGIC)
		return false;
	return statfs(CGROUP_UNIFIED_MOUNT, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

static int pid_cmp(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

/* The pids of @procs, sorted, into @out; -ENOENT when the cgroup is gone. */
static int read_pids(const char *procs, pid_t *out, size_t *n, struct err *e)
{
	/* stdio, not read_file(): a cgroup file's size is 0 whatever it holds. */
	_cleanup_fclose_ FILE *f = fopen(procs, "re");
	int pid;
	if (!f && errno == ENOENT)
		return -ENOENT;
	if (!f)
		return err_set(e, errno, "cannot read %s: %s", procs, strerror(errno));
	for (*n = 0; fscanf(f, "%d", &pid) == 1; (*n)++) {
		if (*n == PIDS_MAX)
			return err_set(e, E2BIG, "%s lists more than %d processes", procs,
				       PIDS_MAX);
		out[*n] = (pid_t)pid;
	}
	if (ferror(f))
		return err_set(e, EIO, "cannot read %s", procs);
	qsort(out, *n, sizeof(*out), pid_cmp);
	return 0;
}

/* Write each of @pids into @to_fd (a cgroup.procs); one that exited meanwhile is skipped. */
static int move_pids(int to_fd, const char *to, const pid_t *pids, size_t n, struct err *e)
{
	char line[24];
	for (size_t i = 0; i < n; i++) {
		int len = snprintf(line, sizeof(line), "%d", (int)pids[i]);
		if (write(to_fd, line, (size_t)len) < 0 && errno != ESRCH)
			return err_set(e, errno, "cannot move process %d into %s: %s", (int)pids[i],
				       to, strerror(errno));
	}
	return 0;
}

/*
 * Move the processes of v1 cgroup @from into v2 cgroup @to_dir, reading
 * @from again until a pass lists the pids the pass before moved: a child
 * forked from a process not moved yet shows up as new, and one forked after
 * its parent moved is born in @to_dir.
 */
static int adopt_one(const char *from, const char *to_dir, struct err *e)
{
	char procs[PATH_MAX], to[PATH_MAX];
	size_t n = 0, nprev = 0;
	_cleanup_free_ pid_t *pids = calloc(2 * PIDS_MAX, sizeof(*pids));
	if (!pids)
		return err_set(e, ENOMEM, "cannot move the processes of %s", from);
	pid_t *cur = pids, *prev = pids + PIDS_MAX;
	if (xsnprintf(procs, sizeof(procs), "%s/cgroup.procs", from) < 0 ||
	    xsnprintf(to, sizeof(to), "%s/cgroup.procs", to_dir) < 0)
		return err_set(e, ENAMETOOLONG, "cgroup path too long: %s", from);
	int rc = read_pids(procs, cur, &n, e);
	if (rc < 0 || n == 0) /* no cgroup (a fake runsc), no process: nothing to move */
		return rc == -ENOENT ? 0 : rc;
	rc = mkdir_p(to_dir, 0755);
	_cleanup_close_ int fd = rc < 0 ? -1 : open(to, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, rc < 0 ? -rc : errno, "cannot open %s: %s", to,
			       strerror(rc < 0 ? -rc : errno));
	for (int pass = 0; pass < CGROUP_ADOPT_PASSES; pass++) {
		if (pass > 0 && n == nprev && memcmp(cur, prev, n * sizeof(*cur)) == 0)
			return 0;
		rc = move_pids(fd, to, cur, n, e);
		if (rc < 0)
			return rc;
		pid_t *t = prev;
		prev = cur;
		cur = t;
		nprev = n;
		rc = read_pids(procs, cur, &n, e);
		if (rc == -ENOENT) /* the container ended meanwhile */
			return 0;
		if (rc < 0)
			return rc;
	}
	return err_set(e, EAGAIN, "the processes of %s keep changing: not all moved into %s", from,
		       to_dir);
}

/*
 * adopt_one() for every container cgroup under @from_dir: only those named
 * as snapfs names containers, for a parent such as /system.slice holds
 * every service's cgroup too.
 */
static int adopt_all(const char *from_dir, const char *to_dir, struct err *e)
{
	char from[PATH_MAX];
	DIR *d = opendir(from_dir);
	if (!d)
		return errno == ENOENT
			   ? 0
			   : err_set(e, errno, "cannot list %s: %s", from_dir, strerror(errno));
	int rc = 0;
	for (struct dirent *de = readdir(d); de && rc == 0; de = readdir(d)) {
		if (de->d_type != DT_DIR || !runtime_id_ok(de->d_name))
			continue;
		rc = xsnprintf(from, sizeof(from), "%s/%s", from_dir, de->d_name) < 0
			 ? err_set(e, ENAMETOOLONG, "cgroup path too long: %s", from_dir)
			 : adopt_one(from, to_dir, e);
	}
	closedir(d);
	return rc;
}

int cgroup_adopt_from(const char *v1, const char *v2, const char *parent, const char *cid,
		      struct err *e)
{
	char from[PATH_MAX], to_dir[PATH_MAX];
	if (xsnprintf(to_dir, sizeof(to_dir), "%s%s", v2, parent) < 0 ||
	    xsnprintf(from, sizeof(from), "%s%s%s%s", v1, parent, cid ? "/" : "", cid ? cid : "") <
		0)
		return err_set(e, ENAMETOOLONG, "cgroup path too long: %s", parent);
	return cid ? adopt_one(from, to_dir, e) : adopt_all(from, to_dir, e);
}

int cgroup_adopt(const char *parent, const char *cid, struct err *e)
{
	return hybrid() ? cgroup_adopt_from(CGROUP_V1_TRACKER, CGROUP_UNIFIED_MOUNT, parent, cid, e)
			: 0;
}

int cgroup_open(const char *parent, char out[CGROUP_PARENT_MAX], struct err *e)
{
	struct err why = {0};
	if (!parent)
		parent = CGROUP_PARENT_DEFAULT;
	if (!cgroup_parent_ok(parent))
		return err_set(
		    e, EINVAL,
		    "--cgroup-parent %s is not an absolute cgroup path of [A-Za-z0-9._-] "
		    "names, each starting alphanumeric, shorter than %d bytes",
		    parent, CGROUP_PARENT_MAX);
	snprintf(out, CGROUP_PARENT_MAX, "%s", parent);
	if (cgroup_adopt(out, NULL, &why) < 0)
		warning("sandboxes may still be in the daemon's cgroup: %s", why.msg);
	return 0;
}

/* --- limits and usage (docs/limits.md) --------------------------------------- */

/* /sys/fs/cgroup is one cgroup v2 tree (no v1 hierarchies). */
static bool unified(void)
{
	struct statfs fs;
	return statfs("/sys/fs/cgroup", &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

/* Does the first line of @path hold @word between blanks? */
static bool file_has_word(const char *path, const char *word)
{
	char line[512];
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	if (!f || !fgets(line, sizeof(line), f))
		return false;
	for (char *save = NULL, *w = strtok_r(line, " \n", &save); w;
	     w = strtok_r(NULL, " \n", &save))
		if (strcmp(w, word) == 0)
			return true;
	return false;
}

/* Is controller @name there, as a v1 hierarchy or in the v2 root's cgroup.controllers? */
static bool controller(const char *name)
{
	char path[PATH_MAX];
	struct stat st;
	if (unified())
		return file_has_word("/sys/fs/cgroup/cgroup.controllers", name);
	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s", name);
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int cgroup_can_limit(const struct resources *r, const char *what, struct err *e)
{
	static const char *const controllers[] = {
	    [RES_MEMORY] = "memory", [RES_CPUS] = "cpu", [RES_PIDS] = "pids"};
	for (enum res_kind k = RES_MEMORY; k <= RES_PIDS; k++)
		if (res_get(r, k) != 0 && !controller(controllers[k]))
			return err_set(e, EINVAL,
				       "runsc cannot enforce %s %s on this host: it has no %s "
				       "cgroup controller (write 0 for unlimited)",
				       what, res_name(k), controllers[k]);
	return 0;
}

/* The number after @key in cgroup file @path ("key N" lines; NULL @key: the first number). */
static int64_t read_counter(const char *path, const char *key)
{
	char line[256], k[64];
	long long v;
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		if (!key && sscanf(line, "%lld", &v) == 1)
			return v;
		if (key && sscanf(line, "%63s %lld", k, &v) == 2 && strcmp(k, key) == 0)
			return v;
	}
	return -1;
}

/* One counter of @cid: v1 file @file in hierarchy @hier under @root, or in the v2 tree; @key as
 * above. */
static int64_t counter(const char *root, bool v2, const char *parent, const char *cid,
		       const char *hier, const char *file, const char *key)
{
	char path[PATH_MAX];
	if (v2)
		snprintf(path, sizeof(path), "%s%s/%s/%s", root, parent, cid, file);
	else
		snprintf(path, sizeof(path), "%s/%s%s/%s/%s", root, hier, parent, cid, file);
	return read_counter(path, key);
}

int cgroup_usage_at(const char *root, bool v2, const char *parent, const char *cid,
		    struct cgroup_usage *u)
{
	u->memory_bytes = counter(root, v2, parent, cid, "memory",
				  v2 ? "memory.current" : "memory.usage_in_bytes", NULL);
	u->memory_peak = counter(root, v2, parent, cid, "memory",
				 v2 ? "memory.peak" : "memory.max_usage_in_bytes", NULL);
	u->cpu_ns = v2 ? counter(root, v2, parent, cid, "", "cpu.stat", "usage_usec")
		       : counter(root, v2, parent, cid, "cpuacct", "cpuacct.usage", NULL);
	if (v2 && u->cpu_ns >= 0)
		u->cpu_ns *= 1000;
	u->oom_kills = counter(root, v2, parent, cid, "memory",
			       v2 ? "memory.events" : "memory.oom_control", "oom_kill");
	u->pids_max = counter(root, v2, parent, cid, "pids", "pids.events", "max");
	bool none = u->memory_bytes < 0 && u->cpu_ns < 0 && u->oom_kills < 0 && u->pids_max < 0;
	return none ? -ENOENT : 0;
}

int cgroup_usage(const char *parent, const char *cid, struct cgroup_usage *u)
{
	return cgroup_usage_at("/sys/fs/cgroup", unified(), parent, cid, u);
}

int cgroup_cpu_normal_at(const char *root, bool v2, const char *parent, const char *cid,
			 struct err *e)
{
	char path[PATH_MAX];
	const char *value = v2 ? "100" : "1024"; /* the kernel's default weight */
	int n = v2 ? snprintf(path, sizeof(path), "%s%s/%s/cpu.weight", root, parent, cid)
		   : snprintf(path, sizeof(path), "%s/cpu%s/%s/cpu.shares", root, parent, cid);
	if (n < 0 || (size_t)n >= sizeof(path))
		return err_set(e, ENAMETOOLONG, "cgroup of %s: path too long", cid);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, errno, "cannot open %s: %s", path, strerror(errno));
	ssize_t w = write(fd, value, strlen(value));
	int saved = errno;
	close(fd);
	if (w != (ssize_t)strlen(value))
		return err_set(e, w < 0 ? saved : EIO, "cannot write %s: %s", path,
			       strerror(w < 0 ? saved : EIO));
	return 0;
}

int cgroup_cpu_normal(const char *parent, const char *cid, struct err *e)
{
	return cgroup_cpu_normal_at("/sys/fs/cgroup", unified(), parent, cid, e);
}

/* How far counter @now moved past @then (-1: unread, as 0); below it: a new cgroup's. */
static int64_t moved(int64_t now, int64_t then)
{
	if (now <= 0)
		return 0;
	return then > 0 && now >= then ? now - then : now;
}

int cgroup_limit_hit(const struct cgroup_usage *u, const struct cgroup_usage *base,
		     const struct resources *res, char *msg, size_t size)
{
	char limit[RES_WORD_MAX];
	int64_t oom = moved(u->oom_kills, base ? base->oom_kills : 0);
	int64_t pids = moved(u->pids_max, base ? base->pids_max : 0);
	/* A kill under no limit of its own was the host's (or a parent's): not this limit. */
	if (oom > 0 && res->memory_bytes > 0) {
		res_format(res, RES_MEMORY, limit);
		snprintf(
		    msg, size,
		    "out of memory: the sandbox went over its memory limit of %s bytes and the "
		    "host's OOM killer ended it",
		    limit);
		return 1;
	}
	if (pids > 0 && res->pids > 0) {
		res_format(res, RES_PIDS, limit);
		snprintf(msg, size,
			 "task limit reached: the sandbox's runtime asked for more host tasks than "
			 "the host's backstop for its pids limit of %s allows and runsc ended it",
			 limit);
		return 1;
	}
	return 0;
}
