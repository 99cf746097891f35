#!/bin/sh
# edges.sh - trust at the edges, on the file store (suite "edges"):
#  - gc --grace 0 never touches the writes of a running import (temp
#    files of a live writer, anything of a checkpoint a live owner locks);
#  - delete works on a full store (a small tmpfs filled to the last byte);
#  - verify counts a damaged file once; delete of a missing id says so;
#  - readers never create a store, and serve a read-only store to an
#    unprivileged user;
#  - list and inspect escape control characters (on a terminal and piped);
#    a path with one is never imported;
#  - a Hugging Face hub repo root as --source;
#  - the first progress line shows no ETA before the rate is known.
#  - an import with chunks larger than its files streams them (bounded
#    memory), and verifies.
TAP_SUITE=edges
. "$(dirname "$0")/../lib/suite.sh"
MNT=
suite_cleanup() {
	[ -n "${FMNT:-}" ] && { "$W" umount "$FMNT" || umount -l "$FMNT"; } 2>/dev/null
	[ -n "$MNT" ] && umount "$MNT" 2>/dev/null
	[ -n "${SLEEPER:-}" ] && kill "$SLEEPER" 2>/dev/null
}
S="$T/store"
ws() { "$W" --store "$S" "$@"; }

SRC="$T/src"
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 20000000 --shards 2 >/dev/null

# ---- gc --grace 0 while imports run ---------------------------------------
k=1
allok=1
while [ $k -le 3 ]; do
	rm -f "$T/gc-stop"
	(
		i=0
		while [ ! -f "$T/gc-stop" ] && [ $i -lt 2000 ]; do
			ws admin gc --grace 0 >/dev/null 2>&1
			i=$((i + 1))
		done
	) &
	gcp=$!
	if ! ws model import --checkpoint-id gc$k --model-id M --source "$SRC" \
		--chunk-size 2M --jobs 1 >"$T/gc.out" 2>&1; then
		allok=0
		tap_not_ok "import $k with gc --grace 0 looping beside it" "$(cat "$T/gc.out")"
	fi
	touch "$T/gc-stop"
	wait_exit 120 $gcp
	k=$((k + 1))
done
[ $allok = 1 ] && tap_ok "3 imports succeed with gc --grace 0 looping beside them"
check_exit "and they verify" 0 ws model verify gc3

# deterministic: a temp file of a dead writer under a checkpoint locked by
# a live owner is kept; once the lock is gone it is removed
sleep 600 &
SLEEPER=$!
SP=$SLEEPER
d="$S/weight/models/gc1/files/x"
mkdir -p "$d" "$S/weight/locks/models"
printf '{"host":"%s","pid":%d,"time":1,"token":"t"}' "$(hostname)" "$SLEEPER" \
	>"$S/weight/locks/models/gc1"
# pid 2147483646 cannot exist (above pid_max)
printf x >"$d/.tmp-00000000-2147483646-0123456789abcdef"
ws admin gc --grace 0 >/dev/null 2>&1
check "gc --grace 0 keeps a temp file of a checkpoint a live owner locks" \
	test -f "$d/.tmp-00000000-2147483646-0123456789abcdef"
rm -f "$S/weight/locks/models/gc1"
mkdir -p "$S/weight/models/gc2"
printf x >"$S/weight/models/gc2/.tmp-manifest-$SP-0123456789abcdef"
ws admin gc --grace 0 >/dev/null 2>&1
check "gc --grace 0 keeps a temp file whose writer is alive" \
	test -f "$S/weight/models/gc2/.tmp-manifest-$SP-0123456789abcdef"
check "gc --grace 0 removes one of a dead writer once the lock is gone" \
	test ! -e "$d/.tmp-00000000-2147483646-0123456789abcdef"
kill $SLEEPER 2>/dev/null
wait_exit 10 $SLEEPER 2>/dev/null
SLEEPER=
ws admin gc --grace 0 >/dev/null 2>&1
check "and the live writer's once it is gone" \
	test ! -e "$S/weight/models/gc2/.tmp-manifest-$SP-0123456789abcdef"
for k in 1 2 3; do ws model delete gc$k >/dev/null 2>&1; done

