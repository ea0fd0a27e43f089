#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Atomic-replace writers on control and setting files (issue 24, item 1;
# docs/control-files.md, "Atomic replace"). `sed -i`, Python's tempfile +
# os.replace and Ansible write a temporary file beside the target and
# rename(2) it onto the target; `mv` from another filesystem and `install`
# unlink the target and create it anew with O_EXCL. Each works as an
# in-place write would, a refused value gives the write's errno and leaves
# no scratch file, scratch files are their creator's alone, go after their
# last close, and are bounded; nothing else can be created in the tree.
#
# Before (main at f327081): sed -i failed ("couldn't open temporary file:
# Permission denied"), mv EPERM, install EPERM, Python EACCES, Ansible
# failed.
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"
ok "mkdir sandboxes/c" mkdir "$MNT/sandboxes/c"
C=$MNT/sandboxes/c
ok "image busybox" wr "$C/image" busybox
ok "memory 512M" wr "$C/memory" 512M

# scratch_left: names in c that are not the tree's own (a scratch file left behind).
scratch_left() {
	local f
	for f in "$C"/* "$C"/.[!.]*; do
		[ -e "$f" ] || continue
		case ${f##*/} in
		root | status | info.json | error | image | entrypoint | env | gpu | memory | cpus | pids) ;;
		timeout | autosnapshot | network | egress | ports | start | snapshot | suspend) ;;
		resume | terminate | exec | wait | console | usage | ps | snapshots | parent) ;;
		*) echo "${f##*/}" ;;
		esac
	done
}

# --- sed -i --------------------------------------------------------------------------
ok "sed -i on memory" sed -i 's/.*/1G/' "$C/memory"
check_eq "memory reads what sed -i wrote" 1073741824 "$(rd "$C/memory")"
ok "env A=1 B=2" wr "$C/env" $'A=1\nB=2'
ok "sed -i on env" sed -i 's/^A=1$/A=9/' "$C/env"
check_eq "env reads what sed -i wrote" $'A=9\nB=2' "$(rd "$C/env")"
ok "entrypoint" wr "$C/entrypoint" 'sleep 1'
ok "sed -i on entrypoint" sed -i 's/sleep 1/sleep 2/' "$C/entrypoint"
check_eq "entrypoint reads what sed -i wrote" 'sleep 2' "$(rd "$C/entrypoint")"
check_eq "sed -i left no scratch file" "" "$(scratch_left)"

# --- mv ------------------------------------------------------------------------------
ok "a temp file in the sandbox's directory" bash -c 'printf "300 suspend\n" >"$1"' - "$C/t.tmp"
ok "mv t.tmp timeout (same directory)" mv "$C/t.tmp" "$C/timeout"
check_eq "timeout reads what mv brought" "300 suspend" "$(rd "$C/timeout")"
printf '600\n' >"$T/t2"
ok "mv /tmp-file timeout (another filesystem)" mv "$T/t2" "$C/timeout"
check_eq "timeout reads what mv from another filesystem brought" "600 terminate" \
	"$(rd "$C/timeout")"
check_eq "mv left no scratch file" "" "$(scratch_left)"

# --- install -------------------------------------------------------------------------
printf '268435456\n' >"$T/m"
ok "install -m 600 f memory" install -m 600 "$T/m" "$C/memory"
check_eq "memory reads what install wrote" 268435456 "$(rd "$C/memory")"
check_eq "memory is still the tree's file, 0600" "600" "$(stat -c %a "$C/memory")"

# --- Python tempfile + os.replace -----------------------------------------------------
ok "Python NamedTemporaryFile(dir=…, delete=False) + os.replace onto entrypoint" python3 -c '
import os, sys, tempfile
d = sys.argv[1]
with tempfile.NamedTemporaryFile("w", dir=d, delete=False) as f:
    f.write("echo replaced\n")
os.replace(f.name, os.path.join(d, "entrypoint"))' "$C"
check_eq "entrypoint reads what os.replace brought" 'echo replaced' "$(rd "$C/entrypoint")"
check_eq "Python left no scratch file" "" "$(scratch_left)"

