/*
 * test_catalog.c - names on the command line and import sources
 * (catalog.c, source.c): the rule telling a checkpoint id from a model
 * name, derived checkpoint ids that never collide, every manifest listed
 * (FAILED ones too), and what an import takes from a directory: tool
 * folders skipped, patterns, the "looks like a checkpoint" check, Hugging
 * Face cache folders.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "manifest.h"
#include "names.h"
#include "store.h"
#include "unit.h"

static void put(const char *dir, const char *rel, const char *text)
{
	char path[4096], *slash;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	for (slash = strchr(path + strlen(dir) + 1, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(path, 0755);
		*slash = '/';
	}
	fp = fopen(path, "wb");
	CHECK(fp != NULL);
	if (fp) {
		fputs(text, fp);
		fclose(fp);
	}
}

void test_catalog_names(void)
{
	static const struct {
		const char *arg, *model, *rev;
		int rc;
	} v[] = {
		{ "ckpt-1", NULL, NULL, 0 },
		{ "Org/Name", "Org/Name", NULL, 1 },
		{ "Org/Name@v1", "Org/Name", "v1", 1 },
		{ "Org/Na@me@x", "Org/Na", "me@x", 1 },
		{ "组织/模型", "组织/模型", NULL, 1 },
		{ "a//b", NULL, NULL, WSTORE_EINVAL },
		{ "/a", NULL, NULL, WSTORE_EINVAL },
		{ "a/", NULL, NULL, WSTORE_EINVAL },
		{ "a/b/c", NULL, NULL, WSTORE_EINVAL },
		{ "../etc", NULL, NULL, WSTORE_EINVAL },
		{ "a/..", NULL, NULL, WSTORE_EINVAL },
		{ "a/b@", NULL, NULL, WSTORE_EINVAL },
		{ "a/@v", NULL, NULL, WSTORE_EINVAL },
		{ "a/\xff", NULL, NULL, WSTORE_EINVAL },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(*v); i++) {
		char *model = (char *)"x", *rev = (char *)"x";
		int rc = wstore_parse_name(&model, &rev, v[i].arg);

		CHECK_EQ_INT(rc, v[i].rc);
		if (rc < 0)
			CHECK(strstr(wstore_last_error(),
				     "invalid checkpoint id or model name"));
		CHECK(v[i].model ? model && !strcmp(model, v[i].model)
				 : model == NULL);
		CHECK(v[i].rev ? rev && !strcmp(rev, v[i].rev) : rev == NULL);
		free(model);
		free(rev);
	}
}

static int import(wstore_store *s, const char *id, const char *model,
		  const char *src)
{
	wstore_import_options o = WSTORE_IMPORT_OPTIONS_INIT;

	o.checkpoint_id = id;
	o.model_id = model;
	o.source = src;
	o.jobs = 1;
	return wstore_import(s, &o);
}

static void expect_derived(wstore_store *s, const char *model, const char *rev,
			   const char *want)
{
	char *id = NULL;

	CHECK_EQ_INT(wstore_checkpoint_id_derive(&id, s, model, rev), 0);
	CHECK_STR(id, want);
	if (id)
		CHECK_EQ_INT(wstore_validate_checkpoint_id(id), 0);
	free(id);
}

void test_catalog_derive(void)
{
	char *src = unit_tmpdir(), *id = NULL;
	wstore_store *s = NULL;

	put(src, "config.json", "{}\n");
	CHECK_EQ_INT(wstore_open_url(&s, "mem://"), 0);
	expect_derived(s, "Qwen/Qwen3-8B", NULL, "Qwen--Qwen3-8B--main");
	expect_derived(s, "Qwen/Qwen3-8B", "v1.0", "Qwen--Qwen3-8B--v1.0");
	expect_derived(s, "org/m", "0123456789abcdef0123456789abcdef01234567",
		       "org--m--0123456789ab");
	expect_derived(s, "_x/y z", "refs/pr/1", "mx--y-z--refs--pr--1");
	/* another script: a run of it is one '-', and a hash of the model id
	 * keeps models that differ only there apart */
	expect_derived(s, "组/m", "main", "m--m-9e71cac4--main");
	expect_derived(s, "模型/权重", "main", "m----799a0d3d--main");
	expect_derived(s, "Qwen/通义", "main", "Qwen----9f633fd7--main");
	/* taken ids (READY, FAILED) are never handed out */
	CHECK_EQ_INT(import(s, "org--m--main", "org/m", src), 0);
	expect_derived(s, "org/m", "main", "org--m--main-2");
	CHECK_EQ_INT(import(s, "org--m--main-2", "org/m", src), 0);
	expect_derived(s, "org/m", "main", "org--m--main-3");
	CHECK_EQ_INT(wstore_checkpoint_id_derive(&id, s, "", "main"),
		     WSTORE_EINVAL);
	free(id);
	wstore_free(s);
	unit_rmtree(src);
	free(src);
}

