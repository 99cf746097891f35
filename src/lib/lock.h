/*
 * lock.h - per-checkpoint locks (lock.c).
 *
 * Owns: the lock objects under "weight/locks/{name}" that import, delete,
 * gc and the index updates hold, their owner records and the breaking of
 * stale ones; waiting for a lock; the read-modify-write of small records
 * on any store (the backend's update, or get + edit + replace under a
 * lock).
 */
#ifndef WSTORE_LOCK_H
#define WSTORE_LOCK_H

#include <stddef.h>

#include "wstore/wstore.h"
#include "wstore/sys/backend.h"

/* Exclusive per-checkpoint lock (import/delete): put_new of an owner record
 * under "weight/locks/{ckpt}".  A lock whose owner process is gone (same
 * host, pid dead) is broken. */
int wstore__lock(wstore_store *s, const char *name, char **out_token);
void wstore__unlock(wstore_store *s, const char *name, char *token);

/* wstore__lock, tried again every 100 ms for up to 30 s while it is busy
 * (for locks held only for one read and one write). */
int wstore__lock_wait(wstore_store *s, const char *name, char **out_token);

/* Atomic read-modify-write of key on any store: the backend's update, or
 * get + fn + replace under the lock lockname. */
int wstore__rmw(wstore_store *s, const char *key, const char *lockname,
		wstore_update_fn fn, void *ctx);
/* Read an object that wstore__rmw updates: under the same lock on stores
 * without an atomic update, which replace it by remove and put (a reader
 * in between would find it absent). */
int wstore__get_locked(wstore_store *s, const char *key, const char *lockname,
		       char **out, size_t *out_len);

#endif
