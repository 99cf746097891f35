/*
 * test_resolve.c - repository names (resolve.c): model id and revision to
 * the newest READY checkpoint, commit ids, checkpoint ids as repository
 * names, unknown repositories told from unknown revisions, FAILED and
 * stale index entries passed over, and a read that fails never taken for
 * an absent checkpoint (fault backend).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wstore/sys/backend.h>

#include "error.h"
#include "manifest.h"
#include "names.h"
#include "store.h"
#include "util.h"
#include "unit.h"

/* A folder holding config.json with text in it. */
static char *src_dir_with(const char *text)
{
	char *dir = unit_tmpdir(), path[4096];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/config.json", dir);
	fp = fopen(path, "wb");
	CHECK(fp != NULL);
	if (fp) {
		fputs(text, fp);
		fclose(fp);
	}
	return dir;
}

static char *src_dir(void)
{
	return src_dir_with("{\"a\":1}\n");
}

static int import(wstore_store *s, const char *id, const char *model,
		  const char *rev, const char *src)
{
	wstore_import_options o = WSTORE_IMPORT_OPTIONS_INIT;

	o.checkpoint_id = id;
	o.model_id = model;
	o.revision = rev;
	o.source = src;
	o.jobs = 1;
	return wstore_import(s, &o);
}

/* Rewrite id's manifest with the given times (and status when not NULL):
 * imports within one second tie on time otherwise. */
static void retime(wstore_store *s, const char *id, int64_t t,
		   const char *status)
{
	wstore_manifest *m = NULL;
	char key[WSTORE__KEY_MAX], *json = NULL;
	size_t len = 0;

	CHECK_EQ_INT(wstore_manifest_read(&m, s, id), 0);
	if (!m)
		return;
	m->created_at = m->updated_at = t;
	if (status) {
		wstore__set_str(&m->status, status);
		wstore__set_str(&m->error, "made to fail by the test");
	}
	CHECK_EQ_INT(wstore_manifest_serialize(&json, &len, m), 0);
	wstore__key_manifest(key, id);
	CHECK_EQ_INT(wstore__replace(s, key, json, len), 0);
	free(json);
	wstore_manifest_free(m);
}

static void commit_of(char out[WSTORE_COMMIT_LEN + 1], wstore_store *s,
		      const char *id)
{
	wstore_manifest *m = NULL;

	out[0] = '\0';
	CHECK_EQ_INT(wstore_manifest_read(&m, s, id), 0);
	if (m)
		CHECK_EQ_INT(
			wstore_manifest_commit(out, WSTORE_COMMIT_LEN + 1, m),
			0);
	wstore_manifest_free(m);
}

/* resolve and compare with want (NULL: expect WSTORE_ENOTFOUND and the
 * given known flag) */
static void expect(wstore_store *s, const char *repo, const char *rev,
		   const char *want, int want_known)
{
	char *id = NULL;
	int known = -1, rc = wstore_resolve(&id, &known, s, repo, rev);

	if (want) {
		CHECK_EQ_INT(rc, 0);
		CHECK_STR(id, want);
	} else {
		CHECK_EQ_INT(rc, WSTORE_ENOTFOUND);
		CHECK(id == NULL);
	}
	CHECK_EQ_INT(known, want_known);
	free(id);
}

/* Resolve repo at main in the file store dir through the fault backend
 * failing its k-th get: 0 with *id, or the error. */
static int resolve_faulty(char **id, const char *dir, int k, const char *repo)
{
	wstore_backend *inner = NULL, *b = NULL;
	wstore_store *s = NULL;
	char spec[32];
	int rc;

	*id = NULL;
	snprintf(spec, sizeof(spec), "failop=get:%d", k);
	CHECK_EQ_INT(wstore_backend_file_new(&inner, dir), 0);
	CHECK_EQ_INT(wstore__backend_fault_new(&b, inner, spec), 0);
	CHECK_EQ_INT(wstore_open_backend(&s, b), 0);
	if (!s)
		return -1;
	rc = wstore_resolve(id, NULL, s, repo, "main");
	if (rc < 0) {
		CHECK(*id == NULL);
		/* the store's error, named: never "not found" */
		CHECK_EQ_INT(rc, -EIO);
		CHECK(strstr(wstore_last_error(), "injected") != NULL);
	}
	wstore_free(s);
	return rc;
}

/*
 * A file store of three checkpoints of org/f (the newest f-3), read
 * through the fault backend failing the k-th get, for every k: each
 * resolution names f-3 or fails with the store's error, never another
 * checkpoint and never "not found".  Likewise a checkpoint id.
 */
static void resolve_with_failing_reads(const char *src)
{
	char *dir = unit_tmpdir(), *id;
	wstore_store *s = NULL;
	int errors = 0;

	CHECK_EQ_INT(wstore_open_url(&s, dir), 0);
	CHECK_EQ_INT(import(s, "f-1", "org/f", "main", src), 0);
	CHECK_EQ_INT(import(s, "f-3", "org/f", "main", src), 0);
	CHECK_EQ_INT(import(s, "f-2", "org/f", "main", src), 0);
	retime(s, "f-1", 1000, NULL);
	retime(s, "f-2", 2000, NULL);
	retime(s, "f-3", 3000, NULL);
	wstore_free(s);
	for (int k = 1; k <= 8; k++) {
		if (resolve_faulty(&id, dir, k, "org/f") == 0)
			CHECK_STR(id, "f-3");
		else
			errors++;
		free(id);
		if (resolve_faulty(&id, dir, k, "f-2") == 0)
			CHECK_STR(id, "f-2");
		free(id);
	}
	/* the failing read was a manifest's at least three times */
	CHECK(errors >= 3);
	unit_rmtree(dir);
	free(dir);
}

