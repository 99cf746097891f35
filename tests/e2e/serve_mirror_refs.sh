#!/bin/sh
# serve_mirror_refs.sh - two `wstore serve --upstream` mirrors of one
# upstream (tests/tools/fakehub.py serving commits CA and CB of org/fake,
# refs main and v1), as a fleet puts them behind one load balancer: both
# report the upstream's commit ids and ETags (and so does a --from-hub
# store); the real `hf download --revision COMMIT` through a mirror, then
# the same offline; the upstream moves main: each mirror follows within
# its refresh time and never goes back; a request for the old tag leaves
# main alone; a mirror restarted with the upstream down serves main at its
# last commit; a new commit changing one file fetches that file alone;
# --upstream-allow is matched on the canonical name; a
# request waiting for the upstream gets 503 with Retry-After after the
# header timeout, and the server keeps answering others; refs of a
# repository not mirrored yet come from the upstream's listing.
#   BUILD  the build directory holding wstore
TAP_SUITE=serve-mirror-refs
. "$(dirname "$0")/../lib/suite.sh"
. "$HERE/lib/serve.sh"
. "$HERE/lib/fakehub.sh"
. "$HERE/lib/hubclients.sh"
suite_cleanup() {
	serve_stop_all
	fakehub_stop
}

CA=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1
CB=bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2
FSRC="$T/fsrc"
fakehub_source "$FSRC"
cp -r "$FSRC" "$T/a"
cp -r "$FSRC" "$T/b"
printf '{"changed": "in commit B"}\n' > "$T/b/config.json"
ctl_refs() { # MAIN V1 [EXTRA JSON]
	fakehub_ctl "{\"commits\": {\"$CA\": \"$T/a\", \"$CB\": \"$T/b\"}, \"refs\": {\"main\": \"$1\", \"v1\": \"$2\"}${3:+, $3}}"
}
fakehub_start "$FSRC" || { tap_done; exit 1; }
ctl_refs "$CA" "$CA"

serve_start m1 "$T/m1" --upstream "$F" --upstream-refresh 2 \
	--cache-seconds 0 || { tap_done; exit 1; }
M1=$SERVE_URL M1_PID=$SERVE_PID M1_LOG=$SERVE_LOG
serve_start m2 "$T/m2" --upstream "$F" --upstream-refresh 2 \
	--cache-seconds 0 --no-access-log || { tap_done; exit 1; }
M2=$SERVE_URL

sha_of() { curl -sf "$1/api/models/org/fake/revision/${2:-main}" | json_get sha; }
hdr() { # URL HEADER: the header's value of a HEAD
	curl -sfI "$1" | tr -d '\r' | awk -v h="$2" 'tolower($1) == tolower(h) ":" {print $2}'
}

# ---- identity ----------------------------------------------------------------
check_grep "mirror 1: main is the upstream's commit" "^$CA\$" "$(sha_of "$M1")"
check_grep "mirror 2: main is the upstream's commit" "^$CA\$" "$(sha_of "$M2")"
check_grep "X-Repo-Commit is the upstream's commit" "^$CA\$" \
	"$(hdr "$M1/org/fake/resolve/main/config.json" X-Repo-Commit)"
want_blob=$(python3 -c 'import hashlib,sys; d=open(sys.argv[1],"rb").read(); print(hashlib.sha1(b"blob %d\0" % len(d) + d).hexdigest())' "$T/a/config.json")
want_lfs=$(sha256sum "$T/a/model-00001-of-00002.safetensors" | cut -d' ' -f1)
for f in config.json model-00001-of-00002.safetensors; do
	e1=$(hdr "$M1/org/fake/resolve/$CA/$f" ETag)
	e2=$(hdr "$M2/org/fake/resolve/$CA/$f" ETag)
	case $f in *.safetensors) w=$want_lfs ;; *) w=$want_blob ;; esac
	if [ "$e1" = "\"$w\"" ] && [ "$e2" = "$e1" ]; then
		tap_ok "$f: one ETag on both mirrors, the upstream's hash"
	else tap_not_ok "$f: one ETag on both mirrors, the upstream's hash" \
		"m1 $e1 m2 $e2 want $w"; fi
