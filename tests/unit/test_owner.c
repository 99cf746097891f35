/*
 * test_owner.c - owner.c and the judgement of lock records (lock.c): a
 * process named by boot id, PID namespace, pid and start time is ALIVE,
 * DEAD or UNKNOWN; temp name tags; lock records built with jansson and
 * never judged free when unreadable; records of older versions; a stale
 * lock that another taker has replaced meanwhile is not removed (stores
 * without an atomic update); a lock wait (a lock record, a file lock) ends
 * after one holder's share of it; out-of-range getters set the last error.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "../../src/common/clock.h"
#include "backends/helpers.h"
#include "error.h"
#include "lock.h"
#include "names.h"
#include "owner.h"
#include "store.h"
#include "unit.h"
#include "util.h"
#include "wstore/lease.h"

/* The pid of a child that has exited and been reaped. */
static long dead_pid(void)
{
	pid_t p = fork();

	if (p == 0)
		_exit(0);
	waitpid(p, NULL, 0);
	return (long)p;
}

static void test_judge(void)
{
	wstore__owner me, o;

	wstore__owner_self(&me);
	CHECK(me.boot_id[0] && me.pidns && me.start && me.pid == getpid());
	CHECK_EQ_INT(wstore__owner_judge(&me), WSTORE__OWNER_ALIVE);
	o = me;
	o.start++; /* the pid reused by another process */
	CHECK_EQ_INT(wstore__owner_judge(&o), WSTORE__OWNER_DEAD);
	o = me;
	o.pid = dead_pid();
	CHECK_EQ_INT(wstore__owner_judge(&o), WSTORE__OWNER_DEAD);
	o = me;
	o.pidns++; /* another PID namespace: its pids mean nothing here */
	o.pid = dead_pid();
	CHECK_EQ_INT(wstore__owner_judge(&o), WSTORE__OWNER_UNKNOWN);
	o = me;
	snprintf(o.boot_id, sizeof(o.boot_id), "another-kernel");
	CHECK_EQ_INT(wstore__owner_judge(&o), WSTORE__OWNER_UNKNOWN);
	/* an older wstore's record: host and pid only */
	o = me;
	o.boot_id[0] = '\0';
	o.pidns = 0;
	o.start = 0;
	CHECK_EQ_INT(wstore__owner_judge(&o), WSTORE__OWNER_ALIVE);
	o.pid = dead_pid();
	CHECK_EQ_INT(wstore__owner_judge(&o), WSTORE__OWNER_UNKNOWN);
	snprintf(o.host, sizeof(o.host), "another-host");
	o.pid = getpid();
	CHECK_EQ_INT(wstore__owner_judge(&o), WSTORE__OWNER_UNKNOWN);
}

static void test_json(void)
{
	wstore__owner me, back;
	json_t *j = json_object();
	char *txt;

	wstore__owner_self(&me);
	/* a host name JSON must escape stays one record */
	snprintf(me.host, sizeof(me.host), "we\"ird\\host");
	CHECK_EQ_INT(wstore__owner_to_json(j, &me), 0);
	txt = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	j = json_loads(txt, 0, NULL);
	CHECK(j != NULL);
	wstore__owner_from_json(&back, j);
	CHECK_STR(back.host, me.host);
	CHECK_STR(back.boot_id, me.boot_id);
	CHECK(back.pidns == me.pidns && back.start == me.start &&
	      back.pid == me.pid);
	CHECK_EQ_INT(wstore__owner_judge_json(j), WSTORE__OWNER_ALIVE);
	CHECK_EQ_INT(wstore__owner_judge_json(NULL), WSTORE__OWNER_UNKNOWN);
	json_decref(j);
	free(txt);
}

static void test_tags(void)
{
	char tag[WSTORE__OWNER_TAG_LEN + 1], t2[WSTORE__OWNER_TAG_LEN + 1];

	wstore__owner_tag(tag);
	CHECK_EQ_INT(strlen(tag), WSTORE__OWNER_TAG_LEN);
	CHECK_EQ_INT(wstore__owner_tag_judge(getpid(), tag),
		     WSTORE__OWNER_ALIVE);
	/* same namespace, the pid free: dead */
	CHECK_EQ_INT(wstore__owner_tag_judge(dead_pid(), tag),
		     WSTORE__OWNER_DEAD);
	/* same namespace, the pid another process's */
	memcpy(t2, tag, sizeof(t2));
	t2[11] = t2[11] == '0' ? '1' : '0';
	CHECK_EQ_INT(wstore__owner_tag_judge(getpid(), t2), WSTORE__OWNER_DEAD);
	/* another namespace or kernel: cannot tell */
	memcpy(t2, tag, sizeof(t2));
	t2[0] = t2[0] == '0' ? '1' : '0';
	CHECK_EQ_INT(wstore__owner_tag_judge(dead_pid(), t2),
		     WSTORE__OWNER_UNKNOWN);
}

