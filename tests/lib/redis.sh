# tests/lib/redis.sh - start and stop throwaway Redis servers for tests.
# POSIX sh; source it, then:
#
#   trap redis_stop_all EXIT
#   redis_start_standalone DIR   one server with a password and a unix
#                                socket; exports WSTORE_TEST_REDIS_URL,
#                                WSTORE_TEST_REDIS_UNIX_URL,
#                                WSTORE_TEST_REDIS_PORT,
#                                WSTORE_TEST_REDIS_PASSWORD
#   redis_start_cluster DIR      3 masters + 3 replicas; exports
#                                WSTORE_TEST_CLUSTER_URL,
#                                WSTORE_TEST_CLUSTER_PORTS
#   redis_kill_port PORT         SIGKILL the server on PORT
#   redis_restart_port PORT      start it again with the same settings
#   redis_cli PORT ARGS...       redis-cli on PORT (with the password
#                                of the standalone server if it is that)
#   redis_wait_cluster_ok PORT...  until every live PORT says
#                                cluster_state:ok and sees no failed master
#   redis_stop_all               kill every server started, remove dirs
#
# Servers bind 127.0.0.1 only, keep nothing on disk (--save '',
# --appendonly no) and pick free ports themselves: a port that fails to
# bind is retried with another.

_REDIS_SERVERS=""	# "port:dir" words of the servers started
_REDIS_DIRS=""

# _redis_port N: a pseudo-random candidate port in 20000-39999 (the
# cluster bus uses port + 10000).
_redis_port() {
	_seed=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
	echo $(( 20000 + (_seed + $1 * 7919) % 20000 ))
}

_redis_pid() {
	cat "$1/redis-$2.pid" 2>/dev/null
}

# _redis_launch DIR PORT ARGS...: start a server in the background, wait
# until it answers PING; non-zero if it died (port taken) or never came up.
_redis_launch() {
	_d=$1 _p=$2
	shift 2
	printf '%s\n' "$@" > "$_d/args-$_p"
	MALLOC_CONF=${WSTORE_TEST_REDIS_MALLOC_CONF-dirty_decay_ms:-1,muzzy_decay_ms:-1} \
		redis-server --port "$_p" --bind 127.0.0.1 --dir "$_d" \
		--save '' --appendonly no --daemonize no \
		--logfile "$_d/redis-$_p.log" "$@" >/dev/null 2>&1 &
	echo $! > "$_d/redis-$_p.pid"
	_i=0
	while [ $_i -lt 100 ]; do
		if ! kill -0 "$(_redis_pid "$_d" "$_p")" 2>/dev/null; then
			return 1
		fi
		if redis_cli "$_p" ping 2>/dev/null | grep -q PONG; then
			# the answer must come from the server just started: on
			# a port another server holds, ours is still on its way
			# to "Address already in use" while the other one answers
			_who=$(redis_cli "$_p" info server 2>/dev/null |
				tr -d '\r' | sed -n 's/^process_id://p')
			if [ "$_who" != "$(_redis_pid "$_d" "$_p")" ]; then
				kill -9 "$(_redis_pid "$_d" "$_p")" 2>/dev/null
				return 1
			fi
			_REDIS_SERVERS="$_REDIS_SERVERS $_p:$_d"
			return 0
		fi
		sleep 0.1
		_i=$((_i + 1))
	done
	kill -9 "$(_redis_pid "$_d" "$_p")" 2>/dev/null
	return 1
}

# _redis_start DIR ARGS...: launch on the first free candidate port, left
# in _REDIS_LAST_PORT (not printed: a $(...) subshell would lose the
# record of the server).
_redis_start() {
	_dir=$1
	shift
	_n=0
	while [ $_n -lt 20 ]; do
		_port=$(_redis_port $_n)
		if _redis_launch "$_dir" "$_port" "$@"; then
			_REDIS_LAST_PORT=$_port
			return 0
		fi
		_n=$((_n + 1))
	done
	echo "redis.sh: cannot start redis-server (see $_dir/*.log)" >&2
	return 1
}

redis_cli() {
	_cp=$1
	shift
	if [ "$_cp" = "${WSTORE_TEST_REDIS_PORT:-}" ]; then
		REDISCLI_AUTH=$WSTORE_TEST_REDIS_PASSWORD \
			redis-cli -h 127.0.0.1 -p "$_cp" "$@"
	else
		redis-cli -h 127.0.0.1 -p "$_cp" "$@"
	fi
}

