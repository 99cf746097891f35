/*
 * pipeline.c - the import's data path: read, hash and store every chunk
 * of the source files (wstore__pipeline_run, pipeline.h).  import.c
 * around it keeps the lifecycle: lock, intent record, manifest, indexes.
 *
 * Readers (one per file being imported, up to jobs) read each chunk into a
 * buffer from a shared pool and hash it, in file order; putters (jobs of
 * them) store filled buffers in any order and give them back.  Reading and
 * hashing thus overlap with storing, and memory is bounded by the pool:
 * readers + 2 chunk buffers, allocated once.
 *
 * On a backend with put_stream (the file store), when there are at least
 * as many large files as jobs, there are no putters and no pool: each
 * reader streams its chunks into the store itself through one PIECE-sized
 * buffer, every piece read, hashed and written while it is in the CPU
 * cache (use_stream).  That halves the memory traffic (a 64 MiB chunk
 * buffer goes out to memory and back for the hash and again for the
 * write); the system time it saves: docs/performance.md.
 *
 * On a backend that keeps each file as one local file (begin_file: the
 * file store's data files), nothing is put: each file's data file is begun
 * by its reader, the chunks are written into it at their offsets (by the
 * putters, or by the reader when streaming), and whoever finishes last
 * with the file commits it (rename into place), or aborts it (removes it)
 * after any failure.  With reflink, the reader first clones the source
 * file into the data file (FICLONE) and then only reads it for the hash.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/fs.h>

#include "digest.h"
#include "error.h"
#include "pipeline.h"
#include "store.h"
#include "util.h"

/* Bytes read and hashed at a time: fits in a core's L2 cache. */
#define PIECE ((size_t)512 << 10)
#define STREAM_CHUNK ((uint64_t)256 << 20) /* stream chunks this large */
/* Writes at least this large start their writeback at once. */
#define WRITEBACK_MIN ((size_t)1 << 20)

struct job;

/* A file's data file while it is written (whole-file stores). */
struct wfile {
	void *h;       /* begin_file's handle; NULL once committed or aborted */
	int fd;	       /* the backend's, open for writing */
	unsigned refs; /* the reader's, and one per chunk queued for it */
	int bad;       /* a write into it failed */
};

/* One run of the pipeline: what wstore__pipeline gave, and the shared
 * state of its threads. */
struct run {
	const wstore__pipeline *p;
	wstore_store *s;
	const wstore__scan *scan;
	wstore_manifest *m;
	uint64_t chunk_size;
	uint64_t *attempted; /* per file: chunks put (or tried) */
	char *done;	     /* per file: finished and hashed */
	pthread_mutex_t mu;
	pthread_cond_t cv_free; /* a buffer came back to the pool */
	pthread_cond_t cv_job;	/* a filled buffer was queued */
	void **free_bufs;	/* the pool: nfree of nbufs buffers free */
	size_t nfree, nbufs;
	struct job *q; /* filled buffers, a ring of nbufs */
	size_t qhead, qlen;
	int readers_left;
	int stream; /* readers store each chunk themselves (put_stream, or
		     * writing into the data file) */
	int whole;  /* chunks go into one data file per file (begin_file) */
	struct wfile *wf; /* per file, when whole */
	size_t next;	  /* next file index to hand out */
	uint64_t bytes_done;
	wstore__first_err err; /* stops every worker */
};

static void fail(struct run *r, int rc)
{
	pthread_mutex_lock(&r->mu);
	wstore__first_err_keep(&r->err, rc);
	/* wake readers waiting for a buffer: they stop now */
	pthread_cond_broadcast(&r->cv_free);
	pthread_mutex_unlock(&r->mu);
}

static int stopped(struct run *r)
{
	int e;

	pthread_mutex_lock(&r->mu);
	e = r->err.code;
	pthread_mutex_unlock(&r->mu);
	return e;
}

static int progress(struct run *r, uint64_t n, const char *path)
{
	int rc = 0;

	pthread_mutex_lock(&r->mu);
	r->bytes_done += n;
	if (r->p->progress && r->p->progress(r->bytes_done, r->scan->total,
					     path, r->p->progress_ctx))
		rc = wstore__err(WSTORE_ECANCELED, "import interrupted");
	pthread_mutex_unlock(&r->mu);
	return rc;
}

