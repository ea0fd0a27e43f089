#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317 # SC2317: functions called by ok
# snapshots/<id>/root/ of a network=egress sandbox's snapshot (issue 25, item
# 4): its files read through a view that has no way out. The view runs with
# runsc --network=none: the host side of its sandbox is an empty namespace,
# inside there is a loopback alone, and snapfs makes no namespace, veth,
# record or nft chain for it, at its start, its idle teardown, a kill -9 and
# restart, or a snapshot delete (docs/design.md, "snapshots/<id>/root/").
# A view whose restore fails says runsc's own line in the snapshot's error.
# The namespaces: tests/integration/lib_net.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_net.sh"

# The idle time of a view, short here (docs/design.md: 60 s otherwise).
export SNAPFS_SNAPSHOT_VIEW_IDLE=5

# runsc, but a restore fails with a line of its own while $T/fail-restore exists.
REAL_RUNSC=$(command -v runsc) || bail "runsc is missing"
cat >"$T/runsc" <<EOF
#!/bin/sh
for a in "\$@"; do
	if [ "\$a" = restore ] && [ -e "$T/fail-restore" ]; then
		echo "injected: this restore fails on purpose" >&2
		exit 128
	fi
done
exec "$REAL_RUNSC" "\$@"
EOF
chmod 0755 "$T/runsc"
DAEMON_ARGS=(--runsc "$T/runsc")
start_daemon || bail "daemon did not start"

# What snapfs has made for networks, from the host side: its interfaces in the
# daemon's namespace, its records and namespaces in the state directory, its
# sandboxes' chains. One line each, sorted.
net_made() {
	{
		in_d ip -o link show | grep -o ' snf[0-9a-f]\{12\}'
		find "$STATE/net" "$STATE/netns" -mindepth 1 -maxdepth 1 -printf '%P in %h\n' 2>/dev/null
		in_d nft list table inet snapfs 2>/dev/null | grep -o 'chain sb_[a-z0-9]*'
	} | sort
}
view_cid() { cat "$STATE/sandboxes/.view-$1/container" 2>/dev/null; }
container_gone() { [ -z "$(runsc_state_of "$1")" ]; }
no_views() { [ -z "$(find "$STATE/sandboxes" -mindepth 1 -maxdepth 1 -name '.view-*')" ]; }
# view_sh CID CMDLINE: a shell command run in the view's container by the test
# itself (runsc exec: no one else can), to look at its network from inside.
# Never without one: runsc takes an empty id as a prefix of every container.
view_sh() { [ -n "$1" ] && timeout 60 runsc --root "$RUNSC_ROOT" exec "$1" sh -c "$2"; }
view_fetches() { view_sh "$1" "$FETCH $WEB 80" 2>/dev/null | grep -q "hello from the internet"; }
no_view_fetch() { [ -n "$1" ] && ! view_fetches "$1"; }
# host_links PID: the interfaces of the network namespace process PID is in.
host_links() { nsenter --net="/proc/$1/ns/net" ip -o link show | awk '{ print $2 }' | tr -d ':' | tr '\n' ' '; }

mkdir "$MNT/sandboxes/e"
wr "$MNT/sandboxes/e/image" busybox
wr "$MNT/sandboxes/e/entrypoint" 'mkdir -p /work; echo before >/work/f; while :; do sleep 1; done'
wr "$MNT/sandboxes/e/network" egress
ok "an egress sandbox starts" wr "$MNT/sandboxes/e/start"
ok "it fetches from the internet" fetch e "$WEB"
ok "it wrote its file" poll_until 30 sb_run e 'cat /work/f'
SNAP=$(snapshot_of e)
check_eq "its snapshot completes" completed "$(snap_wait "$SNAP")"
ok "it changes its file after the snapshot" sb_run e 'echo after >/work/f'
made_before=$(net_made)
check_match "the sandbox's own network is there" 'chain sb_snf' "$made_before"

