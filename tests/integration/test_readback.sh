#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Settings read back as written (issue 24, item 2; docs/control-files.md,
# "Reading back"): for every writable setting file of a sandbox, in each
# state that takes a write, write a value, read it back, write what was
# read again, read again: the same text, and info.json unchanged by the
# second write but for timeout.seconds_left, the one field that must move
# (a countdown). So a tool that writes a file only when its content
# differs (Ansible, `sed -i`, make) sees no change, and one that writes
# anyway (Ansible's unsafe_writes) changes nothing, the timeout's deadline
# included.
#
# Not here: the files that act rather than set (start, suspend, resume,
# terminate, snapshot, exec; a snapshot's fork and delete; sandboxes/new):
# a write of theirs is an action, and their reads give ids or output, not
# a setting. The root of the tree has no writable setting.
#
# The daemon runs in a network namespace of the test's own (unshare -n), as
# test_ports.sh's does, so the published ports listen on no host address.
. "$(dirname "$0")/lib_netns.sh"
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"

# info_of SB: its info.json without the fields that must move on their own.
info_of() { jq -cS 'del(.timeout.seconds_left?)' <"$MNT/sandboxes/$1/info.json"; }

# same_info DESC BEFORE AFTER: the two info.json texts are the same; else the lines that differ.
same_info() {
	if [ "$2" = "$3" ]; then
		pass "$1"
	else
		fail "$1" "$(diff <(jq -S . <<<"$2") <(jq -S . <<<"$3") | grep '^[<>]')"
	fi
}

# readback SB FILE VALUE: write VALUE to FILE of SB, read it back, write
# what was read (as is, in one write), read again; the two reads are the
# same and info.json did not change with the second write. A pause of a
# little over a second between the first read and the second write lets a
# countdown or a re-armed deadline show.
readback() {
	local sb=$1 file=$2 value=$3 f=$MNT/sandboxes/$1/$2 first second info0
	ok "$sb ($(sb_status "$sb")): write '$value' to $file" wr "$f" "$value"
	first=$(rd "$f")
	info0=$(info_of "$sb")
	sleep 1.2
	ok "$sb: write $file's read-back '${first//$'\n'/\\n}' again" wr "$f" "$first"
	second=$(rd "$f")
	check_eq "$sb: $file reads back the same after the second write" "$first" "$second"
	same_info "$sb: the second write of $file left info.json as it was" "$info0" "$(info_of "$sb")"
}

# --- created: every setting ------------------------------------------------------
mkdir "$MNT/sandboxes/rb" || bail "mkdir sandboxes/rb"
readback rb image busybox
readback rb entrypoint 'echo hi; sleep 100000'
readback rb env $'A=1\nB=two words'
readback rb gpu 0
readback rb memory 512M
check_eq "memory reads back in bytes" 536870912 "$(rd "$MNT/sandboxes/rb/memory")"
readback rb cpus 0.5
readback rb pids 64
readback rb network egress
readback rb network none
readback rb timeout 300
check_eq "timeout reads back SECONDS ACTION as set" "300 terminate" "$(rd "$MNT/sandboxes/rb/timeout")"
readback rb timeout "600 suspend"
readback rb timeout 0
check_eq "no timeout reads back 0" 0 "$(rd "$MNT/sandboxes/rb/timeout")"
readback rb autosnapshot "every=3600 keep=2"
readback rb autosnapshot 0
readback rb ports 8080
check_match "ports reads back PORT ADDRESS:HOSTPORT" '^8080 127\.0\.0\.1:[0-9]+$' \
	"$(rd "$MNT/sandboxes/rb/ports")"
readback rb ports 8081
readback rb egress $'deny 10.1.0.0/16\nallow 0.0.0.0/0'
check_eq "egress reads back its lines" $'deny 10.1.0.0/16\nallow 0.0.0.0/0' \
	"$(rd "$MNT/sandboxes/rb/egress")"
ok "rmdir the created sandbox" rmdir "$MNT/sandboxes/rb"

# --- running: what a running sandbox takes ----------------------------------------
make_sandbox run 'sleep 100000' || bail "start sandbox run"
readback run timeout 300
check_eq "a running sandbox's timeout reads back as set, not a countdown" "300 terminate" \
	"$(rd "$MNT/sandboxes/run/timeout")"
left=$(jget "$MNT/sandboxes/run/info.json" .timeout.seconds_left)
check_match "the seconds left are in info.json" '^[0-9]+$' "$left"
ok "and count down (${left} s left)" test "$left" -lt 300
deadline=$(jget "$MNT/sandboxes/run/info.json" .timeout.deadline)
ok "a different timeout is taken" wr "$MNT/sandboxes/run/timeout" "301 terminate"
check_eq "it reads back as set" "301 terminate" "$(rd "$MNT/sandboxes/run/timeout")"
ok "and re-arms the deadline" test "$deadline" != "$(jget "$MNT/sandboxes/run/info.json" .timeout.deadline)"
readback run timeout "301 suspend"
readback run timeout 0
readback run autosnapshot "every=3600 keep=3"
readback run autosnapshot 0
readback run ports 9090
readback run egress 'deny 10.2.0.0/16'
readback run egress ''

# --- suspended: the lifetime, ports and egress stay settable -------------------------
ok "timeout 300 on run before the suspend" wr "$MNT/sandboxes/run/timeout" 300
ok "suspend run" wr "$MNT/sandboxes/run/suspend"
check_eq "run is suspended" suspended "$(sb_status run)"
readback run timeout "300 terminate"
readback run autosnapshot "every=7200"
readback run ports 9091
readback run egress 'allow 0.0.0.0/0'
ok "terminate run" wr "$MNT/sandboxes/run/terminate"

stop_daemon
finish
