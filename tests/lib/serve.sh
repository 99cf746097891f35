# tests/lib/serve.sh - run `wstore serve` in tests, and helpers around it.
# POSIX sh; source after tap.sh (needs $W and $T from suite_env):
#
#   serve_start NAME STORE [ARGS...]  start `wstore --store STORE serve` on
#                                a free loopback port (port 0, read back
#                                from its log; http:// or, with --tls-cert,
#                                https://); sets SERVE_PID, SERVE_URL,
#                                SERVE_LOG; non-zero (after a not-ok line)
#                                if it did not come up within 10 s
#   serve_stop                   SIGTERM it and wait (bounded); SERVE_RC
#   serve_wait_exit              wait (bounded) for it to exit; SERVE_RC
#   serve_stop_all               SIGKILL every server still running
#   json_get KEY                 a top-level string of the JSON on stdin
#   urlenc PATH                  percent-encode a path (keeps '/')
#   rss_kb PID                   resident set size in kB
#   load_clients URL FILE N SECONDS DIR
#                                N clients download URL in a loop for
#                                SECONDS (each at least once), each result
#                                compared with FILE;
#                                sets LOAD_OK and LOAD_BAD
# (wait_for is tap.sh's.)
#
# Every curl of a suite that sources this is bounded (WSTORE_CURL_MAX_TIME
# seconds, 120 unless set; a --max-time of its own comes later on the
# command line and wins): a server that stops answering fails a check
# instead of eating the suite's whole timeout.
curl() { command curl --max-time "${WSTORE_CURL_MAX_TIME:-120}" "$@"; }
_SERVE_PIDS=""

serve_start() {
	_name=$1; _store=$2; shift 2
	SERVE_LOG="$T/serve-$_name.log"
	"$W" --store "$_store" serve --listen 127.0.0.1:0 "$@" 2>"$SERVE_LOG" &
	SERVE_PID=$!
	_SERVE_PIDS="$_SERVE_PIDS $SERVE_PID"
	if ! wait_for 10 grep -q 'listening on https\{0,1\}://' "$SERVE_LOG"; then
		tap_not_ok "serve ($_name) did not start" "$(tail -5 "$SERVE_LOG")"
		return 1
	fi
	_port=$(sed -n 's|.*listening on https\{0,1\}://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$SERVE_LOG" | head -1)
	_scheme=$(sed -n 's|.*listening on \(https\{0,1\}\)://.*|\1|p' "$SERVE_LOG" | head -1)
	SERVE_URL="$_scheme://127.0.0.1:$_port"
	return 0
}

serve_wait_exit() {
	SERVE_RC=timeout
	if wait_for 20 sh -c "! kill -0 $SERVE_PID"; then
		wait "$SERVE_PID"
		SERVE_RC=$?
	else
		kill -9 "$SERVE_PID" 2>/dev/null
	fi
}

serve_stop() {
	kill -TERM "$SERVE_PID" 2>/dev/null
	serve_wait_exit
}

serve_stop_all() {
	for _p in $_SERVE_PIDS; do kill -9 "$_p" 2>/dev/null; done
	_SERVE_PIDS=""
}

json_get() {
	python3 -c 'import json, sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$1"
}

urlenc() {
	python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$1"
}

rss_kb() {
	awk '/^VmRSS/ {print $2}' /proc/"$1"/status
}

load_clients() {
	_url=$1; _file=$2; _n=$3; _secs=$4; _dir=$5
	mkdir -p "$_dir"
	_end=$(($(date +%s) + _secs))
	_i=0
	_pids=""
	while [ "$_i" -lt "$_n" ]; do
		(
			ok=0; bad=0
			# at least one download each, however late the client
			# starts on a loaded machine
			_first=1
			while [ "$_first" = 1 ] || [ "$(date +%s)" -lt "$_end" ]; do
				_first=0
				if curl -sf "$_url" | cmp -s - "$_file"; then
					ok=$((ok + 1))
				else
					bad=$((bad + 1))
				fi
			done
			echo "$ok $bad" > "$_dir/$_i"
		) &
		_pids="$_pids $!"
		_i=$((_i + 1))
	done
	for _p in $_pids; do wait_exit 300 "$_p"; done
	LOAD_OK=$(cat "$_dir"/* | awk '{s += $1} END {print s + 0}')
	LOAD_BAD=$(cat "$_dir"/* | awk '{s += $2} END {print s + 0}')
}

# serve_idle_checks WHAT REPO BIG [CA]: 300 careless sockets against the
# running server (tests/tools/idlesocks.py; with CA over HTTPS), then the
# checks: /healthz and a download of BIG (a local copy of a file of REPO's
# main) answered at once, the idle sockets closed after the header timeout.
# WHAT names the sockets in the checks' names.
serve_idle_checks() {
	_ic=$T/idle.out
	/usr/bin/python3 "$HERE/tools/idlesocks.py" "$SERVE_URL" "$2" "$3" "$_ic" ${4:+"$4"}
	echo "# $(tr '\n' ' ' < "$_ic")"
	if grep -q '^healthz ok' "$_ic" && awk '/^healthz/ {exit !($3 < 3)}' "$_ic"; then
		tap_ok "$1: /healthz answers at once"
	else tap_not_ok "$1: /healthz answers at once" "$(cat "$_ic")"; fi
	if grep -q '^download ok' "$_ic" && awk '/^download/ {exit !($3 < 5)}' "$_ic"; then
		tap_ok "$1: a download completes at once"
	else tap_not_ok "$1: a download completes at once" "$(cat "$_ic")"; fi
	check_grep "$1: closed by the server after the header timeout" \
		'^closed 300$' "$(cat "$_ic")"
}
