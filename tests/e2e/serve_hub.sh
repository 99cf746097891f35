#!/bin/sh
# serve_hub.sh - `wstore serve` against the real Hugging Face JavaScript
# client: @huggingface/hub (pinned below), installed with npm into a cache
# folder on first use, downloads a checkpoint with modelInfo, listFiles,
# fileDownloadInfo, downloadFile and snapshotDownload (hubUrl pointing at
# the server, a bearer token required), from a file store and from Redis;
# hub_client.mjs compares every answer and byte with the source.
#   BUILD            the build directory holding wstore
#   WSTORE_NPM_DIR   where the npm package is installed (default
#                    $BUILD/npm-hub; reused across runs)
TAP_SUITE=serve-hub
. "$(dirname "$0")/../lib/suite.sh"
. "$HERE/lib/redis.sh"
. "$HERE/lib/serve.sh"
. "$HERE/lib/hubclients.sh"
suite_cleanup() {
	serve_stop_all
	redis_stop_all >/dev/null 2>&1
}

if ! hub_npm_ready; then
	tap_done
	exit 1
fi

SRC="$T/src"
hub_source "$SRC"
TOKEN=hf_wstore_test_token   # the JS client insists on the hf_ prefix

# hub_run LABEL STORE REPO: serve STORE, run the client, count its lines
hub_run() {
	label=$1; store=$2; repo=$3
	export WSTORE_SERVE_TOKEN=$TOKEN
	serve_start "$label" "$store" || return 1
	unset WSTORE_SERVE_TOKEN
	sha=$(curl -sf -H "Authorization: Bearer $TOKEN" "$SERVE_URL/api/models/$repo" | json_get sha)
	hub_js "$label" "$SERVE_URL" "$repo" "$SRC" "$T/cache-$label" "$sha" "$TOKEN"
	serve_stop
	check_grep "$label: server exited 0" '^0$' "$SERVE_RC"
}

check "file: import" "$W" --store "$T/store" model import --checkpoint-id tiny-1 \
	--model-id org/tiny --source "$SRC" --chunk-size 1MiB --quiet
hub_run file "$T/store" org/tiny

# ---- the Python client (huggingface_hub), 0.x and 1.x --------------------------
py_run() { # VERSION
	export WSTORE_SERVE_TOKEN=$TOKEN
	serve_start "py$1" "$T/store" || return 1
	unset WSTORE_SERVE_TOKEN
	sha=$(curl -sf -H "Authorization: Bearer $TOKEN" "$SERVE_URL/api/models/org/tiny" | json_get sha)
	hub_py "$1" python "$SERVE_URL" org/tiny "$SRC" "$T/pycache-$1" "$sha" "$TOKEN"
	serve_stop
}
py_run 0.36.2
py_run 1.28.0

