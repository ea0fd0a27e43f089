#!/usr/bin/env bash
# check-layers.sh - the folders are the layers (docs/architecture.md): each C
# file includes headers only from its own folder's layer or the layers below.
#
#   main.c → fs/ → ops/ → runtime/ → backend/ → lib/
#
# runtime/'s families (runsc/, net/, gpu/, agent/) and backend/'s (store/,
# registry/, objstore/) are one layer each: they may use one another, and
# below. One check per layer, then "N passed, N failed" (tests/run.sh sums
# it). Run from anywhere; reads only the tracked sources.
set -u
cd "$(dirname "$0")/.." || exit

layers=(main.c fs ops runtime backend lib)
rank() {
	local i
	for i in "${!layers[@]}"; do
		[ "${layers[$i]}" = "$1" ] && { echo "$i"; return; }
	done
	echo -1
}

passed=0 failed=0
for layer in "${layers[@]}"; do
	me=$(rank "$layer")
	bad=""
	while IFS= read -r src; do
		while IFS= read -r inc; do
			top=${inc%%/*}
			[ "$inc" = "$top" ] && continue # a system or same-folder header
			them=$(rank "$top")
			[ "$them" -lt 0 ] && continue    # not one of ours (e.g. "fuse3/...")
			[ "$them" -lt "$me" ] && bad+="  $src includes $inc"$'\n'
		done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$src")
	done < <(git ls-files -- "$layer" | grep -E '\.[ch]$')
	if [ -z "$bad" ]; then
		echo "ok   $layer includes nothing from a layer above it"
		passed=$((passed + 1))
	else
		echo "not ok $layer includes from a layer above it:"
		printf '%s' "$bad"
		failed=$((failed + 1))
	fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
