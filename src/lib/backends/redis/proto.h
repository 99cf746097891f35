/*
 * redis/proto.h - what the Redis backend's modules share.  Internal.
 *   conn.c     connections, pools, raw I/O
 *   cmd.c      backend operations as commands on one connection
 *   cluster.c  slot routing over a cluster
 *   backend.c  URLs, settings, standalone routing, the callbacks
 *
 * A node is one Redis server with a pool of connections.  A request
 * (struct rd_req) is one backend operation on one key; rd_do() runs it on a
 * connection and says whether it succeeded, failed for good, or hit a
 * server error reply or a broken connection that a router may retry
 * (RD_REPLY_ERR / RD_CONN_ERR, text in req->err).
 */
#ifndef WSTORE_REDIS_PROTO_H
#define WSTORE_REDIS_PROTO_H

#include <pthread.h>
#include <stdint.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <hiredis/hiredis.h>
#include <openssl/ssl.h>

#include "../helpers.h"

/* rd_do() results besides 0 and error codes (both > 0, never returned to
 * the backend's callers). */
#define RD_REPLY_ERR 1 /* server error reply, text in req->err */
#define RD_CONN_ERR 2  /* connection broken, text in req->err */

struct rd_opts {
	char *user;	/* NULL: AUTH with the password only */
	char *password; /* NULL: no AUTH */
	int db;
	int connect_ms;
	int command_ms;
	SSL_CTX *tls; /* rediss://: TLS with this context; NULL: plain */
	char *tls_ca; /* redis_tls_ca_file, for messages; NULL: system */
};

/* The TLS settings of a store (NULL: unset). */
struct rd_tls_files {
	const char *ca;
	const char *cert;
	const char *key;
};

struct rd_conn {
	redisContext *c;
	SSL *ssl; /* TLS over c->fd (nonblocking then), or NULL */
	struct rd_conn *next;
	int timeout_ms; /* the command timeout set on the socket, for messages
			 */
	int lost;	/* a setup command lost the connection (conn.c) */
};

struct rd_node {
	char *host; /* TCP host, or NULL */
	int port;
	char *path;	/* unix socket path, or NULL */
	char name[280]; /* "host:port" or the path, for messages */
	const struct rd_opts *opts;
	pthread_mutex_t lock; /* guards free */
	struct rd_conn *free;
	int nfree;
	/* set once by whichever thread connects first (atomic access) */
	int auth_failed;   /* the server refused our credentials */
	int probed;	   /* max_bulk asked for */
	uint64_t max_bulk; /* proto-max-bulk-len, 0 if unknown */
};

enum rd_op {
	RD_PUT,
	RD_PUT_NEW,
	RD_PUT_TTL, /* SET key value PX ttl_ms */
	RD_GET,
	RD_GET_RANGE,
	RD_SIZE,
	RD_REMOVE,
	RD_UPDATE
};

struct rd_req {
	enum rd_op op;
	const char *key; /* full Redis key (prefix included) */
	size_t klen;
	const char *lkey; /* logical key, for messages */
	const void *data; /* put: value */
	size_t len;	  /* put: value size; get_range: bytes */
	void *buf;	  /* get/get_range: destination */
	size_t cap;
	uint64_t off;	 /* get_range */
	uint64_t ttl_ms; /* put_ttl */
	size_t *out_len;
	uint64_t *out_size;
	/* a GET whose connection was lost mid-value: the first `resume`
	 * bytes of the `total`-byte value are in buf already, and the next
	 * attempt asks for the rest only (rd_read_bulk: `landed`, the bytes
	 * of the body read into buf before a lost connection, and `bulk`,
	 * the size its header announced, -1 before a header was read) */
	size_t resume, total, landed;
	long long bulk;
	wstore_update_fn fn;
	void *ctx;
	char err[256];
};

/* ---- conn.c: nodes ------------------------------------------------------ */

int rd_node_new(struct rd_node **out, const char *host, int port,
		const char *path, const struct rd_opts *o);
void rd_node_free(struct rd_node *n);
/* A connection to n, from the pool or new (connected, authenticated,
 * database selected).  0, or WSTORE_EUNAVAIL with the last error set. */
int rd_node_take(struct rd_node *n, struct rd_conn **out, int *reused);
/* Give a connection back; a broken one is closed instead. */
void rd_node_give(struct rd_node *n, struct rd_conn *rc, int broken);

/* ---- conn.c: I/O on one connection ------------------------------------- */

/* Mark a connection broken (rd_node_give then closes it), saying what
 * failed and strerror(err) if err; returns -1. */
