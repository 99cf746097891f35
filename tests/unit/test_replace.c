/*
 * test_replace.c - a checkpoint deleted, or replaced by another import of
 * the same id, while a reader reads it (generation.c): the reader gets
 * WSTORE_ECHANGED, never bytes of the other import.  Each reader of the
 * library in turn: byte-range reads, safetensors reads, zero-copy chunk
 * files, pull (verified and not) and materialize; on the memory store,
 * the file store and a write-once store; with the generation record and,
 * for checkpoints without one (another tool's import), by the manifest.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "unit.h"
#include "wstore/wstore.h"
#include "wstore/read.h"
#include "wstore/lease.h"
#include "wstore/sys/backend.h"
#include "../../src/lib/generation.h"
#include "../../src/lib/names.h"
#include "../../src/lib/readv.h"

#define CS 64	    /* chunk size of every import here */
#define NB (CS * 6) /* bytes of w.bin: six chunks */

/* Import id from a fresh source whose w.bin is NB bytes of fill (and a
 * config.json); 0 or the import's code. */
static int import_fill(wstore_store *s, const char *id, char fill)
{
	wstore_import_options o = WSTORE_IMPORT_OPTIONS_INIT;
	char *src = unit_tmpdir(), data[NB];
	int rc;

	memset(data, fill, sizeof(data));
	unit_spit(src, "w.bin", data, sizeof(data));
	unit_spit(src, "config.json", "{}\n", 3);
	o.checkpoint_id = id;
	o.model_id = "test/replace";
	o.source = src;
	o.chunk_size = CS;
	o.jobs = 2;
	rc = wstore_import(s, &o);
	if (rc)
		fprintf(stderr, "import: %s\n", wstore_last_error());
	unit_rmtree(src);
	free(src);
	return rc;
}

static int delete_force(wstore_store *s, const char *id)
{
	wstore_delete_options o = WSTORE_DELETE_OPTIONS_INIT;

	o.force = 1;
	return wstore_delete_ext(s, id, &o);
}

/* delete --force, then import again with other bytes */
static void replace(wstore_store *s, const char *id, char fill)
{
	CHECK_EQ_INT(delete_force(s, id), 0);
	CHECK_EQ_INT(import_fill(s, id, fill), 0);
}

static wstore_store *file_store(const char *root)
{
	wstore_backend *b = NULL;
	wstore_store *s = NULL;

	if (wstore_backend_file_new(&b, root) < 0)
		return NULL;
	if (wstore_open_backend(&s, b) < 0) {
		b->free(b);
		return NULL;
	}
	return s;
}

/* Whether n bytes at buf are all c. */
static int all(const char *buf, size_t n, char c)
{
	for (size_t i = 0; i < n; i++)
		if (buf[i] != c)
			return 0;
	return 1;
}

/* Remove id's generation record, as if another tool had imported it. */
static void drop_generation(wstore_store *s, const char *id)
{
	wstore_backend *b = wstore_store_backend(s);
	char key[WSTORE__KEY_MAX];

	wstore__key_generation(key, id);
	CHECK_EQ_INT(b->remove(b, key, 1), 0);
}

/* ---- the read API ----------------------------------------------------------
 */

/*
 * Open, read a chunk, replace the checkpoint (with fill 'B'), read on:
 * WSTORE_ECHANGED for every read, whatever it reads; a new handle reads
 * the new bytes.  by_gen: whether the handle is vouched for by the
 * generation record.
 */
