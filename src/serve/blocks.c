/*
 * blocks.c - single flight for blocks read from a store that does not
 * hand out files (Redis, Mooncake): the requests that want a block of a
 * checkpoint file at the same time share one read of it from the store.
 *
 * Many Hub clients downloading one checkpoint at once (an engine fleet
 * starting) ask for the same blocks at about the same time; each used to
 * read its own copy, so the store was asked for every block once per
 * client (on Mooncake 25-27 threads of one serve process were seen in
 * get_into of the same chunk, spinning).  Here the first request to want
 * a block reads it into a buffer of the checkpoint's (struct wblocks,
 * one per open checkpoint), the others wait for that read and copy from
 * the buffer.
 *
 * Bounds: at most WBLOCKS_KEEP blocks are kept once nobody reads them,
 * and at most WBLOCKS_IDLE_BYTES of them and of spare buffers (two 64
 * MiB chunks of Mooncake), the least recently used going first; blocks being
 * read or copied are never dropped, so there are at most that many more than
 * the requests in flight.  A failed read is handed to its waiters and never
 * kept: the next request asks the store again.  Blocks are of one open
 * checkpoint (one import, read through its handle), so a block never mixes
 * imports; a checkpoint found dead (deleted or replaced) is read from the store
 * again by every request, whose read then fails (files.c).
 *
 * Read-ahead: a request that read a block also has the next block of its
 * file read for it, by a thread of the checkpoint's (struct wblocks), so
 * that the store is read while the block before is being sent: one
 * client alone otherwise waits for each whole block (a 64 MiB chunk on
 * Mooncake) between two sends.  The block read ahead is an ordinary
 * block being read (state 0): requests that want it wait for it, as for
 * another request's read.  At most WBLOCKS_AHEAD blocks are queued or
 * being read ahead; more are not asked for.  The thread reads through a
 * file handle of its own, opened on the checkpoint (which outlives
 * wblocks_free, where the thread is stopped and joined).
 *
 * Buffers: the buffers of dropped blocks are kept for the next blocks
 * (WBLOCKS_SPARE of them): a fresh buffer of a block's size (64 MiB on
 * Mooncake) costs a page fault per page on its first fill, which profiles
 * of serve in front of Mooncake showed at about a tenth of its CPU.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

#define WBLOCKS_KEEP 4
#define WBLOCKS_AHEAD 2
#define WBLOCKS_SPARE 2
/* bound on the bytes of blocks nobody reads and of spare buffers */
#define WBLOCKS_IDLE_BYTES ((size_t)128 << 20)

struct wblock {
	struct wblock *next;
	char *path;   /* the checkpoint file */
	uint64_t off; /* of the block in it */
	size_t len;
	char *buf;
	size_t cap;  /* of buf */
	int state;   /* 0 being read, 1 read, < 0 the read's error */
	char *error; /* its message, for the waiters */
	int refs;    /* requests reading or copying it */
	uint64_t used;
};

struct wblocks {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct wblock *list;
	size_t n;
	uint64_t tick;
	int dead; /* the checkpoint was deleted or replaced */
	/* read-ahead */
	wstore_checkpoint *ck;		     /* NULL: none */
	struct wblock *ahead[WBLOCKS_AHEAD]; /* queued, each with a ref */
	size_t nahead, busy;		     /* queued; being read */
	pthread_cond_t work;
	pthread_t thread;
	int started, stop;
	/* buffers of dropped blocks, for the next ones */
	char *spare[WBLOCKS_SPARE];
	size_t spare_cap[WBLOCKS_SPARE], nspare;
};

struct wblocks *wblocks_new(wstore_checkpoint *ck)
{
	struct wblocks *bs = calloc(1, sizeof(*bs));

	if (!bs)
		return NULL;
	pthread_mutex_init(&bs->mu, NULL);
	pthread_cond_init(&bs->cv, NULL);
	pthread_cond_init(&bs->work, NULL);
	bs->ck = ck;
	return bs;
}

static void block_free(struct wblock *b)
{
	free(b->path);
	free(b->buf);
	free(b->error);
	free(b);
}

void wblocks_free(struct wblocks *bs)
{
	if (!bs)
		return;
	if (bs->started) {
		pthread_mutex_lock(&bs->mu);
		bs->stop = 1;
		pthread_cond_broadcast(&bs->work);
		pthread_mutex_unlock(&bs->mu);
		pthread_join(bs->thread, NULL);
	}
	while (bs->list) {
		struct wblock *b = bs->list;

		bs->list = b->next;
		block_free(b);
	}
	while (bs->nspare)
		free(bs->spare[--bs->nspare]);
	pthread_cond_destroy(&bs->work);
	pthread_cond_destroy(&bs->cv);
	pthread_mutex_destroy(&bs->mu);
	free(bs);
}

