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
check_eq "root/ is 0700 and the owner's" "700 0" "$(stat -c '%a %u' "$R/")"
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
# What a write-only open (direct_io, no page cache) must keep doing: the bytes
# are inside at write(), before the close; a write in the middle at an odd
# offset lands; sendfile() into it works. These hold with the page cache too:
# they guard the behaviour, not the choice of direct_io.
exec 3>"$R/work/open.txt"
echo 'before close' >&3
check_contains "a write is seen inside before the close" "before close" \
	"$(sb_run box 'cat /work/open.txt')"
exec 3>&-
ok "dd into the middle, write-only" bash -c "printf XY | dd of='$R/work/g.txt' bs=1 seek=3 conv=notrunc status=none"
check_eq "the bytes at offset 3" "$(printf 'helXY inside\nmore')" "$(cat "$R/work/g.txt")"
ok "python's shutil.copyfile (sendfile) into a write-only file" \
	python3 -c "import shutil, sys; shutil.copyfile(sys.argv[1], sys.argv[2])" "$T/big" "$R/work/py.bin"
check_contains "its bytes inside" "$want" "$(sb_run box 'sha256sum /work/py.bin')"
ok "truncate with >" bash -c "echo short >'$R/work/g.txt'"
check_eq "the truncated file" short "$(cat "$R/work/g.txt")"
ok "chmod" chmod 0640 "$R/work/g.txt"
check_eq "its mode inside" 640 "$(sb_run box 'stat -c %a /work/g.txt' | head -n 1)"
# A write through root/ is a write of the sandbox's: the setuid and setgid bits
# go as when a process inside writes (the sandbox's kernel clears them).
ok "a setuid, setgid file inside" sb_run box 'echo s >/work/suid; echo s >/work/suid2; chmod 6755 /work/suid /work/suid2'
ok "a write to it through root/" bash -c "echo more >>'$R/work/suid'"
ok "and one inside" sb_run box 'echo more >>/work/suid2'
check_eq "its mode after, as after a write inside" \
	"$(sb_run box 'stat -c %a /work/suid2' | head -n 1)" "$(sb_run box 'stat -c %a /work/suid' | head -n 1)"
check_eq "the bits went, inside" 755 "$(sb_run box 'stat -c %a /work/suid' | head -n 1)"
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

# --- nothing under root/ leads to the host ---------------------------------------
mnt_opts=$(awk -v m="$MNT" '$2 == m { print $4 }' /proc/mounts)
check_match "the mount is nosuid" '(^|,)nosuid(,|$)' "$mnt_opts"
check_match "the mount is nodev" '(^|,)nodev(,|$)' "$mnt_opts"
printf 'host-canary\n' >"$T/canary"
chmod 0644 "$T/canary"
climb=$(printf '../%.0s' $(seq 1 24))
ok "the sandbox makes links that point out" sb_run box "mkdir -p /etc /esc && echo inside-secret >/etc/shadow && ln -s /etc/shadow /esc/abs && ln -s ${climb}etc/shadow /esc/climb && ln -s $T/canary /esc/wabs && ln -s ${climb}${T#/}/canary /esc/wclimb && ln -s / /esc/root"
check_eq "an absolute link reads the sandbox's file" inside-secret "$(cat "$R/esc/abs" 2>&1)"
check_eq "a climbing link reads the sandbox's file" inside-secret "$(cat "$R/esc/climb" 2>&1)"
check_eq "readlink of an absolute link stays under root/" ../etc/shadow "$(readlink "$R/esc/abs")"
check_eq "readlink of a climbing link stays under root/" ../etc/shadow "$(readlink "$R/esc/climb")"
check_eq "a link to / is root/ itself" "$(stat -c %i "$R/")" "$(stat -L -c %i "$R/esc/root")"
bash -c "echo pwned >'$R/esc/wabs'" 2>/dev/null
bash -c "echo pwned >'$R/esc/wclimb'" 2>/dev/null
check_eq "a write through an absolute link leaves the host's file alone" host-canary "$(cat "$T/canary")"
check_eq "a write through a climbing link leaves the host's file alone" host-canary "$(cat "$T/canary")"
check_eq "ls -l shows the rewritten target" "../etc/shadow" \
	"$(find "$R/esc/abs" -maxdepth 0 -printf '%l')"
