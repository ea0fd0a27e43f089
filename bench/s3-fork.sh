#!/usr/bin/env bash
# bench/s3-fork.sh - issue 4's fork on a second daemon: two daemons (A and B),
# each with its own --state and mountpoint, share one s3:// store on s3rver,
# as two hosts share a bucket. A sandbox on A holds SIZE MiB of random bytes
# in its /tmp. Each round A snapshots it (the snapshot is uploaded), B lists
# the new snapshot, and then, all timed as the wall time of
# `echo 1 > snapshots/S/fork` until the fork runs:
#   B cold:  B's first fork of S: no image of S on B's disk, so it materializes
#            S before `runsc restore`: it copies the chunks its cached images
#            of earlier rounds' snapshots hold and downloads the packs' byte
#            ranges of the others from S3 (in round 1, everything);
#   B warm:  B's second fork of S, from the image the first one left in its cache;
#   A warm:  a fork of S on A, from the spool A kept when it took S.
# Bytes: B's snapfs_store_read_bytes_total and snapfs_cache_copied_bytes_total (metrics),
# and as a check the bytes s3rver wrote (wchar of its /proc/PID/io: socket
# sends, plus its log) and the GETs it logged, while B's cold fork ran.
# Run on demand (not in CI), as root:
#
#   bench/s3-fork.sh [ROUNDS] [OUT] [SIZES]   (defaults: 3, docs/bench/s3-fork.md, "64 256")
#
# Needs what `scripts/setup.sh --test` installs (node, s3rver in tests/doubles/node_modules).
set -euo pipefail
ROUNDS=${1:-3}
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${2:-$REPO/docs/bench/s3-fork.md}
SIZES=${3:-64 256}
BIN=$REPO/build/snapfs
BUCKET=bench
T=$(mktemp -d /tmp/snapfs-bench-s3fork.XXXXXX)
IMAGES=$T/images
A_STATE=$T/a/state A_MNT=$T/a/mnt A_PID=""
B_STATE=$T/b/state B_MNT=$T/b/mnt B_PID=""
S3_PID=""
mkdir -p "$IMAGES" "$A_STATE" "$A_MNT" "$B_STATE" "$B_MNT"

# shellcheck source-path=SCRIPTDIR
. "$REPO/bench/lib.sh"

