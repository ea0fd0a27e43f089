#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Reading a directory of the tree whole (`cat *`, `grep -r`, `tar`, `find
# -exec cat`) as root opens its action files too (start, terminate, suspend,
# resume, a snapshot's delete). They read empty (issue 24: they were
# write-only, and root's open of one was refused by its mode, EACCES); and a
# refused open (a write to a read-only file) is no request: it leaves the
# sandbox's `error` (and info.json's `message`) as they were and adds no line
# to `errors` (docs/control-files.md, "Errors"). Before issue 21 each refusal
# replaced `error` with "<path> is write-only" and added a line to `errors`
# (issue 21, item 12).
#
# The `wait` files are in no listing (a read of one is held until its
# object's state changes), so no crawl needs to leave them out by hand
# (issue 24, item 3; test_crawl_tools.sh crawls the mount mid-suspend).
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"
start_counter_sandbox a || bail "start sandbox a"
A=$MNT/sandboxes/a
S=$(snapshot_of a)
check_match "a snapshot of a" '^snap-[0-9a-f]{16}$' "$S"
check_eq "it completes" completed "$(snap_wait "$S")"
# A refused request: the sandbox's error now says why.
expect_refusal EBUSY "start of a running sandbox (the error to keep)" a wr "$A/start"

# what_is_recorded: the sandbox's error, its info.json message, and the errors journal.
what_is_recorded() {
	rd "$A/error"
	echo "--- message"
	jget "$A/info.json" '.message // empty'
	echo "--- errors"
	rd "$MNT/errors"
}
before=$(what_is_recorded)
error_before=$(rd "$A/error")
check_match "a's error has a sentence" '[[:alpha:]]' "$error_before"

# The action files read empty (0600 since issue 24; they were write-only, and
# root's read of one was refused): a read of one starts nothing.
for f in start suspend resume terminate; do
	check_eq "cat sandboxes/a/$f reads empty" "" "$(rd "$A/$f")"
	check_eq "sandboxes/a/$f is 0600" 600 "$(stat -c %a "$A/$f")"
done
check_eq "cat snapshots/S/delete reads empty" "" "$(rd "$MNT/snapshots/$S/delete")"
check_eq "the snapshot is still there" completed "$(snap_status "$S")"
check_eq "a still runs" running "$(sb_status a)"
# A write the mode refuses, and a truncate: refused, and no request either.
expect_errno EACCES "a write to the read-only status" wr "$A/status" running
expect_errno EACCES "truncate -s 0 of the read-only status" truncate -s 0 "$A/status"
expect_errno EACCES "a write to the read-only info.json" wr "$A/info.json" '{}'

# The crawls. Their own refusals go to /dev/null; their exit status is not the point.
crawl() { timeout -k 5 120 bash -c "$1" crawl "$A" "$MNT/snapshots/$S" >/dev/null 2>&1; }
crawl 'cat "$1"/*; cat "$2"/*'
pass "cat sandboxes/a/* and snapshots/S/* ran"
crawl 'grep -r . "$1" "$2"'
pass "grep -r of both directories ran"
crawl 'tar -cf - "$1" "$2" | wc -c'
pass "tar -cf - of both directories ran"
crawl 'find "$1" "$2" -type f -exec cat {} +'
pass "find -exec cat of both directories ran"
crawl 'head -c 64 "$1"/* "$2"/*'
pass "head of both directories ran"
crawl 'ls -laR "$1" "$2"; stat "$1"/* "$2"/*'
pass "ls -laR and stat ran"

check_eq "a's error is byte for byte what it was" "$error_before" "$(rd "$A/error")"
after=$(what_is_recorded)
if [ "$before" = "$after" ]; then
	pass "error, info.json's message and errors are unchanged by the crawls"
else
	fail "error, info.json's message and errors are unchanged by the crawls" \
		"$(diff <(printf '%s\n' "$before") <(printf '%s\n' "$after") | head -n 20)"
fi
check_eq "a runs on" running "$(sb_status a)"
check_eq "the snapshot is still completed" completed "$(snap_status "$S")"

# A request after all that is recorded as before.
expect_refusal EBUSY "start of a running sandbox, again: still recorded" a wr "$A/start"

stop_daemon
finish
