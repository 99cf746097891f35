/*
 * hubrun.c - the workers of import from a Hub: each takes the next file
 * not yet stored, GETs it (hubfetch.c) and, as the bytes arrive, copies
 * them into a chunk buffer, hashes them (SHA-256 for the manifest, and
 * the git blob SHA-1 of a file kept in git) and stores each chunk once it
 * is full.  A file whose bytes do
 * not hash to what the server lists fails the import (import.c then
 * removes its chunks and leaves the checkpoint FAILED); a file that does
 * is recorded by a mark of the intent record (intent.c), so that an
 * import killed later and run again keeps it (hub.c).
 *
 * On a store that keeps each file as one data file (begin_file: the file
 * store) the bytes go straight into the file's data file as they arrive,
 * with no chunk buffer; it is fsynced and committed (renamed into place)
 * once its hash matched, before the file is recorded, and removed on any
 * failure.  A re-run hashes a recorded file's bytes again before it keeps
 * it (hub.c).
 *
 * Memory: one buffer per worker, the chunk size or the largest file if
 * that is smaller; fewer workers when those would exceed 1 GiB together
 * (4 GiB chunks: one file at a time).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "digest.h"
#include "hub.h"
#include "hubfetch.h"
#include "intent.h"
#include "store.h"
#include "util.h"

#define DEFAULT_CONNECTIONS 4
#define PROGRESS_EVERY ((uint64_t)1 << 20)
/* the workers' chunk buffers together: fewer files at once beyond it */
#define BUFFERS_MAX ((uint64_t)1 << 30)
/* reads of a caller's copy (open_file) */
#define CALLER_BLOCK ((size_t)1 << 20)

/* One file on its way in. */
struct in {
	struct import *im;
	wstore__hub *h;
	size_t idx;
	char *buf;
	uint64_t fill, c; /* bytes in buf, of chunk c */
	wstore__sha256 *sha256;
	EVP_MD_CTX *sha1; /* NULL for an LFS file */
	void *wh;     /* the data file being written (begin_file), or NULL */
	int wfd;      /* its fd (the backend's) */
	uint64_t pos; /* bytes of the file written into it */
};

int wstore__hub_write_intent(struct import *im)
{
	wstore__hub *h = im->ctx;

	return wstore__intent_write_with(im->s, im->m, im->chunk_size, "hub",
					 h->state);
}

static void fail(wstore__hub *h, int rc)
{
	pthread_mutex_lock(&h->mu);
	wstore__first_err_keep(&h->err, rc);
	pthread_mutex_unlock(&h->mu);
}

static int stopped(void *ctx)
{
	wstore__hub *h = ctx;
	int e;

	pthread_mutex_lock(&h->mu);
	e = h->err.code;
	pthread_mutex_unlock(&h->mu);
	return e;
}

/* While a retry waits: another worker failed, or the caller cancels
 * (its progress callback, asked with no new byte). */
static int stop_waiting(void *ctx)
{
	struct import *im = ctx;
	wstore__hub *h = im->ctx;
	const wstore_import_options *o = im->o;
	int e;

	pthread_mutex_lock(&h->mu);
	e = h->err.code;
	if (!e && o->progress &&
	    o->progress(h->bytes_done, im->scan.total, "", o->progress_ctx))
		e = wstore__first_err_keep(
			&h->err,
			wstore__err(WSTORE_ECANCELED, "import interrupted"));
	pthread_mutex_unlock(&h->mu);
	return e;
}

/* Count n bytes in; tell the caller's progress callback every MiB and at
 * the end of each file (last). */
static int progress(struct in *in, uint64_t n, int last)
{
	wstore__hub *h = in->h;
	const wstore_import_options *o = in->im->o;
	int rc = 0;

	pthread_mutex_lock(&h->mu);
	h->bytes_done += n;
	if (o->progress &&
	    (last || h->bytes_done - h->last_progress >= PROGRESS_EVERY)) {
		h->last_progress = h->bytes_done;
		if (o->progress(h->bytes_done, in->im->scan.total,
				h->files[in->idx].path, o->progress_ctx))
			rc = wstore__err(WSTORE_ECANCELED,
					 "import interrupted");
	}
	pthread_mutex_unlock(&h->mu);
	return rc;
}

