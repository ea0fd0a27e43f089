#include "lib/spawn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/util.h"

#define READ_CHUNK (16u << 10)
/* Where the child's fds wait before they are moved to 1, 2 and 3: above any of those. */
#define HIGH_FD 10
/* A record's text: a boot id (36), a start time and a deadline (20 digits each). */
#define RECORD_MAX 128
#define BOOT_ID_MAX 40
/* How long a leftover killed at its deadline is waited for to end. */
#define LEFTOVER_KILL_WAIT_MS 5000

/* Calls in flight and the tags cancelled, under one lock that spawn and cancel share. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct spawn *inflight;
static char cancelled[SPAWN_CANCELLED_MAX][SPAWN_TAG_MAX];
static size_t cancelled_next;
/*
 * The children this process made and reaps itself (spawn_run(), spawn_fork()),
 * from their start to their reaping, under the same lock: spawn_reap_adopted()
 * leaves them alone.
 */
static pid_t *owned;
static size_t owned_n, owned_cap;

/* Under the lock: room for one more owned child. */
static int owned_room_locked(void)
{
	if (owned_n < owned_cap)
		return 0;
	size_t cap = owned_cap ? owned_cap * 2 : 16;
	pid_t *p = realloc(owned, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	owned = p;
	owned_cap = cap;
	return 0;
}

static bool owned_locked(pid_t pid)
{
	for (size_t i = 0; i < owned_n; i++)
		if (owned[i] == pid)
			return true;
	return false;
}

/* After its reaping: the pid may be another process's now. */
static void disown(pid_t pid)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < owned_n; i++) {
		if (owned[i] == pid) {
			owned[i] = owned[--owned_n];
			break;
		}
	}
	pthread_mutex_unlock(&lock);
}

static bool tag_cancelled(const char *tag)
{
	for (size_t i = 0; i < SPAWN_CANCELLED_MAX; i++)
		if (!strcmp(cancelled[i], tag))
			return true;
	return false;
}

static void remember_cancelled(const char *tag)
{
	if (tag_cancelled(tag))
		return;
	snprintf(cancelled[cancelled_next], SPAWN_TAG_MAX, "%s", tag);
	cancelled_next = (cancelled_next + 1) % SPAWN_CANCELLED_MAX;
}

/* The group first; the child itself too, should it have left its group. */
static void kill_group(pid_t pid)
{
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
}

pid_t spawn_fork(void)
{
	pthread_mutex_lock(&lock);
	pid_t pid = owned_room_locked() < 0 ? (errno = ENOMEM, -1) : fork();
	if (pid > 0)
		owned[owned_n++] = pid;
	pthread_mutex_unlock(&lock);
	return pid;
}

int spawn_wait(pid_t pid, int *status)
{
	int rc;
	while ((rc = waitpid(pid, status, 0)) < 0 && errno == EINTR)
		;
	int err = rc < 0 ? -errno : 0;
	disown(pid);
	return err;
}

int spawn_become_reaper(void)
{
	return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0 ? -errno : 0;
}

/*
 * One ended child nobody else reaps: peek at the first ended child
 * (WNOWAIT), and reap it only if it is not owned; all under the lock, so
 * a child spawned meanwhile is owned before it can be seen. 1 reaped
 * (@pid, @code), 0 none (or an owned one is first: its owner reaps it
 * in a moment, and the next call goes on).
 */
static int reap_one(pid_t *pid, int *code)
{
	siginfo_t si = {0};
	pthread_mutex_lock(&lock);
	int rc = waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT | __WALL);
	bool adopted = rc == 0 && si.si_pid > 0 && !owned_locked(si.si_pid);
	if (adopted) {
		siginfo_t done = {0};
		adopted = waitid(P_PID, (id_t)si.si_pid, &done, WEXITED | WNOHANG | __WALL) == 0 &&
			  done.si_pid == si.si_pid;
	}
	pthread_mutex_unlock(&lock);
	if (!adopted)
		return 0;
	*pid = si.si_pid;
	*code = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
	return 1;
}

int spawn_reap_adopted(void (*fn)(pid_t pid, int code, void *arg), void *arg)
{
	int n = 0;
	pid_t pid;
	int code;
	while (n < SPAWN_REAP_MAX && reap_one(&pid, &code)) {
		n++;
		if (fn)
			fn(pid, code, arg);
	}
	return n;
}

int spawn_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

