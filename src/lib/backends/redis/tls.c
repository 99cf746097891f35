/*
 * tls.c - TLS for rediss:// and rediss-cluster:// (OpenSSL).  Read
 * proto.h first.
 *
 * hiredis 0.14 has no TLS, so hiredis still connects the TCP socket and
 * parses replies while the bytes go through SSL_read/SSL_write here.  A
 * TLS connection's socket is nonblocking: every SSL call that wants to
 * read or write waits with rd_wait_fd() (poll in slices of 100 ms that
 * check wstore_interrupt), bounded by the connection's timeout, as the
 * plain connection's reads are.
 *
 * The server is verified against the system CA store or redis_tls_ca_file,
 * and its certificate must name the host of the URL (a DNS name, or an IP
 * address checked as one).  redis_tls_cert_file and redis_tls_key_file
 * give a client certificate for servers that require one.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "proto.h"

/* ---- the context of a store: CA, client certificate ---------------------- */

/* The file a setting names must be readable: say which and why not. */
static int file_ok(const char *key, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return wstore__err(WSTORE_EINVAL, "cannot read %s '%s': %s",
				   key, path, strerror(errno));
	close(fd);
	return 0;
}

/* The reason of the oldest queued OpenSSL error, or fallback. */
static const char *ssl_reason(const char *fallback)
{
	unsigned long e = ERR_peek_error();
	const char *s = e ? ERR_reason_error_string(e) : NULL;

	return s ? s : fallback;
}

static int ctx_fail(SSL_CTX *ctx, int code)
{
	SSL_CTX_free(ctx);
	ERR_clear_error();
	return code;
}

/* Client certificate and key: both or neither, and matching. */
static int load_client_cert(SSL_CTX *ctx, const struct rd_tls_files *f)
{
	if (!f->cert != !f->key)
		return wstore__err(
			WSTORE_EINVAL,
			"redis TLS: %s is set without %s (a client certificate needs both)",
			f->cert ? "redis_tls_cert_file" : "redis_tls_key_file",
			f->cert ? "redis_tls_key_file" : "redis_tls_cert_file");
	if (!f->cert)
		return 0;
	if (file_ok("redis_tls_cert_file", f->cert) ||
	    file_ok("redis_tls_key_file", f->key))
		return WSTORE_EINVAL;
	if (SSL_CTX_use_certificate_chain_file(ctx, f->cert) != 1)
		return wstore__err(
			WSTORE_EINVAL,
			"redis_tls_cert_file '%s' is not a PEM certificate: %s",
			f->cert, ssl_reason("unknown error"));
	if (SSL_CTX_use_PrivateKey_file(ctx, f->key, SSL_FILETYPE_PEM) != 1) {
		unsigned long e = ERR_peek_last_error();

		if (ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH)
			return wstore__err(
				WSTORE_EINVAL,
				"redis_tls_key_file '%s' does not match redis_tls_cert_file '%s'",
				f->key, f->cert);
		return wstore__err(
			WSTORE_EINVAL,
			"redis_tls_key_file '%s' is not a PEM private key: %s",
			f->key, ssl_reason("unknown error"));
	}
	if (SSL_CTX_check_private_key(ctx) != 1)
		return wstore__err(
			WSTORE_EINVAL,
			"redis_tls_key_file '%s' does not match redis_tls_cert_file '%s'",
			f->key, f->cert);
	return 0;
}

int rd_tls_ctx_new(SSL_CTX **out, const struct rd_tls_files *f)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	int r;

	if (!ctx)
		return wstore__err(-ENOMEM, "redis TLS: cannot set up OpenSSL");
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
				      SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (f->ca) {
		if ((r = file_ok("redis_tls_ca_file", f->ca)))
			return ctx_fail(ctx, r);
		if (SSL_CTX_load_verify_locations(ctx, f->ca, NULL) != 1)
			return ctx_fail(
				ctx,
				wstore__err(
					WSTORE_EINVAL,
					"redis_tls_ca_file '%s' holds no PEM certificate: %s",
					f->ca, ssl_reason("unknown error")));
	} else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		return ctx_fail(
			ctx, wstore__err(WSTORE_EUNAVAIL,
					 "redis TLS: cannot load the system CA "
					 "store: %s",
					 ssl_reason("unknown error")));
	}
	if ((r = load_client_cert(ctx, f)))
		return ctx_fail(ctx, r);
	*out = ctx;
	return 0;
}

/* ---- one connection --------------------------------------------------------
 */

/*
 * Say what an SSL call that returned ret failed of (SSL_get_error), in
 * rc's error, and return -1.  A server that requires a client certificate
 * says so only after the handshake (TLS 1.3), at the first read.
 */
