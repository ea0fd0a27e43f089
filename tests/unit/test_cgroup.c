/*
 * test_cgroup.c - runtime/runsc/cgroup.c without touching the host's cgroups:
 * the path of a sandbox's cgroup, the --cgroup-parent check, and adoption
 * from a parent no container has (nothing moved, no error), and which
 * cgroups a start-up adoption takes, on a tree of plain files. Moving real
 * processes is tests/integration/test_cgroup.sh's.
 */
#include "runtime/runsc/cgroup.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/t.h"
#include "tests/unit/t_dir.h"

static void test_path(void)
{
	char out[64];
	CHECK(cgroup_path("/snapfs.slice", "snapfs-0123", out, sizeof(out)) == 0);
	CHECK_STR(out, "/snapfs.slice/snapfs-0123");
	CHECK(cgroup_path("/snapfs.slice", "snapfs-0123", out, 20) == -ENAMETOOLONG);
}

static void test_open(void)
{
	char out[CGROUP_PARENT_MAX], parent[64];
	struct err e = {0};
	const char *bad[] = {"snapfs.slice", "/a/../b", "system.slice:snapfs:x", "/a//b", "/", ""};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		CHECK(cgroup_open(bad[i], out, &e) == -EINVAL);
		CHECK(strstr(e.msg, "--cgroup-parent") != NULL);
	}
	/* A parent nobody made: no container to adopt, so nothing is created either. */
	snprintf(parent, sizeof(parent), "/snapfs-unit-%d/none", (int)getpid());
	CHECK(cgroup_open(parent, out, &e) == 0);
	CHECK_STR(out, parent);
	CHECK(cgroup_adopt(parent, "snapfs-0123", &e) == 0);
	CHECK(access("/sys/fs/cgroup/unified/snapfs-unit", F_OK) < 0);
}

/*
 * A start-up adoption under a parent other services share (--cgroup-parent
 * /system.slice): only the cgroups named as snapfs names containers move.
 */
static void test_adopt_only_ours(void)
{
	char v1[PATH_MAX], v2[PATH_MAX], moved[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	struct err e = {0};
	static const char ours[] = "v1/system.slice/snapfs-0123456789abcdef01234567";
	const char *dirs[] = {ours, "v1/system.slice/sshd.service", "v1/system.slice/snapfs-0123",
			      "v2/system.slice"};
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		t_path(moved, dirs[i]);
		CHECK(mkdir_p(moved, 0755) == 0);
	}
	t_write("v1/system.slice/snapfs-0123456789abcdef01234567/cgroup.procs", "111\n", 4);
	t_write("v1/system.slice/sshd.service/cgroup.procs", "2222222\n", 8);
	t_write("v1/system.slice/snapfs-0123/cgroup.procs", "3333333\n", 8);
	t_write("v2/system.slice/cgroup.procs", "", 0);
	t_path(v1, "v1");
	t_path(v2, "v2");
	CHECK_MSG(cgroup_adopt_from(v1, v2, "/system.slice", NULL, &e) == 0, "%s", e.msg);
	t_path(moved, "v2/system.slice/cgroup.procs");
	CHECK(read_file(moved, &text, NULL, 4096) == 0);
	/* Each adoption writes from the file's start: a longer pid before or after ours shows. */
	CHECK_STR(text ? text : "", "111");
}

/* @text into cgroup file @rel under t_base, its directory made. */
static void put(const char *rel, const char *text)
{
	char path[PATH_MAX];
	t_path(path, rel);
	*strrchr(path, '/') = '\0';
	CHECK(mkdir_p(path, 0755) == 0);
	t_write(rel, text, strlen(text));
}

/*
 * The counters of a container's cgroup, v1 and v2, as the kernel writes
 * them, and what cgroup_limit_hit() makes of an OOM kill and of pids.max.
 */
