#!/bin/sh
# faults.sh - failure handling of import, delete and materialize on the
# file store wrapped in the fault-injecting backend (URL "fault+DIR",
# faults from $WSTORE_FAULTS, see src/lib/backends/helpers.h):
# a failure at each put (and at each data-file begin and commit), SIGINT mid-import, a crash (as if SIGKILLed) at
# every call of a delete, a manifest that cannot be read (never taken for
# an absent one by list, gc or name resolution), SIGTERM mid-materialize,
# and a write-once store holding stale chunks.
TAP_SUITE=faults
. "$(dirname "$0")/../lib/suite.sh"
S="$T/store"
ws() { "$W" --store "$S" "$@"; }
wf() { _wf=$1; shift; WSTORE_FAULTS="$_wf" "$W" --store "fault+$S" "$@"; }
chunks() { (cd "$S" && find weight/models -path '*/chunks/*' -type f 2>/dev/null | wc -l); }
tmps() { find "$S" -name '.tmp-*' | wc -l; }
# wait_lock ID: until an import of ID holds its lock (at most 10 s)
wait_lock() { wait_for 10 test -f "$S/weight/locks/models/$1"; }

SRC="$T/src"
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 60000 --shards 2
CS=16K
nput=$(python3 -c "import os;print(sum((os.path.getsize(os.path.join('$SRC',f))+16383)//16384 for f in os.listdir('$SRC')))")

# ---- a failure at each put ------------------------------------------------
k=1
while [ "$k" -le "$nput" ]; do
	WSTORE_FAULTS="failop=put:$k" "$W" --store "fault+$S" model import \
		--checkpoint-id f --model-id M --source "$SRC" --chunk-size $CS --jobs 1 \
		> "$T/out" 2>&1
	rc=$?
	st=$(ws --json model inspect f 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])' 2>/dev/null)
	if [ $rc = 1 ] && [ "$st" = FAILED ] && [ "$(chunks)" = 0 ] && [ "$(tmps)" = 0 ] &&
		grep -q "injected fault" "$T/out" && [ "$(grep -c . "$T/out")" = 1 ]; then
		tap_ok "failure at put $k: exit 1, FAILED manifest, no chunk or temp left"
	else
		tap_not_ok "failure at put $k" "rc=$rc status=$st chunks=$(chunks) tmps=$(tmps)" "$(cat "$T/out")"
	fi
	k=$((k + 1))
done
check_exit "list works with a FAILED checkpoint" 0 ws model list
check_exit "verify of a FAILED checkpoint is refused" 1 ws model verify f
check_grep "refusal says FAILED" "is FAILED" "$OUT"
check_exit "re-import reclaims the FAILED id" 0 ws model import --checkpoint-id f \
	--model-id M --source "$SRC" --chunk-size $CS
check_exit "and it verifies" 0 ws model verify f
check_exit "delete" 0 ws model delete f

# ---- the data-file path: a failure at each begin and each commit ----------
# ("files" passes the file store's data-file writes through the wrapper)
datafiles() { (cd "$S" && find weight/models -name 'data-*' -type f 2>/dev/null | wc -l); }
nfile=$(python3 -c "import os;print(sum(1 for f in os.listdir('$SRC') if os.path.getsize(os.path.join('$SRC',f))))")
for op in begin_file commit_file; do
	k=1
	while [ "$k" -le "$nfile" ]; do
		WSTORE_FAULTS="files,failop=$op:$k" "$W" --store "fault+$S" model import \
			--checkpoint-id df --model-id M --source "$SRC" --chunk-size $CS --jobs 1 \
			> "$T/out" 2>&1
		rc=$?
		st=$(ws --json model inspect df 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])' 2>/dev/null)
		if [ $rc = 1 ] && [ "$st" = FAILED ] && [ "$(datafiles)" = 0 ] && [ "$(chunks)" = 0 ] &&
			[ "$(tmps)" = 0 ] && grep -q "injected fault" "$T/out" && [ "$(grep -c . "$T/out")" = 1 ]; then
			tap_ok "failure at $op $k: exit 1, FAILED manifest, no data, chunk or temp file left"
		else
			tap_not_ok "failure at $op $k" "rc=$rc status=$st data=$(datafiles) chunks=$(chunks) tmps=$(tmps)" "$(cat "$T/out")"
		fi
		k=$((k + 1))
	done