static int tls_broken(struct rd_conn *rc, const char *what, int ret)
{
	int e = SSL_get_error(rc->ssl, ret), saved = errno;
	unsigned long q = ERR_peek_error();
	int reason = ERR_GET_REASON(q);
	char msg[160];

	if (e == SSL_ERROR_ZERO_RETURN ||
	    (e == SSL_ERROR_SYSCALL && !q && (ret == 0 || saved == 0)) ||
	    reason == SSL_R_UNEXPECTED_EOF_WHILE_READING)
		snprintf(msg, sizeof(msg), "connection closed by server");
	else if (e == SSL_ERROR_SYSCALL && !q)
		snprintf(msg, sizeof(msg), "%s: %s", what, strerror(saved));
	else if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
		 reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE)
		snprintf(msg, sizeof(msg),
			 "TLS: the server requires a client certificate (set "
			 "redis_tls_cert_file and redis_tls_key_file)");
	else if (reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
		 reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
		 reason == SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED ||
		 reason == SSL_R_TLSV1_ALERT_DECRYPT_ERROR)
		snprintf(msg, sizeof(msg),
			 "TLS: the server refused the client certificate "
			 "(%s)",
			 ssl_reason("alert"));
	else
		snprintf(msg, sizeof(msg), "%s: TLS: %s", what,
			 ssl_reason("error"));
	ERR_clear_error();
	return rd_broken(rc, msg, 0);
}

/* Wait for what the last SSL call wants: 0 to retry it, else -1 (a
 * timeout said as "wait: timed out", a failure as "fail: ..."). */
static int tls_want(struct rd_conn *rc, const char *wait, const char *fail,
		    int ret)
{
	int e = SSL_get_error(rc->ssl, ret);

	if (e == SSL_ERROR_WANT_READ)
		return rd_wait_fd(rc, POLLIN, wait);
	if (e == SSL_ERROR_WANT_WRITE)
		return rd_wait_fd(rc, POLLOUT, wait);
	return tls_broken(rc, fail, ret);
}

ssize_t rd_tls_read(struct rd_conn *rc, void *buf, size_t len)
{
	for (;;) {
		int k;

		if (wstore__interrupted())
			return rd_broken(rc, "interrupted", 0);
		ERR_clear_error();
		k = SSL_read(rc->ssl, buf,
			     len > INT32_MAX ? INT32_MAX : (int)len);
		if (k > 0)
			return k;
		if (tls_want(rc, "no reply", "read failed", k))
			return -1;
	}
}

