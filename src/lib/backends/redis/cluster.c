/*
 * cluster.c - routing requests over a Redis Cluster (Debian 12's
 * hiredis 0.14 has no cluster support, so it is done here).
 *
 * The keyspace is cut into 16384 slots; a key's slot is CRC16 (XMODEM) of
 * the key, or of the part between the first '{' and the next '}' when that
 * is non-empty (a "hash tag"), mod 16384.  Each slot has one master.
 *
 * The slot map is read with CLUSTER SLOTS from any reachable node (the URL's
 * seeds or any node seen since).  A request goes to its slot's master:
 *  - MOVED slot host:port: the slot has a new owner; remap and retry.
 *  - ASK slot host:port: the slot is migrating; retry once on that node,
 *    preceded by ASKING, without remapping.
 *  - a broken connection, CLUSTERDOWN, TRYAGAIN, LOADING, MASTERDOWN: a
 *    node died or a failover is under way; back off, re-read the map and
 *    retry, for up to command_timeout_ms, then fail with a clear error.
 * Each node has its own connection pool (struct rd_node), so worker
 * threads talk to different masters in parallel.  Nodes are never freed
 * before the cluster is, so pointers into the table stay valid.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define NSLOTS 16384

struct rd_cluster {
	const struct rd_opts *opts;
	char *seeds;		/* "host:port,..." from the URL */
	pthread_mutex_t lock;	/* guards what follows */
	struct rd_node **nodes; /* every node seen */
	size_t nnodes, cap;
	struct rd_node *slots[NSLOTS]; /* master of each slot, or NULL */
	uint64_t epoch;		       /* map version, bumped on refresh */
	pthread_mutex_t refresh_lock;  /* one refresh at a time */
};

static uint16_t crc16(const char *buf, size_t len)
{
	uint16_t crc = 0;

	for (size_t i = 0; i < len; i++) {
		crc ^= (uint16_t)((unsigned char)buf[i] << 8);
		for (int j = 0; j < 8; j++)
			crc = crc & 0x8000 ? (uint16_t)(crc << 1) ^ 0x1021
					   : (uint16_t)(crc << 1);
	}
	return crc;
}

unsigned rdc_slot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len), *close;

	if (open) {
		close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
		if (close && close > open + 1)
			return crc16(open + 1, (size_t)(close - open - 1)) %
			       NSLOTS;
	}
	return crc16(key, len) % NSLOTS;
}

/* The node for host:port, created on first sight.  Takes cl->lock. */
static struct rd_node *node_get(struct rd_cluster *cl, const char *host,
				int port)
{
	struct rd_node *n = NULL;

	pthread_mutex_lock(&cl->lock);
	for (size_t i = 0; i < cl->nnodes; i++)
		if (cl->nodes[i]->port == port &&
		    strcmp(cl->nodes[i]->host, host) == 0) {
			n = cl->nodes[i];
			goto out;
		}
	if (cl->nnodes == cl->cap) {
		size_t cap = cl->cap ? 2 * cl->cap : 8;
		struct rd_node **v = realloc(cl->nodes, cap * sizeof(*v));

		if (!v)
			goto out;
		cl->nodes = v;
		cl->cap = cap;
	}
	if (rd_node_new(&n, host, port, NULL, cl->opts) == 0)
		cl->nodes[cl->nnodes++] = n;
out:
	pthread_mutex_unlock(&cl->lock);
	return n;
}

/* Fill tab from a CLUSTER SLOTS reply; 0 or -1 if malformed. */
static int parse_slots(struct rd_cluster *cl, struct rd_node *from,
		       const redisReply *r, struct rd_node **tab)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements == 0)
		return -1;
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i], *m;
		struct rd_node *n;

		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[1]->type != REDIS_REPLY_INTEGER)
			return -1;
		m = e->element[2];
		if (m->type != REDIS_REPLY_ARRAY || m->elements < 2 ||
		    m->element[0]->type != REDIS_REPLY_STRING ||
		    m->element[1]->type != REDIS_REPLY_INTEGER)
			return -1;
		/* an empty host means "the node you asked" */
		n = node_get(cl,
			     m->element[0]->len ? m->element[0]->str
						: from->host,
			     (int)m->element[1]->integer);
		if (!n)
			return -1;
		for (long long s = e->element[0]->integer;
		     s <= e->element[1]->integer && s < NSLOTS; s++)
			if (s >= 0)
				tab[s] = n;
	}
	return 0;
}

/* CLUSTER SLOTS from node n into tab.  0, or an error code. */
static int ask_slots(struct rd_cluster *cl, struct rd_node *n,
		     struct rd_node **tab)
{
	const char *argv[] = { "CLUSTER", "SLOTS", NULL };
	struct rd_conn *rc;
	redisReply *r;
	int reused, code;

