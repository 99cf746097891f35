/*
 * api.c - the JSON endpoints Hub clients call before downloading: model
 * info at a revision (commit id and siblings), the file tree and
 * paths-info.  Shapes follow what huggingface_hub (ModelInfo, RepoFile,
 * RepoFolder) and @huggingface/hub (modelInfo, listFiles, pathsInfo)
 * read; fields the Hub has that make no sense here (likes, downloads,
 * gating) are present with neutral values so that clients parse them.
 *
 * Every file is listed from the resolved checkpoint's manifest and only
 * those: nothing outside it is reachable, and directories exist only as
 * prefixes of manifest paths.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/sha.h>

#include "http.h"

/* Paths one paths-info request may ask about: each costs a pass over the
 * manifest's files (directories are prefixes), so a body of a megabyte
 * of short names would cost as many passes. */
#define PATHS_MAX 1000

struct wck *wopen_target(struct MHD_Connection *c, struct wreq *r,
			 const struct wtarget *t, enum MHD_Result *ret)
{
	struct wck *k = NULL;
	const char *why;
	int known = 0, rc;

	/* no store holds such a name, and it never goes upstream (a
	 * mirror): the Hub's answer to a name it does not have */
	if (!wutf8_valid(t->repo)) {
		*ret = wreply_error(c, r, MHD_HTTP_NOT_FOUND, "RepoNotFound",
				    "repository name not valid UTF-8");
		return NULL;
	}
	if (t->rev && !wutf8_valid(t->rev)) {
		*ret = wreply_error(c, r, MHD_HTTP_NOT_FOUND,
				    "RevisionNotFound",
				    "revision not valid UTF-8");
		return NULL;
	}
	rc = wcache_get(&k, &known, r->sv->cache, t->repo, t->rev);
	r->mirror = wmirror_outcome();
	if (rc == 0) {
		free(r->ckpt);
		r->ckpt = strdup(k->id);
		return k;
	}
	why = wmirror_error()[0] ? wmirror_error() : wstore_last_error();

	if (rc == WSTORE_ENOTFOUND)
		*ret = wreply_error(c, r, MHD_HTTP_NOT_FOUND,
				    known ? "RevisionNotFound" : "RepoNotFound",
				    why);
	else if (rc == -EACCES) /* the upstream refused the mirror */
		*ret = wreply_error(c, r, MHD_HTTP_UNAUTHORIZED, "RepoNotFound",
				    why);
	else if (rc == WSTORE_EVERIFY) /* the upstream sent wrong bytes */
		*ret = wreply_error(c, r, MHD_HTTP_BAD_GATEWAY, NULL, why);
	else
		/* the store failed to answer (a timeout, a refused
		 * connection, an I/O error): worth retrying, and never
		 * "not found" nor another checkpoint; damage is not */
		*ret = wreply_error(c, r,
				    rc == WSTORE_ECORRUPT || rc == WSTORE_EINVAL
					    ? MHD_HTTP_INTERNAL_SERVER_ERROR
					    : MHD_HTTP_SERVICE_UNAVAILABLE,
				    NULL, why);
	return NULL;
}

/* The store failed while a file's oid was computed: 503. */
static enum MHD_Result store_failed(struct MHD_Connection *c, struct wreq *r,
				    int rc)
{
	return wreply_error(c, r,
			    rc == WSTORE_ECORRUPT
				    ? MHD_HTTP_INTERNAL_SERVER_ERROR
				    : MHD_HTTP_SERVICE_UNAVAILABLE,
			    NULL, wstore_last_error());
}

/* Size of f's LFS pointer: 125 bytes and the digits of its size. */
static json_int_t pointer_size(const wstore_file_info *fi)
{
	char ptr[256];

	return (json_int_t)wlfs_pointer(ptr, sizeof(ptr), fi);
}

static void iso_time(char out[32], int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!gmtime_r(&tt, &tm) ||
	    !strftime(out, 32, "%Y-%m-%dT%H:%M:%S.000Z", &tm))
		snprintf(out, 32, "1970-01-01T00:00:00.000Z");
}

