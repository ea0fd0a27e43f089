#!/bin/sh
# make-image.sh DIR - build a minimal busybox root filesystem at DIR.
#
#   scripts/make-image.sh /var/lib/snapfs/images/busybox
#
# Uses the static busybox from Debian's busybox-static package (BUSYBOX=PATH
# to choose another static binary). Idempotent: DIR/bin/busybox is written
# last, so when it is there and identical to the source the image is complete
# and nothing is touched (the image's digest and mtimes stay as they were).
#
# Directories made on the way to DIR are 0700: they are snapfs's state
# directory and its images/ (/var/lib/snapfs is where snapshots live, for
# root alone; runsc runs as root and reads the image all the same). The
# image's own tree gets the modes a root filesystem needs, each set below.
set -eu
umask 077

if [ $# -ne 1 ] || [ -z "$1" ]; then
	echo "usage: $0 DIR" >&2
	exit 2
fi
dir=$1
busybox=${BUSYBOX:-/bin/busybox}

if [ ! -x "$busybox" ]; then
	echo "make-image: $busybox not found (apt-get install busybox-static)" >&2
	exit 1
fi
# A dynamically linked busybox would need the host's libraries in the image.
if command -v file >/dev/null 2>&1 && ! file -L "$busybox" | grep -q 'statically linked'; then
	echo "make-image: $busybox is not statically linked (apt-get install busybox-static)" >&2
	exit 1
fi

if [ -f "$dir/bin/busybox" ] && cmp -s "$busybox" "$dir/bin/busybox"; then
	echo "make-image: $dir is up to date"
	exit 0
fi

mkdir -p "$dir"
for d in bin etc root var tmp proc sys dev; do
	mkdir -p "$dir/$d"
done
chmod 0755 "$dir" "$dir/bin" "$dir/etc" "$dir/var" "$dir/proc" "$dir/sys" "$dir/dev"
chmod 0700 "$dir/root"
chmod 1777 "$dir/tmp"

printf 'root:x:0:0:root:/root:/bin/sh\n' >"$dir/etc/passwd"
printf 'root:x:0:\n' >"$dir/etc/group"
chmod 0644 "$dir/etc/passwd" "$dir/etc/group"

# Every applet as a relative symlink in /bin, so the tree works wherever it is.
"$busybox" --list | while read -r applet; do
	case $applet in
	"" | busybox | */*) continue ;;
	esac
	ln -sfn busybox "$dir/bin/$applet"
done

# Last, and atomically: its presence marks a complete image.
cp "$busybox" "$dir/bin/.busybox.tmp"
chmod 0755 "$dir/bin/.busybox.tmp"
mv -f "$dir/bin/.busybox.tmp" "$dir/bin/busybox"
echo "make-image: built $dir ($("$dir/bin/busybox" --list | wc -l) applets)"
