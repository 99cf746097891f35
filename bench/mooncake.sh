#!/bin/sh
# bench/mooncake.sh BUILD - the Mooncake backend next to Mooncake's raw C
# API, measured in the same run on the same real cluster (called by
# bench/run.sh, i.e. `make bench`; skipped, saying so, when Mooncake is not
# installed in $MOONCAKE_HOME, default /opt/mooncake).
#
# Starts a master and one storage node with tests/lib/mooncake.sh,
# generates a checkpoint with tests/tools/mkckpt.py, builds
# bench/mooncake_raw.c, then measures, as whole processes (setup and exit
# included):
#   raw put_from / get_into  bench/mooncake_raw: the same total bytes as
#                    64 MiB values from registered buffers, one client
#   floor            bench/mooncake_floor: the import's floor with the raw
#                    C API, one whole process: every chunk read from the
#                    page cache, hashed (SHA-256) and put_from a registered
#                    buffer, by as many threads as the import runs (its
#                    readers alone, and readers + putters: the faster of
#                    the two is the floor)
#   import           wstore model import (default chunk size 64 MiB),
#                    interleaved with the floor runs: its ratio is the
#                    median of the per-round ratios floor time / import
#                    time (goal >= 0.9)
#   pull --no-verify wstore model pull --no-verify
#   pull, verified   wstore model pull (SHA-256 checked)
#   pull floor       bench/mooncake_floor get: the chunks (stored once by
#                    the raw C API) get_into a registered buffer, pwritten
#                    to files under the pulls' destination and fsynced,
#                    hashed too for the verified pull; interleaved with
#                    the pulls, whose ratio to it is the median of the
#                    per-round ratios
#   list, inspect    wstore model list / inspect (seconds per command)
# and prints them as bench/redis.sh does: GB/s, the ratio to the raw
# figure (import vs its floor, pulls vs raw get_into and vs their floor;
# goal >= 0.9 for import, 0.8 for pull --no-verify against get_into),
# peak RSS.  Each pull's GB/s is the best of BENCH_MOONCAKE_RUNS runs, the
# import and floor figures and every ratio to a floor their medians.  The cluster is stopped on exit.
#
#   BENCH_MOONCAKE_SIZE  checkpoint bytes (default 1 GiB, 4 shards)
#   BENCH_MOONCAKE_RUNS  runs per figure (default 3)
#   BENCH_MOONCAKE_NICE  1: as root, run the cluster and every measured
#                        process at autogroup nice -20 (on a machine shared
#                        with other work, figures otherwise vary by 30%:
#                        each session gets an equal share of the CPU, so
#                        plain nice does not help)
#   BENCH_MOONCAKE_DEST  directory pulls write under (default /dev/shm when
#                        it has room, else $TMPDIR)
set -u
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=$(cd "$BUILD" && pwd) || exit 1
. "$ROOT/tests/lib/mooncake.sh"
. "$HERE/lib.sh"

if ! mooncake_installed; then
	echo "bench/mooncake.sh: Mooncake is not installed in $MOONCAKE_HOME; skipped" >&2
	exit 0
fi
SIZE=${BENCH_MOONCAKE_SIZE:-1073741824}
T=$(mktemp -d "${TMPDIR:-/tmp}/wstore-bench-mooncake-XXXXXX")
bench_pull_dest "$SIZE" "${BENCH_MOONCAKE_DEST:-}"
cleanup() {
	mooncake_stop_all >/dev/null 2>&1
	rm -rf "$T"
	bench_pull_dest_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cc -O2 -o "$T/mooncake_raw" "$HERE/mooncake_raw.c" "$HERE/mc_client.c" -ldl || {
	echo "bench/mooncake.sh: cannot build bench/mooncake_raw.c" >&2
	exit 1
}
cc -O2 -pthread -o "$T/mooncake_floor" "$HERE/mooncake_floor.c" "$HERE/mc_client.c" -ldl \
	-lcrypto || {
	echo "bench/mooncake.sh: cannot build bench/mooncake_floor.c" >&2
	exit 1
}
python3 "$ROOT/tests/tools/mkckpt.py" "$T/src" --size "$SIZE" --shards 4 || exit 1
# room for the raw values and two checkpoints (warm_up below knows this)
MOONCAKE_TEST_SEGMENT="$((SIZE * 3 / 1073741824 + 1)) GB"
mooncake_start "$T/cluster" || exit 1

BENCH_BUILD=$BUILD BENCH_TMP=$T BENCH_DEST=$DEST BENCH_MC_DIR=$_MC_DIR \
python3 - "$HERE" <<'EOF'
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, sys.argv[1])
from bench import run, best  # noqa: E402  (bench.py: timing, peak RSS)

