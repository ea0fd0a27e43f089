#!/usr/bin/env bash
# bench/pause-fork.sh - how long a snapshot pauses a sandbox and how long a
# fork takes through snapfs, beside the same runsc commands run by hand on
# the same sandbox. Run on demand (not in CI), as root, after `make`:
#
#   bench/pause-fork.sh [ROUNDS] [OUT]      (defaults: 5, docs/bench/pause-fork.md)
#
# Each round, for a sandbox holding SIZE MiB of random data in its /tmp:
#   snapfs:  echo 1 > sandboxes/B/snapshot   -> pause_ms from info.json, wall time of the write
#            echo 1 > snapshots/S/fork       -> wall time until the fork runs
#   runsc:   runsc checkpoint --leave-running --compression=none   (wall time = pause)
#            runsc restore --detach from that image                (wall time)
set -euo pipefail
ROUNDS=${1:-5}
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${2:-$REPO/docs/bench/pause-fork.md}
BIN=$REPO/build/snapfs
# shellcheck source-path=SCRIPTDIR
. "$REPO/bench/lib.sh"
bench_one_daemon bench


"$REPO/scripts/make-image.sh" "$IMAGES/busybox" >/dev/null
"$BIN" -f --state "$STATE" --images "$IMAGES" "$MNT" 2>"$T/daemon.log" &
PID=$!
for _ in $(seq 100); do [ -r "$MNT/version" ] && break; sleep 0.1; done

bench_size() {
	local size=$1 b="bench$1" i
	mkdir "$MNT/sandboxes/$b"
	echo busybox >"$MNT/sandboxes/$b/image"
	echo "dd if=/dev/urandom of=/tmp/fill bs=1M count=$size 2>/dev/null; while :; do sleep 1; done" \
		>"$MNT/sandboxes/$b/entrypoint"
	echo 1 >"$MNT/sandboxes/$b/start"
	sleep $((2 + size / 64))
	local rid bundle
	rid=$(sed -n 's/.*"runtime_id":[[:space:]]*"\([^"]*\)".*/\1/p' "$MNT/sandboxes/$b/info.json")
	bundle=$STATE/sandboxes/$b/bundle
	for i in $(seq "$ROUNDS"); do
		local t0 snap pause size fork_ms ck_ms rs_ms new
		t0=$(ms)
		exec 3<>"$MNT/sandboxes/$b/snapshot"
		echo 1 >&3
		read -r snap <&3
		exec 3>&-
		pause=$(sed -n 's/.*"pause_ms":[[:space:]]*\([0-9]*\).*/\1/p' "$MNT/snapshots/$snap/info.json")
		size=$(sed -n 's/.*"size_bytes":[[:space:]]*\([0-9]*\).*/\1/p' "$MNT/snapshots/$snap/info.json")
		t0=$(ms)
		exec 3<>"$MNT/snapshots/$snap/fork"
		echo 1 >&3
		read -r new <&3
		exec 3>&-
		fork_ms=$(($(ms) - t0))
		echo 1 >"$MNT/sandboxes/$new/terminate"
		rmdir "$MNT/sandboxes/$new"
		rm -rf "$T/img"
		t0=$(ms)
		$RS checkpoint --leave-running --compression=none --image-path "$T/img" "$rid" </dev/null >/dev/null
		ck_ms=$(($(ms) - t0))
		rs_ms=$(bench_restore_ms "$T/img" "$bundle" "bench-raw-$i")
		printf '| %s MiB | %d | %d | %d | %d | %d | %d |\n' "$1" "$((size >> 20))" "$i" "$pause" "$ck_ms" "$fork_ms" "$rs_ms"
		echo 1 >"$MNT/snapshots/$snap/delete"
	done
	echo 1 >"$MNT/sandboxes/$b/terminate"
}

{
	echo "# Pause and fork: snapfs vs runsc by hand"
	echo
	echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores, $(runsc --version | head -1)."
	echo "pause = snapfs's pause_ms (the \`runsc checkpoint\` call it makes); runsc checkpoint = the"
	echo "same command run by hand on the same sandbox. fork = wall time of \`echo 1 > fork\` until"
	echo "the new sandbox runs (cache warm: the spool of the snapshot is reused); runsc restore ="
	echo "\`runsc restore --detach\` by hand from a local image. All in milliseconds."
	echo
	echo "| data in sandbox | checkpoint MiB | round | snapfs pause | runsc checkpoint | snapfs fork | runsc restore |"
	echo "|---|---|---|---|---|---|---|"
	bench_size 16
	bench_size 256
} | tee "$OUT"
