#!/bin/sh
# replace.sh - a checkpoint deleted with --force and imported again (other
# bytes, same id) while a reader reads it: every reader fails, none ever
# hands out a byte of the new import, none leaves a file mixing both.
# Readers: pull (verified and --no-verify) and materialize-file, slowed by
# the fault backend's delay; a Python read handle; a `wstore serve`
# download read slowly by curl; a file of a `wstore mount --direct-io`
# (daemon-served chunks; multi-chunk, so never FUSE passthrough).  On the
# file store, on Redis (a throwaway server) and on the Mooncake contract
# stand-in (REPLACE_KINDS="file redis mooncake-standin" by default;
# "cluster" a Redis Cluster of 3 masters, "mooncake" a real Mooncake
# Store from /opt/mooncake).  Sources: w.bin is 24 chunks of 'A' bytes, then of 'B'
# bytes, so a mixed result shows as a 'B' in an 'A' file.
#   BUILD  the build directory holding wstore
TAP_SUITE=replace
. "$(dirname "$0")/../lib/suite.sh"
. "$HERE/lib/redis.sh"
. "$HERE/lib/mooncake.sh"
. "$HERE/lib/serve.sh"
PY=/usr/bin/python3
MNT="$T/mnt"
suite_cleanup() {
	suite_unmount "$MNT"
	serve_stop_all
	redis_stop_all >/dev/null 2>&1
	mooncake_stop_all >/dev/null 2>&1
}
mkdir -p "$MNT"
CS=1MiB
NCH=24

# mksrc DIR BYTE: a checkpoint whose w.bin is NCH chunks of BYTE
mksrc() {
	mkdir -p "$1"
	$PY -c 'import sys; sys.stdout.buffer.write(sys.argv[1].encode() * (int(sys.argv[2]) << 20))' \
		"$2" "$NCH" > "$1/w.bin"
	printf '{"fill": "%s"}\n' "$2" > "$1/config.json"
}
mksrc "$T/A" A
mksrc "$T/B" B
SIZE=$(stat -c %s "$T/A/w.bin")

# only_a FILE: FILE holds no byte but 'A' (a prefix of the old w.bin)
only_a() {
	$PY -c 'import sys; d = open(sys.argv[1], "rb").read(); sys.exit(0 if d.strip(b"A") == b"" else 1)' "$1"
}

ws() { "$W" --store "$URL" "$@"; }
# (its warning about chunk sizes on Mooncake is shown only on failure)
imp() {
	ws --quiet model import --checkpoint-id "$1" --model-id Org/R \
		--source "$2" --chunk-size "$CS" 2>"$T/imp.err" ||
		{ cat "$T/imp.err" >&2; return 1; }
}
# replace ID: delete --force, then import the 'B' source as ID
replace() { ws model delete "$1" --force >/dev/null && imp "$1" "$T/B"; }

# ---- pull and materialize-file, slowed down ------------------------------
# slow CMD...: wstore with every store call delayed 50 ms (over a second
# for NCH chunks), in the background; PID in $SLOW
slow() {
	WSTORE_FAULTS=delay=50 "$W" --store "fault+$URL" "$@" > "$T/slow.out" 2>&1 &
	SLOW=$!
}

# midway DIR: a temp or partial file under DIR already holds a chunk or more
midway() {
	test -n "$(find "$1" \( -name '*wstore-tmp*' -o -name '.wstore-part-*' \) -size +1023k 2>/dev/null)"
}

# race NAME ID DIR: once the slow reader SLOW has written a chunk to its
# temp file under DIR, stop it, replace ID, let it go on; it must then
# fail naming the replacement
race() {
	if wait_for 60 midway "$3"; then
		kill -STOP "$SLOW"
		check "$1: replaced while it runs" replace "$2"
		kill -CONT "$SLOW"
	else
		tap_not_ok "$1: the reader never got midway" "$(cat "$T/slow.out")"
	fi
	wait_exit 120 "$SLOW"
	rc=$?
	if [ "$rc" = 1 ] && grep -q "was deleted or replaced by another import" "$T/slow.out"; then
		tap_ok "$1: fails with 'replaced' (exit 1)"
	else
		tap_not_ok "$1: fails with 'replaced' (exit 1)" "exit $rc" "$(tail -3 "$T/slow.out")"
	fi
}

