#!/bin/sh
# serve_stream.sh - the mirror's stream-through (`wstore serve
# --upstream`, mirror.c and stream.c), with tests/tools/fakehub.py as the
# upstream (its request log counts the GETs, LOG.first says when each
# file's first byte left it):
#  - 8 clients released at once on a cold large file: one upstream GET,
#    8 byte-exact copies (SHA-256), the first byte at every client within
#    the upstream's first byte + 0.5 s;
#  - a Range request on a cold file while it streams: the same GET;
#  - a file whose bytes fail their listed SHA-256: every client's
#    transfer cut short of its Content-Length, nothing kept, the next
#    request fetches it again (and gets it right);
#  - `hf download` (huggingface_hub 1.28) of a cold model through the
#    mirror: every file exact, one upstream GET each;
#  - a snapshot partly mirrored serves a verified file (also to `hf
#    download`), its model info, tree, paths-info and raw (a pointer, a
#    git file's bytes) while another file is still on its way; /metrics
#    and the access log say "stream";
#  - a spool directory that fills up (a 4 MiB tmpfs as TMPDIR; root
#    only, else a printed skip): the transfer is cut, nothing is kept,
#    and the log names the spool and the full disk, not the upstream.
#   BUILD  the build directory holding wstore
#   WSTORE_TEST_STREAM_MB  size of the large file (default 256; the
#          issue's figure is 1024, which takes a minute more here)
TAP_SUITE=serve-stream
. "$(dirname "$0")/../lib/suite.sh"
. "$HERE/lib/serve.sh"
. "$HERE/lib/fakehub.sh"
. "$HERE/lib/hubclients.sh"
FULL=
suite_cleanup() {
	serve_stop_all
	fakehub_stop
	[ -z "$FULL" ] || umount "$FULL" 2>/dev/null
}

MB=${WSTORE_TEST_STREAM_MB:-256}
FSRC="$T/fsrc"
mkdir -p "$FSRC"
printf '{"model_type": "fake"}\n' > "$FSRC/config.json"
head -c $((MB << 20)) /dev/urandom > "$FSRC/big.safetensors"
head -c $((16 << 20)) /dev/urandom > "$FSRC/mid.safetensors"
fakehub_start "$FSRC" || { tap_done; exit 1; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }
BIG_SHA=$(sha_of "$FSRC/big.safetensors")
metric() { curl -sf "$1/metrics" | awk -v k="wstore_serve_$2" '$1 == k {print $2}'; }

# ---- 8 clients on a cold large file ---------------------------------------
# the upstream holds the first byte back a second: the clients are all
# waiting on it when it comes
fakehub_ctl '{"first_delay": {"big.safetensors": 1.0}}'
: > "$LOG.first"
serve_start eight "$T/m1" --upstream "$F" --cache-seconds 0 \
	--header-timeout 30 || { tap_done; exit 1; }
M=$SERVE_URL
/usr/bin/python3 - "$M" > "$T/eight.out" 2>&1 <<'PY'
import hashlib, http.client, sys, threading, time, urllib.parse
host = urllib.parse.urlparse(sys.argv[1]).netloc
go = threading.Barrier(8)
out = [None] * 8

def client(i):
    try:
        conn = http.client.HTTPConnection(host, timeout=300)
        go.wait()
        conn.request("GET", "/org/fake/resolve/main/big.safetensors")
        r = conn.getresponse()
        first = r.read(1)
        t = time.time()
        h, n = hashlib.sha256(first), len(first)
        while True:
            b = r.read(1 << 20)
            if not b:
                break
            h.update(b)
            n += len(b)
        out[i] = "%d %s %d %.6f" % (r.status, h.hexdigest(), n, t)
    except Exception as e:
        out[i] = "error %s" % e

ts = [threading.Thread(target=client, args=(i,)) for i in range(8)]
for t in ts: t.start()
for t in ts: t.join()
print("\n".join(out))
PY
n=$(grep -c "^200 $BIG_SHA $((MB << 20)) " "$T/eight.out")
check_grep "8 clients at once on a cold $MB MiB file: 8 byte-exact copies" '^8$' "$n"
check_grep "... from one upstream GET" '^1$' "$(fakehub_gets big.safetensors)"
up=$(awk '$1 == "big.safetensors" {print $2; exit}' "$LOG.first")
late=$(awk -v up="${up:-0}" '$1 == 200 {d = $4 - up; if (d > m) m = d} END {printf "%.3f", m}' "$T/eight.out")
if [ -n "$up" ] && awk -v d="$late" 'BEGIN {exit !(d <= 0.5)}'; then
	tap_ok "... the first byte at every client within the upstream's + 0.5 s (the last $late s after)"
else tap_not_ok "... the first byte at every client within the upstream's + 0.5 s" \
	"upstream first byte at ${up:-never}, the last client's $late s after" "$(cat "$T/eight.out")"; fi