E = os.environ
w = os.path.join(E["BENCH_BUILD"], "wstore")
tmp, dest = E["BENCH_TMP"], E["BENCH_DEST"]
src = os.path.join(tmp, "src")
raw = os.path.join(tmp, "mooncake_raw")
nruns = int(E.get("BENCH_MOONCAKE_RUNS", "3"))
files = sorted(glob.glob(src + "/*"))
total = sum(os.path.getsize(f) for f in files)
mib = 64
count = max(1, round(total / (mib << 20)))
env = dict(os.environ, WSTORE_CONFIG="", HOME=tmp)
if E.get("BENCH_MOONCAKE_NICE") == "1":
    # autogroup nice: each session (the cluster's processes were started
    # with setsid) gets an equal share of the CPU whatever its nice
    for pid in ["self"] + open(os.path.join(E["BENCH_MC_DIR"],
                                            "pids")).read().split():
        try:
            with open(f"/proc/{pid}/autogroup", "w") as f:
                f.write("-20")
        except OSError as e:
            print(f"BENCH_MOONCAKE_NICE: {pid}: {e}", file=sys.stderr)
subprocess.run(f"cat {src}/* > /dev/null", shell=True)
print(f"checkpoint: {total / 2**30:.2f} GiB in {len(files)} files, "
      f"{os.cpu_count()} cores; raw: {count} x {mib} MiB values; "
      f"pulls write under {dest}")


