# shellcheck shell=bash disable=SC2016
# lib.sh - what every integration test sources first.
#
# A test gets its own temp dir $T holding state/ ($STATE), mnt/ ($MNT) and
# images/ ($IMAGES, with the busybox image), starts build/asan/snapfs on them
# with start_daemon, checks behaviour with ok / check_eq / expect_errno (or
# skips one this run cannot make, with skip), and ends with finish, which
# prints "N skipped" when any were, then the result line "N passed, N failed".
# A trap on EXIT, INT and TERM kills the test's runsc sandboxes, unmounts,
# ends the daemon (by pid) and removes $T, on every path out of the test.
#
# Environment: SNAPFS_BIN (default build/asan/snapfs), OP_TIMEOUT (seconds a
# single operation may take before the test gives up on it, default 300),
# SNAPFS_TEST_CACHE (a dir where run.sh keeps the busybox image built once per
# run), SNAPFS_TEST_LOGS (where a failing test's daemon log is kept).

set -u

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SNAPFS_BIN=${SNAPFS_BIN:-$REPO/build/asan/snapfs}
OP_TIMEOUT=${OP_TIMEOUT:-300}
TEST_NAME=$(basename "$0" .sh)

T=$(mktemp -d "${TMPDIR:-/tmp}/snapfs-$TEST_NAME.XXXXXX")
STATE=$T/state
MNT=$T/mnt
IMAGES=$T/images
RUNSC_ROOT=$STATE/runsc
DAEMON_LOG=$T/daemon.log
DAEMON_PID=""
DAEMON_ARGS=()   # more daemon options (--store, --runsc) a test may set
BG_PIDS=()      # background helpers (blocked readers, writers) the test started
UNFREEZE_DIRS=() # dirs a test made immutable (chattr +i); made mutable again on exit
PASSED=0
FAILED=0
SKIPPED=0
mkdir -p "$STATE" "$MNT" "$IMAGES"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# --- results -----------------------------------------------------------------

. "$(dirname "${BASH_SOURCE[0]}")/lib_results.sh"

# ok DESC CMD...: CMD succeeds.
ok() {
	local desc=$1 out
	shift
	if out=$("$@" 2>&1); then
		pass "$desc"
	else
		fail "$desc" "command: $*" "$out"
	fi
}

# check_eq DESC EXPECTED ACTUAL
check_eq() {
	if [ "$2" = "$3" ]; then
		pass "$1"
	else
		fail "$1" "expected: $2" "got:      $3"
	fi
}

# check_match DESC ERE TEXT: TEXT matches the extended regular expression ERE.
check_match() {
	if [[ $3 =~ $2 ]]; then
		pass "$1"
	else
		fail "$1" "expected to match: $2" "got: $3"
	fi
}

# check_contains DESC NEEDLE TEXT / check_lacks DESC NEEDLE TEXT
check_contains() {
	if [[ $3 == *"$2"* ]]; then
		pass "$1"
	else
		fail "$1" "expected to contain: $2" "got: $3"
	fi
}
check_lacks() {
	if [[ $3 != *"$2"* ]]; then
		pass "$1"
	else
		fail "$1" "expected not to contain: $2" "got: $3"
	fi
}

errno_text() {
	case $1 in
	EPERM) echo "Operation not permitted" ;;
	ENOENT) echo "No such file or directory" ;;
	EINTR) echo "Interrupted system call" ;;
	EIO) echo "Input/output error" ;;
	EACCES) echo "Permission denied" ;;
	EBUSY) echo "Device or resource busy" ;;
	EEXIST) echo "File exists" ;;
	EADDRINUSE) echo "Address already in use" ;;
	EINVAL) echo "Invalid argument" ;;
	EFBIG) echo "File too large" ;;
	EAGAIN) echo "Resource temporarily unavailable" ;;
	ENOSPC) echo "No space left on device" ;;
	ENOTEMPTY) echo "Directory not empty" ;;
	EROFS) echo "Read-only file system" ;;
	EDQUOT) echo "Disk quota exceeded" ;;
	*) echo "unknown errno $1" ;;
	esac
}

