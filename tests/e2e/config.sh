#!/bin/sh
# config.sh - the configuration story end to end: the layers (system file
# < user file < environment < flags) and what `config show --origin` says
# of each, config get/set/unset (checked values, atomic edits of one file),
# the XDG default paths, the default store before its first import, a
# server address given as --store, and version.
TAP_SUITE=config
. "$(dirname "$0")/../lib/suite.sh"
# this suite sets the layers itself
unset WSTORE_HOME XDG_CONFIG_HOME XDG_DATA_HOME WSTORE_STORE WSTORE_QUOTA \
	WSTORE_EVICT
export WSTORE_SYSTEM_CONFIG="$T/etc/config.json"
cd "$T"
SRC="$T/src"
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 200000 --shards 1 >/dev/null

# valid_json NAME TEXT: TEXT parses as JSON
valid_json() {
	if printf '%s' "$2" | python3 -c 'import json,sys; json.load(sys.stdin)' 2>/dev/null; then
		tap_ok "$1"
	else tap_not_ok "$1" "not JSON:" "$2"; fi
}

# ---- the default store, never created ------------------------------------
check_exit "list on the never-created default store exits 0" 0 "$W" model list
check_grep "... and says there are no checkpoints" "^no checkpoints$" "$OUT"
check_exit "list --json on it exits 0" 0 "$W" --json model list
valid_json "... with valid JSON" "$OUT"
check_grep "... an empty array" '^\[\]$' "$OUT"
check_exit "df on it exits 0" 0 "$W" --json df
valid_json "... with valid JSON" "$OUT"
check "listing did not create it" test ! -e "$HOME/.local/share/wstore"
check_exit "inspect on it: not found" 1 "$W" model inspect nothing
check_grep "... naming the checkpoint" "checkpoint 'nothing' not found" "$OUT"
check_exit "a store named on the command line that does not exist" 1 \
	"$W" --store "$T/nope" model list
check_grep "... stays an error naming it" "file store '$T/nope' does not exist" "$OUT"
check_one_line "... in one line" "$OUT"
check_exit "so does one named by WSTORE_STORE" 1 env WSTORE_STORE="$T/nope" "$W" model list

# ---- the XDG default store ------------------------------------------------
check_exit "import with no store goes to \$XDG_DATA_HOME/wstore" 0 \
	env XDG_DATA_HOME="$T/xdg-data" "$W" --quiet model import \
	--checkpoint-id c1 --model-id m/x --source "$SRC"
check "... which it created" test -d "$T/xdg-data/wstore"
check_exit "list finds it there" 0 env XDG_DATA_HOME="$T/xdg-data" "$W" model list
check_grep "... the checkpoint" "^c1 " "$OUT"
check_exit "a relative XDG_DATA_HOME is ignored (XDG rules)" 0 \
	env XDG_DATA_HOME=rel "$W" config get store
check_grep "... the default is ~/.local/share/wstore" "^$HOME/.local/share/wstore$" "$OUT"
check_exit "WSTORE_HOME beats XDG_DATA_HOME" 0 \
	env XDG_DATA_HOME="$T/xdg-data" WSTORE_HOME="$T/wh" "$W" config get store
check_grep "... as the default store" "^$T/wh$" "$OUT"

# ---- a server address given as a store -----------------------------------
check_exit "--store host:6379 is refused" 1 "$W" --store host:6379 \
	model import --checkpoint-id c2 --model-id m/x --source "$SRC"
check_grep "... with a hint" "store': 'host:6379' is a server address.*redis://host:6379" "$OUT"
check_one_line "... in one line" "$OUT"
check "... and no directory of that name is made" test ! -e "$T/host:6379"
check_exit "WSTORE_STORE=10.0.0.1:6379 is refused" 1 \
	env WSTORE_STORE=10.0.0.1:6379 "$W" model list
check_grep "... naming the variable" "environment variable 'WSTORE_STORE'.*redis://10.0.0.1:6379" "$OUT"
check_exit "file://host:6379 is still a directory" 0 "$W" --quiet \
	--store file://host:6379 model import --checkpoint-id c3 \
	--model-id m/x --source "$SRC"
check "... made where asked" test -d "$T/host:6379"
check_exit "config set store host:6379 is refused" 1 "$W" config set store h:1
check "... and writes no file" test ! -e "$HOME/.config/wstore/config.json"

# ---- layers and their origins ---------------------------------------------
mkdir -p "$T/etc" "$T/xdg-cfg/wstore"
printf '{"store": "%s/sys-store", "quota": "1GiB", "evict": "lru", "redis_password": "s3cret"}\n' "$T" \
	> "$T/etc/config.json"
