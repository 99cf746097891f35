#!/bin/sh
# fleet.sh - the CI-sized fleet suite: client nodes as network namespaces
# (tests/fleet/bed.sh) pulling one checkpoint from a Redis Cluster (3
# masters + 3 replicas) in a server namespace:
#  - FLEET_NODES (4) nodes pull the same checkpoint at once: every pull
#    exits 0 and every tree equals the source;
#  - a Redis master SIGKILLed while they pull: its replica takes over, each
#    pull either completes with the source's bytes or fails with one line,
#    and a re-run of every pull completes;
#  - a node cut off for 10 s mid-pull (its link down inside its namespace),
#    then back: the pull ends within a bound, with the source's bytes or
#    one line of error, and a plain delete (no --force, no --wait) then
#    succeeds: no lease is left behind;
#  - two wstore serve nodes (namespaces of their own) in front of the
#    cluster, Hub clients (curl) spread over both: the second is SIGKILLed
#    mid-download; the clients of the first complete, those of the killed
#    one fail with curl's error (or had every byte already), and each of
#    them, run again against the survivor, completes;
#  - 5 ms and connections cut at 10% per MiB between every node and the
#    cluster (the bed's detour through tests/fleet/proxy.py, the addresses
#    the cluster hands out included): every pull completes;
#  - with Mooncake installed, a master and 3 storage nodes in the server
#    namespace, replica_num 2: a storage node SIGKILLed while the nodes
#    pull, and every pull completes with the source's bytes (failed
#    transfers are retried until the master drops the dead node); a node
#    cut off for 10 s mid-pull, and its pull completes (failed master
#    RPCs are retried too); a run of CLI commands leaves no client
#    registered on the metadata server.
# Needs root, iproute2 and redis-server (and Mooncake for the last case);
# without them each case counts as skipped.  The full bed with measurements is bench/fleet/run.sh (make fleet).
#   BUILD=build sh tests/fleet/fleet.sh
TAP_SUITE=fleet
. "$(dirname "$0")/../lib/suite.sh"
BED_DIR="$T/bed"
mkdir -p "$BED_DIR"
. "$HERE/fleet/bed.sh"
suite_cleanup() { bed_down >/dev/null 2>&1; }
unset WSTORE_STORE

N=${FLEET_NODES:-4}
SIZE=${FLEET_MIB:-64}
why=""
[ "$(id -u)" = 0 ] || why="not root: cannot make network namespaces"
[ -z "$why" ] && ! command -v ip >/dev/null && why="iproute2 (ip) is not installed"
[ -z "$why" ] && ! command -v redis-server >/dev/null && why="redis-server is not installed"
if [ -z "$why" ]; then
	if ip netns add "$BED_TAG-probe" 2>/dev/null; then
		ip netns del "$BED_TAG-probe"
	else
		why="cannot make a network namespace here (ip netns add failed)"
	fi
fi
if [ -n "$why" ]; then
	for c in "concurrent pulls" "master kill" "node cut-off" "serve node kill" "detour" \
	    "mooncake node kill" "mooncake cut-off" "mooncake names"; do
		tap_skip "$c" "$why"
	done
	tap_done
	exit 0
fi

# (not through check: its subshell would lose what they set)
if bed_up "$N" && bed_redis_cluster; then
	tap_ok "bed: $N nodes, Redis Cluster (3 masters, 3 replicas) in the server namespace"
else
	tap_not_ok "bed: $N nodes, Redis Cluster (3 masters, 3 replicas) in the server namespace"
	tap_done
	exit 1
fi
k=1
while [ $k -le "$N" ]; do
	check "bed: node $k reaches the cluster" bed_reach $k "$BED_SRV_IP" 7001
	k=$((k + 1))
done
URL=$BED_REDIS_URL

python3 "$HERE/tools/mkckpt.py" "$T/src" --size $((SIZE << 20)) --shards 4 \
	--seed 25 >/dev/null
check_exit "import $SIZE MiB from node 1" 0 bed_node 1 "$W" --store "$URL" \
	model import --checkpoint-id fl --model-id Org/Fleet --source "$T/src" \
	--chunk-size 512KiB
