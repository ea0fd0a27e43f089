#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Snapshots are sandbox memory (keys, tokens, env values), so nothing snapfs
# keeps is open to other users (docs/design.md, "Who may do what"): on the
# default layout (no --images, the store in STATE/store), on a --store
# file:// of its own and after scripts/run-default.sh, after snapshots, forks,
# a suspend and a resume, `find -perm /077` prints nothing. A state directory,
# images/ and journal an earlier version left open are made 0700/0600 (and
# the daemon says so); a state directory that is a symlink, another user's,
# or below a directory others may write is refused with a message.
. "$(dirname "$0")/lib.sh"

# open_to_others DIR: what in DIR group or others may use, one path a line.
# The images' root filesystems aside: their modes are the image's own (a
# /bin 0755, a /tmp 1777), behind the 0700 directories above them.
open_to_others() { find "$1" -path "$1/images/*" -prune -o -perm /077 -print; }
files_in() { find "$1" -type f | wc -l; }

REAL_BIN=$SNAPFS_BIN
had_var_lib=$(ls -d /var/lib/snapfs 2>/dev/null)

# --- the default layout, as an earlier version left it ---
chmod 0755 "$STATE"
mkdir -m 0755 "$STATE/images"
cp -a "$IMAGES/busybox" "$STATE/images/busybox"
: >"$STATE/events.jsonl"
chmod 0644 "$STATE/events.jsonl"

