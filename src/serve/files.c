/*
 * files.c - GET and HEAD of /{repo}/resolve/{rev}/{path}: the headers Hub
 * clients read (Content-Length, ETag, X-Repo-Commit, X-Linked-Etag and
 * X-Linked-Size for LFS files, Accept-Ranges), single byte ranges (206
 * with Content-Range, 416 past the end), and the body streamed from the
 * store.
 *
 * Body sources, cheapest first:
 *  - the requested bytes lie in one file of a store that hands out its
 *    files (the embedded file store): a file-descriptor response, which
 *    libmicrohttpd sends with sendfile(2), no copy in user space.  For a
 *    file the store keeps whole wstore_file_chunk_fd hands out the rest
 *    of the file from any offset, so that is every range of it, across
 *    chunk boundaries too; in chunk files, ranges within one chunk;
 *  - with --mmap, bytes that span several chunk files: each mapped
 *    read-only and the lot sent as one iovec response (sendmsg(2) copies
 *    page cache to socket once: less CPU per byte than the pread path
 *    below).  Not the default: the mapped pages count in the process's
 *    RSS while they are sent, which makes the server look large and a
 *    first pick of the OOM killer, though they are page cache (figures:
 *    docs/performance.md);
 *  - otherwise a callback response that libmicrohttpd calls for one block
 *    at a time: from chunk files with pread (one open per chunk), or
 *    through wstore_file_pread on other backends, whose block size is
 *    wstore_file_read_size() (1 MiB where the backend reads ranges); on
 *    those, a block is read once for every request that wants it at the
 *    same time (blocks.c).
 * A connection holds at most one block of anonymous memory, and a client
 * that goes away stops the reads: nothing is fetched ahead of the socket.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "http.h"

/* Block of a callback response over chunk files. */
#define FD_BLOCK (1u << 20)
/* Bound on a callback response's buffer. */
#define MHD_BLOCK_MAX (4u << 20)

struct body {
	struct wreq *r;
	struct wck *k;
	wstore_file *f;
	uint64_t start, end; /* file bytes [start, end) */
	int fd;		     /* chunk file holding [fd_lo, fd_hi) */
	uint64_t fd_lo, fd_hi, fd_base;
	int no_fd;
	uint64_t block; /* the callback's block size: single-flight blocks */
	struct wcursor *cur; /* this response's, in the blocks */
};

/* A read failed mid-body: the response is cut (its Content-Length never
 * reached, the client sees a broken transfer, not a whole file of other
 * bytes), and the checkpoint handle is not given to new requests (it was
 * deleted, or replaced by a new import of its id: WSTORE_ECHANGED). */
static void body_fail(struct body *b, const char *what)
{
	atomic_store(&b->r->failed, 1);
	wck_dead(b->r->sv->cache, b->k);
	fprintf(stderr, "wstore serve: cannot read '%s' of '%s': %s\n",
		wstore_file_path(b->f), b->r->ckpt ? b->r->ckpt : "?", what);
}

/* Make b->fd cover file byte off; 1 when it does, 0 when the backend has
 * no chunk files, -1 on error. */
static int fd_cover(struct body *b, uint64_t off)
{
	uint64_t fd_off;
	size_t len;
	int rc;

	if (b->fd >= 0 && off >= b->fd_lo && off < b->fd_hi)
		return 1;
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
	rc = wstore_file_chunk_fd(&b->fd, &fd_off, &len, b->f, off);
	if (rc == WSTORE_EUNSUPPORTED) {
		b->no_fd = 1;
		return 0;
	}
	if (rc < 0) {
		body_fail(b, wstore_last_error());
		return -1;
	}
	b->fd_lo = off;
	b->fd_hi = off + len;
	b->fd_base = fd_off;
	return 1;
}

