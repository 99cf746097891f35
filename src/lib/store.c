/*
 * store.c - the store front end: opening a store from a URL or config, and
 * the checked primitives every operation is built on (whole-value reads,
 * replacing mutable objects on write-once stores, removes that treat "not
 * found" as done; the per-checkpoint lock is lock.c's).
 *
 * Backends are not trusted: sizes they report are re-checked here and by
 * callers against the manifest.  Read src/lib/import.c next.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "backends/helpers.h"
#include "error.h"
#include "manifest.h"
#include "names.h"
#include "store.h"

/* Copy url without "user:password@" so it can appear in messages. */
static char *redact_url(const char *url)
{
	char *out = strdup(url);

	if (out)
		wstore__redact(out);
	return out;
}

static char *default_root(void)
{
	return wstore_config_default_store();
}

/* ---- opening a backend by URL -------------------------------------------
 *
 * The backends say which URLs they take (wstore__backend_kinds, listed in
 * backends/table.c): this walks that table and knows no backend by name.
 */

/* Whether url matches scheme (a '*' at its end: url starts with what
 * precedes it; else the whole url); *rest is what follows. */
static int scheme_match(const char *scheme, const char *url, const char **rest)
{
	size_t n = strlen(scheme);

	if (n && scheme[n - 1] == '*') {
		if (strncmp(url, scheme, n - 1) != 0)
			return 0;
		*rest = url + n - 1;
		return 1;
	}
	if (strcmp(url, scheme) != 0)
		return 0;
	*rest = url + n;
	return 1;
}

/* The kind that takes paths (the file store). */
static const wstore__backend_kind *paths_kind(void)
{
	for (const wstore__backend_kind *const *k = wstore__backend_kinds; *k;
	     k++)
		if ((*k)->paths)
			return *k;
	return NULL;
}

/* The kind url names and *rest, what follows its scheme; a URL without
 * "://" that no scheme matches is a path.  NULL: none. */
static const wstore__backend_kind *find_kind(const char *url, const char **rest)
{
	for (const wstore__backend_kind *const *k = wstore__backend_kinds; *k;
	     k++)
		for (size_t i = 0;
		     i < sizeof((*k)->schemes) / sizeof(*(*k)->schemes) &&
		     (*k)->schemes[i];
		     i++)
			if (scheme_match((*k)->schemes[i], url, rest))
				return *k;
	*rest = url;
	return strstr(url, "://") ? NULL : paths_kind();
}

/* "unknown store URL", naming the URLs the kinds take. */
static int unknown_url(const char *url)
{
	const char *u[16];
	char list[512] = "";
	size_t n = 0, off = 0;

	for (const wstore__backend_kind *const *k = wstore__backend_kinds;
	     *k && n < 16; k++)
		if ((*k)->usage)
			u[n++] = (*k)->usage;
	for (size_t i = 0; i < n && off < sizeof(list); i++)
		off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s",
					i == 0	     ? ""
					: i + 1 == n ? " or "
						     : ", ",
					u[i]);
	return wstore__err(WSTORE_EINVAL, "unknown store URL '%s': expected %s",
			   url, list);
}

static int open_backend(wstore_backend **out, const char *url,
			const wstore_config *cfg, unsigned flags);

/* A kind around another ("fault+URL"): rest is the inner store's URL. */
static int open_wrapped(wstore_backend **out, const wstore__backend_kind *k,
			const char *rest, const wstore_config *cfg,
			unsigned flags)
{
	wstore_backend *inner;
	int rc = open_backend(&inner, rest, cfg, flags);

	if (rc < 0)
		return rc;
	rc = k->wrap(out, inner, cfg);
	if (rc < 0)
		inner->free(inner);
	return rc;
}

