#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# The inside of a sandbox seen from the host (issue 23): console, usage, and
# exit_code in info.json, with the console's lost tail as a regression.
. "$(dirname "$0")/lib.sh"

NL=$'\n'

start_daemon || bail "the daemon mounts"

# --- console ---
ok "a never-started sandbox's console is empty" mkdir "$MNT/sandboxes/idle"
check_eq "console of a created sandbox reads empty" "" "$(rd "$MNT/sandboxes/idle/console")"
check_eq "console is 0400" 400 "$(stat -c %a "$MNT/sandboxes/idle/console")"
ok "rmdir idle" rmdir "$MNT/sandboxes/idle"

ok "start a sandbox that prints and then follows" \
	make_sandbox talk 'echo first-line; echo to-stderr >&2; i=0; while :; do i=$((i + 1)); echo "tick $i"; sleep 0.3; done'
c=$MNT/sandboxes/talk/console
ok "console holds the first line" poll_until 30 grep -q first-line "$c"
ok "console holds stderr too" poll_until 30 grep -q to-stderr "$c"
timeout 60 tail -n 0 -f "$c" >"$T/console.tail" 2>&1 &
tail_pid=$!
BG_PIDS+=("$tail_pid")
ok "tail -f console follows new lines" poll_until 30 grep -q tick "$T/console.tail"
kill "$tail_pid" 2>/dev/null

# --- usage (talk runs) ---
u=$MNT/sandboxes/talk/usage
usage=$(rd "$u")
for k in memory_bytes memory_peak_bytes cpu_seconds pids; do
	check_match "usage has $k" "(^|$NL)$k [0-9]" "$usage"
done
val() { printf '%s\n' "$usage" | awk -v k="$1" '$1 == k { print $2 }'; }
ok "memory_bytes is above 1 MiB" test "$(val memory_bytes)" -gt 1048576
ok "memory_peak_bytes is at least memory_bytes" test "$(val memory_peak_bytes)" -ge "$(val memory_bytes)"
check_match "cpu_seconds is a decimal" '^[0-9]+\.[0-9]{3}$' "$(val cpu_seconds)"
ok "pids counts the processes inside (sh and its sleep: at least 1)" test "$(val pids)" -ge 1
check_lacks "no rx_bytes without a network" rx_bytes "$usage"
note "usage of talk: $(printf "%s" "$usage" | tr "\n" " ")"
check_eq "usage is 0400" 400 "$(stat -c %a "$u")"
ok "terminate talk" wr "$MNT/sandboxes/talk/terminate"
check_eq "talk is terminated" terminated "$(sb_status talk)"
ok "console is readable after terminate" grep -q first-line "$c"
check_eq "usage of a terminated sandbox is empty" "" "$(rd "$u")"
check_eq "st_size of console is what a read gives" "$(rd "$c" | wc -c)" "$(stat -c %s "$c")"

# --- the lost tail (DESIGN §5 (a)): the last line before an exit at once is kept ---
for i in 1 2 3; do
	ok "start last$i, which prints a last line and exits at once" \
		make_sandbox "last$i" "echo the-last-line-$i; exit 0"
	ok "last$i becomes terminated" poll_until 30 status_is "last$i" terminated
	check_contains "last$i's console holds its last line" "the-last-line-$i" \
		"$(rd "$MNT/sandboxes/last$i/console")"
done
ok "rmdir last1" rmdir "$MNT/sandboxes/last1"
ok "console is gone with its sandbox" test ! -e "$MNT/sandboxes/last1/console"

# --- console: bounded, and a fork's is its own ---
ok "start a sandbox that prints 3 MB and then ticks" make_sandbox big \
	'head -c 3000000 /dev/zero | tr "\\0" x; echo; echo END; i=0; while :; do i=$((i + 1)); echo "tick $i"; sleep 0.3; done'
bc=$MNT/sandboxes/big/console
ok "big's console reaches END" poll_until 60 grep -q END "$bc"
ok "the console log stays bounded: at most 2 MiB" test "$(stat -c %s "$bc")" -le $((2 << 20))
ok "its newest output is kept" poll_until 30 grep -q tick "$bc"
snap=$(snapshot_of big)
check_match "snapshot of big" '^snap-' "$snap"
fork=$(fork_of "$snap")
check_match "fork of it" '^sbx-' "$fork"
ok "the fork's console gets the fork's ticks" poll_until 30 grep -q tick "$MNT/sandboxes/$fork/console"
check_lacks "the fork's console is its own: no END from before the snapshot" END \
	"$(rd "$MNT/sandboxes/$fork/console")"
ok "terminate the fork" wr "$MNT/sandboxes/$fork/terminate"
ok "terminate big" wr "$MNT/sandboxes/big/terminate"

