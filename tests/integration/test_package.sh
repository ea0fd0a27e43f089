#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317 # SC2317: net_cleanup_extra, called from the trap
# The Debian package (docs/packaging.md): `make deb` builds it; unpacked
# into a scratch root (dpkg -x) every file is where it belongs with its
# mode and nothing else is there; its Depends name the runtime libraries,
# fuse3 and runsc (>= 0.0~20240729), its Recommends skopeo and umoci;
# /etc/default/snapfs is a conffile; removal stops the unit, purge (and
# only purge) kills and deletes the containers of /var/lib/snapfs/runsc,
# then removes /var/lib/snapfs and its spool in /dev/shm (only a spool that
# is root's 0700 with a 0600 regular marker naming it); /etc/default/snapfs,
# which may hold the S3 keys, is root's 0600 and the unit warns at start when
# it is not; purge after egress sandboxes ran (a daemon in a network namespace
# of the test's, as lib_net.sh makes) leaves no netns mount, veth, `table inet
# snapfs` or ip_forward=1 of snapfs's in that namespace, and leaves the table
# of a live daemon (its lock held), one whose map lists a veth of another
# state directory (and the ip_forward then), and an ip_forward snapfs did
# not change; a mount left below the state (a name with a space, which
# purge does not unmount) makes purge leave the state and the mounted
# tree whole, and still exit 0;
# lintian finds no error, and each warning it gives is justified in
# docs/packaging.md; the installed unit passes `systemd-analyze verify`;
# snapfs(8) and snapfs-image(8) render with `man --warnings` silent and
# snapfs(8) names every option `snapfs --help` prints. Nothing is installed on this host.
. "$(dirname "$0")/lib.sh"
trap cleanup EXIT

for tool in dpkg-buildpackage dh lintian scdoc man systemd-analyze; do
	command -v "$tool" >/dev/null || bail "$tool is missing (scripts/setup.sh --test)"
done

VERSION=$(sed -n 's/^VERSION *:= *//p' "$REPO/Makefile")
ARCH=$(dpkg --print-architecture)
DEB=$REPO/build/deb/snapfs_${VERSION}_$ARCH.deb
CHANGES=$REPO/build/deb/snapfs_${VERSION}_$ARCH.changes

start=$(date +%s)
make -C "$REPO" deb >"$T/deb.log" 2>&1
rc=$?
note "make deb: $(($(date +%s) - start)) s (load $(cut -d' ' -f1-3 /proc/loadavg))"
check_eq "make deb exits 0" 0 "$rc"
[ -f "$DEB" ] || bail "make deb builds $DEB" "$(tail -n 30 "$T/deb.log")"
pass "make deb builds snapfs_${VERSION}_$ARCH.deb"

# --- what it depends on ------------------------------------------------------------
depends=$(dpkg-deb -f "$DEB" Depends)
check_contains "Depends: runsc (>= 0.0~20240729)" "runsc (>= 0.0~20240729)" "$depends"
check_match "Depends: fuse3 (fusermount3 of ExecStop)" '(^|, )fuse3(,|$)' "$depends"
recommends=$(dpkg-deb -f "$DEB" Recommends)
for tool in skopeo umoci sqlite3; do
	check_match "Recommends: $tool (snapfs-image)" "(^|, )$tool(,|\$)" "$recommends"
done
check_contains "the description names snapfs-image" snapfs-image "$(dpkg-deb -f "$DEB" Description)"
for lib in libfuse3-3 libsqlite3-0 libcurl4 libzstd1 libcjson1 libssl3 libnl-route-3-200 libnftables1; do
	check_contains "Depends (shlibs): $lib" "$lib" "$depends"
done

