/*
 * lock.h - per-checkpoint locks (lock.c).
 *
 * Owns: the lock objects under "weight/locks/{ckpt}" that import and
 * delete hold, their owner records and the breaking of stale ones.
 */
#ifndef WSTORE_LOCK_H
#define WSTORE_LOCK_H

#include "wstore/wstore.h"

/* Exclusive per-checkpoint lock (import/delete): put_new of an owner record
 * under "weight/locks/{ckpt}".  A lock whose owner process is gone (same
 * host, pid dead) is broken. */
int wstore__lock(wstore_store *s, const char *name, char **out_token);
void wstore__unlock(wstore_store *s, const char *name, char *token);

#endif
