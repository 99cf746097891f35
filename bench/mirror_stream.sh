#!/bin/sh
# bench/mirror_stream.sh BUILD - the pull-through mirror's stream-through
# (serve --upstream) next to its upstream, in the same run (called by
# bench/run.sh, i.e. `make bench`; BENCH_ONLY=mirror_stream alone).
#
# The upstream is a `wstore serve` of a file store holding one large
# safetensors file (tests/tools/mkckpt.py, one shard).  Each run, the best
# of BENCH_MIRROR_RUNS (after one warm-up of the upstream):
#   upstream   one curl of the file from the upstream itself, to /dev/null
#   floor      the file from the upstream through SHA-256 as it arrives
#              (build/wstore-sha256-get: libcurl as the mirror's receive,
#              libcrypto's SHA-256 on a second thread fed by a pipe, i.e.
#              `curl | sha256` without the tools' small reads, and with
#              --inline in the receiving thread; the best of both runs,
#              bench/sha256_get.c): the least a cold mirror must do (take
#              the bytes, hash them all before the last goes out).
#              SHA-256 of one stream runs on one core, so where it is
#              slower than the transfer this is the cold mirror's ceiling
#              (the hash is checked against the upstream's)
#   cold       a new mirror over an empty store, the same curl through it
#              (the mirror fetches the file from the upstream as the
#              client reads it; its import of the snapshot runs beside)
# Figures: GB/s (10^9 bytes), ratio = upstream time / cold time (goal
# >= 0.8) and floor time / cold time; and the time to first byte (curl's
# time_starttransfer) of each, cold minus upstream in ms (goal <= 50; the
# cold one includes the mirror asking the upstream for the commit and the
# listing).
#
#   BENCH_MIRROR_SIZE   file bytes (default 2 GiB)
#   BENCH_MIRROR_RUNS   runs per figure (default 3)
set -u
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=$(cd "$BUILD" && pwd) || exit 1
W="$BUILD/wstore"
if [ ! -x "$BUILD/wstore-serve" ] || [ ! -x "$BUILD/wstore-sha256-get" ]; then
	echo "bench/mirror_stream.sh: $BUILD/wstore-serve or wstore-sha256-get not built; skipped" >&2
	exit 0
fi
SIZE=${BENCH_MIRROR_SIZE:-2147483648}
RUNS=${BENCH_MIRROR_RUNS:-3}
T=$(mktemp -d "${TMPDIR:-/tmp}/wstore-bench-mirror-XXXXXX")
SPID=
MPID=
cleanup() {
	[ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
	[ -n "$MPID" ] && kill "$MPID" 2>/dev/null && wait "$MPID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export WSTORE_CONFIG= HOME="$T" TMPDIR="$T"

# start STORE LOG ARGS...: a wstore serve on a free loopback port; its URL
start() {
	_st=$1 _log=$2
	shift 2
	"$W" --store "$_st" serve --listen 127.0.0.1:0 --no-access-log "$@" \
		2>"$_log" &
	_pid=$!
	i=0
	while ! grep -q 'listening on' "$_log" && [ $i -lt 200 ]; do
		sleep 0.05; i=$((i + 1))
	done
	URL_=$(sed -n 's|.*listening on \(http://[^ ]*\).*|\1|p' "$_log" | head -1)
	[ -n "$URL_" ] || { echo "bench/mirror_stream.sh: serve did not start" >&2; exit 1; }
}

python3 "$ROOT/tests/tools/mkckpt.py" "$T/src" --size "$SIZE" --shards 1 >/dev/null || exit 1
FILE=$(cd "$T/src" && ls | grep safetensors | head -1)
BYTES=$(stat -c %s "$T/src/$FILE")
"$W" --store "$T/up" model import --source "$T/src" --model-id org/bench \
	--checkpoint-id bench --quiet || exit 1
rm -rf "$T/src"
start "$T/up" "$T/up.log"
SPID=$_pid
UP=$URL_

# get BASE: "SECONDS TTFB" of one curl of the file through BASE
get() {
	curl -sf -o /dev/null -w '%{time_total} %{time_starttransfer} %{size_download}\n' \
		"$1/org/bench/resolve/main/$FILE" > "$T/get.out" ||
		{ echo "bench/mirror_stream.sh: curl failed" >&2; exit 1; }
	read -r s f n < "$T/get.out"
	[ "$n" = "$BYTES" ] || { echo "bench/mirror_stream.sh: $n bytes, not $BYTES" >&2; exit 1; }
	echo "$s $f"
}

# floor [--inline]: seconds of one GET of the file from the upstream
# through SHA-256
floor() {
	_t0=$(date +%s.%N)
	_h=$("$BUILD/wstore-sha256-get" "$@" "$UP/org/bench/resolve/main/$FILE")
	_t1=$(date +%s.%N)
	[ "${_h%% *}" = "$SHA" ] ||
		{ echo "bench/mirror_stream.sh: floor hashed '$_h', not $SHA" >&2; exit 1; }
	awk -v a="$_t0" -v b="$_t1" 'BEGIN { printf "%.3f\n", b - a }'
}

cold() {
	rm -rf "$T/mirror"
	start "$T/mirror" "$T/mirror.log" --upstream "$UP" --header-timeout 60
	MPID=$_pid
	get "$URL_"
	kill "$MPID" 2>/dev/null
	wait "$MPID" 2>/dev/null
	MPID=
}

SHA=$(curl -sfI "$UP/org/bench/resolve/main/$FILE" | tr -d '\r"' |
	sed -n 's/^[Xx]-[Ll]inked-[Ee]tag: *//p')
[ ${#SHA} -eq 64 ] || { echo "bench/mirror_stream.sh: no sha256 from the upstream" >&2; exit 1; }
get "$UP" >/dev/null
best() { sort -n -k"$1" | head -1 | cut -d' ' -f"$1"; }
for _ in $(seq "$RUNS"); do get "$UP"; done > "$T/up.runs"
for _ in $(seq "$RUNS"); do floor; floor --inline; done > "$T/floor.runs"
for _ in $(seq "$RUNS"); do cold; done > "$T/cold.runs"
awk -v b="$BYTES" -v us="$(best 1 < "$T/up.runs")" -v uf="$(best 2 < "$T/up.runs")" \
	-v fs="$(best 1 < "$T/floor.runs")" \
	-v cs="$(best 1 < "$T/cold.runs")" -v cf="$(best 2 < "$T/cold.runs")" 'BEGIN {
	printf "mirror stream-through, one %.2f GB file, one curl (best of runs):\n", b / 1e9
	printf "  %-26s %6.2f GB/s  (%.2f s)  first byte %.1f ms\n", "the upstream itself", b / us / 1e9, us, uf * 1000
	printf "  %-26s %6.2f GB/s  (%.2f s)\n", "floor: upstream | sha256", b / fs / 1e9, fs
	printf "  %-26s %6.2f GB/s  (%.2f s)  first byte %.1f ms\n", "mirror, cold", b / cs / 1e9, cs, cf * 1000
	printf "  ratio %.2f of the upstream (goal >= 0.8), %.2f of the floor; first byte %+.1f ms of the upstream'"'"'s (goal <= 50)\n", us / cs, fs / cs, (cf - uf) * 1000
}'
