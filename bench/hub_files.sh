#!/bin/sh
# bench/hub_files.sh BUILD - the CPU `model import --from-hub` spends per
# file as the file count grows: the same import of 200 and of 2000 small
# files from tests/tools/fakehub.py, in the same run (called by
# bench/run.sh; BENCH_ONLY=hub_files alone).  Recording a verified file
# must cost the same however many came before (one mark each, intent.c):
# ratio = CPU per file at 2000 / CPU per file at 200, goal <= 2.  Before
# the marks the whole intent record was rewritten per file (0.54 / 1.97 /
# 8.99 s of CPU for 500 / 1000 / 2000 files).
#
#   BENCH_HUB_FILES_RUNS   runs per figure, the best kept (default 3)
set -u
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" && pwd) || exit 1
W="$BUILD/wstore"
RUNS=${BENCH_HUB_FILES_RUNS:-3}
T=$(mktemp -d "${TMPDIR:-/tmp}/wstore-bench-hubfiles-XXXXXX")
# the fake Hub is started by tests/lib/fakehub.sh, which wants the
# suites' $HERE and tests/lib/tap.sh's wait_for and tap_not_ok
HERE="$ROOT/tests"
TAP_SUITE=hub_files
. "$ROOT/tests/lib/tap.sh"
. "$ROOT/tests/lib/fakehub.sh"
cleanup() {
	fakehub_stop 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export WSTORE_CONFIG= HOME="$T"

# cpu N: the best user+sys seconds of RUNS imports of N files
cpu() {
	mkdir -p "$T/src$1"
	i=0
	while [ $i -lt "$1" ]; do
		printf 'file %d\n' $i > "$T/src$1/f$i.txt"
		i=$((i + 1))
	done
	rm -f "$T/fakeports"
	fakehub_start "$T/src$1" >&2 || exit 1
	port=$FP
	best=
	r=0
	while [ $r -lt "$RUNS" ]; do
		rm -rf "$T/store"
		s=$(python3 -c '
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.3f" % (u.ru_utime + u.ru_stime))' "$W" --store "$T/store" model import \
			--from-hub org/fake --endpoint "http://127.0.0.1:$port" \
			--quiet) || exit 1
		best=$(python3 -c 'import sys; a = sys.argv[1:]; print(min(float(x) for x in a if x))' "$s" ${best:-})
		r=$((r + 1))
	done
	fakehub_stop
	echo "$best"
}
a=$(cpu 200)
b=$(cpu 2000)
python3 - "$a" "$b" <<'PY'
import sys
a, b = float(sys.argv[1]), float(sys.argv[2])
pa, pb = a / 200 * 1000, b / 2000 * 1000
print("hub import CPU per file: 200 files %.3f s (%.2f ms/file), "
      "2000 files %.3f s (%.2f ms/file); ratio %.2f (goal <= 2)"
      % (a, pa, b, pb, pb / pa))
PY