export XDG_CONFIG_HOME="$T/xdg-cfg"
printf '{"quota": "2GiB", "chunk_size": "1MiB"}\n' > "$T/xdg-cfg/wstore/config.json"
check_exit "config show --origin" 0 env WSTORE_CHUNK_SIZE=2MiB \
	"$W" --store "$T/flag-store" config show --origin
check_grep "store from the flag" "^flag:--store	store=$T/flag-store$" "$OUT"
check_grep "chunk_size from the environment" "^env:WSTORE_CHUNK_SIZE	chunk_size=2MiB$" "$OUT"
check_grep "quota from the user's file (XDG_CONFIG_HOME)" \
	"^file:$T/xdg-cfg/wstore/config.json	quota=2GiB$" "$OUT"
check_grep "evict from the system file" "^file:$T/etc/config.json	evict=lru$" "$OUT"
check_grep "a password is never printed" "redis_password=<hidden>$" "$OUT"
if printf '%s' "$OUT" | grep -q s3cret; then
	tap_not_ok "... anywhere" "$OUT"
else tap_ok "... anywhere"; fi
check_exit "config show (no origin)" 0 "$W" config show
check_grep "store from the system file" "^store=$T/sys-store$" "$OUT"
check_exit "config show --origin --json" 0 "$W" --json config show --origin
valid_json "... is valid JSON" "$OUT"
check_grep "... with value and origin" "\"origin\": \"file:$T/etc/config.json\"" "$OUT"
check_exit "config get quota" 0 "$W" config get quota
check_grep "... the user's file beats the system's" "^2GiB$" "$OUT"
check_exit "config get of a key set nowhere" 1 "$W" config get serve_listen
check_grep "... says so" "config key 'serve_listen' is not set" "$OUT"
check_exit "config get of an unknown key" 2 "$W" config get quotta
check_grep "... names it and lists the keys" "unknown config key 'quotta'; the keys: store, .*quota" "$OUT"
check_one_line "... in one line" "$OUT"
check_exit "the store of the system file is used" 1 "$W" model list
check_grep "... (it does not exist: named, so an error)" "'$T/sys-store' does not exist" "$OUT"
printf '{"quota": ' > "$T/etc/config.json"
check_exit "a broken system file is an error" 1 "$W" model list
check_grep "... naming it" "config '$T/etc/config.json': line" "$OUT"
check_one_line "... in one line" "$OUT"
rm -f "$T/etc/config.json"

# ---- set and unset --------------------------------------------------------
U="$T/xdg-cfg/wstore/config.json"
check_exit "config set quota" 0 "$W" config set quota 5GiB
check_grep "... written to the user's file" '"quota": "5GiB"' "$(cat "$U")"
check_grep "... keeping its other keys" '"chunk_size": "1MiB"' "$(cat "$U")"
before=$(cat "$U")
check_exit "config set of a bad value" 1 "$W" config set replica_num zero
check_grep "... names the key" "replica_num.*positive integer" "$OUT"
check "... leaves the file as it was" test "$(cat "$U")" = "$before"
check_exit "config set of an unknown key" 2 "$W" config set stroe x
check_exit "config set of a bad evict" 1 "$W" config set evict fifo
check_grep "... says what is allowed, naming the file and key" \
	"^wstore: config '.*/config.json': key 'evict' must be 'lru' or 'none', got 'fifo'$" "$OUT"
check "no temp file is left" test "$(ls -A "$T/xdg-cfg/wstore")" = config.json
check_exit "config set with too few arguments" 2 "$W" config set quota
check_exit "config unset chunk_size" 0 "$W" config unset chunk_size
check "... removed it" sh -c "! grep -q chunk_size '$U'"
check_exit "config unset of a key not set is no error" 0 "$W" config unset chunk_size
check_exit "config set --system" 0 "$W" config set --system store "$T/sys2"
check "... creates the system file" test -f "$T/etc/config.json"
check "... readable by every user (0644)" test "$(stat -c %a "$T/etc/config.json")" = 644
check "... and leaves the user's file alone" sh -c "! grep -q sys2 '$U'"
check_exit "config set --system of a secret" 0 "$W" config set --system serve_token tok
check_grep "... warns that others can read the file" "warning: .* readable by other users" "$OUT"
check_exit "config set in a --config file that does not exist yet" 0 \
	"$W" --config "$T/other/c.json" config set protocol tcp
check "... creates it, mode 0600" test "$(stat -c %a "$T/other/c.json")" = 600
check_exit "a --config file that does not exist is an error for others" 1 \
	"$W" --config "$T/none.json" model list
printf '{"quota": }' > "$T/broken.json"
check_exit "config set on a broken file is refused" 1 \
	"$W" --config "$T/broken.json" config set quota 1GiB