# --- every file, its mode, nothing more ----------------------------------------------
ROOT=$T/root
dpkg-deb -x "$DEB" "$ROOT" || bail "dpkg -x"
# PATH MODE: regular files; directories are 0755 root's.
expected="etc/default/snapfs 600
lib/systemd/system/snapfs.service 644
usr/bin/snapfs 755
usr/bin/snapfs-image 755
usr/libexec/snapfs/snapfs-agent 755
usr/share/doc/snapfs/changelog.gz 644
usr/share/doc/snapfs/copyright 644
usr/share/doc/snapfs/examples/walkthrough.sh 755
usr/share/lintian/overrides/snapfs 644
usr/share/man/man8/snapfs-image.8.gz 644
usr/share/man/man8/snapfs.8.gz 644
usr/share/snapfs/make-image.sh 755"
while read -r path mode; do
	if [ -f "$ROOT/$path" ] && [ ! -L "$ROOT/$path" ]; then
		check_eq "/$path: mode $mode, root:root" "$mode root:root" "$(stat -c '%a %U:%G' "$ROOT/$path")"
	else
		fail "/$path is in the package"
	fi
done <<<"$expected"
check_eq "the package holds these files and no other" \
	"$(cut -d' ' -f1 <<<"$expected" | sort)" \
	"$(cd "$ROOT" && find . ! -type d | sed 's|^\./||' | sort)"
bad_dirs=$(cd "$ROOT" && find . -type d ! -perm 0755 -o -type d ! -user root)
check_eq "every directory is 0755 root's" "" "$bad_dirs"
ok "the agent is static (it runs in sandboxes whatever their image)" \
	bash -c "! readelf -l '$ROOT/usr/libexec/snapfs/snapfs-agent' | grep -q INTERP"
ok "the binary is the release build (no sanitizer)" bash -c "! nm -D '$ROOT/usr/bin/snapfs' | grep -q __asan"
check_eq "/usr/bin/snapfs runs (--version)" "snapfs $VERSION" "$("$ROOT/usr/bin/snapfs" --version)"
check_contains "the unit runs /usr/bin/snapfs" "ExecStart=/usr/bin/snapfs -f" "$(cat "$ROOT/lib/systemd/system/snapfs.service")"
# The unit's warning about /etc/default/snapfs, run on a scratch file in its place.
warn_cmd=$(sed -n 's|^ExecStartPre=-/bin/sh -c .\(.*/etc/default/snapfs.*\).$|\1|p' "$ROOT/lib/systemd/system/snapfs.service")
[ -n "$warn_cmd" ] || fail "the unit checks the mode of /etc/default/snapfs at start"
warn_cmd=${warn_cmd//\/etc\/default\/snapfs/$T/default-snapfs}
touch "$T/default-snapfs" && chmod 0644 "$T/default-snapfs"
check_contains "the unit warns at start when /etc/default/snapfs is 0644" \
	"snapfs: warning: group or others may read the S3 keys" "$(sh -c "$warn_cmd" 2>&1)"
chmod 0600 "$T/default-snapfs"
check_eq "the unit says nothing when it is 0600" "" "$(sh -c "$warn_cmd" 2>&1)"
check_eq "nor when it is not there" "" "$(rm -f "$T/default-snapfs" && sh -c "$warn_cmd" 2>&1)"

# --- maintainer scripts ----------------------------------------------------------------
CTL=$T/control
dpkg-deb -e "$DEB" "$CTL" || bail "dpkg-deb -e"
check_eq "/etc/default/snapfs is a conffile" /etc/default/snapfs "$(cat "$CTL/conffiles")"
check_contains "prerm stops the unit on removal" "deb-systemd-invoke stop 'snapfs.service'" "$(cat "$CTL/prerm")"
check_contains "postinst enables and starts the unit" "deb-systemd-invoke \$_dh_action 'snapfs.service'" "$(cat "$CTL/postinst")"
# postrm, run in a mount namespace of its own where /var/lib and /dev/shm
# are scratch dirs and runsc is a fake on PATH that records its calls and
# lists two containers of /var/lib/snapfs/runsc.
mkdir -p "$T/varlib/snapfs/sandboxes" "$T/varlib/snapfs/runsc" "$T/shm" "$T/fakebin"
# spool NAME TEXT: a spool as runtime/spool.c makes it, root's 0700, its marker 0600.
spool() {
	mkdir -m 0700 "$T/shm/$1" && echo "$2" >"$T/shm/$1/.snapfs-state" && chmod 0600 "$T/shm/$1/.snapfs-state"
}
spool snapfs-spool-ours /var/lib/snapfs
spool snapfs-spool-other /srv/other-state
# Look-alikes naming /var/lib/snapfs that runtime/spool.c would not take as its own:
# another user's, one open to others, a marker that is a symlink, a FIFO for a marker.
spool snapfs-spool-nobody /var/lib/snapfs && chown -R 65534:65534 "$T/shm/snapfs-spool-nobody"
spool snapfs-spool-open /var/lib/snapfs && chmod 0755 "$T/shm/snapfs-spool-open"
mkdir -m 0700 "$T/shm/snapfs-spool-link" && echo /var/lib/snapfs >"$T/marker-elsewhere" &&
	ln -s "$T/marker-elsewhere" "$T/shm/snapfs-spool-link/.snapfs-state"
mkdir -m 0700 "$T/shm/snapfs-spool-fifo" && mkfifo -m 0600 "$T/shm/snapfs-spool-fifo/.snapfs-state"
cat >"$T/fakebin/runsc" <<EOF
#!/bin/sh
echo "\$*" >>"$T/runsc-calls"
case " \$* " in *" list "*) printf 'sb-one\\nsb-two\\n' ;; esac
EOF
chmod +x "$T/fakebin/runsc"
postrm_run() {
	PATH=$T/fakebin:$PATH DPKG_MAINTSCRIPT_NAME=postrm DPKG_MAINTSCRIPT_PACKAGE=snapfs timeout -k 5 120 unshare -m bash -c \
		'mount --bind "$1" /var/lib && mount --bind "$2" /dev/shm && sh "$3" "$4"' \
		postrm "$T/varlib" "$T/shm" "$CTL/postrm" "$1" 2>>"$T/postrm.err"
}
postrm_run remove
check_eq "postrm remove exits 0" 0 "$?"
ok "after remove /var/lib/snapfs is still there" test -d "$T/varlib/snapfs/sandboxes"
check_eq "remove leaves the sandboxes alone (no runsc call)" "" "$(cat "$T/runsc-calls" 2>/dev/null)"
postrm_run purge
check_eq "postrm purge exits 0" 0 "$?"
ok "after purge /var/lib/snapfs is gone" test ! -e "$T/varlib/snapfs"
check_eq "purge kills and deletes each container of /var/lib/snapfs/runsc first" \
	"--root /var/lib/snapfs/runsc list -quiet
