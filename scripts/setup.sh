#!/usr/bin/env bash
# setup.sh [--test] - install what snapfs needs on a Debian bookworm machine (run as root).
#
#   scripts/setup.sh           build dependencies, fuse3, busybox-static, runsc 20240729,
#                              skopeo and umoci (snapfs-image import), sqlite3
#                              (snapfs-image list and rm read the daemon's registry)
#   scripts/setup.sh --test    the same, plus what the test suite uses: awscli, jq,
#                              node/npm and @20minutes/s3rver (into tests/doubles/node_modules),
#                              clang and its libFuzzer runtime (the fuzz targets),
#                              clang-format (the format check),
#                              debhelper, lintian, scdoc, man-db, systemd-analyze and
#                              python3 (make deb, the package and unit tests),
#                              promtool (Debian's prometheus: the metrics test),
#                              ansible-core (test_replace.sh: Ansible's copy and lineinfile)
#                              inotify-tools (test_watch.sh)
#                              the shellcheck package (tests/check-shell.sh)
#                              docker-registry, its service left stopped (test_image_registry.sh)
#
# Idempotent: every step is skipped when what it installs is already there, and
# `apt-get update` runs only when something has to be installed.
set -euo pipefail

RUNSC_RELEASE=20240729
BACKPORTS_FILE=/etc/apt/sources.list.d/bookworm-backports.sources
S3RVER_VERSION=4.0.4
BUILD_DEPS=(build-essential pkg-config libfuse3-dev fuse3 libsqlite3-dev libcurl4-openssl-dev
	libzstd-dev libcjson-dev libssl-dev busybox-static libnl-route-3-dev libnftables-dev
	musl-tools)

with_test=0
case "${1:-}" in
"") ;;
--test) with_test=1 ;;
*)
	echo "usage: $0 [--test]" >&2
	exit 2
	;;
esac

cd "$(dirname "$0")/.."

say() { printf 'setup: %s\n' "$*"; }
die() {
	printf 'setup: %s\n' "$*" >&2
	exit 1
}

# No `cmd | grep -q` here: grep -q exits at the first match, the writer may die
# of SIGPIPE, and pipefail would call the whole test false.
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }

apt_updated=0
apt_install() {
	if [ "$apt_updated" -eq 0 ]; then
		apt-get update
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y "$@"
}

# install_missing WHAT PKG...: install the PKGs (the ones found missing), or say WHAT is there.
install_missing() {
	local what=$1
	shift
	if [ $# -gt 0 ]; then
		say "installing $*"
		apt_install "$@"
	else
		say "$what: already installed"
	fi
}

# Any enabled apt source (one-line or deb822 format) naming bookworm-backports.
has_backports() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && grep -q '^[^#]*bookworm-backports' "$f" && return 0
	done
	return 1
}

runsc_ok() {
	local v
	v=$(runsc --version 2>/dev/null) && [[ $v == *"$RUNSC_RELEASE"* ]]
}

[ "$(id -u)" -eq 0 ] || die "run me as root"

if has_backports; then
	say "bookworm-backports: already configured"
else
	say "bookworm-backports: adding $BACKPORTS_FILE"
	cat >"$BACKPORTS_FILE" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
fi

missing=()
for pkg in "${BUILD_DEPS[@]}"; do
	installed "$pkg" || missing+=("$pkg")
done
install_missing "build dependencies" "${missing[@]}"

# The plain bookworm runsc (20221219) lacks --compression=none and hangs on
# --leave-running: only the backports release will do.
if runsc_ok; then
	say "runsc: $RUNSC_RELEASE already installed"
else
	say "installing runsc from bookworm-backports"
	apt_install -t bookworm-backports runsc
	runsc_ok || die "runsc --version does not say $RUNSC_RELEASE: $(runsc --version 2>&1 | head -n 1)"
fi

# snapfs-image import: skopeo copies an archive into an OCI layout, umoci unpacks it.
oci_pkgs=()
command -v skopeo >/dev/null 2>&1 || oci_pkgs+=(skopeo)
command -v umoci >/dev/null 2>&1 || oci_pkgs+=(umoci)
install_missing "skopeo, umoci" "${oci_pkgs[@]}"
# snapfs-image list, rm and prune: which sandboxes and snapshots use an image (the daemon's registry).
command -v sqlite3 >/dev/null 2>&1 || install_missing sqlite3 sqlite3

if [ ! -e /dev/fuse ]; then
	say "loading the fuse module"
	modprobe fuse
fi
[ -e /dev/fuse ] || die "/dev/fuse is missing and modprobe fuse did not create it"

[ "$with_test" -eq 1 ] || exit 0

