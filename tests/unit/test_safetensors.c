/*
 * test_safetensors.c - the safetensors and GGUF parsers (data-driven
 * cases under tests/data/safetensors, see make.py there), the read API
 * (range reads across chunks, concurrent readers, legacy records, damaged
 * chunks, structure checks) and pull (hostile manifests, symlinks planted
 * in DEST, corrupt chunks, resume, cancel), all on the in-memory backend.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "digest.h"
#include "error.h"
#include "manifest.h"
#include "names.h"
#include "gguf.h"
#include "readv.h"
#include "safetensors.h"
#include "store.h"
#include "util.h"
#include "unit.h"
#include "../lib/child.h"

/* ---- helpers ------------------------------------------------------------- */

/* snprintf into an array, which must not truncate. */
#define PATHF(buf, ...)                                                        \
	do {                                                                   \
		if (snprintf(buf, sizeof(buf), __VA_ARGS__) >=                 \
		    (int)sizeof(buf))                                          \
			abort();                                               \
	} while (0)

static const char *data_dir(void)
{
	static const char *const cand[] = {
		"tests/data/safetensors",
		"../tests/data/safetensors",
		"../../tests/data/safetensors",
	};
	const char *env = getenv("WSTORE_TEST_DATA");
	static char buf[4096];

	if (env) {
		PATHF(buf, "%s/safetensors", env);
		return buf;
	}
	for (size_t i = 0; i < sizeof(cand) / sizeof(*cand); i++)
		if (access(cand[i], R_OK) == 0)
			return cand[i];
	return NULL;
}

static void spit(const char *dir, const char *name, const void *data, size_t n)
{
	char path[4096];
	FILE *fp;

	PATHF(path, "%s/%s", dir, name);
	fp = fopen(path, "wb");
	CHECK(fp != NULL);
	if (!fp)
		return;
	CHECK(fwrite(data, 1, n, fp) == n);
	fclose(fp);
}

