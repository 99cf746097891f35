/*
 * http.h - what the parts of the server share: the server and request
 * state, replies, name resolution for a request, the metrics counters.
 * Internal to src/serve/.
 */
#ifndef WSTORE_SERVE_HTTP_H
#define WSTORE_SERVE_HTTP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <jansson.h>
#include <microhttpd.h>

#include <wstore/read.h>
#include <wstore/wstore.h>

#include "../common/clock.h"
#include "parse.h"
#include "serve.h"

/* Status codes counted one by one in /metrics; the rest as "other". */
#define WSERVE_NCODES 12

struct wserve_ckpt_bytes {
	struct wserve_ckpt_bytes *next;
	uint64_t bytes;
	char id[];
};

struct wserve_metrics {
	atomic_uint_fast64_t requests[WSERVE_NCODES + 1];
	atomic_uint_fast64_t bytes;
	atomic_uint_fast64_t errors;	   /* 5xx replies and broken streams */
	atomic_uint_fast64_t store_reads;  /* blocks read from the store */
	atomic_uint_fast64_t shared_reads; /* block reads another one served */
	atomic_int connections;
	atomic_int inflight;
	pthread_mutex_t mu; /* guards per_ckpt */
	struct wserve_ckpt_bytes *per_ckpt;
};

/* An open checkpoint shared by the requests that read it (cache.c). */
struct wck {
	struct wck *next;
	wstore_checkpoint *ck; /* with its read lease */
	char *id;
	char commit[WSTORE_COMMIT_LEN + 1];
	int refs;		/* under the cache's lock */
	int dead;		/* a read failed: handed to no new request */
	pthread_mutex_t mu;	/* guards oids */
	char (*oids)[41];	/* git blob ids of files, "" until known */
	struct wblocks *blocks; /* blocks read once for every request */
};

/* Single flight for blocks of a store without files (blocks.c). */
struct wblocks;
/* ck: the checkpoint the blocks are of (for reading ahead, and the
 * blocks' buffers: wstore_read_buf_alloc); it must outlive wblocks_free. */
struct wblocks *wblocks_new(wstore_checkpoint *ck);
void wblocks_free(struct wblocks *bs);
/* Blocks read from the store so far, read ahead or for a request, by the
 * blocks of every checkpoint of the process. */
uint64_t wblocks_reads_total(void);
/* The checkpoint is dead (deleted or replaced): no block read before is
 * handed out again, every request reads the store (and fails). */
void wblocks_kill(struct wblocks *bs);
/* A response reading [start, end) of path through bs, so that the blocks
 * it has yet to reach are kept for it (NULL out of memory: reads work
 * without); freed with wblocks_cursor_free before bs is. */
struct wcursor;
struct wcursor *wblocks_cursor_new(struct wblocks *bs, const char *path,
				   uint64_t start, uint64_t end);
void wblocks_cursor_free(struct wblocks *bs, struct wcursor *c);
/* want bytes (at most to the end of its block) of f at off, where blocks
 * are bsize bytes, for the response of cursor cur (may be NULL): from the
 * read another request is making of the block, else read from the store
 * here; *out_shared 1 when another request's read served it.  0 with
 * *out_n bytes in dst, or a negative code with its message in err. */
int wblocks_read(struct wblocks *bs, struct wcursor *cur, wstore_file *f,
		 uint64_t bsize, uint64_t off, char *dst, size_t want,
		 size_t *out_n, int *out_shared, char *err, size_t errlen);

/* HTTPS material, read and checked before listening (tls.c). */
struct wserve_tls {
	int on;
	const char *cert_file, *key_file;
	char *cert; /* PEM texts, for libmicrohttpd */
	char *key;
	char *password; /* or NULL */
};

/* Read and check o->tls_cert and o->tls_key (nothing to do without
 * them); -1 after printing one line on what is wrong. */
int wtls_load(struct wserve_tls *t, const struct wserve_options *o);
void wtls_free(struct wserve_tls *t);

/* The connection slots (slots.c): the connection idle the longest gives
 * way when the last slot is taken. */
struct wslot;
struct wslots {
	pthread_mutex_t mu;
	struct wslot *head;
	unsigned open, closing, max;
	atomic_uint_fast64_t evicted; /* idle connections shut down */
};

void wslots_init(struct wslots *s, unsigned max);
void wslots_destroy(struct wslots *s);
/* A connection started on socket fd: its slot (NULL: out of memory, not
 * tracked), removed when it closes.  When it takes the last free slot,
 * the connection idle the longest (for half a second at least) is shut
 * down. */
