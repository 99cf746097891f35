#!/bin/sh
# names.sh - what a new user gets wrong, caught: import sources that are
# not checkpoints (or hold .git, tool caches, a Hugging Face cache), model
# names in place of checkpoint ids, and output people read (tables,
# timestamps, the order of stdout and stderr, errors that name the flag,
# "did you mean").  File store.
TAP_SUITE=names
. "$(dirname "$0")/../lib/suite.sh"
MNT="$T/mnt"
suite_cleanup() {
	suite_unmount "$MNT"
}
S="$T/store"
ws() { "$W" --store "$S" "$@"; }
# manifest_paths ID: the file paths of a checkpoint, one a line
manifest_paths() {
	ws --json model inspect "$1" | python3 -c '
import json, sys
for f in json.load(sys.stdin)["files"]: print(f["path"])'
}
# jfield KEY: KEY of the JSON object on stdin
jfield() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

CK="$T/ck"
python3 "$HERE/tools/mkckpt.py" "$CK" --size 40000 --shards 2 >/dev/null

# ---- import refuses what is not a checkpoint ------------------------------
mkdir -p "$T/junk"
printf '# my notes\n' > "$T/junk/README.md"
cp /etc/passwd "$T/junk/passwd"
check_exit "a folder of a README and a system file is refused" 1 \
	ws model import --model-id Org/Junk --checkpoint-id junk --source "$T/junk"
check_grep "... naming what is missing" \
	"^wstore: source '.*junk' does not look like a checkpoint: no config.json and no weight file .*--force" "$OUT"
