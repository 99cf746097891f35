/*
 * lock.c - exclusive locks stored in the store itself, so that they work
 * across processes and machines: one per checkpoint id (import and delete
 * of an id never run at once) and one for the catalog on stores that lack
 * an atomic update (index objects are then updated under it).  Also the
 * wait for a lock and the read-modify-write of small records under one.
 *
 * A lock is the object "weight/locks/<name>" holding an owner record, one
 * line of JSON built with jansson: the owner's identity (owner.h: host,
 * pid, boot id, PID namespace, start time), "time" (Unix s when taken),
 * "token" (128 random bits) and a lease time, "expires_ms" and "ttl_ms",
 * that a thread of the holder renews every TTL/3 for as long as it holds
 * the lock.  It is taken with the backend's atomic update where there is
 * one, else with put_new, else (write-once stores) with put and a read
 * back: the first writer's record is the one kept.
 *
 * A lock is free when absent or empty, when its owner is DEAD (owner.c),
 * or when its owner is UNKNOWN (another kernel, another PID namespace)
 * and its lease time has run out.  An unparsable record holds the lock
 * (until `wstore admin unlock`): a record we cannot read is never free.
 * Records of older versions (no lease time) are judged in
 * docs/format.md, "Locks".
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "../common/clock.h"
#include "error.h"
#include "lock.h"
#include "names.h"
#include "owner.h"
#include "store.h"
#include "util.h"

#define LOCK_TTL_DEFAULT_MS 60000
#define LOCK_TTL_MIN_MS 100
#define LOCK_TTL_MAX_MS (24LL * 3600 * 1000)

struct wstore__held {
	wstore_store *s;
	char name[WSTORE__KEY_MAX];
	char key[WSTORE__KEY_MAX];
	unsigned renewals;
	char token[33];
	wstore__owner me;
	int64_t since_s;
	uint64_t ttl_ms;
	pthread_t thread;
	int started;
	pthread_mutex_t mu; /* guards stop */
	pthread_cond_t cv;
	int stop;
	atomic_int lost;
};

struct lock_ctx {
	wstore__held *h;
	int64_t now;
	char owner[320]; /* description of a live owner, for messages */
};

static void lock_key(char *out, const char *name)
{
	snprintf(out, WSTORE__KEY_MAX, "weight/locks/%s", name);
}

/* The two renewal slots of lock name on stores without an atomic update
 * (see renew_plain). */
static void beat_key(char *out, const char *name, unsigned slot)
{
	snprintf(out, WSTORE__KEY_MAX, "weight/leases/locks/%.400s.%u", name,
		 slot & 1u);
}

static uint64_t lock_ttl(void)
{
	const char *e = getenv("WSTORE_LOCK_TTL_MS");
	char *end;
	long long v;

	if (!e || !*e)
		return LOCK_TTL_DEFAULT_MS;
	v = strtoll(e, &end, 10);
	if (*end || v < LOCK_TTL_MIN_MS || v > LOCK_TTL_MAX_MS)
		return LOCK_TTL_DEFAULT_MS;
	return (uint64_t)v;
}

static void make_token(char token[33])
{
	unsigned char r[16];

	if (getrandom(r, sizeof(r), 0) != sizeof(r)) {
		uint64_t t = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);

		memcpy(r, &t, sizeof(t));
		t ^= (uint64_t)wclock_mono_ms();
		memcpy(r + 8, &t, sizeof(t));
	}
	for (int i = 0; i < 16; i++)
		sprintf(token + 2 * i, "%02x", r[i]);
}

/* h's record with a lease time from now, as compact JSON. */
static char *record_text(const wstore__held *h)
{
	json_t *j = json_object();
	char *txt = NULL;

	if (j && wstore__owner_to_json(j, &h->me) == 0 &&
	    json_object_set_new(j, "time", json_integer(h->since_s)) == 0 &&
	    json_object_set_new(j, "token", json_string(h->token)) == 0 &&
	    json_object_set_new(j, "ttl_ms",
				json_integer((json_int_t)h->ttl_ms)) == 0 &&
	    json_object_set_new(j, "expires_ms",
				json_integer(wclock_wall_ms() +
					     (json_int_t)h->ttl_ms)) == 0)
		txt = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	return txt;
}