static void read_replaced(wstore_store *s, int by_gen)
{
	wstore_checkpoint *ck = NULL, *ck2 = NULL;
	wstore_file *f = NULL;
	char buf[NB];
	size_t n = 0;

	CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "r"), 0);
	if (!ck)
		return;
	CHECK_EQ_INT(wstore__checkpoint_by_generation(ck), by_gen);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "w.bin"), 0);
	CHECK_EQ_INT(wstore_file_pread(f, buf, CS, 0, &n), 0);
	CHECK(n == CS && all(buf, CS, 'A'));
	replace(s, "r", 'B');
	CHECK_EQ_INT(wstore_file_pread(f, buf, CS, CS, &n), WSTORE_ECHANGED);
	CHECK(strstr(wstore_last_error(), "'r' was deleted or replaced") &&
	      strstr(wstore_last_error(), "'w.bin'"));
	CHECK_EQ_INT(n, 0);
	/* part of a chunk, several chunks, the one read before */
	CHECK_EQ_INT(wstore_file_pread(f, buf, 10, 3 * CS + 5, &n),
		     WSTORE_ECHANGED);
	CHECK_EQ_INT(wstore_file_pread(f, buf, NB, 0, &n), WSTORE_ECHANGED);
	CHECK_EQ_INT(wstore_file_pread(f, buf, CS, 0, &n), WSTORE_ECHANGED);
	wstore_file_free(f);
	wstore_checkpoint_free(ck);
	/* a new handle reads the new import */
	CHECK_EQ_INT(wstore_checkpoint_open(&ck2, s, "r"), 0);
	CHECK_EQ_INT(wstore_file_open(&f, ck2, "w.bin"), 0);
	CHECK_EQ_INT(wstore_file_pread(f, buf, NB, 0, &n), 0);
	CHECK(n == NB && all(buf, NB, 'B'));
	wstore_file_free(f);
	wstore_checkpoint_free(ck2);
}

/* Deleted without a new import: WSTORE_ECHANGED, not "chunk missing". */
static void read_deleted(wstore_store *s)
{
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	char buf[CS];

	CHECK_EQ_INT(import_fill(s, "d", 'A'), 0);
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "d"), 0);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "w.bin"), 0);
	CHECK_EQ_INT(delete_force(s, "d"), 0);
	CHECK_EQ_INT(wstore_file_pread(f, buf, CS, 2 * CS, NULL),
		     WSTORE_ECHANGED);
	wstore_file_free(f);
	wstore_checkpoint_free(ck);
}

void test_replace_read(void)
{
	unsigned flags[] = { 0, WSTORE_BACKEND_WRITE_ONCE |
					WSTORE_BACKEND_EMPTY_MISSING };

	for (size_t i = 0; i < 2; i++) {
		wstore_store *s = unit_mem_store(0, flags[i]);

		CHECK(s != NULL);
		if (!s)
			continue;
		CHECK_EQ_INT(import_fill(s, "r", 'A'), 0);
		read_replaced(s, 1);
		read_deleted(s);
		wstore_free(s);
	}
}

/* A record that is not the import's own (another tool imported the id
 * after a wstore import was deleted by that tool): judged by manifest. */
static void put_stale_generation(wstore_store *s, const char *id)
{
	static const char rec[] = "{\"checkpoint_id\":\"r\",\"created_at\":1,"
				  "\"generation\":\"00\"}";
	wstore_backend *b = wstore_store_backend(s);
	char key[WSTORE__KEY_MAX];

	wstore__key_generation(key, id);
	b->remove(b, key, 1);
	CHECK_EQ_INT(b->put(b, key, rec, sizeof(rec) - 1), 0);
}

/* Checkpoints without a generation record of their own: the manifest is
 * read again; identical file records (same bytes) read on. */
