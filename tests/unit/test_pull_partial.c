/*
 * test_pull_partial.c - resumable pulls (src/lib/partial.c, pull.c): a
 * canceled pull keeps its partial file; the next pull takes it, hashes
 * the kept prefix again and fetches only the chunks it lacks; a partial
 * of another import, of a live writer, or under --force is never resumed.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "unit.h"
#include "wstore/wstore.h"
#include "wstore/read.h"
#include "wstore/sys/backend.h"
#include "../../src/lib/owner.h"
#include "../../src/lib/partial.h"

#define CS 256u	      /* chunk size */
#define BIG (10 * CS) /* big.bin: ten chunks */

/* ---- a store that counts chunk reads ------------------------------------ */

static int (*real_get)(wstore_backend *, const char *, void *, size_t,
		       size_t *);
static int (*real_get_range)(wstore_backend *, const char *, uint64_t, void *,
			     size_t, size_t *);
static unsigned long chunk_reads;
/* reads of a chunk key ending in this fail with -EIO ("" for none) */
static const char *failing = "";

static int fails(const char *key)
{
	size_t n = strlen(key), m = strlen(failing);

	return m && n >= m && strcmp(key + n - m, failing) == 0;
}

static int is_chunk(const char *key)
{
	return strstr(key, "/chunks/") != NULL;
}

static int count_get(wstore_backend *b, const char *key, void *buf, size_t cap,
		     size_t *out_len)
{
	if (is_chunk(key))
		__atomic_add_fetch(&chunk_reads, 1, __ATOMIC_SEQ_CST);
	if (fails(key))
		return -EIO;
	return real_get(b, key, buf, cap, out_len);
}

static int count_get_range(wstore_backend *b, const char *key, uint64_t off,
			   void *buf, size_t len, size_t *out_n)
{
	if (is_chunk(key))
		__atomic_add_fetch(&chunk_reads, 1, __ATOMIC_SEQ_CST);
	if (fails(key))
		return -EIO;
	return real_get_range(b, key, off, buf, len, out_n);
}

static wstore_store *counting_store(void)
{
	wstore_backend *b = NULL;
	wstore_store *s = NULL;

	if (wstore_backend_mem_new(&b, 0) < 0)
		return NULL;
	real_get = b->get;
	real_get_range = b->get_range;
	b->get = count_get;
	if (b->get_range)
		b->get_range = count_get_range;
	b->open_fd = NULL;
	if (wstore_open_backend(&s, b) < 0) {
		b->free(b);
		return NULL;
	}
	return s;
}

/* ---- files ----------------------------------------------------------------
 */

static int same_file(const char *dir, const char *name, const void *data,
		     size_t n)
{
	char path[4096];

	PATHF(path, "%s/%s", dir, name);
	return unit_same_file(path, data, n);
}

/* The partial files in dir: how many, and the name and size of one. */
static int partials(const char *dir, char *name, off_t *size)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct stat st;
	char path[4096];
	int n = 0;

	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, WSTORE__PART_TAG,
			    strlen(WSTORE__PART_TAG)) != 0)
			continue;
		n++;
		if (name)
			snprintf(name, 256, "%s", de->d_name);
		PATHF(path, "%s/%s", dir, de->d_name);
		if (size && stat(path, &st) == 0)
			*size = st.st_size;
	}
	if (d)
		closedir(d);
	return n;
}

struct src {
	char *dir;
	char big[BIG];
};

static void make_src(struct src *s, unsigned seed)
{
	s->dir = unit_tmpdir();
	for (size_t i = 0; i < BIG; i++)
		s->big[i] = (char)((i * 131 + seed * 7 + i / 97) & 255);
	unit_spit(s->dir, "big.bin", s->big, BIG);
	unit_spit(s->dir, "config.json", "{\"a\":1}\n", 8);
}

static int import(wstore_store *st, const struct src *s)
{
	wstore_import_options o = WSTORE_IMPORT_OPTIONS_INIT;
	int rc;

	o.checkpoint_id = "ck";
	o.model_id = "test/model";
	o.source = s->dir;
	o.chunk_size = CS;
	o.jobs = 1;
	rc = wstore_import(st, &o);
	CHECK_EQ_INT(rc, 0);
	return rc;
}

static int equals_src(const char *dest, const struct src *s)
{
	return same_file(dest, "big.bin", s->big, BIG) &&
	       same_file(dest, "config.json", "{\"a\":1}\n", 8);
}

/* ---- pulls ----------------------------------------------------------------
 */

struct prog {
	int calls, cancel_at;
};

static int on_progress(uint64_t done, uint64_t total, const char *path,
		       void *ctx)
{
	struct prog *p = ctx;

	(void)done;
	(void)total;
	(void)path;
	return p->cancel_at && ++p->calls >= p->cancel_at;
}

