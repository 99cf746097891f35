/*
 * bundle.c - a checkpoint as one tar stream, for machines without a
 * route to the store (wstore_export, wstore_import_bundle; wstore.h says
 * what a bundle holds, docs/format.md "Bundles" the format in full).
 *
 * Export: the read lease first, then the READY manifest, written as the
 * first entry (WSTORE_BUNDLE_MANIFEST), then each file in manifest order,
 * fetched chunk by chunk through one buffer and hashed as it goes
 * (wstore__fetch_to_fd), so that a damaged store never yields a bundle
 * that claims to be good.
 *
 * Import: the manifest entry is read and checked whole before anything
 * is written; then import.c's lifecycle runs (lock, intent record,
 * READY or FAILED) with this file's workers, which take the entries one
 * by one in manifest order and store each file as it streams (into its
 * data file on the file store, chunk by chunk elsewhere), hashing it, and
 * refuse anything the manifest does not say: another name, size, type or
 * hash, a missing or an extra entry.  An entry's name is only ever
 * compared with the manifest's paths, never used to open a file, so
 * nothing outside the store can be written whatever the bundle holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi.h"
#include "bundle.h"
#include "digest.h"
#include "durable.h"
#include "error.h"
#include "import.h"
#include "lease_int.h"
#include "manifest.h"
#include "store.h"
#include "tar.h"
#include "util.h"

/* Largest manifest entry a bundle may carry. */
#define MANIFEST_MAX ((uint64_t)256 << 20)
/* Bytes of a file read, hashed and written at a time (whole files). */
#define PIECE ((size_t)1 << 20)

static int write_all(int fd, const void *buf, size_t n, const char *what)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = write(fd, p, n);

		/* a reader that stalls must not outlast ^C */
		if (w < 0 && errno == EINTR && wstore__interrupted())
			return wstore__err(WSTORE_ECANCELED,
					   "export interrupted");
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return wstore__errc(-errno, "cannot write %s", what);
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* ---- export ------------------------------------------------------------- */

struct exporter {
	int fd;
	const char *what; /* the output, for messages */
	const wstore_export_options *o;
	uint64_t done, total;
	const char *path; /* the file being written */
	int verify;	  /* hash each file as it is read */
};

static int export_progress(uint64_t n, void *ctx)
{
	struct exporter *e = ctx;

	e->done += n;
	if (wstore__interrupted())
		return wstore__err(WSTORE_ECANCELED, "export interrupted");
	if (e->o && e->o->progress &&
	    e->o->progress(e->done, e->total, e->path, e->o->progress_ctx))
		return wstore__err(WSTORE_ECANCELED, "export interrupted");
	return 0;
}

/* One entry's header, and after data of size bytes its padding. */
static int put_header(struct exporter *e, const char *name, uint64_t size,
		      int64_t mtime)
{
	char h[3 * WSTORE__TAR_BLOCK + 4096];
	size_t n = 0;

	if (wstore__tar_header(h, sizeof(h), &n, name, size, mtime) < 0)
		return wstore__err(WSTORE_EINVAL,
				   "cannot export '%s': the name is too long",
				   name);
	return write_all(e->fd, h, n, e->what);
}

static int put_pad(struct exporter *e, uint64_t size)
{
	static const char zero[2 * WSTORE__TAR_BLOCK];

	return write_all(e->fd, zero, wstore__tar_pad(size), e->what);
}

/* Every entry of m and the end-of-archive marker. */
static int export_entries(struct exporter *e, wstore_store *s,
			  const wstore_manifest *m)
{
	static const char zero[2 * WSTORE__TAR_BLOCK];
	size_t cap = (size_t)wstore__max_chunk(m), len = 0;
	char *json = NULL;
	void *buf = NULL;
	int rc = wstore_manifest_serialize(&json, &len, m);

	if (rc == 0)
		rc = put_header(e, WSTORE_BUNDLE_MANIFEST, len, m->updated_at);
	if (rc == 0)
		rc = write_all(e->fd, json, len, e->what);
	if (rc == 0)
		rc = put_pad(e, len);
	free(json);
	if (rc == 0 && !(buf = wstore__store_buf_alloc(s, cap ? cap : 1)))
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < m->nfiles; i++) {
		const wstore__file_rec *f = &m->files[i];

		e->path = f->path;
		rc = put_header(e, f->path, f->size, m->updated_at);
		if (rc == 0)
			rc = wstore__fetch_to_fd(s, f, e->fd, buf, cap,
						 e->verify, export_progress, e);
		if (rc == 0)
			rc = put_pad(e, f->size);
	}
	if (buf)
		wstore__store_buf_free(s, buf);
	if (rc == 0)
		rc = write_all(e->fd, zero, sizeof(zero), e->what);
	return rc;
}

