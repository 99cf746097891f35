#!/bin/sh
# mooncake_faults.sh - the wstore CLI, the mount and the Python binding
# against a real Mooncake Store that fails or is interrupted:
#  - bad input refused before connecting; an unreachable master fails
#    within the connect timeout with one line naming it; gc says it cannot
#    list keys; --verbose brings Mooncake's own log back;
#  - SIGINT and SIGTERM mid-import: "import interrupted", a FAILED
#    manifest, the lock released, no chunk left;
#  - SIGKILL mid-import: the intent record lists the chunks; delete
#    reclaims every one (waiting out a half-written one); re-import after a
#    kill succeeds and verifies;
#  - the storage node killed mid-import: one clear line, never READY;
#  - the way to the master cut (a forwarder stopped) for 10 s mid-pull:
#    the pull completes with the right bytes (failed RPCs are retried);
#  - CLI commands leave no client registered on the metadata server, and
#    a fixed client name can be used by one command after another;
#  - a mount daemon on Mooncake serves the bytes and unmounts on SIGTERM;
#    Python iter_tensors reads a checkpoint.
# Starts its own cluster (tests/lib/mooncake.sh; the master discards a
# dead writer's unfinished put after 2 s, a dead node after 3 s) and stops
# it on exit.  Raw keys
# are looked at with build/mooncake-probe.
#   BUILD=build sh tests/e2e/mooncake_faults.sh
TAP_SUITE=mooncake-faults
. "$(dirname "$0")/../lib/suite.sh"
. "$HERE/lib/mooncake.sh"
MNT="$T/mnt"
suite_cleanup() {
	if grep -q " $MNT fuse" /proc/mounts 2>/dev/null; then
		"$W" umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	fi
	mooncake_stop_all >/dev/null 2>&1
}
PROBE=$(cd "$BUILD" && pwd)/mooncake-probe

if ! mooncake_installed; then
	tap_skip "the suite" "Mooncake is not installed in $MOONCAKE_HOME"
	tap_done
	exit 0
fi
# a dead node's objects are dropped 3 s after its last heartbeat
MOONCAKE_TEST_MASTER_ARGS="--put_start_discard_timeout_sec=2 --client_ttl=3"
MOONCAKE_TEST_SEGMENT="2 GB"
if ! mooncake_start "$T/cluster" 2s; then
	tap_not_ok "a Mooncake master and storage node start"
	tap_done
	exit 1
fi
ws() { "$W" --store mooncake "$@"; }

status_of() {
	ws --json model inspect "$1" 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])' 2>/dev/null ||
		echo absent
}
# keys_of ID: the chunk keys ID's intent record lists (into $T/ID.keys)
keys_of() {
	"$PROBE" get "weight/intents/models/$1" 2>/dev/null | python3 -c '
import json, sys
for k in json.load(sys.stdin)["chunks"]: print(k)' > "$T/$1.keys"
	[ -s "$T/$1.keys" ]
}
# present KEYFILE: how many of the keys are there (or half-written)
present() {
	# shellcheck disable=SC2046
	"$PROBE" exist $(cat "$1") | grep -vc '^0$'
}
intent_exists() { [ "$("$PROBE" exist "weight/intents/models/$1")" = 1 ]; }
# some_chunk ID: at least one of ID's chunks is stored
some_chunk() { [ "$(present "$T/$1.keys")" -gt 0 ]; }

SRC="$T/src"
mkdir -p "$SRC"
head -c 402653184 /dev/urandom > "$SRC/big.bin"	# 384 MiB: 24 chunks
printf 'small\n' > "$SRC/config.json"
# imp ID: an import slowed down (100 ms before every store call) so that
# it can be interrupted at a known point; exec, so that "imp ... &" gives
# the pid of wstore itself
imp() { WSTORE_FAULTS=delay=100 exec "$W" --store fault+mooncake model import \
	--checkpoint-id "$1" --model-id M --source "$SRC" --chunk-size 16MiB \
	--jobs 1; }

# ---- bad input, unreachable master ----------------------------------------
t0=$(date +%s)
check_exit "unreachable master fails" 1 ws --master-server-addr 127.0.0.1:1 model list
check_grep "it names the master" "cannot connect to mooncake master '127\.0\.0\.1:1'" "$OUT"
check_one_line "it is one line" "$OUT"
check "within the connect timeout ($(($(date +%s) - t0)) s)" test $(($(date +%s) - t0)) -le 4
check_exit "invalid id refused before connecting" 1 ws --master-server-addr 127.0.0.1:1 model inspect 'a b'
check_grep "says the id is invalid" "invalid checkpoint id 'a b'" "$OUT"
check_exit "invalid import id refused before connecting" 1 ws --master-server-addr 127.0.0.1:1 \
	model import --checkpoint-id ../x --model-id M --source "$SRC"
