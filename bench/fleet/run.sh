#!/bin/bash
# bench/fleet/run.sh - make fleet: the whole fleet bed (tests/fleet/bed.sh)
# and every scenario of it, measured; writes the figures to
# $FLEET_OUT/results.txt and then docs/fleet.md with its plots
# (bench/fleet/report.py).
#   FLEET_NODES (8)  client nodes
#   FLEET_SIZE (256M) checkpoint size: a number of bytes with K, M or G
#                    (binary units; FLEET_MIB, a number of MiB, still works)
#   FLEET_RAW_MIB    MiB each node SETs / puts for the raw figures (the
#                    checkpoint size up to 128: the raw rate does not need
#                    more, and 8 nodes x 2 GB x 2 copies would not fit)
#   FLEET_SERVE_MIB (32) checkpoint the 32 Hub clients fetch
#   FLEET_MC_SEGMENT each Mooncake storage node's segment (large enough
#                    for two replicas of everything the run puts, 2 GB at
#                    least)
#   FLEET_RESULTS    the results file (docs/fleet/results.txt)
#   FLEET_MOONCAKE=0 without Mooncake (its scenarios are left out)
#   FLEET_ONLY       some scenarios only (see below): their lines replace
#                    those of the same names in the results, the others
#                    stay, and a "rerun" line says what was measured again
#   sh bench/fleet/run.sh [BUILD_DIR]
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
W=$BUILD/wstore
N=${FLEET_NODES:-8}
# size_mib TEXT: TEXT (1234, 512M, 2G, 2GiB, 300MB...) in MiB
size_mib() {
	awk -v s="$1" 'BEGIN {
		u = toupper(s); sub(/I?B$/, "", u)
		if (u !~ /^[0-9]+[KMG]?$/) exit 1
		m = u ~ /G$/ ? 1024 : u ~ /M$/ ? 1 : u ~ /K$/ ? 1 / 1024 : 1 / 1048576
		v = int(u * m); if (v < 1) exit 1; print v }'
}
if [ -n "${FLEET_SIZE:-}" ]; then
	MIB=$(size_mib "$FLEET_SIZE") || {
		echo "run.sh: FLEET_SIZE '$FLEET_SIZE' is not a size (e.g. 256M, 2G)" >&2
		exit 2
	}
else
	MIB=${FLEET_MIB:-256}
fi
RAW_MIB=${FLEET_RAW_MIB:-$((MIB < 128 ? MIB : 128))}
SMIB=${FLEET_SERVE_MIB:-32}
T=$(mktemp -d "${TMPDIR:-/tmp}/wstore-fleet-XXXXXX")
BED_DIR=$T/bed
mkdir -p "$BED_DIR"
. "$ROOT/tests/fleet/bed.sh"
SAMPLER=
trap 'kill $SAMPLER 2>/dev/null; bed_down >/dev/null 2>&1; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
export HOME=$T/home WSTORE_CONFIG= WSTORE_HOME=$T/store
export WSTORE_SYSTEM_CONFIG=/nonexistent/wstore-fleet/config.json
mkdir -p "$HOME"
RES=${FLEET_RESULTS:-$ROOT/docs/fleet/results.txt}
mkdir -p "$(dirname "$RES")"
touch "$RES"
# a partial run records into a file of its own, merged at the end
OUT=$RES
[ -n "${FLEET_ONLY:-}" ] && OUT=$T/partial.txt
: > "$OUT"

say() { echo "[fleet] $*" >&2; }
# rec KEY VALUE...: one result line
rec() { echo "$*" >> "$OUT"; say "$*"; }
now_ns() { date +%s%N; }
mibs() { awk -v b="$1" -v ns="$2" 'BEGIN { printf "%.1f", b / 1048576 / (ns / 1e9) }'; }

[ "$(id -u)" = 0 ] || { say "needs root (network namespaces)"; exit 1; }
bed_up "$N" || exit 1
# Mooncake first: its storage nodes map their segments as they start,
# which can stall a loaded machine for long enough that a Redis Cluster
# already running takes a master for failed.  The node timeout is 5 s here
# (2 s in the CI suite): a spurious failover of a loaded 2-core machine
# loses acknowledged writes, which the import then reports.
MC=0
if [ "${FLEET_MOONCAKE:-1}" != 0 ] && bed_mc_installed; then
	# two replicas of the checkpoint, of the raw values and of the
	# serve checkpoint over 3 nodes, a third more for the allocator
	seg=$(((2 * (MIB + N * RAW_MIB + SMIB) / 3) * 4 / 3))
	[ $seg -lt 2048 ] && seg=2048
	BED_MC_SEGMENT=${FLEET_MC_SEGMENT:-$(((seg + 1023) / 1024)) GB}
	bed_mooncake && MC=1
