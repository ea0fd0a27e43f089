/*
 * ops_lifetime.c - a sandbox's lifetime rules: its timeout and its
 * periodic snapshots as settings (docs/design.md, "Resources and
 * lifecycle"): parsed (ops_timeout_parse(), ops_autosnap_parse()), given to
 * a new sandbox or fork (lifetime_init_*()), set by a write, and shown
 * (the tree's text, info.json). What the timer thread does with them at
 * their due times is ops_timer.c's, one floor up.
 *
 * And the timer's kick: the flag and condition variable by which a change
 * here or in a verb (a deadline or setting written, a sandbox began to
 * run) wakes the thread. The state lives here, below everyone who signals
 * it; the thread waits on it from above (lifetime_wait()), as Redis's
 * bio.c waits on its job list. `kick_lock` guards `kicked` and `halted`
 * (a leaf lock: nothing is called with it held).
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/json.h"
#include "lib/strbuf.h"

#define AUTOSNAP_KEEP_DEFAULT 1
#define SECONDS_DIGITS_MAX 12 /* more digits than LIFETIME_SECONDS_MAX has: refused unread */

static const char blanks[] = " \t\r\n";

/* --default-timeout; written once by ops_open(), before any thread reads them */
static int64_t default_timeout_s;
static enum timeout_action default_timeout_action;

static pthread_mutex_t kick_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t kick_cond = PTHREAD_COND_INITIALIZER;
static bool kicked; /* under kick_lock: the timer looks again before sleeping */
static bool halted; /* under kick_lock: the timer ends (timer_stop()) */

/* --- settings ---------------------------------------------------------------- */

void lifetime_configure(const struct ops_config *cfg)
{
	default_timeout_s = cfg->default_timeout_s;
	default_timeout_action = cfg->default_timeout_action;
}

void lifetime_init_sandbox(struct sandbox *sb, const struct sandbox_spec *spec)
{
	bool named = spec && spec->timeout_set;
	sb->timeout_s = named ? spec->timeout_s : default_timeout_s;
	sb->timeout_action = named ? spec->timeout_action : default_timeout_action;
}

/* A snapshot that records no timeout gives its forks the daemon's default. */
void lifetime_init_fork(struct sandbox *sb, const struct snapshot *snap,
			const struct fork_opts *opts)
{
	bool recorded = snap->timeout_s > 0;
	sb->timeout_s = recorded ? snap->timeout_s : default_timeout_s;
	sb->timeout_action = recorded ? snap->timeout_action : default_timeout_action;
	if (opts && opts->timeout_set)
		sb->timeout_s = opts->timeout_s;
}

/*
 * A whole number from 0 to LIFETIME_SECONDS_MAX in the @n bytes at @s: of
 * seconds, or (@count) of snapshots; @what names it in errors.
 */
static int number_parse(const char *s, size_t n, const char *what, bool count, int64_t *out,
			struct err *e)
{
	char digits[SECONDS_DIGITS_MAX + 1];
	bool whole = n > 0 && n <= SECONDS_DIGITS_MAX;
	for (size_t i = 0; whole && i < n; i++)
		whole = s[i] >= '0' && s[i] <= '9';
	if (!whole)
		return err_set(e, EINVAL, "%s must be a whole number%s, not '%.*s'", what,
			       count ? "" : " of seconds", (int)(n < 32 ? n : 32), s);
	memcpy(digits, s, n);
	digits[n] = '\0';
	long long v = strtoll(digits, NULL, 10);
	if (v > LIFETIME_SECONDS_MAX)
		return err_set(e, EINVAL, "%s of %lld is over the most, %lld (a year in seconds)",
			       what, v, LIFETIME_SECONDS_MAX);
	*out = v;
	return 0;
}

/* The next word of @*p (blanks around it skipped): its length, 0 at the end. */
static size_t next_word(const char **p, const char **word)
{
	*p += strspn(*p, blanks);
	*word = *p;
	size_t n = strcspn(*p, blanks);
	*p += n;
	return n;
}

int ops_timeout_parse(const char *text, int64_t *seconds, enum timeout_action *action,
		      struct err *e)
{
	const char *p = text, *w;
	size_t n = next_word(&p, &w);
	if (n == 0)
		return err_set(e, EINVAL, "timeout needs SECONDS [terminate|suspend]");
	int rc = number_parse(w, n, "timeout", false, seconds, e);
	if (rc < 0)
		return rc;
	*action = TIMEOUT_TERMINATE;
	n = next_word(&p, &w);
	char word[16] = "";
	if (n > 0 && n < sizeof(word))
		memcpy(word, w, n);
	if (n > 0 && timeout_action_parse(word, action) < 0)
		return err_set(e, EINVAL, "unknown word '%.*s' for timeout: terminate or suspend",
			       (int)(n < 32 ? n : 32), w);
	n = next_word(&p, &w);
	if (n > 0)
		return err_set(e, EINVAL, "unknown word '%.*s' for timeout", (int)(n < 32 ? n : 32),
			       w);
	return 0;
}

