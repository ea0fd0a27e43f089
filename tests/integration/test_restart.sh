#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Restarting the daemon on the same --state finds every sandbox and snapshot
# again; unmounting (fusermount3 -u, or SIGTERM) leaves sandboxes running.
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"
start_counter_sandbox r1 || bail "start sandbox r1"
poll_until 60 counter_at_least r1 2 || bail "the counter of r1 does not advance"
{ mkdir "$MNT/sandboxes/idle" && wr "$MNT/sandboxes/idle/image" busybox; } ||
	bail "mkdir sandboxes/idle, image busybox"
{ make_sandbox ended 'sleep 1000' && wr "$MNT/sandboxes/ended/terminate"; } ||
	bail "start and terminate sandbox ended"
s1=$(snapshot_of r1)
check_match "snapshot of r1" '^snap-[0-9a-f]{16}$' "$s1"
f1=$(fork_of "$s1")
check_match "fork of it" '^sbx-[0-9a-f]{16}$' "$f1"
[ -n "$f1" ] || bail "no fork"
tok=$(counter_token "$(counter r1)")
rid=$(runtime_id r1)
sandboxes_before=$(rd "$MNT/sandboxes/index" | sort)
snapshots_before=$(rd "$MNT/snapshots/index" | sort)
events_before=$(count_lines "$MNT/events")

# check_after_restart ROUND
check_after_restart() {
	local c
	check_eq "$1: sandboxes/index lists the same sandboxes" "$sandboxes_before" \
		"$(rd "$MNT/sandboxes/index" | sort)"
	check_eq "$1: snapshots/index lists the same snapshots" "$snapshots_before" \
		"$(rd "$MNT/snapshots/index" | sort)"
	check_eq "$1: the statuses" "running created terminated running" \
		"$(sb_status r1) $(sb_status idle) $(sb_status ended) $(sb_status "$f1")"
	check_eq "$1: idle kept its image" busybox "$(rd "$MNT/sandboxes/idle/image")"
	check_eq "$1: the fork's parent link" "../../snapshots/$s1" "$(readlink "$MNT/sandboxes/$f1/parent")"
	c=$(counter r1)
	check_eq "$1: r1 is the same process (token)" "$tok" "$(counter_token "$c")"
	check_eq "$1: the fork answers" rootfs "$(sb_run "$f1" 'cat /root/marker')"
	ok "$1: the events journal kept its lines" test "$(count_lines "$MNT/events")" -ge "$events_before"
}

stop_daemon
ok "after fusermount3 -u, r1 still runs in runsc" test "$(runsc_state_of "$rid")" = running
ok "its runsc-sandbox process is alive" runsc_process_alive "$rid"
start_daemon || bail "the daemon starts again on the same --state"
check_after_restart "restart 1"

s2=$(snapshot_of r1)
check_match "restart 1: a new snapshot of r1" '^snap-[0-9a-f]{16}$' "$s2"
check_eq "restart 1: it completes" completed "$(snap_status "$s2")"
f2=$(fork_of "$s2")
check_match "restart 1: a fork of it" '^sbx-[0-9a-f]{16}$' "$f2"
if [ -n "$f2" ]; then
	check_eq "restart 1: the fork runs" running "$(sb_status "$f2")"
	check_eq "restart 1: the fork is r1's process, restored (token)" "$tok" \
		"$(counter_token "$(counter "$f2")")"
fi
check_eq "restart 1: the first snapshot still forks" rootfs \
	"$(f=$(fork_of "$s1") && sb_run "$f" 'cat /root/marker')"
sandboxes_before=$(rd "$MNT/sandboxes/index" | sort)
snapshots_before=$(rd "$MNT/snapshots/index" | sort)
events_before=$(count_lines "$MNT/events")

# SIGTERM unmounts cleanly too.
kill -TERM "$DAEMON_PID"
wait_daemon_exit 60
check_eq "SIGTERM: the daemon exits with status 0" 0 "$?"
if is_mounted; then
	fail "SIGTERM: the mount is gone"
else
	pass "SIGTERM: the mount is gone"
fi
ok "SIGTERM: r1 still runs in runsc" test "$(runsc_state_of "$rid")" = running
start_daemon || bail "the daemon starts again after SIGTERM"
check_after_restart "restart 2"

stop_daemon
finish