static int exists(const char *dir, const char *name)
{
	char path[4096];
	struct stat st;

	PATHF(path, "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

/* Number of entries of dir whose name contains s. */
static int count_names(const char *dir, const char *s)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		if (strstr(de->d_name, s))
			n++;
	if (d)
		closedir(d);
	return n;
}

static int same_file(const char *path, const void *data, size_t n)
{
	size_t got;
	char *buf = unit_slurp(path, &got);
	int same = buf && got == n && memcmp(buf, data, n) == 0;

	free(buf);
	return same;
}

/* A store on the in-memory backend; without get_range if no_range. */
static wstore_store *mem_store(int no_range, unsigned flags)
{
	wstore_backend *b = NULL;
	wstore_store *s = NULL;

	if (wstore_backend_mem_new(&b, flags) < 0)
		return NULL;
	if (no_range)
		b->get_range = NULL;
	if (wstore_open_backend(&s, b) < 0) {
		b->free(b);
		return NULL;
	}
	return s;
}

/* Tensor lengths of the synthetic shard (U8 tensors, then one F32). */
static const size_t lens[] = { 1, 7, 100, 3, 250, 64, 0, 33, 129, 5 };
#define NT (sizeof(lens) / sizeof(*lens))

/* A valid safetensors file: tensors t00..t09 (U8 [len]) and "w" (F32
 * [4, 5]), data bytes (i * 31 + 7) & 255. */
static char *make_shard(size_t *out_n, size_t *out_hdr)
{
	char hdr[4096], *buf;
	size_t h = 0, off = 0, n, data;

	h += (size_t)snprintf(hdr + h, sizeof(hdr) - h,
			      "{\"__metadata__\":{\"format\":\"pt\"}");
	for (size_t i = 0; i < NT; i++) {
		h += (size_t)snprintf(hdr + h, sizeof(hdr) - h,
				      ",\"t%02zu\":{\"dtype\":\"U8\",\"shape\":"
				      "[%zu],\"data_offsets\":[%zu,%zu]}",
				      i, lens[i], off, off + lens[i]);
		off += lens[i];
	}
	h += (size_t)snprintf(hdr + h, sizeof(hdr) - h,
			      ",\"w\":{\"dtype\":\"F32\",\"shape\":[4,5],"
			      "\"data_offsets\":[%zu,%zu]}}   ",
			      off, off + 80);
	data = off + 80;
	n = 8 + h + data;
	buf = malloc(n);
	for (int i = 0; i < 8; i++)
		buf[i] = (char)((uint64_t)h >> (8 * i));
	memcpy(buf + 8, hdr, h);
	for (size_t i = 0; i < data; i++)
		buf[8 + h + i] = (char)((i * 31 + 7) & 255);
	*out_n = n;
	*out_hdr = h;
	return buf;
}

static char *source_dir(char **shard, size_t *shard_n)
{
	static const char index[] =
		"{\"metadata\":{\"total_size\":1},\"weight_map\":"
		"{\"t00\":\"model.safetensors\",\"w\":\"model.safetensors\"}}";
	char *dir = unit_tmpdir(), sub[4096];
	size_t hn;

	*shard = make_shard(shard_n, &hn);
	spit(dir, "model.safetensors", *shard, *shard_n);
	spit(dir, "config.json", "{\"a\":1}\n", 8);
	spit(dir, "model.safetensors.index.json", index, sizeof(index) - 1);
	PATHF(sub, "%s/sub", dir);
	mkdir(sub, 0755);
	PATHF(sub, "%s/sub/dir", dir);
	mkdir(sub, 0755);
	spit(sub, "x.bin", "0123456789", 10);
	spit(dir, "empty.txt", "", 0);
	return dir;
}

static int import_dir(wstore_store *s, const char *id, const char *src,
		      uint64_t chunk_size)
{
	wstore_import_options o = WSTORE_IMPORT_OPTIONS_INIT;

	o.checkpoint_id = id;
	o.model_id = "test/model";
	o.source = src;
	o.chunk_size = chunk_size;
	o.jobs = 2;
	return wstore_import(s, &o);
}

struct fixture {
	wstore_store *s;
	char *src, *shard;
	size_t shard_n;
};

static int fixture_init(struct fixture *fx, int no_range, uint64_t cs)
{
	memset(fx, 0, sizeof(*fx));
	fx->s = mem_store(no_range, 0);
	CHECK(fx->s != NULL);
	if (!fx->s)
		return -1;
	fx->src = source_dir(&fx->shard, &fx->shard_n);
	int rc = import_dir(fx->s, "ck", fx->src, cs);

	CHECK_EQ_INT(rc, 0);
	if (rc)
		fprintf(stderr, "import: %s\n", wstore_last_error());
	return rc;
}

static void fixture_done(struct fixture *fx)
{
	wstore_free(fx->s);
	unit_rmtree(fx->src);
	free(fx->src);
	free(fx->shard);
}

/* Key of chunk i of path in checkpoint id. */
static void chunk_key(char *out, const char *id, const char *path, uint64_t i)
{
	char fk[WSTORE__KEY_MAX];

	wstore__key_file(fk, id, path);
	wstore__key_chunk(out, fk, i);
}

/* Put a chunk value straight into the backend (replacing it). */
static void put_raw(wstore_store *s, const char *key, const void *v, size_t n)
{
	wstore_backend *b = wstore_store_backend(s);

	b->remove(b, key, 1);
	CHECK_EQ_INT(b->put(b, key, v, n), 0);
}

/* ---- data-driven parser cases -------------------------------------------- */

static void run_case(const char *dir, const char *name, int good)
{
	char path[4096], *buf, *err = NULL;
	wstore__st *st = NULL;
	size_t n, en;
	int rc, fd;

	PATHF(path, "%s/%s", dir, name);
	buf = unit_slurp(path, &n);
	CHECK(buf != NULL);
	if (!buf)
		return;
	rc = wstore__safetensors_parse(&st, buf, n, n, name);
	if (!good) {
		snprintf(path + strlen(path) - strlen(".safetensors"), 8,
			 ".err");
		err = unit_slurp(path, &en);
		CHECK(err != NULL);
		if (err && en && err[en - 1] == '\n')
			err[en - 1] = '\0';
	}
	if (good ? rc != 0
		 : (rc != WSTORE_ECORRUPT || !err ||
		    !strstr(wstore_last_error(), err)))
		fprintf(stderr, "FAIL case %s: rc %d: %s (want %s)\n", name, rc,
			wstore_last_error(), err ? err : "success");
	CHECK_EQ_INT(rc, good ? 0 : WSTORE_ECORRUPT);
	CHECK(good || (err && strstr(wstore_last_error(), err)));
	wstore__st_free(st);
	/* the fd path must agree */
	PATHF(path, "%s/%s", dir, name);
	fd = open(path, O_RDONLY);
	rc = wstore__safetensors_check_file(NULL, fd, name);
	CHECK_EQ_INT(rc, good ? 0 : WSTORE_ECORRUPT);
	CHECK(good || (err && strstr(wstore_last_error(), err)));
	close(fd);
	free(err);
	free(buf);
}

static int run_dir(const char *base, int good)
{
	char dir[4096];
	struct dirent **list;
	int n, cases = 0;

	PATHF(dir, "%s/%s", base, good ? "good" : "bad");
	n = scandir(dir, &list, NULL, alphasort);
	CHECK(n > 0);
	for (int i = 0; i < n; i++) {
		const char *s = list[i]->d_name;
		size_t k = strlen(s);

		if (k > 12 && strcmp(s + k - 12, ".safetensors") == 0) {
			run_case(dir, s, good);
			cases++;
		}
		free(list[i]);
	}
	free(list);
	return cases;
}

void test_safetensors_data(void)
{
	const char *dir = data_dir();

	CHECK(dir != NULL);
	if (!dir)
		return;
	CHECK(run_dir(dir, 1) >= 10);
	CHECK(run_dir(dir, 0) >= 20);
}

/* Every truncation and every single-byte change of a valid file must be
 * either accepted or refused cleanly (ASan checks the rest). */
void test_safetensors_mutations(void)
{
	size_t n, hn;
	char *buf = make_shard(&n, &hn);
	wstore__st *st = NULL;
	int bad = 0;

	CHECK_EQ_INT(wstore__safetensors_parse(&st, buf, n, n, "x"), 0);
	CHECK(st && st->n == NT + 1 && st->nmeta == 1);
	CHECK(st && wstore__st_find(st, "w") == (int64_t)NT);
	CHECK(st && wstore__st_find(st, "nope") == -1);
	wstore__st_free(st);
	for (size_t k = 0; k < 8 + hn; k++) {
		int rc = wstore__safetensors_parse(&st, buf, k, k, "x");

		bad += rc != WSTORE_ECORRUPT;
		wstore__st_free(st);
	}
	CHECK_EQ_INT(bad, 0);
	for (size_t k = 0; k < 8 + hn; k++) {
		char save = buf[k];
		int rc;

		buf[k] ^= 0x5a;
		rc = wstore__safetensors_parse(&st, buf, n, n, "x");
		bad += rc != 0 && rc != WSTORE_ECORRUPT;
		wstore__st_free(st);
		buf[k] = save;
	}
	CHECK_EQ_INT(bad, 0);
	free(buf);
}

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
	const char *names[NT + 1];
	void *bufs[NT + 1];
	uint64_t caps[NT + 1];
	char name[8];
	int bad = 0;

	CHECK_EQ_INT(wstore_safetensors_open(&ws, f), 0);
	if (!ws)
		return;
	CHECK_EQ_INT(wstore_safetensors_count(ws), NT + 1);
	CHECK_STR(wstore_safetensors_metadata(ws, "format"), "pt");
	CHECK(wstore_safetensors_metadata(ws, "nope") == NULL);
	CHECK_EQ_INT(wstore_safetensors_tensor(&ti, ws, NT + 1), WSTORE_ERANGE);
	CHECK_EQ_INT(wstore_safetensors_find(ws, "w"), NT);
	CHECK_EQ_INT(wstore_safetensors_tensor(&ti, ws, NT), 0);
	CHECK_STR(ti.name, "w");
	CHECK_STR(ti.dtype, "F32");
	CHECK(ti.ndim == 2 && ti.shape[0] == 4 && ti.shape[1] == 5);
	CHECK_EQ_INT(ti.nbytes, 80);
	/* read every tensor in one batch, in reverse order */
	for (size_t i = 0; i <= NT; i++) {
		size_t k = NT - i;
		int64_t idx;

		PATHF(name, "t%02zu", k);
		names[i] = k == NT ? "w" : strdup(name);
		idx = wstore_safetensors_find(ws, names[i]);
		wstore_safetensors_tensor(&ti, ws, (size_t)idx);
		caps[i] = ti.nbytes;
		bufs[i] = malloc(ti.nbytes + 1);
	}
	CHECK_EQ_INT(wstore_safetensors_read(ws, names, bufs, caps, NT + 1), 0);
	for (size_t i = 0; i <= NT; i++) {
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
	for (size_t i = 0; i <= NT; i++) {
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
	CHECK_EQ_INT(sum.tensor_count, NT + 1);
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

/* Write a READY checkpoint by hand: one file, split into chunks of cs
 * bytes (the record claims chunk_size rec_cs). */
static void put_by_hand(wstore_store *s, const char *id, const char *path,
			const char *data, size_t n, size_t cs, uint64_t rec_cs)
{
	wstore_manifest *m = wstore__manifest_new();
	wstore__file_rec *f = wstore__manifest_add_file(m, path);
	char key[WSTORE__KEY_MAX], hex[65], *json = NULL;
	wstore__sha256 *h = wstore__sha256_new();
	size_t len;

	wstore__set_str(&m->checkpoint_id, id);
	wstore__set_str(&m->model_id, "m");
	wstore__set_str(&m->revision, "main");
	wstore__set_str(&m->status, "READY");
	wstore__key_file(key, id, path);
	wstore__set_str(&f->key, key);
	wstore__sha256_update(h, data, n);
	wstore__sha256_hex(h, hex);
	wstore__sha256_free(h);
	wstore__set_str(&f->sha256, hex);
	f->size = n;
	f->chunk_size = rec_cs;
	for (size_t off = 0, i = 0; off < n; off += cs, i++) {
		wstore__key_chunk(key, f->key, i);
		wstore__file_rec_add_chunk(f, key);
		put_raw(s, key, data + off, off + cs > n ? n - off : cs);
	}
	wstore__manifest_sort(m);
	CHECK_EQ_INT(wstore_manifest_serialize(&json, &len, m), 0);
	wstore__key_manifest(key, id);
	put_raw(s, key, json, len);
	free(json);
	wstore_manifest_free(m);
}

void test_read_legacy(void)
{
	static const char data[] = "abcdefghijklmnopqrstuvwxyz";
	wstore_store *s = mem_store(0, 0);
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	char buf[32];
	size_t got = 0;

	put_by_hand(s, "multi", "a.bin", data, 26, 10, 0);
	put_by_hand(s, "single", "a.bin", data, 26, 26, 0);
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
	wstore_store *s = mem_store(no_range, flags);
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	char key[WSTORE__KEY_MAX], buf[64];
	size_t got;

	put_by_hand(s, "d", "w.bin", data, 32, 8, 8);
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "d"), 0);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "w.bin"), 0);
	chunk_key(key, "d", "w.bin", 1);
	put_raw(s, key, "89abcde", 7);
	CHECK_EQ_INT(wstore_file_pread(f, buf, 32, 0, &got), WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), key) != NULL);
	CHECK(strstr(wstore_last_error(), "'w.bin'") != NULL);
	put_raw(s, key, "89abcdefX", 9);
	CHECK_EQ_INT(wstore_file_pread(f, buf, 32, 0, &got), WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), key) != NULL);
	put_raw(s, key, "", 0);
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