/* Export m (its lease held) to e->fd or, with output, a durable file. */
static int export_to(struct exporter *e, wstore_store *s,
		     const wstore_manifest *m, const char *output)
{
	wstore__durable d = { .fd = -1 };
	const char *base;
	int dfd, rc;

	if (!output)
		return export_entries(e, s, m);
	if ((dfd = wstore__open_out_dir(output, &base)) < 0)
		return dfd;
	rc = wstore__check_target(dfd, base, output);
	if (rc == 0)
		rc = wstore__durable_open(&d, dfd, 0666, output);
	if (rc == 0) {
		e->fd = d.fd;
		rc = export_entries(e, s, m);
		if (rc == 0)
			rc = wstore__durable_commit(&d, base, output);
		else
			wstore__durable_abort(&d);
	}
	close(dfd);
	return rc;
}

int wstore_export(wstore_store *s, const char *id, int fd, const char *output,
		  const wstore_export_options *opts)
{
	return wstore__export(s, id, fd, output, opts, 1);
}

int wstore__export(wstore_store *s, const char *id, int fd, const char *output,
		   const wstore_export_options *opts, int verify)
{
	char what[4200];
	struct exporter e = { fd, what, opts, 0, 0, "", verify };
	wstore_manifest *m = NULL;
	wstore_lease *lease = NULL;
	int rc;

	if (opts && opts->version != WSTORE_EXPORT_OPTIONS_VERSION)
		return wstore__err(WSTORE_EINVAL,
				   "export options: unknown version %u",
				   opts->version);
	if (!output && fd < 0)
		return wstore__err(WSTORE_EINVAL, "export: no output");
	snprintf(what, sizeof(what), output ? "'%s'" : "the bundle stream",
		 output);
	if (wstore_validate_checkpoint_id(id) < 0)
		return WSTORE_EINVAL;
	rc = wstore__lease_read_ready(&lease, &m, NULL, s, id, "export", 0);
	if (rc < 0)
		return rc;
	if (wstore_manifest_find(m, WSTORE_BUNDLE_MANIFEST) >= 0)
		rc = wstore__err(WSTORE_EINVAL,
				 "checkpoint '%s' holds a file named '%s', the "
				 "name a bundle gives its manifest: it cannot "
				 "be exported",
				 id, WSTORE_BUNDLE_MANIFEST);
	e.total = m->total_size;
	if (rc == 0)
		rc = export_to(&e, s, m, output);
	wstore_manifest_free(m);
	wstore_lease_release(lease);
	return rc;
}

/* ---- import: the bundle's manifest ------------------------------------- */

/* A name no bundle entry may have: 0, or the refusal. */
static int check_name(const wstore__tar_in *t, const char *name)
{
	const char *p = name;

	if (name[0] == '/')
		return wstore__err(WSTORE_EINVAL,
				   "%s: entry '%s' has an absolute name: "
				   "refused",
				   t->what, name);
	for (; p; p = strchr(p, '/'), p = p ? p + 1 : NULL)
		if (p[0] == '.' && p[1] == '.' && (p[2] == '/' || !p[2]))
			return wstore__err(WSTORE_EINVAL,
					   "%s: entry '%s' has a '..' "
					   "component: refused",
					   t->what, name);
	return 0;
}

/* The next entry, which must be a regular file with an acceptable name:
 * 1, 0 at the end of the archive, or the refusal. */
