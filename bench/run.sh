#!/bin/sh
# make bench: bench/whole.py (the data plane as whole processes next to
# cat / cp -r + sync, the issue table's four rows), bench/reflink.py (mount,
# pull and import on a loop-mounted XFS image with reflink, as root; a
# skip line otherwise), then bench/bench.py
# (file store, in-process figures), bench/redis.sh if present,
# bench/serve.sh (wstore serve next to nginx and raw Redis GET),
# bench/hub.sh (import from a Hub server next to curl),
# bench/hub_files.sh (CPU per file of a Hub import, 200 vs 2000 files),
# bench/mirror_stream.sh (a cold mirror streaming a 2 GiB file next to
# its upstream, and their times to first byte),
# bench/mooncake.sh (a real Mooncake Store, when installed), and
# bench/travel.py (bundles and copies between stores).
#   BENCH_ONLY=whole     only the whole-process rows (with the XFS ones)
#   BENCH_ONLY=reflink   only the XFS rows
#   BENCH_ONLY=serve     only bench/serve.sh
#   BENCH_ONLY=mooncake  only bench/mooncake.sh
#   BENCH_ONLY=hub       only bench/hub.sh
#   BENCH_ONLY=hub_files only bench/hub_files.sh
#   BENCH_ONLY=mirror_stream only bench/mirror_stream.sh
#   BENCH_ONLY=travel    only bench/travel.py
set -eu
BUILD=${1:-build}
[ "${BENCH_ONLY:-}" = serve ] && exec sh "$(dirname "$0")/serve.sh" "$BUILD"
[ "${BENCH_ONLY:-}" = hub ] && exec sh "$(dirname "$0")/hub.sh" "$BUILD"
[ "${BENCH_ONLY:-}" = hub_files ] && exec sh "$(dirname "$0")/hub_files.sh" "$BUILD"
[ "${BENCH_ONLY:-}" = mirror_stream ] && exec sh "$(dirname "$0")/mirror_stream.sh" "$BUILD"
[ "${BENCH_ONLY:-}" = mooncake ] && exec sh "$(dirname "$0")/mooncake.sh" "$BUILD"
[ "${BENCH_ONLY:-}" = reflink ] && exec python3 "$(dirname "$0")/reflink.py" "$BUILD"
[ "${BENCH_ONLY:-}" = travel ] && exec python3 "$(dirname "$0")/travel.py" "$BUILD"
python3 "$(dirname "$0")/whole.py" "$BUILD"
python3 "$(dirname "$0")/reflink.py" "$BUILD"
[ "${BENCH_ONLY:-}" = whole ] && exit 0
python3 "$(dirname "$0")/bench.py" "$BUILD"
if [ -f "$(dirname "$0")/redis.sh" ]; then sh "$(dirname "$0")/redis.sh" "$BUILD"; fi
sh "$(dirname "$0")/serve.sh" "$BUILD"
sh "$(dirname "$0")/hub.sh" "$BUILD"
sh "$(dirname "$0")/hub_files.sh" "$BUILD"
sh "$(dirname "$0")/mirror_stream.sh" "$BUILD"
# real Mooncake, when installed (says so and skips otherwise)
sh "$(dirname "$0")/mooncake.sh" "$BUILD"
python3 "$(dirname "$0")/travel.py" "$BUILD"