void *wslots_add(struct wslots *s, int fd);
void wslots_remove(struct wslots *s, void *slot);
/* Its request's headers are in (busy 1), or it is done (0: idle). */
void wslots_busy(struct wslots *s, void *slot, int busy);
/* Called 4 times a second: while no slot is free, the connection idle
 * the longest is shut down. */
void wslots_sweep(struct wslots *s);

struct wserve {
	wstore_store *store;
	struct wcache *cache;
	struct wmirror *mirror; /* --upstream, else NULL */
	const struct wserve_options *o;
	struct wserve_tls tls;
	struct wserve_metrics m;
	struct wslots slots;
	unsigned char token_sha[32]; /* SHA-256 of o->token */
	unsigned header_timeout;     /* seconds */
	atomic_int stopping;	     /* SIGTERM came: answer 503, close */
	pthread_mutex_t log_mu;	     /* one line at a time on stderr */
	char log_last[512];	     /* libmicrohttpd's last message, */
	double log_at;		     /* when it was printed */
	unsigned long log_repeats;   /* and how often since */
};

/* One request, from its first call of the access handler to completion. */
struct wreq {
	atomic_int refs; /* the request, and a streaming body */
	struct wserve *sv;
	char method[8];
	char *url;    /* as received, for the log */
	double start; /* monotonic seconds */
	unsigned status;
	atomic_uint_fast64_t bytes; /* body bytes handed to MHD by readers */
	uint64_t whole_len; /* body the library sends whole (buffer, fd) */
	char *ckpt;	    /* checkpoint served, for metrics */
	char *body;	    /* POST body (paths-info), bounded */
	size_t body_len;
	int body_too_big;
	atomic_int failed;  /* a read from the store failed mid-body */
	const char *mirror; /* how the mirror answered (wmirror_outcome) */
	/* the checkpoint of an fd or mapped response, kept open (with its
	 * read lease) until the response is done */
	struct wck *hold;
};

/* ---- server.c ---------------------------------------------------------- */

/* Drop a reference to r; the last one frees it. */
void wreq_unref(struct wreq *r);
/* Queue resp with status (taking it over) and record the status. */
enum MHD_Result wreply(struct MHD_Connection *c, struct wreq *r,
		       unsigned status, struct MHD_Response *resp);
/* JSON body (j is taken over, may be NULL on allocation failure). */
enum MHD_Result wreply_json(struct MHD_Connection *c, struct wreq *r,
			    unsigned status, json_t *j);
/* {"error": msg} with X-Error-Code: code (when not NULL) and
 * X-Error-Message, as the Hub answers. */
enum MHD_Result wreply_error(struct MHD_Connection *c, struct wreq *r,
			     unsigned status, const char *code,
			     const char *msg);
/* A query argument, percent-decoded (malloc'ed), or NULL. */
char *wquery(struct MHD_Connection *c, const char *name);
/* "true", "True", "1" */
int wquery_true(struct MHD_Connection *c, const char *name);

/* ---- cache.c ----------------------------------------------------------- */

struct wcache;
/* Names resolved are reused for ttl seconds (0: none is kept). */
struct wcache *wcache_new(wstore_store *store, double ttl);
void wcache_free(struct wcache *c);
/*
 * The open checkpoint repo names at rev (a reference: give it back with
 * wck_put), resolved with wstore_resolve unless a live resolution is
 * kept.  Errors as wstore_resolve's and wstore_checkpoint_open's (*known
 * as its out_repo_known); no error is remembered.
 */
int wcache_get(struct wck **out, int *known, struct wcache *c, const char *repo,
	       const char *rev);
/* 1 when (repo, rev) names a checkpoint the cache keeps resolved. */
int wcache_has(struct wcache *c, const char *repo, const char *rev);
/* Whether t is a mirrored name the store cannot answer yet: this server
 * mirrors, t's names are UTF-8, and the cache holds no snapshot for it
 * (so the upstream's listing or a file flight answers). */
int wmirror_cold(struct wreq *r, const struct wtarget *t);
/* Give back a reference (NULL is fine); the last one closes it. */
void wck_put(struct wcache *c, struct wck *k);
/* A read of k failed (deleted, replaced, unreachable): no new request
 * gets it, and the names kept for it are forgotten. */