check_one_line "... in one line" "$OUT"
check "... and nothing of it is stored" test ! -e "$S/weight/models/junk"
mkdir -p "$T/noconf" && cp "$CK"/*.safetensors "$T/noconf/"
check_exit "weights without a config are refused" 1 \
	ws model import --model-id Org/Junk --checkpoint-id junk --source "$T/noconf"
check_grep "... saying 'no config.json'" "checkpoint: no config.json;" "$OUT"
check_exit "--force imports it anyway" 0 ws model import --model-id Org/Junk \
	--checkpoint-id junk --source "$T/junk" --force

# ---- VCS and tool folders are skipped, and named -------------------------
G="$T/clone"
cp -R "$CK" "$G"
mkdir -p "$G/.git/lfs/objects/ab/cd" "$G/.cache/huggingface/download" \
	"$G/__pycache__" "$G/sub/.hg"
cp "$CK/model-00001-of-00002.safetensors" "$G/.git/lfs/objects/ab/cd/abcd"
printf '[core]\n' > "$G/.git/config"
printf 'etag\n' > "$G/.cache/huggingface/download/config.json.metadata"
printf 'x' > "$G/__pycache__/m.cpython-311.pyc"
printf 'x' > "$G/sub/.hg/store"
printf 'keep me\n' > "$G/sub/notes.txt"
check_exit "a git clone with .git/ and a tool cache imports" 0 \
	ws model import --model-id Org/Clone --checkpoint-id clone --source "$G"
for d in .git .cache/huggingface __pycache__ sub/.hg; do
	check_grep "... saying it skipped '$d/'" "^wstore: skipped '$d/' \(version control or tool folder\)$" "$OUT"
done
P=$(manifest_paths clone)
check "... storing none of their files" sh -c "! printf '%s\n' '$P' | grep -E '^(\.git|\.cache|__pycache__)/|/\.hg/'"
check_grep "... but the rest (sub/notes.txt)" "^sub/notes.txt$" "$P"
check_grep "... and .gitattributes-like files at the top stay" "^config.json$" "$P"

# ---- --include / --exclude ------------------------------------------------
check_exit "--exclude leaves files out" 0 ws model import --model-id Org/Clone \
	--checkpoint-id inc1 --source "$G" --exclude 'sub/*' --exclude '*.md'
check "... sub/notes.txt is not stored" sh -c "! ws --json model inspect inc1 | grep -q notes.txt"
check_exit "--include takes only matching files" 0 ws model import --model-id Org/Clone \
	--checkpoint-id inc2 --source "$G" --include '*.json' --include '*.safetensors'
check_grep "... only those ($(manifest_paths inc2 | grep -cvE '\.(json|safetensors)$') others)" \
	"^0$" "$(manifest_paths inc2 | grep -cvE '\.(json|safetensors)$')"
check_exit "--exclude of every weight file is refused as not a checkpoint" 1 \
	ws model import --model-id Org/Clone --checkpoint-id inc3 --source "$G" --exclude '*.safetensors'
check_grep "... naming the weight file as missing" "no weight file" "$OUT"
check_exit "an empty pattern is a clear error" 1 ws model import --model-id Org/Clone \
	--checkpoint-id inc4 --source "$G" --include ''
check_grep "... saying so" "include pattern must not be empty" "$OUT"

# ---- Hugging Face cache: repo root and snapshot folder --------------------
HUB="$T/hub/models--Acme--Tiny-LM"
C1=0123456789abcdef0123456789abcdef01234567
mkdir -p "$HUB/blobs" "$HUB/refs" "$HUB/snapshots/$C1"
for f in "$CK"/*; do
	b=$(sha256sum "$f" | cut -c1-40)
	cp "$f" "$HUB/blobs/$b"
	ln -s "../../blobs/$b" "$HUB/snapshots/$C1/$(basename "$f")"
done
printf '%s' "$C1" > "$HUB/refs/main"
check_exit "a hub cache repo root imports with no --model-id or --checkpoint-id" 0 \
	ws --json model import --source "$HUB"
J=$OUT
check_grep "... model id from models--ORG--NAME" '"model_id": "Acme/Tiny-LM"' "$J"
check_grep "... revision: the ref naming the snapshot" '"revision": "main"' "$J"
check_grep "... the commit is reported" "\"hub_commit\": \"$C1\"" "$J"
check_grep "... the checkpoint id derived" '"checkpoint_id": "Acme--Tiny-LM--main"' "$J"
check_grep "... the snapshot's files only, not blobs/ or refs/" "\"files\": $(ls "$CK" | wc -l)," "$J"
check_exit "the imported bytes are those of the blobs (symlinks followed)" 0 \
	ws model materialize-file Acme--Tiny-LM--main --path config.json --output "$T/cfg.out"
check "... equal" cmp "$T/cfg.out" "$CK/config.json"
check_exit "a snapshot folder imports too" 0 ws model import --source "$HUB/snapshots/$C1"
check_grep "... with the model id, a new id (never the taken one) and the commit" \
	"^imported 'Acme--Tiny-LM--main-2' \(Acme/Tiny-LM @ main, hub commit $C1\): " "$OUT"
if [ -x "$(dirname "$W")/wstore-mount" ] && [ -c /dev/fuse ]; then
	mkdir -p "$MNT"
	check_exit "mount --checkpoint takes a model name" 0 ws mount "$MNT" \
		--checkpoint Acme/Tiny-LM@main
	check "... and mounts the checkpoint it resolves to" cmp "$MNT/config.json" "$CK/config.json"
	ws umount "$MNT" >/dev/null 2>&1
else
	echo "# SKIP mount --checkpoint ORG/NAME: wstore-mount not built or no /dev/fuse"
fi
# the cache itself (~/.cache/huggingface/hub, or ~/.cache/huggingface)
nstored() { ls "$S/weight/models" 2>/dev/null | wc -l; }
before=$(nstored)
check_exit "the hub cache root is refused" 1 ws model import --source "$T/hub"
check_grep "... naming a repo folder to pass" \
	"^wstore: source '.*/hub' is a hugging face hub cache \(1 repo\), not a checkpoint; pass one model's folder, e.g. '.*/hub/models--Acme--Tiny-LM'" "$OUT"
check_one_line "... in one line" "$OUT"
check_exit "... also with --model-id and --force" 1 ws model import --source "$T/hub" \
	--model-id Org/Cache --force
mkdir -p "$T/hfhome" && ln -s ../hub "$T/hfhome/hub"
check_exit "~/.cache/huggingface (holding hub/) is refused" 1 \
	ws model import --source "$T/hfhome" --model-id Org/Cache
check_grep "... naming the repo folder under hub/" "e.g. '.*/hfhome/hub/models--Acme--Tiny-LM'" "$OUT"
check "... nothing stored by either" test "$(nstored)" = "$before"

