#!/bin/sh
# tests/redis/run.sh [BUILD] - the Redis backend against real servers: a
# standalone server (TCP, unix socket, database 1, password from the
# environment) and a 3+3 cluster, plus faults: maxmemory, an over-long
# value, the server killed mid-write and restarted, a cluster master killed
# (its replica takes over; keys written before must still be readable).
# Starts and stops its own servers (tests/lib/redis.sh).  Prints
# "redis-suite: N passed, N failed, N skipped" (it skips nothing).
set -u
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$(cd "$BUILD" && pwd)/redis-backend-tests
. "$HERE/../lib/redis.sh"
. "$HERE/../lib/tap.sh"	# wait_for, wait_exit

T=$(mktemp -d "${TMPDIR:-/tmp}/wstore-redis.XXXXXX")
trap 'redis_stop_all; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
pass=0
fail=0

START=$(date +%s)
ok() {
	pass=$((pass + 1))
	echo "ok   $1 [$(($(date +%s) - START))s]"
}

bad() {
	fail=$((fail + 1))
	echo "FAIL $1 [$(($(date +%s) - START))s]"
}

# step NAME CMD...: CMD must succeed
step() {
	_name=$1
	shift
	if "$@" > "$T/out" 2>&1; then ok "$_name"; else
		bad "$_name"
		sed 's/^/#   /' "$T/out"
	fi
}

# step_fails NAME TEXT CMD...: CMD must fail, saying TEXT
step_fails() {
	_name=$1 _text=$2
	shift 2
	if "$@" > "$T/out" 2>&1; then
		bad "$_name (succeeded)"
	elif grep -q "$_text" "$T/out"; then
		ok "$_name"
	else
		bad "$_name (no '$_text' in output)"
		sed 's/^/#   /' "$T/out"
	fi
}

standalone() {
	P=$WSTORE_TEST_REDIS_PORT
	step "standalone tcp contract" "$BIN" "$WSTORE_TEST_REDIS_URL"
	step "standalone unix contract" "$BIN" "$WSTORE_TEST_REDIS_UNIX_URL"
	step "standalone database 1" "$BIN" "$WSTORE_TEST_REDIS_URL/1" \
		write-many 20
	step_fails "database 1 is separate" "not found" \
		"$BIN" "$WSTORE_TEST_REDIS_URL" check-many 20
	step "write database 0" "$BIN" "$WSTORE_TEST_REDIS_URL" write-many 20
	step "password from WSTORE_REDIS_PASSWORD" env \
		WSTORE_REDIS_PASSWORD="$WSTORE_TEST_REDIS_PASSWORD" \
		"$BIN" "redis://127.0.0.1:$P" check-many 20
	step_fails "no password" "set redis_password" \
		"$BIN" "redis://127.0.0.1:$P" check-many 1

	redis_cli "$P" config set maxmemory 1 >/dev/null
	step "maxmemory: clear error" "$BIN" "$WSTORE_TEST_REDIS_URL" \
		expect-put-error 1000 "out of memory (maxmemory)"
	redis_cli "$P" config set maxmemory 0 >/dev/null
	redis_cli "$P" config set proto-max-bulk-len 1mb >/dev/null
	step "proto-max-bulk-len: clear error" "$BIN" \
		"$WSTORE_TEST_REDIS_URL" expect-put-error 2000000 \
		"proto-max-bulk-len"
	redis_cli "$P" config set proto-max-bulk-len 512mb >/dev/null

	# killed mid-write: a clean error, no hang; works again after restart
	dbsize() { redis_cli "$P" dbsize 2>/dev/null | tr -dc 0-9; }
	_base=$(dbsize)
	"$BIN" "$WSTORE_TEST_REDIS_URL" write-many 1000000 > "$T/kill" 2>&1 &
	_w=$!
	# kill it once the writer is under way (some keys are in)
	has_keys() { [ "$(dbsize)" -gt $((${_base:-0} + 100)) ] 2>/dev/null; }
	wait_for 20 has_keys
	redis_kill_port "$P"
	if wait_exit 60 $_w; then
		bad "server killed mid-write (writer succeeded)"
	elif grep -q "redis at 127.0.0.1:$P" "$T/kill"; then
		ok "server killed mid-write"
		grep -m1 -o 'last error: .*' "$T/kill" | sed 's/^/     (/'
	else
		bad "server killed mid-write"
		sed 's/^/#   /' "$T/kill"
	fi
	step_fails "server down: cannot connect" "cannot connect to redis at" \
		"$BIN" "$WSTORE_TEST_REDIS_URL" check-many 1
	redis_restart_port "$P"
	step "server restarted: write" "$BIN" "$WSTORE_TEST_REDIS_URL" \
		write-many 50
	step "server restarted: read" "$BIN" "$WSTORE_TEST_REDIS_URL" \
		check-many 50
}

cluster() {
	URL=$WSTORE_TEST_CLUSTER_URL
	step "cluster contract" "$BIN" "$URL"
	step "cluster write 500 keys" "$BIN" "$URL" write-many 500
	# shellcheck disable=SC2086
	redis_wait_replicated $WSTORE_TEST_CLUSTER_PORTS
	# kill the first seed of the URL if it is a master, else any master
	# shellcheck disable=SC2086
	set -- $WSTORE_TEST_CLUSTER_PORTS
	M=$(redis_cli "$1" cluster nodes | awk -v p="127.0.0.1:$1@" '
		$3 ~ /master/ && index($2, p) == 1 { print $2; exit }
		$3 ~ /master/ && !m { m = $2 }
		END { if (m) print m }' | head -n1 | sed 's/.*:\([0-9]*\)@.*/\1/')
	redis_kill_port "$M"
	echo "     (killed master on port $M)"
	step "cluster reads during failover" "$BIN" "$URL" check-many 500
	# shellcheck disable=SC2086
	if redis_wait_cluster_ok $WSTORE_TEST_CLUSTER_PORTS; then
		ok "replica took over"
	else
		bad "replica took over"
	fi
	step "cluster reads after failover" "$BIN" "$URL" check-many 500
	step "cluster contract after failover" "$BIN" "$URL"
}

if redis_start_standalone "$T/standalone" 2> "$T/start.err"; then
	standalone
else
	bad "start standalone server"
	sed 's/^/#   /' "$T/start.err"
fi
if redis_start_cluster "$T/cluster" 2> "$T/start.err"; then
	cluster
else
	bad "start cluster"
	sed 's/^/#   /' "$T/start.err"
fi
echo "redis-suite: $pass passed, $fail failed, 0 skipped"
[ "$fail" = 0 ]
