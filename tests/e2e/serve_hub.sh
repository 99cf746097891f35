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
HUB_PKG=@huggingface/hub@2.17.5
NPM_DIR=${WSTORE_NPM_DIR:-$(cd "$BUILD" && pwd)/npm-hub}
suite_cleanup() {
	serve_stop_all
	redis_stop_all >/dev/null 2>&1
}

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	tap_not_ok "node and npm are needed (apt-get install nodejs npm)"
	tap_done
	exit 1
fi
if [ ! -f "$NPM_DIR/node_modules/@huggingface/hub/package.json" ] ||
	! grep -q '"version": "2.17.5"' "$NPM_DIR/node_modules/@huggingface/hub/package.json"; then
	mkdir -p "$NPM_DIR"
	[ -f "$NPM_DIR/package.json" ] || echo '{"private": true}' > "$NPM_DIR/package.json"
	if ! (cd "$NPM_DIR" && timeout 300 npm install --no-audit --no-fund \
		--cache "$NPM_DIR/.npm-cache" "$HUB_PKG") > "$T/npm.log" 2>&1; then
		tap_not_ok "npm install $HUB_PKG" "$(tail -5 "$T/npm.log")"
		tap_done
		exit 1
	fi
fi
tap_ok "$HUB_PKG installed ($NPM_DIR)"

SRC="$T/src"
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 3000000 --shards 2 >/dev/null
mkdir -p "$SRC/sub/dir"
printf 'nested\n' > "$SRC/sub/dir/x.bin"
printf 'blank in name\n' > "$SRC/sub/with space.txt"
printf '' > "$SRC/empty.txt"
TOKEN=hf_wstore_test_token   # the JS client insists on the hf_ prefix

# hub_run LABEL STORE REPO: serve STORE, run the client, count its lines
hub_run() {
	label=$1; store=$2; repo=$3
	export WSTORE_SERVE_TOKEN=$TOKEN
	serve_start "$label" "$store" || return 1
	unset WSTORE_SERVE_TOKEN
	sha=$(curl -sf -H "Authorization: Bearer $TOKEN" "$SERVE_URL/api/models/$repo" | json_get sha)
	timeout 120 node "$HERE/e2e/hub_client.mjs" "$NPM_DIR" "$SERVE_URL" "$repo" \
		"$SRC" "$T/cache-$label" "$sha" "$TOKEN" > "$T/node-$label.log" 2>&1
	rc=$?
	n=0
	while IFS= read -r line; do
		case $line in
		"ok - "*) tap_ok "$label: ${line#ok - }"; n=$((n + 1)) ;;
		"not ok - "*) tap_not_ok "$label: ${line#not ok - }"; n=$((n + 1)) ;;
		"#"*) echo "$line" ;;
		esac
	done < "$T/node-$label.log"
	if [ "$rc" != 0 ] || [ "$n" -lt 11 ]; then
		tap_not_ok "$label: the client ran all its checks (exit $rc, $n checks)" \
			"$(tail -5 "$T/node-$label.log")"
	fi
	serve_stop
	check_grep "$label: server exited 0" '^0$' "$SERVE_RC"
}

check "file: import" "$W" --store "$T/store" model import --checkpoint-id tiny-1 \
	--model-id org/tiny --source "$SRC" --chunk-size 1MiB --quiet
hub_run file "$T/store" org/tiny

# ---- the Python client (huggingface_hub), 0.x and 1.x --------------------------
# From $WSTORE_HFHUB_HOME (default /opt/hfhub): huggingface_hub-<v>/src,
# and deps-for-1.x for 1.x, unpacked there with Debian's python3-requests,
# -httpx, -filelock, -fsspec, -tqdm, -yaml, -packaging installed.
HFHUB=${WSTORE_HFHUB_HOME:-/opt/hfhub}
py_run() { # VERSION
	pp="$HFHUB/huggingface_hub-$1/src"
	case $1 in 1.*) pp="$pp:$HFHUB/deps-for-1.x" ;; esac
	if [ ! -d "$HFHUB/huggingface_hub-$1/src/huggingface_hub" ]; then
		tap_skip "python client $1" "huggingface_hub $1 is not unpacked in $HFHUB (run the hfhub installer or set WSTORE_HFHUB_HOME)"
		return 0
	fi
	export WSTORE_SERVE_TOKEN=$TOKEN
	serve_start "py$1" "$T/store" || return 1
	unset WSTORE_SERVE_TOKEN
	sha=$(curl -sf -H "Authorization: Bearer $TOKEN" "$SERVE_URL/api/models/org/tiny" | json_get sha)
	PYTHONPATH=$pp timeout 300 /usr/bin/python3 "$HERE/e2e/hub_client.py" "$SERVE_URL" \
		org/tiny "$SRC" "$T/pycache-$1" "$sha" "$TOKEN" > "$T/py-$1.log" 2>&1
	rc=$?
	n=0
	while IFS= read -r line; do
		case $line in
		"ok - "*) tap_ok "python ${line#ok - }"; n=$((n + 1)) ;;
		"not ok - "*) tap_not_ok "python ${line#not ok - }"; n=$((n + 1)) ;;
		esac
	done < "$T/py-$1.log"
	if [ "$rc" != 0 ] || [ "$n" -lt 7 ]; then
		tap_not_ok "python $1: the client ran all its checks (exit $rc, $n checks)" \
			"$(tail -5 "$T/py-$1.log")"
	fi
	serve_stop
}
py_run 0.36.2
py_run 1.28.0

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