static int put_chunk(struct in *in)
{
	wstore__file_rec *rec = &in->im->m->files[in->idx];
	wstore_backend *b = in->im->s->b;
	int rc;

	in->im->attempted[in->idx] = in->c + 1;
	rc = b->put(b, rec->chunks[in->c], in->buf, (size_t)in->fill);
	if (rc < 0)
		return wstore__err(rc, "cannot store chunk '%s': %s",
				   rec->chunks[in->c], wstore_last_error());
	in->c++;
	in->fill = 0;
	return 0;
}

/* The bytes into the data file at their offset. */
static int write_whole(struct in *in, const char *p, size_t n)
{
	int rc = wstore__pwrite_all(in->wfd, p, n, in->pos,
				    in->h->files[in->idx].path);

	if (rc < 0)
		return rc;
	in->pos += n;
	return progress(in, n, 0);
}

/* The sink: bytes in file order, each once. */
static int receive(void *ctx, const void *data, size_t n)
{
	struct in *in = ctx;
	const wstore__file_rec *rec = &in->im->m->files[in->idx];
	const char *p = data;
	int rc = stopped(in->h);

	if (rc)
		return rc;
	wstore__sha256_update(in->sha256, p, n);
	if (in->sha1 && !EVP_DigestUpdate(in->sha1, p, n))
		return wstore__err(-ENOMEM, "SHA-1 failed");
	if (in->wh)
		return write_whole(in, p, n);
	while (n > 0) {
		uint64_t want = 0, k;

		wstore__chunk_len(&want, rec, in->c);
		k = want - in->fill < n ? want - in->fill : n;
		memcpy(in->buf + in->fill, p, (size_t)k);
		in->fill += k;
		p += k;
		n -= k;
		if (in->fill == want && (rc = put_chunk(in)) < 0)
			return rc;
		if ((rc = progress(in, k, 0)) < 0)
			return rc;
	}
	return 0;
}

static void hex(char *out, const unsigned char *d, size_t n)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * n] = '\0';
}

static int record(struct in *in, const char *got256);

/* The bytes received against the server's hash; on a match record the
 * file as stored and verified. */
static int check_and_record(struct in *in, const char *url)
{
	const wstore__hub_file *f = &in->h->files[in->idx];
	char got256[65], got1[41];
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dn = 0;

	wstore__sha256_hex(in->sha256, got256);
	if (in->sha1) {
		if (!EVP_DigestFinal_ex(in->sha1, d, &dn) || dn != 20)
			return wstore__err(-ENOMEM, "SHA-1 failed");
		hex(got1, d, 20);
		if (strcmp(got1, f->oid))
			return wstore__err(
				WSTORE_EVERIFY,
				"file '%s' from '%s': the server's git blob "
				"sha1 is %s, the bytes received hash to %s",
				f->path, url, f->oid, got1);
	} else if (strcmp(got256, f->sha256)) {
		return wstore__err(WSTORE_EVERIFY,
				   "file '%s' from '%s': the server's sha256 "
				   "is %s, the bytes received hash to %s",
				   f->path, url, f->sha256, got256);
	}
	return record(in, got256);
}

/* The file stored with SHA-256 got256: committed, recorded verified. */
static int record(struct in *in, const char *got256)
{
	const wstore__hub_file *f = &in->h->files[in->idx];
	json_t *rec;
	int rc;

	if (in->wh) {
		wstore_backend *b = in->im->s->b;

		/* its keys are there from here on: a failure removes them */
		in->im->attempted[in->idx] = in->im->m->files[in->idx].nchunks;
		/* on disk before the intent record says it was verified */
		if (fdatasync(in->wfd) < 0) {
			rc = wstore__errc(-errno, "cannot store '%s'", f->path);
			b->abort_file(b, in->wh);
			in->wh = NULL;
			return rc;
		}
		rc = b->commit_file(b, in->wh, f->size);
		in->wh = NULL;
		if (rc < 0)
			return wstore__err(rc, "cannot store '%s': %s", f->path,
					   wstore_last_error());
	}
	rec = json_pack("{s:s, s:s, s:s, s:I}", "path", f->path, "oid", f->oid,
			"sha256", got256, "size", (json_int_t)f->size);
	if (!rec)
		return -ENOMEM;
	/* one small mark per file (the same work however many came
	 * before), numbered in order under the lock so that they have no
	 * gap */
	pthread_mutex_lock(&in->h->mu);
	rc = wstore__set_str(&in->im->m->files[in->idx].sha256, got256);
	in->im->done[in->idx] = 1;
	if (rc == 0)
		rc = wstore__intent_mark(in->im->s, in->im->o->checkpoint_id,
					 in->h->marks++, rec);
	pthread_mutex_unlock(&in->h->mu);
	json_decref(rec);
	return rc;
}