test_pkgs=()
[ -x /usr/bin/aws ] || test_pkgs+=(awscli) # Debian's, not another on PATH
command -v jq >/dev/null 2>&1 || test_pkgs+=(jq)
command -v ansible >/dev/null 2>&1 || test_pkgs+=(ansible-core) # test_replace.sh
command -v zstd >/dev/null 2>&1 || test_pkgs+=(zstd)
command -v nft >/dev/null 2>&1 || test_pkgs+=(nftables) # the network test lists the ruleset
command -v ip >/dev/null 2>&1 || test_pkgs+=(iproute2)   # and makes its namespaces
command -v curl >/dev/null 2>&1 || test_pkgs+=(curl)     # and fetches a published port
command -v rsync >/dev/null 2>&1 || test_pkgs+=(rsync)   # test_crawl_tools.sh: rsync -a of the mount
command -v inotifywait >/dev/null 2>&1 || test_pkgs+=(inotify-tools) # test_watch.sh
command -v shellcheck >/dev/null 2>&1 || test_pkgs+=(shellcheck) # tests/check-shell.sh
# NodeSource's nodejs ships npm itself; ask for Debian's npm only when there is none.
command -v node >/dev/null 2>&1 || test_pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || test_pkgs+=(npm)
command -v clang >/dev/null 2>&1 || test_pkgs+=(clang)
# make format-check (tests/run.sh): bookworm's, version 14, the one the tree is formatted with.
command -v clang-format >/dev/null 2>&1 || test_pkgs+=(clang-format)
# test_package.sh: make deb (dpkg-buildpackage, dh), lintian, snapfs(8) from
# scdoc read by man; test_systemd.sh: the unit verified, a NOTIFY_SOCKET listener.
command -v dh >/dev/null 2>&1 || test_pkgs+=(debhelper)
command -v lintian >/dev/null 2>&1 || test_pkgs+=(lintian)
command -v scdoc >/dev/null 2>&1 || test_pkgs+=(scdoc)
command -v man >/dev/null 2>&1 || test_pkgs+=(man-db)
command -v systemd-analyze >/dev/null 2>&1 || test_pkgs+=(systemd)
command -v python3 >/dev/null 2>&1 || test_pkgs+=(python3)
install_missing "test tools" "${test_pkgs[@]}"

# test_image_registry.sh runs its own docker-registry on 127.0.0.1 and a port
# of its own. The package's service (every address, port 5000) is never
# started by this install (a policy-rc.d that refuses every start, only for
# the install and only where there is none: systemd's and sysv's invoke-rc.d
# both ask it) and is disabled for later boots.
if command -v docker-registry >/dev/null 2>&1; then
	say "docker-registry: already installed"
else
	policy=/usr/sbin/policy-rc.d
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\n# setup.sh: no service starts while it installs docker-registry\nexit 101\n' >"$policy"
		chmod 0755 "$policy"
		trap 'rm -f "$policy"' EXIT
	fi
	install_missing docker-registry docker-registry
	if [ "$(trap -p EXIT)" ]; then
		rm -f "$policy"
		trap - EXIT
	fi
	if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
		systemctl disable --now docker-registry.service || true
	elif command -v update-rc.d >/dev/null 2>&1; then
		update-rc.d docker-registry disable >/dev/null 2>&1 || true
	fi
fi

# promtool checks the metrics file (test_metrics.sh). Debian ships it only in
# prometheus, whose install would start a Prometheus server on this host: take
# promtool (one static binary) out of the package instead.
if command -v promtool >/dev/null 2>&1; then
	say "promtool: already installed"
else
	say "installing promtool (from Debian's prometheus package, the binary alone)"
	prom_tmp=$(mktemp -d)
	chmod 0777 "$prom_tmp" # apt-get download writes as _apt
	if [ "$apt_updated" -eq 0 ]; then
		apt-get update
		apt_updated=1
	fi
	(cd "$prom_tmp" && apt-get download prometheus) || die "cannot download Debian's prometheus package"
	dpkg-deb -x "$prom_tmp"/prometheus_*.deb "$prom_tmp/root"
	install -D -m 0755 "$prom_tmp/root/usr/bin/promtool" /usr/local/bin/promtool
	rm -rf "$prom_tmp"
fi

# -fsanitize=fuzzer links libclang_rt.fuzzer, which Debian ships apart from
# clang: in libclang-rt-N-dev, N the major version of the clang installed.
fuzzer_rt() { echo "$(clang --print-runtime-dir)/libclang_rt.fuzzer-$(uname -m).a"; }
if [ -f "$(fuzzer_rt)" ]; then
	say "libFuzzer runtime: already installed"
else
	clang_major=$(clang -dumpversion)
	clang_major=${clang_major%%.*}
	say "installing libclang-rt-$clang_major-dev (libFuzzer runtime)"
	apt_install "libclang-rt-$clang_major-dev"
	[ -f "$(fuzzer_rt)" ] || die "no libFuzzer runtime at $(fuzzer_rt) after installing libclang-rt-$clang_major-dev"
fi

s3rver_pkg=tests/doubles/node_modules/@20minutes/s3rver/package.json
if [ -f "$s3rver_pkg" ] && grep -q "\"version\": *\"$S3RVER_VERSION\"" "$s3rver_pkg"; then
	say "s3rver: $S3RVER_VERSION already installed"
else
	say "installing @20minutes/s3rver@$S3RVER_VERSION into tests/doubles/node_modules"
	npm install --prefix tests/doubles --no-audit --no-fund
fi
