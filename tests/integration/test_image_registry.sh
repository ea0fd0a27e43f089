#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2317 # SC2317: push and tool, called through ok
# Images from a registry (docs/images.md): Debian's docker-registry runs on
# 127.0.0.1 (plain HTTP, storage under $T); the test pushes a two-platform OCI
# index it builds (amd64 and arm64, the busybox tree with a marker file that
# differs), and snapfs-image imports it: this host's platform, pinned by that
# platform manifest's digest (not the index's), the reference and the index
# digest in images/NAME/info.json; a sandbox starts from it. Without
# --tls-verify=false the plain-HTTP registry is refused with a sentence; the
# other errors are one line each. A re-push under the same tag and a
# re-import make restorable of an older snapshot name both digests. list
# shows what uses an image; rm refuses while a sandbox or snapshot uses it,
# and --force says what breaks. Credentials: a second registry with htpasswd
# auth, read from --authfile, REGISTRY_AUTH_FILE and ~/.docker/config.json.
. "$(dirname "$0")/lib.sh"

TOOL=$REPO/scripts/snapfs-image
for t in docker-registry skopeo umoci sqlite3 jq python3; do
	command -v "$t" >/dev/null || bail "$t is installed (scripts/setup.sh --test)"
done
TAB=$(printf '\t')

case $(uname -m) in
x86_64) ARCH=amd64 OTHER=arm64 ;;
aarch64) ARCH=arm64 OTHER=amd64 ;;
*) bail "a host that is amd64 or arm64 (this is $(uname -m))" ;;
esac

# start_registry NAME [HTPASSWD]: a docker-registry on 127.0.0.1 and a port
# the kernel chose, its storage under $T/NAME; its host:port into REG_ADDR.
# Not in a $(...): its pid must reach BG_PIDS, which the trap kills.
start_registry() {
	local dir=$T/$1 i port
	mkdir -p "$dir/store"
	{
		printf 'version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n'
		printf '    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:0\n' "$dir/store"
		if [ -n "${2:-}" ]; then
			printf 'auth:\n  htpasswd:\n    realm: snapfs-test\n    path: %s\n' "$2"
		fi
	} >"$dir/config.yml"
	docker-registry serve "$dir/config.yml" >"$dir/log" 2>&1 &
	BG_PIDS+=("$!")
	disown "$!"
	for i in $(seq 1 100); do
		port=$(grep -o 'listening on 127\.0\.0\.1:[0-9]*' "$dir/log" | head -n 1 | cut -d: -f2)
		[ -n "$port" ] && REG_ADDR=127.0.0.1:$port && return 0
		sleep 0.1
	done
	note "docker-registry did not start:" "$(cat "$dir/log")"
	return 1
}

blob() {
	local h
	h=$(sha256sum "$2" | cut -d' ' -f1)
	cp "$2" "$1/blobs/sha256/$h"
	echo "$h"
}

# make_index DIR TEXT ARCH...: an OCI layout whose index.json names (tag v1)
# an image index of one image per ARCH: the busybox tree and /etc/platform
# holding "ARCH TEXT". Prints the image index's hex.
make_index() {
	local dir=$1 text=$2 w arch entries="" d b c m i
	shift 2
	w=$T/build.$$
	rm -rf "$w" "$dir" && mkdir -p "$w" "$dir/blobs/sha256"
	for arch in "$@"; do
		rm -rf "$w/t" && mkdir -p "$w/t" && cp -a "$IMAGES/busybox/." "$w/t/"
		echo "$arch $text" >"$w/t/etc/platform"
		tar -C "$w/t" --numeric-owner --owner=0 --group=0 -cf "$w/l.tar" .
		d=$(sha256sum "$w/l.tar" | cut -d' ' -f1)
		gzip -nf "$w/l.tar"
		b=$(blob "$dir" "$w/l.tar.gz")
		printf '{"architecture":"%s","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
			"$arch" "$d" >"$w/config.json"
		c=$(blob "$dir" "$w/config.json")
		printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%d},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%d}]}' \
			"$c" "$(stat -c %s "$w/config.json")" "$b" "$(stat -c %s "$w/l.tar.gz")" >"$w/manifest.json"
		m=$(blob "$dir" "$w/manifest.json")
		entries+="${entries:+,}{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:$m\",\"size\":$(stat -c %s "$w/manifest.json"),\"platform\":{\"architecture\":\"$arch\",\"os\":\"linux\"}}"
	done
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s]}' \
		"$entries" >"$w/index.json"
	i=$(blob "$dir" "$w/index.json")
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"sha256:%s","size":%d,"annotations":{"org.opencontainers.image.ref.name":"v1"}}]}' \
		"$i" "$(stat -c %s "$w/index.json")" >"$dir/index.json"
	echo '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci-layout"
	rm -rf "$w"
	echo "$i"
}

