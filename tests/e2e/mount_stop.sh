#!/bin/sh
# mount_stop.sh - how `wstore mount` stops and starts: the stopper keeps
# kicking the loop until it returns (a lost kick is repeated), what reads
# of files still open give after SIGTERM, a second mount on one path is
# refused, --log-file, start-up errors on the starter's stderr.
# Needs /dev/fuse and root (or fusermount3).
#   BUILD  the build directory holding wstore
TAP_SUITE=mount-stop
. "$(dirname "$0")/../lib/suite.sh"
PY=/usr/bin/python3
MNT="$T/mnt"
FGPID=
suite_cleanup() {
	[ -n "$FGPID" ] && kill -KILL "$FGPID" 2>/dev/null
	suite_unmount "$MNT"
}
mkdir -p "$MNT"
STORE="$T/store"
ws() { "$W" --store "$STORE" "$@"; }

suite_need_fuse

SRC="$T/src"
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 3000000 --shards 1 >/dev/null
check_exit "import a" 0 ws --quiet model import --checkpoint-id a \
	--model-id Org/A --source "$SRC" --chunk-size 1M
F=model-00001-of-00001.safetensors

# ---- a lost kick is repeated ----------------------------------------------
# The stopper sets the loop's exit flag and interrupts the loop's thread,
# again every 20 ms until the loop has returned.  The test hook leaves out
# the first kicks, as if they had come before the loop blocked: the later
# ones must still end it.
for spec in "1 1" "1 8" "3 8"; do
	set -- $spec
	WSTORE_MOUNT_TEST_LOSE_KICKS=$1 "$W" --store "$STORE" mount "$MNT" \
		--foreground --threads "$2" 2> "$T/kick.log" &
	FGPID=$!
	if ! wait_for 10 suite_mounted "$MNT"; then
		tap_not_ok "mount with $1 lost kick(s), $2 thread(s)" "$(cat "$T/kick.log")"
		kill -KILL "$FGPID" 2>/dev/null; wait "$FGPID" 2>/dev/null; FGPID=
		continue
	fi
	kill -TERM "$FGPID"
	wait_exit 10 "$FGPID"; rc=$?
	FGPID=
	if [ "$rc" = 0 ] && ! suite_mounted "$MNT"; then
		tap_ok "$1 lost kick(s), $2 thread(s): SIGTERM still unmounts and exits 0 within 10 s"
	else
		tap_not_ok "$1 lost kick(s), $2 thread(s): SIGTERM unmounts" "exit $rc" "$(tail -3 "$T/kick.log")"
		umount -l "$MNT" 2>/dev/null
	fi
done

# ---- reads of files still open after SIGTERM -----------------------------
# Once the daemon has gone, a read of a file still open (one the kernel
# must ask the daemon for) fails with ENOTCONN; a read the kernel had
# queued for the daemon when it stopped fails with ECONNABORTED.  Never
# another error, never other bytes, never a hang.
cat > "$T/after.py" <<'EOF'
import errno, os, signal, sys, threading, time
mnt, src, pid, f = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
want = open(src + "/" + f, "rb").read()
fds = [os.open(mnt + "/" + f, os.O_RDONLY) for _ in range(4)]
assert os.pread(fds[0], 4096, 0) == want[:4096], "bytes before the stop"
seen = {}
def reader(fd, k):
    off = (k * 777777) % (len(want) - 65536)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            got = os.pread(fd, 65536, off)
            if got != want[off:off + len(got)]:
                seen["WRONG BYTES"] = 1
                return
        except OSError as e:
            name = errno.errorcode.get(e.errno, str(e.errno))
            seen[name] = seen.get(name, 0) + 1
            if e.errno == errno.ENOTCONN:
                return
        off = (off + 1234567) % (len(want) - 65536)
ts = [threading.Thread(target=reader, args=(fds[i], i)) for i in range(3)]
for t in ts:
    t.start()
time.sleep(0.3)
os.kill(pid, signal.SIGTERM)
for t in ts:
    t.join(30)
hung = any(t.is_alive() for t in ts)
# the daemon has unmounted: a fresh read of an open file
gone = False
for _ in range(200):
    if (" %s fuse" % mnt) not in open("/proc/mounts").read():
        gone = True
        break
    time.sleep(0.05)