# No --images: a wrapper drops the one start_daemon passes (exec keeps the pid).
SNAPFS_BIN=$T/snapfs-default-images
cat >"$SNAPFS_BIN" <<'EOF'
#!/usr/bin/env bash
args=()
while [ $# -gt 0 ]; do
	if [ "$1" = --images ]; then
		shift 2
		continue
	fi
	args+=("$1")
	shift
done
exec "$REAL_SNAPFS" "${args[@]}"
EOF
chmod 0700 "$SNAPFS_BIN"
export REAL_SNAPFS=$REAL_BIN

start_daemon || bail "the daemon mounts on the default layout"
check_eq "the state directory an earlier version made 0755 is 0700" 700 "$(stat -c %a "$STATE")"
check_contains "the daemon says so" "$STATE was open to other users (mode 0755)" "$(cat "$DAEMON_LOG")"
check_eq "so is its images directory" 700 "$(stat -c %a "$STATE/images")"
check_eq "and the journal it left 0644" 600 "$(stat -c %a "$STATE/events.jsonl")"
check_eq "without --images the images are STATE/images" busybox "$(ls "$MNT/images")"
check_eq "and nothing was made in /var/lib/snapfs" "$had_var_lib" "$(ls -d /var/lib/snapfs 2>/dev/null)"
[ -z "$had_var_lib" ] && rmdir /var/lib/snapfs/images /var/lib/snapfs 2>/dev/null

# work_on SB ROUND: a snapshot, a fork of it, an exec, a refusal, a suspend and a resume.
work_on() {
	local snap fork
	snap=$(snapshot_of "$1")
	check_eq "$2: a snapshot" completed "$(snap_status "$snap")"
	fork=$(fork_of "$snap")
	check_eq "$2: its fork runs" running "$(sb_status "$fork")"
	check_eq "$2: an exec in the fork" rootfs "$(sb_run "$fork" 'cat /root/marker')"
	expect_errno "EINVAL|EBUSY" "$2: a refusal, for the errors journal" wr "$MNT/sandboxes/$1/start"
	ok "$2: suspend" wr "$MNT/sandboxes/$1/suspend"
	check_eq "$2: while suspended, nothing in the state directory is open to others" "" \
		"$(open_to_others "$STATE")"
	ok "$2: resume" wr "$MNT/sandboxes/$1/resume"
	check_eq "$2: it runs again" running "$(sb_status "$1")"
}

start_counter_sandbox a || bail "start sandbox a"
work_on a "default layout"
check_eq "default layout: nothing in the state directory is open to others" "" \
	"$(open_to_others "$STATE")"
ok "default layout: the store holds objects" test "$(files_in "$STATE/store")" -gt 2
ok "default layout: the cache holds images" test "$(files_in "$STATE/cache")" -gt 1
ok "default layout: the journals are there" test -s "$STATE/events.jsonl" -a -e "$STATE/errors.jsonl"
stop_daemon

# --- a store named with --store, in a directory of its own the operator made ---
STORE=$T/store
mkdir -m 0755 "$STORE"
chmod 0755 "$STORE"
DAEMON_ARGS=(--store "file://$STORE")
start_daemon || bail "the daemon mounts with --store file://$STORE"
check_eq "the store directory made 0755 is 0700" 700 "$(stat -c %a "$STORE")"
check_contains "the daemon says so" "$STORE was open to other users (mode 0755)" "$(cat "$DAEMON_LOG")"
work_on a "named store"
check_eq "named store: nothing in it is open to others" "" "$(open_to_others "$STORE")"
ok "named store: it holds objects" test "$(files_in "$STORE")" -gt 2
check_eq "named store: nothing in the state directory is open to others" "" \
	"$(open_to_others "$STATE")"
kill_sandboxes
stop_daemon
check_eq "after the daemon stopped, nothing in the state directory is open to others" "" \
	"$(open_to_others "$STATE")"

# --- scripts/run-default.sh on a temporary state directory and mount ---
RD_STATE=$T/run-default/state
RD_MNT=$T/run-default/mnt
trap 'rc=$?; fusermount3 -u "$RD_MNT" 2>/dev/null; (exit $rc); cleanup' EXIT
# Its daemon forks into the background: no pid to wait for, only its command line.
# shellcheck disable=SC2317 # called through poll_until
rd_daemon_gone() {
	local f
	for f in /proc/[0-9]*/cmdline; do
		tr '\0' ' ' 2>/dev/null <"$f" | grep -qF -- "--state $RD_STATE " && return 1
	done
	return 0
}
out=$(SNAPFS_BIN=$REAL_BIN SNAPFS_STATE=$RD_STATE SNAPFS_MNT=$RD_MNT \
	timeout -k 5 "$OP_TIMEOUT" "$REPO/scripts/run-default.sh" 2>&1)
ok "run-default.sh mounts snapfs" test -r "$RD_MNT/version"
[ -r "$RD_MNT/version" ] || note "$out"
check_eq "after run-default.sh nothing in its state directory is open to others" "" \
	"$(open_to_others "$RD_STATE")"
ok "its daemon logs to snapfs.log" test -s "$RD_STATE/snapfs.log"
check_eq "its image has the modes a root filesystem needs" "755 1777" \
	"$(stat -c %a "$RD_STATE/images/busybox/bin" "$RD_STATE/images/busybox/tmp" | tr '\n' ' ' | sed 's/ $//')"
fusermount3 -u "$RD_MNT"
ok "the run-default daemon exits once unmounted" poll_until 60 rd_daemon_gone
check_eq "once it stopped, still nothing" "" "$(open_to_others "$RD_STATE")"

# --- state directories the daemon refuses ---
# refused DESC STATE WORDS: the daemon does not start on STATE and says WORDS.
# The mount point does not exist: a daemon that accepted STATE fails later, at the mount.
refused() {
	local out rc
	out=$(timeout -k 5 60 "$REAL_BIN" -f --state "$2" --images "$IMAGES" "$T/no-mount" 2>&1)
	rc=$?
	if [ "$rc" -ne 0 ] && [[ $out == *"cannot use the state directory"*"$3"* ]]; then
		pass "$1: refused"
	else
		fail "$1: refused, saying: $3" "exit status $rc" "$out"
	fi
}
mkdir -m 0755 "$T/elsewhere"
ln -s "$T/elsewhere" "$T/state-link"
refused "a state directory that is a symlink" "$T/state-link" "is a symlink"
check_eq "what it points to is untouched" "755 " "$(stat -c %a "$T/elsewhere") $(ls "$T/elsewhere")"
mkdir -m 0700 "$T/nobodys"
chown nobody "$T/nobodys"
refused "another user's state directory" "$T/nobodys" "owned by uid $(id -u nobody)"
check_eq "it is untouched" "" "$(ls "$T/nobodys")"
mkdir "$T/open"
chmod 0777 "$T/open"
refused "a state directory below one every user may write" "$T/open/state" \
	"writable by every user"
check_eq "nothing was made in it" "" "$(ls "$T/open")"

# --- an images directory others could change (docs/images.md) ---
# Its group could add `host -> /`: refused, as a state directory would be.
mkdir -m 0700 "$T/state-i"
mkdir "$T/images-g" && chmod 0770 "$T/images-g"
out=$(timeout -k 5 60 "$REAL_BIN" -f --state "$T/state-i" --images "$T/images-g" "$T/no-mount" 2>&1)
rc=$?
if [ "$rc" -ne 0 ] && [[ $out == *"the images directory $T/images-g is not one only root can change"*"writable by its group"* ]]; then
	pass "a group-writable --images: refused"
else
	fail "a group-writable --images: refused, saying why" "exit status $rc" "$out"
fi
finish
