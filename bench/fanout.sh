#!/usr/bin/env bash
# bench/fanout.sh - N forks of one snapshot at once, four ways, beside
# `runsc restore` run N times by hand. Run on demand (not in CI), as root,
# after `make`:
#
#   bench/fanout.sh [COUNTS] [SIZE_MB] [OUT]
#        (defaults: "1 4 16 64", 128, docs/bench/fanout.md)
#
# For a sandbox holding SIZE_MB MiB of random data in its /tmp, one snapshot,
# then for each N in COUNTS:
#   count=N      one `echo count=N > fork` (synchronous): wall time until all N run
#   parallel     N `echo 1 > fork` at once on the same fork file: until all returned
#   sequential   N `echo 1 > fork` one after another
#   runsc        `runsc restore --detach` of the same image by hand, N times in a row
# The goal (issue 14): count=N in at most 1.2 x ceil(N / cores) x the time of one.
# Then the time to first answer of a forked app, with count=16: the entrypoint
# answers each line written to its FIFO /tmp/in in /tmp/out; from the fork
# write until each fork's answer, asked and read through `exec`.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source-path=SCRIPTDIR
. "$REPO/bench/lib.sh"
COUNTS=${1:-1 4 16 64} SIZE=${2:-128} OUT=${3:-$REPO/docs/bench/fanout.md}
bench_one_daemon fanout
bench_start_daemon "$REPO/build/snapfs"

B=$MNT/sandboxes/base
mkdir "$B"
echo busybox >"$B/image"
echo 3G >"$B/memory"
# The app waits on a FIFO: idle, 64 forks of it cost the host no CPU (a polling
# loop in each would load this shared machine and every figure with it).
echo "dd if=/dev/urandom of=/tmp/fill bs=1M count=$SIZE 2>/dev/null; mkfifo /tmp/in;" \
	"echo ready > /tmp/ready; while :; do read -r x < /tmp/in; echo answer > /tmp/out.new;" \
	"mv /tmp/out.new /tmp/out; done" >"$B/entrypoint"
echo 1 >"$B/start"
until [ "$(write_read "$B/exec" 'cat /tmp/ready 2>/dev/null')" = ready ]; do sleep 0.5; done
SNAP=$(write_read "$B/snapshot")
FORK=$MNT/snapshots/$SNAP/fork
rid=$(sed -n 's/.*"runtime_id":[[:space:]]*"\([^"]*\)".*/\1/p' "$B/info.json")
IMG=$T/img
$RS checkpoint --leave-running --compression=none --image-path "$IMG" "$rid" </dev/null >/dev/null

# Terminate and remove every fork of the snapshot (between runs, not timed).
clear_forks() {
	local id
	for id in $(cat "$FORK"); do
		echo 1 >"$MNT/sandboxes/$id/terminate" &
	done
	wait_jobs
	for id in $(cat "$FORK"); do rmdir "$MNT/sandboxes/$id"; done
}
# wait for this shell's background jobs, not the daemon.
wait_jobs() {
	local j
	for j in $(jobs -p); do [ "$j" = "$PID" ] || wait "$j" || true; done
}

one_count() {
	local t0 i
	t0=$(ms)
	echo "count=$1" >"$FORK"
	echo $(($(ms) - t0))
}
one_parallel() {
	local t0 i
	t0=$(ms)
	for i in $(seq "$1"); do echo 1 >"$FORK" & done
	wait_jobs
	echo $(($(ms) - t0))
}
one_sequential() {
	local t0 i
	t0=$(ms)
	for i in $(seq "$1"); do echo 1 >"$FORK"; done
	echo $(($(ms) - t0))
}
one_runsc() {
	local t0 i
	t0=$(ms)
	for i in $(seq "$1"); do
		$RS --overlay2=root:memory --network=none restore --detach --image-path "$IMG" \
			--bundle "$STATE/sandboxes/base/bundle" "fanout-raw-$i" </dev/null >/dev/null 2>&1
	done
	echo $(($(ms) - t0))
	for i in $(seq "$1"); do
		$RS kill "fanout-raw-$i" KILL >/dev/null 2>&1 || true
		$RS delete -force "fanout-raw-$i" >/dev/null 2>&1 || true
	done
}

# first_answers N: count=N, then each fork's first answer, ms after the write.
first_answers() {
	local t0 id
	t0=$(ms)
	echo "count=$1" >"$FORK"
	for id in $(cat "$FORK"); do
		(
			for _ in $(seq 600); do
				# One line: the exec file takes a command a line.
				[ "$(write_read "$MNT/sandboxes/$id/exec" 'rm -f /tmp/out; echo x > /tmp/in; for i in $(seq 500); do [ -s /tmp/out ] && break; usleep 10000; done; cat /tmp/out')" = answer ] &&
					break
				sleep 0.05
			done
			echo $(($(ms) - t0))
		) >>"$T/answers" &
	done
	wait_jobs
}

cores=$(nproc)
{
	echo "# Fan-out: N forks of one snapshot"
	echo
	echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) with bench/fanout.sh on $cores cores,"
	echo "$(runsc --version | head -1), one snapshot of a sandbox holding $SIZE MiB of random data"
	echo "in its /tmp ($(sed -n 's/.*"size_bytes":[[:space:]]*\([0-9]*\).*/\1/p' "$MNT/snapshots/$SNAP/info.json") bytes)."
	echo "The machine is shared with other sessions and was loaded: \`/proc/loadavg\` before was"
	echo "\`$(cat /proc/loadavg)\`; \`free -g\`: $(free -g | awk '/^Mem/ { print $2 " GiB total, " $7 " available" }')."
	echo "Times in milliseconds, wall clock until every fork runs (the writes returned)."
	echo "goal = 1.2 x ceil(N / $cores) x the count=1 time."
	echo
	echo "| N | count=N | N parallel \`echo 1 > fork\` | N sequential | \`runsc restore\` x N by hand | goal | count=N within goal |"
	echo "|---|---|---|---|---|---|---|"
	one=""
	for n in $COUNTS; do
		c=$(one_count "$n")
		clear_forks
		[ -n "$one" ] || one=$c
		p=$(one_parallel "$n")
		clear_forks
		s=$(one_sequential "$n")
		clear_forks
		r=$(one_runsc "$n")
		goal=$(awk -v o="$one" -v n="$n" -v c="$cores" 'BEGIN { printf "%d", 1.2 * int((n + c - 1) / c) * o }')
		printf '| %d | %d | %d | %d | %d | %d | %s |\n' "$n" "$c" "$p" "$s" "$r" "$goal" \
			"$([ "$c" -le "$goal" ] && echo yes || echo no)"
	done
	echo
	echo "\`/proc/loadavg\` after the table: \`$(cat /proc/loadavg)\`."
	echo
	: >"$T/answers"
	first_answers 16
	clear_forks
	echo "Time to first answer of a forked app, count=16: from the write until each fork's"
	echo "entrypoint answered a request (through \`exec\`): first $(sort -n "$T/answers" | head -1) ms,"
	echo "median $(median <"$T/answers") ms, last $(sort -n "$T/answers" | tail -1) ms"
	echo "($(wc -l <"$T/answers") answers; \`/proc/loadavg\` after: \`$(cat /proc/loadavg)\`)."
} | tee "$OUT"
