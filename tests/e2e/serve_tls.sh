#!/bin/sh
# serve_tls.sh - `wstore serve --tls-cert FILE --tls-key FILE`: HTTPS on
# loopback with certificates the test makes with the openssl command (a CA,
# a server certificate for 127.0.0.1 and localhost, one that has expired,
# one for another host, one with an encrypted key, and a second CA that
# signed none of them).  The real clients download over HTTPS trusting the
# test CA: curl --cacert, huggingface_hub 0.36.2 (REQUESTS_CA_BUNDLE) and
# 1.28.0 (SSL_CERT_FILE), @huggingface/hub (NODE_EXTRA_CA_CERTS), and
# model import --from-hub (hub_tls_ca_file, CURL_CA_BUNDLE; without the CA
# a line saying how to name it; http:// to the TLS port hinted).  A client
# with the wrong CA, an expired or wrong-host certificate is refused while
# the server keeps serving the others; a plain-HTTP request to the TLS port
# gets no data; a connection that never starts its handshake is closed
# after the header timeout; 300 such sockets of one client leave others
# served; SIGTERM stops listening at once and finishes the download in
# flight; each bad start (one flag of the two, a missing file, a file
# without a certificate, a key of another certificate, an encrypted key
# without its password or with a wrong one) is one line and a non-zero
# exit before anything listens.
TAP_SUITE=serve-tls
. "$(dirname "$0")/../lib/suite.sh"
. "$HERE/lib/serve.sh"
. "$HERE/lib/hubclients.sh"
suite_cleanup() { serve_stop_all; }

if ! command -v openssl >/dev/null; then
	tap_not_ok "the openssl command is needed (apt-get install openssl)"
	tap_done
	exit 1
fi

# ---- the certificates -------------------------------------------------------
P="$T/pki"
mkdir -p "$P"
# mkca NAME: a self-signed CA
mkca() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
		-nodes -keyout "$P/$1.key" -out "$P/$1.pem" -days 2 \
		-subj "/CN=wstore test $1" >"$P/$1.log" 2>&1
}
# mkcert NAME DAYS SAN [-aes256 -passout pass:PW]: a server certificate
# signed by the test CA
mkcert() {
	_n=$1; _d=$2; _san=$3; shift 3
	printf 'subjectAltName=%s\n' "$_san" > "$P/$_n.ext"
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 \
		"$@" -out "$P/$_n.key" >"$P/$_n.log" 2>&1 &&
	openssl req -new -key "$P/$_n.key" -passin pass:sekret \
		-subj "/CN=wstore test $_n" -out "$P/$_n.csr" >>"$P/$_n.log" 2>&1 &&
	openssl x509 -req -in "$P/$_n.csr" -CA "$P/ca.pem" -CAkey "$P/ca.key" \
		-CAcreateserial -days "$_d" -extfile "$P/$_n.ext" \
		-out "$P/$_n.pem" >>"$P/$_n.log" 2>&1
}
mkca ca && mkca otherca || tap_not_ok "openssl: the CAs" "$(cat "$P"/*.log | tail -5)"
mkcert srv 2 "DNS:localhost,IP:127.0.0.1" &&
	mkcert expired -1 "DNS:localhost,IP:127.0.0.1" &&
	mkcert wronghost 2 "DNS:wrong.example" &&
	mkcert enc 2 "DNS:localhost,IP:127.0.0.1" -aes256 -pass pass:sekret ||
	tap_not_ok "openssl: the server certificates" "$(cat "$P"/*.log | tail -5)"
check "the expired certificate has ended" sh -c \
	"! openssl x509 -in '$P/expired.pem' -noout -checkend 0 >/dev/null"
printf 'sekret\n' > "$P/pw"
printf 'wrong\n' > "$P/badpw"
CA="$P/ca.pem"

SRC="$T/src"
hub_source "$SRC"
check "import" "$W" --store "$T/store" model import --checkpoint-id tiny-1 \
	--model-id org/tiny --source "$SRC" --chunk-size 1MiB --quiet
