#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# GPU sandboxes and cuda-checkpoint, on a machine without a GPU (docs/gpu.md).
#
# The daemon is given the test double of NVIDIA's cuda-checkpoint
# (tests/doubles/cuda-checkpoint) with --cuda-checkpoint: the host's binary, which
# snapfs runs in the sandbox (a script: its text, with the sandbox's shell;
# runtime/gpu/cuda.h). The image "cuda" is
# busybox plus the double as cuda-checkpoint-double (to register processes)
# and, at /usr/bin/cuda-checkpoint, a decoy that only notes that it ran: an
# image shipping that path gets snapfs's sequence, but the image's copy is
# never what runs. Its sandboxes
# register two processes as CUDA processes (the entrypoint's shell and a
# background sleep); the double keeps their states and a log of every call
# in the sandbox's /tmp. Checked: the calls and their order for snapshot,
# fork, suspend and resume; a failure injected at each step (lock,
# checkpoint, the gVisor checkpoint, restore, unlock, a lock timeout) and
# the rollback after it; a fork whose restore fails; a snapshot whose
# recorded host differs; an image changed after a snapshot (and its version gone); gpu=1 refused
# on a host without GPU. The gVisor checkpoint fails through a runsc
# wrapper that refuses `checkpoint` while $T/fail-runsc-checkpoint exists.
. "$(dirname "$0")/lib.sh"

CC=/tmp/.cuda-checkpoint-double

# --- images and the runsc wrapper --------------------------------------------

mkdir -p "$IMAGES/cuda"
cp -a "$IMAGES/busybox/." "$IMAGES/cuda/"
mkdir -p "$IMAGES/cuda/usr/bin"
install -m 0755 "$REPO/tests/doubles/cuda-checkpoint" "$IMAGES/cuda/usr/bin/cuda-checkpoint-double"
DECOY_LOG=/tmp/.image-cuda-checkpoint-ran
cat >"$IMAGES/cuda/usr/bin/cuda-checkpoint" <<EOF
#!/bin/sh
# The image's own cuda-checkpoint: snapfs must never run it.
echo "\$*" >>$DECOY_LOG
exit 1
EOF
chmod 0755 "$IMAGES/cuda/usr/bin/cuda-checkpoint"

REAL_RUNSC=$(command -v runsc) || bail "runsc is not on PATH"
cat >"$T/runsc" <<EOF
#!/bin/sh
# runsc, but \`checkpoint\` fails at once while $T/fail-runsc-checkpoint exists.
if [ "\${3:-}" = checkpoint ] && [ -e "$T/fail-runsc-checkpoint" ]; then
	echo "checkpoint refused: injected by test_gpu.sh" >&2
	exit 128
fi
exec "$REAL_RUNSC" "\$@"
EOF
chmod 0755 "$T/runsc"
DAEMON_ARGS=(--runsc "$T/runsc" --cuda-checkpoint "$REPO/tests/doubles/cuda-checkpoint")

# --- helpers -------------------------------------------------------------------

# The entrypoint's shell (pid 1) and a background sleep are CUDA processes.
CUDA_ENTRYPOINT='cuda-checkpoint-double register $$; sleep 1000000 </dev/null & cuda-checkpoint-double register $!; '"$COUNTER_ENTRYPOINT"

# cc_pids SB: the registered pids, in the order the sandbox's /proc glob lists them.
cc_pids() { sb_run "$1" "ls $CC | sed -n 's/^pid-//p' | LC_ALL=C sort"; }
# cc_states SB: "PID:STATE ..." as the double keeps them (what its --get-state answers).
cc_states() {
	sb_run "$1" 'for p in $(ls '"$CC"' | sed -n "s/^pid-//p" | LC_ALL=C sort); do printf "%s:%s " "$p" "$(cat '"$CC"'/pid-$p)"; done' |
		sed 's/ *$//'
}
cc_log() { sb_run "$1" "cat $CC/log"; }
cc_lines() { cc_log "$1" | wc -l; }
# actions LOG FROM: the lock/checkpoint/restore/unlock calls after line FROM, "VERB PID ok|...".
actions() {
	tail -n +"$(($2 + 1))" <<<"$1" | awk '$1 ~ /^(lock|checkpoint|restore|unlock)$/ {
		printf "%s%s %s %s", sep, $1, $2, ($4 == 0 ? "ok" : "fail"); sep = "|" }'
}
# inject SB FILE [CONTENT]: create a failure file of the double.
inject() { sb_run "$1" "printf '%s' '${3:-}' > $CC/$2"; }
newest_snapshot_of() { rd "$MNT/snapshots/index" | awk -v sb="$1" '$3 == sb { id = $1 } END { print id }'; }

