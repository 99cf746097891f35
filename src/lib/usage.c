/*
 * usage.c - what a store holds and what goes when room runs out: the
 * usage report behind `wstore df` (sizes from the manifests, pins, leases
 * and last-read times from lease.c), LRU eviction, and the room check
 * every import makes before its first chunk (docs/format.md, "Pins and
 * last-read times").
 *
 * Eviction is a delete that refuses leased checkpoints (delete.c), so a
 * reader that starts while the victims are chosen keeps its checkpoint.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "delete.h"
#include "error.h"
#include "lease_int.h"
#include "meta.h"
#include "reuse.h"
#include "manifest.h"
#include "store.h"
#include "usage.h"
#include "wstore/lease.h"

/* ---- the usage report ---------------------------------------------------- */

struct usage_rec {
	char *id, *model_id, *status;
	uint64_t size;
	int pinned;
	uint32_t leases;
	int64_t last_read_ms, created_at;
};

struct wstore_usage {
	struct usage_rec *v;
	size_t n;
	uint64_t total;
	int has_space;
	uint64_t capacity, free_bytes;
	int has_shared;
	uint64_t shared, saved;
};

static int usage_one(struct usage_rec *r, wstore_store *s, const char *id)
{
	wstore_manifest *m = NULL;
	wstore_leases *ls = NULL;
	int rc = wstore_manifest_read(&m, s, id);

	if (rc < 0)
		return rc; /* absent or unreadable: not counted */
	r->id = strdup(id);
	r->model_id = strdup(m->model_id);
	r->status = strdup(m->status);
	r->size = m->total_size;
	r->created_at = m->created_at;
	wstore_manifest_free(m);
	if (!r->id || !r->model_id || !r->status)
		return -ENOMEM;
	if ((rc = wstore__meta_read(&r->pinned, &r->last_read_ms, s, id)) < 0)
		return rc;
	if ((rc = wstore_leases_read(&ls, s, id)) < 0)
		return rc;
	r->leases = (uint32_t)wstore_leases_count(ls);
	wstore_leases_free(ls);
	return 0;
}

static void rec_free(struct usage_rec *r)
{
	free(r->id);
	free(r->model_id);
	free(r->status);
}