static int child_attrs(posix_spawnattr_t *attr)
{
	sigset_t none, dfl;
	sigemptyset(&none);
	sigemptyset(&dfl);
	/* libfuse ignores SIGPIPE and a daemon may block signals; the child gets neither. */
	sigaddset(&dfl, SIGPIPE);
	sigaddset(&dfl, SIGINT);
	sigaddset(&dfl, SIGTERM);
	sigaddset(&dfl, SIGHUP);
	sigaddset(&dfl, SIGQUIT);
	int rc = posix_spawnattr_setsigmask(attr, &none);
	if (rc == 0)
		rc = posix_spawnattr_setsigdefault(attr, &dfl);
	/*
	 * Its own session, so its own process group: a Ctrl-C at a foreground
	 * daemon does not reach it, and a kill of the group reaches all of it.
	 */
	if (rc == 0)
		rc = posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
							POSIX_SPAWN_SETSID);
	return -rc;
}

/* Copies above HIGH_FD, so no dup2 below moves one onto another or onto itself. */
struct child_fds {
	int in, out, err; /* in: -1 for /dev/null */
	int pass[SPAWN_PASS_MAX];
	size_t npass;
};

static void close_reset(int *fd)
{
	closep(fd);
	*fd = -1;
}

static void child_fds_close(struct child_fds *f)
{
	close_reset(&f->in);
	close_reset(&f->out);
	close_reset(&f->err);
	for (size_t i = 0; i < f->npass; i++)
		close_reset(&f->pass[i]);
}

/*
 * The child's stderr when it is its stdout: a pipe or FIFO gets an open file
 * description of its own. gVisor makes each host fd it is handed
 * non-blocking and records the flags it found first: with one description
 * for both, the second of the two it takes in may look non-blocking to the
 * sandbox's process, whose writes then fail with EAGAIN when the pipe is
 * full (seen with `runsc exec`: docs/runsc-notes.md).
 */
static int dup_err(int out)
{
	char path[64];
	struct stat st;
	if (fstat(out, &st) == 0 && S_ISFIFO(st.st_mode)) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", out);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			int high = fcntl(fd, F_DUPFD_CLOEXEC, HIGH_FD);
			close(fd);
			return high;
		}
	}
	return fcntl(out, F_DUPFD_CLOEXEC, HIGH_FD);
}

static int child_fds_dup(struct child_fds *f, int out, int err, const struct spawn *s)
{
	f->in = s->stdin_fd > 0 ? fcntl(s->stdin_fd, F_DUPFD_CLOEXEC, HIGH_FD) : -1;
	bool ok = s->stdin_fd <= 0 || f->in >= 0;
	f->out = fcntl(out, F_DUPFD_CLOEXEC, HIGH_FD);
	f->err = err >= 0 ? fcntl(err, F_DUPFD_CLOEXEC, HIGH_FD) : dup_err(out);
	for (f->npass = 0; f->npass < s->npass; f->npass++) {
		f->pass[f->npass] = fcntl(s->pass[f->npass], F_DUPFD_CLOEXEC, HIGH_FD);
		ok = ok && f->pass[f->npass] >= 0;
	}
	if (f->out < 0 || f->err < 0 || !ok) {
		int rc = -errno;
		child_fds_close(f);
		return rc;
	}
	return 0;
}

static int child_files(posix_spawn_file_actions_t *fa, const struct child_fds *f)
{
	int rc = f->in >= 0 ? posix_spawn_file_actions_adddup2(fa, f->in, 0)
			    : posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0);
	if (rc == 0)
		rc = posix_spawn_file_actions_adddup2(fa, f->out, 1);
	if (rc == 0)
		rc = posix_spawn_file_actions_adddup2(fa, f->err, 2);
	for (size_t i = 0; rc == 0 && i < f->npass; i++)
		rc = posix_spawn_file_actions_adddup2(fa, f->pass[i], 3 + (int)i);
	/* The child keeps nothing else of ours: not /dev/fuse, no other fd. */
	if (rc == 0)
		rc = posix_spawn_file_actions_addclosefrom_np(fa, 3 + (int)f->npass);
	return -rc;
}

/* --- records of running children (spawn.h) -------------------------------- */

static int64_t boot_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The start of a /proc file (its size says 0) into @buf, NUL-terminated; "" if unreadable. */
static void read_proc(const char *path, char *buf, size_t len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
}