static json_t *last_commit(const wstore_manifest *m, const char *commit)
{
	char when[32];

	iso_time(when, wstore_manifest_updated_at(m));
	return json_pack("{s:s, s:s, s:s}", "id", commit, "title",
			 "wstore import", "date", when);
}

/* A tree / paths-info entry for file fi of k; NULL with *err set when
 * its oid cannot be computed (the store failed). */
static json_t *file_entry(struct wck *k, const wstore_file_info *fi,
			  const json_t *lc, int *err)
{
	char oid[41];
	json_t *e;

	if ((*err = wfile_oid(oid, k, fi)) < 0)
		return NULL;
	e = json_pack("{s:s, s:s, s:I, s:s}", "type", "file", "oid", oid,
		      "size", (json_int_t)fi->size, "path", fi->path);
	if (e && wfile_is_lfs(fi))
		json_object_set_new(e, "lfs",
				    json_pack("{s:s, s:I, s:i}", "oid",
					      fi->sha256, "size",
					      (json_int_t)fi->size,
					      "pointerSize", pointer_size(fi)));
	if (e && lc)
		json_object_set(e, "lastCommit", (json_t *)lc);
	return e;
}

static json_t *dir_entry(const char *path, size_t len, const char *commit,
			 const json_t *lc)
{
	json_t *e = json_pack("{s:s, s:s, s:i, s:s%}", "type", "directory",
			      "oid", commit, "size", 0, "path", path, len);

	if (e && lc)
		json_object_set(e, "lastCommit", (json_t *)lc);
	return e;
}

/* The LFS pointer's size of a listed file: 125 bytes and the digits of
 * its size. */
static int listed_pointer_size(const struct wlisting_file *f)
{
	char digits[24];

	return 125 + snprintf(digits, sizeof(digits), "%" PRIu64, f->size);
}

/* The model info of a partly mirrored snapshot, from the upstream's
 * listing (its files stream as they are asked for: files.c). */
static enum MHD_Result listed_info(struct MHD_Connection *c, struct wreq *r,
				   const struct wtarget *t, struct wlisting *l)
{
	const char *slash = strchr(t->repo, '/');
	json_t *j, *sib = json_array();
	uint64_t total = 0;
	char now[32];

	iso_time(now, (int64_t)time(NULL));
	for (size_t i = 0; sib && i < l->n; i++) {
		const struct wlisting_file *f = &l->files[i];
		json_t *e = json_pack("{s:s, s:I, s:s}", "rfilename", f->path,
				      "size", (json_int_t)f->size, "blobId",
				      f->oid);

		total += f->size;
		if (e && f->sha256[0])
			json_object_set_new(e, "lfs",
					    json_pack("{s:I, s:s, s:i}", "size",
						      (json_int_t)f->size,
						      "sha256", f->sha256,
						      "pointerSize",
						      listed_pointer_size(f)));
		json_array_append_new(sib, e);
	}
	j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:b, s:b, "
		      "s:i, s:i, s:[s], s:o, s:I}",
		      "_id", l->commit, "id", t->repo, "modelId", t->repo,
		      "sha", l->commit, "lastModified", now, "createdAt", now,
		      "private", 0, "disabled", 0, "gated", 0, "downloads", 0,
		      "likes", 0, "tags", "wstore", "siblings", sib,
		      "usedStorage", (json_int_t)total);
	if (j && slash)
		json_object_set_new(
			j, "author",
			json_stringn(t->repo, (size_t)(slash - t->repo)));
	wlisting_free(l);
	return wreply_json(c, r, MHD_HTTP_OK, j);
}

/* A mirrored name the store cannot answer yet: the upstream's listing.
 * 0 with *out (wlisting_free it), or with *out NULL and the error
 * answered in *ret; 1: not the mirror's, ask the store. */
static int try_listed(struct MHD_Connection *c, struct wreq *r,
		      const struct wtarget *t, struct wlisting **out,
		      enum MHD_Result *ret)
{
	int rc;

