#!/usr/bin/env bash
# bench/warm.sh - forks from a warm pool, a snapshot's files read without a
# fork, and a fan-out beside raw `runsc restore`s started together (issue 25).
# Run on demand (not in CI), as root, after `make`:
#
#   bench/warm.sh [SIZES_MB] [FORKS] [COUNTS] [OUT]
#        (defaults: "64 1024", 10, "4 8 16", docs/bench/warm.md)
#
# For each SIZE in SIZES_MB, a sandbox holding SIZE MiB of random data in its
# /tmp and one snapshot of it, then:
#   no pool     FORKS forks one after another (`echo 1 > fork`, synchronous),
#               the snapshot's image already in the cache (one fork before,
#               not counted): each write's milliseconds, p50 and p95
#   warm pool   `echo 1 > warm`, then FORKS forks, each once the pool is
#               ready again (the refill is not timed): p50 and p95
# For the first size only:
#   count=16    with a pool of 16 ready against without one
#   root/       `ls -lR` and `grep -r` of the snapshot's root/ (its first read,
#               which restores it hidden, and a second) against the same
#               tree of a running fork
#   fan-out     count=N against N `runsc restore --detach` of the same
#               image by hand, started together (COUNTS), and the share of
#               count=N's wall time that is not runsc's (the daemon logs each
#               restore's runsc time)
# Every fork is terminated and removed between runs, untimed.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source-path=SCRIPTDIR
. "$REPO/bench/lib.sh"
SIZES=${1:-64 1024} FORKS=${2:-10} COUNTS=${3:-4 8 16} OUT=${4:-$REPO/docs/bench/warm.md}
bench_one_daemon warm
bench_start_daemon "$REPO/build/snapfs"

# p PCT: the PCT-th percentile (nearest rank) of the numbers on stdin.
p() {
	sort -n | awk -v q="$1" '{ v[NR] = $1 } END { i = int((q * NR + 99) / 100); if (i < 1) i = 1; print v[i] }'
}
# wait for this shell's background jobs, not the daemon.
wait_jobs() {
	local j
	for j in $(jobs -p); do [ "$j" = "$PID" ] || wait "$j" || true; done
}
# remove_forks FORKFILE: terminate and remove every sandbox its read names.
remove_forks() {
	local id
	for id in $(cat "$1"); do echo 1 >"$MNT/sandboxes/$id/terminate" & done
	wait_jobs
	for id in $(cat "$1"); do rmdir "$MNT/sandboxes/$id"; done
}
# pool_ready SNAP N: wait until SNAP's pool reads "N N" (at most 10 minutes).
pool_ready() {
	local i
	for i in $(seq 6000); do
		[ "$(cat "$MNT/snapshots/$1/warm")" = "$2 $2" ] && return 0
		sleep 0.1
	done
	echo "bench/warm.sh: the pool of $1 never reached $2 ready" >&2
	return 1
}
# base SIZE: a running sandbox holding SIZE MiB in /tmp/fill; prints its id.
base() {
	local b=$MNT/sandboxes/base$1
	mkdir "$b"
	echo busybox >"$b/image"
	echo "$(($1 + 512))M" >"$b/memory"
	echo "dd if=/dev/urandom of=/tmp/fill bs=1M count=$1 2>/dev/null; mkdir -p /data/etc;" \
		"cp -a /etc/. /data/etc/; echo ready > /tmp/ready; while :; do sleep 1000; done" >"$b/entrypoint"
	echo 1 >"$b/start"
	until [ "$(write_read "$b/exec" 'cat /tmp/ready 2>/dev/null')" = ready ]; do sleep 0.5; done
	echo "base$1"
}
# fork_times SNAP N POOL: N timed forks of SNAP, one a line (POOL: wait for a
# ready pool of 1 before each).
fork_times() {
	local fork=$MNT/snapshots/$1/fork t0 i id
	for i in $(seq "$2"); do
		[ "$3" = pool ] && pool_ready "$1" 1
		t0=$(ms)
		id=$(write_read "$fork")
		echo $(($(ms) - t0))
		echo 1 >"$MNT/sandboxes/$id/terminate"
		rmdir "$MNT/sandboxes/$id"
	done
}
# count_ms SNAP N: wall milliseconds of `echo count=N > fork`; the forks removed after.
count_ms() {
	local t0 ms
	t0=$(ms)
	echo "count=$2" >"$MNT/snapshots/$1/fork"
	ms=$(($(ms) - t0))
	remove_forks "$MNT/snapshots/$1/fork"
	echo "$ms"
}
# raw_together IMG BUNDLE N: N runsc restores of IMG started at once, wall ms. Each has a
# bundle of its own, a copy of BUNDLE naming a cgroup of its own (as each fork has): N
# containers in the source's one cgroup would share its memory limit.
raw_together() {
	local t0 i ms
	for i in $(seq "$3"); do
		mkdir -p "$T/raw-$i"
		jq --arg cg "/snapfs.slice/warm-raw-$i" '.linux.cgroupsPath = $cg' "$2/config.json" \
			>"$T/raw-$i/config.json"
	done
	t0=$(ms)
	for i in $(seq "$3"); do
		$RS --overlay2=root:memory --network=none restore --detach --image-path "$1" \
			--bundle "$T/raw-$i" "warm-raw-$i" </dev/null >/dev/null 2>&1 &
	done
	wait_jobs
	ms=$(($(ms) - t0))
	for i in $(seq "$3"); do
		$RS kill "warm-raw-$i" KILL >/dev/null 2>&1 || true
		$RS delete -force "warm-raw-$i" >/dev/null 2>&1 || true
	done
	echo "$ms"
}
# runsc_share N MS: of a count=N that took MS, the runsc restore time the
# daemon logged for its forks (the longest), and what is left.
runsc_share() {
	local longest
	longest=$(grep -o 'runsc restore took [0-9]*' "$T/daemon.log" | tail -n "$1" | awk '{ print $4 }' | sort -n | tail -1)
	echo "${longest:-0} $(($2 - ${longest:-0}))"
}
# timed CMD...: milliseconds CMD took, its output dropped.
timed() {
	local t0
	t0=$(ms)
	"$@" >/dev/null 2>&1 || true
	echo $(($(ms) - t0))
}

