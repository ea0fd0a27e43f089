#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# The inside of a sandbox seen from the host (issue 23): console, usage, and
# exit_code in info.json, with the console's lost tail as a regression.
. "$(dirname "$0")/lib.sh"

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
ok "terminate talk" wr "$MNT/sandboxes/talk/terminate"
check_eq "talk is terminated" terminated "$(sb_status talk)"
ok "console is readable after terminate" grep -q first-line "$c"
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

finish
