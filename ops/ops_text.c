/*
 * ops_text.c - the generated text of the `version` and `metrics` files.
 *
 * `metrics` is world-readable, and to another user an object does not
 * exist (ops/access.h): what comes from rows (a sandbox's series, its
 * id as a label, the counts by state and the snapshots' byte totals) is
 * made from the rows the reader may see alone, through seen_each().
 */
#include "runtime/net/net.h"
#include "ops/ops_internal.h"

#include "backend/store/store.h"
#include "runtime/cache.h"
#include "runtime/runsc/cgroup.h"
#include "runtime/net/forward.h"
#include "ops/jobs.h"
#include "backend/journal/journal.h"

int ops_version_text(struct strbuf *out)
{
	strbuf_addf(out, "snapfs %s\n", SNAPFS_VERSION);
	strbuf_addf(out, "runsc %s\n", ops.runsc.version);
	strbuf_addf(out, "store %s\n", store_url(ops.store));
	return strbuf_error(out);
}

/* A walk over the rows one caller may see: @fn's for each, the others skipped. */
struct seen_each {
	const struct caller *who;
	int (*sandbox)(const struct sandbox *sb, void *arg);
	int (*snapshot)(const struct snapshot *snap, void *arg);
	void *arg;
};

static int seen_sandbox(const struct sandbox *sb, void *arg)
{
	const struct seen_each *s = arg;
	return access_may_see(s->who, sb->owner_uid) ? s->sandbox(sb, s->arg) : 0;
}

static int seen_snapshot(const struct snapshot *snap, void *arg)
{
	const struct seen_each *s = arg;
	return access_may_see(s->who, snap->owner_uid) ? s->snapshot(snap, s->arg) : 0;
}

static int sandboxes_seen(const struct caller *who, int (*fn)(const struct sandbox *sb, void *arg),
			  void *arg)
{
	struct seen_each s = {.who = who, .sandbox = fn, .arg = arg};
	return row_sandbox_each(seen_sandbox, &s);
}

static int snapshots_seen(const struct caller *who,
			  int (*fn)(const struct snapshot *snap, void *arg), void *arg)
{
	struct seen_each s = {.who = who, .snapshot = fn, .arg = arg};
	return row_snapshot_each(seen_snapshot, &s);
}

struct metric_counts {
	int64_t sandboxes[SB_FAILED + 1];
	int64_t snapshots[SNAP_FAILED + 1];
	int64_t size_bytes, stored_bytes;
};

static int count_sandbox(const struct sandbox *sb, void *arg)
{
	struct metric_counts *c = arg;
	if ((unsigned)sb->state < ARRAY_SIZE(c->sandboxes))
		c->sandboxes[sb->state]++;
	return 0;
}

static int count_snapshot(const struct snapshot *snap, void *arg)
{
	struct metric_counts *c = arg;
	if ((unsigned)snap->state < ARRAY_SIZE(c->snapshots))
		c->snapshots[snap->state]++;
	if (snap->state != SNAP_COMPLETED)
		return 0;
	c->size_bytes += snap->size_bytes;
	c->stored_bytes += snap->stored_bytes;
	return 0;
}

/*
 * @s as a label value, its backslashes, quotes and newlines escaped as the
 * exposition format wants. Ids pass names.h's rules, which allow none of
 * them; this keeps a scrape whole should a rule ever change.
 */
static const char *label_value(const char *s, char out[2 * ID_MAX])
{
	size_t n = 0;
	for (; *s && n + 2 < 2 * ID_MAX; s++) {
		if (*s == '\\' || *s == '"' || *s == '\n')
			out[n++] = '\\';
		out[n++] = *s == '\n' ? 'n' : *s;
	}
	out[n] = '\0';
	return out;
}