/* A lock record with the given owner and lease time, as lock.c writes. */
static char *record(const wstore__owner *o, int64_t time_s, int64_t expires)
{
	json_t *j = json_object();
	char *txt;

	wstore__owner_to_json(j, o);
	json_object_set_new(j, "time", json_integer(time_s));
	json_object_set_new(j, "token", json_string("0123"));
	if (expires)
		json_object_set_new(j, "expires_ms", json_integer(expires));
	txt = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return txt;
}

static int held(const char *rec)
{
	char owner[320];

	return wstore__lock_record_held(rec, rec ? strlen(rec) : 0,
					wclock_wall_ms(), owner, sizeof(owner));
}

static void test_lock_records(void)
{
	int64_t now = wclock_wall_ms(), now_s = now / 1000;
	wstore__owner me, o;
	char *r;

	wstore__owner_self(&me);
	CHECK_EQ_INT(held(NULL), 0);
	CHECK_EQ_INT(held(""), 0);
	/* unreadable: held, never free */
	CHECK_EQ_INT(held("{\"host\":\"a\"b\",\"pid\":1}"), 1);
	CHECK_EQ_INT(held("[1,2]"), 1);
	/* a live owner, whatever its lease time says */
	r = record(&me, now_s, now - 1000);
	CHECK_EQ_INT(held(r), 1);
	free(r);
	/* a dead owner of this namespace, with time left: free */
	o = me;
	o.pid = dead_pid();
	r = record(&o, now_s, now + 60000);
	CHECK_EQ_INT(held(r), 0);
	free(r);
	/* an owner of another namespace: held until its lease time ends */
	o = me;
	o.pidns++;
	r = record(&o, now_s, now + 60000);
	CHECK_EQ_INT(held(r), 1);
	free(r);
	r = record(&o, now_s, now - 1);
	CHECK_EQ_INT(held(r), 0);
	free(r);
	/* older records (no lease time): another host's stay until unlock */
	o = me;
	o.boot_id[0] = '\0';
	o.pidns = o.start = 0;
	snprintf(o.host, sizeof(o.host), "another-host");
	r = record(&o, 1, 0);
	CHECK_EQ_INT(held(r), 1);
	free(r);
	/* this host's with a pid not found: a TTL after they were taken */
	wstore__owner_host(o.host, sizeof(o.host));
	o.pid = dead_pid();
	r = record(&o, now_s, 0);
	CHECK_EQ_INT(held(r), 1);
	free(r);
	r = record(&o, now_s - 3600, 0);
	CHECK_EQ_INT(held(r), 0);
	free(r);
}

/* ---- a stale lock replaced meanwhile (stores without update) ------------ */

static struct {
	int (*get)(wstore_backend *, const char *, void *, size_t, size_t *);
	const char *key;
	char *stale; /* returned once for key, then the truth */
} lie;

static int lying_get(wstore_backend *b, const char *key, void *buf, size_t cap,
		     size_t *out_len)
{
	if (lie.stale && !strcmp(key, lie.key)) {
		size_t n = strlen(lie.stale);

		*out_len = n;
		if (n > cap)
			return WSTORE_ERANGE;
		memcpy(buf, lie.stale, n);
		free(lie.stale);
		lie.stale = NULL;
		return 0;
	}
	return lie.get(b, key, buf, cap, out_len);
}

static void test_lock_stale_race(void)
{
	wstore_backend *b = NULL;
	wstore_store *s = NULL;
	wstore__held *h1 = NULL, *h2 = NULL;
	wstore__owner dead;
	char *cur = NULL;
	size_t n = 0;

	if (wstore_backend_mem_new(&b, 0) != 0 ||
	    wstore_open_backend(&s, b) != 0) {
		CHECK(!"cannot open a mem store");
		return;
	}
	/* a store that can neither update nor put_new (as Mooncake) */
	b->update = NULL;
	b->put_new = NULL;
	lie.get = b->get;
	b->get = lying_get;
	lie.key = "weight/locks/models/x";
	CHECK_EQ_INT(wstore__lock(s, "models/x", &h1), 0);
	/* the next taker first reads a stale record (a dead owner's), as it
	 * was before h1 took the lock over */
	wstore__owner_self(&dead);
	dead.pid = dead_pid();
	lie.stale = record(&dead, 1, 1);
	CHECK_EQ_INT(wstore__lock(s, "models/x", &h2), WSTORE_EBUSY);
	CHECK(h2 == NULL);
	CHECK(strstr(wstore_last_error(), "locked by pid") != NULL);
	/* h1's record is still there */
	CHECK_EQ_INT(wstore__get_alloc(s, "weight/locks/models/x", &cur, &n),
		     0);
	CHECK(cur && strstr(cur, "\"token\"") != NULL);
	free(cur);
	CHECK_EQ_INT(wstore__lock_lost(h1), 0);
	wstore__unlock(s, h1);
	CHECK_EQ_INT(wstore__lock(s, "models/x", &h2), 0);
	wstore__unlock(s, h2);
	free(lie.stale);
	lie.stale = NULL;
	wstore_free(s);
}

