#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Periodic snapshots (docs/design.md, "The tree"): `autosnapshot every=2
# keep=3` takes a snapshot named auto-… every 2 s and deletes the oldest
# beyond 3; `0` stops; the ones kept fork; dedup keeps the store under 1.5
# times one snapshot; the setting survives a restart; bad values are EINVAL.
# The prune deletes only the timer's own: a user's `name=auto-…` stays.
# Every wait is on behaviour (how many were taken), with generous bounds.
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"
# State to keep: 8 MiB of random bytes in its in-memory /tmp, and a token
# made at start (so a fork is told to be its restored process). It then
# idles: what each snapshot adds is what the sandbox changed, next to nothing.
BLOB_ENTRYPOINT='head -c 8388608 /dev/urandom > /tmp/blob;
tok=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d " \n"); echo "$tok 1" > /tmp/counter;
while :; do sleep 3600; done'
make_sandbox a1 "$(printf '%s' "$BLOB_ENTRYPOINT" | tr '\n' ' ')" || bail "start sandbox a1"
poll_until 60 counter a1 || bail "a1 has made its state within 60 s"
AUTO=$MNT/sandboxes/a1/autosnapshot

# auto_snaps SB [STATUS]: its auto- snapshots (with that status), oldest first.
auto_snaps() {
	snapshots_jq "$1" 'select(.name // "" | startswith("auto-")) | "\(.created_at) \(.id) \(.status)"' |
		sort | awk -v st="${2:-}" 'st == "" || $3 == st { print $2 }'
}
# taken SB: how many auto snapshots the timer has begun (their events give the reason).
taken() { rd "$MNT/events" | jq -r --arg id "$1" \
	'select(.object == "sandbox" and .id == $id and .reason == "autosnapshot" and .status == "snapshotting") | .time' | wc -l; }
taken_over() { [ "$(taken a1)" -gt "$1" ]; }
taken_over_of() { [ "$(taken "$1")" -gt "$2" ]; }
store_bytes() { du -sb "$STATE/store" | cut -f1; }
all_settled() {
	local s
	for s in $(auto_snaps a1); do
		snap_status_is "$s" completed || snap_status_is "$s" failed || return 1
	done
}
count_is() { [ "$(auto_snaps a1 completed | wc -l)" -eq "$1" ]; }
store_under() { [ "$(store_bytes)" -lt "$1" ]; }

check_eq "no autosnapshot at first" 0 "$(rd "$AUTO")"
for bad in every=abc every=1e99 every=-1 "every=2 keep=0" "every=2 keep=1000" often ""; do
	expect_refusal EINVAL "autosnapshot '$bad'" a1 wr "$AUTO" "$bad"
done
check_eq "refused values leave it off" 0 "$(rd "$AUTO")"

tok=$(counter_token "$(counter a1)")
ok "write 'every=2 keep=3'" wr "$AUTO" "every=2 keep=3"
check_eq "a read shows the setting" "every=2 keep=3" "$(rd "$AUTO")"
check_eq "info.json shows it" "2 3" \
	"$(jget "$MNT/sandboxes/a1/info.json" '"\(.autosnapshot.every) \(.autosnapshot.keep)"')"
ok "the first auto snapshot completes within 120 s" poll_until 120 count_is 1
one=$(store_bytes)
note "the store with one snapshot: $one bytes"
ok "five auto snapshots are taken within 120 s (about ten seconds)" poll_until 120 taken_over 4
ok "write 0" wr "$AUTO" 0
check_eq "a read shows it off" 0 "$(rd "$AUTO")"
check_eq "info.json shows it off" null "$(jget "$MNT/sandboxes/a1/info.json" .autosnapshot)"
ok "the last one settles within 120 s" poll_until 120 all_settled
ok "three auto snapshots remain (the oldest deleted) within 120 s" poll_until 120 count_is 3
mapfile -t kept < <(auto_snaps a1 completed)
before=$(taken a1)
sleep 3
check_eq "no more are taken once stopped" "$before" "$(taken a1)"
for s in "${kept[@]}"; do
	name=$(jget "$MNT/snapshots/$s/info.json" .name)
	check_match "$s: named auto-…, its id snap-…" '^auto-[0-9]{8}T[0-9]{6}Z snap-[0-9a-f]{16}$' "$name $s"
	check_contains "$s: listed in snapshots/index" "$s completed a1" "$(rd "$MNT/snapshots/index")"
	note "$s: stored_bytes $(jget "$MNT/snapshots/$s/info.json" .stored_bytes)," \
		"size_bytes $(jget "$MNT/snapshots/$s/info.json" .size_bytes)"
	f=$(fork_of "$s")
	check_match "$s forks" '^sbx-[0-9a-f]{16}$' "$f"
	[ -n "$f" ] && check_eq "$s: the fork is a1's process (token)" "$tok" "$(counter_token "$(counter "$f")")"
	[ -n "$f" ] && wr "$MNT/sandboxes/$f/terminate"
