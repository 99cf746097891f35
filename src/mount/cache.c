/*
 * cache.c - the chunk cache and read-ahead.
 *
 * Whole chunks keyed by (entry id, file, chunk), LRU, bounded by
 * opts.cache_size (chunks pinned by reads in flight may exceed it
 * briefly).  A miss reads the chunk with wstore_file_pread (which checks
 * its length) and then re-reads the manifest unless a check started after
 * this fetch already did: a chunk enters the cache only if the checkpoint
 * was still the same one after the bytes were read, so a delete, or a
 * delete and re-import under the same id, cannot put other bytes under an
 * open file.  Entry ids are never reused and each entry is one open of
 * one import (a new import of the same id, even with a manifest that
 * reads the same, is a new entry once the library reports the old one
 * changed): chunks of one import are never served to files of another.
 * Concurrent readers of one chunk wait for a single fetch.  A
 * read that moves into the next chunk queues the following chunks for a
 * read-ahead thread.  Freed chunk buffers are reused (first touch of
 * fresh memory costs more than the copy: docs/performance.md).
 *
 * Zero copy.  On a store whose chunks are local files (the embedded file
 * store: wstore_file_chunk_fd works) a slot holds an open fd of the chunk
 * file instead of its bytes, and replies are spliced from that fd (ops.c,
 * kio.c).  Everything else is as for bytes: the fd is opened (its length
 * checked) and then the manifest re-checked as after a fetch, the slot is
 * pinned while a reply uses it and dropped once served in full; an fd
 * counts 1/128th of the cache size, so at most about 128 stay open.  An
 * fd keeps reading the chunk it opened even after the checkpoint is
 * deleted: like cached bytes, it is served only while the entry is not
 * dead, and retiring an entry purges its slots.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <syslog.h>
#include <unistd.h>

#include "../common/clock.h"
#include "mount.h"

static size_t slot_hash(const struct cache *c, uint32_t eid, int64_t fidx,
			uint64_t ci)
{
	uint64_t h = eid * 0x9E3779B97F4A7C15ull ^
		     (uint64_t)fidx * 0xC2B2AE3D27D4EB4Full ^
		     ci * 0x165667B19E3779F9ull;

	return (size_t)((h ^ (h >> 29)) % c->nhash);
}

static struct slot *slot_find(struct cache *c, uint32_t eid, int64_t fidx,
			      uint64_t ci)
{
	struct slot *s = c->hash[slot_hash(c, eid, fidx, ci)];

	while (s && !(s->eid == eid && s->fidx == fidx && s->ci == ci))
		s = s->hnext;
	return s;
}

static void lru_unlink(struct slot *s)
{
	s->prev->next = s->next;
	s->next->prev = s->prev;
}

static void lru_push(struct cache *c, struct slot *s)
{
	s->next = c->lru.next;
	s->prev = &c->lru;
	c->lru.next->prev = s;
	c->lru.next = s;
}

/* Chunk buffers are mmap'ed with transparent huge pages: their first
 * touch is many times faster than of 4 KiB pages (docs/performance.md). */
static char *buf_alloc(size_t n)
{
	void *p;

	n = n ? n : 1;
	p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (n >= ((size_t)2 << 20))
		madvise(p, n, MADV_HUGEPAGE);
	return p;
}

static void buf_free(char *p, size_t n)
{
	if (p)
		munmap(p, n ? n : 1);
}

/* Take s out of the hash and LRU (caller holds the lock). */
static void slot_unlink(struct cache *c, struct slot *s)
{
	struct slot **pp = &c->hash[slot_hash(c, s->eid, s->fidx, s->ci)];

	while (*pp != s)
		pp = &(*pp)->hnext;
	*pp = s->hnext;
	lru_unlink(s);
	c->bytes -= s->cost;
	s->unlinked = 1;
}

/* Free an unlinked, unpinned slot, keeping its buffer for reuse while
 * the cache's budget allows. */
