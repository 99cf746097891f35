/*
 * test_read.c - the read API on a stored checkpoint: range reads across
 * chunks, tensor reads, concurrent readers, records without a chunk size,
 * damaged chunks, the chunk files of the file store; and the chunk size
 * an import records by default.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <wstore/read.h>
#include <wstore/sys/backend.h>

#include "names.h"
#include "fixture.h"
#include "unit.h"

/* ---- read API ------------------------------------------------------------ */

static void check_preads(wstore_file *f, const char *data, size_t n)
{
	static const size_t offs[] = { 0, 1, 63, 64, 65, 127, 128, 200 };
	static const size_t lens_[] = { 0, 1, 2, 63, 64, 65, 129, 1000 };
	char buf[2048];
	int bad = 0;

	for (size_t i = 0; i < sizeof(offs) / sizeof(*offs); i++) {
		for (size_t j = 0; j < sizeof(lens_) / sizeof(*lens_); j++) {
			size_t got = 99, want;
			int rc = wstore_file_pread(f, buf, lens_[j], offs[i],
						   &got);

			want = offs[i] >= n ? 0 : n - offs[i];
			want = want < lens_[j] ? want : lens_[j];
			bad += rc != 0 || got != want ||
			       (want && memcmp(buf, data + offs[i], want));
		}
	}
	CHECK_EQ_INT(bad, 0);
	/* the whole file, and past its end */
	{
		char *all = malloc(n + 10);
		size_t got = 0;

		CHECK_EQ_INT(wstore_file_pread(f, all, n + 10, 0, &got), 0);
		CHECK(got == n && memcmp(all, data, n) == 0);
		CHECK_EQ_INT(wstore_file_pread(f, all, 10, n + 5, &got), 0);
		CHECK_EQ_INT(got, 0);
		free(all);
	}
}

static void check_tensors(wstore_file *f, const char *data)
{
	wstore_safetensors *ws = NULL;
	wstore_tensor_info ti;
	const char *names[FIXTURE_NT + 1];
	void *bufs[FIXTURE_NT + 1];
	uint64_t caps[FIXTURE_NT + 1];
	char name[8];
	int bad = 0;

	CHECK_EQ_INT(wstore_safetensors_open(&ws, f), 0);
	if (!ws)
		return;
	CHECK_EQ_INT(wstore_safetensors_count(ws), FIXTURE_NT + 1);
	CHECK_STR(wstore_safetensors_metadata(ws, "format"), "pt");
	CHECK(wstore_safetensors_metadata(ws, "nope") == NULL);
	CHECK_EQ_INT(wstore_safetensors_tensor(&ti, ws, FIXTURE_NT + 1),
		     WSTORE_ERANGE);
	CHECK_EQ_INT(wstore_safetensors_find(ws, "w"), FIXTURE_NT);
	CHECK_EQ_INT(wstore_safetensors_tensor(&ti, ws, FIXTURE_NT), 0);
	CHECK_STR(ti.name, "w");
	CHECK_STR(ti.dtype, "F32");
	CHECK(ti.ndim == 2 && ti.shape[0] == 4 && ti.shape[1] == 5);
	CHECK_EQ_INT(ti.nbytes, 80);
	/* read every tensor in one batch, in reverse order */
	for (size_t i = 0; i <= FIXTURE_NT; i++) {
		size_t k = FIXTURE_NT - i;
		int64_t idx;

		PATHF(name, "t%02zu", k);
		names[i] = k == FIXTURE_NT ? "w" : strdup(name);
		idx = wstore_safetensors_find(ws, names[i]);
		wstore_safetensors_tensor(&ti, ws, (size_t)idx);
		caps[i] = ti.nbytes;
		bufs[i] = malloc(ti.nbytes + 1);
	}
	CHECK_EQ_INT(
		wstore_safetensors_read(ws, names, bufs, caps, FIXTURE_NT + 1),
		0);
	for (size_t i = 0; i <= FIXTURE_NT; i++) {
		int64_t k = wstore_safetensors_find(ws, names[i]);

		wstore_safetensors_tensor(&ti, ws, (size_t)k);
		bad += memcmp(bufs[i], data + ti.offset, ti.nbytes) != 0;
	}
	CHECK_EQ_INT(bad, 0);
	/* errors: unknown name, small buffer */
	names[0] = "missing";
	CHECK_EQ_INT(wstore_safetensors_read(ws, names, bufs, caps, 1),
		     WSTORE_ENOTFOUND);
	names[0] = "w";
	caps[0] = 79;
	CHECK_EQ_INT(wstore_safetensors_read(ws, names, bufs, caps, 1),
		     WSTORE_ERANGE);
	for (size_t i = 0; i <= FIXTURE_NT; i++) {
		if (i > 0)
			free((char *)names[i]);
		free(bufs[i]);
	}
	wstore_safetensors_free(ws);
}

