/*
 * test_backends.c - unit tests of the built-in backends: file, mem, fault.
 *
 * The contract every backend must keep (round trip, overwrite, ERANGE,
 * ENOTFOUND, empty values, ranges, remove, list, put_new, update, threads)
 * is tests/conformance/, run against these backends too; here is each
 * backend's own behaviour: the file store's key rules, layout, temp files
 * and cross-process update; the mem store's weak-store flags and growth;
 * every item of the fault spec grammar.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/helpers.h"
#include "config.h"
#include "digest.h"
#include "error.h"
#include "manifest.h"
#include "names.h"
#include "store.h"
#include "unit.h"
#include "../lib/child.h"

/* ---- helpers ----------------------------------------------------------- */

/* a/b into out; test paths are short, so truncation is a harness bug */
static void join(char *out, size_t cap, const char *a, const char *b)
{
	if ((size_t)snprintf(out, cap, "%s/%s", a, b) >= cap)
		abort();
}

static int put_str(wstore_backend *b, const char *key, const char *s)
{
	return b->put(b, key, s, strlen(s));
}

/* Value of key as a string in buf (64 bytes), or the error code. */
static int get_str(wstore_backend *b, const char *key, char *buf)
{
	size_t n = 0;
	int rc = b->get(b, key, buf, 63, &n);

	buf[rc == 0 ? n : 0] = '\0';
	return rc;
}

typedef struct keyset {
	char keys[16][64];
	int n;
	int stop_after; /* return 7 after this many, if > 0 */
} keyset;

static int collect(const char *key, void *ctx)
{
	keyset *ks = ctx;

	if (ks->n < 16)
		snprintf(ks->keys[ks->n], 64, "%s", key);
	ks->n++;
	return ks->stop_after && ks->n >= ks->stop_after ? 7 : 0;
}

static int has_key(const keyset *ks, const char *key)
{
	for (int i = 0; i < ks->n && i < 16; i++)
		if (strcmp(ks->keys[i], key) == 0)
			return 1;
	return 0;
}

static int list_count(wstore_backend *b, const char *prefix, keyset *ks)
{
	memset(ks, 0, sizeof(*ks));
	return b->list(b, prefix, collect, ks) ? -1 : ks->n;
}

/* Update function: append one 'x' to the value. */
static int append_x(void **out, size_t *out_len, const void *old,
		    size_t old_len, void *ctx)
{
	char *v = malloc(old_len + 1);

	(void)ctx;
	if (!v)
		return -ENOMEM;
	if (old_len)
		memcpy(v, old, old_len);
	v[old_len] = 'x';
	*out = v;
	*out_len = old_len + 1;
	return 0;
}

static uint64_t size_of(wstore_backend *b, const char *key)
{
	uint64_t n = 12345;

	if (b->size(b, key, &n))
		return 99999;
	return n;
}

/* ---- concurrency ------------------------------------------------------- */

typedef struct worker {
	wstore_backend *b;
	const char *key;
	int n, failures;
} worker;

/* ---- file backend ------------------------------------------------------ */

/* Number of entries under dir (recursively) whose name has ".tmp-". */
static int count_tmp(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[4096];

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (strstr(e->d_name, ".tmp-"))
			n++;
		join(path, sizeof(path), dir, e->d_name);
		if (e->d_type == DT_DIR)
			n += count_tmp(path);
	}
	closedir(d);
	return n;
}

static int exists(const char *dir, const char *rel)
{
	char path[4096];
	struct stat st;

	join(path, sizeof(path), dir, rel);
	return stat(path, &st) == 0;
}

