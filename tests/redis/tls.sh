#!/bin/sh
# tls.sh - rediss:// (and rediss-cluster://) against Debian's redis-server
# started with --tls-port (no plain port) and certificates made here with
# the openssl CLI: a CA, a server certificate for 127.0.0.1 and localhost,
# a client certificate, an expired one, one for another host, and a second
# CA that signed none of them.
#  - import, list, verify and pull over rediss:// (CA from the flag, the
#    environment, a config file);
#  - each failure gives one clear line and exit 1: no CA (the system store
#    does not know ours), a wrong CA, an expired certificate, a host name
#    and an IP address mismatch, a plain-text server on rediss://, a TLS
#    server on redis://, a server that never answers the handshake
#    (bounded by connect_timeout_ms), a server that completes the
#    handshake and never replies (command_timeout_ms), SIGINT and SIGTERM
#    ending those waits at once, a missing CA, certificate or key
#    file, a key that does not match its certificate, a certificate
#    without its key;
#  - mutual TLS: a server that requires a client certificate refuses a
#    client without one, with one line; with one, import and pull work;
#  - a 3-master TLS Redis Cluster (--tls-cluster yes): import, pull and
#    verify over rediss-cluster://, and MOVED to a fourth master that
#    joined after the store was opened (connected over TLS too).
# Loopback only; every server is started and stopped here.
#   BUILD=build sh tests/redis/tls.sh
TAP_SUITE=redis-tls
. "$(dirname "$0")/../lib/suite.sh"
unset WSTORE_REDIS_PASSWORD WSTORE_STORE
SERVERS=""	# pids of the servers started
suite_cleanup() {
	for _p in $SERVERS; do
		kill -CONT "$_p" 2>/dev/null
		kill -KILL "$_p" 2>/dev/null
	done
}

for tool in redis-server redis-cli openssl; do
	if ! command -v $tool >/dev/null; then
		tap_not_ok "$tool is installed (run scripts/deps.sh)"
		tap_done
		exit 1
	fi
done

