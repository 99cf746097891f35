/*
 * lease_int.h - read leases inside the library (lease.c: take, renew,
 * release; leases.c: read, judge, purge).  The public calls are in
 * wstore/lease.h; pins and last-read times are in meta.h.
 *
 * Owns: the lease records under "weight/leases/models/{ckpt}/..." (one per
 * holder, or one lease set on stores that cannot list), their renewal
 * thread and expiry.
 */
#ifndef WSTORE_LEASE_INT_H
#define WSTORE_LEASE_INT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "wstore/wstore.h"
#include "wstore/sys/backend.h"
#include "wstore/lease.h"
#include "store.h"

/*
 * What every reader does first: take a read lease on id (what names the
 * reader), then read the manifest and require it READY.  On success
 * *out_lease (NULL when the store is read-only to us: reading goes on
 * without one) and *out are the caller's; on failure neither is left.
 * With r (else NULL), what the manifest was read from is kept there
 * (wstore__manifest_read_ready_raw).
 */
int wstore__lease_read_ready(wstore_lease **out_lease, wstore_manifest **out,
			     wstore__mraw *r, wstore_store *s, const char *id,
			     const char *what, int require);

/* Live leases of id: their number, and "what by pid P on host 'H' (lease
 * expires in N s), ..." in desc. */
int wstore__leases_describe(wstore_store *s, const char *id, size_t *out_n,
			    char *desc, size_t cap);
/* Remove every lease record of id (after it was deleted). */
int wstore__leases_purge(wstore_store *s, const char *id);

/* ---- shared by lease.c and leases.c ---- */

/* The lease set of id (stores that cannot list) and the name of its lock. */
void wstore__lease_set_key(char *out, const char *id);
void wstore__lease_set_lock(char *out, const char *id);
/* A record whose holder is judged dead (owner.h: same machine and PID
 * namespace, process gone) holds nothing, whatever its expiry says. */
int wstore__lease_holder_dead(json_t *rec);

#endif
