/*
 * net.c - a sandbox's network namespace, veth, addresses, routes and nft
 * rules (net.h says who owns what; docs/network.md how it works). Netlink
 * through libnl-route-3, the firewall through libnftables: no hand-written
 * messages.
 */
#include "runtime/net/net.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/names.h"
#include "lib/spawn.h"
#include "lib/strbuf.h"
#include "runtime/net/net_nft.h"

#define IF_HEX 12	       /* hex digits of the runtime id in an interface name */
#define PEER_NAME "snfs0"      /* the sandbox's end, alone in its namespace */
#define NFT_CMD_MAX (16 << 10) /* one nft transaction's text */
#define FORWARD_PATH "/proc/sys/net/ipv4/ip_forward"

static pthread_mutex_t net_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char state[PATH_MAX];
	struct in_addr pool; /* masked */
	int prefix;
	bool forward_on; /* ip_forward set by us already */
	char resolv[PATH_MAX];
} net;

/* --- names and records --------------------------------------------------- */

static int host_if(const char *runtime_id, char out[NET_IF_MAX])
{
	if (!runtime_id_ok(runtime_id))
		return -EINVAL;
	snprintf(out, NET_IF_MAX, NET_IF_PREFIX "%.*s", IF_HEX,
		 runtime_id + strlen(RUNTIME_ID_PREFIX));
	return 0;
}

static int state_path(const char *leaf, const char *runtime_id, char *out, size_t len)
{
	return xsnprintf(out, len, "%s/%s/%s", net.state, leaf, runtime_id) < 0 ? -ENAMETOOLONG : 0;
}

int net_netns_path(const char *runtime_id, char *out, size_t len)
{
	return state_path("netns", runtime_id, out, len);
}

/*
 * A block is a /30, named by its network address (host order): +1 is the
 * host end, +2 the sandbox's. A record keeps the address, not an index in
 * the pool, so a sandbox keeps its block across a restart with another
 * --net-pool.
 */
static struct in_addr block_addr(uint32_t blk, int off)
{
	struct in_addr a = {htonl(blk + (uint32_t)off)};
	return a;
}

static long pool_blocks(void)
{
	return 1l << (32 - net.prefix - 2);
}

static uint32_t pool_block(long idx)
{
	return ntohl(net.pool.s_addr) + (uint32_t)idx * 4;
}

/*
 * The recorded block of @runtime_id, or -ENOENT. A record of before
 * (a bare index in the pool) reads as a block of the current pool, and
 * *@legacy says so (net_open() writes it again as an address).
 */
static int record_read(const char *runtime_id, uint32_t *blk, bool *legacy)
{
	char path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	size_t len;
	struct in_addr a;
	if (state_path("net", runtime_id, path, sizeof(path)) < 0 ||
	    read_file(path, &text, &len, 32) < 0)
		return -ENOENT;
	text[strcspn(text, "\n")] = '\0';
	*legacy = !strchr(text, '.');
	if (!*legacy) {
		if (inet_pton(AF_INET, text, &a) != 1 || (ntohl(a.s_addr) & 3) || !a.s_addr)
			return -ENOENT;
		*blk = ntohl(a.s_addr);
		return 0;
	}
	char *end;
	long idx = strtol(text, &end, 10);
	if (end == text || *end || idx <= 0 || idx >= pool_blocks())
		return -ENOENT;
	*blk = pool_block(idx);
	return 0;
}

/* @runtime_id's block; -ENOENT without a record. */
static int record_block(const char *runtime_id, uint32_t *blk)
{
	bool legacy;
	return record_read(runtime_id, blk, &legacy);
}

/* The lowest block of the pool no record holds; under net_lock. */
static int block_free(uint32_t *blk)
{
	long n = pool_blocks();
	_cleanup_free_ unsigned char *used = calloc((size_t)n, 1);
	char dir[PATH_MAX];
	DIR *d =
	    used && xsnprintf(dir, sizeof(dir), "%s/net", net.state) >= 0 ? opendir(dir) : NULL;
	if (!d)
		return -ENOMEM;
	for (struct dirent *de; (de = readdir(d));) {
		uint32_t b;
		/* A block of another pool (a restart with another --net-pool) is not in this one.
		 */
		if (runtime_id_ok(de->d_name) && record_block(de->d_name, &b) == 0 &&
		    b >= pool_block(0) && b - pool_block(0) < (uint32_t)n * 4)
			used[(b - pool_block(0)) / 4] = 1;
	}
	closedir(d);
	/* Block 0 holds the pool's network address: left out. */
	for (long i = 1; i < n; i++) {
		if (!used[i]) {
			*blk = pool_block(i);
			return 0;
		}
	}
	return -ENOSPC;
}

