/*
 * test_mooncake_backend.c - contract tests of the Mooncake backend
 * (src/lib/backends/mooncake.c) through its real dlopen path, against the
 * stand-in library built from tests/mooncake/standin.c, or, with
 * MOONCAKE_TEST_REAL=1, against a real Mooncake Store cluster described by
 * the WSTORE_MOONCAKE_LIBRARY, WSTORE_MASTER_SERVER_ADDR,
 * WSTORE_METADATA_SERVER and WSTORE_LOCAL_HOSTNAME environment variables
 * (tests/run.sh starts one).  The stand-in imitates the behaviour
 * docs/mooncake.md records for Mooncake Store; it is NOT Mooncake.  Tests that
 * need the stand-in's switches (failing setup, no segment, short leases) or
 * that fork after setup (which hangs a real client) run against the stand-in
 * only.  What every backend must do is tests/conformance/ (run against the
 * stand-in and the real library too); here is what is Mooncake's own:
 * flags, write-once, leases, zero-length values, loading the library,
 * reaching the master, shared stores.
 *
 * Usage: mooncake-backend-tests [BUILD_DIR]   (default "build"); expects
 * BUILD_DIR/libmooncake_store.so and BUILD_DIR/libmooncake_store_partial.so
 * (the stand-in without mooncake_store_get_into).  Prints
 * "mooncake: N passed, N failed, N skipped".
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backends/helpers.h"
#include "backends/mooncake.h"
#include "config.h"
#include "digest.h"
#include "error.h"
#include "manifest.h"
#include "names.h"
#include "store.h"
#include "../lib/check.h"
#include "../lib/child.h"
#include "wstore/read.h"

CHECK_COUNTERS;
static const char *build_dir = "build";
static char *tmp_root;
static int real;	     /* MOONCAKE_TEST_REAL=1: a real cluster */
static char fake_master[64]; /* stand-in runs: a loopback port that
			      * accepts, as a master's would */

/* ---- helpers ----------------------------------------------------------- */

static char *lib_path(const char *name)
{
	static char buf[4][4096];
	static int n;
	char *p = buf[n++ % 4];

	snprintf(p, sizeof(buf[0]), "%s/%s", build_dir, name);
	return p;
}

/* Point the stand-in at a fresh store directory with the given lease. */
static void fresh_store(const char *lease_ms)
{
	static int n;
	char *dir;

	if (asprintf(&dir, "%s/store%d", tmp_root, n++) < 0)
		abort();
	setenv("MOONCAKE_STANDIN_DIR", dir, 1);
	setenv("MOONCAKE_STANDIN_LEASE_MS", lease_ms, 1);
	free(dir);
}

static int open_with(wstore_backend **out, const char *lib, const char *master,
		     const char *replicas)
{
	wstore_config *cfg;
	int rc;

	*out = NULL;
	if (wstore_config_new(&cfg) != 0)
		abort();
	/* a value of the wrong form is refused by the config already (the
	 * key's type and range), before the backend or its library */
	if (!master)
		master = real ? getenv("WSTORE_MASTER_SERVER_ADDR")
			      : fake_master;
	rc = wstore_config_load_env(cfg);
	if (rc == 0)
		rc = wstore_config_set(cfg, "mooncake_library", lib);
	if (rc == 0)
		rc = wstore_config_set(cfg, "master_server_addr", master);
	if (rc == 0 && replicas)
		rc = wstore_config_set(cfg, "replica_num", replicas);
	if (rc == 0)
		rc = wstore__backend_mooncake_open(out, cfg);
	wstore_config_free(cfg);
	return rc;
}

/* The stand-in, or the real library in real mode. */
static wstore_backend *open_standin(void)
{
	wstore_backend *b;
	int rc = open_with(&b,
			   real ? getenv("WSTORE_MOONCAKE_LIBRARY")
				: lib_path("libmooncake_store.so"),
			   NULL, NULL);

	CHECK_EQ(rc, 0);
	return rc == 0 ? b : NULL;
}

static int put_str(wstore_backend *b, const char *key, const char *v)
{
	return b->put(b, key, v, strlen(v));
}

