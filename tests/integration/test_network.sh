#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317 # SC2317: functions called from the trap and by ok
# network=none and network=egress (docs/network.md), safely: the daemon runs
# in a network namespace this test makes, beside a second one standing for
# the internet (tests/integration/lib_net.sh says how).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_net.sh"

# The test's DNS: one name, web.snapfs-test, answered with $WEB (A records only), on $WEB:53.
cat >"$T/dns.py" <<'PY'
import socket, struct, sys
name, addr = sys.argv[1].encode(), socket.inet_aton(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[2], 53))
while True:
    q, peer = s.recvfrom(512)
    i, labels = 12, []
    while q[i]:
        labels.append(q[i + 1:i + 1 + q[i]]); i += 1 + q[i]
    qtype = struct.unpack(">H", q[i + 1:i + 3])[0]
    known = b".".join(labels).lower() == name
    hit = known and qtype == 1  # other types of the name: an empty answer, not NXDOMAIN
    head = q[:2] + struct.pack(">HHHHH", 0x8180 if known else 0x8183, 1, int(hit), 0, 0)
    ans = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + addr if hit else b""
    s.sendto(head + q[12:i + 5] + ans, peer)
PY
ip netns exec "$NS_I" python3 "$T/dns.py" web.snapfs-test "$WEB" &
DNS_PID=$!
disown "$DNS_PID"
echo "nameserver $WEB" >"$T/resolv.conf"
DAEMON_ARGS=(--net-resolv "$T/resolv.conf")

setup_images
start_daemon || bail "daemon did not start"

# --- none ----------------------------------------------------------------------
make_sandbox quiet "$SLEEPER" || bail "cannot start sandbox quiet"
check_eq "network is none by default" none "$(rd "$MNT/sandboxes/quiet/network")"
ok "network=none reaches nothing" not_fetch quiet "$WEB"

