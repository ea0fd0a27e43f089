#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# --spool DIR puts checkpoints on another filesystem (here a tmpfs, as a
# user would for shorter pauses): snapshots and suspends work as with the
# default spool, the image is copied into the cache after it is stored, the
# daemon's own directory in DIR is emptied and DIR's other files are left.
. "$(dirname "$0")/lib.sh"

SHM=$T/shm
mkdir -p "$SHM"
mount -t tmpfs -o size=256m snapfs-test-spool "$SHM" || bail "mount a tmpfs on $SHM"
trap 'rc=$?; teardown_host; umount "$SHM"; (exit $rc); cleanup' EXIT
echo keep >"$SHM/not-snapfs"
DAEMON_ARGS=(--spool "$SHM")

start_daemon || bail "the daemon mounts with --spool $SHM"
spools=$(find "$SHM" -mindepth 1 -maxdepth 1 -type d -name 'snapfs-spool-*' | wc -l)
check_eq "the daemon has one directory of its own in the spool" 1 "$spools"
check_eq "the state directory holds no spool" "" "$(ls -d "$STATE/spool" 2>/dev/null)"

start_counter_sandbox src || bail "start sandbox src"
sb_run src 'echo from-src > /root/mark' >/dev/null
snap=$(snapshot_of src)
check_eq "a snapshot through a tmpfs spool completes" completed "$(snap_status "$snap")"
check_match "its pause is recorded" '^[0-9]+$' "$(jget "$MNT/snapshots/$snap/info.json" .pause_ms)"
ok "its image was copied into the cache" test -s "$STATE/cache/$snap/pages.img"
ok "with its manifest" test -s "$STATE/cache/$snap/.manifest.json"
check_eq "nothing is left in the spool" "" "$(find "$SHM"/snapfs-spool-* -mindepth 1)"
fork=$(fork_of "$snap")
check_eq "the fork runs" running "$(sb_status "$fork")"
check_eq "with the source's root-fs file" from-src "$(sb_run "$fork" 'cat /root/mark')"

wr "$MNT/sandboxes/src/suspend" >/dev/null
check_eq "a suspend through the tmpfs spool" suspended "$(sb_status src)"
wr "$MNT/sandboxes/src/resume" >/dev/null
check_eq "and its resume" running "$(sb_status src)"
check_eq "the resumed sandbox has its file" from-src "$(sb_run src 'cat /root/mark')"

stop_daemon
echo stale >"$(find "$SHM" -mindepth 1 -maxdepth 1 -name 'snapfs-spool-*' | head -n 1)/leftover"
start_daemon || bail "the daemon mounts again"
check_eq "a restart empties the daemon's spool" "" "$(find "$SHM"/snapfs-spool-* -mindepth 1)"
check_eq "and leaves the spool directory's other files" keep "$(cat "$SHM/not-snapfs")"
kill_sandboxes
stop_daemon
check_eq "a daemon that stops removes its empty spool directory" "" \
	"$(find "$SHM" -mindepth 1 -maxdepth 1 -name 'snapfs-spool-*')"
finish