check "replicas in sync after the import" bed_redis_synced

# same_tree DIR: DIR holds exactly the source's files with its bytes
same_tree() { diff -r "$T/src" "$1" >/dev/null 2>&1; }

# pull_all TAG [ENV...]: every node pulls fl into $T/TAG-K at once, in the
# background (pids in $pids, outputs in $T/TAG-K.out)
pull_all() {
	_tag=$1
	shift
	pids=""
	_k=1
	while [ $_k -le "$N" ]; do
		rm -rf "$T/$_tag-$_k"
		bed_node $_k env "$@" "$W" --store "${PULL_URL:-$URL}" model pull fl \
			--dest "$T/$_tag-$_k" --jobs 2 > "$T/$_tag-$_k.out" 2>&1 &
		pids="$pids $!"
		_k=$((_k + 1))
	done
}

# settled TAG: every pull of pull_all TAG either exited 0 with the source's
# tree or exited 1 with one line of error; the counts in $n_ok, $n_err
settled() {
	_k=1
	n_ok=0 n_err=0 _bad=""
	for _p in $pids; do
		wait_exit 180 "$_p"
		_rc=$?
		_lines=$(grep -c . "$T/$1-$_k.out")
		if [ $_rc = 0 ] && same_tree "$T/$1-$_k"; then
			n_ok=$((n_ok + 1))
		elif [ $_rc = 1 ] && [ "$_lines" = 1 ]; then
			n_err=$((n_err + 1))
			echo "#   node $_k: $(cat "$T/$1-$_k.out")"
		else
			_bad="$_bad node $_k: exit $_rc, $_lines lines: $(tail -2 "$T/$1-$_k.out" | tr '\n' ' ');"
		fi
		_k=$((_k + 1))
	done
	pids=""
	[ -z "$_bad" ] || { echo "#  $_bad"; return 1; }
}

# ---- N nodes pull at once ---------------------------------------------------
t0=$(date +%s%N)
pull_all cc
settled cc
rc=$?
t1=$(date +%s%N)
check "$N concurrent pulls: each completes or fails with one line" test $rc = 0
check "$N concurrent pulls: all complete with the source's bytes ($n_ok of $N)" \
	test "$n_ok" = "$N"
awk -v n="$N" -v m="$SIZE" -v ns=$((t1 - t0)) 'BEGIN {
	printf "# %d x %d MiB pulled in %.2f s: %.1f MiB/s aggregate\n", n, m,
		ns / 1e9, n * m / (ns / 1e9) }'

# ---- a master killed mid-pull ------------------------------------------------
# each call is slowed by 40 ms (the fault wrapper), so that the pulls run
# for seconds and the kill lands while they read
PULL_URL="fault+$URL"
pull_all mk WSTORE_FAULTS=delay=40
check "master kill: the pulls started" wait_for 60 test -d "$T/mk-1"
victim=$(bed_redis_masters | head -1)
running=0
for p in $pids; do kill -0 "$p" 2>/dev/null && running=$((running + 1)); done
bed_kill "redis-$victim"
check "master kill: pulls still running at the kill ($running)" test $running -gt 0
settled mk
rc=$?
check "master kill: each pull completes or fails with one line ($n_ok ok, $n_err errors)" \
	test $rc = 0
check "master kill: a replica takes over (cluster_state ok)" bed_redis_ok
PULL_URL=""
pull_all rr
settled rr
check "master kill: a re-run of every pull completes ($n_ok of $N)" test "$n_ok" = "$N"

# ---- a node cut off for 10 s mid-pull ----------------------------------------
rm -rf "$T/cut"
bed_node 1 env WSTORE_FAULTS=delay=40 "$W" --store "fault+$URL" model pull fl \
	--dest "$T/cut" --jobs 2 > "$T/cut.out" 2>&1 &
