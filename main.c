/*
 * main.c - the snapfs daemon: parse the command line, mount, daemonize,
 * start the operations layer, serve until unmounted or signalled.
 *
 * Order matters: ops_open() and the mount come first, so a bad --state,
 * --store, --runsc or mountpoint fails in the foreground with a message;
 * before them, umask(077) and the check of the state directory (root's,
 * 0700, no symlink, below directories only root can change: snapshots are
 * sandbox memory, and runsc is handed paths inside it);
 * fuse_daemonize() forks, so no thread may exist before it, which is why
 * ops_start() (job threads) comes after it, and so do the two threads of
 * this file: the one that hears signals (SIGHUP reopens the log; SIGTERM
 * and SIGINT, caught from the start, stop the daemon once the start-up step
 * in progress ends) and, under systemd (NOTIFY_SOCKET), the one that says
 * READY=1 once the mount answers.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs.h"
#include "lib/sdnotify.h"
#include "lib/size.h"
#include "lib/util.h"
#include "runtime/runsc/cgroup.h"
#include "ops/journal.h"
#include "runtime/net/net.h"
#include "ops/ops.h"
#include "runtime/runsc/runsc.h"

#define DEFAULT_STATE "/var/lib/snapfs"
/* Without --images: STATE/images, made 0700 like everything under STATE. */
#define IMAGES_LEAF "images"

