#!/bin/sh
# mount_faults.sh - a store that fails for a while and then answers: a
# manifest that could not be read during a refresh is not an absent one.
# The checkpoint stays listed and its open files read on once the store
# answers again; the same with a real redis-server stopped (SIGSTOP) for
# a few seconds while the mount is in use.
# Needs /dev/fuse and root (or fusermount3); redis-server for the second
# part (not installed: a failed check, never a silent pass).
#   BUILD  the build directory holding wstore
TAP_SUITE=mount-faults
. "$(dirname "$0")/../lib/suite.sh"
. "$HERE/lib/redis.sh"
PY=/usr/bin/python3
MNT="$T/mnt"
FGPID=
STOPPED=
suite_cleanup() {
	[ -n "$STOPPED" ] && kill -CONT "$STOPPED" 2>/dev/null
	[ -n "$FGPID" ] && kill -KILL "$FGPID" 2>/dev/null
	suite_unmount "$MNT"
	redis_stop_all >/dev/null 2>&1
}
mkdir -p "$MNT"
STORE="$T/store"

suite_need_fuse

SRC="$T/src"
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 2000000 --shards 1 >/dev/null
F=model-00001-of-00001.safetensors

# reads.py MNT SRC LOG PATTERN: open a file and read it; wait until the
# daemon's log shows PATTERN (the store failing); then reads of the file
# opened before must come back (never other bytes) and the checkpoint stay
# listed
# listed; all along, lookups (stat of the checkpoint and of a file never
# opened, with the mount's entry cache as short as its refresh) find them
cat > "$T/reads.py" <<'EOF'
import errno, os, sys, threading, time
mnt, src, log, pattern, f = sys.argv[1:6]
want = open(src + "/" + f, "rb").read()
fd = os.open(mnt + "/a/" + f, os.O_RDONLY)
assert os.pread(fd, 65536, 0) == want[:65536], "bytes before the faults"
print("opened", flush=True)
lookups, lost, done = [0], [], threading.Event()
def look():
    while not done.is_set():
        for p in ("/a", "/a/config.json"):
            try:
                os.stat(mnt + p)
                lookups[0] += 1
            except OSError as e:
                lost.append("%s: %s" % (p, errno.errorcode.get(e.errno, e.errno)))
        time.sleep(0.02)
looker = threading.Thread(target=look)
looker.start()
def end(rc):
    done.set()
    looker.join()
    print("lookups:", lookups[0], "failed:", len(lost), lost[:3])
    sys.exit(rc if not lost else (rc or 4))
deadline = time.monotonic() + 60
while pattern not in open(log).read():
    if time.monotonic() > deadline:
        print("the store never failed (log: %r)" % open(log).read()[-300:])
        end(2)
    time.sleep(0.05)
print("the store failed", flush=True)
# the store answers again (the faults end, the server continues): the
# open file reads its bytes again within a bounded time
deadline, errs, off = time.monotonic() + 30, {}, 0
while True:
    try:
        got = os.pread(fd, 65536, off)
        if got != want[off:off + len(got)] or not got:
            print("WRONG BYTES at", off)
            end(3)
        if off > 0:
            break
        off = len(want) // 2  # one read at the start, then one elsewhere
        continue
    except OSError as e:
        name = errno.errorcode.get(e.errno, str(e.errno))
        errs[name] = errs.get(name, 0) + 1
        if e.errno != errno.EIO:
            print("unexpected error", e)
            end(3)
    if time.monotonic() > deadline:
        print("reads still fail:", errs)
        end(1)
    time.sleep(0.1)
listed = os.path.isdir(mnt + "/a")
print("read again after", errs or "no error", "listed:", listed)
end(0 if listed else 1)
EOF

# ---- failing reads: the fault backend ------------------------------------
check_exit "import a" 0 "$W" --store "$STORE" --quiet model import \
	--checkpoint-id a --model-id Org/A --source "$SRC" --chunk-size 256K
# Two gets in every three from the 61st to the 107th fail (31 rules, of
# the fault backend's 32).  An idle refresh is one get of the index, one
# of the manifest to see it unchanged (through the fault backend: a get
# and a compare) and, when that fails, one more to read it: whatever the
# alignment, refreshes soon meet a listing that succeeds followed by two
# failed manifest reads.
spec=$(for k in $(seq 61 107); do [ $((k % 3)) = 0 ] || printf 'failop=get:%d,' "$k"; done)
WSTORE_FAULTS=${spec%,} "$W" --store "fault+$STORE" mount "$MNT" \
	--foreground --refresh 0.1 2> "$T/fault.log" &
