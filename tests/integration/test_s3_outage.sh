#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Issue 11 item 3: an S3 outage does not stall the mount. s3rver is stopped
# with SIGSTOP (it accepts connections and never answers, as a black-holed
# endpoint does): lookups of unknown snapshots, `ls snapshots/`,
# snapshots/index and a sandbox's status all answer within 1 s, 20 at once;
# a sandbox whose entrypoint ends meanwhile shows `terminated`; a read of a
# manifest.json not kept fails fast. After SIGCONT the store coming back is
# noticed: a manifest written meanwhile is listed.
. "$(dirname "$0")/lib.sh"

serve_s3 snapfs-outage
# A stopped s3rver takes no SIGTERM: let it go on before lib.sh's cleanup.
trap 'rc=$?; [ -n "$S3_PID" ] && kill -CONT "$S3_PID" 2>/dev/null; (exit $rc); cleanup' EXIT

DAEMON_ARGS=(--store "s3://$BUCKET/outage")
start_daemon || bail "the daemon mounts on s3://$BUCKET/outage"
start_counter_sandbox keep || bail "start sandbox keep"
make_sandbox brief 'while [ ! -e /tmp/stop ]; do sleep 0.2; done' || bail "start sandbox brief"
snap=$(snapshot_of keep)
check_eq "a snapshot completes with the store up" completed "$(snap_status "$snap")"
uncached=$(snapshot_of keep)
check_eq "and a second one" completed "$(snap_status "$uncached")"
# The first manifest.json is kept in memory from here on; the second never read.
ok "manifest.json of the first reads with the store up" jq -e .files "$MNT/snapshots/$snap/manifest.json"

# elapsed_ms OUT CMD...: run CMD, write how long it took (ms) and its status to OUT.
elapsed_ms() {
	local out=$1 t0 rc
	shift
	t0=$(date +%s%N)
	"$@" >/dev/null 2>&1
	rc=$?
	echo "$((($(date +%s%N) - t0) / 1000000)) $rc" >"$out"
}

kill -STOP "$S3_PID"
# A first miss asks the sync thread for a pass, which now hangs on the store.
stat "$MNT/snapshots/snap-0000000000000000" >/dev/null 2>&1
sleep 1

pids=()
for i in $(seq 1 20); do
	elapsed_ms "$T/t.stat.$i" timeout -k 1 10 stat "$MNT/snapshots/snap-00000000000000$((10 + i))" &
	pids+=($!)
done
elapsed_ms "$T/t.ls" timeout -k 1 10 ls "$MNT/snapshots/" &
pids+=($!)
elapsed_ms "$T/t.index" timeout -k 1 10 cat "$MNT/snapshots/index" &
pids+=($!)
elapsed_ms "$T/t.status" timeout -k 1 10 cat "$MNT/sandboxes/keep/status" &
pids+=($!)
elapsed_ms "$T/t.snapstatus" timeout -k 1 10 cat "$MNT/snapshots/$snap/status" &
pids+=($!)
wait "${pids[@]}"

slowest=$(cat "$T"/t.* | sort -n | tail -n 1 | cut -d' ' -f1)
note "with the store stopped, the slowest of 24 requests took ${slowest} ms"
ok "20 parallel stats of unknown snapshots, ls, index and status each answer within 1 s" \
	test "$slowest" -lt 1000
check_eq "every stat of an unknown snapshot fails (ENOENT: stat's status 1)" 20 \
	"$(cat "$T"/t.stat.* | grep -c ' 1$')"
check_eq "ls snapshots/ succeeds" 0 "$(cut -d' ' -f2 "$T/t.ls")"
check_eq "sandboxes/keep/status succeeds" 0 "$(cut -d' ' -f2 "$T/t.status")"
check_contains "snapshots/index still lists the snapshot" "$snap completed keep" \
	"$(timeout 5 cat "$MNT/snapshots/index")"
check_eq "status answers: running" running "$(timeout 5 cat "$MNT/sandboxes/keep/status")"

