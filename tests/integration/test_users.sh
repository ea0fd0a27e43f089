#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317
# Other local users (docs/design.md, "Who may do what"). With -o allow_other and
# --allow-group: only root and the group create sandboxes; each user sees
# and touches only what it owns (a sandbox is its creator's, a snapshot its
# sandbox owner's, a fork its forker's), with modes the kernel enforces;
# root sees and does everything; the journals are root's; the owners
# survive a restart. Without allow_other the modes are the same and root
# works as before. Two throwaway users and a group are made for the test
# and removed on every path out of it.
. "$(dirname "$0")/lib.sh"

GROUP=snapfst$$
U1=snapfsa$$ # joins GROUP after the first checks
U2=snapfsb$$ # joins GROUP too: membership gives nobody another's sandboxes
MADE_USERS=()
MADE_GROUP=""

users_cleanup() {
	local rc=$? u
	for u in "${MADE_USERS[@]}"; do
		userdel "$u" >/dev/null 2>&1
		getent group "$u" >/dev/null && groupdel "$u" >/dev/null 2>&1
	done
	[ -n "$MADE_GROUP" ] && groupdel "$MADE_GROUP" >/dev/null 2>&1
	(exit "$rc")
	cleanup
}
trap users_cleanup EXIT

# as USER CMD...: CMD as USER (its own groups, from /etc/group), from /.
as() {
	local u=$1
	shift
	(cd / && timeout -k 5 "$OP_TIMEOUT" setpriv --reuid="$u" --regid="$(id -g "$u")" \
		--init-groups -- "$@")
}
# uwr USER FILE [TEXT] / uwr_read USER FILE [TEXT]: wr and wr_read as USER.
uwr() { as "$1" bash -c 'printf "%s\n" "$2" >"$1"' wr "$2" "${3-1}"; }
uwr_read() {
	as "$1" bash -c 'exec 3<>"$1" && printf "%s\n" "$2" >&3 && cat <&3' wr_read "$2" "${3-1}"
}
owner_mode() { stat -c '%u %a' "$1"; }
# umake USER NAME ENTRYPOINT [ENV]: make_sandbox as USER.
umake() {
	local d=$MNT/sandboxes/$2
	as "$1" mkdir "$d" && uwr "$1" "$d/image" busybox && uwr "$1" "$d/entrypoint" "$3" &&
		{ [ -z "${4:-}" ] || uwr "$1" "$d/env" "$4"; } && uwr "$1" "$d/start"
}
NL=$'\n'
# shared_file FILE [TEXT]: a file the test's users may write (TEXT its content), root reads back.
shared_file() {
	printf '%s' "${2-}" >"$1" && chmod 0666 "$1"
}

[ "$(id -u)" -eq 0 ] || bail "the test makes users and groups: run it as root"
command -v setpriv >/dev/null || bail "setpriv (util-linux) is needed"
groupadd --system "$GROUP" || bail "groupadd $GROUP"
MADE_GROUP=$GROUP
for u in "$U1" "$U2"; do
	useradd --system --no-create-home --user-group --shell /usr/sbin/nologin "$u" ||
		bail "useradd $u"
	MADE_USERS+=("$u")
done
UID1=$(id -u "$U1")
UID2=$(id -u "$U2")
# The test's dir is mktemp's 0700: the users must reach the mount point in it,
# and nothing else.
chmod 0711 "$T"
chmod 0700 "$STATE" "$IMAGES"

DAEMON_ARGS=(-o allow_other --allow-group "$GROUP")
start_daemon || bail "the daemon mounts with -o allow_other --allow-group $GROUP"
check_match "the mount has allow_other and default_permissions" \
	'default_permissions.*allow_other|allow_other.*default_permissions' \
	"$(awk -v m="$MNT" '$2 == m { print $4 }' /proc/mounts)"
ok "another user reads README" as "$U1" cat "$MNT/README"

# --- without the group, no user creates ------------------------------------------
expect_errno EACCES "mkdir by a user not in --allow-group" as "$U1" mkdir "$MNT/sandboxes/early"
expect_errno EACCES "sandboxes/new by a user not in --allow-group" \
	uwr "$U1" "$MNT/sandboxes/new" '{"image": "busybox"}'
check_lacks "nothing was created" early "$(ls "$MNT/sandboxes")"
expect_errno "EACCES" "another user reads events" as "$U1" cat "$MNT/events"
expect_errno "EACCES" "another user reads errors" as "$U1" cat "$MNT/errors"

for u in "$U1" "$U2"; do
	usermod -aG "$GROUP" "$u" || bail "usermod -aG $GROUP $u"
done

