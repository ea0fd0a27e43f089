#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Fan-out (issue 14): `count=N` on a snapshot's fork file makes N sandboxes
# from one write, each with the snapshot's state, their ids read back a line
# each; count=0 and count=101 are EINVAL; four `echo 1 > fork` at once on one
# fork file run at the same time in the daemon (the kernel does not hold one
# behind another); a count=3 write whose third restore fails leaves two
# running, fails, and says "1 of 3" in `errors`.
. "$(dirname "$0")/lib.sh"

# runsc, through a wrapper: while $T/gate exists a restore waits at its start
# (each waiting one adds a line to $T/restores-gated); the restore whose
# number is in $T/fail-restore fails, as a broken restore would.
real_runsc=$(command -v runsc) || bail "runsc is not installed"
cat >"$T/runsc" <<EOF
#!/bin/sh
case " \$* " in
*" restore "*)
	n=\$(flock "$T/restores.lock" sh -c 'n=\$((\$(cat "$T/restores" 2>/dev/null || echo 0) + 1)); echo \$n >"$T/restores"; echo \$n')
	if [ -e "$T/gate" ]; then
		echo "\$\$" >>"$T/restores-gated"
		while [ -e "$T/gate" ]; do sleep 0.1; done
	fi
	if [ "\$n" = "\$(cat "$T/fail-restore" 2>/dev/null)" ]; then
		echo "fanout test: restore number \$n fails on purpose" >&2
		exit 1
	fi
	;;
esac
exec "$real_runsc" "\$@"
EOF
chmod 0755 "$T/runsc"
DAEMON_ARGS+=(--runsc "$T/runsc")

start_daemon || bail "the daemon mounts"
snapshot_between src
FORK=$MNT/snapshots/$snap/fork

# check_forked ID LABEL: a running fork of $snap with its state.
check_forked() {
	check_eq "$2: running" running "$(sb_status "$1")"
	check_eq "$2: forked from the snapshot" "$snap" "$(jget "$MNT/sandboxes/$1/info.json" .parent_snapshot)"
	check_eq "$2: the file as it was at the snapshot" before "$(sb_run "$1" 'cat /root/state')"
	check_eq "$2: the counter's process from the snapshot (token)" "$tok" \
		"$(counter_token "$(counter "$1")")"
}

# --- count=4 ------------------------------------------------------------------
ids=$(wr_read "$FORK" count=4)
check_eq "count=4: four ids read back" 4 "$(printf '%s\n' "$ids" | grep -c '^sbx-[0-9a-f]\{16\}$')"
check_eq "count=4: four different ids" 4 "$(printf '%s\n' "$ids" | sort -u | wc -l)"
i=0
for id in $ids; do
	i=$((i + 1))
	check_forked "$id" "count=4, fork $i"
done
check_eq "a fresh read of fork lists the four" "$(printf '%s\n' "$ids" | sort)" "$(rd "$FORK" | sort)"
ids_async=$(wr_read "$FORK" 'count=2 async')
check_eq "count=2 async: two ids at once" 2 "$(printf '%s\n' "$ids_async" | grep -c '^sbx-')"
for id in $ids_async; do
	check_eq "count=2 async: $id settles running" running "$(sb_wait "$id")"
done
ids_mem=$(wr_read "$FORK" 'count=2 memory=3G')
for id in $ids_mem; do
	check_eq "count=2 memory=3G: $id gets the memory" $((3 << 30)) "$(rd "$MNT/sandboxes/$id/memory")"
done

expect_refusal EINVAL "count=0" "" wr "$FORK" count=0
expect_refusal EINVAL "count=101" "" wr "$FORK" count=101
expect_errno EINVAL "count=abc" wr "$FORK" count=abc
check_contains "errors says the range" "from 1 to 100" "$(rd "$MNT/errors" | tail -n 3)"
before=$(rd "$FORK" | wc -l)
check_eq "a refused count made no sandbox" "$before" "$(rd "$FORK" | wc -l)"

# --- four parallel writes on one fork file ----------------------------------
# Every restore waits at the gate, so each write stays in the daemon until it
# opens: four restores waiting at once can only be four writes the kernel let
# in together. Serialized, the second write would wait for the first to be
# answered, and only one restore would ever reach the gate.
gated() { [ "$(wc -l <"$T/restores-gated")" -ge "$1" ]; }

