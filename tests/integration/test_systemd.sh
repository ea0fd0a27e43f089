#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317 # SC2317: functions called from the trap and by ok
# systemd/snapfs.service run as systemd would, without a running systemd:
# its ExecStartPre and ExecStart with NOTIFY_SOCKET (a listener of this
# test's on a unix datagram socket), in a cgroup standing for the unit's,
# options from an environment file as /etc/default/snapfs gives them.
# - READY=1 comes only once the mount answers: while the daemon is held
#   between its mount and its loop (a runsc call of its start-up held by
#   this test), no READY has come; when READY comes the mount answers.
# - ExecStop unmounts; the daemon then exits 0 after STOPPING=1.
# - A stop as KillMode=mixed does it (ExecStop, SIGTERM to the daemon,
#   SIGKILL to what is left in the unit's cgroup) and a start again leave a
#   busybox sandbox started before it running, the same process.
# - READY=1 is sent only once the loop serves: caught in its sendto (the
#   listener's queue full), the mount answers at once.
# - SIGTERM while the daemon starts (held between mount and loop) lets the
#   step end, then the daemon unmounts and exits 0: no ENOTCONN mount.
# - ExecReload (SIGHUP) keeps the daemon serving; in the background, SIGHUP
#   reopens snapfs.log after it was renamed.
. "$(dirname "$0")/lib.sh"

CG_PARENT=/$(basename "$T")-sandboxes
CG_UNIT=/$(basename "$T")-unit
mapfile -t CG_ROOTS < <(awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/self/mounts)
CG_MADE=()
LISTENER_PID=""
BG_DAEMON="" # the daemonized daemon of the last part (not our child)

cg_pids() {
	[ -d "$1" ] || return 0
	find "$1" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u
}
unit_pids() { for root in "${CG_ROOTS[@]}"; do cg_pids "$root$CG_UNIT"; done | sort -u; }
cg_cleanup() {
	local d p _
	[ -n "$BG_DAEMON" ] && kill -TERM "$BG_DAEMON" 2>/dev/null
	[ -n "$LISTENER_PID" ] && kill -KILL "$LISTENER_PID" 2>/dev/null
	teardown_host
	for p in $(unit_pids); do kill -KILL "$p" 2>/dev/null; done
	for d in "${CG_MADE[@]}"; do
		for _ in $(seq 1 50); do
			[ -d "$d" ] || break
			find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
			sleep 0.1
		done
	done
}
# shellcheck disable=SC2154 # rc is set in the trap itself
trap 'rc=$?; cg_cleanup; (exit $rc); cleanup' EXIT

command -v python3 >/dev/null || bail "python3 is missing (scripts/setup.sh --test)"
[ "${#CG_ROOTS[@]}" -gt 0 ] || bail "no cgroup hierarchy is mounted"

# --- the unit's settings -------------------------------------------------------
UNIT_SRC=$REPO/systemd/snapfs.service
# unit_val KEY: the last KEY= of the unit's source.
unit_val() { sed -n "s/^$1=//p" "$UNIT_SRC" | tail -n 1; }
check_eq "Type=notify" notify "$(unit_val Type)"
check_eq "KillMode=mixed: SIGTERM to the daemon, SIGKILL to its runsc calls left" mixed "$(unit_val KillMode)"
check_eq "Delegate=no: nothing of the daemon's below its cgroup" no "$(unit_val Delegate)"
check_eq "options from /etc/default/snapfs" -/etc/default/snapfs "$(unit_val EnvironmentFile)"
check_contains "ExecStart keeps the daemon in the foreground (-f)" " -f " " $(unit_val ExecStart) "

# The unit as installed here: the binary is a wrapper that joins the unit's
# cgroup first, as systemd puts a service's main process in its own.
make_daemon_cgroups "$CG_UNIT" "$CG_PARENT" || bail "make the unit's cgroup $CG_UNIT"
mkdir -p "$T/bin"
cat >"$T/bin/snapfs" <<EOF
#!/bin/sh
for d in ${DAEMON_CG_DIRS[*]}; do echo \$\$ >"\$d/cgroup.procs" || exit 1; done
exec "$SNAPFS_BIN" "\$@"
EOF
chmod +x "$T/bin/snapfs"
UNIT=$T/snapfs.service
sed "s|@BINDIR@|$T/bin|g" "$UNIT_SRC" >"$UNIT"

