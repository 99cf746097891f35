#!/bin/sh
# redis_faults.sh - the wstore CLI against real Redis servers that fail:
#  - a standalone server SIGKILLed mid-import (no persistence, then with
#    an append-only file): one-line error, never READY; after a restart
#    delete and re-import succeed and verify;
#  - a cluster master SIGKILLed (before and during an import): after its
#    replica takes over, pull and verify succeed and the pulled tree equals
#    the source; 8 concurrent imports into the degraded cluster and into a
#    standalone server all end up READY in the index; a slot range with no
#    node left gives "cluster is down";
#  - wrong password, unreachable port, maxmemory (noeviction), a chunk
#    over proto-max-bulk-len: one-line errors, exit 1, never READY;
#  - connections cut mid-transfer by a proxy: pulls retry and complete;
#  - the password kept out of the URL (config key redis_password, env
#    WSTORE_REDIS_PASSWORD), and never printed by any command.
# Starts its own servers (tests/lib/redis.sh) and stops them on exit, so
# the servers tests/run.sh shares between suites are left alone.
#   BUILD=build sh tests/e2e/redis_faults.sh
TAP_SUITE=redis-faults
. "$(dirname "$0")/../lib/suite.sh"
. "$HERE/lib/redis.sh"
suite_cleanup() { redis_stop_all >/dev/null 2>&1; }
unset WSTORE_REDIS_PASSWORD WSTORE_STORE
ALL="$T/all-output"	# every output of wstore, searched for the password
: > "$ALL"

if ! command -v redis-server >/dev/null; then
	tap_not_ok "redis-server is installed (run scripts/deps.sh)"
	tap_done
	exit 1
fi

# rec CMD...: run CMD, keep its output in $ALL and print it; CMD's status
rec() {
	_ro=$(mktemp "$T/rec.XXXXXX")
	"$@" > "$_ro" 2>&1
	_rc=$?
	cat "$_ro" >> "$ALL"
	cat "$_ro"
	rm -f "$_ro"
	return $_rc
}
# status_of STORE ID: READY / FAILED / ... or "absent"
status_of() {
	"$W" --store "$1" --json model inspect "$2" 2>>"$ALL" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])' 2>/dev/null ||
		echo absent
}
# n_ready STORE PREFIX: READY checkpoints in the global index whose id
# starts with PREFIX
n_ready() {
	"$W" --store "$1" --json model list 2>>"$ALL" | python3 -c "
import json, sys
print(len([r for r in json.load(sys.stdin)
           if r['checkpoint_id'].startswith('$2') and r['status'] == 'READY']))" 2>/dev/null ||
		echo 0
}
# kill_when_keys PORT N PID [BASE]: SIGKILL the server on PORT once it
# holds at least BASE + N keys (the import is under way), or when PID has
# ended
kill_when_keys() {
	_i=0
	while [ $_i -lt 600 ] && kill -0 "$3" 2>/dev/null; do
		_k=$(redis_cli "$1" dbsize 2>/dev/null | tr -dc 0-9)
		[ "${_k:-0}" -ge $(($2 + ${4:-0})) ] && break
		sleep 0.02
		_i=$((_i + 1))
	done
	redis_kill_port "$1"
}
# one_clear_line NAME PATTERN: $OUT is one line matching PATTERN, without
# the password
one_clear_line() {
	echo "#   message: $OUT"
	check_one_line "$1: error is one line" "$OUT"
	check_grep "$1: error says /$2/" "$2" "$OUT"
	case $OUT in
	*"$PW"*) tap_not_ok "$1: password not echoed" "$OUT" ;;
	*) tap_ok "$1: password not echoed" ;;
	esac
}

SRC="$T/src"		# ~48 MiB: 192 chunks of 256 KiB, to kill into
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 50000000 --shards 4 --seed 1
SMALL="$T/small"	# ~6 MiB
python3 "$HERE/tools/mkckpt.py" "$SMALL" --size 6000000 --shards 2 --seed 2
mkdir -p "$SMALL/sub"
printf 'nested\n' > "$SMALL/sub/x.txt"
CS=256K

# ---- standalone server (password) -----------------------------------------
redis_start_standalone "$T/sa" || { tap_not_ok "start a standalone server"; tap_done; exit 1; }
PW=$WSTORE_TEST_REDIS_PASSWORD
SP=$WSTORE_TEST_REDIS_PORT
SA=$WSTORE_TEST_REDIS_URL
SANOPW="redis://127.0.0.1:$SP"
sa() { rec "$W" --store "$SA" "$@"; }