# expect_errno ERRNO DESC CMD...: CMD fails and its stderr carries strerror(ERRNO)
# (the shell, printf and coreutils all print it). ERRNO may list choices: EINVAL|EBUSY.
expect_errno() {
	local errnos=$1 desc=$2 errno err rc
	shift 2
	err=$("$@" 2>&1 >/dev/null)
	rc=$?
	if [ "$rc" -ne 0 ]; then
		for errno in ${errnos//|/ }; do
			if [[ $err == *"$(errno_text "$errno")"* ]]; then
				pass "$desc: $errno"
				return
			fi
		done
	fi
	fail "$desc: expected $errnos" "command: $*" "exit status $rc" "stderr: $err"
}

# expect_refusal ERRNO DESC SANDBOX CMD...: as expect_errno, and then: the
# refusal is explained (a new valid line in `errors` and, when SANDBOX is not
# "", a sentence in its `error` file), the daemon still answers, and the
# sandbox's status is what it was before.
expect_refusal() {
	local errno=$1 desc=$2 sb=$3 before="" lines0 lines1 last
	shift 3
	lines0=$(count_lines "$MNT/errors")
	[ -n "$sb" ] && before=$(sb_status "$sb")
	expect_errno "$errno" "$desc" "$@"
	lines1=$(count_lines "$MNT/errors")
	last=$(rd "$MNT/errors" | tail -n 1)
	if [ "$lines1" -gt "$lines0" ] && jq -e '.error | length > 0' >/dev/null 2>&1 <<<"$last"; then
		pass "$desc: a line with the reason in errors"
	else
		fail "$desc: a line with the reason in errors" "lines before $lines0, after $lines1" \
			"last: $last"
	fi
	ok "$desc: the daemon still answers" rd "$MNT/version"
	if [ -n "$sb" ]; then
		check_match "$desc: a sentence in sandboxes/$sb/error" '[[:alpha:]]' \
			"$(rd "$MNT/sandboxes/$sb/error")"
		check_eq "$desc: status of $sb unchanged" "$before" "$(sb_status "$sb")"
	fi
}

# finish: the result line; the exit status says whether anything failed.
finish() {
	if [ "$FAILED" -gt 0 ] && [ -s "$DAEMON_LOG" ]; then
		echo "--- last lines of the daemon log ($DAEMON_LOG) ---"
		tail -n 40 "$DAEMON_LOG"
		echo "---"
	fi
	[ "$SKIPPED" -gt 0 ] && echo "$SKIPPED skipped"
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" -eq 0 ]
	exit
}

# bail DESC: a failure the rest of the test cannot go on from.
bail() {
	fail "$@"
	finish
}

# --- small tools ---------------------------------------------------------------

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# rd FILE: cat that gives up after 30 s (a hung daemon must not hang the suite).
rd() { timeout -k 5 30 cat "$1"; }

count_lines() { rd "$1" | wc -l; }

# wr FILE [TEXT]: write TEXT (default 1) and a newline in one write(2), as
# `echo TEXT > FILE` does; the status is the write's (0, or 1 with the shell's
# "write error: <strerror>" on stderr). Gives up after OP_TIMEOUT seconds.
wr() { timeout -k 5 "$OP_TIMEOUT" bash -c 'printf "%s\n" "$2" >"$1"' wr "$1" "${2-1}"; }

# wr_read FILE [TEXT]: write TEXT, then read the answer on the same open file
# (the new snapshot's or sandbox's id, or an exec's output).
wr_read() {
	timeout -k 5 "$OP_TIMEOUT" bash -c 'exec 3<>"$1" && printf "%s\n" "$2" >&3 && cat <&3' \
		wr_read "$1" "${2-1}"
}

# poll_until SECS CMD...: run CMD every 0.2 s until it succeeds; fails after SECS.
poll_until() {
	local deadline=$(($(date +%s) + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -ge "$deadline" ] && return 1
		sleep 0.2
	done
}

jget() { jq -r "$2" <"$1"; }

is_mounted() { awk -v m="$MNT" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }

# --- the tree ------------------------------------------------------------------

sb_status() { rd "$MNT/sandboxes/$1/status"; }
snap_status() { rd "$MNT/snapshots/$1/status"; }
status_is() { [ "$(rd "$MNT/sandboxes/$1/status")" = "$2" ]; }
snap_status_is() { [ "$(rd "$MNT/snapshots/$1/status")" = "$2" ]; }
# The sandbox's wait file: blocks while it is transitional, then prints the status.
sb_wait() { timeout -k 5 "$OP_TIMEOUT" cat "$MNT/sandboxes/$1/wait"; }
snap_wait() { timeout -k 5 "$OP_TIMEOUT" cat "$MNT/snapshots/$1/wait"; }
runtime_id() { jget "$MNT/sandboxes/$1/info.json" '.runtime_id // .runtime // empty'; }

# sb_exec SB CMDLINE: the exec file's answer (output, then "exit N").
sb_exec() { wr_read "$MNT/sandboxes/$1/exec" "$2"; }
# sb_run SB CMDLINE: only the output, and success only on "exit 0".
sb_run() {
	local out
	out=$(sb_exec "$1" "$2") || return 1
	printf '%s\n' "$out" | sed '$d'
	[ "$(printf '%s\n' "$out" | tail -n 1)" = "exit 0" ]
}

# The entrypoint most tests run: state in memory (a counter and a random token
# made at start, so a restarted process is told apart from a restored one), on
# the root filesystem (/root/marker) and in the in-memory /tmp (/tmp/marker).
# Every second it publishes "TOKEN COUNT" in /tmp/counter.
COUNTER_ENTRYPOINT='echo rootfs > /root/marker; echo tmpfs > /tmp/marker
tok=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d " \n"); i=0
while :; do i=$((i + 1)); echo "$tok $i" > /tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 1; done'
COUNTER_ENTRYPOINT=$(printf '%s' "$COUNTER_ENTRYPOINT" | tr '\n' ';')

# counter SB: "TOKEN COUNT" as the sandbox's entrypoint last published it.
counter() { sb_run "$1" 'cat /tmp/counter'; }
counter_token() { printf '%s\n' "${1% *}"; }
counter_count() { printf '%s\n' "${1##* }"; }
counter_at_least() {
	local c
	c=$(counter "$1") || return 1
	[ "$(counter_count "$c")" -ge "$2" ]
}

# step DESC CMD...: one step of a setup chain (make_sandbox): when CMD fails,
# a note says which step it was and what it printed.
step() {
	local desc=$1 out
	shift
	out=$("$@" 2>&1) && return 0
	note "$desc failed${out:+: $out}"
	return 1
}

# make_sandbox NAME ENTRYPOINT [ENV]: mkdir, image busybox, entrypoint (and
# env), then a synchronous start. Fails at the first step that fails, and
# says which.
make_sandbox() {
	local d=$MNT/sandboxes/$1
	step "mkdir sandboxes/$1" mkdir "$d" && step "image of $1" wr "$d/image" busybox &&
		step "entrypoint of $1" wr "$d/entrypoint" "$2" &&
		{ [ -z "${3:-}" ] || step "env of $1" wr "$d/env" "$3"; } &&
		step "start of $1" wr "$d/start"
}

# start_counter_sandbox NAME: a running sandbox with COUNTER_ENTRYPOINT whose
# counter has been published at least once.
start_counter_sandbox() {
	make_sandbox "$1" "$COUNTER_ENTRYPOINT" &&
		step "the first counter of $1 within 30 s" poll_until 30 counter "$1"
}

# snapshot_of SB [WORDS]: take a snapshot; print its id (read on the same open file).
snapshot_of() { wr_read "$MNT/sandboxes/$1/snapshot" "${2-1}" | head -n 1; }
# snapshot_between SB: SB started with the counter entrypoint, /root/state "before",
# a completed snapshot, then "after": sets snap (its id) and tok (its counter's token).
# shellcheck disable=SC2034 # snap and tok: the caller's
snapshot_between() {
	start_counter_sandbox "$1" || bail "start sandbox $1 with the counter entrypoint"
	poll_until 60 counter_at_least "$1" 2 || bail "the counter of $1 does not advance"
	ok "$1 writes a file before the snapshot" sb_run "$1" 'echo before > /root/state'
	tok=$(counter_token "$(counter "$1")")
	snap=$(snapshot_of "$1")
	[ -n "$snap" ] || bail "no snapshot id"
	check_eq "the snapshot completed" completed "$(snap_status "$snap")"
	ok "$1 writes a file after the snapshot" sb_run "$1" 'echo after > /root/state'
}
# fork_of SNAP: fork it; print the new sandbox's id.
fork_of() { wr_read "$MNT/snapshots/$1/fork" | head -n 1; }

# snapshots_jq SB FILTER: FILTER (jq) of the info.json of each snapshot of SB, in no set order.
snapshots_jq() {
	local l
	for l in "$MNT/sandboxes/$1/snapshots/"*; do
		[ -e "$l" ] && jget "$MNT/snapshots/$(basename "$l")/info.json" "$2" 2>/dev/null
	done
}

# The snapshot a suspended sandbox depends on: its snapshot of kind "suspend", newest last.
suspend_snapshot_of() {
	local l id
	for l in "$MNT/sandboxes/$1/snapshots/"*; do
		[ -e "$l" ] || continue
		id=$(basename "$l")
		[ "$(jget "$MNT/snapshots/$id/info.json" .kind 2>/dev/null)" = suspend ] && echo "$id"
	done | tail -n 1
}

# Is a runsc-sandbox process with this container id (the last word of its command line) alive?
runsc_process_alive() {
	local f
	for f in /proc/[0-9]*/cmdline; do
		tr '\0' ' ' 2>/dev/null <"$f" | grep -q "^runsc-sandbox .* $1 *\$" && return 0
	done
	return 1
}

# runsc's own view of a container: its status word, or nothing when unknown.
runsc_state_of() {
	timeout 30 runsc --root "$RUNSC_ROOT" list 2>/dev/null | awk -v id="$1" '$1 == id { print $3 }'
}

# --- the daemon ----------------------------------------------------------------

# Copy the busybox image into $IMAGES: from the run's cache, or built here.
setup_images() {
	local cache=${SNAPFS_TEST_CACHE:-}
	if [ -n "$cache" ]; then
		[ -f "$cache/busybox/bin/busybox" ] ||
			"$REPO/scripts/make-image.sh" "$cache/busybox" >/dev/null || return 1
		cp -a "$cache/busybox" "$IMAGES/busybox"
	else
		"$REPO/scripts/make-image.sh" "$IMAGES/busybox" >/dev/null
	fi
}

# start_daemon: run the daemon in the foreground (-f) in the background on
# $STATE, $IMAGES and $MNT, with the options in DAEMON_ARGS; return once the
# mount answers (MNT/version readable). On failure it says why and returns 1:
# the caller counts the failure (start_daemon || bail "...").
start_daemon() {
	local i
	if [ ! -x "$SNAPFS_BIN" ]; then
		note "$SNAPFS_BIN is missing (make build/asan/snapfs)"
		return 1
	fi
	echo "=== $(date +%T) start: $SNAPFS_BIN -f --state $STATE --images $IMAGES" \
		"${DAEMON_ARGS[*]} $MNT" >>"$DAEMON_LOG"
	"$SNAPFS_BIN" -f --state "$STATE" --images "$IMAGES" "${DAEMON_ARGS[@]}" "$MNT" \
		>>"$DAEMON_LOG" 2>&1 &
	DAEMON_PID=$!
	for i in $(seq 1 300); do
		if is_mounted && timeout 5 cat "$MNT/version" >/dev/null 2>&1; then
			return 0
		fi
		if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
			wait "$DAEMON_PID"
			note "the daemon exited with status $? before the mount answered:"
			tail -n 20 "$DAEMON_LOG"
			DAEMON_PID=""
			return 1
		fi
		[ "$i" -eq 300 ] || sleep 0.1
	done
	note "$MNT/version is not readable after 30 s:"
	tail -n 20 "$DAEMON_LOG"
	return 1
}

unmount_mnt() {
	local i
	for i in $(seq 1 50); do
		is_mounted || return 0
		fusermount3 -u "$MNT" 2>/dev/null && return 0
		sleep 0.2
	done
	fusermount3 -uz "$MNT"
}

# wait_daemon_exit SECS: wait for the daemon to exit; its exit status is the return value (255: still running).
wait_daemon_exit() {
	local deadline=$(($(date +%s) + $1)) rc
	while kill -0 "$DAEMON_PID" 2>/dev/null; do
		[ "$(date +%s)" -ge "$deadline" ] && return 255
		sleep 0.1
	done
	wait "$DAEMON_PID"
	rc=$?
	DAEMON_PID=""
	return "$rc"
}

# stop_daemon: unmount; the daemon must then exit with status 0 (a sanitizer report or a leak is not 0).
stop_daemon() {
	local rc
	unmount_mnt
	wait_daemon_exit 60
	rc=$?
	if [ "$rc" -eq 0 ]; then
		pass "the daemon exits with status 0 once unmounted"
	else
		fail "the daemon exits with status 0 once unmounted (got $rc)" "$(tail -n 30 "$DAEMON_LOG")"
	fi
}

# --- cgroups ---------------------------------------------------------------------
# A test that stands for systemd sets CG_ROOTS (every mounted hierarchy) and
# CG_MADE (what it removes on the way out).

# make_daemon_cgroups CG PARENT: the cgroup CG in every hierarchy, as systemd
# makes a service's (a v1 cpuset one gets its parent's CPUs and nodes first);
# CG and PARENT join CG_MADE; the dirs are in DAEMON_CG_DIRS.
make_daemon_cgroups() {
	local root d
	DAEMON_CG_DIRS=()
	for root in "${CG_ROOTS[@]}"; do
		d=$root$1
		mkdir "$d" || return 1
		CG_MADE+=("$d" "$root$2")
		if [ -f "$root/cpuset.cpus" ]; then
			{ cat "$root/cpuset.cpus" >"$d/cpuset.cpus" && cat "$root/cpuset.mems" >"$d/cpuset.mems"; } ||
				return 1
		fi
		DAEMON_CG_DIRS+=("$d")
	done
}

# --- a runsc that hangs --------------------------------------------------------
# use_hanging_runsc [DAEMON_OPTION...]: the daemon runs $T/runsc (with the
# options given), which is runsc, but a subcommand named with hang sleeps for
# ever; each hung shell and its sleep log their pids to $T/hung-pids.
use_hanging_runsc() {
	local real
	real=$(command -v runsc) || return 1
	cat >"$T/runsc" <<EOF
#!/bin/sh
# runsc, but SUBCOMMAND sleeps for ever while $T/hang-SUBCOMMAND exists
# (holding "once": the first time only).
sub="" skip=0
for a in "\$@"; do
	if [ "\$skip" = 1 ]; then skip=0; continue; fi
	case \$a in --root) skip=1 ;; -*) ;; *) sub=\$a; break ;; esac
