/*
 * test_ops_ports.c - published ports (ops/ops_ports.c, runtime/net/forward.h):
 * open, close, forks, suspend and resume, metrics, and a restart.
 *
 * The harness (lives, scenarios, the fake runsc) is tests/unit/t_ops.h.
 */
#include "tests/unit/t_ops.h"

/* --- published ports (ops/ops_ports.c, runtime/net/forward.h) ------------ */

/* A connection to 127.0.0.1:@host carries a line there and back. */
static bool echoes(unsigned host)
{
	int fd = t_tcp_connect((uint16_t)host);
	bool ok = fd >= 0 && t_round_trip(fd, "ping\n");
	if (fd >= 0)
		close(fd);
	return ok;
}

static int ports_line(const char *id, const char *fmt, unsigned a, unsigned b)
{
	struct err e = {0};
	char line[64];
	xsnprintf(line, sizeof(line), fmt, a, b);
	return ops_sandbox_ports(root, id, line, &e);
}

/* The metrics as @who reads them contain @part. */
static bool metrics_have_as(const struct caller *who, const char *part)
{
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	return ops_metrics_text(who, &out) == 0 && strstr(strbuf_str(&out), part) != NULL;
}

static bool metrics_have(const char *part)
{
	return metrics_have_as(root, part);
}

/* Sandbox @id's info.json lists one port: @port on 127.0.0.1:@host, reachable or not. */
static bool info_port_is(const char *id, unsigned port, unsigned host, bool reachable)
{
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	struct sandbox sb = sb_get(id);
	char want[32];
	xsnprintf(want, sizeof(want), "127.0.0.1:%u", host);
	cJSON *info = ops_sandbox_info(&sb, &out) == 0 ? cJSON_Parse(strbuf_str(&out)) : NULL;
	cJSON *ports = cJSON_GetObjectItemCaseSensitive(info, "ports");
	cJSON *p = cJSON_GetArrayItem(ports, 0);
	cJSON *h = cJSON_GetObjectItemCaseSensitive(p, "host");
	bool ok = cJSON_GetArraySize(ports) == 1 &&
		  cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(p, "port")) == port &&
		  cJSON_IsString(h) && !strcmp(h->valuestring, want) &&
		  cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "reachable")) == reachable;
	cJSON_Delete(info);
	return ok;
}

/* Publish, the refusals, close; a fork's own host port; suspend keeps it; terminate and rmdir
 * close. */
