/*
 * runtime/net/net_rules.c: the `network` and `egress` files' text, and CIDRs;
 * the table's hooks (net_nft.c); and, as root, net.c's egress change
 * racing a teardown, in a network and mount namespace of the test's own.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/net/net.h"
#include "runtime/net/net_nft.h"
#include "tests/unit/t.h"
#include "tests/unit/t_dir.h"

/* "A.B.C.D/N" of a parsed CIDR, or "" when refused. */
static const char *cidr(const char *s)
{
	static char out[32];
	struct in_addr a;
	struct err e = {0};
	char text[INET_ADDRSTRLEN];
	int p;
	if (net_cidr_parse(s, &a, &p, &e) < 0)
		return "";
	inet_ntop(AF_INET, &a, text, sizeof(text));
	snprintf(out, sizeof(out), "%s/%d", text, p);
	return out;
}

static void test_cidr(void)
{
	CHECK_STR(cidr("10.0.0.0/8"), "10.0.0.0/8");
	CHECK_STR(cidr("10.1.2.3/8"), "10.0.0.0/8"); /* masked */
	CHECK_STR(cidr("192.168.1.7"), "192.168.1.7/32");
	CHECK_STR(cidr("0.0.0.0/0"), "0.0.0.0/0");
	CHECK_STR(cidr("1.2.3.4/32"), "1.2.3.4/32");
	CHECK_STR(cidr("1.2.3.4/33"), "");
	CHECK_STR(cidr("1.2.3.4/"), "");
	CHECK_STR(cidr("1.2.3.4/-1"), "");
	CHECK_STR(cidr("1.2.3.4/+8"), "");
	CHECK_STR(cidr("1.2.3.4/008"), "");
	CHECK_STR(cidr("1.2.3.4/8 "), "");
	CHECK_STR(cidr("1.2.3/8"), "");
	CHECK_STR(cidr("::1/128"), "");
	CHECK_STR(cidr("/8"), "");
	CHECK_STR(cidr(""), "");
	CHECK_STR(cidr("300.1.1.1"), "");
	struct in_addr a;
	int p;
	struct err e = {0};
	CHECK(net_cidr_parse("x/8", &a, &p, &e) == -EINVAL && strstr(e.msg, "IPv4") != NULL);
}

static void test_rules(void)
{
	struct net_rule r[NET_RULES_MAX];
	struct err e = {0};
	int n = -1;
	CHECK(net_rules_parse("", r, &n, &e) == 0 && n == 0);
	CHECK(net_rules_parse("\n# a comment\n  \n", r, &n, &e) == 0 && n == 0);
	CHECK(net_rules_parse("allow 10.0.0.0/8\ndeny 0.0.0.0/0\n", r, &n, &e) == 0 && n == 2);
	CHECK(r[0].allow && r[0].prefix == 8 && r[0].net.s_addr == htonl(0x0a000000));
	CHECK(!r[1].allow && r[1].prefix == 0);
	CHECK(net_rules_parse("  deny\t1.2.3.4", r, &n, &e) == 0 && n == 1 && r[0].prefix == 32);
	CHECK(net_rules_parse("allow 10.0.0.0/8\npermit 1.2.3.4\n", r, &n, &e) == -EINVAL);
	CHECK(strstr(e.msg, "line 2") != NULL);
	CHECK(net_rules_parse("allow", r, &n, &e) == -EINVAL);
	CHECK(net_rules_parse("allow 1.2.3.4 extra", r, &n, &e) == -EINVAL);
	CHECK(net_rules_parse("deny 1.2.3.4/40", r, &n, &e) == -EINVAL);
	CHECK(strstr(e.msg, "egress line 1") != NULL && strstr(e.msg, "prefix") != NULL);
	char long_line[200];
	memset(long_line, 'a', sizeof(long_line) - 1);
	long_line[sizeof(long_line) - 1] = '\0';
	CHECK(net_rules_parse(long_line, r, &n, &e) == -EINVAL);
	/* One more rule than NET_RULES_MAX is refused whole. */
	char many[NET_RULES_MAX * 16 + 32] = "";
	for (int i = 0; i <= NET_RULES_MAX; i++)
		strcat(many, "deny 1.2.3.4\n");
	CHECK(net_rules_parse(many, r, &n, &e) == -EINVAL && strstr(e.msg, "at most") != NULL);
}

