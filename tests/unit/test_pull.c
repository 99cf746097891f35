/*
 * test_pull.c - pull into a directory: include and exclude, nothing
 * fetched again unless forced, hostile manifests, symlinks planted in
 * DEST, corrupt and short chunks, cancel and repair, a checkpoint that is
 * not READY; all on the in-memory backend.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <wstore/read.h>

#include "names.h"
#include "store.h"
#include "fixture.h"
#include "unit.h"
#include "../lib/child.h"

/* ---- pull ---------------------------------------------------------------- */

struct prog {
	uint64_t done, total;
	int calls, cancel_at;
};

static int on_progress(uint64_t done, uint64_t total, const char *path,
		       void *ctx)
{
	struct prog *p = ctx;

	(void)path;
	p->done = done;
	p->total = total;
	return p->cancel_at && ++p->calls >= p->cancel_at;
}

static int pull(wstore_store *s, const char *id, const char *dest,
		const char *const *inc, const char *const *exc, int force,
		struct prog *pr)
{
	wstore_pull_options o = WSTORE_PULL_OPTIONS_INIT;

	o.include = inc;
	o.exclude = exc;
	o.force = force;
	o.jobs = 3;
	o.progress = pr ? on_progress : NULL;
	o.progress_ctx = pr;
	return wstore_pull(s, id, dest, &o);
}

static ino_t inode(const char *dir, const char *name)
{
	char path[4096];
	struct stat st;

	PATHF(path, "%s/%s", dir, name);
	return lstat(path, &st) == 0 ? st.st_ino : 0;
}

/* dest matches the fixture's source (all files). */
static void check_pulled(struct fixture *fx, const char *dest)
{
	char path[4096];

	PATHF(path, "%s/model.safetensors", dest);
	CHECK(unit_same_file(path, fx->shard, fx->shard_n));
	PATHF(path, "%s/config.json", dest);
	CHECK(unit_same_file(path, "{\"a\":1}\n", 8));
	PATHF(path, "%s/sub/dir/x.bin", dest);
	CHECK(unit_same_file(path, "0123456789", 10));
	PATHF(path, "%s/empty.txt", dest);
	CHECK(unit_same_file(path, "", 0));
}

void test_pull_basic(void)
{
	static const char *const json[] = { "*.json", NULL };
	static const char *const sub[] = { "sub/*", NULL };
	struct prog pr = { 0 };
	char *tmp = unit_tmpdir(), dest[4096], d2[4096];
	struct fixture fx;
	ino_t ino;

	if (fixture_init(&fx, 0, 64) < 0)
		goto out;
	PATHF(dest, "%s/out/a", tmp);
	CHECK_EQ_INT(pull(fx.s, "ck", dest, NULL, NULL, 0, &pr), 0);
	check_pulled(&fx, dest);
	CHECK(pr.total > fx.shard_n && pr.done == pr.total);
	CHECK_EQ_INT(unit_count_names(dest, "wstore-tmp"), 0);
	/* again: nothing refetched; with force: everything */
	ino = inode(dest, "model.safetensors");
	CHECK_EQ_INT(pull(fx.s, "ck", dest, NULL, NULL, 0, &pr), 0);
	CHECK(pr.done == pr.total);
	CHECK(inode(dest, "model.safetensors") == ino);
	CHECK_EQ_INT(pull(fx.s, "ck", dest, NULL, NULL, 1, NULL), 0);
	CHECK(inode(dest, "model.safetensors") != ino);
	check_pulled(&fx, dest);
	/* include / exclude */
	PATHF(d2, "%s/json", tmp);
	CHECK_EQ_INT(pull(fx.s, "ck", d2, json, NULL, 0, NULL), 0);
	CHECK(unit_exists(d2, "config.json") &&
	      unit_exists(d2, "model.safetensors.index.json"));
	CHECK(!unit_exists(d2, "model.safetensors") && !unit_exists(d2, "sub"));
	PATHF(d2, "%s/nosub", tmp);
	CHECK_EQ_INT(pull(fx.s, "ck", d2, NULL, sub, 0, NULL), 0);
	CHECK(unit_exists(d2, "model.safetensors") && !unit_exists(d2, "sub"));
	CHECK_EQ_INT(pull(fx.s, "nope", d2, NULL, NULL, 0, NULL),
		     WSTORE_ENOTFOUND);
out:
	fixture_done(&fx);
	unit_rmtree(tmp);
	free(tmp);
}

