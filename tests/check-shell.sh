#!/usr/bin/env bash
# check-shell.sh - shellcheck (warnings and errors) over every shell script
# the project ships or runs: scripts/, examples/, bench/, the tests and CI.
# A script the suite never runs (an example that needs the network, a
# benchmark) is still checked here. Ends with "N passed, N failed", one per
# script. Needs shellcheck (scripts/setup.sh --test installs it).
set -u
cd "$(dirname "$0")/.." || exit
if ! command -v shellcheck >/dev/null; then
	echo "check-shell: shellcheck is not installed (scripts/setup.sh --test)"
	echo "0 passed, 1 failed"
	exit 1
fi
passed=0 failed=0
# Every file under the folders named, found by its #! line or its .sh name.
while IFS= read -r -d '' f; do
	case $f in
	*.sh) ;;
	*) head -c 64 "$f" | grep -qE '^#!.*\b(ba|da)?sh\b' || continue ;;
	esac
	if out=$(shellcheck -x -S warning "$f" 2>&1); then
		passed=$((passed + 1))
	else
		printf '%s\n' "$out"
		echo "check-shell: $f has warnings"
		failed=$((failed + 1))
	fi
done < <(find scripts examples bench tests .ci debian -type f \
	\( -name '*.sh' -o -perm -u+x \) ! -path '*/node_modules/*' -print0 | sort -z)
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
