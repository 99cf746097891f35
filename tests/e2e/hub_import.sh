#!/bin/sh
# hub_import.sh - `wstore model import --from-hub`: against another
# `wstore serve` over a second store (bytes identical after a pull,
# verify, NAME@COMMIT, include/exclude, a second run that fetches nothing,
# tokens, a missing repository, an endpoint where nothing listens), and
# against tests/tools/fakehub.py, an upstream that misbehaves on request:
# corrupted bytes (LFS and git files), 429 and 500 then OK, a transfer cut
# once (resumed with Range) and every time, a redirect of LFS files to
# another port (no token sent there), a stalled transfer, SIGINT while a
# transfer waits (stops within a second or so), and an import killed with
# SIGKILL whose re-run fetches only what was missing.
#   BUILD  the build directory holding wstore
TAP_SUITE=hub-import
. "$(dirname "$0")/../lib/suite.sh"
. "$HERE/lib/serve.sh"
. "$HERE/lib/fakehub.sh"
suite_cleanup() {
	serve_stop_all
	fakehub_stop
}
UP="$T/up"
DOWN="$T/down"
ws() { "$W" --store "$DOWN" "$@"; }
# hub ARGS...: a bounded import from the hub (no import may hang)
hub() { timeout -k 5 90 "$W" --store "$DOWN" model import "$@"; }

if ! "$W" serve --help >/dev/null 2>&1; then
	tap_not_ok "wstore was built without 'serve'"
	tap_done
	exit 1
fi

SRC="$T/src"
/usr/bin/python3 "$HERE/tools/mkckpt.py" "$SRC" --size 3000000 --shards 2 >/dev/null
printf '' > "$SRC/empty.txt"
mkdir -p "$SRC/sub"
printf 'nested\n' > "$SRC/sub/x.txt"
printf 'blank in name\n' > "$SRC/sub/with space.txt"
check "upstream: import into the second store" \
	"$W" --store "$UP" model import --checkpoint-id tiny-1 \
	--model-id org/tiny --source "$SRC" --quiet
serve_start up "$UP" || { tap_done; exit 1; }
B=$SERVE_URL
SHA=$(curl -sf "$B/api/models/org/tiny" | json_get sha)

# ---- from another wstore serve -------------------------------------------
check_exit "import from a wstore serve (1 MiB chunks)" 0 \
	hub --from-hub org/tiny --endpoint "$B" --chunk-size 1MiB
check_grep "the report names the commit" "org/tiny @ $SHA" "$OUT"
ID=$(printf '%s' "$SHA" | cut -c1-12)
ID="org--tiny--$ID"
check_exit "NAME@COMMIT resolves" 0 ws model resolve "org/tiny@$SHA"
check_grep "... to the imported checkpoint" "$ID" "$OUT"
check_exit "NAME (main) resolves too: serve answers main" 0 ws model resolve org/tiny
check_grep "... to the Hub import, saying why" "$ID.*newest Hub import" "$OUT"
check "model pull" ws model pull "$ID" --dest "$T/pulled" --quiet
check "pulled bytes identical to the source" diff -r "$SRC" "$T/pulled"
check "verify passes" ws model verify "$ID"
check_exit "a second run: nothing fetched, same checkpoint" 0 \
	hub --from-hub "org/tiny@$SHA" --endpoint "$B"
n=$(ws model list --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
check_grep "... and no second checkpoint" '^1$' "$n"
# a run that cannot read that checkpoint's manifest (the store failing
# for a moment) fails: never another id, never a second import
for how in derived given; do
	case $how in derived) a= ;; given) a="--checkpoint-id $ID" ;; esac
	check_exit "a run that cannot read the manifest fails ($how id)" 1 \
		env WSTORE_FAULTS="failread=$ID/manifest" timeout -k 5 90 "$W" \
		--store "fault+$DOWN" model import --from-hub "org/tiny@$SHA" \
		--endpoint "$B" $a
	check_grep "... saying what could not be read" "weight/models/$ID/manifest" "$OUT"
	n=$(ws model list --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
	check_grep "... and makes no second checkpoint" '^1$' "$n"
done
check_exit "... and the checkpoint still verifies" 0 ws model verify "$ID"
# on a terminal: progress lines, none with sizes before the file list is
# known (a "0 B / 0 B" line, and a rate counted from the listing)
if command -v script >/dev/null 2>&1; then
	prog=$(timeout -k 5 90 script -qec "'$W' --store '$DOWN' model import \
		--from-hub org/tiny --endpoint '$B' --checkpoint-id on-tty \
		--chunk-size 1MiB" /dev/null 2>&1 | tr '\r' '\n')
	check_grep "on a terminal an import shows its progress" \
		'^importing [0-9.]+ [KMG]?i?B / [0-9.]+ [KMG]?i?B' "$prog"
	case "$prog" in
	*" 0 B / 0 B"*) tap_not_ok "... never sizes before the file list is known" "$prog" ;;
	*) tap_ok "... never sizes before the file list is known" ;;
	esac
	ws model delete on-tty >/dev/null 2>&1