# --- egress --------------------------------------------------------------------
mkdir "$MNT/sandboxes/out"
wr "$MNT/sandboxes/out/image" busybox
wr "$MNT/sandboxes/out/entrypoint" "$SLEEPER"
ok "network takes egress while created" wr "$MNT/sandboxes/out/network" egress
expect_errno EINVAL "network refuses another word" wr "$MNT/sandboxes/out/network" everything
expect_refusal EINVAL "egress refuses a bad line" out wr "$MNT/sandboxes/out/egress" "allow 10.0.0.0/33"
check_match "the sentence names the line" "egress line 1" "$(rd "$MNT/sandboxes/out/error")"
# A network that cannot be set up fails the start with a sentence and leaves nothing,
# and an interface snapfs did not make is never removed: the test takes the
# veth's name first (a veth pair of its own in its namespace).
mkdir "$MNT/sandboxes/clash"
wr "$MNT/sandboxes/clash/image" busybox
wr "$MNT/sandboxes/clash/entrypoint" "$SLEEPER"
wr "$MNT/sandboxes/clash/network" egress
CLASH_IF=snf$(runtime_id clash | sed 's/^snapfs-//')
CLASH_IF=${CLASH_IF:0:15}
ip -n "$NS_D" link add "$CLASH_IF" type veth peer name sftc1 || bail "cannot add the test's clashing link"
expect_errno EIO "a start whose veth name is taken fails" wr "$MNT/sandboxes/clash/start"
check_match "its error says what failed" 'network.*veth|veth.*taken' "$(rd "$MNT/sandboxes/clash/error")"
ok "the link snapfs did not make is still there" ip -n "$NS_D" link show "$CLASH_IF"
check_eq "no record, no namespace file is left" "" "$(find "$STATE/net" "$STATE/netns" -mindepth 1)"
check_eq "no chain is left" "" "$(in_d nft list table inet snapfs 2>/dev/null | grep 'chain sb_' || true)"
ip -n "$NS_D" link del "$CLASH_IF"
ok "start with egress" wr "$MNT/sandboxes/out/start"
expect_errno EBUSY "network is fixed once started" wr "$MNT/sandboxes/out/network" none
RID=$(runtime_id out)
IFN=snf${RID#snapfs-}
IFN=${IFN:0:15}
ok "the host end $IFN is in the daemon's namespace" ip -n "$NS_D" link show "$IFN"
ok "the namespace file is under the state dir" test -e "$STATE/netns/$RID"
ok "egress fetches a page by address" fetch out "$WEB"
check_eq "info.json says egress" egress "$(jget "$MNT/sandboxes/out/info.json" .network.mode)"
check_match "info.json gives its address from the pool" '^10\.213\.' \
	"$(jget "$MNT/sandboxes/out/info.json" .network.address)"
check_eq "info.json of a sandbox without network" none/null \
	"$(jget "$MNT/sandboxes/quiet/info.json" '.network.mode + "/" + (.network.address | tostring)')"
# fetch moved a page in: both counters of its veth are past the page's size.
IN=$(rd "$MNT/metrics" | awk -v s="snapfs_sandbox_network_in_bytes_total{sandbox=\"out\"}" '$1 == s { print $2 }')
OUT=$(rd "$MNT/metrics" | awk -v s="snapfs_sandbox_network_out_bytes_total{sandbox=\"out\"}" '$1 == s { print $2 }')
ok "metrics count the bytes in ($IN) and out ($OUT)" test "${IN:-0}" -gt 100 -a "${OUT:-0}" -gt 50
check_eq "the sandbox's /etc/resolv.conf is --net-resolv's" "nameserver $WEB" \
	"$(sb_run out 'cat /etc/resolv.conf')"
# busybox's nslookup has its own resolver (its libc's would need NSS, absent in a static busybox).
# by_name SB: the test's name resolves through the sandbox's resolv.conf, and the page
# comes from the address it gave.
by_name() {
	local a
	a=$(sb_run "$1" 'nslookup web.snapfs-test' | awk '/^Address/ { a = $NF } END { print a }')
	[ "$a" = "$WEB" ] && fetch "$1" "$a"
}
ok "egress fetches a page by a name the test's DNS answers" by_name out

# Default denies: the daemon namespace's own address, another sandbox.
ok "the daemon namespace's address is denied" not_reach out "$NET_X.1"
# An address the host gets after the sandbox started (a DHCP change, a VPN) is
# the host's too: denied, though no rule was written since, with a server on it.
LATE=10.251.$((RANDOM % 250)).1
in_d ip addr add "$LATE/32" dev lo
ip netns exec "$NS_D" busybox httpd -f -p "$LATE:80" -h "$T/www" &
LATE_PID=$!
disown "$LATE_PID"
late_up() { in_d curl -sf --max-time 3 "http://$LATE/" >/dev/null; }
ok "a server listens on the host's new address" poll_until 10 late_up
ok "the host's address added after the start is denied" not_reach out "$LATE"
mkdir "$MNT/sandboxes/other"
wr "$MNT/sandboxes/other/image" busybox
wr "$MNT/sandboxes/other/entrypoint" 'httpd -p 80 -h /etc; while :; do sleep 1; done'
wr "$MNT/sandboxes/other/network" egress
ok "a second egress sandbox starts" wr "$MNT/sandboxes/other/start"
OTHER_RID=$(runtime_id other)
# Its address: the second /30's sandbox end; read what the ruleset says instead of guessing.
OTHER_IF=snf${OTHER_RID#snapfs-}
OTHER_ADDR=$(ip -n "$NS_D" -4 -o addr show dev "${OTHER_IF:0:15}" 2>/dev/null |
	awk '{ split($4, a, "/"); split(a[1], o, "."); print o[1] "." o[2] "." o[3] "." o[4] + 1 }')
check_match "the other sandbox has an address" '^10\.' "$OTHER_ADDR"
ok "another sandbox is denied" not_reach out "$OTHER_ADDR"

# A published port of an egress sandbox: the httpd its entrypoint started answers
# on 127.0.0.1 of the daemon's namespace, through the daemon's forwarder. A
# sandbox of its own: runsc 20240729 cannot checkpoint one that held a TCP
# connection a moment ago (TIME_WAIT), and `other` is suspended below.
mkdir "$MNT/sandboxes/web"
wr "$MNT/sandboxes/web/image" busybox
wr "$MNT/sandboxes/web/entrypoint" 'httpd -p 80 -h /etc; while :; do sleep 1; done'
wr "$MNT/sandboxes/web/network" egress
ok "an egress sandbox serving port 80 starts" wr "$MNT/sandboxes/web/start"
ok "publish web's port 80" wr "$MNT/sandboxes/web/ports" 80
HOSTPORT=$(rd "$MNT/sandboxes/web/ports" | awk '$1 == 80 { split($2, a, ":"); print a[2] }')
check_match "ports lists it on 127.0.0.1" '^[0-9]+$' "$HOSTPORT"
served() { in_d curl -sf --max-time 5 "http://127.0.0.1:$HOSTPORT/passwd" | grep -q '^root:'; }
ok "the sandbox's httpd answers on the published port" poll_until 20 served
check_match "info.json says it is reachable" true \
	"$(jget "$MNT/sandboxes/web/info.json" '.ports[0].reachable')"
ok "close 80" wr "$MNT/sandboxes/web/ports" "close 80"
not_served() { ! served; }
ok "after close the port answers no more" not_served
ok "terminate web" wr "$MNT/sandboxes/web/terminate"
ok "web is terminated" poll_until 30 status_is web terminated

# A rule written while it runs takes effect, and its removal too.
ok "deny 0.0.0.0/0 is taken while running" wr "$MNT/sandboxes/out/egress" "deny 0.0.0.0/0"
ok "after deny 0.0.0.0/0 it fetches nothing" not_fetch out "$WEB"
ok "an empty egress allows again" wr "$MNT/sandboxes/out/egress" ""
ok "after the rule is gone it fetches again" fetch out "$WEB"

# --- fork ----------------------------------------------------------------------
# runsc 20240729 refuses to save a TCP endpoint that is connected (TIME_WAIT too):
# snapshot a sandbox before it opened any connection (docs/network.md).
mkdir "$MNT/sandboxes/src"
wr "$MNT/sandboxes/src/image" busybox
wr "$MNT/sandboxes/src/entrypoint" "$SLEEPER"
wr "$MNT/sandboxes/src/network" egress
ok "an egress sandbox to fork starts" wr "$MNT/sandboxes/src/start"
ok "a rule for the source" wr "$MNT/sandboxes/src/egress" "deny 192.0.2.0/24"
SNAP=$(snapshot_of src)
check_match "a snapshot of the egress sandbox" '^snap-' "$SNAP"
FORK=$(fork_of "$SNAP")
ok "the fork runs" poll_until 60 status_is "$FORK" running
check_eq "the fork keeps network=egress" egress "$(rd "$MNT/sandboxes/$FORK/network")"
check_eq "the fork keeps the source's egress rules" "deny 192.0.2.0/24" "$(rd "$MNT/sandboxes/$FORK/egress")"
check_match "and its chain has them" "192.0.2.0/24 drop" \
	"$(in_d nft list chain inet snapfs "sb_snf$(runtime_id "$FORK" | cut -c8-19)")"
ok "the fork fetches a page" fetch "$FORK" "$WEB"
ok "the source still fetches" fetch src "$WEB"
FORK2=$(fork_of "$SNAP")
ok "a second fork of the same snapshot runs beside the first" poll_until 60 status_is "$FORK2" running
ok "the second fork fetches a page" fetch "$FORK2" "$WEB"
# sb_addr SB: the IPv4 address the sandbox itself sees on its interface.
sb_addr() { sb_run "$1" 'ip -4 -o addr show dev snfs0' | awk '{ print $4 }'; }
A_SRC=$(sb_addr src) A_F1=$(sb_addr "$FORK") A_F2=$(sb_addr "$FORK2")
note "addresses: source $A_SRC, forks $A_F1 and $A_F2"
ok "each fork has an address of its own (a restore need not keep the source's)" \
	test -n "$A_SRC" -a -n "$A_F1" -a "$A_SRC" != "$A_F1" -a "$A_F1" != "$A_F2"
check_eq "a fork's resolv.conf survives the restore" "nameserver $WEB" \
	"$(sb_run "$FORK" 'cat /etc/resolv.conf')"
ok "a fork resolves the test's name too" by_name "$FORK"
check_eq "one host veth per running egress sandbox (out, other, src, two forks)" 5 \
	"$(ip -n "$NS_D" -o link show | grep -c ' snf[0-9a-f]\{12\}')"

# --- suspend and resume ------------------------------------------------------
# `other` never opened a connection, so runsc can save it (see the fork above).
ok "suspend of an egress sandbox" wr "$MNT/sandboxes/other/suspend"
ok "it is suspended" poll_until 60 status_is other suspended
check_eq "suspend released its veth" "" "$(ip -n "$NS_D" -o link show | grep -o " ${OTHER_IF:0:15}" || true)"
ok "resume of it" wr "$MNT/sandboxes/other/resume"
ok "it runs again" poll_until 60 status_is other running
ok "after resume it fetches a page" fetch other "$WEB"

# --- a spec -------------------------------------------------------------------
new_sandbox() {
	local id
	exec 3<>"$MNT/sandboxes/new" || return 1
	printf '%s\n\n' "$1" >&3 && read -r id <&3
	exec 3>&-
	printf '%s\n' "$id"
}
SPEC=$(new_sandbox "$(printf 'image=busybox\nentrypoint=%s\nnetwork=egress\negress=deny 0.0.0.0/0' "$SLEEPER")")
check_match "sandboxes/new takes network= and egress=" '^sbx-' "$SPEC"
check_eq "its network is egress" egress "$(rd "$MNT/sandboxes/$SPEC/network")"
ok "its spec's rule holds: it fetches nothing" not_fetch "$SPEC" "$WEB"

# --- release -------------------------------------------------------------------
for s in clash quiet out other web src ${SPEC:+"$SPEC"} ${FORK:+"$FORK"} ${FORK2:+"$FORK2"}; do
	wr "$MNT/sandboxes/$s/terminate"
	rmdir "$MNT/sandboxes/$s"
done
check_eq "no interface of snapfs remains after rmdir" "" \
	"$(ip -n "$NS_D" -o link show | grep -o ' snf[0-9a-f]\{12\}' || true)"
check_eq "no namespace file remains" "" "$(ls "$STATE/netns")"
check_eq "nothing of snapfs remains in the ruleset" "" "$(in_d nft list ruleset | grep snapfs || true)"

# --- SIGKILL and restart -------------------------------------------------------
mkdir "$MNT/sandboxes/left"
wr "$MNT/sandboxes/left/image" busybox
wr "$MNT/sandboxes/left/entrypoint" "$SLEEPER"
wr "$MNT/sandboxes/left/network" egress
ok "an egress sandbox to leave behind" wr "$MNT/sandboxes/left/start"
check_match "its rules are in the ruleset" "table inet snapfs" "$(in_d nft list ruleset)"
LEFT=$(runtime_id left)
check_eq "its veth is there before the kill" 1 "$(ip -n "$NS_D" -o link show | grep -c ' snf[0-9a-f]\{12\}')"
kill_daemon() {
	kill -KILL "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=""
	unmount_mnt
}
# A sandbox that outlives its daemon keeps its network.
kill_daemon
start_daemon || bail "daemon did not restart"
check_eq "a running egress sandbox stays running across a restart" running "$(sb_status left)"
ok "and it still fetches a page" fetch left "$WEB"
check_eq "and its veth stays" 1 "$(ip -n "$NS_D" -o link show | grep -c ' snf[0-9a-f]\{12\}')"
kill_daemon
# What a killed daemon left: its container is gone too (a host reboot, an operator's runsc delete).
runsc --root "$RUNSC_ROOT" kill "$LEFT" 9 >/dev/null 2>&1
runsc --root "$RUNSC_ROOT" delete -force "$LEFT" >/dev/null 2>&1
start_daemon || bail "daemon did not restart"
check_eq "start-up removed the interface a killed daemon left" "" \
	"$(ip -n "$NS_D" -o link show | grep -o ' snf[0-9a-f]\{12\}' || true)"
check_eq "start-up removed its namespace file" "" "$(ls "$STATE/netns")"
check_eq "start-up removed its rules, table and all" "" "$(in_d nft list ruleset | grep snapfs || true)"
# ASan's leak check at exit: a leak is a non-zero status.
stop_daemon
finish
