#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# OCI images by digest (docs/images.md): snapfs-image imports a layout the
# test builds by hand (two layers, the second whiting out a file of the
# first), an oci-archive and a docker-archive; images/NAME/digest is the
# manifest's; a snapshot pins it; a re-import of a changed image makes
# restorable say so and the fork refuse, with both digests; an image that is
# a symlink out of --images (host -> /) is refused at start with EACCES.
. "$(dirname "$0")/lib.sh"

TOOL=$REPO/scripts/snapfs-image
for t in skopeo umoci sha256sum; do
	command -v "$t" >/dev/null || bail "$t is installed (scripts/setup.sh)"
done

# blob LAYOUT FILE: FILE into LAYOUT's blobs under its sha256; prints the hex.
blob() {
	local h
	h=$(sha256sum "$2" | cut -d' ' -f1)
	cp "$2" "$1/blobs/sha256/$h"
	echo "$h"
}

# make_layout DIR TEXT: an OCI image layout at DIR. Layer 1: the busybox
# image, /etc/keep and /etc/file; layer 2: /etc/added (holding TEXT) and
# /etc/.wh.file, the whiteout that deletes /etc/file. Prints the manifest's hex.
make_layout() {
	local dir=$1 text=$2 w=$T/build.$$ d1 d2 b1 b2 c m
	rm -rf "$w" && mkdir -p "$w/l1" "$w/l2/etc" "$dir/blobs/sha256"
	cp -a "$IMAGES/busybox/." "$w/l1/"
	echo keep >"$w/l1/etc/keep"
	echo doomed >"$w/l1/etc/file"
	echo "$text" >"$w/l2/etc/added"
	: >"$w/l2/etc/.wh.file"
	tar -C "$w/l1" --numeric-owner --owner=0 --group=0 -cf "$w/layer1.tar" .
	tar -C "$w/l2" --numeric-owner --owner=0 --group=0 -cf "$w/layer2.tar" .
	d1=$(sha256sum "$w/layer1.tar" | cut -d' ' -f1)
	d2=$(sha256sum "$w/layer2.tar" | cut -d' ' -f1)
	gzip -n "$w/layer1.tar" "$w/layer2.tar"
	b1=$(blob "$dir" "$w/layer1.tar.gz")
	b2=$(blob "$dir" "$w/layer2.tar.gz")
	printf '{"architecture":"amd64","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":["sha256:%s","sha256:%s"]}}' \
		"$d1" "$d2" >"$w/config.json"
	c=$(blob "$dir" "$w/config.json")
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%d},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%d},{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%d}]}' \
		"$c" "$(stat -c %s "$w/config.json")" "$b1" "$(stat -c %s "$w/layer1.tar.gz")" \
		"$b2" "$(stat -c %s "$w/layer2.tar.gz")" >"$w/manifest.json"
	m=$(blob "$dir" "$w/manifest.json")
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%d}]}' \
		"$m" "$(stat -c %s "$w/manifest.json")" >"$dir/index.json"
	echo '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci-layout"
	rm -rf "$w"
	echo "$m"
}

import() { "$TOOL" --images "$IMAGES" --state "$STATE" import "$@"; }
prune() { "$TOOL" --images "$IMAGES" --state "$STATE" prune "$@"; }

hex1=$(make_layout "$T/v1" two) || bail "build an OCI layout"
hex2=$(make_layout "$T/v2" three) || bail "build a second OCI layout"
d1=sha256:$hex1
d2=sha256:$hex2
check_eq "the two layouts differ" 1 "$([ "$d1" != "$d2" ] && echo 1)"

out=$(import app "$T/v1" 2>&1)
check_eq "import prints the manifest digest" "$d1" "$out"
check_eq "the tree keeps layer 1's file" keep "$(cat "$IMAGES/app/etc/keep" 2>&1)"
check_eq "the tree has layer 2's file" two "$(cat "$IMAGES/app/etc/added" 2>&1)"
ok "the whited-out file is gone" test ! -e "$IMAGES/app/etc/file"
ok "no whiteout is left in the tree" test ! -e "$IMAGES/app/etc/.wh.file"
check_eq "snapfs-image digest" "$d1" "$("$TOOL" --images "$IMAGES" digest app 2>&1)"
before=$(find "$IMAGES/busybox" | wc -l)
if import busybox "$T/v1" >/dev/null 2>&1; then
	fail "import over a hand-made tree is refused"
else
	pass "import over a hand-made tree is refused"
fi
check_eq "the hand-made tree is untouched" "$before" "$(find "$IMAGES/busybox" | wc -l)"

