/*
 * lease.c - read leases: "this process is reading checkpoint {ckpt}",
 * renewed by a background thread, expiring TTL after the last renewal
 * (docs/format.md, "Leases").
 *
 * Where a lease lives depends on what the store can do:
 *  - stores that can list keys (file, mem, Redis): one record per holder,
 *    "weight/leases/models/{ckpt}/{holder}".  With the backend's put_ttl
 *    (Redis: SET PX) the store itself drops a record that stopped being
 *    renewed; elsewhere the record's expires_ms is compared with the
 *    clock, and expired records are removed by whoever lists them.
 *  - stores that cannot list (Mooncake): one lease set per checkpoint,
 *    "weight/leases/models/{ckpt}", a JSON object of holder -> record,
 *    read-modified-written with the backend's atomic update, or without
 *    one under the lock "weight/locks/leases/{ckpt}" (lock.c).  Every
 *    write also drops the records that have expired.
 *
 * A record is one line of JSON: {"boot_id","expires_ms","holder","host",
 * "pid","pidns","since_ms","start","ttl_ms","what"}, the owner fields those
 * of owner.h.  The reader takes its lease before it reads
 * the manifest, and a delete (delete.c) checks for leases after it has
 * marked the manifest FAILED: so every reader that saw READY is seen by
 * the delete.  Reading and judging the leases of a checkpoint is leases.c;
 * read delete.c next.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <jansson.h>

#include "../common/clock.h"
#include "error.h"
#include "util.h"
#include "lease_int.h"
#include "lock.h"
#include "manifest.h"
#include "meta.h"
#include "names.h"
#include "owner.h"
#include "store.h"
#include "wstore/lease.h"

#define TTL_DEFAULT_MS 60000
#define TTL_MIN_MS 100
#define TTL_MAX_MS (24LL * 3600 * 1000)

struct wstore_lease {
	wstore_store *s;
	char id[256];
	char holder[WSTORE__KEY_MAX / 2];
	char key[WSTORE__KEY_MAX];
	char what[65];
	wstore__owner me;
	int64_t since_ms;
	uint64_t ttl_ms;
	pthread_t thread;
	int started;
	pthread_mutex_t mu; /* guards stop */
	pthread_cond_t cv;
	int stop;
};

static uint64_t lease_ttl(void)
{
	const char *e = getenv("WSTORE_LEASE_TTL_MS");
	char *end;
	long long v;

	if (!e || !*e)
		return TTL_DEFAULT_MS;
	v = strtoll(e, &end, 10);
	if (*end || v < TTL_MIN_MS || v > TTL_MAX_MS)
		return TTL_DEFAULT_MS;
	return (uint64_t)v;
}

void wstore__lease_set_key(char *out, const char *id)
{
	wstore__key_lease_set(out, id);
}

void wstore__lease_set_lock(char *out, const char *id)
{
	snprintf(out, WSTORE__KEY_MAX, "leases/%s", id);
}

/* ---- records ------------------------------------------------------------- */

static json_t *record_json(const wstore_lease *l, int64_t now)
{
	json_t *j = json_pack("{s:I, s:s, s:I, s:I, s:s}", "expires_ms",
			      (json_int_t)(now + (int64_t)l->ttl_ms), "holder",
			      l->holder, "since_ms", (json_int_t)l->since_ms,
			      "ttl_ms", (json_int_t)l->ttl_ms, "what", l->what);

	if (j && wstore__owner_to_json(j, &l->me) < 0) {
		json_decref(j);
		return NULL;
	}
	return j;
}

int wstore__lease_holder_dead(json_t *j)
{
	return wstore__owner_judge_json(j) == WSTORE__OWNER_DEAD;
}

/* ---- the lease set (stores without list) --------------------------------- */

struct set_edit {
	const char *holder; /* the record to drop or replace */
	json_t *rec;	    /* the new record, or NULL to drop */
	int64_t now;
};