/* wstore_file_chunk_fd: the chunk's own file on the file store (bytes at
 * fd_off match the source, length to the chunk's end), EUNSUPPORTED on
 * the mem store, ECORRUPT naming file and chunk for a truncated chunk. */
void test_read_chunk_fd(void)
{
	char *root = unit_tmpdir(), *src, *shard = NULL, key[WSTORE__KEY_MAX];
	char path[4096], buf[128];
	const uint64_t cs = 64;
	wstore_backend *b = NULL;
	wstore_store *s = NULL;
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	struct fixture fx;
	size_t n = 0, len;
	uint64_t fd_off;
	int fd, bad = 0;

	src = source_dir(&shard, &n);
	CHECK_EQ_INT(wstore_backend_file_new(&b, root), 0);
	CHECK_EQ_INT(wstore_open_backend(&s, b), 0);
	CHECK_EQ_INT(import_dir(s, "ck", src, cs), 0);
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "ck"), 0);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "model.safetensors"), 0);
	CHECK(n > 3 * cs);
	for (uint64_t off = 0; f && off < n; off += (off % cs) ? 29 : 1) {
		size_t want = (size_t)((off / cs + 1) * cs < n
					       ? (off / cs + 1) * cs - off
					       : n - off);

		if (wstore_file_chunk_fd(&fd, &fd_off, &len, f, off) != 0 ||
		    fd < 0 || fd_off != off % cs || len != want) {
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
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(wstore_file_chunk_fd(&fd, &fd_off, &len, f, n),
		     WSTORE_EINVAL);
	CHECK_EQ_INT(fd, -1);

	/* a truncated chunk file: ECORRUPT naming the file and the chunk */
	chunk_key(key, "ck", "model.safetensors", 1);
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

/* ---- structure checks ---------------------------------------------------- */

struct problems {
	int n;
	char text[4096];
};

static void on_problem(const char *path, int code, const char *msg, void *ctx)
{
	struct problems *p = ctx;
	size_t k = strlen(p->text);

	(void)code;
	p->n++;
	snprintf(p->text + k, sizeof(p->text) - k, "%s: %s\n", path, msg);
}

void test_check_structure(void)
{
	static const char index[] =
		"{\"weight_map\":{\"t00\":\"model.safetensors\","
		"\"ghost\":\"model.safetensors\",\"x\":\"gone.safetensors\","
		"\"y\":\"gone.safetensors\"}}";
	static const char index2[] =
		"{\"weight_map\":{\"t00\":\"model.safetensors\","
		"\"ghost\":\"model.safetensors\"}}";
	wstore_checkpoint *ck = NULL;
	struct problems p = { 0, "" };
	char key[WSTORE__KEY_MAX];
	struct fixture fx;

	if (fixture_init(&fx, 0, 64) < 0)
		goto out;
	/* an index naming shards that are not there (written by hand:
	 * import refuses it) */
	put_by_hand(fx.s, "idx", "model.safetensors.index.json", index,
		    sizeof(index) - 1, 64, 64);
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, fx.s, "idx"), 0);
	CHECK_EQ_INT(wstore_check_structure(ck, on_problem, &p),
		     WSTORE_EVERIFY);
	CHECK_EQ_INT(p.n, 2); /* each missing file once */
	CHECK(strstr(p.text, "'gone.safetensors'") != NULL);
	CHECK(strstr(p.text, "'model.safetensors'") != NULL);
	wstore_checkpoint_free(ck);
	ck = NULL;
	/* an index naming a tensor its shard lacks */
	spit(fx.src, "model.safetensors.index.json", index2,
	     sizeof(index2) - 1);
	CHECK_EQ_INT(import_dir(fx.s, "ck2", fx.src, 64), 0);
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, fx.s, "ck2"), 0);
	p.n = 0;
	p.text[0] = '\0';
	CHECK_EQ_INT(wstore_check_structure(ck, on_problem, &p),
		     WSTORE_EVERIFY);
	CHECK_EQ_INT(p.n, 1);
	CHECK(strstr(p.text, "tensor 'ghost' is not in 'model.safetensors'"));
	wstore_checkpoint_free(ck);
	ck = NULL;
	/* a shard whose header was damaged after import, and the index of
	 * the imported checkpoint naming a tensor the shard lacks */
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, fx.s, "ck"), 0);
	chunk_key(key, "ck", "model.safetensors", 0);
	{
		char bad[64];

		memcpy(bad, fx.shard, 64);
		bad[9] = '[';
		put_raw(fx.s, key, bad, 64);
	}
	p.n = 0;
	p.text[0] = '\0';
	CHECK_EQ_INT(wstore_check_structure(ck, on_problem, &p),
		     WSTORE_EVERIFY);
	CHECK_EQ_INT(p.n, 1);
	CHECK(strstr(p.text, "model.safetensors: safetensors file") != NULL);
	CHECK(strstr(wstore_last_error(), "not valid JSON") != NULL);