/* Get key as a string into buf (cap 256); returns the get's code. */
static int get_str(wstore_backend *b, const char *key, char *buf)
{
	size_t n = 0;
	int rc = b->get(b, key, buf, 255, &n);

	buf[rc == 0 ? n : 0] = '\0';
	return rc;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- tests ------------------------------------------------------------- */

static void test_roundtrip(void)
{
	wstore_backend *b;
	char buf[256];
	uint64_t size = 0;

	fresh_store("10000");
	if (!(b = open_standin()))
		return;
	CHECK(strcmp(b->name, "mooncake") == 0);
	CHECK_EQ(b->version, WSTORE_BACKEND_VERSION);
	CHECK(b->flags & WSTORE_BACKEND_WRITE_ONCE);
	CHECK(b->flags & WSTORE_BACKEND_EMPTY_MISSING);
	CHECK(b->flags & WSTORE_BACKEND_UNTRUSTED);
	CHECK(!b->upsert && !b->put_new && !b->list && !b->update);
	CHECK_EQ(put_str(b, "weight/index/models", "[\"a\"]"), 0);
	CHECK_EQ(get_str(b, "weight/index/models", buf), 0);
	CHECK(strcmp(buf, "[\"a\"]") == 0);
	CHECK_EQ(b->size(b, "weight/index/models", &size), 0);
	CHECK_EQ(size, 5);
	/* a key that is a prefix of another, as "files/{ph}" is */
	CHECK_EQ(put_str(b, "a/b", "1"), 0);
	CHECK_EQ(put_str(b, "a/b/c", "2"), 0);
	CHECK_EQ(get_str(b, "a/b", buf), 0);
	CHECK(strcmp(buf, "1") == 0);
	CHECK_EQ(get_str(b, "a/b/c", buf), 0);
	CHECK(strcmp(buf, "2") == 0);
	b->free(b);
}

static void test_write_once_and_replace(void)
{
	wstore_backend *b;
	char buf[256];

	fresh_store("10000");
	if (!(b = open_standin()))
		return;
	CHECK_EQ(put_str(b, "k", "old"), 0);
	CHECK_EQ(put_str(b, "k", "new!"), 0);
	CHECK_EQ(get_str(b, "k", buf), 0);
	CHECK(strcmp(buf, "old") == 0);
	/* the front end's replace: forced remove (despite the lease the
	 * get just took), then put */
	CHECK_EQ(b->remove(b, "k", 1), 0);
	CHECK_EQ(put_str(b, "k", "new!"), 0);
	CHECK_EQ(get_str(b, "k", buf), 0);
	CHECK(strcmp(buf, "new!") == 0);
	b->free(b);
}

static void test_missing_and_errors(void)
{
	wstore_backend *b;
	char buf[256];
	uint64_t size;
	size_t n = 0;

	fresh_store("10000");
	if (!(b = open_standin()))
		return;
	CHECK_EQ(get_str(b, "nope", buf), WSTORE_ENOTFOUND);
	CHECK_MSG("'nope'");
	CHECK_EQ(b->size(b, "nope", &size), WSTORE_ENOTFOUND);
	CHECK_EQ(b->remove(b, "nope", 1), WSTORE_ENOTFOUND);
	CHECK_EQ(b->remove(b, "nope", 0), WSTORE_ENOTFOUND);
	CHECK_EQ(b->put(b, "empty", "", 0), WSTORE_EINVAL);
	CHECK_MSG("zero-length");
	CHECK_EQ(b->size(b, "empty", &size), WSTORE_ENOTFOUND);
	CHECK_EQ(put_str(b, "ten", "0123456789"), 0);
	CHECK_EQ(b->get(b, "ten", buf, 4, &n), WSTORE_ERANGE);
	CHECK_EQ(n, 10);
	CHECK_MSG("'ten'");
	CHECK_EQ(b->get(b, "ten", buf, 10, &n), 0);
	CHECK(n == 10 && memcmp(buf, "0123456789", 10) == 0);
	b->free(b);
}

static void test_lease(void)
{
	wstore_backend *b;
	char buf[256];
	double t0;

	/* a short lease: the non-forced remove waits it out and succeeds */
	fresh_store("400");
	setenv("WSTORE_MOONCAKE_LEASE_WAIT_MS", "5000", 1);
	if (!(b = open_standin()))
		return;
	CHECK_EQ(put_str(b, "leased", "v"), 0);
	CHECK_EQ(get_str(b, "leased", buf), 0);
	t0 = now_s();
	CHECK_EQ(b->remove(b, "leased", 0), 0);
	CHECK(now_s() - t0 >= 0.25);
	CHECK_EQ(get_str(b, "leased", buf), WSTORE_ENOTFOUND);
	b->free(b);

	/* a lease longer than the wait: reported as busy; force overrides */
	fresh_store("10000");
	setenv("WSTORE_MOONCAKE_LEASE_WAIT_MS", "200", 1);
	if (!(b = open_standin()))
		return;
	CHECK_EQ(put_str(b, "leased", "v"), 0);
	CHECK_EQ(get_str(b, "leased", buf), 0);
	CHECK_EQ(b->remove(b, "leased", 0), WSTORE_EBUSY);
	CHECK_MSG("object 'leased' is leased (in use); retry later");
	CHECK_EQ(b->remove(b, "leased", 1), 0);
	CHECK_EQ(get_str(b, "leased", buf), WSTORE_ENOTFOUND);
	b->free(b);
	unsetenv("WSTORE_MOONCAKE_LEASE_WAIT_MS");
}

/* Open the stand-in with its first fails transfers failing (-800, as a
 * storage node that died) and failed transfers retried for wait_ms. */
static wstore_backend *open_failing(const char *fails, const char *wait_ms)
{
	wstore_backend *b;

	setenv("MOONCAKE_STANDIN_TRANSFER_FAIL", fails, 1);
	setenv("WSTORE_MOONCAKE_TRANSFER_WAIT_MS", wait_ms, 1);
	b = open_standin();
	unsetenv("MOONCAKE_STANDIN_TRANSFER_FAIL");
	unsetenv("WSTORE_MOONCAKE_TRANSFER_WAIT_MS");
	return b;
}

static void test_transfer_retry(void)
{
	const char *const keys[2] = { "t1", "t2" };
	char a[8] = { 0 }, c[8] = { 0 }, buf[256], *lent;
	void *const bufs[2] = { a, c };
	size_t caps[2] = { sizeof(a), sizeof(c) }, lens[2] = { 0, 0 };
	int rcs[2] = { -1, -1 };
	wstore_backend *b;
	double t0;

	fresh_store("10000");
	/* puts, from a pooled buffer and from a registered one */
	if (!(b = open_failing("3", "5000")))
		return;
	CHECK_EQ(put_str(b, "t1", "one"), 0);
	b->free(b);
	if (!(b = open_failing("2", "5000")))
		return;
	lent = b->buf_alloc(b, 16);
	CHECK(lent != NULL);
	if (lent) {
		memcpy(lent, "two", 3);
		CHECK_EQ(b->put(b, "t2", lent, 3), 0);
		b->buf_free(b, lent);
	}
	b->free(b);
	/* a get, then a batch whose every transfer fails once */
	if (!(b = open_failing("1", "5000")))
		return;
	CHECK_EQ(get_str(b, "t2", buf), 0);
	CHECK_STR(buf, "two");
	b->free(b);
	if (!(b = open_failing("2", "5000")))
		return;
	CHECK_EQ(b->get_many(b, 2, keys, bufs, caps, lens, rcs), 0);
	CHECK_EQ(rcs[0], 0);
	CHECK_EQ(rcs[1], 0);
	CHECK_EQ(lens[0], 3);
	CHECK(!memcmp(a, "one", 3) && !memcmp(c, "two", 3));
	b->free(b);
	/* a node that stays down: a clean error once the wait is over */
	if (!(b = open_failing("1000", "300")))
		return;
	t0 = now_s();
	CHECK_EQ(get_str(b, "t1", buf), WSTORE_EUNAVAIL);
	CHECK(now_s() - t0 >= 0.25 && now_s() - t0 < 5);
	snprintf(buf, sizeof(buf),
		 "cannot read 't1': transfer to a mooncake storage node "
		 "failed (is the node down? master '%s')",
		 fake_master);
	CHECK_MSG(buf);
	CHECK_EQ(put_str(b, "t3", "x"), WSTORE_EUNAVAIL);
	b->free(b);
	/* no wait: the first failure is reported */
	if (!(b = open_failing("1", "0")))
		return;
	CHECK_EQ(put_str(b, "t3", "x"), WSTORE_EUNAVAIL);
	CHECK_EQ(put_str(b, "t3", "x"), 0);
	b->free(b);
}

static void test_load_errors(void)
{
	wstore_backend *b;
	const char *missing = "/nonexistent/libmooncake_store.so";

	fresh_store("10000");
	CHECK_EQ(open_with(&b, missing, NULL, NULL), WSTORE_EUNAVAIL);
	CHECK(b == NULL);
	CHECK_MSG("cannot load mooncake client library "
		  "'/nonexistent/libmooncake_store.so': ");
	CHECK(!strchr(wstore_last_error(), '\n'));
	CHECK_EQ(open_with(&b, lib_path("libmooncake_store_partial.so"), NULL,
			   NULL),
		 WSTORE_EUNAVAIL);
	CHECK_MSG("lacks symbol 'mooncake_store_get_into'");
	CHECK_EQ(open_with(&b, "libm.so.6", NULL, NULL), WSTORE_EUNAVAIL);
	CHECK_MSG("mooncake client library 'libm.so.6' lacks symbol "
		  "'mooncake_store_create'");
	CHECK_EQ(open_with(&b, lib_path("libmooncake_store.so"), NULL, "5000"),
		 WSTORE_EINVAL);
	CHECK_MSG("key 'replica_num' must be a positive integer from 1 to "
		  "1024, got '5000'");
	CHECK_EQ(open_with(&b, lib_path("libmooncake_store.so"), NULL, "2"), 0);
	if (b)
		b->free(b);
}

static void test_setup_failure(void)
{
	wstore_backend *b;

	fresh_store("10000");
	setenv("MOONCAKE_STANDIN_FAIL_SETUP", "1", 1);
	CHECK_EQ(open_with(&b, lib_path("libmooncake_store.so"),
			   "10.255.0.1:50051", NULL),
		 WSTORE_EUNAVAIL);
	CHECK(b == NULL);
	CHECK_MSG("cannot connect to mooncake master '10.255.0.1:50051'");
	unsetenv("MOONCAKE_STANDIN_FAIL_SETUP");
}

/* Nothing listens on the master's port: one error within the connect
 * timeout, naming the master, without waiting for Mooncake's retries. */
static void test_unreachable_master(void)
{
	const char *lib = real ? getenv("WSTORE_MOONCAKE_LIBRARY")
			       : lib_path("libmooncake_store.so");
	wstore_backend *b;
	double t0 = now_s();

	CHECK_EQ(open_with(&b, lib, "127.0.0.1:1", NULL), WSTORE_EUNAVAIL);
	CHECK(b == NULL);
	CHECK_MSG("cannot connect to mooncake master '127.0.0.1:1': "
		  "connection refused");
	CHECK(now_s() - t0 < 2.0);
	CHECK(!strchr(wstore_last_error(), '\n'));
}

/* A port that accepts nothing within connect_timeout_ms (a listener with
 * a full backlog): the error says how long was waited. */
static void test_master_timeout(void)
{
	struct sockaddr_in a = { 0 };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), fill[8];
	char addr[64];
	wstore_backend *b;
	double t0;

	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(l >= 0 && bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	      listen(l, 0) == 0 &&
	      getsockname(l, (struct sockaddr *)&a, &len) == 0);
	/* fill the backlog, so that further connects get no answer */
	for (int i = 0; i < 8; i++) {
		fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		connect(fill[i], (struct sockaddr *)&a, sizeof(a));
	}
	snprintf(addr, sizeof(addr), "127.0.0.1:%u",
		 (unsigned)ntohs(a.sin_port));
	setenv("WSTORE_CONNECT_TIMEOUT_MS", "500", 1);
	t0 = now_s();
	CHECK_EQ(open_with(&b, lib_path("libmooncake_store.so"), addr, NULL),
		 WSTORE_EUNAVAIL);
	CHECK(now_s() - t0 < 2.0);
	CHECK_MSG("no answer within 500 ms (connect_timeout_ms)");
	unsetenv("WSTORE_CONNECT_TIMEOUT_MS");
	for (int i = 0; i < 8; i++)
		close(fill[i]);
	close(l);
}

