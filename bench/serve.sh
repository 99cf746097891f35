#!/bin/sh
# bench/serve.sh BUILD - `wstore serve` next to nginx, measured in the same
# run on the same files (called by bench/run.sh, i.e. `make bench`).
#
# Generates a checkpoint with tests/tools/mkckpt.py, imports it into an
# embedded file store (default 64 MiB chunks) and into a Redis server
# started with tests/lib/redis.sh, then measures downloads of the whole
# checkpoint with curl over loopback (keep-alive, one curl per client,
# bodies to /dev/null, sizes checked), 1 and 4 clients at once:
#   nginx            nginx-light serving the source directory (sendfile
#                    on, tcp_nopush, access log off, 2 workers)
#   serve (file)     wstore serve on the file store (and with --mmap)
#   serve (redis)    wstore serve on Redis, next to raw GET of the same
#                    bytes as 64 MiB values (bench/redis_raw.c)
#   serve (mooncake) wstore serve on a Mooncake Store started with
#                    tests/lib/mooncake.sh (when installed), next to raw
#                    get_into (bench/mooncake_raw.c)
# then a load run: 32 clients downloading shards for
# BENCH_SERVE_LOAD_SECONDS (default 30) from the file store, with errors,
# throughput and the server's peak RSS.  Figures are GB/s (10^9 bytes),
# the best of BENCH_SERVE_RUNS runs (after one warm-up), and the ratio to
# nginx (goal >= 0.8 on the file store) or to raw GET.
#
#   BENCH_SERVE_SIZE           checkpoint bytes (default 1 GiB, 4 shards)
#   BENCH_SERVE_RUNS           runs per figure (default 3)
#   BENCH_SERVE_LOAD_SECONDS   length of the load run (0 = none)
#   BENCH_SERVE_ONLY           run one part: file (nginx and the file
#                              store), redis or mooncake (default: all)
set -u
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=$(cd "$BUILD" && pwd) || exit 1
. "$ROOT/tests/lib/redis.sh"
. "$ROOT/tests/lib/mooncake.sh"

