#!/usr/bin/env python3
"""hold_orphans.py PREFIX CMD...: run CMD as a child of a subreaper that
never reaps what it inherits, as a PID 1 that does not reap would.

CMD's pid goes to PREFIX.pid, its exit status to PREFIX.rc once it ends;
the processes CMD leaves behind (a daemon's sandboxes) are then this
process's children and stay zombies when they end, until SIGTERM: then it
reaps them all and exits.
"""
import ctypes
import os
import signal
import subprocess
import sys

PR_SET_CHILD_SUBREAPER = 36


def reap_and_exit(*_):
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
    os._exit(0)


def main():
    prefix, cmd = sys.argv[1], sys.argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("hold_orphans: prctl: " + os.strerror(ctypes.get_errno()))
    child = subprocess.Popen(cmd)
    with open(prefix + ".pid", "w") as f:
        f.write("%d\n" % child.pid)
    rc = child.wait()  # waitpid(child): nothing else is reaped
    with open(prefix + ".rc.tmp", "w") as f:
        f.write("%d\n" % rc)
    os.rename(prefix + ".rc.tmp", prefix + ".rc")
    signal.signal(signal.SIGTERM, reap_and_exit)
    while True:
        signal.pause()


main()
