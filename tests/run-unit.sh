#!/usr/bin/env bash
# Run each unit-test binary given as an argument; sum their "N passed, N
# failed" lines and the "N skipped" lines before them (tests/unit/t.h). Ends
# with "N skipped" when any were, then "N passed, N failed".
set -u
RESULT_RE='^[0-9]+ passed, [0-9]+ failed$'
SKIPPED_RE='^[0-9]+ skipped$'
passed=0 failed=0 skipped=0
for bin in "$@"; do
	out=$("$bin" 2>&1)
	rc=$?
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
