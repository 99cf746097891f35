/*
 * lease.c - read leases: "this process is reading checkpoint {ckpt}",
 * renewed by a background thread, expiring TTL after the last renewal
 * (docs/format.md, "Leases").
 *
 * Where a lease lives depends on what the store can do:
 *  - stores that can list keys (file, mem, Redis): one record per holder,
 *    "weight/leases/models/{ckpt}/{holder}".  With the backend's put_ttl
 *    (Redis: SET PX) the store itself drops a record that stopped being
 *    renewed; elsewhere the record's expires_ms is compared with the
 *    clock, and expired records are removed by whoever lists them.
 *  - stores that cannot list (Mooncake): one lease set per checkpoint,
 *    "weight/leases/models/{ckpt}", a JSON object of holder -> record,
 *    read-modified-written with the backend's atomic update, or without
 *    one under the lock "weight/locks/leases/{ckpt}" (lock.c).  Every
 *    write also drops the records that have expired.
 *
 * A record is one line of JSON: {"expires_ms","holder","host","pid",
 * "since_ms","ttl_ms","what"}.  The reader takes its lease before it reads
 * the manifest, and a delete (delete.c) checks for leases after it has
 * marked the manifest FAILED: so every reader that saw READY is seen by
 * the delete.  Read delete.c next.
 *
 * Also the record "weight/meta/models/{ckpt}", JSON {"last_read_ms",
 * "pinned"}: pins, and the last-read time a reader writes when it takes
 * its lease, at most once per checkpoint per minute (the process remembers
 * when it last wrote, and the update leaves a fresh enough record alone).
 * It is read-modified-written, so a pin and a reader never lose each
 * other's field.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "error.h"
#include "util.h"
#include "lease.h"
#include "lock.h"
#include "manifest.h"
#include "names.h"
#include "store.h"
#include "wstore/lease.h"

#define TTL_DEFAULT_MS 60000
#define TTL_MIN_MS 100
#define TTL_MAX_MS (24LL * 3600 * 1000)

struct wstore_lease {
	wstore_store *s;
	char id[256];
	char holder[WSTORE__KEY_MAX / 2];
	char key[WSTORE__KEY_MAX];
	char what[65];
	char host[256];
	int64_t since_ms;
	uint64_t ttl_ms;
	pthread_t thread;
	int started;
	pthread_mutex_t mu; /* guards stop */
	pthread_cond_t cv;
	int stop;
};

struct lease_rec {
	char *holder, *host, *what;
	int64_t pid, since_ms, expires_ms;
};

struct wstore_leases {
	struct lease_rec *v;
	size_t n, cap;
};

int64_t wstore__now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t lease_ttl(void)
{
	const char *e = getenv("WSTORE_LEASE_TTL_MS");
	char *end;
	long long v;

	if (!e || !*e)
		return TTL_DEFAULT_MS;
	v = strtoll(e, &end, 10);
	if (*end || v < TTL_MIN_MS || v > TTL_MAX_MS)
		return TTL_DEFAULT_MS;
	return (uint64_t)v;
}

static void set_key(char *out, const char *id)
{
	wstore__key_lease_set(out, id);
}

/* ---- read-modify-write on any store ------------------------------------- */

int wstore__rmw(wstore_store *s, const char *key, const char *lockname,
		wstore_update_fn fn, void *ctx)
{
	char *token = NULL, *old = NULL;
	void *nv = NULL;
	size_t old_len = 0, nlen = 0;
	int rc;

	if (s->b->update)
		return s->b->update(s->b, key, fn, ctx);
	for (int tries = 0;; tries++) {
		rc = wstore__lock(s, lockname, &token);
		if (rc != WSTORE_EBUSY || tries >= 300)
			break;
		usleep(100000); /* held only for one read and one write */
	}
	if (rc < 0)
		return rc == WSTORE_EBUSY
			       ? wstore__err(rc, "'%s' is busy: %s", key,
					     wstore_last_error())
			       : rc;
	rc = wstore__get_alloc(s, key, &old, &old_len);
	if (rc == WSTORE_ENOTFOUND)
		rc = 0;
	if (rc == 0)
		rc = fn(&nv, &nlen, old, old_len, ctx);
	if (rc == 0)
		rc = wstore__replace(s, key, nv, nlen);
	free(old);
	free(nv);
	wstore__unlock(s, lockname, token);
	return rc > 0 ? 0 : rc;
}

