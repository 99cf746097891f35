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

/* Size of an LFS pointer file as the Hub reports it. */
#define LFS_POINTER_SIZE 134
/* Paths one paths-info request may ask about: each costs a pass over the
 * manifest's files (directories are prefixes), so a body of a megabyte
 * of short names would cost as many passes. */
#define PATHS_MAX 1000

struct wck *wopen_target(struct MHD_Connection *c, struct wreq *r,
			 const struct wtarget *t, enum MHD_Result *ret)
{
	struct wck *k = NULL;
	int known = 0, rc;

	rc = wcache_get(&k, &known, r->sv->cache, t->repo, t->rev);
	if (rc == 0) {
		free(r->ckpt);
		r->ckpt = strdup(k->id);
		return k;
	}
	if (rc == WSTORE_ENOTFOUND)
		*ret = wreply_error(c, r, MHD_HTTP_NOT_FOUND,
				    known ? "RevisionNotFound" : "RepoNotFound",
				    wstore_last_error());
	else
		/* the store failed to answer (a timeout, a refused
		 * connection, an I/O error): worth retrying, and never
		 * "not found" nor another checkpoint; damage is not */
		*ret = wreply_error(c, r,
				    rc == WSTORE_ECORRUPT || rc == WSTORE_EINVAL
					    ? MHD_HTTP_INTERNAL_SERVER_ERROR
					    : MHD_HTTP_SERVICE_UNAVAILABLE,
				    NULL, wstore_last_error());
	return NULL;
}

static void hex40(char out[WSTORE_COMMIT_LEN + 1], const unsigned char *d)
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 0; i < WSTORE_COMMIT_LEN / 2; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[WSTORE_COMMIT_LEN] = '\0';
}

void wfile_oid(char out[WSTORE_COMMIT_LEN + 1], const wstore_file_info *fi)
{
	unsigned char d[SHA256_DIGEST_LENGTH];

	if (strlen(fi->sha256) >= WSTORE_COMMIT_LEN) {
		memcpy(out, fi->sha256, WSTORE_COMMIT_LEN);
		out[WSTORE_COMMIT_LEN] = '\0';
		return;
	}
	/* legacy record without a digest: the key is unique per file */
	SHA256((const unsigned char *)fi->key, strlen(fi->key), d);
	hex40(out, d);
}

int wfile_is_lfs(const wstore_file_info *fi)
{
	return !strcmp(fi->type, "WEIGHT") && fi->sha256[0];
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

/* A tree / paths-info entry for file fi. */
static json_t *file_entry(const wstore_file_info *fi, const json_t *lc)
{
	char oid[WSTORE_COMMIT_LEN + 1];
	json_t *e;

	wfile_oid(oid, fi);
	e = json_pack("{s:s, s:s, s:I, s:s}", "type", "file", "oid", oid,
		      "size", (json_int_t)fi->size, "path", fi->path);
	if (e && wfile_is_lfs(fi))
		json_object_set_new(e, "lfs",
				    json_pack("{s:s, s:I, s:i}", "oid",
					      fi->sha256, "size",
					      (json_int_t)fi->size,
					      "pointerSize", LFS_POINTER_SIZE));
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

enum MHD_Result wapi_info(struct MHD_Connection *c, struct wreq *r,
			  const struct wtarget *t)
{
	char made[32], upd[32], oid[41];
	enum MHD_Result ret = MHD_NO;
	struct wck *k = wopen_target(c, r, t, &ret);
	const char *commit;
	const wstore_manifest *m;
	const char *slash = strchr(t->repo, '/');
	json_t *j, *sib;
	size_t n;

	if (!k)
		return ret;
	commit = k->commit;
	m = wstore_checkpoint_manifest(k->ck);
	iso_time(made, wstore_manifest_created_at(m));
	iso_time(upd, wstore_manifest_updated_at(m));
	sib = json_array();
	n = wstore_manifest_file_count(m);
	for (size_t i = 0; sib && i < n; i++) {
		wstore_file_info fi;
		json_t *e;

		if (wstore_manifest_file(&fi, m, i) < 0)
			continue;
		wfile_oid(oid, &fi);
		e = json_pack("{s:s, s:I, s:s}", "rfilename", fi.path, "size",
			      (json_int_t)fi.size, "blobId", oid);
		if (e && wfile_is_lfs(&fi))
			json_object_set_new(e, "lfs",
					    json_pack("{s:I, s:s, s:i}", "size",
						      (json_int_t)fi.size,
						      "sha256", fi.sha256,
						      "pointerSize",
						      LFS_POINTER_SIZE));
		json_array_append_new(sib, e);
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

/* The tree of m under dir ("" = the root). */
static json_t *tree(const wstore_manifest *m, const char *dir, int recursive,
		    const char *commit, const json_t *lc)
{
	size_t n = wstore_manifest_file_count(m), dl = strlen(dir);
	json_t *out = json_array();
	char *last = NULL;

	for (size_t i = 0; out && i < n; i++) {
		wstore_file_info fi;
		size_t plen = dl ? dl + 1 : 0;

		if (wstore_manifest_file(&fi, m, i) < 0)
			continue;
		if (dl && (strncmp(fi.path, dir, dl) || fi.path[dl] != '/'))
			continue;
		add_dirs(out, fi.path, plen, recursive ? (size_t)-1 : 1, &last,
			 commit, lc);
		if (recursive || !strchr(fi.path + plen, '/'))
			json_array_append_new(out, file_entry(&fi, lc));
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

enum MHD_Result wapi_tree(struct MHD_Connection *c, struct wreq *r,
			  const struct wtarget *t)
{
	char *dir;
	enum MHD_Result ret = MHD_NO;
	struct wck *k = wopen_target(c, r, t, &ret);
	const char *commit;
	const wstore_manifest *m;
	json_t *lc = NULL, *out;
	size_t dl;

	if (!k)
		return ret;
	commit = k->commit;
	m = wstore_checkpoint_manifest(k->ck);
	dir = strdup(t->path ? t->path : "");
	if (!dir) {
		wck_put(r->sv->cache, k);
		return MHD_NO;
	}
	for (dl = strlen(dir); dl && dir[dl - 1] == '/'; dl--)
		dir[dl - 1] = '\0';
	if (dl && !has_dir(m, dir)) {
		ret = wreply_error(c, r, MHD_HTTP_NOT_FOUND, "EntryNotFound",
				   "no such directory in the repository");
	} else {
		if (wquery_true(c, "expand"))
			lc = last_commit(m, commit);
		out = tree(m, dir, wquery_true(c, "recursive"), commit, lc);
		ret = wreply_json(c, r, MHD_HTTP_OK, out);
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

enum MHD_Result wapi_paths_info(struct MHD_Connection *c, struct wreq *r,
				const struct wtarget *t)
{
	enum MHD_Result ret = MHD_NO;
	struct wck *k = wopen_target(c, r, t, &ret);
	const char *commit;
	const wstore_manifest *m;
	json_t *paths, *out, *lc = NULL, *v;
	int expand;
	size_t i;

	if (!k)
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
		int64_t k = wstore_manifest_find(m, p);
		wstore_file_info fi;

		if (k >= 0 && wstore_manifest_file(&fi, m, (size_t)k) == 0)
			json_array_append_new(out, file_entry(&fi, lc));
		else if (*p && has_dir(m, p))
			json_array_append_new(
				out, dir_entry(p, strlen(p), commit, lc));
	}
	json_decref(lc);
	json_decref(paths);
	wck_put(r->sv->cache, k);
	return wreply_json(c, r, MHD_HTTP_OK, out);
}