int wstore_usage_read(wstore_usage **out, wstore_store *s)
{
	char **ids = NULL;
	size_t nids = 0;
	wstore_usage *u;
	int rc;

	*out = NULL;
	if ((rc = wstore_list(&ids, &nids, s)) < 0)
		return rc;
	u = calloc(1, sizeof(*u));
	if (!u || !(u->v = calloc(nids + 1, sizeof(*u->v)))) {
		free(u);
		wstore_strings_free(ids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nids; i++) {
		struct usage_rec *r = &u->v[u->n];

		rc = usage_one(r, s, ids[i]);
		if (rc == WSTORE_ENOTFOUND || rc == WSTORE_ECORRUPT) {
			rec_free(r);
			memset(r, 0, sizeof(*r));
			rc = 0;
			continue;
		}
		u->n++;
		if (rc < 0)
			break;
		u->total += r->size;
	}
	wstore_strings_free(ids);
	if (rc == 0 && WSTORE__HAS(s->b, space)) {
		/* a store that cannot say now is reported as unknown */
		u->has_space =
			s->b->space(s->b, &u->capacity, &u->free_bytes) == 0;
		wstore__clear_err();
	}
	/* a store that cannot say is reported as unknown */
	if (rc == 0)
		u->has_shared =
			wstore__reuse_shared(&u->shared, &u->saved, s) == 0;
	wstore__clear_err();
	if (rc < 0) {
		wstore_usage_free(u);
		return rc;
	}
	*out = u;
	return 0;
}

size_t wstore_usage_count(const wstore_usage *u)
{
	return u ? u->n : 0;
}

int wstore_usage_get(wstore_usage_info *out, const wstore_usage *u, size_t i)
{
	const struct usage_rec *r;

	if (!u || i >= u->n)
		return wstore__err(WSTORE_ERANGE,
				   "no checkpoint %zu: the usage report holds "
				   "%zu",
				   i, u ? u->n : 0);
	r = &u->v[i];
	out->id = r->id;
	out->model_id = r->model_id;
	out->status = r->status;
	out->size = r->size;
	out->pinned = r->pinned;
	out->leases = r->leases;
	out->last_read_ms = r->last_read_ms;
	out->created_at = r->created_at;
	return 0;
}

uint64_t wstore_usage_total(const wstore_usage *u)
{
	return u ? u->total : 0;
}

int wstore_usage_shared(uint64_t *out_shared, uint64_t *out_saved,
			const wstore_usage *u)
{
	*out_shared = u && u->has_shared ? u->shared : 0;
	*out_saved = u && u->has_shared ? u->saved : 0;
	if (!u || !u->has_shared)
		return wstore__err(WSTORE_EUNSUPPORTED,
				   "the store cannot tell which blocks its "
				   "files share");
	return 0;
}

int wstore_usage_space(uint64_t *out_capacity, uint64_t *out_free,
		       const wstore_usage *u)
{
	*out_capacity = *out_free = UINT64_MAX;
	if (!u || !u->has_space)
		return WSTORE_EUNSUPPORTED;
	*out_capacity = u->capacity;
	*out_free = u->free_bytes;
	return 0;
}

void wstore_usage_free(wstore_usage *u)
{
	if (!u)
		return;
	for (size_t i = 0; i < u->n; i++)
		rec_free(&u->v[i]);
	free(u->v);
	free(u);
}

/* ---- eviction ------------------------------------------------------------ */

/* A never-read checkpoint counts as read when it was imported. */
static int64_t used_at(const struct usage_rec *r)
{
	return r->last_read_ms ? r->last_read_ms : r->created_at * 1000;
}

static int cmp_lru(const void *a, const void *b)
{
	const struct usage_rec *x = *(struct usage_rec *const *)a;
	const struct usage_rec *y = *(struct usage_rec *const *)b;
	int64_t tx = used_at(x), ty = used_at(y);

	if (tx != ty)
		return tx < ty ? -1 : 1;
	return strcmp(x->id, y->id);
}

struct plan {
	struct usage_rec **v; /* candidates, least recently read first */
	size_t n;
	uint64_t evictable, pinned, leased;
};

static int make_plan(struct plan *p, const wstore_usage *u, const char *skip)
{
	memset(p, 0, sizeof(*p));
	if (!(p->v = calloc(u->n + 1, sizeof(*p->v))))
		return -ENOMEM;
	for (size_t i = 0; i < u->n; i++) {
		struct usage_rec *r = &u->v[i];

		if (skip && !strcmp(r->id, skip))
			continue;
		if (r->pinned)
			p->pinned += r->size;
		else if (r->leases)
			p->leased += r->size;
		else if (!strcmp(r->status, "READY")) {
			p->v[p->n++] = r;
			p->evictable += r->size;
		}
	}
	qsort(p->v, p->n, sizeof(*p->v), cmp_lru);
	return 0;
}

/* Evict from the plan until need bytes are freed; *freed says how many. */
static void run_plan(uint64_t *freed, wstore_store *s, const struct plan *p,
		     uint64_t need, int dry_run, wstore_evict_fn fn, void *ctx)
{
	*freed = 0;
	for (size_t i = 0; i < p->n && *freed < need; i++) {
		const struct usage_rec *r = p->v[i];
		int rc = dry_run ? 0 : wstore_delete(s, r->id);

		if (rc == 0)
			*freed += r->size;
		if (fn)
			fn(r->id, r->size, r->last_read_ms, !dry_run && rc == 0,
			   rc, rc ? wstore_last_error() : "", ctx);
	}
}

static void fmt(char *buf, size_t cap, uint64_t n)
{
	wstore_format_size(buf, cap, n);
}

int wstore_evict(uint64_t *out_used, wstore_store *s, uint64_t target,
		 int dry_run, wstore_evict_fn fn, void *ctx)
{
	wstore_usage *u = NULL;
	struct plan p;
	uint64_t freed = 0, used;
	char a[32], b[32], c[32], d[32];
	int rc = wstore_usage_read(&u, s);

	if (out_used)
		*out_used = 0;
	if (rc < 0)
		return rc;
	used = u->total;
	if (used > target && (rc = make_plan(&p, u, NULL)) == 0) {
		run_plan(&freed, s, &p, used - target, dry_run, fn, ctx);
		used -= freed;
		if (used > target) {
			fmt(a, sizeof(a), target);
			fmt(b, sizeof(b), used);
			fmt(c, sizeof(c), p.pinned);
			fmt(d, sizeof(d), p.leased);
			rc = wstore__err(WSTORE_EBUSY,
					 "cannot get under %s: %s would remain "
					 "(%s pinned, %s leased)",
					 a, b, c, d);
		}
		free(p.v);
	}
	wstore_usage_free(u);
	if (out_used)
		*out_used = used;
	return rc;
}

/* What must go for bytes more to fit: under the quota and in free space. */
static uint64_t room_needed(const wstore_store *s, const wstore_usage *u,
			    uint64_t bytes, char *why, size_t cap)
{
	char a[32], b[32], c[32];
	uint64_t need = 0;

	why[0] = '\0';
	if (s->quota && u->total + bytes > s->quota) {
		need = u->total + bytes - s->quota;
		fmt(a, sizeof(a), bytes);
		fmt(b, sizeof(b), u->total);
		fmt(c, sizeof(c), s->quota);
		snprintf(why, cap, "%s would exceed the quota: %s used of %s",
			 a, b, c);
	}
	if (u->has_space && u->free_bytes != UINT64_MAX &&
	    bytes > u->free_bytes && bytes - u->free_bytes > need) {
		need = bytes - u->free_bytes;
		fmt(a, sizeof(a), bytes);
		fmt(b, sizeof(b), u->free_bytes);
		fmt(c, sizeof(c), u->capacity);
		snprintf(why, cap,
			 "%s would not fit in the store: %s free of %s", a, b,
			 c);
	}
	return need;
}

int wstore__make_room(wstore_store *s, const char *id, uint64_t bytes,
		      wstore_evict_fn fn, void *ctx)
{
	wstore_usage *u = NULL;
	struct plan p;
	char why[256], a[32], b[32];
	uint64_t need, freed = 0;
	int rc;

	if (!s->quota) {
		uint64_t cap, fr;

		/* the common case: only the free space matters, and it is
		 * known without reading every manifest */
		if (!WSTORE__HAS(s->b, space) ||
		    s->b->space(s->b, &cap, &fr) < 0 || fr == UINT64_MAX ||
		    bytes <= fr) {
			wstore__clear_err();
			return 0;
		}
	}
	if ((rc = wstore_usage_read(&u, s)) < 0)
		return rc;
	need = room_needed(s, u, bytes, why, sizeof(why));
	if (need == 0 || !s->evict_lru) {
		rc = need ? wstore__err(WSTORE_EBUSY, "cannot import '%s': %s",
					id, why)
			  : 0;
		wstore_usage_free(u);
		return rc;
	}
	if ((rc = make_plan(&p, u, id)) == 0) {
		if (p.evictable < need) {
			fmt(a, sizeof(a), p.evictable);
			fmt(b, sizeof(b), need);
			rc = wstore__err(WSTORE_EBUSY,
					 "cannot import '%s': %s, and evicting "
					 "every checkpoint that is neither "
					 "pinned nor leased frees only %s of "
					 "the %s needed",
					 id, why, a, b);
		} else {
			run_plan(&freed, s, &p, need, 0, fn, ctx);
			if (freed < need)
				rc = wstore__err(WSTORE_EBUSY,
						 "cannot import '%s': %s, and "
						 "eviction freed too little "
						 "(checkpoints were leased "
						 "meanwhile)",
						 id, why);
		}
		free(p.v);
	}
	wstore_usage_free(u);
	return rc;
}
