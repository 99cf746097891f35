#!/bin/sh
# layouts.sh - the file store's layouts end to end (docs/format.md, "The
# embedded file store"):
#  - an import writes one data file per checkpoint file, the file's exact
#    bytes, and no chunk file;
#  - a store holding both layouts (a checkpoint rewritten as chunk files,
#    as an older wstore wrote it, then a new import) verifies, pulls, lists
#    no orphan to gc, and deletes to nothing;
#  - a data file opened before `delete --force` and a re-import of the id
#    keeps reading the bytes of the import it opened (rename publication);
#  - an import killed by SIGKILL mid-file leaves only temp files, which gc
#    removes, and the id imports again;
#  - --reflink: on a loop-mounted XFS image made with reflink=1 (root and
#    mkfs.xfs needed, else skipped and counted), always clones (shared
#    extents, no space used), never writes; always fails in one line for a
#    source on another file system and on a store of chunks.
TAP_SUITE=layouts
. "$(dirname "$0")/../lib/suite.sh"

S=$T/store
SRC=$T/src
ws() { "$W" --store "$S" "$@"; }
XFS=
suite_cleanup() { [ -z "$XFS" ] || umount "$XFS" 2>/dev/null || umount -l "$XFS"; }

python3 "$HERE/tools/mkckpt.py" "$SRC" --size 200000 --shards 2 >/dev/null
mkdir -p "$SRC/sub" && printf '0123456789' > "$SRC/sub/x.bin" && : > "$SRC/empty.txt"
NFILES=$(find "$SRC" -type f -size +0 | wc -l)

