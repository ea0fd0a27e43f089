/*
 * ops_console.c - a running sandbox seen from the host, without entering it
 * (no agent): its console (runtime/runsc/console.h) and its usage
 * (runtime/runsc/cgroup.h, runtime/net/net.h).
 *
 * Nothing here changes state or takes the operations lock: each call
 * loads the row afresh, as ops_view.c does, and shows only what
 * ops/access.h lets the caller see. Its only state: the highest memory
 * seen of each sandbox, where the host keeps no peak (below).
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lib/logfile.h"
#include "runtime/net/net.h"
#include "runtime/runsc/cgroup.h"
#include "runtime/runsc/console.h"

/* --- console ------------------------------------------------------------- */

int ops_sandbox_console_open(const struct caller *who, const char *id, struct logfile **out)
{
	struct sandbox sb;
	char dir[PATH_MAX];
	int rc = ops_sandbox_get(who, id, &sb);
	if (rc == 0)
		rc = sandbox_path(id, NULL, dir, sizeof(dir));
	if (rc < 0)
		return rc;
	struct logfile *lf = console_log_get(dir);
	if (!lf)
		return -ENOMEM;
	/* An open reader keeps its offsets across rotations (lib/logfile.h). */
	logfile_reader(lf, true);
	*out = lf;
	return 0;
}

void ops_sandbox_console_close(struct logfile *lf)
{
	if (!lf)
		return;
	logfile_reader(lf, false);
	console_log_put(lf);
}

ssize_t ops_console_read(struct logfile *lf, char *buf, size_t size, int64_t off)
{
	return console_log_read(lf, buf, size, off);
}

int ops_console_stat(struct logfile *lf, int64_t *size, struct timespec *mtime)
{
	/* No log yet: empty. */
	if (logfile_stat(lf, size, mtime) < 0) {
		*size = 0;
		*mtime = (struct timespec){0};
	}
	return 0;
}

/* --- usage ----------------------------------------------------------------- */

/*
 * Where the cgroup keeps no peak (cgroup v2 before Linux 5.19): the
 * highest memory_bytes a read saw, by runtime id (a new run is a new id),
 * at most PEAKS_MAX sandboxes, the oldest slot reused.
 */
#define PEAKS_MAX 64
static struct {
	char runtime_id[RUNTIME_ID_MAX];
	int64_t peak;
} peaks[PEAKS_MAX];
static size_t peaks_next;
static pthread_mutex_t peaks_lock = PTHREAD_MUTEX_INITIALIZER;

static int64_t peak_seen(const char *runtime_id, int64_t now)
{
	pthread_mutex_lock(&peaks_lock);
	size_t i = 0;
	while (i < PEAKS_MAX && strcmp(peaks[i].runtime_id, runtime_id))
		i++;
	if (i == PEAKS_MAX) {
		i = peaks_next;
		peaks_next = (peaks_next + 1) % PEAKS_MAX;
		snprintf(peaks[i].runtime_id, sizeof(peaks[i].runtime_id), "%s", runtime_id);
		peaks[i].peak = 0;
	}
	if (now > peaks[i].peak)
		peaks[i].peak = now;
	int64_t peak = peaks[i].peak;
	pthread_mutex_unlock(&peaks_lock);
	return peak;
}

/* Processes inside, as the sentry counts them (the cgroup's pids.current counts its threads). */
#define USAGE_PIDS_MAX 4096
static int64_t inside_pids(const char *runtime_id)
{
	struct err e = {0};
	size_t n = 0;
	_cleanup_free_ int *pids = calloc(USAGE_PIDS_MAX, sizeof(*pids));
	if (!pids || runsc_ps(&ops.runsc, runtime_id, pids, USAGE_PIDS_MAX, &n, &e) < 0)
		return -1;
	return (int64_t)n;
}

int ops_sandbox_usage_text(const struct sandbox *sb, struct strbuf *out)
{
	struct cgroup_usage u;
	uint64_t rx, tx;
	if (sb->state != SB_RUNNING || !sb->runtime_id[0])
		return 0;
	if (cgroup_usage(ops.cgroup_parent, sb->runtime_id, &u) < 0)
		return 0; /* ended since its row was read */
	int64_t mem = u.memory_bytes > 0 ? u.memory_bytes : 0;
	int64_t peak = u.memory_peak >= 0 ? u.memory_peak : peak_seen(sb->runtime_id, mem);
	int64_t cpu = u.cpu_ns > 0 ? u.cpu_ns : 0;
	int64_t pids = inside_pids(sb->runtime_id);
	strbuf_addf(out, "memory_bytes %" PRId64 "\n", mem);
	strbuf_addf(out, "memory_peak_bytes %" PRId64 "\n", peak > mem ? peak : mem);
	strbuf_addf(out, "cpu_seconds %" PRId64 ".%03" PRId64 "\n", cpu / 1000000000,
		    cpu % 1000000000 / 1000000);
	strbuf_addf(out, "pids %" PRId64 "\n", pids > 0 ? pids : 0);
	/* Only the host end of the veth snapfs made for it (runtime/net/net.h). */
	if (sb->network == SB_NET_EGRESS && net_counters(sb->runtime_id, &rx, &tx) == 0) {
		strbuf_addf(out, "rx_bytes %" PRIu64 "\n", rx);
		strbuf_addf(out, "tx_bytes %" PRIu64 "\n", tx);
	}
	return strbuf_error(out);
}
