/*
 * test_whole.c - the file store's two layouts of a checkpoint file's
 * chunks side by side in one store (src/lib/backends/file_whole.c): old
 * chunk files written as plain puts, new data files written through
 * begin_file/commit_file; get, get_range, size, list, remove, open_fd and
 * open_range of chunk keys on both; the refusals (two data files, a
 * symlink); abort and a failed commit leave nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/helpers.h"
#include "unit.h"

#define OLD "weight/models/ck/files/aaaa"
#define NEW "weight/models/ck/files/bbbb"

static void join(char *out, size_t cap, const char *a, const char *b)
{
	if ((size_t)snprintf(out, cap, "%s/%s", a, b) >= cap)
		abort();
}

/* A data file of n bytes (byte i is 'a' + i % 26) for file_key, chunk
 * size cs, through the write callbacks: the commit's result. */
static int write_data(wstore_backend *b, const char *file_key, uint64_t cs,
		      size_t n)
{
	char *buf = malloc(n ? n : 1);
	void *h = NULL;
	int fd = -1, rc;

	for (size_t i = 0; i < n; i++)
		buf[i] = (char)('a' + i % 26);
	rc = b->begin_file(b, file_key, cs, &fd, &h);
	if (rc == 0 && pwrite(fd, buf, n, 0) != (ssize_t)n)
		rc = -EIO;
	if (rc == 0)
		rc = b->commit_file(b, h, n);
	else if (h)
		b->abort_file(b, h);
	free(buf);
	return rc;
}

struct keys {
	char k[32][128];
	int n;
};

static int collect(const char *key, void *ctx)
{
	struct keys *ks = ctx;

	if (ks->n < 32)
		snprintf(ks->k[ks->n++], sizeof(ks->k[0]), "%s", key);
	return 0;
}

static int has(const struct keys *ks, const char *key)
{
	int c = 0;

	for (int i = 0; i < ks->n; i++)
		c += !strcmp(ks->k[i], key);
	return c;
}

static int count_dot(const char *dir)
{
	char cmd[4200];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "find '%s' -name '.tmp-*' | wc -l", dir);
	if ((p = popen(cmd, "r"))) {
		if (fscanf(p, "%d", &n) != 1)
			n = -1;
		pclose(p);
	}
	return n;
}

static void check_reads(wstore_backend *b)
{
	char buf[64];
	size_t n = 0;
	uint64_t sz = 0, off = 9;
	int fd = -1;

	/* old layout: chunk 1 of "0123456789" with chunk size 4 */
	CHECK_EQ_INT(b->get(b, OLD "/chunks/00000001", buf, sizeof(buf), &n),
		     0);
	CHECK(n == 4 && !memcmp(buf, "4567", 4));
	/* new layout: 10 bytes a..j, chunk size 4: chunk 2 is "ij" */
	CHECK_EQ_INT(b->get(b, NEW "/chunks/00000002", buf, sizeof(buf), &n),
		     0);
	CHECK(n == 2 && !memcmp(buf, "ij", 2));
	CHECK_EQ_INT(b->get(b, NEW "/chunks/00000001", buf, 3, &n),
		     WSTORE_ERANGE);
	CHECK_EQ_INT(n, 4);
	CHECK_EQ_INT(b->get_range(b, NEW "/chunks/00000001", 1, buf, 10, &n),
		     0);
	CHECK(n == 3 && !memcmp(buf, "fgh", 3));
	CHECK_EQ_INT(b->get_range(b, NEW "/chunks/00000001", 4, buf, 10, &n),
		     0);
	CHECK_EQ_INT(n, 0);
	CHECK_EQ_INT(b->size(b, NEW "/chunks/00000000", &sz), 0);
	CHECK_EQ_INT(sz, 4);
	CHECK_EQ_INT(b->size(b, NEW "/chunks/00000002", &sz), 0);
	CHECK_EQ_INT(sz, 2);
	CHECK_EQ_INT(b->size(b, OLD "/chunks/00000002", &sz), 0);
	CHECK_EQ_INT(sz, 2);
	/* past the end of the data file: a missing key */
	CHECK_EQ_INT(b->size(b, NEW "/chunks/00000003", &sz), WSTORE_ENOTFOUND);
	CHECK_EQ_INT(b->get(b, NEW "/chunks/00000003", buf, sizeof(buf), &n),
		     WSTORE_ENOTFOUND);
	/* open_range: the data file at i*cs; the chunk file at 0 */
	CHECK_EQ_INT(b->open_range(b, NEW "/chunks/00000002", &fd, &off), 0);
	CHECK_EQ_INT(off, 8);
	CHECK(fd >= 0 && pread(fd, buf, 10, 0) == 10 &&
	      !memcmp(buf, "abcdefghij", 10));
	if (fd >= 0)
		close(fd);
	CHECK_EQ_INT(b->open_range(b, OLD "/chunks/00000002", &fd, &off), 0);
	CHECK_EQ_INT(off, 0);
	CHECK(fd >= 0 && pread(fd, buf, 10, 0) == 2 && !memcmp(buf, "89", 2));
	if (fd >= 0)
		close(fd);
	/* open_fd: the whole value only */
	CHECK_EQ_INT(b->open_fd(b, NEW "/chunks/00000001", &fd),
		     WSTORE_EUNSUPPORTED);
	CHECK(fd == -1);
	CHECK_EQ_INT(b->open_fd(b, OLD "/chunks/00000001", &fd), 0);
	if (fd >= 0)
		close(fd);
}

