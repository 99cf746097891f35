/*
 * hub.c - import from a server that speaks the Hugging Face Hub protocol
 * (wstore_import_hub): what to fetch, and the hooks that fit it into the
 * import's lifecycle (import.c).
 *
 *   GET /api/models/{repo}/revision/{rev}           -> the commit id
 *   GET /api/models/{repo}/tree/{commit}?recursive=true (pages: Link)
 *                                                   -> paths, sizes, oids
 *   GET /{repo}/resolve/{commit}/{path}             -> the bytes (hubrun.c)
 *
 * Everything the server says is untrusted: paths are checked as a
 * manifest's are, hashes must be hex of the right length, and each file's
 * bytes must hash to what the listing says (SHA-256 for an LFS file, the
 * git blob SHA-1 otherwise) before the checkpoint can be READY.
 *
 * Resuming: the intent record (intent.c) of a hub import carries a "hub"
 * member naming the endpoint, repo, commit and chunk size, and the files
 * already stored and verified.  A killed import leaves it behind; a new
 * import of the same commit into the same id keeps those files' chunks
 * (each checked to be there, at its size) and fetches the rest.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "hub.h"
#include "hubfetch.h"
#include "intent.h"
#include "manifest.h"
#include "names.h"
#include "store.h"
#include "util.h"

#define DEFAULT_ENDPOINT "https://huggingface.co"

static int is_hex(const char *s, size_t n)
{
	return s && strlen(s) == n && strspn(s, "0123456789abcdef") == n;
}

/* ---- the listing ---------------------------------------------------------
 */

static int matches(const char *const *globs, const char *path)
{
	for (size_t i = 0; globs && globs[i]; i++)
		if (fnmatch(globs[i], path, 0) == 0)
			return 1;
	return 0;
}

static int wanted(const wstore__hub *h, const char *path)
{
	if (h->o.include && h->o.include[0] && !matches(h->o.include, path))
		return 0;
	return !matches(h->o.exclude, path);
}

/* One entry of a tree listing: a file taken (1), passed over (0), or an
 * error naming what is wrong with it. */
static int take_entry(wstore__hub *h, json_t *e, size_t *cap)
{
	const char *type = json_string_value(json_object_get(e, "type"));
	const char *path = json_string_value(json_object_get(e, "path"));
	const char *oid = json_string_value(json_object_get(e, "oid"));
	json_t *size = json_object_get(e, "size"),
	       *lfs = json_object_get(e, "lfs");
	const char *sha = json_string_value(json_object_get(lfs, "oid"));
	wstore__hub_file *f;

	if (type && strcmp(type, "file") != 0)
		return 0;
	if (!path || !json_is_integer(size) || json_integer_value(size) < 0 ||
	    !is_hex(oid, 40) || (lfs && !is_hex(sha, 64)))
		return wstore__err(WSTORE_EINVAL,
				   "the server's file list has an entry that "
				   "is not a file with a path, size and "
				   "hashes ('%s')",
				   path ? path : "?");
	if (wstore_validate_path(path) < 0)
		return wstore__err(WSTORE_EINVAL,
				   "the server lists file '%s': %s", path,
				   wstore_last_error());
	if (!wanted(h, path))
		return 0;
	if (h->n == *cap) {
		size_t c = *cap ? 2 * *cap : 64;
		void *p = realloc(h->files, c * sizeof(*h->files));

		if (!p)
			return -ENOMEM;
		h->files = p;
		*cap = c;
	}
	f = &h->files[h->n];
	memset(f, 0, sizeof(*f));
	if (!(f->path = strdup(path)))
		return -ENOMEM;
	f->size = (uint64_t)json_integer_value(size);
	memcpy(f->oid, oid, 41);
	if (lfs)
		memcpy(f->sha256, sha, 65);
	h->n++;
	return 1;
}

static int get_json(json_t **out, wstore__http *http, const char *url,
		    char **next)
{
	char *body = NULL;
	size_t len = 0;
	json_error_t je;
	int rc = wstore__http_get(http, url, &body, &len, next);

	if (rc < 0)
		return rc;
	*out = json_loadb(body, len, 0, &je);
	free(body);
	if (!*out)
		return wstore__err(WSTORE_EINVAL,
				   "'%s' did not answer JSON: %s", url,
				   je.text);
	return 0;
}