FGPID=$!
if wait_for 10 suite_mounted "$MNT"; then
	check_exit "failed manifest reads during refreshes: the checkpoint stays, its open file reads again" \
		0 timeout 120 $PY "$T/reads.py" "$MNT" "$SRC" "$T/fault.log" \
		"cannot read the manifest of 'a'" "$F"
	check_grep "the reads were answered again" "read again after .* listed: True" "$OUT"
	check_grep "lookups during the failed refreshes all found the entry" \
		"^lookups: [1-9][0-9]* failed: 0 " "$OUT"
	check_grep "the log says the entry was kept" "kept as it was, tried again" \
		"$(cat "$T/fault.log")"
	if grep -q "no longer served" "$T/fault.log"; then
		tap_not_ok "the checkpoint was never retired" "$(grep "no longer served" "$T/fault.log")"
	else
		tap_ok "the checkpoint was never retired"
	fi
	kill -TERM "$FGPID"
	wait_exit 10 "$FGPID"; rc=$?
	check_grep "the mount stops (exit 0)" "^0$" "$rc"
else
	tap_not_ok "mount on the fault backend" "$(cat "$T/fault.log")"
	kill -KILL "$FGPID" 2>/dev/null
fi
FGPID=

# ---- a real Redis server stopped for a few seconds -----------------------
if ! command -v redis-server >/dev/null; then
	tap_not_ok "redis-server is not installed: the paused-server case cannot run"
	tap_done
	exit 1
fi
if ! redis_start_standalone "$T/redis"; then
	tap_not_ok "start redis-server"
	tap_done
	exit 1
fi
R=$WSTORE_TEST_REDIS_URL
check_exit "import a into Redis" 0 "$W" --store "$R" --quiet model import \
	--checkpoint-id a --model-id Org/A --source "$SRC" --chunk-size 256K
# more checkpoints of many files: a refresh is then mostly manifest reads
# and takes a while, so a stop of the server often catches one (a failed
# listing keeps the tree anyway)
python3 "$HERE/tools/mkckpt.py" "$T/many" --size 20000 --shards 1 >/dev/null
$PY -c "
import sys
for i in range(400):
    open('%s/f%04d.json' % (sys.argv[1], i), 'w').write('{\"i\": %d}' % i)" "$T/many"
for id in b c d e f g; do
	"$W" --store "$R" --quiet model import --checkpoint-id $id \
		--model-id Org/$id --source "$T/many" >/dev/null 2>&1 ||
		tap_not_ok "import $id into Redis"
done
# commands time out after 500 ms, so a stopped server is an error, not a
# wait
WSTORE_COMMAND_TIMEOUT_MS=500 "$W" --store "$R" mount "$MNT" --foreground \
	--refresh 0.2 2> "$T/redis.log" &
FGPID=$!
RPID=$(_redis_pid "$T/redis" "$WSTORE_TEST_REDIS_PORT")
if ! wait_for 10 suite_mounted "$MNT" || [ -z "$RPID" ]; then
	tap_not_ok "mount on Redis (server pid '$RPID')" "$(cat "$T/redis.log")"
	kill -KILL "$FGPID" 2>/dev/null; FGPID=
	tap_done
	exit 1
fi
$PY "$T/reads.py" "$MNT" "$SRC" "$T/redis.log" "wstore mount: cannot" \
	"$F" > "$T/redis.out" 2>&1 &
RD=$!
wait_for 10 grep -q opened "$T/redis.out"
# stop the server four times for a second or two while the mount
# refreshes and the file is open
for i in 1 2 3 4; do
	kill -STOP "$RPID"; STOPPED=$RPID
	wait_for 15 grep -q "wstore mount: cannot" "$T/redis.log"
	# not a wait: the server stays stopped one more second
	sleep 1
	kill -CONT "$RPID"; STOPPED=
	wait_for 10 "$W" --store "$R" model list >/dev/null
done
wait_exit 120 "$RD"; rc=$?
if [ "$rc" = 0 ]; then tap_ok "Redis stopped for a few seconds: the checkpoint stays, its open file reads again"
else tap_not_ok "Redis stopped for a few seconds: the open file reads again" "exit $rc" "$(cat "$T/redis.out")" "$(tail -5 "$T/redis.log")"; fi
echo "# during the stop: $(grep -c "cannot read the manifest" "$T/redis.log") failed manifest read(s) logged"
check_grep "Redis stopped: lookups all along found the entry" \
	"^lookups: [1-9][0-9]* failed: 0 " "$(cat "$T/redis.out")"
if grep -q "no longer served" "$T/redis.log"; then
	tap_not_ok "Redis stopped: the checkpoint was never retired" "$(grep "no longer served" "$T/redis.log")"
else
	tap_ok "Redis stopped: the checkpoint was never retired"
fi
check "a file opened after the server came back equals its source" \
	cmp "$SRC/$F" "$MNT/a/$F"
kill -TERM "$FGPID"
wait_exit 10 "$FGPID"; rc=$?
check_grep "the Redis mount stops (exit 0)" "^0$" "$rc"
FGPID=

tap_done
