#include "lib/cancel.h"

#include <pthread.h>

#include "lib/util.h"
#include "tests/unit/t.h"

static struct cancel shared;

/* Another thread's view: @shared is not its token until it binds it. */
static void *other_thread(void *arg)
{
	bool *seen = arg;
	seen[0] = cancel_requested();
	cancel_bind(&shared);
	seen[1] = cancel_requested();
	return NULL;
}

int main(void)
{
	struct cancel c;
	cancel_init(&c);
	CHECK(!cancel_requested()); /* none bound */
	cancel_bind(&c);
	CHECK(!cancel_requested()); /* no deadline, not cancelled */
	cancel_set_deadline(&c, mono_ms() + 60000);
	CHECK(!cancel_requested());
	cancel_set_deadline(&c, mono_ms()); /* now: given up */
	CHECK(cancel_requested());
	cancel_set_deadline(&c, 0);
	CHECK(!cancel_requested());
	cancel_now(&c);
	CHECK(cancel_requested());
	cancel_bind(NULL);
	CHECK(!cancel_requested());

	/* A binding is the thread's own; a cancel from here reaches the bound thread. */
	cancel_init(&shared);
	cancel_now(&shared);
	bool seen[2] = {true, false};
	pthread_t t;
	CHECK(pthread_create(&t, NULL, other_thread, seen) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(!seen[0]);
	CHECK(seen[1]);
	CHECK(!cancel_requested());
	return t_done();
}
