# tests/lib/fakehub.sh - tests/tools/fakehub.py, the Hub upstream that
# misbehaves on request, for the suites that import from one (hub-import,
# serve-mirror).  POSIX sh; source after suite.sh (needs $T and wait_for):
#
#   fakehub_source DIR  fill DIR with what the fake serves as org/fake: a
#                       checkpoint of two shards (2 MB) and sub/c.txt
#   fakehub_start DIR   start the fake serving DIR on free loopback ports;
#                       sets FAKE_PID, FP and CP (its port and its CDN's),
#                       F (its URL), CTL (its control file, holding {}) and
#                       LOG (its request log); non-zero after a not-ok line
#                       if it did not come up within 60 s
#   fakehub_ctl JSON    what the next requests get wrong (fakehub.py lists
#                       the keys), and an empty log
#   fakehub_gets PATH   how many requests for PATH's bytes the log holds
#   fakehub_stop        SIGKILL it and reap it (a suite's cleanup calls it)
FAKE_PID=

fakehub_source() {
	/usr/bin/python3 "$HERE/tools/mkckpt.py" "$1" --size 2000000 \
		--shards 2 >/dev/null
	mkdir -p "$1/sub"
	printf 'hello\n' > "$1/sub/c.txt"
}

fakehub_start() {
	CTL="$T/ctl.json"
	LOG="$T/fake.log"
	printf '{}\n' > "$CTL"
	/usr/bin/python3 "$HERE/tools/fakehub.py" "$1" "$CTL" "$LOG" \
		"$T/fakeports" 2>"$T/fake.err" &
	FAKE_PID=$!
	if ! wait_for 60 test -s "$T/fakeports"; then
		tap_not_ok "fake upstream did not start" "$(tail -3 "$T/fake.err")"
		return 1
	fi
	read -r FP CP < "$T/fakeports"
	F="http://127.0.0.1:$FP"
}

fakehub_ctl() { printf '%s\n' "$1" > "$CTL"; : > "$LOG"; }

fakehub_gets() { grep -c " /org/fake/resolve/[0-9a-f]*/$1 " "$LOG"; }

fakehub_stop() {
	[ -n "$FAKE_PID" ] || return 0
	kill -9 "$FAKE_PID" 2>/dev/null
	wait "$FAKE_PID" 2>/dev/null
	FAKE_PID=
}
