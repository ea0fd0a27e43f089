#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# --spool DIR puts checkpoints on another filesystem (here a tmpfs, as a
# user would for shorter pauses): snapshots and suspends work as with the
# default spool, the image is copied into the cache after it is stored, the
# daemon's own directory in DIR is emptied and DIR's other files are left.
# DIR is writable by every user (as /dev/shm is): the daemon's directory in
# it is made exclusively, 0700 and root's, under a name no one can guess; a
# directory planted under the name earlier versions used, or one that merely
# looks like the daemon's, is never used, and a symlink planted where the
# O_DIRECT probe wrote is not followed; a DIR another user owns is refused.
. "$(dirname "$0")/lib.sh"

SHM=$T/shm
mkdir -p "$SHM"
mount -t tmpfs -o size=256m snapfs-test-spool "$SHM" || bail "mount a tmpfs on $SHM"
trap 'rc=$?; teardown_host; umount "$SHM"; (exit $rc); cleanup' EXIT
echo keep >"$SHM/not-snapfs"
# A checkpoint reserves its sandbox's memory limit in the spool (docs/design.md):
# the default 2 GiB would not fit this 256 MiB tmpfs, 128 MiB and the margin do.
DAEMON_ARGS=(--spool "$SHM" --default-memory 128M)

# own_spools: the daemon's directories in $SHM (root's, 0700, of its prefix).
own_spools() { find "$SHM" -mindepth 1 -maxdepth 1 -type d -name 'snapfs-spool-*' -user root -perm 700; }

start_daemon || bail "the daemon mounts with --spool $SHM"
spools=$(find "$SHM" -mindepth 1 -maxdepth 1 -type d -name 'snapfs-spool-*' | wc -l)
check_eq "the daemon has one directory of its own in the spool" 1 "$spools"
check_eq "it is 0700 and root's" "700 root" "$(stat -c '%a %U' "$SHM"/snapfs-spool-*)"
check_eq "its marker names the state directory" "$(realpath "$STATE")" \
	"$(cat "$SHM"/snapfs-spool-*/.snapfs-state 2>&1)"
check_contains "the O_DIRECT probe ran in it" "O_DIRECT" "$(cat "$DAEMON_LOG")"
check_eq "and left nothing behind" "" "$(find "$SHM"/snapfs-spool-* -name '.direct-probe*')"
check_eq "the state directory holds no spool" "" "$(ls -d "$STATE/spool" 2>/dev/null)"

start_counter_sandbox src || bail "start sandbox src"
sb_run src 'echo from-src > /root/mark' >/dev/null
snap=$(snapshot_of src)
check_eq "a snapshot through a tmpfs spool completes" completed "$(snap_status "$snap")"
check_match "its pause is recorded" '^[0-9]+$' "$(jget "$MNT/snapshots/$snap/info.json" .pause_ms)"
ok "its image was copied into the cache" test -s "$STATE/cache/$snap/pages.img"
ok "with its manifest" test -s "$STATE/cache/$snap/.manifest.json"
check_eq "nothing is left in the spool but its marker" "" \
	"$(find "$SHM"/snapfs-spool-* -mindepth 1 ! -name .snapfs-state)"
fork=$(fork_of "$snap")
check_eq "the fork runs" running "$(sb_status "$fork")"
check_eq "with the source's root-fs file" from-src "$(sb_run "$fork" 'cat /root/mark')"

wr "$MNT/sandboxes/src/suspend" >/dev/null
check_eq "a suspend through the tmpfs spool" suspended "$(sb_status src)"
wr "$MNT/sandboxes/src/resume" >/dev/null
check_eq "and its resume" running "$(sb_status src)"
check_eq "the resumed sandbox has its file" from-src "$(sb_run src 'cat /root/mark')"

