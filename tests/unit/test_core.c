/*
 * test_core.c - the core's defences against failures it cannot prevent:
 * a failed allocation while an index is parsed or edited (strdup is
 * replaced here so the k-th copy can be made to fail), and a backend that
 * reports sizes no value of wstore's can have, and an import source whose
 * file is swapped for a FIFO after the scan; the no-follow directory walk
 * the file store and pull share; store URLs resolved through the table
 * of backend kinds; an import whose lock is taken over while it runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/common/clock.h"
#include "backends/helpers.h"
#include "index.h"
#include "names.h"
#include "scan.h"
#include "store.h"
#include "unit.h"

/* strdup fails when this reaches 0 (counted down by each call); < 0:
 * never.  Defined here, it replaces libc's for the whole unit binary,
 * which links the library statically. */
static int strdup_fail_in = -1;

char *strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p;

	if (strdup_fail_in == 0) {
		errno = ENOMEM;
		return NULL;
	}
	if (strdup_fail_in > 0)
		strdup_fail_in--;
	p = malloc(n);
	if (p)
		memcpy(p, s, n);
	return p;
}

/* Every copy of a parsed index failing in turn: ENOMEM and nothing out,
 * never a list with a hole in it. */
static void index_parse_nomem(void)
{
	static const char json[] = "[\"c-3\",\"a-1\",\"b-2\"]";
	int ok = 0;

	for (int k = 0; k < 8 && !ok; k++) {
		char **ids = (char **)1;
		size_t n = 99;
		int rc;

		strdup_fail_in = k;
		rc = wstore__index_parse(&ids, &n, json, strlen(json));
		strdup_fail_in = -1;
		if (rc == 0) {
			ok = 1;
			CHECK_EQ_INT(k, 3);
			CHECK_EQ_INT(n, 3);
			CHECK_STR(ids[0], "a-1");
			CHECK_STR(ids[2], "c-3");
			CHECK(ids[3] == NULL);
			wstore_strings_free(ids);
		} else {
			CHECK_EQ_INT(rc, -ENOMEM);
			CHECK(ids == NULL);
			CHECK_EQ_INT(n, 0);
		}
	}
	CHECK(ok);
}

/* Adding to an index while copies fail: an error or a complete index. */
static void index_add_nomem(void)
{
	wstore_backend *b = NULL;
	wstore_store *s = NULL;
	int done = 0;

	CHECK(wstore_backend_mem_new(&b, 0) == 0);
	if (!b || wstore_open_backend(&s, b) < 0)
		return;
	CHECK(wstore__index_add(s, "weight/index/models", "a-1", NULL) == 0);
	CHECK(wstore__index_add(s, "weight/index/models", "c-3", NULL) == 0);
	for (int k = 0; k < 16 && !done; k++) {
		int rc;

		strdup_fail_in = k;
		rc = wstore__index_add(s, "weight/index/models", "b-2", NULL);
		strdup_fail_in = -1;
		if (rc == 0)
			done = 1;
		else
			CHECK_EQ_INT(rc, -ENOMEM);
	}
	CHECK(done);
	{
		char *v = NULL;

		CHECK(wstore__get_alloc(s, "weight/index/models", &v, NULL) ==
		      0);
		CHECK_STR(v, "[\"a-1\",\"b-2\",\"c-3\"]");
		free(v);
	}
	wstore_free(s);
}

void test_core_index_nomem(void)
{
	index_parse_nomem();
	index_add_nomem();
}

/* ---- sizes a backend reports ------------------------------------------- */

/* A backend whose get reports the size in `report` (ERANGE when it does
 * not fit, else success with that length, whatever the buffer). */
struct liar {
	wstore_backend pub;
	size_t report;
	int lie_fits; /* 1: return 0 with report even when it exceeds cap */
};

static int liar_put(wstore_backend *b, const char *k, const void *d, size_t n)
{
	(void)b, (void)k, (void)d, (void)n;
	return 0;
}

static int liar_get(wstore_backend *b, const char *key, void *buf, size_t cap,
		    size_t *out_len)
{
	struct liar *l = (struct liar *)b;

	(void)key;
	*out_len = l->report;
	if (l->report > cap && !l->lie_fits)
		return WSTORE_ERANGE;
	memset(buf, 'x', l->report < cap ? l->report : cap);
	return 0;
}

