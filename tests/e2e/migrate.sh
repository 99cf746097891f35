#!/bin/sh
# migrate.sh - `wstore admin migrate`: file stores in the chunk-file
# layout (files/<ph>/chunks/<i>) converted in place to one data file per
# checkpoint file (files/<ph>/data-<chunk size>).  Old-layout stores are
# made by importing and then splitting every data file into chunk files
# (old_layout; a store imported in the old layout is left as it is).
# Cases: a dry run changes nothing; a migration converts every
# checkpoint, after which verify passes and pulls are byte-identical; a
# kill at each step (the test-only $WSTORE_TEST_MIGRATE_KILL) leaves
# every checkpoint verifying and a re-run finishes; a checkpoint whose
# lock another process holds is skipped with a clear message; a Python
# read handle reads the right bytes across the migration; --verify
# refuses a damaged chunk; other stores have nothing to migrate.
#   BUILD  the build directory holding wstore
TAP_SUITE=migrate
. "$(dirname "$0")/../lib/suite.sh"
PY=/usr/bin/python3
BUILD_ABS=$(cd "$BUILD" && pwd)
CS=65536

# the sources: c1 has a file of 5 chunks (the last one short), c2 one of
# 2 chunks and an empty one; 9 chunk files in all, 4 data files
mkdir -p "$T/src1" "$T/src2"
$PY - "$T" <<'EOF'
import os, sys
t = sys.argv[1]
open(os.path.join(t, "src1", "big.bin"), "wb").write(os.urandom(300000))
open(os.path.join(t, "src1", "config.json"), "w").write('{"a": 1}\n')
open(os.path.join(t, "src2", "w.bin"), "wb").write(os.urandom(100000))
open(os.path.join(t, "src2", "config.json"), "w").write('{"b": 2}\n')
open(os.path.join(t, "src2", "empty.txt"), "w").close()
EOF

# old_layout STORE: every data-<cs> file of STORE split into chunks/<i>
cat > "$T/old.py" <<'EOF'
import glob, os, sys
for data in glob.glob(os.path.join(sys.argv[1], "weight/models/*/files/*/data-*")):
    cs = int(os.path.basename(data)[5:])
    d = os.path.join(os.path.dirname(data), "chunks")
    os.makedirs(d, exist_ok=True)
    with open(data, "rb") as f:
        i = 0
        while True:
            b = f.read(cs)
            if not b:
                break
            with open(os.path.join(d, "%08d" % i), "wb") as c:
                c.write(b)
            i += 1
    os.unlink(data)
EOF

# mkstore DIR: a store in the old layout holding c1 and c2
mkstore() {
	rm -rf "$1"
	"$W" --store "$1" --quiet model import --source "$T/src1" \
		--model-id org/one --checkpoint-id c1 --chunk-size $CS &&
		"$W" --store "$1" --quiet model import --source "$T/src2" \
			--model-id org/two --checkpoint-id c2 --chunk-size $CS &&
		$PY "$T/old.py" "$1"
}

# count DIR KIND: files of kind chunk|data|tmp under DIR's checkpoints
count() {
	case $2 in
	chunk) find "$1/weight/models" -path '*/chunks/*' -type f | wc -l ;;
	data) find "$1/weight/models" -name 'data-*' -type f | wc -l ;;
	tmp) find "$1/weight/models" -name '.tmp-data-*' | wc -l ;;
	esac
}

# all_good DIR: both checkpoints verify and pull byte-identical
all_good() {
	"$W" --store "$1" model verify c1 && "$W" --store "$1" model verify c2 &&
		rm -rf "$T/pull" &&
		"$W" --store "$1" --quiet model pull c1 --dest "$T/pull/1" &&
		"$W" --store "$1" --quiet model pull c2 --dest "$T/pull/2" &&
		cmp "$T/src1/big.bin" "$T/pull/1/big.bin" &&
		cmp "$T/src1/config.json" "$T/pull/1/config.json" &&
		cmp "$T/src2/w.bin" "$T/pull/2/w.bin" &&
		cmp "$T/src2/empty.txt" "$T/pull/2/empty.txt"
}

# the opposite of old.py: chunk files joined into data-<cs> by hand, to
# tell whether this build reads the whole-file layout at all
cat > "$T/new.py" <<'EOF2'
import glob, os, sys
cs = int(sys.argv[2])
for d in glob.glob(os.path.join(sys.argv[1], "weight/models/*/files/*/chunks")):
    with open(os.path.join(os.path.dirname(d), "data-%d" % cs), "wb") as f:
        for c in sorted(os.listdir(d)):
            f.write(open(os.path.join(d, c), "rb").read())
            os.unlink(os.path.join(d, c))
    os.rmdir(d)
