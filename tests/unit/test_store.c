/*
 * test_store.c - the store front end (store.c): the backend interface
 * checks of wstore_open_backend, capabilities, whole-value reads, replace
 * and remove on strong and write-once stores, chunk reads judged
 * against the manifest, and notices set while other threads deliver them.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/common/clock.h"
#include "error.h"
#include "manifest.h"
#include "store.h"
#include "fixture.h"
#include "unit.h"

static void test_open_backend_checks(void)
{
	wstore_backend *b = NULL;
	wstore_store *s = NULL;
	size_t full;

	CHECK(wstore_backend_mem_new(&b, 0) == 0);
	if (!b)
		return;
	full = b->struct_size;
	CHECK_EQ_INT(full, sizeof(wstore_backend));
	CHECK_EQ_INT(b->version, WSTORE_BACKEND_VERSION);
	CHECK_EQ_INT(WSTORE_BACKEND_VERSION, 2);

	b->version = 1;
	CHECK_EQ_INT(wstore_open_backend(&s, b), WSTORE_EINVAL);
	CHECK(s == NULL);
	CHECK(strstr(wstore_last_error(), "version 1") != NULL);
	b->version = WSTORE_BACKEND_VERSION;

	/* a struct from before sweep_temps existed is refused */
	b->struct_size = offsetof(wstore_backend, sweep_temps);
	CHECK_EQ_INT(wstore_open_backend(&s, b), WSTORE_EINVAL);
	CHECK(strstr(wstore_last_error(), "bytes") != NULL);
	b->struct_size = full;

	{
		int (*get)(wstore_backend *, const char *, void *, size_t,
			   size_t *) = b->get;

		b->get = NULL;
		CHECK_EQ_INT(wstore_open_backend(&s, b), WSTORE_EINVAL);
		CHECK(strstr(wstore_last_error(), "required callback") != NULL);
		b->get = get;
	}
	CHECK_EQ_INT(wstore_open_backend(&s, b), 0);
	CHECK(s != NULL);
	CHECK(wstore_store_backend(s) == b);
	CHECK_STR(wstore_backend_name(s), "mem");
	wstore_free(s);
	CHECK_EQ_INT(wstore_open_backend(&s, NULL), WSTORE_EINVAL);
}

static void test_has_callback(void)
{
	wstore_backend *b = NULL;

	CHECK(wstore_backend_mem_new(&b, 0) == 0);
	if (!b)
		return;
	CHECK(!WSTORE__HAS(b, sweep_temps)); /* mem leaves nothing behind */
	CHECK(WSTORE__HAS(b, get));
	/* a field past the size the backend was built with reads as absent */
	b->struct_size = offsetof(wstore_backend, get);
	CHECK(!WSTORE__HAS(b, get));
	b->struct_size = sizeof(*b);
	b->free(b);
}

static void test_caps(void)
{
	wstore_store *s = unit_mem_store(0, 0);
	char *dir = unit_tmpdir();
	unsigned c;

	CHECK(s != NULL);
	if (s) {
		c = wstore_store_caps(s);
		CHECK(c & WSTORE_CAP_LIST);
		CHECK(!(c & WSTORE_CAP_WRITE_ONCE));
		CHECK(!(c & WSTORE_CAP_LOCAL_FILES));
		wstore_free(s);
	}
	s = unit_mem_store(0, WSTORE_BACKEND_WRITE_ONCE);
	CHECK(s != NULL);
	if (s) {
		CHECK(wstore_store_caps(s) & WSTORE_CAP_WRITE_ONCE);
		wstore_free(s);
	}
	CHECK_EQ_INT(wstore_open_url(&s, dir), 0);
	if (s) {
		c = wstore_store_caps(s);
		CHECK(c & WSTORE_CAP_LOCAL_FILES);
		CHECK(c & WSTORE_CAP_LIST);
		CHECK(c & WSTORE_CAP_RANGE_READS);
		CHECK(!(c & WSTORE_CAP_UNTRUSTED));
		CHECK(WSTORE__HAS(wstore_store_backend(s), sweep_temps));
		wstore_free(s);
	}
	unit_rmtree(dir);
	free(dir);
}