static int open_backend(wstore_backend **out, const char *url,
			const wstore_config *cfg, unsigned flags)
{
	const wstore__backend_kind *k;
	const char *rest = NULL;
	char *root = NULL;
	int rc;

	if (!url || !*url) {
		/* the default store is a path, whatever it looks like */
		if (!(root = default_root()))
			return wstore__err(WSTORE_EINVAL,
					   "no store given and neither "
					   "WSTORE_HOME nor HOME is set");
		url = rest = root;
		k = paths_kind();
	} else {
		k = find_kind(url, &rest);
	}
	if (!k)
		rc = unknown_url(url);
	else if (k->wrap)
		rc = open_wrapped(out, k, rest, cfg, flags);
	else if (k->open)
		rc = k->open(out, url, rest, cfg, flags);
	else
		rc = wstore__err(WSTORE_EUNSUPPORTED,
				 "store '%.*s...': this wstore was built "
				 "without %s (meson setup %s)",
				 (int)(rest - url), url, k->name,
				 k->build_option);
	free(root);
	return rc;
}

/* "quota" and "evict" of the config, checked before the store opens. */
static int read_policy(uint64_t *quota, int *lru, const wstore_config *cfg)
{
	const char *q = cfg ? wstore_config_get(cfg, "quota") : NULL;
	const char *e = cfg ? wstore_config_get(cfg, "evict") : NULL;

	*quota = 0;
	*lru = 0;
	if (q && *q && wstore_parse_size(quota, q) < 0)
		return wstore__err(WSTORE_EINVAL,
				   "invalid quota '%s': expected a size such "
				   "as 100GiB",
				   q);
	if (e && *e && strcmp(e, "lru") != 0 && strcmp(e, "none") != 0)
		return wstore__err(WSTORE_EINVAL,
				   "invalid evict '%s': expected 'lru' or "
				   "'none'",
				   e);
	*lru = e && strcmp(e, "lru") == 0;
	return 0;
}

int wstore_open(wstore_store **out, const wstore_config *cfg)
{
	return wstore_open_flags(out, cfg, WSTORE_OPEN_CREATE);
}

int wstore_open_flags(wstore_store **out, const wstore_config *cfg,
		      unsigned flags)
{
	uint64_t quota;
	int lru;
	const char *url = cfg ? wstore_config_get(cfg, "store") : NULL;
	wstore_backend *b = NULL;
	int rc;

	*out = NULL;
	free(wstore__take_warning());
	if ((rc = read_policy(&quota, &lru, cfg)) < 0)
		return rc;
	rc = open_backend(&b, url, cfg, flags);
	if (rc < 0) {
		free(wstore__take_warning());
		return rc;
	}
	rc = wstore_open_backend(out, b);
	if (rc < 0) {
		b->free(b);
		free(wstore__take_warning());
		return rc;
	}
	(*out)->warning = wstore__take_warning();
	free((*out)->label);
	(*out)->label = redact_url(url && *url ? url : b->name);
	(*out)->quota = quota;
	(*out)->evict_lru = lru;
	return 0;
}

int wstore_open_url(wstore_store **out, const char *url)
{
	wstore_config *cfg = NULL;
	int rc = wstore_config_new(&cfg);

	if (rc < 0)
		return rc;
	if (url)
		rc = wstore_config_set(cfg, "store", url);
	if (rc == 0)
		rc = wstore_open(out, cfg);
	wstore_config_free(cfg);
	return rc;
}

int wstore_open_backend(wstore_store **out, wstore_backend *b)
{
	wstore_store *s;

	*out = NULL;
	if (!b || b->version != WSTORE_BACKEND_VERSION)
		return wstore__err(WSTORE_EINVAL,
				   "backend interface version %u, this library "
				   "needs %u",
				   b ? b->version : 0, WSTORE_BACKEND_VERSION);
	if (b->struct_size <
	    offsetof(wstore_backend, sweep_temps) + sizeof(b->sweep_temps))
		return wstore__err(WSTORE_EINVAL,
				   "backend struct of %zu bytes, smaller than "
				   "version %u's",
				   b->struct_size, WSTORE_BACKEND_VERSION);
	if (!b->put || !b->get || !b->size || !b->remove || !b->free)
		return wstore__err(WSTORE_EINVAL,
				   "backend lacks a required callback");
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->b = b;
	s->label = strdup(b->name ? b->name : "backend");
	*out = s;
	return 0;
}