/* The commit the revision names. */
static int get_commit(wstore__hub *h, wstore__http *http)
{
	const char *rev =
		h->o.revision && *h->o.revision ? h->o.revision : "main";
	char *erev = wstore__http_escape(rev, 0), *url = NULL;
	json_t *j = NULL;
	const char *sha;
	int rc = -ENOMEM;

	if (erev && asprintf(&url, "%s/api/models/%s/revision/%s", h->endpoint,
			     h->o.repo, erev) >= 0)
		rc = get_json(&j, http, url, NULL);
	if (rc == 0) {
		sha = json_string_value(json_object_get(j, "sha"));
		if (!is_hex(sha, 40))
			rc = wstore__err(WSTORE_EINVAL,
					 "'%s' names no 40-hex commit id (sha)",
					 url);
		else if (!(h->commit = strdup(sha)))
			rc = -ENOMEM;
	}
	json_decref(j);
	free(url);
	free(erev);
	return rc;
}

static int cmp_file(const void *a, const void *b)
{
	return strcmp(((const wstore__hub_file *)a)->path,
		      ((const wstore__hub_file *)b)->path);
}

/* Every file of the commit that the include/exclude globs take. */
static int list_files(wstore__hub *h, wstore__http *http)
{
	char *url = NULL, *next = NULL;
	size_t cap = 0;
	int rc = get_commit(h, http);

	if (rc == 0 && asprintf(&url, "%s/api/models/%s/tree/%s?recursive=true",
				h->endpoint, h->o.repo, h->commit) < 0)
		rc = -ENOMEM;
	/* a page at a time, as long as the server links a next one */
	for (unsigned page = 0; rc == 0 && url; page++) {
		json_t *j = NULL, *e;
		size_t i;

		rc = get_json(&j, http, url, &next);
		if (rc == 0 && !json_is_array(j))
			rc = wstore__err(WSTORE_EINVAL,
					 "'%s' is not a file list", url);
		json_array_foreach(j, i, e) if (rc == 0 &&
						(rc = take_entry(h, e, &cap)) >
							0) rc = 0;
		json_decref(j);
		free(url);
		url = next;
		next = NULL;
		if (page > 100000)
			rc = wstore__err(WSTORE_EINVAL, "endless file list");
	}
	free(url);
	if (rc == 0 && h->n == 0)
		rc = wstore__err(WSTORE_ENOTFOUND,
				 "no file of '%s' at %s is left to import "
				 "(include/exclude)",
				 h->o.repo, h->commit);
	if (rc == 0)
		qsort(h->files, h->n, sizeof(*h->files), cmp_file);
	for (size_t i = 1; rc == 0 && i < h->n; i++)
		if (!strcmp(h->files[i].path, h->files[i - 1].path))
			rc = wstore__err(WSTORE_EINVAL,
					 "the server lists '%s' twice",
					 h->files[i].path);
	return rc;
}

/* ---- resuming ------------------------------------------------------------
 */

/* *out: the intent record's "hub" member of a killed import of this same
 * commit, endpoint and chunk size into id (a new reference), or NULL
 * (none, another import's, or corrupt).  0, or the error of a record that
 * could not be read: it may be this import's. */
static int same_import(json_t **out, wstore_store *s, const wstore__hub *h,
		       const char *id, uint64_t chunk_size)
{
	json_t *j = NULL, *hub;
	int rc = wstore__intent_get(&j, s, id);

	*out = NULL;
	if (rc < 0 && rc != WSTORE_ENOTFOUND && rc != WSTORE_ECORRUPT)
		return rc;
	wstore__clear_err();
	if (rc < 0)
		return 0;
	hub = json_object_get(j, "hub");
	if (!json_is_object(hub) ||
	    json_integer_value(json_object_get(j, "chunk_size")) !=
		    (json_int_t)chunk_size ||
	    !json_equal(json_object_get(hub, "endpoint"),
			json_object_get(h->state, "endpoint")) ||
	    !json_equal(json_object_get(hub, "repo"),
			json_object_get(h->state, "repo")) ||
	    !json_equal(json_object_get(hub, "commit"),
			json_object_get(h->state, "commit")) ||
	    !json_is_object(json_object_get(hub, "files")))
		hub = NULL;
	json_incref(hub);
	json_decref(j);
	*out = hub;
	return 0;
}

