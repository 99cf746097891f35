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
 * (each checked to be there, at its size, and the file's bytes hashed
 * again against the recorded SHA-256) and fetches the rest.
 *
 * A caller that fetches files itself (a mirror streaming them to its
 * clients) is told the listing (on_list) and asked for its copy of each
 * file before the file is fetched (open_file, hubrun.c); the copy's
 * bytes are hashed and checked as fetched bytes are.
 */
#include <errno.h>
#include <inttypes.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "hub.h"
#include "hubfetch.h"
#include "hubtrust.h"
#include "intent.h"
#include "manifest.h"
#include "names.h"
#include "store.h"
#include "util.h"

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

/* A path as the manifest rules and the mount demand. */
static int name_ok(const char *path)
{
	int rc = wstore__path_importable(path);

	if (rc < 0)
		return wstore__err(rc, "the server's file list: %s",
				   wstore_last_error());
	return 0;
}

/* No path twice, none both a file and a directory (h->files sorted). */
int wstore__hub_names_fit(const wstore__hub *h)
{
	const char **paths = malloc((h->n ? h->n : 1) * sizeof(*paths));
	int rc;

	if (!paths)
		return -ENOMEM;
	for (size_t i = 0; i < h->n; i++)
		paths[i] = h->files[i].path;
	rc = wstore__paths_fit(paths, h->n);
	free(paths);
	if (rc < 0)
		return wstore__err(rc, "the server's file list: %s",
				   wstore_last_error());
	return 0;
}

/* The limits on what a listing may name, checked before anything is
 * allocated for the entry (hubtrust.h). */
static int within_limits(const wstore__hub *h, const char *path, uint64_t size)
{
	const wstore__hub_limits *l = &h->lim;

	if (h->n >= l->max_files)
		return wstore__err(WSTORE_EINVAL,
				   "the server lists more than %" PRIu64
				   " files (hub_max_files)",
				   l->max_files);
	if (size > l->max_file_size)
		return wstore__err(WSTORE_EINVAL,
				   "the server lists '%s' at %" PRIu64
				   " bytes, more than %" PRIu64
				   " (hub_max_file_size)",
				   path, size, l->max_file_size);
	/* h->total <= the limit: no overflow */
	if (size > l->max_total_size - h->total)
		return wstore__err(WSTORE_EINVAL,
				   "the server lists more than %" PRIu64
				   " bytes in all (hub_max_total_size)",
				   l->max_total_size);
	return 0;
}

static int add_file(wstore__hub *h, size_t *cap, const char *path,
		    uint64_t size, const char *oid, const char *sha)
{
	wstore__hub_file *f;

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
	f->size = size;
	memcpy(f->oid, oid, 41);
	if (sha)
		memcpy(f->sha256, sha, 65);
	h->n++;
	h->total += size;
	return 0;
}

/* One entry of a tree listing: kept in h->files when it is a file the
 * globs want, passed over when not; an error names what is wrong. */
static int list_entry(wstore__hub *h, json_t *e, size_t *cap)
{
	const char *type = json_string_value(json_object_get(e, "type"));
	const char *path = json_string_value(json_object_get(e, "path"));
	const char *oid = json_string_value(json_object_get(e, "oid"));
	json_t *size = json_object_get(e, "size"),
	       *lfs = json_object_get(e, "lfs");
	const char *sha = json_string_value(json_object_get(lfs, "oid"));
	char *shown;
	int rc;

	if (type && strcmp(type, "file") != 0)
		return 0;
	if (!path || !json_is_integer(size) || json_integer_value(size) < 0 ||
	    !wstore__is_hex(oid, 40) || (lfs && !wstore__is_hex(sha, 64))) {
		shown = wstore__printable(path ? path : "?");
		rc = wstore__err(WSTORE_EINVAL,
				 "the server's file list has an entry that "
				 "is not a file with a path, size and "
				 "hashes ('%s')",
				 shown ? shown : "?");
		free(shown);
		return rc;
	}
	if ((rc = name_ok(path)) < 0)
		return rc;
	if (!wanted(h, path))
		return 0;
	if ((rc = within_limits(h, path, (uint64_t)json_integer_value(size))))
		return rc;
	return add_file(h, cap, path, (uint64_t)json_integer_value(size), oid,
			lfs ? sha : NULL);
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
	const char *segs[] = { "api",	   "models", h->org, h->name,
			       "revision", rev,	     NULL };
	json_t *j = NULL;
	const char *sha;
	char *url = NULL;
	int rc = wstore__hub_url(&url, &h->ep, segs, NULL, NULL);

	if (rc < 0)
		goto out;
	if ((rc = get_json(&j, http, url, NULL)) < 0)
		goto out;
	sha = json_string_value(json_object_get(j, "sha"));
	if (!wstore__is_hex(sha, 40))
		rc = wstore__err(WSTORE_EINVAL,
				 "'%s' names no 40-hex commit id (sha)", url);
	else if (!(h->commit = strdup(sha)))
		rc = -ENOMEM;
out:
	json_decref(j);
	free(url);
	return rc;
}