/*
 * Two takers of one stale record (stores without update): only the one
 * whose claim on it is kept may remove it.  A live taker's claim makes the
 * next back off and leaves the record; a dead taker's claim is claimed in
 * turn, and the takeover then removes every claim.
 */
static void test_lock_stale_claim(void)
{
	wstore_backend *b = NULL;
	wstore_store *s = NULL;
	wstore__held *h = NULL;
	wstore__owner dead, live;
	char k1[WSTORE__KEY_MAX], k2[WSTORE__KEY_MAX], *cur = NULL;
	const char *lk = "weight/locks/models/y";
	char *rec, *claim;
	size_t n = 0;

	/* write-once, as Mooncake: a second put keeps the first record */
	if (wstore_backend_mem_new(&b, WSTORE_BACKEND_WRITE_ONCE) != 0 ||
	    wstore_open_backend(&s, b) != 0) {
		CHECK(!"cannot open a mem store");
		return;
	}
	b->update = NULL;
	b->put_new = NULL;
	wstore__owner_self(&dead);
	dead.pid = dead_pid();
	wstore__owner_self(&live);
	rec = record(&dead, 1, 1);
	CHECK_EQ_INT(b->put(b, lk, rec, strlen(rec)), 0);
	wstore__lock_claim_key(k1, "models/y", rec, strlen(rec));
	/* another live taker has claimed the record: back off, keep it */
	claim = record(&live, wclock_wall_ms() / 1000,
		       wclock_wall_ms() + 60000);
	CHECK_EQ_INT(b->put(b, k1, claim, strlen(claim)), 0);
	CHECK_EQ_INT(wstore__lock(s, "models/y", &h), WSTORE_EBUSY);
	CHECK(h == NULL);
	CHECK_EQ_INT(wstore__get_alloc(s, lk, &cur, &n), 0);
	CHECK(cur && n == strlen(rec) && !memcmp(cur, rec, n));
	free(cur);
	cur = NULL;
	free(claim);
	/* that taker died before removing it: its claim is claimed */
	claim = record(&dead, 2, 2); /* not the record's bytes */
	CHECK_EQ_INT(b->remove(b, k1, 1), 0);
	CHECK_EQ_INT(b->put(b, k1, claim, strlen(claim)), 0);
	wstore__lock_claim_key(k2, "models/y", claim, strlen(claim));
	CHECK_EQ_INT(wstore__lock(s, "models/y", &h), 0);
	CHECK_EQ_INT(wstore__get_alloc(s, k1, &cur, &n), WSTORE_ENOTFOUND);
	CHECK_EQ_INT(wstore__get_alloc(s, k2, &cur, &n), WSTORE_ENOTFOUND);
	CHECK_EQ_INT(wstore__get_alloc(s, lk, &cur, &n), 0);
	CHECK(cur && strstr(cur, "\"token\":\"0123\"") == NULL);
	free(cur);
	wstore__unlock(s, h);
	free(claim);
	free(rec);
	wstore_free(s);
}

/* ---- lock waits are bounded ------------------------------------------------
 */

/* A lock kept by one holder: the wait gives up after WSTORE_LOCK_WAIT_MS,
 * not the overall cap of three times that; 0 does not wait. */
