/*
 * net_nft.c - the text of `table inet snapfs` and its sandboxes' chains,
 * and running it through libnftables (net_nft.h).
 */
#include "runtime/net/net_nft.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/names.h"

int net_nft_run(const char *cmd, struct err *e)
{
	struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!ctx)
		return err_set(e, ENOMEM, "cannot open libnftables");
	nft_ctx_buffer_error(ctx);
	int rc = nft_run_cmd_from_buffer(ctx, cmd);
	if (rc != 0) {
		const char *msg = nft_ctx_get_error_buffer(ctx);
		char line[200];
		snprintf(line, sizeof(line), "%s", msg ? msg : "");
		line[strcspn(line, "\n")] = '\0';
		err_set(e, EIO, "nftables refused the rules: %s", line);
	}
	nft_ctx_free(ctx);
	return rc != 0 ? -EIO : 0;
}

bool net_nft_table_exists(void)
{
	struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!ctx)
		return true; /* cannot tell: the transaction that follows will say */
	nft_ctx_buffer_output(ctx);
	nft_ctx_buffer_error(ctx);
	bool there = nft_run_cmd_from_buffer(ctx, "list table inet snapfs\n") == 0;
	nft_ctx_free(ctx);
	return there;
}

/* --- the owner of the table: one daemon per network namespace ------------- */

static int owner_fd = -1; /* the lock file, held (flock) until the exit */

bool net_nft_owned(void)
{
	return owner_fd >= 0;
}

/* The lock of this thread's network namespace: NET_LOCK_DIR/netns-<inode>.lock. */
static int lock_path(char *out, size_t len, struct err *e)
{
	struct stat st;
	if (stat("/proc/thread-self/ns/net", &st) < 0)
		return err_set(e, errno, "cannot tell the network namespace: %s", strerror(errno));
	if (xsnprintf(out, len, NET_LOCK_DIR "/netns-%llu.lock", (unsigned long long)st.st_ino) < 0)
		return err_set(e, ENAMETOOLONG, "lock path too long");
	return 0;
}

int net_nft_claim(struct err *e)
{
	char path[128], pid[32] = "";
	if (owner_fd >= 0)
		return 0;
	int rc = lock_path(path, sizeof(path), e);
	if (rc == 0 && (rc = mkdir_p(NET_LOCK_DIR, 0755)) < 0)
		return err_set(e, -rc, "cannot create %s: %s", NET_LOCK_DIR, strerror(-rc));
	if (rc < 0)
		return rc;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return err_set(e, errno, "cannot open %s: %s", path, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		rc = errno == EWOULDBLOCK ? EBUSY : errno;
		ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? strcspn(pid, "\n") : 0] = '\0';
		close(fd);
		return err_set(e, rc,
			       "another snapfs daemon (pid %s) runs egress sandboxes in this "
			       "network namespace (%s): one daemon per namespace may",
			       pid[0] ? pid : "unknown", path);
	}
	/* The pid, for the sentence above: the lock itself is the flock. */
	int len = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)len, 0) != len)
		warning("cannot write the pid into %s: %s", path, strerror(errno));
	owner_fd = fd;
	return 0;
}

void net_nft_base(struct strbuf *sb)
{
	strbuf_addf(
	    sb, "add table inet snapfs\n"
		"add map inet snapfs sandboxes { type ifname : verdict; }\n"
		"add set inet snapfs blocks { type ipv4_addr; flags interval; }\n"
		"add chain inet snapfs forward { type filter hook forward priority filter; }\n"
		"add chain inet snapfs input { type filter hook input priority filter; }\n"
		"add chain inet snapfs output { type filter hook output priority filter; }\n"
		"add chain inet snapfs postrouting { type nat hook postrouting priority "
		"srcnat; }\n"
		"flush chain inet snapfs forward\n"
		"flush chain inet snapfs input\n"
		"flush chain inet snapfs output\n"
		"flush chain inet snapfs postrouting\n"
		"add rule inet snapfs forward iifname vmap @sandboxes\n"
		"add rule inet snapfs input iifname vmap @sandboxes\n"
		/*
		 * Inbound IPv6 (routed, or from the host: the veths have
		 * link-local addresses): the map's own veths only, into their
		 * chains, whose first rule drops IPv6 (net_nft_chain()).
		 */
		"add rule inet snapfs forward meta nfproto ipv6 oifname vmap @sandboxes\n"
		"add rule inet snapfs output meta nfproto ipv6 oifname vmap @sandboxes\n"
		/* Inbound: replies to what a sandbox opened; nothing routed opens a connection. */
		"add rule inet snapfs forward ip daddr @blocks ct state established,related "
		"accept\n"
		"add rule inet snapfs forward ip daddr @blocks drop\n"
		/* From the host: only the port forwarder's sockets, marked, open one. */
		"add rule inet snapfs output ip daddr @blocks ct state established,related "
		"accept\n"
		"add rule inet snapfs output ip daddr @blocks meta mark " NET_FORWARD_MARK_TEXT
		" accept\n"
		"add rule inet snapfs output ip daddr @blocks drop\n"
		"add rule inet snapfs postrouting ip saddr @blocks oifname != \"" NET_IF_PREFIX
		"*\" masquerade\n");
}

