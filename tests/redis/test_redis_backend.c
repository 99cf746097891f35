/*
 * test_redis_backend.c - what is the Redis backend's own, against a real
 * Redis server or cluster, run by tests/redis/run.sh (which starts the
 * servers): slot hashing, key prefixes, connection and credential errors,
 * the write/read modes the fault steps use, and the bulk reply reader
 * against a fake server on loopback that answers wrongly.  What every
 * backend must
 * do is tests/conformance/ (run against Redis and a cluster too).
 *
 *   redis-backend-tests URL                    the Redis-specific tests
 *   redis-backend-tests URL write-many N       write N known keys
 *   redis-backend-tests URL check-many N       read them back and compare
 *   redis-backend-tests URL expect-put-error SIZE TEXT
 *                                              a SIZE-byte put must fail
 *                                              with TEXT in the message
 *   redis-backend-tests URL bench MIB N        put/get N values of MIB MiB
 *
 * Keys live under "wstore-test/<pid>/" so runs do not collide.  Prints
 * "redis: N passed, N failed, N skipped"; exits non-zero on any failure.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backends/helpers.h"
#include "config.h"
#include "digest.h"
#include "error.h"
#include "manifest.h"
#include "names.h"
#include "store.h"
#include "backends/redis/proto.h"
#include "../lib/check.h"
#include "../lib/child.h"

CHECK_COUNTERS;
static char ns[64]; /* "wstore-test/<pid>/" */

static char *key(const char *name)
{
	static _Thread_local char buf[4][256];
	static _Thread_local int i;
	char *k = buf[i++ % 4];

	snprintf(k, 256, "%s%s", ns, name);
	return k;
}

