/*
 * test_split.c - split.c: every part runs once, the lowest failing part's
 * error is raised, a busy pool never makes a caller wait (it takes its
 * parts back), and no pool runs everything on the caller.  read.c's use of
 * it (large preads of a file store, at odd offsets across chunks) is
 * test_split_large_preads.
 */
#include <glob.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <wstore/read.h>
#include <wstore/wstore.h>

#include "error.h"
#include "readv.h"
#include "split.h"
#include "fixture.h"
#include "unit.h"

struct parts {
	pthread_t by[WSTORE__SPLIT_MAX];
	int runs[WSTORE__SPLIT_MAX];
	int fail_mask;
};

static int record(void *arg, size_t i)
{
	struct parts *p = arg;

	p->by[i] = pthread_self();
	__atomic_add_fetch(&p->runs[i], 1, __ATOMIC_SEQ_CST);
	if (p->fail_mask & (1 << i))
		return wstore__err(i == 1 ? WSTORE_ECORRUPT : WSTORE_EBUSY,
				   "part %zu failed", i);
	return 0;
}

void test_split_runs_every_part(void)
{
	wstore__split *sp = wstore__split_new();
	struct parts p;

	CHECK(sp != NULL);
	CHECK(wstore__split_width(sp) >= 1);
	CHECK(wstore__split_width(sp) <= WSTORE__SPLIT_MAX);
	for (size_t n = 1; n <= WSTORE__SPLIT_MAX; n++) {
		int bad = 0;

		memset(&p, 0, sizeof(p));
		CHECK_EQ_INT(wstore__split_run(sp, record, &p, n), 0);
		for (size_t i = 0; i < WSTORE__SPLIT_MAX; i++)
			bad += p.runs[i] != (i < n);
		CHECK_EQ_INT(bad, 0);
		/* part 0 always runs on the caller */
		CHECK(pthread_equal(p.by[0], pthread_self()));
	}
	/* the lowest failing part's code and message */
	memset(&p, 0, sizeof(p));
	p.fail_mask = (1 << 1) | (1 << 3);
	CHECK_EQ_INT(wstore__split_run(sp, record, &p, 4), WSTORE_ECORRUPT);
	CHECK_STR(wstore_last_error(), "part 1 failed");
	CHECK_EQ_INT(p.runs[0] + p.runs[1] + p.runs[2] + p.runs[3], 4);
	wstore__split_free(sp);
	/* no pool: everything on the caller */
	memset(&p, 0, sizeof(p));
	CHECK_EQ_INT(wstore__split_run(NULL, record, &p, 3), 0);
	CHECK(pthread_equal(p.by[1], pthread_self()) &&
	      pthread_equal(p.by[2], pthread_self()));
	wstore__split_free(NULL);
}

/* Parts that hold every helper until released: part 0 (the caller's)
 * waits until the helpers hold the others, so the caller never takes one
 * back and holds it itself. */
struct gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int held, want, open;
	wstore__split *sp;
	struct parts p;
};

/* Wait on g->cv until *flag >= want, at most 30 s; 0 if it got there. */
static int gate_wait(struct gate *g, const int *flag, int want)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 30;
	while (*flag < want)
		if (pthread_cond_timedwait(&g->cv, &g->mu, &ts) != 0)
			return *flag >= want ? 0 : -1;
	return 0;
}

static int hold(void *arg, size_t i)
{
	struct gate *g = arg;
	int rc;

	pthread_mutex_lock(&g->mu);
	if (i == 0) {
		rc = gate_wait(g, &g->held, g->want);
	} else {
		g->held++;
		pthread_cond_broadcast(&g->cv);
		rc = gate_wait(g, &g->open, 1);
	}
	pthread_mutex_unlock(&g->mu);
	return rc;
}

static void *hold_all(void *arg)
{
	struct gate *g = arg;

	wstore__split_run(g->sp, hold, g, wstore__split_width(g->sp));
	return NULL;
}

void test_split_busy_pool(void)
{
	struct gate g;
	pthread_t t;
	unsigned helpers;
	int mine = 1;

	memset(&g, 0, sizeof(g));
	pthread_mutex_init(&g.mu, NULL);
	pthread_cond_init(&g.cv, NULL);
	g.sp = wstore__split_new();
	CHECK(g.sp != NULL);
	if (!g.sp)
		return;
	helpers = wstore__split_width(g.sp) - 1;
	g.want = (int)helpers;
	if (helpers == 0) {
		/* one core: nothing to occupy, and nothing to wait for */
		CHECK_EQ_INT(wstore__split_run(g.sp, record, &g.p, 2), 0);
		CHECK(pthread_equal(g.p.by[1], pthread_self()));
		wstore__split_free(g.sp);
		return;
	}
	/* every helper blocked in another caller's parts */
	CHECK_EQ_INT(pthread_create(&t, NULL, hold_all, &g), 0);
	pthread_mutex_lock(&g.mu);
	CHECK_EQ_INT(gate_wait(&g, &g.held, (int)helpers), 0);
	pthread_mutex_unlock(&g.mu);
	/* this call cannot wait for them: it runs every part itself */
	CHECK_EQ_INT(wstore__split_run(g.sp, record, &g.p, helpers + 1), 0);
	for (unsigned i = 0; i <= helpers; i++)
		mine &= pthread_equal(g.p.by[i], pthread_self()) &&
			g.p.runs[i] == 1;
	CHECK(mine);
	pthread_mutex_lock(&g.mu);
	g.open = 1;
	pthread_cond_broadcast(&g.cv);
	pthread_mutex_unlock(&g.mu);
	pthread_join(t, NULL);
	wstore__split_free(g.sp);
	pthread_cond_destroy(&g.cv);
	pthread_mutex_destroy(&g.mu);
}