/* Pull ck into dest; *reads gets the chunk reads it made. */
static int pull(wstore_store *s, const char *dest, int force, int cancel_at,
		unsigned long *reads)
{
	wstore_pull_options o = WSTORE_PULL_OPTIONS_INIT;
	struct prog pr = { 0, cancel_at };
	unsigned long before = chunk_reads;
	int rc;

	o.force = force;
	o.jobs = 1;
	o.progress = on_progress;
	o.progress_ctx = &pr;
	rc = wstore_pull(s, "ck", dest, &o);
	if (reads)
		*reads = chunk_reads - before;
	return rc;
}

/* Cancel a pull of ck into dest after a few chunks of big.bin (pulled
 * first: largest first); 0 when one partial, shorter than the file, is
 * left. */
static int cancel_midway(wstore_store *s, const char *dest)
{
	off_t size = -1;

	CHECK_EQ_INT(pull(s, dest, 0, 5, NULL), WSTORE_ECANCELED);
	CHECK_EQ_INT(partials(dest, NULL, &size), 1);
	CHECK(size >= (off_t)CS && size < (off_t)BIG);
	CHECK(same_file(dest, "big.bin", "", 0) == 0);
	return partials(dest, NULL, NULL) == 1 ? 0 : -1;
}

void test_pull_partial_resume(void)
{
	char *tmp = unit_tmpdir(), dest[4096], full[4096], name[256];
	char path[4096];
	unsigned long whole = 0, resumed = 0;
	wstore_store *s = counting_store();
	struct src src;

	make_src(&src, 1);
	if (!s || import(s, &src) < 0)
		goto out;
	PATHF(full, "%s/full", tmp);
	CHECK_EQ_INT(pull(s, full, 0, 0, &whole), 0);
	CHECK(equals_src(full, &src));
	CHECK(whole >= BIG / CS);

	/* interrupted, then resumed: fewer chunk reads, same tree */
	PATHF(dest, "%s/dest", tmp);
	if (cancel_midway(s, dest) < 0)
		goto out;
	CHECK_EQ_INT(pull(s, dest, 0, 0, &resumed), 0);
	CHECK(equals_src(dest, &src));
	CHECK(resumed < whole);
	CHECK(resumed > 0);
	CHECK_EQ_INT(partials(dest, NULL, NULL), 0);

	/* the kept prefix is hashed again: a damaged one costs a whole
	 * fetch, never a wrong file */
	PATHF(dest, "%s/damaged", tmp);
	if (cancel_midway(s, dest) < 0)
		goto out;
	partials(dest, name, NULL);
	PATHF(path, "%s/%s", dest, name);
	FILE *fp = fopen(path, "r+b");

	CHECK(fp != NULL);
	if (fp) {
		fputc('!', fp);
		fclose(fp);
	}
	CHECK_EQ_INT(pull(s, dest, 0, 0, NULL), 0);
	CHECK(equals_src(dest, &src));
	CHECK_EQ_INT(partials(dest, NULL, NULL), 0);

	/* --force discards the partial: the whole file again */
	PATHF(dest, "%s/force", tmp);
	if (cancel_midway(s, dest) < 0)
		goto out;
	CHECK_EQ_INT(pull(s, dest, 1, 0, &resumed), 0);
	CHECK(equals_src(dest, &src));
	CHECK_EQ_INT(resumed, whole);
	CHECK_EQ_INT(partials(dest, NULL, NULL), 0);
out:
	wstore_free(s);
	unit_rmtree(src.dir);
	free(src.dir);
	unit_rmtree(tmp);
	free(tmp);
}

void test_pull_partial_reimport(void)
{
	char *tmp = unit_tmpdir(), dest[4096], full[4096];
	unsigned long whole = 0, again = 0;
	wstore_store *s = counting_store();
	struct src a, b;

	make_src(&a, 1);
	make_src(&b, 2);
	if (!s || import(s, &a) < 0)
		goto out;
	PATHF(dest, "%s/dest", tmp);
	if (cancel_midway(s, dest) < 0)
		goto out;
	/* the same id imported again, with other bytes: the partial is of
	 * another import and is never used */
	CHECK_EQ_INT(wstore_delete(s, "ck"), 0);
	if (import(s, &b) < 0)
		goto out;
	PATHF(full, "%s/full", tmp);
	CHECK_EQ_INT(pull(s, full, 0, 0, &whole), 0);
	CHECK_EQ_INT(pull(s, dest, 0, 0, &again), 0);
	CHECK(equals_src(dest, &b));
	CHECK_EQ_INT(again, whole);
	CHECK_EQ_INT(partials(dest, NULL, NULL), 0);

	/* the same bytes imported again: still another import */
	PATHF(dest, "%s/same", tmp);
	if (cancel_midway(s, dest) < 0)
		goto out;
	CHECK_EQ_INT(wstore_delete(s, "ck"), 0);
	if (import(s, &b) < 0)
		goto out;
	CHECK_EQ_INT(pull(s, dest, 0, 0, &again), 0);
	CHECK(equals_src(dest, &b));
	CHECK_EQ_INT(again, whole);
	CHECK_EQ_INT(partials(dest, NULL, NULL), 0);
out:
	wstore_free(s);
	unit_rmtree(a.dir);
	free(a.dir);
	unit_rmtree(b.dir);
	free(b.dir);
	unit_rmtree(tmp);
	free(tmp);
}

