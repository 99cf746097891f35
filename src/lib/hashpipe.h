/*
 * hashpipe.h - a hash computed on a thread of its own, behind the thread
 * that receives the bytes (hashpipe.c).
 *
 * Owns: a bounded ring the receiver copies each piece into and a thread
 * that hashes it from there, so receiving a file and hashing it overlap
 * on two cores instead of following each other on one.  Memory: the ring
 * (HASHPIPE_RING bytes), whatever the file's size; the receiver waits
 * for room when the hasher is behind by a whole ring.
 */
#ifndef WSTORE_HASHPIPE_H
#define WSTORE_HASHPIPE_H

#include <stddef.h>

/* the ring's size; smaller files are better hashed inline */
#define HASHPIPE_RING ((size_t)4 << 20)

typedef struct wstore__hashpipe wstore__hashpipe;

/* update(h, data, n) on the pipe's thread, 0 or a negative errno. */
typedef int (*wstore__hash_update)(void *h, const void *data, size_t n);

/* A pipe hashing into h (not owned); NULL without memory or a thread. */
wstore__hashpipe *wstore__hashpipe_new(wstore__hash_update update, void *h);
/* n bytes more (copied), in order; the hasher's error, else 0. */
int wstore__hashpipe_put(wstore__hashpipe *p, const void *data, size_t n);
/* Every byte put is hashed into h, the thread gone; 0 or the hasher's
 * error.  Then (or instead, on an error path) free. */
int wstore__hashpipe_finish(wstore__hashpipe *p);
void wstore__hashpipe_free(wstore__hashpipe *p);

#endif