static void metric_header(struct strbuf *out, const char *name, const char *type, const char *help)
{
	strbuf_addf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void gauge(struct strbuf *out, const char *name, const char *help, int64_t value)
{
	metric_header(out, name, "gauge", help);
	strbuf_addf(out, "%s %lld\n", name, (long long)value);
}

static void counter(struct strbuf *out, const char *name, const char *help, uint64_t value)
{
	metric_header(out, name, "counter", help);
	strbuf_addf(out, "%s %llu\n", name, (unsigned long long)value);
}

/* The journals' lines since the start: what a scraper alerts on (docs/metrics.md). */
static void journal_metrics(struct strbuf *out)
{
	counter(out, "snapfs_events_total",
		"State changes since the daemon started: lines the events file took.",
		journal_lines(JOURNAL_EVENTS));
	counter(out, "snapfs_errors_total",
		"Requests refused or failed since the daemon started: lines the errors file took.",
		journal_lines(JOURNAL_ERRORS));
}

/*
 * snapfs_snapshot_pause_seconds, a histogram of the pauses this daemon's
 * snapshots made since it started (a suspend stops its sandbox anyway):
 * observed when they happen, so its counts only grow, as a histogram's
 * must; the registry's pause_ms of each snapshot would shrink with a delete
 * and count other hosts' snapshots. Bounds in milliseconds, le in seconds.
 */
static const int64_t pause_le_ms[] = {10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000};
static _Atomic uint64_t pause_buckets[ARRAY_SIZE(pause_le_ms)]; /* not cumulative */
static _Atomic uint64_t pause_count, pause_sum_ms;

void metrics_pause_observe(int64_t ms)
{
	size_t i = 0;
	while (i < ARRAY_SIZE(pause_le_ms) && ms > pause_le_ms[i])
		i++;
	if (i < ARRAY_SIZE(pause_le_ms))
		pause_buckets[i]++;
	pause_sum_ms += (uint64_t)(ms > 0 ? ms : 0);
	pause_count++;
}

static void pause_metrics(struct strbuf *out)
{
	/* The count first: a scrape meanwhile then sees no bucket above it. */
	uint64_t count = pause_count, sum_ms = pause_sum_ms, upto = 0;
	metric_header(out, "snapfs_snapshot_pause_seconds", "histogram",
		      "How long each snapshot's checkpoint paused its sandbox.");
	for (size_t i = 0; i < ARRAY_SIZE(pause_le_ms); i++) {
		upto += pause_buckets[i];
		strbuf_addf(out, "snapfs_snapshot_pause_seconds_bucket{le=\"%g\"} %llu\n",
			    (double)pause_le_ms[i] / 1000,
			    (unsigned long long)(upto < count ? upto : count));
	}
	strbuf_addf(out, "snapfs_snapshot_pause_seconds_bucket{le=\"+Inf\"} %llu\n",
		    (unsigned long long)count);
	strbuf_addf(out, "snapfs_snapshot_pause_seconds_sum %.3f\n", (double)sum_ms / 1000);
	strbuf_addf(out, "snapfs_snapshot_pause_seconds_count %llu\n", (unsigned long long)count);
}

/* The store's own totals, and the local cache. */
static void store_metrics(struct strbuf *out)
{
	struct store_stats s;
	struct cache_stats c;
	store_stats(ops.store, &s);
	cache_stats(&c);
	gauge(out, "snapfs_store_bytes", "Bytes in the store: packs, pack indexes, manifests.",
	      s.stored_bytes);
	gauge(out, "snapfs_store_snapshots", "Snapshots with a manifest in the store.",
	      s.snapshots);
	gauge(out, "snapfs_store_packs", "Pack objects in the store.", s.packs);
	gauge(out, "snapfs_store_chunks", "Distinct chunks in the store.", s.chunks);
	gauge(out, "snapfs_store_chunk_bytes", "Plain bytes of the distinct chunks in the store.",
	      s.chunk_bytes);
	gauge(out, "snapfs_store_logical_bytes",
	      "Plain bytes of every snapshot in the store, as if each were stored whole.",
	      s.logical_bytes);
	gauge(out, "snapfs_store_puts_in_flight", "Snapshots being stored.", s.puts_in_flight);
	gauge(out, "snapfs_store_condemned_packs",
	      "Packs no snapshot uses, kept until the grace period ends.", s.condemned_packs);
	gauge(out, "snapfs_store_gc_grace_seconds",
	      "How long an unused pack is kept before it is deleted (--gc-grace).",
	      s.grace_ms / 1000);
	counter(out, "snapfs_store_read_bytes_total",
		"Bytes restores and verifications read from the store, as stored: packs' "
		"ranges and manifests.",
		(uint64_t)s.get_store_bytes);
	counter(out, "snapfs_cache_copied_bytes_total",
		"Plain bytes restores copied from local snapshot images instead of reading "
		"them from the store.",
		(uint64_t)s.get_local_bytes);
	gauge(out, "snapfs_cache_bytes", "Disk bytes of local snapshot images.", c.bytes);
	gauge(out, "snapfs_cache_limit_bytes", "The bound on local snapshot images.",
	      c.limit_bytes);
	gauge(out, "snapfs_cache_images", "Local snapshot images.", c.entries);
}

/* The job queues: what they hold, their bounds (ops/jobs.h), what they refused. */
static void job_metrics(struct strbuf *out)
{
	metric_header(out, "snapfs_jobs", "gauge",
		      "Jobs queued or running, by queue (places taken by requests included).");
	for (int k = 0; k < JOB_KINDS; k++)
		strbuf_addf(out, "snapfs_jobs{queue=\"%s\"} %u\n", jobs_kind_name(k),
			    jobs_pending(k));
	metric_header(out, "snapfs_jobs_limit", "gauge",
		      "The most jobs a queue holds, running and waiting; past it requests get "
		      "EAGAIN.");
	for (int k = 0; k < JOB_KINDS; k++)
		strbuf_addf(out, "snapfs_jobs_limit{queue=\"%s\"} %u\n", jobs_kind_name(k),
			    jobs_limit(k));
	metric_header(out, "snapfs_jobs_refused_total", "counter",
		      "Requests refused with EAGAIN because their queue was full.");
	for (int k = 0; k < JOB_KINDS; k++)
		strbuf_addf(out, "snapfs_jobs_refused_total{queue=\"%s\"} %llu\n",
			    jobs_kind_name(k), jobs_refused(k));
}

/* Two metrics' samples, one line per sandbox each, kept apart until both are complete. */
struct usage_text {
	struct strbuf *memory, *cpu; /* or a network's bytes in and out */
};

struct metric_head {
	const char *name, *type, *help;
};

/* @fn's samples of each sandbox into two buffers, then each under its header @m. */
static void two_metrics(struct strbuf *out, const struct caller *who,
			int (*fn)(const struct sandbox *sb, void *arg),
			const struct metric_head m[2])
{
	_cleanup_strbuf_ struct strbuf first = STRBUF_INIT;
	_cleanup_strbuf_ struct strbuf second = STRBUF_INIT;
	struct usage_text t = {&first, &second};
	sandboxes_seen(who, fn, &t);
	metric_header(out, m[0].name, m[0].type, m[0].help);
	strbuf_add(out, first.buf, first.len);
	metric_header(out, m[1].name, m[1].type, m[1].help);
	strbuf_add(out, second.buf, second.len);
	/* A failed append sticks to @out, which its caller checks once. */
	if (!out->err)
		out->err = strbuf_error(&first) < 0 ? strbuf_error(&first) : strbuf_error(&second);
}

static int sandbox_usage(const struct sandbox *sb, void *arg)
{
	struct usage_text *t = arg;
	struct cgroup_usage u;
	bool live = sb->state != SB_CREATED && sb->state != SB_SUSPENDED &&
		    sb->state != SB_TERMINATED && sb->state != SB_FAILED;
	if (!live || !sb->runtime_id[0] || cgroup_usage(ops.cgroup_parent, sb->runtime_id, &u) < 0)
		return 0;
	char id[2 * ID_MAX];
	label_value(sb->id, id);
	if (u.memory_bytes >= 0)
		strbuf_addf(t->memory, "snapfs_sandbox_memory_bytes{sandbox=\"%s\"} %lld\n", id,
			    (long long)u.memory_bytes);
	if (u.cpu_ns >= 0)
		strbuf_addf(t->cpu, "snapfs_sandbox_cpu_seconds_total{sandbox=\"%s\"} %.3f\n", id,
			    (double)u.cpu_ns / 1e9);
	return 0;
}

/* Bytes each egress sandbox received and sent: its host veth's counters (runtime/net/net.h). */
static int sandbox_net(const struct sandbox *sb, void *arg)
{
	struct usage_text *t = arg;
	uint64_t in, out;
	char id[2 * ID_MAX];
	if (sb->network != SB_NET_EGRESS || net_counters(sb->runtime_id, &in, &out) < 0)
		return 0;
	label_value(sb->id, id);
	strbuf_addf(t->memory, "snapfs_sandbox_network_in_bytes_total{sandbox=\"%s\"} %llu\n", id,
		    (unsigned long long)in);
	strbuf_addf(t->cpu, "snapfs_sandbox_network_out_bytes_total{sandbox=\"%s\"} %llu\n", id,
		    (unsigned long long)out);
	return 0;
}

/*
 * What each sandbox's published ports forwarded (runtime/net/forward.h),
 * since the daemon started.
 */
static int forward_sample(const struct sandbox *sb, void *arg)
{
	struct strbuf *t = arg;
	struct forward_stats st;
	char id[2 * ID_MAX];
	if (forward_stats(sb->id, &st) < 0)
		return 0;
	label_value(sb->id, id);
	strbuf_addf(&t[0], "snapfs_sandbox_forward_connections_total{sandbox=\"%s\"} %llu\n", id,
		    (unsigned long long)st.connections);
	strbuf_addf(&t[1],
		    "snapfs_sandbox_forward_bytes_total{sandbox=\"%s\",direction=\"in\"} %llu\n",
		    id, (unsigned long long)st.bytes_in);
	strbuf_addf(&t[1],
		    "snapfs_sandbox_forward_bytes_total{sandbox=\"%s\",direction=\"out\"} %llu\n",
		    id, (unsigned long long)st.bytes_out);
	return 0;
}

static void forward_metrics(struct strbuf *out, const struct caller *who)
{
	struct strbuf t[2] = {STRBUF_INIT, STRBUF_INIT}; /* connections, bytes */
	sandboxes_seen(who, forward_sample, t);
	metric_header(out, "snapfs_sandbox_forward_connections_total", "counter",
		      "Connections each sandbox's published ports accepted.");
	strbuf_add(out, t[0].buf, t[0].len);
	metric_header(
	    out, "snapfs_sandbox_forward_bytes_total", "counter",
	    "Bytes forwarded through each sandbox's published ports; in: to the sandbox.");
	strbuf_add(out, t[1].buf, t[1].len);
	if (!out->err)
		out->err = strbuf_error(&t[0]) < 0 ? strbuf_error(&t[0]) : strbuf_error(&t[1]);
	strbuf_release(&t[0]);
	strbuf_release(&t[1]);
}
/*
 * Per running sandbox: from its cgroup (docs/limits.md), sandbox_usage();
 * from its host veth (docs/network.md), sandbox_net().
 */
static const struct metric_head sandbox_heads[4] = {
    {"snapfs_sandbox_memory_bytes", "gauge",
     "Memory each running sandbox's cgroup holds (its limit is in info.json)."},
    {"snapfs_sandbox_cpu_seconds_total", "counter",
     "CPU time each running sandbox's cgroup has used."},
    {"snapfs_sandbox_network_in_bytes_total", "counter",
     "Bytes each egress sandbox received since its network came up."},
    {"snapfs_sandbox_network_out_bytes_total", "counter",
     "Bytes each egress sandbox sent since its network came up."},
};

/* The host's warm pools, all together (ops/ops_warm.c): their members are nobody's. */
static void warm_metrics(struct strbuf *out)
{
	struct ops_warm w;
	ops_warm_totals(&w);
	gauge(out, "snapfs_warm_sandboxes",
	      "Sandboxes restored and paused in warm pools, ready to be taken by a fork.", w.ready);
	gauge(out, "snapfs_warm_wanted", "Sandboxes all warm pools ask for (their warm files).",
	      w.want);
	gauge(out, "snapfs_warm_memory_bytes", "Memory the ready warm sandboxes' cgroups hold.",
	      w.bytes);
}

int ops_metrics_text(const struct caller *who, struct strbuf *out)
{
	struct metric_counts c = {0};
	sandboxes_seen(who, count_sandbox, &c);
	snapshots_seen(who, count_snapshot, &c);
	metric_header(out, "snapfs_sandboxes", "gauge", "Sandboxes by state.");
	for (int s = 0; s <= SB_FAILED; s++)
		strbuf_addf(out, "snapfs_sandboxes{state=\"%s\"} %lld\n", sandbox_state_name(s),
			    (long long)c.sandboxes[s]);
	metric_header(out, "snapfs_snapshots", "gauge", "Snapshots by state.");
	for (int s = 0; s <= SNAP_FAILED; s++)
		strbuf_addf(out, "snapfs_snapshots{state=\"%s\"} %lld\n", snapshot_state_name(s),
			    (long long)c.snapshots[s]);
	metric_header(out, "snapfs_snapshot_size_bytes", "gauge",
		      "Plain bytes of all completed snapshots.");
	strbuf_addf(out, "snapfs_snapshot_size_bytes %lld\n", (long long)c.size_bytes);
	metric_header(out, "snapfs_snapshot_stored_bytes", "gauge",
		      "Bytes the completed snapshots added to the store when they were taken.");
	strbuf_addf(out, "snapfs_snapshot_stored_bytes %lld\n", (long long)c.stored_bytes);
	store_metrics(out);
	pause_metrics(out);
	job_metrics(out);
	journal_metrics(out);
	two_metrics(out, who, sandbox_usage, sandbox_heads);
	two_metrics(out, who, sandbox_net, sandbox_heads + 2);
	forward_metrics(out, who);
	gauge(out, "snapfs_waiters",
	      "Reads of wait files held until their object settles (an interrupted one goes at "
	      "once).",
	      waiters_count());
	warm_metrics(out);
	gauge(out, "snapfs_registry_rows_pending",
	      "Row updates the registry refused, kept in memory and written again until it takes "
	      "them.",
	      rows_pending());
	return strbuf_error(out);
}
