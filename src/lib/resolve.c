/*
 * resolve.c - names as Hugging Face Hub clients use them: a repository
 * (the manifests' model_id, or a checkpoint id) and a revision (the
 * manifests' revision, or a checkpoint's commit id) resolved to one READY
 * checkpoint, and the commit id of a checkpoint (the Hub's for a Hub
 * import, else one that depends on the content alone).
 *
 * Resolution reads the per-model index of repo and every manifest it
 * lists; an index entry whose manifest is missing, FAILED, corrupt or
 * names another model is passed over (indexes may lag behind deletes).
 * A manifest that could not be read (the store failed: a timeout, a
 * refused connection, an I/O error) is never taken for an absent one:
 * the resolution fails with that error, since passing over what may be
 * the newest checkpoint would name an older one.
 * Among the matches the newest wins: greatest updated_at (when it was
 * published READY), then created_at, then the greater checkpoint id, so
 * importing a new checkpoint under the same model id and revision rolls
 * the name over, and every reader picks the same one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "error.h"
#include "store.h"
#include "util.h"

/* One field of the content text: its bytes and a NUL, so that no two
 * lists of fields run together into the same text. */
static void feed(wstore__sha256 *h, const char *s)
{
	wstore__sha256_update(h, s ? s : "", strlen(s ? s : "") + 1);
}

int wstore_manifest_commit(char *out, size_t cap, const wstore_manifest *m)
{
	wstore__sha256 *h;
	char hex[65], size[24];
	size_t n = wstore_manifest_file_count(m);

	if (cap < WSTORE_COMMIT_LEN + 1)
		return wstore__err(WSTORE_ERANGE,
				   "a commit id needs %d bytes, got %zu",
				   WSTORE_COMMIT_LEN + 1, cap);
	/* imported from a Hub: the upstream's own commit (its id is what
	 * the import records as the revision) */
	if (wstore__is_hex(wstore_manifest_revision(m), WSTORE_COMMIT_LEN)) {
		memcpy(out, wstore_manifest_revision(m), WSTORE_COMMIT_LEN + 1);
		return 0;
	}
	/* else the content alone: one folder imported into two stores (or
	 * twice) has one id, whatever its checkpoint id and times */
	if (!(h = wstore__sha256_new()))
		return -ENOMEM;
	feed(h, "wstore commit 1");
	feed(h, wstore_manifest_model_id(m));
	feed(h, wstore_manifest_revision(m));
	for (size_t i = 0; i < n; i++) {
		wstore_file_info fi;

		if (wstore_manifest_file(&fi, m, i) < 0)
			continue;
		snprintf(size, sizeof(size), "%" PRIu64, fi.size);
		feed(h, fi.path);
		feed(h, size);
		feed(h, fi.sha256);
	}
	wstore__sha256_hex(h, hex);
	wstore__sha256_free(h);
	memcpy(out, hex, WSTORE_COMMIT_LEN);
	out[WSTORE_COMMIT_LEN] = '\0';
	return 0;
}

/* "", "HEAD" and NULL mean the default branch, as on the Hub. */
static const char *default_rev(const char *rev)
{
	return !rev || !*rev || !strcmp(rev, "HEAD") ? "main" : rev;
}

/* Does revision rev name m (its revision or its commit id)? */
static int rev_matches(const wstore_manifest *m, const char *rev)
{
	char sha[WSTORE_COMMIT_LEN + 1];

	if (!strcmp(wstore_manifest_revision(m), rev))
		return 1;
	return strlen(rev) == WSTORE_COMMIT_LEN &&
	       wstore_manifest_commit(sha, sizeof(sha), m) == 0 &&
	       !strcmp(sha, rev);
}

static int newer(const wstore_manifest *a, const wstore_manifest *b)
{
	if (wstore_manifest_updated_at(a) != wstore_manifest_updated_at(b))
		return wstore_manifest_updated_at(a) >
		       wstore_manifest_updated_at(b);
	if (wstore_manifest_created_at(a) != wstore_manifest_created_at(b))
		return wstore_manifest_created_at(a) >
		       wstore_manifest_created_at(b);
	return strcmp(wstore_manifest_checkpoint_id(a),
		      wstore_manifest_checkpoint_id(b)) > 0;
}

