#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317
# Sandboxes with limits (issue 12, items 1 to 3; docs/limits.md "Resource
# limits"): memory, cpus and pids as files and spec keys, with the daemon's
# defaults; runsc writes them into the sandbox's host cgroup.
#
# - A --default-* above its --max-* (0 under a bound) stops the daemon at
#   start-up; a bad --max-* is refused.
# - Bad values are EINVAL with a sentence in error; a limit cannot change
#   after start (EBUSY).
# - memory=128M: an exec filling 300 MiB in /tmp ends the sandbox (the host's
#   OOM killer ends its sentry: runsc 20240729 has no OOM kill inside), its
#   status is terminated and error says "out of memory"; the host's free
#   memory moves by less than the 300 MiB; another sandbox runs on.
# - cpus=0.5: two busy loops use less than one core, measured from the host
#   through the metrics file (the sandbox's cgroup) over 3 s.
# - pids is RLIMIT_NPROC inside (init and every exec, kept by a fork) and the
#   host cgroup's pids.max is a backstop with room for the runtime's tasks.
# - pids=64: of 200 background processes about 64 start and the next fork
#   fails inside ("can't fork"); the sandbox stays running and answers
#   another exec; the daemon and another sandbox are fine.
# - A fork keeps its snapshot's limits (info.json and the fork's cgroup);
#   memory= on the fork write raises it; a lower one is EINVAL.
. "$(dirname "$0")/lib.sh"

MIB=$((1 << 20))

# --- the bounds of what a user may ask for (docs/limits.md, "What a user may ask for") ---
# A default above its --max-* would give a sandbox what its owner may not ask
# for: the daemon refuses to start, before it mounts anything.
bad_start() {
	"$SNAPFS_BIN" -f --state "$T/bad-state" --images "$IMAGES" "$@" "$MNT" 2>&1
}
out=$(bad_start --default-memory 2G --max-memory 1G)
rc=$?
check_eq "--default-memory 2G above --max-memory 1G: the daemon does not start" 1 "$rc"
check_contains "it says why" "--default-memory 2147483648 is above --max-memory 1073741824" "$out"
out=$(bad_start --default-cpus 0 --max-cpus 4)
check_contains "--default-cpus 0 (unlimited) under --max-cpus 4: refused" \
	"--default-cpus 0 (unlimited) is above --max-cpus 4" "$out"
out=$(bad_start --max-sandboxes-per-user -1)
check_contains "--max-sandboxes-per-user -1 is no count" \
	"--max-sandboxes-per-user: not a whole number" "$out"
out=$(bad_start --max-pids 0.5)
check_contains "--max-pids 0.5 is no task count" "--max-pids: bad pids" "$out"
check_lacks "nothing was mounted" "$MNT" "$(awk '{ print $2 }' /proc/mounts)"

DAEMON_ARGS=(--default-memory 1G --default-cpus 1.5 --default-pids 512)
start_daemon || bail "the daemon mounts"

# The v1 cgroup file FILE of sandbox SB's hierarchy HIER (the CI host's layout: docs/cgroups.md).
cg_file() {
	local rid
	rid=$(runtime_id "$1")
	if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
		cat "/sys/fs/cgroup/snapfs.slice/$rid/$3"
	else
		cat "/sys/fs/cgroup/$2/snapfs.slice/$rid/$3"
	fi
}
avail_mib() { awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo; }
cpu_seconds() {
	rd "$MNT/metrics" | awk -v s="$1" '$1 == "snapfs_sandbox_cpu_seconds_total{sandbox=\"" s "\"}" { print $2 }'
}
not_running() { ! status_is "$1" running; }

# --- defaults, files, bad values ---------------------------------------------------
D=$MNT/sandboxes/lim
ok "mkdir sandboxes/lim" mkdir "$D"
check_eq "memory defaults to --default-memory" $((1 << 30)) "$(rd "$D/memory")"
check_eq "cpus defaults to --default-cpus" 1.5 "$(rd "$D/cpus")"
check_eq "pids defaults to --default-pids" 512 "$(rd "$D/pids")"
expect_refusal EINVAL "memory -1" lim wr "$D/memory" -1
expect_refusal EINVAL "memory past 2^63" lim wr "$D/memory" 99999999999999999999G
expect_refusal EINVAL "memory in an unknown unit" lim wr "$D/memory" 512X
expect_refusal EINVAL "memory below 32M" lim wr "$D/memory" 1M
expect_refusal EINVAL "cpus abc" lim wr "$D/cpus" abc
expect_refusal EINVAL "cpus with four decimals" lim wr "$D/cpus" 0.0001
expect_refusal EINVAL "pids 10 (runsc needs more to boot)" lim wr "$D/pids" 10
# The blank line ends the key=value spec: the write itself acts, and fails.
expect_refusal EINVAL "a spec with memory=-1" "" wr "$MNT/sandboxes/new" "image=busybox
memory=-1
"
expect_refusal EINVAL "a spec with a word for cpus" "" wr "$MNT/sandboxes/new" '{"image":"busybox","cpus":"abc"}'
ok "memory 256M" wr "$D/memory" 256M
ok "cpus 1" wr "$D/cpus" 1
ok "pids 128" wr "$D/pids" 128
check_eq "memory reads back in bytes" $((256 * MIB)) "$(rd "$D/memory")"
ok "image, entrypoint, start of lim" bash -c "printf 'busybox\n' >'$D/image' &&
	printf '%s\n' '$COUNTER_ENTRYPOINT' >'$D/entrypoint' && printf '1\n' >'$D/start'"