# last_actions LOG N: the last N calls of actions LOG 0.
last_actions() { actions "$1" 0 | tr '|' '\n' | tail -n "$2" | paste -sd'|'; }

# seq_lock_ckpt / seq_restore_unlock: the two halves of a good sequence for pids 1 and $P.
seq_lock_ckpt() { echo "lock 1 ok|lock $P ok|checkpoint 1 ok|checkpoint $P ok"; }
seq_restore_unlock() { echo "restore $P ok|restore 1 ok|unlock $P ok|unlock 1 ok"; }

start_daemon || bail "the daemon mounts"

# --- gpu=1 on a host without GPU ------------------------------------------------

if [ -e /dev/nvidiactl ]; then
	skip "gpu=1 refusal: this host has /dev/nvidiactl"
else
	mkdir "$MNT/sandboxes/g1" && wr "$MNT/sandboxes/g1/image" busybox &&
		wr "$MNT/sandboxes/g1/gpu" 1 || bail "create sandbox g1 with gpu=1"
	err=$(wr "$MNT/sandboxes/g1/start" 2>&1)
	check_contains "gpu=1 start is refused with ENODEV" "No such device" "$err"
	msg=$(rd "$MNT/sandboxes/g1/error")
	check_eq "gpu=1 start: a clear message" \
		"cannot start sandbox g1: gpu=1 needs an NVIDIA GPU and driver: /dev/nvidiactl is missing" "$msg"
	check_lacks "gpu=1 start: no runsc trace in the message" "goroutine" "$msg"
	check_eq "gpu=1 start: g1 stays created" created "$(sb_status g1)"
	check_contains "gpu=1 start: the errors journal has it" "/dev/nvidiactl is missing" \
		"$(rd "$MNT/errors" | tail -n 1)"
	before=$(rd "$MNT/sandboxes/index")
	err=$(wr "$MNT/sandboxes/new" '{"image":"busybox","gpu":1}' 2>&1)
	check_contains "sandboxes/new with gpu=1 is refused with ENODEV" "No such device" "$err"
	check_eq "sandboxes/new with gpu=1 creates nothing" "$before" "$(rd "$MNT/sandboxes/index")"
	ok "rmdir g1" rmdir "$MNT/sandboxes/g1"
fi

# --- a sandbox with CUDA processes -------------------------------------------------

d=$MNT/sandboxes/src
mkdir "$d" && wr "$d/image" cuda && wr "$d/entrypoint" "$CUDA_ENTRYPOINT" && wr "$d/start" ||
	bail "start sandbox src on the cuda image"
