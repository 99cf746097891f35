#!/bin/sh
# reliability.sh - crash safety, gc, concurrency and corruption on the file
# store (suite "reliability"):
#  - kills: wstore is killed as if by SIGKILL at every backend call of an
#    import, a delete and a pull (fault backend "fault+DIR" with
#    WSTORE_FAULTS=crash=N, which _exit(137)s at the N-th call), and by a
#    real kill -9 after a random delay while calls are slowed with
#    delay=MS.  After every kill: no READY manifest with a missing or wrong
#    chunk, no partial file at a final path of a pull destination, and
#    re-running the same command (or delete) succeeds; `admin gc` then
#    leaves zero orphans (chunk objects no manifest lists, temp files).
#  - 16 concurrent imports; 2 concurrent imports of one id; delete racing
#    verify, materialize and pull (refused while they hold their read
#    lease; forced, they fail cleanly).
#  - corruption of a chunk (flip, truncate, remove), of a manifest and of
#    the index object.
TAP_SUITE=reliability
. "$(dirname "$0")/../lib/suite.sh"
S="$T/store"
ws() { "$W" --store "$S" "$@"; }
wf() { f=$1; shift; WSTORE_FAULTS="$f" "$W" --store "fault+$S" "$@"; }
CS=16K

SRC="$T/src"
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 60000 --shards 2 >/dev/null
mkdir -p "$SRC/sub"
printf 'nested\n' > "$SRC/sub/x.bin"
printf '' > "$SRC/empty.txt"
nchunks=$(python3 -c "
import os
n = 0
for d, _, fs in os.walk('$SRC'):
    for f in fs:
        n += (os.path.getsize(os.path.join(d, f)) + 16383) // 16384
print(n)")

# orphans: chunk objects under weight/models that no manifest lists, plus
# temp files anywhere in the store
orphans() {
	python3 - "$S" <<'EOF'
import json, os, sys
root = sys.argv[1]
base = os.path.join(root, "weight", "models")
listed, present, tmps = set(), set(), 0
for d, _, fs in os.walk(root):
    for f in fs:
        p = os.path.relpath(os.path.join(d, f), root)
        if f.startswith(".tmp-"):
            tmps += 1
        elif p.startswith("weight/models/") and f.startswith("data-"):
            # a data file holds the chunk keys of its ranges
            cs = int(f[5:])
            n = (os.path.getsize(os.path.join(d, f)) + cs - 1) // cs
            for i in range(n):
                present.add(os.path.join(os.path.dirname(p), "chunks", "%08d" % i))
        elif p.startswith("weight/models/") and not p.endswith("/manifest"):
            present.add(p)
        elif p.startswith("weight/models/"):
            try:
                m = json.load(open(os.path.join(root, p)))
                for r in m["files"]:
                    listed.update(r.get("chunks", [r["key"]]))
            except Exception:
                pass
print(len(present - listed) + tmps)
EOF
}

# ready_ok ID: a READY manifest of ID must verify (absent or FAILED is fine)
ready_ok() {
	if ws --json model inspect "$1" 2>/dev/null | grep -q '"status": *"READY"'; then
		ws model verify "$1" >/dev/null 2>&1
	fi
}

# dest_ok DIR: every file but temp and partial files in a pull destination
# equals the source
dest_ok() {
	[ -d "$1" ] || return 0
	(cd "$1" && find . -type f ! -name '.*wstore-tmp*' ! -name '.wstore-part-*') | while read -r f; do
		cmp -s "$1/$f" "$SRC/$f" || { echo "partial or wrong: $f"; return 1; }
	done
}

KILLS=0
killed() { # killed RC LABEL: count a kill point that really killed
	if [ "$1" = 137 ]; then KILLS=$((KILLS + 1)); fi
}

# ---- crash at every call of an import ------------------------------------
k=1
ok=1
last=0
while [ "$k" -le "$((nchunks + 16))" ]; do
	wf "crash=$k" model import --checkpoint-id ci --model-id M --source "$SRC" \
		--chunk-size $CS --jobs 1 >/dev/null 2>&1
	rc=$?
	killed $rc
	[ $rc = 137 ] && last=$k
	ready_ok ci || { ok=0; tap_not_ok "import killed at call $k: a READY manifest fails verify"; }
	ws admin gc --grace 0 >/dev/null 2>"$T/err" || { ok=0; tap_not_ok "gc after import kill $k" "$(cat "$T/err")"; }
	n=$(orphans)
	[ "$n" = 0 ] || { ok=0; tap_not_ok "gc after import kill $k leaves $n orphans"; }
	out=$(ws model import --checkpoint-id ci --model-id M --source "$SRC" --chunk-size $CS 2>&1) ||
		echo "$out" | grep -q "already exists and is READY" ||
		{ ok=0; tap_not_ok "re-import after kill $k" "$out"; }
	ws model verify ci >/dev/null 2>&1 || { ok=0; tap_not_ok "verify after kill $k and re-import"; }
	ws model delete ci >/dev/null 2>&1 || { ok=0; tap_not_ok "delete after kill $k"; }
	k=$((k + 1))
done
IMPORT_KILLS=$KILLS
[ $ok = 1 ] && tap_ok "import killed at each of $IMPORT_KILLS calls (1..$last): never READY and broken, gc leaves 0 orphans, re-run succeeds"
check "the import loop reached past the last call ($last < $((nchunks + 16)))" test "$last" -lt "$((nchunks + 16))"

# ---- crash at every call of an import, then delete alone ------------------
# no gc here: the intent record written before the first chunk is what
# lets delete find everything the killed import stored (as on Mooncake,
# which cannot list keys)
left_of() { # left_of ID: keys of ID and its intent record still in the store
	(cd "$S" && find "weight/models/$1" "weight/intents/models/$1" -type f \
		2>/dev/null | wc -l)
}
k=1
ok=1
seen_intent=0
while [ "$k" -le "$((nchunks + 16))" ]; do
	wf "crash=$k" model import --checkpoint-id cx --model-id M --source "$SRC" \
		--chunk-size $CS --jobs 1 >/dev/null 2>&1
	rc=$?
	[ -f "$S/weight/intents/models/cx" ] && seen_intent=$((seen_intent + 1))
	if [ $rc = 0 ]; then
		[ -f "$S/weight/intents/models/cx" ] &&
			{ ok=0; tap_not_ok "a READY import left its intent record"; }
		ws model delete cx >/dev/null 2>&1
		break
	fi
	ws model delete --missing-ok cx >/dev/null 2>"$T/err" ||
		{ ok=0; tap_not_ok "delete after import kill $k" "$(cat "$T/err")"; }
	n=$(left_of cx)
	[ "$n" = 0 ] || { ok=0; tap_not_ok "delete after import kill $k leaves $n keys"; }
	k=$((k + 1))
done
[ $ok = 1 ] && tap_ok "import killed at each of $((k - 1)) calls: delete alone (no gc) leaves no key of it"
check "kills left an intent record that delete used ($seen_intent times)" test "$seen_intent" -gt "$nchunks"

# gc reclaims a killed import's intent record too
wf "crash=$((nchunks / 2 + 8))" model import --checkpoint-id cy --model-id M --source "$SRC" \
	--chunk-size $CS --jobs 1 >/dev/null 2>&1
check "a killed import leaves its intent record" test -f "$S/weight/intents/models/cy"
check_exit "gc after the kill" 0 ws admin gc --grace 0
check "gc removed its chunks and the intent record ($(left_of cy) left)" test "$(left_of cy)" = 0

# ---- crash at every call of a multi-threaded import ------------------------
ok=1
for k in 3 5 7 9 11 13; do
	wf "crash=$k" model import --checkpoint-id cj --model-id M --source "$SRC" \
		--chunk-size 8K --jobs 4 >/dev/null 2>&1
	killed $?
	ready_ok cj || { ok=0; tap_not_ok "4-thread import killed at call $k: READY manifest fails verify"; }
	ws admin gc --grace 0 >/dev/null 2>&1
	n=$(orphans)
	[ "$n" = 0 ] || { ok=0; tap_not_ok "gc after 4-thread import kill $k leaves $n orphans"; }
	ws model delete --missing-ok cj >/dev/null 2>&1 || { ok=0; tap_not_ok "delete after 4-thread kill $k"; }
done
[ $ok = 1 ] && tap_ok "4-thread import killed at 6 points: gc leaves 0 orphans, delete succeeds"

# ---- crash at every call of a delete -------------------------------------
k=1
ok=1
before=$KILLS
while [ "$k" -le "$((nchunks + 12))" ]; do
	ws model import --checkpoint-id cd --model-id M --source "$SRC" --chunk-size $CS >/dev/null 2>&1
	wf "crash=$k" model delete cd >/dev/null 2>&1
	rc=$?
	killed $rc
	[ $rc = 137 ] && last=$k
	ready_ok cd || { ok=0; tap_not_ok "delete killed at call $k: a READY manifest fails verify"; }
	ws model list >/dev/null 2>&1 || { ok=0; tap_not_ok "list after delete kill $k"; }
	ws model delete --missing-ok cd >/dev/null 2>"$T/err" || { ok=0; tap_not_ok "re-run delete after kill $k" "$(cat "$T/err")"; }
	ws admin gc --grace 0 >/dev/null 2>&1
	n=$(orphans)
	[ "$n" = 0 ] || { ok=0; tap_not_ok "delete kill $k: $n orphans after re-run and gc"; }
	if ws model list | grep -q '^cd '; then ok=0; tap_not_ok "delete kill $k: id still listed"; fi
	k=$((k + 1))
done
DELETE_KILLS=$((KILLS - before))
[ $ok = 1 ] && tap_ok "delete killed at each of $DELETE_KILLS calls: re-run succeeds, nothing left"

# ---- crash at every call of a pull ---------------------------------------
ws model import --checkpoint-id cp --model-id M --source "$SRC" --chunk-size $CS >/dev/null
k=1
ok=1
before=$KILLS
while [ "$k" -le "$((nchunks + 6))" ]; do
	rm -rf "$T/dest"
	wf "crash=$k" model pull cp --dest "$T/dest" --jobs 1 >/dev/null 2>&1
	killed $?
	msg=$(dest_ok "$T/dest") || { ok=0; tap_not_ok "pull killed at call $k: $msg"; }
	ws model pull cp --dest "$T/dest" >/dev/null 2>"$T/err" ||
		{ ok=0; tap_not_ok "re-run pull after kill $k" "$(cat "$T/err")"; }
	diff -r "$SRC" "$T/dest" >/dev/null 2>&1 ||
		{ ok=0; tap_not_ok "pull after kill $k: dest differs from source" "$(diff -r "$SRC" "$T/dest" 2>&1 | head -3)"; }
	if [ -n "$(find "$T/dest" -name '*wstore-tmp*' -o -name '.wstore-part-*')" ]; then
		ok=0; tap_not_ok "pull after kill $k left a temp or partial file in dest"
	fi
	k=$((k + 1))
done
PULL_KILLS=$((KILLS - before))
[ $ok = 1 ] && tap_ok "pull killed at each of $PULL_KILLS calls: final paths absent or complete, re-run completes"

# ---- real SIGKILL after a random delay (calls slowed) ---------------------
ok=1
before=$KILLS
seed=$$
rnd() { seed=$(( (seed * 1103515245 + 12345) % 2147483648 )); echo $(( seed % $1 )); }
sleep_ms() { sleep "$(awk "BEGIN{print $1/1000}")"; }
i=0
while [ $i -lt 6 ]; do
	for op in import delete pull; do
		case $op in
		import) WSTORE_FAULTS=delay=15 "$W" --store "fault+$S" model import --checkpoint-id rk \
			--model-id M --source "$SRC" --chunk-size $CS --jobs 2 >/dev/null 2>&1 & ;;
		delete) ws model import --checkpoint-id rk --model-id M --source "$SRC" \
				--chunk-size $CS >/dev/null 2>&1
			WSTORE_FAULTS=delay=15 "$W" --store "fault+$S" model delete rk >/dev/null 2>&1 & ;;
		pull) rm -rf "$T/rdest"
			ws model import --checkpoint-id rk --model-id M --source "$SRC" \
				--chunk-size $CS >/dev/null 2>&1
			WSTORE_FAULTS=delay=15 "$W" --store "fault+$S" model pull rk \
				--dest "$T/rdest" --jobs 2 >/dev/null 2>&1 & ;;
		esac
		pid=$!
		sleep_ms $((20 + $(rnd 250)))
		kill -9 $pid 2>/dev/null
		wait_exit 10 $pid
		[ $? = 137 ] && KILLS=$((KILLS + 1))
		ready_ok rk || { ok=0; tap_not_ok "kill -9 of $op: READY manifest fails verify"; }
		if [ $op = pull ]; then
			msg=$(dest_ok "$T/rdest") || { ok=0; tap_not_ok "kill -9 of pull: $msg"; }
			ws model pull rk --dest "$T/rdest" >"$T/err" 2>&1 &&
				diff -r -x '.wstore-tmp-*' "$SRC" "$T/rdest" >>"$T/err" 2>&1 ||
				{ ok=0; tap_not_ok "re-run pull after kill -9" "$(cat "$T/err")"; }
		fi
		ws model delete --missing-ok rk >/dev/null 2>"$T/err" || { ok=0; tap_not_ok "delete after kill -9 of $op" "$(cat "$T/err")"; }
		ws admin gc --grace 0 >/dev/null 2>&1
		n=$(orphans)
		[ "$n" = 0 ] || { ok=0; tap_not_ok "kill -9 of $op: $n orphans after delete and gc"; }
	done
	i=$((i + 1))
