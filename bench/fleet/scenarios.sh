# bench/fleet/scenarios.sh - the scenarios of bench/fleet/run.sh (sourced
# by it: uses its helpers on, fleet_pull, rec, and the bed's functions).
# Each writes its figures or verdict as one line of results.

# scn_concurrent STORE PSTORE: import fl (replica_num 2 on Mooncake), then
# one node pulls alone and all N pull at once
scn_concurrent() {
	STORE=$1 PSTORE=$2
	say "== $STORE: import $MIB MiB, 1 then $N nodes pull"
	if ! on 1 "$W" --store "$PSTORE" model import --checkpoint-id fl \
	    --model-id Org/Fleet --source "$T/src" > "$T/imp.out" 2>&1; then
		# once more, after the store is whole again; the first error
		# is kept in the results
		rec "import_$STORE failed once: $(tail -1 "$T/imp.out"); failovers so far: $(bed_redis_failovers)"
		[ "$STORE" = redis ] && bed_redis_ok
		on 1 "$W" --store "$PSTORE" model delete --force --missing-ok fl >&2
		on 1 "$W" --store "$PSTORE" model import --checkpoint-id fl \
			--model-id Org/Fleet --source "$T/src" >&2 || {
			rec "pull_$STORE import=failed"; return; }
	fi
	[ "$STORE" = redis ] && bed_redis_synced
	local save=$N
	N=1 fleet_pull one
	N=$save
	rec "pull_$STORE nodes=1 ok=$ok err=$err bad=$bad mibs=$(mibs "$SRC_BYTES" "$ns")"
	fleet_pull cc
	rec "pull_$STORE nodes=$N ok=$ok err=$err bad=$bad mibs=$(mibs $((N * SRC_BYTES)) "$ns")"
	scn_floors
}

# scn_floors: the floors of the pulls of fl (bench/floor.c), each beside
# the pulls it is the floor of, in the same run: every node at once GETs
# the checkpoint's chunks with the engine's raw client, hashes them
# (SHA-256, unless --no-verify's floor), pwrites them into files under
# its own directory and fsyncs them; then the --no-verify pulls and their
# floor.  Recorded as floor_STORE verify=1|0 and pull_STORE_noverify.
scn_floors() {
	if ! cc -O2 -pthread -o "$T/floor" "$ROOT/bench/floor.c" \
	    "$ROOT/bench/mc_client.c" -ldl -lcrypto -lhiredis; then
		rec "floor_$STORE build=failed"
		return
	fi
	on 1 "$W" --store "$PSTORE" --json model inspect fl |
		python3 "$ROOT/bench/fleet/plan.py" > "$T/plan.txt"
	fleet_floor fv 1
	rec "floor_$STORE verify=1 nodes=$N ok=$fok threads=$FLOOR_THREADS mibs=$(mibs $((N * SRC_BYTES)) "$ns")"
	PULL_ARGS=--no-verify fleet_pull nv
	rec "pull_${STORE}_noverify nodes=$N ok=$ok err=$err bad=$bad mibs=$(mibs $((N * SRC_BYTES)) "$ns")"
	fleet_floor fn 0
	rec "floor_$STORE verify=0 nodes=$N ok=$fok threads=$FLOOR_THREADS mibs=$(mibs $((N * SRC_BYTES)) "$ns")"
}

# fleet_floor TAG VERIFY: bench/floor.c on every node at once, with
# $T/plan.txt, into $T/TAG-K; fok counts the floors that exited 0 with
# the source's tree, ns the wall time (as fleet_pull's: from the first
# start to the last exit)
FLOOR_THREADS=${FLEET_FLOOR_THREADS:-$(nproc)}
fleet_floor() {
	local tag=$1 v=$2 pids="" k p rcs="" rc
	local L=$BED_MC_HOME/lib/libmooncake_store.so
	for ((k = 1; k <= N; k++)); do rm -rf "$T/$tag-$k"; mkdir -p "$T/$tag-$k"; done
	_t0=$(now_ns)
	for ((k = 1; k <= N; k++)); do
		if [ "$STORE" = mooncake ]; then
			bed_mc $k "$T/floor" mooncake "$L" "$BED_MC_MASTER" "$BED_MC_META" \
				"$(bed_ip $k)" "$FLOOR_THREADS" "$T/$tag-$k" "$v" \
				< "$T/plan.txt" > "$T/$tag-$k.out" 2>&1 &
		else
			bed_node $k "$T/floor" redis "$BED_SRV_IP" 7001 "$FLOOR_THREADS" \
				"$T/$tag-$k" "$v" < "$T/plan.txt" > "$T/$tag-$k.out" 2>&1 &
		fi
		pids="$pids $!"
	done
	for p in $pids; do timeout_wait 600 "$p"; rcs="$rcs $?"; done
	ns=$(($(now_ns) - _t0))
	fok=0 k=1
	for rc in $rcs; do
		if [ "$rc" = 0 ] && diff -r "$T/src" "$T/$tag-$k" > /dev/null 2>&1; then
			fok=$((fok + 1))
		else
			say "floor node $k: exit $rc: $(grep -v '^[IWE][0-9]' "$T/$tag-$k.out" | tail -2)"
		fi
		rm -rf "$T/$tag-$k"
		k=$((k + 1))
	done
}