static bool word_key(const char *w, size_t n, const char *key)
{
	size_t k = strlen(key);
	return n >= k && memcmp(w, key, k) == 0;
}

int ops_autosnap_parse(const char *text, int64_t *every_s, int64_t *keep, struct err *e)
{
	const char *p = text, *w;
	bool seen_every = false;
	int rc = 0;
	*every_s = 0;
	*keep = AUTOSNAP_KEEP_DEFAULT;
	for (size_t n = next_word(&p, &w); rc == 0 && n > 0; n = next_word(&p, &w)) {
		if (n == 1 && w[0] == '0') {
			seen_every = true; /* `0`: stop */
		} else if (word_key(w, n, "every=")) {
			rc = number_parse(w + 6, n - 6, "every", false, every_s, e);
			seen_every = true;
		} else if (word_key(w, n, "keep=")) {
			rc = number_parse(w + 5, n - 5, "keep", true, keep, e);
			if (rc == 0 && (*keep < 1 || *keep > AUTOSNAP_KEEP_MAX))
				rc = err_set(e, EINVAL, "keep must be from 1 to %d, not %lld",
					     AUTOSNAP_KEEP_MAX, (long long)*keep);
		} else {
			rc = err_set(e, EINVAL, "unknown word '%.*s' for autosnapshot",
				     (int)(n < 32 ? n : 32), w);
		}
	}
	if (rc == 0 && !seen_every)
		rc = err_set(e, EINVAL, "autosnapshot needs every=SECONDS [keep=N], or 0 to stop");
	return rc;
}

/* States a timeout or autosnapshot may be set in: every one but the ends. */
#define LIFETIME_SETTABLE                                                                          \
	(~(STATE_BIT(SB_TERMINATING) | STATE_BIT(SB_TERMINATED) | STATE_BIT(SB_FAILED)))
/* States the timeout's clock runs in: a snapshot pauses the sandbox only briefly. */
#define CLOCK_RUNS (STATE_BIT(SB_RUNNING) | STATE_BIT(SB_SNAPSHOTTING))

struct lifetime_set {
	const char *what; /* the file: "timeout", "autosnapshot" */
	int64_t a, b;	  /* its values: seconds and action, or every and keep */
};

/*
 * Each apply sets @s in @sb and says whether anything changed. The
 * setting in force written again changes nothing: its running countdown
 * (the deadline, the next tick) is kept, so a tool that writes back what
 * it read (Ansible's unsafe_writes, a config-management run) re-arms
 * nothing. Another setting arms the clock anew from @now.
 */
static bool apply_timeout(struct sandbox *sb, const struct lifetime_set *s, int64_t now)
{
	bool runs = CLOCK_RUNS & STATE_BIT(sb->state);
	bool same = sb->timeout_s == s->a && (int64_t)sb->timeout_action == s->b;
	/* A running clock without a deadline (one spent) is armed by the write. */
	if (same && (!runs || sb->deadline_at || s->a == 0))
		return false;
	sb->timeout_s = s->a;
	sb->timeout_action = (enum timeout_action)s->b;
	sb->deadline_at = runs ? timeout_deadline(s->a, now) : 0;
	return true;
}

static bool apply_autosnap(struct sandbox *sb, const struct lifetime_set *s, int64_t now)
{
	if (sb->autosnap_every_s == s->a && (s->a == 0 || sb->autosnap_keep == s->b))
		return false;
	sb->autosnap_every_s = s->a;
	if (s->a > 0)
		sb->autosnap_keep = s->b;
	sb->autosnap_next_at = timeout_deadline(s->a, now);
	return true;
}

/* Write setting @s of sandbox @id under the lock, then wake the timer (if it changed). */
static int lifetime_write(const struct caller *who, const char *id, const struct lifetime_set *s,
			  bool (*apply)(struct sandbox *, const struct lifetime_set *, int64_t),
			  struct err *e)
{
	bool changed = false;
	struct sandbox sb;
	pthread_mutex_lock(&ops.lock);
	int rc = sandbox_find(who, id, &sb, e);
	if (rc == 0 && !(LIFETIME_SETTABLE & STATE_BIT(sb.state)))
		rc = err_set(e, EBUSY, "cannot set the %s of sandbox %s: it is %s", s->what, id,
			     sandbox_state_name(sb.state));
	if (rc == 0 && (changed = apply(&sb, s, now_ms())) && row_sandbox_update(&sb) < 0)
		rc = err_set(e, EIO, "cannot set the %s of sandbox %s: registry write failed",
			     s->what, id);
	pthread_mutex_unlock(&ops.lock);
	if (rc == 0 && changed) {
		ops_notify(OPS_OBJ_SANDBOX, id);
		lifetime_kick();
	}
	return rc;
}

