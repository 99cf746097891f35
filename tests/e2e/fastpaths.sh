#!/bin/sh
# fastpaths.sh - the front ends on files the embedded store keeps whole, in one
# file of its own (a file the store keeps whole, or today a file of one
# chunk: imported with a --chunk-size at least its size).
# - pull and materialize-file put such a file in place without reading it
#   through the process: FICLONE on a copy-on-write filesystem (a
#   loop-mounted XFS image with reflink, as root: no extra space used),
#   else, for pull --no-verify, copy_file_range (the normal filesystem
#   here), else (verified, or another filesystem: copy_file_range refuses)
#   the bytes streamed as before; the calls are seen with strace;
# - a file kept in chunk files is streamed as before;
# - the mount passes a file of several chunks through when the store keeps
#   it whole (skipped while the store keeps chunk files);
# - serve answers range requests across chunk boundaries byte for byte,
#   on a file of one chunk (sendfile of one fd) and of several.
#   BUILD  the build directory holding wstore
TAP_SUITE=fastpaths
. "$(dirname "$0")/../lib/suite.sh"
. "$HERE/lib/serve.sh"
PY=/usr/bin/python3
XFS="$T/xfs"
MNT="$T/mnt"
LOOPIMG="$T/xfs.img"
suite_cleanup() {
	suite_unmount "$MNT"
	serve_stop_all
	if grep -q " $XFS xfs " /proc/mounts 2>/dev/null; then
		umount "$XFS" 2>/dev/null || umount -l "$XFS" 2>/dev/null
	fi
}
mkdir -p "$MNT" "$XFS"

