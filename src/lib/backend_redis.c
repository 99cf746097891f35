/*
 * backend_redis.c - the Redis backend: standalone servers over TCP or a
 * unix socket, and the connection and command layer that redis_cluster.c
 * routes through (read redis_proto.h first).
 *
 * Each logical key is one Redis string named prefix + key.  put is SET,
 * put_new SET NX, get GET, get_range GETRANGE, size STRLEN + EXISTS,
 * remove DEL, list SCAN MATCH, update a WATCH / GET / MULTI / SET / EXEC
 * loop that retries when another client touched the key.
 *
 * Connections: every node keeps a free list of connections under a mutex;
 * a call takes one (or opens one), uses it alone and gives it back, so
 * worker threads run their commands in parallel.  A connection that saw an
 * I/O or protocol error is closed, never pooled.
 *
 * Big values do not go through hiredis' buffers: SET is written with one
 * sendmsg() whose iovec points at the caller's bytes, and the bulk reply of
 * GET / GETRANGE is read() straight into the caller's buffer (hiredis 0.14
 * would grow a reply buffer and copy it again).  hiredis still formats the
 * small commands and parses the small replies.  Every write goes through
 * sendmsg(MSG_NOSIGNAL), so a dead server is an error, never a SIGPIPE.
 *
 * Passwords live only in struct rd_opts; messages name servers as
 * host:port (or the socket path) and never echo the URL.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "redis_proto.h"

struct redis_backend {
	wstore_backend base;
	struct rd_opts opts;
	char *prefix;		/* key_prefix, "" when none */
	size_t plen;
	struct rd_node *node;	/* standalone */
	struct rd_cluster *cl;	/* cluster */
	char *seeds;		/* cluster: "host:port,..." from the URL */
};

static const char *const op_names[] = {
	[RD_PUT] = "put", [RD_PUT_NEW] = "put", [RD_GET] = "get",
	[RD_GET_RANGE] = "get", [RD_SIZE] = "size", [RD_REMOVE] = "remove",
	[RD_UPDATE] = "update",
};

int64_t rd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rd_backoff(int attempt)
{
	long ms = attempt < 7 ? 5L << attempt : 500;
	struct timespec ts;

	ms += rand() % (ms / 2 + 1);	/* jitter: spread retrying clients */
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000;
	nanosleep(&ts, NULL);
}

static struct timeval ms_tv(int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	return tv;
}

/* ---- I/O on one connection --------------------------------------------- */

/* Mark a connection broken (rd_node_give then closes it); returns -1. */
static int broken(struct rd_conn *rc, const char *what, int err)
{
	rc->c->err = REDIS_ERR_IO;
	if (err == EAGAIN || err == EWOULDBLOCK)
		snprintf(rc->c->errstr, sizeof(rc->c->errstr),
			 "%s: timed out", what);
	else if (err)
		snprintf(rc->c->errstr, sizeof(rc->c->errstr), "%s: %s",
			 what, strerror(err));
	else
		snprintf(rc->c->errstr, sizeof(rc->c->errstr), "%s", what);
	return -1;
}

/* Send all of iov (modified).  0, or -1 with the connection broken. */
static int send_iov(struct rd_conn *rc, struct iovec *iov, int n)
{
	while (n > 0) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = n };
		ssize_t w = sendmsg(rc->c->fd, &m, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return broken(rc, "write failed", errno);
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
static int send_cmds(struct rd_conn *rc, int ncmd, const char **argv[],
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
			return broken(rc, "out of memory", ENOMEM);
		}
		iov[i].iov_base = cmd[i];
		iov[i].iov_len = (size_t)len;
	}
	r = send_iov(rc, iov, ncmd);
	for (i = 0; i < ncmd; i++)
		redisFreeCommand(cmd[i]);
	return r;
}

/* Next reply, or NULL with the connection broken. */
static redisReply *recv_reply(struct rd_conn *rc)
{
	void *reply = NULL;

	if (redisGetReply(rc->c, &reply) != REDIS_OK || !reply) {
		if (!rc->c->err)
			broken(rc, "no reply", 0);
		return NULL;
	}
	return reply;
}

static redisReply *command(struct rd_conn *rc, const char **argv,
			   const size_t *lens)
{
	if (send_cmds(rc, 1, &argv, &lens))
		return NULL;
	return recv_reply(rc);
}

/* A command of C-string arguments (no binary data), NULL-terminated. */
redisReply *rd_command(struct rd_conn *rc, const char **argv)
{
	size_t lens[8];

	for (int i = 0; argv[i] && i < 8; i++)
		lens[i] = strlen(argv[i]);
	return command(rc, argv, lens);
}

