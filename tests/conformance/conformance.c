/*
 * conformance.c - the backend conformance suite: every callback of
 * struct wstore_backend (include/wstore/sys/backend.h) checked against its
 * written contract, through the public API only, on whatever store a URL
 * names.  Optional callbacks a backend leaves NULL are reported as not
 * offered (counted as skipped); the weaknesses a backend declares in its flags
 * (WRITE_ONCE, EMPTY_MISSING) widen what counts as a correct answer, and
 * nothing else does.
 *
 * Usage: backend-conformance URL...
 *   a store URL as for --store (file:///dir, redis://..., redis-cluster://
 *   ..., mooncake, fault+<URL> with $WSTORE_FAULTS), settings from the
 *   WSTORE_<KEY> environment variables; or mem, mem+writeonce,
 *   mem+emptymissing for the process-local backend.
 * Keys are written under "wstore-conformance/<pid>-<n>/" and removed at
 * the end.  Prints "<URL>: N passed, N failed, N skipped" per store (a
 * callback not offered skips its checks) and "conformance: N passed,
 * N failed, N skipped" last.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <wstore/sys/backend.h>
#include <wstore/wstore.h>

#include "../lib/check.h"

CHECK_COUNTERS;
static const char *url_now = "";
static char ns[96];

/* An optional callback the backend leaves NULL: its checks are skipped. */
static void not_offered(const char *what)
{
	check_skip("%s not offered (optional)", what);
}

static char *key(const char *name)
{
	static _Thread_local char buf[8][512];
	static _Thread_local int i;
	char *k = buf[i++ % 8];

	snprintf(k, 512, "%s%s", ns, name);
	return k;
}

static int put_str(wstore_backend *b, const char *k, const char *v)
{
	return b->put(b, k, v, strlen(v));
}

/* Value of k as a string ("" if absent on an EMPTY_MISSING store); rc. */
static int get_str(wstore_backend *b, const char *k, char *buf, size_t cap)
{
	size_t n = 0;
	int rc = b->get(b, k, buf, cap - 1, &n);

	buf[rc == 0 ? n : 0] = '\0';
	return rc;
}

/* A missing key reads as missing (or empty where the store says so). */
static int reads_missing(wstore_backend *b, const char *k)
{
	char buf[16];
	size_t n = 99;
	int rc = b->get(b, k, buf, sizeof(buf), &n);

	if (rc == WSTORE_ENOTFOUND)
		return 1;
	return (b->flags & WSTORE_BACKEND_EMPTY_MISSING) && rc == 0 && n == 0;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)x;
	}
}

/* ---- the interface itself -------------------------------------------- */

static void check_struct(wstore_store *s, wstore_backend *b)
{
	unsigned caps = wstore_store_caps(s);

	CHECK(b->version == WSTORE_BACKEND_VERSION);
	CHECK(b->struct_size == sizeof(wstore_backend));
	CHECK(b->name && *b->name);
	CHECK(b->put && b->get && b->size && b->remove && b->free);
	CHECK(!!(caps & WSTORE_CAP_LIST) == !!b->list);
	CHECK(!!(caps & WSTORE_CAP_RANGE_READS) == !!b->get_range);
	CHECK(!!(caps & WSTORE_CAP_BATCH_READS) == !!b->get_many);
	CHECK(!!(caps & WSTORE_CAP_WRITE_ONCE) ==
	      !!(b->flags & WSTORE_BACKEND_WRITE_ONCE));
	CHECK(!(caps & WSTORE_CAP_LOCAL_FILES) || b->open_fd);
}

/* ---- put, get, size, remove ------------------------------------------ */