done
SIGKILLS=$((KILLS - before))
[ $ok = 1 ] && tap_ok "kill -9 at random times ($SIGKILLS of 18 runs killed mid-way): consistent, delete+gc leave nothing"
echo "# kill points: import $IMPORT_KILLS, delete $DELETE_KILLS, pull $PULL_KILLS (crash=N), kill -9 $SIGKILLS; total $KILLS"
check "at least 20 distinct kill points ($KILLS)" test "$KILLS" -ge 20

# ---- gc: what it must leave alone ----------------------------------------
ws model import --checkpoint-id g1 --model-id M --source "$SRC" --chunk-size $CS >/dev/null
# a FAILED manifest whose leftover chunks are listed: kept for delete
wf "failop=put:3,failop=remove:1+" model import --checkpoint-id g2 --model-id M \
	--source "$SRC" --chunk-size $CS --jobs 1 >/dev/null 2>&1
g2chunks=$(find "$S/weight/models/g2" -path '*/chunks/*' -type f | wc -l)
# a stray chunk next to a READY checkpoint, and a young temp file
mkdir -p "$S/weight/models/g1/files/ff/chunks"
printf 'stray' > "$S/weight/models/g1/files/ff/chunks/00000000"
printf 'young' > "$S/weight/models/g1/.tmp-manifest-1-1"
check_exit "gc --dry-run" 0 ws admin gc --dry-run
check_grep "dry run names the stray chunk" "orphan +weight/models/g1/files/ff/chunks/00000000" "$OUT"
check "dry run removed nothing" test -f "$S/weight/models/g1/files/ff/chunks/00000000"
check_exit "gc" 0 ws admin gc
check_grep "gc removes the stray chunk" "removed weight/models/g1/files/ff/chunks/00000000" "$OUT"
check "gc kept the young temp file (grace period)" test -f "$S/weight/models/g1/.tmp-manifest-1-1"
check "gc kept the chunks a FAILED manifest lists ($g2chunks)" \
	test "$(find "$S/weight/models/g2" -path '*/chunks/*' -type f | wc -l)" = "$g2chunks" -a "$g2chunks" -gt 0