/* The READY manifest of id into *out: 0, with *out NULL when there is
 * none to consider (absent, FAILED, corrupt, an invalid id); another code
 * when the store could not tell. */
static int ready_manifest(wstore_manifest **out, wstore_store *s,
			  const char *id)
{
	int rc = wstore__manifest_read_ready(out, s, id);

	if (rc == WSTORE_ENOTFOUND || rc == WSTORE_ENOTREADY ||
	    rc == WSTORE_ECORRUPT || rc == WSTORE_EINVAL)
		return 0;
	return rc;
}

/* Keep m in *slot when it is newer than what *slot holds; else free it. */
static void keep_newest(wstore_manifest **slot, wstore_manifest *m)
{
	if (!*slot || newer(m, *slot)) {
		wstore_manifest_free(*slot);
		*slot = m;
	} else {
		wstore_manifest_free(m);
	}
}

/* The newest READY checkpoint of model repo at rev into *best (NULL if
 * none); *known is set when the model has any READY checkpoint.  The
 * default branch ("main") with no checkpoint recorded at "main" names
 * the newest one imported from a Hub (recorded at the commit the Hub
 * named), as the Hub's own main names its newest commit. */
static int by_model(wstore_manifest **best, int *known, wstore_store *s,
		    const char *repo, const char *rev)
{
	wstore_manifest *hub = NULL;
	char **ids = NULL;
	size_t n = 0;
	int rc, want_hub = !strcmp(rev, "main");

	*best = NULL;
	if ((rc = wstore_list_model(&ids, &n, s, repo)) < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		wstore_manifest *m = NULL;

		if ((rc = ready_manifest(&m, s, ids[i])) < 0) {
			wstore_manifest_free(*best);
			*best = NULL;
			break;
		}
		if (!m || strcmp(wstore_manifest_model_id(m), repo) != 0) {
			wstore_manifest_free(m);
			continue;
		}
		*known = 1;
		if (rev_matches(m, rev))
			keep_newest(best, m);
		/* a Hub commit id (40 lowercase hex): what a Hub import records
		 */
		else if (want_hub &&
			 wstore__is_hex(wstore_manifest_revision(m), 40))
			keep_newest(&hub, m);
		else
			wstore_manifest_free(m);
	}
	wstore_strings_free(ids);
	if (rc >= 0 && !*best) {
		*best = hub;
		hub = NULL;
	}
	wstore_manifest_free(hub);
	return rc;
}

int wstore_resolve(char **out_id, int *out_repo_known, wstore_store *store,
		   const char *repo, const char *revision)
{
	const char *rev = default_rev(revision);
	wstore_manifest *m = NULL;
	int known = 0, rc;

	*out_id = NULL;
	if (out_repo_known)
		*out_repo_known = 0;
	if (!repo || !*repo)
		return wstore__err(WSTORE_EINVAL,
				   "repository name must not be empty");
	if ((rc = by_model(&m, &known, store, repo, rev)) < 0)
		return rc;
	/* a checkpoint id names that checkpoint at its own revision, its
	 * commit id, or the default branch */
	if (!m && !known && wstore_validate_checkpoint_id(repo) == 0) {
		if ((rc = ready_manifest(&m, store, repo)) < 0)
			return rc;
	}
	if (m && !known) {
		known = 1;
		if (strcmp(rev, "main") != 0 && !rev_matches(m, rev)) {
			wstore_manifest_free(m);
			m = NULL;
		}
	}
	wstore__clear_err();
	if (out_repo_known)
		*out_repo_known = known;
	if (!m)
		return known ? wstore__err(WSTORE_ENOTFOUND,
					   "repository '%s' has no READY "
					   "checkpoint at revision '%s'",
					   repo, rev)
			     : wstore__err(WSTORE_ENOTFOUND,
					   "no READY checkpoint goes by '%s'",
					   repo);
	*out_id = strdup(wstore_manifest_checkpoint_id(m));
	wstore_manifest_free(m);
	return *out_id ? 0 : -ENOMEM;
}
