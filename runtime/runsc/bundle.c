#include "runtime/runsc/bundle.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

/* Docker's default set: root in the sandbox can chown, bypass file modes, setuid… */
static const char *const capabilities[] = {
    "CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FSETID",	       "CAP_FOWNER",
    "CAP_MKNOD",   "CAP_NET_RAW",      "CAP_SETGID",	       "CAP_SETUID",
    "CAP_SETFCAP", "CAP_SETPCAP",      "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
    "CAP_KILL",	   "CAP_AUDIT_WRITE",
};

static int no_memory(struct err *e)
{
	return err_set(e, ENOMEM, "cannot build bundle config");
}

/* Add @item to @obj, or free it: the cJSON tree owns all or nothing. */
static bool add(cJSON *obj, const char *key, cJSON *item)
{
	if (!item)
		return false;
	if (key ? cJSON_AddItemToObject(obj, key, item) : cJSON_AddItemToArray(obj, item))
		return true;
	cJSON_Delete(item);
	return false;
}

static bool add_strings(cJSON *obj, const char *key, const char *const *strs, size_t n)
{
	return add(obj, key, cJSON_CreateStringArray(strs, (int)n));
}

static bool env_sets(const char *env, const char *key_eq)
{
	size_t n = strlen(key_eq);
	for (const char *p = env; *p; p += strcspn(p, "\n"), p += (*p == '\n')) {
		if (strncmp(p, key_eq, n) == 0)
			return true;
	}
	return false;
}

/* Fill @arr: PATH and HOME unless @env sets them, then @env's KEY=VALUE lines. */
static int bundle_env(cJSON *arr, const char *env, struct err *e)
{
	bool ok = true;
	if (!env_sets(env, "PATH="))
		ok = add(arr, NULL, cJSON_CreateString(BUNDLE_DEFAULT_PATH));
	if (ok && !env_sets(env, "HOME="))
		ok = add(arr, NULL, cJSON_CreateString("HOME=/root"));
	int lineno = 0;
	for (const char *p = env; ok && *p; p += (*p == '\n')) {
		size_t n = strcspn(p, "\n");
		lineno++;
		/* Never quote the line: it may hold a secret. */
		if (n > 0 && (p[0] == '=' || !memchr(p, '=', n)))
			return err_set(e, EINVAL, "env line %d is not KEY=VALUE", lineno);
		if (n > 0) {
			_cleanup_free_ char *line = strndup(p, n);
			ok = line && add(arr, NULL, cJSON_CreateString(line));
		}
		p += n;
	}
	return ok ? 0 : no_memory(e);
}

/* The words of @argv, checked: at least one, at most BUNDLE_ARGV_MAX. */
static int argv_count(const char *const *argv, size_t *n, struct err *e)
{
	*n = 0;
	while (argv && argv[*n] && *n <= BUNDLE_ARGV_MAX)
		(*n)++;
	if (*n == 0 || *n > BUNDLE_ARGV_MAX)
		return err_set(e, EINVAL, "bundle process needs 1 to %d arguments",
			       BUNDLE_ARGV_MAX);
	return 0;
}

/* process: @argv as root in "/", with the default capabilities. */
static bool bundle_process(cJSON *p, const char *const *argv, size_t argc)
{
	const char *sets[] = {"bounding", "effective", "permitted"};
	cJSON *user = cJSON_AddObjectToObject(p, "user");
	cJSON *caps = cJSON_AddObjectToObject(p, "capabilities");
	bool ok = user && caps && cJSON_AddFalseToObject(p, "terminal") &&
		  cJSON_AddNumberToObject(user, "uid", 0) &&
		  cJSON_AddNumberToObject(user, "gid", 0) && add_strings(p, "args", argv, argc) &&
		  cJSON_AddStringToObject(p, "cwd", "/");
	for (size_t i = 0; ok && i < ARRAY_SIZE(sets); i++)
		ok = add_strings(caps, sets[i], capabilities, ARRAY_SIZE(capabilities));
	return ok;
}

