/*
 * stream.c - one file of an upstream commit, fetched on its own for the
 * mirror (mirror.c) and read by every client that asks for it meanwhile:
 * a "file flight".
 *
 * A thread GETs the file with wstore_hub_fetch_file and writes its bytes,
 * as they arrive, to a spool file: an unlinked file (O_TMPFILE) in
 * $TMPDIR, else /var/tmp, never memory.  Readers pread the spool up to
 * the offset written so far, so N clients, from the start or from a
 * Range, cost one upstream GET and the memory of their own response
 * buffers, whatever the file's size.  Nothing is trusted until the end:
 * a reader may take every byte of its response but the last before the
 * file's hash is checked, and the last only after; when the bytes fail
 * their hash every reader's transfer is cut short of its Content-Length
 * (the client sees a broken transfer, never a whole wrong file).  The
 * import of the snapshot takes the verified spool through
 * wstore_hub_options.open_file (mirror.c), hashing it again as it stores
 * it, so the upstream sends each file once.
 *
 * Waits: a reader waits for bytes as long as the flight makes progress
 * and at most STALL_S without any; every wait wakes at least once a
 * second to see the server stopping.  Writers wake readers every
 * SIGNAL_EVERY bytes, on the first bytes and at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "http.h"

/* readers are woken when this many bytes more are in */
#define SIGNAL_EVERY ((uint64_t)256 << 10)
/* a reader gives up after this long without a byte more */
#define STALL_S 60.0

struct wfflight {
	atomic_int refs;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int fd; /* the spool */
	uint64_t size, written, signaled;
	int done, rc; /* rc: 0 verified, else the fetch's error */
	char msg[512];
	/* the spool's write error, named in msg rather than the fetch's
	 * "the caller stopped the transfer" (a full disk is not the
	 * upstream's fault); only the fetch thread writes it */
	char spool_err[256];
	/* what is fetched: copies */
	wstore_hub_options ho;
	char *endpoint, *token, *repo, *path;
	char commit[WSTORE_COMMIT_LEN + 1], oid[41], sha256[65];
	wstore_hub_file file;
	const atomic_int *stopping;
	atomic_uint_fast64_t *bytes;
	void (*on_end)(void *ctx, struct wfflight *ff, int rc);
	void *end_ctx;
};

static const char *spool_dir(void)
{
	const char *dir = getenv("TMPDIR");

	return dir && *dir ? dir : "/var/tmp";
}

static int spool_open(void)
{
	const char *dir = spool_dir();
	char tmpl[4096];
	int fd;

	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
		return fd;
	/* a file system without O_TMPFILE: a named one, unlinked */
	snprintf(tmpl, sizeof(tmpl), "%s/wstore-spool-XXXXXX", dir);
	if ((fd = mkostemp(tmpl, O_CLOEXEC)) >= 0)
		unlink(tmpl);
	return fd;
}

void wfflight_ref(struct wfflight *ff)
{
	atomic_fetch_add(&ff->refs, 1);
}

void wfflight_put(struct wfflight *ff)
{
	if (!ff || atomic_fetch_sub(&ff->refs, 1) != 1)
		return;
	if (ff->fd >= 0)
		close(ff->fd);
	pthread_mutex_destroy(&ff->mu);
	pthread_cond_destroy(&ff->cv);
	free(ff->endpoint);
	free(ff->token);
	free(ff->repo);
	free(ff->path);
	free(ff);
}

static int ff_cancel(uint64_t done, uint64_t total, const char *path, void *ctx)
{
	const struct wfflight *ff = ctx;

	(void)done;
	(void)total;
	(void)path;
	return atomic_load(ff->stopping);
}

/* The upstream's bytes into the spool, readers woken now and then. */
static int ff_sink(void *ctx, const void *data, size_t n)
{
	struct wfflight *ff = ctx;
	const char *p = data;
	uint64_t at = ff->written; /* only this thread writes it */
	size_t left = n;

	while (left > 0) {
		ssize_t w = pwrite(ff->fd, p, left, (off_t)at);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = w < 0 ? errno : EIO;

			snprintf(ff->spool_err, sizeof(ff->spool_err),
				 "cannot write the spool of '%s' (in %s): %s",
				 ff->path, spool_dir(), strerror(e));
			return -e;
		}
		p += w;
		at += (uint64_t)w;
		left -= (size_t)w;
	}
	atomic_fetch_add(ff->bytes, n);
	pthread_mutex_lock(&ff->mu);
	ff->written = at;
	if (ff->signaled == 0 || at - ff->signaled >= SIGNAL_EVERY) {
		ff->signaled = at;
		pthread_cond_broadcast(&ff->cv);
	}
	pthread_mutex_unlock(&ff->mu);
	return atomic_load(ff->stopping) ? WSTORE_ECANCELED : 0;
}