/* Where @needle is in sandbox chain text built for @rules; -1: nowhere. */
static long chain_at(const char *rules, bool owner_root, const char *needle)
{
	struct net_rule r[NET_RULES_MAX];
	struct err e = {0};
	struct strbuf sb = STRBUF_INIT;
	int n;
	long at = -1;
	struct net_chain c = {.ifn = "snf0123456789ab", .rules = r, .owner_root = owner_root};
	inet_pton(AF_INET, "10.213.0.6", &c.self);
	inet_pton(AF_INET, "10.213.0.0", &c.pool);
	c.pool_prefix = 16;
	if (net_rules_parse(rules, r, &n, &e) == 0) {
		c.n = n;
		net_nft_chain(&sb, &c);
		const char *hit = strbuf_error(&sb) == 0 ? strstr(strbuf_str(&sb), needle) : NULL;
		at = hit ? hit - strbuf_str(&sb) : -1;
	}
	strbuf_release(&sb);
	return at;
}

/*
 * A non-root owner's allow never opens the host, the pool, link-local or
 * multicast: the mandatory denies come first. Root's rules come before them.
 */
static void test_chain_order(void)
{
	const char *meta = "allow 169.254.169.254/32\nallow 10.213.0.0/16\n";
	long host = chain_at(meta, false, "fib daddr type");
	long pool = chain_at(meta, false, "{ 10.213.0.0/16, 169.254.0.0/16");
	long allow = chain_at(meta, false, "169.254.169.254/32 accept");
	CHECK(host >= 0 && pool >= 0 && allow >= 0);
	CHECK(host < allow && pool < allow);
	/* Every sandbox's block, of this pool or an earlier one. */
	long blocks = chain_at(meta, false, "ip daddr @blocks drop");
	CHECK(blocks >= 0 && blocks < allow);
	CHECK(chain_at(meta, false, "saddr != 10.213.0.6 drop") < host);
	long last = chain_at(meta, false, "sb_snf0123456789ab accept\n");
	CHECK(allow < last);
	/* Root may open one by naming it: its rules inside a denied range first. */
	CHECK(chain_at(meta, true, "169.254.169.254/32 accept") <
	      chain_at(meta, true, "fib daddr type"));
	/* But root's allow of everything opens none of them: the denies come first. */
	const char *all = "allow 169.254.169.254/32\nallow 0.0.0.0/0\n";
	CHECK(chain_at(all, true, "fib daddr type") < chain_at(all, true, "0.0.0.0/0 accept"));
	CHECK(chain_at(all, true, "169.254.169.254/32 accept") <
	      chain_at(all, true, "fib daddr type"));
	CHECK(chain_at("allow 10.0.0.0/8", true, "{ 10.213.0.0/16") <
	      chain_at("allow 10.0.0.0/8", true, "10.0.0.0/8 accept"));
	/* A deny of either owner still applies before the final accept. */
	CHECK(chain_at("deny 0.0.0.0/0", false, "0.0.0.0/0 drop") <
	      chain_at("deny 0.0.0.0/0", false, "sb_snf0123456789ab accept\n"));
}

/* What lies wholly inside a denied range, and what does not. */
static void test_in_denied(void)
{
	struct net_rule r[8];
	struct in_addr pool;
	struct err e = {0};
	int n;
	inet_pton(AF_INET, "10.213.0.0", &pool);
	CHECK(
	    net_rules_parse("allow 169.254.169.254\nallow 224.0.0.1/32\nallow 10.213.4.0/24\n"
			    "allow 0.0.0.0/0\nallow 10.0.0.0/8\nallow 169.0.0.0/8\nallow 8.8.8.8\n",
			    r, &n, &e) == 0 &&
	    n == 7);
	for (int i = 0; i < 3; i++)
		CHECK(net_rule_in_denied(&r[i], pool, 16));
	for (int i = 3; i < 7; i++)
		CHECK(!net_rule_in_denied(&r[i], pool, 16));
}

