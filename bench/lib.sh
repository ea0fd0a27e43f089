# shellcheck shell=bash
# bench/lib.sh - what the benchmark scripts share; sourced, not run.
#
#   bench_one_daemon NAME          T, STATE, MNT, IMAGES, RS and PID for one
#                                  daemon, torn down and removed on exit
#   bench_teardown STATE MNT PID   one daemon's sandboxes, mount and process
#   bench_start_s3rver DIR LOG BUCKET
#                                  s3rver on a free port, storing under DIR,
#                                  logging to LOG, with BUCKET made; sets
#                                  S3_PID and PORT, and the AWS_* variables
#                                  that point at it with its credentials
#   bench_stop_s3rver              ends the s3rver bench_start_s3rver started
#   bench_restore_ms IMAGE BUNDLE CID
#                                  runsc restore --detach of IMAGE by hand as
#                                  container CID, removed after: its milliseconds
#   bench_start_daemon BIN         the busybox image in IMAGES, then BIN mounted
#                                  on MNT (after bench_one_daemon); sets PID
#   ms, median, col_median FILE N, ratio A B, write_read FILE [TEXT]

# Terminate the daemon's sandboxes, remove what runsc still has under its
# root, unmount, wait for the daemon.
bench_teardown() {
	local rs="runsc --root $1/runsc" c d p
	for d in "$2"/sandboxes/*/; do
		# shellcheck disable=SC2016
		[ -e "$d/terminate" ] && timeout 30 bash -c 'echo 1 >"$1"' _ "$d/terminate" 2>/dev/null
	done
	for c in $($rs list -quiet 2>/dev/null); do
		$rs kill "$c" KILL >/dev/null 2>&1
		$rs delete -force "$c" >/dev/null 2>&1
	done
	mountpoint -q "$2" && fusermount3 -u "$2"
	[ -n "$3" ] && wait "$3" 2>/dev/null
	# Whatever runsc left of this daemon's sandboxes (their command lines name its root).
	for p in $(pgrep -f -- "--root=$1/runsc"); do
		kill -KILL "$p" 2>/dev/null
	done
	return 0
}

bench_one_daemon() {
	T=$(mktemp -d "/tmp/snapfs-$1.XXXXXX")
	STATE=$T/state MNT=$T/mnt IMAGES=$T/images
	# shellcheck disable=SC2034 # RS: used by the scripts that source this file
	RS="runsc --root $STATE/runsc"
	PID="" # the caller sets it once the daemon runs
	mkdir -p "$STATE" "$MNT" "$IMAGES"
	trap bench_one_daemon_cleanup EXIT INT TERM
}

bench_start_daemon() {
	"$(dirname "${BASH_SOURCE[0]}")/../scripts/make-image.sh" "$IMAGES/busybox" >/dev/null
	"$1" -f --state "$STATE" --images "$IMAGES" "$MNT" 2>"$T/daemon.log" &
	PID=$!
	for _ in $(seq 100); do [ -r "$MNT/version" ] && break; sleep 0.1; done
}

bench_one_daemon_cleanup() {
	set +e
	bench_teardown "$STATE" "$MNT" "$PID"
	rm -rf "$T"
}

bench_start_s3rver() {
	local repo
	repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
	export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
	export AWS_CONFIG_FILE=$1/no-aws-config AWS_SHARED_CREDENTIALS_FILE=$1/no-aws-credentials
	S3RVER_LOG=1 node --openssl-legacy-provider "$repo/tests/doubles/s3rver.js" 0 "$1/s3rver" "$3" \
		>"$2" 2>&1 &
	S3_PID=$!
	PORT=""
	for _ in $(seq 1 200); do
		PORT=$(awk '/^ready/ { print $2 }' "$2")
		[ -n "$PORT" ] && break
		sleep 0.1
	done
	[ -n "$PORT" ] || { cat "$2"; return 1; }
	export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT
}

bench_stop_s3rver() {
	[ -n "${S3_PID:-}" ] && kill "$S3_PID" 2>/dev/null && wait "$S3_PID" 2>/dev/null
	return 0
}

ms() { date +%s%3N; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# col_median FILE N: the median of column N of FILE.
col_median() { awk -v n="$2" '{ print $n }' "$1" | median; }
# ratio A B: A / B with two decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

bench_restore_ms() {
	local t0 ms_
	t0=$(ms)
	$RS --overlay2=root:memory --network=none restore --detach --image-path "$1" \
		--bundle "$2" "$3" </dev/null >/dev/null 2>&1
	ms_=$(($(ms) - t0))
	$RS kill "$3" KILL >/dev/null 2>&1 || true
	$RS delete -force "$3" >/dev/null 2>&1 || true
	echo "$ms_"
}
# write_read FILE [TEXT]: write a line, read the answer on the same open file.
write_read() {
	exec 3<>"$1"
	echo "${2:-1}" >&3
	local line
	read -r line <&3 || true
	exec 3>&-
	echo "$line"
}
