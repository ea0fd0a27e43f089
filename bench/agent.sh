#!/usr/bin/env bash
# bench/agent.sh - sandboxes/<id>/root/ and exec through the agent (issue 23)
# against the same work done by hand with raw `runsc exec` on the same
# sandbox, in one run. Run on demand (not in CI), as root, after `make`:
#
#   bench/agent.sh [ROUNDS] [OUT]      (defaults: 5, docs/bench/agent.md)
#
# For one busybox sandbox (runsc --root STATE/runsc exec RID ... is "raw"):
#   exec     `true` written to exec and its answer read on the same open
#            file, vs `runsc exec RID true`: 20 each, median and p90
#   read     cat root/tmp/r64 >/dev/null (64 MiB) vs runsc exec RID cat /tmp/r64,
#            and the same into a host file and through sha256sum
#   write    cat SRC >root/tmp/w64 vs cat SRC | runsc exec RID sh -c 'cat >/tmp/w'
#   ls -l    of a 1,000-file directory (1.2 s apart: the kernel's and the
#            daemon's one-second caches have expired) vs runsc exec RID ls -l
#   cp -r    of a 5,000-file tree in and out vs tar -c | runsc exec RID tar -x
#            and back
#   pause    pause_ms of a snapshot while a reader loops over a file in root/,
#            and without
# and the daemon's VmRSS/VmHWM before and after. Timings are reported, never
# judged: the script fails only when something does not work.
set -euo pipefail
ROUNDS=${1:-5}
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${2:-$REPO/docs/bench/agent.md}
BIN=$REPO/build/snapfs
TREE_ROUNDS=${TREE_ROUNDS:-3}
# shellcheck source-path=SCRIPTDIR
. "$REPO/bench/lib.sh"
bench_one_daemon agent
bench_start_daemon "$BIN"

B=bench
mkdir "$MNT/sandboxes/$B"
echo busybox >"$MNT/sandboxes/$B/image"
echo 'while :; do sleep 1; done' >"$MNT/sandboxes/$B/entrypoint"
echo 1 >"$MNT/sandboxes/$B/start"
for _ in $(seq 100); do [ "$(cat "$MNT/sandboxes/$B/status")" = running ] && break; sleep 0.2; done
RID=$(sed -n 's/.*"runtime_id":[[:space:]]*"\([^"]*\)".*/\1/p' "$MNT/sandboxes/$B/info.json")
R=$MNT/sandboxes/$B/root
E=$MNT/sandboxes/$B/exec
raw() { $RS exec "$RID" "$@"; }
ls "$R" >/dev/null # the agent starts at the first use

# now_us: microseconds, without a fork.
now_us() { local t=${EPOCHREALTIME/./}; echo "$t"; }
# time_ms CMD...: CMD's wall time in milliseconds (one decimal), its output thrown away.
time_ms() {
	local t0 t1
	t0=${EPOCHREALTIME/./}
	"$@" >/dev/null
	t1=${EPOCHREALTIME/./}
	awk -v d="$((t1 - t0))" 'BEGIN { printf "%.1f\n", d / 1000 }'
}
# p90: the 90th percentile of the numbers on stdin (nearest rank).
p90() { sort -n | awk '{ v[NR] = $1 } END { i = int(NR * 0.9 + 0.999); print v[i] }'; }
mem() { awk '/^VmRSS|^VmHWM/ { printf "%s %s kB  ", $1, $2 }' "/proc/$PID/status"; }
MEM_BEFORE=$(mem)

ROWS=$T/rows
: >"$ROWS"
# row OP SNAPFS RAW TARGET_RATIO [NOTE]: one line of the table.
row() {
	local r met
	r=$(ratio "$2" "$3")
	met=$(awk -v r="$r" -v t="$4" 'BEGIN { print (r <= t) ? "yes" : "no" }')
	printf '| %s | %s | %s | %s | ≤ %s | %s |\n' "$1" "$2" "$3" "$r" "$4" "$met" >>"$ROWS"
}
# pair NAME N A_CMD B_CMD: N runs of each in turn (A B A B ...), times in T/NAME.a, T/NAME.b.
pair() {
	local i
	: >"$T/$1.a"
	: >"$T/$1.b"
	for i in $(seq "$2"); do
		eval "$3" >>"$T/$1.a"
		eval "$4" >>"$T/$1.b"
	done
}