# a git clone made without git-lfs: pointer files where the weights were
L="$T/nolfs"
mkdir -p "$L"
cp "$CK"/*.json "$L/"
for f in "$CK"/*.safetensors; do
	printf 'version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %s\n' \
		"$(sha256sum "$f" | cut -d' ' -f1)" "$(wc -c < "$f")" > "$L/$(basename "$f")"
done
check_exit "weight files that are git lfs pointers are refused" 1 \
	ws model import --model-id Org/Lfs --source "$L"
check_grep "... naming the file and 'git lfs pull'" \
	"^wstore: source '.*nolfs' holds git lfs pointer files in place of weights \('model-00001-of-00002.safetensors' and more\): .*git lfs pull" "$OUT"
check_exit "... also with --force" 1 ws model import --model-id Org/Lfs --source "$L" --force
check "... nothing stored" test "$(nstored)" = "$before"

# a source named one level (or two) too high
mkdir -p "$T/high/a/b"
cp -R "$CK" "$T/high/a/b/model"
printf 'notes\n' > "$T/high/a/README.md"
check_exit "a source whose checkpoint is all in one subfolder is refused" 1 \
	ws model import --model-id Org/High --source "$T/high"
check_grep "... with a hint naming that folder" \
	"^wstore: source '.*/high' holds its checkpoint in the folder 'a/b/model': pass '.*/high/a/b/model'" "$OUT"
check "... nothing stored" test "$(nstored)" = "$before"
check_exit "... --force imports it as it is" 0 ws model import --model-id Org/High \
	--checkpoint-id high --source "$T/high" --force
check_grep "... with the folder in its paths" "^a/b/model/config.json$" "$(manifest_paths high)"
ws -q model delete high

# a derived checkpoint id is never taken twice, also by imports racing
# (each store call slowed, so that all derive before any takes its lock)
pids=""
for i in 1 2 3; do
	WSTORE_FAULTS=delay=60 "$W" --store "fault+$S" --json model import \
		--model-id Org/Race --source "$CK" > "$T/race$i" 2>&1 &
	pids="$pids $!"
done
wait_all 120
check "three imports deriving an id at once all succeed" test $? = 0
ids=$(cat "$T"/race? | sed -n 's/.*"checkpoint_id": "\(.*\)".*/\1/p' | sort -u | tr '\n' ' ')
check_grep "... each under its own id" "^Org--Race--main Org--Race--main-2 Org--Race--main-3 $" "$ids"
check_exit "a plain folder without --model-id is a usage error" 2 ws model import --source "$CK"
check_grep "... naming the flag" "needs --model-id" "$OUT"

# ---- names: ORG/NAME[@REVISION] wherever an id is taken -------------------
ws -q model import --model-id Org/Name --revision v1 --source "$CK" --checkpoint-id n-old
ws -q model import --model-id Org/Name --revision v1 --source "$CK" --checkpoint-id n-new
ws -q model import --model-id Org/Name --source "$CK" --checkpoint-id n-main
# n-new is published after n-old; make the order certain across seconds
touch_later() { python3 - "$S/weight/models/$1/manifest" <<'PY'
import json, sys
p = sys.argv[1]; m = json.load(open(p)); m["updated_at"] += 10
open(p, "w").write(json.dumps(m, separators=(",", ":"), sort_keys=True))
PY
}
touch_later n-new
check_exit "model resolve ORG/NAME@REV" 0 ws model resolve Org/Name@v1
check_grep "... names the newest READY checkpoint" "^Org/Name@v1 -> n-new$" "$OUT"
check_grep "... states the rule" "^rule: the newest READY checkpoint of model 'Org/Name'" "$OUT"
check_grep "... marks why the others lost" "n-old +v1 +READY .* older$" "$OUT"
check_exit "model resolve ORG/NAME means @main" 0 ws --json model resolve Org/Name
check_grep "... n-main" '"checkpoint_id": "n-main"' "$OUT"
check_exit "an unknown revision is an error" 1 ws model resolve Org/Name@nope
check_grep "... saying so" "no READY checkpoint at revision 'nope'" "$OUT"
check_exit "resolve of a checkpoint id is a usage error" 2 ws model resolve n-new
check_exit "inspect takes a model name" 0 ws model inspect Org/Name@v1
check_grep "... and shows the resolved checkpoint" "^checkpoint: +n-new$" "$OUT"
check_exit "verify takes a model name" 0 ws model verify Org/Name@v1
check_grep "... verifying the resolved one" "verified 'n-new'" "$OUT"
check_exit "pull takes a model name" 0 ws model pull Org/Name --dest "$T/pulled"
check "... the files arrive" cmp "$T/pulled/config.json" "$CK/config.json"
check_exit "list --model ORG/NAME@REV" 0 ws model list --model Org/Name@v1
check_grep "... lists that revision's checkpoints" "^n-new +Org/Name +v1 " "$OUT"
check "... and not those of main" sh -c "! printf '%s\n' '$OUT' | grep -q '^n-main '"
check_exit "list --model with an empty revision is a usage error" 2 ws model list --model Org/Name@
check_exit "admin unlock of a model name is a usage error" 2 ws admin unlock Org/Name
check_grep "... saying it takes a checkpoint id, and how to find it" \
	"takes a checkpoint id, not a model name \('Org/Name'\).*model list --all --model Org/Name" "$OUT"