/* reuse.c's progress: bytes put from a held file */
static int reused_bytes(uint64_t n, void *ctx)
{
	return progress(ctx, n, 0);
}

/* A file kept in git: its blob id is sha1("blob <size>\0" + bytes). */
static int sha1_begin(struct in *in)
{
	const wstore__hub_file *f = &in->h->files[in->idx];
	char head[64];
	int hn;

	if (f->sha256[0])
		return 0;
	hn = snprintf(head, sizeof(head), "blob %" PRIu64, f->size);
	if (!EVP_DigestInit_ex(in->sha1, EVP_sha1(), NULL) ||
	    !EVP_DigestUpdate(in->sha1, head, (size_t)hn + 1))
		return wstore__err(-ENOMEM, "SHA-1 failed");
	return 0;
}

/* The bytes of fd (the caller's copy) through the sink, size of them. */
static int read_fd(struct in *in, int fd)
{
	const wstore__hub_file *f = &in->h->files[in->idx];
	size_t cap = f->size < CALLER_BLOCK ? (size_t)f->size : CALLER_BLOCK;
	char *buf = malloc(cap ? cap : 1);
	uint64_t off = 0;
	int rc = buf ? 0 : -ENOMEM;

	while (rc == 0 && off < f->size) {
		size_t want =
			f->size - off < cap ? (size_t)(f->size - off) : cap;
		ssize_t got = pread(fd, buf, want, (off_t)off);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			rc = wstore__errc(got < 0 ? -errno : WSTORE_EVERIFY,
					  "file '%s': the caller's copy "
					  "ends at %" PRIu64 " of %" PRIu64
					  " bytes",
					  f->path, off, f->size);
		else
			rc = receive(in, buf, (size_t)got);
		off += got > 0 ? (uint64_t)got : 0;
	}
	free(buf);
	return rc;
}

/* The caller's own copy of file in->idx (wstore_hub_options.open_file):
 * 1 when it has none (fetch it), 0 once its bytes are stored, checked
 * and recorded, or an error. */
static int from_caller(struct in *in)
{
	const wstore__hub_file *f = &in->h->files[in->idx];
	wstore_hub_file pf = { f->path, f->size, f->oid, f->sha256 };
	int fd = -1, rc = in->h->o.open_file(in->h->o.ctx, &pf, &fd);

	if (rc > 0)
		return 1;
	if (rc < 0)
		return wstore__err(rc, "file '%s': the caller's copy: %s",
				   f->path, wstore_strerror(rc));
	if (fd < 0)
		return wstore__err(WSTORE_EINVAL,
				   "file '%s': the caller gave no copy",
				   f->path);
	rc = sha1_begin(in);
	if (rc == 0)
		rc = read_fd(in, fd);
	close(fd);
	if (rc == 0)
		rc = check_and_record(in, "the caller's copy");
	return rc;
}

