/*
 * ops_life.c - the operations layer's life cycle: start-up (directories,
 * the state lock, the parts, reconciliation), the monitor thread, and
 * shutdown.
 */
#include "runtime/net/net.h"
#include "ops/ops_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "backend/store/store.h"
#include "lib/cancel.h"
#include "lib/spawn.h"
#include "runtime/cache.h"
#include "runtime/runsc/cgroup.h"
#include "runtime/runsc/console.h"
#include "runtime/host.h"
#include "runtime/images.h"
#include "backend/journal/journal.h"
#include "runtime/spool.h"

/* --- start-up and shutdown ------------------------------------------------ */

static int make_dirs(const struct ops_config *cfg, struct err *e)
{
	int rc = xsnprintf(ops.state_dir, sizeof(ops.state_dir), "%s", cfg->state_dir);
	if (rc < 0)
		return err_set(e, ENAMETOOLONG, "state directory path is too long");
	rc = xsnprintf(ops.sandbox_dir, sizeof(ops.sandbox_dir), "%s/sandboxes", cfg->state_dir);
	if (rc >= 0)
		rc = mkdir_p(ops.sandbox_dir, 0700);
	if (rc < 0)
		return err_set(e, -rc, "cannot create %s/sandboxes: %s", cfg->state_dir,
			       strerror(-rc));
	return 0;
}

/* One daemon per state directory: a second one would empty the first's spool. */
static int lock_state(const char *state_dir, struct err *e)
{
	char path[PATH_MAX];
	if (xsnprintf(path, sizeof(path), "%s/lock", state_dir) < 0)
		return err_set(e, ENAMETOOLONG, "state directory path is too long");
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_set(e, errno, "cannot open %s: %s", path, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return err_set(e, EBUSY, "another snapfs daemon uses the state directory %s",
			       state_dir);
	}
	ops.lock_fd = fd; /* held, and so locked, until the process ends */
	return 0;
}

static int open_parts(const struct ops_config *cfg, struct err *e)
{
	char path[PATH_MAX];
	int rc = journal_open(cfg->state_dir, cfg->journal_max_bytes);
	if (rc < 0)
		return err_set(e, -rc, "cannot open the journals in %s: %s", cfg->state_dir,
			       strerror(-rc));
	if (xsnprintf(path, sizeof(path), "%s/registry.db", cfg->state_dir) < 0)
		return err_set(e, ENAMETOOLONG, "state directory path is too long");
	rc = registry_open(path, &ops.reg);
	if (rc < 0)
		return err_set(e, -rc, "cannot open the registry %s: %s", path, strerror(-rc));
	rc = store_open(cfg->store_url, cfg->state_dir, &ops.store, e);
	if (rc < 0)
		return rc;
	bool named = cfg->store_url && cfg->store_url[0];
	store_set_grace(ops.store, cfg->gc_grace_ms >= 0 ? cfg->gc_grace_ms
				   : named		 ? OPS_SHARED_GRACE_MS
							 : 0);
	rc = images_open(cfg->images_dir, &ops.images, e);
	if (rc < 0)
		return rc;
	if (xsnprintf(path, sizeof(path), "%s/runsc", cfg->state_dir) < 0)
		return err_set(e, ENAMETOOLONG, "state directory path is too long");
	rc = runsc_init(&ops.runsc, cfg->runsc_bin ? cfg->runsc_bin : "runsc", path, e);
	if (rc < 0)
		return rc;
	runsc_set_timeouts(&ops.runsc, cfg->runsc_timeout_ms, cfg->exec_timeout_ms);
	if (xsnprintf(path, sizeof(path), "%s/runsc-calls", cfg->state_dir) < 0)
		return err_set(e, ENAMETOOLONG, "state directory path is too long");
	rc = runsc_record_calls(&ops.runsc, path, e);
	if (rc < 0)
		return rc;
	rc = ops_gpu_tool_init(cfg->cuda_checkpoint, e);
	if (rc < 0)
		return rc;
	return ops_agent_init(cfg->agent, e);
}

/* What a remove set aside and a crash left: the directories of removed sandboxes. */
static void sweep_tombs(void)
{
	DIR *d = opendir(ops.sandbox_dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strncmp(de->d_name, SANDBOX_TOMB_PREFIX, strlen(SANDBOX_TOMB_PREFIX)))
			rm_rf_at(dirfd(d), de->d_name);
	}
	closedir(d);
}

