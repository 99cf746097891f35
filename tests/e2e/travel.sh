#!/bin/sh
# travel.sh - checkpoints between a file store and the servers' stores
# (bundles: wstore model export, model import --bundle; wstore model copy):
#  - for each server store: a bundle exported from a file store imported
#    there, exported again and imported into a fresh file store: the same
#    bytes (pulled and compared) and the same commit id at each step;
#  - a copy along the chain file -> Redis -> Redis Cluster -> Mooncake ->
#    file (the stores that run), equal at each step, with the same commit
#    id;
#  - a copy from the first server store to a file store killed by SIGKILL
#    mid-way, then run again: it finishes and verifies.
# Stores: $WSTORE_TEST_REDIS_URL, $WSTORE_TEST_CLUSTER_URL (each when set)
# and Mooncake when WSTORE_TEST_MOONCAKE=1 (the cluster tests/lib/mooncake.sh
# started, its settings in the environment).
TAP_SUITE=${TAP_SUITE:-travel}
. "$(dirname "$0")/../lib/suite.sh"

STORES=""
[ -n "${WSTORE_TEST_REDIS_URL:-}" ] && STORES="$STORES $WSTORE_TEST_REDIS_URL"
[ -n "${WSTORE_TEST_CLUSTER_URL:-}" ] && STORES="$STORES $WSTORE_TEST_CLUSTER_URL"
[ "${WSTORE_TEST_MOONCAKE:-0}" = 1 ] && STORES="$STORES mooncake"
if [ -z "$STORES" ]; then
	tap_skip "checkpoints between stores" "no server store (set WSTORE_TEST_REDIS_URL, WSTORE_TEST_CLUSTER_URL or WSTORE_TEST_MOONCAKE=1)"
	tap_done
	exit
fi

SRC=$T/src A=$T/a
# ids of this run: the servers' stores are shared with other suites
ID=tr$$
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 3000000 --shards 3 >/dev/null
: > "$SRC/empty.txt"
ws() { _s=$1; shift; "$W" --store "$_s" "$@"; }
commit_of() { ws "$1" model inspect "$2" | sed -n 's/^commit: *//p'; }
same_as_src() { # same_as_src STORE ID: a pull of ID equals the source
	rm -rf "$T/pull" && ws "$1" model pull "$2" --dest "$T/pull" >/dev/null &&
		diff -r "$SRC" "$T/pull"
}
CLEAN=""
suite_cleanup() {
	for _c in $CLEAN; do
		"$W" --store "${_c%%|*}" model delete --force "${_c#*|}" >/dev/null 2>&1
	done
}

check_exit "import into a file store" 0 ws "$A" model import --checkpoint-id "$ID" \
	--model-id Org/Travel --revision r1 --source "$SRC" --chunk-size 1MiB
C0=$(commit_of "$A" "$ID")
check "it has a commit id" test -n "$C0"
check_exit "export it" 0 ws "$A" model export "$ID" --output "$T/b.tar"

# ---- bundles into each server store and back ----------------------------
n=0
for S in $STORES; do
	n=$((n + 1))
	CLEAN="$CLEAN $S|$ID"
	ws "$S" model delete --force "$ID" >/dev/null 2>&1
	check_exit "bundle imported into $S" 0 ws "$S" model import --bundle "$T/b.tar"
	check_exit "... verifies there" 0 ws "$S" model verify "$ID"
	check "... the same bytes there" same_as_src "$S" "$ID"
	check "... the same commit id there" test "$(commit_of "$S" "$ID")" = "$C0"
	check_exit "exported from $S into a fresh file store" 0 sh -c \
		'"$1" --store "$2" model export "$3" | "$1" --store "$4" model import --bundle -' \
		- "$W" "$S" "$ID" "$T/back$n"
	check "... the same bytes back" same_as_src "$T/back$n" "$ID"
	check "... the same commit id back" test "$(commit_of "$T/back$n" "$ID")" = "$C0"
	check_exit "delete it from $S" 0 ws "$S" model delete "$ID"
done

# ---- a copy along the chain ------------------------------------------------
prev=$A
for S in $STORES "$T/z"; do
	check_exit "copy $prev -> $S" 0 ws "$prev" model copy "$ID" --to "$S"
	check "... equal in $S" same_as_src "$S" "$ID"
	check "... with the same commit id" test "$(commit_of "$S" "$ID")" = "$C0"
	prev=$S
done
check_exit "the chain's end verifies" 0 ws "$T/z" model verify "$ID"

# ---- a copy killed mid-way and run again ----------------------------------
FIRST=${STORES# }
FIRST=${FIRST%% *}
BIG=$T/big
mkdir -p "$BIG" && printf '{"model_type":"x"}' > "$BIG/config.json"
for i in 1 2 3 4 5 6; do head -c $((16 << 20)) /dev/urandom > "$BIG/w$i.safetensors.bin"; done
BID=${ID}big
CLEAN="$CLEAN $FIRST|$BID"
ws "$FIRST" model delete --force "$BID" >/dev/null 2>&1
check_exit "import 96 MiB into $FIRST" 0 ws "$FIRST" model import --checkpoint-id "$BID" \
	--model-id Org/TravelBig --source "$BIG" --force
K=$T/k
"$W" --store "$FIRST" model copy "$BID" --to "$K" >/dev/null 2>&1 &
cpid=$!
first_data() { [ -n "$(find "$K/weight/models/$BID" -name 'data-*' 2>/dev/null | head -1)" ]; }
wait_for 60 first_data
kill -9 $cpid 2>/dev/null
wait $cpid 2>/dev/null
check "the copy from $FIRST was killed mid-way (not READY)" \
	sh -c '! "$1" --store "$2" model list 2>/dev/null | grep -q "^$3 "' - "$W" "$K" "$BID"
check_exit "run again, it finishes" 0 ws "$FIRST" model copy "$BID" --to "$K"
check_exit "and verifies" 0 ws "$K" model verify "$BID"
check "with the same commit id" test "$(commit_of "$K" "$BID")" = "$(commit_of "$FIRST" "$BID")"
tap_done
