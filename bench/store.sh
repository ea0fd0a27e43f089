#!/usr/bin/env bash
# bench/store.sh - issue 3's benchmark of the snapshot store, side by side
# with runsc run by hand, on one sandbox holding 256 MiB in its /tmp (half
# random bytes, half compressible text: `od -tx1` of random bytes). Run on
# demand (not in CI), as root:
#
#   bench/store.sh [ROUNDS] [OUT]      (defaults: 3, docs/bench/store.md)
#   SNAPFS_ARGS="--spool /dev/shm" bench/store.sh ...   (more daemon options)
#
# It builds build/snapfs and build/store_bench, then measures:
#   1. ten successive snapshots, 1% of the 256 MiB (ten 256 KiB runs of new
#      random bytes) changed before each: pause, time until `completed`,
#      size, stored bytes; the total stored against one snapshot;
#   2. the pause: snapfs's pause_ms against `runsc checkpoint
#      --leave-running --compression=none` by hand, through the page cache
#      and with --direct (as snapfs runs it), ROUNDS times each;
#   3. a fork from the local cache against `runsc restore --detach` by hand
#      of the same image, ROUNDS times each;
#   4. a fork with the cache emptied (materialized from the store: ranged
#      reads, decompression, verification, writing the files), ROUNDS times;
#   5. the store alone (bench/store_bench.c) on the first snapshot's image:
#      chunk + hash + compress + write, chunk + hash only, verify, and get.
# The section between the "store bench" markers of OUT is replaced.
set -euo pipefail
ROUNDS=${1:-3}
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${2:-$REPO/docs/bench/store.md}
BIN=$REPO/build/snapfs
SB=$REPO/build/bench/store_bench
HALF_MB=128
# shellcheck source-path=SCRIPTDIR
. "$REPO/bench/lib.sh"
bench_one_daemon bench-store

field() { jq -r "$2" <"$MNT/$1/info.json"; }
mib() { echo $(($1 >> 20)); }
run_in() { write_read "$MNT/sandboxes/$1/exec" "$2" >/dev/null; }

# store_bench: every module but main (make bench; the store opens S3 URLs too).
make -C "$REPO" build/snapfs build/bench/store_bench >/dev/null

"$REPO/scripts/make-image.sh" "$IMAGES/busybox" >/dev/null
# shellcheck disable=SC2086 # SNAPFS_ARGS: more daemon options, split into words
"$BIN" -f --state "$STATE" --images "$IMAGES" ${SNAPFS_ARGS:-} "$MNT" 2>"$T/daemon.log" &
PID=$!
for _ in $(seq 100); do [ -r "$MNT/version" ] && break; sleep 0.1; done

B=b256
mkdir "$MNT/sandboxes/$B"
echo busybox >"$MNT/sandboxes/$B/image"
echo "head -c $((HALF_MB << 20)) /dev/urandom > /tmp/rand; od -An -tx1 /dev/urandom | head -c $((HALF_MB << 20)) > /tmp/text; echo ready > /tmp/ready; while :; do sleep 1; done" \
	>"$MNT/sandboxes/$B/entrypoint"
echo 1 >"$MNT/sandboxes/$B/start"
until [ "$(write_read "$MNT/sandboxes/$B/exec" 'cat /tmp/ready 2>/dev/null')" = ready ]; do sleep 1; done
rid=$(field "sandboxes/$B" .runtime_id)
bundle=$STATE/sandboxes/$B/bundle
# 1% of 256 MiB: ten runs of 256 KiB of new random bytes, five in each half.
# shellcheck disable=SC2016 # runs inside the sandbox
CHANGE='for f in rand text rand text rand text rand text rand text; do o=$(( $(od -An -tu2 -N2 /dev/urandom) % 511 )); dd if=/dev/urandom of=/tmp/$f bs=256k count=1 seek=$o conv=notrunc 2>/dev/null; done'

# --- 1. ten snapshots -----------------------------------------------------
series=$T/series
snaps=()
for i in $(seq 10); do
	[ "$i" -gt 1 ] && run_in "$B" "$CHANGE"
	t0=$(ms)
	s=$(write_read "$MNT/sandboxes/$B/snapshot")
	wall=$(($(ms) - t0))
	snaps+=("$s")
	store_ms=$(sed -n "s/.*stored snapshot $s: .* in \([0-9]*\) ms/\1/p" "$T/daemon.log")
	echo "$i $(field "snapshots/$s" .pause_ms) $wall ${store_ms:-?} $(field "snapshots/$s" .size_bytes) $(field "snapshots/$s" .stored_bytes)" >>"$series"
done
first_size=$(awk 'NR == 1 { print $5 }' "$series")
first_stored=$(awk 'NR == 1 { print $6 }' "$series")
first_store_ms=$(awk 'NR == 1 { print $4 }' "$series")
total_stored=$(awk '{ s += $6 } END { print s }' "$series")

