# tests/lib/mooncake.sh - start and stop a throwaway real Mooncake Store
# cluster (one master with its HTTP metadata server, one storage node) for
# tests.  POSIX sh; source it, then:
#
#   mooncake_installed           true when $MOONCAKE_HOME (default
#                                /opt/mooncake) holds bin/mooncake_master,
#                                bin/mooncake_client and
#                                lib/libmooncake_store.so
#   trap mooncake_stop_all EXIT
#   mooncake_start DIR [LEASE]   master + node on free loopback ports;
#                                LEASE is the master's default KV lease
#                                (e.g. 400ms); exports WSTORE_MOONCAKE_LIBRARY,
#                                WSTORE_MASTER_SERVER_ADDR,
#                                WSTORE_METADATA_SERVER, WSTORE_PROTOCOL,
#                                WSTORE_LOCAL_HOSTNAME,
#                                MOONCAKE_TEST_NODE_PORT, and
#                                MC_TCP_BIND_ADDRESS=127.0.0.1 (Mooncake's
#                                transfer engine on loopback too)
#   mooncake_kill_node           SIGKILL the storage node
#   mooncake_start_node          start it again (same port)
#   mooncake_fake_master         a port that only accepts, as the master
#                                of the contract stand-in; exports
#                                MOONCAKE_TEST_FAKE_MASTER
#   mooncake_stop_all            stop everything started, remove dirs
#
# Logs are DIR/master.log and DIR/node.log.  MOONCAKE_TEST_MASTER_ARGS
# adds master flags (e.g. --put_start_discard_timeout_sec=2).  The storage node's segment is
# MOONCAKE_TEST_SEGMENT (default "1 GB").

MOONCAKE_HOME=${MOONCAKE_HOME:-/opt/mooncake}
_MC_PIDS=""
_MC_DIRS=""

mooncake_installed() {
	[ -x "$MOONCAKE_HOME/bin/mooncake_master" ] &&
		[ -x "$MOONCAKE_HOME/bin/mooncake_client" ] &&
		[ -f "$MOONCAKE_HOME/lib/libmooncake_store.so" ]
}

# _mc_port N: a pseudo-random candidate port in 40000-54999
_mc_port() {
	_s=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
	echo $(( 40000 + (_s + $1 * 7919) % 15000 ))
}

_mc_port_open() {
	python3 -c 'import socket,sys
s=socket.socket(); s.settimeout(0.5)
sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)' "$1"
}

# _mc_wait_port PID PORT SECONDS: until PORT accepts, or PID died
_mc_wait_port() {
	_i=0
	while [ $_i -lt $(($3 * 10)) ]; do
		_mc_port_open "$2" && return 0
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.1
		_i=$((_i + 1))
	done
	return 1
}

# _mc_stop_pid PID: SIGKILL it if it still is one of ours (a pid from a
# file may have been reused since)
_mc_stop_pid() {
	case $(tr '\0' ' ' 2>/dev/null < "/proc/$1/cmdline") in
	*mooncake_master*|*mooncake_client*|*wstore-fake-master*) ;;
	*) return 0 ;;
	esac
	kill -9 "$1" 2>/dev/null
	_i=0
	while kill -0 "$1" 2>/dev/null && [ $_i -lt 50 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
}

# _mc_launch_master DIR RPC HTTP METRICS LEASE
_mc_launch_master() {
	set -- "$@"
	_lease=""
	[ -n "$5" ] && _lease="--default_kv_lease_ttl=$5"
	# shellcheck disable=SC2086
	setsid "$MOONCAKE_HOME/bin/mooncake_master" \
		--enable_http_metadata_server=true \
		--http_metadata_server_host=127.0.0.1 \
		--http_metadata_server_port="$3" \
		--rpc_address=127.0.0.1 --rpc_port="$2" \
		--metrics_port="$4" $_lease ${MOONCAKE_TEST_MASTER_ARGS:-} \
		> "$1/master.log" 2>&1 < /dev/null &
	_MC_MASTER_PID=$!
	_MC_PIDS="$_MC_PIDS $_MC_MASTER_PID"
	echo "$_MC_MASTER_PID" >> "$1/pids"
	_mc_wait_port "$_MC_MASTER_PID" "$2" 30 &&
		_mc_wait_port "$_MC_MASTER_PID" "$3" 30 && return 0
	_mc_stop_pid "$_MC_MASTER_PID"
	return 1
}