# --- exec round trip ------------------------------------------------------------
# exec_agent [CMD]: CMD (default true) written to exec and its answer read on one open file.
exec_agent() {
	local t0 t1
	t0=${EPOCHREALTIME/./}
	exec 3<>"$E"
	echo "${1:-true}" >&3
	cat <&3 >/dev/null
	exec 3>&-
	t1=${EPOCHREALTIME/./}
	awk -v d="$((t1 - t0))" 'BEGIN { printf "%.1f\n", d / 1000 }'
}
exec_agent true >/dev/null
raw true
pair exec 20 "exec_agent true" "time_ms raw true"
row "exec \`true\`, median of 20" "$(median <"$T/exec.a")" "$(median <"$T/exec.b")" 0.25
row "exec \`true\`, p90 of 20" "$(p90 <"$T/exec.a")" "$(p90 <"$T/exec.b")" 0.25
# An external command: the ready shell forks it where `sh -c` would exec it.
pair execx 20 "exec_agent '/bin/ls /'" "time_ms raw /bin/ls /"
row "exec \`/bin/ls /\`, median of 20" "$(median <"$T/execx.a")" "$(median <"$T/execx.b")" 0.25
# The floor under any exec: one fork+exec of /bin/sh inside gVisor, timed as
# 20 of them in one raw exec less the same loop without them, per exec.
# shellcheck disable=SC2016 # expanded by the sandbox's shell
floor_once() {
	local with without
	with=$(time_ms raw sh -c 'i=0; while [ $i -lt 20 ]; do /bin/sh -c true; i=$((i + 1)); done')
	without=$(time_ms raw sh -c 'i=0; while [ $i -lt 20 ]; do i=$((i + 1)); done')
	awk -v a="$with" -v b="$without" 'BEGIN { printf "%.1f\n", (a - b) / 20 }'
}
: >"$T/floor.a"
for _ in $(seq "$ROUNDS"); do floor_once >>"$T/floor.a"; done
FLOOR=$(median <"$T/floor.a")
row "fork+exec of /bin/sh by busybox sh inside (what an exec spawned before the ready shell)" "$FLOOR" "$(median <"$T/exec.b")" 0.25

# --- 64 MiB read and write ---------------------------------------------------------
head -c $((64 << 20)) /dev/urandom >"$T/src64"
cp "$T/src64" "$R/tmp/r64"
want=$(sha256sum <"$T/src64" | cut -d' ' -f1)
[ "$(raw sha256sum /tmp/r64 | cut -d' ' -f1)" = "$want" ] || { echo "agent.sh: r64 differs inside" >&2; exit 1; }
pair read "$ROUNDS" "time_ms cat '$R/tmp/r64'" "time_ms raw cat /tmp/r64"
row "read 64 MiB (cat)" "$(median <"$T/read.a")" "$(median <"$T/read.b")" 1.25
# The same read where the bytes go somewhere: a host file, and sha256sum. To /dev/null raw
# runsc copies nothing out of the sandbox (busybox cat sendfile()s, the host's /dev/null
# takes the bytes without a copy); a user reading a file out keeps its bytes.
read_file() { cat "$R/tmp/r64" >"$T/r64.out"; }
read_file_raw() { raw cat /tmp/r64 >"$T/r64.out"; }
pair readf "$ROUNDS" "time_ms read_file" "time_ms read_file_raw"
row "read 64 MiB into a host file (cat > file)" "$(median <"$T/readf.a")" "$(median <"$T/readf.b")" 1.25
read_sum() { cat "$R/tmp/r64" | sha256sum; }
read_sum_raw() { raw cat /tmp/r64 | sha256sum; }
pair readsum "$ROUNDS" "time_ms read_sum" "time_ms read_sum_raw"
row "read 64 MiB through sha256sum (cat \| sha256sum)" "$(median <"$T/readsum.a")" "$(median <"$T/readsum.b")" 1.25
rm -f "$T/r64.out"
write_in() { cat "$T/src64" >"$R/tmp/w64"; }
write_raw() { raw sh -c 'cat >/tmp/w64raw' <"$T/src64"; }
pair write "$ROUNDS" "time_ms write_in" "time_ms write_raw"
[ "$(raw sha256sum /tmp/w64 | cut -d' ' -f1)" = "$want" ] || { echo "agent.sh: w64 differs inside" >&2; exit 1; }
[ "$(raw sha256sum /tmp/w64raw | cut -d' ' -f1)" = "$want" ] || { echo "agent.sh: w64raw differs" >&2; exit 1; }
row "write 64 MiB (cat >)" "$(median <"$T/write.a")" "$(median <"$T/write.b")" 1.25
raw rm -f /tmp/r64 /tmp/w64 /tmp/w64raw

