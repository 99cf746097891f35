#!/bin/sh
# serve_guard.sh - `wstore serve` against careless and hostile clients and
# a failing store: hundreds of sockets that never finish their headers
# (other clients still served; the sockets closed after --header-timeout),
# a lease held through a --mmap download, paths that are not UTF-8 (404
# with the Hub's X-Error-Code), control bytes kept out of the access log,
# the bearer token, paths-info bounded, SIGTERM and SIGHUP (no new
# connection accepted, the download in flight finished), no warning at
# start; idle sockets from several addresses filling every slot (a new
# client still answered); transient store errors (fault backend, a Redis server stopped with
# SIGSTOP): 503 with Retry-After, never another checkpoint and never 404;
# a read failing mid-body cuts the transfer.
#   BUILD  the build directory holding wstore
TAP_SUITE=serve-guard
. "$(dirname "$0")/../lib/suite.sh"
. "$HERE/lib/redis.sh"
. "$HERE/lib/serve.sh"
suite_cleanup() {
	serve_stop_all
	redis_stop_all >/dev/null 2>&1
}
STORE="$T/store"
ws() { "$W" --store "$STORE" "$@"; }

SRC="$T/src"
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 8000000 --shards 1 >/dev/null
BIG=$(cd "$SRC" && ls -S | head -1)
check "import (1 MiB chunks: the shard spans 8)" ws model import \
	--checkpoint-id g-1 --model-id org/g --source "$SRC" --chunk-size 1MiB --quiet
# 16 MiB, more than the socket buffers hold: a slow client keeps the server
# sending for seconds
mkdir -p "$T/slowsrc"
head -c 16777216 /dev/urandom > "$T/slowsrc/slow.bin"
SLOW=$T/slowsrc/slow.bin
# --force: one bare file, not a whole checkpoint, on purpose
check "import a 16 MiB file" ws model import --checkpoint-id s-1 \
	--model-id org/s --source "$T/slowsrc" --chunk-size 1MiB --quiet --force
# slow_get URL OUT: download at 2 MB/s with a small receive buffer ($! is
# the client)
slow_get() { python3 "$HERE/tools/slowget.py" "$1" "$2" 2000000 & }

# code_of CURL-ARGS...: "STATUS X-Error-Code" of a request
code_of() { curl -s -D- -o /dev/null "$@" | tr -d '\r' | awk '/^HTTP/ {s=$2} /^X-Error-Code:/ {c=$2} END {print s, c}'; }
# nleases ID: live leases of ID as df counts them
nleases() {
	ws --json df 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(c["leases"] for c in d["checkpoints"] if c["checkpoint_id"] == sys.argv[1]))' "$1"
}
has_lease() { [ "$(nleases "$1")" -ge 1 ]; }
# refused URL: a new connection is refused at once (curl exit 7), not
# left hanging (exit 28 after --max-time)
refused() {
	curl -s --max-time 5 -o /dev/null "$1"
	[ $? = 7 ]
}

# ---- start ---------------------------------------------------------------------
serve_start main "$STORE" --header-timeout 2 || { tap_done; exit 1; }
B=$SERVE_URL
check_grep "no warning at start: the first line says where it listens" \
	'^wstore serve: listening on' "$(head -1 "$SERVE_LOG")"
check "no message of libmicrohttpd's own logger" sh -c "! grep -q 'MHD_OPTION\|first option' '$SERVE_LOG'"

# ---- sockets that never finish their headers ------------------------------------
# 300 connections from 127.0.0.2 (more than the 256 the server takes), each
# with half a request line; then /healthz and a download from 127.0.0.1
# while they are open, and whether the server has closed them after the
# header timeout (2 s here)
serve_idle_checks "300 idle sockets of another client" org/g "$SRC/$BIG"
check_grep "refused connections make few log lines" '^[0-9]+$' "$(n=$(grep -c 'connection limit' "$SERVE_LOG"); [ "$n" -le 20 ] && echo "$n")"
check_grep "the server serves on" '^ok$' "$(curl -sf --max-time 5 "$B/healthz")"