/* ---- nodes and their connection pools ---------------------------------- */

/* One setup command on a fresh connection; 0 or an error code. */
static int setup_cmd(struct rd_node *n, struct rd_conn *rc,
		     const char **argv, int is_auth)
{
	redisReply *r = rd_command(rc, argv);
	int code = 0;

	if (!r)
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot connect to redis at %s: %s",
				   n->name, rc->c->errstr);
	if (r->type == REDIS_REPLY_ERROR) {
		if (is_auth || !strncmp(r->str, "NOAUTH", 6)) {
			n->auth_failed = 1;
			code = wstore__err(WSTORE_EUNAVAIL,
					   "cannot connect to redis at %s: authentication failed (%s)",
					   n->name, is_auth ? r->str :
					   "the server needs a password: set redis_password");
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
		n->max_bulk = strtoull(r->element[1]->str, NULL, 10);
	n->probed = 1;
	freeReplyObject(r);
}

static int conn_open(struct rd_node *n, struct rd_conn **out)
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
	redisSetTimeout(rc->c, ms_tv(o->command_ms));
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
	if (!n->probed)
		probe_max_bulk(n, rc);
	*out = rc;
	return 0;
fail:
	if (rc->c)
		redisFree(rc->c);
	free(rc);
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
		snprintf(n->name, sizeof(n->name), strchr(host, ':') ?
			 "[%s]:%d" : "%s:%d", host, port);
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

		redisFree(rc->c);
		free(rc);
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
	return conn_open(n, out);
}

