#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317
# snapshots/<id>/root/'s views (docs/design.md, "snapshots/<id>/root/"):
# bounded per owner of the snapshot and in all, the least recently used one
# not in use evicted past a bound, EAGAIN when none may go; the view of a
# snapshot another host deleted goes at once; a view whose delete failed
# keeps its directory, so the next start-up deletes its container; a failed
# view is forgotten and not deleted again at a clean stop, which is quick.
. "$(dirname "$0")/lib.sh"

# Small bounds: 2 views of one owner's snapshots, 3 in all (60 s idle as shipped).
export SNAPFS_SNAPSHOT_VIEW_MAX_PER_OWNER=2 SNAPFS_SNAPSHOT_VIEW_MAX=3

# runsc, but a delete fails while $T/fail-delete exists; each other delete
# logs its container to $T/deletes.
REAL_RUNSC=$(command -v runsc) || bail "runsc is needed"
cat >"$T/runsc" <<EOF
#!/bin/sh
sub="" skip=0 last=""
for a in "\$@"; do
	last=\$a
	if [ "\$skip" = 1 ]; then skip=0; continue; fi
	case \$a in --root) skip=1 ;; -*) ;; *) [ -n "\$sub" ] || sub=\$a ;; esac
done
if [ "\$sub" = delete ]; then
	[ -e "$T/fail-delete" ] && { echo "delete refused by the test" >&2; exit 1; }
	echo "\$last" >>"$T/deletes"
fi
exec "$REAL_RUNSC" "\$@"
EOF
chmod 0755 "$T/runsc"

# nobody (through --allow-group) owns some snapshots, root the others.
chmod 0711 "$T"
chmod 0700 "$STATE" "$IMAGES"
DAEMON_ARGS=(-o allow_other --allow-group 65534 --runsc "$T/runsc")
start_daemon || bail "the daemon mounts"

