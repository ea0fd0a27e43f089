#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Issue 24, items 5-7, on a real mount: sizes in the units people write
# (memory, a spec, a fork word), snapshot names in snapshots/index and
# snapshots/by-name/, and times that move (stat, find -newer, make, rsync).
# One sandbox runs (a snapshot needs one); the rest stay `created`.
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"

# --- item 5: sizes --------------------------------------------------------
mkdir "$MNT/sandboxes/units" || bail "mkdir sandboxes/units"
U=$MNT/sandboxes/units
for pair in 512M:536870912 512MiB:536870912 512Mi:536870912 0.5G:536870912 0.5GiB:536870912 \
	2GB:2147483648 1g:1073741824 1Gi:1073741824 64mb:67108864 1T:1099511627776 \
	33554432:33554432; do
	ok "memory takes ${pair%%:*}" wr "$U/memory" "${pair%%:*}"
	check_eq "memory ${pair%%:*} reads back as bytes" "${pair##*:}" "$(rd "$U/memory")"
done
back=$(rd "$U/memory")
ok "what memory reads back is written again unchanged" wr "$U/memory" "$back"
check_eq "... and reads the same" "$back" "$(rd "$U/memory")"
for bad in 512XB 1Ki1 -1G 1e9 "0x10" "1 G" 512MBB 8E; do
	expect_refusal EINVAL "memory refuses '$bad'" units wr "$U/memory" "$bad"
done
check_match "the refusal says what a size looks like" '512MiB' "$(rd "$U/error")"
check_eq "a refused size leaves the limit" "$back" "$(rd "$U/memory")"
# A spec takes the same units (key=value lines, and JSON).
id=$(wr_read "$MNT/sandboxes/new" "$(printf 'image=busybox\nmemory=256MiB\nasync\n')" | head -n 1)
check_match "a spec with memory=256MiB makes a sandbox" '^sbx-[0-9a-f]{16}$' "$id"
[ -n "$id" ] && check_eq "its memory is 256 MiB" 268435456 "$(jget "$MNT/sandboxes/$id/info.json" .memory)"

# --- item 6: names --------------------------------------------------------
start_counter_sandbox src || bail "start sandbox src"
a=$(snapshot_of src name=base)
b=$(snapshot_of src name=base)
c=$(snapshot_of src name=other)
d=$(snapshot_of src)
for s in "$a" "$b" "$c" "$d"; do
	check_match "snapshot $s taken" '^snap-[0-9a-f]{16}$' "$s"
done
index=$(rd "$MNT/snapshots/index")
check_contains "index: <id> <status> <sandbox-id> <name>" "$a completed src base" "$index"
check_contains "index: the second of the name" "$b completed src base" "$index"
check_contains "index: a snapshot with no name shows -" "$d completed src -" "$index"
check_eq "index: every line has four fields" "" "$(awk 'NF != 4' <<<"$index")"
check_eq "awk finds the snapshots named base" "$a $b" \
	"$(awk '$4 == "base" { print $1 }' <<<"$index" | paste -sd' ')"
check_eq "by-name/ lists each name once" "base other" "$(find "$MNT/snapshots/by-name" -mindepth 1 -printf "%f\n" | sort | paste -sd' ')"
check_eq "by-name/base links to the newest of the name" "../$b" \
	"$(readlink "$MNT/snapshots/by-name/base")"
check_eq "by-name/other links to its one" "../$c" "$(readlink "$MNT/snapshots/by-name/other")"
check_eq "a path through the link reaches the snapshot" completed \
	"$(rd "$MNT/snapshots/by-name/base/status")"
check_eq "ls -l shows a symlink" l "$(stat -c %A "$MNT/snapshots/by-name/base" | cut -c1)"
expect_errno ENOENT "a name no snapshot has is ENOENT" readlink -v "$MNT/snapshots/by-name/nothing"
expect_errno ENOENT "... and so is a path through it" cat "$MNT/snapshots/by-name/nothing/status"
for bad in a/b .. - .; do
	expect_refusal EINVAL "name=$bad is refused: it is no file name" src \
		wr "$MNT/sandboxes/src/snapshot" "name=$bad"
done
ok "delete the newest base" wr "$MNT/snapshots/$b/delete"
check_eq "by-name/base now links to the one before" "../$a" \
	"$(readlink "$MNT/snapshots/by-name/base")"
ok "delete other" wr "$MNT/snapshots/$c/delete"
expect_errno ENOENT "a name whose last snapshot is gone is ENOENT" \
	readlink -v "$MNT/snapshots/by-name/other"
