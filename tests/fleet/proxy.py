#!/usr/bin/python3
"""proxy.py - a TCP forwarder that adds one-way latency and loses
connections, standing in for netem (which this kernel lacks) between the
fleet's nodes and a server.

    proxy.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS DROP [MODE]

Every chunk of data read from either side is delivered to the other side
DELAY_MS after it arrived (a queue per direction: the delay adds latency,
it does not cap throughput).  MODE "conn" (the default): a fraction DROP (e.g.
0.01) of the accepted connections is aborted at once, before any byte is
forwarded (the client sees a reset).  MODE "chunk": each chunk of data
(up to 1 MiB) forwarded aborts its connection, both sides, with
probability DROP: connections are lost mid-transfer.  Prints "listening" on stdout when ready, and
the counts of connections and drops on SIGTERM.
"""
import asyncio
import random
import signal
import sys
import time

CHUNK = 1 << 20
stats = {"conns": 0, "dropped": 0, "cut": 0}
mode = {"chunk": 0.0}


class Cut(Exception):
    """A chunk drew the loss: abort the connection."""


async def reader(src, queue, delay):
    try:
        while True:
            data = await src.read(CHUNK)
            if data and random.random() < mode["chunk"]:
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


async def pipe(src, dst, delay):
    queue = asyncio.Queue(maxsize=64)
    await asyncio.gather(reader(src, queue, delay), writer(dst, queue))


async def handle(cr, cw, target, delay, drop):
    stats["conns"] += 1
    if random.random() < drop:
        stats["dropped"] += 1
        cw.transport.abort()
        return
    try:
        sr, sw = await asyncio.open_connection(*target)
    except OSError:
        cw.transport.abort()
        return
    try:
        await asyncio.gather(pipe(cr, sw, delay), pipe(sr, cw, delay))
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
    target = (th, int(tp))
    delay = float(delay_ms) / 1000.0
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, target, delay, float(drop)), lh, int(lp))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    print("listening", flush=True)
    async with server:
        await stop.wait()
    print(f"connections {stats['conns']} dropped {stats['dropped']} "
          f"cut mid-transfer {stats['cut']}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
