/*
 * gc.c - garbage collection of orphaned objects, and the admin side of
 * the lock objects (inspect and break a lock).
 *
 * What gc removes: keys under "weight/models/{ckpt}/" that are neither the
 * checkpoint's manifest nor a chunk listed by some manifest (READY or
 * FAILED), the import intent records "weight/intents/models/{ckpt}" of
 * imports that are no longer running, the pin and last-read records
 * "weight/meta/models/{ckpt}" of checkpoints without a manifest, and on
 * the file store the temp
 * files of puts older than the grace period.  Crashed imports leave the
 * first two kinds (chunks written before the FAILED manifest could be, and
 * their intent record), crashed puts the third.
 *
 * Why it is safe against a running import: every import and delete of an
 * id holds the lock "weight/locks/models/{ckpt}" from before it writes its
 * first chunk until after its manifest is published (or removed), and gc
 * examines each checkpoint while holding that same lock, re-reading the
 * manifest under it.  A checkpoint whose lock is held by a live owner is
 * skipped; chunk keys are deterministic, so without the lock gc could
 * remove a chunk that a new import has just rewritten.  The grace period
 * therefore only matters for temp files, which no lock covers.
 *
 * Passes: list every key under "weight/models/", every lock under
 * "weight/locks/models/" and every intent under "weight/intents/models/"
 * (an id may have only a stale lock or an intent left); read
 * every manifest once to collect the chunk keys referenced across
 * checkpoints (chunk keys are opaque: a manifest may list another
 * checkpoint's); then per id, under its lock, remove what is unreferenced.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "../common/clock.h"
#include "abi.h"
#include "backends/helpers.h"
#include "error.h"
#include "intent.h"
#include "lock.h"
#include "manifest.h"
#include "names.h"
#include "owner.h"
#include "store.h"
#include "lease_int.h"

#define GC_DEFAULT_GRACE 3600

static const char models_prefix[] = "weight/models/";
static const char locks_prefix[] = "weight/locks/models/";
static const char intents_prefix[] = "weight/intents/models/";
static const char meta_prefix[] = "weight/meta/models/";

/* A growable array of strings, sorted once filled. */
struct strv {
	char **v;
	size_t n, cap;
};

