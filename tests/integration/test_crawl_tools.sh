#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# The tools that walk a tree (grep -r, find -exec cat, tar, cp -r, rsync -a,
# du -a, ls -lR), run over the whole mount while a sandbox is mid-suspend or
# mid-resume, return at once, change no sandbox's state and write nothing
# to `errors` or any `error` (issue 24, item 3; docs/control-files.md,
# "Tools that work on the mount"). `wait` is unlisted (a lookup by name
# still finds it and blocks) and `root` is a link to the unlisted `.root`,
# which crawlers do not follow. Before the fix each crawl read the `wait` of
# the sandbox in transition and was held to the transition's end.
#
# Then (item 4) `tar -cf` and `rsync -a` of a sandbox's and a snapshot's
# directory exit 0, and each file archived is what `cat` gives.
. "$(dirname "$0")/lib.sh"

CRAWL_LIMIT_MS=3000 # the aim is 2 s; room for a loaded 2-core host

start_daemon || bail "the daemon mounts"
make_sandbox calm 'sleep 100000' || bail "start sandbox calm"
# Some memory of its own, so that each checkpoint and restore takes seconds.
# (1 MB of gVisor's slow urandom, copied 600 times: pages that compress not at all.)
make_sandbox big 'head -c 1000000 /dev/urandom >/tmp/r; i=0; while [ $i -lt 600 ]; do cat /tmp/r; i=$((i + 1)); done >/tmp/fill; echo full >/tmp/ready; sleep 100000' ||
	bail "start sandbox big"
ok "big has filled its memory" poll_until 120 bash -c '[ "$(cat "$1" 2>/dev/null)" = full ]' _ \
	"$MNT/sandboxes/big/.root/tmp/ready"
S=$(snapshot_of calm)
check_eq "a snapshot of calm completes" completed "$(snap_wait "$S")"

# --- the shape: wait and .root unlisted, root a link -------------------------
D=$MNT/sandboxes/calm
check_lacks "ls sandboxes/calm leaves wait out" wait "$(ls -a "$D")"
check_lacks "ls sandboxes/calm leaves .root out" .root "$(ls -a "$D")"
check_lacks "ls snapshots/S leaves wait out" wait "$(ls -a "$MNT/snapshots/$S")"
check_eq "sandboxes/calm/wait is found by name" running "$(sb_wait calm)"
check_eq "snapshots/S/wait is found by name" completed "$(snap_wait "$S")"
check_eq "root is a symlink to .root" .root "$(readlink "$D/root")"
check_eq "root/ leads into the sandbox" full "$(rd "$MNT/sandboxes/big/root/tmp/ready")"
check_eq "stat shows root as a link" "symbolic link" "$(stat -c %F "$D/root")"

# --- the crawls --------------------------------------------------------------
# What the crawls must leave as it was: errors, and the error of every
# sandbox and snapshot there is now (each suspend below adds a snapshot).
error_files=("$MNT"/sandboxes/*/error "$MNT"/snapshots/*/error)
recorded() {
	local f
	rd "$MNT/errors"
	for f in "${error_files[@]}"; do
		printf '%s: %s\n' "$f" "$(rd "$f")"
	done
}
before=$(recorded)
calm_before=$(rd "$D/info.json" | jq -c 'del(.timeout.seconds_left)')

suspending() { [ "$(sb_status big)" = suspending ]; }
# suspend_big: suspend big, and return once it is on its way (a resume takes
# under a second here, a suspend of its memory several).
suspend_big() {
	wr "$MNT/sandboxes/big/suspend" async && poll_until 30 suspending
}

