#!/bin/sh
# redis_edges.sh - Redis servers that would make wstore lie or hang (suite
# "redis-edges"); each server is started here on a free loopback port:
#  - maxmemory-policy allkeys-lru / volatile-lru: writers are refused with
#    the setting to change, readers still work;
#  - CONFIG renamed away on an evicting server: a warning, and an import
#    whose chunks are evicted is never left READY;
#  - a listener that accepts and never answers: "timed out after N s";
#  - replica_num: an import needs that many copies acknowledged.
TAP_SUITE=redis-edges
. "$(dirname "$0")/../lib/suite.sh"
. "$HERE/lib/redis.sh"
MUTE=
suite_cleanup() {
	[ -n "$MUTE" ] && kill $MUTE 2>/dev/null
	redis_stop_all >/dev/null 2>&1
}
unset WSTORE_REDIS_PASSWORD WSTORE_STORE

SMALL="$T/small"
python3 "$HERE/tools/mkckpt.py" "$SMALL" --size 60000 --shards 2 >/dev/null
BIG="$T/big"
python3 "$HERE/tools/mkckpt.py" "$BIG" --size 12000000 --shards 2 >/dev/null

# status_of URL ID: READY / FAILED or "absent"
status_of() {
	"$W" --store "$1" --json model inspect "$2" 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])' 2>/dev/null ||
		echo absent
}

# ---- evicting policies are refused for writers ------------------------------
for pol in allkeys-lru volatile-lfu; do
	mkdir -p "$T/$pol"
	if ! _redis_start "$T/$pol" --maxmemory 64mb --maxmemory-policy $pol; then
		tap_not_ok "start a server with maxmemory-policy $pol"
		continue
	fi
	P=$_REDIS_LAST_PORT
	U="redis://127.0.0.1:$P"
	check_exit "$pol: import is refused" 1 "$W" --store "$U" model import \
		--checkpoint-id e --model-id M --source "$SMALL" --chunk-size 16K
	check_grep "$pol: the error names the policy and the setting to change" \
		"maxmemory-policy '$pol'.*set maxmemory-policy to noeviction" "$OUT"
	check_one_line "$pol: one line" "$OUT"
	n=$(redis_cli "$P" dbsize)
	check "$pol: nothing was written ($n keys)" test "$n" = 0
	check_exit "$pol: list (a reader) still works" 0 "$W" --store "$U" model list
	redis_cli "$P" config set maxmemory-policy noeviction >/dev/null
	check_exit "$pol changed to noeviction: import succeeds" 0 "$W" --store "$U" \
		model import --checkpoint-id e --model-id M --source "$SMALL" --chunk-size 16K
	redis_cli "$P" config set maxmemory-policy $pol >/dev/null
	check_exit "$pol: verify (a reader) works" 0 "$W" --store "$U" model verify e
	# a chunk evicted behind wstore's back is reported as missing
	k=$(redis_cli "$P" --scan --pattern 'weight/models/e/files/*/chunks/00000000' | head -1)
	redis_cli "$P" del "$k" >/dev/null
	check_exit "$pol: verify after a chunk was evicted exits 3" 3 "$W" --store "$U" model verify e
	check_grep "$pol: and names the chunk as missing" "chunk '$k' is missing" "$OUT"
	check_exit "$pol: delete is refused too" 1 "$W" --store "$U" model delete e
	redis_kill_port "$P"
done

# ---- CONFIG renamed away: warn, and never READY with chunks evicted ---------
mkdir -p "$T/noconfig"
if _redis_start "$T/noconfig" --maxmemory 3mb --maxmemory-policy allkeys-lru \
	--rename-command CONFIG ""; then
	P=$_REDIS_LAST_PORT
	U="redis://127.0.0.1:$P"
	check_exit "no CONFIG: a small import succeeds" 0 "$W" --store "$U" model import \
		--checkpoint-id s --model-id M --source "$SMALL" --chunk-size 16K
	check_grep "no CONFIG: with a warning naming CONFIG and maxmemory-policy" \
		"^wstore: warning: redis at 127.0.0.1:$P does not allow CONFIG GET.*maxmemory-policy" "$OUT"
	k=1
	ok=1
	while [ $k -le 3 ]; do
		"$W" --store "$U" model import --checkpoint-id big$k --model-id M \
			--source "$BIG" --chunk-size 16K >"$T/big.out" 2>&1
		rc=$?
		st=$(status_of "$U" big$k)
		if [ "$st" = READY ]; then
			"$W" --store "$U" model verify big$k >"$T/big.v" 2>&1 ||
				{ ok=0; tap_not_ok "no CONFIG: import $k left READY with chunks gone" "$(tail -2 "$T/big.v")"; }
		elif [ $rc = 0 ]; then
			ok=0; tap_not_ok "no CONFIG: import $k exited 0 but is $st"
		elif ! grep -q "gone from the store\|out of memory\|would not fit in the store" "$T/big.out"; then
			ok=0; tap_not_ok "no CONFIG: import $k failed without saying why" "$(tail -2 "$T/big.out")"
		fi
		k=$((k + 1))
	done
	[ $ok = 1 ] && tap_ok "no CONFIG, evicting: 3 imports larger than maxmemory never leave a READY checkpoint with chunks gone"
	st=$(status_of "$U" s)
	if [ "$st" = READY ] && "$W" --store "$U" model verify s >/dev/null 2>&1; then
		# every big import was refused before its first chunk (it
		# could not fit in maxmemory): nothing was evicted
		tap_ok "no CONFIG: the small checkpoint is intact (big imports refused up front)"
	elif [ "$st" = READY ]; then
		check_exit "no CONFIG: the evicted small checkpoint fails verify (exit 3)" 3 "$W" --store "$U" model verify s
		check_grep "and names a missing chunk" "chunk '.*' is missing" "$OUT"
	else
		tap_ok "no CONFIG: the small checkpoint's manifest was evicted too ($st)"
	fi
	redis_kill_port "$P"
