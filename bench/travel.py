#!/usr/bin/env python3
"""Checkpoints between stores, for `make bench`: each wstore command next
to its baseline in the same run, as in bench/whole.py (medians of
BENCH_RUNS alternating pairs; ratio = baseline time / wstore time):

  (a) `model export | model import --bundle -` between two file stores,
      against `tar -c | tar -x` + `sync` of the checkpoint folder (goal
      >= 0.9).  Both sides hash every byte (the export checks the store's
      copy, the import the bundle's), so the SHA-256 floor is printed
      beside it: `sha256sum` of the folder, one pass on one core.
  (b) `model copy` from a file store to Redis, against what it replaces:
      `model pull` of the checkpoint into a folder, then `model import`
      of the folder into Redis (goal >= 1.5).  Needs redis-server; a
      server on a free loopback port is started here and stopped after,
      set up as docs/redis.md tells operators to (jemalloc keeps freed
      memory: MALLOC_CONF) and filled once before the timed runs, so
      neither side pays the server's first touch of its memory.

  BENCH_SIZE   checkpoint bytes (default 1 GiB, 4 shards)
  BENCH_RUNS   pairs per row (default 3)
usage: travel.py BUILD_DIR
"""
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from whole import adder, load, sh  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(tmp):
    """A throwaway redis-server on loopback: (process, URL) or None."""
    if not shutil.which("redis-server"):
        return None
    port = free_port()
    env = dict(os.environ,
               MALLOC_CONF="dirty_decay_ms:-1,muzzy_decay_ms:-1")
    p = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port),
         "--save", "", "--appendonly", "no", "--dir", tmp,
         "--maxmemory-policy", "noeviction"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                return p, f"redis://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    p.kill()
    p.wait()
    return None


def rows_bundle(add, w, tmp, src, store):
    b = f"{tmp}/b"
    add("`model export | model import --bundle -`, file store to file "
        "store",
        (f"rm -rf '{b}'; sync",
         f"'{w}' --quiet --store '{store}' model export b | '{w}' --quiet"
         f" --store '{b}' model import --bundle - && sync"),
        "`tar -c | tar -x` + `sync`",
        (f"rm -rf '{b}'; sync",
         f"mkdir '{b}' && tar -C '{src}' -c . | tar -C '{b}' -x && sync"),
        0.9)
    add("the SHA-256 floor: `sha256sum` of the files, cached",
        (None, f"sha256sum '{src}'/* > /dev/null"),
        "the same `tar -c | tar -x` + `sync`",
        (f"rm -rf '{b}'; sync",
         f"mkdir '{b}' && tar -C '{src}' -c . | tar -C '{b}' -x && sync"),
        None)
    shutil.rmtree(b, ignore_errors=True)


def rows_copy(add, rows, w, tmp, store):
    red = start_redis(tmp)
    if not red:
        rows.append(("copy file -> Redis: skipped (redis-server is not "
                     "installed or did not start)", None, "", None, None,
                     None))
        return
    proc, url = red
    dest = f"{tmp}/pulled"
    clear = (f"'{w}' --quiet --store '{url}' model delete --missing-ok b;"
             f" rm -rf '{dest}'")
    try:
        # the warm-up fill (see the module comment)
        sh(f"'{w}' --quiet --store '{store}' model copy b --to '{url}'"
           f" && {clear}")
        add("`model copy` file store -> Redis",
            (clear, f"'{w}' --quiet --store '{store}' model copy b"
             f" --to '{url}'"),
            "`model pull` + `model import` of the folder into Redis",
            (clear, f"'{w}' --quiet --store '{store}' model pull b --dest"
             f" '{dest}' && '{w}' --quiet --store '{url}' model import"
             f" --checkpoint-id b --model-id bench/M --source '{dest}'"),
            1.5)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(dest, ignore_errors=True)


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    w = os.path.join(build, "wstore")
    size = int(os.environ.get("BENCH_SIZE", 1 << 30))
    runs = int(os.environ.get("BENCH_RUNS", 3))
    tmp = tempfile.mkdtemp(prefix="wstore-bench-travel-")
    src, store = f"{tmp}/src", f"{tmp}/store"
    rows, cmds = [], []
    try:
        subprocess.run([sys.executable, f"{ROOT}/tests/tools/mkckpt.py",
                        src, "--size", str(size), "--shards", "4"],
                       check=True, stdout=subprocess.DEVNULL)
        total = sum(os.path.getsize(f) for f in glob.glob(src + "/*"))
        sh(f"'{w}' --quiet --store '{store}' model import --checkpoint-id b"
           f" --model-id bench/M --source '{src}' && sync")
        sh(f"cat '{src}'/* > /dev/null")
        load0 = load()
        add = adder(runs, rows, cmds)
        rows_bundle(add, w, tmp, src, store)
        rows_copy(add, rows, w, tmp, store)
        load1 = load()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\ncheckpoints between stores, whole processes: "
          f"{total / 1e9:.2f} GB in 4 shards, medians of {runs} "
          f"alternating pairs, load average {load0} before, {load1} after "
          f"(ratio = baseline time / wstore time)\n")
    print("| path | wstore | baseline, same run | ratio | goal |")
    print("|---|---|---|---|---|")
    for what, tw, base, tb, ratio, goal in rows:
        if tw is None:
            print(f"| {what} | | | | |")
            continue
        g = f">= {goal} {'ok' if ratio >= goal else 'MISSED'}" if goal \
            else ""
        print(f"| {what} | {tw:.2f} s ({total / tw / 1e9:.2f} GB/s) | "
              f"{base}: {tb:.2f} s | {ratio:.2f} | {g} |")
    print("\ncommands (\"before\" runs untimed ahead of each run; "
          "$T is the bench's temp dir):")
    for what, (wb, wc), (bb, bc), lw, lb in cmds:
        print(f"  {what}")
        for name, b, c, ts in (("wstore", wb, wc, lw),
                               ("baseline", bb, bc, lb)):
            print(f"    {name:8} {c.replace(tmp, '$T')}")
            if b:
                print(f"    {'before':8} {b.replace(tmp, '$T')}")
            print(f"    {'':8} runs: {' '.join(f'{t:.2f}' for t in ts)} s")


if __name__ == "__main__":
    main()
