#!/bin/sh
# serve.sh - end-to-end tests of `wstore serve` with curl: every file byte
# for byte by model id, checkpoint id and commit id; HEAD headers; Range
# (206, suffix, open-ended, 416); 404s with the Hub's X-Error-Code; model
# info, tree and paths-info; a new import rolling the name over; bearer
# token; /metrics and /healthz; the access log; a client that disconnects
# mid-file; 32 concurrent clients for a few seconds with RSS bounded; the
# Redis and Mooncake (stand-in) backends; SIGTERM letting an in-flight
# download finish.
#   BUILD  the build directory holding wstore
#   SERVE_LOAD_SECONDS  length of the load test (default 4)
TAP_SUITE=serve
. "$(dirname "$0")/../lib/suite.sh"
. "$HERE/lib/redis.sh"
. "$HERE/lib/mooncake.sh"
. "$HERE/lib/serve.sh"
. "$HERE/lib/mooncake.sh"
suite_cleanup() {
	serve_stop_all
	redis_stop_all >/dev/null 2>&1
	mooncake_stop_all >/dev/null 2>&1
	mooncake_stop_all >/dev/null 2>&1
}
STORE="$T/store"
ws() { "$W" --store "$STORE" "$@"; }

if ! "$W" serve --help >/dev/null 2>&1 ||
	"$W" --store "$T/none" serve --listen 'bad' 2>&1 | grep -q 'not available'; then
	tap_not_ok "wstore was built without 'serve' (libmicrohttpd-dev missing?)"
	tap_done
	exit 1
fi

SRC="$T/src"
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 3000000 --shards 2 >/dev/null
printf '' > "$SRC/empty.txt"
mkdir -p "$SRC/sub/dir"
printf 'nested\n' > "$SRC/sub/dir/x.bin"
printf 'blank in name\n' > "$SRC/sub/with space.txt"
printf 'not ascii\n' > "$SRC/sub/ünï.txt"
printf 'plus in name\n' > "$SRC/a+b.txt"
FILES=$(cd "$SRC" && find . -type f | sed 's|^\./||' | sort)
NFILES=$(printf '%s\n' "$FILES" | wc -l)
BIG=model-00001-of-00002.safetensors
BIGSIZE=$(stat -c %s "$SRC/$BIG")

check "import (1 MiB chunks: shards span chunks)" \
	ws model import --checkpoint-id tiny-1 --model-id org/tiny \
	--source "$SRC" --chunk-size 1MiB --quiet

# ---- usage -------------------------------------------------------------------
check_exit "bad listen address: usage error" 1 ws serve --listen nope
check_grep "bad listen address named" "invalid listen address 'nope'" "$OUT"
check_one_line "bad listen address: one line" "$OUT"
check_exit "extra argument: usage" 2 ws serve extra
check_exit "empty token: usage" 2 ws serve --token ''

serve_start main "$STORE" || { tap_done; exit 1; }
B=$SERVE_URL

# ---- downloads ---------------------------------------------------------------
SHA=$(curl -sf "$B/api/models/org/tiny" | json_get sha)
check_grep "model info: a 40-hex sha" '^[0-9a-f]{40}$' "$SHA"
bad=0
printf '%s\n' "$FILES" > "$T/files"
while IFS= read -r f; do
	u=$(urlenc "$f")
	for repo_rev in org/tiny/resolve/main tiny-1/resolve/main \
		"org/tiny/resolve/$SHA" tiny-1/resolve/HEAD; do
		if ! curl -sf "$B/$repo_rev/$u" -o "$T/got" ||
			! cmp -s "$T/got" "$SRC/$f"; then
			bad=$((bad + 1))
			echo "# mismatch: $repo_rev/$f"
		fi
	done
done < "$T/files"
if [ "$bad" = 0 ]; then tap_ok "all $NFILES files byte for byte (model id, checkpoint id, commit id, HEAD)"
else tap_not_ok "downloads byte for byte" "$bad mismatches"; fi