void wstore_free(wstore_store *s)
{
	if (!s)
		return;
	if (s->b)
		s->b->free(s->b);
	free(s->label);
	free(s->warning);
	free(s);
}

int wstore_free_exiting(wstore_store *s)
{
	int skipped = 0;

	if (!s)
		return 0;
	if (s->b && WSTORE__HAS(s->b, free_exiting)) {
		s->b->free_exiting(s->b);
		skipped = 1;
	} else if (s->b) {
		s->b->free(s->b);
	}
	free(s->label);
	free(s->warning);
	free(s);
	return skipped;
}

void wstore_set_notice(wstore_store *s, wstore_notice_fn fn, void *ctx)
{
	wstore__notice_set(s->b, fn, ctx);
}

wstore_backend *wstore_store_backend(wstore_store *s)
{
	return s->b;
}

unsigned wstore_store_caps(const wstore_store *s)
{
	const wstore_backend *b = s->b;
	unsigned caps = 0;

	if (b->list)
		caps |= WSTORE_CAP_LIST;
	if (b->get_range)
		caps |= WSTORE_CAP_RANGE_READS;
	if (b->get_many)
		caps |= WSTORE_CAP_BATCH_READS;
	if (b->flags & WSTORE_BACKEND_WRITE_ONCE)
		caps |= WSTORE_CAP_WRITE_ONCE;
	if (b->flags & WSTORE_BACKEND_UNTRUSTED)
		caps |= WSTORE_CAP_UNTRUSTED;
	/* the rule wstore_file_chunk_fd applies */
	if (b->open_fd && !(b->flags & (WSTORE_BACKEND_UNTRUSTED |
					WSTORE_BACKEND_WRITE_ONCE)))
		caps |= WSTORE_CAP_LOCAL_FILES;
	return caps;
}

const char *wstore_warning(const wstore_store *s)
{
	return s ? s->warning : NULL;
}

const char *wstore_backend_name(const wstore_store *s)
{
	return s->b->name;
}

/* A size the backend reported for key, judged before anything is
 * allocated for it: at most what a value of key's kind may hold. */
static int check_reported(const char *key, size_t len, size_t max,
			  const char *kind)
{
	if (len <= max)
		return 0;
	return wstore__err(WSTORE_ECORRUPT,
			   "'%s': the store reports a %s of %zu bytes, more "
			   "than the %zu one may have",
			   key, kind, len, max);
}

int wstore__get_alloc(wstore_store *s, const char *key, char **out,
		      size_t *out_len)
{
	const char *kind;
	size_t max = wstore__key_value_max(key, &kind);
	size_t cap = max < 64 * 1024 ? max : 64 * 1024, len = 0;
	char *buf = NULL;
	int rc;

	*out = NULL;
	for (int tries = 0; tries < 8; tries++) {
		char *nb = realloc(buf, cap + 1);

		if (!nb) {
			free(buf);
			return -ENOMEM;
		}
		buf = nb;
		len = 0;
		rc = s->b->get(s->b, key, buf, cap, &len);
		/* a backend that says it wrote more than fits is lying */
		if (rc == 0 && len > cap)
			rc = wstore__err(WSTORE_ECORRUPT,
					 "'%s': the store returned %zu bytes "
					 "for a buffer of %zu",
					 key, len, cap);
		if (rc != WSTORE_ERANGE)
			break;
		/* the value grew past our guess: retry with its size */
		if ((rc = check_reported(key, len, max, kind)) < 0)
			break;
		cap = len;
		rc = WSTORE_ERANGE;
	}
	if (rc == 0 && len == 0 && (s->b->flags & WSTORE_BACKEND_EMPTY_MISSING))
		rc = wstore__err(WSTORE_ENOTFOUND, "'%s' not found", key);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	buf[len] = '\0';
	*out = buf;
	if (out_len)
		*out_len = len;
	return 0;
}