R=$MNT/snapshots/$SNAP/root
check_match "the snapshot's files read without a fork" busybox "$(timeout 120 ls "$R/bin" 2>&1)"
check_eq "its file as it was at the snapshot" before "$(rd "$R/work/f")"
check_eq "the snapshot's error stays empty" "" "$(rd "$MNT/snapshots/$SNAP/error")"
check_eq "the view's /etc/resolv.conf reads, as in the sandbox" \
	"$(sb_run e 'cat /etc/resolv.conf')" "$(rd "$R/etc/resolv.conf")"
expect_errno EROFS "a write into it is refused" wr "$R/work/f" x

cid=$(view_cid "$SNAP")
ok "the view's container runs" test -n "$(runsc_state_of "$cid")"
pid=$(timeout 30 runsc --root "$RUNSC_ROOT" state "$cid" | jq -r .pid)
check_eq "host side: the view's sandbox is in a namespace of a loopback alone" "lo " "$(host_links "$pid")"
check_eq "snapfs made no interface, record, namespace or chain for it" "$made_before" "$(net_made)"
check_eq "inside: the view has no route (an empty route table)" 1 \
	"$(view_sh "$cid" 'cat /proc/net/route' | wc -l)"
check_eq "inside: its one interface is the loopback" lo \
	"$(view_sh "$cid" 'ls /sys/class/net 2>/dev/null || sed -n "3,\$ s/:.*//p" /proc/net/dev' | tr -d ' ')"
ok "inside: it cannot fetch from the internet" no_view_fetch "$cid"
ok "the sandbox itself still fetches" fetch e "$WEB"

# Idle: the view goes, and nothing of a network stays.
ok "after the idle time the view's container is gone" poll_until 60 container_gone "$cid"
ok "and its directory" poll_until 30 no_views
check_eq "nothing of a network is left or gone: the sandbox's alone" "$made_before" "$(net_made)"

# kill -9 with a view up: the restart removes it, and nothing of a network is left behind.
check_eq "a read after the idle time restores the view again" before "$(rd "$R/work/f")"
cid=$(view_cid "$SNAP")
ok "the view is up again" test -n "$(runsc_state_of "$cid")"
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=""
unmount_mnt
start_daemon || bail "the daemon does not start again"
ok "start-up deleted the view's container" container_gone "$cid"
ok "and its directory" no_views
check_eq "nothing of a network is left but the sandbox's" "$made_before" "$(net_made)"

# A delete with the view up takes it down; nothing of a network stays.
check_eq "the files read after the restart" before "$(rd "$R/work/f")"
cid=$(view_cid "$SNAP")
ok "delete the snapshot" wr "$MNT/snapshots/$SNAP/delete"
ok "it is gone" poll_until 60 test ! -e "$MNT/snapshots/$SNAP"
ok "its view's container is gone" container_gone "$cid"
ok "its view's directory is gone" no_views
check_eq "nothing of a network is left but the sandbox's" "$made_before" "$(net_made)"

# A restore that fails: the error quotes runsc.
SNAP2=$(snapshot_of e)
check_eq "a second snapshot completes" completed "$(snap_wait "$SNAP2")"
touch "$T/fail-restore"
expect_errno EIO "a read while runsc's restore fails" cat "$MNT/snapshots/$SNAP2/root/work/f"
check_contains "the snapshot's error quotes runsc's own line" \
	"runsc restore failed: injected: this restore fails on purpose" \
	"$(rd "$MNT/snapshots/$SNAP2/error")"
rm -f "$T/fail-restore"
ok "a failed view leaves no directory" no_views
check_eq "nor anything of a network" "$made_before" "$(net_made)"
ok "its files read once the retry time passed" \
	poll_until 30 grep -qx after "$MNT/snapshots/$SNAP2/root/work/f"

wr "$MNT/sandboxes/e/terminate"
rmdir "$MNT/sandboxes/e"
# A clean stop with a view up deletes it at once (it waited out runsc delete's 60 s).
ok "a view is up at the stop" test -n "$(runsc_state_of "$(view_cid "$SNAP2")")"
stop_daemon
finish
