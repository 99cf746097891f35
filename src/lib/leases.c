/*
 * leases.c - reading the read leases of a checkpoint: list them, judge
 * which are live (expiry, dead holders), remove the dead ones, describe
 * them for a delete's refusal, and purge them all after a delete.  Taking
 * and renewing a lease is lease.c; the records are described there and in
 * docs/format.md, "Leases".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../common/clock.h"
#include "error.h"
#include "lease_int.h"
#include "lock.h"
#include "names.h"
#include "store.h"
#include "wstore/lease.h"

struct lease_rec {
	char *holder, *host, *what;
	int64_t pid, since_ms, expires_ms;
};

struct wstore_leases {
	struct lease_rec *v;
	size_t n, cap;
};

static int rec_from_json(struct lease_rec *r, json_t *j)
{
	const char *holder = json_string_value(json_object_get(j, "holder"));
	const char *host = json_string_value(json_object_get(j, "host"));
	const char *what = json_string_value(json_object_get(j, "what"));
	json_t *exp = json_object_get(j, "expires_ms");

	if (!holder || !host || !what || !json_is_integer(exp))
		return WSTORE_ECORRUPT;
	memset(r, 0, sizeof(*r));
	r->holder = strdup(holder);
	r->host = strdup(host);
	r->what = strdup(what);
	r->pid = json_integer_value(json_object_get(j, "pid"));
	r->since_ms = json_integer_value(json_object_get(j, "since_ms"));
	r->expires_ms = json_integer_value(exp);
	if (!r->holder || !r->host || !r->what) {
		free(r->holder);
		free(r->host);
		free(r->what);
		return -ENOMEM;
	}
	return 0;
}

static int leases_add(wstore_leases *ls, json_t *j)
{
	if (ls->n == ls->cap) {
		size_t cap = ls->cap ? ls->cap * 2 : 8;
		struct lease_rec *nv = realloc(ls->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		ls->v = nv;
		ls->cap = cap;
	}
	if (rec_from_json(&ls->v[ls->n], j) < 0)
		return 0; /* an unreadable record is nobody's lease */
	ls->n++;
	return 0;
}

/* ---- reading the leases of a checkpoint ---------------------------------- */

struct collect {
	struct strlist {
		char **v;
		size_t n, cap;
	} keys;
	int err;
};

static int collect_key(const char *key, void *vctx)
{
	struct collect *c = vctx;

	if (c->keys.n == c->keys.cap) {
		size_t cap = c->keys.cap ? c->keys.cap * 2 : 16;
		char **nv = realloc(c->keys.v, cap * sizeof(*nv));

		if (!nv)
			return c->err = -ENOMEM;
		c->keys.v = nv;
		c->keys.cap = cap;
	}
	if (!(c->keys.v[c->keys.n] = strdup(key)))
		return c->err = -ENOMEM;
	c->keys.n++;
	return 0;
}

static void collect_free(struct collect *c)
{
	for (size_t i = 0; i < c->keys.n; i++)
		free(c->keys.v[i]);
	free(c->keys.v);
}

/* Is the record live?  Dead holders' records are removed; on a store
 * without expiry so are expired ones once a TTL past their expiry, so
 * that crashed readers leave nothing behind for long. */
static int judge_record(wstore_store *s, const char *key, json_t *j,
			int64_t now)
{
	json_t *exp = json_object_get(j, "expires_ms");
	int64_t ttl = json_integer_value(json_object_get(j, "ttl_ms"));
	int64_t e = json_integer_value(exp);

	if (wstore__lease_holder_dead(j)) {
		wstore__remove(s, key);
		return 0;
	}
	if (WSTORE__HAS(s->b, put_ttl) && json_is_integer(exp))
		return 1; /* the store drops expired records itself */
	if (json_is_integer(exp) && e > now)
		return 1;
	if (!json_is_integer(exp) || now - e > (ttl > 0 ? ttl : 0))
		wstore__remove(s, key);
	return 0;
}

static int read_listed(wstore_leases *ls, wstore_store *s, const char *id)
{
	char prefix[WSTORE__KEY_MAX];
	struct collect c = { 0 };
	int64_t now = wclock_wall_ms();
	int rc;

	wstore__key_lease_prefix(prefix, id);
	rc = s->b->list(s->b, prefix, collect_key, &c);
	if (rc == 0 && c.err)
		rc = c.err;
	for (size_t i = 0; rc == 0 && i < c.keys.n; i++) {
		char *txt = NULL;
		size_t n = 0;
		json_t *j;
		int r = wstore__get_alloc(s, c.keys.v[i], &txt, &n);

		if (r == WSTORE_ENOTFOUND)
			continue; /* released meanwhile */
		if (r < 0) {
			rc = r;
			break;
		}
		j = json_loadb(txt, n, 0, NULL);
		free(txt);
		if (!j) {
			wstore__remove(s, c.keys.v[i]);
			continue;
		}
		if (judge_record(s, c.keys.v[i], j, now))
			rc = leases_add(ls, j);
		json_decref(j);
	}
	collect_free(&c);
	return rc;
}