out:
	wstore_checkpoint_free(ck);
	fixture_done(&fx);
}

/* ---- GGUF ---------------------------------------------------------------- */

struct gbuf {
	unsigned char d[4096];
	size_t n;
};

static void g_bytes(struct gbuf *g, const void *p, size_t n)
{
	memcpy(g->d + g->n, p, n);
	g->n += n;
}

static void g_u32(struct gbuf *g, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		g->d[g->n++] = (unsigned char)(v >> (8 * i));
}

static void g_u64(struct gbuf *g, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		g->d[g->n++] = (unsigned char)(v >> (8 * i));
}

static void g_str(struct gbuf *g, const char *s)
{
	g_u64(g, strlen(s));
	g_bytes(g, s, strlen(s));
}

static void make_gguf(struct gbuf *g)
{
	g->n = 0;
	g_bytes(g, "GGUF", 4);
	g_u32(g, 3);
	g_u64(g, 2); /* tensors */
	g_u64(g, 3); /* kv */
	g_str(g, "general.architecture");
	g_u32(g, 8);
	g_str(g, "llama");
	g_str(g, "general.alignment");
	g_u32(g, 4);
	g_u32(g, 64);
	g_str(g, "tokenizer.ggml.tokens");
	g_u32(g, 9);
	g_u32(g, 8);
	g_u64(g, 2);
	g_str(g, "a");
	g_str(g, "bc");
	g_str(g, "tok_embd.weight");
	g_u32(g, 2);
	g_u64(g, 4);
	g_u64(g, 8);
	g_u32(g, 0); /* F32 */
	g_u64(g, 0);
	g_str(g, "blk.0.attn_q.weight");
	g_u32(g, 1);
	g_u64(g, 32);
	g_u32(g, 12); /* Q4_K */
	g_u64(g, 128);
	while (g->n % 64)
		g->d[g->n++] = 0;
	memset(g->d + g->n, 0, 256);
	g->n += 256;
}