cp=$!
check "cut-off: the pull started" wait_for 60 test -d "$T/cut"
check "cut-off: node 1's link goes down" bed_cut 1
check "cut-off: node 1 cannot reach the cluster meanwhile" \
	sh -c "! ip netns exec $(bed_ns 1) timeout 3 redis-cli -h $BED_SRV_IP -p 7001 ping"
sleep 10 # the cut itself: 10 s, as the scenario says
check "cut-off: node 1's link comes back" bed_mend 1
t0=$(date +%s)
wait_exit 120 $cp
rc=$?
secs=$(($(date +%s) - t0))
lines=$(grep -c . "$T/cut.out")
echo "#   cut-off pull: exit $rc after a further $secs s: $(tail -1 "$T/cut.out")"
check "cut-off: the pull ends within 120 s of the link's return" test $rc != 124
if [ $rc = 0 ]; then
	check "cut-off: the pull completed with the source's bytes" same_tree "$T/cut"
else
	check "cut-off: the pull failed with exit 1 and one line ($rc, $lines lines)" \
		test $rc = 1 -a "$lines" = 1
fi
check_exit "cut-off: a plain delete from node 2 succeeds (no lease left)" 0 \
	bed_node 2 timeout 60 "$W" --store "$URL" model delete fl
check_exit "cut-off: the checkpoint is gone" 1 bed_node 2 "$W" --store "$URL" \
	model inspect fl

# ---- two serve nodes, one SIGKILLed mid-download ------------------------------
# (a function: the case is skipped as a whole without curl)
serve_kill_case() {
	python3 "$HERE/tools/mkckpt.py" "$T/ssrc" --size $((8 << 20)) --shards 2 \
		--seed 26 >/dev/null
	check_exit "serve: import an 8 MiB checkpoint" 0 bed_node 1 "$W" --store "$URL" \
		model import --checkpoint-id sv --model-id Org/Serve --source "$T/ssrc"
	two_hosts() { bed_host sv1 10.77.0.3 && bed_host sv2 10.77.0.4; }
	check "serve: two namespaces on the bridge" two_hosts
	for s in 1 2; do
		bed_spawn "sv$s" "$BED_TAG-sv$s" "$W" --store "$URL" serve --listen "10.77.0.$((s + 2)):8088"
		check "serve: node $s answers" bed_reach 1 "10.77.0.$((s + 2))" 8088
	done
	files=$(cd "$T/ssrc" && find . -type f | sed 's|^\./||' | sort)
	# hub_client TAG SERVE_IP K: node K fetches every file of sv at 2 MiB/s
	# (so that the kill lands mid-download) and compares them with the
	# source; exit: curl's status, 99 for other bytes
	hub_client() {
		# shellcheck disable=SC2086 # files: one word each
		bed_node "$3" sh -c '
			d=$1; base=$2; src=$3; shift 3
			for f in "$@"; do
				mkdir -p "$d/$(dirname "$f")"
				curl -sSfL --limit-rate 2M -o "$d/$f" "$base/$f" || exit $?
			done
			diff -r "$src" "$d" >/dev/null || exit 99' sh "$T/$1" \
			"http://$2:8088/Org/Serve/resolve/main" "$T/ssrc" $files \
			> "$T/$1.out" 2>&1
	}
	spids="" kpids=""
	k=1
	while [ $k -le "$N" ]; do
		rm -rf "$T/hs-$k" "$T/hk-$k"
		hub_client "hs-$k" 10.77.0.3 $k &
		spids="$spids $!"
		hub_client "hk-$k" 10.77.0.4 $k &
		kpids="$kpids $!"
		k=$((k + 1))
	done
	# every client of the node to be killed is receiving a shard
	begun() {
		_k=1
		while [ $_k -le "$N" ]; do
			[ -n "$(find "$T/hk-$_k" -name '*.safetensors' -size +64k 2>/dev/null)" ] || return 1
			_k=$((_k + 1))
		done
	}
	check "serve node kill: the downloads began" wait_for 60 begun
	bed_kill sv2
	n_ok=0
	for p in $spids; do wait_exit 120 "$p" && n_ok=$((n_ok + 1)); done
	check "serve node kill: every client of the survivor completes ($n_ok of $N)" \
		test "$n_ok" = "$N"
	n_fail=0 n_whole=0 bad="" k=1
	for p in $kpids; do
		wait_exit 60 "$p"
		rc=$?
		case $rc in
		0) n_whole=$((n_whole + 1)) ;;
		99 | 124) bad="$bad node $k: exit $rc;" ;;
		*) n_fail=$((n_fail + 1)); echo "#   killed node's client $k: curl exit $rc: $(tail -1 "$T/hk-$k.out")" ;;
		esac
		k=$((k + 1))
	done
	check "serve node kill: the killed node's clients fail with curl's error, none hangs or passes other bytes ($n_fail failed, $n_whole whole)${bad:+:$bad}" \
		test -z "$bad" -a $n_fail -gt 0
	n_ok=0 k=1
	while [ $k -le "$N" ]; do
		rm -rf "$T/hr-$k"
		hub_client "hr-$k" 10.77.0.3 $k && n_ok=$((n_ok + 1))
		k=$((k + 1))
	done
	check "serve node kill: the clients run again against the survivor complete ($n_ok of $N)" \
		test "$n_ok" = "$N"
	bed_kill sv1
}
if command -v curl >/dev/null; then
	serve_kill_case
