/*
 * verify.c - re-read every chunk of a READY checkpoint and check each
 * file's size and SHA-256 against its manifest.  Files are checked in
 * parallel, one per worker, each worker reusing one chunk buffer.  A damaged
 * file (missing, short, long or altered chunk) is reported and checking goes
 * on; a store that cannot be read at all stops the run with its error.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "error.h"
#include "util.h"
#include "manifest.h"
#include "readv.h"
#include "store.h"

struct verify {
	wstore_store *s;
	const wstore_verify_options *o;
	wstore_checkpoint *ck;
	const wstore_manifest *m;
	size_t cap;
	pthread_mutex_t mu;
	size_t next;
	uint64_t done, total;
	size_t bad;
	wstore__first_err err; /* a failure of the check itself */
	int canceled;
	char first_bad[1024];
};

static int verify_progress(uint64_t n, void *ctx)
{
	struct verify *v = ctx;
	int rc = 0;

	pthread_mutex_lock(&v->mu);
	v->done += n;
	if (v->err.code || v->canceled)
		rc = WSTORE_ECANCELED;
	else if (v->o->progress &&
		 v->o->progress(v->done, v->total, NULL, v->o->progress_ctx)) {
		v->canceled = 1;
		rc = WSTORE_ECANCELED;
	}
	pthread_mutex_unlock(&v->mu);
	return rc ? wstore__err(rc, "verify interrupted") : 0;
}

/* A file's own damage is a finding; anything else stops the run. */
static void record(struct verify *v, const wstore__file_rec *f, int rc)
{
	const char *msg = rc ? wstore_last_error() : "ok";

	pthread_mutex_lock(&v->mu);
	if (rc == WSTORE_ECORRUPT) {
		if (!v->bad++)
			snprintf(v->first_bad, sizeof(v->first_bad), "%s", msg);
	} else if (rc && rc != WSTORE_ECANCELED) {
		wstore__first_err_keep(&v->err, rc);
	}
	if (v->o->on_file && (rc == 0 || rc == WSTORE_ECORRUPT))
		v->o->on_file(f->path, rc, msg, v->o->on_file_ctx);
	pthread_mutex_unlock(&v->mu);
}

static void *verify_worker(void *arg)
{
	struct verify *v = arg;
	void *buf = wstore__buf_alloc(v->cap);

	for (;;) {
		size_t i;
		int rc;

		pthread_mutex_lock(&v->mu);
		i = v->err.code || v->canceled ? v->m->nfiles : v->next++;
		pthread_mutex_unlock(&v->mu);
		if (i >= v->m->nfiles)
			break;
		if (!buf) {
			record(v, &v->m->files[i],
			       wstore__err(-ENOMEM,
					   "cannot allocate a chunk buffer"));
			break;
		}
		/* /dev/null stands in for a file: only the digest matters */
		rc = wstore__fetch_to_fd(v->s, &v->m->files[i], -1, buf, v->cap,
					 1, verify_progress, v);
		/* damage, or a checkpoint replaced under the verify? */
		if (rc == WSTORE_ECORRUPT)
			rc = wstore__checkpoint_settle(v->ck, &v->m->files[i],
						       rc);
		record(v, &v->m->files[i], rc);
	}
	free(buf);
	return NULL;
}

static int run(struct verify *v)
{
	unsigned n = wstore__jobs(v->o->jobs);
	pthread_t t[256];
	unsigned started = 0;

	if (n > v->m->nfiles)
		n = v->m->nfiles ? (unsigned)v->m->nfiles : 1;
	for (; started < n; started++)
		if (wstore__thread_start(&t[started], verify_worker, v) != 0)
			break;
	if (!started)
		return wstore__err(-EAGAIN, "cannot start verify threads");
	for (unsigned i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	if (v->err.code)
		return wstore__first_err_raise(&v->err);
	if (v->canceled)
		return wstore__err(WSTORE_ECANCELED, "verify interrupted");
	if (v->bad)
		return wstore__err(WSTORE_EVERIFY,
				   "%zu of %zu files damaged; first: %s",
				   v->bad, v->m->nfiles, v->first_bad);
	return 0;
}

int wstore_verify(wstore_store *s, const char *id,
		  const wstore_verify_options *o)
{
	wstore_verify_options oc;
	wstore_checkpoint_options ckopts = WSTORE_CHECKPOINT_OPTIONS_INIT;
	struct verify v = { .s = s, .o = &oc };
	int rc;

	if ((rc = wstore__verify_opts(&oc, o)) < 0)
		return rc;
	/* the lease, the manifest and the guard of a read handle */
	ckopts.what = "verify";
	if ((rc = wstore_checkpoint_open_ext(&v.ck, s, id, &ckopts)) < 0)
		return rc;
	v.m = wstore_checkpoint_manifest(v.ck);
	v.cap = (size_t)wstore__max_chunk(v.m);
	v.total = v.m->total_size;
	pthread_mutex_init(&v.mu, NULL);
	rc = run(&v);
	pthread_mutex_destroy(&v.mu);
	wstore_checkpoint_free(v.ck);
	return rc;
}