done
check_exit "data files: re-import through the wrapper reclaims the FAILED id" 0 \
	env WSTORE_FAULTS=files "$W" --store "fault+$S" model import --checkpoint-id df \
	--model-id M --source "$SRC" --chunk-size $CS
check "data files: one per non-empty file ($(datafiles) of $nfile), no chunk file" \
	test "$(datafiles)" = "$nfile" -a "$(chunks)" = 0
check_exit "data files: and it verifies" 0 ws model verify df
check_exit "data files: delete" 0 ws model delete df
check "data files: none left after delete" test "$(datafiles)" = 0

# ---- leftovers that could not be removed are recorded ---------------------
# puts 1-2 succeed, put 3 fails, then every remove fails: chunks stay, and
# the FAILED manifest must list them so that delete reclaims them
WSTORE_FAULTS="failop=put:3,failop=remove:1+" "$W" --store "fault+$S" model import \
	--checkpoint-id lf --model-id M --source "$SRC" --chunk-size $CS --jobs 1 >/dev/null 2>&1
ws --json model inspect lf | python3 -c 'import json,sys; print("\n".join(c for f in json.load(sys.stdin)["files"] for c in f["chunks"]))' | sort > "$T/listed"
(cd "$S" && find weight/models -path '*/chunks/*' -type f | sort) > "$T/present"
check "FAILED manifest lists every chunk left behind ($(wc -l < "$T/present") present)" \
	test -s "$T/present" -a -z "$(comm -23 "$T/present" "$T/listed")"
check_exit "delete reclaims them" 0 ws model delete lf
check "no chunk left after delete" test "$(chunks)" = 0

# ---- SIGINT mid-import ---------------------------------------------------
WSTORE_FAULTS="delay=100" "$W" --store "fault+$S" model import --checkpoint-id int \
	--model-id M --source "$SRC" --chunk-size $CS --jobs 1 > "$T/int.out" 2>&1 &
