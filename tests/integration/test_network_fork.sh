#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317 # SC2317: functions called by ok
# A sandbox with network=egress that serves a counter held in memory on a
# published port, snapshotted right after it served and forked twice: each
# fork answers on its own port from the snapshot's counter on, and they
# diverge; suspend and resume keep the port (docs/network.md, "Forks and
# resume"). The namespaces: tests/integration/lib_net.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_net.sh"
start_metadata

# A second user (nobody, through --allow-group) makes sandboxes: the mount point
# must be reachable to it, and nothing else of the test's.
chmod 0711 "$T"
chmod 0700 "$STATE" "$IMAGES"
DAEMON_ARGS=(-o allow_other --allow-group 65534)
setup_images
start_daemon || bail "daemon did not start"

# A snapshot of a network=none sandbox, taken before any egress sandbox ran on
# its image: the first egress start must not change the image's digest
# (runsc makes /etc/resolv.conf's mount point in the image's directory).
make_sandbox plain "$SLEEPER" || bail "cannot start sandbox plain"
plain_snap=$(snapshot_of plain)
check_eq "a snapshot of a sandbox without network" completed "$(snap_wait "$plain_snap")"
ok "terminate plain" wr "$MNT/sandboxes/plain/terminate"

# The counter lives in the entrypoint shell's memory: one connection of
# busybox nc per answer; nc ends its side first once the answer is written (the
# server closes first, as an HTTP/1.0 server does).
COUNTER_SERVER='n=0; while :; do n=$((n + 1)); printf "HTTP/1.0 200 OK\r\n\r\ncount %s\n" "$n" | nc -l -p 80 >/dev/null; done'

# host_port SB: the host port its port 80 is published on.
host_port() { rd "$MNT/sandboxes/$1/ports" | awk '$1 == 80 { split($2, a, ":"); print a[2] }'; }
# count SB: one GET through the published port: the counter it answered.
count() {
	local n
	n=$(in_d curl -s --max-time 5 "http://127.0.0.1:$(host_port "$1")/" | awk '$1 == "count" { print $2 }')
	[ -n "$n" ] && echo "$n"
}
# count_is SB N: the next answer is N (a connection between two nc's is refused: retried).
count_is() {
	local got
	got=$(poll_until_out 20 count "$1") || return 1
	[ "$got" = "$2" ] || { echo "answered $got, not $2"; return 1; }
}
# poll_until_out SECS CMD...: poll_until, printing what CMD printed once it succeeded.
poll_until_out() {
	local deadline=$(($(date +%s) + $1)) out
	shift
	until out=$("$@" 2>/dev/null); do
		[ "$(date +%s)" -ge "$deadline" ] && return 1
		sleep 0.2
	done
	printf '%s\n' "$out"
}

# hold_open PORT OUT: in the background, a client that connects to 127.0.0.1:PORT
# and reads until the end of the connection, writing what it read and then
# "ended" to OUT (at most 60 s).
hold_open() {
	in_d timeout 60 python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
out = open(sys.argv[2], "w")
while True:
    try:
        b = s.recv(4096)
    except OSError:
        b = b""
    if not b:
        break
    out.write(b.decode()); out.flush()
out.write("ended\n")' "$1" "$2" &
	BG_PIDS+=($!)
}
file_has() { grep -q "$2" "$1" 2>/dev/null; }