# --- the owner: create, use, snapshot, fork ----------------------------------------
B=$MNT/sandboxes/u1box
ok "U1 (in the group) makes a sandbox with mkdir" as "$U1" mkdir "$B"
ok "U1 sets its image" uwr "$U1" "$B/image" busybox
ok "U1 sets its env" uwr "$U1" "$B/env" "SECRET=u1-secret-value"
ok "U1 starts it" uwr "$U1" "$B/start"
check_eq "its directory is U1's, 0700" "$UID1 700" "$(owner_mode "$B")"
check_eq "env is U1's, 0600" "$UID1 600" "$(owner_mode "$B/env")"
check_eq "status is U1's, 0400" "$UID1 400" "$(owner_mode "$B/status")"
check_eq "start is U1's, 0600 (an action file reads empty)" "$UID1 600" "$(owner_mode "$B/start")"
check_eq "U1 reads its env" "SECRET=u1-secret-value" "$(as "$U1" cat "$B/env")"
check_eq "U1 execs in it" "$(printf 'hi-from-u1\nexit 0')" \
	"$(uwr_read "$U1" "$B/exec" 'echo hi-from-u1')"
check_eq "root/ (root's target) is U1's, 0700" "$UID1 700" "$(owner_mode "$B/root/")"
check_contains "U1 lists its sandbox's root/" bin "$(as "$U1" ls "$B/root")"
check_eq "U1 reads a world-readable file inside" "$(cat "$IMAGES/busybox/etc/passwd" 2>/dev/null || echo none)" \
	"$(as "$U1" cat "$B/root/etc/passwd" 2>/dev/null || echo none)"
S1=$(uwr_read "$U1" "$B/snapshot" | head -n 1)
check_match "U1 snapshots it" '^snap-[0-9a-f]{16}$' "$S1"
check_eq "the snapshot is U1's, 0700" "$UID1 700" "$(owner_mode "$MNT/snapshots/$S1")"
check_eq "U1 sees it completed" completed "$(as "$U1" cat "$MNT/snapshots/$S1/status")"
F1=$(uwr_read "$U1" "$MNT/snapshots/$S1/fork" | head -n 1)
check_match "U1 forks its snapshot" '^sbx-[0-9a-f]{16}$' "$F1"
check_eq "the fork is U1's" "$UID1 700" "$(owner_mode "$MNT/sandboxes/$F1")"
check_eq "the fork runs" running "$(as "$U1" cat "$MNT/sandboxes/$F1/status")"
N1=$(uwr_read "$U1" "$MNT/sandboxes/new" '{"image": "busybox"}' | head -n 1)
check_match "U1 makes a sandbox through sandboxes/new" '^sbx-[0-9a-f]{16}$' "$N1"
check_eq "that one is U1's" "$UID1 700" "$(owner_mode "$MNT/sandboxes/$N1")"
ok "U1 terminates it" uwr "$U1" "$MNT/sandboxes/$N1/terminate"
check_contains "U1's listing of sandboxes/ shows its own" u1box "$(as "$U1" ls "$MNT/sandboxes")"

# --- a second user sees and touches none of it ------------------------------------
listing=$(as "$U2" ls -a "$MNT/sandboxes")
check_lacks "U2's ls sandboxes/ lacks U1's sandbox" u1box "$listing"
check_lacks "U2's ls sandboxes/ lacks U1's fork" "$F1" "$listing"
check_lacks "U2's ls sandboxes/ lacks U1's sandboxes/new one" "$N1" "$listing"
index=$(as "$U2" cat "$MNT/sandboxes/index")
check_lacks "U2's sandboxes/index lacks U1's sandbox" u1box "$index"
check_lacks "U2's sandboxes/index lacks U1's fork" "$F1" "$index"
check_lacks "U2's ls snapshots/ lacks U1's snapshot" "$S1" "$(as "$U2" ls -a "$MNT/snapshots")"
check_lacks "U2's snapshots/index lacks U1's snapshot" "$S1" "$(as "$U2" cat "$MNT/snapshots/index")"
expect_errno "ENOENT|EACCES" "U2 stats U1's sandbox" as "$U2" stat "$B"
expect_errno "ENOENT|EACCES" "U2 execs in U1's sandbox" \
	uwr "$U2" "$B/exec" 'echo pwned >/tmp/pwned'