# --- 2. pause -------------------------------------------------------------------
pauses=$T/pauses
# Into a new directory each time, kept to the end, as snapfs keeps its spools as the cache:
# writing just after deleting the previous image is faster (see docs/bench/store.md).
# by_hand NAME [FLAG]: one checkpoint into a new directory; its wall time.
by_hand() {
	local t0
	t0=$(ms)
	# shellcheck disable=SC2086 # FLAG is one word or none
	$RS checkpoint --leave-running --compression=none ${2:-} --image-path "$T/img-$1" "$rid" \
		</dev/null >/dev/null
	echo $(($(ms) - t0))
}
by_hand_after_rm() {
	local t0
	rm -rf "$T/img-rm"
	t0=$(ms)
	$RS checkpoint --leave-running --compression=none --image-path "$T/img-rm" "$rid" </dev/null >/dev/null
	echo $(($(ms) - t0))
}
# Every other round runsc goes first, so neither side always follows the other.
for r in $(seq "$ROUNDS"); do
	[ $((r % 2)) -eq 0 ] && c=$(by_hand "$r") && d=$(by_hand "d$r" --direct)
	s=$(write_read "$MNT/sandboxes/$B/snapshot")
	p=$(field "snapshots/$s" .pause_ms)
	[ $((r % 2)) -eq 1 ] && c=$(by_hand "$r") && d=$(by_hand "d$r" --direct)
	echo "$r $p $c $d $(by_hand_after_rm)" >>"$pauses"
done
rm -rf "$T"/img-*

# --- 3. fork from the local cache vs runsc restore -----------------------------------
last=${snaps[9]}
forks=$T/forks
restore_by_hand() { bench_restore_ms "$STATE/cache/$last" "$bundle" "bench-raw-$1"; }
for r in $(seq "$ROUNDS"); do
	[ $((r % 2)) -eq 0 ] && raw_ms=$(restore_by_hand "$r")
	t0=$(ms)
	f=$(write_read "$MNT/snapshots/$last/fork")
	fork_ms=$(($(ms) - t0))
	inner=$(sed -n "s/.*restored snapshot $last into $f: runsc restore took \([0-9]*\) ms/\1/p" "$T/daemon.log")
	echo 1 >"$MNT/sandboxes/$f/terminate"
	rmdir "$MNT/sandboxes/$f"
	[ $((r % 2)) -eq 1 ] && raw_ms=$(restore_by_hand "$r")
	echo "$r $fork_ms $raw_ms ${inner:-0}" >>"$forks"
done

# --- 4. fork with an empty cache ------------------------------------------------------------
cold=$T/cold
# The other snapshots' images stay (step 5 reads one) but may not lend chunks
# (runtime/cache.h): every chunk comes from the store.
rm -f "$STATE"/cache/*/.manifest.json
for r in $(seq "$ROUNDS"); do
	rm -rf "${STATE:?}/cache/$last"
	t0=$(ms)
	f=$(write_read "$MNT/snapshots/$last/fork")
	fork_ms=$(($(ms) - t0))
	line=$(grep "materialized snapshot $last" "$T/daemon.log" | tail -n 1)
	m_mib=$(sed -n 's/.*: \([0-9.]*\) MiB, .*/\1/p' <<<"$line")
	m_ms=$(sed -n 's/.* in \([0-9]*\) ms/\1/p' <<<"$line")
	echo 1 >"$MNT/sandboxes/$f/terminate"
	rmdir "$MNT/sandboxes/$f"
	echo "$r $fork_ms $m_mib $m_ms" >>"$cold"
done

# --- 5. the store alone ------------------------------------------------------------
# After the writeback of everything above, which would slow its fsyncs.
sync
"$SB" "$T/sb-store" "$STATE/cache/${snaps[0]}" "$T/sb-out" >"$T/sb"
sbv() { awk -v k="$1" -v c="$2" '$1 == k { print $c }' "$T/sb"; }