ok "lim publishes its counter" poll_until 30 counter lim
expect_refusal EBUSY "memory after start" lim wr "$D/memory" 512M
check_eq "info.json memory" $((256 * MIB)) "$(jget "$D/info.json" .memory)"
check_eq "info.json cpus" 1 "$(jget "$D/info.json" .cpus)"
check_eq "info.json pids" 128 "$(jget "$D/info.json" .pids)"
check_eq "lim's host cgroup: memory limit" $((256 * MIB)) "$(cg_file lim memory memory.limit_in_bytes)"
check_eq "lim's host cgroup: CFS quota of 1 CPU" 100000 "$(cg_file lim cpu cpu.cfs_quota_us)"
# 128 tasks inside and a backstop of 3 host tasks each and 64 (lib/limits.h RES_PIDS_HOST_*).
check_eq "lim's host cgroup: pids.max, the backstop" $((128 * 3 + 64)) "$(cg_file lim pids pids.max)"
check_eq "lim's init and exec have RLIMIT_NPROC 128" "128 128
128 128" "$(sb_run lim "awk '/^Max processes/ { print \$3 \" \" \$4 }' /proc/1/limits /proc/self/limits")"
check_eq "/proc/meminfo inside shows the limit" "$((256 * 1024)) kB" \
	"$(sb_run lim "awk '/^MemTotal:/ { print \$2 \" \" \$3 }' /proc/meminfo")"

# --- fork keeps, raises, never lowers ----------------------------------------------
SNAP=$(snapshot_of lim)
check_match "a snapshot of lim" '^snap-' "$SNAP"
check_eq "the snapshot's info.json keeps memory" $((256 * MIB)) "$(jget "$MNT/snapshots/$SNAP/info.json" .memory)"
check_eq "the manifest records cpu_milli" 1000 "$(jget "$MNT/snapshots/$SNAP/manifest.json" .cpu_milli)"
F1=$(fork_of "$SNAP")
ok "the plain fork runs" poll_until 60 status_is "$F1" running
check_eq "the fork keeps memory" $((256 * MIB)) "$(jget "$MNT/sandboxes/$F1/info.json" .memory)"
check_eq "the fork keeps pids" 128 "$(jget "$MNT/sandboxes/$F1/info.json" .pids)"
check_eq "the fork's init and exec keep RLIMIT_NPROC 128" "128 128
128 128" "$(sb_run "$F1" "awk '/^Max processes/ { print \$3 \" \" \$4 }' /proc/1/limits /proc/self/limits")"
check_eq "the fork's cgroup has the limit" $((256 * MIB)) "$(cg_file "$F1" memory memory.limit_in_bytes)"
F2=$(wr_read "$MNT/snapshots/$SNAP/fork" "memory=512M cpus=2" | head -n 1)
ok "the raised fork runs" poll_until 60 status_is "$F2" running
check_eq "memory= on the fork raises it" $((512 * MIB)) "$(jget "$MNT/sandboxes/$F2/info.json" .memory)"
check_eq "cpus= on the fork raises it" 2 "$(jget "$MNT/sandboxes/$F2/info.json" .cpus)"
check_eq "the raised fork's cgroup" $((512 * MIB)) "$(cg_file "$F2" memory memory.limit_in_bytes)"
ok "the raised fork still counts" counter "$F2"
expect_refusal EINVAL "a fork with less memory" "" wr "$MNT/snapshots/$SNAP/fork" "memory=128M"
expect_refusal EINVAL "a fork with fewer cpus" "" wr "$MNT/snapshots/$SNAP/fork" "cpus=0.5"
expect_refusal EINVAL "a fork with pids= (not a fork word)" "" wr "$MNT/snapshots/$SNAP/fork" "pids=256"
ok "suspend the raised fork" wr "$MNT/sandboxes/$F2/suspend"
ok "resume it" wr "$MNT/sandboxes/$F2/resume"
check_eq "a resume keeps the raised limit" $((512 * MIB)) "$(cg_file "$F2" memory memory.limit_in_bytes)"
ok "the resumed fork counts" counter "$F2"
ok "terminate the forks" bash -c "printf '1\n' >'$MNT/sandboxes/$F1/terminate' &&
	printf '1\n' >'$MNT/sandboxes/$F2/terminate'"

