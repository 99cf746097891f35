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
 *  - weights are stored hard-pinned with replica_num replicas.
 *
 * Buffers: put_from and get_into move data from and to buffers registered
 * with the client, and registering is costly (RDMA memory registration),
 * so it is done once per buffer.  The backend keeps a pool of registered
 * buffers, one in use per concurrent call: a call takes one (growing it,
 * with unregister + register, when it is too small), copies the caller's
 * data in (put) or out (get), and gives it back.  The copy costs a memcpy
 * per chunk (10+ GB/s, far above the network), and spares us from
 * registering caller buffers whose lifetime we cannot know.  The pool
 * holds at most as many buffers as there were calls at once.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers.h"

#define MC_DEFAULT_LIBRARY "libmooncake_store.so"
#define MC_LOCAL_BUFFER (128ull << 20)
#define MC_LEASE_WAIT_MS 12000
#define MC_BUF_MIN (1u << 20)

/* Mooncake error codes (docs/mooncake.md). */
#define MC_INTERNAL (-1)
#define MC_NO_SPACE (-200)
#define MC_INVALID_PARAMS (-600)
#define MC_REPLICA_NOT_READY (-703)
#define MC_NOT_FOUND (-704)
#define MC_EXISTS (-705)
#define MC_LEASED (-706)
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
	pthread_mutex_t lock; /* guards idle */
	struct mc_buf *idle;  /* registered buffers not in use */
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
	case MC_TRANSFER_FAIL:
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot %s '%s': mooncake transfer failed "
				   "(master '%s')",
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
	if (posix_memalign(&x->mem, 4096, cap) != 0) {
		x->mem = NULL;
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
	rc = buf_take(b, len, &x, key);
	if (rc != 0)
		return rc;
	memcpy(x->mem, data, len);
	rc = b->api.put_from(b->h, key, x->mem, len, &b->rcfg);
	buf_put(b, x);
	return rc == 0 ? 0 : mc_fail(b, rc, "write", key);
}

static int mc_size(wstore_backend *wb, const char *key, uint64_t *out)
{
	struct mc_backend *b = (struct mc_backend *)wb;
	int64_t n = b->api.get_size(b->h, key);

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
		size = b->api.get_size(b->h, key);
		if (size < 0)
			return mc_fail(b, size, "read", key);
		*out_len = (size_t)size;
		if ((uint64_t)size > cap)
			break;
		if (size == 0)
			return 0;
		rc = buf_take(b, (size_t)size, &x, key);
		if (rc != 0)
			return rc;
		n = b->api.get_into(b->h, key, x->mem, x->cap);
		if (n >= 0 && (uint64_t)n <= cap)
			memcpy(buf, x->mem, (size_t)n);
		buf_put(b, x);
		if (n == MC_INVALID_PARAMS && attempt < 2)
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
		if (res[i] < 0)
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

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000),
			       (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
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
	b->master =
		strdup(cfg_str(cfg, "master_server_addr", "127.0.0.1:50051"));
	if (!b->master)
		return wstore__errc(-ENOMEM, "cannot open mooncake store");
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
	b->h = b->api.create();
	if (!b->h)
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot create a mooncake "
				   "client for master '%s'",
				   b->master);
	/* a pure client: global_segment_size 0, no memory contributed */
	rc = b->api.setup(b->h, cfg_str(cfg, "local_hostname", "localhost"),
			  cfg_str(cfg, "metadata_server", "P2PHANDSHAKE"), 0,
			  local, cfg_str(cfg, "protocol", "tcp"),
			  cfg_str(cfg, "rdma_devices", ""), b->master);
	if (rc != 0)
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot connect to "
				   "mooncake master '%s': setup failed (%d)",
				   b->master, rc);
	return 0;
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
	if (rc == 0)
		rc = mc_connect(b, cfg);
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
	*out = &b->base;
	return 0;
}
