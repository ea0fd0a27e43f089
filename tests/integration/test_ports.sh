#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Published ports through the mount (docs/network.md, "Published ports"):
# the `ports` file's lines and refusals, a connection to a sandbox without
# network accepted and closed at once, a fork's ports on new host ports,
# close and terminate stopping them, a restart opening them again on the
# same host ports. The daemon runs in a network namespace of the test's own
# (unshare -n, its loopback brought up), so nothing listens on the host's.
. "$(dirname "$0")/lib_netns.sh"
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"

# host_port SB PORT: the host port `ports` of SB lists for PORT, or nothing.
host_port() { rd "$MNT/sandboxes/$1/ports" | awk -v p="$2" '$1 == p { sub(/.*:/, "", $2); print $2 }'; }
# connects PORT: a TCP connection to 127.0.0.1:PORT is made.
connects() { timeout 10 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' connects "$1" 2>/dev/null; }
# closed_at_once PORT: a connection is made and the far end closes it (no network behind it).
# refuses PORT: nothing listens on 127.0.0.1:PORT.
refuses() { ! timeout 10 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' refuses "$1" 2>/dev/null; }
closed_at_once() { timeout 10 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && cat <&3' closed "$1"; }

make_sandbox w "sleep 100000" || bail "start sandbox w"
for bad in "" http "0" "65536" "8080 0" "close" "close 1 2" "1 2 3" "+80"; do
	expect_refusal EINVAL "ports '$bad'" w wr "$MNT/sandboxes/w/ports" "$bad"
done
check_eq "refused lines publish nothing" "" "$(rd "$MNT/sandboxes/w/ports")"

ok "publish 8080" wr "$MNT/sandboxes/w/ports" 8080
check_match "a read lists it on 127.0.0.1" '^8080 127\.0\.0\.1:[0-9]+$' "$(rd "$MNT/sandboxes/w/ports")"
host=$(host_port w 8080)
ok "its host port accepts, and closes at once: w has no network" closed_at_once "$host"
check_eq "info.json lists it, not reachable" "8080 127.0.0.1:$host false" \
	"$(jget "$MNT/sandboxes/w/info.json" '.ports[0] | "\(.port) \(.host) \(.reachable)"')"
check_match "metrics count the connection" "snapfs_sandbox_forward_connections_total\\{sandbox=\"w\"\\} 1" \
	"$(rd "$MNT/metrics")"
expect_refusal EADDRINUSE "a host port in use" w wr "$MNT/sandboxes/w/ports" "9090 $host"
expect_refusal EEXIST "a port published already" w wr "$MNT/sandboxes/w/ports" 8080
expect_refusal ENOENT "closing a port not published" w wr "$MNT/sandboxes/w/ports" "close 9"

# --- a fork publishes the snapshot's ports on its own host ports --------------------
snap=$(snapshot_of w)
check_match "snapshot of w" '^snap-' "$snap"
f=$(fork_of "$snap")
check_match "fork of $snap" '^sbx-' "$f"
fhost=$(host_port "$f" 8080)
check_match "the fork publishes 8080" '^[0-9]+$' "$fhost"
ok "on a host port of its own" test "$fhost" != "$host"
ok "which accepts" connects "$fhost"
ok "the source's still accepts" connects "$host"

# --- close and terminate stop them at once ----------------------------------------------
ok "close 8080 of w" wr "$MNT/sandboxes/w/ports" "close 8080"
check_eq "w lists none" "" "$(rd "$MNT/sandboxes/w/ports")"
ok "its host port refuses" refuses "$host"
ok "terminate the fork" wr "$MNT/sandboxes/$f/terminate"
check_eq "a terminated sandbox lists none" "" "$(rd "$MNT/sandboxes/$f/ports")"
ok "the fork's host port refuses" refuses "$fhost"
expect_errno EBUSY "a terminated sandbox publishes nothing" wr "$MNT/sandboxes/$f/ports" 8080

# --- a spec's ports ---------------------------------------------------------------------
n=$(wr_read "$MNT/sandboxes/new" $'image=busybox\nports=8080 9090\n')
check_match "a sandbox from a spec with ports" '^sbx-' "$n"
check_eq "it publishes both" "8080 9090" "$(rd "$MNT/sandboxes/$n/ports" | awk '{print $1}' | xargs)"
ok "terminate $n" wr "$MNT/sandboxes/$n/terminate"

# --- a restart opens them again on the same host ports ---------------------------------
ok "publish 8081 of w" wr "$MNT/sandboxes/w/ports" 8081
host=$(host_port w 8081)
stop_daemon
start_daemon || bail "the daemon mounts again"
check_eq "after a restart, 8081 is on the same host port" "$host" "$(host_port w 8081)"
ok "and accepts" closed_at_once "$host"
ok "terminate w" wr "$MNT/sandboxes/w/terminate"
ok "its host port refuses" refuses "$host"
finish