check_grep "import says the id is invalid" "invalid checkpoint id '\.\./x'" "$OUT"
check_exit "bad protocol refused" 1 ws --protocol udp model list
check_grep "names the protocol" "key 'protocol' must be 'tcp' or 'rdma', got 'udp'" "$OUT"
check_one_line "bad protocol is one line" "$OUT"
check_exit "gc on a store that cannot list keys" 1 ws admin gc
check_grep "gc says it cannot list" "cannot list" "$OUT"
check_one_line "gc refusal is one line" "$OUT"
check_exit "missing id, quiet by default" 1 ws model inspect nope
check_one_line "Mooncake's log is off by default" "$OUT"
check_exit "missing id with --verbose" 1 ws --verbose model inspect nope
check "--verbose lets Mooncake log ($(printf '%s\n' "$OUT" | wc -l) lines)" \
	test "$(printf '%s\n' "$OUT" | wc -l)" -gt 3

# ---- SIGINT and SIGTERM mid-import -----------------------------------------
for sig in INT TERM; do
	id="s$sig"
	imp "$id" > "$T/$id.out" 2>&1 &
	pid=$!
	if wait_for 30 keys_of "$id" && wait_for 30 some_chunk "$id"; then
		kill -"$sig" "$pid"
	else
		kill -9 "$pid"
	fi
	wait "$pid"
	rc=$?
	check "SIG$sig mid-import: exit 1, no crash ($rc)" test "$rc" = 1
	check_grep "SIG$sig: says interrupted" "import interrupted" "$(cat "$T/$id.out")"
	check "SIG$sig: FAILED manifest ($(status_of "$id"))" test "$(status_of "$id")" = FAILED
	check "SIG$sig: no chunk left ($(present "$T/$id.keys"))" test "$(present "$T/$id.keys")" = 0
	check "SIG$sig: intent record dropped" sh -c "! $PROBE exist weight/intents/models/$id | grep -q 1"
	t0=$(date +%s)
	check_exit "SIG$sig: lock released (delete runs at once)" 0 ws model delete "$id"
	check "SIG$sig: delete took under 5 s" test $(($(date +%s) - t0)) -lt 5
done

# ---- SIGKILL mid-import: delete and re-import reclaim everything ------------
imp k1 > "$T/k1.out" 2>&1 &
pid=$!
if wait_for 30 keys_of k1 && wait_for 30 some_chunk k1; then :; fi
kill -9 "$pid"
wait "$pid" 2>/dev/null
check "SIGKILL: the intent record is left" intent_exists k1
check "SIGKILL: chunks were left ($(present "$T/k1.keys"))" some_chunk k1
check "SIGKILL: no manifest ($(status_of k1))" test "$(status_of k1)" = absent
check_exit "SIGKILL: delete succeeds" 0 ws model delete k1
check "SIGKILL: delete reclaimed every chunk ($(present "$T/k1.keys") left)" \
	test "$(present "$T/k1.keys")" = 0
check "SIGKILL: and the intent record" sh -c "! $PROBE exist weight/intents/models/k1 | grep -q 1"

imp k2 > "$T/k2.out" 2>&1 &
pid=$!
if wait_for 30 keys_of k2 && wait_for 30 some_chunk k2; then :; fi
kill -9 "$pid"
wait "$pid" 2>/dev/null
check_exit "SIGKILL then re-import succeeds" 0 ws model import --checkpoint-id k2 \
	--model-id M --source "$SRC" --chunk-size 16MiB
check_exit "re-imported checkpoint verifies" 0 ws model verify k2
check "no intent record after a READY import" sh -c "! $PROBE exist weight/intents/models/k2 | grep -q 1"