/* When a record without a lease time (an older wstore's) stops holding
 * its lock if its owner cannot be judged: another host's never (it was
 * never broken before either: `admin unlock`), this host's a TTL after it
 * was taken. */
static int64_t old_expiry(json_t *j, const wstore__owner *o)
{
	char host[256];
	json_int_t t = json_integer_value(json_object_get(j, "time"));

	wstore__owner_host(host, sizeof(host));
	if (o->host[0] && strcmp(o->host, host) != 0)
		return INT64_MAX;
	return (int64_t)t * 1000 + (int64_t)lock_ttl();
}

static void describe(char *out, size_t cap, const wstore__owner *o,
		     json_int_t when)
{
	time_t t = (time_t)when;
	struct tm tm;
	char ts[32] = "?";

	if (gmtime_r(&t, &tm))
		strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(out, cap, "pid %lld on host '%.200s' since %s", o->pid,
		 o->host, ts);
}

int wstore__lock_record_held(const void *rec, size_t len, int64_t now,
			     char *owner, size_t cap)
{
	json_t *j, *exp;
	wstore__owner o;
	enum wstore__liveness live;
	int64_t until;

	if (cap)
		owner[0] = '\0';
	if (!rec || len == 0)
		return 0;
	j = json_loadb(rec, len, 0, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		snprintf(owner, cap,
			 "an unreadable owner record (if no import or delete "
			 "of it runs, remove it with 'wstore admin unlock')");
		return 1;
	}
	wstore__owner_from_json(&o, j);
	exp = json_object_get(j, "expires_ms");
	until = json_is_integer(exp) ? (int64_t)json_integer_value(exp)
				     : old_expiry(j, &o);
	live = wstore__owner_judge(&o);
	if (live == WSTORE__OWNER_DEAD ||
	    (live == WSTORE__OWNER_UNKNOWN && now >= until)) {
		json_decref(j);
		return 0;
	}
	describe(owner, cap, &o,
		 json_integer_value(json_object_get(j, "time")));
	json_decref(j);
	return 1;
}

/* The token of a record (into out), or "" when it has none. */
static void record_token(char out[33], const void *rec, size_t len)
{
	json_t *j = rec && len ? json_loadb(rec, len, 0, NULL) : NULL;
	const char *t = json_string_value(json_object_get(j, "token"));

	snprintf(out, 33, "%s", t ? t : "");
	json_decref(j);
}

static int ours(const wstore__held *h, const void *rec, size_t len)
{
	char t[33];

	record_token(t, rec, len);
	return strcmp(t, h->token) == 0;
}

/* ---- taking ------------------------------------------------------------- */

static int take_fn(void **out, size_t *out_len, const void *old, size_t old_len,
		   void *vctx)
{
	struct lock_ctx *ctx = vctx;
	char *txt;

	/* may run more than once (optimistic retries): judge the last value */
	if (wstore__lock_record_held(old, old_len, wclock_wall_ms(), ctx->owner,
				     sizeof(ctx->owner)))
		return 1;
	if (!(txt = record_text(ctx->h)))
		return -ENOMEM;
	*out = txt;
	*out_len = strlen(txt);
	return 0;
}

/*
 * On a store without an atomic update the holder renews its lease time in
 * two slots, never in the record itself (see renew_plain): a record whose
 * own lease time has run out still holds while a slot with its token has
 * time left, unless its owner is known to be dead.
 */
static int beat_fresh(wstore_store *s, const char *name, const char *rec,
		      size_t n, int64_t now)
{
	json_t *j = json_loadb(rec, n, 0, NULL);
	const char *tok = json_string_value(json_object_get(j, "token"));
	int fresh = 0;

	if (tok && wstore__owner_judge_json(j) != WSTORE__OWNER_DEAD)
		for (unsigned slot = 0; slot < 2 && !fresh; slot++) {
			char key[WSTORE__KEY_MAX], *b = NULL;
			size_t bn = 0;
			json_t *bj;

			beat_key(key, name, slot);
			if (wstore__get_alloc(s, key, &b, &bn) != 0)
				continue;
			bj = json_loadb(b, bn, 0, NULL);
			fresh = !strcmp(json_string_value(
						json_object_get(bj, "token"))
						?: "",
					tok) &&
				json_integer_value(json_object_get(
					bj, "expires_ms")) > now;
			json_decref(bj);
			free(b);
		}
	json_decref(j);
	wstore__clear_err();
	return fresh;
}

