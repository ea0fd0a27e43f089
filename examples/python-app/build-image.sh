#!/usr/bin/env bash
# build-image.sh [--images DIR] [--layout DIR] [--rebuild] [NAME] - a Debian
# bookworm image with Python and numpy from Debian's packages, and app.py in
# /opt/python-app, imported into snapfs's images directory as NAME (default
# python-app) with snapfs-image.
#
# mmdebstrap (installed here if missing) builds a minbase root filesystem
# with python3 and python3-numpy from deb.debian.org (MIRROR= to use another)
# into one tarball; umoci makes it the one layer of an OCI image layout; that
# layout is kept (--layout, default build/python-app/oci in this checkout) and
# built again only when app.py or this script changed, or with --rebuild.
# `snapfs-image --images DIR import NAME LAYOUT` then unpacks it into DIR
# (default /var/lib/snapfs/images, the daemon's --images), pinned by its
# manifest digest, which it prints. Runs as root: mmdebstrap's root mode and
# the unpack keep the image's owners.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
IMAGES=/var/lib/snapfs/images
LAYOUT=$REPO/build/python-app/oci
REBUILD=0
MIRROR=${MIRROR:-http://deb.debian.org/debian}
PACKAGES=python3,python3-numpy
TAG=python-app

die() {
	printf 'build-image: %s\n' "$*" >&2
	exit 1
}

while [ $# -gt 0 ]; do
	case $1 in
	--images) IMAGES=${2:?--images needs a directory} && shift 2 ;;
	--layout) LAYOUT=${2:?--layout needs a directory} && shift 2 ;;
	--rebuild) REBUILD=1 && shift ;;
	-*) die "unknown option $1 (want --images DIR, --layout DIR, --rebuild)" ;;
	*) break ;;
	esac
done
NAME=${1:-python-app}
[ "$(id -u)" -eq 0 ] || die "run me as root (mmdebstrap's root mode, snapfs-image's unpack)"

# The example's own set-up: what it needs beyond scripts/setup.sh.
need=()
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v umoci >/dev/null || need+=(umoci)
command -v skopeo >/dev/null || need+=(skopeo)
if [ "${#need[@]}" -gt 0 ]; then
	echo "build-image: installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}" >/dev/null ||
		die "cannot install ${need[*]} (apt-get update first?)"
fi

# What the layout is built from: a new app.py or recipe builds it again.
stamp=$(cat "$HERE/app.py" "$0" | sha256sum | cut -d' ' -f1)
if [ "$REBUILD" -eq 0 ] && [ "$(cat "$LAYOUT.stamp" 2>/dev/null)" = "$stamp" ] &&
	[ -f "$LAYOUT/index.json" ]; then
	echo "build-image: $LAYOUT is up to date"
else
	mkdir -p "$(dirname "$LAYOUT")"
	W=$(mktemp -d "$(dirname "$LAYOUT")/.build.XXXXXX")
	trap 'rm -rf "$W"' EXIT
	echo "build-image: mmdebstrap bookworm ($PACKAGES) from $MIRROR"
	t0=$(date +%s)
	# shellcheck disable=SC2016 # "$1" is the hooks' own: mmdebstrap's shell expands it
	mmdebstrap --quiet --variant=minbase --include="$PACKAGES" \
		--customize-hook='mkdir -p "$1/opt/python-app"' \
		--customize-hook="upload $HERE/app.py /opt/python-app/app.py" \
		--customize-hook='chroot "$1" python3 -c "import numpy"' \
		bookworm "$W/rootfs.tar" "$MIRROR" || die "mmdebstrap failed"
	echo "build-image: root filesystem $(du -m "$W/rootfs.tar" | cut -f1) MiB in $(($(date +%s) - t0)) s"
	umoci init --layout "$W/oci"
	umoci new --image "$W/oci:$TAG"
	umoci raw add-layer --image "$W/oci:$TAG" "$W/rootfs.tar"
	umoci config --image "$W/oci:$TAG" --config.workingdir /opt/python-app \
		--config.cmd python3 --config.cmd /opt/python-app/app.py
	rm -rf "$LAYOUT" "$LAYOUT.stamp"
	mv -T "$W/oci" "$LAYOUT"
	echo "$stamp" >"$LAYOUT.stamp"
fi

mkdir -p "$IMAGES"
digest=$("$REPO/scripts/snapfs-image" --images "$IMAGES" import "$NAME" "oci:$LAYOUT:$TAG")
echo "build-image: imported $NAME as $digest into $IMAGES"
