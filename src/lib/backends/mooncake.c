/*
 * mooncake.c - the Mooncake Store backend.  wstore is a pure client
 * (global segment size 0) of a Mooncake Store cluster, reached through
 * Mooncake's C library, libmooncake_store.so, which is loaded with dlopen
 * when a store is opened: wstore builds and runs with no Mooncake
 * installed, and only `--store mooncake` needs it.  The functions used are
 * declared here from Mooncake's C API as docs/mooncake.md lists it;
 * nothing is copied from Mooncake.
 *
 * This file holds what the backend does once open (the callbacks and
 * their waits); mooncake_open.c loads the library and makes the client,
 * and mooncake.h holds what the backend's files share.
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
 *  - a dead storage node fails transfers (-800) until the master drops
 *    it, and a master that is cut off or stalled fails RPCs (-900, -901):
 *    both are retried for up to 30 s ($WSTORE_MOONCAKE_TRANSFER_WAIT_MS,
 *    see mc_transfer_again), so that a 10 s cut does not fail a command;
 *  - setup retries an unreachable master for ~90 s: a bounded TCP connect
 *    to it comes first (mc_probe_master);
 *  - glog writes to stderr: raised to FATAL after dlopen (mc_logging).
 * Signals are the executables' business (Py_IsInitialized,
 * src/common/embed.c).
 *
 * Buffers: put_from and get_into need registered memory; the pool of
 * registered buffers is in mooncake_pool.c.  The client's end at exit
 * (taking its name off the metadata server) is in mooncake_exit.c.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake.h"

/* ---- waiting ----------------------------------------------------------- */

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
	mc_sleep_ms(st);
	w->waited += st;
	w->step = w->step * 2 > 1000 ? 1000 : w->step * 2;
	return 1;
}

/* A failure that a retry may get past (see mc_transfer_again in
 * mooncake_fail.c). */
static int passing(int64_t rc)
{
	return rc == MC_TRANSFER_FAIL || rc == MC_RPC_FAIL ||
	       rc == MC_RPC_TIMEOUT;
}

/* ---- callbacks --------------------------------------------------------- */

/*
 * A key whose put is in progress answers -703 ("replica not ready") to
 * reads.  Another writer's put finishes within milliseconds, so reads wait
 * it out for up to read_wait_ms; a writer that died leaves the key in that
 * state until the master discards the write (see mc_remove).  A failed
 * master RPC is retried until r's time is up.
 */
static int64_t size_of(struct mc_backend *b, const char *key,
		       struct mc_retry *r)
{
	struct mc_wait w = MC_WAIT(b->read_wait_ms);
	int64_t n;

	for (;;) {
		n = b->api.get_size(b->h, key);
		if (n == MC_REPLICA_NOT_READY && wait_more(&w))
			continue;
		if (passing(n) && mc_transfer_again(b, r))
			continue;
		return n;
	}
}

static int mc_size(wstore_backend *wb, const char *key, uint64_t *out)
{
	struct mc_backend *b = (struct mc_backend *)wb;
	struct mc_retry r = MC_RETRY;
	int64_t n = size_of(b, key, &r);

	if (n < 0)
		return mc_fail(b, n, "read the size of", key);
	*out = (uint64_t)n;
	return 0;
}

/*
 * put_from, with passing failures retried.  Mooncake revokes a put whose
 * transfer failed; should the revoke not have reached the master, the key
 * stays "being written" and a new put returns 0 without writing: so a put
 * that succeeded only after a failure is checked to have landed.  A put
 * whose answer was lost (an RPC that timed out after the master had
 * acted) may have landed: after a failure, "exists" with the size written
 * counts as done (the front end reads back whatever it must be sure of:
 * lock records).
 */
static int put_retrying(struct mc_backend *b, const char *key, void *mem,
			size_t len)
{
	struct mc_retry r = MC_RETRY;
	int64_t n;
	int rc;

	for (;;) {
		rc = b->api.put_from(b->h, key, mem, len, &b->rcfg);
		if ((rc == 0 || rc == MC_EXISTS) && r.start) {
			n = size_of(b, key, &r);
			if (n == MC_REPLICA_NOT_READY || n == MC_NOT_FOUND)
				rc = MC_TRANSFER_FAIL;
			else if (n < 0)
				rc = (int)n;
			else if (rc == MC_EXISTS && (uint64_t)n == len)
				rc = 0;
		}
		if (!passing(rc) || !mc_transfer_again(b, &r))
			return rc;
	}
}

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
	if (mc_is_lent(b, data, len)) {
		/* registered already: Mooncake reads it in place */
		rc = put_retrying(b, key, (void *)data, len);
		return rc == 0 ? 0 : mc_fail(b, rc, "write", key);
	}
	rc = mc_buf_take(b, len, &x, key);
	if (rc != 0)
		return rc;
	memcpy(x->mem, data, len);
	rc = put_retrying(b, key, x->mem, len);
	mc_buf_put(b, x);
	return rc == 0 ? 0 : mc_fail(b, rc, "write", key);
}

/*
 * Read key into buf (capacity cap) through a registered buffer.  The value
 * may be replaced (forced remove + put) between get_size and get_into, so
 * the size get_into returns is the one that counts; a value that grew past
 * the registered buffer (-600) is retried with its new size, a failed
 * transfer or master RPC until r's time is up.  A buffer of buf_alloc's
 * (a pull's or a server's chunk buffer) is read into at once, without
 * get_size first: get_into returns the size, and the master is asked one
 * RPC fewer a chunk; get_size comes in only after a failure (-600 for a
 * value larger than the buffer, -703 for one being written).
 */