mkdir "$MNT/sandboxes/ctr"
wr "$MNT/sandboxes/ctr/image" busybox
wr "$MNT/sandboxes/ctr/entrypoint" "$COUNTER_SERVER"
wr "$MNT/sandboxes/ctr/network" egress
wr "$MNT/sandboxes/ctr/ports" 80
ok "an egress sandbox serving a counter starts" wr "$MNT/sandboxes/ctr/start"
ok "it answers 1 on its published port" count_is ctr 1
ok "then 2" count_is ctr 2
ok "then 3" count_is ctr 3
ok "it fetches from the internet" fetch ctr "$WEB"
# A connection left open: the server answered 4 and waits for the client's end.
hold_open "$(host_port ctr)" "$T/held"
ok "a client holds a connection that got 4" poll_until 20 file_has "$T/held" "count 4"
# Right after serving and fetching: the sandbox holds TIME_WAIT endpoints of
# both (its server's, towards the forwarder, and its client's, towards the
# internet) and the one still open. runsc refuses such a save unless the
# sandbox runs with --net-disconnect-ok, which resets them (docs/network.md).
SNAP=$(snapshot_of ctr)
check_match "a snapshot right after it served, fetched and with a connection open" '^snap-' "$SNAP"
check_eq "its error is empty" "" "$(rd "$MNT/sandboxes/ctr/error")"
ok "the snapshot ended the open connection" poll_until 20 file_has "$T/held" ended
check_eq "the snapshot completes" completed "$(snap_wait "$SNAP")"
check_eq "a fork of it can be made here" yes "$(rd "$MNT/snapshots/$SNAP/restorable")"
# Its files without a fork: the hidden restore has no network, whatever the sandbox had.
check_match "the egress sandbox's snapshot's files read without a fork" busybox \
	"$(timeout 120 ls "$MNT/snapshots/$SNAP/root/bin" 2>&1)"
check_eq "the snapshot's error stays empty" "" "$(rd "$MNT/snapshots/$SNAP/error")"
# The server of 4 saw its connection end, in the source and in the image.
# Its next one (5) may end too as the checkpoint resets what the sandbox
# holds (busybox nc gives up on a failed accept): in the source and the image
# alike, so the source's first answer after the snapshot, S, is the forks'.
FORK1=$(fork_of "$SNAP")
ok "a fork runs" poll_until 60 status_is "$FORK1" running
FORK2=$(fork_of "$SNAP")
ok "a second fork runs" poll_until 60 status_is "$FORK2" running
P0=$(host_port ctr) P1=$(host_port "$FORK1") P2=$(host_port "$FORK2")
note "host ports: source $P0, forks $P1 and $P2"
ok "each fork publishes port 80 on a host port of its own" \
	test -n "$P1" -a -n "$P2" -a "$P1" != "$P0" -a "$P2" != "$P0" -a "$P1" != "$P2"
S=$(poll_until_out 20 count ctr)
check_match "the source answers after the snapshot: 5, or 6 where the checkpoint ended 5" '^[56]$' "$S"
S=${S:-0}
ok "the first fork answers from the snapshot's counter: $S" count_is "$FORK1" "$S"
ok "the second fork answers $S" count_is "$FORK2" "$S"
ok "the source goes on: $((S + 1))" count_is ctr $((S + 1))
ok "and $((S + 2))" count_is ctr $((S + 2))
ok "the first fork goes on: $((S + 1))" count_is "$FORK1" $((S + 1))
# Diverged: each counts its own connections.
ok "the source next answers $((S + 3))" count_is ctr $((S + 3))
ok "the first fork $((S + 2))" count_is "$FORK1" $((S + 2))
ok "the second fork $((S + 1))" count_is "$FORK2" $((S + 1))
ok "the source fetches from the internet" fetch ctr "$WEB"
ok "the first fork fetches from the internet" fetch "$FORK1" "$WEB"
ok "the second fork fetches from the internet" fetch "$FORK2" "$WEB"
SNAP2=$(snapshot_of "$FORK1")
check_match "a fork that just fetched and served is snapshotted too" '^snap-' "$SNAP2"
check_eq "and that snapshot completes" completed "$(snap_wait "$SNAP2")"

# --- suspend and resume --------------------------------------------------------
ok "suspend of the source right after it fetched" wr "$MNT/sandboxes/ctr/suspend"
ok "it is suspended" poll_until 60 status_is ctr suspended
not_count() { ! count "$1" >/dev/null; }
ok "while suspended its port answers nothing" not_count ctr
ok "resume" wr "$MNT/sandboxes/ctr/resume"
ok "it runs again" poll_until 60 status_is ctr running
check_eq "the port is published on the same host port" "$P0" "$(host_port ctr)"
R=$(poll_until_out 20 count ctr)
check_match "after resume the published port answers again, from its counter on" \
	"^($((S + 4))|$((S + 5)))\$" "$R"