# import_killed URL PORT ID NKEYS: start an import of ID into URL, SIGKILL
# the server on PORT once it holds NKEYS keys; sets rc and OUT.  Each
# backend call is slowed by 10 ms (the fault wrapper around the real
# server): unslowed, the import can finish before a loaded machine has run
# one poll of the server's key count
import_killed() {
	WSTORE_FAULTS=delay=10 "$W" --store "fault+$1" model import --checkpoint-id "$3" --model-id Org/Kill \
		--source "$SRC" --chunk-size $CS --jobs 2 > "$T/$3.out" 2>&1 &
	_pid=$!
	kill_when_keys "$2" "$4" $_pid
	wait_exit 300 $_pid
	rc=$?
	cat "$T/$3.out" >> "$ALL"
	OUT=$(cat "$T/$3.out")
}

# ---- the server SIGKILLed mid-import (no persistence) ----------------------
import_killed "$SA" "$SP" k1 20
check "killed mid-import: import exits 1 ($rc)" test $rc = 1
one_clear_line "killed mid-import" "(lost connection|cannot connect) to redis at 127\.0\.0\.1:$SP"
check "killed mid-import: server restarts" redis_restart_port "$SP"
st=$(status_of "$SA" k1)
check "killed mid-import: checkpoint not READY ($st)" test "$st" = absent -o "$st" = FAILED
check_exit "killed mid-import: model delete --missing-ok succeeds" 0 sa model delete --missing-ok k1
check_exit "killed mid-import: re-import succeeds" 0 sa model import --checkpoint-id k1 \
	--model-id Org/Kill --source "$SRC" --chunk-size $CS
check_exit "killed mid-import: verify passes" 0 sa model verify k1
check_exit "killed mid-import: delete" 0 sa model delete k1

# ---- 8 concurrent imports into the standalone server -------------------------
i=0
while [ $i -lt 8 ]; do
	"$W" --store "$SA" model import --checkpoint-id "sc$i" --model-id Org/Conc \
		--source "$SMALL" --chunk-size $CS > "$T/sc$i.out" 2>&1 &
	pids="$pids $!"
	i=$((i + 1))
done
wait_all 300
cat "$T"/sc*.out >> "$ALL"
n=$(n_ready "$SA" sc)
check "standalone: 8 concurrent imports all READY in the index ($n)" test "$n" = 8
i=0
while [ $i -lt 8 ]; do
	rec "$W" --store "$SA" model delete "sc$i" >/dev/null &
	pids="$pids $!"
	i=$((i + 1))
done
wait_all 300

# ---- errors: wrong password, unreachable -----------------------------------
check_exit "wrong password: exit 1" 1 rec "$W" --store "redis://:not-$PW@127.0.0.1:$SP" model list
one_clear_line "wrong password" "authentication failed"
check_exit "no password: exit 1" 1 rec "$W" --store "$SANOPW" model list
one_clear_line "no password" "authentication failed"
check_exit "wrong user: exit 1" 1 rec "$W" --store "redis://nobody:$PW@127.0.0.1:$SP" model list
one_clear_line "wrong user" "authentication failed"
# a port nothing listens on: a server started and killed
mkdir -p "$T/gone"
_redis_start "$T/gone" && GONE=$_REDIS_LAST_PORT && redis_kill_port "$GONE"
check_exit "unreachable port: exit 1" 1 rec "$W" --store "redis://:$PW@127.0.0.1:$GONE" model list
one_clear_line "unreachable port" "cannot connect to redis at 127\.0\.0\.1:$GONE"
check_exit "unreachable port, import: exit 1" 1 rec "$W" --store "redis://:$PW@127.0.0.1:$GONE" \
	model import --checkpoint-id u --model-id M --source "$SMALL"
one_clear_line "unreachable port, import" "cannot connect to redis at 127\.0\.0\.1:$GONE"
check_exit "unreachable cluster: exit 1" 1 rec "$W" --store "redis-cluster://:$PW@127.0.0.1:$GONE" model list
one_clear_line "unreachable cluster" "cannot (connect to|reach any) redis"
check_exit "bad URL with a password: exit 1" 1 rec "$W" --store "redis://:$PW@127.0.0.1:notaport" model list
one_clear_line "bad URL" "invalid redis URL"
check_exit "unix socket gone: exit 1" 1 rec "$W" --store "redis+unix://:$PW@$T/nosock" model list
one_clear_line "unix socket gone" "cannot connect to redis at $T/nosock"