cleanup() {
	set +e
	bench_teardown "$B_STATE" "$B_MNT" "$B_PID"
	bench_teardown "$A_STATE" "$A_MNT" "$A_PID"
	bench_stop_s3rver
	rm -rf --one-file-system "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

load() { cut -d' ' -f1-3 /proc/loadavg; }
# fork_ms MNT SNAP: fork, print "ms new-id"; the fork is left running.
fork_ms() {
	local t0 f
	t0=$(ms)
	f=$(write_read "$1/snapshots/$2/fork")
	[ "$(cat "$1/sandboxes/$f/status")" = running ] || { echo "fork $f of $2 is not running" >&2; exit 1; }
	echo "$(($(ms) - t0)) $f"
}
drop_fork() {
	echo 1 >"$1/sandboxes/$2/terminate"
	rmdir "$1/sandboxes/$2"
}
s3_sent() { awk '$1 == "wchar:" { print $2 }' "/proc/$S3_PID/io"; }
# cpu_ms PID: user + system CPU time of a process, all its threads, in ms.
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$1/stat"; }
s3_gets() { grep -c "^request GET /$BUCKET/fork/packs/" "$T/s3rver.log" || true; }
# b_got store|local: B's snapfs_store_read_bytes_total or snapfs_cache_copied_bytes_total.
b_got() {
	local k=snapfs_store_read_bytes_total
	[ "$1" = local ] && k=snapfs_cache_copied_bytes_total
	awk -v k="$k" '$1 == k { print $2 }' "$B_MNT/metrics"
}

make -C "$REPO" build/snapfs >/dev/null
"$REPO/scripts/make-image.sh" "$IMAGES/busybox" >/dev/null
LOAD_START="$(date -u +%H:%MZ): $(load)"

bench_start_s3rver "$T" "$T/s3rver.log" "$BUCKET"
STORE=s3://$BUCKET/fork

"$BIN" -f --state "$A_STATE" --images "$IMAGES" --store "$STORE" "$A_MNT" 2>"$T/a.log" &
A_PID=$!
"$BIN" -f --state "$B_STATE" --images "$IMAGES" --store "$STORE" "$B_MNT" 2>"$T/b.log" &
B_PID=$!
for m in "$A_MNT" "$B_MNT"; do
	for _ in $(seq 300); do [ -r "$m/version" ] && break; sleep 0.1; done
	[ -r "$m/version" ] || { tail "$T/a.log" "$T/b.log"; exit 1; }
done

rounds=$T/rounds
# bench_size SIZE: a sandbox on A with SIZE MiB of random bytes, ROUNDS rounds.
bench_size() {
	local size=$1 b="src$1" r t0 s wall pause bytes stored listed cold warm awarm f
	local sent0 gets0 sent gets mat rst out s3cpu0 bcpu0 s3cpu bcpu got0 copied0 got copied
	mkdir "$A_MNT/sandboxes/$b"
	echo busybox >"$A_MNT/sandboxes/$b/image"
	echo "head -c $((size << 20)) /dev/urandom > /tmp/fill; echo ready > /tmp/ready; while :; do sleep 1; done" \
		>"$A_MNT/sandboxes/$b/entrypoint"
	echo 1 >"$A_MNT/sandboxes/$b/start"
	until [ "$(write_read "$A_MNT/sandboxes/$b/exec" 'cat /tmp/ready 2>/dev/null')" = ready ]; do
		sleep 1
	done
	for r in $(seq "$ROUNDS"); do
		t0=$(ms)
		s=$(write_read "$A_MNT/sandboxes/$b/snapshot")
		wall=$(($(ms) - t0))
		pause=$(jq -r .pause_ms <"$A_MNT/snapshots/$s/info.json")
		bytes=$(jq -r .size_bytes <"$A_MNT/snapshots/$s/info.json")
		stored=$(jq -r .stored_bytes <"$A_MNT/snapshots/$s/info.json")
		# From A's answer (completed: manifest uploaded) until B's index shows it.
		t0=$(ms)
		until grep -q "^$s completed " "$B_MNT/snapshots/index"; do sleep 0.05; done
		listed=$(($(ms) - t0))
		sent0=$(s3_sent) gets0=$(s3_gets) s3cpu0=$(cpu_ms "$S3_PID") bcpu0=$(cpu_ms "$B_PID")
		got0=$(b_got store) copied0=$(b_got local)
		out=$(fork_ms "$B_MNT" "$s")
		read -r cold f <<<"$out"
		sent=$(($(s3_sent) - sent0)) gets=$(($(s3_gets) - gets0))
		got=$(($(b_got store) - got0)) copied=$(($(b_got local) - copied0))
		s3cpu=$(($(cpu_ms "$S3_PID") - s3cpu0)) bcpu=$(($(cpu_ms "$B_PID") - bcpu0))
		mat=$(sed -n "s/.*materialized snapshot $s: .* in \([0-9]*\) ms/\1/p" "$T/b.log")
		rst=$(sed -n "s/.*restored snapshot $s into $f: runsc restore took \([0-9]*\) ms/\1/p" "$T/b.log")
		drop_fork "$B_MNT" "$f"
		out=$(fork_ms "$B_MNT" "$s")
		read -r warm f <<<"$out"
		drop_fork "$B_MNT" "$f"
		out=$(fork_ms "$A_MNT" "$s")
		read -r awarm f <<<"$out"
		drop_fork "$A_MNT" "$f"
		echo "$size $r $pause $wall $bytes $stored $listed $cold ${mat:-0} ${rst:-0} $sent $gets $warm $awarm $s3cpu $bcpu $got $copied" |
			tee -a "$rounds"
	done
	echo 1 >"$A_MNT/sandboxes/$b/terminate"
}

for size in $SIZES; do
	bench_size "$size"
done
LOAD_END="$(date -u +%H:%MZ): $(load)"

# col SIZE N: column N of SIZE's rounds, one value a line.
col() { awk -v s="$1" -v c="$2" '$1 == s { print $c }' "$rounds"; }
# col1 SIZE N, col2 SIZE N: the same, of round 1 only (B has no earlier image), of the others.
col1() { awk -v s="$1" -v c="$2" '$1 == s && $2 == 1 { print $c }' "$rounds"; }
col2() { awk -v s="$1" -v c="$2" '$1 == s && $2 > 1 { print $c }' "$rounds"; }
mib() { awk '{ printf "%.1f\n", $1 / 1048576 }'; }
{
	echo "# Fork on a second daemon with a cold cache, from S3"
	echo
	echo "Written by \`bench/s3-fork.sh $ROUNDS docs/bench/s3-fork.md \"$SIZES\"\` on $(date -u +%F)."
	echo "Two daemons, A and B, each with its"
	echo "own \`--state\` and mountpoint, share the store \`$STORE\` on @20minutes/s3rver"
	echo "$(jq -r .version "$REPO/tests/doubles/node_modules/@20minutes/s3rver/package.json") (node $(node --version), SigV4 checked) on 127.0.0.1, as two hosts share a bucket."
	echo "A sandbox on A holds SIZE MiB of random bytes in its /tmp (incompressible: the"
	echo "snapshot's chunks are stored as they are). Each round A snapshots it, B lists"
	echo "the new snapshot, then three forks of it, each timed as the wall time of"
	echo "\`echo 1 > snapshots/S/fork\` until the fork runs:"
	echo
	echo "- **B cold**: B's first fork of S. No image of S is on B's disk: B materializes it,"
	echo "  then runs \`runsc restore\`. It copies the chunks that the images of earlier"
	echo "  rounds' snapshots in its cache hold (\`pread\`, SHA-256 checked), downloads the"
	echo "  others (ranged GETs of up to 4 MiB, on its worker threads), decompresses and"
	echo "  verifies them, and writes the image. In round 1 B has no image: it downloads all."
	echo "- **B warm**: B's second fork of S, from the image the first left in B's cache."
	echo "- **A warm**: a fork of S on A, from the spool A kept when it took S."
	echo
	echo "Host: $(nproc) cores ($(lscpu | awk -F': *' '/Model name/ { print $2; exit }')), $(free -g |
		awk '/^Mem/ { print $2 }') GiB of memory, $(runsc --version | head -1),"
	echo "$(head -n 1 "$A_MNT/version") (release build), $(curl --version | head -n 1 | cut -d' ' -f1-2)."
	echo "Load average (1, 5, 15 min) at the start, $LOAD_START; at the end, $LOAD_END"
	echo "(the end's figures include this benchmark's own work)."
	echo "The machine is shared with another engineer's builds and tests, which may run meanwhile."
	echo "Times in milliseconds; MB = 10^6 bytes."
	echo
	echo "| data MiB | round | A pause | A snapshot until completed | B lists it after | B fork cold | its materialize | its runsc restore | B downloaded MiB | B copied MiB | s3rver sent MiB | GETs of packs | s3rver CPU | B daemon CPU | B fork warm | A fork warm |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	awk '{ printf "| %d | %d | %d | %d | %d | %d | %d | %d | %.1f | %.1f | %.1f | %d | %d | %d | %d | %d |\n",
		$1, $2, $3, $4, $7, $8, $9, $10, $17 / 1048576, $18 / 1048576, $11 / 1048576, $12,
		$15, $16, $13, $14 }' "$rounds"
	echo
	echo "Medians, round 1 (B holds no earlier image) apart from rounds 2 to $ROUNDS:"
	echo
	echo "| data MiB | snapshot MiB | stored MiB, round 1 | later | B fork cold, round 1 | later | its materialize, round 1 | later | B downloaded MiB, round 1 | later | B copied MiB, later | B fork warm | A fork warm | download MB/s, round 1 |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	for size in $SIZES; do
		printf '| %d | %.1f | %.1f | %.1f | %d | %d | %d | %d | %.1f | %.1f | %.1f | %d | %d | %.0f |\n' \
			"$size" "$(col "$size" 5 | median | mib)" \
			"$(col1 "$size" 6 | mib)" "$(col2 "$size" 6 | median | mib)" \
			"$(col1 "$size" 8)" "$(col2 "$size" 8 | median)" \
			"$(col1 "$size" 9)" "$(col2 "$size" 9 | median)" \
			"$(col1 "$size" 17 | mib)" "$(col2 "$size" 17 | median | mib)" \
			"$(col2 "$size" 18 | median | mib)" \
			"$(col "$size" 13 | median)" "$(col "$size" 14 | median)" \
			"$(awk -v s="$size" '$1 == s && $2 == 1 && $9 > 0 { print $17 / $9 / 1000 }' "$rounds")"
	done
	echo
	echo "\"B downloaded\" and \"B copied\": the growth of B's"
	echo "\`snapfs_store_read_bytes_total\` (bytes read from the store as stored: packs'"
	echo "ranges and the manifest) and \`snapfs_cache_copied_bytes_total\` (plain bytes"
	echo "copied from B's cached images of earlier snapshots) over B's cold fork."
	echo "\"s3rver sent\" checks the first from the other end: the growth of s3rver's write"
	echo "count (\`wchar\` in /proc/PID/io) meanwhile, the bodies and headers of its"
	echo "responses, plus its log lines and the two daemons' periodic listings (a few KiB)."
	echo "\"s3rver CPU\" and \"B daemon CPU\": the CPU time (user + system, all threads) each"
	echo "process used during B's cold fork (not the runsc processes of the restore)."
	echo "The later rounds' snapshots share nearly every chunk with round 1's (A stores"
	echo "almost nothing new), and B's cache holds the images of the earlier rounds'"
	echo "snapshots, each with its manifest: B copies those chunks and downloads the few"
	echo "that changed (docs/store.md, \"Chunks already on local disk\"). Such a cold fork"
	echo "still costs more than a warm one: B reads every chunk from its earlier image,"
	echo "checks its SHA-256 and writes the new image (\"its materialize, later\"), where a"
	echo "warm fork restores from an image in place. Round 1 of the second size may copy a"
	echo "little from the first size's images: pages that any two busybox sandboxes share."
	echo "Before materializes copied chunks from local images (up to commit bf0f441), every"
	echo "round's cold fork downloaded the whole image: with 256 MiB, 257 MiB each round and a"
	echo "median cold fork of 2.5 s over 5 rounds (this file's version of that commit)."
	echo "\"B lists it after\": from A's answer to the snapshot write (the manifest is"
	echo "uploaded) until B's \`snapshots/index\` shows it; B lists the store's manifests"
	echo "every 3 s, and a read of its snapshots/ lists them if that is older."
	echo
	echo "What limits these figures: s3rver is one node process on the same $(nproc) cores as"
	echo "both daemons and runsc; it reads every range from its files on the local disk"
	echo "and sends it over loopback. B's download, verification and writing share those"
	echo "cores and one disk with it (and with whatever else the shared machine runs), so"
	echo "round 1's cold fork here is bound by both ends' CPU and the disk, not by a network:"
	echo "compare its download rate with the materialize rate from a local store in"
	echo "docs/bench/store.md (\"Fork with an empty cache\"). A real S3 endpoint takes"
	echo "s3rver's CPU cost off these cores and adds network latency per GET and a"
	echo "bandwidth limit, which the later rounds' cold forks hardly meet."
	echo "Reproduce with \`bench/s3-fork.sh $ROUNDS docs/bench/s3-fork.md \"$SIZES\"\`."
} >"$OUT"
echo "wrote $OUT"
