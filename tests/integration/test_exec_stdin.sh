#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# An exec's command reaches the sandbox on stdin, a host memfd (not on
# runsc's command line). The sandbox controls the /bin/sh that reads it: it
# must not be able to write into that fd, which would grow host memory
# outside the sandbox's own (docs/limits.md, "Exec output").
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"
make_sandbox w 'exec sleep 1000000' || bail "start sandbox w"
check_eq "an exec gets its command" "hello" "$(sb_run w 'echo hello')"

# The sandbox's /bin/sh now writes 4 MiB into its stdin, and says how it went.
sb_run w 'rm -f /bin/sh; printf "#!/bin/busybox sh\nif busybox head -c 4194304 /dev/zero >&0 2>/dev/null; then echo stdin-written; else echo stdin-refused; fi\n" >/bin/sh; chmod 0755 /bin/sh' >/dev/null
# The agent keeps a shell spawned ahead (runtime/agent/DESIGN.md, "A ready shell"), made
# as the command above began: one exec more, and the next runs the sandbox's /bin/sh.
sb_exec w true >/dev/null || true
out=$(sb_exec w 'echo hi')
# The command's exec says first (the fetch's exec, stdin /dev/null, says refused as well).
check_eq "the sandbox cannot write into the exec's stdin" "stdin-refused" \
	"$(printf '%s\n' "$out" | head -n 1)"
check_lacks "no exec wrote into its stdin" "stdin-written" "$out"
ok "terminate w" wr "$MNT/sandboxes/w/terminate"
finish
