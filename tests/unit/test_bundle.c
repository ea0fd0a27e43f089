/*
 * test_bundle.c - bundle_write(): every field of the config.json it
 * writes, read back with cJSON, and what it refuses.
 */
#include "runtime/runsc/bundle.h"
#include "runtime/gpu/gpu.h"
#include "runtime/runsc/cgroup.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tests/unit/t_dir.h"

static char dir[PATH_MAX];

static const cJSON *get(const cJSON *o, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(o, key);
}

static bool has_string(const cJSON *arr, const char *s)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, arr)
	{
		if (cJSON_IsString(it) && strcmp(it->valuestring, s) == 0)
			return true;
	}
	return false;
}

static cJSON *load_bundle(void)
{
	char path[PATH_MAX + 16];
	_cleanup_free_ char *text = NULL;
	snprintf(path, sizeof(path), "%s/config.json", dir);
	if (read_file(path, &text, NULL, 1 << 20) < 0)
		return NULL;
	return cJSON_Parse(text);
}

/* A bundle whose process is `/bin/sh -c @entry`, as a sandbox's is. */
static int write_sh(const char *rootfs, const char *entry, const char *env, struct err *e)
{
	const char *argv[] = {"/bin/sh", "-c", entry, NULL};
	struct bundle_spec spec = {.rootfs = rootfs, .argv = argv, .env = env};
	return bundle_write(dir, &spec, e);
}