pid=$!
has_chunks() { [ "$(chunks)" -ge "$1" ]; }
wait_for 20 has_chunks 2	# under way
kill -INT $pid
wait_exit 60 $pid
rc=$?
check "SIGINT: import exits 1 ($rc)" test $rc = 1
check_grep "SIGINT: says interrupted" "interrupted" "$(cat "$T/int.out")"
st=$(ws --json model inspect int | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')
check "SIGINT: manifest is FAILED ($st)" test "$st" = FAILED
check "SIGINT: no chunk and no temp file left" test "$(chunks)" = 0 -a "$(tmps)" = 0
check_exit "SIGINT: re-import succeeds" 0 ws model import --checkpoint-id int --model-id M --source "$SRC"
ws model delete int >/dev/null

# ---- pull killed with SIGKILL and resumed ----------------------------------
ws model import --checkpoint-id pk --model-id M --source "$SRC" --chunk-size $CS >/dev/null
for delay in 300 700 1200; do
	rm -rf "$T/pk"
	WSTORE_FAULTS="delay=40" "$W" --store "fault+$S" model pull pk --dest "$T/pk" --jobs 1 >/dev/null 2>&1 &
	pid=$!
	sleep "$(echo "$delay" | awk '{print $1/1000}')"
	kill -9 $pid 2>/dev/null
	wait_exit 10 $pid 2>/dev/null
	bad=0
	for f in "$T"/pk/*; do
		[ -f "$f" ] || continue
		cmp -s "$f" "$SRC/$(basename "$f")" || bad=1
	done
	check "pull killed after ${delay} ms: every file at a final path is complete" test $bad = 0
	# the killed pull's temp file goes: its owner tag proves the writer dead
	check_exit "pull killed after ${delay} ms: re-run succeeds" 0 ws model pull pk --dest "$T/pk"
	check "pull killed after ${delay} ms: tree equals the source, no temp left" \
		sh -c "diff -r '$SRC' '$T/pk' && test -z \"\$(find '$T/pk' -name '*wstore-tmp*')\""
done
ws model delete pk >/dev/null

# ---- SIGINT mid-pull: the partial stays, the next pull resumes it ----------
RS="$T/rssrc"; RS2="$T/rssrc2"; mkdir -p "$RS" "$RS2"
python3 -c "
import sys
for d, seed in (('$RS', 1), ('$RS2', 2)):
    open(d + '/big.bin', 'wb').write(bytes((i * 131 + i // 97 + seed) & 255 for i in range(40 * 16384)))
    open(d + '/config.json', 'w').write('{\"a\":%d}\n' % seed)
"
ws model import --checkpoint-id rs --model-id M --source "$RS" --chunk-size $CS >/dev/null
nparts() { find "$T/rs" -name '.wstore-part-*' 2>/dev/null | wc -l; }
part_size() { find "$T/rs" -name '.wstore-part-*' -printf '%s\n' 2>/dev/null | head -1; }
has_chunks_kept() { s=$(part_size); [ -n "$s" ] && [ "$s" -ge $((3 * 16384)) ]; }
# interrupt_pull: a slow pull of rs into $T/rs, stopped by SIGINT once its
# partial holds three chunks; sets rc
interrupt_pull() {
	WSTORE_FAULTS=delay=40 "$W" --store "fault+$S" model pull rs --dest "$T/rs" \
		--jobs 1 > "$T/rs.out" 2>&1 &
	pid=$!
	wait_for 60 has_chunks_kept
	kill -INT $pid
	wait_exit 60 $pid
	rc=$?
}
interrupt_pull
check "SIGINT: pull exits 1 ($rc)" test $rc = 1
check_grep "SIGINT: pull says it was stopped" "canceled|interrupted" "$(cat "$T/rs.out")"
size=$(part_size)
check "SIGINT: one partial file stays ($(nparts)), smaller than the file ($size)" \
	test "$(nparts)" = 1 -a "${size:-0}" -ge $((3 * 16384)) -a "${size:-0}" -lt $((40 * 16384))
check "SIGINT: nothing at the file's final path" test ! -e "$T/rs/big.bin"
# hide the chunks the partial holds in full: a pull that resumes never
# reads them, a pull that fetched the whole file would fail
kept=$((size / 16384))
ws --json model inspect rs | python3 -c "
import json, sys
f = [f for f in json.load(sys.stdin)['files'] if f['path'] == 'big.bin'][0]
print('\n'.join(f['chunks'][:$kept]))" > "$T/kept"
mkdir -p "$T/hidden"
# hide_chunks, unhide_chunks: the chunks listed in $T/kept made unreadable
# as themselves and back: a chunk file (the old layout) is moved away, a
# chunk's range of its data file is saved and zeroed (a pull reading it
# fails its SHA-256)
hide_chunks() {
	i=0
	while read -r k; do
		set -- $(chunk_at "$S" "$k")
		case ${1##*/} in
		data-*) dd if="$1" of="$T/hidden/$i" bs=16384 skip=$(($2 / 16384)) \
				count=1 2>/dev/null &&
			dd if=/dev/zero of="$1" bs=16384 seek=$(($2 / 16384)) count=1 \
				conv=notrunc 2>/dev/null && i=$((i + 1)) ;;
		*) mv "$1" "$T/hidden/$i" && i=$((i + 1)) ;;
		esac
	done < "$T/kept"
}
unhide_chunks() {
	i=0
	while read -r k; do
		set -- $(chunk_at "$S" "$k")
		case ${1##*/} in
		data-*) dd if="$T/hidden/$i" of="$1" bs=16384 seek=$(($2 / 16384)) \
				conv=notrunc 2>/dev/null ;;
		*) mv "$T/hidden/$i" "$S/$k" ;;
		esac
		i=$((i + 1))
	done < "$T/kept"
}
hide_chunks
check "the $kept chunks the partial holds are hidden" test "$i" = "$kept" -a "$kept" -ge 3
check_exit "re-run resumes the partial (fetches only the missing chunks)" 0 \
	ws model pull rs --dest "$T/rs" --jobs 1
