#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317 # SC2317: functions called from the trap and by ok
# Each sandbox runs in its own cgroup under --cgroup-parent, never in the
# daemon's (docs/cgroups.md): a run's and a restore's runsc-sandbox and
# runsc-gofer are in <parent>/<container id> in every cgroup v1 hierarchy
# and under <parent> in the cgroup v2 tree, and none is in the daemon's.
# The daemon runs in a cgroup of this test's, as systemd starts a service in
# its own; SIGKILL of every process in that cgroup (a stop with systemd's
# default KillMode=control-group) leaves the sandboxes running, and a daemon
# restarted in it finds them running and answering. On a hybrid host, a
# sandbox whose move into the v2 tree fails says so in its error (a stop of
# the unit kills it, and the kill of the daemon's cgroup does).
. "$(dirname "$0")/lib.sh"

# Unique per run, so parallel tests never share a cgroup.
CG_PARENT=/$(basename "$T")-sandboxes
CG_DAEMON=/$(basename "$T")-daemon
# Every mounted cgroup hierarchy: v1 ones and the v2 tree.
mapfile -t CG_ROOTS < <(awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/self/mounts)
CG_MADE=() # cgroups this test created, removed on every path out

# The pids a cgroup holds, its descendants' too.
cg_pids() {
	[ -d "$1" ] || return 0
	find "$1" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u
}

# Remove cgroup dir $1 and what is below it, deepest first (runsc left some if killed).
cg_rmdir() {
	local _
	[ -d "$1" ] || return 0
	for _ in $(seq 1 50); do
		find "$1" -depth -type d -exec rmdir {} + 2>/dev/null
		[ -d "$1" ] || return 0
		sleep 0.1
	done
	echo "cleanup: cannot remove cgroup $1" >&2
}

# On every path out: the sandboxes (runsc removes their cgroups at delete),
# what is left of the test's daemon in its cgroup, then the cgroups.
cg_cleanup() {
	local d p
	teardown_host
	for d in "${CG_MADE[@]}"; do
		for p in $(cg_pids "$d"); do
			kill -KILL "$p" 2>/dev/null
		done
	done
	for d in "${CG_MADE[@]}"; do
		cg_rmdir "$d"
	done
}
# shellcheck disable=SC2154 # rc is set in the trap itself
trap 'rc=$?; cg_cleanup; (exit $rc); cleanup' EXIT

[ "${#CG_ROOTS[@]}" -gt 0 ] || bail "no cgroup hierarchy is mounted"
note "cgroup hierarchies: ${CG_ROOTS[*]}"

# The daemon's cgroup in every hierarchy; a v1 cpuset one needs its CPUs and nodes first.
make_daemon_cgroups "$CG_DAEMON" "$CG_PARENT" || bail "make the daemon's cgroup $CG_DAEMON"
daemon_dirs=("${DAEMON_CG_DIRS[@]}")
cat >"$T/snapfs-in-cgroup" <<EOF
#!/bin/sh
# The daemon, moved into the test's daemon cgroup before it starts, as systemd starts a service.
for d in ${daemon_dirs[*]}; do echo \$\$ >"\$d/cgroup.procs" || exit 1; done
exec "$SNAPFS_BIN" "\$@"
EOF
chmod +x "$T/snapfs-in-cgroup"
SNAPFS_BIN=$T/snapfs-in-cgroup
DAEMON_ARGS=(--cgroup-parent "$CG_PARENT")

start_daemon || bail "the daemon mounts, in the test's cgroup, with --cgroup-parent $CG_PARENT"
# The test's own premise: the daemon is in its cgroup everywhere, or the kill below proves nothing.
for root in "${CG_ROOTS[@]}"; do
	check_contains "the daemon is in $root$CG_DAEMON" "$DAEMON_PID" "$(cg_pids "$root$CG_DAEMON")"
done

start_counter_sandbox c1 || bail "start sandbox c1 (runsc run)"
tok=$(counter_token "$(counter c1)")
f1=$(fork_of "$(snapshot_of c1)")
check_match "a fork of a snapshot of c1 (runsc restore)" '^sbx-[0-9a-f]{16}$' "$f1"
[ -n "$f1" ] || bail "no fork"

# host_pids SB: the runsc-sandbox (runsc state's pid) and runsc-gofer (by its bundle) of SB.
host_pids() {
	local rid pid f
	rid=$(runtime_id "$1")
	pid=$(timeout 30 runsc --root "$RUNSC_ROOT" state "$rid" 2>/dev/null | jq -r '.pid // empty')
	[ -n "$pid" ] && echo "$pid"
	for f in /proc/[0-9]*/cmdline; do
		tr '\0' ' ' 2>/dev/null <"$f" |
			grep -q "^runsc-gofer .* --bundle=$STATE/sandboxes/$1/bundle " &&
			basename "$(dirname "$f")"
	done
}

