#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317
# snapshots/<id>/root/ (issue 25, item 4): a snapshot's files as they were at
# its instant, read-only, through a hidden restore that no one sees in
# sandboxes/ and that is gone (no runsc process) once idle.
. "$(dirname "$0")/lib.sh"

# The idle time of a view, short here (docs/design.md: 60 s otherwise).
export SNAPFS_SNAPSHOT_VIEW_IDLE=5

start_daemon || bail "the daemon mounts"

# view_dirs: the views' directories in the state directory, one a line.
view_dirs() { find "$STATE/sandboxes" -mindepth 1 -maxdepth 1 -name '.view-*'; }
# container_gone CID: runsc list of the daemon's root does not have it.
container_gone() { [ -z "$(runsc_state_of "$1")" ]; }
no_views() { [ -z "$(view_dirs)" ]; }
# no_process CID: no host process (sandbox, gofer, runsc) names container CID.
no_process() {
	local f
	for f in /proc/[0-9]*/cmdline; do
		tr '\0' ' ' 2>/dev/null <"$f" | grep -q -- "$1" && return 1
	done
	return 0
}

# A sandbox that writes its files once, then only sleeps: nothing in it moves
# between a snapshot and its view but what the test changes through exec.
ENTRY='mkdir -p /work/data/sub; echo one >/work/data/a.txt; echo deep >/work/data/sub/b.txt
echo ready >/tmp/ready; while :; do sleep 1; done'
ENTRY=$(printf '%s' "$ENTRY" | tr '\n' ';')
ok "start the sandbox" make_sandbox src "$ENTRY"
ok "it wrote its files" poll_until 30 sb_run src 'cat /tmp/ready'

A=$(snapshot_of src)
ok "snapshot A is taken" test -n "$A"
ok "A completes" poll_until 120 snap_status_is "$A" completed
ok "the sandbox changes a.txt and adds c.txt" \
	sb_run src 'echo two >/work/data/a.txt; echo new >/work/data/c.txt'
B=$(snapshot_of src)
ok "snapshot B is taken" test -n "$B"
ok "B completes" poll_until 120 snap_status_is "$B" completed
index_before=$(rd "$MNT/sandboxes/index")

ok "a crawl of snapshots/ (ls -lR, grep -r) answers" \
	timeout 120 sh -c 'ls -lR "$1" >/dev/null && grep -rq . "$1"' sh "$MNT/snapshots"
ok "and starts no view: it follows no root link" no_views

RA=$MNT/snapshots/$A/root
RB=$MNT/snapshots/$B/root
check_eq "root is a link to .root" .root "$(readlink "$MNT/snapshots/$A/root")"
check_lacks ".root is not listed" .root "$(ls -a "$MNT/snapshots/$A")"

# Two first reads at once wait for the one restore.
timeout 120 cat "$RA/work/data/a.txt" >"$T/first1" 2>&1 &
p1=$!
timeout 120 cat "$RA/work/data/a.txt" >"$T/first2" 2>&1 &
p2=$!
BG_PIDS+=("$p1" "$p2")
wait "$p1"
check_eq "a first read of A's file answers" 0 "$?"
wait "$p2"
check_eq "a second first read at once answers too" 0 "$?"
check_eq "A's a.txt is A's content" one "$(cat "$T/first1")"
check_eq "and so is the other read's" one "$(cat "$T/first2")"
check_eq "B's a.txt is B's content" two "$(rd "$RB/work/data/a.txt")"
ok "c.txt is not in A" test ! -e "$RA/work/data/c.txt"
check_eq "c.txt is in B" new "$(rd "$RB/work/data/c.txt")"
check_eq "one restore per view, not one per read" 2 \
	"$(grep -c 'the view of snapshot .* is ready' "$DAEMON_LOG")"

diff_out=$(timeout 120 diff -r "$RA/work/data" "$RB/work/data" 2>&1)
rc=$?
check_eq "diff -r of A and B differs" 1 "$rc"
check_contains "diff -r shows a.txt's change" "> two" "$diff_out"
check_contains "diff -r names c.txt as only in B" "Only in $RB/work/data: c.txt" "$diff_out"
check_lacks "diff -r does not name sub/b.txt" "b.txt" "$diff_out"

ok "ls -lR of A's tree" timeout 120 sh -c 'ls -lR "$1" >"$2"' sh "$RA/work" "$T/ls"
check_contains "ls -lR lists sub/b.txt" "b.txt" "$(cat "$T/ls")"
check_eq "grep -r finds A's content" "$RA/work/data/sub/b.txt:deep" \
	"$(timeout 120 grep -r deep "$RA/work/data")"