# ---- SIGKILL in the middle of a put: the "being written" window ------------
# A chunk whose writer died stays "being written" (-703) until the master
# discards the put (2 s here, 30 s by default) and a new put replaces it;
# until then a remove fails and a put silently writes nothing.
# half_written ID: one of ID's chunks is being written right now
# (one probe polling every 2 ms: a 256 MiB put lasts a fraction of a second)
half_written() {
	# shellcheck disable=SC2046
	"$PROBE" wait-code -703 30000 $(cat "$T/$1.keys")
}
# kill_mid_put ID: start a plain import of ID (256 MiB chunks), SIGKILL it
# while a chunk is being written; true if a chunk is still half-written
# after the kill (the put seen may end between the probe and the kill; the
# master keeps a dead writer's put for 2 s, so 0.5 s after the kill says)
kill_mid_put() {
	"$W" --store mooncake model import --checkpoint-id "$1" --model-id M \
		--source "$SRC" --chunk-size 256MiB --jobs 1 > "$T/$1.out" 2>&1 &
	_p=$!
	wait_for 30 keys_of "$1" && half_written "$1"
	_r=$?
	kill -9 "$_p"
	wait "$_p" 2>/dev/null
	# shellcheck disable=SC2046
	[ "$_r" = 0 ] && "$PROBE" wait-code -703 500 $(cat "$T/$1.keys")
}
# kill_mid_put_retry BASE: kill_mid_put BASE, BASE-2, BASE-3 until one is
# caught (an attempt that missed is deleted); KILLED names the caught one
kill_mid_put_retry() {
	for KILLED in "$1" "$1-2" "$1-3"; do
		kill_mid_put "$KILLED" && return 0
		ws model delete "$KILLED" --wait 30 >/dev/null 2>&1
	done
	return 1
}
if kill_mid_put_retry h1; then
	check_exit "killed mid-put: re-import at once succeeds" 0 ws model import \
		--checkpoint-id "$KILLED" --model-id M --source "$SRC" --chunk-size 256MiB
	check_grep "it says it waits for the half-written chunk" \
		"chunks/[0-9]+' was left half-written .*waiting up to [0-9]+ s" "$OUT"
	check_exit "killed mid-put: re-imported checkpoint verifies" 0 ws model verify "$KILLED"
	check_exit "killed mid-put: delete" 0 ws model delete "$KILLED"
else
	tap_not_ok "an import was caught in the middle of a put"
fi
if kill_mid_put_retry h2; then
	check_exit "killed mid-put: delete at once succeeds" 0 ws model delete "$KILLED"
	check_grep "delete says it waits for the half-written chunk" "half-written" "$OUT"
	check "killed mid-put: delete reclaimed every chunk ($(present "$T/$KILLED.keys") left)" \
		test "$(present "$T/$KILLED.keys")" = 0
	check "killed mid-put: and the intent record" sh -c "! $PROBE exist weight/intents/models/$KILLED | grep -q 1"
else
	tap_not_ok "an import was caught in the middle of a put"
fi

# ---- the master cut off for 10 s mid-pull -----------------------------------
# The pull reaches the master through a forwarder (tests/fleet/proxy.py, no
# delay, no loss) that is stopped (SIGSTOP) for 10 s: the pull's master
# RPCs time out (command_timeout_ms, 3 s here, so that every RPC caught by
# the cut times out rather than outlast it by a hair), while the
# master itself and its storage node carry on (stopping the master would
# make it drop the node: --client_ttl=3 here).  The pull retries failed
# RPCs for up to WSTORE_MOONCAKE_TRANSFER_WAIT_MS (30 s) and completes.
# The forwarder's port is a random candidate: one another process holds
# makes the forwarder exit, and the next candidate is tried.
pxpid=
for try in 1 2 3 4 5; do
	pxport=$(_mc_port $((40 + try)))
	python3 "$HERE/fleet/proxy.py" 127.0.0.1 "$pxport" 127.0.0.1 \
		"${WSTORE_MASTER_SERVER_ADDR##*:}" 0 0 > "$T/px.log" 2>&1 &
	pxpid=$!
	wait_for 10 sh -c "grep -q listening '$T/px.log' || ! kill -0 $pxpid"
	grep -q listening "$T/px.log" && break
	kill "$pxpid" 2>/dev/null
	wait "$pxpid" 2>/dev/null
	pxpid=
done
check "master cut: the forwarder listens (port $pxport, try $try)" test -n "$pxpid"
WSTORE_MASTER_SERVER_ADDR=127.0.0.1:$pxport WSTORE_COMMAND_TIMEOUT_MS=3000 \
	WSTORE_FAULTS=delay=300 \
	"$W" --store fault+mooncake model pull k2 --dest "$T/mp" --jobs 1 \
	> "$T/mp.out" 2>&1 &
pid=$!
check "master cut: the pull started" wait_for 30 test -d "$T/mp"
kill -STOP "$pxpid"
running=0
kill -0 "$pid" 2>/dev/null && running=1
sleep 10 # the length of the cut, not a wait for something
kill -CONT "$pxpid"
wait "$pid"
rc=$?
kill -TERM "$pxpid"
wait "$pxpid" 2>/dev/null
check "master cut: the pull was running when the cut began" test $running = 1
check "master cut: the pull across a 10 s cut completes ($rc: $(head -c 300 "$T/mp.out"))" \
	test "$rc" = 0
check "master cut: with the source's bytes" cmp "$T/mp/big.bin" "$SRC/big.bin"

