#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317
# Control files: synchronous and async writes, the id read back on the same
# open file, lines split over writes, truncation, and every kind of refusal
# (errno on the write, a sentence in `error` and `errors`, nothing changed).
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"
start_counter_sandbox a || bail "start sandbox a"
A=$MNT/sandboxes/a
count_snapshots() { find "$A/snapshots" -mindepth 1 -maxdepth 1 | wc -l; }
snapshots_are() { [ "$(count_snapshots)" -eq "$1" ]; }

# --- synchronous, and the id on the same open file (as a shell user does it) ---
id=$(timeout -k 5 "$OP_TIMEOUT" bash -c 'exec 3<>"$1"; echo 1 >&3; read -r id <&3; echo "$id"' \
	_ "$A/snapshot")
check_match "exec 3<>snapshot; echo 1 >&3; read id <&3: the id" '^snap-[0-9a-f]{16}$' "$id"
check_eq "the synchronous write returned when it was done" completed "$(snap_status "$id")"
check_eq "a fresh read of snapshot: the newest id" "$id" "$(rd "$A/snapshot")"
id=$(snapshot_of a name=before-upgrade)
check_eq "name=LABEL names the snapshot" before-upgrade "$(jget "$MNT/snapshots/$id/info.json" .name)"
check_eq "a fresh read of snapshot: the newest id again" "$id" "$(rd "$A/snapshot")"

# --- async ---
t0=$(now_ms)
id=$(wr_read "$A/snapshot" async | head -n 1)
t1=$(now_ms)
st=$(snap_status "$id")
check_match "async: the id at once" '^snap-[0-9a-f]{16}$' "$id"
check_match "async: a snapshot state" '^(pending|in_progress|completed)$' "$st"
if [ "$st" = completed ]; then
	skip "async: the write returned before the snapshot completed: it was completed before its status was read ($((t1 - t0)) ms)"
else
	pass "async: the write returned before the snapshot completed (status $st, $((t1 - t0)) ms)"
fi
check_eq "async: wait prints the end state" completed "$(snap_wait "$id")"
check_eq "async: a fresh read of snapshot gives it" "$id" "$(rd "$A/snapshot")"

# --- lines split over writes, a last line without a newline, truncation ---
# Two writes from one process (a pause made by a builtin: read -t on a fifo).
mkfifo "$T/fifo"
n=$(count_snapshots)
ok "a line in two writes from one process" timeout 60 bash -c \
	'{ printf asy; read -rt 0.2 _ <>"$2"; printf "nc\n"; } >"$1"' _ "$A/snapshot" "$T/fifo"
ok "it took one snapshot" poll_until 10 snapshots_are $((n + 1))
snap_wait "$(rd "$A/snapshot")" >/dev/null
# The same with a command in between: sleep inherits the open file and closes
# it (a FLUSH) when it exits, before the rest of the line has come.
n=$(count_snapshots)
ok "a line in two writes with a command between (printf asy; sleep; printf 'nc\\n')" \
	timeout 60 bash -c '{ printf asy; sleep 0.2; printf "nc\n"; } >"$1"' _ "$A/snapshot"
ok "it took one snapshot" poll_until 10 snapshots_are $((n + 1))
snap_wait "$(rd "$A/snapshot")" >/dev/null
n=$(count_snapshots)
ok "a last line without a newline (printf async)" timeout 60 bash -c 'printf async >"$1"' _ "$A/snapshot"
ok "it took one snapshot" poll_until 10 snapshots_are $((n + 1))
snap_wait "$(rd "$A/snapshot")" >/dev/null
n=$(count_snapshots)
ok "truncate -s 0 snapshot is accepted" truncate -s 0 "$A/snapshot"
ok "an open with O_TRUNC and no write is accepted" bash -c ': >"$1"' _ "$A/snapshot"
sleep 1
check_eq "neither took a snapshot" "$n" "$(count_snapshots)"
expect_errno EINVAL "truncate to a size other than 0 (docs/control-files.md)" truncate -s 5 "$A/snapshot"

mkdir "$MNT/sandboxes/b" || bail "mkdir sandboxes/b"
wr "$MNT/sandboxes/b/image" busybox || bail "image busybox for sandboxes/b"
ok "start written as '1', a pause, then the newline" timeout "$OP_TIMEOUT" bash -c \
	'{ printf 1; sleep 0.2; printf "\n"; } >"$1"' _ "$MNT/sandboxes/b/start"
check_eq "b runs once the write returned" running "$(sb_status b)"

