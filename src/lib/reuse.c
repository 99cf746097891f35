/*
 * reuse.c - files the store already holds, by SHA-256 (reuse.h says what
 * for and the contract of each call).
 *
 * The table is built from the READY manifests of the global index, once
 * per import, and sorted by (SHA-256, size); the manifests stay in memory
 * as long as the table, whose entries point into them.  Several held
 * files may have the same hash (a file in several checkpoints): each is
 * tried in turn until one can be used.
 *
 * Nothing held is trusted: a put from a held file hashes every byte it
 * took and counts only if the hash is the one the importer expects, and
 * a dedupe leaves the comparison to the kernel (FIDEDUPERANGE shares
 * blocks only where the bytes are equal).  A held data file of the file
 * store is never rewritten in place (import and migrate publish a new one
 * by rename), so an open descriptor of it keeps reading the bytes it had
 * when opened, even when its checkpoint is deleted meanwhile.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/fiemap.h>
#include <linux/fs.h>

#include "digest.h"
#include "error.h"
#include "reuse.h"
#include "store.h"
#include "util.h"

/* Bytes hashed at a time when reading a held data file back. */
#define PIECE ((size_t)1 << 20)
/* Most bytes one copy_file_range or FIDEDUPERANGE call is asked for, so
 * that a cancel is seen between calls. */
#define STEP ((uint64_t)1 << 30)

struct entry {
	const char *sha256;
	uint64_t size;
	const wstore__file_rec *f;
};

struct wstore__reuse {
	wstore_manifest **ms;
	size_t nms;
	struct entry *e;
	size_t n;
};

static int entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = strcmp(x->sha256, y->sha256);

	if (c)
		return c;
	return x->size < y->size ? -1 : x->size > y->size;
}

/* Add m's files with a hash and at least one byte (m is taken). */
static int add_manifest(wstore__reuse *r, wstore_manifest *m)
{
	wstore_manifest **ms = realloc(r->ms, (r->nms + 1) * sizeof(*ms));
	struct entry *e;

	if (!ms) {
		wstore_manifest_free(m);
		return -ENOMEM;
	}
	r->ms = ms;
	r->ms[r->nms++] = m;
	e = realloc(r->e, (r->n + m->nfiles + 1) * sizeof(*e));
	if (!e)
		return -ENOMEM;
	r->e = e;
	for (size_t i = 0; i < m->nfiles; i++) {
		const wstore__file_rec *f = &m->files[i];

		if (f->size == 0 || !f->sha256 || strlen(f->sha256) != 64 ||
		    f->nchunks == 0)
			continue;
		r->e[r->n++] = (struct entry){ f->sha256, f->size, f };
	}
	return 0;
}

int wstore__reuse_new(wstore__reuse **out, wstore_store *s, const char *skip_id)
{
	wstore__reuse *r = calloc(1, sizeof(*r));
	char **ids = NULL;
	size_t n = 0;
	int rc = 0;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	if (wstore_list(&ids, &n, s) < 0)
		n = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		wstore_manifest *m = NULL;

		if (skip_id && strcmp(ids[i], skip_id) == 0)
			continue;
		if (wstore__manifest_read_ready(&m, s, ids[i]) < 0)
			continue;
		rc = add_manifest(r, m);
	}
	wstore_strings_free(ids);
	wstore__clear_err();
	if (rc < 0 || r->n == 0) {
		wstore__reuse_free(r);
		return rc;
	}
	qsort(r->e, r->n, sizeof(*r->e), entry_cmp);
	*out = r;
	return 0;
}

void wstore__reuse_free(wstore__reuse *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nms; i++)
		wstore_manifest_free(r->ms[i]);
	free(r->ms);
	free(r->e);
	free(r);
}