expect_errno "ENOENT|EACCES" "U2 reads U1's env" as "$U2" cat "$B/env"
expect_errno "ENOENT|EACCES" "U2 lists U1's root/" as "$U2" ls "$B/root"
expect_errno "ENOENT|EACCES" "U2 reads a file in U1's root/" as "$U2" cat "$B/root/bin/busybox"
expect_errno "ENOENT|EACCES" "U2 writes into U1's root/" as "$U2" bash -c "echo x >'$B/root/tmp/u2'"
expect_errno "ENOENT|EACCES" "U2 writes U1's env" uwr "$U2" "$B/env" "SECRET=changed"
expect_errno "ENOENT|EACCES" "U2 snapshots U1's sandbox" uwr "$U2" "$B/snapshot"
expect_errno "ENOENT|EACCES" "U2 terminates U1's sandbox" uwr "$U2" "$B/terminate"
expect_errno "ENOENT|EACCES" "U2 removes U1's sandbox" as "$U2" rmdir "$B"
expect_errno "ENOENT|EACCES" "U2 reads U1's snapshot" as "$U2" cat "$MNT/snapshots/$S1/info.json"
expect_errno "ENOENT|EACCES" "U2 forks U1's snapshot" uwr "$U2" "$MNT/snapshots/$S1/fork"
expect_errno "ENOENT|EACCES" "U2 deletes U1's snapshot" uwr "$U2" "$MNT/snapshots/$S1/delete"
expect_errno "ENOENT|EACCES|EPERM" "U2 rmdirs U1's snapshot" as "$U2" rmdir "$MNT/snapshots/$S1"
expect_errno EEXIST "U2 mkdirs U1's sandbox's name: it is taken" as "$U2" mkdir "$B"
check_eq "U1's sandbox still runs" running "$(sb_status u1box)"
check_eq "U1's env is unchanged" "SECRET=u1-secret-value" "$(rd "$B/env")"
check_eq "U1's sandbox has still one snapshot" "$S1" "$(ls "$B/snapshots")"
check_eq "U1's snapshot is still there" completed "$(snap_status "$S1")"
check_eq "U2's exec never ran" "exit 1" "$(sb_exec u1box 'test -e /tmp/pwned')"
check_lacks "U2's refusal is not written into U1's error file" exists "$(rd "$B/error")"
ok "U2 makes its own sandbox" as "$U2" mkdir "$MNT/sandboxes/u2box"
check_eq "it is U2's" "$UID2 700" "$(owner_mode "$MNT/sandboxes/u2box")"
check_lacks "U1 does not see U2's" u2box "$(as "$U1" ls "$MNT/sandboxes")"
expect_errno "ENOENT|EACCES" "U1 reads U2's status" as "$U1" cat "$MNT/sandboxes/u2box/status"

# --- root sees and does everything ---------------------------------------------------
listing=$(ls "$MNT/sandboxes")
check_contains "root's ls sandboxes/ has U1's sandbox" u1box "$listing"
check_contains "root's ls sandboxes/ has U2's sandbox" u2box "$listing"
check_contains "root's sandboxes/index has U1's fork" "$F1" "$(rd "$MNT/sandboxes/index")"
check_contains "root's snapshots/index has U1's snapshot" "$S1" "$(rd "$MNT/snapshots/index")"
check_eq "root reads U1's env" "SECRET=u1-secret-value" "$(rd "$B/env")"
check_eq "root execs in U1's sandbox" root-here "$(sb_run u1box 'echo root-here')"
S2=$(snapshot_of u1box)
check_match "root snapshots U1's sandbox" '^snap-[0-9a-f]{16}$' "$S2"
check_eq "that snapshot is U1's, as its sandbox" "$UID1" "$(stat -c %u "$MNT/snapshots/$S2")"
F2=$(fork_of "$S1")
check_match "root forks U1's snapshot" '^sbx-[0-9a-f]{16}$' "$F2"
check_eq "root's fork is root's" "0 700" "$(owner_mode "$MNT/sandboxes/$F2")"
check_lacks "U1 does not see root's fork" "$F2" "$(as "$U1" ls "$MNT/sandboxes")"
forks=$(as "$U1" cat "$MNT/snapshots/$S1/fork")
check_contains "U1's snapshot's fork file lists U1's fork" "$F1" "$forks"
check_lacks "and not root's" "$F2" "$forks"

# --- metrics: a user's own sandboxes, nobody else's (security-3 N5) ---------------------
# Running now: U1's u1box and F1, root's F2; U2 has u2box (not started) and no snapshot.
# labels_in TEXT: the sandbox="..." label values in TEXT, one a line, sorted.
labels_in() { printf '%s\n' "$1" | grep -oE 'sandbox="[^"]*"' | sort -u; }
m_root=$(rd "$MNT/metrics")
m_u1=$(as "$U1" cat "$MNT/metrics")
m_u2=$(as "$U2" cat "$MNT/metrics")
check_contains "U1 reads metrics" "# TYPE snapfs_sandbox_memory_bytes gauge" "$m_u1"
check_match "U1's metrics have its own sandbox's series" \
	'snapfs_sandbox_memory_bytes\{sandbox="u1box"\} [0-9]+' "$m_u1"
check_lacks "U1's metrics lack root's sandbox" "sandbox=\"$F2\"" "$m_u1"
check_eq "U1's metrics name U1's sandboxes alone" "" \
	"$(labels_in "$m_u1" | grep -vxF -e "sandbox=\"$F1\"" -e 'sandbox="u1box"' -e "sandbox=\"$N1\"")"