# ---- idle sockets from many addresses ------------------------------------------
# 20 sockets that send nothing from 5 addresses (4 each, the per-address
# cap of 16 slots) against --max-connections 16 and a long header timeout:
# a new client is still answered at once, an idle socket closed for it
_mp=$SERVE_PID; _ml=$SERVE_LOG; _mu=$SERVE_URL
serve_start slots "$STORE" --max-connections 16 --header-timeout 30 || { tap_done; exit 1; }
SLOTS_PID=$SERVE_PID
_so=$T/slots.out
/usr/bin/python3 "$HERE/tools/fillslots.py" "${SERVE_URL##*:}" 5 4 "$_so"
echo "# $(tr '\n' ' ' < "$_so")"
if grep -q '^healthz ok' "$_so" && awk '/^healthz/ {exit !($3 < 3)}' "$_so"; then
	tap_ok "all slots held by idle sockets of 5 addresses: /healthz answers at once"
else tap_not_ok "all slots held by idle sockets of 5 addresses: /healthz answers at once" "$(cat "$_so")"; fi
check_grep "... an idle socket closed for it" '^closed [1-9]' "$(cat "$_so")"
kill "$SLOTS_PID" 2>/dev/null
wait "$SLOTS_PID" 2>/dev/null
SERVE_PID=$_mp; SERVE_LOG=$_ml; SERVE_URL=$_mu

# ---- paths that are not UTF-8 ----------------------------------------------------
check_grep "file path not UTF-8: 404 EntryNotFound" '^404 EntryNotFound$' "$(code_of "$B/org/g/resolve/main/%ff%fe.json")"
check_grep "repository not UTF-8: 404 RepoNotFound" '^404 RepoNotFound$' "$(code_of "$B/org/%c3%28/resolve/main/config.json")"
check_grep "revision not UTF-8: 404 RevisionNotFound" '^404 RevisionNotFound$' "$(code_of "$B/org/g/resolve/%80/config.json")"
check_grep "API of a repository not UTF-8: 404 RepoNotFound" '^404 RepoNotFound$' "$(code_of "$B/api/models/org/%ed%a0%80")"
check_grep "tree of a directory not UTF-8: 404 EntryNotFound" '^404 EntryNotFound$' "$(code_of "$B/api/models/org/g/tree/main/%ff")"
M=$(curl -s "$B/org/g/resolve/main/%ff.json")
check "... the error body is JSON" python3 -c 'import json,sys; json.loads(sys.argv[1])["error"]' "$M"

# ---- the access log ------------------------------------------------------------
python3 - "$B" <<'EOF'
import socket, sys
port = int(sys.argv[1].rsplit(":", 1)[1])
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"GET /\x1b]0;pwned\x07\x1b[31mred\x9b2J HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
s.settimeout(5)
while s.recv(4096):
    pass
EOF
wait_for 5 grep -aq 'pwned' "$SERVE_LOG"
if ! grep -aq 'pwned' "$SERVE_LOG"; then
	tap_not_ok "access log: the request with control bytes is logged"
elif grep -a 'pwned' "$SERVE_LOG" | LC_ALL=C grep -aq "$(printf '[\001-\037\177\200-\377]')"; then
	tap_not_ok "access log: control bytes escaped" "$(grep -a pwned "$SERVE_LOG" | od -c | head -3)"
else tap_ok "access log: control bytes escaped"; fi
check_grep "... written as \\xNN" '/\\x1b\]0;pwned\\x07\\x1b\[31mred\\x9b2J 404' "$(cat "$SERVE_LOG")"

# ---- paths-info is bounded ------------------------------------------------------
python3 -c 'print("&".join("paths=f%d" % i for i in range(1001)))' > "$T/many"
check_grep "paths-info of 1001 paths: 400" '^400' "$(code_of -X POST --data-binary @"$T/many" "$B/api/models/org/g/paths-info/main")"
python3 -c 'import json; print(json.dumps({"paths": ["config.json"] * 1000}))' > "$T/many.json"
check_grep "paths-info of 1000 paths: 200" '^200' "$(code_of -X POST -H 'Content-Type: application/json' --data-binary @"$T/many.json" "$B/api/models/org/g/paths-info/main")"

