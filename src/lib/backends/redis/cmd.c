/*
 * cmd.c - the backend operations as Redis commands on one
 * connection (rd_do), the errors they end in (rd_fail), and SCAN.
 *
 * put is SET (NX for put_new), its header and value written with one
 * sendmsg() whose iovec points at the caller's bytes; get is GET and
 * get_range GETRANGE, read into the caller's buffer; size is STRLEN, with
 * EXISTS when that says 0 (STRLEN of a missing key is 0 too); remove is
 * DEL; update is WATCH / GET / MULTI / SET / EXEC, retried while EXEC says
 * another client changed the key in between.
 *
 * Server error replies and broken connections are not final here: they
 * come back as RD_REPLY_ERR / RD_CONN_ERR so that the cluster router can
 * follow redirections and retry; rd_fail() then words the final error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "proto.h"

static const char *const op_names[] = {
	[RD_PUT] = "put",	[RD_PUT_NEW] = "put",	[RD_PUT_TTL] = "put",
	[RD_GET] = "get",	[RD_GET_RANGE] = "get", [RD_SIZE] = "size",
	[RD_REMOVE] = "remove", [RD_UPDATE] = "update",
};

/* ---- commands ------------------------------------------------------------ */

/* Copy a server error reply into req->err; returns RD_REPLY_ERR. */
static int reply_err(struct rd_req *req, const redisReply *r)
{
	snprintf(req->err, sizeof(req->err), "%s", r->str);
	return RD_REPLY_ERR;
}

/* SET key value [NX | PX ttl], the value sent from the caller's memory. */
static int op_put(struct rd_conn *rc, struct rd_req *req)
{
	char head[64], mid[32], px[64];
	static const char crlf[] = "\r\n", nx[] = "\r\n$2\r\nNX\r\n";
	int nx_ = req->op == RD_PUT_NEW, px_ = req->op == RD_PUT_TTL;
	int pxlen = snprintf(px, sizeof(px), "%llu",
			     (unsigned long long)req->ttl_ms);
	struct iovec iov[5] = {
		{ head, (size_t)snprintf(head, sizeof(head),
					 "*%d\r\n$3\r\nSET\r\n$%zu\r\n",
					 nx_   ? 4
					 : px_ ? 5
					       : 3,
					 req->klen) },
		{ (void *)req->key, req->klen },
		{ mid, (size_t)snprintf(mid, sizeof(mid), "\r\n$%zu\r\n",
					req->len) },
		{ (void *)req->data, req->len },
		{ (void *)(nx_ ? nx : crlf), nx_ ? sizeof(nx) - 1 : 2 },
	};
	char tail[96];

	if (px_) {
		/* PX and its argument follow the value */
		snprintf(tail, sizeof(tail), "\r\n$2\r\nPX\r\n$%d\r\n%s\r\n",
			 pxlen, px);
		iov[4].iov_base = tail;
		iov[4].iov_len = strlen(tail);
	}
	redisReply *r;
	int code = 0;

	if (rd_send_iov(rc, iov, 5)) {
		/* a server refusing an over-long bulk says why, then closes */
		char buf[200];
		ssize_t k = rd_read_now(rc, buf, sizeof(buf) - 1);

		if (k > 1 && buf[0] == '-') {
			buf[k] = '\0';
			buf[strcspn(buf, "\r\n")] = '\0';
			snprintf(req->err, sizeof(req->err), "%s", buf + 1);
			return RD_REPLY_ERR;
		}
		return rd_conn_err(req, rc);
	}
	if (!(r = rd_recv_reply(rc)))
		return rd_conn_err(req, rc);
	if (r->type == REDIS_REPLY_ERROR)
		code = reply_err(req, r);
	else if (r->type == REDIS_REPLY_NIL)
		code = wstore__err(WSTORE_EEXISTS, "'%s' already exists",
				   req->lkey);
	freeReplyObject(r);
	return code;
}

static int bulk_cmd(struct rd_conn *rc, struct rd_req *req, const char **argv,
		    const size_t *lens, void *buf, size_t cap, size_t *out_n,
		    int *nil)
{
	redisReader *rd = rc->c->reader;

	if (rd->buf && rd->len > rd->pos) {
		rd_broken(rc, "protocol error: unread reply data", 0);
		return rd_conn_err(req, rc);
	}
	if (rd_send_cmds(rc, 1, &argv, &lens))
		return rd_conn_err(req, rc);
	return rd_read_bulk(rc, req, buf, cap, out_n, nil);
}

