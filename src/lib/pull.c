/*
 * pull.c - write a whole READY checkpoint into a directory, the way an
 * engine expects a Hugging Face download (wstore_pull in wstore/read.h).
 *
 * Safety: every manifest path is validated before anything is written.
 * Below DEST everything is reached through directory fds opened with
 * O_NOFOLLOW | O_DIRECTORY, one component at a time (mkdirat when
 * missing), so a symlink planted in DEST is an error, never a way out.
 * A planted symlink at a file's own name is replaced by the rename, not
 * followed; a directory, FIFO, device or socket there is refused.
 *
 * Each file streams into a partial file next to it (partial.c: a short
 * name that says which import's file it holds and which process wrote
 * it, so two pulls into one directory, even from one process, never share
 * one), through wstore__fetch_to_fd_from (chunk by chunk through the
 * worker's reused buffer, size and SHA-256 checked over the whole file),
 * is fsynced and renamed into place, then the directory is fsynced.  A
 * canceled pull (^C in the CLI, a progress callback) keeps the partial;
 * the next pull of the same file of the same import takes it, hashes the
 * kept chunks again and fetches only the rest.  On any other failure the
 * partial goes.  Partials nobody writes any more are removed when they
 * hold a file not wanted (another import's, a file not in the checkpoint,
 * a file already in place) or under --force.  With --no-verify nothing is
 * resumed: a plain temp file (durable.c) is used and removed on failure.
 * Temp files of a killed pull are removed when the directory is pulled
 * again, once their owner tag proves the writer gone; a file already in
 * DEST is never removed for merely looking like a temp name
 * (temp_owner_dead).
 * Files present with the right size (and digest, when verifying) are
 * skipped, which makes a pull idempotent.
 *
 * Workers take files largest first from a shared cursor; the first error
 * (or a cancel from the progress callback) stops them all.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi.h"
#include "durable.h"
#include "owner.h"
#include "partial.h"
#include "digest.h"
#include "error.h"
#include "util.h"
#include "manifest.h"
#include "readv.h"
#include "store.h"
#include "wstore/read.h"

#define MIN_BUF (4u << 20)

struct pull {
	wstore_store *s;
	wstore_checkpoint *ck;
	const wstore_manifest *m;
	const wstore_pull_options *o;
	const char *dest;
	int dfd;     /* DEST, opened once */
	size_t *sel; /* selected file indices, largest first */
	size_t nsel;
	size_t bufcap;			      /* per-worker chunk buffer size */
	char (*ids)[WSTORE__PART_ID_LEN + 1]; /* partial id of each file */
	char (*sorted)[WSTORE__PART_ID_LEN + 1]; /* the same, sorted */
	pthread_mutex_t lock;			 /* guards everything below */
	size_t next;
	uint64_t done, total;
	wstore__first_err err;
	atomic_int stop;
	atomic_int canceled; /* the progress callback said stop */
};

struct worker {
	struct pull *p;
	const wstore__file_rec *f;
	pthread_t tid;
	char *buf;
};

static void fail(struct pull *p, int rc)
{
	pthread_mutex_lock(&p->lock);
	wstore__first_err_keep(&p->err, rc);
	atomic_store(&p->stop, 1);
	pthread_mutex_unlock(&p->lock);
}

/* Count n more bytes done; the callback may cancel. */
static int add_progress(struct pull *p, uint64_t n, const char *path)
{
	int rc = 0;

	pthread_mutex_lock(&p->lock);
	p->done += n;
	if (p->o->progress &&
	    p->o->progress(p->done, p->total, path, p->o->progress_ctx)) {
		atomic_store(&p->canceled, 1);
		rc = wstore__err(WSTORE_ECANCELED, "pull of '%s' canceled",
				 p->m->checkpoint_id);
	}
	pthread_mutex_unlock(&p->lock);
	if (rc == 0 && atomic_load(&p->stop))
		rc = wstore__err(WSTORE_ECANCELED, "pull of '%s' stopped",
				 p->m->checkpoint_id);
	return rc;
}

static int chunk_progress(uint64_t n, void *ctx)
{
	struct worker *w = ctx;

	return add_progress(w->p, n, w->f->path);
}

/* ---- directories ------------------------------------------------------- */

