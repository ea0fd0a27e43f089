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
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs.h"
#include "lib/cli.h"
#include "lib/sdnotify.h"
#include "lib/size.h"
#include "lib/util.h"
#include "runtime/runsc/cgroup.h"
#include "backend/journal/journal.h"
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
	const char *agent;
	const char *cgroup_parent;
	const char *net_pool;	      /* --net-pool; NULL: NET_POOL_DEFAULT */
	const char *net_resolv;	      /* --net-resolv; NULL: /etc/resolv.conf */
	const char *warm_max;	      /* --warm-max; NULL: WARM_MAX_DEFAULT (ops/warm_plan.h) */
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

/* --default-memory, --max-cpus, ...: a limit, of kind @opt->num, into the struct resources
 * @opt->value. */
static int res_option(const struct cli_opt *opt, const char *arg)
{
	struct err e = {0};
	int rc = res_parse((enum res_kind)opt->num, arg, "the command line", opt->value, &e);
	return rc < 0 ? error(-rc, "--%s: %s", opt->name, e.msg) : 0;
}

/* -o: one more FUSE option (struct options @opt->value). */
static int fuse_option(const struct cli_opt *opt, const char *arg)
{
	struct options *o = opt->value;
	if (o->nfuse_opts == ARRAY_SIZE(o->fuse_opts))
		return error(EINVAL, "too many -o options");
	o->fuse_opts[o->nfuse_opts++] = arg;
	return 0;
}