static bool bundle_mount(cJSON *arr, const char *dest, const char *type, const char *const *opts,
			 size_t nopts)
{
	cJSON *m = cJSON_CreateObject();
	if (!add(arr, NULL, m))
		return false;
	return cJSON_AddStringToObject(m, "destination", dest) &&
	       cJSON_AddStringToObject(m, "type", type) &&
	       cJSON_AddStringToObject(m, "source", type) &&
	       (nopts == 0 || add_strings(m, "options", opts, nopts));
}

/* A read-only bind of host file @src on @dest. */
static bool bundle_bind(cJSON *arr, const char *dest, const char *src)
{
	static const char *const opts[] = {"rbind", "ro"};
	cJSON *m = cJSON_CreateObject();
	return add(arr, NULL, m) && cJSON_AddStringToObject(m, "destination", dest) &&
	       cJSON_AddStringToObject(m, "type", "bind") &&
	       cJSON_AddStringToObject(m, "source", src) &&
	       add_strings(m, "options", opts, ARRAY_SIZE(opts));
}

/* mounts: /proc, a tmpfs /tmp, the network's resolv.conf; runsc itself provides /dev and /sys. */
static bool bundle_mounts(cJSON *cfg, const char *resolv)
{
	static const char *const tmp_opts[] = {"nosuid", "nodev", "mode=1777"};
	cJSON *arr = cJSON_AddArrayToObject(cfg, "mounts");
	return arr && bundle_mount(arr, "/proc", "proc", NULL, 0) &&
	       bundle_mount(arr, "/tmp", "tmpfs", tmp_opts, ARRAY_SIZE(tmp_opts)) &&
	       (!resolv || !resolv[0] || bundle_bind(arr, "/etc/resolv.conf", resolv));
}

/* linux.namespaces: a new one of each kind, but the network's at @netns when given. */
static bool bundle_namespaces(cJSON *lnx, const char *netns)
{
	static const char *const ns[] = {"pid", "ipc", "uts", "mount", "network"};
	cJSON *arr = cJSON_AddArrayToObject(lnx, "namespaces");
	bool ok = arr != NULL;
	for (size_t i = 0; ok && i < ARRAY_SIZE(ns); i++) {
		cJSON *o = cJSON_CreateObject();
		ok = add(arr, NULL, o) && cJSON_AddStringToObject(o, "type", ns[i]);
		if (ok && netns && netns[0] && strcmp(ns[i], "network") == 0)
			ok = cJSON_AddStringToObject(o, "path", netns);
	}
	return ok;
}

/* One linux.devices entry and its linux.resources.devices allow rule for host node @path. */
static int bundle_device(cJSON *devs, cJSON *rules, const char *path, struct err *e)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return err_set(e, errno == ENOENT ? ENODEV : EIO, "device %s: %s", path,
			       strerror(errno));
	if (!S_ISCHR(st.st_mode))
		return err_set(e, ENODEV, "device %s is not a character device", path);
	cJSON *dev = cJSON_CreateObject();
	cJSON *rule = cJSON_CreateObject();
	bool ok = add(devs, NULL, dev) && add(rules, NULL, rule) &&
		  cJSON_AddStringToObject(dev, "path", path) &&
		  cJSON_AddStringToObject(dev, "type", "c") &&
		  cJSON_AddNumberToObject(dev, "major", major(st.st_rdev)) &&
		  cJSON_AddNumberToObject(dev, "minor", minor(st.st_rdev)) &&
		  cJSON_AddNumberToObject(dev, "fileMode", st.st_mode & 0777) &&
		  cJSON_AddNumberToObject(dev, "uid", 0) &&
		  cJSON_AddNumberToObject(dev, "gid", 0) && cJSON_AddTrueToObject(rule, "allow") &&
		  cJSON_AddStringToObject(rule, "type", "c") &&
		  cJSON_AddNumberToObject(rule, "major", major(st.st_rdev)) &&
		  cJSON_AddNumberToObject(rule, "minor", minor(st.st_rdev)) &&
		  cJSON_AddStringToObject(rule, "access", "rwm");
	return ok ? 0 : no_memory(e);
}

