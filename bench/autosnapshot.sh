#!/usr/bin/env bash
# shellcheck disable=SC2016
# bench/autosnapshot.sh - issue 12's figure for periodic snapshots: the bytes
# each auto- snapshot adds to the store (its stored_bytes), for three
# sandboxes that differ in what they change between ticks. Run on demand,
# as root, after `make build/asan/snapfs` (or SNAPFS_BIN=...):
#
#   bench/autosnapshot.sh [TICKS]     (default 8; every=2 keep=TICKS)
#
# It prints one Markdown table row per sandbox: its image size, what the
# first snapshot stored, and the median and largest of what each later one
# added. It uses the integration tests' lib.sh for the daemon and cleanup.
set -u
TICKS=${1:-8}
. "$(dirname "$0")/../tests/integration/lib.sh"

start_daemon || bail "the daemon mounts"
declare -A ENTRY=(
	[idle]='while :; do sleep 3600; done'
	[blob]='head -c 8388608 /dev/urandom > /tmp/blob; while :; do sleep 3600; done'
	[busy]="$COUNTER_ENTRYPOINT"
)
auto_rows() {
	snapshots_jq "$1" 'select(.name // "" | startswith("auto-")) | select(.status == "completed") | "\(.created_at) \(.size_bytes) \(.stored_bytes)"' |
		sort
}
enough() { [ "$(auto_rows "$1" | wc -l)" -ge "$TICKS" ]; }
echo "| sandbox | image MiB | first stored KiB | each later: median KiB | largest KiB |"
echo "|---|---|---|---|---|"
for sb in idle blob busy; do
	make_sandbox "$sb" "${ENTRY[$sb]}" >/dev/null || bail "start $sb"
	sleep 2
	wr "$MNT/sandboxes/$sb/autosnapshot" "every=2 keep=$TICKS"
	poll_until 300 enough "$sb" || bail "$sb: $TICKS auto snapshots within 300 s"
	wr "$MNT/sandboxes/$sb/autosnapshot" 0
	rows=$(auto_rows "$sb")
	size=$(head -n 1 <<<"$rows" | cut -d' ' -f2)
	first=$(head -n 1 <<<"$rows" | cut -d' ' -f3)
	later=$(tail -n +2 <<<"$rows" | cut -d' ' -f3 | sort -n)
	n=$(wc -l <<<"$later")
	median=$(sed -n "$(((n + 1) / 2))p" <<<"$later")
	largest=$(tail -n 1 <<<"$later")
	printf '| %s | %.1f | %d | %d | %d |\n' "$sb" "$(bc -l <<<"$size / 1048576")" \
		$((first / 1024)) $((median / 1024)) $((largest / 1024))
	wr "$MNT/sandboxes/$sb/terminate"
done
stop_daemon >/dev/null