/* Whether any sandbox's network is recorded; under net_lock. */
static bool records_any(void)
{
	char dir[PATH_MAX];
	bool any = false;
	_cleanup_closedir_ DIR *d =
	    xsnprintf(dir, sizeof(dir), "%s/net", net.state) >= 0 ? opendir(dir) : NULL;
	for (struct dirent *de; d && !any && (de = readdir(d));)
		any = runtime_id_ok(de->d_name);
	return any;
}

static int record_write(const char *runtime_id, uint32_t blk);

/*
 * Records of before keep an index in the pool: read with the pool of this
 * start (the one they were made with, unless it changed at this very
 * upgrade), they are written again as the block's address.
 */
static void records_migrate(void)
{
	char dir[PATH_MAX];
	_cleanup_closedir_ DIR *d =
	    xsnprintf(dir, sizeof(dir), "%s/net", net.state) >= 0 ? opendir(dir) : NULL;
	for (struct dirent *de; d && (de = readdir(d));) {
		uint32_t blk;
		bool legacy;
		if (runtime_id_ok(de->d_name) && record_read(de->d_name, &blk, &legacy) == 0 &&
		    legacy && record_write(de->d_name, blk) < 0)
			warning("cannot write the network record of %s again", de->d_name);
	}
}

static int record_write(const char *runtime_id, uint32_t blk)
{
	char path[PATH_MAX], text[INET_ADDRSTRLEN + 1];
	struct in_addr a = block_addr(blk, 0);
	inet_ntop(AF_INET, &a, text, INET_ADDRSTRLEN);
	int n = (int)strlen(text);
	text[n++] = '\n';
	if (state_path("net", runtime_id, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	return write_file_durable(path, text, (size_t)n);
}

/* --- netlink -------------------------------------------------------------- */

/* A route socket in the namespace of @nsfd (-1: the daemon's): setns on this thread only. */
static struct nl_sock *route_socket(int nsfd)
{
	struct nl_sock *sk = nl_socket_alloc();
	_cleanup_close_ int self = nsfd >= 0 ? open("/proc/thread-self/ns/net", O_RDONLY) : -1;
	if (!sk || (nsfd >= 0 && (self < 0 || setns(nsfd, CLONE_NEWNET) < 0))) {
		nl_socket_free(sk);
		return NULL;
	}
	int rc = nl_connect(sk, NETLINK_ROUTE);
	/* Back home before anything else: a thread left elsewhere would be a bug for all. */
	if (nsfd >= 0 && setns(self, CLONE_NEWNET) < 0)
		abort();
	if (rc < 0) {
		nl_socket_free(sk);
		return NULL;
	}
	return sk;
}

static int link_index(struct nl_sock *sk, const char *name)
{
	struct rtnl_link *l = NULL;
	if (rtnl_link_get_kernel(sk, 0, name, &l) < 0)
		return -ENODEV;
	int idx = rtnl_link_get_ifindex(l);
	rtnl_link_put(l);
	return idx;
}

static int link_up(struct nl_sock *sk, const char *name)
{
	struct rtnl_link *l = NULL, *ch = rtnl_link_alloc();
	int rc = ch && rtnl_link_get_kernel(sk, 0, name, &l) == 0 ? 0 : -ENODEV;
	if (rc == 0) {
		rtnl_link_set_flags(ch, IFF_UP);
		rc = rtnl_link_change(sk, l, ch, 0) < 0 ? -EIO : 0;
	}
	rtnl_link_put(l);
	rtnl_link_put(ch);
	return rc;
}

static int addr_add(struct nl_sock *sk, int ifindex, struct in_addr a)
{
	struct rtnl_addr *ra = rtnl_addr_alloc();
	struct nl_addr *local = nl_addr_build(AF_INET, &a, sizeof(a));
	int rc = -ENOMEM;
	if (ra && local) {
		nl_addr_set_prefixlen(local, 30);
		rtnl_addr_set_ifindex(ra, ifindex);
		rtnl_addr_set_local(ra, local);
		rc = rtnl_addr_add(sk, ra, 0) < 0 ? -EIO : 0;
	}
	nl_addr_put(local);
	rtnl_addr_put(ra);
	return rc;
}

static int route_default(struct nl_sock *sk, int ifindex, struct in_addr via)
{
	struct rtnl_route *r = rtnl_route_alloc();
	struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
	struct nl_addr *dst = nl_addr_build(AF_INET, &(struct in_addr){0}, 4);
	struct nl_addr *gw = nl_addr_build(AF_INET, &via, sizeof(via));
	int rc = -ENOMEM;
	if (r && nh && dst && gw) {
		nl_addr_set_prefixlen(dst, 0);
		rtnl_route_set_family(r, AF_INET);
		rtnl_route_set_dst(r, dst);
		rtnl_route_nh_set_ifindex(nh, ifindex);
		rtnl_route_nh_set_gateway(nh, gw);
		rtnl_route_add_nexthop(r, nh);
		nh = NULL; /* the route owns it now */
		rc = rtnl_route_add(sk, r, 0) < 0 ? -EIO : 0;
	}
	if (nh)
		rtnl_route_nh_free(nh);
	nl_addr_put(dst);
	nl_addr_put(gw);
	rtnl_route_put(r);
	return rc;
}

/* The veth pair: host end @name in the daemon's namespace, PEER_NAME in @nsfd's. */
static int veth_add(struct nl_sock *sk, const char *name, int nsfd)
{
	struct rtnl_link *l = rtnl_link_veth_alloc();
	if (!l)
		return -ENOMEM;
	struct rtnl_link *peer = rtnl_link_veth_get_peer(l);
	rtnl_link_set_name(l, name);
	rtnl_link_set_name(peer, PEER_NAME);
	rtnl_link_set_ns_fd(peer, nsfd);
	int rc = rtnl_link_add(sk, l, NLM_F_CREATE | NLM_F_EXCL) < 0 ? -EIO : 0;
	rtnl_link_put(peer);
	rtnl_link_veth_release(l);
	return rc;
}

/* Delete host veth @name (its peer goes with it); only names of ours come here. */
static void veth_del(const char *name)
{
	struct nl_sock *sk = route_socket(-1);
	struct rtnl_link *l = rtnl_link_alloc();
	if (sk && l && strncmp(name, NET_IF_PREFIX, strlen(NET_IF_PREFIX)) == 0) {
		rtnl_link_set_name(l, name);
		rtnl_link_delete(sk, l);
	}
	rtnl_link_put(l);
	nl_socket_free(sk);
}

/* --- namespace ------------------------------------------------------------ */

/* A new network namespace bind-mounted on @path, made by a child that unshares. */
static int netns_make(const char *path)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	pid_t pid = spawn_fork(); /* owned: the daemon's reaper leaves it to us (lib/spawn.h) */
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* Only system calls here: the parent has threads. */
		if (unshare(CLONE_NEWNET) < 0 ||
		    mount("/proc/self/ns/net", path, NULL, MS_BIND, NULL) < 0)
			_exit(1);
		_exit(0);
	}
	int st = 0;
	if (spawn_wait(pid, &st) < 0)
		return -EIO;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

static void netns_drop(const char *path)
{
	umount2(path, MNT_DETACH);
	unlink(path);
}

/* --- nftables ------------------------------------------------------------- */

/*
 * The last one out takes the table, so nothing of snapfs stays in the
 * ruleset; quiet when there is none (nft 1.0.6 has no `destroy`).
 */
static void table_drop_if_idle(void)
{
	struct err e = {0};
	/* Only the namespace's owner: another daemon's table is not ours to take. */
	if (net_nft_owned() && !records_any())
		net_nft_run("delete table inet snapfs\n", &e);
}

/*
 * The table's hooks as this snapfs writes them, over those a daemon of
 * before left with its live sandboxes (their chains, elements and blocks
 * are kept): the inbound filter holds for them too from the start-up on.
 */
static void table_base_again(void)
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	struct err e = {0};
	net_nft_base(&sb);
	if (strbuf_error(&sb) < 0 || net_nft_run(strbuf_str(&sb), &e) < 0)
		warning("cannot write the hooks of table inet snapfs again: %s", e.msg);
}