/* linux.devices and the matching rules in @res (linux.resources); neither without devices. */
static int bundle_devices(cJSON *lnx, cJSON *res, const char *const *devices, size_t ndevices,
			  struct err *e)
{
	if (ndevices == 0)
		return 0;
	if (ndevices > BUNDLE_DEVICES_MAX)
		return err_set(e, E2BIG, "a bundle takes at most %d devices", BUNDLE_DEVICES_MAX);
	cJSON *devs = cJSON_AddArrayToObject(lnx, "devices");
	cJSON *rules = cJSON_AddArrayToObject(res, "devices");
	if (!devs || !rules)
		return no_memory(e);
	for (size_t i = 0; i < ndevices; i++) {
		int rc = bundle_device(devs, rules, devices[i], e);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The CFS period a cpus limit is a quota of: the kernel's default, 100 ms. */
#define CPU_PERIOD_US 100000

/* @key: {@field: @v} in @res, unless @v is unlimited (0). */
static bool add_limit(cJSON *res, const char *key, const char *field, int64_t v)
{
	cJSON *o = v > 0 ? cJSON_AddObjectToObject(res, key) : NULL;
	return v <= 0 || (o && cJSON_AddNumberToObject(o, field, (double)v));
}

/* The host cgroup's pids.max for @pids tasks inside: room for the runtime's own (lib/limits.h). */
static int64_t host_pids(int64_t pids)
{
	if (pids <= 0)
		return 0;
	int64_t n = pids * RES_PIDS_HOST_PER_TASK + RES_PIDS_HOST_BASE;
	return n < RES_PIDS_MAX ? n : RES_PIDS_MAX; /* the kernel takes no more */
}

/*
 * process.rlimits: RLIMIT_NPROC of @pids (soft = hard), which the sentry
 * checks at each fork and clone; none when unlimited. runsc exec gives
 * every exec the rlimits of this spec too, and a restore keeps the init
 * process's from the image (docs/limits.md).
 */
static bool bundle_rlimits(cJSON *p, int64_t pids)
{
	if (pids <= 0)
		return true;
	cJSON *arr = cJSON_AddArrayToObject(p, "rlimits");
	cJSON *o = arr ? cJSON_CreateObject() : NULL;
	return add(arr, NULL, o) && cJSON_AddStringToObject(o, "type", "RLIMIT_NPROC") &&
	       cJSON_AddNumberToObject(o, "hard", (double)pids) &&
	       cJSON_AddNumberToObject(o, "soft", (double)pids);
}

/*
 * The limits in @res (linux.resources): memory.limit in bytes, cpu.quota
 * of CPU_PERIOD_US (a thousandth of a CPU is 100 us of it), pids.limit
 * with the runtime's headroom over the RLIMIT_NPROC inside; and cpu.shares
 * when @shares is not 0.
 */
static bool bundle_resources(cJSON *res, const struct resources *r, unsigned shares)
{
	cJSON *cpu = r->cpu_milli > 0 || shares ? cJSON_AddObjectToObject(res, "cpu") : NULL;
	return add_limit(res, "memory", "limit", r->memory_bytes) &&
	       add_limit(res, "pids", "limit", host_pids(r->pids)) &&
	       (r->cpu_milli <= 0 ||
		(cpu && cJSON_AddNumberToObject(cpu, "quota", (double)r->cpu_milli * 100) &&
		 cJSON_AddNumberToObject(cpu, "period", CPU_PERIOD_US))) &&
	       (!shares || (cpu && cJSON_AddNumberToObject(cpu, "shares", shares)));
}

/* linux: the cgroup path if any, the namespaces, the limits, then the devices. */
static int bundle_linux(cJSON *cfg, const struct bundle_spec *spec, struct err *e)
{
	const char *cg = spec->cgroups_path;
	const struct resources *r = &spec->res;
	bool limits = r->memory_bytes > 0 || r->cpu_milli > 0 || r->pids > 0 || spec->cpu_shares;
	cJSON *lnx = cJSON_AddObjectToObject(cfg, "linux");
	cJSON *res =
	    lnx && (limits || spec->ndevices) ? cJSON_AddObjectToObject(lnx, "resources") : NULL;
	if (!lnx || !bundle_namespaces(lnx, spec->netns) ||
	    (cg && cg[0] && !cJSON_AddStringToObject(lnx, "cgroupsPath", cg)) ||
	    ((limits || spec->ndevices) && !res) ||
	    (limits && !bundle_resources(res, r, spec->cpu_shares)))
		return no_memory(e);
	return bundle_devices(lnx, res, spec->devices, spec->ndevices, e);
}

/* The whole config.json of @spec into @cfg. */
static int bundle_config(cJSON *cfg, const struct bundle_spec *spec, struct err *e)
{
	size_t argc;
	int rc = argv_count(spec->argv, &argc, e);
	if (rc < 0)
		return rc;
	cJSON *process = cJSON_AddObjectToObject(cfg, "process");
	cJSON *envs = process ? cJSON_AddArrayToObject(process, "env") : NULL;
	cJSON *root = cJSON_AddObjectToObject(cfg, "root");
	if (!envs || !root)
		return no_memory(e);
	rc = bundle_env(envs, spec->env ? spec->env : "", e);
	if (rc < 0)
		return rc;
	bool ok =
	    cJSON_AddStringToObject(cfg, "ociVersion", "1.0.2") &&
	    bundle_process(process, spec->argv, argc) && bundle_rlimits(process, spec->res.pids) &&
	    cJSON_AddStringToObject(root, "path", spec->rootfs) &&
	    cJSON_AddFalseToObject(root, "readonly") &&
	    cJSON_AddStringToObject(cfg, "hostname", "snapfs") && bundle_mounts(cfg, spec->resolv);
	return ok ? bundle_linux(cfg, spec, e) : no_memory(e);
}

int bundle_write(const char *dir, const struct bundle_spec *spec, struct err *e)
{
	char path[PATH_MAX];
	if (!spec->rootfs || spec->rootfs[0] != '/')
		return err_set(e, EINVAL, "bundle root %s is not an absolute path",
			       spec->rootfs ? spec->rootfs : "(none)");
	/* runsc takes a relative path under the caller's own cgroup: the daemon's. */
	if (spec->cgroups_path && spec->cgroups_path[0] && spec->cgroups_path[0] != '/')
		return err_set(e, EINVAL, "bundle cgroup %s is not an absolute path",
			       spec->cgroups_path);
	if (xsnprintf(path, sizeof(path), "%s/config.json", dir) < 0)
		return err_set(e, ENAMETOOLONG, "bundle path too long: %s", dir);
	int rc = mkdir_p(dir, 0700);
	if (rc < 0)
		return err_set(e, -rc, "cannot create bundle %s: %s", dir, strerror(-rc));
	cJSON *cfg = cJSON_CreateObject();
	if (!cfg)
		return no_memory(e);
	rc = bundle_config(cfg, spec, e);
	_cleanup_free_ char *text = rc == 0 ? cJSON_Print(cfg) : NULL;
	cJSON_Delete(cfg);
	if (rc < 0)
		return rc;
	if (!text)
		return no_memory(e);
	rc = write_file_durable(path, text, strlen(text));
	if (rc < 0)
		return err_set(e, -rc, "cannot write %s: %s", path, strerror(-rc));
	return 0;
}
