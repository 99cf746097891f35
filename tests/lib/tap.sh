# tap.sh - tiny assertion helpers for the shell test suites.  Each check
# prints "ok - name" or "not ok - name" (with details); a check that cannot
# run prints "ok - name # SKIP reason" (TAP's form) and counts as skipped,
# never as passed; tap_done prints the "N passed, N failed, N skipped" line
# and returns non-zero if anything failed.  The e2e scripts source it
# through tests/lib/suite.sh (the shared prologue).
TAP_PASS=0
TAP_FAIL=0
TAP_SKIP=0
TAP_SUITE=${TAP_SUITE:-suite}

# suite_env NAME: W, the wstore binary of $BUILD; T, a fresh temporary
# directory wstore-NAME-XXXXXX (the caller traps its removal); a private
# HOME and WSTORE_HOME, and no config file (neither the user's nor the
# machine's /etc/wstore/config.json), so that none leaks in
suite_env() {
	W=$(cd "${BUILD:-build}" && pwd)/wstore
	T=$(mktemp -d "${TMPDIR:-/tmp}/wstore-$1-XXXXXX")
	export HOME="$T/home" WSTORE_CONFIG= WSTORE_HOME="$T/home-store"
	# under /nonexistent (Debian's home of no one): absent for every user,
	# also for a case run as another user who cannot enter $T
	export WSTORE_SYSTEM_CONFIG=/nonexistent/wstore-tests/config.json
	unset XDG_CONFIG_HOME XDG_DATA_HOME
	mkdir -p "$HOME"
}

# wait_for SECONDS CMD...: the one bounded wait of the suites.  Runs CMD
# (output discarded) every 0.05 s until it succeeds; returns 0 as soon as
# it did, 1 if it still fails after SECONDS (a whole number; the wait
# lasts at least SECONDS and at most SECONDS + 1, plus one run of CMD).
wait_for() {
	_wf_end=$(($(date +%s) + $1 + 1)); shift
	while [ "$(date +%s)" -lt "$_wf_end" ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	"$@" >/dev/null 2>&1 && return 0
	return 1
}

# wait_exit SECONDS PID: the exit status of the background job PID, waiting
# at most SECONDS; a job still running then is SIGKILLed, reaped, and 124
# returned (as timeout(1) does)
wait_exit() {
	_we_n=$(($1 * 20))
	while [ "$_we_n" -gt 0 ] && kill -0 "$2" 2>/dev/null; do
		sleep 0.05; _we_n=$((_we_n - 1))
	done
	if kill -0 "$2" 2>/dev/null; then
		echo "wait_exit: pid $2 still running after $1 s: killed" >&2
		kill -KILL "$2" 2>/dev/null
		wait "$2" 2>/dev/null
		return 124
	fi
	wait "$2"
}

# wait_all SECONDS: wait_exit SECONDS for each process in $pids (a bare
# "wait" would also wait for servers started from the same shell, and has
# no bound); returns how many did not exit 0, and empties $pids
pids=""
wait_all() {
	_wa_bad=0
	for _wa_p in $pids; do wait_exit "$1" "$_wa_p" || _wa_bad=$((_wa_bad + 1)); done
	pids=""
	return $_wa_bad
}

tap_ok() {
	TAP_PASS=$((TAP_PASS + 1))
	echo "ok - $TAP_SUITE: $1"
}

# tap_skip NAME REASON: a check that could not run (a tool or module
# missing, a case that cannot apply here), printed and counted as a skip
tap_skip() {
	TAP_SKIP=$((TAP_SKIP + 1))
	echo "ok - $TAP_SUITE: $1 # SKIP $2"
}

tap_not_ok() {
	TAP_FAIL=$((TAP_FAIL + 1))
	echo "not ok - $TAP_SUITE: $1"
	shift
	# every line of a detail marked, so that run.sh's summary keeps the
	# whole of it (a command of several lines, then its output)
	for line in "$@"; do printf '%s\n' "$line" | sed 's/^/#   /'; done
}

# check NAME CMD...: passes when CMD exits 0
check() {
	name=$1; shift
	if out=$("$@" 2>&1); then tap_ok "$name"
	else tap_not_ok "$name" "command: $*" "output: $(printf %s "$out" | tail -5)"; fi
}

# check_exit NAME STATUS CMD...: passes when CMD exits with STATUS; the
# output of CMD is kept in $OUT
check_exit() {
	name=$1; want=$2; shift 2
	OUT=$("$@" 2>&1); got=$?
	if [ "$got" = "$want" ]; then tap_ok "$name"
	else tap_not_ok "$name" "command: $*" "exit $got, wanted $want" "output: $(printf %s "$OUT" | tail -5)"; fi
}

# check_wait NAME STATUS SECONDS PID: the background job PID exits with
# STATUS within SECONDS (wait_exit; waited for in this shell: a zombie
# stays alive for kill -0 in a command substitution)
check_wait() {
	wait_exit "$3" "$4"; _cw=$?
	if [ "$_cw" = "$2" ]; then tap_ok "$1"
	else tap_not_ok "$1" "pid $4 exited $_cw, wanted $2"; fi
}

# check_grep NAME PATTERN TEXT: TEXT contains the (grep -E) PATTERN
check_grep() {
	if printf '%s\n' "$3" | grep -Eq -- "$2"; then tap_ok "$1"
	else tap_not_ok "$1" "wanted /$2/ in:" "$(printf %s "$3" | tail -5)"; fi
}

# check_one_line NAME TEXT: an error message is exactly one line
check_one_line() {
	n=$(printf '%s\n' "$2" | grep -c .)
	if [ "$n" = 1 ]; then tap_ok "$1"
	else tap_not_ok "$1" "wanted one line, got $n:" "$2"; fi
}

tap_done() {
	echo "$TAP_SUITE: $TAP_PASS passed, $TAP_FAIL failed, $TAP_SKIP skipped"
	[ "$TAP_FAIL" = 0 ]
}