# ---- verify counts a damaged file once ------------------------------------
SM="$T/small"
python3 "$HERE/tools/mkckpt.py" "$SM" --size 60000 --shards 2 >/dev/null
ws model import --checkpoint-id v --model-id M --source "$SM" --chunk-size 16K >/dev/null
chunk_of() { # ID PATH N: the N-th chunk key of PATH
	python3 -c "
import json, sys
m = json.load(open('$S/weight/models/$1/manifest'))
print([r for r in m['files'] if r['path'] == '$2'][0]['chunks'][$3])"
}
# the header chunk of shard 2 (byte check and header check both fail) and
# the last chunk of shard 1 (byte check only)
chunk_remove "$S" "$(chunk_of v model-00002-of-00002.safetensors 0)"
chunk_remove "$S" "$(chunk_of v model-00001-of-00002.safetensors 1)"
check_exit "verify with two damaged shards exits 3" 3 ws model verify v
n=$(printf '%s\n' "$OUT" | grep -c '^BAD  model-00002-of-00002.safetensors')
check "the shard without its header chunk is listed once ($n)" test "$n" = 1
check_grep "the summary counts 2 damaged files" "2 of 7 files damaged" "$OUT"
check_grep "verify reports the missing chunk as missing" "model-00002-of-00002.safetensors.*chunk '.*/00000000' is missing" "$OUT"
ws --json model verify v >"$T/v.json" 2>/dev/null
check "--json: bad_files 2, each path once, 2 entries not ok" python3 -c "
import json, sys
j = json.load(open('$T/v.json'))
paths = [f['path'] for f in j['files']]
assert j['bad_files'] == 2, j['bad_files']
assert len(paths) == len(set(paths)) == 7, paths
assert sum(1 for f in j['files'] if not f['ok']) == 2
"
ws model delete v >/dev/null

# ---- delete of a missing id ------------------------------------------------
check_exit "delete of an id that never existed exits 1" 1 ws model delete nosuch
check_grep "and says not found" "^wstore: checkpoint 'nosuch' not found$" "$OUT"
check_exit "delete --missing-ok of it exits 0" 0 ws model delete --missing-ok nosuch
check_exit "--json delete --missing-ok says deleted false" 0 ws --json model delete --missing-ok nosuch
check_grep "deleted false" '"deleted": false' "$OUT"

# ---- readers never create a store; a read-only store serves every reader ---
NS="$T/no-such-store"
for cmd in "model list" "model inspect v" "model verify v" \
	"model materialize-file v --path config.json --output $T/x.json" \
	"model pull v --dest $T/xdest" "admin gc --dry-run" "model delete v"; do
	# shellcheck disable=SC2086
	check_exit "$cmd on a missing store directory fails" 1 "$W" --store "$NS" $cmd
	check_grep "$cmd names the missing store" "file store '$NS' does not exist" "$OUT"
done
check "and no reader created it" test ! -e "$NS"
check_exit "import creates a missing store" 0 "$W" --store "$NS/deeper" model import \
	--checkpoint-id ro --model-id M/ro --source "$SM" --chunk-size 16K
# every directory and file read-only, read by an unprivileged user: a copy
# of the store (and of wstore) where that user can reach it, since $T and
# the build may sit in folders only root may enter
RO="$NS/deeper"
NOB_CASES="list inspect verify materialize-file pull gc-dry-run import-refused"
if suite_share; then
	RO="$SHARE/ro-store"
	cp -R "$NS/deeper" "$RO"
	cp -R "$SM" "$SHARE/src"
	chmod -R a+rX "$RO"
	chmod -R a-w "$RO"
	nob() { $AS_USER env HOME=/nonexistent "$WU" --store "$RO" "$@"; }
	OUTD="$SHARE/nobody-out"
	mkdir -p "$OUTD" && chown 65534:65534 "$OUTD"
	check_exit "read-only store, unprivileged user: list" 0 nob model list
	check_grep "list shows the checkpoint" "^ro " "$OUT"
	check_exit "read-only store, unprivileged user: inspect" 0 nob model inspect ro
	check_exit "read-only store, unprivileged user: verify" 0 nob model verify ro
	check_exit "read-only store, unprivileged user: materialize-file" 0 nob model \
		materialize-file ro --path config.json --output "$OUTD/config.json"
	check_exit "read-only store, unprivileged user: pull" 0 nob model pull ro --dest "$OUTD/pull"
	check "the pull equals the source" diff -r "$SM" "$OUTD/pull"
	check_exit "read-only store, unprivileged user: gc --dry-run" 0 nob admin gc --dry-run
	check_exit "read-only store: import is refused" 1 nob model import --checkpoint-id ro2 \
		--model-id M --source "$SHARE/src"
	check_grep "saying the store is not writable" "file store '$RO' is not writable" "$OUT"
	chmod -R u+w "$RO"