static void check_file_keys(wstore_backend *b)
{
	static const char *const bad[] = {
		"",	"/abs",	 "a//b",    "a/./b",	 "a/../b",
		"..",	".",	 ".hidden", "a/.x",	 "a/",
		"a\nb", "a\x7f", "a\tb",    "../escape",
	};
	char buf[64];
	size_t n;
	uint64_t sz;

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		CHECK_EQ_INT(put_str(b, bad[i], "v"), WSTORE_EINVAL);
		CHECK(strstr(wstore_last_error(), "invalid key") != NULL);
		CHECK_EQ_INT(b->get(b, bad[i], buf, sizeof(buf), &n),
			     WSTORE_EINVAL);
		CHECK_EQ_INT(b->size(b, bad[i], &sz), WSTORE_EINVAL);
		CHECK_EQ_INT(b->remove(b, bad[i], 1), WSTORE_EINVAL);
		CHECK_EQ_INT(b->put_new(b, bad[i], "v", 1), WSTORE_EINVAL);
		CHECK_EQ_INT(b->update(b, bad[i], append_x, NULL),
			     WSTORE_EINVAL);
	}
	CHECK(strstr(wstore_last_error(), "'../escape'") != NULL);
	/* a directory is not a key */
	CHECK_EQ_INT(put_str(b, "d/e/f", "v"), 0);
	CHECK_EQ_INT(get_str(b, "d/e", buf), WSTORE_ENOTFOUND);
	CHECK_EQ_INT(b->size(b, "d/e", &sz), WSTORE_ENOTFOUND);
	CHECK_EQ_INT(b->remove(b, "d/e", 1), WSTORE_ENOTFOUND);
	/* a path through a file is a missing key */
	CHECK_EQ_INT(get_str(b, "d/e/f/g", buf), WSTORE_ENOTFOUND);
	CHECK_EQ_INT(b->remove(b, "d/e/f", 1), 0);
}

/* fill for put_stream: "abc" pieces of 3 bytes; fails at piece fail_at. */
struct pieces {
	int n, fail_at;
};

static int fill_abc(void *ctx, const void **out, size_t *out_n)
{
	struct pieces *p = ctx;

	if (p->n++ == p->fail_at)
		return WSTORE_EINVAL;
	*out = "abc";
	*out_n = 3;
	return 0;
}

static void check_put_stream(wstore_backend *b, const char *root)
{
	struct pieces p = { 0, -1 };
	char buf[16];
	size_t n = 0;

	CHECK(b->put_stream != NULL);
	CHECK_EQ_INT(b->put_stream(b, "ps/k", 9, fill_abc, &p), 0);
	CHECK_EQ_INT(p.n, 3);
	CHECK_EQ_INT(b->get(b, "ps/k", buf, sizeof(buf), &n), 0);
	CHECK(n == 9 && memcmp(buf, "abcabcabc", 9) == 0);
	/* fill's error comes back as is, the old value stays, no temp */
	p = (struct pieces){ 0, 1 };
	CHECK_EQ_INT(b->put_stream(b, "ps/k", 6, fill_abc, &p), WSTORE_EINVAL);
	CHECK_EQ_INT(b->get(b, "ps/k", buf, sizeof(buf), &n), 0);
	CHECK_EQ_INT(n, 9);
	/* a piece longer than what is left is refused */
	p = (struct pieces){ 0, -1 };
	CHECK(b->put_stream(b, "ps/j", 4, fill_abc, &p) < 0);
	CHECK_EQ_INT(b->size(b, "ps/j", &(uint64_t){ 0 }), WSTORE_ENOTFOUND);
	CHECK_EQ_INT(count_tmp(root), 0);
	CHECK_EQ_INT(b->remove(b, "ps/k", 1), 0);
}

static void check_file_layout(wstore_backend *b, const char *root)
{
	keyset ks;

	CHECK_EQ_INT(
		put_str(b, "weight/models/m/files/ab/chunks/00000000", "chunk"),
		0);
	CHECK(exists(root, "weight/models/m/files/ab/chunks/00000000"));
	CHECK_EQ_INT(count_tmp(root), 0);
	CHECK_EQ_INT(
		b->remove(b, "weight/models/m/files/ab/chunks/00000000", 1), 0);
	/* empty parents go, the root stays */
	CHECK(!exists(root, "weight/models/m"));
	CHECK(exists(root, ""));
	/* lock files of update are not keys */
	CHECK_EQ_INT(b->update(b, "u/k", append_x, NULL), 0);
	CHECK(exists(root, ".locks"));
	CHECK(list_count(b, "", &ks) >= 1 && ks.n <= 16);
	CHECK(has_key(&ks, "u/k"));
	for (int i = 0; i < ks.n && i < 16; i++)
		CHECK(!strchr(ks.keys[i], '.'));
	CHECK_EQ_INT(b->remove(b, "u/k", 1), 0);
	/* a failed put (parent is a regular file) leaves no temp file */
	CHECK_EQ_INT(put_str(b, "blocker", "file"), 0);
	CHECK(put_str(b, "blocker/x", "v") < 0);
	CHECK(put_str(b, "blocker/x/y", "v") < 0);
	CHECK(b->put_new(b, "blocker/x", "v", 1) < 0);
	CHECK(strstr(wstore_last_error(), "'blocker/x'") != NULL);
	CHECK(strstr(wstore_last_error(), root) != NULL);
	CHECK_EQ_INT(count_tmp(root), 0);
	/* a put_new that finds the key leaves no temp file either */
	CHECK_EQ_INT(b->put_new(b, "blocker", "v", 1), WSTORE_EEXISTS);
	CHECK_EQ_INT(count_tmp(root), 0);
	CHECK_EQ_INT(b->remove(b, "blocker", 1), 0);
}