check_eq "U2's metrics name no sandbox" "" "$(labels_in "$m_u2")"
check_contains "U2's metrics count none of the others' running sandboxes" \
	'snapfs_sandboxes{state="running"} 0' "$m_u2"
check_contains "U2's metrics count its own sandbox" 'snapfs_sandboxes{state="created"} 1' "$m_u2"
check_contains "U2's metrics count none of U1's snapshots" \
	'snapfs_snapshots{state="completed"} 0' "$m_u2"
check_match "root's metrics have U1's sandbox" \
	'snapfs_sandbox_memory_bytes\{sandbox="u1box"\} [0-9]+' "$m_root"
check_match "root's metrics have its own fork" \
	"snapfs_sandbox_memory_bytes\\{sandbox=\"$F2\"\\} [0-9]+" "$m_root"
check_match "root's metrics count every running sandbox" \
	'snapfs_sandboxes\{state="running"\} ([3-9]|[1-9][0-9]+)' "$m_root"
if command -v promtool >/dev/null; then
	check_eq "promtool check metrics says nothing of U2's metrics" "" \
		"$(printf '%s\n' "$m_u2" | promtool check metrics 2>&1)"
fi
ok "root terminates its fork" wr "$MNT/sandboxes/$F2/terminate"
ok "root deletes U1's second snapshot" rmdir "$MNT/snapshots/$S2"
ok "root reads events" rd "$MNT/events"

# --- a user stays within the limits root sets (N6) -----------------------------------
# The daemon's bounds are its defaults here (--max-* not given: 2G, 2 CPUs,
# 1024 tasks). U1 may not lift a limit (0 is unlimited) nor go past a bound,
# in a limit file, a spec or a fork's words: EPERM, the value kept, the
# reason in error. Within the bounds it may; root may do both.
L=$MNT/sandboxes/u1lim
ok "U1 makes sandbox u1lim" as "$U1" mkdir "$L"
expect_refusal EPERM "U1 writes 0 (unlimited) to memory" u1lim uwr "$U1" "$L/memory" 0
check_eq "memory still reads the default" $((2 << 30)) "$(as "$U1" cat "$L/memory")"
check_contains "error names --max-memory" "--max-memory" "$(as "$U1" cat "$L/error")"
expect_refusal EPERM "U1 writes 1024T to memory" u1lim uwr "$U1" "$L/memory" 1024T
expect_refusal EPERM "U1 writes 3G (past the bound, 2G) to memory" u1lim uwr "$U1" "$L/memory" 3G
check_eq "memory still reads the default after both" $((2 << 30)) "$(as "$U1" cat "$L/memory")"
expect_refusal EPERM "U1 writes 0 to cpus" u1lim uwr "$U1" "$L/cpus" 0
expect_refusal EPERM "U1 writes 1024 to cpus" u1lim uwr "$U1" "$L/cpus" 1024
expect_refusal EPERM "U1 writes 0 to pids" u1lim uwr "$U1" "$L/pids" 0
check_eq "cpus and pids still read the defaults" "2 1024" \
	"$(as "$U1" cat "$L/cpus") $(as "$U1" cat "$L/pids")"
ok "U1 writes 512M to memory (within the bound)" uwr "$U1" "$L/memory" 512M
check_eq "memory reads 512M" $((512 << 20)) "$(as "$U1" cat "$L/memory")"
ok "U1 writes 0.5 to cpus" uwr "$U1" "$L/cpus" 0.5
ok "U1 writes 64 to pids" uwr "$U1" "$L/pids" 64
expect_refusal EPERM "U1's spec with memory=0" "" uwr "$U1" "$MNT/sandboxes/new" \
	'{"image": "busybox", "memory": "0"}'
expect_refusal EPERM "U1's spec with cpus=1024" "" uwr "$U1" "$MNT/sandboxes/new" \
	'{"image": "busybox", "cpus": "1024"}'
ok "U1 sets u1lim's image" uwr "$U1" "$L/image" busybox
ok "U1 sets u1lim's entrypoint" uwr "$U1" "$L/entrypoint" "sleep 100000"
ok "U1 starts u1lim" uwr "$U1" "$L/start"
SL=$(uwr_read "$U1" "$L/snapshot" | head -n 1)
check_match "U1 snapshots u1lim" '^snap-[0-9a-f]{16}$' "$SL"
expect_refusal EPERM "U1 forks with memory=1024T" "" \
	uwr "$U1" "$MNT/snapshots/$SL/fork" "memory=1024T cpus=1024 async"