int wstore__lock_still_held(wstore_store *s, const char *name, const char *rec,
			    size_t n)
{
	int64_t now = wclock_wall_ms();
	json_t *j = json_loadb(rec, n, 0, NULL);
	int renewed = json_is_integer(json_object_get(j, "expires_ms"));
	char owner[8];

	json_decref(j);
	/* a record of an older wstore has no lease time: no renewals to
	 * go by (it is judged as before) */
	if (!renewed)
		return 0;
	return wstore__lock_record_held(rec, n, now, owner, sizeof(owner)) ||
	       beat_fresh(s, name, rec, n, now);
}

static int held_plain(wstore__held *h, const char *rec, size_t n,
		      struct lock_ctx *ctx)
{
	int64_t now = wclock_wall_ms();
	json_t *j;

	if (wstore__lock_record_held(rec, n, now, ctx->owner,
				     sizeof(ctx->owner)))
		return 1;
	if (!rec || !n || !beat_fresh(h->s, h->name, rec, n, now))
		return 0;
	j = json_loadb(rec, n, 0, NULL);
	{
		wstore__owner o;

		wstore__owner_from_json(&o, j);
		describe(ctx->owner, sizeof(ctx->owner), &o,
			 json_integer_value(json_object_get(j, "time")));
	}
	json_decref(j);
	return 1;
}

/* The renewal slots a dead or expired holder left (ours are not written
 * yet); best effort. */
static void drop_beats(wstore_store *s, const char *name)
{
	char key[WSTORE__KEY_MAX];

	for (unsigned slot = 0; slot < 2; slot++) {
		beat_key(key, name, slot);
		wstore__remove(s, key);
	}
	wstore__clear_err();
}

/*
 * Put rec under key if nobody has (put_new, or put + read back on a
 * write-once store, where the first record put is the one kept): 0 when
 * ours is the record there, 1 when another is (into *other, NULL if it
 * went meanwhile), < 0 on error.
 */
static int put_first(wstore__held *h, const char *key, const char *rec,
		     char **other, size_t *other_len)
{
	wstore_store *s = h->s;
	char *cur = NULL;
	size_t n = 0;
	int rc;

	*other = NULL;
	if (s->b->put_new)
		rc = s->b->put_new(s->b, key, rec, strlen(rec));
	else
		rc = s->b->put(s->b, key, rec, strlen(rec));
	if (rc == 0 && s->b->put_new)
		return 0;
	if (rc != 0 && rc != WSTORE_EEXISTS)
		return rc;
	rc = wstore__get_alloc(s, key, &cur, &n);
	if (rc == WSTORE_ENOTFOUND)
		return 1;
	if (rc < 0)
		return rc;
	if (ours(h, cur, n)) {
		free(cur);
		return 0;
	}
	*other = cur;
	*other_len = n;
	return 1;
}

#define CLAIM_DEPTH 3

void wstore__lock_claim_key(char *out, const char *name, const void *vrec,
			    size_t n)
{
	const unsigned char *rec = vrec;
	uint64_t x = 14695981039346656037ull; /* FNV-1a */

	for (size_t i = 0; i < n; i++)
		x = (x ^ rec[i]) * 1099511628211ull;
	snprintf(out, WSTORE__KEY_MAX,
		 "weight/leases/locks/%.400s.claim-%016" PRIx64, name, x);
}

