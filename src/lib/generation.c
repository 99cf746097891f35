/*
 * generation.c - generations (see generation.h and docs/format.md,
 * "Generations"): a reader never hands out bytes of another import of
 * the checkpoint it opened.
 *
 * Every import of an id writes its chunks under the same keys, so a
 * reader that opened one import and reads on after a `delete --force` and
 * a new import would get the new import's bytes for the chunks it reads
 * late.  So an import first writes "weight/meta/generations/{ckpt}", a
 * record with a random id, and only then its first chunk; a delete removes
 * the record before its first chunk goes.  A reader notes the record
 * before it reads the manifest and again after (equal: the manifest is
 * that import's), then after each read, before handing the bytes out,
 * confirms that the record is still the one it noted.  A read that got a
 * byte another import wrote (or met a chunk a delete removed) happened
 * after that import wrote its record (or the delete removed it), so the
 * confirmation that follows sees the change: the store orders each key's
 * writes and reads, and the writer waited for the record's write to
 * finish before it began the chunk's.  No clock is involved, and it holds
 * across the servers of a Redis Cluster (each key on its own master).
 *
 * Checkpoints without a record of their own (imported by another tool of
 * the format, or by an older wstore: the record is missing, or names
 * another import's created_at) are confirmed by reading the manifest again
 * instead and comparing every file record (identical sha256 and chunk list
 * means identical bytes); the raw manifest last judged is kept, so an
 * unchanged manifest costs one get and a memcmp (an fstat on a store of
 * local files).
 *
 * On a store of local files the record is held open from the first
 * reading: it is replaced by a rename and removed by an unlink, never
 * rewritten, so "still the one noted" is its open file still having a
 * link (one fstat per confirmation instead of a walk of the key's path).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "error.h"
#include "generation.h"
#include "names.h"
#include "store.h"

#define REC_MAX 1024 /* a record of ours is at most ~350 bytes */

/* GONE: no record or manifest any more (a delete, or a store that lost
 * it); CHANGED: another import's. */
enum verdict { CHANGED = 0, SAME = 1, DELETING = 2, GONE = 3 };

struct wstore__guard {
	wstore_store *s;
	char key[WSTORE__KEY_MAX];  /* the generation record */
	char mkey[WSTORE__KEY_MAX]; /* the manifest */
	const wstore_manifest *m;   /* bound; owned by the caller */
	int by_gen;
	char gen[65]; /* the record's generation id when by_gen, else "" */
	char *rec;    /* the record noted at step 1, NULL if absent */
	size_t rec_len;
	int fd;		      /* the record's file, or -1 */
	pthread_mutex_t lock; /* guards last, last_len, last_v, mfd */
	char *last;	      /* manifest mode: raw manifest last judged */
	size_t last_len;
	int last_v;
	int mfd; /* stores of local files: the file of last, or -1 */
};

/* ---- the record ---------------------------------------------------------- */

int wstore__gen_write(wstore_store *s, const wstore_manifest *m)
{
	char key[WSTORE__KEY_MAX], gen[33], *json;
	unsigned char r[16];
	json_t *o;
	int rc;

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return wstore__errc(-errno, "cannot make a generation id");
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(gen + 2 * i, 3, "%02x", r[i]);
	o = json_pack("{s:s, s:I, s:s}", "checkpoint_id", m->checkpoint_id,
		      "created_at", (json_int_t)m->created_at, "generation",
		      gen);
	json = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	if (!json)
		return wstore__errc(-ENOMEM,
				    "cannot write a generation record");
	wstore__key_generation(key, m->checkpoint_id);
	rc = wstore__replace(s, key, json, strlen(json));
	free(json);
	if (rc < 0)
		return wstore__err(rc, "cannot write '%s': %s", key,
				   wstore_last_error());
	return 0;
}

int wstore__gen_remove(wstore_store *s, const char *ckpt)
{
	char key[WSTORE__KEY_MAX];
	int rc;

	wstore__key_generation(key, ckpt);
	rc = wstore__remove(s, key);
	if (rc < 0)
		return wstore__err(rc, "cannot remove '%s': %s", key,
				   wstore_last_error());
	return 0;
}

