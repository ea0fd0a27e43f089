# shellcheck shell=bash disable=SC2016,SC2317,SC2034 # SC2317: functions called from the trap and by ok; SC2034: names the tests use
# lib_net.sh - what the network tests share, sourced after lib.sh: the daemon
# runs in a network namespace the test makes (snapfs-t-d*), beside a second
# one standing for the internet (a busybox httpd on $WEB, an address of the
# test's own range). Nothing here touches the host's own namespace: every
# ip/nft command names a namespace of the test's, and both are deleted on
# every path out (net_cleanup, the EXIT trap).
#
#   in_d CMD...           CMD in the daemon's namespace
#   fetch SB ADDR         the sandbox GETs http://ADDR/index.html, the internet's page
#   not_fetch, not_reach  it does not; no HTTP answer at all
#   start_metadata        a cloud metadata stand-in on 169.254.169.254:80 in the
#                         internet; md_fetch SB, no_md SB: the sandbox reaches it or not
#   SLEEPER               an entrypoint that does nothing, for ever
# A test sets DAEMON_ARGS and calls setup_images and start_daemon after it;
# net_cleanup_extra, if it defines one, ends what it started itself.

command -v nft >/dev/null || bail "nft is missing (scripts/setup.sh --test)"
SUF=$$
NS_D=snapfs-t-d$SUF # the daemon's
NS_I=snapfs-t-i$SUF # the internet
NET_X=10.250.$((SUF % 200 + 20)) # the internet's /24, the test's own
WEB=$NET_X.2
HTTPD_PID=""
DNS_PID=""
LATE_PID=""
MD_PID=""

in_d() { ip netns exec "$NS_D" "$@"; }

net_cleanup() {
	local rc=$? f
	trap - EXIT INT TERM
	set +e
	teardown_host
	[ -n "$HTTPD_PID" ] && kill -KILL "$HTTPD_PID" 2>/dev/null
	[ -n "$DNS_PID" ] && kill -KILL "$DNS_PID" 2>/dev/null
	[ -n "$LATE_PID" ] && kill -KILL "$LATE_PID" 2>/dev/null
	[ -n "$MD_PID" ] && kill -KILL "$MD_PID" 2>/dev/null
	# A test's own servers and daemons, ended before the namespaces go.
	declare -F net_cleanup_extra >/dev/null && net_cleanup_extra
	for f in "$STATE"/netns/*; do
		[ -e "$f" ] && umount -l "$f" 2>/dev/null
	done
	ip netns del "$NS_D" 2>/dev/null
	ip netns del "$NS_I" 2>/dev/null
	(exit "$rc")
	cleanup
}
trap net_cleanup EXIT

{ ip netns add "$NS_D" && ip netns add "$NS_I"; } || bail "cannot create the test's namespaces"
ip -n "$NS_D" link add sft0 type veth peer name sft1 netns "$NS_I" || bail "cannot create the test veth"
ip -n "$NS_D" addr add "$NET_X.1/24" dev sft0
ip -n "$NS_D" link set sft0 up
ip -n "$NS_D" link set lo up
ip -n "$NS_I" addr add "$WEB/24" dev sft1
ip -n "$NS_I" link set sft1 up
ip -n "$NS_I" link set lo up
mkdir -p "$T/www"
echo "hello from the internet" >"$T/www/index.html"
ip netns exec "$NS_I" busybox httpd -f -p "$WEB:80" -h "$T/www" &
HTTPD_PID=$!
disown "$HTTPD_PID"

# The daemon in the test's namespace; nsenter keeps the mount namespace, so the mount is seen here.
cat >"$T/snapfs-in-ns" <<W
#!/bin/sh
exec nsenter --net=/run/netns/$NS_D "$SNAPFS_BIN" "\$@"
W
chmod +x "$T/snapfs-in-ns"
SNAPFS_BIN=$T/snapfs-in-ns

# fetch SB ADDR: the sandbox GETs http://ADDR/index.html (busybox nc: its wget crashes, static).
FETCH='printf "GET /index.html HTTP/1.0\r\n\r\n" | nc -w 3'
fetch() { sb_run "$1" "$FETCH $2 80" 2>/dev/null | grep -q "hello from the internet"; }
not_fetch() { ! fetch "$@"; }
# not_reach SB ADDR: no HTTP answer at all from ADDR:80 (a 404 would be one).
not_reach() { ! sb_run "$1" "$FETCH $2 80" 2>/dev/null | grep -q '^HTTP'; }

# start_metadata: a stand-in for cloud metadata in the internet namespace, on
# 169.254.169.254:80, routed to from the daemon's namespace: denied to every
# sandbox unless root's own rule names it (docs/network.md).
start_metadata() {
	mkdir -p "$T/md"
	echo "METADATA-CREDENTIALS" >"$T/md/index.html"
	ip -n "$NS_I" addr add 169.254.169.254/32 dev lo || bail "cannot add the metadata stand-in's address"
	ip -n "$NS_D" route add 169.254.169.254/32 via "$WEB" || bail "cannot route to the metadata stand-in"
	ip netns exec "$NS_I" busybox httpd -f -p 169.254.169.254:80 -h "$T/md" &
	MD_PID=$!
	disown "$MD_PID"
}
md_fetch() { sb_run "$1" "$FETCH 169.254.169.254 80" 2>/dev/null | grep -q METADATA-CREDENTIALS; }
no_md() { ! md_fetch "$1"; }

SLEEPER='while :; do sleep 1; done'