# --- memory=128M ----------------------------------------------------------------------
ok "mkdir m128" mkdir "$MNT/sandboxes/m128"
ok "m128: memory 128M, image, start" bash -c "printf '128M\n' >'$MNT/sandboxes/m128/memory' &&
	printf 'busybox\n' >'$MNT/sandboxes/m128/image' && printf '1\n' >'$MNT/sandboxes/m128/start'"
before=$(avail_mib)
out=$(sb_exec m128 'dd if=/dev/zero of=/tmp/fill bs=1M count=300 2>&1; echo dd=$?' 2>&1)
note "exec: $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')"
ok "m128 ends within 30 s" poll_until 30 not_running m128
after=$(avail_mib)
check_eq "m128 is terminated" terminated "$(sb_status m128)"
check_match "m128's error says out of memory" '^out of memory' "$(rd "$MNT/sandboxes/m128/error")"
note "host MemAvailable: $before MiB before, $after MiB after"
# Unlimited, the 300 MiB would stay in the sandbox's memory; other work on the host moves it too.
if [ $((before - after)) -lt 300 ]; then pass "the host's free memory moved by less than the 300 MiB written"; else
	fail "the host's free memory moved by less than the 300 MiB written" "before $before, after $after"; fi
ok "lim runs on beside it" counter lim

# --- cpus=0.5 -------------------------------------------------------------------------
ok "mkdir cpu" mkdir "$MNT/sandboxes/cpu"
ok "cpu: cpus 0.5, two busy loops, start" bash -c "printf '0.5\n' >'$MNT/sandboxes/cpu/cpus' &&
	printf 'busybox\n' >'$MNT/sandboxes/cpu/image' &&
	printf '%s\n' 'while :; do :; done & while :; do :; done' >'$MNT/sandboxes/cpu/entrypoint' &&
	printf '1\n' >'$MNT/sandboxes/cpu/start'"
c0=$(cpu_seconds cpu)
t0=$(now_ms)
sleep 3
c1=$(cpu_seconds cpu)
t1=$(now_ms)
cores=$(awk -v a="$c0" -v b="$c1" -v ms=$((t1 - t0)) 'BEGIN { printf "%.2f", (b - a) * 1000 / ms }')
note "cpus=0.5 with two busy loops: $cores cores over $((t1 - t0)) ms"
check_match "metrics has the sandbox's CPU seconds" '^[0-9]' "$c1"
if awk -v c="$cores" 'BEGIN { exit !(c > 0 && c < 1) }'; then pass "the busy loops use less than one core"; else
	fail "the busy loops use less than one core" "$cores cores"; fi
ok "terminate cpu" wr "$MNT/sandboxes/cpu/terminate"

# --- pids=64 ---------------------------------------------------------------------------
ok "mkdir p64" mkdir "$MNT/sandboxes/p64"
ok "p64: pids 64, start" bash -c "printf '64\n' >'$MNT/sandboxes/p64/pids' &&
	printf 'busybox\n' >'$MNT/sandboxes/p64/image' && printf '1\n' >'$MNT/sandboxes/p64/start'"
# A subshell starts them, printing each count: sh gives up at the first fork
# refused, so the last count is how many started. Then the exec's own shell,
# with builtins only (no fork: the sandbox is at its limit), kills them, so that
# snapfs can fork what reads the output back. The sleeps write nowhere, or they
# would hold the exec's output open.
bomb='(n=0; while [ $n -lt 200 ]; do sleep 1000 </dev/null >/dev/null 2>&1 & echo $! >>/tmp/bomb;'
bomb="$bomb"' n=$((n + 1)); echo "started $n"; done);'
bomb="$bomb"' k=0; while read -r p; do kill -9 "$p" && k=$((k + 1)); done </tmp/bomb; echo "killed $k"'
out=$(sb_exec p64 "$bomb" 2>&1)
started=$(printf '%s\n' "$out" | awk '$1 == "started" { n = $2 } END { print n + 0 }')
note "pids=64: $started of 200 background processes started; exec: $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')"
check_match "the fork past the limit fails inside" "can't fork" "$out"
# 64 tasks of root inside: the init shell, its sleep and the exec's shells count too.
if [ "$started" -ge 48 ] && [ "$started" -lt 64 ]; then pass "about 64 of the 200 start"; else
	fail "about 64 of the 200 start" "$started started"; fi
check_match "the exec's shell lives on and kills them" "killed $started" "$out"
p64_forks() { [ "$(sb_run p64 'echo forked | cat')" = forked ]; }
ok "p64 answers another exec, which forks" poll_until 30 p64_forks
check_eq "p64 stays running" running "$(sb_status p64)"
check_eq "p64's error is empty" "" "$(rd "$MNT/sandboxes/p64/error")"
ok "the daemon answers" rd "$MNT/version"
ok "lim runs on beside it" counter lim

finish