/* An integer-reply command on the key: "DEL", "EXISTS", "STRLEN". */
static int int_cmd(struct rd_conn *rc, struct rd_req *req, const char *cmd,
		   long long *out)
{
	const char *argv[] = { cmd, req->key, NULL };
	size_t lens[] = { strlen(cmd), req->klen };
	redisReply *r = rd_command_argv(rc, argv, lens);
	int code = 0;

	if (!r)
		return rd_conn_err(req, rc);
	if (r->type == REDIS_REPLY_ERROR)
		code = reply_err(req, r);
	else if (r->type != REDIS_REPLY_INTEGER)
		code = wstore__err(-EPROTO,
				   "redis: unexpected reply to %s '%s'", cmd,
				   req->lkey);
	else
		*out = r->integer;
	freeReplyObject(r);
	return code;
}

static int not_found(struct rd_req *req)
{
	return wstore__err(WSTORE_ENOTFOUND, "'%s' not found", req->lkey);
}

/*
 * The rest of a value whose GET lost its connection after `resume` of its
 * `total` bytes: GETRANGE of the rest into the buffer after them, so that
 * a large value behind a flaky link (a proxy or load balancer cutting
 * connections) gets further with every attempt instead of starting over.
 * *again = 1 when the answer is not the rest of a value of that size (it
 * changed or went away): the caller reads it whole again.  Chunk values
 * do not change under one checkpoint; a checkpoint replaced between the
 * attempts is what the reader's generation check after each chunk is for.
 */
static int get_rest(struct rd_conn *rc, struct rd_req *req, int *again)
{
	char a[24], z[24];
	const char *argv[] = { "GETRANGE", req->key, a, z, NULL };
	size_t lens[] = { 8, req->klen, 0, 0 }, want = req->total - req->resume,
	       n = 0;
	int nil, r;

	*again = 0;
	lens[2] = (size_t)snprintf(a, sizeof(a), "%zu", req->resume);
	lens[3] = (size_t)snprintf(z, sizeof(z), "%zu", req->total - 1);
	r = bulk_cmd(rc, req, argv, lens, (char *)req->buf + req->resume, want,
		     &n, &nil);
	if (r == RD_CONN_ERR) {
		if (req->bulk == (long long)want)
			req->resume += req->landed;
		return r;
	}
	if (r == WSTORE_ERANGE || (r == 0 && n != want)) {
		*again = 1;
		return 0;
	}
	if (r == 0)
		*req->out_len = req->total;
	return r;
}