# scn_raw_redis: redis_raw (bench/redis_raw.c: SET then GET of 64 MiB
# values) from every node at once, each on a hash tag of its own, sent to
# the master that owns it; the sum of the GET rates
scn_raw_redis() {
	say "== redis: raw GET from $N nodes"
	cc -O2 -o "$T/redis_raw" "$ROOT/bench/redis_raw.c" -lhiredis || return
	local count=$(((RAW_MIB + 63) / 64)) pids="" k p port
	for ((k = 1; k <= N; k++)); do
		bed_rcli 7001 -c set "{n$k}probe" x > /dev/null
		port=""
		for p in $(bed_redis_masters); do
			[ "$(bed_rcli "$p" exists "{n$k}probe" 2>/dev/null)" = 1 ] && port=$p
		done
		bed_node $k "$T/redis_raw" "$BED_SRV_IP" "$port" - 64 $count "{n$k}" \
			> "$T/raw-$k.out" 2>&1 &
		pids="$pids $!"
	done
	for p in $pids; do timeout_wait 600 "$p"; done
	local sum
	sum=$(cat "$T"/raw-*.out | awk '/GET/ { for (i = 1; i <= NF; i++)
		if ($i == "GET") s += $(i + 1) } END { printf "%.1f", s * 1e9 / 1048576 }')
	rec "raw_redis nodes=$N values=${count}x64MiB get_sum_mibs=$sum"
	rm -f "$T"/raw-*.out
}

# scn_raw_mooncake: tests/fleet/mc_replica.c from every node at once, each
# with its own address as Mooncake's local_hostname: put_from 64 MiB
# registered buffers (replica_num 2), then get_into them back; the sum of
# the get_into rates (get_into timed alone)
scn_raw_mooncake() {
	say "== mooncake: raw get_into from $N nodes"
	cc -O2 -I"$ROOT/bench" -o "$T/mc_replica" "$ROOT/tests/fleet/mc_replica.c" "$ROOT/bench/mc_client.c" -ldl || return
	local count=$(((RAW_MIB + 63) / 64)) pids="" k p op
	local L=$BED_MC_HOME/lib/libmooncake_store.so
	for op in put get; do
		pids=""
		for ((k = 1; k <= N; k++)); do
			bed_mc $k "$T/mc_replica" "$L" "$BED_MC_MASTER" "$BED_MC_META" \
				"$(bed_ip $k)" $op "raw$k/" $count 64 \
				$([ $op = put ] && echo 2 || echo 0) \
				> "$T/mraw-$op-$k.out" 2>/dev/null &
			pids="$pids $!"
		done
		for p in $pids; do timeout_wait 600 "$p"; done
	done
	local sum nok
	sum=$(cat "$T"/mraw-get-*.out | awk '/get_into/ { for (i = 1; i <= NF; i++)
		if ($i == "get_into") s += $(i + 1) } END { printf "%.1f", s }')
	nok=$(grep -l "failed=0" "$T"/mraw-get-*.out | wc -l)
	rec "raw_mooncake nodes=$N ran=$nok values=${count}x64MiB get_sum_mibs=$sum"
	rm -f "$T"/mraw-*.out
}

