#!/bin/sh
# cli.sh - end-to-end tests of the wstore CLI against one store.  The same
# suite runs once per backend (tests/run.sh):
#   WSTORE_TEST_KIND   file | redis | cluster | mooncake
#   WSTORE_TEST_STORE  the --store URL (file: a directory is made here)
#   BUILD              the build directory holding wstore
# Checks that look at raw keys use keys_under(), which each kind implements.
KIND=${WSTORE_TEST_KIND:-file}
TAP_SUITE="e2e-$KIND"
. "$(dirname "$0")/../lib/suite.sh"
if [ "$KIND" = file ]; then
	STORE="$T/store"
else
	STORE=$WSTORE_TEST_STORE
fi
ws() { "$W" --store "$STORE" "$@"; }
# ids are unique per run so suites on shared servers do not collide
P="t$$"

# keys_under PREFIX: the store's keys starting with PREFIX, one per line
keys_under() {
	case $KIND in
	file) (cd "$STORE" 2>/dev/null && find . -type f ! -path './.*' ! -name '.*' |
		sed 's|^\./||' | grep "^$1" || true) ;;
	redis) redis-cli -u "$WSTORE_TEST_REDIS_URL" --no-auth-warning --scan \
		--pattern "$1*" ;;
	cluster) for p in $WSTORE_TEST_CLUSTER_PORTS; do
			redis-cli -p "$p" --scan --pattern "$1*"; done | sort -u ;;
	mooncake) echo "no key listing on mooncake" ;;
	esac
}
can_list() { [ "$KIND" != mooncake ]; }
# a Mooncake store (the stand-in or a real one): engines read it through
# SGLang's mooncake:// connector, so import warns about chunk sizes
on_mooncake() {
	case "$KIND $STORE" in mooncake*|*" mooncake"*) return 0 ;; esac
	return 1
}
# no_warning NAME TEXT: TEXT has no "warning:" line
no_warning() {
	if printf '%s\n' "$2" | grep -q "warning:"; then
		tap_not_ok "$1" "unexpected warning:" "$(printf '%s\n' "$2" | grep "warning:")"
	else tap_ok "$1"; fi
}

SRC="$T/src"
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 3000000 --shards 2
printf '' > "$SRC/empty.txt"
mkdir -p "$SRC/sub/dir"
printf 'nested\n' > "$SRC/sub/dir/x.bin"

# ---- import, list, inspect, verify, materialize, delete ----------------
check_exit "import succeeds" 0 ws model import --checkpoint-id "$P-a" \
	--model-id "Org/Model-ü" --revision r1 --source "$SRC" --chunk-size 1000K
check_grep "import reports files and rate" "imported '$P-a'.*9 files.*/s" "$OUT"
if on_mooncake; then
	check_grep "1000K import on mooncake warns with the connector's file_chunk_size" \
		"^wstore: warning: chunk size 1024000 bytes is not the 64 MiB .*mooncake:// connector.*'$P-a'.*file_chunk_size \"1000KB\"$" "$OUT"
	n=$(printf '%s\n' "$OUT" | grep -c "warning:")
	check "the warning is one line ($n)" test "$n" = 1
else
	no_warning "no chunk-size warning off Mooncake" "$OUT"
fi
check_exit "inspect shows the chunk size" 0 ws model inspect "$P-a"
check_grep "inspect shows 1000 KiB and file_chunk_size 1000KB" \
	'^chunk size: 1000.00 KiB \(1024000 bytes\); SGLang mooncake:// file_chunk_size "1000KB"$' "$OUT"
check_exit "list succeeds" 0 ws model list
check_grep "list shows the checkpoint READY" "$P-a +Org/Model-ü +r1 +READY" "$OUT"
check_exit "list --json" 0 ws --json model list
check_grep "list --json has the id" "\"checkpoint_id\": \"$P-a\"" "$OUT"
check_exit "list --model" 0 ws model list --model "Org/Model-ü"
check_grep "per-model index lists it" "$P-a" "$OUT"
check_exit "inspect succeeds" 0 ws model inspect "$P-a"
check_grep "inspect shows a file table" "WEIGHT .*model-00001-of-00002.safetensors" "$OUT"
check_grep "inspect summarises tensors" "model-00001-of-00002.safetensors +\\[safetensors: [0-9]+ tensors, [0-9]+ params, BF16,F32\\]" "$OUT"
ws --json model inspect "$P-a" > "$T/m.json"
python3 "$HERE/tools/refmanifest.py" "$SRC" "$P-a" "Org/Model-ü" r1 1024000 "$T/m.json" > "$T/ref.json"
printf '\n' >> "$T/ref.json"
if cmp -s "$T/m.json" "$T/ref.json"; then tap_ok "manifest bytes equal the reference (sorted, compact, UTF-8, empty file, multi-chunk)"
else tap_not_ok "manifest bytes equal the reference" "$(diff "$T/m.json" "$T/ref.json" | head -3)"; fi
check_exit "verify passes" 0 ws model verify "$P-a"
check_grep "verify names every file" "ok +sub/dir/x.bin" "$OUT"
check_exit "materialize-file" 0 ws model materialize-file "$P-a" \
	--path model-00002-of-00002.safetensors --output "$T/out.st"