poll_until 30 counter src || bail "the counter of src does not start"
pids=$(cc_pids src | tr '\n' ' ' | sed 's/ *$//')
P=${pids#1 }
check_match "two CUDA processes registered: 1 and the sleep" '^1 [0-9]+$' "$pids"
check_eq "both running" "1:running $P:running" "$(cc_states src)"

# --- snapshot: the sequence ---------------------------------------------------------

mark=$(cc_lines src)
snap=$(snapshot_of src)
check_eq "snapshot completed" completed "$(snap_status "$snap")"
log=$(cc_log src)
check_contains "the finder asked pid 1 for its state" "get-state 1 => 0 running" \
	"$(tail -n +"$((mark + 1))" <<<"$log")"
check_eq "snapshot: lock, checkpoint, gVisor checkpoint, restore, unlock" \
	"$(seq_lock_ckpt)|$(seq_restore_unlock)" "$(actions "$log" "$mark")"
check_contains "snapshot: the lock has a timeout" "--action lock --pid $P --timeout 10000" "$log"
check_eq "snapshot: the source's CUDA processes run unlocked" "1:running $P:running" "$(cc_states src)"
check_eq "snapshot: the source runs" running "$(sb_status src)"
note "pause_ms (the gVisor checkpoint alone): $(jget "$MNT/snapshots/$snap/info.json" .pause_ms)"
manifest=$MNT/snapshots/$snap/manifest.json
check_eq "the manifest records the CUDA processes" "1 running checkpointed,$P running checkpointed" \
	"$(jq -r '[.cuda_processes[] | "\(.pid) \(.before) \(.at_checkpoint)"] | join(",")' "$manifest")"
check_contains "the checkpoint image holds the record" snapfs-cuda.json \
	"$(jq -r '[.files[]?.name] | join(" ")' "$manifest" 2>/dev/null)"
check_eq "the host profile has gpu_driver and gpus" true \
	"$(jq '.host | has("gpu_driver") and has("gpus")' "$MNT/snapshots/$snap/info.json")"
check_eq "a snapshot without GPU is restorable here" yes "$(rd "$MNT/snapshots/$snap/restorable")"

# --- the host's binary, never the image's ------------------------------------------------

check_eq "the image's cuda-checkpoint never ran" "" "$(sb_run src "cat $DECOY_LOG 2>/dev/null")"
check_contains "the daemon says which cuda-checkpoint it runs" \
	"cuda-checkpoint: $REPO/tests/doubles/cuda-checkpoint (a script" "$(cat "$DAEMON_LOG")"

# --- fork: restore and unlock in the new sandbox ---------------------------------------

fork=$(fork_of "$snap")
check_eq "fork runs" running "$(sb_status "$fork")"
# The fork's /tmp, and so the double's log, is the source's at the checkpoint.
check_eq "fork: the source's lock and checkpoint, then restore and unlock in the fork" \
	"$(seq_lock_ckpt)|$(seq_restore_unlock)" "$(last_actions "$(cc_log "$fork")" 8)"
check_eq "fork: its CUDA processes run unlocked" "1:running $P:running" "$(cc_states "$fork")"
check_eq "fork: the same process (token)" "$(counter_token "$(counter src)")" \
	"$(counter_token "$(counter "$fork")")"

# --- suspend and resume -------------------------------------------------------------------

mark=$(cc_lines "$fork")
ok "suspend the fork" wr "$MNT/sandboxes/$fork/suspend"
check_eq "suspended" suspended "$(sb_status "$fork")"
ssnap=$(suspend_snapshot_of "$fork")
check_eq "the suspend's manifest records the CUDA processes" 2 \
	"$(jq '.cuda_processes | length' "$MNT/snapshots/$ssnap/manifest.json")"
ok "resume the fork" wr "$MNT/sandboxes/$fork/resume"
check_eq "resumed" running "$(sb_status "$fork")"
check_eq "suspend + resume: lock, checkpoint, then restore, unlock in the resumed sandbox" \
	"$(seq_lock_ckpt)|$(seq_restore_unlock)" "$(actions "$(cc_log "$fork")" "$mark")"
check_eq "resume: its CUDA processes run unlocked" "1:running $P:running" "$(cc_states "$fork")"

# --- a failure at each step, and the rollback ---------------------------------------------

# failed_snapshot LABEL EXPECTED_ACTIONS NEEDLE...: a snapshot of src fails with EIO; its
# message holds every NEEDLE; the calls since the mark are EXPECTED_ACTIONS; src runs,
# unlocked, and still answers.
failed_snapshot() {
	local label=$1 expected=$2 id msg needle
	shift 2
	expect_errno EIO "$label: the snapshot fails" wr "$MNT/sandboxes/src/snapshot"
	id=$(newest_snapshot_of src)
	check_eq "$label: the snapshot is failed" failed "$(snap_status "$id")"
	msg=$(rd "$MNT/snapshots/$id/error")
	note "$label: $msg"
	for needle in "$@"; do
		check_contains "$label: the message says '$needle'" "$needle" "$msg"
	done
	check_eq "$label: the calls and the rollback" "$expected" "$(actions "$(cc_log src)" "$mark")"
	check_eq "$label: the source runs" running "$(sb_status src)"
	check_eq "$label: its CUDA processes run unlocked" "1:running $P:running" "$(cc_states src)"
	check_eq "$label: nothing left in the spool" "" "$(ls "$STATE/spool")"
}

mark=$(cc_lines src)
inject src "fail-lock-$P"
failed_snapshot "lock fails" "lock 1 ok|lock $P fail|unlock 1 ok" \
	"cannot snapshot sandbox src: cuda-checkpoint lock of process $P failed" \
	"injected failure (fail-lock-$P)" "rolled back: CUDA processes back as before"

mark=$(cc_lines src)
inject src "fail-lock-timeout-$P"
failed_snapshot "lock timeout" "lock 1 ok|lock $P fail|unlock 1 ok" \
	"lock of process $P failed (exit 1, lock timeout 10000 ms)" \
	"the lock timed out after 10000 ms" "rolled back"

mark=$(cc_lines src)
inject src "fail-checkpoint-$P"
failed_snapshot "checkpoint fails" \
	"lock 1 ok|lock $P ok|checkpoint 1 ok|checkpoint $P fail|restore 1 ok|unlock $P ok|unlock 1 ok" \
	"cuda-checkpoint checkpoint of process $P failed" "injected failure (fail-checkpoint-$P)" \
	"rolled back"

mark=$(cc_lines src)
touch "$T/fail-runsc-checkpoint"
failed_snapshot "gVisor checkpoint fails" "$(seq_lock_ckpt)|$(seq_restore_unlock)" \
	"cannot snapshot sandbox src: gVisor checkpoint failed: runsc checkpoint failed" \
	"injected by test_gpu.sh" "rolled back: CUDA processes back as before"
rm -f "$T/fail-runsc-checkpoint"

mark=$(cc_lines src)
inject src "fail-restore-$P"
failed_snapshot "restore fails" \
	"$(seq_lock_ckpt)|restore $P fail|restore 1 ok|unlock 1 ok|restore $P ok|unlock $P ok" \
	"cuda-checkpoint restore of process $P failed" "injected failure (fail-restore-$P)" \
	"retried: CUDA processes back as before"

mark=$(cc_lines src)
inject src "fail-unlock-$P"
failed_snapshot "unlock fails" \
	"$(seq_lock_ckpt)|restore $P ok|restore 1 ok|unlock $P fail|unlock 1 ok|unlock $P ok" \
	"cuda-checkpoint unlock of process $P failed" "injected failure (fail-unlock-$P)" "retried"

check_eq "after the failures a snapshot works again" completed "$(snap_status "$(snapshot_of src)")"

# --- a fork whose restore fails ---------------------------------------------------------------

# The failure file must fire in the fork but not in the source, which restores right after the
# checkpoint: it fires only in a time window that opens once the snapshot is done.
from=$(($(date +%s) + 15))
inject src "fail-restore-$P" "$from $((from + 10))"
snap2=$(snapshot_of src)
ok "the source's own restore ran before the window opened" test "$(date +%s)" -lt "$from"
sb_run src "rm -f $CC/fail-restore-$P" >/dev/null
check_eq "snapshot 2 completed" completed "$(snap_status "$snap2")"
while [ "$(date +%s)" -lt "$from" ]; do sleep 1; done
err=$(wr_read "$MNT/snapshots/$snap2/fork" 2>&1)
check_contains "fork with a failing restore fails (EIO)" "Input/output error" "$err"
bad=$(rd "$MNT/sandboxes/index" | awk '$2 == "failed" { id = $1 } END { print id }')
check_match "the fork is failed" '^sbx-' "$bad"
msg=$(rd "$MNT/sandboxes/$bad/error")
note "failed fork: $msg"
check_contains "the fork's message names the step and process" \
	"cannot restore snapshot $snap2 into sandbox $bad: cuda-checkpoint restore of process $P failed" "$msg"
check_contains "the fork's message quotes the double" "injected failure (fail-restore-$P)" "$msg"
while [ "$(date +%s)" -lt "$((from + 10))" ]; do sleep 1; done
fork2=$(fork_of "$snap2")
check_eq "after the window a fork of it works" running "$(sb_status "$fork2")"
check_eq "and its CUDA processes run unlocked" "1:running $P:running" "$(cc_states "$fork2")"

# --- snapfs killed in the middle of the sequence ------------------------------------------

# The checkpoint of $P sleeps; snapfs dies meanwhile with 1 checkpointed and $P locked. Its
# restart finds fork2 `snapshotting` and still running, and brings the processes back.
mark=$(cc_lines "$fork2")
inject "$fork2" "sleep-checkpoint-$P" 6
ok "an async snapshot of fork2" wr "$MNT/sandboxes/$fork2/snapshot" async
sleep 3
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=""
unmount_mnt
start_daemon || bail "the daemon starts again after SIGKILL"
check_eq "after the restart fork2 runs" running "$(sb_status "$fork2")"
check_eq "its CUDA processes run unlocked" "1:running $P:running" "$(cc_states "$fork2")"
check_contains "its error says what happened" \
	"snapfs stopped during a checkpoint of this sandbox; CUDA processes back as before" \
	"$(rd "$MNT/sandboxes/$fork2/error")"
check_eq "the interrupted snapshot failed" failed "$(snap_status "$(newest_snapshot_of "$fork2")")"
note "calls: $(actions "$(cc_log "$fork2")" "$mark")"

# --- a process cuda-checkpoint cannot recover ----------------------------------------------

mark=$(cc_lines src)
inject src "fail-checkpoint-$P-hard"
expect_errno EIO "a hard checkpoint failure fails the snapshot" wr "$MNT/sandboxes/src/snapshot"
msg=$(rd "$MNT/snapshots/$(newest_snapshot_of src)/error")
check_contains "it says the rollback could not bring the process back" \
	"CUDA processes not back: $P failed (was running)" "$msg"
check_eq "the other process runs unlocked" "1:running $P:failed" "$(cc_states src)"
check_eq "the source runs" running "$(sb_status src)"
expect_errno EBUSY "a snapshot with a CUDA process in state failed is refused" \
	wr "$MNT/sandboxes/src/snapshot"
check_contains "it names the process and the state" "CUDA process $P is in state failed" \
	"$(rd "$MNT/snapshots/$(newest_snapshot_of src)/error")"

# --- a snapshot whose recorded host differs ------------------------------------------------

db=$STATE/registry.db
sqlite3 -cmd ".timeout 10000" "$db" "UPDATE snapshots SET gpu = 1, host_json = json_set(host_json,
	'\$.runsc_version', '0.0~19990101.0',
	'\$.cpu_features', json_extract(host_json, '\$.cpu_features') || ' snapfs_fake_feature',
	'\$.gpu_driver', '550.54.15', '\$.gpus', json('[\"NVIDIA H100 80GB HBM3\"]'))
	WHERE id = '$snap'" || fail "edit the registry's host profile of $snap"
