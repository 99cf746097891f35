/*
 * mirror.c - `wstore serve --upstream URL`: a pull-through mirror.  A
 * name (repository, revision) the store cannot resolve is imported from
 * the upstream Hub server with wstore_import_hub (each file streamed into
 * the store and checked against the upstream's hash before the checkpoint
 * is READY), then served from the store like any other.
 *
 * Single flight: requests for the same name while its import runs wait
 * for that import instead of starting their own, so any number of
 * clients asking a cold mirror at once cause one upstream fetch of each
 * file.  Clients only ever get READY checkpoints: a file that failed
 * verification is never served.
 *
 * Names the upstream resolved are remembered (repository, revision ->
 * checkpoint id; a revision such as "main" is not recorded in the store,
 * whose manifests carry the upstream's commit): while the upstream is
 * down, the mirror answers them from what it holds.  Only repositories
 * matching an --upstream-allow pattern (fnmatch; none given: every one)
 * go upstream.
 *
 * When the server stops, imports under way are canceled through their
 * progress callback (asked about once a second also while no byte comes),
 * so that a held or slow upstream never holds up the drain.
 */
#include <errno.h>
#include <inttypes.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

struct flight {
	struct flight *next;
	char *repo, *rev;
	int done, rc, known, waiters;
	char *id;
	char msg[512];
};

/* why this thread's last name failed upstream ("" when it did not) */
static _Thread_local char mirror_error[512];

const char *wmirror_error(void)
{
	return mirror_error;
}

void wmirror_error_clear(void)
{
	mirror_error[0] = '\0';
}

struct remembered {
	struct remembered *next;
	char *repo, *rev, *id;
};

struct wmirror {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	const struct wserve_options *o;
	struct flight *flights;
	struct remembered *names;
	atomic_uint_fast64_t hits, misses, fetches, failures, bytes;
	atomic_int stopping;
};

struct wmirror *wmirror_new(const struct wserve_options *o)
{
	struct wmirror *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	pthread_mutex_init(&m->mu, NULL);
	wclock_cond_init(&m->cv);
	atomic_init(&m->stopping, 0);
	m->o = o;
	return m;
}

void wmirror_free(struct wmirror *m)
{
	if (!m)
		return;
	while (m->names) {
		struct remembered *r = m->names;

		m->names = r->next;
		free(r->repo);
		free(r->rev);
		free(r->id);
		free(r);
	}
	pthread_mutex_destroy(&m->mu);
	pthread_cond_destroy(&m->cv);
	free(m);
}

static int allowed(const struct wmirror *m, const char *repo)
{
	const char *const *a = m->o->upstream_allow;

	if (!a || !a[0])
		return 1;
	for (; *a; a++)
		if (fnmatch(*a, repo, 0) == 0)
			return 1;
	return 0;
}

/* progress of an import: the bytes it took from the upstream */
struct took {
	uint64_t last;
	struct wmirror *m;
};

static int on_progress(uint64_t done, uint64_t total, const char *path,
		       void *ctx)
{
	struct took *t = ctx;

	(void)total;
	(void)path;
	if (done > t->last) {
		atomic_fetch_add(&t->m->bytes, done - t->last);
		t->last = done;
	}
	return atomic_load(&t->m->stopping);
}

static void remember(struct wmirror *m, const char *repo, const char *rev,
		     const char *id)
{
	struct remembered *r;

	for (r = m->names; r; r = r->next)
		if (!strcmp(r->repo, repo) && !strcmp(r->rev, rev)) {
			char *nid = strdup(id);

			if (nid) {
				free(r->id);
				r->id = nid;
			}
			return;
		}
	if (!(r = calloc(1, sizeof(*r))))
		return;
	r->repo = strdup(repo);
	r->rev = strdup(rev);
	r->id = strdup(id);
	if (!r->repo || !r->rev || !r->id) {
		free(r->repo);
		free(r->rev);
		free(r->id);
		free(r);
		return;
	}
	r->next = m->names;
	m->names = r;
}

static char *recalled(struct wmirror *m, const char *repo, const char *rev)
{
	for (struct remembered *r = m->names; r; r = r->next)
		if (!strcmp(r->repo, repo) && !strcmp(r->rev, rev))
			return strdup(r->id);
	return NULL;
}

/* The import itself (no lock held). */
static int fetch(struct flight *f, struct wmirror *m, wstore_store *s)
{
	wstore_import_options io = WSTORE_IMPORT_OPTIONS_INIT;
	wstore_hub_options ho = WSTORE_HUB_OPTIONS_INIT;
	struct took t = { 0, m };
	int rc;

	io.model_id = f->repo;
	io.progress = on_progress;
	io.progress_ctx = &t;
	ho.endpoint = m->o->upstream;
	ho.token = m->o->upstream_token;
	ho.repo = f->repo;
	ho.revision = f->rev;
	if (atomic_load(&m->stopping)) {
		snprintf(f->msg, sizeof(f->msg), "the server is stopping");
		return WSTORE_ECANCELED;
	}
	atomic_fetch_add(&m->fetches, 1);
	rc = wstore_import_hub(&f->id, s, &io, &ho);
	if (rc < 0) {
		atomic_fetch_add(&m->failures, 1);
		snprintf(f->msg, sizeof(f->msg), "upstream: %s",
			 wstore_last_error());
	}
	return rc;
}