done
"$W" --store "$T/fromhub" model import --from-hub org/fake --endpoint "$F" \
	--quiet > "$T/fromhub.out" 2>&1
serve_start fromhub "$T/fromhub" --cache-seconds 0 --no-access-log ||
	{ tap_done; exit 1; }
check_grep "a --from-hub store reports the same commit" "^$CA\$" \
	"$(sha_of "$SERVE_URL")"
check_grep "... and the same ETag" "^\"$want_blob\"\$" \
	"$(hdr "$SERVE_URL/org/fake/resolve/main/config.json" ETag)"
serve_stop

# ---- the real client: by commit, then offline ------------------------------------
if PP=$(hub_pythonpath 1.28.0); then
	hfdl() {
		PYTHONPATH=$PP HF_ENDPOINT=$M1 HF_HUB_DISABLE_TELEMETRY=1 \
			timeout 120 /usr/bin/python3 -m huggingface_hub.cli.hf \
			download org/fake --revision "$CA" --cache-dir "$T/hfcache" "$@"
	}
	out=$(hfdl 2>&1 | tail -1)
	case $out in
	*"snapshots/$CA"*) tap_ok "hf download --revision COMMIT through a mirror: snapshots/COMMIT" ;;
	*) tap_not_ok "hf download --revision COMMIT through a mirror: snapshots/COMMIT" "$out" ;;
	esac
	if cmp -s "$T/hfcache/models--org--fake/snapshots/$CA/config.json" "$T/a/config.json"; then
		tap_ok "... its bytes are the upstream's"
	else tap_not_ok "... its bytes are the upstream's"; fi
	out=$(HF_HUB_OFFLINE=1 hfdl 2>&1 | tail -1)
	case $out in
	*"snapshots/$CA"*) tap_ok "... the same command offline (HF_HUB_OFFLINE=1) succeeds" ;;
	*) tap_not_ok "... the same command offline (HF_HUB_OFFLINE=1) succeeds" "$out" ;;
	esac
else
	tap_skip "hf download through a mirror" "huggingface_hub 1.28.0 is not unpacked in $HFHUB"
fi
# huggingface-cli of 0.36, through the other mirror, into another cache
if PP=$(hub_pythonpath 0.36.2); then
	hfcli() {
		PYTHONPATH=$PP HF_ENDPOINT=$M2 HF_HUB_DISABLE_TELEMETRY=1 \
			timeout 120 /usr/bin/python3 -m huggingface_hub.commands.huggingface_cli \
			download org/fake --revision "$CA" --cache-dir "$T/hfcache2" "$@"
	}
	out=$(hfcli 2>&1 | tail -1)
	case $out in
	*"snapshots/$CA"*) tap_ok "huggingface-cli download --revision COMMIT through the other mirror" ;;
	*) tap_not_ok "huggingface-cli download --revision COMMIT through the other mirror" "$out" ;;
	esac
	out=$(HF_HUB_OFFLINE=1 hfcli 2>&1 | tail -1)
	case $out in
	*"snapshots/$CA"*) tap_ok "... and offline" ;;
	*) tap_not_ok "... and offline" "$out" ;;
	esac
else
	tap_skip "huggingface-cli download through a mirror" "huggingface_hub 0.36.2 is not unpacked in $HFHUB"
fi

# ---- the upstream moves main --------------------------------------------------
: > "$LOG"
ctl_refs "$CB" "$CA"
moved() { [ "$(sha_of "$1")" = "$CB" ]; }
t0=$(date +%s)
if wait_for 60 moved "$M1" && wait_for 60 moved "$M2"; then
	tap_ok "upstream moved main: both mirrors follow ($(($(date +%s) - t0)) s, refresh 2 s)"
else tap_not_ok "upstream moved main: both mirrors follow" \
	"m1 $(sha_of "$M1") m2 $(sha_of "$M2")"; fi
got=$(grep " /org/fake/resolve/$CB/" "$LOG" | awk '{print $3}' | sed "s|.*/$CB/||" | sort | tr '\n' ' ')
check_grep "... the new commit changes one small file: that file alone fetched (once per mirror)" \
	'^config.json config.json $' "$got"