/* Each child opens its own backend on root and updates 50 times. */
static void check_fork_update(const char *root)
{
	wstore_backend *b;
	pid_t pids[4];
	int ok = 0;

	for (int i = 0; i < 4; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			int bad = wstore_backend_file_new(&b, root) != 0;

			for (int j = 0; !bad && j < 50; j++)
				bad = b->update(b, "weight/index/fork",
						append_x, NULL) != 0;
			_exit(bad);
		}
	}
	for (int i = 0; i < 4; i++) {
		int status = -1;

		wait_child(pids[i], &status, 120);
		ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
	}
	CHECK_EQ_INT(ok, 4);
	CHECK_EQ_INT(wstore_backend_file_new(&b, root), 0);
	CHECK_EQ_INT(size_of(b, "weight/index/fork"), 200);
	b->free(b);
}

static void *put_loop(void *arg)
{
	worker *w = arg;

	for (int i = 0; i < w->n; i++)
		if (w->b->put(w->b, w->key, "v", 1) != 0)
			w->failures++;
	return NULL;
}

static void *remove_loop(void *arg)
{
	worker *w = arg;

	for (int i = 0; i < w->n; i++) {
		int rc = w->b->remove(w->b, w->key, 1);

		if (rc != 0 && rc != WSTORE_ENOTFOUND)
			w->failures++;
	}
	return NULL;
}

/* A put racing with a remove that deletes its parent directories. */
static void check_put_remove_race(wstore_backend *b)
{
	worker wp = { b, "race/a/b/c/k", 300, 0 };
	worker wr = { b, "race/a/b/c/k", 300, 0 };
	pthread_t tp, tr;

	pthread_create(&tp, NULL, put_loop, &wp);
	pthread_create(&tr, NULL, remove_loop, &wr);
	pthread_join(tp, NULL);
	pthread_join(tr, NULL);
	CHECK_EQ_INT(wp.failures, 0);
	CHECK_EQ_INT(wr.failures, 0);
	b->remove(b, "race/a/b/c/k", 1);
}

static void check_file_root(const char *dir)
{
	wstore_backend *b = NULL;
	char path[4096];
	FILE *f;

	/* a missing root is created, parents included */
	join(path, sizeof(path), dir, "new/nested/root");
	CHECK_EQ_INT(wstore_backend_file_new(&b, path), 0);
	CHECK(exists(dir, "new/nested/root"));
	CHECK(b && !strcmp(b->name, "file") && b->flags == 0);
	if (b)
		b->free(b);
	/* a root that is a file */
	join(path, sizeof(path), dir, "plain");
	f = fopen(path, "w");
	if (f)
		fclose(f);
	CHECK_EQ_INT(wstore_backend_file_new(&b, path), WSTORE_EINVAL);
	CHECK(b == NULL);
	CHECK(strstr(wstore_last_error(), "not a directory") != NULL);
	join(path, sizeof(path), dir, "plain/sub");
	CHECK(wstore_backend_file_new(&b, path) < 0);
	CHECK(strstr(wstore_last_error(), path) != NULL);
	CHECK_EQ_INT(wstore_backend_file_new(&b, ""), WSTORE_EINVAL);
}

void test_backend_file(void)
{
	char *dir = unit_tmpdir();
	char root[4096];
	wstore_backend *b = NULL;

	join(root, sizeof(root), dir, "store");
	CHECK_EQ_INT(wstore_backend_file_new(&b, root), 0);
	if (!b) {
		unit_rmtree(dir);
		free(dir);
		return;
	}
	CHECK(b->version == WSTORE_BACKEND_VERSION);
	check_file_keys(b);
	check_file_layout(b, root);
	check_put_stream(b, root);
	check_put_remove_race(b);
	CHECK_EQ_INT(count_tmp(root), 0);
	b->free(b);
	check_fork_update(root);
	check_file_root(dir);
	unit_rmtree(dir);
	free(dir);
}