TOKEN=hf_wstore_tls_token
BIG=$(cd "$SRC" && ls -S *.safetensors | head -1)

# ---- bad starts: one line, non-zero, nothing listening ----------------------
# bad_start NAME STATUS PATTERN ARGS...
bad_start() {
	_name=$1; _st=$2; _pat=$3; shift 3
	check_exit "$_name: exit $_st" "$_st" timeout 20 "$W" --store "$T/store" \
		serve --listen 127.0.0.1:0 "$@"
	check_grep "... says so" "$_pat" "$OUT"
	check_one_line "... in one line" "$OUT"
	check "... before listening" sh -c "! printf '%s' \"\$1\" | grep -q listening" - "$OUT"
}
bad_start "--tls-cert alone" 2 'tls-cert needs --tls-key' --tls-cert "$P/srv.pem"
bad_start "--tls-key alone" 2 'tls-key needs --tls-cert' --tls-key "$P/srv.key"
bad_start "a missing certificate file" 1 "cannot read '$P/nope.pem': No such file" \
	--tls-cert "$P/nope.pem" --tls-key "$P/srv.key"
bad_start "a certificate file holding a key" 1 'holds no PEM certificate' \
	--tls-cert "$P/srv.key" --tls-key "$P/srv.key"
bad_start "a key file holding a certificate" 1 'holds no PEM private key' \
	--tls-cert "$P/srv.pem" --tls-key "$P/srv.pem"
bad_start "the key of another certificate" 1 \
	"the key in '$P/expired.key' does not match the certificate in '$P/srv.pem'" \
	--tls-cert "$P/srv.pem" --tls-key "$P/expired.key"
bad_start "an encrypted key without its password" 1 'it is encrypted \(give --tls-key-password-file\)' \
	--tls-cert "$P/enc.pem" --tls-key "$P/enc.key"
bad_start "an encrypted key with a wrong password" 1 'cannot decrypt the key' \
	--tls-cert "$P/enc.pem" --tls-key "$P/enc.key" --tls-key-password-file "$P/badpw"
# root reads any file: the unreadable key is tried as another user, on
# copies in a place that user reaches
if suite_share; then
	cp "$P/srv.pem" "$P/srv.key" "$SHARE/" && chmod 644 "$SHARE/srv.pem" &&
		chmod 000 "$SHARE/srv.key" && cp -r "$T/store" "$SHARE/store" &&
		chown -R 65534:65534 "$SHARE/store"
	check_exit "an unreadable key file: exit 1" 1 $AS_USER env HOME=/nonexistent timeout 20 \
		"$WU" --store "$SHARE/store" serve --listen 127.0.0.1:0 \
		--tls-cert "$SHARE/srv.pem" --tls-key "$SHARE/srv.key"
	check_grep "... says so" "cannot read '$SHARE/srv.key': Permission denied" "$OUT"
	check_one_line "... in one line" "$OUT"
else
	tap_skip "an unreadable key file" "$SHARE_WHY"
fi

# ---- the encrypted key with its password, and the config keys ---------------
if serve_start enc "$T/store" --tls-cert "$P/enc.pem" --tls-key "$P/enc.key" \
	--tls-key-password-file "$P/pw" --header-timeout 2; then
	check_grep "an encrypted key with its password: listening on https://" '^https://' "$SERVE_URL"
	check "... serves" curl -sSf --cacert "$CA" -o /dev/null "$SERVE_URL/api/models/org/tiny"
	# a connection that never starts its handshake is closed after the
	# header timeout, as a plain one that never sends its headers
	check_grep "a connection silent before its TLS handshake: closed after --header-timeout 2" \
		'^closed after ([2-9]|[1-5][0-9])\.' "$(python3 -c '
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(60)
t = time.time()
while s.recv(4096):
    pass
print("closed after %.1f s" % (time.time() - t))' "${SERVE_URL##*:}" 2>&1)"
	serve_stop