static int fetch_one(struct in *in, wstore__http *http)
{
	const wstore__hub_file *f = &in->h->files[in->idx];
	const char *segs[] = { in->h->org, in->h->name, "resolve",
			       in->h->commit, NULL };
	char *url = NULL;
	char got256[65];
	uint64_t off = 0;
	int rc = 0;

	in->fill = in->c = in->pos = 0;
	wstore__sha256_reset(in->sha256);
	if (wstore__whole_files(in->im->s) && f->size > 0) {
		wstore_backend *b = in->im->s->b;

		rc = b->begin_file(b, in->im->m->files[in->idx].key,
				   in->im->chunk_size, &in->wfd, &in->wh);
		if (rc < 0)
			return wstore__err(rc, "cannot store '%s': %s", f->path,
					   wstore_last_error());
	}
	/* held already (an earlier revision): not fetched (hubreuse.c) */
	if (!in->wh)
		in->im->attempted[in->idx] = in->im->m->files[in->idx].nchunks;
	if (f->size > 0 &&
	    (rc = wstore__hub_reuse(in->im, in->idx, in->wh ? in->wfd : -1,
				    got256, reused_bytes, in)) != 0) {
		if (rc > 0 && (rc = record(in, got256)) == 0)
			rc = progress(in, 0, 1);
		goto out;
	}
	/* the caller's copy (a mirror's, fetched for its clients) */
	if (in->h->o.open_file && f->size > 0 && (rc = from_caller(in)) <= 0) {
		if (rc == 0)
			rc = progress(in, 0, 1);
		goto out;
	}
	rc = wstore__hub_url(&url, &in->h->ep, segs, f->path, NULL);
	if (rc == 0)
		rc = sha1_begin(in);
	if (rc == 0)
		rc = wstore__http_fetch(http, url, f->size, &off, receive, in);
	if (rc == 0)
		rc = check_and_record(in, url);
	if (rc == 0)
		rc = progress(in, 0, 1);
out:
	if (in->wh) {
		in->im->s->b->abort_file(in->im->s->b, in->wh);
		in->wh = NULL;
	}
	free(url);
	return rc;
}

/* The next file not done, or h->n. */
static size_t next_file(struct import *im, wstore__hub *h)
{
	size_t i;

	pthread_mutex_lock(&h->mu);
	while (h->next < h->n && im->done[h->next])
		h->next++;
	i = h->next < h->n ? h->next++ : h->n;
	pthread_mutex_unlock(&h->mu);
	return i;
}

static uint64_t buf_size(const struct import *im)
{
	const wstore__hub *h = im->ctx;
	uint64_t max = 1;

	/* whole files are written as they arrive, without a buffer */
	if (wstore__whole_files(im->s))
		return 1;
	for (size_t i = 0; i < h->n; i++)
		if (!im->done[i] && h->files[i].size > max)
			max = h->files[i].size;
	return max < im->chunk_size ? max : im->chunk_size;
}

static void *worker(void *arg)
{
	struct import *im = arg;
	wstore__hub *h = im->ctx;
	struct in in = { .im = im, .h = h };
	EVP_MD_CTX *sha1 = EVP_MD_CTX_new();
	wstore__http *http = NULL;
	int rc = wstore__http_new(&http, &h->o, &h->ep, stop_waiting, im);

	in.sha256 = wstore__sha256_new();
	in.buf = wstore__store_buf_alloc(im->s, (size_t)buf_size(im));
	if (rc == 0 && (!sha1 || !in.sha256 || !in.buf))
		rc = wstore__err(-ENOMEM,
				 "cannot allocate a %" PRIu64
				 "-byte chunk buffer",
				 buf_size(im));
	while (rc == 0 && !stopped(h)) {
		size_t i = next_file(im, h);

		if (i >= h->n)
			break;
		in.idx = i;
		in.sha1 = h->files[i].sha256[0] ? NULL : sha1;
		rc = fetch_one(&in, http);
	}
	if (rc < 0)
		fail(h, rc);
	wstore__http_free(http);
	if (in.buf)
		wstore__store_buf_free(im->s, in.buf);
	wstore__sha256_free(in.sha256);
	EVP_MD_CTX_free(sha1);
	return NULL;
}

int wstore__hub_workers(struct import *im)
{
	wstore__hub *h = im->ctx;
	unsigned n = h->o.connections ? h->o.connections : DEFAULT_CONNECTIONS,
		 todo = 0, started = 0;
	pthread_t *t;

	for (size_t i = 0; i < h->n; i++)
		todo += !im->done[i];
	if (n > todo)
		n = todo;
	if (n > 1 && (uint64_t)n * buf_size(im) > BUFFERS_MAX) {
		uint64_t fit = BUFFERS_MAX / buf_size(im);

		n = fit > 1 ? (unsigned)fit : 1;
	}
	if (n == 0)
		return 0;
	if (!(t = calloc(n, sizeof(*t))))
		return -ENOMEM;
	for (; started < n; started++)
		if (wstore__thread_start(&t[started], worker, im) != 0)
			break;
	if (started == 0)
		fail(h, wstore__err(-EAGAIN, "cannot start import threads"));
	for (unsigned i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	free(t);
	if (h->err.code)
		return wstore__first_err_raise(&h->err);
	return 0;
}