# check_placed SB: each of SB's host processes is in SB's cgroup in every hierarchy:
# <parent>/<container id> in a v1 one (runsc's), under <parent> in the v2 tree.
check_placed() {
	local rid pids pid root want got
	rid=$(runtime_id "$1")
	mapfile -t pids < <(host_pids "$1")
	check_eq "$1: its runsc-sandbox and runsc-gofer are found" 2 "${#pids[@]}"
	for pid in "${pids[@]}"; do
		for root in "${CG_ROOTS[@]}"; do
			want=$root$CG_PARENT/$rid
			[ "$(stat -fc %T "$root")" = cgroup2fs ] && [ ! -d "$want" ] && want=$root$CG_PARENT
			got=$(grep -lx "$pid" -r --include=cgroup.procs "$root" 2>/dev/null | head -n 1)
			check_eq "$1: process $pid is in $want" "$want/cgroup.procs" "$got"
		done
	done
}
check_placed c1
check_placed "$f1"
rid_c1=$(runtime_id c1)
rid_f1=$(runtime_id "$f1")
sandbox_pids=$(for sb in c1 "$f1"; do host_pids "$sb"; done)

# What systemd does at `systemctl stop` with KillMode=control-group: SIGKILL
# every process in the service's cgroup, again until none is left.
killed=()
for _ in $(seq 1 20); do
	mapfile -t pids < <(for root in "${CG_ROOTS[@]}"; do cg_pids "$root$CG_DAEMON"; done | sort -u)
	[ "${#pids[@]}" -gt 0 ] || break
	kill -KILL "${pids[@]}" 2>/dev/null
	killed+=("${pids[@]}")
	sleep 0.2
done
note "killed by the cgroup: ${killed[*]}"
check_contains "the kill took the daemon" " $DAEMON_PID " " ${killed[*]} "
wait_daemon_exit 30
check_eq "the daemon is gone (SIGKILL)" 137 "$?"
# alive PID: PID exists and is no zombie.
alive() { [ -r "/proc/$1/stat" ] && [ "$(awk '{ print $3 }' "/proc/$1/stat")" != Z ]; }
for rid in "$rid_c1" "$rid_f1"; do
	check_eq "$rid: runsc still calls it running" running "$(runsc_state_of "$rid")"
done
for pid in $sandbox_pids; do
	ok "runsc-sandbox or runsc-gofer $pid is alive" alive "$pid"
done

unmount_mnt
start_daemon || bail "the daemon starts again in its cgroup on the same --state"
check_eq "after the restart: both are running" "running running" \
	"$(sb_status c1) $(sb_status "$f1")"
check_eq "c1 is the same process (token)" "$tok" "$(counter_token "$(counter c1)")"
check_eq "c1 answers an exec" hi "$(sb_run c1 'echo hi')"
check_eq "the fork answers an exec" rootfs "$(sb_run "$f1" 'cat /root/marker')"

# --- a sandbox whose move out of the daemon's v2 cgroup fails (hybrid hosts) -----------
# A --cgroup-parent whose v2 directory cannot be made (its parent allows no
# descendant): the move fails, the sandbox runs on in the daemon's cgroup,
# and its error says a stop of the unit kills it, as the kill then does.
V2_ROOT=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
if [ -n "$V2_ROOT" ] && [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then
	stop_daemon
	CG_LIMITED=/$(basename "$T")-limited
	mkdir "$V2_ROOT$CG_LIMITED" && CG_MADE+=("$V2_ROOT$CG_LIMITED")
	for root in "${CG_ROOTS[@]}"; do CG_MADE+=("$root$CG_LIMITED"); done
	echo 0 >"$V2_ROOT$CG_LIMITED/cgroup.max.descendants"
	DAEMON_ARGS=(--cgroup-parent "$CG_LIMITED/sandboxes")
	start_daemon || bail "the daemon starts with --cgroup-parent $CG_LIMITED/sandboxes"
	start_counter_sandbox c2 || bail "start sandbox c2"
	check_contains "c2's error says it stays in the daemon's cgroup" \
		"stays in the daemon's cgroup, where a stop of its unit kills it" "$(rd "$MNT/sandboxes/c2/error")"
	check_contains "errors.jsonl names c2's cgroup" "sandboxes/c2/cgroup" "$(cat "$STATE/errors.jsonl")"
	rid_c2=$(runtime_id c2)
	c2_pid=$(timeout 30 runsc --root "$RUNSC_ROOT" state "$rid_c2" | jq -r '.pid // empty')
	check_contains "c2's runsc-sandbox is in the daemon's v2 cgroup" "$c2_pid" "$(cg_pids "$V2_ROOT$CG_DAEMON")"
	for _ in $(seq 1 20); do
		mapfile -t pids < <(for root in "${CG_ROOTS[@]}"; do cg_pids "$root$CG_DAEMON"; done | sort -u)
		[ "${#pids[@]}" -gt 0 ] || break
		kill -KILL "${pids[@]}" 2>/dev/null
		sleep 0.2
	done
	wait_daemon_exit 30
	gone() { ! alive "$1"; }
	ok "the kill of the daemon's cgroup takes c2's runsc-sandbox" gone "$c2_pid"
	check_eq "c1 still runs (moved before)" running "$(runsc_state_of "$rid_c1")"
	unmount_mnt
	DAEMON_ARGS=(--cgroup-parent "$CG_PARENT")
	start_daemon || bail "the daemon starts again"
fi

stop_daemon
finish
