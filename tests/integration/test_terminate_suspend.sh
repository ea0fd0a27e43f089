#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317
# A terminate while a suspend whose storing failed is restoring the
# sandbox from the spool ends that restore at once, as it ends every other
# runsc call in flight on the sandbox (docs/limits.md, "Terminate from every
# state"): the restore runs on a fresh container id, which the terminate must
# know. Here runsc restore hangs (a wrapper passed with --runsc), so a
# restore the terminate does not reach would live on to its deadline, with
# its container, after the sandbox was terminated.
. "$(dirname "$0")/lib.sh"

RUNSC_TIMEOUT=120 # far past the checks below: only a cancel ends the hung restore in time
use_hanging_runsc --runsc-timeout "$RUNSC_TIMEOUT" || bail "runsc is not on PATH"

start_daemon || bail "the daemon mounts"
make_sandbox s 'exec sleep 1000000' || bail "start sandbox s"
# A store that refuses writes but the suspend's hold (holds/, written before
# the checkpoint: docs/store.md): the checkpoint works, storing it fails, and
# the suspend restores the sandbox from the spool (with the hung restore).
mkdir -p "$STATE/store/holds" && chattr -R +i "$STATE/store" 2>/dev/null &&
	chattr -i "$STATE/store/holds" ||
	bail "chattr +i does not work on $STATE: no way to make a suspend's storing fail"
UNFREEZE_DIRS+=("$STATE/store")
hang restore
timeout -k 5 "$OP_TIMEOUT" bash -c 'printf "1\n" >"$1"' wr "$MNT/sandboxes/s/suspend" 2>/dev/null &
BG_PIDS+=($!)
ok "the suspend's restore from the spool starts (and hangs)" poll_until 120 hung_started
ok "terminate s" wr "$MNT/sandboxes/s/terminate"
check_eq "s is terminated" terminated "$(sb_wait s)"
ok "the terminate killed the hung restore" poll_until 15 hung_all_gone
chattr -R -i "$STATE/store"
unhang restore
finish