void test_gguf(void)
{
	wstore__gguf_info gi;
	struct gbuf g;
	int bad = 0;

	make_gguf(&g);
	CHECK_EQ_INT(wstore__gguf_parse_mem(&gi, g.d, g.n, "m.gguf"), 0);
	CHECK_EQ_INT(gi.version, 3);
	CHECK_EQ_INT(gi.tensor_count, 2);
	CHECK_EQ_INT(gi.kv_count, 3);
	CHECK_EQ_INT(gi.param_count, 64);
	CHECK_EQ_INT(gi.alignment, 64);
	CHECK_EQ_INT(gi.type_mask[0], (1ull << 0) | (1ull << 12));
	/* every truncation of the header is refused, never read past */
	for (size_t k = 0; k < gi.data_start - 1; k++) {
		int rc = wstore__gguf_parse_mem(&gi, g.d, k, "m.gguf");

		bad += rc != WSTORE_ECORRUPT;
	}
	CHECK_EQ_INT(bad, 0);
	for (size_t k = 0; k < 200; k++) {
		unsigned char save = g.d[k];

		g.d[k] = 0xff;
		bad += wstore__gguf_parse_mem(&gi, g.d, g.n, "m.gguf") > 0;
		g.d[k] = save;
	}
	CHECK_EQ_INT(bad, 0);
	g.d[0] = 'X';
	CHECK_EQ_INT(wstore__gguf_parse_mem(&gi, g.d, g.n, "m.gguf"),
		     WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), "magic") != NULL);
}