# ---- HEAD ----------------------------------------------------------------------
H=$(curl -sfI "$B/org/tiny/resolve/main/$BIG" | tr -d '\r')
SHA256=$(sha256sum "$SRC/$BIG" | cut -c1-64)
check_grep "HEAD: Content-Length" "^Content-Length: $BIGSIZE\$" "$H"
check_grep "HEAD: ETag is the sha256 of a weight file" "^ETag: \"$SHA256\"\$" "$H"
check_grep "HEAD: X-Linked-Etag" "^X-Linked-Etag: \"$SHA256\"\$" "$H"
check_grep "HEAD: X-Linked-Size" "^X-Linked-Size: $BIGSIZE\$" "$H"
check_grep "HEAD: X-Repo-Commit" "^X-Repo-Commit: $SHA\$" "$H"
check_grep "HEAD: Accept-Ranges" "^Accept-Ranges: bytes\$" "$H"
H=$(curl -sfI "$B/org/tiny/resolve/main/config.json" | tr -d '\r')
check_grep "HEAD of a small file: its size" "^Content-Length: $(stat -c %s "$SRC/config.json")\$" "$H"
check_grep "HEAD of a metadata file: a 40-hex ETag" '^ETag: "[0-9a-f]{40}"$' "$H"
H=$(curl -sfI "$B/org/tiny/resolve/main/empty.txt" | tr -d '\r')
check_grep "HEAD of an empty file: length 0" '^Content-Length: 0$' "$H"

# ---- Range -----------------------------------------------------------------------
range_ok() { # name from to(or empty) header
	curl -sf -H "Range: $4" "$B/org/tiny/resolve/main/$BIG" -o "$T/part" -D "$T/hdr"
	python3 - "$SRC/$BIG" "$T/part" "$2" "$3" <<'EOF'
import sys
data = open(sys.argv[1], "rb").read()
a = int(sys.argv[3]); b = int(sys.argv[4]) if sys.argv[4] else len(data) - 1
sys.exit(0 if open(sys.argv[2], "rb").read() == data[a:b + 1] else 1)
EOF
}
if range_ok x 1048570 1048590 "bytes=1048570-1048590" &&
	grep -q "^HTTP/1.1 206" "$T/hdr" &&
	grep -q "^Content-Range: bytes 1048570-1048590/$BIGSIZE" "$T/hdr"; then
	tap_ok "Range across a chunk boundary: 206, Content-Range, the bytes"
else tap_not_ok "Range across a chunk boundary" "$(cat "$T/hdr")"; fi
if range_ok x 5 5 "bytes=5-5"; then tap_ok "Range of one byte"; else tap_not_ok "Range of one byte"; fi
if range_ok x $((BIGSIZE - 100)) "" "bytes=-100" &&
	grep -q "^Content-Range: bytes $((BIGSIZE - 100))-$((BIGSIZE - 1))/$BIGSIZE" "$T/hdr"; then
	tap_ok "suffix Range (last 100 bytes)"
else tap_not_ok "suffix Range" "$(cat "$T/hdr")"; fi
if range_ok x 2000000 "" "bytes=2000000-" 2>/dev/null || range_ok x 1000000 "" "bytes=1000000-"; then
	tap_ok "open-ended Range"
else tap_not_ok "open-ended Range"; fi
if range_ok x 100 "" "bytes=100-99999999"; then tap_ok "Range past the end is clipped"
else tap_not_ok "Range past the end is clipped"; fi
H=$(curl -s -D- -o /dev/null -H "Range: bytes=$BIGSIZE-" "$B/org/tiny/resolve/main/$BIG" | tr -d '\r')
check_grep "Range at the end: 416" '^HTTP/1.1 416' "$H"
check_grep "416 carries Content-Range: bytes */size" "^Content-Range: bytes \\*/$BIGSIZE\$" "$H"
H=$(curl -s -D- -o /dev/null -H "Range: bytes=0-1,5-6" "$B/org/tiny/resolve/main/config.json" | tr -d '\r')
check_grep "several ranges: the whole file (200)" '^HTTP/1.1 200' "$H"