start_daemon || bail "the daemon mounts"

check_eq "images/ lists the imported image" "app busybox" "$(cd "$MNT/images" && echo *)"
check_eq "images/app/digest is the manifest's sha256" "$d1" "$(rd "$MNT/images/app/digest")"
check_eq "images/app/info.json digest" "$d1" "$(jget "$MNT/images/app/info.json" .digest)"
check_match "a hand-made tree keeps its tree digest" '^sha256:[0-9a-f]{64}$' \
	"$(rd "$MNT/images/busybox/digest")"

sb=$MNT/sandboxes/web
ok "mkdir sandboxes/web" mkdir "$sb"
ok "image app" wr "$sb/image" app
ok "entrypoint" wr "$sb/entrypoint" 'while :; do sleep 1; done'
ok "start a sandbox from the imported image" wr "$sb/start"
check_eq "the sandbox sees both layers, not the whited-out file" \
	"$(printf 'keep\ntwo\ngone')" "$(sb_run web 'cat /etc/keep /etc/added; test -e /etc/file || echo gone')"
check_eq "the sandbox's info.json pins the manifest digest" "$d1" \
	"$(jget "$sb/info.json" .image_digest)"

snap=$(snapshot_of web)
check_match "a snapshot of it" '^snap-[0-9a-f]{16}$' "$snap"
check_eq "the snapshot completes" completed "$(snap_wait "$snap")"
check_eq "the snapshot's info.json records the manifest digest" "$d1" \
	"$(jget "$MNT/snapshots/$snap/info.json" .image_digest)"
check_eq "restorable while the image is the same" yes "$(rd "$MNT/snapshots/$snap/restorable")"

# --- a changed image under the same name ---
check_eq "a re-import prints the new digest" "$d2" "$(import app "$T/v2" 2>&1)"
check_eq "images/app/digest follows the re-import" "$d2" "$(rd "$MNT/images/app/digest")"
check_eq "the tree is the new one" three "$(cat "$IMAGES/app/etc/added")"
check_eq "the running sandbox keeps the tree it started with" two "$(sb_run web 'cat /etc/added')"
why=$(rd "$MNT/snapshots/$snap/restorable")
check_contains "restorable says the image changed" "image app changed" "$why"
check_contains "restorable names the snapshot's digest" "$d1" "$why"
check_contains "restorable names the host's digest" "$d2" "$why"
expect_refusal EINVAL "a fork of a snapshot whose image changed" "" wr "$MNT/snapshots/$snap/fork"
last=$(rd "$MNT/errors" | tail -n 1)
check_contains "the refusal names the snapshot's digest" "$d1" "$last"
check_contains "the refusal names the host's digest" "$d2" "$last"
check_eq "no sandbox was forked" "" "$(rd "$MNT/snapshots/$snap/fork")"

# --- the same image again: pinned digests agree, the fork goes ---
check_eq "importing v1 again gives its digest back" "$d1" "$(import app "$T/v1" 2>&1)"
check_eq "restorable again" yes "$(rd "$MNT/snapshots/$snap/restorable")"
fork=$(fork_of "$snap")
check_match "the fork goes" '^sbx-[0-9a-f]{16}$' "$fork"
check_eq "the fork runs" running "$(sb_status "$fork")"
check_eq "the fork pins the digest" "$d1" "$(jget "$MNT/sandboxes/$fork/info.json" .image_digest)"
ok "terminate the fork" wr "$MNT/sandboxes/$fork/terminate"

# --- a resume is held to the digest too (the restore job checks it) ---
ok "suspend web" wr "$sb/suspend"
check_eq "web is suspended" suspended "$(sb_status web)"
check_eq "re-import v2 while web is suspended" "$d2" "$(import app "$T/v2" 2>&1)"
web_bundle=$STATE/sandboxes/web/bundle/config.json
[ -f "$web_bundle" ] && cp "$web_bundle" "$T/web-bundle.before"
expect_errno EINVAL "a resume of a sandbox whose image changed" wr "$sb/resume"
# Refused before anything is set up for the restore (its bundle, its network).
ok "the refused resume wrote no bundle" cmp -s "$web_bundle" "$T/web-bundle.before"
check_eq "web stays suspended" suspended "$(sb_status web)"
why=$(rd "$sb/error")
check_contains "its error names the snapshot's digest" "$d1" "$why"
check_contains "its error names the host's digest" "$d2" "$why"
check_eq "import v1 back" "$d1" "$(import app "$T/v1" 2>&1)"
ok "web resumes on its own image" wr "$sb/resume"
check_eq "web runs again on it" two "$(sb_run web 'cat /etc/added')"
ok "terminate web" wr "$sb/terminate"