static int liar_size(wstore_backend *b, const char *key, uint64_t *out)
{
	(void)key;
	*out = ((struct liar *)b)->report;
	return 0;
}

static int liar_remove(wstore_backend *b, const char *key, int force)
{
	(void)b, (void)key, (void)force;
	return 0;
}

static void liar_free(wstore_backend *b)
{
	free(b);
}

static wstore_store *liar_store(struct liar **out)
{
	struct liar *l = calloc(1, sizeof(*l));
	wstore_store *s = NULL;

	*out = l;
	if (!l)
		return NULL;
	l->pub.version = WSTORE_BACKEND_VERSION;
	l->pub.struct_size = sizeof(l->pub);
	l->pub.name = "liar";
	l->pub.put = liar_put;
	l->pub.get = liar_get;
	l->pub.size = liar_size;
	l->pub.remove = liar_remove;
	l->pub.free = liar_free;
	if (wstore_open_backend(&s, &l->pub) < 0) {
		free(l);
		*out = NULL;
	}
	return s;
}

/* get_alloc of key with the backend reporting n bytes: the result. */
static int get_reported(wstore_store *s, struct liar *l, const char *key,
			size_t n, int lie_fits)
{
	char *v = (char *)1;
	size_t len = 7;
	int rc;

	l->report = n;
	l->lie_fits = lie_fits;
	rc = wstore__get_alloc(s, key, &v, &len);
	if (rc < 0)
		CHECK(v == NULL);
	else
		free(v);
	return rc;
}

void test_core_reported_sizes(void)
{
	struct liar *l = NULL;
	wstore_store *s = liar_store(&l);
	const char *kind = NULL;

	CHECK(s != NULL);
	if (!s)
		return;
	/* SIZE_MAX once made realloc(buf, cap + 1) a realloc(buf, 0) */
	CHECK_EQ_INT(
		get_reported(s, l, "weight/models/m-1/manifest", SIZE_MAX, 0),
		WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), "manifest") != NULL);
	CHECK_EQ_INT(get_reported(s, l, "weight/index/models", SIZE_MAX - 1, 0),
		     WSTORE_ECORRUPT);
	/* a maximum per kind: a lock record of a megabyte is no lock */
	CHECK_EQ_INT(get_reported(s, l, "weight/locks/models/m-1", 1u << 20, 0),
		     WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), "lock") != NULL);
	CHECK_EQ_INT(get_reported(s, l, "weight/meta/models/m-1", 2u << 20, 0),
		     WSTORE_ECORRUPT);
	CHECK_EQ_INT(
		get_reported(s, l, "weight/leases/models/m-1", 17u << 20, 0),
		WSTORE_ECORRUPT);
	/* within the kind's maximum, a value larger than the first guess */
	CHECK_EQ_INT(
		get_reported(s, l, "weight/models/m-1/manifest", 100000, 0), 0);
	CHECK_EQ_INT(get_reported(s, l, "weight/locks/models/m-1", 300, 0), 0);
	/* success with more bytes than the buffer holds is refused */
	CHECK_EQ_INT(
		get_reported(s, l, "weight/models/m-1/manifest", 1u << 20, 1),
		WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), "buffer") != NULL);
	CHECK_EQ_INT(
		get_reported(s, l, "weight/models/m-1/manifest", SIZE_MAX, 1),
		WSTORE_ECORRUPT);
	CHECK_EQ_INT(wstore__key_value_max("weight/locks/catalog", &kind),
		     64u << 10);
	CHECK_STR(kind, "lock");
	CHECK(wstore__key_value_max("weight/models/m-1/manifest", &kind) >=
	      (256u << 20));
	CHECK_STR(kind, "manifest");
	wstore_free(s);
}

/* ---- an import source swapped for a FIFO ------------------------------- */

/* Run fn(arg) in a child and return its exit status, or -1 if it did not
 * finish within secs (it is then killed): an open that blocks on a FIFO
 * must fail the test, not hang the suite. */