static void test_get_replace_remove(unsigned flags)
{
	wstore_store *s = unit_mem_store(0, flags);
	char *v = NULL;
	size_t n = 0;

	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_EQ_INT(wstore__get_alloc(s, "k", &v, &n), WSTORE_ENOTFOUND);
	CHECK(v == NULL);
	CHECK_EQ_INT(wstore__remove(s, "k"), 0); /* missing counts as done */
	CHECK_EQ_INT(wstore__replace(s, "k", "one", 3), 0);
	CHECK_EQ_INT(wstore__get_alloc(s, "k", &v, &n), 0);
	CHECK_EQ_INT(n, 3);
	CHECK_STR(v, "one"); /* NUL-terminated */
	free(v);
	v = NULL;
	/* replace really replaces, also where put keeps the old value */
	CHECK_EQ_INT(wstore__replace(s, "k", "second", 6), 0);
	CHECK_EQ_INT(wstore__get_alloc(s, "k", &v, &n), 0);
	CHECK_STR(v, "second");
	free(v);
	v = NULL;
	CHECK_EQ_INT(wstore__remove(s, "k"), 0);
	CHECK_EQ_INT(wstore__get_alloc(s, "k", &v, &n), WSTORE_ENOTFOUND);
	wstore_free(s);
}

static void test_get_empty_missing(void)
{
	wstore_store *s = unit_mem_store(0, WSTORE_BACKEND_EMPTY_MISSING);
	char *v = NULL;
	size_t n = 7;

	CHECK(s != NULL);
	if (!s)
		return;
	/* such a store returns an empty value for a missing key */
	CHECK_EQ_INT(wstore__get_alloc(s, "absent", &v, &n), WSTORE_ENOTFOUND);
	CHECK(v == NULL);
	wstore_free(s);
}

/* A file of size bytes in chunks of cs, keys "c0", "c1", ... */
static wstore__file_rec *file_record(wstore_manifest *m, uint64_t size,
				     uint64_t cs, uint64_t nchunks)
{
	wstore__file_rec *f = wstore__manifest_add_file(m, "w.bin");
	char key[32];

	if (!f)
		return NULL;
	f->size = size;
	f->chunk_size = cs;
	for (uint64_t i = 0; i < nchunks; i++) {
		snprintf(key, sizeof(key), "c%llu", (unsigned long long)i);
		if (wstore__file_rec_add_chunk(f, key) < 0)
			return NULL;
	}
	return f;
}