/* The commit id depends on the content alone: the folder imported into
 * another store under another checkpoint id has the id want; a Hub
 * commit recorded as revision is the commit id itself. */
static void content_ids(const char *src, const char *want)
{
	const char *hub = "28e17a60f1b1ad1a8b2ab10d9c3f2d7e6b9c0a11";
	char got[41] = "";
	wstore_store *s = NULL;

	CHECK_EQ_INT(wstore_open_url(&s, "mem://"), 0);
	CHECK_EQ_INT(import(s, "elsewhere", "org/tiny", "main", src), 0);
	commit_of(got, s, "elsewhere");
	CHECK_STR(got, want);
	CHECK_EQ_INT(import(s, "at-hub", "org/tiny", hub, src), 0);
	commit_of(got, s, "at-hub");
	CHECK_STR(got, hub);
	/* another model id, same bytes: another id */
	CHECK_EQ_INT(import(s, "renamed", "org/tiny2", "main", src), 0);
	commit_of(got, s, "renamed");
	CHECK(strcmp(got, want) != 0);
	wstore_free(s);
}

void test_resolve(void)
{
	char *src = src_dir(), *src2 = src_dir_with("{\"a\":2}\n");
	char c_old[41], c_new[41], c_v2[41], again[41];
	wstore_store *s = NULL;
	wstore_manifest *m = NULL;

	CHECK_EQ_INT(wstore_open_url(&s, "mem://"), 0);
	CHECK_EQ_INT(import(s, "tiny-a", "org/tiny", "main", src), 0);
	CHECK_EQ_INT(import(s, "tiny-b", "org/tiny", "main", src2), 0);
	CHECK_EQ_INT(import(s, "tiny-v2", "org/tiny", "v2", src), 0);
	CHECK_EQ_INT(import(s, "other", "org/other", "main", src), 0);
	/* tiny-a newest by time, though "tiny-b" sorts after it: time
	 * beats id order */
	retime(s, "tiny-b", 1000, NULL);
	retime(s, "tiny-a", 2000, NULL);
	commit_of(c_old, s, "tiny-b");
	commit_of(c_new, s, "tiny-a");
	commit_of(c_v2, s, "tiny-v2");

	/* commit ids: 40 lower-case hex, stable, distinct */
	CHECK_EQ_INT(strlen(c_new), 40);
	CHECK_EQ_INT(strspn(c_new, "0123456789abcdef"), 40);
	commit_of(again, s, "tiny-a");
	CHECK_STR(again, c_new);
	CHECK(strcmp(c_new, c_old) != 0);
	CHECK(strcmp(c_new, c_v2) != 0);
	CHECK_EQ_INT(wstore_manifest_read(&m, s, "tiny-a"), 0);
	if (m)
		CHECK_EQ_INT(wstore_manifest_commit(again, 40, m),
			     WSTORE_ERANGE);
	wstore_manifest_free(m);
	content_ids(src, c_new);

	/* model id + revision: the newest wins; HEAD, "" and NULL = main */
	expect(s, "org/tiny", "main", "tiny-a", 1);
	expect(s, "org/tiny", NULL, "tiny-a", 1);
	expect(s, "org/tiny", "HEAD", "tiny-a", 1);
	expect(s, "org/tiny", "", "tiny-a", 1);
	expect(s, "org/tiny", "v2", "tiny-v2", 1);
	/* a commit id names its checkpoint, even an older one */
	expect(s, "org/tiny", c_old, "tiny-b", 1);
	expect(s, "org/tiny", c_v2, "tiny-v2", 1);
	/* another model's commit is not this model's revision */
	expect(s, "org/other", c_new, NULL, 1);
	expect(s, "org/tiny", "v3", NULL, 1);
	expect(s, "org/nope", "main", NULL, 0);
	CHECK(strstr(wstore_last_error(), "'org/nope'") != NULL);

	/* a checkpoint id as repository: its revision, main, its commit */
	expect(s, "tiny-v2", "v2", "tiny-v2", 1);
	expect(s, "tiny-v2", "main", "tiny-v2", 1);
	expect(s, "tiny-v2", c_v2, "tiny-v2", 1);
	expect(s, "tiny-v2", c_new, NULL, 1);
	expect(s, "tiny-v2", "v9", NULL, 1);

	/* a newer import rolls the name over; a FAILED one never wins */
	retime(s, "tiny-b", 3000, NULL);
	expect(s, "org/tiny", "main", "tiny-b", 1);
	retime(s, "tiny-b", 4000, "FAILED");
	expect(s, "org/tiny", "main", "tiny-a", 1);
	expect(s, "tiny-b", "main", NULL, 0);
	/* a deleted checkpoint is gone from resolution */
	CHECK_EQ_INT(wstore_delete(s, "tiny-a"), 0);
	expect(s, "org/tiny", "main", NULL, 1);
	expect(s, "org/tiny", "v2", "tiny-v2", 1);

	{
		char *id = (char *)"x";

		CHECK_EQ_INT(wstore_resolve(&id, NULL, s, "", "main"),
			     WSTORE_EINVAL);
		CHECK(id == NULL);
	}
	wstore_free(s);
	resolve_with_failing_reads(src);
	unit_rmtree(src);
	free(src);
	unit_rmtree(src2);
	free(src2);
}