# ---- certificates ----------------------------------------------------------
C="$T/certs"
mkdir -p "$C"
ssl() { openssl "$@" >>"$C/openssl.log" 2>&1; }
# newkey NAME: an EC key NAME.key
newkey() { ssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$C/$1.key"; }
# mkca NAME: a self-signed CA NAME.crt
mkca() {
	newkey "$1" && ssl req -x509 -new -key "$C/$1.key" -days 30 \
		-subj "/CN=wstore test $1" -out "$C/$1.crt"
}
# mkcert NAME SAN [START END]: NAME.crt signed by ca, for SAN, valid
# from START to END (openssl ca dates) or for 30 days from now
mkcert() {
	newkey "$1" && ssl req -new -key "$C/$1.key" -subj "/CN=$1" -out "$C/$1.csr" &&
	printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$2" > "$C/$1.ext" &&
	if [ $# -gt 2 ]; then
		ssl ca -batch -config "$C/ca.cnf" -in "$C/$1.csr" -out "$C/$1.crt" \
			-startdate "$3" -enddate "$4" -extfile "$C/$1.ext" -notext
	else
		ssl x509 -req -in "$C/$1.csr" -CA "$C/ca.crt" -CAkey "$C/ca.key" \
			-CAcreateserial -days 30 -extfile "$C/$1.ext" -out "$C/$1.crt"
	fi
}
mkdir -p "$C/db"
: > "$C/db/index.txt"
echo 1000 > "$C/db/serial"
cat > "$C/ca.cnf" <<EOF
[ca]
default_ca = test
[test]
dir = $C/db
database = $C/db/index.txt
serial = $C/db/serial
new_certs_dir = $C/db
certificate = $C/ca.crt
private_key = $C/ca.key
default_md = sha256
policy = any
[any]
commonName = supplied
EOF
if ! { mkca ca && mkca otherca &&
	mkcert server "IP:127.0.0.1,DNS:localhost" &&
	mkcert client "DNS:wstore-client" &&
	mkcert expired "IP:127.0.0.1,DNS:localhost" 20200101000000Z 20200201000000Z &&
	mkcert wronghost "IP:10.9.9.9,DNS:other.example"; }; then
	tap_not_ok "make the test certificates" "$(tail -5 "$C/openssl.log")"
	tap_done
	exit 1
fi
tap_ok "made a CA, server, client, expired and wrong-host certificates"

# ---- servers ---------------------------------------------------------------
# start_server NAME PORTFLAG ARGS...: a redis-server on a free loopback
# port (PORTFLAG: --port or --tls-port), its port in PORT and pid in PID
_n=0
start_server() {
	_name=$1 _pf=$2
	shift 2
	mkdir -p "$T/$_name"
	for _try in 1 2 3 4 5 6 7 8 9 10; do
		_n=$((_n + 1))
		_seed=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
		PORT=$((20000 + (_seed + _n * 7919) % 20000))
		: > "$T/$_name/redis.log"
		redis-server --bind 127.0.0.1 --dir "$T/$_name" --save '' \
			--appendonly no --daemonize no \
			--logfile "$T/$_name/redis.log" "$_pf" "$PORT" "$@" \
			>/dev/null 2>&1 &
		_pid=$!
		if wait_for 20 sh -c "grep -q 'Ready to accept' '$T/$_name/redis.log' || ! kill -0 $_pid" &&
		    kill -0 $_pid 2>/dev/null; then
			SERVERS="$SERVERS $_pid"
			PID=$_pid
			return 0
		fi
		kill -KILL $_pid 2>/dev/null
		wait $_pid 2>/dev/null
	done
	return 1
}
# start_tls NAME CERT AUTH [ARGS...]: a TLS-only server with certificate
# CERT, --tls-auth-clients AUTH (no, optional, yes)
start_tls() {
	_sn=$1 _sc=$2 _sa=$3
	shift 3
	start_server "$_sn" --tls-port --port 0 \
		--tls-cert-file "$C/$_sc.crt" --tls-key-file "$C/$_sc.key" \
		--tls-ca-cert-file "$C/ca.crt" --tls-auth-clients "$_sa" "$@"
}

start_tls ok server optional || { tap_not_ok "start a TLS server" "$(tail -5 "$T/ok/redis.log")"; tap_done; exit 1; }
P_OK=$PORT
start_tls exp expired no || { tap_not_ok "start a TLS server (expired)"; tap_done; exit 1; }
P_EXP=$PORT
start_tls host wronghost no || { tap_not_ok "start a TLS server (wrong host)"; tap_done; exit 1; }
P_HOST=$PORT
start_tls mtls server yes || { tap_not_ok "start a TLS server (mutual)"; tap_done; exit 1; }
P_MTLS=$PORT
start_server plain --port || { tap_not_ok "start a plain server"; tap_done; exit 1; }
P_PLAIN=$PORT
start_server stopped --port || { tap_not_ok "start a server to stop"; tap_done; exit 1; }
P_STOP=$PORT
PID_STOP=$PID
tap_ok "started the servers"

SRC="$T/src"
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 3000000 --shards 2 --seed 7 >/dev/null
URL="rediss://127.0.0.1:$P_OK"
CA="--redis-tls-ca-file=$C/ca.crt"
w() { "$W" "$@"; }
PY=/usr/bin/python3
[ -x $PY ] || PY=python3

# ---- working cases ---------------------------------------------------------
check_exit "import over rediss:// (CA from the flag)" 0 \
	w --store "$URL" --redis-tls-ca-file "$C/ca.crt" model import --source "$SRC" \
	--model-id Org/Tls --checkpoint-id t1 --chunk-size 256K
check_exit "list over rediss://" 0 w --store "$URL" "$CA" model list
check_grep "list shows it READY" "t1 +Org/Tls +main +READY" "$OUT"
check_exit "verify over rediss://" 0 w --store "$URL" "$CA" model verify t1
check_exit "pull over rediss://" 0 w --store "$URL" "$CA" model pull t1 --dest "$T/pull1"
check "pulled tree equals the source" diff -r "$SRC" "$T/pull1"
check_exit "CA from WSTORE_REDIS_TLS_CA_FILE" 0 \
	env WSTORE_REDIS_TLS_CA_FILE="$C/ca.crt" "$W" --store "$URL" model inspect t1
printf '{"store": "%s", "redis_tls_ca_file": "%s"}\n' "$URL" "$C/ca.crt" > "$T/cfg.json"
check_exit "CA from a config file" 0 w --config "$T/cfg.json" model verify t1
check_exit "config show --origin names the CA file" 0 w --config "$T/cfg.json" config show --origin
check_grep "config show: redis_tls_ca_file and where from" "cfg.json.*redis_tls_ca_file=$C/ca.crt" "$OUT"
check_exit "rediss://localhost (a DNS name in the certificate)" 0 \
	w --store "rediss://localhost:$P_OK" "$CA" model list
check_exit "a client certificate where it is optional" 0 \
	w --store "$URL" "$CA" --redis-tls-cert-file "$C/client.crt" \
	--redis-tls-key-file "$C/client.key" model list

# ---- failures: one line each, exit 1 ----------------------------------------
# fails NAME PATTERN CMD...: exit 1 and one line matching PATTERN
fails() {
	_fn=$1 _fp=$2
	shift 2
	check_exit "$_fn: exit 1" 1 "$@"
	echo "#   message: $OUT"
	check_one_line "$_fn: one line" "$OUT"
	check_grep "$_fn: says /$_fp/" "$_fp" "$OUT"
}
# "unable to get local issuer certificate", or "self-signed certificate in
# certificate chain" when the server sends its CA along (redis-server does)
UNTRUSTED="(unable to get local issuer certificate|self-signed certificate in certificate chain)"
fails "no CA (the system store)" \
	"127\.0\.0\.1:$P_OK: TLS: certificate verify failed: $UNTRUSTED \(its CA is not in the system CA store; set redis_tls_ca_file\)" \
	w --store "$URL" model list
fails "wrong CA" "certificate verify failed: $UNTRUSTED \(its CA is not in .*otherca.crt" \
	w --store "$URL" --redis-tls-ca-file "$C/otherca.crt" model list
fails "expired certificate" "certificate verify failed: certificate has expired" \
	w --store "rediss://127.0.0.1:$P_EXP" "$CA" model list
fails "IP address mismatch" "certificate verify failed: IP address mismatch \(the certificate does not name 127\.0\.0\.1\)" \
	w --store "rediss://127.0.0.1:$P_HOST" "$CA" model list
fails "host name mismatch" "certificate verify failed: hostname mismatch \(the certificate does not name localhost\)" \
	w --store "rediss://localhost:$P_HOST" "$CA" model list
# the server answers the ClientHello with an error line once it holds a
# newline, else waits: either way one line saying it is not TLS
fails "plain-text server on rediss://" "127\.0\.0\.1:$P_PLAIN: .*the server did not (speak|answer) TLS \(a plain-text port\? use redis://\)" \
	env WSTORE_CONNECT_TIMEOUT_MS=2000 "$W" --store "rediss://127.0.0.1:$P_PLAIN" "$CA" model list
fails "TLS server on redis://" "127\.0\.0\.1:$P_OK: .*a TLS port\? use rediss://" \
	w --store "redis://127.0.0.1:$P_OK" model list
kill -STOP "$PID_STOP"
t0=$(date +%s)
fails "no handshake answer (server stopped)" "TLS handshake: timed out after 2 s: the server did not answer TLS" \
	env WSTORE_CONNECT_TIMEOUT_MS=2000 "$W" --store "rediss://127.0.0.1:$P_STOP" "$CA" model list
secs=$(($(date +%s) - t0))
check "no handshake answer: gave up within 10 s ($secs s)" test "$secs" -le 10
# a signal ends a wait for the handshake at once (not after the timeout)
WSTORE_CONNECT_TIMEOUT_MS=60000 "$W" --store "rediss://127.0.0.1:$P_STOP" "$CA" \
	model list >/dev/null 2>"$T/sigh.err" &
p=$!
wait_for 10 sh -c "ls -l /proc/$p/fd 2>/dev/null | grep -q socket:"
t0=$(date +%s%N)
kill -INT $p
wait_exit 10 $p
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
check "SIGINT ends a handshake wait with exit 1 ($rc)" test "$rc" = 1
check "... within 2 s (${ms} ms)" test "$ms" -lt 2000
check_grep "... saying interrupted" "interrupted" "$(cat "$T/sigh.err")"
kill -CONT "$PID_STOP"

# a TLS server that completes the handshake and then never answers
# (python's ssl module; it exits by itself after 120 s)
MUTE_PID=
for _try in 1 2 3 4 5; do
	MP=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 20000))
	$PY -c '