	if ((code = rd_node_take(n, &rc, &reused)))
		return code;
	r = rd_command(rc, argv);
	if (!r)
		code = wstore__err(WSTORE_EUNAVAIL,
				   "lost connection to redis at %s: %s",
				   n->name, rc->c->errstr);
	else if (r->type == REDIS_REPLY_ERROR)
		code = wstore__err(WSTORE_EUNAVAIL,
				   "redis at %s is not a cluster node: %s",
				   n->name, r->str);
	else if (parse_slots(cl, n, r, tab))
		code = wstore__err(
			WSTORE_EUNAVAIL,
			"redis at %s: unexpected CLUSTER SLOTS reply", n->name);
	freeReplyObject(r);
	rd_node_give(n, rc, 0);
	return code;
}

/* Candidates to ask for the map: known nodes, then the seeds. */
static size_t candidates(struct rd_cluster *cl, struct rd_node ***out)
{
	size_t n = 0, max;
	const char *s = cl->seeds;

	pthread_mutex_lock(&cl->lock);
	max = cl->nnodes + 64;
	*out = malloc(max * sizeof(**out));
	if (*out && cl->nnodes) {
		memcpy(*out, cl->nodes, cl->nnodes * sizeof(**out));
		n = cl->nnodes;
	}
	pthread_mutex_unlock(&cl->lock);
	while (*out && *s && n < max) {
		size_t len = strcspn(s, ",");
		char *host;
		int port;

		if (len && rd_parse_hostport(s, len, &host, &port) == 0) {
			struct rd_node *nd = node_get(cl, host, port);

			free(host);
			if (nd)
				(*out)[n++] = nd;
		}
		s += len + (s[len] == ',');
	}
	return n;
}

/*
 * Re-read the slot map from the first node that answers.  seen is the
 * epoch the caller routed with: if another thread refreshed since, its
 * map is used instead of asking again.
 */
static int refresh(struct rd_cluster *cl, uint64_t seen)
{
	struct rd_node **cand = NULL, **tab;
	size_t n;
	int code = WSTORE_EUNAVAIL;

	pthread_mutex_lock(&cl->refresh_lock);
	if (cl->epoch != seen) {
		pthread_mutex_unlock(&cl->refresh_lock);
		return 0;
	}
	tab = calloc(NSLOTS, sizeof(*tab));
	n = tab ? candidates(cl, &cand) : 0;
	for (size_t i = 0; i < n && code; i++) {
		memset(tab, 0, NSLOTS * sizeof(*tab));
		code = ask_slots(cl, cand[i], tab);
		if (code &&
		    __atomic_load_n(&cand[i]->auth_failed, __ATOMIC_RELAXED)) {
			n = 1; /* report that, not "cannot reach" */
			break;
		}
	}
	if (!code) {
		pthread_mutex_lock(&cl->lock);
		memcpy(cl->slots, tab, sizeof(cl->slots));
		cl->epoch++;
		pthread_mutex_unlock(&cl->lock);
	} else if (!tab || !cand) {
		code = wstore__errc(-ENOMEM, "redis cluster map");
	} else if (n > 1) {
		code = wstore__err(
			WSTORE_EUNAVAIL,
			"cannot reach any redis cluster node (tried %zu; last: %s)",
			n, wstore_last_error());
	}
	pthread_mutex_unlock(&cl->refresh_lock);
	free(cand);
	free(tab);
	return code;
}

int rdc_open(struct rd_cluster **out, const char *seeds,
	     const struct rd_opts *o)
{
	struct rd_cluster *cl = calloc(1, sizeof(*cl));
	int r;

	if (!cl || !(cl->seeds = strdup(seeds))) {
		free(cl);
		return wstore__errc(-ENOMEM, "cannot open redis cluster");
	}
	if (!*seeds) {
		free(cl->seeds);
		free(cl);
		return wstore__err(WSTORE_EINVAL,
				   "invalid redis URL: no cluster nodes");
	}
	cl->opts = o;
	pthread_mutex_init(&cl->lock, NULL);
	pthread_mutex_init(&cl->refresh_lock, NULL);
	if ((r = refresh(cl, 0))) {
		rdc_free(cl);
		return r;
	}
	*out = cl;
	return 0;
}

void rdc_free(struct rd_cluster *cl)
{
	if (!cl)
		return;
	for (size_t i = 0; i < cl->nnodes; i++)
		rd_node_free(cl->nodes[i]);
	free(cl->nodes);
	free(cl->seeds);
	pthread_mutex_destroy(&cl->lock);
	pthread_mutex_destroy(&cl->refresh_lock);
	free(cl);
}