static void test_chunks(void)
{
	wstore_store *s = unit_mem_store(0, 0);
	wstore_manifest *m = wstore__manifest_new();
	wstore__file_rec *f;
	uint64_t len = 0;
	char buf[16];

	CHECK(s != NULL && m != NULL);
	if (!s || !m)
		goto out;
	f = file_record(m, 10, 4, 3); /* 4 + 4 + 2 */
	CHECK(f != NULL);
	if (!f)
		goto out;
	CHECK_EQ_INT(wstore__chunk_len(&len, f, 0), 0);
	CHECK_EQ_INT(len, 4);
	CHECK_EQ_INT(wstore__chunk_len(&len, f, 2), 0);
	CHECK_EQ_INT(len, 2);
	CHECK_EQ_INT(wstore__max_chunk(m), 4);

	wstore_backend *b = wstore_store_backend(s);
	CHECK_EQ_INT(b->put(b, "c0", "abcd", 4), 0);
	CHECK_EQ_INT(b->put(b, "c1", "efg", 3), 0);   /* short */
	CHECK_EQ_INT(b->put(b, "c2", "hijkl", 5), 0); /* long */
	CHECK_EQ_INT(wstore__read_chunk(s, f, 0, buf, sizeof(buf)), 0);
	CHECK(memcmp(buf, "abcd", 4) == 0);
	CHECK_EQ_INT(wstore__read_chunk(s, f, 1, buf, sizeof(buf)),
		     WSTORE_ECORRUPT);
	CHECK(strstr(wstore_last_error(), "w.bin") != NULL);
	CHECK_EQ_INT(wstore__read_chunk(s, f, 2, buf, sizeof(buf)),
		     WSTORE_ECORRUPT);
	CHECK_EQ_INT(b->remove(b, "c0", 1), 0);
	CHECK_EQ_INT(wstore__read_chunk(s, f, 0, buf, sizeof(buf)),
		     WSTORE_ECORRUPT); /* missing */

	/* legacy single chunk without chunk_size maps to the whole file */
	f = file_record(m, 5, 0, 1);
	CHECK(f != NULL);
	if (f) {
		CHECK_EQ_INT(wstore__chunk_len(&len, f, 0), 0);
		CHECK_EQ_INT(len, 5);
	}
	/* several chunks without a chunk size cannot be mapped */
	f = file_record(m, 10, 0, 2);
	CHECK(f != NULL);
	if (f)
		CHECK_EQ_INT(wstore__chunk_len(&len, f, 1),
			     WSTORE_EUNSUPPORTED);
out:
	wstore_manifest_free(m);
	wstore_free(s);
}

static void test_first_err(void)
{
	wstore__first_err fe = { 0 };

	CHECK_EQ_INT(wstore__first_err_raise(&fe), 0); /* nothing kept */
	wstore__err(WSTORE_ECORRUPT, "first failure");
	CHECK_EQ_INT(wstore__first_err_keep(&fe, WSTORE_ECORRUPT),
		     WSTORE_ECORRUPT);
	wstore__err(WSTORE_EBUSY, "second failure");
	CHECK_EQ_INT(wstore__first_err_keep(&fe, WSTORE_EBUSY), WSTORE_EBUSY);
	wstore__err(0, "cleanup said something else");
	CHECK_EQ_INT(wstore__first_err_raise(&fe), WSTORE_ECORRUPT);
	CHECK_STR(wstore_last_error(), "first failure");
	CHECK_EQ_INT(wstore__first_err_keep(&fe, 0), 0);
	CHECK_EQ_INT(fe.code, WSTORE_ECORRUPT);
}

static void test_jobs(void)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	CHECK_EQ_INT(wstore__jobs(3), 3);
	CHECK(wstore__jobs(0) >= 1);
	if (cores > 0)
		CHECK(wstore__jobs(0) <= (unsigned)cores);
}

/* ---- notices: set while backend threads deliver them ------------------- */

struct notice_ctx {
	atomic_int retired; /* set once wstore_set_notice replaced it */
	atomic_int calls, late;
};

static void on_notice(const char *msg, void *vctx)
{
	struct notice_ctx *c = vctx;

	(void)msg;
	atomic_fetch_add(&c->calls, 1);
	if (atomic_load(&c->retired))
		atomic_fetch_add(&c->late, 1);
}

struct notifier {
	wstore_backend *b;
	atomic_int *stop;
};

static void *notify_loop(void *arg)
{
	struct notifier *n = arg;

	while (!atomic_load(n->stop))
		wstore_backend_notice(n->b, "waiting for %s", "something");
	return NULL;
}

/* Until a notice reached c (at most 100 ms: the threads may not run). */
static void delivered(struct notice_ctx *c)
{
	uint64_t t0 = wclock_mono_ms();

	while (!atomic_load(&c->calls) && wclock_mono_ms() - t0 < 100)
		sched_yield();
}

/* wstore_set_notice while three threads deliver notices: once it returns
 * the previous fn is never called again (its ctx may be freed). */
