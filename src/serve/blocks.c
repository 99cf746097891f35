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
 * Which blocks are kept: every response reading through here has a cursor
 * (struct wcursor: its file, the next byte it sends, its end), so a block
 * that some response has yet to reach is known to be wanted.  Clients of
 * one checkpoint drift apart by a block or two (the one in front waits
 * for the store, those behind copy what it read), and a block dropped
 * while one of them still needs it is read from the store again, which
 * each 64 MiB chunk of Mooncake costs as much as a whole client.  So:
 *  - blocks nobody reads and nobody wants go first, the least recently
 *    used first: at most WBLOCKS_LOOSE_BYTES of them and of spare buffers
 *    are kept (two 64 MiB chunks of Mooncake), for a request coming late
 *    and for their buffers: at one 64 MiB chunk, a client at the end of a
 *    file let go of its last two blocks, one of them was freed and the
 *    next file's second block took a fresh buffer, whose first fill
 *    cleared 64 MiB of huge pages (a fifth of serve's CPU in a profile of
 *    one client on Mooncake; docs/performance.md);
 *  - blocks nobody reads at the moment but some cursor wants are kept up
 *    to WBLOCKS_IDLE_BYTES (four 64 MiB chunks of Mooncake; with the
 *    others, WBLOCKS_KEEP blocks at most), the least recently used
 *    dropped past that;
 *  - blocks being read or copied are never dropped, so there are at most
 *    that many more than the requests in flight.
 * A failed read is handed to its waiters and never kept: the next request
 * asks the store again.  Blocks are of one open checkpoint (one import,
 * read through its handle), so a block never mixes imports; a checkpoint
 * found dead (deleted or replaced) is read from the store again by every
 * request, whose read then fails (files.c).
 *
 * Readers: the store is read by up to WBLOCKS_READERS threads of the
 * checkpoint's (struct wblocks), started when first needed; a request
 * that wants a block nobody has read queues it first in line and waits
 * for it (see reader_thread for why requests do not read themselves).
 * Each reader reads through a file handle of its own, opened on the
 * checkpoint (which outlives wblocks_free, where the readers are stopped
 * and joined); should no reader start, the request reads the block
 * itself.  Read-ahead: a request that wants a block also has the next
 * block of its file queued (last in line), so that the store is read
 * while the block before is being sent: one client alone otherwise waits
 * for each whole block (a 64 MiB chunk on Mooncake) between two sends.
 * A request for a file's last block has the first block of the next file
 * in the checkpoint (the manifest's order, which Hub clients and curl
 * follow) read ahead, so that the first block of every file is not read
 * with nothing sent meanwhile; a block read ahead counts as wanted until
 * a request reads it (else the loose bound dropped it before the next
 * file's request came: 74 block reads for one download of a 25-block
 * checkpoint by 4 clients, against 30 with it kept).
 * The block read ahead is an ordinary block being read (state 0):
 * requests that want it wait for it, as for another request's.  At most
 * WBLOCKS_AHEAD blocks are queued or being read ahead; more are not asked
 * for.
 *
 * Buffers: memory for the store's reads (wstore_read_buf_alloc: on
 * Mooncake registered with its transfer engine, so that a chunk lands in
 * the block with no bounce buffer and no copy; elsewhere huge pages),
 * reused: a new block takes a spare buffer (WBLOCKS_SPARE are kept), else
 * that of the least recently used block nobody wants, else a new one.  A
 * fresh 64 MiB buffer costs a page fault per page on its first fill: with
 * a new buffer for every block, profiles of serve in front of Mooncake
 * showed a quarter of its CPU in those faults, and the bounce copy as
 * much again (docs/performance.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <string.h>

#include "http.h"

/* blocks kept at most: on Redis (1 MiB blocks) 16 grew serve's peak RSS
 * with 4 clients from 35 to 50 MiB */
#define WBLOCKS_KEEP 8
#define WBLOCKS_AHEAD 2
#define WBLOCKS_READERS 2
#define WBLOCKS_NICE 10
#define WBLOCKS_SPARE 2
/* bound on the bytes of blocks nobody reads or wants, and spare buffers
 * (two 64 MiB chunks: see the top of the file) */
#define WBLOCKS_LOOSE_BYTES ((size_t)128 << 20)
/* bound on the bytes of all the blocks nobody reads, and spare buffers */
#define WBLOCKS_IDLE_BYTES ((size_t)256 << 20)

struct wblock {
	struct wblock *next;
	char *path;   /* the checkpoint file */
	uint64_t off; /* of the block in it */
	size_t len;
	char *buf;
	size_t cap;  /* of buf */
	int state;   /* 0 being read, 1 read, < 0 the read's error */
	char *error; /* its message, for the waiters */
	int refs;    /* requests reading or copying it; a queued block 1 more */
	uint64_t used;
	struct wblock *qnext; /* in the readers' queue */
	int ahead;	      /* read ahead, not for a waiting request */
	int unused;	      /* read ahead and not yet read by a request */
};

/* A response reading a file through the blocks. */
struct wcursor {
	struct wcursor *next;
	char *path;
	uint64_t pos, end; /* the next byte it reads; its end */
};

struct wblocks {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct wblock *list;
	size_t n;
	uint64_t tick;
	int dead;		 /* the checkpoint was deleted or replaced */
	wstore_checkpoint *ck;	 /* the blocks' */
	struct wcursor *cursors; /* of the responses reading */
	/* the readers: blocks to read, those requests wait for first */
	struct wblock *qhead, *qtail;
	size_t nahead; /* blocks read ahead, queued or being read */
	pthread_cond_t work;
	pthread_t reader[WBLOCKS_READERS];
	int nreaders, idle, stop;
	/* buffers of dropped blocks, for the next ones */
	char *spare[WBLOCKS_SPARE];
	size_t spare_cap[WBLOCKS_SPARE], nspare;
};

/* blocks read from the store, by every checkpoint's readers (metrics) */
static atomic_uint_fast64_t block_reads;

uint64_t wblocks_reads_total(void)
{
	return (uint64_t)atomic_load(&block_reads);
}

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

static void block_free(struct wblocks *bs, struct wblock *b)
{
	free(b->path);
	wstore_read_buf_free(bs->ck, b->buf);
	free(b->error);
	free(b);
}

void wblocks_free(struct wblocks *bs)
{
	if (!bs)
		return;
	pthread_mutex_lock(&bs->mu);
	bs->stop = 1;
	pthread_cond_broadcast(&bs->work);
	pthread_mutex_unlock(&bs->mu);
	for (int i = 0; i < bs->nreaders; i++)
		pthread_join(bs->reader[i], NULL);
	while (bs->list) {
		struct wblock *b = bs->list;

		bs->list = b->next;
		block_free(bs, b);
	}
	while (bs->nspare)
		wstore_read_buf_free(bs->ck, bs->spare[--bs->nspare]);
	/* cursors are freed by their responses, which hold the checkpoint */
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

struct wcursor *wblocks_cursor_new(struct wblocks *bs, const char *path,
				   uint64_t start, uint64_t end)
{
	struct wcursor *c = calloc(1, sizeof(*c));

	if (!c || !(c->path = strdup(path))) {
		free(c);
		return NULL;
	}
	c->pos = start;
	c->end = end;
	pthread_mutex_lock(&bs->mu);
	c->next = bs->cursors;
	bs->cursors = c;
	pthread_mutex_unlock(&bs->mu);
	return c;
}

void wblocks_cursor_free(struct wblocks *bs, struct wcursor *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&bs->mu);
	for (struct wcursor **p = &bs->cursors; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	pthread_mutex_unlock(&bs->mu);
	free(c->path);
	free(c);
}

/* Whether a response has yet to read some of block b (bs->mu held). */
static int wanted(const struct wblocks *bs, const struct wblock *b)
{
	if (b->unused)
		return 1; /* read ahead for a request that is yet to come */
	for (const struct wcursor *c = bs->cursors; c; c = c->next)
		if (c->pos < b->off + b->len && c->end > b->off &&
		    !strcmp(c->path, b->path))
			return 1;
	return 0;
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

/* Bytes of the spare buffers, and of the blocks nobody reads (loose: and
 * nobody wants); bs->mu held. */
static size_t idle_bytes(const struct wblocks *bs, int loose)
{
	size_t sum = 0;

	for (const struct wblock *b = bs->list; b; b = b->next)
		if (b->refs == 0 && (!loose || !wanted(bs, b)))
			sum += b->cap;
	for (size_t i = 0; i < bs->nspare; i++)
		sum += bs->spare_cap[i];
	return sum;
}

/* The least recently used block nobody reads (loose: nor wants), with a
 * buffer of at least need bytes; NULL if none (bs->mu held). */
static struct wblock *oldest_idle(const struct wblocks *bs, int loose,
				  size_t need)
{
	struct wblock *old = NULL;

	for (struct wblock *b = bs->list; b; b = b->next)
		if (b->refs == 0 && b->cap >= need &&
		    (!old || b->used < old->used) && (!loose || !wanted(bs, b)))
			old = b;
	return old;
}

/* Drop failed blocks nobody waits for, then blocks nobody reads past the
 * bounds (see the top of the file); bs->mu held. */
static void trim(struct wblocks *bs, struct wblock **gone)
{
	struct wblock *b, *next;

	for (b = bs->list; b; b = next) {
		next = b->next;
		if (b->refs == 0 && b->state < 0)
			drop(bs, b, gone);
	}
	while (idle_bytes(bs, 1) > WBLOCKS_LOOSE_BYTES &&
	       (b = oldest_idle(bs, 1, 0)))
		drop(bs, b, gone);
	while ((bs->n > WBLOCKS_KEEP ||
		idle_bytes(bs, 0) > WBLOCKS_IDLE_BYTES) &&
	       (b = oldest_idle(bs, 0, 0)))
		drop(bs, b, gone);
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
		    idle_bytes(bs, 1) + b->cap <= WBLOCKS_LOOSE_BYTES) {
			bs->spare[bs->nspare] = b->buf;
			bs->spare_cap[bs->nspare++] = b->cap;
			b->buf = NULL;
		}
		pthread_mutex_unlock(&bs->mu);
		block_free(bs, b);
	}
}

/* A buffer for b: a spare big enough, else that of the least recently
 * used block nobody reads or wants, else a new one. */
static char *take_buffer(struct wblocks *bs, struct wblock *b)
{
	size_t need = b->len ? b->len : 1;
	struct wblock *old;
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
	if (!buf && (old = oldest_idle(bs, 1, need)) && old->state >= 0) {
		unlink_block(bs, old);
		buf = old->buf;
		b->cap = old->cap;
		old->buf = NULL;
		pthread_mutex_unlock(&bs->mu);
		block_free(bs, old);
		return buf;
	}
	pthread_mutex_unlock(&bs->mu);
	if (!buf && (buf = wstore_read_buf_alloc(bs->ck, need)))
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
	if (rc == 0) {
		atomic_fetch_add(&block_reads, 1);
		rc = wstore_file_pread(f, b->buf, b->len, b->off, &n);
	}
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

/* The length of the block at start of a file of size bytes. */
static size_t block_len(uint64_t size, uint64_t start, uint64_t bsize)
{
	return size - start < bsize ? (size_t)(size - start) : (size_t)bsize;
}

/* The block of path at start, kept or being read; NULL if none (bs->mu
 * held).  Its length must be the one asked for: a block read ahead for
 * the next file took the block size of the file before, which a file of
 * other chunks does not share. */
static struct wblock *find(struct wblocks *bs, const char *path, uint64_t start,
			   size_t len)
{
	for (struct wblock *b = bs->dead ? NULL : bs->list; b; b = b->next)
		if (b->off == start && b->len == len && b->state >= 0 &&
		    !strcmp(b->path, path))
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
	b->len = block_len(size, start, bsize);
	b->refs = 1;
	b->next = bs->list;
	bs->list = b;
	bs->n++;
	return b;
}

/* A reader's read of b, through *f (a file handle of its own, kept
 * while the blocks are of one file); bs->mu not held. */
static void reader_fill(struct wblocks *bs, struct wblock *b, wstore_file **f)
{
	if (*f && strcmp(wstore_file_path(*f), b->path) != 0) {
		wstore_file_free(*f);
		*f = NULL;
	}
	if (*f || wstore_file_open(f, bs->ck, b->path) == 0) {
		fill(bs, b, *f);
		return;
	}
	pthread_mutex_lock(&bs->mu);
	b->error = strdup(wstore_last_error());
	b->state = -EIO;
	pthread_cond_broadcast(&bs->cv);
	pthread_mutex_unlock(&bs->mu);
}

/* The next queued block, taken off the queue (bs->mu held). */
static struct wblock *dequeue(struct wblocks *bs)
{
	struct wblock *b = bs->qhead;

	if (b && !(bs->qhead = b->qnext))
		bs->qtail = NULL;
	return b;
}

/*
 * A reader: reads the queued blocks in turn.  Mooncake's get_into waits
 * for its transfer by polling (clock_gettime and a mutex in a loop: a
 * core busy for as long as a chunk is in flight, while its transfer
 * engine's own thread does the receiving).  So the store is read by
 * these threads only, never by the threads that send to the clients,
 * which wait for a block on a condition variable, and at a lower priority
 * (WBLOCKS_NICE, a thread's own nice value on Linux): the poll gets the
 * CPU that sending leaves over (docs/performance.md).
 */
static void *reader_thread(void *arg)
{
	struct wblocks *bs = arg;
	wstore_file *f = NULL;
	struct wblock *b, *gone = NULL;

	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), WBLOCKS_NICE);
	pthread_mutex_lock(&bs->mu);
	for (;;) {
		while (!bs->stop && !bs->qhead) {
			bs->idle++;
			pthread_cond_wait(&bs->work, &bs->mu);
			bs->idle--;
		}
		if (bs->stop)
			break;
		b = dequeue(bs);
		pthread_mutex_unlock(&bs->mu);
		reader_fill(bs, b, &f);
		pthread_mutex_lock(&bs->mu);
		bs->nahead -= b->ahead;
		b->refs--;
		trim(bs, &gone);
		pthread_mutex_unlock(&bs->mu);
		free_gone(bs, gone);
		gone = NULL;
		pthread_mutex_lock(&bs->mu);
	}
	/* blocks still queued: failed for their waiters, then let go */
	while ((b = dequeue(bs))) {
		b->state = -ECANCELED;
		bs->nahead -= b->ahead;
		b->refs--;
	}
	pthread_cond_broadcast(&bs->cv);
	pthread_mutex_unlock(&bs->mu);
	wstore_file_free(f);
	return NULL;
}

