#!/usr/bin/env python3
"""slowget.py URL OUT [BYTES_PER_SECOND [CAFILE]] - a slow HTTP/1.1 GET for
tests; an https:// URL is fetched over TLS trusting CAFILE.

The socket's receive buffer is made small before connecting, so that the
server is still sending when the client is slow (curl's --limit-rate only
reads slowly from a socket whose buffer the kernel grows to megabytes,
letting the server finish a file of several MiB at once).  Writes the body
to OUT.  Exit 0 when the body is as long as Content-Length says, 18 when
the server cut it (as curl's exit status), 7 when the connection is
refused, 1 on anything else.
"""
import socket
import ssl
import sys
import time
import urllib.parse


def main():
    url, out = sys.argv[1], sys.argv[2]
    rate = int(sys.argv[3]) if len(sys.argv) > 3 else 1 << 20
    u = urllib.parse.urlsplit(url)
    tls = u.scheme == "https"
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32768)
    try:
        s.connect((u.hostname, u.port or (443 if tls else 80)))
    except ConnectionRefusedError:
        return 7
    if tls:
        ctx = ssl.create_default_context(
            cafile=sys.argv[4] if len(sys.argv) > 4 else None)
        s = ctx.wrap_socket(s, server_hostname=u.hostname)
    path = u.path + ("?" + u.query if u.query else "")
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
               % (path, u.netloc)).encode())
    s.settimeout(60)
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(4096)
        if not d:
            return 18
        head += d
    head, body = head.split(b"\r\n\r\n", 1)
    length = None
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    step = 16384
    start = time.monotonic()
    with open(out, "wb") as f:
        f.write(body)
        got = len(body)
        while length is None or got < length:
            # at most rate bytes a second from the start
            ahead = got / rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
            try:
                d = s.recv(step)
            except OSError:
                d = b""
            if not d:
                break
            f.write(d)
            got += len(d)
    return 0 if length is not None and got == length else 18


if __name__ == "__main__":
    sys.exit(main())
