#!/bin/sh
# lease.sh - read leases, delete --wait / --force, pins, df, quota and
# eviction, end to end through the CLI and the Python binding (suite
# "lease-KIND"), on the file store, Redis (WSTORE_TEST_KIND=redis,
# WSTORE_TEST_STORE its URL) or the Mooncake stand-in (kind mooncake, the
# lease-set record of stores that cannot list).
#  - a slow reader (a pull slowed by the fault backend's delay=MS, an open
#    Python handle, a file held open in a mount) makes a delete refuse,
#    naming the holder; --wait completes once it ends; --wait that times
#    out leaves the checkpoint READY and listed; --force wins and the
#    reader fails cleanly; a SIGKILLed reader on this host holds nothing,
#    one "on another host" (its own UTS namespace) until the lease TTL
#  - 16 concurrent readers and one deleter: no reader sees wrong bytes,
#    the delete names the holders or waits
#  - pins, df, last-read times; eviction order (gc --evict-to) with a
#    chosen read order, pinned and leased checkpoints surviving; the
#    quota refusing an import before its first write, and evicting with
#    "evict": "lru"; an import that cannot fit the store's free space
KIND=${WSTORE_TEST_KIND:-file}
TAP_SUITE=lease-$KIND
. "$(dirname "$0")/../lib/suite.sh"
. "$HERE/lib/redis.sh"
. "$HERE/lib/serve.sh"
. "$HERE/lib/mooncake.sh"
PY=/usr/bin/python3
MNT="$T/mnt"
SMALL="$T/small"
PIDS=""
suite_cleanup() {
	for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
	serve_stop_all
	mooncake_stop_all >/dev/null 2>&1
	grep -q " $MNT fuse" /proc/mounts 2>/dev/null && "$W" umount "$MNT" 2>/dev/null
	grep -q " $SMALL " /proc/mounts 2>/dev/null && umount "$SMALL" 2>/dev/null
}

case $KIND in
file) S="$T/store" ;;
mooncake)
	# the contract stand-in: a port that only accepts stands for its master
	S=mooncake; export MOONCAKE_STANDIN_DIR="$T/mooncake"
	mooncake_fake_master || { tap_not_ok "cannot start a fake master"; tap_done; exit 1; }
	export WSTORE_MASTER_SERVER_ADDR="$MOONCAKE_TEST_FAKE_MASTER" ;;
*) S=$WSTORE_TEST_STORE ;;
esac
# short leases so that expiry is seen quickly; every read records its time
export WSTORE_LEASE_TTL_MS=1500 WSTORE_LAST_READ_INTERVAL_MS=0
# the lease set of a store without list is renewed under a lock: with
# every call slowed by 100 ms a renewal takes most of a second
[ "$KIND" = mooncake ] && WSTORE_LEASE_TTL_MS=4000
export WSTORE_KEY_PREFIX="lease-$$-"
export WSTORE_LIBRARY=$(dirname "$W")/libwstore.so
export PYTHONPATH="$HERE/../python${PYTHONPATH:+:$PYTHONPATH}"
ws() { "$W" --store "$S" "$@"; }

SRC="$T/src"
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 200000 --shards 2 >/dev/null
imp() { ws -q model import --checkpoint-id "$1" --model-id "M/$1" \
	--source "$SRC" --chunk-size 16K >/dev/null; }

# nleases ID: live leases of ID as df counts them
nleases() {
	ws --json df 2>/dev/null | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
print(sum(c["leases"] for c in d["checkpoints"] if c["checkpoint_id"] == sys.argv[1]))' "$1"
}
has_leases() { [ "$(nleases "$1")" -ge "${2:-1}" ]; }
no_leases() { [ "$(nleases "$1")" = 0 ]; }
is_ready() { ws --json model inspect "$1" 2>/dev/null | grep -q '"status": *"READY"'; }
listed() { ws model list 2>/dev/null | grep -q "^$1 "; }
gone() { ! ws model inspect "$1" >/dev/null 2>&1 && ! listed "$1"; }
# dest_ok DIR: every file present in a pull destination equals the source
dest_ok() {
	[ -d "$1" ] || return 0
	(cd "$1" && find . -type f ! -name '.*wstore-tmp*' ! -name '.wstore-part-*') | while read -r f; do
		cmp -s "$1/$f" "$SRC/$f" || { echo "wrong bytes: $f"; exit 1; }
	done
}
# slow_pull ID DEST [MS]: a pull whose every store call takes MS (100) ms;
# $! is the wstore process itself
slow_pull() {
	env WSTORE_FAULTS="delay=${3:-100}" "$W" --store "fault+$S" -q \
		model pull "$1" --dest "$2" --jobs 1 --no-verify >"$2.log" 2>&1 &
}

