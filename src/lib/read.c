/*
 * read.c - the read API's checkpoint and file handles and byte-range reads
 * mapped onto chunks.  What it knows of weight formats (safetensors
 * handles, summaries, structure checks) is weights.c, above this module.
 *
 * Chunk i of a file holds bytes [i*cs, min((i+1)*cs, size)) where cs is
 * the record's chunk_size; a single-chunk record with chunk_size 0 (legacy)
 * is mapped with cs = size, a multi-chunk one cannot be.  Every chunk read
 * is checked against the length this implies: the backend is untrusted.
 *
 * A range read is split into pieces, one per (destination, chunk); pieces
 * of one chunk are served by one backend call: a whole chunk goes straight
 * into the caller's buffer, a part of one through get_range when the
 * backend has it, otherwise the chunk is read into a scratch buffer taken
 * from a small locked pool on the checkpoint (reused, since first touch of
 * fresh memory costs more than the copy) and the pieces copied out.
 *
 * Large reads from local chunk files (a pread or a scatter read of tensors
 * of at least SPLIT_MIN bytes in all, on a store with
 * WSTORE_CAP_LOCAL_FILES) are split into parts of equal bytes (a segment
 * cut where a part ends) run at once by the caller and the checkpoint's
 * helper threads (split.c, started on the first such read): each part is
 * a copy from the page cache bound by one core's memory bandwidth, so two
 * cores copy twice as fast (docs/performance.md).  Network stores are not
 * split: their readers already overlap through the backend.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "abi.h"
#include "error.h"
#include "generation.h"
#include "manifest.h"
#include "readv.h"
#include "store.h"
#include "lease_int.h"
#include "split.h"
#include "wstore/lease.h"

#define POOL_MAX 8
#define SPLIT_MIN (4u << 20)  /* smallest read split over threads */
#define SPLIT_PART (2u << 20) /* smallest part of one */

struct scratch {
	struct scratch *next;
	size_t cap;
	char *buf;
};

struct wstore_checkpoint {
	wstore_store *s;
	wstore_manifest *m;
	wstore_lease *lease;  /* NULL with no_lease */
	wstore__guard *guard; /* confirms reads are of m's import */
	wstore__mraw raw;     /* what m was read from */
	pthread_mutex_t lock; /* guards pool, split, nosplit */
	struct scratch *pool;
	unsigned npool;
	wstore__split *split; /* helpers for large reads, once needed */
	int nosplit;	      /* the store's reads are not split */
};

#define DFD_UNTRIED (-2)

struct wstore_file {
	wstore_checkpoint *ck;
	const wstore__file_rec *rec;
	/* the file store's data file of the whole file, opened at the first
	 * read and kept (every read is then one pread, no lookup); -1 where
	 * there is none (another store, chunk files), DFD_UNTRIED before the
	 * first read.  Set under ck->lock. */
	int dfd;
};

/* One piece of a scatter read: part of one chunk into one destination. */
struct piece {
	uint64_t ci;   /* chunk index */
	uint64_t coff; /* offset inside the chunk */
	size_t len;
	char *dst;
};

/* ---- checkpoints and files ---------------------------------------------- */

int wstore_checkpoint_open(wstore_checkpoint **out, wstore_store *store,
			   const char *id)
{
	return wstore_checkpoint_open_ext(out, store, id, NULL);
}

/*
 * The lease, the manifest and the guard that vouches for it
 * (generation.c): the record noted before the manifest is read and
 * confirmed after.  A checkpoint being replaced right then is read again,
 * a few times.
 */
static int open_guarded(wstore_lease **lease, wstore_manifest **m,
			wstore__mraw *raw, wstore__guard **g,
			wstore_store *store, const char *id,
			const wstore_checkpoint_options *o)
{
	int rc;

	for (int tries = 0;; tries++) {
		rc = wstore__guard_new(g, store, id);
		/* the lease comes first: a delete that sees none has already
		 * stopped the manifest saying READY */
		if (rc == 0)
			rc = o->no_lease ? wstore__manifest_read_ready_raw(
						   m, raw, store, id)
					 : wstore__lease_read_ready(
						   lease, m, raw, store, id,
						   o->what, o->require_lease);
		if (rc == 0)
			rc = wstore__guard_bind(*g, *m);
		if (rc == 0)
			return 0;
		wstore__guard_free(*g);
		wstore_manifest_free(*m);
		wstore__mraw_free(raw);
		wstore_lease_release(*lease);
		*g = NULL;
		*m = NULL;
		*lease = NULL;
		if (rc != WSTORE_ECHANGED || tries == 4)
			return rc;
	}
}