check_grep "... /metrics: streamed responses counted" '^[1-9]' "$(metric "$M" mirror_streamed_total)"
check_grep "... /metrics: one file fetch of it" '^[1-9]' "$(metric "$M" upstream_file_fetches_total)"
if grep -q 'big.safetensors.*mirror=stream' "$SERVE_LOG"; then
	tap_ok "... the access log says mirror=stream"
else tap_not_ok "... the access log says mirror=stream" "$(grep big "$SERVE_LOG" | head -3)"; fi
# the import takes the same bytes: READY with no second GET
if wait_for 120 sh -c "'$W' --store '$T/m1' model list --json 2>/dev/null | grep -q READY"; then
	tap_ok "... the snapshot is READY once every file is in"
else tap_not_ok "... the snapshot is READY once every file is in"; fi
check_grep "... still one upstream GET of the file" '^1$' "$(fakehub_gets big.safetensors)"
curl -s "$M/org/fake/resolve/main/big.safetensors" -o "$T/warm" -D "$T/warm.h"
check_grep "... then served from the store, the same bytes" "^$BIG_SHA\$" "$(sha_of "$T/warm")"
rm -f "$T/warm"
serve_stop

# ---- a Range request while the file streams --------------------------------
fakehub_ctl '{"rate": {"mid.safetensors": 4194304}}'
serve_start range "$T/m2" --upstream "$F" --cache-seconds 0 --header-timeout 30 \
	--no-access-log || { tap_done; exit 1; }
curl -s -o "$T/whole" "$SERVE_URL/org/fake/resolve/main/mid.safetensors" &
W1=$!
wait_for 30 grep -q 'resolve/[0-9a-f]*/mid.safetensors' "$LOG"
code=$(curl -s -o "$T/part" -w '%{http_code}' -r 12000000-12999999 \
	"$SERVE_URL/org/fake/resolve/main/mid.safetensors")
head -c 13000000 "$FSRC/mid.safetensors" | tail -c 1000000 > "$T/want"
check_grep "a Range request while the file streams: 206" '^206$' "$code"
if cmp -s "$T/part" "$T/want"; then tap_ok "... its bytes exact"
else tap_not_ok "... its bytes exact"; fi
code=$(curl -s -o "$T/part" -w '%{http_code}' -r 100-199 \
	"$SERVE_URL/org/fake/resolve/main/mid.safetensors")
head -c 200 "$FSRC/mid.safetensors" | tail -c 100 > "$T/want"
if [ "$code" = 206 ] && cmp -s "$T/part" "$T/want"; then
	tap_ok "... and an early range too (sent once the file is verified)"
else tap_not_ok "... and an early range too (sent once the file is verified)" "HTTP $code"; fi
wait_exit 60 "$W1"
if cmp -s "$T/whole" "$FSRC/mid.safetensors"; then tap_ok "... the whole file to the first client"
else tap_not_ok "... the whole file to the first client"; fi
check_grep "... all from one upstream GET" '^1$' "$(fakehub_gets mid.safetensors)"
serve_stop

# ---- bytes that fail their hash --------------------------------------------
fakehub_ctl '{"corrupt": ["mid.safetensors"], "rate": {"mid.safetensors": 4194304}}'
serve_start corrupt "$T/m3" --upstream "$F" --cache-seconds 0 --header-timeout 30 \
	--no-access-log || { tap_done; exit 1; }
M=$SERVE_URL
pids=""
for i in 1 2 3; do
	(curl -s -o "$T/bad$i" -w '%{http_code}' \
		"$M/org/fake/resolve/main/mid.safetensors" > "$T/bad$i.code"
	echo $? > "$T/bad$i.rc") &
	pids="$pids $!"
done
for p in $pids; do wait_exit 60 "$p"; done
# cut: headers of a 200, then fewer bytes than the file's and a curl error
# (no byte at all is a cut too: a client that joined late, under load,
# may meet the verdict before its first byte went out, and curl then
# writes no file)
cut=0 outcomes=""
for i in 1 2 3; do
	sz=$(stat -c %s "$T/bad$i" 2>/dev/null || echo 0)
	outcomes="$outcomes $(cat "$T/bad$i.code")/rc$(cat "$T/bad$i.rc")/${sz}B"
	[ "$(cat "$T/bad$i.code")" = 200 ] && [ "$(cat "$T/bad$i.rc")" != 0 ] &&
		[ "$sz" -lt $((16 << 20)) ] && cut=$((cut + 1))
