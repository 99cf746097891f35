/*
 * meta.c - pins and last-read times: the record "weight/meta/models/{ckpt}",
 * JSON {"last_read_ms","pinned"} (docs/format.md, "Pins and last-read
 * times").  A reader writes the last-read time when it takes its lease, at
 * most once per checkpoint per minute (the process remembers when it last
 * wrote, and the update leaves a fresh enough record alone).  The record
 * is read-modified-written (lock.c), so a pin and a reader never lose each
 * other's field.
 *
 * The last-read time is advisory: a reader never waits for it.  Its write
 * is skipped when the record is busy (another process holds its lock or
 * its file lock, be it stopped or slow: wstore__lock_nowait), and when the
 * checkpoint has no manifest (a mistyped id leaves no record behind).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../common/clock.h"
#include "error.h"
#include "lock.h"
#include "manifest.h"
#include "meta.h"
#include "names.h"
#include "store.h"
#include "util.h"
#include "wstore/lease.h"

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

/* Whether the record needs a write at all: not when it is fresh enough
 * (a plain read: the common case costs no lock), nor when the checkpoint
 * has no manifest. */
static int touch_needed(wstore_store *s, const char *id, const char *key,
			const struct touch_edit *t)
{
	char mkey[WSTORE__KEY_MAX], *txt = NULL;
	size_t n = 0;
	uint64_t size = 0;
	int pinned, rc = wstore__get_alloc(s, key, &txt, &n);
	int64_t last;

	if (rc < 0 && rc != WSTORE_ENOTFOUND)
		return 0;
	meta_parse(&pinned, &last, txt, rc == 0 ? n : 0);
	free(txt);
	if (rc == 0 && last > t->now - t->interval && last <= t->now)
		return 0;
	wstore__key_manifest(mkey, id);
	return s->b->size(s->b, mkey, &size) == 0;
}

void wstore__touch(wstore_store *s, const char *id)
{
	char key[WSTORE__KEY_MAX], lock[WSTORE__KEY_MAX];
	struct touch_edit t = { wclock_wall_ms(), touch_interval() };
	wstore__first_err saved = { 0 };
	int was;

	if (recently_touched(s, id, t.now, t.interval))
		return;
	wstore__first_err_keep(&saved, 1);
	meta_key(key, id);
	meta_lock(lock, id);
	if (touch_needed(s, id, key, &t)) {
		was = wstore__lock_nowait(1);
		wstore__rmw(s, key, lock, touch_fn, &t);
		wstore__lock_nowait(was);
	}
	wstore__clear_err();
	wstore__first_err_raise(&saved);
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