/* Is id this import's to take: READY (or FAILED) with this model and
 * commit, or left by a killed import of this commit? */
struct mine {
	const wstore__hub *h;
	const char *model_id;
	uint64_t chunk_size;
};

static int is_mine(void *ctx, wstore_store *s, const char *id)
{
	const struct mine *mi = ctx;
	wstore_manifest *m = NULL;
	json_t *hub;
	int rc = wstore_manifest_read(&m, s, id), yes = 0;

	if (rc == 0)
		yes = !strcmp(m->model_id, mi->model_id) &&
		      !strcmp(m->revision, mi->h->commit);
	wstore_manifest_free(m);
	/* a manifest that could not be read now may be this import's:
	 * an error, never another id */
	if (rc < 0 && rc != WSTORE_ENOTFOUND && rc != WSTORE_ECORRUPT)
		return rc;
	if (rc == WSTORE_ENOTFOUND) {
		if ((rc = same_import(&hub, s, mi->h, id, mi->chunk_size)) < 0)
			return rc;
		yes = hub != NULL;
		json_decref(hub);
	}
	wstore__clear_err();
	return yes;
}

/* With the lock held: take back a killed import's verified files, or
 * make the id free as any import does. */
static int hub_claim(struct import *im)
{
	wstore__hub *h = im->ctx;
	const char *id = im->o->checkpoint_id;
	wstore_manifest *m = NULL;
	char **keys = NULL, fkey[WSTORE__KEY_MAX], prefix[WSTORE__KEY_MAX];
	size_t n = 0;
	int rc = wstore_manifest_read(&m, im->s, id);

	wstore_manifest_free(m);
	if (rc == WSTORE_ENOTFOUND &&
	    (rc = same_import(&h->kept, im->s, h, id, im->chunk_size)) < 0)
		return rc;
	if (!h->kept)
		return wstore__import_claim(im->s, id);
	wstore__clear_err();
	/* remove every key the record lists but a kept file's chunks */
	rc = wstore__intent_read(&keys, &n, im->s, id);
	wstore__key_ckpt_prefix(prefix, id);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const char *k = keys[i], *slash;
		int keep = 0;

		if (strncmp(k, prefix, strlen(prefix)) != 0)
			continue;
		for (size_t f = 0; !keep && f < h->n; f++) {
			if (!json_object_get(json_object_get(h->kept, "files"),
					     h->files[f].path))
				continue;
			wstore__key_file(fkey, id, h->files[f].path);
			slash = k + strlen(fkey);
			keep = !strncmp(k, fkey, strlen(fkey)) &&
			       !strncmp(slash, "/chunks/", 8);
		}
		if (!keep && (rc = wstore__remove(im->s, k)) < 0)
			wstore__err(rc, "cannot remove chunk '%s': %s", k,
				    wstore_last_error());
	}
	wstore_strings_free(keys);
	return rc;
}

/* A kept file: the same bytes the listing names, every chunk there at
 * its size.  1 kept, 0 fetch again, or an error of the store. */
static int keep_file(struct import *im, size_t i)
{
	wstore__hub *h = im->ctx;
	const wstore__hub_file *f = &h->files[i];
	wstore__file_rec *rec = &im->m->files[i];
	json_t *k = json_object_get(json_object_get(h->kept, "files"), f->path);
	const char *oid = json_string_value(json_object_get(k, "oid"));
	const char *sha = json_string_value(json_object_get(k, "sha256"));
	json_t *size = json_object_get(k, "size");

	if (!oid || strcmp(oid, f->oid) || !is_hex(sha, 64) ||
	    json_integer_value(size) != (json_int_t)f->size)
		return 0;
	for (uint64_t c = 0; c < rec->nchunks; c++) {
		uint64_t want = 0, got = 0;
		int rc = wstore__chunk_len(&want, rec, c);

		if (rc == 0)
			rc = im->s->b->size(im->s->b, rec->chunks[c], &got);
		if (rc == WSTORE_ENOTFOUND || (rc == 0 && got != want)) {
			wstore__clear_err();
			return 0;
		}
		if (rc < 0)
			return rc;
	}
	if (wstore__set_str(&rec->sha256, sha) < 0 ||
	    json_object_set(json_object_get(h->state, "files"), f->path, k))
		return -ENOMEM;
	return 1;
}