void test_gguf_summary(void)
{
	wstore_file_summary_info sum;
	wstore_store *s = mem_store(1, 0);
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	struct gbuf g;

	make_gguf(&g);
	put_by_hand(s, "g", "m.gguf", (char *)g.d, g.n, 100, 100);
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "g"), 0);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "m.gguf"), 0);
	CHECK_EQ_INT(wstore_file_summary(&sum, f), 0);
	CHECK_STR(sum.format, "gguf");
	CHECK_EQ_INT(sum.tensor_count, 2);
	CHECK_EQ_INT(sum.kv_count, 3);
	CHECK_EQ_INT(sum.gguf_version, 3);
	CHECK_STR(sum.dtypes, "F32,Q4_K");
	CHECK_EQ_INT(wstore_check_structure(ck, NULL, NULL), 0);
	wstore_file_free(f);
	wstore_checkpoint_free(ck);
	wstore_free(s);
}

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
	CHECK(same_file(path, fx->shard, fx->shard_n));
	PATHF(path, "%s/config.json", dest);
	CHECK(same_file(path, "{\"a\":1}\n", 8));
	PATHF(path, "%s/sub/dir/x.bin", dest);
	CHECK(same_file(path, "0123456789", 10));
	PATHF(path, "%s/empty.txt", dest);
	CHECK(same_file(path, "", 0));
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
	CHECK_EQ_INT(count_names(dest, "wstore-tmp"), 0);
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
	CHECK(exists(d2, "config.json") &&
	      exists(d2, "model.safetensors.index.json"));
	CHECK(!exists(d2, "model.safetensors") && !exists(d2, "sub"));
	PATHF(d2, "%s/nosub", tmp);
	CHECK_EQ_INT(pull(fx.s, "ck", d2, NULL, sub, 0, NULL), 0);
	CHECK(exists(d2, "model.safetensors") && !exists(d2, "sub"));
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
		put_raw(s, key, fixed, strlen(fixed));
		free(fixed);
	}
	free(json);
}