/* The directory fd holding path's last component (p->dfd or a new fd)
 * and the offset of that component in path: made where missing, reached
 * without following a symlink (nofollow.c). */
static int open_parent(struct pull *p, const char *path, int *out_fd,
		       size_t *out_base)
{
	wstore__nofollow_fail nf = { 0, 0 };
	int fd = wstore__nofollow_parent(p->dfd, path, WSTORE__NOFOLLOW_CREATE,
					 out_base, &nf);
	int n = (int)nf.len;

	*out_fd = fd;
	if (fd >= 0)
		return 0;
	if (nf.creating)
		return wstore__errc(fd,
				    "cannot create directory '%.*s' in '%s'", n,
				    path, p->dest);
	if (fd == -ELOOP || fd == -ENOTDIR)
		return wstore__err(fd,
				   "'%.*s' in '%s' is a symlink or not "
				   "a directory; refusing to follow it",
				   n, path, p->dest);
	return wstore__errc(fd, "cannot open directory '%.*s' in '%s'", n, path,
			    p->dest);
}

/*
 * Whether name, met in a directory being pulled into, is a temp file that
 * a pull provably made and that nobody will finish, so that it may go.
 * The one place that decides it.  Only a name of the current form
 * (".wstore-tmp-<pid>-<owner tag>-<n>", durable.c) qualifies, and only
 * when its owner tag (boot, PID namespace, pid, start time: owner.h)
 * proves the writer gone; a writer in another PID namespace or on another
 * machine is unknown and its file stays.  An older pid-only name proves
 * neither who made it nor that its writer is gone (a file of the user's
 * may merely look like one, the pid may be reused or another namespace's):
 * it stays too.
 */
static int temp_owner_dead(const char *name)
{
	static const char dec[] = "0123456789", hex[] = "0123456789abcdef";
	const char *p = name + strlen(WSTORE__TMP_TAG);
	size_t n;

	if (strncmp(name, WSTORE__TMP_TAG, strlen(WSTORE__TMP_TAG)) != 0)
		return 0;
	/* exactly <pid>-<owner tag>-<n>: a name without a tag is kept */
	if (!(n = strspn(p, dec)) || p[n] != '-')
		return 0;
	p += n + 1;
	if (strspn(p, hex) != WSTORE__OWNER_TAG_LEN ||
	    p[WSTORE__OWNER_TAG_LEN] != '-')
		return 0;
	p += WSTORE__OWNER_TAG_LEN + 1;
	if (!(n = strspn(p, dec)) || p[n])
		return 0;
	return wstore__tmp_writer_state(name, 0) == WSTORE__TMP_DEAD;
}

/* Remove temp files left in this directory by pulls known to be dead. */
static void remove_stale_temps(int pfd)
{
	struct dirent *de;
	/* a new open file description: a dup() would share the read offset
	 * of pfd, left at the end by the previous scan of this directory */
	int fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (temp_owner_dead(de->d_name))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
}

/* ---- one file ---------------------------------------------------------- */

/* Whether a good copy is present: a regular file (not a symlink) of the
 * right size and, when verifying, digest. */
static int already_present(struct worker *w, int pfd, const char *base)
{
	const wstore__file_rec *f = w->f;
	wstore__sha256 *h;
	struct stat st;
	char hex[65];
	ssize_t r;
	int fd, same = 0;

	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(st.st_mode) || (uint64_t)st.st_size != f->size)
		return 0;
	if (w->p->o->no_verify)
		return 1;
	fd = openat(pfd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !(h = wstore__sha256_new())) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((r = read(fd, w->buf, w->p->bufcap)) > 0)
		wstore__sha256_update(h, w->buf, (size_t)r);
	if (r == 0) {
		wstore__sha256_hex(h, hex);
		same = strcmp(hex, f->sha256) == 0;
	}
	wstore__sha256_free(h);
	close(fd);
	return same;
}

/* --no-verify: a file the store keeps whole cloned or copied in the
 * kernel (wstore__fetch_whole), else streamed into a temp file under pfd
 * (space allocated first), synced and renamed to base (durable.c);
 * nothing is kept on failure, nothing resumed. */