# same_bytes ID SRC: every file of ID's manifest has a data file (the
# manifest's key + /data-<chunk_size>) holding exactly the source's bytes
same_bytes() {
	python3 - "$S" "$1" "$2" <<'EOF'
import json, os, sys
root, cid, src = sys.argv[1:]
m = json.load(open(os.path.join(root, "weight/models", cid, "manifest")))
for f in m["files"]:
    want = open(os.path.join(src, f["path"]), "rb").read()
    data = os.path.join(root, f["key"], "data-%d" % f["chunk_size"])
    if not want:
        assert not os.path.exists(data), data
        continue
    assert open(data, "rb").read() == want, data
EOF
}
# old_layout ID: rewrite ID's data files as the chunk files an older
# wstore wrote (<ph>/chunks/<i>), removing them
old_layout() {
	python3 - "$S/weight/models/$1" <<'EOF'
import os, sys
for d, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        if not f.startswith("data-"):
            continue
        cs = int(f[5:])
        b = open(os.path.join(d, f), "rb").read()
        os.makedirs(os.path.join(d, "chunks"))
        for i in range(0, len(b), cs):
            open(os.path.join(d, "chunks", "%08d" % (i // cs)), "wb").write(b[i:i + cs])
        os.unlink(os.path.join(d, f))
EOF
}
count() { find "$S/weight/models/$1" "$@" 2>/dev/null | wc -l; }
n_data() { find "$S/weight/models/$1" -name 'data-*' -type f 2>/dev/null | wc -l; }
n_chunkfiles() { find "$S/weight/models/$1" -path '*/chunks/*' -type f 2>/dev/null | wc -l; }
n_tmp() { find "$S/weight/models/$1" -name '.tmp-*' 2>/dev/null | wc -l; }

# ---- one data file per checkpoint file ------------------------------------
check_exit "import" 0 ws model import --checkpoint-id a --model-id Org/A --source "$SRC" --chunk-size 16K
check "one data file per non-empty file ($(n_data a) of $NFILES), no chunk file" \
	test "$(n_data a)" = "$NFILES" -a "$(n_chunkfiles a)" = 0
check "each data file holds exactly its file's bytes" same_bytes a "$SRC"
check_exit "it verifies" 0 ws model verify a

# ---- both layouts in one store --------------------------------------------
old_layout a
check "a rewritten as chunk files" test "$(n_data a)" = 0 -a "$(n_chunkfiles a)" -gt "$NFILES"
check_exit "import b into the store of the old layout" 0 ws model import --checkpoint-id b \
	--model-id Org/B --source "$SRC" --chunk-size 16K
check "b is written as data files" test "$(n_data b)" = "$NFILES" -a "$(n_chunkfiles b)" = 0
check_exit "a (chunk files) verifies" 0 ws model verify a
check_exit "b (data files) verifies" 0 ws model verify b
check_exit "pull a" 0 ws model pull a --dest "$T/pa"
check "pulled a equals the source" diff -r "$SRC" "$T/pa"
check_exit "pull b" 0 ws model pull b --dest "$T/pb"
check "pulled b equals the source" diff -r "$SRC" "$T/pb"
check_exit "materialize-file from b" 0 ws model materialize-file b \
	--path model-00001-of-00002.safetensors --output "$T/m1"
check "materialized bytes equal the source" cmp "$T/m1" "$SRC/model-00001-of-00002.safetensors"
check_exit "gc --dry-run" 0 ws admin gc --dry-run --grace 0
check "gc finds no orphan in either layout" sh -c "! printf '%s' \"\$1\" | grep -Eq 'orphan +weight'" - "$OUT"
check_grep "... and says so" " 0 orphans" "$OUT"
check_exit "delete a" 0 ws model delete a
check_exit "delete b" 0 ws model delete b
check "nothing left of a or b" test ! -e "$S/weight/models/a" -a ! -e "$S/weight/models/b"

# ---- a reader keeps the bytes of the import it opened ---------------------
SRC2=$T/src2
python3 "$HERE/tools/mkckpt.py" "$SRC2" --size 200000 --shards 2 --seed 7 >/dev/null
F=model-00001-of-00002.safetensors
ws model import --checkpoint-id r --model-id Org/R --source "$SRC" --chunk-size 16K >/dev/null
DF=$(find "$S/weight/models/r" -name 'data-*' -size +50k | head -1)
exec 3<"$DF"
check_exit "delete --force while the data file is open" 0 ws model delete --force r
check_exit "import r again, other bytes" 0 ws model import --checkpoint-id r --model-id Org/R \
	--source "$SRC2" --chunk-size 16K
cat <&3 >"$T/held"
exec 3<&-
check "the open data file still reads the first import's bytes" sh -c \
	"cmp -s '$T/held' '$SRC/$F' || cmp -s '$T/held' '$SRC/model-00002-of-00002.safetensors'"
check "the new import's data file holds the new bytes" same_bytes r "$SRC2"
ws model delete r >/dev/null

# ---- a torn import ---------------------------------------------------------
BIG=$T/big
mkdir -p "$BIG" && printf '{}' > "$BIG/config.json"
head -c $((48 << 20)) /dev/urandom > "$T/rand"
for i in 1 2 3 4 5 6 7 8; do cat "$T/rand"; done > "$BIG/big.bin"
rm "$T/rand"
has_tmp() { [ "$(n_tmp torn)" -gt 0 ]; }
torn=0
for try in 1 2 3; do
	# the binary itself, not the ws function (whose subshell $! would be)
	"$W" --store "$S" model import --checkpoint-id torn --model-id Org/T --source "$BIG" \
		--force --jobs 1 --reflink never >/dev/null 2>&1 &
	pid=$!
	if wait_for 60 has_tmp && kill -KILL $pid 2>/dev/null; then
		wait $pid 2>/dev/null
		torn=1
		break
	fi
	wait_exit 60 $pid
	ws model delete torn >/dev/null 2>&1
done
if [ $torn = 1 ]; then
	check "killed mid-file: only temp files, no data file ($(n_tmp torn) temp)" \
		test "$(n_data torn)" = 0 -a "$(n_chunkfiles torn)" = 0 -a "$(n_tmp torn)" -gt 0
	check "and no manifest" test ! -e "$S/weight/models/torn/manifest"
	check_exit "gc --grace 0" 0 ws admin gc --grace 0
	check "gc removed the temp files" test "$(n_tmp torn)" = 0
	check_exit "the id imports again" 0 ws model import --checkpoint-id torn --model-id Org/T \
		--source "$BIG" --force
	check_exit "and verifies" 0 ws model verify torn
	ws model delete torn >/dev/null
else
	tap_skip "kill -9 mid-import" "the import finished before a temp file was seen, 3 times"
fi
rm -rf "$BIG"

# ---- reflink ---------------------------------------------------------------
check_exit "--reflink with a bad value is a usage error" 2 ws model import --checkpoint-id x \
	--model-id M --source "$SRC" --reflink sometimes
check_grep "naming the value" "invalid --reflink 'sometimes'" "$OUT"
check_exit "--reflink always on a store of chunks" 1 "$W" --store mem model import \
	--checkpoint-id x --model-id M --source "$SRC" --reflink always
check_grep "is refused naming the store" "^wstore: --reflink always: the mem store keeps chunks" "$OUT"
check_one_line "in one line" "$OUT"
why=
if [ "$(id -u)" != 0 ]; then why="not root: cannot mount an XFS image"
elif ! command -v mkfs.xfs >/dev/null; then why="mkfs.xfs (xfsprogs) is not installed"
else
	truncate -s 400M "$T/xfs.img" && mkdir -p "$T/xfs" &&
		mkfs.xfs -q -m reflink=1 "$T/xfs.img" 2>"$T/mkfs.err" &&
		mount -o loop "$T/xfs.img" "$T/xfs" 2>"$T/mount.err" && XFS=$T/xfs ||
		why="cannot make a loop-mounted XFS image: $(cat "$T/mkfs.err" "$T/mount.err" 2>/dev/null | head -1)"
fi
if [ -z "$why" ]; then
	XS=$XFS/store XSRC=$XFS/src
	mkdir -p "$XSRC" && printf '{}' > "$XSRC/config.json"
	head -c $((32 << 20)) /dev/urandom > "$XSRC/w.bin"
	xws() { "$W" --store "$XS" "$@"; }
	used() { df -k --output=used "$XFS" | tail -1; }
	shared() { filefrag -v "$1" 2>/dev/null | grep -c shared; }
	sync
	u0=$(used)
	check_exit "import --reflink always from the same XFS" 0 xws model import --checkpoint-id c \
		--model-id Org/C --source "$XSRC" --force --reflink always
	u1=$(used)
	XD=$(find "$XS/weight/models/c" -name 'data-*' -size +1M | head -1)
	check "the data file shares the source's extents ($(shared "$XD"))" test "$(shared "$XD")" -gt 0
	check "the clone used no space for the data ($((u1 - u0)) KiB)" test $((u1 - u0)) -lt 8192
	check "its bytes are the source's" cmp "$XD" "$XSRC/w.bin"
	check_exit "the cloned checkpoint verifies" 0 xws model verify c
	# the source written to (the same byte: only its mtime changes)
	# after its clone, while it is hashed: the import fails
	cat > "$T/change.py" <<'EOF'
import os, sys
import wstore
store, src = sys.argv[1:3]
w = os.path.join(src, "w.bin")
seen = []


def cb(done, total, path):
    if not seen and path == "w.bin":
        seen.append(1)
        with open(w, "r+b") as fh:
            b = fh.read(1)
            fh.seek(0)
            fh.write(b)
    return False


try:
    wstore.Store(store).import_(src, "chg", "Org/C", force=True,
                                reflink="always", progress=cb)
except wstore.WstoreError as e:
    print(e)
    sys.exit(0 if seen else 3)
print("imported")
sys.exit(1)
EOF
	BUILD_ABS=$(cd "$BUILD" && pwd)
	if ldd "$BUILD_ABS/libwstore.so" 2>/dev/null | grep -q libtsan; then
		tap_skip "a source written to while its clone is hashed" \
			"the Python interpreter cannot load a ThreadSanitizer build"
	else
	check_exit "a source written to while its clone is hashed fails the import" 0 \
		sh -c '. "$1/lib/pyenv.sh"; pyenv_for "$2/libwstore.so"
			PYTHONPATH="$1/../python" exec /usr/bin/python3 "$3" "$4" "$5"' - \
		"$HERE" "$BUILD_ABS" "$T/change.py" "$XS" "$XSRC"
	check_grep "... saying the source changed while it was cloned" \
		"source file '.*w.bin' changed while it was cloned into the store" "$OUT"
	check "... and leaves no data or temp file of it" test "$(find "$XS/weight/models/chg" \
		\( -name '.tmp-*' -o -name 'data-*' \) 2>/dev/null | wc -l)" = 0
	fi
	check_exit "import --reflink never" 0 xws model import --checkpoint-id n \
		--model-id Org/C --source "$XSRC" --force --reflink never
	ND=$(find "$XS/weight/models/n" -name 'data-*' -size +1M | head -1)
	check "never writes the bytes (no shared extent)" test "$(shared "$ND")" = 0
	check_exit "import with the default (auto) from another file system" 0 xws model import \
		--checkpoint-id o --model-id Org/C --source "$SRC"
	check_exit "and it verifies" 0 xws model verify o
	check_exit "--reflink always from another file system fails" 1 xws model import \
		--checkpoint-id p --model-id Org/C --source "$SRC" --reflink always
	check_grep "naming the file and why" \
		"^wstore: cannot clone '$SRC/[^']+' into the store \(--reflink always\): .*different file systems" "$OUT"
	check_one_line "in one line" "$OUT"
	check "and leaves no temp or data file of p" test "$(find "$XS/weight/models/p" \
		\( -name '.tmp-*' -o -name 'data-*' \) 2>/dev/null | wc -l)" = 0
	umount "$XFS" && XFS=
else
	tap_skip "--reflink on a copy-on-write file system" "$why"
fi

tap_done
