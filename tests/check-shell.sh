#!/usr/bin/env bash
# check-shell.sh - shellcheck of the scripts the suite checks without running
# them: every shell script under examples/ (walkthrough.sh, the systemd
# helper, python-app's, which need minutes and Debian's mirror to run) and
# the benchmarks that drive an example (bench/python-app.sh). One check per
# script, then "N passed, N failed" (tests/run.sh sums it). Run from
# anywhere; reads only the tracked files. Needs shellcheck (scripts/setup.sh
# --test).
set -u
cd "$(dirname "$0")/.." || exit

if ! command -v shellcheck >/dev/null; then
	echo "not ok shellcheck is missing (scripts/setup.sh --test installs it)"
	echo "0 passed, 1 failed"
	exit 1
fi
passed=0 failed=0
while IFS= read -r f; do
	# A shell script: by its name, or by its first line (lib.sh's say so with a directive).
	case $f in
	*.sh) ;;
	*) head -n 1 "$f" | grep -qE '^#!.*\b(ba|da)?sh\b' || continue ;;
	esac
	if out=$(shellcheck -x "$f" 2>&1); then
		echo "ok   shellcheck $f"
		passed=$((passed + 1))
	else
		echo "not ok shellcheck $f:"
		printf '%s\n' "$out"
		failed=$((failed + 1))
	fi
done < <(git ls-files -- examples bench/python-app.sh)
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
