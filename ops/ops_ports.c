/*
 * ops_ports.c - a sandbox's published ports (docs/network.md, "Published
 * ports"): the rules of the `ports` file, the record of them in the
 * sandbox's row (lib/ports.h) and the forwarders (runtime/net/forward.h) kept
 * in step with it.
 *
 * The row is what is published: a write changes the forwarder and the row
 * together under ops.lock, a fork's row starts from its snapshot's ports
 * and start-up opens the forwarders of every live sandbox's row, on the
 * host ports it records. A listener stays open from the publish to a
 * `close`, terminate or rmdir, through a suspend, a resume and a
 * snapshot: the forwarder asks where the sandbox is for each connection
 * (ops_ports_resolve()), so a suspended sandbox's port accepts and closes, and
 * serves again once it runs. Locks: ops.lock around each read-change-write
 * of a row; forward.c's own lock below it.
 */
#include "ops/ops_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ports.h"
#include "runtime/net/forward.h"
#include "runtime/net/net.h"

/*
 * Host ports below the kernel's ip_unprivileged_port_start are the host's
 * services': only root publishes on them. Read at each publish, in the
 * daemon's network namespace (the one its listeners bind in), so a host
 * that moved the line is followed; unreadable (an old kernel): 1024.
 */
#define PORTS_UNPRIV_SYSCTL "/proc/sys/net/ipv4/ip_unprivileged_port_start"
#define PORTS_PRIVILEGED_DEFAULT 1024

static unsigned ops_ports_privileged_below(void)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	char *end;
	if (read_file(PORTS_UNPRIV_SYSCTL, &text, &len, 32) < 0)
		return PORTS_PRIVILEGED_DEFAULT;
	unsigned long v = strtoul(text, &end, 10);
	return end != text && v <= 65536 ? (unsigned)v : PORTS_PRIVILEGED_DEFAULT;
}

static const char *publish_address; /* --publish-address; NULL: 127.0.0.1 */

/*
 * Where a sandbox's network is, asked for each connection: the address of
 * its current container's namespace (runtime/net/net.h) while it runs with
 * network=egress. Any other sandbox (network none, suspended, not yet
 * started) is -ENETUNREACH: the connection is accepted and closed.
 */
static int ops_ports_resolve(const char *sandbox_id, struct sockaddr_in *out)
{
	struct sandbox sb;
	if (row_sandbox_get(sandbox_id, &sb) < 0 || sb.network != SB_NET_EGRESS ||
	    sb.state == SB_SUSPENDED || sb.state == SB_CREATED)
		return -ENETUNREACH;
	memset(out, 0, sizeof(*out));
	return net_sandbox_addr(sb.runtime_id, &out->sin_addr) < 0 ? -ENETUNREACH : 0;
}

void ops_ports_configure(const struct ops_config *cfg)
{
	publish_address = cfg->publish_address;
}

/* Open a forwarder for each port @sb's row records, on its host port (taken: a new one). */
static bool ops_ports_open_row(struct sandbox *sb)
{
	struct ports p;
	struct err e = {0};
	bool changed = false;
	if (ports_decode(sb->ports, &p) < 0) {
		warning("sandbox %s: its published ports are no record, dropped", sb->id);
		sb->ports[0] = '\0';
		return true;
	}
	for (unsigned i = 0; i < p.n; i++) {
		struct port_map *m = &p.v[i];
		uint16_t bound = 0;
		int rc = forward_open(sb->id, m->port, m->host_port, &bound, &e);
		if (rc == -EADDRINUSE && m->host_port) {
			warning("sandbox %s: host port %u is taken, port %u gets another", sb->id,
				m->host_port, m->port);
			rc = forward_open(sb->id, m->port, 0, &bound, &e);
		}
		if (rc < 0 && rc != -EEXIST) {
			ports_remove(&p, i--);
			changed = true;
			continue;
		}
		changed |= rc == 0 && bound != m->host_port;
		if (rc == 0)
			m->host_port = bound;
	}
	ports_encode(&p, true, sb->ports);
	return changed;
}

/* Open sandbox @id's forwarders from its row and record the host ports bound. */
void ops_ports_reopen(const char *id)
{
	struct sandbox sb;
	pthread_mutex_lock(&ops.lock);
	if (row_sandbox_get(id, &sb) == 0 && (PORTS_LIVE & STATE_BIT(sb.state)) && sb.ports[0] &&
	    ops_ports_open_row(&sb) && row_sandbox_update(&sb) < 0)
		warning("sandbox %s: cannot record the host ports of its published ports", id);
	pthread_mutex_unlock(&ops.lock);
}

static int reopen_row(const struct sandbox *sb, void *arg)
{
	(void)arg;
	if (sb->ports[0] && (PORTS_LIVE & STATE_BIT(sb->state)))
		ops_ports_reopen(sb->id);
	return 0;
}

int ops_ports_start(struct err *e)
{
	int rc = forward_start(publish_address, ops_ports_resolve, e);
	if (rc == 0)
		row_sandbox_each(reopen_row, NULL);
	return rc;
}

void ops_ports_stop(void)
{
	forward_stop();
}

void ops_ports_fork(struct sandbox *sb, const struct snapshot *snap)
{
	/*
	 * The sandbox ports only: a manifest from the bucket names host ports
	 * too if it likes, and a fork must not bind one it chose (below 1024,
	 * or one to squat on). The fork's are the kernel's pick.
	 */
	struct ports p;
	sb->ports[0] = '\0';
	if (ports_decode(snap->ports, &p) == 0)
		ports_encode(&p, false, sb->ports);
}