import socket, ssl, sys, threading, time
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[2], sys.argv[3])
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", int(sys.argv[1])))
ls.listen(16)
print("listening", flush=True)
ls.settimeout(1)
held = []
def hold(c):
    try:
        c.settimeout(10)
        held.append(ctx.wrap_socket(c, server_side=True))
    except OSError:
        pass
end = time.time() + 120
while time.time() < end:
    try:
        c, _ = ls.accept()
        threading.Thread(target=hold, args=(c,), daemon=True).start()
    except OSError:
        pass
' "$MP" "$C/server.crt" "$C/server.key" > "$T/mute.out" 2>&1 &
	MUTE_PID=$!
	wait_for 10 sh -c "$PY -c 'import socket; socket.create_connection((\"127.0.0.1\", $MP), 1)' || ! kill -0 $MUTE_PID" &&
		kill -0 $MUTE_PID 2>/dev/null && break
	MUTE_PID=
done
if [ -n "$MUTE_PID" ]; then
	SERVERS="$SERVERS $MUTE_PID"
	t0=$(date +%s)
	fails "mute TLS server: no reply" "127\.0\.0\.1:$MP: no reply: timed out after 1\.5 s" \
		env WSTORE_COMMAND_TIMEOUT_MS=1500 "$W" --store "rediss://127.0.0.1:$MP" "$CA" model list
	check "mute TLS server: gave up within 10 s ($(($(date +%s) - t0)) s)" \
		test $(($(date +%s) - t0)) -le 10
	"$W" --store "rediss://127.0.0.1:$MP" "$CA" model list >/dev/null 2>"$T/sigr.err" &
	p=$!
	wait_for 10 sh -c "ls -l /proc/$p/fd 2>/dev/null | grep -q socket:"
	sleep 0.3 # past the handshake (a wait for it ends the same way)
	t0=$(date +%s%N)
	kill -TERM $p
	wait_exit 10 $p
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	check "SIGTERM ends a TLS reply wait with exit 1 ($rc)" test "$rc" = 1
	check "... within 2 s (${ms} ms)" test "$ms" -lt 2000
	check_grep "... saying interrupted" "interrupted" "$(cat "$T/sigr.err")"