/* Options are refused before the library is even loaded. */
static void test_bad_options(void)
{
	wstore_backend *b;

	setenv("WSTORE_PROTOCOL", "udp", 1);
	CHECK_EQ(open_with(&b, "/nonexistent/lib.so", NULL, NULL),
		 WSTORE_EINVAL);
	CHECK_MSG("key 'protocol' must be 'tcp' or 'rdma', got 'udp'");
	unsetenv("WSTORE_PROTOCOL");
	setenv("WSTORE_MOONCAKE_LOG", "loud", 1);
	CHECK_EQ(open_with(&b, "/nonexistent/lib.so", NULL, NULL),
		 WSTORE_EINVAL);
	CHECK_MSG("invalid mooncake_log 'loud'");
	unsetenv("WSTORE_MOONCAKE_LOG");
}

/* A master address with a typo in its form is one clear error at once,
 * not 90 s of Mooncake's setup retries. */
static void test_bad_master_addr(void)
{
	static const char *const bad[] = { "127.0.0.1",	      "127.0.0.1:",
					   "127.0.0.1:5005l", "127.0.0.1:0",
					   "127.0.0.1:70000", "127.0.0.1 :80",
					   ":50051" };
	wstore_backend *b;
	double t0 = now_s();

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		CHECK_EQ(open_with(&b, "/nonexistent/lib.so", bad[i], NULL),
			 WSTORE_EINVAL);
		CHECK(b == NULL);
		CHECK_MSG("key 'master_server_addr' must be HOST:PORT");
	}
	CHECK(now_s() - t0 < 1.0);
}

