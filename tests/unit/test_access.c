/* ops/access.c: who may see, create and open what. */
#include "ops/access.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/t.h"

/* Far from any uid or gid this host could give a user running the test. */
#define ALICE 60001u
#define BOB 60002u
#define CREW 61001u
#define OTHERS 61002u

static struct caller user(uid_t uid, gid_t gid)
{
	return (struct caller){.uid = uid, .gid = gid};
}

static void test_see(void)
{
	struct caller alice = user(ALICE, ALICE), bob = user(BOB, BOB);
	CHECK(access_may_see(&alice, ALICE));
	CHECK(!access_may_see(&alice, BOB));
	CHECK(!access_may_see(&bob, ALICE));
	/* An owner of 0 is root's: another host's snapshot, a row from before owners. */
	CHECK(!access_may_see(&alice, 0));
	CHECK(access_may_see(&access_root, ALICE));
	CHECK(access_may_see(&access_root, 0));
	struct caller self = user(geteuid(), getegid());
	CHECK(access_is_root(&self)); /* the daemon's own uid is its administrator */
	CHECK(access_may_see(&self, ALICE));
}

static void test_create(void)
{
	struct err e = {0};
	struct caller alice = user(ALICE, ALICE);

	/* No --allow-group: root alone. */
	CHECK(access_init(NULL, &e) == 0);
	CHECK(access_check_create(&access_root, "create a sandbox", &e) == 0);
	CHECK(access_check_create(&alice, "create a sandbox", &e) == -EACCES);
	CHECK(strstr(e.msg, "create a sandbox") != NULL);
	CHECK(access_create_gid() == getegid());

	/* A gid: the primary group counts, and so does a supplementary one. */
	CHECK(access_init("61001", &e) == 0);
	CHECK(access_create_gid() == CREW);
	CHECK(access_check_create(&alice, "fork", &e) == -EACCES);
	struct caller crew = user(BOB, CREW);
	CHECK(access_check_create(&crew, "fork", &e) == 0);
	alice.groups[0] = OTHERS;
	alice.groups[1] = CREW;
	alice.ngroups = 2;
	CHECK(access_check_create(&alice, "fork", &e) == 0);
	/* Groups past ngroups are not the caller's. */
	alice.ngroups = 1;
	CHECK(access_check_create(&alice, "fork", &e) == -EACCES);
	CHECK(access_check_create(&access_root, "fork", &e) == 0);

	/* A name, looked up; an unknown name and a number out of range are refused. */
	struct group *g = getgrgid(0);
	if (g && g->gr_name) {
		CHECK(access_init(g->gr_name, &e) == 0);
		CHECK(access_create_gid() == 0);
	}
	CHECK(access_init("no-such-group-snapfs-test", &e) == -ENOENT);
	CHECK(access_init("99999999999999999999", &e) == -EINVAL);
	CHECK(access_init("", &e) == 0);
	CHECK(access_check_create(&crew, "fork", &e) == -EACCES);
}

static void test_open(void)
{
	struct caller alice = user(ALICE, ALICE), bob = user(BOB, BOB);
	struct caller crew = user(BOB, CREW);

	/* An owner's 0600 file: the owner alone. */
	CHECK(access_may_open(&alice, ALICE, ALICE, 0600, O_RDWR));
	CHECK(!access_may_open(&bob, ALICE, ALICE, 0600, O_RDONLY));
	CHECK(!access_may_open(&bob, ALICE, ALICE, 0600, O_WRONLY));
	/* Read-only and write-only files: for everybody, root included. */
	CHECK(access_may_open(&alice, ALICE, ALICE, 0400, O_RDONLY));
	CHECK(!access_may_open(&alice, ALICE, ALICE, 0400, O_WRONLY));
	CHECK(!access_may_open(&alice, ALICE, ALICE, 0200, O_RDONLY));
	CHECK(!access_may_open(&access_root, ALICE, ALICE, 0400, O_RDWR));
	CHECK(!access_may_open(&access_root, ALICE, ALICE, 0200, O_RDONLY));
	CHECK(access_may_open(&access_root, ALICE, ALICE, 0600, O_RDWR));
	CHECK(access_may_open(&access_root, 0, 0, 0400, O_RDONLY));
	/* The journals (root's 0400): nobody else. */
	CHECK(!access_may_open(&alice, 0, 0, 0400, O_RDONLY));
	/* sandboxes/new (0660 of the creating group): its members. */
	CHECK(access_may_open(&crew, 0, CREW, 0660, O_WRONLY));
	CHECK(!access_may_open(&alice, 0, CREW, 0660, O_WRONLY));
	/* World-readable files. */
	CHECK(access_may_open(&alice, 0, 0, 0444, O_RDONLY));
	CHECK(!access_may_open(&alice, 0, 0, 0444, O_WRONLY));
}

int main(void)
{
	test_see();
	test_create();
	test_open();
	return t_done();
}
