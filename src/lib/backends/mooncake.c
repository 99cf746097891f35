/*
 * mooncake.c - the Mooncake Store backend.  wstore is a pure client
 * (global segment size 0) of a Mooncake Store cluster, reached through
 * Mooncake's C library, libmooncake_store.so, which is loaded with dlopen
 * when a store is opened: wstore builds and runs with no Mooncake
 * installed, and only `--store mooncake` needs it.  The functions used are
 * declared here from Mooncake's C API as docs/mooncake.md lists it;
 * nothing is copied from Mooncake.
 *
 * Semantics relied on (docs/mooncake.md, "What wstore relies on"):
 *  - put is write-once, so the backend is WRITE_ONCE with no upsert: the
 *    front end replaces a mutable object by a forced remove then a put,
 *    and builds its index lock on put + read back (no put_new, no update);
 *  - there is no listing (list is NULL, gc is unavailable);
 *  - a read grants a ~10 s lease that makes a non-forced remove fail with
 *    -706: such removes are retried with backoff for up to 12 s
 *    ($WSTORE_MOONCAKE_LEASE_WAIT_MS), then reported as WSTORE_EBUSY;
 *  - a zero-length value cannot be stored (-600): put refuses len 0;
 *  - weights are stored hard-pinned with replica_num replicas;
 *  - a key whose put is in progress answers -703; one whose writer died
 *    stays so until the master discards the write (see unstick);
 *  - setup retries an unreachable master for ~90 s: a bounded TCP connect
 *    to it comes first (mc_probe_master);
 *  - glog writes to stderr: raised to FATAL after dlopen (mc_logging).
 * Signals are the executables' business (Py_IsInitialized,
 * src/common/embed.c).
 *
 * Buffers: put_from and get_into move data from and to buffers registered
 * with the client, and registering is costly (RDMA memory registration),
 * so it is done once per buffer.  The backend keeps a pool of registered
 * buffers, one in use per concurrent call: a call takes one (growing it,
 * with unregister + register, when it is too small), copies the caller's
 * data in (put) or out (get), and gives it back.  The copy costs a memcpy
 * per chunk (far cheaper than the network: docs/performance.md), and
 * spares us from registering caller buffers whose lifetime we cannot
 * know.  The pool holds at most as many buffers as there were calls at
 * once.  Callers
 * that keep chunk buffers for a whole import or pull get registered ones
 * from buf_alloc instead, and put and get use those in place.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../common/clock.h"
#include "helpers.h"

#define MC_DEFAULT_LIBRARY "libmooncake_store.so"
#define MC_LOCAL_BUFFER (128ull << 20)
#define MC_LEASE_WAIT_MS 12000
/* a live writer finishes a put in well under this */
#define MC_READ_WAIT_MS 3000
/* the master discards a dead writer's put some seconds after its
 * put_start_discard_timeout_sec (30 s by default) */
#define MC_WRITE_WAIT_MS 60000
#define MC_BUF_MIN (1u << 20)
#define MC_HUGE ((size_t)2 << 20) /* a transparent huge page */
#define MC_CONNECT_TIMEOUT_MS 3000
/* bound on one master RPC (Mooncake's own default is 30 s) */
#define MC_RPC_TIMEOUT_MS 10000
/* setup attempts (Mooncake's own default) */
#define MC_SETUP_ATTEMPTS 20
/* glog's minimum level (gflags variable fLI::FLAGS_minloglevel) */
#define MC_GLOG_MINLEVEL "_ZN3fLI17FLAGS_minloglevelE"
#define MC_GLOG_FATAL 3

/* Mooncake error codes (docs/mooncake.md). */
#define MC_INTERNAL (-1)
#define MC_NO_SPACE (-200)
#define MC_INVALID_PARAMS (-600)
#define MC_REPLICA_NOT_READY (-703)
#define MC_NOT_FOUND (-704)
#define MC_EXISTS (-705)
#define MC_LEASED (-706)
#define MC_LEASE_EXPIRED (-707) /* the read outlasted its lease */
#define MC_TRANSFER_FAIL (-800)
#define MC_RPC_FAIL (-900)
#define MC_RPC_TIMEOUT (-901)

/* Layout of Mooncake's replicate config, in this order. */
struct mc_replicate_config {
	size_t replica_num;
	int with_soft_pin;
	int with_hard_pin;
	const char **preferred_segments;
	size_t preferred_segments_count;
};

/* The functions of the C API that wstore uses. */
struct mc_api {
	void *(*create)(void);
	void (*destroy)(void *h);
	int (*setup)(void *h, const char *local_hostname,
		     const char *metadata_server, uint64_t global_segment_size,
		     uint64_t local_buffer_size, const char *protocol,
		     const char *device_name, const char *master_server_addr);
	int (*put_from)(void *h, const char *key, void *buf, size_t size,
			const struct mc_replicate_config *cfg);
	int64_t (*get_into)(void *h, const char *key, void *buf, size_t size);
	int (*batch_get_into)(void *h, const char **keys, void **bufs,
			      const size_t *sizes, size_t count,
			      int64_t *results);
	int64_t (*get_size)(void *h, const char *key);
	int (*remove)(void *h, const char *key, int force);
	int (*register_buffer)(void *h, void *buf, size_t size);
	int (*unregister_buffer)(void *h, void *buf);
};

