# tests/lib/hubclients.sh - the real Hugging Face clients against a
# running `wstore serve`, for the serve-hub and serve-tls suites.  POSIX sh;
# source after suite.sh (needs $HERE, $T, $BUILD and tap.sh):
#
#   hub_npm_ready              install @huggingface/hub (HUB_PKG) with npm
#                              into NPM_DIR on first use; non-zero after a
#                              not-ok line when node, npm or the install
#                              is missing
#   hub_js LABEL URL REPO SRC CACHE SHA TOKEN
#                              run tests/e2e/hub_client.mjs, one TAP line
#                              per check it prints (at least 11)
#   hub_py VERSION LABEL URL REPO SRC CACHE SHA TOKEN
#                              run tests/e2e/hub_client.py with
#                              huggingface_hub VERSION from HFHUB; a skip
#                              when that version is not unpacked there
#   hub_pythonpath VERSION     the PYTHONPATH for huggingface_hub VERSION;
#                              non-zero when it is not unpacked
#   hub_source DIR             fill DIR with the checkpoint the clients'
#                              checks expect: two shards (3 MB), a nested
#                              file, a name with a blank, an empty file
# The environment of the caller reaches the clients (a test CA:
# NODE_EXTRA_CA_CERTS, REQUESTS_CA_BUNDLE, SSL_CERT_FILE).
HUB_PKG=@huggingface/hub@2.17.5
NPM_DIR=${WSTORE_NPM_DIR:-$(cd "$BUILD" && pwd)/npm-hub}
# From $WSTORE_HFHUB_HOME (default /opt/hfhub): huggingface_hub-<v>/src,
# and deps-for-1.x for 1.x, unpacked there with Debian's python3-requests,
# -httpx, -filelock, -fsspec, -tqdm, -yaml, -packaging installed.
HFHUB=${WSTORE_HFHUB_HOME:-/opt/hfhub}

hub_source() {
	python3 "$HERE/tools/mkckpt.py" "$1" --size 3000000 --shards 2 >/dev/null
	mkdir -p "$1/sub/dir"
	printf 'nested\n' > "$1/sub/dir/x.bin"
	printf 'blank in name\n' > "$1/sub/with space.txt"
	printf '' > "$1/empty.txt"
}

hub_npm_ready() {
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		tap_not_ok "node and npm are needed (apt-get install nodejs npm)"
		return 1
	fi
	_hv=${HUB_PKG##*@}
	if [ ! -f "$NPM_DIR/node_modules/@huggingface/hub/package.json" ] ||
		! grep -q "\"version\": \"$_hv\"" "$NPM_DIR/node_modules/@huggingface/hub/package.json"; then
		mkdir -p "$NPM_DIR"
		[ -f "$NPM_DIR/package.json" ] || echo '{"private": true}' > "$NPM_DIR/package.json"
		if ! (cd "$NPM_DIR" && timeout 300 npm install --no-audit --no-fund \
			--cache "$NPM_DIR/.npm-cache" "$HUB_PKG") > "$T/npm.log" 2>&1; then
			tap_not_ok "npm install $HUB_PKG" "$(tail -5 "$T/npm.log")"
			return 1
		fi
	fi
	tap_ok "$HUB_PKG installed ($NPM_DIR)"
}

# _hub_lines LABEL LOG RC MIN: the client's lines as TAP lines, and a
# failure when it exited non-zero or printed fewer than MIN checks
_hub_lines() {
	_n=0
	while IFS= read -r _line; do
		case $_line in
		"ok - "*) tap_ok "$1: ${_line#ok - }"; _n=$((_n + 1)) ;;
		"not ok - "*) tap_not_ok "$1: ${_line#not ok - }"; _n=$((_n + 1)) ;;
		"#"*) echo "$_line" ;;
		esac
	done < "$2"
	if [ "$3" != 0 ] || [ "$_n" -lt "$4" ]; then
		tap_not_ok "$1: the client ran all its checks (exit $3, $_n checks)" \
			"$(tail -5 "$2")"
	fi
}

hub_js() {
	timeout 120 node "$HERE/e2e/hub_client.mjs" "$NPM_DIR" "$2" "$3" "$4" \
		"$5" "$6" "$7" > "$T/node-$1.log" 2>&1
	_hub_lines "$1" "$T/node-$1.log" $? 11
}

hub_pythonpath() {
	[ -d "$HFHUB/huggingface_hub-$1/src/huggingface_hub" ] || return 1
	case $1 in
	1.*) echo "$HFHUB/huggingface_hub-$1/src:$HFHUB/deps-for-1.x" ;;
	*) echo "$HFHUB/huggingface_hub-$1/src" ;;
	esac
}

hub_py() {
	_pv=$1; shift
	if ! _pp=$(hub_pythonpath "$_pv"); then
		tap_skip "$1: python client $_pv" "huggingface_hub $_pv is not unpacked in $HFHUB (run the hfhub installer or set WSTORE_HFHUB_HOME)"
		return 0
	fi
	PYTHONPATH=$_pp timeout 300 /usr/bin/python3 "$HERE/e2e/hub_client.py" \
		"$2" "$3" "$4" "$5" "$6" "$7" > "$T/py-$1.log" 2>&1
	_hub_lines "$1" "$T/py-$1.log" $? 7
}