check_eq "and by-name/ no longer lists it" base "$(find "$MNT/snapshots/by-name" -mindepth 1 -printf "%f\n" | sort | paste -sd' ')"
check_eq "sandboxes/index keeps <id> <status>" "" "$(rd "$MNT/sandboxes/index" | awk 'NF != 2')"

# --- item 7: times that move ----------------------------------------------
mkdir "$MNT/sandboxes/still" || bail "mkdir sandboxes/still"
S=$MNT/sandboxes/still
mtime() { stat -c %Y "$1"; }
mtime_ns() { date -r "$1" +%s%N; }
t_readme=$(mtime_ns "$MNT/README")
t_status=$(mtime_ns "$U/status")
t_still=$(mtime_ns "$S/status")
sleep 1.1
check_eq "README keeps its time (its content never changes)" "$t_readme" "$(mtime_ns "$MNT/README")"
check_eq "an unchanged status keeps its time" "$t_status" "$(mtime_ns "$U/status")"
before=$(mtime "$U/info.json")
ok "a setting changes (memory of units)" wr "$U/memory" 64M
check_match "info.json's time moved with the setting" '^[0-9]+$' "$(mtime "$U/info.json")"
[ "$(mtime "$U/info.json")" -gt "$before" ] && pass "stat -c %Y info.json moved after the setting" ||
	fail "stat -c %Y info.json moved after the setting" "before $before" "after $(mtime "$U/info.json")"
check_eq "a write of the same value moves nothing" "$(mtime_ns "$U/memory")" \
	"$(wr "$U/memory" 64M && sleep 0.05 && mtime_ns "$U/memory")"
check_eq "another sandbox's status keeps its time" "$t_still" "$(mtime_ns "$S/status")"

# find -newer: only what changed since the reference.
touch "$T/ref"
sleep 0.05
ok "a state change (terminate the created sandbox still)" wr "$S/terminate"
check_eq "still is terminated" terminated "$(sb_status still)"
[ "$(mtime "$S/status")" -gt "$((t_still / 1000000000))" ] &&
	pass "stat -c %Y status moved after the state change" ||
	fail "stat -c %Y status moved after the state change" "before $t_still" "after $(mtime "$S/status")"
newer=$(cd "$MNT" && find sandboxes/still sandboxes/units sandboxes/index snapshots/index README version \
	-maxdepth 1 -newer "$T/ref" -name status -o -maxdepth 1 -newer "$T/ref" -name index -o \
	-maxdepth 1 -newer "$T/ref" -name README -o -maxdepth 1 -newer "$T/ref" -name version | sort |
	paste -sd' ')
check_eq "find -newer REF lists the changed status and sandboxes/index only" \
	"sandboxes/index sandboxes/still/status" "$newer"

# make: a rule on a status file reruns only after a change.
mkdir -p "$T/mk"
printf 'out: %s\n\tcat $< > $@; echo ran >> runs\n' "$U/status" >"$T/mk/Makefile"
ok "make builds from status" make -s -C "$T/mk"
ok "make again: nothing to do" make -s -C "$T/mk"
check_eq "the recipe ran once" 1 "$(wc -l <"$T/mk/runs")"
sleep 1.1 # make compares at a second here at worst
ok "a state change of units (terminate)" wr "$U/terminate"
ok "make after the change" make -s -C "$T/mk"
check_eq "the recipe ran again, once" 2 "$(wc -l <"$T/mk/runs")"
check_eq "with the new status" terminated "$(cat "$T/mk/out")"

# rsync -a, then rsync -ai --dry-run: only what changed is copied again.
files=(status info.json error memory image entrypoint)
mkdir -p "$T/copy/units" "$T/copy/src"
ok "rsync -a units' files" rsync -a "${files[@]/#/$U/}" "$T/copy/units/"
ok "rsync -a src's files" rsync -a "${files[@]/#/$MNT/sandboxes/src/}" "$T/copy/src/"
check_eq "rsync -ai --dry-run at once: nothing to copy" "" \
	"$(rsync -ai --dry-run "${files[@]/#/$U/}" "$T/copy/units/")"
sleep 0.05
snap=$(snapshot_of src) # running -> snapshotting -> running: src's row changed
check_match "a snapshot of src" '^snap-[0-9a-f]{16}$' "$snap"
check_eq "rsync -ai --dry-run: units unchanged, nothing to copy" "" \
	"$(rsync -ai --dry-run "${files[@]/#/$U/}" "$T/copy/units/")"
check_match "rsync -ai --dry-run: src's status is copied again" 'status' \
	"$(rsync -ai --dry-run "${files[@]/#/$MNT/sandboxes/src/}" "$T/copy/src/")"

finish
