/*
 * mirror.c - `wstore serve --upstream URL`: a pull-through mirror of a Hub
 * server.  What the mirror serves is what the upstream names:
 *
 *  - a commit id is served from the checkpoint imported at that commit
 *    (wstore_import_hub records the upstream's commit as the revision,
 *    and wstore_manifest_commit reports it), imported on first request;
 *  - a branch or tag is served at the commit the upstream last named for
 *    it.  That is kept durably in the store (wstore_ref_write: one record
 *    per repository) and in a bounded table here; once it is older than
 *    --upstream-refresh seconds the next request asks the upstream again
 *    in the background, while the known commit keeps serving.  A new
 *    commit is imported, and the branch moves to it only once it is
 *    READY; a request for another revision never touches it.  Upstream
 *    down: the last known commit keeps serving, also after a restart
 *    (the record is in the store).
 *
 * Fetches run in threads of their own ("flights"), one per (repository,
 * revision) however many ask: a request that has nothing to serve yet
 * waits for its flight at most the header timeout, then gets 503 with
 * Retry-After (the flight goes on), so a slow upstream never holds
 * connection slots for longer than a client that has not sent its
 * headers may.  At most FLIGHTS_MAX run at once.
 *
 * Stream-through: a flight imports the whole snapshot with
 * wstore_import_hub, but takes the listing from it (on_list) and hands
 * it each file's bytes itself (open_file): every file comes through a
 * file flight (stream.c), one upstream GET spooled to disk, which
 * clients asking for that file meanwhile read as it arrives
 * (wmirror_stream, files.c).  So a cold file waits for the listing and
 * its own first bytes, never for the rest of the model; the import
 * re-hashes each spool as it stores it, and the snapshot is READY once
 * all are in.  A file failing its hash cuts its readers (stream.c),
 * dooms the flight (the import is canceled through its progress
 * callback and open_file) and the next request starts afresh.  The file
 * flights of a flight stay (with their spools) until its import ends,
 * so a file verified before the snapshot is READY is served from its
 * spool; then from the store.  At most FILE_FLIGHTS_MAX file flights
 * fetch at once: a client beyond gets 503, the import waits for a place.
 *
 * Names: a repository goes upstream only when it is a Hub repository id
 * (ORG/NAME, each part [A-Za-z0-9._-], as the Hub allows) and matches an
 * --upstream-allow pattern (fnmatch; none given: every one).  The name
 * matched is the one received, percent-decoded (parse.c), and checked
 * canonical first: a name that could mean something else once pasted
 * into a URL ("org/x?-public") is refused, never matched.
 *
 * The state here is bounded (REFS_MAX refs the upstream named, in a hash
 * table, dropped after REF_IDLE_S unused or, when full, the least
 * recently used of a bucket; they stay in the store) and no lock is held
 * while the store or the upstream is asked.  When the server stops,
 * flights are canceled through their progress callbacks (asked about
 * once a second also while no byte comes) and wmirror_free waits for
 * their threads.
 */
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "http.h"

#define FLIGHTS_MAX 64
/* files fetched from the upstream at once (stream.c) */
#define FILE_FLIGHTS_MAX 16
#define REFS_MAX 4096
#define BUCKETS 256
#define REF_IDLE_S 3600.0
/* Hub repository ids: each part at most this long */
#define NAME_PART_MAX 96

/* A file the upstream lists (a copy of the import's on_list). */
struct fent {
	char *path;
	uint64_t size;
	char oid[41], sha256[65];
};

struct flight {
	struct flight *next;
	char *repo, *rev; /* rev: a branch, tag or 40-hex commit */
	int refs;	  /* the thread, each waiter and each file flight */
	int done, rc, linked;
	char *id; /* the checkpoint, when rc is 0 */
	char msg[512];
	struct wmirror *m;
	/* once the upstream listed the commit (on_list): its files, sorted
	 * by path, and the flight of each file fetched (NULL: none yet, or
	 * it failed); dropped when the import ends */
	int listed;
	char commit[WSTORE_COMMIT_LEN + 1];
	size_t nfiles;
	struct fent *files;
	struct wfflight **ff;
	/* a file failed: the import is canceled, the file's error */
	int doomed;
	char doom_msg[512];
};

/* What the mirror knows of a branch or tag. */
struct ref {
	struct ref *next;
	char *repo, *rev;
	char commit[WSTORE_COMMIT_LEN + 1]; /* "" unknown */
	int64_t asked_ms; /* when the upstream named it (wall clock) */
	double tried;	  /* when it was last asked (monotonic), or 0 */
	double used;	  /* last request (monotonic) */
};

struct wmirror {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	const struct wserve_options *o;
	wstore_store *s;
	double wait_s, refresh_s;
	struct flight *flights[BUCKETS];
	struct ref *refs[BUCKETS];
	unsigned nflights, nrefs, threads, nfiles_running;
	atomic_uint_fast64_t hits, misses, fetches, failures, bytes, busy;
	atomic_uint_fast64_t file_fetches, file_failures, streamed;
	atomic_uint_fast64_t refresh_same, refresh_moved, refresh_failed;
	atomic_uint_fast64_t upstream_requests;
	atomic_int stopping;
};

