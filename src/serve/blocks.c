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
 * Bounds: at most WBLOCKS_KEEP blocks are kept once nobody reads them
 * (the least recently used go first); blocks being read or copied are
 * never dropped, so there are at most that many more than the requests
 * in flight.  A failed read is handed to its waiters and never kept: the
 * next request asks the store again.  Blocks are of one open checkpoint
 * (one import, read through its handle), so a block never mixes imports;
 * a checkpoint found dead (deleted or replaced) is read from the store
 * again by every request, whose read then fails (files.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

#define WBLOCKS_KEEP 4

struct wblock {
	struct wblock *next;
	char *path;   /* the checkpoint file */
	uint64_t off; /* of the block in it */
	size_t len;
	char *buf;
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
};

struct wblocks *wblocks_new(void)
{
	struct wblocks *bs = calloc(1, sizeof(*bs));

	if (!bs)
		return NULL;
	pthread_mutex_init(&bs->mu, NULL);
	pthread_cond_init(&bs->cv, NULL);
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
	while (bs->list) {
		struct wblock *b = bs->list;

		bs->list = b->next;
		block_free(b);
	}
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
static void trim(struct wblocks *bs, struct wblock **gone)
{
	struct wblock *b, *next, *old;

	for (b = bs->list; b; b = next) {
		next = b->next;
		if (b->refs == 0 && b->state < 0)
			drop(bs, b, gone);
	}
	while (bs->n > WBLOCKS_KEEP) {
		old = NULL;
		for (b = bs->list; b; b = b->next)
			if (b->refs == 0 && (!old || b->used < old->used))
				old = b;
		if (!old)
			return;
		drop(bs, old, gone);
	}
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
	for (b = bs->dead ? NULL : bs->list; b; b = b->next)
		if (b->off == start && b->state >= 0 && !strcmp(b->path, path))
			break;
	if (b) {
		b->refs++;
		*out_shared = 1;
		while (b->state == 0)
			pthread_cond_wait(&bs->cv, &bs->mu);
	} else if ((b = calloc(1, sizeof(*b))) && (b->path = strdup(path))) {
		b->off = start;
		b->len = size - start < bsize ? (size_t)(size - start)
					      : (size_t)bsize;
		b->refs = 1;
		b->next = bs->list;
		bs->list = b;
		bs->n++;
		pthread_mutex_unlock(&bs->mu);
		/* the store is read without the lock held */
		rc = (b->buf = malloc(b->len ? b->len : 1)) ? 0 : -ENOMEM;
		if (rc == 0)
			rc = wstore_file_pread(f, b->buf, b->len, start, &n);
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
	} else {
		free(b);
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
	while (gone) {
		b = gone;
		gone = b->next;
		block_free(b);
	}
	return rc;
}
