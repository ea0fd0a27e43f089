#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016
# Files read ahead (ops/ahead.h): the open of a small file of a listed
# directory brings the next ones whole (WIRE_OPEN_MORE), kept for one open
# each and at most a second. A copy out must be exact, and nothing changed
# through root/, by an exec through snapfs, or over a second ago may read
# as it was.
. "$(dirname "$0")/lib.sh"

start_daemon || bail "the daemon mounts"
make_sandbox box 'sleep 1000' || bail "sandbox box starts"
sb_wait box >/dev/null
R=$MNT/sandboxes/box/root
W=$R/w

ok "the sandbox makes 150 small files, empty, edge-sized and big ones, a FIFO, a link, a subdirectory" \
	sb_run box 'mkdir -p /w/sub && cd /w && i=0 && while [ $i -lt 150 ]; do echo "content-a$i" >a$i; i=$((i + 1)); done &&
: >e0 && head -c 65535 /dev/urandom >s1 && head -c 65536 /dev/urandom >s2 && head -c 70000 /dev/urandom >s3 &&
mkfifo p && ln -s a1 l && for j in 0 1 2 3 4 5 6 7 8 9; do echo "b$j" >sub/b$j; done'

# --- a copy out is exact ---
ok "cp -r out of root/ (a FIFO among the files does not stall it)" timeout 60 cp -r "$W" "$T/out"
inside=$(sb_run box 'cd /w && find . -type f | sort | xargs sha256sum')
check_eq "every file copied out has the bytes it has inside" "$inside" \
	"$(cd "$T/out" && find . -type f | sort | xargs sha256sum)"
check_eq "all 164 files came out" 164 "$(find "$T/out" -type f | wc -l)"
check_eq "the link came out as a link" a1 "$(readlink "$T/out/l")"
ok "the FIFO came out as a FIFO" test -p "$T/out/p"

# fresh DIR FILE: a new listing of DIR, then FILE read, which brings the files after it.
fresh() { sleep 1.1 && ls "$1" >/dev/null && cat "$1/$2" >/dev/null; }

# --- what changes through root/ is never read as it was ---
ok "a listing, then a0 read (a1 onwards come with it)" fresh "$W" a0
ok "a1 rewritten through root/" wr "$W/a1" changed-a1
check_eq "a1 reads as rewritten" changed-a1 "$(cat "$W/a1")"
ok "a listing, then a2 read" fresh "$W" a2
ok "a3 written over in place through root/ (no truncation)" \
	bash -c 'printf X | dd of="$1" conv=notrunc status=none' _ "$W/a3"
check_eq "a3 reads as written" Xontent-a3 "$(cat "$W/a3")"
ok "a listing, then a4 read" fresh "$W" a4
ok "a5 renamed through root/" mv "$W/a5" "$W/moved5"
expect_errno ENOENT "a5 is gone at once" cat "$W/a5"
check_eq "moved5 holds a5's bytes" content-a5 "$(cat "$W/moved5")"
ok "a listing, then a6 read" fresh "$W" a6
ok "a7 removed through root/" rm "$W/a7"
expect_errno ENOENT "a7 is gone at once" cat "$W/a7"

# --- an exec through snapfs, and the sandbox's own changes after the second ---
ok "a listing, then a10 read" fresh "$W" a10
ok "an exec through snapfs rewrites a11" sb_run box 'echo via-exec >/w/a11'
check_eq "a11 reads as the exec left it" via-exec "$(cat "$W/a11")"
ok "a listing, then a20 read" fresh "$W" a20
sleep 1.1
ok "over a second later, a process of the sandbox (runsc exec) rewrites a21" \
	timeout 60 runsc --root "$RUNSC_ROOT" exec "$(runtime_id box)" sh -c 'echo by-sandbox >/w/a21'
check_eq "a21 reads as the sandbox left it" by-sandbox "$(cat "$W/a21")"

# --- each file read ahead answers one open ---
ok "a listing, then a30 read" fresh "$W" a30
check_eq "a31 reads" content-a31 "$(cat "$W/a31")"
ok "the sandbox rewrites a31 (runsc exec)" \
	timeout 60 runsc --root "$RUNSC_ROOT" exec "$(runtime_id box)" sh -c 'echo again >/w/a31'
check_eq "a31's second open, within the second, reads it anew" again "$(cat "$W/a31")"

finish
