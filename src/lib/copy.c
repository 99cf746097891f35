/*
 * copy.c - copy a checkpoint from one store to another (wstore_copy,
 * wstore.h): a thread exports the checkpoint from the source as a bundle
 * into a pipe, and this thread imports the pipe into the destination, so
 * the bytes stream from store to store through a pipe buffer, every file
 * is hashed on the way in against the source's manifest (once: not on
 * the way out as well, which a bundle to disk does), and the checkpoint keeps
 * its ids and commit id, as a bundle carried by hand would.
 *
 * Either side failing stops the other: the importer closing the read end
 * fails the exporter's next write (EPIPE: the library's threads block
 * signals, so no SIGPIPE is delivered), and the exporter closing the
 * write end early is a truncated bundle to the importer; the exporter's
 * error, the cause, is the one returned.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bundle.h"
#include "error.h"
#include "store.h"
#include "util.h"

/* The pipe's buffer: big enough that a chunk moves in a few handoffs. */
#define PIPE_SIZE (1 << 20)

struct export_job {
	wstore_store *src;
	const char *id;
	int fd; /* the pipe's write end, closed by the thread */
	wstore__first_err err;
};

static void *export_main(void *arg)
{
	struct export_job *j = arg;
	/* the importer checks every byte against the manifest: hashing
	 * them on the way out too would only cost a core */
	int rc = wstore__export(j->src, j->id, j->fd, NULL, NULL, 0);

	if (rc < 0)
		wstore__first_err_keep(&j->err, rc);
	close(j->fd);
	return NULL;
}

/* 1 when dst holds id READY with src's commit id, 0 when not. */
static int already_there(wstore_store *dst, wstore_store *src, const char *id)
{
	wstore_manifest *a = NULL, *b = NULL;
	char ca[WSTORE_COMMIT_LEN + 1], cb[WSTORE_COMMIT_LEN + 1];
	int same = wstore__manifest_read_ready(&a, dst, id) == 0 &&
		   wstore__manifest_read_ready(&b, src, id) == 0 &&
		   wstore_manifest_commit(ca, sizeof(ca), a) == 0 &&
		   wstore_manifest_commit(cb, sizeof(cb), b) == 0 &&
		   strcmp(ca, cb) == 0;

	wstore_manifest_free(a);
	wstore_manifest_free(b);
	wstore__clear_err();
	return same;
}

int wstore_copy(wstore_store *dst, wstore_store *src, const char *id,
		const wstore_import_options *opts)
{
	struct export_job j = { src, id, -1, { 0, "" } };
	char what[600];
	pthread_t t;
	int p[2], rc;

	if (wstore_validate_checkpoint_id(id) < 0)
		return WSTORE_EINVAL;
	if (already_there(dst, src, id))
		return 0;
	if (pipe2(p, O_CLOEXEC) < 0)
		return wstore__errc(-errno, "cannot copy '%s': pipe", id);
	fcntl(p[1], F_SETPIPE_SZ, PIPE_SIZE);
	j.fd = p[1];
	if (wstore__thread_start(&t, export_main, &j) != 0) {
		close(p[0]);
		close(p[1]);
		return wstore__err(-EAGAIN, "cannot copy '%s': no thread", id);
	}
	snprintf(what, sizeof(what), "the copy of '%s' from '%s'", id,
		 src->label ? src->label : "");
	rc = wstore__import_bundle_from(NULL, dst, p[0], opts, what);
	close(p[0]);
	pthread_join(t, NULL);
	/* the exporter's failure is the cause of the importer's, unless
	 * it is the importer having stopped reading */
	if (j.err.code && j.err.code != -EPIPE)
		rc = wstore__first_err_raise(&j.err);
	return rc;
}