expect_refusal EPERM "U1 forks with memory=0" "" uwr "$U1" "$MNT/snapshots/$SL/fork" "memory=0"
expect_refusal EPERM "U1 forks count=2 with cpus=3" "" \
	uwr "$U1" "$MNT/snapshots/$SL/fork" "count=2 cpus=3"
check_eq "none of the refused forks was made" "" \
	"$(as "$U1" cat "$MNT/snapshots/$SL/fork" 2>/dev/null)"
FL=$(uwr_read "$U1" "$MNT/snapshots/$SL/fork" "memory=1G cpus=2" | head -n 1)
check_match "U1 forks with memory=1G cpus=2 (within the bounds)" '^sbx-[0-9a-f]{16}$' "$FL"
check_eq "the fork has memory 1G" $((1 << 30)) "$(as "$U1" cat "$MNT/sandboxes/$FL/memory")"
ok "U1's fork runs" poll_until 30 status_is "$FL" running
ok "U1 makes sandbox u1lim2" as "$U1" mkdir "$MNT/sandboxes/u1lim2"
ok "root writes 0 to U1's u1lim2/memory" wr "$MNT/sandboxes/u1lim2/memory" 0
check_eq "it reads 0" 0 "$(rd "$MNT/sandboxes/u1lim2/memory")"
ok "root writes 1024 to U1's u1lim2/cpus" wr "$MNT/sandboxes/u1lim2/cpus" 1024
FR=$(wr_read "$MNT/snapshots/$SL/fork" "memory=0" | head -n 1)
check_match "root forks U1's snapshot with memory=0" '^sbx-[0-9a-f]{16}$' "$FR"
check_eq "root's fork is unlimited" 0 "$(rd "$MNT/sandboxes/$FR/memory")"
for sb in u1lim "$FL" "$FR"; do
	wr "$MNT/sandboxes/$sb/terminate" || fail "root terminates $sb"
done
ok "root removes U1's u1lim2" rmdir "$MNT/sandboxes/u1lim2"

# --- the owner removes what it owns --------------------------------------------------
ok "U1 rmdirs its snapshot" as "$U1" rmdir "$MNT/snapshots/$S1"
ok "U1 removes its terminated sandbox" as "$U1" rmdir "$MNT/sandboxes/$N1"

# --- a name taken again is another directory, whoever kept the old one -------------------
# U2 keeps a process in its sandbox's directory, removes the sandbox, and U1
# makes one of that name: the kernel must not take U1's directory for U2's
# removed one (which it marked dead), or nobody, root included, could use it.
CTL=$T/ctl
mkfifo "$CTL" && chmod 0666 "$CTL"
shared_file "$T/kept.out"
ok "U2 makes sandbox again" as "$U2" mkdir "$MNT/sandboxes/again"
as "$U2" bash -c 'cd "$1" && echo in >"$3" && read -r _ <"$2" &&
	{ cat image; echo "rc=$?"; } >"$3" 2>&1' kept "$MNT/sandboxes/again" "$CTL" "$T/kept.out" &
KEPT_PID=$!
BG_PIDS+=("$KEPT_PID")
ok "U2's process is in again" poll_until 30 grep -qx in "$T/kept.out"
ok "U2 removes again while a process of its own is in it" as "$U2" rmdir "$MNT/sandboxes/again"
ok "U1 makes sandbox again" as "$U1" mkdir "$MNT/sandboxes/again"
ok "U1 writes its image" uwr "$U1" "$MNT/sandboxes/again/image" busybox
check_eq "U1 reads its image back" busybox "$(as "$U1" cat "$MNT/sandboxes/again/image" 2>&1)"
check_contains "root lists U1's again" status "$(ls "$MNT/sandboxes/again" 2>&1)"
echo go >"$CTL"
wait "$KEPT_PID"
check_lacks "U2's kept directory does not show U1's sandbox" busybox "$(cat "$T/kept.out")"
check_contains "U2's kept directory is gone" "rc=1" "$(cat "$T/kept.out")"
ok "U1 removes again" as "$U1" rmdir "$MNT/sandboxes/again"

# --- a queued exec runs in the sandbox it was written to, or not at all -------------------
# An exec waits for a free exec worker (32, ops/jobs.c); meanwhile its
# sandbox may go and another user's of the same name come. U2 fills the
# workers with sleeps in a sandbox of its own, queues an exec in its sandbox
# `reused` and removes `reused`; U1 makes a sandbox `reused` with a secret in
# its env; then U2 frees the workers.
EXEC_WORKERS=32
ok "U2 makes sandbox busy" umake "$U2" busy "sleep 100000"
ok "U2 makes sandbox reused" umake "$U2" reused "sleep 100000"
for _ in $(seq "$EXEC_WORKERS"); do
	uwr "$U2" "$MNT/sandboxes/busy/exec" "sleep 100000" || break