static void check_basic(wstore_backend *b)
{
	char buf[64];
	size_t n = 0;
	uint64_t sz = 0;
	int rc;

	CHECK(reads_missing(b, key("absent")));
	rc = b->size(b, key("absent"), &sz);
	CHECK(rc == WSTORE_ENOTFOUND ||
	      ((b->flags & WSTORE_BACKEND_EMPTY_MISSING) && rc == 0 && !sz));

	CHECK(put_str(b, key("a"), "hello world") == 0);
	CHECK(get_str(b, key("a"), buf, sizeof(buf)) == 0);
	CHECK(!strcmp(buf, "hello world"));
	CHECK(b->size(b, key("a"), &sz) == 0 && sz == 11);
	/* too small a buffer: ERANGE, and the size; the next get is fine */
	CHECK(b->get(b, key("a"), buf, 4, &n) == WSTORE_ERANGE && n == 11);
	CHECK(b->get(b, key("a"), buf, sizeof(buf), &n) == 0 && n == 11 &&
	      !memcmp(buf, "hello world", 11));
	/* bytes protocols care about, and NULs */
	static const char bin[] = "a\r\nb\0c$-1\r\n*2\r\n";
	CHECK(b->put(b, key("bin"), bin, sizeof(bin)) == 0);
	CHECK(b->get(b, key("bin"), buf, sizeof(buf), &n) == 0 &&
	      n == sizeof(bin) && !memcmp(buf, bin, n));
	/* a key of 400 characters, longer than a file name, with bytes a
	 * store may have to escape (the rules of keys: sys/backend.h) */
	char longname[401];
	memset(longname, 'k', 400);
	longname[400] = '\0';
	memcpy(longname, "odd/a b%c@d*[x]?./", 18);
	longname[200] = '/'; /* segments of at most 255 bytes */
	CHECK(put_str(b, key(longname), "long") == 0);
	CHECK(get_str(b, key(longname), buf, sizeof(buf)) == 0 &&
	      !strcmp(buf, "long"));
	CHECK(b->remove(b, key(longname), 1) == 0);
	CHECK(reads_missing(b, key(longname)));

	/* put on an existing key replaces, or keeps the old value where the
	 * store is write-once */
	CHECK(put_str(b, key("a"), "second") == 0);
	CHECK(get_str(b, key("a"), buf, sizeof(buf)) == 0);
	if (b->flags & WSTORE_BACKEND_WRITE_ONCE)
		CHECK(!strcmp(buf, "second") || !strcmp(buf, "hello world"));
	else
		CHECK(!strcmp(buf, "second"));

	/* an empty value, where the store takes one */
	rc = b->put(b, key("empty"), "", 0);
	if (rc == 0) {
		CHECK(b->get(b, key("empty"), buf, sizeof(buf), &n) == 0 &&
		      n == 0);
		CHECK(b->size(b, key("empty"), &sz) == 0 && sz == 0);
	} else {
		CHECK(*wstore_last_error() != '\0'); /* refused, saying why */
		printf("-- %s: empty values refused: %s\n", url_now,
		       wstore_last_error());
	}

	/* remove: gone; again: ENOTFOUND; a fresh key removes unforced */
	CHECK(b->remove(b, key("a"), 1) == 0);
	CHECK(reads_missing(b, key("a")));
	CHECK(b->remove(b, key("a"), 1) == WSTORE_ENOTFOUND);
	CHECK(put_str(b, key("unread"), "x") == 0);
	CHECK(b->remove(b, key("unread"), 0) == 0);
	CHECK(reads_missing(b, key("unread")));
}

static void check_big(wstore_backend *b)
{
	size_t len = (64u << 20) + 3, n = 0;
	unsigned char *v = malloc(len), *r = malloc(len);
	uint64_t sz = 0;

	CHECK(v && r);
	if (!v || !r)
		goto out;
	fill(v, len, 7);
	CHECK(b->put(b, key("big"), v, len) == 0);
	CHECK(b->size(b, key("big"), &sz) == 0 && sz == len);
	CHECK(b->get(b, key("big"), r, len, &n) == 0 && n == len);
	CHECK(memcmp(v, r, len) == 0);
	CHECK(b->get(b, key("big"), r, len - 1, &n) == WSTORE_ERANGE &&
	      n == len);
	if (b->get_range) {
		CHECK(b->get_range(b, key("big"), len - 100, r, 1000, &n) ==
			      0 &&
		      n == 100 && !memcmp(r, v + len - 100, 100));
	}
out:
	free(v);
	free(r);
}

