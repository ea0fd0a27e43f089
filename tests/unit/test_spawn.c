/* Unit tests for lib/spawn.c: deadlines, bounded output, cancelling, the child's fds. */
#include "lib/spawn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/strbuf.h"
#include "lib/util.h"
#include "tests/unit/t.h"
#include "tests/unit/t_dir.h"

static char *const env[] = {"PATH=/usr/bin:/bin", NULL};

struct capture {
	struct strbuf out;
	size_t stop_at; /* 0: never */
	atomic_bool got;
};

static int capture_sink(void *arg, const char *data, size_t len)
{
	struct capture *c = arg;
	strbuf_add(&c->out, data, len);
	atomic_store(&c->got, true);
	return c->stop_at && c->out.len >= c->stop_at;
}

/* What the test's calls wrote (sh() empties it). */
static struct capture c = {STRBUF_INIT, 0, false};

/* @s: sh -c @script, its output into c, stopped at @stop_at bytes (0: never). */
static void sh(struct spawn *s, const char *script, size_t stop_at, int64_t timeout_ms)
{
	static const char *argv[4];
	strbuf_reset(&c.out);
	c.stop_at = stop_at;
	atomic_store(&c.got, false);
	argv[0] = "sh";
	argv[1] = "-c";
	argv[2] = script;
	argv[3] = NULL;
	memset(s, 0, sizeof(*s));
	s->argv = argv;
	s->envp = env;
	s->out_fd = s->err_fd = s->in_fd = -1;
	s->sink = capture_sink;
	s->sink_arg = &c;
	s->timeout_ms = timeout_ms;
}

/* Run @s: it starts, and ends as @end. */
static void run_ends(struct spawn *s, enum spawn_end end)
{
	CHECK(spawn_run(s) == 0);
	CHECK_MSG(s->end == end, "the call ended as %d, not %d", (int)s->end, (int)end);
}

/* Is @pid gone (or a zombie nobody reaped yet)? Waits up to 10 s for a SIGKILL to land. */
static bool gone(pid_t pid)
{
	char path[64], stat[256];
	for (int i = 0; i < 1000; i++) {
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		FILE *f = fopen(path, "re");
		if (!f)
			return true;
		bool zombie = fgets(stat, sizeof(stat), f) && strstr(stat, ") Z ");
		fclose(f);
		if (zombie)
			return true;
		usleep(10000);
	}
	return false;
}

static void test_exit_and_output(void)
{
	struct spawn s;
	sh(&s, "echo out; echo err >&2; exit 3", 0, 60000);
	run_ends(&s, SPAWN_EXITED);
	CHECK(spawn_code(s.status) == 3);
	CHECK_STR(strbuf_str(&c.out), "out\nerr\n");
}

/* The deadline kills the whole process group: the child's background job too. */
static void test_deadline_kills_group(void)
{
	struct spawn s;
	sh(&s, "sleep 1000 & echo $!; sleep 1000", 0, 300);
	run_ends(&s, SPAWN_TIMED_OUT);
	CHECK(WIFSIGNALED(s.status) && WTERMSIG(s.status) == SIGKILL);
	pid_t bg = (pid_t)atoi(strbuf_str(&c.out));
	CHECK(bg > 0);
	if (bg > 0)
		CHECK(gone(bg));
}

/* A sink that says stop ends an endless writer, and no more than one read past its cap. */
static void test_cap_stops_writer(void)
{
	struct spawn s;
	sh(&s, "exec yes", 100000, 60000);
	run_ends(&s, SPAWN_STOPPED);
	CHECK(c.out.len >= 100000 && c.out.len < 100000 + (16u << 10));
}

/* A background job that keeps the pipe open does not hold the call up. */
static void test_no_wait_for_eof(void)
{
	struct spawn s;
	sh(&s, "sleep 1000 & echo $!", 0, 60000);
	run_ends(&s, SPAWN_EXITED);
	CHECK(spawn_code(s.status) == 0);
	pid_t bg = (pid_t)atoi(strbuf_str(&c.out));
	CHECK(bg > 0);
	if (bg > 0)
		kill(bg, SIGKILL);
}