/* --default-timeout "SECONDS [terminate|suspend]" (struct options @opt->value). */
static int timeout_option(const struct cli_opt *opt, const char *arg)
{
	struct options *o = opt->value;
	struct err e = {0};
	if (ops_timeout_parse(arg, &o->default_timeout_s, &o->default_timeout_action, &e) < 0)
		return error(EINVAL, "--default-timeout: %s", e.msg);
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

#define RES_ROW(n, a, r, k, h)                                                                     \
	{                                                                                          \
		CLI_CALLBACK(0, n, a, res_option, r, h), .num = (k)                                \
	}

/*
 * The command line: this one table parses it and prints --help (lib/cli.h).
 * README.md, docs/design.md ("Command line") and snapfs(8) name each of
 * its options, and tests/integration/test_options.sh checks they do. The
 * long options keep this order: getopt lists an ambiguous abbreviation's
 * candidates in it.
 */
static int parse_options(int argc, char **argv, struct options *o)
{
	struct resources *def = &o->default_res, *max = &o->max_res;
	const struct cli_opt opts[] = {
	    {CLI_FLAG('f', NULL, &o->foreground, "stay in the foreground, log to stderr")},
	    {CLI_STRING(0, "state", "DIR", &o->state_dir,
			"registry, spool, cache, runsc root (default " DEFAULT_STATE ")")},
	    {CLI_STRING(0, "images", "DIR", &o->images_dir,
			"one root filesystem per subdirectory (default STATE/" IMAGES_LEAF ")")},
	    {CLI_STRING(0, "store", "URL", &o->store_url,
			"file:///path (default STATE/store) or s3://bucket/prefix")},
	    {CLI_STRING(0, "runsc", "PATH", &o->runsc_bin,
			"the runsc binary (default: runsc on PATH)")},
	    {CLI_SIZE(
		"cache-max", "SIZE", &o->cache_max_bytes,
		"bound on local snapshot images, e.g. 20G (default: a quarter of the cache plus "
		"the free space of its disk)")},
	    {CLI_SECONDS(
		"gc-grace", 0, &o->gc_grace_ms,
		"how long a pack no snapshot uses waits before it is deleted, for puts of "
		"other hosts sharing the store (default: 0 for the default store, 3600 for a "
		"--store you name)")},
	    {CLI_STRING(0, "spool", "DIR", &o->spool_parent,
			"where checkpoints are written before they are stored, e.g. a tmpfs for "
			"shorter pauses (default STATE/spool)")},
	    {CLI_CALLBACK(
		'o', NULL, "FUSE_OPTS", fuse_option, o,
		"FUSE mount options. Without allow_other only root may use the mount. With "
		"it every local user may, and snapfs adds default_permissions: each user "
		"sees only the sandboxes and snapshots it owns (root sees all), the "
		"journals are root's")},
	    {CLI_STRING(0, "allow-group", "GROUP", &o->allow_group,
			"who besides root may create sandboxes under allow_other: a group name or "
			"gid (default: root only)")},
	    {CLI_SIZE(
		"journal-max", "SIZE", &o->journal_max_bytes,
		"cap of events.jsonl, errors.jsonl and snapfs.log; past it each becomes NAME.1 "
		"and starts again (default 64M)")},
	    {CLI_SECONDS("exec-timeout", 1, &o->exec_timeout_ms,
			 "how long a command written to exec may run before it is killed (default "
			 "%d)"),
	     .help_args = {RUNSC_EXEC_TIMEOUT_DEFAULT_MS / 1000}},
	    {CLI_SECONDS(
		 "runsc-timeout", 1, &o->runsc_timeout_ms,
		 "how long any other runsc call may take before it is killed; checkpoint and "
		 "restore get %d s more per GiB of memory (default %d)"),
	     .help_args = {RUNSC_PER_GIB_MS / 1000, RUNSC_TIMEOUT_DEFAULT_MS / 1000}},
	    {CLI_STRING(
		0, "cuda-checkpoint", "PATH", &o->cuda_checkpoint,
		"the host's cuda-checkpoint, run in GPU sandboxes (default: cuda-checkpoint "
		"on PATH, if any)")},
	    {CLI_STRING(0, "agent", "PATH", &o->agent,
			"the program snapfs runs inside each sandbox for root/, ps and exec "
			"(default: snapfs-agent beside the daemon, else " SNAPFS_AGENT_DEFAULT
			")")},
	    {CLI_STRING(0, "cgroup-parent", "PATH", &o->cgroup_parent,
			"the cgroup under which each sandbox gets its own, outside the daemon's "
			"(default " CGROUP_PARENT_DEFAULT "; docs/cgroups.md)")},
	    {CLI_STRING(0, "net-pool", "CIDR", &o->net_pool,
			"the addresses of sandboxes with network=egress, a /30 each "
			"(default " NET_POOL_DEFAULT "; docs/network.md)")},
	    {CLI_STRING(0, "net-resolv", "FILE", &o->net_resolv,
			"the resolv.conf those sandboxes get (default /etc/resolv.conf)")},
	    {CLI_STRING(0, "warm-max", "N|SIZE", &o->warm_max,
			"bound on all warm pools: a count of sandboxes or their memory, e.g. 8G "
			"(default 16)")},
	    RES_ROW("default-memory", "SIZE", def, RES_MEMORY,
		    "memory of a sandbox that names none (default " OPS_DEFAULT_MEMORY
		    "; 0: unlimited; docs/limits.md)"),
	    RES_ROW("default-cpus", "N", def, RES_CPUS,
		    "CPUs of a sandbox that names none (default " OPS_DEFAULT_CPUS
		    "; 0: unlimited)"),
	    RES_ROW("default-pids", "N", def, RES_PIDS,
		    "tasks inside a sandbox that names none (default " OPS_DEFAULT_PIDS
		    "; 0: unlimited)"),
	    RES_ROW(
		"max-memory", "SIZE", max, RES_MEMORY,
		"the most memory a user other than root may ask for; only root asks for more or "
		"for 0 (default: --default-memory's value; 0: no bound)"),
	    RES_ROW("max-cpus", "N", max, RES_CPUS,
		    "the most CPUs a user other than root may ask for (default: --default-cpus's "
		    "value; 0: no bound)"),
	    RES_ROW("max-pids", "N", max, RES_PIDS,
		    "the most tasks a user other than root may ask for (default: --default-pids's "
		    "value; 0: no bound)"),
	    {CLI_COUNT("max-sandboxes-per-user", 1000000, &o->max_sandboxes_per_user,
		       "sandboxes a user other than root may own (default %d; 0: no cap)"),
	     .help_args = {OPS_DEFAULT_MAX_SANDBOXES_PER_USER}},
	    {CLI_COUNT("max-ports-per-user", 1000000, &o->max_ports_per_user,
		       "ports the sandboxes of a user other than root may publish (default %d; 0: "
		       "no cap)"),
	     .help_args = {OPS_DEFAULT_MAX_PORTS_PER_USER}},
	    {CLI_CALLBACK(0, "default-timeout", "SECONDS", timeout_option, o,
			  "the timeout of a sandbox whose spec names none, 'SECONDS "
			  "[terminate|suspend]' (default 0: none)")},
	    {CLI_STRING(0, "publish-address", "ADDRESS", &o->publish_address,
			"the IPv4 address published ports listen on (default 127.0.0.1; "
			"docs/network.md)")},
	    {CLI_FLAG(0, "debug", &log_debug_enabled, "log every operation")},
	    {CLI_HELP()},
	    {CLI_VERSION()},
	    {CLI_END},
	};
	const struct cli cli = {
	    .prog = "snapfs",
	    .operands = "MOUNTPOINT",
	    .version = SNAPFS_VERSION,
	    .footer = "Unmount with: fusermount3 -u MOUNTPOINT (running sandboxes keep running)\n",
	    .opts = opts,
	};
	o->state_dir = DEFAULT_STATE;
	o->gc_grace_ms = -1;
	default_resources(&o->default_res);
	o->max_res = (struct resources){RES_UNSET, RES_UNSET, RES_UNSET};
	o->max_sandboxes_per_user = OPS_DEFAULT_MAX_SANDBOXES_PER_USER;
	o->max_ports_per_user = OPS_DEFAULT_MAX_PORTS_PER_USER;
	int first = cli_parse(&cli, argc, argv);
	if (first < 0)
		return -EINVAL;
	if (first != argc - 1) {
		cli_usage(&cli, stderr);
		return -EINVAL;
	}
	o->mountpoint = argv[first];
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
	    .agent = o->agent,
	    .cgroup_parent = o->cgroup_parent,
	    .net_pool = o->net_pool,
	    .net_resolv = o->net_resolv,
	    .warm_max = o->warm_max,
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
	char cuda_abs[PATH_MAX], resolv_abs[PATH_MAX], agent_abs[PATH_MAX];
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
	    (o.agent && *o.agent && make_absolute(&o.agent, agent_abs) < 0) ||
	    (o.net_resolv && make_absolute(&o.net_resolv, resolv_abs) < 0) ||
	    build_fuse_args(&o, &args) < 0 || catch_signals(true) < 0)
		return 1;
	int rc = serve(&o, &args, notify > 0);
	fuse_opt_free_args(&args);
	return rc < 0 ? 1 : 0;
}
