#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# The metrics file is what a scraper accepts (docs/metrics.md): `promtool
# check metrics` says nothing about it with a running sandbox, a snapshot
# and a refused request present, and every metric docs/metrics.md lists is
# there, and no other.
. "$(dirname "$0")/lib.sh"

command -v promtool >/dev/null || bail "promtool is installed (scripts/setup.sh --test: prometheus)"

start_daemon || bail "the daemon mounts"

# promtool_says: what promtool check metrics prints about the metrics file, and its status.
promtool_says() {
	local out rc
	out=$(rd "$MNT/metrics" | promtool check metrics 2>&1)
	rc=$?
	printf '%s\n' "$out"
	return "$rc"
}

ok "promtool runs on metrics" bash -c "timeout 30 cat '$MNT/metrics' | promtool check metrics"
start_counter_sandbox web || bail "a running sandbox"
snap=$(snapshot_of web)
check_eq "a snapshot completes" completed "$(snap_wait "$snap")"
expect_refusal EINVAL "a write with an unknown word" web wr "$MNT/sandboxes/web/snapshot" bogus
check_match "errors holds the refusal" '[[:alpha:]]' "$(rd "$MNT/errors")"

m=$(rd "$MNT/metrics")
check_contains "metrics counts the running sandbox" 'snapfs_sandboxes{state="running"} 1' "$m"
check_contains "metrics counts the snapshot" 'snapfs_snapshots{state="completed"} 1' "$m"
check_contains "metrics counts the refusal" 'snapfs_errors_total 1' "$m"
check_contains "the pause is a histogram" '# TYPE snapfs_snapshot_pause_seconds histogram' "$m"
check_contains "the histogram counts the snapshot's pause" 'snapfs_snapshot_pause_seconds_count 1' "$m"
check_contains "its +Inf bucket is its count" 'snapfs_snapshot_pause_seconds_bucket{le="+Inf"} 1' "$m"
check_match "metrics has the sandbox's memory" 'snapfs_sandbox_memory_bytes\{sandbox="web"\} [0-9]+' "$m"
out=$(promtool_says)
rc=$?
check_eq "promtool check metrics exits 0" 0 "$rc"
check_eq "promtool check metrics says nothing" "" "$out"

# Every metric is listed in docs/metrics.md, and every listed one is exposed.
exposed=$(printf '%s\n' "$m" | awk '$1 == "#" && $2 == "TYPE" { print $3 }' | sort)
documented=$(grep -oE '^\| `snapfs_[a-z_]+`' "$REPO/docs/metrics.md" | tr -d '|` ' | sort)
check_eq "docs/metrics.md lists exactly the metrics exposed" "$exposed" "$documented"

stop_daemon
finish
