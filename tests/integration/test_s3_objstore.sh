#!/usr/bin/env bash
# test_s3_objstore.sh - the S3 objstore against s3rver, which checks SigV4
# signatures: build/asan/tests/unit/test_s3 with SNAPFS_TEST_S3_ENDPOINT set
# (put and get of buffers and files, a 40 MiB multipart object, ranged gets,
# a listing of more keys than a page holds, NoSuchKey, SignatureDoesNotMatch,
# NoSuchBucket, and last the server killed during a 256 MiB upload). Around
# it, Debian's aws CLI uploads an object the test reads back, and afterwards
# lists and downloads what the test wrote; the killed upload is never listed.
# No daemon: this is the layer under the store.

# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

S3_TEST_BIN=${S3_TEST_BIN:-$REPO/build/asan/tests/unit/test_s3}
BUCKET=snapfs-test
S3_DIR=$T/s3rver
S3_PID=""
S3_PORT=""
use_s3rver_credentials

# run_c_test: the C program; its "N passed, N failed" line is added to ours.
run_c_test() {
	local out line p f
	out=$(SNAPFS_TEST_S3_ENDPOINT="http://127.0.0.1:$S3_PORT" SNAPFS_TEST_S3_BUCKET=$BUCKET \
		SNAPFS_TEST_S3_OUT=$T/out SNAPFS_TEST_S3_AWS_KEY=fromaws/obj \
		SNAPFS_TEST_S3_AWS_FILE=$T/fromaws SNAPFS_TEST_S3_KILL_PID=$S3_PID \
		timeout -k 5 "$OP_TIMEOUT" "$S3_TEST_BIN" 2>&1)
	printf '%s\n' "$out" | grep -vE '^[0-9]+ passed, [0-9]+ failed$' | sed 's/^/     /'
	line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
	if [ -z "$line" ]; then
		fail "test_s3 printed no result line"
		return
	fi
	p=${line%% passed*}
	f=${line#*, }
	f=${f%% failed}
	PASSED=$((PASSED + p))
	FAILED=$((FAILED + f))
	note "test_s3: $line"
}

[ -x "$S3_TEST_BIN" ] || bail "$S3_TEST_BIN is missing (make build/asan/tests/unit/test_s3)"
[ -f "$REPO/tests/doubles/node_modules/@20minutes/s3rver/package.json" ] ||
	bail "s3rver is missing (scripts/setup.sh --test, or npm install --prefix tests)"
[ -x /usr/bin/aws ] || bail "Debian's aws CLI is missing (scripts/setup.sh --test)"
mkdir -p "$T/out"
start_s3rver || bail "start s3rver"

# 20 MiB: the aws CLI sends it in parts too.
head -c $((20 << 20)) /dev/urandom >"$T/fromaws"
ok "aws s3 cp uploads an object" s3 cp --only-show-errors "$T/fromaws" "s3://$BUCKET/fromaws/obj"
err=$(AWS_SECRET_ACCESS_KEY=wrong s3 ls "s3://$BUCKET/" 2>&1)
check_contains "s3rver checks signatures (aws with a wrong secret)" SignatureDoesNotMatch "$err"

run_c_test
if kill -0 "$S3_PID" 2>/dev/null; then
	fail "test_s3 killed the server during an upload"
else
	pass "test_s3 killed the server during an upload"
fi

start_s3rver || bail "restart s3rver"
listing=$(s3 ls --recursive "s3://$BUCKET/")
check_match "aws lists the multipart object test_s3 wrote, with its size" \
	" $(stat -c %s "$T/out/blob") cross/blob" "$listing"
check_lacks "the upload cut by the server's death is not listed" "killed/big" "$listing"
check_lacks "test_s3 removed what it listed and deleted" "many/" "$listing"
ok "aws downloads it" s3 cp --only-show-errors "s3://$BUCKET/cross/blob" "$T/blob.aws"
ok "its bytes are the ones test_s3 wrote" cmp "$T/out/blob" "$T/blob.aws"
finish
