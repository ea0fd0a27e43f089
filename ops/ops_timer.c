/*
 * ops_timer.c - the one thread that acts on a sandbox's lifetime: its
 * timeout and its periodic snapshots (docs/design.md, "Resources and
 * lifecycle"). The rules (parse, initialise, set, show) and the kick that
 * wakes this thread are ops_lifetime.c's, one floor down.
 *
 * What is kept: every setting and every due time is a column of the
 * sandbox's row (backend/registry/registry.h), the times absolute (ms since the
 * epoch), so a daemon restarted finds them as they were and fires what
 * fell due while it was down at once. Nothing is kept in memory but the
 * thread's own flags and the count of a timeout's failed suspends (below):
 * each pass reads the rows afresh, so no copy can go stale.
 *
 * The timeout: `timeout_s` and `timeout_action` are the setting;
 * `deadline_at` is when it fires, set whenever the sandbox begins to run (a
 * start, a fork, a resume: the patch's arm_timeout, applied with the state
 * change itself by ops_core.c) and by a write to `timeout` while it runs;
 * 0 while its clock is stopped (created, suspended: a resume starts it
 * again from the whole setting). At the deadline the timer terminates or
 * suspends the sandbox through ops_sandbox_terminate() and
 * ops_sandbox_suspend(), as a write to those files would, as the daemon
 * (access_root), with the reason "timeout" in the events they announce. A
 * sandbox in a transitional state at its deadline is looked at again every
 * TIMER_SETTLE_MS until it settles: running, it gets its action then;
 * suspended, terminated or failed, the deadline is spent and cleared.
 *
 * The periodic snapshots: `autosnap_every_s` and `autosnap_keep` are the
 * setting, `autosnap_next_at` the next tick. A tick takes a snapshot named
 * auto-<UTC time> through autosnap_take(), as a write to `snapshot` would,
 * its row marked `autosnap`, unless the sandbox is not running or a marked
 * snapshot of it is still being taken or stored: then that tick is
 * skipped. After every pass (and each auto snapshot that ends kicks one),
 * the oldest completed marked snapshots beyond `keep` are deleted with
 * ops_snapshot_delete(); one that is refused (a suspended sandbox or a fork
 * needs it: EBUSY) stays, and so the next oldest is not deleted in its
 * place. The mark, not the name, says what is the timer's: a user's own
 * `name=auto-…` is never counted or deleted, nor is an `auto-` snapshot
 * from before the mark (schema 7), which cannot be told from a user's.
 * `0` stops the ticks and keeps `keep`, so a snapshot still in flight at
 * the stop is counted too.
 *
 * The thread, as Redis's bio.c: one thread sleeps in lifetime_wait() until
 * the earliest due time, or until lifetime_kick() signals that a deadline or a
 * setting changed or a sandbox began to run. The kick's lock is held only to
 * sleep and to read its flags; a pass runs without it, takes ops.lock
 * through the operations it calls, and never under a registry walk (it
 * collects the ids first, as the reconciliation does).
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/json.h"
#include "lib/strbuf.h"

/* How often a due deadline of a sandbox in a transitional state is looked at again. */
#define TIMER_SETTLE_MS 500
/* The longest sleep with nothing due: a kick wakes it sooner. */
#define TIMER_IDLE_MS (3600 * 1000)
#define AUTOSNAP_PREFIX "auto-"

static pthread_t timer_thread;
static bool timer_started; /* the thread's owner's: ops_start and ops_shutdown */

/* --- the timeout at its deadline ----------------------------------------------- */

/* Clear sandbox @id's deadline if it is still @at (a write may have set another). */
static void deadline_spent(const char *id, int64_t at)
{
	struct sandbox sb;
	pthread_mutex_lock(&ops.lock);
	int rc = row_sandbox_get(id, &sb);
	if (rc == 0 && sb.deadline_at == at) {
		sb.deadline_at = 0;
		rc = row_sandbox_update(&sb);
	}
	pthread_mutex_unlock(&ops.lock);
	if (rc == 0)
		ops_notify(OPS_OBJ_SANDBOX, id);
}

