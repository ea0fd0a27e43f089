#!/usr/bin/env bash
# run.sh [NAME...] - run libFuzzer targets (build/fuzz/fuzz_NAME, from
# tests/fuzz/fuzz_NAME.c; all of them, or those named) from their seed corpora.
#
# Each runs FUZZ_SECONDS (default 60), FUZZ_JOBS (default 2) at a time, and
# counts as one pass or one failure: it passes if it ran its time and found no
# crash, leak, UB, broken promise (FUZZ_CHECK), timeout or out-of-memory.
# Ends with one line, "N passed, N failed"; exits non-zero if any failed.
#
# Seeds come from tests/fuzz/corpus/NAME/ (never written to). What a run adds
# goes to a temp dir, or with FUZZ_KEEP=1 to build/fuzz/corpus/NAME/, kept for
# the next run (make fuzz). A failing input lands in build/fuzz/artifacts/NAME/
# (replay it: build/fuzz/fuzz_NAME FILE); each log in build/fuzz/logs/NAME.log.
set -u

cd "$(dirname "$0")/../.." || exit

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_JOBS=${FUZZ_JOBS:-2}
FUZZ_KEEP=${FUZZ_KEEP:-0}
OUT=build/fuzz

# The longest input each target makes: past the bounds its parser enforces
# (a control line: 4096; a spec: 41474; the JSON collected from control lines:
# 65536; a ports record: 256), not so long that runs slow down.
max_len() {
	case $1 in
	control) echo 70000 ;;
	spec) echo 48000 ;;
	manifest) echo 32768 ;;
	snapmeta) echo 16384 ;;
	ports) echo 512 ;;
	*) echo 8192 ;;
	esac
}

if [ $# -gt 0 ]; then
	names=("$@")
else
	names=()
	for src in tests/fuzz/fuzz_*.c; do
		[ -e "$src" ] || continue
		n=$(basename "$src" .c)
		names+=("${n#fuzz_}")
	done
fi

mkdir -p "$OUT/logs"
work=$(mktemp -d "${TMPDIR:-/tmp}/snapfs-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

# run_one NAME: fuzz it; its verdict (one line, "ok ..." or "FAIL ...") into $work/NAME.result.
run_one() {
	local name=$1 bin=$OUT/fuzz_$1 seeds=tests/fuzz/corpus/$1 log=$OUT/logs/$1.log
	local corpus=$work/corpus-$1 art=$OUT/artifacts/$1 dict=tests/fuzz/$1.dict rc
	local opts=()
	if [ ! -x "$bin" ]; then
		echo "FAIL fuzz_$name: not built (make $bin)" >"$work/$name.result"
		return
	fi
	[ "$FUZZ_KEEP" = 1 ] && corpus=$OUT/corpus/$name
	mkdir -p "$corpus" "$art"
	[ -f "$dict" ] && opts+=("-dict=$dict")
	# An input running 25 s is a hang; past 2 GiB, a memory blow-up. The outer
	# timeout is only for a fuzzer that stops answering altogether.
	timeout -k 10 $((FUZZ_SECONDS + 300)) "$bin" -max_total_time="$FUZZ_SECONDS" \
		-timeout=25 -rss_limit_mb=2048 -max_len="$(max_len "$name")" -print_final_stats=1 \
		-artifact_prefix="$art/" "${opts[@]}" "$corpus" "$seeds" >"$log" 2>&1
	rc=$?
	local execs cov
	execs=$(awk '/^stat::number_of_executed_units:/ { print $2 }' "$log")
	cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -n 1)
	if [ "$rc" -eq 0 ] && [ -n "$execs" ]; then
		echo "ok   fuzz_$name: $FUZZ_SECONDS s, $execs runs, ${cov:-cov: ?}, $(find "$corpus" -type f | wc -l) inputs, nothing found" \
			>"$work/$name.result"
		return
	fi
	{
		echo "FAIL fuzz_$name: exit status $rc after ${execs:-?} runs; log $log"
		# The sanitizer's or FUZZ_CHECK's report up to its summary, and where the input went.
		awk '/^==[0-9]+==.*ERROR|broken promise|runtime error/ { on = 1 }
			on && n++ < 40 { print } /^SUMMARY/ { on = 0 }' "$log" |
			grep -v -E 'in fuzzer::|__sanitizer_print_stack_trace|libc\.so|libc_start|in _start|raise\.c|abort\.c|pthread_kill' |
			sed 's/^/       /'
		grep -E -m 1 'Test unit written to' "$log" | sed 's/^/       /'
	} >"$work/$name.result"
}

running=0
for name in "${names[@]}"; do
	if [ "$running" -ge "$FUZZ_JOBS" ]; then
		wait -n
		running=$((running - 1))
	fi
	echo "fuzz_$name: $FUZZ_SECONDS s"
	run_one "$name" &
	running=$((running + 1))
done
wait

passed=0 failed=0
for name in "${names[@]}"; do
	if [ -f "$work/$name.result" ]; then
		cat "$work/$name.result"
		if [[ $(head -n 1 "$work/$name.result") == "ok "* ]]; then
			passed=$((passed + 1))
			continue
		fi
	else
		echo "FAIL fuzz_$name: no verdict"
	fi
	failed=$((failed + 1))
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