--root /var/lib/snapfs/runsc kill sb-one KILL
--root /var/lib/snapfs/runsc delete -force sb-one
--root /var/lib/snapfs/runsc kill sb-two KILL
--root /var/lib/snapfs/runsc delete -force sb-two" "$(cat "$T/runsc-calls" 2>/dev/null)"
check_contains "purge says which sandbox it kills" "killing and deleting sandbox sb-two" "$(cat "$T/postrm.err")"
ok "purge removes the /dev/shm spool of /var/lib/snapfs" test ! -e "$T/shm/snapfs-spool-ours"
ok "purge keeps a /dev/shm spool of another state directory" test -f "$T/shm/snapfs-spool-other/.snapfs-state"
for kind in nobody open link fifo; do
	ok "purge keeps the look-alike snapfs-spool-$kind (not root's 0700 with a 0600 regular marker)" \
		test -e "$T/shm/snapfs-spool-$kind/.snapfs-state"
done
ok "the marker a symlink named is left alone" test -f "$T/marker-elsewhere"
# A mount left below the state after unmount_state (a name with a space,
# \040 in mountinfo, which it does not unmount): an operator's tree
# bind-mounted under images/, the same filesystem (rm's --one-file-system
# does not stop there). Purge must leave the state, and the tree whole.
mkdir -p "$T/varlib/snapfs/images/web tree" "$T/srctree/sub" && echo keep >"$T/srctree/sub/marker"
PATH=$T/fakebin:$PATH DPKG_MAINTSCRIPT_NAME=postrm DPKG_MAINTSCRIPT_PACKAGE=snapfs timeout -k 5 120 unshare -m bash -c \
	'mount --bind "$1" /var/lib && mount --bind "$2" /dev/shm && mount --bind "$5" "/var/lib/snapfs/images/web tree" && sh "$3" "$4"' \
	postrm "$T/varlib" "$T/shm" "$CTL/postrm" purge "$T/srctree" 2>"$T/postrm-bind.err"
