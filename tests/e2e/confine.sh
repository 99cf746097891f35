#!/bin/sh
# confine.sh - wstore writes, deletes and replaces only what the user named
# (suite "confine"), on the file store:
#  - materialize-file --output and pull --dest entries onto an existing
#    FIFO, character device, socket or directory are refused, the node left
#    as it was;
#  - symlinks planted inside the store at several depths (directories and
#    files) are never followed: reads, imports, deletes, gc, locks and the
#    mount leave everything outside the store as it was;
#  - credentials in store URLs never reach a message or --json output;
#  - file names near NAME_MAX import, pull and materialize; two pulls of
#    one checkpoint into one directory from two threads of one process both
#    succeed; modes come from the umask without process-wide games.
TAP_SUITE=confine
. "$(dirname "$0")/../lib/suite.sh"
MNT=
suite_cleanup() {
	[ -n "$MNT" ] && suite_unmount "$MNT" "$T/nomnt"
}
S="$T/store"
ws() { "$W" --store "$S" "$@"; }
# bounded: opening a FIFO for writing would block forever
wsb() { timeout 30 "$W" --store "$S" "$@"; }

SRC="$T/src"
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 300000 --shards 2 >/dev/null
LONG=$(printf 'n%.0s' $(seq 1 250)).json		# 255 bytes: NAME_MAX
LONG2=$(printf 'd%.0s' $(seq 1 240)).bin		# 244 bytes, in a subdirectory
printf '{"long": true}\n' > "$SRC/$LONG"
mkdir -p "$SRC/sub"
head -c 5000 /dev/urandom > "$SRC/sub/$LONG2"
check_exit "import with a 255-byte file name" 0 ws --quiet model import \
	--checkpoint-id ck --model-id Org/M --source "$SRC" --chunk-size 64K

# ---- names near NAME_MAX ----------------------------------------------------
check_exit "pull of 255- and 244-byte names" 0 ws --quiet model pull ck --dest "$T/p1"
check "pulled tree equals the source" diff -r "$SRC" "$T/p1"
check "pull left no temp file" test -z "$(find "$T/p1" -name '.wstore-*')"
mkdir -p "$T/m1"
check_exit "materialize-file to a 255-byte name" 0 ws --quiet model materialize-file ck \
	--path "$LONG" --output "$T/m1/$LONG"
check "materialized long name equals the source" cmp "$SRC/$LONG" "$T/m1/$LONG"
check_exit "materialize-file of a 244-byte name in a subdirectory" 0 ws --quiet model \
	materialize-file ck --path "sub/$LONG2" --output "$T/m1/$LONG2"
check "and its bytes are right" cmp "$SRC/sub/$LONG2" "$T/m1/$LONG2"
check "materialize left no temp file" test -z "$(find "$T/m1" -name '.wstore-*')"

# ---- modes from the umask ----------------------------------------------------
(umask 077 && ws --quiet model materialize-file ck --path config.json --output "$T/m1/u077") >/dev/null 2>&1
(umask 022 && ws --quiet model materialize-file ck --path config.json --output "$T/m1/u022") >/dev/null 2>&1
check_grep "materialize under umask 077 gives 600, under 022 gives 644" "^600 644$" \
	"$(stat -c %a "$T/m1/u077" "$T/m1/u022" 2>&1 | tr '\n' ' ' | sed 's/ $//')"
(umask 027 && ws --quiet model pull ck --dest "$T/p027") >/dev/null 2>&1
check_grep "pull under umask 027 gives 640" "^640$" "$(stat -c %a "$T/p027/config.json" 2>&1)"

# ---- two pulls into one directory from two threads of one process ---------
BIG="$T/big"
python3 "$HERE/tools/mkckpt.py" "$BIG" --size 24000000 --shards 3 --seed 7 >/dev/null
ws --quiet model import --checkpoint-id big --model-id Org/B --source "$BIG" --chunk-size 1M
cat > "$T/twopulls.py" <<'EOF'
import os, sys, threading
sys.path.insert(0, sys.argv[1])
import wstore
store, dest = sys.argv[2], sys.argv[3]
errors = []
def pull():
    try:
        with wstore.Store(store) as s:
            s.pull("big", dest, jobs=2, force=True)
    except Exception as e:
        errors.append(repr(e))