done
shared_file "$T/race.out"
as "$U2" bash -c 'exec 3<>"$1" && printf "%s\n" "$2" >&3 && { cat <&3; echo "rc=$?"; } >"$3" 2>&1' \
	race "$MNT/sandboxes/reused/exec" 'echo "[$SECRET]"' "$T/race.out" &
RACE_PID=$!
BG_PIDS+=("$RACE_PID")
ok "the exec in reused is queued behind U2's sleeps" poll_until 60 grep -qx \
	"snapfs_jobs{queue=\"exec\"} $((EXEC_WORKERS + 1))" "$MNT/metrics"
ok "U2 terminates reused" uwr "$U2" "$MNT/sandboxes/reused/terminate"
ok "U2 removes reused" as "$U2" rmdir "$MNT/sandboxes/reused"
ok "U1 makes a sandbox reused with a secret" umake "$U1" reused "sleep 100000" \
	"SECRET=u1-reused-secret"
ok "U2 ends its sleeps" uwr "$U2" "$MNT/sandboxes/busy/terminate"
wait "$RACE_PID"
race=$(cat "$T/race.out")
check_lacks "U2's queued exec did not read U1's env" u1-reused-secret "$race"
check_lacks "U2's queued exec did not run at all" "exit 0" "$race"
check_eq "U1's reused runs" running "$(sb_status reused)"
check_eq "U2's exec left nothing in U1's error file" "rc=0" \
	"$(rd "$MNT/sandboxes/reused/error" 2>&1; echo "rc=$?")"
ok "root terminates U1's reused" wr "$MNT/sandboxes/reused/terminate"

# --- an exec's command line is on no process's command line ---------------------------------
# Every user reads every process's /proc/PID/cmdline, runsc's too: the command
# reaches runsc otherwise. U1 writes it from a file, so no process of U1's
# names it either.
ok "U1 makes sandbox quiet" umake "$U1" quiet "sleep 100000"
shared_file "$T/quiet.cmd" "sleep 100000 # u1-exec-secret$NL"
as "$U1" bash -c 'exec 3<>"$1" && cat "$2" >&3 && cat <&3 >/dev/null' \
	quiet "$MNT/sandboxes/quiet/exec" "$T/quiet.cmd" &
BG_PIDS+=("$!")
# cmdline_has ERE: some process's command line, as U2 reads them, matches ERE
# (searched once they are all read: the search's own command line holds it).
cmdline_has() {
	as "$U2" sh -c 'for f in /proc/[0-9]*/cmdline; do tr "\0" " " <"$f"; echo; done' \
		>"$T/cmdlines" 2>/dev/null
	grep -qE -- "$1" "$T/cmdlines"
}
# The command runs inside (the agent started it: no runsc process of its own), a
# second `sleep 100000` beside the entrypoint's.
quiet_runs() { [ "$(rd "$MNT/sandboxes/quiet/ps" | grep -c 'sleep 100000')" -ge 2 ]; }
ok "U1's exec is running in quiet" poll_until 60 quiet_runs
if cmdline_has u1-exec-secret; then
	fail "U2 does not read U1's exec command in a process's command line"
else
	pass "U2 does not read U1's exec command in a process's command line"
fi
ok "root terminates quiet" wr "$MNT/sandboxes/quiet/terminate"

# --- a wait is never answered with another user's sandbox ----------------------------------
# U2 keeps its sandbox's wait file open, removes the sandbox and reads the file
# again and again while U1 makes and removes sandboxes of that name: no read
# may return the status of one of U1's (before the fix one did, within a few
# hundred of U1's sandboxes; how soon is chance, that it never does is not).
WAIT_TRIES=400
shared_file "$T/wait.out"
shared_file "$T/wait.go"   # written once U2's sandbox is gone
shared_file "$T/wait.stop" # U1 writes into it once done
ok "U2 makes sandbox watched" as "$U2" mkdir "$MNT/sandboxes/watched"
as "$U2" perl -e '
	my ($wait, $out, $go, $stop) = @ARGV;
	open(my $fh, "<", $wait) or die "open $wait: $!";
	open(my $o, ">", $out) or die "open $out: $!";
	$o->autoflush(1);
	print $o "open\n";
	select(undef, undef, undef, 0.1) until -s $go;
	my $n = 0;
	while (!-s $stop) {
		$n++;
		sysseek($fh, 0, 0);
		my $got = sysread($fh, my $buf, 100);
		if ($got) { print $o "told: $buf"; exit 0; }
	}
	print $o "nothing in $n reads\n";' "$MNT/sandboxes/watched/wait" "$T/wait.out" "$T/wait.go" \
	"$T/wait.stop" &