/* The position of @what in the table's base text, or -1. */
static long base_at(const char *what)
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	net_nft_base(&sb);
	const char *at = strstr(strbuf_str(&sb), what);
	return at ? at - strbuf_str(&sb) : -1;
}

/*
 * Inbound: a packet to a sandbox's block passes only as a reply (routed
 * or from the host), or from the port forwarder's marked socket.
 */
static void test_base_inbound(void)
{
	long fwd_reply = base_at("forward ip daddr @blocks ct state established,related accept");
	long fwd_drop = base_at("forward ip daddr @blocks drop");
	CHECK(fwd_reply >= 0 && fwd_drop > fwd_reply);
	CHECK(base_at("add chain inet snapfs output { type filter hook output") >= 0);
	CHECK(base_at("flush chain inet snapfs output") >= 0);
	long out_reply = base_at("output ip daddr @blocks ct state established,related accept");
	long out_mark = base_at("output ip daddr @blocks meta mark 0x736e6673 accept");
	long out_drop = base_at("output ip daddr @blocks drop");
	CHECK(out_reply >= 0 && out_mark > out_reply && out_drop > out_mark);
	CHECK(NET_FORWARD_MARK == 0x736e6673);
}

/*
 * Inbound IPv6 to a sandbox (routed, or from the host over the veth's
 * link-local address) is dropped: forward and output send IPv6 bound for
 * one of the table's own veths (the `sandboxes` map, never a name pattern)
 * into its chain, whose first rule drops IPv6, the allowing ones after it.
 */
static void test_base_inbound_ipv6(void)
{
	CHECK(base_at("add rule inet snapfs forward meta nfproto ipv6 oifname vmap @sandboxes\n") >=
	      0);
	CHECK(base_at("add rule inet snapfs output meta nfproto ipv6 oifname vmap @sandboxes\n") >=
	      0);
	long flush =
	    chain_at("allow 0.0.0.0/0\n", true, "flush chain inet snapfs sb_snf0123456789ab\n");
	long v6 = chain_at("allow 0.0.0.0/0\n", true,
			   "add rule inet snapfs sb_snf0123456789ab meta nfproto ipv6 drop\n");
	long first = chain_at("allow 0.0.0.0/0\n", true, "add rule");
	long accept = chain_at("allow 0.0.0.0/0\n", true, "accept\n");
	CHECK(flush >= 0 && v6 >= 0 && v6 == first && accept > v6);
}

static bool in_denied_default(const struct net_rule *r)
{
	struct in_addr pool;
	inet_pton(AF_INET, "10.213.0.0", &pool);
	return net_rule_in_denied(r, pool, 16);
}

/* A root fork of a user's rules: those inside a denied range are commented out, seen, inert. */
static void test_disarm(void)
{
	char text[256] = "deny 10.0.0.0/8\nallow 169.254.169.254\n# mine\n  allow 8.8.8.8\n"
			 "allow 10.213.4.0/24\ndeny 224.0.0.1\nallow 0.0.0.0/0";
	CHECK(net_rules_disarm(text, sizeof(text), in_denied_default) == 2);
	CHECK_STR(text, "deny 10.0.0.0/8\n" NET_RULE_INERT "allow 169.254.169.254/32\n# mine\n"
			"  allow 8.8.8.8\n" NET_RULE_INERT "allow 10.213.4.0/24\ndeny 224.0.0.1\n"
			"allow 0.0.0.0/0");
	struct net_rule r[8];
	struct err e = {0};
	int n;
	CHECK(net_rules_parse(text, r, &n, &e) == 0 && n == 4);
	for (int i = 0; i < n; i++)
		CHECK(!r[i].allow || !in_denied_default(&r[i]));
	/* Nothing to take out: the text stays as it is. */
	char plain[64] = "allow 8.8.8.8\n";
	CHECK(net_rules_disarm(plain, sizeof(plain), in_denied_default) == 0);
	CHECK_STR(plain, "allow 8.8.8.8\n");
	/* No room for the comment: the line goes. */
	char tight[32] = "allow 169.254.0.1\ndeny 1.2.3.4\n";
	CHECK(net_rules_disarm(tight, sizeof(tight), in_denied_default) == 1);
	CHECK_STR(tight, "deny 1.2.3.4\n");
}