/* Queue b (being read, state 0) for the readers, first if a request
 * waits for it, starting a reader if none is idle; 0 if there is no
 * reader at all (bs->mu held). */
static int enqueue(struct wblocks *bs, struct wblock *b)
{
	if (bs->idle == 0 && bs->nreaders < WBLOCKS_READERS &&
	    pthread_create(&bs->reader[bs->nreaders], NULL, reader_thread,
			   bs) == 0)
		bs->nreaders++;
	if (bs->nreaders == 0)
		return 0;
	b->refs++;
	if (!b->ahead) {
		b->qnext = bs->qhead;
		bs->qhead = b;
		if (!bs->qtail)
			bs->qtail = b;
	} else {
		if (bs->qtail)
			bs->qtail->qnext = b;
		else
			bs->qhead = b;
		bs->qtail = b;
		bs->nahead++;
	}
	pthread_cond_signal(&bs->work);
	return 1;
}

/* Have the block of path at start read ahead, unless it is kept or being
 * read, past the end, or WBLOCKS_AHEAD are read ahead already (bs->mu
 * held). */
static void read_ahead(struct wblocks *bs, const char *path, uint64_t start,
		       uint64_t size, uint64_t bsize)
{
	struct wblock *b;

	if (bs->dead || bs->stop || start >= size ||
	    bs->nahead >= WBLOCKS_AHEAD ||
	    find(bs, path, start, block_len(size, start, bsize)))
		return;
	if (!(b = add(bs, path, start, size, bsize)))
		return;
	b->used = ++bs->tick; /* as recent as the block that asked for it */
	b->ahead = 1;
	b->unused = 1;
	b->refs = 0; /* no request reads it yet: the queue's ref only */
	if (!enqueue(bs, b))
		b->state = -EAGAIN; /* no reader: dropped by trim */
}

