#!/usr/bin/env bash
# bench/scale.sh - issue 14's scale of the registry and the tree: many
# snapshots and sandboxes, the listings, a lookup, start-up, sync, memory.
#
#   bench/scale.sh [NSNAP] [NSB] [ROUNDS]     (defaults: 10000 1000 5)
#   SCALE_S3=1 bench/scale.sh ...             the store in an s3rver bucket
#
# The rows and manifests are made by bench/scale_bench.c through the
# registry and store APIs (documented there: real checkpoints would take
# hours); the daemon then runs on that state as if it had taken them.
# Measured, each the median of ROUNDS (ms):
#   start-up      from the daemon's launch until `version` answers: the
#                 first start (startup_first_ms: every manifest and pack
#                 index read from the store, as the first start after an
#                 upgrade) and the median of ROUNDS starts after it (the
#                 store's records kept in <state>/store-records.db)
#   ls            `ls snapshots/` (readdir only), `ls -l snapshots/` (every
#                 entry looked up and stat'ed)
#   index         `cat snapshots/index`, `cat sandboxes/index`
#   lookup        `stat snapshots/<id>` of one snapshot (a fresh name each round)
#   sync          the daemon's CPU time over SYNC_S seconds idle (a sync pass
#                 every 3 s lists the store and checks it against the rows);
#                 and a second daemon on a fresh state dir following the same
#                 store: ms until it lists all NSNAP (adoption)
#   memory        VmRSS and VmHWM of the daemon after all of the above
# Prints one "name value" line each; writes nothing under docs/.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
NSNAP=${1:-10000} NSB=${2:-1000} ROUNDS=${3:-5} SYNC_S=${SYNC_S:-30}
BIN=$REPO/build/snapfs SB=$REPO/build/bench/scale_bench
# shellcheck source=bench/lib.sh
. "$REPO/bench/lib.sh"
bench_one_daemon bench-scale

# scale_bench: every module but main (make bench); snapmeta and host make the metadata.
make -C "$REPO" -j2 build/snapfs build/bench/scale_bench >/dev/null

if [ -n "${SCALE_S3:-}" ]; then
	bench_start_s3rver "$T" "$T/s3rver.log" scale
	STORE=s3://scale/snapfs
	trap 'bench_one_daemon_cleanup; bench_stop_s3rver' EXIT INT TERM
else
	STORE=file://$T/store
fi
t0=$(ms)
"$SB" "$STATE" "$STORE" "$NSNAP" "$NSB" 2>/dev/null
echo "generate_ms $(($(ms) - t0))"

# start STATE MNT LOG: the daemon on STATE at MNT; sets PID; prints ms until it answers.
start() {
	local t0_
	t0_=$(ms)
	"$BIN" -f --state "$1" --images "$IMAGES" --store "$STORE" "$2" 2>"$3" &
	PID=$!
	until [ -r "$2/version" ]; do sleep 0.01; done
	echo $(($(ms) - t0_))
}
stop() {
	fusermount3 -u "$1"
	wait "$PID" 2>/dev/null || true
	PID=""
}
# timed CMD...: ms of one run of CMD, output dropped.
timed() {
	local t0_
	t0_=$(ms)
	"$@" >/dev/null
	echo $(($(ms) - t0_))
}
rounds() { for _ in $(seq "$ROUNDS"); do timed "$@"; done | median; }
count() { find "$1" -mindepth 1 -maxdepth 1 | wc -l; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

starts=$T/starts
for _ in $(seq $((ROUNDS + 1))); do
	start "$STATE" "$MNT" "$T/daemon.log" >>"$starts"
	stop "$MNT"
done
echo "startup_first_ms $(head -1 "$starts")"
echo "startup_ms $(tail -n +2 "$starts" | median)"
start "$STATE" "$MNT" "$T/daemon.log" >/dev/null
echo "snapshots_listed $(find "$MNT/snapshots/" -mindepth 1 -maxdepth 1 | wc -l)"
echo "sandboxes_listed $(find "$MNT/sandboxes/" -mindepth 1 -maxdepth 1 -type d | wc -l)"
echo "ls_snapshots_ms $(rounds ls "$MNT/snapshots/")"
echo "ls_l_snapshots_ms $(rounds ls -l "$MNT/snapshots/")"
echo "cat_snapshots_index_ms $(rounds cat "$MNT/snapshots/index")"
echo "cat_sandboxes_index_ms $(rounds cat "$MNT/sandboxes/index")"
echo "ls_sandboxes_ms $(rounds ls "$MNT/sandboxes/")"
lookups=$T/lookups
for i in $(seq "$ROUNDS"); do
	timed stat "$MNT/snapshots/$(printf 'snap-%016x' $((NSNAP / 2 + i)))" >>"$lookups"
done
echo "stat_snapshot_ms $(median <"$lookups")"
c0=$(cpu_ticks "$PID")
sleep "$SYNC_S"
echo "idle_cpu_pct $(awk -v t=$(($(cpu_ticks "$PID") - c0)) -v s="$SYNC_S" -v hz="$(getconf CLK_TCK)" \
	'BEGIN { printf "%.1f", 100 * t / hz / s }')"
echo "vmrss_kib $(awk '/^VmRSS/ { print $2 }' "/proc/$PID/status")"
echo "vmhwm_kib $(awk '/^VmHWM/ { print $2 }' "/proc/$PID/status")"
echo "threads $(count "/proc/$PID/task")"
echo "fds $(count "/proc/$PID/fd")"
stop "$MNT"

# A second host: a fresh state dir on the same store adopts every manifest.
S2=$T/state2 M2=$T/mnt2
mkdir -p "$S2" "$M2"
trap 'mountpoint -q "$M2" && fusermount3 -u "$M2"; bench_one_daemon_cleanup; bench_stop_s3rver' EXIT INT TERM
t0=$(ms)
start "$S2" "$M2" "$T/daemon2.log" >/dev/null
for _ in $(seq 3000); do
	[ "$(find "$M2/snapshots/" -mindepth 1 -maxdepth 1 -type d | wc -l)" -ge "$NSNAP" ] && break
	sleep 0.2
done
echo "adopt_all_ms $(($(ms) - t0))"
echo "adopt_vmhwm_kib $(awk '/^VmHWM/ { print $2 }' "/proc/$PID/status")"
c0=$(cpu_ticks "$PID")
sleep "$SYNC_S"
echo "adopted_idle_cpu_pct $(awk -v t=$(($(cpu_ticks "$PID") - c0)) -v s="$SYNC_S" -v hz="$(getconf CLK_TCK)" \
	'BEGIN { printf "%.1f", 100 * t / hz / s }')"
stop "$M2"
echo "loadavg $(cat /proc/loadavg)"