check "materialized bytes equal the source" cmp "$T/out.st" "$SRC/model-00002-of-00002.safetensors"
check_exit "materialize an empty file" 0 ws model materialize-file "$P-a" --path empty.txt --output "$T/empty"
check "empty file is empty" test -f "$T/empty" -a ! -s "$T/empty"
check_exit "re-import of a READY id is refused" 1 ws model import \
	--checkpoint-id "$P-a" --model-id M --source "$SRC"
check_grep "refusal says READY" "already exists and is READY" "$OUT"
check_one_line "refusal is one line" "$OUT"
check_exit "materialize of a missing path" 1 ws model materialize-file "$P-a" --path nope --output "$T/nope"
check_grep "missing path is named" "has no file 'nope'" "$OUT"

# ---- pull ------------------------------------------------------------------
check_exit "pull" 0 ws model pull "$P-a" --dest "$T/pull"
check "pulled tree equals the source" diff -r "$SRC" "$T/pull"
rm "$T/pull/config.json"
truncate -s 100 "$T/pull/model-00001-of-00002.safetensors"
echo junk > "$T/pull/tokenizer.json"
check_exit "pull resumes over a damaged tree" 0 ws model pull "$P-a" --dest "$T/pull"
check "resumed tree equals the source" diff -r "$SRC" "$T/pull"
check_exit "pull --include" 0 ws model pull "$P-a" --dest "$T/pull-inc" --include '*.json'
check "include pulled only json files" test -f "$T/pull-inc/config.json" -a ! -e "$T/pull-inc/model-00001-of-00002.safetensors"
check_exit "pull --exclude --no-verify" 0 ws model pull "$P-a" --dest "$T/pull-exc" --exclude 'sub/*' --no-verify
check "exclude skipped sub/" test ! -e "$T/pull-exc/sub" -a -f "$T/pull-exc/empty.txt"
mkdir -p "$T/outside" "$T/pull-sym"
ln -s "$T/outside" "$T/pull-sym/sub"
check_exit "pull refuses a symlink planted in DEST" 1 ws model pull "$P-a" --dest "$T/pull-sym"
check "nothing written through the planted symlink" test -z "$(ls -A "$T/outside")"
check_one_line "planted-symlink error is one line" "$OUT"
check_exit "pull of a missing id" 1 ws model pull "$P-nope" --dest "$T/pull-nope"
check_grep "missing id is named" "$P-nope" "$OUT"

# ---- multi-chunk with tiny chunks ---------------------------------------
check_exit "import with 4097-byte chunks" 0 ws model import --checkpoint-id "$P-small" \
	--model-id M --source "$SRC" --chunk-size 4097
if on_mooncake; then
	check_grep "4097-byte import on mooncake warns and suggests a size the connector can take" \
		"^wstore: warning: chunk size 4097 bytes cannot be written as a file_chunk_size .*'$P-small'.*--chunk-size 4KB \(file_chunk_size \"4KB\"\)" "$OUT"
else
	no_warning "no warning for 4097-byte chunks off Mooncake" "$OUT"
fi
check_exit "inspect a 4097-byte checkpoint" 0 ws model inspect "$P-small"
check_grep "inspect says no file_chunk_size matches 4097 bytes" \
	'^chunk size: 4.00 KiB \(4097 bytes\); no SGLang mooncake:// file_chunk_size matches it$' "$OUT"
n=$(ws --json model inspect "$P-small" | python3 -c 'import json,sys; m=json.load(sys.stdin); print(sum(len(f["chunks"]) for f in m["files"]))')
want=$(python3 -c "import os;print(sum((os.path.getsize(os.path.join(r,f))+4096)//4097 for r,d,fs in os.walk('$SRC') for f in fs))")
check "chunk count is ceil(size/chunk_size) per file ($n)" test "$n" = "$want"
check_exit "verify small-chunk import" 0 ws model verify "$P-small"

