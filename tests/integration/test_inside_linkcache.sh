#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The kernel keeps a link's target once read (FUSE_CAP_CACHE_SYMLINKS, for
# root -> .root), so every other link's target is dropped right after its
# READLINK (fs/notify.h): a link the sandbox changes, or one moved deeper or
# shallower by a rename through root/ (its target is rewritten for its
# depth), must never be followed with the target it had before.
. "$(dirname "$0")/lib.sh"

# The notifier drops each link target half a second late: nothing may rely on its speed.
export SNAPFS_NOTIFY_LINK_DELAY_MS=500
start_daemon || bail "the daemon mounts"

make_sandbox box 'sleep 1000' || bail "sandbox box starts"
sb_wait box >/dev/null
R=$MNT/sandboxes/box/root

ok "the sandbox makes two files and a link to the first" sb_run box \
	"echo one >/t1 && echo two >/t2 && ln -s /t1 /lk"
check_eq "the link reads as written, contained" "t1" "$(readlink "$R/lk")"
check_eq "and leads to the first" one "$(cat "$R/lk")"
ok "the sandbox points it at the second" sb_run box "ln -sfn /t2 /lk"
sleep 1.2 # the entry's and the attributes' one second
check_eq "the link reads the new target" "t2" "$(readlink "$R/lk")"
check_eq "and leads to the second" two "$(cat "$R/lk")"

# A link two directories down, moved one up by a rename through root/.
ok "the sandbox makes /d1/d2/lk -> /t1" sb_run box "mkdir -p /d1/d2 && ln -s /t1 /d1/d2/lk"
check_eq "its target is rewritten for its depth" "../../t1" "$(readlink "$R/d1/d2/lk")"
check_eq "and leads to t1" one "$(cat "$R/d1/d2/lk")"
ok "d2 moves up through root/" mv "$R/d1/d2" "$R/d3"
check_eq "at once, the moved link is rewritten for its new depth" "../t1" "$(readlink "$R/d3/lk")"
check_eq "and still leads to t1" one "$(cat "$R/d3/lk" 2>&1)"
ok "and it moves back down, deeper" mv "$R/d3" "$R/d1/d2"
check_eq "at once, rewritten again" "../../t1" "$(readlink "$R/d1/d2/lk")"
check_eq "and leads to t1" one "$(cat "$R/d1/d2/lk" 2>&1)"

# A file that ends within its first 64 KiB is closed inside at its open
# (WIRE_OPEN_WHOLE): the same open reads on by its path once it grew.
ok "the sandbox writes a small file" sb_run box "echo hello >/grow"
# shellcheck disable=SC2016 # python's own strings
grown=$(python3 -c '
import os, sys, time, subprocess
fd = os.open(sys.argv[1], os.O_RDONLY)
first = os.read(fd, 100)
subprocess.run(sys.argv[2:], check=True, stdout=subprocess.DEVNULL)
time.sleep(1.3)  # the size the kernel keeps, one second
os.fstat(fd)
print((first + os.read(fd, 100)).decode().replace("\n", " ").strip())
os.close(fd)' "$R/grow" bash -c "echo 'echo more >>/grow' >'$MNT/sandboxes/box/exec' && cat '$MNT/sandboxes/box/exec'")
check_eq "one open reads it whole, then what the sandbox appended" "hello more" "$grown"
check_eq "and a new open reads both" "hello more" "$(tr '\n' ' ' <"$R/grow" | sed 's/ $//')"

# A rename while the notifier is held up (SNAPFS_NOTIFY_LINK_DELAY_MS, as a
# notifier waiting on a directory lock is): the rename itself drops what the
# kernel keeps, so the deep link moved to the top never climbs out with the
# target made for its old depth. With the drop left to the notifier, this
# read the host's file.
printf 'host-canary\n' >"$T/canary"
chmod 0644 "$T/canary"
deep=$(($(printf '%s' "$MNT" | tr -cd / | wc -c) + 4))
dirs=$(seq -s / "$deep" | sed 's|[0-9]*|d&|g')
ok "the sandbox makes a link $deep directories down to $T/canary, and its own file there" \
	sb_run box "mkdir -p '/$dirs' '$(dirname "$T/canary")' && echo inside-canary >'$T/canary' && ln -s '$T/canary' '/$dirs/lk'"
check_eq "the deep link reads the sandbox's file" inside-canary "$(cat "$R/$dirs/lk" 2>&1)"
ok "the link's directory moves to the top" mv "$R/$dirs" "$R/top"
check_eq "at once, the moved link still reads the sandbox's file" inside-canary "$(cat "$R/top/lk" 2>&1)"
check_eq "the host's file is untouched" host-canary "$(cat "$T/canary")"

# A directory made through root/ answers ENOENT for a second without asking
# the agent, for the names root/ did not make: an exec made through snapfs
# may make one meanwhile, and is seen at once.
ok "mkdir root/m" mkdir "$R/m"
ok "an exec makes /m/x in it" sb_run box "touch /m/x"
ok "root/m/x is there at once" stat "$R/m/x"
ok "mkdir root/m2" mkdir "$R/m2"
ok "the sandbox's own processes make /m2/y (through no snapfs request)" \
	runsc --root "$STATE/runsc" exec "$(jget "$MNT/sandboxes/box/info.json" .runtime_id)" touch /m2/y
ok "an exclusive create of m2/y, refused" bash -c "set -o noclobber; ! echo z >'$R/m2/y'"
ok "after which root/m2/y is there" stat "$R/m2/y"

# Reads at once past the heads of files closed inside at their open (they
# grew): each is opened again once, not once per read (a handle per extra
# read stayed open in the agent, up to its 1024).
ok "the sandbox makes 20 small files" sb_run box "mkdir /g && for i in \$(seq 20); do echo s >/g/f\$i; done"
# shellcheck disable=SC2016 # python's own strings
ok "20 opens, the files grow to 4 MiB, 6 reads at once past each head, closed" python3 -c '
import os, sys, time, subprocess, threading
R, E = sys.argv[1], sys.argv[2]
fds = [os.open("%s/g/f%d" % (R, i), os.O_RDONLY) for i in range(1, 21)]
for fd in fds: os.read(fd, 100)
with open(E, "r+") as e:
    e.write("for i in $(seq 20); do head -c 4194304 /dev/zero >>/g/f$i; done\n"); e.flush(); e.read()
time.sleep(1.3)
def rd(fd, k): os.pread(fd, 65536, 1048576 * (k + 1))
ts = [threading.Thread(target=rd, args=(fd, k)) for fd in fds for k in range(6)]
for t in ts: t.start()
for t in ts: t.join()
for fd in fds: os.close(fd)' "$R" "$MNT/sandboxes/box/exec"
sleep 0.5 # the closes are sent without waiting
check_eq "no file of them is left open in the sandbox" 0 \
	"$(sb_run box "ls -l /proc/[0-9]*/fd/ 2>/dev/null | grep -c '/g/f' || true")"

# root itself still reads as before (that the kernel keeps it, so a path through it
# costs no READLINK, shows in bench/agent.sh's ls -l, not here).
check_eq "root still leads to .root" ".root" "$(readlink "$MNT/sandboxes/box/root")"

finish
