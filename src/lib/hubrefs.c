/*
 * hubrefs.c - what a Hub's branches and tags name, as a mirror needs it:
 *
 *  - wstore_hub_commit asks the server which commit a revision names
 *    (GET /api/models/{repo}/revision/{rev}: its "sha"), nothing else;
 *  - wstore_ref_write / wstore_ref_read keep, durably in the store, the
 *    commit each branch or tag of a repository last named and when the
 *    server said so: one record per repository, "weight/meta/refs/{mh}"
 *    ({mh}: SHA-256 of the repository name, as the per-model index),
 *    JSON {"model_id": REPO, "refs": {REF: {"commit": HEX40,
 *    "asked_ms": MS}}} (docs/format.md, "Branches and tags of a Hub").
 *
 * The record is read-modified-written (lock.c), so two mirrors on one
 * store never lose each other's refs; it holds at most REFS_MAX refs (the
 * least recently asked one goes), so no client can grow it without
 * bound by asking for names.  A record that cannot be parsed is taken
 * for an empty one on write and for "none" on read: it is a cache of what
 * the server said, which the next question rebuilds.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "abi.h"
#include "backends/helpers.h"
#include "digest.h"
#include "error.h"
#include "hubfetch.h"
#include "hubtrust.h"
#include "lock.h"
#include "names.h"
#include "store.h"
#include "util.h"

/* Refs kept per repository, and the length of a ref's name. */
#define REFS_MAX 256
#define REF_NAME_MAX 255