WAIT_PID=$!
BG_PIDS+=("$WAIT_PID")
ok "U2 holds watched/wait open" poll_until 30 grep -qx open "$T/wait.out"
ok "U2 removes watched" as "$U2" rmdir "$MNT/sandboxes/watched"
echo go >"$T/wait.go"
as "$U1" perl -e '
	my ($dir, $out, $stop, $tries) = @ARGV;
	for (1 .. $tries) {
		mkdir($dir) or die "mkdir $dir: $!";
		rmdir($dir) or die "rmdir $dir: $!";
		last if system("grep", "-q", "told", $out) == 0;
	}
	open(my $s, ">", $stop) or die "open $stop: $!";
	print $s "done\n";' \
	"$MNT/sandboxes/watched" "$T/wait.out" "$T/wait.stop" "$WAIT_TRIES"
wait "$WAIT_PID"
check_lacks "U2's wait file never told U1's sandbox's status" told "$(cat "$T/wait.out")"
check_match "U2 read it all along" '^nothing in [0-9]+ reads$' "$(tail -n 1 "$T/wait.out")"

# --- the snapshots of a name are its owner's sandbox's, not an earlier owner's ---------------
# U1 suspends its sandbox heir (its secret in memory), terminates and removes
# it; U2 makes heir. The snapshot is not U2's sandbox's, not even to root;
# and when snapfs stops while U2's heir is suspending before its snapshot is
# recorded (the registry is left so, snapfs stopped, as a crash leaves it),
# the restart must not make U2's heir suspended from U1's snapshot.
ok "U1 makes heir with a secret in memory" umake "$U1" heir \
	"echo u1-memory-secret >/tmp/secret; sleep 100000"
ok "U1 suspends heir" uwr "$U1" "$MNT/sandboxes/heir/suspend"
HEIR_SNAP=$(suspend_snapshot_of heir)
check_match "U1's heir has its suspend snapshot" '^snap-[0-9a-f]{16}$' "$HEIR_SNAP"
ok "U1 terminates heir" uwr "$U1" "$MNT/sandboxes/heir/terminate"
ok "U1 removes heir" as "$U1" rmdir "$MNT/sandboxes/heir"
ok "U2 makes heir" umake "$U2" heir "sleep 100000"
check_lacks "root's ls of U2's heir/snapshots lacks U1's snapshot" "$HEIR_SNAP" \
	"$(ls "$MNT/sandboxes/heir/snapshots")"
expect_errno ENOENT "root finds no source link from U1's snapshot to U2's heir" \
	stat "$MNT/snapshots/$HEIR_SNAP/source"
stop_daemon
sqlite3 -cmd ".timeout 10000" "$STATE/registry.db" \
	"UPDATE sandboxes SET state = 'suspending' WHERE id = 'heir'"
start_daemon || bail "the daemon mounts again"
check_eq "after the restart U2's heir runs on" running "$(sb_status heir)"
# Were it suspended, from U1's snapshot, U2 would resume it and read U1's memory.
[ "$(sb_status heir)" = suspended ] && uwr "$U2" "$MNT/sandboxes/heir/resume"
check_lacks "U2 finds none of U1's memory in heir" u1-memory-secret \
	"$(uwr_read "$U2" "$MNT/sandboxes/heir/exec" 'cat /tmp/secret')"
ok "root terminates U2's heir" wr "$MNT/sandboxes/heir/terminate"

# --- a user's sandboxes and published ports are capped (N6) --------------------------
# --max-sandboxes-per-user: U2 may own two more than it does now (terminated
# ones count until removed); --max-ports-per-user 2. The (N+1)th sandbox, by
# mkdir, sandboxes/new or a fork (count=N whole), and the third port are
# EDQUOT and make nothing; root is not capped; rmdir and close make room.
owned() { as "$1" ls "$MNT/sandboxes" | grep -cvxE 'index|new'; }
N2=$(owned "$U2")
CAP=$((N2 + 2))
stop_daemon
DAEMON_ARGS=(-o allow_other --allow-group "$GROUP" --max-sandboxes-per-user "$CAP"
	--max-ports-per-user 2)
start_daemon || bail "the daemon mounts with --max-sandboxes-per-user $CAP --max-ports-per-user 2"
ok "U2 makes sandbox capa" umake "$U2" capa "sleep 100000"
SC=$(uwr_read "$U2" "$MNT/sandboxes/capa/snapshot" | head -n 1)
check_match "U2 snapshots capa" '^snap-[0-9a-f]{16}$' "$SC"
expect_refusal EDQUOT "U2 forks count=2 with one place left" "" \
	uwr "$U2" "$MNT/snapshots/$SC/fork" "count=2"
check_eq "U2 owns $((N2 + 1)) sandboxes: the fan-out made none" $((N2 + 1)) "$(owned "$U2")"
ok "U2 makes sandbox capb: its last place" as "$U2" mkdir "$MNT/sandboxes/capb"
expect_errno EDQUOT "U2's sandbox past --max-sandboxes-per-user by mkdir" \
	as "$U2" mkdir "$MNT/sandboxes/capc"