/* ---- mem backend ------------------------------------------------------- */

static void check_mem_weak(void)
{
	wstore_backend *b = NULL;
	char buf[64];
	size_t n = 5;

	CHECK_EQ_INT(wstore_backend_mem_new(&b, WSTORE_BACKEND_WRITE_ONCE), 0);
	CHECK_EQ_INT(b->flags, WSTORE_BACKEND_WRITE_ONCE);
	CHECK(b->upsert == NULL);
	CHECK_EQ_INT(put_str(b, "k", "old"), 0);
	CHECK_EQ_INT(put_str(b, "k", "new"), 0);
	CHECK_EQ_INT(get_str(b, "k", buf), 0);
	CHECK_STR(buf, "old");
	CHECK_EQ_INT(b->put_new(b, "k", "x", 1), WSTORE_EEXISTS);
	CHECK_EQ_INT(get_str(b, "missing", buf), WSTORE_ENOTFOUND);
	/* remove then put is how a write-once key is replaced */
	CHECK_EQ_INT(b->remove(b, "k", 1), 0);
	CHECK_EQ_INT(put_str(b, "k", "new"), 0);
	CHECK_EQ_INT(get_str(b, "k", buf), 0);
	CHECK_STR(buf, "new");
	b->free(b);

	CHECK_EQ_INT(wstore_backend_mem_new(&b, WSTORE_BACKEND_EMPTY_MISSING),
		     0);
	CHECK_EQ_INT(b->flags, WSTORE_BACKEND_EMPTY_MISSING);
	CHECK(b->upsert != NULL);
	CHECK_EQ_INT(b->get(b, "missing", buf, sizeof(buf), &n), 0);
	CHECK_EQ_INT(n, 0);
	CHECK_EQ_INT(size_of(b, "missing"), 0);
	CHECK_EQ_INT(b->remove(b, "missing", 1), WSTORE_ENOTFOUND);
	CHECK_EQ_INT(put_str(b, "k", "v1"), 0);
	CHECK_EQ_INT(put_str(b, "k", "v2"), 0);
	CHECK_EQ_INT(get_str(b, "k", buf), 0);
	CHECK_STR(buf, "v2");
	b->free(b);
}

void test_backend_mem(void)
{
	wstore_backend *b = NULL;
	char key[32];
	keyset ks;

	CHECK_EQ_INT(wstore_backend_mem_new(&b, 0), 0);
	if (!b)
		return;
	CHECK(!strcmp(b->name, "mem") && b->flags == 0);
	/* many keys: the sorted array grows and stays searchable */
	for (int i = 999; i >= 0; i--) {
		snprintf(key, sizeof(key), "many/%04d", i);
		CHECK_EQ_INT(b->put(b, key, key, strlen(key)), 0);
	}
	CHECK_EQ_INT(list_count(b, "many/", &ks), 1000);
	CHECK_EQ_INT(list_count(b, "many/05", &ks), 100);
	CHECK_EQ_INT(list_count(b, "many/050", &ks), 10);
	CHECK(has_key(&ks, "many/0500") && has_key(&ks, "many/0509"));
	CHECK_EQ_INT(size_of(b, "many/0500"), 9);
	CHECK_EQ_INT(b->put(b, "", "v", 1), WSTORE_EINVAL);
	b->free(b);
	check_mem_weak();
}

/* ---- fault backend ----------------------------------------------------- */

static wstore_backend *fault_over_mem(const char *spec)
{
	wstore_backend *inner = NULL, *b = NULL;

	if (wstore_backend_mem_new(&inner, 0))
		return NULL;
	if (wstore__backend_fault_new(&b, inner, spec)) {
		inner->free(inner);
		return NULL;
	}
	return b;
}

