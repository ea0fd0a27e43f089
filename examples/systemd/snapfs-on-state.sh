#!/usr/bin/env bash
# snapfs-on-state.sh [--once] MOUNTPOINT SANDBOX STATE COMMAND [ARG...]
#
# Run COMMAND each time sandbox SANDBOX of the snapfs tree at MOUNTPOINT
# enters STATE (once at the start too, if it is in STATE then), with
# SNAPFS_SANDBOX and SNAPFS_STATUS in its environment. With --once, exit
# after the first run with COMMAND's exit status. Exit 3 once the sandbox
# is gone (rmdir), 2 for a bad command line or no snapfs at MOUNTPOINT.
# snapfs-on-state@.service beside it runs it under systemd.
#
# Why not inotifywait, entr or a systemd .path unit: Linux raises no
# inotify event for a change a FUSE server makes on its own (a sandbox
# that ends, a snapshot that completes), only for the calls made through
# the mount (docs/control-files.md, "Watching"). So this follows the
# `events` journal with `tail -F` (which polls a FUSE file once a second)
# as its wake-up, and reads the sandbox's `status` as the truth: at the
# start, at each event line that names the sandbox, and at least every
# SNAPFS_RECHECK seconds (default 10), so a change made before the
# follower started, or a line it missed, is still seen.
set -u

usage() {
	echo "usage: snapfs-on-state.sh [--once] MOUNTPOINT SANDBOX STATE COMMAND [ARG...]" >&2
	exit 2
}

once=0
if [ "${1:-}" = --once ]; then
	once=1
	shift
fi
[ $# -ge 4 ] || usage
mnt=$1 sb=$2 want=$3
shift 3
recheck=${SNAPFS_RECHECK:-10}
case $sb in '' | . | .. | */*) usage ;; esac
case $recheck in '' | *[!0-9]* | 0) usage ;; esac
if ! timeout 10 cat "$mnt/version" >/dev/null 2>&1; then
	echo "snapfs-on-state: no snapfs answers at $mnt" >&2
	exit 2
fi

# The follower first, then the first look at the status: a change between
# the two is in the status read, one after it is a line the follower sees.
exec {events}< <(exec tail -n 0 -F "$mnt/events" 2>/dev/null)
follower=$!
trap 'kill "$follower" 2>/dev/null' EXIT

# Wait for a line of `events` that names the sandbox, or for the recheck.
wait_for_line() {
	local line rc
	while :; do
		read -r -t "$recheck" line <&"$events"
		rc=$?
		[ "$rc" -gt 128 ] && return 0 # the recheck is due
		if [ "$rc" -ne 0 ]; then      # the follower ended: look every interval
			sleep "$recheck"
			return 0
		fi
		case $line in *"\"id\":\"$sb\""*) return 0 ;; esac
	done
}

last=""
while :; do
	if ! status=$(timeout 30 cat "$mnt/sandboxes/$sb/status" 2>/dev/null); then
		echo "snapfs-on-state: sandbox $sb is gone" >&2
		exit 3
	fi
	if [ "$status" = "$want" ] && [ "$last" != "$want" ]; then
		SNAPFS_SANDBOX=$sb SNAPFS_STATUS=$status "$@"
		rc=$?
		[ "$once" = 1 ] && exit "$rc"
	fi
	last=$status
	wait_for_line
done