static int read_full(int fd, void *buf, size_t n, uint64_t off,
		     const char *path)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got,
				  (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return wstore__errc(-errno, "cannot read '%s'", path);
		if (r == 0)
			return wstore__err(
				WSTORE_EINVAL,
				"source file '%s' shrank during import", path);
		got += (size_t)r;
	}
	return 0;
}

/*
 * Read n bytes at off into buf and hash them, a cache-sized piece at a
 * time: each piece is hashed while the read has left it in the CPU cache,
 * instead of the whole chunk going out to memory and being read back.
 */
static int read_hash(int fd, char *buf, size_t n, uint64_t off,
		     const char *path, wstore__sha256 *h)
{
	for (size_t done = 0; done < n;) {
		size_t k = n - done < PIECE ? n - done : PIECE;
		int rc = read_full(fd, buf + done, k, off + done, path);

		if (rc < 0)
			return rc;
		wstore__sha256_update(h, buf + done, k);
		done += k;
	}
	return 0;
}

/*
 * Store one chunk.  On a write-once store a put on a key that still holds
 * bytes of an earlier import would keep them, so every key was removed
 * before the first put (import.c, clear_keys); with the checkpoint's lock held
 * nobody else writes them, so each put writes fresh bytes and needs no read
 * back.
 */
static int put_chunk(struct run *r, const char *key, const void *data, size_t n)
{
	wstore_backend *b = r->s->b;

	return b->put(b, key, data, n);
}

/* ---- the pool and the queue of filled buffers ------------------------- */

struct job {
	void *buf;
	size_t n;
	const char *key;
	const char *path;
	size_t idx;   /* the file */
	uint64_t off; /* of the chunk in it */
};

static void *take_buf(struct run *r)
{
	void *b = NULL;

	pthread_mutex_lock(&r->mu);
	while (r->nfree == 0 && !r->err.code)
		pthread_cond_wait(&r->cv_free, &r->mu);
	if (!r->err.code)
		b = r->free_bufs[--r->nfree];
	pthread_mutex_unlock(&r->mu);
	return b;
}

static void give_buf(struct run *r, void *b)
{
	pthread_mutex_lock(&r->mu);
	r->free_bufs[r->nfree++] = b;
	pthread_cond_signal(&r->cv_free);
	pthread_mutex_unlock(&r->mu);
}

static void push_job(struct run *r, const struct job *j)
{
	pthread_mutex_lock(&r->mu);
	if (r->whole)
		r->wf[j->idx].refs++; /* the putter's, until it has written */
	r->q[(r->qhead + r->qlen++) % r->nbufs] = *j;
	pthread_cond_signal(&r->cv_job);
	pthread_mutex_unlock(&r->mu);
}

/* Next job, or 0 when every reader is done and the queue is empty. */
static int pop_job(struct run *r, struct job *j)
{
	int got = 0;

	pthread_mutex_lock(&r->mu);
	while (r->qlen == 0 && r->readers_left > 0)
		pthread_cond_wait(&r->cv_job, &r->mu);
	if (r->qlen > 0) {
		*j = r->q[r->qhead];
		r->qhead = (r->qhead + 1) % r->nbufs;
		r->qlen--;
		got = 1;
	}
	pthread_mutex_unlock(&r->mu);
	return got;
}