/* tmpfs's f_type (linux/magic.h) */
#define SPOOL_TMPFS_MAGIC 0x01021994

/* The spool's blocks, taken for the whole file before its first byte: a
 * disk too small for the file fails now, before any client has a byte of
 * it, instead of mid-transfer.  On tmpfs the free space is compared
 * instead (no page is touched).  A file system without fallocate (or one
 * that refuses it for another reason) spools as before and fails, if it
 * does, at the write. */
static int ff_reserve(struct wfflight *ff)
{
	struct statfs sf;
	int e;

	if (ff->size == 0)
		return 0;
	/* on tmpfs fallocate allocates and zeroes every page at once: 0.2 s
	 * for 2 GB here, all of it before the first byte */
	if (fstatfs(ff->fd, &sf) == 0 && sf.f_type == SPOOL_TMPFS_MAGIC) {
		if ((uint64_t)sf.f_bavail * (uint64_t)sf.f_bsize >= ff->size)
			return 0;
		e = ENOSPC;
	} else if (fallocate(ff->fd, 0, 0, (off_t)ff->size) == 0) {
		return 0;
	} else {
		e = errno;
	}
	if (e != ENOSPC && e != EDQUOT && e != EFBIG)
		return 0;
	snprintf(ff->spool_err, sizeof(ff->spool_err),
		 "cannot write the spool of '%s' (in %s): %s", ff->path,
		 spool_dir(), strerror(e));
	return -e;
}

static void *ff_run(void *arg)
{
	struct wfflight *ff = arg;
	int rc = ff_reserve(ff);

	if (rc == 0)
		rc = wstore_hub_fetch_file(&ff->ho, ff->commit, &ff->file,
					   ff_sink, ff_cancel, ff);

	pthread_mutex_lock(&ff->mu);
	if (rc < 0 && ff->spool_err[0])
		snprintf(ff->msg, sizeof(ff->msg), "%s", ff->spool_err);
	else if (rc < 0)
		snprintf(ff->msg, sizeof(ff->msg), "upstream: %s",
			 wstore_last_error());
	ff->rc = rc;
	ff->done = 1;
	pthread_cond_broadcast(&ff->cv);
	pthread_mutex_unlock(&ff->mu);
	if (rc < 0)
		fprintf(stderr, "wstore serve: %s\n", ff->msg);
	/* the thread's OpenSSL state (libcurl's, the hashes') freed now:
	 * once on_end has counted the thread out the server may exit
	 * before the thread's own exit would free it */
	OPENSSL_thread_stop();
	ff->on_end(ff->end_ctx, ff, rc);
	wfflight_put(ff);
	return NULL;
}

static int ff_copy(struct wfflight *ff, const struct wfflight_spec *s)
{
	const wstore_hub_file *f = s->file;

	ff->fd = -1;
	if (!(ff->repo = strdup(s->repo)) || !(ff->path = strdup(f->path)) ||
	    (s->endpoint && !(ff->endpoint = strdup(s->endpoint))) ||
	    (s->token && !(ff->token = strdup(s->token))))
		return -ENOMEM;
	snprintf(ff->commit, sizeof(ff->commit), "%s", s->commit);
	snprintf(ff->oid, sizeof(ff->oid), "%s", f->oid);
	snprintf(ff->sha256, sizeof(ff->sha256), "%s",
		 f->sha256 ? f->sha256 : "");
	ff->size = f->size;
	ff->file = (wstore_hub_file){ ff->path, ff->size, ff->oid, ff->sha256 };
	ff->ho = (wstore_hub_options)WSTORE_HUB_OPTIONS_INIT;
	ff->ho.endpoint = ff->endpoint;
	ff->ho.token = ff->token;
	ff->ho.repo = ff->repo;
	return 0;
}

struct wfflight *wfflight_start(const struct wfflight_spec *s, int *err)
{
	struct wfflight *ff = calloc(1, sizeof(*ff));
	pthread_attr_t at;
	pthread_t t;