# ---- the password kept out of the URL -------------------------------------
printf '{"store": "%s", "redis_password": "%s"}\n' "$SANOPW" "$PW" > "$T/cfg.json"
printf '{"store": "%s", "redis_password": "x%s"}\n' "$SANOPW" "$PW" > "$T/badcfg.json"
cfg() { rec "$W" --config "$T/cfg.json" "$@"; }
check_exit "config redis_password: import" 0 cfg model import --checkpoint-id pw1 \
	--model-id Org/Pw --source "$SMALL" --chunk-size $CS
check_exit "config redis_password: list" 0 cfg model list
check_grep "config redis_password: list shows it READY" "pw1 +Org/Pw +main +READY" "$OUT"
check_exit "config redis_password: inspect --json" 0 cfg --json model inspect pw1
check_exit "config redis_password: verify" 0 cfg model verify pw1
check_exit "config redis_password: pull" 0 cfg model pull pw1 --dest "$T/pw1"
check "config redis_password: pulled tree equals the source" diff -r "$SMALL" "$T/pw1"
check_exit "config redis_password: WSTORE_CONFIG works too" 0 \
	rec env WSTORE_CONFIG="$T/cfg.json" "$W" model inspect pw1
check_exit "config, wrong redis_password: exit 1" 1 rec "$W" --config "$T/badcfg.json" model list
one_clear_line "config, wrong redis_password" "authentication failed"
check_exit "env WSTORE_REDIS_PASSWORD: verify" 0 \
	rec env WSTORE_REDIS_PASSWORD="$PW" "$W" --store "$SANOPW" model verify pw1
check_exit "env WSTORE_REDIS_PASSWORD: import" 0 \
	rec env WSTORE_REDIS_PASSWORD="$PW" "$W" --store "$SANOPW" model import \
	--checkpoint-id pw2 --model-id Org/Pw --source "$SMALL" --chunk-size $CS
check_exit "env WSTORE_REDIS_PASSWORD: unix socket URL without password" 0 \
	rec env WSTORE_REDIS_PASSWORD="$PW" "$W" --store "redis+unix://$T/sa/redis.sock" model verify pw2
check_exit "env, wrong WSTORE_REDIS_PASSWORD: exit 1" 1 \
	rec env WSTORE_REDIS_PASSWORD="x$PW" "$W" --store "$SANOPW" model list
one_clear_line "env, wrong WSTORE_REDIS_PASSWORD" "authentication failed"
check_exit "the env beats the config file (as for every key)" 0 \
	rec env WSTORE_REDIS_PASSWORD="$PW" "$W" --config "$T/badcfg.json" model inspect pw2
check_exit "the URL's password beats the env" 0 \
	rec env WSTORE_REDIS_PASSWORD="x$PW" "$W" --store "$SA" model inspect pw2
check_exit "config init with --store URL" 0 rec "$W" --store "$SA" --config "$T/init.json" config init
check_exit "pull with the env password" 0 rec env WSTORE_REDIS_PASSWORD="$PW" "$W" --store "$SANOPW" \
	model pull pw2 --dest "$T/pw2"
check_exit "--json list with the config password" 0 cfg --json model list
check_exit "delete with the config password" 0 cfg model delete pw1
check_exit "delete with the env password" 0 rec env WSTORE_REDIS_PASSWORD="$PW" "$W" \
	--store "$SANOPW" model delete pw2