/* Real Mooncake: a port that accepts connections but is not the master
 * (the metadata server's, a typo away) fails within command_timeout_ms,
 * where Mooncake's own 20 setup attempts took 20 RPC timeouts. */
static void test_not_a_master(void)
{
	const char *meta = getenv("WSTORE_METADATA_SERVER");
	char addr[64];
	unsigned port = 0;
	wstore_backend *b;
	double t0;

	if (!real || !meta ||
	    sscanf(meta, "http://127.0.0.1:%u/", &port) != 1) {
		check_skip("needs a real cluster with an http metadata "
			   "server");
		return;
	}
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	setenv("WSTORE_COMMAND_TIMEOUT_MS", "1000", 1);
	t0 = now_s();
	CHECK_EQ(open_with(&b, getenv("WSTORE_MOONCAKE_LIBRARY"), addr, NULL),
		 WSTORE_EUNAVAIL);
	CHECK(now_s() - t0 < 5.0);
	CHECK_MSG("no answer to setup within 1000 ms (command_timeout_ms)");
	CHECK_MSG("rpc_port");
	CHECK(!strchr(wstore_last_error(), '\n'));
	unsetenv("WSTORE_COMMAND_TIMEOUT_MS");
}

/* Two clients (the second in another process) share one stand-in store,
 * as separate wstore CLI runs do. */