for rnd in range(3):
    ts = [threading.Thread(target=pull) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
        if t.is_alive():
            errors.append("a pull thread still runs after 120 s")
print("errors:", errors)
sys.exit(1 if errors else 0)
EOF
LIB=$(cd "$BUILD" && pwd)/libwstore.so
# a sanitizer build (asan, tsan): its runtime must come first in python
ASANRT=$(ldd "$LIB" 2>/dev/null | awk '/lib[at]san/ { print $3 }')
check_exit "two threads pulling one checkpoint into one directory both succeed (3 rounds)" 0 \
	env WSTORE_LIBRARY="$LIB" ${ASANRT:+LD_PRELOAD=$ASANRT ASAN_OPTIONS=detect_leaks=0} \
	timeout 300 /usr/bin/python3 "$T/twopulls.py" "$HERE/../python" "$S" "$T/p2"
check "and the tree equals the source" diff -r "$BIG" "$T/p2"
check "no temp file left" test -z "$(find "$T/p2" -name '.wstore-*')"
ws model delete big >/dev/null

# ---- outputs that are no regular file ---------------------------------------
mkdir -p "$T/o"
mkfifo "$T/o/fifo"
check_exit "materialize onto a FIFO is refused" 1 wsb model materialize-file ck \
	--path config.json --output "$T/o/fifo"
check_grep "it says it is a FIFO" "'$T/o/fifo' exists and is a FIFO" "$OUT"
check_one_line "the refusal is one line" "$OUT"
check "the FIFO is still a FIFO" test -p "$T/o/fifo"
mkdir "$T/o/dir"
check_exit "materialize onto a directory is refused" 1 wsb model materialize-file ck \
	--path config.json --output "$T/o/dir"
check_grep "it says it is a directory" "is a directory" "$OUT"
check "the directory is still there" test -d "$T/o/dir"
python3 -c "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$T/o/sock"
check_exit "materialize onto a socket is refused" 1 wsb model materialize-file ck \
	--path config.json --output "$T/o/sock"
check "the socket is still a socket" test -S "$T/o/sock"
if [ "$(id -u)" = 0 ]; then
	# a private copy of /dev/null: the real one is never touched
	mknod "$T/o/null" c 1 3
	check_exit "materialize onto a character device is refused" 1 wsb model \
		materialize-file ck --path config.json --output "$T/o/null"
	check_grep "it says it is a character device" "is a character device" "$OUT"
	check "the device node is still a device node" test -c "$T/o/null"
else
	tap_not_ok "materialize onto a character device (needs root for mknod)"
fi
check "no temp file left next to them" test -z "$(find "$T/o" -name '.wstore-*')"
mkdir -p "$T/pd"
mkfifo "$T/pd/config.json"
check_exit "pull onto a FIFO entry fails" 1 wsb model pull ck --dest "$T/pd"
check_grep "naming the entry" "config.json' exists and is a FIFO" "$OUT"
check "the FIFO entry is still a FIFO" test -p "$T/pd/config.json"
if [ "$(id -u)" = 0 ]; then
	mkdir -p "$T/pe"
	mknod "$T/pe/config.json" c 1 3
	check_exit "pull onto a character device entry fails" 1 wsb model pull ck --dest "$T/pe"
	check "the device entry is still a device" test -c "$T/pe/config.json"
else
	tap_skip "pull onto a character device entry fails" "mknod needs root"
fi
check "pull left no temp file" test -z "$(find "$T/pd" "$T/pe" -name '.wstore-*' 2>/dev/null)"

# ---- symlinks planted inside the store ------------------------------------
# snap DIR: every path below DIR with its type, size and digest
snap() { (cd "$1" && find . -printf '%p %y %s\n' | sort && find . -type f -exec sha256sum {} + | sort); }
OUTSIDE="$T/outside"
mkdir -p "$OUTSIDE"
MAN=weight/models/ck/manifest
F=model-00001-of-00002.safetensors
FH=$(printf %s "$F" | sha256sum | cut -c1-64)
# copies of the store's own data outside it, as an adversary would plant
cp -r "$S/weight/models/ck" "$OUTSIDE/ckdir"
cp "$S/$MAN" "$OUTSIDE/manifest"
cp -r "$S/weight/models/ck/files/$FH" "$OUTSIDE/filedir"
mkdir -p "$OUTSIDE/empty" "$OUTSIDE/locks" "$OUTSIDE/flocks" "$OUTSIDE/gc/chunks"
printf 'old temp' > "$OUTSIDE/gc/.tmp-x-1-0000000000000000"
printf 'orphan' > "$OUTSIDE/gc/chunks/00000000"
touch -d '3 hours ago' "$OUTSIDE/gc/.tmp-x-1-0000000000000000"
snap "$OUTSIDE" > "$T/outside.before"
outside_same() { snap "$OUTSIDE" > "$T/outside.after"; cmp -s "$T/outside.before" "$T/outside.after"; }

# a file symlink at the manifest (depth 4)
mv "$S/$MAN" "$T/man.saved"
ln -s "$OUTSIDE/manifest" "$S/$MAN"
check_exit "manifest symlink: inspect does not read through it" 1 ws model inspect ck
check_exit "manifest symlink: materialize does not read through it" 1 ws model \
	materialize-file ck --path config.json --output "$T/sl.out"
mkdir -p "$T/nomnt"
check_exit "manifest symlink: mount shows no checkpoint" 1 ws mount "$T/nomnt" --checkpoint ck
grep -q " $T/nomnt fuse" /proc/mounts && { "$W" umount "$T/nomnt" || umount -l "$T/nomnt"; }
rm "$S/$MAN"; mv "$T/man.saved" "$S/$MAN"
check "outside unchanged after reads through a manifest symlink" outside_same

# a directory symlink at a file's chunk directory (depth 5)
mv "$S/weight/models/ck/files/$FH" "$T/fh.saved"
ln -s "$OUTSIDE/filedir" "$S/weight/models/ck/files/$FH"
check_exit "chunk directory symlink: verify says the file is bad" 3 ws model verify ck
check_grep "verify names the file" "BAD +$F" "$OUT"
check_exit "chunk directory symlink: materialize fails" 1 ws model materialize-file ck \
	--path "$F" --output "$T/sl.out"
check "and wrote nothing" test ! -e "$T/sl.out"
MNT="$T/mnt"; mkdir -p "$MNT"
if ws mount "$MNT" --checkpoint ck >/dev/null 2>&1; then
	if timeout 20 cat "$MNT/$F" >/dev/null 2>&1; then
		tap_not_ok "mount: a file whose chunks are behind a symlink cannot be read"
	else
		tap_ok "mount: a file whose chunks are behind a symlink cannot be read"
	fi
	"$W" umount "$MNT" >/dev/null 2>&1 || umount -l "$MNT"
else
	tap_not_ok "mount with a symlinked chunk directory" "mount failed"
fi
check "outside unchanged after reads through a chunk directory symlink" outside_same
rm "$S/weight/models/ck/files/$FH"; mv "$T/fh.saved" "$S/weight/models/ck/files/$FH"
check_exit "the restored checkpoint verifies" 0 ws model verify ck

# a file symlink at one chunk (depth 7), or at the data file that holds it
CH="weight/models/ck/files/$FH/chunks/00000001"
set -- $(chunk_at "$S" "$CH")
CH=${1#"$S"/}
mv "$S/$CH" "$T/ch.saved"
ln -s "$OUTSIDE/filedir/chunks/00000001" "$S/$CH"
check_exit "chunk symlink: verify says the file is bad" 3 ws model verify ck
check_exit "chunk symlink: pull fails" 1 ws model pull ck --dest "$T/slpull"
check "outside unchanged after reads through a chunk symlink" outside_same
rm "$S/$CH"; mv "$T/ch.saved" "$S/$CH"

# import into an id whose directory is a symlink (depth 3)
ln -s "$OUTSIDE/empty" "$S/weight/models/evil"
check_exit "import into a symlinked checkpoint directory fails" 1 ws model import \
	--checkpoint-id evil --model-id Org/M --source "$SRC"
check_grep "naming the symlink" "symlink" "$OUT"
check "import wrote nothing outside" outside_same
ws model delete evil >/dev/null 2>&1
check "delete removed nothing outside" outside_same
rm "$S/weight/models/evil"

# delete of a checkpoint whose directory is a symlink to a copy of itself
ws --quiet model import --checkpoint-id d2 --model-id Org/M --source "$SRC" --chunk-size 64K
mv "$S/weight/models/d2" "$T/d2.saved"
cp -r "$T/d2.saved" "$OUTSIDE/d2"
snap "$OUTSIDE" > "$T/outside.before"
ln -s "$OUTSIDE/d2" "$S/weight/models/d2"
ws model delete d2 >/dev/null 2>&1
check "delete through a symlinked checkpoint directory removed nothing outside" outside_same
rm -f "$S/weight/models/d2"

# the checkpoint lock directory and the flock directory as symlinks
mv "$S/weight/locks" "$T/locks.saved" 2>/dev/null || mkdir -p "$T/locks.saved"
ln -s "$OUTSIDE/locks" "$S/weight/locks"
ws model import --checkpoint-id lk --model-id Org/M --source "$SRC" >/dev/null 2>&1
check "import with weight/locks a symlink wrote no lock outside" outside_same
rm "$S/weight/locks"; rmdir "$T/locks.saved" 2>/dev/null || mv "$T/locks.saved" "$S/weight/locks"
ws model delete lk >/dev/null 2>&1
mv "$S/.locks" "$T/flocks.saved" 2>/dev/null
ln -s "$OUTSIDE/flocks" "$S/.locks"
ws model import --checkpoint-id lk2 --model-id Org/M --source "$SRC" >/dev/null 2>&1
check "an index update with .locks a symlink made no lock file outside" outside_same
rm "$S/.locks"; [ -d "$T/flocks.saved" ] && mv "$T/flocks.saved" "$S/.locks"
ws model delete lk2 >/dev/null 2>&1

# gc with symlinks to old temp files and orphan chunks outside
ln -s "$OUTSIDE/gc" "$S/weight/models/ck/files/gcdir"
ln -s "$OUTSIDE/gc" "$S/weight/models/orphan"
ws admin gc --grace 0 >/dev/null 2>&1
check "gc --grace 0 removed nothing outside through symlinks" outside_same
rm "$S/weight/models/ck/files/gcdir" "$S/weight/models/orphan"
check_exit "the checkpoint still verifies after all that" 0 ws model verify ck

# ---- credentials never in messages ----------------------------------------
PW=s3cr3t-pw
nopw() { # nopw NAME CMD...: CMD fails and prints no password
	name=$1; shift
	OUT=$("$@" 2>&1); rc=$?
	case $OUT in
	*"$PW"*) tap_not_ok "$name: password not shown" "exit $rc: $OUT" ;;
	*) if [ $rc != 0 ]; then tap_ok "$name: fails without showing the password"
	   else tap_not_ok "$name: fails" "exit 0: $OUT"; fi ;;
	esac
}
nopw "unknown scheme redis+tls://" "$W" --store "redis+tls://user:$PW@127.0.0.1:1" model list
check_grep "the unknown scheme is still named" "redis\+tls://" "$OUT"
nopw "rediss://user:password@ a closed port" "$W" --store "rediss://u:$PW@127.0.0.1:1" model list
nopw "unknown scheme with --json" "$W" --json --store "foo://u:$PW@h/x" model list
nopw "redis://user:password@ a closed port" "$W" --store "redis://u:$PW@127.0.0.1:1" model list
nopw "redis://:password@ a bad database" "$W" --store "redis://:$PW@127.0.0.1:1/xx" model list
nopw "redis-cluster:// with a password" "$W" --json --store \
	"redis-cluster://u:$PW@127.0.0.1:1,127.0.0.1:2" model list
nopw "WSTORE_STORE with a password" env WSTORE_STORE="redis://u:$PW@127.0.0.1:1" "$W" model verify x
nopw "mount of a redis URL with a password" "$W" --store "redis://u:$PW@127.0.0.1:1" mount "$T"
OUT=$("$W" --store "redis://u:$PW@127.0.0.1:1" --config "$T/cfg.json" config init 2>&1)
case $OUT in
*"$PW"*) tap_not_ok "config init does not print the password" "$OUT" ;;
*) tap_ok "config init does not print the password" ;;
esac
check_grep "the config file holding a password is private (600)" "^600$" "$(stat -c %a "$T/cfg.json" 2>&1)"
check_exit "config init to a 255-byte file name" 0 "$W" --store "$S" --config "$T/$LONG" config init
check_grep "and it holds the store" "\"store\"" "$(cat "$T/$LONG" 2>&1)"

tap_done
