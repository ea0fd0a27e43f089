/*
 * test_ops_callers.c - callers other than root (ops/access.h) and what they
 * may ask for (ops/ops_quota.c): foreign sandboxes, unprivileged ports,
 * resource limits and per-user caps.
 *
 * The harness (lives, scenarios, the fake runsc) is tests/unit/t_ops.h.
 */
#include "tests/unit/t_ops.h"

/* --- callers: a non-root owner (ops/access.h) ------------------------- */

/* A local user in the group this life's --allow-group names (access_init()). */
static const struct caller user = {.uid = 4242, .gid = 4242};

/*
 * `set` of a field and `remove`, on a sandbox that is not there and on one
 * another owns: ENOENT and the same sentence for both (a name tells the
 * user nothing more than that it is taken), and the foreign one untouched.
 */
static void foreign_steps(void)
{
	struct err e = {0};
	struct sandbox sb;
	CHECK(access_init("4242", &e) == 0);
	CHECK(ops_sandbox_create(root, "roots", &e) == 0);
	CHECK(ops_sandbox_set(root, "ghost", SB_FIELD_ENTRYPOINT, "sleep 1", &e) == -ENOENT);
	CHECK_STR(e.msg, "sandbox ghost does not exist");
	CHECK(ops_sandbox_set(&user, "roots", SB_FIELD_ENTRYPOINT, "sleep 1", &e) == -ENOENT);
	CHECK_STR(e.msg, "sandbox roots does not exist");
	CHECK(ops_sandbox_set(&user, "roots", SB_FIELD_NETWORK, "egress", &e) == -ENOENT);
	CHECK(ops_sandbox_set_egress(&user, "roots", "deny 0.0.0.0/0", &e) == -ENOENT);
	CHECK_STR(e.msg, "sandbox roots does not exist");
	CHECK(ops_sandbox_remove(root, "ghost", &e) == -ENOENT);
	CHECK_STR(e.msg, "sandbox ghost does not exist");
	CHECK(ops_sandbox_remove(&user, "roots", &e) == -ENOENT);
	CHECK_STR(e.msg, "sandbox roots does not exist");
	/* Untouched: still there, still without an entrypoint or network, still removable. */
	CHECK(ops_sandbox_get(root, "roots", &sb) == 0 && sb.entrypoint[0] == '\0' &&
	      sb.network == SB_NET_NONE && sb.egress[0] == '\0');
	CHECK(ops_sandbox_remove(root, "roots", &e) == 0);
	/* The user's own: set and remove work for it. */
	CHECK(ops_sandbox_create(&user, "theirs", &e) == 0);
	CHECK(ops_sandbox_set(&user, "theirs", SB_FIELD_ENTRYPOINT, "sleep 1", &e) == 0);
	CHECK(ops_sandbox_remove(&user, "theirs", &e) == 0);
}

/* Write @value to /proc/sys/net/ipv4/ip_unprivileged_port_start of this thread's namespace. */
static bool unpriv_start(const char *value)
{
	int fd = open("/proc/sys/net/ipv4/ip_unprivileged_port_start", O_WRONLY | O_CLOEXEC);
	bool ok = fd >= 0 && write(fd, value, strlen(value)) == (ssize_t)strlen(value);
	if (fd >= 0)
		close(fd);
	return ok;
}

/*
 * The host-port rule follows the kernel's ip_unprivileged_port_start in the
 * daemon's namespace, not a fixed 1024. This thread moves to a network
 * namespace of its own (the daemon's other threads stay), with its lo up,
 * where the test may set the line: nothing of the host's is touched.
 */
static void ports_unprivileged_steps(void)
{
	struct err e = {0};
	struct ifreq lo = {.ifr_name = "lo"};
	int s = -1;
	if (unshare(CLONE_NEWNET) < 0) {
		SKIP("no network namespace of its own (%s): needs root", strerror(errno));
		return;
	}
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CHECK(s >= 0 && ioctl(s, SIOCGIFFLAGS, &lo) == 0);
	lo.ifr_flags |= IFF_UP;
	CHECK(ioctl(s, SIOCSIFFLAGS, &lo) == 0); /* the new namespace's own lo */
	close(s);
	CHECK(access_init("4242", &e) == 0);
	CHECK(ops_sandbox_create(&user, "u", &e) == 0);
	if (!CHECK(unpriv_start("2000")))
		return;
	CHECK(ops_sandbox_ports(&user, "u", "80 1500", &e) == -EACCES);
	CHECK(strstr(e.msg, "below 2000") != NULL);
	CHECK(ops_sandbox_ports(root, "u", "81 1500", &e) == 0); /* root may */
	CHECK(ops_sandbox_ports(&user, "u", "82 2000", &e) == 0);
	CHECK(unpriv_start("500"));
	CHECK(ops_sandbox_ports(&user, "u", "83 600", &e) == 0);
	CHECK(ops_sandbox_ports(&user, "u", "84 499", &e) == -EACCES);
	CHECK(strstr(e.msg, "below 500") != NULL);
}