done
echo "#   the 3 clients on the corrupt file (code/curl exit/bytes):$outcomes"
check_grep "a file failing its SHA-256: all 3 clients' transfers cut mid-way (200, then short)" '^3$' "$cut"
check_grep "... from one upstream GET" '^1$' "$(fakehub_gets mid.safetensors)"
if wait_for 30 sh -c "test \"\$(curl -sf '$M/metrics' | awk '\$1 == \"wstore_serve_mirror_failures_total\" {print \$2}')\" -ge 1"; then
	tap_ok "... the import fails"
else tap_not_ok "... the import fails"; fi
check_grep "... nothing READY in the store" '^0$' \
	"$("$W" --store "$T/m3" model list --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')"
check_grep "... the server's log names the mismatch" 'hash to' "$(cat "$SERVE_LOG")"
fakehub_ctl '{}'
curl -s -o "$T/again" "$M/org/fake/resolve/main/mid.safetensors"
if cmp -s "$T/again" "$FSRC/mid.safetensors"; then
	tap_ok "... the next request fetches it again, right this time"
else tap_not_ok "... the next request fetches it again, right this time"; fi
check_grep "... with a new upstream GET" '^1$' "$(fakehub_gets mid.safetensors)"
serve_stop

# ---- the real client on a cold mirror: the whole snapshot -------------------
if PP=$(hub_pythonpath 1.28.0); then
	fakehub_ctl '{"rate": {"mid.safetensors": 8388608}}'
	serve_start hfdl "$T/m5" --upstream "$F" --cache-seconds 0 \
		--header-timeout 30 --no-access-log || { tap_done; exit 1; }
	out=$(PYTHONPATH=$PP HF_ENDPOINT=$SERVE_URL HF_HUB_DISABLE_TELEMETRY=1 \
		timeout 300 /usr/bin/python3 -m huggingface_hub.cli.hf \
		download org/fake --cache-dir "$T/hfcache5" 2>&1 |
		tail -1 | sed 's/^ *path: *//')
	bad=""
	for f in config.json big.safetensors mid.safetensors; do
		cmp -s "$out/$f" "$FSRC/$f" || bad="$bad $f"
		[ "$(fakehub_gets "$f")" = 1 ] || bad="$bad $f:$(fakehub_gets "$f")GETs"
	done
	if [ -z "$bad" ]; then
		tap_ok "hf download of a cold model through the mirror: every file exact, one upstream GET each"
	else tap_not_ok "hf download of a cold model through the mirror: every file exact, one upstream GET each" \
		"$out:$bad"; fi
	serve_stop
else
	tap_skip "hf download of a cold model through the mirror" \
		"huggingface_hub 1.28.0 is not unpacked in $HFHUB"
fi

# ---- a snapshot partly mirrored --------------------------------------------
fakehub_ctl '{"slow": ["big.safetensors"]}'
serve_start partial "$T/m4" --upstream "$F" --cache-seconds 0 --header-timeout 30 \
	--no-access-log || { tap_done; exit 1; }
M=$SERVE_URL
curl -s -o /dev/null --max-time 60 "$M/org/fake/resolve/main/big.safetensors" &
B=$!
wait_for 30 grep -q 'resolve/[0-9a-f]*/big.safetensors' "$LOG"
curl -s -o "$T/cfg1" "$M/org/fake/resolve/main/config.json"
curl -s -o "$T/cfg2" -D "$T/cfg2.h" "$M/org/fake/resolve/main/config.json"
if cmp -s "$T/cfg1" "$FSRC/config.json" && cmp -s "$T/cfg2" "$FSRC/config.json"; then
	tap_ok "partly mirrored: a verified file served while another still streams"
