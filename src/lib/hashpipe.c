/*
 * hashpipe.c - a hash computed on a thread of its own, behind the thread
 * that receives the bytes (see hashpipe.h).
 *
 * Why: SHA-256 runs at about 1.4 GB/s a core, slower than loopback or a
 * fast network delivers a file; done in the receiving thread it adds its
 * whole time to the transfer's (docs/performance.md, the cold mirror).
 * One stream's hash cannot be split, but it can run beside the receive:
 * the receiver copies each piece into a ring (a memcpy, several times
 * faster than the hash) and goes back to the network; the hasher takes
 * the ring in order.
 *
 * Waits: the receiver waits for room, the hasher for bytes; neither side
 * waits on anything outside the process (the hasher only hashes memory,
 * the receiver only copies it), so each wait lasts at most the other
 * side's work on one ring.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "hashpipe.h"
#include "util.h"

/* the hasher takes at most this much of the ring at a time, so that room
 * comes back to the receiver steadily */
#define HASHPIPE_STEP ((size_t)512 << 10)

struct wstore__hashpipe {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* either side's wait */
	unsigned char *ring;
	uint64_t put, hashed; /* bytes, since the start */
	int eof, err, waiting;
	wstore__hash_update update;
	void *h;
	pthread_t t;
	int started;
};

/* The bytes [from, from+n) of the stream, in the ring (n may wrap). */
static int hash_span(wstore__hashpipe *p, uint64_t from, size_t n)
{
	size_t at = (size_t)(from % HASHPIPE_RING);
	size_t first = n < HASHPIPE_RING - at ? n : HASHPIPE_RING - at;
	int rc = p->update(p->h, p->ring + at, first);

	if (rc == 0 && n > first)
		rc = p->update(p->h, p->ring, n - first);
	return rc;
}

static void *hasher(void *arg)
{
	wstore__hashpipe *p = arg;
	int rc = 0;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		uint64_t from = p->hashed, avail = p->put - p->hashed;
		size_t n =
			avail < HASHPIPE_STEP ? (size_t)avail : HASHPIPE_STEP;

		if (n == 0) {
			if (p->eof || rc < 0)
				break;
			p->waiting = 1;
			pthread_cond_wait(&p->cv, &p->mu);
			continue;
		}
		pthread_mutex_unlock(&p->mu);
		if (rc == 0)
			rc = hash_span(p, from, n);
		pthread_mutex_lock(&p->mu);
		p->hashed += n;
		if (rc < 0)
			p->err = rc;
		if (p->waiting) {
			p->waiting = 0;
			pthread_cond_broadcast(&p->cv);
		}
	}
	pthread_mutex_unlock(&p->mu);
	/* libcrypto's state of this thread, freed before the thread ends
	 * unseen by the caller */
	OPENSSL_thread_stop();
	return NULL;
}

wstore__hashpipe *wstore__hashpipe_new(wstore__hash_update update, void *h)
{
	wstore__hashpipe *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->update = update;
	p->h = h;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	if (!(p->ring = malloc(HASHPIPE_RING)) ||
	    wstore__thread_start(&p->t, hasher, p) != 0) {
		wstore__hashpipe_free(p);
		return NULL;
	}
	p->started = 1;
	return p;
}

int wstore__hashpipe_put(wstore__hashpipe *p, const void *data, size_t n)
{
	const unsigned char *d = data;
	int rc = 0;

	pthread_mutex_lock(&p->mu);
	while (n > 0 && !(rc = p->err)) {
		size_t room = HASHPIPE_RING - (size_t)(p->put - p->hashed);
		size_t at = (size_t)(p->put % HASHPIPE_RING), k;

		if (room == 0) {
			p->waiting = 1;
			pthread_cond_wait(&p->cv, &p->mu);
			continue;
		}
		k = n < room ? n : room;
		if (k > HASHPIPE_RING - at)
			k = HASHPIPE_RING - at;
		/* the hasher never reads past put: this span is ours */
		pthread_mutex_unlock(&p->mu);
		memcpy(p->ring + at, d, k);
		pthread_mutex_lock(&p->mu);
		p->put += k;
		d += k;
		n -= k;
		if (p->waiting) {
			p->waiting = 0;
			pthread_cond_broadcast(&p->cv);
		}
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

int wstore__hashpipe_finish(wstore__hashpipe *p)
{
	int rc;

	if (!p->started)
		return p->err;
	pthread_mutex_lock(&p->mu);
	p->eof = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->t, NULL);
	p->started = 0;
	rc = p->err;
	return rc;
}

void wstore__hashpipe_free(wstore__hashpipe *p)
{
	if (!p)
		return;
	if (p->started)
		wstore__hashpipe_finish(p);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p->ring);
	free(p);
}
