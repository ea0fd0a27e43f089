#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Long work never holds up the tree: while a sandbox holding 1 GiB of memory is
# snapshotted, `cat status` of it and of another sandbox answers at once.
. "$(dirname "$0")/lib.sh"

BIG_MB=${BIG_MB:-1024}

# The spool holds the checkpoint (BIG_MB) and the store a copy: leave room to spare.
avail_mb=$(df --output=avail -BM "$T" | tail -n 1 | tr -dc 0-9)
if [ "$avail_mb" -lt $((3 * BIG_MB + 1024)) ]; then
	skip "only $avail_mb MiB free under $T; this test needs $((3 * BIG_MB + 1024))"
	finish
fi

start_daemon || bail "the daemon mounts"
make_sandbox small "$COUNTER_ENTRYPOINT" || bail "start sandbox small"
make_sandbox big "dd if=/dev/urandom of=/tmp/big bs=1M count=$BIG_MB iflag=fullblock 2>/dev/null; $COUNTER_ENTRYPOINT" ||
	bail "start sandbox big"
poll_until 900 sb_run big 'test -f /tmp/counter' || bail "sandbox big fills $BIG_MB MiB of /tmp"
check_eq "big holds $BIG_MB MiB in /tmp" "$((BIG_MB * 1024 * 1024))" "$(sb_run big 'stat -c %s /tmp/big')"

snap_t0=$(now_ms)
id=$(wr_read "$MNT/sandboxes/big/snapshot" async | head -n 1)
check_match "async snapshot of big: the id" '^snap-[0-9a-f]{16}$' "$id"
[ -n "$id" ] || bail "no snapshot id"

# Read the status files over and over until the snapshot settles; keep the slowest answer.
files=("sandboxes/big/status" "sandboxes/small/status" "snapshots/$id/status"
	"snapshots/$id/progress" "sandboxes/index")
max_ms=0 slowest="" reads=0 unanswered=0 seen_big="" seen_snap="" small_states="" bad_progress=""
deadline=$(($(date +%s) + OP_TIMEOUT))
while [ "$(date +%s)" -lt "$deadline" ]; do
	for f in "${files[@]}"; do
		t0=$(now_ms)
		if ! v=$(timeout 10 cat "$MNT/$f" 2>&1); then
			unanswered=$((unanswered + 1))
			v=""
		fi
		ms=$(($(now_ms) - t0))
		reads=$((reads + 1))
		if [ "$ms" -gt "$max_ms" ]; then
			max_ms=$ms slowest=$f
		fi
		case $f in
		sandboxes/big/status) [[ " $seen_big " == *" $v "* ]] || seen_big="$seen_big $v" ;;
		sandboxes/small/status) [[ " $small_states " == *" $v "* ]] || small_states="$small_states $v" ;;
		snapshots/*/status) [[ " $seen_snap " == *" $v "* ]] || seen_snap="$seen_snap $v" ;;
		snapshots/*/progress)
			[[ $v =~ ^([0-9]+)\ ([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ] ||
				bad_progress=$v
			;;
		esac
	done
	case $(snap_status "$id") in
	completed | failed) break ;;
	esac
	sleep 0.2
done
snap_ms=$(($(now_ms) - snap_t0))
note "big was:$seen_big; the snapshot was:$seen_snap; slowest of $reads reads: $slowest, $max_ms ms"
check_eq "every read was answered" 0 "$unanswered"
# Not a speed test: a read that waited on the job would take about as long as
# the snapshot itself. On two busy cores under ASan a read may take a second.
ok "no read waited for the snapshot (slowest: $slowest, $max_ms ms; the snapshot took $snap_ms ms)" \
	test "$((max_ms * 4))" -lt "$snap_ms"
check_eq "small stayed running" " running" "$small_states"
check_eq "progress always read DONE TOTAL with DONE <= TOTAL" "" "$bad_progress"
if [[ "$seen_big$seen_snap" =~ snapshotting|pending|in_progress ]]; then
	pass "the reads happened while the snapshot was in progress"
else
	skip "the snapshot ended before the first read; this run does not show the reads were concurrent"
fi

check_eq "the snapshot completes" completed "$(snap_wait "$id")"
size=$(jget "$MNT/snapshots/$id/info.json" .size_bytes)
ok "its size_bytes covers the $BIG_MB MiB ($size)" test "$size" -ge $((BIG_MB * 1024 * 1024))
check_eq "progress is complete" yes \
	"$(rd "$MNT/snapshots/$id/progress" | awk '{ print ($1 == $2 && NF == 2) ? "yes" : $0 }')"
check_eq "big runs on" running "$(sb_status big)"
ok "big still answers" sb_run big true

stop_daemon
finish
