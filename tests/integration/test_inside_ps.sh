#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sandboxes/<id>/ps (issue 23): one line per process inside, as its agent
# reads the sandbox's /proc, under a header; the agent's keeper is not one
# of them; a sandbox that does not run answers as root/ does.
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"

make_sandbox box 'sleep 1000' || bail "sandbox box starts"
sb_wait box >/dev/null
P=$MNT/sandboxes/box/ps

check_eq "ps is 0400 and the owner's" "400 0" "$(stat -c '%a %u' "$P")"
out=$(rd "$P")
note "$(printf '%s\n' "$out" | head -n 8)"
check_match "the header line" '^ *PID +PPID +UID +STATE +RSS +TIME +COMMAND$' \
	"$(printf '%s\n' "$out" | head -n 1)"
rows=$(printf '%s\n' "$out" | tail -n +2)
check_eq "PID 1 is listed" 1 "$(printf '%s\n' "$rows" | awk '$1 == 1' | wc -l)"
check_contains "the entrypoint (sleep) is listed" "sleep 1000" "$rows"
check_lacks "the agent's keeper is not listed" "snapfs-agent" "$rows"
check_match "each row has 7 fields, RSS a number, TIME [[DD-]HH:]MM:SS" \
	'^ok$' "$(printf '%s\n' "$rows" | awk '
		NF < 7 || $1 !~ /^[0-9]+$/ || $5 !~ /^[0-9]+$/ ||
		$6 !~ /^(([0-9]+-)?[0-9][0-9]:)?[0-9][0-9]:[0-9][0-9]$/ || $4 !~ /^[RSDZTtXxKWIP]$/ { bad = 1; print }
		END { if (!bad) print "ok" }')"

# shellcheck disable=SC2016 # $! is the sandbox shell's
pid=$(sb_run box 'sleep 1001 >/dev/null 2>&1 & echo $!')
check_match "a process the test starts inside" '^[0-9]+$' "$pid"
check_eq "it is listed, by its pid" "sleep 1001" \
	"$(rd "$P" | awk -v p="$pid" '$1 == p { print $7, $8 }')"
ok "kill it" sb_run box "kill $pid"

# --- a sandbox that does not run -----------------------------------------------------
ok "suspend" wr "$MNT/sandboxes/box/suspend"
sb_wait box >/dev/null
check_eq "suspended" suspended "$(sb_status box)"
expect_errno EBUSY "ps of a suspended sandbox" cat "$P"
check_lacks "error is not rewritten" "ps" "$(rd "$MNT/sandboxes/box/error")"
ok "resume" wr "$MNT/sandboxes/box/resume"
sb_wait box >/dev/null
check_contains "ps after the resume lists the entrypoint" "sleep 1000" "$(rd "$P")"
ok "terminate" wr "$MNT/sandboxes/box/terminate"
sb_wait box >/dev/null
expect_errno ENOENT "ps of a terminated sandbox" cat "$P"

finish