if [ ! -x "$BUILD/wstore-serve" ]; then
	echo "bench/serve.sh: $BUILD/wstore-serve not built (libmicrohttpd-dev, -Dserve); skipped" >&2
	exit 0
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || echo "bench/serve.sh: nginx is not installed (apt-get install nginx-light): no baseline" >&2
SIZE=${BENCH_SERVE_SIZE:-1073741824}
T=$(mktemp -d "${TMPDIR:-/tmp}/wstore-bench-serve-XXXXXX")
# nginx workers run as an unprivileged user: let them read the files
chmod 755 "$T"
cleanup() {
	[ -f "$T/nginx.pid" ] && kill "$(cat "$T/nginx.pid")" 2>/dev/null
	redis_stop_all >/dev/null 2>&1
	mooncake_stop_all >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

python3 "$ROOT/tests/tools/mkckpt.py" "$T/src" --size "$SIZE" --shards 4 >/dev/null || exit 1
cc -O2 -o "$T/redis_raw" "$HERE/redis_raw.c" -lhiredis 2>/dev/null || :
redis_start_standalone "$T/redis" >/dev/null 2>&1 || echo "bench/serve.sh: no redis-server: no Redis figures" >&2
if mooncake_installed && cc -O2 -o "$T/mooncake_raw" "$HERE/mooncake_raw.c" "$HERE/mc_client.c" -ldl; then
	# room for the raw values and the checkpoint
	MOONCAKE_TEST_SEGMENT="$((SIZE * 3 / 1073741824 + 1)) GB"
	mooncake_start "$T/mc" >/dev/null 2>&1 || echo "bench/serve.sh: cannot start Mooncake: no Mooncake figures" >&2
else
	echo "bench/serve.sh: Mooncake not installed in $MOONCAKE_HOME: no Mooncake figures" >&2
fi

BENCH_BUILD=$BUILD BENCH_TMP=$T BENCH_NGINX=$NGINX \
python3 - <<'EOF'
import atexit
import glob
import os
import re
import socket
import subprocess
import sys
import time

E = os.environ
tmp = E["BENCH_TMP"]
src = os.path.join(tmp, "src")
w = os.path.join(E["BENCH_BUILD"], "wstore")
nruns = int(E.get("BENCH_SERVE_RUNS", "3"))
load_s = int(E.get("BENCH_SERVE_LOAD_SECONDS", "30"))
only = E.get("BENCH_SERVE_ONLY", "")
files = sorted(os.path.basename(f) for f in glob.glob(src + "/*"))
sizes = {f: os.path.getsize(os.path.join(src, f)) for f in files}
total = sum(sizes.values())
env = dict(os.environ, WSTORE_CONFIG="", HOME=tmp)
env["WSTORE_REDIS_PASSWORD"] = E.get("WSTORE_TEST_REDIS_PASSWORD", "")
subprocess.run(f"cat {src}/* > /dev/null", shell=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start_nginx():
    port = free_port()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""worker_processes 2;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx.err;
events {{ worker_connections 1024; }}
http {{
    sendfile on;
    tcp_nopush on;
    access_log off;
    keepalive_requests 100000;
    client_body_temp_path {tmp}/nginx-body;
    proxy_temp_path {tmp}/nginx-proxy;
    fastcgi_temp_path {tmp}/nginx-fastcgi;
    uwsgi_temp_path {tmp}/nginx-uwsgi;
    scgi_temp_path {tmp}/nginx-scgi;
    server {{ listen 127.0.0.1:{port}; root {src}; }}
}}
""")
    p = subprocess.Popen([E["BENCH_NGINX"], "-p", tmp, "-c", conf, "-e",
                          os.path.join(tmp, "nginx.err")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            return p, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    sys.exit("bench/serve.sh: nginx did not start")


children = []


def start_serve(store, extra=()):
    log = os.path.join(tmp, f"serve-{len(children)}.log")
    with open(log, "w") as f:
        p = subprocess.Popen([w, "--store", store, "serve", "--listen",
                              "127.0.0.1:0", "--no-access-log", *extra],
                             env=env,
                             stdout=subprocess.DEVNULL, stderr=f)
    children.append(p)
    for _ in range(200):
        m = re.search(r"listening on (http://\S+)", open(log).read())
        if m:
            return p, m.group(1)
        if p.poll() is not None:
            break
        time.sleep(0.05)
    sys.exit(f"bench/serve.sh: wstore serve did not start: {open(log).read()}")


@atexit.register
def stop_children():
    for c in children:
        if c.poll() is None:
            c.kill()
            c.wait()


def peak_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def clients(urls, k):
    """k curl processes, each fetching every url once; seconds taken."""
    t0 = time.monotonic()
    procs = []
    for _ in range(k):
        cmd = ["curl", "-s", "-f", "-w", "%{size_download}\\n"]
        for u in urls:
            cmd += ["-o", "/dev/null", u]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
    outs = [p.communicate()[0] for p in procs]
    t = time.monotonic() - t0
    want = [str(sizes[f]) for f in files]
    for p, out in zip(procs, outs):
        if p.returncode or out.split() != want:
            sys.exit(f"bench/serve.sh: a download failed: {out.split()}")
    return t


def rate(urls, k):
    clients(urls, k)  # warm-up: page cache, connections, first touch
    return max(k * total / clients(urls, k) / 1e9 for _ in range(nruns))


def load(base, seconds, k=32):
    shards = [f for f in files if f.endswith(".safetensors")]
    end = time.monotonic() + seconds
    # each client: shard after shard until the deadline; curl drops the
    # #fragment, which carries the size to check
    script = ('end=$1; shift; n=0; bad=0; '
              'while [ $(date +%s) -lt $end ]; do for u; do '
              '[ $(date +%s) -lt $end ] || break; '
              's=$(curl -sf -o /dev/null -w "%{size_download}" "$u"); '
              'if [ "$s" = "${u##*#}" ]; then n=$((n+1)); '
              'else bad=$((bad+1)); fi; done; done; echo $n $bad')
    urls = [f"{base}/{f}#{sizes[f]}" for f in shards]
    end_s = str(int(time.time() + seconds))
    procs = [subprocess.Popen(["sh", "-c", script, "load", end_s] +
                              urls[i % len(urls):] + urls[:i % len(urls)],
                              stdout=subprocess.PIPE, text=True)
             for i in range(k)]
    t0 = time.monotonic()
    outs = [p.communicate()[0].split() for p in procs]
    t = time.monotonic() - t0
    n = sum(int(o[0]) for o in outs)
    bad = sum(int(o[1]) for o in outs)
    per = sum(sizes[f] for f in shards) / len(shards)
    return n, bad, n * per / t / 1e9, t


rows = []
print(f"checkpoint: {total / 2**30:.2f} GiB in {len(files)} files, "
      f"{os.cpu_count()} cores, curl over loopback")

ng = {}
if only in ("", "file") and os.path.exists(E["BENCH_NGINX"]):
    p, base = start_nginx()
    for k in (1, 4):
        ng[k] = rate([f"{base}/{f}" for f in files], k)
        rows.append((f"nginx sendfile, {k} client{'s' if k > 1 else ''}",
                     ng[k], "", None, None, None))
    p.terminate()
    p.wait()

loadrow = None
if only in ("", "file"):
    store = os.path.join(tmp, "store")
    subprocess.run([w, "--store", store, "--quiet", "model", "import",
                    "--checkpoint-id", "b", "--model-id", "bench/M",
                    "--source", src], env=env, check=True)
    p, base = start_serve(store)
    for k in (1, 4):
        r = rate([f"{base}/bench/M/resolve/main/{f}" for f in files], k)
        rows.append((f"serve (file), {k} client{'s' if k > 1 else ''}", r,
                     "nginx" if k in ng else "", r / ng[k] if k in ng else None,
                     peak_rss(p.pid), 0.8))
    if load_s > 0:
        n, bad, r, t = load(f"{base}/bench/M/resolve/main", load_s)
        loadrow = (n, bad, r, t, peak_rss(p.pid))
    p.terminate()
    p.wait()
    p, base = start_serve(store, ["--mmap"])
    for k in (1, 4):
        r = rate([f"{base}/bench/M/resolve/main/{f}" for f in files], k)
        rows.append((f"serve (file, --mmap), {k} client{'s' if k > 1 else ''}",
                     r, "nginx" if k in ng else "",
                     r / ng[k] if k in ng else None, peak_rss(p.pid), 0.8))
    p.terminate()
    p.wait()

port = E.get("WSTORE_TEST_REDIS_PORT")
raw = os.path.join(tmp, "redis_raw")
if port and only in ("", "redis"):
    url = f"redis://127.0.0.1:{port}"
    subprocess.run([w, "--store", url, "--quiet", "model", "import",
                    "--checkpoint-id", "b", "--model-id", "bench/M",
                    "--source", src], env=env, check=True)
    raw_get = None
    if os.path.exists(raw):
        count = max(1, round(total / (64 << 20)))
        gets = []
        for i in range(nruns + 1):
            o = subprocess.run([raw, "127.0.0.1", port,
                                E.get("WSTORE_TEST_REDIS_PASSWORD") or "-",
                                "64", str(count), "raw/"],
                               capture_output=True, text=True).stdout
            m = re.search(r"GET ([0-9.]+) GB/s", o)
            if m and i > 0:
                gets.append(float(m.group(1)))
        raw_get = max(gets) if gets else None
        if raw_get:
            rows.append(("raw GET, 64 MiB values (redis)", raw_get, "", None,
                         None, None))
    p, base = start_serve(url)
    for k in (1, 4):
        r = rate([f"{base}/bench/M/resolve/main/{f}" for f in files], k)
        rows.append((f"serve (redis), {k} client{'s' if k > 1 else ''}", r,
                     "raw GET" if raw_get else "",
                     r / raw_get if raw_get else None, peak_rss(p.pid), None))
    p.terminate()
    p.wait()

if E.get("WSTORE_MASTER_SERVER_ADDR") and only in ("", "mooncake"):
    # Mooncake: next to raw get_into of the same bytes (bench/mooncake_raw)
    mraw = os.path.join(tmp, "mooncake_raw")
    count = max(1, round(total / (64 << 20)))
    gets = []
    for i in range(nruns + 1):
        o = subprocess.run([mraw, E["WSTORE_MOONCAKE_LIBRARY"],
                            E["WSTORE_MASTER_SERVER_ADDR"],
                            E["WSTORE_METADATA_SERVER"], "64", str(count)],
                           capture_output=True, text=True,
                           env=dict(env, MC_LOG_LEVEL="ERROR")).stdout
        m = re.search(r"get_into ([0-9.]+) GB/s", o)
        if m and i > 0:
            gets.append(float(m.group(1)))
    raw_get = max(gets) if gets else None
    if raw_get:
        rows.append(("raw get_into, 64 MiB values (mooncake)", raw_get, "",
                     None, None, None))
    subprocess.run([w, "--store", "mooncake", "--quiet", "model", "import",
                    "--checkpoint-id", "b", "--model-id", "bench/M",
                    "--source", src], env=env, check=True)
    p, base = start_serve("mooncake")
    for k in (1, 4):
        r = rate([f"{base}/bench/M/resolve/main/{f}" for f in files], k)
        rows.append((f"serve (mooncake), {k} client{'s' if k > 1 else ''}",
                     r, "get_into" if raw_get else "",
                     r / raw_get if raw_get else None, peak_rss(p.pid), None))
    p.terminate()
    p.wait()

print()
print(f"{'what':42} {'GB/s':>7} {'ratio':>7}  {'vs':8} {'peak RSS':>10}  goal")
for what, r, base, ratio, rss, goal in rows:
    rs = f"{ratio:7.2f}" if ratio else " " * 7
    m = f"{rss / 2**20:8.0f} MiB" if rss else " " * 12
    g = ""
    if goal and ratio:
        g = f">= {goal}  {'ok' if ratio >= goal else 'MISSED'}"
    print(f"{what:42} {r:7.2f} {rs}  {base:8} {m}  {g}")
if loadrow:
    n, bad, r, t, rss = loadrow
    print(f"\nload (file): 32 clients for {t:.0f} s: {n} shard downloads, "
          f"{bad} failed, {r:.2f} GB/s, server peak RSS {rss / 2**20:.0f} MiB")
EOF