static wstore_backend *open_url(const char *url, const char *prefix)
{
	wstore_config *cfg = NULL;
	wstore_backend *b = NULL;
	int r;

	if (prefix) {
		wstore_config_new(&cfg);
		wstore_config_set(cfg, "key_prefix", prefix);
	}
	r = wstore__backend_redis_open(&b, url, cfg);
	wstore_config_free(cfg);
	if (r) {
		fprintf(stderr, "cannot open: %s\n", wstore_last_error());
		return NULL;
	}
	return b;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct seen {
	const char *want;
	int found, other;
};

static int seen_fn(const char *k, void *ctx)
{
	struct seen *s = ctx;

	if (strcmp(k, s->want) == 0)
		s->found++;
	else
		s->other++;
	return 0;
}

/* Update callback: the value is a decimal counter; add one. */
static int incr(void **out, size_t *out_len, const void *old, size_t len,
		void *ctx)
{
	char tmp[32];
	long v = 0;

	(void)ctx;
	if (old) {
		snprintf(tmp, sizeof(tmp), "%.*s", (int)len, (const char *)old);
		v = atol(tmp);
	}
	*out = malloc(32);
	*out_len = (size_t)snprintf(*out, 32, "%ld", v + 1);
	return 0;
}

static long read_counter(wstore_backend *b, const char *k)
{
	char buf[32];
	size_t n = 0;

	if (b->get(b, k, buf, sizeof(buf) - 1, &n))
		return -1;
	buf[n] = '\0';
	return atol(buf);
}

static void test_prefix(wstore_backend *b, const char *url)
{
	char pfx[64], full[256], buf[16];
	wstore_backend *p;
	size_t n = 0;

	snprintf(pfx, sizeof(pfx), "pfx:%d:", (int)getpid());
	p = open_url(url, pfx);
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK(p->put(p, key("a"), "A", 1) == 0);
	snprintf(full, sizeof(full), "%s%s", pfx, key("a"));
	CHECK(b->get(b, full, buf, sizeof(buf), &n) == 0 && n == 1);
	CHECK(b->get(b, key("a"), buf, sizeof(buf), &n) == WSTORE_ENOTFOUND);
	struct seen s = { key("a"), 0, 0 };
	CHECK(p->list(p, ns, seen_fn, &s) == 0 && s.found == 1 && s.other == 0);
	CHECK(p->update(p, key("c"), incr, NULL) == 0 &&
	      read_counter(p, key("c")) == 1);
	CHECK(p->remove(p, key("a"), 1) == 0 && p->remove(p, key("c"), 1) == 0);
	p->free(p);
}

/* The URL with its credentials replaced by a wrong password. */
static void wrong_password_url(char *out, size_t cap, const char *url)
{
	const char *s = strstr(url, "://") + 3, *at = strrchr(url, '@');

	snprintf(out, cap, "%.*s:wrong-secret-xyz@%s", (int)(s - url), url,
		 at ? at + 1 : s);
}

static void test_errors(const char *url)
{
	wstore_backend *b = NULL;
	char bad[512];
	const char *e;
	int r;

	wrong_password_url(bad, sizeof(bad), url);
	r = wstore__backend_redis_open(&b, bad, NULL);
	e = wstore_last_error();
	CHECK(r == WSTORE_EUNAVAIL && strstr(e, "authentication"));
	CHECK(!strstr(e, "wrong-secret-xyz"));
	fprintf(stderr, "  (wrong password: %s)\n", e);
	r = wstore__backend_redis_open(
		&b,
		strncmp(url, "redis-cluster", 13)
			? "redis://:pw@127.0.0.1:1"
			: "redis-cluster://127.0.0.1:1,127.0.0.1:2",
		NULL);
	e = wstore_last_error();
	CHECK(r == WSTORE_EUNAVAIL && strstr(e, "127.0.0.1:") &&
	      strstr(e, "onnect"));
	CHECK(!strstr(e, "pw"));
	fprintf(stderr, "  (unreachable: %s)\n", e);
	CHECK(wstore__backend_redis_open(&b, "redis://h:99999", NULL) ==
	      WSTORE_EINVAL);
	CHECK(wstore__backend_redis_open(&b, "redis+unix://relative", NULL) ==
	      WSTORE_EINVAL);
}

static void test_slots(void)
{
	CHECK(rdc_slot("123456789", 9) == 12739);
	CHECK(rdc_slot("foo", 3) == 12182);
	CHECK(rdc_slot("{user1000}.following", 20) == rdc_slot("user1000", 8));
	CHECK(rdc_slot("foo{}{bar}", 10) != rdc_slot("bar", 3));
	CHECK(rdc_slot("foo{{bar}}zap", 13) == rdc_slot("{bar", 4));
}

static void fill(unsigned char *v, size_t len, int i)
{
	for (size_t j = 0; j < len; j++)
		v[j] = (unsigned char)(j * 31 + (size_t)i * 7);
}

static int many(wstore_backend *b, int write, int count)
{
	size_t len = 100000, n;
	unsigned char *v = malloc(len), *w = malloc(len);
	char name[64];

	snprintf(ns, sizeof(ns), "wstore-test/many/");
	for (int i = 0; i < count; i++) {
		snprintf(name, sizeof(name), "%05d", i);
		fill(v, len, i);
		if (write)
			CHECK(b->put(b, key(name), v, len) == 0);
		else
			CHECK(b->get(b, key(name), w, len, &n) == 0 &&
			      n == len && memcmp(v, w, len) == 0);
		if (check_failed)
			break; /* one clear error, not thousands */
	}
	free(v);
	free(w);
	return 0;
}

static void bench(wstore_backend *b, size_t mib, int count)
{
	size_t len = mib << 20, n;
	unsigned char *v = malloc(len), *w = malloc(len);
	char name[64];
	double t0, t1, t2;

	memset(v, 7, len);
	memset(w, 0, len);
	t0 = now_s();
	for (int i = 0; i < count; i++) {
		snprintf(name, sizeof(name), "bench/%d", i);
		CHECK(b->put(b, key(name), v, len) == 0);
	}
	t1 = now_s();
	for (int i = 0; i < count; i++) {
		snprintf(name, sizeof(name), "bench/%d", i);
		CHECK(b->get(b, key(name), w, len, &n) == 0 && n == len);
	}
	t2 = now_s();
	for (int i = 0; i < count; i++) {
		snprintf(name, sizeof(name), "bench/%d", i);
		b->remove(b, key(name), 1);
	}
	printf("backend SET %.2f GB/s  GET %.2f GB/s  (%d x %zu MiB)\n",
	       count * (double)len / (t1 - t0) / 1e9,
	       count * (double)len / (t2 - t1) / 1e9, count, mib);
	free(v);
	free(w);
}

/* ---- the bulk reader against a fake server ----------------------------- */

/* A one-connection server on loopback that sends its script (each part
 * with one send, so a part arrives whole) and waits for the client to
 * close. */
struct fake {
	int lfd;
	int port;
	const char *parts[3];
	pthread_t tid;
};

static void *fake_serve(void *arg)
{
	struct fake *f = arg;
	int fd = accept(f->lfd, NULL, NULL);
	char junk[64];

	for (int i = 0; fd >= 0 && i < 3 && f->parts[i]; i++)
		if (send(fd, f->parts[i], strlen(f->parts[i]), MSG_NOSIGNAL) <
		    0)
			break;
	/* until the client closes (its read timeout bounds a stuck test) */
	while (fd >= 0 && recv(fd, junk, sizeof(junk), 0) > 0)
		;
	if (fd >= 0)
		close(fd);
	return NULL;
}

static int fake_start(struct fake *f)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(f->lfd, 1) ||
	    getsockname(f->lfd, (struct sockaddr *)&a, &al))
		return -1;
	f->port = ntohs(a.sin_port);
	return pthread_create(&f->tid, NULL, fake_serve, f) ? -1 : 0;
}