# ---- the server SIGKILLed mid-import, with an append-only file -------------
# the partial import survives the restart: it must not be READY, and
# delete must take every key of it away
mkdir -p "$T/aof"
if _redis_start "$T/aof" --appendonly yes --appendfsync always; then
	AP=$_REDIS_LAST_PORT
	AU="redis://127.0.0.1:$AP"
	import_killed "$AU" "$AP" k2 30
	check "AOF, killed mid-import: import exits 1 ($rc)" test $rc = 1
	one_clear_line "AOF, killed mid-import" "(lost connection|cannot connect) to redis at 127\.0\.0\.1:$AP"
	check "AOF, killed mid-import: server restarts" redis_restart_port "$AP"
	nk=$(redis_cli "$AP" --scan --pattern 'weight/models/k2/*' | grep -c /chunks/)
	check "AOF: chunks of the partial import survived the restart ($nk)" test "$nk" -gt 0
	st=$(status_of "$AU" k2)
	check "AOF, killed mid-import: checkpoint not READY ($st)" test "$st" != READY
	check_exit "AOF: list works" 0 rec "$W" --store "$AU" model list
	check_exit "AOF: verify refuses it" 1 rec "$W" --store "$AU" model verify k2
	check_exit "AOF: a second import of the id succeeds (stale lock taken over)" 0 \
		rec "$W" --store "$AU" model import --checkpoint-id k2 \
		--model-id Org/Kill --source "$SRC" --chunk-size $CS
	check_exit "AOF: it verifies" 0 rec "$W" --store "$AU" model verify k2
	check_exit "AOF: delete" 0 rec "$W" --store "$AU" model delete k2
	left=$(redis_cli "$AP" --scan --pattern 'weight/models/*' | wc -l)
	check "AOF: nothing of k2 left after delete ($left keys)" test "$left" = 0
	# killed again, then delete (not re-import) cleans up
	import_killed "$AU" "$AP" k3 30
	redis_restart_port "$AP"
	# no manifest was written: delete finds nothing (docs/format.md),
	# admin gc removes the orphaned chunks
	check_exit "AOF, killed again: delete --missing-ok succeeds" 0 rec "$W" --store "$AU" model delete --missing-ok k3
	check "AOF, killed again: no lock left" test -z "$(redis_cli "$AP" --scan --pattern 'weight/locks/*')"
	check_exit "AOF, killed again: admin gc" 0 rec "$W" --store "$AU" admin gc
	left=$(redis_cli "$AP" --scan --pattern 'weight/models/*' | wc -l)
	check "AOF, killed again: gc leaves no key of k3 ($left)" test "$left" = 0
	check_exit "AOF, killed again: re-import and verify" 0 sh -c \
		"'$W' --store '$AU' model import --checkpoint-id k3 --model-id Org/Kill --source '$SMALL' && '$W' --store '$AU' model verify k3"
	redis_kill_port "$AP"
else
	tap_not_ok "start a server with an append-only file"
fi

# ---- maxmemory reached (noeviction) -----------------------------------------
mkdir -p "$T/oom"
if _redis_start "$T/oom" --maxmemory 2mb --maxmemory-policy noeviction; then
	OP=$_REDIS_LAST_PORT
	OU="redis://127.0.0.1:$OP"
	check_exit "maxmemory: import exits 1" 1 rec "$W" --store "$OU" model import \
		--checkpoint-id oom --model-id Org/Oom --source "$SMALL" --chunk-size $CS
	# refused up front (it cannot fit in maxmemory), or by the server
	one_clear_line "maxmemory" "out of memory|would not fit in the store"
	st=$(status_of "$OU" oom)
	check "maxmemory: checkpoint FAILED or absent ($st)" test "$st" = absent -o "$st" = FAILED
	nk=$(redis_cli "$OP" --scan --pattern 'weight/models/oom/*/chunks/*' | wc -l)
	check "maxmemory: no chunk left ($nk)" test "$nk" = 0
	check_exit "maxmemory: list still works" 0 rec "$W" --store "$OU" model list
	check_exit "maxmemory: delete --missing-ok succeeds" 0 rec "$W" --store "$OU" model delete --missing-ok oom
	# with room again the same import succeeds
	redis_cli "$OP" config set maxmemory 0 >/dev/null
	check_exit "maxmemory lifted: import succeeds" 0 rec "$W" --store "$OU" model import \
		--checkpoint-id oom --model-id Org/Oom --source "$SMALL" --chunk-size $CS
	check_exit "maxmemory lifted: verify" 0 rec "$W" --store "$OU" model verify oom
	redis_kill_port "$OP"
else
	tap_not_ok "start a server with maxmemory"
fi