/* s with the first from replaced by to (malloc'ed). */
static char *replace(const char *s, const char *from, const char *to)
{
	const char *p = strstr(s, from);
	char *out = NULL;

	CHECK(p != NULL);
	if (p && asprintf(&out, "%.*s%s%s", (int)(p - s), s, to,
			  p + strlen(from)) < 0)
		out = NULL;
	return out;
}

/* Rewrite the stored manifest of id, replacing from by to. */
static void edit_manifest(wstore_store *s, const char *id, const char *from,
			  const char *to)
{
	char key[WSTORE__KEY_MAX], *json = NULL, *fixed;
	size_t len;

	wstore__key_manifest(key, id);
	CHECK_EQ_INT(wstore__get_alloc(s, key, &json, &len), 0);
	if (json && (fixed = replace(json, from, to))) {
		fixture_put_raw(s, key, fixed, strlen(fixed));
		free(fixed);
	}
	free(json);
}

/* Store a manifest whose single path is replaced by bad. */
static void put_hostile(wstore_store *s, const char *id, const char *bad)
{
	char *to = NULL;

	fixture_put_by_hand(s, id, "zzzz", "data", 4, 4, 4);
	CHECK(asprintf(&to, "\"path\":\"%s\"", bad) > 0);
	edit_manifest(s, id, "\"path\":\"zzzz\"", to);
	free(to);
}

void test_pull_hostile(void)
{
	static const char *const bad[] = {
		"../x", "/etc/x", "a/../../x", "a//x", "./x", "x/", "",
	};
	static const char *const nosub[] = { "sub/*", NULL };
	char *tmp = unit_tmpdir(), dest[4096], out[4096], path[4096];
	wstore_store *s = unit_mem_store(0, 0);
	wstore_manifest *m = NULL;
	struct fixture fx;
	int rc;

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		char key[WSTORE__KEY_MAX], *json;
		size_t len;

		put_hostile(s, "h", bad[i]);
		wstore__key_manifest(key, "h");
		wstore__get_alloc(s, key, &json, &len);
		CHECK(wstore_manifest_parse(&m, json, len) < 0);
		free(json);
		PATHF(dest, "%s/d%zu/in", tmp, i);
		rc = pull(s, "h", dest, NULL, NULL, 0, NULL);
		CHECK(rc < 0);
		PATHF(path, "%s/d%zu", tmp, i);
		CHECK(access(path, F_OK) != 0); /* nothing written */
	}
	CHECK_EQ_INT(unit_count_names(tmp, "x"), 0);
	/* a symlink planted in DEST where a directory goes */
	if (fixture_init(&fx, 0, 64) < 0)
		goto out;
	PATHF(dest, "%s/dest", tmp);
	PATHF(out, "%s/outside", tmp);
	mkdir(dest, 0755);
	mkdir(out, 0755);
	PATHF(path, "%s/sub", dest);
	CHECK_EQ_INT(symlink(out, path), 0);
	rc = pull(fx.s, "ck", dest, NULL, NULL, 0, NULL);
	CHECK(rc < 0);
	CHECK(strstr(wstore_last_error(), "'sub'") != NULL);
	CHECK(strstr(wstore_last_error(), "symlink") != NULL);
	CHECK_EQ_INT(unit_count_names(out, ""), 2); /* "." and ".." only */
	CHECK_EQ_INT(unit_count_names(dest, "wstore-tmp"), 0);
	/* a symlink at a file's name is replaced, not written through */
	unit_spit(out, "target", "keep", 4);
	PATHF(path, "%s/config.json", dest);
	unlink(path);
	snprintf(out + strlen(out), sizeof(out) - strlen(out), "/target");
	CHECK_EQ_INT(symlink(out, path), 0);
	CHECK_EQ_INT(pull(fx.s, "ck", dest, NULL, nosub, 0, NULL), 0);
	CHECK(unit_same_file(out, "keep", 4));
	CHECK(unit_same_file(path, "{\"a\":1}\n", 8));
	fixture_done(&fx);
out:
	wstore_free(s);
	unit_rmtree(tmp);
	free(tmp);
}

