/*
 * mooncake_pool.c - the Mooncake backend's registered buffers.  put_from
 * and get_into move data from and to buffers registered with the client,
 * and registering is costly (RDMA memory registration), so it is done once
 * per buffer.  The backend keeps a pool of registered buffers, one in use
 * per concurrent call: a call takes one (mc_buf_take, growing it with
 * unregister + register when it is too small), copies the caller's data in
 * (put) or out (get), and gives it back (mc_buf_put).  The copy costs a
 * memcpy per chunk (far cheaper than the network: docs/performance.md),
 * and spares us from registering caller buffers whose lifetime we cannot
 * know.  The pool holds at most as many buffers as there were calls at
 * once.  Callers that keep chunk buffers for a whole import or pull get
 * registered ones from mc_buf_alloc instead (the backend's buf_alloc), and
 * put and get use those in place (mc_is_lent).  The callbacks that use
 * the pool are in mooncake.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "mooncake.h"

#define MC_BUF_MIN (1u << 20)
#define MC_HUGE ((size_t)2 << 20) /* a transparent huge page */

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

/*
 * Memory for a registered buffer.  Big ones are 2 MiB aligned and asked
 * for transparent huge pages: the first touch of fresh memory (the read of
 * a chunk into it) otherwise costs a page fault every 4 KiB, slower than
 * hashing the chunk (docs/performance.md).
 */
static void *mc_mem_alloc(size_t cap)
{
	size_t align = cap >= MC_HUGE ? MC_HUGE : 4096;
	void *p = NULL;

	if (posix_memalign(&p, align, cap) != 0)
		return NULL;
	if (cap >= MC_HUGE)
		madvise(p, cap, MADV_HUGEPAGE);
	return p;
}

/* Make x (cap 0 or registered) a registered buffer of at least need. */
static int buf_grow(struct mc_backend *b, struct mc_buf *x, size_t need,
		    const char *key)
{
	struct mc_retry r = MC_RETRY;
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
	if (!(x->mem = mc_mem_alloc(cap))) {
		return wstore__errc(-ENOMEM,
				    "cannot allocate a %zu-byte "
				    "buffer for '%s'",
				    cap, key);
	}
	/* registering publishes the buffer on the metadata server (TCP and
	 * RDMA alike): while that server or the link to it is down it fails,
	 * with -600 among others, though the buffer is good; so any failure
	 * is tried again as a failed transfer is (a pull across a 10 s cut
	 * failed on its first larger chunk without this) */
	while ((rc = b->api.register_buffer(b->h, x->mem, cap)) != 0 &&
	       mc_transfer_again(b, &r))
		;
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
int mc_buf_take(struct mc_backend *b, size_t need, struct mc_buf **out,
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

void mc_buf_put(struct mc_backend *b, struct mc_buf *x)
{
	pthread_mutex_lock(&b->lock);
	x->next = b->idle;
	b->idle = x;
	pthread_mutex_unlock(&b->lock);
}

/*
 * Buffers handed to the caller (buf_alloc): chunk buffers of an import or
 * a pull that put and get then use in place, with no bounce copy.
 */
void *mc_buf_alloc(wstore_backend *wb, size_t size)
{
	struct mc_backend *b = (struct mc_backend *)wb;
	struct mc_buf *x = calloc(1, sizeof(*x));

	/* no buffer is no error: the caller falls back to plain memory */
	if (!x || buf_grow(b, x, size ? size : 1, "a chunk buffer") != 0) {
		free(x);
		return NULL;
	}
	pthread_mutex_lock(&b->lock);
	x->next = b->lent;
	b->lent = x;
	pthread_mutex_unlock(&b->lock);
	return x->mem;
}

void mc_buf_free(wstore_backend *wb, void *p)
{
	struct mc_backend *b = (struct mc_backend *)wb;
	struct mc_buf **pp, *x = NULL;

	pthread_mutex_lock(&b->lock);
	for (pp = &b->lent; *pp; pp = &(*pp)->next)
		if ((*pp)->mem == p) {
			x = *pp;
			*pp = x->next;
			break;
		}
	pthread_mutex_unlock(&b->lock);
	if (x)
		buf_drop(b, x);
	else
		free(p);
}

/* Whether [p, p + n) lies in one buffer of buf_alloc's. */
int mc_is_lent(struct mc_backend *b, const void *p, size_t n)
{
	uintptr_t c = (uintptr_t)p;
	int found = 0;

	pthread_mutex_lock(&b->lock);
	for (struct mc_buf *x = b->lent; x && !found; x = x->next) {
		uintptr_t m = (uintptr_t)x->mem;

		found = c >= m && n <= x->cap && c - m <= x->cap - n;
	}
	pthread_mutex_unlock(&b->lock);
	return found;
}

void mc_pool_free(struct mc_backend *b)
{
	while (b->idle) {
		struct mc_buf *x = b->idle;

		b->idle = x->next;
		buf_drop(b, x);
	}
	/* buf_alloc's, if the caller leaked them */
	while (b->lent) {
		struct mc_buf *x = b->lent;

		b->lent = x->next;
		buf_drop(b, x);
	}
}