# ns_kill PID: SIGKILL what unshare PID runs in its new PID namespace (the
# namespace's init, which only a signal from outside it can kill), and reap
# unshare
ns_kill() {
	for _c in $(pgrep -P "$1"); do kill -KILL "$_c" 2>/dev/null; done
	wait "$1" 2>/dev/null
}
# in_ns HOST CMD...: run CMD in a new PID namespace as a container's
# process would run: under a pid that names no process here (the
# namespace's init is a shell that forks CMD at that pid).  HOST "-" keeps
# the host name; another one gets its own UTS namespace with that name.
in_ns() {
	_p=20000; while [ -e /proc/$_p ]; do _p=$((_p + 1)); done
	if [ "$1" != - ]; then _u=--uts; else _u=; fi
	unshare $_u --pid --fork --kill-child sh -c '
		[ "$2" = - ] || hostname "$2" || exit 125
		echo $(($1 - 1)) >/proc/sys/kernel/ns_last_pid || exit 125
		shift 2; "$@"' sh "$_p" "$@"
}
# busy ID: a delete of ID is refused because its lock is held
busy() { ws model delete "$1" 2>&1 | grep -q "is busy"; }
# locked ID: ID's lock record exists, looked at without taking the lock (a
# delete probing for "busy" holds the lock for a moment itself, and an
# import starting in that moment is refused as busy); on Mooncake, the
# stand-in's object files
locked() {
	case $KIND in
	file) [ -e "$S/weight/locks/models/$1" ] ;;
	redis) [ "$(redis_cli "$WSTORE_TEST_REDIS_PORT" exists \
		"${WSTORE_KEY_PREFIX:-}weight/locks/models/$1" | tr -dc 0-9)" = 1 ] ;;
	mooncake) ls "$MOONCAKE_STANDIN_DIR/objects" | grep -q "^weight%2Flocks%2Fmodels%2F$1\$" ;;
	*) busy "$1" ;;
	esac
}
# ms_since T0: milliseconds since $(date +%s%N) was T0
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# ---- a slow pull blocks delete; --wait completes when it ends -------------
imp a
slow_pull a "$T/p1"; P=$!; PIDS="$PIDS $P"
check "a pull takes a read lease" wait_for 30 has_leases a
# (a reader that has its lease but has not read the manifest yet is
# refused by a delete --wait; this one has: it made its destination)
check "... and starts writing" wait_for 30 test -d "$T/p1"
check_exit "delete of a checkpoint being pulled is refused" 1 ws model delete a
check_grep "the refusal names the holder and when its lease expires" \
	"is being read \(1 lease\): pull by pid $P on host '[^']+' \(lease expires in [0-9]+ s\); use --wait" "$OUT"
check_one_line "the refusal is one line" "$OUT"
check "a refused delete leaves it READY and listed" sh -c "$(command -v "$W") --store '$S' model list | grep -q '^a '"
check_exit "gc --evict-to 0 leaves a leased checkpoint" 1 ws gc --evict-to 0
check "... and it is still READY" is_ready a
if [ "$KIND" != mooncake ]; then
	check_exit "gc runs while it is read" 0 ws gc --grace 0
	check_grep "... and leaves it alone, saying why" "skipped 'a': being read: pull by pid $P" "$OUT"
else
	tap_skip "gc runs while it is read" "mooncake cannot list keys (no gc)"
fi
ws model delete a --wait 120 >"$T/del.out" 2>&1 & D=$!
check_wait "the pull finishes" 0 120 "$P"
check_wait "delete --wait completes once the pull has ended" 0 60 "$D"
check "the pulled files are the source's" diff -r "$SRC" "$T/p1"
check "the checkpoint is gone" gone a

# ---- an open Python handle; --wait that times out puts it back ------------
imp a
FIFO="$T/fifo"; mkfifo "$FIFO"
cat > "$T/hold.py" <<'EOF'
import sys, wstore
s = wstore.Store(sys.argv[1])
ck = s.open(sys.argv[2])
print("open", flush=True)
sys.stdin.readline()
f = ck.open("config.json")
data = f.read()
ck.close()
print("read", len(data), flush=True)
EOF
"$PY" "$T/hold.py" "$S" a <"$FIFO" >"$T/hold.out" 2>&1 & H=$!; PIDS="$PIDS $H"
exec 7>"$FIFO"
check "an open Python handle holds a lease" wait_for 30 has_leases a
check_exit "delete refuses while a Python handle is open" 1 ws model delete a
check_grep "... naming it" "read by pid $H on host" "$OUT"
check_exit "delete --wait 0.5 times out" 1 ws model delete a --wait 0.5
check_grep "... saying it is still read" "still read after --wait" "$OUT"
check "after the timeout the checkpoint is READY and listed again" sh -c \
	"'$W' --store '$S' --json model inspect a | grep -q READY && '$W' --store '$S' model list | grep -q '^a '"
"$W" --store "$S" model delete a --wait 60 >"$T/del.out" 2>&1 7>&- & D=$!
echo go >&7; exec 7>&-
check_wait "the handle reads and closes" 0 60 "$H"
check_grep "... with the right bytes" "^read $(wc -c <"$SRC/config.json")$" "$(cat "$T/hold.out")"
check_wait "delete --wait completes once the handle is closed" 0 60 "$D"
check "the checkpoint is gone" gone a

