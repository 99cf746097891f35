/*
 * intent.c - import intent records.  Before an import writes its first
 * chunk it records, under "weight/intents/models/{ckpt}", every chunk key
 * it may write; it removes the record once a manifest (READY, or FAILED
 * listing what is left) accounts for those keys.  A process killed in
 * between leaves the record behind, and with it the only list of what it
 * wrote on a store that cannot list keys (Mooncake): delete, a new import
 * of the id and gc use it to reclaim the chunks.
 *
 * Value: one line of compact JSON,
 *   {"checkpoint_id":ID,"chunk_size":N,"chunks":[KEY,...],
 *    "created_at":T,"host":H,"pid":P}
 * written by wstore only; other tools ignore "weight/intents/".  Readers
 * trust no key in it: only keys under the checkpoint's own prefix, and
 * never its manifest, are ever removed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "error.h"
#include "intent.h"
#include "manifest.h"
#include "names.h"
#include "store.h"

int wstore__intent_write(wstore_store *s, const wstore_manifest *m,
			 uint64_t chunk_size)
{
	return wstore__intent_write_with(s, m, chunk_size, NULL, NULL);
}

int wstore__intent_write_with(wstore_store *s, const wstore_manifest *m,
			      uint64_t chunk_size, const char *name,
			      json_t *extra)
{
	char key[WSTORE__KEY_MAX], host[256] = "";
	json_t *j = json_object(), *keys = json_array();
	char *text = NULL;
	int rc = -ENOMEM;

	gethostname(host, sizeof(host) - 1);
	if (!j || !keys)
		goto out;
	for (size_t i = 0; i < m->nfiles; i++)
		for (uint64_t c = 0; c < m->files[i].nchunks; c++)
			if (json_array_append_new(
				    keys, json_string(m->files[i].chunks[c])))
				goto out;
	if (json_object_set_new(j, "checkpoint_id",
				json_string(m->checkpoint_id)) ||
	    json_object_set_new(j, "chunk_size",
				json_integer((json_int_t)chunk_size)) ||
	    json_object_set(j, "chunks", keys) ||
	    json_object_set_new(j, "created_at",
				json_integer((json_int_t)time(NULL))) ||
	    json_object_set_new(j, "host", json_string(host)) ||
	    json_object_set_new(j, "pid", json_integer(getpid())) ||
	    (name && json_object_set(j, name, extra)))
		goto out;
	text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text)
		goto out;
	wstore__key_intent(key, m->checkpoint_id);
	rc = wstore__replace(s, key, text, strlen(text));
	if (rc < 0)
		wstore__err(rc, "cannot record the import of '%s' ('%s'): %s",
			    m->checkpoint_id, key, wstore_last_error());
out:
	if (rc == -ENOMEM)
		wstore__err(rc, "cannot record the import of '%s'",
			    m->checkpoint_id);
	free(text);
	json_decref(keys);
	json_decref(j);
	return rc;
}

/* The "chunks" array of an intent value as a NULL-terminated string
 * array, or WSTORE_ECORRUPT. */
static int parse_keys(char ***out, size_t *out_n, const char *text, size_t len)
{
	json_t *j = json_loadb(text, len, 0, NULL);
	json_t *a = json_object_get(j, "chunks");
	size_t n = json_array_size(a), i;
	char **v;

	if (!j || !json_is_array(a)) {
		json_decref(j);
		return WSTORE_ECORRUPT;
	}
	v = calloc(n + 1, sizeof(*v));
	for (i = 0; v && i < n; i++) {
		const char *k = json_string_value(json_array_get(a, i));

		if (!k || !(v[i] = strdup(k)))
			break;
	}
	json_decref(j);
	if (!v || i < n) {
		wstore_strings_free(v);
		return v ? WSTORE_ECORRUPT : -ENOMEM;
	}
	*out = v;
	*out_n = n;
	return 0;
}

int wstore__intent_get(json_t **out, wstore_store *s, const char *ckpt)
{
	char key[WSTORE__KEY_MAX], *text = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	wstore__key_intent(key, ckpt);
	rc = wstore__get_alloc(s, key, &text, &len);
	if (rc == 0 && len == 0)
		rc = WSTORE_ENOTFOUND; /* EMPTY_MISSING stores */
	if (rc == 0 && !(*out = json_loadb(text, len, 0, NULL)))
		rc = wstore__err(WSTORE_ECORRUPT,
				 "intent record '%s' is not valid", key);
	free(text);
	return rc;
}

int wstore__intent_read(char ***out, size_t *out_n, wstore_store *s,
			const char *ckpt)
{
	char key[WSTORE__KEY_MAX], *text = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	*out_n = 0;
	wstore__key_intent(key, ckpt);
	rc = wstore__get_alloc(s, key, &text, &len);
	if (rc == 0 && len == 0)
		rc = WSTORE_ENOTFOUND; /* EMPTY_MISSING stores */
	if (rc == 0) {
		rc = parse_keys(out, out_n, text, len);
		if (rc == WSTORE_ECORRUPT)
			wstore__err(rc, "intent record '%s' is not valid", key);
	}
	free(text);
	return rc;
}

struct sweep {
	wstore_store *s;
	const char *manifest_key;
	int err;
};