fi
export WSTORE_SERVE_TLS_CERT="$P/srv.pem" WSTORE_SERVE_TLS_KEY="$P/srv.key"
check_grep "config: serve_tls_cert from the environment (config show --origin)" \
	"serve_tls_cert=$P/srv.pem" "$("$W" --store "$T/store" config show --origin 2>&1)"
if serve_start config "$T/store"; then
	check_grep "config keys serve_tls_cert/serve_tls_key: https" '^https://' "$SERVE_URL"
	serve_stop
fi
unset WSTORE_SERVE_TLS_CERT WSTORE_SERVE_TLS_KEY

# ---- the clients over HTTPS -------------------------------------------------
serve_start main "$T/store" --tls-cert "$P/srv.pem" --tls-key "$P/srv.key" \
	--token "$TOKEN" || { tap_done; exit 1; }
URL=$SERVE_URL
AUTH="Authorization: Bearer $TOKEN"
check_grep "listening on https://127.0.0.1:PORT" '^https://127\.0\.0\.1:[0-9]+$' "$URL"
SHA=$(curl -sf --cacert "$CA" -H "$AUTH" "$URL/api/models/org/tiny" | json_get sha)
check_grep "curl --cacert: model info with its commit" '^[0-9a-f]{40}$' "$SHA"
curl -sf --cacert "$CA" -H "$AUTH" -o "$T/big" "$URL/org/tiny/resolve/main/$BIG"
check "curl --cacert: a weight file byte for byte" cmp "$T/big" "$SRC/$BIG"
curl -sf --cacert "$CA" -H "$AUTH" -r 1000-199999 -o "$T/part" "$URL/org/tiny/resolve/main/$BIG"
check "curl --cacert: a range of it" sh -c "tail -c +1001 '$SRC/$BIG' | head -c 199000 | cmp - '$T/part'"
port=${URL##*:}
check "curl: https://localhost (the other name of the certificate)" \
	curl -sSf --cacert "$CA" -H "$AUTH" -o /dev/null "https://localhost:$port/api/models/org/tiny"

# model import --from-hub from this server, signed by a private CA
printf '%s\n' "$TOKEN" > "$T/tok"
# hubi CMD...: CMD bounded, with no CA from the environment
hubi() { timeout -k 5 60 env -u CURL_CA_BUNDLE -u SSL_CERT_FILE "$@"; }
check_exit "hub import, private CA unknown: error" 1 hubi "$W" --store "$T/hs1" \
	model import --from-hub org/tiny --endpoint "$URL" --token-file "$T/tok"
check_grep "... saying how to name the CA" "hub_tls_ca_file or CURL_CA_BUNDLE" "$OUT"
check_one_line "... one line" "$OUT"
check_exit "hub import with hub_tls_ca_file: imported" 0 hubi env \
	WSTORE_HUB_TLS_CA_FILE="$CA" "$W" --store "$T/hs2" model import \
	--from-hub org/tiny --endpoint "$URL" --token-file "$T/tok"
check_exit "hub import with CURL_CA_BUNDLE: imported" 0 hubi env \
	CURL_CA_BUNDLE="$CA" "$W" --store "$T/hs3" model import \
	--from-hub org/tiny --endpoint "$URL" --token-file "$T/tok"
check "... verify passes" "$W" --store "$T/hs3" model verify "org/tiny@$SHA"
check_exit "hub import with SSL_CERT_FILE: imported" 0 hubi env \
	SSL_CERT_FILE="$CA" "$W" --store "$T/hs5" model import \
	--from-hub org/tiny --endpoint "$URL" --token-file "$T/tok"
check_exit "hub import, http:// to the TLS port: error" 1 hubi "$W" --store "$T/hs4" \
	model import --from-hub org/tiny --endpoint "http://127.0.0.1:$port" --retries 1
check_grep "... hinting at https://" "an https:// endpoint\\?" "$OUT"
check_one_line "... one line" "$OUT"

# 0.x downloads with requests (REQUESTS_CA_BUNDLE), 1.x with httpx
# (SSL_CERT_FILE); each is given only the variable it reads
REQUESTS_CA_BUNDLE=$CA hub_py 0.36.2 "python (REQUESTS_CA_BUNDLE)" "$URL" org/tiny "$SRC" "$T/py0" "$SHA" "$TOKEN"
SSL_CERT_FILE=$CA hub_py 1.28.0 "python (SSL_CERT_FILE)" "$URL" org/tiny "$SRC" "$T/py1" "$SHA" "$TOKEN"
if hub_npm_ready; then
	NODE_EXTRA_CA_CERTS=$CA hub_js "js (NODE_EXTRA_CA_CERTS)" "$URL" org/tiny "$SRC" "$T/js" "$SHA" "$TOKEN"
fi

# ---- refused: a client trusting another CA, plain HTTP ------------------------
# py_refused VERSION URL [VAR=CA...]: hf_hub_download fails on the
# certificate; prints "refused" or what happened instead
py_refused() {
	_v=$1; _u=$2; shift 2
	_pp="$HFHUB/huggingface_hub-$_v/src"
	case $_v in 1.*) _pp="$_pp:$HFHUB/deps-for-1.x" ;; esac
	env "$@" PYTHONPATH="$_pp" HF_ENDPOINT="$_u" HF_HUB_DISABLE_TELEMETRY=1 \
		HF_HUB_DISABLE_PROGRESS_BARS=1 HF_HUB_ETAG_TIMEOUT=20 \
		timeout 120 /usr/bin/python3 -c '
import sys, traceback
import huggingface_hub as hh
try:
    hh.hf_hub_download("org/tiny", "config.json", token=sys.argv[1], cache_dir=sys.argv[2])
except Exception as e:
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    ok = any(w in text for w in ("CERTIFICATE_VERIFY_FAILED", "certificate verify failed",
                                 "doesn\x27t match", "Hostname mismatch"))
    print("refused" if ok else "failed otherwise: " + text.strip().splitlines()[-1])
else:
    print("accepted")' "$TOKEN" "$T/refused-$_v-$$" 2>&1 | tail -1
}
check_exit "curl trusting another CA: refused (exit 60)" 60 \
	curl -sS --cacert "$P/otherca.pem" -H "$AUTH" "$URL/api/models/org/tiny"