expect_refusal EDQUOT "U2's sandbox past the cap by sandboxes/new" "" \
	uwr "$U2" "$MNT/sandboxes/new" '{"image": "busybox"}'
expect_refusal EDQUOT "U2's sandbox past the cap by a fork" "" uwr "$U2" "$MNT/snapshots/$SC/fork"
check_eq "U2 still owns $CAP sandboxes" "$CAP" "$(owned "$U2")"
check_contains "errors names --max-sandboxes-per-user" "--max-sandboxes-per-user" \
	"$(rd "$MNT/errors" | tail -n 1)"
ok "root is not capped: it makes sandbox rootcap" mkdir "$MNT/sandboxes/rootcap"
mapfile -t RF < <(wr_read "$MNT/snapshots/$SC/fork" "count=3")
check_eq "root forks U2's snapshot count=3" 3 "${#RF[@]}"
for sb in "${RF[@]}"; do
	wr "$MNT/sandboxes/$sb/terminate" || fail "root terminates its fork $sb"
done
ok "U2 removes capb" as "$U2" rmdir "$MNT/sandboxes/capb"
ok "U2 makes sandbox capc in its place" as "$U2" mkdir "$MNT/sandboxes/capc"
ok "U2 publishes port 8001 of capc" uwr "$U2" "$MNT/sandboxes/capc/ports" 8001
ok "U2 publishes port 8002 of capa" uwr "$U2" "$MNT/sandboxes/capa/ports" 8002
expect_refusal EDQUOT "U2's third port past --max-ports-per-user" capc \
	uwr "$U2" "$MNT/sandboxes/capc/ports" 8003
check_lacks "capc does not publish 8003" 8003 "$(as "$U2" cat "$MNT/sandboxes/capc/ports")"
check_contains "capc's error names --max-ports-per-user" "--max-ports-per-user" \
	"$(as "$U2" cat "$MNT/sandboxes/capc/error")"
ok "root is not capped: it publishes 8003 and 8004 of rootcap" \
	bash -c "printf '8003\n' >'$MNT/sandboxes/rootcap/ports' && printf '8004\n' >'$MNT/sandboxes/rootcap/ports'"
ok "U2 closes 8001" uwr "$U2" "$MNT/sandboxes/capc/ports" "close 8001"
ok "U2 publishes 8003 in its place" uwr "$U2" "$MNT/sandboxes/capc/ports" 8003
ok "root removes rootcap" rmdir "$MNT/sandboxes/rootcap"
ok "root terminates capa" wr "$MNT/sandboxes/capa/terminate"
ok "U2 removes capc" as "$U2" rmdir "$MNT/sandboxes/capc"
DAEMON_ARGS=(-o allow_other --allow-group "$GROUP")

# --- the owners survive a restart ------------------------------------------------------
stop_daemon
start_daemon || bail "the daemon mounts again"
check_eq "after a restart U1's sandbox is U1's" "$UID1 700" "$(owner_mode "$B")"
check_lacks "after a restart U2 still does not see it" u1box "$(as "$U2" ls "$MNT/sandboxes")"
expect_errno "ENOENT|EACCES" "after a restart U2 still cannot read its env" as "$U2" cat "$B/env"
check_eq "after a restart U1 execs in it" "$(printf 'again\nexit 0')" \
	"$(uwr_read "$U1" "$B/exec" 'echo again')"

# --- without allow_other: the same modes, root as before, nobody else ------------------
stop_daemon
DAEMON_ARGS=()
start_daemon || bail "the daemon mounts without allow_other"
check_eq "without allow_other: U1's sandbox is U1's, 0700" "$UID1 700" "$(owner_mode "$B")"
check_eq "without allow_other: env 0600" "$UID1 600" "$(owner_mode "$B/env")"
check_eq "without allow_other: start 0600" "$UID1 600" "$(owner_mode "$B/start")"
check_eq "without allow_other: events is root's 0400" "0 400" "$(owner_mode "$MNT/events")"
check_eq "without allow_other: README 0444" "0 444" "$(owner_mode "$MNT/README")"
check_eq "without allow_other: sandboxes/ 1775" "0 1775" "$(owner_mode "$MNT/sandboxes")"
expect_errno EACCES "without allow_other: U1 is not let in at all" as "$U1" cat "$MNT/README"
check_eq "without allow_other: root execs in U1's sandbox" root-again \
	"$(sb_run u1box 'echo root-again')"
ok "without allow_other: root makes a sandbox" make_sandbox rootbox "sleep 100000"
check_eq "and it is root's" "0 700" "$(owner_mode "$MNT/sandboxes/rootbox")"
ok "without allow_other: root snapshots U1's sandbox" snapshot_of u1box

stop_daemon
finish