# ---- --force wins; the reader fails cleanly --------------------------------
imp a
slow_pull a "$T/p2"; P=$!; PIDS="$PIDS $P"
check "the pull holds a lease" wait_for 30 has_leases a
check_exit "delete --force deletes a checkpoint being read" 0 ws model delete a --force
check_wait "the reader fails" 1 120 "$P"
check "... cleanly: no file with wrong bytes in its destination" dest_ok "$T/p2"
check_grep "... and says it was deleted (or, not opened yet, is gone)" "was deleted or replaced by another import|not found|FAILED" "$(cat "$T/p2.log")"
check "the checkpoint is gone" gone a

# ---- the Python binding: delete with wait and force --------------------------
imp a
cat > "$T/pydel.py" <<'EOF'
import sys, wstore
s = wstore.Store(sys.argv[1])
ck = s.open("a")
try:
    s.delete("a")
    print("not refused")
except wstore.Busy as e:
    print("busy:", e)
try:
    s.delete("a", wait=0.3)
    print("not refused after wait")
except wstore.Busy:
    print("still busy after wait")
ck2 = s.open("a")
print("ready")
ck2.close()
ck.close()
s.delete("a", wait=10)
print("deleted")
EOF
check_exit "Python: Store.delete of an open checkpoint" 0 "$PY" "$T/pydel.py" "$S"
check_grep "... raises Busy naming the reader" "^busy: .*read by pid [0-9]+" "$OUT"
check_grep "... and with wait= that runs out too, leaving it READY" "still busy after wait
ready" "$OUT"
check_grep "... and succeeds once the handle is closed" "^deleted$" "$OUT"
check "the checkpoint is gone" gone a

# ---- SIGKILLed readers ------------------------------------------------------
imp a
slow_pull a "$T/p3"; P=$!; PIDS="$PIDS $P"
check "a pull to be killed holds a lease" wait_for 30 has_leases a
kill -KILL "$P"; wait "$P" 2>/dev/null
check_exit "a SIGKILLed reader on this host holds nothing: delete succeeds at once" \
	0 ws model delete a
imp a
if unshare --uts --pid --fork --kill-child true 2>/dev/null; then
	# another host name and another PID namespace: the reader's pid means
	# nothing here, so only its lease time ends its lease
	in_ns lease-other-host env WSTORE_FAULTS=delay=100 \
		"$W" --store "fault+$S" -q model pull a --dest "$T/p4" --jobs 1 \
		>/dev/null 2>&1 & P=$!; PIDS="$PIDS $P"
	check "a reader on another host (its own UTS and PID namespaces) holds a lease" \
		wait_for 30 has_leases a
	if [ "$KIND" = redis ]; then
		lk=$(redis_cli "$WSTORE_TEST_REDIS_PORT" --scan --pattern "${WSTORE_KEY_PREFIX}weight/leases/models/a/*" | head -1)
		ttl=$(redis_cli "$WSTORE_TEST_REDIS_PORT" pttl "$lk" | tr -dc 0-9-)
		if [ -n "$lk" ] && [ "${ttl:-0}" -gt 0 ] && [ "$ttl" -le "$WSTORE_LEASE_TTL_MS" ]; then
			tap_ok "on Redis the lease key expires on the server (PTTL $ttl ms)"
		else
			tap_not_ok "on Redis the lease key expires on the server" "key '$lk' PTTL '$ttl'"
		fi
	fi
	ns_kill "$P"
	t0=$(date +%s%N)
	check_exit "right after its SIGKILL its lease still blocks a delete" 1 \
		ws model delete a
	check_grep "... naming that host" "lease-other-host" "$OUT"
	check "its lease expires after the TTL ($WSTORE_LEASE_TTL_MS ms)" wait_for 20 no_leases a
	t1=$(date +%s%N)
	if [ $(( (t1 - t0) / 1000000 )) -le $((WSTORE_LEASE_TTL_MS + 4500)) ]; then tap_ok "... within the TTL and a margin ($(( (t1 - t0) / 1000000 )) ms)"
	else tap_not_ok "... within the TTL and a margin" "took $(( (t1 - t0) / 1000000 )) ms"; fi
	check_exit "then the delete succeeds" 0 ws model delete a
else
	tap_not_ok "unshare --uts --pid is not available (run as root): cannot fake another host"
	ws model delete a --force >/dev/null
fi

