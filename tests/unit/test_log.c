/*
 * test_log.c - the daemon's log lines (lib/util.c): one line per event with
 * its level, a timestamp of its own on a plain stderr, and sd-daemon(3)'s
 * `<N>` priority and no timestamp when stderr is the journal's stream
 * (JOURNAL_STREAM names its device and inode); the readiness messages to
 * NOTIFY_SOCKET (lib/sdnotify.c).
 */
#include <fcntl.h>
#include <regex.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/sdnotify.h"
#include "tests/unit/t_dir.h"

/* Everything stderr got since the last call, NUL-terminated; the file emptied. */
static void take_stderr(int fd, char *out, size_t max)
{
	ssize_t n = pread(fd, out, max - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	CHECK(ftruncate(fd, 0) == 0);
}

static bool matches(const char *text, const char *ere)
{
	regex_t re;
	if (regcomp(&re, ere, REG_EXTENDED | REG_NOSUB) != 0)
		return false;
	bool ok = regexec(&re, text, 0, NULL, 0) == 0;
	regfree(&re);
	return ok;
}

static void test_lines(void)
{
	char path[PATH_MAX], text[1024], js[64];
	struct stat st;
	t_path(path, "stderr");
	int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	int saved = dup(STDERR_FILENO);
	CHECK(fd >= 0 && saved >= 0 && dup2(fd, STDERR_FILENO) == STDERR_FILENO);

	/* Plain stderr, and a JOURNAL_STREAM naming another stream: timestamps, no <N>. */
	unsetenv("JOURNAL_STREAM");
	log_init();
	info("first\nsecond\r");
	setenv("JOURNAL_STREAM", "1:1", 1);
	log_init();
	warning("w %d", 1);
	take_stderr(fd, text, sizeof(text));
	CHECK_MSG(matches(text, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z snapfs info: first second \n"
				"[0-9]{4}-[0-9-]+T[0-9:.]+Z snapfs warning: w 1\n$"),
		  "plain lines: %s", text);

	/* stderr is the journal's: <N>level, no timestamp. */
	CHECK(fstat(STDERR_FILENO, &st) == 0);
	snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", js, 1);
	log_init();
	CHECK(error(EIO, "e\nf") == -EIO);
	warning("w");
	info("i");
	take_stderr(fd, text, sizeof(text));
	CHECK_STR(text, "<3>error: e f\n<4>warning: w\n<6>info: i\n");

	CHECK(dup2(saved, STDERR_FILENO) == STDERR_FILENO);
	close(saved);
	close(fd);
	unsetenv("JOURNAL_STREAM");
}

/* NOTIFY_SOCKET: one datagram per call, the variable gone from the environment. */
static void test_sdnotify(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char buf[64], path[PATH_MAX];
	unsetenv("NOTIFY_SOCKET");
	CHECK(sdnotify_init() == 0);
	CHECK(sdnotify("READY=1") == 0); /* none: nothing to do */

	t_path(path, "notify");
	CHECK(strlen(path) < sizeof(sa.sun_path));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	setenv("NOTIFY_SOCKET", sa.sun_path, 1);
	CHECK(sdnotify_init() == 1);
	CHECK(getenv("NOTIFY_SOCKET") == NULL);
	CHECK(sdnotify("READY=1") == 0);
	CHECK(sdnotify("STOPPING=1") == 0);
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	buf[n > 0 ? n : 0] = '\0';
	CHECK_STR(buf, "READY=1");
	n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	buf[n > 0 ? n : 0] = '\0';
	CHECK_STR(buf, "STOPPING=1");
	close(fd);

	setenv("NOTIFY_SOCKET", "relative", 1);
	CHECK(sdnotify_init() == -EINVAL);
	CHECK(getenv("NOTIFY_SOCKET") == NULL);
	CHECK(sdnotify("READY=1") == 0); /* the socket before is forgotten */
}

int main(void)
{
	static void (*const tests[])(void) = {test_lines, test_sdnotify};
	return t_dir_main("test_log", tests, ARRAY_SIZE(tests));
}
