#!/bin/sh
# bench/redis.sh BUILD - the Redis and Redis Cluster backends next to the
# raw protocol, measured in the same run on the same servers (called by
# bench/run.sh, i.e. `make bench`).
#
# Starts a standalone server (with a password) and a 3-master/3-replica
# cluster with tests/lib/redis.sh (MALLOC_CONF=dirty_decay_ms:-1,
# muzzy_decay_ms:-1 as there), generates a checkpoint with
# tests/tools/mkckpt.py, builds bench/redis_raw.c, then measures:
#   raw SET / GET    bench/redis_raw: the same total bytes as 64 MiB
#                    values over one connection (cluster: on the master
#                    owning hash tag {r})
#   import           wstore model import (default chunk size 64 MiB)
#   pull --no-verify wstore model pull --no-verify
#   pull, verified   wstore model pull (SHA-256 checked)
#   read API         build/wstore-readbench (wstore_file_pread, 8 MiB
#                    blocks into one buffer: no file written)
#   TLS              one server with a plain and a TLS port (a certificate
#                    made with openssl): pull --no-verify over rediss://,
#                    its ratio to the same pull over redis://
# and prints them as bench.py does: GB/s, the ratio to the raw figure
# (import vs raw SET, pulls vs raw GET; goal >= 0.8 for import and
# pull --no-verify), peak RSS.  Each figure is the best of
# BENCH_REDIS_RUNS runs.  Servers are stopped on exit.
#
#   BENCH_REDIS_SIZE    checkpoint bytes (default 1 GiB, 4 shards)
#   BENCH_REDIS_RUNS    runs per figure (default 3)
#   BENCH_REDIS_STORES  "redis cluster tls" (default all three)
#   BENCH_REDIS_DEST    directory pulls write under (default /dev/shm when
#                       it has room, so the figure is the store's and not
#                       the disk's: pull fsyncs every file; else $TMPDIR)
set -u
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=$(cd "$BUILD" && pwd) || exit 1
. "$ROOT/tests/lib/redis.sh"
. "$HERE/lib.sh"

if ! command -v redis-server >/dev/null; then
	echo "bench/redis.sh: redis-server is not installed (scripts/deps.sh); skipped" >&2
	exit 0
fi
SIZE=${BENCH_REDIS_SIZE:-1073741824}
T=$(mktemp -d "${TMPDIR:-/tmp}/wstore-bench-redis-XXXXXX")
bench_pull_dest "$SIZE" "${BENCH_REDIS_DEST:-}"
cleanup() {
	redis_stop_all >/dev/null 2>&1
	rm -rf "$T"
	bench_pull_dest_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cc -O2 -o "$T/redis_raw" "$HERE/redis_raw.c" -lhiredis || {
	echo "bench/redis.sh: cannot build bench/redis_raw.c (libhiredis-dev?)" >&2
	exit 1
}
python3 "$ROOT/tests/tools/mkckpt.py" "$T/src" --size "$SIZE" --shards 4 || exit 1

STORES=${BENCH_REDIS_STORES:-redis cluster tls}
TLS_PORT= TLS_TLSPORT=
# start_tls_server: one server, plain port TLS_PORT and TLS port
# TLS_TLSPORT, its certificate (for 127.0.0.1) signed by $T/tls/ca.crt
start_tls_server() {
	_t=$T/tls
	mkdir -p "$_t"
	printf 'subjectAltName=IP:127.0.0.1\n' > "$_t/san.ext"
	{ openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
		-nodes -keyout "$_t/ca.key" -out "$_t/ca.crt" -days 2 \
		-subj /CN=bench-ca &&
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-keyout "$_t/server.key" -out "$_t/server.csr" -subj /CN=bench &&
	openssl x509 -req -in "$_t/server.csr" -CA "$_t/ca.crt" \
		-CAkey "$_t/ca.key" -CAcreateserial -days 2 \
		-extfile "$_t/san.ext" -out "$_t/server.crt"; } >/dev/null 2>&1 || {
		echo "bench/redis.sh: cannot make a TLS certificate (openssl)" >&2
		return 1
	}
	_REDIS_DIRS="$_REDIS_DIRS $_t"
	for _k in 0 1 2 3 4 5 6 7 8 9; do
		TLS_PORT=$(_redis_port $((_k + 40)))
		TLS_TLSPORT=$(_redis_port $((_k + 60)))
		_redis_launch "$_t" "$TLS_PORT" --tls-port "$TLS_TLSPORT" \
			--tls-cert-file "$_t/server.crt" \
			--tls-key-file "$_t/server.key" \
			--tls-ca-cert-file "$_t/ca.crt" --tls-auth-clients no &&
			return 0
	done
	echo "bench/redis.sh: cannot start a TLS redis-server" >&2
	return 1
}
RAW_CLUSTER_PORT=
for s in $STORES; do
	case $s in
	redis)
		redis_start_standalone "$T/redis" || exit 1 ;;
	tls)
		start_tls_server || exit 1 ;;
	cluster)
		redis_start_cluster "$T/cluster" || exit 1
		# the master that owns the slot of hash tag "r": redis_raw's
		# keys "{r}0", "{r}1", ... all live there
		set -- $WSTORE_TEST_CLUSTER_PORTS
		slot=$(redis-cli -p "$1" cluster keyslot r)
		RAW_CLUSTER_PORT=$(redis-cli -p "$1" cluster nodes | awk -v s="$slot" '
			$3 ~ /master/ { for (i = 9; i <= NF; i++) {
				n = split($i, r, "-"); if (n == 1) r[2] = r[1]
				if (s + 0 >= r[1] + 0 && s + 0 <= r[2] + 0) {
					sub(/@.*/, "", $2); sub(/.*:/, "", $2)
					print $2; exit } } }') ;;
	*)
		echo "bench/redis.sh: unknown store '$s' in BENCH_REDIS_STORES" >&2
		exit 2 ;;
	esac
