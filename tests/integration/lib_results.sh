# lib_results.sh - the counters and the result lines every test prints
# ("ok", "FAIL", "SKIP"), which tests/run.sh sums. Sourced by lib.sh and by
# the tests that need no mount (test_options.sh). Sets nothing at source time
# but the counters it keeps, when they are unset.
# shellcheck shell=bash
PASSED=${PASSED:-0}
FAILED=${FAILED:-0}
SKIPPED=${SKIPPED:-0}

pass() {
	PASSED=$((PASSED + 1))
	printf 'ok   %s\n' "$1"
}

# fail DESC [DETAIL...]: count a failure; each detail line is printed indented.
fail() {
	FAILED=$((FAILED + 1))
	printf 'FAIL %s\n' "$1"
	shift
	[ $# -gt 0 ] && printf '%s\n' "$@" | sed 's/^/       /'
	return 0
}

# skip DESC: a check this run cannot make meaningful (the race it needs went
# the other way, the host lacks a feature): counted and said, never a pass.
skip() {
	SKIPPED=$((SKIPPED + 1))
	printf 'SKIP %s\n' "$*"
}
note() { printf '     %s\n' "$*"; }
