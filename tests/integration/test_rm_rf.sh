#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# `rm -rf sandboxes/<id>` unlinks each file of the directory (and empties
# and removes its snapshots/) before the rmdir. A sandbox's names go with
# it: of a created, terminated or failed one each removal is accepted and
# changes nothing, and the rmdir removes it as a plain rmdir does; of a
# running one each is EBUSY, nothing changes and nothing is recorded but
# by the rmdir (issue 24, item 8; docs/design.md). Before the fix every
# unlink was EPERM, so rm -rf failed even where rmdir works.
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"
make_sandbox live 'sleep 100000' || bail "start sandbox live"
S=$(snapshot_of live)
check_eq "a snapshot of live completes" completed "$(snap_wait "$S")"
ok "live's snapshots/ has the snapshot" test -L "$MNT/sandboxes/live/snapshots/$S"
errors_before=$(rd "$MNT/errors")

# --- a running sandbox: EBUSY, nothing changes -------------------------------
expect_errno EBUSY "unlink of a running sandbox's status" rm -f "$MNT/sandboxes/live/status"
ok "rm -rf of a running sandbox fails" bash -c '! rm -rf "$1" 2>/dev/null' _ "$MNT/sandboxes/live"
check_contains "rm says why" "$(errno_text EBUSY)" "$(rm -rf "$MNT/sandboxes/live" 2>&1)"
check_eq "live runs on" running "$(sb_status live)"
ok "live's status is still there" test -f "$MNT/sandboxes/live/status"
ok "its snapshot link too" test -L "$MNT/sandboxes/live/snapshots/$S"
check_eq "the unlinks added nothing to errors" "$errors_before" "$(rd "$MNT/errors")"
check_eq "live's error stays empty" "" "$(rd "$MNT/sandboxes/live/error")"
expect_errno EPERM "unlink of a root file" rm -f "$MNT/version"
expect_errno EPERM "unlink of sandboxes/index" rm -f "$MNT/sandboxes/index"

# --- terminated, and never started: removed ----------------------------------
ok "terminate live" wr "$MNT/sandboxes/live/terminate"
check_eq "live is terminated" terminated "$(sb_status live)"
ok "rm -rf of a terminated sandbox succeeds" rm -rf "$MNT/sandboxes/live"
ok "it is gone" test ! -e "$MNT/sandboxes/live"
check_lacks "sandboxes/index no longer lists it" live "$(rd "$MNT/sandboxes/index")"
check_eq "its snapshot stays" completed "$(snap_status "$S")"

# The marks the rm -rf above left (2 s each, 16 at most a uid) expire first, so that
# this one's make their own.
sleep 2.2
ok "mkdir sandboxes/fresh" mkdir "$MNT/sandboxes/fresh"
ok "rm -rf of a created sandbox succeeds" rm -rf "$MNT/sandboxes/fresh"
ok "fresh is gone" test ! -e "$MNT/sandboxes/fresh"
ok "the name can be made again" mkdir "$MNT/sandboxes/fresh"
# rm -rf's unlinks of writable files leave marks (fs/replace.h: for install); they go
# with the sandbox, so the new one's files are seen at once.
check_eq "the new fresh's memory is there at once" 2147483648 "$(rd "$MNT/sandboxes/fresh/memory")"
ok "and takes a write" wr "$MNT/sandboxes/fresh/image" busybox
check_eq "which reads back" busybox "$(rd "$MNT/sandboxes/fresh/image")"

stop_daemon
finish
