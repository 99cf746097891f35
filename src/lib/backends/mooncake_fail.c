/*
 * mooncake_fail.c - the Mooncake backend's errors: a negative code of
 * Mooncake's C API (docs/mooncake.md lists them) turned into a wstore code
 * and a one-line message naming the object and the master.  Used by the
 * callbacks (mooncake.c) and the buffer pool (mooncake_pool.c).
 */
#include <errno.h>
#include <inttypes.h>

#include "mooncake.h"

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
