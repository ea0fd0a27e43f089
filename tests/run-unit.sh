#!/usr/bin/env bash
# Run each unit-test binary given as an argument; sum their "N passed, N failed" lines.
set -u
passed=0 failed=0
for bin in "$@"; do
	out=$("$bin" 2>&1)
	rc=$?
	printf '%s\n' "$out" | grep -v -E '^[0-9]+ passed, [0-9]+ failed$' | sed "s|^|  $(basename "$bin"): |"
	line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
	if [ -z "$line" ]; then
		echo "unit $(basename "$bin"): no result line (exit $rc)"
		failed=$((failed + 1))
		continue
	fi
	p=${line%% passed*}
	f=${line#*, }; f=${f%% failed}
	[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
	echo "unit $(basename "$bin"): $p passed, $f failed"
	passed=$((passed + p)) failed=$((failed + f))
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
