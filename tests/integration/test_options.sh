#!/usr/bin/env bash
# test_options.sh [--list] - the daemon's options, one table in main.c
# (lib/cli.h), against the three documents that name them: README.md's and
# docs/design.md's "Command line" sections and snapfs(8)'s SYNOPSIS,
# DESCRIPTION and OPTIONS (docs/man/snapfs.8.scd). Each must name every
# option `snapfs --help` prints and no option it lacks. With --list, prints
# the table's options, one a line, and exits.
#
# Needs only build/asan/snapfs (SNAPFS_BIN): no mount, no root, no runsc,
# so it does not source lib.sh. Ends with "N passed, N failed" as every
# test does (tests/run.sh).
set -u

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SNAPFS_BIN=${SNAPFS_BIN:-$REPO/build/asan/snapfs}
. "$REPO/tests/integration/lib_results.sh"

# The table's options as --help lists them: "  -h, --help ...", "  --state DIR ...".
table_options() {
	"$SNAPFS_BIN" --help | awk '/^  -/ { print $1; if ($1 ~ /,$/) print $2 }' | tr -d , | sort -u
}

# Options named in text on stdin: a word that starts with - or --, not
# inside a word ("non-root"), not a family ("--default-*"); the options of
# other programs a section names ("fusermount3 -u", "tar -x") left out.
named_options() {
	sed -E 's/fusermount3 \*?-u/fusermount3/g; s/tar -x/tar/g' |
		grep -oP '(?<![[:alnum:]_-])--?[a-zA-Z][a-zA-Z0-9-]*(?![[:alnum:]_-])' |
		grep -v -- '-$' | sort -u
}

# A markdown file's section "## NAME", up to the next "## ".
md_section() {
	awk -v h="## $2" '$0 == h { p = 1; next } p && /^## / { exit } p' "$1"
}

# snapfs(8)'s SYNOPSIS, DESCRIPTION and OPTIONS.
man_options_part() {
	awk '/^# SYNOPSIS$/ { p = 1 } p && /^# / && !/^# (SYNOPSIS|DESCRIPTION|OPTIONS)$/ { exit } p' \
		"$REPO/docs/man/snapfs.8.scd"
}

# check_doc NAME TEXT: TEXT names the table's options, all and only those.
check_doc() {
	local name=$1 named missing extra
	named=$(named_options <<<"$2")
	missing=$(comm -23 <(printf '%s\n' "$TABLE") <(printf '%s\n' "$named") | tr '\n' ' ')
	extra=$(comm -13 <(printf '%s\n' "$TABLE") <(printf '%s\n' "$named") | tr '\n' ' ')
	if [ -z "$missing" ]; then
		pass "$name names every option of snapfs --help"
	else
		fail "$name names every option of snapfs --help" "missing: $missing"
	fi
	if [ -z "$extra" ]; then
		pass "$name names no option snapfs lacks"
	else
		fail "$name names no option snapfs lacks" "not in snapfs --help: $extra"
	fi
}

[ -x "$SNAPFS_BIN" ] || {
	fail "$SNAPFS_BIN is built (make build/asan/snapfs)"
	echo "$PASSED passed, $FAILED failed"
	exit 1
}
TABLE=$(table_options)
if [ "${1:-}" = --list ]; then
	printf '%s\n' "$TABLE"
	exit 0
fi
count=$(printf '%s\n' "$TABLE" | grep -c .)
if [ "$count" -ge 30 ]; then
	pass "snapfs --help lists the table's options ($count)"
else
	fail "snapfs --help lists the table's options (got $count)" "$TABLE"
fi

check_doc "README.md (Command line)" "$(md_section "$REPO/README.md" "Command line")"
check_doc "docs/design.md (Command line)" "$(md_section "$REPO/docs/design.md" "Command line")"
check_doc "snapfs(8) (docs/man/snapfs.8.scd)" "$(man_options_part)"

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
