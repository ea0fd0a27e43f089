/*
 * forward.h - published ports: TCP forwarders in the daemon (docs/network.md,
 * "Published ports").
 *
 * How it works: each published port is a listening socket on the publish
 * address (--publish-address, 127.0.0.1 by default). One thread, after
 * Redis's bio.c and the console reader (runtime/runsc/console.c), waits on one
 * epoll set holding every listener and every forwarded connection. For each
 * connection it accepts, it asks the resolver where the sandbox is now
 * (forward_resolve_fn, outside its lock), connects to that address and
 * port without blocking, and then moves bytes both ways through a bounded
 * buffer per direction. A half-close is passed on: an EOF from one side
 * becomes a shutdown(SHUT_WR) of the other once the bytes before it are
 * written, and the connection ends when both directions have. A connection
 * that cannot reach the sandbox (the resolver fails, the connect is refused
 * or fails) is closed at once. One over FORWARD_CONNS_PORT_MAX or
 * FORWARD_CONNS_MAX (lib/limits.h) closes the connection of the full table
 * that has been idle longest, FORWARD_EVICT_IDLE_MS at least, to take its
 * place (every local user may connect: idle sockets must not hold a port);
 * with none that idle it is accepted and closed at once, so a client never
 * waits in a backlog that will not be served.
 *
 * The resolver is asked per connection, so a listener outlives a suspend,
 * a resume or a restart of the network: the port stays, and the address it
 * forwards to is the sandbox's of the moment.
 *
 * Who owns what: forward.c owns every socket, buffer and counter; callers
 * name a forwarder by (sandbox id, sandbox port). What a sandbox has
 * published is the operations layer's (ops/ops_ports.c, the registry);
 * this module only keeps listeners open. Locks: one mutex guards the
 * listener and connection lists and the counters; the thread holds it
 * while it handles one event, never while it calls the resolver, so a
 * resolver may take any lock a caller of forward_open() holds. Epoll tags
 * are serial numbers never reused (as console.c's): an event for an object
 * closed meanwhile finds nothing and is dropped.
 */
#ifndef SNAPFS_FORWARD_H
#define SNAPFS_FORWARD_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/limits.h"
#include "lib/util.h"

/* Where sandbox @sandbox_id's network is now: its address (port unused), or -errno. */
typedef int (*forward_resolve_fn)(const char *sandbox_id, struct sockaddr_in *out);

/*
 * Listen on @address (an IPv4 address, NULL: 127.0.0.1) from now on, ask
 * @resolve where each sandbox is, and start the thread. -EINVAL for an
 * address that is not one.
 */
int forward_start(const char *address, forward_resolve_fn resolve, struct err *e);
/* Close every listener and connection and end the thread. */
void forward_stop(void);
/* Replace the resolver (tests; the lead's wiring to runtime/net/net.h). */
void forward_set_resolver(forward_resolve_fn resolve);
/*
 * Tests: give up on a connect to the sandbox after @connect_ms and close a
 * connection idle for @idle_ms; 0 puts back FORWARD_CONNECT_TIMEOUT_MS or
 * FORWARD_IDLE_TIMEOUT_MS (lib/limits.h). Applies to what happens next.
 */
void forward_set_timeouts(unsigned connect_ms, unsigned idle_ms);
/* Tests: a full table closes a connection idle @ms or more; 0: FORWARD_EVICT_IDLE_MS. */
void forward_set_evict_idle(unsigned ms);
/* The publish address as text ("127.0.0.1"). */
const char *forward_address(void);

/*
 * Publish sandbox @sandbox_id's port @port on host port @host_port (0:
 * one the kernel picks); the port bound in @bound. -EADDRINUSE for a host
 * port in use, -EEXIST if @port is published already, -ENOSPC past
 * FORWARD_PORTS_MAX listeners; the sentence in @e.
 */
int forward_open(const char *sandbox_id, uint16_t port, uint16_t host_port, uint16_t *bound,
		 struct err *e);
/* Stop it: the listener and its connections are closed now. -ENOENT if none. */
int forward_close(const char *sandbox_id, uint16_t port);
/* Stop all of @sandbox_id's; with @forget, its counters go too (it is removed). */
void forward_close_sandbox(const char *sandbox_id, bool forget);
/* Ask the resolver where @sandbox_id is now (info.json says whether it is reachable). */
int forward_resolve(const char *sandbox_id, struct sockaddr_in *out);

/* What went through a sandbox's forwarders since the daemon started. */
struct forward_stats {
	uint64_t connections; /* accepted */
	uint64_t bytes_in;    /* client to sandbox */
	uint64_t bytes_out;   /* sandbox to client */
	unsigned open;	      /* connections open now */
	uint64_t evicted;     /* closed while idle to make room for a new one (make_room()) */
};
/* @sandbox_id's counters; -ENOENT if it never published. */
int forward_stats(const char *sandbox_id, struct forward_stats *out);

#endif
