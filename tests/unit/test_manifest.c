/*
 * test_manifest.c - manifest serialisation, parsing and validation.
 *
 * The data lives in tests/data/manifests/ and is made by gen.py there:
 * golden-*.json are Python's bytes for the manifests build_ready() and
 * build_failed() make here; good/X.json must parse and serialise to
 * good/X.out; bad/X.json must fail with WSTORE_ECORRUPT and a message
 * containing the first line of bad/X.err.  The data directory is
 * $WSTORE_TEST_DATA, else tests/data under the current directory, else
 * found from this file's path (meson builds from build/).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/helpers.h"
#include "config.h"
#include "digest.h"
#include "error.h"
#include "manifest.h"
#include "names.h"
#include "store.h"
#include "util.h"
#include "unit.h"

static char *slurp_data(const char *rel, size_t *len)
{
	char *p = unit_data_path(rel), *d = unit_slurp(p, len);

	if (!d)
		check_fail("cannot read %s", p);
	free(p);
	return d;
}

/* Add a READY-style record like gen.py's record(). */
static void add(wstore_manifest *m, const char *path, uint64_t size,
		uint64_t chunk_size, int64_t nchunks, int digest)
{
	char key[WSTORE__KEY_MAX], ck[WSTORE__KEY_MAX], sha[65], *content;
	wstore__file_rec *f = wstore__manifest_add_file(m, path);

	CHECK(f != NULL);
	if (!f)
		return;
	wstore__key_file(key, m->checkpoint_id, path);
	CHECK(wstore__set_str(&f->key, key) == 0);
	if (nchunks < 0)
		nchunks = chunk_size ? (int64_t)((size + chunk_size - 1) /
						 chunk_size)
				     : 1;
	for (int64_t i = 0; i < nchunks; i++) {
		wstore__key_chunk(ck, key, (uint64_t)i);
		CHECK(wstore__file_rec_add_chunk(f, ck) == 0);
	}
	if (asprintf(&content, "content:%s", path) < 0)
		abort();
	wstore__sha256_hex_str(sha, size ? content : "");
	free(content);
	CHECK(wstore__set_str(&f->sha256, digest ? sha : "") == 0);
	f->size = size;
	f->chunk_size = chunk_size;
}

static wstore_manifest *build_ready(void)
{
	wstore_manifest *m = wstore__manifest_new();

	wstore__set_str(&m->checkpoint_id, "Qwen3-golden.v2");
	wstore__set_str(&m->model_id, "Qwen/Qwen3-235B-A22B-模型-Ünï");
	wstore__set_str(&m->revision, "main");
	wstore__set_str(&m->status, "READY");
	wstore__set_str(&m->source_uri, "/data/models/Ünï/ckpt");
	m->created_at = 1700000000;
	m->updated_at = 1700000123;
	add(m, "model-00001-of-00002.safetensors", (1ull << 62) + 1, 1ull << 61,
	    -1, 1);
	add(m, "config.json", 123, 64 << 20, -1, 1);
	add(m, "empty.txt", 0, 64 << 20, -1, 1);
	add(m, "ünï/日本.bin", (1ull << 53) + 3, 1ull << 52, -1, 1);
	add(m, "odd/q\"uote\\back\tslash\x01\x1f\x7f.txt", 1, 64 << 20, -1, 1);
	add(m, "sub/dir/tokenizer.model", (64 << 20) + 1, 64 << 20, -1, 1);
	wstore__manifest_sort(m);
	return m;
}

static wstore_manifest *build_failed(void)
{
	wstore_manifest *m = wstore__manifest_new();

	wstore__set_str(&m->checkpoint_id, "failed-ckpt");
	wstore__set_str(&m->model_id, "org/模型");
	wstore__set_str(&m->revision, "abc123");
	wstore__set_str(&m->source_uri, "/src");
	wstore__set_str(&m->error, "cannot put chunk 'x/y': connection reset"
				   "\u2028next\ttab \"q\" \\ / é");
	m->created_at = 1;
	m->updated_at = 2;
	add(m, "b.json", 0, 64, 0, 0);
	add(m, "a.safetensors", 100, 64, 1, 0);
	/* no sort: serialize must order files itself */
	return m;
}

