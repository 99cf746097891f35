#!/bin/sh
# badinput.sh - hostile and bad input through the CLI (suite "badinput"):
# every case of the corpus tests/data/bad/ (see gen.py there for the
# format) must give a one-line error containing the expected text, the
# expected exit status, and leave no partial state: nothing under
# weight/models/<id>/ for a refused import, no output file, no pulled
# file, nothing written outside the destination for a hostile manifest.
# Also: a Hugging Face cache snapshot (files symlinked into ../../blobs)
# imports as its files; and the usage errors of the CLI, the mount
# daemon and the HTTP server say the same thing the same way.
TAP_SUITE=badinput
. "$(dirname "$0")/../lib/suite.sh"
CORPUS="$HERE/data/bad"
S="$T/store"
ws() { "$W" --store "$S" "$@"; }

field() { sed -n "s/^$1 //p" "$2/expect"; }
fresh_store() { rm -rf "$S"; mkdir -p "$S"; chmod 777 "$S"; }

# expect_fail NAME WANT_EXIT WANT_TEXT CMD...: one line, exit, text
expect_fail() {
	_n=$1 _w=$2 _t=$3
	shift 3
	out=$("$@" 2>&1)
	got=$?
	lines=$(printf '%s\n' "$out" | grep -c .)
	if [ "$got" = "$_w" ] && [ "$lines" = 1 ] &&
		printf '%s' "$out" | grep -qiF -- "$_t"; then
		return 0
	fi
	FAILS="$FAILS
$_n: exit $got (want $_w), $lines lines, want '$_t': $(printf '%s' "$out" | head -3)"
	return 1
}

no_ckpt_state() { # no_ckpt_state ID: nothing of ID in the store
	if [ -e "$S/weight/models/$1" ] || [ -e "$S/weight/locks/models/$1" ]; then
		FAILS="$FAILS
partial state left: $(cd "$S" && find "weight/models/$1" "weight/locks/models/$1" 2>/dev/null | head -3)"
		return 1
	fi
	return 0
}

run_case() { # run_case DIR: 0 if the case behaves
	c=$1
	kind=$(field kind "$c") want=$(field exit "$c") text=$(field error "$c")
	FAILS="" SKIP_WHY=""
	fresh_store
	case $kind in
	id)
		arg=$(cat "$c/arg")
		expect_fail import "$want" "$text" ws model import --checkpoint-id "$arg" \
			--model-id M --source "$CORPUS/_good"
		expect_fail inspect "$want" "$text" ws model inspect "$arg"
		expect_fail delete "$want" "$text" ws model delete "$arg"
		[ -z "$(find "$S" -path '*weight/models*' -type f)" ] || FAILS="$FAILS
a key was written"
		;;
	size)
		expect_fail import "$want" "$text" ws model import --checkpoint-id bad \
			--model-id M --source "$CORPUS/_good" --chunk-size "$(cat "$c/arg")"
		no_ckpt_state bad
		;;
	config)
		expect_fail list "$want" "$text" "$W" --config "$c/config.json" --store "$S" model list
		;;
	source)
		# root reads files whatever their mode: a case that makes an
		# entry unreadable runs its import as an unprivileged user, on a
		# copy of the case and a store that user can reach
		cdir="$T/case" runner="" wbin=$W
		if grep -q chmod "$c/setup" 2>/dev/null && [ "$(id -u)" = 0 ]; then
			if ! suite_share; then
				SKIP_WHY="root cannot make a file unreadable to itself, and $SHARE_WHY"
				return 0
			fi
			cdir="$SHARE/case" runner=$AS_USER wbin=$WU
			S="$SHARE/store"
			fresh_store
		fi
		rm -rf "$cdir"
		cp -R "$c" "$cdir"
		chmod -R a+rX "$cdir"
		if [ -f "$cdir/setup" ]; then
			(cd "$cdir" && sh ./setup) || FAILS="$FAILS