# ---- a chunk over proto-max-bulk-len ---------------------------------------
mkdir -p "$T/bulk"
if _redis_start "$T/bulk" --proto-max-bulk-len 1mb; then
	BP=$_REDIS_LAST_PORT
	BU="redis://127.0.0.1:$BP"
	check_exit "over proto-max-bulk-len: import exits 1" 1 rec "$W" --store "$BU" model import \
		--checkpoint-id big --model-id Org/Big --source "$SMALL" --chunk-size 2M
	one_clear_line "over proto-max-bulk-len" "proto-max-bulk-len"
	st=$(status_of "$BU" big)
	check "over proto-max-bulk-len: checkpoint FAILED or absent ($st)" test "$st" = absent -o "$st" = FAILED
	check_exit "under proto-max-bulk-len: import succeeds" 0 rec "$W" --store "$BU" model import \
		--checkpoint-id big2 --model-id Org/Big --source "$SMALL" --chunk-size 512K
	redis_kill_port "$BP"
else
	tap_not_ok "start a server with proto-max-bulk-len 1mb"
fi

# ---- connections cut mid-transfer (a flaky network, a proxy) --------------
# A forwarder in front of the server aborts a connection on 1% of the
# pieces of data it forwards (tests/fleet/proxy.py, mode chunk): a pull
# must retry its reads on fresh connections and finish with the right
# bytes, not fail at the first cut.
mkdir -p "$T/cut"
if _redis_start "$T/cut"; then
	XP=$_REDIS_LAST_PORT
	check_exit "behind a cutting proxy: import straight to the server" 0 rec "$W" \
		--store "redis://127.0.0.1:$XP" model import --checkpoint-id cut \
		--model-id Org/Cut --source "$SRC" --chunk-size 1M
	rec "$W" --store "redis://127.0.0.1:$XP" model import --checkpoint-id cut16 \
		--model-id Org/Cut16 --source "$SRC" --chunk-size 16M >/dev/null 2>&1
	# cut_pulls RATE ID: 3 pulls of ID through a proxy (on a port of its
	# own) that cuts a fraction RATE of the reads it forwards; $bad the
	# failed pulls (3 when the proxy never listened), the proxy's counts
	# in $T/cutproxy-ID.log
	cut_pulls() {
		PXP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
		python3 "$HERE/fleet/proxy.py" 127.0.0.1 "$PXP" 127.0.0.1 "$XP" 0 "$1" chunk \
			> "$T/cutproxy-$2.log" 2>&1 &
		PXPID=$!
		bad=3
		if ! wait_for 60 grep -q listening "$T/cutproxy-$2.log"; then
			echo "# the proxy did not listen within 60 s"
			kill -TERM "$PXPID" 2>/dev/null; wait_exit 10 "$PXPID" >/dev/null
			return
		fi
		bad=0
		for i in 1 2 3; do
			rec "$W" --store "redis://127.0.0.1:$PXP" model pull "$2" \
				--dest "$T/cut/$2-$i" || bad=$((bad + 1))
		done
		kill -TERM "$PXPID" 2>/dev/null; wait_exit 10 "$PXPID" >/dev/null
	}
	cut_pulls 0.01 cut
	check "behind a cutting proxy: 3 pulls of 48 MiB complete, verified ($bad failed; proxy: $(tail -1 "$T/cutproxy-cut.log"))" \
		test "$bad" = 0
	# 16 MiB values behind a proxy cutting 8% of its reads: a cut is
	# likely on every read of a whole value, so a GET that starts over
	# after each cut seldom finishes; one that resumes where it was cut
	# (GETRANGE of the rest) does
	cut_pulls 0.08 cut16
	check "behind a proxy cutting 8% of reads: 3 pulls of 16 MiB chunks complete, each read resumed where it was cut ($bad failed; proxy: $(tail -1 "$T/cutproxy-cut16.log"))" \
		test "$bad" = 0
	check "... with the source's bytes" diff -r "$SRC" "$T/cut/cut16-3"
	redis_kill_port "$XP"
else
	tap_not_ok "start a server for the cutting proxy"
fi