else
	for c in $NOB_CASES; do
		tap_skip "read-only store, unprivileged user: $c" "$SHARE_WHY"
	done
fi
# a read-only mount, as on inference nodes (root is not spared by EROFS)
ROM="$T/ro-mount"
mkdir -p "$ROM"
if mount --bind "$RO" "$ROM" 2>/dev/null && mount -o remount,ro,bind "$ROM" 2>/dev/null; then
	MNT=$ROM
	check_exit "read-only mount: list" 0 "$W" --store "$ROM" model list
	check_exit "read-only mount: verify" 0 "$W" --store "$ROM" model verify ro
	check_exit "read-only mount: pull" 0 "$W" --store "$ROM" model pull ro --dest "$T/rompull"
	if [ -e /dev/fuse ]; then
		mkdir -p "$T/fuse"
		check_exit "read-only mount: wstore mount serves it" 0 timeout 30 "$W" --store "$ROM" mount "$T/fuse"
		FMNT="$T/fuse"
		check "read-only mount: a file reads back through FUSE" cmp "$T/fuse/ro/config.json" "$SM/config.json"
		"$W" umount "$T/fuse" >/dev/null 2>&1
		FMNT=
	else
		tap_skip "read-only mount: wstore mount serves it" "no /dev/fuse"
	fi
	umount "$ROM"
	MNT=
else
	tap_not_ok "bind-mount the store read-only (needs root)"
fi

# ---- control characters from the store are escaped on a terminal -----------
# tty CMD...: run CMD with stdout and stderr on a pseudo-terminal
tty() { script -qec "$*" /dev/null; }
CC="$T/ctl"
mkdir -p "$CC"
printf 'x' >"$CC/$(printf 'a\033[2Jb.txt')"
printf '{}' >"$CC/config.json"
ESCM=$(printf 'Org/M\033]0;pwned\007')
# a path with a control character is never imported (docs/format.md)
check_exit "import a path with a control character: refused" 1 ws model import \
	--checkpoint-id ctl --model-id org/c --source "$CC" --force
check_grep "... naming it with the character as '?'" "a\\?\\[2Jb\\.txt': a control character" "$OUT"
check_one_line "... in one line" "$OUT"
rm -f "$CC/$(printf 'a\033[2Jb.txt')"
check_exit "import a model id and a revision with control characters" 0 ws model import \
	--checkpoint-id ctl --model-id "$ESCM" --source "$CC" --revision "$(printf 'r\033[31m')" --force
# any ESC but wstore's own "erase the progress line" (ESC [ K)
has_esc() { printf '%s' "$1" | sed 's/\x1b\[K//g' | od -An -c | grep -q '033'; }
for cmd in "model list" "model inspect ctl" "model verify ctl" "--json model list" "--json model inspect ctl"; do
	OUT=$(tty "'$W' --store '$S' $cmd" 2>&1)
	if has_esc "$OUT"; then tap_not_ok "$cmd on a terminal prints no raw ESC" "$(printf '%s' "$OUT" | od -c | head -5)"
	else tap_ok "$cmd on a terminal prints no raw ESC"; fi
done
OUT=$(tty "'$W' --store '$S' model inspect ctl")
check_grep "inspect shows the escapes" 'Org/M\\x1b\]0;pwned\\x07' "$OUT"
check_grep "and the escaped revision" 'r\\x1b\[31m' "$OUT"
# piped too: a name cannot fake lines or codes for a script reading them
for cmd in "model list" "model inspect ctl"; do
	OUT=$(ws $cmd 2>&1)
	if has_esc "$OUT"; then tap_not_ok "$cmd piped prints no raw ESC" "$(printf '%s' "$OUT" | od -c | head -5)"
	else tap_ok "$cmd piped prints no raw ESC"; fi