static const struct {
	const char *name;
	size_t off;
} mc_symbols[] = {
	{ "mooncake_store_create", offsetof(struct mc_api, create) },
	{ "mooncake_store_destroy", offsetof(struct mc_api, destroy) },
	{ "mooncake_store_setup", offsetof(struct mc_api, setup) },
	{ "mooncake_store_put_from", offsetof(struct mc_api, put_from) },
	{ "mooncake_store_get_into", offsetof(struct mc_api, get_into) },
	{ "mooncake_store_batch_get_into",
	  offsetof(struct mc_api, batch_get_into) },
	{ "mooncake_store_get_size", offsetof(struct mc_api, get_size) },
	{ "mooncake_store_remove", offsetof(struct mc_api, remove) },
	{ "mooncake_store_register_buffer",
	  offsetof(struct mc_api, register_buffer) },
	{ "mooncake_store_unregister_buffer",
	  offsetof(struct mc_api, unregister_buffer) },
};

/* A buffer registered with the client. */
struct mc_buf {
	struct mc_buf *next;
	void *mem;
	size_t cap;
};

struct mc_backend {
	wstore_backend base;
	struct mc_api api;
	void *dl;
	void *h;      /* client handle */
	char *master; /* master_server_addr, for messages */
	struct mc_replicate_config rcfg;
	uint64_t lease_wait_ms;
	uint64_t read_wait_ms;	/* a get waiting out a put in progress */
	uint64_t write_wait_ms; /* a remove waiting out a dead writer */
	int connect_ms;		/* bound on reaching the master at open */
	int rpc_ms;		/* bound on one master RPC */
	int log_stderr;		/* leave Mooncake's glog output on stderr */
	pthread_mutex_t lock;	/* guards idle and lent */
	struct mc_buf *idle;	/* registered buffers not in use */
	struct mc_buf *lent;	/* registered buffers buf_alloc handed out */
};

/* ---- errors ------------------------------------------------------------ */

/* Turn a negative Mooncake code from operation what ("read", ...) on key
 * into a wstore code and message. */
static int mc_fail(struct mc_backend *b, int64_t rc, const char *what,
		   const char *key)
{
	const char *m = b->master;

	switch (rc) {
	case MC_NOT_FOUND:
		return wstore__err(WSTORE_ENOTFOUND,
				   "mooncake object '%s' not found", key);
	case MC_EXISTS:
		return wstore__err(WSTORE_EEXISTS,
				   "mooncake object '%s' already exists", key);
	case MC_LEASED:
		return wstore__err(WSTORE_EBUSY,
				   "object '%s' is leased (in use); "
				   "retry later",
				   key);
	case MC_REPLICA_NOT_READY:
		return wstore__err(WSTORE_EBUSY,
				   "object '%s' is still being written; "
				   "retry later",
				   key);
	case MC_LEASE_EXPIRED:
		return wstore__err(WSTORE_EBUSY,
				   "cannot %s '%s': the read took longer than "
				   "the master's lease (default_kv_lease_ttl); "
				   "retry later",
				   what, key);
	case MC_TRANSFER_FAIL:
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot %s '%s': transfer to a mooncake "
				   "storage node failed (is the node down? "
				   "master '%s')",
				   what, key, m);
	case MC_RPC_FAIL:
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot %s '%s': rpc to mooncake master "
				   "'%s' failed",
				   what, key, m);
	case MC_RPC_TIMEOUT:
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot %s '%s': rpc to mooncake master "
				   "'%s' timed out",
				   what, key, m);
	case MC_NO_SPACE:
		return wstore__err(-ENOSPC,
				   "cannot %s '%s': no space in mooncake "
				   "store (master '%s'): no storage node, or "
				   "the pool is full",
				   what, key, m);
	case MC_INVALID_PARAMS:
		return wstore__err(WSTORE_EINVAL,
				   "cannot %s '%s': mooncake refused the "
				   "request (invalid parameters, -600)",
				   what, key);
	}
	return wstore__err(-EIO,
			   "cannot %s '%s': mooncake error %" PRId64
			   " (master '%s')",
			   what, key, rc, m);
}

/* ---- registered buffer pool -------------------------------------------- */

static void buf_drop(struct mc_backend *b, struct mc_buf *x)
{
	if (!x)
		return;
	if (x->mem) {
		b->api.unregister_buffer(b->h, x->mem);
		free(x->mem);
	}
	free(x);
}

/*
 * Memory for a registered buffer.  Big ones are 2 MiB aligned and asked
 * for transparent huge pages: the first touch of fresh memory (the read of
 * a chunk into it) otherwise costs a page fault every 4 KiB, slower than
 * hashing the chunk (docs/performance.md).
 */