/* --- an egress change racing the teardown (root, namespaces of its own) --- */

#define RACE_RID "snapfs-0123456789abcdef01234567"
#define RACE_ROUNDS 10

static atomic_bool race_go, race_stop;
static atomic_int race_busy;

/* Set the rules over and over while told to, as `egress` writes would. */
static void *race_writer(void *arg)
{
	(void)arg;
	struct net_egress eg = {"deny 192.0.2.0/24\n", false};
	while (!atomic_load(&race_stop)) {
		if (!atomic_load(&race_go)) {
			usleep(100);
			continue;
		}
		atomic_fetch_add(&race_busy, 1);
		struct err e = {0};
		net_set_egress(RACE_RID, &eg, &e);
		atomic_fetch_sub(&race_busy, 1);
	}
	return NULL;
}

/* The child: namespaces of its own, so nothing of the host's is touched. */
static void race_child(void)
{
	char state[PATH_MAX];
	struct err e = {0};
	if (unshare(CLONE_NEWNET | CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("t-run", "/run", "tmpfs", 0, "size=1m,mode=0755") < 0) {
		SKIP("cannot make namespaces of the test's own: %s", strerror(errno));
		_exit(0);
	}
	if (!t_dir_make("test_net") || xsnprintf(state, sizeof(state), "%s", t_base) < 0 ||
	    net_open(state, NULL, NULL, &e) < 0) {
		CHECK_MSG(false, "net_open: %s", e.msg);
		_exit(0);
	}
	pthread_t th;
	pthread_create(&th, NULL, race_writer, NULL);
	int stale = 0, ups = 0;
	for (int i = 0; i < RACE_ROUNDS; i++) {
		struct net_egress eg = {"", false};
		struct err ue = {0};
		if (net_up(RACE_RID, &eg, &ue) == 0)
			ups++;
		else if (i == 0)
			fprintf(stderr, "test_net: net_up: %s\n", ue.msg);
		atomic_store(&race_go, true);
		usleep(2000);
		net_down(RACE_RID);
		atomic_store(&race_go, false);
		while (atomic_load(&race_busy))
			usleep(100);
		/* Down is down: no change that came during it may make the table again. */
		if (net_nft_table_exists()) {
			stale++;
			net_nft_run("delete table inet snapfs\n", &ue);
		}
	}
	atomic_store(&race_stop, true);
	pthread_join(th, NULL);
	CHECK_MSG(ups == RACE_ROUNDS, "%d of %d networks came up", ups, RACE_ROUNDS);
	CHECK_MSG(stale == 0, "after %d of %d teardowns an egress change made the table again",
		  stale, RACE_ROUNDS);
	rm_rf(t_base);
	_exit(0);
}

static void test_egress_race(void)
{
	if (geteuid() != 0) {
		SKIP("the egress race needs root (namespaces of its own)");
		return;
	}
	if (!t_share())
		return;
	pid_t pid = fork();
	if (pid == 0)
		race_child();
	int st;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void)
{
	test_in_denied();
	test_cidr();
	test_rules();
	test_chain_order();
	test_base_inbound();
	test_base_inbound_ipv6();
	test_disarm();
	test_egress_race();
	return t_done();
}
