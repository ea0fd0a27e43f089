#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317
# A bucket another host writes into: one daemon on a --store it names, and
# manifests this test writes into that store as another (or a hostile) host
# would, each a copy of a real one with fields edited by jq.
#   - Fields that break the local rules (a newline in sandbox_id, `../../..`
#     as sandbox_id, a newline and `yes` in image or in the host profile,
#     numbers out of range, a created_at_ms far in the future, two host_ids
#     in the profile) are skipped,
#     each with one warning in the log naming it, not one every 3 s.
#   - snapshots/index has one line per snapshot, every `source` stays inside
#     the mount, no restorable has a line `yes` beside others.
#   - Another host's snapshot of a sandbox named as one here (newer than
#     this host's, or claiming this host's id) is listed but is never this
#     host's: not the newest in sandboxes/web/snapshot, not in
#     sandboxes/web/snapshots/, no source link; a suspend interrupted here
#     does not take another host's suspend snapshot as its own (which would
#     delete the running container).
. "$(dirname "$0")/lib.sh"

STORE_DIR=$T/shared
DAEMON_ARGS=(--store "file://$STORE_DIR")

start_daemon || bail "the daemon mounts"
start_counter_sandbox web || bail "start sandbox web"
real=$(snapshot_of web)
check_match "a snapshot of web" '^snap-[0-9a-f]{16}$' "$real"
REAL_MANIFEST=$STORE_DIR/manifests/$real.json
[ -f "$REAL_MANIFEST" ] || bail "the manifest of $real is in the store"
check_match "its manifest records this host's id" '^host-[0-9a-f]{16}$' \
	"$(jq -r '.host.host_id // empty' "$REAL_MANIFEST")"
check_eq "this host's id is kept in the state directory" \
	"$(jq -r .host.host_id "$REAL_MANIFEST")" "$(cat "$STATE/host-id" 2>/dev/null)"

# forge ID FILTER: the real manifest edited by jq FILTER ($now: ms since the
# epoch), stored whole as snapshot ID's, as another host's put leaves it.
forge() {
	jq --arg id "$1" --argjson now "$(now_ms)" "$2 | .id = \$id" "$REAL_MANIFEST" \
		>"$T/forged.json" && mv "$T/forged.json" "$STORE_DIR/manifests/$1.json"
}

OTHER_HOST=host-0123456789abcdef
nl_id=snap-00000000000000a1 dotdot=snap-00000000000000a2 nl_image=snap-00000000000000a3
nl_host=snap-00000000000000a4 big=snap-00000000000000a5 future=snap-00000000000000a6
frac=snap-00000000000000a7 dup_id=snap-00000000000000a8 other=snap-00000000000000b1
claims_us=snap-00000000000000b2 other_suspend=snap-00000000000000b3
forge "$nl_id" '.sandbox_id = "web\nsnap-00000000000000ff completed web"' || bail "forge $nl_id"
forge "$dotdot" '.sandbox_id = "../../.."' || bail "forge $dotdot"
forge "$nl_image" '.image = "busybox\nyes\n"' || bail "forge $nl_image"
forge "$nl_host" '.host.runsc_version = "0\nyes\n"' || bail "forge $nl_host"
forge "$big" '.size_bytes = 1e300 | .stored_bytes = -1 | .pause_ms = 1e19' || bail "forge $big"
forge "$future" '.created_at_ms = $now + 10 * 365 * 86400000' || bail "forge $future"
forge "$frac" '.created_at_ms = 1.5' || bail "forge $frac"
# Two host_ids, both this host's: one dropped for naming this host, the other would stay.
here=$(jq -r .host.host_id "$REAL_MANIFEST")
jq -c --arg id "$dup_id" --argjson now "$(now_ms)" '.created_at_ms = $now | .id = $id' \
	"$REAL_MANIFEST" | sed "s/\"host\":{/\"host\":{\"host_id\":\"$here\",/" >"$T/forged.json" ||
	bail "forge $dup_id"
mv "$T/forged.json" "$STORE_DIR/manifests/$dup_id.json" || bail "store $dup_id"
rejected=("$nl_id" "$dotdot" "$nl_image" "$nl_host" "$big" "$future" "$frac" "$dup_id")
# Valid, and web's by name, newer than this host's snapshot: another host's,
# and one that names this host as its origin though this host never took it.
forge "$other" ".created_at_ms = \$now | .host.host_id = \"$OTHER_HOST\"" || bail "forge $other"
forge "$claims_us" '.created_at_ms = $now' || bail "forge $claims_us"
forge "$other_suspend" ".created_at_ms = \$now | .kind = \"suspend\" | .host.host_id = \"$OTHER_HOST\"" ||
	bail "forge $other_suspend"

