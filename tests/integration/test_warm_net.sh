#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317 # SC2317: functions called by ok
# Warm pools and egress rules (issue 25, review H1): a non-root user's
# egress rule inside a denied range (`allow 169.254.169.254/32`, cloud
# metadata) is inert in that user's sandboxes, cold forks and forks taken
# from a warm pool alike: a member is restored as the snapshot's owner, so
# its chain puts the denies first from the restore on, and the take sets the
# chain again from the fork's row. Root's fork of that snapshot restores
# cold (a member is only its owner's). The namespaces:
# tests/integration/lib_net.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_net.sh"
start_metadata

# A second user (nobody, through --allow-group) makes the sandbox.
chmod 0711 "$T"
chmod 0700 "$STATE" "$IMAGES"
DAEMON_ARGS=(-o allow_other --allow-group 65534 --warm-max 4)
setup_images
start_daemon || bail "daemon did not start"

nb() { (cd / && timeout -k 5 "$OP_TIMEOUT" setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"); }
nwr() { nb bash -c 'printf "%s\n" "$2" >"$1"' wr "$1" "${2-1}"; }
nwr_read() { nb bash -c 'exec 3<>"$1" && printf "%s\n" "$2" >&3 && cat <&3' wr_read "$1" "${2-1}"; }
containers() { timeout 30 runsc --root "$RUNSC_ROOT" list 2>/dev/null | awk 'NR > 1 { print $1 }' | sort; }

ok "nobody makes a sandbox" nb mkdir "$MNT/sandboxes/u1"
nwr "$MNT/sandboxes/u1/image" busybox
nwr "$MNT/sandboxes/u1/entrypoint" "$SLEEPER"
nwr "$MNT/sandboxes/u1/network" egress
ok "nobody's rule names the metadata address" nwr "$MNT/sandboxes/u1/egress" "allow 169.254.169.254/32"
ok "nobody starts it" nwr "$MNT/sandboxes/u1/start"
ok "u1 runs" poll_until 60 status_is u1 running
ok "u1 does not reach metadata (its rule is inert)" no_md u1
snap=$(nwr_read "$MNT/sandboxes/u1/snapshot" | head -n 1)
check_eq "nobody's snapshot completes" completed "$(snap_wait "$snap")"
WARM=$MNT/snapshots/$snap/warm

ok "nobody writes warm 1" nwr "$WARM" 1
ok "the pool fills to 1 1" poll_until 90 bash -c '[ "$(cat "$1")" = "1 1" ]' x "$WARM"
members=$(containers)
f1=$(nwr_read "$MNT/snapshots/$snap/fork" | head -n 1)
ok "nobody's fork from the pool runs" poll_until 60 status_is "$f1" running
check_eq "the fork is nobody's" 65534 "$(stat -c %u "$MNT/sandboxes/$f1")"
check_contains "the fork took the member's container" "$(runtime_id "$f1")" "$members"
ok "nobody's warm fork does not reach metadata" no_md "$f1"

# Root's fork of nobody's snapshot: never a member of nobody's (its rules are disarmed instead).
ok "the pool refills to 1 1" poll_until 90 bash -c '[ "$(cat "$1")" = "1 1" ]' x "$WARM"
members=$(containers)
f2=$(fork_of "$snap")
ok "root's fork of nobody's snapshot runs" poll_until 60 status_is "$f2" running
check_eq "root's fork is root's" 0 "$(stat -c %u "$MNT/sandboxes/$f2")"
rid2=$(runtime_id "$f2")
ok "root's fork restored cold, not from nobody's pool" \
	bash -c '! printf "%s\n" "$1" | grep -qx "$2"' x "$members" "$rid2"
check_eq "nobody's pool keeps its member" "1 1" "$(rd "$WARM")"
ok "root's fork does not reach metadata (nobody's rule disarmed)" no_md "$f2"

ok "warm 0 drains" nwr "$WARM" 0
for s in u1 "$f1" "$f2"; do wr "$MNT/sandboxes/$s/terminate" >/dev/null; done
stop_daemon
finish