int wstore__remove(wstore_store *s, const char *key)
{
	int rc = s->b->remove(s->b, key, 1);

	return rc == WSTORE_ENOTFOUND ? 0 : rc;
}

/* On a write-once store, check that key now holds exactly data. */
static int confirm_value(wstore_store *s, const char *key, const void *data,
			 size_t len)
{
	char *got = NULL;
	size_t n = 0;
	int rc = wstore__get_alloc(s, key, &got, &n);

	if (rc == WSTORE_ENOTFOUND && len == 0)
		return 0;
	if (rc < 0)
		return rc;
	rc = (n == len && memcmp(got, data, len) == 0)
		     ? 0
		     : wstore__err(WSTORE_EBUSY,
				   "'%s' was changed by another writer", key);
	free(got);
	return rc;
}

int wstore__replace(wstore_store *s, const char *key, const void *data,
		    size_t len)
{
	int rc;

	if (s->b->upsert)
		return s->b->upsert(s->b, key, data, len);
	rc = wstore__remove(s, key);
	if (rc < 0)
		return rc;
	rc = s->b->put(s->b, key, data, len);
	if (rc < 0)
		return rc;
	return (s->b->flags & WSTORE_BACKEND_WRITE_ONCE)
		       ? confirm_value(s, key, data, len)
		       : 0;
}

unsigned wstore__jobs(uint32_t jobs)
{
	long n;

	if (jobs)
		return jobs > 256 ? 256 : jobs;
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 64 ? 64 : (unsigned)n;
}

int wstore__chunk_len(uint64_t *out, const wstore__file_rec *f, uint64_t c)
{
	if (c >= f->nchunks)
		return wstore__err(WSTORE_ECORRUPT,
				   "file '%s' has no chunk %llu", f->path,
				   (unsigned long long)c);
	if (f->chunk_size == 0) {
		if (f->nchunks != 1)
			return wstore__err(
				WSTORE_EUNSUPPORTED,
				"file '%s' has %llu chunks but no chunk_size (legacy record); offsets cannot be mapped",
				f->path, (unsigned long long)f->nchunks);
		*out = f->size;
		return 0;
	}
	if (c * f->chunk_size >= f->size && !(c == 0 && f->size == 0))
		return wstore__err(
			WSTORE_ECORRUPT,
			"file '%s': chunk list longer than size/chunk_size",
			f->path);
	*out = f->size - c * f->chunk_size < f->chunk_size
		       ? f->size - c * f->chunk_size
		       : f->chunk_size;
	return 0;
}

/* Judge what a get of chunk c of f returned: rc, got bytes, want by the
 * manifest. */
int wstore__check_chunk(wstore_store *s, const wstore__file_rec *f, uint64_t c,
			int rc, size_t got, uint64_t want)
{
	const char *key = f->chunks[c];

	if (rc == WSTORE_ERANGE)
		return wstore__err(
			WSTORE_ECORRUPT,
			"file '%s': chunk '%s' is larger than expected (%zu > %llu bytes)",
			f->path, key, got, (unsigned long long)want);
	if (rc == WSTORE_ENOTFOUND ||
	    (rc == 0 && got == 0 && want > 0 &&
	     (s->b->flags & WSTORE_BACKEND_EMPTY_MISSING)))
		return wstore__err(WSTORE_ECORRUPT,
				   "file '%s': chunk '%s' is missing", f->path,
				   key);
	if (rc < 0)
		return wstore__err(rc, "file '%s': cannot read chunk '%s': %s",
				   f->path, key, wstore_last_error());
	if (got != want)
		return wstore__err(
			WSTORE_ECORRUPT,
			"file '%s': chunk '%s' holds %zu bytes, expected %llu",
			f->path, key, got, (unsigned long long)want);
	return 0;
}