/* Only 0, 1 and 2 reach the child, and 3 and 4 when passed; they are the caller's fds. */
static void test_fds(void)
{
	struct spawn s;
	/* ls's own fds: 0, 1, 2 and the directory it reads (3), nothing of ours. */
	sh(&s, "exec ls /proc/self/fd", 0, 60000);
	CHECK(spawn_run(&s) == 0);
	CHECK_STR(strbuf_str(&c.out), "0\n1\n2\n3\n");
	int mfd[2] = {memfd_create("t3", MFD_CLOEXEC), memfd_create("t4", MFD_CLOEXEC)};
	sh(&s, "echo 42 >/proc/self/fd/3; echo 43 >/proc/self/fd/4", 0, 60000);
	s.pass = mfd;
	s.npass = 2;
	CHECK(spawn_run(&s) == 0);
	char buf[16] = "";
	CHECK(pread(mfd[0], buf, sizeof(buf) - 1, 0) == 3);
	CHECK_STR(buf, "42\n");
	CHECK(pread(mfd[1], buf, sizeof(buf) - 1, 0) == 3);
	CHECK_STR(buf, "43\n");
	close(mfd[0]);
	close(mfd[1]);
}

/* Output read from a caller's fd (the read end of a FIFO, say) whose other end the child has. */
static void test_in_fd(void)
{
	struct spawn s;
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	sh(&s, "echo via-fd", 0, 60000);
	s.out_fd = p[1];
	s.in_fd = p[0];
	run_ends(&s, SPAWN_EXITED);
	CHECK_STR(strbuf_str(&c.out), "via-fd\n");
	close(p[0]);
	close(p[1]);
}

static void *cancel_when_started(void *arg)
{
	(void)arg;
	while (!atomic_load(&c.got))
		usleep(1000);
	spawn_cancel("tag-a");
	return NULL;
}

static void test_cancel(void)
{
	struct spawn s;
	pthread_t t;
	sh(&s, "echo started; exec sleep 1000", 0, 60000);
	s.tag = "tag-a";
	CHECK(pthread_create(&t, NULL, cancel_when_started, NULL) == 0);
	CHECK(spawn_run(&s) == 0);
	pthread_join(t, NULL);
	CHECK(s.end == SPAWN_CANCELLED);
	/* Refused from now on when the call asks, */
	sh(&s, "echo ran", 0, 60000);
	s.tag = "tag-a";
	s.refuse_cancelled = true;
	run_ends(&s, SPAWN_CANCELLED);
	CHECK(c.out.len == 0);
	/* and run as usual when it does not (the kill and delete after a cancel). */
	s.refuse_cancelled = false;
	run_ends(&s, SPAWN_EXITED);
	CHECK_STR(strbuf_str(&c.out), "ran\n");
	/* Other tags are not affected. */
	strbuf_reset(&c.out);
	s.tag = "tag-b";
	s.refuse_cancelled = true;
	run_ends(&s, SPAWN_EXITED);
	CHECK(spawn_cancel("tag-nothing") == 0);
}

/*
 * A cancel that lands just after a call started (between the child's start
 * and spawn_run()'s look at what happened) must still see the child reaped
 * and the call out of the list of calls in flight: the call must not take
 * it for one that never started. A canceller spins on the tag while calls
 * start one after the other; each call's child must be reaped by the time
 * spawn_run() returns (waitpid finds no such child). The calls are kept
 * (never reused, never freed) so that a call left in the list shows up here
 * as a failed check, not as a hang or a use after free.
 */
#define RACE_CALLS 2000
static struct spawn race_calls[RACE_CALLS];
static atomic_bool race_stop;

static void *cancel_spin(void *arg)
{
	(void)arg;
	while (!atomic_load(&race_stop))
		spawn_cancel("tag-race");
	return NULL;
}

static void test_cancel_just_after_start(void)
{
	static const char *argv[] = {"true", NULL};
	pthread_t t;
	int unreaped = 0, cancelled = 0;
	CHECK(pthread_create(&t, NULL, cancel_spin, NULL) == 0);
	for (int i = 0; i < RACE_CALLS && !unreaped; i++) {
		struct spawn *s = &race_calls[i];
		s->argv = argv;
		s->envp = env;
		s->out_fd = s->err_fd = s->in_fd = -1;
		s->timeout_ms = 60000;
		s->tag = "tag-race";
		CHECK(spawn_run(s) == 0);
		if (s->end != SPAWN_CANCELLED)
			continue;
		cancelled++;
		if (s->pid_ > 0 && waitpid(s->pid_, NULL, WNOHANG) != -1)
			unreaped++;
	}
	atomic_store(&race_stop, true);
	pthread_join(t, NULL);
	CHECK(cancelled > 0);
	CHECK(unreaped == 0);
}

static void test_bad_calls(void)
{
	struct spawn s;
	sh(&s, "true", 0, 0);
	CHECK(spawn_run(&s) == -EINVAL);
	static const char *missing[] = {"/nonexistent/snapfs-test", NULL};
	sh(&s, "true", 0, 1000);
	s.argv = missing;
	CHECK(spawn_run(&s) == -ENOENT);
}