static void check_fault_fail(void)
{
	wstore_backend *b = fault_over_mem("fail=3");
	char buf[64];
	uint64_t sz;

	if (!b) {
		CHECK(0);
		return;
	}
	CHECK_EQ_INT(put_str(b, "k", "v"), 0);	  /* 1 */
	CHECK_EQ_INT(get_str(b, "k", buf), 0);	  /* 2 */
	CHECK_EQ_INT(b->size(b, "k", &sz), -EIO); /* 3 */
	CHECK_STR(wstore_last_error(), "injected fault at call 3 (size 'k')");
	CHECK_EQ_INT(get_str(b, "k", buf), 0); /* 4 */
	CHECK_EQ_INT(b->remove(b, "k", 1), 0); /* 5 */
	CHECK_EQ_INT(wstore__backend_fault_calls(b), 5);
	b->free(b);

	b = fault_over_mem("fail=2+");
	CHECK_EQ_INT(put_str(b, "k", "v"), 0);
	CHECK_EQ_INT(put_str(b, "k", "v"), -EIO);
	CHECK_EQ_INT(get_str(b, "k", buf), -EIO);
	CHECK_EQ_INT(b->remove(b, "k", 1), -EIO);
	CHECK_EQ_INT(b->update(b, "k", append_x, NULL), -EIO);
	CHECK_EQ_INT(wstore__backend_fault_calls(b), 5);
	b->free(b);

	b = fault_over_mem(" failop=get:2 , failop=put_new:1");
	CHECK_EQ_INT(put_str(b, "k", "v"), 0);
	CHECK_EQ_INT(get_str(b, "k", buf), 0);
	CHECK_EQ_INT(put_str(b, "k", "w"), 0);
	CHECK_EQ_INT(get_str(b, "k", buf), -EIO);
	CHECK_STR(wstore_last_error(), "injected fault at call 4 (get 'k')");
	CHECK_EQ_INT(get_str(b, "k", buf), 0);
	CHECK_STR(buf, "w");
	CHECK_EQ_INT(b->put_new(b, "n", "v", 1), -EIO);
	CHECK_EQ_INT(b->put_new(b, "n", "v", 1), 0);
	b->free(b);

	b = fault_over_mem("failop=list:1+");
	keyset ks = { .n = 0 };

	CHECK_EQ_INT(b->list(b, "pre", collect, &ks), -EIO);
	CHECK(strstr(wstore_last_error(), "(list 'pre')") != NULL);
	CHECK_EQ_INT(b->list(b, "pre", collect, &ks), -EIO);
	CHECK_EQ_INT(put_str(b, "k", "v"), 0);
	b->free(b);
}

static void check_fault_data(void)
{
	wstore_backend *b = fault_over_mem("short=2,corrupt=3,forget=2");
	char buf[64];
	size_t n = 0;
	int diff;

	if (!b) {
		CHECK(0);
		return;
	}
	CHECK_EQ_INT(put_str(b, "k", "abcdef"), 0);
	CHECK_EQ_INT(get_str(b, "k", buf), 0);
	CHECK_STR(buf, "abcdef");
	CHECK_EQ_INT(b->get(b, "k", buf, sizeof(buf), &n), 0); /* short */
	CHECK_EQ_INT(n, 5);
	CHECK(memcmp(buf, "abcde", 5) == 0);
	CHECK_EQ_INT(b->get(b, "k", buf, sizeof(buf), &n), 0); /* corrupt */
	CHECK_EQ_INT(n, 6);
	CHECK(memcmp(buf, "abcdef", 6) != 0);
	diff = 0;
	for (int i = 0; i < 6; i++)
		diff += buf[i] != "abcdef"[i];
	CHECK_EQ_INT(diff, 1);
	CHECK_EQ_INT(get_str(b, "k", buf), 0);
	CHECK_STR(buf, "abcdef");
	/* forget=2: the second put succeeds but stores nothing */
	CHECK_EQ_INT(put_str(b, "forgotten", "v"), 0);
	CHECK_EQ_INT(get_str(b, "forgotten", buf), WSTORE_ENOTFOUND);
	CHECK_EQ_INT(put_str(b, "forgotten", "v"), 0);
	CHECK_EQ_INT(get_str(b, "forgotten", buf), 0);
	b->free(b);
}