static void *mc_mem_alloc(size_t cap)
{
	size_t align = cap >= MC_HUGE ? MC_HUGE : 4096;
	void *p = NULL;

	if (posix_memalign(&p, align, cap) != 0)
		return NULL;
	if (cap >= MC_HUGE)
		madvise(p, cap, MADV_HUGEPAGE);
	return p;
}

/* Make x (cap 0 or registered) a registered buffer of at least need. */
static int buf_grow(struct mc_backend *b, struct mc_buf *x, size_t need,
		    const char *key)
{
	size_t cap = MC_BUF_MIN;
	int rc;

	while (cap < need)
		cap *= 2;
	if (x->mem) {
		b->api.unregister_buffer(b->h, x->mem);
		free(x->mem);
		x->mem = NULL;
		x->cap = 0;
	}
	if (!(x->mem = mc_mem_alloc(cap))) {
		return wstore__errc(-ENOMEM,
				    "cannot allocate a %zu-byte "
				    "buffer for '%s'",
				    cap, key);
	}
	rc = b->api.register_buffer(b->h, x->mem, cap);
	if (rc != 0) {
		free(x->mem);
		x->mem = NULL;
		return mc_fail(b, rc, "register a buffer for", key);
	}
	x->cap = cap;
	return 0;
}

/* Take an idle buffer of at least need bytes (growing one if none is big
 * enough); give it back with buf_put. */
static int buf_take(struct mc_backend *b, size_t need, struct mc_buf **out,
		    const char *key)
{
	struct mc_buf **pp, *x = NULL;
	int rc;

	pthread_mutex_lock(&b->lock);
	for (pp = &b->idle; *pp; pp = &(*pp)->next) {
		if ((*pp)->cap >= need)
			break;
	}
	if (!*pp && b->idle)
		pp = &b->idle;
	if (*pp) {
		x = *pp;
		*pp = x->next;
	}
	pthread_mutex_unlock(&b->lock);
	if (!x && !(x = calloc(1, sizeof(*x))))
		return wstore__errc(-ENOMEM, "cannot read or write '%s'", key);
	if (x->cap < need && (rc = buf_grow(b, x, need, key)) != 0) {
		buf_drop(b, x);
		return rc;
	}
	*out = x;
	return 0;
}

static void buf_put(struct mc_backend *b, struct mc_buf *x)
{
	pthread_mutex_lock(&b->lock);
	x->next = b->idle;
	b->idle = x;
	pthread_mutex_unlock(&b->lock);
}

/*
 * Buffers handed to the caller (buf_alloc): chunk buffers of an import or
 * a pull that put and get then use in place, with no bounce copy.
 */
static void *mc_buf_alloc(wstore_backend *wb, size_t size)
{
	struct mc_backend *b = (struct mc_backend *)wb;
	struct mc_buf *x = calloc(1, sizeof(*x));

	/* no buffer is no error: the caller falls back to plain memory */
	if (!x || buf_grow(b, x, size ? size : 1, "a chunk buffer") != 0) {
		free(x);
		return NULL;
	}
	pthread_mutex_lock(&b->lock);
	x->next = b->lent;
	b->lent = x;
	pthread_mutex_unlock(&b->lock);
	return x->mem;
}

static void mc_buf_free(wstore_backend *wb, void *p)
{
	struct mc_backend *b = (struct mc_backend *)wb;
	struct mc_buf **pp, *x = NULL;

	pthread_mutex_lock(&b->lock);
	for (pp = &b->lent; *pp; pp = &(*pp)->next)
		if ((*pp)->mem == p) {
			x = *pp;
			*pp = x->next;
			break;
		}
	pthread_mutex_unlock(&b->lock);
	if (x)
		buf_drop(b, x);
	else
		free(p);
}

/* Whether [p, p + n) lies in one buffer of buf_alloc's. */
static int is_lent(struct mc_backend *b, const void *p, size_t n)
{
	uintptr_t c = (uintptr_t)p;
	int found = 0;

	pthread_mutex_lock(&b->lock);
	for (struct mc_buf *x = b->lent; x && !found; x = x->next) {
		uintptr_t m = (uintptr_t)x->mem;

		found = c >= m && n <= x->cap && c - m <= x->cap - n;
	}
	pthread_mutex_unlock(&b->lock);
	return found;
}