done
f="$T/hang-\$sub"
if [ -n "\$sub" ] && [ -e "\$f" ]; then
	[ "\$(cat "\$f")" = once ] && rm -f "\$f"
	sleep 1000000 &
	echo "\$\$ \$!" >>"$T/hung-pids"
	wait
	exit 1
fi
exec "$real" "\$@"
EOF
	chmod 0755 "$T/runsc"
	DAEMON_ARGS+=(--runsc "$T/runsc" "$@")
}
# hang SUBCOMMAND [once]: make the wrapper hang on it (once: the first call only).
hang() { printf '%s' "${2:-always}" >"$T/hang-$1"; }
unhang() { rm -f "$T/hang-$1"; }
# hung_started: a call hung; hung_all_gone: every process a hung call left (the
# shell and its sleep) is gone.
hung_started() { [ -s "$T/hung-pids" ]; }
hung_all_gone() {
	local sh child
	[ -s "$T/hung-pids" ] || return 1
	while read -r sh child; do
		kill -0 "$sh" 2>/dev/null && return 1
		kill -0 "$child" 2>/dev/null && return 1
	done <"$T/hung-pids"
	return 0
}

# --- S3 (s3rver) ------------------------------------------------------------
# A test that needs an S3 server sets BUCKET and S3_DIR, then calls start_s3rver.