else
	tap_not_ok "start a mute TLS server" "$(cat "$T/mute.out")"
fi
fails "missing CA file" "cannot read redis_tls_ca_file '$T/nope.crt': No such file or directory" \
	w --store "$URL" --redis-tls-ca-file "$T/nope.crt" model list
fails "missing certificate file" "cannot read redis_tls_cert_file '$T/nope.crt'" \
	w --store "$URL" "$CA" --redis-tls-cert-file "$T/nope.crt" --redis-tls-key-file "$C/client.key" model list
fails "missing key file" "cannot read redis_tls_key_file '$T/nope.key'" \
	w --store "$URL" "$CA" --redis-tls-cert-file "$C/client.crt" --redis-tls-key-file "$T/nope.key" model list
fails "key does not match certificate" "redis_tls_key_file '.*server.key' does not match redis_tls_cert_file '.*client.crt'" \
	w --store "$URL" "$CA" --redis-tls-cert-file "$C/client.crt" --redis-tls-key-file "$C/server.key" model list
fails "certificate without key" "redis_tls_cert_file is set without redis_tls_key_file" \
	w --store "$URL" "$CA" --redis-tls-cert-file "$C/client.crt" model list
fails "CA file that is no certificate" "redis_tls_ca_file '.*src/config.json' holds no PEM certificate" \
	w --store "$URL" --redis-tls-ca-file "$SRC/config.json" model list