check_exit "READY checkpoint still verifies after gc" 0 ws model verify g1
touch -d '2 hours ago' "$S/weight/models/g1/.tmp-manifest-1-1"
check_exit "gc with the default grace" 0 ws admin gc
check "an old temp file is removed" test ! -e "$S/weight/models/g1/.tmp-manifest-1-1"
# a running import (slowed) holds its lock: gc skips it and takes nothing
WSTORE_FAULTS=delay=40 "$W" --store "fault+$S" model import --checkpoint-id g3 --model-id M \
	--source "$SRC" --chunk-size $CS --jobs 1 >"$T/g3.out" 2>&1 &
pid=$!
wait_for 10 test -f "$S/weight/locks/models/g3"
check_exit "gc while an import runs" 0 ws admin gc --grace 0
check_grep "gc skips the running import as busy" "skipped 'g3'.*(busy|locked)" "$OUT"
wait_exit 300 $pid
check "the import gc ran beside finished (exit $?)" test -z "$(grep -v imported "$T/g3.out")"
check_exit "and it verifies" 0 ws model verify g3
# locks of a dead process and of another host
mkdir -p "$S/weight/locks/models"
printf '{"host":"gone-host","pid":42,"time":1,"token":"t"}' > "$S/weight/locks/models/g1"
check_exit "delete refuses another host's lock" 1 ws model delete g1
check_grep "with a busy error" "busy" "$OUT"
check_exit "admin unlock g1" 0 ws admin unlock g1
check_grep "unlock prints the owner record" "gone-host" "$OUT"
mkdir -p "$S/weight/locks/models"
printf '{"host":"%s","pid":%s,"time":1,"token":"t"}' "$(hostname)" $$ > "$S/weight/locks/models/g1"
check_exit "unlock refuses a live owner on this host" 1 ws admin unlock g1
check_one_line "refusal is one line" "$(ws admin unlock g1 2>&1 >/dev/null)"
check_exit "unlock --force breaks it" 0 ws admin unlock g1 --force
check_exit "unlock of a free lock" 1 ws admin unlock g1
check_grep "says not held" "not held" "$OUT"
check_exit "unlock with a bad id" 2 ws admin unlock ../x
# a lock held from another PID namespace (a pod's, in a fleet of pods):
# its pid means nothing here, its renewals say the holder is alive
if unshare --pid --fork --mount-proc true 2>/dev/null; then
	WSTORE_FAULTS=delay=40 unshare --pid --fork --mount-proc "$W" --store "fault+$S" \
		model import --checkpoint-id g4 --model-id M --source "$SRC" \
		--chunk-size $CS --jobs 1 >"$T/g4.out" 2>&1 &
	pid=$!
	wait_for 10 test -f "$S/weight/locks/models/g4"
	check_exit "unlock refuses a lock renewed from another PID namespace" 1 \
		ws admin unlock g4
	check_grep "... saying its holder still renews it" \
		"another host or PID namespace and its holder still renews it" "$OUT"
	check_one_line "... in one line" "$(ws admin unlock g4 2>&1 >/dev/null)"
	check_exit "... --force breaks it" 0 ws admin unlock g4 --force
	wait_exit 300 $pid
	ws model delete --force g4 >/dev/null 2>&1