static int sweep_one(const char *key, void *vctx)
{
	struct sweep *sw = vctx;
	int rc;

	if (strcmp(key, sw->manifest_key) == 0)
		return 0;
	rc = wstore__remove(sw->s, key);
	if (rc < 0 && !sw->err)
		sw->err = rc;
	return 0;
}

int wstore__sweep_ckpt(wstore_store *s, const char *ckpt)
{
	char prefix[WSTORE__KEY_MAX], mkey[WSTORE__KEY_MAX];
	struct sweep sw = { s, mkey, 0 };
	int rc;

	if (!s->b->list)
		return 0;
	wstore__key_ckpt_prefix(prefix, ckpt);
	wstore__key_manifest(mkey, ckpt);
	rc = s->b->list(s->b, prefix, sweep_one, &sw);
	return rc < 0 ? rc : sw.err;
}

int wstore__intent_reclaim(wstore_store *s, const char *ckpt)
{
	char prefix[WSTORE__KEY_MAX], mkey[WSTORE__KEY_MAX];
	char **keys = NULL;
	size_t n = 0, plen;
	int rc = wstore__intent_read(&keys, &n, s, ckpt);

	if (rc == WSTORE_ENOTFOUND) {
		wstore__clear_err();
		return 0;
	}
	if (rc == WSTORE_ECORRUPT)
		rc = wstore__sweep_ckpt(s, ckpt);
	else if (rc < 0)
		return rc;
	wstore__key_ckpt_prefix(prefix, ckpt);
	wstore__key_manifest(mkey, ckpt);
	plen = strlen(prefix);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (strncmp(keys[i], prefix, plen) != 0 ||
		    strcmp(keys[i], mkey) == 0)
			continue;
		rc = wstore__remove(s, keys[i]);
		if (rc < 0)
			wstore__err(rc, "cannot remove chunk '%s': %s", keys[i],
				    wstore_last_error());
	}
	wstore_strings_free(keys);
	if (rc == 0)
		rc = wstore__intent_drop(s, ckpt);
	return rc < 0 ? rc : 1;
}

/* ---- marks: one small record per file verified ----------------------- */

/* more than any import's files (hub_max_files is a uint32) */
#define MARKS_MAX ((uint64_t)UINT32_MAX)

static void key_mark(char *out, const char *ckpt, uint64_t seq)
{
	snprintf(out, WSTORE__KEY_MAX, "weight/intents/verified/%s/%" PRIu64,
		 ckpt, seq);
}

int wstore__intent_mark(wstore_store *s, const char *ckpt, uint64_t seq,
			json_t *rec)
{
	char key[WSTORE__KEY_MAX],
		*text = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
	int rc;

	if (!text)
		return wstore__err(-ENOMEM, "cannot record a file of '%s'",
				   ckpt);
	key_mark(key, ckpt, seq);
	rc = wstore__replace(s, key, text, strlen(text));
	free(text);
	if (rc < 0)
		wstore__err(rc, "cannot record a file of '%s' ('%s'): %s", ckpt,
			    key, wstore_last_error());
	return rc;
}

int wstore__intent_marks(json_t **out, wstore_store *s, const char *ckpt)
{
	json_t *all = json_array();
	int rc = all ? 0 : -ENOMEM;

	for (uint64_t seq = 0; rc == 0 && seq <= MARKS_MAX; seq++) {
		char key[WSTORE__KEY_MAX], *text = NULL;
		size_t len = 0;
		json_t *rec;

		key_mark(key, ckpt, seq);
		rc = wstore__get_alloc(s, key, &text, &len);
		if (rc == WSTORE_ENOTFOUND || (rc == 0 && len == 0)) {
			free(text);
			wstore__clear_err();
			rc = 0;
			break;
		}
		/* a record cut by a crash: the marks after it are not
		 * trusted either (the file is fetched again) */
		rec = rc == 0 ? json_loadb(text, len, 0, NULL) : NULL;
		free(text);
		if (rc == 0 && !rec)
			break;
		if (rc == 0 && json_array_append_new(all, rec))
			rc = -ENOMEM;
	}
	if (rc < 0) {
		json_decref(all);
		all = NULL;
	}
	*out = all;
	return rc;
}

int wstore__intent_marks_drop(wstore_store *s, const char *ckpt)
{
	/* bounded: at most one mark per file of an import */
	for (uint64_t seq = 0; seq <= MARKS_MAX; seq++) {
		char key[WSTORE__KEY_MAX];
		uint64_t size = 0;
		int rc;

		key_mark(key, ckpt, seq);
		rc = s->b->size(s->b, key, &size);
		/* a mark is never empty: empty is missing on the stores
		 * that read a missing key as empty */
		if (rc == WSTORE_ENOTFOUND || (rc == 0 && size == 0)) {
			wstore__clear_err();
			return 0;
		}
		if (rc == 0)
			rc = wstore__remove(s, key);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int wstore__intent_drop(wstore_store *s, const char *ckpt)
{
	char key[WSTORE__KEY_MAX];
	int rc = wstore__intent_marks_drop(s, ckpt);

	wstore__key_intent(key, ckpt);
	return rc < 0 ? rc : wstore__remove(s, key);
}
