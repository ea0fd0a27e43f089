/*
 * test_console.c - a sandbox's console log (runtime/runsc/console.h): what
 * the FIFO still holds at a detach reaches the log (the tail of a sandbox
 * that exited at once was lost), the log is bounded, and a reader's view
 * keeps its offsets across the writer's rotations.
 */
#include "runtime/runsc/console.h"

#include <fcntl.h>
#include <unistd.h>

#include "lib/logfile.h"
#include "tests/unit/t_dir.h"

/* The view from @off to its end, NUL-terminated (at most @max - 1 bytes). */
static size_t view_read(struct logfile *lf, int64_t off, char *out, size_t max)
{
	size_t got = 0;
	for (;;) {
		ssize_t n = console_log_read(lf, out + got, max - 1 - got, off + (int64_t)got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	out[got] = '\0';
	return got;
}

/*
 * No reader thread runs (console_start() is not called): only the detach
 * reads the FIFO, as when the sandbox exits before the thread came to it.
 */
static void test_detach_drains(void)
{
	char dir[PATH_MAX], text[256];
	struct console *c = NULL;
	struct runsc_stdio io;
	struct err e = {0};
	t_path(dir, "drain");
	CHECK(console_open(dir, &c, &e) == 0);
	if (!c)
		return;
	console_stdio(c, &io);
	int writer = dup(io.child_fd); /* the sandbox's end, as runsc hands it on */
	CHECK(writer >= 0);
	console_attach(c, "drain");
	const char *last = "the last line\n";
	CHECK(write(writer, last, strlen(last)) == (ssize_t)strlen(last));
	close(writer); /* the sandbox exited */
	console_detach("drain");
	struct logfile *lf = console_log_get(dir);
	CHECK(lf != NULL);
	view_read(lf, 0, text, sizeof(text));
	CHECK(strcmp(text, last) == 0);
	console_log_put(lf);
}

static void test_empty_before_start(void)
{
	char dir[PATH_MAX], text[16];
	t_path(dir, "never");
	CHECK(mkdir(dir, 0700) == 0);
	struct logfile *lf = console_log_get(dir);
	CHECK(lf != NULL);
	CHECK(view_read(lf, 0, text, sizeof(text)) == 0);
	console_log_put(lf);
	char log[PATH_MAX];
	t_path(log, "never/console.log");
	CHECK(access(log, F_OK) < 0); /* a reader makes no file */
}

/* The writer rotates past CONSOLE_LOG_MAX; an open view's offsets only grow. */
static void test_bounded_and_offsets_grow(void)
{
	char dir[PATH_MAX], log[PATH_MAX], old[PATH_MAX];
	struct console *c = NULL;
	struct err e = {0};
	static char chunk[64 << 10];
	memset(chunk, 'x', sizeof(chunk));
	chunk[sizeof(chunk) - 1] = '\n';
	t_path(dir, "rot");
	CHECK(console_open(dir, &c, &e) == 0);
	if (!c)
		return;
	struct logfile *view = console_log_get(dir);
	logfile_reader(view, true);
	int64_t total = 0, size = 0;
	struct timespec mtime;
	for (int i = 0; i < 40; i++) { /* 2.5 MiB: two rotations */
		console_sink(c, chunk, sizeof(chunk));
		total += (int64_t)sizeof(chunk);
	}
	CHECK(logfile_stat(view, &size, &mtime) == 0);
	CHECK(size == total); /* nothing moved under the open reader */
	struct stat st;
	t_path(log, "rot/console.log");
	t_path(old, "rot/console.log.1");
	CHECK(stat(log, &st) == 0 && st.st_size <= CONSOLE_LOG_MAX);
	CHECK(stat(old, &st) == 0 && st.st_size <= CONSOLE_LOG_MAX);
	char tail[8];
	CHECK(console_log_read(view, tail, 1, total - 1) == 1 && tail[0] == '\n');
	logfile_reader(view, false);
	console_log_put(view);
	console_free(c);
}

int main(void)
{
	static void (*const tests[])(void) = {test_detach_drains, test_empty_before_start,
					      test_bounded_and_offsets_grow};
	return t_dir_main("test_console", tests, ARRAY_SIZE(tests));
}