expect_errno EPERM "mknod of a device under root/" mknod "$R/tmp/dev" c 1 3

# --- exec through the agent -----------------------------------------------------
check_eq "exec runs and streams through the agent" "$(printf 'a\nb\nexit 3')" \
	"$(sb_exec box 'echo a; echo b >&2; exit 3')"
check_eq "a two-line script runs whole" "$(printf 'one\ntwo\nexit 0')" \
	"$(sb_exec box "$(printf 'echo one\necho two')")"

check_eq "echo cmd >exec; cat exec: the newest exec's output" "$(printf 'one\ntwo\nexit 0')" \
	"$(bash -c "echo 'echo one; sleep 1; echo two' >'$MNT/sandboxes/box/exec'" &&
		timeout 60 cat "$MNT/sandboxes/box/exec")"
check_eq "bash's printf of two lines (a write each) is one script" "$(printf 'x=5\nexit 0')" \
	"$(bash -c "printf 'x=5\necho x=\$x\n' >'$MNT/sandboxes/box/exec'" &&
		timeout 60 cat "$MNT/sandboxes/box/exec")"
# Streaming: the command waits for a file the test makes only once it read the first
# line; without streaming the read would wait for the end, which never comes.
exec 8<>"$MNT/sandboxes/box/exec"
printf 'echo first; while [ ! -e /tmp/go ]; do sleep 0.1; done; echo second\n' >&8
first=$(timeout 60 head -n 1 <&8)
check_eq "a reader sees a line while the command still runs" first "$first"
ok "the test lets the command go on (through root/)" touch "$R/tmp/go"
check_eq "then the rest, to the exit line" "$(printf 'second\nexit 0')" "$(timeout 60 cat <&8)"
exec 8<&-

# --- the ready shell: an exec after the first runs in a shell spawned ahead ---------
# shellcheck disable=SC2016 # $$ is the sandbox shell's
ready_q='tr "\\0" " " </proc/$$/cmdline'
sb_run box true >/dev/null
check_eq "a later exec runs in the shell spawned ahead" "sh /proc/self/fd/3 " \
	"$(sb_run box "$ready_q")"
check_eq "its stdin is /dev/null, not the script" "" "$(sb_run box 'cat')"
check_eq "its command holds no fd 3 (only 0 1 2 and ls's own)" "0 1 2 3" \
	"$(sb_run box 'ls /proc/self/fd | sort -n | tr "\n" " " | sed "s/ \$//"')"
check_eq "a script of several lines runs whole" "$(printf '1\n2\nexit 4')" \
	"$(sb_exec box "$(printf 'echo 1\necho 2\nexit 4')")"
check_lacks "ps leaves the waiting shell out" "/proc/self/fd/3" "$(rd "$MNT/sandboxes/box/ps")"
# One simple command naming a program: the ready shell execs it in place (no fork), so it is
# the leader of the exec's process group; with any syntax it runs as a child of the shell.
stat=$(sb_run box 'cat /proc/self/stat')
check_eq "a plain command runs in the shell's own process (pid = its group)" \
	"$(echo "$stat" | cut -d' ' -f1)" "$(echo "$stat" | cut -d' ' -f5)"
stat=$(sb_run box 'cat /proc/self/stat | cat')
check_match "a pipeline runs as children of the shell" '^[0-9]+ \(cat\) ' "$stat"
ok "whose pid is not its group's" test "$(echo "$stat" | cut -d' ' -f1)" != "$(echo "$stat" | cut -d' ' -f5)"
check_eq "a plain command that is not there exits 127" "exit 127" \
	"$(sb_exec box 'no-such-program-here' | tail -n 1)"
check_eq "a builtin is still the shell's own" "$(printf 'x\nexit 0')" "$(sb_exec box 'echo x')"
# The sandbox kills the waiting shell: the next exec spawns its own, and the one after is ready again.
ok "the sandbox kills the waiting shell" sb_run box \
	'for p in /proc/[0-9]*; do [ "${p#/proc/}" = $$ ] && continue; case "$(tr "\\0" " " <$p/cmdline 2>/dev/null)" in "sh /proc/self/fd/3 ") kill -9 ${p#/proc/};; esac; done'