done
ws model delete ctl >/dev/null

# ---- a Hugging Face hub repo root as --source -------------------------------
HUB="$T/hub/models--org--tiny"
C1=0123456789abcdef0123456789abcdef01234567
C2=89abcdef0123456789abcdef0123456789abcdef
mkdir -p "$HUB/blobs" "$HUB/refs" "$HUB/snapshots/$C1" "$HUB/snapshots/$C2"
for f in config.json model.safetensors.index.json model-00001-of-00002.safetensors model-00002-of-00002.safetensors; do
	h=$(sha256sum "$SM/$f" | cut -c1-64)
	cp "$SM/$f" "$HUB/blobs/$h"
	ln -s "../../blobs/$h" "$HUB/snapshots/$C1/$f"
done
printf '{"old": true}' >"$HUB/blobs/old"
ln -s ../../blobs/old "$HUB/snapshots/$C2/config.json"
printf '%s' "$C1" >"$HUB/refs/main"
check_exit "hub repo root: import" 0 ws model import --checkpoint-id hub \
	--model-id org/tiny --source "$HUB"
ws --json model inspect hub >"$T/hub.json"
check "hub repo root: imports the snapshot refs/main names, nothing else" python3 -c "
import json
m = json.load(open('$T/hub.json'))
paths = sorted(f['path'] for f in m['files'])
assert paths == sorted(['config.json', 'model.safetensors.index.json', 'model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']), paths
assert m['source_uri'].endswith('/snapshots/$C1'), m['source_uri']
"
check_exit "hub repo root: --revision <commit> picks that snapshot" 0 ws model import \
	--checkpoint-id hub2 --model-id org/tiny --revision $C2 --source "$HUB" --force
check_grep "with its one file" '"files": 1' "$(ws --json model list)"
check_exit "hub repo root: an unknown revision is refused" 1 ws model import \
	--checkpoint-id hub3 --model-id org/tiny --revision nosuch --source "$HUB"
check_grep "saying which directory to pass" "hugging face hub cache repo.*revision 'nosuch'.*pass one snapshot directory, e.g. '$HUB/snapshots/" "$OUT"
check_one_line "one line" "$OUT"
ws model delete hub >/dev/null; ws model delete hub2 >/dev/null

# ---- no ETA before the rate is known -----------------------------------------
# 20 chunk puts slowed to 100 ms each: about 2 s of progress lines
OUT=$(tty "WSTORE_FAULTS=delay=100 '$W' --store 'fault+$S' model import --checkpoint-id eta --model-id M --source '$SRC' --chunk-size 1M --jobs 1" | tr '\r' '\n')
first=$(printf '%s\n' "$OUT" | grep '^importing' | head -1)
check_grep "import printed progress lines" "^importing" "$first"
if printf %s "$first" | grep -q ETA; then tap_not_ok "first import progress line has no ETA" "$first"
else tap_ok "first import progress line has no ETA"; fi
check_grep "a later one has an ETA" "ETA [0-9]+ s" "$OUT"
OUT=$(tty "WSTORE_FAULTS=delay=100 '$W' --store 'fault+$S' model pull eta --dest '$T/etapull' --jobs 1" | tr '\r' '\n')
first=$(printf '%s\n' "$OUT" | grep '^pulling' | head -1)
check_grep "pull printed progress lines" "^pulling" "$first"
if printf %s "$first" | grep -q ETA; then tap_not_ok "first pull progress line has no ETA" "$first"
else tap_ok "first pull progress line has no ETA"; fi
ws model delete eta >/dev/null