# ---- cluster: a master SIGKILLed, its replica takes over ------------------
if redis_start_cluster "$T/cl"; then
	CPORTS=$WSTORE_TEST_CLUSTER_PORTS
	# every node as a seed: the test kills three of them
	CU="redis-cluster://$(for p in $CPORTS; do printf '127.0.0.1:%s,' "$p"; done | sed 's/,$//')"
	cl() { rec "$W" --store "$CU" "$@"; }
	# master_of KEY: the port of the master that owns KEY's slot
	master_of() {
		for _q in $(live_ports); do
			_slot=$(redis-cli -p "$_q" cluster keyslot "$1") || continue
			redis-cli -p "$_q" cluster nodes | awk -v s="$_slot" '
				$3 ~ /master/ && $3 !~ /fail/ {
					for (i = 9; i <= NF; i++) {
						n = split($i, r, "-")
						if (n == 1) r[2] = r[1]
						if (s + 0 >= r[1] + 0 && s + 0 <= r[2] + 0) {
							sub(/@.*/, "", $2); sub(/.*:/, "", $2)
							print $2; exit
						}
					}
				}'
			return 0
		done
	}
	live_ports() {
		for _p in $CPORTS; do
			redis-cli -p "$_p" ping >/dev/null 2>&1 && printf '%s ' "$_p"
		done
	}
	# replicas that cannot acknowledge: the import must not publish READY
	# chunks a failover could lose (sync waits with WAIT before the manifest)
	# (each node's own ROLE: one node's CLUSTER NODES view of the others
	# can lag behind a fresh cluster's replica assignment, and a replica
	# missed here is not frozen)
	REPL=$(for p in $CPORTS; do
		redis-cli -p "$p" role | head -1 | grep -qx slave && echo "$p"
	done)
	check "cluster: three replicas to freeze ($(echo $REPL))" \
		test "$(echo "$REPL" | grep -c .)" = 3
	for p in $REPL; do kill -STOP "$(cat "$(_redis_dir_of "$p")/redis-$p.pid")"; done
	# (800 ms keeps the freeze under the test cluster's 2 s node timeout)
	check_exit "cluster: replicas frozen: import fails" 1 env WSTORE_COMMAND_TIMEOUT_MS=800 \
		"$W" --store "$CU" model import --checkpoint-id frz --model-id Org/Fo \
		--source "$SRC" --chunk-size $CS
	check_grep "cluster: says the replicas did not acknowledge" \
		"replicas acknowledged the writes within 800 ms" "$OUT"
	for p in $REPL; do kill -CONT "$(cat "$(_redis_dir_of "$p")/redis-$p.pid")"; done
	# shellcheck disable=SC2086
	redis_wait_cluster_ok $CPORTS
	# shellcheck disable=SC2086
	redis_wait_replicated $CPORTS
	st=$(cl --json model inspect frz 2>/dev/null | grep -o '"status":"[A-Z]*"')
	check "cluster: frozen-replica import left no READY manifest ($st)" \
		test "$st" != '"status":"READY"'
	cl model delete frz >/dev/null 2>&1
	check_exit "cluster: import" 0 cl model import --checkpoint-id f1 --model-id Org/Fo \
		--source "$SRC" --chunk-size $CS
	# kill the master holding the manifest (and a third of the chunks)
	M1=$(master_of weight/models/f1/manifest)
	check "cluster: found the manifest's master ($M1)" test -n "$M1"
	# shellcheck disable=SC2086
	redis_wait_replicated $CPORTS
	redis_kill_port "$M1"
	# shellcheck disable=SC2046
	check "cluster: replica took over" redis_wait_cluster_ok $(live_ports)
	M1b=$(master_of weight/models/f1/manifest)
	check "cluster: the manifest's slot has a new master ($M1b)" test -n "$M1b" -a "$M1b" != "$M1"
	check_exit "cluster after failover: list" 0 cl model list
	check_grep "cluster after failover: f1 READY" "f1 +Org/Fo +main +READY" "$OUT"
	check_exit "cluster after failover: pull" 0 cl model pull f1 --dest "$T/f1"
	check "cluster after failover: pulled tree equals the source" diff -r "$SRC" "$T/f1"
	check_exit "cluster after failover: verify" 0 cl model verify f1
	check_exit "cluster after failover: a URL whose first seed is dead works" 0 \
		rec "$W" --store "redis-cluster://127.0.0.1:$M1,127.0.0.1:$M1b" model inspect f1

	# a second master killed while an import runs: it rides the failover
	M2=""
	for p in $(live_ports); do
		[ "$p" != "$M1b" ] && redis-cli -p "$p" role | head -1 | grep -q master &&
			{ M2=$p; break; }
	done
	base=$(redis-cli -p "$M2" dbsize)
	"$W" --store "$CU" model import --checkpoint-id f2 --model-id Org/Fo \
		--source "$SRC" --chunk-size $CS --jobs 2 > "$T/f2.out" 2>&1 &
	pid=$!
	kill_when_keys "$M2" 10 $pid "$base"
	wait_exit 300 $pid
	rc=$?
	cat "$T/f2.out" >> "$ALL"
	OUT=$(cat "$T/f2.out")
	# shellcheck disable=SC2046
	redis_wait_cluster_ok $(live_ports)
	st=$(status_of "$CU" f2)
	if [ $rc = 0 ]; then
		tap_ok "cluster, master killed mid-import: import rode the failover"
		check_exit "cluster, master killed mid-import: verify" 0 cl model verify f2
	else
		check_one_line "cluster, master killed mid-import: a failure is one line" "$OUT"
		check "cluster, master killed mid-import: failed import not READY ($st)" test "$st" != READY
		check_exit "cluster, master killed mid-import: re-import" 0 cl model import \
			--checkpoint-id f2 --model-id Org/Fo --source "$SRC" --chunk-size $CS
	fi
	check_exit "cluster, master killed mid-import: pull" 0 cl model pull f2 --dest "$T/f2"
	check "cluster, master killed mid-import: pulled tree equals the source" diff -r "$SRC" "$T/f2"

	# 8 concurrent imports into the degraded cluster (two masters have
	# no replica left)
	i=0
	while [ $i -lt 8 ]; do
		"$W" --store "$CU" model import --checkpoint-id "cc$i" --model-id Org/Conc \
			--source "$SMALL" --chunk-size $CS > "$T/cc$i.out" 2>&1 &
		pids="$pids $!"
		i=$((i + 1))
	done
	wait_all 300
	cat "$T"/cc*.out >> "$ALL"
	n=$(n_ready "$CU" cc)
	check "degraded cluster: 8 concurrent imports all READY in the index ($n)" test "$n" = 8
	n=$("$W" --store "$CU" --json model list --model Org/Conc | python3 -c \
		'import json,sys; print(len([r for r in json.load(sys.stdin) if r["status"] == "READY"]))')
	check "degraded cluster: all 8 in the per-model index ($n)" test "$n" = 8
	check_exit "degraded cluster: verify one of them" 0 cl model verify cc5
	i=0
	while [ $i -lt 8 ]; do
		rec "$W" --store "$CU" model delete "cc$i" >/dev/null &
		pids="$pids $!"
		i=$((i + 1))
	done
	wait_all 300
	n=$(n_ready "$CU" cc)
	check "degraded cluster: 8 concurrent deletes empty the index ($n left)" test "$n" = 0

	# the killed masters come back as replicas
	redis_restart_port "$M1"
	redis_restart_port "$M2"
	# shellcheck disable=SC2086
	check "cluster: killed masters rejoin" redis_wait_cluster_ok $CPORTS
	check_exit "cluster, old masters back: verify f1" 0 cl model verify f1

	# a master and its replica both gone: the slot range has no node
	# right after the rejoins one node's slot map can still name an old
	# master (now a replica): wait until the node itself says it is the
	# master and a replica follows it, or killing "both" kills neither
	pick_m3() {
		M3=$(master_of weight/models/f1/manifest)
		[ -n "$M3" ] && redis-cli -p "$M3" role | head -1 | grep -q master ||
			return 1
		R3=""
		for p in $CPORTS; do
			if redis-cli -p "$p" info replication | tr -d '\r' |
			    grep -q "^master_port:$M3\$"; then R3=$p; fi
		done
		[ -n "$R3" ]
	}
	wait_for 30 pick_m3 || echo "# no master with a replica for f1's manifest: M3=$M3 R3=$R3"
	echo '{"command_timeout_ms": "3000", "connect_timeout_ms": "500"}' > "$T/short.json"
	redis_kill_port "$M3"
	[ -n "$R3" ] && redis_kill_port "$R3"
	check_exit "cluster, a slot range lost: verify exits 1" 1 rec "$W" --config "$T/short.json" \
		--store "$CU" model verify f1
	one_clear_line "cluster, a slot range lost" "cluster is down|cannot connect|lost connection"
	check_exit "cluster, a slot range lost: import exits 1" 1 rec "$W" --config "$T/short.json" \
		--store "$CU" model import --checkpoint-id f3 --model-id Org/Fo --source "$SMALL"
	one_clear_line "cluster, a slot range lost, import" "cluster is down|cannot connect|lost connection"
else
	tap_not_ok "start a 3+3 cluster"
fi

# ---- the password never appears in any output -----------------------------
n=$(grep -c -F -- "$PW" "$ALL")
check "the password appears in no output ($(wc -l < "$ALL") lines searched, $n hits)" test "$n" = 0

tap_done