why=$(rd "$MNT/snapshots/$snap/restorable")
check_contains "restorable: the runsc version" \
	"runsc version differs: snapshot 0.0~19990101.0, host " "$why"
check_contains "restorable: the CPU feature" "CPU features missing on this host: snapfs_fake_feature" "$why"
check_contains "restorable: the GPU driver" "GPU driver differs: snapshot 550.54.15, host none" "$why"
check_contains "restorable: the GPU count" "GPU count differs: snapshot 1, host 0" "$why"
check_eq "restorable: one line each" 4 "$(wc -l <<<"$why")"
err=$(wr_read "$MNT/snapshots/$snap/fork" 2>&1)
check_contains "the fork is refused (EINVAL)" "Invalid argument" "$err"
msg=$(rd "$MNT/errors" | tail -n 1 | jq -r .error)
while IFS= read -r line; do
	check_contains "the refusal says: $line" "$line" "$msg"
done <<<"$why"

# --- an image changed after a snapshot ---------------------------------------------------

make_sandbox plain "$COUNTER_ENTRYPOINT" || bail "start sandbox plain on the busybox image"
psnap=$(snapshot_of plain)
check_eq "snapshot of a sandbox without cuda-checkpoint completed" completed "$(snap_status "$psnap")"
check_eq "its manifest records no CUDA processes" null \
	"$(jq -c .cuda_processes "$MNT/snapshots/$psnap/manifest.json")"