/* ---- waiting ----------------------------------------------------------- */

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000),
			       (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* A bounded wait with backoff: steps of 10 ms doubling to 1 s. */
struct mc_wait {
	uint64_t waited, step, limit;
};

#define MC_WAIT(limit_ms)                                                      \
	{                                                                      \
		0, 10, (limit_ms)                                              \
	}

/* Sleep one more step; 0 when the time is up. */
static int wait_more(struct mc_wait *w)
{
	uint64_t st = w->step;

	if (w->waited >= w->limit)
		return 0;
	if (st > w->limit - w->waited)
		st = w->limit - w->waited;
	sleep_ms(st);
	w->waited += st;
	w->step = w->step * 2 > 1000 ? 1000 : w->step * 2;
	return 1;
}

/* ---- callbacks --------------------------------------------------------- */

static int mc_put(wstore_backend *wb, const char *key, const void *data,
		  size_t len)
{
	struct mc_backend *b = (struct mc_backend *)wb;
	struct mc_buf *x;
	int rc;

	if (len == 0)
		return wstore__err(WSTORE_EINVAL,
				   "cannot store an empty value "
				   "under '%s': mooncake refuses zero-length "
				   "objects",
				   key);
	if (is_lent(b, data, len)) {
		/* registered already: Mooncake reads it in place */
		rc = b->api.put_from(b->h, key, (void *)data, len, &b->rcfg);
		return rc == 0 ? 0 : mc_fail(b, rc, "write", key);
	}
	rc = buf_take(b, len, &x, key);
	if (rc != 0)
		return rc;
	memcpy(x->mem, data, len);
	rc = b->api.put_from(b->h, key, x->mem, len, &b->rcfg);
	buf_put(b, x);
	return rc == 0 ? 0 : mc_fail(b, rc, "write", key);
}

/*
 * A key whose put is in progress answers -703 ("replica not ready") to
 * reads.  Another writer's put finishes within milliseconds, so reads wait
 * it out for up to read_wait_ms; a writer that died leaves the key in that
 * state until the master discards the write (see mc_remove).
 */
static int64_t size_of(struct mc_backend *b, const char *key)
{
	struct mc_wait w = MC_WAIT(b->read_wait_ms);
	int64_t n;

	while ((n = b->api.get_size(b->h, key)) == MC_REPLICA_NOT_READY &&
	       wait_more(&w))
		;
	return n;
}

static int mc_size(wstore_backend *wb, const char *key, uint64_t *out)
{
	struct mc_backend *b = (struct mc_backend *)wb;
	int64_t n = size_of(b, key);

	if (n < 0)
		return mc_fail(b, n, "read the size of", key);
	*out = (uint64_t)n;
	return 0;
}

/*
 * Read key into buf (capacity cap) through a registered buffer.  The value
 * may be replaced (forced remove + put) between get_size and get_into, so
 * the size get_into returns is the one that counts; a value that grew past
 * the registered buffer (-600) is retried with its new size.
 */
static int mc_get(wstore_backend *wb, const char *key, void *buf, size_t cap,
		  size_t *out_len)
{
	struct mc_backend *b = (struct mc_backend *)wb;
	struct mc_buf *x;
	int64_t size, n;
	int rc;

	for (int attempt = 0;; attempt++) {
		size = size_of(b, key);
		if (size < 0)
			return mc_fail(b, size, "read", key);
		*out_len = (size_t)size;
		if ((uint64_t)size > cap)
			break;
		if (size == 0)
			return 0;
		if (is_lent(b, buf, cap)) {
			/* registered already: Mooncake writes it in place */
			n = b->api.get_into(b->h, key, buf, cap);
		} else {
			rc = buf_take(b, (size_t)size, &x, key);
			if (rc != 0)
				return rc;
			n = b->api.get_into(b->h, key, x->mem, x->cap);
			if (n >= 0 && (uint64_t)n <= cap)
				memcpy(buf, x->mem, (size_t)n);
			buf_put(b, x);
		}
		/* a read slower than the lease is not guaranteed whole */
		if ((n == MC_INVALID_PARAMS || n == MC_REPLICA_NOT_READY ||
		     n == MC_LEASE_EXPIRED) &&
		    attempt < 3)
			continue;
		if (n < 0)
			return mc_fail(b, n, "read", key);
		*out_len = (size_t)n;
		if ((uint64_t)n > cap)
			break;
		return 0;
	}
	return wstore__err(WSTORE_ERANGE,
			   "mooncake object '%s' holds %zu "
			   "bytes, more than the %zu-byte buffer",
			   key, *out_len, cap);
}

/*
 * Several whole chunks in one batch_get_into request (one round trip to
 * the master and the transfer engine instead of n).  Each destination must
 * be registered memory: the values land in pooled registered buffers and
 * are copied out, as in mc_get.
 */
static int mc_get_many(wstore_backend *wb, size_t n, const char *const *keys,
		       void *const *bufs, const size_t *caps, size_t *out_lens,
		       int *out_rcs)
{
	struct mc_backend *b = (struct mc_backend *)wb;
	struct mc_buf *x[16] = { 0 };
	void *mems[16] = { 0 };
	size_t sizes[16] = { 0 }, got = 0;
	int64_t res[16];
	int rc = 0;

	if (n > 16)
		return wstore__err(WSTORE_EINVAL, "mooncake: batch of %zu", n);
	for (; got < n && rc == 0; got++) {
		rc = buf_take(b, caps[got] ? caps[got] : 1, &x[got], keys[got]);
		if (rc == 0) {
			mems[got] = x[got]->mem;
			sizes[got] = x[got]->cap;
		}
	}
	if (rc == 0 && (rc = b->api.batch_get_into(b->h, (const char **)keys,
						   mems, sizes, n, res)) != 0)
		rc = mc_fail(b, rc, "read", keys[0]);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		out_lens[i] = res[i] > 0 ? (size_t)res[i] : 0;
		if (res[i] == MC_REPLICA_NOT_READY ||
		    res[i] == MC_LEASE_EXPIRED)
			out_rcs[i] = mc_get(wb, keys[i], bufs[i], caps[i],
					    &out_lens[i]);
		else if (res[i] < 0)
			out_rcs[i] = mc_fail(b, res[i], "read", keys[i]);
		else if ((uint64_t)res[i] > caps[i])
			out_rcs[i] = wstore__err(
				WSTORE_ERANGE,
				"mooncake object '%s' is larger than %zu bytes",
				keys[i], caps[i]);
		else
			out_rcs[i] = 0,
			memcpy(bufs[i], x[i]->mem, (size_t)res[i]);
	}
	for (size_t i = 0; i < got; i++)
		if (x[i])
			buf_put(b, x[i]);
	return rc;
}

