/*
 * net.h - a sandbox's network (docs/network.md): `network` = `none` (the
 * default: runsc --network=none) or `egress`: a network namespace of its
 * own, a veth pair, a /30 of --net-pool, a default route through the
 * daemon's namespace, NAT out of it, and the `egress` rules.
 *
 * What snapfs owns, and nothing else is ever touched:
 *  - <state>/net/<runtime id>: the record of one sandbox's network (its
 *    /30's index in the pool); written before anything is made, removed
 *    after all of it is gone, so start-up finds what a killed daemon left.
 *  - <state>/netns/<runtime id>: the namespace, an nsfs bind mount.
 *  - the host end of the veth, NET_IF_PREFIX + 12 hex digits of the runtime
 *    id (names.h net_if_name()); its peer lives in the namespace.
 *  - `table inet snapfs` in the daemon's namespace: NAT, and one chain per
 *    sandbox (sb_<veth>) jumped to from the table's forward and input
 *    hooks through the verdict map `sandboxes`; inbound, the forward and
 *    output hooks let into the sandboxes' blocks only replies and the
 *    port forwarder's marked sockets (NET_FORWARD_MARK).
 *    Its owner is one daemon per namespace, by a flock on
 *    /run/snapfs/netns-<inode>.lock (runtime/net/net_nft.h), taken at start-up
 *    when networks are recorded, else at the first egress set-up: a second
 *    daemon never makes or removes any of it.
 *  - net.ipv4.ip_forward of the daemon's namespace, set to 1 at the first
 *    egress sandbox and never set back by the daemon (another user may rely
 *    on it). Where it was 0, <state>/NET_FORWARD_RECORD says so first
 *    ("was=0 netns=INODE boot=ID"): a purge (debian/postrm) sets it back
 *    to 0 in that namespace and boot, and nowhere else.
 * All state is on disk and in the kernel; the module's one lock (net_lock
 * in net.c) serializes the pool's allocation and the nft context.
 */
#ifndef SNAPFS_NET_H
#define SNAPFS_NET_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/util.h"

#define NET_POOL_DEFAULT "10.213.0.0/16" /* --net-pool's default */
#define NET_RULES_MAX 64		 /* most lines of an egress file */
#define NET_FORWARD_RECORD "ip_forward"	 /* in the state directory: ip_forward was 0 */

/*
 * The firewall mark (SO_MARK) of the published ports' forwarder's sockets
 * to a sandbox (runtime/net/forward.c): `table inet snapfs`'s output hook lets
 * a connection from the host to a sandbox's block open only with it, so a
 * published port is the one way in (docs/network.md). "snfs" in ASCII; it
 * is matched whole, and only on packets to the sandboxes' blocks.
 */
#define NET_FORWARD_MARK 0x736e6673
#define NET_MARK_STR_(x) #x
#define NET_MARK_STR(x) NET_MARK_STR_(x)
#define NET_FORWARD_MARK_TEXT NET_MARK_STR(NET_FORWARD_MARK)

/* One egress rule: allow or deny an IPv4 CIDR. */
struct net_rule {
	bool allow;
	struct in_addr net; /* masked */
	int prefix;	    /* 0..32 */
};

/* "A.B.C.D/N" (or a bare address: /32) into @net, @prefix; -EINVAL with a sentence. */
int net_cidr_parse(const char *s, struct in_addr *net, int *prefix, struct err *e);
/*
 * The egress file's text: `allow CIDR` / `deny CIDR` lines, blank lines and
 * `#` comments skipped; at most NET_RULES_MAX. -EINVAL naming the line.
 */
int net_rules_parse(const char *text, struct net_rule *out, int *n, struct err *e);
/*
 * Whether @r lies wholly inside a range every sandbox is denied by
 * default: link-local (cloud metadata), multicast, or the pool @pool/@prefix
 * (the other sandboxes). Only such a rule of root's is read before the
 * denies; `allow 0.0.0.0/0` is not one, so it never opens them.
 */
bool net_rule_in_denied(const struct net_rule *r, struct in_addr pool, int pool_prefix);
/* net_rule_in_denied() against the pool net_open() was given (the default before). */
bool net_rule_in_denied_here(const struct net_rule *r);
/*
 * Comment out, in the egress text @text (@size bytes with its NUL), every
 * `allow` rule that @in_denied says lies inside a denied range: such a line
 * becomes NET_RULE_INERT "allow A.B.C.D/N", which the parser skips and a
 * reader still sees. Where the comments would not fit in @size, those
 * lines go. Returns how many rules were taken out.
 */
#define NET_RULE_INERT "# inert, not root's: "
int net_rules_disarm(char *text, size_t size, bool (*in_denied)(const struct net_rule *r));

/*
 * A sandbox's egress rules and whose they are. The mandatory denies (the
 * host, the pool, link-local, multicast) come first, then the rules; of a
 * root owner's rules, those inside a denied range (net_rule_in_denied())
 * come before the denies, in their order, so root opens one only by naming
 * it (docs/network.md).
 */
struct net_egress {
	const char *rules; /* the egress file's text; NULL: none */
	bool owner_root;   /* the sandbox's owner is root (ops/access.h) */
};

/*
 * Open the module: @state_dir's net/ and netns/, the pool (NULL: the
 * default), the resolv.conf sandboxes get (NULL: /etc/resolv.conf).
 */
int net_open(const char *state_dir, const char *pool, const char *resolv, struct err *e);

/*
 * Set @runtime_id's network up: record, namespace, veth, addresses, route,
 * nft chain with @eg's rules. On failure nothing is left. Fills
 * @netns_path (the nsfs file for the bundle) when not NULL.
 */
int net_up(const char *runtime_id, const struct net_egress *eg, struct err *e);
/* Take it all down; quiet when there is nothing. */
void net_down(const char *runtime_id);
/* Replace the sandbox's chain with @eg's rules (one nft transaction). */
int net_set_egress(const char *runtime_id, const struct net_egress *eg, struct err *e);
/*
 * Whether this daemon's networks are recorded but `table inet snapfs` is
 * gone (an `nft flush ruleset`): the caller then sets every live sandbox's
 * chain again (net_set_egress() makes the table and its element anew).
 */
bool net_table_lost(void);
/* The namespace's nsfs file, and the resolv.conf the sandbox gets, as paths. */
int net_netns_path(const char *runtime_id, char *out, size_t len);
/* Write the sandboxes' resolvers into @path (a copy of --net-resolv's file). */
int net_write_resolv(const char *path, struct err *e);
/* Start-up: take down every recorded network @keep does not claim. */
void net_sweep(bool (*keep)(const char *runtime_id, void *arg), void *arg);

/* The sandbox-side address of @runtime_id's network: a published port forwards to it. */
int net_sandbox_addr(const char *runtime_id, struct in_addr *out);
/* Bytes the sandbox received (in) and sent (out): the host veth's counters. */
int net_counters(const char *runtime_id, uint64_t *in, uint64_t *out);

/*
 * The runsc helper: `snapfs --net-exec NETNS RUNSC ARGS...` (main.c calls
 * it as argv[1] says): a private mount namespace with a tmpfs over
 * /proc/sys/net, then exec of runsc. Returns only on failure (127).
 */
#define NET_EXEC_FLAG "--net-exec"
int net_exec_main(int argc, char **argv);

/*
 * Published ports (ops/ops_ports.c) forward to net_sandbox_addr() of
 * the sandbox's current container, asked for each connection: nothing
 * here needs telling when a network comes or goes.
 */

#endif