# --- refusals ---
expect_refusal EINVAL "an unknown word" a wr "$A/snapshot" bogus
expect_refusal EINVAL "a known word and an unknown one" a wr "$A/snapshot" "async bogus"
# A write the file's mode refuses is refused at open: no request, so nothing is
# recorded (test_crawl.sh has the reads of write-only files).
err0=$(rd "$A/error")
lines0=$(count_lines "$MNT/errors")
expect_errno EACCES "a write to the read-only status" wr "$A/status" running
check_eq "it left a's error as it was" "$err0" "$(rd "$A/error")"
check_eq "it added no line to errors" "$lines0" "$(count_lines "$MNT/errors")"
expect_refusal EINVAL "mkdir sandboxes/Bad_Name!" "" mkdir "$MNT/sandboxes/Bad_Name!"
# The kernel answers EEXIST from its own lookup, so the daemon never sees this one.
expect_errno EEXIST "mkdir of a taken name" mkdir "$A"
check_eq "a is unchanged" running "$(sb_status a)"
expect_refusal EBUSY "start of a running sandbox" a wr "$A/start"
expect_refusal EBUSY "entrypoint of a running sandbox" a wr "$A/entrypoint" "sleep 1"
expect_refusal EFBIG "a 5000-byte line" a wr "$A/snapshot" "$(head -c 5000 /dev/zero | tr '\0' x)"
expect_refusal EFBIG "a 5000-byte exec line" a wr "$A/exec" "$(head -c 5000 /dev/zero | tr '\0' x)"
expect_refusal EBUSY "resume of a running sandbox" a wr "$A/resume"

ok "suspend b" wr "$MNT/sandboxes/b/suspend"
expect_refusal EBUSY "exec on a suspended sandbox" b wr "$MNT/sandboxes/b/exec" true
expect_refusal EBUSY "snapshot of a suspended sandbox" b wr "$MNT/sandboxes/b/snapshot"
expect_refusal EBUSY "suspend of a suspended sandbox" b wr "$MNT/sandboxes/b/suspend"
ok "resume b" wr "$MNT/sandboxes/b/resume"
check_eq "b runs again" running "$(sb_status b)"

mkdir "$MNT/sandboxes/c" || bail "mkdir sandboxes/c"
if err=$(wr "$MNT/sandboxes/c/image" no-such-image 2>&1); then
	expect_refusal ENOENT "start with an unknown image" c wr "$MNT/sandboxes/c/start"
else
	check_contains "an unknown image is refused when set: ENOENT" "No such file or directory" "$err"
	check_eq "c is still created" created "$(sb_status c)"
fi
expect_errno ENOENT "a write to a sandbox that is not there" wr "$MNT/sandboxes/no-such/start"
# What the tree does not allow at all (docs/control-files.md, "Reading").
# (A file created in a sandbox's directory is a scratch file: test_replace.sh.)
expect_errno EACCES "creating a file in sandboxes/" touch "$MNT/sandboxes/new-file"
expect_errno EBUSY "unlink of a running sandbox's control file (rm -rf: test_rm_rf.sh)" rm -f "$A/status"
expect_errno EPERM "unlink of a file outside a sandbox" rm -f "$MNT/README"
expect_errno EPERM "rename of a control file" mv "$A/status" "$A/status2"
expect_errno EPERM "chmod of a control file" chmod 0777 "$A/status"
expect_errno EPERM "mkdir outside sandboxes/" mkdir "$MNT/snapshots/mine"
check_eq "a is unchanged by all that" running "$(sb_status a)"

# --- a failed snapshot cannot be forked ---
# Make the store refuse writes (immutable, even for root): the checkpoint
# succeeds, storing fails, the snapshot is `failed`, the source runs on.
if mkdir -p "$STATE/store" && chattr +i "$STATE/store" 2>/dev/null; then
	UNFREEZE_DIRS+=("$STATE/store")
	chattr -R +i "$STATE/store"
	fid=$(wr_read "$A/snapshot" async | head -n 1)
	check_match "a snapshot into a read-only store: the id" '^snap-[0-9a-f]{16}$' "$fid"
	check_eq "it fails" failed "$(snap_wait "$fid")"
	chattr -R -i "$STATE/store"
	check_match "its error says why" '[[:alpha:]]' "$(rd "$MNT/snapshots/$fid/error")"
	ok "errors has a line about it" grep -q "$fid" "$MNT/errors"
	check_eq "the source runs on" running "$(sb_status a)"
	ok "the source still answers" sb_run a true
	expect_refusal "EINVAL|EBUSY" "fork of a failed snapshot" "" wr "$MNT/snapshots/$fid/fork"
	check_match "the reason says it failed" 'fail' "$(rd "$MNT/errors" | tail -n 1 | jq -r .error)"
	ok "a failed snapshot can be deleted" rmdir "$MNT/snapshots/$fid"
	id=$(snapshot_of a)
	check_eq "with the store writable again, a snapshot completes" completed "$(snap_status "$id")"
else
	skip "fork of a failed snapshot: chattr +i does not work on $STATE, no way to make a snapshot fail"
fi

stop_daemon
finish