/* list: a data file reports its chunk keys, never itself. */
static void check_list(wstore_backend *b)
{
	struct keys ks = { .n = 0 };

	CHECK_EQ_INT(b->list(b, "weight/models/ck/", collect, &ks), 0);
	CHECK_EQ_INT(ks.n, 6);
	CHECK(has(&ks, NEW "/chunks/00000000") == 1);
	CHECK(has(&ks, NEW "/chunks/00000002") == 1);
	CHECK(has(&ks, OLD "/chunks/00000002") == 1);
	ks.n = 0;
	CHECK_EQ_INT(b->list(b, NEW "/chunks/", collect, &ks), 0);
	CHECK_EQ_INT(ks.n, 3);
	ks.n = 0;
	CHECK_EQ_INT(b->list(b, NEW "/chunks/00000001", collect, &ks), 0);
	CHECK_EQ_INT(ks.n, 1);
	CHECK(has(&ks, NEW "/chunks/00000001") == 1);
	ks.n = 0;
	CHECK_EQ_INT(b->list(b, NEW "/", collect, &ks), 0);
	CHECK_EQ_INT(ks.n, 3);
}

/* Both layouts in one <ph> (a migration half done): the data file is
 * read, listed once, and a remove takes both. */
static void check_both(wstore_backend *b)
{
	struct keys ks = { .n = 0 };
	char buf[16];
	size_t n = 0;

	CHECK_EQ_INT(b->put(b, NEW "/chunks/00000000", "XXXX", 4), 0);
	CHECK_EQ_INT(b->get(b, NEW "/chunks/00000000", buf, sizeof(buf), &n),
		     0);
	CHECK(n == 4 && !memcmp(buf, "abcd", 4));
	CHECK_EQ_INT(b->list(b, NEW "/", collect, &ks), 0);
	CHECK_EQ_INT(ks.n, 3);
	CHECK_EQ_INT(has(&ks, NEW "/chunks/00000000"), 1);
}

static void check_remove(wstore_backend *b, const char *root)
{
	char path[4096], buf[16];
	struct stat st;
	size_t n;

	/* one chunk of a data file takes the whole data file */
	CHECK_EQ_INT(b->remove(b, NEW "/chunks/00000001", 1), 0);
	CHECK_EQ_INT(b->get(b, NEW "/chunks/00000002", buf, sizeof(buf), &n),
		     WSTORE_ENOTFOUND);
	/* the chunk file check_both put is no longer hidden; a remove of
	 * its key takes it */
	CHECK_EQ_INT(b->get(b, NEW "/chunks/00000000", buf, sizeof(buf), &n),
		     0);
	CHECK(n == 4 && !memcmp(buf, "XXXX", 4));
	CHECK_EQ_INT(b->remove(b, NEW "/chunks/00000000", 1), 0);
	CHECK_EQ_INT(b->remove(b, NEW "/chunks/00000002", 1), WSTORE_ENOTFOUND);
	join(path, sizeof(path), root, NEW);
	CHECK(stat(path, &st) < 0 && errno == ENOENT);
	/* the old layout: one chunk file at a time */
	CHECK_EQ_INT(b->remove(b, OLD "/chunks/00000000", 1), 0);
	CHECK_EQ_INT(b->get(b, OLD "/chunks/00000001", buf, sizeof(buf), &n),
		     0);
	CHECK_EQ_INT(b->remove(b, OLD "/chunks/00000001", 1), 0);
	CHECK_EQ_INT(b->remove(b, OLD "/chunks/00000002", 1), 0);
	join(path, sizeof(path), root, OLD);
	CHECK(stat(path, &st) < 0 && errno == ENOENT);
}