/*
 * A timeout's suspend that does not happen: the timer's own memory of the
 * tries at one deadline (only the timer thread touches it). A suspend the
 * sandbox refuses for good (ENOSPC: the spool cannot take its memory), or
 * one accepted whose checkpoint or store then fails (the sandbox is running
 * again, its deadline still due) TIMEOUT_SUSPEND_TRIES times, falls back to
 * terminate: a deadline is not escaped by making the suspend fail. Between
 * failed tries the timer waits TIMEOUT_RETRY_MS, doubled each time, where
 * it would try every TIMER_SETTLE_MS, each a pause and a spool's write. Not
 * kept across a restart: a restarted daemon gives the suspend its tries
 * again.
 */
#define TIMEOUT_SUSPEND_TRIES 3
#define TIMEOUT_RETRY_MS 2000
/* The event's reason when the timeout terminates in place of its suspend. */
#define REASON_SUSPEND_FAILED "timeout-suspend-failed"

struct suspend_try {
	struct suspend_try *next;
	char id[ID_MAX];
	int64_t deadline_at; /* the deadline these tries are for: another starts afresh */
	int tries;	     /* suspends accepted so far */
	int64_t next_at;     /* no new try before */
	bool seen;	     /* its deadline was looked at this pass: otherwise it is forgotten */
};
static struct suspend_try *suspend_tries;

/* Sandbox @sb's tries at its deadline; a new (zeroed) one; NULL without memory. */
static struct suspend_try *suspend_try_get(const struct sandbox *sb)
{
	struct suspend_try *t = suspend_tries;
	while (t && strcmp(t->id, sb->id) != 0)
		t = t->next;
	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t)
			return NULL;
		snprintf(t->id, sizeof(t->id), "%s", sb->id);
		t->next = suspend_tries;
		suspend_tries = t;
	}
	if (t->deadline_at != sb->deadline_at)
		*t = (struct suspend_try){.next = t->next, .deadline_at = sb->deadline_at};
	memcpy(t->id, sb->id, sizeof(t->id));
	t->seen = true;
	return t;
}

/* Forget the tries of every deadline not looked at since the last call (@all: every one). */
static void suspend_tries_sweep(bool all)
{
	for (struct suspend_try **p = &suspend_tries; *p;) {
		struct suspend_try *t = *p;
		if (all || !t->seen) {
			*p = t->next;
			free(t);
		} else {
			t->seen = false;
			p = &t->next;
		}
	}
}

/*
 * Terminate sandbox @id in place of the suspend its timeout asked for, and
 * say why (@why) in its `error` and the errors journal; the events give the
 * reason REASON_SUSPEND_FAILED. The time to look again, 0 for none.
 */
static int64_t suspend_fallback(const char *id, int64_t at, int64_t now, const char *why)
{
	struct err e = {0};
	warning("sandbox %s: its timeout's suspend failed (%s): terminating it instead", id, why);
	announce_reason(REASON_SUSPEND_FAILED);
	int rc = ops_sandbox_terminate(&access_root, id, NULL, NULL, &e);
	announce_reason(NULL);
	if (rc == -EBUSY || rc == -EAGAIN)
		return now + TIMER_SETTLE_MS;
	if (rc == 0)
		err_set(&e, ETIMEDOUT,
			"timeout: the suspend failed (%.800s); the sandbox was terminated instead",
			why);
	report_job_failure(OPS_OBJ_SANDBOX, id, "timeout", &e);
	deadline_spent(id, at);
	return 0;
}

/* The timeout's suspend of running sandbox @sb at @now, or its fallback: when to look again. */
static int64_t timeout_suspend(const struct sandbox *sb, int64_t now)
{
	struct err e = {0};
	struct suspend_try *t = suspend_try_get(sb);
	/* Running again after its last try failed: no more waiting. */
	if (t && t->tries >= TIMEOUT_SUSPEND_TRIES) {
		char why[MESSAGE_MAX];
		snprintf(why, sizeof(why), "%d tries, the last: %.900s", t->tries,
			 sb->message[0] ? sb->message : "the sandbox runs on");
		return suspend_fallback(sb->id, sb->deadline_at, now, why);
	}
	if (t && t->tries > 0 && now < t->next_at)
		return t->next_at; /* running again after a failed try: backing off */
	info("sandbox %s: its timeout of %lld s expired: suspending it", sb->id,
	     (long long)sb->timeout_s);
	announce_reason("timeout");
	int rc = ops_sandbox_suspend(&access_root, sb->id, NULL, NULL, &e);
	announce_reason(NULL);
	/* Refused for now: looked at again until it settles. */
	if (rc == -EBUSY || rc == -EAGAIN)
		return now + TIMER_SETTLE_MS;
	if (rc < 0)
		return suspend_fallback(sb->id, sb->deadline_at, now, e.msg);
	/* Accepted: watched until it settles; running again, it failed, and waits. */
	if (t) {
		t->tries++;
		t->next_at = now + ((int64_t)TIMEOUT_RETRY_MS << (t->tries - 1));
	}
	return now + TIMER_SETTLE_MS;
}

