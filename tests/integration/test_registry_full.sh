#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# The registry on a filesystem that fills up mid-operation (issue 11, item
# 4): the state directory is a small tmpfs, filled while a snapshot's
# checkpoint is held. The snapshot still completes, its sandbox runs on,
# `wait` answers, another sandbox terminates, and the statuses read true
# throughout; once space returns the registry's own rows are true again
# (read with sqlite3), and a restart finds them so. The spool and the store
# are elsewhere: it is the registry's disk that is full.
. "$(dirname "$0")/lib.sh"

command -v sqlite3 >/dev/null || bail "sqlite3 is missing (apt-get install sqlite3)"
mount -t tmpfs -o size=64m snapfs-test-state "$STATE" || bail "mount a tmpfs on $STATE"
trap 'rc=$?; teardown_host; umount -l "$STATE"; (exit $rc); cleanup' EXIT
mkdir -p "$T/spool" "$T/store"

# runsc, but a checkpoint waits while $T/hold exists ($T/held says it does).
real=$(command -v runsc) || bail "runsc is missing"
cat >"$T/runsc" <<EOF
#!/bin/sh
for a in "\$@"; do
	if [ "\$a" = checkpoint ]; then
		while [ -e "$T/hold" ]; do : >"$T/held"; sleep 0.1; done
		break
	fi
done
exec "$real" "\$@"
EOF
chmod 0755 "$T/runsc"
DAEMON_ARGS=(--runsc "$T/runsc" --spool "$T/spool" --store "file://$T/store")

# reg_state TABLE ID: the state the registry's own row holds.
reg_state() { sqlite3 -readonly "$STATE/registry.db" "SELECT state FROM $1 WHERE id = '$2'" 2>&1; }
reg_state_is() { [ "$(reg_state "$1" "$2")" = "$3" ]; }

start_daemon || bail "the daemon mounts"
start_counter_sandbox a || bail "start sandbox a"
start_counter_sandbox b || bail "start sandbox b"

: >"$T/hold"
wr_read "$MNT/sandboxes/a/snapshot" >"$T/snap-out" 2>"$T/snap-err" &
writer=$!
BG_PIDS+=("$writer")
poll_until 60 test -e "$T/held" || bail "the checkpoint of a is held"
snap=$(basename "$(ls -d "$MNT/sandboxes/a/snapshots/"* 2>/dev/null | tail -n 1)")
[ -n "$snap" ] || bail "the snapshot of a is listed"
check_eq "a is snapshotting while its checkpoint is held" snapshotting "$(sb_status a)"
timeout -k 5 "$OP_TIMEOUT" cat "$MNT/sandboxes/a/wait" >"$T/wait-out" 2>&1 &
waiter=$!
BG_PIDS+=("$waiter")

# Fill the state directory's filesystem to its last block.
dd if=/dev/zero of="$STATE/filler" bs=1M 2>/dev/null
dd if=/dev/zero of="$STATE/filler2" bs=4k 2>/dev/null
check_eq "the state directory is full" 0 "$(df --output=avail -B1 "$STATE" | tail -n 1 | tr -d ' ')"

rm -f "$T/hold"
if wait "$writer"; then
	pass "the snapshot completes although the registry's disk is full"
else
	fail "the snapshot completes although the registry's disk is full" "$(cat "$T/snap-err")"
fi
check_eq "its writer was told its id" "$snap" "$(head -n 1 "$T/snap-out")"
check_eq "the snapshot reads completed" completed "$(snap_status "$snap")"
check_eq "the sandbox reads running" running "$(sb_status a)"
if timeout 60 tail --pid="$waiter" -f /dev/null; then
	check_eq "a wait on the sandbox answers" running "$(cat "$T/wait-out")"
else
	fail "a wait on the sandbox answers within 60 s"
fi
check_eq "the snapshot's wait answers" completed "$(snap_wait "$snap")"
check_match "the sandbox answers an exec" '^[0-9a-f]+ [0-9]+$' "$(counter a)"
check_contains "the daemon says the registry refuses writes" "the registry refuses writes" \
	"$(cat "$DAEMON_LOG")"
check_eq "the registry's own row is still the old one" snapshotting "$(reg_state sandboxes a)"

ok "terminate b while the registry's disk is full" wr "$MNT/sandboxes/b/terminate"
check_eq "b reads terminated" terminated "$(sb_status b)"
check_eq "b's wait answers" terminated "$(sb_wait b)"
check_eq "b's row in the registry is still the old one" running "$(reg_state sandboxes b)"

rm -f "$STATE/filler" "$STATE/filler2"
ok "once space returns, the registry says a is running" poll_until 60 reg_state_is sandboxes a running
ok "and b terminated" poll_until 60 reg_state_is sandboxes b terminated
ok "and the snapshot completed" poll_until 60 reg_state_is snapshots "$snap" completed
check_eq "b's status is still true" terminated "$(sb_status b)"

stop_daemon
start_daemon || bail "the daemon mounts again"
check_eq "after a restart a is running" running "$(sb_status a)"
check_eq "b terminated" terminated "$(sb_status b)"
check_eq "and the snapshot completed" completed "$(snap_status "$snap")"
fork=$(fork_of "$snap")
check_eq "which forks" running "$(sb_status "$fork")"
kill_sandboxes
stop_daemon
finish
