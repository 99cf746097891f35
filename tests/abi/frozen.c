/*
 * frozen.c - a program built against the headers of WSTORE_0 (the frozen
 * copy in tests/abi/v0/, never include/) and run against the library of
 * the day (suite "abi", tests/abi/run.sh).  It makes a small checkpoint,
 * and goes through every call that takes an option struct or fills a
 * struct:
 *  - option structs are allocated with exactly their size in that
 *    version (import's version 1 too, which predates its eviction
 *    callback), so a library reading past them is caught by ASan;
 *  - filled structs sit before guard bytes the library must not touch,
 *    and their values are checked against what the program knows, so a
 *    field moved or resized in the library's header shows;
 *  - a size below the first layout is refused, and a larger one (a later
 *    program) gets its unknown tail zeroed;
 *  - an option version the library never defined is refused by name.
 * Usage: abi-frozen DIR (an empty directory to work in).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <wstore/lease.h>
#include <wstore/read.h>
#include <wstore/wstore.h>

#include "../lib/check.h"

CHECK_COUNTERS;

#define UPTO(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
#define GUARD 64

/* A struct of type T followed by guard bytes, all 0xA5 to start with. */
#define GUARDED(T)                                                             \
	struct {                                                               \
		T v;                                                           \
		unsigned char guard[GUARD];                                    \
	}

static int untouched(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0xA5)
			return 0;
	return 1;
}

static void *exact(const void *src, size_t size)
{
	void *p = malloc(size);

	if (!p)
		abort();
	memcpy(p, src, size);
	return p;
}

static void write_file(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
		perror(path);
		exit(2);
	}
}

/* the safetensors header of the one 2x2 F32 tensor "w" */
static const char hdr[] =
	"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";
#define HDR_LEN (sizeof(hdr) - 1)

/* config.json and a safetensors file holding "w" */
static void make_source(const char *src)
{
	unsigned char st[8 + HDR_LEN + 16];
	uint64_t n = HDR_LEN;
	char p[4200];

	if (mkdir(src, 0755) != 0 && errno != EEXIST) {
		perror(src);
		exit(2);
	}
	for (int i = 0; i < 8; i++)
		st[i] = (unsigned char)(n >> (8 * i));
	memcpy(st + 8, hdr, n);
	memset(st + 8 + n, 0x3f, 16);
	snprintf(p, sizeof(p), "%s/model.safetensors", src);
	write_file(p, st, sizeof(st));
	snprintf(p, sizeof(p), "%s/config.json", src);
	write_file(p, "{\"frozen\": true}\n", 17);
}

static void check_import(wstore_store *s, const char *src)
{
	wstore_import_options o = WSTORE_IMPORT_OPTIONS_INIT, *v1;

	check_current = "import options version 1";
	o.checkpoint_id = "frozen";
	o.model_id = "org/frozen";
	o.source = src;
	o.chunk_size = 4096;
	o.jobs = 1;
	o.version = 1;
	/* version 1 ends before on_evict */
	v1 = exact(&o, UPTO(wstore_import_options, progress_ctx));
	CHECK_EQ(wstore_import(s, v1), 0);
	free(v1);
	check_current = "import options of an unknown version";
	o.version = 99;
	o.checkpoint_id = "frozen2";
	CHECK_EQ(wstore_import(s, &o), WSTORE_EINVAL);
	CHECK_MSG("import options of version 99");
}