static void check_golden(wstore_manifest *m, const char *rel)
{
	char *want, *got = NULL;
	size_t want_len, got_len = 0;

	want = slurp_data(rel, &want_len);
	CHECK(want != NULL);
	CHECK_EQ_INT(wstore_manifest_serialize(&got, &got_len, m), 0);
	if (want && got) {
		CHECK_EQ_INT(got_len, want_len);
		CHECK(got_len == want_len && memcmp(got, want, got_len) == 0);
		if (got_len != want_len || memcmp(got, want, got_len))
			fprintf(stderr, "  got:  %s\n  want: %s\n", got, want);
	}
	free(got);
	free(want);
}

void test_manifest_golden(void)
{
	wstore_manifest *m = build_ready();

	CHECK_EQ_INT(m->total_size, 4620693217749237889ull);
	check_golden(m, "manifests/golden-ready.json");
	wstore_manifest_free(m);
	m = build_failed();
	check_golden(m, "manifests/golden-failed.json");
	wstore_manifest_free(m);

	/* strings that are not UTF-8 cannot be written */
	m = build_failed();
	wstore__set_str(&m->model_id, "bad\xff");
	{
		char *s = NULL;

		CHECK_EQ_INT(wstore_manifest_serialize(&s, NULL, m),
			     WSTORE_EINVAL);
		CHECK(s == NULL);
	}
	wstore_manifest_free(m);
}

static int has_suffix(const char *s, const char *suf)
{
	size_t n = strlen(s), k = strlen(suf);

	return n >= k && strcmp(s + n - k, suf) == 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of *.json in a data subdirectory; count in *n. */
static char **list_json(const char *rel, size_t *n)
{
	char *dir = unit_data_path(rel), **names = NULL;
	DIR *d = opendir(dir);
	struct dirent *e;

	*n = 0;
	if (!d) {
		check_fail("cannot open %s", dir);
		free(dir);
		return NULL;
	}
	while ((e = readdir(d))) {
		if (!has_suffix(e->d_name, ".json"))
			continue;
		names = realloc(names, (*n + 1) * sizeof(*names));
		names[(*n)++] = strndup(e->d_name, strlen(e->d_name) - 5);
	}
	closedir(d);
	free(dir);
	if (*n)
		qsort(names, *n, sizeof(*names), cmp_str);
	return names;
}

static void check_bad(const char *name)
{
	char rel[512], *data, *want, *nl;
	size_t len, wlen;
	wstore_manifest *m = (wstore_manifest *)1;
	int rc;

	snprintf(rel, sizeof(rel), "manifests/bad/%s.json", name);
	data = slurp_data(rel, &len);
	snprintf(rel, sizeof(rel), "manifests/bad/%s.err", name);
	want = slurp_data(rel, &wlen);
	if (!data || !want)
		goto out; /* counted by slurp_data */
	if ((nl = strchr(want, '\n')))
		*nl = '\0';
	rc = wstore_manifest_parse(&m, data, len);
	CHECK_EQ_INT(rc, WSTORE_ECORRUPT);
	CHECK(m == NULL);
	if (rc == 0)
		wstore_manifest_free(m);
	if (!strstr(wstore_last_error(), want))
		check_fail("bad/%s: error '%s' lacks '%s'", name,
			   wstore_last_error(), want);
	else
		check_pass();
	CHECK(strncmp(wstore_last_error(), "invalid manifest: ", 18) == 0);
out:
	free(data);
	free(want);
}

void test_manifest_parse_errors(void)
{
	size_t n;
	char **names = list_json("manifests/bad", &n);
	wstore_manifest *m;

	CHECK(n >= 15);
	for (size_t i = 0; i < n; i++) {
		check_bad(names[i]);
		free(names[i]);
	}
	free(names);

	CHECK_EQ_INT(wstore_manifest_parse(&m, NULL, 0), WSTORE_ECORRUPT);
	CHECK_EQ_INT(wstore_manifest_parse(&m, "{\"a\":1}\0junk", 12),
		     WSTORE_ECORRUPT);
	CHECK_EQ_INT(wstore_manifest_parse(&m, "{}", 2), WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), "missing key") != NULL);
}

/* Parse data, serialise, compare with want. */
static void check_roundtrip(const char *name, const char *data, size_t len,
			    const char *want, size_t want_len)
{
	wstore_manifest *m = NULL;
	char *got = NULL;
	size_t got_len = 0;
	int rc = wstore_manifest_parse(&m, data, len);

	CHECK_EQ_INT(rc, 0);
	if (rc) {
		fprintf(stderr, "  %s: %s\n", name, wstore_last_error());
		return;
	}
	CHECK_EQ_INT(wstore_manifest_serialize(&got, &got_len, m), 0);
	CHECK(got && got_len == want_len && memcmp(got, want, got_len) == 0);
	if (got && (got_len != want_len || memcmp(got, want, got_len)))
		fprintf(stderr, "  %s:\n  got:  %s\n  want: %.*s\n", name, got,
			(int)want_len, want);
	free(got);
	wstore_manifest_free(m);
}

