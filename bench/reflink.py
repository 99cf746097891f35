#!/usr/bin/env python3
"""Whole-process rows on a copy-on-write filesystem, for `make bench`: a
loop-mounted XFS image with reflink (mkfs.xfs -m reflink=1), made here
and torn down after, holding the source, the store and every destination.
Each wstore command next to its baseline in the same run, as in
bench/whole.py (medians of BENCH_RUNS alternating pairs; ratio = baseline
time / wstore time):

  (a) `wstore mount` + `cat` every file + `umount` of a default import,
      against `cat` of the source files (cached);
  (b) `model pull` onto the store's own filesystem, against `cp -r
      --reflink=never` + `sync` (a copy of the data), verified and
      --no-verify, and the extra space the pull took (df before and
      after, the destination's shared extents counted with xfs_io);
      also against plain `cp -r` + `sync`, which GNU coreutils 9 makes a
      reflink copy itself;
  (c) `model import` from a source on that filesystem against `cp -r
      --reflink=never` + `sync` (needs `model import --reflink`; a build
      without it says so and skips the row).

Needs root (mount), xfsprogs (mkfs.xfs, xfs_io) and the loop driver;
prints a skip line otherwise.

  BENCH_SIZE   checkpoint bytes (default 2 GiB, 4 shards)
  BENCH_RUNS   pairs per row (default 5)
  BENCH_CHUNK_SIZE  --chunk-size of the store's import (default: the
               store's own); e.g. 4GiB keeps every file of a store that
               keeps chunk files in one chunk, the whole-file case
usage: reflink.py BUILD_DIR
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from whole import adder, can_mount, load, sh  # noqa: E402


def why_not():
    if os.geteuid() != 0:
        return "needs root to loop-mount an XFS image"
    for tool in ("mkfs.xfs", "xfs_io", "losetup"):
        if not shutil.which(tool):
            return f"{tool} is not installed (xfsprogs, util-linux)"
    return None


def used_kib(path):
    """Blocks in use on the filesystem of path, in KiB, after a sync."""
    subprocess.run(["sync"], check=True)
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize // 1024


def shared_kib(path):
    """KiB of the files under path in extents shared with another file
    (xfs_io fiemap flag 0x2000)."""
    total = 0
    for f in glob.glob(path + "/**", recursive=True):
        if not os.path.isfile(f):
            continue
        out = subprocess.run(["xfs_io", "-r", "-c", "fiemap -v", f],
                             capture_output=True, text=True).stdout
        for line in out.splitlines()[2:]:
            p = line.split()
            if len(p) >= 5 and p[2] != "hole" and int(p[4], 16) & 0x2000:
                total += int(p[3]) // 2  # 512-byte blocks
    return total


def has_reflink_import(w):
    p = subprocess.run([w, "model", "import", "--help"],
                       capture_output=True, text=True)
    return "--reflink" in p.stdout + p.stderr


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    w = os.path.join(build, "wstore")
    size = int(os.environ.get("BENCH_SIZE", 2 << 30))
    runs = int(os.environ.get("BENCH_RUNS", 5))
    why = why_not()
    if why:
        print(f"\nreflink (XFS) rows: skipped ({why})")
        return
    tmp = tempfile.mkdtemp(prefix="wstore-bench-reflink-")
    img, fs = f"{tmp}/xfs.img", f"{tmp}/xfs"
    src, store = f"{fs}/src", f"{fs}/store"
    mnt, dest, st2 = f"{tmp}/mnt", f"{fs}/dest", f"{fs}/store2"
    rows, notes, cmds = [], [], []
    mounted = False
    try:
        os.makedirs(fs)
        os.makedirs(mnt)
        with open(img, "wb") as f:  # sparse: room for 5 copies
            f.truncate(5 * size + (2 << 30))
        subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", img],
                       check=True, stdout=subprocess.DEVNULL)
        p = subprocess.run(["mount", "-o", "loop", img, fs],
                           capture_output=True, text=True)
        if p.returncode != 0:
            print(f"\nreflink (XFS) rows: skipped (cannot loop-mount an "
                  f"XFS image: {p.stderr.strip()})")
            return
        mounted = True
        subprocess.run([sys.executable, f"{ROOT}/tests/tools/mkckpt.py",
                        src, "--size", str(size), "--shards", "4"],
                       check=True, stdout=subprocess.DEVNULL)
        total = sum(os.path.getsize(f) for f in glob.glob(src + "/*"))
        cs = os.environ.get("BENCH_CHUNK_SIZE")
        cs_arg = f" --chunk-size {cs}" if cs else ""
        sh(f"'{w}' --quiet --store '{store}' model import --checkpoint-id b"
           f" --model-id bench/M --source '{src}'{cs_arg} && sync")
        cat = (None, f"cat '{src}'/* > /dev/null")
        sh(cat[1])
        cp = (f"rm -rf '{dest}'; sync",
              f"cp -r --reflink=never '{src}' '{dest}' && sync")
        load0 = load()

        add = adder(runs, rows, cmds)

        # (a)
        why = can_mount()
        if why:
            rows.append((f"(a) mount + cat + umount: skipped ({why})",
                         None, "", None, None, None))
        else:
            add("(a) `wstore mount` + `cat` every file + `umount`, "
                + (f"imported with --chunk-size {cs}" if cs
                   else "default import"),
                (None, f"'{w}' --store '{store}' mount '{mnt}' --checkpoint b"
                 f" && cat '{mnt}'/* > /dev/null && '{w}' umount '{mnt}'"),
                "`cat` of the source files, cached", cat, 0.9)
        # (b)
        pull = (f"rm -rf '{dest}'; sync",
                f"'{w}' --quiet --store '{store}' model pull b"
                f" --dest '{dest}'")
        add("(b) `model pull` onto the store's filesystem (verified: every "
            "byte hashed)", pull, "`cp -r --reflink=never` + `sync`", cp,
            20)
        nv = (pull[0], pull[1] + " --no-verify")
        add("(b) `model pull --no-verify` onto the store's filesystem", nv,
            "`cp -r --reflink=never` + `sync`", cp, 20)
        add("(b) the same `model pull --no-verify`", nv,
            "`cp -r` + `sync` (coreutils 9: a reflink copy too)",
            (f"rm -rf '{dest}'; sync", f"cp -r '{src}' '{dest}' && sync"),
            None)
        sh(pull[0])
        u0 = used_kib(fs)
        sh(pull[1])
        u1 = used_kib(fs)
        shared = shared_kib(dest)
        notes.append(
            f"space: a verified pull of {total / 2**20:.0f} MiB onto the "
            f"store's filesystem took {u1 - u0} KiB more (df, after sync); "
            f"{shared / 1024:.0f} MiB of the pulled files are extents "
            f"shared with the store (xfs_io fiemap) "
            f"{'(no extra space: ok)' if u1 - u0 < total / 1024 / 100 else '(MISSED: extra space used)'}")
        # (c)
        if not has_reflink_import(w):
            rows.append(("(c) `model import --reflink` from a source on "
                         "the same filesystem: skipped (this build's "
                         "`model import` has no --reflink)",
                         None, "", None, None, None))
        else:
            add("(c) `model import` (--reflink auto) from a source on the "
                "same filesystem",
                (f"rm -rf '{st2}'; sync",
                 f"'{w}' --quiet --store '{st2}' model import"
                 f" --checkpoint-id b --model-id bench/M --source '{src}'"
                 f" --reflink auto && sync"),
                "`cp -r --reflink=never` + `sync`", cp, 1.8)
            sh(f"rm -rf '{st2}'")
        load1 = load()
    finally:
        subprocess.run(["sh", "-c", f"'{w}' umount '{mnt}'"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if mounted:
            subprocess.run(["umount", fs], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nwhole processes on a loop-mounted XFS (reflink=1) image: "
          f"{total / 1e9:.2f} GB in 4 shards"
          f"{', imported with --chunk-size ' + cs if cs else ''}, medians of {runs} alternating "
          f"pairs, load average {load0} before, {load1} after (ratio = "
          f"baseline time / wstore time)\n")
    print("| path | wstore | baseline, same run | ratio | goal |")
    print("|---|---|---|---|---|")
    for what, tw, base, tb, ratio, goal in rows:
        if tw is None:
            print(f"| {what} | | | | |")
            continue
        g = ""
        if goal:
            g = f">= {goal} {'ok' if ratio >= goal else 'MISSED'}"
        print(f"| {what} | {tw:.3f} s | {base}: {tb:.3f} s | {ratio:.2f} "
              f"| {g} |")
    for n in notes:
        print("\n" + n)
    print("\ncommands (\"before\" runs untimed ahead of each run; "
          "$T is the bench's temp dir, $T/xfs the XFS mount):")
    for what, (wb, wc), (bb, bc), lw, lb in cmds:
        def show(c):
            return c.replace(tmp, "$T") if c else c
        print(f"  {what}")
        for name, b, c, ts in (("wstore", wb, wc, lw),
                               ("baseline", bb, bc, lb)):
            print(f"    {name:8} {show(c)}")
            if b:
                print(f"    {'before':8} {show(b)}")
            print(f"    {'':8} runs: {' '.join(f'{t:.3f}' for t in ts)} s")


if __name__ == "__main__":
    main()