static void check_file_info(const wstore_manifest *m)
{
	GUARDED(wstore_file_info) g;
	unsigned char big[sizeof(wstore_file_info) + 16];
	int64_t i = wstore_manifest_find(m, "model.safetensors");

	check_current = "wstore_file_info";
	CHECK(i >= 0);
	memset(&g, 0xA5, sizeof(g));
	CHECK_EQ(wstore_manifest_file(&g.v, m, (size_t)i), 0);
	CHECK(untouched(g.guard, GUARD));
	CHECK_STR(g.v.path, "model.safetensors");
	CHECK_STR(g.v.type, "WEIGHT");
	CHECK_EQ(g.v.size, 8 + HDR_LEN + 16);
	CHECK_EQ(g.v.chunk_size, 4096);
	CHECK_EQ(g.v.chunk_count, 1);
	CHECK_EQ(strlen(g.v.sha256), 64);
	CHECK_EQ(wstore_manifest_file_sized(&g.v, sizeof(g.v) - 1, m, 0),
		 WSTORE_EINVAL);
	/* a later program's larger struct: the tail it knows and we do not
	 * reads as zero */
	memset(big, 0xA5, sizeof(big));
	CHECK_EQ(wstore_manifest_file_sized((wstore_file_info *)big,
					    sizeof(big), m, (size_t)i),
		 0);
	CHECK(big[sizeof(wstore_file_info)] == 0 && big[sizeof(big) - 1] == 0);
}

static void check_reads(wstore_checkpoint *ck)
{
	GUARDED(wstore_file_summary_info) sum;
	GUARDED(wstore_tensor_info) ti;
	wstore_safetensors *st = NULL;
	wstore_file *f = NULL;

	check_current = "wstore_file_summary_info";
	CHECK_EQ(wstore_file_open(&f, ck, "model.safetensors"), 0);
	if (!f)
		return;
	memset(&sum, 0xA5, sizeof(sum));
	CHECK_EQ(wstore_file_summary(&sum.v, f), 0);
	CHECK(untouched(sum.guard, GUARD));
	CHECK_STR(sum.v.format, "safetensors");
	CHECK_EQ(sum.v.tensor_count, 1);
	CHECK_EQ(sum.v.param_count, 4);
	CHECK_STR(sum.v.dtypes, "F32");
	check_current = "wstore_tensor_info";
	CHECK_EQ(wstore_safetensors_open(&st, f), 0);
	if (st) {
		memset(&ti, 0xA5, sizeof(ti));
		CHECK_EQ(wstore_safetensors_tensor(&ti.v, st, 0), 0);
		CHECK(untouched(ti.guard, GUARD));
		CHECK_STR(ti.v.name, "w");
		CHECK_STR(ti.v.dtype, "F32");
		CHECK_EQ(ti.v.ndim, 2);
		CHECK(ti.v.shape && ti.v.shape[0] == 2 && ti.v.shape[1] == 2);
		CHECK_EQ(ti.v.offset, 8 + HDR_LEN);
		CHECK_EQ(ti.v.nbytes, 16);
		CHECK_EQ(wstore_safetensors_tensor_sized(&ti.v, 8, st, 0),
			 WSTORE_EINVAL);
	}
	wstore_safetensors_free(st);
	wstore_file_free(f);
}

static void check_leases_usage(wstore_store *s)
{
	GUARDED(wstore_lease_info) li;
	GUARDED(wstore_usage_info) ui;
	wstore_leases *ls = NULL;
	wstore_usage *u = NULL;

	check_current = "wstore_lease_info";
	CHECK_EQ(wstore_leases_read(&ls, s, "frozen"), 0);
	CHECK(ls && wstore_leases_count(ls) >= 1);
	if (ls && wstore_leases_count(ls) >= 1) {
		memset(&li, 0xA5, sizeof(li));
		CHECK_EQ(wstore_leases_get(&li.v, ls, 0), 0);
		CHECK(untouched(li.guard, GUARD));
		CHECK_EQ(li.v.pid, getpid());
		CHECK_STR(li.v.what, "frozen");
		CHECK(li.v.expires_ms > li.v.since_ms && li.v.since_ms > 0);
	}
	wstore_leases_free(ls);
	check_current = "wstore_usage_info";
	CHECK_EQ(wstore_usage_read(&u, s), 0);
	CHECK(u && wstore_usage_count(u) == 1);
	if (u && wstore_usage_count(u) == 1) {
		memset(&ui, 0xA5, sizeof(ui));
		CHECK_EQ(wstore_usage_get(&ui.v, u, 0), 0);
		CHECK(untouched(ui.guard, GUARD));
		CHECK_STR(ui.v.id, "frozen");
		CHECK_STR(ui.v.model_id, "org/frozen");
		CHECK_STR(ui.v.status, "READY");
		CHECK_EQ(ui.v.size, wstore_usage_total(u));
		CHECK_EQ(ui.v.leases, 1);
		CHECK(ui.v.created_at > 0);
	}
	wstore_usage_free(u);
}

