#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# A sandbox's timeout (docs/design.md, "Resources and lifecycle"): at its
# deadline it is suspended or terminated as a write to those files would do
# it, events say why, the deadline survives a daemon killed and restarted,
# a fork's starts from the snapshot's setting or the fork write's, and bad
# values are EINVAL with a sentence. A suspend that cannot happen gives way
# to a terminate. Waits have generous bounds: no check
# fails on timing alone, only "not before its deadline" is a time check.
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"

# timeout_of SB: what a read of its timeout file says.
timeout_of() { rd "$MNT/sandboxes/$1/timeout"; }
# events_of SB REASON: the events of SB with that reason, as "status" lines.
events_of() { rd "$MNT/events" | jq -r --arg id "$1" --arg r "$2" \
	'select(.object == "sandbox" and .id == $id and .reason == $r) | .status'; }

# --- bad values ----------------------------------------------------------------
start_counter_sandbox t1 || bail "start sandbox t1"
check_eq "a fresh sandbox has no timeout" 0 "$(timeout_of t1)"
for bad in 1e99 -1 abc "3 explode" "3 suspend now" 99999999999 ""; do
	expect_refusal EINVAL "timeout '$bad'" t1 wr "$MNT/sandboxes/t1/timeout" "$bad"
done
check_eq "refused values leave no timeout" 0 "$(timeout_of t1)"
# A blank line ends a key=value spec: the write itself acts and fails.
expect_errno EINVAL "a spec with timeout=1e99" wr "$MNT/sandboxes/new" $'image=busybox\ntimeout=1e99\n'
expect_errno EINVAL "a JSON spec with timeout -1" wr "$MNT/sandboxes/new" \
	'{"image": "busybox", "timeout": -1}'
expect_errno EINVAL "a JSON spec with timeout 1e99" wr "$MNT/sandboxes/new" \
	'{"image": "busybox", "timeout": 1e99}'
check_contains "errors says what was wrong with the spec" "timeout" "$(rd "$MNT/errors" | tail -n 1)"

# --- timeout 3 suspend: suspended after 3 s, resumes with its state ----------------
tok=$(counter_token "$(counter t1)")
t0=$(now_ms)
ok "write 'timeout 3 suspend'" wr "$MNT/sandboxes/t1/timeout" "3 suspend"
check_eq "a read gives the setting, SECONDS ACTION" "3 suspend" "$(timeout_of t1)"
check_match "info.json gives the seconds left" '^[0-3]$' \
	"$(jget "$MNT/sandboxes/t1/info.json" .timeout.seconds_left)"
check_eq "info.json shows the timeout" "3 suspend" \
	"$(jget "$MNT/sandboxes/t1/info.json" '"\(.timeout.seconds) \(.timeout.action)"')"
check_match "info.json shows the deadline" '^[0-9]{4}-' \
	"$(jget "$MNT/sandboxes/t1/info.json" .timeout.deadline)"
ok "t1 is suspended within 120 s" poll_until 120 status_is t1 suspended
t1_ms=$(($(now_ms) - t0))
ok "not before its deadline (${t1_ms} ms after the write)" test "$t1_ms" -ge 3000
check_eq "events say why: the suspend was the timeout's" suspending "$(events_of t1 timeout | head -n 1)"
check_eq "a suspended sandbox's clock stands: it shows the whole setting" "3 suspend" "$(timeout_of t1)"
ok "its timeout can be cleared while suspended" wr "$MNT/sandboxes/t1/timeout" 0
check_eq "cleared, a read says 0" 0 "$(timeout_of t1)"
ok "resume t1" wr "$MNT/sandboxes/t1/resume"
check_eq "t1 runs again" running "$(sb_status t1)"
check_eq "t1 resumed with its state (token)" "$tok" "$(counter_token "$(counter t1)")"

# --- timeout 3: terminated -----------------------------------------------------------
start_counter_sandbox t2 || bail "start sandbox t2"
ok "write 'timeout 3'" wr "$MNT/sandboxes/t2/timeout" 3
check_eq "the action is terminate unless named" "3 terminate" "$(timeout_of t2)"
ok "t2 is terminated within 120 s" poll_until 120 status_is t2 terminated
check_eq "events say why: the terminate was the timeout's" terminating "$(events_of t2 timeout | head -n 1)"
expect_errno EBUSY "a terminated sandbox takes no timeout" wr "$MNT/sandboxes/t2/timeout" 5