else
	for c in refuses says one-line force; do
		tap_skip "unlock of a lock from another PID namespace: $c" \
			"unshare --pid --fork --mount-proc is not permitted here"
	done
fi
for id in g1 g2 g3; do ws model delete $id >/dev/null; done
# gc on a store that cannot list keys: tests/e2e/mooncake_faults.sh
check "no orphan left at the end of the gc checks" test "$(orphans)" = 0

# ---- concurrency -----------------------------------------------------------
i=1
while [ $i -le 16 ]; do
	ws model import --checkpoint-id "c$i" --model-id Conc --source "$SRC" --chunk-size $CS \
		--jobs 1 >"$T/c$i.out" 2>&1 &
	pids="$pids $!"
	i=$((i + 1))
done
wait_all 300
n=$(ws model list --model Conc | grep -c ' READY')
check "16 concurrent imports: all READY in the per-model index ($n)" test "$n" = 16
n=$(ws --json model list | grep -c '"checkpoint_id": "c[0-9]*"')
check "16 concurrent imports: all in the global index ($n)" test "$n" = 16
ok=1
i=1
while [ $i -le 16 ]; do
	ws model verify "c$i" >/dev/null 2>&1 || { ok=0; tap_not_ok "c$i fails verify"; }
	ws model delete "c$i" >/dev/null 2>&1 &
	pids="$pids $!"
	i=$((i + 1))