# with --page-cache the kernel answers cached pages without the daemon:
# drop them, so that the read has to ask the daemon
os.posix_fadvise(fds[3], 0, 0, os.POSIX_FADV_DONTNEED)
try:
    got = os.pread(fds[3], 65536, len(want) // 2)
    after = "read ok" if got == want[len(want) // 2:len(want) // 2 + len(got)] else "WRONG BYTES"
except OSError as e:
    after = errno.errorcode.get(e.errno, str(e.errno))
print("during:", " ".join("%s=%d" % kv for kv in sorted(seen.items())) or "-")
print("after:", after, "unmounted:", gone, "hung:", hung)
bad = set(seen) - {"ENOTCONN", "ECONNABORTED"}
sys.exit(1 if bad or hung or not gone or after != "ENOTCONN" else 0)
EOF
for mode in --direct-io --page-cache; do
	# a slow store (each call 50 ms) so that reads are in flight at the stop
	WSTORE_FAULTS=delay=50 "$W" --store "fault+$STORE" mount "$MNT" \
		--foreground --checkpoint a $mode 2> "$T/after.log" &
	FGPID=$!
	if ! wait_for 10 suite_mounted "$MNT"; then
		tap_not_ok "mount $mode for reads after SIGTERM" "$(cat "$T/after.log")"
		kill -KILL "$FGPID" 2>/dev/null; FGPID=
		continue
	fi
	check_exit "$mode: reads after SIGTERM fail with ENOTCONN (ECONNABORTED if queued at the stop), never other bytes" \
		0 timeout 60 $PY "$T/after.py" "$MNT" "$SRC" "$FGPID" "$F"
	check_grep "$mode: a read once the daemon has unmounted gives ENOTCONN" \
		"after: ENOTCONN unmounted: True" "$OUT"
	echo "# $mode: $(echo "$OUT" | tr '\n' ' ')"
	wait_exit 10 "$FGPID" >/dev/null; FGPID=
	suite_mounted "$MNT" && umount -l "$MNT" 2>/dev/null
done

# ---- a second mount on one path is refused --------------------------------
check_exit "mount a (daemon)" 0 ws mount "$MNT"
check_exit "a second mount on the same path is refused" 1 ws mount "$MNT"
check_grep "the error says it is already a wstore mount" \
	"'.*mnt' is already a wstore mount \(unmount it first: wstore umount" "$OUT"
check_one_line "the error is one line" "$OUT"
check_grep "one wstore mount on the path, not two" "^1$" \
	"$(grep -c " $MNT fuse.wstore " /proc/mounts)"
check "the first mount still serves" cmp "$SRC/$F" "$MNT/a/$F"
check_exit "refused through another spelling of the path too" 1 \
	ws mount "$MNT/../mnt"
check_exit "umount" 0 "$W" umount "$MNT"

# ---- --log-file: the daemon's messages once mounted -----------------------
check_exit "mount --log-file" 0 ws mount "$MNT" --log-file "$T/mount.log" \
	--refresh 0.2
check_grep "the first line still comes on the starter's stderr" \
	"mounted 1 checkpoint on" "$OUT"
# a message after the mount is up: a checkpoint that leaves the store
ws --quiet model import --checkpoint-id gone --model-id Org/G \
	--source "$SRC" >/dev/null 2>&1
wait_for 10 test -d "$MNT/gone"
ws --quiet model delete gone >/dev/null 2>&1
if wait_for 10 grep -q "checkpoint 'gone' left the store" "$T/mount.log"; then
	tap_ok "a message of the running daemon is in the log file"
else
	tap_not_ok "a message of the running daemon is in the log file" "$(cat "$T/mount.log")"
fi
check_exit "umount" 0 "$W" umount "$MNT"
# umount returns once the mount has left this namespace; the daemon's
# last line follows when the kernel ends the session, which waits for
# every other mount namespace holding a copy of the mount (each
# `ip netns exec` makes one) to let go
wait_for 30 grep -q "unmounted '" "$T/mount.log"
check_grep "lines carry UTC time and the daemon's pid" \
	"^20[0-9-]+T[0-9:.]+Z wstore-mount\[[0-9]+\]: unmounted '" \
	"$(tail -1 "$T/mount.log")"
check_exit "a log file that cannot be opened fails the mount" 1 \
	ws mount "$MNT" --log-file "$T/no/such/dir/m.log"
check_grep "the error names the file" "cannot open log file '.*m.log'" "$OUT"
check_one_line "the error is one line" "$OUT"
check "nothing was mounted" sh -c "! grep -q ' $MNT fuse' /proc/mounts"

# ---- start-up errors on the starter's stderr ------------------------------
check_exit "a store that cannot be opened: exit 1" 1 \
	"$W" --store "$T/no-store" mount "$MNT"
check_grep "its error comes on the starter's stderr" "no-store" "$OUT"
check_one_line "the error is one line" "$OUT"
# the daemon dies (the fault backend's crash=2: _exit(137)) before the
# mount is up: the starter says so
check_exit "the daemon dying before the mount is up: exit 1" 1 \
	env WSTORE_FAULTS=crash=2 "$W" --store "fault+$STORE" mount "$MNT"
check_grep "the starter says the daemon ended" \
	"the mount daemon exited with status 137 before the mount was up" "$OUT"
check "nothing was mounted" sh -c "! grep -q ' $MNT fuse' /proc/mounts"

tap_done