fi
BED_REDIS_NODE_TIMEOUT=${FLEET_REDIS_NODE_TIMEOUT:-5000}
bed_redis_cluster || exit 1
if [ -n "${FLEET_ONLY:-}" ]; then
	rec rerun nodes=$N mib=$MIB cores=$(nproc) mooncake=$MC "of $FLEET_ONLY on $(date -u "+%Y-%m-%d %H:%M UTC"); load average at start: $(cut -d" " -f1-3 /proc/loadavg)"
else
	rec bed nodes=$N mib=$MIB cores=$(nproc) mooncake=$MC "on $(date -u "+%Y-%m-%d %H:%M UTC"); load average at start: $(cut -d" " -f1-3 /proc/loadavg)"
fi
# what else ran: every 20 s, the processes outside this run (not in its
# session, not in the bed's namespaces) that used the most CPU over 2 s,
# and the load average; summed up in the "others" line at the end
sample_others() {
	local me; me=$(ps -o sid= -p $$ | tr -d ' ')
	while :; do
		echo "load $(cut -d' ' -f1 /proc/loadavg)"
		awk '/^MemTotal/ { t = $2 } /^MemAvailable/ { a = $2 }
			END { printf "mem %.1f\n", (t - a) / 1048576 }' /proc/meminfo
		top -b -n 2 -d 2 -w 200 | awk '/^top -/ { f++ } f == 2 && $1 ~ /^[0-9]+$/ && $9 > 5 { print $1, $9, $12 }' |
			while read -r pid cpu comm; do
				[ -d "/proc/$pid" ] || continue
				[[ $(ip netns identify "$pid" 2>/dev/null) == "$BED_TAG"-* ]] && continue
				[ "$(ps -o sid= -p "$pid" 2>/dev/null | tr -d ' ')" = "$me" ] && continue
				echo "proc $comm $cpu"
			done
		sleep 18
	done
}
sample_others > "$T/others.txt" 2>/dev/null &
SAMPLER=$!
python3 "$ROOT/tests/tools/mkckpt.py" "$T/src" --size $((MIB << 20)) \
	--shards 4 --seed 25 > /dev/null
python3 "$ROOT/tests/tools/mkckpt.py" "$T/ssrc" --size $((SMIB << 20)) \
	--shards 2 --seed 26 > /dev/null
SRC_BYTES=$(du -sb "$T/src" | cut -f1)
(cd "$T/src" && find . -type f | sort | xargs sha256sum) > "$T/src.sums"

# on K CMD...: CMD in node K, with the Mooncake settings when the store is
# mooncake ($STORE)
# (every Mooncake command with WSTORE_REPLICA_NUM=$MC_REPLICAS: the lease
# and index objects a pull writes need the replicas as much as the chunks)
MC_REPLICAS=2
on() {
	_k=$1; shift
	if [ "$STORE" = mooncake ]; then
		bed_mc "$_k" env WSTORE_REPLICA_NUM=$MC_REPLICAS "$@"
	else
		bed_node "$_k" "$@"
	fi
}

# fleet_pull TAG [ENV...]: every node pulls fl at once (with $PULL_ARGS
# if set, e.g. --no-verify); sets ok, err, bad
# (counts: complete and equal, exit 1 with one line, anything else) and
# ns (wall time)
fleet_pull() {
	_tag=$1; shift
	_pids=""
	ERRLINE=""
	_t0=$(now_ns)
	for ((k = 1; k <= N; k++)); do
		rm -rf "$T/$_tag-$k"
		# shellcheck disable=SC2086 # PULL_ARGS: words
		on $k env "$@" "$W" --store "$PSTORE" model pull fl --dest "$T/$_tag-$k" \
			${PULL_ARGS:-} > "$T/$_tag-$k.out" 2>&1 &
		_pids="$_pids $!"
	done
	fleet_settle "$_tag" $_pids
}
fleet_settle() {
	_tag=$1; shift
	local rcs="" _p _rc _l
	# the wall time ends with the last pull, before the checks
	for _p in "$@"; do timeout_wait 600 "$_p"; rcs="$rcs $?"; done
	ns=$(($(now_ns) - _t0))
	ok=0 err=0 bad=0 k=1
	for _rc in $rcs; do
		_l=$(grep -c . "$T/$_tag-$k.out")
		if [ $_rc = 0 ] && diff -r "$T/src" "$T/$_tag-$k" >/dev/null 2>&1; then
			ok=$((ok + 1))
		elif [ $_rc = 1 ] && [ "$_l" = 1 ]; then
			err=$((err + 1)); say "node $k: $(cat "$T/$_tag-$k.out")"
			ERRLINE=$(cat "$T/$_tag-$k.out")
		else
			bad=$((bad + 1)); say "node $k: exit $_rc: $(tail -2 "$T/$_tag-$k.out")"
		fi
		rm -rf "$T/$_tag-$k"
		k=$((k + 1))
	done
}
# timeout_wait SECONDS PID: wait for PID, SIGKILL it after SECONDS (124)
timeout_wait() {
	local i=$(($1 * 10))
	while ((i > 0)) && kill -0 "$2" 2>/dev/null; do sleep 0.1; i=$((i - 1)); done
	kill -0 "$2" 2>/dev/null && { kill -9 "$2"; wait "$2"; return 124; }
	wait "$2"
}
started() { local i; for ((i = 0; i < 600; i++)); do [ -d "$1" ] && return 0; sleep 0.1; done; return 1; }