# ---- a TLS server SIGKILLed mid-import ----------------------------------------
# writes to a dead peer: one line and exit 1, never a SIGPIPE (exit 141)
if start_tls killed server no; then
	PID_KILL=$PID P_KILL=$PORT
	WSTORE_FAULTS=delay=20 "$W" --store "fault+rediss://127.0.0.1:$P_KILL" "$CA" \
		model import --source "$SRC" --model-id Org/Kill --checkpoint-id k1 \
		--chunk-size 16K --jobs 2 > "$T/kill.out" 2>&1 &
	p=$!
	wait_for 60 sh -c "[ \"\$(redis-cli --tls --cacert '$C/ca.crt' -h 127.0.0.1 -p $P_KILL dbsize | tr -dc 0-9)\" -ge 10 ] || ! kill -0 $p"
	kill -KILL "$PID_KILL"
	wait_exit 120 $p
	rc=$?
	OUT=$(cat "$T/kill.out")
	echo "#   message: $OUT"
	check "killed mid-import: exit 1, not a signal ($rc)" test "$rc" = 1
	check_one_line "killed mid-import: one line" "$OUT"
	check_grep "killed mid-import: names the server" "redis at 127\.0\.0\.1:$P_KILL" "$OUT"
else
	tap_not_ok "start a TLS server to kill"
fi

# ---- mutual TLS ------------------------------------------------------------
MURL="rediss://127.0.0.1:$P_MTLS"
fails "mutual TLS without a client certificate" \
	"127\.0\.0\.1:$P_MTLS: TLS: the server requires a client certificate" \
	w --store "$MURL" "$CA" model list
MC="--redis-tls-cert-file=$C/client.crt"
MK="--redis-tls-key-file=$C/client.key"
check_exit "mutual TLS: import with a client certificate" 0 \
	w --store "$MURL" "$CA" "$MC" "$MK" model import --source "$SRC" \
	--model-id Org/Mtls --checkpoint-id m1 --chunk-size 256K
check_exit "mutual TLS: pull" 0 w --store "$MURL" "$CA" "$MC" "$MK" model pull m1 --dest "$T/pull2"
check "mutual TLS: pulled tree equals the source" diff -r "$SRC" "$T/pull2"
# the settings reach the Python binding as any other
. "$HERE/lib/pyenv.sh"
pyenv_for "$(cd "$BUILD" && pwd)/libwstore.so"
check_exit "Python: Store(rediss://, settings=TLS files) lists m1" 0 \
	env PYTHONPATH="$HERE/../python" $PY -c '
import sys, wstore
s = wstore.Store(sys.argv[1], settings={"redis_tls_ca_file": sys.argv[2],
    "redis_tls_cert_file": sys.argv[3], "redis_tls_key_file": sys.argv[4]})
assert "m1" in s.list(), s.list()
' "$MURL" "$C/ca.crt" "$C/client.crt" "$C/client.key"
fails "mutual TLS: a client certificate of another CA" "127\.0\.0\.1:$P_MTLS: TLS: the server refused the client certificate \(tlsv1 alert unknown ca\)" \
	w --store "$MURL" "$CA" --redis-tls-cert-file "$C/otherca.crt" --redis-tls-key-file "$C/otherca.key" model list

# ---- a TLS Redis Cluster: 3 masters, TLS between the nodes too ----------------
rcli() {
	redis-cli --tls --cacert "$C/ca.crt" --cert "$C/client.crt" \
		--key "$C/client.key" -h 127.0.0.1 "$@"
}
cluster_ok() {
	for _cp in $CPORTS; do
		rcli -p "$_cp" cluster info 2>/dev/null | grep -q cluster_state:ok || return 1
	done
}
CPORTS=""
for k in 1 2 3; do
	# the cluster bus listens on the TLS port + 10000
	start_tls "c$k" server optional --cluster-enabled yes \
		--cluster-config-file nodes.conf --cluster-node-timeout 2000 \
		--tls-cluster yes --tls-replication yes || break
	CPORTS="$CPORTS $PORT"
