/*
 * fuzz_ports.c - libFuzzer target for ports_decode() (lib/ports.c): the
 * published-ports record, which also comes from the bucket (another host's
 * manifest, through snapmeta_parse()). The input is the record text.
 *
 * An accepted record must be what ports.h promises: at most
 * PORTS_SANDBOX_MAX ports, each 1..65535 and listed once; ports_record_ok()
 * agrees; and ports_encode() of it writes back exactly the input (the
 * record has one spelling: no sign, no leading zero, one space, a newline
 * after each line). A refused one is -EINVAL.
 *
 * The same input is also a line written to `ports` (ports_line_parse(), a
 * user's bytes): taken, it names a port 1..65535, a close names no host
 * port and no address, and an address comes only with a host port.
 */
#include "lib/ports.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ports p, again;
	char text[PORTS_TEXT_MAX];
	char *record = fuzz_strndup(data, size);
	memset(&p, 0xa5, sizeof(p));
	int rc = ports_decode(record, &p);
	FUZZ_CHECK(ports_record_ok(record) == (rc == 0));
	if (rc == 0) {
		FUZZ_CHECK(p.n <= PORTS_SANDBOX_MAX);
		for (unsigned i = 0; i < p.n; i++) {
			FUZZ_CHECK(p.v[i].port >= 1);
			FUZZ_CHECK(ports_find(&p, p.v[i].port) == (int)i);
		}
		ports_encode(&p, true, text);
		FUZZ_CHECK(strcmp(text, record) == 0);
		FUZZ_CHECK(ports_decode(text, &again) == 0 && again.n == p.n);
		FUZZ_CHECK(memcmp(again.v, p.v, p.n * sizeof(p.v[0])) == 0);
	} else {
		FUZZ_CHECK(rc == -EINVAL);
	}
	struct ports_line pl;
	struct err e = {0};
	rc = ports_line_parse(record, &pl, &e);
	FUZZ_CHECK(rc == 0 || (rc == -EINVAL && e.code == EINVAL));
	if (rc == 0) {
		FUZZ_CHECK(pl.port >= 1);
		FUZZ_CHECK(pl.verb == PORTS_PUBLISH || (pl.host_port == 0 && !pl.has_address));
		FUZZ_CHECK(!pl.has_address || pl.host_port >= 1);
	}
	free(record);
	return 0;
}