/* Read one bulk reply of the script parts with a cap-byte buffer: the
 * result; *broken says whether the connection was dropped, err its
 * message. */
static int fake_bulk(const char *p0, const char *p1, size_t cap, char *buf,
		     size_t *n, int *broken, char *err, size_t errcap)
{
	struct fake f = { .parts = { p0, p1, NULL } };
	struct timeval tv = { 5, 0 };
	struct rd_req req = { .lkey = "k" };
	struct rd_conn rc = { .timeout_ms = 5000 };
	int r = -100, nil = 0;

	if (fake_start(&f))
		return -101;
	rc.c = redisConnectWithTimeout("127.0.0.1", f.port, tv);
	if (rc.c && !rc.c->err && redisSetTimeout(rc.c, tv) == REDIS_OK) {
		r = rd_read_bulk(&rc, &req, buf, cap, n, &nil);
		*broken = rc.c->err != 0;
		snprintf(err, errcap, "%s",
			 r == RD_CONN_ERR ? req.err
			 : rc.c->err	  ? rc.c->errstr
					  : "");
	}
	if (rc.c)
		redisFree(rc.c);
	pthread_join(f.tid, NULL);
	close(f.lfd);
	return r;
}

static void test_bulk_replies(void)
{
	char buf[16], err[256];
	size_t n = 0;
	int broken = 0;

	/* a good reply, whole or split anywhere */
	CHECK(fake_bulk("$3\r\nabc\r\n", NULL, sizeof(buf), buf, &n, &broken,
			err, sizeof(err)) == 0 &&
	      n == 3 && !memcmp(buf, "abc", 3) && !broken);
	CHECK(fake_bulk("$3\r\nab", "c\r\n", sizeof(buf), buf, &n, &broken, err,
			sizeof(err)) == 0 &&
	      n == 3 && !memcmp(buf, "abc", 3) && !broken);
	CHECK(fake_bulk("$3\r\nabc\r", "\n", sizeof(buf), buf, &n, &broken, err,
			sizeof(err)) == 0 &&
	      n == 3 && !broken);
	/* the terminator is checked, whether read with the line or after */
	CHECK(fake_bulk("$3\r\nabcXY", NULL, sizeof(buf), buf, &n, &broken, err,
			sizeof(err)) == RD_CONN_ERR &&
	      broken && strstr(err, "CRLF"));
	CHECK(fake_bulk("$3\r\nab", "cXY", sizeof(buf), buf, &n, &broken, err,
			sizeof(err)) == RD_CONN_ERR &&
	      broken && strstr(err, "CRLF"));
	fprintf(stderr, "  (bad terminator: %s)\n", err);
	/* more than asked for: the connection is dropped, nothing read
	 * past the buffer (2 - tail once underflowed here) */
	CHECK(fake_bulk("$3\r\nabc\r\n$3\r\nxyz\r\n", NULL, sizeof(buf), buf,
			&n, &broken, err, sizeof(err)) == RD_CONN_ERR &&
	      broken && strstr(err, "more than"));
	CHECK(fake_bulk("$5\r\nabcdefgh\r\n", NULL, sizeof(buf), buf, &n,
			&broken, err, sizeof(err)) == RD_CONN_ERR &&
	      broken && strstr(err, "more than"));
	fprintf(stderr, "  (surplus: %s)\n", err);
	/* too large for the buffer: ERANGE, and a bad end still drops it */
	CHECK(fake_bulk("$8\r\nabcdefgh\r\n", NULL, 4, buf, &n, &broken, err,
			sizeof(err)) == WSTORE_ERANGE &&
	      n == 8 && !broken);
	CHECK(fake_bulk("$8\r\nabcdefghXY", NULL, 4, buf, &n, &broken, err,
			sizeof(err)) == WSTORE_ERANGE &&
	      broken);
	CHECK(fake_bulk("$8\r\nabcdefgh\r\nSURPLUS", NULL, 4, buf, &n, &broken,
			err, sizeof(err)) == RD_CONN_ERR &&
	      broken);
}