int wstore_checkpoint_open_ext(wstore_checkpoint **out, wstore_store *store,
			       const char *id,
			       const wstore_checkpoint_options *o)
{
	wstore_checkpoint_options oc;
	wstore_lease *lease = NULL;
	wstore__mraw raw = { NULL, 0, -1 };
	wstore__guard *g = NULL;
	wstore_checkpoint *ck;
	wstore_manifest *m = NULL;
	int rc;

	*out = NULL;
	if ((rc = wstore__checkpoint_opts(&oc, o)) < 0)
		return rc;
	o = &oc;
	if ((rc = open_guarded(&lease, &m, &raw, &g, store, id, o)) < 0)
		return rc;
	if (!(ck = calloc(1, sizeof(*ck)))) {
		wstore__guard_free(g);
		wstore_manifest_free(m);
		wstore__mraw_free(&raw);
		wstore_lease_release(lease);
		return wstore__errc(-ENOMEM, "cannot open checkpoint '%s'", id);
	}
	ck->s = store;
	ck->m = m;
	ck->lease = lease;
	ck->guard = g;
	ck->raw = raw;
	ck->nosplit = !(wstore_store_caps(store) & WSTORE_CAP_LOCAL_FILES) ||
		      !store->b->get_range;
	pthread_mutex_init(&ck->lock, NULL);
	*out = ck;
	return 0;
}

int wstore__checkpoint_settle(wstore_checkpoint *ck, const wstore__file_rec *f,
			      int rc)
{
	return wstore__guard_settle(ck->guard, f, rc);
}

const char *wstore__checkpoint_generation(const wstore_checkpoint *ck)
{
	return wstore__guard_generation(ck->guard);
}

int wstore__checkpoint_by_generation(const wstore_checkpoint *ck)
{
	return wstore__guard_by_generation(ck->guard);
}

const wstore_manifest *wstore_checkpoint_manifest(const wstore_checkpoint *ck)
{
	return ck->m;
}

int wstore_checkpoint_unchanged(wstore_checkpoint *ck)
{
	int rc = wstore__manifest_same(ck->s, ck->m->checkpoint_id, &ck->raw);

	if (rc < 0)
		return wstore__err(rc,
				   "cannot read the manifest of checkpoint "
				   "'%s': %s",
				   ck->m->checkpoint_id, wstore_last_error());
	return rc;
}

void wstore_checkpoint_free(wstore_checkpoint *ck)
{
	struct scratch *sc, *next;

	if (!ck)
		return;
	for (sc = ck->pool; sc; sc = next) {
		next = sc->next;
		free(sc->buf);
		free(sc);
	}
	wstore__split_free(ck->split);
	pthread_mutex_destroy(&ck->lock);
	wstore__guard_free(ck->guard);
	wstore__mraw_free(&ck->raw);
	wstore_manifest_free(ck->m);
	wstore_lease_release(ck->lease);
	free(ck);
}

int wstore_file_open(wstore_file **out, wstore_checkpoint *ck, const char *path)
{
	int64_t i = wstore_manifest_find(ck->m, path ? path : "");
	wstore_file *f;

	*out = NULL;
	if (i < 0)
		return wstore__err(WSTORE_ENOTFOUND,
				   "no file '%s' in "
				   "checkpoint '%s'",
				   path ? path : "", ck->m->checkpoint_id);
	if (!(f = calloc(1, sizeof(*f))))
		return wstore__errc(-ENOMEM, "cannot open '%s'", path);
	f->ck = ck;
	f->rec = &ck->m->files[i];
	f->dfd = DFD_UNTRIED;
	*out = f;
	return 0;
}