redis_start_standalone() {
	mkdir -p "$1" || return 1
	_dir=$(cd "$1" && pwd)
	_REDIS_DIRS="$_REDIS_DIRS $_dir"
	_pw=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
	WSTORE_TEST_REDIS_PASSWORD=$_pw
	export WSTORE_TEST_REDIS_PASSWORD
	# redis_cli needs the password before the port is known
	WSTORE_TEST_REDIS_PORT=
	_sp=""
	_n=0
	while [ -z "$_sp" ] && [ $_n -lt 20 ]; do
		_port=$(_redis_port $_n)
		WSTORE_TEST_REDIS_PORT=$_port
		if _redis_launch "$_dir" "$_port" --requirepass "$_pw" \
		    --unixsocket "$_dir/redis.sock" --unixsocketperm 700; then
			_sp=$_port
		fi
		_n=$((_n + 1))
	done
	if [ -z "$_sp" ]; then
		echo "redis.sh: cannot start redis-server (see $_dir/*.log)" >&2
		return 1
	fi
	export WSTORE_TEST_REDIS_PORT
	WSTORE_TEST_REDIS_URL="redis://:$_pw@127.0.0.1:$_sp"
	WSTORE_TEST_REDIS_UNIX_URL="redis+unix://:$_pw@$_dir/redis.sock"
	export WSTORE_TEST_REDIS_URL WSTORE_TEST_REDIS_UNIX_URL
}

# redis_wait_cluster_ok PORT...: every port that still runs reports
# cluster_state:ok, and no node it knows is a failing (fail or fail?)
# master that still owns slots: right after a kill the state stays "ok"
# until the failure is detected, so the state alone is not enough.
redis_wait_cluster_ok() {
	_i=0
	while [ $_i -lt 600 ]; do
		_ok=1
		for _p in "$@"; do
			redis_cli "$_p" ping >/dev/null 2>&1 || continue
			redis_cli "$_p" cluster info 2>/dev/null |
				grep -q 'cluster_state:ok' || _ok=0
			redis_cli "$_p" cluster nodes 2>/dev/null | awk '
				$3 ~ /master/ && $3 ~ /fail/ && NF >= 9 { b = 1 }
				$3 ~ /master/ && $8 != "connected" && NF >= 9 { b = 1 }
				END { exit b }' || _ok=0
		done
		[ $_ok = 1 ] && return 0
		sleep 0.1
		_i=$((_i + 1))
	done
	echo "redis.sh: cluster not ok after 60 s" >&2
	return 1
}

# redis_wait_replicated PORT...: every live master among PORTs has a
# replica that is connected and has caught up with its offset (call it
# before killing a master whose data must survive).
redis_wait_replicated() {
	_i=0
	while [ $_i -lt 300 ]; do
		_ok=1
		for _p in "$@"; do
			_info=$(redis_cli "$_p" info replication 2>/dev/null) ||
				continue
			case $_info in *role:master*) ;; *) continue ;; esac
			_mo=$(echo "$_info" | tr -d '\r' |
				sed -n 's/^master_repl_offset://p')
			echo "$_info" | tr -d '\r' | grep -q \
				"^slave0:.*state=online,offset=$_mo," || _ok=0
		done
		[ $_ok = 1 ] && return 0
		sleep 0.1
		_i=$((_i + 1))
	done
	echo "redis.sh: replicas did not catch up within 30 s" >&2
	return 1
}