void test_catalog_list_all(void)
{
	char *src = unit_tmpdir(), *store = unit_tmpdir(), url[4200];
	char key[WSTORE__KEY_MAX], **ids = NULL;
	wstore_store *s = NULL;
	size_t n = 0;
	const char *failed = "{\"checkpoint_id\":\"bad\",\"created_at\":1,"
			     "\"error\":\"x\",\"files\":[],\"model_id\":\"m\","
			     "\"revision\":\"main\",\"schema_version\":2,"
			     "\"source_uri\":\"/x\",\"status\":\"FAILED\","
			     "\"total_size\":0,\"updated_at\":1}";

	put(src, "config.json", "{}\n");
	snprintf(url, sizeof(url), "file://%s", store);
	CHECK_EQ_INT(wstore_open_url(&s, url), 0);
	CHECK_EQ_INT(import(s, "good", "m", src), 0);
	wstore__key_manifest(key, "bad");
	CHECK_EQ_INT(wstore__replace(s, key, failed, strlen(failed)), 0);
	CHECK_EQ_INT(wstore_list(&ids, &n, s), 0);
	CHECK_EQ_INT((int)n, 1);
	wstore_strings_free(ids);
	CHECK_EQ_INT(wstore_list_all(&ids, &n, s), 0);
	CHECK_EQ_INT((int)n, 2);
	if (n == 2) {
		CHECK_STR(ids[0], "bad");
		CHECK_STR(ids[1], "good");
		CHECK(ids[2] == NULL);
	}
	wstore_strings_free(ids);
	wstore_free(s);
	unit_rmtree(store);
	unit_rmtree(src);
	free(store);
	free(src);
}

/* Examine dir under the given patterns; the return code. */
static int examine(wstore_source **out, const char *dir, const char *inc,
		   const char *exc, int force)
{
	CHECK_EQ_INT(wstore_source_new(out, dir, NULL), 0);
	if (inc)
		CHECK_EQ_INT(wstore_source_include(*out, inc), 0);
	if (exc)
		CHECK_EQ_INT(wstore_source_exclude(*out, exc), 0);
	wstore_source_set_force(*out, force);
	return wstore_source_examine(*out);
}