static int get_set(wstore_store *s, const char *id, char **txt, size_t *n)
{
	char key[WSTORE__KEY_MAX], lockname[WSTORE__KEY_MAX];

	wstore__lease_set_key(key, id);
	wstore__lease_set_lock(lockname, id);
	return wstore__get_locked(s, key, lockname, txt, n);
}

static int read_set(wstore_leases *ls, wstore_store *s, const char *id)
{
	char *txt = NULL;
	int64_t now = wclock_wall_ms();
	const char *k;
	size_t n = 0;
	json_t *j, *v;
	int rc;

	rc = get_set(s, id, &txt, &n);
	if (rc == WSTORE_ENOTFOUND)
		return 0;
	if (rc < 0)
		return rc;
	j = json_loadb(txt, n, 0, NULL);
	free(txt);
	if (json_is_object(j))
		json_object_foreach(j, k, v)
		{
			json_t *exp = json_object_get(v, "expires_ms");

			if (json_is_integer(exp) &&
			    json_integer_value(exp) > now &&
			    !wstore__lease_holder_dead(v) &&
			    (rc = leases_add(ls, v)) < 0)
				break;
		}
	json_decref(j);
	return rc;
}

int wstore_leases_read(wstore_leases **out, wstore_store *s, const char *id)
{
	wstore_leases *ls;
	int rc;

	*out = NULL;
	if ((rc = wstore_validate_checkpoint_id(id)) < 0)
		return rc;
	if (!(ls = calloc(1, sizeof(*ls))))
		return -ENOMEM;
	rc = s->b->list ? read_listed(ls, s, id) : read_set(ls, s, id);
	if (rc < 0) {
		rc = wstore__err(rc, "cannot read the leases of '%s': %s", id,
				 wstore_last_error());
		wstore_leases_free(ls);
		return rc;
	}
	*out = ls;
	return 0;
}

size_t wstore_leases_count(const wstore_leases *ls)
{
	return ls ? ls->n : 0;
}

int wstore_leases_get(wstore_lease_info *out, const wstore_leases *ls, size_t i)
{
	if (!ls || i >= ls->n)
		return wstore__err(WSTORE_ERANGE,
				   "no lease %zu: the list holds %zu", i,
				   ls ? ls->n : 0);
	out->holder = ls->v[i].holder;
	out->host = ls->v[i].host;
	out->pid = ls->v[i].pid;
	out->what = ls->v[i].what;
	out->since_ms = ls->v[i].since_ms;
	out->expires_ms = ls->v[i].expires_ms;
	return 0;
}

void wstore_leases_free(wstore_leases *ls)
{
	if (!ls)
		return;
	for (size_t i = 0; i < ls->n; i++) {
		free(ls->v[i].holder);
		free(ls->v[i].host);
		free(ls->v[i].what);
	}
	free(ls->v);
	free(ls);
}

/* ---- for delete.c and usage.c -------------------------------------------- */

int wstore__leases_describe(wstore_store *s, const char *id, size_t *out_n,
			    char *desc, size_t cap)
{
	wstore_leases *ls = NULL;
	int64_t now = wclock_wall_ms();
	size_t off = 0;
	int rc = wstore_leases_read(&ls, s, id);

	*out_n = 0;
	if (cap)
		desc[0] = '\0';
	if (rc < 0)
		return rc;
	*out_n = ls->n;
	for (size_t i = 0; i < ls->n && off + 1 < cap; i++) {
		const struct lease_rec *r = &ls->v[i];
		int64_t left = (r->expires_ms - now + 999) / 1000;
		int k = snprintf(desc + off, cap - off,
				 "%s%s by pid %" PRId64
				 " on host '%s' (lease expires in %" PRId64
				 " s)",
				 i ? ", " : "", r->what, r->pid, r->host,
				 left < 0 ? 0 : left);

		if (k < 0)
			break;
		off += (size_t)k < cap - off ? (size_t)k : cap - off - 1;
	}
	wstore_leases_free(ls);
	return 0;
}

int wstore__leases_purge(wstore_store *s, const char *id)
{
	char key[WSTORE__KEY_MAX];
	struct collect c = { 0 };
	int rc;

	if (!s->b->list) {
		wstore__lease_set_key(key, id);
		return wstore__remove(s, key);
	}
	wstore__key_lease_prefix(key, id);
	rc = s->b->list(s->b, key, collect_key, &c);
	if (rc == 0 && c.err)
		rc = c.err;
	for (size_t i = 0; rc == 0 && i < c.keys.n; i++)
		rc = wstore__remove(s, c.keys.v[i]);
	collect_free(&c);
	return rc;
}
