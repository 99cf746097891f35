/*
 * mem.c - a process-local backend for tests and embedding.
 *
 * Entries live in one array sorted by key (bytewise), found by binary
 * search, under one mutex; every value is its own malloc'ed copy.  The
 * flags WRITE_ONCE and EMPTY_MISSING make it act like the weakest store of
 * the contract (docs/format.md, "What a store may do"): put keeps an
 * existing value and there is no upsert; get and size of a missing key
 * return an empty value.
 *
 * Callbacks never call user code while holding the mutex, except update's
 * fn, which the contract forbids to have side effects: list copies the
 * matching keys first, so its callback may use the backend.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

typedef struct mem_entry {
	char *key;
	void *val;
	size_t len;
} mem_entry;

typedef struct mem_backend {
	wstore_backend pub;
	pthread_mutex_t lock;
	mem_entry *v; /* sorted by key */
	size_t n, cap;
} mem_backend;

static mem_backend *mb_of(wstore_backend *b)
{
	return (mem_backend *)b;
}

/* Index of key, or of where it would go; *found says which. */
static size_t find(const mem_backend *mb, const char *key, int *found)
{
	size_t lo = 0, hi = mb->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(mb->v[mid].key, key);

		if (c == 0) {
			*found = 1;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = 0;
	return lo;
}

static int check_key(const char *key)
{
	if (key && *key)
		return 0;
	return wstore_backend_error(WSTORE_EINVAL, "invalid key '%s'",
				    key ? key : "(null)");
}

static int not_found(const char *key)
{
	return wstore_backend_error(WSTORE_ENOTFOUND, "no key '%s' in memory",
				    key);
}

static void *dup_value(const void *data, size_t len)
{
	void *p = malloc(len ? len : 1);

	if (p && len)
		memcpy(p, data, len);
	return p;
}

/*
 * Set key to a copy of data; caller holds the lock.  mode: 0 overwrite,
 * 1 keep an existing value (return 0), 2 fail with EEXISTS if it exists.
 */
static int set_locked(mem_backend *mb, const char *key, const void *data,
		      size_t len, int mode)
{
	int found;
	size_t i = find(mb, key, &found);
	void *val;

	if (found && mode == 1)
		return 0;
	if (found && mode == 2)
		return wstore_backend_error(WSTORE_EEXISTS,
					    "key '%s' already exists", key);
	val = dup_value(data, len);
	if (!val)
		return wstore__errc(-ENOMEM, "cannot store '%s'", key);
	if (found) {
		free(mb->v[i].val);
		mb->v[i].val = val;
		mb->v[i].len = len;
		return 0;
	}
	if (mb->n == mb->cap) {
		size_t cap = mb->cap ? 2 * mb->cap : 64;
		mem_entry *v = realloc(mb->v, cap * sizeof(*v));

		if (!v) {
			free(val);
			return wstore__errc(-ENOMEM, "cannot store '%s'", key);
		}
		mb->v = v;
		mb->cap = cap;
	}
	char *k = strdup(key);

	if (!k) {
		free(val);
		return wstore__errc(-ENOMEM, "cannot store '%s'", key);
	}
	memmove(&mb->v[i + 1], &mb->v[i], (mb->n - i) * sizeof(*mb->v));
	mb->v[i] = (mem_entry){ k, val, len };
	mb->n++;
	return 0;
}

static int set(wstore_backend *b, const char *key, const void *data, size_t len,
	       int mode)
{
	mem_backend *mb = mb_of(b);
	int rc = check_key(key);

	if (rc)
		return rc;
	pthread_mutex_lock(&mb->lock);
	rc = set_locked(mb, key, data, len, mode);
	pthread_mutex_unlock(&mb->lock);
	return rc;
}

/* Check key, take the lock and look key up: on 0 the lock is held and
 * *i / *found say where key is (or would go). */
static int lock_find(mem_backend *mb, const char *key, size_t *i, int *found)
{
	int rc = check_key(key);

	if (rc)
		return rc;
	pthread_mutex_lock(&mb->lock);
	*i = find(mb, key, found);
	return 0;
}

static int mem_put(wstore_backend *b, const char *key, const void *data,
		   size_t len)
{
	return set(b, key, data, len,
		   (b->flags & WSTORE_BACKEND_WRITE_ONCE) ? 1 : 0);
}

static int mem_upsert(wstore_backend *b, const char *key, const void *data,
		      size_t len)
{
	return set(b, key, data, len, 0);
}

static int mem_put_new(wstore_backend *b, const char *key, const void *data,
		       size_t len)
{
	return set(b, key, data, len, 2);
}

static int mem_get(wstore_backend *b, const char *key, void *buf, size_t cap,
		   size_t *out_len)
{
	mem_backend *mb = mb_of(b);
	size_t i;
	int found, rc = lock_find(mb, key, &i, &found);

	if (rc)
		return rc;
	if (!found) {
		if (b->flags & WSTORE_BACKEND_EMPTY_MISSING)
			*out_len = 0;
		else
			rc = not_found(key);
	} else {
		*out_len = mb->v[i].len;
		if (mb->v[i].len > cap)
			rc = wstore_backend_error(WSTORE_ERANGE,
						  "value of '%s' is %zu bytes, "
						  "buffer %zu",
						  key, mb->v[i].len, cap);
		else if (mb->v[i].len)
			memcpy(buf, mb->v[i].val, mb->v[i].len);
	}
	pthread_mutex_unlock(&mb->lock);
	return rc;
}

/* A loop over get: in-process there is nothing to batch, but the read
 * API's batched path is exercised by every test on this backend. */
static int mem_get_many(wstore_backend *b, size_t n, const char *const *keys,
			void *const *bufs, const size_t *caps, size_t *out_lens,
			int *out_rcs)
{
	for (size_t i = 0; i < n; i++) {
		out_lens[i] = 0;
		out_rcs[i] =
			mem_get(b, keys[i], bufs[i], caps[i], &out_lens[i]);
	}
	return 0;
}

static int mem_get_range(wstore_backend *b, const char *key, uint64_t off,
			 void *buf, size_t len, size_t *out_n)
{
	mem_backend *mb = mb_of(b);
	size_t i;
	int found, rc = lock_find(mb, key, &i, &found);

	if (rc)
		return rc;
	*out_n = 0;
	if (!found) {
		if (!(b->flags & WSTORE_BACKEND_EMPTY_MISSING))
			rc = not_found(key);
	} else if (off < mb->v[i].len) {
		size_t avail = mb->v[i].len - (size_t)off;

		*out_n = len < avail ? len : avail;
		memcpy(buf, (char *)mb->v[i].val + off, *out_n);
	}
	pthread_mutex_unlock(&mb->lock);
	return rc;
}

static int mem_size(wstore_backend *b, const char *key, uint64_t *out)
{
	mem_backend *mb = mb_of(b);
	size_t i;
	int found, rc = lock_find(mb, key, &i, &found);

	if (rc)
		return rc;
	if (found)
		*out = mb->v[i].len;
	else if (b->flags & WSTORE_BACKEND_EMPTY_MISSING)
		*out = 0;
	else
		rc = not_found(key);
	pthread_mutex_unlock(&mb->lock);
	return rc;
}

static int mem_remove(wstore_backend *b, const char *key, int force)
{
	mem_backend *mb = mb_of(b);
	size_t i;
	int found, rc = lock_find(mb, key, &i, &found);

	(void)force;
	if (rc)
		return rc;
	if (found) {
		free(mb->v[i].key);
		free(mb->v[i].val);
		memmove(&mb->v[i], &mb->v[i + 1],
			(mb->n - i - 1) * sizeof(*mb->v));
		mb->n--;
	} else {
		rc = not_found(key);
	}
	pthread_mutex_unlock(&mb->lock);
	return rc;
}

/* Copies of the keys starting with prefix (sorted), NULL-terminated. */
static int match_keys(mem_backend *mb, const char *prefix, char ***out)
{
	size_t plen = strlen(prefix), start, end, n = 0;
	char **keys;
	int found;

	pthread_mutex_lock(&mb->lock);
	start = find(mb, prefix, &found);
	for (end = start; end < mb->n; end++)
		if (strncmp(mb->v[end].key, prefix, plen) != 0)
			break;
	keys = calloc(end - start + 1, sizeof(*keys));
	for (size_t i = start; keys && i < end; i++) {
		keys[n] = strdup(mb->v[i].key);
		if (!keys[n])
			break;
		n++;
	}
	pthread_mutex_unlock(&mb->lock);
	if (!keys || n != end - start) {
		for (size_t i = 0; keys && i < n; i++)
			free(keys[i]);
		free(keys);
		return wstore__errc(-ENOMEM, "cannot list '%s' in memory",
				    prefix);
	}
	*out = keys;
	return 0;
}

static int mem_list(wstore_backend *b, const char *prefix, wstore_list_fn fn,
		    void *ctx)
{
	char **keys = NULL;
	int rc = match_keys(mb_of(b), prefix ? prefix : "", &keys);

	if (rc)
		return rc;
	for (size_t i = 0; keys[i]; i++) {
		if (rc == 0)
			rc = fn(keys[i], ctx);
		free(keys[i]);
	}
	free(keys);
	return rc;
}

static int mem_update(wstore_backend *b, const char *key, wstore_update_fn fn,
		      void *ctx)
{
	mem_backend *mb = mb_of(b);
	int found, rc = check_key(key);
	void *nv = NULL;
	size_t nl = 0, i;

	if (rc)
		return rc;
	pthread_mutex_lock(&mb->lock);
	i = find(mb, key, &found);
	rc = fn(&nv, &nl, found ? mb->v[i].val : NULL, found ? mb->v[i].len : 0,
		ctx);
	if (rc == 0)
		rc = set_locked(mb, key, nv, nl, 0);
	else if (rc > 0)
		rc = 0;
	pthread_mutex_unlock(&mb->lock);
	free(nv);
	return rc;
}

static void mem_free(wstore_backend *b)
{
	mem_backend *mb = mb_of(b);

	if (!b)
		return;
	for (size_t i = 0; i < mb->n; i++) {
		free(mb->v[i].key);
		free(mb->v[i].val);
	}
	free(mb->v);
	pthread_mutex_destroy(&mb->lock);
	free(mb);
}

int wstore_backend_mem_new(wstore_backend **out, unsigned flags)
{
	mem_backend *mb = calloc(1, sizeof(*mb));

	*out = NULL;
	if (!mb)
		return wstore__errc(-ENOMEM, "cannot create memory store");
	pthread_mutex_init(&mb->lock, NULL);
	mb->pub.version = WSTORE_BACKEND_VERSION;
	mb->pub.struct_size = sizeof(mb->pub);
	mb->pub.name = "mem";
	mb->pub.flags = flags;
	mb->pub.put = mem_put;
	mb->pub.upsert =
		(flags & WSTORE_BACKEND_WRITE_ONCE) ? NULL : mem_upsert;
	mb->pub.put_new = mem_put_new;
	mb->pub.get = mem_get;
	mb->pub.get_range = mem_get_range;
	mb->pub.get_many = mem_get_many;
	mb->pub.size = mem_size;
	mb->pub.remove = mem_remove;
	mb->pub.list = mem_list;
	mb->pub.update = mem_update;
	mb->pub.free = mem_free;
	*out = &mb->pub;
	return 0;
}

/* ---- the kind store URLs name (backends/table.c) ------------------------ */

static int mem_kind_open(wstore_backend **out, const char *url,
			 const char *rest, const wstore_config *cfg,
			 unsigned flags)
{
	(void)url;
	(void)rest;
	(void)cfg;
	(void)flags;
	return wstore_backend_mem_new(out, 0);
}

/* "mem" or "mem://": a store for tests, not named in messages. */
const wstore__backend_kind wstore__kind_mem = {
	.name = "mem",
	.schemes = { "mem://", "mem" },
	.open = mem_kind_open,
};