ok "tar -c of A's tree" timeout 120 tar -C "$RA" -cf "$T/a.tar" work
check_eq "the archive holds A's files" "work/data/a.txt work/data/sub/b.txt" \
	"$(tar -tf "$T/a.tar" | grep '\.txt$' | sort | tr '\n' ' ' | sed 's/ $//')"

expect_errno EROFS "a write to a file is refused" wr "$RA/work/data/a.txt" x
expect_errno EROFS "touch of a new file is refused" touch "$RA/work/data/new"
expect_errno EROFS "touch of an existing file is refused" touch "$RA/work/data/a.txt"
expect_errno EROFS "rm is refused" rm -f "$RA/work/data/a.txt"
expect_errno EROFS "mkdir is refused" mkdir "$RA/work/data/d"
expect_errno EROFS "mv is refused" mv "$RA/work/data/a.txt" "$RA/work/data/z.txt"
expect_errno EROFS "chmod is refused" chmod 600 "$RA/work/data/a.txt"
check_eq "A's a.txt is unchanged" one "$(rd "$RA/work/data/a.txt")"

check_eq "sandboxes/index shows no new sandbox" "$index_before" "$(rd "$MNT/sandboxes/index")"
check_eq "two views are up" 2 "$(view_dirs | wc -l)"
cid=$(cat "$STATE/sandboxes/.view-$A/container" 2>/dev/null)
ok "the view's container runs under the daemon's runsc root" test -n "$(runsc_state_of "$cid")"
ok "its sandbox process is alive" runsc_process_alive "$cid"

# Idle: torn down; a read afterwards restores it again.
ok "after the idle time A's view container is gone from runsc list" \
	poll_until 60 container_gone "$cid"
ok "and no runsc process of it is left" poll_until 30 no_process "$cid"
ok "the view directories are gone" \
	poll_until 30 no_views
check_eq "a read after the idle time restores it again" one "$(rd "$RA/work/data/a.txt")"

# A restart deletes a view left behind.
cid=$(cat "$STATE/sandboxes/.view-$A/container" 2>/dev/null)
ok "the view is up again" test -n "$(runsc_state_of "$cid")"
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=""
unmount_mnt
# Not under ok: its subshell would keep DAEMON_PID, which stop_daemon below needs.
start_daemon
check_eq "the daemon starts again" 0 "$?"
ok "start-up deleted the view's container" container_gone "$cid"
ok "and its directory" test ! -e "$STATE/sandboxes/.view-$A"
check_eq "A's files read after the restart" one "$(rd "$RA/work/data/a.txt")"

# A delete takes the view down first.
cid=$(cat "$STATE/sandboxes/.view-$A/container" 2>/dev/null)
ok "delete A" wr "$MNT/snapshots/$A/delete"
ok "A is gone" poll_until 60 test ! -e "$MNT/snapshots/$A"
ok "its view's container is gone" container_gone "$cid"
ok "its view's directory is gone" test ! -e "$STATE/sandboxes/.view-$A"

# A restore that fails: reads answer EIO, and the snapshot's error says why.
ok "B has no view now" no_views
# The tree and the versions a sandbox runs from (docs/images.md, "Versions of a hand-made tree").
mv "$IMAGES/busybox" "$IMAGES/busybox.away"
mv "$IMAGES/.tree" "$IMAGES/.tree.away"
expect_errno EIO "a read of B's files while its image is away" cat "$RB/work/data/a.txt"
check_contains "B's error says why" "busybox" "$(rd "$MNT/snapshots/$B/error")"
mv "$IMAGES/busybox.away" "$IMAGES/busybox"
mv "$IMAGES/.tree.away" "$IMAGES/.tree"
ok "a failed view leaves no directory" no_views
ok "B's files read again once its retry time passed" \
	poll_until 30 grep -qx two "$RB/work/data/a.txt"

# A clean stop with a view up: quick (a reaper stands in for the monitor), and
# the view is gone.
cid=$(cat "$STATE/sandboxes/.view-$B/container" 2>/dev/null)
ok "B's view is up" test -n "$(runsc_state_of "$cid")"
t0=$(date +%s)
stop_daemon
took=$(($(date +%s) - t0))
ok "a clean stop with a view up takes at most 20 s (took $took s)" test "$took" -le 20
ok "and deletes the view's container" container_gone "$cid"
ok "and its directory" no_views

finish
