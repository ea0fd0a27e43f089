# shellcheck shell=bash
# lib_netns.sh - sourced first, before lib.sh, by a test whose daemon must
# listen on no host address (published ports): the test runs again in a
# network namespace of its own (unshare -n), with its loopback up, and
# refuses to go on in the host's. Nothing outside that namespace is touched.
if [ "${SNAPFS_OWN_NETNS:-}" != 1 ]; then
	SNAPFS_OWN_NETNS=1 exec unshare -n -- "$BASH" "$0" "$@"
fi
if [ "$(readlink /proc/self/ns/net)" = "$(readlink /proc/1/ns/net)" ]; then
	echo "not in a network namespace of our own: refusing to touch any interface" >&2
	exit 1
fi
ip link set lo up || exit 1 # the loopback of our own namespace, made by unshare