static void read_api(int no_range)
{
	wstore_file_summary_info sum;
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	struct fixture fx;

	if (fixture_init(&fx, no_range, 64) < 0)
		goto out;
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, fx.s, "nope"),
		     WSTORE_ENOTFOUND);
	CHECK(ck == NULL);
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, fx.s, "ck"), 0);
	if (!ck)
		goto out;
	CHECK_EQ_INT(wstore_manifest_file_count(wstore_checkpoint_manifest(ck)),
		     5);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "nope.bin"), WSTORE_ENOTFOUND);
	CHECK(strstr(wstore_last_error(), "'nope.bin'") != NULL);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "model.safetensors"), 0);
	CHECK_EQ_INT(wstore_file_size(f), fx.shard_n);
	check_preads(f, fx.shard, fx.shard_n);
	check_tensors(f, fx.shard);
	CHECK_EQ_INT(wstore_file_summary(&sum, f), 0);
	CHECK_STR(sum.format, "safetensors");
	CHECK_EQ_INT(sum.tensor_count, FIXTURE_NT + 1);
	CHECK_EQ_INT(sum.param_count, 592 + 20);
	CHECK_STR(sum.dtypes, "F32,U8");
	wstore_file_free(f);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "config.json"), 0);
	CHECK_EQ_INT(wstore_file_summary(&sum, f), 0);
	CHECK_STR(sum.format, "other");
	wstore_file_free(f);
	CHECK_EQ_INT(wstore_check_structure(ck, NULL, NULL), 0);
out:
	wstore_checkpoint_free(ck);
	fixture_done(&fx);
}

void test_read_api(void)
{
	read_api(0);
	read_api(1);
}

struct reader {
	wstore_file *f;
	const char *data;
	size_t n;
	unsigned seed;
	int bad;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	char buf[512];

	for (int i = 0; i < 2000; i++) {
		size_t off = (size_t)rand_r(&r->seed) % r->n;
		size_t len = (size_t)rand_r(&r->seed) % sizeof(buf), got = 0;
		size_t want = off + len > r->n ? r->n - off : len;

		if (wstore_file_pread(r->f, buf, len, off, &got) != 0 ||
		    got != want || memcmp(buf, r->data + off, want) != 0)
			r->bad++;
	}
	return NULL;
}

static void concurrent(int no_range)
{
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	struct reader r[4];
	pthread_t tid[4];
	struct fixture fx;

	if (fixture_init(&fx, no_range, 48) < 0)
		goto out;
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, fx.s, "ck"), 0);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "model.safetensors"), 0);
	if (!f)
		goto out;
	for (int i = 0; i < 4; i++) {
		r[i] = (struct reader){ f, fx.shard, fx.shard_n,
					(unsigned)i + 1, 0 };
		pthread_create(&tid[i], NULL, reader_main, &r[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(tid[i], NULL);
		CHECK_EQ_INT(r[i].bad, 0);
	}
out:
	wstore_file_free(f);
	wstore_checkpoint_free(ck);
	fixture_done(&fx);
}

/* An import without a chunk size uses 64 MiB in every file record: the
 * size SGLang's mooncake:// connector assumes unless told otherwise. */
void test_import_default_chunk_size(void)
{
	struct fixture fx;
	wstore_manifest *m = NULL;

	if (fixture_init(&fx, 0, 0) == 0 &&
	    wstore_manifest_read(&m, fx.s, "ck") == 0) {
		size_t n = wstore_manifest_file_count(m);

		CHECK(n > 1);
		for (size_t i = 0; i < n; i++) {
			wstore_file_info f;

			CHECK_EQ_INT(wstore_manifest_file(&f, m, i), 0);
			CHECK_EQ_INT(f.chunk_size, 64ull << 20);
		}
	} else {
		CHECK(!"import or manifest read failed");
	}
	wstore_manifest_free(m);
	fixture_done(&fx);
}

void test_read_concurrent(void)
{
	concurrent(0);
	concurrent(1);
}

void test_read_legacy(void)
{
	static const char data[] = "abcdefghijklmnopqrstuvwxyz";
	wstore_store *s = unit_mem_store(0, 0);
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	char buf[32];
	size_t got = 0;

	fixture_put_by_hand(s, "multi", "a.bin", data, 26, 10, 0);
	fixture_put_by_hand(s, "single", "a.bin", data, 26, 26, 0);
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "multi"), 0);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "a.bin"), 0);
	CHECK_EQ_INT(wstore_file_pread(f, buf, 5, 12, &got),
		     WSTORE_EUNSUPPORTED);
	CHECK(strstr(wstore_last_error(), "chunk_size") != NULL);
	wstore_file_free(f);
	wstore_checkpoint_free(ck);
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "single"), 0);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "a.bin"), 0);
	CHECK_EQ_INT(wstore_file_pread(f, buf, 5, 12, &got), 0);
	CHECK(got == 5 && memcmp(buf, "mnopq", 5) == 0);
	wstore_file_free(f);
	wstore_checkpoint_free(ck);
	wstore_free(s);
}