check "resumed: tree equals the source, no partial left" \
	sh -c "diff -r '$RS' '$T/rs' && test \$(find '$T/rs' -name '.wstore-*' | wc -l) = 0"
unhide_chunks
check_exit "the chunks are back: rs verifies" 0 ws model verify rs
# a re-import of the same id between the two pulls: the partial is of
# another import, never resumed; the file is fetched whole
rm -rf "$T/rs"
interrupt_pull
check "SIGINT again: one partial stays" test "$(nparts)" = 1 -a $rc = 1
ws model delete rs >/dev/null
ws model import --checkpoint-id rs --model-id M --source "$RS2" --chunk-size $CS >/dev/null
check_exit "after a re-import of rs the pull succeeds" 0 ws model pull rs --dest "$T/rs"
check "re-imported: tree equals the new source, the old partial is gone" \
	sh -c "diff -r '$RS2' '$T/rs' && test \$(find '$T/rs' -name '.wstore-*' | wc -l) = 0"
# --force discards a partial
rm -rf "$T/rs"
interrupt_pull
check "SIGINT a third time: one partial stays" test "$(nparts)" = 1 -a $rc = 1
hide_chunks
check_exit "--force does not resume: the hidden chunks are needed" 1 \
	ws model pull rs --dest "$T/rs" --force
unhide_chunks
check_exit "--force with every chunk back succeeds" 0 ws model pull rs --dest "$T/rs" --force
check "forced: tree equals the source, no partial left" \
	sh -c "diff -r '$RS2' '$T/rs' && test \$(find '$T/rs' -name '.wstore-*' | wc -l) = 0"
ws model delete rs >/dev/null

# ---- the checkpoint lock: a running import keeps delete and import out ----
# (the import is stopped while the other commands run: on a busy machine
# it could otherwise end before them; its lock's 60 s TTL outlasts them)
WSTORE_FAULTS="delay=100" "$W" --store "fault+$S" model import --checkpoint-id busy \
	--model-id M --source "$SRC" --chunk-size $CS --jobs 1 > "$T/busy.out" 2>&1 &
pid=$!
wait_lock busy
kill -STOP $pid
check_exit "delete of an id being imported is refused" 1 ws model delete busy
check_grep "delete says busy and names the owner" "checkpoint 'busy' is busy.*locked by pid $pid" "$OUT"
check_exit "a second import of the same id is refused" 1 ws model import \
	--checkpoint-id busy --model-id M --source "$SRC"
check_grep "second import says busy" "is busy" "$OUT"
check_one_line "busy error is one line" "$OUT"
kill -CONT $pid
wait_exit 300 $pid
check "the first import still succeeds" grep -q "imported 'busy'" "$T/busy.out"
check_exit "and verifies" 0 ws model verify busy
ws model delete busy >/dev/null
# a lock left by a killed process is taken over
WSTORE_FAULTS="delay=200" "$W" --store "fault+$S" model import --checkpoint-id stale \
	--model-id M --source "$SRC" --chunk-size $CS --jobs 1 >/dev/null 2>&1 &