# --- a version a crash left torn (its digest file empty, as after a crash before
# the data reached the disk) is unpacked again, not trusted ---
ok "v2 is still on disk" test -d "$IMAGES/.oci/app/$hex2"
rm -rf "$IMAGES/.oci/app/$hex2/rootfs/etc"
: >"$IMAGES/.oci/app/$hex2/digest"
check_eq "a re-import over a torn version" "$d2" \
	"$(import app "$T/v2" 2>&1)"
check_eq "unpacks it again: the tree is whole" three "$(cat "$IMAGES/app/etc/added" 2>&1)"

# --- prune keeps the current version and those a sandbox uses ---
user=$MNT/sandboxes/user
ok "mkdir sandboxes/user" mkdir "$user"
ok "image app (v2)" wr "$user/image" app
ok "entrypoint" wr "$user/entrypoint" 'while :; do sleep 1; done'
ok "start user on v2" wr "$user/start"
check_eq "import v1 once more" "$d1" "$(import app "$T/v1" 2>&1)"
ok "prune" prune app
ok "prune keeps v2: sandbox user runs from it" test -d "$IMAGES/.oci/app/$hex2/rootfs/etc"
check_eq "user still sees its tree" three "$(sb_run user 'cat /etc/added')"
ok "terminate user" wr "$user/terminate"
ok "rmdir user" rmdir "$user"
ok "prune again" prune app
ok "prune removes the older version no sandbox uses" test ! -e "$IMAGES/.oci/app/$hex2"
check_eq "prune keeps the current one" keep "$(cat "$IMAGES/app/etc/keep")"
check_eq "no scratch name is left" "" "$(cd "$IMAGES/.oci" && find . -maxdepth 1 -name '.*.*')"
check_eq "none under the image's own directory either" "" \
	"$(cd "$IMAGES/.oci/app" && find . -maxdepth 1 -name '.*.*')"
check_eq "the tool's directories are root's alone" 700 "$(stat -c %a "$IMAGES/.oci")"

# --- the archive formats skopeo converts ---
ok "make an oci-archive" skopeo copy --quiet "oci:$T/v1" "oci-archive:$T/app.oci.tar"
ok "make a docker-archive" skopeo copy --quiet "oci:$T/v1" "docker-archive:$T/app.docker.tar:app:v1"
check_eq "an oci-archive imports with the layout's digest" "$d1" \
	"$(import app-oci "oci-archive:$T/app.oci.tar" 2>&1)"
check_eq "images/app-oci/digest" "$d1" "$(rd "$MNT/images/app-oci/digest")"
dd=$(import app-docker "docker-archive:$T/app.docker.tar" 2>&1)
check_match "a docker-archive imports with a digest" '^sha256:[0-9a-f]{64}$' "$dd"
check_eq "images/app-docker/digest" "$dd" "$(rd "$MNT/images/app-docker/digest")"
ok "its version is named by its digest" test -f "$IMAGES/.oci/app-docker/${dd#sha256:}/digest"
check_eq "the docker-archive's tree has layer 2's file" two "$(cat "$IMAGES/app-docker/etc/added")"
ok "and not the whited-out file" test ! -e "$IMAGES/app-docker/etc/file"
if import bad "nosuch:$T/v1" >/dev/null 2>&1; then
	fail "an unknown transport is refused"
else
	pass "an unknown transport is refused"
fi

# --- an image that leads out of the images directory is refused (docs/images.md) ---
# Whoever could add `host -> /` would give a sandbox the host's root tree,
# read by runsc's gofer as root.
ln -s / "$IMAGES/host"
esc=$MNT/sandboxes/esc
ok "mkdir sandboxes/esc" mkdir "$esc"
ok "image host (a symlink to /)" wr "$esc/image" host
ok "entrypoint" wr "$esc/entrypoint" 'while :; do sleep 1; done'
containers=$(runsc --root "$RUNSC_ROOT" list -quiet 2>/dev/null | sort)
expect_errno EACCES "a start from an image that is a symlink to / is refused" wr "$esc/start"
check_contains "its error says the image leads out of the images directory" \
	"image host leads to /, outside the images directory" "$(rd "$esc/error")"
check_eq "no container was made for it" "$containers" "$(runsc --root "$RUNSC_ROOT" list -quiet 2>/dev/null | sort)"
expect_errno EIO "images/host/digest is not read through the link" rd "$MNT/images/host/digest"
rm "$IMAGES/host"

stop_daemon
finish
