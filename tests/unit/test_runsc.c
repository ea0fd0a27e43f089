/*
 * test_runsc.c - runsc_state()'s statuses, runsc_checkpoint()'s command
 * line and a failed restore's message, against a stand-in runsc: a shell
 * script that writes its argv, one word a line, to ARGS, answers `state`
 * with the text of REPLY (or, when REPLY holds "gone", runsc's message for
 * an unknown container) and fails every `restore` with a line of its own.
 */
#include "runtime/runsc/runsc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/t_dir.h"

static const char script[] =
    "#!/bin/sh\n"
    "dir=${0%/*}\n"
    "printf '%s\\n' \"$@\" > \"$dir/args\"\n"
    "[ \"$1\" = --version ] && { echo 'runsc version 0.0~20250101.0'; exit 0; }\n"
    "case \" $* \" in\n"
    "*' state '*)\n"
    "  if [ \"$(cat \"$dir/reply\")\" = gone ]; then\n"
    "    echo 'loading container: file does not exist' >&2; exit 1\n"
    "  fi\n"
    "  cat \"$dir/reply\";;\n"
    "*' restore '*)\n"
    "  echo 'restoring container: injected' >&2; exit 128;;\n"
    "esac\n"
    "exit 0\n";

static struct runsc rs;

static void put(const char *rel, const char *text)
{
	char path[PATH_MAX];
	t_path(path, rel);
	CHECK(write_file_durable(path, text, strlen(text)) == 0);
}

/* What the stand-in was last given, its words joined by spaces. */
static void last_args(char *out, size_t len)
{
	char path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	size_t n = 0;
	t_path(path, "args");
	out[0] = '\0';
	if (read_file(path, &text, &n, 1 << 16) < 0)
		return;
	for (char *p = text; *p; p++)
		if (*p == '\n')
			*p = p[1] ? ' ' : '\0';
	snprintf(out, len, "%s", text);
}

static enum runsc_status state_for(const char *reply, pid_t *pid)
{
	put("reply", reply);
	return runsc_state(&rs, "snapfs-c1", pid, NULL);
}

static void test_state(void)
{
	pid_t pid = 7;
	struct err e = {0};
	CHECK(state_for("{\"status\":\"running\",\"pid\":42}", &pid) == RUNSC_RUNNING);
	CHECK(pid == 42);
	CHECK(state_for("{\"status\":\"created\",\"pid\":5}", NULL) == RUNSC_CREATED);
	CHECK(state_for("{\"status\":\"creating\",\"pid\":5}", NULL) == RUNSC_CREATING);
	CHECK(state_for("{\"status\":\"paused\",\"pid\":5}", NULL) == RUNSC_PAUSED);
	CHECK(state_for("{\"status\":\"stopped\",\"pid\":0}", &pid) == RUNSC_STOPPED);
	CHECK(pid == 0);
	/* A word runsc does not use, and "gone" is not one of runsc's. */
	CHECK(state_for("{\"status\":\"gone\",\"pid\":1}", NULL) == RUNSC_UNKNOWN);
	CHECK(state_for("{\"status\":\"Running\",\"pid\":1}", NULL) == RUNSC_UNKNOWN);
	/* Unreadable output: unknown, the pid left alone, and @e says why. */
	pid = 9;
	put("reply", "{\"status\":\"running\"}");
	CHECK(runsc_state(&rs, "snapfs-c1", &pid, &e) == RUNSC_UNKNOWN);
	CHECK(pid == 9 && e.code == EIO && strstr(e.msg, "unexpected output") != NULL);
	CHECK(state_for("gone", &pid) == RUNSC_GONE);
	CHECK(pid == 9);

	CHECK_STR(runsc_status_name(RUNSC_RUNNING), "running");
	CHECK_STR(runsc_status_name(RUNSC_STOPPED), "stopped");
	CHECK_STR(runsc_status_name(RUNSC_GONE), "gone");
	CHECK_STR(runsc_status_name(RUNSC_UNKNOWN), "unknown");
	CHECK_STR(runsc_status_name((enum runsc_status)99), "unknown");
}

/* runsc_checkpoint() with @o gives `--root R checkpoint @words`. */
static void check_checkpoint(const struct runsc_checkpoint_opts *o, const char *words)
{
	char args[1024], want[PATH_MAX + 256];
	struct err e = {0};
	CHECK(runsc_checkpoint(&rs, "snapfs-c1", o, &e) == 0);
	last_args(args, sizeof(args));
	snprintf(want, sizeof(want), "--root %s checkpoint %s", rs.root, words);
	CHECK_STR(args, want);
}

static void test_checkpoint(void)
{
	struct runsc_checkpoint_opts o = {.image_dir = "/spool/s1"};
	/* A suspend: the defaults. */
	check_checkpoint(&o, "--compression=none --image-path /spool/s1 snapfs-c1");
	/* --direct only where the probe found it works. */
	o.leave_running = o.direct = true;
	check_checkpoint(&o, "--compression=none --image-path /spool/s1 --leave-running snapfs-c1");
	rs.checkpoint_direct = true;
	o.compression = "zstd";
	o.cuda_checkpoint = "/usr/bin/cuda-checkpoint";
	check_checkpoint(&o, "--compression=zstd --direct --image-path /spool/s1 --leave-running "
			     "--cuda-checkpoint-path=/usr/bin/cuda-checkpoint snapfs-c1");
	rs.checkpoint_direct = false;
}

/* A restore whose output goes to a file (a view's console): its failure quotes what runsc wrote. */
static void test_restore_file(void)
{
	char path[PATH_MAX];
	struct err e = {0};
	pid_t pid = 0;
	t_path(path, "console");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	/* What was there before is not runsc's: only the new bytes are quoted. */
	CHECK(write(fd, "an older line\n", 14) == 14);
	struct runsc_stdio io = {.child_fd = fd, .read_fd = -1};
	CHECK(runsc_restore(&rs, 0, "snapfs-c1", "/bundle", "/image", &io, &pid, &e) == -EIO);
	CHECK_STR(e.msg, "runsc restore failed: restoring container: injected");
	close(fd);
	/* Written only: nothing to read back, the exit status says it. */
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	CHECK(fd >= 0);
	io.child_fd = fd;
	e = (struct err){0};
	CHECK(runsc_restore(&rs, 0, "snapfs-c1", "/bundle", "/image", &io, &pid, &e) == -EIO);
	CHECK_STR(e.msg, "runsc restore failed: exit status 128");
	close(fd);
}

int main(void)
{
	char bin[PATH_MAX], root[PATH_MAX];
	struct err e = {0};
	if (!t_dir_make("snapfs-test-runsc"))
		return 1;
	t_path(bin, "runsc");
	t_path(root, "root");
	put("runsc", script);
	CHECK(chmod(bin, 0755) == 0);
	CHECK(runsc_init(&rs, bin, root, &e) == 0);
	CHECK_STR(rs.version, "0.0~20250101.0");
	test_state();
	test_checkpoint();
	test_restore_file();
	rm_rf(t_base);
	return t_done();
}
