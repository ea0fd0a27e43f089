#!/usr/bin/env bash
# walkthrough.sh [MOUNTPOINT] - a tour of snapfs on a mounted tree (default /mnt/snapfs).
#
# Starts a sandbox that keeps state in memory (a counter in a shell variable),
# on its root filesystem and in its in-memory /tmp; copies a file in through
# its root/ (the sandbox's own filesystem) and reads files out; snapshots it;
# forks the snapshot twice; shows each fork starts from the snapshot (the
# copied file in its own root/) and then goes its own way; suspends and
# resumes the source; then cleans up. Every step prints the command it runs.
# Needs the busybox image (scripts/run-default.sh makes it).
set -euo pipefail

M=${1:-/mnt/snapfs}
if ! timeout 10 cat "$M/version" >/dev/null 2>&1; then
	echo "walkthrough: no snapfs answers at $M (scripts/run-default.sh mounts one)" >&2
	exit 1
fi
if [ ! -d "$M/images/busybox" ]; then
	echo "walkthrough: no busybox image (scripts/make-image.sh /var/lib/snapfs/images/busybox)" >&2
	exit 1
fi

m=$(printf '%q' "$M")
HOSTDIR=$(mktemp -d)
trap 'rm -rf "$HOSTDIR"' EXIT
name=walk-$$
S=$m/sandboxes/$name

step() { printf '\n### %s\n' "$*"; }
# run CMDLINE: print it, then run it in this shell (so variables it sets stay set).
run() {
	printf '$ %s\n' "$1"
	eval "$1"
}
# sx SANDBOX CMDLINE: run a command in a sandbox, print its output and "exit N".
sx() {
	exec 3<>"$M/sandboxes/$1/exec"
	printf '%s\n' "$2" >&3
	cat <&3
	exec 3>&-
}

step "A sandbox: a counter in memory, a note on its root filesystem and one in /tmp"
run "mkdir $S"
run "echo busybox > $S/image"
run "echo 'echo on-rootfs > /root/note; echo in-tmp > /tmp/note; i=0; while :; do i=\$((i + 1)); echo \$i > /tmp/count; sleep 1; done' > $S/entrypoint"
run "echo 1 > $S/start"
run "cat $S/status"
run "sleep 3"

step "exec: write a command line, read the output on the same open file"
run "exec 3<>$S/exec; echo 'cat /root/note /tmp/note /tmp/count' >&3; cat <&3; exec 3>&-"
echo "(from here on: sx SANDBOX CMD does just that)"

step "root/: the sandbox's own filesystem, read-write while it runs"
run "ls $S/root"
run "printf 'copied in through root/\\n' > \$HOSTDIR/data.txt; cp \$HOSTDIR/data.txt $S/root/tmp/data.txt"
run "sx $name 'cat /tmp/data.txt'"
run "cat $S/root/root/note $S/root/tmp/count"
run "ls -ln $S/root/tmp"

step "Snapshot it: the write returns when the snapshot is stored; the sandbox runs on"
run "echo 1 > $S/snapshot"
run "SNAP=\$(cat $S/snapshot); echo \$SNAP"
run "cat $m/snapshots/\$SNAP/status"
run "grep -E '\"(kind|sandbox_id|pause_ms|size_bytes)\"' $m/snapshots/\$SNAP/info.json"
run "sx $name 'echo changed-after-snapshot > /root/note'"
run "sleep 2; sx $name 'cat /tmp/count'"

step "Fork the snapshot twice: each fork is a new sandbox restored from it"
run "exec 3<>$m/snapshots/\$SNAP/fork; echo 1 >&3; read -r F1 <&3; exec 3>&-; echo \$F1"
run "exec 3<>$m/snapshots/\$SNAP/fork; echo 1 >&3; read -r F2 <&3; exec 3>&-; echo \$F2"
run "cat $m/snapshots/\$SNAP/fork"
run "readlink $m/sandboxes/\$F1/parent"

step "Each fork starts where the snapshot was: the counter goes on from there, the notes are the old ones"
run "sx \$F1 'cat /tmp/count /root/note /tmp/note'"
run "sx \$F2 'cat /tmp/count /root/note /tmp/note'"
run "cat $m/sandboxes/\$F1/root/tmp/data.txt"
run "sleep 2; sx \$F1 'cat /tmp/count'"

step "Then they diverge: what one writes, the others do not see"
run "sx \$F1 'echo fork-one > /root/note'"
run "sx \$F2 'echo fork-two > /root/note'"
run "sx \$F1 'cat /root/note'"
run "sx \$F2 'cat /root/note'"
run "sx $name 'cat /root/note'"
run "cat $m/sandboxes/index"

step "Suspend the source: it is checkpointed and stops; resume brings it back under the same id"
run "echo 1 > $S/suspend"
run "cat $S/status"
echo "(exec is refused while it is suspended: EBUSY)"
run "sx $name true || true"
run "echo 1 > $S/resume"
run "cat $S/status"
run "sx $name 'cat /tmp/count /root/note'"

step "Clean up: delete the source's snapshots (the fork source and the suspend one), remove the sandboxes"
run "echo 1 > $S/terminate"
run "ls $S/snapshots"
run "for id in \$(ls $S/snapshots); do rmdir $m/snapshots/\$id; done"
run "rmdir $S"
for sb in "$F1" "$F2"; do
	run "echo 1 > $m/sandboxes/$sb/terminate && rmdir $m/sandboxes/$sb"
done
run "tail -n 5 $m/events"