# ---- errors --------------------------------------------------------------------
code_of() { curl -s -D- -o /dev/null "$@" | tr -d '\r' | awk '/^HTTP/ {s=$2} /^X-Error-Code:/ {c=$2} END {print s, c}'; }
check_grep "unknown repo: 404 RepoNotFound" '^404 RepoNotFound$' "$(code_of "$B/org/nope/resolve/main/config.json")"
check_grep "unknown revision: 404 RevisionNotFound" '^404 RevisionNotFound$' "$(code_of "$B/org/tiny/resolve/v9/config.json")"
check_grep "unknown file: 404 EntryNotFound" '^404 EntryNotFound$' "$(code_of "$B/org/tiny/resolve/main/nope.json")"
check_grep "a directory is not a file: 404 EntryNotFound" '^404 EntryNotFound$' "$(code_of "$B/org/tiny/resolve/main/sub")"
check_grep "traversal: 404 EntryNotFound" '^404 EntryNotFound$' "$(code_of --path-as-is "$B/org/tiny/resolve/main/sub/../config.json")"
check_grep "encoded traversal: 404 EntryNotFound" '^404 EntryNotFound$' "$(code_of "$B/org/tiny/resolve/main/..%2Fconfig.json")"
check_grep "encoded NUL: 400" '^400' "$(code_of "$B/org/tiny/resolve/main/config.json%00")"
check_grep "api of unknown repo: 404 RepoNotFound" '^404 RepoNotFound$' "$(code_of "$B/api/models/org/nope")"
check_grep "api of unknown revision: 404 RevisionNotFound" '^404 RevisionNotFound$' "$(code_of "$B/api/models/org/tiny/revision/v9")"
check_grep "no listing outside the API: 404" '^404' "$(code_of "$B/org/tiny")"
check_grep "PUT: 405" '^405' "$(code_of -X PUT "$B/org/tiny/resolve/main/config.json")"

# ---- API -------------------------------------------------------------------------
J=$(curl -sf "$B/api/models/org/tiny/revision/main")
check_grep "revision endpoint: same sha" "^$SHA\$" "$(printf %s "$J" | json_get sha)"
check_grep "model info: id is the repo" '^org/tiny$' "$(printf %s "$J" | json_get id)"
check_grep "model info: every file a sibling" "^$NFILES\$" "$(printf %s "$J" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["siblings"]))')"
check_grep "model info: sibling lfs sha256" "^$SHA256\$" "$(printf %s "$J" | python3 -c "import json,sys; print([s for s in json.load(sys.stdin)['siblings'] if s['rfilename']=='$BIG'][0]['lfs']['sha256'])")"
TREE=$(curl -sf "$B/api/models/org/tiny/tree/main?recursive=True")
check_grep "recursive tree: every file with its size" '^ok$' "$(printf %s "$TREE" | python3 -c "
import json, os, sys
t = json.load(sys.stdin)
files = {e['path']: e['size'] for e in t if e['type'] == 'file'}
want = {}
for d, _, fs in os.walk('$SRC'):
    for f in fs:
        p = os.path.relpath(os.path.join(d, f), '$SRC')
        want[p] = os.path.getsize(os.path.join(d, f))