# What an interrupted checkpoint leaves: the spool is kept, found again and emptied.
own=$(own_spools)
[ -d "$own" ] || bail "the daemon's own spool directory is found" "got: '$own'"
echo stale >"$own/leftover"
stop_daemon
ok "a daemon that stops keeps a spool that is not empty" test -e "$own/leftover"
start_daemon || bail "the daemon mounts again"
check_eq "a restart takes the spool its predecessor left" "$own" "$(own_spools)"
check_eq "and empties it (but its marker)" "" "$(find "$own" -mindepth 1 ! -name .snapfs-state)"
check_eq "and leaves the spool directory's other files" keep "$(cat "$SHM/not-snapfs")"
kill_sandboxes
stop_daemon
check_eq "a daemon that stops removes its empty spool directory" "" \
	"$(find "$SHM" -mindepth 1 -maxdepth 1 -name 'snapfs-spool-*')"

# --- what another user may plant in a spool directory every user may write ---
# The name earlier versions used: snapfs-spool-<FNV-1a 64 of the state directory's real path>.
old_spool_name() {
	local s h=-3750763034362895579 i c # 14695981039346656037, as bash's signed 64 bits
	s=$(realpath "$STATE")
	for ((i = 0; i < ${#s}; i++)); do
		printf -v c '%d' "'${s:i:1}"
		h=$(((h ^ c) * 1099511628211))
	done
	printf 'snapfs-spool-%016x' "$h"
}
precious=$T/precious
echo precious >"$precious"
planted=$SHM/$(old_spool_name)
{ mkdir "$planted" && chmod 0777 "$planted" && ln -s "$precious" "$planted/.direct-probe" &&
	chown -h nobody:nogroup "$planted" "$planted/.direct-probe"; } ||
	bail "plant a directory of nobody's under the old name"
# Its owner keeps it, and the link in it, through any clean-up (winning the
# race between an earlier version's emptying and its probe): modelled by
# making it immutable, which only root can.
chattr +i "$planted" || bail "chattr +i on the tmpfs"
UNFREEZE_DIRS+=("$planted")
# Root's, named like the daemon's, with a marker naming this state directory, but 0777.
decoy=$SHM/snapfs-spool-0123456789abcdef
{ mkdir "$decoy" && chmod 0777 "$decoy" && realpath "$STATE" >"$decoy/.snapfs-state" &&
	chmod 0600 "$decoy/.snapfs-state" && echo mine >"$decoy/file"; } || bail "make the decoy"

start_daemon || bail "the daemon mounts with planted directories in the spool"
check_eq "the link planted where the probe wrote was not followed: its target is whole" \
	precious "$(cat "$precious")"
check_eq "the daemon made one directory of its own" 1 "$(own_spools | wc -l)"
check_lacks "not the planted one" "$planted" "$(own_spools)"
check_eq "the planted one is left as it was" "nobody 777 $precious" \
	"$(stat -c '%U %a' "$planted") $(readlink "$planted/.direct-probe")"
check_eq "the decoy is not taken, nor emptied" "777 mine" \
	"$(stat -c %a "$decoy") $(cat "$decoy/file")"
start_counter_sandbox again || bail "start sandbox again"
snap=$(snapshot_of again)
check_eq "a snapshot goes through the new spool" completed "$(snap_status "$snap")"
kill_sandboxes
stop_daemon
check_eq "once stopped, only the planted directories are left" "$(printf '%s\n' "$decoy" "$planted" | sort)" \
	"$(find "$SHM" -mindepth 1 -maxdepth 1 -name 'snapfs-spool-*' | sort)"
chattr -i "$planted"

# A spool directory another user owns could be swapped under the daemon: refused.
mkdir "$SHM/users" && chown nobody "$SHM/users"
out=$(timeout -k 5 60 "$SNAPFS_BIN" -f --state "$STATE" --images "$IMAGES" --spool "$SHM/users" \
	"$T/no-mount" 2>&1)
check_contains "a --spool DIR of another user's is refused" "$SHM/users is owned by uid $(id -u nobody)" "$out"
check_eq "and nothing is made in it" "" "$(ls "$SHM/users")"
finish
