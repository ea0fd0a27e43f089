#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Watching the tree (issue 24, item 9; docs/control-files.md, "Watching"):
# Linux raises no inotify event for a change the daemon makes on its own
# (a sandbox that ends), only for calls made through the mount, so
# inotifywait, entr and systemd .path units never fire on `status`. What
# works, each checked here on a sandbox whose process exits: poll() on
# `status` (POLLPRI), `tail -f events`, and examples/systemd/
# snapfs-on-state.sh (its unit checked with systemd-analyze verify).
. "$(dirname "$0")/lib.sh"

EXAMPLE=$REPO/examples/systemd/snapfs-on-state.sh
UNIT=$REPO/examples/systemd/snapfs-on-state@.service

start_daemon || bail "the daemon mounts"

# stop_bg: end the helpers this test started (they hold the mount open).
stop_bg() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	BG_PIDS=()
}

# --- inotify: none for the daemon's own change, events for calls through the mount ---
make_sandbox w 'sleep 4' || bail "start sandbox w"
S=$MNT/sandboxes/w
if command -v inotifywait >/dev/null; then
	inotifywait -m -e modify,attrib,close_write,delete_self --format '%w%f %e' \
		"$S/status" "$S/info.json" "$S/timeout" >"$T/inotify.log" 2>&1 &
	BG_PIDS+=($!)
	poll_until 10 grep -q "Watches established" "$T/inotify.log"
fi
# poll() on status: POLLPRI once the status differs from what this open file read.
python3 - "$S/status" >"$T/poll.log" 2>&1 <<'PY' &
import os, select, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
first = os.pread(fd, 64, 0).decode().strip()
p = select.poll()
p.register(fd, select.POLLPRI)
t0 = time.monotonic()
while time.monotonic() - t0 < 60:
    for _, ev in p.poll(60000):
        if ev & select.POLLPRI:
            print(first, "->", os.pread(fd, 64, 0).decode().strip())
            sys.exit(0)
print(first, "-> no POLLPRI in 60 s")
sys.exit(1)
PY
poll_pid=$!
BG_PIDS+=("$poll_pid")
# poll() on wait: readable at once while the state is settled (running).
ok "poll() on wait of a running sandbox: readable at once" timeout 10 python3 -c '
import os, select, sys
p = select.poll()
p.register(os.open(sys.argv[1], os.O_RDONLY), select.POLLIN)
sys.exit(0 if p.poll(1000) else 1)' "$S/wait"
tail -n 0 -f "$MNT/events" >"$T/tail.log" 2>&1 &
BG_PIDS+=($!)
ok "w ends on its own (terminated within 60 s)" poll_until 60 status_is w terminated
timeout 70 tail --pid="$poll_pid" -f /dev/null
wait "$poll_pid"
check_eq "poll() on status: POLLPRI came (exit 0)" 0 "$?"
check_eq "poll() on status: it read the change" "running -> terminated" "$(cat "$T/poll.log")"
ok "tail -f events shows w terminated" poll_until 10 grep -q '"id":"w","status":"terminated"' "$T/tail.log"
if command -v inotifywait >/dev/null; then
	sleep 1
	check_eq "no inotify event for the daemon's own change (status, info.json)" "" \
		"$(grep -v -e '^Setting up' -e '^Watches established' "$T/inotify.log")"
	expect_errno EBUSY "a write through the mount (timeout of a terminated sandbox)" wr "$S/timeout" 5
	ok "it raised inotify events: the watch was live" poll_until 10 grep -q "timeout MODIFY" "$T/inotify.log"
else
	skip "inotifywait is not installed (inotify-tools): the inotify checks"
fi
stop_bg

# --- the example: snapfs-on-state.sh ----------------------------------------------------
# A recheck of 120 s: a run within 30 s comes from the events line, not from the recheck.
make_sandbox w2 'sleep 5' || bail "start sandbox w2"
SNAPFS_RECHECK=120 "$EXAMPLE" --once "$MNT" w2 terminated \
	sh -c 'echo "$SNAPFS_SANDBOX $SNAPFS_STATUS" >"$1"' sh "$T/ran" &
ex_pid=$!
BG_PIDS+=("$ex_pid")
ok "snapfs-on-state.sh runs its command once w2 is terminated (within 30 s)" poll_until 30 test -s "$T/ran"
check_eq "with SNAPFS_SANDBOX and SNAPFS_STATUS" "w2 terminated" "$(cat "$T/ran" 2>/dev/null)"
timeout 30 tail --pid="$ex_pid" -f /dev/null
wait "$ex_pid"
check_eq "--once: it exits with the command's status" 0 "$?"
ok "a state reached already: the command runs at once" \
	timeout 30 "$EXAMPLE" --once "$MNT" w2 terminated true
SNAPFS_RECHECK=120 "$EXAMPLE" "$MNT" w2 suspended true 2>"$T/gone.err" &
ex_pid=$!
BG_PIDS+=("$ex_pid")
sleep 2
ok "rmdir w2" rmdir "$MNT/sandboxes/w2"
timeout 30 tail --pid="$ex_pid" -f /dev/null
wait "$ex_pid"
check_eq "the sandbox gone: it exits 3" 3 "$?"
check_contains "and says so" "w2 is gone" "$(cat "$T/gone.err")"
"$EXAMPLE" "$MNT" 2>/dev/null
check_eq "a bad command line: exit 2" 2 "$?"
stop_bg

# --- the unit ---------------------------------------------------------------------------
if command -v systemd-analyze >/dev/null && command -v scdoc >/dev/null; then
	mkdir -p "$T/man/man8" "$T/unit"
	scdoc <"$REPO/docs/man/snapfs.8.scd" >"$T/man/man8/snapfs.8"
	sed "s|/usr/local/libexec/snapfs-on-state.sh|$EXAMPLE|" "$UNIT" >"$T/unit/snapfs-on-state@web.service"
	out=$(MANPATH=$T/man systemd-analyze verify "$T/unit/snapfs-on-state@web.service" 2>&1)
	check_eq "systemd-analyze verify snapfs-on-state@web.service: clean" "0 " "$? $out"
else
	skip "systemd-analyze or scdoc missing: the unit's check"
fi

stop_daemon
finish