/* --- what a user other than root may ask for (ops/ops_quota.c) ------- */

/* Set field @field of the user's sandbox @id to @value: its errno, its sentence in @e. */
static int user_set(const char *id, enum sandbox_field field, const char *value, struct err *e)
{
	*e = (struct err){0};
	return ops_sandbox_set(&user, id, field, value, e);
}

/* A running sandbox @id of the user's, and its snapshot in @snap. */
static bool user_sandbox_snapshot(const char *id, char snap[ID_MAX])
{
	struct err e = {0};
	return CHECK(ops_sandbox_create(&user, id, &e) == 0) &&
	       CHECK(user_set(id, SB_FIELD_IMAGE, IMAGE, &e) == 0) &&
	       CHECK(user_set(id, SB_FIELD_ENTRYPOINT, "sleep 1000", &e) == 0) &&
	       CHECK(OP_RUN(ops_sandbox_start(&user, id, OP), NULL, 0) == 0) &&
	       CHECK(OP_RUN(ops_sandbox_snapshot(&user, id, NULL, snap, OP), NULL, 0) == 0);
}

/*
 * --default-memory 256M, --max-memory 1G (cpus 1 and 2, pids 128 and 512):
 * the user stays within them in every entry (the files, a spec, a fork's
 * words) and may not write 0; root may do both. A refusal is EPERM and
 * changes nothing.
 */