/* Sandbox @id's deadline passed at @now: act; the time to look again, 0 for none. */
static int64_t timeout_fire(const char *id, int64_t now)
{
	struct sandbox sb;
	struct err e = {0};
	if (row_sandbox_get(id, &sb) < 0 || !sb.deadline_at || sb.deadline_at > now)
		return 0;
	if (sandbox_state_transitional(sb.state)) {
		suspend_try_get(&sb);	      /* its tries are kept while their suspend runs */
		return now + TIMER_SETTLE_MS; /* the job that owns it settles it first */
	}
	if (sb.state != SB_RUNNING) {
		deadline_spent(id, sb.deadline_at);
		return 0;
	}
	if (sb.timeout_action == TIMEOUT_SUSPEND)
		return timeout_suspend(&sb, now);
	info("sandbox %s: its timeout of %lld s expired: terminating it", id,
	     (long long)sb.timeout_s);
	announce_reason("timeout");
	int rc = ops_sandbox_terminate(&access_root, id, NULL, NULL, &e);
	announce_reason(NULL);
	/* Accepted, or refused for now: looked at again until it settles. */
	if (rc == 0 || rc == -EBUSY || rc == -EAGAIN)
		return now + TIMER_SETTLE_MS;
	report_job_failure(OPS_OBJ_SANDBOX, id, "timeout", &e);
	deadline_spent(id, sb.deadline_at);
	return 0;
}

/* --- the periodic snapshots ----------------------------------------------------- */

/* The timer's own, by its mark: a name anyone may choose says nothing. */
static bool is_auto(const struct snapshot *snap)
{
	return snap->kind == SNAP_KIND_SNAPSHOT && snap->autosnap;
}

static int auto_in_flight(const struct snapshot *snap, void *arg)
{
	(void)arg;
	return is_auto(snap) && !snapshot_state_settled(snap->state);
}

static void autosnap_done(void *ctx, int rc, const char *result, size_t len)
{
	(void)ctx, (void)rc, (void)result, (void)len;
	lifetime_kick(); /* the prune counts it now */
}

/* Move sandbox @id's next tick on from @at to @next, unless a write changed it meanwhile. */
static bool tick_claim(const char *id, int64_t at, int64_t next, struct sandbox *sb)
{
	pthread_mutex_lock(&ops.lock);
	int rc = row_sandbox_get(id, sb);
	bool mine = rc == 0 && sb->autosnap_every_s > 0 && sb->autosnap_next_at == at;
	if (mine) {
		sb->autosnap_next_at = next;
		mine = row_sandbox_update(sb) == 0;
	}
	pthread_mutex_unlock(&ops.lock);
	return mine;
}

/* Sandbox @id's tick fell due at @now: take a snapshot, or skip the tick. Returns the next. */
static int64_t autosnap_tick(const char *id, int64_t now)
{
	struct sandbox sb;
	char label[LABEL_MAX], snap_id[ID_MAX];
	struct err e = {0};
	if (row_sandbox_get(id, &sb) < 0 || !sb.autosnap_next_at || sb.autosnap_next_at > now)
		return 0;
	int64_t next = timeout_deadline(sb.autosnap_every_s, now);
	if (!tick_claim(id, sb.autosnap_next_at, next, &sb))
		return 0; /* a write changed it, and kicked the timer */
	if (sb.state != SB_RUNNING || ops_sandbox_snapshots_each(&sb, auto_in_flight, NULL) != 0)
		return next; /* skipped: it is not running, or the last one is still under way */
	struct tm tm;
	time_t t = (time_t)(now / 1000);
	gmtime_r(&t, &tm);
	strftime(label, sizeof(label), AUTOSNAP_PREFIX "%Y%m%dT%H%M%SZ", &tm);
	announce_reason("autosnapshot");
	int rc = autosnap_take(id, label, snap_id, autosnap_done, NULL, &e);
	announce_reason(NULL);
	if (rc < 0 && rc != -EBUSY)
		report_job_failure(OPS_OBJ_SANDBOX, id, "autosnapshot", &e);
	return next;
}