static int strv_add(struct strv *sv, const char *s, size_t len)
{
	if (sv->n == sv->cap) {
		size_t cap = sv->cap ? sv->cap * 2 : 64;
		char **nv = realloc(sv->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		sv->v = nv;
		sv->cap = cap;
	}
	sv->v[sv->n] = strndup(s, len);
	if (!sv->v[sv->n])
		return -ENOMEM;
	sv->n++;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sort and drop duplicates. */
static void strv_sort(struct strv *sv)
{
	size_t out = 0;

	if (sv->n == 0)
		return;
	qsort(sv->v, sv->n, sizeof(char *), cmp_str);
	for (size_t i = 1; i < sv->n; i++) {
		if (strcmp(sv->v[i], sv->v[out]) == 0)
			free(sv->v[i]);
		else
			sv->v[++out] = sv->v[i];
	}
	sv->n = out + 1;
}

static int strv_has(const struct strv *sv, const char *s)
{
	return sv->n && bsearch(&s, sv->v, sv->n, sizeof(char *), cmp_str);
}

static void strv_free(struct strv *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	memset(sv, 0, sizeof(*sv));
}

struct gc {
	wstore_store *s;
	const wstore_gc_options *o;
	wstore_gc_stats *st;
	struct strv keys;      /* every key under weight/models/ */
	struct strv ids;       /* checkpoint ids seen (keys and locks) */
	struct strv refs;      /* chunk keys any manifest lists */
	wstore__first_err err; /* first failure; gc goes on */
};

static void gc_fail(struct gc *g, int rc)
{
	wstore__first_err_keep(&g->err, rc);
}

/* The id in "<prefix>{id}[/...]" if it is a valid checkpoint id. */
static int add_id(struct gc *g, const char *key, size_t plen)
{
	const char *id = key + plen, *slash = strchr(id, '/');
	size_t len = slash ? (size_t)(slash - id) : strlen(id);
	char buf[256];

	if (len == 0 || len >= sizeof(buf))
		return 0;
	memcpy(buf, id, len);
	buf[len] = '\0';
	if (wstore_validate_checkpoint_id(buf) < 0) {
		wstore__clear_err();
		return 0;
	}
	return strv_add(&g->ids, buf, len);
}

static int on_model_key(const char *key, void *ctx)
{
	struct gc *g = ctx;
	int rc = strv_add(&g->keys, key, strlen(key));

	return rc ? rc : add_id(g, key, sizeof(models_prefix) - 1);
}

static int on_lock_key(const char *key, void *ctx)
{
	struct gc *g = ctx;

	/* "weight/locks/models/{id}" only: nothing deeper is a lock */
	if (strchr(key + sizeof(locks_prefix) - 1, '/'))
		return 0;
	return add_id(g, key, sizeof(locks_prefix) - 1);
}

static int manifest_refs(struct strv *out, const wstore_manifest *m)
{
	for (size_t i = 0; i < m->nfiles; i++)
		for (uint64_t c = 0; c < m->files[i].nchunks; c++) {
			const char *k = m->files[i].chunks[c];
			int rc = strv_add(out, k, strlen(k));

			if (rc)
				return rc;
		}
	return 0;
}

static int on_intent_key(const char *key, void *ctx)
{
	struct gc *g = ctx;

	if (strchr(key + sizeof(intents_prefix) - 1, '/'))
		return 0;
	return add_id(g, key, sizeof(intents_prefix) - 1);
}

/* a pin and last-read record whose checkpoint may be gone (a delete cut
 * short, or a reader of an id that never existed, before readers checked) */
static int on_meta_key(const char *key, void *ctx)
{
	struct gc *g = ctx;

	if (strchr(key + sizeof(meta_prefix) - 1, '/'))
		return 0;
	return add_id(g, key, sizeof(meta_prefix) - 1);
}

/* Pass 1 and 2: what exists, and what every readable manifest lists. */
static int collect(struct gc *g)
{
	wstore_backend *b = g->s->b;
	int rc = b->list(b, models_prefix, on_model_key, g);

	if (rc == 0)
		rc = b->list(b, locks_prefix, on_lock_key, g);
	if (rc == 0)
		rc = b->list(b, intents_prefix, on_intent_key, g);
	if (rc == 0)
		rc = b->list(b, meta_prefix, on_meta_key, g);
	if (rc)
		return rc;
	strv_sort(&g->keys);
	strv_sort(&g->ids);
	for (size_t i = 0; i < g->ids.n; i++) {
		wstore_manifest *m = NULL;

		rc = wstore_manifest_read(&m, g->s, g->ids.v[i]);
		if (rc == 0)
			rc = manifest_refs(&g->refs, m);
		wstore_manifest_free(m);
		if (rc == WSTORE_ENOTFOUND || rc == WSTORE_ECORRUPT)
			rc = 0; /* handled per id in pass 3 */
		if (rc)
			return rc;
	}
	strv_sort(&g->refs);
	wstore__clear_err();
	return 0;
}

static void skip(struct gc *g, const char *id, int code, const char *msg)
{
	g->st->skipped++;
	if (g->o->on_skip)
		g->o->on_skip(id, code, msg, g->o->on_skip_ctx);
}

/* ---- pass 3: per checkpoint ------------------------------------------ */

static void remove_orphan(struct gc *g, const char *key)
{
	wstore_backend *b = g->s->b;
	uint64_t bytes = 0;
	int rc = b->size(b, key, &bytes), removed = 0;

	if (rc == WSTORE_ENOTFOUND)
		return; /* gone since it was listed */
	if (rc < 0)
		bytes = 0;
	g->st->orphans++;
	g->st->orphan_bytes += bytes;
	if (!g->o->dry_run) {
		rc = wstore__remove(g->s, key);
		if (rc == 0) {
			removed = 1;
			g->st->removed++;
		} else {
			wstore__err(rc, "cannot remove orphan '%s': %s", key,
				    wstore_last_error());
			gc_fail(g, rc);
		}
	}
	if (g->o->on_orphan)
		g->o->on_orphan(key, bytes, removed, g->o->on_orphan_ctx);
}

/* Keys of id (from the listing) that neither its manifest m (may be
 * NULL) nor any other manifest lists. */
static int sweep_id(struct gc *g, const char *id, const wstore_manifest *m)
{
	char prefix[WSTORE__KEY_MAX], mkey[WSTORE__KEY_MAX];
	struct strv own = { 0 };
	size_t plen, i;
	int rc = m ? manifest_refs(&own, m) : 0;

	if (rc)
		return rc;
	strv_sort(&own);
	wstore__key_ckpt_prefix(prefix, id);
	wstore__key_manifest(mkey, id);
	plen = strlen(prefix);
	/* keys are sorted: the id's keys are one run */
	for (i = 0; i < g->keys.n && strcmp(g->keys.v[i], prefix) < 0; i++)
		;
	for (; i < g->keys.n && !strncmp(g->keys.v[i], prefix, plen); i++) {
		const char *k = g->keys.v[i];

		if (!strcmp(k, mkey) || strv_has(&own, k) ||
		    strv_has(&g->refs, k))
			continue;
		remove_orphan(g, k);
	}
	strv_free(&own);
	return 0;
}

/* With the id's lock held, an intent record belongs to an import that
 * died (or that published and died before dropping it): the sweep has
 * removed its unreferenced chunks, so the record goes too. */
static void drop_intent(struct gc *g, const char *id)
{
	char key[WSTORE__KEY_MAX];
	int rc;

	/* its marks (intent.c) first: the record is what finds them again */
	if (!g->o->dry_run && (rc = wstore__intent_marks_drop(g->s, id)) < 0)
		gc_fail(g, wstore__err(rc,
				       "cannot remove the marks of '%s': "
				       "%s",
				       id, wstore_last_error()));
	wstore__key_intent(key, id);
	remove_orphan(g, key);
}

/* With the id's lock held and no manifest, nothing can pin or read the
 * checkpoint: its pin and last-read record goes. */
static void drop_meta(struct gc *g, const char *id)
{
	char key[WSTORE__KEY_MAX];

	wstore__key_meta(key, id);
	remove_orphan(g, key);
}

/* Dry run: no lock taken; a live owner's checkpoint is skipped. */
static int lock_is_live(struct gc *g, const char *id, char *owner, size_t cap)
{
	char key[WSTORE__KEY_MAX], *rec = NULL, who[320];
	size_t n = 0;
	int live = 0, rc;

	snprintf(key, sizeof(key), "%s%s", locks_prefix, id);
	rc = wstore__get_alloc(g->s, key, &rec, &n);
	if (rc == 0 && wstore__lock_record_held(rec, n, wclock_wall_ms(), who,
						sizeof(who))) {
		live = 1;
		snprintf(owner, cap, "locked by %s", who);
	} else if (rc < 0 && rc != WSTORE_ENOTFOUND) {
		/* a lock that could not be read may be held */
		live = 1;
		snprintf(owner, cap, "cannot read its lock: %s",
			 wstore_last_error());
	}
	free(rec);
	wstore__clear_err();
	return live;
}

/* gc never touches a checkpoint that is being read (lease.c), nor one
 * whose leases it cannot read: 1 (busy), the read's error (msg says
 * it), or 0. */
static int being_read(struct gc *g, const char *id, char *msg, size_t cap)
{
	char desc[900];
	size_t n = 0;
	int rc = wstore__leases_describe(g->s, id, &n, desc, sizeof(desc));

	if (rc < 0) {
		snprintf(msg, cap, "%s", wstore_last_error());
		return rc;
	}
	if (n)
		snprintf(msg, cap, "being read: %s", desc);
	return n > 0;
}

static void gc_id(struct gc *g, const char *id)
{
	char lockname[WSTORE__KEY_MAX], msg[1024];
	wstore__held *token = NULL;
	wstore_manifest *m = NULL;
	int rc;

	g->st->checkpoints++;
	snprintf(lockname, sizeof(lockname), "models/%s", id);
	if (g->o->dry_run) {
		if (lock_is_live(g, id, msg, sizeof(msg))) {
			skip(g, id, WSTORE_EBUSY, msg);
			return;
		}
	} else {
		rc = wstore__lock(g->s, lockname, &token);
		if (rc == WSTORE_EBUSY) {
			skip(g, id, rc, wstore_last_error());
			return;
		}
		if (rc < 0) {
			gc_fail(g, rc);
			return;
		}
	}
	if ((rc = being_read(g, id, msg, sizeof(msg))) != 0) {
		skip(g, id, rc > 0 ? WSTORE_EBUSY : rc, msg);
		wstore__unlock(g->s, token);
		return;
	}
	rc = wstore_manifest_read(&m, g->s, id);
	if (rc == WSTORE_ECORRUPT) {
		snprintf(msg, sizeof(msg), "%s; run 'wstore model delete %s'",
			 wstore_last_error(), id);
		skip(g, id, rc, msg);
	} else if (rc == 0 || rc == WSTORE_ENOTFOUND) {
		int absent = rc == WSTORE_ENOTFOUND;

		rc = sweep_id(g, id, m);
		if (rc < 0)
			gc_fail(g, rc);
		else
			drop_intent(g, id);
		if (rc >= 0 && absent)
			drop_meta(g, id);
	} else {
		gc_fail(g, rc);
	}
	wstore_manifest_free(m);
	/* also removes a stale lock of a dead owner, taken over above */
	wstore__unlock(g->s, token);
}

/* ---- temp files ------------------------------------------------------- */

/* Temp files of a checkpoint whose lock a live owner holds are its
 * import's (or delete's) writes in flight: never touched, whatever the
 * grace.  (The file backend also keeps those whose writer is alive.) */
static int keep_temp(const char *path, void *ctx)
{
	struct gc *g = ctx;
	const char *id = path + sizeof(models_prefix) - 1, *slash;
	char buf[256], owner[512];

	if (strncmp(path, models_prefix, sizeof(models_prefix) - 1) != 0 ||
	    !(slash = strchr(id, '/')) || (size_t)(slash - id) >= sizeof(buf))
		return 0;
	memcpy(buf, id, (size_t)(slash - id));
	buf[slash - id] = '\0';
	return lock_is_live(g, buf, owner, sizeof(owner));
}

static void on_temp(const char *path, uint64_t bytes, int removed, void *ctx)
{
	struct gc *g = ctx;

	g->st->temps++;
	g->st->temp_bytes += bytes;
	if (removed)
		g->st->removed++;
	if (g->o->on_orphan)
		g->o->on_orphan(path, bytes, removed, g->o->on_orphan_ctx);
}

int wstore_gc(wstore_gc_stats *out, wstore_store *s,
	      const wstore_gc_options *src)
{
	wstore_gc_options oc;
	const wstore_gc_options *o = &oc;
	struct gc g = { .s = s, .o = o };
	wstore_gc_stats stats = { 0 };
	int64_t grace;
	int rc;

	g.st = &stats;
	if (out)
		memset(out, 0, sizeof(*out));
	if (!src)
		return wstore__err(WSTORE_EINVAL, "gc options missing");
	if ((rc = wstore__gc_opts(&oc, src)) < 0)
		return rc;
	if (!s->b->list)
		return wstore__err(
			WSTORE_EUNSUPPORTED,
			"store '%s' cannot list its keys, so gc cannot find orphans there (delete checkpoints with 'wstore model delete')",
			s->label ? s->label : s->b->name);
	grace = o->grace_seconds < 0 ? GC_DEFAULT_GRACE : o->grace_seconds;
	rc = collect(&g);
	if (rc < 0) {
		wstore__err(rc, "gc cannot list the store: %s",
			    wstore_last_error());
		goto out;
	}
	for (size_t i = 0; i < g.ids.n; i++)
		gc_id(&g, g.ids.v[i]);
	if (WSTORE__HAS(s->b, sweep_temps)) {
		rc = s->b->sweep_temps(s->b, grace, o->dry_run, NULL, keep_temp,
				       on_temp, &g);
		if (rc < 0)
			gc_fail(&g, rc);
	}
	rc = wstore__first_err_raise(&g.err);
out:
	strv_free(&g.keys);
	strv_free(&g.ids);
	strv_free(&g.refs);
	if (out)
		*out = stats;
	return rc;
}

/* ---- admin: lock owners ----------------------------------------------- */

static int lock_key_of(char *out, const char *name)
{
	if (!name || (strcmp(name, "catalog") != 0 &&
		      (strncmp(name, "models/", 7) != 0 ||
		       wstore_validate_checkpoint_id(name + 7) < 0)))
		return wstore__err(
			WSTORE_EINVAL,
			"invalid lock name '%s': expected 'catalog' or 'models/<checkpoint id>'",
			name ? name : "");
	snprintf(out, WSTORE__KEY_MAX, "weight/locks/%s", name);
	return 0;
}

/* The raw record of lock name (NUL-terminated copy in *out). */
static int lock_record(char **out, size_t *out_len, wstore_store *s,
		       const char *name, char *key)
{
	int rc = lock_key_of(key, name);

	*out = NULL;
	if (rc)
		return rc;
	rc = wstore__get_alloc(s, key, out, out_len);
	if (rc == WSTORE_ENOTFOUND)
		return wstore__err(rc, "lock '%s' is not held", name);
	return rc;
}

/* 1 alive, 0 dead, -1 cannot tell (another kernel or PID namespace, an
 * older record, an unreadable one) (owner.c) */
static int owner_state(const char *rec, size_t len)
{
	json_t *j = json_loadb(rec, len, 0, NULL);
	enum wstore__liveness live = wstore__owner_judge_json(j);

	json_decref(j);
	return live == WSTORE__OWNER_ALIVE  ? 1
	       : live == WSTORE__OWNER_DEAD ? 0
					    : -1;
}

int wstore_lock_owner(char **out, int *out_live, wstore_store *s,
		      const char *name)
{
	char key[WSTORE__KEY_MAX], *rec = NULL;
	size_t n = 0;
	int rc = lock_record(&rec, &n, s, name, key);

	*out = NULL;
	if (out_live)
		*out_live = 0;
	if (rc)
		return rc;
	if (out_live)
		*out_live = owner_state(rec, n);
	/* for display on one line: no control bytes, no trailing space */
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)rec[i] < 0x20 || rec[i] == 0x7f)
			rec[i] = ' ';
	while (n > 0 && rec[n - 1] == ' ')
		rec[--n] = '\0';
	*out = rec;
	return 0;
}

