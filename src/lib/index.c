/*
 * index.c - the index objects: "weight/index/models" (every published
 * checkpoint id) and "weight/index/model/{sha256(model id)}" (the ids of
 * one model).  Each is a compact, sorted JSON array of strings; a missing
 * or empty value is the empty list.
 *
 * Updates must not lose a concurrent writer's entry, so they go through
 * the backend's atomic update where it has one, else under the catalog
 * lock (lock.c).  A corrupt index is rebuilt from the READY manifests when
 * the backend can list keys, else restarted from the update being made.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "error.h"
#include "index.h"
#include "lock.h"
#include "manifest.h"
#include "names.h"
#include "store.h"

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void wstore_string_free(char *s)
{
	free(s);
}

void wstore_strings_free(char **strings)
{
	if (!strings)
		return;
	for (char **p = strings; *p; p++)
		free(*p);
	free(strings);
}

int wstore__index_parse(char ***out, size_t *out_n, const char *json,
			size_t len)
{
	json_error_t jerr;
	json_t *j, *v;
	char **ids;
	size_t i, n = 0;

	*out = NULL;
	*out_n = 0;
	if (len == 0 || !json) {
		*out = calloc(1, sizeof(char *));
		return *out ? 0 : -ENOMEM;
	}
	j = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!j || !json_is_array(j)) {
		json_decref(j);
		return wstore__err(WSTORE_ECORRUPT, "not a JSON array");
	}
	ids = calloc(json_array_size(j) + 1, sizeof(char *));
	if (!ids) {
		json_decref(j);
		return -ENOMEM;
	}
	json_array_foreach(j, i, v)
	{
		const char *id = json_string_value(v);

		if (!id || wstore_validate_checkpoint_id(id) < 0) {
			wstore_strings_free(ids);
			json_decref(j);
			return wstore__err(
				WSTORE_ECORRUPT,
				"entry %zu is not a valid checkpoint id", i);
		}
		/* ids stays NULL-terminated: a failed copy ends it here */
		if (!(ids[n] = strdup(id))) {
			wstore_strings_free(ids);
			json_decref(j);
			return -ENOMEM;
		}
		n++;
	}
	json_decref(j);
	qsort(ids, n, sizeof(char *), cmp_str);
	*out = ids;
	*out_n = n;
	return 0;
}

static char *index_serialize(char **ids, size_t n)
{
	json_t *arr = json_array();
	char *s;

	for (size_t i = 0; i < n; i++) {
		if (i && strcmp(ids[i], ids[i - 1]) == 0)
			continue;
		json_array_append_new(arr, json_string(ids[i]));
	}
	s = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	return s;
}

struct edit {
	const char *id;
	int add;
	int have_rebuilt; /* a corrupt value is replaced by rebuilt */
	char **rebuilt;
	size_t nrebuilt;
};

/* Apply one add/remove to an index value; 1 = nothing to change. */
static int edit_fn(void **out, size_t *out_len, const void *old, size_t old_len,
		   void *vctx)
{
	struct edit *e = vctx;
	char **ids = NULL, **grown;
	size_t n = 0, i, found = (size_t)-1;
	int corrupt = wstore__index_parse(&ids, &n, old, old_len) < 0;

	if (corrupt) {
		if (!e->have_rebuilt)
			return WSTORE_ECORRUPT;
		ids = calloc(e->nrebuilt + 1, sizeof(char *));
		if (!ids)
			return -ENOMEM;
		for (n = 0; n < e->nrebuilt; n++) {
			if (!(ids[n] = strdup(e->rebuilt[n]))) {
				wstore_strings_free(ids);
				return -ENOMEM;
			}
		}
	}
	for (i = 0; i < n; i++)
		if (strcmp(ids[i], e->id) == 0)
			found = i;
	/* nothing to change, unless a corrupt value is being replaced */
	if (!corrupt && old_len &&
	    ((e->add && found != (size_t)-1) ||
	     (!e->add && found == (size_t)-1))) {
		wstore_strings_free(ids);
		return 1;
	}
	if (e->add && found == (size_t)-1) {
		grown = realloc(ids, (n + 2) * sizeof(char *));
		if (!grown) {
			wstore_strings_free(ids);
			return -ENOMEM;
		}
		ids = grown;
		ids[n + 1] = NULL;
		if (!(ids[n] = strdup(e->id))) {
			wstore_strings_free(ids);
			return -ENOMEM;
		}
		n++;
		qsort(ids, n, sizeof(char *), cmp_str);
	} else if (!e->add && found != (size_t)-1) {
		free(ids[found]);
		memmove(ids + found, ids + found + 1,
			(n - found) * sizeof(char *));
		n--;
	}
	*out = index_serialize(ids, n);
	wstore_strings_free(ids);
	if (!*out)
		return -ENOMEM;
	*out_len = strlen(*out);
	return 0;
}

struct rebuild {
	wstore_store *s;
	const char *model_id; /* NULL: every model */
	char **ids;
	size_t n, cap;
};

/* For each "weight/models/{ckpt}/manifest" key: keep READY checkpoints
 * (of the model, for a per-model index). */