# --- a refusal through rename: the write's errno, its report, and no scratch file left ---
ok "junk in a temp file" bash -c 'printf "junk\n" >"$1"' - "$C/j.tmp"
# (mv says EINVAL from rename(2) in its own words: os.replace prints the errno.)
replace() { python3 -c 'import os, sys; os.replace(sys.argv[1], sys.argv[2])' "$@"; }
expect_refusal EINVAL "rename(2) of j.tmp onto memory (junk)" c replace "$C/j.tmp" "$C/memory"
check_eq "memory unchanged by the refused rename" 268435456 "$(rd "$C/memory")"
check_eq "the refused rename left no scratch file" "" "$(scratch_left)"
expect_errno EINVAL "printf junk > memory: the same errno" wr "$C/memory" junk
ok "a temp file for a read-only target" bash -c 'printf "running\n" >"$1"' - "$C/s.tmp"
expect_errno EACCES "mv s.tmp status (read-only)" mv "$C/s.tmp" "$C/status"
check_eq "the refused rename onto status left no scratch file" "" "$(scratch_left)"
# A link (root) has no write, whatever its 0777 says: EACCES, not a write through it
# (before: the daemon called the row's missing write and died, SEGV).
ok "a temp file for a link" bash -c 'printf "x\n" >"$1"' - "$C/l.tmp"
expect_errno EACCES "rename(2) of l.tmp onto root (a link)" replace "$C/l.tmp" "$C/root"
ok "the daemon still answers" test -f "$C/status"
check_eq "root is still the link" .root "$(readlink "$C/root")"
check_eq "the refused rename onto root left no scratch file" "" "$(scratch_left)"

# A bound file is applied by its writer's close only: a child that inherited the
# descriptor and exits (/bin/true) applies nothing (before: junk refused twice).
n_errors=$(count_lines "$MNT/errors")
ok "rm memory, then a group with a child writes it" bash -c \
	'rm "$1" && { echo junk; /bin/true; echo 256M; } >"$1"' - "$C/memory"
check_eq "the junk line was refused once" $((n_errors + 1)) "$(count_lines "$MNT/errors")"
check_eq "memory unchanged by the refused write" 268435456 "$(rd "$C/memory")"

# --- Ansible copy and lineinfile, twice each: the second run changes nothing ----------
ansible_run() {
	ANSIBLE_LOCALHOST_WARNING=false ANSIBLE_NOCOLOR=1 timeout -k 5 120 \
		ansible localhost -c local -i localhost, -m "$1" -a "$2" 2>&1
}
# ansible_twice DESC MODULE ARGS FILE EXPECTED
ansible_twice() {
	local out
	out=$(ansible_run "$2" "$3")
	check_match "$1: first run CHANGED" 'CHANGED' "$out"
	check_eq "$1: the file reads what Ansible wrote" "$5" "$(rd "$4")"
	out=$(ansible_run "$2" "$3")
	check_match "$1: second run SUCCESS, changed false" 'SUCCESS.*"changed": false' \
		"$(tr -d '\n' <<<"$out")"
}
if command -v ansible >/dev/null; then
	for f in memory env entrypoint timeout; do
		case $f in
		memory) v=536870912 ;;
		env) v=$'A=9\nB=2\nC=3' ;;
		entrypoint) v='sleep 3' ;;
		timeout) v='300 terminate' ;;
		esac
		ansible_twice "ansible copy to $f" copy \
			"$(jq -cn --arg c "$v"$'\n' --arg d "$C/$f" '{content: $c, dest: $d}')" \
			"$C/$f" "$v"
	done
	# image has one value here (busybox, the one image): already what is asked.
	out=$(ansible_run copy "$(jq -cn --arg d "$C/image" '{content: "busybox\n", dest: $d}')")
	check_match "ansible copy to image, as it is: SUCCESS, changed false" \
		'SUCCESS.*"changed": false' "$(tr -d '\n' <<<"$out")"
	ansible_twice "ansible lineinfile on env" lineinfile \
		"$(jq -cn --arg p "$C/env" '{path: $p, regexp: "^D=", line: "D=4"}')" \
		"$C/env" $'A=9\nB=2\nC=3\nD=4'
	ansible_twice "ansible lineinfile on memory" lineinfile \
		"$(jq -cn --arg p "$C/memory" '{path: $p, regexp: ".*", line: "268435456"}')" \
		"$C/memory" 268435456
	# unsafe_writes: Ansible writes the file in place; timeout reads back the setting, so
	# the second run is ok (it re-armed the deadline every run when timeout read a countdown).
	ansible_twice "ansible copy to timeout with unsafe_writes" copy \
		"$(jq -cn --arg d "$C/timeout" '{content: "600 suspend\n", dest: $d, unsafe_writes: true}')" \
		"$C/timeout" '600 suspend'
	check_eq "Ansible left no scratch file" "" "$(scratch_left)"
else
	skip "ansible (ansible-core) is not installed: scripts/setup.sh --test"
fi