/*
 * A key whose writer died in the middle of a put stays "being written"
 * (-703): a remove, forced or not, fails, and a put returns 0 without
 * writing, until the master discards the unfinished write
 * (put_start_discard_timeout_sec, 30 s by default) and a new put replaces
 * it.  So: tell the user, then put a one-byte placeholder and remove again,
 * with backoff, for up to write_wait_ms.
 */
static int unstick(struct mc_backend *b, const char *key, int force)
{
	struct mc_wait w = MC_WAIT(b->write_wait_ms);
	struct mc_buf *x;
	int rc;

	wstore_backend_notice(&b->base,
			      "mooncake object '%s' was left half-written by "
			      "a writer that stopped; waiting up to %" PRIu64
			      " s for the master to discard it",
			      key, (b->write_wait_ms + 999) / 1000);
	rc = buf_take(b, 1, &x, key);
	if (rc != 0)
		return rc;
	*(char *)x->mem = 0;
	w.step = 100;
	do {
		b->api.put_from(b->h, key, x->mem, 1, &b->rcfg);
		rc = b->api.remove(b->h, key, force);
	} while (rc == MC_REPLICA_NOT_READY && wait_more(&w));
	buf_put(b, x);
	if (rc == 0 || rc == MC_NOT_FOUND)
		return rc == 0 ? 0 : mc_fail(b, rc, "remove", key);
	if (rc != MC_REPLICA_NOT_READY)
		return mc_fail(b, rc, "remove", key);
	return wstore__err(WSTORE_EBUSY,
			   "mooncake object '%s' is still being written after "
			   "%" PRIu64 " s: its writer may be alive, or the "
			   "master keeps unfinished writes longer "
			   "(put_start_discard_timeout_sec); retry later",
			   key, w.waited / 1000);
}

/* A non-forced remove of a leased object (-706) is retried with backoff
 * until the lease has had time to expire, then reported as busy. */
static int mc_remove(wstore_backend *wb, const char *key, int force)
{
	struct mc_backend *b = (struct mc_backend *)wb;
	uint64_t waited = 0, step = 50;
	int rc;

	for (;;) {
		rc = b->api.remove(b->h, key, force ? 1 : 0);
		if (rc == 0)
			return 0;
		if (rc == MC_REPLICA_NOT_READY)
			return unstick(b, key, force ? 1 : 0);
		if (rc != MC_LEASED || waited >= b->lease_wait_ms)
			return mc_fail(b, rc, "remove", key);
		if (step > b->lease_wait_ms - waited)
			step = b->lease_wait_ms - waited;
		sleep_ms(step);
		waited += step;
		step = step * 2 > 2000 ? 2000 : step * 2;
	}
}

static void mc_free(wstore_backend *wb)
{
	struct mc_backend *b = (struct mc_backend *)wb;

	if (!b)
		return;
	while (b->idle) {
		struct mc_buf *x = b->idle;

		b->idle = x->next;
		buf_drop(b, x);
	}
	/* buf_alloc's, if the caller leaked them */
	while (b->lent) {
		struct mc_buf *x = b->lent;

		b->lent = x->next;
		buf_drop(b, x);
	}
	if (b->h)
		b->api.destroy(b->h);
	/* loaded with RTLD_NODELETE: a C++ client may leave thread-local
	 * state behind whose destructors must find the code still mapped */
	if (b->dl)
		dlclose(b->dl);
	pthread_mutex_destroy(&b->lock);
	free(b->master);
	free(b);
}

/*
 * A pure client holds nothing on the cluster that destroy would give back
 * (no segment is mounted; objects and their leases belong to the master),
 * and destroy spends about a second joining a listener thread that polls
 * its stop flag once a second.  When the process is about to _exit, the
 * client, its threads and its registered buffers are left to the kernel.
 */
static void mc_free_exiting(wstore_backend *wb)
{
	(void)wb;
}