done

BENCH_BUILD=$BUILD BENCH_TMP=$T BENCH_DEST=$DEST BENCH_STORES_LIST=$STORES \
BENCH_RAW_CLUSTER_PORT=$RAW_CLUSTER_PORT BENCH_TLS_PORT=$TLS_PORT \
BENCH_TLS_TLSPORT=$TLS_TLSPORT \
python3 - "$HERE" <<'EOF'
import glob
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, sys.argv[1])
from bench import run, best  # noqa: E402  (bench.py: timing, peak RSS)

E = os.environ
w = os.path.join(E["BENCH_BUILD"], "wstore")
tmp, dest = E["BENCH_TMP"], E["BENCH_DEST"]
src = os.path.join(tmp, "src")
raw = os.path.join(tmp, "redis_raw")
nruns = int(E.get("BENCH_REDIS_RUNS", "3"))
files = sorted(glob.glob(src + "/*"))
total = sum(os.path.getsize(f) for f in files)
mib = 64
count = max(1, round(total / (mib << 20)))
raw_bytes = count * (mib << 20)
# the standalone server's password goes through the environment, never
# on wstore's command line; the test cluster has none
env_cl = dict(os.environ, WSTORE_CONFIG="", HOME=tmp)
env_cl.pop("WSTORE_REDIS_PASSWORD", None)
env_sa = dict(env_cl, WSTORE_REDIS_PASSWORD=E.get("WSTORE_TEST_REDIS_PASSWORD", ""))
subprocess.run(f"cat {src}/* > /dev/null", shell=True)
print(f"checkpoint: {total / 2**30:.2f} GiB in {len(files)} files, "
      f"{os.cpu_count()} cores; raw: {count} x {mib} MiB values; "
      f"pulls write under {dest}")

rows = []


def raw_rates(port, password, prefix):
    """Best raw SET and GET rates (GB/s) over nruns runs."""
    sets, gets = [], []
    # one untimed run first: the server's first allocation of this much
    # memory page-faults (jemalloc keeps it afterwards, MALLOC_CONF), and
    # the wstore runs that follow would get it warm
    for i in range(nruns + 1):
        p = subprocess.run([raw, "127.0.0.1", str(port), password or "-",
                            str(mib), str(count), prefix],
                           capture_output=True, text=True)
        m = re.search(r"SET ([0-9.]+) GB/s\s+GET ([0-9.]+) GB/s", p.stdout)
        if p.returncode or not m:
            sys.exit(f"bench/redis.sh: redis_raw failed: {p.stderr.strip()}")
        if i > 0:
            sets.append(float(m.group(1)))
            gets.append(float(m.group(2)))
    return max(sets), max(gets)