int wstore__hub_cmp_file(const void *a, const void *b)
{
	return strcmp(((const wstore__hub_file *)a)->path,
		      ((const wstore__hub_file *)b)->path);
}

/* Whether the next page may be fetched: on the endpoint's origin (a
 * credential never follows a Link elsewhere), not a page fetched before
 * (a loop), and within the page limit. */
static int next_page_ok(const wstore__hub *h, const char *next,
			char *const *seen, size_t pages)
{
	char *shown;
	int rc = 0;

	if (!wstore__same_origin(&h->ep, next)) {
		shown = wstore__url_redact(next, "***");
		rc = wstore__err(WSTORE_EINVAL,
				 "the server's next page '%s' is not on %s: "
				 "refused",
				 shown ? shown : "?", h->ep.shown);
		free(shown);
		return rc;
	}
	for (size_t i = 0; i < pages; i++)
		if (!strcmp(seen[i], next))
			return wstore__err(WSTORE_EINVAL,
					   "the server's file list loops "
					   "(page '%s' again)",
					   next);
	if (pages >= h->lim.max_pages)
		return wstore__err(WSTORE_EINVAL,
				   "the server's file list has more than "
				   "%" PRIu64 " pages (hub_max_pages)",
				   h->lim.max_pages);
	return 0;
}

int wstore__hub_add_page(wstore__hub *h, const char *body, size_t len,
			 const char *url, size_t *cap)
{
	json_error_t je;
	json_t *j = json_loadb(body, len, 0, &je), *e;
	size_t i;
	int rc = 0;

	if (!j)
		return wstore__err(WSTORE_EINVAL,
				   "'%s' did not answer JSON: %s", url,
				   je.text);
	if (!json_is_array(j))
		rc = wstore__err(WSTORE_EINVAL, "'%s' is not a file list", url);
	json_array_foreach(j, i, e)
	{
		if (rc < 0)
			break;
		rc = list_entry(h, e, cap);
	}
	json_decref(j);
	return rc;
}

/* One page: its entries into h->files. */
static int list_page(wstore__hub *h, wstore__http *http, const char *url,
		     char **next, size_t *cap)
{
	char *body = NULL;
	size_t len = 0;
	int rc = wstore__http_get(http, url, &body, &len, next);

	if (rc < 0)
		return rc;
	rc = wstore__hub_add_page(h, body, len, url, cap);
	free(body);
	return rc;
}

/* The pages of the listing, as long as the server links a next one. */
static int list_pages(wstore__hub *h, wstore__http *http)
{
	const char *segs[] = { "api",  "models",  h->org, h->name,
			       "tree", h->commit, NULL };
	char **seen = NULL, *url = NULL, *next = NULL;
	size_t cap = 0, pages = 0;
	int rc = wstore__hub_url(&url, &h->ep, segs, NULL, "recursive=true");

	while (rc == 0 && url) {
		char **p = realloc(seen, (pages + 1) * sizeof(*seen));

		if (!p) {
			rc = -ENOMEM;
			break;
		}
		seen = p;
		seen[pages++] = url;
		rc = list_page(h, http, url, &next, &cap);
		if (rc == 0 && next)
			rc = next_page_ok(h, next, seen, pages);
		url = next;
		next = NULL;
	}
	free(url);
	for (size_t i = 0; i < pages; i++)
		free(seen[i]);
	free(seen);
	return rc;
}