/* ---- open -------------------------------------------------------------- */

static const char *cfg_str(const wstore_config *cfg, const char *key,
			   const char *def)
{
	const char *v = cfg ? wstore_config_get(cfg, key) : NULL;

	return v && *v ? v : def;
}

static int mc_load(struct mc_backend *b, const char *lib)
{
	dlerror();
	b->dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!b->dl)
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot load mooncake "
				   "client library '%s': %s",
				   lib, dlerror());
	for (size_t i = 0; i < sizeof(mc_symbols) / sizeof(*mc_symbols); i++) {
		void *sym = dlsym(b->dl, mc_symbols[i].name);

		if (!sym)
			return wstore__err(WSTORE_EUNAVAIL,
					   "mooncake client "
					   "library '%s' lacks symbol '%s'",
					   lib, mc_symbols[i].name);
		/* POSIX: function and object pointers have the same size */
		memcpy((char *)&b->api + mc_symbols[i].off, &sym, sizeof(sym));
	}
	return 0;
}

/* ---- signals, logging, reaching the master ----------------------------- */

/*
 * Mooncake logs through glog to stderr (dozens of lines per command, and
 * an "error" for every client start).  Unless mooncake_log is "stderr",
 * glog's minimum level is raised to FATAL right after loading, before
 * Mooncake logs anything; Mooncake's own MC_LOG_LEVEL, read when the
 * library loads, does not override it.  A library without the variable
 * (another glog) is left alone.
 */
static void mc_logging(struct mc_backend *b)
{
	int *minlevel;

	if (b->log_stderr)
		return;
	minlevel = dlsym(b->dl, MC_GLOG_MINLEVEL);
	if (minlevel)
		*minlevel = MC_GLOG_FATAL;
}

/* Split "host:port" or "[v6]:port"; 0 when addr has another form (an
 * etcd:// or other high-availability address is left to Mooncake). */
static int split_hostport(const char *addr, char *host, size_t hcap, char *port,
			  size_t pcap)
{
	const char *colon = strrchr(addr, ':'), *h = addr;
	size_t hl;

	if (!colon || strstr(addr, "://") || strchr(addr, ';') ||
	    strchr(addr, ','))
		return 0;
	hl = (size_t)(colon - addr);
	if (*h == '[' && hl >= 2 && h[hl - 1] == ']')
		h++, hl -= 2;
	if (hl == 0 || hl >= hcap || strlen(colon + 1) >= pcap || !colon[1] ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return 0;
	memcpy(host, h, hl);
	host[hl] = '\0';
	strcpy(port, colon + 1);
	return 1;
}

/* Connect to one address within ms: 0, or an errno value. */
static int try_connect(const struct addrinfo *ai, int ms)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
			ai->ai_protocol),
	    err = 0;
	socklen_t len = sizeof(err);
	struct pollfd p;

	if (fd < 0)
		return errno;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		err = errno;
		if (err == EINPROGRESS) {
			p.fd = fd;
			p.events = POLLOUT;
			err = poll(&p, 1, ms) == 1 ? 0 : ETIMEDOUT;
			if (!err && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err,
					       &len) != 0)
				err = errno;
		}
	}
	close(fd);
	return err;
}

/*
 * Mooncake's setup retries an unreachable master for about 90 s.  A TCP
 * connect to the master's RPC port first, bounded by connect_timeout_ms,
 * turns that into one clear error within seconds.
 */
static int mc_probe_master(struct mc_backend *b)
{
	struct addrinfo hints = { 0 }, *res = NULL;
	char host[256], port[16];
	int rc, err = ENOENT;

	if (!split_hostport(b->master, host, sizeof(host), port, sizeof(port)))
		return 0;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0)
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot connect to mooncake master '%s': %s",
				   b->master, gai_strerror(rc));
	for (struct addrinfo *ai = res; ai && err; ai = ai->ai_next)
		err = try_connect(ai, b->connect_ms);
	freeaddrinfo(res);
	if (err == ETIMEDOUT)
		return wstore__err(
			WSTORE_EUNAVAIL,
			"cannot connect to mooncake master '%s': "
			"no answer within %d ms (connect_timeout_ms)",
			b->master, b->connect_ms);
	if (err) {
		char why[128];

		snprintf(why, sizeof(why), "%s", strerror(err));
		why[0] = (char)tolower((unsigned char)why[0]);
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot connect to mooncake master '%s': %s",
				   b->master, why);
	}
	return 0;
}

/* ---- settings ---------------------------------------------------------- */

/*
 * An address of neither form HOST:PORT nor one Mooncake's high
 * availability takes (etcd://..., a ';' or ',' list) sends setup into 90 s
 * of retries before "setup failed": say what is wrong at once instead.
 */
