#!/bin/sh
# bundle.sh - bundles on the file store (wstore model export, model import
# --bundle; docs/format.md, "Bundles"):
#  - export -> import on a second store: the same bytes (pulled and
#    compared), the same ids and commit id; through a pipe too;
#  - plain tar lists the manifest first, then the files in manifest
#    order, and unpacks the checkpoint folder (a name over 100 bytes
#    through a pax header);
#  - hostile bundles, each refused in one line with nothing READY and
#    nothing written outside the store: truncated, a byte changed, files
#    out of order, an extra file, a missing file, a symlink, a hard link,
#    a device, a directory, an absolute name, a '..' name, no manifest;
#  - the good bundle read again after a failed attempt imports;
#  - a checkpoint copied to another file store (model copy), and a copy
#    killed by SIGKILL mid-way run again finishes.
TAP_SUITE=bundle
. "$(dirname "$0")/../lib/suite.sh"

SRC=$T/src
A=$T/a B=$T/b
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 3000000 --shards 3 >/dev/null
LONG=sub/$(printf 'd%.0s' $(seq 1 60))/$(printf 'f%.0s' $(seq 1 60)).bin
mkdir -p "$SRC/$(dirname "$LONG")" && printf 'long name' > "$SRC/$LONG"
: > "$SRC/empty.txt"
wa() { "$W" --store "$A" "$@"; }
wb() { "$W" --store "$B" "$@"; }
commit_of() { "$W" --store "$1" model inspect "$2" | sed -n 's/^commit: *//p'; }
ready_in() { "$W" --store "$1" model list 2>/dev/null | grep -q "^$2 "; }
same_as_src() { # same_as_src STORE ID: a pull of ID equals the source
	rm -rf "$T/pull" && "$W" --store "$1" model pull "$2" --dest "$T/pull" >/dev/null &&
		diff -r "$SRC" "$T/pull"
}

check_exit "import into store a" 0 wa model import --checkpoint-id ck \
	--model-id Org/M --revision r1 --source "$SRC" --chunk-size 1MiB
check_exit "export to a file" 0 wa model export ck --output "$T/ck.tar"
check "a temp file of the export is gone" test "$(ls -A "$T" | grep -c tmp)" = 0
check_exit "import --bundle into store b" 0 wb model import --bundle "$T/ck.tar"
check "b's checkpoint has the same bytes" same_as_src "$B" ck
check_exit "and verifies" 0 wb model verify ck
CA=$(commit_of "$A" ck) CB=$(commit_of "$B" ck)
check "the commit id is the same ($CA)" test -n "$CA" -a "$CA" = "$CB"
check "model id and revision kept" sh -c '"$1" --store "$2" model inspect ck | grep -q "^revision: *r1$" &&
	"$1" --store "$2" model inspect ck | grep -q "^model: *Org/M$"' - "$W" "$B"
check_exit "the same bundle again: the id is READY" 1 wb model import --bundle "$T/ck.tar"
check_grep "... refused naming it" "already exists and is READY" "$OUT"
check_exit "delete it in b" 0 wb model delete ck
check_exit "export | import --bundle -" 0 sh -c '"$1" --store "$2" model export ck |
	"$1" --store "$3" model import --bundle -' - "$W" "$A" "$B"
check "piped: the same bytes" same_as_src "$B" ck
check "piped: the same commit id" test "$(commit_of "$B" ck)" = "$CA"
check_exit "export by model name" 0 wa model export Org/M@r1 --output "$T/byname.tar"
check "gives the same bundle" cmp "$T/ck.tar" "$T/byname.tar"
if command -v script >/dev/null; then
	OUT=$(script -qec "'$W' --store '$A' model export ck; echo rc=\$?" /dev/null </dev/null 2>&1 | tr -d '\r')
	check_grep "export to a terminal is refused (exit 2)" \
		"refusing to write a bundle to a terminal.*rc=2|rc=2" "$(echo $OUT)"
	check_grep "... saying why" "^wstore: refusing to write a bundle to a terminal" "$OUT"
else
	tap_skip "export to a terminal is refused" "script (bsdutils) is not installed"
fi