done
set -- $CPORTS
if [ $# != 3 ]; then
	tap_not_ok "start 3 TLS cluster nodes" "$(tail -3 "$T"/c*/redis.log)"
elif ! timeout 60 redis-cli --tls --cacert "$C/ca.crt" --cert "$C/client.crt" \
	--key "$C/client.key" --cluster create "127.0.0.1:$1" "127.0.0.1:$2" \
	"127.0.0.1:$3" --cluster-replicas 0 --cluster-yes > "$T/create.log" 2>&1 ||
	! wait_for 60 cluster_ok; then
	tap_not_ok "create a TLS cluster" "$(tail -5 "$T/create.log")"
else
	tap_ok "a 3-master TLS cluster"
	CURL="rediss-cluster://127.0.0.1:$1,127.0.0.1:$2"
	. "$HERE/lib/pyenv.sh"
	pyenv_for "$(cd "$BUILD" && pwd)/libwstore.so"
	check_exit "cluster: import over rediss-cluster://" 0 \
		w --store "$CURL" "$CA" model import --source "$SRC" \
		--model-id Org/Ctls --checkpoint-id c1 --chunk-size 64K
	n_masters=0
	for p in $CPORTS; do
		keys=$(rcli -p "$p" dbsize 2>/dev/null | tr -dc 0-9)
		[ "${keys:-0}" -gt 0 ] && n_masters=$((n_masters + 1))
	done
	check "cluster: chunks landed on all 3 masters ($n_masters)" test "$n_masters" = 3
	check_exit "cluster: list" 0 w --store "$CURL" "$CA" model list
	check_grep "cluster: list shows it READY" "c1 +Org/Ctls +main +READY" "$OUT"
	check_exit "cluster: verify" 0 w --store "$CURL" "$CA" model verify c1
	check_exit "cluster: pull" 0 w --store "$CURL" "$CA" model pull c1 --dest "$T/pull3"
	check "cluster: pulled tree equals the source" diff -r "$SRC" "$T/pull3"
	# MOVED to a node the client did not know when it opened the store:
	# a fourth master joins and takes over the slots of the first after
	# the store is open; the pull follows the redirections, over TLS
	if start_tls c4 server optional --cluster-enabled yes \
	    --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
	    --tls-cluster yes --tls-replication yes; then
		P4=$PORT
		CPORTS="$CPORTS $P4"
		check_exit "cluster: MOVED to a new node, followed over TLS" 0 \
			env PYTHONPATH="$HERE/../python" timeout 200 $PY -c '
import subprocess, sys, time, wstore
ca, crt, key, p1, p4, dest = sys.argv[1:7]
cli = ["redis-cli", "--tls", "--cacert", ca, "--cert", crt, "--key", key]
def run(*a):
    r = subprocess.run(cli + list(a), capture_output=True, text=True,
                       timeout=150)
    if r.returncode:
        sys.exit("redis-cli %s failed: %s" % (a[1], " | ".join(
            (r.stdout + r.stderr).strip().splitlines()[-3:])))
s = wstore.Store("rediss-cluster://127.0.0.1:" + p1,
                 settings={"redis_tls_ca_file": ca})
assert "c1" in s.list()
run("--cluster", "add-node", "127.0.0.1:" + p4, "127.0.0.1:" + p1)
def myid(p):
    return subprocess.run(cli + ["-p", p, "cluster", "myid"], check=True,
                          capture_output=True, text=True).stdout.strip()
# until node 4 sees the cluster ok and every node agrees on the four
# (reshard refuses nodes that do not agree; gossip is slow on a busy
# machine), bounded
for _ in range(600):
    out = subprocess.run(cli + ["-p", p4, "cluster", "info"],
                         capture_output=True, text=True).stdout
    chk = subprocess.run(cli + ["--cluster", "check", "127.0.0.1:" + p1],
                         capture_output=True, text=True)
    if ("cluster_state:ok" in out and chk.returncode == 0 and
            "All nodes agree" in chk.stdout and
            chk.stdout.count("M: ") == 4):
        break
    time.sleep(0.1)
run("--cluster", "reshard", "127.0.0.1:" + p1, "--cluster-from", myid(p1),
    "--cluster-to", myid(p4), "--cluster-slots", "5461", "--cluster-yes")
keys = subprocess.run(cli + ["-p", p4, "dbsize"], capture_output=True,
                      text=True).stdout.strip()
assert int(keys) > 0, "no key moved to node 4"
s.pull("c1", dest)
' "$C/ca.crt" "$C/client.crt" "$C/client.key" "$1" "$P4" "$T/pull4"
		check "cluster: pulled after MOVED equals the source" diff -r "$SRC" "$T/pull4"
	else
		tap_not_ok "cluster: start a fourth TLS node"
	fi
	fails "cluster: wrong CA" "certificate verify failed: $UNTRUSTED" \
		w --store "$CURL" --redis-tls-ca-file "$C/otherca.crt" model list
	fails "cluster: a TLS cluster on redis-cluster://" "a TLS port\? use rediss://" \
		w --store "redis-cluster://127.0.0.1:$1" model list
fi

tap_done