void test_replace_read_by_manifest(void)
{
	wstore_store *s = unit_mem_store(0, 0);
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	char buf[NB];
	size_t n = 0;

	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_EQ_INT(import_fill(s, "r", 'A'), 0);
	drop_generation(s, "r");
	read_replaced(s, 0); /* the new import has a record again */
	put_stale_generation(s, "r");
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "r"), 0);
	CHECK_EQ_INT(wstore__checkpoint_by_generation(ck), 0);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "w.bin"), 0);
	/* the same bytes again: the records are identical, reads go on */
	CHECK_EQ_INT(delete_force(s, "r"), 0);
	CHECK_EQ_INT(import_fill(s, "r", 'B'), 0);
	CHECK_EQ_INT(wstore_file_pread(f, buf, NB, 0, &n), 0);
	CHECK(n == NB && all(buf, NB, 'B'));
	/* deleted: the manifest is gone */
	CHECK_EQ_INT(delete_force(s, "r"), 0);
	CHECK_EQ_INT(wstore_file_pread(f, buf, CS, CS, &n), WSTORE_ECHANGED);
	wstore_file_free(f);
	wstore_checkpoint_free(ck);
	wstore_free(s);
}

/* A network store that lost the checkpoint (or it was deleted and
 * nothing took its place): the reader is told the store may have lost
 * it, not only that it was replaced; a local store keeps the old words.
 * by_gen 0: judged by the manifest (no generation record of its own). */
static void read_lost(unsigned flags, int by_gen, const char *want)
{
	wstore_store *s = unit_mem_store(0, flags);
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	char buf[CS];
	size_t n = 0;

	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_EQ_INT(import_fill(s, "r", 'A'), 0);
	if (!by_gen)
		drop_generation(s, "r");
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "r"), 0);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "w.bin"), 0);
	CHECK_EQ_INT(wstore_file_pread(f, buf, CS, 0, &n), 0);
	CHECK_EQ_INT(delete_force(s, "r"), 0);
	CHECK_EQ_INT(wstore_file_pread(f, buf, CS, CS, &n), WSTORE_ECHANGED);
	if (!strstr(wstore_last_error(), want))
		fprintf(stderr, "  got: %s\n", wstore_last_error());
	CHECK(strstr(wstore_last_error(), want) != NULL);
	wstore_file_free(f);
	wstore_checkpoint_free(ck);
	wstore_free(s);
}

void test_replace_lost(void)
{
	for (int by_gen = 0; by_gen < 2; by_gen++) {
		read_lost(WSTORE_BACKEND_UNTRUSTED, by_gen,
			  "'r' is no longer in the store: it was deleted or "
			  "replaced by another import, or lost by the mem "
			  "store, while 'w.bin'");
		read_lost(0, by_gen,
			  "'r' was deleted or replaced by another "
			  "import while 'w.bin'");
	}
}

/* ---- zero-copy chunk files -------------------------------------------------
 */

void test_replace_chunk_fd(void)
{
	char *root = unit_tmpdir(), buf[CS];
	wstore_store *s = file_store(root);
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	uint64_t fd_off = 0;
	size_t len = 0;
	int fd = -1, fd2 = -1;

	CHECK(s != NULL);
	if (!s)
		goto out;
	CHECK_EQ_INT(import_fill(s, "r", 'A'), 0);
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "r"), 0);
	CHECK_EQ_INT(wstore__checkpoint_by_generation(ck), 1);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "w.bin"), 0);
	if (!f)
		goto out;
	CHECK_EQ_INT(wstore_file_chunk_fd(&fd, &fd_off, &len, f, CS + 3), 0);
	/* the data file of the whole file, from the offset asked for */
	CHECK(fd_off == CS + 3 && len == NB - CS - 3);
	replace(s, "r", 'B');
	/* a chunk file opened after: refused */
	CHECK_EQ_INT(wstore_file_chunk_fd(&fd2, &fd_off, &len, f, 2 * CS),
		     WSTORE_ECHANGED);
	CHECK_EQ_INT(fd2, -1);
	CHECK_EQ_INT(wstore_file_chunk_fd(&fd2, &fd_off, &len, f, CS),
		     WSTORE_ECHANGED);
	/* the one opened before still holds the bytes it was confirmed with:
	 * all of them, chunks never read before the replacement too (the
	 * data file was replaced by a rename, not rewritten) */
	CHECK(fd >= 0 && pread(fd, buf, CS, 0) == CS && all(buf, CS, 'A'));
	for (uint64_t c = 1; fd >= 0 && c < NB / CS; c++)
		CHECK(pread(fd, buf, CS, (off_t)(c * CS)) == CS &&
		      all(buf, CS, 'A'));
	/* and byte-range reads on the file store, from the record's open
	 * file */
	CHECK_EQ_INT(wstore_file_pread(f, buf, CS, 4 * CS, NULL),
		     WSTORE_ECHANGED);