static void check_fault_modes(void)
{
	wstore_backend *b = fault_over_mem("writeonce");
	char buf[64];
	size_t n = 9;

	if (!b) {
		CHECK(0);
		return;
	}
	CHECK(b->flags & WSTORE_BACKEND_WRITE_ONCE);
	CHECK(b->upsert == NULL);
	CHECK_EQ_INT(put_str(b, "k", "old"), 0);
	CHECK_EQ_INT(put_str(b, "k", "new"), 0);
	CHECK_EQ_INT(get_str(b, "k", buf), 0);
	CHECK_STR(buf, "old");
	CHECK_EQ_INT(b->put_new(b, "k", "x", 1), WSTORE_EEXISTS);
	b->free(b);

	b = fault_over_mem("emptymissing");
	CHECK(b->flags & WSTORE_BACKEND_EMPTY_MISSING);
	CHECK(b->upsert != NULL);
	CHECK_EQ_INT(b->get(b, "missing", buf, sizeof(buf), &n), 0);
	CHECK_EQ_INT(n, 0);
	CHECK_EQ_INT(size_of(b, "missing"), 0);
	CHECK_EQ_INT(b->remove(b, "missing", 1), WSTORE_ENOTFOUND);
	CHECK_EQ_INT(put_str(b, "k", "v"), 0);
	CHECK_EQ_INT(get_str(b, "k", buf), 0);
	CHECK_STR(buf, "v");
	b->free(b);

	/* no faults: a transparent wrapper that mirrors optional callbacks */
	wstore_backend *inner = NULL;

	CHECK_EQ_INT(wstore_backend_mem_new(&inner, 0), 0);
	inner->list = NULL;
	inner->get_range = NULL;
	CHECK_EQ_INT(wstore__backend_fault_new(&b, inner, ""), 0);
	CHECK(b->list == NULL && b->get_range == NULL);
	CHECK(b->update != NULL && b->put_new != NULL && b->upsert != NULL);
	CHECK_EQ_INT(wstore__backend_fault_calls(inner), 0);
	b->free(b);
}

static void check_fault_crash(void)
{
	pid_t pid = fork();
	int status = 0;

	if (pid == 0) {
		wstore_backend *b = fault_over_mem("crash=2");

		if (!b)
			_exit(1);
		put_str(b, "k", "v");
		put_str(b, "k", "v");
		_exit(0);
	}
	wait_child(pid, &status, 60);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 137);
}

static void check_fault_spec_errors(void)
{
	static const char *const bad[] = {
		"fail=0",    "fail=x",	       "fail=",	     "fail=3++",
		"fail=-1",   "failop=bogus:1", "failop=get", "failop=get:",
		"short=",    "corrupt=1+",     "nonsense",   "writeonce=1",
		"crash=abc",
	};
	wstore_backend *inner = NULL, *b = NULL;

	CHECK_EQ_INT(wstore_backend_mem_new(&inner, 0), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		char spec[64];

		snprintf(spec, sizeof(spec), "fail=1,%s", bad[i]);
		CHECK_EQ_INT(wstore__backend_fault_new(&b, inner, spec),
			     WSTORE_EINVAL);
		CHECK(b == NULL);
		CHECK(strstr(wstore_last_error(), bad[i]) != NULL);
	}
	/* the caller still owns inner after a failure */
	CHECK_EQ_INT(put_str(inner, "k", "v"), 0);
	inner->free(inner);
}

static void *get_loop(void *arg)
{
	worker *w = arg;
	char buf[64];

	for (int i = 0; i < w->n; i++)
		if (get_str(w->b, w->key, buf) != 0)
			w->failures++;
	return NULL;
}

static void check_fault_threads(void)
{
	wstore_backend *b = fault_over_mem("fail=150");
	pthread_t t[4];
	worker w[4];
	int failures = 0;

	if (!b) {
		CHECK(0);
		return;
	}
	CHECK_EQ_INT(put_str(b, "k", "v"), 0);
	for (int i = 0; i < 4; i++) {
		w[i] = (worker){ b, "k", 100, 0 };
		pthread_create(&t[i], NULL, get_loop, &w[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		failures += w[i].failures;
	}
	CHECK_EQ_INT(failures, 1);
	CHECK_EQ_INT(wstore__backend_fault_calls(b), 401);
	b->free(b);
}

void test_backend_fault(void)
{
	char *dir = unit_tmpdir();
	wstore_backend *inner = NULL, *b = NULL;

	check_fault_fail();
	check_fault_data();
	check_fault_modes();
	check_fault_crash();
	check_fault_spec_errors();
	check_fault_threads();
	/* a transparent wrapper passes the contract, on file and mem */
	CHECK_EQ_INT(wstore_backend_file_new(&inner, dir), 0);
	CHECK_EQ_INT(wstore__backend_fault_new(&b, inner, NULL), 0);
	if (b) {
		b->free(b);
	}
	b = fault_over_mem("");
	if (b) {
		b->free(b);
	}
	unit_rmtree(dir);
	free(dir);
}