else
	tap_skip "on a terminal an import shows its progress" "script(1) is not installed"
fi

check_exit "--include '*.json'" 0 hub --from-hub org/tiny --endpoint "$B" \
	--include '*.json' --checkpoint-id only-json
files=$(ws model inspect only-json --json | /usr/bin/python3 -c '
import json, sys
print(" ".join(sorted(f["path"] for f in json.load(sys.stdin)["files"])))')
want=$(cd "$SRC" && find . -name '*.json' | sed 's|^\./||' | sort | tr '\n' ' ' | sed 's/ $//')
check_grep "... takes only the json files" "^$want\$" "$files"
check_exit "--exclude '*.safetensors' --exclude 'sub/*'" 0 hub \
	--from-hub org/tiny --endpoint "$B" --exclude '*.safetensors' \
	--exclude 'sub/*' --checkpoint-id no-weights
files=$(ws model inspect no-weights --json | /usr/bin/python3 -c '
import json, sys
print(" ".join(sorted(f["path"] for f in json.load(sys.stdin)["files"])))')
check_grep "... leaves them out" '^config.json empty.txt ' "$files"
case "$files" in *safetensors" "*|*sub/*) tap_not_ok "... none left in" "$files" ;;
*) tap_ok "... none left in" ;; esac
check_exit "include matching nothing: error" 1 hub --from-hub org/tiny \
	--endpoint "$B" --include 'nothing*' --checkpoint-id nothing
check_grep "... says so" "no file of 'org/tiny'" "$OUT"

check_exit "nonexistent repository: error" 1 hub --from-hub org/nope \
	--endpoint "$B" --checkpoint-id nope
check_grep "... not found, named" "org/nope.*not found" "$OUT"
check_one_line "... one line" "$OUT"
check_exit "nonexistent revision: error" 1 hub --from-hub org/tiny@nobranch \
	--endpoint "$B" --checkpoint-id nope
check_grep "... not found" "not found" "$OUT"
check_exit "bad --from-hub: usage" 2 hub --from-hub 'noslash' --endpoint "$B"

# nothing listens on a port just freed
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
t0=$(date +%s)
check_exit "unreachable endpoint: error" 1 hub --from-hub org/tiny \
	--endpoint "http://127.0.0.1:$PORT" --checkpoint-id unreach
secs=$(($(date +%s) - t0))
check_grep "... names the endpoint and why" "127.0.0.1:$PORT.*(connect|Connection refused)" "$OUT"
check_one_line "... one line" "$OUT"
if [ "$secs" -le 20 ]; then tap_ok "... within 20 s ($secs s)"
else tap_not_ok "... within 20 s" "took $secs s"; fi

# a server that wants a token
serve_start tok "$UP" --token sekret || { tap_done; exit 1; }
BT=$SERVE_URL
printf 'wrong\n' > "$T/badtok"
printf 'sekret\n' > "$T/goodtok"
check_exit "bad token: error" 1 hub --from-hub org/tiny --endpoint "$BT" \
	--token-file "$T/badtok" --checkpoint-id tok
check_grep "... an authentication error" "access denied.*refused the token" "$OUT"
check_one_line "... one line" "$OUT"
check_exit "no token: error" 1 hub --from-hub org/tiny --endpoint "$BT" \
	--checkpoint-id tok
check_grep "... says a token is needed" "token is needed" "$OUT"
check_exit "good token (--token-file)" 0 hub --from-hub org/tiny \
	--endpoint "$BT" --token-file "$T/goodtok" --checkpoint-id tok
check_exit "good token (HF_TOKEN), endpoint from HF_ENDPOINT" 0 \
	env HF_TOKEN=sekret HF_ENDPOINT="$BT" timeout 90 "$W" --store "$DOWN" \
	model import --from-hub org/tiny --include config.json --checkpoint-id tok2

# ---- the misbehaving upstream --------------------------------------------
FSRC="$T/fsrc"
fakehub_source "$FSRC"
head -c 300000 /dev/urandom > "$FSRC/z.bin"
fakehub_start "$FSRC" || { tap_done; exit 1; }
SHARD=model-00001-of-00002.safetensors
fake() { hub --from-hub org/fake --endpoint "$F" --chunk-size 512KiB "$@"; }
# no_ready ID MESSAGE: checkpoint ID is not READY (absent or FAILED)
no_ready() {
	_st=$(ws model list --all --json | /usr/bin/python3 -c '
import json, sys
print([c.get("status") for c in json.load(sys.stdin)
       if c.get("checkpoint_id") == sys.argv[1]] or "absent")' "$1")
	case $_st in
	*READY*) tap_not_ok "$2" "checkpoint $1 is READY" ;;
	*) tap_ok "$2 ($_st)" ;;
	esac
}

fakehub_ctl "{\"corrupt\": [\"$SHARD\"]}"
check_exit "corrupted LFS file: error (exit 3, damage)" 3 fake --checkpoint-id bad1
check_grep "... names the file and both sha256" \
	"'$SHARD'.*sha256 is [0-9a-f]{64}, the bytes received hash to [0-9a-f]{64}" "$OUT"
check_one_line "... one line" "$OUT"
no_ready bad1 "... no READY checkpoint"
fakehub_ctl '{"corrupt": ["config.json"]}'
check_exit "corrupted git file: error (exit 3, damage)" 3 fake --checkpoint-id bad2
check_grep "... names the file and both sha1" \
	"'config.json'.*git blob sha1 is [0-9a-f]{40}, the bytes received hash to [0-9a-f]{40}" "$OUT"
no_ready bad2 "... no READY checkpoint"
check_exit "a FAILED checkpoint is left" 0 ws model inspect bad2
check_grep "... FAILED" "FAILED" "$OUT"

fakehub_ctl "{\"r429\": {\"$SHARD\": 2}, \"r500\": {\"config.json\": 2}}"
check_exit "429 twice, 500 twice, then OK: imported" 0 fake --checkpoint-id retry
check_grep "... 429 retried (3 requests)" '^3$' "$(fakehub_gets "$SHARD")"
check_grep "... 500 retried (3 requests)" '^3$' "$(fakehub_gets config.json)"
check "... verify passes" ws model verify retry
# (gone, so that the next import fetches every file rather than reuse them)
ws model delete retry > /dev/null 2>&1

fakehub_ctl "{\"cut_once\": [\"$SHARD\", \"z.bin\"]}"
check_exit "transfers cut once: imported" 0 fake --checkpoint-id cut1
check_grep "... resumed with a Range from where it stopped" \
	"resolve/[0-9a-f]*/$SHARD bytes=[1-9][0-9]*-" "$(cat "$LOG")"
check "... verify passes" ws model verify cut1
# (gone, so that the next import fetches every file rather than reuse them)
ws model delete cut1 > /dev/null 2>&1
fakehub_ctl '{"cut": ["z.bin"]}'
check_exit "a transfer cut every time: error after the retries" 1 \
	fake --checkpoint-id cut2 --retries 2
check_grep "... names the file and the tries" "z.bin.*(gave up after 3 tries)" "$OUT"
no_ready cut2 "... no READY checkpoint"

printf 'tk\n' > "$T/faketok"
fakehub_ctl '{"redirect": true, "token": "tk"}'
check_exit "LFS files redirected to another port: imported" 0 \
	fake --checkpoint-id redir --token-file "$T/faketok"
check_grep "... the other port served them" "^cdn GET .*$SHARD" "$(cat "$LOG")"
if grep -q '^cdn .* auth$' "$LOG"; then
	tap_not_ok "... the token was not sent to it" "$(grep '^cdn' "$LOG")"
else tap_ok "... the token was not sent to it"; fi
check "... verify passes" ws model verify redir
# (gone, so that the next import fetches every file rather than reuse them)
ws model delete redir > /dev/null 2>&1

# an https:// endpoint on a port that speaks plain HTTP: one line with a
# hint, not OpenSSL's own words alone
check_exit "https:// to a plain HTTP port: error" 1 env -u CURL_CA_BUNDLE \
	"$W" --store "$DOWN" model import --from-hub org/fake \
	--endpoint "https://127.0.0.1:$FP" --checkpoint-id tlsmix --retries 1
check_grep "... hinting at http://" "does not speak TLS there: an http:// endpoint" "$OUT"
check_one_line "... in one line" "$OUT"
no_ready tlsmix "... no READY checkpoint"

# a redirect that never ends: refused after hub_max_redirects hops, with
# no retry of the loop and nothing READY
fakehub_ctl '{"redirect_loop": true}'
t0=$(date +%s)
check_exit "LFS files redirected to themselves: error" 1 \
	env WSTORE_HUB_MAX_REDIRECTS=3 "$W" --store "$DOWN" model import \
	--from-hub org/fake --endpoint "$F" --chunk-size 512KiB \
	--checkpoint-id rloop --retries 1
check_grep "... naming the key" "hub_max_redirects" "$OUT"
check_one_line "... in one line" "$OUT"
hops=$(grep -c "^hub GET .*$SHARD" "$LOG")
if [ "$hops" -ge 4 ] && [ "$hops" -le 16 ]; then
	tap_ok "... the loop was followed 3 hops a try ($hops GETs)"
else tap_not_ok "... the loop was followed 3 hops a try" "$hops GETs"; fi
no_ready rloop "... no READY checkpoint"

fakehub_ctl '{"slow": ["z.bin"]}'
t0=$(date +%s)
check_exit "a stalled transfer: error" 1 fake --checkpoint-id slow \
	--stall-timeout 1 --retries 1
secs=$(($(date +%s) - t0))
check_grep "... names the file" "z.bin" "$OUT"
if [ "$secs" -le 30 ]; then tap_ok "... within 30 s ($secs s)"
else tap_not_ok "... within 30 s" "took $secs s"; fi

# SIGINT while a transfer waits on the upstream (z.bin never answered, no
# byte moving): the import stops within a second or so, not at the stall
# timeout, and leaves no READY checkpoint
ms() { echo $(($(date +%s%N) / 1000000)); }
fakehub_ctl '{"hold": ["z.bin"]}'
"$W" --store "$DOWN" model import --from-hub org/fake --endpoint "$F" \
	--chunk-size 512KiB --checkpoint-id sigint --stall-timeout 60 \
	> "$T/sigint.out" 2>&1 &
pid=$!
if wait_for 30 grep -q 'resolve/[0-9a-f]*/z.bin' "$LOG"; then
	t0=$(ms)
	kill -INT "$pid"
	wait_exit 20 "$pid"; rc=$?
	el=$(($(ms) - t0))
	if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$el" -le 5000 ]; then
		tap_ok "SIGINT during a held transfer: the import stops within a second or so ($el ms, exit $rc)"
	else tap_not_ok "SIGINT during a held transfer: the import stops within a second or so" \
		"exit $rc after $el ms" "$(tail -3 "$T/sigint.out")"; fi
	check_grep "... saying it was interrupted" "interrupted" "$(cat "$T/sigint.out")"
	no_ready sigint "... no READY checkpoint"
else
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	tap_not_ok "SIGINT during a held transfer: z.bin was never asked for" "$(tail -3 "$T/sigint.out")"
fi

# killed mid-import: every file before z.bin stored and verified (one at a
# time, in path order), z.bin never answered
fakehub_ctl '{"hold": ["z.bin"]}'
"$W" --store "$DOWN" model import --from-hub org/fake --endpoint "$F" \
	--chunk-size 512KiB --checkpoint-id killed --jobs 1 >/dev/null 2>&1 &
pid=$!
wait_for 30 grep -q 'resolve/[0-9a-f]*/z.bin' "$LOG"
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
ctl_keep=$(cat "$LOG")
fakehub_ctl '{}'
# its intent record says which files are kept: a run that cannot read it
# fails, and neither starts over nor drops the record
check_exit "run again while its intent record cannot be read: fails" 1 \
	env WSTORE_FAULTS=failread=weight/intents/models/killed timeout -k 5 90 \
	"$W" --store "fault+$DOWN" model import --from-hub org/fake --endpoint "$F" \
	--chunk-size 512KiB --checkpoint-id killed --jobs 1
check_grep "... naming it" "weight/intents/models/killed" "$OUT"
ctl_keep="$ctl_keep
$(cat "$LOG")"
fakehub_ctl '{}'
check_exit "killed with SIGKILL, run again: imported" 0 \
	fake --checkpoint-id killed --jobs 1
printf '%s\n' "$ctl_keep" | cat - "$LOG" > "$T/both.log"
LOG="$T/both.log"
bad=""
for f in $(cd "$FSRC" && find . -type f | sed 's|^\./||' | sort); do
	n=$(fakehub_gets "$f")
	if [ "$f" = z.bin ]; then [ "$n" = 2 ] || bad="$bad $f:$n"
	else [ "$n" = 1 ] || bad="$bad $f:$n"; fi
done
if [ -z "$bad" ]; then tap_ok "... only the missing file was fetched again"
else tap_not_ok "... only the missing file was fetched again" "requests:$bad"; fi
check "... verify passes" ws model verify killed
check "... pulled bytes identical" ws model pull killed --dest "$T/kp" --quiet
check "... to the source" diff -r "$FSRC" "$T/kp"

# killed again, then the kept data files zeroed at their size: the re-run
# hashes what it keeps, so it fetches them again rather than serve zeros.
# A store of its own: in the shared one the files are held by READY
# checkpoints, and an import takes them from there (reuse) with no fetch
LOG="$T/fake.log"
MAIN_DOWN=$DOWN
DOWN="$T/zstore"
fakehub_ctl '{"hold": ["z.bin"]}'
"$W" --store "$DOWN" model import --from-hub org/fake --endpoint "$F" \
	--chunk-size 512KiB --checkpoint-id zeroed --jobs 1 >/dev/null 2>&1 &
pid=$!
wait_for 30 grep -q 'resolve/[0-9a-f]*/z.bin' "$LOG"
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
nz=0
for d in $(find "$DOWN" -path "*zeroed*" -name 'data-*' -type f); do
	n=$(stat -c %s "$d")
	truncate -s 0 "$d"
	truncate -s "$n" "$d"
	nz=$((nz + 1))
done
if [ "$nz" -ge 1 ]; then tap_ok "killed again: $nz kept data files zeroed at their size"
else tap_not_ok "killed again: kept data files zeroed at their size" "none found"; fi
fakehub_ctl '{}'
check_exit "... run again: imported" 0 fake --checkpoint-id zeroed --jobs 1
check_grep "... the zeroed files fetched again" "^1$" "$(fakehub_gets "$SHARD")"
check "... verify passes" ws model verify zeroed
check "... pulled bytes identical" ws model pull zeroed --dest "$T/zp" --quiet
check "... to the source" diff -r "$FSRC" "$T/zp"

# ---- the trust boundary (docs/trust.md) ----------------------------------
DOWN=$MAIN_DOWN
# fresh NAME: the next imports go to a store of their own, so that what
# they must fetch is not taken from a READY checkpoint instead
fresh() { DOWN="$T/store-$1"; }
# check_no GREP-PATTERN NAME: the fake's log has no such line
check_no() {
	if grep -Eq -- "$1" "$LOG"; then tap_not_ok "$2" "$(grep -E -- "$1" "$LOG" | head -3)"
	else tap_ok "$2"; fi
}
fakehub_ctl '{"link": "other", "token": "tk"}'
check_exit "a Link to another port: refused" 1 fake --checkpoint-id lo \
	--token-file "$T/faketok"
check_grep "... saying the next page is not on the endpoint" "next page .*:$CP/.* is not on http://127.0.0.1:$FP" "$OUT"
check_one_line "... one line" "$OUT"
check_no "^cdn .* auth$" "... the token never went to the other port"
check_no "^cdn GET /api" "... the other port was never asked"
no_ready lo "... no READY checkpoint"
fakehub_ctl '{"link": "self"}'
t0=$(date +%s)
check_exit "a Link to the same page: refused" 1 fake --checkpoint-id loop
check_grep "... a loop, named" "loops" "$OUT"
n=$(grep -c " /api/models/org/fake/tree/" "$LOG")
check_grep "... after one page ($n)" '^1$' "$n"
fresh pages
fakehub_ctl '{"link": "pages"}'
check_exit "one file per page on the endpoint: imported" 0 fake --checkpoint-id pages
nf=$(cd "$FSRC" && find . -type f | wc -l)
n=$(grep -c " /api/models/org/fake/tree/" "$LOG")
check_grep "... every page fetched ($n for $nf files)" "^$nf\$" "$n"
check_exit "... more pages than hub_max_pages: refused" 1 \
	env WSTORE_HUB_MAX_PAGES=2 "$W" --store "$DOWN" model import \
	--from-hub org/fake --endpoint "$F" --checkpoint-id pages2
check_grep "... naming the key" "more than 2 pages \(hub_max_pages\)" "$OUT"
fakehub_ctl '{}'
check_exit "a repository name holding '?': refused" 2 \
	hub --from-hub 'org/secret?-public' --endpoint "$F"
check_grep "... named" "invalid repository 'org/secret\\?-public'" "$OUT"
check_exit "... and '%3F': refused" 2 \
	hub --from-hub 'org/secret%3F-public' --endpoint "$F"
check_no "secret" "... nothing asked upstream"

# sizes from the listing: refused before anything is allocated or stored
big='{"type": "file", "path": "big%d.bin", "size": 6148914691236517206, "oid": "0000000000000000000000000000000000000000"}'
fakehub_ctl "{\"extra\": [$(printf "$big, $big, $big" 1 2 3)]}"
check_exit "three entries of 2^62.4 bytes: refused" 1 \
	timeout -k 5 30 "$W" --store "$DOWN" model \
	import --from-hub org/fake --endpoint "$F" --checkpoint-id huge
check_grep "... naming the file and the limit" "big1.bin.*hub_max_file_size" "$OUT"
check_one_line "... one line" "$OUT"
no_ready huge "... no READY checkpoint"
sz='{"type": "file", "path": "s%d.bin", "size": 800000000000, "oid": "0000000000000000000000000000000000000000"}'
fakehub_ctl "{\"extra\": [$(printf "$sz, $sz" 1 2)]}"
check_exit "two entries of 800 GB: over hub_max_total_size 1TiB" 1 \
	env WSTORE_HUB_MAX_TOTAL_SIZE=1TiB "$W" --store "$DOWN" model import \
	--from-hub org/fake --endpoint "$F" --checkpoint-id total
check_grep "... naming the limit" "hub_max_total_size" "$OUT"
fakehub_ctl '{}'
check_exit "more files than hub_max_files: refused" 1 \
	env WSTORE_HUB_MAX_FILES=2 "$W" --store "$DOWN" model import \
	--from-hub org/fake --endpoint "$F" --checkpoint-id files
check_grep "... naming the limit" "more than 2 files \(hub_max_files\)" "$OUT"
check_exit "a listing over hub_max_json_size: refused" 1 \
	env WSTORE_HUB_MAX_JSON_SIZE=100 "$W" --store "$DOWN" model import \
	--from-hub org/fake --endpoint "$F" --checkpoint-id json
check_grep "... naming the limit" "hub_max_json_size" "$OUT"

# names as the manifest rules and the mount demand
ent='{"type": "file", "path": "%s", "size": 1, "oid": "0000000000000000000000000000000000000000"}'
fakehub_ctl "{\"extra\": [$(printf "$ent" "config.json/x")]}"
check_exit "a file and a directory of the same name: refused" 1 fake --checkpoint-id clash
check_grep "... named" "'config.json' is both a file and the directory of 'config.json/x'" "$OUT"
no_ready clash "... no READY checkpoint"
fakehub_ctl "{\"extra\": [$(printf "$ent" 'fake\nimported x: 1 files')]}"
check_exit "a name with a newline: refused" 1 fake --checkpoint-id nl
check_one_line "... in one line (the newline shown as '?')" "$OUT"
check_grep "... named" "control character" "$OUT"
no_ready nl "... no READY checkpoint"

# transfers: a minimum rate and a deadline; error bodies bounded
fresh trickle
fakehub_ctl '{"trickle": ["z.bin"]}'
t0=$(date +%s)
check_exit "a transfer trickling 1 byte/s: error" 1 fake --checkpoint-id trickle \
	--stall-timeout 2 --retries 1
secs=$(($(date +%s) - t0))
check_grep "... names the file" "z.bin" "$OUT"
if [ "$secs" -le 30 ]; then tap_ok "... within 30 s ($secs s)"
else tap_not_ok "... within 30 s" "took $secs s"; fi
fresh errbody
fakehub_ctl '{"errbody": ["z.bin"]}'
t0=$(date +%s)
check_exit "an error answer whose body never ends: error" 1 fake \
	--checkpoint-id errbody --retries 1
secs=$(($(date +%s) - t0))
check_grep "... its status named" "z.bin.*HTTP 500" "$OUT"
if [ "$secs" -le 30 ]; then tap_ok "... within 30 s ($secs s)"
else tap_not_ok "... within 30 s" "took $secs s"; fi
fresh deadline
fakehub_ctl '{"hold": ["z.bin"]}'
t0=$(date +%s)
check_exit "a request past hub_transfer_timeout_ms: error" 1 \
	env WSTORE_HUB_TRANSFER_TIMEOUT_MS=3000 "$W" --store "$DOWN" model \
	import --from-hub org/fake --endpoint "$F" --checkpoint-id deadline \
	--stall-timeout 60
secs=$(($(date +%s) - t0))
check_grep "... naming the deadline" "z.bin.*hub_transfer_timeout_ms" "$OUT"
if [ "$secs" -le 20 ]; then tap_ok "... within 20 s ($secs s)"
else tap_not_ok "... within 20 s" "took $secs s"; fi

# credentials in the endpoint's URL: used, never recorded or printed
fresh creds
fakehub_ctl '{}'
UF="http://us3r:s3cret@127.0.0.1:$FP"
check_exit "--endpoint with user:password: imported" 0 \
	hub --from-hub org/fake --endpoint "$UF" --checkpoint-id creds
check_grep "... basic auth sent to the endpoint" "^hub GET .* auth$" "$(cat "$LOG")"
if printf '%s' "$OUT" | grep -q s3cret; then tap_not_ok "... not in the report" "$OUT"
else tap_ok "... not in the report"; fi
check_exit "... inspect" 0 ws model inspect creds
if printf '%s' "$OUT" | grep -q s3cret; then tap_not_ok "... not in inspect" "$OUT"
else tap_ok "... not in inspect"; fi
check_grep "... the source names the endpoint" "source: +http://127.0.0.1:$FP/org/fake" "$OUT"
if grep -rqs s3cret "$DOWN"; then tap_not_ok "... nowhere in the store" "$(grep -rls s3cret "$DOWN" | head -3)"
else tap_ok "... nowhere in the store"; fi

check_exit "config show with a store URL holding a password" 0 \
	env WSTORE_STORE='redis://:pw123@127.0.0.1:1/0' HF_ENDPOINT= \
	WSTORE_HUB_ENDPOINT="$UF" "$W" config show
if printf '%s' "$OUT" | grep -Eq 'pw123|s3cret'; then tap_not_ok "... prints no password" "$OUT"
else tap_ok "... prints no password"; fi
check_grep "... the URL with ***" 'store=redis://\*\*\*@127.0.0.1:1/0' "$OUT"

# a mirror of that endpoint: its log names the upstream without them
if serve_start credmirror "$T/store-credmirror" --upstream "$UF"; then
	check_grep "serve --upstream with user:password: the log names it with ***" \
		"mirror of http://\\*\\*\\*@127.0.0.1:$FP" "$(cat "$SERVE_LOG")"
	check_grep "... a name imported through it" '"sha"' \
		"$(curl -sf --max-time 60 "$SERVE_URL/api/models/org/fake/revision/main")"
	if grep -qs s3cret "$SERVE_LOG" || grep -rqs s3cret "$T/store-credmirror"; then
		tap_not_ok "... the password in neither its log nor its store" "$(grep -s s3cret "$SERVE_LOG" | head -3)"
	else tap_ok "... the password in neither its log nor its store"; fi
	serve_stop
fi

# a filtered import, then a full one: the full one fetches the rest
fresh filter
check_exit "import --include config.json" 0 fake --include config.json
: > "$LOG"
check_exit "then a full import: imported" 0 fake
check_grep "... every file" "$nf files" "$OUT"
check_grep "... the missing files fetched" "$SHARD" "$(cat "$LOG")"
fid=$(printf '%s\n' "$OUT" | sed -n "s/^imported '\([^']*\)'.*/\1/p")
check_exit "... NAME@COMMIT resolves to the full one" 0 ws model resolve \
	"org/fake@0123456789abcdef0123456789abcdef01234567"
check_grep "... ($fid)" "$fid" "$OUT"

tap_done