def bench_store(label, url, env, raw_set, raw_get):
    rows.append((f"raw SET, {count} x {mib} MiB ({label})", raw_set,
                 "", None, None, None))
    rows.append((f"raw GET, {count} x {mib} MiB ({label})", raw_get,
                 "", None, None, None))
    ws = [w, "--store", url, "--quiet"]

    def imp():
        subprocess.run(ws + ["model", "delete", "b"], env=env,
                       capture_output=True)
        return run(ws + ["model", "import", "--checkpoint-id", "b",
                         "--model-id", "bench/M", "--source", src], env)
    t, rss = best(nruns, imp)
    rows.append((f"import ({label})", total / t / 1e9, "raw SET",
                 total / t / 1e9 / raw_set, rss, 0.8))
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
        rows.append((f"{what} ({label})", total / t / 1e9, "raw GET",
                     total / t / 1e9 / raw_get, rss,
                     None if verify else 0.8))
    rb = os.path.join(E["BENCH_BUILD"], "wstore-readbench")
    if os.path.exists(rb):
        # the read API into one reused buffer: the store path alone,
        # without the file writes a pull does
        t, rss = best(nruns, lambda: run([rb, url, "b"], env))
        rows.append((f"read API, pread 8 MiB ({label})", total / t / 1e9,
                     "raw GET", total / t / 1e9 / raw_get, rss, None))
    subprocess.run(ws + ["model", "delete", "b"], env=env,
                   capture_output=True)


stores = E["BENCH_STORES_LIST"].split()
if "redis" in stores:
    port = E["WSTORE_TEST_REDIS_PORT"]
    s, g = raw_rates(port, E["WSTORE_TEST_REDIS_PASSWORD"], "raw/")
    bench_store("redis", f"redis://127.0.0.1:{port}", env_sa, s, g)
if "cluster" in stores:
    s, g = raw_rates(E["BENCH_RAW_CLUSTER_PORT"], None, "{r}")
    bench_store("redis-cluster", E["WSTORE_TEST_CLUSTER_URL"], env_cl, s, g)


def bench_tls(port, tport, ca):
    """pull --no-verify of one checkpoint over redis:// and rediss:// from
    the same server: what TLS costs."""
    env = dict(env_cl, WSTORE_REDIS_TLS_CA_FILE=ca)
    plain = [w, "--store", f"redis://127.0.0.1:{port}", "--quiet"]
    subprocess.run(plain + ["model", "import", "--checkpoint-id", "b",
                            "--model-id", "bench/M", "--source", src],
                   env=env, check=True)
    rates = {}
    for label, url in (("redis://", f"redis://127.0.0.1:{port}"),
                       ("rediss://", f"rediss://127.0.0.1:{tport}")):
        def pull():
            d = os.path.join(dest, "pull")
            shutil.rmtree(d, ignore_errors=True)
            r = run([w, "--store", url, "--quiet", "model", "pull", "b",
                     "--dest", d, "--no-verify"], env)
            shutil.rmtree(d, ignore_errors=True)
            return r
        t, rss = best(nruns, pull)
        rates[label] = total / t / 1e9
        ratio = rates[label] / rates["redis://"] if label != "redis://" \
            else None
        rows.append((f"pull, --no-verify ({label}, TLS server)",
                     rates[label], "redis://" if ratio else "", ratio, rss,
                     None))
    subprocess.run(plain + ["model", "delete", "b"], env=env,
                   capture_output=True)


if "tls" in stores:
    bench_tls(E["BENCH_TLS_PORT"], E["BENCH_TLS_TLSPORT"],
              os.path.join(tmp, "tls", "ca.crt"))

print()
print(f"{'what':40} {'GB/s':>7} {'ratio':>7}  {'vs':8} {'peak RSS':>10}  goal")
for what, rate, base, ratio, rss, goal in rows:
    r = f"{ratio:7.2f}" if ratio else " " * 7
    m = f"{rss / 2**20:8.0f} MiB" if rss else " " * 12
    g = ""
    if goal:
        g = f">= {goal}  {'ok' if ratio and ratio >= goal else 'MISSED'}"
    print(f"{what:40} {rate:7.2f} {r}  {base:8} {m}  {g}")
EOF