dirs = sorted(e['path'] for e in t if e['type'] == 'directory')
lfs = [e for e in t if e['path'] == '$BIG'][0]['lfs']['oid']
print('ok' if files == want and dirs == ['sub', 'sub/dir'] and lfs == '$SHA256' else (files, dirs))
")"
check_grep "tree of the root, not recursive" '^ok$' "$(curl -sf "$B/api/models/org/tiny/tree/main" | python3 -c "
import json, sys
t = json.load(sys.stdin)
print('ok' if all('/' not in e['path'] for e in t) and {'path': 'sub', 'type': 'directory'}.items() <= [e for e in t if e['path'] == 'sub'][0].items() else t)
")"
check_grep "tree of a directory" '^sub/dir,sub/with space.txt,sub/ünï.txt$' "$(curl -sf "$B/api/models/org/tiny/tree/main/sub" | python3 -c "import json,sys; print(','.join(e['path'] for e in json.load(sys.stdin)))")"
check_grep "tree of a missing directory: 404 EntryNotFound" '^404 EntryNotFound$' "$(code_of "$B/api/models/org/tiny/tree/main/nope")"
check_grep "tree at the commit id" "^$NFILES\$" "$(curl -sf "$B/api/models/org/tiny/tree/$SHA?recursive=true" | python3 -c "import json,sys; print(sum(e['type']=='file' for e in json.load(sys.stdin)))")"
PI=$(curl -sf -X POST -H 'Content-Type: application/json' -d "{\"paths\":[\"$BIG\",\"sub\",\"nope\"],\"expand\":true}" "$B/api/models/org/tiny/paths-info/main")
check_grep "paths-info (JSON body): file with lfs and lastCommit, directory, missing left out" '^ok$' "$(printf %s "$PI" | python3 -c "
import json, sys
t = json.load(sys.stdin)
ok = len(t) == 2 and t[0]['lfs']['oid'] == '$SHA256' and t[0]['lastCommit']['id'] == '$SHA' and t[1]['type'] == 'directory'
print('ok' if ok else t)")"
PI=$(curl -sf -X POST -d "paths=config.json&paths=sub%2Fdir%2Fx.bin&expand=False" "$B/api/models/org/tiny/paths-info/main")
check_grep "paths-info (form body, as huggingface_hub sends)" '^config.json,sub/dir/x.bin$' "$(printf %s "$PI" | python3 -c "import json,sys; print(','.join(e['path'] for e in json.load(sys.stdin)))")"
# form encoding: %2B is a '+', a bare '+' a blank
PI=$(curl -sf -X POST -d "paths=a%2Bb.txt&paths=sub%2Fwith+space.txt&paths=a+b.txt" "$B/api/models/org/tiny/paths-info/main")
check_grep "paths-info (form body): %2B decodes to '+', '+' to a blank" '^a\+b.txt,sub/with space.txt$' "$(printf %s "$PI" | python3 -c "import json,sys; print(','.join(e['path'] for e in json.load(sys.stdin)))")"
check_grep "a file named a+b.txt by its encoded name (a%2Bb.txt)" '^plus in name$' "$(curl -sf "$B/org/tiny/resolve/main/a%2Bb.txt")"
check_grep "... and by its bare name (a '+' in a path is a '+')" '^plus in name$' "$(curl -sf "$B/org/tiny/resolve/main/a+b.txt")"
check_grep "query values are percent-decoded (recursive=%74rue)" "^$NFILES\$" "$(curl -sf "$B/api/models/org/tiny/tree/main?recursive=%74rue" | python3 -c "import json,sys; print(sum(e['type']=='file' for e in json.load(sys.stdin)))")"

# ---- roll-over ----------------------------------------------------------------
printf '{"changed": true}\n' > "$T/config2.json"
cp -r "$SRC" "$T/src2" && cp "$T/config2.json" "$T/src2/config.json"
check "import a second checkpoint of org/tiny at main" \
	ws model import --checkpoint-id tiny-2 --model-id org/tiny \
	--source "$T/src2" --chunk-size 1MiB --quiet
# (a name resolved is reused for --cache-seconds, 5 by default: the new
# import takes it over within that time)
new_sha() { [ "$(curl -sf "$B/api/models/org/tiny" | json_get sha)" != "$SHA" ]; }
wait_for 15 new_sha
SHA2=$(curl -sf "$B/api/models/org/tiny" | json_get sha)
if [ -n "$SHA2" ] && [ "$SHA2" != "$SHA" ]; then tap_ok "the new import takes the name over within the cache time (new sha)"
else tap_not_ok "roll-over" "sha $SHA -> $SHA2"; fi
new_bytes() { curl -sf "$B/org/tiny/resolve/main/config.json" | cmp -s - "$T/config2.json"; }
check "main now serves the new bytes" wait_for 15 new_bytes
check "the old commit still serves the old bytes" cmp "$SRC/config.json" "$(curl -sf "$B/org/tiny/resolve/$SHA/config.json" -o "$T/c1" && echo "$T/c1")"