static int nft_sandbox(const char *ifn, uint32_t blk, const struct net_egress *eg, bool base,
		       struct err *e)
{
	struct net_rule rules[NET_RULES_MAX];
	int n;
	int rc = net_rules_parse(eg->rules ? eg->rules : "", rules, &n, e);
	if (rc < 0)
		return rc;
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	struct net_chain c = {ifn, block_addr(blk, 2), net.pool, net.prefix, rules,
			      n,   eg->owner_root};
	char bl[INET_ADDRSTRLEN];
	struct in_addr b = block_addr(blk, 0);
	inet_ntop(AF_INET, &b, bl, sizeof(bl));
	/* A table flushed away meanwhile (nft flush ruleset) is made again. */
	if (!base && !net_nft_table_exists())
		base = true;
	if (base)
		net_nft_base(&sb);
	net_nft_chain(&sb, &c);
	/* Every time: the element is gone with the table after an `nft flush ruleset`. */
	strbuf_addf(&sb, "add element inet snapfs sandboxes { \"%s\" : jump sb_%s }\n", ifn, ifn);
	/* Its block: NATed out, and denied to every other sandbox, whatever the pool is now. */
	strbuf_addf(&sb, "add element inet snapfs blocks { %s/30 }\n", bl);
	rc = strbuf_error(&sb);
	if (rc < 0 || sb.len >= NFT_CMD_MAX)
		return err_set(e, ENOMEM, "cannot build the egress rules");
	return net_nft_run(strbuf_str(&sb), e);
}