check_exit "a malformed name is refused before the store is read" 1 ws model inspect a/b/c
check_grep "... with the rule" "invalid checkpoint id or model name 'a/b/c'" "$OUT"
check_exit "pin takes several ids and names" 0 ws model pin n-old Org/Name@v1
check_grep "... pinning each" "pinned 'n-new'" "$OUT"
check_grep "... pinning each (2)" "pinned 'n-old'" "$OUT"
check_exit "unpin takes several" 0 ws --json model unpin n-old n-new
check_grep "... JSON: one entry each" '"checkpoint_id": "n-new"' "$OUT"
check_exit "delete takes several; one missing fails the command" 1 ws model delete n-old nothere n-main
check_grep "... the others are deleted all the same" "deleted 'n-main'" "$OUT"
check "... n-old is gone" sh -c "! ws model inspect n-old >/dev/null 2>&1"
check_exit "model rm is delete" 0 ws model rm Org/Name@v1
check_grep "... resolved first" "^deleted 'n-new' \(Org/Name@v1\)$" "$OUT"
check_exit "model ls is list" 0 ws model ls
check_grep "... listing" "^Acme--Tiny-LM--main " "$OUT"

# ---- list --all shows FAILED checkpoints ---------------------------------
WSTORE_FAULTS="failop=put:1" "$W" --store "fault+$S" model import --model-id Org/Bad \
	--checkpoint-id broken --source "$CK" >/dev/null 2>&1
check "a failed import is not listed by default" sh -c "! ws model list | grep -q '^broken '"
check_exit "model list --all" 0 ws model list --all
check_grep "... shows it FAILED" "^broken +Org/Bad +main +FAILED " "$OUT"
check_grep "--all --json gives its error" '"error": ".*injected fault' "$(ws --json model list --all --model Org/Bad)"