check_grep "... naming the file and line" "config '$T/broken.json': line 1" "$OUT"
check "... which is left as it was" test "$(cat "$T/broken.json")" = '{"quota": }'

# every key is checked by its type and range, at set and at load: one
# line naming the file and the key, and nothing changed
S2="$T/etc2/wstore/config.json"
check_exit "config set --system creates the system file's directory" 0 \
	env WSTORE_SYSTEM_CONFIG="$S2" "$W" config set --system quota 1GiB
check "... mode 0755 (the services read it)" test "$(stat -c %a "$T/etc2/wstore")" = 755
check "... and the file 0644" test "$(stat -c %a "$S2")" = 644
before=$(cat "$S2")
while IFS='|' read -r key value; do
	check_exit "config set $key '$value' is refused" 1 \
		env WSTORE_SYSTEM_CONFIG="$S2" "$W" config set --system "$key" "$value"
	check_grep "... in one line naming the file and the key" \
		"^wstore: config '$S2': key '$key'" "$OUT"
	check_one_line "... one line" "$OUT"
	check "... changing nothing" test "$(cat "$S2")" = "$before"
	printf '{"%s": "%s"}\n' "$key" "$value" > "$T/load.json"
	check_exit "the same value in a file is refused at load" 1 \
		"$W" --config "$T/load.json" config show
	check_grep "... naming the file and the key" \
		"^wstore: config '$T/load.json': key '$key'" "$OUT"
	check_one_line "... one line" "$OUT"
done <<'EOF2'
serve_listen|0.0.0.0
serve_listen|1.2.3.4:99999
serve_listen|localhost:80
store|ftp://x
hub_endpoint|notaurl
master_server_addr|nohost
protocol|udp
evict|fifo
replica_num|0
connect_timeout_ms|1.5
chunk_size|8GiB
quota|lots
EOF2
check_exit "a file the key names must exist at set" 1 \
	env WSTORE_SYSTEM_CONFIG="$S2" "$W" config set --system serve_tls_cert "$T/none.pem"
check_grep "... saying so" "^wstore: config '$S2': key 'serve_tls_cert' names a file that does not exist" "$OUT"
printf '{"serve_tls_cert": "rel.pem"}\n' > "$T/load.json"
check_exit "... and be absolute in a file" 1 "$W" --config "$T/load.json" config show
check_grep "... saying so" "key 'serve_tls_cert' must be an absolute path" "$OUT"
printf '{"store": 5}\n' > "$T/load.json"
check_exit "a number where a string belongs is refused at load" 1 \
	"$W" --config "$T/load.json" config show
check_grep "... naming the key" "^wstore: config '$T/load.json': key 'store' must be a string$" "$OUT"
touch "$T/cert.pem"
check_exit "a relative file at set" 0 sh -c "cd '$T' && env WSTORE_SYSTEM_CONFIG='$S2' '$W' config set --system serve_tls_cert cert.pem"
check_grep "... is kept absolute" "\"serve_tls_cert\": \"$T/cert.pem\"" "$(cat "$S2")"

# config init: the user's settings, env and flags; not the system file's
rm -f "$U"
check_exit "config init" 0 "$W" --store "$T/s" config init
check_grep "... writes the flag's store" "\"store\": \"$T/s\"" "$(cat "$U")"
check "... and not the system file's token" sh -c "! grep -q serve_token '$U'"

# ---- version --------------------------------------------------------------
ver=$(sed -n "s/^  version : '\(.*\)',$/\1/p" "$HERE/../meson.build")
# the release and the build: +N.gSHA from git (the tree may have moved on
# since the build: any commit of it), else the release (or VERSION)
if git -C "$HERE/.." rev-parse -q --verify HEAD >/dev/null 2>&1 &&
	[ ! -f "$HERE/../VERSION" ]; then
	ver="$(printf %s "$ver" | sed 's/[.]/\\./g')\\+[0-9]+\\.g[0-9a-f]{12}(\\.dirty)?"
fi
check_exit "wstore --version" 0 "$W" --version
check_grep "... prints the project's version" "^wstore $ver$" "$OUT"
check_exit "wstore version" 0 "$W" version
check_grep "... the same" "^wstore $ver$" "$OUT"
check_exit "wstore --json version" 0 "$W" --json version
check_grep "... names the library's" "\"library\": \"$ver\"" "$OUT"
sha=$(printf '%s\n' "$OUT" | sed -n 's/.*"version": ".*\.g\([0-9a-f]\{12\}\).*/\1/p')
if [ -n "$sha" ]; then
	check "... naming a commit of this tree ($sha)" \
		git -C "$HERE/.." cat-file -e "$sha^{commit}"
else
	tap_skip "the version names a commit of this tree" "not built from git"
fi

tap_done