# scn_mount STORE PSTORE: every node mounts the store (in its own mount
# namespace: ip netns exec makes one) and reads every file of fl, checked
# by SHA-256; recorded as mount (Redis) or mount_mooncake
scn_mount() {
	STORE=$1 PSTORE=$2
	say "== mount on $STORE: $N nodes mount and read at once"
	local pids="" k p ok=0 t0 name=mount
	[ "$STORE" = mooncake ] && name=mount_mooncake
	t0=$(now_ns)
	for ((k = 1; k <= N; k++)); do
		mkdir -p "$T/mnt-$k"
		on $k sh -c '
			"$1" --store "$2" mount "$3" --checkpoint fl || exit 2
			cd "$3" && sha256sum -c --quiet "$4"; rc=$?
			cd / && "$1" umount "$3"; exit $rc' sh "$W" "$PSTORE" \
			"$T/mnt-$k" "$T/src.sums" > "$T/mnt-$k.out" 2>&1 &
		pids="$pids $!"
	done
	k=1
	for p in $pids; do
		timeout_wait 600 "$p" && ok=$((ok + 1)) ||
			say "mount node $k: $(tail -2 "$T/mnt-$k.out")"
		k=$((k + 1))
	done
	rec "$name nodes=$N ok=$ok mibs=$(mibs $((N * SRC_BYTES)) $(($(now_ns) - t0)))"
}

# serve_env STORE IP: the settings wstore serve needs at IP for STORE
# (Mooncake's client in the serve node's namespace: its own address there)
serve_env() {
	[ "$1" = mooncake ] || return 0
	echo "WSTORE_MOONCAKE_LIBRARY=$BED_MC_HOME/lib/libmooncake_store.so
		WSTORE_MASTER_SERVER_ADDR=$BED_MC_MASTER WSTORE_METADATA_SERVER=$BED_MC_META
		WSTORE_PROTOCOL=tcp WSTORE_LOCAL_HOSTNAME=$2
		MC_TCP_BIND_ADDRESS=$2 WSTORE_REPLICA_NUM=$MC_REPLICAS"
}

# serve_up NAME NS IP: wstore serve on IP:8088 in namespace NS (a full
# name) in front of $PSTORE, logged as NAME; waits for its "listening"
# line (60 s at most: a connect from a node made while it was still
# starting up was seen to stall for 10 s) and for node 1 to reach it
serve_up() {
	local i
	# shellcheck disable=SC2046 # serve_env: NAME=VALUE words
	bed_spawn "$1" "$2" env $(serve_env "$STORE" "$3") "$W" --store "$PSTORE" \
		serve --listen "$3:8088"
	for ((i = 0; i < 600; i++)); do
		grep -q listening "$BED_DIR/$1.log" 2>/dev/null && break
		sleep 0.1
	done
	bed_reach 1 "$3" 8088
}

# serve_import: the checkpoint sv (the Hub clients' model Org/Serve)
serve_import() {
	on 1 "$W" --store "$PSTORE" model delete --force --missing-ok sv >&2
	on 1 "$W" --store "$PSTORE" model import --checkpoint-id sv \
		--model-id Org/Serve --source "$T/ssrc" >&2
}