# ---- a revision with a slash, sent encoded as clients do ---------------------
check "import at revision refs/pr/1" ws model import --checkpoint-id tiny-pr \
	--model-id org/tiny --revision refs/pr/1 --source "$SRC" --quiet
check "resolve/refs%2Fpr%2F1/ serves it" cmp "$SRC/config.json" \
	"$(curl -sf "$B/org/tiny/resolve/refs%2Fpr%2F1/config.json" -o "$T/c3" && echo "$T/c3")"
check_grep "api/models/.../revision/refs%2Fpr%2F1: its checkpoint" '^tiny-pr$' \
	"$(curl -sf "$B/api/models/org/tiny/revision/refs%2Fpr%2F1" | json_get _id)"

# ---- disconnect mid-file -------------------------------------------------------
# 32 MiB: more than the socket buffers hold, so that the server sees the
# client go
mkdir -p "$T/bigsrc"
head -c 33554432 /dev/urandom > "$T/bigsrc/big.bin"
check "import a 32 MiB file" ws model import --checkpoint-id bigck \
	--model-id org/big --source "$T/bigsrc" --chunk-size 4MiB --quiet --force
fds_before=$(ls /proc/"$SERVE_PID"/fd | wc -l)
rss_before=$(rss_kb "$SERVE_PID")
for i in 1 2 3 4 5 6 7 8; do
	curl -s --limit-rate 1M "$B/org/big/resolve/main/big.bin" | head -c 100000 >/dev/null