	*err = -ENOMEM;
	if (!ff)
		return NULL;
	atomic_init(&ff->refs, 2); /* the caller's, the thread's */
	pthread_mutex_init(&ff->mu, NULL);
	wclock_cond_init(&ff->cv);
	ff->stopping = s->stopping;
	ff->bytes = s->bytes;
	ff->on_end = s->on_end;
	ff->end_ctx = s->ctx;
	if (ff_copy(ff, s) < 0 || (ff->fd = spool_open()) < 0) {
		*err = ff->fd < 0 && errno ? -errno : -ENOMEM;
		atomic_store(&ff->refs, 1);
		wfflight_put(ff);
		return NULL;
	}
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &at, ff_run, ff) != 0) {
		pthread_attr_destroy(&at);
		*err = -EAGAIN;
		atomic_store(&ff->refs, 1);
		wfflight_put(ff);
		return NULL;
	}
	pthread_attr_destroy(&at);
	return ff;
}

const wstore_hub_file *wfflight_file(const struct wfflight *ff)
{
	return &ff->file;
}

const char *wfflight_msg(const struct wfflight *ff)
{
	return ff->msg; /* set before done, never after */
}

const char *wfflight_commit(const struct wfflight *ff)
{
	return ff->commit;
}

int wfflight_done(struct wfflight *ff, int *rc)
{
	int d;

	pthread_mutex_lock(&ff->mu);
	d = ff->done;
	*rc = ff->rc;
	pthread_mutex_unlock(&ff->mu);
	return d;
}

int wfflight_wait_done(int *out_fd, struct wfflight *ff)
{
	int rc;

	*out_fd = -1;
	pthread_mutex_lock(&ff->mu);
	while (!ff->done) {
		struct timespec dl = wclock_deadline_in(1000);

		wclock_cond_wait_until(&ff->cv, &ff->mu, &dl);
		/* the fetch itself stops within a second then */
	}
	rc = ff->rc;
	pthread_mutex_unlock(&ff->mu);
	if (rc == 0 && (*out_fd = fcntl(ff->fd, F_DUPFD_CLOEXEC, 0)) < 0)
		rc = -errno;
	return rc;
}

/* How far a response [.., end) may be read: every byte written but the
 * response's last until the file is verified; 0 ready, 1 not yet, or the
 * flight's error; ff->mu held. */
static int readable(const struct wfflight *ff, uint64_t off, uint64_t end,
		    uint64_t *limit)
{
	if (ff->done && ff->rc < 0)
		return ff->rc;
	*limit = 0;
	if (off >= end) /* nothing to read: ready once verified */
		return ff->done ? 0 : 1;
	*limit = ff->done ? end
			  : (ff->written < end - 1 ? ff->written : end - 1);
	return off < *limit ? 0 : 1;
}

int wfflight_wait(struct wfflight *ff, uint64_t off, uint64_t end,
		  double wait_s, char *err, size_t errlen)
{
	double until = wclock_mono_s() + wait_s, stall = 0;
	uint64_t limit = 0, seen = (uint64_t)-1;
	int rc;

	pthread_mutex_lock(&ff->mu);
	while ((rc = readable(ff, off, end, &limit)) == 1) {
		double now = wclock_mono_s();
		struct timespec dl = wclock_deadline_in(1000);

		if (ff->written != seen) {
			seen = ff->written;
			stall = now + STALL_S;
		}
		if (atomic_load(ff->stopping) || now >= until || now >= stall)
			break;
		if (until - now < 1.0)
			dl = wclock_deadline_in(
				(uint64_t)((until - now) * 1000) + 1);
		wclock_cond_wait_until(&ff->cv, &ff->mu, &dl);
	}
	if (rc < 0)
		snprintf(err, errlen, "%s", ff->msg);
	else if (rc == 1)
		snprintf(err, errlen,
			 atomic_load(ff->stopping)
				 ? "the server is stopping"
				 : "the upstream fetch of '%s' is still "
				   "short of byte %llu: retry",
			 ff->path, (unsigned long long)off);
	pthread_mutex_unlock(&ff->mu);
	return rc == 1 ? WSTORE_EBUSY : rc;
}

ssize_t wfflight_read(struct wfflight *ff, char *buf, size_t max, uint64_t off,
		      uint64_t end, char *err, size_t errlen)
{
	uint64_t limit = 0;
	ssize_t got;
	int rc = wfflight_wait(ff, off, end, STALL_S, err, errlen);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&ff->mu);
	readable(ff, off, end, &limit);
	pthread_mutex_unlock(&ff->mu);
	if (limit - off < max)
		max = (size_t)(limit - off);
	do
		got = pread(ff->fd, buf, max, (off_t)off);
	while (got < 0 && errno == EINTR);
	if (got <= 0) {
		snprintf(err, errlen, "cannot read the spool of '%s': %s",
			 ff->path, got < 0 ? strerror(errno) : "short");
		return -EIO;
	}
	return got;
}