done
wait_all 300
[ $ok = 1 ] && tap_ok "16 concurrent imports all verify"
check "16 concurrent deletes empty the index" test -z "$(ws model list --model Conc | grep READY)"

# two imports of one id, slowed so that they overlap
for r in 1 2 3; do
	WSTORE_FAULTS=delay=10 "$W" --store "fault+$S" model import --checkpoint-id same \
		--model-id M --source "$SRC" --chunk-size $CS --jobs 1 >"$T/s1" 2>&1 &
	p1=$!
	WSTORE_FAULTS=delay=10 "$W" --store "fault+$S" model import --checkpoint-id same \
		--model-id M --source "$SRC" --chunk-size $CS --jobs 1 >"$T/s2" 2>&1 &
	p2=$!
	wait_exit 300 $p1; r1=$?
	wait_exit 300 $p2; r2=$?
	if [ $r1 = 0 ]; then loser=$T/s2; rl=$r2; else loser=$T/s1; rl=$r1; fi
	if [ "$(( (r1 == 0) + (r2 == 0) ))" = 1 ] && [ "$rl" = 1 ] &&
		grep -Eq "busy|already exists" "$loser" && [ "$(grep -c . "$loser")" = 1 ] &&
		ws model verify same >/dev/null 2>&1; then
		tap_ok "2 imports of one id (round $r): one READY, other exit 1: $(cat "$loser")"
	else
		tap_not_ok "2 imports of one id (round $r)" "exits $r1 $r2" "$(cat "$T/s1" "$T/s2")"
	fi
	ws model delete same >/dev/null 2>&1