struct options {
	bool foreground;
	const char *state_dir;
	const char *images_dir;
	const char *store_url;
	const char *runsc_bin;
	int64_t cache_max_bytes;
	int64_t gc_grace_ms; /* -1: the default */
	const char *spool_parent;
	const char *allow_group;
	int64_t journal_max_bytes;
	int64_t runsc_timeout_ms; /* 0: the default */
	int64_t exec_timeout_ms;  /* 0: the default */
	const char *cuda_checkpoint;
	const char *cgroup_parent;
	const char *net_pool;	      /* --net-pool; NULL: NET_POOL_DEFAULT */
	const char *net_resolv;	      /* --net-resolv; NULL: /etc/resolv.conf */
	struct resources default_res; /* --default-memory, --default-cpus, --default-pids */
	struct resources max_res;     /* --max-memory, ...; RES_UNSET: the default's */
	unsigned max_sandboxes_per_user;
	unsigned max_ports_per_user;
	int64_t default_timeout_s; /* --default-timeout; 0: none */
	enum timeout_action default_timeout_action;
	const char *publish_address; /* --publish-address; NULL: 127.0.0.1 */
	const char *fuse_opts[16];
	size_t nfuse_opts;
	const char *mountpoint;
};

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: snapfs [-f] [--state DIR] [--images DIR] [--store URL] [--runsc PATH]\n"
	    "              [--cache-max SIZE] [--gc-grace SECONDS] [--spool DIR] [-o FUSE_OPTS]\n"
	    "              [--allow-group GROUP] [--journal-max SIZE]\n"
	    "              [--exec-timeout SECONDS] [--runsc-timeout SECONDS]\n"
	    "              [--cuda-checkpoint PATH] [--cgroup-parent PATH] [--debug]\n"
	    "              [--net-pool CIDR] [--net-resolv FILE]\n"
	    "              [--default-memory SIZE] [--default-cpus N] [--default-pids N]\n"
	    "              [--max-memory SIZE] [--max-cpus N] [--max-pids N]\n"
	    "              [--max-sandboxes-per-user N] [--max-ports-per-user N]\n"
	    "              [--default-timeout SECONDS] [--publish-address ADDRESS]\n"
	    "              MOUNTPOINT\n"
	    "\n"
	    "  -f              stay in the foreground, log to stderr\n"
	    "  --state DIR     registry, spool, cache, runsc root (default %s)\n"
	    "  --images DIR    one root filesystem per subdirectory (default STATE/%s)\n"
	    "  --store URL     file:///path (default STATE/store) or s3://bucket/prefix\n"
	    "  --runsc PATH    the runsc binary (default: runsc on PATH)\n"
	    "  --cache-max SIZE  bound on local snapshot images, e.g. 20G (default: a\n"
	    "                  quarter of the cache plus the free space of its disk)\n"
	    "  --gc-grace SECONDS  how long a pack no snapshot uses waits before it is\n"
	    "                  deleted, for puts of other hosts sharing the store (default:\n"
	    "                  0 for the default store, 3600 for a --store you name)\n"
	    "  --spool DIR     where checkpoints are written before they are stored, e.g. a\n"
	    "                  tmpfs for shorter pauses (default STATE/spool)\n"
	    "  -o OPTS         FUSE mount options. Without allow_other only root may use the\n"
	    "                  mount. With it every local user may, and snapfs adds\n"
	    "                  default_permissions: each user sees only the sandboxes and\n"
	    "                  snapshots it owns (root sees all), the journals are root's\n"
	    "  --allow-group GROUP  who besides root may create sandboxes under\n"
	    "                  allow_other: a group name or gid (default: root only)\n"
	    "  --journal-max SIZE  cap of events.jsonl, errors.jsonl and snapfs.log; past\n"
	    "                  it each becomes NAME.1 and starts again (default 64M)\n"
	    "  --exec-timeout SECONDS  how long a command written to exec may run before it\n"
	    "                  is killed (default %d)\n"
	    "  --runsc-timeout SECONDS  how long any other runsc call may take before it is\n"
	    "                  killed; checkpoint and restore get %d s more per GiB of\n"
	    "                  memory (default %d)\n"
	    "  --cuda-checkpoint PATH  the host's cuda-checkpoint, run in GPU sandboxes\n"
	    "                  (default: cuda-checkpoint on PATH, if any)\n"
	    "  --cgroup-parent PATH  the cgroup under which each sandbox gets its own,\n"
	    "                  outside the daemon's (default %s; docs/cgroups.md)\n"
	    "  --net-pool CIDR  the addresses of sandboxes with network=egress, a /30\n"
	    "                  each (default " NET_POOL_DEFAULT "; docs/network.md)\n"
	    "  --net-resolv FILE  the resolv.conf those sandboxes get (default\n"
	    "                  /etc/resolv.conf)\n"
	    "  --default-memory SIZE  memory of a sandbox that names none (default %s;\n"
	    "                  0: unlimited; docs/limits.md)\n"
	    "  --default-cpus N  CPUs of a sandbox that names none (default %s; 0: unlimited)\n"
	    "  --default-pids N  tasks inside a sandbox that names none (default %s;\n"
	    "                  0: unlimited)\n"
	    "  --max-memory SIZE, --max-cpus N, --max-pids N  the most a user other than\n"
	    "                  root may ask for; only root asks for 0 or more (default:\n"
	    "                  the --default-* value; 0: no bound)\n"
	    "  --max-sandboxes-per-user N  sandboxes a user other than root may own\n"
	    "                  (default %d; 0: no cap)\n"
	    "  --max-ports-per-user N  ports the sandboxes of a user other than root may\n"
	    "                  publish (default %d; 0: no cap)\n"
	    "  --default-timeout SECONDS [terminate|suspend]  the timeout of a sandbox whose\n"
	    "                  spec names none (default 0: none)\n"
	    "  --publish-address ADDRESS  the IPv4 address published ports listen on\n"
	    "                  (default 127.0.0.1; docs/network.md)\n"
	    "  --debug         log every operation\n"
	    "\n"
	    "Unmount with: fusermount3 -u MOUNTPOINT (running sandboxes keep running)\n",
	    DEFAULT_STATE, IMAGES_LEAF, RUNSC_EXEC_TIMEOUT_DEFAULT_MS / 1000,
	    RUNSC_PER_GIB_MS / 1000, RUNSC_TIMEOUT_DEFAULT_MS / 1000, CGROUP_PARENT_DEFAULT,
	    OPS_DEFAULT_MEMORY, OPS_DEFAULT_CPUS, OPS_DEFAULT_PIDS,
	    OPS_DEFAULT_MAX_SANDBOXES_PER_USER, OPS_DEFAULT_MAX_PORTS_PER_USER);
}

