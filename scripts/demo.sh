#!/bin/sh
# demo.sh - the quick start: generate a small Hugging Face style
# checkpoint (two safetensors shards, index, config, tokenizer), import it
# into a fresh embedded store, then list, inspect, verify, materialize a
# file and pull the whole checkpoint as a directory an engine loads.  Run
# through `make demo`.
set -eu
BUILD=${BUILD:-build}
W="$BUILD/wstore"
D=${DEMO_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/wstore-demo-XXXXXX")}
export WSTORE_HOME="$D/store"
step() { printf '\n$ %s\n' "$*"; "$@"; }

python3 tests/tools/mkckpt.py "$D/Demo-1B" --size 48000000 --shards 2
echo "demo checkpoint in $D/Demo-1B, store in $WSTORE_HOME"
step "$W" model import --checkpoint-id demo-main --model-id demo/Demo-1B \
	--revision main --source "$D/Demo-1B" --chunk-size 16MiB
step "$W" model list
step "$W" model inspect demo-main
step "$W" model verify demo-main
step "$W" model materialize-file demo-main \
	--path model-00001-of-00002.safetensors --output "$D/shard1.safetensors"
step cmp "$D/Demo-1B/model-00001-of-00002.safetensors" "$D/shard1.safetensors"
echo "materialized file is identical to the source"
step "$W" model pull demo-main --dest "$D/pulled"
step diff -r "$D/Demo-1B" "$D/pulled"
echo "pulled directory is identical to the source"
step "$W" model delete demo-main
step "$W" model list
rm -rf "$D"
echo
echo "demo: ok"