check_eq "the image's cuda-checkpoint never ran in any sandbox" "" \
	"$(for sb in src "$fork" "$fork2"; do sb_run "$sb" "cat $DECOY_LOG 2>/dev/null"; done)"
old=$(jget "$MNT/snapshots/$psnap/info.json" .image_digest)
echo changed >"$IMAGES/busybox/etc/changed"
new=$(rd "$MNT/images/busybox/digest")
ok "the image digest changed ($old -> $new)" test "$old" != "$new"
check_eq "restorable still: this host keeps the version of the tree it was taken of" yes \
	"$(rd "$MNT/snapshots/$psnap/restorable")"
# Without that version (docs/images.md): refused, both digests named.
ok "move its version aside" mv "$IMAGES/.tree/busybox/${old#sha256:}" "$IMAGES/.tree/busybox/.aside"
why=$(rd "$MNT/snapshots/$psnap/restorable")
check_contains "restorable names both digests" "snapshot has $old, host has $new" "$why"
err=$(wr_read "$MNT/snapshots/$psnap/fork" 2>&1)
check_contains "the fork is refused (EINVAL)" "Invalid argument" "$err"
msg=$(rd "$MNT/errors" | tail -n 1 | jq -r .error)
check_contains "the refusal names the old digest" "$old" "$msg"
check_contains "the refusal names the new digest" "$new" "$msg"
ok "move the version back" mv "$IMAGES/.tree/busybox/.aside" "$IMAGES/.tree/busybox/${old#sha256:}"
rm -f "$IMAGES/busybox/etc/changed"

stop_daemon
finish