/* This boot's id, "" if the kernel cannot say. */
static void boot_id(char out[BOOT_ID_MAX])
{
	read_proc("/proc/sys/kernel/random/boot_id", out, BOOT_ID_MAX);
	out[strcspn(out, "\n")] = '\0';
}

/* Field 22 of /proc/@pid/stat, the start time in ticks since boot; 0 if it is gone. */
static unsigned long long start_time(pid_t pid)
{
	char path[64], text[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	read_proc(path, text, sizeof(text));
	/* After the command's ")" (it may hold spaces and parentheses): field 3 on. */
	const char *p = strrchr(text, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

static int record_path(const char *dir, pid_t pid, char path[PATH_MAX])
{
	return xsnprintf(path, PATH_MAX, "%s/%d", dir, (int)pid);
}

/* Not durable: it is for a killed daemon, not a host that went down (its children went too). */
static void record_write(const struct spawn *s)
{
	char path[PATH_MAX], text[RECORD_MAX], boot[BOOT_ID_MAX];
	if (!s->record_dir || record_path(s->record_dir, s->pid_, path) < 0)
		return;
	boot_id(boot);
	int n = snprintf(text, sizeof(text), "%s %llu %lld\n", boot, start_time(s->pid_),
			 (long long)(boot_ms() + s->timeout_ms));
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write_all(fd, text, (size_t)n) < 0)
		warning("spawn %s: cannot record pid %d in %s: %s", s->argv[0], (int)s->pid_,
			s->record_dir, strerror(errno));
}

static void record_remove(const struct spawn *s)
{
	char path[PATH_MAX];
	if (s->record_dir && record_path(s->record_dir, s->pid_, path) >= 0)
		unlink(path);
}

struct leftover {
	pid_t pid;
	int pidfd;
	int64_t deadline; /* CLOCK_BOOTTIME ms */
	char name[24];	  /* its record's, removed once it ended */
};

/*
 * The record @name in @dfd, if it names a process of this boot that still
 * runs with the start time recorded: a pidfd on it in @l. The start time is
 * read again once the pidfd is open, so the pidfd is the recorded process.
 */
static bool leftover_open(int dfd, const char *name, const char *boot, struct leftover *l)
{
	char text[RECORD_MAX] = "", rboot[BOOT_ID_MAX] = "";
	unsigned long long started = 0;
	long long deadline = 0;
	char *end = NULL;
	long pid = strtol(name, &end, 10);
	if (!end || *end || pid <= 0 || pid > INT_MAX || strlen(name) >= sizeof(l->name))
		return false;
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text) - 1);
	if (n <= 0 || sscanf(text, "%39s %llu %lld", rboot, &started, &deadline) != 3 ||
	    strcmp(rboot, boot) != 0 || started == 0 || start_time((pid_t)pid) != started)
		return false;
	l->pid = (pid_t)pid;
	l->deadline = deadline;
	strcpy(l->name, name);
	l->pidfd = pidfd_open(l->pid, 0);
	if (l->pidfd >= 0 && start_time(l->pid) == started)
		return true;
	if (l->pidfd >= 0)
		close(l->pidfd);
	return false;
}

/* Wait until every one in @l has ended or @until (CLOCK_BOOTTIME ms) passed; how many run on. */
static size_t leftovers_poll(struct leftover *l, size_t n, int64_t until)
{
	struct pollfd p[SPAWN_LEFTOVERS_MAX];
	size_t running = n;
	for (size_t i = 0; i < n; i++)
		p[i] = (struct pollfd){.fd = l[i].pidfd, .events = POLLIN};
	while (running > 0) {
		int64_t left = until - boot_ms();
		int rc = poll(p, n, left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left);
		if (rc < 0 && errno != EINTR)
			break;
		for (size_t i = 0; rc > 0 && i < n; i++) {
			if (p[i].fd >= 0 && p[i].revents) {
				p[i].fd = -1; /* poll skips it from now on */
				running--;
			}
		}
		if (rc == 0 && left <= 0)
			break;
	}
	for (size_t i = 0; i < n; i++) {
		if (p[i].fd < 0 && l[i].pidfd >= 0) {
			close(l[i].pidfd);
			l[i].pidfd = -1; /* ended: not to be killed */
		}
	}
	return running;
}

/*
 * Wait for the @n in @l until the last one's deadline, never past @cap (0:
 * no cap), then kill the rest. A record goes only once its process ended:
 * a successor killed during this wait finds the ones still running.
 */