/* Every file of the commit that the include/exclude globs take. */
static int list_files(wstore__hub *h, wstore__http *http)
{
	int rc = get_commit(h, http);

	if (rc < 0)
		return rc;
	if ((rc = list_pages(h, http)) < 0)
		return rc;
	if (h->n == 0)
		return wstore__err(WSTORE_ENOTFOUND,
				   "no file of '%s' at %s is left to import "
				   "(include/exclude)",
				   h->o.repo, h->commit);
	qsort(h->files, h->n, sizeof(*h->files), wstore__hub_cmp_file);
	return wstore__hub_names_fit(h);
}

/* ---- resuming ------------------------------------------------------------
 */

/* The files hub's import verified after its record was written (its
 * marks, intent.c) into hub's "files". */
static int add_marks(json_t *hub, wstore_store *s, const char *id)
{
	json_t *marks = NULL, *rec, *files = json_object_get(hub, "files");
	size_t i;
	int rc = wstore__intent_marks(&marks, s, id);

	if (rc < 0)
		return rc;
	json_array_foreach(marks, i, rec)
	{
		const char *path =
			json_string_value(json_object_get(rec, "path"));

		if (!path)
			continue;
		if (json_object_set(files, path, rec) < 0) {
			rc = -ENOMEM;
			break;
		}
	}
	json_decref(marks);
	return rc;
}

/* Does a record's "hub" member name the import state names (endpoint,
 * repository, commit), with its files? */
static int same_hub(const json_t *hub, const json_t *state)
{
	static const char *const keys[] = { "endpoint", "repo", "commit" };

	if (!json_is_object(hub) ||
	    !json_is_object(json_object_get(hub, "files")))
		return 0;
	for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++)
		if (!json_equal(json_object_get(hub, keys[i]),
				json_object_get(state, keys[i])))
			return 0;
	return 1;
}

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
	if (!same_hub(hub, h->state) ||
	    json_integer_value(json_object_get(j, "chunk_size")) !=
		    (json_int_t)chunk_size)
		hub = NULL;
	json_incref(hub);
	json_decref(j);
	if (hub && (rc = add_marks(hub, s, id)) < 0) {
		json_decref(hub);
		return rc;
	}
	*out = hub;
	return 0;
}

/* 1 when manifest m holds every file h lists, at the size listed (an
 * import filtered with --include holds only some: a later import with
 * more files does not stop at it). */
static int holds_all(const wstore_manifest *m, const wstore__hub *h)
{
	size_t k = 0;

	/* both sorted by path */
	for (size_t i = 0; i < h->n; i++) {
		while (k < m->nfiles &&
		       strcmp(m->files[k].path, h->files[i].path) < 0)
			k++;
		if (k == m->nfiles ||
		    strcmp(m->files[k].path, h->files[i].path) ||
		    m->files[k].size != h->files[i].size)
			return 0;
	}
	return 1;
}

/* Is id this import's to take: READY (or FAILED) with this model and
 * commit and every file listed, or left by a killed import of this
 * commit? */
struct own_import {
	const wstore__hub *h;
	const char *model_id;
	uint64_t chunk_size;
};