check_eq "postrm purge with a mount left below the state exits 0" 0 "$?"
check_eq "the bind-mounted tree's file survives the purge" keep "$(cat "$T/srctree/sub/marker" 2>&1)"
ok "the state directory is left" test -d "$T/varlib/snapfs/images/web tree"
check_contains "purge says what is still mounted" '/var/lib/snapfs/images/web\040tree is still mounted' "$(cat "$T/postrm-bind.err")"
check_contains "purge says it left the state" "/var/lib/snapfs is left as it is" "$(cat "$T/postrm-bind.err")"

# --- lintian -------------------------------------------------------------------------
lintian "$CHANGES" >"$T/lintian.log" 2>&1
note "lintian: $(grep -c '^[EWI]:' "$T/lintian.log") tags"
check_eq "lintian: no error" "" "$(grep '^E:' "$T/lintian.log")"
while read -r tag; do
	[ -n "$tag" ] || continue
	check_contains "lintian warning $tag is justified in docs/packaging.md" "\`$tag\`" "$(cat "$REPO/docs/packaging.md")"
done < <(awk '$1 == "W:" { print $3 }' "$T/lintian.log" | sort -u)

# --- the unit ---------------------------------------------------------------------------
# Offline (no running systemd needed); the binary and man page from the package.
sed "s|/usr/bin/snapfs|$ROOT/usr/bin/snapfs|" "$ROOT/lib/systemd/system/snapfs.service" >"$T/snapfs.service"
out=$(MANPATH=$ROOT/usr/share/man systemd-analyze verify "$T/snapfs.service" 2>&1)
check_eq "systemd-analyze verify: clean" "0 " "$? $out"
# The check can fail: a unit with a mistyped key is reported.
printf '[Service]\nType=notify\nExecStart=/bin/true\nKilMode=mixed\n' >"$T/typo.service"
check_contains "systemd-analyze verify reports a typo" "Unknown key" "$(systemd-analyze verify "$T/typo.service" 2>&1)"

# --- the man page ------------------------------------------------------------------------
MAN=$ROOT/usr/share/man/man8/snapfs.8.gz
warnings=$(man --warnings -l "$MAN" 2>&1 >/dev/null)
check_eq "man --warnings -l: no warning" "" "$warnings"
page=$(MANWIDTH=200 man -l "$MAN" 2>/dev/null)
for section in NAME SYNOPSIS OPTIONS "THE TREE" "CONTROL FILES" ENVIRONMENT FILES EXAMPLES; do
	check_contains "snapfs(8) has $section" "$section" "$page"
done
for var in AWS_ENDPOINT_URL AWS_REGION AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN; do
	check_contains "snapfs(8) names $var" "$var" "$page"
done
# Every option --help prints is in the page, so the two cannot drift apart.
mapfile -t opts < <("$ROOT/usr/bin/snapfs" --help | grep -oE '(^|[[ ])--?[a-z][a-z-]*' | sed 's/^[[ ]//' | sort -u)
[ "${#opts[@]}" -ge 20 ] || fail "--help lists the options (got ${#opts[@]})"
missing=()
for o in "${opts[@]}"; do
	grep -qE -- "(^|[^a-z-])$o([^a-z-]|\$)" <<<"$page" || missing+=("$o")
done
check_eq "snapfs(8) names all ${#opts[@]} options of --help" "" "${missing[*]}"
# snapfs-image(8), the page of /usr/bin/snapfs-image.
IMAGE_MAN=$ROOT/usr/share/man/man8/snapfs-image.8.gz
check_eq "man --warnings -l snapfs-image(8): no warning" "" "$(man --warnings -l "$IMAGE_MAN" 2>&1 >/dev/null)"
image_page=$(MANWIDTH=200 man -l "$IMAGE_MAN" 2>/dev/null)
for word in import digest prune --images oci-archive: docker-archive:; do
	check_contains "snapfs-image(8) names $word" "$word" "$image_page"