else tap_not_ok "partly mirrored: a verified file served while another still streams"; fi
check_grep "... with the upstream's commit" 'X-Repo-Commit: 0123456789abcdef' "$(cat "$T/cfg2.h")"
info=$(curl -s "$M/api/models/org/fake/revision/main" | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
print(j["sha"], " ".join(s["rfilename"] for s in j["siblings"]))' 2>&1)
check_grep "... its model info from the upstream's listing meanwhile (commit, every file)" \
	'^0123456789abcdef0123456789abcdef01234567 big.safetensors config.json mid.safetensors$' "$info"
# tree, paths-info and raw of the partly mirrored snapshot, from the
# upstream's listing as well (the store has no tree of it yet)
tree=$(curl -s "$M/api/models/org/fake/tree/main?recursive=true&expand=true" |
	FSRC="$FSRC" /usr/bin/python3 -c '
import hashlib, json, os, sys
def blob(p):
    d = open(p, "rb").read()
    return hashlib.sha1(b"blob %d\0" % len(d) + d).hexdigest()
src = os.environ["FSRC"]
out = []
for e in json.load(sys.stdin):
    f = os.path.join(src, e["path"])
    lfs = e.get("lfs")
    ok = e["size"] == os.path.getsize(f) and e["lastCommit"]["id"].startswith("0123456789abcdef")
    if lfs:
        ok = ok and lfs["oid"] == hashlib.sha256(open(f, "rb").read()).hexdigest()
    else:
        ok = ok and e["oid"] == blob(f)
    out.append(e["path"] + ("" if ok else ":wrong"))
print(" ".join(out))' 2>&1)
check_grep "... its tree from the listing meanwhile (sizes, oids, LFS sha256s, the commit)" \
	'^big.safetensors config.json mid.safetensors$' "$tree"
pi=$(curl -s -X POST -H 'Content-Type: application/json' \
	-d '{"paths": ["config.json", "big.safetensors", "nope.bin"]}' \
	"$M/api/models/org/fake/paths-info/main" | /usr/bin/python3 -c '
import json, sys
print(" ".join("%s:%s" % (e["path"], "lfs" if "lfs" in e else e["type"]) for e in json.load(sys.stdin)))' 2>&1)
check_grep "... its paths-info from the listing meanwhile" \
	'^config.json:file big.safetensors:lfs$' "$pi"
check_grep "... a directory it lacks: 404" '^404$' \
	"$(curl -s -o /dev/null -w '%{http_code}' "$M/api/models/org/fake/tree/main/nodir")"
curl -s -o "$T/rawcfg" "$M/org/fake/raw/main/config.json"
if cmp -s "$T/rawcfg" "$FSRC/config.json"; then tap_ok "... raw of a file kept in git meanwhile: its bytes"
else tap_not_ok "... raw of a file kept in git meanwhile: its bytes"; fi
check_grep "... raw of an LFS file meanwhile: its pointer" "oid sha256:$BIG_SHA" \
	"$(curl -s "$M/org/fake/raw/main/big.safetensors")"
check_grep "... the snapshot is not READY meanwhile" '^0$' \
	"$("$W" --store "$T/m4" model list --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')"
check_grep "... one upstream GET of the verified file" '^1$' "$(fakehub_gets config.json)"
# the real client, one file of the partly mirrored snapshot (HEAD, then
# GET: it never waits for the rest of the model)
if PP=$(hub_pythonpath 1.28.0); then
	out=$(PYTHONPATH=$PP HF_ENDPOINT=$M HF_HUB_DISABLE_TELEMETRY=1 \
		timeout 120 /usr/bin/python3 -m huggingface_hub.cli.hf \
		download org/fake config.json --cache-dir "$T/hfcache" 2>&1 |
		tail -1 | sed 's/^ *path: *//')
	if [ -f "$out" ] && cmp -s "$out" "$FSRC/config.json"; then
		tap_ok "... hf download of that file through the mirror meanwhile"
	else tap_not_ok "... hf download of that file through the mirror meanwhile" "$out"; fi
else
	tap_skip "hf download of one file of a partly mirrored snapshot" \
		"huggingface_hub 1.28.0 is not unpacked in $HFHUB"
fi
kill "$B" 2>/dev/null
wait "$B" 2>/dev/null
serve_stop
check_grep "... the server stops with a file still streaming" '^0$' "$SERVE_RC"

# ---- a spool directory that fills up --------------------------------------
mkdir -p "$T/full"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=4m tmpfs "$T/full" 2>/dev/null; then
	FULL="$T/full"
	fakehub_ctl '{}'
	OLD_TMPDIR=${TMPDIR-}
	export TMPDIR="$FULL"
	serve_start full "$T/m6" --upstream "$F" --cache-seconds 0 \
		--header-timeout 30 --no-access-log || { tap_done; exit 1; }
	export TMPDIR="$OLD_TMPDIR"
	code=$(curl -s -o "$T/full.out" -w '%{http_code}' --max-time 60 \
		"$SERVE_URL/org/fake/resolve/main/mid.safetensors")
	rc=$?
	sz=$(stat -c %s "$T/full.out" 2>/dev/null || echo 0)
	if [ "$sz" -lt $((16 << 20)) ] && { [ "$rc" != 0 ] || [ "$code" != 200 ]; }; then
		tap_ok "a full spool directory: the transfer fails (HTTP $code, curl $rc, $sz bytes)"
	else tap_not_ok "a full spool directory: the transfer fails" "HTTP $code, curl $rc, $sz bytes"; fi
	if wait_for 30 grep -q "cannot write the spool of 'mid.safetensors' (in $FULL): No space left on device" "$SERVE_LOG"; then
		tap_ok "... the log names the spool and the full disk"
	else tap_not_ok "... the log names the spool and the full disk" "$(tail -5 "$SERVE_LOG")"; fi
	check_grep "... nothing READY in the store" '^0$' \
		"$("$W" --store "$T/m6" model list --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')"
	serve_stop
	umount "$FULL" && FULL=
else
	tap_skip "a full spool directory" "needs root to mount a small tmpfs"
fi

tap_done