/* ---- optional callbacks ----------------------------------------------- */

static void check_upsert(wstore_backend *b)
{
	char buf[32];

	if (!b->upsert) {
		not_offered("upsert");
		return;
	}
	CHECK(b->upsert(b, key("u"), "one", 3) == 0);
	CHECK(b->upsert(b, key("u"), "two", 3) == 0);
	CHECK(get_str(b, key("u"), buf, sizeof(buf)) == 0 &&
	      !strcmp(buf, "two"));
}

static void check_put_new(wstore_backend *b)
{
	char buf[32];

	if (!b->put_new) {
		not_offered("put_new");
		return;
	}
	CHECK(b->put_new(b, key("pn"), "first", 5) == 0);
	CHECK(b->put_new(b, key("pn"), "second", 6) == WSTORE_EEXISTS);
	CHECK(strstr(wstore_last_error(), "pn") != NULL);
	CHECK(get_str(b, key("pn"), buf, sizeof(buf)) == 0 &&
	      !strcmp(buf, "first"));
	CHECK(b->remove(b, key("pn"), 1) == 0);
	CHECK(b->put_new(b, key("pn"), "third", 5) == 0);
	CHECK(get_str(b, key("pn"), buf, sizeof(buf)) == 0 &&
	      !strcmp(buf, "third"));
}

static void check_get_range(wstore_backend *b)
{
	char buf[32];
	size_t n = 0;

	if (!b->get_range) {
		not_offered("get_range");
		return;
	}
	CHECK(put_str(b, key("r"), "0123456789") == 0);
	CHECK(b->get_range(b, key("r"), 3, buf, 4, &n) == 0 && n == 4 &&
	      !memcmp(buf, "3456", 4));
	/* short only at the end of the value */
	CHECK(b->get_range(b, key("r"), 8, buf, 10, &n) == 0 && n == 2 &&
	      !memcmp(buf, "89", 2));
	CHECK(b->get_range(b, key("r"), 0, buf, 10, &n) == 0 && n == 10);
	CHECK(b->get_range(b, key("r"), 10, buf, 10, &n) == 0 && n == 0);
	CHECK(b->get_range(b, key("r"), 1000, buf, 10, &n) == 0 && n == 0);
	CHECK(b->get_range(b, key("r"), 0, buf, 0, &n) == 0 && n == 0);
	n = 99;
	int rc = b->get_range(b, key("r-absent"), 0, buf, 4, &n);
	CHECK(rc == WSTORE_ENOTFOUND ||
	      ((b->flags & WSTORE_BACKEND_EMPTY_MISSING) && rc == 0 && !n));
}

struct seen {
	int n, mine;
};

static int count_key(const char *k, void *ctx)
{
	struct seen *s = ctx;

	s->n++;
	if (!strncmp(k, ns, strlen(ns)))
		s->mine++;
	return 0;
}

static int stop_at_first(const char *k, void *ctx)
{
	(void)k;
	(*(int *)ctx)++;
	return 7;
}

static void check_list(wstore_backend *b)
{
	struct seen s = { 0, 0 };
	int calls = 0;

	if (!b->list) {
		not_offered("list");
		return;
	}
	CHECK(put_str(b, key("l/a"), "1") == 0);
	CHECK(put_str(b, key("l/b"), "2") == 0);
	CHECK(put_str(b, key("l/c/d"), "3") == 0);
	CHECK(put_str(b, key("lx"), "4") == 0);
	CHECK(b->list(b, key("l/"), count_key, &s) == 0);
	CHECK(s.n == 3 && s.mine == 3);
	s.n = s.mine = 0;
	CHECK(b->list(b, key("l"), count_key, &s) == 0 && s.n == 4);
	s.n = 0;
	CHECK(b->list(b, key("l/c/"), count_key, &s) == 0 && s.n == 1);
	s.n = 0;
	CHECK(b->list(b, key("l/a"), count_key, &s) == 0 && s.n == 1);
	s.n = 0;
	CHECK(b->list(b, key("l//"), count_key, &s) == 0 && s.n == 0);
	/* pattern characters in a prefix are literal */
	CHECK(put_str(b, key("g*b[1]?\\/x"), "1") == 0);
	CHECK(put_str(b, key("gab1x\\/y"), "2") == 0);
	s.n = 0;
	CHECK(b->list(b, key("g*b[1]?\\"), count_key, &s) == 0 && s.n == 1);
	CHECK(b->list(b, key("l/"), stop_at_first, &calls) == 7 && calls == 1);
	s.n = s.mine = 0;
	CHECK(b->list(b, key("nothing-here/"), count_key, &s) == 0 && !s.n);
}

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