# --- ls -l of 1,000 files ----------------------------------------------------------
# shellcheck disable=SC2016 # expanded by the sandbox's shell
raw sh -c 'mkdir /tmp/d1k && cd /tmp/d1k && i=0 && while [ $i -lt 1000 ]; do echo $i >f$i; i=$((i + 1)); done'
[ "$(find "$R/tmp/d1k" -type f | wc -l)" = 1000 ] || { echo "agent.sh: d1k lacks files" >&2; exit 1; }
ls_in() { sleep 1.2 && time_ms ls -l "$R/tmp/d1k"; }
ls_raw() { sleep 1.2 && time_ms raw ls -l /tmp/d1k; }
pair ls "$ROUNDS" ls_in ls_raw
row "ls -l, 1,000 files" "$(median <"$T/ls.a")" "$(median <"$T/ls.b")" 1
raw rm -rf /tmp/d1k

# --- cp -r of a 5,000-file tree --------------------------------------------------------
# Python's stdlib, completed to 5,000 files by generated ones of 1 to 16 KiB.
SRC=$T/tree
mkdir -p "$SRC/gen"
[ -d /usr/lib/python3.11 ] && cp -r /usr/lib/python3.11 "$SRC/python3.11"
n=$(find "$SRC" -type f | wc -l)
i=0
while [ "$n" -lt 5000 ]; do
	d=$SRC/gen/d$((i / 100))
	mkdir -p "$d"
	head -c $(((i % 16 + 1) * 1024)) /dev/urandom >"$d/f$i.py"
	i=$((i + 1)) n=$((n + 1))
done
TREE_FILES=$(find "$SRC" -type f | wc -l)
TREE_MB=$(du -sm "$SRC" | cut -f1)
cp_in() { time_ms cp -r "$SRC" "$R/tmp/tin"; }
cp_out() { rm -rf "$T/tout" && time_ms cp -r "$R/tmp/tin" "$T/tout" && raw rm -rf /tmp/tin >/dev/null; }
tar_in() { time_ms bash -c "tar -C '$SRC' -cf - . | $RS exec '$RID' sh -c 'mkdir /tmp/rin && tar -C /tmp/rin -xf -'"; }
tar_out() {
	rm -rf "$T/rout" && mkdir "$T/rout"
	time_ms bash -c "$RS exec '$RID' tar -C /tmp/rin -cf - . | tar -C '$T/rout' -xf -"
	raw rm -rf /tmp/rin >/dev/null
}
: >"$T/cpin.a" && : >"$T/cpin.b" && : >"$T/cpout.a" && : >"$T/cpout.b"
for _ in $(seq "$TREE_ROUNDS"); do
	cp_in >>"$T/cpin.a"
	tar_in >>"$T/cpin.b"
	cp_out >>"$T/cpout.a"
	tar_out >>"$T/cpout.b"
done
[ "$(find "$T/tout" -type f | wc -l)" = "$TREE_FILES" ] || { echo "agent.sh: cp -r out lacks files" >&2; exit 1; }
# What the host's own file system costs cp -r out and tar -x back: the same tree,
# host to host, with no sandbox on either side (a floor under both, not a target).
: >"$T/hostcp.a" && : >"$T/hostcp.b"
for _ in $(seq "$TREE_ROUNDS"); do
	rm -rf "$T/hcp" && time_ms cp -r "$SRC" "$T/hcp" >>"$T/hostcp.a"
	rm -rf "$T/htar" && mkdir "$T/htar" && time_ms bash -c "tar -C '$SRC' -cf - . | tar -C '$T/htar' -xf -" >>"$T/hostcp.b"