int rdc_masters(struct rd_cluster *cl, struct rd_node ***out, size_t *n)
{
	pthread_mutex_lock(&cl->lock);
	*n = 0;
	*out = malloc((cl->nnodes + 1) * sizeof(**out));
	for (size_t s = 0; *out && s < NSLOTS; s++) {
		size_t i = 0;

		while (cl->slots[s] && i < *n && (*out)[i] != cl->slots[s])
			i++;
		if (cl->slots[s] && i == *n)
			(*out)[(*n)++] = cl->slots[s];
	}
	pthread_mutex_unlock(&cl->lock);
	if (!*out)
		return wstore__errc(-ENOMEM, "redis cluster");
	return 0;
}

/* Run req on n (after ASKING when asking).  Connection failures, including
 * failing to connect, come back as RD_CONN_ERR, except refused
 * credentials, which no retry will fix. */
static int try_node(struct rd_node *n, struct rd_req *req, int asking)
{
	struct rd_conn *rc;
	int reused, r = rd_node_take(n, &rc, &reused);

	if (r) {
		if (__atomic_load_n(&n->auth_failed, __ATOMIC_RELAXED) ||
		    r != WSTORE_EUNAVAIL)
			return r;
		snprintf(req->err, sizeof(req->err), "%s", wstore_last_error());
		return RD_CONN_ERR;
	}
	if (asking) {
		const char *argv[] = { "ASKING", NULL };
		redisReply *a = rd_command(rc, argv);

		freeReplyObject(a);
		if (!a) {
			snprintf(req->err, sizeof(req->err), "%s",
				 rc->c->errstr);
			rd_node_give(n, rc, 1);
			return RD_CONN_ERR;
		}
	}
	r = rd_do(n, rc, req);
	rd_node_give(n, rc, r == RD_CONN_ERR);
	return r;
}

/* "MOVED 3999 127.0.0.1:6381" / "ASK ...": the target node, or NULL. */
static struct rd_node *redirect_target(struct rd_cluster *cl, const char *err,
				       unsigned *slot)
{
	const char *sp = strchr(err, ' '), *addr;
	struct rd_node *n = NULL;
	char *host;
	int port;

	if (!sp || !(addr = strchr(sp + 1, ' ')))
		return NULL;
	*slot = (unsigned)strtoul(sp + 1, NULL, 10) % NSLOTS;
	addr++;
	if (rd_parse_hostport(addr, strcspn(addr, " \r\n"), &host, &port))
		return NULL;
	n = node_get(cl, host, port);
	free(host);
	return n;
}

static int transient(const char *e)
{
	static const char *const list[] = { "CLUSTERDOWN", "TRYAGAIN",
					    "LOADING", "MASTERDOWN",
					    "READONLY" };

	for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++)
		if (strncmp(e, list[i], strlen(list[i])) == 0)
			return 1;
	return 0;
}

int rdc_run(struct rd_cluster *cl, struct rd_req *req)
{
	unsigned slot = rdc_slot(req->key, req->klen), s2;
	int64_t deadline = rd_now_ms() + cl->opts->command_ms;
	struct rd_node *n, *ask = NULL, *to;
	int r, waits = 0, hops = 0;
	uint64_t epoch;

	for (;;) {
		size_t had = req->resume;

		pthread_mutex_lock(&cl->lock);
		n = ask ? ask : cl->slots[slot];
		epoch = cl->epoch;
		pthread_mutex_unlock(&cl->lock);
		if (!n) {
			r = RD_CONN_ERR;
			snprintf(req->err, sizeof(req->err),
				 "no node serves slot %u", slot);
		} else {
			r = try_node(n, req, ask != NULL);
		}
		ask = NULL;
		if (r <= 0)
			return r;
		if (r == RD_REPLY_ERR && hops < 16 &&
		    (!strncmp(req->err, "MOVED ", 6) ||
		     !strncmp(req->err, "ASK ", 4)) &&
		    (to = redirect_target(cl, req->err, &s2))) {
			hops++;
			if (req->err[0] == 'A') {
				ask = to;
				continue;
			}
			pthread_mutex_lock(&cl->lock);
			cl->slots[s2] = to;
			pthread_mutex_unlock(&cl->lock);
			/* usually more than one slot moved: re-read the map */
			refresh(cl, epoch);
			continue;
		}
		if (r == RD_REPLY_ERR && !transient(req->err))
			return rd_fail(n, req, r);
		if (rd_now_ms() >= deadline) {
			if (!n)
				return wstore__err(
					WSTORE_EUNAVAIL,
					"redis cluster is down: %s for '%s'",
					req->err, req->lkey);
			return rd_fail(n, req, r);
		}
		/* a GET cut mid-value that got further (it resumes where it
		 * was cut) waits the shortest time again, as on a standalone
		 * server: the link is flaky, not the node down */
		if (req->resume > had)
			waits = 0;
		rd_backoff(waits++);
		refresh(cl, epoch);
	}
}