# ---- owners in another PID namespace, with the same host name ---------------
# (containers that share the host's UTS namespace: the host name is the
# same, the pids mean nothing here)
if unshare --pid --fork --kill-child true 2>/dev/null; then
	# locks renew their lease time every TTL/3, and every call of the slow
	# owner (a renewal too) takes 300 ms and more on a busy machine: a TTL
	# of 1.5 s let a loaded run see the lock lapse (and be taken over)
	LTTL=4000
	export WSTORE_LOCK_TTL_MS=$LTTL
	# imp_ns ID: a slow import of ID in a new PID namespace ($! is unshare)
	imp_ns() {
		in_ns - env WSTORE_FAULTS=delay=300 "$W" --store "fault+$S" -q model import --checkpoint-id "$1" \
			--model-id "M/$1" --source "$SRC" --chunk-size 16K --jobs 1 \
			>"$T/$1.log" 2>&1 &
	}
	imp_ns n1; P=$!; PIDS="$PIDS $P"
	if wait_for 60 locked n1 && busy n1; then
		tap_ok "an import in another PID namespace holds its checkpoint's lock"
	else
		tap_not_ok "an import in another PID namespace holds its checkpoint's lock" \
			"import: $(tail -3 "$T/n1.log")" "delete: $(ws model delete n1 2>&1)"
	fi
	# a second import of the id, over and over for longer than the lock's
	# TTL: each one is refused, none takes the lock over
	t0=$(date +%s%N); tries=0; bad=""
	while [ "$(ms_since "$t0")" -lt $((LTTL + 1000)) ]; do
		tries=$((tries + 1))
		out=$(ws -q model import --checkpoint-id n1 --model-id M/n1 \
			--source "$SRC" --chunk-size 16K 2>&1) && { bad="try $tries succeeded"; break; }
		printf %s "$out" | grep -q "is busy" || { bad="try $tries: $out"; break; }
	done
	if [ -z "$bad" ]; then
		tap_ok "a second import of that id is refused as busy, $tries times over $((LTTL + 1000)) ms"
	else
		tap_not_ok "a second import of that id is refused as busy for longer than the lock's TTL" "$bad"
	fi
	check_wait "the import in the other namespace completes" 0 120 "$P"
	check_exit "... and its checkpoint verifies" 0 ws model verify n1
	ws model delete n1 >/dev/null 2>&1

	# a live reader in another namespace: its lease is not purged
	imp a
	in_ns - env WSTORE_FAULTS=delay=100 \
		"$W" --store "fault+$S" -q model pull a --dest "$T/p5" --jobs 1 \
		--no-verify >"$T/p5.log" 2>&1 & P=$!; PIDS="$PIDS $P"
	check "a reader in another PID namespace holds a lease" wait_for 30 has_leases a
	check_exit "a delete refuses while it reads" 1 ws model delete a
	check_grep "... naming it" "is being read \(1 lease\): pull by pid [0-9]+ on host" "$OUT"
	check_exit "... and so does gc --evict-to 0" 1 ws gc --evict-to 0
	check_wait "the reader completes" 0 120 "$P"
	check "... with the source's bytes" diff -r "$SRC" "$T/p5"

	# a pull in another namespace, SIGKILLed midway: its temp files carry
	# an owner this namespace cannot judge, so a pull from here keeps them
	# (in this namespace a killed pull's are proven dead and removed)
	in_ns - env WSTORE_FAULTS=delay=100 \
		"$W" --store "fault+$S" -q model pull a --dest "$T/p8" --jobs 1 \
		--no-verify >"$T/p8.log" 2>&1 & P=$!; PIDS="$PIDS $P"
	if wait_for 60 sh -c "test \$(find '$T/p8' -name '.*wstore-*' 2>/dev/null | wc -l) -gt 0"; then
		ns_kill "$P"
		before=$(find "$T/p8" -name '.*wstore-*' | sort)
		check_exit "a pull from here next to them succeeds" 0 ws -q model pull a --dest "$T/p8"
		check "... with the source's bytes" diff -r -x '.*wstore-*' "$SRC" "$T/p8"
		after=$(find "$T/p8" -name '.*wstore-*' | sort)
		if [ -n "$before" ] && [ "$before" = "$after" ]; then
			tap_ok "... and keeps the temp files of the other namespace's pull"
		else
			tap_not_ok "... and keeps the temp files of the other namespace's pull" \
				"before: $before" "after: $after"
		fi
	else
		ns_kill "$P"
		tap_not_ok "the pull in another namespace makes a temp file" "$(cat "$T/p8.log")"
	fi
	# its lease cannot be judged from here either: it holds until its
	# lease time runs out, and then a delete goes through
	check_exit "once the killed pull's lease time has run out, a delete --wait goes through" 0 \
		ws model delete a --wait 60

	# a SIGKILLed import in another namespace: its lock holds until its
	# lease time runs out, then the next import takes it over
	imp_ns n2; P=$!; PIDS="$PIDS $P"
	wait_for 60 locked n2
	check "a second slow import in another namespace holds its lock" busy n2
	ns_kill "$P"
	t0=$(date +%s%N)
	check "right after its SIGKILL its lock still holds" busy n2
	check "the lock is taken over once its lease time has run out" wait_for 60 \
		ws -q model import --checkpoint-id n2 --model-id M/n2 --source "$SRC" --chunk-size 16K
	el=$(ms_since "$t0")
	if [ "$el" -le $((LTTL + 6000)) ]; then tap_ok "... within the TTL and a margin ($el ms)"
	else tap_not_ok "... within the TTL and a margin" "took $el ms"; fi
	check_exit "... and the new import's checkpoint verifies" 0 ws model verify n2
	ws model delete n2 >/dev/null 2>&1
	unset WSTORE_LOCK_TTL_MS