/*
 * Taking over a stale record on a store without an atomic update: its
 * remove is the one step that is not atomic (two takers that judged the
 * same record could each remove what the other had put since).  So only
 * one taker may remove a given stale record: the one whose claim on it
 * (a record of ours under a key named after the stale record's bytes,
 * taken as the lock itself is: first kept wins) is kept.  The others back
 * off (busy).  A claim left by a taker that died before it removed the
 * record (judged as a lock record is) is claimed in turn, up to
 * CLAIM_DEPTH deep.  Returns 0 when we may remove the record (keys[0..
 * *nkeys) the claims to remove once it is gone), 1 when another taker
 * may, < 0 on error.
 */
static int claim(wstore__held *h, struct lock_ctx *ctx, const char *rec,
		 size_t n, char keys[CLAIM_DEPTH][WSTORE__KEY_MAX], int *nkeys)
{
	char *mine = record_text(h), *held = NULL, *other = NULL;
	int rc = 1;

	if (!mine)
		return -ENOMEM;
	*nkeys = 0;
	for (int depth = 0; depth < CLAIM_DEPTH; depth++) {
		wstore__lock_claim_key(keys[depth], h->name, rec, n);
		rc = put_first(h, keys[depth], mine, &other, &n);
		if (rc == 0)
			*nkeys = depth + 1; /* the dead claims below go too */
		if (rc <= 0 || !other) {
			rc = rc == 0 ? 0 : rc < 0 ? rc : 1;
			break;
		}
		/* another's claim: a live taker's stands */
		rc = 1;
		if (wstore__lock_record_held(other, n, wclock_wall_ms(),
					     ctx->owner, sizeof(ctx->owner)))
			break;
		free(held);
		held = other;
		rec = other;
		other = NULL;
	}
	free(held);
	free(other);
	free(mine);
	return *nkeys ? 0 : rc;
}

static void drop_claims(wstore_store *s, char keys[][WSTORE__KEY_MAX], int n)
{
	while (n-- > 0)
		wstore__remove(s, keys[n]);
	wstore__clear_err();
}

/*
 * Remove the stale record cur of h's lock if it is still there, under a
 * claim on it (see claim): 0 when it is gone, 1 when another taker may
 * remove it or has put a record meanwhile, < 0 on error.
 */
static int clear_stale(wstore__held *h, struct lock_ctx *ctx, const char *cur,
		       size_t n)
{
	char keys[CLAIM_DEPTH][WSTORE__KEY_MAX], *again = NULL;
	size_t n2 = 0;
	int rc, nkeys = 0;

	rc = claim(h, ctx, cur, n, keys, &nkeys);
	if (rc != 0) {
		drop_claims(h->s, keys, nkeys);
		return rc;
	}
	/* still the record judged?  (never one another taker put since) */
	rc = wstore__get_alloc(h->s, h->key, &again, &n2);
	if (rc == 0 && (n2 != n || memcmp(again, cur, n) != 0))
		rc = 1;
	else if (rc == 0)
		rc = wstore__remove(h->s, h->key);
	else if (rc == WSTORE_ENOTFOUND)
		rc = 0;
	free(again);
	/* gone for good: a later claim on it finds the key changed */
	drop_claims(h->s, keys, nkeys);
	return rc;
}

/* Stores without update: put_new, or put + read back on write-once ones. */
static int take_plain(wstore__held *h, struct lock_ctx *ctx)
{
	wstore_store *s = h->s;

	for (int tries = 0; tries < 3; tries++) {
		char *cur = NULL, *other = NULL, *rec;
		size_t n = 0;
		int rc = wstore__get_alloc(s, h->key, &cur, &n), stale = 0;

		if (rc < 0 && rc != WSTORE_ENOTFOUND)
			return rc;
		if (rc == 0 && held_plain(h, cur, n, ctx)) {
			free(cur);
			return 1;
		}
		if (rc == 0) {
			stale = 1;
			rc = clear_stale(h, ctx, cur, n);
			free(cur);
			if (rc < 0)
				return rc;
			if (rc == 1)
				continue;
		}
		if (!(rec = record_text(h)))
			return -ENOMEM;
		rc = put_first(h, h->key, rec, &other, &n);
		free(rec);
		free(other);
		if (rc == 1)
			continue;
		if (rc == 0 && stale)
			drop_beats(s, h->name);
		return rc;
	}
	snprintf(ctx->owner, sizeof(ctx->owner), "another writer");
	return 1;
}