uint64_t wstore_file_size(const wstore_file *f)
{
	return f->rec->size;
}

const char *wstore_file_path(const wstore_file *f)
{
	return f->rec->path;
}

void wstore_file_free(wstore_file *f)
{
	if (f && f->dfd >= 0)
		close(f->dfd);
	free(f);
}

/* ---- chunk geometry and checked chunk reads ----------------------------- */

/* The chunk size offsets map with, or an error if they cannot be mapped. */
static int chunk_geometry(const wstore__file_rec *r, uint64_t *out_cs)
{
	uint64_t want;

	if (r->size == 0) {
		*out_cs = 1;
		return 0;
	}
	if (r->chunk_size == 0) {
		if (r->nchunks == 1) {
			*out_cs = r->size;
			return 0;
		}
		return wstore__err(WSTORE_EUNSUPPORTED,
				   "file '%s' has %" PRIu64
				   " chunks but chunk_size 0 (legacy record): "
				   "cannot map offsets to chunks",
				   r->path, r->nchunks);
	}
	want = r->size / r->chunk_size + (r->size % r->chunk_size != 0);
	if (r->nchunks != want)
		return wstore__err(
			WSTORE_ECORRUPT,
			"file '%s' lists %" PRIu64 " chunks but size %" PRIu64
			" and chunk_size %" PRIu64 " imply %" PRIu64,
			r->path, r->nchunks, r->size, r->chunk_size, want);
	*out_cs = r->chunk_size;
	return 0;
}

static size_t chunk_len(const wstore__file_rec *r, uint64_t cs, uint64_t ci)
{
	uint64_t start = ci * cs;

	return (size_t)(r->size - start < cs ? r->size - start : cs);
}

/* Turn a get_range result into the contract's view of a chunk read (the
 * same messages as wstore__read_chunk). */
static int check_part(const wstore__file_rec *r, uint64_t ci, int rc,
		      uint64_t off, size_t got, size_t want)
{
	const char *key = r->chunks[ci];

	if (rc == WSTORE_ENOTFOUND || (rc == 0 && got == 0 && want > 0))
		return wstore__err(WSTORE_ECORRUPT,
				   "file '%s': chunk '%s' is "
				   "missing",
				   r->path, key);
	if (rc < 0)
		return wstore__err(rc, "file '%s': cannot read chunk '%s': %s",
				   r->path, key, wstore_last_error());
	if (got != want)
		return wstore__err(WSTORE_ECORRUPT,
				   "file '%s': chunk '%s' "
				   "ends at byte %" PRIu64
				   ", expected at least %" PRIu64,
				   r->path, key, off + got, off + want);
	return 0;
}

/* Read all of chunk ci (want bytes by the manifest) into dst. */
static int get_chunk(wstore_file *f, uint64_t ci, void *dst, size_t want)
{
	return wstore__read_chunk(f->ck->s, f->rec, ci, dst, want);
}

/*
 * The data file of f on the file store (open_range of chunk 0 gives a file
 * of f's size at offset 0: the whole file, either layout), opened once and
 * kept: -1 where there is none.  The bytes it holds are those of the
 * import there when it was opened; every read is confirmed against the
 * generation record afterwards as any other (wstore__file_readv), so a
 * file opened after a replacement never hands out the new bytes.
 */
static int data_fd(wstore_file *f)
{
	wstore_checkpoint *ck = f->ck;
	uint64_t voff = 0;
	struct stat st;
	int fd;

	pthread_mutex_lock(&ck->lock);
	fd = f->dfd;
	pthread_mutex_unlock(&ck->lock);
	if (fd != DFD_UNTRIED)
		return fd;
	fd = -1;
	if (wstore__local_files(ck->s) && f->rec->nchunks > 0 &&
	    f->rec->size > 0 &&
	    wstore__open_range(ck->s, f->rec->chunks[0], &fd, &voff) == 0 &&
	    (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || voff != 0 ||
	     (uint64_t)st.st_size != f->rec->size)) {
		close(fd);
		fd = -1;
	}
	wstore__clear_err();
	pthread_mutex_lock(&ck->lock);
	if (f->dfd == DFD_UNTRIED) {
		f->dfd = fd;
	} else {
		if (fd >= 0)
			close(fd);
		fd = f->dfd;
	}
	pthread_mutex_unlock(&ck->lock);
	return fd;
}

