#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Bounds (docs/control-files.md, "Bounds"): job queues refuse with EAGAIN past
# their bound and leave nothing half-made; the journals rotate at
# --journal-max and `tail -f events` goes on across a rotation; an
# interrupted `cat wait` leaves no waiter behind.
#
# A runsc wrapper holds `restore`, `checkpoint` and execs of commands that
# say "bounds-hold" while $T/hold exists, so the queues stay full while
# the test writes; with $T/fail they then fail at once instead of running.
# A small quarantine, so that VmRSS shows what the daemon holds, not what ASan keeps.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:quarantine_size_mb=16}
. "$(dirname "$0")/lib.sh"

N=${BOUNDS_WRITES:-10000} # writes to fork and to exec
WAITS=${BOUNDS_WAITS:-1000}
JOURNAL_MAX=8192
RSS_GROWTH_MAX_KB=$((512 * 1024)) # generous: ASan keeps up to 256 MiB of freed memory
STORM_TIMEOUT=600                 # bounds the test, not a check
HOLD=$T/hold
FAIL=$T/fail

REAL_RUNSC=$(command -v runsc) || bail "runsc is not on PATH"
cat >"$T/runsc" <<EOF
#!/bin/bash
# runsc, but held while $HOLD exists (restore, checkpoint, execs of "bounds-hold"),
# and failing at once while $FAIL exists (those, and every exec).
args=("\$@")
i=2 # past --root DIR: the subcommand is the first word that is not a flag
while [ "\$i" -lt "\$#" ] && [[ \${args[\$i]} == --* ]]; do i=\$((i + 1)); done
held="" input=""
case "\${args[\$i]:-}" in
restore | checkpoint) held=1 ;;
exec)
	# The command comes on stdin (never on a command line /proc shows): look at it there.
	input=\$(cat)
	[[ "\$* \$input" == *bounds-hold* ]] && held=1
	;;
esac
if [ -n "\$held" ]; then
	# At most 10 minutes: a test that dies holding must not hold the daemon's shutdown for ever.
	while [ -e "$HOLD" ] && [ "\$SECONDS" -lt 600 ]; do sleep 0.05; done
fi
if [ -e "$FAIL" ] && { [ -n "\$held" ] || [ "\${args[\$i]:-}" = exec ]; }; then
	echo "failed by test_bounds" >&2
	exit 1