pid=$!
wait_lock stale
kill -9 $pid; wait_exit 10 $pid 2>/dev/null
check_exit "a stale lock (owner killed) does not block a new import" 0 ws model import \
	--checkpoint-id stale --model-id M --source "$SRC"
ws model delete stale >/dev/null

# ---- corrupt index: list still works, the next import repairs it ------------
ws model import --checkpoint-id ix1 --model-id M --source "$SRC" >/dev/null
printf '["ix1", garbage' > "$S/weight/index/models"
check_exit "list with a corrupt index still works" 0 ws model list
check_grep "list rebuilt from the manifests" "^ix1 " "$OUT"
check_exit "import with a corrupt index" 0 ws model import --checkpoint-id ix2 --model-id M --source "$SRC"
check "the repaired index holds both ids" grep -q '^\["ix1","ix2"\]$' "$S/weight/index/models"
ws model delete ix1 >/dev/null; ws model delete ix2 >/dev/null

# ---- config file ----------------------------------------------------------
check_exit "config init writes a new --config file" 0 "$W" --store "$S" --config "$T/cfg.json" config init
check "config file holds the store" grep -q "\"store\": \"$S\"" "$T/cfg.json"
check_exit "config init refuses to overwrite" 2 "$W" --config "$T/cfg.json" config init
check_exit "config init --force overwrites" 0 "$W" --config "$T/cfg.json" --protocol rdma config init --force
check "forced file keeps the store and adds protocol" sh -c "grep -q '\"protocol\": \"rdma\"' '$T/cfg.json' && grep -q '\"store\"' '$T/cfg.json'"
ws model import --checkpoint-id cf --model-id M --source "$SRC" >/dev/null
check_exit "the config file's store is used" 0 "$W" --config "$T/cfg.json" model inspect cf
check_exit "a flag beats the config file" 1 "$W" --config "$T/cfg.json" --store "$T/other" model inspect cf
check_exit "env beats the config file" 1 env WSTORE_STORE="$T/other" "$W" --config "$T/cfg.json" model inspect cf
printf '{"store": "x", "bogus": 1}' > "$T/bad.json"
check_exit "unknown config key is an error" 1 "$W" --config "$T/bad.json" model list
check_grep "unknown key is named" "unknown key 'bogus'" "$OUT"
check_exit "model --help" 0 "$W" model --help
ws model delete cf >/dev/null

# files named like temps of a pull whose pid is gone, next to several
# files that must be fetched: a pull cannot prove they are its own (the
# user's may look the same), so it keeps them
ws model import --checkpoint-id st --model-id M --source "$SRC" >/dev/null
ws model pull st --dest "$T/st" >/dev/null
sh -c 'exit 0' & dead=$!; wait $dead
for f in config.json tokenizer.json tokenizer_config.json; do
	rm "$T/st/$f"; echo partial > "$T/st/.$f.wstore-tmp-$dead"
done
echo "the user's" > "$T/st/.wstore-tmp-$dead-0"
check_exit "pull next to temp-like names of a dead pid" 0 ws model pull st --dest "$T/st"
check "the tree is whole and every temp-like file is kept" \
	sh -c "diff -r -x '*wstore-tmp*' '$SRC' '$T/st' && test \"\$(find '$T/st' -name '*wstore-tmp*' | wc -l)\" = 4 && grep -q \"the user's\" '$T/st/.wstore-tmp-$dead-0'"
ws model delete st >/dev/null

# ---- a crash at every call of a delete: re-running finishes it -----------
ws model import --checkpoint-id d --model-id M --source "$SRC" --chunk-size $CS >/dev/null
ncalls=$(( $(chunks) + 12 ))
k=1
ok=1
while [ "$k" -le "$ncalls" ]; do
	ws model import --checkpoint-id d --model-id M --source "$SRC" --chunk-size $CS >/dev/null 2>&1
	WSTORE_FAULTS="crash=$k" "$W" --store "fault+$S" model delete d >/dev/null 2>&1
	if ! ws model delete --missing-ok d >/dev/null 2>"$T/err"; then
		ok=0; tap_not_ok "delete after a crash at call $k" "$(cat "$T/err")"
	elif [ "$(chunks)" != 0 ] || ws model inspect d >/dev/null 2>&1 || ws model list | grep -q '^d '; then
		ok=0; tap_not_ok "delete after a crash at call $k leaves nothing"
	fi
	k=$((k + 1))