# ---- output people read ---------------------------------------------------
LONG="Organisation-With-A-Long-Name/model-name-that-runs-past-sixty-characters-v2-Instruct"
REV=0123456789abcdef0123456789abcdef76543210
ws -q model import --model-id "$LONG" --revision "$REV" --source "$CK" --checkpoint-id longone
ws -q model import --model-id "组织/模型-ü" --source "$CK" --checkpoint-id wide
LIST=$(ws model list)
check_grep "a 70-character model id is shown whole" "$LONG" "$LIST"
check_grep "a 40-character revision is shown whole" "$REV" "$LIST"
# the display column where STATUS starts is the same on every line
cols=$(printf '%s\n' "$LIST" | python3 -c '
import sys, unicodedata
def width(s):
    return sum(0 if unicodedata.combining(c) else
               2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)
seen = set()
for line in sys.stdin.read().splitlines():
    for word in ("STATUS", "READY", "FAILED"):
        i = line.find(" " + word + " ")
        if i >= 0:
            seen.add(width(line[:i])); break
print(len(seen))')
check_grep "columns line up in display width (CJK, long ids)" "^1$" "$cols"
check_grep "list: UTC ISO 8601 times" "READY +[0-9]+ +[0-9.]+ [KMG]?i?B +[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$" "$LIST"
INS=$(ws model inspect wide)
# SIZE is as wide as its widest cell: the header's SIZE ends where the
# longest size does, two spaces after the widest TYPE
fit=$(printf '%s\n' "$INS" | python3 -c '
import re, sys
rows = [l for l in sys.stdin.read().splitlines()
        if re.match(r"(TYPE|WEIGHT|METADATA|OTHER) ", l)]
head, body = rows[0], rows[1:]
end = head.index("SIZE") + 4
sizes = [re.match(r"\S+ +(\d+)", l) for l in body]
print(all(m.end(1) == end for m in sizes) and
      end == max(len(m.group(1)) for m in sizes) + len("METADATA") + 2)')
check_grep "inspect: the file table's columns sized to content" "^True$" "$fit"
check_grep "inspect: the same format" "^updated: +[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$" "$(ws model inspect wide)"
DF=$(ws --json df)
check_grep "df --json: times in Unix seconds (*_at)" '"last_read_at": [0-9]' "$DF"
check "... no millisecond fields" sh -c "! printf '%s' '$DF' | grep -q '_ms\"'"

# stdout before stderr: per-file lines, then the summary
CH=$(find "$S/weight/models/wide" \( -path '*/chunks/*' -o -name 'data-*' \) -type f | head -1)
printf 'XXXX' | dd of="$CH" bs=1 seek=0 conv=notrunc status=none
ws model verify wide > "$T/verify.out" 2>&1
check_grep "verify 2>&1: the summary is the last line" "files damaged" "$(tail -1 "$T/verify.out")"
check_grep "... after the per-file lines" "^(ok|BAD) " "$(head -1 "$T/verify.out")"

# errors name the missing flag
check_exit "import without --source" 2 ws model import --model-id M
check_grep "... names --source" "^wstore: model import needs --source DIR$" "$OUT"
check_exit "pull without --dest" 2 ws model pull wide
check_grep "... names --dest" "^wstore: 'model pull' needs --dest DIR$" "$OUT"
check_exit "materialize-file without --output" 2 ws model materialize-file wide --path config.json
check_grep "... names --output" "needs --output FILE$" "$OUT"

# did you mean, group help
check_exit "a mistyped subcommand" 2 ws model lsit
check_grep "... did you mean" "did you mean 'model list'\?" "$OUT"
check_exit "a mistyped command" 2 ws moddel list
check_grep "... did you mean" "did you mean 'model'\?" "$OUT"
check_exit "nothing close: no guess" 2 ws model frobnicate
check_grep "... points at help" "see 'wstore model --help'" "$OUT"
check_exit "a mistyped option" 2 ws model import --sorce "$CK"
check_grep "... did you mean" "^wstore: unknown option '--sorce' for 'model import'; did you mean '--source'\?$" "$OUT"
check_exit "a mistyped option with its value" 2 ws model list --modle=Org/Name
check_grep "... did you mean (the value left out)" "did you mean '--model'\?$" "$OUT"
check_exit "a mistyped global option after the command" 2 ws model list --jsno
check_grep "... did you mean" "for 'model list'; did you mean '--json'\?$" "$OUT"
check_exit "a mistyped global option before the command" 2 ws --stroe "$S" model list
check_grep "... is named as an option, not a command" "^wstore: unknown option '--stroe'; did you mean '--store'\?$" "$OUT"
check_exit "a mistyped option of model delete" 2 ws model delete --misisng-ok x
check_grep "... did you mean" "did you mean '--missing-ok'\?$" "$OUT"
for d in mount:--chekpoint:--checkpoint serve:--lisen:--listen; do
	cmd=${d%%:*}; rest=${d#*:}; bad=${rest%%:*}; good=${rest#*:}
	arg=; [ $cmd = mount ] && arg=$T/nomnt
	if [ -x "$(dirname "$W")/wstore-$cmd" ]; then
		check_exit "a mistyped option of $cmd (its daemon parses it)" 2 \
			ws $cmd $arg $bad x
		check_grep "... did you mean" "for '$cmd'; did you mean '$good'\?$" "$OUT"
	else
		tap_skip "a mistyped option of $cmd" "wstore-$cmd not built"
	fi
done
check_exit "an option close to none" 2 ws model pull wide --frobnicate
check_grep "... no guess" "^wstore: unknown option '--frobnicate' for 'model pull'$" "$OUT"
check_exit "wstore model --help" 0 ws model --help
check_grep "... shows the model group's commands" "^  resolve +which checkpoint" "$OUT"
check_grep "... with its usage line" "^usage: wstore model <command>" "$OUT"
check_exit "wstore help model (git's habit)" 0 ws help model
check_grep "... the same group help" "^usage: wstore model <command>" "$OUT"
check_exit "wstore help model import" 0 ws help model import
check_grep "... the command's help" "^usage: wstore model import --source DIR" "$OUT"
check_exit "wstore help with a mistyped command" 2 ws help modle
check_grep "... did you mean" "did you mean 'model'\?" "$OUT"

tap_done
