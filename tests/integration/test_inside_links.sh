#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Links the sandbox makes under root/ whose ".." follows a name (issue 23):
# the host kernel walks "x/.." from where x led, so with x -> "." a link
# y -> "x/.." kept as written was root/'s parent, and a chain of such links
# climbed to the host's /. inside_link_contain() resolves them lexically.
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"

make_sandbox box 'sleep 1000' || bail "sandbox box starts"
sb_wait box >/dev/null
R=$MNT/sandboxes/box/root

printf 'host-canary\n' >"$T/canary"
chmod 0644 "$T/canary"
# From root/l to the host's /: x/.. is root/, then box/, sandboxes/, $MNT and its parents.
up=$(($(printf '%s' "$MNT" | tr -cd / | wc -c) + 4))
ok "the sandbox makes a link to / and a chain of links climbing from it" sb_run box \
	"mkdir -p /l && cd /l && ln -s . x && ln -s x/.. l1 && i=1 && while [ \$i -lt $up ]; do ln -s l\$i/.. l\$((i + 1)); i=\$((i + 1)); done && ln -s l$up${T}/canary esc && echo inside-canary >/canary"
check_eq "readlink of l/l1 (x/..) is resolved in root/" "../l" "$(readlink "$R/l/l1")"
check_eq "l1 is root/l itself" "$(stat -c %i "$R/l" || echo no)" "$(stat -L -c %i "$R/l/l1" || echo none)"
check_lacks "root/l/l2/ is not the sandbox's directory in the tree" status "$(ls "$R/l/l2/" 2>&1)"
out=$(cat "$R/l/esc" 2>&1)
check_lacks "a read through the chain does not reach the host's file" host-canary "$out"
bash -c "echo pwned >'$R/l/esc'" 2>/dev/null
check_eq "a write through the chain leaves the host's file alone" host-canary "$(cat "$T/canary")"

finish