void rd_node_give(struct rd_node *n, struct rd_conn *rc, int is_broken)
{
	if (is_broken || rc->c->err) {
		redisFree(rc->c);
		free(rc);
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

/* ---- commands ------------------------------------------------------------ */

/* Copy a server error reply into req->err; returns RD_REPLY_ERR. */
static int reply_err(struct rd_req *req, const redisReply *r)
{
	snprintf(req->err, sizeof(req->err), "%s", r->str);
	return RD_REPLY_ERR;
}

static int conn_err(struct rd_req *req, const struct rd_conn *rc)
{
	snprintf(req->err, sizeof(req->err), "%s", rc->c->errstr);
	return RD_CONN_ERR;
}

/* SET key value [NX], the value sent from the caller's memory. */
static int op_put(struct rd_conn *rc, struct rd_req *req)
{
	char head[64], mid[32];
	static const char crlf[] = "\r\n", nx[] = "\r\n$2\r\nNX\r\n";
	int nx_ = req->op == RD_PUT_NEW;
	struct iovec iov[5] = {
		{ head, (size_t)snprintf(head, sizeof(head),
					 "*%d\r\n$3\r\nSET\r\n$%zu\r\n",
					 nx_ ? 4 : 3, req->klen) },
		{ (void *)req->key, req->klen },
		{ mid, (size_t)snprintf(mid, sizeof(mid), "\r\n$%zu\r\n",
					req->len) },
		{ (void *)req->data, req->len },
		{ (void *)(nx_ ? nx : crlf), nx_ ? sizeof(nx) - 1 : 2 },
	};
	redisReply *r;
	int code = 0;

	if (send_iov(rc, iov, 5)) {
		/* a server refusing an over-long bulk says why, then closes */
		char buf[200];
		ssize_t k = recv(rc->c->fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

		if (k > 1 && buf[0] == '-') {
			buf[k] = '\0';
			buf[strcspn(buf, "\r\n")] = '\0';
			snprintf(req->err, sizeof(req->err), "%s", buf + 1);
			return RD_REPLY_ERR;
		}
		return conn_err(req, rc);
	}
	if (!(r = recv_reply(rc)))
		return conn_err(req, rc);
	if (r->type == REDIS_REPLY_ERROR)
		code = reply_err(req, r);
	else if (r->type == REDIS_REPLY_NIL)
		code = wstore__err(WSTORE_EEXISTS, "'%s' already exists",
				   req->lkey);
	freeReplyObject(r);
	return code;
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
		k = readv(rc->c->fd, iov, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return broken(rc, k ? "read failed" :
				      "connection closed by server",
				      k ? errno : 0);
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
 * away if small, else close the connection rather than read megabytes. */
static void skip_bulk(struct rd_conn *rc, size_t left)
{
	char junk[16384];

	if (left > (1u << 20)) {
		broken(rc, "dropped an oversized reply", 0);
		return;
	}
	while (left > 0) {
		struct iovec iov = { junk, left < sizeof(junk) ?
				     left : sizeof(junk) };

		if (read_iov(rc, &iov, 1))
			return;
		left -= sizeof(junk) < left ? sizeof(junk) : left;
	}
}

/*
 * Read a bulk string reply straight into buf.  0 with *out_n = its size
 * (*nil = 1 for a nil reply); WSTORE_ERANGE with *out_n set when it is
 * larger than cap; RD_REPLY_ERR or RD_CONN_ERR.  Needs hiredis' reader to
 * hold no buffered bytes, which holds as every reply is read whole.
 */
static int read_bulk(struct rd_conn *rc, struct rd_req *req, void *buf,
		     size_t cap, size_t *out_n, int *nil)
{
	char h[512], *eol = NULL, *end;
	size_t hl = 0, extra, n, tail;
	char crlf[2];
	struct iovec iov[2];
	ssize_t k;

	*nil = 0;
	while (!eol) {
		if (hl == sizeof(h) - 1) {
			broken(rc, "protocol error: reply line too long", 0);
			return conn_err(req, rc);
		}
		k = read(rc->c->fd, h + hl, sizeof(h) - 1 - hl);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			broken(rc, k ? "read failed" :
			       "connection closed by server", k ? errno : 0);
			return conn_err(req, rc);
		}
		hl += (size_t)k;
		eol = memmem(h, hl, "\r\n", 2);
	}
	*eol = '\0';
	if (h[0] == '-') {
		snprintf(req->err, sizeof(req->err), "%.200s", h + 1);
		return RD_REPLY_ERR;
	}
	errno = 0;
	long long len = strtoll(h + 1, &end, 10);
	if (h[0] != '$' || *end || errno || len < -1) {
		broken(rc, "protocol error: unexpected reply", 0);
		return conn_err(req, rc);
	}
	if (len < 0) {
		*nil = 1;
		return 0;
	}
	n = (size_t)len;
	*out_n = n;
	extra = hl - (size_t)(eol + 2 - h);
	if (n > cap) {
		skip_bulk(rc, n + 2 - extra);
		return wstore__err(WSTORE_ERANGE,
				   "value of '%s' (%zu bytes) is larger than the buffer (%zu bytes)",
				   req->lkey, n, cap);
	}
	memcpy(buf, eol + 2, extra < n ? extra : n);
	tail = extra > n ? extra - n : 0;	/* CRLF bytes already read */
	iov[0] = (struct iovec){ (char *)buf + (extra < n ? extra : n),
				 extra < n ? n - extra : 0 };
	iov[1] = (struct iovec){ crlf + tail, 2 - tail };
	if (read_iov(rc, iov, 2))
		return conn_err(req, rc);
	return 0;
}

/* Send a command whose reply is a bulk string and read it into buf. */
static int bulk_cmd(struct rd_conn *rc, struct rd_req *req, const char **argv,
		    const size_t *lens, void *buf, size_t cap, size_t *out_n,
		    int *nil)
{
	redisReader *rd = rc->c->reader;

	if (rd->buf && rd->len > rd->pos) {
		broken(rc, "protocol error: unread reply data", 0);
		return conn_err(req, rc);
	}
	if (send_cmds(rc, 1, &argv, &lens))
		return conn_err(req, rc);
	return read_bulk(rc, req, buf, cap, out_n, nil);
}

/* An integer-reply command on the key: "DEL", "EXISTS", "STRLEN". */
static int int_cmd(struct rd_conn *rc, struct rd_req *req, const char *cmd,
		   long long *out)
{
	const char *argv[] = { cmd, req->key, NULL };
	size_t lens[] = { strlen(cmd), req->klen };
	redisReply *r = command(rc, argv, lens);
	int code = 0;

	if (!r)
		return conn_err(req, rc);
	if (r->type == REDIS_REPLY_ERROR)
		code = reply_err(req, r);
	else if (r->type != REDIS_REPLY_INTEGER)
		code = wstore__err(-EPROTO, "redis: unexpected reply to %s '%s'",
				   cmd, req->lkey);
	else
		*out = r->integer;
	freeReplyObject(r);
	return code;
}

static int not_found(struct rd_req *req)
{
	return wstore__err(WSTORE_ENOTFOUND, "'%s' not found", req->lkey);
}

static int op_get(struct rd_conn *rc, struct rd_req *req)
{
	const char *argv[] = { "GET", req->key, NULL };
	size_t lens[] = { 3, req->klen };
	int nil, r;

	r = bulk_cmd(rc, req, argv, lens, req->buf, req->cap, req->out_len,
		     &nil);
	return r == 0 && nil ? not_found(req) : r;
}

/* GETRANGE; an empty answer is also what a missing key gives, so only
 * then ask EXISTS. */
static int op_get_range(struct rd_conn *rc, struct rd_req *req)
{
	char a[24], z[24];
	const char *argv[] = { "GETRANGE", req->key, a, z, NULL };
	size_t lens[] = { 8, req->klen, 0, 0 };
	uint64_t last = req->off + req->len - 1;
	long long ex;
	int nil, r;

	*req->out_len = 0;
	if (req->off > INT64_MAX)
		req->off = INT64_MAX;
	if (last > INT64_MAX || last < req->off)
		last = INT64_MAX;
	lens[2] = (size_t)snprintf(a, sizeof(a), "%" PRIu64, req->off);
	lens[3] = (size_t)snprintf(z, sizeof(z), "%" PRIu64, last);
	if (req->len > 0) {
		r = bulk_cmd(rc, req, argv, lens, req->buf, req->len,
			     req->out_len, &nil);
		if (r || *req->out_len > 0)
			return r;
	}
	if ((r = int_cmd(rc, req, "EXISTS", &ex)))
		return r;
	return ex ? 0 : not_found(req);
}

static int op_size(struct rd_conn *rc, struct rd_req *req)
{
	long long len, ex;
	int r = int_cmd(rc, req, "STRLEN", &len);

	if (r)
		return r;
	if (len == 0) {
		if ((r = int_cmd(rc, req, "EXISTS", &ex)))
			return r;
		if (!ex)
			return not_found(req);
	}
	*req->out_size = (uint64_t)len;
	return 0;
}

static int op_remove(struct rd_conn *rc, struct rd_req *req)
{
	long long n;
	int r = int_cmd(rc, req, "DEL", &n);

	return r ? r : n == 0 ? not_found(req) : 0;
}

#define RD_RETRY 3		/* update: EXEC saw a concurrent change */

static void unwatch(struct rd_conn *rc)
{
	const char *argv[] = { "UNWATCH", NULL };

	freeReplyObject(rd_command(rc, argv));
}

/* Read n replies into r[]; returns the index of the first error reply or
 * n; -1 when the connection broke (replies freed). */
static int recv_n(struct rd_conn *rc, redisReply **r, int n)
{
	int first = n;

	for (int i = 0; i < n; i++) {
		if (!(r[i] = recv_reply(rc))) {
			while (i-- > 0)
				freeReplyObject(r[i]);
			return -1;
		}
		if (r[i]->type == REDIS_REPLY_ERROR && first == n)
			first = i;
	}
	return first;
}

static void free_n(redisReply **r, int n)
{
	for (int i = 0; i < n; i++)
		freeReplyObject(r[i]);
}

/* MULTI / SET / EXEC of the new value: 0, RD_RETRY, or an error. */
static int update_exec(struct rd_conn *rc, struct rd_req *req,
		       const void *val, size_t len)
{
	const char *m[] = { "MULTI", NULL }, *x[] = { "EXEC", NULL };
	const char *s[] = { "SET", req->key, val, NULL };
	const size_t ml[] = { 5 }, xl[] = { 4 }, sl[] = { 3, req->klen, len };
	const char **argv[] = { m, s, x };
	const size_t *lens[] = { ml, sl, xl };
	redisReply *r[3];
	int e, code = 0;

	if (send_cmds(rc, 3, argv, lens) || (e = recv_n(rc, r, 3)) < 0)
		return conn_err(req, rc);
	if (e < 3)
		code = reply_err(req, r[e]);
	else if (r[2]->type == REDIS_REPLY_NIL)
		code = RD_RETRY;
	else if (r[2]->type != REDIS_REPLY_ARRAY)
		code = wstore__err(-EPROTO, "redis: unexpected EXEC reply for '%s'",
				   req->lkey);
	free_n(r, 3);
	return code;
}

static int update_once(struct rd_conn *rc, struct rd_req *req)
{
	const char *w[] = { "WATCH", req->key, NULL };
	const char *g[] = { "GET", req->key, NULL };
	const size_t wl[] = { 5, req->klen }, gl[] = { 3, req->klen };
	const char **argv[] = { w, g };
	const size_t *lens[] = { wl, gl };
	redisReply *r[2];
	void *nv = NULL;
	size_t nlen = 0;
	int e, code;

	if (send_cmds(rc, 2, argv, lens) || (e = recv_n(rc, r, 2)) < 0)
		return conn_err(req, rc);
	if (e < 2 || (r[1]->type != REDIS_REPLY_STRING &&
		      r[1]->type != REDIS_REPLY_NIL)) {
		code = e < 2 ? reply_err(req, r[e]) :
		       wstore__err(WSTORE_ECORRUPT, "'%s' is not a string",
				   req->lkey);
		free_n(r, 2);
		unwatch(rc);
		return code;
	}
	code = r[1]->type == REDIS_REPLY_NIL ?
	       req->fn(&nv, &nlen, NULL, 0, req->ctx) :
	       req->fn(&nv, &nlen, r[1]->str, r[1]->len, req->ctx);
	free_n(r, 2);
	if (code) {
		free(nv);
		unwatch(rc);
		return code > 0 ? 0 : code;
	}
	code = update_exec(rc, req, nv ? nv : "", nlen);
	free(nv);
	return code;
}

/* Optimistic read-modify-write: retried until no one else wrote the key
 * between WATCH and EXEC, for up to command_timeout_ms. */
static int op_update(struct rd_node *n, struct rd_conn *rc,
		     struct rd_req *req)
{
	int64_t deadline = rd_now_ms() + n->opts->command_ms;

	for (int attempt = 0;; attempt++) {
		int r = update_once(rc, req);

		if (r != RD_RETRY)
			return r;
		if (rd_now_ms() > deadline)
			return wstore__err(WSTORE_EBUSY,
					   "redis at %s: update of '%s' kept conflicting with other writers",
					   n->name, req->lkey);
		if (attempt > 0)
			rd_backoff(attempt < 4 ? 0 : attempt - 4);
	}
}

int rd_do(struct rd_node *n, struct rd_conn *rc, struct rd_req *req)
{
	switch (req->op) {
	case RD_PUT:
	case RD_PUT_NEW:
		if (n->max_bulk && req->len > n->max_bulk)
			return wstore__err(-EFBIG,
					   "redis at %s: value of '%s' (%zu bytes) is over proto-max-bulk-len (%" PRIu64 " bytes)",
					   n->name, req->lkey, req->len,
					   n->max_bulk);
		return op_put(rc, req);
	case RD_GET:
		return op_get(rc, req);
	case RD_GET_RANGE:
		return op_get_range(rc, req);
	case RD_SIZE:
		return op_size(rc, req);
	case RD_REMOVE:
		return op_remove(rc, req);
	case RD_UPDATE:
		return op_update(n, rc, req);
	}
	return wstore__err(WSTORE_EINVAL, "redis: bad operation");
}

static int starts(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

int rd_fail(struct rd_node *n, struct rd_req *req, int rc)
{
	const char *e = req->err, *op = op_names[req->op];

	if (rc == RD_CONN_ERR)
		return wstore__err(WSTORE_EUNAVAIL,
				   "lost connection to redis at %s during %s of '%s': %s",
				   n->name, op, req->lkey, e);
	if (starts(e, "OOM"))
		return wstore__err(-ENOSPC,
				   "redis at %s: out of memory (maxmemory) writing '%s'",
				   n->name, req->lkey);
	if (starts(e, "NOAUTH") || starts(e, "WRONGPASS"))
		return wstore__err(WSTORE_EUNAVAIL,
				   "redis at %s: authentication failed", n->name);
	if (strstr(e, "invalid bulk length"))
		return wstore__err(-EFBIG,
				   "redis at %s: value of '%s' (%zu bytes) is over proto-max-bulk-len",
				   n->name, req->lkey, req->len);
	if (starts(e, "CLUSTERDOWN"))
		return wstore__err(WSTORE_EUNAVAIL,
				   "redis cluster is down (%s during %s of '%s'): %s",
				   n->name, op, req->lkey, e);
	if (starts(e, "MOVED") || starts(e, "ASK"))
		return wstore__err(WSTORE_EUNAVAIL,
				   "redis at %s redirected '%s' (%s): use a redis-cluster:// URL for a cluster",
				   n->name, req->lkey, e);
	if (starts(e, "WRONGTYPE"))
		return wstore__err(WSTORE_ECORRUPT,
				   "redis at %s: '%s' is not a string", n->name,
				   req->lkey);
	if (starts(e, "READONLY") || starts(e, "LOADING") ||
	    starts(e, "MASTERDOWN") || starts(e, "TRYAGAIN"))
		return wstore__err(WSTORE_EUNAVAIL,
				   "redis at %s cannot serve %s of '%s': %s",
				   n->name, op, req->lkey, e);
	return wstore__err(-EIO, "redis at %s: %s of '%s' failed: %s",
			   n->name, op, req->lkey, e);
}

/* One SCAN pass.  A stale pooled connection is retried once, before any
 * key was reported. */
int rd_scan(struct rd_node *n, const char *pattern, size_t skip,
	    wstore_list_fn fn, void *ctx)
{
	char cursor[32] = "0";
	struct rd_conn *rc;
	int reused, r, first = 1;

	if ((r = rd_node_take(n, &rc, &reused)))
		return r;
	for (;;) {
		const char *argv[] = { "SCAN", cursor, "MATCH", pattern,
				       "COUNT", "1000", NULL };
		redisReply *rep = rd_command(rc, argv), *keys;

		if (!rep && first && reused) {
			rd_node_give(n, rc, 1);
			if ((r = rd_node_take(n, &rc, &reused)))
				return r;
			continue;
		}
		first = 0;
		if (!rep) {
			r = wstore__err(WSTORE_EUNAVAIL,
					"lost connection to redis at %s during list: %s",
					n->name, rc->c->errstr);
			break;
		}
		if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
		    rep->element[0]->type != REDIS_REPLY_STRING ||
		    rep->element[1]->type != REDIS_REPLY_ARRAY) {
			r = wstore__err(-EIO, "redis at %s: list failed: %s",
					n->name, rep->type == REDIS_REPLY_ERROR ?
					rep->str : "unexpected reply");
			freeReplyObject(rep);
			break;
		}
		snprintf(cursor, sizeof(cursor), "%s", rep->element[0]->str);
		keys = rep->element[1];
		for (size_t i = 0; !r && i < keys->elements; i++)
			if (keys->element[i]->type == REDIS_REPLY_STRING &&
			    keys->element[i]->len >= skip)
				r = fn(keys->element[i]->str + skip, ctx);
		freeReplyObject(rep);
		if (r || strcmp(cursor, "0") == 0)
			break;
	}
	rd_node_give(n, rc, 0);
	return r;
}

/* ---- the backend callbacks ----------------------------------------------- */

static int run_node(struct rd_node *n, struct rd_req *req)
{
	for (int attempt = 0;; attempt++) {
		struct rd_conn *rc;
		int reused, r = rd_node_take(n, &rc, &reused);

		if (r)
			return r;
		r = rd_do(n, rc, req);
		rd_node_give(n, rc, r == RD_CONN_ERR);
		/* a pooled connection may have died while idle: once more
		 * on a fresh one */
		if (r == RD_CONN_ERR && reused && attempt == 0)
			continue;
		if (r == RD_REPLY_ERR || r == RD_CONN_ERR)
			return rd_fail(n, req, r);
		return r;
	}
}

/* Prepend the key prefix (if any), run, clean up. */
static int run(wstore_backend *wb, struct rd_req *req, const char *key)
{
	struct redis_backend *b = (struct redis_backend *)wb;
	size_t kl = strlen(key);
	char *full = NULL;
	int r;

	req->lkey = key;
	req->key = key;
	req->klen = kl;
	if (b->plen) {
		if (!(full = malloc(b->plen + kl + 1)))
			return wstore__errc(-ENOMEM, "redis: '%s'", key);
		memcpy(full, b->prefix, b->plen);
		memcpy(full + b->plen, key, kl + 1);
		req->key = full;
		req->klen += b->plen;
	}
	r = b->cl ? rdc_run(b->cl, req) : run_node(b->node, req);
	free(full);
	return r;
}

static int rb_put(wstore_backend *b, const char *key, const void *data,
		  size_t len)
{
	struct rd_req req = { .op = RD_PUT, .data = data, .len = len };

	return run(b, &req, key);
}

static int rb_put_new(wstore_backend *b, const char *key, const void *data,
		      size_t len)
{
	struct rd_req req = { .op = RD_PUT_NEW, .data = data, .len = len };

	return run(b, &req, key);
}

static int rb_get(wstore_backend *b, const char *key, void *buf, size_t cap,
		  size_t *out_len)
{
	struct rd_req req = { .op = RD_GET, .buf = buf, .cap = cap,
			      .out_len = out_len };

	return run(b, &req, key);
}

static int rb_get_range(wstore_backend *b, const char *key, uint64_t off,
			void *buf, size_t len, size_t *out_n)
{
	struct rd_req req = { .op = RD_GET_RANGE, .off = off, .buf = buf,
			      .len = len, .out_len = out_n };

	return run(b, &req, key);
}

static int rb_size(wstore_backend *b, const char *key, uint64_t *out)
{
	struct rd_req req = { .op = RD_SIZE, .out_size = out };

	return run(b, &req, key);
}

static int rb_remove(wstore_backend *b, const char *key, int force)
{
	struct rd_req req = { .op = RD_REMOVE };

	(void)force;		/* Redis has no leases */
	return run(b, &req, key);
}

static int rb_update(wstore_backend *b, const char *key, wstore_update_fn fn,
		     void *ctx)
{
	struct rd_req req = { .op = RD_UPDATE, .fn = fn, .ctx = ctx };

	return run(b, &req, key);
}

/* SCAN MATCH pattern for keys starting with s: glob characters escaped. */
static char *glob_prefix(const char *a, const char *s)
{
	size_t n = strlen(a) + strlen(s);
	char *p = malloc(2 * n + 2), *q = p;

	if (!p)
		return NULL;
	for (const char *src = a; src; src = src == a ? s : NULL)
		for (const char *c = src; *c; c++) {
			if (strchr("*?[]\\", *c))
				*q++ = '\\';
			*q++ = *c;
		}
	*q++ = '*';
	*q = '\0';
	return p;
}

static int rb_list(wstore_backend *wb, const char *prefix, wstore_list_fn fn,
		   void *ctx)
{
	struct redis_backend *b = (struct redis_backend *)wb;
	char *pat = glob_prefix(b->prefix, prefix);
	struct rd_node **nodes = &b->node;
	size_t n = 1;
	int r = 0;

	if (!pat)
		return wstore__errc(-ENOMEM, "redis: cannot list");
	if (b->cl && (r = rdc_masters(b->cl, &nodes, &n))) {
		free(pat);
		return r;
	}
	for (size_t i = 0; !r && i < n; i++)
		r = rd_scan(nodes[i], pat, b->plen, fn, ctx);
	if (b->cl)
		free(nodes);
	free(pat);
	return r;
}

static void rb_free(wstore_backend *wb)
{
	struct redis_backend *b = (struct redis_backend *)wb;

	if (!b)
		return;
	rdc_free(b->cl);
	rd_node_free(b->node);
	if (b->opts.password)
		explicit_bzero(b->opts.password, strlen(b->opts.password));
	free(b->opts.password);
	free(b->opts.user);
	free(b->prefix);
	free(b->seeds);
	free(b);
}

/* ---- URLs and settings --------------------------------------------------- */

static char *pct_decode(const char *s, size_t n)
{
	char *out = malloc(n + 1), *q = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
		    isxdigit((unsigned char)s[i + 2]) &&
		    sscanf(s + i + 1, "%2x", &v) == 1) {
			*q++ = (char)v;
			i += 2;
		} else {
			*q++ = s[i];
		}
	}
	*q = '\0';
	return out;
}

/* "host:port", "[v6]:port" or "host" (port 6379) of n bytes at s. */
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
static int parse_userinfo(struct redis_backend *b, const char *s,
			  const char *at)
{
	const char *colon = memchr(s, ':', (size_t)(at - s));
	const char *ue = colon ? colon : at;

	if (ue > s && !(b->opts.user = pct_decode(s, (size_t)(ue - s))))
		return wstore__errc(-ENOMEM, "redis URL");
	if (colon && at > colon + 1 &&
	    !(b->opts.password = pct_decode(colon + 1,
					    (size_t)(at - colon - 1))))
		return wstore__errc(-ENOMEM, "redis URL");
	return 0;
}

static int parse_db(const char *s, int *db)
{
	char *end;
	long v;

	if (!*s)
		return 0;
	v = strtol(s, &end, 10);
	if (*end || end == s || v < 0 || v > 1000000)
		return wstore__err(WSTORE_EINVAL,
				   "invalid redis URL: bad database number");
	*db = (int)v;
	return 0;
}

static int cfg_ms(const wstore_config *cfg, const char *key, int def,
		  int *out)
{
	const char *v = cfg ? wstore_config_get(cfg, key) : NULL;
	char *end;
	long ms;

	*out = def;
	if (!v || !*v)
		return 0;
	ms = strtol(v, &end, 10);
	if (*end || ms <= 0 || ms > 86400000)
		return wstore__err(WSTORE_EINVAL,
				   "invalid %s '%s': expected milliseconds",
				   key, v);
	*out = (int)ms;
	return 0;
}

static int open_standalone(struct redis_backend *b, const char *rest)
{
	const char *at = strrchr(rest, '@'), *slash;
	char *host = NULL;
	int port, r;

	if (at && (r = parse_userinfo(b, rest, at)))
		return r;
	rest = at ? at + 1 : rest;
	slash = strchr(rest, '/');
	if (slash && (r = parse_db(slash + 1, &b->opts.db)))
		return r;
	r = rd_parse_hostport(rest, slash ? (size_t)(slash - rest) :
			      strlen(rest), &host, &port);
	if (!r)
		r = rd_node_new(&b->node, host, port, NULL, &b->opts);
	free(host);
	return r;
}

static int open_unix(struct redis_backend *b, const char *rest)
{
	const char *at = strstr(rest, "@/"), *q;
	char *path;
	int r;

	if (at && (r = parse_userinfo(b, rest, at)))
		return r;
	rest = at ? at + 1 : rest;
	if (rest[0] != '/')
		return wstore__err(WSTORE_EINVAL,
				   "invalid redis URL: redis+unix:// needs an absolute socket path");
	q = strchr(rest, '?');
	if (q && strncmp(q, "?db=", 4) != 0)
		return wstore__err(WSTORE_EINVAL,
				   "invalid redis URL: only '?db=N' may follow the socket path");
	if (q && (r = parse_db(q + 4, &b->opts.db)))
		return r;
	if (!(path = strndup(rest, q ? (size_t)(q - rest) : strlen(rest))))
		return wstore__errc(-ENOMEM, "redis URL");
	r = rd_node_new(&b->node, NULL, 0, path, &b->opts);
	free(path);
	return r;
}

static int open_cluster(struct redis_backend *b, const char *rest)
{
	const char *at = strrchr(rest, '@');
	int r;

	if (at && (r = parse_userinfo(b, rest, at)))
		return r;
	rest = at ? at + 1 : rest;
	if (strchr(rest, '/'))
		return wstore__err(WSTORE_EINVAL,
				   "invalid redis URL: a cluster has no database number");
	if (!(b->seeds = strdup(rest)))
		return wstore__errc(-ENOMEM, "redis URL");
	return 0;
}

/* Settings from cfg (and $WSTORE_REDIS_PASSWORD when cfg has none). */
static int read_settings(struct redis_backend *b, const wstore_config *cfg)
{
	const char *pw = cfg ? wstore_config_get(cfg, "redis_password") : NULL;
	const char *prefix = cfg ? wstore_config_get(cfg, "key_prefix") : NULL;
	int r;

	if (!pw || !*pw)
		pw = getenv("WSTORE_REDIS_PASSWORD");
	if (!b->opts.password && pw && *pw &&
	    !(b->opts.password = strdup(pw)))
		return wstore__errc(-ENOMEM, "redis settings");
	if (!(b->prefix = strdup(prefix ? prefix : "")))
		return wstore__errc(-ENOMEM, "redis settings");
	b->plen = strlen(b->prefix);
	if ((r = cfg_ms(cfg, "connect_timeout_ms", 5000, &b->opts.connect_ms)))
		return r;
	return cfg_ms(cfg, "command_timeout_ms", 60000, &b->opts.command_ms);
}

/*
 * Keep freed memory in the process.  Big buffers (64 MiB chunks here, in
 * hiredis' reply reader and in the callers' pipelines) would otherwise be
 * mmap()ed and unmapped on every use, and first-touch page faults cost
 * more than the network transfer (docs: MACHINE.md, 15x on Redis GET/SET).
 * Process-wide and done once, when the first Redis store opens.
 */
static void tune_malloc(void)
{
	mallopt(M_MMAP_MAX, 0);
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
	mallopt(M_TOP_PAD, 256 << 20);
}

static void set_callbacks(struct redis_backend *b)
{
	b->base.version = WSTORE_BACKEND_VERSION;
	b->base.name = b->cl ? "redis-cluster" : "redis";
	b->base.flags = WSTORE_BACKEND_UNTRUSTED;
	b->base.put = rb_put;
	b->base.upsert = rb_put;
	b->base.put_new = rb_put_new;
	b->base.get = rb_get;
	b->base.get_range = rb_get_range;
	b->base.size = rb_size;
	b->base.remove = rb_remove;
	b->base.list = rb_list;
	b->base.update = rb_update;
	b->base.free = rb_free;
}

int wstore__backend_redis_open(wstore_backend **out, const char *url,
			       const wstore_config *cfg)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct redis_backend *b = calloc(1, sizeof(*b));
	int r;

	pthread_once(&once, tune_malloc);
	if (!b)
		return wstore__errc(-ENOMEM, "cannot open redis store");
	if (starts(url, "redis://"))
		r = open_standalone(b, url + 8);
	else if (starts(url, "redis+unix://"))
		r = open_unix(b, url + 13);
	else if (starts(url, "redis-cluster://"))
		r = open_cluster(b, url + 16);
	else
		r = wstore__err(WSTORE_EINVAL,
				"invalid redis URL: unknown scheme");
	if (!r)
		r = read_settings(b, cfg);
	if (!r && b->seeds)
		r = rdc_open(&b->cl, b->seeds, &b->opts);
	if (!r && b->node) {
		/* connect now: an unreachable server or a wrong password
		 * is reported by open, not by the first put */
		struct rd_conn *rc;
		int reused;

		if (!(r = rd_node_take(b->node, &rc, &reused)))
			rd_node_give(b->node, rc, 0);
	}
	if (r) {
		rb_free(&b->base);
		return r;
	}
	set_callbacks(b);
	*out = &b->base;
	return 0;
}
