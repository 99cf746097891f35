#!/bin/sh
# run.sh - the whole test suite: unit tests, the CLI end-to-end suite once
# per backend (file, redis, redis-cluster, mooncake), fault injection,
# each backend's own tests, the conformance suite every backend runs
# (Mooncake's against the stand-in and, when Mooncake is installed, against
# a real cluster), the HTTP server (serve).  Servers the suites need are
# started here on free loopback ports and stopped on exit.  Ends with the line
# "N passed, N failed, N skipped" summed over every suite: a check that could
# not run (a tool missing, a case that cannot apply) is counted as skipped,
# never as passed, and so is a suite that was not built or whose servers are
# not installed.
# Every suite is bounded by timeout(1): WSTORE_SUITE_TIMEOUT seconds (600
# unless set); a suite that runs over is killed, named, and counts failed.
# Two lanes run side by side (WSTORE_TEST_LANES=1 runs them one after the
# other): the local suites (file store, mount, serve, Python) and the
# server suites (Redis, the fleet, conformance, Mooncake), each lane one
# suite at a time.  Most suites wait on processes and servers more than they
# compute, so two lanes halve the wall time on two cores; the server lane's
# report is printed when it ends.
#   sh tests/run.sh [BUILD_DIR] [SUITE...]
set -u
BUILD=${1:-build}
[ $# -gt 0 ] && shift
ONLY="$*"
SUITE_TIMEOUT=${WSTORE_SUITE_TIMEOUT:-600}
LANES=${WSTORE_TEST_LANES:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "$BUILD" && pwd)
export BUILD
TOTAL_PASS=0
TOTAL_FAIL=0
TOTAL_SKIP=0
RESULTS=""
WORK=$(mktemp -d "${TMPDIR:-/tmp}/wstore-tests-XXXXXX")
# suites make their temporary directories in here: a suite killed by its
# timeout leaves nothing behind once run.sh exits
mkdir "$WORK/tmp" && export TMPDIR="$WORK/tmp"

. "$HERE/lib/redis.sh"
. "$HERE/lib/mooncake.sh"
NOT_RUN=""
# not_run NAME REASON: a suite that cannot run here counts as one skip
not_run() {
	echo "== $1: not run: $2"
	NOT_RUN="$NOT_RUN $1"
	TOTAL_SKIP=$((TOTAL_SKIP + 1))
}
# kill_tree PID: SIGTERM PID's descendants, deepest first, then PID (the
# server lane's suites run under timeout(1) in their own process groups)
kill_tree() {
	for _k in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$_k"; done
	kill -TERM "$1" 2>/dev/null
}
LANE2=""
cleanup() {
	if [ -n "$LANE2" ] && kill -0 "$LANE2" 2>/dev/null; then
		kill_tree "$LANE2"
		wait "$LANE2" 2>/dev/null
	fi
	redis_stop_all >/dev/null 2>&1
	# mounts a killed suite left under $WORK
	grep -o " $WORK/[^ ]*" /proc/mounts 2>/dev/null | while read -r m; do
		umount -l "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null
	done
	mooncake_stop_all >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wanted() {
	[ -z "$ONLY" ] && return 0
	for w in $ONLY; do [ "$w" = "$1" ] && return 0; done
	return 1
}

# run_suite NAME CMD...: run a suite, echo its output to a log, and add the
# counts of its "N passed, N failed[, N skipped]" line; no such line is a
# failure, and so is a line with nothing passed, failed or skipped.
run_suite() {
	name=$1; shift
	wanted "$name" || return 0
	echo "== $name"
	log="$WORK/$name.log"
	t0=$(date +%s)
	timeout -k 10 "$SUITE_TIMEOUT" "$@" > "$log" 2>&1
	rc=$?
	secs=$(($(date +%s) - t0))
	# failed checks with their detail lines
	awk '/^(not ok|FAIL)/ { show = 1; print; next }
	     /^#   / { if (show) print; next } { show = 0 }' "$log" | head -60
	# skipped checks with their reasons
	grep -E '# SKIP |^SKIP ' "$log" | head -20 | sed 's/^/   /'
	line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
	p=$(echo "$line" | sed -E 's/^(.*[^0-9])?([0-9]+) passed.*/\2/')
	f=$(echo "$line" | sed -E 's/^.*[^0-9]([0-9]+) failed.*/\1/')
	s=$(echo "$line" | sed -nE 's/^.*[^0-9]([0-9]+) skipped.*/\1/p')
	s=${s:-0}
	if [ "$rc" = 124 ] || [ "$rc" = 137 ] && [ "$secs" -ge "$SUITE_TIMEOUT" ]; then
		p=${p:-0}; f=$((${f:-0} + 1))
		echo "   suite '$name' timed out after $SUITE_TIMEOUT s (killed); last lines:"
		tail -15 "$log" | sed 's/^/   | /'
	elif [ -z "$line" ]; then
		p=0; f=1
		echo "   suite '$name' printed no summary (exit $rc); last lines:"
		tail -15 "$log" | sed 's/^/   | /'
	elif [ "$p" = 0 ] && [ "$f" = 0 ] && [ "$s" = 0 ]; then
		f=1
		echo "   suite '$name' ran no test; last lines:"
		tail -15 "$log" | sed 's/^/   | /'
	elif [ "$rc" != 0 ] && [ "$f" = 0 ]; then
		f=1
		echo "   suite '$name' exited $rc; last lines:"
		tail -15 "$log" | sed 's/^/   | /'
	fi
	echo "   $name: $p passed, $f failed, $s skipped (${secs} s)"
	TOTAL_PASS=$((TOTAL_PASS + p))
	TOTAL_FAIL=$((TOTAL_FAIL + f))
	TOTAL_SKIP=$((TOTAL_SKIP + s))
	RESULTS="$RESULTS $name:$f"
}

cd "$HERE/.."

# the local suites: file store, mount, serve, Python
lane_local() {
	run_suite unit "$BUILD/unit-tests"
	run_suite layout sh "$HERE/layout/check.sh" "$BUILD"
	run_suite abi sh "$HERE/abi/run.sh" "$BUILD"
	run_suite e2e-file env WSTORE_TEST_KIND=file sh "$HERE/e2e/cli.sh"
	run_suite faults sh "$HERE/e2e/faults.sh"
	if [ -x "$BUILD/wstore-mount" ]; then
		run_suite mount sh "$HERE/e2e/mount.sh"
		run_suite mount-chunks sh "$HERE/e2e/mount_chunks.sh"
		run_suite mount-stop sh "$HERE/e2e/mount_stop.sh"
		run_suite mount-faults sh "$HERE/e2e/mount_faults.sh"
	else
		for s in mount mount-chunks mount-stop mount-faults; do
			wanted $s && not_run $s "not built (meson setup -Dfuse=disabled or no libfuse3)"
		done
	fi
	run_suite reliability sh "$HERE/e2e/reliability.sh"
	run_suite badinput sh "$HERE/e2e/badinput.sh"
	run_suite confine sh "$HERE/e2e/confine.sh"
	run_suite edges sh "$HERE/e2e/edges.sh"
	run_suite config sh "$HERE/e2e/config.sh"
	run_suite deploy sh "$HERE/e2e/deploy.sh"
	run_suite names sh "$HERE/e2e/names.sh"
	run_suite layouts sh "$HERE/e2e/layouts.sh"
	run_suite reuse sh "$HERE/e2e/reuse.sh"
	run_suite bundle sh "$HERE/e2e/bundle.sh"
	run_suite migrate sh "$HERE/e2e/migrate.sh"
	run_suite fastpaths sh "$HERE/e2e/fastpaths.sh"
	if [ -x "$BUILD/wstore-serve" ]; then
		run_suite serve sh "$HERE/e2e/serve.sh"
		run_suite serve-hub sh "$HERE/e2e/serve_hub.sh"
		run_suite serve-guard sh "$HERE/e2e/serve_guard.sh"
		run_suite serve-tls sh "$HERE/e2e/serve_tls.sh"
		run_suite hub-import sh "$HERE/e2e/hub_import.sh"
		run_suite serve-mirror sh "$HERE/e2e/serve_mirror.sh"
		run_suite serve-mirror-refs sh "$HERE/e2e/serve_mirror_refs.sh"
		run_suite serve-stream sh "$HERE/e2e/serve_stream.sh"
	else
		for s in serve serve-hub serve-guard serve-tls hub-import serve-mirror serve-mirror-refs serve-stream; do
			wanted $s && not_run $s "not built (meson setup -Dserve=disabled or no libmicrohttpd)"
		done
	fi
	run_suite python sh "$HERE/python/run.sh" "$BUILD"
	run_suite replace sh "$HERE/e2e/replace.sh"
	run_suite lease-file env WSTORE_TEST_KIND=file sh "$HERE/e2e/lease.sh"
	run_suite mooncake-backend sh "$HERE/mooncake/run.sh" "$BUILD"
}

# the server suites: Redis, the fleet, conformance, Mooncake (the stand-in
# and a real cluster); their servers are started and stopped in here
lane_servers() {
	run_suite lease-mooncake env WSTORE_TEST_KIND=mooncake \
		WSTORE_MOONCAKE_LIBRARY="$BUILD/libmooncake_store.so" \
		MOONCAKE_STANDIN_LEASE_MS=300 sh "$HERE/e2e/lease.sh"
	REDIS_SUITES="redis-backend e2e-redis e2e-cluster redis-faults redis-edges lease-redis travel-redis redis-tls"
	redis_wanted=0
	for s in $REDIS_SUITES; do wanted "$s" && redis_wanted=1; done
	if [ $redis_wanted = 1 ]; then
		if [ ! -x "$BUILD/redis-backend-tests" ]; then
			for s in $REDIS_SUITES; do
				wanted $s && not_run $s "not built (meson setup -Dredis=disabled or no hiredis)"
			done
		elif ! command -v redis-server >/dev/null; then
			echo "== redis: redis-server is not installed (run scripts/deps.sh)"
			TOTAL_FAIL=$((TOTAL_FAIL + 1))
		else
			redis_start_standalone "$WORK/redis" && redis_start_cluster "$WORK/cluster" || {
				echo "== redis: cannot start test servers"
				TOTAL_FAIL=$((TOTAL_FAIL + 1))
			}
			run_suite redis-backend sh "$HERE/redis/run.sh" "$BUILD"
			run_suite e2e-redis env WSTORE_TEST_KIND=redis \
				WSTORE_TEST_STORE="$WSTORE_TEST_REDIS_URL" sh "$HERE/e2e/cli.sh"
			run_suite e2e-cluster env WSTORE_TEST_KIND=cluster \
				WSTORE_TEST_STORE="$WSTORE_TEST_CLUSTER_URL" sh "$HERE/e2e/cli.sh"
			run_suite redis-faults sh "$HERE/e2e/redis_faults.sh"
			run_suite redis-edges sh "$HERE/e2e/redis_edges.sh"
			run_suite lease-redis env WSTORE_TEST_KIND=redis \
				WSTORE_TEST_STORE="$WSTORE_TEST_REDIS_URL" sh "$HERE/e2e/lease.sh"
			run_suite travel-redis env TAP_SUITE=travel-redis \
				WSTORE_TEST_REDIS_URL="$WSTORE_TEST_REDIS_URL" \
				WSTORE_TEST_CLUSTER_URL="$WSTORE_TEST_CLUSTER_URL" \
				sh "$HERE/e2e/travel.sh"
			# starts its own TLS servers (rediss://, rediss-cluster://)
			run_suite redis-tls sh "$HERE/redis/tls.sh"
		fi
	fi
	# a small fleet: client nodes as network namespaces against a Redis Cluster
	# of its own (tests/fleet/bed.sh); without root or iproute2 its cases skip
	run_suite fleet sh "$HERE/fleet/fleet.sh"
	# every backend against the one conformance suite (the Redis servers above,
	# when they run; without them it starts its own)
	run_suite conformance sh "$HERE/conformance/run.sh" "$BUILD"

	# Suites against a real Mooncake Store (a master and a storage node started
	# here; the master discards a dead writer's half-written objects after 2 s
	# instead of 30).  Without Mooncake installed they are not run, and say
	# so: each counts as skipped.
	MC_SUITES="mooncake-real conformance-mooncake e2e-mooncake mooncake-faults travel-mooncake"
	mc_wanted=0
	for s in $MC_SUITES; do wanted "$s" && mc_wanted=1; done
	if [ $mc_wanted = 1 ] && ! mooncake_installed; then
		for s in $MC_SUITES; do
			wanted $s && not_run $s "Mooncake is not installed in $MOONCAKE_HOME"
		done
	elif [ $mc_wanted = 1 ]; then
		MOONCAKE_TEST_MASTER_ARGS=--put_start_discard_timeout_sec=2
		if ! mooncake_start "$WORK/mooncake" 500ms; then
			echo "== mooncake: cannot start a test cluster"
			TOTAL_FAIL=$((TOTAL_FAIL + 1))
		else
			run_suite mooncake-real env MOONCAKE_TEST_REAL=1 \
				"$BUILD/mooncake-backend-tests" "$BUILD"
			run_suite conformance-mooncake sh "$HERE/conformance/run.sh" \
				"$BUILD" mooncake
			run_suite e2e-mooncake env WSTORE_TEST_KIND=mooncake \
				WSTORE_TEST_STORE=mooncake sh "$HERE/e2e/cli.sh"
			run_suite mooncake-faults sh "$HERE/e2e/mooncake_faults.sh"
			# the Redis servers, when the Redis suites started them
			run_suite travel-mooncake env TAP_SUITE=travel-mooncake \
				WSTORE_TEST_MOONCAKE=1 \
				WSTORE_TEST_REDIS_URL="${WSTORE_TEST_REDIS_URL:-}" \
				sh "$HERE/e2e/travel.sh"
		fi
		mooncake_stop_all
	fi
}

if [ "$LANES" -ge 2 ]; then
	# the server lane in a subshell of its own: its counts come back
	# through files, its servers are stopped when it exits
	(
		trap 'redis_stop_all >/dev/null 2>&1; mooncake_stop_all >/dev/null 2>&1' EXIT
		trap 'exit 143' TERM INT
		TOTAL_PASS=0 TOTAL_FAIL=0 TOTAL_SKIP=0 RESULTS="" NOT_RUN=""
		lane_servers
		echo "$TOTAL_PASS $TOTAL_FAIL $TOTAL_SKIP" > "$WORK/lane2.counts"
		echo "$RESULTS" > "$WORK/lane2.results"
		echo "$NOT_RUN" > "$WORK/lane2.notrun"
	) > "$WORK/lane2.out" 2>&1 &
	LANE2=$!
	lane_local
	wait "$LANE2"
	LANE2=""
	cat "$WORK/lane2.out"
	if [ -s "$WORK/lane2.counts" ]; then
		read -r p f s < "$WORK/lane2.counts"
		TOTAL_PASS=$((TOTAL_PASS + p))
		TOTAL_FAIL=$((TOTAL_FAIL + f))
		TOTAL_SKIP=$((TOTAL_SKIP + s))
		RESULTS="$RESULTS$(cat "$WORK/lane2.results")"
		NOT_RUN="$NOT_RUN $(cat "$WORK/lane2.notrun")"
		NOT_RUN=$(echo $NOT_RUN)
		[ -n "$NOT_RUN" ] && NOT_RUN=" $NOT_RUN"
	else
		echo "== the server lane ended without its counts"
		TOTAL_FAIL=$((TOTAL_FAIL + 1))
	fi
else
	lane_local
	lane_servers
fi

echo
echo "suites:$RESULTS"
[ -n "$NOT_RUN" ] && echo "not run (counted as skipped):$NOT_RUN"
echo "$TOTAL_PASS passed, $TOTAL_FAIL failed, $TOTAL_SKIP skipped"
[ "$TOTAL_FAIL" = 0 ]