/* why this thread's last name failed upstream ("" when it did not), and
 * how the mirror answered it (for the access log) */
static _Thread_local char mirror_error[512];
static _Thread_local const char *mirror_outcome;

const char *wmirror_error(void)
{
	return mirror_error;
}

void wmirror_error_clear(void)
{
	mirror_error[0] = '\0';
	mirror_outcome = NULL;
}

const char *wmirror_outcome(void)
{
	return mirror_outcome;
}

static unsigned bucket(const char *repo, const char *rev)
{
	uint32_t h = 2166136261u;

	for (const char *p = repo; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	h = (h ^ 0xffu) * 16777619u;
	for (const char *p = rev; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h % BUCKETS;
}

/* ---- names ---------------------------------------------------------------
 */

static int part_ok(const char *s, size_t n)
{
	if (n == 0 || n > NAME_PART_MAX || s[0] == '.' || s[0] == '-' ||
	    s[n - 1] == '.' || s[n - 1] == '-')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return 0;
		if (i && (c == '.' || c == '-') && s[i - 1] == c)
			return 0;
	}
	return 1;
}

int wmirror_repo_canonical(const char *repo)
{
	const char *slash = strchr(repo, '/');

	return slash && !strchr(slash + 1, '/') &&
	       part_ok(repo, (size_t)(slash - repo)) &&
	       part_ok(slash + 1, strlen(slash + 1));
}

/* A revision that may go upstream: UTF-8 (checked by the caller), no
 * control character, at most 255 bytes. */
static int rev_ok(const char *rev)
{
	if (strlen(rev) > 255)
		return 0;
	for (const unsigned char *p = (const unsigned char *)rev; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return 0;
	return 1;
}

static int allowed(const struct wmirror *m, const char *repo)
{
	const char *const *a = m->o->upstream_allow;

	if (!wmirror_repo_canonical(repo))
		return 0;
	if (!a || !a[0])
		return 1;
	for (; *a; a++)
		if (fnmatch(*a, repo, FNM_PERIOD) == 0)
			return 1;
	return 0;
}

/* ---- the table of refs ---------------------------------------------------
 */

static void ref_free(struct ref *r)
{
	free(r->repo);
	free(r->rev);
	free(r);
}

/* Drop the least recently used entry of bucket b (the table is full);
 * m->mu held. */
static void ref_evict(struct wmirror *m, unsigned b)
{
	struct ref **lru = NULL;

	for (struct ref **p = &m->refs[b]; *p; p = &(*p)->next)
		if (!lru || (*p)->used < (*lru)->used)
			lru = p;
	if (lru) {
		struct ref *r = *lru;

		*lru = r->next;
		ref_free(r);
		m->nrefs--;
	}
}

/* The entry of (repo, rev), made when missing (NULL when out of memory,
 * or the table is full and the bucket empty); m->mu held. */
static struct ref *ref_get(struct wmirror *m, const char *repo, const char *rev,
			   int make)
{
	unsigned b = bucket(repo, rev);
	struct ref *r;

	for (r = m->refs[b]; r; r = r->next)
		if (!strcmp(r->repo, repo) && !strcmp(r->rev, rev))
			return r;
	if (make && m->nrefs >= REFS_MAX)
		ref_evict(m, b);
	if (!make || m->nrefs >= REFS_MAX || !(r = calloc(1, sizeof(*r))))
		return NULL;
	if (!(r->repo = strdup(repo)) || !(r->rev = strdup(rev))) {
		ref_free(r);
		return NULL;
	}
	r->next = m->refs[b];
	m->refs[b] = r;
	m->nrefs++;
	return r;
}

void wmirror_sweep(struct wmirror *m)
{
	double now = wclock_mono_s();

	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	for (unsigned b = 0; b < BUCKETS; b++)
		for (struct ref **p = &m->refs[b]; *p;) {
			struct ref *r = *p;

			if (now - r->used < REF_IDLE_S) {
				p = &r->next;
				continue;
			}
			*p = r->next;
			ref_free(r);
			m->nrefs--;
		}
	pthread_mutex_unlock(&m->mu);
}

/* ---- lifecycle -----------------------------------------------------------
 */

struct wmirror *wmirror_new(const struct wserve_options *o, wstore_store *s,
			    unsigned header_timeout)
{
	struct wmirror *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	pthread_mutex_init(&m->mu, NULL);
	wclock_cond_init(&m->cv);
	atomic_init(&m->stopping, 0);
	m->o = o;
	m->s = s;
	m->wait_s = header_timeout ? header_timeout : 10;
	m->refresh_s = o->upstream_refresh > 0 ? o->upstream_refresh : 60;
	return m;
}

void wmirror_stop(struct wmirror *m)
{
	if (!m)
		return;
	atomic_store(&m->stopping, 1);
	pthread_mutex_lock(&m->mu);
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
}

void wmirror_free(struct wmirror *m)
{
	if (!m)
		return;
	wmirror_stop(m);
	/* flights cancel within about a second: their threads use the
	 * store, which the caller frees next */
	pthread_mutex_lock(&m->mu);
	while (m->threads)
		pthread_cond_wait(&m->cv, &m->mu);
	pthread_mutex_unlock(&m->mu);
	for (unsigned b = 0; b < BUCKETS; b++)
		while (m->refs[b]) {
			struct ref *r = m->refs[b];

			m->refs[b] = r->next;
			ref_free(r);
		}
	pthread_mutex_destroy(&m->mu);
	pthread_cond_destroy(&m->cv);
	free(m);
}

void wmirror_hit(struct wmirror *m)
{
	if (!m)
		return;
	atomic_fetch_add(&m->hits, 1);
	mirror_outcome = "hit";
}

/* ---- flights -------------------------------------------------------------
 */

/* progress of an import or a question: the server stopping, or a file
 * of the flight failing its hash, cancels it (the bytes taken from the
 * upstream are counted by the file flights) */
struct upstream_bytes {
	uint64_t last;
	struct wmirror *m;
	struct flight *f;
};

static int on_progress(uint64_t done, uint64_t total, const char *path,
		       void *ctx)
{
	struct upstream_bytes *t = ctx;
	int doomed = 0;

	(void)done;
	(void)total;
	(void)path;
	if (t->f) {
		pthread_mutex_lock(&t->m->mu);
		doomed = t->f->doomed;
		pthread_mutex_unlock(&t->m->mu);
	}
	return atomic_load(&t->m->stopping) || doomed;
}

/* ---- file flights (stream.c) ---------------------------------------------
 */

static int cmp_fent(const void *key, const void *e)
{
	return strcmp(key, ((const struct fent *)e)->path);
}

/* The index of path in f's listing, or -1; m->mu held. */
static ptrdiff_t fent_find(const struct flight *f, const char *path)
{
	const struct fent *e;

	if (!f->files)
		return -1;
	e = bsearch(path, f->files, f->nfiles, sizeof(*f->files), cmp_fent);
	return e ? e - f->files : -1;
}

static void flight_put(struct flight *f);

/* A file flight of f ended (its thread): a failure dooms the import of
 * f (canceled; the next request starts afresh) and leaves the file's
 * place empty. */
static void file_ended(void *ctx, struct wfflight *ff, int rc)
{
	struct flight *f = ctx;
	struct wmirror *m = f->m;
	struct wfflight *drop = NULL;
	ptrdiff_t i;

	pthread_mutex_lock(&m->mu);
	m->nfiles_running--;
	m->threads--;
	if (rc < 0) {
		atomic_fetch_add(&m->file_failures, 1);
		if (!f->doomed)
			snprintf(f->doom_msg, sizeof(f->doom_msg), "%s",
				 wfflight_msg(ff));
		f->doomed = 1;
		i = fent_find(f, wfflight_file(ff)->path);
		if (i >= 0 && f->ff && f->ff[i] == ff) {
			drop = ff;
			f->ff[i] = NULL;
		}
	}
	pthread_cond_broadcast(&m->cv);
	flight_put(f);
	pthread_mutex_unlock(&m->mu);
	wfflight_put(drop);
}

/* Start the flight of file i of f; m->mu held.  0, or an error. */
static int file_start(struct flight *f, size_t i)
{
	struct wmirror *m = f->m;
	const struct fent *e = &f->files[i];
	wstore_hub_file hf = { e->path, e->size, e->oid, e->sha256 };
	struct wfflight_spec sp = { m->o->upstream,
				    m->o->upstream_token,
				    f->repo,
				    f->commit,
				    &hf,
				    &m->stopping,
				    &m->bytes,
				    file_ended,
				    f };
	int err = 0;

	if (!(f->ff[i] = wfflight_start(&sp, &err)))
		return err;
	f->refs++;
	m->nfiles_running++;
	m->threads++;
	atomic_fetch_add(&m->file_fetches, 1);
	return 0;
}

/* The import's listing (wstore_hub_options.on_list): kept for the
 * requests that stream a file meanwhile. */
static int on_list(void *ctx, const char *commit, size_t n,
		   const wstore_hub_file *files)
{
	struct flight *f = ctx;
	struct fent *fs = calloc(n ? n : 1, sizeof(*fs));
	struct wfflight **ff = calloc(n ? n : 1, sizeof(*ff));
	size_t k = 0;

	for (; fs && ff && k < n; k++) {
		if (!(fs[k].path = strdup(files[k].path)))
			break;
		fs[k].size = files[k].size;
		snprintf(fs[k].oid, sizeof(fs[k].oid), "%s", files[k].oid);
		snprintf(fs[k].sha256, sizeof(fs[k].sha256), "%s",
			 files[k].sha256 ? files[k].sha256 : "");
	}
	if (!fs || !ff || k < n) {
		for (size_t j = 0; fs && j < k; j++)
			free(fs[j].path);
		free(fs);
		free(ff);
		return -ENOMEM;
	}
	pthread_mutex_lock(&f->m->mu);
	snprintf(f->commit, sizeof(f->commit), "%s", commit);
	f->files = fs;
	f->ff = ff;
	f->nfiles = n;
	f->listed = 1;
	pthread_cond_broadcast(&f->m->cv);
	pthread_mutex_unlock(&f->m->mu);
	return 0;
}

/* The flight of file i of f, started when there is none (waiting for a
 * free place, as long as the import is not canceled); m->mu held. */
static struct wfflight *file_join(struct flight *f, size_t i, int *rc)
{
	struct wmirror *m = f->m;

	while (!f->ff[i]) {
		struct timespec dl = wclock_deadline_in(1000);

		if (atomic_load(&m->stopping) || f->doomed) {
			*rc = WSTORE_ECANCELED;
			return NULL;
		}
		if (m->nfiles_running < FILE_FLIGHTS_MAX) {
			if ((*rc = file_start(f, i)) < 0)
				return NULL;
			break;
		}
		wclock_cond_wait_until(&m->cv, &m->mu, &dl);
	}
	wfflight_ref(f->ff[i]);
	return f->ff[i];
}

/* The import asks for a file (wstore_hub_options.open_file): the
 * verified spool of its flight, which clients may be reading. */
static int open_file(void *ctx, const wstore_hub_file *file, int *out_fd)
{
	struct flight *f = ctx;
	struct wmirror *m = f->m;
	struct wfflight *ff = NULL;
	char err[512];
	ptrdiff_t i;
	int rc = 1;

	pthread_mutex_lock(&m->mu);
	if ((i = fent_find(f, file->path)) >= 0)
		ff = file_join(f, (size_t)i, &rc);
	pthread_mutex_unlock(&m->mu);
	if (!ff)
		return rc;
	while ((rc = wfflight_wait(ff, file->size, file->size, 1.0, err,
				   sizeof(err))) == WSTORE_EBUSY) {
		int doomed;

		pthread_mutex_lock(&m->mu);
		doomed = f->doomed;
		pthread_mutex_unlock(&m->mu);
		if (doomed || atomic_load(&m->stopping)) {
			rc = WSTORE_ECANCELED;
			break;
		}
	}
	if (rc == 0)
		rc = wfflight_wait_done(out_fd, ff);
	wfflight_put(ff);
	return rc;
}

static void hub_options(wstore_hub_options *ho, const struct wmirror *m,
			const char *repo, const char *rev)
{
	ho->endpoint = m->o->upstream;
	ho->token = m->o->upstream_token;
	ho->repo = repo;
	ho->revision = rev;
}

/* Import commit of f's repository (the checkpoint id into f->id). */
static int import_commit(struct flight *f, const char *commit)
{
	wstore_import_options io = WSTORE_IMPORT_OPTIONS_INIT;
	wstore_hub_options ho = WSTORE_HUB_OPTIONS_INIT;
	struct upstream_bytes t = { 0, f->m, NULL };
	int rc;

	t.f = f;
	io.model_id = f->repo;
	io.progress = on_progress;
	io.progress_ctx = &t;
	hub_options(&ho, f->m, f->repo, commit);
	/* every file through a file flight: clients asking for it
	 * meanwhile read the same transfer (wmirror_stream) */
	ho.on_list = on_list;
	ho.open_file = open_file;
	ho.ctx = f;
	atomic_fetch_add(&f->m->fetches, 1);
	rc = wstore_import_hub(&f->id, f->m->s, &io, &ho);
	if (rc < 0) {
		atomic_fetch_add(&f->m->failures, 1);
		snprintf(f->msg, sizeof(f->msg), "upstream: %s",
			 wstore_last_error());
		free(f->id);
		f->id = NULL;
	}
	return rc;
}

/* The commit the upstream names for f's branch or tag. */
static int ask_upstream(struct flight *f, char commit[WSTORE_COMMIT_LEN + 1])
{
	wstore_hub_options ho = WSTORE_HUB_OPTIONS_INIT;
	struct upstream_bytes t = { 0, f->m, NULL };
	int rc;

	hub_options(&ho, f->m, f->repo, f->rev);
	atomic_fetch_add(&f->m->upstream_requests, 1);
	rc = wstore_hub_commit(commit, WSTORE_COMMIT_LEN + 1, &ho, on_progress,
			       &t);
	if (rc < 0) {
		atomic_fetch_add(&f->m->refresh_failed, 1);
		snprintf(f->msg, sizeof(f->msg), "upstream: %s",
			 wstore_last_error());
	}
	return rc;
}

/* f's branch or tag names commit, READY in the store: in the table and
 * the store's record; counted as a refresh that moved it or not. */
static void record(struct flight *f, const char *commit)
{
	struct wmirror *m = f->m;
	int64_t now = wclock_wall_ms();
	int moved = 0, known = 0;
	struct ref *r;

	pthread_mutex_lock(&m->mu);
	if ((r = ref_get(m, f->repo, f->rev, 1))) {
		known = r->commit[0] != '\0';
		moved = strcmp(r->commit, commit) != 0;
		memcpy(r->commit, commit, WSTORE_COMMIT_LEN + 1);
		r->asked_ms = now;
		r->used = wclock_mono_s();
	}
	pthread_mutex_unlock(&m->mu);
	if (known)
		atomic_fetch_add(moved ? &m->refresh_moved : &m->refresh_same,
				 1);
	if (wstore_ref_write(m->s, f->repo, f->rev, commit, now) < 0)
		fprintf(stderr, "wstore serve: %s\n", wstore_last_error());
}

/* The flight's work: the commit (asked of the upstream for a branch or
 * tag), its checkpoint (imported unless the store has it). */
static int flight_work(struct flight *f)
{
	char commit[WSTORE_COMMIT_LEN + 1];
	int known = 0, rc = 0;

	if (wparse_is_commit(f->rev))
		memcpy(commit, f->rev, sizeof(commit));
	else if ((rc = ask_upstream(f, commit)) < 0)
		return rc;
	rc = wstore_resolve(&f->id, &known, f->m->s, f->repo, commit);
	if (rc == WSTORE_ENOTFOUND)
		rc = import_commit(f, commit);
	else if (rc < 0)
		snprintf(f->msg, sizeof(f->msg), "%s", wstore_last_error());
	if (rc == 0 && !wparse_is_commit(f->rev))
		record(f, commit);
	return rc;
}

static void flight_free(struct flight *f)
{
	for (size_t i = 0; f->files && i < f->nfiles; i++) {
		free(f->files[i].path);
		wfflight_put(f->ff[i]);
	}
	free(f->files);
	free(f->ff);
	free(f->repo);
	free(f->rev);
	free(f->id);
	free(f);
}

/* Drop a reference to f; m->mu held. */
static void flight_put(struct flight *f)
{
	if (--f->refs == 0)
		flight_free(f);
}

static void unlink_flight(struct wmirror *m, struct flight *f)
{
	unsigned b = bucket(f->repo, f->rev);

	for (struct flight **p = &m->flights[b]; *p; p = &(*p)->next)
		if (*p == f) {
			*p = f->next;
			m->nflights--;
			break;
		}
	f->linked = 0;
}

static void *flight_run(void *arg)
{
	struct flight *f = arg;
	struct wmirror *m = f->m;
	int rc = flight_work(f);

	struct wfflight **ff;
	size_t n;

	/* its OpenSSL state freed before it is counted out (the server may
	 * exit right after) */
	OPENSSL_thread_stop();
	pthread_mutex_lock(&m->mu);
	f->rc = rc;
	f->done = 1;
	/* the next request after this one starts afresh */
	unlink_flight(m, f);
	m->threads--;
	/* the files' spools go with their last reader: the store has them
	 * now, or the import failed */
	ff = f->ff;
	n = f->nfiles;
	f->ff = NULL;
	for (size_t i = 0; f->files && i < n; i++)
		free(f->files[i].path);
	free(f->files);
	f->files = NULL;
	f->nfiles = 0;
	flight_put(f);
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
	for (size_t i = 0; ff && i < n; i++)
		wfflight_put(ff[i]);
	free(ff);
	return NULL;
}

/* The flight of (repo, rev), started when there is none; m->mu held.
 * NULL with mirror_error set when none can start. */
static struct flight *flight_get(struct wmirror *m, const char *repo,
				 const char *rev, int *err)
{
	unsigned b = bucket(repo, rev);
	struct flight *f;
	pthread_attr_t at;

	for (f = m->flights[b]; f; f = f->next)
		if (!strcmp(f->repo, repo) && !strcmp(f->rev, rev))
			return f;
	/* a branch's flight that the upstream told this commit: one
	 * import of a commit however it is asked for */
	for (unsigned k = 0; wparse_is_commit(rev) && k < BUCKETS; k++)
		for (f = m->flights[k]; f; f = f->next)
			if (!strcmp(f->repo, repo) && !strcmp(f->commit, rev))
				return f;
	*err = WSTORE_EBUSY;
	if (atomic_load(&m->stopping)) {
		snprintf(mirror_error, sizeof(mirror_error),
			 "the server is stopping");
		return NULL;
	}
	if (m->nflights >= FLIGHTS_MAX) {
		atomic_fetch_add(&m->busy, 1);
		snprintf(mirror_error, sizeof(mirror_error),
			 "%d fetches from the upstream run already: retry",
			 FLIGHTS_MAX);
		return NULL;
	}
	*err = -ENOMEM;
	if (!(f = calloc(1, sizeof(*f))) || !(f->repo = strdup(repo)) ||
	    !(f->rev = strdup(rev))) {
		if (f)
			flight_free(f);
		return NULL;
	}
	f->m = m;
	f->refs = 1;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	{
		pthread_t t;

		if (pthread_create(&t, &at, flight_run, f) != 0) {
			pthread_attr_destroy(&at);
			flight_free(f);
			return NULL;
		}
	}
	pthread_attr_destroy(&at);
	f->linked = 1;
	f->next = m->flights[b];
	m->flights[b] = f;
	m->nflights++;
	m->threads++;
	return f;
}

/*
 * Join or start the flight of (repo, rev) and wait for it at most wait_s
 * seconds (0: not at all).  0 with *out_id (out_id may be NULL when not
 * waiting); WSTORE_EBUSY with mirror_error saying so while it still runs
 * (the caller answers 503 with Retry-After); its error otherwise.
 */
static int join_flight(char **out_id, struct wmirror *m, const char *repo,
		       const char *rev, double wait_s)
{
	struct timespec dl = wclock_deadline_in((uint64_t)(wait_s * 1000));
	struct flight *f;
	int rc = 0;

	pthread_mutex_lock(&m->mu);
	if (!(f = flight_get(m, repo, rev, &rc)) || wait_s <= 0) {
		pthread_mutex_unlock(&m->mu);
		return f ? 0 : rc;
	}
	f->refs++;
	while (!f->done && !atomic_load(&m->stopping) &&
	       wclock_cond_wait_until(&m->cv, &m->mu, &dl) != ETIMEDOUT)
		;
	if (!f->done) {
		rc = WSTORE_EBUSY;
		snprintf(mirror_error, sizeof(mirror_error),
			 atomic_load(&m->stopping)
				 ? "the server is stopping"
				 : "the upstream fetch of '%s' at '%s' is "
				   "still running: retry",
			 repo, rev);
	} else if ((rc = f->rc) == 0) {
		if (!(*out_id = strdup(f->id ? f->id : "")))
			rc = -ENOMEM;
	} else {
		snprintf(mirror_error, sizeof(mirror_error), "%s", f->msg);
	}
	flight_put(f);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* ---- names to checkpoints ------------------------------------------------
 */

static int by_commit(char **out_id, struct wmirror *m, const char *repo,
		     const char *commit)
{
	int known = 0, rc = wstore_resolve(out_id, &known, m->s, repo, commit);

	if (rc == 0) {
		wmirror_hit(m);
		return 0;
	}
	if (rc != WSTORE_ENOTFOUND)
		return rc;
	atomic_fetch_add(&m->misses, 1);
	mirror_outcome = "fetch";
	return join_flight(out_id, m, repo, commit, m->wait_s);
}

/* What the mirror knows of (repo, rev): from the table, else from the
 * store's record (then kept in the table); *stale when it is time to ask
 * the upstream again (marked asked, so one request asks). */
static int known_ref(char commit[WSTORE_COMMIT_LEN + 1], int *stale,
		     struct wmirror *m, const char *repo, const char *rev)
{
	double now = wclock_mono_s();
	int64_t asked = 0;
	struct ref *r;
	int rc = 0;

	commit[0] = '\0';
	pthread_mutex_lock(&m->mu);
	r = ref_get(m, repo, rev, 0);
	if (r)
		memcpy(commit, r->commit, WSTORE_COMMIT_LEN + 1);
	pthread_mutex_unlock(&m->mu);
	if (!r) {
		rc = wstore_ref_read(commit, WSTORE_COMMIT_LEN + 1, &asked,
				     m->s, repo, rev);
		if (rc < 0 && rc != WSTORE_ENOTFOUND)
			return rc;
		rc = 0;
	}
	pthread_mutex_lock(&m->mu);
	/* only refs the upstream named get an entry: names a client made
	 * up never fill the table */
	if ((r = ref_get(m, repo, rev, commit[0] != '\0'))) {
		if (!r->commit[0] && commit[0]) {
			memcpy(r->commit, commit, WSTORE_COMMIT_LEN + 1);
			r->asked_ms = asked;
		}
		r->used = now;
		*stale = (double)(wclock_wall_ms() - r->asked_ms) / 1000.0 >=
				 m->refresh_s &&
			 (r->tried == 0 || now - r->tried >= m->refresh_s);
		if (*stale)
			r->tried = now;
	} else {
		*stale = 1;
	}
	pthread_mutex_unlock(&m->mu);
	return rc;
}

static int by_ref(char **out_id, struct wmirror *m, const char *repo,
		  const char *rev)
{
	char commit[WSTORE_COMMIT_LEN + 1];
	int stale = 0, known = 0, rc = known_ref(commit, &stale, m, repo, rev);

	if (rc < 0)
		return rc;
	if (commit[0]) {
		rc = wstore_resolve(out_id, &known, m->s, repo, commit);
		if (rc == 0) {
			wmirror_hit(m);
			/* asked again in the background; this request
			 * gets what is known */
			if (stale && join_flight(NULL, m, repo, rev, 0) == 0)
				mirror_outcome = "refresh";
			mirror_error[0] = '\0';
			return 0;
		}
		if (rc != WSTORE_ENOTFOUND)
			return rc;
	}
	atomic_fetch_add(&m->misses, 1);
	mirror_outcome = "fetch";
	return join_flight(out_id, m, repo, rev, m->wait_s);
}

int wmirror_get(char **out_id, struct wmirror *m, const char *repo,
		const char *rev)
{
	const char *r = rev && *rev && strcmp(rev, "HEAD") ? rev : "main";

	*out_id = NULL;
	/* a checkpoint id (no '/') is this store's own name, never the
	 * upstream's */
	if (!allowed(m, repo) || !rev_ok(r))
		return 1;
	return wparse_is_commit(r) ? by_commit(out_id, m, repo, r)
				   : by_ref(out_id, m, repo, r);
}

/* ---- stream-through ------------------------------------------------------
 */

/* 1 when the store holds what (repo, rev) names for the mirror (the
 * commit, or the branch's known commit): served from there.  Marks
 * nothing (by_ref decides on refreshes). */
static int in_store(struct wmirror *m, const char *repo, const char *rev)
{
	char commit[WSTORE_COMMIT_LEN + 1] = "";
	char *id = NULL;
	int64_t asked = 0;
	int known = 0, rc;
	struct ref *r;

	if (wparse_is_commit(rev)) {
		memcpy(commit, rev, sizeof(commit));
	} else {
		pthread_mutex_lock(&m->mu);
		if ((r = ref_get(m, repo, rev, 0)))
			memcpy(commit, r->commit, sizeof(commit));
		pthread_mutex_unlock(&m->mu);
		if (!commit[0] && wstore_ref_read(commit, sizeof(commit),
						  &asked, m->s, repo, rev) < 0)
			commit[0] = '\0';
	}
	if (!commit[0])
		return 0;
	rc = wstore_resolve(&id, &known, m->s, repo, commit);
	free(id);
	/* an error of the store: the usual path answers it */
	return rc != WSTORE_ENOTFOUND;
}

/* Wait for f's listing (or its end) at most wait_s; m->mu held.  0 with
 * the listing, 1 when f ended well (the store has it), or an error with
 * mirror_error set. */
static int wait_listing(struct wmirror *m, struct flight *f)
{
	struct timespec dl = wclock_deadline_in((uint64_t)(m->wait_s * 1000));

	while (!f->listed && !f->done && !atomic_load(&m->stopping) &&
	       wclock_cond_wait_until(&m->cv, &m->mu, &dl) != ETIMEDOUT)
		;
	if (f->done && f->rc == 0)
		return 1;
	if (f->done || f->doomed) {
		snprintf(mirror_error, sizeof(mirror_error), "%s",
			 f->done ? f->msg : f->doom_msg);
		return f->done ? f->rc : WSTORE_EVERIFY;
	}
	if (!f->listed) {
		snprintf(mirror_error, sizeof(mirror_error),
			 atomic_load(&m->stopping)
				 ? "the server is stopping"
				 : "the upstream listing of '%s' at '%s' is "
				   "still on its way: retry",
			 f->repo, f->rev);
		return WSTORE_EBUSY;
	}
	return 0;
}

/* The flight of path in f, started unless one runs; m->mu held. */
static int stream_of(struct wfflight **out, struct wmirror *m, struct flight *f,
		     const char *path)
{
	ptrdiff_t i = fent_find(f, path);
	int rc;

	if (i < 0)
		return 2;
	if (!f->ff[i] && m->nfiles_running >= FILE_FLIGHTS_MAX) {
		atomic_fetch_add(&m->busy, 1);
		snprintf(mirror_error, sizeof(mirror_error),
			 "%d files are on their way from the upstream "
			 "already: retry",
			 FILE_FLIGHTS_MAX);
		return WSTORE_EBUSY;
	}
	if (!f->ff[i] && (rc = file_start(f, (size_t)i)) < 0) {
		snprintf(mirror_error, sizeof(mirror_error),
			 "cannot fetch '%s' from the upstream: %s", path,
			 strerror(-rc));
		return rc;
	}
	wfflight_ref(f->ff[i]);
	*out = f->ff[i];
	return 0;
}

int wmirror_stream(struct wfflight **out, struct wmirror *m, const char *repo,
		   const char *rev, const char *path)
{
	const char *r = rev && *rev && strcmp(rev, "HEAD") ? rev : "main";
	struct flight *f;
	int rc = 0;

	*out = NULL;
	if (!m || !allowed(m, repo) || !rev_ok(r) || in_store(m, repo, r))
		return 1;
	pthread_mutex_lock(&m->mu);
	if (!(f = flight_get(m, repo, r, &rc))) {
		pthread_mutex_unlock(&m->mu);
		return rc;
	}
	f->refs++;
	if ((rc = wait_listing(m, f)) == 0)
		rc = stream_of(out, m, f, path);
	flight_put(f);
	pthread_mutex_unlock(&m->mu);
	if (rc == 0 || rc == WSTORE_EBUSY)
		atomic_fetch_add(&m->misses, 1);
	mirror_outcome = rc == 0 ? "stream" : "fetch";
	return rc;
}

/* A copy of f's listing; m->mu held.  0, or -ENOMEM. */
static int copy_listing(struct wlisting **out, const struct flight *f)
{
	struct wlisting *l = calloc(1, sizeof(*l));

	if (!l || !(l->files = calloc(f->nfiles ? f->nfiles : 1,
				      sizeof(*l->files)))) {
		free(l);
		return -ENOMEM;
	}
	memcpy(l->commit, f->commit, sizeof(l->commit));
	for (; l->n < f->nfiles; l->n++) {
		struct wlisting_file *d = &l->files[l->n];
		const struct fent *e = &f->files[l->n];

		if (!(d->path = strdup(e->path))) {
			wlisting_free(l);
			return -ENOMEM;
		}
		d->size = e->size;
		memcpy(d->oid, e->oid, sizeof(d->oid));
		memcpy(d->sha256, e->sha256, sizeof(d->sha256));
	}
	*out = l;
	return 0;
}

int wmirror_listing(struct wlisting **out, struct wmirror *m, const char *repo,
		    const char *rev)
{
	const char *r = rev && *rev && strcmp(rev, "HEAD") ? rev : "main";
	struct flight *f;
	int rc = 0;

	*out = NULL;
	if (!m || !allowed(m, repo) || !rev_ok(r) || in_store(m, repo, r))
		return 1;
	pthread_mutex_lock(&m->mu);
	if (!(f = flight_get(m, repo, r, &rc))) {
		pthread_mutex_unlock(&m->mu);
		return rc;
	}
	f->refs++;
	if ((rc = wait_listing(m, f)) == 0)
		rc = copy_listing(out, f);
	flight_put(f);
	pthread_mutex_unlock(&m->mu);
	if (rc == 0 || rc == WSTORE_EBUSY)
		atomic_fetch_add(&m->misses, 1);
	mirror_outcome = rc == 0 ? "stream" : "fetch";
	return rc;
}

void wlisting_free(struct wlisting *l)
{
	for (size_t i = 0; l && i < l->n; i++)
		free(l->files[i].path);
	if (l)
		free(l->files);
	free(l);
}

double wmirror_wait_s(const struct wmirror *m)
{
	return m->wait_s;
}

void wmirror_streamed(struct wmirror *m)
{
	atomic_fetch_add(&m->streamed, 1);
}

/* ---- /metrics ------------------------------------------------------------
 */

struct counter {
	const char *name, *help;
	atomic_uint_fast64_t *v;
};

char *wmirror_metrics_text(struct wmirror *m)
{
	const struct counter cs[] = {
		{ "mirror_hits_total", "Names the store answered (--upstream).",
		  &m->hits },
		{ "mirror_misses_total",
		  "Names the store could not answer yet: asked of the "
		  "upstream.",
		  &m->misses },
		{ "mirror_fetches_total",
		  "Imports from the upstream started (one per commit however "
		  "many asked).",
		  &m->fetches },
		{ "mirror_failures_total",
		  "Imports from the upstream that "
		  "failed.",
		  &m->failures },
		{ "mirror_busy_total",
		  "Requests answered 503 because too many fetches ran.",
		  &m->busy },
		{ "upstream_bytes_total", "File bytes taken from the upstream.",
		  &m->bytes },
		{ "upstream_file_fetches_total",
		  "Files fetched from the upstream on their own (one GET "
		  "however many clients read it).",
		  &m->file_fetches },
		{ "upstream_file_failures_total",
		  "File fetches that failed (their hash, or the upstream): "
		  "every client reading them was cut.",
		  &m->file_failures },
		{ "mirror_streamed_total",
		  "Responses served while their file was still coming from "
		  "the upstream.",
		  &m->streamed },
		{ "upstream_ref_requests_total",
		  "Questions to the upstream about the commit of a branch or "
		  "tag.",
		  &m->upstream_requests },
		{ "mirror_refresh_same_total",
		  "Refreshes that found a branch or tag where it was.",
		  &m->refresh_same },
		{ "mirror_refresh_moved_total",
		  "Refreshes that moved a branch or tag to a new commit.",
		  &m->refresh_moved },
		{ "mirror_refresh_failed_total",
		  "Questions about a branch or tag the upstream did not "
		  "answer.",
		  &m->refresh_failed },
	};
	char *out = NULL;
	size_t len = 0;
	FILE *f;

	if (!m || !(f = open_memstream(&out, &len)))
		return NULL;
	for (size_t i = 0; i < sizeof(cs) / sizeof(*cs); i++)
		fprintf(f,
			"# HELP wstore_serve_%s %s\n"
			"# TYPE wstore_serve_%s counter\n"
			"wstore_serve_%s %" PRIuFAST64 "\n",
			cs[i].name, cs[i].help, cs[i].name, cs[i].name,
			atomic_load(cs[i].v));
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}
