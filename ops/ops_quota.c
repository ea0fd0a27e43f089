/*
 * ops_quota.c - what a user who is not root may ask for (docs/limits.md,
 * "What a user may ask for"; docs/security.md).
 *
 * Any member of --allow-group creates sandboxes, so without a bound one of
 * them could take the host from all others: a sandbox with `memory 0`
 * (unlimited) or `memory=1024T` on a fork, or a thousand sandboxes, or
 * every one of the daemon's listeners. Root sets the bounds on the command
 * line and is held to none of them:
 *
 *   - limits (--max-memory, --max-cpus, --max-pids, defaulting to the
 *     --default-* values): a limit a caller asks for in a `memory`, `cpus`
 *     or `pids` file, a spec or a fork's words is at most the bound and
 *     never 0; a bound of 0 is none. What a caller did not ask for (the
 *     defaults, a snapshot's own limits a fork keeps) is the operator's or
 *     root's and passes. Refused: EPERM.
 *   - caps (--max-sandboxes-per-user, --max-ports-per-user): the sandboxes
 *     a uid owns, in every state until removed (a terminated one still
 *     holds its row, its directory and its console log), and the ports its
 *     live sandboxes publish. Counted from the rows under ops.lock, in the
 *     same step as the insert or the publish, so concurrent requests cannot
 *     together pass a cap. Refused: EDQUOT.
 *
 * The bounds are set once in ops_open(), before any request, and only read
 * after: they need no lock.
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <string.h>

#include "lib/ports.h"

static struct resources max_res; /* 0 in a field: no bound */
static unsigned max_sandboxes;	 /* per user; 0: no cap */
static unsigned max_ports;	 /* per user; 0: no cap */

int quota_configure(const struct ops_config *cfg, struct err *e)
{
	for (enum res_kind k = RES_MEMORY; k <= RES_PIDS; k++) {
		int64_t d = res_get(&cfg->default_res, k), m = res_get(&cfg->max_res, k);
		char ds[RES_WORD_MAX], ms[RES_WORD_MAX];
		if (m == 0 || (d != 0 && d <= m))
			continue;
		res_format(&cfg->default_res, k, ds);
		res_format(&cfg->max_res, k, ms);
		return err_set(e, EINVAL,
			       "--default-%s %s%s is above --max-%s %s: a sandbox that names no "
			       "limit would get what a user may not ask for",
			       res_name(k), ds, d ? "" : " (unlimited)", res_name(k), ms);
	}
	max_res = cfg->max_res;
	max_sandboxes = cfg->max_sandboxes_per_user;
	max_ports = cfg->max_ports_per_user;
	return 0;
}

int quota_limits(const struct caller *who, const struct resources *given, const char *what,
		 struct err *e)
{
	return access_is_root(who) ? 0 : res_given_within(given, &max_res, what, e);
}

/* What one uid owns: its sandboxes, and the ports their rows publish. */
struct owned {
	uid_t uid;
	unsigned sandboxes;
	unsigned ports;
};

static int count_owned(const struct sandbox *sb, void *arg)
{
	struct owned *o = arg;
	if (sb->owner_uid == o->uid) {
		o->sandboxes++;
		o->ports += quota_ports_published(sb);
	}
	return 0;
}

int quota_owner_locked(const struct caller *who, unsigned sandboxes, unsigned ports, struct err *e)
{
	struct owned o = {.uid = who->uid};
	if (access_is_root(who) || (!max_sandboxes && !max_ports) || (!sandboxes && !ports))
		return 0;
	int rc = row_sandbox_each(count_owned, &o);
	if (rc < 0)
		return err_set(e, EIO, "cannot count the sandboxes of uid %u: %s",
			       (unsigned)who->uid, strerror(-rc));
	if (max_sandboxes && sandboxes && o.sandboxes + sandboxes > max_sandboxes)
		return err_set(
		    e, EDQUOT,
		    "uid %u owns %u sandboxes and asks for %u more, past the %u one user "
		    "may own (--max-sandboxes-per-user): rmdir one it no longer needs",
		    (unsigned)who->uid, o.sandboxes, sandboxes, max_sandboxes);
	if (max_ports && ports && o.ports + ports > max_ports)
		return err_set(e, EDQUOT,
			       "uid %u publishes %u ports and asks for %u more, past the %u one "
			       "user may publish (--max-ports-per-user): close one or remove a "
			       "sandbox",
			       (unsigned)who->uid, o.ports, ports, max_ports);
	return 0;
}

unsigned quota_ports_published(const struct sandbox *sb)
{
	struct ports p;
	if (!(PORTS_LIVE & STATE_BIT(sb->state)) || ports_decode(sb->ports, &p) < 0)
		return 0;
	return p.n;
}