int rd_broken(struct rd_conn *rc, const char *what, int err);
/* Copy rc's error into req->err; returns RD_CONN_ERR. */
int rd_conn_err(struct rd_req *req, const struct rd_conn *rc);
/* Send all of iov (modified).  0, or -1 with the connection broken. */
int rd_send_iov(struct rd_conn *rc, struct iovec *iov, int n);
/* Send ncmd (<= 4) pipelined commands, each a NULL-terminated argv with
 * its lengths. */
int rd_send_cmds(struct rd_conn *rc, int ncmd, const char **argv[],
		 const size_t *lens[]);
/* The next reply, or NULL with the connection broken. */
redisReply *rd_recv_reply(struct rd_conn *rc);
/* Send one command, return its reply (NULL: broken). */
redisReply *rd_command_argv(struct rd_conn *rc, const char **argv,
			    const size_t *lens);
/* Same with C-string arguments only (NULL-terminated argv). */
redisReply *rd_command(struct rd_conn *rc, const char **argv);
/*
 * Read a bulk string reply straight into buf: 0 with *out_n = its size
 * (*nil = 1 for a nil reply); WSTORE_ERANGE with *out_n set when larger
 * than cap; RD_REPLY_ERR or RD_CONN_ERR.
 */
int rd_read_bulk(struct rd_conn *rc, struct rd_req *req, void *buf, size_t cap,
		 size_t *out_n, int *nil);

/* Wait until rc's socket is ready for events (POLLIN, POLLOUT), at most
 * the connection's timeout, ending at once on wstore_interrupt.  0, or -1
 * with the connection broken ("what: timed out after N s"). */
int rd_wait_fd(struct rd_conn *rc, short events, const char *what);
/* Whatever bytes the server sent already (a parting error line), without
 * waiting; -1 when none. */
ssize_t rd_read_now(struct rd_conn *rc, void *buf, size_t len);

/* ---- tls.c -------------------------------------------------------------- */

/* A client context: CA file (NULL: the system store), client certificate
 * and key (both or neither).  0, or an error naming the file. */
int rd_tls_ctx_new(SSL_CTX **out, const struct rd_tls_files *f);
/* Handshake on rc's fresh socket (made nonblocking), verifying the
 * server's certificate and host name.  0, or an error (one line). */
int rd_tls_start(struct rd_node *n, struct rd_conn *rc);
/* Read at least one byte (waiting as rd_wait_fd); -1: broken. */
ssize_t rd_tls_read(struct rd_conn *rc, void *buf, size_t len);
/* Read what is there without waiting; -1 when nothing. */
ssize_t rd_tls_read_now(struct rd_conn *rc, void *buf, size_t len);
/* Write all of buf; 0, or -1 with the connection broken. */
int rd_tls_write(struct rd_conn *rc, const void *buf, size_t len);
void rd_tls_free(struct rd_conn *rc);

/* ---- cmd.c -------------------------------------------------------------- */

/* Run req on a connection of n; see the top of this file. */
int rd_do(struct rd_node *n, struct rd_conn *rc, struct rd_req *req);
/* Turn an RD_REPLY_ERR / RD_CONN_ERR into a final error code and message. */
int rd_fail(struct rd_node *n, struct rd_req *req, int rc);

/* One SCAN pass over node n for keys matching the glob pattern; fn gets
 * each key with skip bytes (the key prefix) removed. */
int rd_scan(struct rd_node *n, const char *pattern, size_t skip,
	    wstore_list_fn fn, void *ctx);

/* Parse "host:port", "[v6]:port" or "host" (port 6379) of n bytes at s;
 * *host is malloc'ed. */
int rd_parse_hostport(const char *s, size_t n, char **host, int *port);

/* Milliseconds on the monotonic clock. */
int64_t rd_now_ms(void);
/* Sleep for the attempt-th backoff step (a few ms growing to ~500 ms). */
void rd_backoff(int attempt);

/* ---- cluster.c ---------------------------------------------------------- */

struct rd_cluster;

/* Discover the cluster from a comma-separated "host:port,..." list. */
int rdc_open(struct rd_cluster **out, const char *seeds,
	     const struct rd_opts *o);
/* Route req by its key's slot, following redirections, and run it. */
int rdc_run(struct rd_cluster *cl, struct rd_req *req);
/* The current masters, for SCAN (array malloc'ed; nodes owned by cl). */
int rdc_masters(struct rd_cluster *cl, struct rd_node ***out, size_t *n);
void rdc_free(struct rd_cluster *cl);
/* Hash slot of a key (CRC16 of the key or its {hash tag}, mod 16384). */
unsigned rdc_slot(const char *key, size_t len);

#endif