static void test_shared_store(void)
{
	wstore_backend *a, *b;
	char buf[256];
	pid_t pid;
	int status = -1;

	fresh_store("10000");
	if (!(a = open_standin()))
		return;
	if (!(b = open_standin())) {
		a->free(a);
		return;
	}
	CHECK_EQ(put_str(a, "shared", "from a"), 0);
	CHECK_EQ(get_str(b, "shared", buf), 0);
	CHECK(strcmp(buf, "from a") == 0);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		wstore_backend *c = NULL;

		if (open_with(&c, lib_path("libmooncake_store.so"), NULL,
			      NULL) != 0 ||
		    put_str(c, "child", "hi") != 0 ||
		    get_str(c, "shared", buf) != 0 || strcmp(buf, "from a"))
			_exit(1);
		c->free(c);
		_exit(0);
	}
	CHECK(pid > 0 && wait_child(pid, &status, 60) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(get_str(a, "child", buf), 0);
	CHECK(strcmp(buf, "hi") == 0);
	a->free(a);
	b->free(b);
}

/* A get into a registered buffer (no get_size first): the value, its
 * size; a value larger than the buffer is WSTORE_ERANGE naming its size;
 * a missing key WSTORE_ENOTFOUND. */
static void test_lent_get(void)
{
	char big[100];
	wstore_backend *b;
	size_t n = 0;
	char *lent;

	fresh_store("10000");
	if (!(b = open_standin()))
		return;
	memset(big, 'x', sizeof(big));
	CHECK_EQ(b->put(b, "lg/big", big, sizeof(big)), 0);
	CHECK_EQ(put_str(b, "lg/small", "abc"), 0);
	lent = b->buf_alloc(b, 64);
	CHECK(lent != NULL);
	if (lent) {
		CHECK_EQ(b->get(b, "lg/small", lent, 64, &n), 0);
		CHECK_EQ(n, 3);
		CHECK(memcmp(lent, "abc", 3) == 0);
		CHECK_EQ(b->get(b, "lg/big", lent, 64, &n), WSTORE_ERANGE);
		CHECK_EQ(n, 100);
		CHECK(strstr(wstore_last_error(), "holds 100 bytes") != NULL);
		CHECK_EQ(b->get(b, "lg/missing", lent, 64, &n),
			 WSTORE_ENOTFOUND);
		b->buf_free(b, lent);
	}
	b->free(b);
}