ok "after resume it fetches from the internet" fetch ctr "$WEB"

# The snapshot from before the first egress start: its image is still the same one.
check_eq "the network=none snapshot from before is still restorable" yes \
	"$(rd "$MNT/snapshots/$plain_snap/restorable")"
PLAIN_FORK=$(fork_of "$plain_snap")
check_match "and forks" '^sbx-[0-9a-f]{16}$' "$PLAIN_FORK"
check_eq "its fork runs" running "$(sb_status "$PLAIN_FORK")"

# --- a root fork of a user's snapshot -------------------------------------------
# A user's `allow 169.254.169.254/32` lies inside a denied range: inert in their
# sandbox. Root's fork of their snapshot runs their code and their rules; the
# rules came from the user, so they stay inert there: commented out, and seen.
nb() { (cd / && timeout -k 5 "$OP_TIMEOUT" setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"); }
nwr() { nb bash -c 'printf "%s\n" "$2" >"$1"' wr "$1" "${2-1}"; }
nwr_read() { nb bash -c 'exec 3<>"$1" && printf "%s\n" "$2" >&3 && cat <&3' wr_read "$1" "${2-1}"; }
mkdir "$MNT/sandboxes/rootmd"
wr "$MNT/sandboxes/rootmd/image" busybox
wr "$MNT/sandboxes/rootmd/entrypoint" "$SLEEPER"
wr "$MNT/sandboxes/rootmd/network" egress
wr "$MNT/sandboxes/rootmd/egress" "allow 169.254.169.254/32"
ok "a root sandbox allowing the stand-in starts" wr "$MNT/sandboxes/rootmd/start"
ok "root's sandbox reaches the stand-in by its own rule" md_fetch rootmd
ok "nobody makes a sandbox" nb mkdir "$MNT/sandboxes/u1"
nwr "$MNT/sandboxes/u1/image" busybox
nwr "$MNT/sandboxes/u1/entrypoint" "$SLEEPER"
nwr "$MNT/sandboxes/u1/network" egress
ok "nobody allows the metadata address" nwr "$MNT/sandboxes/u1/egress" "allow 169.254.169.254/32"
ok "nobody starts it" nwr "$MNT/sandboxes/u1/start"
ok "the user's sandbox runs" poll_until 60 status_is u1 running
USNAP=$(nwr_read "$MNT/sandboxes/u1/snapshot" | head -n 1)
check_match "nobody snapshots it" '^snap-' "$USNAP"
check_eq "the user's snapshot completes" completed "$(snap_wait "$USNAP")"
MDFORK=$(fork_of "$USNAP")
ok "root forks the user's snapshot" poll_until 60 status_is "$MDFORK" running
ok "root's fork of the user's snapshot does not reach the stand-in" no_md "$MDFORK"
check_match "its egress shows the user's rule commented out" \
	"^# inert, not root's: allow 169.254.169.254/32\$" "$(rd "$MNT/sandboxes/$MDFORK/egress")"
ok "the user's own sandbox does not reach it either" no_md u1
ok "root's fork still fetches from the internet" fetch "$MDFORK" "$WEB"

for s in rootmd u1 "$MDFORK"; do
	wr "$MNT/sandboxes/$s/terminate"
	rmdir "$MNT/sandboxes/$s"
done
for s in ctr "$FORK1" "$FORK2" "$PLAIN_FORK" plain; do
	wr "$MNT/sandboxes/$s/terminate"
	rmdir "$MNT/sandboxes/$s"
done
snf_links() { ip -n "$NS_D" -o link show | grep -o ' snf[0-9a-f]\{12\}'; }
no_snf_links() { ! snf_links; }
ok "no interface of snapfs remains after rmdir" poll_until 30 no_snf_links
# ASan's leak check at exit: a leak is a non-zero status.
stop_daemon
finish