static int leave(void **out, size_t *out_len, const void *old, size_t len,
		 void *ctx)
{
	(void)out, (void)out_len, (void)old, (void)len, (void)ctx;
	return 1;
}

static int refuse(void **out, size_t *out_len, const void *old, size_t len,
		  void *ctx)
{
	(void)out, (void)out_len, (void)old, (void)len, (void)ctx;
	return WSTORE_EINVAL;
}

struct upd {
	wstore_backend *b;
	int n, rc;
};

static void *update_loop(void *arg)
{
	struct upd *u = arg;

	for (int i = 0; i < u->n && !u->rc; i++)
		u->rc = u->b->update(u->b, key("counter"), append_x, NULL);
	return NULL;
}

static int open_store(wstore_store **out, const char *url);

/* Exit status of child pid, waiting at most secs (then it is killed). */
static int wait_bounded(pid_t pid, int secs)
{
	int st = 0;

	for (int i = 0; i < secs * 20; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
		usleep(50000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	printf("FAIL %s: child %ld still running after %d s: killed\n", url_now,
	       (long)pid, secs);
	return 124;
}

/* Updates from 4 processes, each with its own store handle. */
static void check_update_procs(wstore_backend *b, const char *url)
{
	pid_t pids[4];
	char buf[256];
	size_t n = 0;

	fflush(stdout);
	for (int i = 0; i < 4; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			wstore_store *cs = NULL;
			struct upd u;

			if (open_store(&cs, url) < 0)
				_exit(2);
			u = (struct upd){ wstore_store_backend(cs), 25, 0 };
			for (int j = 0; j < u.n && !u.rc; j++)
				u.rc = u.b->update(u.b, key("pcounter"),
						   append_x, NULL);
			wstore_free(cs);
			_exit(u.rc ? 1 : 0);
		}
		CHECK(pids[i] > 0);
	}
	for (int i = 0; i < 4; i++)
		if (pids[i] > 0)
			CHECK(wait_bounded(pids[i], 120) == 0);
	CHECK(b->get(b, key("pcounter"), buf, sizeof(buf), &n) == 0 &&
	      n == 100);
}

static void check_update(wstore_backend *b, const char *url)
{
	struct upd u[4];
	pthread_t t[4];
	char buf[256];
	size_t n = 0;

	if (!b->update) {
		not_offered("update");
		return;
	}
	CHECK(b->update(b, key("upd"), append_x, NULL) == 0); /* absent */
	CHECK(b->update(b, key("upd"), append_x, NULL) == 0);
	CHECK(get_str(b, key("upd"), buf, sizeof(buf)) == 0 &&
	      !strcmp(buf, "xx"));
	CHECK(b->update(b, key("upd"), leave, NULL) == 0);
	CHECK(b->update(b, key("upd"), refuse, NULL) == WSTORE_EINVAL);
	CHECK(get_str(b, key("upd"), buf, sizeof(buf)) == 0 &&
	      !strcmp(buf, "xx"));
	/* leaving an absent key alone does not create it */
	CHECK(b->update(b, key("upd-absent"), leave, NULL) == 0);
	CHECK(reads_missing(b, key("upd-absent")));
	/* concurrent updates lose nothing */
	for (int i = 0; i < 4; i++) {
		u[i] = (struct upd){ b, 25, 0 };
		CHECK(pthread_create(&t[i], NULL, update_loop, &u[i]) == 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECK(u[i].rc == 0);
	}
	CHECK(b->get(b, key("counter"), buf, sizeof(buf), &n) == 0 && n == 100);
	/* a process-local store has no other processes to agree with */
	if (strncmp(url, "mem", 3) != 0)
		check_update_procs(b, url);
}

static void check_get_many(wstore_backend *b)
{
	char b0[16], b1[16], b2[2];
	const char *keys[3];
	void *bufs[3] = { b0, b1, b2 };
	size_t caps[3] = { sizeof(b0), sizeof(b1), sizeof(b2) };
	size_t lens[3] = { 0, 0, 0 };
	int rcs[3] = { -1, -1, -1 };

	if (!b->get_many) {
		not_offered("get_many");
		return;
	}
	CHECK(put_str(b, key("m0"), "zero") == 0);
	CHECK(put_str(b, key("m2"), "too long") == 0);
	keys[0] = key("m0");
	keys[1] = key("m1-absent");
	keys[2] = key("m2");
	CHECK(b->get_many(b, 3, keys, bufs, caps, lens, rcs) == 0);
	CHECK(rcs[0] == 0 && lens[0] == 4 && !memcmp(b0, "zero", 4));
	CHECK(rcs[1] == WSTORE_ENOTFOUND ||
	      ((b->flags & WSTORE_BACKEND_EMPTY_MISSING) && rcs[1] == 0 &&
	       lens[1] == 0));
	CHECK(rcs[2] == WSTORE_ERANGE && lens[2] == 8);
}

static void check_sync(wstore_backend *b)
{
	if (!b->sync) {
		not_offered("sync");
		return;
	}
	CHECK(put_str(b, key("synced"), "s") == 0);
	CHECK(b->sync(b) == 0);
}

static void check_open_fd(wstore_backend *b)
{
	char buf[32];
	int fd = -1;
	ssize_t n;

	if (!b->open_fd) {
		not_offered("open_fd");
		return;
	}
	CHECK(put_str(b, key("fd"), "through an fd") == 0);
	CHECK(b->open_fd(b, key("fd"), &fd) == 0 && fd >= 0);
	if (fd < 0)
		return;
	/* the fd keeps the value even once the key is gone */
	CHECK(b->remove(b, key("fd"), 1) == 0);
	n = pread(fd, buf, sizeof(buf), 0);
	CHECK(n == 13 && !memcmp(buf, "through an fd", 13));
	close(fd);
	fd = -1;
	CHECK(b->open_fd(b, key("fd"), &fd) == WSTORE_ENOTFOUND ||
	      (b->flags & WSTORE_BACKEND_EMPTY_MISSING));
	if (fd >= 0)
		close(fd);
}

static void check_sweep(wstore_backend *b)
{
	size_t found = 99;

	if (!b->sweep_temps) {
		not_offered("sweep_temps");
		return;
	}
	/* dry run, nothing is old enough: nothing removed, no error */
	CHECK(b->sweep_temps(b, 1000000, 1, &found, NULL, NULL, NULL) == 0);
	CHECK(found != 99);
}

/* ---- threads ------------------------------------------------------------- */

struct worker {
	wstore_backend *b;
	int id, bad;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	size_t len = 64 << 10, n;
	unsigned char *v = malloc(len), *r = malloc(len);
	char name[64];

	if (!v || !r) {
		w->bad++;
		goto out;
	}
	for (int i = 0; i < 20; i++) {
		size_t vl = 1 + (size_t)(i * 7919 + w->id * 104729) % len;
		int rc;

		snprintf(name, sizeof(name), "t/%d/%d", w->id, i);
		fill(v, vl, (unsigned)(w->id * 100 + i));
		if (w->b->put(w->b, key(name), v, vl) != 0 ||
		    w->b->get(w->b, key(name), r, len, &n) != 0 || n != vl ||
		    memcmp(v, r, vl) != 0)
			w->bad++;
		/* a neighbour's key, written or not yet: never an error */
		snprintf(name, sizeof(name), "t/%d/%d", (w->id + 1) % 4, i);
		rc = w->b->get(w->b, key(name), r, len, &n);
		if (rc != 0 && rc != WSTORE_ENOTFOUND)
			w->bad++;
	}
out:
	free(v);
	free(r);
	return NULL;
}

static void check_threads(wstore_backend *b)
{
	struct worker w[4];
	pthread_t t[4];

	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ b, i, 0 };
		CHECK(pthread_create(&t[i], NULL, worker_main, &w[i]) == 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECK(w[i].bad == 0);
	}
}

/* ---- running ----------------------------------------------------------- */

static int remove_key(const char *k, void *ctx)
{
	wstore_backend *b = ctx;

	b->remove(b, k, 1);
	return 0;
}

static void cleanup(wstore_backend *b)
{
	static const char *names[] = {
		"a",	  "empty",   "big",	    "u",	"pn",
		"r",	  "l/a",     "l/b",	    "l/c/d",	"lx",
		"upd",	  "counter", "pcounter",    "m0",	"m2",
		"synced", "bin",     "g*b[1]?\\/x", "gab1x\\/y"
	};
	char name[64];

	if (b->list) {
		b->list(b, ns, remove_key, b);
		return;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		b->remove(b, key(names[i]), 1);
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 20; j++) {
			snprintf(name, sizeof(name), "t/%d/%d", i, j);
			b->remove(b, key(name), 1);
		}
}

static int open_store(wstore_store **out, const char *url)
{
	wstore_backend *b = NULL;
	wstore_config *cfg = NULL;
	unsigned flags = 0;
	int rc;

	if (!strncmp(url, "mem", 3) && (!url[3] || url[3] == '+')) {
		if (strstr(url, "writeonce"))
			flags |= WSTORE_BACKEND_WRITE_ONCE;
		if (strstr(url, "emptymissing"))
			flags |= WSTORE_BACKEND_EMPTY_MISSING;
		if ((rc = wstore_backend_mem_new(&b, flags)) < 0)
			return rc;
		if ((rc = wstore_open_backend(out, b)) < 0)
			b->free(b);
		return rc;
	}
	if ((rc = wstore_config_new(&cfg)) == 0 &&
	    (rc = wstore_config_load_env(cfg)) == 0 &&
	    (rc = wstore_config_set(cfg, "store", url)) == 0)
		rc = wstore_open(out, cfg);
	wstore_config_free(cfg);
	return rc;
}

/* url without "user:password@", for output */
static void redact(char *out, size_t cap, const char *url)
{
	const char *p = strstr(url, "://"), *at, *end;

	if (!p) {
		snprintf(out, cap, "%s", url);
		return;
	}
	p += 3;
	end = p + strcspn(p, "/?");
	at = memchr(p, '@', (size_t)(end - p));
	if (!at) {
		snprintf(out, cap, "%s", url);
		return;
	}
	snprintf(out, cap, "%.*s%s", (int)(p - url), url, at + 1);
}

static void run(const char *url, int n)
{
	static char label[512];
	wstore_store *s = NULL;
	wstore_backend *b;
	int p0, f0, s0;

	redact(label, sizeof(label), url);
	url_now = label;
	check_current = label;
	p0 = check_passed;
	f0 = check_failed;
	s0 = check_skipped;
	snprintf(ns, sizeof(ns), "wstore-conformance/%ld-%d-%ld/",
		 (long)getpid(), n, (long)time(NULL));
	if (open_store(&s, url) < 0) {
		check_fail("cannot open: %s", wstore_last_error());
	} else {
		b = wstore_store_backend(s);
		printf("-- %s: backend '%s', flags %#x\n", label, b->name,
		       b->flags);
		check_struct(s, b);
		check_basic(b);
		check_big(b);
		check_upsert(b);
		check_put_new(b);
		check_get_range(b);
		check_list(b);
		check_update(b, url);
		check_get_many(b);
		check_sync(b);
		check_open_fd(b);
		check_sweep(b);
		check_threads(b);
		cleanup(b);
		wstore_free(s);
	}
	printf("%s: %d passed, %d failed, %d skipped\n", label,
	       check_passed - p0, check_failed - f0, check_skipped - s0);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s URL...\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++)
		run(argv[i], i);
	return check_summary("conformance");
}
