/* Unit tests for fs/scratch.c: the scratch store's names, marks, bytes and bounds. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/scratch.h"
#include "lib/util.h"
#include "tests/unit/t.h"

static void test_names(void)
{
	uint64_t id, found;
	CHECK(scratch_create(1000, "sandboxes/a/x", false, &id) == 0);
	CHECK(scratch_create(1000, "sandboxes/a/x", false, &found) == -EEXIST);
	CHECK(scratch_lookup(1000, "sandboxes/a/x", &found) == 1 && found == id);
	/* Another uid sees nothing there, and may make its own of that name. */
	CHECK(scratch_lookup(1001, "sandboxes/a/x", &found) == 0);
	CHECK(scratch_write(id, "12\n", 3, 0) == 3);
	CHECK(scratch_rename(1000, "sandboxes/a/x", "sandboxes/a/y") == 0);
	CHECK(scratch_lookup(1000, "sandboxes/a/x", &found) == 0);
	CHECK(scratch_lookup(1000, "sandboxes/a/y", &found) == 1 && found == id);
	struct strbuf sb = STRBUF_INIT;
	CHECK(scratch_take(id, false, &sb) == 1);
	CHECK_STR(strbuf_str(&sb), "12\n");
	CHECK(scratch_lookup(1000, "sandboxes/a/y", &found) == 0);
	/* Its open file still reads what it held until its last close. */
	char buf[8] = {0};
	CHECK(scratch_read(id, buf, sizeof(buf), 0) == 3);
	scratch_close(id);
	CHECK(scratch_read(id, buf, sizeof(buf), 0) == -ENOENT);
	strbuf_release(&sb);
	scratch_reset();
}

static void test_marks(void)
{
	uint64_t id, found;
	CHECK(scratch_create(7, "sandboxes/a/memory", true, &id) == -ENOENT);
	CHECK(scratch_mark(7, "sandboxes/a/memory") == 0);
	CHECK(scratch_lookup(7, "sandboxes/a/memory", &found) == -ENOENT);
	CHECK(scratch_lookup(8, "sandboxes/a/memory", &found) == 0);
	CHECK(scratch_create(7, "sandboxes/a/memory", true, &id) == 0);
	struct scratch_info si;
	CHECK(scratch_info(id, &si) == 0 && si.bound);
	CHECK(scratch_write(id, "1G\n", 3, 0) == 3);
	struct strbuf sb = STRBUF_INIT;
	CHECK(scratch_take(id, true, &sb) == 1);
	CHECK(scratch_take(id, true, &sb) == 0); /* nothing new since */
	/* A bound file goes at its last close: the control file is seen again. */
	scratch_close(id);
	CHECK(scratch_lookup(7, "sandboxes/a/memory", &found) == 0);
	strbuf_release(&sb);
	scratch_reset();
}

static void test_bounds(void)
{
	uint64_t ids[SCRATCH_FILES_MAX], id;
	char path[64];
	for (int i = 0; i < SCRATCH_FILES_MAX; i++) {
		snprintf(path, sizeof(path), "sandboxes/a/f%d", i);
		CHECK(scratch_create(5, path, false, &ids[i]) == 0);
	}
	CHECK(scratch_create(5, "sandboxes/a/more", false, &id) == -EDQUOT);
	CHECK(scratch_mark(5, "sandboxes/a/memory") == -EDQUOT);
	CHECK(scratch_create(6, "sandboxes/a/more", false, &id) == 0); /* per uid */
	_cleanup_free_ char *mib = calloc(1, SCRATCH_FILE_MAX + 1);
	CHECK(scratch_write(ids[0], mib, SCRATCH_FILE_MAX + 1, 0) == -EFBIG);
	CHECK(scratch_truncate(ids[0], SCRATCH_FILE_MAX + 1) == -EFBIG);
	for (int i = 0; i < 4; i++)
		CHECK(scratch_write(ids[i], mib, SCRATCH_FILE_MAX, 0) == (ssize_t)SCRATCH_FILE_MAX);
	CHECK(scratch_write(ids[4], "x", 1, 0) == -EDQUOT);
	CHECK(scratch_truncate(ids[3], 10) == 0);
	CHECK(scratch_write(ids[4], "x", 1, 0) == 1);
	unsigned files;
	size_t bytes;
	scratch_usage(5, &files, &bytes);
	/* Counted as allocated: 4 KiB for each small file. */
	CHECK(files == SCRATCH_FILES_MAX && bytes == 3 * (size_t)SCRATCH_FILE_MAX + 2 * 4096);
	/* A file truncated gives its memory back: 1 MiB in each of 16 files, one at a time. */
	for (int i = 0; i < 4; i++)
		CHECK(scratch_truncate(ids[i], 0) == 0);
	for (int i = 4; i < SCRATCH_FILES_MAX; i++) {
		CHECK(scratch_write(ids[i], mib, SCRATCH_FILE_MAX, 0) == (ssize_t)SCRATCH_FILE_MAX);
		CHECK(scratch_truncate(ids[i], 0) == 0);
	}
	scratch_usage(5, &files, &bytes);
	CHECK(bytes == 0);
	/* A file that grew by doubling counts its whole block: 4 of 600 KiB pass, not 6. */
	for (int i = 0; i < 6; i++)
		CHECK(scratch_write(ids[i], mib, 600 << 10, 0) ==
		      (i < 4 ? (ssize_t)(600 << 10) : -EDQUOT));
	for (int i = 0; i < 6; i++)
		CHECK(scratch_truncate(ids[i], 0) == 0);
	/* A hole reads as zeros. */
	char buf[4];
	CHECK(scratch_write(ids[5], "z", 1, 3) == 1);
	CHECK(scratch_read(ids[5], buf, 4, 0) == 4 && memcmp(buf, "\0\0\0z", 4) == 0);
	scratch_reset();
}

/* A removed directory takes every uid's names under it, marks and files, and only those. */
static void test_forget_dir(void)
{
	uint64_t id, found;
	CHECK(scratch_mark(7, "sandboxes/a/memory") == 0);
	CHECK(scratch_create(8, "sandboxes/a/sedX", false, &id) == 0);
	scratch_close(id);
	CHECK(scratch_create(8, "sandboxes/ab/sedY", false, &id) == 0);
	scratch_close(id);
	scratch_forget_dir("sandboxes/a");
	CHECK(scratch_lookup(7, "sandboxes/a/memory", &found) == 0);
	CHECK(scratch_lookup(8, "sandboxes/a/sedX", &found) == 0);
	CHECK(scratch_lookup(8, "sandboxes/ab/sedY", &found) == 1);
	scratch_reset();
}

int main(void)
{
	test_names();
	test_marks();
	test_forget_dir();
	test_bounds();
	return t_done();
}
