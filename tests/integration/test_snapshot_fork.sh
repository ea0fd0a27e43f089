#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Snapshot a running sandbox, fork it twice: each fork starts from the snapshot
# (memory, root filesystem, /tmp), then they diverge; the source keeps running;
# the snapshot outlives its source.
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"
start_counter_sandbox src || bail "start sandbox src with the counter entrypoint"
# A few ticks first, so that a counter restarted from 0 would stand out.
poll_until 60 counter_at_least src 4 || bail "the counter of src does not advance"

before=$(counter src)
tok=$(counter_token "$before")
n_before=$(counter_count "$before")
snap=$(snapshot_of src)
check_match "snapshot: its id is read on the same open file" '^snap-[0-9a-f]{16}$' "$snap"
[ -n "$snap" ] || bail "no snapshot id"
check_eq "the synchronous write returned once the snapshot completed" completed "$(snap_status "$snap")"
check_eq "a fresh read of snapshot gives the newest id" "$snap" "$(rd "$MNT/sandboxes/src/snapshot")"
check_eq "the source is running again" running "$(sb_status src)"
ok "the source writes a file after the snapshot" sb_run src 'echo after > /root/after'
sleep 2
after=$(counter src)
check_eq "the source's process is the same one (token)" "$tok" "$(counter_token "$after")"
ok "the source's counter went on ($n_before -> $(counter_count "$after"))" \
	test "$(counter_count "$after")" -gt "$n_before"

info=$MNT/snapshots/$snap/info.json
check_eq "info.json kind" snapshot "$(jget "$info" .kind)"
check_eq "info.json sandbox_id" src "$(jget "$info" .sandbox_id)"
check_eq "info.json status" completed "$(jget "$info" .status)"
check_match "info.json size_bytes" '^[1-9][0-9]*$' "$(jget "$info" .size_bytes)"
check_match "info.json pause_ms" '^[0-9]+$' "$(jget "$info" .pause_ms)"
check_contains "info.json host names the runsc version" 20240729 "$(jq -c .host <"$info")"
check_eq "progress is DONE TOTAL, equal when completed" yes \
	"$(rd "$MNT/snapshots/$snap/progress" | awk '{ print ($1 == $2 && NF == 2) ? "yes" : $0 }')"
check_eq "restorable on this host" yes "$(rd "$MNT/snapshots/$snap/restorable")"
ok "manifest.json is JSON" jq -e . "$MNT/snapshots/$snap/manifest.json"
check_eq "the error file is empty" "" "$(rd "$MNT/snapshots/$snap/error")"
check_contains "snapshots/index lists it" "$snap completed src" "$(rd "$MNT/snapshots/index")"
check_eq "snapshots/ID/source links to the sandbox" ../../sandboxes/src \
	"$(readlink "$MNT/snapshots/$snap/source")"
check_eq "sandboxes/src/snapshots/ID links to the snapshot" "../../../snapshots/$snap" \
	"$(readlink "$MNT/sandboxes/src/snapshots/$snap")"
ok "the link resolves" test -f "$MNT/sandboxes/src/snapshots/$snap/status"

# check_fork ID LABEL: a fork starts from the snapshot.
check_fork() {
	local f=$1 c
	check_match "$2: id" '^sbx-[0-9a-f]{16}$' "$f"
	check_eq "$2: running" running "$(sb_status "$f")"
	check_eq "$2: parent links to the snapshot" "../../snapshots/$snap" \
		"$(readlink "$MNT/sandboxes/$f/parent")"
	check_eq "$2: info.json parent_snapshot" "$snap" "$(jget "$MNT/sandboxes/$f/info.json" .parent_snapshot)"
	check_eq "$2: the root filesystem file from before the snapshot" rootfs "$(sb_run "$f" 'cat /root/marker')"
	check_eq "$2: the /tmp file from before the snapshot" tmpfs "$(sb_run "$f" 'cat /tmp/marker')"
	check_eq "$2: no file the source wrote after the snapshot" no \
		"$(sb_run "$f" 'test -e /root/after && echo yes || echo no')"
	sleep 2
	c=$(counter "$f")
	check_eq "$2: the same process, restored (token)" "$tok" "$(counter_token "$c")"
	ok "$2: its counter continues from the snapshot ($n_before -> $(counter_count "$c"))" \
		test "$(counter_count "$c")" -ge "$n_before"
}

fork1=$(fork_of "$snap")
[ -n "$fork1" ] || bail "fork 1: echo 1 > snapshots/$snap/fork gave no id"
check_fork "$fork1" "fork 1"
fork2=$(fork_of "$snap")
[ -n "$fork2" ] || bail "fork 2: echo 1 > snapshots/$snap/fork gave no id"
check_fork "$fork2" "fork 2"
ok "the two forks have different ids" test "$fork1" != "$fork2"
check_eq "a fresh read of fork lists both" "$(printf '%s\n%s' "$fork1" "$fork2")" \
	"$(rd "$MNT/snapshots/$snap/fork")"

# They diverge: what one writes, neither the other nor the source sees.
ok "fork 1 writes its files" sb_run "$fork1" 'echo one > /root/mine; echo one > /tmp/mine'
ok "fork 2 writes its files" sb_run "$fork2" 'echo two > /root/mine; echo two > /tmp/mine'
check_eq "fork 1 sees its own" "one one" "$(sb_run "$fork1" 'echo $(cat /root/mine /tmp/mine)')"
check_eq "fork 2 sees its own" "two two" "$(sb_run "$fork2" 'echo $(cat /root/mine /tmp/mine)')"
check_eq "the source sees neither" "none" \
	"$(sb_run src 'cat /root/mine /tmp/mine 2>/dev/null || echo none')"
check_eq "the source still has its own file" after "$(sb_run src 'cat /root/after')"
c1=$(counter "$fork1")
c2=$(counter "$fork2")
sleep 2
check_eq "fork 1 is still running" running "$(sb_status "$fork1")"
ok "fork 1's counter advanced" test "$(counter_count "$(counter "$fork1")")" -gt "$(counter_count "$c1")"
ok "fork 2's counter advanced" test "$(counter_count "$(counter "$fork2")")" -gt "$(counter_count "$c2")"

# The snapshot outlives its source.
ok "terminate the source" wr "$MNT/sandboxes/src/terminate"
ok "rmdir the source" rmdir "$MNT/sandboxes/src"
check_eq "the snapshot is still completed" completed "$(snap_status "$snap")"
check_eq "the forks still run" "running running" "$(sb_status "$fork1") $(sb_status "$fork2")"
fork3=$(fork_of "$snap")
check_match "fork after the source is gone: id" '^sbx-[0-9a-f]{16}$' "$fork3"
if [ -n "$fork3" ]; then
	check_eq "fork 3 is running" running "$(sb_status "$fork3")"
	check_eq "fork 3 has the snapshot's files" "rootfs tmpfs" \
		"$(sb_run "$fork3" 'echo $(cat /root/marker /tmp/marker)')"
	check_eq "fork 3 is the restored process (token)" "$tok" "$(counter_token "$(counter "$fork3")")"
fi

# Deleting the snapshot touches none of its forks.
ok "rmdir the snapshot" rmdir "$MNT/snapshots/$snap"
ok "it is gone" test ! -e "$MNT/snapshots/$snap"
check_eq "the forks still run" "running running" "$(sb_status "$fork1") $(sb_status "$fork2")"
check_eq "fork 1 still answers" "one" "$(sb_run "$fork1" 'cat /root/mine')"

stop_daemon
finish