/* Whether the record is the import's that wrote m. */
static int record_names(const char *rec, size_t len, const wstore_manifest *m)
{
	json_t *o = json_loadb(rec, len, JSON_REJECT_DUPLICATES, NULL);
	const char *id = json_string_value(json_object_get(o, "checkpoint_id"));
	json_t *at = json_object_get(o, "created_at");
	int ok = id && strcmp(id, m->checkpoint_id) == 0 &&
		 json_is_integer(at) &&
		 json_integer_value(at) == (json_int_t)m->created_at &&
		 json_is_string(json_object_get(o, "generation"));

	json_decref(o);
	return ok;
}

/* Step 1 on a store of local files: open the record and read it. */
static int note_fd(wstore__guard *g)
{
	wstore_backend *b = g->s->b;
	struct stat st;
	ssize_t n;
	int rc = b->open_fd(b, g->key, &g->fd);

	if (rc == WSTORE_ENOTFOUND) {
		wstore__clear_err();
		g->fd = -1;
		return 0;
	}
	if (rc < 0)
		return rc;
	if (fstat(g->fd, &st) < 0)
		return wstore__errc(-errno, "cannot stat '%s'", g->key);
	if (st.st_size > REC_MAX)
		st.st_size = REC_MAX; /* not ours: only bind reads it */
	if (!(g->rec = malloc((size_t)st.st_size + 1)))
		return -ENOMEM;
	n = pread(g->fd, g->rec, (size_t)st.st_size, 0);
	if (n < 0)
		return wstore__errc(-errno, "cannot read '%s'", g->key);
	g->rec_len = (size_t)n;
	return 0;
}

int wstore__guard_new(wstore__guard **out, wstore_store *s, const char *ckpt)
{
	wstore__guard *g;
	int rc;

	*out = NULL;
	if ((rc = wstore_validate_checkpoint_id(ckpt)) < 0)
		return rc;
	if (!(g = calloc(1, sizeof(*g))))
		return wstore__errc(-ENOMEM, "cannot open checkpoint '%s'",
				    ckpt);
	g->s = s;
	g->fd = -1;
	g->mfd = -1;
	pthread_mutex_init(&g->lock, NULL);
	wstore__key_generation(g->key, ckpt);
	wstore__key_manifest(g->mkey, ckpt);
	if (wstore__local_files(s)) {
		rc = note_fd(g);
	} else {
		rc = wstore__get_alloc(s, g->key, &g->rec, &g->rec_len);
		if (rc == WSTORE_ENOTFOUND) {
			wstore__clear_err();
			rc = 0;
		}
	}
	if (rc < 0) {
		wstore__guard_free(g);
		return rc;
	}
	*out = g;
	return 0;
}

/* record_same for a record larger than any of ours (not ours, so only
 * bind asks): read it whole. */
static int large_record_same(wstore__guard *g)
{
	char *now = NULL;
	size_t len = 0;
	int rc = wstore__get_alloc(g->s, g->key, &now, &len);

	if (rc == WSTORE_ENOTFOUND) {
		wstore__clear_err();
		return GONE;
	}
	if (rc < 0)
		return rc;
	rc = len == g->rec_len && memcmp(now, g->rec, len) == 0 ? SAME
								: CHANGED;
	free(now);
	return rc;
}

/* Whether the record is still the one noted at step 1: SAME, CHANGED or
 * a store error. */