else
	tap_not_ok "unshare --pid is not available (run as root): cannot test other PID namespaces"
fi

# ---- a stopped reader holds no other reader up; SIGTERM ends a wait ----------
# The last-read time is advisory: a reader that finds its record busy (its
# lock held by a reader stopped with SIGSTOP right then) goes on without
# writing it.  Commands that must wait (a pin) wait a bounded time and end
# within a second or two of SIGTERM.  (Redis updates never block.)
STOPPED=""
case $KIND in
file)
	imp s1
	# a reader stopped while it holds the record's file lock (update())
	mkdir -p "$S/.locks"
	lf="$S/.locks/$(printf %s weight/meta/models/s1 | sha256sum | cut -c1-64)"
	sh -c 'exec 9>"$1" && flock -x 9 && kill -STOP $$' sh "$lf" & STOPPED=$!
	PIDS="$PIDS $STOPPED" ;;
mooncake)
	imp s1
	# a slow reader, stopped while it holds the record's lock object
	env WSTORE_FAULTS=delay=300 "$W" --store "fault+$S" -q model verify s1 \
		>/dev/null 2>&1 & STOPPED=$!; PIDS="$PIDS $STOPPED"
	meta_locked() { ls "$MOONCAKE_STANDIN_DIR/objects" | grep -q '^weight%2Flocks%2Fmeta%2Fs1$'; }
	if wait_for 60 meta_locked; then kill -STOP "$STOPPED"
	else tap_not_ok "the slow reader never took the record's lock"; fi ;;
esac
if [ -n "$STOPPED" ]; then
	check "the holder is stopped" wait_for 10 sh -c "awk '{ exit \$3 != \"T\" }' /proc/$STOPPED/stat"
	t0=$(date +%s%N)
	check_exit "a verify of the same checkpoint is not held up" 0 timeout 60 "$W" --store "$S" -q model verify s1
	el=$(ms_since "$t0")
	if [ "$el" -lt 10000 ]; then tap_ok "... it takes $el ms"
	else tap_not_ok "... it is not held up" "took $el ms"; fi
	check_exit "nor a pull" 0 timeout 60 "$W" --store "$S" -q model pull s1 --dest "$T/p6"
	check_exit "nor a materialize" 0 timeout 60 "$W" --store "$S" -q model materialize-file s1 --path config.json --output "$T/m6"
	# a pin must wait for the record: bounded, and SIGTERM ends it
	"$W" --store "$S" model pin s1 >"$T/pin.out" 2>&1 & PN=$!
	sleep 1
	if kill -0 "$PN" 2>/dev/null; then tap_ok "a pin waits for the busy record"
	else tap_not_ok "a pin waits for the busy record" "$(cat "$T/pin.out")"; fi
	t0=$(date +%s%N); kill -TERM "$PN"
	wait_exit 30 "$PN"; rc=$?; el=$(ms_since "$t0")
	if [ "$rc" = 1 ] && [ "$el" -le 2000 ]; then tap_ok "SIGTERM ends the waiting pin within 2 s ($el ms)"
	else tap_not_ok "SIGTERM ends the waiting pin within 2 s" "exit $rc after $el ms: $(cat "$T/pin.out")"; fi
	check_grep "... saying it was interrupted" "interrupted" "$(cat "$T/pin.out")"
	check_one_line "... in one line" "$(cat "$T/pin.out")"
	# left alone, the wait ends by itself: WSTORE_LOCK_WAIT_MS per holder,
	# three times that in all
	t0=$(date +%s%N)
	check_exit "with WSTORE_LOCK_WAIT_MS=500 a pin gives up by itself" 1 \
		env WSTORE_LOCK_WAIT_MS=500 timeout 60 "$W" --store "$S" model pin s1
	el=$(ms_since "$t0")
	check_grep "... saying the record is held" "held by another process for over [0-9]+ ms|locked by .*gave up after" "$OUT"
	if [ "$el" -ge 400 ] && [ "$el" -le 10000 ]; then tap_ok "... after $el ms (0.5 s for one holder, 1.5 s in all, and its calls)"
	else tap_not_ok "... after about 0.5 to 1.5 s" "took $el ms"; fi
	kill -KILL "$STOPPED"; wait "$STOPPED" 2>/dev/null
	check_exit "once the holder is gone the pin goes through" 0 ws model pin s1
	ws model unpin s1 >/dev/null; ws model delete s1 >/dev/null
fi