listed() { grep -Eq "^$1 completed web [^ ]+\$" "$MNT/snapshots/index"; }
ok "another host's snapshot of its own web is listed within 10 s" poll_until 10 listed "$other"
ok "so is one that claims this host" poll_until 10 listed "$claims_us"
ok "and another host's suspend snapshot" poll_until 10 listed "$other_suspend"

warned() { grep -a "warning" "$DAEMON_LOG" | grep -q "$1"; }
for id in "${rejected[@]}"; do
	ok "$id: a warning names it" poll_until 10 warned "$id"
	expect_errno ENOENT "$id: it is not in snapshots/" cat "$MNT/snapshots/$id/status"
done

index=$(rd "$MNT/snapshots/index")
entries=$(find "$MNT/snapshots" -mindepth 1 -maxdepth 1 -type d -name 'snap-*' | wc -l)
check_eq "snapshots/index has one line per snapshot" "$entries" "$(wc -l <<<"$index")"
bad=$(grep -Ev '^snap-[0-9a-f]{16} (pending|in_progress|completed|failed) [a-z0-9][a-z0-9._-]{0,62} [^ ]+$' \
	<<<"$index")
check_eq "every line of snapshots/index is <id> <status> <sandbox-id> <name>" "" "$bad"
for id in "${rejected[@]}"; do
	check_lacks "the index does not list $id" "$id" "$index"
done

outside="" yes_beside=""
for d in "$MNT"/snapshots/snap-*; do
	id=$(basename "$d")
	if [ -L "$d/source" ]; then
		to=$(realpath -m "$d/$(readlink "$d/source")")
		[[ $to == "$MNT"/* ]] || outside+="$id -> $to "
	fi
	why=$(rd "$d/restorable")
	[ "$why" != yes ] && grep -qx yes <<<"$why" && yes_beside+="$id "
done
check_eq "every source stays inside the mount" "" "$outside"
check_eq "no restorable has a line yes beside other lines" "" "$yes_beside"
check_eq "this host's snapshot links to its source" ../../sandboxes/web \
	"$(readlink "$MNT/snapshots/$real/source")"
check_eq "and is restorable" yes "$(rd "$MNT/snapshots/$real/restorable")"

check_eq "web's newest snapshot is this host's" "$real" "$(rd "$MNT/sandboxes/web/snapshot")"
check_eq "sandboxes/web/snapshots/ lists this host's only" "$real" \
	"$(ls "$MNT/sandboxes/web/snapshots")"
for id in "$other" "$claims_us"; do
	check_eq "$id has no source link here" "" "$(readlink "$MNT/snapshots/$id/source")"
	check_eq "$id's info.json names the sandbox as its manifest does" web \
		"$(jget "$MNT/snapshots/$id/info.json" .sandbox_id)"
done
check_eq "another host's snapshot keeps its origin" "$OTHER_HOST" \
	"$(jget "$MNT/snapshots/$other/info.json" .host.host_id)"
check_eq "one claiming this host is not recorded as this host's" "" \
	"$(jget "$MNT/snapshots/$claims_us/info.json" '.host.host_id // empty')"

# Warned about once, not once per pass of the registry (every 3 s): the
# count of lines naming it does not grow over two more passes. (The store's
# records and the registry may each say once why they skip it.)
declare -A warned_before
for id in "${rejected[@]}"; do
	warned_before[$id]=$(grep -a warning "$DAEMON_LOG" | grep -c "$id")
done
sleep 7
for id in "${rejected[@]}"; do
	n=$(grep -a warning "$DAEMON_LOG" | grep -c "$id")
	check_eq "$id: warned about once, not on every pass" "${warned_before[$id]}" "$n"
	check_match "$id: by at most one line per layer" '^[12]$' "$n"
done

# A suspend of web interrupted by a crash, with the container still running:
# reconcile must not take another host's suspend snapshot of a "web" as the
# one this suspend took (it would delete the running container).
rid=$(runtime_id web)
stop_daemon
sqlite3 -cmd ".timeout 10000" "$STATE/registry.db" \
	"UPDATE sandboxes SET state = 'suspending' WHERE id = 'web'" || bail "mark web suspending"
start_daemon || bail "the daemon mounts again"
check_eq "the interrupted suspend leaves web running" running "$(sb_status web)"
check_eq "with the same container" "$rid" "$(runtime_id web)"
ok "whose process is alive" runsc_process_alive "$rid"
c0=$(counter_count "$(counter web)")
ok "and goes on counting" poll_until 10 counter_at_least web $((c0 + 1))
check_eq "web's newest snapshot is still this host's" "$real" "$(rd "$MNT/sandboxes/web/snapshot")"

wr "$MNT/sandboxes/web/terminate" >/dev/null
stop_daemon
finish