void wck_dead(struct wcache *c, struct wck *k);
/* Forget names whose time is up (closing checkpoints no one reads). */
void wcache_sweep(struct wcache *c);

/* The mirror the cache asks for names the store lacks (may be NULL). */
void wcache_set_mirror(struct wcache *c, struct wmirror *m);

/* ---- mirror.c ---------------------------------------------------------- */

struct wmirror;
struct wfflight; /* stream.c */
/* The mirror of o->upstream into s; a request waits for a fetch at most
 * header_timeout seconds. */
struct wmirror *wmirror_new(const struct wserve_options *o, wstore_store *s,
			    unsigned header_timeout);
/* Stops the mirror (wmirror_stop) and waits for its fetches to end. */
void wmirror_free(struct wmirror *m);
/*
 * The checkpoint id for (repo, rev) as the upstream names it (see
 * mirror.c): 1 when the name is not the mirror's (not a canonical Hub
 * repository id, not allowed: the caller resolves it in the store
 * alone); 0 with *out_id; WSTORE_EBUSY while its fetch still runs after
 * the wait (503 with Retry-After); WSTORE_ENOTFOUND when the upstream
 * has no such name; other errors with wmirror_error() saying why.
 */
int wmirror_get(char **out_id, struct wmirror *m, const char *repo,
		const char *rev);
/* A name the store answered (counted in /metrics). */
void wmirror_hit(struct wmirror *m);
/* The server stops: fetches under way are canceled (within about a
 * second; their clients get the error) and no new one starts.  Any
 * thread; m may be NULL. */
void wmirror_stop(struct wmirror *m);
/* Forget refs unused for an hour (they stay in the store). */
void wmirror_sweep(struct wmirror *m);
/* Why this thread's last wmirror_get failed, "" if it did not. */
const char *wmirror_error(void);
void wmirror_error_clear(void);
/* How this thread's last name was answered: "hit", "fetch" (waited for
 * the upstream), "refresh" (served while the upstream is asked again),
 * "stream" (a file served as it comes from the upstream), or NULL (not
 * through the mirror). */
const char *wmirror_outcome(void);
/* 1 when repo is a Hub repository id: ORG/NAME, each part 1 to 96 of
 * [A-Za-z0-9._-], not starting or ending with '.' or '-', no ".." or
 * "--". */
int wmirror_repo_canonical(const char *repo);
/*
 * A file of a name the mirror serves that the store cannot answer yet:
 * 1 when it is not the mirror's to stream (not a mirrored name, or the
 * store holds its checkpoint: serve it from there); 2 when the upstream
 * lists no such file at that commit; 0 with *out a reference to the
 * file's flight (wfflight_put it), started unless one runs; the wait
 * for the upstream's listing is at most the header timeout, then
 * WSTORE_EBUSY (503); other errors with wmirror_error() saying why.
 */
int wmirror_stream(struct wfflight **out, struct wmirror *m, const char *repo,
		   const char *rev, const char *path);
/* What the upstream listed at a commit the mirror is importing. */
struct wlisting {
	char commit[WSTORE_COMMIT_LEN + 1];
	size_t n;
	struct wlisting_file {
		char *path;
		uint64_t size;
		char oid[41], sha256[65]; /* sha256 "": not an LFS file */
	} * files;			  /* n, sorted by path */
};
/* The listing of a name the mirror serves that the store cannot answer
 * yet, for the model info of a partly mirrored snapshot: returns as
 * wmirror_stream does (never 2), with *out (wlisting_free it). */
int wmirror_listing(struct wlisting **out, struct wmirror *m, const char *repo,
		    const char *rev);
void wlisting_free(struct wlisting *l);
/* How long a request waits for the upstream (seconds). */
double wmirror_wait_s(const struct wmirror *m);
/* A response streamed (counted in /metrics; outcome "stream"). */
void wmirror_streamed(struct wmirror *m);
/* The mirror's /metrics lines (malloc'ed), NULL without one. */
char *wmirror_metrics_text(struct wmirror *m);

/* ---- stream.c ---------------------------------------------------------- */

/* One file of an upstream commit fetched on its own, spooled to disk and
 * read by every client that asks meanwhile (a file flight). */
struct wfflight;
struct wfflight_spec {
	const char *endpoint, *token, *repo, *commit;
	const wstore_hub_file *file; /* copied */
	const atomic_int *stopping;  /* the server stops: cancel */
	atomic_uint_fast64_t *bytes; /* upstream bytes, counted */
	/* called by the flight's thread when the fetch ended (rc 0: the
	 * bytes verified), before it drops its reference */
	void (*on_end)(void *ctx, struct wfflight *ff, int rc);
	void *ctx;
};
/* Start fetching in a thread of its own: a flight holding one reference
 * for the caller, or NULL with *err. */