check_exit "curl trusting the system CAs only: refused (exit 60)" 60 \
	curl -sS -H "$AUTH" "$URL/api/models/org/tiny"
for v in 0.36.2 1.28.0; do
	if [ -d "$HFHUB/huggingface_hub-$v/src/huggingface_hub" ]; then
		check_grep "python $v trusting another CA: a certificate error" '^refused$' \
			"$(py_refused $v "$URL" REQUESTS_CA_BUNDLE="$P/otherca.pem" SSL_CERT_FILE="$P/otherca.pem")"
	else
		tap_skip "python $v trusting another CA" "huggingface_hub $v is not unpacked in $HFHUB"
	fi
done
if command -v node >/dev/null; then
	check_grep "node fetch trusting another CA: a certificate error" 'UNABLE_TO_VERIFY_LEAF_SIGNATURE|unable to verify|self.signed|SELF_SIGNED' \
		"$(NODE_EXTRA_CA_CERTS="$P/otherca.pem" timeout 60 node -e '
fetch(process.argv[1]).then(r => console.log("accepted", r.status),
	e => console.log("refused", e.cause ? e.cause.code + " " + e.cause.message : e.message))' \
			"$URL/healthz" 2>&1)"
else
	tap_skip "node fetch trusting another CA" "node is not installed"
fi
OUT=$(curl -sS -m 20 -o "$T/plain" "http://127.0.0.1:$port/healthz" 2>&1)
rc=$?
check "plain HTTP to the TLS port: the request fails (curl exit $rc)" test "$rc" != 0
check "... and gets no data" test ! -s "$T/plain"
curl -sf --cacert "$CA" -H "$AUTH" -o "$T/big2" "$URL/org/tiny/resolve/main/$BIG"
check "after the refused clients the server still serves: a weight file byte for byte" \
	cmp "$T/big2" "$SRC/$BIG"