check_eq "an exec after it works" "$(printf 'still\nexit 0')" "$(sb_exec box 'echo still')"
check_eq "the one after runs in a ready shell again" "sh /proc/self/fd/3 " "$(sb_run box "$ready_q")"

# --- many writers at once --------------------------------------------------------
# A write-only file's writes go behind (up to 4 each in the agent's hands); an
# answered one gives its request slot back at once, and at most 32 wait in a
# sandbox (then a write waits for its answer), so many writers, and files left
# open after their writes, take nothing from a stat, a listing or each other.
cat >"$T/held.py" <<'PY'
import os, sys
root = sys.argv[1]
fds = [os.open(f"{root}/tmp/held{i}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) for i in range(24)]
for fd in fds:
    for _ in range(4):
        os.write(fd, b"y" * (1 << 20))
os.listdir(f"{root}/etc")
os.stat(f"{root}/etc/passwd")
for fd in fds:
    os.close(fd)
print("ok")
PY
check_eq "24 files written 4 MiB each and left open, then a listing and a stat" ok \
	"$(python3 "$T/held.py" "$R" 2>&1 | tail -n 1)"
check_eq "each is whole inside" 24 "$(sb_run box 'for i in $(seq 0 23); do stat -c %s /tmp/held$i; done' | grep -cx 4194304)"
head -c 3000000 /dev/urandom >"$T/three"
pids=""
for i in $(seq 16); do
	cp "$T/three" "$R/tmp/par$i" &
	pids="$pids $!"
done
listed=0
for _ in 1 2 3; do ls "$R/etc" >/dev/null 2>&1 && listed=$((listed + 1)); done
failed=0
for p in $pids; do wait "$p" || failed=$((failed + 1)); done
check_eq "16 cp at once into root/ all succeed" 0 "$failed"
check_eq "ls answers while they run" 3 "$listed"
sum3=$(sha256sum <"$T/three" | cut -d' ' -f1)
check_eq "each is whole inside" 16 \
	"$(sb_run box 'for i in $(seq 16); do sha256sum /tmp/par$i; done' | grep -c "$sum3")"
ok "remove them" sb_run box 'rm -f /tmp/held* /tmp/par*'

# --- a sandbox that kills its agent ----------------------------------------------
keeper_q='for p in /proc/[0-9]*; do case "$(cat $p/comm 2>/dev/null)" in memfd:snapfs*) echo ${p#/proc/};; esac; done'
keeper=$(sb_run box "$keeper_q" | head -n 1)
check_match "the keeper runs in the sandbox" '^[0-9]+$' "$keeper"
ok "the sandbox kills its agent" sb_run box "(sleep 1; kill -9 $keeper) >/dev/null 2>&1 &"
sleep 2
ls "$R" >/dev/null 2>&1 # the first access after may find the channel broken
check_contains "root/ answers again (a new agent)" bin "$(ls "$R" 2>&1)"
check_eq "exec works again" "$(printf 'again\nexit 0')" "$(sb_exec box 'echo again')"
check_eq "the sandbox still runs" running "$(sb_status box)"
# Again and again: each death ends an attachment and the next use makes a new
# one. The ended one's two descriptors and reader thread stayed in the daemon
# for good, so a sandbox that killed its keeper in a loop used the daemon's up.
fd_count() { find "/proc/$DAEMON_PID/fd" -mindepth 1 | wc -l; }
fds_before=$(fd_count) killed="" last=$keeper
for _ in 1 2 3 4 5; do
	k=$(sb_run box "$keeper_q" | head -n 1)
	[ -n "$k" ] && [ "$k" != "$last" ] && killed="$killed $k" last=$k
	sb_run box "(sleep 0.5; kill -9 $k) >/dev/null 2>&1 &" >/dev/null
	sleep 1
	ls "$R" >/dev/null 2>&1 || ls "$R" >/dev/null 2>&1
done
fds_after=$(fd_count)
check_match "five keepers, each a new one, were killed" '^( [0-9]+){5}$' "$killed"
check_contains "root/ answers after five keepers killed" bin "$(ls "$R" 2>&1)"
ok "they leave none of the daemon's descriptors behind ($fds_before, then $fds_after)" \
	test "$fds_after" -le $((fds_before + 2))

# --- a sandbox that replaces its agent ----------------------------------------------
# An impostor (tests/doubles/agent-impostor.c) takes the keeper's socket and answers
# every request with a body that is no answer. The daemon refuses it (EIO) and ends
# that channel at once, as for a broken frame, so nothing made for the refused reply
# (a keeper's open handle) outlives it; the next use starts a real keeper. Before,
# the channel stayed and every request went on to the impostor.
if command -v musl-gcc >/dev/null; then
	musl-gcc -static -Os -std=gnu17 -I"$REPO" -o "$T/impostor" \
		"$REPO/tests/doubles/agent-impostor.c" "$REPO/runtime/agent/wire.c"
	ok "the impostor goes in through root/" cp "$T/impostor" "$R/tmp/impostor"
	ok "chmod +x" chmod 755 "$R/tmp/impostor"
	k=$(sb_run box "$keeper_q" | head -n 1)
	ok "the sandbox runs it and kills its keeper" sb_run box \
		"setsid /tmp/impostor /tmp/impostor.log junk </dev/null >/dev/null 2>&1 & (sleep 0.5; kill -9 $k) >/dev/null 2>&1 &"
	# Nothing through snapfs until it holds the keeper's name (a real keeper
	# would take it): asked with a raw runsc exec, which needs no agent.
	box_rid=$(runtime_id box)
	ok "the impostor holds the keeper's name" poll_until 30 \
		timeout 10 runsc --root "$RUNSC_ROOT" exec "$box_rid" grep -qx bound /tmp/impostor.log
	# The impostor's junk is EIO; the kernel, whose cached entry failed to
	# revalidate, looks the name up afresh, which may reach a real keeper.
	stat "$R/etc/passwd" >/dev/null 2>&1
	check_contains "the next use has a real keeper" passwd "$(ls "$R/etc" 2>&1)"
	poll_until 10 grep -qx eof "$R/tmp/impostor.log"
	imp_log=$(cat "$R/tmp/impostor.log" 2>&1)
	check_match "the impostor was attached (HELLO), asked, and let go" '^bound op 1( op [0-9]+)+ eof$' \
		"$(printf '%s' "$imp_log" | tr '\n' ' ')"
	check_eq "exec works" "$(printf 'real\nexit 0')" "$(sb_exec box 'echo real')"
	check_eq "the sandbox runs on" running "$(sb_status box)"

	# impostor_in MODE DESC: the sandbox runs the impostor in MODE (logging
	# to /tmp/impostor-MODE.log) and kills its keeper; checked once the
	# impostor holds the keeper's name.
	impostor_in() {
		local k
		k=$(sb_run box "$keeper_q" | head -n 1)
		ok "$2" sb_run box \
			"setsid /tmp/impostor /tmp/impostor-$1.log $1 </dev/null >/dev/null 2>&1 & (sleep 0.5; kill -9 $k) >/dev/null 2>&1 &"
		ok "it holds the keeper's name" poll_until 30 \
			timeout 10 runsc --root "$RUNSC_ROOT" exec "$box_rid" grep -qx bound "/tmp/impostor-$1.log"
	}

	# A full file system (the impostor answers every WRITE with ENOSPC): a
	# write is answered once the agent has it (write-behind), so its error
	# reaches the writer from that write(), a later one, fsync() or close().
	impostor_in full "an impostor of a full disk"
	cat >"$T/full.py" <<'PY'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
try:
    os.write(fd, b"x" * 4096)
    if sys.argv[2] == "fsync":
        os.fsync(fd)
    os.close(fd)
    print("no error")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
PY
	check_eq "a write's ENOSPC reaches the writer by its close" ENOSPC \
		"$(python3 "$T/full.py" "$R/tmp/full" close 2>&1)"
	check_eq "and by its fsync" ENOSPC "$(python3 "$T/full.py" "$R/tmp/full" fsync 2>&1)"
	ok "the sandbox ends the impostor" timeout 10 runsc --root "$RUNSC_ROOT" exec "$box_rid" \
		sh -c 'kill $(pidof impostor)'
	ok "root/ has a real keeper again" poll_until 10 test -e "$R/etc/passwd"

	# A keeper that stops reading (the impostor goes mute at its first
	# WRITE): the daemon's writes fill the pipe; the writer gives up after
	# 30 s (EIO) and the channel goes, where it held the channel's lock for
	# good; once the sandbox ends the impostor, a real keeper serves again.
	impostor_in mute "an impostor that stops reading"
	t0=$(date +%s)
	expect_errno EIO "8 MiB written through it, 1 MiB a write" \
		timeout 120 dd if=/dev/zero of="$R/tmp/mute" bs=1M count=8 status=none
	took=$(($(date +%s) - t0))
	ok "the writer, and its close, gave up in one 30 s bound ($took s)" test "$took" -le 45
	ok "the impostor went mute" timeout 10 runsc --root "$RUNSC_ROOT" exec "$box_rid" \
		grep -qx mute /tmp/impostor-mute.log
	# The sandbox ends it, if the daemon has not (a keeper stuck 30 s is killed).
	timeout 10 runsc --root "$RUNSC_ROOT" exec "$box_rid" \
		sh -c 'kill $(pidof impostor) 2>/dev/null; true' >/dev/null 2>&1
	ok "root/ has a real keeper again, after the mute one" poll_until 10 test -e "$R/etc/passwd"

	# A keeper stuck in a call (the impostor reads every request, answers
	# none and keeps the keeper's name): the request fails after 30 s (EIO),
	# its channel goes with it, as for a posted write, and the keeper that
	# said it served the channel is killed, so the next use attaches a real
	# keeper at once. Before, the channel stayed and every later call waited
	# its own 30 s; with the channel ended but the impostor alive, the next
	# attach would wait on the name it holds.
	impostor_in deaf "an impostor that answers nothing"
	t0=$(date +%s)
	# EIO, or ENOENT when the kernel, whose cached entry failed to revalidate,
	# looks the name up afresh and so reaches the real keeper that follows.
	expect_errno "EIO|ENOENT" "a stat through it fails" timeout 120 stat "$R/tmp/deaf"
	took=$(($(date +%s) - t0))
	ok "it gave up in one 30 s bound ($took s)" test "$took" -le 45
	ok "the next use has a real keeper at once" timeout 15 stat "$R/etc/passwd"
	ok "the daemon killed the impostor" poll_until 10 \
		timeout 10 runsc --root "$RUNSC_ROOT" exec "$box_rid" sh -c '! pidof impostor'
	timeout 10 runsc --root "$RUNSC_ROOT" exec "$box_rid" \
		sh -c 'kill -9 $(pidof impostor) 2>/dev/null; true' >/dev/null 2>&1

	# The read memory held past a detach (the impostor takes it, leaves a
	# child that keeps it mapped and lets go of the channel at DETACH): a
	# checkpoint with a host file held inside would not restore, so the
	# snapshot is refused rather than written; once the child is gone,
	# one completes. Without the check, the snapshot completed.
	impostor_in hold "an impostor that keeps the read memory"
	ls "$R/tmp" >/dev/null 2>&1 # its attach (a listing is never cached)
	ok "it was handed the read memory, and a child holds it" poll_until 10 \
		timeout 10 runsc --root "$RUNSC_ROOT" exec "$box_rid" grep -qx holding /tmp/impostor-hold.log
	expect_errno EBUSY "a snapshot then is refused" bash -c "echo 1 >'$MNT/sandboxes/box/snapshot'"
	held=$(rd "$MNT/snapshots/index" | awk '$3 == "box" { id = $1 } END { print id }')
	check_contains "and says why" "read memory" "$(rd "$MNT/snapshots/$held/error")"
	# Again, with no channel since (the refusal ended it): still refused.
	expect_errno EBUSY "and again, while the child holds it" \
		bash -c "echo 1 >'$MNT/sandboxes/box/snapshot'"
	timeout 10 runsc --root "$RUNSC_ROOT" exec "$box_rid" \
		sh -c 'kill -9 $(pidof impostor) 2>/dev/null; true' >/dev/null 2>&1
	freed=$(snapshot_of box)
	snap_wait "$freed" >/dev/null
	check_eq "once the sandbox ends it, a snapshot completes" completed "$(snap_status "$freed")"
else
	skip "a sandbox that replaces its agent" "musl-gcc is missing (apt-get install musl-tools)"
fi

# --- a snapshot and a fork keep what root/ wrote -------------------------------------
ok "a file written through root/" bash -c "echo 'from the source' >'$R/root/note.md'"
exec 7<"$R/bin/busybox" # a file held open across the snapshot
snap=$(snapshot_of box)
check_match "a snapshot with root/ in use" '^[a-z0-9-]+$' "$snap"
snap_wait "$snap" >/dev/null
check_eq "the snapshot is completed" completed "$(snap_status "$snap")"
check_eq "a file held open reads on after the snapshot" "$(head -c 64 "$IMAGES/busybox/bin/busybox" | sha256sum)" \
	"$(head -c 64 <&7 | sha256sum)"
exec 7<&-
check_eq "the source's root/ works after it" "from the source" "$(cat "$R/root/note.md")"
fork=$(fork_of "$snap")
sb_wait "$fork" >/dev/null
check_eq "the fork runs" running "$(sb_status "$fork")"
check_eq "the fork's root/ has the file" "from the source" "$(cat "$MNT/sandboxes/$fork/root/root/note.md" 2>&1)"

# --- states: suspended, resumed, terminated ---------------------------------------------
ok "suspend" wr "$MNT/sandboxes/$fork/suspend"
sb_wait "$fork" >/dev/null
check_eq "suspended" suspended "$(sb_status "$fork")"
check_eq "root/ of a suspended sandbox lists nothing" "" "$(ls "$MNT/sandboxes/$fork/root" 2>&1)"
expect_errno EBUSY "a file in a suspended sandbox's root/" stat "$MNT/sandboxes/$fork/root/root/note.md"
check_lacks "error is not rewritten" "root" "$(rd "$MNT/sandboxes/$fork/error")"
ok "resume" wr "$MNT/sandboxes/$fork/resume"
sb_wait "$fork" >/dev/null
check_eq "the resumed sandbox's root/ has the file" "from the source" \
	"$(cat "$MNT/sandboxes/$fork/root/root/note.md" 2>&1)"
ok "terminate" wr "$MNT/sandboxes/$fork/terminate"
sb_wait "$fork" >/dev/null
expect_errno ENOENT "a file in a terminated sandbox's root/" stat "$MNT/sandboxes/$fork/root/bin"

# --- an image with no shell and no tools ---------------------------------------------
if command -v musl-gcc >/dev/null; then
	mkdir -p "$IMAGES/bare/bin" "$IMAGES/bare/tmp"
	printf '#include <unistd.h>\nint main(void){for(;;)pause();}\n' >"$T/sleeper.c"
	musl-gcc -static -Os -o "$IMAGES/bare/bin/sh" "$T/sleeper.c"
	chmod 1777 "$IMAGES/bare/tmp"
	ok "mkdir a sandbox of the bare image" mkdir "$MNT/sandboxes/bare"
	ok "its image" wr "$MNT/sandboxes/bare/image" bare
	ok "its entrypoint" wr "$MNT/sandboxes/bare/entrypoint" sleep
	ok "start it" wr "$MNT/sandboxes/bare/start"
	sb_wait bare >/dev/null
	check_eq "the bare sandbox runs" running "$(sb_status bare)"
	check_contains "its root/ lists its one binary's directory" bin "$(ls "$MNT/sandboxes/bare/root")"
	ok "cp into it" cp "$T/big" "$MNT/sandboxes/bare/root/tmp/big"
	check_eq "and back" "$want" "$(sha256sum <"$MNT/sandboxes/bare/root/tmp/big" | cut -d' ' -f1)"
else
	skip "an image with no shell" "musl-gcc is missing (apt-get install musl-tools)"
fi

finish
