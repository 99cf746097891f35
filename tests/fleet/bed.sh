# tests/fleet/bed.sh - a small fleet on one machine: client nodes as
# network namespaces joined by a bridge, and the servers in a namespace of
# their own.  POSIX sh; source it (root only), then:
#
#   bed_up N              namespaces: a hub holding bridge br0, a server
#                         namespace (10.77.0.2, 127.0.0.1 on its own
#                         loopback) and N nodes 10.77.0.11 .. 10.77.0.(10+N)
#   bed_node K CMD...     run CMD in node K (1..N)
#   bed_srv CMD...        run CMD in the server namespace
#   bed_spawn NAME NS CMD...  start CMD in namespace NS (a full name from
#                         $BED_SRV or bed_ns K) in the background, its output
#                         in $BED_DIR/NAME.log, its pid in $BED_DIR/NAME.pid
#   bed_ns K              the name of node K's namespace
#   bed_host NAME IP      one more namespace, $BED_TAG-NAME, at IP on the
#                         bridge (a serve node, a proxy); after bed_up
#   bed_in NAME CMD...    run CMD in that namespace
#   bed_cut K / bed_mend K   take node K's link down / up again (inside its
#                         namespace: the host's own interfaces are never
#                         touched)
#   bed_detour_up         a namespace "px" at $BED_PX_IP that holds the
#                         server's address too (on its loopback, answering
#                         no ARP for it): a proxy there (tests/fleet/proxy.py
#                         with PROXY_TARGET_NETNS) stands in for the server
#   bed_detour K / bed_direct K   node K's traffic to the server address
#                         goes through px / straight to the server again
#   bed_srv_ports         the TCP ports listening on the server address
#   bed_down              kill every process in the bed's namespaces, delete
#                         them (and with them the bridge and veth pairs)
#
# The addresses exist only inside these namespaces; nothing is routed out
# of them, so no packet leaves the machine.  BED_DIR (a directory the
# caller made) holds logs and pid files.  Namespace names carry the pid of
# the shell that made them, so two beds at once do not meet.

BED_TAG=wsf$$
BED_HUB=$BED_TAG-hub
BED_SRV=$BED_TAG-srv
BED_SRV_IP=10.77.0.2
BED_N=0

bed_ns() { echo "$BED_TAG-n$1"; }
bed_ip() { echo "10.77.0.$((10 + $1))"; }
bed_node() { _bk=$1; shift; ip netns exec "$(bed_ns "$_bk")" "$@"; }
bed_srv() { ip netns exec "$BED_SRV" "$@"; }

# _bed_link NS NAME ADDR: a veth pair, one end in the hub on br0, the
# other (named eth0) in NS with ADDR/24
_bed_link() {
	ip netns exec "$BED_HUB" ip link add "v-$2" type veth peer name eth0 \
		netns "$1" || return 1
	ip netns exec "$BED_HUB" ip link set "v-$2" master br0 up || return 1
	ip netns exec "$1" ip addr add "$3/24" dev eth0 || return 1
	ip netns exec "$1" ip link set eth0 up || return 1
	ip netns exec "$1" ip link set lo up
}

bed_up() {
	BED_N=$1
	ip netns add "$BED_HUB" || return 1
	ip netns exec "$BED_HUB" ip link set lo up
	ip netns exec "$BED_HUB" ip link add br0 type bridge || return 1
	ip netns exec "$BED_HUB" ip link set br0 up || return 1
	ip netns add "$BED_SRV" || return 1
	_bed_link "$BED_SRV" srv "$BED_SRV_IP" || return 1
	_bk=1
	while [ "$_bk" -le "$BED_N" ]; do
		ip netns add "$(bed_ns $_bk)" || return 1
		_bed_link "$(bed_ns $_bk)" "n$_bk" "$(bed_ip $_bk)" || return 1
		_bk=$((_bk + 1))
	done
}

bed_host() {
	ip netns add "$BED_TAG-$1" || return 1
	_bed_link "$BED_TAG-$1" "$1" "$2"
}
bed_in() { _bh=$1; shift; ip netns exec "$BED_TAG-$_bh" "$@"; }