static int write_unverified(struct worker *w, int pfd, const char *base)
{
	const wstore__file_rec *f = w->f;
	wstore__durable d = { .fd = -1 };
	int rc;

	if ((rc = wstore__durable_open(&d, pfd, 0644, f->path)) < 0)
		return rc;
	rc = wstore__fetch_whole(w->p->s, w->p->ck, f, d.fd, -1, 0, NULL,
				 w->buf, w->p->bufcap, chunk_progress, w, NULL);
	if (rc == 1)
		rc = 0;
	else if (rc == 0 && f->size &&
		 fallocate(d.fd, 0, 0, (off_t)f->size) < 0 && errno == ENOSPC)
		rc = wstore__errc(-ENOSPC,
				  "file '%s': cannot allocate %" PRIu64
				  " bytes in '%s'",
				  f->path, f->size, w->p->dest);
	else if (rc == 0)
		rc = wstore__fetch_to_fd(w->p->s, f, d.fd, w->buf, w->p->bufcap,
					 0, chunk_progress, w);
	/* an unhashed file is judged by the checkpoint's guard */
	if (rc != WSTORE_ECANCELED)
		rc = wstore__checkpoint_settle(w->p->ck, f, rc);
	if (rc == 0)
		return wstore__durable_commit(&d, base, f->path);
	wstore__durable_abort(&d);
	return rc;
}