mooncake_start_node() {
	_mounts=$(grep -c "action=mount_segment" "$_MC_DIR/master.log")
	setsid "$MOONCAKE_HOME/bin/mooncake_client" \
		--host=127.0.0.1 --port="$MOONCAKE_TEST_NODE_PORT" \
		--metadata_server="$WSTORE_METADATA_SERVER" \
		--master_server_address="$WSTORE_MASTER_SERVER_ADDR" \
		--protocol=tcp \
		--global_segment_size="${MOONCAKE_TEST_SEGMENT:-1 GB}" \
		>> "$_MC_DIR/node.log" 2>&1 < /dev/null &
	_MC_NODE_PID=$!
	_MC_PIDS="$_MC_PIDS $_MC_NODE_PID"
	# also on file: a node started in a subshell ($(...)) must still be
	# found by mooncake_kill_node and mooncake_stop_all
	echo "$_MC_NODE_PID" >> "$_MC_DIR/pids"
	echo "$_MC_NODE_PID" > "$_MC_DIR/node.pid"
	_mc_wait_port "$_MC_NODE_PID" "$MOONCAKE_TEST_NODE_PORT" 60 || {
		tail -5 "$_MC_DIR/node.log" >&2
		_mc_stop_pid "$_MC_NODE_PID"
		return 1
	}
	# the node mounts its segment before its service port opens; the
	# master logs the mount
	_i=0
	while [ $_i -lt 300 ]; do
		[ "$(grep -c "action=mount_segment" "$_MC_DIR/master.log")" \
			-gt "$_mounts" ] && return 0
		kill -0 "$_MC_NODE_PID" 2>/dev/null || break
		sleep 0.1
		_i=$((_i + 1))
	done
	echo "mooncake.sh: the master saw no segment mounted within 30 s" >&2
	tail -5 "$_MC_DIR/node.log" >&2
	_mc_stop_pid "$_MC_NODE_PID"
	return 1
}

mooncake_kill_node() {
	_mc_stop_pid "$(cat "$_MC_DIR/node.pid" 2>/dev/null || echo "$_MC_NODE_PID")"
}

mooncake_start() {
	# Mooncake's transfer engine listens on the first network interface's
	# address unless told otherwise; tests stay on loopback
	MC_TCP_BIND_ADDRESS=127.0.0.1
	export MC_TCP_BIND_ADDRESS
	mkdir -p "$1" || return 1
	_MC_DIR=$(cd "$1" && pwd)
	_MC_DIRS="$_MC_DIRS $_MC_DIR"
	_n=0
	while [ $_n -lt 10 ]; do
		_rpc=$(_mc_port $_n)
		_http=$((_rpc + 1)) _met=$((_rpc + 2)) _node=$((_rpc + 3))
		_busy=0
		for _p in $_rpc $_http $_met $_node; do
			_mc_port_open $_p && _busy=1
		done
		if [ $_busy = 0 ] &&
		    _mc_launch_master "$_MC_DIR" $_rpc $_http $_met "${2:-}"; then
			break
		fi
		_n=$((_n + 1))
	done
	if [ $_n = 10 ]; then
		echo "mooncake.sh: cannot start mooncake_master (see $_MC_DIR/master.log)" >&2
		return 1
	fi
	WSTORE_MOONCAKE_LIBRARY=$MOONCAKE_HOME/lib/libmooncake_store.so
	WSTORE_MASTER_SERVER_ADDR=127.0.0.1:$_rpc
	WSTORE_METADATA_SERVER=http://127.0.0.1:$_http/metadata
	WSTORE_PROTOCOL=tcp
	WSTORE_LOCAL_HOSTNAME=127.0.0.1
	MOONCAKE_TEST_NODE_PORT=$_node
	export WSTORE_MOONCAKE_LIBRARY WSTORE_MASTER_SERVER_ADDR \
		WSTORE_METADATA_SERVER WSTORE_PROTOCOL WSTORE_LOCAL_HOSTNAME \
		MOONCAKE_TEST_NODE_PORT
	# the node's port may have been taken meanwhile: try another
	_n=0
	while ! mooncake_start_node; do
		_n=$((_n + 1))
		if [ $_n -ge 3 ]; then
			echo "mooncake.sh: cannot start the storage node (see $_MC_DIR/node.log)" >&2
			return 1
		fi
		MOONCAKE_TEST_NODE_PORT=$(_mc_port $((_n + 20)))
	done
}

# mooncake_fake_master: a loopback port that accepts TCP connections and
# nothing more, standing for the master of the contract stand-in (which
# has none; wstore connects to the master's port before setup); exports
# MOONCAKE_TEST_FAKE_MASTER=127.0.0.1:PORT
mooncake_fake_master() {
	_f=$(mktemp "${TMPDIR:-/tmp}/wstore-fake-master-XXXXXX")
	python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(128)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept(); c.close()' wstore-fake-master > "$_f" 2>/dev/null &
	_MC_PIDS="$_MC_PIDS $!"
	_i=0
	while [ ! -s "$_f" ] && [ $_i -lt 50 ]; do sleep 0.1; _i=$((_i + 1)); done
	MOONCAKE_TEST_FAKE_MASTER=127.0.0.1:$(cat "$_f")
	rm -f "$_f"
	export MOONCAKE_TEST_FAKE_MASTER
	[ "$MOONCAKE_TEST_FAKE_MASTER" != "127.0.0.1:" ]
}

mooncake_stop_all() {
	for _p in $_MC_PIDS $(cat $(for _d in $_MC_DIRS; do
		echo "$_d/pids"; done) 2>/dev/null); do
		_mc_stop_pid "$_p"
	done
	for _d in $_MC_DIRS; do
		[ -n "${MOONCAKE_TEST_KEEP:-}" ] || rm -rf "$_d"
	done
	_MC_PIDS=""
	_MC_DIRS=""
}
