#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# `wait` blocks while an operation runs and prints the settled status; an
# interrupted wait, or an interrupted synchronous write, returns at once (EINTR)
# and the operation itself goes on and completes.
. "$(dirname "$0")/lib.sh"

# Enough memory that checkpointing and storing it takes a while.
FILL_MB=${FILL_MB:-512}
BOUND_MS=5000 # "at once", generously

start_daemon || bail "the daemon mounts"
make_sandbox big "dd if=/dev/urandom of=/tmp/fill bs=1M count=$FILL_MB iflag=fullblock 2>/dev/null; $COUNTER_ENTRYPOINT" ||
	bail "start sandbox big"
poll_until 600 sb_run big 'test -f /tmp/counter' || bail "sandbox big fills $FILL_MB MiB of /tmp"
B=$MNT/sandboxes/big
tok=$(counter_token "$(counter big)")

# returned_at_once DESC ELAPSED_MS BUSY: the interrupted call returned within
# BOUND_MS. BUSY is "yes" when the operation was still going on as it
# returned, which shows it did not wait for the operation; when the
# operation had ended first, this run cannot show that (a skip).
returned_at_once() {
	if [ "$2" -le "$BOUND_MS" ]; then
		pass "$1: returned in $2 ms"
	else
		fail "$1: returned after $2 ms (more than $BOUND_MS)"
	fi
	if [ "$3" = yes ]; then
		pass "$1: returned while the operation went on"
	else
		skip "$1: returned before the operation ended: the operation had already ended"
	fi
}
# interrupted_write DESC FILE: `echo 1 > FILE` from a shell that traps SIGINT,
# interrupted after 1 s: the write must fail with EINTR. Sets ELAPSED (ms).
interrupted_write() {
	local t0 err rc
	t0=$(now_ms)
	err=$(timeout -s INT -k 60 1 bash -c 'trap : INT; printf "1\n" >"$1"' _ "$2" 2>&1)
	rc=$?
	ELAPSED=$(($(now_ms) - t0))
	if [ "$rc" -eq 0 ]; then
		skip "$1: the operation ended within 1 s, before the interrupt came"
	else
		check_contains "$1: EINTR" "$(errno_text EINTR)" "$err"
	fi
}
is_transitional() {
	case $1 in
	starting | snapshotting | suspending | resuming | terminating | pending | in_progress) echo yes ;;
	*) echo no ;;
	esac
}

# --- wait blocks, then prints the settled status ---
ok "suspend async" wr "$B/suspend" async
st=$(sb_status big)
t0=$(now_ms)
out=$(sb_wait big)
t1=$(now_ms)
check_eq "wait prints the settled status" suspended "$out"
check_eq "and that is the status" suspended "$(sb_status big)"
if [ "$st" = suspending ]; then
	pass "wait blocked while suspending ($((t1 - t0)) ms)"
else
	skip "wait blocked while suspending: the sandbox was already $st when wait was read"
fi

# --- an interrupted wait returns at once; the operation completes ---
ok "resume async" wr "$B/resume" async
t0=$(now_ms)
timeout -s INT 1 cat "$B/wait" >/dev/null 2>&1
t1=$(now_ms)
st=$(sb_status big)
returned_at_once "timeout -s INT 1 cat sandboxes/big/wait during resume" $((t1 - t0)) \
	"$(is_transitional "$st")"
check_eq "the resume still completes" running "$(sb_wait big)"
ok "the sandbox answers after the resume" sb_run big true

# --- an interrupted synchronous snapshot write: EINTR, and the snapshot completes ---
prev=$(rd "$B/snapshot")
interrupted_write "an interrupted echo 1 > snapshot" "$B/snapshot"
id=$(rd "$B/snapshot")
st=$(snap_status "$id")
returned_at_once "the interrupted echo 1 > snapshot" "$ELAPSED" "$(is_transitional "$st")"
check_match "the snapshot was taken all the same" '^snap-[0-9a-f]{16}$' "$id"
ok "it is a new one" test "$id" != "$prev"
check_eq "it still completes" completed "$(snap_wait "$id")"
check_eq "the source runs" running "$(sb_status big)"

# --- an interrupted snapshot wait ---
id=$(wr_read "$B/snapshot" async | head -n 1)
t0=$(now_ms)
timeout -s INT 1 cat "$MNT/snapshots/$id/wait" >/dev/null 2>&1
t1=$(now_ms)
st=$(snap_status "$id")
returned_at_once "timeout -s INT 1 cat snapshots/ID/wait" $((t1 - t0)) "$(is_transitional "$st")"
check_eq "the snapshot still completes" completed "$(snap_wait "$id")"

# --- an interrupted synchronous suspend ---
interrupted_write "an interrupted echo 1 > suspend" "$B/suspend"
st=$(sb_status big)
returned_at_once "the interrupted echo 1 > suspend" "$ELAPSED" "$(is_transitional "$st")"
check_eq "the suspend still completes" suspended "$(sb_wait big)"
ok "resume" wr "$B/resume"
check_eq "the process is still the first one (token)" "$tok" "$(counter_token "$(counter big)")"

stop_daemon
finish
