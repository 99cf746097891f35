/*
 * test_reuse.c - files the store already holds, by SHA-256 (reuse.c):
 * a file put from a held one on a store of chunks (another chunk size)
 * and into a data file of the file store; a held file whose bytes no
 * longer give its hash is not used and leaves nothing; an unknown hash
 * finds nothing.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/helpers.h"
#include "fixture.h"
#include "manifest.h"
#include "names.h"
#include "reuse.h"
#include "store.h"
#include "unit.h"
#include "util.h"

/* A record for path in checkpoint "new" like held's, chunk size cs; in
 * m (which owns it). */
static wstore__file_rec *dst_rec(wstore_manifest *m, const wstore__file_rec *h,
				 uint64_t cs)
{
	wstore__file_rec *f = wstore__manifest_add_file(m, h->path);
	char key[WSTORE__KEY_MAX], ck[WSTORE__KEY_MAX];

	CHECK(f != NULL);
	wstore__key_file(key, "new", h->path);
	wstore__set_str(&f->key, key);
	wstore__set_str(&f->sha256, h->sha256);
	f->size = h->size;
	f->chunk_size = cs;
	for (uint64_t c = 0; c < (h->size + cs - 1) / cs; c++) {
		wstore__key_chunk(ck, key, c);
		wstore__file_rec_add_chunk(f, ck);
	}
	return f;
}

/* The bytes of f's chunks, concatenated (malloc'ed), or NULL. */
static char *read_all(wstore_store *s, const wstore__file_rec *f)
{
	char *buf = malloc(f->size + 1);
	uint64_t off = 0;

	for (uint64_t c = 0; buf && c < f->nchunks; c++) {
		uint64_t len = 0;

		if (wstore__chunk_len(&len, f, c) < 0 ||
		    wstore__read_chunk(s, f, c, buf + off, (size_t)len) < 0) {
			free(buf);
			return NULL;
		}
		off += len;
	}
	return buf;
}

static const wstore__file_rec *shard_rec(const wstore_manifest *m)
{
	int64_t i = wstore_manifest_find(m, "model.safetensors");

	CHECK(i >= 0);
	return i >= 0 ? &m->files[i] : NULL;
}

void test_reuse_chunks(void)
{
	struct fixture fx;
	wstore_manifest *held = NULL, *m = wstore__manifest_new();
	wstore__reuse *r = NULL;
	const wstore__file_rec *h;
	wstore__file_rec *d;
	char *got;
	uint64_t sz;

	if (fixture_init(&fx, 0, 7) != 0)
		goto out;
	CHECK_EQ_INT(wstore_manifest_read(&held, fx.s, "ck"), 0);
	CHECK_EQ_INT(wstore__reuse_new(&r, fx.s, NULL), 0);
	if (!held || !r || !(h = shard_rec(held)))
		goto out;
	CHECK(wstore__reuse_has(r, h->sha256, h->size));
	CHECK(!wstore__reuse_has(r, h->sha256, h->size + 1));
	d = dst_rec(m, h, 5);
	CHECK_EQ_INT(wstore__reuse_put(r, fx.s, d, -1, NULL, NULL), 1);
	got = read_all(fx.s, d);
	CHECK(got && memcmp(got, fx.shard, fx.shard_n) == 0);
	free(got);
	/* the held file damaged (same length): not used, nothing left */
	for (uint64_t c = 0; c < d->nchunks; c++)
		wstore__remove(fx.s, d->chunks[c]);
	{
		char bad[7] = "XXXXXXX";

		fixture_put_raw(fx.s, h->chunks[0], bad, sizeof(bad));
	}
	CHECK_EQ_INT(wstore__reuse_put(r, fx.s, d, -1, NULL, NULL), 0);
	CHECK_EQ_INT(fx.s->b->size(fx.s->b, d->chunks[0], &sz),
		     WSTORE_ENOTFOUND);
	/* an unknown hash */
	wstore__set_str(&d->sha256, "0000000000000000000000000000000000000000"
				    "000000000000000000000000");
	CHECK_EQ_INT(wstore__reuse_put(r, fx.s, d, -1, NULL, NULL), 0);
out:
	wstore__reuse_free(r);
	wstore_manifest_free(held);
	wstore_manifest_free(m);
	fixture_done(&fx);
}

void test_reuse_file_store(void)
{
	char *dir = unit_tmpdir(), *src = NULL, *shard = NULL, *got = NULL;
	wstore_manifest *held = NULL, *m = wstore__manifest_new();
	wstore__reuse *r = NULL;
	wstore_store *s = NULL;
	const wstore__file_rec *h;
	wstore__file_rec *d;
	size_t shard_n = 0;
	void *handle = NULL;
	int fd = -1;

	CHECK_EQ_INT(wstore_open_url(&s, dir), 0);
	src = fixture_source(&shard, &shard_n);
	if (!s || fixture_import(s, "ck", src, 7) != 0)
		goto out;
	CHECK_EQ_INT(wstore_manifest_read(&held, s, "ck"), 0);
	CHECK_EQ_INT(wstore__reuse_new(&r, s, NULL), 0);
	if (!held || !r || !(h = shard_rec(held)))
		goto out;
	d = dst_rec(m, h, 11);
	CHECK_EQ_INT(s->b->begin_file(s->b, d->key, 11, &fd, &handle), 0);
	CHECK_EQ_INT(wstore__reuse_put(r, s, d, fd, NULL, NULL), 1);
	CHECK_EQ_INT(s->b->commit_file(s->b, handle, d->size), 0);
	got = read_all(s, d);
	CHECK(got && memcmp(got, shard, shard_n) == 0);
	/* a table that leaves out the only checkpoint holding it */
	wstore__reuse_free(r);
	r = NULL;
	CHECK_EQ_INT(wstore__reuse_new(&r, s, "ck"), 0);
	CHECK(r == NULL);
out:
	free(got);
	wstore__reuse_free(r);
	wstore_manifest_free(held);
	wstore_manifest_free(m);
	wstore_free(s);
	unit_rmtree(src);
	unit_rmtree(dir);
	free(src);
	free(shard);
	free(dir);
}