done
limit=$((one * 3 / 2))
ok "the store holds less than 1.5 x one snapshot ($limit bytes) within 120 s" poll_until 120 store_under "$limit"
note "the store with three auto snapshots: $(store_bytes) bytes"

# A suspended sandbox's snapshot is never one a prune deletes, and no tick is taken while suspended.
ok "write 'every=1 keep=1'" wr "$AUTO" "every=1 keep=1"
ok "a1 suspends (a tick in flight refuses it for a moment)" poll_until 120 wr "$MNT/sandboxes/a1/suspend"
before=$(taken a1)
sleep 3
check_eq "no tick is taken while it is suspended" "$before" "$(taken a1)"
check_eq "its suspend snapshot is kept" completed "$(snap_status "$(suspend_snapshot_of a1)")"
ok "a1 resumes" wr "$MNT/sandboxes/a1/resume"
ok "ticks go on once it runs within 120 s" poll_until 120 taken_over "$before"
ok "keep=1 leaves one within 120 s" poll_until 120 count_is 1

stop_daemon
start_daemon || bail "the daemon starts again on the same --state"
check_eq "the setting survives a restart" "every=1 keep=1" "$(rd "$AUTO")"
before=$(taken a1)
ok "ticks go on after the restart within 120 s" poll_until 120 taken_over "$before"
ok "write 0" wr "$AUTO" 0

# The prune deletes only what the timer took (its mark in the registry), never a
# user's own snapshot, however it is named (security-3 N9).
make_sandbox a2 'while :; do sleep 3600; done' || bail "start sandbox a2"
AUTO2=$MNT/sandboxes/a2/autosnapshot
mine=()
for i in 1 2; do
	s=$(snapshot_of a2 name=auto-important-backup)
	check_match "hand-made snapshot $i of a2, named auto-important-backup" '^snap-[0-9a-f]{16}$' "$s"
	check_eq "hand-made snapshot $i completes" completed "$(snap_wait "$s")"
	mine+=("$s")
done
# the timer's: a2's auto- snapshots that are not the hand-made ones, with that status.
timers() {
	snapshots_jq a2 'select(.name // "" | startswith("auto-")) | "\(.id) \(.status)"' |
		awk -v mine="${mine[*]}" -v st="${1:-}" \
			'index(" " mine " ", " " $1 " ") == 0 && (st == "" || $2 == st) { print $1 }'
}
timers_completed_are() { [ "$(timers completed | wc -l)" -eq "$1" ]; }
timers_settled() {
	local s
	for s in $(timers); do
		snap_status_is "$s" completed || snap_status_is "$s" failed || return 1
	done
}
ok "write 'every=3600 keep=1' to a2" wr "$AUTO2" "every=3600 keep=1"
sleep 5 # the write kicks a pass, and its prune, at once; no tick falls due
for s in "${mine[@]}"; do
	check_eq "$s, hand-made auto-important-backup, is not pruned" completed "$(snap_status "$s")"
done
check_eq "no tick is taken before its time" "" "$(timers)"
ok "write 'every=1 keep=1' to a2" wr "$AUTO2" "every=1 keep=1"
ok "the timer takes three snapshots of a2 within 120 s" poll_until 120 taken_over_of a2 2
ok "write 0 to a2" wr "$AUTO2" 0
ok "a2's last tick settles within 120 s" poll_until 120 timers_settled
ok "keep=1 leaves one of the timer's own within 120 s" poll_until 120 timers_completed_are 1
for s in "${mine[@]}"; do
	check_eq "$s, hand-made, is still there after the prunes" completed "$(snap_status "$s")"
done
pruned=$(rd "$MNT/events" | jq -r \
	'select(.object == "snapshot" and .status == "deleted" and .reason == "autosnapshot") | .id')
for s in "${mine[@]}"; do check_lacks "$s has no deleted event" "$s" "$pruned"; done
check_match "the prune's deleted events give the reason autosnapshot" 'snap-' "$pruned"

stop_daemon
finish