/* The user's rules, in order: first match wins. */
/* Which of the rules chain_rules() writes. */
enum rule_pick { RULES_ALL, RULES_IN_DENIED, RULES_OUTSIDE_DENIED };

static void chain_rules(struct strbuf *sb, const struct net_chain *c, enum rule_pick pick)
{
	for (int i = 0; i < c->n; i++) {
		char a[INET_ADDRSTRLEN];
		bool in = net_rule_in_denied(&c->rules[i], c->pool, c->pool_prefix);
		if ((pick == RULES_IN_DENIED && !in) || (pick == RULES_OUTSIDE_DENIED && in))
			continue;
		inet_ntop(AF_INET, &c->rules[i].net, a, sizeof(a));
		strbuf_addf(sb, "add rule inet snapfs sb_%s ip daddr %s/%d %s\n", c->ifn, a,
			    c->rules[i].prefix, c->rules[i].allow ? "accept" : "drop");
	}
}

/*
 * The mandatory denies: every address the host has now or gets later, and
 * its broadcasts (fib says which: no list to go stale), every sandbox's
 * block (`blocks`: of this pool or one of before a restart) and the pool,
 * link-local (cloud metadata) and multicast.
 */
static void chain_denies(struct strbuf *sb, const struct net_chain *c)
{
	char pool[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &c->pool, pool, sizeof(pool));
	strbuf_addf(sb,
		    "add rule inet snapfs sb_%s fib daddr type { local, broadcast, multicast, "
		    "anycast } drop\n",
		    c->ifn);
	strbuf_addf(sb, "add rule inet snapfs sb_%s ip daddr @blocks drop\n", c->ifn);
	strbuf_addf(sb,
		    "add rule inet snapfs sb_%s ip daddr { %s/%d, 169.254.0.0/16, 224.0.0.0/4 } "
		    "drop\n",
		    c->ifn, pool, c->pool_prefix);
}

/*
 * The sandbox's chain, on packets from its veth (forward: out through the
 * host; input: to the host itself):
 *   - IPv6 dropped; only its own address as the source: nothing spoofed
 *     leaves un-NATed;
 *   - replies in connections others opened to it (a published port's
 *     forwarder) pass; what it opened is checked on every packet, so a
 *     deny written while it runs cuts connections already open;
 *   - the mandatory denies, then the rules; root's rules inside a denied
 *     range (net_rule_in_denied()) before the denies;
 *   - the rest allowed.
 */
void net_nft_chain(struct strbuf *sb, const struct net_chain *c)
{
	char me[INET_ADDRSTRLEN];
	const char *ifn = c->ifn;
	inet_ntop(AF_INET, &c->self, me, sizeof(me));
	strbuf_addf(sb, "add chain inet snapfs sb_%s\nflush chain inet snapfs sb_%s\n", ifn, ifn);
	/* First: the base's inbound IPv6 rules jump here to be dropped (net_nft_base()). */
	strbuf_addf(sb, "add rule inet snapfs sb_%s meta nfproto ipv6 drop\n", ifn);
	strbuf_addf(sb, "add rule inet snapfs sb_%s ip saddr != %s drop\n", ifn, me);
	strbuf_addf(sb,
		    "add rule inet snapfs sb_%s ct state established,related ct direction reply "
		    "accept\n",
		    ifn);
	/*
	 * First match wins: no allow may open what is denied for everyone
	 * (docs/network.md), so the rules come after the denies. Root opens a
	 * denied range only by naming one inside it (`allow 169.254.169.254`):
	 * those rules of root's come first; `allow 0.0.0.0/0` is not one.
	 */
	if (c->owner_root)
		chain_rules(sb, c, RULES_IN_DENIED);
	chain_denies(sb, c);
	chain_rules(sb, c, c->owner_root ? RULES_OUTSIDE_DENIED : RULES_ALL);
	strbuf_addf(sb, "add rule inet snapfs sb_%s accept\n", ifn);
}