int ops_sandbox_set_timeout(const struct caller *who, const char *id, const char *text,
			    struct err *e)
{
	struct lifetime_set s = {.what = "timeout"};
	enum timeout_action action;
	int rc = ops_timeout_parse(text, &s.a, &action, e);
	s.b = action;
	return rc < 0 ? rc : lifetime_write(who, id, &s, apply_timeout, e);
}

int ops_sandbox_set_autosnap(const struct caller *who, const char *id, const char *text,
			     struct err *e)
{
	struct lifetime_set s = {.what = "autosnapshot"};
	int rc = ops_autosnap_parse(text, &s.a, &s.b, e);
	return rc < 0 ? rc : lifetime_write(who, id, &s, apply_autosnap, e);
}

/* --- what the tree shows ----------------------------------------------------- */

/*
 * The deadline as the tree shows it: none while the clock stands (created,
 * suspended), though the timer may not have cleared a spent one yet.
 */
static int64_t shown_deadline(const struct sandbox *sb)
{
	bool stands = sb->state == SB_CREATED || sb->state == SB_SUSPENDED;
	return stands ? 0 : sb->deadline_at;
}

/* Whole seconds until the deadline (rounded up), 0 once passed; the whole setting while stopped. */
static int64_t seconds_left(const struct sandbox *sb, int64_t now)
{
	if (!shown_deadline(sb))
		return sb->timeout_s;
	int64_t ms = sb->deadline_at - now;
	return ms > 0 ? (ms + 999) / 1000 : 0;
}

/* The setting as written, `SECONDS ACTION`: the countdown is info.json's, so a read is writable as
 * is. */
int ops_sandbox_timeout_text(const struct sandbox *sb, struct strbuf *out)
{
	if (sb->timeout_s <= 0)
		strbuf_adds(out, "0\n");
	else
		strbuf_addf(out, "%lld %s\n", (long long)sb->timeout_s,
			    timeout_action_name(sb->timeout_action));
	return strbuf_error(out);
}

int ops_sandbox_autosnap_text(const struct sandbox *sb, struct strbuf *out)
{
	if (sb->autosnap_every_s <= 0)
		strbuf_adds(out, "0\n");
	else
		strbuf_addf(out, "every=%lld keep=%lld\n", (long long)sb->autosnap_every_s,
			    (long long)sb->autosnap_keep);
	return strbuf_error(out);
}

cJSON *lifetime_info_timeout(const struct sandbox *sb)
{
	if (sb->timeout_s <= 0)
		return cJSON_CreateNull();
	_cleanup_json_ cJSON *t = cJSON_CreateObject();
	bool ok =
	    t && json_add(t, "seconds", cJSON_CreateNumber((double)sb->timeout_s)) &&
	    json_add(t, "action", cJSON_CreateString(timeout_action_name(sb->timeout_action))) &&
	    json_add(t, "seconds_left", cJSON_CreateNumber((double)seconds_left(sb, now_ms()))) &&
	    json_add(t, "deadline", json_time_or_null(shown_deadline(sb)));
	return ok ? steal_ptr(t) : NULL;
}

cJSON *lifetime_info_autosnap(const struct sandbox *sb)
{
	if (sb->autosnap_every_s <= 0)
		return cJSON_CreateNull();
	_cleanup_json_ cJSON *a = cJSON_CreateObject();
	bool ok = a && json_add(a, "every", cJSON_CreateNumber((double)sb->autosnap_every_s)) &&
		  json_add(a, "keep", cJSON_CreateNumber((double)sb->autosnap_keep)) &&
		  json_add(a, "next", json_time_or_null(sb->autosnap_next_at));
	return ok ? steal_ptr(a) : NULL;
}

/* --- the kick ---------------------------------------------------------------------- */

void lifetime_kick(void)
{
	pthread_mutex_lock(&kick_lock);
	kicked = true;
	pthread_cond_signal(&kick_cond);
	pthread_mutex_unlock(&kick_lock);
}

void lifetime_halt(bool halt)
{
	pthread_mutex_lock(&kick_lock);
	halted = halt;
	pthread_cond_signal(&kick_cond);
	pthread_mutex_unlock(&kick_lock);
}

bool lifetime_pass_begin(void)
{
	pthread_mutex_lock(&kick_lock);
	bool go = !halted;
	if (go)
		kicked = false;
	pthread_mutex_unlock(&kick_lock);
	return go;
}

void lifetime_wait(int64_t until)
{
	pthread_mutex_lock(&kick_lock);
	/* The deadlines are wall-clock times, as the condition variable's clock is. */
	struct timespec ts = {.tv_sec = until / 1000, .tv_nsec = (until % 1000) * 1000000};
	if (!halted && !kicked)
		pthread_cond_timedwait(&kick_cond, &kick_lock, &ts);
	pthread_mutex_unlock(&kick_lock);
}
