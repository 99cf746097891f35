#!/bin/sh
# run.sh - the ABI suite: abi-frozen, built against the frozen headers of
# WSTORE_0 (tests/abi/v0/), runs against BUILD's libwstore.so (see
# frozen.c); and what it and the front ends link is versioned: every
# wstore_ symbol they take from libwstore.so is bound to a version node
# (WSTORE_0, or a later one such as WSTORE_1).
#   sh tests/abi/run.sh [BUILD_DIR]
set -u
BUILD=${1:-${BUILD:-build}}
BUILD=$(cd "$BUILD" && pwd)
TAP_SUITE=abi
HERE=$(cd "$(dirname "$0")/.." && pwd)
. "$HERE/lib/tap.sh"
T=$(mktemp -d "${TMPDIR:-/tmp}/wstore-abi-XXXXXX")
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
export HOME="$T/home" WSTORE_CONFIG= WSTORE_HOME="$T/home-store"
mkdir -p "$HOME" "$T/work"

# unversioned BIN: the wstore_ symbols BIN takes without a version
unversioned() {
	nm -D --undefined-only "$1" | awk '{print $2}' | grep '^wstore_' |
		grep -Ev '@WSTORE_[0-9]+$' || true
}
for b in abi-frozen wstore wstore-mount wstore-serve backend-conformance; do
	[ -x "$BUILD/$b" ] || continue
	out=$(unversioned "$BUILD/$b")
	if [ -z "$out" ]; then tap_ok "$b binds every wstore_ symbol to a version node"
	else tap_not_ok "$b binds every wstore_ symbol to a version node" "$out"; fi
done

"$BUILD/abi-frozen" "$T/work" > "$T/out" 2>&1
rc=$?
cat "$T/out"
line=$(grep -E '^abi: [0-9]+ passed, [0-9]+ failed' "$T/out" | tail -1)
p=$(echo "$line" | sed -nE 's/^abi: ([0-9]+) passed.*/\1/p')
f=$(echo "$line" | sed -nE 's/.* ([0-9]+) failed.*/\1/p')
if [ -n "$line" ] && [ "$rc" = 0 ] && [ "${f:-1}" = 0 ]; then
	tap_ok "a program built against WSTORE_0's headers runs against this library ($p checks)"
else
	tap_not_ok "a program built against WSTORE_0's headers runs against this library" \
		"exit $rc; ${line:-no summary}"
fi
tap_done