elapsed_ms "$T/m.manifest" timeout -k 1 10 cat "$MNT/snapshots/$uncached/manifest.json"
read -r ms rc <"$T/m.manifest"
note "manifest.json not kept, store stopped: ${ms} ms, status $rc"
ok "a manifest.json that is not kept fails rather than wait for the store" test "$rc" -ne 0
ok "and within 2 s (a lookup, a getattr and a read share one 1 s deadline)" test "$ms" -lt 2000
check_contains "with ETIMEDOUT" "timed out" \
	"$(timeout 10 cat "$MNT/snapshots/$uncached/manifest.json" 2>&1)"
ok "a kept manifest.json still reads" timeout 5 jq -e .files "$MNT/snapshots/$snap/manifest.json"

# The monitor notices an exit while the store is stopped.
ok "sandbox brief ends its entrypoint" sb_run brief 'touch /tmp/stop'
is_terminated() { [ "$(timeout 5 cat "$MNT/sandboxes/brief/status")" = terminated ]; }
ok "the exited sandbox shows terminated within 10 s, the store still stopped" \
	poll_until 10 is_terminated
# A snapshot taken while the store hangs: its checkpoint is whole, its put hangs.
hung=$(snapshot_of keep async)
check_eq "a snapshot is accepted with the store stopped" in_progress "$(snap_status "$hung")"
check_eq "its checkpoint is taken: the sandbox runs on" running "$(sb_wait keep)"
check_eq "and the snapshot waits for the store" in_progress "$(snap_status "$hung")"
# A clean stop while the store hangs: the sync thread gives up its pass, and
# the put of that snapshot gives up after a grace (its S3 requests would each
# take minutes), leaving it whole in the spool for the next start.
stopped_at=$(now_ms)
unmount_mnt
wait_daemon_exit 60
check_eq "the daemon exits with status 0 once unmounted, the store stopped, a put hanging" 0 "$?"
note "it exited $(($(now_ms) - stopped_at)) ms after the unmount"
check_contains "the daemon says it left the snapshot to the next start" \
	"left snapshot $hung to the next start" "$(cat "$DAEMON_LOG")"
# A start while the store hangs: start-up gives the store 10 s in all (its
# requests would each take minutes), then mounts and leaves it to the sync thread.
started_at=$(now_ms)
start_daemon || bail "the daemon starts while the store hangs"
note "it mounted $(($(now_ms) - started_at)) ms after its start"
pass "the daemon mounts while the store hangs"
timed_status=$T/restarted-status
elapsed_ms "$timed_status" cat "$MNT/sandboxes/brief/status"
ok "a status answers within 1 s after that start" awk '$1 < 1000 && $2 == 0' "$timed_status"
check_eq "the exited sandbox is still terminated" terminated "$(sb_status brief)"
s3rver_stopped() { [ "$(awk '{ print $3 }' "/proc/$S3_PID/stat")" = T ]; }
ok "s3rver was stopped all along" s3rver_stopped

kill -CONT "$S3_PID"
# Another host's snapshot, written while the store is back: a copy of the manifest under a new id.
other=snap-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
s3 cp --quiet "s3://$BUCKET/outage/manifests/$snap.json" "$T/m.json" || bail "read the manifest"
jq --arg id "$other" '.id = $id' "$T/m.json" >"$T/other.json"
s3 cp --quiet "$T/other.json" "s3://$BUCKET/outage/manifests/$other.json" || bail "write a manifest"
listed() { grep -q "^$other completed " "$MNT/snapshots/index"; }
ok "the store coming back is noticed: a manifest written meanwhile is listed within 90 s" \
	poll_until 90 listed
ok "the manifest.json that failed now reads" jq -e .files "$MNT/snapshots/$uncached/manifest.json"
hung_completed() { [ "$(snap_status "$hung")" = completed ]; }
ok "the snapshot left at the stop is stored by the next start, once the store answers" \
	poll_until 120 hung_completed

kill_sandboxes
stop_daemon
finish