done
metric() { curl -sf "$B/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
if wait_for 10 sh -c "[ \"\$(curl -sf '$B/metrics' | awk '\$1 == \"wstore_serve_requests_in_flight\" {print \$2}')\" = 1 ]"; then
	tap_ok "after 8 clients hung up mid-file nothing is in flight"
else tap_not_ok "in flight after disconnects" "$(curl -sf "$B/metrics" | grep flight)"; fi
wait_for 10 sh -c "[ \$(ls /proc/$SERVE_PID/fd | wc -l) -le $fds_before ]"
fds_after=$(ls /proc/"$SERVE_PID"/fd | wc -l)
if [ "$fds_after" -le "$fds_before" ]; then tap_ok "no descriptor left open by a disconnect ($fds_before -> $fds_after)"
else tap_not_ok "descriptors after disconnects" "$fds_before -> $fds_after"; fi
rss_after=$(rss_kb "$SERVE_PID")
if [ $((rss_after - rss_before)) -lt 16384 ]; then tap_ok "disconnects cost no memory (RSS $rss_before -> $rss_after kB)"
else tap_not_ok "RSS after disconnects" "$rss_before -> $rss_after kB"; fi
check_grep "disconnects are logged as incomplete" "GET /org/big/resolve/main/big.bin 200 [0-9]+ .*incomplete" "$(cat "$SERVE_LOG")"
check_grep "a disconnect is not a server error" "^0$" "$(metric wstore_serve_errors_total)"

# ---- metrics, healthz, log ------------------------------------------------------
M=$(curl -sf "$B/metrics")
check_grep "metrics: requests by code" '^wstore_serve_requests_total\{code="200"\} [1-9]' "$M"
check_grep "metrics: 404s counted" '^wstore_serve_requests_total\{code="404"\} [1-9]' "$M"
check_grep "metrics: bytes" '^wstore_serve_bytes_total [1-9]' "$M"
check_grep "metrics: per checkpoint" '^wstore_serve_checkpoint_bytes_total\{checkpoint="tiny-1"\} [1-9]' "$M"
check_grep "metrics: connections gauge" '^wstore_serve_connections [0-9]' "$M"
check_grep "metrics: TYPE lines" '^# TYPE wstore_serve_bytes_total counter$' "$M"
check_grep "healthz" '^ok$' "$(curl -sf "$B/healthz")"
check_grep "access log: method, path, status, bytes, ms" \
	"^127\\.0\\.0\\.1 GET /org/tiny/resolve/main/config.json 200 $(stat -c %s "$SRC/config.json") [0-9.]+ms\$" "$(cat "$SERVE_LOG")"
check_grep "access log: a 404 with its body size" '^127\.0\.0\.1 GET /org/nope/resolve/main/config.json 404 [0-9]+ ' "$(cat "$SERVE_LOG")"

# ---- load ------------------------------------------------------------------------
LOAD=${SERVE_LOAD_SECONDS:-4}
load_clients "$B/org/tiny/resolve/main/$BIG" "$SRC/$BIG" 32 "$LOAD" "$T/load"
rss_peak=$(awk '/^VmHWM/ {print $2}' /proc/"$SERVE_PID"/status)
rss_anon=$(awk '/^RssAnon/ {print $2}' /proc/"$SERVE_PID"/status)
echo "# load: $LOAD_OK downloads by 32 clients in ${LOAD}s, $LOAD_BAD bad, peak RSS ${rss_peak} kB (before: ${rss_before} kB; anonymous now: ${rss_anon} kB)"
if [ "$LOAD_BAD" = 0 ] && [ "$LOAD_OK" -ge 32 ]; then tap_ok "32 concurrent clients for ${LOAD}s: $LOAD_OK downloads, none bad"
else tap_not_ok "32 concurrent clients" "$LOAD_OK good, $LOAD_BAD bad"; fi
# ASan's quarantine keeps freed memory around: a looser bound there
RSS_LIMIT=262144
[ -n "${ASAN_OPTIONS:-}" ] && RSS_LIMIT=1048576
if [ "$rss_peak" -lt "$RSS_LIMIT" ]; then tap_ok "peak RSS under load bounded (${rss_peak} kB < $((RSS_LIMIT / 1024)) MiB)"
else tap_not_ok "peak RSS under load" "${rss_peak} kB"; fi

# ---- SIGTERM with a download in flight ------------------------------------------
curl -s --limit-rate 1M "$B/org/tiny/resolve/main/$BIG" -o "$T/slow" &
CPID=$!
wait_for 10 sh -c "[ -s '$T/slow' ]"
kill -TERM "$SERVE_PID"
wait_exit 60 "$CPID"
check "SIGTERM: the in-flight download finished whole" cmp "$T/slow" "$SRC/$BIG"
serve_wait_exit
check_grep "SIGTERM: exit status 0" '^0$' "$SERVE_RC"

# ---- token -----------------------------------------------------------------------
serve_start token "$STORE" --token s3cret || { tap_done; exit 1; }
B=$SERVE_URL
check_grep "token: no header is 401" '^401' "$(code_of "$B/org/tiny/resolve/main/config.json")"
check_grep "token: a wrong one is 401" '^401' "$(code_of -H 'Authorization: Bearer nope' "$B/org/tiny/resolve/main/config.json")"
check_grep "token: the right one is 200" '^200' "$(code_of -H 'Authorization: Bearer s3cret' "$B/org/tiny/resolve/main/config.json")"
check_grep "token: API needs it too" '^401' "$(code_of "$B/api/models/org/tiny")"
check_grep "token: healthz needs none" '^200' "$(code_of "$B/healthz")"
serve_stop
export WSTORE_SERVE_TOKEN=envtok
serve_start token-env "$STORE" || { tap_done; exit 1; }
check_grep "token from WSTORE_SERVE_TOKEN" '^200' "$(code_of -H 'Authorization: Bearer envtok' "$SERVE_URL/api/models/org/tiny")"
check_grep "token from WSTORE_SERVE_TOKEN: required" '^401' "$(code_of "$SERVE_URL/api/models/org/tiny")"
serve_stop
unset WSTORE_SERVE_TOKEN

# ---- --mmap ----------------------------------------------------------------------
serve_start mmap "$STORE" --mmap || { tap_done; exit 1; }
bad=0
while IFS= read -r f; do
	curl -sf "$SERVE_URL/tiny-1/resolve/main/$(urlenc "$f")" -o "$T/got" &&
		cmp -s "$T/got" "$SRC/$f" || bad=$((bad + 1))
done < "$T/files"
curl -sf "$SERVE_URL/org/big/resolve/main/big.bin" -o "$T/got" &&
	cmp -s "$T/got" "$T/bigsrc/big.bin" || bad=$((bad + 1))
check_grep "--mmap: all files byte for byte (8 chunks of 4 MiB too)" '^0$' "$bad"
if curl -sf -H "Range: bytes=4194000-12582999" "$SERVE_URL/org/big/resolve/main/big.bin" -o "$T/part" &&
	[ "$(sha256sum < "$T/part")" = "$(dd if="$T/bigsrc/big.bin" bs=1000 skip=4194 count=8389 2>/dev/null | sha256sum)" ]; then
	tap_ok "--mmap: a range over three chunks"
else tap_not_ok "--mmap: a range over three chunks"; fi
load_clients "$SERVE_URL/org/big/resolve/main/big.bin" "$T/bigsrc/big.bin" 8 2 "$T/mload"
check_grep "--mmap: 8 concurrent clients, none bad" '^0$' "$LOAD_BAD"
serve_stop
check_grep "--mmap: server exited 0" '^0$' "$SERVE_RC"

# ---- single flight: clients downloading one file at once share block reads ------
# (a store that does not hand out files: the fault wrapper, every call 100 ms
# late, so that the 8 downloads of 32 blocks of 1 MiB overlap)
export WSTORE_FAULTS=delay=100
serve_start flight "fault+$STORE" || { tap_done; exit 1; }
unset WSTORE_FAULTS
load_clients "$SERVE_URL/org/big/resolve/main/big.bin" "$T/bigsrc/big.bin" 8 0 "$T/fload"
check_grep "single flight: 8 concurrent clients, none bad" '^0$' "$LOAD_BAD"
M=$(curl -sf "$SERVE_URL/metrics")
sr=$(echo "$M" | awk '$1 == "wstore_serve_store_reads_total" {print $2}')
shr=$(echo "$M" | awk '$1 == "wstore_serve_shared_reads_total" {print $2}')
check "single flight: blocks read once for several clients (store reads ${sr:-?}, shared ${shr:-?}, 256 wanted)" \
	test "${shr:-0}" -gt 0 -a "${sr:-256}" -lt 256 -a "$((${sr:-0} + ${shr:-0}))" -ge 256
# every read of the store, read ahead or not: blocks are kept while a
# client has yet to reach them, so the 32 blocks are read about once each
br=$(echo "$M" | awk '$1 == "wstore_serve_block_reads_total" {print $2}')
check "single flight: the store read at most twice per block (${br:-?} reads of 32 blocks)" \
	test "${br:-0}" -ge 32 -a "${br:-999}" -le 64
serve_stop

# ---- Redis backend ---------------------------------------------------------------
if redis_start_standalone "$T/redis" >/dev/null 2>&1; then
	RS=$WSTORE_TEST_REDIS_URL
	check "redis: import" "$W" --store "$RS" model import --checkpoint-id rtiny \
		--model-id org/rtiny --source "$SRC" --chunk-size 1MiB --quiet
	serve_start redis "$RS" || { tap_done; exit 1; }
	bad=0
	while IFS= read -r f; do
		curl -sf "$SERVE_URL/org/rtiny/resolve/main/$(urlenc "$f")" -o "$T/got" &&
			cmp -s "$T/got" "$SRC/$f" || bad=$((bad + 1))
	done < "$T/files"
	check_grep "redis: all files byte for byte" '^0$' "$bad"
	if curl -sf -H "Range: bytes=1048570-1048590" "$SERVE_URL/org/rtiny/resolve/main/$BIG" -o "$T/part" &&
		[ "$(od -An -tx1 "$T/part")" = "$(dd if="$SRC/$BIG" bs=1 skip=1048570 count=21 2>/dev/null | od -An -tx1)" ]; then
		tap_ok "redis: Range across a chunk boundary"
	else tap_not_ok "redis: Range across a chunk boundary"; fi
	load_clients "$SERVE_URL/org/rtiny/resolve/main/$BIG" "$SRC/$BIG" 8 2 "$T/rload"
	check_grep "redis: 8 concurrent clients, none bad" '^0$' "$LOAD_BAD"
	serve_stop
else
	tap_not_ok "cannot start a redis-server for the Redis part"
fi

# ---- Mooncake backend (the contract stand-in library) -----------------------
if [ -f "$BUILD/libmooncake_store.so" ]; then
	export WSTORE_MOONCAKE_LIBRARY="$(cd "$BUILD" && pwd)/libmooncake_store.so"
	export MOONCAKE_STANDIN_DIR="$T/mooncake"
	mkdir -p "$MOONCAKE_STANDIN_DIR"
	# the stand-in has no master: a port that accepts stands for one
	mooncake_fake_master &&
		export WSTORE_MASTER_SERVER_ADDR="$MOONCAKE_TEST_FAKE_MASTER"
	check "mooncake: import" "$W" --store mooncake model import --checkpoint-id mtiny \
		--model-id org/mtiny --source "$SRC" --chunk-size 1MiB --quiet
	serve_start mooncake mooncake || { tap_done; exit 1; }
	bad=0
	while IFS= read -r f; do
		curl -sf "$SERVE_URL/org/mtiny/resolve/main/$(urlenc "$f")" -o "$T/got" &&
			cmp -s "$T/got" "$SRC/$f" || bad=$((bad + 1))
	done < "$T/files"
	check_grep "mooncake: all files byte for byte" '^0$' "$bad"
	if curl -sf -H "Range: bytes=1048570-1048590" "$SERVE_URL/org/mtiny/resolve/main/$BIG" -o "$T/part" &&
		[ "$(od -An -tx1 "$T/part")" = "$(dd if="$SRC/$BIG" bs=1 skip=1048570 count=21 2>/dev/null | od -An -tx1)" ]; then
		tap_ok "mooncake: Range across a chunk boundary"
	else tap_not_ok "mooncake: Range across a chunk boundary"; fi
	serve_stop
	check_grep "mooncake: server exited 0" '^0$' "$SERVE_RC"
else
	tap_not_ok "mooncake stand-in library missing from $BUILD"
fi

# ---- a real Mooncake Store, where one is installed --------------------------
if mooncake_installed; then
	unset MOONCAKE_STANDIN_DIR WSTORE_MOONCAKE_LIBRARY
	if mooncake_start "$T/mc" >/dev/null 2>&1; then
		check "real mooncake: import" "$W" --store mooncake model import \
			--checkpoint-id rmtiny --model-id org/rmtiny --source "$SRC" \
			--chunk-size 1MiB --quiet
		serve_start real-mooncake mooncake || { tap_done; exit 1; }
		bad=0
		while IFS= read -r f; do
			curl -sf "$SERVE_URL/org/rmtiny/resolve/main/$(urlenc "$f")" -o "$T/got" &&
				cmp -s "$T/got" "$SRC/$f" || bad=$((bad + 1))
		done < "$T/files"
		check_grep "real mooncake: all files byte for byte" '^0$' "$bad"
		load_clients "$SERVE_URL/org/rmtiny/resolve/main/$BIG" "$SRC/$BIG" 8 2 "$T/rmload"
		check_grep "real mooncake: 8 concurrent clients, none bad" '^0$' "$LOAD_BAD"
		serve_stop
		check_grep "real mooncake: server exited 0" '^0$' "$SERVE_RC"
	else
		tap_not_ok "cannot start the installed Mooncake Store" "$(tail -3 "$T/mc/master.log" 2>/dev/null)"
	fi
else
	tap_skip "real mooncake: files, concurrent clients, exit" \
		"Mooncake Store is not installed in $MOONCAKE_HOME"
fi

tap_done