static void ports_steps(void)
{
	struct err e = {0};
	struct t_echo echo;
	char snap[ID_MAX], fork_id[ID_MAX], text[128];
	forward_set_resolver(t_resolve_loopback);
	if (!CHECK(t_echo_start(&echo, 0) == 0) || !run_sandbox("p"))
		return;
	CHECK(ops_sandbox_ports(root, "p", "http", &e) == -EINVAL &&
	      strstr(e.msg, "PORT HOSTPORT"));
	CHECK(ports_line("p", "%u", echo.port, 0) == 0);
	unsigned host = host_port_of("p", echo.port);
	CHECK(host != 0 && echoes(host));
	CHECK(ports_line("p", "%u", echo.port, 0) == -EEXIST);
	/* A read's line written back (issue 24): taken, and nothing changes. */
	xsnprintf(text, sizeof(text), "%u 127.0.0.1:%u", echo.port, host);
	CHECK(ops_sandbox_ports(root, "p", text, &e) == 0 && host_port_of("p", echo.port) == host);
	CHECK(ports_line("p", "%u %u", echo.port, host) == 0 &&
	      host_port_of("p", echo.port) == host);
	xsnprintf(text, sizeof(text), "%u 127.0.0.2:%u", echo.port, host);
	CHECK(ops_sandbox_ports(root, "p", text, &e) == -EINVAL && strstr(e.msg, "127.0.0.1"));
	CHECK(ports_line("p", "%u %u", echo.port, host == 65535 ? 65534 : host + 1) == -EEXIST);
	CHECK(ports_line("p", "%u %u", 1, host) == -EADDRINUSE); /* taken: by p's own */
	CHECK(host_port_of("p", 1) == 0);
	uint16_t chosen = 0;
	int fd = t_tcp_bound(false, &chosen); /* a free port, then let go */
	CHECK(fd >= 0);
	close(fd);
	CHECK(ports_line("p", "%u %u", 2, chosen) == 0 && host_port_of("p", 2) == chosen);
	CHECK(ports_line("p", "close %u", 2, 0) == 0 && host_port_of("p", 2) == 0);
	CHECK(ports_line("p", "close %u", 2, 0) == -ENOENT);
	CHECK(t_tcp_connect(chosen) < 0 && errno == ECONNREFUSED);
	CHECK(info_port_is("p", echo.port, host, true));
	CHECK(metrics_have("snapfs_sandbox_forward_connections_total{sandbox=\"p\"} 1\n"));
	CHECK(
	    metrics_have("snapfs_sandbox_forward_bytes_total{sandbox=\"p\",direction=\"in\"} 5\n"));
	/* Another user reads the families, not root's sandbox in them (security-3 N5). */
	const struct caller other = {.uid = 4343, .gid = 4343};
	CHECK(metrics_have_as(&other, "# TYPE snapfs_sandbox_forward_connections_total counter\n"));
	CHECK(!metrics_have_as(&other, "sandbox=\"p\""));
	CHECK(!metrics_have_as(&other, "snapfs_sandboxes{state=\"running\"} 1"));
	CHECK(metrics_have_as(&other, "snapfs_sandboxes{state=\"running\"} 0\n"));

	/* A fork publishes its snapshot's ports on host ports of its own; the source keeps its. */
	CHECK(sb_snapshot("p", snap) == 0);
	xsnprintf(text, sizeof(text), "%u 0\n", echo.port);
	CHECK_STR(snap_get(snap).ports, text);
	CHECK(snap_fork(snap, fork_id) == 0);
	unsigned fork_host = host_port_of(fork_id, echo.port);
	CHECK(fork_host != 0 && fork_host != host && echoes(fork_host));
	CHECK(echoes(host));
	/* A snapshot naming a host port (a manifest from the bucket may): the fork binds its own.
	 */
	struct snapshot named = snap_get(snap);
	char fork2[ID_MAX];
	xsnprintf(named.ports, sizeof(named.ports), "%u 1023\n", echo.port);
	CHECK(registry_snapshot_update(ops_registry(), &named) == 0);
	CHECK(snap_fork(snap, fork2) == 0);
	unsigned fork2_host = host_port_of(fork2, echo.port);
	CHECK_MSG(fork2_host != 0 && fork2_host != 1023, "the fork took host port %u", fork2_host);
	CHECK(sb_terminate(fork2) == 0);
	/* Suspended, the port stays (its connections go where the resolver says); resumed, it
	 * serves. */
	CHECK(sb_suspend(fork_id) == 0 && host_port_of(fork_id, echo.port) == fork_host);
	CHECK(sb_resume(fork_id) == 0 && echoes(fork_host));
	/* No network to reach: accepted and closed at once. */
	forward_set_resolver(t_resolve_none);
	fd = t_tcp_connect((uint16_t)fork_host);
	CHECK(fd >= 0 && t_read_all(fd, text, sizeof(text)) == 0);
	if (fd >= 0)
		close(fd);
	CHECK(info_port_is(fork_id, echo.port, fork_host, false));
	forward_set_resolver(t_resolve_loopback);
	/* Terminate closes it at once, and no port can be published any more. */
	CHECK(sb_terminate(fork_id) == 0);
	CHECK(host_port_of(fork_id, echo.port) == 0);
	CHECK(t_tcp_connect((uint16_t)fork_host) < 0 && errno == ECONNREFUSED);
	CHECK(ports_line(fork_id, "%u", echo.port, 0) == -EBUSY);
	/* A spec's ports are published as it is made. */
	struct sandbox_spec spec = {.image = IMAGE};
	char spec_id[ID_MAX];
	xsnprintf(spec.ports, sizeof(spec.ports), "%u 0\n", echo.port);
	CHECK(OP_RUN(ops_sandbox_new(root, &spec, spec_id, OP), NULL, 0) == 0);
	unsigned spec_host = host_port_of(spec_id, echo.port);
	CHECK(spec_host != 0 && echoes(spec_host));
	CHECK(sb_terminate(spec_id) == 0);
	/* A created sandbox publishes too; rmdir closes it. */
	make_sandbox("c");
	CHECK(ports_line("c", "%u", 7, 0) == 0);
	unsigned created_host = host_port_of("c", 7);
	CHECK(created_host != 0 && ops_sandbox_remove(root, "c", &e) == 0);
	CHECK(t_tcp_connect((uint16_t)created_host) < 0 && errno == ECONNREFUSED);
	xsnprintf(text, sizeof(text), "%u", echo.port);
	note_put("ports-echo", text);
	xsnprintf(text, sizeof(text), "%u", host);
	note_put("ports-host", text);
	t_echo_stop(&echo);
}

/* The next life: the running sandbox's port is published again on its host port. */
static void ports_restart_steps(void)
{
	struct t_echo echo;
	char text[32];
	forward_set_resolver(t_resolve_loopback);
	note_get("ports-echo", text, sizeof(text));
	uint16_t port = (uint16_t)atoi(text);
	note_get("ports-host", text, sizeof(text));
	unsigned host = (unsigned)atoi(text);
	if (!CHECK(t_echo_start(&echo, port) == 0))
		return;
	CHECK_SB("p", SB_RUNNING);
	CHECK(host != 0 && host_port_of("p", port) == host);
	CHECK(echoes(host));
	CHECK(sb_terminate("p") == 0);
	CHECK(t_tcp_connect((uint16_t)host) < 0 && errno == ECONNREFUSED);
	t_echo_stop(&echo);
}

int main(void)
{
	if (!t_ops_begin("test_ops_ports"))
		return t_done() || 1;
	one_life("ports", ports_steps, ports_restart_steps);
	return t_ops_done("test_ops_ports");
}