	*out = NULL;
	if (!wmirror_cold(r, t))
		return 1;
	wmirror_error_clear();
	rc = wmirror_listing(out, r->sv->mirror, t->repo, t->rev);
	r->mirror = wmirror_outcome();
	if (rc == WSTORE_EBUSY)
		*ret = wreply_error(c, r, MHD_HTTP_SERVICE_UNAVAILABLE, NULL,
				    wmirror_error());
	else if (rc != 0)
		return 1; /* the usual path answers the rest */
	return 0;
}

enum MHD_Result wapi_info(struct MHD_Connection *c, struct wreq *r,
			  const struct wtarget *t)
{
	char made[32], upd[32], oid[41];
	enum MHD_Result ret = MHD_NO;
	struct wck *k;
	const char *commit;
	const wstore_manifest *m;
	const char *slash = strchr(t->repo, '/');
	json_t *j, *sib;
	size_t n;
	int err = 0;

	struct wlisting *l;

	if (try_listed(c, r, t, &l, &ret) == 0)
		return l ? listed_info(c, r, t, l) : ret;
	if (!(k = wopen_target(c, r, t, &ret)))
		return ret;
	commit = k->commit;
	m = wstore_checkpoint_manifest(k->ck);
	iso_time(made, wstore_manifest_created_at(m));
	iso_time(upd, wstore_manifest_updated_at(m));
	sib = json_array();
	n = wstore_manifest_file_count(m);
	for (size_t i = 0; sib && i < n && err == 0; i++) {
		wstore_file_info fi;
		json_t *e;

		if (wstore_manifest_file(&fi, m, i) < 0 ||
		    (err = wfile_oid(oid, k, &fi)) < 0)
			continue;
		e = json_pack("{s:s, s:I, s:s}", "rfilename", fi.path, "size",
			      (json_int_t)fi.size, "blobId", oid);
		if (e && wfile_is_lfs(&fi))
			json_object_set_new(e, "lfs",
					    json_pack("{s:I, s:s, s:i}", "size",
						      (json_int_t)fi.size,
						      "sha256", fi.sha256,
						      "pointerSize",
						      pointer_size(&fi)));
		json_array_append_new(sib, e);
	}
	if (err < 0) {
		json_decref(sib);
		wck_put(r->sv->cache, k);
		return store_failed(c, r, err);
	}
	j = json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s, s:s, s:b, s:b, s:b, "
		      "s:i, s:i, s:[s], s:o, s:I}",
		      "_id", wstore_manifest_checkpoint_id(m), "id", t->repo,
		      "modelId", t->repo, "author", slash ? t->repo : NULL,
		      "sha", commit, "lastModified", upd, "createdAt", made,
		      "private", 0, "disabled", 0, "gated", 0, "downloads", 0,
		      "likes", 0, "tags", "wstore", "siblings", sib,
		      "usedStorage", (json_int_t)wstore_manifest_total_size(m));
	if (j && slash)
		json_object_set_new(
			j, "author",
			json_stringn(t->repo, (size_t)(slash - t->repo)));
	wck_put(r->sv->cache, k);
	return wreply_json(c, r, MHD_HTTP_OK, j);
}

/* Append the directories of path (those under prefix, not yet listed:
 * paths come sorted, so "last" remembers the deepest one listed). */
static void add_dirs(json_t *out, const char *path, size_t plen,
		     size_t depth_max, char **last, const char *commit,
		     const json_t *lc)
{
	size_t depth = 0;

	for (const char *p = path + plen; (p = strchr(p, '/')); p++) {
		size_t len = (size_t)(p - path);

		if (++depth > depth_max)
			break;
		if (*last && strlen(*last) >= len &&
		    !strncmp(*last, path, len) &&
		    ((*last)[len] == '\0' || (*last)[len] == '/'))
			continue;
		json_array_append_new(out, dir_entry(path, len, commit, lc));
		free(*last);
		*last = strndup(path, len);
	}
}

