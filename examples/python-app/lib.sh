# shellcheck shell=bash
# lib.sh - what run.sh and bench/python-app.sh share; sourced, not run.
#
# A daemon of their own (build/snapfs of this checkout, or SNAPFS_BIN) on a
# scratch mount, with its state and images under one temporary directory,
# run in a network namespace made here (snapfs-py-PID): an egress sandbox
# changes the firewall and net.ipv4.ip_forward of the daemon's namespace
# (docs/network.md), and this keeps the host's own untouched. Everything
# (sandboxes, mount, runsc processes, namespace, directory) goes on every
# path out.
#
#   pyapp_up TAG              T, STATE, MNT, IMAGES, NS, PID; the image built
#                             (build-image.sh) and imported as python-app,
#                             the daemon mounted; the EXIT trap set
#   pyapp_down                all of it taken down (the trap calls it)
#   in_ns CMD...              CMD in the daemon's network namespace
#   pyapp_sandbox SB MIB      SB made: image python-app, network egress, port
#                             8080 published, app.py warming MIB MiB; not started
#   host_port SB              the host port SB's 8080 is published on
#   first_answers T0 SECS SB...
#                             client.py in the namespace: per SB one line
#                             "SB FIRST_MS REQUEST_MS JSON", FIRST_MS since T0
#   mem_bytes SB              SB's cgroup memory (metrics' snapfs_sandbox_memory_bytes)
# and, from bench/lib.sh: write_read FILE [TEXT] (a line written, the answer read
# on the same open file), ms (milliseconds since the epoch), bench_teardown.

PYAPP_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYAPP_REPO=$(cd "$PYAPP_DIR/../.." && pwd)
PID=""
NS=""
T=""

# shellcheck source-path=SCRIPTDIR/../../bench
. "$PYAPP_REPO/bench/lib.sh"
in_ns() { ip netns exec "$NS" "$@"; }

pyapp_down() {
	local f
	set +e
	trap - EXIT INT TERM
	[ -n "$T" ] || return 0
	bench_teardown "$STATE" "$MNT" "$PID"
	for f in "$STATE"/netns/*; do
		[ -e "$f" ] && umount -l "$f" 2>/dev/null
	done
	[ -n "$NS" ] && ip netns del "$NS" 2>/dev/null
	rm -rf "$T"
	T=""
}

pyapp_up() {
	local bin=${SNAPFS_BIN:-$PYAPP_REPO/build/snapfs}
	[ "$(id -u)" -eq 0 ] || { echo "$0: run me as root (FUSE, runsc, a network namespace)" >&2; exit 1; }
	[ -x "$bin" ] || { echo "$0: no $bin: run make first" >&2; exit 1; }
	for c in runsc ip python3 fusermount3; do
		command -v "$c" >/dev/null || { echo "$0: $c is missing (scripts/setup.sh)" >&2; exit 1; }
	done
	T=$(mktemp -d "/tmp/snapfs-$1.XXXXXX")
	STATE=$T/state MNT=$T/mnt IMAGES=$T/images
	mkdir -p "$STATE" "$MNT" "$IMAGES"
	trap pyapp_down EXIT
	trap 'exit 130' INT TERM
	"$PYAPP_DIR/build-image.sh" --images "$IMAGES" python-app
	NS=snapfs-py-$$
	ip netns add "$NS"
	ip -n "$NS" link set lo up
	nsenter --net="/run/netns/$NS" "$bin" -f --state "$STATE" --images "$IMAGES" "$MNT" \
		2>"$T/daemon.log" &
	PID=$!
	for _ in $(seq 100); do [ -r "$MNT/version" ] && return 0; sleep 0.1; done
	echo "$0: the daemon did not mount $MNT:" >&2
	cat "$T/daemon.log" >&2
	exit 1
}

pyapp_sandbox() {
	local s=$MNT/sandboxes/$1
	mkdir "$s"
	echo python-app >"$s/image"
	echo egress >"$s/network"
	echo 8080 >"$s/ports"
	echo "APP_MIB=$2 exec python3 /opt/python-app/app.py" >"$s/entrypoint"
}

host_port() { awk '$1 == 8080 { split($2, a, ":"); print a[2] }' "$MNT/sandboxes/$1/ports"; }

first_answers() {
	local t0=$1 secs=$2 sb ports=() line
	declare -A name
	shift 2
	for sb in "$@"; do
		ports+=("$(host_port "$sb")")
		name[${ports[-1]}]=$sb
	done
	in_ns python3 "$PYAPP_DIR/client.py" "$t0" "$secs" "${ports[@]}" | while read -r line; do
		echo "${name[${line%% *}]} ${line#* }"
	done
}

mem_bytes() {
	awk -v want="snapfs_sandbox_memory_bytes{sandbox=\"$1\"}" '$1 == want { print $2 }' "$MNT/metrics"
}
