#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# The Debian package (docs/packaging.md): `make deb` builds it; unpacked
# into a scratch root (dpkg -x) every file is where it belongs with its
# mode and nothing else is there; its Depends name the runtime libraries,
# fuse3 and runsc (>= 0.0~20240729), its Recommends skopeo and umoci;
# /etc/default/snapfs is a conffile; removal stops the unit, purge (and
# only purge) kills and deletes the containers of /var/lib/snapfs/runsc,
# then removes /var/lib/snapfs and its spool in /dev/shm;
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
for tool in skopeo umoci; do
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
expected="etc/default/snapfs 644
lib/systemd/system/snapfs.service 644
usr/bin/snapfs 755
usr/bin/snapfs-image 755
usr/share/doc/snapfs/changelog.gz 644
usr/share/doc/snapfs/copyright 644
usr/share/doc/snapfs/examples/walkthrough.sh 755
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
ok "the binary is the release build (no sanitizer)" bash -c "! nm -D '$ROOT/usr/bin/snapfs' | grep -q __asan"
check_eq "/usr/bin/snapfs runs (--version)" "snapfs $VERSION" "$("$ROOT/usr/bin/snapfs" --version)"
check_contains "the unit runs /usr/bin/snapfs" "ExecStart=/usr/bin/snapfs -f" "$(cat "$ROOT/lib/systemd/system/snapfs.service")"

# --- maintainer scripts ----------------------------------------------------------------
CTL=$T/control
dpkg-deb -e "$DEB" "$CTL" || bail "dpkg-deb -e"
check_eq "/etc/default/snapfs is a conffile" /etc/default/snapfs "$(cat "$CTL/conffiles")"
check_contains "prerm stops the unit on removal" "deb-systemd-invoke stop 'snapfs.service'" "$(cat "$CTL/prerm")"
check_contains "postinst enables and starts the unit" "deb-systemd-invoke \$_dh_action 'snapfs.service'" "$(cat "$CTL/postinst")"
# postrm, run in a mount namespace of its own where /var/lib and /dev/shm
# are scratch dirs and runsc is a fake on PATH that records its calls and
# lists two containers of /var/lib/snapfs/runsc.
mkdir -p "$T/varlib/snapfs/sandboxes" "$T/varlib/snapfs/runsc" "$T/shm/snapfs-spool-ours" \
	"$T/shm/snapfs-spool-other" "$T/fakebin"
echo /var/lib/snapfs >"$T/shm/snapfs-spool-ours/.snapfs-state"
echo /srv/other-state >"$T/shm/snapfs-spool-other/.snapfs-state"
cat >"$T/fakebin/runsc" <<EOF
#!/bin/sh
echo "\$*" >>"$T/runsc-calls"
case " \$* " in *" list "*) printf 'sb-one\\nsb-two\\n' ;; esac
EOF
chmod +x "$T/fakebin/runsc"
postrm_run() {
	PATH=$T/fakebin:$PATH DPKG_MAINTSCRIPT_NAME=postrm DPKG_MAINTSCRIPT_PACKAGE=snapfs unshare -m bash -c \
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
# The man page is built in the package from docs/snapfs.8.scd: the same text.
check_eq "the packaged page is docs/snapfs.8.scd's" "$(scdoc <"$REPO/docs/snapfs.8.scd" | grep -v '^\.TH')" \
	"$(zcat "$MAN" | grep -v '^\.TH')"

finish