static void slot_drop(struct cache *c, struct slot *s)
{
	if (s->fd >= 0)
		close(s->fd);
	if (s->buf && c->nfree < FREE_BUFS &&
	    c->bytes + c->freebytes + s->cap <= c->limit) {
		c->freebufs[c->nfree].buf = s->buf;
		c->freebufs[c->nfree].cap = s->cap;
		c->freebytes += s->cap;
		c->nfree++;
	} else {
		buf_free(s->buf, s->cap);
	}
	free(s);
}

static void cache_evict(struct cache *c)
{
	struct slot *s = c->lru.prev, *prev;

	while (c->nfree && c->bytes + c->freebytes > c->limit) {
		c->nfree--;
		c->freebytes -= c->freebufs[c->nfree].cap;
		buf_free(c->freebufs[c->nfree].buf, c->freebufs[c->nfree].cap);
	}

	for (; s != &c->lru && c->bytes > c->limit; s = prev) {
		prev = s->prev;
		if (s->pins || s->state == SLOT_LOADING)
			continue;
		slot_unlink(c, s);
		slot_drop(c, s);
	}
}

static char *take_buf(struct cache *c, size_t need, size_t *cap)
{
	for (unsigned i = 0; i < c->nfree; i++) {
		char *b = c->freebufs[i].buf;

		if (c->freebufs[i].cap < need)
			continue;
		*cap = c->freebufs[i].cap;
		c->freebytes -= *cap;
		c->freebufs[i] = c->freebufs[--c->nfree];
		return b;
	}
	if (c->nfree) { /* too small: trade the oldest for a new one */
		buf_free(c->freebufs[0].buf, c->freebufs[0].cap);
		c->freebytes -= c->freebufs[0].cap;
		c->freebufs[0] = c->freebufs[--c->nfree];
	}
	*cap = need;
	return buf_alloc(need);
}

void cache_unpin(struct cache *c, struct slot *s)
{
	pthread_mutex_lock(&c->lock);
	if (--s->pins == 0 && s->unlinked)
		slot_drop(c, s);
	pthread_mutex_unlock(&c->lock);
}

/*
 * Unpin after replying n bytes from s.  A chunk served in full was read
 * sequentially (the kernel asks for each byte once) and is dropped at
 * once, its buffer reused for the next fetch: re-reads are the kernel
 * page cache's job, and reusing warm buffers instead of touching fresh
 * memory is what keeps a first read fast.  What the LRU keeps is chunks
 * read in part: headers, tensors picked at random.
 */
void cache_done(struct cache *c, struct slot *s, size_t n)
{
	pthread_mutex_lock(&c->lock);
	s->served += n;
	if (!s->unlinked && s->served >= s->len)
		slot_unlink(c, s);
	if (--s->pins == 0 && s->unlinked)
		slot_drop(c, s);
	pthread_mutex_unlock(&c->lock);
}

/* Drop every unpinned chunk of e (retired). */
void cache_purge(struct cache *c, struct entry *e)
{
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->nhash; i++) {
		struct slot *s = c->hash[i], *next;

		for (; s; s = next) {
			next = s->hnext;
			if (s->e != e || s->state == SLOT_LOADING)
				continue;
			slot_unlink(c, s);
			if (!s->pins)
				slot_drop(c, s);
		}
	}
	pthread_mutex_unlock(&c->lock);
}

/* What an open chunk fd counts against the limit: it holds no memory,
 * but the number of fds kept open is bounded (about 128). */
static uint64_t zc_cost(const struct cache *c)
{
	return c->limit / 128 ? c->limit / 128 : 1;
}

static int fetch(struct wmount *m, struct slot *s, wstore_file *f, uint64_t cs)
{
	uint64_t t0 = wclock_mono_ms();
	size_t n = 0;
	int rc = wstore_file_pread(f, s->buf, s->len, s->ci * cs, &n);

	if (rc == 0 && n != s->len)
		rc = WSTORE_ECORRUPT;
	if (rc < 0)
		return entry_read_failed(m, s->e, "read", wstore_file_path(f),
					 rc);
	return entry_validate(m, s->e, t0);
}