static int record_same(wstore__guard *g)
{
	wstore_backend *b = g->s->b;
	char buf[REC_MAX + 1];
	struct stat st;
	size_t len = 0;
	int rc;

	if (g->fd >= 0) {
		if (fstat(g->fd, &st) < 0)
			return wstore__errc(-errno, "cannot stat '%s'", g->key);
		return st.st_nlink > 0 ? SAME : CHANGED;
	}
	if (g->rec_len > REC_MAX)
		return large_record_same(g);
	rc = b->get(b, g->key, buf, sizeof(buf), &len);
	if (rc == 0 && len == 0 && (b->flags & WSTORE_BACKEND_EMPTY_MISSING))
		rc = WSTORE_ENOTFOUND;
	if (rc == WSTORE_ENOTFOUND) {
		wstore__clear_err();
		return g->rec ? GONE : SAME;
	}
	if (rc == WSTORE_ERANGE)
		return CHANGED;
	if (rc < 0)
		return wstore__err(rc, "cannot read '%s': %s", g->key,
				   wstore_last_error());
	return g->rec && len == g->rec_len && memcmp(buf, g->rec, len) == 0
		       ? SAME
		       : CHANGED;
}

/* Copy the generation id of the record noted into g->gen. */
static void note_generation(wstore__guard *g)
{
	json_t *o = json_loadb(g->rec, g->rec_len, 0, NULL);
	const char *gen = json_string_value(json_object_get(o, "generation"));

	snprintf(g->gen, sizeof(g->gen), "%s", gen ? gen : "");
	json_decref(o);
}

int wstore__guard_bind(wstore__guard *g, const wstore_manifest *m)
{
	int v = record_same(g);

	if (v < 0)
		return v;
	if (v == CHANGED || v == GONE)
		return wstore__err(WSTORE_ECHANGED,
				   "checkpoint '%s' changed while it was "
				   "being opened",
				   m->checkpoint_id);
	g->m = m;
	g->by_gen = g->rec && record_names(g->rec, g->rec_len, m);
	if (g->by_gen)
		note_generation(g);
	return 0;
}

const char *wstore__guard_generation(const wstore__guard *g)
{
	return g->gen;
}

int wstore__guard_by_generation(const wstore__guard *g)
{
	return g->by_gen;
}

/* ---- confirming by the manifest ------------------------------------------ */

static int same_record(const wstore__file_rec *a, const wstore__file_rec *b)
{
	if (a->size != b->size || a->chunk_size != b->chunk_size ||
	    a->nchunks != b->nchunks || strcmp(a->sha256, b->sha256) != 0)
		return 0;
	for (uint64_t c = 0; c < a->nchunks; c++)
		if (strcmp(a->chunks[c], b->chunks[c]) != 0)
			return 0;
	return 1;
}

/* The verdict on a manifest now in the store, against the bound one:
 * every file record identical (SAME, or DELETING when it is no longer
 * READY, as while a delete waits for its readers), else CHANGED. */
static int judge_manifest(const wstore__guard *g, const char *raw, size_t len)
{
	const wstore_manifest *m = g->m;
	wstore_manifest *now = NULL;
	int v = CHANGED;

	if (wstore_manifest_parse(&now, raw, len) < 0) {
		wstore__clear_err();
		return CHANGED;
	}
	if (strcmp(now->checkpoint_id, m->checkpoint_id) == 0 &&
	    now->nfiles == m->nfiles) {
		v = strcmp(now->status, "READY") == 0 ? SAME : DELETING;
		for (size_t i = 0; v != CHANGED && i < m->nfiles; i++) {
			int64_t j = wstore_manifest_find(now, m->files[i].path);

			if (j < 0 || !same_record(&m->files[i], &now->files[j]))
				v = CHANGED;
		}
	}
	wstore_manifest_free(now);
	return v;
}

/* The manifest now in the store, whole; on a store of local files also
 * its open file (*fd, else -1). */
static int read_manifest(wstore__guard *g, char **raw, size_t *len, int *fd)
{
	wstore_backend *b = g->s->b;
	struct stat st;
	ssize_t n;
	int rc;

	*fd = -1;
	if (!wstore__local_files(g->s))
		return wstore__get_alloc(g->s, g->mkey, raw, len);
	if ((rc = b->open_fd(b, g->mkey, fd)) < 0)
		return rc;
	if (fstat(*fd, &st) < 0 || !(*raw = malloc((size_t)st.st_size + 1)))
		rc = wstore__errc(-errno, "cannot read '%s'", g->mkey);
	else if ((n = pread(*fd, *raw, (size_t)st.st_size, 0)) < 0)
		rc = wstore__errc(-errno, "cannot read '%s'", g->mkey);
	else
		*len = (size_t)n;
	if (rc < 0) {
		free(*raw);
		*raw = NULL;
		close(*fd);
		*fd = -1;
	}
	return rc;
}