# ---- a file held open in a mount ---------------------------------------------
if [ "$KIND" = file ]; then
	imp a
	mkdir -p "$MNT"
	if [ -c /dev/fuse ] && ws mount "$MNT" --refresh 0.5 >/dev/null 2>&1; then
		check "an unopened mounted checkpoint holds no lease" no_leases a
		exec 8<"$MNT/a/config.json"
		check "a file held open in the mount holds a lease" wait_for 10 has_leases a
		check_exit "delete refuses while a mounted file is open" 1 ws model delete a
		check_grep "... naming the mount" "mount by pid [0-9]+" "$OUT"
		# (the background delete must not inherit the open file: not
		# through a function, whose subshell would keep a saved copy)
		"$W" --store "$S" model delete a --wait 60 >"$T/del.out" 2>&1 8<&- & D=$!
		check "the checkpoint leaves the listing" wait_for 10 sh -c "! ls '$MNT' | grep -qx a"
		check "the open file still reads the right bytes while delete waits" \
			sh -c "cmp - '$SRC/config.json' <&8"
		exec 8<&-
		check_wait "delete --wait completes once the file is closed" 0 60 "$D"
		"$W" umount "$MNT" >/dev/null 2>&1
	else
		tap_not_ok "cannot mount (no /dev/fuse or no permission)"
		ws model delete a --force >/dev/null 2>&1
	fi
else
	tap_skip "a file held open in a mount holds a lease" "the mount suites run on the file store"
fi

# ---- 16 concurrent readers and one deleter ------------------------------------
imp b
RP=""
for i in $(seq 1 16); do
	slow_pull b "$T/r$i" 40; RP="$RP $!"
done
PIDS="$PIDS $RP"
all_started() { for i in $(seq 1 16); do test -d "$T/r$i" || return 1; done; }
check "the readers hold leases" wait_for 60 has_leases b 4
check "... and all of them have started writing" wait_for 60 all_started
check_exit "a plain delete refuses while they read" 1 ws model delete b
check_grep "... naming the holders" "is being read \([0-9]+ leases?\): pull by pid [0-9]+ on host '[^']+' \(lease expires in" "$OUT"
ws model delete b --wait 300 >"$T/del.out" 2>&1 & D=$!
# readers arriving while the delete waits: refused, or served in full
LP=""
for i in 1 2 3 4; do
	slow_pull b "$T/late$i" 10; LP="$LP $!"
done
ok=1
for p in $RP; do wait_exit 300 "$p" || ok=0; done
if [ $ok = 1 ]; then tap_ok "all 16 readers that started first finish their pull"
else tap_not_ok "all 16 readers that started first finish their pull" "$(cat "$T"/r*.log | sort | uniq -c | head -5)"; fi
ok=1
for i in $(seq 1 16); do diff -r "$SRC" "$T/r$i" >/dev/null 2>&1 || ok=0; done
[ $ok = 1 ] && tap_ok "every one of them has exactly the source's bytes" ||
	tap_not_ok "every one of them has exactly the source's bytes"
check_wait "the delete completes once they are done" 0 300 "$D"
sed 's/^/# delete: /' "$T/del.out"; ls "$T/store/weight/leases/models/b" 2>/dev/null | sed 's/^/# lease: /'
ok=1; detail=""
for i in 1 2 3 4; do
	wait_exit 120 "$(echo $LP | cut -d' ' -f$i)"; rc=$?
	if [ $rc = 0 ]; then diff -r "$SRC" "$T/late$i" >/dev/null 2>&1 || { ok=0; detail="late$i: incomplete"; }
	else dest_ok "$T/late$i" >/dev/null || { ok=0; detail="late$i: wrong bytes"; }
	fi
done
[ $ok = 1 ] && tap_ok "late readers are refused or served in full, never wrong bytes" ||
	tap_not_ok "late readers are refused or served in full, never wrong bytes" "$detail"
check "the checkpoint is gone" gone b

# ---- wstore serve: a lease per response ----------------------------------------
# (a file larger than the socket buffers, read slowly: the server is still
# sending it when the delete comes)
SV="$T/sv"
python3 "$HERE/tools/mkckpt.py" "$SV" --size 16000000 --shards 1 >/dev/null
ws -q model import --checkpoint-id sv --model-id M/sv --source "$SV" >/dev/null
SHARD=model.safetensors
[ -f "$SV/$SHARD" ] || SHARD=$(cd "$SV" && ls -S | head -1)
# (one retry: on a loaded machine the first download may be done before
# the poll sees it; the diagnostics of a miss are printed)
seen=0
for attempt in 1 2; do
	serve_start lease$attempt "$S" || break
	curl -sf --limit-rate 1M "$SERVE_URL/M/sv/resolve/main/$SHARD" -o "$T/dl" & C=$!
	PIDS="$PIDS $C"
	if wait_for 30 has_leases sv; then seen=1; break; fi
	echo "# attempt $attempt: no lease seen"
	ws --json df 2>&1 | tr -d '\n' | sed 's/^/#   df: /'; echo
	ps -p $C -o pid,etime,args | sed 's/^/#   curl: /'
	kill "$C" 2>/dev/null; wait "$C" 2>/dev/null
	serve_stop
done
if [ $seen = 1 ]; then
	tap_ok "a download in flight holds a lease"
	check_exit "delete refuses while a download is in flight" 1 ws model delete sv
	check_grep "... naming the server" "serve by pid $SERVE_PID" "$OUT"
	"$W" --store "$S" model delete sv --wait 120 >"$T/del.out" 2>&1 & D=$!
	check_wait "the download completes" 0 120 "$C"
	check "... with the right bytes" cmp -s "$T/dl" "$SV/$SHARD"
	check_wait "delete --wait completes once the response is done" 0 60 "$D"
	serve_stop