out:
	if (fd >= 0)
		close(fd);
	wstore_file_free(f);
	wstore_checkpoint_free(ck);
	wstore_free(s);
	unit_rmtree(root);
	free(root);
}

/* ---- pull and materialize --------------------------------------------------
 */

struct swap {
	wstore_store *s;
	int calls;
};

/* Progress of a pull: replace the checkpoint after its first chunk. */
static int swap_on_progress(uint64_t done, uint64_t total, const char *path,
			    void *ctx)
{
	struct swap *sw = ctx;

	(void)done;
	(void)total;
	if (strcmp(path, "w.bin") == 0 && ++sw->calls == 1)
		replace(sw->s, "r", 'B');
	return 0;
}

/* Number of entries of dir (but . and ..). */
static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

static void pull_replaced(int no_verify)
{
	wstore_pull_options o = WSTORE_PULL_OPTIONS_INIT;
	char *tmp = unit_tmpdir(), dest[4096], path[4096];
	wstore_store *s = unit_mem_store(0, 0);
	struct swap sw = { s, 0 };

	CHECK(s != NULL);
	if (!s)
		goto out;
	CHECK_EQ_INT(import_fill(s, "r", 'A'), 0);
	PATHF(dest, "%s/dest", tmp);
	o.jobs = 1;
	o.no_verify = no_verify;
	o.include = (const char *const[]){ "w.bin", NULL };
	o.progress = swap_on_progress;
	o.progress_ctx = &sw;
	CHECK_EQ_INT(wstore_pull(s, "r", dest, &o), WSTORE_ECHANGED);
	CHECK(strstr(wstore_last_error(), "replaced") != NULL);
	/* no file at its final name, no temp file left */
	PATHF(path, "%s/w.bin", dest);
	CHECK(access(path, F_OK) != 0);
	CHECK_EQ_INT(count_entries(dest), 0);
	/* pulled again: the new bytes */
	o.progress = NULL;
	CHECK_EQ_INT(wstore_pull(s, "r", dest, &o), 0);
	{
		size_t n = 0;
		char *got = unit_slurp(path, &n);

		CHECK(got && n == NB && all(got, n, 'B'));
		free(got);
	}
out:
	wstore_free(s);
	unit_rmtree(tmp);
	free(tmp);
}

void test_replace_pull(void)
{
	pull_replaced(0);
	pull_replaced(1);
}

/* ---- opening, and a confirmation that cannot be made -----------------------
 */

/* The record changing between the two readings of an open: ECHANGED
 * (the open starts again); a record of another import: by manifest. */