/* The tree of k's checkpoint under dir ("" = the root); *err set when
 * an oid could not be computed. */
static json_t *tree(struct wck *k, const char *dir, int recursive,
		    const json_t *lc, int *err)
{
	const wstore_manifest *m = wstore_checkpoint_manifest(k->ck);
	size_t n = wstore_manifest_file_count(m), dl = strlen(dir);
	const char *commit = k->commit;
	json_t *out = json_array();
	char *last = NULL;

	*err = 0;
	for (size_t i = 0; out && i < n && *err == 0; i++) {
		wstore_file_info fi;
		size_t plen = dl ? dl + 1 : 0;

		if (wstore_manifest_file(&fi, m, i) < 0)
			continue;
		if (dl && (strncmp(fi.path, dir, dl) || fi.path[dl] != '/'))
			continue;
		add_dirs(out, fi.path, plen, recursive ? (size_t)-1 : 1, &last,
			 commit, lc);
		if (recursive || !strchr(fi.path + plen, '/'))
			json_array_append_new(out, file_entry(k, &fi, lc, err));
	}
	free(last);
	return out;
}

/* Is dir a prefix directory of some file of m? */
static int has_dir(const wstore_manifest *m, const char *dir)
{
	size_t n = wstore_manifest_file_count(m), dl = strlen(dir);

	for (size_t i = 0; i < n; i++) {
		wstore_file_info fi;

		if (wstore_manifest_file(&fi, m, i) == 0 &&
		    !strncmp(fi.path, dir, dl) && fi.path[dl] == '/')
			return 1;
	}
	return 0;
}

/* ---- a partly mirrored snapshot: tree and paths-info from the
 * upstream's listing (its files stream as they are asked for) ---------- */

static json_t *listed_file_entry(const struct wlisting_file *f,
				 const json_t *lc)
{
	json_t *e =
		json_pack("{s:s, s:s, s:I, s:s}", "type", "file", "oid", f->oid,
			  "size", (json_int_t)f->size, "path", f->path);

	if (e && f->sha256[0])
		json_object_set_new(
			e, "lfs",
			json_pack("{s:s, s:I, s:i}", "oid", f->sha256, "size",
				  (json_int_t)f->size, "pointerSize",
				  listed_pointer_size(f)));
	if (e && lc)
		json_object_set(e, "lastCommit", (json_t *)lc);
	return e;
}

static json_t *listed_last_commit(const struct wlisting *l)
{
	char now[32];

	iso_time(now, (int64_t)time(NULL));
	return json_pack("{s:s, s:s, s:s}", "id", l->commit, "title",
			 "wstore import", "date", now);
}

/* Is dir a prefix directory of some listed file? */
static int listed_has_dir(const struct wlisting *l, const char *dir)
{
	size_t dl = strlen(dir);

	for (size_t i = 0; i < l->n; i++)
		if (!strncmp(l->files[i].path, dir, dl) &&
		    l->files[i].path[dl] == '/')
			return 1;
	return 0;
}

/* The listed file at path, or NULL. */
static const struct wlisting_file *listed_find(const struct wlisting *l,
					       const char *path)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->files[i].path, path))
			return &l->files[i];
	return NULL;
}

/* The tree under dir ("" = the root) of a listing (sorted by path, as
 * add_dirs needs); takes l over. */
static enum MHD_Result listed_tree(struct MHD_Connection *c, struct wreq *r,
				   struct wlisting *l, const char *dir)
{
	size_t dl = strlen(dir), plen = dl ? dl + 1 : 0;
	int recursive = wquery_true(c, "recursive");
	json_t *out, *lc = NULL;
	char *last = NULL;