static void test_usage(void)
{
	char root[PATH_MAX], msg[MESSAGE_MAX];
	struct cgroup_usage u;
	struct resources res = {.memory_bytes = 128 << 20, .pids = 64};
	static const char cg[] = "/snapfs.slice/snapfs-0123456789abcdef01234567";
	put("v1/memory/snapfs.slice/snapfs-0123456789abcdef01234567/memory.usage_in_bytes",
	    "13164544\n");
	put("v1/memory/snapfs.slice/snapfs-0123456789abcdef01234567/memory.oom_control",
	    "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
	put("v1/cpuacct/snapfs.slice/snapfs-0123456789abcdef01234567/cpuacct.usage", "214673877\n");
	put("v1/pids/snapfs.slice/snapfs-0123456789abcdef01234567/pids.events", "max 0\n");
	t_path(root, "v1");
	CHECK(cgroup_usage_at(root, false, "/snapfs.slice", cg + 14, &u) == 0);
	CHECK(u.memory_bytes == 13164544 && u.cpu_ns == 214673877);
	CHECK(u.oom_kills == 0 && u.pids_max == 0);
	CHECK(u.memory_peak == -1); /* no memory.max_usage_in_bytes: unknown */
	put("v1/memory/snapfs.slice/snapfs-0123456789abcdef01234567/memory.max_usage_in_bytes",
	    "20971520\n");
	CHECK(cgroup_usage_at(root, false, "/snapfs.slice", cg + 14, &u) == 0);
	CHECK(u.memory_peak == 20971520);
	CHECK(cgroup_limit_hit(&u, NULL, &res, msg, sizeof(msg)) == 0);
	put("v1/memory/snapfs.slice/snapfs-0123456789abcdef01234567/memory.oom_control",
	    "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
	CHECK(cgroup_usage_at(root, false, "/snapfs.slice", cg + 14, &u) == 0 && u.oom_kills == 1);
	CHECK(cgroup_limit_hit(&u, NULL, &res, msg, sizeof(msg)) == 1);
	CHECK(strncmp(msg, "out of memory: ", 15) == 0 && strstr(msg, "134217728"));
	/* With no limit of its own, an OOM kill was not over "its limit of 0 bytes". */
	struct resources unlimited = res;
	unlimited.memory_bytes = 0;
	CHECK(cgroup_limit_hit(&u, NULL, &unlimited, msg, sizeof(msg)) == 0);
	/*
	 * A sandbox that survived that kill: against the counters noted then,
	 * nothing new ended it; a second kill does; a new cgroup (counters
	 * below the noted ones) counts from 0.
	 */
	struct cgroup_usage base = u, later = u;
	CHECK(cgroup_limit_hit(&later, &base, &res, msg, sizeof(msg)) == 0);
	later.oom_kills = 2;
	CHECK(cgroup_limit_hit(&later, &base, &res, msg, sizeof(msg)) == 1);
	base.oom_kills = 2;
	later.oom_kills = 1;
	CHECK(cgroup_limit_hit(&later, &base, &res, msg, sizeof(msg)) == 1);
	later.oom_kills = 0;
	base.pids_max = 5;
	later.pids_max = 5;
	CHECK(cgroup_limit_hit(&later, &base, &res, msg, sizeof(msg)) == 0);
	later.pids_max = 6;
	CHECK(cgroup_limit_hit(&later, &base, &res, msg, sizeof(msg)) == 1);
	CHECK(strncmp(msg, "task limit reached: ", 20) == 0);
	/* v2: one tree; CPU in microseconds. */
	put("v2/snapfs.slice/snapfs-0123456789abcdef01234567/memory.current", "4096\n");
	put("v2/snapfs.slice/snapfs-0123456789abcdef01234567/cpu.stat",
	    "usage_usec 1500\nuser_usec 1000\n");
	put("v2/snapfs.slice/snapfs-0123456789abcdef01234567/memory.events",
	    "low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n");
	put("v2/snapfs.slice/snapfs-0123456789abcdef01234567/pids.events", "max 2\n");
	t_path(root, "v2");
	CHECK(cgroup_usage_at(root, true, "/snapfs.slice", cg + 14, &u) == 0);
	CHECK(u.memory_bytes == 4096 && u.cpu_ns == 1500000 && u.oom_kills == 0 && u.pids_max == 2);
	CHECK(u.memory_peak == -1); /* Linux before 5.19 has no memory.peak */
	put("v2/snapfs.slice/snapfs-0123456789abcdef01234567/memory.peak", "8192\n");
	CHECK(cgroup_usage_at(root, true, "/snapfs.slice", cg + 14, &u) == 0);
	CHECK(u.memory_peak == 8192);
	CHECK(cgroup_limit_hit(&u, NULL, &res, msg, sizeof(msg)) == 1);
	CHECK(strncmp(msg, "task limit reached: ", 20) == 0 && strstr(msg, " 64 "));
	unlimited = res;
	unlimited.pids = 0;
	CHECK(cgroup_limit_hit(&u, NULL, &unlimited, msg, sizeof(msg)) == 0);
	/* Gone: nothing to read. */
	CHECK(cgroup_usage_at(root, true, "/snapfs.slice", "snapfs-gone", &u) == -ENOENT);
	CHECK(u.memory_bytes == -1 && u.oom_kills == -1 && u.memory_peak == -1);
}

/*
 * A warm member's CPU weight back to the host's default at a take: v1
 * cpu.shares 1024 in the cpu hierarchy, v2 cpu.weight 100; a cgroup that
 * is not there (no controller) is -ENOENT.
 */
static void test_cpu_normal(void)
{
	char root[PATH_MAX], path[PATH_MAX];
	struct err e = {0};
	char *text = NULL;
	put("v1/cpu/snapfs.slice/snapfs-0123456789abcdef01234567/cpu.shares", "2\n");
	t_path(root, "v1");
	CHECK_MSG(cgroup_cpu_normal_at(root, false, "/snapfs.slice",
				       "snapfs-0123456789abcdef01234567", &e) == 0,
		  "%s", e.msg);
	t_path(path, "v1/cpu/snapfs.slice/snapfs-0123456789abcdef01234567/cpu.shares");
	CHECK(read_file(path, &text, NULL, 64) == 0);
	CHECK_STR(text ? text : "", "1024");
	free(text);
	text = NULL;
	put("v2/snapfs.slice/snapfs-0123456789abcdef01234567/cpu.weight", "1\n");
	t_path(root, "v2");
	CHECK(cgroup_cpu_normal_at(root, true, "/snapfs.slice", "snapfs-0123456789abcdef01234567",
				   &e) == 0);
	t_path(path, "v2/snapfs.slice/snapfs-0123456789abcdef01234567/cpu.weight");
	CHECK(read_file(path, &text, NULL, 64) == 0);
	CHECK_STR(text ? text : "", "100");
	free(text);
	CHECK(cgroup_cpu_normal_at(root, true, "/snapfs.slice", "snapfs-gone", &e) == -ENOENT);
}

int main(void)
{
	test_path();
	test_open();
	if (t_dir_make("test_cgroup")) {
		test_adopt_only_ours();
		test_usage();
		test_cpu_normal();
		rm_rf(t_base);
	}
	return t_done();
}
