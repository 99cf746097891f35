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

if redis_start_standalone "$T/redis" >/dev/null 2>&1; then
	check "redis: import" "$W" --store "$WSTORE_TEST_REDIS_URL" model import \
		--checkpoint-id rtiny --model-id org/rtiny --source "$SRC" \
		--chunk-size 1MiB --quiet
	hub_run redis "$WSTORE_TEST_REDIS_URL" org/rtiny
else
	tap_not_ok "cannot start a redis-server for the Redis part"
fi
tap_done
