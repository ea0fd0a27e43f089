#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Hand-made image trees never break snapshots (docs/images.md, "Versions of
# a hand-made tree"; issue 26, item 3): a sandbox runs from a version of its
# image's tree taken in at its first start (<images>/.tree/NAME/HEX/rootfs),
# so an edit in place (a line appended to a file, a file added) changes only
# sandboxes started after it. A snapshot taken before the edit and one
# taken after it (of the sandbox started before) are both restorable and
# both fork, each with its own tree; a sandbox started after the edit sees
# it; two first starts at once take a tree in once; restorable says why
# when this host keeps no version of a snapshot's tree; snapfs-image prune
# keeps the versions a bundle or a snapshot names and removes the rest.
. "$(dirname "$0")/lib.sh"

TOOL=$REPO/scripts/snapfs-image
prune() { "$TOOL" --images "$IMAGES" --state "$STATE" prune "$@"; }
command -v sqlite3 >/dev/null || bail "sqlite3 is installed (prune reads the registry)"

# start_on NAME: a sandbox NAME from the image "hand", running (or not: see its status).
start_on() {
	local d=$MNT/sandboxes/$1
	step "mkdir sandboxes/$1" mkdir "$d" && step "image of $1" wr "$d/image" hand &&
		step "entrypoint of $1" wr "$d/entrypoint" 'while :; do sleep 1; done' &&
		step "start $1" wr "$d/start"
}
# note SB: /etc/note and whether /etc/added is there, as SB sees them through root/.
note() {
	local r=$MNT/sandboxes/$1/root/etc
	printf '%s|%s' "$(tr '\n' ' ' <"$r/note" 2>&1)" "$([ -e "$r/added" ] && echo added || echo none)"
}
bundle_of() { cat "$STATE/sandboxes/$1/bundle/config.json" 2>/dev/null; }
takes() { grep -c "image hand: took its tree in as version $1" "$DAEMON_LOG"; }

cp -a "$IMAGES/busybox" "$IMAGES/hand" || bail "copy the busybox image to images/hand"
echo one >"$IMAGES/hand/etc/note"
start_daemon || bail "the daemon mounts"

# --- a sandbox runs from a version, not from the tree -----------------------
start_on old || bail "start sandbox old on image hand"
d1=$(jget "$MNT/sandboxes/old/info.json" .image_digest)
check_eq "its digest is the tree's" "$(rd "$MNT/images/hand/digest")" "$d1"
check_contains "its bundle names the version, not the tree" "$IMAGES/.tree/hand/${d1#sha256:}/rootfs" \
	"$(bundle_of old)"