/* ---- renewal --------------------------------------------------------------
 */

static int renew_fn(void **out, size_t *out_len, const void *old,
		    size_t old_len, void *vctx)
{
	wstore__held *h = vctx;
	char *txt;

	if (!ours(h, old, old_len)) {
		atomic_store(&h->lost, 1);
		return 1;
	}
	if (!(txt = record_text(h)))
		return -ENOMEM;
	*out = txt;
	*out_len = strlen(txt);
	return 0;
}

/*
 * Without an atomic update a record can only be replaced by remove and
 * put, and a taker that looked in between would find the lock free.  So
 * the record stays as written, and the fresh lease time goes to one of two
 * slots, "weight/leases/locks/{name}.0" and ".1", in turn: while one is
 * being replaced the other still has at least 2/3 of a TTL left.  The
 * record is read first: one that is no longer ours means the lock was lost.
 */
static void renew_plain(wstore__held *h)
{
	char key[WSTORE__KEY_MAX], *cur = NULL, *txt;
	size_t n = 0;
	json_t *j;
	int rc = wstore__get_alloc(h->s, h->key, &cur, &n);

	if (rc == 0 && !ours(h, cur, n))
		rc = WSTORE_ENOTFOUND;
	free(cur);
	if (rc == WSTORE_ENOTFOUND)
		atomic_store(&h->lost, 1);
	if (rc < 0)
		return;
	j = json_pack("{s:I, s:s}", "expires_ms",
		      (json_int_t)(wclock_wall_ms() + (int64_t)h->ttl_ms),
		      "token", h->token);
	txt = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(j);
	beat_key(key, h->name, h->renewals++);
	if (txt)
		wstore__replace(h->s, key, txt, strlen(txt));
	free(txt);
}

/* Rewrite h's record with a fresh lease time, if it is still h's (on the
 * renewal thread: its errors are nobody's, the next tick tries again). */
static void renew(wstore__held *h)
{
	if (h->s->b->update)
		h->s->b->update(h->s->b, h->key, renew_fn, h);
	else
		renew_plain(h);
	wstore__clear_err();
}

static void renew_tick(void *arg)
{
	renew(arg);
}

static void *renew_main(void *arg)
{
	wstore__held *h = arg;

	wstore__tick(&h->mu, &h->cv, &h->stop, h->ttl_ms / 3, renew_tick, h);
	return NULL;
}

static void stop_renewal(wstore__held *h)
{
	if (h->started) {
		pthread_mutex_lock(&h->mu);
		h->stop = 1;
		pthread_cond_signal(&h->cv);
		pthread_mutex_unlock(&h->mu);
		pthread_join(h->thread, NULL);
		h->started = 0;
	}
}