EOF2
NEWREAD=
mkstore "$T/probe" && $PY "$T/new.py" "$T/probe" $CS &&
	all_good "$T/probe" >/dev/null 2>&1 && NEWREAD=1
NEWREAD_WHY="this build does not read the whole-file layout (a store converted by hand does not verify)"

# check_read NAME DIR: all_good DIR, where this build reads the new layout
check_read() {
	if [ -n "$NEWREAD" ]; then check "$1" all_good "$2"
	else tap_skip "$1" "$NEWREAD_WHY"; fi
}

snapshot() { (cd "$1" && find . -printf '%p %s %T@ %m\n' | sort); }

# ---- the old layout, and a dry run --------------------------------------
S="$T/s"
check "an old-layout store is built" mkstore "$S"
check "... with chunk files and no data file" \
	test "$(count "$S" chunk)" = 9 -a "$(count "$S" data)" = 0
check "... and it verifies and pulls as it is" all_good "$S"
snapshot "$S" > "$T/before"
check_exit "a dry run succeeds" 0 "$W" --store "$S" admin migrate --dry-run
check_grep "... and says what it would convert" \
	"would convert 'c1' \(2 files\)" "$OUT"
check_grep "... with a summary" \
	"migrate \(dry run\): 2 checkpoints, 2 to convert \(4 files" "$OUT"
check_exit "... also with --json" 0 "$W" --store "$S" --json admin migrate --dry-run
check "... one object with the counts and each checkpoint" $PY -c '
import json, sys
o = json.loads(sys.argv[1])
assert o["dry_run"] and o["converted"] == 2 and o["files"] == 4, o
assert [r["result"] for r in o["results"]] == ["ok", "ok"], o
' "$OUT"
snapshot "$S" > "$T/after"
check "... and changes nothing" cmp "$T/before" "$T/after"

# ---- a migration --------------------------------------------------------
check_exit "a migration succeeds" 0 "$W" --store "$S" admin migrate --verify
check_grep "... reports each checkpoint" "converted 'c2' \(2 files\)" "$OUT"
check "... leaves one data file per non-empty file and no chunk file" \
	test "$(count "$S" chunk)" = 0 -a "$(count "$S" data)" = 4 \
	-a "$(count "$S" tmp)" = 0
check "... and no chunks/ directory" \
	test -z "$(find "$S/weight/models" -name chunks)"
check "... each data file named by its chunk size" \
	test "$(find "$S/weight/models" -name "data-$CS" | wc -l)" = 4
check_read "... after which every checkpoint verifies and pulls byte-identical" \
	"$S"
check_exit "a second migration has nothing to do" 0 \
	"$W" --store "$S" admin migrate
check_grep "... and says so" "0 converted .* 2 already current" "$OUT"

# ---- kill points --------------------------------------------------------
# at each step the first migration is SIGKILLed; each checkpoint must
# verify as it was left, and a second migration finish the job
for step in temp rename chunks; do
	K="$T/k-$step"
	mkstore "$K" || { tap_not_ok "kill at $step: store built"; continue; }
	check_exit "kill at '$step': the migration is killed" 137 \
		env WSTORE_TEST_MIGRATE_KILL=$step "$W" --store "$K" --quiet \
		admin migrate
	case $step in
	temp) want="tmp=1 data=0" ;;
	rename) want="tmp=0 data=1" ;;
	chunks) want="tmp=0 data=1" ;;
	esac
	got="tmp=$(count "$K" tmp) data=$(count "$K" data)"
	check "kill at '$step': left $want (got $got)" test "$got" = "$want"
	if [ $step = chunks ]; then
		check "kill at 'chunks': some chunk files are gone, some left" \
			test "$(count "$K" chunk)" -gt 0 -a "$(count "$K" chunk)" -lt 9
	fi
	if [ $step = temp ]; then # nothing published yet: the old layout
		check "kill at 'temp': every checkpoint still verifies and pulls" \
			all_good "$K"
	else
		check_read "kill at '$step': every checkpoint still verifies and pulls" \
			"$K"
	fi
	check_exit "kill at '$step': a re-run finishes" 0 \
		"$W" --store "$K" admin migrate
	got="chunk=$(count "$K" chunk) data=$(count "$K" data) tmp=$(count "$K" tmp)"
	check "kill at '$step': ... every file converted, nothing left ($got)" \
		test "$got" = "chunk=0 data=4 tmp=0"
	check_read "kill at '$step': ... and every checkpoint verifies and pulls" \
		"$K"
done