static void check_options(wstore_store *s, const char *dir)
{
	wstore_verify_options vo = WSTORE_VERIFY_OPTIONS_INIT, *vp;
	wstore_pull_options po = WSTORE_PULL_OPTIONS_INIT, *pp;
	wstore_gc_options go = WSTORE_GC_OPTIONS_INIT, *gp;
	GUARDED(wstore_gc_stats) gs;
	char dest[4096];

	check_current = "verify options";
	vp = exact(&vo, sizeof(vo));
	CHECK_EQ(wstore_verify(s, "frozen", vp), 0);
	vp->version = 99;
	CHECK_EQ(wstore_verify(s, "frozen", vp), WSTORE_EINVAL);
	CHECK_MSG("verify options of version 99");
	free(vp);
	check_current = "pull options";
	snprintf(dest, sizeof(dest), "%s/pulled", dir);
	pp = exact(&po, sizeof(po));
	CHECK_EQ(wstore_pull(s, "frozen", dest, pp), 0);
	pp->version = 99;
	CHECK_EQ(wstore_pull(s, "frozen", dest, pp), WSTORE_EINVAL);
	free(pp);
	check_current = "gc options and wstore_gc_stats";
	gp = exact(&go, sizeof(go));
	memset(&gs, 0xA5, sizeof(gs));
	CHECK_EQ(wstore_gc(&gs.v, s, gp), 0);
	CHECK(untouched(gs.guard, GUARD));
	CHECK_EQ(gs.v.checkpoints, 1);
	CHECK_EQ(gs.v.orphans, 0);
	CHECK_EQ(gs.v.removed, 0);
	gp->version = 0;
	CHECK_EQ(wstore_gc(NULL, s, gp), WSTORE_EINVAL);
	free(gp);
}

int main(int argc, char **argv)
{
	wstore_checkpoint_options co = WSTORE_CHECKPOINT_OPTIONS_INIT, *cp;
	wstore_delete_options dopt = WSTORE_DELETE_OPTIONS_INIT, *dp;
	wstore_checkpoint *ck = NULL;
	wstore_store *s = NULL;
	char src[4096], store[4096];

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	snprintf(src, sizeof(src), "%s/src", argv[1]);
	snprintf(store, sizeof(store), "%s/store", argv[1]);
	make_source(src);
	check_current = "open";
	if (!CHECK_EQ(wstore_open_url(&s, store), 0))
		return check_summary("abi");
	check_import(s, src);
	check_current = "checkpoint options";
	co.what = "frozen";
	cp = exact(&co, sizeof(co));
	CHECK_EQ(wstore_checkpoint_open_ext(&ck, s, "frozen", cp), 0);
	if (ck) {
		check_file_info(wstore_checkpoint_manifest(ck));
		check_reads(ck);
		check_leases_usage(s);
		wstore_checkpoint_free(ck);
	}
	cp->version = 99;
	CHECK_EQ(wstore_checkpoint_open_ext(&ck, s, "frozen", cp),
		 WSTORE_EINVAL);
	free(cp);
	check_options(s, argv[1]);
	check_current = "delete options";
	dp = exact(&dopt, sizeof(dopt));
	dp->version = 99;
	CHECK_EQ(wstore_delete_ext(s, "frozen", dp), WSTORE_EINVAL);
	dp->version = 1;
	CHECK_EQ(wstore_delete_ext(s, "frozen", dp), 0);
	free(dp);
	wstore_free(s);
	return check_summary("abi");
}