ssize_t rd_tls_read_now(struct rd_conn *rc, void *buf, size_t len)
{
	int k;

	ERR_clear_error();
	k = SSL_read(rc->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
	ERR_clear_error();
	return k > 0 ? k : -1;
}

/* A write the server broke off (reset): it may have said why first, in
 * an alert (a client certificate it refused, TLS 1.3): report that. */
static int write_broken(struct rd_conn *rc)
{
	int saved = errno, k;
	char c;

	ERR_clear_error();
	k = SSL_read(rc->ssl, &c, 1);
	if (k <= 0 && SSL_get_error(rc->ssl, k) == SSL_ERROR_SSL)
		return tls_broken(rc, "write failed", k);
	ERR_clear_error();
	if (!saved)
		return rd_broken(rc, "connection closed by server", 0);
	return rd_broken(rc, "write failed", saved);
}

int rd_tls_write(struct rd_conn *rc, const void *buf, size_t len)
{
	while (len > 0) {
		int k;

		if (wstore__interrupted())
			return rd_broken(rc, "interrupted", 0);
		ERR_clear_error();
		k = SSL_write(rc->ssl, buf,
			      len > INT32_MAX ? INT32_MAX : (int)len);
		if (k > 0) {
			buf = (const char *)buf + k;
			len -= (size_t)k;
		} else if (SSL_get_error(rc->ssl, k) == SSL_ERROR_SYSCALL) {
			return write_broken(rc);
		} else if (tls_want(rc, "write failed", "write failed", k)) {
			return -1;
		}
	}
	return 0;
}

/* Verify results that mean "signed by a CA we do not trust". */
static int untrusted(long v)
{
	return v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
	       v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT ||
	       v == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
	       v == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT ||
	       v == X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE;
}

/* Why the handshake failed, as one line for conn_open. */
static int handshake_err(struct rd_node *n, struct rd_conn *rc, int ret)
{
	long v = SSL_get_verify_result(rc->ssl);
	unsigned long q = ERR_peek_error();
	int reason = ERR_GET_REASON(q);
	const char *ca = n->opts->tls_ca ? n->opts->tls_ca : NULL;

	if (v != X509_V_OK && ERR_GET_LIB(q) == ERR_LIB_SSL &&
	    reason == SSL_R_CERTIFICATE_VERIFY_FAILED) {
		char why[400] = "";

		if (v == X509_V_ERR_HOSTNAME_MISMATCH ||
		    v == X509_V_ERR_IP_ADDRESS_MISMATCH)
			snprintf(why, sizeof(why),
				 " (the certificate does not name %s)",
				 n->host);
		else if (untrusted(v))
			snprintf(
				why, sizeof(why),
				" (its CA is not in %s; set redis_tls_ca_file)",
				ca ? ca : "the system CA store");
		ERR_clear_error();
		return wstore__err(
			WSTORE_EUNAVAIL,
			"cannot connect to redis at %s: TLS: certificate verify failed: %s%s",
			n->name, X509_verify_cert_error_string(v), why);
	}
	/* a plain-text answer to the ClientHello ("-ERR ..."); a server
	 * that closes or dies is said as such by tls_broken below */
	if (reason == SSL_R_WRONG_VERSION_NUMBER ||
	    reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
	    reason == SSL_R_UNKNOWN_PROTOCOL) {
		ERR_clear_error();
		return wstore__err(
			WSTORE_EUNAVAIL,
			"cannot connect to redis at %s: the server did not speak TLS (a plain-text port? use redis://)",
			n->name);
	}
	tls_broken(rc, "TLS handshake failed", ret);
	return wstore__err(WSTORE_EUNAVAIL, "cannot connect to redis at %s: %s",
			   n->name, rc->c->errstr);
}

/*
 * The socket under SSL: OpenSSL's own socket BIO writes with write(), and
 * a server gone away would raise SIGPIPE in the caller's process; this one
 * sends with MSG_NOSIGNAL (as the plain connection does).  The fd is the
 * BIO's data; the socket stays hiredis' to close.
 */
static int bio_write(BIO *b, const char *buf, int len)
{
	ssize_t k = send((int)(intptr_t)BIO_get_data(b), buf, (size_t)len,
			 MSG_NOSIGNAL);

	BIO_clear_retry_flags(b);
	if (k < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		BIO_set_retry_write(b);
	return (int)k;
}

static int bio_read(BIO *b, char *buf, int len)
{
	ssize_t k = recv((int)(intptr_t)BIO_get_data(b), buf, (size_t)len, 0);

	BIO_clear_retry_flags(b);
	if (k < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		BIO_set_retry_read(b);
	return (int)k;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)num;
	if (cmd == BIO_CTRL_FLUSH)
		return 1;
	if (cmd == BIO_C_GET_FD) {
		if (ptr)
			*(int *)ptr = (int)(intptr_t)BIO_get_data(b);
		return (int)(intptr_t)BIO_get_data(b);
	}
	return 0;
}

static BIO_METHOD *bio_method;

static void bio_method_init(void)
{
	BIO_METHOD *m =
		BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK |
				     BIO_TYPE_DESCRIPTOR,
			     "wstore redis socket");

	if (m && BIO_meth_set_write(m, bio_write) == 1 &&
	    BIO_meth_set_read(m, bio_read) == 1 &&
	    BIO_meth_set_ctrl(m, bio_ctrl) == 1)
		bio_method = m;
	else
		BIO_meth_free(m);
}

/* Put ssl over fd through the BIO above.  0, or -1 (out of memory). */
static int set_socket(SSL *ssl, int fd)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	BIO *b;

	pthread_once(&once, bio_method_init);
	if (!bio_method || !(b = BIO_new(bio_method)))
		return -1;
	BIO_set_data(b, (void *)(intptr_t)fd);
	BIO_set_init(b, 1);
	SSL_set_bio(ssl, b, b); /* ssl owns b */
	return 0;
}

/* Name the server to verify: a DNS name (also sent as SNI), or an IP. */
static int set_peer_name(struct rd_node *n, SSL *ssl)
{
	unsigned char ip[16];
	int is_ip = inet_pton(AF_INET, n->host, ip) == 1 ||
		    inet_pton(AF_INET6, n->host, ip) == 1;

	if (is_ip)
		return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl),
						     n->host) == 1;
	return SSL_set1_host(ssl, n->host) == 1 &&
	       SSL_set_tlsext_host_name(ssl, n->host) == 1;
}

int rd_tls_start(struct rd_node *n, struct rd_conn *rc)
{
	int fd = rc->c->fd, fl = fcntl(fd, F_GETFL), k;

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot connect to redis at %s: %s", n->name,
				   strerror(errno));
	if (!(rc->ssl = SSL_new(n->opts->tls)) || !set_peer_name(n, rc->ssl) ||
	    set_socket(rc->ssl, fd) < 0) {
		ERR_clear_error();
		return wstore__err(-ENOMEM,
				   "cannot connect to redis at %s: TLS setup",
				   n->name);
	}
	for (;;) {
		ERR_clear_error();
		k = SSL_connect(rc->ssl);
		if (k == 1)
			return 0;
		if (SSL_get_error(rc->ssl, k) != SSL_ERROR_WANT_READ &&
		    SSL_get_error(rc->ssl, k) != SSL_ERROR_WANT_WRITE)
			return handshake_err(n, rc, k);
		if (tls_want(rc, "TLS handshake", "TLS handshake failed", k))
			return wstore__err(
				WSTORE_EUNAVAIL,
				"cannot connect to redis at %s: %s%s", n->name,
				rc->c->errstr,
				strstr(rc->c->errstr, "timed out")
					? ": the server did not answer TLS (a plain-text port? use redis://)"
					: "");
	}
}

void rd_tls_free(struct rd_conn *rc)
{
	SSL_free(rc->ssl); /* no close_notify: the socket is closed next */
	rc->ssl = NULL;
}
