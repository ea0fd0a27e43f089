#!/usr/bin/env bash
# run.sh [tests/integration/test_X.sh | tests/fuzz/fuzz_X.c ...] - the whole test
# suite (what `make test` runs).
#
# Runs the unit tests (build/asan/tests/unit/test_*, through tests/run-unit.sh,
# nproc binaries at a time), then each integration test as its own bash
# process on a real FUSE mount with real runsc sandboxes, then each libFuzzer
# target (build/fuzz/fuzz_*, through tests/fuzz/run.sh) for FUZZ_SECONDS
# (default 30: the suite's smoke run, every seed and regress-* input replayed,
# then some fuzzing; `make fuzz` is the long run) from its seed corpus, two at
# a time: after the integration tests, not beside them, as they take both
# cores. With no arguments, every integration test and every fuzz target; with
# some, only those named (a fuzz target by its source). Ends with one line,
# "N passed, N failed", the sum of every unit and integration check and one
# per fuzz target, after a line "N skipped" when checks were skipped (each
# test's own "N skipped" line, summed); exits non-zero if anything failed.
#
# Needs root (FUSE, runsc) and what `scripts/setup.sh --test` installs.
# TEST_TIMEOUT (seconds, default 1800) bounds each integration test. A
# failing test's daemon log is kept in build/test-logs/, a fuzz target's log
# and failing input in build/fuzz/logs/ and build/fuzz/artifacts/.
set -u

cd "$(dirname "$0")/.." || exit

TEST_TIMEOUT=${TEST_TIMEOUT:-1800}
RESULT_RE='^[0-9]+ passed, [0-9]+ failed$'
SKIPPED_RE='^[0-9]+ skipped$'
passed=0
failed=0
skipped=0

# add LABEL RC OUTPUT: add the last result line of OUTPUT and its last
# "N skipped" line; a missing result line, or a non-zero exit with no
# failure counted, is one failure.
add() {
	local label=$1 rc=$2 line p f s
	s=$(printf '%s\n' "$3" | grep -E "$SKIPPED_RE" | tail -n 1)
	s=${s%% skipped}
	skipped=$((skipped + ${s:-0}))
	line=$(printf '%s\n' "$3" | grep -E "$RESULT_RE" | tail -n 1)
	if [ -z "$line" ]; then
		echo "$label: no result line (exit status $rc)"
		failed=$((failed + 1))
		return
	fi
	p=${line%% passed*}
	f=${line#*, }
	f=${f%% failed}
	[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
	passed=$((passed + p))
	failed=$((failed + f))
}

if [ "$(id -u)" -ne 0 ]; then
	echo "tests/run.sh: the integration tests mount FUSE and run runsc: run as root" >&2
fi

# --- static checks: the layers and the call circles (docs/architecture.md) ---
echo "=== layers and circles"
out=$(tests/check-layers.sh 2>&1)
rc=$?
printf '%s\n' "$out" | grep -vE "$RESULT_RE"
add "layers" "$rc" "$out"
out=$(python3 tests/check-circles.py 2>&1)
rc=$?
printf '%s\n' "$out" | grep -vE "$RESULT_RE"
add "circles" "$rc" "$out"
# The examples' scripts, which the suite does not run (tests/check-shell.sh).
echo "=== shellcheck"
out=$(tests/check-shell.sh 2>&1)
rc=$?
printf '%s\n' "$out" | grep -vE "$RESULT_RE"
add "shellcheck" "$rc" "$out"

# --- unit tests: one binary per tests/unit/test_*.c ---
unit_bins=()
for src in tests/unit/test_*.c; do
	[ -e "$src" ] || continue
	unit_bins+=("build/asan/tests/unit/$(basename "$src" .c)")
done
if [ "${#unit_bins[@]}" -gt 0 ]; then
	echo "=== unit tests"
	missing=0
	present=()
	for bin in "${unit_bins[@]}"; do
		if [ -x "$bin" ]; then
			present+=("$bin")
		else
			echo "unit $(basename "$bin"): not built (make $bin)"
			missing=$((missing + 1))
		fi
	done
	failed=$((failed + missing))
	if [ "${#present[@]}" -gt 0 ]; then
		out=$(tests/run-unit.sh "${present[@]}" 2>&1)
		rc=$?
		printf '%s\n' "$out" | grep -vE "$RESULT_RE|$SKIPPED_RE"
		add "unit tests" "$rc" "$out"
	fi
fi

# --- the format: one pass or failure (make format-check, clang-format --dry-run) ---
echo "=== format"
if make --no-print-directory -s format-check; then add format 0 "1 passed, 0 failed"; else add format 1 "0 passed, 1 failed"; fi

tests=()
fuzz=()
if [ $# -gt 0 ]; then
	for arg in "$@"; do
		case $arg in
		tests/fuzz/fuzz_*.c)
			name=$(basename "$arg" .c)
			fuzz+=("${name#fuzz_}")
			;;
		*) tests+=("$arg") ;;
		esac
	done
else
	tests=(tests/integration/test_*.sh)
	for src in tests/fuzz/fuzz_*.c; do
		[ -e "$src" ] || continue
		name=$(basename "$src" .c)
		fuzz+=("${name#fuzz_}")
	done
fi

# --- integration tests ---
SNAPFS_TEST_CACHE=$(mktemp -d "${TMPDIR:-/tmp}/snapfs-test-cache.XXXXXX")
SNAPFS_TEST_LOGS=$PWD/build/test-logs
export SNAPFS_TEST_CACHE SNAPFS_TEST_LOGS
trap 'rm -rf "$SNAPFS_TEST_CACHE"' EXIT
rm -rf "$SNAPFS_TEST_LOGS"
# Every test runs the daemon as it was when the run began, even if the tree is rebuilt meanwhile.
if [ -z "${SNAPFS_BIN:-}" ] && [ -x build/asan/snapfs ]; then
	cp build/asan/snapfs "$SNAPFS_TEST_CACHE/snapfs"
	# Beside it, where the daemon looks for its agent (ops/ops_agent.c).
	[ -x build/snapfs-agent ] && cp build/snapfs-agent "$SNAPFS_TEST_CACHE/snapfs-agent"
	export SNAPFS_BIN=$SNAPFS_TEST_CACHE/snapfs
fi
if [ "${#tests[@]}" -gt 0 ] && ! scripts/make-image.sh "$SNAPFS_TEST_CACHE/busybox" >/dev/null; then
	echo "scripts/make-image.sh failed: the integration tests need the busybox image" >&2
fi

for t in "${tests[@]}"; do
	[ -f "$t" ] || continue
	name=$(basename "$t" .sh)
	echo "=== $name"
	start=$(date +%s)
	log=$(mktemp)
	timeout -k 400 "$TEST_TIMEOUT" bash "$t" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	[ "$rc" -eq 124 ] && echo "$name: killed after $TEST_TIMEOUT s"
	add "$name" "$rc" "$(cat "$log")"
	rm -f "$log"
	echo "=== $name: exit status $rc, $(($(date +%s) - start)) s"
done

# --- fuzz targets: one pass or failure each ---
if [ "${#fuzz[@]}" -gt 0 ]; then
	echo "=== fuzz"
	start=$(date +%s)
	log=$(mktemp)
	FUZZ_SECONDS=${FUZZ_SECONDS:-30} tests/fuzz/run.sh "${fuzz[@]}" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	add fuzz "$rc" "$(cat "$log")"
	rm -f "$log"
	echo "=== fuzz: exit status $rc, $(($(date +%s) - start)) s"
fi

[ "$skipped" -gt 0 ] && echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
