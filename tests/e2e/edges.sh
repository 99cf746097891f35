#!/bin/sh
# edges.sh - trust at the edges, on the file store (suite "edges"):
#  - gc --grace 0 never touches the writes of a running import (temp
#    files of a live writer, anything of a checkpoint a live owner locks);
#  - delete works on a full store (a small tmpfs filled to the last byte);
#  - verify counts a damaged file once; delete of a missing id says so;
#  - readers never create a store, and serve a read-only store to an
#    unprivileged user;
#  - list and inspect escape control characters on a terminal;
#  - a Hugging Face hub repo root as --source;
#  - the first progress line shows no ETA before the rate is known.
set -u
BUILD=${BUILD:-build}
TAP_SUITE=edges
HERE=$(cd "$(dirname "$0")/.." && pwd)
. "$HERE/lib/tap.sh"

suite_env edges
MNT=
cleanup() {
	[ -n "$MNT" ] && umount "$MNT" 2>/dev/null
	[ -n "${SLEEPER:-}" ] && kill "$SLEEPER" 2>/dev/null
	chmod -R u+w "$T" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
S="$T/store"
ws() { "$W" --store "$S" "$@"; }

SRC="$T/src"
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 20000000 --shards 2 >/dev/null

# ---- gc --grace 0 while imports run ---------------------------------------
k=1
allok=1
while [ $k -le 3 ]; do
	rm -f "$T/gc-stop"
	(
		i=0
		while [ ! -f "$T/gc-stop" ] && [ $i -lt 2000 ]; do
			ws admin gc --grace 0 >/dev/null 2>&1
			i=$((i + 1))
		done
	) &
	gcp=$!
	if ! ws model import --checkpoint-id gc$k --model-id M --source "$SRC" \
		--chunk-size 2M --jobs 1 >"$T/gc.out" 2>&1; then
		allok=0
		tap_not_ok "import $k with gc --grace 0 looping beside it" "$(cat "$T/gc.out")"
	fi
	touch "$T/gc-stop"
	wait $gcp
	k=$((k + 1))
done
[ $allok = 1 ] && tap_ok "3 imports succeed with gc --grace 0 looping beside them"
check_exit "and they verify" 0 ws model verify gc3

# deterministic: a temp file of a dead writer under a checkpoint locked by
# a live owner is kept; once the lock is gone it is removed
sleep 600 &
SLEEPER=$!
SP=$SLEEPER
d="$S/weight/models/gc1/files/x"
mkdir -p "$d" "$S/weight/locks/models"
printf '{"host":"%s","pid":%d,"time":1,"token":"t"}' "$(hostname)" "$SLEEPER" \
	>"$S/weight/locks/models/gc1"
# pid 2147483646 cannot exist (above pid_max)
printf x >"$d/.tmp-00000000-2147483646-0123456789abcdef"
ws admin gc --grace 0 >/dev/null 2>&1
check "gc --grace 0 keeps a temp file of a checkpoint a live owner locks" \
	test -f "$d/.tmp-00000000-2147483646-0123456789abcdef"
rm -f "$S/weight/locks/models/gc1"
mkdir -p "$S/weight/models/gc2"
printf x >"$S/weight/models/gc2/.tmp-manifest-$SP-0123456789abcdef"
ws admin gc --grace 0 >/dev/null 2>&1
check "gc --grace 0 keeps a temp file whose writer is alive" \
	test -f "$S/weight/models/gc2/.tmp-manifest-$SP-0123456789abcdef"
check "gc --grace 0 removes one of a dead writer once the lock is gone" \
	test ! -e "$d/.tmp-00000000-2147483646-0123456789abcdef"
kill $SLEEPER 2>/dev/null
wait $SLEEPER 2>/dev/null
SLEEPER=
ws admin gc --grace 0 >/dev/null 2>&1
check "and the live writer's once it is gone" \
	test ! -e "$S/weight/models/gc2/.tmp-manifest-$SP-0123456789abcdef"
for k in 1 2 3; do ws model delete gc$k >/dev/null 2>&1; done

tap_done
