#!/usr/bin/python3
"""idlesocks.py URL REPO BIG OUT [CA]: careless clients against wstore serve.

Opens 300 connections from 127.0.0.2 that never finish their request
(plain HTTP: half a request line; with CA, HTTPS: half of them send the
start of a ClientHello, the rest nothing), then, from 127.0.0.1 while they
are open, asks /healthz and downloads BIG (the local copy of a file of
REPO's main) and compares its SHA-256; last, waits up to 15 s for the
server to close the idle sockets.  Writes to OUT the lines
"healthz ok|failed SECONDS", "download ok|failed SECONDS", "closed N".
"""
import hashlib
import os
import socket
import ssl
import sys
import time
import urllib.request

url, repo, big, out = sys.argv[1:5]
ca = sys.argv[5] if len(sys.argv) > 5 else None
ctx = ssl.create_default_context(cafile=ca) if ca else None
port = int(url.rsplit(":", 1)[1])
socks = []
for i in range(300):
    s = socket.socket()
    try:
        s.bind(("127.0.0.2", 0))
        s.connect(("127.0.0.1", port))
        if not ca:
            s.send(b"GET /healthz HTTP/1.1\r\nHost: x")
        elif i % 2:
            # the start of a TLS record of a ClientHello, never finished
            s.send(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    except OSError:
        pass
    socks.append(s)


def timed(name, fn):
    t = time.monotonic()
    try:
        ok = fn()
    except Exception:  # noqa: BLE001 - any failure is "failed"
        ok = False
    return "%s %s %.2f" % (name, "ok" if ok else "failed",
                           time.monotonic() - t)


def get(path):
    return urllib.request.urlopen(url + path, timeout=10, context=ctx).read()


res = [timed("healthz", lambda: get("/healthz") == b"ok\n")]
with open(big, "rb") as fh:
    want = hashlib.sha256(fh.read()).hexdigest()
res.append(timed("download", lambda: hashlib.sha256(
    get("/%s/resolve/main/%s" % (repo, os.path.basename(big)))).hexdigest()
    == want))
deadline = time.monotonic() + 15
closed = 0
while time.monotonic() < deadline:
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
    if closed == len(socks):
        break
    time.sleep(0.2)
res.append("closed %d" % closed)
with open(out, "w") as fh:
    fh.write("\n".join(res) + "\n")