/* Store a manifest whose single path is replaced by bad. */
static void put_hostile(wstore_store *s, const char *id, const char *bad)
{
	char *to = NULL;

	put_by_hand(s, id, "zzzz", "data", 4, 4, 4);
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
	wstore_store *s = mem_store(0, 0);
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
	CHECK_EQ_INT(count_names(tmp, "x"), 0);
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
	CHECK_EQ_INT(count_names(out, ""), 2); /* "." and ".." only */
	CHECK_EQ_INT(count_names(dest, "wstore-tmp"), 0);
	/* a symlink at a file's name is replaced, not written through */
	spit(out, "target", "keep", 4);
	PATHF(path, "%s/config.json", dest);
	unlink(path);
	snprintf(out + strlen(out), sizeof(out) - strlen(out), "/target");
	CHECK_EQ_INT(symlink(out, path), 0);
	CHECK_EQ_INT(pull(fx.s, "ck", dest, NULL, nosub, 0, NULL), 0);
	CHECK(same_file(out, "keep", 4));
	CHECK(same_file(path, "{\"a\":1}\n", 8));
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
	chunk_key(key, "ck", "model.safetensors", 2);
	memcpy(junk, fx.shard + 128, 64);
	junk[5] ^= 1;
	put_raw(fx.s, key, junk, 64);
	rc = pull(fx.s, "ck", dest, NULL, NULL, 0, NULL);
	CHECK_EQ_INT(rc, WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), "file 'model.safetensors'") != NULL);
	CHECK(strstr(wstore_last_error(), "sha256 mismatch") != NULL);
	CHECK(!exists(dest, "model.safetensors"));
	CHECK_EQ_INT(count_names(dest, "wstore-tmp"), 0);
	/* without verification the same-size damage goes through */
	o.no_verify = 1;
	CHECK_EQ_INT(wstore_pull(fx.s, "ck", dest, &o), 0);
	CHECK(exists(dest, "model.safetensors"));
	/* a short chunk is caught even without verification */
	put_raw(fx.s, key, junk, 63);
	o.force = 1;
	rc = wstore_pull(fx.s, "ck", dest, &o);
	CHECK_EQ_INT(rc, WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), key) != NULL);
	CHECK(strstr(wstore_last_error(), "'model.safetensors'") != NULL);
	CHECK_EQ_INT(count_names(dest, "wstore-tmp"), 0);
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
	CHECK_EQ_INT(count_names(dest, "wstore-tmp"), 0);
	pr.cancel_at = 0;
	CHECK_EQ_INT(pull(fx.s, "ck", dest, NULL, NULL, 0, NULL), 0);
	/* damage: a truncated shard, same-size wrong config; and files of
	 * the user's whose names look like temp names of a pull whose pid
	 * is gone (both forms): a pull cannot prove they are its own, so
	 * they stay */
	PATHF(path, "%s/model.safetensors", dest);
	CHECK_EQ_INT(truncate(path, 100), 0);
	spit(dest, "config.json", "{\"a\":2}\n", 8);
	PATHF(path, "%s/sub/dir", dest);
	PATHF(name, ".x.bin.wstore-tmp-%ld", (long)dead_pid());
	spit(path, name, "mine", 4);
	PATHF(name, ".wstore-tmp-%ld-0", (long)dead_pid());
	spit(dest, name, "mine too", 8);
	PATHF(path, "%s/sub/dir/x.bin", dest);
	unlink(path);
	ino = inode(dest, "empty.txt");
	CHECK_EQ_INT(pull(fx.s, "ck", dest, NULL, NULL, 0, &pr), 0);
	check_pulled(&fx, dest);
	CHECK(inode(dest, "empty.txt") == ino);
	PATHF(path, "%s/sub/dir", dest);
	CHECK_EQ_INT(count_names(path, "wstore-tmp"), 1);
	PATHF(path, "%s/%s", dest, name);
	CHECK(same_file(path, "mine too", 8));
	CHECK_EQ_INT(count_names(dest, "wstore-tmp"), 1);
out:
	fixture_done(&fx);
	unit_rmtree(tmp);
	free(tmp);
}

void test_pull_not_ready(void)
{
	wstore_store *s = mem_store(0, 0);
	wstore_checkpoint *ck = NULL;
	char *tmp = unit_tmpdir(), dest[4096];

	put_by_hand(s, "f", "a.bin", "data", 4, 4, 4);
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
