#!/bin/sh
# serve_mirror.sh - `wstore serve --upstream URL`, the pull-through
# mirror, with tests/tools/fakehub.py as the upstream (it counts the
# requests): 8 clients asking a cold mirror for one model at the same
# moment get 8 identical, correct snapshots from one upstream fetch of
# each file; /metrics counts it; a repository outside --upstream-allow
# never goes upstream; an upstream sending wrong bytes gives clients an
# error, never the file; names that are not UTF-8 get 404 with the Hub's
# X-Error-Code and never go upstream; SIGTERM or SIGINT while an import
# waits on the upstream cancels it at once; with the upstream gone the
# mirror serves what it holds.
#   BUILD  the build directory holding wstore
TAP_SUITE=serve-mirror
. "$(dirname "$0")/../lib/suite.sh"
. "$HERE/lib/serve.sh"
. "$HERE/lib/fakehub.sh"
suite_cleanup() {
	serve_stop_all
	fakehub_stop
}

FSRC="$T/fsrc"
fakehub_source "$FSRC"
fakehub_start "$FSRC" || { tap_done; exit 1; }

serve_start mirror "$T/mirror" --upstream "$F" --upstream-allow 'org/*' \
	--cache-seconds 0 --no-access-log || { tap_done; exit 1; }
M=$SERVE_URL

# 8 clients (threads of one process, each its own connection) released
# at the same moment, each taking a snapshot of org/fake main as a Hub
# client does: the commit and file list, then every file at that commit,
# compared byte for byte with the upstream's files; prints one line per
# client, "ok" or what went wrong
/usr/bin/python3 - "$M" "$FSRC" > "$T/clients.out" 2>&1 <<'PY'
import http.client, json, os, sys, threading, urllib.parse
base, src = sys.argv[1], sys.argv[2]
host = urllib.parse.urlparse(base).netloc
go = threading.Barrier(8)
out = [None] * 8

def get(conn, path):
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        raise RuntimeError("%s: HTTP %d %s" % (path, r.status, body[:200]))
    return body

def client(i):
    try:
        conn = http.client.HTTPConnection(host, timeout=300)
        go.wait()
        info = json.loads(get(conn, "/api/models/org/fake/revision/main"))
        for s in info["siblings"]:
            f = s["rfilename"]
            got = get(conn, "/org/fake/resolve/%s/%s" % (info["sha"], urllib.parse.quote(f)))
            if got != open(os.path.join(src, f), "rb").read():
                raise RuntimeError("%s differs" % f)
        if len(info["siblings"]) != sum(len(n) for _, _, n in os.walk(src)):
            raise RuntimeError("wrong file count")
        out[i] = "ok"
    except Exception as e:
        out[i] = "client %d: %s" % (i, e)

ts = [threading.Thread(target=client, args=(i,)) for i in range(8)]
for t in ts: t.start()
for t in ts: t.join()
print("\n".join(out))
PY
n=$(grep -c '^ok$' "$T/clients.out")
if [ "$n" = 8 ]; then
	tap_ok "8 clients at once on a cold mirror: 8 complete snapshots, byte for byte the upstream's"
else tap_not_ok "8 clients at once on a cold mirror: 8 complete snapshots, byte for byte the upstream's" \
	"$(head -8 "$T/clients.out")"; fi
bad=""
for f in $(cd "$FSRC" && find . -type f | sed 's|^\./||'); do
	n=$(fakehub_gets "$f")
	[ "$n" = 1 ] || bad="$bad $f:$n"
done
if [ -z "$bad" ]; then tap_ok "... one upstream fetch of each file"
else tap_not_ok "... one upstream fetch of each file" "requests:$bad"; fi
met=$(curl -sf "$M/metrics")
check_grep "/metrics: one import from the upstream" \
	'^wstore_serve_mirror_fetches_total 1$' "$met"
check_grep "/metrics: upstream bytes counted" \
	'^wstore_serve_upstream_bytes_total [1-9][0-9]{6,}$' "$met"
check_grep "/metrics: files streamed while the import ran" \
	'^wstore_serve_mirror_streamed_total [1-9]' "$met"
# once the import is READY the store answers
wait_for 60 sh -c "'$W' --store '$T/mirror' model list --json 2>/dev/null | grep -q READY"
curl -sf -o /dev/null "$M/org/fake/resolve/main/sub/c.txt"
check_grep "/metrics: hits counted" '^wstore_serve_mirror_hits_total [1-9]' \
	"$(curl -sf "$M/metrics")"
check_grep "/metrics: misses counted" '^wstore_serve_mirror_misses_total [1-9]' "$met"

: > "$LOG"
code=$(curl -s -o /dev/null -w '%{http_code}' "$M/no-such-id/resolve/main/config.json")
check_grep "a checkpoint id the store lacks: 404, not asked upstream" '^404$' "$code"
code=$(curl -s -o /dev/null -w '%{http_code}' "$M/other/model/resolve/main/config.json")
check_grep "a repository outside --upstream-allow: 404" '^404$' "$code"
if grep -q 'other/model' "$LOG"; then tap_not_ok "... not asked of the upstream" "$(cat "$LOG")"
else tap_ok "... not asked of the upstream"; fi

# names that are not UTF-8: 404 with the Hub's X-Error-Code, never asked
# of the upstream
code_of() { curl -s -D- -o /dev/null "$@" | tr -d '\r' | awk '/^HTTP/ {s=$2} /^X-Error-Code:/ {c=$2} END {print s, c}'; }
: > "$LOG"
check_grep "mirror: file path not UTF-8: 404 EntryNotFound" '^404 EntryNotFound$' \
	"$(code_of "$M/org/fake/resolve/main/%ff%fe.json")"