void test_replace_guard_bind(void)
{
	wstore_store *s = unit_mem_store(0, 0);
	wstore_manifest *m = NULL;
	wstore__guard *g = NULL;

	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_EQ_INT(import_fill(s, "r", 'A'), 0);
	CHECK_EQ_INT(wstore_manifest_read(&m, s, "r"), 0);
	if (!m)
		goto out;
	/* present, then replaced */
	CHECK_EQ_INT(wstore__guard_new(&g, s, "r"), 0);
	CHECK_EQ_INT(wstore__gen_write(s, m), 0);
	CHECK_EQ_INT(wstore__guard_bind(g, m), WSTORE_ECHANGED);
	wstore__guard_free(g);
	/* absent, then written */
	drop_generation(s, "r");
	CHECK_EQ_INT(wstore__guard_new(&g, s, "r"), 0);
	CHECK_EQ_INT(wstore__gen_write(s, m), 0);
	CHECK_EQ_INT(wstore__guard_bind(g, m), WSTORE_ECHANGED);
	wstore__guard_free(g);
	/* unchanged: bound to the record, which names m */
	CHECK_EQ_INT(wstore__guard_new(&g, s, "r"), 0);
	CHECK_EQ_INT(wstore__guard_bind(g, m), 0);
	CHECK_EQ_INT(wstore__guard_by_generation(g), 1);
	wstore__guard_free(g);
	/* a record naming another created_at: bound to the manifest */
	put_stale_generation(s, "r");
	CHECK_EQ_INT(wstore__guard_new(&g, s, "r"), 0);
	CHECK_EQ_INT(wstore__guard_bind(g, m), 0);
	CHECK_EQ_INT(wstore__guard_by_generation(g), 0);
	wstore__guard_free(g);
	/* a large record of somebody else's: by manifest, opens fine */
	{
		wstore_backend *b = wstore_store_backend(s);
		char key[WSTORE__KEY_MAX], junk[5000];
		wstore_checkpoint *ck = NULL;

		memset(junk, 'j', sizeof(junk));
		wstore__key_generation(key, "r");
		b->remove(b, key, 1);
		CHECK_EQ_INT(b->put(b, key, junk, sizeof(junk)), 0);
		CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "r"), 0);
		CHECK(ck && wstore__checkpoint_by_generation(ck) == 0);
		wstore_checkpoint_free(ck);
	}
	/* an invalid id never reaches the store */
	CHECK_EQ_INT(wstore__guard_new(&g, s, "../x"), WSTORE_EINVAL);
out:
	wstore_manifest_free(m);
	wstore_free(s);
}

/* A get of keys containing fail_part fails with -EIO while set. */
static const char *fail_part;
static int (*real_get)(wstore_backend *, const char *, void *, size_t,
		       size_t *);

static int flaky_get(wstore_backend *b, const char *key, void *buf, size_t cap,
		     size_t *out_len)
{
	if (fail_part && strstr(key, fail_part))
		return wstore_backend_error(-EIO, "'%s': injected", key);
	return real_get(b, key, buf, cap, out_len);
}

/* A confirmation the store cannot answer is that error, never "changed"
 * and never a success; a chunk gone from an unchanged checkpoint is
 * damage, as before. */
void test_replace_check_fails(void)
{
	wstore_store *s = unit_mem_store(0, 0);
	wstore_backend *b = s ? wstore_store_backend(s) : NULL;
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	char buf[CS], key[WSTORE__KEY_MAX], fk[WSTORE__KEY_MAX];

	CHECK(s != NULL);
	if (!s)
		return;
	real_get = b->get;
	b->get = flaky_get;
	CHECK_EQ_INT(import_fill(s, "r", 'A'), 0);
	for (int by_manifest = 0; by_manifest < 2; by_manifest++) {
		if (by_manifest)
			drop_generation(s, "r");
		CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "r"), 0);
		CHECK_EQ_INT(wstore_file_open(&f, ck, "w.bin"), 0);
		if (!f)
			break;
		fail_part = by_manifest ? "/manifest" : "generations/";
		CHECK_EQ_INT(wstore_file_pread(f, buf, CS, 0, NULL), -EIO);
		CHECK(strstr(wstore_last_error(), "cannot confirm") != NULL);
		fail_part = NULL;
		CHECK_EQ_INT(wstore_file_pread(f, buf, CS, 0, NULL), 0);
		CHECK(all(buf, CS, 'A'));
		wstore_file_free(f);
		wstore_checkpoint_free(ck);
		f = NULL;
		ck = NULL;
	}
	/* damage: chunk 2 removed behind the checkpoint's back */
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "r"), 0);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "w.bin"), 0);
	wstore__key_file(fk, "r", "w.bin");
	wstore__key_chunk(key, fk, 2);
	CHECK_EQ_INT(b->remove(b, key, 1), 0);
	CHECK_EQ_INT(wstore_file_pread(f, buf, CS, 2 * CS, NULL),
		     WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), "missing") != NULL);
	wstore_file_free(f);
	wstore_checkpoint_free(ck);
	wstore_free(s);
}

