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
#include <stdint.h>

#include "wstore/wstore.h"
#include "wstore/sys/backend.h"

/* A lock this process holds. */
typedef struct wstore__held wstore__held;

/*
 * Take the lock "weight/locks/{name}" (models/{ckpt}, catalog, ...) at
 * once, or fail with WSTORE_EBUSY naming its owner.  A lock whose owner is
 * dead, or unknown (another PID namespace or kernel) and past its lease
 * time, is taken over.  While held, a thread renews its lease time every
 * TTL/3 (the TTL: 60 s, or $WSTORE_LOCK_TTL_MS).  *out is the caller's until
 * wstore__unlock (NULL is fine), which stops the renewal and removes the
 * record if it is still ours; unlock keeps the caller's last error.
 */
int wstore__lock(wstore_store *s, const char *name, wstore__held **out);
void wstore__unlock(wstore_store *s, wstore__held *h);
/* 1 if h's record was found replaced by someone else's while held (on
 * stores without an atomic update, or after a pause longer than the TTL). */
int wstore__lock_lost(const wstore__held *h);

/* wstore__lock, tried again every 100 ms for up to 30 s while it is busy
 * (for locks held only for one read and one write); WSTORE_ECANCELED
 * within 100 ms of wstore_interrupt. */
int wstore__lock_wait(wstore_store *s, const char *name, wstore__held **out);

/* Whether the lock record rec (len bytes, may be NULL) holds its lock at
 * Unix ms now (see wstore__lock); if so its owner is described in owner. */
int wstore__lock_record_held(const void *rec, size_t len, int64_t now,
			     char *owner, size_t cap);

/* Whether lock name, whose record is rec (n bytes), is still held as its
 * takers judge it (0 for a record without a lease time, an older
 * wstore's): its owner alive, or not known dead and its lease time
 * (renewed by the holder, in the record or its renewal slots) not run
 * out.  A holder in another PID namespace or on another host is judged by
 * its renewals, never by a pid that means nothing here. */
int wstore__lock_still_held(wstore_store *s, const char *name, const char *rec,
			    size_t n);

/* The key (WSTORE__KEY_MAX bytes) of a taker's claim on the stale record
 * rec of lock name, on stores without an atomic update (lock.c, claim). */
void wstore__lock_claim_key(char *out, const char *name, const void *rec,
			    size_t len);

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