	if (dl && !listed_has_dir(l, dir)) {
		wlisting_free(l);
		return wreply_error(c, r, MHD_HTTP_NOT_FOUND, "EntryNotFound",
				    "no such directory in the repository");
	}
	if (wquery_true(c, "expand"))
		lc = listed_last_commit(l);
	out = json_array();
	for (size_t i = 0; out && i < l->n; i++) {
		const char *p = l->files[i].path;

		if (dl && (strncmp(p, dir, dl) || p[dl] != '/'))
			continue;
		add_dirs(out, p, plen, recursive ? (size_t)-1 : 1, &last,
			 l->commit, lc);
		if (recursive || !strchr(p + plen, '/'))
			json_array_append_new(
				out, listed_file_entry(&l->files[i], lc));
	}
	free(last);
	json_decref(lc);
	wlisting_free(l);
	return wreply_json(c, r, MHD_HTTP_OK, out);
}

enum MHD_Result wapi_tree(struct MHD_Connection *c, struct wreq *r,
			  const struct wtarget *t)
{
	char *dir = strdup(t->path ? t->path : "");
	enum MHD_Result ret = MHD_NO;
	struct wlisting *l;
	struct wck *k;
	const char *commit;
	const wstore_manifest *m;
	json_t *lc = NULL, *out;
	size_t dl;
	int err;

	if (!dir)
		return MHD_NO;
	for (dl = strlen(dir); dl && dir[dl - 1] == '/'; dl--)
		dir[dl - 1] = '\0';
	if (try_listed(c, r, t, &l, &ret) == 0) {
		ret = l ? listed_tree(c, r, l, dir) : ret;
		free(dir);
		return ret;
	}
	if (!(k = wopen_target(c, r, t, &ret))) {
		free(dir);
		return ret;
	}
	commit = k->commit;
	m = wstore_checkpoint_manifest(k->ck);
	if (dl && !has_dir(m, dir)) {
		ret = wreply_error(c, r, MHD_HTTP_NOT_FOUND, "EntryNotFound",
				   "no such directory in the repository");
	} else {
		if (wquery_true(c, "expand"))
			lc = last_commit(m, commit);
		out = tree(k, dir, wquery_true(c, "recursive"), lc, &err);
		if (err < 0) {
			json_decref(out);
			ret = store_failed(c, r, err);
		} else {
			ret = wreply_json(c, r, MHD_HTTP_OK, out);
		}
	}
	json_decref(lc);
	free(dir);
	wck_put(r->sv->cache, k);
	return ret;
}

/* paths and expand from a JSON body ({"paths": [...], "expand": bool}) or
 * a form body (paths=a&paths=b&expand=True), as the two clients send;
 * at most PATHS_MAX + 1 of them (one more tells the caller "too many"). */
static json_t *parse_paths(const struct wreq *r, int *expand)
{
	json_t *paths = json_array();
	char *body = r->body ? r->body : "";

	*expand = 0;
	if (body[0] == '{') {
		json_t *j = json_loads(body, 0, NULL), *p, *v;
		size_t i;

		p = j ? json_object_get(j, "paths") : NULL;
		if (json_is_string(p))
			json_array_append(paths, p);
		json_array_foreach(p, i, v)
		{
			if (json_array_size(paths) > PATHS_MAX)
				break;
			if (json_is_string(v))
				json_array_append(paths, v);
		}
		*expand = json_is_true(json_object_get(j, "expand"));
		json_decref(j);
		return paths;
	}
	for (char *s = body, *e; *s; s = *e ? e + 1 : e) {
		char *eq, *val;

		e = s + strcspn(s, "&");
		eq = memchr(s, '=', (size_t)(e - s));
		if (!eq)
			continue;
		for (char *q = eq + 1; q < e; q++)
			if (*q == '+')
				*q = ' ';
		val = wurl_decode(eq + 1, (size_t)(e - eq - 1));
		if (val && (size_t)(eq - s) == 5 && !strncmp(s, "paths", 5) &&
		    json_array_size(paths) <= PATHS_MAX)
			json_array_append_new(paths, json_string(val));
		else if (val && (size_t)(eq - s) == 6 &&
			 !strncmp(s, "expand", 6))
			*expand = !strcasecmp(val, "true") || !strcmp(val, "1");
		free(val);
	}
	return paths;
}