static void held_free(wstore__held *h)
{
	stop_renewal(h);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

int wstore__lock(wstore_store *s, const char *name, wstore__held **out)
{
	struct lock_ctx ctx = { 0 };
	wstore__held *h = calloc(1, sizeof(*h));
	int rc;

	*out = NULL;
	if (!h)
		return -ENOMEM;
	h->s = s;
	snprintf(h->name, sizeof(h->name), "%s", name);
	lock_key(h->key, name);
	make_token(h->token);
	wstore__owner_self(&h->me);
	h->since_s = (int64_t)time(NULL);
	h->ttl_ms = lock_ttl();
	pthread_mutex_init(&h->mu, NULL);
	wclock_cond_init(&h->cv);
	ctx.h = h;
	if (s->b->update) {
		rc = s->b->update(s->b, h->key, take_fn, &ctx);
		/* update() reports "left as it was" as success: the owner
		 * that take_fn found is what tells a held lock apart */
		if (rc == 0 && ctx.owner[0])
			rc = 1;
	} else {
		rc = take_plain(h, &ctx);
	}
	if (rc == 0 && wstore__thread_start(&h->thread, renew_main, h) != 0) {
		wstore__unlock(s, h);
		return wstore__err(-EAGAIN, "cannot start the lock renewal "
					    "thread");
	}
	if (rc == 0) {
		h->started = 1;
		*out = h;
		return 0;
	}
	held_free(h);
	if (rc > 0)
		return wstore__err(WSTORE_EBUSY, "locked by %s", ctx.owner);
	return rc;
}

int wstore__lock_lost(const wstore__held *h)
{
	return h && atomic_load(&h->lost);
}

void wstore__unlock(wstore_store *s, wstore__held *h)
{
	char *cur = NULL;
	size_t n = 0;
	wstore__first_err saved = { 0 };

	if (!h)
		return;
	/* unlock runs on error paths: keep the caller's error message */
	wstore__first_err_keep(&saved, 1);
	stop_renewal(h);
	/* only our own record is removed: a lock broken as stale and taken
	 * by someone else stays theirs */
	if (wstore__get_alloc(s, h->key, &cur, &n) == 0 && ours(h, cur, n)) {
		wstore__remove(s, h->key);
		if (h->renewals)
			drop_beats(s, h->name);
	}
	free(cur);
	held_free(h);
	wstore__first_err_raise(&saved);
}

/* ---- waiting for a lock, and read-modify-write under one ---------------- */

/* The backend's retry_ms, where its struct has the field. */
static uint64_t backend_retry_ms(const wstore_backend *b)
{
	return offsetof(wstore_backend, retry_ms) + sizeof(b->retry_ms) <=
			       b->struct_size
		       ? b->retry_ms
		       : 0;
}

/* Bounded per holder and in all (util.h, wstore__lock_wait_for): the
 * busy message names the holder, so a new message is a new holder. */
int wstore__lock_wait(wstore_store *s, const char *name, wstore__held **out)
{
	uint64_t per = wstore__lock_wait_for(backend_retry_ms(s->b));
	struct timespec cap = wclock_deadline_in(3 * per), one = cap;
	uint64_t t0 = wclock_mono_ms();
	char holder[512] = "";
	int rc;

	for (;;) {
		rc = wstore__lock(s, name, out);
		if (rc != WSTORE_EBUSY || wstore__nowait())
			return rc;
		if (strcmp(holder, wstore_last_error()) != 0) {
			snprintf(holder, sizeof(holder), "%s",
				 wstore_last_error());
			one = wclock_deadline_in(per);
		}
		if (wclock_passed(&one) || wclock_passed(&cap))
			return wstore__err(
				rc, "%s (gave up after %llu ms)", holder,
				(unsigned long long)(wclock_mono_ms() - t0));
		/* held only for one read and one write: poll */
		for (int i = 0; i < 10; i++) {
			if (wstore__interrupted())
				return wstore__err(WSTORE_ECANCELED,
						   "interrupted while waiting "
						   "for the lock '%s'",
						   name);
			wclock_sleep_ms(10);
		}
	}
}

int wstore__rmw(wstore_store *s, const char *key, const char *lockname,
		wstore_update_fn fn, void *ctx)
{
	wstore__held *token = NULL;
	char *old = NULL;
	void *nv = NULL;
	size_t old_len = 0, nlen = 0;
	int rc;

	if (s->b->update)
		return s->b->update(s->b, key, fn, ctx);
	rc = wstore__lock_wait(s, lockname, &token);
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
	wstore__unlock(s, token);
	return rc > 0 ? 0 : rc;
}

int wstore__get_locked(wstore_store *s, const char *key, const char *lockname,
		       char **out, size_t *out_len)
{
	wstore__held *token = NULL;
	int rc = 0;

	rc = wstore__get_alloc(s, key, out, out_len);
	/* a value that is there is whole (replace puts it in one go); only
	 * an absent one may be the gap of a replace in progress, so only
	 * then wait for the lock (readers polling under it would starve
	 * the writers) */
	if (s->b->update || rc != WSTORE_ENOTFOUND)
		return rc;
	rc = wstore__lock_wait(s, lockname, &token);
	if (rc < 0)
		return rc;
	rc = wstore__get_alloc(s, key, out, out_len);
	wstore__unlock(s, token);
	return rc;
}
