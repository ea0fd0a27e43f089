#!/usr/bin/env bash
# run-default.sh - set up, build, and mount snapfs on its defaults (run as root).
#
# Installs what is missing (scripts/setup.sh), builds build/snapfs, makes the
# busybox example image in /var/lib/snapfs/images/busybox, and mounts snapfs
# at /mnt/snapfs (state in /var/lib/snapfs, snapshots in /var/lib/snapfs/store).
# Safe to run again: an existing, answering mount is left as it is.
#
# SNAPFS_STATE and SNAPFS_MNT put the state directory and the mount elsewhere
# (tests/integration/test_modes.sh runs it on temporary ones); with
# SNAPFS_BIN, that binary is mounted and nothing is installed or built.
# Everything it creates under the state directory is root's alone (0700 and
# 0600): scripts/make-image.sh and the daemon see to that.
set -euo pipefail

STATE=${SNAPFS_STATE:-/var/lib/snapfs}
MNT=${SNAPFS_MNT:-/mnt/snapfs}
IMAGE_DIR=$STATE/images/busybox

cd "$(dirname "$0")/.."

if [ -z "${SNAPFS_BIN:-}" ]; then
	scripts/setup.sh
	make
fi
BIN=${SNAPFS_BIN:-build/snapfs}
scripts/make-image.sh "$IMAGE_DIR"

mounted() { awk -v m="$MNT" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }

mkdir -p "$MNT"
if mounted && timeout 10 cat "$MNT/version" >/dev/null 2>&1; then
	echo "run-default: snapfs is already mounted at $MNT"
else
	# A mount whose daemon is gone answers "Transport endpoint is not connected".
	if mounted; then
		echo "run-default: $MNT is a dead mount; unmounting it"
		fusermount3 -u "$MNT" || fusermount3 -uz "$MNT"
	fi
	"$BIN" --state "$STATE" "$MNT"
	for _ in $(seq 1 100); do
		timeout 5 cat "$MNT/version" >/dev/null 2>&1 && break
		sleep 0.1
	done
	timeout 5 cat "$MNT/version" >/dev/null || {
		echo "run-default: $MNT does not answer; see $STATE/snapfs.log" >&2
		exit 1
	}
	echo "run-default: snapfs is mounted at $MNT"
fi

cat <<EOF

$(cat "$MNT/version")

Try:
  cat $MNT/README
  mkdir $MNT/sandboxes/demo
  echo busybox > $MNT/sandboxes/demo/image
  echo 'i=0; while :; do i=\$((i+1)); echo \$i > /tmp/count; sleep 1; done' > $MNT/sandboxes/demo/entrypoint
  echo 1 > $MNT/sandboxes/demo/start && cat $MNT/sandboxes/demo/status
  echo 1 > $MNT/sandboxes/demo/snapshot && cat $MNT/sandboxes/demo/snapshot
  echo 1 > $MNT/snapshots/\$(cat $MNT/sandboxes/demo/snapshot)/fork
  cat $MNT/sandboxes/index
  tail -f $MNT/events

A longer tour: examples/walkthrough.sh $MNT
Unmount (sandboxes keep running): fusermount3 -u $MNT
EOF