/* paths-info from a listing; takes l over. */
static enum MHD_Result listed_paths_info(struct MHD_Connection *c,
					 struct wreq *r, struct wlisting *l)
{
	int expand;
	json_t *paths = parse_paths(r, &expand), *out, *lc = NULL, *v;
	size_t i;

	if (json_array_size(paths) > PATHS_MAX) {
		json_decref(paths);
		wlisting_free(l);
		return wreply_error(c, r, MHD_HTTP_BAD_REQUEST, NULL,
				    "too many paths: at most 1000 per request");
	}
	out = json_array();
	if (expand)
		lc = listed_last_commit(l);
	json_array_foreach(paths, i, v)
	{
		const char *p = json_string_value(v);
		const struct wlisting_file *f = listed_find(l, p);

		if (f)
			json_array_append_new(out, listed_file_entry(f, lc));
		else if (*p && listed_has_dir(l, p))
			json_array_append_new(
				out, dir_entry(p, strlen(p), l->commit, lc));
	}
	json_decref(lc);
	json_decref(paths);
	wlisting_free(l);
	return wreply_json(c, r, MHD_HTTP_OK, out);
}

enum MHD_Result wapi_paths_info(struct MHD_Connection *c, struct wreq *r,
				const struct wtarget *t)
{
	enum MHD_Result ret = MHD_NO;
	struct wlisting *l;
	struct wck *k;
	const char *commit;
	const wstore_manifest *m;
	json_t *paths, *out, *lc = NULL, *v;
	int expand, err = 0;
	size_t i;

	if (try_listed(c, r, t, &l, &ret) == 0)
		return l ? listed_paths_info(c, r, l) : ret;
	if (!(k = wopen_target(c, r, t, &ret)))
		return ret;
	commit = k->commit;
	m = wstore_checkpoint_manifest(k->ck);
	paths = parse_paths(r, &expand);
	if (json_array_size(paths) > PATHS_MAX) {
		json_decref(paths);
		wck_put(r->sv->cache, k);
		return wreply_error(c, r, MHD_HTTP_BAD_REQUEST, NULL,
				    "too many paths: at most 1000 per request");
	}
	out = json_array();
	if (expand)
		lc = last_commit(m, commit);
	json_array_foreach(paths, i, v)
	{
		const char *p = json_string_value(v);
		int64_t fk = wstore_manifest_find(m, p);
		wstore_file_info fi;

		if (err < 0)
			break;
		if (fk >= 0 && wstore_manifest_file(&fi, m, (size_t)fk) == 0)
			json_array_append_new(out,
					      file_entry(k, &fi, lc, &err));
		else if (*p && has_dir(m, p))
			json_array_append_new(
				out, dir_entry(p, strlen(p), commit, lc));
	}
	json_decref(lc);
	json_decref(paths);
	wck_put(r->sv->cache, k);
	if (err < 0) {
		json_decref(out);
		return store_failed(c, r, err);
	}
	return wreply_json(c, r, MHD_HTTP_OK, out);
}

/* The commit rev names: while the mirror still fetches its snapshot,
 * the upstream's listing says (so refs of a cold repository answer once
 * the listing is in, not after the whole snapshot); else the cache.
 * 0 with out, WSTORE_ENOTFOUND when no such name, or an error. */
static int ref_commit(char out[WSTORE_COMMIT_LEN + 1], struct wreq *r,
		      const char *repo, const char *rev)
{
	/* only read through t (wmirror_cold takes it const) */
	struct wtarget t = { (char *)repo, (char *)rev, NULL };
	struct wlisting *l = NULL;
	struct wck *k = NULL;
	int known = 0, rc = 1;

	if (wmirror_cold(r, &t))
		rc = wmirror_listing(&l, r->sv->mirror, repo, rev);
	if (rc == 0)
		memcpy(out, l->commit, WSTORE_COMMIT_LEN + 1);
	wlisting_free(l);
	if (rc == 0 || rc == WSTORE_EBUSY)
		return rc;
	/* not the mirror's, or its listing failed: the usual path says */
	if ((rc = wcache_get(&k, &known, r->sv->cache, repo, rev)) < 0)
		return rc;
	memcpy(out, k->commit, WSTORE_COMMIT_LEN + 1);
	wck_put(r->sv->cache, k);
	return 0;
}