nb() { (cd / && timeout -k 5 "$OP_TIMEOUT" setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"); }
nwr() { nb bash -c 'printf "%s\n" "$2" >"$1"' wr "$1" "${2-1}"; }
nwr_read() { nb bash -c 'exec 3<>"$1" && printf "%s\n" "$2" >&3 && cat <&3' wr_read "$1" "${2-1}"; }
# view_dirs: the views' directories, one a line.
view_dirs() { find "$STATE/sandboxes" -mindepth 1 -maxdepth 1 -name '.view-*' | sort; }
n_views() { view_dirs | wc -l; }
view_cid() { cat "$STATE/sandboxes/.view-$1/container" 2>/dev/null; }
container_gone() { [ -z "$(runsc_state_of "$1")" ]; }
# f SNAP: the file every snapshot here has.
f() { printf '%s\n' "$MNT/snapshots/$1/root/tmp/f"; }

ENTRY='echo mine >/tmp/f; while :; do sleep 1; done'
ok "nobody makes a sandbox" nb mkdir "$MNT/sandboxes/u1"
nwr "$MNT/sandboxes/u1/image" busybox
nwr "$MNT/sandboxes/u1/entrypoint" "$ENTRY"
ok "nobody starts it" nwr "$MNT/sandboxes/u1/start"
ok "u1 runs" poll_until 60 status_is u1 running
ok "root's sandbox starts" make_sandbox r1 "$ENTRY"
N=() R=()
for i in 1 2 3; do
	s=$(nwr_read "$MNT/sandboxes/u1/snapshot" | head -n 1)
	check_eq "nobody's snapshot $i completes" completed "$(snap_wait "$s")"
	N+=("$s")
	s=$(snapshot_of r1)
	check_eq "root's snapshot $i completes" completed "$(snap_wait "$s")"
	R+=("$s")
done

# --- the bound per owner ---------------------------------------------------------
# A view used in the last 5 s is in use (docs/design.md): reads follow at once.
check_eq "nobody reads N0's file" mine "$(nb cat "$(f "${N[0]}")")"
check_eq "nobody reads N1's file" mine "$(nb cat "$(f "${N[1]}")")"
expect_errno EAGAIN "a 3rd view of nobody's snapshots while 2 are in use" nb cat "$(f "${N[2]}")"
check_contains "its snapshot's error says why" "views of uid 65534" \
	"$(rd "$MNT/snapshots/${N[2]}/error")"
check_eq "nobody's reads made 2 views, not 3" 2 "$(n_views)"
ok "read N1 again: N0 is the least recently used" nb cat "$(f "${N[1]}")"
c0=$(view_cid "${N[0]}")
c1=$(view_cid "${N[1]}")
sleep 6 # past VIEW_BUSY_MS (5 s): neither is in use
check_eq "once they are not in use, a 3rd view of nobody's starts" mine \
	"$(nb cat "$(f "${N[2]}")")"
ok "it evicted the least recently used of nobody's (N0)" poll_until 10 container_gone "$c0"
ok "and kept N1's" test -n "$(runsc_state_of "$c1")"
check_eq "its error is cleared once a view came up" "" "$(rd "$MNT/snapshots/${N[2]}/error")"
check_eq "2 views of nobody's are up" 2 "$(n_views)"

# --- the bound in all ------------------------------------------------------------
check_eq "root's view R0 starts: 3 in all" mine "$(rd "$(f "${R[0]}")")"
check_eq "root's view R1 starts past 3 in all" mine "$(rd "$(f "${R[1]}")")"
ok "it evicted the least recently used not in use of anyone's (N1)" \
	poll_until 10 container_gone "$c1"
check_eq "3 views are up" 3 "$(n_views)"
ok "all three are read again: all in use" \
	sh -c 'cat "$1" "$2" "$3" >/dev/null' sh "$(f "${N[2]}")" "$(f "${R[0]}")" "$(f "${R[1]}")"
expect_errno EAGAIN "a 4th view while 3 are in use" nb cat "$(f "${N[0]}")"
check_contains "its snapshot's error says why" "at most 3" "$(rd "$MNT/snapshots/${N[0]}/error")"
expect_errno EAGAIN "a 3rd view of root's while its 2 are in use" cat "$(f "${R[2]}")"
check_eq "still 3 views" 3 "$(n_views)"

# --- a snapshot another host deleted: its view goes at once ----------------------
# As ops_sync.c sees a delete elsewhere: its manifest gone, a tombstone written.
c=$(view_cid "${R[0]}")
ok "R0's view is up" test -n "$(runsc_state_of "$c")"
mkdir -p "$STATE/store/tombstones" "$T/manifests"
manifest=$(find "$STATE/store" -name "${R[0]}.json" -not -path '*/tombstones/*')
ok "R0's manifest is in the store" test -f "$manifest"
mv "$manifest" "$T/manifests/"
printf '{"id": "%s", "deleted_at": %s}\n' "${R[0]}" "$(now_ms)" \
	>"$STATE/store/tombstones/${R[0]}.json"
ok "the sync pass forgets R0" poll_until 30 test ! -e "$MNT/snapshots/${R[0]}"
ok "R0's view is deleted without waiting for its idle time (60 s)" \
	poll_until 20 container_gone "$c"
ok "and its directory" poll_until 20 test ! -e "$STATE/sandboxes/.view-${R[0]}"

# --- a failed view: forgotten after its retry time, never deleted twice -----------
# A snapshot R3 no read asked for yet fails: the image its bundle names is
# away (as test_snapshot_root.sh). Root has one view (R1), 2 are up: R3's
# start evicts none.
R3=$(snapshot_of r1)
check_eq "root's snapshot R3 completes" completed "$(snap_wait "$R3")"
mv "$IMAGES/busybox" "$IMAGES/busybox.away"
mv "$IMAGES/.tree" "$IMAGES/.tree.away"
expect_errno EIO "a view of R3 whose image is away" cat "$(f "$R3")"
mv "$IMAGES/busybox.away" "$IMAGES/busybox"
mv "$IMAGES/.tree.away" "$IMAGES/.tree"
ok "the failed view is forgotten after its retry time (10 s)" \
	poll_until 40 grep -q "forgot the failed view of snapshot $R3" "$DAEMON_LOG"

# --- a view whose delete fails keeps its directory ---------------------------------
check_eq "R1 reads (its view up, whatever the time)" mine "$(rd "$(f "${R[1]}")")"
c=$(view_cid "${R[1]}")
ok "R1's view is up" test -n "$(runsc_state_of "$c")"
touch "$T/fail-delete"
ok "delete R1 while runsc delete fails" wr "$MNT/snapshots/${R[1]}/delete"
ok "R1 is gone" poll_until 60 test ! -e "$MNT/snapshots/${R[1]}"
ok "its view's directory stays: it names the container" \
	test -n "$c" -a "$(view_cid "${R[1]}")" = "$c"
rm -f "$T/fail-delete"

# --- a clean stop with a view up -----------------------------------------------
check_eq "N2 reads (its view up, whatever the time)" mine "$(nb cat "$(f "${N[2]}")")"
cn=$(view_cid "${N[2]}")
ok "N2's view is up" test -n "$(runsc_state_of "$cn")"
t0=$(date +%s)
unmount_mnt
wait_daemon_exit 60
check_eq "a clean stop with views up exits 0" 0 "$?"
took=$(($(date +%s) - t0))
ok "within 20 s (took $took s)" test "$took" -le 20
ok "the stop deleted N2's view" container_gone "$cn"
check_eq "no container was deleted twice (a failed view's at the stop)" "" \
	"$(sort "$T/deletes" | uniq -d)"
ok "the daemon starts again" start_daemon
ok "start-up deleted the container whose delete had failed" container_gone "$c"
ok "and its directory" test ! -e "$STATE/sandboxes/.view-${R[1]}"
check_eq "no view directory is left" "" "$(view_dirs)"

finish