# bed_reach K HOST PORT: node K connects to HOST:PORT (10 s at most)
bed_reach() {
	bed_node "$1" timeout 10 python3 -c 'import socket, sys, time
end = time.monotonic() + 9
while True:
    try:
        socket.create_connection((sys.argv[1], int(sys.argv[2])), 1).close()
        break
    except OSError:
        if time.monotonic() > end:
            sys.exit(1)
        time.sleep(0.1)' "$2" "$3"
}

bed_spawn() {
	_bn=$1 _bns=$2
	shift 2
	ip netns exec "$_bns" setsid "$@" > "$BED_DIR/$_bn.log" 2>&1 < /dev/null &
	echo $! > "$BED_DIR/$_bn.pid"
}

# bed_kill NAME: SIGKILL the process bed_spawn started as NAME, and wait
# (at most 5 s) until it is gone
bed_kill() {
	_kp=$(cat "$BED_DIR/$1.pid" 2>/dev/null) || return 1
	kill -9 "$_kp" 2>/dev/null
	_ki=0
	while kill -0 "$_kp" 2>/dev/null && [ $_ki -lt 50 ]; do
		sleep 0.1
		_ki=$((_ki + 1))
	done
	# reap it when it is a child of this shell (no "Killed" notice later)
	wait "$_kp" 2>/dev/null
	return 0
}

# ---- the detour: every connection of a node to the server, through px ------
# Cluster nodes and Mooncake's master hand their clients the servers' own
# addresses, so a proxy on another address carries none of the data.  A
# node routed to 10.77.0.2 via px instead: px owns 10.77.0.2 on its
# loopback and delivers those packets to its own sockets, where the proxy
# listens on the server's ports, and connects on from inside the server
# namespace.  arp_ignore keeps px from answering ARP for the server address
# (the other nodes still reach the real one), arp_announce from naming it
# in its own requests.
BED_PX_IP=10.77.0.9
bed_detour_up() {
	bed_host px "$BED_PX_IP" || return 1
	bed_in px sysctl -qw net.ipv4.conf.all.arp_ignore=1 \
		net.ipv4.conf.eth0.arp_ignore=1 net.ipv4.conf.all.arp_announce=2 \
		net.ipv4.conf.eth0.arp_announce=2 || return 1
	bed_in px ip addr add "$BED_SRV_IP/32" dev lo
}
bed_detour() { bed_node "$1" ip route replace "$BED_SRV_IP/32" via "$BED_PX_IP"; }
bed_direct() { bed_node "$1" ip route del "$BED_SRV_IP/32" 2>/dev/null; return 0; }
bed_srv_ports() {
	bed_srv ss -Hltn | awk -v ip="$BED_SRV_IP" '{ a = $4; p = a; sub(/.*:/, "", p)
		sub(/:[0-9]+$/, "", a)
		if (a == ip || a == "0.0.0.0" || a == "*" || a == "[::]") print p }' |
		sort -un
}

bed_cut() { bed_node "$1" ip link set eth0 down; }
bed_mend() { bed_node "$1" ip link set eth0 up; }

bed_down() {
	for _bd in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		case $_bd in "$BED_TAG"-*) ;; *) continue ;; esac
		# only processes inside our own namespaces
		for _bp in $(ip netns pids "$_bd" 2>/dev/null); do
			kill -9 "$_bp" 2>/dev/null
		done
	done
	for _bd in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		case $_bd in "$BED_TAG"-*) ;; *) continue ;; esac
		_bi=0
		while [ -n "$(ip netns pids "$_bd" 2>/dev/null)" ] && [ $_bi -lt 50 ]; do
			sleep 0.1
			_bi=$((_bi + 1))
		done
		ip netns del "$_bd" 2>/dev/null
	done
}

# ---- Redis Cluster in the server namespace --------------------------------
# bed_redis_cluster: 3 masters + 3 replicas on 10.77.0.2:7001..7006
# (cluster-node-timeout $BED_REDIS_NODE_TIMEOUT ms, 2000 unless set);
# exports BED_REDIS_URL and BED_REDIS_PORTS
BED_REDIS_PORTS="7001 7002 7003 7004 7005 7006"
bed_rcli() { _rp=$1; shift; bed_srv redis-cli -h "$BED_SRV_IP" -p "$_rp" "$@"; }