# parallel_forks LABEL CMD: four `bash -c CMD _ FORK GO` at once, each a fork
# write; GO is a file that exists once the test lets them write.
parallel_forks() {
	local label=$1 cmd=$2 known new order pids=() failed=0 pid id
	known=$(rd "$FORK" | sort)
	: >"$T/gate"
	: >"$T/restores-gated"
	rm -f "$T/go"
	for i in 1 2 3 4; do
		timeout -k 5 "$OP_TIMEOUT" bash -c "$cmd" _ "$FORK" "$T/go" &
		pids+=("$!")
	done
	BG_PIDS+=("${pids[@]}")
	sleep 1
	: >"$T/go"
	# Well within the restore's deadline (--runsc-timeout), which would kill the waiting ones.
	if poll_until 40 gated 4; then
		pass "$label: four restores were under way at once"
	else
		fail "$label: four restores were under way at once" \
			"only $(wc -l <"$T/restores-gated") reached runsc restore together"
	fi
	rm -f "$T/gate"
	for pid in "${pids[@]}"; do
		wait "$pid" || failed=$((failed + 1))
	done
	check_eq "$label: all four succeed" 0 "$failed"
	new=$(comm -13 <(printf '%s\n' "$known") <(rd "$FORK" | sort))
	check_eq "$label: four new forks" 4 "$(printf '%s\n' "$new" | grep -c '^sbx-')"
	for id in $new; do
		check_eq "$label: $id runs" running "$(sb_status "$id")"
	done
	# The events say the same, by their order: each fork began (its first
	# `starting`) before any of them ran (its `running`).
	order=$(rd "$MNT/events" | jq -r '[.id, .status] | @tsv' | awk -v ids="$(echo $new)" '
		BEGIN { n = split(ids, l, " "); for (i = 1; i <= n; i++) want[l[i]] = 1 }
		!($1 in want) { next }
		$2 == "starting" && !($1 in s) { s[$1] = NR; ns++; if (NR > last_s) last_s = NR }
		$2 == "running" && !($1 in r) { r[$1] = NR; nr++; if (!first_r || NR < first_r) first_r = NR }
		END { print (ns == 4 && nr == 4 && last_s < first_r) ? "yes" : "no: " ns " began, " nr " ran, last began at event " last_s ", first ran at " first_r }')
	check_eq "$label: the events show all four began before the first ran" yes "$order"
}

# `echo 1 > fork` four times: the shell's open truncates the file, which
# waits for writes in flight on it (docs/control-files.md), so the four open
# first, then write.
parallel_forks "four 'echo 1 > fork' at once" \
	'exec >"$1"; while [ ! -e "$2" ]; do sleep 0.05; done; echo 1'
# Opened without O_TRUNC (1<>), writers need no such care.
parallel_forks "four 'echo 1 1<> fork' at once" 'echo 1 1<>"$1"'

# --- count=3, the third restore fails ----------------------------------------
known=$(rd "$FORK" | sort)
n=$(cat "$T/restores")
echo $((n + 3)) >"$T/fail-restore"
out=$(timeout -k 5 "$OP_TIMEOUT" bash -c 'exec 3<>"$1"; printf "count=3\n" >&3; echo "rc=$?"; cat <&3' _ "$FORK" 2>&1)
check_contains "count=3, one restore failing: the write fails" "rc=1" "$out"
check_contains "count=3, one restore failing: with EIO" "$(errno_text EIO)" "$out"
got=$(printf '%s\n' "$out" | grep '^sbx-' | sort)
check_eq "count=3, one restore failing: the three ids are still read back" 3 "$(printf '%s\n' "$got" | grep -c '^sbx-')"
running=0 failed_ids=""
for id in $got; do
	case $(sb_status "$id") in
	running) running=$((running + 1)) ;;
	failed) failed_ids="$failed_ids $id" ;;
	esac
done
check_eq "count=3, one restore failing: two run" 2 "$running"
check_eq "count=3, one restore failing: one failed" 1 "$(echo $failed_ids | wc -w)"
errline=$(rd "$MNT/errors" | grep "snapshots/$snap/fork" | tail -n 1)
check_contains "errors: 1 of 3 forks failed" "1 of 3 forks of snapshot $snap failed" "$errline"
check_contains "errors: and why" "fails on purpose" "$errline"
check_eq "no fork beyond the three" 3 "$(comm -13 <(printf '%s\n' "$known") <(rd "$FORK" | sort) | wc -l)"
rm -f "$T/fail-restore"
check_eq "src runs on" running "$(sb_status src)"

stop_daemon
finish