static int cmp_id(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* Whether a partial's id is that of a file of the checkpoint pulled. */
static int id_wanted(const char *id, void *ctx)
{
	struct pull *p = ctx;

	return bsearch(id, p->sorted, p->m->nfiles, sizeof(*p->sorted),
		       cmp_id) != NULL;
}

static const char *file_id(struct worker *w)
{
	return w->p->ids[w->f - w->p->m->files];
}

/* Fill the partial from what it holds on: the kept prefix hashed again,
 * then what it lacks: cloned when the store keeps the file whole and
 * nothing is kept (wstore__fetch_whole, read back for the digest), else
 * the chunks it lacks streamed.  A kept prefix that spoils the digest (a
 * crash that lost data the size still counts) costs one whole fetch. */
static int fill_partial(struct worker *w, wstore__partial *pp,
			wstore__sha256 *h)
{
	const wstore__file_rec *f = w->f;
	uint64_t first = 0, kept = 0;
	int rc = 0;

	if (pp->taken)
		rc = wstore__partial_prefix(pp, f, h, w->buf, w->p->bufcap,
					    &first, &kept);
	if (rc == 0 && kept)
		rc = add_progress(w->p, kept, f->path);
	if (rc == 0) {
		rc = wstore__fetch_whole(w->p->s, w->p->ck, f, pp->fd, pp->fd,
					 kept, h, w->buf, w->p->bufcap,
					 chunk_progress, w, NULL);
		if (rc == 1)
			return 0;
	}
	if (rc == 0 && f->size > kept &&
	    fallocate(pp->fd, FALLOC_FL_KEEP_SIZE, (off_t)kept,
		      (off_t)(f->size - kept)) < 0 &&
	    errno == ENOSPC)
		return wstore__errc(-ENOSPC,
				    "file '%s': cannot allocate %" PRIu64
				    " bytes in '%s'",
				    f->path, f->size - kept, w->p->dest);
	if (rc == 0)
		rc = wstore__fetch_to_fd_from(w->p->s, f, pp->fd, w->buf,
					      w->p->bufcap, first, h,
					      chunk_progress, w);
	if (rc == WSTORE_ECORRUPT && kept) {
		wstore__sha256_reset(h);
		rc = wstore__partial_reset(pp, f->path);
		if (rc == 0)
			rc = wstore__fetch_to_fd_from(w->p->s, f, pp->fd,
						      w->buf, w->p->bufcap, 0,
						      h, chunk_progress, w);
	}
	return rc;
}

/*
 * Stream f into its partial under pfd (partial.h: one an earlier pull
 * left is taken and resumed), check size and SHA-256 of the whole file,
 * sync it and rename it to base (durable.c).  Canceled, the partial
 * stays for the next pull; on any other failure it goes.
 */
static int write_file(struct worker *w, int pfd, const char *base)
{
	const wstore__file_rec *f = w->f;
	wstore__partial pp;
	wstore__sha256 *h;
	int rc;

	if ((rc = wstore__check_target(pfd, base, f->path)) < 0)
		return rc;
	if (w->p->o->no_verify)
		return write_unverified(w, pfd, base);
	if (!(h = wstore__sha256_new()))
		return wstore__errc(-ENOMEM, "cannot hash '%s'", f->path);
	rc = wstore__partial_open(&pp, pfd, file_id(w), id_wanted, w->p,
				  w->p->o->force, f->path);
	if (rc < 0) {
		wstore__sha256_free(h);
		return rc;
	}
	rc = fill_partial(w, &pp, h);
	wstore__sha256_free(h);
	/* before the rename: a hashed file that matches is the one opened,
	 * whichever import wrote it; a mismatch or a missing chunk is
	 * judged by the checkpoint's guard (generation.c) */
	if (rc < 0 && rc != WSTORE_ECANCELED)
		rc = wstore__checkpoint_settle(w->p->ck, f, rc);
	if (rc == 0)
		return wstore__partial_commit(&pp, base, f->path);
	/* kept when the caller canceled, not when a failure elsewhere
	 * stopped this worker */
	if (rc == WSTORE_ECANCELED && atomic_load(&w->p->canceled))
		wstore__partial_keep(&pp);
	else
		wstore__partial_drop(&pp);
	return rc;
}

static int pull_file(struct worker *w)
{
	const wstore__file_rec *f = w->f;
	const char *base;
	size_t at;
	int pfd, rc;

	if ((rc = open_parent(w->p, f->path, &pfd, &at)) < 0)
		return rc;
	base = f->path + at;
	if (!w->p->o->force && already_present(w, pfd, base)) {
		wstore__partial_sweep(pfd, file_id(w), id_wanted, w->p);
		rc = add_progress(w->p, f->size, f->path);
	} else {
		remove_stale_temps(pfd);
		rc = write_file(w, pfd, base);
	}
	if (pfd != w->p->dfd)
		close(pfd);
	return rc;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct pull *p = w->p;
	size_t i;
	int rc;

	if (!(w->buf = wstore__store_buf_alloc(p->s, p->bufcap))) {
		fail(p, wstore__errc(-ENOMEM,
				     "cannot allocate a %zu-byte "
				     "buffer",
				     p->bufcap));
		return NULL;
	}
	for (;;) {
		pthread_mutex_lock(&p->lock);
		i = p->next < p->nsel && !atomic_load(&p->stop) ? p->next++
								: SIZE_MAX;
		pthread_mutex_unlock(&p->lock);
		if (i == SIZE_MAX)
			break;
		w->f = &p->m->files[p->sel[i]];
		if ((rc = pull_file(w)) < 0) {
			fail(p, rc);
			break;
		}
	}
	wstore__store_buf_free(w->p->s, w->buf);
	w->buf = NULL;
	return NULL;
}

/* ---- the whole pull ---------------------------------------------------- */

static int matches_any(const char *const *globs, const char *path)
{
	for (; globs && *globs; globs++)
		if (fnmatch(*globs, path, 0) == 0)
			return 1;
	return 0;
}

static int selected(const wstore_pull_options *o, const char *path)
{
	if (o->include && o->include[0] && !matches_any(o->include, path))
		return 0;
	return !matches_any(o->exclude, path);
}

static int cmp_size_desc(const void *a, const void *b, void *ctx)
{
	const wstore_manifest *m = ctx;
	uint64_t x = m->files[*(const size_t *)a].size;
	uint64_t y = m->files[*(const size_t *)b].size;

	return x == y ? 0 : x > y ? -1 : 1;
}

/* Validate every path and chunk list, then pick the files to pull. */
static int plan(struct pull *p)
{
	const wstore_manifest *m = p->m;
	uint64_t len;

	size_t nf = m->nfiles ? m->nfiles : 1;

	p->ids = malloc(nf * sizeof(*p->ids));
	p->sorted = malloc(nf * sizeof(*p->sorted));
	if (!(p->sel = malloc(nf * sizeof(size_t))) || !p->ids || !p->sorted)
		return wstore__errc(-ENOMEM, "cannot plan pull");
	for (size_t i = 0; i < m->nfiles; i++)
		wstore__partial_ident(p->ids[i],
				      wstore__checkpoint_generation(p->ck), m,
				      &m->files[i]);
	memcpy(p->sorted, p->ids, m->nfiles * sizeof(*p->ids));
	qsort(p->sorted, m->nfiles, sizeof(*p->sorted), cmp_id);
	for (size_t i = 0; i < m->nfiles; i++) {
		const wstore__file_rec *f = &m->files[i];
		int rc;

		if (wstore_validate_path(f->path) < 0)
			return wstore__err(WSTORE_ECORRUPT,
					   "checkpoint '%s': "
					   "refusing unsafe path: %s",
					   m->checkpoint_id,
					   wstore_last_error());
		if (!selected(p->o, f->path))
			continue;
		if (f->nchunks &&
		    (rc = wstore__chunk_len(&len, f, f->nchunks - 1)) < 0)
			return rc;
		p->sel[p->nsel++] = i;
		p->total += f->size;
	}
	qsort_r(p->sel, p->nsel, sizeof(size_t), cmp_size_desc, (void *)m);
	len = wstore__max_chunk(m);
	p->bufcap = len > MIN_BUF ? (size_t)len : MIN_BUF;
	return 0;
}

/* mkdir -p for DEST itself (the caller's own path, symlinks allowed). */
static int make_dest(const char *dest)
{
	char *copy = strdup(dest), *s;
	int rc = 0;

	if (!copy)
		return -ENOMEM;
	for (s = copy + 1; rc == 0; s++) {
		if (*s && *s != '/')
			continue;
		char c = *s;

		*s = '\0';
		if (mkdir(copy, 0755) < 0 && errno != EEXIST)
			rc = wstore__errc(-errno, "cannot create '%s'", copy);
		*s = c;
		if (!c)
			break;
	}
	free(copy);
	return rc;
}

static int run_workers(struct pull *p)
{
	unsigned n = wstore__jobs(p->o->jobs), started = 0;
	struct worker *w;

	if (n > p->nsel)
		n = p->nsel ? (unsigned)p->nsel : 1;
	if (!(w = calloc(n, sizeof(*w))))
		return wstore__errc(-ENOMEM, "cannot start pull workers");
	for (unsigned i = 0; i < n; i++) {
		w[i].p = p;
		if (i && wstore__thread_start(&w[i].tid, worker_main, &w[i]))
			break;
		started++;
	}
	worker_main(&w[0]);
	for (unsigned i = 1; i < started; i++)
		pthread_join(w[i].tid, NULL);
	free(w);
	if (p->err.code)
		return wstore__first_err_raise(&p->err);
	return 0;
}

int wstore_pull(wstore_store *store, const char *id, const char *dest,
		const wstore_pull_options *opts)
{
	wstore_pull_options oc;
	struct pull p = { .s = store, .o = &oc, .dfd = -1 };
	wstore_checkpoint *ck;
	wstore_checkpoint_options ckopts = WSTORE_CHECKPOINT_OPTIONS_INIT;
	int rc;

	if ((rc = wstore__pull_opts(&oc, opts)) < 0)
		return rc;
	if (!dest || !*dest)
		return wstore__err(WSTORE_EINVAL, "pull needs a destination "
						  "directory");
	ckopts.what = "pull";
	if ((rc = wstore_checkpoint_open_ext(&ck, store, id, &ckopts)) < 0)
		return rc;
	p.ck = ck;
	p.m = wstore_checkpoint_manifest(ck);
	p.dest = dest;
	pthread_mutex_init(&p.lock, NULL);
	rc = plan(&p);
	if (rc == 0)
		rc = make_dest(dest);
	if (rc == 0 &&
	    (p.dfd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		rc = wstore__errc(-errno, "cannot open '%s'", dest);
	if (rc == 0 && p.o->progress)
		p.o->progress(0, p.total, "", p.o->progress_ctx);
	if (rc == 0)
		rc = run_workers(&p);
	if (p.dfd >= 0)
		close(p.dfd);
	pthread_mutex_destroy(&p.lock);
	free(p.sel);
	free(p.ids);
	free(p.sorted);
	wstore_checkpoint_free(ck);
	return rc;
}
