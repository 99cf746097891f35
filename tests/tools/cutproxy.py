#!/usr/bin/env python3
"""cutproxy.py UPSTREAM_PORT MATCH CUT_AFTER LOG - a TCP proxy on loopback
that cuts one download short, once.

Listens on 127.0.0.1 (a free port, printed as "port N" on stdout once
listening) and forwards every connection to 127.0.0.1:UPSTREAM_PORT.  The
first connection that sends a GET whose request line contains MATCH is
closed (both ways) after CUT_AFTER bytes of the answer have gone to the
client: a connection lost mid-file.  Every other connection, and that one
before the cut, is forwarded as is.  LOG gets one line per request line
seen (with its Range header if any) and "cut after N bytes" when the cut
happens, so a test can tell that the client came back for the rest.
Runs until killed.
"""
import socket
import sys
import threading

lock = threading.Lock()
state = {"cut": False}


def log(path, line):
    with lock, open(path, "a") as f:
        f.write(line + "\n")


def requests_in(data):
    """(request line, Range header or "") for each request head in data
    (a head is assumed to arrive whole in one read: true of these clients
    on loopback)."""
    out = []
    for head in data.split(b"\r\n\r\n"):
        lines = head.split(b"\r\n")
        if not lines or b" HTTP/1." not in lines[0]:
            continue
        rng = [ln.decode("latin-1") for ln in lines[1:] if ln.lower().startswith(b"range:")]
        out.append((lines[0].decode("latin-1"), rng[0] if rng else ""))
    return out


def pump_up(cli, up, conn, match, logpath):
    try:
        while True:
            data = cli.recv(65536)
            if not data:
                break
            for line, rng in requests_in(data):
                log(logpath, line + ("  " + rng if rng else ""))
                with lock:
                    if (not state["cut"] and conn["armed"] is False
                            and line.startswith("GET ") and match in line):
                        state["cut"] = True
                        conn["armed"] = True
            up.sendall(data)
    except OSError:
        pass
    try:
        up.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def pump_down(cli, up, conn, cut_after, logpath):
    sent = 0
    try:
        while True:
            data = up.recv(65536)
            if not data:
                break
            if conn["armed"]:
                room = cut_after - sent
                if len(data) >= room:
                    cli.sendall(data[:room])
                    log(logpath, "cut after %d bytes" % cut_after)
                    break
                sent += len(data)
            cli.sendall(data)
    except OSError:
        pass
    for s in (cli, up):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


def serve(upstream, match, cut_after, logpath):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    print("port %d" % ls.getsockname()[1], flush=True)
    while True:
        cli, _ = ls.accept()
        try:
            up = socket.create_connection(("127.0.0.1", upstream))
        except OSError:
            cli.close()
            continue
        conn = {"armed": False}
        threading.Thread(target=pump_up, args=(cli, up, conn, match, logpath),
                         daemon=True).start()
        threading.Thread(target=pump_down, args=(cli, up, conn, cut_after, logpath),
                         daemon=True).start()


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4])