/* A size from 1 byte (lib/size.h): "1073741824", "512M", "20G". */
static int parse_size(const char *s, int64_t *out)
{
	int rc = size_parse(s, out);
	return rc < 0 ? rc : *out == 0 ? -EINVAL : 0;
}

/* "0", "3600": whole seconds, at most a year, into milliseconds. */
static int parse_seconds(const char *s, int64_t *out_ms)
{
	char *end = NULL;
	errno = 0;
	unsigned long n = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || n > 366ul * 24 * 3600)
		return -EINVAL;
	*out_ms = (int64_t)n * 1000;
	return 0;
}

/* A deadline: whole seconds, at least 1, at most a year, into milliseconds. */
static int parse_timeout(const char *s, int64_t *out_ms)
{
	if (parse_seconds(s, out_ms) < 0 || *out_ms == 0)
		return -EINVAL;
	return 0;
}

/* --default-memory, --default-cpus, --default-pids (@opt 'M', 'U', 'T') into @r. */
static int parse_default(int opt, const char *value, struct resources *r)
{
	struct err e = {0};
	enum res_kind kind = opt == 'M' ? RES_MEMORY : opt == 'U' ? RES_CPUS : RES_PIDS;
	int rc = res_parse(kind, value, "the command line", r, &e);
	return rc < 0 ? error(-rc, "--default-%s: %s", res_name(kind), e.msg) : 0;
}

/*
 * --max-memory, --max-cpus, --max-pids (@opt 'm', 'u', 't') into @r: a
 * limit's value, 0 for no bound.
 */
static int parse_max(int opt, const char *value, struct resources *r)
{
	struct err e = {0};
	enum res_kind kind = opt == 'm' ? RES_MEMORY : opt == 'u' ? RES_CPUS : RES_PIDS;
	int rc = res_parse(kind, value, "the command line", r, &e);
	return rc < 0 ? error(-rc, "--max-%s: %s", res_name(kind), e.msg) : 0;
}

/* --max-sandboxes-per-user, --max-ports-per-user: a count from 0 (no cap) to a million. */
static int parse_cap(const char *name, const char *value, unsigned *out)
{
	int64_t v = 0;
	if (count_parse(value, &v) < 0 || v > 1000000)
		return error(EINVAL, "--%s: not a whole number from 0 to 1000000: %s", name, value);
	*out = (unsigned)v;
	return 0;
}

/* The embedded defaults (OPS_DEFAULT_*): no sandbox is unlimited unless the operator says so. */
static void default_resources(struct resources *r)
{
	struct err e = {0};
	res_parse(RES_MEMORY, OPS_DEFAULT_MEMORY, "the defaults", r, &e);
	res_parse(RES_CPUS, OPS_DEFAULT_CPUS, "the defaults", r, &e);
	res_parse(RES_PIDS, OPS_DEFAULT_PIDS, "the defaults", r, &e);
}