/*
 * The same for a zero-copy mount: open the chunk's file (its length is
 * checked against the manifest) and validate as fetch does, so a chunk
 * file of a checkpoint deleted (or replaced) meanwhile is never served.
 * A file the store keeps whole hands out its one file, the chunk a range
 * of it (files opened normally read it through whole_fd in kio.c; this
 * serves the rest, read-ahead among them).
 */
static int fetch_fd(struct wmount *m, struct slot *s, wstore_file *f,
		    uint64_t cs)
{
	uint64_t t0 = wclock_mono_ms();
	uint64_t foff = 0, start = s->ci * cs;
	size_t n = 0;
	int fd = -1;
	int rc = wstore_file_chunk_fd(&fd, &foff, &n, f, start);

	if (rc == 0 && foff == 0 && n == s->len) {
		s->fdoff = 0; /* the chunk's own file */
		s->fdsize = n;
	} else if (rc == 0 && foff == start && n >= s->len &&
		   foff + n == wstore_file_size(f)) {
		s->fdoff = foff; /* the whole file */
		s->fdsize = foff + n;
	} else if (rc == 0) {
		close(fd);
		rc = WSTORE_ECORRUPT;
	}
	if (rc < 0)
		return entry_read_failed(m, s->e, "open", wstore_file_path(f),
					 rc);
	s->fd = fd;
	return entry_validate(m, s->e, t0);
}

/*
 * Chunk ci (len bytes) of file fidx of e, pinned: release it with
 * cache_unpin.  f reads it on a miss.  Returns NULL with *err set on
 * failure.
 */
struct slot *cache_get(struct wmount *m, struct entry *e, int64_t fidx,
		       wstore_file *f, uint64_t cs, uint64_t ci, size_t len,
		       int *err)
{
	struct cache *c = &m->c;
	struct slot *s;
	int rc;

	pthread_mutex_lock(&c->lock);
	s = slot_find(c, e->eid, fidx, ci);
	if (s) {
		s->pins++;
		lru_unlink(s);
		lru_push(c, s);
		while (s->state == SLOT_LOADING)
			pthread_cond_wait(&c->cond, &c->lock);
		if ((rc = s->err)) {
			if (--s->pins == 0 && s->unlinked)
				slot_drop(c, s);
			pthread_mutex_unlock(&c->lock);
			*err = rc;
			return NULL;
		}
		pthread_mutex_unlock(&c->lock);
		return s;
	}
	if (!(s = calloc(1, sizeof(*s)))) {
		pthread_mutex_unlock(&c->lock);
		*err = -ENOMEM;
		return NULL;
	}
	s->eid = e->eid;
	s->fidx = fidx;
	s->ci = ci;
	s->e = e;
	s->len = len;
	s->fd = -1;
	s->cost = c->zc ? zc_cost(c) : len;
	s->pins = 1;
	s->state = SLOT_LOADING;
	{
		size_t h = slot_hash(c, s->eid, fidx, ci);

		s->hnext = c->hash[h];
		c->hash[h] = s;
	}
	lru_push(c, s);
	c->bytes += s->cost;
	cache_evict(c);
	if (!c->zc)
		s->buf = take_buf(c, len, &s->cap);
	pthread_mutex_unlock(&c->lock);

	if (c->zc)
		rc = fetch_fd(m, s, f, cs);
	else
		rc = s->buf ? fetch(m, s, f, cs) : -ENOMEM;

	pthread_mutex_lock(&c->lock);
	s->state = SLOT_READY;
	if (rc < 0) {
		s->err = rc;
		slot_unlink(c, s); /* later readers try again */
		if (--s->pins == 0)
			slot_drop(c, s);
		s = NULL;
		*err = rc;
	}
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	return s;
}

/* ---- read-ahead --------------------------------------------------------- */

void ra_queue(struct wmount *m, struct entry *e, int64_t fidx, uint64_t ci)
{
	struct cache *c = &m->c;
	struct rajob *j;

	pthread_mutex_lock(&c->lock);
	if (c->stop || c->qlen == RA_QUEUE || slot_find(c, e->eid, fidx, ci)) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	for (unsigned i = 0; i < c->qlen; i++) {
		j = &c->q[(c->qhead + i) % RA_QUEUE];
		if (j->e == e && j->fidx == fidx && j->ci == ci) {
			pthread_mutex_unlock(&c->lock);
			return;
		}
	}
	j = &c->q[(c->qhead + c->qlen++) % RA_QUEUE];
	entry_get(e);
	j->e = e;
	j->fidx = fidx;
	j->ci = ci;
	pthread_cond_signal(&c->qcond);
	pthread_mutex_unlock(&c->lock);
}