done
rm -rf "$T/hcp" "$T/htar"
row "cp -r in, $TREE_FILES files" "$(median <"$T/cpin.a")" "$(median <"$T/cpin.b")" 2
row "cp -r out, $TREE_FILES files" "$(median <"$T/cpout.a")" "$(median <"$T/cpout.b")" 2
printf '| host only: cp -r vs tar -c \\| tar -x of the tree, host to host | %s | %s | %s | - | - |\n' \
	"$(median <"$T/hostcp.a")" "$(median <"$T/hostcp.b")" \
	"$(ratio "$(median <"$T/hostcp.a")" "$(median <"$T/hostcp.b")")" >>"$ROWS"

# --- snapshot pause with root/ in use and without ------------------------------------
pause_once() {
	local snap pause st
	exec 3<>"$MNT/sandboxes/$B/snapshot"
	echo 1 >&3
	read -r snap <&3
	exec 3>&-
	pause=$(sed -n 's/.*"pause_ms":[[:space:]]*\([0-9]*\).*/\1/p' "$MNT/snapshots/$snap/info.json")
	for _ in $(seq 300); do
		st=$(cat "$MNT/snapshots/$snap/status")
		[ "$st" = completed ] && break
		sleep 0.2
	done
	echo 1 >"$MNT/snapshots/$snap/delete"
	echo "$pause"
}
: >"$T/pause.a" && : >"$T/pause.b"
for _ in $(seq "$ROUNDS"); do
	(while :; do cat "$R/bin/busybox" >/dev/null 2>&1 || sleep 0.01; done) &
	reader=$!
	sleep 0.5
	pause_once >>"$T/pause.a"
	kill "$reader"
	wait "$reader" 2>/dev/null || true
	pause_once >>"$T/pause.b"
done
PAUSE_A=$(median <"$T/pause.a") PAUSE_B=$(median <"$T/pause.b")
printf '| snapshot pause_ms, root/ in use vs not | %s | %s | %s | ≤ 1 | %s |\n' "$PAUSE_A" "$PAUSE_B" \
	"$(ratio "$PAUSE_A" "$PAUSE_B")" "$(awk -v a="$PAUSE_A" -v b="$PAUSE_B" 'BEGIN { print (a <= b) ? "yes" : "no" }')" >>"$ROWS"
MEM_AFTER=$(mem)

{
	echo "# root/ and exec through the agent vs raw runsc exec"
	echo
	echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) by bench/agent.sh on $(nproc) cores, $(runsc --version | head -1),"
	echo "one busybox sandbox; raw = \`runsc --root STATE/runsc exec RID ...\` on the same sandbox, run"
	echo "in turn with the snapfs one (A B A B ...). Milliseconds, medians of $ROUNDS runs unless"
	echo "said ($TREE_ROUNDS for the tree: $TREE_FILES files, $TREE_MB MiB, Python's stdlib completed"
	echo "with generated files). ratio = snapfs / raw; target from issue 23."
	echo
	echo "| operation | snapfs | raw | ratio | target | met? |"
	echo "|---|---|---|---|---|---|"
	cat "$ROWS"
	echo
	echo "The fork+exec row: what one fork+exec of /bin/sh costs inside the sandbox when busybox sh"
	echo "makes it (20 in one raw exec, less the same loop without them), against raw \`runsc exec true\`."
	echo "It was the floor under every exec while each spawned \`/bin/sh -c\`; the agent now keeps one"
	echo "shell spawned ahead (runtime/agent/inside/exec.c, the ready shell), so a builtin such as"
	echo "\`true\` pays no exec of sh, and an external command pays a fork where \`sh -c\` paid the"
	echo "exec of sh (the \`/bin/ls\` row)."
	echo
	echo "The pause row compares snapfs with itself: the snapshot's pause_ms while a reader"
	echo "loops over root/bin/busybox, against the same snapshot with root/ idle."
	echo
	echo "Daemon memory: before $MEM_BEFORE; after $MEM_AFTER."
	echo
	echo "Each run's figures (snapfs; raw):"
	echo
	echo "- floor (ms per fork+exec of /bin/sh inside): $(paste -sd' ' "$T/floor.a")"
	for f in exec execx read readf readsum write ls cpin cpout hostcp pause; do
		echo "- $f: $(paste -sd' ' "$T/$f.a"); $(paste -sd' ' "$T/$f.b")"
	done
} | tee "$OUT"