# use_s3rver_credentials: s3rver's credentials for aws and snapfs, no user config.
use_s3rver_credentials() {
	export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1
	export AWS_CONFIG_FILE=$T/no-aws-config AWS_SHARED_CREDENTIALS_FILE=$T/no-aws-credentials
}

# start_s3rver [PORT]: s3rver on PORT (default: a free one) over $S3_DIR (kept across
# restarts); sets S3_PID, S3_PORT.
# shellcheck disable=SC2120 # test_s3_restart and test_s3_daemons pass the port of a restart
start_s3rver() {
	local log=$T/s3rver.log i
	: >"$log"
	node --openssl-legacy-provider "$REPO/tests/doubles/s3rver.js" "${1:-0}" "$S3_DIR" "$BUCKET" >"$log" 2>&1 &
	S3_PID=$!
	disown "$S3_PID" # test_s3 kills it: no "Killed" from the shell
	BG_PIDS+=("$S3_PID")
	for i in $(seq 1 200); do
		S3_PORT=$(awk '/^ready/ { print $2 }' "$log")
		[ -n "$S3_PORT" ] && return 0
		kill -0 "$S3_PID" 2>/dev/null || break
		sleep 0.1
	done
	note "s3rver did not start:" "$(cat "$log")"
	return 1
}

