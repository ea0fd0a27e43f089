#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Two daemons, each with its own --state and mountpoint, on one store (as two
# hosts share a bucket): a snapshot taken on the first appears in the
# second's snapshots/ within a few seconds, forks there with the right
# state, and a delete on the first makes it disappear from the second.
# A second snapshot of the same sandbox forks on the second host from the
# chunks its image of the first one holds, downloading only the rest.
# Collection across hosts: a pack the other host's snapshot uses stays; a
# pack no snapshot uses is condemned (trash/) and goes after the grace
# period, orphans included. A suspended sandbox's snapshot cannot be
# deleted from the other host, and resumes from the store alone.
# SHARED_STORE_URL picks the store (default: a local directory both use).
. "$(dirname "$0")/lib.sh"

SHARED_STORE_URL=${SHARED_STORE_URL:-file://$T/shared}
GRACE=6
DAEMON_ARGS=(--store "$SHARED_STORE_URL" --gc-grace "$GRACE")

# The store's keys, one a line ("packs/snap-.../0000.pack"), temp objects left out.
store_keys() {
	local url=$SHARED_STORE_URL prefix
	case $url in
	file://*) (cd "${url#file://}" && find . -type f ! -name '*.tmp.*' | sed 's|^\./||') ;;
	s3://*)
		prefix=${url#s3://*/}
		timeout -k 5 "$OP_TIMEOUT" /usr/bin/aws --endpoint-url "$AWS_ENDPOINT_URL" s3 ls \
			--recursive "$url/" | awk '{ print $4 }' | sed "s|^$prefix/||"
		;;
	esac
}

# Copy file $2 into the store as key $1.
store_put() {
	local url=$SHARED_STORE_URL
	case $url in
	file://*) mkdir -p "$(dirname "${url#file://}/$1")" && cp "$2" "${url#file://}/$1" ;;
	s3://*)
		timeout -k 5 "$OP_TIMEOUT" /usr/bin/aws --endpoint-url "$AWS_ENDPOINT_URL" s3 cp \
			--quiet "$2" "$url/$1"
		;;
	esac
}

# Host B's variables; `as_host B cmd` runs cmd with them in place of A's.
B_STATE=$T/b/state B_MNT=$T/b/mnt B_LOG=$T/b/daemon.log B_PID=""
mkdir -p "$B_STATE" "$B_MNT"

as_host_b() {
	local a_state=$STATE a_mnt=$MNT a_log=$DAEMON_LOG a_pid=$DAEMON_PID a_root=$RUNSC_ROOT rc
	STATE=$B_STATE MNT=$B_MNT DAEMON_LOG=$B_LOG DAEMON_PID=$B_PID RUNSC_ROOT=$B_STATE/runsc
	"$@"
	rc=$?
	B_PID=$DAEMON_PID
	STATE=$a_state MNT=$a_mnt DAEMON_LOG=$a_log DAEMON_PID=$a_pid RUNSC_ROOT=$a_root
	return "$rc"
}

# B first, then lib.sh's cleanup for A.
trap 'rc=$?; as_host_b teardown_host; (exit $rc); cleanup' EXIT

start_daemon || bail "daemon A mounts"
as_host_b start_daemon || bail "daemon B mounts"

start_counter_sandbox src || bail "start sandbox src on A"
sb_run src 'echo from-a > /root/from-a' >/dev/null
# 16 MiB that every snapshot of src shares: the second comes from B's disk.
sb_run src 'head -c 16777216 /dev/urandom > /tmp/fill' >/dev/null
snap=$(snapshot_of src)
check_match "snapshot on A" '^snap-[0-9a-f]{16}$' "$snap"
at_snap=$(counter src)

listed_on_b() { grep -q "^$snap completed src -$" "$B_MNT/snapshots/index"; }
ok "B lists A's snapshot within 10 s" poll_until 10 listed_on_b
check_eq "B's restorable says yes" yes "$(rd "$B_MNT/snapshots/$snap/restorable")"
check_eq "B's info.json names the source" src "$(jget "$B_MNT/snapshots/$snap/info.json" .sandbox_id)"

fork=$(as_host_b fork_of "$snap")
check_match "fork on B" '^sbx-[0-9a-f]{16}$' "$fork"
check_eq "the fork runs on B" running "$(as_host_b sb_status "$fork")"
check_eq "the fork has A's root-fs file" from-a "$(as_host_b sb_run "$fork" 'cat /root/from-a')"
got=$(as_host_b counter "$fork")
check_eq "the fork's counter starts from the snapshot's token" "$(counter_token "$at_snap")" \
	"$(counter_token "$got")"
ok "the fork's counter goes on from the snapshot's value" \
	test "$(counter_count "$got")" -ge "$(counter_count "$at_snap")"
check_eq "B's fork is not on A" "" "$(grep "^$fork " "$MNT/sandboxes/index")"

# A second snapshot of src. B holds the image of the first (its fork above
# materialized it): it copies the chunks they share from there.
get_bytes() {
	local k=snapfs_store_read_bytes_total
	[ "$1" = local ] && k=snapfs_cache_copied_bytes_total
	rd "$B_MNT/metrics" | awk -v k="$k" '$1 == k { print $2 }'
}
sb_run src 'echo second > /root/second' >/dev/null
snap2=$(snapshot_of src)
at_snap2=$(counter src)
listed2_on_b() { grep -q "^$snap2 completed src -$" "$B_MNT/snapshots/index"; }
ok "B lists A's second snapshot within 10 s" poll_until 10 listed2_on_b
local0=$(get_bytes local) store0=$(get_bytes store)
fork2=$(as_host_b fork_of "$snap2")
check_eq "the fork of the second snapshot runs on B" running "$(as_host_b sb_status "$fork2")"
check_eq "it has the second snapshot's file" second \
	"$(as_host_b sb_run "$fork2" 'cat /root/second')"
got=$(as_host_b counter "$fork2")
check_eq "its counter starts from the second snapshot's token" "$(counter_token "$at_snap2")" \
	"$(counter_token "$got")"
ok "and goes on from its value" test "$(counter_count "$got")" -ge "$(counter_count "$at_snap2")"
local1=$(get_bytes local) store1=$(get_bytes store)
note "B's materialize: $(((local1 - local0) >> 10)) KiB copied, $(((store1 - store0) >> 10)) KiB downloaded"
ok "B copied most of the 16 MiB they share from its image of the first" \
	test $((local1 - local0)) -ge $((12 << 20))
ok "and downloaded less than it copied" test $((store1 - store0)) -lt $((local1 - local0))
check_contains "B's log gives the split" "materialized snapshot $snap2: " "$(cat "$B_LOG")"
wr "$B_MNT/sandboxes/$fork2/terminate" >/dev/null
ok "A deletes the second snapshot" wr "$MNT/snapshots/$snap2/delete"

# Garbage collection across hosts. B's records follow the store, so a
# snapshot of its fork reuses A's packs; A's delete of its own snapshot must
# leave them, and not even condemn them.
snap_b=$(as_host_b snapshot_of "$fork")
check_match "snapshot of the fork on B" '^snap-[0-9a-f]{16}$' "$snap_b"
used=$(jq -r '.packs[]' "$B_MNT/snapshots/$snap_b/manifest.json" | grep "^$snap/" | head -n 1)
ok "B's snapshot reuses a pack of A's" test -n "$used"
wr "$B_MNT/sandboxes/$fork/terminate" >/dev/null
ok "A deletes the snapshot" wr "$MNT/snapshots/$snap/delete"
gone_on_b() { ! grep -q "^$snap " "$B_MNT/snapshots/index"; }
ok "the delete disappears from B within 10 s" poll_until 10 gone_on_b
expect_errno ENOENT "B's snapshot directory is gone" cat "$B_MNT/snapshots/$snap/status"
sleep $((GRACE + 2)) # a grace period and passes of both daemons
keys=$(store_keys)
check_contains "A's pack that B's snapshot uses is still in the store" "packs/$used.pack" "$keys"
check_lacks "and it is not condemned" "trash/$used." "$keys"
a_fork=$(fork_of "$snap_b") # A never cached it: every chunk comes from the store
check_eq "A forks B's snapshot from the store" running "$(sb_status "$a_fork")"
check_eq "that fork has A's root-fs file" from-a "$(sb_run "$a_fork" 'cat /root/from-a')"
wr "$MNT/sandboxes/$a_fork/terminate" >/dev/null

# Packs no manifest lists: another host's put in flight, or one that crashed.
orphan=packs/snap-0rphan000000000/0000
store_put "$orphan.pack" "$REPO/README.md" || bail "write an orphan pack"
orphan_marked() { store_keys | grep -q "^trash/snap-0rphan000000000/0000\."; }
ok "an orphan pack is condemned, not deleted at once" poll_until 10 orphan_marked
check_contains "the condemned pack is still there" "$orphan.pack" "$(store_keys)"
condemned() { rd "$MNT/metrics" | awk '$1 == "snapfs_store_condemned_packs" { print $2 }'; }
some_condemned() { [ "$(condemned)" -ge 1 ]; }
ok "A's metrics count it as condemned" poll_until 10 some_condemned
check_eq "A's metrics give the grace period" "$GRACE" \
	"$(rd "$MNT/metrics" | awk '$1 == "snapfs_store_gc_grace_seconds" { print $2 }')"

ok "B deletes its snapshot" wr "$B_MNT/snapshots/$snap_b/delete"
no_packs() { ! store_keys | grep -q '^packs/'; }
ok "every pack is gone within two grace periods" poll_until $((2 * GRACE + 10)) no_packs
no_markers() { ! store_keys | grep -q '^trash/'; }
ok "and their markers a grace period later" poll_until $((2 * GRACE + 10)) no_markers
check_eq "no manifest is left" "" "$(store_keys | grep '^manifests/')"
none_condemned() { [ "$(condemned)" = 0 ]; }
ok "and A's metrics count no condemned pack" poll_until 10 none_condemned

# A suspended sandbox's snapshot is all that is left of it: no host deletes
# it (its hold in the store), collection leaves it, and A resumes it from
# the store alone once its own image is gone.
start_counter_sandbox held || bail "start sandbox held on A"
sb_run held 'echo before-suspend > /root/held' >/dev/null
ok "A suspends held" wr "$MNT/sandboxes/held/suspend"
susp=$(suspend_snapshot_of held)
check_match "held's suspend snapshot" '^snap-[0-9a-f]{16}$' "$susp"
check_contains "the store holds it for held" "holds/$susp/" "$(store_keys)"
listed_susp_on_b() { grep -q "^$susp completed held -$" "$B_MNT/snapshots/index"; }
ok "B lists A's suspend snapshot within 10 s" poll_until 10 listed_susp_on_b
expect_errno EBUSY "B's delete of A's suspend snapshot" wr "$B_MNT/snapshots/$susp/delete"
check_contains "B's errors name the holder" "sandbox held of host" "$(rd "$B_MNT/errors" | tail -n 1)"
sleep $((GRACE + 2)) # a grace period and collection passes of both daemons
check_contains "its manifest is still in the store" "manifests/$susp.json" "$(store_keys)"
check_eq "B still lists it" completed "$(as_host_b snap_status "$susp")"
rm -rf "${STATE:?}/cache/$susp"
ok "A resumes held with no image of its own" wr "$MNT/sandboxes/held/resume"
check_eq "held runs" running "$(sb_status held)"
check_eq "with its root-fs file" before-suspend "$(sb_run held 'cat /root/held')"
check_lacks "its hold is gone" "holds/$susp/" "$(store_keys)"
ok "B may delete the snapshot now" wr "$B_MNT/snapshots/$susp/delete"
wr "$MNT/sandboxes/held/terminate" >/dev/null
wr "$MNT/sandboxes/src/terminate" >/dev/null
as_host_b stop_daemon
stop_daemon
finish