cores=$(nproc)
{
	echo "# Warm pools, a snapshot's files, and fan-out beside raw runsc"
	echo
	echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) with bench/warm.sh on $cores cores,"
	echo "$(runsc --version | head -1). \`/proc/loadavg\` before: \`$(cat /proc/loadavg)\`;"
	echo "\`free -g\`: $(free -g | awk '/^Mem/ { print $2 " GiB total, " $7 " available" }')."
	echo "Times in milliseconds, wall clock of the write (it returns once the fork runs)."
	echo
	echo "## A fork with and without a warm pool ($FORKS forks each)"
	echo
	echo "| size | no pool p50 | no pool p95 | warm p50 | warm p95 | warm/no pool (p50) | pool member's memory |"
	echo "|---|---|---|---|---|---|---|"
	first=""
	for size in $SIZES; do
		b=$(base "$size")
		snap=$(write_read "$MNT/sandboxes/$b/snapshot")
		[ -n "$first" ] || { first=$snap; first_base=$b; }
		fork_times "$snap" 1 cold >/dev/null # the image into the cache
		fork_times "$snap" "$FORKS" cold >"$T/cold.$size"
		echo 1 >"$MNT/snapshots/$snap/warm"
		fork_times "$snap" "$FORKS" pool >"$T/warm.$size"
		pool_ready "$snap" 1
		mem=$(jq -r '.warm.memory_bytes // 0' "$MNT/snapshots/$snap/info.json")
		[ "$snap" = "$first" ] || echo 0 >"$MNT/snapshots/$snap/warm"
		c50=$(p 50 <"$T/cold.$size") w50=$(p 50 <"$T/warm.$size")
		printf '| %d MiB | %d | %d | %d | %d | %s | %s MiB |\n' "$size" "$c50" "$(p 95 <"$T/cold.$size")" \
			"$w50" "$(p 95 <"$T/warm.$size")" "$(ratio "$w50" "$c50")" "$(( ${mem:-0} / 1048576 ))"
	done
	echo
	echo "## count=16 of the ${SIZES%% *} MiB snapshot"
	echo
	echo 0 >"$MNT/snapshots/$first/warm"
	without=$(count_ms "$first" 16)
	echo 16 >"$MNT/snapshots/$first/warm"
	pool_ready "$first" 16
	with=$(count_ms "$first" 16)
	echo 0 >"$MNT/snapshots/$first/warm"
	echo "| count=16 without a pool | with a pool of 16 ready | ratio |"
	echo "|---|---|---|"
	echo "| $without | $with | $(ratio "$with" "$without") |"
	echo
	echo "## A snapshot's files without a fork"
	echo
	fork=$(write_read "$MNT/snapshots/$first/fork")
	S=$MNT/snapshots/$first/root/data F=$MNT/sandboxes/$fork/root/data
	echo "\`/data/etc\` (a copy of the image's /etc) of the snapshot's \`root/\` and of a running fork's."
	echo
	echo "| | snapshot root/, first read | snapshot root/, again | running fork's root/ |"
	echo "|---|---|---|---|"
	echo "| ls -lR | $(timed ls -lR "$S") | $(timed ls -lR "$S") | $(timed ls -lR "$F") |"
	echo "| grep -r | $(timed grep -r root "$S") | $(timed grep -r root "$S") | $(timed grep -r root "$F") |"
	echo 1 >"$MNT/sandboxes/$fork/terminate"
	rmdir "$MNT/sandboxes/$fork"
	echo
	echo "## count=N beside N raw \`runsc restore\`s started together"
	echo
	rid=$(sed -n 's/.*"runtime_id":[[:space:]]*"\([^"]*\)".*/\1/p' "$MNT/sandboxes/$first_base/info.json")
	img=$T/img
	$RS checkpoint --leave-running --compression=none --image-path "$img" "$rid" </dev/null >/dev/null
	echo "| N | count=N | N raw restores together | ratio | longest runsc restore in count=N | the rest (snapfs's) |"
	echo "|---|---|---|---|---|---|"
	for n in $COUNTS; do
		c=$(count_ms "$first" "$n")
		read -r rs rest < <(runsc_share "$n" "$c")
		r=$(raw_together "$img" "$STATE/sandboxes/$first_base/bundle" "$n")
		printf '| %d | %d | %d | %s | %d | %d |\n' "$n" "$c" "$r" "$(ratio "$c" "$r")" "$rs" "$rest"
	done
	echo
	echo "\`/proc/loadavg\` after: \`$(cat /proc/loadavg)\`."
} | tee "$OUT"