static int mc_check_master(const char *addr)
{
	char host[256], port[16];
	unsigned long n;

	if (strstr(addr, "://") || strchr(addr, ';') || strchr(addr, ','))
		return 0;
	if (split_hostport(addr, host, sizeof(host), port, sizeof(port)) &&
	    !strpbrk(host, " \t") && (n = strtoul(port, NULL, 10)) >= 1 &&
	    n <= 65535)
		return 0;
	return wstore__err(WSTORE_EINVAL,
			   "invalid master_server_addr '%s': want HOST:PORT "
			   "(the master's rpc_port, 50051 by default)",
			   addr);
}

/* Options Mooncake would only reject after connecting, or not at all. */
static int mc_check_options(struct mc_backend *b, const wstore_config *cfg)
{
	const char *proto = cfg_str(cfg, "protocol", "tcp");
	const char *log = cfg_str(cfg, "mooncake_log", "off");
	const char *ms = cfg_str(cfg, "connect_timeout_ms", NULL);

	if (strcmp(proto, "tcp") != 0 && strcmp(proto, "rdma") != 0)
		return wstore__err(WSTORE_EINVAL,
				   "invalid protocol '%s': want 'tcp' or "
				   "'rdma'",
				   proto);
	if (strcmp(log, "off") != 0 && strcmp(log, "stderr") != 0)
		return wstore__err(WSTORE_EINVAL,
				   "invalid mooncake_log '%s': want 'off' or "
				   "'stderr'",
				   log);
	b->log_stderr = strcmp(log, "stderr") == 0;
	/* the config layer has checked they are positive integers */
	b->connect_ms = ms ? atoi(ms) : MC_CONNECT_TIMEOUT_MS;
	ms = cfg_str(cfg, "command_timeout_ms", NULL);
	b->rpc_ms = ms ? atoi(ms) : MC_RPC_TIMEOUT_MS;
	if (!*b->master)
		return wstore__err(WSTORE_EINVAL,
				   "master_server_addr must not be empty");
	return mc_check_master(b->master);
}

static int mc_settings(struct mc_backend *b, const wstore_config *cfg)
{
	const char *rn = cfg_str(cfg, "replica_num", "1");
	const char *wait = getenv("WSTORE_MOONCAKE_LEASE_WAIT_MS");
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(rn, &end, 10);
	if (errno || *end || n < 1 || n > 1000 || *rn == '-')
		return wstore__err(WSTORE_EINVAL,
				   "invalid replica_num '%s': "
				   "want an integer from 1 to 1000",
				   rn);
	b->rcfg.replica_num = n;
	b->rcfg.with_soft_pin = 0;
	b->rcfg.with_hard_pin = 1;
	b->lease_wait_ms = MC_LEASE_WAIT_MS;
	if (wait && *wait)
		b->lease_wait_ms = strtoull(wait, NULL, 10);
	b->read_wait_ms = MC_READ_WAIT_MS;
	b->write_wait_ms = MC_WRITE_WAIT_MS;
	wait = getenv("WSTORE_MOONCAKE_WRITE_WAIT_MS");
	if (wait && *wait)
		b->write_wait_ms = strtoull(wait, NULL, 10);
	b->master =
		strdup(cfg_str(cfg, "master_server_addr", "127.0.0.1:50051"));
	if (!b->master)
		return wstore__errc(-ENOMEM, "cannot open mooncake store");
	return mc_check_options(b, cfg);
}

/*
 * Mooncake's calls block in the library, out of wstore_interrupt's reach;
 * what bounds them is Mooncake's own environment, read by the client:
 * each master RPC gives up after MC_RPC_TIMEOUT_MS (30 s by default; here
 * command_timeout_ms, 10 s by default).  Setup attempts are wstore's
 * (mc_setup), so Mooncake's own (MC_STORE_CLIENT_SETUP_RETRIES, 20) are
 * set to one.  Values the user put in the environment win; ours follow
 * each open's config.
 */
static const char *const mc_bound_vars[] = { "MC_RPC_TIMEOUT_MS",
					     "MC_RPC_CONNECT_TIMEOUT_MS",
					     "MC_STORE_CLIENT_SETUP_RETRIES" };
static int mc_bound_ours[3]; /* set by wstore, not the user */
static pthread_once_t mc_bound_once = PTHREAD_ONCE_INIT;

static void mc_bound_init(void)
{
	for (int i = 0; i < 3; i++)
		mc_bound_ours[i] = !getenv(mc_bound_vars[i]);
}

static void mc_bound_rpcs(const struct mc_backend *b)
{
	char v[3][24];

	pthread_once(&mc_bound_once, mc_bound_init);
	snprintf(v[0], sizeof(v[0]), "%d", b->rpc_ms);
	snprintf(v[1], sizeof(v[1]), "%d", b->connect_ms);
	snprintf(v[2], sizeof(v[2]), "1");
	for (int i = 0; i < 3; i++)
		if (mc_bound_ours[i])
			setenv(mc_bound_vars[i], v[i], 1);
}

/*
 * Make the client.  A setup that fails fast is retried with a new client:
 * each picks a random port and fails when an earlier client that exited
 * without destroy (every CLI command does, to save a second) left that
 * port registered in the metadata server ("Duplicate rpc_meta key").  One
 * that fails after half an RPC timeout or more met a port that accepts but
 * does not answer as the master (a typo: the metadata server's port), and
 * is not retried: 10 s, where Mooncake's own retries took 10 minutes.
 */
