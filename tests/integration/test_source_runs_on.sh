#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# A snapshot or a suspend that cannot be made never costs the source its
# life (issue 11): with wrong S3 credentials (s3rver checks SigV4), with a
# full store (a local store on a tiny tmpfs), and with a runsc whose
# checkpoint fails, both fail with a true errno and the source runs on,
# with the memory it had (its counter's token) and answering an exec.
. "$(dirname "$0")/lib.sh"

BUCKET=snapfs-runs-on
S3_DIR=$T/s3rver
S3_PID="" S3_PORT=""
FULL=$T/full
mkdir -p "$FULL"
mount -t tmpfs -o size=16m snapfs-test-full "$FULL" || bail "mount a tmpfs on $FULL"
trap 'rc=$?; teardown_host; umount -l "$FULL"; (exit $rc); cleanup' EXIT

# runs_on CASE ERRNO: snapshot and suspend sandbox src fail with ERRNO, and src runs on.
runs_on() {
	local case=$1 errno=$2 before after snap
	start_counter_sandbox src || bail "$case: start sandbox src"
	before=$(counter src)
	expect_errno "$errno" "$case: a snapshot fails" wr "$MNT/sandboxes/src/snapshot"
	snap=$(awk '$3 == "src" && $2 == "failed" { print $1 }' "$MNT/snapshots/index" | tail -n 1)
	check_match "$case: the snapshot is failed, with a reason" '[[:alpha:]]' \
		"$(rd "$MNT/snapshots/$snap/error" 2>/dev/null)"
	check_eq "$case: the source runs on after the snapshot" running "$(sb_status src)"
	expect_errno "$errno" "$case: a suspend fails" wr "$MNT/sandboxes/src/suspend"
	check_eq "$case: the source runs on after the suspend" running "$(sb_status src)"
	ok "$case: the source answers an exec" sb_run src true
	after=$(counter src)
	check_eq "$case: with the memory it had (its counter's token)" \
		"$(counter_token "$before")" "$(counter_token "$after")"
	ok "$case: its counter still moves" poll_until 30 counter_at_least src \
		"$(($(counter_count "$after") + 1))"
	wr "$MNT/sandboxes/src/terminate" >/dev/null
	rmdir "$MNT/sandboxes/src"
	stop_daemon
}

# --- wrong S3 credentials ------------------------------------------------------
[ -f "$REPO/tests/doubles/node_modules/@20minutes/s3rver/package.json" ] ||
	bail "s3rver is missing (scripts/setup.sh --test, or npm install --prefix tests)"
use_s3rver_credentials
start_s3rver || bail "start s3rver"
export AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PORT AWS_REGION=us-east-1
DAEMON_ARGS=(--store "s3://$BUCKET/wrong")
AWS_SECRET_ACCESS_KEY=wrong-secret start_daemon || bail "the daemon mounts with a wrong secret"
runs_on "wrong credentials" EIO

# --- a full store ----------------------------------------------------------------
mkdir -p "$FULL/store"
dd if=/dev/zero of="$FULL/filler" bs=1M 2>/dev/null
dd if=/dev/zero of="$FULL/filler2" bs=4k 2>/dev/null
DAEMON_ARGS=(--store "file://$FULL/store")
start_daemon || bail "the daemon mounts on a full store"
runs_on "a full store" ENOSPC
rm -f "$FULL/filler" "$FULL/filler2"

# --- a runsc whose checkpoint fails ----------------------------------------------
real=$(command -v runsc) || bail "runsc is missing"
cat >"$T/runsc" <<EOF
#!/bin/sh
for a in "\$@"; do
	[ "\$a" = checkpoint ] && { echo "checkpoint refused by the test" >&2; exit 1; }
done
exec "$real" "\$@"
EOF
chmod 0755 "$T/runsc"
DAEMON_ARGS=(--runsc "$T/runsc")
start_daemon || bail "the daemon mounts with a runsc that fails checkpoints"
runs_on "runsc checkpoint fails" EIO
finish