/* A partial of a live pull in another process is left alone; once that
 * process is gone, a partial of a file no longer wanted is removed. */
void test_pull_partial_owners(void)
{
	char *tmp = unit_tmpdir(), dest[4096], name[256], other[256];
	char tag[WSTORE__OWNER_TAG_LEN + 1];
	wstore_store *s = counting_store();
	int go[2] = { -1, -1 }, ready[2] = { -1, -1 }, status = 0;
	struct src src;
	pid_t pid, gone;
	char c = 0;

	make_src(&src, 3);
	if (!s || import(s, &src) < 0 || pipe(go) < 0 || pipe(ready) < 0)
		goto out;
	PATHF(dest, "%s/dest", tmp);
	pid = fork();
	if (pid == 0) {
		/* a pull that stops midway and whose process lives on */
		int rc = pull(s, dest, 0, 5, NULL);

		c = rc == WSTORE_ECANCELED ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) < 0)
			_exit(2);
		_exit(0);
	}
	CHECK(pid > 0);
	if (pid < 0)
		goto out;
	CHECK(read(ready[0], &c, 1) == 1 && c == 'y');
	CHECK_EQ_INT(partials(dest, name, NULL), 1);
	/* its owner runs: a second pull makes its own and leaves it */
	CHECK_EQ_INT(pull(s, dest, 0, 0, NULL), 0);
	CHECK(equals_src(dest, &src));
	CHECK_EQ_INT(partials(dest, other, NULL), 1);
	CHECK_EQ_INT(strcmp(name, other), 0);
	/* --force leaves it too: a live writer's */
	CHECK_EQ_INT(pull(s, dest, 1, 0, NULL), 0);
	CHECK_EQ_INT(partials(dest, NULL, NULL), 1);
	/* gone: the file is in place, its partial goes */
	CHECK(write(go[1], &c, 1) == 1);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0);
	CHECK_EQ_INT(pull(s, dest, 0, 0, NULL), 0);
	CHECK_EQ_INT(partials(dest, NULL, NULL), 0);

	/* a dead writer's partial of a file of no checkpoint pulled here */
	gone = fork();
	if (gone == 0)
		_exit(0);
	CHECK(waitpid(gone, &status, 0) == gone);
	wstore__owner_tag(tag);
	snprintf(name, sizeof(name),
		 WSTORE__PART_TAG "0123456789abcdef0123456789abcdef-%ld-%s-0",
		 (long)gone, tag);
	unit_spit(dest, name, "stale", 5);
	CHECK_EQ_INT(partials(dest, NULL, NULL), 1);
	CHECK_EQ_INT(
		unlink(strcat(strcat(strcpy(other, dest), "/"), "big.bin")), 0);
	CHECK_EQ_INT(pull(s, dest, 0, 0, NULL), 0);
	CHECK(equals_src(dest, &src));
	CHECK_EQ_INT(partials(dest, NULL, NULL), 0);
out:
	for (int i = 0; i < 2; i++) {
		if (go[i] >= 0)
			close(go[i]);
		if (ready[i] >= 0)
			close(ready[i]);
	}
	wstore_free(s);
	unit_rmtree(src.dir);
	free(src.dir);
	unit_rmtree(tmp);
	free(tmp);
}

/* A failure that is not a cancel (here a store error at the last chunk)
 * leaves no partial; a partial kept by a cancel and then met by such a
 * failure goes too. */
void test_pull_partial_failure(void)
{
	char *tmp = unit_tmpdir(), dest[4096];
	wstore_store *s = counting_store();
	struct src src;

	make_src(&src, 4);
	if (!s || import(s, &src) < 0)
		goto out;
	PATHF(dest, "%s/dest", tmp);
	failing = "/chunks/00000009";
	CHECK(pull(s, dest, 0, 0, NULL) < 0);
	CHECK_EQ_INT(partials(dest, NULL, NULL), 0);
	CHECK(same_file(dest, "big.bin", "", 0) == 0);
	failing = "";
	if (cancel_midway(s, dest) < 0)
		goto out;
	failing = "/chunks/00000009";
	CHECK(pull(s, dest, 0, 0, NULL) < 0);
	CHECK_EQ_INT(partials(dest, NULL, NULL), 0);
	failing = "";
	CHECK_EQ_INT(pull(s, dest, 0, 0, NULL), 0);
	CHECK(equals_src(dest, &src));
out:
	failing = "";
	wstore_free(s);
	unit_rmtree(src.dir);
	free(src.dir);
	unit_rmtree(tmp);
	free(tmp);
}