done

# delete racing a slowed reader: a plain delete refuses while the reader
# holds its read lease; a forced one wins and the reader fails cleanly.
# race_reader NAME DIR CMD...: run CMD slowed; once it holds its lease
# and (DIR other than "-") its temp file shows in DIR (it is writing),
# delete, then delete --force
has_temp() { [ -n "$(find "$1" -maxdepth 1 -name '.wstore-tmp-*' -o -name '.wstore-part-*' 2>/dev/null)" ]; }
leased() { [ -n "$(ls "$S/weight/leases/models/$1" 2>/dev/null)" ]; }
race_reader() {
	name=$1; where=$2; shift 2
	ws model import --checkpoint-id race --model-id M --source "$SRC" --chunk-size 8K >/dev/null
	WSTORE_FAULTS=delay=${RACE_DELAY:-100} "$W" --store "fault+$S" "$@" \
		>"$T/race.out" 2>&1 &
	pid=$!
	wait_for 20 leased race || tap_not_ok "$name takes a read lease"
	[ "$where" = - ] || wait_for 30 has_temp "$where"
	ws model delete race >"$T/race.del" 2>&1
	prc=$?
	grep -q "is being read" "$T/race.del" || prc=0
	ws model delete race --force >"$T/race.del" 2>&1
	drc=$?
	wait_exit 300 $pid
	rrc=$?
	if [ $prc = 1 ] && [ $drc = 0 ] && [ $rrc != 0 ] && [ $rrc != 137 ] &&
		grep -Eqi "not found|missing|deleted|no key|corrupt|is FAILED" "$T/race.out"; then
		tap_ok "delete racing $name: reader exits $rrc: $(grep -i "wstore:" "$T/race.out" | head -1)"
	else
		tap_not_ok "delete racing $name" "plain delete $prc, forced $drc, reader $rrc" "$(tail -3 "$T/race.out")"
	fi
}
race_reader verify - model verify race --jobs 1
# a materialize of a file kept whole makes few store calls once its temp
# file shows (about 5: 0.5 s at 100 ms each), less than two delete
# processes take on a loaded machine; 500 ms each leave them 2.5 s
RACE_DELAY=500
race_reader materialize "$T" model materialize-file race --path model-00001-of-00002.safetensors \
	--output "$T/race.bin"
RACE_DELAY=100
check "materialize wrote nothing" test ! -e "$T/race.bin"
check "materialize left no temp file" test -z "$(find "$T" -maxdepth 1 -name '.wstore-tmp-*')"
if [ "$PULL_KILLS" != 0 ]; then
	mkdir -p "$T/racedest"
	race_reader pull "$T/racedest" model pull race --dest "$T/racedest" --jobs 1
	msg=$(dest_ok "$T/racedest")
	check "pull racing delete: no partial file at a final path ($msg)" test -z "$msg"
fi