static int rebuild_one(const char *key, void *vctx)
{
	struct rebuild *r = vctx;
	const char *ckpt = key + strlen("weight/models/");
	const char *slash = strchr(ckpt, '/');
	wstore_manifest *m = NULL;
	char id[WSTORE__KEY_MAX];
	int rc;

	if (!slash || strcmp(slash, "/manifest") != 0 ||
	    (size_t)(slash - ckpt) >= sizeof(id))
		return 0;
	memcpy(id, ckpt, (size_t)(slash - ckpt));
	id[slash - ckpt] = '\0';
	rc = wstore_manifest_read(&m, r->s, id);
	/* gone since listed, or not a manifest: in no index; a manifest that
	 * could not be read now may be READY, and a list without it would
	 * be written back by the next update */
	if (rc == WSTORE_ENOTFOUND || rc == WSTORE_ECORRUPT) {
		wstore__clear_err();
		return 0;
	}
	if (rc < 0)
		return wstore__err(rc, "cannot rebuild the index: %s",
				   wstore_last_error());
	if (strcmp(m->status, "READY") == 0 &&
	    (!r->model_id || strcmp(m->model_id, r->model_id) == 0)) {
		if (r->n + 1 >= r->cap) {
			size_t cap = r->cap ? 2 * r->cap : 64;
			char **p = realloc(r->ids, cap * sizeof(char *));

			if (!p) {
				wstore_manifest_free(m);
				return -ENOMEM;
			}
			r->ids = p;
			r->cap = cap;
		}
		if (!(r->ids[r->n] = strdup(id))) {
			wstore_manifest_free(m);
			return -ENOMEM;
		}
		r->ids[++r->n] = NULL;
	}
	wstore_manifest_free(m);
	return 0;
}

/*
 * A corrupt index object: rebuild its list from the READY manifests where
 * the store can list keys; elsewhere nothing can be recovered and the
 * update starts from an empty list.
 */
static int rebuild(struct edit *e, wstore_store *s, const char *model_id)
{
	struct rebuild r = { .s = s, .model_id = model_id };
	int rc = 0;

	if (s->b->list)
		rc = s->b->list(s->b, "weight/models/", rebuild_one, &r);
	if (rc < 0) {
		wstore_strings_free(r.ids);
		return rc;
	}
	e->have_rebuilt = 1;
	e->rebuilt = r.ids;
	e->nrebuilt = r.n;
	return 0;
}

static int index_edit(wstore_store *s, const char *key, const char *id, int add,
		      const char *model_id)
{
	struct edit e = { .id = id, .add = add };
	int rc;

	for (int pass = 0; pass < 2; pass++) {
		/* without an atomic update: under the catalog lock */
		rc = wstore__rmw(s, key, "catalog", edit_fn, &e);
		if (rc != WSTORE_ECORRUPT || e.have_rebuilt)
			break;
		rc = rebuild(&e, s, model_id);
		if (rc < 0)
			break;
	}
	wstore_strings_free(e.rebuilt);
	if (rc > 0)
		rc = 0;
	if (rc < 0)
		return wstore__err(rc, "cannot update index '%s': %s", key,
				   wstore_last_error());
	return 0;
}

int wstore__index_add(wstore_store *s, const char *key, const char *id,
		      const char *model_id)
{
	return index_edit(s, key, id, 1, model_id);
}

int wstore__index_remove(wstore_store *s, const char *key, const char *id,
			 const char *model_id)
{
	return index_edit(s, key, id, 0, model_id);
}

static int read_index(char ***out, size_t *out_n, wstore_store *s,
		      const char *key, const char *model_id)
{
	char *val = NULL;
	size_t len = 0;
	int rc = wstore__get_alloc(s, key, &val, &len);

	if (rc == WSTORE_ENOTFOUND)
		return wstore__index_parse(out, out_n, NULL, 0);
	if (rc < 0)
		return rc;
	rc = wstore__index_parse(out, out_n, val, len);
	free(val);
	if (rc == WSTORE_ECORRUPT && s->b->list) {
		/* list from the manifests; the next import or delete writes
		 * the repaired index back */
		struct edit e = { 0 };

		rc = rebuild(&e, s, model_id);
		if (rc < 0)
			return rc;
		if (!e.rebuilt)
			e.rebuilt = calloc(1, sizeof(char *));
		if (!e.rebuilt)
			return -ENOMEM;
		qsort(e.rebuilt, e.nrebuilt, sizeof(char *), cmp_str);
		*out = e.rebuilt;
		*out_n = e.nrebuilt;
		return 0;
	}
	if (rc == WSTORE_ECORRUPT)
		return wstore__err(rc, "index '%s' is corrupt: %s", key,
				   wstore_last_error());
	return rc;
}

int wstore_list(char ***out, size_t *out_count, wstore_store *s)
{
	char key[WSTORE__KEY_MAX];

	wstore__key_models_index(key);
	return read_index(out, out_count, s, key, NULL);
}

int wstore_list_model(char ***out, size_t *out_count, wstore_store *s,
		      const char *model_id)
{
	char key[WSTORE__KEY_MAX];

	if (!model_id || !*model_id)
		return wstore__err(WSTORE_EINVAL, "model id must not be empty");
	wstore__key_model_index(key, model_id);
	return read_index(out, out_count, s, key, model_id);
}
