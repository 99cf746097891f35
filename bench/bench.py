#!/usr/bin/env python3
"""make bench: throughput of wstore next to baselines measured in the same
run on the same files, printed as ratios (these machines are shared and
noisy: absolute figures vary, ratios much less).

  BENCH_SIZE   checkpoint size in bytes (default 2 GiB, 4 shards)
  BENCH_STORES comma list of stores to run: file,redis,cluster (default file;
               redis/cluster need bench/redis.sh, which starts servers)
usage: bench.py BUILD_DIR
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
rows = []


def run(cmd, env=None, check=True):
    """Run cmd; return (seconds, peak RSS in bytes of that process)."""
    t = time.monotonic()
    p = subprocess.Popen(cmd, shell=isinstance(cmd, str), env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    el = time.monotonic() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    p.stderr.close()
    if check and p.returncode != 0:
        sys.exit(f"bench: {cmd!r} failed: {err.decode()[-500:]}")
    return el, ru.ru_maxrss * 1024


def best(n, fn):
    """Best of n runs (least disturbed by other load)."""
    res = [fn() for _ in range(n)]
    return min(res, key=lambda r: r[0])


def row(what, nbytes, secs, base_name, base_secs, rss=None, goal=None):
    rate = nbytes / secs / 1e9
    ratio = base_secs / secs if base_secs else None
    rows.append((what, rate, base_name, ratio, rss, goal))


def drop_store(path):
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run("sync", shell=True)


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    w = os.path.join(build, "wstore")
    size = int(os.environ.get("BENCH_SIZE", 2 << 30))
    ncpu = os.cpu_count() or 1
    tmp = tempfile.mkdtemp(prefix="wstore-bench-")
    src = os.path.join(tmp, "src")
    try:
        subprocess.run([sys.executable, os.path.join(ROOT, "tests/tools/mkckpt.py"),
                        src, "--size", str(size), "--shards", "4"], check=True)
        files = sorted(glob.glob(src + "/*"))
        total = sum(os.path.getsize(f) for f in files)
        qfiles = " ".join(f"'{f}'" for f in files)
        run(f"cat {qfiles} > /dev/null")
        subprocess.run("sync", shell=True)
        print(f"checkpoint: {total / 2**30:.2f} GiB in {len(files)} files, "
              f"{ncpu} cores")

        sha = best(3, lambda: run(
            f"printf '%s\\n' {qfiles} | xargs -P {ncpu} -n 1 openssl dgst -sha256"))[0]
        cat = best(3, lambda: run(f"cat {qfiles} > /dev/null"))[0]

        def cp_once():
            d = os.path.join(tmp, "cp")
            shutil.rmtree(d, ignore_errors=True)
            r = run(f"cp -r '{src}' '{d}' && sync")
            shutil.rmtree(d, ignore_errors=True)
            return r
        cp = best(3, cp_once)[0]
        rows.append(("baseline: sha256 (openssl, all cores)", total / sha / 1e9, "", None, None, None))
        rows.append(("baseline: cat > /dev/null", total / cat / 1e9, "", None, None, None))
        rows.append(("baseline: cp -r + sync", total / cp / 1e9, "", None, None, None))

        store = os.path.join(tmp, "store")
        env = dict(os.environ, WSTORE_HOME=store)

        def imp():
            drop_store(store)
            return run([w, "--store", store, "model", "import", "--checkpoint-id",
                        "b", "--model-id", "bench/M", "--source", src], env)
        t, rss = best(3, imp)
        row("import (file store)", total, t, "sha256", sha, rss, 0.8)
        # memory must not grow with the checkpoint: the same import of 4x
        # the data (hard links of the shards under other names)
        src4 = os.path.join(tmp, "src4")
        os.makedirs(src4)
        for f in files:
            for k in range(4):
                os.link(f, os.path.join(src4, f"copy{k}-" + os.path.basename(f)))
        r4 = run([w, "--store", store, "model", "import", "--checkpoint-id",
                  "b4", "--model-id", "bench/M4", "--source", src4], env)
        rows.append(("import of 4x the data: peak RSS", 4 * total / r4[0] / 1e9,
                     "", None, r4[1], None))
        run([w, "--store", store, "model", "delete", "b4"], env)
        t, rss = best(3, lambda: run([w, "--store", store, "model", "verify", "b"], env))
        row("verify (file store)", total, t, "sha256", sha, rss)
        if subprocess.run([w, "model", "pull", "--help"], capture_output=True).returncode == 0:
            for verify in (True, False):
                def pull():
                    d = os.path.join(tmp, "pull")
                    shutil.rmtree(d, ignore_errors=True)
                    extra = [] if verify else ["--no-verify"]
                    r = run([w, "--store", store, "model", "pull", "b", "--dest", d] + extra, env)
                    shutil.rmtree(d, ignore_errors=True)
                    return r
                t, rss = best(3, pull)
                if verify:
                    row("pull, verified", total, t, "sha256", sha, rss, 0.8)
                else:
                    row("pull, --no-verify", total, t, "cp -r", cp, rss, 0.7)
        rb = os.path.join(build, "wstore-readbench")
        if os.path.exists(rb):
            t, rss = best(3, lambda: run([rb, store, "b"], env))
            row("read API (wstore_file_pread)", total, t, "cat", cat, rss, 0.7)
        py = os.path.join(ROOT, "bench", "iter_tensors.py")
        if os.path.exists(py):
            penv = dict(env, WSTORE_LIBRARY=os.path.join(build, "libwstore.so"))
            t, rss = best(3, lambda: run(["/usr/bin/python3", py, store, "b"], penv))
            row("python iter_tensors", total, t, "cat", cat, rss, 0.7)

        # control-plane latency with 100 checkpoints
        small = os.path.join(tmp, "small")
        os.makedirs(small)
        with open(os.path.join(small, "config.json"), "w") as f:
            json.dump({"a": 1}, f)
        for i in range(100):
            run([w, "--store", store, "model", "import", "--checkpoint-id",
                 f"s{i}", "--model-id", "bench/S", "--source", small], env)
        tl = best(5, lambda: run([w, "--store", store, "model", "list"], env))[0]
        ti = best(5, lambda: run([w, "--store", store, "model", "inspect", "s50"], env))[0]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print()
    print(f"{'what':40} {'GB/s':>7} {'ratio':>7}  {'vs':8} {'peak RSS':>10}  goal")
    for what, rate, base, ratio, rss, goal in rows:
        r = f"{ratio:7.2f}" if ratio else " " * 7
        m = f"{rss / 2**20:8.0f} MiB" if rss else " " * 12
        g = ""
        if goal:
            g = f">= {goal}  {'ok' if ratio and ratio >= goal else 'MISSED'}"
        print(f"{what:40} {rate:7.2f} {r}  {base:8} {m}  {g}")
    print(f"{'model list, 100 checkpoints':40} {tl * 1000:7.1f} ms (goal < 50 ms: {'ok' if tl < 0.05 else 'MISSED'})")
    print(f"{'model inspect':40} {ti * 1000:7.1f} ms (goal < 50 ms: {'ok' if ti < 0.05 else 'MISSED'})")
    print("peak RSS bound for import/pull: (jobs + 2) x chunk + 64 MiB = "
          f"{((ncpu + 2) * 64 + 64)} MiB with 64 MiB chunks")


if __name__ == "__main__":
    main()