# --- nothing else is created -------------------------------------------------------
expect_errno EPERM "mkdir in a sandbox's directory" mkdir "$C/d"
expect_errno EACCES "mkfifo in a sandbox's directory" mkfifo "$C/p"
expect_errno EPERM "symlink in a sandbox's directory" ln -s memory "$C/l"
expect_errno EPERM "hard link of a scratch file" bash -c \
	'printf x >"$1/h.tmp" && ln "$1/h.tmp" "$1/h2"; rc=$?; rm -f "$1/h.tmp"; exit $rc' - "$C"
expect_errno EACCES "a file created in sandboxes/" touch "$MNT/sandboxes/x"
expect_errno EACCES "a file created at the top" touch "$MNT/x"
expect_errno EACCES "a file created in sandboxes/c/snapshots/" touch "$C/snapshots/x"
expect_errno EPERM "rename of a control file" mv "$C/status" "$C/status2"
# c is created: an unlink of its files is rm -rf's, taken and changing nothing (test_rm_rf.sh).
ok "unlink of a created sandbox's read-only file is taken" rm -f "$C/status"
check_eq "and status is still there" created "$(rd "$C/status")"
expect_errno EPERM "unlink of a file outside a sandbox" rm -f "$MNT/version"
expect_errno EPERM "chmod of a read-only file" chmod 0777 "$C/status"
ok "chmod of a writable file is taken (and ignored)" chmod 0644 "$C/memory"
check_eq "memory keeps its mode" "600" "$(stat -c %a "$C/memory")"

# --- bounds: 16 files a user, 1 MiB a file (EFBIG), 4 MiB in all (EDQUOT) ---------------
ok "16 scratch files" bash -c 'for i in $(seq 1 16); do : >"$1/f$i.tmp" || exit; done' - "$C"
expect_errno EDQUOT "a 17th scratch file" touch "$C/f17.tmp"
ok "rm of the 16 scratch files" bash -c 'rm "$1"/f*.tmp' - "$C"
check_eq "rm took them" "" "$(scratch_left)"
expect_errno EFBIG "a scratch file over 1 MiB" \
	bash -c 'head -c 1048577 /dev/zero >"$1/big.tmp"; rc=$?; rm -f "$1/big.tmp"; exit $rc' - "$C"
ok "four scratch files of 1 MiB" \
	bash -c 'for i in 1 2 3 4; do head -c 1048576 /dev/zero >"$1/m$i.tmp" || exit; done' - "$C"
expect_errno EDQUOT "a fifth MiB" bash -c 'head -c 1 /dev/zero >"$1/m5.tmp"' - "$C"
ok "rm of the MiB files" bash -c 'rm -f "$1"/m*.tmp' - "$C"

# --- gone after the last close ----------------------------------------------------
ok "a scratch file written and closed" bash -c 'printf "x\n" >"$1"' - "$C/gone.tmp"
check_eq "it is there at once (for a rename)" "x" "$(rd "$C/gone.tmp")"
sleep 11
expect_errno ENOENT "10 s after its last close it is gone" stat "$C/gone.tmp"
check_eq "no scratch file left" "" "$(scratch_left)"
check_eq "c is still created" created "$(sb_status c)"

# --- another user: scratch files are their creator's alone -------------------------
stop_daemon
U=nobody
G=$(id -gn "$U")
# The test's dir is mktemp's 0700: the user must reach the mount point in it, and nothing else.
chmod 0711 "$T"
chmod 0700 "$STATE" "$IMAGES"
DAEMON_ARGS=(-o allow_other --allow-group "$G")
start_daemon || bail "the daemon mounts with -o allow_other --allow-group $G"
as() { (cd / && setpriv --reuid="$U" --regid="$G" --clear-groups "$@"); }
ok "mkdir sandboxes/u as $U" as mkdir "$MNT/sandboxes/u"
ok "$U's scratch file" as bash -c 'printf "1G\n" >"$1"' - "$MNT/sandboxes/u/mine.tmp"
ok "$U sees it" as cat "$MNT/sandboxes/u/mine.tmp"
expect_errno ENOENT "root does not see $U's scratch file" stat "$MNT/sandboxes/u/mine.tmp"
check_lacks "root's listing lacks it" mine.tmp "$(ls -A "$MNT/sandboxes/u")"
ok "$U renames it onto memory" as mv "$MNT/sandboxes/u/mine.tmp" "$MNT/sandboxes/u/memory"
check_eq "u's memory reads what $U wrote" 1073741824 "$(rd "$MNT/sandboxes/u/memory")"
ok "$U: sed -i on u's env" as bash -c 'printf "K=1\n" >"$1" && sed -i s/K=1/K=2/ "$1"' - \
	"$MNT/sandboxes/u/env"
check_eq "u's env reads what $U's sed -i wrote" "K=2" "$(rd "$MNT/sandboxes/u/env")"

stop_daemon
finish