static void roundtrip_good_dir(void)
{
	size_t n, len, olen;
	char **names = list_json("manifests/good", &n), rel[512];

	CHECK(n >= 5);
	for (size_t i = 0; i < n; i++) {
		char *data, *out;

		snprintf(rel, sizeof(rel), "manifests/good/%s.json", names[i]);
		data = slurp_data(rel, &len);
		snprintf(rel, sizeof(rel), "manifests/good/%s.out", names[i]);
		out = slurp_data(rel, &olen);
		if (data && out) /* else counted by slurp_data */
			check_roundtrip(names[i], data, len, out, olen);
		free(data);
		free(out);
		free(names[i]);
	}
	free(names);
}

static void check_accessors(const wstore_manifest *m)
{
	wstore_file_info fi;
	int64_t i;

	CHECK_STR(wstore_manifest_checkpoint_id(m), "Qwen3-golden.v2");
	CHECK_STR(wstore_manifest_model_id(m), "Qwen/Qwen3-235B-A22B-模型-Ünï");
	CHECK_STR(wstore_manifest_revision(m), "main");
	CHECK_STR(wstore_manifest_status(m), "READY");
	CHECK_STR(wstore_manifest_source_uri(m), "/data/models/Ünï/ckpt");
	CHECK(wstore_manifest_error(m) == NULL);
	CHECK_EQ_INT(wstore_manifest_created_at(m), 1700000000);
	CHECK_EQ_INT(wstore_manifest_updated_at(m), 1700000123);
	CHECK(wstore_manifest_total_size(m) == 4620693217749237889ull);
	CHECK_EQ_INT(wstore_manifest_file_count(m), 6);
	CHECK_EQ_INT(wstore_manifest_find(m, "config.json"), 0);
	CHECK_EQ_INT(wstore_manifest_find(m, "empty.txt"), 1);
	CHECK_EQ_INT(wstore_manifest_find(m, "ünï/日本.bin"), 5);
	CHECK_EQ_INT(wstore_manifest_find(m, "nope"), -1);
	CHECK_EQ_INT(wstore_manifest_find(m, ""), -1);
	CHECK_EQ_INT(wstore_manifest_find(m, "zzz"), -1);
	i = wstore_manifest_find(m, "model-00001-of-00002.safetensors");
	CHECK_EQ_INT(i, 2);
	CHECK_EQ_INT(wstore_manifest_file(&fi, m, (size_t)i), 0);
	CHECK_STR(fi.type, "WEIGHT");
	CHECK(fi.size == (1ull << 62) + 1);
	CHECK(fi.chunk_size == 1ull << 61);
	CHECK_EQ_INT(fi.chunk_count, 3);
	CHECK_EQ_INT(strlen(fi.sha256), 64);
	CHECK(strncmp(fi.key, "weight/models/Qwen3-golden.v2/files/", 36) == 0);
	CHECK(strstr(wstore_manifest_chunk_key(m, (size_t)i, 2),
		     "/chunks/00000002") != NULL);
	CHECK(wstore_manifest_chunk_key(m, (size_t)i, 3) == NULL);
	CHECK(wstore_manifest_chunk_key(m, 99, 0) == NULL);
	CHECK_EQ_INT(wstore_manifest_file(&fi, m, 1), 0);
	CHECK_EQ_INT(fi.chunk_count, 0);
	CHECK(wstore_manifest_chunk_key(m, 1, 0) == NULL);
	CHECK_EQ_INT(wstore_manifest_file(&fi, m, 6), WSTORE_ERANGE);
}

static void check_legacy(void)
{
	size_t len;
	char *data = slurp_data("manifests/good/legacy-v1.json", &len);
	wstore_manifest *m = NULL;
	wstore_file_info fi;

	CHECK(data && wstore_manifest_parse(&m, data, len) == 0);
	if (m) {
		CHECK_EQ_INT(wstore_manifest_file(&fi, m, 1), 0);
		CHECK_STR(fi.path, "model.safetensors");
		CHECK_EQ_INT(fi.chunk_size, 0);
		CHECK_EQ_INT(fi.chunk_count, 1);
		CHECK_STR(wstore_manifest_chunk_key(m, 1, 0), fi.key);
	}
	wstore_manifest_free(m);
	free(data);
}