# ---- SIGTERM: stop listening at once, finish the download in flight --------------
rm -f "$T/slow"
slow_get "$B/org/s/resolve/main/slow.bin" "$T/slow"; C=$!
wait_for 20 test -s "$T/slow"
kill -TERM "$SERVE_PID"
wait_for 5 grep -q 'stopping' "$SERVE_LOG"
check "SIGTERM: a new connection is refused at once" refused "$B/healthz"
check_wait "SIGTERM: the download in flight goes on" 0 60 "$C"
check "... and is whole" cmp "$T/slow" "$SLOW"
serve_wait_exit
check_grep "SIGTERM: exit status 0" '^0$' "$SERVE_RC"

# ---- SIGHUP (the terminal closed): the same drain ---------------------------------
serve_start hup "$STORE" || { tap_done; exit 1; }
rm -f "$T/slow"
slow_get "$SERVE_URL/org/s/resolve/main/slow.bin" "$T/slow"; C=$!
wait_for 20 test -s "$T/slow"
kill -HUP "$SERVE_PID"
check_wait "SIGHUP: the download in flight goes on" 0 60 "$C"
check "... and is whole" cmp "$T/slow" "$SLOW"
serve_wait_exit
check_grep "SIGHUP: exit status 0 after the drain" '^0$' "$SERVE_RC"

# ---- --mmap holds the read lease until the response is done ----------------------
serve_start mmap "$STORE" --mmap --cache-seconds 0 || { tap_done; exit 1; }
rm -f "$T/slow"
slow_get "$SERVE_URL/org/s/resolve/main/slow.bin" "$T/slow"; C=$!
check "--mmap: a download in flight holds a lease" wait_for 20 has_lease s-1
check_exit "--mmap: a plain delete is refused during the download" 1 ws model delete s-1
check_wait "--mmap: the download completes" 0 60 "$C"
check "... and is whole" cmp "$T/slow" "$SLOW"
serve_stop

# ---- one lease per checkpoint, names kept for --cache-seconds --------------------
serve_start cache "$STORE" --cache-seconds 1 || { tap_done; exit 1; }
CP=""
for i in 1 2 3 4; do
	rm -f "$T/slow$i"
	slow_get "$SERVE_URL/org/s/resolve/main/slow.bin" "$T/slow$i"; CP="$CP $!"
done
all_going() { for i in 1 2 3 4; do [ -s "$T/slow$i" ] || return 1; done; }
check "4 slow downloads of one checkpoint under way" wait_for 30 all_going
check_grep "... hold one lease between them" '^1$' "$(nleases s-1)"
for p in $CP; do wait_exit 60 "$p"; done
bad=0
for i in 1 2 3 4; do cmp -s "$T/slow$i" "$SLOW" || bad=$((bad + 1)); done
check_grep "... and all 4 are whole" '^0$' "$bad"
no_lease() { [ "$(nleases "$1")" = 0 ]; }
check "an idle checkpoint's lease ends after the cache time" wait_for 10 no_lease s-1
# a checkpoint deleted (--force) while its name is kept: never its old
# bytes with a 200 once its chunks are gone, and the name is 404 soon
check_grep "org/s is served (name kept)" '^200' "$(code_of "$SERVE_URL/org/s/resolve/main/slow.bin")"
check "delete --force of it" ws model delete s-1 --force
curl -s -o "$T/after" -w '%{http_code}\n' "$SERVE_URL/org/s/resolve/main/slow.bin" > "$T/st" 2>/dev/null
rc=$?
if grep -q '^200' "$T/st" && [ "$rc" = 0 ] && cmp -s "$T/after" "$SLOW"; then
	tap_not_ok "deleted checkpoint: not served whole" "$(cat "$T/st") rc=$rc"
else tap_ok "deleted checkpoint: not served whole ($(cat "$T/st"), curl exit $rc)"; fi
gone404() { [ "$(code_of "$SERVE_URL/org/s/resolve/main/slow.bin")" = "404 RepoNotFound" ]; }
check "... and its name is 404 RepoNotFound within the cache time" wait_for 10 gone404
serve_stop

