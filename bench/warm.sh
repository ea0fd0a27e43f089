#!/usr/bin/env bash
# bench/warm.sh [ROUNDS] [SIZE_MIB] - a fork from a warm pool against a fork
# without one (issue 25): ROUNDS forks each (default 10) of one snapshot of a
# sandbox holding SIZE_MIB (default 64) MiB, each a synchronous `fork` write
# timed from the shell; prints the p50 and p95 of each and their ratio. The
# fuller benchmark (1 GiB, count=16, root/) is the lead's. BIN=build/snapfs
# by default (SNAPFS_BIN to choose another, e.g. build/asan/snapfs).
set -euo pipefail
ROUNDS=${1:-10}
SIZE=${2:-64}
REPO=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SNAPFS_BIN:-$REPO/build/snapfs}
. "$REPO/bench/lib.sh"
bench_one_daemon warm
bench_start_daemon "$BIN"

p95() { sort -n | awk '{ v[NR] = $1 } END { i = int(NR * 0.95 + 0.999); print v[i < 1 ? 1 : i] }'; }
# fork_ms: one synchronous fork of $SNAP, its milliseconds; the fork is terminated after.
fork_ms() {
	local t0 t1 id
	t0=$(ms)
	id=$(write_read "$MNT/snapshots/$SNAP/fork" | head -n 1)
	t1=$(ms)
	echo 1 >"$MNT/sandboxes/$id/terminate"
	echo $((t1 - t0))
}

S=$MNT/sandboxes/src
mkdir "$S"
echo busybox >"$S/image"
echo "dd if=/dev/urandom of=/tmp/fill bs=1M count=$SIZE 2>/dev/null; while :; do sleep 1; done" \
	>"$S/entrypoint"
echo 1 >"$S/start"
sleep $((2 + SIZE / 64))
SNAP=$(write_read "$S/snapshot" | head -n 1)
cat "$MNT/snapshots/$SNAP/wait" >/dev/null

: >"$T/cold"
for _ in $(seq "$ROUNDS"); do fork_ms >>"$T/cold"; done
echo "$ROUNDS" >"$MNT/snapshots/$SNAP/warm"
: >"$T/warm"
for _ in $(seq "$ROUNDS"); do
	# Each fork takes a ready one: wait for the pool to be full again (not timed).
	for _ in $(seq 600); do [ "$(cat "$MNT/snapshots/$SNAP/warm")" = "$ROUNDS $ROUNDS" ] && break; sleep 0.1; done
	fork_ms >>"$T/warm"
done
echo 0 >"$MNT/snapshots/$SNAP/warm"
cold50=$(median <"$T/cold") warm50=$(median <"$T/warm")
printf 'fork of a %s MiB sandbox, %s rounds (%s)\n' "$SIZE" "$ROUNDS" "$(basename "$BIN")"
printf '  without a pool: p50 %s ms, p95 %s ms\n' "$cold50" "$(p95 <"$T/cold")"
printf '  from the pool:  p50 %s ms, p95 %s ms\n' "$warm50" "$(p95 <"$T/warm")"
printf '  ratio (pool / none) at p50: %s\n' "$(ratio "$warm50" "$cold50")"
