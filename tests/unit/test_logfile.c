/*
 * test_logfile.c - the capped log file: generations on disk stay under the
 * cap, and the view keeps every byte at its offset across rotations while a
 * reader has it open (tail -f), then starts again at PATH.1.
 */
#include "lib/logfile.h"

#include <fcntl.h>
#include <unistd.h>

#include "tests/unit/t_dir.h"

static int64_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : -1;
}

static int64_t view_size(struct logfile *lf)
{
	int64_t size = -1;
	struct timespec mtime;
	return logfile_stat(lf, &size, &mtime) == 0 ? size : -1;
}

/* The view from @off to its end, NUL-terminated (at most @max - 1 bytes). */
static size_t view_read(struct logfile *lf, int64_t off, char *out, size_t max)
{
	size_t got = 0;
	for (;;) {
		ssize_t n = logfile_read(lf, out + got, max - 1 - got < 7 ? max - 1 - got : 7,
					 off + (int64_t)got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	out[got] = '\0';
	return got;
}

/* "line NNN\n": 9 bytes. */
static void append_line(struct logfile *lf, int i)
{
	char line[32];
	snprintf(line, sizeof(line), "line %03d\n", i);
	CHECK(logfile_append(lf, line, strlen(line)) == 0);
}

static void test_rotation_on_disk(void)
{
	char path[PATH_MAX], prev[PATH_MAX], text[4096];
	struct logfile lf = LOGFILE_INIT;
	t_path(path, "a.log");
	t_path(prev, "a.log.1");
	CHECK(logfile_open(&lf, path, 40, 0600, -1) == 0);
	int64_t biggest = 0;
	for (int i = 0; i < 100; i++) {
		append_line(&lf, i);
		int64_t a = file_size(path), b = file_size(prev);
		biggest = a > biggest ? a : biggest;
		biggest = b > biggest ? b : biggest;
	}
	CHECK(biggest <= 40);
	CHECK(file_size(prev) > 0);
	/* Four whole lines fit in 40 bytes: the newest generation ends with line 099. */
	CHECK(file_size(path) == 36);
	/* Nobody reads: the view is PATH.1 then PATH, from 0. */
	CHECK(view_size(&lf) == file_size(prev) + file_size(path));
	view_read(&lf, 0, text, sizeof(text));
	CHECK_STR(text, "line 092\nline 093\nline 094\nline 095\n"
			"line 096\nline 097\nline 098\nline 099\n");
	struct stat st;
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
	logfile_close(&lf);

	/* A restart sees the generation before. */
	struct logfile again = LOGFILE_INIT;
	CHECK(logfile_open(&again, path, 40, 0600, -1) == 0);
	CHECK(view_size(&again) == 72);
	logfile_close(&again);
}

static void test_reader_keeps_offsets(void)
{
	char path[PATH_MAX], text[4096];
	struct logfile lf = LOGFILE_INIT;
	t_path(path, "b.log");
	CHECK(logfile_open(&lf, path, 40, 0600, -1) == 0);
	for (int i = 0; i < 3; i++)
		append_line(&lf, i);
	logfile_reader(&lf, true); /* tail -f opens it, reads to the end */
	int64_t at = view_size(&lf);
	CHECK(at == 27);
	int64_t last = at;
	bool grew = true;
	for (int i = 3; i < 40; i++) {
		append_line(&lf, i);
		int64_t now = view_size(&lf);
		grew = grew && now == last + 9;
		last = now;
	}
	CHECK(grew); /* st_size never shrinks under the reader */
	/* What the reader gets next, from where it was: the gap, then the kept lines. */
	size_t n = view_read(&lf, at, text, sizeof(text));
	CHECK(n == (size_t)(last - at));
	const char *kept = strstr(text, "line ");
	CHECK(kept && !strcmp(kept, "line 032\nline 033\nline 034\nline 035\n"
				    "line 036\nline 037\nline 038\nline 039\n"));
	/* The gap is spaces ending in one newline. */
	size_t gap = kept ? (size_t)(kept - text) : 0;
	CHECK(gap > 0 && text[gap - 1] == '\n' && strspn(text, " ") == gap - 1);
	/* A line written after the rotations is at the offset the view said was its end. */
	append_line(&lf, 40);
	view_read(&lf, last, text, sizeof(text));
	CHECK_STR(text, "line 040\n");
	/* A read far past the end, up to the largest offset, is the end. */
	CHECK(logfile_read(&lf, text, sizeof(text), INT64_MAX - 3) == 0);
	CHECK(logfile_read(&lf, text, sizeof(text), last + 9) == 0);
	/* A second reader shares the offsets while the first is open. */
	logfile_reader(&lf, true);
	logfile_reader(&lf, false);
	CHECK(view_size(&lf) == last + 9);
	/* Once nobody reads, the view starts again at PATH.1. */
	logfile_reader(&lf, false);
	CHECK(view_size(&lf) < last);
	view_read(&lf, 0, text, sizeof(text));
	CHECK(!strncmp(text, "line ", 5));
	logfile_close(&lf);
}

/* @also follows the current generation: writes to it count and land there. */
static void test_also(void)
{
	char path[PATH_MAX], prev[PATH_MAX], text[256];
	struct logfile lf = LOGFILE_INIT;
	t_path(path, "c.log");
	t_path(prev, "c.log.1");
	int spare = open("/dev/null", O_WRONLY | O_CLOEXEC);
	CHECK(spare >= 0);
	CHECK(logfile_open(&lf, path, 20, 0600, spare) == 0);
	CHECK(write(spare, "foreign\n", 8) == 8);
	append_line(&lf, 1); /* 8 + 9 = 17 */
	append_line(&lf, 2); /* past 20: rotates first */
	CHECK(file_size(prev) == 17 && file_size(path) == 9);
	CHECK(write(spare, "after\n", 6) == 6);
	CHECK(file_size(path) == 15);
	view_read(&lf, 0, text, sizeof(text));
	CHECK_STR(text, "foreign\nline 001\nline 002\nafter\n");
	logfile_close(&lf);
	close(spare);
}

/* After PATH was renamed (logrotate, then SIGHUP): a fresh PATH, @also with it; else nothing. */
static void test_reopen(void)
{
	char path[PATH_MAX], moved[PATH_MAX];
	struct logfile lf = LOGFILE_INIT;
	struct stat st;
	t_path(path, "d.log");
	t_path(moved, "d.log.moved");
	int spare = open("/dev/null", O_WRONLY | O_CLOEXEC);
	CHECK(spare >= 0);
	CHECK(logfile_open(&lf, path, 0, 0600, spare) == 0);
	append_line(&lf, 1);
	CHECK(logfile_reopen(&lf) == 0); /* PATH is still ours: nothing happens */
	CHECK(file_size(path) == 9);
	CHECK(rename(path, moved) == 0);
	CHECK(logfile_reopen(&lf) == 0);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_size == 0);
	append_line(&lf, 2);
	CHECK(write(spare, "after\n", 6) == 6);
	CHECK(file_size(moved) == 9 && file_size(path) == 15);
	logfile_close(&lf);
	close(spare);
}

int main(void)
{
	static void (*const tests[])(void) = {test_rotation_on_disk, test_reader_keeps_offsets,
					      test_also, test_reopen};
	return t_dir_main("test_logfile", tests, ARRAY_SIZE(tests));
}