static void put_manifest_key(wstore_store *s, const char *id, const char *data,
			     size_t len)
{
	char key[WSTORE__KEY_MAX];

	wstore__key_manifest(key, id);
	CHECK_EQ_INT(wstore__replace(s, key, data, len), 0);
}

/* wstore_manifest_read through the in-memory store. */
static void check_read(void)
{
	wstore_store *s = NULL;
	wstore_manifest *m = (wstore_manifest *)1;
	char *data;
	size_t len;

	CHECK_EQ_INT(wstore_open_url(&s, "mem://"), 0);
	if (!s)
		return;
	CHECK_EQ_INT(wstore_manifest_read(&m, s, "demo-main"),
		     WSTORE_ENOTFOUND);
	CHECK(m == NULL);
	CHECK_STR(wstore_last_error(), "checkpoint 'demo-main' not found");
	CHECK_EQ_INT(wstore_manifest_read(&m, s, "../x"), WSTORE_EINVAL);

	data = slurp_data("manifests/golden-ready.json", &len);
	if (data) {
		put_manifest_key(s, "Qwen3-golden.v2", data, len);
		CHECK_EQ_INT(wstore_manifest_read(&m, s, "Qwen3-golden.v2"), 0);
		CHECK(m && wstore_manifest_file_count(m) == 6);
		wstore_manifest_free(m);
		/* stored under another id */
		put_manifest_key(s, "other", data, len);
		CHECK_EQ_INT(wstore_manifest_read(&m, s, "other"),
			     WSTORE_ECORRUPT);
		CHECK(m == NULL);
		CHECK_STR(
			wstore_last_error(),
			"checkpoint 'other': manifest is corrupt: it names checkpoint 'Qwen3-golden.v2'");
	}
	free(data);
	put_manifest_key(s, "bad", "{\"x\":", 5);
	CHECK_EQ_INT(wstore_manifest_read(&m, s, "bad"), WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(),
		     "checkpoint 'bad': manifest is corrupt: line 1 column") ==
	      wstore_last_error());
	wstore_free(s);
}

void test_manifest_roundtrip(void)
{
	static const char *const goldens[] = {
		"manifests/golden-ready.json",
		"manifests/golden-failed.json",
	};
	wstore_manifest *m;
	size_t len;
	int bad = 0;

	for (size_t g = 0; g < 2; g++) {
		char *data = slurp_data(goldens[g], &len);

		CHECK(data != NULL);
		if (data)
			check_roundtrip(goldens[g], data, len, data, len);
		free(data);
	}
	roundtrip_good_dir();
	check_legacy();
	check_read();

	m = build_ready();
	check_accessors(m);
	wstore_manifest_free(m);
	m = build_failed();
	wstore__manifest_sort(m);
	CHECK_STR(wstore_manifest_status(m), "FAILED");
	CHECK(strstr(wstore_manifest_error(m), "connection reset") != NULL);
	CHECK_EQ_INT(wstore_manifest_find(m, "a.safetensors"), 0);
	CHECK_EQ_INT(wstore_manifest_total_size(m), 100);
	wstore_manifest_free(m);
	wstore_manifest_free(NULL);

	/* many files and chunks: the growth helpers */
	m = wstore__manifest_new();
	for (int i = 0; i < 1000; i++) {
		char p[32];
		wstore__file_rec *f;

		snprintf(p, sizeof(p), "f%04d", 999 - i);
		f = wstore__manifest_add_file(m, p);
		bad += f == NULL;
		for (int j = 0; f && j < i % 37; j++)
			bad += wstore__file_rec_add_chunk(f, "k") != 0;
	}
	CHECK_EQ_INT(bad, 0);
	wstore__manifest_sort(m);
	CHECK_EQ_INT(m->nfiles, 1000);
	CHECK_EQ_INT(wstore_manifest_find(m, "f0000"), 0);
	CHECK_EQ_INT(wstore_manifest_find(m, "f0999"), 999);
	CHECK_EQ_INT(wstore_manifest_find(m, "f0500"), 500);
	CHECK_EQ_INT(m->files[500].nchunks, 499 % 37);
	wstore_manifest_free(m);
}
