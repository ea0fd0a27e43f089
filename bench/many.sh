#!/usr/bin/env bash
# bench/many.sh - issue 14 item 4: many small sandboxes on one host.
#
#   bench/many.sh [N] [STEPS]        (defaults: 50, "0 10 50")
#
# Starts N busybox sandboxes (`sleep` entrypoints) one after another through
# the mount and, when STEPS of them run, records:
#   runsc_rss_kib / runsc_pss_kib   the RSS and PSS of every runsc process
#                                   of this daemon's root, summed
#                                   (/proc/PID/smaps_rollup), and per sandbox
#   daemon_fds, daemon_threads      /proc/PID/fd and /proc/PID/task counts
#   daemon_rss_kib                  the daemon's VmRSS
# then terminates them all and records the daemon's again, to show what
# goes back. Prints one "running=K name value ..." line per step.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-50} STEPS=${2:-"0 10 $N"}
BIN=$REPO/build/snapfs
# shellcheck source=bench/lib.sh
. "$REPO/bench/lib.sh"
bench_one_daemon bench-many

make -C "$REPO" -j2 build/snapfs >/dev/null
"$REPO/scripts/make-image.sh" "$IMAGES/busybox" >/dev/null
"$BIN" -f --state "$STATE" --images "$IMAGES" "$MNT" 2>"$T/daemon.log" &
PID=$!
for _ in $(seq 100); do [ -r "$MNT/version" ] && break; sleep 0.1; done

# The runsc processes of this daemon: their command lines name its root.
runsc_pids() { pgrep -f -- "--root=$STATE/runsc" || true; }
sum_kib() {
	local p f=$1 total=0 v
	for p in $(runsc_pids); do
		v=$(awk -v f="$f:" '$1 == f { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null || true)
		total=$((total + ${v:-0}))
	done
	echo "$total"
}
count() { find "$1" -mindepth 1 -maxdepth 1 | wc -l; }
report() {
	local k=$1 rss pss
	rss=$(sum_kib Rss) pss=$(sum_kib Pss)
	echo "running=$k runsc_procs $(runsc_pids | wc -l) runsc_rss_kib $rss runsc_pss_kib $pss" \
		"per_sandbox_pss_kib $([ "$k" -gt 0 ] && echo $((pss / k)) || echo -)" \
		"daemon_fds $(count "/proc/$PID/fd") daemon_threads $(count "/proc/$PID/task")" \
		"daemon_rss_kib $(awk '/^VmRSS/ { print $2 }' "/proc/$PID/status")"
}

running=0
for step in $STEPS; do
	while [ "$running" -lt "$step" ]; do
		running=$((running + 1))
		d=$MNT/sandboxes/m$running
		mkdir "$d"
		echo busybox >"$d/image"
		echo "sleep 100000" >"$d/entrypoint"
		echo 1 >"$d/start"
	done
	sleep 2 # what a start leaves settling (the console reader, the monitor's pass)
	report "$running"
done
t0=$(ms)
for i in $(seq "$running"); do echo 1 >"$MNT/sandboxes/m$i/terminate"; done
echo "terminate_all_ms $(($(ms) - t0))"
sleep 2
report 0
echo "loadavg $(cat /proc/loadavg)"