/* Refusals: two data files; a symlink as data file or on the way. */
static void check_refusals(wstore_backend *b, const char *root)
{
	char path[4096], other[4096], buf[16];
	uint64_t off;
	size_t n;
	int fd = -1;

	CHECK_EQ_INT(write_data(b, NEW, 4, 10), 0);
	join(path, sizeof(path), root, NEW "/data-4");
	join(other, sizeof(other), root, NEW "/data-8");
	CHECK_EQ_INT(link(path, other), 0);
	CHECK_EQ_INT(b->get(b, NEW "/chunks/00000000", buf, sizeof(buf), &n),
		     WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), "two data files") != NULL);
	CHECK(strstr(wstore_last_error(), NEW) != NULL);
	/* a new commit leaves one data file */
	CHECK_EQ_INT(write_data(b, NEW, 4, 10), 0);
	CHECK(access(other, F_OK) < 0);
	/* a symlink in place of the data file is no value, and a remove
	 * takes the link, not its target */
	CHECK_EQ_INT(unlink(path), 0);
	join(other, sizeof(other), root, "target");
	CHECK_EQ_INT(b->put(b, "target", "0123456789", 10), 0);
	CHECK_EQ_INT(symlink(other, path), 0);
	CHECK_EQ_INT(b->get(b, NEW "/chunks/00000000", buf, sizeof(buf), &n),
		     WSTORE_ENOTFOUND);
	CHECK_EQ_INT(b->open_range(b, NEW "/chunks/00000000", &fd, &off),
		     WSTORE_ENOTFOUND);
	CHECK_EQ_INT(b->remove(b, NEW "/chunks/00000000", 1), 0);
	CHECK_EQ_INT(b->get(b, "target", buf, sizeof(buf), &n), 0);
	CHECK_EQ_INT(n, 10);
	/* a symlinked <ph> directory is never entered */
	CHECK_EQ_INT(b->put(b, "weight/models/ck/files/cccc", "x", 1), 0);
	join(path, sizeof(path), root, NEW);
	join(other, sizeof(other), root, "elsewhere");
	CHECK_EQ_INT(mkdir(other, 0755), 0);
	{
		char d4[4200];

		join(d4, sizeof(d4), other, "data-4");
		fd = open(d4, O_WRONLY | O_CREAT, 0644);
		CHECK(fd >= 0 && write(fd, "abcd", 4) == 4);
		if (fd >= 0)
			close(fd);
		CHECK_EQ_INT(symlink(other, path), 0);
		CHECK_EQ_INT(
			b->get(b, NEW "/chunks/00000000", buf, sizeof(buf), &n),
			WSTORE_ENOTFOUND);
		CHECK_EQ_INT(b->remove(b, NEW "/chunks/00000000", 1),
			     WSTORE_ENOTFOUND);
		CHECK(access(d4, F_OK) == 0);
		/* and nothing is written through it */
		CHECK(write_data(b, NEW, 4, 10) < 0);
		CHECK(strstr(wstore_last_error(), "symlink") != NULL);
		CHECK_EQ_INT(unlink(path), 0);
	}
}

/* abort and a short commit leave no file, temp or published. */
static void check_abort(wstore_backend *b, const char *root)
{
	char buf[16];
	size_t n;
	void *h = NULL;
	int fd = -1;

	CHECK_EQ_INT(b->begin_file(b, NEW, 4, &fd, &h), 0);
	CHECK(fd >= 0 && pwrite(fd, "abcdefgh", 8, 0) == 8);
	CHECK_EQ_INT(count_dot(root), 1);
	b->abort_file(b, h);
	CHECK_EQ_INT(count_dot(root), 0);
	CHECK_EQ_INT(b->get(b, NEW "/chunks/00000000", buf, sizeof(buf), &n),
		     WSTORE_ENOTFOUND);
	CHECK_EQ_INT(b->begin_file(b, NEW, 4, &fd, &h), 0);
	CHECK(fd >= 0 && pwrite(fd, "abcdefgh", 8, 0) == 8);
	CHECK_EQ_INT(b->commit_file(b, h, 9), -EIO);
	CHECK(strstr(wstore_last_error(), "expected 9") != NULL);
	CHECK_EQ_INT(count_dot(root), 0);
	CHECK_EQ_INT(b->get(b, NEW "/chunks/00000000", buf, sizeof(buf), &n),
		     WSTORE_ENOTFOUND);
	CHECK_EQ_INT(b->begin_file(b, "bad//key", 4, &fd, &h), WSTORE_EINVAL);
	CHECK_EQ_INT(b->begin_file(b, NEW, 0, &fd, &h), WSTORE_EINVAL);
}

void test_whole_layouts(void)
{
	char *dir = unit_tmpdir();
	wstore_backend *b = NULL;

	CHECK_EQ_INT(wstore_backend_file_new(&b, dir), 0);
	if (!b) {
		free(dir);
		return;
	}
	CHECK(b->open_range && b->begin_file && b->commit_file &&
	      b->abort_file);
	/* old layout as an older wstore wrote it: one file per chunk */
	CHECK_EQ_INT(b->put(b, OLD "/chunks/00000000", "0123", 4), 0);
	CHECK_EQ_INT(b->put(b, OLD "/chunks/00000001", "4567", 4), 0);
	CHECK_EQ_INT(b->put(b, OLD "/chunks/00000002", "89", 2), 0);
	CHECK_EQ_INT(write_data(b, NEW, 4, 10), 0);
	{
		char path[4096];

		join(path, sizeof(path), dir, NEW "/data-4");
		CHECK(access(path, F_OK) == 0);
	}
	CHECK_EQ_INT(count_dot(dir), 0);
	check_reads(b);
	check_list(b);
	check_both(b);
	check_remove(b, dir);
	check_refusals(b, dir);
	check_abort(b, dir);
	b->free(b);
	unit_rmtree(dir);
	free(dir);
}