bed_redis_start_port() {
	mkdir -p "$BED_DIR/redis-$1"
	bed_spawn "redis-$1" "$BED_SRV" redis-server --port "$1" \
		--bind "$BED_SRV_IP 127.0.0.1" --dir "$BED_DIR/redis-$1" \
		--save '' --appendonly no --daemonize no --protected-mode no \
		--cluster-enabled yes --cluster-config-file nodes.conf \
		--cluster-node-timeout "${BED_REDIS_NODE_TIMEOUT:-2000}" \
		--cluster-replica-validity-factor 0 \
		--repl-diskless-sync-delay 0 \
		--client-output-buffer-limit "replica 0 0 0"
	_ri=0
	until bed_rcli "$1" ping 2>/dev/null | grep -q PONG; do
		_ri=$((_ri + 1))
		[ $_ri -ge 100 ] && return 1
		sleep 0.1
	done
}

# bed_redis_ok: every live server says cluster_state:ok and knows no
# failing master (60 s at most)
bed_redis_ok() {
	_ri=0
	while [ $_ri -lt 600 ]; do
		_ok=1
		for _rp in $BED_REDIS_PORTS; do
			bed_rcli "$_rp" ping >/dev/null 2>&1 || continue
			bed_rcli "$_rp" cluster info 2>/dev/null |
				grep -q 'cluster_state:ok' || _ok=0
			bed_rcli "$_rp" cluster nodes 2>/dev/null | awk '
				$3 ~ /master/ && $3 ~ /fail/ && NF >= 9 { b = 1 }
				END { exit b }' || _ok=0
		done
		[ $_ok = 1 ] && return 0
		sleep 0.1
		_ri=$((_ri + 1))
	done
	return 1
}

# bed_redis_synced: every live master's replica is online at its offset
# (30 s at most)
bed_redis_synced() {
	_ri=0
	while [ $_ri -lt 300 ]; do
		_ok=1
		for _rp in $BED_REDIS_PORTS; do
			_info=$(bed_rcli "$_rp" info replication 2>/dev/null |
				tr -d '\r') || continue
			case $_info in *role:master*) ;; *) continue ;; esac
			_mo=$(echo "$_info" | sed -n 's/^master_repl_offset://p')
			echo "$_info" | grep -q \
				"^slave0:.*state=online,offset=$_mo," || _ok=0
		done
		[ $_ok = 1 ] && return 0
		sleep 0.1
		_ri=$((_ri + 1))
	done
	return 1
}

bed_redis_cluster() {
	_addrs=""
	for _rp in $BED_REDIS_PORTS; do
		bed_redis_start_port "$_rp" || {
			echo "bed.sh: redis-server on port $_rp did not start" >&2
			return 1
		}
		_addrs="$_addrs $BED_SRV_IP:$_rp"
	done
	# shellcheck disable=SC2086
	bed_srv timeout 60 redis-cli --cluster create $_addrs \
		--cluster-replicas 1 --cluster-yes > "$BED_DIR/create.log" 2>&1 || {
		echo "bed.sh: redis cluster create failed" >&2
		tail -5 "$BED_DIR/create.log" >&2
		return 1
	}
	bed_redis_ok && bed_redis_synced || {
		echo "bed.sh: redis cluster not ok / not in sync" >&2
		return 1
	}
	BED_REDIS_URL="redis-cluster://$BED_SRV_IP:7001,$BED_SRV_IP:7002,$BED_SRV_IP:7003"
	export BED_REDIS_URL
}

# bed_redis_failovers: how many failovers the servers' logs record
bed_redis_failovers() {
	cat "$BED_DIR"/redis-700?.log 2>/dev/null | grep -c 'Failover election won'
}

# bed_redis_masters: the ports of the live masters
bed_redis_masters() {
	for _rp in $BED_REDIS_PORTS; do
		bed_rcli "$_rp" role 2>/dev/null | head -1 | grep -qx master &&
			echo "$_rp"
	done
}