check "... the same process" kill -0 "$SERVE_PID"
serve_stop
check_grep "server exited 0" '^0$' "$SERVE_RC"

# ---- careless clients over TLS ------------------------------------------------
# 300 sockets from 127.0.0.2 that never finish their handshake (half of
# them send half a ClientHello): /healthz and a download over HTTPS from
# 127.0.0.1 are answered at once, the sockets are closed after the header
# timeout; SIGTERM with a slow download in flight stops listening at once
# and finishes the download
mkdir -p "$T/slowsrc"
head -c 16777216 /dev/urandom > "$T/slowsrc/slow.bin"
check "import a 16 MiB file" "$W" --store "$T/store" model import \
	--checkpoint-id s-1 --model-id org/s --source "$T/slowsrc" \
	--chunk-size 1MiB --quiet --force
if serve_start guard "$T/store" --tls-cert "$P/srv.pem" --tls-key "$P/srv.key" \
	--header-timeout 2; then
	serve_idle_checks "HTTPS, 300 sockets that never finish their handshake" \
		org/tiny "$SRC/$BIG" "$CA"

	rm -f "$T/slow"
	python3 "$HERE/tools/slowget.py" "$SERVE_URL/org/s/resolve/main/slow.bin" \
		"$T/slow" 2000000 "$CA" &
	C=$!
	wait_for 20 test -s "$T/slow"
	kill -TERM "$SERVE_PID"
	wait_for 5 grep -q 'stopping' "$SERVE_LOG"
	curl -s --max-time 5 --cacert "$CA" -o /dev/null "$SERVE_URL/healthz"
	rc=$?
	check_grep "HTTPS, SIGTERM: a new connection is refused at once (curl exit 7)" '^7$' "$rc"
	wait_exit 60 "$C"; rc=$?
	check_grep "HTTPS, SIGTERM: the download in flight goes on" '^0$' "$rc"
	check "... and is whole" cmp "$T/slow" "$T/slowsrc/slow.bin"
	serve_wait_exit
	check_grep "HTTPS, SIGTERM: exit status 0" '^0$' "$SERVE_RC"
fi

# ---- an expired certificate, a certificate for another host ------------------
if serve_start expired "$T/store" --tls-cert "$P/expired.pem" --tls-key "$P/expired.key"; then
	check_grep "an expired certificate: a warning at start" \
		"warning: the certificate in '$P/expired.pem' expired on [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z: clients will refuse it" \
		"$(cat "$SERVE_LOG")"
	check_exit "curl: refused (exit 60)" 60 curl -sS --cacert "$CA" "$SERVE_URL/healthz"
	check_grep "... as expired" 'expired' "$OUT"
	if [ -d "$HFHUB/huggingface_hub-1.28.0/src/huggingface_hub" ]; then
		check_grep "python 1.28.0: a certificate error" '^refused$' \
			"$(py_refused 1.28.0 "$SERVE_URL" SSL_CERT_FILE="$CA")"
	fi
	serve_stop
fi
if serve_start wronghost "$T/store" --tls-cert "$P/wronghost.pem" --tls-key "$P/wronghost.key"; then
	check_exit "a certificate for another host: curl refuses (exit 60)" 60 \
		curl -sS --cacert "$CA" "$SERVE_URL/healthz"
	check_grep "... naming the mismatch" 'subject name|does not match|no alternative' "$OUT"
	if [ -d "$HFHUB/huggingface_hub-0.36.2/src/huggingface_hub" ]; then
		check_grep "python 0.36.2: a certificate error" '^refused$' \
			"$(py_refused 0.36.2 "$SERVE_URL" REQUESTS_CA_BUNDLE="$CA")"
	fi
	serve_stop
fi
tap_done
