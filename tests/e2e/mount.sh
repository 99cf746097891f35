#!/bin/sh
# mount.sh - end-to-end tests of `wstore mount` / `wstore umount` (FUSE)
# against a file store: every file byte for byte, concurrent readers, odd
# offsets across chunk boundaries, writes refused, mmap, tensors through
# torch, a second checkpoint appearing, a checkpoint deleted while mounted
# (refused while a file is open; forced, reads fail, never wrong bytes),
# --checkpoint, SIGTERM, umount.
# Needs /dev/fuse and root (or fusermount3); fails loudly without them.
#   BUILD  the build directory holding wstore
TAP_SUITE=mount
. "$(dirname "$0")/../lib/suite.sh"

PY=/usr/bin/python3
MNT="$T/mnt"
MNT2="$T/mnt2"
MNT3="$T/mnt3"
FGPID=
suite_cleanup() {
	[ -n "$FGPID" ] && kill "$FGPID" 2>/dev/null
	suite_unmount "$MNT" "$MNT2" "$MNT3"
}
mkdir -p "$MNT" "$MNT2" "$MNT3"
STORE="$T/store"
ws() { "$W" --store "$STORE" "$@"; }

suite_need_fuse


SRC="$T/src"
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 3000000 --shards 2 >/dev/null
printf '' > "$SRC/empty.txt"
mkdir -p "$SRC/sub/dir"
printf 'nested\n' > "$SRC/sub/dir/x.bin"
CS=1024000	# 1000K chunks: the shards span several
check_exit "import a" 0 ws --quiet model import --checkpoint-id a --model-id Org/M \
	--source "$SRC" --chunk-size 1000K

# ---- mount (daemon) and read everything ---------------------------------
check_exit "mount as a daemon returns once mounted" 0 ws mount "$MNT" --refresh 0.5
MOUNT_OUT=$OUT
check "the mount is listed as fuse.wstore" suite_mounted "$MNT"
# Linux 6.6 and later let shared mmap work on direct-io files, so there a
# store of local files is served with direct I/O by default
kmaj=$(uname -r | cut -d. -f1); kmin=$(uname -r | cut -d. -f2 | tr -cd 0-9)
if [ "$kmaj" -gt 6 ] || { [ "$kmaj" = 6 ] && [ "${kmin:-0}" -ge 6 ]; }; then
	check_grep "the default on a file store is direct I/O (Linux 6.6+)" \
		"mounted 1 checkpoint on '.*' \(direct I/O, chunk files spliced" "$MOUNT_OUT"
else
	check_grep "the default before Linux 6.6 is the page cache" \
		"\(page cache, chunk files spliced" "$MOUNT_OUT"
fi
check_one_line "mounting says one line" "$MOUNT_OUT"
check "the checkpoint is a directory" test -d "$MNT/a"
ok=0; bad=""
for f in $(cd "$SRC" && find . -type f | sed 's|^\./||'); do
	if cmp -s "$SRC/$f" "$MNT/a/$f"; then ok=$((ok + 1)); else bad="$bad $f"; fi
done
if [ -z "$bad" ] && [ "$ok" = 9 ]; then tap_ok "all 9 files equal the source (cmp)"
else tap_not_ok "all files equal the source" "differ or missing:$bad ($ok ok)"; fi
want=$(cd "$SRC" && find . | sed 's|^\./||' | grep -v '^\.$' | sort)
got=$(cd "$MNT/a" && find . | sed 's|^\./||' | grep -v '^\.$' | sort)
if [ "$want" = "$got" ]; then tap_ok "the tree (directories from paths) matches the source"
else tap_not_ok "the tree matches the source" "$(echo "$want" | tr '\n' ' ')" "$(echo "$got" | tr '\n' ' ')"; fi
check_grep "files are 0444, directories 0555" "^444 555 555$" \
	"$(stat -c %a "$MNT/a/config.json" "$MNT/a/sub" "$MNT/a" | tr '\n' ' ' | sed 's/ $//')"
check_grep "sizes come from the manifest" "^$(stat -c %s "$SRC/model-00001-of-00002.safetensors")$" \
	"$(stat -c %s "$MNT/a/model-00001-of-00002.safetensors")"