else
	tap_not_ok "a download in flight holds a lease"
	ws model delete sv --force >/dev/null 2>&1
fi

# ---- pins, df, last read ----------------------------------------------------
imp p
check_exit "pin" 0 ws model pin p
check_grep "df --json shows the pin" '"pinned": true' "$(ws --json df)"
check_exit "pin of a missing checkpoint fails" 1 ws model pin nosuch
check_grep "... saying so" "checkpoint 'nosuch' not found" "$OUT"
check_exit "unpin" 0 ws model unpin p
check_grep "df --json shows it unpinned" '"pinned": false' "$(ws --json df)"
check_grep "never read: last read 0" '"last_read_at": 0' "$(ws --json df)"
ws -q model verify p >/dev/null
check_grep "a verify records the last read" '"last_read_at": [1-9]' "$(ws --json df)"
check_grep "df prints a table with the total" "^total: [0-9]+ checkpoints, " "$(ws df)"
case $KIND in
file) check_grep "df shows the file system's free space" "^store: .* free of " "$(ws df)" ;;
mooncake) check_grep "df says the capacity is unknown" "^store: capacity unknown" "$(ws df)" ;;
esac
ws model delete p >/dev/null

# ---- a mistyped id leaves nothing behind; gc drops records of no checkpoint --
# has_key KEY: the store holds KEY
has_key() {
	case $KIND in
	file) test -e "$S/$1" ;;
	redis) [ "$(redis_cli "$WSTORE_TEST_REDIS_PORT" exists "${WSTORE_KEY_PREFIX}$1" | tr -dc 0-9)" = 1 ] ;;
	mooncake) ls "$MOONCAKE_STANDIN_DIR/objects" | grep -qx "$(printf %s "$1" | sed 's|/|%2F|g')" ;;
	esac
}
imp t1
for c in "model verify t1-typo" "model pull t1-typo --dest $T/p7" \
	"model materialize-file t1-typo --path config.json --output $T/m7"; do
	check_exit "reading a mistyped id fails: $c" 1 ws $c
	check_grep "... saying it is not found" "not found" "$OUT"
done
check_exit "so does opening it from Python" 0 "$PY" -c '
import sys, wstore
try:
    wstore.Store(sys.argv[1]).open("t1-typo")
except wstore.NotFound:
    sys.exit(0)
sys.exit(1)' "$S"
if has_key weight/meta/models/t1-typo; then tap_not_ok "no weight/meta record of the mistyped id"
else tap_ok "no weight/meta record of the mistyped id"; fi
if [ "$KIND" != mooncake ]; then
	# a record left behind by an older version, or by a delete cut short
	case $KIND in
	file) mkdir -p "$S/weight/meta/models" &&
		printf '{"last_read_ms":1,"pinned":false}' >"$S/weight/meta/models/t1-gone" ;;
	redis) redis_cli "$WSTORE_TEST_REDIS_PORT" set "${WSTORE_KEY_PREFIX}weight/meta/models/t1-gone" \
		'{"last_read_ms":1,"pinned":false}' >/dev/null ;;
	esac
	ws model pin t1 >/dev/null
	check "a record of a checkpoint that does not exist is there" has_key weight/meta/models/t1-gone
	check_exit "gc" 0 ws gc --grace 0
	if has_key weight/meta/models/t1-gone; then tap_not_ok "gc removes the record of a checkpoint that does not exist"
	else tap_ok "gc removes the record of a checkpoint that does not exist"; fi
	check_grep "... and keeps the pin of one that does" '"pinned": true' "$(ws --json df)"
	ws model unpin t1 >/dev/null
fi
ws model delete t1 >/dev/null

# ---- eviction order: gc --evict-to ------------------------------------------
for k in k1 k2 k3 k4; do imp $k; done
SZ=$(ws --json df | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["checkpoints"][0]["size"])')
for k in k3 k1 k2; do ws -q model verify $k >/dev/null; done
ws model pin k1 >/dev/null
"$PY" "$T/hold.py" "$S" k4 <"$FIFO" >"$T/hold.out" 2>&1 & H=$!; PIDS="$PIDS $H"
exec 7>"$FIFO"
check "k4 is held open (leased)" wait_for 30 has_leases k4
check_exit "gc --evict-to 2 checkpoints --dry-run" 0 ws gc --evict-to $((2 * SZ)) --dry-run
check_grep "... would evict the least recently read first: k3, then k2" \
	"^would evict 'k3' .*