static struct flight *find_flight(struct wmirror *m, const char *repo,
				  const char *rev)
{
	for (struct flight *f = m->flights; f; f = f->next)
		if (!strcmp(f->repo, repo) && !strcmp(f->rev, rev))
			return f;
	return NULL;
}

static void drop_flight(struct wmirror *m, struct flight *f)
{
	for (struct flight **p = &m->flights; *p; p = &(*p)->next)
		if (*p == f) {
			*p = f->next;
			break;
		}
	free(f->repo);
	free(f->rev);
	free(f->id);
	free(f);
}

/* Join the flight of (repo, rev), starting it if there is none; its
 * result copied out once it lands. */
static int fly(char **out_id, struct wmirror *m, wstore_store *s,
	       const char *repo, const char *rev)
{
	struct flight *f;
	int rc, mine = 0;

	pthread_mutex_lock(&m->mu);
	if (!(f = find_flight(m, repo, rev))) {
		if (!(f = calloc(1, sizeof(*f))) || !(f->repo = strdup(repo)) ||
		    !(f->rev = strdup(rev))) {
			pthread_mutex_unlock(&m->mu);
			if (f) {
				free(f->repo);
				free(f);
			}
			return -ENOMEM;
		}
		f->next = m->flights;
		m->flights = f;
		mine = 1;
	}
	f->waiters++;
	if (mine) {
		pthread_mutex_unlock(&m->mu);
		rc = fetch(f, m, s);
		pthread_mutex_lock(&m->mu);
		f->rc = rc;
		f->done = 1;
		if (rc == 0 && f->id)
			remember(m, repo, rev, f->id);
		pthread_cond_broadcast(&m->cv);
	}
	while (!f->done)
		pthread_cond_wait(&m->cv, &m->mu);
	rc = f->rc;
	*out_id = rc == 0 && f->id ? strdup(f->id) : NULL;
	if (rc == 0 && !*out_id)
		rc = -ENOMEM;
	if (rc < 0)
		snprintf(mirror_error, sizeof(mirror_error), "%s", f->msg);
	if (--f->waiters == 0)
		drop_flight(m, f);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

void wmirror_stop(struct wmirror *m)
{
	if (m)
		atomic_store(&m->stopping, 1);
}

void wmirror_hit(struct wmirror *m)
{
	if (m)
		atomic_fetch_add(&m->hits, 1);
}

int wmirror_get(char **out_id, struct wmirror *m, wstore_store *s,
		const char *repo, const char *rev)
{
	const char *r = rev && *rev && strcmp(rev, "HEAD") ? rev : "main";
	char *id = NULL;
	int rc;

	*out_id = NULL;
	/* a checkpoint id (no '/') is this store's own name, never the
	 * upstream's */
	if (!strchr(repo, '/') || !allowed(m, repo))
		return WSTORE_ENOTFOUND;
	atomic_fetch_add(&m->misses, 1);
	rc = fly(out_id, m, s, repo, r);
	if (rc == 0 || rc == WSTORE_ENOTFOUND)
		return rc;
	/* the upstream is down or failing: what the mirror holds */
	pthread_mutex_lock(&m->mu);
	id = recalled(m, repo, r);
	pthread_mutex_unlock(&m->mu);
	if (id) {
		*out_id = id;
		return 0;
	}
	return rc;
}

char *wmirror_metrics_text(struct wmirror *m)
{
	char *out = NULL;

	if (m &&
	    asprintf(&out,
		     "# HELP wstore_serve_mirror_hits_total Names the store "
		     "answered (--upstream).\n"
		     "# TYPE wstore_serve_mirror_hits_total counter\n"
		     "wstore_serve_mirror_hits_total %" PRIuFAST64 "\n"
		     "# HELP wstore_serve_mirror_misses_total Names asked of "
		     "the upstream.\n"
		     "# TYPE wstore_serve_mirror_misses_total counter\n"
		     "wstore_serve_mirror_misses_total %" PRIuFAST64 "\n"
		     "# HELP wstore_serve_mirror_fetches_total Imports from "
		     "the upstream started (one per name however many "
		     "asked).\n"
		     "# TYPE wstore_serve_mirror_fetches_total counter\n"
		     "wstore_serve_mirror_fetches_total %" PRIuFAST64 "\n"
		     "# HELP wstore_serve_mirror_failures_total Imports from "
		     "the upstream that failed.\n"
		     "# TYPE wstore_serve_mirror_failures_total counter\n"
		     "wstore_serve_mirror_failures_total %" PRIuFAST64 "\n"
		     "# HELP wstore_serve_upstream_bytes_total File bytes "
		     "taken from the upstream.\n"
		     "# TYPE wstore_serve_upstream_bytes_total counter\n"
		     "wstore_serve_upstream_bytes_total %" PRIuFAST64 "\n",
		     atomic_load(&m->hits), atomic_load(&m->misses),
		     atomic_load(&m->fetches), atomic_load(&m->failures),
		     atomic_load(&m->bytes)) < 0)
		out = NULL;
	return out;
}