/* Is @pid running now (not gone, not a zombie)? */
static bool running(pid_t pid)
{
	char path[64], stat[256] = "";
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	bool ok = f && fgets(stat, sizeof(stat), f) && !strstr(stat, ") Z ");
	if (f)
		fclose(f);
	return ok;
}

/*
 * A child recorded by a "daemon" (a forked process) killed with SIGKILL
 * lives on; a record whose start time is not the process's (a reused pid)
 * is not waited for and kills nothing; the true one is waited for until
 * the bound and its group killed.
 */
static void test_leftovers(void)
{
	char dir[PATH_MAX], path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	const char *const argv[] = {"sleep", "600", NULL};
	t_path(dir, "records");
	CHECK(mkdir_p(dir, 0700) == 0);
	pid_t daemon = fork();
	if (daemon == 0) {
		struct spawn s = {.argv = argv,
				  .envp = env,
				  .out_fd = -1,
				  .err_fd = -1,
				  .in_fd = -1,
				  .timeout_ms = 600000,
				  .record_dir = dir};
		spawn_run(&s);
		_exit(0);
	}
	pid_t child = 0;
	for (int i = 0; i < 2000 && child <= 0; i++) {
		DIR *d = opendir(dir);
		for (struct dirent *de = d ? readdir(d) : NULL; de; de = readdir(d))
			if (de->d_name[0] != '.')
				child = atoi(de->d_name);
		if (d)
			closedir(d);
		usleep(5000);
	}
	kill(daemon, SIGKILL);
	waitpid(daemon, NULL, 0);
	if (!CHECK(child > 0))
		return;
	xsnprintf(path, sizeof(path), "%s/%d", dir, (int)child);
	CHECK(read_file(path, &text, NULL, 4096) == 0 && text);
	char boot[64] = "";
	unsigned long long started = 0;
	long long deadline = 0;
	CHECK(sscanf(text ? text : "", "%63s %llu %lld", boot, &started, &deadline) == 3);
	char fake[256];
	int n = snprintf(fake, sizeof(fake), "%s %llu %lld\n", boot, started + 1, deadline);
	CHECK(write_file_durable(path, fake, (size_t)n) == 0);
	CHECK(spawn_leftovers_wait(dir, 1) == 0); /* another process under the pid: not ours */
	CHECK(running(child));
	CHECK(access(path, F_OK) < 0);
	n = snprintf(fake, sizeof(fake), "%s-other %llu %lld\n", boot, started, deadline);
	CHECK(write_file_durable(path, fake, (size_t)n) == 0);
	CHECK(spawn_leftovers_wait(dir, 1) == 0); /* another boot's */
	CHECK(running(child));
	CHECK(write_file_durable(path, text, strlen(text)) == 0);
	CHECK(spawn_leftovers_wait(dir, 1) == 1); /* ours: waited for 1 ms, then killed */
	CHECK(gone(child));
	CHECK(access(path, F_OK) < 0);
	kill(child, SIGKILL);
}

/* Field 22 of /proc/@pid/stat (the record's start time); 0 if it is gone. */
static unsigned long long t_start_time(pid_t pid)
{
	char path[64], stat[1024] = "";
	unsigned long long started = 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	const char *p = f && fgets(stat, sizeof(stat), f) ? strrchr(stat, ')') : NULL;
	if (f)
		fclose(f);
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (p)
		started = strtoull(p + 1, NULL, 10);
	return started;
}

static long long t_boot_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * @n "sleep 600" in sessions of their own, recorded in @dir as spawn.h says
 * with deadline @deadline, their parent gone (as a killed daemon's are);
 * their pids into @pids. How many were recorded.
 */
static int t_leftovers(const char *dir, pid_t *pids, int n, long long deadline)
{
	int fds[2];
	char boot[64] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!f || !fgets(boot, sizeof(boot), f) || pipe(fds) < 0) {
		if (f)
			fclose(f);
		return 0;
	}
	fclose(f);
	boot[strcspn(boot, "\n")] = '\0';
	pid_t parent = fork();
	if (parent == 0) {
		close(fds[0]);
		for (int i = 0; i < n; i++) {
			char path[PATH_MAX], text[256];
			pid_t pid = fork();
			if (pid == 0) {
				setsid();
				execlp("sleep", "sleep", "600", (char *)NULL);
				_exit(127);
			}
			int len = snprintf(text, sizeof(text), "%s %llu %lld\n", boot,
					   t_start_time(pid), deadline);
			xsnprintf(path, sizeof(path), "%s/%d", dir, (int)pid);
			if (pid < 0 || write_file_durable(path, text, (size_t)len) < 0 ||
			    write(fds[1], &pid, sizeof(pid)) != (ssize_t)sizeof(pid))
				_exit(1);
		}
		_exit(0);
	}
	close(fds[1]);
	int got = 0;
	while (got < n && read(fds[0], &pids[got], sizeof(pid_t)) == (ssize_t)sizeof(pid_t))
		got++;
	close(fds[0]);
	waitpid(parent, NULL, 0);
	return got;
}