# ---- the default chunk size is 64 MiB: what the connector assumes ----------
check_exit "import with the default chunk size" 0 ws model import --checkpoint-id "$P-def" \
	--model-id M --source "$SRC"
no_warning "no chunk-size warning for the default" "$OUT"
n=$(ws --json model inspect "$P-def" | python3 -c 'import json,sys; m=json.load(sys.stdin); print(sorted(set(f["chunk_size"] for f in m["files"])))')
check "every file record of a default import has chunk_size 64 MiB ($n)" test "$n" = "[67108864]"
check_exit "inspect a default import" 0 ws model inspect "$P-def"
check_grep "inspect shows 64 MiB and file_chunk_size 64MB" \
	'^chunk size: 64.00 MiB \(67108864 bytes\); SGLang mooncake:// file_chunk_size "64MB"$' "$OUT"
check_grep "no per-file chunk size column when all agree" "^TYPE +SIZE +CHUNKS +SHA256 +PATH$" "$OUT"
if [ "$KIND" = file ]; then
	# another writer may vary chunk_size per file; one chunk stays valid
	python3 - "$STORE/weight/models/$P-def/manifest" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for f in m["files"]:
    if f["path"] == "config.json":
        f["chunk_size"] = 4097
open(sys.argv[1], "w").write(json.dumps(m, sort_keys=True, separators=(",", ":")))
PY
	check_exit "inspect a manifest whose files differ in chunk size" 0 ws model inspect "$P-def"
	check_grep "inspect says the chunk size differs per file" \
		"^chunk size: differs per file \(CHUNK SIZE column\); no one file_chunk_size" "$OUT"
	check_grep "per-file column header" "^TYPE +SIZE +CHUNKS +CHUNK SIZE +SHA256 +PATH$" "$OUT"
	check_grep "per-file chunk size of the odd file" "^METADATA +[0-9]+ +1 +4097 +[0-9a-f]{16} +config.json$" "$OUT"
	check_grep "per-file chunk size of the others" "^WEIGHT +[0-9]+ +1 +67108864 +[0-9a-f]{16} +model-00001-of-00002.safetensors" "$OUT"
else
	tap_skip "inspect a manifest whose files differ in chunk size" \
		"editing a manifest needs the file store"
fi
ws model delete "$P-def" >/dev/null 2>&1

# ---- corruption found by verify ----------------------------------------
if [ "$KIND" = file ]; then
	key=$(ws --json model inspect "$P-small" | python3 -c 'import json,sys; m=json.load(sys.stdin); print([f for f in m["files"] if f["path"]=="model-00001-of-00002.safetensors"][0]["chunks"][3])')
	set -- $(chunk_at "$STORE" "$key")
	printf 'X' | dd of="$1" bs=1 seek=$(($2 + 100)) conv=notrunc 2>/dev/null
	check_exit "verify finds a flipped byte (exit 3)" 3 ws model verify "$P-small"
	check_grep "verify names the damaged file" "BAD +model-00001-of-00002.safetensors: .*sha256 mismatch" "$OUT"
	echo old > "$T/keep"
	check_exit "materialize of a damaged file fails" 1 ws model materialize-file "$P-small" \
		--path model-00001-of-00002.safetensors --output "$T/keep"
	check "failed materialize leaves the old output" grep -qx old "$T/keep"
	check "failed materialize leaves no temp file" test -z "$(ls -A "$T" | grep wstore-tmp)"
	check_exit "pull of a damaged checkpoint fails" 1 ws model pull "$P-small" --dest "$T/pull-bad"
	check_grep "pull names the damaged file" "model-00001-of-00002.safetensors" "$OUT"
	check "pull leaves no partial or temp file" test ! -e "$T/pull-bad/model-00001-of-00002.safetensors" -a -z "$(find "$T/pull-bad" -name '.wstore-*' 2>/dev/null)"
	chunk_remove "$STORE" "$key"
	check_exit "verify finds a missing chunk (exit 3)" 3 ws model verify "$P-small"
	check_grep "missing chunk is named" "chunk '.*' is missing" "$OUT"
else
	tap_skip "verify, materialize and pull of damaged chunks" \
		"damaging a chunk needs the file store"
fi

# ---- delete ------------------------------------------------------------
check_exit "delete" 0 ws model delete "$P-small"
check_exit "delete again: not found, exit 1" 1 ws model delete "$P-small"
check_grep "delete again says not found" "checkpoint '$P-small' not found" "$OUT"
check_one_line "not found is one line" "$OUT"
check_exit "delete --missing-ok of a missing id exits 0" 0 ws model delete --missing-ok "$P-small"
check_grep "and says there was nothing to delete" "nothing to delete" "$OUT"
if can_list; then
	check "no key of the deleted checkpoint is left" test -z "$(keys_under "weight/models/$P-small/")"
