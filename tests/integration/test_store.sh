#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# The deduplicated, compressed, verified store, through the mounted tree:
#   - five successive snapshots of a sandbox that changes a little between
#     them store far less than five whole images, and a fork of each (from the
#     store, with the local cache emptied) restores that snapshot's state;
#   - a flipped byte in one stored chunk: forking a snapshot that uses it fails
#     with EIO and a message naming the chunk; the others fork fine;
#   - deleting every snapshot leaves no pack in the store;
#   - SIGKILL of the daemon while it stores a big snapshot, then a restart: the
#     snapshot is failed (or was completed whole), nothing it left remains,
#     and the source sandbox runs.
. "$(dirname "$0")/lib.sh"

FILL_MB=${FILL_MB:-32}
BIG_MB=${BIG_MB:-256}
STORE=$STATE/store

avail_mb=$(df --output=avail -BM "$T" | tail -n 1 | tr -dc 0-9)
if [ "$avail_mb" -lt $((4 * BIG_MB + 1024)) ]; then
	skip "only $avail_mb MiB free under $T; this test needs $((4 * BIG_MB + 1024))"
	finish
fi

info_field() { jget "$MNT/snapshots/$1/info.json" "$2"; }
metric() { rd "$MNT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
store_files() { find "$STORE" -type f "$@" 2>/dev/null | wc -l; }
# The snapshot's manifest, as stored (its file in the tree is the same text).
manifest() { cat "$STORE/manifests/$1.json"; }

start_daemon || bail "the daemon mounts"

# --- five snapshots, a little changed between them ---------------------------
make_sandbox src "head -c $((FILL_MB << 20)) /dev/urandom > /tmp/fill; echo ready > /tmp/ready; while :; do sleep 1; done" ||
	bail "start sandbox src"
poll_until 120 sb_run src 'cat /tmp/ready' || bail "sandbox src fills $FILL_MB MiB of /tmp"

snaps=() sums=() sizes=() stored=()
for k in 1 2 3 4 5; do
	# 256 KiB of new random bytes somewhere in the fill, and the step number.
	sb_run src "echo $k > /tmp/step; dd if=/dev/urandom of=/tmp/fill bs=64k count=4 seek=$((k * 77 % (FILL_MB * 16 - 4))) conv=notrunc 2>/dev/null" >/dev/null ||
		fail "change src before snapshot $k"
	sums[k]=$(sb_run src 'md5sum /tmp/fill' | cut -c1-32)
	snaps[k]=$(snapshot_of src)
	[ -n "${snaps[k]}" ] || bail "snapshot $k of src"
	check_eq "snapshot $k completed" completed "$(snap_status "${snaps[k]}")"
	sizes[k]=$(info_field "${snaps[k]}" .size_bytes)
	stored[k]=$(info_field "${snaps[k]}" .stored_bytes)
	note "snapshot $k: ${snaps[k]} size ${sizes[k]} stored ${stored[k]}"
	check_eq "snapshot $k: progress is DONE TOTAL, equal" "${sizes[k]} ${sizes[k]}" \
		"$(rd "$MNT/snapshots/${snaps[k]}/progress")"
done
whole=$((sizes[1] + sizes[2] + sizes[3] + sizes[4] + sizes[5]))
sum_stored=$((stored[1] + stored[2] + stored[3] + stored[4] + stored[5]))
store_bytes=$(du -sb "$STORE" | cut -f1)
note "five whole images: $whole bytes; stored_bytes summed: $sum_stored; store directory: $store_bytes"
ok "the first snapshot stored its random fill (stored_bytes > $FILL_MB MiB)" \
	test "${stored[1]}" -gt $((FILL_MB << 20))
for k in 2 3 4 5; do
	ok "snapshot $k stored a small part of its size (${stored[k]} < ${sizes[k]} / 4)" \
		test "${stored[k]}" -lt $((sizes[k] / 4))
done
ok "five snapshots stored less than two whole images ($sum_stored < 2 x ${sizes[1]})" \
	test "$sum_stored" -lt $((2 * sizes[1]))
ok "the store directory holds less than two whole images ($store_bytes)" \
	test "$store_bytes" -lt $((2 * sizes[1]))
check_eq "metrics: snapfs_store_snapshots" 5 "$(metric snapfs_store_snapshots)"
check_eq "metrics: snapfs_store_logical_bytes is the five sizes" "$whole" \
	"$(metric snapfs_store_logical_bytes)"
ok "metrics: snapfs_store_bytes is what the snapshots stored" \
	test "$(metric snapfs_store_bytes)" -eq "$sum_stored"
ok "manifest.json is format 2 with chunk lists" \
	jq -e '.format == 2 and (.files | map(.chunks | length) | add) > 0' \
	"$MNT/snapshots/${snaps[3]}/manifest.json"
ok "the later snapshots use the first one's packs" \
	jq -e --arg s "${snaps[1]}/0000" '.packs | index($s) != null' \
	"$MNT/snapshots/${snaps[5]}/manifest.json"

# check_fork K: a fork of snapshot K, materialized from the store, has K's state.
check_fork() {
	local k=$1 f
	f=$(fork_of "${snaps[k]}")
	if [ -z "$f" ]; then
		fail "fork of snapshot $k" "$(rd "$MNT/errors" | tail -n 1)"
		return
	fi
	check_eq "fork of snapshot $k runs" running "$(sb_status "$f")"
	check_eq "fork of snapshot $k: the step" "$k" "$(sb_run "$f" 'cat /tmp/step')"
	check_eq "fork of snapshot $k: the fill, byte for byte" "${sums[k]}" \
		"$(sb_run "$f" 'md5sum /tmp/fill' | cut -c1-32)"
	wr "$MNT/sandboxes/$f/terminate" && rmdir "$MNT/sandboxes/$f"
}

# Cold cache: the first fork reads the store; each later one copies the chunks
# the earlier forks' images hold (verified) and reads only the rest.
rm -rf "${STATE:?}/cache/"*
for k in 1 2 3 4 5; do
	check_fork "$k"
done
ok "the forks left their images in the cache" test -d "$STATE/cache/${snaps[5]}"

# --- a corrupt chunk -------------------------------------------------------------
# A chunk of pages.img that snapshot 3 added (so snapshots 1 and 2 cannot use it),
# the one the most later snapshots use too.
s3=${snaps[3]}
best=0 sha=""
while read -r c_pack c_sha c_off c_zlen; do
	n=0
	for k in 4 5; do
		manifest "${snaps[k]}" | grep -q "$c_sha" && n=$((n + 1))
	done
	if [ -z "$sha" ] || [ "$n" -gt "$best" ]; then
		best=$n pack=$c_pack sha=$c_sha off=$c_off zlen=$c_zlen
	fi
done < <(manifest "$s3" | jq -r --arg s "$s3/" '
	.packs as $p | .files[] | select(.name == "pages.img") | .chunks[]
	| select(length == 5 and ($p[.[2]] | startswith($s)))
	| "\($p[.[2]]) \(.[0]) \(.[3]) \(.[4])"')
[ -n "$sha" ] || bail "snapshot 3 added no chunk of pages.img"
users=() others=()
for k in 1 2 3 4 5; do
	if manifest "${snaps[k]}" | grep -q "$sha"; then users+=("$k"); else others+=("$k"); fi
done
note "chunk $sha (pack $pack) is used by snapshots ${users[*]}"
check_eq "snapshots 1 and 2 do not use it" "1 2" "$(printf '%s\n' "${others[@]}" | head -n 2 | xargs)"
packfile=$STORE/packs/$pack.pack
pos=$((off + zlen / 2))
flip() {
	local b
	b=$(od -An -tu1 -j "$pos" -N1 "$packfile" | tr -d ' ')
	printf "$(printf '\\%03o' $((b ^ 0x40)))" | dd of="$packfile" bs=1 seek="$pos" conv=notrunc 2>/dev/null
}
flip
rm -rf "${STATE:?}/cache/"*
for k in "${users[@]}"; do
	expect_errno EIO "fork of snapshot $k, which uses the corrupt chunk" \
		wr "$MNT/snapshots/${snaps[k]}/fork"
	last=$(rd "$MNT/errors" | tail -n 1)
	check_contains "fork of snapshot $k: the error names the chunk" "$sha" "$last"
	check_contains "fork of snapshot $k: the error names the snapshot" "${snaps[k]}" "$last"
	ok "fork of snapshot $k: nothing materialized" \
		test -z "$(find "$STATE/cache" -mindepth 1 -maxdepth 1 -name "${snaps[k]}*")"
done
for k in "${others[@]}"; do
	check_fork "$k"
done
flip
# The failed forks are sandboxes in state failed: remove them.
for d in "$MNT"/sandboxes/sbx-*; do
	[ -e "$d" ] && [ "$(rd "$d/status")" = failed ] && rmdir "$d"
done

# --- delete everything --------------------------------------------------------------
for k in 1 2 3 4 5; do
	ok "delete snapshot $k" rmdir "$MNT/snapshots/${snaps[k]}"
done
check_eq "no pack is left in the store" 0 "$(store_files -path "$STORE/packs/*")"
check_eq "no manifest is left in the store" 0 "$(store_files -path "$STORE/manifests/*")"
check_eq "metrics: snapfs_store_packs" 0 "$(metric snapfs_store_packs)"
check_eq "metrics: snapfs_store_bytes" 0 "$(metric snapfs_store_bytes)"
check_eq "no cached image is left" 0 "$(find "$STATE/cache" -mindepth 1 -maxdepth 1 ! -name ".*" | wc -l)"

# --- SIGKILL while storing -------------------------------------------------------------
half=$((BIG_MB / 2))
make_sandbox big "head -c $((half << 20)) /dev/urandom > /tmp/rand; od -An -tx1 /dev/urandom | head -c $((half << 20)) > /tmp/text; echo ready > /tmp/ready; while :; do sleep 1; done" ||
	bail "start sandbox big"
poll_until 600 sb_run big 'cat /tmp/ready' || bail "sandbox big fills $BIG_MB MiB of /tmp"
big_rid=$(runtime_id big)
id=$(wr_read "$MNT/sandboxes/big/snapshot" async | head -n 1)
[ -n "$id" ] || bail "async snapshot of big"
# Kill as soon as the store has written a pack: the snapshot is then half stored.
caught=no
deadline=$(($(date +%s) + OP_TIMEOUT))
while [ "$(date +%s)" -lt "$deadline" ]; do
	if [ -n "$(find "$STORE/packs/$id" -name '*.pack' 2>/dev/null)" ]; then
		[ -e "$STORE/manifests/$id.json" ] || caught=yes
		break
	fi
	[ "$(snap_status "$id")" = completed ] && break
	sleep 0.01
done
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=""
unmount_mnt
if [ "$caught" = yes ]; then
	note "killed with packs stored and no manifest: $(find "$STORE/packs/$id" -type f | wc -l) objects"
else
	skip "the snapshot completed before the kill; the restart still has to clean up"
fi
ok "the source sandbox survived the daemon" test "$(runsc_state_of "$big_rid")" = running
start_daemon || bail "the daemon starts again after SIGKILL"
# A checkpoint that was whole in the spool is stored again after the restart: wait for it to settle.
settled() { [[ "$(snap_status "$id")" =~ ^(failed|completed)$ ]]; }
poll_until "$OP_TIMEOUT" settled
status=$(snap_status "$id")
check_match "after the restart the snapshot is failed or completed" '^(failed|completed)$' "$status"
if [ "$status" = failed ]; then
	check_eq "no object of the failed snapshot remains" 0 \
		"$(find "$STORE" -path "*$id*" | wc -l)"
	check_contains "its error says it was interrupted" interrupted "$(rd "$MNT/snapshots/$id/error")"
else
	ok "the completed snapshot forks" fork_of "$id"
fi
check_eq "no temp object remains in the store" 0 "$(store_files -name '*.tmp.*')"
check_eq "the spool is empty" 0 "$(find "$STATE/spool" -mindepth 1 | wc -l)"
check_eq "no temp image remains in the cache" 0 "$(find "$STATE/cache" -maxdepth 1 -name '*.tmp*' | wc -l)"
check_eq "big runs" running "$(sb_status big)"
check_eq "big answers" ready "$(sb_run big 'cat /tmp/ready')"
s=$(snapshot_of big)
check_eq "big can be snapshotted again" completed "$(snap_status "$s")"

stop_daemon
finish