# hub_start TAG COUNT [CURL_OPTION...] -- SERVER...: COUNT Hub clients
# (curl on /{repo}/resolve/{rev}/{path}, every file of sv, then compared
# with the source), client c on node (c-1)%N+1 and on the SERVER
# (c-1)%(number of servers); their pids in HUB_PIDS, their servers in
# HUB_SRV.  A client exits with curl's status on a failed fetch, 99 when
# the bytes differ.  hub_wait TAG: waits for them (600 s at most each);
# HUB_RC holds their exit statuses
hub_start() {
	local tag=$1 count=$2 c k files opts=() srvs
	shift 2
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	srvs=("$@")
	files=$(cd "$T/ssrc" && find . -type f | sed 's|^\./||' | sort)
	HUB_PIDS=() HUB_SRV=()
	for ((c = 1; c <= count; c++)); do
		k=$(((c - 1) % N + 1))
		local srv=${srvs[$(((c - 1) % ${#srvs[@]}))]}
		rm -rf "$T/$tag-$c"
		# shellcheck disable=SC2086 # files: one word each
		bed_node $k sh -c '
			d=$1; base=$2; src=$3; shift 3
			opts=""; while [ "$1" != -- ]; do opts="$opts $1"; shift; done; shift
			for f in "$@"; do
				mkdir -p "$d/$(dirname "$f")"
				curl -sSfL $opts -o "$d/$f" "$base/$f" || exit $?
			done
			diff -r "$src" "$d" >/dev/null || exit 99' sh "$T/$tag-$c" \
			"http://$srv:8088/Org/Serve/resolve/main" "$T/ssrc" \
			"${opts[@]}" -- $files > "$T/$tag-$c.out" 2>&1 &
		HUB_PIDS+=($!) HUB_SRV+=("$srv")
	done
}
hub_wait() {
	local p
	HUB_RC=()
	for p in "${HUB_PIDS[@]}"; do timeout_wait 600 "$p"; HUB_RC+=($?); done
}

# scn_serve STORE PSTORE: wstore serve in the server namespace in front of
# the Redis Cluster or Mooncake; 32 Hub clients (curl, 4 per node) fetch
# every file of a second checkpoint, each checked against the source.
# Recorded as serve (Redis) or serve_mooncake.
scn_serve() {
	STORE=$1 PSTORE=$2
	say "== serve on $STORE: 32 Hub clients"
	local name=serve rc ok=0 t0 bytes
	[ "$STORE" = mooncake ] && name=serve_mooncake
	serve_import || { rec "$name import=failed"; return; }
	serve_up serve "$BED_SRV" "$BED_SRV_IP" || { rec "$name start=failed"; bed_kill serve; return; }
	bytes=$(du -sb "$T/ssrc" | cut -f1)
	t0=$(now_ns)
	hub_start hub 32 -- "$BED_SRV_IP"
	hub_wait
	for rc in "${HUB_RC[@]}"; do [ "$rc" = 0 ] && ok=$((ok + 1)); done
	rec "$name clients=32 ok=$ok mibs=$(mibs $((32 * bytes)) $(($(now_ns) - t0)))"
	rm -rf "$T"/hub-*
	bed_kill serve
	serve_floor "$name"
}

# serve_floor NAME: the floor of serve, in the same place (the server
# namespace, port 8088): bench/floor.c's serve mode, which answers each
# Hub request by reading the file's chunks with the engine's raw client
# and sending them (no hash, no shared reads); the same 32 clients.
# Recorded as NAME_floor.
serve_floor() {
	local rc ok=0 t0 bytes i
	bytes=$(du -sb "$T/ssrc" | cut -f1)
	if ! cc -O2 -pthread -o "$T/floor" "$ROOT/bench/floor.c" \
	    "$ROOT/bench/mc_client.c" -ldl -lcrypto -lhiredis; then
		rec "${1}_floor build=failed"
		return
	fi
	on 1 "$W" --store "$PSTORE" --json model inspect sv |
		python3 "$ROOT/bench/fleet/plan.py" > "$T/splan.txt"
	if [ "$STORE" = mooncake ]; then
		# shellcheck disable=SC2046 # serve_env: NAME=VALUE words
		bed_spawn sfloor "$BED_SRV" env $(serve_env "$STORE" "$BED_SRV_IP") \
			SPLAN="$T/splan.txt" sh -c 'exec "$0" serve-mooncake "$@" < "$SPLAN"' "$T/floor" \
			"$BED_MC_HOME/lib/libmooncake_store.so" "$BED_MC_MASTER" \
			"$BED_MC_META" "$BED_SRV_IP" "$BED_SRV_IP" 8088
	else
		bed_spawn sfloor "$BED_SRV" env SPLAN="$T/splan.txt" \
			sh -c 'exec "$0" serve-redis "$@" < "$SPLAN"' \
			"$T/floor" "$BED_SRV_IP" 7001 "$BED_SRV_IP" 8088
	fi
	for ((i = 0; i < 600; i++)); do
		grep -q listening "$BED_DIR/sfloor.log" 2>/dev/null && break
		sleep 0.1
	done
	bed_reach 1 "$BED_SRV_IP" 8088 || { rec "${1}_floor start=failed"; bed_kill sfloor; return; }
	t0=$(now_ns)
	hub_start hub 32 -- "$BED_SRV_IP"
	hub_wait
	for rc in "${HUB_RC[@]}"; do [ "$rc" = 0 ] && ok=$((ok + 1)); done
	rec "${1}_floor clients=32 ok=$ok mibs=$(mibs $((32 * bytes)) $(($(now_ns) - t0)))"
	rm -rf "$T"/hub-*
	bed_kill sfloor
}

# scn_serve2 STORE PSTORE: two wstore serve nodes, each in a namespace of
# its own (10.77.0.3 and .4 on the bridge), in front of the same store.
# 32 Hub clients on the first alone, then 16 on each (the same run, the
# same checkpoint); then 32 clients again, spread over both and slowed
# to 4 MiB/s each (curl --limit-rate) so that the downloads are under
# way when the second serve node is SIGKILLed: the clients of the first
# must complete, those of the killed one must fail (curl's exit status,
# no hang, no wrong bytes passed as whole), and each of those, run again
# against the survivor, must complete.  Recorded as serve2 (Redis) or
# serve2_mooncake.
SV1_IP=10.77.0.3 SV2_IP=10.77.0.4
scn_serve2() {
	STORE=$1 PSTORE=$2
	say "== two serve nodes on $STORE"
	local name=serve2 rc ok c t0 bytes i
	[ "$STORE" = mooncake ] && name=serve2_mooncake
	if ! ip netns list | awk '{ print $1 }' | grep -qx "$BED_TAG-sv1"; then
		bed_host sv1 $SV1_IP && bed_host sv2 $SV2_IP ||
			{ rec "$name bed=failed"; return; }
	fi
	serve_import || { rec "$name import=failed"; return; }
	serve_up sv1 "$BED_TAG-sv1" $SV1_IP && serve_up sv2 "$BED_TAG-sv2" $SV2_IP ||
		{ rec "$name start=failed"; bed_kill sv1; bed_kill sv2; return; }
	bytes=$(du -sb "$T/ssrc" | cut -f1)
	local servers
	for servers in "$SV1_IP" "$SV1_IP $SV2_IP"; do
		ok=0
		t0=$(now_ns)
		# shellcheck disable=SC2086 # servers: one word each
		hub_start hub 32 -- $servers
		hub_wait
		for rc in "${HUB_RC[@]}"; do [ "$rc" = 0 ] && ok=$((ok + 1)); done
		set -- $servers
		rec "$name serve_nodes=$# clients=32 ok=$ok mibs=$(mibs $((32 * bytes)) $(($(now_ns) - t0)))"
	done
	say "== two serve nodes on $STORE: the second killed mid-download"
	hub_start hk 32 --limit-rate 4M -- $SV1_IP $SV2_IP
	# every client of the node to be killed receiving a shard (64 KiB of
	# one), or one of them done: then the kill
	for ((i = 0; i < 600; i++)); do
		local begun=0 done_=0
		for ((c = 2; c <= 32; c += 2)); do
			kill -0 "${HUB_PIDS[$((c - 1))]}" 2>/dev/null || done_=1
			[ -n "$(find "$T/hk-$c" -name '*.safetensors' -size +64k 2>/dev/null | head -1)" ] &&
				begun=$((begun + 1))
		done
		[ $begun = 16 ] || [ $done_ = 1 ] && break
		sleep 0.1
	done
	local running=0 p
	for p in "${HUB_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && running=$((running + 1)); done
	bed_kill sv2
	local t_kill
	t_kill=$(now_ns)
	hub_wait
	local s_ok=0 s_n=0 k_ok=0 k_fail=0 k_n=0 bad=0 codes="" redo=()
	for ((c = 1; c <= 32; c++)); do
		rc=${HUB_RC[$((c - 1))]}
		if [ "${HUB_SRV[$((c - 1))]}" = $SV1_IP ]; then
			s_n=$((s_n + 1))
			[ "$rc" = 0 ] && s_ok=$((s_ok + 1)) || say "survivor's client $c: exit $rc: $(tail -1 "$T/hk-$c.out")"
		else
			k_n=$((k_n + 1))
			case $rc in
			# whole: the rest of its last file was already in
			# the kernel's socket buffers when the server died
			0) k_ok=$((k_ok + 1)) ;;
			99 | 124) bad=$((bad + 1)); say "killed node's client $c: exit $rc" ;;
			*) k_fail=$((k_fail + 1)) codes="$codes $rc"; redo+=("$c") ;;
			esac
		fi
	done
	local secs
	secs=$(awk -v ns=$(($(now_ns) - t_kill)) 'BEGIN { printf "%.1f", ns / 1e9 }')
	codes=$(echo "$codes" | tr ' ' '\n' | grep . | sort -n | uniq -c |
		awk '{ printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1 }')
	# the failed ones again, against the survivor
	local r_ok=0
	if [ ${#redo[@]} -gt 0 ]; then
		hub_start hr ${#redo[@]} -- $SV1_IP
		hub_wait
		for rc in "${HUB_RC[@]}"; do [ "$rc" = 0 ] && r_ok=$((r_ok + 1)); done
	fi
	rec "${name}_kill clients=32 running_at_kill=$running survivor: ok=$s_ok of $s_n; killed node: failed=$k_fail of $k_n (curl exit ${codes:-none}), complete=$k_ok, bad=$bad, all ended ${secs} s after the kill; retry on the survivor: ok=$r_ok of ${#redo[@]}"
	rm -rf "$T"/hub-* "$T"/hk-* "$T"/hr-*
	bed_kill sv1
}

# scn_redis_kill: a Redis master SIGKILLed while N nodes pull (slowed by
# 20 ms per call); then a re-run
scn_redis_kill() {
	STORE=redis PSTORE="fault+$BED_REDIS_URL"
	say "== redis: a master killed mid-pull"
	local victim _pids="" k
	_t0=$(now_ns)
	for ((k = 1; k <= N; k++)); do
		on $k env WSTORE_FAULTS=delay=20 "$W" --store "$PSTORE" model pull fl \
			--dest "$T/mk-$k" > "$T/mk-$k.out" 2>&1 &
		_pids="$_pids $!"
	done
	started "$T/mk-1"
	victim=$(bed_redis_masters | head -1)
	bed_kill "redis-$victim"
	local t_kill=$(now_ns)
	fleet_settle mk $_pids
	local first="ok=$ok err=$err bad=$bad"
	bed_redis_ok && local took=$(( ($(now_ns) - t_kill) / 1000000 ))
	PSTORE=$BED_REDIS_URL
	fleet_pull rr
	rec "redis_kill nodes=$N during: $first; rerun: ok=$ok err=$err bad=$bad; cluster_ok_after_ms=${took:-never}"
	bed_redis_start_port "$victim"
}

# scn_cutoff STORE PSTORE: node 1's link down for 10 s mid-pull; then a
# plain delete from node 2; recorded as cutoff (Redis) or cutoff_mooncake
scn_cutoff() {
	STORE=$1 PSTORE=$2
	say "== cut-off on $STORE: node 1 down 10 s mid-pull"
	rm -rf "$T/cut"
	on 1 env WSTORE_FAULTS=delay=20 "$W" --store "fault+$PSTORE" \
		model pull fl --dest "$T/cut" > "$T/cut.out" 2>&1 &
	local p=$! rc t0 v name=cutoff
	[ "$STORE" = mooncake ] && name=cutoff_mooncake
	started "$T/cut"
	bed_cut 1
	sleep 10
	bed_mend 1
	t0=$(now_ns)
	timeout_wait 300 $p; rc=$?
	if [ $rc = 0 ] && diff -r "$T/src" "$T/cut" >/dev/null; then v=complete
	elif [ $rc = 1 ]; then v="error: $(head -1 "$T/cut.out")"
	else v="exit $rc"; fi
	local after=$(( ($(now_ns) - t0) / 1000000 ))
	on 2 timeout 60 "$W" --store "$PSTORE" model delete fl >&2
	rec "$name pull=$v ms_after_return=$after delete_rc=$?"
}

# mc_holder: the storage node (1..3) holding a replica of one of fl's
# chunks (the master's HTTP API on its metrics port gives the transfer
# endpoint of each replica, ss the process listening there); 1 when that
# cannot be told.  Without it the victim may hold none of fl: the master
# puts new objects on the emptiest segments, i.e. on a node just restarted.
mc_holder() {
	local api=http://$BED_SRV_IP:9003 key ep pid i
	key=$(bed_srv curl -s "$api/get_all_keys" | tr -c 'A-Za-z0-9/_.-' '\n' |
		grep '^weight/models/fl/files/.*/chunks/' | head -1)
	ep=$(bed_srv curl -s "$api/query_key?key=$key" |
		grep -o '"transport_endpoint_":"[^"]*"' | head -1 | cut -d'"' -f4)
	pid=$(bed_srv ss -Hltnp "sport = :${ep##*:}" | grep -o 'pid=[0-9]*' |
		head -1 | cut -d= -f2)
	for i in 1 2 3; do
		[ -n "$pid" ] && [ "$(cat "$BED_DIR/mc-node$i.pid")" = "$pid" ] &&
			{ echo $i; return; }
	done
	echo 1
}

# mc_pull_killing TAG: N nodes pull fl (slowed by 20 ms per call) and the
# storage node mc_holder names (VICTIM) is SIGKILLed once they started
mc_pull_killing() {
	local _pids="" k
	VICTIM=$(mc_holder)
	_t0=$(now_ns)
	ERRLINE=""
	for ((k = 1; k <= N; k++)); do
		on $k env WSTORE_FAULTS=delay=20 "$W" --store fault+mooncake model pull fl \
			--dest "$T/$1-$k" > "$T/$1-$k.out" 2>&1 &
		_pids="$_pids $!"
	done
	started "$T/$1-1"
	bed_kill "mc-node$VICTIM"
	fleet_settle "$1" $_pids
}

# mc_forgotten: until the master no longer hands out the killed node's
# replicas (a wstore read of fl, failed transfers not retried, fails on a
# transfer no more); 120 s at most
mc_forgotten() {
	local i
	for ((i = 0; i < 240; i++)); do
		on 1 env WSTORE_MOONCAKE_TRANSFER_WAIT_MS=0 \
			"$W" --store mooncake model inspect fl 2>&1 |
			grep -q 'transfer to a mooncake storage node failed' || return 0
		sleep 0.5
	done
	return 1
}

# scn_mc_kill: a Mooncake storage node SIGKILLed mid-pull, replica_num 2;
# the same through the raw C API (tests/fleet/mc_replica.c); then
# replica_num 1: a clean error, and a pull after re-import works
scn_mc_kill() {
	STORE=mooncake PSTORE=mooncake MC_REPLICAS=2
	say "== mooncake: a storage node killed mid-pull (replica_num 2)"
	mc_pull_killing mc
	rec "mc_kill replica_num=2 nodes=$N victim=$VICTIM during: ok=$ok err=$err bad=$bad secs=$(awk -v ns="$ns" 'BEGIN { printf "%.1f", ns / 1e9 }')${ERRLINE:+ error: $ERRLINE}"
	local t_kill=$(now_ns) fgt=never
	mc_forgotten && fgt=$(( ($(now_ns) - t_kill) / 1000000 ))
	fleet_pull mc2
	rec "mc_kill replica_num=2 after (master forgot the node ${fgt} ms after the pulls ended): ok=$ok err=$err bad=$bad${ERRLINE:+ error: $ERRLINE}"
	bed_mc_node $VICTIM >&2
	say "== mooncake: the same through the raw C API"
	if cc -O2 -I"$ROOT/bench" -o "$T/mc_replica" "$ROOT/tests/fleet/mc_replica.c" "$ROOT/bench/mc_client.c" -ldl; then
		local L=$BED_MC_HOME/lib/libmooncake_store.so
		bed_mc 1 "$T/mc_replica" "$L" "$BED_MC_MASTER" "$BED_MC_META" \
			"$(bed_ip 1)" put rawrep/ 12 4 2 > "$T/rep.out" 2>/dev/null
		bed_kill mc-node1
		bed_mc 1 "$T/mc_replica" "$L" "$BED_MC_MASTER" "$BED_MC_META" \
			"$(bed_ip 1)" get rawrep/ 12 4 60 >> "$T/rep.out" 2>/dev/null
		local rrc=$?
		cat "$T/rep.out" >&2
		rec "mc_raw replica_num=2 put 12x4MiB, node killed, get_into every 0.5 s: exit $rrc; first round: $(sed -n 2p "$T/rep.out"); last: $(tail -1 "$T/rep.out")"
		bed_mc_node 1 >&2
	fi
	say "== mooncake: replica_num 1"
	MC_REPLICAS=1
	on 1 "$W" --store mooncake model delete --force fl >&2
	on 1 "$W" --store mooncake model import \
		--checkpoint-id fl --model-id Org/Fleet --source "$T/src" >&2
	mc_pull_killing m1
	rec "mc_kill replica_num=1 nodes=$N victim=$VICTIM during: ok=$ok err=$err bad=$bad${ERRLINE:+ error: $ERRLINE}"
	mc_forgotten
	bed_mc_node $VICTIM >&2
	local del imp
	on 1 "$W" --store mooncake model delete --force fl > "$T/del.out" 2>&1
	del="delete --force: exit $? $(tail -1 "$T/del.out")"
	on 1 "$W" --store mooncake model import \
		--checkpoint-id fl --model-id Org/Fleet --source "$T/src" > "$T/imp.out" 2>&1
	imp="re-import: exit $?"
	fleet_pull m1b
	rec "mc_kill replica_num=1 after: $del; $imp; pulls: ok=$ok err=$err bad=$bad${ERRLINE:+ error: $ERRLINE}"
}

# scn_latency: a standalone Redis in the server namespace, reached directly
# and through tests/fleet/proxy.py (5 ms each way): 1% of connections
# refused, then 1% of the 1 MiB chunks cutting their connection mid-transfer
scn_latency() {
	say "== latency: 5 ms + 1% loss"
	bed_spawn lat-redis "$BED_SRV" redis-server --port 7200 \
		--bind "$BED_SRV_IP 127.0.0.1" --save '' --appendonly no \
		--protected-mode no --dir "$BED_DIR"
	bed_reach 1 "$BED_SRV_IP" 7200 || { rec "latency redis=failed"; return; }
	STORE=redis PSTORE="redis://$BED_SRV_IP:7200"
	on 1 "$W" --store "$PSTORE" model import --checkpoint-id fl \
		--model-id Org/Fleet --source "$T/src" >&2
	fleet_pull ld
	rec "latency direct nodes=$N ok=$ok err=$err bad=$bad mibs=$(mibs $((N * SRC_BYTES)) "$ns")"
	local mode port=7100
	for mode in conn chunk; do
		bed_spawn "lat-$mode" "$BED_SRV" python3 "$ROOT/tests/fleet/proxy.py" \
			"$BED_SRV_IP" $port 127.0.0.1 7200 5 0.01 $mode
		bed_reach 1 "$BED_SRV_IP" $port || { rec "latency proxy=failed"; return; }
		PSTORE="redis://$BED_SRV_IP:$port"
		fleet_pull "l$mode"
		kill -TERM "$(cat "$BED_DIR/lat-$mode.pid")"
		timeout_wait 10 "$(cat "$BED_DIR/lat-$mode.pid")" 2>/dev/null
		rec "latency proxied loss=$mode nodes=$N ok=$ok err=$err bad=$bad mibs=$(mibs $((N * SRC_BYTES)) "$ns")${ERRLINE:+ error: $ERRLINE}; proxy: $(tail -1 "$BED_DIR/lat-$mode.log")"
		port=$((port + 1))
	done
}

# scn_detour STORE PSTORE: 5 ms and 1% loss on the Redis Cluster or
# Mooncake, whose clients are handed the servers' own addresses: every
# node's traffic to the server address detoured through tests/fleet/proxy.py
# in the namespace px (bed_detour_up: px holds the server address too and
# the proxy listens on every port the server namespace listens on, the
# data ports of Cluster nodes and storage nodes, the master's RPC and
# metadata ports included).  The nodes pull fl directly, then through the
# proxy dropping 1% of its connections, then cutting 1% of its 1 MiB
# chunks (on Mooncake first on the data ports only, then on every port).
# Recorded as latency_cluster or latency_mooncake.
scn_detour() {
	STORE=$1 PSTORE=$2
	local name=latency_cluster mode k ports
	[ "$STORE" = mooncake ] && name=latency_mooncake
	say "== latency on $STORE: 5 ms + 1% loss, detoured through px"
	if ! ip netns list | awk '{ print $1 }' | grep -qx "$BED_TAG-px"; then
		bed_detour_up || { rec "$name detour=failed"; return; }
	fi
	on 1 "$W" --store "$PSTORE" model delete --force --missing-ok fl >&2
	on 1 "$W" --store "$PSTORE" model import --checkpoint-id fl \
		--model-id Org/Fleet --source "$T/src" >&2 || { rec "$name import=failed"; return; }
	[ "$STORE" = redis ] && bed_redis_synced
	fleet_pull dd
	rec "$name direct nodes=$N ok=$ok err=$err bad=$bad mibs=$(mibs $((N * SRC_BYTES)) "$ns")${ERRLINE:+ error: $ERRLINE}"
	ports=$(bed_srv_ports | paste -sd, -)
	# on Mooncake the cuts also on the data ports alone (the master's
	# RPC and metadata ports spared), before they reach every port
	local modes="conn chunk" spare
	[ "$STORE" = mooncake ] && modes="conn chunk_data chunk"
	for mode in $modes; do
		spare=""
		[ $mode = chunk_data ] && spare=${BED_MC_MASTER##*:},${BED_MC_META##*:}
		spare=${spare%%/*}
		bed_spawn "px-$mode" "$BED_TAG-px" env PROXY_TARGET_NETNS="/run/netns/$BED_SRV" \
			PROXY_SPARE_PORTS="$spare" python3 "$ROOT/tests/fleet/proxy.py" \
			"$BED_SRV_IP" "$ports" "$BED_SRV_IP" = 5 0.01 ${mode%_data}
		local i
		for ((i = 0; i < 600; i++)); do
			grep -q listening "$BED_DIR/px-$mode.log" 2>/dev/null && break
			sleep 0.1
		done
		for ((k = 1; k <= N; k++)); do bed_detour $k; done
		fleet_pull "d$mode"
		for ((k = 1; k <= N; k++)); do bed_direct $k; done
		kill -TERM "$(cat "$BED_DIR/px-$mode.pid")"
		timeout_wait 10 "$(cat "$BED_DIR/px-$mode.pid")" 2>/dev/null
		rec "$name proxied loss=$mode nodes=$N ok=$ok err=$err bad=$bad mibs=$(mibs $((N * SRC_BYTES)) "$ns")${ERRLINE:+ error: $ERRLINE}; proxy: $(tail -1 "$BED_DIR/px-$mode.log")"
	done
}
