#!/usr/bin/python3
"""proxy.py - a TCP forwarder that adds one-way latency and loses
connections, standing in for netem (which this kernel lacks) between the
fleet's nodes and a server.

    proxy.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS DROP [MODE]

LISTEN_PORT may be a comma-separated list of ports, and TARGET_PORT "="
stands for the port each connection came in on.  With PROXY_TARGET_NETNS
set to a network namespace's file (/run/netns/NAME), the connections to
the target are made from that namespace: the proxy can then listen on an
address that is the target's own address elsewhere (the fleet bed's
detour, tests/fleet/bed.sh).  PROXY_SPARE_PORTS, a comma-separated list
of listening ports: their connections are delayed but never dropped or
cut.

Every chunk of data read from either side is delivered to the other side
DELAY_MS after it arrived (a queue per direction: the delay adds latency,
it does not cap throughput).  MODE "conn" (the default): a fraction DROP (e.g.
0.01) of the accepted connections is aborted at once, before any byte is
forwarded (the client sees a reset).  MODE "chunk": the data forwarded
aborts its connection, both sides, with probability DROP per MiB (each
read, up to 1 MiB, draws with its share of a MiB): connections are lost
mid-transfer.  Prints "listening" on stdout when ready, and the counts
of connections and drops on SIGTERM.
"""
import asyncio
import ctypes
import os
import random
import signal
import socket
import sys
import time

CHUNK = 1 << 20
stats = {"conns": 0, "dropped": 0, "cut": 0}
mode = {"chunk": 0.0}


CLONE_NEWNET = 0x40000000
netns = {}


def target_socket():
    """A TCP socket made in the target's namespace (PROXY_TARGET_NETNS),
    or in ours."""
    path = os.environ.get("PROXY_TARGET_NETNS")
    if not path:
        return socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if not netns:
        netns["libc"] = ctypes.CDLL(None, use_errno=True)
        netns["own"] = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        netns["target"] = os.open(path, os.O_RDONLY)
    libc = netns["libc"]
    if libc.setns(netns["target"], CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), f"setns {path}")
    try:
        return socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    finally:
        if libc.setns(netns["own"], CLONE_NEWNET) != 0:
            os._exit(3)  # stuck in the other namespace: stop at once


class Cut(Exception):
    """A chunk drew the loss: abort the connection."""


async def reader(src, queue, delay, spare):
    try:
        while True:
            data = await src.read(CHUNK)
            # the odds per MiB forwarded, whatever the size of the read
            if data and not spare and \
                    random.random() < mode["chunk"] * len(data) / CHUNK:
                stats["cut"] += 1
                raise Cut()
            await queue.put((time.monotonic() + delay, data))
            if not data:
                return
    except (ConnectionError, OSError):
        await queue.put((0.0, b""))


async def writer(dst, queue):
    try:
        while True:
            due, data = await queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                if dst.can_write_eof():
                    dst.write_eof()
                return
            dst.write(data)
            await dst.drain()
    except (ConnectionError, OSError):
        pass


async def pipe(src, dst, delay, spare):
    queue = asyncio.Queue(maxsize=64)
    await asyncio.gather(reader(src, queue, delay, spare), writer(dst, queue))


async def handle(cr, cw, target, delay, drop, spare):
    stats["conns"] += 1
    if not spare and random.random() < drop:
        stats["dropped"] += 1
        cw.transport.abort()
        return
    try:
        sock = target_socket()
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, target)
        except OSError:
            sock.close()
            raise
        sr, sw = await asyncio.open_connection(sock=sock)
    except OSError:
        cw.transport.abort()
        return
    try:
        await asyncio.gather(pipe(cr, sw, delay, spare),
                             pipe(sr, cw, delay, spare))
    except Cut:
        for w in (cw, sw):
            w.transport.abort()
        return
    for w in (cw, sw):
        w.close()


async def main():
    lh, lp, th, tp, delay_ms, drop = sys.argv[1:7]
    if len(sys.argv) > 7 and sys.argv[7] == "chunk":
        mode["chunk"], drop = float(drop), "0"
    delay = float(delay_ms) / 1000.0
    spared = {int(x) for x in
              os.environ.get("PROXY_SPARE_PORTS", "").split(",") if x}
    servers = []
    for port in (int(x) for x in lp.split(",")):
        target = (th, port if tp == "=" else int(tp))
        servers.append(await asyncio.start_server(
            lambda r, w, t=target, s=port in spared:
            handle(r, w, t, delay, float(drop), s), lh, port))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    print("listening", flush=True)
    await stop.wait()
    for server in servers:
        server.close()
    print(f"connections {stats['conns']} dropped {stats['dropped']} "
          f"cut mid-transfer {stats['cut']}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
