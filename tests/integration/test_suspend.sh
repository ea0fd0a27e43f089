#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Suspend stops the sandbox and releases it; resume brings it back under the
# same id with its state; its snapshot cannot be deleted while it is suspended.
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"
start_counter_sandbox sus || bail "start sandbox sus with the counter entrypoint"
poll_until 60 counter_at_least sus 3 || bail "the counter of sus does not advance"
ok "write a file after start" sb_run sus 'echo kept > /root/kept; echo kept > /tmp/kept'
rid=$(runtime_id sus)
check_match "the runtime id is in info.json" '^[A-Za-z0-9_-]{8,}$' "$rid"
ok "its runsc-sandbox process runs" runsc_process_alive "$rid"

# suspend_and_check ROUND: suspend, check the sandbox is stopped and released.
suspend_and_check() {
	before=$(counter sus)
	tok=$(counter_token "$before")
	n_before=$(counter_count "$before")
	ok "$1: suspend (synchronous)" wr "$MNT/sandboxes/sus/suspend"
	check_eq "$1: status" suspended "$(sb_status sus)"
	check_eq "$1: wait prints it" suspended "$(sb_wait sus)"
	check_match "$1: runsc lists the container no more, or stopped" '^(|stopped)$' \
		"$(runsc_state_of "$rid")"
	if runsc_process_alive "$rid"; then
		fail "$1: no runsc-sandbox process with runtime id $rid is left"
	else
		pass "$1: no runsc-sandbox process with runtime id $rid is left"
	fi
	check_contains "$1: the index says suspended" "sus suspended" "$(rd "$MNT/sandboxes/index")"
}

# resume_and_check ROUND: resume, check it is the same sandbox with its state.
resume_and_check() {
	local c
	ok "$1: resume (synchronous)" wr "$MNT/sandboxes/sus/resume"
	check_eq "$1: status" running "$(sb_status sus)"
	check_eq "$1: same id" sus "$(jget "$MNT/sandboxes/sus/info.json" .id)"
	check_eq "$1: the root filesystem and /tmp files are there" "rootfs tmpfs kept kept" \
		"$(sb_run sus 'echo $(cat /root/marker /tmp/marker /root/kept /tmp/kept)')"
	sleep 2
	c=$(counter sus)
	check_eq "$1: the same process, restored (token)" "$tok" "$(counter_token "$c")"
	ok "$1: the counter continued ($n_before -> $(counter_count "$c"))" \
		test "$(counter_count "$c")" -ge "$n_before"
	rid=$(runtime_id sus)
	ok "$1: a runsc-sandbox process runs it again" runsc_process_alive "$rid"
}

suspend_and_check "suspend 1"
ssnap=$(suspend_snapshot_of sus)
check_match "sandboxes/sus/snapshots/ links the suspend snapshot" '^snap-[0-9a-f]{16}$' "$ssnap"
[ -n "$ssnap" ] || bail "no snapshot of kind suspend under sandboxes/sus/snapshots/"
check_eq "the suspend snapshot is completed" completed "$(snap_status "$ssnap")"
check_contains "snapshots/index lists it" "$ssnap completed sus" "$(rd "$MNT/snapshots/index")"
expect_errno EBUSY "delete the snapshot a suspended sandbox depends on" \
	wr "$MNT/snapshots/$ssnap/delete"
expect_errno EBUSY "rmdir of the snapshot a suspended sandbox depends on" rmdir "$MNT/snapshots/$ssnap"
check_eq "the snapshot is still there" completed "$(snap_status "$ssnap")"
check_eq "the sandbox is still suspended" suspended "$(sb_status sus)"
resume_and_check "resume 1"

# A second round: the resumed sandbox suspends and resumes again.
ok "write another file" sb_run sus 'echo round2 > /root/round2'
suspend_and_check "suspend 2"
resume_and_check "resume 2"
check_eq "the file written between the rounds is there" round2 "$(sb_run sus 'cat /root/round2')"

# Once the sandbox no longer depends on them, the suspend snapshots can go, and their data with them.
ok "terminate" wr "$MNT/sandboxes/sus/terminate"
check_eq "status" terminated "$(sb_status sus)"
store_before=$(du -sb "$STATE/store" | cut -f1)
deleted=0 ids=()
for l in "$MNT/sandboxes/sus/snapshots/"*; do
	[ -e "$l" ] || continue
	id=$(basename "$l")
	ids+=("$id")
	ok "delete snapshot $id" wr "$MNT/snapshots/$id/delete"
	deleted=$((deleted + 1))
	ok "snapshot $id is gone from the tree" test ! -e "$MNT/snapshots/$id"
	check_lacks "snapshot $id is gone from the index" "$id" "$(rd "$MNT/snapshots/index")"
	check_eq "the manifest of $id is gone" "" \
		"$(find "$STATE/store" -name "$id.json" -not -path '*/tombstones/*')"
	ok "a tombstone says $id was deleted" test -e "$STATE/store/tombstones/$id.json"
done
# The store shares chunks between snapshots: their packs go with the last one using them.
for id in "${ids[@]}"; do
	check_eq "no stored file of $id is left" "" \
		"$(find "$STATE/store" -path "*$id*" -not -path '*/tombstones/*')"
done
if [ -e "$MNT/snapshots/$ssnap" ]; then
	fail "the first suspend snapshot $ssnap is gone"
fi
check_eq "no stored file of $ssnap is left" "" \
	"$(find "$STATE/store" -path "*$ssnap*" -not -path '*/tombstones/*')"
store_after=$(du -sb "$STATE/store" | cut -f1)
if [ "$deleted" -gt 0 ]; then
	ok "the store shrank ($store_before -> $store_after bytes)" test "$store_after" -lt "$store_before"
else
	note "the daemon had already removed the suspend snapshots after resume"
fi
ok "rmdir the sandbox" rmdir "$MNT/sandboxes/sus"

stop_daemon
finish
