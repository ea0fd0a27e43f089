/*
 * sdnotify.h - systemd's readiness protocol (sd_notify(3)), spoken
 * directly: one datagram of `KEY=VALUE` lines to the unix socket that
 * NOTIFY_SOCKET names (a path, or `@name` in the abstract namespace).
 * Without NOTIFY_SOCKET every call does nothing, so the daemon run by hand
 * behaves as before.
 *
 * Ownership: sdnotify_init() copies the socket's name into this module and
 * takes NOTIFY_SOCKET out of the environment, so runsc and every other
 * child never see it; it runs in main() before any thread. sdnotify() is
 * then safe from any thread (a socket of its own per call).
 */
#ifndef SNAPFS_SDNOTIFY_H
#define SNAPFS_SDNOTIFY_H

/* Read and unset NOTIFY_SOCKET: 1 when set, 0 when not, -EINVAL for a name no socket has. */
int sdnotify_init(void);
/* Send @state ("READY=1", "STOPPING=1"): 0, or -errno; 0 without NOTIFY_SOCKET. */
int sdnotify(const char *state);

#endif
