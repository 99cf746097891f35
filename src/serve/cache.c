/*
 * cache.c - resolved names and open checkpoints, shared by the requests
 * of one server.
 *
 * Without it every request (HEAD and Range included) resolved its name by
 * reading the model's index and every manifest of the model, opened the
 * checkpoint again and took a read lease: on Redis 2 + N GETs, a SET and
 * a DEL per request.  Here:
 *  - a checkpoint is open at most once at a time (struct wck, reference
 *    counted): one handle, one lease, however many requests read it;
 *  - a successful resolution of (repository, revision) is reused for
 *    cache_seconds (default 5), holding its checkpoint open meanwhile.
 *
 * What it must never do: only successes are kept, so a store error is
 * answered as an error each time (never a remembered "not found", never
 * an older checkpoint); a checkpoint whose read failed (deleted with
 * --force, replaced by a new import of its id: WSTORE_ECHANGED) is marked
 * dead, handed to no new request and dropped from the names at once; a
 * name is re-resolved when its time is up, so a new import takes the name
 * over within cache_seconds and an idle checkpoint's lease ends then
 * (wcache_sweep, called every second).
 *
 * The store is never read with the lock held: lookups under the lock,
 * resolution and opening outside it.  Two requests that miss at once may
 * both open a checkpoint; the second to come back uses the first's handle
 * and closes its own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/frontend.h"
#include "http.h"

struct wname {
	struct wname *next;
	char *repo, *rev;
	struct wck *k; /* holds a reference */
	double expires;
};

struct wcache {
	pthread_mutex_t mu;
	wstore_store *store;
	double ttl;
	struct wname *names;
	struct wck *cks;
	struct wmirror *mirror; /* names the store lacks, or NULL */
};

void wcache_set_mirror(struct wcache *c, struct wmirror *m)
{
	c->mirror = m;
}

struct wcache *wcache_new(wstore_store *store, double ttl)
{
	struct wcache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pthread_mutex_init(&c->mu, NULL);
	c->store = store;
	c->ttl = ttl;
	return c;
}

static void wck_close(struct wck *k)
{
	pthread_mutex_destroy(&k->mu);
	wblocks_free(k->blocks);
	free(k->oids);
	wstore_checkpoint_free(k->ck);
	free(k->id);
	free(k);
}

/* Drop a reference with c->mu held; the checkpoint to close (after the
 * lock is let go) when it was the last, else NULL. */
static struct wck *unref_locked(struct wcache *c, struct wck *k)
{
	if (--k->refs > 0)
		return NULL;
	for (struct wck **p = &c->cks; *p; p = &(*p)->next)
		if (*p == k) {
			*p = k->next;
			break;
		}
	return k;
}

void wck_put(struct wcache *c, struct wck *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&c->mu);
	k = unref_locked(c, k);
	pthread_mutex_unlock(&c->mu);
	if (k)
		wck_close(k);
}

/* Unlink names (all, or those expired or naming a dead checkpoint) with
 * c->mu held; their checkpoints to close are chained on *closing. */
static void drop_names(struct wcache *c, int all, double now,
		       struct wck **closing)
{
	struct wname **p = &c->names;

	while (*p) {
		struct wname *n = *p;
		struct wck *k;

		if (!all && !n->k->dead && n->expires > now) {
			p = &n->next;
			continue;
		}
		*p = n->next;
		if ((k = unref_locked(c, n->k))) {
			k->next = *closing;
			*closing = k;
		}
		free(n->repo);
		free(n->rev);
		free(n);
	}
}

static void close_all(struct wck *k)
{
	while (k) {
		struct wck *next = k->next;

		wck_close(k);
		k = next;
	}
}

void wck_dead(struct wcache *c, struct wck *k)
{
	struct wck *closing = NULL;

	pthread_mutex_lock(&c->mu);
	k->dead = 1;
	drop_names(c, 0, wclock_mono_s(), &closing);
	pthread_mutex_unlock(&c->mu);
	wblocks_kill(k->blocks);
	close_all(closing);
}

void wcache_sweep(struct wcache *c)
{
	struct wck *closing = NULL;

	pthread_mutex_lock(&c->mu);
	drop_names(c, 0, wclock_mono_s(), &closing);
	pthread_mutex_unlock(&c->mu);
	close_all(closing);
}