static bool t_recorded(const char *dir, pid_t pid)
{
	char path[PATH_MAX];
	xsnprintf(path, sizeof(path), "%s/%d", dir, (int)pid);
	return access(path, F_OK) == 0;
}

/* A wait killed while a leftover still runs leaves its record for the next one. */
static void test_leftovers_wait_killed(void)
{
	char dir[PATH_MAX], said[512];
	pid_t child = 0;
	int fds[2];
	t_path(dir, "records-killed");
	CHECK(mkdir_p(dir, 0700) == 0);
	if (!CHECK(t_leftovers(dir, &child, 1, t_boot_ms() + 600000) == 1) ||
	    !CHECK(pipe(fds) == 0))
		return;
	pid_t waiter = fork();
	if (waiter == 0) {
		dup2(fds[1], 2);
		spawn_leftovers_wait(dir, 0);
		_exit(0);
	}
	close(fds[1]);
	size_t len = 0;
	said[0] = '\0';
	/* It says so once it polls: then it is mid-wait. */
	while (len < sizeof(said) - 1 && !strstr(said, "waiting for")) {
		ssize_t r = read(fds[0], said + len, sizeof(said) - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
		said[len] = '\0';
	}
	close(fds[0]);
	CHECK_MSG(strstr(said, "waiting for"), "the wait said: %s", said);
	kill(waiter, SIGKILL);
	waitpid(waiter, NULL, 0);
	CHECK(running(child));
	CHECK_MSG(t_recorded(dir, child), "the record of running pid %d went with the wait",
		  (int)child);
	CHECK(spawn_leftovers_wait(dir, 1) == 1); /* the next one kills it */
	CHECK(gone(child));
	CHECK(!t_recorded(dir, child));
	kill(child, SIGKILL);
}

/* More leftovers than one batch holds: every one is waited for, killed and its record removed. */
static void test_leftovers_many(void)
{
	enum { N = SPAWN_LEFTOVERS_MAX + 3 };
	static pid_t pids[N];
	char dir[PATH_MAX];
	t_path(dir, "records-many");
	CHECK(mkdir_p(dir, 0700) == 0);
	int n = t_leftovers(dir, pids, N, 0);
	if (CHECK(n == N))
		CHECK(spawn_leftovers_wait(dir, 1) == N);
	int running_after = 0, records_after = 0;
	for (int i = 0; i < n; i++) {
		running_after += !gone(pids[i]);
		records_after += t_recorded(dir, pids[i]);
		kill(pids[i], SIGKILL);
	}
	CHECK_MSG(running_after == 0, "%d of %d leftovers run on", running_after, n);
	CHECK_MSG(records_after == 0, "%d of %d records stay", records_after, n);
}

static int adopted_code = -1;

static void adopted(pid_t pid, int code, void *arg)
{
	(void)pid, (void)arg;
	adopted_code = code;
}

/*
 * As a subreaper: the orphan a child left is reaped with its status, and
 * the children spawn_run() and spawn_fork() reap keep theirs (a
 * waitpid(-1) would steal them). Last: the process stays a subreaper.
 */
static void test_reap_adopted(void)
{
	CHECK(spawn_become_reaper() == 0);
	struct spawn s;
	sh(&s, "(sleep 0.3; exit 5) & exit 3", 0, 60000);
	run_ends(&s, SPAWN_EXITED);
	CHECK(spawn_code(s.status) == 3);
	for (int i = 0; i < 20; i++) {
		pid_t pid = spawn_fork(); /* an owned child ending meanwhile is never taken */
		if (pid == 0)
			_exit(9);
		spawn_reap_adopted(adopted, NULL);
		int st = 0;
		CHECK(pid > 0 && spawn_wait(pid, &st) == 0 && WEXITSTATUS(st) == 9);
		if (adopted_code >= 0)
			break;
		usleep(100000);
	}
	CHECK(adopted_code == 5);
	CHECK(spawn_reap_adopted(adopted, NULL) == 0);
}

int main(void)
{
	test_exit_and_output();
	test_deadline_kills_group();
	test_cap_stops_writer();
	test_no_wait_for_eof();
	test_fds();
	test_in_fd();
	test_cancel();
	test_cancel_just_after_start();
	test_bad_calls();
	if (t_dir_make("test_spawn")) {
		test_leftovers();
		test_leftovers_wait_killed();
		test_leftovers_many();
		rm_rf(t_base);
	}
	test_reap_adopted();
	strbuf_release(&c.out);
	return t_done();
}