check "the empty file is empty" test -f "$MNT/a/empty.txt" -a ! -s "$MNT/a/empty.txt"
check_exit "a missing path is ENOENT" 1 cat "$MNT/a/nope"
check_grep "missing path message" "No such file" "$OUT"

# ---- concurrent readers --------------------------------------------------
pids=""
for i in 1 2 3 4; do
	case $i in
	1|3) f=model-00001-of-00002.safetensors ;;
	*) f=model-00002-of-00002.safetensors ;;
	esac
	cmp "$SRC/$f" "$MNT/a/$f" > "$T/conc.$i" 2>&1 &
	pids="$pids $!"
done
fails=0
for p in $pids; do wait_exit 120 "$p" || fails=$((fails + 1)); done
if [ "$fails" = 0 ]; then tap_ok "4 concurrent readers (2 per file) see the source bytes"
else tap_not_ok "4 concurrent readers" "$fails failed: $(cat "$T"/conc.*)"; fi

# ---- odd offsets across chunk boundaries ---------------------------------
F=model-00001-of-00002.safetensors
bad=""
for spec in "0 1" "7 13" "$((CS - 1)) 2" "$((CS - 3)) 70000" "$((CS + 1)) 5" \
	"$((2 * CS - 4097)) 8194" "$((CS - 100)) $((CS + 200))" "$((2 * CS + 12345)) 999999"; do
	set -- $spec
	a=$(dd if="$SRC/$F" iflag=skip_bytes,count_bytes skip="$1" count="$2" bs=65536 2>/dev/null | od -An -tx1 | md5sum)
	b=$(dd if="$MNT/a/$F" iflag=skip_bytes,count_bytes skip="$1" count="$2" bs=65536 2>/dev/null | od -An -tx1 | md5sum)
	[ "$a" = "$b" ] || bad="$bad [$1+$2]"
done
if [ -z "$bad" ]; then tap_ok "reads at odd offsets across chunk boundaries match (dd)"
else tap_not_ok "reads at odd offsets" "differ at$bad"; fi
tail_src=$(tail -c 777 "$SRC/$F" | md5sum); tail_mnt=$(tail -c 777 "$MNT/a/$F" | md5sum)
check_grep "the last bytes of a file match" "^$tail_src$" "$tail_mnt"

# ---- read-only -----------------------------------------------------------
OUT=$(sh -c "echo x > '$MNT/a/config.json'" 2>&1) && tap_not_ok "writing a file is refused" "it succeeded" || tap_ok "writing a file is refused"
check_grep "write error says read-only" "Read-only file system" "$OUT"
check_exit "creating a file is refused" 1 touch "$MNT/a/new"
check_exit "mkdir is refused" 1 mkdir "$MNT/a/d"
check_exit "rm is refused" 1 rm -f "$MNT/a/config.json"
check_exit "chmod is refused" 1 chmod 600 "$MNT/a/config.json"
check "nothing changed" cmp "$SRC/config.json" "$MNT/a/config.json"

# ---- mmap (safetensors loads with mmap) and tensors through torch --------
check_exit "mmap of a file reads the source bytes" 0 $PY -c "
import mmap, sys
with open('$MNT/a/$F', 'rb') as f, open('$SRC/$F', 'rb') as g:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    sys.exit(0 if m[:] == g.read() else 1)"
cat > "$T/tensors.py" <<'EOF'
import json, struct, sys
import torch
DT = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
# random bytes hold NaNs: compare the bits through an integer view
BITS = {torch.float32: torch.int32, torch.float16: torch.int16,
        torch.bfloat16: torch.int16}
def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in hdr.items():
        if name == "__metadata__":
            continue
        s, e = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[s:e]), dtype=DT[t["dtype"]]).reshape(t["shape"])
    return out
n = 0
for shard in sys.argv[3:]:
    a, b = load(sys.argv[1] + "/" + shard), load(sys.argv[2] + "/" + shard)
    assert a.keys() == b.keys(), "tensor names differ"
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert torch.equal(a[k].view(BITS[a[k].dtype]),
                           b[k].view(BITS[b[k].dtype])), k
        n += 1