# crawl NAME CMD: run CMD (words of bash, the mount is $1, a scratch dir $2)
# while big is being suspended; it must finish within CRAWL_LIMIT_MS.
crawl() {
	local name=$1 cmd=$2 start ms
	rm -rf "$T/out" && mkdir -p "$T/out"
	if ! suspend_big; then
		fail "$name: big is suspending when the crawl starts" "status $(sb_status big)"
		return
	fi
	start=$(now_ms)
	timeout -k 5 60 bash -c "$cmd" crawl "$MNT" "$T/out" >/dev/null 2>&1
	ms=$(($(now_ms) - start))
	note "$name over the mount while big suspends: ${ms} ms"
	ok "$name finishes within $CRAWL_LIMIT_MS ms while big suspends (took $ms ms)" \
		[ "$ms" -lt "$CRAWL_LIMIT_MS" ]
	check_eq "$name: big is suspended" suspended "$(sb_wait big)"
	ok "$name: big resumes" wr "$MNT/sandboxes/big/resume"
}
crawl "grep -r" 'grep -r . "$1"'
crawl "find -exec cat" 'find "$1" -type f -exec cat {} +'
crawl "tar -cf" 'tar -cf "$2/all.tar" -C "$1" .'
crawl "cp -r" 'cp -r "$1" "$2/copy"'
crawl "rsync -a" 'rsync -a "$1/" "$2/copy/"'
crawl "du -a" 'du -a "$1"'
crawl "ls -lR" 'ls -lR "$1"'

after=$(recorded)
if [ "$before" = "$after" ]; then
	pass "errors and every error are unchanged by the crawls"
else
	fail "errors and every error are unchanged by the crawls" \
		"$(diff <(printf '%s\n' "$before") <(printf '%s\n' "$after") | head -n 20)"
fi
check_eq "calm runs on" running "$(sb_status calm)"
check_eq "calm's info.json is as it was" "$calm_before" \
	"$(rd "$D/info.json" | jq -c 'del(.timeout.seconds_left)')"
check_eq "the snapshot is still completed" completed "$(snap_status "$S")"
check_eq "the crawls made no sandbox" "big calm" "$(rd "$MNT/sandboxes/index" | awk '{ print $1 }' | sort | xargs)"

# --- item 4: tar and rsync of a directory archive what cat shows -------------
# archive_matches LABEL DIR: tar -cf of DIR exits 0, and each file in it,
# extracted, is what cat of the file gives; ps and usage are archived empty,
# as /proc's files are (size 0: a read asks the agent or runsc).
archive_matches() {
	local label=$1 dir=$2 x=$T/x-$1 f name differ="" rc=0
	rm -rf "$x" && mkdir -p "$x"
	tar -cf "$x.tar" -C "$(dirname "$dir")" "$(basename "$dir")" 2>"$x.err" || rc=$?
	check_eq "tar -cf of $label exits 0" 0 "$rc"
	check_eq "tar -cf of $label complains of nothing" "" "$(cat "$x.err")"
	tar -xf "$x.tar" -C "$x"
	for f in "$x/$(basename "$dir")"/*; do
		[ -f "$f" ] && [ ! -L "$f" ] || continue
		name=$(basename "$f")
		case $name in
		ps | usage) [ -s "$f" ] && differ="$differ $name(not empty)" ;;
		*) cmp -s "$f" <(rd "$dir/$name") || differ="$differ $name" ;;
		esac
	done
	check_eq "every file tar archived of $label is what cat shows" "" "$differ"
	rc=0
	rsync -a "$dir/" "$x/rsync/" 2>"$x.err" || rc=$?
	check_eq "rsync -a of $label exits 0" 0 "$rc"
	check_eq "rsync -a of $label complains of nothing" "" "$(cat "$x.err")"
}
archive_matches "a running sandbox's directory" "$D"
archive_matches "a snapshot's directory" "$MNT/snapshots/$S"
ok "terminate big" wr "$MNT/sandboxes/big/terminate"
# Its record may still move once (the suspend it was in the middle of ends): tar of a
# directory whose object changes while it reads says "file changed as we read it" (rc 1),
# as of any directory. Archive it once its time has stood still for a second.
still() { local a; a=$(stat -c %Z "$1") && sleep 1 && [ "$a" = "$(stat -c %Z "$1")" ]; }
ok "big's record settles" poll_until 30 still "$MNT/sandboxes/big"
archive_matches "a terminated sandbox's directory" "$MNT/sandboxes/big"

stop_daemon
finish