done
check_contains "snapfs(8) says an imported image's digest is its manifest's" "OCI manifest digest" "$page"
check_contains "snapfs(8) names snapfs-image" "snapfs-image" "$page"
# The man page is built in the package from docs/man/snapfs.8.scd: the same text.
check_eq "the packaged page is docs/man/snapfs.8.scd's" "$(scdoc <"$REPO/docs/man/snapfs.8.scd" | grep -v '^\.TH')" \
	"$(zcat "$MAN" | grep -v '^\.TH')"

# --- purge after egress sandboxes ran ------------------------------------------
# The daemon (build/asan/snapfs) runs in a network namespace of the test's
# (lib_net.sh: nothing here touches the host's own interfaces, nft or
# sysctls), starts two egress sandboxes and stops, leaving them running as a
# removal does; then postrm purge runs in that namespace with STATE set to
# the test's state directory (as /var/lib/snapfs is in the package), with
# the real runsc. It must exit 0 and leave that namespace as it found it.
. "$(dirname "$0")/lib_net.sh"
net_cleanup_extra() {
	[ -n "${LOCK_PID:-}" ] && kill -KILL "$LOCK_PID" 2>/dev/null
	[ -n "${LOCK:-}" ] && rm -f "$LOCK"
	return 0
}
# postrm_in_ns STATE_DIR ACTION: the packaged postrm, STATE replaced, run in the daemon's namespace.
postrm_in_ns() {
	sed "s|^STATE=/var/lib/snapfs\$|STATE=$1|" "$CTL/postrm" >"$T/postrm-ns"
	grep -q "^STATE=$1\$" "$T/postrm-ns" || fail "postrm sets STATE=/var/lib/snapfs on a line of its own"
	DPKG_MAINTSCRIPT_NAME=postrm DPKG_MAINTSCRIPT_PACKAGE=snapfs timeout -k 5 300 \
		nsenter --net="/run/netns/$NS_D" sh "$T/postrm-ns" "$2" 2>>"$T/postrm-ns.err"
}
forward() { in_d cat /proc/sys/net/ipv4/ip_forward; }
snf_links() { ip -n "$NS_D" -br link show | awk '$1 ~ /^snf/ { sub(/@.*/, "", $1); print $1 }'; }
mounts_under() { awk -v p="$1/" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo; }
NS_INO=$(stat -L -c %i "/run/netns/$NS_D")
LOCK=/run/snapfs/netns-$NS_INO.lock
in_d sysctl -qw net.ipv4.ip_forward=0 || bail "cannot set ip_forward in the test's namespace"
DAEMON_ARGS=(--net-resolv "$T/resolv.conf")
echo "nameserver $WEB" >"$T/resolv.conf"
start_daemon || bail "the daemon did not start"
for sb in e1 e2; do
	if ! { mkdir "$MNT/sandboxes/$sb" && wr "$MNT/sandboxes/$sb/image" busybox &&
		wr "$MNT/sandboxes/$sb/entrypoint" "$SLEEPER" && wr "$MNT/sandboxes/$sb/network" egress &&
		wr "$MNT/sandboxes/$sb/start"; }; then
		bail "cannot start the egress sandbox $sb" "$(rd "$MNT/sandboxes/$sb/error")"
	fi
done
RIDS="$(runtime_id e1) $(runtime_id e2)"
check_eq "two snf veths in the test's namespace" 2 "$(snf_links | wc -l)"
check_eq "two netns mounts under the state directory" 2 "$(mounts_under "$STATE" | wc -l)"
ok "table inet snapfs is there" in_d nft list table inet snapfs
check_eq "the daemon turned ip_forward on" 1 "$(forward)"
ok "the daemon holds $LOCK" test -f "$LOCK"
stop_daemon
ok "the sandboxes run on after the daemon stopped" runsc_process_alive "${RIDS%% *}"
postrm_in_ns "$STATE" purge
check_eq "postrm purge after egress sandboxes exits 0" 0 "$?"
ok "the state directory is gone" test ! -e "$STATE"
check_eq "no mount is left under it" "" "$(mounts_under "$STATE")"
check_eq "no snf veth is left" "" "$(snf_links)"
check_eq "no table inet snapfs is left" "" "$(in_d nft list tables | grep -w snapfs)"
check_eq "ip_forward is 0 again, as snapfs found it" 0 "$(forward)"
ok "the namespace's lock file is gone" test ! -e "$LOCK"
for rid in $RIDS; do
	check_eq "sandbox $rid is gone" "" "$(runsc_process_alive "$rid" && echo alive)"