static int next_file(wstore__tar_in *t, wstore__tar_entry *e)
{
	int rc = wstore__tar_next(t, e);

	if (rc <= 0)
		return rc;
	if ((rc = check_name(t, e->name)) == 0 && e->type != '0')
		rc = wstore__err(WSTORE_EINVAL,
				 "%s: entry '%s' is a %s: refused", t->what,
				 e->name, e->kind);
	if (rc < 0) {
		free(e->name);
		e->name = NULL;
		return rc;
	}
	return 1;
}

/* What the import needs of a bundle's manifest: READY, one chunk size,
 * counts that fit the sizes, a SHA-256 for every file. */
static int check_manifest(const wstore__tar_in *t, const wstore_manifest *m,
			  uint64_t *cs)
{
	*cs = 0;
	if (strcmp(m->status, "READY") != 0)
		return wstore__err(WSTORE_EINVAL,
				   "%s: its manifest is not READY", t->what);
	for (size_t i = 0; i < m->nfiles; i++) {
		const wstore__file_rec *f = &m->files[i];

		if (!strcmp(f->path, WSTORE_BUNDLE_MANIFEST) ||
		    !wstore__is_hex(f->sha256, 64))
			return wstore__err(WSTORE_EINVAL,
					   "%s: its manifest's file '%s' is "
					   "not one a bundle can hold",
					   t->what, f->path);
		if (f->size == 0)
			continue;
		if (!*cs)
			*cs = f->chunk_size;
		if (!f->chunk_size || f->chunk_size != *cs ||
		    f->nchunks != (f->size + *cs - 1) / *cs)
			return wstore__err(WSTORE_EINVAL,
					   "%s: its manifest's chunks of '%s' "
					   "do not fit one chunk size",
					   t->what, f->path);
	}
	if (!*cs)
		*cs = WSTORE_DEFAULT_CHUNK_SIZE;
	return 0;
}

/* The first entry: the manifest, parsed and checked, into *out. */
static int read_manifest(wstore__tar_in *t, wstore_manifest **out, uint64_t *cs)
{
	wstore__tar_entry e;
	char *json = NULL;
	int rc = next_file(t, &e);

	*out = NULL;
	if (rc == 0)
		return wstore__err(WSTORE_EINVAL, "%s holds no entry", t->what);
	if (rc < 0)
		return rc;
	if (strcmp(e.name, WSTORE_BUNDLE_MANIFEST) != 0 ||
	    e.size > MANIFEST_MAX)
		rc = wstore__err(WSTORE_EINVAL,
				 "%s is not a wstore bundle: its first entry "
				 "is '%s', not its manifest '%s'",
				 t->what, e.name, WSTORE_BUNDLE_MANIFEST);
	else if (!(json = malloc(e.size ? e.size : 1)))
		rc = -ENOMEM;
	if (rc == 1)
		rc = wstore__tar_read(t, json, (size_t)e.size);
	if (rc == 0)
		rc = wstore__tar_skip(t, wstore__tar_pad(e.size));
	if (rc == 0 && wstore_manifest_parse(out, json, (size_t)e.size) < 0)
		rc = wstore__err(WSTORE_EINVAL,
				 "%s: its manifest is invalid: %s", t->what,
				 wstore_last_error());
	if (rc == 0)
		rc = check_manifest(t, *out, cs);
	if (rc < 0) {
		wstore_manifest_free(*out);
		*out = NULL;
	}
	free(json);
	free(e.name);
	return rc;
}

/* ---- import: the files -------------------------------------------------- */

struct bundle_in {
	wstore__tar_in *t;
	const wstore_manifest *bm; /* the bundle's */
	const wstore_import_options *o;
	uint64_t done, total;
	char *buf; /* a piece (data files) */
	size_t cap;
	wstore__sha256 *h;
	struct putters *put; /* stores of chunks */
};

static int in_progress(struct bundle_in *b, uint64_t n, const char *path)
{
	b->done += n;
	if (wstore__interrupted() ||
	    (b->o->progress &&
	     b->o->progress(b->done, b->total, path, b->o->progress_ctx)))
		return wstore__err(WSTORE_ECANCELED, "import interrupted");
	return 0;
}