# _redis_try_cluster DIR: one attempt at six servers made into a cluster;
# on failure the servers it started are stopped again and the reason is
# on stderr, with the end of create.log and of each server's log.
_redis_try_cluster() {
	_cdir=$1
	_ports=""
	_addrs=""
	for _k in 1 2 3 4 5 6; do
		# one directory per server: each keeps its own nodes.conf
		rm -rf "$_cdir/n$_k"
		mkdir -p "$_cdir/n$_k"
		# fast failure detection; a replica may always take over
		# (tests kill masters on purpose); no delay before a sync
		if ! _redis_start "$_cdir/n$_k" --cluster-enabled yes \
		    --cluster-config-file nodes.conf \
		    --cluster-node-timeout 2000 \
		    --cluster-replica-validity-factor 0 \
		    --repl-diskless-sync-delay 0; then
			_redis_stop_ports $_ports
			return 1
		fi
		_cp=$_REDIS_LAST_PORT
		_ports="$_ports $_cp"
		_addrs="$_addrs 127.0.0.1:$_cp"
	done
	_why=""
	# shellcheck disable=SC2086
	if ! timeout 60 redis-cli --cluster create $_addrs \
	    --cluster-replicas 1 --cluster-yes > "$_cdir/create.log" 2>&1; then
		_why="cluster create failed"
	elif ! redis_wait_cluster_ok $_ports; then
		_why="cluster not ok"
	elif ! redis_wait_replicated $_ports; then
		_why="replicas not in sync"
	fi
	if [ -n "$_why" ]; then
		echo "redis.sh: $_why on ports$_ports:" >&2
		tail -5 "$_cdir/create.log" 2>/dev/null | sed 's/^/    create: /' >&2
		for _k in 1 2 3 4 5 6; do
			tail -3 "$_cdir/n$_k/"redis-*.log 2>/dev/null |
				sed "s/^/    n$_k: /" >&2
		done
		# shellcheck disable=SC2086
		_redis_stop_ports $_ports
		return 1
	fi
	# shellcheck disable=SC2086
	set -- $_ports
	WSTORE_TEST_CLUSTER_URL="redis-cluster://127.0.0.1:$1,127.0.0.1:$2"
	WSTORE_TEST_CLUSTER_PORTS=$(echo $_ports)
	export WSTORE_TEST_CLUSTER_URL WSTORE_TEST_CLUSTER_PORTS
}

# redis_start_cluster DIR: three attempts, each on new ports, since a
# cluster of six servers on random ports of a busy machine can meet a port
# that another process takes at the wrong moment.
redis_start_cluster() {
	mkdir -p "$1" || return 1
	_cd=$(cd "$1" && pwd)
	_REDIS_DIRS="$_REDIS_DIRS $_cd"
	for _attempt in 1 2 3; do
		_redis_try_cluster "$_cd" && return 0
		echo "redis.sh: cluster attempt $_attempt of 3 failed" >&2
	done
	return 1
}

# _redis_stop_ports PORT...: SIGKILL these servers of ours and forget them
_redis_stop_ports() {
	for _sp in "$@"; do
		redis_kill_port "$_sp"
		_keep=""
		for _s in $_REDIS_SERVERS; do
			[ "${_s%%:*}" = "$_sp" ] || _keep="$_keep $_s"
		done
		_REDIS_SERVERS=$_keep
	done
}

# _redis_dir_of PORT: the directory of the server last started on PORT (a
# port a killed server had may be picked again by a later one)
_redis_dir_of() {
	_found=""
	for _s in $_REDIS_SERVERS; do
		[ "${_s%%:*}" = "$1" ] && _found=${_s#*:}
	done
	[ -n "$_found" ] && echo "$_found"
}

redis_kill_port() {
	_kd=$(_redis_dir_of "$1") || return 1
	kill -9 "$(_redis_pid "$_kd" "$1")" 2>/dev/null
	_i=0
	while kill -0 "$(_redis_pid "$_kd" "$1")" 2>/dev/null &&
	    [ $_i -lt 50 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
}

redis_restart_port() {
	_rd=$(_redis_dir_of "$1") || return 1
	_old=$IFS
	IFS='
'
	# shellcheck disable=SC2046
	set -- "$1" $(cat "$_rd/args-$1")
	IFS=$_old
	_rp=$1
	shift
	_redis_launch "$_rd" "$_rp" "$@"
}

redis_stop_all() {
	for _s in $_REDIS_SERVERS; do
		kill -9 "$(_redis_pid "${_s#*:}" "${_s%%:*}")" 2>/dev/null
	done
	for _s in $_REDIS_SERVERS; do
		_i=0
		while kill -0 "$(_redis_pid "${_s#*:}" "${_s%%:*}")" \
		    2>/dev/null && [ $_i -lt 50 ]; do
			sleep 0.1
			_i=$((_i + 1))
		done
	done
	for _d in $_REDIS_DIRS; do
		rm -rf "$_d"
	done
	_REDIS_SERVERS=""
	_REDIS_DIRS=""
}
