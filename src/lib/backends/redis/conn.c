/*
 * conn.c - connections to one Redis server: the pool of a node,
 * connecting (AUTH, SELECT), and the raw I/O the commands use
 * (cmd.c).  Read proto.h first.
 *
 * Every node keeps a free list of connections under a mutex; a call takes
 * one (or opens one), uses it alone and gives it back, so worker threads
 * run their commands in parallel.  A connection that saw an I/O or
 * protocol error is marked broken (c->err) and closed, never pooled.
 *
 * hiredis formats the small commands and parses the small replies, but
 * every write goes through sendmsg(MSG_NOSIGNAL) (a dead server is an
 * error, never a SIGPIPE), and a big bulk reply is read() straight into
 * the caller's buffer (rd_read_bulk): hiredis 0.14's reader would grow its
 * own buffer to the value's size and the caller would copy it again.
 *
 * Over TLS (rediss://, tls.c) the same functions read and write through
 * SSL_read/SSL_write instead (conn_read, tls_send_iov), on a nonblocking
 * socket, with the same bounded waits (rd_wait_fd, wait.c); replies then reach
 * hiredis' reader through redisReaderFeed.
 */
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"

static struct timeval ms_tv(int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	return tv;
}

/* ---- I/O on one connection --------------------------------------------- */

static int wait_readable(struct rd_conn *rc)
{
	return rd_wait_fd(rc, POLLIN, "no reply");
}

/* Read at least one byte (TLS or plain): > 0, or -1 with the connection
 * broken. */
static ssize_t conn_read(struct rd_conn *rc, void *buf, size_t len)
{
	if (rc->ssl)
		return rd_tls_read(rc, buf, len);
	for (;;) {
		ssize_t k;

		if (wait_readable(rc) < 0)
			return -1;
		k = read(rc->c->fd, buf, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return rd_broken(rc,
					 k ? "read failed"
					   : "connection closed by server",
					 k ? errno : 0);
		return k;
	}
}

ssize_t rd_read_now(struct rd_conn *rc, void *buf, size_t len)
{
	if (rc->ssl)
		return rd_tls_read_now(rc, buf, len);
	return recv(rc->c->fd, buf, len, MSG_DONTWAIT);
}

/* rd_send_iov over TLS: small pieces gathered into one record. */
static int tls_send_iov(struct rd_conn *rc, const struct iovec *iov, int n)
{
	char small[16384];
	size_t have = 0;

	for (int i = 0; i < n; i++) {
		if (have + iov[i].iov_len <= sizeof(small)) {
			memcpy(small + have, iov[i].iov_base, iov[i].iov_len);
			have += iov[i].iov_len;
			continue;
		}
		if (have && rd_tls_write(rc, small, have))
			return -1;
		have = 0;
		if (rd_tls_write(rc, iov[i].iov_base, iov[i].iov_len))
			return -1;
	}
	return have ? rd_tls_write(rc, small, have) : 0;
}

/* Send all of iov (modified).  0, or -1 with the connection broken. */
int rd_send_iov(struct rd_conn *rc, struct iovec *iov, int n)
{
	if (rc->ssl)
		return tls_send_iov(rc, iov, n);
	while (n > 0) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = n };
		ssize_t w = sendmsg(rc->c->fd, &m, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return rd_broken(rc, "write failed", errno);
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= w;
		}
	}
	return 0;
}

/* Send up to 4 pipelined commands, each given as a NULL-terminated array
 * of C strings with a parallel array of lengths. */
int rd_send_cmds(struct rd_conn *rc, int ncmd, const char **argv[],
		 const size_t *lens[])
{
	char *cmd[4];
	struct iovec iov[4];
	int i, r = 0;

	for (i = 0; i < ncmd; i++) {
		int argc = 0, len;

		while (argv[i][argc])
			argc++;
		len = redisFormatCommandArgv(&cmd[i], argc, argv[i], lens[i]);
		if (len < 0) {
			while (i-- > 0)
				redisFreeCommand(cmd[i]);
			return rd_broken(rc, "out of memory", ENOMEM);
		}
		iov[i].iov_base = cmd[i];
		iov[i].iov_len = (size_t)len;
	}
	r = rd_send_iov(rc, iov, ncmd);
	for (i = 0; i < ncmd; i++)
		redisFreeCommand(cmd[i]);
	return r;
}