int wstore_lock_break(wstore_store *s, const char *name, int force)
{
	char key[WSTORE__KEY_MAX], *rec = NULL, *again = NULL;
	size_t n = 0, n2 = 0;
	int live, rc = lock_record(&rec, &n, s, name, key);

	if (rc)
		return rc;
	live = owner_state(rec, n);
	if (live == 1 && !force) {
		free(rec);
		return wstore__err(
			WSTORE_EBUSY,
			"lock '%s' is held by a live process on this host; use --force to break it anyway",
			name);
	}
	/* a holder this process cannot judge (another host or PID
	 * namespace: a pod's lock) is alive while it renews its lock */
	if (live < 0 && !force && wstore__lock_still_held(s, name, rec, n)) {
		free(rec);
		return wstore__err(
			WSTORE_EBUSY,
			"lock '%s' is held from another host or PID namespace "
			"and its holder still renews it; it is taken over once "
			"the renewals stop (use --force only if that holder is "
			"known to be gone)",
			name);
	}
	/* narrow the window in which the lock changes hands under us */
	rc = wstore__get_alloc(s, key, &again, &n2);
	if (rc == 0 && (n2 != n || memcmp(again, rec, n) != 0))
		rc = wstore__err(
			WSTORE_EBUSY,
			"lock '%s' changed owner while being broken; look again",
			name);
	else if (rc == WSTORE_ENOTFOUND)
		rc = wstore__err(rc, "lock '%s' is not held", name);
	else if (rc == 0)
		rc = wstore__remove(s, key);
	free(again);
	free(rec);
	return rc;
}