# ---- delete on a full store --------------------------------------------------
FULL="$T/full"
mkdir -p "$FULL"
if mount -t tmpfs -o size=2m tmpfs "$FULL" 2>/dev/null; then
	MNT=$FULL
	FS="$FULL/store"
	wfull() { "$W" --store "$FS" "$@"; }
	wfull model import --checkpoint-id keep --model-id M --source "$SM" --chunk-size 16K >/dev/null
	wfull model import --checkpoint-id big --model-id M --source "$SM" --chunk-size 4K >/dev/null
	# fill every last page, then check that even a lock record cannot be written
	dd if=/dev/zero of="$FULL/fill" bs=4k >/dev/null 2>&1
	i=0
	while printf x >"$FULL/fill-$i" 2>/dev/null && [ $i -lt 1000 ]; do i=$((i + 1)); done
	check_exit "full store: an import fails for lack of space" 1 wfull model import \
		--checkpoint-id more --model-id M --source "$SM"
	# (refused up front from statvfs, or by the write itself)
	check_grep "saying so" "No space left on device|would not fit in the store: 0 B free" "$OUT"
	check_exit "full store: delete succeeds" 0 wfull model delete big
	check_grep "and says deleted" "deleted 'big'" "$OUT"
	check "full store: no chunk of the deleted checkpoint is left" \
		test -z "$(find "$FS/weight/models/big" -type f 2>/dev/null)"
	check_exit "full store: it is gone from the list" 0 wfull --json model list
	check "full store: only 'keep' is listed" python3 -c "
import json, sys
ids = [r['checkpoint_id'] for r in json.loads(sys.argv[1])]
assert ids == ['keep'], ids" "$OUT"
	check_exit "full store: the other checkpoint still verifies" 0 wfull model verify keep
	check "full store: no lock left" test -z "$(ls "$FS/weight/locks/models" 2>/dev/null)"
	umount "$FULL"
	MNT=
else
	tap_not_ok "mount a small tmpfs (needs root)"
fi

# ---- very large chunks are streamed: memory stays bounded ----------------
BIGSRC="$T/bigsrc"
mkdir -p "$BIGSRC"
head -c 300000000 /dev/urandom > "$BIGSRC/w.bin"
check_exit "import of a 300 MB file with --chunk-size 1GiB, peak memory measured" 0 \
	python3 -c "
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)" \
	"$W" --quiet --store "$S" model import --checkpoint-id onechunk --model-id X/one \
	--source "$BIGSRC" --chunk-size 1GiB --jobs 4 --force
if [ "$OUT" -lt 131072 ] 2>/dev/null; then
	tap_ok "it streamed: peak RSS ${OUT} KiB, below 128 MiB (a chunk buffer would be 300 MB)"
else
	tap_not_ok "it streamed: peak RSS below 128 MiB" "peak RSS: $OUT KiB"
fi
check_exit "the one-chunk checkpoint verifies" 0 ws model verify onechunk
check "it is one file of one chunk" python3 -c "
import json, sys
f = json.loads(sys.argv[1])['files']
assert len(f) == 1 and len(f[0]['chunks']) == 1, f" "$(ws --json model inspect onechunk 2>&1)"
rm -rf "$BIGSRC"

# ---- the config's chunk_size is import's default --------------------------
check_exit "import with chunk_size 1MiB from the environment" 0 env WSTORE_CHUNK_SIZE=1MiB \
	"$W" --quiet --store "$S" model import --checkpoint-id cs1 --model-id X/cs --source "$SRC"
cs_of() { ws --json model inspect "$1" | python3 -c "
import json, sys
print(sorted({f['chunk_size'] for f in json.load(sys.stdin)['files']}))"; }
check_grep "its files have 1 MiB chunks" "^\[1048576\]$" "$(cs_of cs1)"
check_exit "--chunk-size wins over the config's" 0 env WSTORE_CHUNK_SIZE=1MiB \
	"$W" --quiet --store "$S" model import --checkpoint-id cs2 --model-id X/cs \
	--source "$SRC" --chunk-size 2MiB
check_grep "its files have 2 MiB chunks" "^\[2097152\]$" "$(cs_of cs2)"
check_exit "both verify" 0 ws model verify cs1
printf '{"chunk_size": "5GiB"}\n' > "$T/badcs.json"
check_exit "a config with chunk_size over 4GiB is refused" 1 \
	"$W" --config "$T/badcs.json" --store "$S" model import --checkpoint-id cs3 \
	--model-id X/cs --source "$SRC"
check_grep "the error names the key and the value" "chunk_size.*5GiB" "$OUT"
check_one_line "in one line" "$OUT"
check "nothing was imported" sh -c "! '$W' --store '$S' model inspect cs3 >/dev/null 2>&1"

tap_done