/*
 * The monitor notices sandboxes whose process ended on its own (an
 * entrypoint that exited, a sentry the host's OOM killer ended) as it
 * happens: it sleeps in poll() on a pidfd of each running sandbox's
 * process, which turns readable at the exit, and looks again at least
 * every MONITOR_PERIOD_MS (for those started since, or past
 * MONITOR_WATCH_MAX), when it also flushes the rows kept in memory.
 */
#define MONITOR_PERIOD_MS 1000

static pthread_t monitor_thread;
static int monitor_wake_fd = -1; /* an eventfd: written once, at the end */
static atomic_bool monitor_stop;
static bool monitor_started;
/* The monitor thread's alone: the wake fd, the kick fd, then the watched pidfds. */
static struct pollfd monitor_fds[2 + MONITOR_WATCH_MAX];

/* A sandbox started running: the next pass watches it (ops_internal.h monitor_kick_fd()). */
static void kicks_take(int fd)
{
	uint64_t n;
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		warning("monitor: cannot read its kick: %s", strerror(errno));
}

static void *monitor_main(void *arg)
{
	(void)arg;
	bool first = true;
	while (!atomic_load(&monitor_stop)) {
		/* Watched first, then looked at: an end in between wakes the poll. */
		size_t n = monitor_watch(monitor_fds + 2, MONITOR_WATCH_MAX);
		exits_collect(); /* adopted processes: no zombie stays (lib/spawn.h) */
		if (!first) {
			rows_flush(false);
			monitor_sandboxes(); /* never the store: ops_sync.c's thread follows it */
			snapview_tick();
			ops_agent_prune_views();
		}
		first = false;
		monitor_fds[0] = (struct pollfd){.fd = monitor_wake_fd, .events = POLLIN};
		monitor_fds[1] = (struct pollfd){.fd = monitor_kick_fd(), .events = POLLIN};
		poll(monitor_fds, 2 + n, MONITOR_PERIOD_MS);
		if (monitor_fds[1].revents & POLLIN)
			kicks_take(monitor_fds[1].fd);
		for (size_t i = 2; i < 2 + n; i++)
			close(monitor_fds[i].fd);
	}
	return NULL;
}

static int monitor_begin(void)
{
	monitor_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (monitor_wake_fd < 0)
		return errno;
	int rc = pthread_create(&monitor_thread, NULL, monitor_main, NULL);
	if (rc != 0) {
		closep(&monitor_wake_fd);
		return rc;
	}
	monitor_started = true;
	return 0;
}

static void monitor_end(void)
{
	atomic_store(&monitor_stop, true);
	uint64_t one = 1;
	if (write(monitor_wake_fd, &one, sizeof(one)) < 0)
		warning("cannot wake the monitor thread: %s",
			strerror(errno)); /* it ends within a period */
	pthread_join(monitor_thread, NULL);
	closep(&monitor_wake_fd);
}

static int open_all(const struct ops_config *cfg, struct err *e)
{
	ops.lock_fd = -1;
	int rc = access_init(cfg->allow_group, e);
	if (rc == 0)
		rc = make_dirs(cfg, e);
	if (rc == 0)
		rc = lock_state(cfg->state_dir, e);
	if (rc == 0)
		rc = cgroup_open(cfg->cgroup_parent, ops.cgroup_parent, e);
	if (rc == 0)
		rc = cgroup_can_limit(&cfg->default_res, "the default", e);
	if (rc == 0)
		ops.default_res = cfg->default_res;
	if (rc == 0)
		rc = quota_configure(cfg, e);
	if (rc == 0)
		sweep_tombs();
	/* After the lock: it may remove a second spool of this state directory. */
	if (rc == 0)
		rc = spool_open(cfg->spool_parent, cfg->state_dir, ops.spool_dir, e);
	if (rc == 0)
		rc = net_open(cfg->state_dir, cfg->net_pool, cfg->net_resolv, e);
	if (rc == 0)
		rc = host_id_init(cfg->state_dir, e);
	if (rc == 0)
		rc = cache_open(cfg->state_dir, cfg->cache_max_bytes, e);
	if (rc == 0)
		rc = open_parts(cfg, e);
	if (rc == 0)
		lifetime_configure(cfg);
	if (rc == 0)
		ops_ports_configure(cfg);
	if (rc == 0)
		rc = warm_configure(cfg->warm_max, e);
	return rc;
}

/*
 * How long start-up (opening the store, then reconciling against it) waits
 * for a store that does not answer: past it the store is down for
 * start-up, the mount comes up, and the sync thread decides what needed
 * the store once it answers (ops_sync.c).
 */
