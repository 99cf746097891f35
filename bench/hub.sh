#!/bin/sh
# bench/hub.sh BUILD - `model import --from-hub` from a local `wstore
# serve`, next to curl fetching the same files to disk, in the same run
# (called by bench/run.sh, i.e. `make bench`; BENCH_ONLY=hub alone).
#
# Generates a checkpoint with tests/tools/mkckpt.py, imports it into an
# upstream file store and serves it on loopback; then, BENCH_HUB_RUNS
# times each (after one warm-up), the best of:
#   curl     one curl, 4 transfers at once (--parallel-max 4, as the
#            import's default), every file of the checkpoint to a file on
#            disk, then fsync of each (the import syncs its chunks too)
#   import   wstore model import --from-hub into a second file store
#            (default 64 MiB chunks, 4 files at once), hashes checked
# Figures are GB/s (10^9 bytes); ratio = import / curl (goal >= 0.9).
# Then a pull-through mirror (serve --upstream) of that server over an
# empty store: one curl fetching every file through it, cold (the mirror
# imports from the upstream first) and warm, next to the same curl
# against the upstream itself.
#
#   BENCH_HUB_SIZE   checkpoint bytes (default 1 GiB, 4 shards)
#   BENCH_HUB_RUNS   runs per figure (default 3)
set -u
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=$(cd "$BUILD" && pwd) || exit 1
W="$BUILD/wstore"
if [ ! -x "$BUILD/wstore-serve" ]; then
	echo "bench/hub.sh: $BUILD/wstore-serve not built (libmicrohttpd-dev, -Dserve); skipped" >&2
	exit 0
fi
SIZE=${BENCH_HUB_SIZE:-1073741824}
RUNS=${BENCH_HUB_RUNS:-3}
T=$(mktemp -d "${TMPDIR:-/tmp}/wstore-bench-hub-XXXXXX")
SPID=
MPID=
cleanup() {
	[ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
	[ -n "$MPID" ] && kill "$MPID" 2>/dev/null && wait "$MPID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export WSTORE_CONFIG= HOME="$T"

python3 "$ROOT/tests/tools/mkckpt.py" "$T/src" --size "$SIZE" --shards 4 >/dev/null || exit 1
"$W" --store "$T/up" model import --source "$T/src" --model-id org/bench \
	--checkpoint-id bench --quiet || exit 1
"$W" --store "$T/up" serve --listen 127.0.0.1:0 --no-access-log 2>"$T/serve.log" &
SPID=$!
i=0
while ! grep -q 'listening on' "$T/serve.log" && [ $i -lt 200 ]; do
	sleep 0.05; i=$((i + 1))
done
URL=$(sed -n 's|.*listening on \(http://[^ ]*\).*|\1|p' "$T/serve.log" | head -1)
[ -n "$URL" ] || { echo "bench/hub.sh: wstore serve did not start" >&2; exit 1; }
SHA=$(curl -sf "$URL/api/models/org/bench" | python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])')
FILES=$(cd "$T/src" && ls)
TOTAL=$(cd "$T/src" && cat $FILES | wc -c)
now() { date +%s.%N; }

run_curl() {
	rm -rf "$T/curl"
	mkdir -p "$T/curl"
	set --
	for f in $FILES; do
		set -- "$@" -o "$T/curl/$f" "$URL/org/bench/resolve/$SHA/$f"
	done
	t0=$(now)
	curl -sf --no-progress-meter --parallel --parallel-max 4 "$@" || { echo "bench/hub.sh: curl failed" >&2; exit 1; }
	python3 -c 'import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY); os.fsync(fd); os.close(fd)' "$T"/curl/*
	t1=$(now)
	echo "$t0 $t1" | awk '{print $2 - $1}'
}

N=0
run_import() {
	N=$((N + 1))
	rm -rf "$T/down"
	t0=$(now)
	"$W" --store "$T/down" model import --from-hub org/bench \
		--endpoint "$URL" --checkpoint-id "b$N" --quiet ||
		{ echo "bench/hub.sh: import failed" >&2; exit 1; }
	t1=$(now)
	echo "$t0 $t1" | awk '{print $2 - $1}'
}

best() { sort -n | head -1; }
cat "$T"/src/* > /dev/null
run_curl >/dev/null
run_import >/dev/null
c=$(for _ in $(seq "$RUNS"); do run_curl; done | best)
m=$(for _ in $(seq "$RUNS"); do run_import; done | best)
awk -v b="$TOTAL" -v c="$c" -v m="$m" 'BEGIN {
	printf "hub import from a local wstore serve (%.2f GB, best of runs):\n", b / 1e9
	printf "  %-28s %6.2f GB/s  (%.2f s)\n", "curl to disk (4 at once)", b / c / 1e9, c
	printf "  %-28s %6.2f GB/s  (%.2f s)  ratio %.2f (goal >= 0.9)\n", "model import --from-hub", b / m / 1e9, m, c / m
}'

# ---- the mirror ------------------------------------------------------------
# (a request waits for the mirror's import at most the header timeout,
# then gets 503: long enough here for the cold curl to wait it out)
"$W" --store "$T/mirror" serve --listen 127.0.0.1:0 --no-access-log \
	--header-timeout 600 --upstream "$URL" 2>"$T/mirror.log" &
MPID=$!
i=0
while ! grep -q 'listening on' "$T/mirror.log" && [ $i -lt 200 ]; do
	sleep 0.05; i=$((i + 1))
done
MURL=$(sed -n 's|.*listening on \(http://[^ ]*\).*|\1|p' "$T/mirror.log" | head -1)
[ -n "$MURL" ] || { echo "bench/hub.sh: the mirror did not start" >&2; exit 1; }
# fetch_from BASE: one curl, every file of main in turn, to /dev/null;
# seconds
fetch_from() {
	base=$1
	set --
	for f in $FILES; do set -- "$@" -o /dev/null "$base/org/bench/resolve/main/$f"; done
	t0=$(now)
	curl -sf "$@" || { echo "bench/hub.sh: curl failed" >&2; exit 1; }
	t1=$(now)
	echo "$t0 $t1" | awk '{print $2 - $1}'
}
fetch_from "$URL" >/dev/null
u=$(for _ in $(seq "$RUNS"); do fetch_from "$URL"; done | best)
cold=$(fetch_from "$MURL")
warm=$(for _ in $(seq "$RUNS"); do fetch_from "$MURL"; done | best)
awk -v b="$TOTAL" -v u="$u" -v c="$cold" -v w="$warm" 'BEGIN {
	printf "pull-through mirror (serve --upstream), one curl, every file in turn:\n"
	printf "  %-28s %6.2f GB/s  (%.2f s)\n", "the upstream itself", b / u / 1e9, u
	printf "  %-28s %6.2f GB/s  (%.2f s)  %.2f of the upstream\n", "mirror, first (cold)", b / c / 1e9, c, u / c
	printf "  %-28s %6.2f GB/s  (%.2f s)  %.2f of the upstream\n", "mirror, second (warm)", b / w / 1e9, w, u / w
}'