static int run_bounded(int (*fn)(void *), void *arg, unsigned secs)
{
	struct timespec dl = wclock_deadline_in(secs * 1000ull);
	pid_t pid = fork();
	int status = 0;

	if (pid == 0)
		_exit(fn(arg));
	if (pid < 0)
		return -2;
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (wclock_passed(&dl)) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		wclock_sleep_ms(10);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -3;
}

static void write_file(const char *path, size_t n)
{
	FILE *f = fopen(path, "w");

	for (size_t i = 0; f && i < n; i++)
		fputc('a' + (int)(i % 26), f);
	if (f)
		fclose(f);
}

/* 0 if the last error names path and says it is not a regular file. */
static int says_not_regular(const char *path)
{
	const char *e = wstore_last_error();

	if (strstr(e, path) && strstr(e, "not a regular file"))
		return 0;
	fprintf(stderr, "unexpected error: %s\n", e);
	return 1;
}

/* Child: open a source file that became a FIFO. */
static int open_swapped(void *arg)
{
	struct stat st;
	int fd = wstore__source_open(arg, &st);

	if (fd >= 0)
		return 10;
	return fd == WSTORE_EINVAL ? says_not_regular(arg) : 11;
}

struct swap {
	const char *victim; /* replaced by a FIFO at the first progress */
	int swapped;
};

static int swap_on_progress(uint64_t done, uint64_t total, const char *path,
			    void *ctx)
{
	struct swap *sw = ctx;

	(void)done, (void)total, (void)path;
	if (!sw->swapped++ &&
	    (unlink(sw->victim) < 0 || mkfifo(sw->victim, 0600) < 0))
		return 1;
	return 0;
}

/* Child: import a source whose second file becomes a FIFO while the first
 * is being stored (its tenth chunk is not read yet: the reader waits for
 * pool buffers, or streams, one chunk per progress call), then import it
 * again once it is a file: the failure released the lock. */
static int import_swapped(void *arg)
{
	const char *dir = arg;
	char a[4096], b[4096]; /* the source, its file b.bin */
	wstore_import_options o = WSTORE_IMPORT_OPTIONS_INIT;
	struct swap sw = { b, 0 };
	wstore_backend *be = NULL;
	wstore_store *s = NULL;
	int rc;

	snprintf(b, sizeof(b), "%s/src/b.bin", dir);
	if (wstore_backend_mem_new(&be, 0) < 0 ||
	    wstore_open_backend(&s, be) < 0)
		return 20;
	o.checkpoint_id = "fifo-1";
	o.model_id = "t/fifo";
	o.chunk_size = 4096;
	o.jobs = 1;
	o.progress = swap_on_progress;
	o.progress_ctx = &sw;
	snprintf(a, sizeof(a), "%s/src", dir);
	o.source = a;
	rc = wstore_import(s, &o);
	if (rc != WSTORE_EINVAL || !sw.swapped)
		return 21;
	if (says_not_regular(b))
		return 22;
	unlink(b);
	write_file(b, 100);
	o.progress = NULL;
	rc = wstore_import(s, &o);
	wstore_free(s);
	return rc == 0 ? 0 : 23;
}

void test_core_source_fifo(void)
{
	char *dir = unit_tmpdir();
	char src[2048], path[4096];

	CHECK(dir != NULL);
	if (!dir)
		return;
	snprintf(src, sizeof(src), "%s/src", dir);
	CHECK_EQ_INT(mkdir(src, 0755), 0);
	snprintf(path, sizeof(path), "%s/a.bin", src);
	write_file(path, 10 * 4096);
	snprintf(path, sizeof(path), "%s/b.bin", src);
	write_file(path, 100);
	CHECK_EQ_INT(run_bounded(import_swapped, dir, 60), 0);

	/* the helper itself, on a file swapped after a scan */
	{
		wstore__scan sc;

		CHECK_EQ_INT(wstore__scan_source(&sc, src), 0);
		CHECK_EQ_INT(sc.n, 2);
		CHECK_EQ_INT(unlink(path), 0);
		CHECK_EQ_INT(mkfifo(path, 0600), 0);
		CHECK_EQ_INT(run_bounded(open_swapped, path, 30), 0);
		wstore__scan_free(&sc);
	}
	unit_rmtree(dir);
	free(dir);
}

