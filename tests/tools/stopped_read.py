#!/usr/bin/env python3
"""stopped_read.py MNT SRC PID FILE OFF LEN: read LEN bytes at OFF of
MNT/FILE while the mount daemon PID is stopped (SIGSTOP), and check them
against SRC/FILE.  A file passed through to the kernel (FUSE passthrough)
is read without the daemon; one the daemon answers would wait for SIGCONT.
Exit 0 when the read completed with the right bytes."""
import os
import signal
import sys
import threading

mnt, src, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
name, off, n = sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
with open(os.path.join(src, name), "rb") as f:
    f.seek(off)
    want = f.read(n)
fd = os.open(os.path.join(mnt, name), os.O_RDONLY)
got = []
t = threading.Thread(target=lambda: got.append(os.pread(fd, n, off)))
os.kill(pid, signal.SIGSTOP)
try:
    t.start()
    t.join(10)
    alive = t.is_alive()
finally:
    os.kill(pid, signal.SIGCONT)
t.join()
if alive:
    sys.exit("a read waited for the stopped daemon: not passed through")
if got[0] != want:
    sys.exit("wrong bytes with the daemon stopped")