/* The file after path in the checkpoint's manifest (sorted by path) and
 * its size; 0 if path is the last or not found. */
static int next_file(const struct wblocks *bs, const char *path,
		     wstore_file_info *fi)
{
	const wstore_manifest *m = wstore_checkpoint_manifest(bs->ck);
	size_t lo = 0, hi = m ? wstore_manifest_file_count(m) : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c;

		if (wstore_manifest_file(fi, m, mid) < 0)
			return 0;
		if ((c = strcmp(fi->path, path)) == 0)
			return wstore_manifest_file(fi, m, mid + 1) == 0;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* Have the blocks after the one at start read ahead: the next of its
 * file, or past the file's last block the first of the next file in the
 * checkpoint (clients such as a Hub download or curl fetch the files in
 * the listing's order, and one client alone otherwise waits for every
 * file's first block with nothing sent meanwhile); bs->mu held. */
static void read_next(struct wblocks *bs, const char *path, uint64_t start,
		      uint64_t size, uint64_t bsize)
{
	wstore_file_info fi;

	if (start + bsize < size) {
		read_ahead(bs, path, start + bsize, size, bsize);
		return;
	}
	if (!bs->dead && bs->nahead < WBLOCKS_AHEAD &&
	    next_file(bs, path, &fi) && fi.size > 0)
		read_ahead(bs, fi.path, 0, fi.size, bsize);
}

int wblocks_read(struct wblocks *bs, struct wcursor *cur, wstore_file *f,
		 uint64_t bsize, uint64_t off, char *dst, size_t want,
		 size_t *out_n, int *out_shared, char *err, size_t errlen)
{
	const char *path = wstore_file_path(f);
	uint64_t size = wstore_file_size(f), start = off - off % bsize;
	struct wblock *b, *gone = NULL;
	size_t n = 0;
	int rc;

	*out_n = 0;
	*out_shared = 0;
	pthread_mutex_lock(&bs->mu);
	if (cur)
		cur->pos = off;
	if ((b = find(bs, path, start, block_len(size, start, bsize)))) {
		b->refs++;
		b->unused = 0;
		*out_shared = 1;
		read_next(bs, path, start, size, bsize);
		while (b->state == 0)
			pthread_cond_wait(&bs->cv, &bs->mu);
	} else if ((b = add(bs, path, start, size, bsize))) {
		if (enqueue(bs, b)) {
			read_next(bs, path, start, size, bsize);
			while (b->state == 0)
				pthread_cond_wait(&bs->cv, &bs->mu);
		} else {
			/* no reader could start: read here, without the
			 * lock held */
			pthread_mutex_unlock(&bs->mu);
			fill(bs, b, f);
			pthread_mutex_lock(&bs->mu);
		}
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
	if (cur)
		cur->pos = off + n;
	b->refs--;
	trim(bs, &gone);
	pthread_mutex_unlock(&bs->mu);
	free_gone(bs, gone);
	return rc;
}