# ---- plain tar ------------------------------------------------------------
tar -tf "$T/ck.tar" > "$T/list" 2>"$T/tar.err"
check "tar -tf lists the bundle" test -s "$T/list"
check "the manifest comes first" test "$(head -1 "$T/list")" = .wstore-manifest.json
(cd "$SRC" && find . -type f | sed 's|^\./||' | LC_ALL=C sort) > "$T/want"
check "then every file in manifest (path) order" sh -c 'tail -n +2 "$1" | cmp - "$2"' - "$T/list" "$T/want"
mkdir "$T/x"
check_exit "tar -xf unpacks it" 0 tar -xf "$T/ck.tar" -C "$T/x"
rm "$T/x/.wstore-manifest.json"
check "into the checkpoint folder (the long name too)" diff -r "$SRC" "$T/x"

# ---- hostile bundles ------------------------------------------------------
# hostile KIND: write $T/bad.tar, a bundle of ck made hostile in one way
hostile() {
	python3 - "$T/ck.tar" "$T/bad.tar" "$1" "$T" <<'EOF'
import io, sys, tarfile
src, dst, kind, tmp = sys.argv[1:]
with tarfile.open(src) as t:
    members = [(m, t.extractfile(m).read()) for m in t.getmembers()]
def out(ms):
    with tarfile.open(dst, "w", format=tarfile.PAX_FORMAT) as o:
        for m, data in ms:
            o.addfile(m, io.BytesIO(data) if m.isfile() else None)
def special(name, typ, link=""):
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname = typ, link
    return ti, b""
big = max(range(1, len(members)), key=lambda i: members[i][0].size)
if kind == "truncated":
    data = open(src, "rb").read()
    open(dst, "wb").write(data[: len(data) * 2 // 3])
elif kind == "tampered":
    m, d = members[big]
    members[big] = (m, d[:1000] + bytes([d[1000] ^ 1]) + d[1001:])
    out(members)
elif kind == "order":
    members[1], members[2] = members[2], members[1]
    out(members)
elif kind == "extra":
    ti = tarfile.TarInfo("extra.bin"); ti.size = 3
    out(members + [(ti, b"abc")])
elif kind == "missing":
    out(members[:big] + members[big + 1:])
elif kind == "symlink":
    out(members[:2] + [special("zz-link", tarfile.SYMTYPE, "/etc/passwd")] + members[2:])
elif kind == "hardlink":
    out(members[:2] + [special("zz-hard", tarfile.LNKTYPE, "config.json")] + members[2:])
elif kind == "device":
    out(members[:2] + [special("zz-dev", tarfile.CHRTYPE)] + members[2:])
elif kind == "directory":
    out(members[:2] + [special("sub", tarfile.DIRTYPE)] + members[2:])
elif kind == "absolute":
    ti = tarfile.TarInfo(tmp + "/evil-abs"); ti.size = 4
    out(members[:2] + [(ti, b"evil")] + members[2:])
elif kind == "dotdot":
    ti = tarfile.TarInfo("../evil-dotdot"); ti.size = 4
    out(members[:2] + [(ti, b"evil")] + members[2:])
elif kind == "nomanifest":
    out(members[1:])
elif kind == "renamed":
    m, d = members[big]
    m.name = m.name + ".other"
    out(members)
EOF
}
# refused KIND PATTERN: the hostile bundle is refused in one line matching
# PATTERN; nothing READY, nothing outside the store
refused() {
	hostile "$1"
	rm -rf "$T/c"
	check_exit "$1 bundle refused" 1 "$W" --store "$T/c" model import --bundle "$T/bad.tar"
	check_grep "... saying why ($1)" "^wstore: .*$2" "$OUT"
	check_one_line "... in one line ($1)" "$OUT"
	check "... leaving nothing READY ($1)" sh -c '! "$1" --store "$2" model list 2>/dev/null | grep -q "^ck "' - "$W" "$T/c"
}
refused truncated "is truncated"
refused tampered "does not match its manifest's SHA-256"
refused order "out of order"
refused extra "extra.bin.*(not in its manifest|does not list)"
refused missing "(lacks|missing)"
refused symlink "entry 'zz-link' is a symbolic link: refused"
refused hardlink "entry 'zz-hard' is a hard link: refused"
refused device "entry 'zz-dev' is a character device: refused"
refused directory "entry 'sub/?' is a directory: refused"
refused absolute "has an absolute name: refused"
refused dotdot "has a '..' component: refused"
refused nomanifest "is not a wstore bundle"
refused renamed "is not in its manifest"
check "nothing was written outside the store" test ! -e "$T/evil-abs" -a ! -e "$T/../evil-dotdot"
hostile truncated
check_exit "a truncated bundle through a pipe is refused" 1 sh -c \
	'"$1" --store "$2" model import --bundle - < "$3"' - "$W" "$T/c" "$T/bad.tar"
check_exit "the good bundle read again after the failed attempt imports" 0 \
	"$W" --store "$T/c" model import --bundle - < "$T/ck.tar"
check_exit "and verifies" 0 "$W" --store "$T/c" model verify ck

# ---- copies between file stores ---------------------------------------------
D=$T/d
check_exit "model copy to another file store" 0 wa model copy ck --to "$D"
check "the copy has the same bytes" same_as_src "$D" ck
check "and the same commit id" test "$(commit_of "$D" ck)" = "$CA"
check_exit "a copy run again does nothing" 0 wa model copy ck --to "$D"
check_exit "copy of a missing checkpoint fails" 1 wa model copy nope --to "$D"
check_grep "... naming it" "nope" "$OUT"
check_one_line "... in one line" "$OUT"

# a larger checkpoint, copied and killed mid-way, then copied again
BIG=$T/big
mkdir -p "$BIG" && printf '{"model_type":"x"}' > "$BIG/config.json"
for i in 1 2 3 4 5 6 7 8; do head -c $((24 << 20)) /dev/urandom > "$BIG/w$i.safetensors.bin"; done
check_exit "import a 192 MiB checkpoint" 0 wa model import --checkpoint-id big \
	--model-id Org/Big --source "$BIG" --force
# the read lease is held while the export reads: a reader that stalls
# keeps it, and a delete meanwhile is refused
mkfifo "$T/gate"
sh -c '"$1" --store "$2" --quiet model export big | { read -r _ < "$3"; cat > /dev/null; }' \
	- "$W" "$A" "$T/gate" &
epid=$!
leased() { "$W" --store "$A" --json df | python3 -c '
import json, sys
sys.exit(0 if any(c["checkpoint_id"] == "big" and c["leases"] > 0
                  for c in json.load(sys.stdin)["checkpoints"]) else 1)'; }
check "an export holds the read lease while it reads" wait_for 30 leased
check_exit "a delete meanwhile is refused" 1 wa model delete big
check_grep "... naming the export's lease" "export" "$OUT"
echo go > "$T/gate"
check_wait "the export ends once read" 0 60 $epid
E=$T/e
"$W" --store "$A" model copy big --to "$E" >/dev/null 2>&1 &
cpid=$!
first_data() { [ -n "$(find "$E/weight/models/big" -name 'data-*' 2>/dev/null | head -1)" ]; }
wait_for 60 first_data
kill -9 $cpid 2>/dev/null
wait $cpid 2>/dev/null
check "the copy was killed mid-way (not READY)" sh -c '! "$1" --store "$2" model list 2>/dev/null | grep -q "^big "' - "$W" "$E"
check_exit "the copy run again finishes" 0 wa model copy big --to "$E"
check_exit "and the copy verifies" 0 "$W" --store "$E" model verify big
check "with the same commit id" test "$(commit_of "$E" big)" = "$(commit_of "$A" big)"
check_exit "gc removes what the killed copy left" 0 "$W" --store "$E" admin gc --grace 0
check "and no temp file is left" test "$(find "$E" -name '.tmp-*' | wc -l)" = 0
check_exit "the copy still verifies" 0 "$W" --store "$E" model verify big
# a damaged store copy: export and copy fail naming the file
DF=$(find "$A/weight/models/ck" -name 'data-*' -size +100k | head -1)
python3 - "$DF" <<'EOF'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(5000)
    b = f.read(1)
    f.seek(5000)
    f.write(bytes([b[0] ^ 0xff]))
EOF
check_exit "export of a damaged checkpoint fails" 1 wa model export ck --output "$T/dmg.tar"
check_grep "... naming the file" "sha256 mismatch" "$OUT"
check "... and leaves no output" test ! -e "$T/dmg.tar"
check_exit "copy of a damaged checkpoint fails" 1 wa model copy ck --to "$T/f"
check_grep "... naming the file" "does not match its manifest's SHA-256" "$OUT"
check_one_line "... in one line" "$OUT"
check "... and leaves nothing READY" sh -c '! "$1" --store "$2" model list 2>/dev/null | grep -q "^ck "' - "$W" "$T/f"
tap_done