# ---- the bearer token ----------------------------------------------------------
serve_start token "$STORE" --token s3cret-t0ken || { tap_done; exit 1; }
B=$SERVE_URL
check_grep "token: right: 200" '^200' "$(code_of -H 'Authorization: Bearer s3cret-t0ken' "$B/api/models/org/g")"
check_grep "token: scheme in another case: 200" '^200' "$(code_of -H 'Authorization: bearer s3cret-t0ken' "$B/api/models/org/g")"
check_grep "token: a prefix of it: 401" '^401' "$(code_of -H 'Authorization: Bearer s3cret' "$B/api/models/org/g")"
check_grep "token: it and more: 401" '^401' "$(code_of -H 'Authorization: Bearer s3cret-t0kenX' "$B/api/models/org/g")"
check_grep "token: empty: 401" '^401' "$(code_of -H 'Authorization: Bearer ' "$B/api/models/org/g")"
check_grep "token: same length, last byte differs: 401" '^401' "$(code_of -H 'Authorization: Bearer s3cret-t0kem' "$B/api/models/org/g")"
serve_stop

# ---- transient store errors: 503, never another checkpoint --------------------
# g-2 is the newest checkpoint of org/g; the fault backend fails the k-th
# read of the store, for every k a first request makes: main is g-2's
# bytes (200) or 503 with Retry-After, never g-1's and never a 404
printf '{"new": 2}\n' > "$T/new.json"
cp -r "$SRC" "$T/src2" && cp "$T/new.json" "$T/src2/config.json"
check "import g-2, the newest of org/g" ws model import --checkpoint-id g-2 \
	--model-id org/g --source "$T/src2" --chunk-size 1MiB --quiet
bad="" n503=0
for k in 1 2 3 4 5 6 7 8 9 10; do
	export WSTORE_FAULTS="failop=get:$k"
	serve_start "fault$k" "fault+$STORE" || break
	unset WSTORE_FAULTS
	curl -s -D "$T/h" -o "$T/body" "$SERVE_URL/org/g/resolve/main/config.json"
	rc=$?
	st=$(tr -d '\r' < "$T/h" | awk '/^HTTP/ {print $2}')
	if [ "$st" = 503 ] && tr -d '\r' < "$T/h" | grep -q '^Retry-After: [0-9]'; then
		n503=$((n503 + 1))
	elif [ "$st" = 200 ] && [ "$rc" = 18 ]; then
		: # the read of the body failed: cut, as it must be
	elif [ "$st" != 200 ] || ! cmp -s "$T/body" "$T/new.json"; then
		bad="$bad k=$k:$st"
	fi
	serve_stop
done
if [ -z "$bad" ] && [ "$n503" -ge 2 ]; then
	tap_ok "a failing read: 503 with Retry-After ($n503 times) or the newest checkpoint, never another"
else tap_not_ok "a failing read while resolving" "bad:$bad; 503s: $n503"; fi

# a read failing mid-body: the transfer is cut, never full length.  Gets
# 8 to 15 fail: one failing get alone may be a read-ahead nobody waits
# for yet, which serve drops and reads again (blocks.c), so whether the
# transfer is cut would depend on the threads' timing; eight in a row
# reach a block the download waits for (two readers, a bounded
# read-ahead), and the gets after them succeed for the request after.
export WSTORE_FAULTS="failop=get:8,failop=get:9,failop=get:10,failop=get:11,failop=get:12,failop=get:13,failop=get:14,failop=get:15"
serve_start cut "fault+$STORE" || { tap_done; exit 1; }
unset WSTORE_FAULTS
curl -s -o "$T/cut" "$SERVE_URL/org/g/resolve/main/$BIG"
rc=$?
sz=$(stat -c %s "$T/cut" 2>/dev/null || echo 0)
if [ "$rc" = 18 ] && [ "$sz" -lt "$(stat -c %s "$SRC/$BIG")" ]; then
	tap_ok "a read failing mid-body: the transfer is cut (curl exit 18, $sz bytes)"
