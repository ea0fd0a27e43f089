/*
 * net_nft.h - `table inet snapfs` (runtime/net/net.h): the text of its nft
 * transactions, which net.c runs through libnftables, and the lock that
 * makes one daemon per network namespace its owner. The text builders are
 * pure, so tests/unit/test_net.c reads what a chain says.
 *
 * Who owns what: net.c calls all of this under its net_lock (or before
 * any thread, in net_open()); the lock file's descriptor (net_nft.c
 * owner_fd) is held from the first claim to the exit.
 */
#ifndef SNAPFS_NET_NFT_H
#define SNAPFS_NET_NFT_H

#include <stdbool.h>

#include "lib/strbuf.h"
#include "runtime/net/net.h"

/* One sandbox's chain: sb_<ifn>, its own address, its rules. */
struct net_chain {
	const char *ifn;     /* the host end of its veth */
	struct in_addr self; /* its address: the only source it may use */
	struct in_addr pool; /* --net-pool, masked */
	int pool_prefix;
	const struct net_rule *rules;
	int n;
	bool owner_root; /* its owner is root: its rules inside a denied range come first */
};

/*
 * The table, its hooks, its map `sandboxes` (veth: its chain), its set
 * `blocks` (every sandbox's /30: NATed out, denied to the others), the
 * inbound filter (forward and output: only replies, and the forwarder's
 * sockets marked NET_FORWARD_MARK, reach a block) and the NAT rule;
 * idempotent ("add", and the hooks' chains flushed first).
 */
void net_nft_base(struct strbuf *sb);
/* Flush and fill @c's chain (docs/network.md, "The sandbox's chain"). */
void net_nft_chain(struct strbuf *sb, const struct net_chain *c);
/* Run @cmd in one transaction; -EIO with nft's first line in @e. */
int net_nft_run(const char *cmd, struct err *e);
/* Whether the table is there (an `nft flush ruleset` takes it). */
bool net_nft_table_exists(void);

/*
 * One daemon per network namespace owns the table: a flock on
 * NET_LOCK_DIR/netns-<inode of the namespace>.lock, taken before the daemon
 * makes or removes anything of the table, held until it exits. -EBUSY with
 * a sentence naming the other daemon's pid when another holds it.
 */
#define NET_LOCK_DIR "/run/snapfs"
int net_nft_claim(struct err *e);
/* Whether this daemon holds it. */
bool net_nft_owned(void);

#endif