/* Damaged chunks: short, long, missing (an empty value on an
 * EMPTY_MISSING store). */
static void damaged(int no_range, unsigned flags)
{
	static const char data[] = "0123456789abcdefghijklmnopqrstuv";
	wstore_store *s = unit_mem_store(no_range, flags);
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	char key[WSTORE__KEY_MAX], buf[64];
	size_t got;

	fixture_put_by_hand(s, "d", "w.bin", data, 32, 8, 8);
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "d"), 0);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "w.bin"), 0);
	fixture_chunk_key(key, "d", "w.bin", 1);
	fixture_put_raw(s, key, "89abcde", 7);
	CHECK_EQ_INT(wstore_file_pread(f, buf, 32, 0, &got), WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), key) != NULL);
	CHECK(strstr(wstore_last_error(), "'w.bin'") != NULL);
	fixture_put_raw(s, key, "89abcdefX", 9);
	CHECK_EQ_INT(wstore_file_pread(f, buf, 32, 0, &got), WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), key) != NULL);
	fixture_put_raw(s, key, "", 0);
	CHECK_EQ_INT(wstore_file_pread(f, buf, 4, 9, &got), WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), "missing") != NULL ||
	      strstr(wstore_last_error(), key) != NULL);
	/* other chunks still read */
	CHECK_EQ_INT(wstore_file_pread(f, buf, 8, 16, &got), 0);
	CHECK(got == 8 && memcmp(buf, data + 16, 8) == 0);
	wstore_file_free(f);
	wstore_checkpoint_free(ck);
	wstore_free(s);
}

void test_read_damaged(void)
{
	damaged(0, 0);
	damaged(1, 0);
	damaged(1, WSTORE_BACKEND_EMPTY_MISSING);
}

/* Every offset of f through wstore_file_chunk_fd: the bytes at fd_off
 * match the shard, and the length is to the end of the chunk (chunk
 * files) or of the whole file (data files, whole set); the fd is
 * read-only and close-on-exec.  The number of offsets that did not. */