static void leftovers_end(int dfd, struct leftover *l, size_t n, int64_t cap)
{
	int64_t until = 0;
	for (size_t i = 0; i < n; i++)
		if (l[i].deadline > until)
			until = l[i].deadline;
	if (cap > 0 && until > cap)
		until = cap;
	info("waiting for %zu runsc calls a killed snapfs left running", n);
	size_t left = leftovers_poll(l, n, until);
	for (size_t i = 0; i < n; i++) {
		if (l[i].pidfd < 0)
			continue;
		warning("killing pid %d, left running by a killed snapfs: its wait is over",
			(int)l[i].pid);
		/* The group is its own (setsid), and still there while its leader lives. */
		pidfd_send_signal(l[i].pidfd, SIGKILL, NULL, 0);
		kill(-l[i].pid, SIGKILL);
	}
	if (left > 0)
		leftovers_poll(l, n, boot_ms() + LEFTOVER_KILL_WAIT_MS);
	for (size_t i = 0; i < n; i++) {
		if (l[i].pidfd >= 0)
			warning("pid %d outlived its SIGKILL: its record stays", (int)l[i].pid);
		else
			unlinkat(dfd, l[i].name, 0);
		closep(&l[i].pidfd);
	}
}

int spawn_leftovers_wait(const char *dir, int64_t max_wait_ms)
{
	struct leftover l[SPAWN_LEFTOVERS_MAX];
	char boot[BOOT_ID_MAX];
	size_t n = 0;
	int found = 0;
	int64_t cap = max_wait_ms > 0 ? boot_ms() + max_wait_ms : 0;
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	boot_id(boot);
	for (struct dirent *de; (de = readdir(d));) {
		if (de->d_name[0] == '.')
			continue;
		if (!leftover_open(dirfd(d), de->d_name, boot, &l[n])) {
			unlinkat(dirfd(d), de->d_name, 0); /* it ended, or is not ours */
			continue;
		}
		found++;
		if (++n == SPAWN_LEFTOVERS_MAX) { /* a batch; the entries read stay read */
			leftovers_end(dirfd(d), l, n, cap);
			n = 0;
		}
	}
	if (n > 0)
		leftovers_end(dirfd(d), l, n, cap);
	closedir(d);
	return found;
}

/*
 * Start @s's child and enter it in the list of calls in flight, both under
 * the lock, so a spawn_cancel() either sees it or came before and refuses it.
 */
static int start(struct spawn *s, const struct child_fds *f)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	int rc = child_files(&fa, f);
	if (rc == 0)
		rc = child_attrs(&attr);
	pthread_mutex_lock(&lock);
	if (rc == 0 && s->tag && s->refuse_cancelled && tag_cancelled(s->tag)) {
		s->cancelled_ = true;
	} else if (rc == 0 && (rc = owned_room_locked()) == 0) {
		rc = -posix_spawnp(&s->pid_, s->argv[0], &fa, &attr, (char *const *)s->argv,
				   s->envp);
		if (rc == 0) {
			s->next_ = inflight;
			inflight = s;
			owned[owned_n++] = s->pid_;
		}
	}
	pthread_mutex_unlock(&lock);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (rc == 0 && s->pid_ > 0)
		record_write(s);
	return rc;
}

/* Out of the list before the child is reaped: its pid must not be killed once reused. */
static bool finish(struct spawn *s)
{
	pthread_mutex_lock(&lock);
	for (struct spawn **pp = &inflight; *pp; pp = &(*pp)->next_) {
		if (*pp == s) {
			*pp = s->next_;
			break;
		}
	}
	bool was_cancelled = s->cancelled_;
	pthread_mutex_unlock(&lock);
	return was_cancelled;
}

/* One read of @fd into the sink: 1 data or nothing yet, 0 EOF, -1 the sink said stop. */
static int read_once(struct spawn *s, int fd, char *buf)
{
	ssize_t n = read(fd, buf, READ_CHUNK);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 1 : 0;
	if (n == 0)
		return 0;
	if (s->sink && s->sink(s->sink_arg, buf, (size_t)n) != 0)
		return -1;
	return 1;
}

