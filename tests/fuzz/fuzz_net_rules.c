/*
 * fuzz_net_rules.c - libFuzzer target for runtime/net/net_rules.c: what a user
 * writes to a sandbox's `egress` file. The input is the file's text.
 *
 * An accepted text gives at most NET_RULES_MAX rules, each prefix 0 to 32
 * with no host bit set past it; a refused one is -EINVAL with a sentence.
 * net_cidr_parse() on the whole input keeps the same promises.
 */
#include <arpa/inet.h>

#include "runtime/net/net.h"
#include "tests/fuzz/fuzz.h"

static bool masked(struct in_addr a, int prefix)
{
	uint32_t mask = prefix ? ~0u << (32 - prefix) : 0;
	return (ntohl(a.s_addr) & ~mask) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_strndup(data, size);
	struct net_rule r[NET_RULES_MAX];
	struct err e = {0};
	int n = -1;
	int rc = net_rules_parse(s, r, &n, &e);
	if (rc == 0) {
		FUZZ_CHECK(n >= 0 && n <= NET_RULES_MAX);
		for (int i = 0; i < n; i++)
			FUZZ_CHECK(r[i].prefix >= 0 && r[i].prefix <= 32 &&
				   masked(r[i].net, r[i].prefix));
	} else {
		FUZZ_CHECK(rc == -EINVAL && e.code == EINVAL && e.msg[0]);
	}
	struct in_addr a;
	int p;
	struct err e2 = {0};
	rc = net_cidr_parse(s, &a, &p, &e2);
	FUZZ_CHECK(rc == 0 ? p >= 0 && p <= 32 && masked(a, p) : rc == -EINVAL && e2.msg[0]);
	free(s);
	return 0;
}