/* The file store, by record and by manifest (whose confirmation there is
 * an fstat of the manifest's file while it stays linked). */
void test_replace_file_store(void)
{
	for (int by_gen = 1; by_gen >= 0; by_gen--) {
		char *root = unit_tmpdir(), buf[NB];
		wstore_store *s = file_store(root);
		wstore_checkpoint *ck = NULL;
		wstore_file *f = NULL;

		CHECK(s != NULL);
		if (s && import_fill(s, "r", 'A') == 0) {
			if (!by_gen)
				drop_generation(s, "r");
			read_replaced(s, by_gen);
			/* by manifest: a replacement with the same files (B
			 * again) reads on */
			drop_generation(s, "r");
			CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "r"), 0);
			CHECK_EQ_INT(wstore_file_open(&f, ck, "w.bin"), 0);
			CHECK_EQ_INT(wstore_file_pread(f, buf, CS, 0, NULL), 0);
			replace(s, "r", 'B');
			CHECK_EQ_INT(wstore_file_pread(f, buf, NB, 0, NULL), 0);
			CHECK(all(buf, NB, 'B'));
			CHECK_EQ_INT(delete_force(s, "r"), 0);
			CHECK_EQ_INT(wstore_file_pread(f, buf, CS, 0, NULL),
				     WSTORE_ECHANGED);
			wstore_file_free(f);
			wstore_checkpoint_free(ck);
		}
		wstore_free(s);
		unit_rmtree(root);
		free(root);
	}
}

static int swap_once(uint64_t done, uint64_t total, const char *path, void *ctx)
{
	struct swap *sw = ctx;

	(void)done;
	(void)total;
	(void)path;
	if (++sw->calls == 1)
		replace(sw->s, "r", 'B');
	return 0;
}

static void count_bad(const char *path, int code, const char *msg, void *ctx)
{
	(void)path;
	(void)msg;
	*(int *)ctx += code != 0;
}

/* verify: a file that no longer matches because the checkpoint was
 * replaced is not "damaged": the verify fails with WSTORE_ECHANGED */
void test_replace_verify(void)
{
	wstore_verify_options o = WSTORE_VERIFY_OPTIONS_INIT;
	wstore_store *s = unit_mem_store(0, 0);
	struct swap sw = { s, 0 };
	int bad = 0;

	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_EQ_INT(import_fill(s, "r", 'A'), 0);
	o.jobs = 1;
	o.progress = swap_once;
	o.progress_ctx = &sw;
	o.on_file = count_bad;
	o.on_file_ctx = &bad;
	CHECK_EQ_INT(wstore_verify(s, "r", &o), WSTORE_ECHANGED);
	CHECK_EQ_INT(bad, 0);
	o.progress = NULL;
	CHECK_EQ_INT(wstore_verify(s, "r", &o), 0);
	wstore_free(s);
}

struct reader {
	wstore_file *f;
	int bad, changed;
};

static void *read_all(void *arg)
{
	struct reader *r = arg;
	char buf[CS];

	for (int i = 0; i < 200; i++) {
		int rc = wstore_file_pread(r->f, buf, CS,
					   (uint64_t)(i % 6) * CS, NULL);

		if (rc == WSTORE_ECHANGED)
			r->changed++;
		else if (rc != 0 || !all(buf, CS, 'A'))
			r->bad++;
	}
	return NULL;
}

/* Threads reading one handle confirmed by manifest (a shared cache of
 * the manifest last judged) while the checkpoint is replaced: every read
 * is 'A' bytes or WSTORE_ECHANGED, and after the replacement only the
 * latter. */