print("tensors equal:", n)
EOF
if $PY -c "import torch" 2>/dev/null; then
	check_exit "tensors loaded with torch from the mount equal the source's" 0 \
		$PY "$T/tensors.py" "$MNT/a" "$SRC" model-00001-of-00002.safetensors \
		model-00002-of-00002.safetensors
	check_grep "torch compared tensors" "tensors equal: [1-9]" "$OUT"
else
	tap_not_ok "torch is not importable by $PY: cannot load tensors from the mount (apt-get install python3-torch)"
fi

# ---- a second checkpoint appears -----------------------------------------
SRC2="$T/src2"
python3 "$HERE/tools/mkckpt.py" "$SRC2" --size 500000 --shards 1 --seed 7 >/dev/null
check_exit "import b while mounted" 0 ws --quiet model import --checkpoint-id b \
	--model-id Org/N --source "$SRC2" --chunk-size 100K
if wait_for 5 test -d "$MNT/b"; then tap_ok "b shows up as a second directory"
else tap_not_ok "b shows up as a second directory" "ls: $(ls "$MNT")"; fi
check_grep "the root lists a and b" "^a b$" "$(ls "$MNT" | tr '\n' ' ' | sed 's/ $//')"
check "b's shard equals its source" cmp "$SRC2/model-00001-of-00001.safetensors" \
	"$MNT/b/model-00001-of-00001.safetensors"

# ---- --direct-io: reads and shared mmap (safetensors maps MAP_SHARED) -----
# check_shared_mmap MODE: shard $F of the mount at $MNT2, mapped MAP_SHARED,
# holds its source's bytes
check_shared_mmap() {
	check_exit "shared mmap of a $1 file reads the source bytes" 0 $PY -c "
import mmap, sys
with open('$MNT2/$F', 'rb') as f, open('$SRC/$F', 'rb') as g:
    m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    sys.exit(0 if m[:] == g.read() else 1)"
}
check_exit "mount --direct-io" 0 ws mount "$MNT2" --checkpoint a --direct-io
check "a shard read through --direct-io equals its source" \
	cmp "$SRC/model-00001-of-00002.safetensors" "$MNT2/model-00001-of-00002.safetensors"
check_shared_mmap --direct-io
check_exit "umount the --direct-io mount" 0 "$W" umount "$MNT2"

# ---- read size: st_blksize suggests reads the mount serves in one request
max_read=$(grep " $MNT fuse.wstore " /proc/mounts | grep -o 'max_read=[0-9]*' | cut -d= -f2)
blk=$(stat -c %o "$MNT/a/$F")
if [ -n "$max_read" ] && [ "$blk" -ge 65536 ] && [ "$blk" -le "$max_read" ] &&
	[ $((blk & (blk - 1))) = 0 ]; then
	tap_ok "st_blksize ($blk) is a power of two within max_read ($max_read)"
else
	tap_not_ok "st_blksize is a power of two within max_read" "st_blksize '$blk', max_read '$max_read'"
fi
check_exit "a read of st_blksize bytes at a time equals the source" 0 sh -c \
	"dd if='$MNT/a/$F' bs=$blk status=none | cmp - '$SRC/$F'"

# ---- --page-cache: files through the kernel page cache (keep_cache) ------
check_exit "mount --page-cache" 0 ws mount "$MNT2" --checkpoint a --page-cache
check_grep "it says it serves through the page cache" "\(page cache" "$OUT"
check "a shard read through --page-cache equals its source" \
	cmp "$SRC/model-00001-of-00002.safetensors" "$MNT2/model-00001-of-00002.safetensors"
check "a second read (from the page cache) equals its source" \
	cmp "$SRC/model-00001-of-00002.safetensors" "$MNT2/model-00001-of-00002.safetensors"
check_shared_mmap --page-cache
check_exit "umount the --page-cache mount" 0 "$W" umount "$MNT2"
check_exit "--direct-io with --page-cache is a usage error" 2 \
	ws mount "$MNT2" --direct-io --page-cache
check_grep "the error names both" "--direct-io and --page-cache" "$OUT"
check_one_line "the error is one line" "$OUT"
check "nothing was mounted" sh -c "! grep -q ' $MNT2 ' /proc/mounts"