# ---- a lock held by another process; a reader across the migration -----
# The first migration stops itself (SIGSTOP) with c1's data file written
# and c1's lock held: a second one skips c1, converts c2 and fails; the
# Python handle opened before reads on throughout; the first migration
# then goes on, and a third finds nothing to do.
L="$T/l"
mkstore "$L"
cat > "$T/reader.py" <<'EOF'
import os, sys
import wstore
store, src, go, done = sys.argv[1:5]
want = open(src, "rb").read()
st = wstore.Store(store)
with st.open("c1") as ck, ck.open("big.bin") as f:
    assert f.read(70000, 0) == want[:70000], "bad bytes before"
    open(go + ".ready", "w").close()
    # read on while the migration runs, until the test says it is over
    n = 0
    while not os.path.exists(done) or n < 3:
        for off in (0, 65536 - 7, 131072, 299990):
            assert f.read(20000, off) == want[off:off + 20000], \
                "bad bytes at %d (pass %d)" % (off, n)
        n += 1
        if os.path.exists(done):
            n = max(n, 3)
    assert f.read(None, 0) == want, "bad bytes after"
print("read the right bytes in %d passes" % n)
EOF
pylib() {
	(. "$HERE/lib/pyenv.sh"; pyenv_for "$BUILD_ABS/libwstore.so"
	 PYTHONPATH="$HERE/../python" exec "$@")
}
pylib $PY "$T/reader.py" "$L" "$T/src1/big.bin" "$T/go" "$T/done" \
	> "$T/reader.out" 2>&1 &
READER=$!
wait_for 30 test -e "$T/go.ready"
WSTORE_TEST_MIGRATE_KILL=temp:stop "$W" --store "$L" --quiet admin migrate \
	> "$T/first.out" 2>&1 &
FIRST=$!
stopped() { grep -q '^State:.*T' "/proc/$FIRST/status"; }
if wait_for 30 stopped; then
	tap_ok "a migration stops itself holding c1's lock"
	check_exit "a second migration, c1 locked, exits non-zero" 1 \
		"$W" --store "$L" admin migrate
	check_grep "... naming c1 as busy" \
		"skipped 'c1': busy \(an import, delete, gc or migrate holds its lock\)" \
		"$OUT"
	check_grep "... and saying to run it again" "run it again" "$OUT"
	check_grep "... and converts c2" "converted 'c2'" "$OUT"
	kill -CONT $FIRST
else
	tap_not_ok "a migration stops itself holding c1's lock" \
		"$(cat "$T/first.out")"
	kill -KILL $FIRST 2>/dev/null
fi
check_wait "the first migration then finishes" 0 60 $FIRST
touch "$T/done"
if [ -n "$NEWREAD" ]; then
	check_wait "a Python handle opened before reads the right bytes throughout" \
		0 60 $READER
	check_grep "... (its passes)" "read the right bytes" "$(cat "$T/reader.out")"
else
	wait_exit 60 $READER
	tap_skip "a Python handle opened before reads the right bytes throughout" \
		"$NEWREAD_WHY"
fi
check_exit "a third migration has nothing to do" 0 \
	"$W" --store "$L" admin migrate
check_grep "... both current" "2 already current, 0 skipped" "$OUT"
check_read "... and every checkpoint verifies and pulls" "$L"

# ---- --verify and a damaged chunk --------------------------------------
V="$T/v"
mkstore "$V"
chunk=$(find "$V/weight/models/c1" -path '*/chunks/00000002')
$PY - "$chunk" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[10] ^= 0xff
open(p, "wb").write(bytes(b))
EOF
check_exit "--verify refuses a file whose chunk is damaged (exit 3)" 3 \
	"$W" --store "$V" admin migrate --verify
check_grep "... naming the file" "big.bin' of checkpoint 'c1' does not match its SHA-256" "$OUT"
check "... leaving its chunk files, no data file and no temp file" \
	test -e "$chunk" -a "$(count "$V" tmp)" = 0 \
	-a -z "$(find "$V/weight/models/c1" -name 'data-*')"
check_grep "... and converts the other checkpoint" "converted 'c2'" "$OUT"

# ---- other stores --------------------------------------------------------
check_exit "a store without a file layout: an error" 1 \
	"$W" --store mem admin migrate
check_grep "... saying there is nothing to migrate" \
	"nothing to migrate: the mem store has no file layout" "$OUT"
check_one_line "... in one line" "$OUT"
check_exit "an argument is a usage error" 2 "$W" --store "$S" admin migrate x
check_exit "'wstore help admin migrate' describes it" 0 \
	"$W" help admin migrate
check_grep "... its options" "--dry-run.*" "$OUT"

tap_done