void test_replace_threads(void)
{
	char *root = unit_tmpdir();
	wstore_store *stores[2] = { unit_mem_store(0, 0), file_store(root) };

	for (int k = 0; k < 2; k++) {
		wstore_store *s = stores[k];
		wstore_checkpoint *ck = NULL;
		wstore_file *f = NULL;
		struct reader r[4] = { { 0 } };
		pthread_t t[4];

		if (!s || import_fill(s, "r", 'A') != 0)
			continue;
		drop_generation(s, "r");
		CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "r"), 0);
		CHECK_EQ_INT(wstore_file_open(&f, ck, "w.bin"), 0);
		for (int i = 0; f && i < 4; i++) {
			r[i].f = f;
			pthread_create(&t[i], NULL, read_all, &r[i]);
		}
		replace(s, "r", 'B');
		for (int i = 0; f && i < 4; i++) {
			pthread_join(t[i], NULL);
			CHECK_EQ_INT(r[i].bad, 0);
		}
		r[0].changed = 0;
		if (f)
			read_all(&r[0]);
		CHECK_EQ_INT(r[0].changed, 200);
		wstore_file_free(f);
		wstore_checkpoint_free(ck);
		wstore_free(s);
	}
	unit_rmtree(root);
	free(root);
}

/* The manifest of id put again, the same bytes (a new file on the file
 * store). */
static void reput_manifest(wstore_store *s, const char *id)
{
	wstore_backend *b = wstore_store_backend(s);
	char key[WSTORE__KEY_MAX], buf[65536];
	size_t n = 0;

	wstore__key_manifest(key, id);
	CHECK_EQ_INT(b->get(b, key, buf, sizeof(buf), &n), 0);
	CHECK(n > 0 && n < sizeof(buf));
	b->remove(b, key, 1);
	CHECK_EQ_INT(b->put(b, key, buf, n), 0);
}

/* wstore_checkpoint_unchanged: 1 while the manifest in the store is the
 * one opened (also when put again with the same bytes), 0 once the
 * checkpoint is replaced or deleted; on the memory store and the file
 * store (where it is one fstat while the file read at open is linked). */
void test_replace_unchanged(void)
{
	for (int fs = 0; fs < 2; fs++) {
		char *root = fs ? unit_tmpdir() : NULL;
		wstore_store *s = fs ? file_store(root) : unit_mem_store(0, 0);
		wstore_checkpoint *ck = NULL, *ck2 = NULL;

		CHECK(s != NULL);
		if (s && import_fill(s, "u", 'A') == 0 &&
		    wstore_checkpoint_open(&ck, s, "u") == 0) {
			CHECK_EQ_INT(wstore_checkpoint_unchanged(ck), 1);
			CHECK_EQ_INT(wstore_pin(s, "u", 1), 0);
			CHECK_EQ_INT(wstore_checkpoint_unchanged(ck), 1);
			reput_manifest(s, "u");
			CHECK_EQ_INT(wstore_checkpoint_unchanged(ck), 1);
			CHECK_EQ_INT(wstore_pin(s, "u", 0), 0);
			replace(s, "u", 'B');
			CHECK_EQ_INT(wstore_checkpoint_unchanged(ck), 0);
			CHECK_EQ_INT(wstore_checkpoint_open(&ck2, s, "u"), 0);
			if (ck2)
				CHECK_EQ_INT(wstore_checkpoint_unchanged(ck2),
					     1);
			CHECK_EQ_INT(delete_force(s, "u"), 0);
			CHECK_EQ_INT(wstore_checkpoint_unchanged(ck), 0);
			if (ck2)
				CHECK_EQ_INT(wstore_checkpoint_unchanged(ck2),
					     0);
		}
		wstore_checkpoint_free(ck2);
		wstore_checkpoint_free(ck);
		wstore_free(s);
		if (root)
			unit_rmtree(root);
		free(root);
	}
}
