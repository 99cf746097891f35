/*
 * import.c - import a checkpoint directory into a store (the contract's
 * lifecycle, docs/format.md, "Import"):
 *
 *   scan the source and check it (index.json weight_map, safetensors
 *   headers) -> take the checkpoint's lock -> refuse a READY id, reclaim a
 *   FAILED one (or what a killed import's intent record lists) -> record
 *   this import's intent (every chunk key) -> on write-once stores remove
 *   every chunk key first (it may hold an old value) -> workers stream
 *   files chunk by chunk: read, hash, put -> publish the READY manifest
 *   once -> drop the intent record -> add the id to both indexes.
 *
 * On any failure or cancellation the chunks written are removed and a
 * FAILED manifest lists those that could not be.  Chunk buffers come from
 * a pool allocated once per import (fresh memory is slow to touch); see
 * "the pipeline" below.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "delete.h"
#include "digest.h"
#include "error.h"
#include "index.h"
#include "intent.h"
#include "lock.h"
#include "manifest.h"
#include "names.h"
#include "util.h"
#include "store.h"
#include "safetensors.h"
#include "scan.h"
#include "usage.h"

/* Bytes read and hashed at a time: fits in a core's L2 cache. */
#define PIECE ((size_t)512 << 10)
#define STREAM_CHUNK ((uint64_t)256 << 20) /* stream chunks this large */

struct job;

struct import {
	wstore_store *s;
	const wstore_import_options *o;
	wstore__scan scan;
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
	int stream;  /* readers put each chunk themselves, with put_stream */
	size_t next; /* next file index to hand out */
	uint64_t bytes_done;
	wstore__first_err err; /* stops every worker */
};

static void fail(struct import *im, int rc)
{
	pthread_mutex_lock(&im->mu);
	wstore__first_err_keep(&im->err, rc);
	/* wake readers waiting for a buffer: they stop now */
	pthread_cond_broadcast(&im->cv_free);
	pthread_mutex_unlock(&im->mu);
}

static int stopped(struct import *im)
{
	int e;

	pthread_mutex_lock(&im->mu);
	e = im->err.code;
	pthread_mutex_unlock(&im->mu);
	return e;
}

