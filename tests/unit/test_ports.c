/* The `ports` file's lines and the record of published ports (lib/ports.h). */
#include "lib/ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "tests/unit/t.h"

static bool parses(const char *line, enum ports_verb verb, unsigned port, unsigned host)
{
	struct ports_line pl;
	struct err e = {0};
	return ports_line_parse(line, &pl, &e) == 0 && pl.verb == verb && pl.port == port &&
	       pl.host_port == host;
}

static bool refused(const char *line)
{
	struct ports_line pl;
	struct err e = {0};
	return ports_line_parse(line, &pl, &e) == -EINVAL && e.code == EINVAL &&
	       strstr(e.msg, "PORT HOSTPORT") != NULL;
}

static void test_lines(void)
{
	CHECK(parses("8080", PORTS_PUBLISH, 8080, 0));
	CHECK(parses(" 8080  18080 ", PORTS_PUBLISH, 8080, 18080));
	CHECK(parses("1", PORTS_PUBLISH, 1, 0));
	CHECK(parses("65535 65535", PORTS_PUBLISH, 65535, 65535));
	CHECK(parses("close 8080", PORTS_CLOSE, 8080, 0));
	CHECK(parses("close\t22", PORTS_CLOSE, 22, 0));
	/* A read's line, `PORT ADDRESS:HOSTPORT`, is written back as it is. */
	CHECK(parses("8080 127.0.0.1:40001", PORTS_PUBLISH, 8080, 40001));
	struct ports_line pl;
	struct err e = {0};
	CHECK(ports_line_parse("80 10.1.2.3:81", &pl, &e) == 0 && pl.has_address &&
	      pl.address == htonl(0x0a010203));
	CHECK(ports_line_parse("80 81", &pl, &e) == 0 && !pl.has_address);
	CHECK(refused("8080 127.0.0.1:"));
	CHECK(refused("8080 127.0.0.1:0"));
	CHECK(refused("8080 :40001"));
	CHECK(refused("8080 localhost:40001"));
	CHECK(refused("8080 1.2.3.4.5:40001"));
	CHECK(refused("8080 127.0.0.1:40001 x"));
	CHECK(refused("close 127.0.0.1:8080"));
	CHECK(refused(""));
	CHECK(refused("close"));
	CHECK(refused("close "));
	CHECK(refused("closed 80"));
	CHECK(refused("close 80 81"));
	CHECK(refused("0"));
	CHECK(refused("65536"));
	CHECK(refused("8080 0"));
	CHECK(refused("080"));
	CHECK(refused("+80"));
	CHECK(refused("-80"));
	CHECK(refused("80x"));
	CHECK(refused("80 81 82"));
	CHECK(refused("99999999999999999999"));
	CHECK(refused("http"));
}

static void test_record(void)
{
	struct ports p;
	char text[PORTS_TEXT_MAX];
	CHECK(ports_decode("", &p) == 0 && p.n == 0);
	CHECK(ports_decode("8080 40001\n22 0\n", &p) == 0 && p.n == 2);
	CHECK(p.v[0].port == 8080 && p.v[0].host_port == 40001 && p.v[1].port == 22);
	CHECK(ports_find(&p, 22) == 1 && ports_find(&p, 23) == -1);
	ports_encode(&p, true, text);
	CHECK_STR(text, "8080 40001\n22 0\n");
	ports_encode(&p, false, text);
	CHECK_STR(text, "8080 0\n22 0\n");
	ports_remove(&p, 0);
	CHECK(p.n == 1 && p.v[0].port == 22);
	/* The bucket's text: one check, strict. */
	CHECK(!ports_record_ok("8080 1"));	 /* no newline */
	CHECK(!ports_record_ok("8080\n"));	 /* no host port */
	CHECK(!ports_record_ok("0 1\n"));	 /* no port 0 */
	CHECK(!ports_record_ok("80 1\n80 2\n")); /* a port twice */
	CHECK(!ports_record_ok("80  1\n"));	 /* one space */
	CHECK(!ports_record_ok("80 70000\n"));	 /* past 65535 */
	CHECK(ports_record_ok("80 0\n"));
	/* The most a sandbox has, all at their longest: it fits, and one more does not decode. */
	struct ports full = {.n = PORTS_SANDBOX_MAX};
	for (unsigned i = 0; i < full.n; i++)
		full.v[i] = (struct port_map){(uint16_t)(65535 - i), 65535};
	ports_encode(&full, true, text);
	CHECK(ports_decode(text, &p) == 0 && p.n == PORTS_SANDBOX_MAX);
	char more[PORTS_TEXT_MAX + 16];
	snprintf(more, sizeof(more), "%s1 1\n", text);
	CHECK(ports_decode(more, &p) == -EINVAL);
}

int main(void)
{
	test_lines();
	test_record();
	return t_done();
}