/* After the child exited: what @fd holds now, never waiting for more. */
static void drain(struct spawn *s, int fd, char *buf)
{
	size_t total = 0;
	while (total < SPAWN_DRAIN_MAX) {
		ssize_t n = read(fd, buf, READ_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		total += (size_t)n;
		if (s->sink && s->sink(s->sink_arg, buf, (size_t)n) != 0)
			return;
	}
}

/* Read @fd (-1: none) until the child exits, the deadline passes or the sink says stop. */
static enum spawn_end pump(struct spawn *s, int pidfd, int fd)
{
	char buf[READ_CHUNK];
	int64_t deadline = mono_ms() + s->timeout_ms;
	bool reading = fd >= 0;
	for (;;) {
		struct pollfd p[2] = {{.fd = pidfd, .events = POLLIN},
				      {.fd = fd, .events = POLLIN}};
		int64_t left = deadline - mono_ms();
		if (left <= 0)
			return SPAWN_TIMED_OUT;
		int n = poll(p, reading ? 2 : 1, left > INT_MAX ? INT_MAX : (int)left);
		if (n < 0 && errno != EINTR) {
			warning("spawn %s: poll: %s; killing it", s->argv[0], strerror(errno));
			return SPAWN_TIMED_OUT;
		}
		if (n > 0 && reading && p[1].revents) {
			int r = read_once(s, fd, buf);
			if (r < 0)
				return SPAWN_STOPPED;
			reading = r > 0;
		}
		if (n > 0 && (p[0].revents & POLLIN))
			break;
	}
	if (reading)
		drain(s, fd, buf);
	return SPAWN_EXITED;
}

/* Wait for the child, whatever signal arrives. */
static void reap(struct spawn *s)
{
	while (waitpid(s->pid_, &s->status, 0) < 0 && errno == EINTR)
		;
	disown(s->pid_);
}

static int run_started(struct spawn *s, int fd)
{
	int pidfd = pidfd_open(s->pid_, 0);
	int rc = 0;
	if (pidfd < 0) {
		rc = -errno;
		kill_group(s->pid_);
		s->end = SPAWN_TIMED_OUT;
	} else {
		s->end = pump(s, pidfd, fd);
		if (s->end != SPAWN_EXITED)
			kill_group(s->pid_);
		close(pidfd);
	}
	if (finish(s))
		s->end = SPAWN_CANCELLED;
	/* Before the reap: until then the pid cannot be another's. */
	record_remove(s);
	reap(s);
	return rc;
}

int spawn_run(struct spawn *s)
{
	int pipefd[2] = {-1, -1};
	struct child_fds f = {.in = -1, .out = -1, .err = -1};
	int fd = s->in_fd;
	int64_t t0 = mono_ms();
	s->end = SPAWN_EXITED;
	s->status = 0;
	s->pid_ = 0;
	s->cancelled_ = false;
	if (s->timeout_ms <= 0 || s->npass > SPAWN_PASS_MAX ||
	    (s->tag && strlen(s->tag) >= SPAWN_TAG_MAX))
		return -EINVAL;
	if (s->out_fd < 0) {
		if (pipe2(pipefd, O_CLOEXEC) < 0)
			return -errno;
		fd = pipefd[0];
	}
	int out = s->out_fd >= 0 ? s->out_fd : pipefd[1];
	int rc = child_fds_dup(&f, out, s->err_fd, s);
	if (rc == 0 && fd >= 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
		rc = -errno;
	if (rc == 0)
		rc = start(s, &f);
	/* Only the child holds its ends now: its exit (and its children's) ends the pipe. */
	child_fds_close(&f);
	close_reset(&pipefd[1]);
	/*
	 * Refused: it never started (no pid). Not s->cancelled_: a cancel may
	 * set that, from another thread, the moment the lock was released, and
	 * a started child must still be waited for, reaped and unlisted.
	 */
	if (rc == 0 && s->pid_ == 0)
		s->end = SPAWN_CANCELLED;
	else if (rc == 0)
		rc = run_started(s, fd);
	closep(&pipefd[0]);
	s->ran_ms = mono_ms() - t0;
	return rc;
}

int spawn_cancel(const char *tag)
{
	int n = 0;
	if (!tag || strlen(tag) >= SPAWN_TAG_MAX)
		return 0;
	pthread_mutex_lock(&lock);
	remember_cancelled(tag);
	for (struct spawn *s = inflight; s; s = s->next_) {
		if (s->tag && !strcmp(s->tag, tag)) {
			s->cancelled_ = true;
			kill_group(s->pid_);
			n++;
		}
	}
	pthread_mutex_unlock(&lock);
	return n;
}