s3() { timeout -k 5 "$OP_TIMEOUT" /usr/bin/aws --endpoint-url "http://127.0.0.1:$S3_PORT" s3 "$@"; }

# serve_s3 BUCKET: s3rver over $T/s3rver with BUCKET, its credentials and
# endpoint exported for snapfs and aws (bails if s3rver is missing or fails).
serve_s3() {
	BUCKET=$1 S3_DIR=$T/s3rver S3_PID="" S3_PORT=""
	use_s3rver_credentials
	[ -f "$REPO/tests/doubles/node_modules/@20minutes/s3rver/package.json" ] ||
		bail "s3rver is missing (scripts/setup.sh --test, or npm install --prefix tests)"
	start_s3rver || bail "start s3rver"
	export AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PORT AWS_REGION=us-east-1
}

kill_sandboxes() {
	local id
	[ -d "$RUNSC_ROOT" ] || return 0
	for id in $(timeout 30 runsc --root "$RUNSC_ROOT" list --quiet 2>/dev/null); do
		timeout 30 runsc --root "$RUNSC_ROOT" kill "$id" KILL >/dev/null 2>&1
		timeout 60 runsc --root "$RUNSC_ROOT" delete -force "$id" >/dev/null 2>&1
	done
}

# teardown_host: this host's sandboxes, mount and daemon, gone whatever state they are in.
teardown_host() {
	kill_sandboxes
	unmount_mnt
	if [ -n "$DAEMON_PID" ]; then
		kill -TERM "$DAEMON_PID" 2>/dev/null
		wait_daemon_exit 15
		[ "$?" -eq 255 ] && kill -KILL "$DAEMON_PID" 2>/dev/null
	fi
	# Whatever the daemon started while the first round ran.
	kill_sandboxes
}

cleanup() {
	local rc=$? p d
	trap - EXIT INT TERM
	set +e
	for p in "${BG_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
	done
	teardown_host
	for d in "${UNFREEZE_DIRS[@]}"; do
		chattr -R -i "$d" 2>/dev/null
	done
	if [ -n "${SNAPFS_TEST_LOGS:-}" ] && [ -s "$DAEMON_LOG" ] && { [ "$FAILED" -gt 0 ] || [ "$rc" -ne 0 ]; }; then
		mkdir -p "$SNAPFS_TEST_LOGS" && cp "$DAEMON_LOG" "$SNAPFS_TEST_LOGS/$TEST_NAME.daemon.log"
	fi
	if is_mounted; then
		echo "cleanup: $MNT is still mounted; leaving $T in place" >&2
	else
		rm -rf --one-file-system "$T"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

setup_images || bail "build the busybox image with scripts/make-image.sh"