done
[ $ok = 1 ] && tap_ok "delete crashed at each of $ncalls calls, then re-run: nothing left"

# ---- a crash at every call of an import: never READY and incomplete ------
k=1
ok=1
while [ "$k" -le "$((nput + 12))" ]; do
	WSTORE_FAULTS="crash=$k" "$W" --store "fault+$S" model import --checkpoint-id ci \
		--model-id M --source "$SRC" --chunk-size $CS --jobs 1 >/dev/null 2>&1
	if ws --json model inspect ci 2>/dev/null | grep -q '"status":"READY"'; then
		ws model verify ci >/dev/null 2>&1 || { ok=0; tap_not_ok "crash at import call $k left a READY checkpoint that fails verify"; }
	fi
	# the same command run again must succeed (or find it READY)
	out=$(ws model import --checkpoint-id ci --model-id M --source "$SRC" --chunk-size $CS 2>&1) ||
		echo "$out" | grep -q "already exists and is READY" ||
		{ ok=0; tap_not_ok "import after a crash at call $k" "$out"; }
	ws model verify ci >/dev/null 2>&1 || { ok=0; tap_not_ok "verify after crash $k and re-import"; }
	ws model delete ci >/dev/null 2>&1
	k=$((k + 1))
done
[ $ok = 1 ] && tap_ok "import crashed at each of $((nput + 12)) calls: re-run always succeeds and verifies"

# ---- a manifest that cannot be read is never an absent one ----------------
# (failread: every read of one key fails with EIO, as a store that times
# out on it would)
ws model import --checkpoint-id ur1 --model-id M/ur --source "$SRC" >/dev/null
ws model import --checkpoint-id ur2 --model-id M/ur --revision r2 --source "$SRC" >/dev/null
FR=failread=ur1/manifest
check_exit "model list with one manifest unreadable exits 1" 1 wf $FR model list
check_grep "... showing it UNREADABLE, not missing or corrupt" "^ur1 .* UNREADABLE" "$OUT"
check_grep "... still listing the others" "^ur2 .*READY" "$OUT"
check_grep "... and saying why" "injected fault reading 'weight/models/ur1/manifest'" "$OUT"
check_exit "model list --all --model: the unreadable row is kept" 1 wf $FR --json model list --all --model M/ur
check_grep "... as UNREADABLE" '"status": "UNREADABLE"' "$OUT"
check_exit "gc fails when a manifest cannot be read" 1 wf $FR gc --grace 0
check_grep "... naming it" "weight/models/ur1/manifest" "$OUT"
check_exit "... and removed nothing of it (it verifies)" 0 ws model verify ur1
check_exit "pulling the model by name fails rather than pick another" 1 \
	wf $FR model pull M/ur --dest "$T/urp"
check "... and wrote nothing" test ! -e "$T/urp/config.json"
# a corrupt index is rebuilt from the manifests: one that cannot be read
# makes that an error, never an index without it written back
cp "$S/weight/index/models" "$T/index.bak"
echo garbage > "$S/weight/index/models"
check_exit "list from a corrupt index with a manifest unreadable fails" 1 wf $FR model list
check_exit "an import with that manifest unreadable cannot repair the index" 1 \
	wf $FR model import --checkpoint-id ur3 --model-id M/ur3 --source "$SRC"