static void cleanup(wstore_backend *b)
{
	const char *names[] = { "bin",
				"empty",
				"new",
				"lisx",
				"gl*b[1]?\\/x",
				"glob1/x",
				"counter-threads",
				"counter-procs" };
	char name[64];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		b->remove(b, key(names[i]), 1);
	for (int i = 0; i < 25; i++) {
		snprintf(name, sizeof(name), "list/%02d", i);
		b->remove(b, key(name), 1);
	}
}

int main(int argc, char **argv)
{
	wstore_backend *b;

	if (argc < 2) {
		fprintf(stderr,
			"usage: %s URL [write-many N | check-many N | expect-put-error SIZE TEXT | bench MIB N]\n",
			argv[0]);
		return 2;
	}
	snprintf(ns, sizeof(ns), "wstore-test/%d/", (int)getpid());
	if (!(b = open_url(argv[1], NULL))) {
		check_fail("cannot open %s: %s", argv[1], wstore_last_error());
	} else if (argc == 4 && !strcmp(argv[2], "write-many")) {
		many(b, 1, atoi(argv[3]));
	} else if (argc == 4 && !strcmp(argv[2], "check-many")) {
		many(b, 0, atoi(argv[3]));
	} else if (argc == 5 && !strcmp(argv[2], "expect-put-error")) {
		size_t len = strtoull(argv[3], NULL, 10);
		char *v = calloc(1, len);

		CHECK(b->put(b, key("toobig"), v, len) != 0 &&
		      strstr(wstore_last_error(), argv[4]));
		fprintf(stderr, "  (error: %s)\n", wstore_last_error());
		free(v);
	} else if (argc == 5 && !strcmp(argv[2], "bench")) {
		bench(b, strtoull(argv[3], NULL, 10), atoi(argv[4]));
	} else {
		/* the generic contract: tests/conformance/ */
		CHECK(b->flags & WSTORE_BACKEND_UNTRUSTED);
		test_slots();
		test_prefix(b, argv[1]);
		test_errors(argv[1]);
		test_bulk_replies();
		cleanup(b);
	}
	if (b)
		b->free(b);
	return check_summary("redis");
}
