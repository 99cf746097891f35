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
#   import           wstore model import (default chunk size 64 MiB)
#   pull --no-verify wstore model pull --no-verify
#   pull, verified   wstore model pull (SHA-256 checked)
#   list, inspect    wstore model list / inspect (seconds per command)
# and prints them as bench/redis.sh does: GB/s, the ratio to the raw
# figure (import vs raw put_from, pulls vs raw get_into; goal >= 0.8 for
# import and pull --no-verify), peak RSS.  Each figure is the best of
# BENCH_MOONCAKE_RUNS runs.  The cluster is stopped on exit.
#
#   BENCH_MOONCAKE_SIZE  checkpoint bytes (default 1 GiB, 4 shards)
#   BENCH_MOONCAKE_RUNS  runs per figure (default 3)
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

cc -O2 -o "$T/mooncake_raw" "$HERE/mooncake_raw.c" -ldl || {
	echo "bench/mooncake.sh: cannot build bench/mooncake_raw.c" >&2
	exit 1
}
python3 "$ROOT/tests/tools/mkckpt.py" "$T/src" --size "$SIZE" --shards 4 || exit 1
# room for the raw values and two checkpoints
MOONCAKE_TEST_SEGMENT="$((SIZE * 3 / 1073741824 + 1)) GB"
mooncake_start "$T/cluster" || exit 1

BENCH_BUILD=$BUILD BENCH_TMP=$T BENCH_DEST=$DEST \
python3 - "$HERE" <<'EOF'
import glob
import os
import re
import shutil
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
subprocess.run(f"cat {src}/* > /dev/null", shell=True)
print(f"checkpoint: {total / 2**30:.2f} GiB in {len(files)} files, "
      f"{os.cpu_count()} cores; raw: {count} x {mib} MiB values; "
      f"pulls write under {dest}")


def raw_rates():
    """Best raw put_from and get_into rates (GB/s), whole process."""
    puts, gets = [], []
    # one untimed run first: a fresh storage node pages its segment in on
    # first write, and the wstore runs that follow would get it warm
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


def imp():
    subprocess.run(ws + ["model", "delete", "--missing-ok", "b"], env=env,
                   capture_output=True)
    return run(ws + ["model", "import", "--checkpoint-id", "b",
                     "--model-id", "bench/M", "--source", src], env)


t, rss = best(nruns, imp)
rows.append(("import", total / t / 1e9, "put_from", total / t / 1e9 / raw_put,
             rss, 0.8))
for verify in (False, True):
    def pull():
        d = os.path.join(dest, "pull")
        shutil.rmtree(d, ignore_errors=True)
        extra = [] if verify else ["--no-verify"]
        r = run(ws + ["model", "pull", "b", "--dest", d] + extra, env)
        shutil.rmtree(d, ignore_errors=True)
        return r
    t, rss = best(nruns, pull)
    what = "pull, verified" if verify else "pull, --no-verify"
    rows.append((what, total / t / 1e9, "get_into", total / t / 1e9 / raw_get,
                 rss, None if verify else 0.8))
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