static int chunk_fd_all(wstore_file *f, const char *shard, size_t n,
			uint64_t cs, int whole)
{
	char buf[4096];
	uint64_t fd_off;
	size_t len;
	int fd, bad = 0;

	for (uint64_t off = 0; f && off < n; off += (off % cs) ? 29 : 1) {
		size_t want = (size_t)((off / cs + 1) * cs < n
					       ? (off / cs + 1) * cs - off
					       : n - off);

		if (whole)
			want = n - off;
		if (wstore_file_chunk_fd(&fd, &fd_off, &len, f, off) != 0 ||
		    fd < 0 || fd_off != (whole ? off : off % cs) ||
		    len != want || len > sizeof(buf)) {
			bad++;
			continue;
		}
		if (pread(fd, buf, len, (off_t)fd_off) != (ssize_t)len ||
		    memcmp(buf, shard + off, len) != 0)
			bad++;
		if (fcntl(fd, F_GETFD) != FD_CLOEXEC ||
		    (fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDONLY)
			bad++;
		close(fd);
	}
	return bad;
}

/* wstore_file_chunk_fd on the file store's two layouts: a data file (the
 * rest of the whole file from fd_off == off), then, the same checkpoint
 * rewritten as chunk files, each chunk's own file (to the chunk's end);
 * EUNSUPPORTED on the mem store; ECORRUPT naming file and chunk for a
 * truncated data or chunk file. */
void test_read_chunk_fd(void)
{
	char *root = unit_tmpdir(), *src, *shard = NULL, key[WSTORE__KEY_MAX];
	char path[4096];
	const uint64_t cs = 64;
	wstore_backend *b = NULL;
	wstore_store *s = NULL;
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	struct fixture fx;
	size_t n = 0, len;
	uint64_t fd_off;
	int fd;

	src = fixture_source(&shard, &n);
	CHECK_EQ_INT(wstore_backend_file_new(&b, root), 0);
	CHECK_EQ_INT(wstore_open_backend(&s, b), 0);
	CHECK_EQ_INT(fixture_import(s, "ck", src, cs), 0);
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "ck"), 0);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "model.safetensors"), 0);
	CHECK(n > 3 * cs);
	CHECK_EQ_INT(chunk_fd_all(f, shard, n, cs, 1), 0);
	CHECK_EQ_INT(wstore_file_chunk_fd(&fd, &fd_off, &len, f, n),
		     WSTORE_EINVAL);
	CHECK_EQ_INT(fd, -1);
	/* a truncated data file: ECORRUPT naming the file */
	fixture_chunk_key(key, "ck", "model.safetensors", 0);
	PATHF(path, "%s/%.*s/data-%u", root, (int)(strlen(key) - 16), key,
	      (unsigned)cs);
	CHECK_EQ_INT(truncate(path, (off_t)n - 1), 0);
	CHECK_EQ_INT(wstore_file_chunk_fd(&fd, &fd_off, &len, f, cs + 3),
		     WSTORE_ECORRUPT);
	CHECK_EQ_INT(fd, -1);
	CHECK(strstr(wstore_last_error(), "'model.safetensors'") != NULL);
	CHECK_EQ_INT(truncate(path, (off_t)n), 0);
	{
		FILE *fp = fopen(path, "r+");

		CHECK(fp && fseek(fp, (long)n - 1, SEEK_SET) == 0 &&
		      fputc(shard[n - 1], fp) != EOF);
		if (fp)
			fclose(fp);
	}

	/* the old layout: one file per chunk */
	CHECK_EQ_INT(fixture_split_data_files(root), 4);
	CHECK_EQ_INT(chunk_fd_all(f, shard, n, cs, 0), 0);

	/* a truncated chunk file: ECORRUPT naming the file and the chunk */
	fixture_chunk_key(key, "ck", "model.safetensors", 1);
	PATHF(path, "%s/%s", root, key);
	CHECK_EQ_INT(truncate(path, (off_t)cs - 5), 0);
	CHECK_EQ_INT(wstore_file_chunk_fd(&fd, &fd_off, &len, f, cs + 3),
		     WSTORE_ECORRUPT);
	CHECK_EQ_INT(fd, -1);
	CHECK(strstr(wstore_last_error(), key) != NULL);
	CHECK(strstr(wstore_last_error(), "'model.safetensors'") != NULL);
	/* a missing one is corrupt too; other chunks still open */
	CHECK_EQ_INT(unlink(path), 0);
	CHECK_EQ_INT(wstore_file_chunk_fd(&fd, &fd_off, &len, f, cs),
		     WSTORE_ECORRUPT);
	CHECK_EQ_INT(wstore_file_chunk_fd(&fd, &fd_off, &len, f, 2 * cs), 0);
	if (fd >= 0)
		close(fd);
	wstore_file_free(f);
	wstore_checkpoint_free(ck);
	wstore_free(s);

	/* the mem store has no files to hand out */
	f = NULL;
	ck = NULL;
	if (fixture_init(&fx, 0, cs) == 0) {
		CHECK_EQ_INT(wstore_checkpoint_open(&ck, fx.s, "ck"), 0);
		CHECK_EQ_INT(wstore_file_open(&f, ck, "model.safetensors"), 0);
		CHECK_EQ_INT(wstore_file_chunk_fd(&fd, &fd_off, &len, f, 0),
			     WSTORE_EUNSUPPORTED);
		CHECK_EQ_INT(fd, -1);
		wstore_file_free(f);
		wstore_checkpoint_free(ck);
	}
	fixture_done(&fx);
	unit_rmtree(src);
	unit_rmtree(root);
	free(src);
	free(root);
	free(shard);
}