static int progress(struct import *im, uint64_t n, const char *path)
{
	int rc = 0;

	pthread_mutex_lock(&im->mu);
	im->bytes_done += n;
	if (im->o->progress && im->o->progress(im->bytes_done, im->scan.total,
					       path, im->o->progress_ctx))
		rc = wstore__err(WSTORE_ECANCELED, "import interrupted");
	pthread_mutex_unlock(&im->mu);
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
 * before the first put (clear_keys); with the checkpoint's lock held nobody
 * else writes them, so each put writes fresh bytes and needs no read back.
 */
static int put_chunk(struct import *im, const char *key, const void *data,
		     size_t n)
{
	wstore_backend *b = im->s->b;

	return b->put(b, key, data, n);
}

/* ---- the pipeline -------------------------------------------------------
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
 * write) and measured 3.3-5.5 s of system time down to 0.9-1.0 s for
 * 2 GiB, near cp's 0.7.
 */

struct job {
	void *buf;
	size_t n;
	const char *key;
	const char *path;
};

static void *take_buf(struct import *im)
{
	void *b = NULL;

	pthread_mutex_lock(&im->mu);
	while (im->nfree == 0 && !im->err.code)
		pthread_cond_wait(&im->cv_free, &im->mu);
	if (!im->err.code)
		b = im->free_bufs[--im->nfree];
	pthread_mutex_unlock(&im->mu);
	return b;
}

static void give_buf(struct import *im, void *b)
{
	pthread_mutex_lock(&im->mu);
	im->free_bufs[im->nfree++] = b;
	pthread_cond_signal(&im->cv_free);
	pthread_mutex_unlock(&im->mu);
}

static void push_job(struct import *im, const struct job *j)
{
	pthread_mutex_lock(&im->mu);
	im->q[(im->qhead + im->qlen++) % im->nbufs] = *j;
	pthread_cond_signal(&im->cv_job);
	pthread_mutex_unlock(&im->mu);
}

/* Next job, or 0 when every reader is done and the queue is empty. */
static int pop_job(struct import *im, struct job *j)
{
	int got = 0;

	pthread_mutex_lock(&im->mu);
	while (im->qlen == 0 && im->readers_left > 0)
		pthread_cond_wait(&im->cv_job, &im->mu);
	if (im->qlen > 0) {
		*j = im->q[im->qhead];
		im->qhead = (im->qhead + 1) % im->nbufs;
		im->qlen--;
		got = 1;
	}
	pthread_mutex_unlock(&im->mu);
	return got;
}

static int open_source(const wstore__scan_file *sf, int *out)
{
	struct stat st;
	int fd = open(sf->abs, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return wstore__errc(-errno, "cannot open '%s'", sf->abs);
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != sf->size) {
		close(fd);
		return wstore__err(WSTORE_EINVAL,
				   "source file '%s' changed during import",
				   sf->abs);
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	*out = fd;
	return 0;
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
static int stream_chunk(struct import *im, size_t idx, uint64_t i, int fd,
			uint64_t off, size_t n, char *buf, wstore__sha256 *h)
{
	const wstore__scan_file *sf = &im->scan.files[idx];
	wstore_backend *b = im->s->b;
	struct stream st = { fd, buf, off, n, sf->abs, h };
	int rc = stopped(im);

	if (rc)
		return rc;
	im->attempted[idx] = i + 1;
	rc = b->put_stream(b, im->m->files[idx].chunks[i], n, fill_piece, &st);
	return rc < 0 ? rc : progress(im, n, sf->rel);
}

/* Read and hash every chunk of file idx, handing each to the putters (or
 * storing it, when streaming through piece, a PIECE-byte buffer). */
static int read_file(struct import *im, size_t idx, wstore__sha256 *h,
		     char *piece)
{
	const wstore__scan_file *sf = &im->scan.files[idx];
	wstore__file *rec = &im->m->files[idx];
	struct stat st;
	int fd = -1, rc = open_source(sf, &fd);

	if (rc < 0)
		return rc;
	wstore__sha256_reset(h);
	for (uint64_t i = 0; i < rec->nchunks && rc == 0; i++) {
		uint64_t off = i * im->chunk_size;
		struct job j = { NULL,
				 (size_t)(sf->size - off < im->chunk_size
						  ? sf->size - off
						  : im->chunk_size),
				 rec->chunks[i], sf->rel };

		if (im->stream) {
			rc = stream_chunk(im, idx, i, fd, off, j.n, piece, h);
			continue;
		}
		if (!(j.buf = take_buf(im))) {
			rc = stopped(im);
			break;
		}
		rc = read_hash(fd, j.buf, j.n, off, sf->abs, h);
		if (rc < 0) {
			give_buf(im, j.buf);
			break;
		}
		im->attempted[idx] = i + 1;
		push_job(im, &j);
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
		im->done[idx] = 1;
	}
	return rc;
}

static void *reader(void *arg)
{
	struct import *im = arg;
	wstore__sha256 *h = wstore__sha256_new();
	char *piece = im->stream ? malloc(PIECE) : NULL;

	if (!h || (im->stream && !piece)) {
		fail(im,
		     wstore__err(-ENOMEM, "cannot allocate a hash context"));
		wstore__sha256_free(h);
		h = NULL;
	}
	while (h && !stopped(im)) {
		size_t idx;
		int rc;

		pthread_mutex_lock(&im->mu);
		idx = im->next++;
		pthread_mutex_unlock(&im->mu);
		if (idx >= im->scan.n)
			break;
		rc = read_file(im, idx, h, piece);
		if (rc < 0)
			fail(im, rc);
	}
	wstore__sha256_free(h);
	free(piece);
	pthread_mutex_lock(&im->mu);
	im->readers_left--;
	pthread_cond_broadcast(&im->cv_job);
	pthread_mutex_unlock(&im->mu);
	return NULL;
}

static void *putter(void *arg)
{
	struct import *im = arg;
	struct job j;

	while (pop_job(im, &j)) {
		/* after a failure the queue is only drained */
		if (!stopped(im)) {
			int rc = put_chunk(im, j.key, j.buf, j.n);

			if (rc == 0)
				rc = progress(im, j.n, j.path);
			if (rc < 0)
				fail(im, rc);
		}
		give_buf(im, j.buf);
	}
	return NULL;
}

static int alloc_pool(struct import *im, unsigned readers)
{
	im->nbufs = readers + 2;
	im->free_bufs = calloc(im->nbufs, sizeof(void *));
	im->q = calloc(im->nbufs, sizeof(struct job));
	if (!im->free_bufs || !im->q)
		return -ENOMEM;
	for (size_t i = 0; i < im->nbufs; i++) {
		void *b = wstore__store_buf_alloc(im->s, im->chunk_size);

		if (!b)
			return wstore__err(
				-ENOMEM,
				"cannot allocate a %llu-byte chunk buffer",
				(unsigned long long)im->chunk_size);
		im->free_bufs[im->nfree++] = b;
	}
	return 0;
}

static void free_pool(struct import *im)
{
	for (size_t i = 0; i < im->nfree; i++)
		wstore__store_buf_free(im->s, im->free_bufs[i]);
	/* left queued only if no putter ever ran */
	for (size_t i = 0; i < im->qlen; i++)
		wstore__store_buf_free(im->s,
				       im->q[(im->qhead + i) % im->nbufs].buf);
	free(im->free_bufs);
	free(im->q);
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
static int use_stream(const struct import *im, unsigned jobs)
{
	const wstore_backend *b = im->s->b;
	uint64_t large = im->scan.total / (2 * (uint64_t)jobs);
	unsigned big = 0;

	if (!WSTORE__HAS(b, put_stream) ||
	    (b->flags & WSTORE_BACKEND_WRITE_ONCE))
		return 0;
	/* chunk buffers that large cost more to allocate (first touch of
	 * fresh memory) than the putters win: 1 GB in one 4 GiB chunk took
	 * 6.1 s and 960 MiB of memory through the pool */
	if (im->chunk_size >= STREAM_CHUNK)
		return 1;
	/* large: a chunk, or a 2*jobs-th of the checkpoint if that is less */
	if (large > im->chunk_size)
		large = im->chunk_size;
	for (size_t i = 0; i < im->scan.n && big < jobs; i++)
		big += im->scan.files[i].size >= large && large > 0;
	return big >= jobs;
}

static int run_workers(struct import *im)
{
	unsigned jobs = wstore__jobs(im->o->jobs), nread = jobs, nput,
		 started = 0;
	pthread_t *t;
	int rc;

	if (nread > im->scan.n)
		nread = (unsigned)im->scan.n;
	im->stream = use_stream(im, jobs);
	nput = im->stream ? 0 : jobs;
	t = calloc(nread + nput, sizeof(*t));
	rc = !t ? -ENOMEM : im->stream ? 0 : alloc_pool(im, nread);
	im->readers_left = nread;
	for (unsigned i = 0; rc == 0 && i < nread + nput; i++, started++)
		if (wstore__thread_start(&t[i], i < nread ? reader : putter,
					 im) != 0)
			break;
	if (rc == 0 && started < nread + nput) {
		/* the threads that did start still drain and exit */
		pthread_mutex_lock(&im->mu);
		im->readers_left -=
			(int)(started < nread ? nread - started : 0);
		pthread_mutex_unlock(&im->mu);
		fail(im, wstore__err(-EAGAIN, "cannot start import threads"));
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	free(t);
	free_pool(im);
	if (rc < 0)
		return rc;
	if (im->err.code)
		return wstore__first_err_raise(&im->err);
	return 0;
}

/* Every file named in model.safetensors.index.json's weight_map must be in
 * the source: an engine would otherwise fail on the READY checkpoint. */
static int check_index_json(const wstore__scan *scan)
{
	const wstore__scan_file *f =
		wstore__scan_find(scan, "model.safetensors.index.json");
	json_error_t jerr;
	json_t *j, *map, *v;
	const char *tensor;
	int rc = 0;

	if (!f)
		return 0;
	j = json_load_file(f->abs, JSON_REJECT_DUPLICATES, &jerr);
	if (!j)
		return wstore__err(WSTORE_EINVAL,
				   "'%s' is not valid JSON: %s (line %d)",
				   f->abs, jerr.text, jerr.line);
	map = json_object_get(j, "weight_map");
	if (!json_is_object(map)) {
		json_decref(j);
		return wstore__err(WSTORE_EINVAL,
				   "'%s' has no weight_map object", f->abs);
	}
	json_object_foreach(map, tensor, v)
	{
		const char *file = json_string_value(v);

		if (!file) {
			rc = wstore__err(
				WSTORE_EINVAL,
				"'%s': weight_map entry '%s' is not a file name",
				f->abs, tensor);
			break;
		}
		if (!wstore__scan_find(scan, file)) {
			rc = wstore__err(
				WSTORE_EINVAL,
				"'%s' names shard '%s' (tensor '%s'), which is not in the source",
				f->abs, file, tensor);
			break;
		}
	}
	json_decref(j);
	return rc;
}

/* Check every .safetensors shard of a source before anything is written
 * (a READY checkpoint must always load). */
static int check_source_shards(const wstore__scan *scan)
{
	for (size_t i = 0; i < scan->n; i++) {
		const wstore__scan_file *f = &scan->files[i];
		size_t n = strlen(f->rel);
		int fd, rc;

		if (n < 12 || strcmp(f->rel + n - 12, ".safetensors") != 0)
			continue;
		fd = open(f->abs, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return wstore__errc(-errno, "cannot open '%s'", f->abs);
		rc = wstore__safetensors_check_file(NULL, fd, f->abs);
		close(fd);
		if (rc < 0)
			return wstore__err(WSTORE_EINVAL, "%s",
					   wstore_last_error());
	}
	return 0;
}

static int build_manifest(struct import *im, const char *source_uri)
{
	const wstore_import_options *o = im->o;
	wstore_manifest *m = wstore__manifest_new();
	char key[WSTORE__KEY_MAX], ck[WSTORE__KEY_MAX];

	if (!m)
		return -ENOMEM;
	im->m = m;
	m->created_at = m->updated_at = (int64_t)time(NULL);
	if (wstore__set_str(&m->checkpoint_id, o->checkpoint_id) < 0 ||
	    wstore__set_str(&m->model_id, o->model_id) < 0 ||
	    wstore__set_str(&m->revision, o->revision ? o->revision : "main") <
		    0 ||
	    wstore__set_str(&m->source_uri, source_uri) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < im->scan.n; i++) {
		const wstore__scan_file *sf = &im->scan.files[i];
		wstore__file *f = wstore__manifest_add_file(m, sf->rel);
		uint64_t n = (sf->size + im->chunk_size - 1) / im->chunk_size;

		if (!f)
			return -ENOMEM;
		if (wstore_validate_path(sf->rel) < 0)
			return WSTORE_EINVAL;
		wstore__key_file(key, o->checkpoint_id, sf->rel);
		if (wstore__set_str(&f->key, key) < 0 ||
		    wstore__set_str(&f->type, wstore__file_type(sf->rel)) < 0)
			return -ENOMEM;
		f->size = sf->size;
		f->chunk_size = im->chunk_size;
		for (uint64_t c = 0; c < n; c++) {
			wstore__key_chunk(ck, key, c);
			if (wstore__file_add_chunk(f, ck) < 0)
				return -ENOMEM;
		}
	}
	wstore__manifest_sort(m);
	return 0;
}

static int put_manifest(wstore_store *s, const wstore_manifest *m)
{
	char key[WSTORE__KEY_MAX];
	char *json = NULL;
	size_t len = 0;
	int rc = wstore_manifest_serialize(&json, &len, m);

	if (rc < 0)
		return rc;
	wstore__key_manifest(key, m->checkpoint_id);
	rc = wstore__replace(s, key, json, len);
	free(json);
	return rc;
}

/* Failure path: remove what was written, record what could not be. */
static void leave_failed(struct import *im, int err, const char *msg)
{
	wstore_manifest *m = im->m;

	for (size_t i = 0; i < m->nfiles; i++) {
		wstore__file *f = &m->files[i];
		uint64_t kept = 0;

		for (uint64_t c = 0; c < im->attempted[i]; c++)
			if (wstore__remove(im->s, f->chunks[c]) < 0)
				f->chunks[kept++] = f->chunks[c];
			else
				free(f->chunks[c]);
		for (uint64_t c = im->attempted[i]; c < f->nchunks; c++)
			free(f->chunks[c]);
		f->nchunks = kept;
		if (!im->done[i])
			wstore__set_str(&f->sha256, "");
	}
	wstore__set_str(&m->status, "FAILED");
	wstore__set_str(&m->error, msg);
	m->updated_at = (int64_t)time(NULL);
	if (put_manifest(im->s, m) < 0) {
		/* the intent record still lists every key for a later delete */
		wstore__err(
			err,
			"%s (and the FAILED manifest could not be written: %s)",
			msg, wstore_last_error());
		return;
	}
	/* the FAILED manifest lists what is left */
	wstore__intent_drop(im->s, m->checkpoint_id);
	wstore__err(err, "%s", msg);
}

int wstore_import_check(const wstore_import_options *o)
{
	if (!o ||
	    (o->version != 1 && o->version != WSTORE_IMPORT_OPTIONS_VERSION))
		return wstore__err(
			WSTORE_EINVAL,
			"import options missing or of another version");
	if (o->reserved)
		return wstore__err(
			WSTORE_EINVAL,
			"import options: replica_num is a store setting (config key replica_num), not an import option");
	if (wstore_validate_checkpoint_id(o->checkpoint_id) < 0)
		return WSTORE_EINVAL;
	if (!o->model_id || !*o->model_id)
		return wstore__err(WSTORE_EINVAL, "model id must not be empty");
	if (!wstore__utf8_valid(o->model_id))
		return wstore__err(WSTORE_EINVAL,
				   "model id '%s' is not valid UTF-8",
				   o->model_id);
	if (o->revision && !*o->revision)
		return wstore__err(WSTORE_EINVAL, "revision must not be empty");
	if (o->revision && !wstore__utf8_valid(o->revision))
		return wstore__err(WSTORE_EINVAL,
				   "revision '%s' is not valid UTF-8",
				   o->revision);
	if (o->chunk_size > (4ull << 30))
		return wstore__err(WSTORE_EINVAL,
				   "chunk size %llu is larger than 4 GiB",
				   (unsigned long long)o->chunk_size);
	return 0;
}

static int add_to_indexes(wstore_store *s, const wstore_manifest *m)
{
	char key[WSTORE__KEY_MAX];
	int rc;

	wstore__key_models_index(key);
	rc = wstore__index_add(s, key, m->checkpoint_id, NULL);
	if (rc == 0) {
		wstore__key_model_index(key, m->model_id);
		rc = wstore__index_add(s, key, m->checkpoint_id, m->model_id);
	}
	return rc;
}

/*
 * With the lock held: a READY id is refused (after making sure it is in
 * the indexes, which a crash right after publishing can leave out); a
 * FAILED or unreadable one is deleted so the import can start clean.
 */
static int claim_id(wstore_store *s, const char *id)
{
	wstore_manifest *old = NULL;
	int rc = wstore_manifest_read(&old, s, id);

	if (rc == WSTORE_ENOTFOUND)
		/* what a killed import's intent record lists */
		return rc = wstore__intent_reclaim(s, id), rc < 0 ? rc : 0;
	if (rc == 0 && strcmp(old->status, "READY") == 0) {
		add_to_indexes(s, old);
		wstore__intent_drop(s, id);
		wstore_manifest_free(old);
		return wstore__err(
			WSTORE_EEXISTS,
			"checkpoint '%s' already exists and is READY; delete it first",
			id);
	}
	wstore_manifest_free(old);
	if (rc < 0 && rc != WSTORE_ECORRUPT)
		return rc;
	rc = wstore__delete_unlocked(s, id);
	if (rc == WSTORE_ENOTFOUND) {
		wstore__clear_err();
		rc = 0;
	}
	return rc;
}

/* On a store that may evict keys, the chunks put a moment ago may be gone
 * already: check each one's size before a READY manifest says they are
 * there. */
static int check_still_there(wstore_store *s, const wstore_manifest *m)
{
	for (size_t i = 0; i < m->nfiles; i++)
		for (uint64_t c = 0; c < m->files[i].nchunks; c++) {
			const char *k = m->files[i].chunks[c];
			uint64_t want = 0, got = 0;
			int rc = wstore__chunk_len(&want, &m->files[i], c);

			if (rc == 0)
				rc = s->b->size(s->b, k, &got);
			if (rc == WSTORE_ENOTFOUND || (rc == 0 && got != want))
				return wstore__err(
					WSTORE_EUNAVAIL,
					"chunk '%s' of '%s' is gone from the store right after it was written (the store evicts keys, or lost them in a failover)",
					k, m->files[i].path);
			if (rc < 0)
				return rc;
		}
	return 0;
}

/*
 * On a write-once store, remove every key the import will write (forced;
 * absent keys are the common case and cost one round trip each), so that
 * no put meets an old value it would silently keep.
 */
static int clear_keys(struct import *im)
{
	const wstore_manifest *m = im->m;

	if (!(im->s->b->flags & WSTORE_BACKEND_WRITE_ONCE))
		return 0;
	for (size_t i = 0; i < m->nfiles; i++)
		for (uint64_t c = 0; c < m->files[i].nchunks; c++) {
			int rc = wstore__remove(im->s, m->files[i].chunks[c]);

			if (rc < 0)
				return wstore__err(
					rc, "cannot clear chunk '%s': %s",
					m->files[i].chunks[c],
					wstore_last_error());
		}
	return 0;
}

static int import_locked(struct import *im, const char *source_uri)
{
	int rc = claim_id(im->s, im->o->checkpoint_id);

	if (rc < 0)
		return rc;
	rc = build_manifest(im, source_uri);
	if (rc < 0)
		return rc;
	/* before the first chunk: what a killed import leaves is findable */
	rc = wstore__intent_write(im->s, im->m, im->chunk_size);
	if (rc < 0)
		return rc;
	im->attempted = calloc(im->scan.n, sizeof(*im->attempted));
	im->done = calloc(im->scan.n, 1);
	if (!im->attempted || !im->done)
		return -ENOMEM;
	rc = clear_keys(im);
	if (rc == 0)
		rc = run_workers(im);
	/* chunks must be durable before the manifest that makes them visible */
	if (rc == 0 && im->s->b->sync)
		rc = im->s->b->sync(im->s->b);
	if (rc == 0 && (im->s->b->flags & WSTORE_BACKEND_MAY_EVICT))
		rc = check_still_there(im->s, im->m);
	if (rc == 0) {
		wstore__set_str(&im->m->status, "READY");
		wstore__set_str(&im->m->error, NULL);
		im->m->updated_at = (int64_t)time(NULL);
		rc = put_manifest(im->s, im->m);
	}
	/* and once more after: writing the manifest may have evicted some */
	if (rc == 0 && (im->s->b->flags & WSTORE_BACKEND_MAY_EVICT))
		rc = check_still_there(im->s, im->m);
	if (rc < 0) {
		char msg[1024];

		snprintf(msg, sizeof(msg), "%s", wstore_last_error());
		leave_failed(im, rc, msg);
		return rc;
	}
	/* the READY manifest lists every chunk now; a leftover record is
	 * harmless (delete and gc drop it), so a failure here is not one */
	if (wstore__intent_drop(im->s, im->o->checkpoint_id) < 0)
		wstore__clear_err();
	rc = add_to_indexes(im->s, im->m);
	if (rc < 0)
		return wstore__err(
			rc,
			"checkpoint '%s' is READY but %s; run the import again to repair the index",
			im->o->checkpoint_id, wstore_last_error());
	return 0;
}

int wstore_import(wstore_store *s, const wstore_import_options *o)
{
	struct import im = { .s = s, .o = o };
	char lockname[WSTORE__KEY_MAX], *source_uri = NULL;
	wstore__held *token = NULL;
	char *hub = NULL;
	int rc = wstore_import_check(o);

	if (rc < 0)
		return rc;
	im.chunk_size =
		o->chunk_size ? o->chunk_size : WSTORE_DEFAULT_CHUNK_SIZE;
	pthread_mutex_init(&im.mu, NULL);
	pthread_cond_init(&im.cv_free, NULL);
	pthread_cond_init(&im.cv_job, NULL);
	rc = wstore__resolve_hub_source(&hub, o->source, o->revision);
	if (rc == 0)
		rc = wstore__scan_source(&im.scan, hub ? hub : o->source);
	for (size_t i = 0; rc == 0 && i < im.scan.n; i++)
		if (wstore_validate_path(im.scan.files[i].rel) < 0)
			rc = wstore__err(WSTORE_EINVAL, "source file '%s': %s",
					 im.scan.files[i].abs,
					 wstore_last_error());
	if (rc == 0)
		rc = check_index_json(&im.scan);
	if (rc == 0)
		rc = check_source_shards(&im.scan);
	if (rc == 0) {
		source_uri = realpath(hub ? hub : o->source, NULL);
		if (!source_uri)
			rc = wstore__errc(-errno, "cannot resolve source '%s'",
					  o->source);
	}
	if (rc == 0)
		rc = wstore__make_room(s, o->checkpoint_id, im.scan.total,
				       o->version >= 2 ? o->on_evict : NULL,
				       o->version >= 2 ? o->on_evict_ctx
						       : NULL);
	snprintf(lockname, sizeof(lockname), "models/%s", o->checkpoint_id);
	if (rc == 0) {
		rc = wstore__lock(s, lockname, &token);
		if (rc == WSTORE_EBUSY)
			wstore__err(
				rc,
				"checkpoint '%s' is busy (another import or a delete is running): %s",
				o->checkpoint_id, wstore_last_error());
	}
	if (rc == 0) {
		rc = import_locked(&im, source_uri);
		wstore__unlock(s, token);
	}
	free(source_uri);
	free(hub);
	free(im.attempted);
	free(im.done);
	wstore_manifest_free(im.m);
	wstore__scan_free(&im.scan);
	pthread_mutex_destroy(&im.mu);
	pthread_cond_destroy(&im.cv_free);
	pthread_cond_destroy(&im.cv_job);
	return rc;
}