fi
[ -n "\$input" ] && exec "$REAL_RUNSC" "\$@" <<<"\$input"
exec "$REAL_RUNSC" "\$@"
EOF
chmod 0755 "$T/runsc"
# No agent: this test holds execs in their runsc calls to fill the exec queue, and an
# exec through the agent makes none (test_inside.sh tests the agent's own bounds).
# A held runsc call outlives the daemon's default 60 s on a slow machine (the storm of
# writes took 100 s in one CI run): killed then, the 8 held restores freed their
# places and 8 more forks were accepted than the queue holds. 900 s: past the hold.
DAEMON_ARGS=(--runsc "$T/runsc" --journal-max "$JOURNAL_MAX" --agent "" --runsc-timeout 900)

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$DAEMON_PID/status"; }
# metric NAME[{LABELS}]: its value in the metrics file ("" when there is none).
metric() { rd "$MNT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
metric_is() { [ "$(metric "$1")" = "$2" ]; }
EAGAIN_TEXT=$(errno_text EAGAIN)
events_have() { rd "$MNT/events" | grep -q "$1"; }

# queue_full_refusal ERRNO DESC SANDBOX PATH [LINE]: writing LINE to MNT/PATH is
# refused with ERRNO; the newest line in errors names PATH and says the queue
# is full; SANDBOX (unless "") has that sentence in its error file and has
# kept its status. (Not expect_refusal: it counts the lines of errors, which a
# rotation may shorten.)
queue_full_refusal() {
	local errno=$1 desc=$2 sb=$3 path=$4 before="" last
	[ -n "$sb" ] && before=$(sb_status "$sb")
	expect_errno "$errno" "$desc" wr "$MNT/$path" "${5-1}"
	last=$(rd "$MNT/errors" | tail -n 1)
	check_eq "$desc: errors names the file" "$path" "$(jq -r .path <<<"$last")"
	check_contains "$desc: errors says why" "queue is full" "$(jq -r .error <<<"$last")"
	if [ -n "$sb" ]; then
		check_contains "$desc: sandboxes/$sb/error says why" "queue is full" \
			"$(rd "$MNT/sandboxes/$sb/error")"
		check_eq "$desc: status of $sb unchanged" "$before" "$(sb_status "$sb")"
	fi
}

start_daemon || bail "the daemon mounts"
timeout 900 tail -n 0 -f "$MNT/events" >"$T/events.tail" 2>&1 &
BG_PIDS=($!)
make_sandbox tiny 'while :; do sleep 3600; done' || bail "start sandbox tiny"
snap=$(snapshot_of tiny)
check_eq "a snapshot of tiny" completed "$(snap_wait "$snap")"
spare=$(snapshot_of tiny) # deleted, or not, while the queue is full
check_eq "a second snapshot of tiny" completed "$(snap_wait "$spare")"
rss0=$(rss_kb)

# storm FILE LINE: write LINE to FILE $N times, opening it each time, from one
# bash loop (echo is a builtin: no fork per write). Prints "accepted refused
# refused-with-EAGAIN".
storm() {
	timeout "$STORM_TIMEOUT" bash -c '
		ok=0 bad=0
		for ((i = 0; i < $3; i++)); do
			if echo "$2" 2>>"$4" >"$1"; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
		done
		echo "$ok $bad $(grep -c "$5" "$4")"' _ "$1" "$2" "$N" "$T/storm.err" "$EAGAIN_TEXT"
	rm -f "$T/storm.err"
}

# release KIND: let the held jobs fail at once, and wait until the queue is empty.
release() {
	touch "$FAIL"
	rm -f "$HOLD"
	poll_until 600 metric_is "snapfs_jobs{queue=\"$1\"}" 0 ||
		fail "the $1 queue empties once released" "$(metric "snapfs_jobs{queue=\"$1\"}") jobs left"
	rm -f "$FAIL"
}

# --- forks: N async writes to fork while restores are held ---
limit=$(metric 'snapfs_jobs_limit{queue="lifecycle"}')
check_match "metrics says the lifecycle queue's bound" '^[0-9]+$' "$limit"
sandboxes0=$(find "$MNT/sandboxes" -mindepth 1 -maxdepth 1 -type d | wc -l)
ok "mkdir sandboxes/idle (created, never started)" \
	bash -c 'mkdir "$1" && printf "busybox\n" >"$1/image"' _ "$MNT/sandboxes/idle"
touch "$HOLD"
read -r accepted refused eagain <<<"$(storm "$MNT/snapshots/$snap/fork" async)"
note "forks: $accepted accepted, $refused refused ($eagain with EAGAIN), bound ${limit:-?}"
check_eq "forks: as many accepted as the queue holds" "${limit:-none}" "$accepted"
check_eq "forks: every other one refused with EAGAIN" "$((N - ${limit:-0}))" "$eagain"
check_eq "forks: the queue is full" "${limit:-none}" "$(metric 'snapfs_jobs{queue="lifecycle"}')"
check_eq "forks: a refused fork leaves no sandbox behind" "$((sandboxes0 + 1 + ${limit:-0}))" \
	"$(find "$MNT/sandboxes" -mindepth 1 -maxdepth 1 -type d | wc -l)"
check_contains "forks: the last line in errors says the queue is full" "lifecycle queue is full" \
	"$(rd "$MNT/errors" | tail -n 1 | jq -r .error)"
check_eq "forks: the refusals are counted in metrics" "$((N - ${limit:-0}))" \
	"$(metric 'snapfs_jobs_refused_total{queue="lifecycle"}')"
check_eq "forks: status still reads" running "$(sb_status tiny)"
# The same queue: other requests are refused and their objects stay as they were.
queue_full_refusal EAGAIN "a full lifecycle queue: terminate" tiny sandboxes/tiny/terminate
queue_full_refusal EAGAIN "a full lifecycle queue: start" idle sandboxes/idle/start
n=$(find "$MNT/sandboxes" -mindepth 1 -maxdepth 1 -type d | wc -l)
queue_full_refusal EAGAIN "a full lifecycle queue: sandboxes/new" "" sandboxes/new \
	'{"image":"busybox"}'
check_eq "a refused sandboxes/new leaves no sandbox behind" "$n" \
	"$(find "$MNT/sandboxes" -mindepth 1 -maxdepth 1 -type d | wc -l)"
queue_full_refusal EAGAIN "a full lifecycle queue: delete" "" "snapshots/$spare/delete"
check_eq "the snapshot is still there" completed "$(snap_status "$spare")"
rss1=$(rss_kb)
note "daemon VmRSS: ${rss0} kB before, ${rss1} kB with the lifecycle queue full"
release lifecycle

# --- execs: N writes to exec while the commands are held ---
limit=$(metric 'snapfs_jobs_limit{queue="exec"}')
touch "$HOLD"
read -r accepted refused eagain <<<"$(storm "$MNT/sandboxes/tiny/exec" "echo bounds-hold")"
note "execs: $accepted accepted, $refused refused ($eagain with EAGAIN), bound ${limit:-?}"
check_eq "execs: as many accepted as the queue holds" "${limit:-none}" "$accepted"
check_eq "execs: every other one refused with EAGAIN" "$((N - ${limit:-0}))" "$eagain"
check_eq "execs: the queue is full" "${limit:-none}" "$(metric 'snapfs_jobs{queue="exec"}')"
check_contains "execs: sandboxes/tiny/error says why" "exec queue is full" \
	"$(rd "$MNT/sandboxes/tiny/error")"
check_eq "execs: status still reads" running "$(sb_status tiny)"
rss2=$(rss_kb)
note "daemon VmRSS: ${rss2} kB with the exec queue full"
release exec
ok "execs: once released, an exec runs" sb_run tiny true

# --- interrupted reads of a running exec leave nothing held ---
touch "$HOLD"
exec 3<>"$MNT/sandboxes/tiny/exec"
printf 'echo bounds-hold\n' >&3
for ((i = 0; i < 50; i++)); do
	timeout 0.1 cat <&3 >/dev/null 2>&1
done
ok "50 interrupted reads of a running exec: none is still held" \
	poll_until 30 metric_is snapfs_held_requests 0
check_eq "the exec still runs" 1 "$(metric 'snapfs_jobs{queue="exec"}')"
rm -f "$HOLD"
check_eq "a read after them gets the output" "$(printf 'bounds-hold\nexit 0')" \
	"$(timeout 60 cat <&3)"
exec 3>&-

# --- interrupted waits: tiny stays snapshotting while its checkpoint is held ---
touch "$HOLD"
held_snap=$(wr_read "$MNT/sandboxes/tiny/snapshot" async | head -n 1)
check_eq "tiny is snapshotting while its checkpoint is held" snapshotting "$(sb_status tiny)"
check_eq "no waiter yet" 0 "$(metric snapfs_waiters)"
timeout 120 cat "$MNT/sandboxes/tiny/wait" >/dev/null 2>&1 &
waiter=$!
BG_PIDS+=("$waiter")
ok "a blocked cat wait is one waiter" poll_until 30 metric_is snapfs_waiters 1
kill "$waiter"
wait "$waiter" 2>/dev/null
ok "killing it leaves no waiter" poll_until 30 metric_is snapfs_waiters 0
for ((i = 0; i < WAITS; i += 20)); do
	pids=()
	for ((j = 0; j < 20; j++)); do
		timeout 0.1 cat "$MNT/sandboxes/tiny/wait" >/dev/null 2>&1 &
		pids+=($!)
	done
	wait "${pids[@]}"
done
check_eq "after $WAITS interrupted waits tiny is still snapshotting" snapshotting \
	"$(sb_status tiny)"
ok "after $WAITS interrupted waits: no waiter left" poll_until 30 metric_is snapfs_waiters 0
ok "and no held request left" poll_until 30 metric_is snapfs_held_requests 0
rss3=$(rss_kb)
note "daemon VmRSS: ${rss3} kB after $WAITS interrupted waits"
rm -f "$HOLD"
check_eq "the held snapshot completes" completed "$(snap_wait "$held_snap")"
check_eq "tiny runs again" running "$(sb_wait tiny)"

for r in "$rss1" "$rss2" "$rss3"; do
	if [ "$((r - rss0))" -le "$RSS_GROWTH_MAX_KB" ]; then
		pass "daemon memory stays bounded: ${r} kB (${rss0} kB at the start)"
	else
		fail "daemon memory stays bounded: ${r} kB (${rss0} kB at the start)"
	fi
done

# --- nothing else broke ---
later=$(snapshot_of tiny)
check_eq "a later snapshot works" completed "$(snap_wait "$later")"
ok "metrics still reads" rd "$MNT/metrics"

# --- journals: rotated at the cap, and tail -f goes on across rotations ---
for j in events errors; do
	size=$(stat -c %s "$STATE/$j.jsonl")
	prev=$(stat -c %s "$STATE/$j.jsonl.1" 2>/dev/null || echo none)
	note "$j.jsonl: $size bytes, $j.jsonl.1: $prev bytes (cap $JOURNAL_MAX)"
	ok "$j.jsonl was rotated" test -f "$STATE/$j.jsonl.1"
	ok "$j.jsonl stays under the cap" test "$size" -le "$JOURNAL_MAX"
	ok "$j.jsonl.1 stays under the cap" test "${prev/none/0}" -le "$JOURNAL_MAX"
	check_eq "no third generation of $j.jsonl" "" "$(find "$STATE" -maxdepth 1 -name "$j.jsonl.[2-9]" -printf '%f\n')"
done
ok "mkdir sandboxes/after-rotations" mkdir "$MNT/sandboxes/after-rotations"
ok "events keeps being appended" poll_until 15 events_have '"after-rotations"'
ok "tail -f events, started before the rotations, sees a line written after them" \
	poll_until 30 grep -q '"after-rotations"' "$T/events.tail"
kill "${BG_PIDS[0]}" # the tail: an open file would keep the mount busy
wait "${BG_PIDS[0]}" 2>/dev/null
# Its whole lines: it may have been killed halfway through writing one.
head -n "$(wc -l <"$T/events.tail")" "$T/events.tail" >"$T/events.lines"
ok "what tail -f printed is JSON lines (blank where it fell behind)" jq -e . "$T/events.lines"
ok "events reads as JSON lines" jq -e . <(rd "$MNT/events")

stop_daemon

# --- snapfs.log, the background daemon's log, is capped the same way ---
log=$STATE/snapfs.log
ok "the daemon starts in the background" \
	"$SNAPFS_BIN" --state "$STATE" --images "$IMAGES" --journal-max "$JOURNAL_MAX" --debug "$MNT"
ok "its mount answers" poll_until 30 rd "$MNT/version"
for ((i = 0; i < 200; i++)); do
	mkdir "$MNT/sandboxes/Not-A-Name-$i" 2>/dev/null # each refusal is a line in the log
done
size=$(stat -c %s "$log" 2>/dev/null || echo none)
prev=$(stat -c %s "$log.1" 2>/dev/null || echo none)
note "snapfs.log: $size bytes, snapfs.log.1: $prev bytes (cap $JOURNAL_MAX)"
ok "snapfs.log was rotated" test -f "$log.1"
ok "snapfs.log stays under the cap" test "${size/none/0}" -le "$JOURNAL_MAX"
ok "snapfs.log.1 stays under the cap" test "${prev/none/0}" -le "$JOURNAL_MAX"
check_contains "the newest lines are in snapfs.log" "Not-A-Name-199" "$(cat "$log")"
unmount_mnt
ok "the background daemon exits once unmounted (it held the state's lock)" \
	poll_until 60 flock -n "$STATE/lock" true
finish