static void quota_limits_steps(void)
{
	struct err e = {0};
	char snap[ID_MAX], id[ID_MAX];
	CHECK(access_init("4242", &e) == 0);
	CHECK(ops_sandbox_create(&user, "ql", &e) == 0);
	CHECK(user_set("ql", SB_FIELD_MEMORY, "0", &e) == -EPERM);
	CHECK(strstr(e.msg, "memory of sandbox ql may not be 0 (unlimited)") != NULL);
	CHECK(sb_get("ql").res.memory_bytes == 256 << 20); /* unchanged */
	CHECK(user_set("ql", SB_FIELD_MEMORY, "1024T", &e) == -EPERM);
	CHECK(strstr(e.msg, "up to 1073741824 (--max-memory)") != NULL);
	CHECK(user_set("ql", SB_FIELD_MEMORY, "1025M", &e) == -EPERM);
	CHECK(sb_get("ql").res.memory_bytes == 256 << 20);
	CHECK(user_set("ql", SB_FIELD_MEMORY, "1G", &e) == 0);
	CHECK(sb_get("ql").res.memory_bytes == 1 << 30);
	CHECK(user_set("ql", SB_FIELD_CPUS, "0", &e) == -EPERM);
	CHECK(user_set("ql", SB_FIELD_CPUS, "2.5", &e) == -EPERM);
	CHECK(strstr(e.msg, "--max-cpus") != NULL);
	CHECK(user_set("ql", SB_FIELD_CPUS, "1.5", &e) == 0);
	CHECK(user_set("ql", SB_FIELD_PIDS, "0", &e) == -EPERM);
	CHECK(user_set("ql", SB_FIELD_PIDS, "513", &e) == -EPERM);
	CHECK(user_set("ql", SB_FIELD_PIDS, "512", &e) == 0);
	CHECK(sb_get("ql").res.cpu_milli == 1500 && sb_get("ql").res.pids == 512);
	/* Root lifts a limit of the user's sandbox; the user's other fields stay its own. */
	CHECK(ops_sandbox_set(root, "ql", SB_FIELD_MEMORY, "0", &e) == 0);
	CHECK(sb_get("ql").res.memory_bytes == 0);
	CHECK(user_set("ql", SB_FIELD_CPUS, "1", &e) == 0);
	CHECK(ops_sandbox_set(root, "ql", SB_FIELD_CPUS, "1024", &e) == 0);

	/* A spec: the keys it names are asked for; none made on a refusal. */
	struct sandbox_spec spec = {.image = IMAGE, .res = {0, RES_UNSET, RES_UNSET}};
	e = (struct err){0};
	CHECK(ops_sandbox_new(&user, &spec, id, NULL, NULL, &e) == -EPERM);
	CHECK(strstr(e.msg, "memory of the sandbox spec may not be 0") != NULL);
	spec.res = (struct resources){RES_UNSET, 4000, RES_UNSET};
	CHECK(ops_sandbox_new(&user, &spec, id, NULL, NULL, &e) == -EPERM);
	spec.res = (struct resources){512 << 20, 2000, 64};
	CHECK(OP_RUN(ops_sandbox_new(&user, &spec, id, OP), NULL, 0) == 0);
	CHECK(sb_get(id).res.memory_bytes == 512 << 20 && sb_get(id).owner_uid == user.uid);
	spec.res = (struct resources){0, 0, 0};
	CHECK(OP_RUN(ops_sandbox_new(root, &spec, id, OP), NULL, 0) == 0);
	CHECK(sb_get(id).res.memory_bytes == 0 && sb_get(id).res.cpu_milli == 0);

	/* A fork's words: raised within the bound, never to 0 or past it, but by root. */
	if (!user_sandbox_snapshot("qf", snap))
		return;
	struct fork_opts big = {.raise = {1LL << 50, RES_UNSET, RES_UNSET}};
	e = (struct err){0};
	CHECK(ops_snapshot_fork(&user, snap, &big, id, NULL, NULL, &e) == -EPERM);
	CHECK(strstr(e.msg, "memory of the fork of snap-") && strstr(e.msg, "--max-memory"));
	struct fork_opts unlimited = {.raise = {0, RES_UNSET, RES_UNSET}};
	CHECK(ops_snapshot_fork(&user, snap, &unlimited, id, NULL, NULL, &e) == -EPERM);
	struct fork_opts cpus = {.raise = {RES_UNSET, 3000, RES_UNSET}};
	CHECK(ops_snapshot_fork(&user, snap, &cpus, id, NULL, NULL, &e) == -EPERM);
	struct fork_opts within = {.raise = {1 << 30, 2000, RES_UNSET}};
	CHECK(OP_RUN(ops_snapshot_fork(&user, snap, &within, id, OP), NULL, 0) == 0);
	CHECK(sb_get(id).res.memory_bytes == 1 << 30 && sb_get(id).res.cpu_milli == 2000);
	CHECK(OP_RUN(ops_snapshot_fork(root, snap, &unlimited, id, OP), NULL, 0) == 0);
	CHECK(sb_get(id).res.memory_bytes == 0);
	/* A snapshot root lifted: the user's fork keeps its 0, asked for by nobody. */
	CHECK(ops_sandbox_create(&user, "qz", &e) == 0);
	CHECK(ops_sandbox_set(root, "qz", SB_FIELD_MEMORY, "0", &e) == 0);
	CHECK(user_set("qz", SB_FIELD_IMAGE, IMAGE, &e) == 0);
	CHECK(user_set("qz", SB_FIELD_ENTRYPOINT, "sleep 1000", &e) == 0);
	CHECK(OP_RUN(ops_sandbox_start(&user, "qz", OP), NULL, 0) == 0);
	CHECK(OP_RUN(ops_sandbox_snapshot(&user, "qz", NULL, snap, OP), NULL, 0) == 0);
	CHECK(OP_RUN(ops_snapshot_fork(&user, snap, NULL, id, OP), NULL, 0) == 0);
	CHECK(sb_get(id).res.memory_bytes == 0);
}

/* The number of sandboxes the user owns. */
static int owned_cb(const struct sandbox *sb, void *arg)
{
	int *n = arg;
	*n += sb->owner_uid == user.uid;
	return 0;
}

static int user_owns(void)
{
	int n = 0;
	ops_sandboxes_each(root, owned_cb, &n);
	return n;
}

static int user_ports(const char *id, const char *line, struct err *e)
{
	*e = (struct err){0};
	return ops_sandbox_ports(&user, id, line, e);
}

/*
 * --max-sandboxes-per-user 4, --max-ports-per-user 3: the user's (N+1)th
 * sandbox, by mkdir, a spec or a fork (count=N whole), and its (N+1)th
 * port, by a write, a spec or a fork, are EDQUOT and make nothing; root is
 * not capped; a removed sandbox and a closed port make room.
 */
