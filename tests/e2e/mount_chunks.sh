#!/bin/sh
# mount_chunks.sh - reads through `wstore mount` are complete at small and
# odd chunk sizes, in every mode: a read spanning many chunks (more than a
# reply gathers at once) returns every byte asked for, by pread, a whole
# read and a shared mmap, on the default mount (direct I/O, chunk files
# spliced), --page-cache, --direct-io, a store that is no local files
# (replies copied from the daemon's cache) and files of one chunk
# (passed through where the kernel allows), chunks as small as 1 byte, and
# a store whose every file is one chunk, passed through (checked with the
# daemon stopped) or, where the kernel or privileges do not allow it,
# skipped with the reason.
# Needs /dev/fuse and root (or fusermount3).
#   BUILD  the build directory holding wstore
TAP_SUITE=mount-chunks
. "$(dirname "$0")/../lib/suite.sh"
PY=/usr/bin/python3
MNT="$T/mnt"
suite_cleanup() {
	suite_unmount "$MNT"
}
mkdir -p "$MNT"
STORE="$T/store"

suite_need_fuse

# big.bin spans hundreds of chunks at these sizes; small.bin is one chunk
SRC="$T/src"
mkdir -p "$SRC"
$PY - "$SRC" <<'EOF'
import random, sys
r = random.Random(26)
open(sys.argv[1] + "/big.bin", "wb").write(r.randbytes(6000037))
open(sys.argv[1] + "/small.bin", "wb").write(r.randbytes(3001))
open(sys.argv[1] + "/config.json", "w").write('{"model_type": "test"}\n')
EOF

# read.py MNT SRC CS: every way of reading gets every byte
cat > "$T/read.py" <<'EOF'
import mmap, os, sys
mnt, src, cs = sys.argv[1], sys.argv[2], int(sys.argv[3])
for name in ("big.bin", "small.bin"):
    want = open(src + "/" + name, "rb").read()
    fd = os.open(mnt + "/" + name, os.O_RDONLY)
    n = len(want)
    for off, size in ((0, n), (0, 4 << 20), (12345, (1 << 20) + 7),
                      (n // 3, 2 << 20), (n - 70001, 1 << 20), (1, 16 << 20),
                      (cs - 1, 1 << 20), (cs // 2, 3 << 20), (cs + 1, n)):
        off = max(0, min(off, n))
        got = os.pread(fd, size, off)
        exp = want[off:off + size]
        if got != exp:
            print("%s: pread(%d, %d) gave %d bytes, wanted %d%s" %
                  (name, size, off, len(got), len(exp),
                   "" if len(got) != len(exp) else " (wrong bytes)"))
            sys.exit(1)
    os.close(fd)
    with open(mnt + "/" + name, "rb") as f:
        got = f.read()
    if got != want:
        print("%s: a whole read gave %d bytes, wanted %d" % (name, len(got), n))
        sys.exit(1)
    with open(mnt + "/" + name, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        ok = m[:] == want
        m.close()
    if not ok:
        print("%s: shared mmap gave other bytes" % name)
        sys.exit(1)
print("ok")
EOF

# check_mode LABEL STORE_URL [MOUNT OPTIONS...]: mount, read, unmount
check_mode() {
	label=$1; url=$2; shift 2
	if ! OUT=$("$W" --store "$url" mount "$MNT" --checkpoint c "$@" 2>&1); then
		tap_not_ok "$label: mounts" "$OUT"
		return
	fi
	# a SIGBUS (mmap of a short file) shows as a status above 128
	check_exit "$label: pread, read and mmap get every byte" 0 \
		timeout 120 $PY "$T/read.py" "$MNT" "$SRC" "$cs"
	check_exit "$label: unmounts" 0 "$W" umount "$MNT"
}

for cs in ${CHUNK_SIZES:-4096 12345 16384 65536 100003}; do
	rm -rf "$STORE"
	check_exit "import with $cs-byte chunks" 0 "$W" --store "$STORE" --quiet \
		model import --checkpoint-id c --model-id Org/C --source "$SRC" \
		--chunk-size "$cs"
	check_mode "$cs-byte chunks, default mount" "$STORE"
	check_mode "$cs-byte chunks, --page-cache" "$STORE" --page-cache
	check_mode "$cs-byte chunks, --direct-io" "$STORE" --direct-io
	# fault+ (no faults): not local files, so no splicing: replies are
	# copied from the daemon's chunk buffers
	check_mode "$cs-byte chunks, a store of no local files" "fault+$STORE"
	check_mode "$cs-byte chunks, no local files, --direct-io" "fault+$STORE" \
		--direct-io
done

# ---- the smallest chunk sizes the format allows ---------------------------
# (1 byte and up): a 70001-byte file, a read of it spanning tens of
# thousands of chunks
TINY="$T/tiny"
mkdir -p "$TINY"
head -c 70001 "$SRC/big.bin" > "$TINY/big.bin"
head -c 301 "$SRC/small.bin" > "$TINY/small.bin"
for cs in ${TINY_CHUNK_SIZES:-1 511}; do
	rm -rf "$STORE"
	check_exit "import a 70001-byte file with $cs-byte chunks" 0 "$W" \
		--store "$STORE" --quiet model import --checkpoint-id c \
		--model-id Org/C --source "$TINY" --chunk-size "$cs" --force
	SRC_KEEP=$SRC SRC=$TINY
	check_mode "$cs-byte chunks, default mount" "$STORE"
	check_mode "$cs-byte chunks, --page-cache" "$STORE" --page-cache
	check_mode "$cs-byte chunks, a store of no local files" "fault+$STORE"
	SRC=$SRC_KEEP
done

# ---- passthrough: every file one chunk, read by the kernel itself ---------
# (Linux 6.9+ and CAP_SYS_ADMIN; elsewhere the mount says its files are
# served by the daemon, and the passthrough checks are skipped)
cs=8388608
rm -rf "$STORE"
check_exit "import with $cs-byte chunks (every file one chunk)" 0 "$W" \
	--store "$STORE" --quiet model import --checkpoint-id c \
	--model-id Org/C --source "$SRC" --chunk-size "$cs"
# not through a wrapper: $! must be the daemon itself (wstore execs it)
"$W" --store "$STORE" mount "$MNT" --checkpoint c --foreground > "$T/pt.log" 2>&1 &
PTPID=$!
if wait_for 10 grep -q " $MNT fuse" /proc/mounts &&
	wait_for 10 grep -q 'mounted' "$T/pt.log"; then
	if grep -q 'files of one chunk passed through' "$T/pt.log"; then
		check_exit "passthrough: pread, read and mmap get every byte" 0 \
			timeout 120 $PY "$T/read.py" "$MNT" "$SRC" "$cs"
		# a file passed through is read with the daemon stopped (one
		# the daemon answers would wait for SIGCONT)
		check_exit "passthrough in use: a 4 MiB read with the daemon stopped" 0 \
			timeout 60 $PY "$HERE/tools/stopped_read.py" "$MNT" "$SRC" "$PTPID" big.bin 12345 4194304
	else
		tap_skip "passthrough: reads of files passed through" \
			"not available here: $(grep mounted "$T/pt.log" | head -1)"
	fi
	check_exit "passthrough mount: unmounts" 0 "$W" umount "$MNT"
else
	tap_not_ok "mount with $cs-byte chunks" "$(tail -3 "$T/pt.log")"
fi
wait_exit 10 "$PTPID"; rc=$?
check_grep "... the daemon exits 0" '^0$' "$rc"

tap_done