# mksrc DIR: a checkpoint of big.bin (3 MiB and a bit), small.bin, a config
mksrc() {
	mkdir -p "$1"
	$PY -c '
import sys
d = sys.argv[1]
open(d + "/big.bin", "wb").write(bytes((i * 131 + i // 1021) & 255 for i in range(3 * 1048576 + 4321)))
open(d + "/small.bin", "wb").write(bytes((i * 7) & 255 for i in range(70000)))
open(d + "/config.json", "w").write("{\"a\": 1}\n")' "$1"
}
SRC="$T/src"
mksrc "$SRC"
STORE="file://$T/store"
imp() { # STORE ID CHUNK_SIZE
	"$W" --store "$1" --quiet model import --checkpoint-id "$2" \
		--model-id "Org/$2" --source "$SRC" --chunk-size "$3"
}
# kept_whole ROOT ID: the store keeps ID's files in data files
kept_whole() { ls "$1"/weight/models/"$2"/files/*/data-* >/dev/null 2>&1; }

HAVE_STRACE=0
command -v strace >/dev/null && HAVE_STRACE=1
# traced OUT CMD...: CMD under strace, its FICLONE and copy_file_range calls
# in OUT
traced() {
	_o=$1; shift
	# one output file per thread (-ff): no call split in two lines
	rm -f "$_o".raw.*
	strace -ff -qq -e trace=ioctl,copy_file_range -o "$_o.raw" "$@" &&
		cat "$_o".raw.* | grep -E 'FICLONE|copy_file_range' > "$_o"
	_rc=$?
	[ $_rc -le 1 ] && return 0
	return $_rc
}

check_exit "import with 8 MiB chunks (every file one chunk)" 0 \
	imp "$STORE" one 8MiB
check_exit "import with 1 MiB chunks" 0 imp "$STORE" many 1MiB

# ---- pull on the normal filesystem ---------------------------------------
BIG=$(stat -c %s "$SRC/big.bin")
CLONES=0
if [ $HAVE_STRACE = 1 ]; then
	check_exit "pull of one-chunk files under strace" 0 \
		traced "$T/p1.tr" "$W" --store "$STORE" model pull one --dest "$T/p1"
	check "... the tree equals the source" diff -r "$SRC" "$T/p1"
	check_grep "... FICLONE tried" 'FICLONE' "$(cat "$T/p1.tr")"
	grep -q 'FICLONE.*= 0' "$T/p1.tr" && CLONES=1
	# verified: cloned where this filesystem clones (btrfs, XFS), else
	# streamed (hashed while copied), never copy_file_range and a read back
	check "... verified: cloned or streamed, no copy_file_range" \
		sh -c "! grep -q copy_file_range '$T/p1.tr'"
	check_exit "pull --no-verify of one-chunk files under strace" 0 \
		traced "$T/p2.tr" "$W" --store "$STORE" model pull one --dest "$T/p2" --no-verify
	check "... the tree equals the source" diff -r "$SRC" "$T/p2"
	if [ $CLONES = 1 ]; then
		check_grep "... cloned" 'FICLONE.*= 0' "$(cat "$T/p2.tr")"
		tap_skip "... copy_file_range after a refused FICLONE" \
			"this filesystem clones ($(stat -f -c %T "$T"))"
	else
		check_grep "... FICLONE refused here, copy_file_range copied big.bin" \
			"copy_file_range\(.*, $BIG, 0\) = $BIG" "$(cat "$T/p2.tr")"
	fi
	check_exit "materialize-file of a one-chunk file under strace" 0 \
		traced "$T/m1.tr" "$W" --store "$STORE" model materialize-file one \
		--path big.bin --output "$T/m1.bin"
	check "... the file equals the source" cmp "$SRC/big.bin" "$T/m1.bin"
	check "... cloned or streamed, no copy_file_range" \
		sh -c "grep -q 'FICLONE' '$T/m1.tr' && ! grep -q copy_file_range '$T/m1.tr'"
	check_exit "pull --no-verify of 1 MiB-chunk files under strace" 0 \
		traced "$T/p3.tr" "$W" --store "$STORE" model pull many --dest "$T/p3" --no-verify
	check "... the tree equals the source" diff -r "$SRC" "$T/p3"
	if kept_whole "$T/store" many; then
		check_grep "... kept whole: big.bin cloned or copied by the kernel" \
			"FICLONE.*= 0|copy_file_range\(.*, $BIG, 0\) = $BIG" "$(cat "$T/p3.tr")"
	else
		# big.bin is in chunk files: streamed (small.bin and the config
		# are one chunk each and may be copied)
		check "... chunk files: big.bin streamed, no copy of its size" \
			sh -c "! grep -q 'copy_file_range(.*, $BIG, 0)' '$T/p3.tr'"
	fi
	check_exit "pull of 1 MiB-chunk files (verified)" 0 \
		"$W" --store "$STORE" model pull many --dest "$T/p3v"
	check "... the tree equals the source" diff -r "$SRC" "$T/p3v"
else
	for c in "pull" "pull --no-verify" "materialize-file" "pull --no-verify of chunk files"; do
		tap_skip "$c: FICLONE or copy_file_range" "strace is not installed"
	done
	check_exit "pull of one-chunk files" 0 "$W" --store "$STORE" model pull one --dest "$T/p1"
	check "... the tree equals the source" diff -r "$SRC" "$T/p1"
fi
# a damaged store file is caught by the digest of what was copied
check_exit "verify of the one-chunk import" 0 "$W" --store "$STORE" model verify one

# ---- a loop-mounted XFS with reflink -------------------------------------
xfs_why=""
if [ "$(id -u)" != 0 ]; then
	xfs_why="not root: cannot mount an XFS image"
elif ! command -v mkfs.xfs >/dev/null; then
	xfs_why="mkfs.xfs is not installed (xfsprogs)"
elif [ $HAVE_STRACE = 0 ]; then
	xfs_why="strace is not installed"
elif ! truncate -s 512M "$LOOPIMG" ||
	! mkfs.xfs -q -m reflink=1 "$LOOPIMG" >/dev/null 2>&1 ||
	! mount -o loop "$LOOPIMG" "$XFS" 2>"$T/mount.err"; then
	xfs_why="cannot make and loop-mount an XFS image: $(head -1 "$T/mount.err" 2>/dev/null)"
fi
if [ -z "$xfs_why" ]; then
	XSTORE="file://$XFS/store"
	check_exit "XFS: import with 8 MiB chunks" 0 imp "$XSTORE" one 8MiB
	sync
	used0=$(df -k --output=used "$XFS" | tail -1)
	check_exit "XFS: pull onto the store's filesystem under strace" 0 \
		traced "$T/x1.tr" "$W" --store "$XSTORE" model pull one --dest "$XFS/p1"
	check "XFS: ... the tree equals the source" diff -r "$SRC" "$XFS/p1"
	check_grep "XFS: ... every file cloned (FICLONE = 0)" \
		'FICLONE.*= 0' "$(cat "$T/x1.tr")"
	check "XFS: ... no FICLONE refused, no copy_file_range" \
		sh -c "! grep -qE 'FICLONE.*= -1|copy_file_range' '$T/x1.tr'"
	sync
	used1=$(df -k --output=used "$XFS" | tail -1)
	check "XFS: ... no space used for the data ($used0 KiB -> $used1 KiB, big.bin is 3 MiB)" \
		test $((used1 - used0)) -lt 1024
	check_grep "XFS: ... big.bin's extents are shared with the store" \
		'0x[0-9a-f]*2[0-9a-f]{3}$' \
		"$(xfs_io -r -c 'fiemap -v' "$XFS/p1/big.bin" | awk 'NR > 2 { print $NF }')"
	check_exit "XFS: pull --no-verify under strace" 0 \
		traced "$T/x2.tr" "$W" --store "$XSTORE" model pull one --dest "$XFS/p2" --no-verify
	check "XFS: ... the tree equals the source" diff -r "$SRC" "$XFS/p2"
	check_grep "XFS: ... cloned" 'FICLONE.*= 0' "$(cat "$T/x2.tr")"
	check_exit "XFS: materialize-file under strace" 0 \
		traced "$T/x3.tr" "$W" --store "$XSTORE" model materialize-file one \
		--path big.bin --output "$XFS/m.bin"
	check "XFS: ... the file equals the source" cmp "$SRC/big.bin" "$XFS/m.bin"
	check_grep "XFS: ... cloned" 'FICLONE.*= 0' "$(cat "$T/x3.tr")"
	# another filesystem: FICLONE and copy_file_range (tried unverified)
	# refuse (EXDEV), the bytes are streamed
	check_exit "XFS store, pull --no-verify onto another filesystem under strace" 0 \
		traced "$T/x4.tr" "$W" --store "$XSTORE" model pull one --dest "$T/p4" --no-verify
	check "... the tree equals the source" diff -r "$SRC" "$T/p4"
	check_grep "... FICLONE refused" 'FICLONE.*= -1' "$(cat "$T/x4.tr")"
	if grep -q 'copy_file_range.* = -1' "$T/x4.tr"; then
		check "... copy_file_range refused too, then streamed" \
			sh -c "! grep -q 'copy_file_range.* = [1-9]' '$T/x4.tr'"
	else
		tap_skip "... copy_file_range refused, then streamed" \
			"this kernel copies between these filesystems"
	fi
	# the digest is of what was cloned: a file whose clone holds other
	# bytes than the manifest says is refused, nothing left in place
	f=$(ls "$XFS"/store/weight/models/one/files/*/chunks/* "$XFS"/store/weight/models/one/files/*/data-* 2>/dev/null |
		while read -r p; do [ "$(stat -c %s "$p")" = "$(stat -c %s "$SRC/big.bin")" ] && echo "$p"; done | head -1)
	if [ -n "$f" ]; then
		cp "$f" "$T/saved" && printf 'Z' | dd of="$f" bs=1 seek=1000 conv=notrunc 2>/dev/null
		check_exit "XFS: pull of a damaged store file fails" 1 \
			"$W" --store "$XSTORE" model pull one --dest "$XFS/p5"
		check "... nothing at big.bin's path, no temp left" \
			sh -c "test ! -e '$XFS/p5/big.bin' && test -z \"\$(ls -A '$XFS/p5' | grep wstore)\""
		cp "$T/saved" "$f"
	else
		tap_not_ok "XFS: the store file of big.bin" "not found"
	fi
	umount "$XFS"
else
	tap_skip "XFS: pull, pull --no-verify, materialize-file by FICLONE" "$xfs_why"
fi

# ---- mount: a file of several chunks kept whole, passed through ----------
if [ -x "$BUILD/wstore-mount" ] && [ -c /dev/fuse ]; then
	"$W" --store "$STORE" mount "$MNT" --checkpoint many --foreground > "$T/mnt.log" 2>&1 &
	MPID=$!
	if wait_for 10 grep -q " $MNT fuse" /proc/mounts &&
		wait_for 10 grep -q 'mounted' "$T/mnt.log"; then
		check "mount: the files of several chunks read right" diff -r "$SRC" "$MNT"
		if ! grep -q 'passed through' "$T/mnt.log"; then
			tap_skip "mount: a file of several chunks passed through" \
				"no passthrough here: $(grep mounted "$T/mnt.log" | head -1)"
		elif ! kept_whole "$T/store" many; then
			tap_skip "mount: a file of several chunks passed through" \
				"the store keeps big.bin in chunk files"
		else
			check_exit "mount: big.bin (several chunks, kept whole) read with the daemon stopped" 0 \
				timeout 60 $PY "$HERE/tools/stopped_read.py" "$MNT" "$SRC" "$MPID" big.bin 1048000 2097152
		fi
		check_exit "mount: unmounts" 0 "$W" umount "$MNT"
	else
		tap_not_ok "mount of 'many'" "$(tail -3 "$T/mnt.log")"
	fi
	wait_exit 10 "$MPID"
	# no passthrough: a file kept whole is spliced from its one file,
	# which the daemon opens with the file (the chunk cache opens a
	# store file only for a read)
	for id in one many; do
		WSTORE_MOUNT_PASSTHROUGH=0 "$W" --store "$STORE" mount "$MNT" \
			--checkpoint $id --foreground > "$T/mnt-$id.log" 2>&1 &
		MPID=$!
		if wait_for 10 grep -q " $MNT fuse" /proc/mounts &&
			wait_for 10 grep -q 'mounted' "$T/mnt-$id.log"; then
			check "mount $id, no passthrough: says so" \
				sh -c "! grep -q 'passed through' '$T/mnt-$id.log'"
			check_exit "mount $id, no passthrough: every byte, and the store file held open from the open on when kept whole" 0 \
				timeout 60 $PY - "$MNT" "$SRC" "$MPID" "$T/store" \
				"$( (kept_whole "$T/store" $id || [ $id = one ]) && echo 1 || echo 0)" <<'EOF'
import os, sys
mnt, src, pid, store, whole = sys.argv[1:6]
def held():
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(store + "/weight/"):
                n += 1
        except OSError:
            pass
    return n
before = held()
fd = os.open(mnt + "/big.bin", os.O_RDONLY)
after = held()
if whole == "1" and after != before + 1:
    sys.exit(f"kept whole: {before} store files open before the open, {after} after")
if whole == "0" and after != before:
    sys.exit(f"chunk files: a store file opened by the open ({before} -> {after})")
want = open(src + "/big.bin", "rb").read()
got = b"".join(iter(lambda: os.read(fd, 1 << 20), b""))
if got != want:
    sys.exit("big.bin differs")
if os.pread(fd, 5000, 1048570) != want[1048570:1048570 + 5000]:
    sys.exit("a read across a chunk boundary differs")
os.close(fd)
EOF
			check "mount $id, no passthrough: the tree reads right" diff -r "$SRC" "$MNT"
			check_exit "mount $id, no passthrough: unmounts" 0 "$W" umount "$MNT"
		else
			tap_not_ok "mount of '$id' without passthrough" "$(tail -3 "$T/mnt-$id.log")"
		fi
		wait_exit 10 "$MPID"
	done
	# no passthrough, the checkpoint replaced under an open file: its
	# reads fail (each confirms the checkpoint), never the new bytes
	imp "$STORE" rp 8MiB >/dev/null
	WSTORE_MOUNT_PASSTHROUGH=0 "$W" --store "$STORE" mount "$MNT" \
		--checkpoint rp --foreground > "$T/mnt-rp.log" 2>&1 &
	MPID=$!
	if wait_for 10 grep -q " $MNT fuse" /proc/mounts &&
		wait_for 10 grep -q 'mounted' "$T/mnt-rp.log"; then
		mkdir -p "$T/src2" && cp "$SRC/config.json" "$T/src2/" &&
			head -c 3000000 /dev/zero > "$T/src2/big.bin"
		check_exit "mount rp, no passthrough: reads fail once the checkpoint is replaced" 0 \
			timeout 60 $PY - "$MNT" "$SRC" "$W" "$STORE" "$T/src2" <<'EOF'
import errno, os, subprocess, sys
mnt, src, w, store, src2 = sys.argv[1:6]
want = open(src + "/big.bin", "rb").read()
fd = os.open(mnt + "/big.bin", os.O_RDONLY)
assert os.pread(fd, 4096, 0) == want[:4096], "bad bytes before"
for args in (["model", "delete", "rp", "--force"],
             ["--quiet", "model", "import", "--checkpoint-id", "rp", "--model-id",
              "Org/rp", "--source", src2, "--chunk-size", "8MiB"]):
    subprocess.run([w, "--store", store] + args, check=True, stdout=subprocess.DEVNULL)
errors = 0
for off in range(0, 3 << 20, 1 << 18):
    try:
        got = os.pread(fd, 1 << 18, off)
    except OSError as e:
        if e.errno != errno.EIO:
            sys.exit(f"unexpected {e}")
        errors += 1
        continue
    if got != want[off:off + len(got)]:
        sys.exit(f"wrong bytes at {off}")
sys.exit(0 if errors == 12 else f"{errors} of 12 reads failed")
EOF
		check_exit "mount rp: unmounts" 0 "$W" umount "$MNT"
	else
		tap_not_ok "mount of 'rp' without passthrough" "$(tail -3 "$T/mnt-rp.log")"
	fi
	wait_exit 10 "$MPID"
else
	tap_skip "mount: files kept whole" "wstore-mount not built or no /dev/fuse"
fi

# ---- serve: ranges across chunk boundaries -------------------------------
if [ -x "$BUILD/wstore-serve" ] && command -v curl >/dev/null; then
	if serve_start whole "$STORE"; then
		for id in one many; do
			for r in 0-0 1048570-1048590 1048575-1048576 1000-3000000 \
				2097151-3149999 3145000- -100 0-; do
				curl -sf -H "Range: bytes=$r" \
					"$SERVE_URL/Org/$id/resolve/main/big.bin" -o "$T/part"
				check_exit "serve $id: bytes=$r byte for byte" 0 $PY -c '
import sys
d = open(sys.argv[1], "rb").read()
a, b = sys.argv[2].split("-")
if a == "":
    want = d[-int(b):]
else:
    want = d[int(a):int(b) + 1] if b else d[int(a):]
sys.exit(0 if open(sys.argv[3], "rb").read() == want else "differs")' \
					"$SRC/big.bin" "$r" "$T/part"
			done
		done
		serve_stop
	fi
else
	tap_skip "serve: ranges" "wstore-serve not built or no curl"
fi

tap_done