static int is_own_import(void *ctx, wstore_store *s, const char *id)
{
	const struct own_import *own = ctx;
	wstore_manifest *m = NULL;
	json_t *hub;
	int rc = wstore_manifest_read(&m, s, id), yes = 0;

	if (rc == 0)
		yes = !strcmp(m->model_id, own->model_id) &&
		      !strcmp(m->revision, own->h->commit) &&
		      holds_all(m, own->h);
	wstore_manifest_free(m);
	/* a manifest that could not be read now may be this import's:
	 * an error, never another id */
	if (rc < 0 && rc != WSTORE_ENOTFOUND && rc != WSTORE_ECORRUPT)
		return rc;
	if (rc == WSTORE_ENOTFOUND) {
		if ((rc = same_import(&hub, s, own->h, id, own->chunk_size)) <
		    0)
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
 * its size, and its bytes hashing to the SHA-256 recorded when it was
 * verified (buf: cap bytes to read them with).  1 kept, 0 fetch again,
 * or an error of the store. */
static int keep_file(struct import *im, size_t i, void *buf, size_t cap)
{
	wstore__hub *h = im->ctx;
	const wstore__hub_file *f = &h->files[i];
	wstore__file_rec *rec = &im->m->files[i];
	json_t *k = json_object_get(json_object_get(h->kept, "files"), f->path);
	const char *oid = json_string_value(json_object_get(k, "oid"));
	const char *sha = json_string_value(json_object_get(k, "sha256"));
	json_t *size = json_object_get(k, "size");
	int rc;

	if (!oid || strcmp(oid, f->oid) || !wstore__is_hex(sha, 64) ||
	    json_integer_value(size) != (json_int_t)f->size)
		return 0;
	for (uint64_t c = 0; c < rec->nchunks; c++) {
		uint64_t want = 0, got = 0;

		rc = wstore__chunk_len(&want, rec, c);
		if (rc == 0)
			rc = im->s->b->size(im->s->b, rec->chunks[c], &got);
		if (rc == WSTORE_ENOTFOUND || (rc == 0 && got != want)) {
			wstore__clear_err();
			return 0;
		}
		if (rc < 0)
			return rc;
	}
	if (wstore__set_str(&rec->sha256, sha) < 0)
		return -ENOMEM;
	/* the bytes themselves, hashed again: a store may have lost or
	 * changed them at the same size (far cheaper than a fetch) */
	rc = wstore__fetch_to_fd(im->s, rec, -1, buf, cap, 1, NULL, NULL);
	if (rc == WSTORE_ECORRUPT) {
		wstore__clear_err();
		return 0;
	}
	if (rc < 0)
		return rc;
	if (json_object_set(json_object_get(h->state, "files"), f->path, k))
		return -ENOMEM;
	return 1;
}

static int hub_begin(struct import *im)
{
	wstore__hub *h = im->ctx;
	size_t cap = h->kept ? (size_t)wstore__max_chunk(im->m) : 0;
	void *buf = cap ? wstore__buf_alloc(cap) : NULL;

	if (cap && !buf)
		return wstore__err(-ENOMEM, "cannot allocate a %zu-byte buffer",
				   cap);
	int rc;

	for (size_t i = 0; h->kept && i < h->n; i++) {
		rc = keep_file(im, i, buf, cap);

		if (rc < 0) {
			free(buf);
			return rc;
		}
		if (rc == 1) {
			im->done[i] = 1;
			im->attempted[i] = im->m->files[i].nchunks;
			h->bytes_done += h->files[i].size;
		}
	}
	free(buf);
	/* the kept files in the record; the killed run's marks go after it
	 * (this run numbers its own from 0) */
	if ((rc = wstore__hub_write_intent(im)) < 0)
		return rc;
	return wstore__intent_marks_drop(im->s, im->o->checkpoint_id);
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
	wstore__endpoint_free(&h->ep);
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
	const char *slash;
	int rc = wstore__hub_opts(&h->o, given);

	if (rc < 0)
		return rc;
	if (h->o.reserved || h->o.reserved2)
		return wstore__err(WSTORE_EINVAL,
				   "hub options: reserved must be 0");
	if (!h->o.repo || !*h->o.repo)
		return wstore__err(WSTORE_EINVAL,
				   "hub import needs a repository (ORG/NAME)");
	/* ORG/NAME as the Hub spells it: never more than path segments */
	if ((rc = wstore__hub_repo_ok(h->o.repo)) < 0)
		return rc;
	slash = strchr(h->o.repo, '/');
	snprintf(h->org, sizeof(h->org), "%.*s", (int)(slash - h->o.repo),
		 h->o.repo);
	snprintf(h->name, sizeof(h->name), "%s", slash + 1);
	wstore__hub_limits_of(&h->lim, &h->o);
	return wstore__endpoint_parse(&h->ep, h->o.endpoint && *h->o.endpoint
						      ? h->o.endpoint
						      : WSTORE__HUB_DEFAULT);
}

/* The options the lifecycle runs with; *id chosen (given, or derived
 * taking back this import's own). */
static int pick_id(char **id, wstore_store *s, wstore_import_options *oc,
		   const wstore__hub *h)
{
	struct own_import own = { h, oc->model_id,
				  oc->chunk_size ? oc->chunk_size
						 : WSTORE_DEFAULT_CHUNK_SIZE };

	if (oc->checkpoint_id)
		return (*id = strdup(oc->checkpoint_id)) ? 0 : -ENOMEM;
	return wstore__checkpoint_id_derive_mine(id, s, oc->model_id, h->commit,
						 is_own_import, &own);
}

/* 1 when id is READY with this model and commit and every file listed
 * already, 0 when not (absent, another import, FAILED, corrupt, fewer
 * files), or the error of a manifest that could not be read. */
static int already_there(wstore_store *s, const char *id, const char *model,
			 const wstore__hub *h)
{
	wstore_manifest *m = NULL;
	int rc = wstore_manifest_read(&m, s, id), yes;

	if (rc < 0 && rc != WSTORE_ENOTFOUND && rc != WSTORE_ECORRUPT)
		return wstore__err(rc, "cannot read checkpoint '%s': %s", id,
				   wstore_last_error());
	yes = rc == 0 && !strcmp(m->status, "READY") &&
	      !strcmp(m->model_id, model) && !strcmp(m->revision, h->commit) &&
	      holds_all(m, h);
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

/* The file list, and what the intent record names the import by (the
 * endpoint without its credentials). */
static int list_and_name(wstore__hub *h, wstore_import_options *oc)
{
	wstore__http *http = NULL;
	int rc = wstore__http_new(&http, &h->o, &h->ep, canceled, oc);

	if (rc == 0)
		rc = list_files(h, http);
	wstore__http_free(http);
	if (rc < 0)
		return rc;
	if (!oc->model_id)
		oc->model_id = h->o.repo;
	oc->revision = h->commit;
	oc->source = NULL;
	h->state = json_pack("{s:s, s:s, s:s, s:{}}", "endpoint", h->ep.shown,
			     "repo", h->o.repo, "commit", h->commit, "files");
	return h->state ? 0 : -ENOMEM;
}

/* The caller's on_list: the commit and the files to import. */
static int tell_list(const wstore__hub *h)
{
	wstore_hub_file *fs = calloc(h->n ? h->n : 1, sizeof(*fs));
	int rc;

	if (!fs)
		return -ENOMEM;
	for (size_t i = 0; i < h->n; i++)
		fs[i] = (wstore_hub_file){ h->files[i].path, h->files[i].size,
					   h->files[i].oid,
					   h->files[i].sha256 };
	rc = h->o.on_list(h->o.ctx, h->commit, h->n, fs);
	free(fs);
	if (rc != 0)
		return wstore__err(rc < 0 ? rc : WSTORE_ECANCELED,
				   "the caller stopped the import of '%s' at "
				   "%s",
				   h->o.repo, h->commit);
	return 0;
}

static int run(char **out_id, wstore_store *s, wstore_import_options *oc,
	       wstore__hub *h)
{
	struct import im = { .s = s, .o = oc, .hooks = &hub_hooks, .ctx = h };
	char *id = NULL, *uri = NULL;
	int rc = list_and_name(h, oc);

	if (rc == 0 && h->o.on_list)
		rc = tell_list(h);
	if (rc < 0)
		goto out;
	if ((rc = pick_id(&id, s, oc, h)) < 0)
		goto out;
	if (out_id && !(*out_id = strdup(id))) {
		rc = -ENOMEM;
		goto out;
	}
	oc->checkpoint_id = id;
	if ((rc = wstore_import_check(oc)) < 0)
		goto out;
	if ((rc = already_there(s, id, oc->model_id, h)) != 0) {
		rc = rc > 0 ? 0 : rc;
		goto out;
	}
	im.chunk_size =
		oc->chunk_size ? oc->chunk_size : WSTORE_DEFAULT_CHUNK_SIZE;
	if ((rc = fill_scan(&im.scan, h)) < 0)
		goto out;
	/* the recorded source: no credentials */
	if (asprintf(&uri, "%s/%s", h->ep.shown, h->o.repo) < 0) {
		uri = NULL;
		rc = -ENOMEM;
		goto out;
	}
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
	if ((rc = wstore__import_opts(&oc, opts)) < 0)
		return rc;
	if (oc.reserved)
		return wstore__err(WSTORE_EINVAL,
				   "import options: reserved must be 0");
	if ((rc = check_opts(&h, hub)) < 0) {
		wstore__endpoint_free(&h.ep);
		return rc;
	}
	pthread_mutex_init(&h.mu, NULL);
	rc = run(out_id, s, &oc, &h);
	pthread_mutex_destroy(&h.mu);
	hub_free(&h);
	return rc;
}