check_grep "... and says so" "cannot update index" "$OUT"
# (the import published ur3: running it again repairs the index)
ws model import --checkpoint-id ur3 --model-id M/ur3 --source "$SRC" >/dev/null 2>&1
check_exit "once the manifest reads, list works" 0 ws model list
check "... and the index lists ur1, ur2 and ur3" sh -c "test \"\$('$W' --store '$S' model list | grep -c '^ur[123] .*READY')\" = 3"
for c in ur1 ur2 ur3; do ws model delete $c >/dev/null; done
# leases gc cannot read: the checkpoint may be being read, so gc leaves it
# alone (a stray key under its prefix stays), where it sweeps it otherwise
ws model import --checkpoint-id gl --model-id M/gl --source "$SRC" >/dev/null
mkdir -p "$S/weight/models/gl/stray" && echo x >"$S/weight/models/gl/stray/k"
check_exit "gc with the leases of a checkpoint unreadable" 0 \
	wf failread=weight/leases/models/gl gc --grace 0
check_grep "... skips it, saying why" "skipped 'gl': cannot read the leases of 'gl': injected fault" "$OUT"
check "... and leaves its keys alone" test -f "$S/weight/models/gl/stray/k"
check_exit "gc that can read them" 0 ws gc --grace 0
check "... sweeps the stray key" test ! -e "$S/weight/models/gl/stray/k"
check_exit "... and the checkpoint verifies" 0 ws model verify gl
ws model delete gl >/dev/null

# ---- materialize ends on SIGTERM within two seconds --------------------------
# 60 chunks read 200 ms apart: 12 s unless the signal stops it
python3 -c "import os; open('$T/big.bin','wb').write(os.urandom(60*16384))"
mkdir -p "$T/bigsrc" && mv "$T/big.bin" "$T/bigsrc/" && echo '{}' >"$T/bigsrc/config.json"
check_exit "import of a 60-chunk file" 0 ws model import --checkpoint-id mt --model-id M/mt --source "$T/bigsrc" --chunk-size $CS
mkdir -p "$T/mo"
WSTORE_FAULTS=delay=200 "$W" --store "fault+$S" model materialize-file mt \
	--path big.bin --output "$T/mo/big.bin" >"$T/mo.log" 2>&1 &
P=$!
check "materialize is writing its temp file" wait_for 30 sh -c "ls -A '$T/mo' | grep -q ."
t0=$(date +%s%N); kill -TERM $P
wait_exit 20 $P; rc=$?
el=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ "$rc" = 1 ] && [ "$el" -le 2000 ]; then tap_ok "SIGTERM ends materialize within 2 s ($el ms), exit 1"
else tap_not_ok "SIGTERM ends materialize within 2 s, exit 1" "exit $rc after $el ms: $(cat "$T/mo.log")"; fi
check_grep "... saying it was interrupted" "interrupted" "$(cat "$T/mo.log")"
check "... leaving no file and no temp file" test -z "$(ls -A "$T/mo")"
ws model delete mt >/dev/null

# ---- write-once store holding stale chunk values -------------------------
ws model import --checkpoint-id wo --model-id M --source "$SRC" --chunk-size $CS >/dev/null
key=$(ws --json model inspect wo | python3 -c 'import json,sys; print(json.load(sys.stdin)["files"][3]["chunks"][1])')
# forget the manifest (as a crash before publishing would) but keep a
# damaged chunk under a key the next import will write again
ws --json model inspect wo > "$T/wo.json"
rm "$S/weight/models/wo/manifest"
printf 'stale' > "$S/$key"
check_exit "write-once: import over a stale chunk succeeds" 0 \
	env WSTORE_FAULTS=writeonce "$W" --store "fault+$S" model import --checkpoint-id wo \
	--model-id M --source "$SRC" --chunk-size $CS
check_exit "write-once: the stale chunk was replaced (verify passes)" 0 ws model verify wo
ws model delete wo >/dev/null

check "no temp file left anywhere" test "$(tmps)" = 0
tap_done