else
	tap_skip "serve node kill" "curl is not installed"
fi

# ---- 5 ms and cut connections on the cluster, every node detoured --------------
# (bed.sh's detour: the namespace px holds the server address too, and
# tests/fleet/proxy.py there carries every connection of a detoured node
# to the cluster, the node addresses CLUSTER SLOTS hands out included;
# cuts at 10% per MiB forwarded, ten times the scenario of make fleet)
check_exit "detour: import $SIZE MiB again" 0 bed_node 1 "$W" --store "$URL" \
	model import --checkpoint-id fl --model-id Org/Fleet --source "$T/src" \
	--chunk-size 512KiB
check "detour: the namespace px holds the server address" bed_detour_up
ports=$(bed_srv_ports | paste -sd, -)
bed_spawn px "$BED_TAG-px" env PROXY_TARGET_NETNS="/run/netns/$BED_SRV" \
	python3 "$HERE/fleet/proxy.py" "$BED_SRV_IP" "$ports" "$BED_SRV_IP" = 5 0.1 chunk
check "detour: the proxy listens on the cluster's ports ($ports)" \
	wait_for 30 grep -q listening "$BED_DIR/px.log"
k=1
while [ $k -le "$N" ]; do bed_detour $k; k=$((k + 1)); done
pull_all dt
settled dt
rc=$?
k=1
while [ $k -le "$N" ]; do bed_direct $k; k=$((k + 1)); done
kill -TERM "$(cat "$BED_DIR/px.pid")"
wait_exit 10 "$(cat "$BED_DIR/px.pid")" >/dev/null 2>&1
echo "#   proxy: $(tail -1 "$BED_DIR/px.log")"
check "detour: each pull completes or fails with one line" test $rc = 0
check "detour: every pull completes through the cutting proxy ($n_ok of $N)" \
	test "$n_ok" = "$N"
check "detour: the proxy carried the pulls' connections" \
	sh -c "tail -1 '$BED_DIR/px.log' | grep -Eq 'connections [1-9]'"

# ---- a Mooncake storage node killed mid-pull, replica_num 2 -------------------
# every command with replica_num 2: a pull's lease object needs the second
# replica as much as the chunks do
mc() { _mk=$1; shift; bed_mc "$_mk" env WSTORE_REPLICA_NUM=2 "$@"; }

