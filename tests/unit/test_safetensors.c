/*
 * test_safetensors.c - the safetensors and GGUF parsers (data-driven
 * cases under tests/data/safetensors, see make.py there, and every
 * truncation and byte flip of a valid file) and the structure checks of
 * a stored checkpoint (an index naming missing shards or tensors, a
 * damaged header), on the in-memory backend.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <wstore/read.h>

#include "gguf.h"
#include "names.h"
#include "safetensors.h"
#include "fixture.h"
#include "unit.h"

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
	char *buf = fixture_shard(&n, &hn);
	wstore__st *st = NULL;
	int bad = 0;

	CHECK_EQ_INT(wstore__safetensors_parse(&st, buf, n, n, "x"), 0);
	CHECK(st && st->n == FIXTURE_NT + 1 && st->nmeta == 1);
	CHECK(st && wstore__st_find(st, "w") == (int64_t)FIXTURE_NT);
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
	fixture_put_by_hand(fx.s, "idx", "model.safetensors.index.json", index,
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
	unit_spit(fx.src, "model.safetensors.index.json", index2,
		  sizeof(index2) - 1);
	CHECK_EQ_INT(fixture_import(fx.s, "ck2", fx.src, 64), 0);
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
	fixture_chunk_key(key, "ck", "model.safetensors", 0);
	{
		char bad[64];

		memcpy(bad, fx.shard, 64);
		bad[9] = '[';
		fixture_put_raw(fx.s, key, bad, 64);
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
	wstore_store *s = unit_mem_store(1, 0);
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	struct gbuf g;

	make_gguf(&g);
	fixture_put_by_hand(s, "g", "m.gguf", (char *)g.d, g.n, 100, 100);
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
