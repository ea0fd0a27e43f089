#!/usr/bin/env bash
# bench/s3.sh - an upload of one large file to s3rver through snapfs's S3
# objstore (bench/s3_bench.c: objstore_put_file) against `aws s3 cp` of the
# same bytes to the same server, one run each; then a download each way.
# Counts the requests s3rver saw for each. Run on demand (not in CI):
#
#   bench/s3.sh [SIZE_MIB] [OUT]      (defaults: 1024, docs/bench/s3.md)
#
# Needs what `scripts/setup.sh --test` installs (node, s3rver, awscli). The aws
# CLI is Debian's /usr/bin/aws, whatever else is first on PATH (AWS=path to
# measure another one). Debian's aws 2.9 ignores AWS_ENDPOINT_URL (read from
# 2.13 on): it is given --endpoint-url.
set -euo pipefail
SIZE_MIB=${1:-1024}
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${2:-$REPO/docs/bench/s3.md}
SB=$REPO/build/bench/s3_bench
AWS=${AWS:-/usr/bin/aws}
BUCKET=bench
T=$(mktemp -d /tmp/snapfs-bench-s3.XXXXXX)
S3_PID=""

# shellcheck source-path=SCRIPTDIR
. "$REPO/bench/lib.sh"

cleanup() {
	set +e
	bench_stop_s3rver
	rm -rf "$T"
}
trap cleanup EXIT

make -C "$REPO" -j2 build/bench/s3_bench >/dev/null

bench_start_s3rver "$T" "$T/s3rver.log" "$BUCKET"
ENDPOINT=$AWS_ENDPOINT_URL

echo "writing $SIZE_MIB MiB of random bytes"
head -c $((SIZE_MIB << 20)) /dev/urandom >"$T/data"
sync

requests() { grep -c '^request ' "$T/s3rver.log" || true; }

# measure NAME CMD...: wall seconds, client CPU seconds and requests into $T/NAME.
measure() {
	local name=$1 before after
	shift
	before=$(requests)
	/usr/bin/time -f '%e %U %S' -o "$T/$name.time" "$@" >/dev/null
	after=$(requests)
	read -r wall user sys <"$T/$name.time"
	echo "$wall $(echo "$user + $sys" | bc | xargs printf "%.2f") $((after - before))" >"$T/$name"
	echo "$name: $(cat "$T/$name") (wall s, client CPU s, requests)"
}

LOAD_START="$(date -u +%H:%MZ): $(cut -d' ' -f1-3 /proc/loadavg)"
measure snapfs_put "$SB" "s3://$BUCKET/snapfs" put "$T/data" blob
measure aws_put "$AWS" --endpoint-url "$ENDPOINT" s3 cp --only-show-errors "$T/data" "s3://$BUCKET/aws/blob"
measure snapfs_get "$SB" "s3://$BUCKET/snapfs" get "$T/back.snapfs" blob
measure aws_get "$AWS" --endpoint-url "$ENDPOINT" s3 cp --only-show-errors "s3://$BUCKET/aws/blob" "$T/back.aws"
cmp "$T/data" "$T/back.snapfs"
cmp "$T/data" "$T/back.aws"
LOAD_END="$(date -u +%H:%MZ): $(cut -d' ' -f1-3 /proc/loadavg)"

# row NAME LABEL: one line of the table.
row() {
	local wall cpu reqs
	read -r wall cpu reqs <"$T/$1"
	printf '| %s | %s | %s | %s | %s | %s |\n' "$2" "$wall" \
		"$(echo "scale=0; $SIZE_MIB / $wall" | bc)" "$cpu" "$reqs" \
		"$(echo "scale=1; $reqs * 1024 / $SIZE_MIB" | bc)"
}

{
	echo "# S3 transfer benchmark"
	echo
	echo "Written by \`bench/s3.sh\` on $(date -u +%F). One run each, one $SIZE_MIB MiB file"
	echo "of random bytes, to and from @20minutes/s3rver 4.0.4 (SigV4 checked) on 127.0.0.1,"
	echo "which stores objects on the local disk. Host: $(nproc) cores"
	echo "($(lscpu | awk -F': *' '/Model name/ { print $2; exit }')), $(free -g |
		awk '/^Mem/ { print $2 }') GiB of memory; the server and the client share the cores."
	echo "Load average (1, 5, 15 min) at the start, $LOAD_START; at the end, $LOAD_END"
	echo "(the end's figures include this benchmark's own work)."
	echo "The machine is shared with another engineer's builds and tests, which may run meanwhile."
	echo
	echo "| client | seconds | MiB/s | client CPU s | requests | requests per GiB |"
	echo "|---|---|---|---|---|---|"
	row snapfs_put "snapfs objstore, upload (put_file)"
	row aws_put "\`aws s3 cp\`, upload"
	row snapfs_get "snapfs objstore, download (get_file)"
	row aws_get "\`aws s3 cp\`, download"
	echo
	echo "snapfs: objects above 16 MiB go as a multipart upload of 16 MiB parts, 4 in"
	echo "flight on 4 connections, each part's SHA-256 signed (x-amz-content-sha256),"
	echo "read with pread from the file twice (hash, then send). A download is one"
	echo "GET on one connection. $(curl --version | head -n 1 | cut -d' ' -f1-2)."
	echo
	echo "aws: $AWS, $("$AWS" --version 2>&1 | cut -d' ' -f1,2), default transfer settings"
	echo "(8 MiB parts above 8 MiB, 10 requests in flight, payload SHA-256 over plain HTTP);"
	echo "its download is ranged GETs of 8 MiB in parallel."
	echo
	echo "What limits these figures is the server: s3rver is one node process that"
	echo "writes every object to disk, on the same cores as the client. They compare"
	echo "the clients' request counts and CPU cost more than what a network would allow."
} >"$OUT"
echo "wrote $OUT"
