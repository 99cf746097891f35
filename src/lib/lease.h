/*
 * lease.h - read leases, pins and last-read times (lease.c).
 *
 * Owns: the lease records under "weight/leases/models/{ckpt}/..." (one per
 * holder, or one lease set on stores that cannot list), their renewal
 * thread and expiry; the record "weight/meta/models/{ckpt}" (pin and
 * last-read time); the read-modify-write of small records on any store.
 * The public calls are in wstore/lease.h.
 */
#ifndef WSTORE_LEASE_INTERNAL_H
#define WSTORE_LEASE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "wstore/wstore.h"
#include "wstore/sys/backend.h"
#include "wstore/lease.h"

/* Unix time in milliseconds. */
int64_t wstore__now_ms(void);
/* Atomic read-modify-write of key on any store: the backend's update, or
 * get + fn + replace under the lock lockname (lock.c). */
int wstore__rmw(wstore_store *s, const char *key, const char *lockname,
		wstore_update_fn fn, void *ctx);
/* Read an object that wstore__rmw updates: under the same lock on stores
 * without an atomic update, which replace it by remove and put (a reader
 * in between would find it absent). */
int wstore__get_locked(wstore_store *s, const char *key, const char *lockname,
		       char **out, size_t *out_len);

/*
 * What every reader does first: take a read lease on id (what names the
 * reader), then read the manifest and require it READY.  On success
 * *out_lease (NULL when the store is read-only to us: reading goes on
 * without one) and *out are the caller's; on failure neither is left.
 */
int wstore__lease_read_ready(wstore_lease **out_lease, wstore_manifest **out,
			     wstore_store *s, const char *id, const char *what);

/* Live leases of id: their number, and "what by pid P on host 'H' (lease
 * expires in N s), ..." in desc. */
int wstore__leases_describe(wstore_store *s, const char *id, size_t *out_n,
			    char *desc, size_t cap);
/* Remove every lease record of id (after it was deleted). */
int wstore__leases_purge(wstore_store *s, const char *id);

/* Record that id is being read: at most one write per checkpoint per
 * interval (60 s, $WSTORE_LAST_READ_INTERVAL_MS); best effort, keeps the
 * caller's last error. */
void wstore__touch(wstore_store *s, const char *id);
/* Pin and last-read time of id (0, 0 when there is no record). */
int wstore__meta_read(int *pinned, int64_t *last_ms, wstore_store *s,
		      const char *id);
/* Remove id's pin and last-read record (after it was deleted). */
int wstore__meta_remove(wstore_store *s, const char *id);

#endif