readers_cli() {
	imp p1 "$T/A"
	slow model pull p1 --dest "$T/$KIND-pull" --jobs 1
	race "$KIND: pull" p1 "$T/$KIND-pull"
	check "$KIND: pull left no w.bin and no temp or partial file" \
		test -z "$(find "$T/$KIND-pull" -name 'w.bin' -o -name '.wstore-*')"

	imp p2 "$T/A"
	slow model pull p2 --dest "$T/$KIND-pullnv" --jobs 1 --no-verify
	race "$KIND: pull --no-verify" p2 "$T/$KIND-pullnv"
	check "$KIND: pull --no-verify left no w.bin and no temp file" \
		test -z "$(find "$T/$KIND-pullnv" -name 'w.bin' -o -name '.wstore-*')"

	imp p3 "$T/A"
	mkdir -p "$T/$KIND-mat"
	slow model materialize-file p3 --path w.bin --output "$T/$KIND-mat/w.bin"
	race "$KIND: materialize-file" p3 "$T/$KIND-mat"
	check "$KIND: materialize-file left no output and no temp file" \
		test -z "$(ls -A "$T/$KIND-mat")"
	check "$KIND: a pull after the replacement has the new bytes" \
		sh -c "ws() { \"$W\" --store '$URL' \"\$@\"; }; ws model pull p1 --dest '$T/$KIND-again' >/dev/null && cmp '$T/B/w.bin' '$T/$KIND-again/w.bin'"
}

# ---- a Python read handle ------------------------------------------------
cat > "$T/handle.py" <<'EOF'
import subprocess, sys
import wstore
url, wbin, ckpt, src_b = sys.argv[1:5]
st = wstore.Store(url)
with st.open(ckpt) as ck, ck.open("w.bin") as f:
    first = f.read(1 << 20, 0)
    assert first == b"A" * (1 << 20), "bad bytes before the replacement"
    for args in (["model", "delete", ckpt, "--force"],
                 ["--quiet", "model", "import", "--checkpoint-id", ckpt,
                  "--model-id", "Org/R", "--source", src_b,
                  "--chunk-size", "1MiB"]):
        subprocess.run([wbin, "--store", url] + args, check=True,
                       stdout=subprocess.DEVNULL)
    for off in (5 << 20, 0, 23 << 20):
        try:
            got = f.read(1 << 20, off)
        except wstore.Changed as e:
            assert "replaced" in str(e), str(e)
            continue
        print("read at %d returned %s bytes" % (off, got[:1]))
        sys.exit(1)
print("every read raised Changed")
with st.open(ckpt) as ck, ck.open("w.bin") as f:
    assert f.read(1 << 20, 0) == b"B" * (1 << 20), "a new handle reads B"
print("a new handle reads the new bytes")
EOF

# pylib CMD...: CMD with the binding on BUILD's library (a sanitizer
# build's runtime preloaded, as tests/python/run.sh does)
pylib() {
	(. "$HERE/lib/pyenv.sh"; pyenv_for "$BUILD_ABS/libwstore.so"
	 PYTHONPATH="$HERE/../python" exec "$@")
}

reader_python() {
	imp h1 "$T/A"
	check_exit "$KIND: a Python read handle raises Changed after the replacement" 0 \
		pylib $PY "$T/handle.py" "$URL" "$W" h1 "$T/B"
	check_grep "$KIND: ... and a new handle reads the new bytes" "new handle reads the new" "$OUT"
}

# ---- serve: a slow download --------------------------------------------------
reader_serve() {
	imp s1 "$T/A"
	serve_start "$KIND" "$URL" || return
	dl="$T/$KIND-dl"
	curl -s --limit-rate 3M -o "$dl" "$SERVE_URL/s1/resolve/main/w.bin" &
	cpid=$!
	# curl stopped while the checkpoint is replaced: the server, blocked
	# on the full socket, reads the rest of the file only afterwards
	if wait_for 30 sh -c "test \$(stat -c %s '$dl' 2>/dev/null || echo 0) -ge 1048576"; then
		kill -STOP "$cpid"
		check "$KIND: serve: replaced during the download" replace s1
		kill -CONT "$cpid"
	else
		tap_not_ok "$KIND: serve: the download never started" "$(tail -3 "$SERVE_LOG")"
	fi
	wait_exit 120 "$cpid"
	crc=$?
	got=$(stat -c %s "$dl" 2>/dev/null || echo 0)
	if [ "$crc" != 0 ] && [ "$got" -lt "$SIZE" ]; then
		tap_ok "$KIND: serve: the download fails short (curl exit $crc, $got of $SIZE bytes)"
	elif [ "$KIND" = file ] && [ "$crc" = 0 ] && [ "$got" = "$SIZE" ]; then
		# the file store keeps the file whole: the data file serve
		# opened is replaced by a rename, never rewritten, and still
		# holds the first import's bytes (checked below)
		tap_ok "$KIND: serve: the download completes from the data file it opened"
	else
		tap_not_ok "$KIND: serve: the download fails short" \
			"curl exit $crc, $got of $SIZE bytes"
	fi
	check "$KIND: serve: no byte of the new import was sent" only_a "$dl"
	serve_stop
}