/* Next reply, or NULL with the connection broken. */
redisReply *rd_recv_reply(struct rd_conn *rc)
{
	void *reply = NULL;
	int ok = redisGetReplyFromReader(rc->c, &reply) == REDIS_OK;

	/* hiredis' own blocking read, one wait_readable at a time; over
	 * TLS our read feeds hiredis' reader */
	while (ok && !reply) {
		if (rc->ssl) {
			char buf[16384];
			ssize_t k = rd_tls_read(rc, buf, sizeof(buf));

			if (k < 0)
				return NULL;
			ok = redisReaderFeed(rc->c->reader, buf, (size_t)k) ==
			     REDIS_OK;
		} else {
			if (wait_readable(rc) < 0)
				return NULL;
			ok = redisBufferRead(rc->c) == REDIS_OK;
		}
		ok = ok && redisGetReplyFromReader(rc->c, &reply) == REDIS_OK;
	}
	if (!ok || !reply) {
		/* hiredis says "Resource temporarily unavailable" when the
		 * socket's receive timeout expires: say what happened */
		if (rc->c->err == REDIS_ERR_IO &&
		    (errno == EAGAIN || errno == EWOULDBLOCK))
			snprintf(rc->c->errstr, sizeof(rc->c->errstr),
				 "no reply: timed out after %g s",
				 rc->timeout_ms / 1000.0);
		else if (!rc->c->err)
			rd_broken(rc, "no reply", 0);
		return NULL;
	}
	return reply;
}

redisReply *rd_command_argv(struct rd_conn *rc, const char **argv,
			    const size_t *lens)
{
	if (rd_send_cmds(rc, 1, &argv, &lens))
		return NULL;
	return rd_recv_reply(rc);
}

/* A command of C-string arguments (no binary data), NULL-terminated. */
redisReply *rd_command(struct rd_conn *rc, const char **argv)
{
	size_t lens[8];

	for (int i = 0; argv[i] && i < 8; i++)
		lens[i] = strlen(argv[i]);
	return rd_command_argv(rc, argv, lens);
}

/* ---- nodes and their connection pools ---------------------------------- */

static void conn_free(struct rd_conn *rc)
{
	if (rc->ssl)
		rd_tls_free(rc);
	if (rc->c)
		redisFree(rc->c);
	free(rc);
}

/* A hint when a plain connection's first command got no reply because
 * the port speaks TLS: the server closes at once, or answers with a TLS
 * alert record (first byte 0x15), which hiredis calls a protocol error. */
static const char *plain_to_tls(const struct rd_node *n,
				const struct rd_conn *rc)
{
	const char *e = rc->c->errstr;

	if (rc->ssl || n->path)
		return "";
	if (strstr(e, "closed") || strstr(e, "\\x15") ||
	    strstr(e, "reset by peer"))
		return " (a TLS port? use rediss://)";
	return "";
}

/* One setup command on a fresh connection; 0 or an error code (with
 * rc->lost set when the connection was lost before its reply). */
static int setup_cmd(struct rd_node *n, struct rd_conn *rc, const char **argv,
		     int is_auth)
{
	redisReply *r = rd_command(rc, argv);
	int code = 0;

	rc->lost = !r;
	if (!r)
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot connect to redis at %s: %s%s",
				   n->name, rc->c->errstr, plain_to_tls(n, rc));
	if (r->type == REDIS_REPLY_ERROR) {
		if (is_auth || !strncmp(r->str, "NOAUTH", 6)) {
			__atomic_store_n(&n->auth_failed, 1, __ATOMIC_RELAXED);
			code = wstore__err(
				WSTORE_EUNAVAIL,
				"cannot connect to redis at %s: authentication failed (%s)",
				n->name,
				is_auth ? r->str
					: "the server needs a password: set redis_password");
		} else {
			code = wstore__err(WSTORE_EUNAVAIL,
					   "cannot use redis at %s: %s",
					   n->name, r->str);
		}
	}
	freeReplyObject(r);
	return code;
}