static void quota_caps_steps(void)
{
	struct err e = {0};
	char snap[ID_MAX], id[ID_MAX];
	_cleanup_strbuf_ struct strbuf made = STRBUF_INIT;
	CHECK(access_init("4242", &e) == 0);
	if (!user_sandbox_snapshot("s1", snap)) /* 1 */
		return;
	struct fork_opts four = {.count = 4};
	CHECK(ops_snapshot_forks(&user, snap, &four, &made, NULL, NULL, &e) == -EDQUOT);
	CHECK(strstr(e.msg, "uid 4242 owns 1 sandboxes and asks for 4 more, past the 4") &&
	      strstr(e.msg, "--max-sandboxes-per-user"));
	CHECK(made.len == 0 && user_owns() == 1);
	struct fork_opts two = {.count = 2};
	CHECK(OP_RUN(ops_snapshot_forks(&user, snap, &two, &made, OP), NULL, 0) == 0); /* 3 */
	CHECK(ops_sandbox_create(&user, "s4", &e) == 0);			       /* 4 */
	e = (struct err){0};
	CHECK(ops_sandbox_create(&user, "s5", &e) == -EDQUOT);
	CHECK(ops_snapshot_fork(&user, snap, NULL, id, NULL, NULL, &e) == -EDQUOT);
	struct sandbox_spec spec = {.image = IMAGE, .res = {RES_UNSET, RES_UNSET, RES_UNSET}};
	CHECK(ops_sandbox_new(&user, &spec, id, NULL, NULL, &e) == -EDQUOT);
	CHECK(user_owns() == 4);
	CHECK(ops_sandbox_create(root, "r1", &e) == 0); /* root: no cap */
	CHECK(OP_RUN(ops_snapshot_forks(root, snap, &two, &made, OP), NULL, 0) == 0);
	CHECK(ops_sandbox_remove(&user, "s4", &e) == 0);
	CHECK(ops_sandbox_create(&user, "s5", &e) == 0); /* 4 again */

	/* Ports: three in all over the user's sandboxes. */
	CHECK(user_ports("s5", "7001", &e) == 0 && user_ports("s5", "7002", &e) == 0);
	CHECK(user_ports("s1", "7003", &e) == 0);
	CHECK(user_ports("s1", "7004", &e) == -EDQUOT);
	CHECK(strstr(e.msg, "uid 4242 publishes 3 ports and asks for 1 more, past the 3") &&
	      strstr(e.msg, "--max-ports-per-user"));
	CHECK(host_port_of("s1", 7004) == 0);
	CHECK(ops_sandbox_ports(root, "r1", "7005", &e) == 0); /* root: no cap */
	CHECK(user_ports("s5", "close 7002", &e) == 0);
	CHECK(user_ports("s1", "7004", &e) == 0);
	/* A fork of a snapshot with ports publishes them: counted, with the sandbox. */
	char psnap[ID_MAX];
	CHECK(OP_RUN(ops_sandbox_snapshot(&user, "s1", NULL, psnap, OP), NULL, 0) == 0);
	CHECK(ops_sandbox_remove(&user, "s5", &e) == 0); /* 3 sandboxes, 2 ports (s1's) */
	e = (struct err){0};
	CHECK(ops_snapshot_fork(&user, psnap, NULL, id, NULL, NULL, &e) == -EDQUOT);
	CHECK(strstr(e.msg, "publishes 2 ports and asks for 2 more") != NULL);
	CHECK(user_owns() == 3);
	/* A spec's ports likewise. */
	xsnprintf(spec.ports, sizeof(spec.ports), "8001 0\n8002 0\n");
	CHECK(ops_sandbox_new(&user, &spec, id, NULL, NULL, &e) == -EDQUOT);
	CHECK(user_owns() == 3);
	xsnprintf(spec.ports, sizeof(spec.ports), "8001 0\n");
	CHECK(OP_RUN(ops_sandbox_new(&user, &spec, id, OP), NULL, 0) == 0);
	CHECK(host_port_of(id, 8001) != 0 && user_owns() == 4);
	/* A terminated sandbox's ports are closed and count no more; the sandbox still does. */
	CHECK(sb_terminate(id) == 0);
	CHECK(user_ports("s1", "7006", &e) == 0);
	CHECK(ops_sandbox_create(&user, "s6", &e) == -EDQUOT);
}

int main(void)
{
	if (!t_ops_begin("test_ops_callers"))
		return t_done() || 1;
	one_life("foreign", foreign_steps, NULL);
	one_life("ports-unprivileged", ports_unprivileged_steps, NULL);
	quota_cfg = (struct ops_config){.default_res = {256 << 20, 1000, 128},
					.max_res = {1 << 30, 2000, 512}};
	one_life("quota-limits", quota_limits_steps, NULL);
	quota_cfg = (struct ops_config){.max_sandboxes_per_user = 4, .max_ports_per_user = 3};
	one_life("quota-caps", quota_caps_steps, NULL);
	quota_cfg = (struct ops_config){0};
	return t_ops_done("test_ops_callers");
}
