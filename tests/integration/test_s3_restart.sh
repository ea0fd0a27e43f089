#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Issue 11 item 6: the store down, or the wrong store, at restart destroys
# no metadata. The registry is left as a kill -9 leaves it in two windows
# (edited with sqlite3 while the daemon is down): a snapshot whose manifest
# was stored but whose row still says in_progress, and a suspend that
# stored its snapshot and kept its image but had not yet said so. With the
# store down at the restart (s3rver not running: connection refused) the
# first stays in_progress and completes once the store is back, the second
# is completed from its cached image and the sandbox suspended; it resumes
# with its state. With --store naming an empty prefix (a typo) no row is
# forgotten and an error says why; back on the right store all is as before.
. "$(dirname "$0")/lib.sh"

serve_s3 snapfs-restart
command -v sqlite3 >/dev/null || bail "sqlite3 is missing"

DAEMON_ARGS=(--store "s3://$BUCKET/main")
start_daemon || bail "the daemon mounts on s3://$BUCKET/main"
start_counter_sandbox src || bail "start sandbox src"
start_counter_sandbox sus || bail "start sandbox sus"
kept=$(snapshot_of src)
interrupted=$(snapshot_of src)
check_eq "two snapshots complete" "completed completed" \
	"$(snap_status "$kept") $(snap_status "$interrupted")"
at_suspend=$(counter sus)
ok "sus suspends" wr "$MNT/sandboxes/sus/suspend"
susp=$(suspend_snapshot_of sus)
check_match "its suspend snapshot" '^snap-[0-9a-f]{16}$' "$susp"
check_eq "the suspend snapshot is completed" completed "$(snap_status "$susp")"
ok "the store names itself" s3 cp --quiet "s3://$BUCKET/main/snapfs-store.json" "$T/ident.json"
check_match "and the state records that id" "^$(jq -r .store_id "$T/ident.json")\$" \
	"$(cat "$STATE/store-id" 2>/dev/null || echo none)"
index_before=$(rd "$MNT/snapshots/index" | sort)
stop_daemon

# As a kill -9 leaves it: manifests stored, rows not yet saw it (a suspend names its
# snapshot from its request on).
db=$STATE/registry.db
sqlite3 "$db" "UPDATE snapshots SET state = 'in_progress' WHERE id IN ('$interrupted', '$susp');
	UPDATE sandboxes SET state = 'suspending', restore_snapshot = '$susp' WHERE id = 'sus';" ||
	bail "edit the registry"
# The image of the interrupted snapshot is not kept: only the store can say.
rm -rf "${STATE:?}/cache/$interrupted"
ok "the suspend's image is in the cache" test -s "$STATE/cache/$susp/.manifest.json"

s3rver_gone() { ! kill -0 "$S3_PID" 2>/dev/null; }
kill "$S3_PID"
poll_until 10 s3rver_gone || bail "s3rver ends"
start_daemon || bail "the daemon mounts with the store down"
check_eq "with the store down the completed snapshot stays completed" completed \
	"$(snap_status "$kept")"
check_eq "the interrupted snapshot is not failed: undecided until the store answers" \
	in_progress "$(snap_status "$interrupted")"
check_eq "the suspend snapshot is completed from its cached image" completed \
	"$(snap_status "$susp")"
check_eq "the sandbox is suspended" suspended "$(sb_status sus)"
ok "its image is still cached" test -s "$STATE/cache/$susp/.manifest.json"
backed_off() { grep -q "store: next sync in 2000 ms" "$DAEMON_LOG"; }
ok "the sync thread backs off while the store is down (1 s, then 2 s, ...)" poll_until 30 backed_off

start_s3rver "$S3_PORT" || bail "restart s3rver on port $S3_PORT"
decided() { [ "$(snap_status "$interrupted")" != in_progress ]; }
ok "once the store is back the interrupted snapshot is decided within 60 s" poll_until 60 decided
check_eq "completed: its manifest is there" completed "$(snap_status "$interrupted")"
check_match "it forks" '^sbx-[0-9a-f]{16}$' "$(fork_of "$interrupted")"
ok "sus resumes" wr "$MNT/sandboxes/sus/resume"
check_eq "sus runs" running "$(sb_status sus)"
check_eq "with the counter it had" "$(counter_token "$at_suspend")" "$(counter_token "$(counter sus)")"
kill_sandboxes
index_kept=$(rd "$MNT/snapshots/index" | grep -v " failed " | sort)
stop_daemon

# A typo in --store: an empty prefix of the same bucket.
DAEMON_ARGS=(--store "s3://$BUCKET/mian")
start_daemon || bail "the daemon mounts on the empty prefix"
sleep 4 # a sync pass or more: each must keep the rows
check_eq "on an empty prefix no snapshot row is forgotten" "$index_kept" \
	"$(rd "$MNT/snapshots/index" | grep -v " failed " | sort)"
check_contains "an error says why" "is another store" "$(rd "$MNT/errors")"
check_contains "the log too" "has no snapfs-store.json" "$(cat "$DAEMON_LOG")"
ok "no identity was written into the wrong prefix" \
	test -z "$(s3 ls "s3://$BUCKET/mian/snapfs-store.json" 2>/dev/null)"
stop_daemon

DAEMON_ARGS=(--store "s3://$BUCKET/main")
start_daemon || bail "the daemon mounts on the right store again"
sleep 4
check_eq "back on the right store every row is there" "$index_kept" \
	"$(rd "$MNT/snapshots/index" | grep -v " failed " | sort)"
check_match "the kept snapshot forks" '^sbx-[0-9a-f]{16}$' "$(fork_of "$kept")"
note "before: $(echo "$index_before" | wc -l) rows; after: $(echo "$index_kept" | wc -l)"
kill_sandboxes
stop_daemon
finish