/* The largest buffer in the backend's pool of registered bounce buffers. */
static size_t pool_max(wstore_store *s)
{
	struct mc_backend *b = (struct mc_backend *)wstore_store_backend(s);
	size_t max = 0;

	pthread_mutex_lock(&b->lock);
	for (struct mc_buf *x = b->idle; x; x = x->next)
		if (x->cap > max)
			max = x->cap;
	pthread_mutex_unlock(&b->lock);
	return max;
}

/* A store on the library under test, with a checkpoint "rb" of one 6 MiB
 * file in 4 MiB chunks imported. */
static wstore_store *store_with_rb(void)
{
	wstore_import_options o = WSTORE_IMPORT_OPTIONS_INIT;
	wstore_store *s = NULL;
	wstore_config *cfg;
	char *dir, *path;
	FILE *f;
	int rc;

	if (asprintf(&dir, "%s/rbsrc", tmp_root) < 0 || mkdir(dir, 0755) ||
	    asprintf(&path, "%s/w.bin", dir) < 0 || !(f = fopen(path, "w")))
		abort();
	for (int i = 0; i < (6 << 20) / 4; i++)
		fwrite(&i, 4, 1, f);
	fclose(f);
	free(path);
	if (wstore_config_new(&cfg) != 0)
		abort();
	rc = wstore_config_load_env(cfg);
	if (rc == 0)
		rc = wstore_config_set(cfg, "store", "mooncake");
	if (rc == 0)
		rc = wstore_config_set(cfg, "mooncake_library",
				       real ? getenv("WSTORE_MOONCAKE_LIBRARY")
					    : lib_path("libmooncake_store.so"));
	if (rc == 0 && !real)
		rc = wstore_config_set(cfg, "master_server_addr", fake_master);
	if (rc == 0)
		rc = wstore_open(&s, cfg);
	wstore_config_free(cfg);
	o.checkpoint_id = "rb";
	o.model_id = "test/rb";
	o.source = dir;
	o.chunk_size = 4 << 20;
	if (rc == 0)
		rc = wstore_import(s, &o);
	CHECK_EQ(rc, 0);
	free(dir);
	if (rc != 0 && s) {
		wstore_free(s);
		s = NULL;
	}
	return s;
}

/* wstore_read_buf_alloc: a whole chunk read into it lands there, with no
 * bounce buffer (none of the pool's grows to a chunk); a read into plain
 * memory goes through one (so that this test can tell). */
