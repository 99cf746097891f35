/*
 * mooncake_fail.c - the Mooncake backend's errors: a negative code of
 * Mooncake's C API (docs/mooncake.md lists them) turned into a wstore code
 * and a one-line message naming the object and the master, and the retry
 * of the failures that may pass.  Used by the callbacks (mooncake.c) and
 * the buffer pool (mooncake_pool.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <time.h>

#include "../../common/clock.h"
#include "mooncake.h"

void mc_sleep_ms(uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000),
			       (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/*
 * A transfer to or from a storage node fails (-800) while that node is
 * dead or stalled, until the master drops it (its client_ttl, 10 s by
 * default): then reads find the surviving replica and puts go to live
 * nodes.  An RPC to the master fails (-900) or times out (-901,
 * command_timeout_ms) while the master or the link to it is down or
 * stalled.  Both pass: a failed call is retried with backoff (50 ms
 * doubling to 1 s) until transfer_wait_ms have passed since the first
 * failure, in wall time (a failing call may itself take a while: an RPC
 * that times out takes command_timeout_ms), and never past
 * wstore_interrupt.
 */
int mc_transfer_again(struct mc_backend *b, struct mc_retry *r)
{
	uint64_t now = wclock_mono_ms() + 1, end, st;

	if (!r->start)
		r->start = now;
	end = r->start + b->transfer_wait_ms;
	for (st = r->step; st > 0 && now < end; now = wclock_mono_ms() + 1) {
		uint64_t nap = st < 100 ? st : 100;

		if (wstore__interrupted())
			return 0;
		mc_sleep_ms(nap < end - now ? nap : end - now);
		st -= nap;
	}
	r->step = r->step * 2 > 1000 ? 1000 : r->step * 2;
	return now < end && !wstore__interrupted();
}

int mc_fail(struct mc_backend *b, int64_t rc, const char *what, const char *key)
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