. "$ROOT/bench/fleet/scenarios.sh"

# FLEET_ONLY="raw_mooncake serve ...": only these scenarios (mostly the
# names of the scn_ functions; mount, redis_kill and cutoff need
# concurrent_redis, mc_kill needs concurrent_mooncake; mount_mooncake and
# cutoff_mooncake are mount and cutoff on Mooncake, and need
# concurrent_mooncake too; serve, serve_mooncake, serve2, serve2_mooncake
# and the latency scenarios import what they read; latency_cluster and
# latency_mooncake are scn_detour)
want() { [ -z "${FLEET_ONLY:-}" ] || [[ " $FLEET_ONLY " == *" $1 "* ]]; }
want concurrent_redis && scn_concurrent redis "$BED_REDIS_URL"
[ $MC = 1 ] && want concurrent_mooncake && scn_concurrent mooncake mooncake
want raw_redis && scn_raw_redis
[ $MC = 1 ] && want raw_mooncake && scn_raw_mooncake
want mount && scn_mount redis "$BED_REDIS_URL"
[ $MC = 1 ] && want mount_mooncake && scn_mount mooncake mooncake
want serve && scn_serve redis "$BED_REDIS_URL"
[ $MC = 1 ] && want serve_mooncake && scn_serve mooncake mooncake
want serve2 && scn_serve2 redis "$BED_REDIS_URL"
[ $MC = 1 ] && want serve2_mooncake && scn_serve2 mooncake mooncake
want redis_kill && scn_redis_kill
want cutoff && scn_cutoff redis "$BED_REDIS_URL"
[ $MC = 1 ] && want mc_kill && scn_mc_kill
# after mc_kill, which re-imports fl: the cut-off ends by deleting it
[ $MC = 1 ] && want cutoff_mooncake && scn_cutoff mooncake mooncake
want latency && scn_latency
want latency_cluster && scn_detour redis "$BED_REDIS_URL"
[ $MC = 1 ] && want latency_mooncake && scn_detour mooncake mooncake
want redis_kill && rec "redis_failovers total=$(bed_redis_failovers) (one is the master kill)"
kill "$SAMPLER" 2>/dev/null
others=$(awk '/^load/ { n++; if ($2 > max) max = $2 }
	/^mem/ { if ($2 > mem) mem = $2 }
	/^proc/ { cpu[$2] += $3 }
	END { printf "samples=%d load_max=%s mem_used_max_gib=%s; CPU of other processes, mean over the samples:", n, max, mem
		k = 0; for (c in cpu) if (cpu[c] / n >= 0.5) { k++; printf " %s %.0f%%", c, cpu[c] / n }
		if (!k) printf " none above 5%%" }' "$T/others.txt")
# a partial run's end and what else ran go on a "rerun" line of their own
# (the merge keeps every rerun line; "end" and "others" are the whole run's)
if [ -n "${FLEET_ONLY:-}" ]; then
	rec rerun "of $FLEET_ONLY ended $(date -u "+%H:%M UTC"); load average at end: $(cut -d" " -f1-3 /proc/loadavg); others $others"
else
	rec "end load average: $(cut -d" " -f1-3 /proc/loadavg)"
	rec "others $others"
fi
if [ -n "${FLEET_ONLY:-}" ]; then
	awk -f "$ROOT/bench/fleet/merge.awk" "$OUT" "$RES" "$RES" > "$T/merged.txt" &&
		cat "$T/merged.txt" > "$RES"
fi
say "results in $RES"
# the page: docs/fleet/results.txt, and a section for each
# docs/fleet/results-*.txt (a run at another size, FLEET_RESULTS)
python3 "$ROOT/bench/fleet/report.py" "$ROOT/docs/fleet/results.txt" "$ROOT/docs"
