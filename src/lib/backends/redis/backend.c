/*
 * redis/backend.c - the Redis backend: URL and settings, the standalone
 * router, and the wstore_backend callbacks over cmd.c (commands),
 * conn.c (connections) and cluster.c (slot routing).  Read
 * proto.h first.
 *
 *   redis://[user:password@]host:port[/db]
 *   redis+unix://[:password@]/path/to/socket[?db=N]
 *   redis-cluster://[user:password@]host:port,host:port,...
 *   rediss://..., rediss-cluster://...   the same over TLS (tls.c;
 *   settings redis_tls_ca_file, redis_tls_cert_file, redis_tls_key_file)
 *
 * Each logical key is one Redis string named key_prefix + key.  Settings
 * (config keys): redis_password (when the URL has none; else
 * $WSTORE_REDIS_PASSWORD), key_prefix, connect_timeout_ms (5000),
 * command_timeout_ms (60000; also how long a cluster request keeps
 * retrying through a failover).  Passwords live only in struct rd_opts:
 * messages name servers as host:port (or the socket path) and never echo
 * the URL.
 */
#include <ctype.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

struct redis_backend {
	wstore_backend base;
	struct rd_opts opts;
	char *prefix; /* key_prefix, "" when none */
	size_t plen;
	struct rd_node *node;  /* standalone */
	struct rd_cluster *cl; /* cluster */
	char *seeds;	       /* cluster: "host:port,..." from the URL */
	long copies;	       /* replica_num: copies a write needs (>= 1) */
};