int wstore__read_chunk(wstore_store *s, const wstore__file_rec *f, uint64_t c,
		       void *buf, size_t cap)
{
	uint64_t want;
	size_t got = 0;
	int rc = wstore__chunk_len(&want, f, c);

	if (rc < 0)
		return rc;
	if (want > cap)
		return wstore__err(WSTORE_ERANGE, "chunk buffer too small");
	rc = s->b->get(s->b, f->chunks[c], buf, (size_t)want, &got);
	return wstore__check_chunk(s, f, c, rc, got, want);
}

/* A chunk buffer backed by huge pages where the kernel offers them: first
 * touch of fresh 4 KiB pages is otherwise slower than hashing what goes
 * into it (docs/performance.md).  Free with free(). */
void *wstore__buf_alloc(size_t cap)
{
	const size_t huge = 2u << 20;
	void *p = NULL;

	if (cap < huge)
		return malloc(cap ? cap : 1);
	cap = (cap + huge - 1) / huge * huge;
	if (posix_memalign(&p, huge, cap) != 0)
		return NULL;
	madvise(p, cap, MADV_HUGEPAGE);
	return p;
}

void *wstore__store_buf_alloc(wstore_store *s, size_t cap)
{
	if (WSTORE__HAS(s->b, buf_alloc) && WSTORE__HAS(s->b, buf_free)) {
		void *p = s->b->buf_alloc(s->b, cap);

		if (p)
			return p;
	}
	return wstore__buf_alloc(cap);
}

void wstore__store_buf_free(wstore_store *s, void *p)
{
	/* the backend tells its own buffers from others */
	if (p && WSTORE__HAS(s->b, buf_free))
		s->b->buf_free(s->b, p);
	else
		free(p);
}

/* ---- manifests in the store --------------------------------------------- */

/* wstore_manifest_read; with r, its bytes are kept there, and on a store
 * of local files the file they were read from. */
static int manifest_read(wstore_manifest **out, wstore__mraw *r,
			 wstore_store *store, const char *id)
{
	static const char prefix[] = "invalid manifest: ";
	char key[WSTORE__KEY_MAX], *data = NULL;
	const char *msg;
	size_t len = 0;
	int rc, fd = -1;

	*out = NULL;
	if ((rc = wstore_validate_checkpoint_id(id)))
		return rc;
	wstore__key_manifest(key, id);
	/* the file first: one replaced after it was opened is unlinked, so
	 * wstore__manifest_same then compares the bytes */
	if (r && wstore__local_files(store) &&
	    (rc = store->b->open_fd(store->b, key, &fd)) < 0) {
		fd = -1;
		if (rc != WSTORE_ENOTFOUND)
			return rc;
		wstore__clear_err();
	}
	rc = wstore__get_alloc(store, key, &data, &len);
	if (rc < 0 && fd >= 0)
		close(fd);
	if (rc == WSTORE_ENOTFOUND)
		return wstore__err(rc, "checkpoint '%s' not found", id);
	if (rc)
		return rc;
	rc = wstore_manifest_parse(out, data, len);
	if (rc == 0 && r) {
		r->raw = data;
		r->len = len;
		r->fd = fd;
		data = NULL;
		fd = -1;
	}
	if (fd >= 0)
		close(fd);
	free(data);
	if (rc == WSTORE_ECORRUPT) {
		msg = wstore_last_error();
		if (strncmp(msg, prefix, sizeof(prefix) - 1) == 0)
			msg += sizeof(prefix) - 1;
		return wstore__err(rc,
				   "checkpoint '%s': manifest is corrupt: %s",
				   id, msg);
	}
	if (rc)
		return rc;
	if (strcmp((*out)->checkpoint_id, id) != 0) {
		rc = wstore__err(
			WSTORE_ECORRUPT,
			"checkpoint '%s': manifest is corrupt: it names checkpoint '%s'",
			id, (*out)->checkpoint_id);
		wstore_manifest_free(*out);
		*out = NULL;
		if (r)
			wstore__mraw_free(r);
	}
	return rc;
}