static void check_process(const cJSON *cfg)
{
	const cJSON *proc = get(cfg, "process"), *root = get(cfg, "root");
	const cJSON *args = get(proc, "args"), *env = get(proc, "env");
	const cJSON *caps = get(proc, "capabilities");
	CHECK_STR(cJSON_GetStringValue(get(cfg, "ociVersion")), "1.0.2");
	CHECK_STR(cJSON_GetStringValue(get(cfg, "hostname")), "snapfs");
	CHECK(cJSON_IsFalse(get(proc, "terminal")));
	CHECK(cJSON_GetArraySize(args) == 3);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetArrayItem(args, 0)), "/bin/sh");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetArrayItem(args, 1)), "-c");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetArrayItem(args, 2)), "echo \"hi\"; sleep 1");
	CHECK(has_string(env, BUNDLE_DEFAULT_PATH));
	CHECK(has_string(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
	CHECK(has_string(env, "HOME=/root"));
	CHECK(has_string(env, "FOO=bar"));
	CHECK(has_string(env, "B=x=y z"));
	CHECK(cJSON_GetArraySize(env) == 4);
	CHECK_STR(cJSON_GetStringValue(get(proc, "cwd")), "/");
	CHECK(cJSON_GetNumberValue(get(get(proc, "user"), "uid")) == 0);
	CHECK(cJSON_GetNumberValue(get(get(proc, "user"), "gid")) == 0);
	CHECK(has_string(get(caps, "effective"), "CAP_CHOWN"));
	CHECK(cJSON_GetArraySize(get(caps, "bounding")) == 14);
	CHECK(cJSON_GetArraySize(get(caps, "permitted")) == 14);
	CHECK(has_string(get(caps, "permitted"), "CAP_AUDIT_WRITE"));
	CHECK(!has_string(get(caps, "bounding"), "CAP_SYS_ADMIN"));
	CHECK_STR(cJSON_GetStringValue(get(root, "path")), "/images/busybox");
	/* false: runsc's memory overlay applies to a writable root only. */
	CHECK(cJSON_IsFalse(get(root, "readonly")));
}

static void check_mounts(const cJSON *cfg)
{
	const cJSON *mounts = get(cfg, "mounts");
	const cJSON *lnx = get(cfg, "linux");
	const cJSON *ns = get(lnx, "namespaces");
	const cJSON *tmp = cJSON_GetArrayItem(mounts, 1);
	const char *types[] = {"pid", "ipc", "uts", "mount", "network"};
	CHECK(cJSON_GetArraySize(mounts) == 2);
	CHECK_STR(cJSON_GetStringValue(get(cJSON_GetArrayItem(mounts, 0), "destination")), "/proc");
	CHECK_STR(cJSON_GetStringValue(get(cJSON_GetArrayItem(mounts, 0), "type")), "proc");
	CHECK_STR(cJSON_GetStringValue(get(cJSON_GetArrayItem(mounts, 0), "source")), "proc");
	CHECK(get(cJSON_GetArrayItem(mounts, 0), "options") == NULL);
	CHECK_STR(cJSON_GetStringValue(get(tmp, "destination")), "/tmp");
	CHECK_STR(cJSON_GetStringValue(get(tmp, "type")), "tmpfs");
	CHECK(cJSON_GetArraySize(get(tmp, "options")) == 3);
	CHECK(has_string(get(tmp, "options"), "mode=1777"));
	CHECK(cJSON_GetArraySize(ns) == (int)ARRAY_SIZE(types));
	for (size_t i = 0; i < ARRAY_SIZE(types); i++)
		CHECK_STR(cJSON_GetStringValue(get(cJSON_GetArrayItem(ns, (int)i), "type")),
			  types[i]);
	/* Devices only for a bundle that lists some; a cgroup only for one that names it. */
	CHECK(get(lnx, "devices") == NULL && get(lnx, "resources") == NULL);
	CHECK(get(lnx, "cgroupsPath") == NULL);
}

static void test_fields(void)
{
	struct err e = {0};
	CHECK(write_sh("/images/busybox", "echo \"hi\"; sleep 1", "FOO=bar\n\nB=x=y z", &e) == 0);
	cJSON *cfg = load_bundle();
	CHECK(cfg != NULL);
	if (cfg) {
		check_process(cfg);
		check_mounts(cfg);
	}
	cJSON_Delete(cfg);

	/* The sandbox's own PATH replaces the default one. */
	CHECK(write_sh("/images/busybox", "true", "PATH=/bin\n", &e) == 0);
	cfg = load_bundle();
	const cJSON *env = get(get(cfg, "process"), "env");
	CHECK(has_string(env, "PATH=/bin") && has_string(env, "HOME=/root"));
	CHECK(cJSON_GetArraySize(env) == 2);
	cJSON_Delete(cfg);

	/* No env at all: the defaults alone. */
	CHECK(write_sh("/images/busybox", "true", NULL, &e) == 0);
	cfg = load_bundle();
	CHECK(cJSON_GetArraySize(get(get(cfg, "process"), "env")) == 2);
	cJSON_Delete(cfg);
}

static void test_argv(void)
{
	const char *argv[] = {"/bin/echo", "a b", "", "c\"d", NULL};
	const char *none[] = {NULL};
	const char *many[BUNDLE_ARGV_MAX + 2];
	struct bundle_spec spec = {.rootfs = "/r", .argv = argv};
	struct err e = {0};
	CHECK(bundle_write(dir, &spec, &e) == 0);
	cJSON *cfg = load_bundle();
	const cJSON *args = get(get(cfg, "process"), "args");
	CHECK(cJSON_GetArraySize(args) == 4);
	for (int i = 0; i < 4; i++)
		CHECK_STR(cJSON_GetStringValue(cJSON_GetArrayItem(args, i)), argv[i]);
	cJSON_Delete(cfg);

	spec.argv = none;
	CHECK(bundle_write(dir, &spec, &e) == -EINVAL);
	spec.argv = NULL;
	CHECK(bundle_write(dir, &spec, &e) == -EINVAL);
	for (size_t i = 0; i < ARRAY_SIZE(many); i++)
		many[i] = "x";
	many[BUNDLE_ARGV_MAX] = NULL;
	spec.argv = many;
	CHECK(bundle_write(dir, &spec, &e) == 0);
	many[BUNDLE_ARGV_MAX] = "x";
	many[BUNDLE_ARGV_MAX + 1] = NULL;
	CHECK(bundle_write(dir, &spec, &e) == -EINVAL);
}

/* linux.cgroupsPath as given; a relative one is refused (runsc would nest it in the daemon's). */
static void test_cgroup(void)
{
	struct err e = {0};
	const char *argv[] = {"/bin/sh", NULL};
	struct bundle_spec spec = {
	    .rootfs = "/images/busybox", .argv = argv, .cgroups_path = "/snapfs.slice/snapfs-1"};
	CHECK(bundle_write(dir, &spec, &e) == 0);
	cJSON *cfg = load_bundle();
	CHECK_STR(cJSON_GetStringValue(get(get(cfg, "linux"), "cgroupsPath")),
		  "/snapfs.slice/snapfs-1");
	CHECK(cJSON_GetArraySize(get(get(cfg, "linux"), "namespaces")) == 5);
	cJSON_Delete(cfg);
	spec.cgroups_path = "";
	CHECK(bundle_write(dir, &spec, &e) == 0);
	cfg = load_bundle();
	CHECK(get(get(cfg, "linux"), "cgroupsPath") == NULL);
	cJSON_Delete(cfg);
	spec.cgroups_path = "snapfs.slice:snapfs:x";
	CHECK(bundle_write(dir, &spec, &e) == -EINVAL);
	CHECK(strstr(e.msg, "snapfs.slice:snapfs:x") != NULL);
}

/*
 * linux.resources: memory.limit, cpu.quota over a 100 ms period, pids.limit
 * (the host backstop over the pids inside: test_pids()); 0 leaves one out.
 */
static void test_resources(void)
{
	struct err e = {0};
	const char *argv[] = {"/bin/sh", NULL};
	struct bundle_spec spec = {
	    .rootfs = "/images/busybox",
	    .argv = argv,
	    .res = {.memory_bytes = 128LL << 20, .cpu_milli = 500, .pids = 64}};
	CHECK(bundle_write(dir, &spec, &e) == 0);
	cJSON *cfg = load_bundle();
	const cJSON *res = get(get(cfg, "linux"), "resources");
	CHECK(cJSON_GetNumberValue(get(get(res, "memory"), "limit")) == 128 << 20);
	CHECK(cJSON_GetNumberValue(get(get(res, "cpu"), "quota")) == 50000);
	CHECK(cJSON_GetNumberValue(get(get(res, "cpu"), "period")) == 100000);
	CHECK(cJSON_GetNumberValue(get(get(res, "pids"), "limit")) == 256);
	CHECK(get(res, "devices") == NULL);
	cJSON_Delete(cfg);
	/* Only pids: no memory or cpu object, which runsc would take as a limit of 0. */
	spec.res = (struct resources){.pids = 100};
	CHECK(bundle_write(dir, &spec, &e) == 0);
	cfg = load_bundle();
	res = get(get(cfg, "linux"), "resources");
	CHECK(get(res, "memory") == NULL && get(res, "cpu") == NULL);
	CHECK(cJSON_GetNumberValue(get(get(res, "pids"), "limit")) ==
	      100 * RES_PIDS_HOST_PER_TASK + RES_PIDS_HOST_BASE);
	cJSON_Delete(cfg);
	/* A warm member's low CPU weight: cpu.shares alone, no quota (no limit). */
	spec.res = (struct resources){0};
	spec.cpu_shares = CGROUP_SHARES_BACKGROUND;
	CHECK(bundle_write(dir, &spec, &e) == 0);
	cfg = load_bundle();
	res = get(get(cfg, "linux"), "resources");
	CHECK(cJSON_GetNumberValue(get(get(res, "cpu"), "shares")) == 2);
	CHECK(get(get(res, "cpu"), "quota") == NULL && get(res, "memory") == NULL);
	cJSON_Delete(cfg);
	spec.cpu_shares = 0;
	/* No limit, no device: no resources at all. */
	spec.res = (struct resources){0};
	CHECK(bundle_write(dir, &spec, &e) == 0);
	cfg = load_bundle();
	CHECK(get(get(cfg, "linux"), "resources") == NULL);
	cJSON_Delete(cfg);
	/* Limits beside the device rules, in the one resources object. */
	const char *devs[] = {"/dev/null"};
	spec.devices = devs;
	spec.ndevices = 1;
	spec.res.memory_bytes = 1LL << 30;
	CHECK(bundle_write(dir, &spec, &e) == 0);
	cfg = load_bundle();
	res = get(get(cfg, "linux"), "resources");
	CHECK(cJSON_GetArraySize(get(res, "devices")) == 1);
	CHECK(cJSON_GetNumberValue(get(get(res, "memory"), "limit")) == 1 << 30);
	cJSON_Delete(cfg);
}

/* The RLIMIT_NPROC of @cfg's process as "soft/hard", or "none" when it has no rlimits. */
static void nproc_of(const cJSON *cfg, char *out, size_t size)
{
	const cJSON *rl = get(get(cfg, "process"), "rlimits");
	const cJSON *o = cJSON_GetArrayItem(rl, 0);
	if (!rl) {
		snprintf(out, size, "none");
		return;
	}
	snprintf(out, size, "%d %s %.0f/%.0f", cJSON_GetArraySize(rl),
		 cJSON_GetStringValue(get(o, "type")), cJSON_GetNumberValue(get(o, "soft")),
		 cJSON_GetNumberValue(get(o, "hard")));
}

/*
 * pids is RLIMIT_NPROC inside (soft = hard), and the host cgroup's pids.max
 * is RES_PIDS_HOST_PER_TASK per task and RES_PIDS_HOST_BASE over it, at
 * most RES_PIDS_MAX; unlimited has neither.
 */
static void test_pids(void)
{
	struct err e = {0};
	char nproc[64];
	const char *argv[] = {"/bin/sh", NULL};
	struct bundle_spec spec = {.rootfs = "/images/busybox", .argv = argv, .res = {.pids = 64}};
	CHECK(bundle_write(dir, &spec, &e) == 0);
	cJSON *cfg = load_bundle();
	nproc_of(cfg, nproc, sizeof(nproc));
	CHECK_STR(nproc, "1 RLIMIT_NPROC 64/64");
	const cJSON *pids = get(get(get(cfg, "linux"), "resources"), "pids");
	CHECK(cJSON_GetNumberValue(get(pids, "limit")) ==
	      64 * RES_PIDS_HOST_PER_TASK + RES_PIDS_HOST_BASE);
	cJSON_Delete(cfg);
	spec.res.pids = RES_PIDS_MAX;
	CHECK(bundle_write(dir, &spec, &e) == 0);
	cfg = load_bundle();
	nproc_of(cfg, nproc, sizeof(nproc));
	CHECK_STR(nproc, "1 RLIMIT_NPROC 4194304/4194304");
	pids = get(get(get(cfg, "linux"), "resources"), "pids");
	CHECK(cJSON_GetNumberValue(get(pids, "limit")) == RES_PIDS_MAX);
	cJSON_Delete(cfg);
	spec.res = (struct resources){.memory_bytes = 1LL << 30};
	CHECK(bundle_write(dir, &spec, &e) == 0);
	cfg = load_bundle();
	nproc_of(cfg, nproc, sizeof(nproc));
	CHECK_STR(nproc, "none");
	CHECK(get(get(get(cfg, "linux"), "resources"), "pids") == NULL);
	cJSON_Delete(cfg);
}

static void test_refused(void)
{
	struct err e = {0};
	char path[PATH_MAX + 16];
	struct stat st;
	snprintf(path, sizeof(path), "%s/config.json", dir);
	unlink(path);
	CHECK(write_sh("/images/busybox", "true", "SECRET\n", &e) == -EINVAL);
	CHECK(strstr(e.msg, "SECRET") == NULL);
	CHECK(strstr(e.msg, "line 1") != NULL);
	CHECK(write_sh("/images/busybox", "true", "A=1\n=x\n", &e) == -EINVAL);
	CHECK(strstr(e.msg, "line 2") != NULL);
	CHECK(write_sh("images/busybox", "true", "", &e) == -EINVAL);
	CHECK(write_sh(NULL, "true", "", &e) == -EINVAL);
	/* Nothing written for a refused spec. */
	CHECK(stat(path, &st) < 0 && errno == ENOENT);
}

/* Device @i of the bundle: its linux.devices entry and its allow rule, for host node @node. */
static void check_device(const cJSON *cfg, int i, const char *node)
{
	const cJSON *lnx = get(cfg, "linux");
	const cJSON *dev = cJSON_GetArrayItem(get(lnx, "devices"), i);
	const cJSON *rule = cJSON_GetArrayItem(get(get(lnx, "resources"), "devices"), i);
	struct stat st;
	CHECK(stat(node, &st) == 0);
	CHECK_STR(cJSON_GetStringValue(get(dev, "path")), node);
	CHECK_STR(cJSON_GetStringValue(get(dev, "type")), "c");
	CHECK(cJSON_GetNumberValue(get(dev, "major")) == major(st.st_rdev));
	CHECK(cJSON_GetNumberValue(get(dev, "minor")) == minor(st.st_rdev));
	CHECK(cJSON_GetNumberValue(get(dev, "fileMode")) == (st.st_mode & 0777));
	CHECK(cJSON_GetNumberValue(get(dev, "uid")) == 0);
	CHECK(cJSON_GetNumberValue(get(dev, "gid")) == 0);
	CHECK(cJSON_IsTrue(get(rule, "allow")));
	CHECK_STR(cJSON_GetStringValue(get(rule, "type")), "c");
	CHECK(cJSON_GetNumberValue(get(rule, "major")) == major(st.st_rdev));
	CHECK(cJSON_GetNumberValue(get(rule, "minor")) == minor(st.st_rdev));
	CHECK_STR(cJSON_GetStringValue(get(rule, "access")), "rwm");
}

/* /dev/null and /dev/zero stand for a GPU's nodes: the same character-device path. */
static void test_devices(void)
{
	const char *devs[] = {"/dev/null", "/dev/zero"};
	const char *argv[] = {"true", NULL};
	const char *missing[] = {"/dev/null", "/dev/nvidia-no-such-node"};
	const char *many[BUNDLE_DEVICES_MAX + 1];
	char file[PATH_MAX];
	struct bundle_spec spec = {.rootfs = "/rootfs", .argv = argv, .devices = devs};
	struct err e = {0};
	spec.ndevices = 2;
	CHECK(bundle_write(dir, &spec, &e) == 0);
	cJSON *cfg = load_bundle();
	const cJSON *lnx = get(cfg, "linux");
	CHECK(cJSON_GetArraySize(get(lnx, "devices")) == 2);
	CHECK(cJSON_GetArraySize(get(get(lnx, "resources"), "devices")) == 2);
	check_device(cfg, 0, "/dev/null");
	check_device(cfg, 1, "/dev/zero");
	CHECK(cJSON_GetNumberValue(get(cJSON_GetArrayItem(get(lnx, "devices"), 0), "major")) == 1);
	CHECK(cJSON_GetNumberValue(get(cJSON_GetArrayItem(get(lnx, "devices"), 0), "minor")) == 3);
	/* The namespaces are still there beside them. */
	CHECK(cJSON_GetArraySize(get(lnx, "namespaces")) == 5);
	cJSON_Delete(cfg);

	spec.devices = missing;
	CHECK(bundle_write(dir, &spec, &e) == -ENODEV);
	CHECK(strstr(e.msg, "/dev/nvidia-no-such-node") != NULL);
	t_path(file, "plain-file");
	CHECK(write_file_durable(file, "", 0) == 0);
	missing[1] = file;
	CHECK(bundle_write(dir, &spec, &e) == -ENODEV);
	CHECK(strstr(e.msg, "not a character device") != NULL);

	for (size_t i = 0; i < ARRAY_SIZE(many); i++)
		many[i] = "/dev/null";
	spec.devices = many;
	spec.ndevices = BUNDLE_DEVICES_MAX + 1;
	CHECK(bundle_write(dir, &spec, &e) == -E2BIG);
}

/*
 * A GPU sandbox's bundle lists the host's NVIDIA nodes (gpu_host_nodes()).
 * Only a host with a GPU has them to stat; elsewhere the list alone is
 * checked, in test_gpu.c.
 */
static void test_gpu_host(void)
{
	struct gpu_host h;
	const char *nodes[GPU_NODES_MAX];
	const char *argv[] = {"true", NULL};
	struct err e = {0};
	if (gpu_host_ready("write a GPU bundle", &h, &e) < 0) {
		printf("skip: this host has no GPU (%s)\n", e.msg);
		return;
	}
	struct bundle_spec spec = {.rootfs = "/rootfs", .argv = argv, .devices = nodes};
	spec.ndevices = gpu_host_nodes(&h, nodes);
	CHECK(spec.ndevices >= 3);
	CHECK(bundle_write(dir, &spec, &e) == 0);
	cJSON *cfg = load_bundle();
	CHECK(cJSON_GetArraySize(get(get(cfg, "linux"), "devices")) == (int)spec.ndevices);
	for (size_t i = 0; i < spec.ndevices; i++)
		check_device(cfg, (int)i, nodes[i]);
	cJSON_Delete(cfg);
}

int main(void)
{
	if (!t_dir_make("snapfs-test-bundle"))
		return 1;
	t_path(dir, "bundles/b1");
	test_fields();
	test_argv();
	test_cgroup();
	test_resources();
	test_pids();
	test_refused();
	test_devices();
	test_gpu_host();
	rm_rf(t_base);
	return t_done();
}