/*
 * The verdict on the manifest in the store now.  The raw manifest last
 * judged is kept with its verdict: an unchanged manifest costs one get and
 * a byte compare, or on a store of local files (manifests are replaced by
 * rename, never rewritten) one fstat of its file while that is linked.
 */
static int manifest_verdict(wstore__guard *g)
{
	struct stat st;
	char *raw = NULL;
	size_t len = 0;
	int v, fd = -1, rc;

	pthread_mutex_lock(&g->lock);
	v = g->mfd >= 0 && fstat(g->mfd, &st) == 0 && st.st_nlink > 0
		    ? g->last_v
		    : -1;
	pthread_mutex_unlock(&g->lock);
	if (v >= 0)
		return v;
	rc = read_manifest(g, &raw, &len, &fd);
	if (rc == WSTORE_ENOTFOUND) {
		wstore__clear_err();
		return GONE;
	}
	if (rc < 0)
		return wstore__err(rc, "cannot read '%s': %s", g->mkey,
				   wstore_last_error());
	pthread_mutex_lock(&g->lock);
	if (g->last && len == g->last_len && memcmp(raw, g->last, len) == 0) {
		v = g->last_v;
	} else {
		v = judge_manifest(g, raw, len);
		free(g->last);
		g->last = raw;
		g->last_len = len;
		g->last_v = v;
		raw = NULL;
	}
	if (fd >= 0) {
		if (g->mfd >= 0)
			close(g->mfd);
		g->mfd = fd;
	}
	pthread_mutex_unlock(&g->lock);
	free(raw);
	return v;
}

/* ---- settling a read ----------------------------------------------------- */

int wstore__guard_settle(wstore__guard *g, const wstore__file_rec *f, int rc)
{
	char saved[1024];
	int v;

	if (!g || (rc < 0 && rc != WSTORE_ECORRUPT))
		return rc;
	if (rc < 0)
		snprintf(saved, sizeof(saved), "%s", wstore_last_error());
	v = g->by_gen ? record_same(g) : manifest_verdict(g);
	if (v == SAME || (v == DELETING && rc == 0) || (v < 0 && rc < 0))
		return rc < 0 ? wstore__err(rc, "%s", saved) : 0;
	if (v < 0)
		return wstore__err(v,
				   "checkpoint '%s', file '%s': cannot confirm "
				   "that what was read is still the checkpoint "
				   "opened: %s",
				   g->m->checkpoint_id, f->path,
				   wstore_last_error());
	/* a network store may have lost the checkpoint's records (Mooncake
	 * with one replica after a storage node went, Redis evicting or a
	 * node lost without a replica): say so, not only "replaced" */
	if (v == GONE && (g->s->b->flags & (WSTORE_BACKEND_MAY_EVICT |
					    WSTORE_BACKEND_UNTRUSTED)))
		return wstore__err(WSTORE_ECHANGED,
				   "checkpoint '%s' is no longer in the store: "
				   "it was deleted or replaced by another "
				   "import, or lost by the %s store, while "
				   "'%s' was being read",
				   g->m->checkpoint_id, g->s->b->name, f->path);
	return wstore__err(WSTORE_ECHANGED,
			   "checkpoint '%s' was deleted or replaced by another "
			   "import while '%s' was being read; open it again "
			   "to read the new one",
			   g->m->checkpoint_id, f->path);
}

void wstore__guard_free(wstore__guard *g)
{
	if (!g)
		return;
	if (g->fd >= 0)
		close(g->fd);
	if (g->mfd >= 0)
		close(g->mfd);
	pthread_mutex_destroy(&g->lock);
	free(g->rec);
	free(g->last);
	free(g);
}