done
check_contains "purge says it restores ip_forward" "ip_forward" "$(cat "$T/postrm-ns.err")"
# What is not snapfs's to undo: a table whose lock a live daemon holds, an
# ip_forward snapfs did not turn on (no record, or one of another boot).
mkdir -p "$T/state-b/net" "$T/state-b/netns" /run/snapfs
in_d nft add table inet snapfs || bail "cannot add the test's table"
in_d sysctl -qw net.ipv4.ip_forward=1
echo "was=0 netns=$NS_INO boot=00000000-0000-0000-0000-000000000000" >"$T/state-b/ip_forward"
python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "a"); fcntl.flock(f, fcntl.LOCK_EX); print("held", flush=True); time.sleep(600)' \
	"$LOCK" >"$T/lock.out" &
LOCK_PID=$!
poll_until 30 grep -q held "$T/lock.out" || bail "the test's lock holder did not start"
postrm_in_ns "$T/state-b" purge
check_eq "postrm purge of another state exits 0" 0 "$?"
ok "the table of a daemon holding the lock stays" in_d nft list table inet snapfs
ok "its lock file stays" test -e "$LOCK"
check_eq "an ip_forward recorded in another boot stays 1" 1 "$(forward)"
kill -KILL "$LOCK_PID"
wait "$LOCK_PID" 2>/dev/null
LOCK_PID=""
in_d nft delete table inet snapfs
rm -f "$LOCK"
# A table whose `sandboxes` map lists a veth that is there and that no
# record of the purged state names (another state directory's sandbox,
# its daemon stopped: no lock held) stays, and ip_forward with it; once
# that veth is gone, the next purge deletes the table. The veth is the
# test's own, in the test's namespace.
OURS=snapfs-c0c0c0c0c0c0c0c0c0c0c0c0
for st in state-c state-d; do mkdir -p "$T/$st/net" && : >"$T/$st/net/$OURS"; done
echo "was=0 netns=$NS_INO boot=$(cat /proc/sys/kernel/random/boot_id)" >"$T/state-c/ip_forward"
ip -n "$NS_D" link add snfb0b0b0b0b0b0 type veth peer name tpeerb0 || bail "cannot add the test's veth"
printf '%s\n' 'add table inet snapfs' 'add map inet snapfs sandboxes { type ifname : verdict; }' \
	'add element inet snapfs sandboxes { "snfb0b0b0b0b0b0" : accept, "snfc0c0c0c0c0c0" : accept }' >"$T/other.nft"
in_d nft -f "$T/other.nft" || bail "cannot add the test's table"
touch "$LOCK"
postrm_in_ns "$T/state-c" purge
check_eq "postrm purge beside another state's sandbox exits 0" 0 "$?"
ok "the table another state's veth is in stays" in_d nft list table inet snapfs
ok "its lock file stays" test -e "$LOCK"
check_eq "ip_forward stays 1 while that table stays" 1 "$(forward)"
check_contains "purge says why the table stays" "veths: snfb0b0b0b0b0b0)" "$(cat "$T/postrm-ns.err")"
ip -n "$NS_D" link delete snfb0b0b0b0b0b0
postrm_in_ns "$T/state-d" purge
check_eq "postrm purge once that veth is gone exits 0" 0 "$?"
check_eq "then table inet snapfs goes" "" "$(in_d nft list tables | grep -w snapfs)"
ok "and its lock file" test ! -e "$LOCK"
in_d nft delete table inet snapfs 2>/dev/null
rm -f "$LOCK"
in_d sysctl -qw net.ipv4.ip_forward=0

finish
