#!/usr/bin/env bash
# Run each unit-test binary given as an argument; sum their "N passed, N
# failed" lines and the "N skipped" lines before them (tests/unit/t.h). Ends
# with "N skipped" when any were, then "N passed, N failed".
#
# UNIT_JOBS (default: nproc) binaries run at once, each with its output in a
# file of its own; the outputs are printed in the order given, as a serial
# run prints them. Running them side by side is safe: each test works in its
# own mkdtemp() dir, binds port 0 or a socket in that dir, and does what
# touches the host (net namespaces, /run) in namespaces of its own.
set -u
RESULT_RE='^[0-9]+ passed, [0-9]+ failed$'
SKIPPED_RE='^[0-9]+ skipped$'
UNIT_JOBS=${UNIT_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$UNIT_JOBS" -ge 1 ] 2>/dev/null || UNIT_JOBS=1
work=$(mktemp -d "${TMPDIR:-/tmp}/snapfs-unit.XXXXXX") || exit
trap 'rm -rf "$work"' EXIT

# run_one I BIN: BIN's output into $work/I.out, its exit status into $work/I.rc.
run_one() {
	"$2" >"$work/$1.out" 2>&1
	echo $? >"$work/$1.rc"
}

running=0 i=0
for bin in "$@"; do
	if [ "$running" -ge "$UNIT_JOBS" ]; then
		wait -n
		running=$((running - 1))
	fi
	run_one "$i" "$bin" &
	running=$((running + 1)) i=$((i + 1))
done
wait

passed=0 failed=0 skipped=0 i=0
for bin in "$@"; do
	out=$(cat "$work/$i.out" 2>/dev/null)
	rc=$(cat "$work/$i.rc" 2>/dev/null || echo 127)
	i=$((i + 1))
	printf '%s\n' "$out" | grep -v -E "$RESULT_RE|$SKIPPED_RE" | sed "s|^|  $(basename "$bin"): |"
	line=$(printf '%s\n' "$out" | grep -E "$RESULT_RE" | tail -n 1)
	s=$(printf '%s\n' "$out" | grep -E "$SKIPPED_RE" | tail -n 1)
	s=${s%% skipped}
	if [ -z "$line" ]; then
		echo "unit $(basename "$bin"): no result line (exit $rc)"
		failed=$((failed + 1))
		continue
	fi
	p=${line%% passed*}
	f=${line#*, }; f=${f%% failed}
	[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
	echo "unit $(basename "$bin"): $p passed, $f failed${s:+, $s skipped}"
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + ${s:-0}))
done
[ "$skipped" -gt 0 ] && echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