static int starts(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* ---- the backend callbacks ----------------------------------------------- */

/* Requests that can run again after a lost connection with the same
 * result: a write or remove that did reach the server before the
 * connection broke is done a second time to the same effect.  Not
 * PUT_NEW (its second run would find its own value and report it taken)
 * nor UPDATE (a read-modify-write). */
static int idempotent(enum rd_op op)
{
	return op != RD_PUT_NEW && op != RD_UPDATE;
}

/*
 * One request on a standalone server.  A pooled connection may have died
 * while idle: once more on a fresh one at once.  A connection lost in the
 * middle of an idempotent request (a reset, a proxy or load balancer
 * cutting it, a server restart) is retried on a fresh connection with
 * backoff, up to 5 attempts in a row that gain nothing and within
 * command_timeout_ms (a GET resumes where it was cut, and an attempt that
 * got further starts that count again), as the cluster router does (and so is a
 * connection that could not be set up, but for refused credentials); a wait
 * that timed out or was interrupted is not retried (it has used the time
 * already, or the caller is stopping).
 */
static int run_node(struct rd_node *n, struct rd_req *req)
{
	int64_t deadline = rd_now_ms() + n->opts->command_ms;
	int stalls = 0; /* attempts in a row lost with no byte gained */

	for (int attempt = 0;; attempt++) {
		struct rd_conn *rc;
		size_t had = req->resume;
		int reused, r = rd_node_take(n, &rc, &reused);

		/* a connection lost while it was being set up: the same,
		 * unless the server refused our credentials */
		if (r && idempotent(req->op) && ++stalls < 5 &&
		    !__atomic_load_n(&n->auth_failed, __ATOMIC_ACQUIRE) &&
		    !wstore__interrupted() && rd_now_ms() < deadline) {
			rd_backoff(stalls + 2);
			continue;
		}
		if (r)
			return r;
		r = rd_do(n, rc, req);
		rd_node_give(n, rc, r == RD_CONN_ERR);
		if (r == RD_CONN_ERR && reused && attempt == 0)
			continue;
		/* a GET that got further (it resumes where it was cut) starts
		 * the count of attempts in a row that gained nothing again;
		 * the deadline bounds it */
		if (r == RD_CONN_ERR)
			stalls = req->resume > had ? 0 : stalls + 1;
		if (r == RD_CONN_ERR && idempotent(req->op) && stalls < 5 &&
		    !wstore__interrupted() && !strstr(req->err, "timed out") &&
		    rd_now_ms() < deadline) {
			rd_backoff((req->resume > had ? 0 : stalls) + 2);
			continue;
		}
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

static int rb_put_ttl(wstore_backend *b, const char *key, const void *data,
		      size_t len, uint64_t ttl_ms)
{
	struct rd_req req = {
		.op = RD_PUT_TTL, .data = data, .len = len, .ttl_ms = ttl_ms
	};

	return run(b, &req, key);
}

static int rb_get(wstore_backend *b, const char *key, void *buf, size_t cap,
		  size_t *out_len)
{
	struct rd_req req = {
		.op = RD_GET, .buf = buf, .cap = cap, .out_len = out_len
	};

	return run(b, &req, key);
}

static int rb_get_range(wstore_backend *b, const char *key, uint64_t off,
			void *buf, size_t len, size_t *out_n)
{
	struct rd_req req = { .op = RD_GET_RANGE,
			      .off = off,
			      .buf = buf,
			      .len = len,
			      .out_len = out_n };

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

	(void)force; /* Redis has no leases */
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

/* Replicas connected to the master behind rc ("connected_slaves"). */
static long replica_count(struct rd_conn *rc)
{
	const char *argv[] = { "INFO", "replication", NULL };
	redisReply *r = rd_command(rc, argv);
	const char *p;
	long n = -1;

	if (r && r->type == REDIS_REPLY_STRING &&
	    (p = strstr(r->str, "connected_slaves:")))
		n = strtol(p + strlen("connected_slaves:"), NULL, 10);
	if (r)
		freeReplyObject(r);
	return n;
}

static int too_few_replicas(struct rd_node *n, long have, long copies)
{
	return wstore__err(
		WSTORE_EUNAVAIL,
		"redis at %s has %ld connected replicas, but replica_num %ld needs %ld (the master and %ld replicas)",
		n->name, have < 0 ? 0 : have, copies, copies - 1, copies - 1);
}

/*
 * Wait until the replicas of node n hold every write made through its
 * pooled connections (WAIT applies to one connection's own writes).  All
 * puts have returned when sync runs, so every connection that wrote is
 * back in the pool, unless it broke, and then its put failed.
 */
static int node_sync(struct rd_node *n, int ms, long copies)
{
	struct rd_conn *list, *rc, *next;
	char nbuf[24], tbuf[24];
	const char *argv[] = { "WAIT", nbuf, tbuf, NULL };
	long want;
	int reused, r = rd_node_take(n, &rc, &reused);

	if (r)
		return r;
	want = replica_count(rc);
	rd_node_give(n, rc, want < 0);
	if (copies > 1 && want < copies - 1)
		return too_few_replicas(n, want, copies);
	if (want <= 0)
		return 0;
	snprintf(nbuf, sizeof(nbuf), "%ld", want);
	snprintf(tbuf, sizeof(tbuf), "%d", ms);
	pthread_mutex_lock(&n->lock);
	list = n->free;
	n->free = NULL;
	n->nfree = 0;
	pthread_mutex_unlock(&n->lock);
	for (rc = list; rc; rc = next) {
		redisReply *rep = r ? NULL : rd_command(rc, argv);

		next = rc->next;
		if (!r && (!rep || rep->type != REDIS_REPLY_INTEGER ||
			   rep->integer < want))
			r = wstore__err(
				WSTORE_EUNAVAIL,
				"redis at %s: only %lld of %ld replicas acknowledged the writes within %d ms",
				n->name,
				rep && rep->type == REDIS_REPLY_INTEGER
					? rep->integer
					: 0LL,
				want, ms);
		if (rep)
			freeReplyObject(rep);
		rd_node_give(n, rc, !rep);
	}
	return r;
}

/*
 * Replication is asynchronous: a chunk a master acknowledged may not have
 * reached its replicas yet, and a failover then would lose it under a
 * READY manifest.  Import calls sync once before it publishes one.
 */
static int rb_sync(wstore_backend *wb)
{
	struct redis_backend *b = (struct redis_backend *)wb;
	struct rd_node **nodes = &b->node;
	size_t n = 1;
	int r = 0;

	if (b->cl && (r = rdc_masters(b->cl, &nodes, &n)))
		return r;
	for (size_t i = 0; !r && i < n; i++)
		r = node_sync(nodes[i], b->opts.command_ms, b->copies);
	if (b->cl)
		free(nodes);
	return r;
}

/* A number field "name:" of an INFO reply, or -1. */
static long long info_field(const char *info, const char *name)
{
	const char *p = strstr(info, name);

	return p ? strtoll(p + strlen(name), NULL, 10) : -1;
}

/* used_memory and maxmemory (0: no limit) of node n. */
static int node_memory(struct rd_node *n, long long *used, long long *max)
{
	const char *argv[] = { "INFO", "memory", NULL };
	struct rd_conn *rc;
	redisReply *r;
	int reused, rv = rd_node_take(n, &rc, &reused);

	if (rv)
		return rv;
	r = rd_command(rc, argv);
	rd_node_give(n, rc, !r);
	if (!r || r->type != REDIS_REPLY_STRING) {
		if (r)
			freeReplyObject(r);
		return wstore__err(WSTORE_EUNAVAIL,
				   "redis at %s: INFO memory failed", n->name);
	}
	*used = info_field(r->str, "used_memory:");
	*max = info_field(r->str, "maxmemory:");
	freeReplyObject(r);
	return *used < 0 || *max < 0
		       ? wstore__err(-EPROTO,
				     "redis at %s: INFO memory lacks "
				     "used_memory or maxmemory",
				     n->name)
		       : 0;
}

/* maxmemory summed over the masters, less what they use; a master without
 * maxmemory makes both unknown. */
static int rb_space(wstore_backend *wb, uint64_t *out_capacity,
		    uint64_t *out_free)
{
	struct redis_backend *b = (struct redis_backend *)wb;
	struct rd_node **nodes = &b->node;
	uint64_t cap = 0, used = 0;
	size_t n = 1;
	int r = 0, unlimited = 0;

	if (b->cl && (r = rdc_masters(b->cl, &nodes, &n)))
		return r;
	for (size_t i = 0; !r && i < n; i++) {
		long long u = 0, m = 0;

		r = node_memory(nodes[i], &u, &m);
		unlimited |= m == 0;
		cap += (uint64_t)m;
		used += (uint64_t)u;
	}
	if (b->cl)
		free(nodes);
	if (r)
		return r;
	*out_capacity = unlimited ? UINT64_MAX : cap;
	*out_free = unlimited ? UINT64_MAX : cap > used ? cap - used : 0;
	return 0;
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
	SSL_CTX_free(b->opts.tls);
	free(b->opts.tls_ca);
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

		if (s[i] == '%' && i + 2 < n &&
		    isxdigit((unsigned char)s[i + 1]) &&
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
static int parse_userinfo(struct redis_backend *b, const char *s,
			  const char *at)
{
	const char *colon = memchr(s, ':', (size_t)(at - s));
	const char *ue = colon ? colon : at;

	if (ue > s && !(b->opts.user = pct_decode(s, (size_t)(ue - s))))
		return wstore__errc(-ENOMEM, "redis URL");
	if (colon && at > colon + 1 &&
	    !(b->opts.password =
		      pct_decode(colon + 1, (size_t)(at - colon - 1))))
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

static int cfg_ms(const wstore_config *cfg, const char *key, int def, int *out)
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

/* replica_num: how many copies (the master and its replicas) must hold a
 * chunk before a READY manifest lists it; default 1, the master alone. */
static int cfg_copies(const wstore_config *cfg, long *out)
{
	const char *v = cfg ? wstore_config_get(cfg, "replica_num") : NULL;
	char *end;
	long n;

	*out = 1;
	if (!v || !*v)
		return 0;
	n = strtol(v, &end, 10);
	if (*end || n < 1 || n > 1000)
		return wstore__err(
			WSTORE_EINVAL,
			"invalid replica_num '%s': want an integer from 1 to 1000",
			v);
	*out = n;
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
	r = rd_parse_hostport(rest,
			      slash ? (size_t)(slash - rest) : strlen(rest),
			      &host, &port);
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
		return wstore__err(
			WSTORE_EINVAL,
			"invalid redis URL: redis+unix:// needs an absolute socket path");
	q = strchr(rest, '?');
	if (q && strncmp(q, "?db=", 4) != 0)
		return wstore__err(
			WSTORE_EINVAL,
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
		return wstore__err(
			WSTORE_EINVAL,
			"invalid redis URL: a cluster has no database number");
	if (!(b->seeds = strdup(rest)))
		return wstore__errc(-ENOMEM, "redis URL");
	return 0;
}

/* rediss://: the TLS context from redis_tls_ca_file, redis_tls_cert_file,
 * redis_tls_key_file (each may be unset). */
static int read_tls(struct redis_backend *b, const wstore_config *cfg)
{
	struct rd_tls_files f = { 0 };
	const char **slot[] = { &f.ca, &f.cert, &f.key };
	const char *keys[] = { "redis_tls_ca_file", "redis_tls_cert_file",
			       "redis_tls_key_file" };

	for (int i = 0; cfg && i < 3; i++) {
		const char *v = wstore_config_get(cfg, keys[i]);

		*slot[i] = v && *v ? v : NULL;
	}
	if (f.ca && !(b->opts.tls_ca = strdup(f.ca)))
		return wstore__errc(-ENOMEM, "redis settings");
	return rd_tls_ctx_new(&b->opts.tls, &f);
}

/* Settings from cfg (and $WSTORE_REDIS_PASSWORD when cfg has none). */
static int read_settings(struct redis_backend *b, const wstore_config *cfg)
{
	const char *pw = cfg ? wstore_config_get(cfg, "redis_password") : NULL;
	const char *prefix = cfg ? wstore_config_get(cfg, "key_prefix") : NULL;
	int r;

	if (!pw || !*pw)
		pw = getenv("WSTORE_REDIS_PASSWORD");
	if (!b->opts.password && pw && *pw && !(b->opts.password = strdup(pw)))
		return wstore__errc(-ENOMEM, "redis settings");
	if (!(b->prefix = strdup(prefix ? prefix : "")))
		return wstore__errc(-ENOMEM, "redis settings");
	b->plen = strlen(b->prefix);
	if ((r = cfg_ms(cfg, "connect_timeout_ms", 5000, &b->opts.connect_ms)))
		return r;
	if ((r = cfg_copies(cfg, &b->copies)))
		return r;
	return cfg_ms(cfg, "command_timeout_ms", 60000, &b->opts.command_ms);
}

/*
 * Keep freed memory in the process.  Big buffers (64 MiB chunks here, in
 * hiredis' reply reader and in the callers' pipelines) would otherwise be
 * mmap()ed and unmapped on every use, and first-touch page faults cost
 * more than the network transfer (docs/performance.md).
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
	b->base.struct_size = sizeof(b->base);
	b->base.name = b->cl ? "redis-cluster" : "redis";
	b->base.flags |= WSTORE_BACKEND_UNTRUSTED; /* MAY_EVICT may be set */
	b->base.put = rb_put;
	b->base.upsert = rb_put;
	b->base.put_new = rb_put_new;
	b->base.get = rb_get;
	b->base.get_range = rb_get_range;
	b->base.size = rb_size;
	b->base.remove = rb_remove;
	b->base.list = rb_list;
	b->base.update = rb_update;
	b->base.sync = rb_sync;
	b->base.free = rb_free;
	b->base.put_ttl = rb_put_ttl;
	b->base.space = rb_space;
}

/* CONFIG GET maxmemory-policy of the server behind n: 0 and *out the
 * policy (malloc'ed), 1 when the server refuses CONFIG (renamed away with
 * rename-command, or denied by an ACL), else an error. */
static int eviction_policy(struct rd_node *n, char **out)
{
	const char *argv[] = { "CONFIG", "GET", "maxmemory-policy", NULL };
	struct rd_conn *rc;
	redisReply *r;
	int reused, err = rd_node_take(n, &rc, &reused);

	*out = NULL;
	if (err)
		return err;
	r = rd_command(rc, argv);
	rd_node_give(n, rc, !r);
	if (!r)
		return wstore__err(WSTORE_EUNAVAIL,
				   "lost connection to redis at %s", n->name);
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[1]->type == REDIS_REPLY_STRING)
		*out = strdup(r->element[1]->str);
	err = *out ? 0 : 1;
	freeReplyObject(r);
	return err;
}

/*
 * A server that may evict keys (maxmemory-policy allkeys-* or volatile-*)
 * can drop the chunks of a READY checkpoint, or of an import between its
 * put and its manifest: refuse to write to it.  Where CONFIG is not
 * allowed, warn and flag the store MAY_EVICT (import then re-checks every
 * chunk before it publishes).  Readers accept either: verify and every
 * read report a chunk that is gone as missing.
 */
static int check_eviction(struct redis_backend *b, unsigned flags)
{
	struct rd_node **nodes = &b->node;
	size_t n = 1;
	int r = 0;

	if (flags & WSTORE_OPEN_READONLY)
		return 0;
	/* a cluster failover loses the writes its old master acknowledged
	 * but had not replicated yet, and sync's WAIT cannot reach a dead
	 * master: have import re-check its chunks as on an evicting store */
	if (b->cl)
		b->base.flags |= WSTORE_BACKEND_MAY_EVICT;
	if (b->cl && (r = rdc_masters(b->cl, &nodes, &n)))
		return r;
	for (size_t i = 0; !r && i < n; i++) {
		char *pol = NULL;

		r = eviction_policy(nodes[i], &pol);
		if (r < 0) {
			/* a master that is down (a cluster failing over):
			 * its policy is unknown, so import re-checks */
			r = 0;
			b->base.flags |= WSTORE_BACKEND_MAY_EVICT;
		} else if (r == 1) {
			r = 0;
			b->base.flags |= WSTORE_BACKEND_MAY_EVICT;
			wstore_backend_warn(
				"redis at %s does not allow CONFIG GET, so wstore cannot check that its maxmemory-policy is noeviction; imports re-check every chunk before publishing",
				nodes[i]->name);
		} else if (!strncmp(pol, "allkeys-", 8) ||
			   !strncmp(pol, "volatile-", 9)) {
			r = wstore__err(
				WSTORE_EINVAL,
				"redis at %s has maxmemory-policy '%s', which can evict wstore's keys and lose chunks of READY checkpoints; set maxmemory-policy to noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf)",
				nodes[i]->name, pol);
		}
		free(pol);
		if (!r && b->copies > 1) {
			/* fail before writing anything, not at the end */
			struct rd_conn *rc;
			int reused;
			long have;

			if (rd_node_take(nodes[i], &rc, &reused) == 0) {
				have = replica_count(rc);
				rd_node_give(nodes[i], rc, have < 0);
				if (have >= 0 && have < b->copies - 1)
					r = too_few_replicas(nodes[i], have,
							     b->copies);
			}
		}
	}
	if (b->cl)
		free(nodes);
	return r;
}

int wstore__backend_redis_open(wstore_backend **out, const char *url,
			       const wstore_config *cfg)
{
	return wstore__backend_redis_open_flags(out, url, cfg, 0);
}

int wstore__backend_redis_open_flags(wstore_backend **out, const char *url,
				     const wstore_config *cfg, unsigned flags)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct redis_backend *b = calloc(1, sizeof(*b));
	int r;

	pthread_once(&once, tune_malloc);
	if (!b)
		return wstore__errc(-ENOMEM, "cannot open redis store");
	if (starts(url, "rediss://") || starts(url, "rediss-cluster://"))
		r = read_tls(b, cfg);
	else
		r = 0;
	if (r)
		;
	else if (starts(url, "redis://") || starts(url, "rediss://"))
		r = open_standalone(b, strstr(url, "://") + 3);
	else if (starts(url, "redis+unix://"))
		r = open_unix(b, url + 13);
	else if (starts(url, "redis-cluster://") ||
		 starts(url, "rediss-cluster://"))
		r = open_cluster(b, strstr(url, "://") + 3);
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
	if (!r)
		r = check_eviction(b, flags);
	if (r) {
		rb_free(&b->base);
		return r;
	}
	set_callbacks(b);
	*out = &b->base;
	return 0;
}

/* ---- the kind store URLs name (backends/table.c) ------------------------ */

static int redis_kind_open(wstore_backend **out, const char *url,
			   const char *rest, const wstore_config *cfg,
			   unsigned flags)
{
	(void)rest;
	return wstore__backend_redis_open_flags(out, url, cfg, flags);
}

/* Without -Dredis the table names these schemes itself (table.c). */
const wstore__backend_kind wstore__kind_redis = {
	.name = "Redis",
	.schemes = { "redis://*", "rediss://*", "redis+unix://*",
		     "redis-cluster://*", "rediss-cluster://*" },
	.usage = "redis://, rediss://, redis+unix://, redis-cluster://, "
		 "rediss-cluster://",
	.open = redis_kind_open,
};
