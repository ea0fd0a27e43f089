#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317
# A snapshot taken while an exec'd command still runs in the sandbox: the
# snapshot completes, a fork of it runs without the exec'd process (its caller
# is on this host, not in the snapshot), and the exec in the source finishes
# with its output. (If snapfs refused such a snapshot, the refusal would have
# to be EBUSY with a sentence; docs/runsc-notes.md says which it does.)
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"
start_counter_sandbox src || bail "start sandbox src"
S=$MNT/sandboxes/src
tok=$(counter_token "$(counter src)")

# The exec's writer blocks until the command ends: run it in the background.
sb_exec src 'sleep 31; echo exec-finished' >"$T/exec.out" 2>&1 &
exec_pid=$!
BG_PIDS+=("$exec_pid")
running_sleep() { sb_run "$1" 'ps' | grep -q '[s]leep 31'; }
ok "the exec'd command runs in the source" poll_until 20 running_sleep src

snap=$(wr_read "$S/snapshot" 2>"$T/snap.err" | head -n 1)
if [ -z "$snap" ] && grep -q "$(errno_text EBUSY)" "$T/snap.err"; then
	# The other behaviour the contract allows: a clear refusal.
	pass "the snapshot is refused with EBUSY"
	check_match "with a sentence in error" '[[:alpha:]]' "$(rd "$S/error")"
	check_eq "the source runs on" running "$(sb_status src)"
else
	check_match "a snapshot during an exec: the id" '^snap-[0-9a-f]{16}$' "$snap"
	[ -n "$snap" ] || bail "the snapshot failed: $(cat "$T/snap.err")"
	check_eq "it completes" completed "$(snap_status "$snap")"
	check_eq "the source runs on" running "$(sb_status src)"
	ok "the exec'd command still runs in the source" running_sleep src

	fork=$(fork_of "$snap")
	check_match "fork of it: the id" '^sbx-[0-9a-f]{16}$' "$fork"
	[ -n "$fork" ] || bail "the fork failed"
	check_eq "the fork runs" running "$(sb_status "$fork")"
	check_eq "the fork is the source's process, restored (token)" "$tok" \
		"$(counter_token "$(counter "$fork")")"
	ps_fork=$(sb_run "$fork" 'ps')
	check_contains "ps in the fork lists the restored entrypoint" "/tmp/counter" "$ps_fork"
	check_lacks "the exec'd command is gone in the fork" "sleep 31" "$ps_fork"
	check_eq "exec works in the fork" hello "$(sb_run "$fork" 'echo hello')"
fi

# The exec in the source finishes as if nothing happened.
timeout 60 tail --pid="$exec_pid" -f /dev/null
wait "$exec_pid"
check_eq "the exec in the source ends with its output" "$(printf 'exec-finished\nexit 0')" \
	"$(cat "$T/exec.out")"

# The output fetch finds cat through the sandbox's PATH, as the shell of the
# fetch before it did: an image whose cat is only in /usr/bin gets its output
# (review 12), and each fetch removes its file: an exec sees its own alone.
if ! { cp -a "$IMAGES/busybox" "$IMAGES/usrcat" && rm "$IMAGES/usrcat/bin/cat" &&
	mkdir -p "$IMAGES/usrcat/usr/bin" && ln -s /bin/busybox "$IMAGES/usrcat/usr/bin/cat"; }; then
	bail "make the image usrcat"
fi
U=$MNT/sandboxes/uc
if ! { step "mkdir sandboxes/uc" mkdir "$U" && step "image of uc" wr "$U/image" usrcat &&
	step "entrypoint of uc" wr "$U/entrypoint" "sleep 100000" && step "start of uc" wr "$U/start"; }; then
	bail "start sandbox uc"
fi
uc_running() { [ "$(sb_status uc)" = running ]; }
ok "uc runs" poll_until 30 uc_running
check_eq "exec in an image without /bin/cat" "$(printf 'hello\nexit 0')" "$(sb_exec uc 'echo hello')"
sb_exec uc 'true' >/dev/null
# Through the agent no exec makes an output file; the slow way removes each of its own.
check_eq "the execs left no output file behind" 0 "$(sb_run uc 'ls -a /tmp | grep -c snapfs-exec')"

stop_daemon
finish