/* File i's bytes into its data file (the file store). */
static int take_whole(struct import *im, struct bundle_in *b, size_t i)
{
	wstore__file_rec *f = &im->m->files[i];
	wstore_backend *be = im->s->b;
	void *handle = NULL;
	int fd = -1,
	    rc = be->begin_file(be, f->key, im->chunk_size, &fd, &handle);

	if (rc < 0)
		return wstore__err(rc, "cannot store '%s': %s", f->path,
				   wstore_last_error());
	for (uint64_t off = 0; rc == 0 && off < f->size;) {
		size_t k = f->size - off < b->cap ? (size_t)(f->size - off)
						  : b->cap;

		rc = wstore__tar_read(b->t, b->buf, k);
		if (rc == 0) {
			wstore__sha256_update(b->h, b->buf, k);
			rc = wstore__pwrite_all(fd, b->buf, k, off, f->path);
		}
		off += k;
		if (rc == 0)
			rc = in_progress(b, k, f->path);
	}
	if (rc == 0) {
		char hex[65];

		wstore__sha256_hex(b->h, hex);
		rc = strcmp(hex, b->bm->files[i].sha256) ? 1 : 0;
		/* by the bundle's record: this import's gets its hash only
		 * once the file is done */
		if (rc == 0 && im->reuse &&
		    im->o->reflink != WSTORE_REFLINK_NEVER)
			wstore__reuse_dedupe(im->reuse, im->s, &b->bm->files[i],
					     fd);
	}
	if (rc != 0) {
		be->abort_file(be, handle);
		return rc;
	}
	im->attempted[i] = f->nchunks;
	rc = be->commit_file(be, handle, f->size);
	return rc < 0 ? wstore__err(rc, "cannot store '%s': %s", f->path,
				    wstore_last_error())
		      : 0;
}

/* ---- import: putting chunks while the next are read --------------------- */

/* Putter threads, and chunk buffers: one being filled, the rest queued
 * or being put, so that reading and hashing the stream overlaps the puts
 * (a network round trip each on Redis and Mooncake). */
#define PUTTERS 3
#define NBUF (PUTTERS + 1)

struct pjob {
	char *buf;
	size_t n;
	const char *key, *path;
	uint64_t c;
};

struct putters {
	wstore_store *s;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* a buffer came back, a job was queued, close */
	char *all[NBUF];
	char *free_bufs[NBUF];
	size_t nfree;
	struct pjob q[NBUF];
	size_t qhead, qlen;
	int closing;
	unsigned started;
	pthread_t t[PUTTERS];
	wstore__first_err err;
};

static void *putter_main(void *arg)
{
	struct putters *p = arg;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		struct pjob j;
		int rc = 0;

		while (p->qlen == 0 && !p->closing)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->qlen == 0)
			break;
		j = p->q[p->qhead];
		p->qhead = (p->qhead + 1) % NBUF;
		p->qlen--;
		if (!p->err.code) {
			pthread_mutex_unlock(&p->mu);
			rc = p->s->b->put(p->s->b, j.key, j.buf, j.n);
			if (rc < 0)
				rc = wstore__err(rc,
						 "cannot store chunk %" PRIu64
						 " of '%s': %s",
						 j.c, j.path,
						 wstore_last_error());
			pthread_mutex_lock(&p->mu);
			if (rc < 0)
				wstore__first_err_keep(&p->err, rc);
		}
		p->free_bufs[p->nfree++] = j.buf;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static void putters_stop(struct putters *p)
{
	pthread_mutex_lock(&p->mu);
	p->closing = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->started; i++)
		pthread_join(p->t[i], NULL);
	for (size_t i = 0; i < NBUF; i++)
		if (p->all[i])
			wstore__store_buf_free(p->s, p->all[i]);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
}

static int putters_start(struct putters *p, wstore_store *s, size_t cap)
{
	memset(p, 0, sizeof(*p));
	p->s = s;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	for (size_t i = 0; i < NBUF; i++) {
		if (!(p->all[i] = wstore__store_buf_alloc(s, cap)))
			return wstore__err(-ENOMEM,
					   "cannot allocate a %zu-byte chunk "
					   "buffer",
					   cap);
		p->free_bufs[p->nfree++] = p->all[i];
	}
	for (; p->started < PUTTERS; p->started++)
		if (wstore__thread_start(&p->t[p->started], putter_main, p))
			return wstore__err(-EAGAIN, "cannot start a thread");
	return 0;
}