static void nft_sandbox_drop(const char *ifn, const uint32_t *blk)
{
	char cmd[256], bl[INET_ADDRSTRLEN];
	struct err e = {0};
	if (!net_nft_owned())
		return; /* nothing of ours in the table: the claim is taken before any set-up */
	if (blk) {
		struct in_addr b = block_addr(*blk, 0);
		inet_ntop(AF_INET, &b, bl, sizeof(bl));
		snprintf(cmd, sizeof(cmd), "delete element inet snapfs blocks { %s/30 }\n", bl);
		net_nft_run(cmd, &e);
	}
	snprintf(cmd, sizeof(cmd), "delete element inet snapfs sandboxes { \"%s\" }\n", ifn);
	net_nft_run(cmd, &e);
	snprintf(cmd, sizeof(cmd), "delete chain inet snapfs sb_%s\n", ifn);
	net_nft_run(cmd, &e);
}

int net_set_egress(const char *runtime_id, const struct net_egress *eg, struct err *e)
{
	char ifn[NET_IF_MAX];
	uint32_t blk;
	if (host_if(runtime_id, ifn) < 0)
		return 0;
	/*
	 * The record is read under the lock net_down() takes it away under:
	 * a network gone meanwhile gets no chain, element or block again.
	 */
	pthread_mutex_lock(&net_lock);
	int rc = record_block(runtime_id, &blk) < 0 ? 0 : nft_sandbox(ifn, blk, eg, false, e);
	pthread_mutex_unlock(&net_lock);
	return rc; /* without a network now the rules apply at the next start */
}

/* --- up and down ---------------------------------------------------------- */

/*
 * <state>/NET_FORWARD_RECORD, "was=0 netns=INODE boot=ID\n", written
 * durably before snapfs turns forwarding on where it found it off: a purge
 * (debian/postrm) sets back only what snapfs changed, in the namespace and
 * boot it changed it in. Found on: a record of this namespace and boot is
 * this state directory's own from before a restart and stays; any other is
 * stale (its boot or namespace is gone, and someone else turned it on) and
 * goes.
 */