setup failed"
		fi
		src="$cdir/src"
		[ -f "$c/source" ] && src="$cdir/$(cat "$c/source")"
		# --force: these sources are not whole checkpoints on purpose
		expect_fail import "$want" "$text" $runner "$wbin" --store "$S" model import \
			--checkpoint-id bad --model-id M --source "$src" --force
		no_ckpt_state bad
		if ws model list 2>/dev/null | grep -q '^bad '; then
			FAILS="$FAILS
refused id is listed"
		fi
		chmod -R u+rwx "$cdir" 2>/dev/null
		S="$T/store"
		;;
	manifest)
		ws model import --checkpoint-id hm --model-id M --source "$CORPUS/_good" \
			--chunk-size 16 >/dev/null || FAILS="$FAILS
cannot import the good checkpoint"
		cp "$c/manifest" "$S/weight/models/hm/manifest"
		rm -rf "$T/out" "$T/dest"
		mkdir -p "$T/out"
		expect_fail inspect "$want" "$text" ws model inspect hm
		expect_fail verify "$want" "$text" ws model verify hm
		expect_fail materialize "$want" "$text" ws model materialize-file hm \
			--path weights.bin --output "$T/out/weights.bin"
		expect_fail pull "$want" "$text" ws model pull hm --dest "$T/dest/d"
		[ -z "$(ls -A "$T/out")" ] || FAILS="$FAILS
materialize wrote: $(ls -A "$T/out")"
		[ -z "$(find "$T/dest" -type f 2>/dev/null)" ] || FAILS="$FAILS
pull wrote: $(find "$T/dest" -type f | head -3)"
		for p in "$T/weights.bin" "$T/dest/weights.bin" "$T/weights" "$T/dest/weights"; do
			[ -e "$p" ] && FAILS="$FAILS
written outside the destination: $p"
		done
		ws model list >/dev/null 2>&1 || FAILS="$FAILS
list fails beside a hostile manifest"
		ws model delete hm >/dev/null 2>&1 || FAILS="$FAILS
delete of the hostile manifest fails"
		;;
	*)
		FAILS="unknown kind '$kind'"
		;;
	esac
	[ -z "$FAILS" ]
}

