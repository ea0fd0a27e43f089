/* ports.c - published ports as text (ports.h). */
#include "lib/ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

_Static_assert(PORTS_SANDBOX_MAX * sizeof("65535 65535\n") <= PORTS_TEXT_MAX,
	       "a whole record fits its field");

#define USAGE "write PORT, PORT HOSTPORT, PORT ADDRESS:HOSTPORT or close PORT (each 1 to 65535)"

/*
 * The decimal number at *@s, up to a space, newline or the end, from @min
 * to 65535: advances *@s past it. No sign, no leading zero, at most 5 digits.
 */
static bool number(const char **s, unsigned min, uint16_t *out)
{
	const char *p = *s;
	unsigned v = 0;
	size_t n = 0;
	while (p[n] >= '0' && p[n] <= '9' && n < 6)
		v = v * 10 + (unsigned)(p[n++] - '0');
	bool end = p[n] == '\0' || p[n] == ' ' || p[n] == '\n';
	if (!n || n > 5 || !end || (p[0] == '0' && n > 1) || v < min || v > 65535)
		return false;
	*out = (uint16_t)v;
	*s = p + n;
	return true;
}

static void skip_spaces(const char **s)
{
	while (**s == ' ' || **s == '\t')
		(*s)++;
}

/*
 * `ADDRESS:` at *@s, a dotted IPv4 address as a read of `ports` shows it
 * (at most 15 bytes, then a colon): advances *@s past the colon. No colon
 * in the word: nothing named, true. A bad address: false.
 */
static bool address(const char **s, struct ports_line *out)
{
	char text[INET_ADDRSTRLEN];
	size_t n = strcspn(*s, ": \t\n");
	if ((*s)[n] != ':')
		return true;
	if (n == 0 || n >= sizeof(text))
		return false;
	memcpy(text, *s, n);
	text[n] = '\0';
	struct in_addr a;
	if (inet_pton(AF_INET, text, &a) != 1)
		return false;
	out->has_address = true;
	out->address = a.s_addr;
	*s += n + 1;
	return true;
}

int ports_line_parse(const char *line, struct ports_line *out, struct err *e)
{
	const char *s = line;
	*out = (struct ports_line){.verb = PORTS_PUBLISH};
	skip_spaces(&s);
	if (!strncmp(s, "close", 5) && (s[5] == ' ' || s[5] == '\t')) {
		out->verb = PORTS_CLOSE;
		s += 5;
		skip_spaces(&s);
	}
	bool ok = number(&s, 1, &out->port);
	skip_spaces(&s);
	if (ok && out->verb == PORTS_PUBLISH && *s) {
		ok = address(&s, out) && number(&s, 1, &out->host_port);
		skip_spaces(&s);
	}
	if (ok && !*s)
		return 0;
	return err_set(e, EINVAL, "bad ports line '%.64s': %s", line, USAGE);
}

int ports_list_parse(const char *words, struct ports *out, struct err *e)
{
	const char *s = words;
	out->n = 0;
	for (skip_spaces(&s); *s; skip_spaces(&s)) {
		struct port_map m = {0};
		if (out->n == PORTS_SANDBOX_MAX || !number(&s, 1, &m.port) ||
		    ports_find(out, m.port) >= 0)
			return err_set(
			    e, EINVAL,
			    "bad ports '%.64s' in sandbox spec: at most %d ports, each once, "
			    "1 to 65535, separated by spaces",
			    words, PORTS_SANDBOX_MAX);
		out->v[out->n++] = m;
	}
	return 0;
}

int ports_decode(const char *text, struct ports *out)
{
	const char *s = text;
	out->n = 0;
	while (*s) {
		struct port_map m;
		if (out->n == PORTS_SANDBOX_MAX || !number(&s, 1, &m.port) || *s++ != ' ' ||
		    !number(&s, 0, &m.host_port) || *s++ != '\n' || ports_find(out, m.port) >= 0)
			return -EINVAL;
		out->v[out->n++] = m;
	}
	return 0;
}

bool ports_record_ok(const char *text)
{
	struct ports p;
	return ports_decode(text, &p) == 0;
}

void ports_encode(const struct ports *p, bool hosts, char out[PORTS_TEXT_MAX])
{
	size_t len = 0;
	out[0] = '\0';
	/* 16 lines of at most 12 bytes fit (limits.h): no line is ever cut. */
	for (unsigned i = 0; i < p->n && len < PORTS_TEXT_MAX; i++)
		len += (size_t)snprintf(out + len, PORTS_TEXT_MAX - len, "%u %u\n", p->v[i].port,
					hosts ? p->v[i].host_port : 0);
}

int ports_find(const struct ports *p, uint16_t port)
{
	for (unsigned i = 0; i < p->n; i++)
		if (p->v[i].port == port)
			return (int)i;
	return -1;
}

void ports_remove(struct ports *p, unsigned i)
{
	memmove(&p->v[i], &p->v[i + 1], (p->n - i - 1) * sizeof(p->v[0]));
	p->n--;
}