/* Large preads of a file store are split; every byte must still land. */
void test_split_large_preads(void)
{
	static const size_t offs[] = { 0, 1, 4095, 1048575, 1048576, 3000001 };
	static const size_t lens_[] = { 4u << 20, (4u << 20) + 1, 5000003,
					9u << 20, 13u << 20 };
	const size_t n = (13u << 20) + 777;
	char *dir = unit_tmpdir(), src[4096], url[4200], path[4200];
	wstore_import_options o = WSTORE_IMPORT_OPTIONS_INIT;
	wstore_checkpoint *ck = NULL;
	wstore_store *s = NULL;
	wstore_file *f = NULL;
	char *data = malloc(n), *buf = malloc(n + 4096);
	glob_t g = { 0 };
	int bad = 0;
	FILE *fp;

	CHECK(data && buf);
	if (!data || !buf)
		goto out;
	for (size_t i = 0; i < n; i++)
		data[i] = (char)((i * 2654435761u) >> 13);
	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(path, sizeof(path), "%s/w.bin", src);
	snprintf(url, sizeof(url), "file://%s/store", dir);
	CHECK(mkdir(src, 0755) == 0);
	fp = fopen(path, "wb");
	CHECK(fp && fwrite(data, 1, n, fp) == n);
	if (fp)
		fclose(fp);
	CHECK_EQ_INT(wstore_open_url(&s, url), 0);
	o.checkpoint_id = "big";
	o.model_id = "test/big";
	o.source = src;
	o.chunk_size = 1u << 20; /* parts start and end inside chunks */
	CHECK_EQ_INT(wstore_import(s, &o), 0);
	CHECK_EQ_INT(wstore_checkpoint_open(&ck, s, "big"), 0);
	CHECK_EQ_INT(wstore_file_open(&f, ck, "w.bin"), 0);
	if (!f)
		goto out;
	for (size_t i = 0; i < sizeof(offs) / sizeof(*offs); i++)
		for (size_t j = 0; j < sizeof(lens_) / sizeof(*lens_); j++) {
			size_t got = 0, want = n - offs[i] < lens_[j]
						       ? n - offs[i]
						       : lens_[j];

			memset(buf, 0x5a, want);
			bad += wstore_file_pread(f, buf, lens_[j], offs[i],
						 &got) != 0 ||
			       got != want ||
			       memcmp(buf, data + offs[i], want) != 0;
		}
	CHECK_EQ_INT(bad, 0);
	/* a scatter read (as of tensors): segments cut where parts end,
	 * overlapping and empty ones, out of order */
	{
		static const uint64_t so[] = { 9000000, 5,	 3000000,
					       0,	1048576, 12000000 };
		static const uint64_t sl[] = { 4000000, 2999995, 3500000,
					       0,	2097152, 1000000 };
		wstore__seg segs[6];
		size_t at = 0;

		for (size_t i = 0; i < 6; i++) {
			segs[i] = (wstore__seg){ so[i], sl[i], buf + at };
			at += sl[i];
		}
		memset(buf, 0x5a, at);
		CHECK_EQ_INT(wstore__file_readv(f, segs, 6), 0);
		at = 0;
		bad = 0;
		for (size_t i = 0; i < 6; i++) {
			bad += memcmp(buf + at, data + so[i], sl[i]) != 0;
			at += sl[i];
		}
		CHECK_EQ_INT(bad, 0);
	}
	/* a chunk gone (one a helper's part reads): the read fails, and the
	 * caller gets the message naming the file (chunk files: the old
	 * layout of the file store) */
	CHECK_EQ_INT(fixture_split_data_files(dir), 1);
	/* a file handle keeps the data file it read first: open it anew */
	wstore_file_free(f);
	f = NULL;
	CHECK_EQ_INT(wstore_file_open(&f, ck, "w.bin"), 0);
	if (!f)
		goto out;
	snprintf(path, sizeof(path),
		 "%s/store/weight/models/big/files/*/chunks/00000006", dir);
	if (glob(path, 0, NULL, &g) == 0 && g.gl_pathc == 1) {
		CHECK(unlink(g.gl_pathv[0]) == 0);
		CHECK(wstore_file_pread(f, buf, 9u << 20, 0, NULL) < 0);
		CHECK(strstr(wstore_last_error(), "w.bin") != NULL);
		/* reads that miss it still work */
		CHECK_EQ_INT(wstore_file_pread(f, buf, 4u << 20, 0, NULL), 0);
		CHECK(memcmp(buf, data, 4u << 20) == 0);
	} else {
		CHECK(!"chunk 6 of w.bin found");
	}
	globfree(&g);
out:
	wstore_file_free(f);
	wstore_checkpoint_free(ck);
	wstore_free(s);
	free(data);
	free(buf);
	unit_rmtree(dir);
	free(dir);
}