# ---- Mooncake in the server namespace ---------------------------------------
# bed_mooncake: a master (RPC 10.77.0.2:50051, HTTP metadata :8080) and 3
# storage nodes (:18001..18003, segment $BED_MC_SEGMENT each, "1 GB" unless
# set) on the one server address: Mooncake tells its nodes apart by
# host:port, so several run on one machine.  Their ports lie outside
# 12000-17000, where every Mooncake process picks its transfer engine's
# and RPC ports at random: a node told to serve on 15003 found it taken by
# another node's transfer engine in one run, exited a second after it had
# mounted its segment, and the master kept handing out that segment until
# the node's client_ttl ran out (every object put meanwhile lost a replica)  $MOONCAKE_HOME (/opt/mooncake).
BED_MC_HOME=${MOONCAKE_HOME:-/opt/mooncake}
BED_MC_MASTER=$BED_SRV_IP:50051
BED_MC_META=http://$BED_SRV_IP:8080/metadata

bed_mc_installed() {
	[ -x "$BED_MC_HOME/bin/mooncake_master" ] &&
		[ -x "$BED_MC_HOME/bin/mooncake_client" ] &&
		[ -f "$BED_MC_HOME/lib/libmooncake_store.so" ]
}

# _bed_srv_port PORT: the server namespace listens on PORT (30 s at most)
_bed_srv_port() {
	_pi=0
	until bed_srv python3 -c 'import socket, sys
socket.create_connection((sys.argv[1], int(sys.argv[2])), 1).close()' \
	    "$BED_SRV_IP" "$1" 2>/dev/null; do
		_pi=$((_pi + 1))
		[ $_pi -ge 300 ] && return 1
		sleep 0.1
	done
}

# bed_mc_node I: start storage node I (1..3) and wait until the master
# logged its segment mounted
bed_mc_node() {
	_mounts=$(grep -c "action=mount_segment" "$BED_DIR/mc-master.log")
	bed_spawn "mc-node$1" "$BED_SRV" env MC_TCP_BIND_ADDRESS="$BED_SRV_IP" \
		"$BED_MC_HOME/bin/mooncake_client" --host="$BED_SRV_IP" \
		--port=$((18000 + $1)) --metadata_server="$BED_MC_META" \
		--master_server_address="$BED_MC_MASTER" --protocol=tcp \
		--global_segment_size="${BED_MC_SEGMENT:-1 GB}"
	_mi=0
	while [ "$(grep -c "action=mount_segment" "$BED_DIR/mc-master.log")" \
	    -le "$_mounts" ]; do
		_mi=$((_mi + 1))
		[ $_mi -ge 600 ] && { echo "bed.sh: mooncake node $1 mounted nothing in 60 s" >&2; return 1; }
		sleep 0.1
	done
	# mounted, and then serving on its port: a node that cannot bind it
	# exits after the mount, quietly
	_bed_srv_port $((18000 + $1)) && kill -0 "$(cat "$BED_DIR/mc-node$1.pid")" || {
		echo "bed.sh: mooncake node $1 is not serving on :$((18000 + $1))" >&2
		tail -3 "$BED_DIR/mc-node$1.log" >&2
		return 1
	}
}

bed_mooncake() {
	bed_spawn mc-master "$BED_SRV" "$BED_MC_HOME/bin/mooncake_master" \
		--enable_http_metadata_server=true \
		--http_metadata_server_host="$BED_SRV_IP" \
		--http_metadata_server_port=8080 \
		--rpc_address="$BED_SRV_IP" --rpc_port=50051 \
		--metrics_port=9003 ${BED_MC_MASTER_ARGS:-}
	_bed_srv_port 50051 && _bed_srv_port 8080 || {
		echo "bed.sh: mooncake_master did not start" >&2
		tail -5 "$BED_DIR/mc-master.log" >&2
		return 1
	}
	bed_mc_node 1 && bed_mc_node 2 && bed_mc_node 3
}

# bed_mc K CMD...: CMD in node K with the settings wstore (and Mooncake's
# transfer engine) need to reach the store from that node's address
bed_mc() {
	_mk=$1
	shift
	bed_node "$_mk" env WSTORE_MOONCAKE_LIBRARY="$BED_MC_HOME/lib/libmooncake_store.so" \
		WSTORE_MASTER_SERVER_ADDR="$BED_MC_MASTER" \
		WSTORE_METADATA_SERVER="$BED_MC_META" WSTORE_PROTOCOL=tcp \
		WSTORE_LOCAL_HOSTNAME="$(bed_ip "$_mk")" \
		MC_TCP_BIND_ADDRESS="$(bed_ip "$_mk")" "$@"
}