# --- a spec's timeout, and the deadline across a daemon killed -----------------------
id=$(wr_read "$MNT/sandboxes/new" "$(printf 'image=busybox\ntimeout=5 suspend')" | head -n 1)
check_match "sandboxes/new with timeout=5 suspend" '^sbx-[0-9a-f]{16}$' "$id"
[ -n "$id" ] || bail "no sandbox from sandboxes/new"
check_eq "it runs" running "$(sb_status "$id")"
deadline=$(jget "$MNT/sandboxes/$id/info.json" .timeout.deadline)
check_match "its deadline is set" '^[0-9]{4}-' "$deadline"
kill -KILL "$DAEMON_PID"
wait_daemon_exit 60
unmount_mnt
sleep 6 # past the deadline while the daemon is down
start_daemon || bail "the daemon starts again on the same --state"
check_eq "after the restart the deadline is the same" "$deadline" \
	"$(jget "$MNT/sandboxes/$id/info.json" .timeout.deadline)"
ok "the deadline passed while down fires: suspended within 120 s" poll_until 120 status_is "$id" suspended
check_eq "events say why" suspending "$(events_of "$id" timeout | head -n 1)"

start_counter_sandbox t3 || bail "start sandbox t3"
ok "write 'timeout 600 suspend' to t3" wr "$MNT/sandboxes/t3/timeout" "600 suspend"
deadline=$(jget "$MNT/sandboxes/t3/info.json" .timeout.deadline)
stop_daemon
start_daemon || bail "the daemon starts again after an unmount"
check_eq "a deadline not yet due is kept across a restart" "$deadline" \
	"$(jget "$MNT/sandboxes/t3/info.json" .timeout.deadline)"
check_eq "it reads the setting" "600 suspend" "$(timeout_of t3)"
check_match "info.json has the seconds left" '^[0-9]+$' \
	"$(jget "$MNT/sandboxes/t3/info.json" '.timeout.seconds_left | select(. > 0 and . <= 600)')"

# --- a fork's deadline ------------------------------------------------------------------
s3=$(snapshot_of t3)
check_match "snapshot of t3" '^snap-[0-9a-f]{16}$' "$s3"
check_eq "the snapshot records the timeout" "600 suspend" \
	"$(jget "$MNT/snapshots/$s3/info.json" '"\(.timeout_s) \(.timeout_action)"')"
f1=$(fork_of "$s3")
check_match "a fork of it" '^sbx-[0-9a-f]{16}$' "$f1"
check_eq "the fork has the snapshot's timeout" "600 suspend" \
	"$(jget "$MNT/sandboxes/$f1/info.json" '"\(.timeout.seconds) \(.timeout.action)"')"
fork_created=$(jget "$MNT/sandboxes/$f1/info.json" '.created_at | sub("\\.[0-9]+";"") | fromdate')
fork_deadline=$(jget "$MNT/sandboxes/$f1/info.json" '.timeout.deadline | sub("\\.[0-9]+";"") | fromdate')
ok "its deadline starts when it starts" test "$fork_deadline" -ge $((fork_created + 600))
f2=$(wr_read "$MNT/snapshots/$s3/fork" "timeout=3" | head -n 1)
check_match "a fork with timeout=3" '^sbx-[0-9a-f]{16}$' "$f2"
check_eq "its timeout is the fork write's, its action the snapshot's" "3 suspend" \
	"$(timeout_of "$f2")"
ok "that fork is suspended within 120 s" poll_until 120 status_is "$f2" suspended
expect_errno EINVAL "a fork with timeout=abc" wr "$MNT/snapshots/$s3/fork" "timeout=abc"
check_eq "the other fork runs on" running "$(sb_status "$f1")"

# --- a suspend that cannot happen does not escape the deadline (security-3 N11) -----
# A checkpoint reserves the sandbox's memory limit in the spool: no disk holds 512 TiB,
# so the suspend is refused (ENOSPC) and the timeout terminates the sandbox instead.
D5=$MNT/sandboxes/t5
mkdir "$D5" && wr "$D5/image" busybox && wr "$D5/entrypoint" 'while :; do sleep 3600; done' &&
	wr "$D5/memory" 512T && wr "$D5/start" || bail "start sandbox t5 with a 512 TiB limit"
expect_errno ENOSPC "a snapshot of t5 is refused: its limit does not fit the spool" \
	wr "$D5/snapshot"
ok "write 'timeout 1 suspend' to t5" wr "$D5/timeout" "1 suspend"
ok "t5 is terminated in place of the suspend within 120 s" poll_until 120 status_is t5 terminated
check_eq "the terminate's event gives the reason" terminating \
	"$(events_of t5 timeout-suspend-failed | head -n 1)"
check_contains "its error says why" "the suspend failed" "$(rd "$D5/error")"
check_contains "and names the spool" "spool" "$(rd "$D5/error")"

stop_daemon
finish