void test_source_rules(void)
{
	char *dir = unit_tmpdir();
	wstore_source *src = NULL;

	put(dir, "README.md", "notes\n");
	CHECK_EQ_INT(examine(&src, dir, NULL, NULL, 0), WSTORE_EINVAL);
	CHECK(strstr(wstore_last_error(),
		     "does not look like a checkpoint: no config.json and no "
		     "weight file"));
	wstore_source_free(src);
	CHECK_EQ_INT(examine(&src, dir, NULL, NULL, 1), 0);
	CHECK_EQ_INT((int)wstore_source_file_count(src), 1);
	wstore_source_free(src);

	put(dir, "model.safetensors", "x");
	CHECK_EQ_INT(examine(&src, dir, NULL, NULL, 0), WSTORE_EINVAL);
	CHECK(strstr(wstore_last_error(), "checkpoint: no config.json;"));
	wstore_source_free(src);
	put(dir, "config.json", "{}");
	put(dir, ".git/lfs/objects/ab/model.safetensors", "x");
	put(dir, ".cache/huggingface/download/x.metadata", "x");
	put(dir, "sub/__pycache__/a.pyc", "x");
	put(dir, "sub/.git", "gitdir: /elsewhere\n");
	put(dir, "sub/keep.txt", "x");
	put(dir, ".gitattributes", "*.safetensors filter=lfs\n");
	CHECK_EQ_INT(examine(&src, dir, NULL, NULL, 0), 0);
	/* README, model, config, sub/keep.txt, .gitattributes */
	CHECK_EQ_INT((int)wstore_source_file_count(src), 5);
	CHECK_STR(wstore_source_skipped(src, 0), ".cache/huggingface");
	CHECK_STR(wstore_source_skipped(src, 1), ".git");
	CHECK(wstore_source_skipped(src, 4) == NULL);
	CHECK(wstore_source_model_id(src) == NULL);
	wstore_source_free(src);

	CHECK_EQ_INT(examine(&src, dir, NULL, "*.md", 0), 0);
	CHECK_EQ_INT((int)wstore_source_file_count(src), 4);
	wstore_source_free(src);
	CHECK_EQ_INT(examine(&src, dir, "*.json", NULL, 0), WSTORE_EINVAL);
	CHECK(strstr(wstore_last_error(), "no weight file"));
	wstore_source_free(src);
	CHECK_EQ_INT(wstore_source_new(&src, dir, NULL), 0);
	CHECK_EQ_INT(wstore_source_exclude(src, ""), WSTORE_EINVAL);
	wstore_source_free(src);
	unit_rmtree(dir);
	free(dir);
}

void test_source_hub(void)
{
	char *dir = unit_tmpdir(), repo[4200], snap[4300], p[4400];
	const char *c1 = "0123456789abcdef0123456789abcdef01234567";
	wstore_source *src = NULL;

	snprintf(repo, sizeof(repo), "%s/models--Acme--Tiny-LM", dir);
	snprintf(snap, sizeof(snap), "%s/snapshots/%s", repo, c1);
	put(dir, "models--Acme--Tiny-LM/blobs/aa", "{}");
	put(dir, "models--Acme--Tiny-LM/blobs/bb", "weights");
	put(dir, "models--Acme--Tiny-LM/refs/main", c1);
	put(dir, "models--Acme--Tiny-LM/snapshots/x/y", "");
	snprintf(p, sizeof(p), "%s/snapshots/x", repo);
	unit_rmtree(p);
	snprintf(p, sizeof(p), "%s/snapshots/%s", repo, c1);
	CHECK_EQ_INT(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/config.json", snap);
	CHECK_EQ_INT(symlink("../../blobs/aa", p), 0);
	snprintf(p, sizeof(p), "%s/model.safetensors", snap);
	CHECK_EQ_INT(symlink("../../blobs/bb", p), 0);

	/* the repo root: its snapshot of main */
	CHECK_EQ_INT(examine(&src, repo, NULL, NULL, 0), 0);
	CHECK_STR(wstore_source_model_id(src), "Acme/Tiny-LM");
	CHECK_STR(wstore_source_commit(src), c1);
	CHECK_STR(wstore_source_revision(src), "main");
	CHECK_EQ_INT((int)wstore_source_file_count(src), 2);
	CHECK_EQ_INT((int)wstore_source_total_size(src), 9);
	wstore_source_free(src);
	/* the snapshot folder itself */
	CHECK_EQ_INT(examine(&src, snap, NULL, NULL, 0), 0);
	CHECK_STR(wstore_source_model_id(src), "Acme/Tiny-LM");
	CHECK_STR(wstore_source_revision(src), "main");
	wstore_source_free(src);
	/* a commit no ref names is its own revision */
	snprintf(p, sizeof(p), "%s/refs/main", repo);
	unlink(p);
	CHECK_EQ_INT(examine(&src, snap, NULL, NULL, 0), 0);
	CHECK_STR(wstore_source_revision(src), c1);
	wstore_source_free(src);
	unit_rmtree(dir);
	free(dir);
}
