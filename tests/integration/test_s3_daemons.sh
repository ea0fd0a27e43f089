#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Issue 4 at the daemon level, against s3rver (which checks SigV4):
# two daemons with their own --state share one bucket (test_shared_store.sh
# run with an s3:// store), and Debian's aws CLI, an independent client,
# lists the manifests snapfs wrote, downloads a pack, and the chunk a
# manifest names in it has the SHA-256 the manifest gives it. With a wrong
# secret a snapshot fails naming SignatureDoesNotMatch and the source runs on.
. "$(dirname "$0")/lib.sh"

BUCKET=snapfs-daemons
S3_DIR=$T/s3rver
S3_PID="" S3_PORT=""
use_s3rver_credentials

[ -f "$REPO/tests/doubles/node_modules/@20minutes/s3rver/package.json" ] ||
	bail "s3rver is missing (scripts/setup.sh --test, or npm install --prefix tests)"
start_s3rver || bail "start s3rver"
export AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PORT AWS_REGION=us-east-1

# The two-daemon test, on the bucket; its checks count as one here.
out=$(SHARED_STORE_URL="s3://$BUCKET/shared" bash "$REPO/tests/integration/test_shared_store.sh" 2>&1)
printf '%s\n' "$out" | sed 's/^/     /'
check_match "two daemons share the bucket (test_shared_store.sh on s3://)" \
	'^[0-9]+ passed, 0 failed$' "$(printf '%s\n' "$out" | tail -n 1)"

# One daemon leaves a snapshot in the bucket for the aws CLI to read.
DAEMON_ARGS=(--store "s3://$BUCKET/one")
start_daemon || bail "the daemon mounts on s3://$BUCKET/one"
check_contains "version names the bucket, no secret" "s3://$BUCKET/one" "$(rd "$MNT/version")"
check_lacks "version holds no secret" S3RVER "$(rd "$MNT/version")"
start_counter_sandbox src || bail "start sandbox src"
snap=$(snapshot_of src)
check_eq "the snapshot completes on S3" completed "$(snap_status "$snap")"

listing=$(s3 ls --recursive "s3://$BUCKET/one/")
check_contains "aws lists the manifest snapfs wrote" "one/manifests/$snap.json" "$listing"
s3 cp --quiet "s3://$BUCKET/one/manifests/$snap.json" "$T/manifest.json"
check_eq "the manifest aws downloads is the one snapfs shows" \
	"$(jq -S . "$T/manifest.json")" "$(jq -S . "$MNT/snapshots/$snap/manifest.json")"

# The first stored chunk: [sha256, len, pack, off, zlen].
chunk=$(jq -c '[.files[].chunks[] | select(length == 5)][0]' "$T/manifest.json")
pack=$(jq -r --argjson c "$chunk" '.packs[$c[2]]' "$T/manifest.json")
s3 cp --quiet "s3://$BUCKET/one/packs/$pack.pack" "$T/pack"
off=$(jq -r '.[3]' <<<"$chunk") zlen=$(jq -r '.[4]' <<<"$chunk") len=$(jq -r '.[1]' <<<"$chunk")
tail -c +"$((off + 1))" "$T/pack" | head -c "$zlen" >"$T/chunk.stored"
if [ "$zlen" -lt "$len" ]; then
	zstd -q -d -c "$T/chunk.stored" >"$T/chunk"
else
	cp "$T/chunk.stored" "$T/chunk"
fi
check_eq "the chunk aws downloaded hashes to its name" "$(jq -r '.[0]' <<<"$chunk")" \
	"$(sha256sum "$T/chunk" | cut -d' ' -f1)"

wr "$MNT/sandboxes/src/terminate" >/dev/null
stop_daemon

# A wrong secret: the daemon starts, the snapshot fails naming the S3 error,
# and the source runs on.
AWS_SECRET_ACCESS_KEY=wrong-secret start_daemon || bail "the daemon mounts with a wrong secret"
start_counter_sandbox bad || bail "start sandbox bad"
expect_errno EIO "a snapshot with a wrong secret" wr "$MNT/sandboxes/bad/snapshot"
failed=$(awk '$3 == "bad" && $2 == "failed" { print $1 }' "$MNT/snapshots/index" | tail -n 1)
check_match "the snapshot is failed" '^snap-' "$failed"
check_contains "its error names SignatureDoesNotMatch" SignatureDoesNotMatch \
	"$(rd "$MNT/snapshots/$failed/error")"
check_lacks "its error holds no secret" wrong-secret "$(rd "$MNT/snapshots/$failed/error")"
check_eq "the source runs on" running "$(sb_status bad)"
ok "the source still answers" sb_run bad true
wr "$MNT/sandboxes/bad/terminate" >/dev/null
stop_daemon

# The server stops in the middle of an upload: the snapshot fails with the
# reason, nothing half-written is listed as completed, the source runs on,
# and with the server back the next snapshot completes.
DAEMON_ARGS=(--store "s3://$BUCKET/outage")
start_daemon || bail "the daemon mounts on s3://$BUCKET/outage"
make_sandbox big "dd if=/dev/urandom of=/tmp/big bs=1M count=384 2>/dev/null; $COUNTER_ENTRYPOINT" ||
	bail "start sandbox big"
poll_until 300 counter big || bail "sandbox big fills its memory"
snap=$(snapshot_of big async)
storing() { [ "$(snap_status "$snap")" = in_progress ] && [ "$(rd "$MNT/snapshots/$snap/progress" | cut -d' ' -f1)" -gt 0 ]; }
if poll_until 120 storing; then
	kill -KILL "$S3_PID"
	check_eq "the snapshot fails while the server is down" failed "$(snap_wait "$snap")"
	check_match "its error says what failed" 'refused|Couldn.t connect|connect' \
		"$(rd "$MNT/snapshots/$snap/error")"
	check_lacks "nothing of it is listed as completed" "$snap completed" "$(rd "$MNT/snapshots/index")"
	check_eq "the source runs on" running "$(sb_status big)"
	start_s3rver "$S3_PORT" || bail "restart s3rver on port $S3_PORT"
	again=$(snapshot_of big)
	check_eq "with the server back the next snapshot completes" completed "$(snap_status "$again")"
	ok "and it forks" fork_of "$again"
else
	skip "the snapshot was stored before the server could be stopped ($(snap_status "$snap"))"
fi

# A snapshot that takes longer than 3/4 of the grace period fails rather than
# write a manifest naming packs that another host may collect meanwhile (the
# server is stopped for longer than that); the source runs on.
stop_daemon
DAEMON_ARGS=(--store "s3://$BUCKET/outage" --gc-grace 2)
start_daemon || bail "the daemon mounts again with --gc-grace 2"
check_eq "the sandbox is found again" running "$(sb_status big)"
slow=$(snapshot_of big async)
# Stopped once the put has started (a checkpoint slower than the stop would
# otherwise begin its put after it, and finish in time).
snap=$slow
if poll_until 120 storing; then
	kill -STOP "$S3_PID"
	sleep 3
	kill -CONT "$S3_PID"
	check_eq "a snapshot that outlasts 3/4 of the grace period fails" failed "$(snap_wait "$slow")"
	check_contains "its error names the grace period" "grace period" \
		"$(rd "$MNT/snapshots/$slow/error")"
	check_lacks "it is not listed as completed" "$slow completed" "$(rd "$MNT/snapshots/index")"
else
	skip "the snapshot was stored before the server could be stopped ($(snap_status "$slow"))"
fi
check_eq "the source runs on" running "$(sb_status big)"
kill_sandboxes
stop_daemon
finish
