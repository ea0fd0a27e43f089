#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# A hostile writer of the store (issue 9, items 1 and 6), on a local
# file:// store that the daemon (built with ASan) shares with "another host"
# the test plays by writing objects into it:
#   - the crafted manifest of item 1: a new snapshot whose chunks repeat the
#     hash of a chunk the daemon's cache holds, with length 1 and a stored
#     length of 4 MiB at consecutive offsets of a large pack. Its fork fails
#     with EIO naming the snapshot and the chunk; the daemon lives on; the
#     snapshot it copied from still forks.
#   - a pack overwritten with junk, then a second snapshot of the same
#     sandbox: the second snapshot does not reference the junk (it stores
#     those chunks again, a warning names the pack) and it forks, from the
#     store, with the sandbox's state.
. "$(dirname "$0")/lib.sh"

BUCKET=$T/bucket
DAEMON_ARGS=(--store "file://$BUCKET")
ZLEN=4228096 # the most a stored chunk could claim before the fix
RUN=4        # four of them: 16 MiB read back into a buffer of 8

manifest() { cat "$BUCKET/manifests/$1.json"; }

start_daemon || bail "the daemon mounts"
start_counter_sandbox src || bail "start sandbox src with the counter entrypoint"
poll_until 60 counter_at_least src 3 || bail "the counter of src does not advance"

# --- the crafted manifest ------------------------------------------------------
snap=$(snapshot_of src)
[ -n "$snap" ] || bail "snapshot of src"
at_snap=$(counter src)
# A fork puts the snapshot's image, and its manifest, into the cache: a donor.
f1=$(fork_of "$snap")
check_eq "the first fork runs" running "$(sb_status "$f1")"
wr "$MNT/sandboxes/$f1/terminate" && rmdir "$MNT/sandboxes/$f1"
ok "the snapshot's image is cached" test -d "$STATE/cache/$snap"

# The first stored chunk of pages.img: [sha, len, pack, off, zlen].
first=$(manifest "$snap" | jq -c '.files[] | select(.name == "pages.img") | .chunks[] | select(length == 5)' | head -n 1)
sha=$(jq -r '.[0]' <<<"$first")
[ -n "$sha" ] || bail "snapshot $snap has a stored chunk of pages.img"
evil=snap-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
# The hostile host's snapshot: the source's metadata and files, but pages.img
# is the donor's chunk, then RUN chunks of that hash, 1 byte each, stored as
# ZLEN bytes back to back in a pack of its own.
manifest "$snap" | jq --arg id "$evil" --argjson first "$first" --argjson n "$RUN" \
	--argjson z "$ZLEN" '
	.id = $id | .packs += [$id + "/0000"] | (.packs | length - 1) as $p
	| .files |= map(if .name == "pages.img" then
		.size = $first[1] + $n
		| .chunks = [$first] + [range($n) | [$first[0], 1, $p, . * $z, $z]]
		else . end)
	| .size_bytes = (.files | map(.size) | add)' >"$T/evil.json" ||
	bail "write the crafted manifest"
mkdir -p "$BUCKET/packs/$evil"
truncate -s $((RUN * ZLEN)) "$BUCKET/packs/$evil/0000.pack"
cp "$T/evil.json" "$BUCKET/manifests/.$evil.json.part" &&
	mv "$BUCKET/manifests/.$evil.json.part" "$BUCKET/manifests/$evil.json"

listed() { grep -q "^$evil " "$MNT/snapshots/index"; }
ok "the daemon lists the hostile snapshot" poll_until 30 listed
expect_errno EIO "fork of the crafted snapshot" wr "$MNT/snapshots/$evil/fork"
last=$(rd "$MNT/errors" | tail -n 1)
check_contains "the error names the snapshot" "$evil" "$last"
check_contains "the error names the chunk" "$sha" "$last"
ok "the daemon lives on" rd "$MNT/version"
ok "the daemon process is there" kill -0 "$DAEMON_PID"
check_eq "nothing of it is cached" "" "$(find "$STATE/cache" -maxdepth 1 -name "$evil*")"
rm -rf "${STATE:?}/cache/"*
f2=$(fork_of "$snap")
check_eq "the source's snapshot still forks (from the store)" running "$(sb_status "$f2")"
check_eq "that fork has the snapshot's state" "$(counter_token "$at_snap")" \
	"$(counter_token "$(counter "$f2")")"
wr "$MNT/sandboxes/$f2/terminate" && rmdir "$MNT/sandboxes/$f2"
for d in "$MNT"/sandboxes/sbx-*; do
	[ -e "$d" ] && [ "$(rd "$d/status")" = failed ] && rmdir "$d"
done

# --- a pack overwritten with junk ------------------------------------------------
packs=$(find "$BUCKET/packs/$snap" -name '*.pack' | wc -l)
ok "snapshot $snap stored packs of its own ($packs)" test "$packs" -gt 0
for p in "$BUCKET/packs/$snap/"*.pack; do
	head -c "$(stat -c %s "$p")" /dev/urandom >"$p.junk" && mv "$p.junk" "$p"
done
snap2=$(snapshot_of src)
[ -n "$snap2" ] || bail "second snapshot of src" "$(rd "$MNT/errors" | tail -n 1)"
check_eq "the second snapshot completed" completed "$(snap_status "$snap2")"
at_snap2=$(counter src)
check_eq "the second snapshot references no pack of the first" "" \
	"$(manifest "$snap2" | jq -r --arg s "$snap/" '.packs[] | select(startswith($s))')"
check_contains "a warning names the junk pack" "not deduplicating against pack $snap/" \
	"$(cat "$DAEMON_LOG")"
rm -rf "${STATE:?}/cache/"*
f3=$(fork_of "$snap2")
if [ -z "$f3" ]; then
	fail "fork of the second snapshot" "$(rd "$MNT/errors" | tail -n 1)"
else
	check_eq "the second snapshot forks" running "$(sb_status "$f3")"
	check_eq "its fork has the source's state at the second snapshot" \
		"$(counter_token "$at_snap2")" "$(counter_token "$(counter "$f3")")"
	wr "$MNT/sandboxes/$f3/terminate" && rmdir "$MNT/sandboxes/$f3"
fi
s3=$(snapshot_of src)
check_eq "a third snapshot (deduplicating against the second) completes" completed \
	"$(snap_status "$s3")"
ok "the third snapshot uses the second one's packs" \
	jq -e --arg s "$snap2/0000" '.packs | index($s) != null' "$BUCKET/manifests/$s3.json"

stop_daemon
finish