static void test_read_buf(void)
{
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	wstore_store *s;
	char *plain = malloc(4 << 20), *reg = NULL;
	size_t n = 0;
	int ok = 1;

	fresh_store("10000");
	if (!plain || !(s = store_with_rb())) {
		free(plain);
		return;
	}
	CHECK_EQ(wstore_checkpoint_open(&ck, s, "rb"), 0);
	if (ck)
		CHECK_EQ(wstore_file_open(&f, ck, "w.bin"), 0);
	if (f)
		reg = wstore_read_buf_alloc(ck, 4 << 20);
	CHECK(reg != NULL);
	if (reg) {
		CHECK_EQ(wstore_file_pread(f, reg, 4 << 20, 4 << 20, &n), 0);
		CHECK_EQ(n, 2 << 20);
		CHECK(pool_max(s) < (2u << 20));
		CHECK_EQ(wstore_file_pread(f, reg, 4 << 20, 0, &n), 0);
		CHECK_EQ(n, 4 << 20);
		for (int i = 0; ok && i < (4 << 20) / 4; i++)
			ok = ((int *)(void *)reg)[i] == i;
		CHECK(ok);
		CHECK(pool_max(s) < (4u << 20));
		CHECK_EQ(wstore_file_pread(f, plain, 4 << 20, 0, &n), 0);
		CHECK(memcmp(plain, reg, 4 << 20) == 0);
		CHECK(pool_max(s) >= (4u << 20));
	}
	wstore_read_buf_free(ck, reg);
	wstore_read_buf_free(ck, NULL);
	wstore_file_free(f);
	wstore_checkpoint_free(ck);
	if (real)
		wstore_delete(s, "rb");
	wstore_free(s);
	free(plain);
}

/* ---- the stand-in itself, called directly ------------------------------ */

struct rcfg {
	size_t replica_num;
	int with_soft_pin;
	int with_hard_pin;
	const char **preferred_segments;
	size_t preferred_segments_count;
};

struct standin_api {
	void *(*create)(void);
	void (*destroy)(void *);
	int (*setup)(void *, const char *, const char *, uint64_t, uint64_t,
		     const char *, const char *, const char *);
	int (*put)(void *, const char *, const void *, size_t,
		   const struct rcfg *);
	int64_t (*get_into)(void *, const char *, void *, size_t);
	int (*reg)(void *, void *, size_t);
	int (*is_exist)(void *, const char *);
	int64_t (*get_size)(void *, const char *);
	int64_t (*remove_by_regex)(void *, const char *, int);
};

static int load_standin(struct standin_api *api, void **dl)
{
	static const char *names[] = {
		"mooncake_store_create",
		"mooncake_store_destroy",
		"mooncake_store_setup",
		"mooncake_store_put",
		"mooncake_store_get_into",
		"mooncake_store_register_buffer",
		"mooncake_store_is_exist",
		"mooncake_store_get_size",
		"mooncake_store_remove_by_regex",
	};
	void **slot = (void **)api;

	*dl = dlopen(lib_path("libmooncake_store.so"), RTLD_NOW);
	if (!*dl)
		return -1;
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
		void *sym = dlsym(*dl, names[i]);

		if (!sym)
			return -1;
		memcpy(&slot[i], &sym, sizeof(sym));
	}
	return 0;
}