static int forward_record(struct err *e)
{
	char path[PATH_MAX], line[128];
	_cleanup_free_ char *was = NULL, *boot = NULL, *old = NULL;
	size_t n;
	struct stat st;
	if (xsnprintf(path, sizeof(path), "%s/" NET_FORWARD_RECORD, net.state) < 0)
		return err_set(e, ENAMETOOLONG, "state directory path is too long");
	if (read_file(FORWARD_PATH, &was, &n, 16) < 0)
		return 0; /* the write that follows says why */
	if (stat("/proc/thread-self/ns/net", &st) < 0 ||
	    read_file("/proc/sys/kernel/random/boot_id", &boot, &n, 64) < 0)
		return err_set(e, EIO, "cannot tell the network namespace or the boot id");
	rstrip(boot);
	if (xsnprintf(line, sizeof(line), "was=0 netns=%llu boot=%s\n",
		      (unsigned long long)st.st_ino, boot) < 0)
		return err_set(e, EIO, "the boot id is too long");
	if (was[0] == '1') {
		if (read_file(path, &old, &n, sizeof(line)) == 0 && strcmp(old, line) != 0)
			unlink(path);
		return 0;
	}
	int rc = write_file_durable(path, line, strlen(line));
	return rc < 0 ? err_set(e, -rc, "cannot record ip_forward's value in %s: %s", path,
				strerror(-rc))
		      : 0;
}

/*
 * net.ipv4.ip_forward=1, which NAT out of the sandboxes needs. It applies to
 * every interface of the namespace: where it was 0, the host routes between
 * its other networks from now on unless a forward policy drops, which
 * snapfs does not set (docs/network.md): said once, in the log.
 */
static int forward_on(struct err *e)
{
	if (net.forward_on)
		return 0;
	_cleanup_free_ char *was = NULL;
	size_t len;
	if (read_file(FORWARD_PATH, &was, &len, 16) == 0 && was[0] == '0')
		warning("net.ipv4.ip_forward was 0: snapfs sets it to 1 for egress sandboxes; "
			"this namespace now forwards between all its interfaces where no forward "
			"policy drops (docs/network.md, \"What snapfs changes on the host\")");
	int rc = forward_record(e);
	if (rc < 0)
		return rc;
	rc = write_file_durable(FORWARD_PATH, "1\n", 2);
	if (rc == -EINVAL || rc == -EROFS || rc < 0) {
		/* write_file_durable renames: procfs takes a plain write. */
		int fd = open(FORWARD_PATH, O_WRONLY | O_CLOEXEC);
		rc = fd >= 0 && write(fd, "1\n", 2) == 2 ? 0 : -errno;
		if (fd >= 0)
			close(fd);
	}
	if (rc < 0)
		return err_set(e, -rc, "cannot turn on IPv4 forwarding: %s", strerror(-rc));
	net.forward_on = true;
	return 0;
}

/*
 * The links and addresses of block @idx (its address): host end @ifn, the peer in @nsfd.
 * *@made says whether the veth is ours: a name already taken is not.
 */
static int links_up(const char *ifn, int nsfd, uint32_t idx, bool *made, struct err *e)
{
	struct nl_sock *sk = route_socket(-1), *in = route_socket(nsfd);
	int rc = sk && in ? 0 : -ENOMEM;
	if (rc == 0 && veth_add(sk, ifn, nsfd) < 0)
		rc = err_set(e, EIO, "cannot create veth %s (is the name taken?)", ifn);
	*made = rc == 0;
	int hi = rc == 0 ? link_index(sk, ifn) : -1, pi = rc == 0 ? link_index(in, PEER_NAME) : -1;
	if (rc == 0 && (hi < 0 || pi < 0 || addr_add(sk, hi, block_addr(idx, 1)) < 0 ||
			addr_add(in, pi, block_addr(idx, 2)) < 0 || link_up(sk, ifn) < 0 ||
			link_up(in, PEER_NAME) < 0 || link_up(in, "lo") < 0 ||
			route_default(in, pi, block_addr(idx, 1)) < 0))
		rc = err_set(e, EIO, "cannot configure veth %s", ifn);
	if (rc == -ENOMEM && !e->code)
		err_set(e, ENOMEM, "cannot open a netlink socket");
	nl_socket_free(sk);
	nl_socket_free(in);
	return rc;
}

/*
 * All of @runtime_id's network. The veth and the chain only when @ours:
 * both are named by the veth, so where the name was taken (by another
 * sandbox whose runtime id starts alike, or by anything else), they are
 * the other's and stay.
 */