# push LAYOUT REF [SKOPEO OPTION...]: every platform of LAYOUT's index to the registry.
push() {
	local src=$1 dst=$2
	shift 2
	skopeo copy --quiet --all --dest-tls-verify=false "$@" "oci:$src:v1" "docker://$dst"
}
# platform_digest REF: the digest the index at REF lists for this host's platform.
platform_digest() {
	skopeo inspect --raw --tls-verify=false "docker://$1" |
		jq -r --arg a "$ARCH" '.manifests[] | select(.platform.architecture == $a) | .digest'
}
tool() { "$TOOL" --images "$IMAGES" --state "$STATE" "$@"; }
import() { tool --tls-verify=false import "$@"; }

if command -v shellcheck >/dev/null; then
	ok "shellcheck scripts/snapfs-image" shellcheck "$TOOL"
else
	skip "shellcheck scripts/snapfs-image" "shellcheck is not installed (scripts/setup.sh --test)"
fi

start_registry open || bail "start docker-registry"
REG=$REG_ADDR
make_index "$T/idx1" one amd64 arm64 >/dev/null || bail "build a two-platform index"
make_index "$T/idx2" two amd64 arm64 >/dev/null || bail "build a second one"
make_index "$T/other" one "$OTHER" >/dev/null || bail "build an index of the other platform only"
ok "push the two-platform index (skopeo copy --all)" push "$T/idx1" "$REG/app:v1"
ok "push an index without this host's platform" push "$T/other" "$REG/other:v1"
index1=sha256:$(skopeo inspect --raw --tls-verify=false "docker://$REG/app:v1" | sha256sum | cut -d' ' -f1)
d1=$(platform_digest "$REG/app:v1")
check_match "the index lists this host's platform" '^sha256:[0-9a-f]{64}$' "$d1"

# --- plain HTTP is refused unless --tls-verify=false ---
out=$(tool import app "docker://$REG/app:v1" 2>&1)
rc=$?
check_eq "an import from a plain-HTTP registry without --tls-verify=false fails" 1 "$rc"
check_eq "and says so in one sentence" \
	"snapfs-image: registry $REG answers in plain HTTP, not HTTPS: it is refused unless --tls-verify=false is given (the image then comes unencrypted and unverified)" \
	"$out"
ok "no image was made" test ! -e "$IMAGES/app"

# --- this host's platform, pinned by its manifest's digest ---
check_eq "import prints this platform's manifest digest" "$d1" "$(import app "docker://$REG/app:v1" 2>&1)"
check_lacks "not the index's" "$index1" "$d1"
check_eq "the tree is this host's platform" "$ARCH one" "$(cat "$IMAGES/app/etc/platform" 2>&1)"
check_eq "snapfs-image digest" "$d1" "$(tool digest app 2>&1)"