# node 1 cut off for 10 s mid-pull: its master RPCs fail or time out
# (-900, -901) and its transfers fail (-800) while the link is down; both
# are retried for up to WSTORE_MOONCAKE_TRANSFER_WAIT_MS (30 s), so the
# pull completes (before master RPCs were retried it failed with one line,
# "rpc to mooncake master ... timed out")
mc_cut_case() {
	rm -rf "$T/mcut"
	mc 1 env WSTORE_FAULTS=delay=40 "$W" --store fault+mooncake model pull fl \
		--dest "$T/mcut" --jobs 2 > "$T/mcut.out" 2>&1 &
	_cp=$!
	check "mooncake cut-off: the pull started" wait_for 60 test -d "$T/mcut"
	check "mooncake cut-off: node 1's link goes down" bed_cut 1
	_running=0
	kill -0 $_cp 2>/dev/null && _running=1
	sleep 10 # the cut itself: 10 s
	check "mooncake cut-off: node 1's link comes back" bed_mend 1
	wait_exit 120 $_cp
	_rc=$?
	echo "#   mooncake cut-off pull: exit $_rc: $(tail -1 "$T/mcut.out")"
	check "mooncake cut-off: the pull was running when the link went down" \
		test $_running = 1
	check "mooncake cut-off: the pull across a 10 s cut completes ($_rc)" test $_rc = 0
	check "mooncake cut-off: with the source's bytes" same_tree "$T/mcut"
}

# a run of CLI commands leaves no client registered on the metadata
# server: each command's client name (HOST:PORT, from Mooncake's log with
# --verbose) is asked for once the command has exited (404: gone)
mc_names_case() {
	_stale=0 _names=""
	for _i in 1 2 3 4; do
		mc 2 "$W" --verbose --store mooncake model list > "$T/mcn$_i.out" 2>&1
		_n=$(sed -n 's/.*parseHostNameWithPort. server_name: \([^ ]*\) port: \([0-9]*\).*/\1%3A\2/p' \
			"$T/mcn$_i.out" | head -1)
		_names="$_names $_n"
		_code=$(bed_node 2 curl -s -o /dev/null -w '%{http_code}' \
			"$BED_MC_META?key=mooncake%2Frpc_meta%2F$_n")
		[ -n "$_n" ] && [ "$_code" = 404 ] || _stale=$((_stale + 1))
	done
	check "mooncake: 4 CLI commands leave no client registered (${_names# }; stale $_stale)" \
		test $_stale = 0
}
if ! bed_mc_installed; then
	for c in "mooncake node kill" "mooncake cut-off" "mooncake names"; do
		tap_skip "$c" "Mooncake is not installed in $BED_MC_HOME"
	done
elif BED_MC_SEGMENT="256 MB" bed_mooncake; then
	tap_ok "mooncake: a master and 3 storage nodes in the server namespace"
	check_exit "mooncake: import $SIZE MiB, replica_num 2" 0 mc 1 "$W" \
		--store mooncake model import --checkpoint-id fl --model-id Org/Fleet \
		--source "$T/src" --chunk-size 512KiB
	pids=""
	k=1
	while [ $k -le "$N" ]; do
		rm -rf "$T/mck-$k"
		# a pull holding the lease record's lock when the node dies
		# retries its write until the master drops the node (about
		# 10 s here): the others wait for the lock longer than that
		# by default on Mooncake (the transfer retry and 5 s more; a
		# 10 s wait gave up first in one run of 3)
		mc $k env WSTORE_FAULTS=delay=40 "$W" --store fault+mooncake \
			model pull fl --dest "$T/mck-$k" --jobs 2 > "$T/mck-$k.out" 2>&1 &
		pids="$pids $!"
		k=$((k + 1))
	done
	check "mooncake node kill: the pulls started" wait_for 60 test -d "$T/mck-1"
	running=0
	for p in $pids; do kill -0 "$p" 2>/dev/null && running=$((running + 1)); done
	bed_kill mc-node1
	check "mooncake node kill: pulls still running at the kill ($running)" \
		test $running -gt 0
	settled mck
	rc=$?
	check "mooncake node kill: each pull completes or fails with one line" test $rc = 0
	check "mooncake node kill: every pull completes with the source's bytes ($n_ok of $N)" \
		test "$n_ok" = "$N"
	mc_cut_case
	mc_names_case
else
	tap_not_ok "mooncake: a master and 3 storage nodes in the server namespace"
fi

tap_done
