#!/usr/bin/env bash
# run.sh [MIB] [COUNT] - a Python service that takes seconds to warm, started
# cold once, then forked warm from a snapshot (default: 256 MiB, 4 forks).
#
# Builds and imports the image (build-image.sh: Debian bookworm, python3,
# python3-numpy, app.py), mounts a snapfs daemon of its own (lib.sh: this
# checkout's build/snapfs, in a network namespace made for it), and:
#
#   1. starts sandbox `app` with network=egress and its port 8080 published,
#      and times it to its first answer: the cold start, warm-up included;
#   2. snapshots it once warm;
#   3. forks the snapshot with `count=COUNT` and times each fork to its first
#      answer on its own published port: no warm-up, the same data, the same
#      process (pid, warm-up time, request counter go on from the snapshot);
#   4. shows each sandbox's memory (its cgroup's, from `metrics`), and that
#      each fork then goes its own way.
#
# Everything it made goes on exit, Ctrl-C included. Needs root, `make` (the
# release build), scripts/setup.sh's runsc, umoci and skopeo, and the first
# time Debian's mirror (mmdebstrap, installed if missing). `make
# example-python` runs it. bench/python-app.sh is the same, measured.
set -euo pipefail
MIB=${1:-256}
COUNT=${2:-4}
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"

step() { printf '\n### %s\n' "$*"; }
# field FILE KEY: KEY of the JSON object in FILE.
field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
# show SB FIRST_MS REQUEST_MS JSON: one answer, the fields that tell a fork from a cold start.
show() {
	python3 -c '
import json, sys
sb, first, req, body = sys.argv[1:5]
b = json.loads(body)
print("%-28s first answer %6s ms (the request %4s ms): pid %s, requests %s, import_s %s, warm_s %s"
      % (sb, first, req, b["pid"], b["requests"], b["import_s"], b["warm_s"]))' "$@"
}
mib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }

step "Image and daemon"
pyapp_up python-app
echo "daemon mounted on $MNT, in network namespace $NS"
S=$MNT/sandboxes

step "Cold start: sandbox app warms $MIB MiB before it answers"
pyapp_sandbox app "$MIB"
t0=$(ms)
echo 1 >"$S/app/start"
echo "start returned after $(($(ms) - t0)) ms: the sandbox runs, app.py warms"
echo "published: $(cat "$S/app/ports")"
first_answers "$t0" 300 app >"$T/cold"
read -r _ cold_ms cold_req cold_body <"$T/cold"
show app "$cold_ms" "$cold_req" "$cold_body"

step "Snapshot it, warm"
t0=$(ms)
SNAP=$(write_read "$S/app/snapshot")
snap_ms=$(($(ms) - t0))
echo "snapshot $SNAP stored in $snap_ms ms; the sandbox was paused" \
	"$(field "$MNT/snapshots/$SNAP/info.json" pause_ms) ms;" \
	"$(mib "$(field "$MNT/snapshots/$SNAP/info.json" size_bytes)") MiB"

step "Fork it: echo count=$COUNT > snapshots/$SNAP/fork"
avail_before=$(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo)
t0=$(ms)
exec 3<>"$MNT/snapshots/$SNAP/fork"
echo "count=$COUNT" >&3
mapfile -t FORKS <&3
exec 3>&-
echo "the write returned after $(($(ms) - t0)) ms: ${FORKS[*]} run"
first_answers "$t0" 120 "${FORKS[@]}" >"$T/forks"
while read -r sb first req body; do show "$sb" "$first" "$req" "$body"; done <"$T/forks"
avail_after=$(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo)
echo "each fork's first answer came from the source's warm process: its pid, warm_s and"
echo "request counter go on from the snapshot (requests 2: app answered 1 before it)."

step "Memory"
for sb in app "${FORKS[@]}"; do
	printf '%-28s %s MiB (its cgroup)\n' "$sb" "$(mib "$(mem_bytes "$sb")")"
done
echo "the host's MemAvailable fell by $(mib $(((avail_before - avail_after) * 1024 / COUNT))) MiB per fork"

step "Then each goes its own way"
for sb in app "${FORKS[@]}"; do
	in_ns python3 -c '
import json, sys, urllib.request
b = json.load(urllib.request.urlopen(sys.argv[1], timeout=10))
print("%-28s samples below 1.0: %s; requests %s" % (sys.argv[2], b["below"], b["requests"]))' \
		"http://127.0.0.1:$(host_port "$sb")/rank?x=1.0" "$sb"
done

fork_ms=$(awk '{ print $2 }' "$T/forks" | sort -n | tail -n 1)
step "Summary"
echo "cold start to first answer: $cold_ms ms; $COUNT forks to every first answer: $fork_ms ms"
echo "(cleaning up: sandboxes, mount, namespace)"