static int hub_begin(struct import *im)
{
	wstore__hub *h = im->ctx;

	for (size_t i = 0; h->kept && i < h->n; i++) {
		int rc = keep_file(im, i);

		if (rc < 0)
			return rc;
		if (rc == 1) {
			im->done[i] = 1;
			im->attempted[i] = im->m->files[i].nchunks;
			h->bytes_done += h->files[i].size;
		}
	}
	return wstore__hub_write_intent(im);
}

static const wstore__import_hooks hub_hooks = { hub_claim, hub_begin,
						wstore__hub_workers };

/* ---- the entry point -----------------------------------------------------
 */

static void hub_free(wstore__hub *h)
{
	for (size_t i = 0; i < h->n; i++)
		free(h->files[i].path);
	free(h->files);
	free(h->commit);
	free(h->endpoint);
	json_decref(h->state);
	json_decref(h->kept);
	wstore__hub_held_free(h->held);
}

/* The scan import.c builds the manifest from. */
static int fill_scan(wstore__scan *scan, const wstore__hub *h)
{
	if (!(scan->files = calloc(h->n, sizeof(*scan->files))))
		return -ENOMEM;
	for (size_t i = 0; i < h->n; i++) {
		scan->files[i].size = h->files[i].size;
		scan->total += h->files[i].size;
		if (!(scan->files[i].rel = strdup(h->files[i].path)) ||
		    !(scan->files[i].abs = strdup(h->files[i].path)))
			return -ENOMEM;
		scan->n++;
	}
	return 0;
}

static int check_opts(wstore__hub *h, const wstore_hub_options *given)
{
	int rc = wstore__hub_opts(&h->o, given);

	if (rc < 0)
		return rc;
	if (h->o.reserved)
		return wstore__err(WSTORE_EINVAL,
				   "hub options: reserved must be 0");
	if (!h->o.repo || !*h->o.repo)
		return wstore__err(WSTORE_EINVAL,
				   "hub import needs a repository (ORG/NAME)");
	/* ORG/NAME, as a name on the command line is */
	{
		char *model = NULL, *rev = NULL;

		rc = wstore_parse_name(&model, &rev, h->o.repo);
		free(model);
		free(rev);
		if (rc != 1 || strchr(h->o.repo, '@'))
			return wstore__err(WSTORE_EINVAL,
					   "invalid repository '%s': ORG/NAME",
					   h->o.repo);
	}
	h->endpoint =
		strdup(h->o.endpoint && *h->o.endpoint ? h->o.endpoint
						       : DEFAULT_ENDPOINT);
	if (!h->endpoint)
		return -ENOMEM;
	/* "https://host/" names the same server as "https://host" */
	for (size_t n = strlen(h->endpoint); n > 0 && h->endpoint[n - 1] == '/';
	     n--)
		h->endpoint[n - 1] = '\0';
	if (strncmp(h->endpoint, "http://", 7) &&
	    strncmp(h->endpoint, "https://", 8))
		return wstore__err(WSTORE_EINVAL,
				   "invalid endpoint '%s': an http:// or "
				   "https:// URL",
				   h->endpoint);
	return 0;
}

/* The options the lifecycle runs with; *id chosen (given, or derived
 * taking back this import's own). */
