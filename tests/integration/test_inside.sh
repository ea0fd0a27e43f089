#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# sandboxes/<id>/root/: the sandbox's own files through the mount (issue 23):
# copies in and out, directories, renames, links kept inside root/, a fork
# and a resume that read what was written, a sandbox that kills its agent.
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"

LOOP='while :; do sleep 1; done'
make_sandbox box "$LOOP" || bail "sandbox box starts"
sb_wait box >/dev/null
R=$MNT/sandboxes/box/root

# --- reading what is inside -----------------------------------------------
ok "root/ is a directory" test -d "$R"
check_eq "root/ is 0700 and the owner's" "700 0" "$(stat -c '%a %u' "$R")"
check_contains "ls root/ shows the image's /bin" bin "$(ls "$R")"
ok "root/bin/busybox is a regular file" test -f "$R/bin/busybox"
check_eq "root/bin/busybox is the image's" "$(sha256sum <"$IMAGES/busybox/bin/busybox")" \
	"$(sha256sum <"$R/bin/busybox")"
check_eq "stat shows the inside's uid and mode" "0 0 755" "$(stat -c '%u %g %a' "$R/bin/busybox")"

# --- writing in, reading back inside ---------------------------------------
head -c 20000000 /dev/urandom >"$T/big"
want=$(sha256sum <"$T/big" | cut -d' ' -f1)
ok "cp of a 20 MB file into root/tmp" cp "$T/big" "$R/tmp/big"
check_eq "its size inside" 20000000 "$(stat -c %s "$R/tmp/big")"
check_contains "sha256sum inside sees the same bytes" "$want" "$(sb_run box 'sha256sum /tmp/big')"
ok "cp it back out" cp "$R/tmp/big" "$T/big.out"
check_eq "what came out is what went in" "$want" "$(sha256sum <"$T/big.out" | cut -d' ' -f1)"

ok "mkdir -p root/work/a/b" mkdir -p "$R/work/a/b"
ok "echo into a new file" bash -c "echo 'hello inside' >'$R/work/a/b/f.txt'"
check_eq "cat reads it back" "hello inside" "$(cat "$R/work/a/b/f.txt")"
check_contains "the sandbox sees it" "hello inside" "$(sb_run box 'cat /work/a/b/f.txt')"
ok "mv within root/" mv "$R/work/a/b/f.txt" "$R/work/g.txt"
check_eq "the moved file reads" "hello inside" "$(cat "$R/work/g.txt")"
ok "the old name is gone" test ! -e "$R/work/a/b/f.txt"
ok "mv of a directory" mv "$R/work/a" "$R/work/c"
ok "a file under the moved directory is found" test -d "$R/work/c/b"
ok "append with >>" bash -c "echo more >>'$R/work/g.txt'"
check_eq "both lines are there" "$(printf 'hello inside\nmore')" "$(cat "$R/work/g.txt")"
ok "truncate with >" bash -c "echo short >'$R/work/g.txt'"
check_eq "the truncated file" short "$(cat "$R/work/g.txt")"
ok "chmod" chmod 0640 "$R/work/g.txt"
check_eq "its mode inside" 640 "$(sb_run box 'stat -c %a /work/g.txt' | head -n 1)"
ok "touch -d sets mtime" touch -d '2020-01-02 03:04:05 UTC' "$R/work/g.txt"
check_eq "mtime seen inside" 1577934245 "$(sb_run box 'stat -c %Y /work/g.txt' | head -n 1)"
ok "ln -s" ln -s g.txt "$R/work/link"
check_eq "readlink of a relative link" g.txt "$(readlink "$R/work/link")"
check_eq "cat through it" short "$(cat "$R/work/link")"
ok "rm" rm "$R/work/g.txt" "$R/work/link"
ok "rmdir" rmdir "$R/work/c/b" "$R/work/c"
ok "rm -r" rm -r "$R/work"
check_contains "the tree is gone inside" "No such file" "$(sb_run box "ls /work 2>&1")"
expect_errno ENOENT "open of a missing file" cat "$R/no/such/file"

finish