static int parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
	    {"state", required_argument, NULL, 's'},
	    {"images", required_argument, NULL, 'i'},
	    {"store", required_argument, NULL, 'S'},
	    {"runsc", required_argument, NULL, 'r'},
	    {"cache-max", required_argument, NULL, 'c'},
	    {"gc-grace", required_argument, NULL, 'g'},
	    {"spool", required_argument, NULL, 'p'},
	    {"allow-group", required_argument, NULL, 'G'},
	    {"journal-max", required_argument, NULL, 'j'},
	    {"exec-timeout", required_argument, NULL, 'E'},
	    {"runsc-timeout", required_argument, NULL, 'R'},
	    {"cuda-checkpoint", required_argument, NULL, 'C'},
	    {"cgroup-parent", required_argument, NULL, 'P'},
	    {"net-pool", required_argument, NULL, 'N'},
	    {"net-resolv", required_argument, NULL, 'D'},
	    {"default-memory", required_argument, NULL, 'M'},
	    {"default-cpus", required_argument, NULL, 'U'},
	    {"default-pids", required_argument, NULL, 'T'},
	    {"max-memory", required_argument, NULL, 'm'},
	    {"max-cpus", required_argument, NULL, 'u'},
	    {"max-pids", required_argument, NULL, 't'},
	    {"max-sandboxes-per-user", required_argument, NULL, 'n'},
	    {"max-ports-per-user", required_argument, NULL, 'q'},
	    {"default-timeout", required_argument, NULL, 'L'},
	    {"publish-address", required_argument, NULL, 'A'},
	    {"debug", no_argument, NULL, 'd'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	o->state_dir = DEFAULT_STATE;
	o->gc_grace_ms = -1;
	default_resources(&o->default_res);
	o->max_res = (struct resources){RES_UNSET, RES_UNSET, RES_UNSET};
	o->max_sandboxes_per_user = OPS_DEFAULT_MAX_SANDBOXES_PER_USER;
	o->max_ports_per_user = OPS_DEFAULT_MAX_PORTS_PER_USER;
	for (;;) {
		int c = getopt_long(argc, argv, "fo:h", longopts, NULL);
		if (c == -1)
			break;
		switch (c) {
		case 'f':
			o->foreground = true;
			break;
		case 's':
			o->state_dir = optarg;
			break;
		case 'i':
			o->images_dir = optarg;
			break;
		case 'S':
			o->store_url = optarg;
			break;
		case 'r':
			o->runsc_bin = optarg;
			break;
		case 'c':
			if (parse_size(optarg, &o->cache_max_bytes) < 0)
				return error(EINVAL, "--cache-max: not a size: %s", optarg);
			break;
		case 'g':
			if (parse_seconds(optarg, &o->gc_grace_ms) < 0)
				return error(EINVAL, "--gc-grace: not a number of seconds: %s",
					     optarg);
			break;
		case 'p':
			o->spool_parent = optarg;
			break;
		case 'G':
			o->allow_group = optarg;
			break;
		case 'j':
			if (parse_size(optarg, &o->journal_max_bytes) < 0)
				return error(EINVAL, "--journal-max: not a size: %s", optarg);
			break;
		case 'E':
			if (parse_timeout(optarg, &o->exec_timeout_ms) < 0)
				return error(EINVAL,
					     "--exec-timeout: not a number of seconds from 1: %s",
					     optarg);
			break;
		case 'R':
			if (parse_timeout(optarg, &o->runsc_timeout_ms) < 0)
				return error(EINVAL,
					     "--runsc-timeout: not a number of seconds from 1: %s",
					     optarg);
			break;
		case 'C':
			o->cuda_checkpoint = optarg;
			break;
		case 'P':
			o->cgroup_parent = optarg;
			break;
		case 'N': /* the network's two paths */
		case 'D':
			*(c == 'N' ? &o->net_pool : &o->net_resolv) = optarg;
			break;
		case 'M':
		case 'U':
		case 'T':
			if (parse_default(c, optarg, &o->default_res) < 0)
				return -EINVAL;
			break;
		case 'm':
		case 'u':
		case 't':
			if (parse_max(c, optarg, &o->max_res) < 0)
				return -EINVAL;
			break;
		case 'n':
			if (parse_cap("max-sandboxes-per-user", optarg,
				      &o->max_sandboxes_per_user) < 0)
				return -EINVAL;
			break;
		case 'q':
			if (parse_cap("max-ports-per-user", optarg, &o->max_ports_per_user) < 0)
				return -EINVAL;
			break;
		case 'L': {
			struct err e = {0};
			if (ops_timeout_parse(optarg, &o->default_timeout_s,
					      &o->default_timeout_action, &e) < 0)
				return error(EINVAL, "--default-timeout: %s", e.msg);
			break;
		}
		case 'A':
			o->publish_address = optarg;
			break;
		case 'd':
			log_debug_enabled = true;
			break;
		case 'o':
			if (o->nfuse_opts == ARRAY_SIZE(o->fuse_opts))
				return error(EINVAL, "too many -o options");
			o->fuse_opts[o->nfuse_opts++] = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("snapfs %s\n", SNAPFS_VERSION);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return -EINVAL;
	}
	o->mountpoint = argv[optind];
	/* A bound not given is the default: a user asks for no more than a sandbox gets. */
	for (enum res_kind k = RES_MEMORY; k <= RES_PIDS; k++)
		if (res_get(&o->max_res, k) == RES_UNSET)
			res_set(&o->max_res, k, res_get(&o->default_res, k));
	return 0;
}

/*
 * The default images directory: made 0700, or one of ours an earlier
 * version made 0755 tightened. Images are no secret, but then nothing under
 * the state directory is open to others. A symlink or another owner's
 * directory is the operator's doing and kept as it is.
 */
static void make_default_images(int state_fd, const char *path)
{
	if (mkdirat(state_fd, IMAGES_LEAF, 0700) < 0 && errno != EEXIST)
		return; /* images_open() says why */
	_cleanup_close_ int fd =
	    openat(state_fd, IMAGES_LEAF, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_uid == geteuid())
		dir_tighten(fd, path, st.st_mode, NULL);
}

/*
 * The state directory, made ours alone (private_dir_open: created 0700, an
 * existing one of ours from an earlier version tightened to 0700, a symlink
 * or another user's refused), and from then on named by its canonical
 * path; the default images directory inside it.
 */
static int open_state(struct options *o, char state[PATH_MAX], char images[PATH_MAX])
{
	struct err e = {0};
	_cleanup_close_ int fd = private_dir_open(o->state_dir, state, &e);
	if (fd < 0)
		return error(-fd, "cannot use the state directory %s: %s", o->state_dir, e.msg);
	o->state_dir = state;
	if (o->images_dir)
		return 0;
	if (xsnprintf(images, PATH_MAX, "%s/%s", state, IMAGES_LEAF) < 0)
		return error(ENAMETOOLONG, "the state directory's path %s is too long", state);
	make_default_images(fd, images);
	o->images_dir = images;
	return 0;
}

/* Paths must survive the chdir("/") of fuse_daemonize(). */
static int make_absolute(const char **path, char *buf)
{
	if ((*path)[0] == '/')
		return 0;
	if (!realpath(*path, buf))
		return error(errno, "cannot resolve %s: %s", *path, strerror(errno));
	*path = buf;
	return 0;
}

static int build_fuse_args(const struct options *o, struct fuse_args *args)
{
	int rc = fuse_opt_add_arg(args, "snapfs");
	rc |= fuse_opt_add_arg(args, "-o");
	rc |= fuse_opt_add_arg(args, "fsname=snapfs,subtype=snapfs");
	for (size_t i = 0; i < o->nfuse_opts; i++) {
		rc |= fuse_opt_add_arg(args, "-o");
		rc |= fuse_opt_add_arg(args, o->fuse_opts[i]);
	}
	return rc ? error(ENOMEM, "out of memory building FUSE arguments") : 0;
}

/* In the background, log to <state>/snapfs.log instead of /dev/null, capped as the journals. */
static void redirect_log(const char *state_dir, int64_t max_bytes)
{
	char path[PATH_MAX];
	if (xsnprintf(path, sizeof(path), "%s/snapfs.log", state_dir) < 0)
		return;
	log_to_file(path, max_bytes > 0 ? max_bytes : JOURNAL_MAX_DEFAULT);
}

/*
 * Signals, from the start (before ops_open()) to the end. The handler only
 * writes a byte to a pipe, and for SIGTERM and SIGINT sets stop_requested
 * and ends the loop if it runs (fs_exit(), what libfuse's own handler
 * does); libfuse, which sets its handlers only where a signal has the
 * default action, leaves these three to us. A thread reads the pipe:
 * SIGHUP reopens snapfs.log (after logrotate or a mv: that takes a lock,
 * which a signal handler may not), SIGTERM and SIGINT are logged. Before
 * this, SIGTERM during the start (reconcile, the store, runsc probes: after
 * the mount) had its default action and killed the daemon mid-step,
 * leaving a mount that answers ENOTCONN; now the step in progress ends,
 * and serve() unmounts and exits 0 instead of entering the loop.
 */
static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t stop_requested;
static struct fs *volatile loop_fs; /* set once the loop may run */

static void on_signal(int sig)
{
	int saved = errno;
	char c = (char)sig;
	if (sig != SIGHUP) {
		stop_requested = 1;
		struct fs *fs = loop_fs;
		if (fs)
			fs_exit(fs);
	}
	/* Non-blocking: a full pipe already holds a reopen to do. */
	ssize_t n = write(sig_pipe[1], &c, 1);
	(void)n;
	errno = saved;
}

/*
 * @restart: SA_RESTART for SIGTERM and SIGINT, so a start-up step's
 * syscalls go on. The loop waits in sem_wait(), which SA_RESTART would
 * restart: serve() takes it off before the loop, as libfuse's handlers have
 * it off, so the signal wakes the loop. SIGHUP always restarts.
 */
static int catch_signals(bool restart)
{
	struct sigaction hup = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
	struct sigaction stop = {.sa_handler = on_signal, .sa_flags = restart ? SA_RESTART : 0};
	if (sig_pipe[0] < 0 &&
	    (pipe2(sig_pipe, O_CLOEXEC) < 0 || fcntl(sig_pipe[1], F_SETFL, O_NONBLOCK) < 0))
		return error(errno, "cannot make the signal pipe: %s", strerror(errno));
	if (sigaction(SIGHUP, &hup, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
	    sigaction(SIGINT, &stop, NULL) < 0)
		return error(errno, "cannot catch SIGHUP, SIGTERM and SIGINT: %s", strerror(errno));
	return 0;
}

static void *signal_thread(void *arg)
{
	char c;
	(void)arg;
	for (;;) {
		ssize_t n = read(sig_pipe[0], &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return NULL;
		if (c != SIGHUP) {
			info("%s: stopping%s", c == SIGTERM ? "SIGTERM" : "SIGINT",
			     loop_fs ? "" : " once the start-up step in progress ends");
			continue;
		}
		int rc = log_reopen();
		if (rc < 0)
			warning("SIGHUP: cannot reopen the log: %s", strerror(-rc));
		else
			info("SIGHUP: %s",
			     rc ? "log reopened" : "logging to stderr, nothing to reopen");
	}
}

/* READY=1 once a lookup in the mount is answered: systemd then starts what needs it. */
static void *ready_thread(void *arg)
{
	const char *mountpoint = arg;
	char path[PATH_MAX];
	struct stat st;
	if (xsnprintf(path, sizeof(path), "%s/version", mountpoint) < 0) {
		warning("the mount's path %s is too long, not ready", mountpoint);
		return NULL;
	}
	if (stat(path, &st) < 0) {
		warning("the mount %s does not answer, not ready: %s", mountpoint, strerror(errno));
		return NULL;
	}
	int rc = sdnotify("READY=1");
	if (rc < 0)
		warning("cannot tell systemd it is ready: %s", strerror(-rc));
	else
		info("mounted at %s, ready", mountpoint);
	return NULL;
}

/* A detached thread of this file's; failing to start one is logged, not fatal. */
static void spawn_detached(void *(*fn)(void *), void *arg, const char *what)
{
	pthread_t t;
	int rc = pthread_create(&t, NULL, fn, arg);
	if (rc != 0)
		warning("cannot start the %s thread: %s", what, strerror(rc));
	else
		pthread_detach(t);
}

static int serve(struct options *o, struct fuse_args *args, bool notify)
{
	struct err e = {0};
	bool served = false;
	struct fs *fs = NULL;
	struct ops_config cfg = {
	    .state_dir = o->state_dir,
	    .images_dir = o->images_dir,
	    .store_url = o->store_url,
	    .runsc_bin = o->runsc_bin,
	    .cache_max_bytes = o->cache_max_bytes,
	    .gc_grace_ms = o->gc_grace_ms,
	    .spool_parent = o->spool_parent,
	    .allow_group = o->allow_group,
	    .journal_max_bytes = o->journal_max_bytes,
	    .runsc_timeout_ms = o->runsc_timeout_ms,
	    .exec_timeout_ms = o->exec_timeout_ms,
	    .cuda_checkpoint = o->cuda_checkpoint,
	    .cgroup_parent = o->cgroup_parent,
	    .net_pool = o->net_pool,
	    .net_resolv = o->net_resolv,
	    .default_res = o->default_res,
	    .max_res = o->max_res,
	    .max_sandboxes_per_user = o->max_sandboxes_per_user,
	    .max_ports_per_user = o->max_ports_per_user,
	    .default_timeout_s = o->default_timeout_s,
	    .default_timeout_action = o->default_timeout_action,
	    .publish_address = o->publish_address,
	};
	int rc = ops_open(&cfg, &e);
	if (rc < 0) {
		error(-rc, "cannot start: %s", e.msg);
		goto out;
	}
	/* A stop asked for during a start-up step: that step ended, no other begins. */
	if (stop_requested)
		goto stopping;
	rc = fs_create(o->mountpoint, args, &fs, &e);
	if (rc < 0) {
		error(-rc, "cannot mount %s: %s", o->mountpoint, e.msg);
		goto out;
	}
	if (!o->foreground) {
		fuse_daemonize(0);
		redirect_log(o->state_dir, o->journal_max_bytes);
	}
	spawn_detached(signal_thread, NULL, "signal");
	if (stop_requested)
		goto stopping;
	rc = ops_start(&e);
	if (rc < 0) {
		error(-rc, "cannot start: %s", e.msg);
		goto out;
	}
	/* From here a SIGTERM ends the loop (fs_exit()), before it starts or while it runs. */
	rc = catch_signals(false);
	if (rc < 0)
		goto out;
	loop_fs = fs;
	if (stop_requested)
		goto stopping;
	if (notify)
		spawn_detached(ready_thread, (void *)o->mountpoint, "readiness");
	served = true;
	rc = fs_loop(fs);
stopping:
	/*
	 * Stopping. systemd sends SIGTERM after ExecStop's unmount returns, while
	 * this shutdown runs: it must not cut it short (SIGKILL still does).
	 */
	if (!served)
		info("stopped during the start: %s", fs ? "unmounting" : "not mounting");
	loop_fs = NULL;
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	sdnotify("STOPPING=1");
out:
	ops_shutdown();
	if (fs)
		fs_destroy(fs);
	return rc;
}

int main(int argc, char **argv)
{
	struct options o = {0};
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	char state[PATH_MAX], images_default[PATH_MAX], images_abs[PATH_MAX], mount_abs[PATH_MAX];
	char cuda_abs[PATH_MAX], resolv_abs[PATH_MAX];
	/* runsc with a network runs through this binary: runtime/net/net.h net_exec_main(). */
	if (argc > 1 && strcmp(argv[1], NET_EXEC_FLAG) == 0)
		return net_exec_main(argc, argv);
	log_init();
	int notify = sdnotify_init();
	if (notify < 0)
		warning("NOTIFY_SOCKET names no unix socket: systemd will not hear of readiness");
	if (parse_options(argc, argv, &o) < 0)
		return 2;
	/* Whatever this process and its runsc children create is theirs alone. */
	umask(077);
	if (open_state(&o, state, images_default) < 0 ||
	    make_absolute(&o.images_dir, images_abs) < 0 ||
	    make_absolute(&o.mountpoint, mount_abs) < 0 ||
	    (o.cuda_checkpoint && make_absolute(&o.cuda_checkpoint, cuda_abs) < 0) ||
	    (o.net_resolv && make_absolute(&o.net_resolv, resolv_abs) < 0) ||
	    build_fuse_args(&o, &args) < 0 || catch_signals(true) < 0)
		return 1;
	int rc = serve(&o, &args, notify > 0);
	fuse_opt_free_args(&args);
	return rc < 0 ? 1 : 0;
}