int wstore_manifest_read(wstore_manifest **out, wstore_store *store,
			 const char *id)
{
	return manifest_read(out, NULL, store, id);
}

int wstore__manifest_read_ready_raw(wstore_manifest **out, wstore__mraw *r,
				    wstore_store *store, const char *id)
{
	wstore__mraw got = { NULL, 0, -1 };
	wstore_manifest *m;
	int rc;

	*out = NULL;
	if ((rc = manifest_read(&m, r ? &got : NULL, store, id)) < 0)
		return rc;
	if (strcmp(m->status, "READY") != 0) {
		rc = wstore__err(WSTORE_ENOTREADY, "checkpoint '%s' is %s: %s",
				 id, m->status,
				 m->error && *m->error ? m->error
						       : "no error recorded");
		wstore_manifest_free(m);
		wstore__mraw_free(&got);
		return rc;
	}
	if (r)
		*r = got;
	*out = m;
	return 0;
}

int wstore__manifest_read_ready(wstore_manifest **out, wstore_store *store,
				const char *id)
{
	return wstore__manifest_read_ready_raw(out, NULL, store, id);
}

int wstore__local_files(const wstore_store *s)
{
	const wstore_backend *b = s->b;

	return b->open_fd && !(b->flags & (WSTORE_BACKEND_UNTRUSTED |
					   WSTORE_BACKEND_WRITE_ONCE));
}

int wstore__whole_files(const wstore_store *s)
{
	const wstore_backend *b = s->b;

	return WSTORE__HAS(b, begin_file) && WSTORE__HAS(b, commit_file) &&
	       WSTORE__HAS(b, abort_file) &&
	       !(b->flags & WSTORE_BACKEND_WRITE_ONCE);
}

int wstore__open_range(wstore_store *s, const char *key, int *out_fd,
		       uint64_t *out_off)
{
	wstore_backend *b = s->b;

	*out_fd = -1;
	*out_off = 0;
	if (WSTORE__HAS(b, open_range))
		return b->open_range(b, key, out_fd, out_off);
	if (!b->open_fd)
		return wstore__err(WSTORE_EUNSUPPORTED,
				   "the %s store cannot hand out files",
				   b->name ? b->name : "");
	return b->open_fd(b, key, out_fd);
}

uint64_t wstore__range_len(const wstore__file_rec *f, uint64_t c, uint64_t base,
			   uint64_t size)
{
	uint64_t cs = f->chunk_size ? f->chunk_size : f->size;

	/* chunk 0 at 0: its own file or the start of a data file (a chunk
	 * file too long then reads as right, and fails the hash) */
	if (c == 0 && base == 0)
		return size < cs ? size : cs;
	if (base == 0)
		return size; /* a chunk file */
	if (base != c * cs || size <= base)
		return 0;
	return size - base < cs ? size - base : cs;
}

int wstore__manifest_same(wstore_store *store, const char *id,
			  const wstore__mraw *r)
{
	char key[WSTORE__KEY_MAX], *now = NULL;
	struct stat st;
	size_t len = 0;
	int rc;

	if (r->fd >= 0 && fstat(r->fd, &st) == 0 && st.st_nlink > 0)
		return 1;
	wstore__key_manifest(key, id);
	rc = wstore__get_alloc(store, key, &now, &len);
	if (rc == WSTORE_ENOTFOUND) {
		wstore__clear_err();
		return 0;
	}
	if (rc < 0)
		return rc;
	rc = len == r->len && memcmp(now, r->raw, len) == 0;
	free(now);
	return rc;
}

void wstore__mraw_free(wstore__mraw *r)
{
	if (r->fd >= 0)
		close(r->fd);
	free(r->raw);
	r->raw = NULL;
	r->len = 0;
	r->fd = -1;
}