# --- the report ---------------------------------------------------------------------
section=$T/section
{
	echo "<!-- store bench begin -->"
	echo "## Snapshot store (bench/store.sh)"
	echo
	echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')),"
	echo "$(runsc --version | head -1), release build. One sandbox holds $((2 * HALF_MB)) MiB in /tmp:"
	echo "$HALF_MB MiB of random bytes and $HALF_MB MiB of \`od -tx1\` text (zstd -1 makes it about 41%)."
	echo "Times in milliseconds; MB = 10^6 bytes."
	echo
	echo "### Ten successive snapshots, 1% of the memory changed before each"
	echo
	echo "| # | pause | until completed | storing | size MiB | stored MiB |"
	echo "|---|---|---|---|---|---|"
	awk '{ printf "| %d | %d | %d | %s | %.1f | %.2f |\n", $1, $2, $3, $4, $5 / 1048576, $6 / 1048576 }' "$series"
	echo
	echo "Ten snapshots stored $(mib "$total_stored") MiB in all: $(ratio "$total_stored" "$first_stored")x what the"
	echo "first one stored (goal: at most 1.5x), $(awk -v t="$total_stored" -v f="$first_size" 'BEGIN { printf "%.1f%%", 100 * t / (10 * f) }') of ten whole images."
	echo "The first snapshot ($(mib "$first_size") MiB) was stored in $first_store_ms ms after its pause:"
	echo "$(awk -v s="$first_size" -v t="$first_store_ms" 'BEGIN { printf "%.0f", s / t / 1000 }') MB/s of chunking, hashing, compressing and writing packs."
	echo
	echo "### Pause: snapfs snapshot vs runsc checkpoint by hand"
	echo
	echo "snapfs passes \`--direct\` (O_DIRECT for the pages file) when runsc has it and the spool's"
	echo "filesystem takes it (docs/runsc-notes.md, (g)); by hand, both ways."
	echo
	echo "| round | snapfs pause | runsc checkpoint --leave-running --compression=none | the same with --direct | the first, just after deleting its previous image |"
	echo "|---|---|---|---|---|"
	awk '{ printf "| %d | %d | %d | %d | %d |\n", $1, $2, $3, $4, $5 }' "$pauses"
	echo
	p_med=$(col_median "$pauses" 2) c_med=$(col_median "$pauses" 3) d_med=$(col_median "$pauses" 4)
	echo "Median: snapfs $p_med ms; runsc $c_med ms through the page cache ($(ratio "$p_med" "$c_med")x),"
	echo "$d_med ms with --direct ($(ratio "$p_med" "$d_med")x) (goal: at most 1.10x and under 500 ms)."
	echo
	echo "### Fork from the local cache vs runsc restore of the same image"
	echo
	echo "| round | snapfs fork | its runsc restore call | runsc restore --detach by hand |"
	echo "|---|---|---|---|"
	awk '{ printf "| %d | %d | %d | %d |\n", $1, $2, $4, $3 }' "$forks"
	echo
	f_med=$(col_median "$forks" 2) r_med=$(col_median "$forks" 3)
	echo "Median: snapfs $f_med ms, runsc $r_med ms: $(ratio "$f_med" "$r_med")x (goal: at most 1.10x)."
	echo "What snapfs adds to its own \`runsc restore\` call (the write, checks, bundle, \`runsc state\`):"
	echo "median $(awk '{ print $2 - $4 }' "$forks" | median) ms."
	echo
	echo "### Fork with an empty cache: materialized from the store"
	echo
	echo "| round | snapfs fork | materialize | MiB | MB/s |"
	echo "|---|---|---|---|---|"
	awk '{ printf "| %d | %d | %d | %d | %.0f |\n", $1, $2, $4, $3, $3 * 1048576 / $4 / 1000 }' "$cold"
	echo
	echo "Materializing reads the packs' byte ranges, decompresses and verifies every chunk"
	echo "(SHA-256) on both cores and writes the files (goal for decompression and"
	echo "verification: 1 GB/s or more on two cores)."
	echo
	echo "### The store alone (bench/store_bench.c, first snapshot's image, fresh store)"
	echo
	echo "| step | seconds | MB/s of plain data |"
	echo "|---|---|---|"
	echo "| put, every chunk new: chunk, SHA-256, zstd -1, write packs | $(sbv put_new 2) | $(sbv put_new 3) |"
	echo "| put, every chunk known: chunk, SHA-256 | $(sbv put_known 2) | $(sbv put_known 3) |"
	echo "| verify: read ranges, decompress, verify | $(sbv verify 2) | $(sbv verify 3) |"
	echo "| get: read ranges, decompress, verify, write | $(sbv get 2) | $(sbv get 3) |"
	echo
	echo "Stored $(sbv stored_bytes 2) bytes for $(sbv size_bytes 2) ($(awk -v a="$(sbv stored_bytes 2)" -v b="$(sbv size_bytes 2)" 'BEGIN { printf "%.1f%%", 100 * a / b }'))."
	echo "Reproduce with \`bench/store.sh $ROUNDS\`."
	echo "<!-- store bench end -->"
} >"$section"

if [ -f "$OUT" ] && grep -q '<!-- store bench begin -->' "$OUT"; then
	awk -v f="$section" '
		/<!-- store bench begin -->/ { while ((getline l < f) > 0) print l; skip = 1; next }
		/<!-- store bench end -->/ { skip = 0; next }
		!skip' "$OUT" >"$T/out"
	cp "$T/out" "$OUT"
else
	{ [ -f "$OUT" ] && cat "$OUT" && echo; [ -f "$OUT" ] || printf '# Benchmarks\n\n'; cat "$section"; } >"$T/out"
	cp "$T/out" "$OUT"
fi
cat "$section"