would evict 'k2' " "$OUT"
check "... and removes nothing" sh -c "for k in k1 k2 k3 k4; do '$W' --store '$S' model inspect \$k >/dev/null || exit 1; done"
check_exit "gc --evict-to 1.5 checkpoints cannot get there" 1 ws gc --evict-to $((3 * SZ / 2))
check_grep "... saying what is pinned and leased" "cannot get under .* would remain \(.* pinned, .* leased\)" "$OUT"
check "... having evicted what it could: k3 and k2" sh -c "! '$W' --store '$S' model inspect k3 >/dev/null 2>&1 && ! '$W' --store '$S' model inspect k2 >/dev/null 2>&1"
check "the pinned k1 and the leased k4 survive" sh -c "'$W' --store '$S' model verify k1 >/dev/null && '$W' --store '$S' model verify k4 >/dev/null"
echo go >&7; exec 7>&-
wait_exit 60 "$H" >/dev/null
check_exit "unpinned and no longer leased, gc --evict-to 0 takes the rest" 0 ws model unpin k1
check_exit "... gc --evict-to 0" 0 ws gc --evict-to 0
check "... nothing is left" sh -c "test -z \"\$('$W' --store '$S' model list | grep READY)\""

# ---- quota on import ----------------------------------------------------------
for q in q1 q2 q3; do imp $q; done
check_exit "an import over the quota is refused" 1 env WSTORE_QUOTA=$((7 * SZ / 2)) \
	"$W" --store "$S" model import --checkpoint-id q4 --model-id M/q4 --source "$SRC"
check_grep "... with the sizes" "cannot import 'q4': .* would exceed the quota: .* used of " "$OUT"
check_one_line "... in one line" "$OUT"
check "... before its first write" gone q4
if [ "$KIND" = file ]; then
	check "... leaving no key of it" sh -c "! ls '$S/weight/models/q4' 2>/dev/null"
else
	tap_skip "... leaving no key of it" "looks at the files of the file store"
fi
for q in q2 q1 q3; do ws -q model verify $q >/dev/null; done
export WSTORE_QUOTA=$((7 * SZ / 2)) WSTORE_EVICT=lru
check_exit "with evict lru the import evicts first" 0 ws -q model import \
	--checkpoint-id q4 --model-id M/q4 --source "$SRC" --chunk-size 16K
check_grep "... the least recently read one, and says which" "^wstore: evicted 'q2' \(" "$OUT"
check "q1 and q3 stay" sh -c "'$W' --store '$S' model verify q1 >/dev/null && '$W' --store '$S' model verify q3 >/dev/null"
ws -q model verify q4 >/dev/null
ws model pin q1 >/dev/null
check_exit "the next import evicts again" 0 ws -q model import \
	--checkpoint-id q5 --model-id M/q5 --source "$SRC" --chunk-size 16K
check_grep "... q3, not the older but pinned q1" "^wstore: evicted 'q3' \(" "$OUT"
check "the pinned q1 survives" is_ready q1
ws model pin q4 >/dev/null; ws model pin q5 >/dev/null
check_exit "with everything pinned an import cannot make room" 1 ws model import \
	--checkpoint-id q6 --model-id M/q6 --source "$SRC" --chunk-size 16K
check_grep "... and says why" "evicting every checkpoint that is neither pinned nor leased frees only" "$OUT"
check "... and evicted nothing" sh -c "'$W' --store '$S' model inspect q1 >/dev/null"
unset WSTORE_QUOTA WSTORE_EVICT
check_exit "a bad quota is refused" 1 env WSTORE_QUOTA=lots "$W" --store "$S" model list
check_grep "... naming it" "WSTORE_QUOTA': key 'quota' must be a size such as 100GiB, got 'lots'" "$OUT"
for q in q1 q4 q5; do ws model unpin $q >/dev/null; ws model delete $q >/dev/null; done

# ---- free space of the store -----------------------------------------------------
BIG="$T/big"
python3 "$HERE/tools/mkckpt.py" "$BIG" --size 3000000 --shards 1 >/dev/null
case $KIND in
file)
	mkdir -p "$SMALL"
	if mount -t tmpfs -o size=1m tmpfs "$SMALL" 2>/dev/null; then
		check_exit "an import larger than the file system's free space is refused" 1 \
			"$W" --store "$SMALL/s" model import --checkpoint-id big --model-id M/big --source "$BIG"
		check_grep "... up front, with the sizes" "cannot import 'big': .* would not fit in the store: .* free of " "$OUT"
		check "... leaving no chunk" sh -c "test -z \"\$(find '$SMALL/s' -path '*chunks*' -type f)\""
		umount "$SMALL"
	else
		tap_not_ok "cannot mount a small tmpfs (needs root)"
	fi ;;
redis)
	port=$WSTORE_TEST_REDIS_PORT
	used=$(redis_cli "$port" info memory | tr -d '\r' | sed -n 's/^used_memory://p')
	redis_cli "$port" config set maxmemory $((used + 1000000)) >/dev/null
	check_exit "an import larger than Redis's free memory is refused" 1 ws model import \
		--checkpoint-id big --model-id M/big --source "$BIG"
	check_grep "... up front, with the sizes" "cannot import 'big': .* would not fit in the store: .* free of " "$OUT"
	check_grep "df shows maxmemory as the capacity" "^store: .* free of " "$(ws df)"
	redis_cli "$port" config set maxmemory 0 >/dev/null
	check "... nothing of it was written" gone big ;;
esac

tap_done