n=0
for c in "$CORPUS"/*/; do
	c=${c%/}
	[ -f "$c/expect" ] || continue
	n=$((n + 1))
	name=$(basename "$c")
	if run_case "$c" && [ -n "$SKIP_WHY" ]; then
		tap_skip "$name: $(field kind "$c") refused" "$SKIP_WHY"
	elif [ -z "$SKIP_WHY" ] && [ -z "$FAILS" ]; then
		tap_ok "$name: $(field kind "$c") refused, exit $(field exit "$c"), '$(field error "$c")'"
	else
		tap_not_ok "$name" "$(printf '%s' "$FAILS" | sed 1d)"
	fi
done
check "corpus holds at least 40 bad inputs ($n)" test "$n" -ge 40
[ -z "$(find /tmp -maxdepth 1 -name weights.bin -newer "$T/home" 2>/dev/null)" ] &&
	tap_ok "no hostile manifest wrote /tmp/weights.bin" ||
	tap_not_ok "a hostile manifest wrote /tmp/weights.bin"

# ---- a Hugging Face cache snapshot: files are symlinks into ../../blobs ----
fresh_store
HF="$T/hf/models--Org--Tiny"
REV=0123456789abcdef0123456789abcdef01234567
mkdir -p "$HF/blobs" "$HF/snapshots/$REV/sub" "$HF/refs"
printf '%s' "$REV" > "$HF/refs/main"
python3 - "$HF" "$REV" <<'EOF'
import hashlib, json, os, struct, sys
hf, rev = sys.argv[1:3]
def blob(data):
    h = hashlib.sha256(data).hexdigest()
    open(os.path.join(hf, "blobs", h), "wb").write(data)
    return h
hdr = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
st = struct.pack("<Q", len(hdr)) + hdr + bytes(range(16))
files = {"config.json": b'{"model_type":"tiny"}\n', "model.safetensors": st,
         "sub/tokenizer.json": b'{"v":1}\n'}
for rel, data in files.items():
    link = os.path.join(hf, "snapshots", rev, rel)
    target = os.path.relpath(os.path.join(hf, "blobs", blob(data)),
                             os.path.dirname(link))
    os.symlink(target, link)
EOF
check_exit "HF snapshot: import follows the symlinks" 0 ws model import \
	--checkpoint-id hf --model-id Org/Tiny --revision "$REV" --source "$HF/snapshots/$REV"
ws --json model inspect hf > "$T/hf.json"
paths=$(python3 -c 'import json,sys; print(" ".join(f["path"] for f in json.load(open(sys.argv[1]))["files"]))' "$T/hf.json")
check "HF snapshot: inspect lists the real names ($paths)" \
	test "$paths" = "config.json model.safetensors sub/tokenizer.json"
check "HF snapshot: no blob name in the manifest" sh -c "! grep -q blobs '$T/hf.json'"
check_exit "HF snapshot: verify passes" 0 ws model verify hf
check_exit "HF snapshot: materialize a file" 0 ws model materialize-file hf \
	--path model.safetensors --output "$T/hf.st"
check "HF snapshot: bytes equal the blob" cmp "$T/hf.st" "$HF/snapshots/$REV/model.safetensors"
check "HF snapshot: materialized file is a regular file" test -f "$T/hf.st" -a ! -L "$T/hf.st"

# Usage errors of the three front ends (the CLI, the mount daemon, the
# HTTP server; src/common/frontend.h): exit 2 and one line, the same words
# from each.  A daemon that was not built is a skip.
usage_case() { # usage_case NAME TEXT CMD...
	_n=$1 _t=$2
	shift 2
	out=$("$@" 2>&1)
	got=$?
	if [ "$got" = 2 ] && [ "$(printf '%s\n' "$out" | grep -c .)" = 1 ] &&
		printf '%s' "$out" | grep -qxF -- "wstore: $_t"; then
		tap_ok "usage error, $_n"
	else
		tap_not_ok "usage error, $_n" "exit $got (want 2), want 'wstore: $_t'" \
			"got: $(printf '%s' "$out" | head -3)"
	fi
}
usage_case "cli count" "invalid --jobs '0': expected a number from 1 to 1024" \
	ws model verify x --jobs 0
usage_case "cli unknown option" "unknown option '--bogus' for 'model verify'" \
	ws model verify x --bogus
mkdir -p "$T/mp"
if [ -x "$BUILD/wstore-mount" ]; then
	usage_case "mount count" \
		"invalid --threads '0': expected a number from 1 to 1024" \
		ws mount "$T/mp" --threads 0
	usage_case "mount seconds" \
		"invalid --refresh '0': expected seconds from 0.1 to 3600" \
		ws mount "$T/mp" --refresh 0
	usage_case "mount unknown option" "unknown option '--bogus' for 'mount'" \
		ws mount "$T/mp" --bogus
	usage_case "mount option without its value" \
		"option '--cache-size' needs a value" ws mount "$T/mp" --cache-size
else
	tap_skip "usage errors of the mount daemon" "wstore-mount not built"
fi
if [ -x "$BUILD/wstore-serve" ]; then
	usage_case "serve number" \
		"invalid --max-connections '0': expected a number from 1 to 65536" \
		ws serve --max-connections 0
	usage_case "serve unknown option" "unknown option '--bogus' for 'serve'" \
		ws serve --bogus
	usage_case "serve option without its value" \
		"option '--drain' needs a value" ws serve --drain
else
	tap_skip "usage errors of the HTTP server" "wstore-serve not built"
fi
tap_done