static int op_get(struct rd_conn *rc, struct rd_req *req)
{
	const char *argv[] = { "GET", req->key, NULL };
	size_t lens[] = { 3, req->klen };
	int nil, r, again;

	if (req->resume > 0 && req->resume < req->total) {
		r = get_rest(rc, req, &again);
		if (!again)
			return r;
	}
	req->resume = 0;
	r = bulk_cmd(rc, req, argv, lens, req->buf, req->cap, req->out_len,
		     &nil);
	if (r == RD_CONN_ERR && req->bulk > 0 && req->landed > 0) {
		req->resume = req->landed;
		req->total = (size_t)req->bulk;
	}
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

#define RD_RETRY 3 /* update: EXEC saw a concurrent change */

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
		if (!(r[i] = rd_recv_reply(rc))) {
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
static int update_exec(struct rd_conn *rc, struct rd_req *req, const void *val,
		       size_t len)
{
	const char *m[] = { "MULTI", NULL }, *x[] = { "EXEC", NULL };
	const char *s[] = { "SET", req->key, val, NULL };
	const size_t ml[] = { 5 }, xl[] = { 4 }, sl[] = { 3, req->klen, len };
	const char **argv[] = { m, s, x };
	const size_t *lens[] = { ml, sl, xl };
	redisReply *r[3];
	int e, code = 0;

	if (rd_send_cmds(rc, 3, argv, lens) || (e = recv_n(rc, r, 3)) < 0)
		return rd_conn_err(req, rc);
	if (e < 3)
		code = reply_err(req, r[e]);
	else if (r[2]->type == REDIS_REPLY_NIL)
		code = RD_RETRY;
	else if (r[2]->type != REDIS_REPLY_ARRAY)
		code = wstore__err(-EPROTO,
				   "redis: unexpected EXEC reply for '%s'",
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

	if (rd_send_cmds(rc, 2, argv, lens) || (e = recv_n(rc, r, 2)) < 0)
		return rd_conn_err(req, rc);
	if (e < 2 || (r[1]->type != REDIS_REPLY_STRING &&
		      r[1]->type != REDIS_REPLY_NIL)) {
		code = e < 2 ? reply_err(req, r[e])
			     : wstore__err(WSTORE_ECORRUPT,
					   "'%s' is not a string", req->lkey);
		free_n(r, 2);
		unwatch(rc);
		return code;
	}
	code = r[1]->type == REDIS_REPLY_NIL
		       ? req->fn(&nv, &nlen, NULL, 0, req->ctx)
		       : req->fn(&nv, &nlen, r[1]->str, r[1]->len, req->ctx);
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
static int op_update(struct rd_node *n, struct rd_conn *rc, struct rd_req *req)
{
	int64_t deadline = rd_now_ms() + n->opts->command_ms;

	for (int attempt = 0;; attempt++) {
		int r = update_once(rc, req);

		if (r != RD_RETRY)
			return r;
		if (rd_now_ms() > deadline)
			return wstore__err(
				WSTORE_EBUSY,
				"redis at %s: update of '%s' kept conflicting with other writers",
				n->name, req->lkey);
		if (attempt > 0)
			rd_backoff(attempt < 4 ? 0 : attempt - 4);
	}
}

int rd_do(struct rd_node *n, struct rd_conn *rc, struct rd_req *req)
{
	uint64_t max;

	switch (req->op) {
	case RD_PUT:
	case RD_PUT_NEW:
	case RD_PUT_TTL:
		max = __atomic_load_n(&n->max_bulk, __ATOMIC_RELAXED);
		if (max && req->len > max)
			return wstore__err(
				-EFBIG,
				"redis at %s: value of '%s' (%zu bytes) is over proto-max-bulk-len (%" PRIu64
				" bytes)",
				n->name, req->lkey, req->len, max);
		return op_put(rc, req);
	case RD_GET: return op_get(rc, req);
	case RD_GET_RANGE: return op_get_range(rc, req);
	case RD_SIZE: return op_size(rc, req);
	case RD_REMOVE: return op_remove(rc, req);
	case RD_UPDATE: return op_update(n, rc, req);
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
		return wstore__err(
			WSTORE_EUNAVAIL,
			"lost connection to redis at %s during %s of '%s': %s",
			n->name, op, req->lkey, e);
	if (starts(e, "OOM"))
		return wstore__err(
			-ENOSPC,
			"redis at %s: out of memory (maxmemory) writing '%s'",
			n->name, req->lkey);
	if (starts(e, "NOAUTH") || starts(e, "WRONGPASS"))
		return wstore__err(WSTORE_EUNAVAIL,
				   "redis at %s: authentication failed",
				   n->name);
	if (strstr(e, "invalid bulk length"))
		return wstore__err(
			-EFBIG,
			"redis at %s: value of '%s' (%zu bytes) is over proto-max-bulk-len",
			n->name, req->lkey, req->len);
	if (starts(e, "CLUSTERDOWN"))
		return wstore__err(
			WSTORE_EUNAVAIL,
			"redis cluster is down (%s during %s of '%s'): %s",
			n->name, op, req->lkey, e);
	if (starts(e, "MOVED") || starts(e, "ASK"))
		return wstore__err(
			WSTORE_EUNAVAIL,
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
	return wstore__err(-EIO, "redis at %s: %s of '%s' failed: %s", n->name,
			   op, req->lkey, e);
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
		const char *argv[] = { "SCAN",	cursor, "MATCH", pattern,
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
			r = wstore__err(
				WSTORE_EUNAVAIL,
				"lost connection to redis at %s during list: %s",
				n->name, rc->c->errstr);
			break;
		}
		if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
		    rep->element[0]->type != REDIS_REPLY_STRING ||
		    rep->element[1]->type != REDIS_REPLY_ARRAY) {
			r = wstore__err(-EIO, "redis at %s: list failed: %s",
					n->name,
					rep->type == REDIS_REPLY_ERROR
						? rep->str
						: "unexpected reply");
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