check "... main serves the new bytes" cmp "$T/b/config.json" \
	"$(curl -sf "$M1/org/fake/resolve/main/config.json" -o "$T/c" && echo "$T/c")"
check "... the old commit still serves the old bytes" cmp "$T/a/config.json" \
	"$(curl -sf "$M2/org/fake/resolve/$CA/config.json" -o "$T/c" && echo "$T/c")"
# the old tag, asked of both mirrors: main stays where it is
check_grep "the old tag v1: its commit" "^$CA\$" "$(sha_of "$M1" v1)"
check_grep "... on the other mirror too" "^$CA\$" "$(sha_of "$M2" v1)"
back=""
i=0
while [ $i -lt 10 ]; do
	for m in "$M1" "$M2"; do
		s=$(sha_of "$m")
		[ "$s" = "$CB" ] || back="$back $s"
	done
	i=$((i + 1))
done
if [ -z "$back" ]; then tap_ok "... main never goes back (20 asks, alternating mirrors)"
else tap_not_ok "... main never goes back" "$back"; fi
refs_of() { curl -sf "$1/api/models/org/fake/refs" | python3 -c '
import json, sys
print(" ".join(sorted("%s=%s" % (b["name"], b["targetCommit"]) for b in json.load(sys.stdin)["branches"])))'; }
check_grep "/api/models/org/fake/refs: main and v1 at the upstream's commits" \
	"^main=$CB v1=$CA\$" "$(refs_of "$M2")"
check_grep "/metrics: a refresh moved main" \
	'^wstore_serve_mirror_refresh_moved_total [1-9]' "$(curl -sf "$M1/metrics")"
check_grep "access log: hit, fetch and refresh outcomes" 'mirror=refresh' "$(cat "$M1_LOG")"
check_grep "... and hits" 'mirror=hit' "$(cat "$M1_LOG")"

# ---- restart with the upstream down -------------------------------------------
kill -TERM "$M1_PID"
wait_exit 30 "$M1_PID"
ctl_refs "$CB" "$CA" '"down": true'
serve_start m1again "$T/m1" --upstream "$F" --upstream-refresh 2 \
	--cache-seconds 0 || { tap_done; exit 1; }
check_grep "upstream down, mirror restarted: main at its last commit" "^$CB\$" \
	"$(sha_of "$SERVE_URL")"
check "... and its bytes" cmp "$T/b/config.json" \
	"$(curl -sf "$SERVE_URL/org/fake/resolve/main/config.json" -o "$T/c" && echo "$T/c")"
# a refresh is asked by a request for main once the record is older than
# --upstream-refresh: keep asking while waiting (the restart may come
# within 2 s of the last ask)
asked_again() {
	sha_of "$SERVE_URL" >/dev/null
	grep -q 'revision/main' "$LOG"
}
if wait_for 20 asked_again; then
	tap_ok "... the upstream was asked again (and failed)"
else tap_not_ok "... the upstream was asked again (and failed)" "$(cat "$LOG")"; fi
refresh_failed() {
	sha_of "$SERVE_URL" >/dev/null
	curl -sf "$SERVE_URL/metrics" |
		grep -q '^wstore_serve_mirror_refresh_failed_total [1-9]'
}
check "/metrics: the failed refresh counted" wait_for 20 refresh_failed
check_grep "... main still at its last commit" "^$CB\$" "$(sha_of "$SERVE_URL")"
serve_stop

# ---- --upstream-allow on the canonical name ---------------------------------
ctl_refs "$CB" "$CA"
serve_start allow "$T/m3" --upstream "$F" --upstream-allow 'org/*-public' \
	--cache-seconds 0 --no-access-log || { tap_done; exit 1; }
code_of() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
check_grep "allow 'org/*-public': org/secret%3F-public is refused (404)" '^404$' \
	"$(code_of "$SERVE_URL/api/models/org/secret%3F-public/revision/main")"
check_grep "... org/x%23-public too" '^404$' \
	"$(code_of "$SERVE_URL/org/x%23-public/resolve/main/config.json")"
check_grep "... org/..%2F-public too" '^404$' \
	"$(code_of "$SERVE_URL/api/models/org/..%2F-public/revision/main")"
if grep -q 'secret\|x#\|x%23' "$LOG"; then
	tap_not_ok "... none asked of the upstream" "$(cat "$LOG")"
else tap_ok "... none asked of the upstream"; fi
serve_stop

# ---- a request waiting for the upstream is bounded -----------------------------
ctl_refs "$CB" "$CA" '"hold": ["sub/c.txt"]'
serve_start held "$T/m4" --upstream "$F" --header-timeout 2 \
	--max-connections 4 --max-connections-per-client 4 --cache-seconds 0 \
	--no-access-log || { tap_done; exit 1; }
pids=""
for i in 1 2 3 4; do
	# the held file itself: any other streams on its own (serve-stream)
	curl -s -D "$T/held$i.h" -o /dev/null "$SERVE_URL/org/fake/resolve/main/sub/c.txt" &
	pids="$pids $!"
done
wait_for 10 grep -q 'resolve/[0-9a-f]*/sub/c.txt' "$LOG"
# every slot taken by a waiting client: /healthz is answered once they
# have their 503s (the header timeout), not when the upstream answers
code=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$SERVE_URL/healthz")
for p in $pids; do wait_exit 30 "$p"; done
n=$(grep -l '^HTTP/1.1 503' "$T"/held?.h | wc -l)
check_grep "4 clients waiting on a held upstream: 503 each after the header timeout" '^4$' "$n"
check_grep "... with Retry-After" 'Retry-After' "$(cat "$T/held1.h")"
check_grep "... /healthz from a fifth client answered within 10 s" '^200$' "$code"
t0=$(date +%s)
serve_stop
check_grep "... and the server stops at once (the fetch is canceled)" '^0$' "$SERVE_RC"
el=$(($(date +%s) - t0))
if [ "$el" -le 10 ]; then tap_ok "... within 10 s ($el s)"
else tap_not_ok "... within 10 s" "$el s"; fi

# ---- refs of a cold repository: from the listing --------------------------------
# the upstream still holds sub/c.txt, so the snapshot is not READY; refs
# names main's commit once the listing is in, as the model info does
serve_start coldrefs "$T/m5" --upstream "$F" --header-timeout 5 \
	--cache-seconds 0 --no-access-log || { tap_done; exit 1; }
code=$(curl -s --max-time 20 -o "$T/coldrefs.json" -w '%{http_code}' \
	"$SERVE_URL/api/models/org/fake/refs")
check_grep "refs of a cold repository (a file held upstream): 200" '^200$' "$code"
check_grep "... main at the upstream's commit, from the listing" "^main=$CB\$" \
	"$(python3 -c '
import json, sys
print(" ".join(sorted("%s=%s" % (b["name"], b["targetCommit"]) for b in json.load(open(sys.argv[1]))["branches"])))' "$T/coldrefs.json")"
check_grep "... while the snapshot is still fetched (the held file not in)" '^503$' \
	"$(curl -s --max-time 20 -o /dev/null -w '%{http_code}' "$SERVE_URL/org/fake/resolve/main/sub/c.txt")"
# the Hub's own client (HfApi.list_repo_refs), as a fleet's tooling asks
if _pp=$(hub_pythonpath 1.28.0); then
	got=$(PYTHONPATH=$_pp HF_HUB_DISABLE_TELEMETRY=1 HF_HOME="$T/hfhome" \
		timeout 60 /usr/bin/python3 -c '
import sys
from huggingface_hub import HfApi
refs = HfApi(endpoint=sys.argv[1]).list_repo_refs("org/fake")
print(" ".join(sorted("%s=%s" % (b.name, b.target_commit) for b in refs.branches)))' \
		"$SERVE_URL" 2>&1)
	check_grep "... huggingface_hub 1.28.0 list_repo_refs: main at the upstream's commit" \
		"^main=$CB\$" "$got"
else
	tap_skip "... huggingface_hub list_repo_refs" "huggingface_hub 1.28.0 is not unpacked in $HFHUB"
fi
serve_stop

tap_done
