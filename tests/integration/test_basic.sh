#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# The tree, and one sandbox's life: mkdir, settings, start, exec, info.json, terminate, rmdir.
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"

# --- the tree ---
for f in README version metrics events errors sandboxes/index snapshots/index; do
	ok "$f is readable" rd "$MNT/$f"
done
check_match "README explains the tree" 'snapshot' "$(rd "$MNT/README")"
version=$(rd "$MNT/version")
check_contains "version names the runsc release" 20240729 "$version"
check_contains "version names the store URL" "file://$STATE/store" "$version"
check_eq "sandboxes/index starts empty" "" "$(rd "$MNT/sandboxes/index")"
check_eq "snapshots/index starts empty" "" "$(rd "$MNT/snapshots/index")"
check_eq "images/ lists the busybox image" busybox "$(ls "$MNT/images")"
check_match "images/busybox/digest is a sha256" '^sha256:[0-9a-f]{64}$' \
	"$(rd "$MNT/images/busybox/digest")"
ok "images/busybox/info.json is JSON" jq -e . "$MNT/images/busybox/info.json"
ok "metrics is Prometheus text" \
	grep -qE '^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eEInfNa]+( [0-9]+)?$' "$MNT/metrics"
size=$(stat -c %s "$MNT/version")
check_eq "st_size of version is its length" "$(rd "$MNT/version" | wc -c)" "$size"

# --- a sandbox made with mkdir ---
sb=$MNT/sandboxes/web
ok "mkdir sandboxes/web" mkdir "$sb"
check_eq "a new sandbox is created" created "$(sb_status web)"
for f in status info.json error image entrypoint env gpu start snapshot suspend resume terminate \
	exec wait console usage snapshots; do
	ok "sandboxes/web/$f exists" test -e "$sb/$f"
done
ok "no parent link on a sandbox that was not forked" test ! -L "$sb/parent"
ok "set image" wr "$sb/image" busybox
ok "set entrypoint" wr "$sb/entrypoint" 'echo hello > /root/hello; while :; do sleep 1; done'
ok "set env" wr "$sb/env" "$(printf 'GREETING=hi there\nSECRET_TOKEN=s3cr3t-value')"
check_eq "image reads back" busybox "$(rd "$sb/image")"
check_eq "env reads back" "$(printf 'GREETING=hi there\nSECRET_TOKEN=s3cr3t-value')" "$(rd "$sb/env")"
check_contains "index lists web as created" "web created" "$(rd "$MNT/sandboxes/index")"

ok "start (synchronous)" wr "$sb/start"
check_eq "status after start" running "$(sb_status web)"
check_eq "wait on a running sandbox prints its status" running "$(sb_wait web)"
check_contains "index lists web as running" "web running" "$(rd "$MNT/sandboxes/index")"
check_eq "error is empty" "" "$(rd "$sb/error")"

out=$(sb_exec web 'echo "$GREETING"; cat /root/hello')
check_eq "exec: output, then exit 0" "$(printf 'hi there\nhello\nexit 0')" "$out"
out=$(sb_exec web 'echo to-stderr >&2; exit 3')
check_eq "exec: stderr too, then a non-zero exit" "$(printf 'to-stderr\nexit 3')" "$out"
check_eq "exec of a command that is not there" "exit 127" "$(sb_exec web 'no-such-command' | tail -n 1)"

info=$MNT/sandboxes/web/info.json
ok "info.json is JSON" jq -e . "$info"
check_eq "info.json id" web "$(jget "$info" .id)"
check_eq "info.json image" busybox "$(jget "$info" .image)"
check_eq "info.json image_digest is the image's" "$(rd "$MNT/images/busybox/digest")" \
	"$(jget "$info" .image_digest)"
check_eq "info.json status" running "$(jget "$info" .status)"
check_contains "info.json entrypoint" "echo hello" "$(jget "$info" .entrypoint)"
check_eq "info.json env lists the names" "GREETING SECRET_TOKEN" \
	"$(jq -r '(.env // .env_names) | join(" ")' <"$info")"
check_lacks "info.json never shows an env value" s3cr3t "$(rd "$info")"
check_match "info.json created_at" '^[0-9]' "$(jget "$info" .created_at)"
rid=$(runtime_id web)
check_match "info.json runtime id" '^[A-Za-z0-9_-]{8,}$' "$rid"
check_match "info.json pid" '^[1-9][0-9]*$' "$(jget "$info" .pid)"
check_eq "info.json gpu" false "$(jget "$info" '.gpu == true')"
ok "info.json has message and parent_snapshot" jq -e 'has("message") and has("parent_snapshot")' "$info"
expect_errno EBUSY "image after start" wr "$sb/image" busybox
check_match "error now says why" 'running' "$(rd "$sb/error")"
check_lacks "events never show an env value" s3cr3t "$(rd "$MNT/events")"
ok "events has JSON lines" jq -e . "$MNT/events"
check_eq "the runsc container is running" running "$(runsc_state_of "$rid")"

# --- a sandbox made by writing a spec to sandboxes/new ---
id=$(wr_read "$MNT/sandboxes/new" '{"image": "busybox", "entrypoint": "sleep 1000"}' | head -n 1)
check_match "sandboxes/new: the id is read on the same open file" '^sbx-[0-9a-f]{16}$' "$id"
if [ -n "$id" ]; then
	check_eq "sandboxes/new: it runs" running "$(sb_status "$id")"
	ok "terminate $id" wr "$MNT/sandboxes/$id/terminate"
fi

# --- the end of a sandbox ---
expect_errno EBUSY "rmdir of a running sandbox" rmdir "$sb"
ok "terminate" wr "$sb/terminate"
check_eq "status after terminate" terminated "$(sb_status web)"
ok "the runsc container is gone or stopped" \
	bash -c '[ -z "$1" ] || [ "$1" = stopped ]' _ "$(runsc_state_of "$rid")"
ok "rmdir a terminated sandbox" rmdir "$sb"
ok "it is gone" test ! -e "$sb"
check_eq "its files are gone from the state directory, nothing set aside left" "" \
	"$(find "$STATE/sandboxes" -mindepth 1 -maxdepth 1 \( -name web -o -name '.removed-*' \) -printf '%f\n')"
check_lacks "index no longer lists it" "web " "$(rd "$MNT/sandboxes/index")"
ok "a gone sandbox's name can be used again" mkdir "$sb"
ok "rmdir of a sandbox never started (docs/control-files.md)" rmdir "$sb"

# --- a sandbox whose entrypoint ends on its own (docs/control-files.md) ---
ok "start a sandbox that exits after a second" make_sandbox short 'sleep 1'
ok "it becomes terminated" poll_until 30 status_is short terminated
check_match "its error says the process exited" 'exited' "$(rd "$MNT/sandboxes/short/error")"

# --- tail -f events follows the journal ---
timeout 60 tail -n 0 -f "$MNT/events" >"$T/events.tail" 2>&1 &
tail_pid=$!
BG_PIDS+=("$tail_pid")
sleep 1.5 # let tail take its first look at the file
ok "mkdir sandboxes/followed" mkdir "$MNT/sandboxes/followed"
ok "tail -f events sees the new line" poll_until 15 grep -q '"followed"' "$T/events.tail"
kill "$tail_pid"
wait "$tail_pid" 2>/dev/null

stop_daemon
finish