static void test_lock_wait_bounded(void)
{
	wstore_store *s = NULL;
	wstore__held *h1 = NULL, *h2 = NULL;
	uint64_t t0, el;

	if (wstore_open_url(&s, "mem://") != 0) {
		CHECK(!"cannot open a mem store");
		return;
	}
	CHECK_EQ_INT(wstore__lock(s, "models/w", &h1), 0);
	setenv("WSTORE_LOCK_WAIT_MS", "300", 1);
	t0 = wclock_mono_ms();
	CHECK_EQ_INT(wstore__lock_wait(s, "models/w", &h2), WSTORE_EBUSY);
	el = wclock_mono_ms() - t0;
	CHECK(h2 == NULL);
	CHECK(el >= 250 && el < 850);
	CHECK(strstr(wstore_last_error(), "locked by pid") != NULL);
	CHECK(strstr(wstore_last_error(), "gave up after") != NULL);
	setenv("WSTORE_LOCK_WAIT_MS", "0", 1);
	t0 = wclock_mono_ms();
	CHECK_EQ_INT(wstore__lock_wait(s, "models/w", &h2), WSTORE_EBUSY);
	CHECK(wclock_mono_ms() - t0 < 250);
	/* nonsense is the default, not "no wait" nor "forever" */
	setenv("WSTORE_LOCK_WAIT_MS", "-5", 1);
	CHECK(wstore__lock_wait_ms() == 10000);
	setenv("WSTORE_LOCK_WAIT_MS", "9999999", 1);
	CHECK(wstore__lock_wait_ms() == 10000);
	unsetenv("WSTORE_LOCK_WAIT_MS");
	CHECK(wstore__lock_wait_ms() == 10000);
	/* a store whose calls retry (Mooncake's transfers, 30 s): a holder
	 * retrying its write is waited for that long and 5 s more, unless
	 * the variable says otherwise */
	CHECK(wstore__lock_wait_for(0) == 10000);
	CHECK(wstore__lock_wait_for(30000) == 35000);
	CHECK(wstore__lock_wait_for(1000) == 10000);
	CHECK(wstore__lock_wait_for(UINT64_MAX) == 605000);
	setenv("WSTORE_LOCK_WAIT_MS", "300", 1);
	CHECK(wstore__lock_wait_for(30000) == 300);
	unsetenv("WSTORE_LOCK_WAIT_MS");
	wstore__unlock(s, h1);
	CHECK_EQ_INT(wstore__lock_wait(s, "models/w", &h2), 0);
	wstore__unlock(s, h2);
	wstore_free(s);
}

/* A file lock (the file store's update) that a child process keeps: the
 * wait gives up after one holder's share, the holder named by /proc/locks;
 * once the child is gone the lock is taken. */
static void test_flock_wait_bounded(void)
{
	char path[] = "/tmp/wstore-unit-flock-XXXXXX";
	int fd = mkstemp(path), fd2, go[2];
	uint64_t t0, el;
	pid_t child;
	char c;

	if (fd < 0 || pipe(go) < 0) {
		CHECK(!"cannot make a file and a pipe");
		return;
	}
	child = fork();
	if (child == 0) {
		int cfd = open(path, O_RDWR);

		if (cfd < 0 || flock(cfd, LOCK_EX) < 0)
			_exit(1);
		if (write(go[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	CHECK(child > 0 && read(go[0], &c, 1) == 1);
	fd2 = open(path, O_RDWR);
	setenv("WSTORE_LOCK_WAIT_MS", "300", 1);
	t0 = wclock_mono_ms();
	CHECK_EQ_INT(wstore__flock_wait(fd2), WSTORE_EBUSY);
	el = wclock_mono_ms() - t0;
	CHECK(el >= 250 && el < 850);
	CHECK(strstr(wstore_last_error(), "held by another process for over") !=
	      NULL);
	unsetenv("WSTORE_LOCK_WAIT_MS");
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	CHECK_EQ_INT(wstore__flock_wait(fd2), 0);
	close(fd2);
	close(fd);
	close(go[0]);
	close(go[1]);
	unlink(path);
}

/* ---- getters out of range set the last error ----------------------------- */

static void test_range_errors(void)
{
	wstore_store *s = NULL;
	wstore_leases *ls = NULL;
	wstore_usage *u = NULL;
	wstore_lease_info li;
	wstore_usage_info ui;

	if (wstore_open_url(&s, "mem://") != 0) {
		CHECK(!"cannot open a mem store");
		return;
	}
	CHECK_EQ_INT(wstore_leases_read(&ls, s, "nothing"), 0);
	wstore__clear_err();
	CHECK_EQ_INT(wstore_leases_get(&li, ls, 3), WSTORE_ERANGE);
	CHECK(strstr(wstore_last_error(), "no lease 3") != NULL);
	CHECK_EQ_INT(wstore_usage_read(&u, s), 0);
	wstore__clear_err();
	CHECK_EQ_INT(wstore_usage_get(&ui, u, 0), WSTORE_ERANGE);
	CHECK(strstr(wstore_last_error(), "no checkpoint 0") != NULL);
	wstore_leases_free(ls);
	wstore_usage_free(u);
	wstore_free(s);
}

void test_owner(void)
{
	test_judge();
	test_json();
	test_tags();
	test_lock_records();
	test_lock_stale_race();
	test_lock_stale_claim();
	test_lock_wait_bounded();
	test_flock_wait_bounded();
	test_range_errors();
}