check_eq "the version's digest file" "$d1" "$(cat "$IMAGES/.tree/hand/${d1#sha256:}/digest")"
check_eq "the version is root's alone" 700 "$(stat -c %a "$IMAGES/.tree")"
check_eq "old sees the tree" "one |none" "$(note old)"
snapA=$(snapshot_of old)
check_eq "snapshot A (before the edit) completes" completed "$(snap_wait "$snapA")"

# --- edit the tree in place ----------------------------------------------------
echo two >>"$IMAGES/hand/etc/note"
echo new >"$IMAGES/hand/etc/added"
d2=$(rd "$MNT/images/hand/digest")
ok "the tree's digest changed ($d1 -> $d2)" test "$d1" != "$d2"
check_eq "old, started before the edit, keeps its tree" "one |none" "$(note old)"
snapB=$(snapshot_of old)
check_eq "snapshot B (after the edit) completes" completed "$(snap_wait "$snapB")"
check_eq "B records the tree old started from" "$d1" "$(jget "$MNT/snapshots/$snapB/info.json" .image_digest)"
check_eq "A is restorable" yes "$(rd "$MNT/snapshots/$snapA/restorable")"
check_eq "B is restorable" yes "$(rd "$MNT/snapshots/$snapB/restorable")"
forkA=$(fork_of "$snapA")
check_match "A forks" '^sbx-[0-9a-f]{16}$' "$forkA"
check_eq "the fork of A runs" running "$(sb_status "$forkA")"
check_eq "the fork of A has A's tree" "one |none" "$(note "$forkA")"
forkB=$(fork_of "$snapB")
check_match "B forks" '^sbx-[0-9a-f]{16}$' "$forkB"
check_eq "the fork of B runs" running "$(sb_status "$forkB")"
check_eq "the fork of B has B's tree" "one |none" "$(note "$forkB")"

start_on after || bail "start sandbox after, after the edit"
check_eq "after runs" running "$(sb_status after)"
check_eq "after, started after the edit, sees it" "one two |added" "$(note after)"
check_eq "after pins the edited tree's digest" "$d2" "$(jget "$MNT/sandboxes/after/info.json" .image_digest)"
check_contains "after's bundle names the edited tree's version" "$IMAGES/.tree/hand/${d2#sha256:}/rootfs" \
	"$(bundle_of after)"
snapC=$(snapshot_of after)
check_eq "snapshot C (of after) completes" completed "$(snap_wait "$snapC")"
forkC=$(fork_of "$snapC")
check_eq "the fork of C has the edited tree" "one two |added" "$(note "$forkC")"
check_eq "a second start from an unchanged tree copies nothing" 1 "$(takes "$d2")"

# --- two first starts at once take a tree in once -------------------------------
echo three >>"$IMAGES/hand/etc/note"
start_on c1 &
p1=$!
start_on c2 &
p2=$!
BG_PIDS+=("$p1" "$p2")
wait "$p1"
check_eq "c1's start is taken" 0 "$?"
wait "$p2"
check_eq "c2's start is taken" 0 "$?"
check_eq "c1 runs" running "$(sb_wait c1)"
check_eq "c2 runs" running "$(sb_wait c2)"
d3=$(jget "$MNT/sandboxes/c1/info.json" .image_digest)
check_eq "c2 pins the same digest" "$d3" "$(jget "$MNT/sandboxes/c2/info.json" .image_digest)"
check_eq "the tree was taken in once" 1 "$(takes "$d3")"
check_eq "c2 sees the third line" "one two three |added" "$(note c2)"
check_eq "no scratch name is left" "" "$(cd "$IMAGES/.tree/hand" && find . -maxdepth 1 -name '.*.*')"

# --- a snapshot whose version this host no longer keeps ---------------------------
ok "move version A aside" mv "$IMAGES/.tree/hand/${d1#sha256:}" "$IMAGES/.tree/hand/.aside.v1"
why=$(rd "$MNT/snapshots/$snapA/restorable")
check_contains "restorable says the tree changed" "image hand changed: snapshot has $d1, host has $d3" "$why"
check_contains "and that no version of it is kept" "keeps no version of the snapshot's tree" "$why"
expect_refusal EINVAL "a fork of a snapshot whose version is gone" "" wr "$MNT/snapshots/$snapA/fork"
ok "move version A back" mv "$IMAGES/.tree/hand/.aside.v1" "$IMAGES/.tree/hand/${d1#sha256:}"
check_eq "A is restorable again" yes "$(rd "$MNT/snapshots/$snapA/restorable")"

# --- prune keeps what a bundle or a snapshot names ----------------------------------
for s in old "$forkA" "$forkB" after "$forkC" c2; do
	ok "terminate $s" wr "$MNT/sandboxes/$s/terminate"
	ok "rmdir $s" rmdir "$MNT/sandboxes/$s"
done
ok "delete snapshot C" rmdir "$MNT/snapshots/$snapC"
echo four >>"$IMAGES/hand/etc/note"
start_on c4 || bail "start c4"
d4=$(jget "$MNT/sandboxes/c4/info.json" .image_digest)
ok "terminate c4" wr "$MNT/sandboxes/c4/terminate"
ok "rmdir c4" rmdir "$MNT/sandboxes/c4"
# A --state with no registry is refused, not read as "no snapshot" (a review: it freed them all).
out=$("$TOOL" --images "$IMAGES" --state "$T/no-such-state" prune hand 2>&1)
check_eq "prune with a --state that has no registry fails" 1 "$?"
check_contains "and says so" "no daemon registry" "$out"
ok "and keeps A's version" test -f "$IMAGES/.tree/hand/${d1#sha256:}/rootfs/etc/note"
ok "and C's" test -e "$IMAGES/.tree/hand/${d2#sha256:}"
out=$(prune hand 2>&1)
check_eq "prune succeeds" 0 "$?"
ok "prune keeps A's version (snapshots A and B)" test -f "$IMAGES/.tree/hand/${d1#sha256:}/rootfs/etc/note"
ok "prune keeps c1's version (its bundle)" test -f "$IMAGES/.tree/hand/${d3#sha256:}/rootfs/etc/note"
ok "prune removes C's version (no sandbox, no snapshot)" test ! -e "$IMAGES/.tree/hand/${d2#sha256:}"
ok "prune removes c4's version (no sandbox, no snapshot)" test ! -e "$IMAGES/.tree/hand/${d4#sha256:}"
check_contains "prune says why it keeps a version" "a snapshot under $STATE" "$out"
check_eq "no scratch name is left" "" "$(cd "$IMAGES/.tree/hand" && find . -maxdepth 1 -name '.*.*')"
fork2=$(fork_of "$snapB")
check_eq "B still forks after the prune" "one |none" "$(note "$fork2")"
ok "terminate c1" wr "$MNT/sandboxes/c1/terminate"
ok "terminate the last fork" wr "$MNT/sandboxes/$fork2/terminate"

stop_daemon
finish
