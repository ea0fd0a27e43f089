/* lib/names.c: the one rule for each kind of name local input and the bucket share. */
#include "lib/names.h"

#include <string.h>

#include "lib/util.h"
#include "tests/unit/t.h"

static void test_names(void)
{
	char longest[NAME_LEN_MAX + 2];
	memset(longest, 'a', sizeof(longest));
	longest[NAME_LEN_MAX] = '\0';
	CHECK(name_ok("web") && name_ok("0") && name_ok("a.b-c_d") && name_ok(longest));
	longest[NAME_LEN_MAX] = 'a';
	longest[NAME_LEN_MAX + 1] = '\0';
	CHECK(!name_ok(longest));
	CHECK(!name_ok("") && !name_ok(".") && !name_ok("..") && !name_ok("../../.."));
	CHECK(!name_ok("a/b") && !name_ok("Web") && !name_ok("-a") && !name_ok("_a"));
	CHECK(!name_ok("web\n") && !name_ok("web\nsnap-00 completed web") && !name_ok("a b"));

	CHECK(sandbox_id_ok("web") && sandbox_id_ok("sbx-0123456789abcdef"));
	CHECK(sandbox_id_ok("indexes") && sandbox_id_ok("news"));
	CHECK(!sandbox_id_ok("index") && !sandbox_id_ok("new") && !sandbox_id_ok("../x"));
}

static void test_generated_ids(void)
{
	CHECK(generated_id_ok("snap-0123456789abcdef", "snap-"));
	CHECK(generated_id_ok("host-fedcba9876543210", "host-"));
	CHECK(!generated_id_ok("snap-0123456789abcdef", "host-"));
	CHECK(!generated_id_ok("snap-0123456789ABCDEF", "snap-"));
	CHECK(!generated_id_ok("snap-0123456789abcde", "snap-"));
	CHECK(runtime_id_ok("snapfs-0123456789abcdef01234567"));
	CHECK(!runtime_id_ok("snapfs-0123456789abcdef0123456"));
	CHECK(!runtime_id_ok("snapfs-0123456789abcdef012345678"));
	CHECK(!runtime_id_ok("snapfs-0123456789ABCDEF01234567"));
	CHECK(!runtime_id_ok("sshd.service"));
	CHECK(!generated_id_ok("snap-0123456789abcdef0", "snap-"));
	CHECK(!generated_id_ok("snap-0123456789abcdeg", "snap-"));
	CHECK(!generated_id_ok("snap-", "snap-") && !generated_id_ok("", "snap-"));
}

static void test_images(void)
{
	char longest[IMAGE_NAME_LEN_MAX + 2];
	memset(longest, 'B', sizeof(longest));
	longest[IMAGE_NAME_LEN_MAX] = '\0';
	CHECK(image_name_ok("busybox") && image_name_ok("Ubuntu-22.04_x") &&
	      image_name_ok(longest));
	longest[IMAGE_NAME_LEN_MAX] = 'B';
	longest[IMAGE_NAME_LEN_MAX + 1] = '\0';
	CHECK(!image_name_ok(longest));
	CHECK(!image_name_ok("") && !image_name_ok(".hidden") && !image_name_ok("-a"));
	CHECK(!image_name_ok("_a") && !image_name_ok("a/b") && !image_name_ok("a b"));
	CHECK(!image_name_ok("../etc") && !image_name_ok("busybox\nyes\n"));

	const char *digest =
	    "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	CHECK(image_digest_ok(digest));
	CHECK(!image_digest_ok(digest + 1) && !image_digest_ok("sha256:") && !image_digest_ok(""));
	CHECK(!image_digest_ok("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
			       "abcdeF"));
	CHECK(!image_digest_ok("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
			       "abcdef\nyes"));
}

static void test_text(void)
{
	char big[130];
	memset(big, 'x', sizeof(big));
	big[127] = '\0';
	CHECK(label_ok("", 128) && label_ok("v1.0", 128) && label_ok("caf\xc3\xa9", 128));
	CHECK(label_ok(big, 128));
	big[127] = 'x';
	big[128] = '\0';
	CHECK(!label_ok(big, 128));
	CHECK(!label_ok("a b", 128) && !label_ok("a\tb", 128) && !label_ok("a\nb", 128));
	CHECK(!label_ok("\x7f", 128));
	/* A name that is also a file name in snapshots/by-name/. */
	CHECK(label_file_ok("v1.0", 128) && label_file_ok("auto-20260101T000000Z", 128));
	CHECK(label_file_ok("...", 128) && label_file_ok("-x", 128) && label_file_ok(".a", 128));
	const char *not_files[] = {"", ".", "..", "-", "a/b", "/", "a b", "a\nb"};
	for (size_t i = 0; i < ARRAY_SIZE(not_files); i++)
		CHECK_MSG(!label_file_ok(not_files[i], 128), "'%s' is no file name", not_files[i]);

	CHECK(text_ok("", 16) && text_ok("sleep 1; echo a", 16) && text_ok("a\tb", 16));
	CHECK(text_ok("0123456789abcde", 16) && !text_ok("0123456789abcdef", 16));
	CHECK(!text_ok("a\nb", 16) && !text_ok("a\rb", 16) && !text_ok("\x1b[2J", 16));
	CHECK(!text_ok("busybox\nyes\n", 64) && !text_ok("\x7f", 16));
	CHECK(text_ok("caf\xc3\xa9 \"q\" $x", 64));
}

static void test_cgroup_parent(void)
{
	char big[CGROUP_PARENT_MAX + 1];
	CHECK(cgroup_parent_ok("/snapfs.slice") && cgroup_parent_ok("/a/B-1/c_d.e"));
	CHECK(!cgroup_parent_ok("") && !cgroup_parent_ok("/") && !cgroup_parent_ok("snapfs"));
	CHECK(!cgroup_parent_ok("/a//b") && !cgroup_parent_ok("/a/") && !cgroup_parent_ok("/a/.."));
	CHECK(!cgroup_parent_ok("/./a") && !cgroup_parent_ok("/.hidden"));
	CHECK(!cgroup_parent_ok("snapfs.slice:snapfs:x") && !cgroup_parent_ok("/a:b"));
	CHECK(!cgroup_parent_ok("/a b") && !cgroup_parent_ok("/a\nb"));
	memset(big, 'x', sizeof(big));
	big[0] = '/';
	big[CGROUP_PARENT_MAX - 1] = '\0';
	CHECK(cgroup_parent_ok(big));
	big[CGROUP_PARENT_MAX - 1] = 'x';
	big[CGROUP_PARENT_MAX] = '\0';
	CHECK(!cgroup_parent_ok(big));
}

int main(void)
{
	test_names();
	test_generated_ids();
	test_images();
	test_text();
	test_cgroup_parent();
	return t_done();
}