else tap_not_ok "a read failing mid-body" "curl exit $rc, $sz bytes"; fi
check_grep "... logged as incomplete" 'resolve/main/.* 200 [0-9]+ .*incomplete' "$(cat "$SERVE_LOG")"
# the gets left of the eight failing ones fail a request or two first
served_on() {
	for _i in 1 2 3 4 5 6 7 8 9 10; do
		curl -sf "$SERVE_URL/org/g/resolve/main/config.json" -o "$T/c" &&
			cmp -s "$T/new.json" "$T/c" && return 0
	done
	return 1
}
check "... and the server serves on (within 10 requests)" served_on
serve_stop

# ---- a Redis server stopped (SIGSTOP) while serve is in use --------------------
if redis_start_standalone "$T/redis" >/dev/null 2>&1; then
	RS=$WSTORE_TEST_REDIS_URL
	RPID=$(cat "$T/redis/redis-$WSTORE_TEST_REDIS_PORT.pid" 2>/dev/null)
	check "redis: import r-1" "$W" --store "$RS" model import --checkpoint-id r-1 \
		--model-id org/r --source "$SRC" --chunk-size 1MiB --quiet
	sleep 1.1 # a newer updated_at (seconds)
	check "redis: import r-2, the newest" "$W" --store "$RS" model import --checkpoint-id r-2 \
		--model-id org/r --source "$T/src2" --chunk-size 1MiB --quiet
	export WSTORE_COMMAND_TIMEOUT_MS=1000
	serve_start redis "$RS" --cache-seconds 0 || { tap_done; exit 1; }
	unset WSTORE_COMMAND_TIMEOUT_MS
	check "redis: main is r-2" cmp "$T/new.json" "$(curl -sf "$SERVE_URL/org/r/resolve/main/config.json" -o "$T/c" && echo "$T/c")"
	kill -STOP "$RPID"
	bad="" n503=0
	for i in 1 2 3; do
		curl -s --max-time 20 -D "$T/h" -o "$T/body" "$SERVE_URL/org/r/resolve/main/config.json"
		st=$(tr -d '\r' < "$T/h" | awk '/^HTTP/ {print $2}')
		if [ "$st" = 503 ] && tr -d '\r' < "$T/h" | grep -q '^Retry-After: [0-9]'; then
			n503=$((n503 + 1))
		elif [ "$st" != 200 ] || ! cmp -s "$T/body" "$T/new.json"; then
			bad="$bad $st"
		fi
	done
	kill -CONT "$RPID"
	if [ -z "$bad" ] && [ "$n503" -ge 1 ]; then
		tap_ok "redis stopped: 503 with Retry-After ($n503 of 3), never another checkpoint nor 404"
	else tap_not_ok "redis stopped" "bad:$bad; 503s: $n503"; fi
	check "redis running again: main is r-2 again" wait_for 20 sh -c \
		"curl -sf '$SERVE_URL/org/r/resolve/main/config.json' | cmp -s - '$T/new.json'"
	serve_stop
	# a name resolved is reused for --cache-seconds with its checkpoint
	# open: HEAD and model info read nothing from the store meanwhile
	# (the server stopped: any read would fail or time out)
	WSTORE_COMMAND_TIMEOUT_MS=1000 serve_start rcache "$RS" --cache-seconds 60 ||
		{ tap_done; exit 1; }
	check "redis, cached: main is r-2" cmp "$T/new.json" "$(curl -sf "$SERVE_URL/org/r/resolve/main/config.json" -o "$T/c" && echo "$T/c")"
	curl -sf -o /dev/null "$SERVE_URL/api/models/org/r"
	kill -STOP "$RPID"
	bad=""
	for i in 1 2 3 4 5; do
		st=$(curl -s --max-time 10 -I -o /dev/null -w '%{http_code}' "$SERVE_URL/org/r/resolve/main/$BIG")
		[ "$st" = 200 ] || bad="$bad HEAD:$st"
		st=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$SERVE_URL/api/models/org/r")
		[ "$st" = 200 ] || bad="$bad info:$st"
	done
	kill -CONT "$RPID"
	if [ -z "$bad" ]; then
		tap_ok "redis stopped, name cached: HEAD and model info answered 200 without the store (5 each)"
	else tap_not_ok "redis stopped, name cached: HEAD and model info without the store" "$bad"; fi
	serve_stop
else
	tap_not_ok "cannot start a redis-server"
fi

tap_done