else
	tap_not_ok "start a server with CONFIG renamed away"
fi

# ---- a server that accepts and never answers -------------------------------
python3 -c '
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
print(s.getsockname()[1], flush=True)
held = []
while True:
    held.append(s.accept()[0])
' >"$T/mute.port" &
MUTE=$!
wait_for 5 test -s "$T/mute.port"
MP=$(cat "$T/mute.port")
t0=$(date +%s)
check_exit "mute server: list fails" 1 env WSTORE_COMMAND_TIMEOUT_MS=1500 \
	timeout 20 "$W" --store "redis://127.0.0.1:$MP" model list
t1=$(date +%s)
check_grep "mute server: says timed out after 1.5 s" "redis at 127.0.0.1:$MP.*timed out after 1.5 s" "$OUT"
check_one_line "mute server: one line" "$OUT"
if printf %s "$OUT" | grep -q "temporarily unavailable"; then
	tap_not_ok "mute server: no 'Resource temporarily unavailable'" "$OUT"
else tap_ok "mute server: no 'Resource temporarily unavailable'"; fi
check "mute server: gave up within 10 s ($((t1 - t0)) s)" test $((t1 - t0)) -lt 10
check_exit "mute cluster seed: import fails" 1 env WSTORE_COMMAND_TIMEOUT_MS=1000 \
	timeout 20 "$W" --store "redis-cluster://127.0.0.1:$MP" model import \
	--checkpoint-id m --model-id M --source "$SMALL"
check_grep "mute cluster seed: says timed out after 1 s" "timed out after 1 s" "$OUT"
# a signal ends a command that waits for the server (default 60 s timeout)
# within a second or two: ^C and SIGTERM are not held for the timeout
for sig in INT TERM; do
	"$W" --store "redis://127.0.0.1:$MP" model pull M/x --dest "$T/sig$sig" \
		>/dev/null 2>"$T/sig$sig.err" &
	p=$!
	# it waits for the reply once it holds a socket to the server
	wait_for 10 sh -c "ls -l /proc/$p/fd 2>/dev/null | grep -q socket:"
	t0=$(date +%s%N)
	kill -$sig $p
	wait_exit 10 $p
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	check "mute server: SIG$sig ends a waiting pull with exit 1 ($rc)" test "$rc" = 1
	check "mute server: ... within 2 s (${ms} ms)" test "$ms" -lt 2000
	check_grep "mute server: ... saying interrupted" "interrupted" "$(cat "$T/sig$sig.err")"
done
kill $MUTE 2>/dev/null
wait $MUTE 2>/dev/null
MUTE=

# ---- replica_num: copies an import needs -------------------------------------
mkdir -p "$T/rmaster" "$T/rreplica"
if _redis_start "$T/rmaster"; then
	P=$_REDIS_LAST_PORT
	U="redis://127.0.0.1:$P"
	check_exit "replica_num 2, no replica: import is refused" 1 "$W" --store "$U" \
		model import --checkpoint-id r --model-id M --source "$SMALL" --replica-num 2
	check_grep "naming the replicas it needs" "redis at 127.0.0.1:$P has 0 connected replicas, but replica_num 2 needs 1" "$OUT"
	n=$(redis_cli "$P" dbsize)
	check "and nothing was written ($n keys)" test "$n" = 0
	check_exit "WSTORE_REPLICA_NUM=2 is the same setting" 1 env WSTORE_REPLICA_NUM=2 \
		"$W" --store "$U" model import --checkpoint-id r --model-id M --source "$SMALL"
	export WSTORE_LIBRARY="$(cd "$BUILD" && pwd)/libwstore.so" PYTHONPATH="$HERE/../python"
	# a sanitizer build (make asan): its runtime must come first in python
	asan=$(ldd "$WSTORE_LIBRARY" 2>/dev/null | awk '/libasan/ { print $3 }')
	PYASAN="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	check "Python: Store(settings={'replica_num': 2}) is refused; import_ has no replica_num" env LD_PRELOAD="$asan" "$PYASAN" python3 -c "
import wstore
try:
    wstore.Store('$U', settings={'replica_num': 2})
    raise SystemExit('opened for writing')
except wstore.WstoreError as e:
    assert 'needs 1' in str(e), e
s = wstore.Store('$U')
try:
    s.import_('$SMALL', 'r', 'M', replica_num=2)
    raise SystemExit('replica_num= accepted')
except TypeError:
    pass
"
	if _redis_start "$T/rreplica" --replicaof 127.0.0.1 "$P"; then
		has_replica() { redis_cli "$P" info replication | grep -q 'connected_slaves:1'; }
		wait_for 10 has_replica
		check_exit "replica_num 2 with one replica: import succeeds" 0 "$W" --store "$U" \
			model import --checkpoint-id r --model-id M --source "$SMALL" --replica-num 2
		RP=$_REDIS_LAST_PORT
		n=$(redis_cli "$RP" --scan --pattern 'weight/models/r/*' | wc -l)
		check "and the replica holds its keys ($n)" test "$n" -gt 1
		check_exit "replica_num 3 with one replica: refused" 1 "$W" --store "$U" \
			model import --checkpoint-id r3 --model-id M --source "$SMALL" --replica-num 3
		check_grep "needs 2" "has 1 connected replicas, but replica_num 3 needs 2" "$OUT"
		redis_kill_port "$RP"
	else
		tap_not_ok "start a replica"
	fi
	redis_kill_port "$P"
else
	tap_not_ok "start a server for replica_num"
fi

tap_done
