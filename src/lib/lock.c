/*
 * lock.c - exclusive locks stored in the store itself, so that they work
 * across processes and machines: one per checkpoint id (import and delete
 * of an id never run at once) and one for the catalog on stores that lack
 * an atomic update (index objects are then updated under it).
 *
 * A lock is the object "weight/locks/<name>" holding an owner record
 * {"host","pid","time","token"}.  It is taken with the backend's atomic
 * update where there is one, else with put_new, else (write-once stores)
 * with put and a read back: the first writer's record is the one kept.
 * A lock whose owner ran on this host and whose pid is gone is stale and
 * is taken over; a lock held by another host is only broken by an explicit
 * `wstore admin unlock` (docs/format.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "error.h"
#include "lock.h"
#include "names.h"
#include "owner.h"
#include "store.h"

struct lock_ctx {
	const char *record;
	char owner[256]; /* description of a live owner, for messages */
};

static void lock_key(char *out, const char *name)
{
	snprintf(out, WSTORE__KEY_MAX, "weight/locks/%s", name);
}

static char *make_record(char token[33])
{
	unsigned char r[16];
	char host[256] = "";
	char *rec;

	if (getrandom(r, sizeof(r), 0) != sizeof(r)) {
		uint64_t t = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);

		memcpy(r, &t, sizeof(t));
		memcpy(r + 8, &t, sizeof(t));
	}
	for (int i = 0; i < 16; i++)
		sprintf(token + 2 * i, "%02x", r[i]);
	wstore__owner_host(host, sizeof(host));
	if (asprintf(
		    &rec,
		    "{\"host\":\"%s\",\"pid\":%ld,\"time\":%lld,\"token\":\"%s\"}",
		    host, (long)getpid(), (long long)time(NULL), token) < 0)
		return NULL;
	return rec;
}

/*
 * Is the lock record old (len bytes) free to take?  Absent, empty or
 * unparsable records are free; so is one whose owner ran on this host and
 * no longer exists.  Otherwise describe the owner in ctx->owner.
 */
static int record_is_free(const void *old, size_t len, struct lock_ctx *ctx)
{
	const char *h;
	json_t *j;
	long long pid, when;
	int is_free = 1;

	if (!old || len == 0)
		return 1;
	j = json_loadb(old, len, 0, NULL);
	if (!j)
		return 1;
	h = json_string_value(json_object_get(j, "host"));
	pid = json_integer_value(json_object_get(j, "pid"));
	when = json_integer_value(json_object_get(j, "time"));
	if (!h || pid <= 0)
		goto out;
	if (!wstore__owner_gone(h, pid)) {
		is_free = 0;
		time_t t = (time_t)when;
		struct tm tm;
		char ts[32] = "?";

		if (gmtime_r(&t, &tm))
			strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
		snprintf(ctx->owner, sizeof(ctx->owner),
			 "pid %lld on host '%s' since %s", pid, h, ts);
	}
out:
	json_decref(j);
	return is_free;
}

static int take_fn(void **out, size_t *out_len, const void *old, size_t old_len,
		   void *vctx)
{
	struct lock_ctx *ctx = vctx;

	/* may run more than once (optimistic retries): judge the last value */
	ctx->owner[0] = '\0';
	if (!record_is_free(old, old_len, ctx))
		return 1;
	*out = strdup(ctx->record);
	if (!*out)
		return -ENOMEM;
	*out_len = strlen(ctx->record);
	return 0;
}

/* Stores without update: put_new, or put + read back on write-once ones. */
static int take_plain(wstore_store *s, const char *key, struct lock_ctx *ctx)
{
	size_t len = strlen(ctx->record);

	for (int tries = 0; tries < 3; tries++) {
		char *cur = NULL;
		size_t n = 0;
		int rc = wstore__get_alloc(s, key, &cur, &n);

		if (rc < 0 && rc != WSTORE_ENOTFOUND)
			return rc;
		if (rc == 0 && !record_is_free(cur, n, ctx)) {
			free(cur);
			return 1;
		}
		if (rc == 0) {
			/* stale: clear it, then race for it like anyone */
			rc = wstore__remove(s, key);
			free(cur);
			if (rc < 0)
				return rc;
		}
		if (s->b->put_new) {
			rc = s->b->put_new(s->b, key, ctx->record, len);
			if (rc == WSTORE_EEXISTS)
				continue;
			return rc;
		}
		rc = s->b->put(s->b, key, ctx->record, len);
		if (rc < 0)
			return rc;
		rc = wstore__get_alloc(s, key, &cur, &n);
		if (rc < 0 && rc != WSTORE_ENOTFOUND)
			return rc;
		if (rc == 0 && n == len && memcmp(cur, ctx->record, n) == 0) {
			free(cur);
			return 0;
		}
		free(cur);
	}
	snprintf(ctx->owner, sizeof(ctx->owner), "another writer");
	return 1;
}

int wstore__lock(wstore_store *s, const char *name, char **out_token)
{
	char key[WSTORE__KEY_MAX], token[33];
	struct lock_ctx ctx = { 0 };
	char *rec = make_record(token);
	int rc;

	*out_token = NULL;
	if (!rec)
		return -ENOMEM;
	lock_key(key, name);
	ctx.record = rec;
	if (s->b->update) {
		rc = s->b->update(s->b, key, take_fn, &ctx);
		/* update() reports "left as it was" as success: the owner
		 * that take_fn found is what tells a held lock apart */
		if (rc == 0 && ctx.owner[0])
			rc = 1;
	} else {
		rc = take_plain(s, key, &ctx);
	}
	if (rc == 0) {
		*out_token = rec;
		return 0;
	}
	free(rec);
	if (rc > 0)
		return wstore__err(WSTORE_EBUSY, "locked by %s", ctx.owner);
	return rc;
}

void wstore__unlock(wstore_store *s, const char *name, char *record)
{
	char key[WSTORE__KEY_MAX];
	char *cur = NULL;
	size_t n = 0;

	wstore__first_err saved = { 0 };

	if (!record)
		return;
	/* unlock runs on error paths: keep the caller's error message */
	wstore__first_err_keep(&saved, 1);
	lock_key(key, name);
	/* only our own record is removed: a lock broken as stale and taken
	 * by someone else stays theirs */
	if (wstore__get_alloc(s, key, &cur, &n) == 0 && n == strlen(record) &&
	    memcmp(cur, record, n) == 0)
		wstore__remove(s, key);
	free(cur);
	free(record);
	wstore__first_err_raise(&saved);
}

/* ---- waiting for a lock, and read-modify-write under one ---------------- */

int wstore__lock_wait(wstore_store *s, const char *name, char **out_token)
{
	int rc;

	for (int tries = 0;; tries++) {
		rc = wstore__lock(s, name, out_token);
		if (rc != WSTORE_EBUSY || tries >= 300)
			return rc;
		usleep(100000); /* held only for one read and one write */
	}
}

int wstore__rmw(wstore_store *s, const char *key, const char *lockname,
		wstore_update_fn fn, void *ctx)
{
	char *token = NULL, *old = NULL;
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
	wstore__unlock(s, lockname, token);
	return rc > 0 ? 0 : rc;
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
	rc = wstore__lock_wait(s, lockname, &token);
	if (rc < 0)
		return rc;
	rc = wstore__get_alloc(s, key, out, out_len);
	wstore__unlock(s, lockname, token);
	return rc;
}