void wblocks_kill(struct wblocks *bs)
{
	if (!bs)
		return;
	pthread_mutex_lock(&bs->mu);
	bs->dead = 1;
	pthread_mutex_unlock(&bs->mu);
}

/* Unlink b (bs->mu held). */
static void unlink_block(struct wblocks *bs, struct wblock *b)
{
	for (struct wblock **p = &bs->list; *p; p = &(*p)->next)
		if (*p == b) {
			*p = b->next;
			bs->n--;
			return;
		}
}

/* Move b from the list to *gone (bs->mu held). */
static void drop(struct wblocks *bs, struct wblock *b, struct wblock **gone)
{
	unlink_block(bs, b);
	b->next = *gone;
	*gone = b;
}

/* Drop failed blocks nobody waits for, and blocks nobody reads beyond
 * WBLOCKS_KEEP, the least recently used first; bs->mu held. */
/* Bytes of the blocks nobody reads and of the spare buffers (bs->mu
 * held). */
static size_t idle_bytes(const struct wblocks *bs)
{
	size_t sum = 0;

	for (const struct wblock *b = bs->list; b; b = b->next)
		if (b->refs == 0)
			sum += b->len;
	for (size_t i = 0; i < bs->nspare; i++)
		sum += bs->spare_cap[i];
	return sum;
}

static void trim(struct wblocks *bs, struct wblock **gone)
{
	struct wblock *b, *next, *old;

	for (b = bs->list; b; b = next) {
		next = b->next;
		if (b->refs == 0 && b->state < 0)
			drop(bs, b, gone);
	}
	while (bs->n > WBLOCKS_KEEP || idle_bytes(bs) > WBLOCKS_IDLE_BYTES) {
		old = NULL;
		for (b = bs->list; b; b = b->next)
			if (b->refs == 0 && (!old || b->used < old->used))
				old = b;
		if (!old)
			return;
		drop(bs, old, gone);
	}
}

/* Free the dropped blocks, their buffers kept as spares while there is
 * room (bs->mu not held). */
static void free_gone(struct wblocks *bs, struct wblock *gone)
{
	while (gone) {
		struct wblock *b = gone;

		gone = b->next;
		pthread_mutex_lock(&bs->mu);
		if (b->buf && bs->nspare < WBLOCKS_SPARE &&
		    idle_bytes(bs) + b->cap <= WBLOCKS_IDLE_BYTES) {
			bs->spare[bs->nspare] = b->buf;
			bs->spare_cap[bs->nspare++] = b->cap;
			b->buf = NULL;
		}
		pthread_mutex_unlock(&bs->mu);
		block_free(b);
	}
}

/* A buffer for b: a spare big enough, else a new one. */
static char *take_buffer(struct wblocks *bs, struct wblock *b)
{
	size_t need = b->len ? b->len : 1;
	char *buf = NULL;

	pthread_mutex_lock(&bs->mu);
	for (size_t i = 0; i < bs->nspare; i++)
		if (bs->spare_cap[i] >= need) {
			buf = bs->spare[i];
			b->cap = bs->spare_cap[i];
			bs->spare[i] = bs->spare[--bs->nspare];
			bs->spare_cap[i] = bs->spare_cap[bs->nspare];
			break;
		}
	pthread_mutex_unlock(&bs->mu);
	if (!buf && (buf = malloc(need)))
		b->cap = need;
	return buf;
}

/* Read block b (being read, state 0) of f from the store; bs->mu not
 * held.  Its waiters are woken. */
static void fill(struct wblocks *bs, struct wblock *b, wstore_file *f)
{
	size_t n = 0;
	int rc;

	rc = (b->buf = take_buffer(bs, b)) ? 0 : -ENOMEM;
	if (rc == 0)
		rc = wstore_file_pread(f, b->buf, b->len, b->off, &n);
	if (rc == 0 && n != b->len)
		rc = WSTORE_ECORRUPT;
	pthread_mutex_lock(&bs->mu);
	if (rc < 0) {
		b->error = strdup(rc == WSTORE_ECORRUPT && n != b->len
					  ? "file shrank"
					  : wstore_last_error());
		b->state = rc;
	} else {
		b->state = 1;
	}
	pthread_cond_broadcast(&bs->cv);
	pthread_mutex_unlock(&bs->mu);
}

/* The block of path at start, kept or being read; NULL if none (bs->mu
 * held). */
static struct wblock *find(struct wblocks *bs, const char *path, uint64_t start)
{
	for (struct wblock *b = bs->dead ? NULL : bs->list; b; b = b->next)
		if (b->off == start && b->state >= 0 && !strcmp(b->path, path))
			return b;
	return NULL;
}

