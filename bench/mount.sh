#!/bin/sh
# mount.sh - sequential read throughput through `wstore mount` next to
# `cat` of the same files from the page cache, as a ratio.
#   sh bench/mount.sh [BUILD_DIR] [SIZE_BYTES]
# Needs /dev/fuse and root (or fusermount3).  Prints one line per case:
#   cat (page cache)         the source files, already cached
#   mount, first read        the default mode (direct I/O on this store
#                            where the kernel allows shared mmap with it)
#   mount, re-read           the same files again
#   mount --page-cache       first read through the kernel page cache
# and "mount/cat ratio: X" for the first read.
set -u
BUILD=${1:-build}
SIZE=${2:-2000000000}
HERE=$(cd "$(dirname "$0")/.." && pwd)
W=$(cd "$BUILD" && pwd)/wstore
T=$(mktemp -d "${TMPDIR:-/tmp}/wstore-bench-mount-XXXXXX")
MNT="$T/mnt"
cleanup() {
	"$W" umount "$MNT" >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
[ -c /dev/fuse ] || { echo "mount bench: /dev/fuse is missing"; exit 1; }
mkdir -p "$MNT"
python3 "$HERE/tests/tools/mkckpt.py" "$T/src" --size "$SIZE" --shards 2 >/dev/null
"$W" --quiet --store "$T/store" model import --checkpoint-id b --model-id M \
	--source "$T/src" >/dev/null || exit 1
FILES="model-00001-of-00002.safetensors model-00002-of-00002.safetensors"
BYTES=0
for f in $FILES; do BYTES=$((BYTES + $(stat -c %s "$T/src/$f"))); done

# rate DIR: MB/s of cat over FILES under DIR
rate() {
	s=$(date +%s.%N)
	(cd "$1" && cat $FILES) > /dev/null
	e=$(date +%s.%N)
	echo "$BYTES $s $e" | awk '{ printf "%.0f", $1 / ($3 - $2) / 1e6 }'
}
mnt() {
	"$W" --store "$T/store" mount "$MNT" --checkpoint b "$@" 2>&1 || exit 1
}

rate "$T/src" >/dev/null
CAT=$(rate "$T/src")
mnt
FIRST=$(rate "$MNT")
AGAIN=$(rate "$MNT")
"$W" umount "$MNT"
mnt --page-cache
PC=$(rate "$MNT")
"$W" umount "$MNT"
printf 'data: %s bytes in 2 files\n' "$BYTES"
printf '%-28s %6s MB/s\n' "cat (page cache)" "$CAT" "mount, first read" "$FIRST" \
	"mount, re-read" "$AGAIN" "mount --page-cache" "$PC"
echo "$FIRST $CAT $AGAIN $PC" | awk '{ printf "mount/cat ratio: %.2f (re-read %.2f, page cache %.2f)\n", $1 / $2, $3 / $2, $4 / $2 }'