/* Read len bytes at off of chunk ci (cs bytes a chunk) from the data file
 * dfd, with get_part's checks. */
static int pread_part(wstore_file *f, int dfd, uint64_t cs, uint64_t ci,
		      uint64_t off, void *dst, size_t len)
{
	size_t got = 0;
	int rc = 0;

	while (got < len) {
		ssize_t r = pread(dfd, (char *)dst + got, len - got,
				  (off_t)(ci * cs + off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			rc = wstore__errc(-errno, "cannot read '%s'",
					  f->rec->path);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return check_part(f->rec, ci, rc, off, got, len);
}

/* Read len bytes at off of chunk ci with get_range. */
static int get_part(wstore_file *f, uint64_t ci, uint64_t off, void *dst,
		    size_t len)
{
	wstore_backend *b = f->ck->s->b;
	size_t got = 0;
	int rc = b->get_range(b, f->rec->chunks[ci], off, dst, len, &got);

	return check_part(f->rec, ci, rc, off, got, len);
}

static char *scratch_take(wstore_checkpoint *ck, size_t need, size_t *cap)
{
	struct scratch *sc;
	char *buf;

	pthread_mutex_lock(&ck->lock);
	sc = ck->pool;
	if (sc) {
		ck->pool = sc->next;
		ck->npool--;
	}
	pthread_mutex_unlock(&ck->lock);
	if (sc && sc->cap >= need) {
		buf = sc->buf;
		*cap = sc->cap;
		free(sc);
		return buf;
	}
	if (sc) {
		free(sc->buf);
		free(sc);
	}
	*cap = need;
	return malloc(need ? need : 1);
}

static void scratch_give(wstore_checkpoint *ck, char *buf, size_t cap)
{
	struct scratch *sc = malloc(sizeof(*sc));

	if (!sc) {
		free(buf);
		return;
	}
	sc->buf = buf;
	sc->cap = cap;
	pthread_mutex_lock(&ck->lock);
	if (ck->npool < POOL_MAX) {
		sc->next = ck->pool;
		ck->pool = sc;
		ck->npool++;
		sc = NULL;
	}
	pthread_mutex_unlock(&ck->lock);
	if (sc) {
		free(sc->buf);
		free(sc);
	}
}

/* ---- scatter reads ------------------------------------------------------- */

/* Serve the n pieces of one chunk with one backend call. */
static int read_group(wstore_file *f, uint64_t cs, struct piece *p, size_t n)
{
	wstore_backend *b = f->ck->s->b;
	size_t clen = chunk_len(f->rec, cs, p[0].ci), cap;
	uint64_t lo = p[0].coff, hi = 0;
	char *buf;
	int rc;

	int dfd = data_fd(f);

	/* the data file: each piece straight into its place */
	for (size_t i = 0; dfd >= 0 && i < n; i++)
		if ((rc = pread_part(f, dfd, cs, p[i].ci, p[i].coff, p[i].dst,
				     p[i].len)) < 0 ||
		    i == n - 1)
			return rc;
	if (n == 1 && p[0].coff == 0 && p[0].len == clen)
		return get_chunk(f, p[0].ci, p[0].dst, clen);
	if (n == 1 && b->get_range)
		return get_part(f, p[0].ci, p[0].coff, p[0].dst, p[0].len);
	for (size_t i = 0; i < n; i++) {
		lo = p[i].coff < lo ? p[i].coff : lo;
		hi = p[i].coff + p[i].len > hi ? p[i].coff + p[i].len : hi;
	}
	if (!b->get_range || hi - lo == clen)
		lo = 0, hi = clen;
	if (!(buf = scratch_take(f->ck, (size_t)(hi - lo), &cap)))
		return wstore__errc(-ENOMEM, "cannot read '%s'", f->rec->path);
	if (hi - lo == clen)
		rc = get_chunk(f, p[0].ci, buf, clen);
	else
		rc = get_part(f, p[0].ci, lo, buf, (size_t)(hi - lo));
	for (size_t i = 0; rc == 0 && i < n; i++)
		memcpy(p[i].dst, buf + (p[i].coff - lo), p[i].len);
	scratch_give(f->ck, buf, cap);
	return rc;
}

static int cmp_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	if (x->ci != y->ci)
		return x->ci < y->ci ? -1 : 1;
	if (x->coff != y->coff)
		return x->coff < y->coff ? -1 : 1;
	return 0;
}

/* Split segments into per-chunk pieces, sorted by chunk and offset. */
static int split_pieces(struct piece **out, size_t *out_n, uint64_t cs,
			const wstore__seg *segs, size_t n)
{
	struct piece *p;
	size_t np = 0, k = 0;

	for (size_t i = 0; i < n; i++)
		if (segs[i].len)
			np += (size_t)((segs[i].off + segs[i].len - 1) / cs -
				       segs[i].off / cs + 1);
	if (!(p = malloc((np ? np : 1) * sizeof(*p))))
		return wstore__errc(-ENOMEM, "cannot plan a read");
	for (size_t i = 0; i < n; i++) {
		uint64_t off = segs[i].off, end = off + segs[i].len;
		char *dst = segs[i].dst;

		while (off < end) {
			uint64_t ci = off / cs, cend = (ci + 1) * cs;
			uint64_t take = (end < cend ? end : cend) - off;

			p[k++] = (struct piece){ ci, off - ci * cs,
						 (size_t)take, dst };
			dst += take;
			off += take;
		}
	}
	qsort(p, np, sizeof(*p), cmp_piece);
	*out = p;
	*out_n = np;
	return 0;
}

/*
 * Whole chunks that go straight into their destination are fetched in
 * batches of up to BATCH with one get_many request where the backend has
 * one (Mooncake's batch_get_into); each result is judged as a get is.
 */
#define BATCH 16

struct batch {
	size_t n;
	uint64_t ci[BATCH];
	const char *keys[BATCH];
	void *bufs[BATCH];
	size_t caps[BATCH];
};

static int flush_batch(wstore_file *f, struct batch *bt)
{
	wstore_backend *b = f->ck->s->b;
	size_t lens[BATCH];
	int rcs[BATCH], rc = 0;

	if (bt->n == 1)
		rc = get_chunk(f, bt->ci[0], bt->bufs[0], bt->caps[0]);
	else if (bt->n > 1)
		rc = b->get_many(b, bt->n, bt->keys, bt->bufs, bt->caps, lens,
				 rcs);
	if (rc < 0 && bt->n > 1)
		rc = wstore__err(rc, "file '%s': cannot read chunks: %s",
				 f->rec->path, wstore_last_error());
	for (size_t i = 0; rc == 0 && bt->n > 1 && i < bt->n; i++)
		rc = wstore__check_chunk(f->ck->s, f->rec, bt->ci[i], rcs[i],
					 lens[i], bt->caps[i]);
	bt->n = 0;
	return rc;
}

/* Queue piece p if it is a whole chunk and batching is possible. */
static int batch_add(wstore_file *f, uint64_t cs, struct batch *bt,
		     const struct piece *p, int *rc)
{
	if (!f->ck->s->b->get_many || p->coff != 0 ||
	    p->len != chunk_len(f->rec, cs, p->ci))
		return 0;
	bt->ci[bt->n] = p->ci;
	bt->keys[bt->n] = f->rec->chunks[p->ci];
	bt->bufs[bt->n] = p->dst;
	bt->caps[bt->n] = p->len;
	if (++bt->n == BATCH)
		*rc = flush_batch(f, bt);
	return 1;
}

/* The checked segments, on this thread. */
static int readv_serial(wstore_file *f, wstore__seg *segs, size_t n)
{
	struct batch bt = { 0 };
	struct piece *p = NULL;
	size_t np = 0, i, j;
	uint64_t cs = 1;
	int rc;

	if ((rc = chunk_geometry(f->rec, &cs)) < 0 ||
	    (rc = split_pieces(&p, &np, cs, segs, n)) < 0)
		return rc;
	for (i = 0; rc == 0 && i < np; i = j) {
		for (j = i + 1; j < np && p[j].ci == p[i].ci; j++)
			;
		if (j - i == 1 && batch_add(f, cs, &bt, &p[i], &rc))
			continue;
		rc = read_group(f, cs, p + i, j - i);
	}
	if (rc == 0)
		rc = flush_batch(f, &bt);
	free(p);
	return rc;
}

/* The checkpoint's read helpers, started on first use; NULL when its
 * store's reads are not split or they cannot start. */
static wstore__split *split_pool(wstore_checkpoint *ck)
{
	wstore__split *sp;

	pthread_mutex_lock(&ck->lock);
	if (!ck->split && !ck->nosplit) {
		ck->split = wstore__split_new();
		if (!ck->split || wstore__split_width(ck->split) < 2)
			ck->nosplit = 1;
	}
	sp = ck->nosplit ? NULL : ck->split;
	pthread_mutex_unlock(&ck->lock);
	return sp;
}

struct split_read {
	wstore_file *f;
	wstore__seg *seg;
	size_t start[WSTORE__SPLIT_MAX + 1]; /* part i: seg[start[i]..] */
};

static int split_read_part(void *arg, size_t i)
{
	struct split_read *sr = arg;

	return readv_serial(sr->f, sr->seg + sr->start[i],
			    sr->start[i + 1] - sr->start[i]);
}

/*
 * n segments of total bytes as k parts of about total / k bytes each
 * (page-aligned; the last takes the rest), a segment cut where a part
 * ends, each part read by readv_serial on the caller or a helper.
 */
static int readv_split(wstore_file *f, wstore__split *sp, wstore__seg *segs,
		       size_t n, uint64_t total)
{
	struct split_read sr = { .f = f };
	size_t k = wstore__split_width(sp), ns = 0, part = 0;
	uint64_t target, room;
	int rc;

	if (k > total / SPLIT_PART)
		k = (size_t)(total / SPLIT_PART);
	target = (total / k) & ~(uint64_t)4095;
	if (!(sr.seg = malloc((n + k) * sizeof(*sr.seg))))
		return wstore__errc(-ENOMEM, "cannot read '%s'", f->rec->path);
	room = target;
	for (size_t i = 0; i < n; i++) {
		wstore__seg s = segs[i];

		while (s.len) {
			uint64_t take =
				part + 1 < k && s.len > room ? room : s.len;

			sr.seg[ns++] = (wstore__seg){ s.off, take, s.dst };
			s.off += take;
			s.len -= take;
			s.dst = (char *)s.dst + take;
			room -= part + 1 < k ? take : 0;
			if (part + 1 < k && room == 0) {
				sr.start[++part] = ns;
				room = target;
			}
		}
	}
	sr.start[k] = ns;
	rc = wstore__split_run(sp, split_read_part, &sr, k);
	free(sr.seg);
	return rc;
}

int wstore__file_readv(wstore_file *f, wstore__seg *segs, size_t n)
{
	wstore__split *sp;
	uint64_t total = 0;
	int rc;

	for (size_t i = 0; i < n; i++) {
		if (segs[i].off > f->rec->size ||
		    segs[i].len > f->rec->size - segs[i].off)
			return wstore__err(WSTORE_EINVAL,
					   "read of %" PRIu64
					   " bytes at %" PRIu64 " is past the "
					   "end of '%s'",
					   segs[i].len, segs[i].off,
					   f->rec->path);
		total += segs[i].len;
	}
	if (total >= SPLIT_MIN && (sp = split_pool(f->ck)))
		rc = readv_split(f, sp, segs, n, total);
	else
		rc = readv_serial(f, segs, n);
	/* before the bytes are the caller's: still the import opened? */
	return wstore__guard_settle(f->ck->guard, f->rec, rc);
}

int wstore_file_pread(wstore_file *f, void *buf, size_t len, uint64_t off,
		      size_t *out_n)
{
	uint64_t size = f->rec->size;
	wstore__seg seg;
	int rc;

	if (out_n)
		*out_n = 0;
	if (off >= size || len == 0)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	seg = (wstore__seg){ off, len, buf };
	if ((rc = wstore__file_readv(f, &seg, 1)) < 0)
		return rc;
	if (out_n)
		*out_n = len;
	return 0;
}

void *wstore_read_buf_alloc(wstore_checkpoint *ck, size_t size)
{
	return wstore__store_buf_alloc(ck->s, size ? size : 1);
}

void wstore_read_buf_free(wstore_checkpoint *ck, void *buf)
{
	wstore__store_buf_free(ck->s, buf);
}

/*
 * The chunk's value opened as a range of a local file (open_range): the
 * chunk's own file (offset 0, its size the chunk's), or the data file of
 * the whole checkpoint file (offset ci * cs, its size the file's), on the
 * file store's two layouts.  The latter hands out the rest of the whole
 * file, so that a caller streams it with one fd.
 */
int wstore_file_chunk_fd(int *out_fd, uint64_t *out_fd_off, size_t *out_len,
			 wstore_file *f, uint64_t off)
{
	const wstore__file_rec *r = f->rec;
	wstore_store *s = f->ck->s;
	wstore_backend *b = s->b;
	uint64_t cs = 1, ci, voff = 0;
	size_t clen;
	struct stat st;
	int rc, fd = -1, whole = 0;

	*out_fd = -1;
	*out_fd_off = 0;
	*out_len = 0;
	if (!wstore__local_files(s))
		return wstore__err(WSTORE_EUNSUPPORTED,
				   "the %s store cannot hand out chunk files",
				   b->name ? b->name : "");
	if (off >= r->size)
		return wstore__err(WSTORE_EINVAL,
				   "offset %" PRIu64 " is past the end of '%s'",
				   off, r->path);
	if ((rc = chunk_geometry(r, &cs)) < 0)
		return rc;
	ci = off / cs;
	clen = chunk_len(r, cs, ci);
	rc = wstore__open_range(s, r->chunks[ci], &fd, &voff);
	if (rc == 0 && fstat(fd, &st) < 0)
		rc = wstore__errc(-errno, "cannot stat chunk '%s'",
				  r->chunks[ci]);
	if (rc < 0) {
		if (fd >= 0)
			close(fd);
		rc = check_part(r, ci, rc, 0, 0, clen);
		return wstore__guard_settle(f->ck->guard, r, rc);
	}
	if (S_ISREG(st.st_mode) && voff == ci * cs &&
	    (uint64_t)st.st_size == r->size)
		whole = 1; /* the data file of the whole file */
	else if (!S_ISREG(st.st_mode) || voff != 0 ||
		 (uint64_t)st.st_size != clen)
		rc = wstore__err(WSTORE_ECORRUPT,
				 "file '%s': %s '%s' holds %llu bytes, "
				 "expected %llu",
				 r->path,
				 voff || (uint64_t)st.st_size > clen
					 ? "the data file of chunk"
					 : "chunk",
				 r->chunks[ci], (unsigned long long)st.st_size,
				 (unsigned long long)(voff ? r->size : clen));
	/* the fd holds the inode it opened: if that was still the import
	 * opened once the fd was open, its bytes are that import's (files
	 * are replaced by rename, never rewritten) */
	if ((rc = wstore__guard_settle(f->ck->guard, r, rc)) < 0) {
		close(fd);
		return rc;
	}
	*out_fd = fd;
	*out_fd_off = whole ? off : off - ci * cs;
	*out_len = whole ? (size_t)(r->size - off) : clen - (size_t)*out_fd_off;
	return 0;
}

size_t wstore__file_window(const wstore_file *f)
{
	uint64_t cs = f->rec->chunk_size ? f->rec->chunk_size : f->rec->size;

	if (f->ck->s->b->get_range || cs < (1u << 20))
		return 1u << 20;
	return cs > (256u << 20) ? (256u << 20) : (size_t)cs;
}

size_t wstore_file_read_size(const wstore_file *f)
{
	return wstore__file_window(f);
}