/* A new block of path at start, being read, with one ref (bs->mu held). */
static struct wblock *add(struct wblocks *bs, const char *path, uint64_t start,
			  uint64_t size, uint64_t bsize)
{
	struct wblock *b = calloc(1, sizeof(*b));

	if (!b || !(b->path = strdup(path))) {
		free(b);
		return NULL;
	}
	b->off = start;
	b->len = size - start < bsize ? (size_t)(size - start) : (size_t)bsize;
	b->refs = 1;
	b->next = bs->list;
	bs->list = b;
	bs->n++;
	return b;
}

/* The read-ahead thread: reads the queued blocks in turn, through a file
 * handle of its own (kept while the blocks are of one file). */
static void *ahead_thread(void *arg)
{
	struct wblocks *bs = arg;
	wstore_file *f = NULL;
	struct wblock *b, *gone = NULL;

	pthread_mutex_lock(&bs->mu);
	for (;;) {
		while (!bs->stop && bs->nahead == 0)
			pthread_cond_wait(&bs->work, &bs->mu);
		if (bs->stop)
			break;
		b = bs->ahead[0];
		memmove(bs->ahead, bs->ahead + 1,
			--bs->nahead * sizeof(*bs->ahead));
		bs->busy++;
		pthread_mutex_unlock(&bs->mu);
		if (f && strcmp(wstore_file_path(f), b->path) != 0) {
			wstore_file_free(f);
			f = NULL;
		}
		if (f || wstore_file_open(&f, bs->ck, b->path) == 0) {
			fill(bs, b, f);
		} else {
			pthread_mutex_lock(&bs->mu);
			b->error = strdup(wstore_last_error());
			b->state = -EIO;
			pthread_cond_broadcast(&bs->cv);
			pthread_mutex_unlock(&bs->mu);
		}
		pthread_mutex_lock(&bs->mu);
		bs->busy--;
		b->refs--;
		trim(bs, &gone);
		pthread_mutex_unlock(&bs->mu);
		free_gone(bs, gone);
		gone = NULL;
		pthread_mutex_lock(&bs->mu);
	}
	/* blocks still queued: failed for their waiters, then let go */
	while (bs->nahead) {
		b = bs->ahead[--bs->nahead];
		b->state = -ECANCELED;
		b->refs--;
	}
	pthread_cond_broadcast(&bs->cv);
	pthread_mutex_unlock(&bs->mu);
	wstore_file_free(f);
	return NULL;
}

/* Have the block of path at start read ahead, unless it is kept or being
 * read, past the end, or the queue is full (bs->mu held). */
static void read_ahead(struct wblocks *bs, const char *path, uint64_t start,
		       uint64_t size, uint64_t bsize)
{
	struct wblock *b;

	if (!bs->ck || bs->dead || start >= size ||
	    bs->nahead + bs->busy >= WBLOCKS_AHEAD || find(bs, path, start))
		return;
	if (!bs->started) {
		if (pthread_create(&bs->thread, NULL, ahead_thread, bs) != 0)
			return;
		bs->started = 1;
	}
	if (!(b = add(bs, path, start, size, bsize)))
		return;
	b->used = ++bs->tick; /* as recent as the block that asked for it */
	bs->ahead[bs->nahead++] = b;
	pthread_cond_signal(&bs->work);
}

int wblocks_read(struct wblocks *bs, wstore_file *f, uint64_t bsize,
		 uint64_t off, char *dst, size_t want, size_t *out_n,
		 int *out_shared, char *err, size_t errlen)
{
	const char *path = wstore_file_path(f);
	uint64_t size = wstore_file_size(f), start = off - off % bsize;
	struct wblock *b, *gone = NULL;
	size_t n = 0;
	int rc;

	*out_n = 0;
	*out_shared = 0;
	pthread_mutex_lock(&bs->mu);
	if ((b = find(bs, path, start))) {
		b->refs++;
		*out_shared = 1;
		read_ahead(bs, path, start + bsize, size, bsize);
		while (b->state == 0)
			pthread_cond_wait(&bs->cv, &bs->mu);
	} else if ((b = add(bs, path, start, size, bsize))) {
		read_ahead(bs, path, start + bsize, size, bsize);
		pthread_mutex_unlock(&bs->mu);
		/* the store is read without the lock held */
		fill(bs, b, f);
		pthread_mutex_lock(&bs->mu);
	} else {
		pthread_mutex_unlock(&bs->mu);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	b->used = ++bs->tick;
	rc = b->state < 0 ? b->state : 0;
	if (rc < 0)
		snprintf(err, errlen, "%s",
			 b->error ? b->error : "read failed");
	pthread_mutex_unlock(&bs->mu);
	if (rc == 0) {
		/* read and never changed once read: copied without the lock */
		n = b->len - (size_t)(off - start);
		if (n > want)
			n = want;
		memcpy(dst, b->buf + (off - start), n);
		*out_n = n;
	}
	pthread_mutex_lock(&bs->mu);
	b->refs--;
	trim(bs, &gone);
	pthread_mutex_unlock(&bs->mu);
	free_gone(bs, gone);
	return rc;
}
