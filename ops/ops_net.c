/*
 * ops_net.c - a sandbox's network in its operations (runtime/net/net.h): the
 * `egress` file, and the steps start, fork and resume take before runsc
 * (a container's network goes with its runtime id: container_delete()).
 */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "runtime/net/net.h"
#include "ops/ops_internal.h"

/*
 * Serializes a sandbox's rules between its row and its chain: an `egress`
 * write (chain, then row) and a network's set-up (row read, then chain)
 * each run whole under it, so the chain in force is the row's. Taken
 * before ops.lock and net.c's lock, never under them.
 */
static pthread_mutex_t egress_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Whether @sb's owner is root: its rules may open what the defaults deny.
 * By the owner, not by who wrote the file: a fork, a restart and a resume
 * build the chain again with no writer to ask, and the owner stays.
 */
static bool owner_root(const struct sandbox *sb)
{
	struct caller c = {.uid = sb->owner_uid, .gid = sb->owner_gid};
	return access_is_root(&c);
}

static struct net_egress net_egress_of(const struct sandbox *sb)
{
	return (struct net_egress){sb->egress, owner_root(sb)};
}

static bool net_live(const struct sandbox *sb)
{
	return sb->state == SB_RUNNING || sb->state == SB_SNAPSHOTTING ||
	       sb->state == SB_SUSPENDING || sb->state == SB_STARTING || sb->state == SB_RESUMING;
}

static int reapply_row(const struct sandbox *sb, void *arg)
{
	struct err e = {0};
	struct net_egress eg = net_egress_of(sb);
	if (sb->network == SB_NET_EGRESS && net_live(sb) && strcmp(sb->id, arg) != 0 &&
	    net_set_egress(sb->runtime_id, &eg, &e) < 0)
		warning("sandbox %s: cannot set its egress rules again: %s", sb->id, e.msg);
	return 0;
}

/*
 * `table inet snapfs` was flushed away (nft flush ruleset) while networks
 * live: every live egress sandbox but @except_id (its own change follows)
 * gets its chain again, so none runs unfiltered or cut off.
 */
static void net_reapply(const char *except_id)
{
	if (net_table_lost())
		row_sandbox_each(reapply_row, (void *)except_id);
}

int ops_egress_check(const char *text, struct err *e)
{
	struct net_rule rules[NET_RULES_MAX];
	int n;
	if (strlen(text) >= SB_EGRESS_MAX)
		return err_set(e, EFBIG, "egress is longer than %d bytes", SB_EGRESS_MAX - 1);
	return net_rules_parse(text, rules, &n, e);
}

/* @text becomes @id's recorded rules, under ops.lock (taken here). */
static int record_egress(const struct caller *who, const char *id, const char *text, struct err *e)
{
	struct sandbox sb;
	pthread_mutex_lock(&ops.lock);
	int rc = sandbox_find(who, id, &sb, e);
	if (rc == 0) {
		snprintf(sb.egress, sizeof(sb.egress), "%s", text);
		rc = row_sandbox_update(&sb);
		if (rc < 0)
			rc = err_set(e, EIO, "cannot record the egress of %s", id);
	}
	pthread_mutex_unlock(&ops.lock);
	return rc;
}

/*
 * The chain first, then the row: `cat egress` shows only rules in force.
 * A chain refused leaves both as they were; a row that cannot be written
 * puts the old chain back. A stopped sandbox has no chain: its row alone
 * changes, and its next start builds the chain from it.
 */
int ops_sandbox_set_egress(const struct caller *who, const char *id, const char *text,
			   struct err *e)
{
	struct sandbox sb;
	int rc = ops_egress_check(text, e);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&egress_lock);
	pthread_mutex_lock(&ops.lock);
	rc = sandbox_find(who, id, &sb, e);
	pthread_mutex_unlock(&ops.lock);
	if (rc == 0) {
		struct net_egress eg = {text, owner_root(&sb)};
		net_reapply(id);
		rc = net_set_egress(sb.runtime_id, &eg, e);
	}
	if (rc == 0 && (rc = record_egress(who, id, text, e)) < 0) {
		struct err back = {0};
		struct net_egress old = net_egress_of(&sb);
		if (net_set_egress(sb.runtime_id, &old, &back) < 0)
			warning("sandbox %s: cannot put its egress rules back: %s", id, back.msg);
	}
	pthread_mutex_unlock(&egress_lock);
	return rc;
}

/*
 * Sandbox @id's chain again from its row as it is now, under egress_lock
 * (an `egress` write meanwhile is in it): a warm member taken by a fork
 * (ops_restore.c), before its resume, so that it runs under the chain its
 * row says whoever's row it was restored as. One nft transaction in
 * process (libnftables): a few ms. No network, or a row gone: nothing.
 */
int ops_net_egress_again(const char *id, struct err *e)
{
	struct sandbox sb;
	pthread_mutex_lock(&egress_lock);
	int rc = 0;
	if (row_sandbox_get(id, &sb) == 0 && sb.network == SB_NET_EGRESS) {
		struct net_egress eg = net_egress_of(&sb);
		net_reapply(id);
		rc = net_set_egress(sb.runtime_id, &eg, e);
	}
	pthread_mutex_unlock(&egress_lock);
	return rc;
}

