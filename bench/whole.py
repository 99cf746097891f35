#!/usr/bin/env python3
"""Whole-process data-plane rows for `make bench`: each wstore command next
to its baseline, both timed start to exit as shell commands, run back to
back in alternating order (BENCH_RUNS pairs, default 5), medians reported
with the ratio (baseline time / wstore time: >= 1 means wstore is at least
as fast).  The machines this runs on are shared, so the load average is
printed with the figures; compare ratios, not seconds.

Every timed command is printed as run, so any row can be re-run by hand
with `/usr/bin/time sh -c '...'` or `perf stat -r 5 sh -c '...'` (the
"before" step of a row runs untimed ahead of each run of its command).

  BENCH_SIZE   checkpoint bytes (default 2 GiB, 4 shards)
  BENCH_RUNS   pairs per row (default 5)
  BENCH_FUSE_SYSCTL=1  (root) also time the mount with fs.pipe-max-size
               and fs.fuse.max_pages_limit raised to 16 MiB, the tuning
               docs/cli/wstore-mount.md describes; both are restored after
usage: whole.py BUILD_DIR
"""
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sh(cmd):
    """Run cmd under sh; seconds from start to exit."""
    t = time.monotonic()
    p = subprocess.run(["sh", "-c", cmd], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    el = time.monotonic() - t
    if p.returncode != 0:
        sys.exit(f"bench: {cmd!r} failed: {p.stderr.decode()[-500:]}")
    return el


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def adder(runs, rows, cmds):
    """add(what, wcmd, base_name, base, goal): time wcmd against base
    (paired), append the row to rows and the commands with their runs to
    cmds."""
    def add(what, wcmd, base_name, base, goal):
        tw, tb, lw, lb = paired(runs, wcmd, base)
        rows.append((what, tw, base_name, tb, tb / tw, goal))
        cmds.append((what, wcmd, base, lw, lb))
    return add


def paired(runs, a, b):
    """Medians of runs of (before, cmd) a and b, alternating which goes
    first so that neither always follows the other's writeback."""
    ta, tb = [], []
    for i in range(runs):
        order = [(a, ta), (b, tb)] if i % 2 == 0 else [(b, tb), (a, ta)]
        for (before, cmd), out in order:
            if before:
                sh(before)
            out.append(sh(cmd))
    return statistics.median(ta), statistics.median(tb), ta, tb


SYSCTLS = {"/proc/sys/fs/pipe-max-size": "16777216",
           "/proc/sys/fs/fuse/max_pages_limit": "4096"}


def sysctl_values():
    """The two settings that bound the mount's read size, as now."""
    out = {}
    for path in SYSCTLS:
        try:
            with open(path) as f:
                out[path] = f.read().strip()
        except OSError:
            out[path] = None
    return out


def sysctl_set(values):
    for path, v in values.items():
        if v is not None:
            with open(path, "w") as f:
                f.write(v + "\n")


def can_mount():
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if os.geteuid() != 0 and not shutil.which("fusermount3"):
        return "needs root or fusermount3"
    return None


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    w = os.path.join(build, "wstore")
    rb = os.path.join(build, "wstore-readbench")
    size = int(os.environ.get("BENCH_SIZE", 2 << 30))
    runs = int(os.environ.get("BENCH_RUNS", 5))
    tmp = tempfile.mkdtemp(prefix="wstore-bench-whole-")
    src, store = f"{tmp}/src", f"{tmp}/store"
    mnt, dest = f"{tmp}/mnt", f"{tmp}/dest"
    rows, cmds = [], []
    try:
        subprocess.run([sys.executable, f"{ROOT}/tests/tools/mkckpt.py",
                        src, "--size", str(size), "--shards", "4"],
                       check=True, stdout=subprocess.DEVNULL)
        total = sum(os.path.getsize(f) for f in glob.glob(src + "/*"))
        sh(f"'{w}' --quiet --store '{store}' model import --checkpoint-id b"
           f" --model-id bench/M --source '{src}' && sync")
        os.makedirs(mnt)
        cat = (None, f"cat '{src}'/* > /dev/null")
        sh(cat[1])
        cp = (f"rm -rf '{dest}'; sync", f"cp -r '{src}' '{dest}' && sync")
        load0 = load()

        add = adder(runs, rows, cmds)

        why = can_mount()
        if why:
            rows.append((f"mount + cat + umount: skipped ({why})",
                         None, "", None, None, None))
        else:
            add("`wstore mount` + `cat` every file + `umount`",
                (None, f"'{w}' --store '{store}' mount '{mnt}' --checkpoint b"
                 f" && cat '{mnt}'/* > /dev/null && '{w}' umount '{mnt}'"),
                "`cat` of the source files, cached", cat, 0.9)
            add("the same with `mount --page-cache`",
                (None, f"'{w}' --store '{store}' mount '{mnt}' --checkpoint b"
                 f" --page-cache && cat '{mnt}'/* > /dev/null &&"
                 f" '{w}' umount '{mnt}'"),
                "the same `cat`", cat, None)
            # files of one chunk are passed through to their chunk file
            # (FUSE passthrough, Linux 6.9+, root) on any layout: import
            # with chunks larger than every file
            big = f"{tmp}/store-big"
            sh(f"'{w}' --quiet --store '{big}' model import --checkpoint-id b"
               f" --model-id bench/M --source '{src}' --chunk-size 4GiB"
               f" && sync")
            add("the same, imported with `--chunk-size 4GiB` (one chunk "
                "per file: passthrough)",
                (None, f"'{w}' --store '{big}' mount '{mnt}' --checkpoint b"
                 f" && cat '{mnt}'/* > /dev/null && '{w}' umount '{mnt}'"),
                "the same `cat`", cat, None)
            shutil.rmtree(big, ignore_errors=True)
            saved = sysctl_values()
            if (os.environ.get("BENCH_FUSE_SYSCTL") == "1"
                    and os.geteuid() == 0 and None not in saved.values()):
                try:
                    sysctl_set(SYSCTLS)
                    add("the default mount, fs.pipe-max-size=16777216 "
                        "fs.fuse.max_pages_limit=4096",
                        (None, f"'{w}' --store '{store}' mount '{mnt}'"
                         f" --checkpoint b && cat '{mnt}'/* > /dev/null &&"
                         f" '{w}' umount '{mnt}'"),
                        "the same `cat`", cat, None)
                finally:
                    sysctl_set(saved)
        add("`wstore-readbench` (8 MiB preads, whole checkpoint)",
            (None, f"'{rb}' '{store}' b"), "the same `cat`", cat, 1.0)
        # cat reads 128 KiB at a time, which stays in the CPU's cache; an
        # engine reads into large buffers, so the same read size is the
        # fair floor of the copy (a second baseline, not a goal)
        add("the same `wstore-readbench`",
            (None, f"'{rb}' '{store}' b"),
            "`dd bs=8M` of the source files, cached",
            (None, f"for f in '{src}'/*; do dd if=\"$f\" of=/dev/null"
             f" bs=8M status=none || exit 1; done"), None)
        st2 = f"{tmp}/store2"
        add("`model import`",
            (f"rm -rf '{st2}'; sync",
             f"'{w}' --quiet --store '{st2}' model import --checkpoint-id b"
             f" --model-id bench/M --source '{src}'"),
            "`cp -r` + `sync`", cp, 0.9)
        shutil.rmtree(st2, ignore_errors=True)
        add("`model pull` (verified: every byte hashed)",
            (f"rm -rf '{dest}'; sync",
             f"'{w}' --quiet --store '{store}' model pull b --dest '{dest}'"),
            "`cp -r` + `sync` (no hashing)", cp, 1.0)
        load1 = load()
    finally:
        subprocess.run(["sh", "-c", f"'{w}' umount '{mnt}'"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nwhole processes, start to exit: {total / 1e9:.2f} GB in 4 "
          f"shards, medians of {runs} alternating pairs, load average "
          f"{load0} before, {load1} after (ratio = baseline time / wstore "
          f"time)")
    print("read size bounds: " + ", ".join(
        f"{p.split('/sys/')[1].replace('/', '.')}={v}"
        for p, v in sysctl_values().items()) + "\n")
    print("| path | wstore | baseline, same run | ratio | goal |")
    print("|---|---|---|---|---|")
    for what, tw, base, tb, ratio, goal in rows:
        if tw is None:
            print(f"| {what} | | | | |")
            continue
        g = ""
        if goal:
            g = f">= {goal} {'ok' if ratio >= goal else 'MISSED'}"
        print(f"| {what} | {tw:.2f} s ({total / tw / 1e9:.2f} GB/s) | "
              f"{base}: {tb:.2f} s | {ratio:.2f} | {g} |")
    print("\ncommands (\"before\" runs untimed ahead of each run; "
          "$T is the bench's temp dir):")
    for what, (wb, wc), (bb, bc), lw, lb in cmds:
        def show(c):
            return c.replace(tmp, "$T") if c else c
        print(f"  {what}")
        for name, b, c, ts in (("wstore", wb, wc, lw),
                               ("baseline", bb, bc, lb)):
            runs_s = " ".join(f"{t:.2f}" for t in ts)
            print(f"    {name:8} {show(c)}")
            if b:
                print(f"    {'before':8} {show(b)}")
            print(f"    {'':8} runs: {runs_s} s")


if __name__ == "__main__":
    main()