static void test_standin_direct(void)
{
	struct rcfg rc = { 1, 0, 1, NULL, 0 };
	struct standin_api api;
	static char reg[64], unreg[64];
	char big[2048] = { 0 };
	void *dl, *h;

	fresh_store("10000");
	CHECK_EQ(load_standin(&api, &dl), 0);
	if (!dl || !(h = api.create()))
		return;
	CHECK_EQ(api.setup(h, "localhost", "P2PHANDSHAKE", 0, 1024, "tcp", "",
			   "127.0.0.1:50051"),
		 0);
	CHECK_EQ(api.put(h, "k", big, sizeof(big), &rc), -600);
	CHECK_EQ(api.put(h, "k", big, 0, &rc), -600);
	CHECK_EQ(api.put(h, "k", "abcdef", 6, &rc), 0);
	CHECK_EQ(api.is_exist(h, "k"), 1);
	CHECK_EQ(api.is_exist(h, "missing"), 0);
	CHECK_EQ(api.get_size(h, "missing"), -704);
	CHECK_EQ(api.get_into(h, "k", unreg, sizeof(unreg)), -600);
	CHECK_EQ(api.reg(h, reg, sizeof(reg)), 0);
	CHECK_EQ(api.get_into(h, "k", reg, 4), -600);
	CHECK_EQ(api.get_into(h, "k", reg + 8, 32), 6);
	CHECK_EQ(api.get_into(h, "missing", reg, sizeof(reg)), -704);
	CHECK_EQ(api.put(h, "x/1", "1", 1, &rc), 0);
	CHECK_EQ(api.put(h, "x/2", "2", 1, &rc), 0);
	CHECK_EQ(api.remove_by_regex(h, "^x/", 1), 2);
	CHECK_EQ(api.is_exist(h, "x/1"), 0);
	setenv("MOONCAKE_STANDIN_NO_SEGMENT", "1", 1);
	CHECK_EQ(api.put(h, "y", "1", 1, &rc), -200);
	unsetenv("MOONCAKE_STANDIN_NO_SEGMENT");
	api.destroy(h);
	dlclose(dl);
}

/* A listening loopback socket standing for the master's RPC port, which
 * the backend connects to before calling setup. */
static int fake_master_start(void)
{
	struct sockaddr_in a = { 0 };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(l, 64) != 0 ||
	    getsockname(l, (struct sockaddr *)&a, &len) != 0) {
		perror("mooncake-backend-tests: listen");
		return -1;
	}
	snprintf(fake_master, sizeof(fake_master), "127.0.0.1:%u",
		 (unsigned)ntohs(a.sin_port));
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} tests[] = {
		{ "roundtrip", test_roundtrip },
		{ "write_once_and_replace", test_write_once_and_replace },
		{ "missing_and_errors", test_missing_and_errors },
		{ "lease", test_lease },
		{ "transfer_retry", test_transfer_retry },
		{ "load_errors", test_load_errors },
		{ "setup_failure", test_setup_failure },
		{ "shared_store", test_shared_store },
		{ "standin_direct", test_standin_direct },
		{ "unreachable_master", test_unreachable_master },
		{ "master_timeout", test_master_timeout },
		{ "bad_options", test_bad_options },
		{ "bad_master_addr", test_bad_master_addr },
		{ "not_a_master", test_not_a_master },
		{ "read_buf", test_read_buf },
		{ "lent_get", test_lent_get },
	};
	/* what only the stand-in can do, or what hangs a real client */
	static const char *const standin_only[] = {
		"lease",	  "transfer_retry",
		"load_errors",	  "setup_failure",
		"shared_store",	  "standin_direct",
		"master_timeout", NULL,
	};
	const char *tmp = getenv("TMPDIR");
	char *cmd;

	if (argc > 1)
		build_dir = argv[1];
	if (asprintf(&tmp_root, "%s/wstore-mooncake-XXXXXX",
		     tmp ? tmp : "/tmp") < 0 ||
	    !mkdtemp(tmp_root)) {
		perror("mkdtemp");
		return 2;
	}
	real = getenv("MOONCAKE_TEST_REAL") &&
	       !strcmp(getenv("MOONCAKE_TEST_REAL"), "1");
	if (!real && fake_master_start() != 0)
		return 2;
	for (size_t i = 0; i < sizeof(tests) / sizeof(*tests); i++) {
		int skip = 0;

		if (argc > 2 && !strstr(tests[i].name, argv[2]))
			continue;
		check_current = tests[i].name;
		for (size_t k = 0; real && standin_only[k]; k++)
			skip |= !strcmp(standin_only[k], tests[i].name);
		if (skip)
			check_skip("needs the stand-in, not a real cluster");
		else
			tests[i].fn();
	}
	if (asprintf(&cmd, "rm -rf '%s'", tmp_root) < 0)
		cmd = NULL;
	if (cmd && system(cmd) != 0)
		fprintf(stderr, "warning: cannot remove %s\n", tmp_root);
	free(cmd);
	free(tmp_root);
	return check_summary(real ? "mooncake (real)" : "mooncake");
}