static int mc_setup(struct mc_backend *b, const wstore_config *cfg,
		    uint64_t local)
{
	uint64_t t0;
	int rc = -1, i;

	for (i = 0; i < MC_SETUP_ATTEMPTS && rc != 0; i++) {
		if (!(b->h = b->api.create()))
			return wstore__err(WSTORE_EUNAVAIL,
					   "cannot create a mooncake client "
					   "for master '%s'",
					   b->master);
		t0 = wclock_mono_ms();
		/* a pure client: global_segment_size 0, no memory given */
		rc = b->api.setup(
			b->h, cfg_str(cfg, "local_hostname", "localhost"),
			cfg_str(cfg, "metadata_server", "P2PHANDSHAKE"), 0,
			local, cfg_str(cfg, "protocol", "tcp"),
			cfg_str(cfg, "rdma_devices", ""), b->master);
		if (rc == 0)
			break;
		b->api.destroy(b->h); /* a client that failed setup: ~2 ms */
		b->h = NULL;
		if ((wclock_mono_ms() - t0) * 2 >= (uint64_t)b->rpc_ms)
			return wstore__err(
				WSTORE_EUNAVAIL,
				"cannot connect to mooncake master '%s': no "
				"answer to setup within %d ms "
				"(command_timeout_ms): is it the master's "
				"rpc_port?",
				b->master, b->rpc_ms);
	}
	if (rc != 0)
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot connect to mooncake master '%s': "
				   "setup failed (%d) %d times",
				   b->master, rc, i);
	return 0;
}

static int mc_connect(struct mc_backend *b, const wstore_config *cfg)
{
	const char *env = getenv("WSTORE_MOONCAKE_LOCAL_BUFFER_SIZE");
	uint64_t local = MC_LOCAL_BUFFER;
	int rc;

	if (env && *env && wstore_parse_size(&local, env) != 0)
		return wstore__err(WSTORE_EINVAL,
				   "invalid "
				   "WSTORE_MOONCAKE_LOCAL_BUFFER_SIZE '%s'",
				   env);
	rc = mc_probe_master(b);
	if (rc != 0)
		return rc;
	mc_bound_rpcs(b);
	return mc_setup(b, cfg, local);
}

int wstore__backend_mooncake_open(wstore_backend **out,
				  const wstore_config *cfg)
{
	struct mc_backend *b = calloc(1, sizeof(*b));
	int rc;

	if (!b)
		return wstore__errc(-ENOMEM, "cannot open mooncake store");
	pthread_mutex_init(&b->lock, NULL);
	rc = mc_settings(b, cfg);
	if (rc == 0)
		rc = mc_load(b, cfg_str(cfg, "mooncake_library",
					MC_DEFAULT_LIBRARY));
	if (rc == 0) {
		mc_logging(b);
		rc = mc_connect(b, cfg);
	}
	if (rc != 0) {
		mc_free(&b->base);
		return rc;
	}
	b->base.version = WSTORE_BACKEND_VERSION;
	b->base.struct_size = sizeof(b->base);
	b->base.name = "mooncake";
	b->base.flags = WSTORE_BACKEND_WRITE_ONCE |
			WSTORE_BACKEND_EMPTY_MISSING | WSTORE_BACKEND_UNTRUSTED;
	b->base.put = mc_put;
	b->base.get = mc_get;
	b->base.get_many = mc_get_many;
	b->base.size = mc_size;
	b->base.remove = mc_remove;
	b->base.free = mc_free;
	b->base.free_exiting = mc_free_exiting;
	b->base.buf_alloc = mc_buf_alloc;
	b->base.buf_free = mc_buf_free;
	*out = &b->base;
	return 0;
}

/* ---- the kind store URLs name (backends/table.c) ------------------------ */

/* "mooncake" (settings from the config) or "mooncake://HOST:PORT",
 * shorthand for the setting master_server_addr. */
static int mooncake_kind_open(wstore_backend **out, const char *url,
			      const char *rest, const wstore_config *cfg,
			      unsigned flags)
{
	wstore_config *c = NULL;
	int rc;

	(void)flags;
	if (strcmp(url, "mooncake") == 0)
		return wstore__backend_mooncake_open(out, cfg);
	rc = wstore_config_new(&c);
	if (rc == 0 && cfg)
		rc = wstore_config_merge(c, cfg);
	if (rc == 0 && *rest)
		rc = wstore_config_set(c, "master_server_addr", rest);
	if (rc == 0)
		rc = wstore__backend_mooncake_open(out, c);
	wstore_config_free(c);
	return rc;
}

const wstore__backend_kind wstore__kind_mooncake = {
	.name = "Mooncake",
	.schemes = { "mooncake", "mooncake://*" },
	.usage = "mooncake",
	.open = mooncake_kind_open,
};