/* Drop holder's record and every expired one; add rec. */
static int set_fn(void **out, size_t *out_len, const void *old, size_t old_len,
		  void *vctx)
{
	struct set_edit *e = vctx;
	json_t *j = old && old_len ? json_loadb(old, old_len, 0, NULL) : NULL;
	json_t *nj = json_object(), *v;
	const char *k;
	char *txt;

	if (!nj) {
		json_decref(j);
		return -ENOMEM;
	}
	if (json_is_object(j))
		json_object_foreach(j, k, v)
		{
			json_t *x = json_object_get(v, "expires_ms");

			if (strcmp(k, e->holder) == 0 || !json_is_integer(x) ||
			    json_integer_value(x) <= e->now ||
			    wstore__lease_holder_dead(v))
				continue;
			json_object_set(nj, k, v);
		}
	json_decref(j);
	if (e->rec) {
		/* the expiry counts from now, not from before the lock wait */
		json_int_t ttl =
			json_integer_value(json_object_get(e->rec, "ttl_ms"));

		json_object_set_new(e->rec, "expires_ms",
				    json_integer(wclock_wall_ms() + ttl));
		json_object_set(nj, e->holder, e->rec);
	}
	txt = json_dumps(nj, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(nj);
	if (!txt)
		return -ENOMEM;
	*out = txt;
	*out_len = strlen(txt);
	return 0;
}

static int set_write(wstore_store *s, const char *id, const char *holder,
		     json_t *rec)
{
	char key[WSTORE__KEY_MAX], lockname[WSTORE__KEY_MAX];
	struct set_edit e = { holder, rec, wclock_wall_ms() };

	wstore__lease_set_key(key, id);
	wstore__lease_set_lock(lockname, id);
	return wstore__rmw(s, key, lockname, set_fn, &e);
}

/* ---- taking, renewing, releasing ------------------------------------------
 */

/* Write (or rewrite) l's record with a fresh expiry. */
static int lease_write(wstore_lease *l)
{
	wstore_backend *b = l->s->b;
	json_t *j = record_json(l, wclock_wall_ms());
	char *txt;
	int rc;

	if (!j)
		return -ENOMEM;
	if (!b->list) {
		rc = set_write(l->s, l->id, l->holder, j);
		json_decref(j);
		return rc;
	}
	txt = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	if (!txt)
		return -ENOMEM;
	/* a lease need not survive a crash (its reader does not either):
	 * a plain put, which replaces without the fsyncs of an upsert,
	 * wherever put replaces at all */
	if (WSTORE__HAS(b, put_ttl))
		rc = b->put_ttl(b, l->key, txt, strlen(txt), l->ttl_ms);
	else if (!(b->flags & WSTORE_BACKEND_WRITE_ONCE))
		rc = b->put(b, l->key, txt, strlen(txt));
	else
		rc = wstore__replace(l->s, l->key, txt, strlen(txt));
	free(txt);
	return rc;
}

/* a failed renewal is tried again at the next tick; the lease may lapse
 * meanwhile, and a delete may then go ahead: the reader meets a missing
 * chunk and fails cleanly */
static void renew_tick(void *arg)
{
	lease_write(arg);
}

static void *renew_main(void *arg)
{
	wstore_lease *l = arg;

	wstore__tick(&l->mu, &l->cv, &l->stop, l->ttl_ms / 3, renew_tick, l);
	return NULL;
}

static void make_holder(wstore_lease *l)
{
	unsigned char r[8] = { 0 };
	const char *host = l->me.host;
	char hex[17];
	size_t j = 0;

	/* the holder is a key segment: letters, digits, '-' and '_' only */
	for (size_t i = 0; host[i] && j < 100; i++)
		l->holder[j++] =
			(host[i] >= 'a' && host[i] <= 'z') ||
					(host[i] >= 'A' && host[i] <= 'Z') ||
					(host[i] >= '0' && host[i] <= '9') ||
					host[i] == '-'
				? host[i]
				: '_';
	if (j == 0)
		l->holder[j++] = 'h';
	if (getrandom(r, sizeof(r), 0) != sizeof(r)) {
		uint64_t t =
			(uint64_t)wclock_wall_ms() ^ (uint64_t)(uintptr_t)l;

		memcpy(r, &t, sizeof(r));
	}
	for (int i = 0; i < 8; i++)
		sprintf(hex + 2 * i, "%02x", r[i]);
	snprintf(l->holder + j, sizeof(l->holder) - j, ".%ld.%s",
		 (long)l->me.pid, hex);
}

static int check_what(const char *what)
{
	size_t n = 0;

	for (const char *p = what; *p; p++, n++)
		if (*p < 0x20 || *p > 0x7e)
			return wstore__err(WSTORE_EINVAL,
					   "lease holder description must be "
					   "printable ASCII");
	return n > 64 ? wstore__err(WSTORE_EINVAL,
				    "lease holder description is longer "
				    "than 64 characters")
		      : 0;
}

int wstore_lease_take(wstore_lease **out, wstore_store *s, const char *id,
		      const char *what)
{
	wstore_lease *l;
	int rc;

	*out = NULL;
	if ((rc = wstore_validate_checkpoint_id(id)) < 0)
		return rc;
	if ((rc = check_what(what ? what : "read")) < 0)
		return rc;
	if (!(l = calloc(1, sizeof(*l))))
		return wstore__errc(-ENOMEM, "cannot take a lease");
	l->s = s;
	snprintf(l->id, sizeof(l->id), "%s", id);
	snprintf(l->what, sizeof(l->what), "%s", what ? what : "read");
	wstore__owner_self(&l->me);
	make_holder(l);
	wstore__key_lease(l->key, id, l->holder);
	l->ttl_ms = lease_ttl();
	l->since_ms = wclock_wall_ms();
	pthread_mutex_init(&l->mu, NULL);
	wclock_cond_init(&l->cv);
	rc = lease_write(l);
	if (rc < 0) {
		rc = wstore__err(rc, "cannot take a read lease on '%s': %s", id,
				 wstore_last_error());
		wstore_lease_release(l);
		return rc;
	}
	if (wstore__thread_start(&l->thread, renew_main, l) != 0) {
		rc = wstore__err(-EAGAIN, "cannot start the lease renewal "
					  "thread");
		wstore_lease_release(l);
		return rc;
	}
	l->started = 1;
	wstore__touch(s, id);
	*out = l;
	return 0;
}

int wstore__lease_read_ready(wstore_lease **out_lease, wstore_manifest **out,
			     wstore__mraw *r, wstore_store *s, const char *id,
			     const char *what, int require)
{
	wstore_lease *l = NULL;
	int rc = wstore_lease_take(&l, s, id, what);

	*out_lease = NULL;
	*out = NULL;
	/* a store we may only read (a read-only mount, another user's
	 * directory) is read without a lease: nobody can delete from it
	 * through us, and a delete by its owner fails our reads cleanly.
	 * Not so for a reader that requires its lease (serve): a delete
	 * would not see it */
	if (!require && (rc == -EROFS || rc == -EACCES || rc == -EPERM)) {
		wstore__clear_err();
		rc = 0;
	}
	if (rc < 0)
		return rc;
	if ((rc = wstore__manifest_read_ready_raw(out, r, s, id)) < 0) {
		wstore_lease_release(l);
		return rc;
	}
	*out_lease = l;
	return 0;
}

uint64_t wstore_lease_ttl_ms(const wstore_lease *l)
{
	return l->ttl_ms;
}

void wstore_lease_release(wstore_lease *l)
{
	char saved[1024];

	if (!l)
		return;
	snprintf(saved, sizeof(saved), "%s", wstore_last_error());
	if (l->started) {
		pthread_mutex_lock(&l->mu);
		l->stop = 1;
		pthread_cond_signal(&l->cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->thread, NULL);
	}
	if (l->s->b->list)
		wstore__remove(l->s, l->key);
	else
		set_write(l->s, l->id, l->holder, NULL);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	free(l);
	wstore__err(0, "%s", saved);
}
