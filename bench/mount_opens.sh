#!/bin/sh
# mount_opens.sh - file opens per second through `wstore mount` on a
# checkpoint of many small files (each open checks the checkpoint's
# manifest in the store: this measures what that check costs as the
# manifest grows).
#   sh bench/mount_opens.sh [BUILD_DIR] [FILES] [OPENS]
# (OPENS: how many of the files to open, default all)
# Needs /dev/fuse and root (or fusermount3).  Prints one line:
#   mount opens: N files, R opens/s (open, read 1 byte, close)
set -u
BUILD=${1:-build}
NFILES=${2:-3000}
NOPENS=${3:-$NFILES}
W=$(cd "$BUILD" && pwd)/wstore
T=$(mktemp -d "${TMPDIR:-/tmp}/wstore-bench-opens-XXXXXX")
MNT="$T/mnt"
cleanup() {
	"$W" umount "$MNT" >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
[ -c /dev/fuse ] || { echo "mount opens bench: /dev/fuse is missing"; exit 1; }
mkdir -p "$MNT" "$T/src"
python3 - "$T/src" "$NFILES" <<'EOF' || exit 1
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    sub = os.path.join(d, "d%02d" % (i % 50))
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, "f%05d.bin" % i), "wb") as f:
        f.write(os.urandom(64))
EOF
"$W" --quiet --store "$T/store" model import --checkpoint-id many \
	--model-id M --force --source "$T/src" >/dev/null || exit 1
"$W" --store "$T/store" mount "$MNT" --checkpoint many >/dev/null 2>&1 || exit 1
RATE=$(python3 - "$MNT" "$NOPENS" <<'EOF'
import os, sys, time
root = sys.argv[1]
paths = [os.path.join(dp, f) for dp, _, fs in os.walk(root) for f in fs]
paths = paths[:int(sys.argv[2])]
t = time.monotonic()
for p in paths:
    fd = os.open(p, os.O_RDONLY)
    os.read(fd, 1)
    os.close(fd)
print("%d %.0f" % (len(paths), len(paths) / (time.monotonic() - t)))
EOF
) || exit 1
set -- $RATE
printf 'mount opens: %s opens of %s files, %s opens/s (open, read 1 byte, close)\n' \
	"$1" "$NFILES" "$2"
