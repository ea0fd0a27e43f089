#!/usr/bin/env bash
# bench/first-checkpoint.sh - issue 14 item 5: the pause of the 1st, 2nd
# and 10th checkpoint of one sandbox, snapfs beside runsc by hand.
#
#   bench/first-checkpoint.sh [N] [MIB] [zero] (defaults: 10 256, random bytes)
#   FC_DEBUG=1 bench/first-checkpoint.sh ...   runsc --debug logs, kept in
#                                              /tmp/snapfs-fc-debug/
#
# Two sandboxes run bench/pause_ticker.c (built static, copied into the
# busybox image): MIB MiB of random bytes (or zeros) in its heap, and a clock read
# every 5 ms that records each gap over 30 ms, the pause as the app saw it.
#   snapfs   N synchronous `echo 1 > snapshot` of sandbox `fcs`, each
#            stored before the next: its pause_ms (the runsc checkpoint
#            call, as snapfs times it) and the app's longest gap
#   by hand  N `runsc checkpoint --leave-running --compression=none
#            --direct` (snapfs's flags: runtime/runsc/runsc.c) of sandbox `fch`,
#            each into a fresh directory on the same filesystem as the spool
# Prints "who i pause_ms app_gap_ms" lines.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-10} MIB=${2:-256} FILL=${3:-}
BIN=$REPO/build/snapfs
# shellcheck source=bench/lib.sh
. "$REPO/bench/lib.sh"
bench_one_daemon bench-fc
field() { jq -r "$2" <"$MNT/$1/info.json"; }

make -C "$REPO" -j2 build/snapfs >/dev/null
"$REPO/scripts/make-image.sh" "$IMAGES/busybox" >/dev/null
make -C "$REPO" build/bench/pause_ticker >/dev/null
cp "$REPO/build/bench/pause_ticker" "$IMAGES/busybox/bin/pause_ticker"
RUNSC=runsc
if [ -n "${FC_DEBUG:-}" ]; then
	D=/tmp/snapfs-fc-debug
	rm -rf "$D" && mkdir -p "$D"
	printf '#!/bin/sh\nexec runsc --debug --debug-log=%s/%%TIMESTAMP%%.%%COMMAND%%.log "$@"\n' "$D" \
		>"$T/runsc-debug"
	chmod +x "$T/runsc-debug"
	RUNSC=$T/runsc-debug
fi
"$BIN" -f --state "$STATE" --images "$IMAGES" --runsc "$RUNSC" "$MNT" 2>"$T/daemon.log" &
PID=$!
for _ in $(seq 100); do [ -r "$MNT/version" ] && break; sleep 0.1; done

# The app's longest gap since the last call, and the record cleared.
gap() { write_read "$MNT/sandboxes/$1/exec" 'sort -n /tmp/gaps 2>/dev/null | tail -1; rm -f /tmp/gaps'; }
for sb in fcs fch; do
	mkdir "$MNT/sandboxes/$sb"
	echo busybox >"$MNT/sandboxes/$sb/image"
	echo "pause_ticker $MIB $FILL" >"$MNT/sandboxes/$sb/entrypoint"
	echo 1 >"$MNT/sandboxes/$sb/start"
done
for sb in fcs fch; do
	until [ "$(write_read "$MNT/sandboxes/$sb/exec" 'cat /tmp/ready 2>/dev/null')" = ready ]; do sleep 1; done
	gap "$sb" >/dev/null
done

for i in $(seq "$N"); do
	s=$(write_read "$MNT/sandboxes/fcs/snapshot")
	echo "snapfs $i $(field "snapshots/$s" .pause_ms) $(gap fcs)"
done
rid=$(field sandboxes/fch .runtime_id)
for i in $(seq "$N"); do
	t0=$(ms)
	$RUNSC --root "$STATE/runsc" checkpoint --leave-running --compression=none --direct \
		--image-path "$STATE/hand-$i" "$rid" </dev/null
	t=$(($(ms) - t0))
	rm -rf "$STATE/hand-$i"
	echo "hand $i $t $(gap fch)"
done
echo "loadavg $(cat /proc/loadavg)"