/*
 * View directory @dir_id's bundle (ops/ops_snapview.c): never a network,
 * only the mount its snapshot's sandbox had. For an egress one, @resolv
 * names a copy of the resolvers in the view's directory, bind-mounted on
 * /etc/resolv.conf as in the sandbox: runsc restores a container only with
 * the mounts it was checkpointed with ("no server FD available for
 * filesystem ... /etc/resolv.conf" otherwise). Its --network=none puts a
 * loopback alone in place of the saved stack: no way out (docs/design.md).
 */
static int view_net_prepare(const char *dir_id, char resolv[PATH_MAX], struct err *e)
{
	struct snapshot snap;
	if (!str_has_prefix(dir_id, VIEW_DIR_PREFIX) ||
	    row_snapshot_get(dir_id + strlen(VIEW_DIR_PREFIX), &snap) < 0 ||
	    snap.network != SB_NET_EGRESS)
		return 0;
	if (sandbox_path(dir_id, "resolv.conf", resolv, PATH_MAX) < 0)
		return err_set(e, ENAMETOOLONG, "the view of %s: path too long", snap.id);
	return net_write_resolv(resolv, e);
}

int ops_net_prepare(const char *id, const char *runtime_id, char netns[PATH_MAX],
		    char resolv[PATH_MAX], struct err *e)
{
	struct sandbox sb;
	netns[0] = resolv[0] = '\0';
	if (row_sandbox_get(id, &sb) < 0) /* no sandbox: a snapshot's view, or nothing */
		return view_net_prepare(id, resolv, e);
	if (sb.network != SB_NET_EGRESS)
		return 0;
	int rc = sandbox_path(id, "resolv.conf", resolv, PATH_MAX);
	if (rc == 0)
		rc = net_netns_path(runtime_id, netns, PATH_MAX);
	if (rc < 0)
		return err_set(e, ENAMETOOLONG, "cannot set up the network of %s: path too long",
			       id);
	char dir[PATH_MAX];
	rc = sandbox_path(id, NULL, dir, sizeof(dir));
	if (rc == 0)
		rc = mkdir_p(dir, 0700);
	if (rc < 0)
		return err_set(e, -rc, "cannot create the directory of sandbox %s", id);
	rc = net_write_resolv(resolv, e);
	if (rc < 0)
		return rc;
	/*
	 * The rules of the row as it is now: an `egress` write since the read
	 * above is in it. The others' chains again under the same lock, so
	 * none is set from a row an `egress` write is changing.
	 */
	pthread_mutex_lock(&egress_lock);
	net_reapply(id);
	rc = row_sandbox_get(id, &sb) < 0 ? err_set(e, ENOENT, "sandbox %s is gone", id) : 0;
	if (rc == 0) {
		struct net_egress eg = net_egress_of(&sb);
		rc = net_up(runtime_id, &eg, e);
	}
	pthread_mutex_unlock(&egress_lock);
	return rc;
}

struct net_want {
	const char *runtime_id;
	bool found;
};

static int net_claims(const struct sandbox *sb, void *arg)
{
	struct net_want *w = arg;
	if (net_live(sb) && strcmp(sb->runtime_id, w->runtime_id) == 0)
		w->found = true;
	return 0;
}

/* The rules of a snapshot of root's sandbox may open a denied range (net_rules_disarm()). */
static bool snapshot_rules_root(const struct snapshot *snap)
{
	struct caller c = {.uid = snap->owner_uid, .gid = snap->owner_gid};
	return access_is_root(&c);
}

void ops_net_fork_rules(const struct caller *who, const struct snapshot *snap, struct sandbox *sb)
{
	/* A fork of a non-root owner is read after the denies anyway (owner_root()). */
	if (!access_is_root(who) || snapshot_rules_root(snap))
		return;
	int n = net_rules_disarm(sb->egress, sizeof(sb->egress), net_rule_in_denied_here);
	if (n > 0)
		warning("fork of %s: %d egress rule(s) of uid %u inside a denied range are "
			"commented out: only root's own rules open one",
			snap->id, n, (unsigned)snap->owner_uid);
}

bool reconcile_net_wanted(const char *runtime_id, void *arg)
{
	struct net_want w = {runtime_id, false};
	(void)arg;
	row_sandbox_each(net_claims, &w);
	return w.found;
}

cJSON *ops_net_info(const struct sandbox *sb)
{
	struct in_addr a;
	char text[INET_ADDRSTRLEN];
	bool up = sb->network == SB_NET_EGRESS && net_sandbox_addr(sb->runtime_id, &a) == 0 &&
		  inet_ntop(AF_INET, &a, text, sizeof(text));
	cJSON *o = cJSON_CreateObject();
	if (o && (!cJSON_AddStringToObject(o, "mode", sandbox_network_name(sb->network)) ||
		  !(up ? cJSON_AddStringToObject(o, "address", text)
		       : cJSON_AddNullToObject(o, "address")))) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}
