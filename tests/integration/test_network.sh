#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317 # SC2317: functions called from the trap and by ok
# network=none and network=egress (docs/network.md), safely: the daemon runs
# in a network namespace this test makes (snapfs-t-*), beside a second one
# standing for the internet (a busybox httpd on 10.250.X.2). Nothing here
# touches the host's own namespace: every ip/nft command names a namespace
# of the test's, and both are deleted on every path out. The namespaces,
# the internet's httpd and the fetch helpers: tests/integration/lib_net.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_net.sh"
SINK_PID=""
D2_PID=""

net_cleanup_extra() {
	[ -n "$SINK_PID" ] && kill -KILL "$SINK_PID" 2>/dev/null
	if [ -n "$D2_PID" ]; then
		fusermount3 -uz "$T/mnt2" 2>/dev/null
		kill -KILL "$D2_PID" 2>/dev/null
	fi
	# The second daemon's: what it may have started where it should not have.
	if [ -d "$T/state2/runsc" ]; then
		for f in $(timeout 30 runsc --root "$T/state2/runsc" list --quiet 2>/dev/null); do
			timeout 30 runsc --root "$T/state2/runsc" kill "$f" KILL >/dev/null 2>&1
			timeout 60 runsc --root "$T/state2/runsc" delete -force "$f" >/dev/null 2>&1
		done
	fi
	for f in "$T/state2"/netns/*; do
		[ -e "$f" ] && umount -l "$f" 2>/dev/null
	done
	return 0
}

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

# The test's sink on $WEB: TCP 7000 echoes each line back and logs it to
# pings.log; UDP 9999 logs each datagram to udp.log.
cat >"$T/sink.py" <<'PY'
import socket, sys, threading
addr, tcp_log, udp_log = sys.argv[1], open(sys.argv[2], "a", buffering=1), open(sys.argv[3], "a", buffering=1)
def serve(c):
    for line in c.makefile("rb"):
        tcp_log.write(line.decode(errors="replace"))
        c.sendall(line)
def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((addr, 9999))
    while True:
        data, peer = u.recvfrom(512)
        text = "".join(ch if ch.isprintable() else " " for ch in data.decode(errors="replace"))
        udp_log.write("%s %s\n" % (peer[0], text))
threading.Thread(target=udp, daemon=True).start()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, 7000))
s.listen(8)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
: >"$T/pings.log"
: >"$T/udp.log"
ip netns exec "$NS_I" python3 "$T/sink.py" "$WEB" "$T/pings.log" "$T/udp.log" &
SINK_PID=$!
disown "$SINK_PID"
DAEMON_ARGS=(--net-resolv "$T/resolv.conf")

setup_images
start_daemon || bail "daemon did not start"

# egress_sandbox NAME ENTRYPOINT: a created sandbox with network=egress.
egress_sandbox() {
	mkdir "$MNT/sandboxes/$1"
	wr "$MNT/sandboxes/$1/image" busybox
	wr "$MNT/sandboxes/$1/entrypoint" "$2"
	wr "$MNT/sandboxes/$1/network" egress
}
# veth_of NAME: the host end's name of the sandbox's current container.
veth_of() {
	local v
	v=snf$(runtime_id "$1" | sed 's/^snapfs-//')
	printf '%s\n' "${v:0:15}"
}

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
egress_sandbox clash "$SLEEPER"
CLASH_IF=$(veth_of clash)
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
RX=$(rd "$MNT/sandboxes/out/usage" | awk '$1 == "rx_bytes" { print $2 }')
TX=$(rd "$MNT/sandboxes/out/usage" | awk '$1 == "tx_bytes" { print $2 }')
ok "usage shows its veth's rx_bytes ($RX) and tx_bytes ($TX)" test "${RX:-0}" -gt 100 -a "${TX:-0}" -gt 50
check_eq "the sandbox's /etc/resolv.conf is --net-resolv's" "nameserver $WEB" \
	"$(sb_run out 'cat /etc/resolv.conf')"
# Every process resolves, root or not: a server that drops to nobody, apt's _apt.
# busybox's start-stop-daemon -c needs the user in /etc/passwd (the image has
# root alone; the sandbox's writes stay in its memory overlay); -n names no
# process, so the running busybox sleeper is not taken for the one to start.
# One line: an exec's command is the line written.
AS_NOBODY="{ grep -q '^nobody:' /etc/passwd || echo 'nobody:x:65534:65534:nobody:/:/bin/sh' >>/etc/passwd; }; \
{ grep -q '^nogroup:' /etc/group || echo 'nogroup:x:65534:' >>/etc/group; }; \
start-stop-daemon -S -c nobody:nogroup -n snapfs-none -x /bin/busybox --"
check_eq "a non-root process of the sandbox (uid 65534) reads /etc/resolv.conf" \
	"$(printf '65534\nnameserver %s' "$WEB")" \
	"$(sb_run out "$AS_NOBODY sh -c 'id -u; cat /etc/resolv.conf'" 2>&1)"
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

# Only the sandbox's own source address leaves. The sandbox's namespace
# (snapfs's, under $STATE/netns) gets a second address the test adds on its
# kernel side, and sends from it: the sink never hears it, while a datagram
# from the sandbox itself, by the same way out, is heard.
OUT_ADDR=$(jget "$MNT/sandboxes/out/info.json" .network.address)
OUT_GW=${OUT_ADDR%.*}.$((${OUT_ADDR##*.} - 1))
SPOOF=192.0.2.77 # TEST-NET-1: no sandbox's, no host's; not NATed, so it arrives as sent
in_out() { nsenter --net="$STATE/netns/$RID" "$@"; }
udp_heard() { grep -q "$1" "$T/udp.log"; }
not_heard() { ! udp_heard "$@"; }
# udp_from_sandbox WORD: a datagram with WORD from the sandbox (busybox has no nc -u: a tftp request).
udp_from_sandbox() { sb_run out "timeout 3 tftp -g -l /tmp/tftp.out -r $1 $WEB 9999" >/dev/null 2>&1; }
udp_from_sandbox own
ok "a datagram from the sandbox's own address reaches the sink" poll_until 10 udp_heard " own"
in_out ip addr add "$SPOOF/32" dev snfs0
in_out ip route add "$WEB/32" via "$OUT_GW" dev snfs0 onlink src "$SPOOF"
in_out python3 -c 'import socket, sys
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind((sys.argv[1], 0))
for i in range(5): u.sendto(b"spoofed", (sys.argv[2], 9999))' "$SPOOF" "$WEB"
udp_from_sandbox after
ok "a datagram sent after it by the sandbox is heard" poll_until 10 udp_heard " after"
ok "one from another source address is not" not_heard spoofed
in_out ip route del "$WEB/32" 2>/dev/null
in_out ip addr del "$SPOOF/32" dev snfs0

# A start whose veth name is taken by what stands for another sandbox (its
# veth and its chain, both named by it) fails and leaves that chain alone.
egress_sandbox clash2 "$SLEEPER"
CLASH2_IF=$(veth_of clash2)
ip -n "$NS_D" link add "$CLASH2_IF" type veth peer name sftc2 || bail "cannot add the test's second clashing link"
in_d nft add chain inet snapfs "sb_$CLASH2_IF" && in_d nft add rule inet snapfs "sb_$CLASH2_IF" counter accept
expect_errno EIO "a start whose veth name is another's fails" wr "$MNT/sandboxes/clash2/start"
check_match "the other's chain of that name is still there" "counter" \
	"$(in_d nft list chain inet snapfs "sb_$CLASH2_IF" 2>&1)"
in_d nft delete chain inet snapfs "sb_$CLASH2_IF"
ip -n "$NS_D" link del "$CLASH2_IF"

# A published port of an egress sandbox: the httpd its entrypoint started answers
# on 127.0.0.1 of the daemon's namespace, through the daemon's forwarder. A
# sandbox of its own: runsc 20240729 cannot checkpoint one that held a TCP
# connection a moment ago (TIME_WAIT), and `other` is suspended below.
mkdir "$MNT/sandboxes/web"
wr "$MNT/sandboxes/web/image" busybox
wr "$MNT/sandboxes/web/entrypoint" 'httpd -p 80 -h /etc; httpd -p 8080 -h /etc; while :; do sleep 1; done'
wr "$MNT/sandboxes/web/network" egress
ok "an egress sandbox serving port 80 starts" wr "$MNT/sandboxes/web/start"
ok "publish web's port 80" wr "$MNT/sandboxes/web/ports" 80
HOSTPORT=$(rd "$MNT/sandboxes/web/ports" | awk '$1 == 80 { split($2, a, ":"); print a[2] }')
check_match "ports lists it on 127.0.0.1" '^[0-9]+$' "$HOSTPORT"
served() { in_d curl -sf --max-time 5 "http://127.0.0.1:$HOSTPORT/passwd" | grep -q '^root:'; }
ok "the sandbox's httpd answers on the published port" poll_until 20 served
# Inbound: a published port is the one way in. The sandbox's own address, on
# its unpublished 8080 or on 80, answers nobody: neither a local user nor
# root of the daemon's namespace, nor a host that routes to the pool through it
# (the internet namespace, given that route). Replies to its own fetches pass.
WEB_ADDR=$(jget "$MNT/sandboxes/web/info.json" .network.address)
# gets_page [CMD...] PORT: CMD (in the daemon's namespace) GETs the sandbox's /passwd on PORT.
gets_page() {
	local port=${*: -1}
	"${@:1:$#-1}" curl -sf --max-time 5 "http://$WEB_ADDR:$port/passwd" 2>/dev/null | grep -q '^root:'
}
not_gets_page() { ! gets_page "$@"; }
NOBODY=(in_d setpriv --reuid=65534 --regid=65534 --clear-groups)
own_8080() { sb_run web 'printf "GET /passwd HTTP/1.0\r\n\r\n" | nc -w 3 127.0.0.1 8080' | grep -q '^root:'; }
ok "from the sandbox, its own server answers on 8080" poll_until 20 own_8080
ok "a local non-root user does not reach its unpublished port" not_gets_page "${NOBODY[@]}" 8080
ok "nor its port 80 by its own address" not_gets_page "${NOBODY[@]}" 80
ok "nor does root of the daemon's namespace, bypassing the forwarder" not_gets_page in_d 8080
ip -n "$NS_I" route add "${WEB_ADDR%.*}.0/24" via "$NET_X.1" || bail "cannot route the internet to the pool"
ok "a host routing to the pool through the daemon's does not reach 8080" \
	not_gets_page ip netns exec "$NS_I" 8080
ok "nor 80" not_gets_page ip netns exec "$NS_I" 80
ip -n "$NS_I" route del "${WEB_ADDR%.*}.0/24" via "$NET_X.1"
ok "the published port still answers" served
ok "and the sandbox's own fetch gets its replies" fetch web "$WEB"
check_match "the table's forward hook drops the rest to a block" "ip daddr @blocks drop" \
	"$(in_d nft list chain inet snapfs forward 2>&1)"
check_match "info.json says it is reachable" true \
	"$(jget "$MNT/sandboxes/web/info.json" '.ports[0].reachable')"
ok "close 80" wr "$MNT/sandboxes/web/ports" "close 80"
not_served() { ! served; }
ok "after close the port answers no more" not_served
ok "terminate web" wr "$MNT/sandboxes/web/terminate"
ok "web is terminated" poll_until 30 status_is web terminated

# A deny written while it runs cuts a connection the sandbox opened itself:
# lines it sends every second stop reaching the sink (the conntrack entry of
# an established connection is no pass).
sb_run out "sh -c 'while :; do echo ping; sleep 1; done | nc $WEB 7000 >/dev/null & echo \$! >/tmp/nc.pid' </dev/null >/dev/null 2>&1" >/dev/null
pings() { grep -c ping "$T/pings.log"; }
pinging() { [ "$(pings)" -ge 2 ]; }
ok "the sandbox's own connection to the sink carries lines" poll_until 20 pinging
ok "deny of the sink is taken while the connection is open" wr "$MNT/sandboxes/out/egress" "deny $WEB/32"
sleep 2 # what was in flight as the deny came lands
BEFORE=$(pings)
sleep 3
check_eq "after the deny no line of the open connection reaches the sink" "$BEFORE" "$(pings)"
sb_run out 'kill $(cat /tmp/nc.pid)' >/dev/null 2>&1

# A rule written while it runs takes effect, and its removal too.
ok "deny 0.0.0.0/0 is taken while running" wr "$MNT/sandboxes/out/egress" "deny 0.0.0.0/0"
ok "after deny 0.0.0.0/0 it fetches nothing" not_fetch out "$WEB"
ok "an empty egress allows again" wr "$MNT/sandboxes/out/egress" ""
ok "after the rule is gone it fetches again" fetch out "$WEB"

# The lines of one open file are one rule set, first match wins: a deny before
# an allow of everything holds, whether the lines come in one write(2) or in
# several; every line reads back.
wr_lines() { timeout -k 5 "$OP_TIMEOUT" bash -c 'printf "%b" "$2" >"$1"' wr_lines "$1" "$2"; }
THREE="deny 192.0.2.0/24\ndeny $WEB/32\nallow 0.0.0.0/0\n"
ok "three lines in one write" wr_lines "$MNT/sandboxes/out/egress" "$THREE"
check_eq "all three read back" "$(printf '%b' "$THREE")" "$(rd "$MNT/sandboxes/out/egress")"
ok "the deny before the allow holds: no fetch" not_fetch out "$WEB"
check_match "the chain has the deny, then the allow" "$WEB drop.*0.0.0.0/0 accept" \
	"$(in_d nft list chain inet snapfs "sb_$IFN" 2>&1 | tr '\n' ' ')"
ok "an empty egress allows again" wr "$MNT/sandboxes/out/egress" ""
ok "it fetches" fetch out "$WEB"
printf "deny 192.0.2.0/24\ndeny %s/32\nallow 0.0.0.0/0\n" "$WEB" >"$T/rules"
ok "cat rules > egress" timeout -k 5 "$OP_TIMEOUT" bash -c 'cat "$1" >"$2"' cat "$T/rules" "$MNT/sandboxes/out/egress"
check_eq "every line of the file reads back" "$(cat "$T/rules")" "$(rd "$MNT/sandboxes/out/egress")"
ok "its deny holds" not_fetch out "$WEB"
wr "$MNT/sandboxes/out/egress" ""
# shellcheck disable=SC2016 # expanded by the inner shell
ok "one line per write(2) on one open file" timeout -k 5 "$OP_TIMEOUT" bash -c \
	'exec 3>"$1"; printf "deny %s/32\n" "$2" >&3; sleep 0.5; printf "allow 0.0.0.0/0\n" >&3; exec 3>&-' \
	wr3 "$MNT/sandboxes/out/egress" "$WEB"
check_eq "both lines read back" "$(printf 'deny %s/32\nallow 0.0.0.0/0' "$WEB")" \
	"$(rd "$MNT/sandboxes/out/egress")"
ok "the deny of the first write holds" not_fetch out "$WEB"
# refused_set ERRNO WHY TEXT: writing TEXT to out's egress fails with ERRNO,
# and the set in force before (deny $WEB, allow all) stays whole and holds.
refused_set() {
	expect_errno "$1" "a set with $2 is refused" wr_lines "$MNT/sandboxes/out/egress" "$3"
	check_eq "the rules in force stay whole after $2" \
		"$(printf 'deny %s/32\nallow 0.0.0.0/0' "$WEB")" "$(rd "$MNT/sandboxes/out/egress")"
	ok "and the deny holds after $2" not_fetch out "$WEB"
}
# A refused line refuses the open file's whole set: what was in force stays.
refused_set EINVAL "a bad line" "allow 0.0.0.0/0\nallow 10.0.0.0/33\n"
check_match "IPv6 to the sandboxes' veths goes to their chains (dropped there)" \
	"meta nfproto ipv6 oifname vmap @sandboxes" "$(in_d nft list chain inet snapfs output 2>&1)"
check_match "the same in forward" "meta nfproto ipv6 oifname vmap @sandboxes" \
	"$(in_d nft list chain inet snapfs forward 2>&1)"
# A line over 4096 bytes is refused by the framing (EFBIG): the open file's
# set lacks it, so none of it applies.
LONG=$(printf '%*s' 5000 '' | tr ' ' x)
refused_set EFBIG "a line too long" "allow 0.0.0.0/0\n# $LONG\n"
# A set written through one open file by several processes applies as each
# closes (docs/control-files.md): the last one's close applies every line.
wr "$MNT/sandboxes/out/egress" ""
# shellcheck disable=SC2016 # expanded by the inner shells
ok "two processes write one set" timeout -k 5 "$OP_TIMEOUT" bash -c \
	'{ sh -c "printf \"deny %s/32\n\" $2"; sh -c "printf \"allow 0.0.0.0/0\n\""; } >"$1"' \
	two "$MNT/sandboxes/out/egress" "$WEB"
check_eq "both writers' lines read back, in order" "$(printf 'deny %s/32\nallow 0.0.0.0/0' "$WEB")" \
	"$(rd "$MNT/sandboxes/out/egress")"
ok "the first writer's deny holds" not_fetch out "$WEB"
# A chain nftables refuses (the test puts another chain under the veth's name
# in the map: the element then clashes): the row keeps the rules in force
# and the sandbox's error says why.
in_d nft "delete element inet snapfs sandboxes { \"$IFN\" }; add chain inet snapfs t_clash; add element inet snapfs sandboxes { \"$IFN\" : jump t_clash }"
# close(2)'s answer: a shell's redirection ignores it, Python's close() raises it.
close_wr() {
	timeout -k 5 "$OP_TIMEOUT" python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
os.write(fd, sys.argv[2].encode() + b"\n")
os.close(fd)' "$1" "$2"
}
expect_errno EIO "a set nftables refuses fails at close" close_wr "$MNT/sandboxes/out/egress" \
	"deny 192.0.2.0/24"
check_eq "egress still reads the rules in force" "$(printf 'deny %s/32\nallow 0.0.0.0/0' "$WEB")" \
	"$(rd "$MNT/sandboxes/out/egress")"
check_match "the sandbox's error says nftables refused" "nftables refused" "$(rd "$MNT/sandboxes/out/error")"
check_match "the chain in force is still the old one" "$WEB drop" \
	"$(in_d nft list chain inet snapfs "sb_$IFN" 2>&1 | tr '\n' ' ')"
in_d nft "delete element inet snapfs sandboxes { \"$IFN\" }; add element inet snapfs sandboxes { \"$IFN\" : jump sb_$IFN }; delete chain inet snapfs t_clash"
ok "an empty egress allows again" wr "$MNT/sandboxes/out/egress" ""
ok "it fetches again" fetch out "$WEB"

# An `nft flush ruleset` in the daemon's namespace takes table inet snapfs: the
# next rule change makes it again, with every live sandbox's chain.
in_d nft flush ruleset
ok "a rule change after nft flush ruleset is taken" wr "$MNT/sandboxes/out/egress" "deny 192.0.2.0/24"
check_match "the sandbox's chain is back" "192.0.2.0/24 drop" "$(in_d nft list chain inet snapfs "sb_$IFN" 2>&1)"
check_match "and the other live sandbox's chain too" "fib daddr type" \
	"$(in_d nft list chain inet snapfs "sb_${OTHER_IF:0:15}" 2>&1)"
ok "it fetches again after the table is made anew (NAT back)" fetch out "$WEB"
wr "$MNT/sandboxes/out/egress" ""

# A second daemon in the same network namespace neither wipes the first's
# table at its start-up nor runs egress sandboxes of its own: it says why.
mkdir -p "$T/state2" "$T/mnt2"
"$SNAPFS_BIN" -f --state "$T/state2" --images "$IMAGES" "${DAEMON_ARGS[@]}" "$T/mnt2" >>"$T/daemon2.log" 2>&1 &
D2_PID=$!
d2_up() { timeout 5 cat "$T/mnt2/version" >/dev/null 2>&1; }
ok "a second daemon starts in the same namespace" poll_until 30 d2_up
check_match "the first daemon's table survives the second's start-up" "sb_$IFN" \
	"$(in_d nft list table inet snapfs 2>&1)"
ok "and its sandbox still fetches" fetch out "$WEB"
mkdir "$T/mnt2/sandboxes/two"
wr "$T/mnt2/sandboxes/two/image" busybox
wr "$T/mnt2/sandboxes/two/entrypoint" "$SLEEPER"
wr "$T/mnt2/sandboxes/two/network" egress
expect_errno "EBUSY|EIO" "an egress start in the second daemon fails" wr "$T/mnt2/sandboxes/two/start"
check_match "with a sentence naming the other daemon" "another snapfs daemon \\(pid [0-9]+\\)" \
	"$(rd "$T/mnt2/sandboxes/two/error")"
check_eq "the second daemon left no veth, record or namespace file" "" \
	"$(find "$T/state2/net" "$T/state2/netns" -mindepth 1 2>&1)"
rmdir "$T/mnt2/sandboxes/two" 2>/dev/null
fusermount3 -u "$T/mnt2"
wait "$D2_PID"
check_eq "the second daemon exits with status 0" 0 "$?"
D2_PID=""
ok "the first's sandbox fetches after the second is gone" fetch out "$WEB"

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
for s in clash clash2 quiet out other web src ${SPEC:+"$SPEC"} ${FORK:+"$FORK"} ${FORK2:+"$FORK2"}; do
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
# A record of before (an index in the pool, not an address) is read with the
# pool of this start and written again as the block's address.
LEFT_ADDR=$(jget "$MNT/sandboxes/left/info.json" .network.address)
IFS=. read -r _ _ O3 O4 <<<"$LEFT_ADDR"
LEFT_BLOCK=${LEFT_ADDR%.*}.$((O4 - 2))
kill_daemon
printf '%d\n' $(((O3 * 256 + O4) / 4)) >"$STATE/net/$LEFT"
start_daemon || bail "daemon did not restart"
check_eq "a record of an index is written again as the block's address" "$LEFT_BLOCK" \
	"$(cat "$STATE/net/$LEFT")"
check_eq "and the sandbox keeps its address" "$LEFT_ADDR" "$(jget "$MNT/sandboxes/left/info.json" .network.address)"
# Another --net-pool across a restart: the live sandbox keeps its block (its
# chain, its NAT); a new sandbox gets one of the new pool.
kill_daemon
DAEMON_ARGS+=(--net-pool 10.214.0.0/16)
start_daemon || bail "daemon did not restart with another --net-pool"
check_eq "with another --net-pool the live sandbox keeps its address" "$LEFT_ADDR" \
	"$(jget "$MNT/sandboxes/left/info.json" .network.address)"
ok "a rule change sets its chain again" wr "$MNT/sandboxes/left/egress" "deny 192.0.2.0/24"
ok "and it fetches with it (its own source address, NATed)" fetch left "$WEB"
egress_sandbox newpool "$SLEEPER"
ok "a sandbox started after the change" wr "$MNT/sandboxes/newpool/start"
check_match "gets an address of the new pool" '^10\.214\.' \
	"$(jget "$MNT/sandboxes/newpool/info.json" .network.address)"
ok "and fetches" fetch newpool "$WEB"
check_match "the blocks every chain denies hold the old pool's block too" "$LEFT_BLOCK/30" \
	"$(in_d nft list set inet snapfs blocks 2>&1)"
wr "$MNT/sandboxes/newpool/terminate"
rmdir "$MNT/sandboxes/newpool"
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