/* ---- records ------------------------------------------------------------- */

static json_t *record_json(const wstore_lease *l, int64_t now)
{
	return json_pack("{s:I, s:s, s:s, s:I, s:I, s:I, s:s}", "expires_ms",
			 (json_int_t)(now + (int64_t)l->ttl_ms), "holder",
			 l->holder, "host", l->host, "pid",
			 (json_int_t)getpid(), "since_ms",
			 (json_int_t)l->since_ms, "ttl_ms",
			 (json_int_t)l->ttl_ms, "what", l->what);
}

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

/* A holder that ran on this host and whose process is gone holds
 * nothing, whatever its expiry says (as for locks, lock.c). */
static int holder_dead(json_t *j)
{
	const char *h = json_string_value(json_object_get(j, "host"));
	json_int_t pid = json_integer_value(json_object_get(j, "pid"));
	char host[256] = "";

	gethostname(host, sizeof(host) - 1);
	return h && pid > 0 && strcmp(h, host) == 0 &&
	       kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* ---- the lease set (stores without list) --------------------------------- */

struct set_edit {
	const char *holder; /* the record to drop or replace */
	json_t *rec;	    /* the new record, or NULL to drop */
	int64_t now;
};

/* Drop holder's record and every expired one; add rec. */
static int set_fn(void **out, size_t *out_len, const void *old, size_t old_len,
		  void *vctx)
{
	struct set_edit *e = vctx;
	json_t *j = old && old_len ? json_loadb(old, old_len, 0, NULL) : NULL;
	json_t *nj = json_object(), *v;
	const char *k;
	char *txt;

	if (!nj) {
		json_decref(j);
		return -ENOMEM;
	}
	if (json_is_object(j))
		json_object_foreach(j, k, v)
		{
			json_t *x = json_object_get(v, "expires_ms");

			if (strcmp(k, e->holder) == 0 || !json_is_integer(x) ||
			    json_integer_value(x) <= e->now || holder_dead(v))
				continue;
			json_object_set(nj, k, v);
		}
	json_decref(j);
	if (e->rec) {
		/* the expiry counts from now, not from before the lock wait */
		json_int_t ttl =
			json_integer_value(json_object_get(e->rec, "ttl_ms"));

		json_object_set_new(e->rec, "expires_ms",
				    json_integer(wstore__now_ms() + ttl));
		json_object_set(nj, e->holder, e->rec);
	}
	txt = json_dumps(nj, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(nj);
	if (!txt)
		return -ENOMEM;
	*out = txt;
	*out_len = strlen(txt);
	return 0;
}

static int set_write(wstore_store *s, const char *id, const char *holder,
		     json_t *rec)
{
	char key[WSTORE__KEY_MAX], lockname[WSTORE__KEY_MAX];
	struct set_edit e = { holder, rec, wstore__now_ms() };

	set_key(key, id);
	snprintf(lockname, sizeof(lockname), "leases/%s", id);
	return wstore__rmw(s, key, lockname, set_fn, &e);
}

/* ---- taking, renewing, releasing ------------------------------------------
 */

/* Write (or rewrite) l's record with a fresh expiry. */
static int lease_write(wstore_lease *l)
{
	wstore_backend *b = l->s->b;
	json_t *j = record_json(l, wstore__now_ms());
	char *txt;
	int rc;

	if (!j)
		return -ENOMEM;
	if (!b->list) {
		rc = set_write(l->s, l->id, l->holder, j);
		json_decref(j);
		return rc;
	}
	txt = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	if (!txt)
		return -ENOMEM;
	/* a lease need not survive a crash (its reader does not either):
	 * a plain put, which replaces without the fsyncs of an upsert,
	 * wherever put replaces at all */
	if (WSTORE__HAS(b, put_ttl))
		rc = b->put_ttl(b, l->key, txt, strlen(txt), l->ttl_ms);
	else if (!(b->flags & WSTORE_BACKEND_WRITE_ONCE))
		rc = b->put(b, l->key, txt, strlen(txt));
	else
		rc = wstore__replace(l->s, l->key, txt, strlen(txt));
	free(txt);
	return rc;
}

static void *renew_main(void *arg)
{
	wstore_lease *l = arg;
	uint64_t every = l->ttl_ms / 3;

	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		struct timespec ts;
		uint64_t ns;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ns = (uint64_t)ts.tv_nsec + (every % 1000) * 1000000ull;
		ts.tv_sec += (time_t)(every / 1000 + ns / 1000000000ull);
		ts.tv_nsec = (long)(ns % 1000000000ull);
		while (!l->stop &&
		       pthread_cond_timedwait(&l->cv, &l->mu, &ts) == 0)
			;
		if (l->stop)
			break;
		pthread_mutex_unlock(&l->mu);
		/* a failed renewal is tried again at the next tick; the
		 * lease may lapse meanwhile, and a delete may then go ahead:
		 * the reader meets a missing chunk and fails cleanly */
		lease_write(l);
		pthread_mutex_lock(&l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

static void make_holder(wstore_lease *l)
{
	unsigned char r[8] = { 0 };
	char host[256] = "", hex[17];
	size_t j = 0;

	gethostname(host, sizeof(host) - 1);
	snprintf(l->host, sizeof(l->host), "%s", host);
	/* the holder is a key segment: letters, digits, '-' and '_' only */
	for (size_t i = 0; host[i] && j < 100; i++)
		l->holder[j++] =
			(host[i] >= 'a' && host[i] <= 'z') ||
					(host[i] >= 'A' && host[i] <= 'Z') ||
					(host[i] >= '0' && host[i] <= '9') ||
					host[i] == '-'
				? host[i]
				: '_';
	if (j == 0)
		l->holder[j++] = 'h';
	if (getrandom(r, sizeof(r), 0) != sizeof(r)) {
		uint64_t t =
			(uint64_t)wstore__now_ms() ^ (uint64_t)(uintptr_t)l;

		memcpy(r, &t, sizeof(r));
	}
	for (int i = 0; i < 8; i++)
		sprintf(hex + 2 * i, "%02x", r[i]);
	snprintf(l->holder + j, sizeof(l->holder) - j, ".%ld.%s",
		 (long)getpid(), hex);
}

static int check_what(const char *what)
{
	size_t n = 0;

	for (const char *p = what; *p; p++, n++)
		if (*p < 0x20 || *p > 0x7e)
			return wstore__err(WSTORE_EINVAL,
					   "lease holder description must be "
					   "printable ASCII");
	return n > 64 ? wstore__err(WSTORE_EINVAL,
				    "lease holder description is longer "
				    "than 64 characters")
		      : 0;
}

int wstore_lease_take(wstore_lease **out, wstore_store *s, const char *id,
		      const char *what)
{
	wstore_lease *l;
	int rc;

	*out = NULL;
	if ((rc = wstore_validate_checkpoint_id(id)) < 0)
		return rc;
	if ((rc = check_what(what ? what : "read")) < 0)
		return rc;
	if (!(l = calloc(1, sizeof(*l))))
		return wstore__errc(-ENOMEM, "cannot take a lease");
	l->s = s;
	snprintf(l->id, sizeof(l->id), "%s", id);
	snprintf(l->what, sizeof(l->what), "%s", what ? what : "read");
	make_holder(l);
	wstore__key_lease(l->key, id, l->holder);
	l->ttl_ms = lease_ttl();
	l->since_ms = wstore__now_ms();
	pthread_mutex_init(&l->mu, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&l->cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	rc = lease_write(l);
	if (rc < 0) {
		rc = wstore__err(rc, "cannot take a read lease on '%s': %s", id,
				 wstore_last_error());
		wstore_lease_release(l);
		return rc;
	}
	if (wstore__thread_start(&l->thread, renew_main, l) != 0) {
		rc = wstore__err(-EAGAIN, "cannot start the lease renewal "
					  "thread");
		wstore_lease_release(l);
		return rc;
	}
	l->started = 1;
	wstore__touch(s, id);
	*out = l;
	return 0;
}

int wstore__lease_read_ready(wstore_lease **out_lease, wstore_manifest **out,
			     wstore_store *s, const char *id, const char *what)
{
	wstore_lease *l = NULL;
	int rc = wstore_lease_take(&l, s, id, what);

	*out_lease = NULL;
	*out = NULL;
	/* a store we may only read (a read-only mount, another user's
	 * directory) is read without a lease: nobody can delete from it
	 * through us, and a delete by its owner fails our reads cleanly */
	if (rc == -EROFS || rc == -EACCES || rc == -EPERM) {
		wstore__clear_err();
		rc = 0;
	}
	if (rc < 0)
		return rc;
	if ((rc = wstore__manifest_read_ready(out, s, id)) < 0) {
		wstore_lease_release(l);
		return rc;
	}
	*out_lease = l;
	return 0;
}

uint64_t wstore_lease_ttl_ms(const wstore_lease *l)
{
	return l->ttl_ms;
}

void wstore_lease_release(wstore_lease *l)
{
	char saved[1024];

	if (!l)
		return;
	snprintf(saved, sizeof(saved), "%s", wstore_last_error());
	if (l->started) {
		pthread_mutex_lock(&l->mu);
		l->stop = 1;
		pthread_cond_signal(&l->cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->thread, NULL);
	}
	if (l->s->b->list)
		wstore__remove(l->s, l->key);
	else
		set_write(l->s, l->id, l->holder, NULL);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	free(l);
	wstore__err(0, "%s", saved);
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

	if (holder_dead(j)) {
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
	int64_t now = wstore__now_ms();
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

int wstore__get_locked(wstore_store *s, const char *key, const char *lockname,
		       char **out, size_t *out_len)
{
	char *token = NULL;
	int rc = 0;

	rc = wstore__get_alloc(s, key, out, out_len);
	/* a value that is there is whole (replace puts it in one go); only
	 * an absent one may be the gap of a replace in progress, so only
	 * then wait for the lock (readers polling under it would starve
	 * the writers) */
	if (s->b->update || rc != WSTORE_ENOTFOUND)
		return rc;
	for (int tries = 0;; tries++) {
		rc = wstore__lock(s, lockname, &token);
		if (rc != WSTORE_EBUSY || tries >= 300)
			break;
		usleep(100000);
	}
	if (rc < 0)
		return rc;
	rc = wstore__get_alloc(s, key, out, out_len);
	wstore__unlock(s, lockname, token);
	return rc;
}

static int get_set(wstore_store *s, const char *id, char **txt, size_t *n)
{
	char key[WSTORE__KEY_MAX], lockname[WSTORE__KEY_MAX];

	set_key(key, id);
	snprintf(lockname, sizeof(lockname), "leases/%s", id);
	return wstore__get_locked(s, key, lockname, txt, n);
}

static int read_set(wstore_leases *ls, wstore_store *s, const char *id)
{
	char *txt = NULL;
	int64_t now = wstore__now_ms();
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
			    json_integer_value(exp) > now && !holder_dead(v) &&
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
		return WSTORE_ERANGE;
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

/* ---- pins and last-read times (weight/meta/models/{ckpt}) ------------- */

#define TOUCH_SLOTS 64

static void meta_key(char *out, const char *id)
{
	wstore__key_meta(out, id);
}

static void meta_lock(char *out, const char *id)
{
	snprintf(out, WSTORE__KEY_MAX, "meta/%s", id);
}

/* pinned and last_read_ms of a meta value (absent or unreadable: 0, 0). */
static void meta_parse(int *pinned, int64_t *last, const void *v, size_t n)
{
	json_t *j = v && n ? json_loadb(v, n, 0, NULL) : NULL;

	*pinned = json_is_true(json_object_get(j, "pinned"));
	*last = json_integer_value(json_object_get(j, "last_read_ms"));
	json_decref(j);
}

static int meta_dump(void **out, size_t *out_len, int pinned, int64_t last)
{
	json_t *j = json_pack("{s:I, s:b}", "last_read_ms", (json_int_t)last,
			      "pinned", pinned);
	char *txt = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	json_decref(j);
	if (!txt)
		return -ENOMEM;
	*out = txt;
	*out_len = strlen(txt);
	return 0;
}

/* ---- last-read times ----------------------------------------------------- */

static int64_t touch_interval(void)
{
	const char *e = getenv("WSTORE_LAST_READ_INTERVAL_MS");
	char *end;
	long long v;

	if (!e || !*e)
		return 60000;
	v = strtoll(e, &end, 10);
	return *end || v < 0 ? 60000 : v;
}

struct touch_edit {
	int64_t now, interval;
};

static int touch_fn(void **out, size_t *out_len, const void *old, size_t n,
		    void *vctx)
{
	struct touch_edit *t = vctx;
	int pinned;
	int64_t last;

	meta_parse(&pinned, &last, old, n);
	if (old && last > t->now - t->interval && last <= t->now)
		return 1; /* fresh enough: no write */
	return meta_dump(out, out_len, pinned, t->now);
}

/* When this process last wrote a checkpoint's last-read time. */
static struct {
	pthread_mutex_t mu;
	struct {
		const wstore_store *s;
		char id[256];
		int64_t at;
	} v[TOUCH_SLOTS];
	unsigned next;
} touched = { PTHREAD_MUTEX_INITIALIZER };

/* 1 if id was written less than interval ago, else claim a slot. */
static int recently_touched(const wstore_store *s, const char *id, int64_t now,
			    int64_t interval)
{
	int hit = 0;

	pthread_mutex_lock(&touched.mu);
	for (unsigned i = 0; i < TOUCH_SLOTS; i++)
		if (touched.v[i].s == s && !strcmp(touched.v[i].id, id)) {
			hit = now - touched.v[i].at < interval;
			if (!hit)
				touched.v[i].at = now;
			pthread_mutex_unlock(&touched.mu);
			return hit;
		}
	touched.v[touched.next].s = s;
	snprintf(touched.v[touched.next].id, sizeof(touched.v[0].id), "%s", id);
	touched.v[touched.next].at = now;
	touched.next = (touched.next + 1) % TOUCH_SLOTS;
	pthread_mutex_unlock(&touched.mu);
	return 0;
}

void wstore__touch(wstore_store *s, const char *id)
{
	char key[WSTORE__KEY_MAX], lock[WSTORE__KEY_MAX], saved[1024];
	struct touch_edit t = { wstore__now_ms(), touch_interval() };

	if (recently_touched(s, id, t.now, t.interval))
		return;
	snprintf(saved, sizeof(saved), "%s", wstore_last_error());
	meta_key(key, id);
	meta_lock(lock, id);
	wstore__rmw(s, key, lock, touch_fn, &t);
	wstore__err(0, "%s", saved);
}

int wstore__meta_remove(wstore_store *s, const char *id)
{
	char key[WSTORE__KEY_MAX];

	meta_key(key, id);
	return wstore__remove(s, key);
}

/* ---- pins ---------------------------------------------------------------- */

static int pin_fn(void **out, size_t *out_len, const void *old, size_t n,
		  void *vctx)
{
	int want = *(int *)vctx, pinned;
	int64_t last;

	meta_parse(&pinned, &last, old, n);
	if (old && pinned == want)
		return 1;
	return meta_dump(out, out_len, want, last);
}

int wstore_pin(wstore_store *s, const char *id, int pinned)
{
	char key[WSTORE__KEY_MAX], lock[WSTORE__KEY_MAX];
	wstore_manifest *m = NULL;
	int want = pinned ? 1 : 0;
	int rc = wstore_validate_checkpoint_id(id);

	if (rc < 0)
		return rc;
	rc = wstore_manifest_read(&m, s, id);
	if (rc == WSTORE_ENOTFOUND)
		return wstore__err(rc, "checkpoint '%s' not found", id);
	if (rc < 0)
		return rc;
	if (want && strcmp(m->status, "READY") != 0)
		rc = wstore__err(WSTORE_ENOTREADY,
				 "checkpoint '%s' is %s: only a READY "
				 "checkpoint can be pinned",
				 id, m->status);
	wstore_manifest_free(m);
	if (rc < 0)
		return rc;
	meta_key(key, id);
	meta_lock(lock, id);
	rc = wstore__rmw(s, key, lock, pin_fn, &want);
	if (rc < 0)
		return wstore__err(rc, "cannot %s '%s': %s",
				   want ? "pin" : "unpin", id,
				   wstore_last_error());
	return 0;
}

int wstore__meta_read(int *pinned, int64_t *last_ms, wstore_store *s,
		      const char *id)
{
	char key[WSTORE__KEY_MAX], lock[WSTORE__KEY_MAX], *txt = NULL;
	size_t n = 0;
	int rc;

	meta_key(key, id);
	meta_lock(lock, id);
	rc = wstore__get_locked(s, key, lock, &txt, &n);
	if (rc < 0 && rc != WSTORE_ENOTFOUND)
		return rc;
	meta_parse(pinned, last_ms, txt, rc == 0 ? n : 0);
	free(txt);
	return 0;
}

/* ---- for delete.c and usage.c -------------------------------------------- */

int wstore__leases_describe(wstore_store *s, const char *id, size_t *out_n,
			    char *desc, size_t cap)
{
	wstore_leases *ls = NULL;
	int64_t now = wstore__now_ms();
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
		set_key(key, id);
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