void wcache_free(struct wcache *c)
{
	struct wck *closing = NULL;

	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	drop_names(c, 1, 0, &closing);
	pthread_mutex_unlock(&c->mu);
	close_all(closing);
	/* requests still holding checkpoints are gone with the daemon */
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static int same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* A live name entry for (repo, rev), its checkpoint referenced for the
 * caller, or NULL; c->mu held. */
static struct wck *find_name(struct wcache *c, const char *repo,
			     const char *rev, double now)
{
	for (struct wname *n = c->names; n; n = n->next)
		if (!strcmp(n->repo, repo) && same(n->rev, rev) &&
		    n->expires > now && !n->k->dead) {
			n->k->refs++;
			return n->k;
		}
	return NULL;
}

/* The live open checkpoint id, referenced for the caller, or NULL; c->mu
 * held. */
static struct wck *find_ck(struct wcache *c, const char *id)
{
	for (struct wck *k = c->cks; k; k = k->next)
		if (!k->dead && !strcmp(k->id, id)) {
			k->refs++;
			return k;
		}
	return NULL;
}

/* Open checkpoint id: a new wck with one reference, or an error. */
static int open_ck(struct wck **out, wstore_store *s, const char *id)
{
	wstore_checkpoint_options o = WSTORE_CHECKPOINT_OPTIONS_INIT;
	struct wck *k = calloc(1, sizeof(*k));
	int rc;

	*out = NULL;
	if (!k || !(k->id = strdup(id))) {
		free(k);
		return -ENOMEM;
	}
	pthread_mutex_init(&k->mu, NULL);
	o.what = "serve";
	/* never serve unleased: a delete would not wait for the download */
	o.require_lease = 1;
	rc = wstore_checkpoint_open_ext(&k->ck, s, id, &o);
	if (rc == -EACCES || rc == -EPERM || rc == -EROFS) {
		/* a 503 for the client (not the 401 of a refused mirror) */
		wfront_err("refusing to serve '%s' without a read lease: %s",
			   id, wstore_last_error());
		rc = WSTORE_EUNAVAIL;
	}
	/* deleted between resolving and opening */
	if (rc == WSTORE_ENOTREADY)
		rc = WSTORE_ENOTFOUND;
	if (rc == 0) /* NULL: every request reads its own */
		k->blocks = wblocks_new(k->ck);
	if (rc == 0)
		rc = wstore_manifest_commit(k->commit, sizeof(k->commit),
					    wstore_checkpoint_manifest(k->ck));
	if (rc < 0) {
		wck_close(k);
		return rc;
	}
	k->refs = 1;
	*out = k;
	return 0;
}

/* Remember (repo, rev) -> k for the cache's time (taking a reference of
 * its own); c->mu held.  Nothing is remembered when out of memory. */
static void add_name(struct wcache *c, const char *repo, const char *rev,
		     struct wck *k, double now)
{
	struct wname *n = calloc(1, sizeof(*n));

	if (!n || !(n->repo = strdup(repo)) ||
	    (rev && !(n->rev = strdup(rev)))) {
		if (n)
			free(n->repo);
		free(n);
		return;
	}
	n->k = k;
	k->refs++;
	n->expires = now + c->ttl;
	n->next = c->names;
	c->names = n;
}

/* The checkpoint id (repo, rev) names: the mirror's answer for a name
 * it mirrors (the upstream's commit, never the newest import), else the
 * store's (wstore_resolve); also the store's for a name the upstream
 * does not have. */
static int resolve(char **id, int *known, struct wcache *c, const char *repo,
		   const char *rev)
{
	int rc = c->mirror ? wmirror_get(id, c->mirror, repo, rev) : 1;

	if (rc == 0) {
		*known = 1;
		return 0;
	}
	if (rc != 1 && rc != WSTORE_ENOTFOUND)
		return rc;
	rc = wstore_resolve(id, known, c->store, repo, rev);
	if (rc == 0 && c->mirror)
		wmirror_hit(c->mirror);
	return rc;
}

int wcache_has(struct wcache *c, const char *repo, const char *rev)
{
	int has = 0;

	pthread_mutex_lock(&c->mu);
	for (struct wname *n = c->names; n && !has; n = n->next)
		has = !strcmp(n->repo, repo) && same(n->rev, rev) &&
		      n->expires > wclock_mono_s() && !n->k->dead;
	pthread_mutex_unlock(&c->mu);
	return has;
}

int wcache_get(struct wck **out, int *known, struct wcache *c, const char *repo,
	       const char *rev)
{
	struct wck *k, *mine = NULL;
	char *id = NULL;
	int rc;

	*out = NULL;
	*known = 0;
	wmirror_error_clear();
	pthread_mutex_lock(&c->mu);
	k = find_name(c, repo, rev, wclock_mono_s());
	pthread_mutex_unlock(&c->mu);
	if (k) {
		*known = 1;
		*out = k;
		wmirror_hit(c->mirror);
		return 0;
	}
	if ((rc = resolve(&id, known, c, repo, rev)) < 0)
		return rc;
	pthread_mutex_lock(&c->mu);
	k = find_ck(c, id);
	pthread_mutex_unlock(&c->mu);
	if (!k) {
		if ((rc = open_ck(&mine, c->store, id)) < 0) {
			free(id);
			return rc;
		}
		pthread_mutex_lock(&c->mu);
		/* another request may have opened it meanwhile */
		if ((k = find_ck(c, id)) == NULL) {
			k = mine;
			mine = NULL;
			k->next = c->cks;
			c->cks = k;
		}
		pthread_mutex_unlock(&c->mu);
	}
	free(id);
	if (mine)
		wck_close(mine);
	if (c->ttl > 0) {
		pthread_mutex_lock(&c->mu);
		if (!k->dead)
			add_name(c, repo, rev, k, wclock_mono_s());
		pthread_mutex_unlock(&c->mu);
	}
	*out = k;
	return 0;
}

int wmirror_cold(struct wreq *r, const struct wtarget *t)
{
	return r->sv->mirror && wutf8_valid(t->repo) &&
	       (!t->rev || wutf8_valid(t->rev)) &&
	       !wcache_has(r->sv->cache, t->repo, t->rev);
}