# ---- passthrough: files of one chunk are read by the kernel itself -------
# (Linux 6.9+ and CAP_SYS_ADMIN; the kernel reads the chunk file and the
# daemon is not asked: reads work with the daemon stopped)
SRC3="$T/src3"
python3 "$HERE/tools/mkckpt.py" "$SRC3" --size 6000000 --shards 2 >/dev/null
check_exit "import p with chunks larger than its files" 0 ws --quiet model import \
	--checkpoint-id p --model-id Org/P --source "$SRC3" --chunk-size 8M
# not through ws(): $! must be the daemon itself (wstore execs it)
"$W" --store "$STORE" mount "$MNT2" --checkpoint p -f > "$T/pt.log" 2>&1 &
PTPID=$!
check "mount p (foreground)" wait_for 10 suite_mounted "$MNT2"
pt_ok=0
if [ "$kmaj" -gt 6 ] || { [ "$kmaj" = 6 ] && [ "${kmin:-0}" -ge 9 ]; }; then
	[ "$(id -u)" = 0 ] && pt_ok=1
fi
if [ "$pt_ok" = 1 ]; then
	check_grep "the mount says files of one chunk are passed through" \
		"files of one chunk passed through" "$(cat "$T/pt.log")"
else
	check_grep "the mount says chunk files are spliced (no passthrough here)" \
		"spliced\)" "$(cat "$T/pt.log")"
fi
ok=0; bad=""
for f in $(cd "$SRC3" && ls); do
	if cmp -s "$SRC3/$f" "$MNT2/$f"; then ok=$((ok + 1)); else bad="$bad $f"; fi