/* Index of the first entry with this hash and size, or r->n. */
static size_t find_first(const wstore__reuse *r, const char *sha256,
			 uint64_t size)
{
	struct entry key = { sha256, size, NULL };
	size_t lo = 0, hi = r ? r->n : 0;

	if (!r || !sha256 || strlen(sha256) != 64)
		return hi;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (entry_cmp(&r->e[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->n && entry_cmp(&r->e[lo], &key) == 0 ? lo : r->n;
}

int wstore__reuse_has(const wstore__reuse *r, const char *sha256, uint64_t size)
{
	return r && find_first(r, sha256, size) < r->n;
}

/* ---- the held file as one local file ----------------------------------- */

/* The held file f as one whole local file (the file store's data file):
 * its fd, or -1 when it is not kept so (a store of chunks, the old
 * layout of one file per chunk) or cannot be opened. */
static int open_whole(wstore_store *s, const wstore__file_rec *f)
{
	uint64_t off = 0;
	struct stat st;
	int fd = -1;

	if (!wstore__local_files(s) || f->nchunks == 0 ||
	    wstore__open_range(s, f->chunks[0], &fd, &off) < 0)
		return -1;
	if (off != 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != f->size) {
		close(fd);
		return -1;
	}
	return fd;
}

/* SHA-256 of the size bytes of fd into hex, telling progress as it goes:
 * 0, -1 on a read error or a short file, or WSTORE_ECANCELED. */
static int hash_fd(int fd, uint64_t size, char hex[65],
		   int (*progress)(uint64_t n, void *ctx), void *ctx)
{
	wstore__sha256 *h = wstore__sha256_new();
	char *buf = malloc(PIECE);
	uint64_t off = 0;
	int rc = h && buf ? 0 : -ENOMEM;

	while (rc == 0 && off < size) {
		size_t k = size - off < PIECE ? (size_t)(size - off) : PIECE;
		ssize_t got = pread(fd, buf, k, (off_t)off);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			rc = -1;
			break;
		}
		wstore__sha256_update(h, buf, (size_t)got);
		off += (uint64_t)got;
		if (progress && progress((uint64_t)got, ctx))
			rc = wstore__err(WSTORE_ECANCELED,
					 "import interrupted");
	}
	if (rc == 0)
		wstore__sha256_hex(h, hex);
	wstore__sha256_free(h);
	free(buf);
	return rc;
}

/* Clone (else copy) all of src into the empty fd: 1 done, 0 not here. */
static int clone_or_copy(int src, int fd, uint64_t size)
{
	loff_t in = 0, out = 0;

	if (ioctl(fd, FICLONE, src) == 0)
		return 1;
	while ((uint64_t)in < size) {
		uint64_t left = size - (uint64_t)in;
		ssize_t n =
			copy_file_range(src, &in, fd, &out,
					left > STEP ? STEP : (size_t)left, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
	}
	return 1;
}

/* dst's data file fd from the held data file of f: 1, 0 or < 0 (as
 * wstore__reuse_put), or 2 when f is not kept whole (try its chunks). */
static int put_whole(wstore_store *s, const wstore__file_rec *f,
		     const wstore__file_rec *dst, int fd,
		     int (*progress)(uint64_t n, void *ctx), void *ctx)
{
	int src = open_whole(s, f), rc;
	char hex[65];

	if (src < 0)
		return 2;
	rc = clone_or_copy(src, fd, f->size);
	/* the held file's inode is never rewritten in place: the bytes
	 * hashed are the bytes cloned or copied */
	if (rc == 1)
		rc = hash_fd(src, f->size, hex, progress, ctx);
	close(src);
	if (rc == WSTORE_ECANCELED || rc == -ENOMEM)
		return rc;
	if (rc == 0 && strcmp(hex, dst->sha256) == 0)
		return 1;
	if (ftruncate(fd, 0) < 0)
		return wstore__errc(-errno,
				    "cannot truncate the data file "
				    "of '%s'",
				    dst->path);
	return 0;
}

/* ---- the held file's chunks -------------------------------------------- */

/* A copy of a held file's chunks into dst's (chunk keys, or data file). */
struct chunk_copy {
	wstore_store *s;
	const wstore__file_rec *dst;
	int fd;	      /* dst's data file, or -1: put chunk keys */
	char *dbuf;   /* one chunk of dst, filling (fd < 0) */
	size_t dlen;  /* bytes in dbuf */
	uint64_t off; /* bytes of the file taken so far */
	uint64_t put; /* chunk keys of dst put so far */
	wstore__sha256 *h;
};

/* Take n bytes of the file (the next ones), hashed, into dst. */
static int take(struct chunk_copy *c, const char *p, size_t n)
{
	wstore__sha256_update(c->h, p, n);
	if (c->fd >= 0) {
		int rc = wstore__pwrite_all(c->fd, p, n, c->off, c->dst->path);

		c->off += n;
		return rc;
	}
	while (n > 0) {
		uint64_t cs =
			c->dst->chunk_size ? c->dst->chunk_size : c->dst->size;
		size_t k = cs - c->dlen < n ? (size_t)(cs - c->dlen) : n;
		int rc;

		memcpy(c->dbuf + c->dlen, p, k);
		c->dlen += k;
		c->off += k;
		p += k;
		n -= k;
		if (c->dlen < cs && c->off < c->dst->size)
			continue;
		if (c->put >= c->dst->nchunks)
			return -1;
		rc = c->s->b->put(c->s->b, c->dst->chunks[c->put], c->dbuf,
				  c->dlen);
		c->put++;
		c->dlen = 0;
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Every chunk of the held f through take: 0, -1 (not usable), or a
 * cancel / -ENOMEM. */
static int copy_chunks(struct chunk_copy *c, const wstore__file_rec *f,
		       int (*progress)(uint64_t n, void *ctx), void *ctx)
{
	uint64_t max = 0, len = 0;
	char *sbuf;
	int rc = 0;

	for (uint64_t i = 0; i < f->nchunks; i++)
		if (wstore__chunk_len(&len, f, i) < 0)
			return -1;
		else if (len > max)
			max = len;
	if (max > SIZE_MAX || !(sbuf = wstore__store_buf_alloc(c->s, max)))
		return -ENOMEM;
	for (uint64_t i = 0; rc == 0 && i < f->nchunks; i++) {
		wstore__chunk_len(&len, f, i);
		if (wstore__read_chunk(c->s, f, i, sbuf, (size_t)max) < 0 ||
		    take(c, sbuf, (size_t)len) < 0)
			rc = -1;
		else if (progress && progress(len, ctx))
			rc = wstore__err(WSTORE_ECANCELED,
					 "import interrupted");
	}
	wstore__store_buf_free(c->s, sbuf);
	return rc;
}

/* dst from the chunks of the held f: 1, 0 or < 0 as wstore__reuse_put. */
static int put_chunks(wstore_store *s, const wstore__file_rec *f,
		      const wstore__file_rec *dst, int fd,
		      int (*progress)(uint64_t n, void *ctx), void *ctx)
{
	uint64_t cs = dst->chunk_size ? dst->chunk_size : dst->size;
	struct chunk_copy c = { s, dst, fd, NULL, 0, 0, 0, NULL };
	char hex[65] = "";
	int rc = 0;

	if (fd < 0 && (cs > SIZE_MAX ||
		       !(c.dbuf = wstore__store_buf_alloc(s, (size_t)cs))))
		return -ENOMEM;
	if (!(c.h = wstore__sha256_new()))
		rc = -ENOMEM;
	if (rc == 0)
		rc = copy_chunks(&c, f, progress, ctx);
	if (rc == 0 &&
	    (c.off != dst->size || (fd < 0 && c.put != dst->nchunks)))
		rc = -1;
	if (rc == 0)
		wstore__sha256_hex(c.h, hex);
	wstore__sha256_free(c.h);
	if (c.dbuf)
		wstore__store_buf_free(s, c.dbuf);
	if (rc == 0 && strcmp(hex, dst->sha256) == 0)
		return 1;
	if (rc == WSTORE_ECANCELED || rc == -ENOMEM)
		return rc;
	/* nothing of dst may stay: the importer then writes it afresh (on a
	 * write-once store a key left would keep these bytes) */
	for (uint64_t i = 0; i < c.put; i++)
		wstore__remove(s, dst->chunks[i]);
	if (fd >= 0 && ftruncate(fd, 0) < 0)
		return wstore__errc(-errno,
				    "cannot truncate the data file "
				    "of '%s'",
				    dst->path);
	return 0;
}

int wstore__reuse_put(const wstore__reuse *r, wstore_store *s,
		      const wstore__file_rec *dst, int fd,
		      int (*progress)(uint64_t n, void *ctx), void *ctx)
{
	size_t i = find_first(r, dst->sha256, dst->size);
	int rc = 0;

	for (; r && i < r->n && rc == 0; i++) {
		const wstore__file_rec *f = r->e[i].f;

		if (strcmp(r->e[i].sha256, dst->sha256) != 0 ||
		    r->e[i].size != dst->size)
			break;
		rc = fd >= 0 ? put_whole(s, f, dst, fd, progress, ctx) : 2;
		if (rc == 2)
			rc = put_chunks(s, f, dst, fd, progress, ctx);
	}
	if (rc == 0)
		wstore__clear_err();
	return rc;
}

/* ---- sharing blocks after the fact ------------------------------------- */

/* Share [0, size) of fd with the same range of src: bytes shared. */
static uint64_t dedupe_range(int src, int fd, uint64_t size)
{
	/* the request and its one destination, laid out as the kernel reads
	 * them (a struct ending in a flexible array, then its element) */
	uint64_t buf[(sizeof(struct file_dedupe_range) +
		      sizeof(struct file_dedupe_range_info)) /
			     sizeof(uint64_t) +
		     1];
	struct file_dedupe_range *a = (struct file_dedupe_range *)buf;
	uint64_t off = 0;

	while (off < size) {
		memset(buf, 0, sizeof(buf));
		a->src_offset = off;
		a->src_length = size - off > STEP ? STEP : size - off;
		a->dest_count = 1;
		a->info[0].dest_fd = fd;
		a->info[0].dest_offset = off;
		if (ioctl(src, FIDEDUPERANGE, a) < 0 ||
		    a->info[0].status != FILE_DEDUPE_RANGE_SAME ||
		    a->info[0].bytes_deduped == 0)
			break;
		off += a->info[0].bytes_deduped;
	}
	return off;
}

uint64_t wstore__reuse_dedupe(const wstore__reuse *r, wstore_store *s,
			      const wstore__file_rec *rec, int fd)
{
	size_t i = find_first(r, rec->sha256, rec->size);
	uint64_t shared = 0;

	for (; r && i < r->n && shared == 0; i++) {
		int src;

		if (strcmp(r->e[i].sha256, rec->sha256) != 0 ||
		    r->e[i].size != rec->size)
			break;
		if ((src = open_whole(s, r->e[i].f)) < 0)
			continue;
		shared = dedupe_range(src, fd, rec->size);
		close(src);
	}
	wstore__clear_err();
	return shared;
}

/* ---- what is shared ------------------------------------------------------ */

/* Extents of the store's data files whose blocks are shared. */
struct extents {
	struct ext {
		uint64_t phys, len;
	} * v;
	size_t n, cap;
	uint64_t logical; /* their bytes, counted once per file */
};

static int ext_add(struct extents *x, uint64_t phys, uint64_t len)
{
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 256;
		struct ext *v = realloc(x->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		x->v = v;
		x->cap = cap;
	}
	x->v[x->n++] = (struct ext){ phys, len };
	x->logical += len;
	return 0;
}

/* The shared extents of fd (size bytes) into x. */
static int fiemap_shared(int fd, uint64_t size, struct extents *x)
{
	enum { N = 128 };
	/* the header and N extents after it, as the kernel fills them */
	uint64_t
		buf[(sizeof(struct fiemap) + N * sizeof(struct fiemap_extent)) /
			    sizeof(uint64_t) +
		    1];
	struct fiemap *m = (struct fiemap *)buf;
	uint64_t start = 0;

	for (int last = 0; !last && start < size;) {
		memset(buf, 0, sizeof(buf));
		m->fm_start = start;
		m->fm_length = size - start;
		m->fm_flags = FIEMAP_FLAG_SYNC;
		m->fm_extent_count = N;
		if (ioctl(fd, FS_IOC_FIEMAP, m) < 0)
			return -errno;
		if (m->fm_mapped_extents == 0)
			break;
		for (unsigned i = 0; i < m->fm_mapped_extents; i++) {
			const struct fiemap_extent *e = &m->fm_extents[i];
			int rc = 0;

			if (e->fe_flags & FIEMAP_EXTENT_SHARED)
				rc = ext_add(x, e->fe_physical, e->fe_length);
			if (rc < 0)
				return rc;
			last |= (e->fe_flags & FIEMAP_EXTENT_LAST) != 0;
			start = e->fe_logical + e->fe_length;
		}
	}
	return 0;
}

static int ext_cmp(const void *a, const void *b)
{
	const struct ext *x = a, *y = b;

	return x->phys < y->phys ? -1 : x->phys > y->phys;
}

/* Bytes of the union of x's physical ranges. */
static uint64_t ext_distinct(struct extents *x)
{
	uint64_t total = 0, end = 0;

	if (!x->n)
		return 0; /* x->v may be NULL: qsort's first argument may not */
	qsort(x->v, x->n, sizeof(*x->v), ext_cmp);
	for (size_t i = 0; i < x->n; i++) {
		uint64_t s = x->v[i].phys, e = s + x->v[i].len;

		if (s < end)
			s = end;
		if (e > s)
			total += e - s;
		if (e > end)
			end = e;
	}
	return total;
}

int wstore__reuse_shared(uint64_t *out_shared, uint64_t *out_saved,
			 wstore_store *s)
{
	struct extents x = { 0 };
	wstore__reuse *r = NULL;
	int rc = 0;

	*out_shared = *out_saved = 0;
	if (!wstore__local_files(s))
		return WSTORE_EUNSUPPORTED;
	if ((rc = wstore__reuse_new(&r, s, NULL)) < 0)
		return rc;
	for (size_t i = 0; r && i < r->n && rc != -ENOMEM; i++) {
		int fd = open_whole(s, r->e[i].f);

		if (fd < 0)
			continue;
		rc = fiemap_shared(fd, r->e[i].size, &x);
		close(fd);
	}
	wstore__reuse_free(r);
	wstore__clear_err();
	if (rc == -ENOMEM) {
		free(x.v);
		return rc;
	}
	*out_shared = x.logical;
	*out_saved = x.logical - ext_distinct(&x);
	free(x.v);
	return 0;
}