static void ra_one(struct wmount *m, struct rajob *j)
{
	const wstore_manifest *man = wstore_checkpoint_manifest(j->e->ck);
	wstore_file_info fi;
	wstore_file *f = NULL;
	struct slot *s;
	uint64_t cs;
	int err;

	if (atomic_load(&j->e->dead) ||
	    wstore_manifest_file(&fi, man, (size_t)j->fidx) < 0 ||
	    wstore_file_open(&f, j->e->ck, fi.path) < 0)
		return;
	cs = fi.chunk_size ? fi.chunk_size : fi.size;
	if (cs && j->ci * cs < fi.size) {
		uint64_t left = fi.size - j->ci * cs;

		s = cache_get(m, j->e, j->fidx, f, cs, j->ci,
			      (size_t)(left < cs ? left : cs), &err);
		if (s)
			cache_unpin(&m->c, s);
	}
	wstore_file_free(f);
}

static void *ra_main(void *arg)
{
	struct wmount *m = arg;
	struct cache *c = &m->c;
	struct rajob j;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!c->stop && c->qlen == 0)
			pthread_cond_wait(&c->qcond, &c->lock);
		if (c->stop)
			break;
		j = c->q[c->qhead];
		c->qhead = (c->qhead + 1) % RA_QUEUE;
		c->qlen--;
		pthread_mutex_unlock(&c->lock);
		ra_one(m, &j);
		entry_put(j.e);
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* How many chunks ahead to read: about 128 MiB, at most an eighth of the
 * cache, between 1 and 8. */
uint64_t ra_depth(const struct wmount *m, uint64_t cs)
{
	uint64_t d = ((uint64_t)128 << 20) / cs;

	if (d > m->c.limit / 8 / cs)
		d = m->c.limit / 8 / cs;
	return d < 1 ? 1 : d > 8 ? 8 : d;
}

int cache_init(struct wmount *m)
{
	struct cache *c = &m->c;

	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	pthread_cond_init(&c->qcond, NULL);
	c->lru.next = c->lru.prev = &c->lru;
	c->limit = m->o.cache_size;
	c->zc = zc_capable(m->s);
	c->nhash = 4099;
	c->hash = calloc(c->nhash, sizeof(*c->hash));
	return c->hash ? 0 : -ENOMEM;
}

void cache_start(struct wmount *m)
{
	for (; m->c.nra < RA_THREADS; m->c.nra++)
		if (pthread_create(&m->c.ra[m->c.nra], NULL, ra_main, m))
			break;
}

void cache_stop(struct wmount *m)
{
	struct cache *c = &m->c;

	pthread_mutex_lock(&c->lock);
	c->stop = 1;
	pthread_cond_broadcast(&c->qcond);
	pthread_mutex_unlock(&c->lock);
	for (unsigned i = 0; i < c->nra; i++)
		pthread_join(c->ra[i], NULL);
	c->nra = 0;
	for (; c->qlen; c->qlen--, c->qhead = (c->qhead + 1) % RA_QUEUE)
		entry_put(c->q[c->qhead].e);
}

void cache_free(struct cache *c)
{
	if (!c->hash)
		return;
	for (size_t i = 0; i < c->nhash; i++) {
		struct slot *s = c->hash[i], *next;

		for (; s; s = next) {
			next = s->hnext;
			if (s->fd >= 0)
				close(s->fd);
			buf_free(s->buf, s->cap);
			free(s);
		}
	}
	for (unsigned i = 0; i < c->nfree; i++)
		buf_free(c->freebufs[i].buf, c->freebufs[i].cap);
	free(c->hash);
	pthread_cond_destroy(&c->qcond);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
}
