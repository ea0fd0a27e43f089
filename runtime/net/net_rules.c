/*
 * net_rules.c - the text of the `network` and `egress` files (net.h):
 * pure parsing, no kernel, so the unit tests and the fuzz target take it
 * alone.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/strbuf.h"
#include "runtime/net/net.h"

#define LINE_MAX_LEN 64 /* "allow 255.255.255.255/32" with room for spaces */

int net_cidr_parse(const char *s, struct in_addr *net, int *prefix, struct err *e)
{
	char addr[INET_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	int p = 32;
	if (n == 0 || n >= sizeof(addr))
		return err_set(e, EINVAL, "%.40s is not an IPv4 address or CIDR", s);
	memcpy(addr, s, n);
	addr[n] = '\0';
	if (slash) {
		const char *d = slash + 1;
		/* One or two digits, nothing else: no sign, no space, no hex. */
		if (!(d[0] >= '0' && d[0] <= '9') ||
		    (d[1] && (!(d[1] >= '0' && d[1] <= '9') || d[2])))
			return err_set(e, EINVAL, "%.40s: the prefix must be 0 to 32", s);
		p = atoi(d);
	}
	if (p > 32)
		return err_set(e, EINVAL, "%.40s: the prefix must be 0 to 32", s);
	if (inet_pton(AF_INET, addr, net) != 1)
		return err_set(e, EINVAL, "%.40s is not an IPv4 address or CIDR", s);
	uint32_t mask = p ? htonl(~0u << (32 - p)) : 0;
	net->s_addr &= mask;
	*prefix = p;
	return 0;
}

/* One line "allow CIDR" or "deny CIDR" (@lineno for the message). */
static int rule_parse(const char *line, int lineno, struct net_rule *r, struct err *e)
{
	char verb[8], cidr[LINE_MAX_LEN], extra[2];
	int n = sscanf(line, "%7s %63s %1s", verb, cidr, extra);
	if (n != 2)
		return err_set(e, EINVAL, "egress line %d must be 'allow CIDR' or 'deny CIDR'",
			       lineno);
	if (strcmp(verb, "allow") == 0)
		r->allow = true;
	else if (strcmp(verb, "deny") == 0)
		r->allow = false;
	else
		return err_set(e, EINVAL, "egress line %d must start with allow or deny", lineno);
	struct err sub = {0};
	if (net_cidr_parse(cidr, &r->net, &r->prefix, &sub) < 0)
		return err_set(e, EINVAL, "egress line %d: %s", lineno, sub.msg);
	return 0;
}

/* Whether @net/@prefix lies wholly inside @outer/@outer_prefix. */
static bool cidr_inside(struct in_addr net, int prefix, struct in_addr outer, int outer_prefix)
{
	if (prefix < outer_prefix)
		return false;
	uint32_t mask = outer_prefix ? htonl(~0u << (32 - outer_prefix)) : 0;
	return (net.s_addr & mask) == (outer.s_addr & mask);
}

bool net_rule_in_denied(const struct net_rule *r, struct in_addr pool, int pool_prefix)
{
	struct in_addr link_local = {htonl(0xa9fe0000u)}, multicast = {htonl(0xe0000000u)};
	return cidr_inside(r->net, r->prefix, link_local, 16) ||
	       cidr_inside(r->net, r->prefix, multicast, 4) ||
	       cidr_inside(r->net, r->prefix, pool, pool_prefix);
}

int net_rules_parse(const char *text, struct net_rule *out, int *n, struct err *e)
{
	int lineno = 0;
	*n = 0;
	for (const char *p = text; *p; p += (*p == '\n')) {
		size_t len = strcspn(p, "\n");
		char line[LINE_MAX_LEN];
		lineno++;
		if (len >= sizeof(line))
			return err_set(e, EINVAL, "egress line %d is too long", lineno);
		memcpy(line, p, len);
		line[len] = '\0';
		p += len;
		size_t skip = strspn(line, " \t");
		if (line[skip] == '\0' || line[skip] == '#')
			continue;
		if (*n >= NET_RULES_MAX)
			return err_set(e, EINVAL, "egress takes at most %d rules", NET_RULES_MAX);
		int rc = rule_parse(line + skip, lineno, &out[*n], e);
		if (rc < 0)
			return rc;
		(*n)++;
	}
	return 0;
}

/*
 * One pass of net_rules_disarm(): @text into @out, the rules @in_denied
 * picks as comments (@comment) or left out. -ENOSPC when @out is too small.
 */
static int disarm_pass(const char *text, struct strbuf *out, bool comment,
		       bool (*in_denied)(const struct net_rule *r), int *n)
{
	*n = 0;
	for (const char *p = text; *p;) {
		size_t len = strcspn(p, "\n");
		bool nl = p[len] == '\n';
		char line[LINE_MAX_LEN], a[INET_ADDRSTRLEN];
		struct net_rule r;
		struct err e = {0};
		bool pick = false;
		if (len < sizeof(line)) {
			memcpy(line, p, len);
			line[len] = '\0';
			const char *w = line + strspn(line, " \t");
			pick = *w && *w != '#' && rule_parse(w, 0, &r, &e) == 0 && r.allow &&
			       in_denied(&r);
		}
		if (!pick)
			strbuf_add(out, p, len + nl);
		else if (comment && inet_ntop(AF_INET, &r.net, a, sizeof(a)))
			strbuf_addf(out, NET_RULE_INERT "allow %s/%d\n", a, r.prefix);
		*n += pick;
		p += len + nl;
	}
	return strbuf_error(out) < 0 ? -ENOSPC : 0;
}

int net_rules_disarm(char *text, size_t size, bool (*in_denied)(const struct net_rule *r))
{
	int n = 0;
	for (int comment = 1; comment >= 0; comment--) {
		_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
		out.max = size - 1;
		if (disarm_pass(text, &out, comment, in_denied, &n) == 0) {
			if (n > 0)
				snprintf(text, size, "%s", strbuf_str(&out));
			return n;
		}
	}
	/* Even without the comments it does not fit: it cannot be longer, so this is not reached.
	 */
	text[0] = '\0';
	return n;
}