# --- one line per error ---
err1() {
	local out rc
	out=$(import "$@" 2>&1)
	rc=$?
	[ "$rc" -eq 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s\n' "$out"
}
check_eq "an unknown name, in one line" \
	"snapfs-image: docker://$REG/nosuch:v1: no such image in registry $REG (name unknown or tag unknown)" \
	"$(err1 x "docker://$REG/nosuch:v1")"
check_eq "an unknown tag, in one line" \
	"snapfs-image: docker://$REG/app:v9: no such image in registry $REG (name unknown or tag unknown)" \
	"$(err1 x "docker://$REG/app:v9")"
check_eq "an index without this host's platform, in one line" \
	"snapfs-image: docker://$REG/other:v1: no manifest for this host's platform (linux/$ARCH) in its index" \
	"$(err1 x "docker://$REG/other:v1")"
check_eq "an unreachable registry, in one line" \
	"snapfs-image: cannot reach registry 127.0.0.1:1 (network unreachable or registry down): connection refused" \
	"$(err1 x "docker://127.0.0.1:1/app:v1")"

# Docker's own manifest format (what docker push writes): converted to OCI's to unpack.
ok "push this platform's image in Docker's format" \
	skopeo copy --quiet --format v2s2 --dest-tls-verify=false "oci:$T/idx1:v1" "docker://$REG/dock:v1"
check_contains "the registry holds a Docker manifest" application/vnd.docker.distribution.manifest.v2+json \
	"$(skopeo inspect --raw --tls-verify=false "docker://$REG/dock:v1")"
check_match "it imports" '^sha256:[0-9a-f]{64}$' "$(import dock "docker://$REG/dock:v1" 2>&1)"
check_eq "its tree" "$ARCH one" "$(cat "$IMAGES/dock/etc/platform" 2>&1)"
ok "a single manifest has no index digest" test ! -e "$IMAGES/.oci/dock/$(tool digest dock | cut -d: -f2)/index-digest"
ok "rm it" tool rm dock

start_daemon || bail "the daemon mounts"

check_eq "images/app/digest is the platform manifest's" "$d1" "$(rd "$MNT/images/app/digest")"
check_eq "info.json digest" "$d1" "$(jget "$MNT/images/app/info.json" .digest)"
check_eq "info.json reference" "docker://$REG/app:v1" "$(jget "$MNT/images/app/info.json" .reference)"
check_eq "info.json index_digest" "$index1" "$(jget "$MNT/images/app/info.json" .index_digest)"
check_eq "a hand-made tree's info.json has no reference" null \
	"$(jget "$MNT/images/busybox/info.json" .reference)"

sb=$MNT/sandboxes/web
ok "mkdir sandboxes/web" mkdir "$sb"
ok "image app" wr "$sb/image" app
ok "entrypoint" wr "$sb/entrypoint" 'while :; do sleep 1; done'
ok "start a sandbox from the registry's image" wr "$sb/start"
check_eq "the sandbox sees this host's platform's tree" "$ARCH one" "$(sb_run web 'cat /etc/platform')"
check_eq "the sandbox pins the platform digest" "$d1" "$(jget "$sb/info.json" .image_digest)"
snap=$(snapshot_of web)
check_match "a snapshot of it" '^snap-[0-9a-f]{16}$' "$snap"
check_eq "the snapshot completes" completed "$(snap_wait "$snap")"
check_eq "restorable" yes "$(rd "$MNT/snapshots/$snap/restorable")"

# --- a re-push under the same tag, a re-import ---
ok "push another index under the same tag" push "$T/idx2" "$REG/app:v1"
d2=$(platform_digest "$REG/app:v1")
check_eq "the re-import pins the new platform digest" "$d2" "$(import app "docker://$REG/app:v1" 2>&1)"
check_lacks "which differs" "$d1" "$d2"
check_eq "the tree is the new one" "$ARCH two" "$(cat "$IMAGES/app/etc/platform")"
why=$(rd "$MNT/snapshots/$snap/restorable")
check_contains "restorable says the image changed" "image app changed" "$why"
check_contains "restorable names the snapshot's digest" "$d1" "$why"
check_contains "restorable names the host's digest" "$d2" "$why"
check_eq "import by the old index's digest (@sha256:)" "$d1" \
	"$(import app "docker://$REG/app@$index1" 2>&1)"
check_eq "restorable again" yes "$(rd "$MNT/snapshots/$snap/restorable")"
check_eq "info.json keeps the digest reference" "docker://$REG/app@$index1" \
	"$(jget "$MNT/images/app/info.json" .reference)"

# --- list and rm ---
line=$(tool list 2>&1 | grep "^app$TAB")
check_eq "list: the header" "NAME${TAB}DIGEST${TAB}REFERENCE${TAB}SIZE${TAB}SANDBOXES${TAB}SNAPSHOTS" \
	"$(tool list 2>&1 | head -n 1)"
check_eq "list: app's digest" "$d1" "$(cut -f2 <<<"$line")"
check_eq "list: app's reference" "docker://$REG/app@$index1" "$(cut -f3 <<<"$line")"
check_match "list: app's size in bytes" '^[1-9][0-9]{5,}$' "$(cut -f4 <<<"$line")"
check_eq "list: the sandbox using it" web "$(cut -f5 <<<"$line")"
check_eq "list: the snapshot of it" "$snap" "$(cut -f6 <<<"$line")"
check_eq "list: a hand-made tree" "busybox$TAB-$TAB-" "$(tool list | grep "^busybox$TAB" | cut -f1-3)"

out=$(tool rm app 2>&1)
check_eq "rm while a sandbox and a snapshot use it exits 1" 1 "$?"
check_eq "and names them" \
	"snapfs-image: image app is in use on this host by sandboxes web and snapshots $snap: rm --force removes it anyway" \
	"$out"
ok "the image is still there" test -L "$IMAGES/app"
ok "terminate web" wr "$sb/terminate"
out=$(tool rm app 2>&1)
check_eq "rm while a snapshot uses it exits 1" 1 "$?"
check_contains "and names the snapshot alone" "in use on this host by snapshots $snap:" "$out"
out=$(tool rm --force app 2>&1)
check_eq "rm --force removes it" 0 "$?"
check_contains "and says what breaks" \
	"removing image app, used by snapshots $snap: those snapshots can no longer be forked or resumed on this host" "$out"
ok "the name is gone" test ! -e "$IMAGES/app" -a ! -L "$IMAGES/app"
check_eq "its versions are gone" "lock" "$(ls -A "$IMAGES/.oci/app")"
check_eq "images/ no longer lists it" busybox "$(cd "$MNT/images" && echo *)"
check_contains "restorable says the image is gone" "image app does not exist on this host" \
	"$(rd "$MNT/snapshots/$snap/restorable")"
check_eq "rm of a hand-made tree is refused" 1 "$(tool rm busybox >/dev/null 2>&1; echo $?)"
ok "which is untouched" test -x "$IMAGES/busybox/bin/busybox"
check_eq "rm of what is not there" 1 "$(tool rm nosuch >/dev/null 2>&1; echo $?)"
import app "docker://$REG/app:v1" >/dev/null 2>&1
check_eq "a removed name imports again" "$ARCH two" "$(cat "$IMAGES/app/etc/platform" 2>&1)"
check_eq "list: the snapshot still uses it" "app$TAB-$TAB$snap" "$(tool list | grep "^app$TAB" | cut -f1,5,6)"
ok "rmdir the snapshot" rmdir "$MNT/snapshots/$snap"
check_eq "list with nothing using it" "app$TAB-$TAB-" "$(tool list | grep "^app$TAB" | cut -f1,5,6)"
ok "rm without --force when nothing uses it" tool rm app
stop_daemon

# --- credentials: a registry with htpasswd auth (basic auth over plain HTTP here) ---
PASSWORD=s3cret-$$
python3 -W ignore -c 'import crypt, sys; print("snapfs:" + crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))' \
	"$PASSWORD" >"$T/htpasswd" || bail "make an htpasswd file"
start_registry auth "$T/htpasswd" || bail "start docker-registry with auth"
AUTHREG=$REG_ADDR
mkdir -p "$T/home/.docker" "$T/auth"
printf '{"auths":{"%s":{"auth":"%s"}}}\n' "$AUTHREG" "$(printf 'snapfs:%s' "$PASSWORD" | base64)" >"$T/auth/auth.json"
cp "$T/auth/auth.json" "$T/home/.docker/config.json"
ok "push with credentials" push "$T/idx1" "$AUTHREG/app:v1" --dest-authfile "$T/auth/auth.json"
# None of the containers auth files of the host: an empty HOME and XDG_RUNTIME_DIR.
mkdir -p "$T/nohome" "$T/noxdg"
bare() { env -u REGISTRY_AUTH_FILE HOME="$T/nohome" XDG_RUNTIME_DIR="$T/noxdg" "$@"; }
out=$(bare "$TOOL" --images "$IMAGES" --tls-verify=false import sec "docker://$AUTHREG/app:v1" 2>&1)
check_eq "without credentials: refused" 1 "$?"
check_eq "unauthorized, in one line" \
	"snapfs-image: docker://$AUTHREG/app:v1: registry $AUTHREG refused access (unauthorized): log in with skopeo login $AUTHREG, or give --authfile" \
	"$out"
out=$(bare "$TOOL" --images "$IMAGES" --tls-verify=false --authfile "$T/auth/auth.json" import sec "docker://$AUTHREG/app:v1" 2>&1)
check_eq "with --authfile" "$d1" "$out"
out=$(bare env REGISTRY_AUTH_FILE="$T/auth/auth.json" "$TOOL" --images "$IMAGES" --tls-verify=false \
	import sec2 "docker://$AUTHREG/app:v1" 2>&1)
check_eq "with REGISTRY_AUTH_FILE" "$d1" "$out"
out=$(env -u REGISTRY_AUTH_FILE HOME="$T/home" XDG_RUNTIME_DIR="$T/noxdg" "$TOOL" --images "$IMAGES" \
	--tls-verify=false import sec3 "docker://$AUTHREG/app:v1" 2>&1)
check_eq "with ~/.docker/config.json" "$d1" "$out"
check_eq "the password is in no file snapfs-image wrote" "" \
	"$(grep -rlF "$PASSWORD" "$IMAGES/.oci" 2>/dev/null)"
check_lacks "nor in what list shows" "$PASSWORD" "$(tool list 2>&1)"
out=$(bare "$TOOL" --images "$IMAGES" --tls-verify=false --authfile "$T/nosuch.json" import sec "docker://$AUTHREG/app:v1" 2>&1)
check_eq "an auth file that cannot be read" "snapfs-image: cannot read the auth file $T/nosuch.json" "$out"

finish