# ---- mount: a daemon-served file (direct I/O) ----------------------------
cat > "$T/mount.py" <<'EOF'
import errno, os, subprocess, sys
mnt, wbin, url, ckpt, src_b, keep = sys.argv[1:7]
fd = os.open(os.path.join(mnt, ckpt, "w.bin"), os.O_RDONLY)
assert os.pread(fd, 65536, 0) == b"A" * 65536, "bad bytes before"
for args in (["model", "delete", ckpt, "--force"],
             ["--quiet", "model", "import", "--checkpoint-id", ckpt,
              "--model-id", "Org/R", "--source", src_b, "--chunk-size", "1MiB"]):
    subprocess.run([wbin, "--store", url] + args, check=True,
                   stdout=subprocess.DEVNULL)
errors = 0
for off in range(20 << 20, 24 << 20, 1 << 18):
    try:
        got = os.pread(fd, 1 << 18, off)
    except OSError as e:
        errors += 1
        continue
    if got.strip(b"A"):
        print("WRONG BYTES at", off)
        sys.exit(2)
print("reads that failed:", errors)
# keep: the file store keeps the file whole, and a data file the mount
# opened before the change goes on giving the first import's bytes
sys.exit(0 if errors or keep == "1" else 1)
EOF

reader_mount() {
	if [ ! -c /dev/fuse ]; then
		tap_not_ok "$KIND: mount: /dev/fuse is missing"
		return
	fi
	imp m1 "$T/A"
	if ! check_exit "$KIND: mount --direct-io" 0 ws mount "$MNT" --direct-io; then
		return
	fi
	keep=0
	[ "$KIND" = file ] && keep=1
	check_exit "$KIND: mount: reads of an open file fail after the replacement (or, on the file store, keep the opened import's bytes), never the new bytes" \
		0 $PY "$T/mount.py" "$MNT" "$W" "$URL" m1 "$T/B" "$keep"
	check_exit "$KIND: umount" 0 "$W" umount "$MNT"
}

BUILD_ABS=$(cd "$BUILD" && pwd)
for KIND in ${REPLACE_KINDS:-file redis mooncake-standin}; do
	case $KIND in
	file) URL="$T/store" ;;
	redis)
		if ! command -v redis-server >/dev/null; then
			tap_not_ok "redis-server is not installed"
			continue
		fi
		redis_start_standalone "$T/redis" >/dev/null || {
			tap_not_ok "redis did not start"
			continue
		}
		URL=$WSTORE_TEST_REDIS_URL ;;
	cluster)
		# record and chunks on different masters (different slots)
		if ! command -v redis-server >/dev/null; then
			tap_not_ok "redis-server is not installed"
			continue
		fi
		redis_start_cluster "$T/cluster" >/dev/null || {
			tap_not_ok "the redis cluster did not start"
			continue
		}
		URL=$WSTORE_TEST_CLUSTER_URL ;;
	mooncake-standin)
		# the contract stand-in (a write-once store without listing):
		# a port that only accepts stands for its master
		export MOONCAKE_STANDIN_DIR="$T/standin"
		export WSTORE_MOONCAKE_LIBRARY="$BUILD_ABS/libmooncake_store.so"
		mooncake_fake_master || {
			tap_not_ok "cannot start a fake master"
			continue
		}
		export WSTORE_MASTER_SERVER_ADDR="$MOONCAKE_TEST_FAKE_MASTER"
		URL=mooncake ;;
	mooncake)
		if ! mooncake_installed; then
			tap_not_ok "Mooncake is not installed in $MOONCAKE_HOME"
			continue
		fi
		mooncake_start "$T/mooncake" || {
			tap_not_ok "Mooncake did not start"
			continue
		}
		URL=mooncake ;;
	esac
	readers_cli
	reader_python
	if "$W" serve --help >/dev/null 2>&1; then reader_serve
	else tap_not_ok "$KIND: wstore was built without serve"; fi
	if [ -x "$BUILD_ABS/wstore-mount" ]; then reader_mount
	else tap_not_ok "$KIND: wstore was built without the mount"; fi
done
tap_done
