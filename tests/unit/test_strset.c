#include "lib/strset.h"

#include <errno.h>
#include <stdio.h>

#include "tests/unit/t.h"

int main(void)
{
	struct strset s = STRSET_INIT;
	CHECK(!strset_has(&s, "a"));
	CHECK(strset_seal(&s) == 0 && s.n == 0 && !strset_has(&s, "a"));
	CHECK(strset_add(&s, "pear") == 0);
	CHECK(strset_add(&s, "apple") == 0);
	CHECK(strset_add(&s, "pear") == 0);
	CHECK(strset_add(&s, "") == 0);
	CHECK(!strset_has(&s, "pear")); /* not sealed yet */
	CHECK(strset_seal(&s) == 0);
	CHECK(s.n == 3);
	CHECK(s.n == 3 && !strcmp(s.v[0], "") && !strcmp(s.v[1], "apple") &&
	      !strcmp(s.v[2], "pear"));
	CHECK(strset_has(&s, "apple") && strset_has(&s, "pear") && strset_has(&s, ""));
	CHECK(!strset_has(&s, "appl") && !strset_has(&s, "pears"));

	/* Many: the buffer moves while it grows; an add unseals. */
	char name[32];
	int failed = 0;
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "snap-%05d/0000", (i * 7919) % 5000);
		failed += strset_add(&s, name) != 0;
	}
	CHECK(failed == 0);
	CHECK(s.n == 0 && !strset_has(&s, "apple"));
	CHECK(strset_seal(&s) == 0 && s.n == 5003);
	CHECK(strset_has(&s, "snap-00000/0000") && strset_has(&s, "snap-04999/0000"));
	CHECK(!strset_has(&s, "snap-05000/0000"));

	s.buf.max = s.buf.len + 4;
	CHECK(strset_add(&s, "too long for it") == -EFBIG);
	strset_release(&s);
	CHECK(s.n == 0 && s.v == NULL && !strset_has(&s, "pear"));
	return t_done();
}