def warm_up():
    """Fill the storage node's segment once (and empty it): a fresh node
    pages its segment in on first write, at a fraction of the network's
    speed, and whichever run first lands on fresh pages would pay."""
    seg = (total * 3 // 2**30 + 1) * 10**9  # as MOONCAKE_TEST_SEGMENT
    p = subprocess.run([raw, E["WSTORE_MOONCAKE_LIBRARY"],
                        E["WSTORE_MASTER_SERVER_ADDR"],
                        E["WSTORE_METADATA_SERVER"], str(mib),
                        str(seg * 9 // 10 // (mib << 20)), "warm/", "warm"],
                       capture_output=True, text=True,
                       env=dict(env, MC_LOG_LEVEL="ERROR"))
    if p.returncode:
        sys.exit("bench/mooncake.sh: warm-up failed: "
                 + p.stderr.strip()[-300:])


def raw_rates():
    """Best raw put_from and get_into rates (GB/s), whole process."""
    puts, gets = [], []
    warm_up()
    # and one untimed run (i == 0)
    for i in range(nruns + 1):
        t0 = time.monotonic()
        p = subprocess.run([raw, E["WSTORE_MOONCAKE_LIBRARY"],
                            E["WSTORE_MASTER_SERVER_ADDR"],
                            E["WSTORE_METADATA_SERVER"], str(mib),
                            str(count)], capture_output=True, text=True,
                           env=dict(env, MC_LOG_LEVEL="ERROR"))
        m = re.search(r"put_from ([0-9.]+) GB/s\s+get_into ([0-9.]+) GB/s",
                      p.stdout)
        if p.returncode or not m:
            sys.exit("bench/mooncake.sh: mooncake_raw failed: "
                     + p.stderr.strip()[-300:])
        if i > 0:
            puts.append(float(m.group(1)))
            gets.append(float(m.group(2)))
    return max(puts), max(gets)


rows = []
raw_put, raw_get = raw_rates()
rows.append((f"raw put_from, {count} x {mib} MiB", raw_put, "", None,
             None, None))
rows.append((f"raw get_into, {count} x {mib} MiB", raw_get, "", None,
             None, None))
ws = [w, "--store", "mooncake", "--quiet"]


jobs = os.cpu_count() or 1


def floor(threads):
    """One whole floor process: read, hash and put_from every chunk."""
    def fl(mode):
        return [os.path.join(tmp, "mooncake_floor"),
                E["WSTORE_MOONCAKE_LIBRARY"], E["WSTORE_MASTER_SERVER_ADDR"],
                E["WSTORE_METADATA_SERVER"], "64", str(threads), "floor/",
                mode] + files
    subprocess.run(f"cat {src}/* > /dev/null", shell=True)
    fenv = dict(env, MC_LOG_LEVEL="ERROR")
    r = run(fl("put"), fenv)
    subprocess.run(fl("rm"), env=fenv, capture_output=True)
    return r


def imp():
    subprocess.run(ws + ["model", "delete", "--missing-ok", "b"], env=env,
                   capture_output=True)
    subprocess.run(f"cat {src}/* > /dev/null", shell=True)
    return run(ws + ["model", "import", "--checkpoint-id", "b",
                     "--model-id", "bench/M", "--source", src], env)


def alternate(floor_fn, op_fn):
    """nruns rounds of the floor (jobs and 2 x jobs threads) then the
    operation, so that load from elsewhere weighs on both alike: the
    floor's times per thread count, the operation's times and peak RSS,
    and each round's ratio best floor time / operation time."""
    fl = {jobs: [], 2 * jobs: []}
    ts, rss_l, ratios = [], [], []
    for _ in range(nruns):
        for n in fl:
            fl[n].append(floor_fn(n)[0])
        t, rss = op_fn()
        ts.append(t)
        rss_l.append(rss)
        ratios.append(min(fl[n][-1] for n in fl) / t)
    return fl, ts, rss_l, ratios


# the import's threads: jobs readers and jobs putters
fl_t, im_t, im_rss, ratios = alternate(floor, imp)
for n, ts in fl_t.items():
    rows.append((f"floor: read + hash + put_from, {n} threads",
                 total / statistics.median(ts) / 1e9, "", None, None, None))
rows.append(("import", total / statistics.median(im_t) / 1e9, "floor",
             statistics.median(ratios), max(im_rss), 0.9))
print("import / floor, per round: "
      + " ".join(f"{r:.2f}" for r in ratios))
def floor_cmd(mode, threads):
    return [os.path.join(tmp, "mooncake_floor"),
            E["WSTORE_MOONCAKE_LIBRARY"], E["WSTORE_MASTER_SERVER_ADDR"],
            E["WSTORE_METADATA_SERVER"], "64", str(threads), "pfloor/",
            mode] + files


# the pull's floor: the chunks stored once by the raw C API, then read
# back by it (get_into, pwrite, fsync; hashed too for a verified pull),
# alternating with the pulls; each pull's ratio is the median of the
# per-round ratios floor time / pull time
fenv = dict(env, MC_LOG_LEVEL="ERROR")
if subprocess.run(floor_cmd("put", jobs), env=fenv,
                  capture_output=True).returncode:
    sys.exit("bench/mooncake.sh: the pull floor's put failed")
for verify in (False, True):
    def pull():
        d = os.path.join(dest, "pull")
        shutil.rmtree(d, ignore_errors=True)
        extra = [] if verify else ["--no-verify"]
        r = run(ws + ["model", "pull", "b", "--dest", d] + extra, env)
        shutil.rmtree(d, ignore_errors=True)
        return r

    def floor_get(threads):
        d = os.path.join(dest, "pfloor")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        r = run(floor_cmd("get", threads),
                dict(fenv, FLOOR_DEST=d, FLOOR_HASH="1" if verify else "0"))
        shutil.rmtree(d, ignore_errors=True)
        return r
    pf_t, pl_t, pl_rss, pratios = alternate(floor_get, pull)
    fbest = min(statistics.median(ts) for ts in pf_t.values())
    what = "pull, verified" if verify else "pull, --no-verify"
    rows.append((f"floor: get_into + {'hash + ' if verify else ''}"
                 "pwrite + fsync", total / fbest / 1e9, "", None, None, None))
    rate = total / min(pl_t) / 1e9
    rows.append((what, rate, "get_into", rate / raw_get, max(pl_rss),
                 None if verify else 0.8))
    rows.append((f"  {what[6:]} against its floor", total /
                 statistics.median(pl_t) / 1e9, "floor",
                 statistics.median(pratios), None, None))
    print(f"{what} / floor, per round: "
          + " ".join(f"{r:.2f}" for r in pratios))
subprocess.run(floor_cmd("rm", jobs), env=fenv, capture_output=True)
secs = {}
for what, args in (("list", ["model", "list"]),
                   ("inspect", ["model", "inspect", "b"])):
    t, rss = best(nruns, lambda: run(ws + args, env))
    secs[what] = t
subprocess.run(ws + ["model", "delete", "b"], env=env, capture_output=True)

print()
print(f"{'what':40} {'GB/s':>7} {'ratio':>7}  {'vs':8} {'peak RSS':>10}  goal")
for what, rate, base, ratio, rss, goal in rows:
    r = f"{ratio:7.2f}" if ratio else " " * 7
    m = f"{rss / 2**20:8.0f} MiB" if rss else " " * 12
    g = ""
    if goal:
        g = f">= {goal}  {'ok' if ratio and ratio >= goal else 'MISSED'}"
    print(f"{what:40} {rate:7.2f} {r}  {base:8} {m}  {g}")
for what, t in secs.items():
    print(f"{what + ' (whole command)':40} {t:7.3f} s"
          f"{'':20}goal < 0.2 s  {'ok' if t < 0.2 else 'MISSED'}")
EOF