static int pick_id(char **id, wstore_store *s, wstore_import_options *oc,
		   const wstore__hub *h)
{
	struct mine mi = { h, oc->model_id,
			   oc->chunk_size ? oc->chunk_size
					  : WSTORE_DEFAULT_CHUNK_SIZE };

	if (oc->checkpoint_id)
		return (*id = strdup(oc->checkpoint_id)) ? 0 : -ENOMEM;
	return wstore__checkpoint_id_derive_mine(id, s, oc->model_id, h->commit,
						 is_mine, &mi);
}

/* 1 when id is READY with this model and commit already, 0 when not
 * (absent, another import, FAILED, corrupt), or the error of a manifest
 * that could not be read. */
static int already_there(wstore_store *s, const char *id, const char *model,
			 const char *commit)
{
	wstore_manifest *m = NULL;
	int rc = wstore_manifest_read(&m, s, id), yes;

	if (rc < 0 && rc != WSTORE_ENOTFOUND && rc != WSTORE_ECORRUPT)
		return wstore__err(rc, "cannot read checkpoint '%s': %s", id,
				   wstore_last_error());
	yes = rc == 0 && !strcmp(m->status, "READY") &&
	      !strcmp(m->model_id, model) && !strcmp(m->revision, commit);
	wstore_manifest_free(m);
	wstore__clear_err();
	return yes;
}

/* While the file list comes in: the caller cancels (its progress
 * callback, asked with nothing done yet). */
static int canceled(void *ctx)
{
	const wstore_import_options *o = ctx;

	return o->progress && o->progress(0, 0, "", o->progress_ctx);
}

static int run(char **out_id, wstore_store *s, wstore_import_options *oc,
	       wstore__hub *h)
{
	struct import im = { .s = s, .o = oc, .hooks = &hub_hooks, .ctx = h };
	wstore__http *http = NULL;
	char *id = NULL, *uri = NULL;
	int rc = wstore__http_new(&http, &h->o, canceled, oc);

	if (rc == 0)
		rc = list_files(h, http);
	wstore__http_free(http);
	if (rc == 0 && !oc->model_id)
		oc->model_id = h->o.repo;
	oc->revision = h->commit;
	oc->source = NULL;
	if (rc == 0 &&
	    !(h->state = json_pack("{s:s, s:s, s:s, s:{}}", "endpoint",
				   h->endpoint, "repo", h->o.repo, "commit",
				   h->commit, "files")))
		rc = -ENOMEM;
	if (rc == 0)
		rc = pick_id(&id, s, oc, h);
	if (rc == 0 && out_id)
		*out_id = strdup(id);
	oc->checkpoint_id = id;
	if (rc == 0)
		rc = wstore_import_check(oc);
	if (rc == 0 && (rc = already_there(s, id, oc->model_id, h->commit))) {
		rc = rc > 0 ? 0 : rc;
		goto out;
	}
	im.chunk_size =
		oc->chunk_size ? oc->chunk_size : WSTORE_DEFAULT_CHUNK_SIZE;
	if (rc == 0)
		rc = fill_scan(&im.scan, h);
	if (rc == 0 && asprintf(&uri, "%s/%s", h->endpoint, h->o.repo) < 0)
		rc = -ENOMEM, uri = NULL;
	if (rc == 0)
		rc = wstore__import_run(&im, uri);
out:
	free(uri);
	free(id);
	wstore__import_free(&im);
	return rc;
}

int wstore_import_hub(char **out_id, wstore_store *s,
		      const wstore_import_options *opts,
		      const wstore_hub_options *hub)
{
	wstore_import_options oc;
	wstore__hub h = { 0 };
	int rc;

	if (out_id)
		*out_id = NULL;
	if (!s || !opts || !hub)
		return wstore__err(WSTORE_EINVAL,
				   "hub import: argument missing");
	if ((rc = wstore__import_opts(&oc, opts)) < 0 ||
	    (rc = check_opts(&h, hub)) < 0 ||
	    (oc.reserved &&
	     (rc = wstore__err(WSTORE_EINVAL, "import options: reserved must "
					      "be 0")) < 0)) {
		free(h.endpoint);
		return rc;
	}
	pthread_mutex_init(&h.mu, NULL);
	rc = run(out_id, s, &oc, &h);
	pthread_mutex_destroy(&h.mu);
	hub_free(&h);
	return rc;
}