void test_pull_corrupt(void)
{
	char *tmp = unit_tmpdir(), dest[4096], key[WSTORE__KEY_MAX];
	char junk[64];
	wstore_pull_options o = WSTORE_PULL_OPTIONS_INIT;
	struct fixture fx;
	int rc;

	if (fixture_init(&fx, 0, 64) < 0)
		goto out;
	PATHF(dest, "%s/dest", tmp);
	fixture_chunk_key(key, "ck", "model.safetensors", 2);
	memcpy(junk, fx.shard + 128, 64);
	junk[5] ^= 1;
	fixture_put_raw(fx.s, key, junk, 64);
	rc = pull(fx.s, "ck", dest, NULL, NULL, 0, NULL);
	CHECK_EQ_INT(rc, WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), "file 'model.safetensors'") != NULL);
	CHECK(strstr(wstore_last_error(), "sha256 mismatch") != NULL);
	CHECK(!unit_exists(dest, "model.safetensors"));
	CHECK_EQ_INT(unit_count_names(dest, "wstore-tmp"), 0);
	/* without verification the same-size damage goes through */
	o.no_verify = 1;
	CHECK_EQ_INT(wstore_pull(fx.s, "ck", dest, &o), 0);
	CHECK(unit_exists(dest, "model.safetensors"));
	/* a short chunk is caught even without verification */
	fixture_put_raw(fx.s, key, junk, 63);
	o.force = 1;
	rc = wstore_pull(fx.s, "ck", dest, &o);
	CHECK_EQ_INT(rc, WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), key) != NULL);
	CHECK(strstr(wstore_last_error(), "'model.safetensors'") != NULL);
	CHECK_EQ_INT(unit_count_names(dest, "wstore-tmp"), 0);
out:
	fixture_done(&fx);
	unit_rmtree(tmp);
	free(tmp);
}

static pid_t dead_pid(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	wait_child(pid, NULL, 10);
	return pid;
}

void test_pull_resume(void)
{
	char *tmp = unit_tmpdir(), dest[4096], path[4096], name[256];
	struct prog pr = { 0 };
	struct fixture fx;
	ino_t ino;

	if (fixture_init(&fx, 0, 64) < 0)
		goto out;
	PATHF(dest, "%s/dest", tmp);
	/* cancel from the progress callback: no temp file (the partial file
	 * stays and is resumed: test_pull_partial.c) */
	pr.cancel_at = 2;
	CHECK_EQ_INT(pull(fx.s, "ck", dest, NULL, NULL, 0, &pr),
		     WSTORE_ECANCELED);
	CHECK_EQ_INT(unit_count_names(dest, "wstore-tmp"), 0);
	pr.cancel_at = 0;
	CHECK_EQ_INT(pull(fx.s, "ck", dest, NULL, NULL, 0, NULL), 0);
	/* damage: a truncated shard, same-size wrong config; and files of
	 * the user's whose names look like temp names of a pull whose pid
	 * is gone (both forms): a pull cannot prove they are its own, so
	 * they stay */
	PATHF(path, "%s/model.safetensors", dest);
	CHECK_EQ_INT(truncate(path, 100), 0);
	unit_spit(dest, "config.json", "{\"a\":2}\n", 8);
	PATHF(path, "%s/sub/dir", dest);
	PATHF(name, ".x.bin.wstore-tmp-%ld", (long)dead_pid());
	unit_spit(path, name, "mine", 4);
	PATHF(name, ".wstore-tmp-%ld-0", (long)dead_pid());
	unit_spit(dest, name, "mine too", 8);
	PATHF(path, "%s/sub/dir/x.bin", dest);
	unlink(path);
	ino = inode(dest, "empty.txt");
	CHECK_EQ_INT(pull(fx.s, "ck", dest, NULL, NULL, 0, &pr), 0);
	check_pulled(&fx, dest);
	CHECK(inode(dest, "empty.txt") == ino);
	PATHF(path, "%s/sub/dir", dest);
	CHECK_EQ_INT(unit_count_names(path, "wstore-tmp"), 1);
	PATHF(path, "%s/%s", dest, name);
	CHECK(unit_same_file(path, "mine too", 8));
	CHECK_EQ_INT(unit_count_names(dest, "wstore-tmp"), 1);
out:
	fixture_done(&fx);
	unit_rmtree(tmp);
	free(tmp);
}

void test_pull_not_ready(void)
{
	wstore_store *s = unit_mem_store(0, 0);
	wstore_checkpoint *ck = NULL;
	char *tmp = unit_tmpdir(), dest[4096];

	fixture_put_by_hand(s, "f", "a.bin", "data", 4, 4, 4);
	edit_manifest(s, "f", "\"status\":\"READY\"", "\"status\":\"FAILED\"");
	edit_manifest(s, "f", "\"error\":null", "\"error\":\"disk full\"");
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "f"), WSTORE_ENOTREADY);
	CHECK(strstr(wstore_last_error(), "'f' is FAILED: disk full") != NULL);
	PATHF(dest, "%s/d", tmp);
	CHECK_EQ_INT(pull(s, "f", dest, NULL, NULL, 0, NULL), WSTORE_ENOTREADY);
	CHECK(access(dest, F_OK) != 0);
	wstore_free(s);
	unit_rmtree(tmp);
	free(tmp);
}