static ssize_t body_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct body *b = cls;
	uint64_t off = b->start + pos;
	size_t want, n = 0;
	int rc;

	if (off >= b->end)
		return MHD_CONTENT_READER_END_OF_STREAM;
	want = b->end - off < max ? (size_t)(b->end - off) : max;
	if (!b->no_fd) {
		ssize_t got;

		if ((rc = fd_cover(b, off)) < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (rc == 1) {
			if (want > b->fd_hi - off)
				want = (size_t)(b->fd_hi - off);
			do
				got = pread(
					b->fd, buf, want,
					(off_t)(b->fd_base + off - b->fd_lo));
			while (got < 0 && errno == EINTR);
			if (got <= 0) {
				body_fail(b, got < 0 ? strerror(errno)
						     : "chunk file shrank");
				return MHD_CONTENT_READER_END_WITH_ERROR;
			}
			atomic_fetch_add(&b->r->bytes, (uint64_t)got);
			return got;
		}
	}
	if (b->k->blocks && b->block) {
		struct wserve_metrics *m = &b->r->sv->m;
		char err[512];
		int shared = 0;

		if (!b->cur)
			b->cur = wblocks_cursor_new(b->k->blocks,
						    wstore_file_path(b->f), off,
						    b->end);
		rc = wblocks_read(b->k->blocks, b->cur, b->f, b->block, off,
				  buf, want, &n, &shared, err, sizeof(err));
		if (rc < 0 || n == 0) {
			body_fail(b, rc < 0 ? err : "file shrank");
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		atomic_fetch_add(shared ? &m->shared_reads : &m->store_reads,
				 1);
		atomic_fetch_add(&b->r->bytes, n);
		return (ssize_t)n;
	}
	rc = wstore_file_pread(b->f, buf, want, off, &n);
	if (rc < 0 || n == 0) {
		body_fail(b, rc < 0 ? wstore_last_error() : "file shrank");
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	atomic_fetch_add(&b->r->sv->m.store_reads, 1);
	atomic_fetch_add(&b->r->bytes, n);
	return (ssize_t)n;
}

static void body_free(void *cls)
{
	struct body *b = cls;

	if (b->fd >= 0)
		close(b->fd);
	if (b->cur)
		wblocks_cursor_free(b->k->blocks, b->cur);
	wstore_file_free(b->f);
	wck_put(b->r->sv->cache, b->k);
	wreq_unref(b->r);
	free(b);
}

/* The Hub's headers of a file: ETag (oid: its git blob id, or for an LFS
 * file its SHA-256, with X-Linked-Etag and X-Linked-Size) and the rest. */
static void add_headers(struct MHD_Response *resp, const wstore_file_info *fi,
			const char *oid, const char *commit)
{
	char etag[80], sz[24];

	snprintf(etag, sizeof(etag), "\"%s\"",
		 wfile_is_lfs(fi) ? fi->sha256 : oid);
	MHD_add_response_header(resp, "ETag", etag);
	if (wfile_is_lfs(fi)) {
		snprintf(sz, sizeof(sz), "%" PRIu64, fi->size);
		MHD_add_response_header(resp, "X-Linked-Etag", etag);
		MHD_add_response_header(resp, "X-Linked-Size", sz);
	}
	MHD_add_response_header(resp, "X-Repo-Commit", commit);
	MHD_add_response_header(resp, "Accept-Ranges", "bytes");
	MHD_add_response_header(resp, "Content-Type",
				"application/octet-stream");
}

/* Chunk files mapped for an iovec response, unmapped when it is done. */
struct maps {
	size_t n;
	void **base;
	size_t *len;
};

static void maps_free(void *cls)
{
	struct maps *m = cls;

	for (size_t i = 0; i < m->n; i++)
		munmap(m->base[i], m->len[i]);
	free(m->base);
	free(m->len);
	free(m);
}

/*
 * [a, a+len) of f from its chunk files, mapped read-only: an iovec
 * response, which the library hands to sendmsg(2) as it stands, so the
 * bytes are copied once (page cache to socket) instead of twice (pread
 * into a buffer, then send).  NULL when the store has no chunk files or a
 * mapping fails (the caller falls back to a callback response).
 */
static struct MHD_Response *mapped_body(wstore_file *f, uint64_t a,
					uint64_t len)
{
	uint64_t cs = wstore_file_read_size(f), off = a, end = a + len;
	size_t cap = (size_t)(len / (cs ? cs : 1)) + 2, pg;
	struct MHD_IoVec *iov = calloc(cap, sizeof(*iov));
	struct maps *m = calloc(1, sizeof(*m));
	struct MHD_Response *resp = NULL;

	pg = (size_t)sysconf(_SC_PAGESIZE);
	if (!iov || !m || !(m->base = calloc(cap, sizeof(void *))) ||
	    !(m->len = calloc(cap, sizeof(size_t))))
		goto out;
	while (off < end) {
		uint64_t fd_off, pa;
		size_t clen, take;
		void *p;
		int fd;

		if (m->n == cap ||
		    wstore_file_chunk_fd(&fd, &fd_off, &clen, f, off) < 0)
			goto out;
		take = end - off < clen ? (size_t)(end - off) : clen;
		pa = fd_off & ~(uint64_t)(pg - 1);
		p = mmap(NULL, (size_t)(fd_off - pa) + take, PROT_READ,
			 MAP_SHARED, fd, (off_t)pa);
		close(fd);
		if (p == MAP_FAILED)
			goto out;
		madvise(p, (size_t)(fd_off - pa) + take, MADV_SEQUENTIAL);
		m->base[m->n] = p;
		m->len[m->n] = (size_t)(fd_off - pa) + take;
		iov[m->n].iov_base = (char *)p + (fd_off - pa);
		iov[m->n].iov_len = take;
		m->n++;
		off += take;
	}
	resp = MHD_create_response_from_iovec(iov, (unsigned)m->n, maps_free,
					      m);
out:
	free(iov);
	if (!resp && m) {
		if (m->base && m->len)
			maps_free(m);
		else {
			free(m->base);
			free(m->len);
			free(m);
		}
	}
	return resp;
}

/* The request keeps k (with its lease) until its response is done. */
static void hold(struct wreq *r, struct wck **kp)
{
	wck_put(r->sv->cache, r->hold);
	r->hold = *kp;
	*kp = NULL;
}

/*
 * The body of [a, a+len) of *f: an fd response when one file of the store
 * holds it all (a chunk file, or the one file of a file kept whole; not
 * for HEAD) or, with --mmap, a mapped one, either of which
 * moves *kp into the request; else a callback response, which takes *kp
 * and *fp over (setting them to NULL).  NULL with *err set when the first
 * chunk cannot be opened (no header has gone out: the caller answers an
 * error), or out of memory (*err 0).
 */
static struct MHD_Response *make_body(struct wreq *r, struct wck **kp,
				      wstore_file **fp, uint64_t a,
				      uint64_t len, int head, int *err)
{
	wstore_file *f = *fp;
	struct MHD_Response *resp;
	struct body *b;
	uint64_t fd_off;
	size_t clen, block;
	int fd = -1, rc = WSTORE_EUNSUPPORTED;

	*err = 0;
	if (!head && len)
		rc = wstore_file_chunk_fd(&fd, &fd_off, &clen, f, a);
	if (rc < 0 && rc != WSTORE_EUNSUPPORTED) {
		*err = rc;
		return NULL;
	}
	if (rc == 0 && clen >= len) {
		resp = MHD_create_response_from_fd_at_offset64(len, fd, fd_off);
		if (!resp) {
			close(fd);
			return NULL;
		}
		r->whole_len = len;
		/* the read lease lasts as long as the response: a delete
		 * waits for it */
		hold(r, kp);
		return resp;
	}
	if (rc == 0) {
		close(fd);
		if (r->sv->o->mmap && (resp = mapped_body(f, a, len))) {
			r->whole_len = len;
			/* the mappings are sent after this returns */
			hold(r, kp);
			return resp;
		}
	}
	if (!(b = calloc(1, sizeof(*b))))
		return NULL;
	*b = (struct body){ r, *kp, f, a, a + len, -1, 0, 0, 0, 0 };
	*kp = NULL;
	*fp = NULL;
	atomic_fetch_add(&r->refs, 1);
	/* the file's own block size, whatever the range, so that requests
	 * for the same bytes want the same blocks */
	b->block = wstore_file_read_size(f);
	block = wstore_file_read_size(f);
	if (block < FD_BLOCK)
		block = FD_BLOCK;
	/* the response's own buffer: a 64 MiB chunk's worth per download
	 * grew a server in front of Mooncake by that much per client, and
	 * the blocks are copied out of b->block's in pieces anyway */
	if (block > MHD_BLOCK_MAX)
		block = MHD_BLOCK_MAX;
	if (block > len && len)
		block = (size_t)len;
	resp = MHD_create_response_from_callback(len, block ? block : 1,
						 body_read, b, body_free);
	if (!resp)
		body_free(b);
	return resp;
}

/* The first chunk of the file could not be opened: the checkpoint was
 * deleted or replaced since it was resolved (or the store failed).  No
 * header has gone out: 503, and the next request resolves again. */
static enum MHD_Result first_chunk_failed(struct MHD_Connection *c,
					  struct wreq *r, struct wck *k,
					  const char *path, int rc)
{
	char msg[512];

	wck_dead(r->sv->cache, k);
	snprintf(msg, sizeof(msg), "cannot read '%s' of '%s': %s", path, k->id,
		 wstore_last_error());
	fprintf(stderr, "wstore serve: %s\n", msg);
	atomic_store(&r->failed, 1);
	return wreply_error(c, r,
			    rc == WSTORE_ECORRUPT
				    ? MHD_HTTP_INTERNAL_SERVER_ERROR
				    : MHD_HTTP_SERVICE_UNAVAILABLE,
			    NULL, msg);
}

/* /raw/ of an LFS file: its pointer, as the Hub answers (the whole of
 * it, whatever the Range). */
static enum MHD_Result raw_pointer(struct MHD_Connection *c, struct wreq *r,
				   struct wck *k, const wstore_file_info *fi)
{
	char ptr[256], oid[41], etag[48];
	size_t n = wlfs_pointer(ptr, sizeof(ptr), fi);
	struct MHD_Response *resp;
	int rc = wfile_oid(oid, k, fi);

	resp = rc < 0 ? NULL
		      : MHD_create_response_from_buffer(n, ptr,
							MHD_RESPMEM_MUST_COPY);
	if (resp) {
		snprintf(etag, sizeof(etag), "\"%s\"", oid);
		MHD_add_response_header(resp, "ETag", etag);
		MHD_add_response_header(resp, "X-Repo-Commit", k->commit);
		MHD_add_response_header(resp, "Content-Type",
					"text/plain; charset=utf-8");
		r->whole_len = n;
	}
	wck_put(r->sv->cache, k);
	return wreply(c, r, MHD_HTTP_OK, resp);
}

/* ---- a file on its way from the upstream (stream.c) ------------------- */

struct sbody {
	struct wreq *r;
	struct wfflight *ff;
	uint64_t start, end; /* file bytes [start, end) */
};

static ssize_t sbody_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sbody *b = cls;
	uint64_t off = b->start + pos;
	char err[512];
	ssize_t n;

	if (off >= b->end)
		return MHD_CONTENT_READER_END_OF_STREAM;
	n = wfflight_read(b->ff, buf, max, off, b->end, err, sizeof(err));
	if (n < 0) {
		/* cut before its Content-Length: the client sees a broken
		 * transfer, never a whole file of unverified bytes */
		atomic_store(&b->r->failed, 1);
		fprintf(stderr, "wstore serve: transfer of '%s' cut: %s\n",
			wfflight_file(b->ff)->path, err);
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	atomic_fetch_add(&b->r->bytes, (uint64_t)n);
	return n;
}

static void sbody_free(void *cls)
{
	struct sbody *b = cls;

	wfflight_put(b->ff);
	wreq_unref(b->r);
	free(b);
}

/* The Hub's headers of a file the upstream listed. */
static void stream_headers(struct MHD_Response *resp, const wstore_hub_file *f,
			   const char *commit)
{
	int lfs = f->sha256 && *f->sha256;
	char etag[80], sz[24];

	snprintf(etag, sizeof(etag), "\"%s\"", lfs ? f->sha256 : f->oid);
	MHD_add_response_header(resp, "ETag", etag);
	if (lfs) {
		snprintf(sz, sizeof(sz), "%" PRIu64, f->size);
		MHD_add_response_header(resp, "X-Linked-Etag", etag);
		MHD_add_response_header(resp, "X-Linked-Size", sz);
	}
	MHD_add_response_header(resp, "X-Repo-Commit", commit);
	MHD_add_response_header(resp, "Accept-Ranges", "bytes");
	MHD_add_response_header(resp, "Content-Type",
				"application/octet-stream");
}

/* The body of [a, a+len) of ff, once its first byte is there (a GET
 * waits at most the mirror's wait: 503 after it, 502 when the bytes
 * failed); takes ff over. */
static enum MHD_Result stream_body(struct MHD_Connection *c, struct wreq *r,
				   struct wfflight *ff, uint64_t a,
				   uint64_t len, int head,
				   struct MHD_Response **out)
{
	struct sbody *b;
	char err[512];
	size_t block = FD_BLOCK;
	int rc = head ? 0
		      : wfflight_wait(ff, a, a + len,
				      wmirror_wait_s(r->sv->mirror), err,
				      sizeof(err));

	*out = NULL;
	if (rc < 0) {
		wfflight_put(ff);
		return wreply_error(c, r,
				    rc == WSTORE_EBUSY || rc == WSTORE_ECANCELED
					    ? MHD_HTTP_SERVICE_UNAVAILABLE
					    : MHD_HTTP_BAD_GATEWAY,
				    NULL, err);
	}
	if (!(b = calloc(1, sizeof(*b)))) {
		wfflight_put(ff);
		return MHD_NO;
	}
	*b = (struct sbody){ r, ff, a, a + len };
	atomic_fetch_add(&r->refs, 1);
	if (block > len && len)
		block = (size_t)len;
	*out = MHD_create_response_from_callback(len, block ? block : 1,
						 sbody_read, b, sbody_free);
	if (!*out) {
		sbody_free(b);
		return MHD_NO;
	}
	return MHD_YES;
}

/* GET or HEAD of a file on its way from the upstream (takes ff over). */
static enum MHD_Result stream_reply(struct MHD_Connection *c, struct wreq *r,
				    struct wfflight *ff, int head)
{
	const wstore_hub_file *f = wfflight_file(ff);
	const char *range =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
	struct MHD_Response *resp = NULL;
	uint64_t size = f->size, a = 0, b = 0;
	int rg = wparse_range(range, size, &a, &b);
	enum MHD_Result ret;
	char cr[80];

	if (rg < 0) {
		resp = MHD_create_response_from_buffer(0, NULL,
						       MHD_RESPMEM_PERSISTENT);
		snprintf(cr, sizeof(cr), "bytes */%" PRIu64, size);
		if (resp) {
			stream_headers(resp, f, wfflight_commit(ff));
			MHD_add_response_header(resp, "Content-Range", cr);
		}
		wfflight_put(ff);
		return wreply(c, r, MHD_HTTP_RANGE_NOT_SATISFIABLE, resp);
	}
	if (rg == 0) {
		a = 0;
		b = size ? size - 1 : 0;
	}
	/* ff stays alive with the response: f is its */
	ret = stream_body(c, r, ff, a, size ? b - a + 1 : 0, head, &resp);
	if (!resp)
		return ret;
	stream_headers(resp, f, wfflight_commit(ff));
	if (rg > 0) {
		snprintf(cr, sizeof(cr),
			 "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, a, b, size);
		MHD_add_response_header(resp, "Content-Range", cr);
	} else if (range && size == 0) {
		MHD_add_response_header(resp, "Content-Range", "bytes */0");
	}
	if (!head)
		wmirror_streamed(r->sv->mirror);
	return wreply(c, r, rg > 0 ? MHD_HTTP_PARTIAL_CONTENT : MHD_HTTP_OK,
		      resp);
}

/* A file of a mirrored name the store cannot answer yet: streamed as it
 * comes (1: not the mirror's to stream, serve it from the store). */
static int try_stream(struct MHD_Connection *c, struct wreq *r,
		      const struct wtarget *t, int head, enum MHD_Result *ret)
{
	struct wfflight *ff = NULL;
	int rc;

	if (!wmirror_cold(r, t))
		return 1;
	wmirror_error_clear();
	rc = wmirror_stream(&ff, r->sv->mirror, t->repo, t->rev, t->path);
	r->mirror = wmirror_outcome();
	if (rc == 0)
		*ret = stream_reply(c, r, ff, head);
	else if (rc == 2)
		*ret = wreply_error(c, r, MHD_HTTP_NOT_FOUND, "EntryNotFound",
				    "no such file in the repository");
	else if (rc == WSTORE_EBUSY)
		*ret = wreply_error(c, r, MHD_HTTP_SERVICE_UNAVAILABLE, NULL,
				    wmirror_error());
	else if (rc == WSTORE_EVERIFY)
		*ret = wreply_error(c, r, MHD_HTTP_BAD_GATEWAY, NULL,
				    wmirror_error());
	else
		return 1; /* the usual path answers the rest */
	return 0;
}

/* The raw pointer of a listed LFS file; takes l over. */
static enum MHD_Result listed_pointer(struct MHD_Connection *c, struct wreq *r,
				      struct wlisting *l,
				      const struct wlisting_file *lf)
{
	wstore_file_info fi = { .path = lf->path,
				.sha256 = lf->sha256,
				.size = lf->size };
	char ptr[256], etag[48];
	size_t n = wlfs_pointer(ptr, sizeof(ptr), &fi);
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(n, ptr, MHD_RESPMEM_MUST_COPY);

	if (resp) {
		snprintf(etag, sizeof(etag), "\"%s\"", lf->oid);
		MHD_add_response_header(resp, "ETag", etag);
		MHD_add_response_header(resp, "X-Repo-Commit", l->commit);
		MHD_add_response_header(resp, "Content-Type",
					"text/plain; charset=utf-8");
		r->whole_len = n;
	}
	wlisting_free(l);
	return wreply(c, r, MHD_HTTP_OK, resp);
}

/* raw of a mirrored name the store cannot answer yet, from the
 * upstream's listing: an LFS file's pointer, another file's bytes
 * streamed (1: not the mirror's, serve it from the store). */
static int try_raw(struct MHD_Connection *c, struct wreq *r,
		   const struct wtarget *t, int head, enum MHD_Result *ret)
{
	struct wlisting *l = NULL;
	const struct wlisting_file *lf = NULL;
	int rc;

	if (!wmirror_cold(r, t))
		return 1;
	wmirror_error_clear();
	rc = wmirror_listing(&l, r->sv->mirror, t->repo, t->rev);
	r->mirror = wmirror_outcome();
	if (rc == WSTORE_EBUSY) {
		*ret = wreply_error(c, r, MHD_HTTP_SERVICE_UNAVAILABLE, NULL,
				    wmirror_error());
		return 0;
	}
	if (rc != 0)
		return 1; /* the usual path answers the rest */
	for (size_t i = 0; i < l->n && !lf; i++)
		if (!strcmp(l->files[i].path, t->path))
			lf = &l->files[i];
	if (lf && lf->sha256[0]) {
		*ret = listed_pointer(c, r, l, lf);
		return 0;
	}
	wlisting_free(l);
	if (lf)
		return try_stream(c, r, t, head, ret);
	*ret = wreply_error(c, r, MHD_HTTP_NOT_FOUND, "EntryNotFound",
			    "no such file in the repository");
	return 0;
}

enum MHD_Result wfiles_resolve(struct MHD_Connection *c, struct wreq *r,
			       const struct wtarget *t, int raw)
{
	enum MHD_Result ret = MHD_NO;
	int head = !strcmp(r->method, "HEAD"), rg, err;
	const char *range;
	const wstore_manifest *m;
	struct MHD_Response *resp;
	struct wck *k;
	wstore_file *f = NULL;
	wstore_file_info fi;
	uint64_t size, a = 0, b = 0;
	int64_t i;
	char cr[80], oid[41] = "";

	if (wstore_validate_path(t->path) < 0)
		return wreply_error(c, r, MHD_HTTP_NOT_FOUND, "EntryNotFound",
				    wstore_last_error());
	if ((raw ? try_raw(c, r, t, head, &ret)
		 : try_stream(c, r, t, head, &ret)) == 0)
		return ret;
	if (!(k = wopen_target(c, r, t, &ret)))
		return ret;
	m = wstore_checkpoint_manifest(k->ck);
	i = wstore_manifest_find(m, t->path);
	if (i < 0 || wstore_manifest_file(&fi, m, (size_t)i) < 0 ||
	    wstore_file_open(&f, k->ck, t->path) < 0) {
		wck_put(r->sv->cache, k);
		return wreply_error(c, r, MHD_HTTP_NOT_FOUND, "EntryNotFound",
				    "no such file in the repository");
	}
	if (raw && wfile_is_lfs(&fi)) {
		wstore_file_free(f);
		return raw_pointer(c, r, k, &fi);
	}
	/* a file kept in git: its ETag is its blob id, from its bytes */
	if (!wfile_is_lfs(&fi) && (err = wfile_oid(oid, k, &fi)) < 0) {
		wstore_file_free(f);
		ret = first_chunk_failed(c, r, k, fi.path, err);
		wck_put(r->sv->cache, k);
		return ret;
	}
	size = wstore_file_size(f);
	range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
	rg = wparse_range(range, size, &a, &b);
	if (rg < 0) {
		resp = MHD_create_response_from_buffer(0, NULL,
						       MHD_RESPMEM_PERSISTENT);
		snprintf(cr, sizeof(cr), "bytes */%" PRIu64, size);
		if (resp) {
			add_headers(resp, &fi, oid, k->commit);
			MHD_add_response_header(resp, "Content-Range", cr);
		}
		wstore_file_free(f);
		wck_put(r->sv->cache, k);
		return wreply(c, r, MHD_HTTP_RANGE_NOT_SATISFIABLE, resp);
	}
	if (rg == 0) {
		a = 0;
		b = size ? size - 1 : 0;
	}
	/* fi's strings and the commit live in k, which the response keeps
	 * (make_body moves it there) */
	{
		struct wck *keep = k;

		resp = make_body(r, &k, &f, a, size ? b - a + 1 : 0, head,
				 &err);
		if (resp)
			add_headers(resp, &fi, oid, keep->commit);
		else if (err)
			ret = first_chunk_failed(c, r, keep, fi.path, err);
	}
	wstore_file_free(f);
	wck_put(r->sv->cache, k);
	if (!resp)
		return err ? ret : MHD_NO;
	if (rg > 0) {
		snprintf(cr, sizeof(cr),
			 "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, a, b, size);
		MHD_add_response_header(resp, "Content-Range", cr);
	} else if (range && size == 0) {
		/* a client that asks bytes=0-0 to learn the size (the JS
		 * client) reads it from Content-Range, even for no bytes */
		MHD_add_response_header(resp, "Content-Range", "bytes */0");
	}
	return wreply(c, r, rg > 0 ? MHD_HTTP_PARTIAL_CONTENT : MHD_HTTP_OK,
		      resp);
}