static void down_locked(const char *runtime_id, const char *ifn, bool ours)
{
	char path[PATH_MAX];
	uint32_t blk;
	if (ours) {
		nft_sandbox_drop(ifn, record_block(runtime_id, &blk) == 0 ? &blk : NULL);
		veth_del(ifn);
	}
	if (net_netns_path(runtime_id, path, sizeof(path)) == 0)
		netns_drop(path);
	/* The record goes last: while it is there, start-up will finish this. */
	if (state_path("net", runtime_id, path, sizeof(path)) == 0)
		unlink(path);
	table_drop_if_idle();
}

static int up_locked(const char *runtime_id, const char *ifn, const struct net_egress *eg,
		     bool *made, struct err *e)
{
	char ns[PATH_MAX];
	int rc = net_nft_claim(e);
	if (rc < 0)
		return rc;
	uint32_t idx;
	rc = block_free(&idx);
	if (rc < 0)
		return err_set(e, -rc, "no free address in the network pool");
	rc = record_write(runtime_id, idx);
	if (rc < 0)
		return err_set(e, -rc, "cannot record the network of %s", runtime_id);
	rc = net_netns_path(runtime_id, ns, sizeof(ns));
	if (rc == 0)
		rc = netns_make(ns);
	if (rc < 0)
		return err_set(e, -rc, "cannot create a network namespace: %s", strerror(-rc));
	_cleanup_close_ int nsfd = open(ns, O_RDONLY | O_CLOEXEC);
	if (nsfd < 0)
		return err_set(e, errno, "cannot open network namespace %s", ns);
	rc = forward_on(e);
	if (rc == 0)
		rc = links_up(ifn, nsfd, idx, made, e);
	return rc == 0 ? nft_sandbox(ifn, idx, eg, true, e) : rc;
}

int net_up(const char *runtime_id, const struct net_egress *eg, struct err *e)
{
	char ifn[NET_IF_MAX];
	if (host_if(runtime_id, ifn) < 0)
		return err_set(e, EINVAL, "%s is not a runtime id", runtime_id);
	bool made = false;
	pthread_mutex_lock(&net_lock);
	int rc = up_locked(runtime_id, ifn, eg, &made, e);
	if (rc < 0)
		down_locked(runtime_id, ifn, made);
	pthread_mutex_unlock(&net_lock);
	return rc;
}

void net_down(const char *runtime_id)
{
	char ifn[NET_IF_MAX];
	if (host_if(runtime_id, ifn) < 0)
		return;
	pthread_mutex_lock(&net_lock);
	/* Without a record the veth was never made by us (the record comes first, goes last). */
	uint32_t blk;
	down_locked(runtime_id, ifn, record_block(runtime_id, &blk) == 0);
	pthread_mutex_unlock(&net_lock);
}

void net_sweep(bool (*keep)(const char *runtime_id, void *arg), void *arg)
{
	static const char *const dirs[] = {"net", "netns"};
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		char dir[PATH_MAX];
		_cleanup_closedir_ DIR *d =
		    xsnprintf(dir, sizeof(dir), "%s/%s", net.state, dirs[i]) >= 0 ? opendir(dir)
										  : NULL;
		for (struct dirent *de; d && (de = readdir(d));)
			if (runtime_id_ok(de->d_name) && !keep(de->d_name, arg))
				net_down(de->d_name);
	}
	pthread_mutex_lock(&net_lock);
	table_drop_if_idle();
	pthread_mutex_unlock(&net_lock);
}

/* --- views ------------------------------------------------------------------ */

bool net_table_lost(void)
{
	pthread_mutex_lock(&net_lock);
	bool lost = net_nft_owned() && records_any() && !net_nft_table_exists();
	pthread_mutex_unlock(&net_lock);
	return lost;
}

int net_sandbox_addr(const char *runtime_id, struct in_addr *out)
{
	uint32_t blk;
	if (record_block(runtime_id, &blk) < 0)
		return -ENOENT;
	*out = block_addr(blk, 2);
	return 0;
}