/* A free buffer into *out: 0, or the first put's error once one failed. */
static int putters_take(struct putters *p, char **out)
{
	*out = NULL;
	pthread_mutex_lock(&p->mu);
	while (p->nfree == 0 && !p->err.code)
		pthread_cond_wait(&p->cv, &p->mu);
	if (!p->err.code)
		*out = p->free_bufs[--p->nfree];
	pthread_mutex_unlock(&p->mu);
	return *out ? 0 : wstore__first_err_raise(&p->err);
}

/* Give back a buffer taken but not queued. */
static void putters_give(struct putters *p, char *b)
{
	pthread_mutex_lock(&p->mu);
	p->free_bufs[p->nfree++] = b;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

static void putters_push(struct putters *p, const struct pjob *j)
{
	pthread_mutex_lock(&p->mu);
	p->q[(p->qhead + p->qlen++) % NBUF] = *j;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

/* Wait until every queued put is done: 0, or the first put's error. */
static int putters_drain(struct putters *p)
{
	pthread_mutex_lock(&p->mu);
	while (p->nfree < NBUF)
		pthread_cond_wait(&p->cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
	return wstore__first_err_raise(&p->err);
}

/* File i's bytes put chunk by chunk, by the putters. */
static int take_chunks(struct import *im, struct bundle_in *b, size_t i)
{
	wstore__file_rec *f = &im->m->files[i];
	int rc = 0;

	for (uint64_t c = 0; rc == 0 && c < f->nchunks; c++) {
		struct pjob j = { NULL, 0, f->chunks[c], f->path, c };
		uint64_t n = 0;

		rc = wstore__chunk_len(&n, f, c);
		if (rc == 0)
			rc = putters_take(b->put, &j.buf);
		if (rc == 0 && !(rc = wstore__tar_read(b->t, j.buf, n))) {
			wstore__sha256_update(b->h, j.buf, (size_t)n);
			im->attempted[i] = c + 1;
			j.n = (size_t)n;
			putters_push(b->put, &j);
			rc = in_progress(b, n, f->path);
		} else if (j.buf) {
			putters_give(b->put, j.buf);
		}
	}
	if (rc == 0) {
		char hex[65];

		wstore__sha256_hex(b->h, hex);
		rc = strcmp(hex, b->bm->files[i].sha256) ? 1 : 0;
	}
	return rc;
}

/* The entry of file i, then its bytes, stored and checked. */
static int take_file(struct import *im, struct bundle_in *b, size_t i)
{
	const wstore__file_rec *want = &b->bm->files[i];
	wstore__tar_entry e;
	int64_t at;
	int rc = next_file(b->t, &e);

	if (rc == 0)
		return wstore__err(WSTORE_EINVAL, "%s lacks '%s'", b->t->what,
				   want->path);
	if (rc < 0)
		return rc;
	if (strcmp(e.name, want->path) != 0) {
		at = wstore_manifest_find(b->bm, e.name);
		rc = wstore__err(
			WSTORE_EINVAL,
			at < 0 ? "%s: entry '%s' is not in its manifest"
			: (size_t)at < i
				? "%s: entry '%s' is out of order or repeated"
				: "%s: entry '%s' comes where '%s' belongs "
				  "(missing, or out of order)",
			b->t->what, e.name, want->path);
	} else if (e.size != want->size) {
		rc = wstore__err(WSTORE_EINVAL,
				 "%s: entry '%s' holds %" PRIu64
				 " bytes, its manifest says %" PRIu64,
				 b->t->what, e.name, e.size, want->size);
	}
	free(e.name);
	if (rc < 0)
		return rc;
	wstore__sha256_reset(b->h);
	rc = wstore__whole_files(im->s) && want->size > 0
		     ? take_whole(im, b, i)
		     : take_chunks(im, b, i);
	if (rc == 1)
		return wstore__err(WSTORE_EINVAL,
				   "%s: '%s' does not match its manifest's "
				   "SHA-256 (damaged or tampered with)",
				   b->t->what, want->path);
	if (rc == 0)
		rc = wstore__tar_skip(b->t, wstore__tar_pad(want->size));
	if (rc == 0 && wstore__set_str(&im->m->files[i].sha256, want->sha256))
		rc = -ENOMEM;
	if (rc == 0)
		im->done[i] = 1;
	return rc;
}

/* import.h's workers hook: every entry after the manifest, in order, and
 * nothing after the last. */
static int bundle_workers(struct import *im)
{
	struct bundle_in *b = im->ctx;
	struct putters put;
	wstore__tar_entry e;
	int whole = wstore__whole_files(im->s), rc = 0, rc2;

	b->cap = PIECE;
	if (!(b->buf = malloc(b->cap)) || !(b->h = wstore__sha256_new()))
		rc = -ENOMEM;
	if (rc == 0 && !whole) {
		b->put = &put;
		rc = putters_start(&put, im->s, (size_t)im->chunk_size);
	}
	for (size_t i = 0; rc == 0 && i < im->m->nfiles; i++)
		rc = take_file(im, b, i);
	if (rc == 0) {
		rc = wstore__tar_next(b->t, &e);
		if (rc == 1) {
			rc = wstore__err(WSTORE_EINVAL,
					 "%s carries '%s', which its manifest "
					 "does not list",
					 b->t->what, e.name);
			free(e.name);
		}
	}
	if (rc == 0)
		wstore__tar_drain(b->t, (uint64_t)1 << 20);
	if (b->put) {
		/* every put done before the manifest can say READY */
		rc2 = rc == 0 ? putters_drain(&put) : 0;
		putters_stop(&put);
		rc = rc ? rc : rc2;
		b->put = NULL;
	}
	free(b->buf);
	wstore__sha256_free(b->h);
	b->buf = NULL;
	b->h = NULL;
	return rc;
}

/* The import's scan: the bundle's files (paths and sizes). */
static int scan_of(wstore__scan *scan, const wstore_manifest *m)
{
	scan->files = calloc(m->nfiles ? m->nfiles : 1, sizeof(*scan->files));
	if (!scan->files)
		return -ENOMEM;
	for (size_t i = 0; i < m->nfiles; i++) {
		scan->files[i].rel = strdup(m->files[i].path);
		scan->files[i].abs = strdup(m->files[i].path);
		scan->files[i].size = m->files[i].size;
		scan->n = i + 1;
		scan->total += m->files[i].size;
		if (!scan->files[i].rel || !scan->files[i].abs)
			return -ENOMEM;
	}
	return 0;
}

int wstore__import_bundle_from(char **out_id, wstore_store *s, int fd,
			       const wstore_import_options *given,
			       const char *what)
{
	static const wstore__import_hooks hooks = { NULL, NULL,
						    bundle_workers };
	wstore_import_options o = WSTORE_IMPORT_OPTIONS_INIT;
	struct import im = { .s = s, .o = &o, .hooks = &hooks };
	struct bundle_in b = { 0 };
	wstore_manifest *bm = NULL;
	wstore__tar_in t;
	int rc;

	if (out_id)
		*out_id = NULL;
	if (given && (rc = wstore__import_opts(&o, given)) < 0)
		return rc;
	if (wstore__tar_in_init(&t, fd, what) < 0)
		return -ENOMEM;
	rc = read_manifest(&t, &bm, &im.chunk_size);
	if (rc == 0 && out_id && !(*out_id = strdup(bm->checkpoint_id)))
		rc = -ENOMEM;
	if (rc == 0) {
		o.checkpoint_id = bm->checkpoint_id;
		o.model_id = bm->model_id;
		o.revision = bm->revision;
		o.chunk_size = im.chunk_size;
		o.source = NULL;
		rc = wstore_import_check(&o);
	}
	if (rc == 0)
		rc = scan_of(&im.scan, bm);
	if (rc == 0) {
		b = (struct bundle_in){ &t,   bm, &o,  0, im.scan.total,
					NULL, 0,  NULL };
		im.ctx = &b;
		rc = wstore__import_run(&im, bm->source_uri);
	}
	wstore__import_free(&im);
	wstore_manifest_free(bm);
	wstore__tar_in_free(&t);
	return rc;
}

int wstore_import_bundle(char **out_id, wstore_store *s, int fd,
			 const wstore_import_options *opts)
{
	return wstore__import_bundle_from(out_id, s, fd, opts, "the bundle");
}