/* Add rev -> commit to the refs answer out (a branch, or a pull request
 * for "refs/pr/N"), unless listed already. */
static int add_ref(json_t *out, struct wreq *r, const char *repo,
		   const char *rev)
{
	int pr = !strncmp(rev, "refs/pr/", 8), rc;
	json_t *list = json_object_get(out, pr ? "pullRequests" : "branches");
	char ref[300], commit[WSTORE_COMMIT_LEN + 1];
	size_t i;
	json_t *v;

	json_array_foreach(list, i, v)
	{
		const char *name =
			json_string_value(json_object_get(v, "name"));

		if (!strcmp(name, rev))
			return 0;
	}
	if ((rc = ref_commit(commit, r, repo, rev)) < 0)
		return rc == WSTORE_ENOTFOUND ? 0 : rc;
	snprintf(ref, sizeof(ref), "%s%s", pr ? "" : "refs/heads/", rev);
	json_array_append_new(list,
			      json_pack("{s:s, s:s, s:s}", "name", rev, "ref",
					ref, "targetCommit", commit));
	return 0;
}

/* A mirror's branches and tags: those it recorded (main at least), each
 * at the commit it serves (asked of the upstream when that is due). */
static int mirror_refs(json_t *out, struct wreq *r, const char *repo)
{
	char **names = NULL;
	size_t n = 0;
	int rc = wstore_ref_list(&names, &n, r->sv->store, repo);

	if (rc == 0)
		rc = add_ref(out, r, repo, "main");
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = add_ref(out, r, repo, names[i]);
	wstore_strings_free(names);
	return rc;
}

enum MHD_Result wapi_refs(struct MHD_Connection *c, struct wreq *r,
			  const struct wtarget *t)
{
	json_t *out = json_pack("{s:[], s:[], s:[], s:[]}", "branches",
				"converts", "tags", "pullRequests");
	char **ids = NULL;
	size_t n = 0;
	int mirror = r->sv->mirror && wmirror_repo_canonical(t->repo);
	int rc;

	wmirror_error_clear();
	rc = mirror && out ? mirror_refs(out, r, t->repo) : 0;

	if (rc == 0)
		rc = wstore_list_model(&ids, &n, r->sv->store, t->repo);

	/* each revision a READY checkpoint of the model has, at the commit
	 * the name resolves to (the newest) */
	for (size_t i = 0; rc >= 0 && out && i < n; i++) {
		wstore_manifest *m = NULL;

		rc = wstore_manifest_read(&m, r->sv->store, ids[i]);
		if (rc == WSTORE_ENOTFOUND || rc == WSTORE_ECORRUPT) {
			rc = 0;
			continue;
		}
		if (rc == 0 && !strcmp(wstore_manifest_status(m), "READY") &&
		    !strcmp(wstore_manifest_model_id(m), t->repo) &&
		    !(mirror && wparse_is_commit(wstore_manifest_revision(m))))
			rc = add_ref(out, r, t->repo,
				     wstore_manifest_revision(m));
		wstore_manifest_free(m);
	}
	wstore_strings_free(ids);
	r->mirror = wmirror_outcome();
	if (rc < 0) {
		json_decref(out);
		if (wmirror_error()[0]) /* the mirror's wait or upstream */
			return wreply_error(c, r, MHD_HTTP_SERVICE_UNAVAILABLE,
					    NULL, wmirror_error());
		return store_failed(c, r, rc);
	}
	if (out && !json_array_size(json_object_get(out, "branches")) &&
	    !json_array_size(json_object_get(out, "pullRequests"))) {
		json_decref(out);
		return wreply_error(c, r, MHD_HTTP_NOT_FOUND, "RepoNotFound",
				    "no READY checkpoint has that model id");
	}
	return wreply_json(c, r, MHD_HTTP_OK, out);
}