static int open_source(const wstore__scan_file *sf, int *out, struct stat *st0)
{
	struct stat st;
	int fd = wstore__source_open(sf->abs, &st);

	if (fd < 0)
		return fd;
	*st0 = st;
	if ((uint64_t)st.st_size != sf->size) {
		close(fd);
		return wstore__err(WSTORE_EINVAL,
				   "source file '%s' changed during import",
				   sf->abs);
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	*out = fd;
	return 0;
}

/* ---- whole files ------------------------------------------------------- */

/* Write a chunk's n bytes at off of a data file, and start their
 * writeback (as put does for a chunk file), so that the disk writes
 * overlap the rest of the import instead of all waiting for its syncfs. */
static int write_at(int fd, const char *buf, size_t n, uint64_t off,
		    const char *path)
{
	int rc = wstore__pwrite_all(fd, buf, n, off, path);

	if (rc == 0 && n >= WRITEBACK_MIN)
		sync_file_range(fd, (off64_t)off, (off64_t)n,
				SYNC_FILE_RANGE_WRITE);
	return rc;
}

/* Begin file idx's data file, the reader holding the first reference. */
static int whole_begin(struct run *r, size_t idx)
{
	wstore_backend *b = r->s->b;
	struct wfile *w = &r->wf[idx];
	int rc = b->begin_file(b, r->m->files[idx].key, r->chunk_size, &w->fd,
			       &w->h);

	if (rc < 0)
		return wstore__err(rc, "cannot store '%s': %s",
				   r->scan->files[idx].rel,
				   wstore_last_error());
	w->refs = 1;
	return 0;
}

/* Drop a reference to file idx's data file (ok 0: what it was to write
 * failed).  The last one commits it, or removes it after any failure of
 * the file or of the run. */
static void whole_release(struct run *r, size_t idx, int ok)
{
	wstore_backend *b = r->s->b;
	struct wfile *w = &r->wf[idx];
	const wstore__file_rec *rec = &r->m->files[idx];
	int last, bad, rc;

	pthread_mutex_lock(&r->mu);
	w->bad |= !ok;
	last = --w->refs == 0;
	bad = w->bad || r->err.code;
	pthread_mutex_unlock(&r->mu);
	if (!last)
		return;
	if (bad) {
		b->abort_file(b, w->h);
		w->h = NULL;
		return;
	}
	/* a file the store holds already is kept once (rec->sha256 was set
	 * by the reader before it let go of the file); --reflink never
	 * shares no block */
	if (r->p->reuse && r->p->reflink != WSTORE_REFLINK_NEVER)
		wstore__reuse_dedupe(r->p->reuse, r->s, rec, w->fd);
	/* published from here on: a failure of the run removes its keys */
	r->attempted[idx] = rec->nchunks;
	rc = b->commit_file(b, w->h, rec->size);
	w->h = NULL;
	if (rc < 0)
		fail(r,
		     wstore__err(rc, "cannot store '%s': %s",
				 r->scan->files[idx].rel, wstore_last_error()));
}

/* Why FICLONE failed with err, in a user's words. */
static const char *clone_why(int err)
{
	switch (err) {
	case EXDEV:
		return "the source and the store are on different file "
		       "systems";
	case EOPNOTSUPP:
	case ENOTTY:
	case EINVAL: return "the file system does not support reflinks";
	case ETXTBSY: return "the source is open for writing (a swap file?)";
	default: return "the file system refused the clone";
	}
}

/*
 * Clone the source file (fd, as it was when opened: *st0) into file idx's
 * data file, then read it once for the hash (through piece, PIECE bytes).
 * *cloned = 1 when the data file holds the clone; with reflink auto a
 * clone the file systems refuse is no error (*cloned 0: the caller writes
 * the bytes instead).
 *
 * The bytes hashed must be the bytes cloned.  Hashing the clone instead of
 * the source would settle it, but would read the data a second time (the
 * page cache is per file: the clone's pages are not the source's), and one
 * read is the point.  So the source must not change from its open, before
 * the clone, to the end of the hash: any write changes its mtime (and a
 * truncate its size), so both are compared.  ctime is not: cloning may
 * change the source inode's ctime itself (XFS marks it shared).
 */
static int clone_file(struct run *r, size_t idx, int fd, const struct stat *st0,
		      char *piece, wstore__sha256 *h, int *cloned)
{
	const wstore__scan_file *sf = &r->scan->files[idx];
	struct stat st;
	int rc = 0, err;

	*cloned = 0;
	if (ioctl(r->wf[idx].fd, FICLONE, fd) < 0) {
		err = errno;
		if (r->p->reflink != WSTORE_REFLINK_ALWAYS)
			return 0;
		return wstore__err(-err,
				   "cannot clone '%s' into the store "
				   "(--reflink always): %s: %s",
				   sf->abs, strerror(err), clone_why(err));
	}
	*cloned = 1;
	for (uint64_t off = 0; rc == 0 && off < sf->size;) {
		size_t k = sf->size - off < PIECE ? (size_t)(sf->size - off)
						  : PIECE;

		rc = read_full(fd, piece, k, off, sf->abs);
		if (rc == 0) {
			wstore__sha256_update(h, piece, k);
			off += k;
			rc = stopped(r);
		}
		if (rc == 0)
			rc = progress(r, k, sf->rel);
	}
	if (rc == 0 && (fstat(fd, &st) < 0 || st.st_size != st0->st_size ||
			st.st_mtim.tv_sec != st0->st_mtim.tv_sec ||
			st.st_mtim.tv_nsec != st0->st_mtim.tv_nsec))
		rc = wstore__err(WSTORE_EINVAL,
				 "source file '%s' changed while it was cloned "
				 "into the store",
				 sf->abs);
	return rc;
}

/* A chunk streamed from the source: fill_piece reads the next piece into
 * buf, hashes it and hands it to the backend's put_stream. */
struct stream {
	int fd;
	char *buf;
	uint64_t off, left;
	const char *path;
	wstore__sha256 *h;
};

static int fill_piece(void *ctx, const void **out, size_t *out_n)
{
	struct stream *st = ctx;
	size_t k = st->left < PIECE ? (size_t)st->left : PIECE;
	int rc = read_full(st->fd, st->buf, k, st->off, st->path);

	if (rc < 0)
		return rc;
	wstore__sha256_update(st->h, st->buf, k);
	st->off += k;
	st->left -= k;
	*out = st->buf;
	*out_n = k;
	return 0;
}

/* Chunk i of file idx (n bytes at off) read, hashed and stored by the
 * reader itself through buf (PIECE bytes). */
static int stream_chunk(struct run *r, size_t idx, uint64_t i, int fd,
			uint64_t off, size_t n, char *buf, wstore__sha256 *h)
{
	const wstore__scan_file *sf = &r->scan->files[idx];
	wstore_backend *b = r->s->b;
	struct stream st = { fd, buf, off, n, sf->abs, h };
	int rc = stopped(r);

	if (rc)
		return rc;
	r->attempted[idx] = i + 1;
	rc = b->put_stream(b, r->m->files[idx].chunks[i], n, fill_piece, &st);
	return rc < 0 ? rc : progress(r, n, sf->rel);
}

/* Chunk i of file idx (n bytes at off) read, hashed and written into its
 * data file by the reader itself through buf (PIECE bytes). */
static int stream_whole(struct run *r, size_t idx, uint64_t i, int fd,
			uint64_t off, size_t n, char *buf, wstore__sha256 *h)
{
	const wstore__scan_file *sf = &r->scan->files[idx];
	struct stream st = { fd, buf, off, n, sf->abs, h };
	int rc = stopped(r);

	r->attempted[idx] = i + 1;
	while (rc == 0 && st.left > 0) {
		const void *p = NULL;
		size_t k = 0;

		rc = fill_piece(&st, &p, &k);
		if (rc == 0)
			rc = write_at(r->wf[idx].fd, p, k, st.off - k, sf->rel);
	}
	if (rc == 0 && n >= WRITEBACK_MIN)
		sync_file_range(r->wf[idx].fd, (off64_t)off, (off64_t)n,
				SYNC_FILE_RANGE_WRITE);
	return rc < 0 ? rc : progress(r, n, sf->rel);
}

/* Read and hash every chunk of file idx, handing each to the putters (or
 * storing it, when streaming through piece, a PIECE-byte buffer); on a
 * whole-file store, clone the file first where the options ask for it. */
static int read_file(struct run *r, size_t idx, wstore__sha256 *h, char *piece)
{
	const wstore__scan_file *sf = &r->scan->files[idx];
	wstore__file_rec *rec = &r->m->files[idx];
	struct stat st, st0;
	int fd = -1, rc = open_source(sf, &fd, &st0), began = 0, cloned = 0;

	if (rc < 0)
		return rc;
	wstore__sha256_reset(h);
	if (r->whole && rec->nchunks > 0) {
		rc = whole_begin(r, idx);
		began = rc == 0;
		if (rc == 0 && r->p->reflink != WSTORE_REFLINK_NEVER)
			rc = clone_file(r, idx, fd, &st0, piece, h, &cloned);
	}
	for (uint64_t i = 0; i < rec->nchunks && rc == 0 && !cloned; i++) {
		uint64_t off = i * r->chunk_size;
		struct job j = { NULL,
				 (size_t)(sf->size - off < r->chunk_size
						  ? sf->size - off
						  : r->chunk_size),
				 rec->chunks[i],
				 sf->rel,
				 idx,
				 off };

		if (r->stream && r->whole) {
			rc = stream_whole(r, idx, i, fd, off, j.n, piece, h);
			continue;
		}
		if (r->stream) {
			rc = stream_chunk(r, idx, i, fd, off, j.n, piece, h);
			continue;
		}
		if (!(j.buf = take_buf(r))) {
			rc = stopped(r);
			break;
		}
		rc = read_hash(fd, j.buf, j.n, off, sf->abs, h);
		if (rc < 0) {
			give_buf(r, j.buf);
			break;
		}
		r->attempted[idx] = i + 1;
		push_job(r, &j);
	}
	if (rc == 0 && (fstat(fd, &st) < 0 || (uint64_t)st.st_size != sf->size))
		rc = wstore__err(WSTORE_EINVAL,
				 "source file '%s' changed during import",
				 sf->abs);
	close(fd);
	if (rc == 0) {
		char hex[65];

		wstore__sha256_hex(h, hex);
		rc = wstore__set_str(&rec->sha256, hex);
		r->done[idx] = 1;
	}
	if (began)
		whole_release(r, idx, rc == 0);
	return rc;
}

static void *reader(void *arg)
{
	struct run *r = arg;
	wstore__sha256 *h = wstore__sha256_new();
	int need = r->stream ||
		   (r->whole && r->p->reflink != WSTORE_REFLINK_NEVER);
	char *piece = need ? malloc(PIECE) : NULL;

	if (!h || (need && !piece)) {
		fail(r, wstore__err(-ENOMEM, "cannot allocate a hash context"));
		wstore__sha256_free(h);
		h = NULL;
	}
	while (h && !stopped(r)) {
		size_t idx;
		int rc;

		pthread_mutex_lock(&r->mu);
		idx = r->next++;
		pthread_mutex_unlock(&r->mu);
		if (idx >= r->scan->n)
			break;
		rc = read_file(r, idx, h, piece);
		if (rc < 0)
			fail(r, rc);
	}
	wstore__sha256_free(h);
	free(piece);
	pthread_mutex_lock(&r->mu);
	r->readers_left--;
	pthread_cond_broadcast(&r->cv_job);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

static void *putter(void *arg)
{
	struct run *r = arg;
	struct job j;

	while (pop_job(r, &j)) {
		int rc = stopped(r);

		/* after a failure the queue is only drained */
		if (rc == 0) {
			rc = r->whole ? write_at(r->wf[j.idx].fd, j.buf, j.n,
						 j.off, j.path)
				      : put_chunk(r, j.key, j.buf, j.n);
			if (rc == 0)
				rc = progress(r, j.n, j.path);
			if (rc < 0)
				fail(r, rc);
		}
		if (r->whole)
			whole_release(r, j.idx, rc == 0);
		give_buf(r, j.buf);
	}
	return NULL;
}

static int alloc_pool(struct run *r, unsigned readers)
{
	r->nbufs = readers + 2;
	r->free_bufs = calloc(r->nbufs, sizeof(void *));
	r->q = calloc(r->nbufs, sizeof(struct job));
	if (!r->free_bufs || !r->q)
		return -ENOMEM;
	for (size_t i = 0; i < r->nbufs; i++) {
		void *b = wstore__store_buf_alloc(r->s, r->chunk_size);

		if (!b)
			return wstore__err(
				-ENOMEM,
				"cannot allocate a %llu-byte chunk buffer",
				(unsigned long long)r->chunk_size);
		r->free_bufs[r->nfree++] = b;
	}
	return 0;
}

static void free_pool(struct run *r)
{
	for (size_t i = 0; i < r->nfree; i++)
		wstore__store_buf_free(r->s, r->free_bufs[i]);
	/* left queued only if no putter ever ran */
	for (size_t i = 0; i < r->qlen; i++)
		wstore__store_buf_free(r->s,
				       r->q[(r->qhead + i) % r->nbufs].buf);
	free(r->free_bufs);
	free(r->q);
}

/*
 * Whether readers should store chunks themselves (put_stream): each piece
 * is then read, hashed and written while it is in the CPU cache, which
 * costs about half the memory traffic of handing whole chunks to putters.
 * Only when there are at least as many large files as jobs, so that the
 * readers alone keep every core busy; with fewer, putters writing in
 * parallel with the (per-file sequential) hash are faster, unless chunks
 * are so large (STREAM_CHUNK) that their buffers cost more.
 */
static int use_stream(const struct run *r, unsigned jobs)
{
	const wstore_backend *b = r->s->b;
	uint64_t large = r->scan->total / (2 * (uint64_t)jobs);
	unsigned big = 0;

	if ((!WSTORE__HAS(b, put_stream) && !r->whole) ||
	    (b->flags & WSTORE_BACKEND_WRITE_ONCE))
		return 0;
	/* chunk buffers that large cost more to allocate (first touch of
	 * fresh memory) than the putters win (docs/performance.md) */
	if (r->chunk_size >= STREAM_CHUNK)
		return 1;
	/* large: a chunk, or a 2*jobs-th of the checkpoint if that is less */
	if (large > r->chunk_size)
		large = r->chunk_size;
	for (size_t i = 0; i < r->scan->n && big < jobs; i++)
		big += r->scan->files[i].size >= large && large > 0;
	return big >= jobs;
}

static int run_workers(struct run *r)
{
	unsigned jobs = wstore__jobs(r->p->jobs), nread = jobs, nput,
		 started = 0;
	pthread_t *t;
	int rc;

	if (nread > r->scan->n)
		nread = (unsigned)r->scan->n;
	r->whole = wstore__whole_files(r->s);
	if (r->whole &&
	    !(r->wf = calloc(r->scan->n ? r->scan->n : 1, sizeof(*r->wf))))
		return wstore__err(-ENOMEM, "cannot start the import");
	r->stream = use_stream(r, jobs);
	nput = r->stream ? 0 : jobs;
	t = calloc(nread + nput, sizeof(*t));
	rc = !t ? -ENOMEM : r->stream ? 0 : alloc_pool(r, nread);
	r->readers_left = nread;
	for (unsigned i = 0; rc == 0 && i < nread + nput; i++, started++)
		if (wstore__thread_start(&t[i], i < nread ? reader : putter,
					 r) != 0)
			break;
	if (rc == 0 && started < nread + nput) {
		/* the threads that did start still drain and exit */
		pthread_mutex_lock(&r->mu);
		r->readers_left -= (int)(started < nread ? nread - started : 0);
		pthread_mutex_unlock(&r->mu);
		fail(r, wstore__err(-EAGAIN, "cannot start import threads"));
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	free(t);
	free_pool(r);
	/* files whose queued chunks no putter took (threads that did not
	 * start): their data files go */
	for (size_t i = 0; r->wf && i < r->scan->n; i++)
		if (r->wf[i].h)
			r->s->b->abort_file(r->s->b, r->wf[i].h);
	free(r->wf);
	if (rc < 0)
		return rc;
	if (r->err.code)
		return wstore__first_err_raise(&r->err);
	return 0;
}

int wstore__pipeline_run(const wstore__pipeline *p)
{
	struct run r = { .p = p,
			 .s = p->s,
			 .scan = p->scan,
			 .m = p->m,
			 .chunk_size = p->chunk_size,
			 .attempted = p->attempted,
			 .done = p->done };
	int rc;

	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv_free, NULL);
	pthread_cond_init(&r.cv_job, NULL);
	rc = run_workers(&r);
	pthread_mutex_destroy(&r.mu);
	pthread_cond_destroy(&r.cv_free);
	pthread_cond_destroy(&r.cv_job);
	return rc;
}