void ops_ports_snapshot(struct snapshot *snap, const struct sandbox *sb)
{
	struct ports p;
	snap->ports[0] = '\0';
	if (ports_decode(sb->ports, &p) == 0)
		ports_encode(&p, false, snap->ports);
}

/*
 * A line that names the address (`PORT ADDRESS:HOSTPORT`, as a read shows
 * it) names the one the listeners bind (--publish-address): another is
 * EINVAL, since no port listens there.
 */
static int ports_address_check(const struct ports_line *pl, struct err *e)
{
	struct in_addr listen;
	char named[INET_ADDRSTRLEN];
	if (!pl->has_address ||
	    (inet_pton(AF_INET, forward_address(), &listen) == 1 && listen.s_addr == pl->address))
		return 0;
	inet_ntop(AF_INET, &(struct in_addr){pl->address}, named, sizeof(named));
	return err_set(e, EINVAL, "ports listen on %s only (--publish-address), not %s",
		       forward_address(), named);
}

/*
 * Publish or close per @pl in @sb (its row, read under ops.lock): 0 with
 * @sb->ports changed; 1 when the line asks for what is already so (a read's
 * line written back: that port published on that host port), nothing done.
 */
static int ops_ports_change(const struct caller *who, struct sandbox *sb,
			    const struct ports_line *pl, struct err *e)
{
	struct ports p;
	if (ports_decode(sb->ports, &p) < 0)
		p.n = 0; /* no record: start from none */
	int at = ports_find(&p, pl->port);
	uint16_t bound = 0;
	unsigned below;
	int rc = ports_address_check(pl, e);
	if (rc < 0)
		return rc;
	if (pl->verb == PORTS_PUBLISH && at >= 0 && pl->host_port &&
	    p.v[at].host_port == pl->host_port)
		return 1;
	if (pl->verb == PORTS_CLOSE) {
		if (at < 0)
			return err_set(e, ENOENT, "port %u of sandbox %s is not published",
				       pl->port, sb->id);
		forward_close(sb->id, pl->port);
		ports_remove(&p, (unsigned)at);
	} else if (at >= 0) {
		return err_set(e, EEXIST, "port %u of sandbox %s is published already, on %u",
			       pl->port, sb->id, p.v[at].host_port);
	} else if (p.n == PORTS_SANDBOX_MAX) {
		return err_set(e, ENOSPC, "sandbox %s publishes %d ports already, the most it may",
			       sb->id, PORTS_SANDBOX_MAX);
	} else if (pl->host_port && !access_is_root(who) &&
		   pl->host_port < (below = ops_ports_privileged_below())) {
		return err_set(e, EACCES,
			       "host port %u is below %u (ip_unprivileged_port_start): only root "
			       "publishes there",
			       pl->host_port, below);
	} else if ((rc = quota_owner_locked(who, 0, 1, e)) < 0) {
		return rc; /* only the owner (or root, never capped) gets here */
	} else {
		rc = forward_open(sb->id, pl->port, pl->host_port, &bound, e);
		if (rc == 0)
			p.v[p.n++] = (struct port_map){pl->port, bound};
	}
	if (rc == 0)
		ports_encode(&p, true, sb->ports);
	return rc;
}

int ops_sandbox_ports(const struct caller *who, const char *id, const char *line, struct err *e)
{
	struct ports_line pl;
	struct sandbox sb;
	int rc = ports_line_parse(line, &pl, e);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&ops.lock);
	rc = sandbox_find(who, id, &sb, e);
	if (rc == 0 && !(PORTS_LIVE & STATE_BIT(sb.state)))
		rc = err_set(e, EBUSY, "cannot change the ports of sandbox %s: it is %s", id,
			     sandbox_state_name(sb.state));
	int same = 0;
	if (rc == 0 && (same = ops_ports_change(who, &sb, &pl, e)) < 0)
		rc = same;
	if (rc == 0 && !same && row_sandbox_update(&sb) < 0) {
		if (pl.verb == PORTS_PUBLISH)
			forward_close(id, pl.port);
		rc = err_set(e, EIO, "cannot change the ports of sandbox %s: registry write failed",
			     id);
	}
	pthread_mutex_unlock(&ops.lock);
	if (rc == 0 && !same)
		ops_notify(OPS_OBJ_SANDBOX, id);
	return rc;
}

int ops_sandbox_ports_text(const struct sandbox *sb, struct strbuf *out)
{
	struct ports p;
	if (!(PORTS_LIVE & STATE_BIT(sb->state)) || ports_decode(sb->ports, &p) < 0)
		return 0;
	for (unsigned i = 0; i < p.n; i++)
		strbuf_addf(out, "%u %s:%u\n", p.v[i].port, forward_address(), p.v[i].host_port);
	return strbuf_error(out);
}

cJSON *ops_ports_info(const struct sandbox *sb)
{
	struct ports p;
	struct sockaddr_in at;
	char host[64];
	cJSON *list = cJSON_CreateArray();
	if (!list || !(PORTS_LIVE & STATE_BIT(sb->state)) || ports_decode(sb->ports, &p) < 0)
		return list;
	/* Whether a connection now would reach the sandbox: one answer for all its ports. */
	bool reachable = forward_resolve(sb->id, &at) == 0;
	for (unsigned i = 0; i < p.n; i++) {
		cJSON *o = cJSON_CreateObject();
		snprintf(host, sizeof(host), "%s:%u", forward_address(), p.v[i].host_port);
		if (!o || !cJSON_AddItemToArray(list, o) ||
		    !cJSON_AddNumberToObject(o, "port", p.v[i].port) ||
		    !cJSON_AddStringToObject(o, "host", host) ||
		    !cJSON_AddBoolToObject(o, "reachable", reachable)) {
			cJSON_Delete(list);
			return NULL;
		}
	}
	return list;
}