check_grep "mirror: repository not UTF-8: 404 RepoNotFound" '^404 RepoNotFound$' \
	"$(code_of "$M/org/%c3%28/resolve/main/config.json")"
check_grep "mirror: organisation not UTF-8: 404 RepoNotFound" '^404 RepoNotFound$' \
	"$(code_of "$M/%ff/fake/resolve/main/config.json")"
check_grep "mirror: revision not UTF-8: 404 RevisionNotFound" '^404 RevisionNotFound$' \
	"$(code_of "$M/org/fake/resolve/%80/config.json")"
check_grep "mirror: API of a repository not UTF-8: 404 RepoNotFound" '^404 RepoNotFound$' \
	"$(code_of "$M/api/models/org/%ed%a0%80")"
check_grep "mirror: API revision not UTF-8: 404 RevisionNotFound" '^404 RevisionNotFound$' \
	"$(code_of "$M/api/models/org/fake/revision/%c0%af")"
check_grep "mirror: tree of a directory not UTF-8: 404 EntryNotFound" '^404 EntryNotFound$' \
	"$(code_of "$M/api/models/org/fake/tree/main/%ff")"
if grep -q 'revision/%\|%[89A-Fa-f][0-9A-Fa-f]' "$LOG"; then
	tap_not_ok "... none asked of the upstream" "$(cat "$LOG")"
else tap_ok "... none asked of the upstream"; fi

# a second mirror, the upstream sending a corrupted shard
printf '{"corrupt": ["model-00001-of-00002.safetensors"]}\n' > "$CTL"
serve_start bad "$T/mirror2" --upstream "$F" --cache-seconds 0 \
	--no-access-log || { tap_done; exit 1; }
# (streamed as it comes: a 502 when the hash failed before the first
# byte went out, else a transfer cut short; serve-stream cuts one for
# certain)
code=$(curl -s -o "$T/got" -w '%{http_code}' \
	"$SERVE_URL/org/fake/resolve/main/model-00001-of-00002.safetensors")
crc=$?
if [ "$code" = 502 ] || [ "$crc" != 0 ]; then
	tap_ok "upstream sends wrong bytes: the client gets 502 or a broken transfer"
else tap_not_ok "upstream sends wrong bytes: the client gets 502 or a broken transfer" \
	"HTTP $code, curl exit $crc"; fi
if cmp -s "$T/got" "$FSRC/model-00001-of-00002.safetensors"; then
	tap_not_ok "... and not the file"
else tap_ok "... and not the file"; fi
if wait_for 10 grep -q "hash to" "$SERVE_LOG"; then
	tap_ok "... the server's log names the hash mismatch"
else tap_not_ok "... the server's log names the hash mismatch" "$(tail -3 "$SERVE_LOG")"; fi
printf '{}\n' > "$CTL"

# stopping the server while an import from the upstream waits on it (a
# file never answered, no byte moving): SIGTERM, and SIGINT, cancel the
# import within a second or so; the client waiting for it gets 503, the
# server exits 0, and nothing of the import is READY
ms() { echo $(($(date +%s%N) / 1000000)); }
for sig in TERM INT; do
	printf '{"hold": ["sub/c.txt"]}\n' > "$CTL"
	: > "$LOG"
	serve_start "stop$sig" "$T/mirror-$sig" --upstream "$F" \
		--no-access-log || break
	curl -s -o "$T/held" -w '%{http_code}' \
		"$SERVE_URL/org/fake/resolve/main/sub/c.txt" > "$T/held.code" &
	C=$!
	if ! wait_for 30 grep -q 'resolve/[0-9a-f]*/sub/c.txt' "$LOG"; then
		tap_not_ok "SIG$sig: the held file was never asked for" "$(cat "$LOG")"
		kill "$C" 2>/dev/null
		serve_stop
		continue
	fi
	t0=$(ms)
	kill -"$sig" "$SERVE_PID"
	serve_wait_exit
	el=$(($(ms) - t0))
	if [ "$SERVE_RC" = 0 ] && [ "$el" -le 5000 ]; then
		tap_ok "SIG$sig with an import from the upstream held: the server exits 0 within a second or so ($el ms)"
	else tap_not_ok "SIG$sig with an import from the upstream held: the server exits 0 within a second or so" \
		"exit $SERVE_RC after $el ms" "$(tail -3 "$SERVE_LOG")"; fi
	wait_exit 10 "$C"
	check_grep "... the waiting client gets 503" '^503$' "$(cat "$T/held.code")"
	n=$("$W" --store "$T/mirror-$sig" model list --json 2>/dev/null |
		/usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
	check_grep "... no READY checkpoint of the import" '^0$' "$n"
done
printf '{}\n' > "$CTL"

# the upstream gone: what the mirror holds is still served
fakehub_stop
if curl -sf "$M/org/fake/resolve/main/sub/c.txt" -o "$T/down.txt" &&
	cmp -s "$T/down.txt" "$FSRC/sub/c.txt"; then
	tap_ok "upstream down: the mirror serves what it holds (by revision main)"
else tap_not_ok "upstream down: the mirror serves what it holds (by revision main)"; fi
code=$(curl -s -o "$T/err" -w '%{http_code}' "$M/org/other/resolve/main/x")
check_grep "upstream down, a name it never had: 503" '^503$' "$code"
check_grep "... saying the upstream failed" "upstream" "$(cat "$T/err")"

tap_done