done
if [ -z "$bad" ] && [ "$ok" -ge 5 ]; then tap_ok "every file of p equals its source ($ok)"
else tap_not_ok "every file of p equals its source" "differ:$bad ($ok ok)"; fi
cat > "$T/pt.py" <<'EOF'
import mmap, os, signal, sys
mnt, src, pid, pt = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
f = "model-00001-of-00002.safetensors"
want = open(src + "/" + f, "rb").read()
a = os.open(mnt + "/" + f, os.O_RDONLY)
b = os.open(mnt + "/" + f, os.O_RDONLY)   # a second open shares the backing
assert os.pread(a, len(want), 0) == want, "first open: wrong bytes"
os.close(a)
assert os.pread(b, len(want), 0) == want, "second open, after the first closed"
c = os.open(mnt + "/" + f, os.O_RDONLY)
m = mmap.mmap(c, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
assert m[:] == want, "shared mmap: wrong bytes"
m.close()
if pt:
    # passed through: the kernel reads the chunk file, the daemon sleeps
    # (a read the daemon had to answer would wait for SIGCONT)
    import threading
    got = []
    t = threading.Thread(target=lambda: got.append(os.pread(b, 65536, 12345)))
    os.kill(pid, signal.SIGSTOP)
    try:
        t.start()
        t.join(10)
        served_stopped = not t.is_alive()
    finally:
        os.kill(pid, signal.SIGCONT)
    t.join()
    assert served_stopped, "a read waited for the stopped daemon"
    assert got[0] == want[12345:12345 + 65536], "wrong bytes with the daemon stopped"
os.close(b)
os.close(c)
print("ok")
EOF
check_exit "two opens of one file, shared mmap, and (passthrough) a read with the daemon stopped" \
	0 timeout 60 $PY "$T/pt.py" "$MNT2" "$SRC3" "$PTPID" "$pt_ok"
check_grep "the passthrough check ran" "^ok$" "$OUT"
[ "$pt_ok" = 1 ] || tap_skip "passthrough: a read with the daemon stopped" \
	"needs Linux 6.9+ and root (kernel $kmaj.$kmin, uid $(id -u))"
check_exit "umount p" 0 "$W" umount "$MNT2"
wait "$PTPID"; rc=$?
if [ "$rc" = 0 ]; then tap_ok "the foreground daemon exits 0"
else tap_not_ok "the foreground daemon exits 0" "exit $rc" "$(tail -3 "$T/pt.log")"; fi

# ---- --checkpoint: one checkpoint at the root ----------------------------
check_exit "mount --checkpoint b" 0 ws mount "$MNT2" --checkpoint b
check "the root is b's directory" cmp "$SRC2/config.json" "$MNT2/config.json"
check_exit "mount --checkpoint of an absent id fails" 1 ws mount "$MNT3" --checkpoint nope
check_grep "absent id is named" "nope" "$OUT"
check_one_line "the error is one line" "$OUT"
check "no mount is left behind" sh -c "! grep -q ' $MNT3 ' /proc/mounts"
check_exit "umount of --checkpoint mount" 0 "$W" umount "$MNT2"

# ---- delete while mounted: refused while a file is open; forced, reads fail,
# never wrong bytes
cat > "$T/deleted.py" <<'EOF'
import errno, os, subprocess, sys, time
mnt, src, wstore, store, pt = sys.argv[1:6]
f = "model-00001-of-00002.safetensors"
want = open(src + "/" + f, "rb").read()
fd = os.open(mnt + "/a/" + f, os.O_RDONLY)
assert os.pread(fd, 4096, 0) == want[:4096], "bad bytes before delete"
# the open file holds a read lease: a plain delete refuses, --force wins
r = subprocess.run([wstore, "--store", store, "model", "delete", "a"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=60)
assert r.returncode == 1 and "mount by pid" in r.stderr, r.stderr
subprocess.run([wstore, "--store", store, "model", "delete", "a", "--force"],
               check=True, timeout=60, stdout=subprocess.DEVNULL)
deadline, step, failed_read, failed_open = time.time() + 8, 0, False, False
while time.time() < deadline and not (failed_read and failed_open):
    off = (step * 1000003) % (len(want) - 65536)
    step += 1
    try:
        got = os.pread(fd, 65536, off)
        if got != want[off:off + len(got)]:
            print("WRONG BYTES at", off); sys.exit(2)
    except OSError as e:
        if e.errno not in (errno.EIO, errno.ENOENT):
            print("unexpected error", e); sys.exit(3)
        failed_read = True
    try:
        os.close(os.open(mnt + "/a/config.json", os.O_RDONLY))
    except OSError as e:
        if e.errno != errno.ENOENT:
            print("unexpected open error", e); sys.exit(3)
        failed_open = True
    time.sleep(0.05)
print("read failed:", failed_read, "open failed:", failed_open,
      "after %d reads" % step)
# a file passed through (kept whole, passthrough here) reads on, as a
# local file after rm (the fastpaths suite checks the daemon's EIO)
sys.exit(0 if (failed_read or pt == "1") and failed_open else 1)
EOF
pt=0; echo "$MOUNT_OUT" | grep -q 'passed through' && pt=1
check_exit "after delete, reads on an open file fail (EIO/ENOENT) unless passed through and opens give ENOENT, never wrong bytes" \
	0 $PY "$T/deleted.py" "$MNT" "$SRC" "$W" "$STORE" $pt
check_grep "delete check ran" "read failed: $([ $pt = 1 ] && echo '(True|False)' || echo True) open failed: True" "$OUT"
if wait_for 5 sh -c "! test -e '$MNT/a'"; then tap_ok "the deleted checkpoint's directory is gone"
else tap_not_ok "the deleted checkpoint's directory is gone" "ls: $(ls "$MNT")"; fi
check "b is still readable" cmp "$SRC2/config.json" "$MNT/b/config.json"

# ---- a flat directory of many files, the same names one level down -------
# (names are looked up by (directory, name) in a hash: every file is found
# in its own directory, never one of the same name elsewhere)
FLAT="$T/flat"
python3 "$HERE/tools/mkckpt.py" "$FLAT" --size 20000 --shards 1 >/dev/null
$PY - "$FLAT" <<'EOF'
import os, sys
d = sys.argv[1]
os.makedirs(d + "/sub")
for i in range(3000):
    open("%s/f%05d.json" % (d, i), "w").write('{"top": %d}' % i)
    if i % 10 == 0:
        open("%s/sub/f%05d.json" % (d, i), "w").write('{"sub": %d}' % i)
EOF
nflat=$(find "$FLAT" -type f | wc -l)
check_exit "import a checkpoint of 3000 files in one directory" 0 ws --quiet \
	model import --checkpoint-id flat --model-id Org/F --source "$FLAT"
cat > "$T/flat.py" <<'EOF'
import os, sys
mnt, src = sys.argv[1], sys.argv[2]
n = 0
for root, dirs, files in os.walk(src):
    rel = os.path.relpath(root, src)
    got = sorted(os.listdir(os.path.join(mnt, rel)))
    want = sorted(dirs + files)
    assert got == want, "listing of %s differs" % rel
    # every name is looked up (stat); every 50th file is read too
    for i, f in enumerate(sorted(files)):
        a, b = os.path.join(root, f), os.path.join(mnt, rel, f)
        assert os.stat(a).st_size == os.stat(b).st_size, "%s/%s: size" % (rel, f)
        if i % 50 == 0:
            assert open(a, "rb").read() == open(b, "rb").read(), "%s/%s" % (rel, f)
        n += 1
print("files found:", n)
EOF
if wait_for 10 test -d "$MNT/flat"; then
	check_exit "every file of the flat directory (and its namesakes in sub/) is found, with its own size and bytes" \
		0 timeout 120 $PY "$T/flat.py" "$MNT/flat" "$FLAT"
	check_grep "all $nflat files were found" "files found: $nflat\$" "$OUT"
else
	tap_not_ok "the flat checkpoint shows up" "ls: $(ls "$MNT")"
fi

# ---- umount ---------------------------------------------------------------
check_exit "umount of a directory that is no wstore mount fails" 1 "$W" umount "$T"
check_grep "says it is no wstore mount" "not a wstore mount" "$OUT"
check_exit "wstore umount" 0 "$W" umount "$MNT"
check "the mount is gone" sh -c "! grep -q ' $MNT ' /proc/mounts"
check_grep "the mountpoint is empty" "^$" "$(ls -A "$MNT")"

# ---- foreground, SIGTERM unmounts cleanly --------------------------------
"$W" --store "$STORE" mount "$MNT3" --foreground 2> "$T/fg.log" &
FGPID=$!
if wait_for 5 suite_mounted "$MNT3" && wait_for 5 test -d "$MNT3/b"; then tap_ok "mount --foreground serves"
else tap_not_ok "mount --foreground serves" "$(cat "$T/fg.log")"; fi
kill -TERM "$FGPID"
wait_exit 10 "$FGPID"; rc=$?
FGPID=
check_grep "SIGTERM: the foreground mount exits 0" "^0$" "$rc"
check "SIGTERM: the mount is gone" sh -c "! grep -q ' $MNT3 ' /proc/mounts"

# ---- SIGTERM at once after mounting, on a busy machine --------------------
# The daemon must never wait on its own mount: 20 cycles with two CPU hogs,
# SIGTERM as soon as the mount shows in /proc/mounts; each exits 0 in 10 s.
HOGS=""
for i in 1 2; do
	sh -c 'while :; do :; done' &
	HOGS="$HOGS $!"
done
bad=""
for i in $(seq 1 20); do
	"$W" --store "$STORE" mount "$MNT3" --foreground --refresh 0.2 \
		2> "$T/fg.$i.log" &
	FGPID=$!
	wait_for 10 suite_mounted "$MNT3" || bad="$bad [$i: not mounted]"
	kill -TERM "$FGPID" 2>/dev/null
	wait_exit 10 "$FGPID"; rc=$?
	FGPID=
	[ "$rc" = 0 ] || bad="$bad [$i: exit $rc: $(head -c 200 "$T/fg.$i.log")]"
	if suite_mounted "$MNT3"; then
		bad="$bad [$i: still mounted]"
		"$W" umount "$MNT3" 2>/dev/null || umount -l "$MNT3" 2>/dev/null
	fi
done
for p in $HOGS; do kill "$p" 2>/dev/null; done
for p in $HOGS; do wait_exit 5 "$p" >/dev/null; done
if [ -z "$bad" ]; then tap_ok "20 mount + immediate SIGTERM cycles under load each exit 0 within 10 s"
else tap_not_ok "20 mount + immediate SIGTERM cycles under load" "$bad"; fi
check_exit "a bad option is a usage error" 2 ws mount "$MNT3" --bogus
check_exit "a mountpoint that is no directory fails" 1 ws mount "$T/nope"

tap_done