struct prune {
	struct strbuf *ids; /* settled auto- snapshots, oldest first: "c ID" or "f ID" lines */
	int64_t completed;
};

static int collect_auto(const struct snapshot *snap, void *arg)
{
	struct prune *p = arg;
	if (!is_auto(snap) || !snapshot_state_settled(snap->state))
		return 0;
	bool done = snap->state == SNAP_COMPLETED;
	p->completed += done;
	strbuf_addf(p->ids, "%c %s\n", done ? 'c' : 'f', snap->id);
	return strbuf_error(p->ids);
}

/*
 * Delete sandbox @id's oldest completed auto- snapshots beyond its keep, and
 * its failed ones (no checkpoint to keep). One refused stays.
 */
static void autosnap_prune(const char *id)
{
	struct sandbox sb;
	_cleanup_strbuf_ struct strbuf ids = STRBUF_INIT;
	struct prune p = {.ids = &ids};
	if (row_sandbox_get(id, &sb) < 0 || sb.autosnap_keep <= 0 ||
	    ops_sandbox_snapshots_each(&sb, collect_auto, &p) < 0 || !ids.len)
		return;
	int64_t excess = p.completed - sb.autosnap_keep;
	char *save = NULL;
	for (char *line = strtok_r(ids.buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		bool done = line[0] == 'c';
		if (done && excess-- <= 0)
			break;
		struct err e = {0};
		announce_reason("autosnapshot");
		ops_snapshot_delete(&access_root, line + 2, NULL, NULL, &e);
		announce_reason(NULL);
	}
}

/* --- the thread -------------------------------------------------------------------- */

struct pass {
	int64_t now, next;   /* next: the earliest time a row falls due after @now */
	struct strbuf *work; /* "t ID" a deadline due, "a ID" a tick due, "p ID" a keep to hold */
};

static void pass_due(struct pass *p, int64_t at, char what, const char *id)
{
	if (at <= p->now)
		strbuf_addf(p->work, "%c %s\n", what, id);
	else if (at < p->next)
		p->next = at;
}

static int pass_row(const struct sandbox *sb, void *arg)
{
	struct pass *p = arg;
	if (sb->deadline_at)
		pass_due(p, sb->deadline_at, 't', sb->id);
	if (sb->autosnap_every_s > 0 && sb->autosnap_next_at)
		pass_due(p, sb->autosnap_next_at, 'a', sb->id);
	if (sb->autosnap_keep > 0)
		strbuf_addf(p->work, "p %s\n", sb->id);
	return strbuf_error(p->work);
}

/* One pass over every sandbox at @now: returns when the next one is due. */
static int64_t timer_pass(int64_t now)
{
	_cleanup_strbuf_ struct strbuf work = STRBUF_INIT;
	struct pass p = {.now = now, .next = now + TIMER_IDLE_MS, .work = &work};
	bool walked = row_sandbox_each(pass_row, &p) == 0;
	if (!walked)
		p.next = now + TIMER_SETTLE_MS; /* the registry failed: try again soon */
	char *save = NULL;
	for (char *line = work.len ? strtok_r(work.buf, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		int64_t again = 0;
		if (line[0] == 't')
			again = timeout_fire(line + 2, now);
		else if (line[0] == 'a')
			again = autosnap_tick(line + 2, now);
		else
			autosnap_prune(line + 2);
		if (again && again < p.next)
			p.next = again;
	}
	if (walked)
		suspend_tries_sweep(false); /* a deadline not due now is spent or moved */
	return p.next;
}

static void *timer_main(void *arg)
{
	(void)arg;
	while (lifetime_pass_begin())
		lifetime_wait(timer_pass(now_ms()));
	suspend_tries_sweep(true);
	return NULL;
}

int timer_start(void)
{
	lifetime_halt(false);
	int rc = pthread_create(&timer_thread, NULL, timer_main, NULL);
	if (rc != 0)
		return -rc;
	timer_started = true;
	return 0;
}

void timer_stop(void)
{
	if (!timer_started)
		return;
	lifetime_halt(true);
	pthread_join(timer_thread, NULL);
	timer_started = false;
}
