/*
 * fixture.c - the files, stores and checkpoints the unit tests build their
 * cases from (fixture.h says what each gives).
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "digest.h"
#include "manifest.h"
#include "names.h"
#include "store.h"
#include "util.h"
#include "fixture.h"
#include "unit.h"

void unit_spit(const char *dir, const char *name, const void *data, size_t n)
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

int unit_exists(const char *dir, const char *name)
{
	char path[4096];
	struct stat st;

	PATHF(path, "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

/* Number of entries of dir whose name contains s. */
int unit_count_names(const char *dir, const char *s)
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

int unit_same_file(const char *path, const void *data, size_t n)
{
	size_t got;
	char *buf = unit_slurp(path, &got);
	int same = buf && got == n && memcmp(buf, data, n) == 0;

	free(buf);
	return same;
}

wstore_store *unit_mem_store(int no_range, unsigned flags)
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
_Static_assert(sizeof(lens) / sizeof(*lens) == FIXTURE_NT,
	       "FIXTURE_NT counts the U8 tensors");

/* A valid safetensors file: tensors t00..t09 (U8 [len]) and "w" (F32
 * [4, 5]), data bytes (i * 31 + 7) & 255. */
char *fixture_shard(size_t *out_n, size_t *out_hdr)
{
	char hdr[4096], *buf;
	size_t h = 0, off = 0, n, data;

	h += (size_t)snprintf(hdr + h, sizeof(hdr) - h,
			      "{\"__metadata__\":{\"format\":\"pt\"}");
	for (size_t i = 0; i < FIXTURE_NT; i++) {
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

char *fixture_source(char **shard, size_t *shard_n)
{
	static const char index[] =
		"{\"metadata\":{\"total_size\":1},\"weight_map\":"
		"{\"t00\":\"model.safetensors\",\"w\":\"model.safetensors\"}}";
	char *dir = unit_tmpdir(), sub[4096];
	size_t hn;

	*shard = fixture_shard(shard_n, &hn);
	unit_spit(dir, "model.safetensors", *shard, *shard_n);
	unit_spit(dir, "config.json", "{\"a\":1}\n", 8);
	unit_spit(dir, "model.safetensors.index.json", index,
		  sizeof(index) - 1);
	PATHF(sub, "%s/sub", dir);
	mkdir(sub, 0755);
	PATHF(sub, "%s/sub/dir", dir);
	mkdir(sub, 0755);
	unit_spit(sub, "x.bin", "0123456789", 10);
	unit_spit(dir, "empty.txt", "", 0);
	return dir;
}

int fixture_import(wstore_store *s, const char *id, const char *src,
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

int fixture_init(struct fixture *fx, int no_range, uint64_t cs)
{
	memset(fx, 0, sizeof(*fx));
	fx->s = unit_mem_store(no_range, 0);
	CHECK(fx->s != NULL);
	if (!fx->s)
		return -1;
	fx->src = fixture_source(&fx->shard, &fx->shard_n);
	int rc = fixture_import(fx->s, "ck", fx->src, cs);

	CHECK_EQ_INT(rc, 0);
	if (rc)
		fprintf(stderr, "import: %s\n", wstore_last_error());
	return rc;
}

void fixture_done(struct fixture *fx)
{
	wstore_free(fx->s);
	unit_rmtree(fx->src);
	free(fx->src);
	free(fx->shard);
}

/* Key of chunk i of path in checkpoint id. */
void fixture_chunk_key(char *out, const char *id, const char *path, uint64_t i)
{
	char fk[WSTORE__KEY_MAX];

	wstore__key_file(fk, id, path);
	wstore__key_chunk(out, fk, i);
}

/* Put a chunk value straight into the backend (replacing it). */
void fixture_put_raw(wstore_store *s, const char *key, const void *v, size_t n)
{
	wstore_backend *b = wstore_store_backend(s);

	b->remove(b, key, 1);
	CHECK_EQ_INT(b->put(b, key, v, n), 0);
}

/* Write a READY checkpoint by hand: one file, split into chunks of cs
 * bytes (the record claims chunk_size rec_cs). */
void fixture_put_by_hand(wstore_store *s, const char *id, const char *path,
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
		fixture_put_raw(s, key, data + off,
				off + cs > n ? n - off : cs);
	}
	wstore__manifest_sort(m);
	CHECK_EQ_INT(wstore_manifest_serialize(&json, &len, m), 0);
	wstore__key_manifest(key, id);
	fixture_put_raw(s, key, json, len);
	free(json);
	wstore_manifest_free(m);
}

/* ---- the file store's old layout ----------------------------------------- */

static int split_count;

/* One data file: its chunk files beside it in chunks/, then it goes. */
static int split_one(const char *path, const struct stat *st, int type,
		     struct FTW *ftw)
{
	const char *base = path + ftw->base;
	unsigned long long cs = 0;
	char dir[4096], out[4200];
	size_t n = (size_t)st->st_size;
	char *data;

	if (type != FTW_F || sscanf(base, "data-%llu", &cs) != 1 || cs == 0)
		return 0;
	PATHF(dir, "%.*s/chunks", (int)(ftw->base - 1), path);
	data = unit_slurp(path, NULL);
	CHECK(data != NULL && (mkdir(dir, 0755) == 0 || errno == EEXIST));
	if (!data)
		return -1;
	for (size_t off = 0, i = 0; off < n; off += (size_t)cs, i++) {
		PATHF(out, "%08zu", i);
		unit_spit(dir, out, data + off,
			  n - off < cs ? n - off : (size_t)cs);
	}
	free(data);
	CHECK_EQ_INT(unlink(path), 0);
	split_count++;
	return 0;
}

int fixture_split_data_files(const char *root)
{
	split_count = 0;
	if (nftw(root, split_one, 16, FTW_PHYS) != 0) {
		CHECK(!"data files split");
		return -1;
	}
	return split_count;
}