static int ref_name_ok(const char *ref)
{
	if (!ref || !*ref || strlen(ref) > REF_NAME_MAX ||
	    !wstore__utf8_valid(ref))
		return 0;
	for (const unsigned char *p = (const unsigned char *)ref; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return 0;
	return 1;
}

static int check_names(const char *repo, const char *ref)
{
	if (!repo || !*repo || strlen(repo) > 512 || !wstore__utf8_valid(repo))
		return wstore__err(WSTORE_EINVAL, "invalid repository name");
	if (!ref_name_ok(ref))
		return wstore__err(WSTORE_EINVAL,
				   "invalid branch or tag name '%.64s'",
				   ref ? ref : "");
	return 0;
}

/* Is j the record of repo? */
static int same_model(const json_t *j, const char *repo)
{
	const char *m = json_string_value(json_object_get(j, "model_id"));

	return m && !strcmp(m, repo);
}

static void refs_key(char *key, char *lock, const char *repo)
{
	char mh[65];

	wstore__sha256_hex_str(mh, repo);
	snprintf(key, WSTORE__KEY_MAX, "weight/meta/refs/%s", mh);
	snprintf(lock, WSTORE__KEY_MAX, "refs/%s", mh);
}

struct ref_edit {
	const char *repo, *ref, *commit;
	int64_t asked_ms;
};

/* The least recently asked ref of refs (other than keep). */
static const char *oldest_ref(json_t *refs, const char *keep)
{
	const char *name, *old = NULL;
	json_int_t at = 0;
	json_t *v;

	json_object_foreach(refs, name, v)
	{
		json_int_t a =
			json_integer_value(json_object_get(v, "asked_ms"));

		if (strcmp(name, keep) && (!old || a < at)) {
			old = name;
			at = a;
		}
	}
	return old;
}

static int ref_update(void **out, size_t *out_len, const void *old, size_t n,
		      void *ctx)
{
	const struct ref_edit *e = ctx;
	json_t *j = old && n ? json_loadb(old, n, 0, NULL) : NULL, *refs;
	char *txt;

	refs = json_object_get(j, "refs");
	if (!json_is_object(refs) || !same_model(j, e->repo)) {
		json_decref(j);
		j = json_pack("{s:s, s:{}}", "model_id", e->repo, "refs");
		refs = json_object_get(j, "refs");
	}
	if (!j || json_object_set_new(refs, e->ref,
				      json_pack("{s:s, s:I}", "commit",
						e->commit, "asked_ms",
						(json_int_t)e->asked_ms))) {
		json_decref(j);
		return -ENOMEM;
	}
	while (json_object_size(refs) > REFS_MAX)
		json_object_del(refs, oldest_ref(refs, e->ref));
	txt = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	if (!txt)
		return -ENOMEM;
	*out = txt;
	*out_len = strlen(txt);
	return 0;
}

int wstore_ref_write(wstore_store *s, const char *repo, const char *ref,
		     const char *commit, int64_t asked_ms)
{
	char key[WSTORE__KEY_MAX], lock[WSTORE__KEY_MAX];
	struct ref_edit e = { repo, ref, commit, asked_ms };
	int rc;

	if (!s)
		return wstore__err(WSTORE_EINVAL, "ref write: no store");
	if ((rc = check_names(repo, ref)) < 0)
		return rc;
	if (!wstore__is_hex(commit, 40))
		return wstore__err(WSTORE_EINVAL,
				   "invalid commit id '%.64s': 40 hex digits",
				   commit ? commit : "");
	refs_key(key, lock, repo);
	rc = wstore__rmw(s, key, lock, ref_update, &e);
	if (rc < 0)
		return wstore__err(rc, "cannot record '%s' of '%s': %s", ref,
				   repo, wstore_last_error());
	return 0;
}

int wstore_ref_read(char *out, size_t cap, int64_t *out_asked_ms,
		    wstore_store *s, const char *repo, const char *ref)
{
	char key[WSTORE__KEY_MAX], lock[WSTORE__KEY_MAX], *txt = NULL;
	const char *commit;
	json_t *j, *r;
	size_t n = 0;
	int rc;

	if (cap < WSTORE_COMMIT_LEN + 1)
		return wstore__err(WSTORE_ERANGE,
				   "a commit id needs %d bytes, got %zu",
				   WSTORE_COMMIT_LEN + 1, cap);
	out[0] = '\0';
	if (out_asked_ms)
		*out_asked_ms = 0;
	if (!s)
		return wstore__err(WSTORE_EINVAL, "ref read: no store");
	if ((rc = check_names(repo, ref)) < 0)
		return rc;
	refs_key(key, lock, repo);
	if ((rc = wstore__get_locked(s, key, lock, &txt, &n)) < 0)
		return rc == WSTORE_ENOTFOUND
			       ? wstore__err(rc, "no ref of '%s' recorded",
					     repo)
			       : rc;
	j = json_loadb(txt, n, 0, NULL);
	free(txt);
	r = json_object_get(json_object_get(j, "refs"), ref);
	commit = json_string_value(json_object_get(r, "commit"));
	rc = wstore__is_hex(commit, 40) && same_model(j, repo)
		     ? 0
		     : WSTORE_ENOTFOUND;
	if (rc == 0) {
		memcpy(out, commit, WSTORE_COMMIT_LEN + 1);
		if (out_asked_ms)
			*out_asked_ms = (int64_t)json_integer_value(
				json_object_get(r, "asked_ms"));
	}
	json_decref(j);
	if (rc < 0)
		return wstore__err(rc, "no commit of '%s' at '%s' recorded",
				   repo, ref);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int wstore_ref_list(char ***out, size_t *out_count, wstore_store *s,
		    const char *repo)
{
	char key[WSTORE__KEY_MAX], lock[WSTORE__KEY_MAX], *txt = NULL;
	const char *name;
	json_t *j, *refs, *v;
	size_t n = 0, len = 0;
	char **names;
	int rc;

	*out = NULL;
	*out_count = 0;
	if (!s || !repo || !*repo)
		return wstore__err(WSTORE_EINVAL, "ref list: no store or name");
	refs_key(key, lock, repo);
	rc = wstore__get_locked(s, key, lock, &txt, &len);
	if (rc < 0 && rc != WSTORE_ENOTFOUND)
		return rc;
	j = rc == 0 ? json_loadb(txt, len, 0, NULL) : NULL;
	free(txt);
	refs = same_model(j, repo) ? json_object_get(j, "refs") : NULL;
	if (!(names = calloc(json_object_size(refs) + 1, sizeof(*names)))) {
		json_decref(j);
		return -ENOMEM;
	}
	json_object_foreach(refs, name, v)
	{
		if (!ref_name_ok(name) ||
		    !wstore__is_hex(
			    json_string_value(json_object_get(v, "commit")),
			    40))
			continue;
		if (!(names[n] = strdup(name))) {
			json_decref(j);
			wstore_strings_free(names);
			return -ENOMEM;
		}
		n++;
	}
	json_decref(j);
	qsort(names, n, sizeof(*names), cmp_str);
	wstore__clear_err();
	*out = names;
	*out_count = n;
	return 0;
}

/* ---- asking the server ---------------------------------------------------
 */

struct asker {
	wstore_progress_fn cancel;
	void *ctx;
};

static int asker_stop(void *ctx)
{
	const struct asker *a = ctx;

	return a->cancel && a->cancel(0, 0, "", a->ctx);
}

/* endpoint/api/models/repo/revision/rev (*url malloc'ed), built with
 * libcurl's URL API from escaped segments (hubtrust.c), the endpoint
 * parsed into ep. */
static int revision_url(char **url, wstore__endpoint *ep, const char *endpoint,
			const char *repo, const char *rev)
{
	char org[128];
	const char *slash;
	int rc = wstore__hub_repo_ok(repo);

	if (rc < 0)
		return rc;
	slash = strchr(repo, '/');
	snprintf(org, sizeof(org), "%.*s", (int)(slash - repo), repo);
	if ((rc = wstore__endpoint_parse(ep, endpoint)) < 0)
		return rc;
	{
		const char *segs[] = { "api",	   "models", org, slash + 1,
				       "revision", rev,	     NULL };

		return wstore__hub_url(url, ep, segs, NULL, NULL);
	}
}

int wstore_hub_commit(char *out, size_t cap, const wstore_hub_options *hub,
		      wstore_progress_fn cancel, void *ctx)
{
	wstore_hub_options o;
	wstore__endpoint ep = { 0 };
	struct asker a = { cancel, ctx };
	wstore__http *http = NULL;
	const char *rev, *endpoint, *sha;
	char *url = NULL, *body = NULL;
	size_t len = 0;
	json_t *j = NULL;
	int rc;

	if (cap < WSTORE_COMMIT_LEN + 1)
		return wstore__err(WSTORE_ERANGE,
				   "a commit id needs %d bytes, got %zu",
				   WSTORE_COMMIT_LEN + 1, cap);
	out[0] = '\0';
	if (!hub)
		return wstore__err(WSTORE_EINVAL, "hub commit: no options");
	if ((rc = wstore__hub_opts(&o, hub)) < 0)
		return rc;
	rev = o.revision && *o.revision ? o.revision : "main";
	endpoint = o.endpoint && *o.endpoint ? o.endpoint : WSTORE__HUB_DEFAULT;
	if ((rc = check_names(o.repo, rev)) < 0)
		return rc;
	rc = revision_url(&url, &ep, endpoint, o.repo, rev);
	if (rc == 0)
		rc = wstore__http_new(&http, &o, &ep, asker_stop, &a);
	if (rc == 0)
		rc = wstore__http_get(http, url, &body, &len, NULL);
	if (rc == 0 && !(j = json_loadb(body, len, 0, NULL)))
		rc = wstore__err(WSTORE_EINVAL, "'%s' did not answer JSON",
				 url);
	sha = json_string_value(json_object_get(j, "sha"));
	if (rc == 0 && !wstore__is_hex(sha, 40))
		rc = wstore__err(WSTORE_EINVAL,
				 "'%s' names no 40-hex commit id (sha)", url);
	if (rc == 0)
		memcpy(out, sha, WSTORE_COMMIT_LEN + 1);
	json_decref(j);
	free(body);
	free(url);
	wstore__http_free(http);
	wstore__endpoint_free(&ep);
	return rc;
}
