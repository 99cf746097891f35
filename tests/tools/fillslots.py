#!/usr/bin/python3
"""fillslots.py PORT ADDRS PER OUT: idle sockets from many addresses.

Opens PER connections from each of ADDRS loopback addresses (127.0.0.2,
127.0.0.3, ...) to 127.0.0.1:PORT that never send a byte, waits until
the server has taken them all (1 s), then asks /healthz from 127.0.0.1
(timeout 10 s) and writes to OUT "healthz ok|failed SECONDS" and
"closed N" (how many of the idle sockets the server has closed by then).
"""
import socket
import sys
import time
import urllib.request

port, addrs, per, out = int(sys.argv[1]), int(sys.argv[2]), \
    int(sys.argv[3]), sys.argv[4]
socks = []
for a in range(addrs):
    for _ in range(per):
        s = socket.socket()
        try:
            s.bind(("127.0.0.%d" % (a + 2), 0))
            s.connect(("127.0.0.1", port))
        except OSError:
            pass
        socks.append(s)
time.sleep(1)
t = time.monotonic()
try:
    ok = urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port,
                                timeout=10).read() == b"ok\n"
except Exception:  # noqa: BLE001 - any failure is "failed"
    ok = False
res = ["healthz %s %.2f" % ("ok" if ok else "failed", time.monotonic() - t)]
closed = 0
for s in socks:
    s.setblocking(False)
    try:
        if s.recv(100) == b"":
            closed += 1
    except BlockingIOError:
        pass
    except OSError:
        closed += 1
res.append("closed %d" % closed)
with open(out, "w") as fh:
    fh.write("\n".join(res) + "\n")
