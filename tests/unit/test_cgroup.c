/*
 * test_cgroup.c - runtime/cgroup.c without touching the host's cgroups:
 * the path of a sandbox's cgroup, the --cgroup-parent check, and adoption
 * from a parent no container has (nothing moved, no error). Moving real
 * processes is tests/integration/test_cgroup.sh's.
 */
#include "runtime/cgroup.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/t.h"

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

int main(void)
{
	test_path();
	test_open();
	return t_done();
}