#define STORE_START_WAIT_MS 10000
/* How long shutdown lets the puts in flight run before a store that does not answer is given up. */
#define STORE_STOP_GRACE_MS 10000

static void reconcile_all(void)
{
	/* Snapshots first: an interrupted suspend needs to know whether it was stored. */
	reconcile_snapshots();
	warm_reconcile(); /* the members a last run left go; their networks with them */
	reconcile_sandboxes();
	holds_reconcile();
	snapview_sweep(); /* snapshots' views: none outlives its daemon */
	/* What the reconciliation did not claim is garbage now. */
	spool_empty(reconcile_spool_wanted, NULL);
	net_sweep(reconcile_net_wanted, NULL);
	/* Exec output went through host files before it was capped in memory: an older version's.
	 */
	char old_exec[PATH_MAX];
	if (xsnprintf(old_exec, sizeof(old_exec), "%s/exec", ops.state_dir) >= 0)
		rm_rf(old_exec);
}

int ops_open(const struct ops_config *cfg, struct err *e)
{
	struct cancel start;
	rows_times_init();
	cancel_init(&start);
	cancel_init(&ops.store_stop);
	cancel_set_deadline(&start, mono_ms() + STORE_START_WAIT_MS);
	cancel_bind(&start);
	int rc = open_all(cfg, e);
	if (rc == 0) {
		/*
		 * runsc calls a killed predecessor made live on (their own sessions):
		 * what a checkpoint, restore or delete did is known once it ended.
		 */
		int64_t left = atomic_load(&start.deadline_ms) - mono_ms();
		runsc_wait_leftovers(&ops.runsc, cfg->leftover_wait_ms);
		/* That wait is runsc's: the store keeps what it had left (none: gives up at once).
		 */
		cancel_set_deadline(&start, mono_ms() + (left > 0 ? left : 0));
		reconcile_all();
	}
	cancel_bind(NULL);
	return rc;
}

int ops_start(struct err *e)
{
	ops_view_start();
	/* Here, not in ops_open(): once daemonized its answers reach the log. */
	runsc_probe_checkpoint(&ops.runsc, spool_fd(), ops.spool_dir);
	int rc = jobs_start();
	if (rc < 0)
		return err_set(e, -rc, "cannot start the job threads: %s", strerror(-rc));
	reconcile_stores();
	/* Before the monitor starts: it reaps what this adopts. */
	rc = spawn_become_reaper();
	if (rc < 0)
		warning("cannot become the sandboxes' subreaper (their exit_code stays null): %s",
			strerror(-rc));
	rc = console_start();
	if (rc < 0)
		return err_set(e, -rc, "cannot start the console reader: %s", strerror(-rc));
	rc = monitor_begin();
	if (rc != 0)
		return err_set(e, rc, "cannot start the monitor thread: %s", strerror(rc));
	rc = ops_sync_start();
	if (rc < 0)
		return err_set(e, -rc, "cannot start the sync thread: %s", strerror(-rc));
	rc = timer_start();
	if (rc < 0)
		return err_set(e, -rc, "cannot start the timer thread: %s", strerror(-rc));
	rc = ops_ports_start(e);
	if (rc < 0)
		return rc;
	rc = warm_start();
	if (rc < 0)
		return err_set(e, -rc, "cannot start the warm pools' thread: %s", strerror(-rc));
	ops.running = true;
	info("snapfs started: state %s, store %s, runsc %s", ops.state_dir, store_url(ops.store),
	     ops.runsc.version);
	return 0;
}

void ops_shutdown(void)
{
	/* Exec jobs may outlive us: close the gate so none touches what we free. */
	pthread_rwlock_wrlock(&ops.gate);
	ops.running = false;
	pthread_rwlock_unlock(&ops.gate);
	/*
	 * The members go (a paused sandbox nobody may take) while the monitor
	 * still reaps: a killed sandbox left a zombie makes runsc delete wait
	 * out its deadline.
	 */
	warm_stop();
	if (monitor_started)
		monitor_end();
	timer_stop();
	ops_ports_stop();
	ops_sync_stop();
	ops_view_stop(); /* reads only: nothing is lost if they give up */
	cancel_set_deadline(&ops.store_stop, mono_ms() + STORE_STOP_GRACE_MS);
	jobs_stop();
	snapview_fini();
	ops_agent_fini();
	spool_close();
	console_stop();
	images_close(ops.images);
	store_close(ops.store);
	rows_close();
	registry_close(ops.reg);
	journal_close();
	ops.images = NULL;
	ops.store = NULL;
	ops.reg = NULL;
}