static void test_notice_threads(void)
{
	wstore_store *s = unit_mem_store(0, 0);
	struct notice_ctx a, b;
	struct notifier n;
	atomic_int stop = 0;
	pthread_t t[3];
	int late = 0, calls = 0;

	if (!s) {
		CHECK(!"cannot open a mem store");
		return;
	}
	n.b = wstore_store_backend(s);
	n.stop = &stop;
	for (int i = 0; i < 3; i++)
		CHECK_EQ_INT(pthread_create(&t[i], NULL, notify_loop, &n), 0);
	for (int round = 0; round < 20; round++) {
		atomic_init(&a.retired, 0);
		atomic_init(&a.calls, 0);
		atomic_init(&a.late, 0);
		atomic_init(&b.retired, 0);
		atomic_init(&b.calls, 0);
		atomic_init(&b.late, 0);
		wstore_set_notice(s, on_notice, &a);
		delivered(&a);
		wstore_set_notice(s, on_notice, &b);
		atomic_store(&a.retired, 1);
		delivered(&b);
		wstore_set_notice(s, NULL, NULL);
		atomic_store(&b.retired, 1);
		/* a's fn after it was replaced, b's after notices were off */
		late += atomic_load(&a.late) + atomic_load(&b.late);
		calls += atomic_load(&a.calls) + atomic_load(&b.calls);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ_INT(late, 0);
	CHECK(calls > 0); /* the threads did deliver while it changed */
	wstore_free(s);
}

/* A notice fn that takes its time (1 ms): deliveries overlap. */
static void on_notice_slow(const char *msg, void *vctx)
{
	uint64_t t0 = wclock_mono_ms();

	on_notice(msg, vctx);
	while (wclock_mono_ms() - t0 < 1)
		sched_yield();
}

struct setter {
	wstore_store *s;
	atomic_int done;
};

static void *set_off(void *arg)
{
	struct setter *st = arg;

	wstore_set_notice(st->s, NULL, NULL);
	atomic_store(&st->done, 1);
	return NULL;
}

/* wstore_set_notice while three threads deliver slow notices back to back
 * (there is always one delivering): it gets its turn.  A lock that lets
 * readers in ahead of a waiting writer kept it waiting until the threads
 * stopped. */
static void test_notice_writer_turn(void)
{
	wstore_store *s = unit_mem_store(0, 0);
	struct notice_ctx a;
	struct notifier n;
	struct setter st;
	atomic_int stop = 0;
	pthread_t t[3], w;
	uint64_t t0;

	if (!s) {
		CHECK(!"cannot open a mem store");
		return;
	}
	atomic_init(&a.retired, 0);
	atomic_init(&a.calls, 0);
	atomic_init(&a.late, 0);
	wstore_set_notice(s, on_notice_slow, &a);
	n.b = wstore_store_backend(s);
	n.stop = &stop;
	for (int i = 0; i < 3; i++)
		CHECK_EQ_INT(pthread_create(&t[i], NULL, notify_loop, &n), 0);
	t0 = wclock_mono_ms();
	while (atomic_load(&a.calls) < 10 && wclock_mono_ms() - t0 < 10000)
		sched_yield();
	st.s = s;
	atomic_init(&st.done, 0);
	CHECK_EQ_INT(pthread_create(&w, NULL, set_off, &st), 0);
	/* bounded: 10 s, on a machine where one delivery takes 1 ms */
	t0 = wclock_mono_ms();
	while (!atomic_load(&st.done) && wclock_mono_ms() - t0 < 10000)
		sched_yield();
	CHECK(atomic_load(&st.done));
	atomic_store(&stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	pthread_join(w, NULL);
	wstore_free(s);
}

void test_store(void)
{
	test_open_backend_checks();
	test_has_callback();
	test_caps();
	test_get_replace_remove(0);
	test_get_replace_remove(WSTORE_BACKEND_WRITE_ONCE);
	test_get_empty_missing();
	test_chunks();
	test_first_err();
	test_jobs();
	test_notice_threads();
	test_notice_writer_turn();
}