# ---- resume after a cut connection -------------------------------------------
# tests/tools/cutproxy.py between the client and serve closes the first
# GET of a weight file after CUT bytes, once.  0.x fails that call
# ("Consistency check failed") but keeps the partial .incomplete file,
# which the next call resumes with a Range request for the rest.  1.x
# retries within the call, from where its last whole 10 MiB block ended:
# here from byte 0, so a plain GET again.  Either way the file is whole
# and correct.
RBIG=$(cd "$SRC" && ls -S *.safetensors | head -1)
CUT=400000
resume_run() { # VERSION
	if ! rpp=$(hub_pythonpath "$1"); then
		tap_skip "python $1: resume after a cut connection" "huggingface_hub $1 is not unpacked in $HFHUB"
		return 0
	fi
	serve_start "resume$1" "$T/store" || return 1
	: > "$T/cut-$1.log"
	python3 "$HERE/tools/cutproxy.py" "${SERVE_URL##*:}" "/resolve/main/$RBIG" \
		"$CUT" "$T/cut-$1.log" > "$T/cutproxy-$1.out" 2>&1 &
	cut_pid=$!
	if wait_for 10 grep -q '^port ' "$T/cutproxy-$1.out"; then
		pport=$(sed -n 's/^port //p' "$T/cutproxy-$1.out")
		out=$(PYTHONPATH=$rpp HF_ENDPOINT="http://127.0.0.1:$pport" HF_HUB_DISABLE_TELEMETRY=1 \
			HF_HUB_DISABLE_PROGRESS_BARS=1 timeout 120 /usr/bin/python3 -c '
import sys
import huggingface_hub as hh
repo, name, cache, src = sys.argv[1:5]
calls = 0
for _ in range(2):  # a user running it again after an error
    calls += 1
    try:
        p = hh.hf_hub_download(repo, name, cache_dir=cache)
        break
    except Exception as e:
        print("# call %d: %s: %s" % (calls, type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
else:
    sys.exit("# no file after 2 calls")
same = open(p, "rb").read() == open(src, "rb").read()
print("# %d call(s)" % calls)
print("same" if same else "bytes differ")' org/tiny "$RBIG" "$T/resume-$1" "$SRC/$RBIG" 2>&1)
		check_grep "python $1: hf_hub_download of a weight file cut mid-way: every byte" '^same$' "$out"
		printf '%s\n' "$out" | grep '^#'
		check_grep "... the connection was cut after $CUT bytes" "^cut after $CUT bytes\$" "$(cat "$T/cut-$1.log")"
		after=$(sed -n '/^cut after/,$p' "$T/cut-$1.log")
		case $1 in
		0.*)
			check_grep "... the next call asked for the rest with a Range request" \
				"^GET /org/tiny/resolve/main/$RBIG HTTP/1.1  [Rr]ange: bytes=[1-9][0-9]*-\$" "$after"
			;;
		*)
			check_grep "... the call itself retried" '^# 1 call\(s\)$' "$out"
			check_grep "... with a new GET" "^GET /org/tiny/resolve/main/$RBIG HTTP/1.1" "$after"
			;;
		esac
	else
		tap_not_ok "python $1: the cutting proxy did not start" "$(cat "$T/cutproxy-$1.out")"
	fi
	kill "$cut_pid" 2>/dev/null
	wait "$cut_pid" 2>/dev/null
	serve_stop
}
resume_run 0.36.2
resume_run 1.28.0

# ---- the Hub protocol's details, with curl ----------------------------------------
serve_start proto "$T/store" || { tap_done; exit 1; }
B=$SERVE_URL
git_blob() { python3 -c 'import hashlib,sys; d=open(sys.argv[1],"rb").read(); print(hashlib.sha1(b"blob %d\0" % len(d) + d).hexdigest())' "$1"; }
H=$(curl -sfI "$B/org/tiny/resolve/main/config.json" | tr -d '\r')
check_grep "a file kept in git: its git blob SHA-1 as ETag" "^ETag: \"$(git_blob "$SRC/config.json")\"\$" "$H"
TREE=$(curl -sf "$B/api/models/org/tiny/tree/main?recursive=1")
check_grep "... and as tree oid" "^$(git_blob "$SRC/config.json")\$" \
	"$(printf %s "$TREE" | python3 -c 'import json,sys; print([e["oid"] for e in json.load(sys.stdin) if e["path"] == "config.json"][0])')"
BIGF=$(cd "$SRC" && ls -S *.safetensors | head -1)
BIGN=$(stat -c %s "$SRC/$BIGF")
check_grep "an LFS file: pointerSize is 125 + the digits of its size" "^$((125 + ${#BIGN}))\$" \
	"$(printf %s "$TREE" | python3 -c 'import json,sys; print([e["lfs"]["pointerSize"] for e in json.load(sys.stdin) if e["path"] == sys.argv[1]][0])' "$BIGF")"
curl -sf "$B/org/tiny/raw/main/$BIGF" -o "$T/ptr"
check_grep "/raw/ of an LFS file: its pointer" "^oid sha256:$(sha256sum "$SRC/$BIGF" | cut -c1-64)\$" "$(cat "$T/ptr")"
check_grep "... of pointerSize bytes" "^$((125 + ${#BIGN}))\$" "$(stat -c %s "$T/ptr")"
H=$(curl -s -D- -o /dev/null -H 'Range: bytes=0-0' "$B/org/tiny/resolve/main/empty.txt" | tr -d '\r')
check_grep "an empty file asked bytes=0-0: 200" '^HTTP/1.1 200' "$H"
check_grep "... with Content-Range naming its size" '^Content-Range: bytes \*/0$' "$H"
R=$(curl -sf "$B/api/models/org/tiny/refs")
check_grep "/api/models/{repo}/refs: main at the commit" '^ok$' "$(printf %s "$R" | python3 -c '
import json, sys
r = json.load(sys.stdin)
b = [x for x in r["branches"] if x["name"] == "main"]
print("ok" if b and b[0]["ref"] == "refs/heads/main" and len(b[0]["targetCommit"]) == 40 and r["tags"] == [] else r)')"
check_grep "refs of an unknown repository: 404 RepoNotFound" '^404 RepoNotFound$' \
	"$(curl -s -D- -o /dev/null "$B/api/models/org/nope/refs" | tr -d '\r' | awk '/^HTTP/ {s=$2} /^X-Error-Code:/ {c=$2} END {print s, c}')"
serve_stop
serve_start proto-token "$T/store" --token "$TOKEN" || { tap_done; exit 1; }
check_grep "401 carries X-Error-Code" '^X-Error-Code: ' "$(curl -s -D- -o /dev/null "$SERVE_URL/api/models/org/tiny" | tr -d '\r')"
serve_stop

if redis_start_standalone "$T/redis" >/dev/null 2>&1; then
	check "redis: import" "$W" --store "$WSTORE_TEST_REDIS_URL" model import \
		--checkpoint-id rtiny --model-id org/rtiny --source "$SRC" \
		--chunk-size 1MiB --quiet
	hub_run redis "$WSTORE_TEST_REDIS_URL" org/rtiny
else
	tap_not_ok "cannot start a redis-server for the Redis part"
fi
tap_done