# runsc, but its start-up `checkpoint` help call (between the mount and the
# loop: ops_start()) waits while $T/gate exists, saying so in $T/gate-held.
real_runsc=$(command -v runsc) || bail "runsc is missing"
cat >"$T/runsc" <<EOF
#!/bin/sh
case " \$* " in
*" checkpoint "*)
	if [ -e "$T/gate" ]; then
		: >"$T/gate-held"
		while [ -e "$T/gate" ]; do sleep 0.1; done
	fi ;;
esac
exec "$real_runsc" "\$@"
EOF
chmod +x "$T/runsc"

cat >"$T/default" <<EOF
SNAPFS_MOUNTPOINT=$MNT
SNAPFS_OPTIONS="--state $STATE --images $IMAGES --cgroup-parent $CG_PARENT --runsc $T/runsc"
EOF

# unit_cmds KEY: each KEY= command line, its words expanded as systemd does
# ($VAR split, ${VAR} whole, also inside quotes; "-" dropped), one command a
# line, words NUL-joined.
unit_cmds() {
	local line
	sed -n "s/^$1=//p" "$UNIT" | while IFS= read -r line; do
		line=${line#-}
		# shellcheck disable=SC1090,SC1091,SC2034,SC2086
		(set -a && . "$T/default" && MAINPID=$DAEMON_PID && for k in SNAPFS_MOUNTPOINT SNAPFS_OPTIONS MAINPID; do
			line=${line//"\${$k}"/"${!k}"} # systemd replaces ${VAR} in quoted words too
		done && eval "printf '%s\\0' $line") | tr '\0' '\037'
		echo
	done
}
# run_unit KEY: run KEY's commands in turn as systemd does; ExecStart in the background.
run_unit() {
	local cmd words
	while IFS= read -r cmd; do
		IFS=$'\037' read -r -a words <<<"${cmd%$'\037'}"
		if [ "$1" = ExecStart ]; then
			echo "=== $(date +%T) ExecStart: ${words[*]}" >>"$DAEMON_LOG"
			NOTIFY_SOCKET=$T/notify.sock "${words[@]}" </dev/null >>"$DAEMON_LOG" 2>&1 &
			DAEMON_PID=$!
		else
			"${words[@]}" >>"$DAEMON_LOG" 2>&1 || [ "$1" = ExecStartPre ] || return 1
		fi
	done < <(unit_cmds "$1")
}

# The NOTIFY_SOCKET listener: one line per datagram in $T/notify.log. At
# READY=1 it checks at once that the mount answers (stat of version, within
# 2 s: a mount that serves answers in milliseconds) and says "READY
# answered" or "READY unanswered". PAUSE (the test's) stops it reading until
# the file PAUSE_FILE is gone, so the test can fill its queue and catch the
# daemon's READY=1 in its sendto (tests below); FILL datagrams are not logged.
cat >"$T/listen.py" <<'EOF'
import os, socket, subprocess, sys, time
sock_path, log_path, mnt, pause_file = sys.argv[1:5]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sock_path)
with open(log_path, "a", buffering=1) as log:
    log.write("listening\n")
    while True:
        msg = s.recv(4096).decode(errors="replace")
        for line in msg.splitlines():
            if line == "READY=1":
                r = subprocess.run(["timeout", "2", "stat", mnt + "/version"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                log.write("READY %s\n" % ("answered" if r.returncode == 0 else "unanswered"))
            elif line == "PAUSE":
                log.write("paused\n")
                while os.path.exists(pause_file):
                    time.sleep(0.1)
            elif line != "FILL":
                log.write(line + "\n")
EOF
python3 "$T/listen.py" "$T/notify.sock" "$T/notify.log" "$MNT" "$T/paused" &
LISTENER_PID=$!
disown "$LISTENER_PID" # killed by the trap: no "Killed" from the shell
poll_until 30 grep -qx listening "$T/notify.log" || bail "the NOTIFY_SOCKET listener starts"
# notify TEXT: a datagram of this test's to the socket, ordered with the daemon's.
notify() { python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(sys.argv[2].encode(), sys.argv[1])' "$T/notify.sock" "$1"; }
ready_at_least() { [ "$(grep -c '^READY' "$T/notify.log")" -ge "$1" ]; }

# --- readiness -------------------------------------------------------------------
: >"$T/gate"
run_unit ExecStartPre || bail "ExecStartPre"
run_unit ExecStart
poll_until 120 test -e "$T/gate-held" || bail "the daemon reaches its start-up runsc call"
ok "held between mount and loop: the mount is there" is_mounted
notify HELD
poll_until 30 grep -qx HELD "$T/notify.log" || bail "the listener hears the test's datagram"
check_eq "no READY=1 before the mount answers" "listening HELD" "$(tr '\n' ' ' <"$T/notify.log" | sed 's/ $//')"
# The READY=1 datagram is caught in the daemon's sendto: the listener stops
# reading and its queue is filled, so the daemon's thread that sends READY=1
# blocks there (unix_wait_for_peer). The mount must answer then: READY=1 is
# sent after the loop serves. A READY=1 sent by the main thread before
# fs_loop() would hold it out of the loop, and the stat would time out.
: >"$T/paused"
notify PAUSE
poll_until 30 grep -qx paused "$T/notify.log" || bail "the listener pauses"
fill=$(python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.setblocking(False); n = 0
try:
    while True: s.sendto(b"FILL", sys.argv[1]); n += 1
except BlockingIOError: print(n)' "$T/notify.sock")
note "the listener's queue is full after $fill datagrams"
rm -f "$T/gate"
sending_blocked() { grep -qx unix_wait_for_peer /proc/"$DAEMON_PID"/task/*/wchan; }
poll_until 120 sending_blocked || bail "the daemon sends READY=1 once released" "$(cat "$T/notify.log")"
ok "while READY=1 waits to be sent the mount answers at once (stat within 2 s)" timeout 2 stat "$MNT/version"
rm -f "$T/paused"
poll_until 120 grep -q '^READY' "$T/notify.log" || bail "READY=1 once released" "$(cat "$T/notify.log")"
check_eq "when READY=1 comes the mount answers (stat within 2 s)" "READY answered" "$(grep '^READY' "$T/notify.log")"

# --- a sandbox, then a stop as KillMode=mixed does it -------------------------------
setup_images || bail "busybox image"
start_counter_sandbox c1 || bail "start sandbox c1"
tok=$(counter_token "$(counter c1)")
rid=$(runtime_id c1)
sandbox_pid=$(timeout 30 runsc --root "$RUNSC_ROOT" state "$rid" | jq -r '.pid // empty')
check_match "c1's runsc-sandbox has a pid" '^[0-9]+$' "$sandbox_pid"
check_lacks "c1's runsc-sandbox is not in the unit's cgroup" " $sandbox_pid " " $(unit_pids | tr '\n' ' ') "

run_unit ExecStop
check_eq "ExecStop exits 0" 0 "$?"
ok "ExecStop unmounts" bash -c "! awk -v m='$MNT' '\$2 == m { f = 1 } END { exit !f }' /proc/mounts"
# systemd then sends SIGTERM to the main process, waits for it, and SIGKILLs the rest of the cgroup.
main_pid=$DAEMON_PID
kill -TERM "$main_pid" 2>/dev/null
wait_daemon_exit 300
check_eq "the daemon exits 0 after ExecStop and SIGTERM" 0 "$?"
check_contains "STOPPING=1 was sent" STOPPING=1 "$(cat "$T/notify.log")"
left=$(unit_pids | tr '\n' ' ')
[ -n "$left" ] && note "left in the unit's cgroup, killed: $left"
for p in $left; do kill -KILL "$p" 2>/dev/null; done
check_eq "c1 is still running in runsc after the stop" running "$(runsc_state_of "$rid")"

run_unit ExecStartPre || bail "ExecStartPre again"
run_unit ExecStart
poll_until 120 ready_at_least 2 || bail "READY=1 after the restart" "$(cat "$T/notify.log")"
check_eq "the second READY=1 also comes with the mount answering" "READY answered" "$(grep '^READY' "$T/notify.log" | tail -n 1)"
check_eq "after the restart c1 is running" running "$(sb_status c1)"
check_eq "c1 is the same process (token)" "$tok" "$(counter_token "$(counter c1)")"

# ExecStartPre of a start while a daemon serves the mountpoint (one started by
# hand) leaves that live mount alone; it only clears a dead one (below).
run_unit ExecStartPre
ok "ExecStartPre leaves a live mount mounted" is_mounted
check_eq "after ExecStartPre the live mount still answers" running "$(sb_status c1)"

# --- reload ------------------------------------------------------------------------
run_unit ExecReload
check_eq "ExecReload exits 0" 0 "$?"
poll_until 30 grep -q "SIGHUP: logging to stderr" "$DAEMON_LOG"
check_eq "after SIGHUP the daemon says so in its log" 0 "$?"
ok "after SIGHUP the daemon still runs" kill -0 "$DAEMON_PID"
check_eq "after SIGHUP the mount answers" running "$(sb_status c1)"
run_unit ExecStop
wait_daemon_exit 300
check_eq "the daemon exits 0 after the second ExecStop" 0 "$?"

# --- SIGTERM while the daemon starts (systemctl stop while activating) ------------------
# Held between its mount and its loop; before, SIGTERM had its default action
# there, killed the daemon mid-step and left a mount answering ENOTCONN.
rm -f "$T/gate-held"
: >"$T/gate"
run_unit ExecStartPre || bail "ExecStartPre, third start"
run_unit ExecStart
poll_until 120 test -e "$T/gate-held" || bail "the third start reaches its start-up runsc call"
kill -TERM "$DAEMON_PID"
poll_until 30 grep -q "SIGTERM: stopping once the start-up step in progress ends" "$DAEMON_LOG"
check_eq "SIGTERM during the start is heard and logged" 0 "$?"
ok "the daemon still runs its start-up step after SIGTERM" kill -0 "$DAEMON_PID"
rm -f "$T/gate"
wait_daemon_exit 300
check_eq "the daemon stopped while starting exits 0" 0 "$?"
ok "it unmounted: nothing is mounted at the mountpoint" bash -c "! awk -v m='$MNT' '\$2 == m { f = 1 } END { exit !f }' /proc/mounts"
ok "the mountpoint answers (no ENOTCONN)" stat "$MNT"
check_contains "the log says it stopped during the start" "stopped during the start: unmounting" "$(cat "$DAEMON_LOG")"
check_eq "after the stopped start c1 still runs in runsc" running "$(runsc_state_of "$rid")"

# A daemon killed (SIGKILL) leaves a mount that answers ENOTCONN: ExecStartPre clears it.
rm -f "$T/gate-held"
: >"$T/gate"
run_unit ExecStartPre || bail "ExecStartPre, fourth start"
run_unit ExecStart
poll_until 120 test -e "$T/gate-held" || bail "the fourth start reaches its start-up runsc call"
kill -KILL "$DAEMON_PID"
wait_daemon_exit 60
rm -f "$T/gate"
check_contains "the killed daemon's mount answers ENOTCONN" "not connected" "$(stat "$MNT" 2>&1)"
run_unit ExecStartPre
ok "ExecStartPre clears the dead mount: the mountpoint answers" stat "$MNT"
ok "nothing is mounted there then" bash -c "! awk -v m='$MNT' '\$2 == m { f = 1 } END { exit !f }' /proc/mounts"

# --- SIGHUP in the background: snapfs.log renamed, then a fresh one --------------------
"$SNAPFS_BIN" --state "$STATE" --images "$IMAGES" --cgroup-parent "$CG_PARENT" "$MNT" >>"$DAEMON_LOG" 2>&1
check_eq "the daemon mounts in the background" 0 "$?"
for f in /proc/[0-9]*/cmdline; do
	[ "$({ tr '\0' ' ' <"$f"; } 2>/dev/null)" = "$SNAPFS_BIN --state $STATE --images $IMAGES --cgroup-parent $CG_PARENT $MNT " ] || continue
	BG_DAEMON=$(basename "$(dirname "$f")")
done
[ -n "$BG_DAEMON" ] || bail "the daemonized daemon is found"
poll_until 60 grep -q "snapfs started" "$STATE/snapfs.log" || bail "snapfs.log has the start"
mv "$STATE/snapfs.log" "$STATE/snapfs.log.moved"
kill -HUP "$BG_DAEMON"
poll_until 60 grep -q "SIGHUP: log reopened" "$STATE/snapfs.log"
check_eq "after mv and SIGHUP a new snapfs.log says it was reopened" 0 "$?"
check_eq "the new snapfs.log is 0600" 600 "$(stat -c %a "$STATE/snapfs.log" 2>/dev/null)"
check_contains "the moved file keeps the lines before" "snapfs started" "$(cat "$STATE/snapfs.log.moved")"
check_eq "after SIGHUP the mount answers" running "$(sb_status c1)"
unmount_mnt
poll_until 120 bash -c "! kill -0 $BG_DAEMON 2>/dev/null"
check_eq "the daemonized daemon exits once unmounted" 0 "$?"
BG_DAEMON=""

finish