else
	tap_skip "no key of the deleted checkpoint is left" "$KIND cannot list keys"
fi
check_exit "inspect of a deleted id" 1 ws model inspect "$P-small"
check_grep "deleted id is not found" "not found" "$OUT"
ws model list > "$T/list"
if grep -q "$P-small" "$T/list"; then tap_not_ok "deleted id left the index"; else tap_ok "deleted id left the index"; fi

# ---- bad input: one line, non-zero, nothing written ----------------------
for bad in 'a//b' '/a' '.hidden' 'a b' 'a?b' '..' "$(printf 'a%.0s' $(seq 256))"; do
	check_exit "invalid id '$(printf %.20s "$bad")' refused" 1 ws model import \
		--checkpoint-id "$bad" --model-id M --source "$SRC"
	check_one_line "invalid id error is one line" "$OUT"
done
check_grep "invalid id error names the id" "invalid checkpoint id" "$OUT"
for sz in 0 -1 abc 12XB 99999999999P; do
	check_exit "invalid chunk size '$sz' is a usage error" 2 ws model import \
		--checkpoint-id "$P-x" --model-id M --source "$SRC" --chunk-size "$sz"
done
check_exit "missing source" 1 ws model import --checkpoint-id "$P-x" --model-id M --source "$T/nowhere"
check_grep "missing source is named" "cannot open source '.*nowhere'" "$OUT"
check_exit "source that is a file" 1 ws model import --checkpoint-id "$P-x" --model-id M --source "$SRC/config.json"
mkdir -p "$T/emptydir"
check_exit "empty source dir" 1 ws model import --checkpoint-id "$P-x" --model-id M --source "$T/emptydir"
check_grep "empty source is named" "holds no files" "$OUT"
check_exit "unknown option is a usage error" 2 ws model import --bogus
check_exit "unknown command is a usage error" 2 ws frobnicate
check_exit "missing required options" 2 ws model import --checkpoint-id x
cp -r "$SRC" "$T/src-badidx"
rm "$T/src-badidx/model-00002-of-00002.safetensors"
check_exit "index.json naming a missing shard is refused" 1 ws model import \
	--checkpoint-id "$P-badidx" --model-id M --source "$T/src-badidx"
check_grep "missing shard is named" "names shard 'model-00002-of-00002.safetensors'" "$OUT"
check_exit "nothing was written for the refused import" 1 ws model inspect "$P-badidx"
if can_list; then
	check "no key written for a refused import" test -z "$(keys_under "weight/models/$P-x/")$(keys_under "weight/models/$P-badidx/")"
else
	tap_skip "no key written for a refused import" "$KIND cannot list keys"
fi

# ---- help on every command ------------------------------------------------
for c in "model import" "model list" "model inspect" "model verify" \
	"model delete" "model materialize-file" "model pull" "config init"; do
	check_exit "help: $c --help" 0 ws $c --help
	check_grep "help: $c shows usage" "usage: wstore" "$OUT"
done

# ---- concurrent imports: nothing lost from the index ----------------------
i=0
while [ $i -lt 8 ]; do
	ws model import --checkpoint-id "$P-c$i" --model-id "Org/Conc" --source "$SRC" \
		--chunk-size 512K > "$T/c$i.log" 2>&1 &
	pids="$pids $!"
	i=$((i + 1))
done
wait_all 300
ws --json model list --model Org/Conc > "$T/conc.json"
n=$(python3 -c "import json;print(len([r for r in json.load(open('$T/conc.json')) if r['status']=='READY']))")
check "8 concurrent imports are all READY and indexed ($n)" test "$n" = 8
ws --json model list > "$T/all.json"
n=$(python3 -c "import json;print(len([r for r in json.load(open('$T/all.json')) if r['checkpoint_id'].startswith('$P-c')]))")
check "8 concurrent imports are all in the global index ($n)" test "$n" = 8
i=0
while [ $i -lt 8 ]; do ws model delete "$P-c$i" >/dev/null 2>&1 & pids="$pids $!"; i=$((i + 1)); done
wait_all 300
ws --json model list > "$T/all.json"
n=$(python3 -c "import json;print(len([r for r in json.load(open('$T/all.json')) if r['checkpoint_id'].startswith('$P-c')]))")
check "8 concurrent deletes empty the index ($n left)" test "$n" = 0

ws model delete "$P-a" >/dev/null 2>&1
tap_done