# ---- no stale client left on the metadata server ------------------------------
# name_of FILE: the client name (HOST:PORT) a --verbose command logged
name_of() {
	sed -n 's/.*parseHostNameWithPort. server_name: \([^ ]*\) port: \([0-9]*\).*/\1:\2/p' "$1" | head -1
}
# registered NAME: the HTTP status of NAME's rpc_meta key (200, or 404 once
# gone; 000 if the server cannot be reached, which counts as stale)
registered() {
	curl -s -o /dev/null -w '%{http_code}' \
		"$WSTORE_METADATA_SERVER?key=mooncake%2Frpc_meta%2F$(printf '%s' "$1" | sed 's/:/%3A/g')"
}
stale=0
names=""
for i in 1 2 3 4; do
	ws --verbose model list > "$T/name$i.out" 2>&1
	n=$(name_of "$T/name$i.out")
	names="$names $n"
	[ -n "$n" ] && [ "$(registered "$n")" = 404 ] || stale=$((stale + 1))
done
check "4 CLI commands leave no client registered (names:$names; stale $stale)" \
	test $stale = 0
fixed=127.0.0.1:$(( $(_mc_port 31) ))
check_exit "a fixed client name ($fixed): a first command" 0 env \
	WSTORE_LOCAL_HOSTNAME=$fixed "$W" --store mooncake model list
check_exit "the same name: a second command (no duplicate left)" 0 env \
	WSTORE_LOCAL_HOSTNAME=$fixed "$W" --store mooncake model list

# ---- mount and Python on Mooncake -------------------------------------------
if [ -c /dev/fuse ]; then
	mkdir -p "$MNT"
	check_exit "mount daemon on mooncake" 0 ws mount "$MNT"
	check "mounted file equals the source" cmp "$MNT/k2/big.bin" "$SRC/big.bin"
	dpid=$(pgrep -f "wstore-mount.* $MNT" | head -1)
	check "daemon pid found" test -n "$dpid"
	[ -n "$dpid" ] && kill -TERM "$dpid"
	check "SIGTERM: the daemon exits" wait_for 20 sh -c "! kill -0 $dpid"
	check "SIGTERM: the mount is gone (no dead mount)" sh -c "! grep -q ' $MNT ' /proc/mounts"
	check "SIGTERM: the mountpoint is usable" ls "$MNT"
else
	tap_not_ok "/dev/fuse is present for the mount checks"
fi
python3 "$HERE/tools/mkckpt.py" "$T/st" --size 3000000 --shards 2 >/dev/null
check_exit "import a safetensors checkpoint" 0 ws model import --checkpoint-id p1 \
	--model-id M --source "$T/st"
check_exit "inspect on mooncake" 0 ws model inspect p1
check "inspect skips whole-chunk header reads (64 MiB chunks)" \
	sh -c "! printf '%s' \"\$1\" | grep -q 'safetensors:'" - "$OUT"
check_exit "inspect --tensors" 0 ws model inspect p1 --tensors
check_grep "inspect --tensors summarises tensors" "\[safetensors: [0-9]+ tensors" "$OUT"
check_exit "python iter_tensors on mooncake" 0 env \
	PYTHONPATH="$HERE/../python" WSTORE_LIBRARY="$(cd "$BUILD" && pwd)/libwstore.so" \
	python3 -c '
import wstore
s = wstore.Store("mooncake")
n = sum(1 for _ in s.open("p1").iter_tensors())
assert n > 0, n
print(n, "tensors")'
check_grep "python read tensors" "[0-9]+ tensors" "$OUT"

# ---- storage node lost mid-import ------------------------------------------
imp n1 > "$T/n1.out" 2>&1 &
pid=$!
if wait_for 30 keys_of n1 && wait_for 30 some_chunk n1; then :; fi
mooncake_kill_node
wait "$pid"
rc=$?
OUT=$(cat "$T/n1.out")
check "node lost: import exits 1 ($rc)" test "$rc" = 1
check_grep "node lost: says a storage node is gone" "storage node" "$OUT"
check_one_line "node lost: one line" "$OUT"
check "node lost: never READY ($(status_of n1))" test "$(status_of n1)" != READY
# in this shell, not in check's subshell: the cleanup must know the pid
if mooncake_start_node >/dev/null 2>&1; then tap_ok "node restarts"
else tap_not_ok "node restarts"; fi
# until the master drops the dead node's objects (client_ttl), reads of
# them fail; then the delete goes through (what the import wrote, its
# intent record included, may have been lost with the node)
check "node lost: delete succeeds once the master has dropped the node" \
	wait_for 30 ws model delete --missing-ok n1
check_exit "node lost: import works again" 0 ws model import --checkpoint-id n2 \
	--model-id M --source "$SRC" --chunk-size 16MiB
check_exit "node lost: and verifies" 0 ws model verify n2

tap_done