struct wfflight *wfflight_start(const struct wfflight_spec *s, int *err);
void wfflight_ref(struct wfflight *ff);
/* Drop a reference (NULL is fine); the last closes the spool. */
void wfflight_put(struct wfflight *ff);
const wstore_hub_file *wfflight_file(const struct wfflight *ff);
/* why a flight that ended failed (its log line), once it has ended */
const char *wfflight_msg(const struct wfflight *ff);
const char *wfflight_commit(const struct wfflight *ff);
/* 1 when the fetch ended, with *rc its outcome (0 verified). */
int wfflight_done(struct wfflight *ff, int *rc);
/* Wait for the fetch to end (it ends within about a second once the
 * server stops): 0 with *out_fd a new descriptor of the verified spool,
 * or its error. */
int wfflight_wait_done(int *out_fd, struct wfflight *ff);
/* Wait at most wait_s (and as long as bytes come) until byte off of a
 * response ending before end can be read (the last one only once the
 * file is verified; off >= end: once verified): 0, WSTORE_EBUSY after
 * the wait, or the fetch's error; err says why. */
int wfflight_wait(struct wfflight *ff, uint64_t off, uint64_t end,
		  double wait_s, char *err, size_t errlen);
/* Up to max bytes from off for a response ending before end, waiting
 * while bytes come (at most a minute without one): their count, or a
 * negative code with err saying why (the response is to be cut). */
ssize_t wfflight_read(struct wfflight *ff, char *buf, size_t max, uint64_t off,
		      uint64_t end, char *err, size_t errlen);

/* ---- api.c ------------------------------------------------------------- */

/*
 * The checkpoint t->repo names at t->rev (a reference: wck_put it); on
 * failure reply (404 RepoNotFound / RevisionNotFound, 503 with
 * Retry-After when the store fails) and return NULL with *ret set.
 */
struct wck *wopen_target(struct MHD_Connection *c, struct wreq *r,
			 const struct wtarget *t, enum MHD_Result *ret);
/* ---- gitoid.c ---------------------------------------------------------- */

/* Weight files and files over 10 MiB (with a SHA-256) are what the Hub
 * keeps in LFS: an lfs record, their SHA-256 as ETag, a pointer on /raw/. */
int wfile_is_lfs(const wstore_file_info *fi);
/* The LFS pointer text of fi into out (cap >= 256); its length. */
size_t wlfs_pointer(char *out, size_t cap, const wstore_file_info *fi);
/* The git blob id of fi in k (of its pointer for an LFS file): the tree
 * oid, and the ETag of a file kept in git.  0, or the store's error. */
int wfile_oid(char out[41], struct wck *k, const wstore_file_info *fi);

/* GET /api/models/{repo}[/revision/{rev}] */
enum MHD_Result wapi_info(struct MHD_Connection *c, struct wreq *r,
			  const struct wtarget *t);
/* GET /api/models/{repo}/refs */
enum MHD_Result wapi_refs(struct MHD_Connection *c, struct wreq *r,
			  const struct wtarget *t);
/* GET /api/models/{repo}/tree/{rev}[/{path}] */
enum MHD_Result wapi_tree(struct MHD_Connection *c, struct wreq *r,
			  const struct wtarget *t);
/* POST /api/models/{repo}/paths-info/{rev} */
enum MHD_Result wapi_paths_info(struct MHD_Connection *c, struct wreq *r,
				const struct wtarget *t);

/* ---- files.c ----------------------------------------------------------- */

/* GET/HEAD /{repo}/resolve/{rev}/{path}, and /raw/ (raw != 0) */
enum MHD_Result wfiles_resolve(struct MHD_Connection *c, struct wreq *r,
			       const struct wtarget *t, int raw);

/* ---- metrics.c --------------------------------------------------------- */

void wmetrics_init(struct wserve_metrics *m);
void wmetrics_free(struct wserve_metrics *m);
/* Count a finished request. */
void wmetrics_request(struct wserve_metrics *m, unsigned status, uint64_t bytes,
		      const char *ckpt, int broken);
/* GET /metrics */
enum MHD_Result wmetrics_reply(struct MHD_Connection *c, struct wreq *r);

#endif