# ---- corruption ------------------------------------------------------------
ws model import --checkpoint-id cor --model-id M --source "$SRC" --chunk-size $CS >/dev/null
F=model-00001-of-00002.safetensors
key=$(ws --json model inspect cor | python3 -c "
import json, sys
m = json.load(sys.stdin)
print([f for f in m['files'] if f['path'] == '$F'][0]['chunks'][1])")
# the chunk's file (the data file of the whole file) and its offset in it
set -- $(chunk_at "$S" "$key")
CF=$1 CO=$2
cp "$CF" "$T/saved"
damage() { # damage HOW: flip | truncate | remove the chunk, then check
	case $1 in
	flip) python3 -c "
import sys
p = sys.argv[1]; o = int(sys.argv[2]) + 100
b = bytearray(open(p, 'rb').read()); b[o] ^= 1; open(p, 'wb').write(b)" "$CF" "$CO" ;;
	truncate) truncate -s $((CO + 1000)) "$CF" ;;
	remove) chunk_remove "$S" "$key" ;;
	esac
	check_exit "$1 a chunk: verify exits 3" 3 ws model verify cor
	check_grep "$1: verify names the file" "BAD +$F" "$OUT"
	rm -f "$T/mat.out"
	check_exit "$1: materialize fails" 1 ws model materialize-file cor --path $F --output "$T/mat.out"
	check_one_line "$1: materialize error is one line" "$OUT"
	check "$1: materialize wrote nothing" test ! -e "$T/mat.out" -a -z "$(find "$T" -maxdepth 1 -name '.mat.out*')"
	if [ "$PULL_KILLS" != 0 ]; then
		rm -rf "$T/cdest"
		check_exit "$1: pull fails" 1 ws model pull cor --dest "$T/cdest"
		check "$1: pull wrote no copy of the damaged file" test ! -e "$T/cdest/$F"
		msg=$(dest_ok "$T/cdest")
		check "$1: pull left only complete files ($msg)" test -z "$msg"
	fi
	check_exit "$1: list still works" 0 ws model list
	cp "$T/saved" "$CF"
}
damage flip
damage truncate
damage remove
check_exit "restored chunk verifies" 0 ws model verify cor

# the manifest
cp "$S/weight/models/cor/manifest" "$T/manifest.saved"
printf '{"checkpoint_id":"cor","files":[' > "$S/weight/models/cor/manifest"
check_exit "corrupt manifest: inspect fails" 1 ws model inspect cor
check_grep "inspect says the manifest is corrupt" "manifest is corrupt" "$OUT"
check_one_line "inspect error is one line" "$OUT"
check_exit "corrupt manifest: verify fails" 1 ws model verify cor
check_grep "verify says the manifest is corrupt" "manifest is corrupt" "$OUT"
check_exit "corrupt manifest: materialize fails" 1 ws model materialize-file cor --path $F --output "$T/mat.out"
check "and writes nothing" test ! -e "$T/mat.out"
check_exit "corrupt manifest: list still works" 0 ws model list
check_exit "corrupt manifest: gc skips it" 0 ws admin gc --grace 0
check_grep "gc says why" "skipped 'cor'.*corrupt" "$OUT"
check_exit "corrupt manifest: delete cleans it" 0 ws model delete cor
check "nothing left under weight/models/cor" test ! -e "$S/weight/models/cor"
check_exit "the id can be imported again" 0 ws model import --checkpoint-id cor --model-id M \
	--source "$SRC" --chunk-size $CS

# the index object
printf '["cor",' > "$S/weight/index/models"
check_exit "corrupt index: list works or fails clearly" 0 sh -c '
	out=$("$0" --store "$1" model list 2>&1); rc=$?
	[ $rc = 0 ] || { echo "$out" | grep -q "index.*corrupt" && [ "$(echo "$out" | grep -c .)" = 1 ]; }' "$W" "$S"
check_exit "corrupt index: import still works" 0 ws model import --checkpoint-id cor2 \
	--model-id M --source "$SRC" --chunk-size $CS
check_exit "after the import list works" 0 ws model list
check_grep "and lists both" "cor2? .*READY" "$OUT"
n=$(printf '%s\n' "$OUT" | grep -Ec '^cor2? ')
check "both ids listed after repair ($n)" test "$n" = 2
printf 'garbage' > "$S/weight/index/model/$(printf M | sha256sum | cut -c1-64)"
check_exit "corrupt per-model index: delete still works" 0 ws model delete cor2
check_exit "list --model after that" 0 sh -c '
	out=$("$0" --store "$1" model list --model M 2>&1); rc=$?
	[ $rc = 0 ] || { echo "$out" | grep -q "corrupt" && [ "$(echo "$out" | grep -c .)" = 1 ]; }' "$W" "$S"
ws model delete cor >/dev/null
check_exit "final gc" 0 ws admin gc --grace 0
check "no orphans at the end ($(orphans))" test "$(orphans)" = 0
tap_done