/* ---- directories reached without a symlink ----------------------------- */

void test_core_nofollow(void)
{
	char *dir = unit_tmpdir();
	wstore__nofollow_fail nf = { 0, 0 };
	size_t base = 0;
	int dfd, fd;

	CHECK(dir != NULL);
	if (!dir)
		return;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(dfd >= 0);
	/* no '/': dirfd itself */
	CHECK_EQ_INT(wstore__nofollow_parent(dfd, "x", 0, &base, &nf), dfd);
	CHECK_EQ_INT(base, 0);
	/* missing, then made */
	CHECK_EQ_INT(wstore__nofollow_parent(dfd, "a/b/x", 0, &base, &nf),
		     -ENOENT);
	CHECK_EQ_INT(nf.len, 1);
	CHECK_EQ_INT(nf.creating, 0);
	fd = wstore__nofollow_parent(dfd, "a/b/x", WSTORE__NOFOLLOW_CREATE,
				     &base, &nf);
	CHECK(fd >= 0 && fd != dfd);
	CHECK_EQ_INT(base, 4);
	CHECK(faccessat(dfd, "a/b", F_OK, 0) == 0);
	if (fd >= 0)
		close(fd);
	/* a symlink on the way is ELOOP, made or not, never followed */
	CHECK_EQ_INT(symlinkat(".", dfd, "a/l"), 0);
	CHECK_EQ_INT(wstore__nofollow_parent(dfd, "a/l/b/x",
					     WSTORE__NOFOLLOW_CREATE, &base,
					     &nf),
		     -ELOOP);
	CHECK_EQ_INT(nf.len, 3);
	CHECK(faccessat(dfd, "a/b/b", F_OK, 0) < 0);
	/* a file on the way: not a directory */
	close(openat(dfd, "a/f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	CHECK_EQ_INT(wstore__nofollow_parent(dfd, "a/f/x", 0, &base, &nf),
		     -ENOTDIR);
	fd = wstore__nofollow_subdir(dfd, "a");
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	CHECK_EQ_INT(wstore__nofollow_subdir(dfd, "a/l"), -1);
	CHECK_EQ_INT(errno, ELOOP);
	close(dfd);
	unit_rmtree(dir);
	free(dir);
}

/* ---- store URLs and the table of backend kinds ------------------------- */

/* The backend name url opens, or the error, in out. */
static int open_name(const char *url, char *out, size_t cap)
{
	wstore_store *s = NULL;
	int rc = wstore_open_url(&s, url);

	snprintf(out, cap, "%s",
		 rc == 0 ? wstore_backend_name(s) : wstore_last_error());
	wstore_free(s);
	return rc;
}

void test_core_urls(void)
{
	char *dir = unit_tmpdir(), url[4200], got[512];

	CHECK(dir != NULL);
	if (!dir)
		return;
	CHECK_EQ_INT(open_name("nope://x", got, sizeof(got)), WSTORE_EINVAL);
	CHECK_STR(got, "config key 'store': unknown store URL 'nope://x': "
		       "expected a directory, file://, "
		       "redis://, rediss://, redis+unix://, redis-cluster://, "
		       "rediss-cluster:// or mooncake://");
	CHECK_EQ_INT(open_name("mem", got, sizeof(got)), 0);
	CHECK_STR(got, "mem");
	CHECK_EQ_INT(open_name("mem://", got, sizeof(got)), 0);
	CHECK_STR(got, "mem");
	/* "mem" matches only whole */
	CHECK_EQ_INT(open_name("mem://x", got, sizeof(got)), WSTORE_EINVAL);
	CHECK_EQ_INT(open_name("fault+mem://", got, sizeof(got)), 0);
	CHECK_STR(got, "fault");
	CHECK_EQ_INT(open_name("fault+nope://x", got, sizeof(got)),
		     WSTORE_EINVAL);
	CHECK(strstr(got, "nope://x'") != NULL);
	CHECK_EQ_INT(open_name(dir, got, sizeof(got)), 0);
	CHECK_STR(got, "file");
	snprintf(url, sizeof(url), "file://%s/sub", dir);
	CHECK_EQ_INT(open_name(url, got, sizeof(got)), 0);
	CHECK_STR(got, "file");
	CHECK_EQ_INT(open_name("file://", got, sizeof(got)), WSTORE_EINVAL);
	CHECK(strstr(got, "empty") != NULL);
	unit_rmtree(dir);
	free(dir);
}

/* ---- an import whose lock is taken over while it runs ------------------ */
/*
 * The lock record of the import is replaced by another owner's at its
 * first progress (as a process that took the lock over after the
 * import's renewals failed for a TTL would); the progress callback then
 * waits until the renewal thread has looked at the record again (it
 * counts the lock's updates), so the import knows its lock is lost.
 */
static int (*mem_update)(wstore_backend *b, const char *key,
			 wstore_update_fn fn, void *ctx);
static _Atomic int lost_updates = -1; /* < 0: not taken over yet */

static int counting_update(wstore_backend *b, const char *key,
			   wstore_update_fn fn, void *ctx)
{
	int rc = mem_update(b, key, fn, ctx);

	if (strcmp(key, "weight/locks/models/lost-1") == 0 &&
	    atomic_load(&lost_updates) >= 0)
		atomic_fetch_add(&lost_updates, 1);
	return rc;
}

static int take_over_on_progress(uint64_t done, uint64_t total,
				 const char *path, void *ctx)
{
	static const char rec[] =
		"{\"token\":\"0123456789abcdef0123456789abcdef\","
		"\"pid\":1,\"host\":\"elsewhere\",\"expires_ms\":"
		"99999999999999}";
	wstore_backend *b = ctx;
	struct timespec dl;

	(void)done, (void)total, (void)path;
	if (atomic_load(&lost_updates) >= 0)
		return 0;
	b->remove(b, "weight/locks/models/lost-1", 1);
	if (b->put(b, "weight/locks/models/lost-1", rec, sizeof(rec) - 1) < 0)
		return 1;
	atomic_store(&lost_updates, 0);
	dl = wclock_deadline_in(30000);
	while (atomic_load(&lost_updates) < 1 && !wclock_passed(&dl))
		wclock_sleep_ms(10);
	return 0;
}

void test_core_import_lock_lost(void)
{
	wstore_import_options o = WSTORE_IMPORT_OPTIONS_INIT;
	char *src = unit_tmpdir(), path[4096];
	wstore_manifest *m = NULL;
	wstore_backend *b = NULL;
	wstore_store *s = NULL;
	char **ids = NULL;
	size_t n = 0;
	int rc;

	snprintf(path, sizeof(path), "%s/w.bin", src);
	write_file(path, 3 * 4096);
	CHECK(wstore_backend_mem_new(&b, 0) == 0 && b->update);
	if (!b || !b->update || wstore_open_backend(&s, b) < 0)
		goto out;
	mem_update = b->update;
	b->update = counting_update;
	setenv("WSTORE_LOCK_TTL_MS", "300", 1); /* renewed every 100 ms */
	o.checkpoint_id = "lost-1";
	o.model_id = "t/lost";
	o.chunk_size = 4096;
	o.jobs = 1;
	o.source = src;
	o.progress = take_over_on_progress;
	o.progress_ctx = b;
	rc = wstore_import(s, &o);
	unsetenv("WSTORE_LOCK_TTL_MS");
	CHECK(atomic_load(&lost_updates) >= 1); /* the renewal looked */
	CHECK_EQ_INT(rc, WSTORE_EBUSY);
	CHECK(strstr(wstore_last_error(), "lock was taken over") != NULL);
	/* nothing READY: a FAILED manifest (or none), not in the index */
	rc = wstore_manifest_read(&m, s, "lost-1");
	CHECK(rc == WSTORE_ENOTFOUND ||
	      (rc == 0 && strcmp(wstore_manifest_status(m), "FAILED") == 0));
	wstore_manifest_free(m);
	CHECK_EQ_INT(wstore_list(&ids, &n, s), 0);
	CHECK_EQ_INT(n, 0);
	wstore_strings_free(ids);
out:
	wstore_free(s);
	unit_rmtree(src);
	free(src);
}