/* Ask the server its proto-max-bulk-len, once per node; a server that
 * refuses CONFIG just leaves it unknown. */
static void probe_max_bulk(struct rd_node *n, struct rd_conn *rc)
{
	const char *argv[] = { "CONFIG", "GET", "proto-max-bulk-len", NULL };
	redisReply *r = rd_command(rc, argv);

	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[1]->type == REDIS_REPLY_STRING)
		__atomic_store_n(&n->max_bulk,
				 strtoull(r->element[1]->str, NULL, 10),
				 __ATOMIC_RELAXED);
	__atomic_store_n(&n->probed, 1, __ATOMIC_RELAXED);
	freeReplyObject(r);
}

static int conn_open(struct rd_node *n, struct rd_conn **out, int *lost)
{
	const struct rd_opts *o = n->opts;
	struct rd_conn *rc = calloc(1, sizeof(*rc));
	char db[16];
	const char *auth[] = { "AUTH", o->user, o->password, NULL };
	const char *sel[] = { "SELECT", db, NULL }, *ping[] = { "PING", NULL };
	int r = 0;

	if (!rc)
		return wstore__errc(-ENOMEM, "cannot connect to redis at %s",
				    n->name);
	if (n->path)
		rc->c = redisConnectUnixWithTimeout(n->path,
						    ms_tv(o->connect_ms));
	else
		rc->c = redisConnectWithTimeout(n->host, n->port,
						ms_tv(o->connect_ms));
	if (!rc->c || rc->c->err) {
		r = wstore__err(WSTORE_EUNAVAIL,
				"cannot connect to redis at %s: %s", n->name,
				rc->c ? rc->c->errstr : "out of memory");
		goto fail;
	}
	if (o->tls) {
		rc->timeout_ms = o->connect_ms; /* the handshake's bound */
		if ((r = rd_tls_start(n, rc)))
			goto fail;
	}
	redisSetTimeout(rc->c, ms_tv(o->command_ms));
	rc->timeout_ms = o->command_ms;
	if (!n->path)
		redisEnableKeepAlive(rc->c);
	if (!o->user) {
		auth[1] = o->password;
		auth[2] = NULL;
	}
	snprintf(db, sizeof(db), "%d", o->db);
	if (o->password && (r = setup_cmd(n, rc, auth, 1)))
		goto fail;
	if (o->db && (r = setup_cmd(n, rc, sel, 0)))
		goto fail;
	if (!o->password && !o->db && (r = setup_cmd(n, rc, ping, 0)))
		goto fail;
	if (!__atomic_load_n(&n->probed, __ATOMIC_RELAXED))
		probe_max_bulk(n, rc);
	*out = rc;
	return 0;
fail:
	*lost = rc->lost;
	conn_free(rc);
	return r;
}