# --- exit_code ---
ok "mkdir seven" mkdir "$MNT/sandboxes/seven"
check_eq "exit_code is null before a start" null "$(jget "$MNT/sandboxes/seven/info.json" .exit_code)"
ok "image of seven" wr "$MNT/sandboxes/seven/image" busybox
ok "entrypoint of seven exits 7 at once" wr "$MNT/sandboxes/seven/entrypoint" 'echo bye; exit 7'
ok "start seven" wr "$MNT/sandboxes/seven/start"
started=$(now_ms)
ok "seven becomes terminated" poll_until 30 status_is seven terminated
note "seven read terminated $(($(now_ms) - started)) ms after its start returned"
check_eq "info.json exit_code is 7" 7 "$(jget "$MNT/sandboxes/seven/info.json" .exit_code)"
check_eq "error says the status" "the sandbox's process exited with status 7" \
	"$(rd "$MNT/sandboxes/seven/error")"
check_eq "no exit_code_unknown when known" null \
	"$(jget "$MNT/sandboxes/seven/info.json" .exit_code_unknown)"

ok "start a sandbox that exits 0 at once" make_sandbox zero 'exit 0'
ok "zero becomes terminated" poll_until 30 status_is zero terminated
check_eq "its exit_code is 0" 0 "$(jget "$MNT/sandboxes/zero/info.json" .exit_code)"

ok "start a sandbox that is killed by a signal" make_sandbox killed 'kill -9 $$'
ok "killed becomes terminated" poll_until 30 status_is killed terminated
check_eq "its exit_code is 128+9" 137 "$(jget "$MNT/sandboxes/killed/info.json" .exit_code)"

zombies() { pgrep -c -r Z -P "$DAEMON_PID" || true; }
ok "the daemon leaves no zombie of what it adopted" poll_until 10 test "$(zombies)" = 0
check_eq "a running sandbox's exit_code is null" null \
	"$(jget "$MNT/sandboxes/talk/info.json" .exit_code)"
check_match "a terminated one's is null, with why" 'terminated' \
	"$(jget "$MNT/sandboxes/talk/info.json" .exit_code_unknown)"

# --- an end no daemon saw: exit_code null, with why ---
ok "start a sandbox that exits 4 after 4 s" make_sandbox later 'sleep 4; exit 4'
rid=$(runtime_id later)
stop_daemon
ok "its process ends while no daemon runs" poll_until 60 bash -c "$(declare -f runsc_process_alive); ! runsc_process_alive $rid"
start_daemon || bail "the daemon mounts again"
# The restart's reconciliation finds its container stopped: failed (docs/architecture.md "Restart").
ok "later is failed after the restart" poll_until 30 status_is later failed
check_eq "its exit_code is null" null "$(jget "$MNT/sandboxes/later/info.json" .exit_code)"
check_match "exit_code_unknown says why" 'no daemon ran' \
	"$(jget "$MNT/sandboxes/later/info.json" .exit_code_unknown)"
check_match "its error says its container stopped" 'stopped after a daemon restart' \
	"$(rd "$MNT/sandboxes/later/error")"
check_eq "seven's exit_code outlives the restart" 7 "$(jget "$MNT/sandboxes/seven/info.json" .exit_code)"
check_contains "the console outlives the restart" the-last-line-2 "$(rd "$MNT/sandboxes/last2/console")"

# --- the same end under a PID 1 that does not reap (CI's): the sandbox's
# process is a zombie, which runsc calls running (kill(pid, 0) succeeds);
# the restart must still call it failed, not running and then terminated.
stop_daemon
python3 "$(dirname "$0")/hold_orphans.py" "$T/held" "$SNAPFS_BIN" -f --state "$STATE" \
	--images "$IMAGES" "${DAEMON_ARGS[@]}" "$MNT" >>"$DAEMON_LOG" 2>&1 &
holder=$!
BG_PIDS+=("$holder")
ok "the daemon mounts under a subreaper that never reaps" poll_until 30 test -s "$MNT/version"
DAEMON_PID=$(cat "$T/held.pid")
ok "start a sandbox that exits 4 after 4 s, held" make_sandbox held 'sleep 4; exit 4'
held_pid=$(jget "$MNT/sandboxes/held/info.json" .pid)
unmount_mnt
ok "that daemon exits" poll_until 60 test -s "$T/held.rc"
check_eq "with status 0" 0 "$(cat "$T/held.rc" 2>/dev/null)"
DAEMON_PID=""
ok "its sandbox's process ends as a zombie" \
	poll_until 60 grep -q '^State:.*zombie' "/proc/$held_pid/status"
start_daemon || bail "the daemon mounts again"
ok "held is failed after the restart" poll_until 30 status_is held failed
check_match "its error says its container stopped" 'container is stopped after a daemon restart' \
	"$(rd "$MNT/sandboxes/held/error")"
ok "the restart did not wait on the zombie" grep -q 'nothing reaps it' "$DAEMON_LOG"
# The holder reaps it now, so that its container can be deleted.
kill -TERM "$holder"
ok "the zombie is reaped" poll_until 30 test ! -e "/proc/$held_pid"
ok "rmdir held" rmdir "$MNT/sandboxes/held"

finish
