#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Two daemons, each with its own --state and mountpoint, on one store (as two
# hosts share a bucket): a snapshot taken on the first appears in the
# second's snapshots/ within a few seconds, forks there with the right
# state, and a delete on the first makes it disappear from the second.
# SHARED_STORE_URL picks the store (default: a local directory both use).
. "$(dirname "$0")/lib.sh"

SHARED_STORE_URL=${SHARED_STORE_URL:-file://$T/shared}
DAEMON_ARGS=(--store "$SHARED_STORE_URL")

# Host B's variables; `as_host B cmd` runs cmd with them in place of A's.
B_STATE=$T/b/state B_MNT=$T/b/mnt B_LOG=$T/b/daemon.log B_PID=""
mkdir -p "$B_STATE" "$B_MNT"

as_host_b() {
	local a_state=$STATE a_mnt=$MNT a_log=$DAEMON_LOG a_pid=$DAEMON_PID a_root=$RUNSC_ROOT rc
	STATE=$B_STATE MNT=$B_MNT DAEMON_LOG=$B_LOG DAEMON_PID=$B_PID RUNSC_ROOT=$B_STATE/runsc
	"$@"
	rc=$?
	B_PID=$DAEMON_PID
	STATE=$a_state MNT=$a_mnt DAEMON_LOG=$a_log DAEMON_PID=$a_pid RUNSC_ROOT=$a_root
	return "$rc"
}

# B first, then lib.sh's cleanup for A.
trap 'rc=$?; as_host_b teardown_host; (exit $rc); cleanup' EXIT

start_daemon || bail "daemon A mounts"
as_host_b start_daemon || bail "daemon B mounts"

start_counter_sandbox src || bail "start sandbox src on A"
sb_run src 'echo from-a > /root/from-a' >/dev/null
snap=$(snapshot_of src)
check_match "snapshot on A" '^snap-[0-9a-f]{16}$' "$snap"
at_snap=$(counter src)

listed_on_b() { grep -q "^$snap completed src$" "$B_MNT/snapshots/index"; }
ok "B lists A's snapshot within 10 s" poll_until 10 listed_on_b
check_eq "B's restorable says yes" yes "$(rd "$B_MNT/snapshots/$snap/restorable")"
check_eq "B's info.json names the source" src "$(jget "$B_MNT/snapshots/$snap/info.json" .sandbox_id)"

fork=$(as_host_b fork_of "$snap")
check_match "fork on B" '^sbx-[0-9a-f]{16}$' "$fork"
check_eq "the fork runs on B" running "$(as_host_b sb_status "$fork")"
check_eq "the fork has A's root-fs file" from-a "$(as_host_b sb_run "$fork" 'cat /root/from-a')"
got=$(as_host_b counter "$fork")
check_eq "the fork's counter starts from the snapshot's token" "$(counter_token "$at_snap")" \
	"$(counter_token "$got")"
ok "the fork's counter goes on from the snapshot's value" \
	test "$(counter_count "$got")" -ge "$(counter_count "$at_snap")"
check_eq "B's fork is not on A" "" "$(grep "^$fork " "$MNT/sandboxes/index")"

# Garbage collection across hosts: B, restarted so its store knows A's packs,
# snapshots its fork; that snapshot reuses A's packs, so A's delete of its
# own snapshot must leave them.
as_host_b stop_daemon
as_host_b start_daemon || bail "daemon B mounts again"
snap_b=$(as_host_b snapshot_of "$fork")
check_match "snapshot of the fork on B" '^snap-[0-9a-f]{16}$' "$snap_b"
check_contains "B's snapshot reuses a pack of A's" "\"$snap/" \
	"$(jq -c .packs "$B_MNT/snapshots/$snap_b/manifest.json")"
wr "$B_MNT/sandboxes/$fork/terminate" >/dev/null
ok "A deletes the snapshot" wr "$MNT/snapshots/$snap/delete"
if [[ $SHARED_STORE_URL == file://* ]]; then
	used=$(jq -r '.packs[]' "$B_MNT/snapshots/$snap_b/manifest.json" | grep "^$snap/" | head -n 1)
	ok "A's pack that B's snapshot uses is still in the store" \
		test -f "${SHARED_STORE_URL#file://}/packs/$used.pack"
fi
gone_on_b() { ! grep -q "^$snap " "$B_MNT/snapshots/index"; }
ok "the delete disappears from B within 10 s" poll_until 10 gone_on_b
expect_errno ENOENT "B's snapshot directory is gone" cat "$B_MNT/snapshots/$snap/status"

ok "B deletes its snapshot" wr "$B_MNT/snapshots/$snap_b/delete"
wr "$MNT/sandboxes/src/terminate" >/dev/null
as_host_b stop_daemon
stop_daemon
finish