static int get_one(struct mc_backend *b, const char *key, void *buf, size_t cap,
		   size_t *out_len, struct mc_retry *r)
{
	int lent = mc_is_lent(b, buf, cap);
	struct mc_buf *x;
	int64_t size = 0, n;
	int rc;

	*out_len = 0;
	for (int attempt = 0;;) {
		if (!lent || attempt > 0) {
			size = size_of(b, key, r);
			if (size < 0)
				return mc_fail(b, size, "read", key);
			*out_len = (size_t)size;
			if ((uint64_t)size > cap)
				break;
			if (size == 0)
				return 0;
		}
		if (lent) {
			/* registered already: Mooncake writes it in place */
			n = b->api.get_into(b->h, key, buf, cap);
		} else {
			rc = mc_buf_take(b, (size_t)size, &x, key);
			if (rc != 0)
				return rc;
			n = b->api.get_into(b->h, key, x->mem, x->cap);
			if (n >= 0 && (uint64_t)n <= cap)
				memcpy(buf, x->mem, (size_t)n);
			mc_buf_put(b, x);
		}
		/* a read slower than the lease is not guaranteed whole */
		if ((n == MC_INVALID_PARAMS || n == MC_REPLICA_NOT_READY ||
		     n == MC_LEASE_EXPIRED) &&
		    attempt++ < 3)
			continue;
		if (passing(n) && mc_transfer_again(b, r))
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

static int mc_get(wstore_backend *wb, const char *key, void *buf, size_t cap,
		  size_t *out_len)
{
	struct mc_retry r = MC_RETRY;

	return get_one((struct mc_backend *)wb, key, buf, cap, out_len, &r);
}

/*
 * Several whole chunks in one batch_get_into request (one round trip to
 * the master and the transfer engine instead of n).  Each destination must
 * be registered memory: the values land in pooled registered buffers and
 * are copied out, as in mc_get.  Keys the batch could not read for a
 * passing reason are read again one by one, failed transfers within one
 * transfer_wait_ms for the whole batch.
 */
static int mc_get_many(wstore_backend *wb, size_t n, const char *const *keys,
		       void *const *bufs, const size_t *caps, size_t *out_lens,
		       int *out_rcs)
{
	struct mc_backend *b = (struct mc_backend *)wb;
	struct mc_retry r = MC_RETRY;
	struct mc_buf *x[16] = { 0 };
	void *mems[16] = { 0 };
	size_t sizes[16] = { 0 }, got = 0;
	int64_t res[16];
	int rc = 0;

	if (n > 16)
		return wstore__err(WSTORE_EINVAL, "mooncake: batch of %zu", n);
	for (; got < n && rc == 0; got++) {
		rc = mc_buf_take(b, caps[got] ? caps[got] : 1, &x[got],
				 keys[got]);
		if (rc == 0) {
			mems[got] = x[got]->mem;
			sizes[got] = x[got]->cap;
		}
	}
	if (rc == 0 && (rc = b->api.batch_get_into(b->h, (const char **)keys,
						   mems, sizes, n, res)) != 0) {
		/* each key on its own, with get_one's retries */
		for (size_t i = 0; passing(rc) && i < n; i++)
			res[i] = MC_TRANSFER_FAIL;
		rc = passing(rc) ? 0 : mc_fail(b, rc, "read", keys[0]);
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		out_lens[i] = res[i] > 0 ? (size_t)res[i] : 0;
		if (res[i] == MC_REPLICA_NOT_READY ||
		    res[i] == MC_LEASE_EXPIRED || passing(res[i]))
			out_rcs[i] = get_one(b, keys[i], bufs[i], caps[i],
					     &out_lens[i], &r);
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
			mc_buf_put(b, x[i]);
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
	rc = mc_buf_take(b, 1, &x, key);
	if (rc != 0)
		return rc;
	*(char *)x->mem = 0;
	w.step = 100;
	do {
		b->api.put_from(b->h, key, x->mem, 1, &b->rcfg);
		rc = b->api.remove(b->h, key, force);
	} while (rc == MC_REPLICA_NOT_READY && wait_more(&w));
	mc_buf_put(b, x);
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

/*
 * A non-forced remove of a leased object (-706) is retried with backoff
 * until the lease has had time to expire, then reported as busy.  A
 * failed master RPC is retried as a transfer is; after one, "not found"
 * counts as removed (the lost answer may have been the remove's own).
 */
static int mc_remove(wstore_backend *wb, const char *key, int force)
{
	struct mc_backend *b = (struct mc_backend *)wb;
	struct mc_retry r = MC_RETRY;
	uint64_t waited = 0, step = 50;
	int rc;

	for (;;) {
		rc = b->api.remove(b->h, key, force ? 1 : 0);
		if (rc == 0 || (rc == MC_NOT_FOUND && r.start))
			return 0;
		if (rc == MC_REPLICA_NOT_READY)
			return unstick(b, key, force ? 1 : 0);
		if (passing(rc) && mc_transfer_again(b, &r))
			continue;
		if (rc != MC_LEASED || waited >= b->lease_wait_ms)
			return mc_fail(b, rc, "remove", key);
		if (step > b->lease_wait_ms - waited)
			step = b->lease_wait_ms - waited;
		mc_sleep_ms(step);
		waited += step;
		step = step * 2 > 2000 ? 2000 : step * 2;
	}
}

/* ---- what mooncake_open.c uses ------------------------------------------ */

void mc_set_ops(struct mc_backend *b)
{
	b->base.put = mc_put;
	b->base.get = mc_get;
	b->base.get_many = mc_get_many;
	b->base.size = mc_size;
	b->base.remove = mc_remove;
	b->base.buf_alloc = mc_buf_alloc;
	b->base.buf_free = mc_buf_free;
}