int rd_node_new(struct rd_node **out, const char *host, int port,
		const char *path, const struct rd_opts *o)
{
	struct rd_node *n = calloc(1, sizeof(*n));

	if (!n)
		return wstore__errc(-ENOMEM, "cannot set up redis backend");
	n->host = host ? strdup(host) : NULL;
	n->path = path ? strdup(path) : NULL;
	if ((host && !n->host) || (path && !n->path)) {
		free(n->host);
		free(n);
		return wstore__errc(-ENOMEM, "cannot set up redis backend");
	}
	n->port = port;
	n->opts = o;
	if (path)
		snprintf(n->name, sizeof(n->name), "%s", path);
	else
		snprintf(n->name, sizeof(n->name),
			 strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
	pthread_mutex_init(&n->lock, NULL);
	*out = n;
	return 0;
}

/* Close every pooled connection (after one failed, the others to the same
 * server are likely dead too). */
static void node_flush(struct rd_node *n)
{
	struct rd_conn *rc;

	pthread_mutex_lock(&n->lock);
	rc = n->free;
	n->free = NULL;
	n->nfree = 0;
	pthread_mutex_unlock(&n->lock);
	while (rc) {
		struct rd_conn *next = rc->next;

		conn_free(rc);
		rc = next;
	}
}

void rd_node_free(struct rd_node *n)
{
	if (!n)
		return;
	node_flush(n);
	pthread_mutex_destroy(&n->lock);
	free(n->host);
	free(n->path);
	free(n);
}

int rd_node_take(struct rd_node *n, struct rd_conn **out, int *reused)
{
	pthread_mutex_lock(&n->lock);
	*out = n->free;
	if (*out) {
		n->free = (*out)->next;
		n->nfree--;
	}
	pthread_mutex_unlock(&n->lock);
	*reused = *out != NULL;
	if (*out)
		return 0;
	/* a connection that was made and then lost before its setup
	 * commands were answered (a proxy or a flaky link cutting it) is
	 * made again a few times: no command of the caller went out yet.
	 * A refused or timed-out connect is the caller's to retry. */
	for (int tries = 0;; tries++) {
		int lost = 0, r = conn_open(n, out, &lost);

		if (!r || !lost || tries >= 4 || wstore__interrupted())
			return r;
		rd_backoff(tries + 1);
	}
}

void rd_node_give(struct rd_node *n, struct rd_conn *rc, int is_broken)
{
	if (is_broken || rc->c->err) {
		conn_free(rc);
		if (is_broken)
			node_flush(n);
		return;
	}
	pthread_mutex_lock(&n->lock);
	rc->next = n->free;
	n->free = rc;
	n->nfree++;
	pthread_mutex_unlock(&n->lock);
}

/* Read exactly the bytes iov describes (iov is modified). */
static int read_iov(struct rd_conn *rc, struct iovec *iov, int n)
{
	for (;;) {
		ssize_t k;

		while (n > 0 && iov->iov_len == 0) {
			iov++;
			n--;
		}
		if (n == 0)
			return 0;
		if (rc->ssl) {
			if ((k = rd_tls_read(rc, iov->iov_base, iov->iov_len)) <
			    0)
				return -1;
		} else {
			if (wait_readable(rc) < 0)
				return -1;
			k = readv(rc->c->fd, iov, n);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				return rd_broken(
					rc,
					k ? "read failed"
					  : "connection closed by server",
					k ? errno : 0);
		}
		while (n > 0 && (size_t)k >= iov->iov_len) {
			k -= iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + k;
			iov->iov_len -= k;
		}
	}
}

/* Drop the rest of a bulk that does not fit the caller's buffer: read it
 * away if small, else close the connection rather than read megabytes.
 * 0, or -1 with the connection broken. */
static int skip_bulk(struct rd_conn *rc, size_t left)
{
	char junk[16384];

	if (left > (1u << 20))
		return rd_broken(rc, "dropped an oversized reply", 0);
	while (left > 0) {
		struct iovec iov = { junk, left < sizeof(junk) ? left
							       : sizeof(junk) };

		if (read_iov(rc, &iov, 1))
			return -1;
		left -= sizeof(junk) < left ? sizeof(junk) : left;
	}
	return 0;
}

/* The CRLF that ends a bulk reply, of which crlf[0..have) was read with
 * the line before it (have <= 2) and the rest is read now into crlf.
 * 0, or -1 with the connection broken (read failed, or not CRLF: the
 * reply is not what its length said). */
static int end_bulk(struct rd_conn *rc, char crlf[2], size_t have)
{
	struct iovec iov = { crlf + have, 2 - have };

	if (read_iov(rc, &iov, 1))
		return -1;
	if (memcmp(crlf, "\r\n", 2) != 0)
		return rd_broken(
			rc, "protocol error: bulk reply not ended by CRLF", 0);
	return 0;
}

/* A "-error" or "$len" line read into h (hl bytes, ending at eol).  0 with
 * *len (-1: nil), RD_REPLY_ERR or RD_CONN_ERR. */
static int bulk_header(struct rd_conn *rc, struct rd_req *req, char *h,
		       char *eol, long long *len)
{
	char *end;

	*eol = '\0';
	if (h[0] == '-') {
		snprintf(req->err, sizeof(req->err), "%.200s", h + 1);
		return RD_REPLY_ERR;
	}
	errno = 0;
	*len = strtoll(h + 1, &end, 10);
	if (h[0] != '$' || *end || errno || *len < -1) {
		rd_broken(rc, "protocol error: unexpected reply", 0);
		return rd_conn_err(req, rc);
	}
	return 0;
}

/*
 * Read a bulk string reply straight into buf.  0 with *out_n = its size
 * (*nil = 1 for a nil reply); WSTORE_ERANGE with *out_n set when it is
 * larger than cap; RD_REPLY_ERR or RD_CONN_ERR.  Needs hiredis' reader to
 * hold no buffered bytes, which holds as every reply is read whole.  One
 * command gets one reply: a byte after its CRLF, or a reply not ended by
 * CRLF, breaks the connection.
 */
int rd_read_bulk(struct rd_conn *rc, struct rd_req *req, void *buf, size_t cap,
		 size_t *out_n, int *nil)
{
	char h[512], *eol = NULL, *body;
	size_t hl = 0, extra, n, got, tail;
	long long len = 0;
	char crlf[2];
	struct iovec iov[2];
	ssize_t k;
	int r;

	*nil = 0;
	req->landed = 0;
	req->bulk = -1;
	while (!eol) {
		if (hl == sizeof(h) - 1) {
			rd_broken(rc, "protocol error: reply line too long", 0);
			return rd_conn_err(req, rc);
		}
		if ((k = conn_read(rc, h + hl, sizeof(h) - 1 - hl)) < 0)
			return rd_conn_err(req, rc);
		hl += (size_t)k;
		eol = memmem(h, hl, "\r\n", 2);
	}
	if ((r = bulk_header(rc, req, h, eol, &len)))
		return r;
	if (len < 0) {
		*nil = 1;
		return 0;
	}
	n = (size_t)len;
	*out_n = n;
	body = eol + 2;
	extra = hl - (size_t)(body - h); /* bytes of the body read already */
	if (extra > n + 2) {
		rd_broken(rc,
			  "protocol error: the server sent more than the reply",
			  0);
		return rd_conn_err(req, rc);
	}
	got = extra < n ? extra : n;
	tail = extra - got; /* bytes of the CRLF read already: 0 to 2 */
	memcpy(crlf, body + got, tail);
	if (n > cap) {
		if (skip_bulk(rc, n - got) == 0)
			end_bulk(rc, crlf, tail);
		return wstore__err(
			WSTORE_ERANGE,
			"value of '%s' (%zu bytes) is larger than the buffer (%zu bytes)",
			req->lkey, n, cap);
	}
	memcpy(buf, body, got);
	iov[0] = (struct iovec){ (char *)buf + got, n - got };
	iov[1] = (struct iovec){ crlf + tail, 2 - tail };
	req->bulk = len;
	if (read_iov(rc, iov, 2)) {
		/* read_iov moved iov[0] past what it filled */
		req->landed = n - iov[0].iov_len;
		return rd_conn_err(req, rc);
	}
	if (memcmp(crlf, "\r\n", 2) != 0) {
		rd_broken(rc, "protocol error: bulk reply not ended by CRLF",
			  0);
		return rd_conn_err(req, rc);
	}
	return 0;
}

/* Send a command whose reply is a bulk string and read it into buf. */
int rd_parse_hostport(const char *s, size_t n, char **host, int *port)
{
	const char *h = s, *colon = NULL;
	size_t hl = n;
	char *end;
	long p = 6379;

	if (n && s[0] == '[') {
		const char *rb = memchr(s, ']', n);

		if (!rb || (rb + 1 < s + n && rb[1] != ':'))
			return wstore__err(WSTORE_EINVAL,
					   "invalid redis URL: bad host");
		h = s + 1;
		hl = (size_t)(rb - h);
		colon = rb + 1 < s + n ? rb + 1 : NULL;
	} else if ((colon = memchr(s, ':', n))) {
		hl = (size_t)(colon - s);
	}
	if (colon) {
		p = strtol(colon + 1, &end, 10);
		if (end != s + n || end == colon + 1 || p < 1 || p > 65535)
			return wstore__err(WSTORE_EINVAL,
					   "invalid redis URL: bad port");
	}
	if (!hl)
		return wstore__err(WSTORE_EINVAL, "invalid redis URL: no host");
	if (!(*host = strndup(h, hl)))
		return wstore__errc(-ENOMEM, "redis URL");
	*port = (int)p;
	return 0;
}

/* "user:password@" (either part may be empty) ending at at. */