int net_counters(const char *runtime_id, uint64_t *in, uint64_t *out)
{
	char ifn[NET_IF_MAX];
	struct rtnl_link *l = NULL;
	if (host_if(runtime_id, ifn) < 0)
		return -EINVAL;
	struct nl_sock *sk = route_socket(-1);
	int rc = sk && rtnl_link_get_kernel(sk, 0, ifn, &l) == 0 ? 0 : -ENOENT;
	if (rc == 0) {
		/* What the host end sends is what the sandbox receives. */
		*in = rtnl_link_get_stat(l, RTNL_LINK_TX_BYTES);
		*out = rtnl_link_get_stat(l, RTNL_LINK_RX_BYTES);
	}
	rtnl_link_put(l);
	nl_socket_free(sk);
	return rc;
}

int net_write_resolv(const char *path, struct err *e)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int rc = read_file(net.resolv, &text, &len, 64 << 10);
	if (rc < 0)
		return err_set(e, -rc, "cannot read %s: %s", net.resolv, strerror(-rc));
	rc = write_file_durable(path, text, len);
	/* Every process of the sandbox resolves, root or not (_apt, a server that drops to nobody).
	 */
	if (rc == 0 && chmod(path, 0644) < 0)
		rc = -errno;
	return rc < 0 ? err_set(e, -rc, "cannot write %s: %s", path, strerror(-rc)) : 0;
}

bool net_rule_in_denied_here(const struct net_rule *r)
{
	struct in_addr pool = net.pool;
	int prefix = net.prefix;
	if (prefix == 0 && net_cidr_parse(NET_POOL_DEFAULT, &pool, &prefix, NULL) < 0)
		return true;
	return net_rule_in_denied(r, pool, prefix);
}

int net_open(const char *state_dir, const char *pool, const char *resolv, struct err *e)
{
	char dir[PATH_MAX];
	if (xsnprintf(net.state, sizeof(net.state), "%s", state_dir) < 0 ||
	    xsnprintf(net.resolv, sizeof(net.resolv), "%s", resolv ? resolv : "/etc/resolv.conf") <
		0)
		return err_set(e, ENAMETOOLONG, "state or --net-resolv path too long");
	int rc = net_cidr_parse(pool ? pool : NET_POOL_DEFAULT, &net.pool, &net.prefix, e);
	if (rc < 0)
		return rc;
	if (net.prefix > 29)
		return err_set(e, EINVAL, "--net-pool needs a prefix of /29 or shorter");
	static const char *const dirs[] = {"net", "netns"};
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		rc = xsnprintf(dir, sizeof(dir), "%s/%s", state_dir, dirs[i]) < 0 ? -ENAMETOOLONG
										  : 0;
		if (rc == 0)
			rc = mkdir_p(dir, 0700);
		if (rc < 0)
			return err_set(e, -rc, "cannot create %s: %s", dir, strerror(-rc));
	}
	records_migrate();
	/* Live networks of ours: the namespace's table must be this daemon's (net_nft.h). */
	if (!records_any())
		return 0;
	rc = net_nft_claim(e);
	if (rc == 0 && net_nft_table_exists())
		table_base_again();
	return rc;
}

/* --- the runsc helper ------------------------------------------------------- */

int net_exec_main(int argc, char **argv)
{
	/*
	 * runsc 20240729 refuses a network when /proc/sys/net/core/rmem_default
	 * exists, which it does in every namespace now. Hide /proc/sys/net from
	 * runsc alone: a mount namespace of its own, private so nothing
	 * propagates back, and a tmpfs over it there. The daemon's view and
	 * the host's sysctls are untouched (docs/network.md).
	 */
	if (argc < 3) {
		fprintf(stderr, "usage: snapfs " NET_EXEC_FLAG " RUNSC ARGS...\n");
		return 127;
	}
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("snapfs-sysnet", "/proc/sys/net", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "size=4k,mode=0555") < 0) {
		fprintf(stderr, "snapfs: cannot hide /proc/sys/net from runsc: %s\n",
			strerror(errno));
		return 127;
	}
	/* runsc_env gives PATH: --runsc may be a bare name. */
	execvp(argv[2], argv + 2);
	fprintf(stderr, "snapfs: cannot run %s: %s\n", argv[2], strerror(errno));
	return 127;
}
