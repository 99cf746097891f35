/*
 * fault.c - a backend that forwards to another one and injects
 * faults, so tests can check that nothing is lost and every error is clear
 * when a store misbehaves (SQLite's fault simulation, libgit2's fake odb).
 *
 * The spec grammar is documented in wstore/sys/backend.h.  Calls are
 * numbered from 1 in the order they enter the wrapper, both overall (fail=,
 * crash=) and per operation (failop=, and short=/corrupt= count gets,
 * forget= counts puts); free is not counted.  Counters are atomic, so with
 * several threads "the N-th call" is whichever call took number N.
 *
 * The wrapper has the same optional callbacks as the inner backend, except
 * that writeonce removes upsert.  It owns the inner backend once created
 * (on failure the caller keeps it) and frees it in free.
 */
#include <errno.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

enum {
	OP_PUT,
	OP_UPSERT,
	OP_PUT_NEW,
	OP_GET,
	OP_GET_RANGE,
	OP_SIZE,
	OP_REMOVE,
	OP_LIST,
	OP_UPDATE,
	OP_SYNC,
	OP_BEGIN_FILE,
	OP_COMMIT_FILE,
	OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
	"put",	  "upsert", "put_new", "get",  "get_range",  "size",
	"remove", "list",   "update",  "sync", "begin_file", "commit_file",
};

enum { R_FAIL, R_SHORT, R_CORRUPT, R_FORGET, R_CRASH };

#define MAX_RULES 32

typedef struct rule {
	int kind;
	int op;	  /* OP_* for failop, -1 for every call */
	int plus; /* fail=N+: N and every later call */
	uint64_t n;
} rule;

typedef struct fault_backend {
	wstore_backend pub;
	wstore_backend *inner;
	int writeonce, emptymissing;
	int files;	   /* pass the inner store's data-file writes on */
	unsigned delay_ms; /* every call sleeps this long (races, ^C) */
	/* failread=TEXT: reads of keys holding one of these fail */
	char *failread[4];
	size_t nfailread;
	rule rules[MAX_RULES];
	size_t nrules;
	_Atomic uint64_t calls;
	_Atomic uint64_t opcalls[OP_COUNT];
} fault_backend;

static fault_backend *fb_of(wstore_backend *b)
{
	return (fault_backend *)b;
}

/* ---- spec parsing ------------------------------------------------------ */

/* Parse "N" or, with plus != NULL, "N+" (N >= 1). */
static int parse_n(const char *s, uint64_t *n, int *plus)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	*n = strtoull(s, &end, 10);
	if (errno || *n == 0)
		return -1;
	if (plus && *end == '+') {
		*plus = 1;
		end++;
	}
	return *end ? -1 : 0;
}

static int parse_op(const char *s, size_t len)
{
	for (int i = 0; i < OP_COUNT; i++)
		if (strlen(op_names[i]) == len &&
		    strncmp(op_names[i], s, len) == 0)
			return i;
	return -1;
}

/* Parse one item (no commas, trimmed) into fb; 0 or -1. */
static int parse_item(fault_backend *fb, const char *item)
{
	static const struct {
		const char *name;
		int kind;
	} kinds[] = {
		{ "fail=", R_FAIL },	   { "short=", R_SHORT },
		{ "corrupt=", R_CORRUPT }, { "forget=", R_FORGET },
		{ "crash=", R_CRASH },
	};
	rule r = { .op = -1 };

	if (strcmp(item, "writeonce") == 0)
		return fb->writeonce = 1, 0;
	if (strcmp(item, "emptymissing") == 0)
		return fb->emptymissing = 1, 0;
	if (strcmp(item, "files") == 0)
		return fb->files = 1, 0;
	if (strncmp(item, "delay=", 6) == 0) {
		uint64_t ms;

		if (parse_n(item + 6, &ms, NULL) || ms > 600000)
			return -1;
		fb->delay_ms = (unsigned)ms;
		return 0;
	}
	if (strncmp(item, "failread=", 9) == 0) {
		if (!item[9] || fb->nfailread == 4 ||
		    !(fb->failread[fb->nfailread] = strdup(item + 9)))
			return -1;
		fb->nfailread++;
		return 0;
	}
	if (fb->nrules == MAX_RULES)
		return -1;
	if (strncmp(item, "failop=", 7) == 0) {
		const char *colon = strchr(item + 7, ':');

		r.kind = R_FAIL;
		if (!colon)
			return -1;
		r.op = parse_op(item + 7, (size_t)(colon - item - 7));
		if (r.op < 0 || parse_n(colon + 1, &r.n, &r.plus))
			return -1;
		fb->rules[fb->nrules++] = r;
		return 0;
	}
	for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++) {
		size_t len = strlen(kinds[i].name);

		if (strncmp(item, kinds[i].name, len) != 0)
			continue;
		r.kind = kinds[i].kind;
		if (parse_n(item + len, &r.n,
			    r.kind == R_FAIL ? &r.plus : NULL))
			return -1;
		fb->rules[fb->nrules++] = r;
		return 0;
	}
	return -1;
}

static int parse_spec(fault_backend *fb, const char *spec)
{
	char *copy = strdup(spec ? spec : ""), *save = NULL, *item;
	int rc = 0;

	if (!copy)
		return wstore__errc(-ENOMEM, "cannot parse fault spec");
	for (item = strtok_r(copy, ",", &save); item && rc == 0;
	     item = strtok_r(NULL, ",", &save)) {
		size_t len;

		while (*item == ' ' || *item == '\t')
			item++;
		len = strlen(item);
		while (len && (item[len - 1] == ' ' || item[len - 1] == '\t'))
			item[--len] = '\0';
		if (*item && parse_item(fb, item))
			rc = wstore_backend_error(WSTORE_EINVAL,
						  "invalid fault spec item "
						  "'%s'",
						  item);
	}
	free(copy);
	return rc;
}

/* ---- call accounting --------------------------------------------------- */

/*
 * Number this call; crash or fail it if a rule says so.  On success
 * *opn is the call's number within its operation.
 */
static int enter(fault_backend *fb, int op, const char *key, uint64_t *opn)
{
	uint64_t n = atomic_fetch_add(&fb->calls, 1) + 1;
	uint64_t k = atomic_fetch_add(&fb->opcalls[op], 1) + 1;

	if (fb->delay_ms)
		usleep(fb->delay_ms * 1000u);
	for (size_t i = 0; key && i < fb->nfailread; i++)
		if ((op == OP_GET || op == OP_GET_RANGE || op == OP_SIZE ||
		     op == OP_LIST) &&
		    strstr(key, fb->failread[i]))
			return wstore_backend_error(-EIO,
						    "injected fault reading "
						    "'%s'",
						    key);
	for (size_t i = 0; i < fb->nrules; i++) {
		const rule *r = &fb->rules[i];
		uint64_t c;

		if (r->kind == R_CRASH && r->n == n)
			_exit(137);
		if (r->kind != R_FAIL)
			continue;
		c = r->op < 0 ? n : r->op == op ? k : 0;
		if (c && (c == r->n || (r->plus && c > r->n)))
			return wstore_backend_error(-EIO,
						    "injected fault at "
						    "call %llu (%s '%s')",
						    (unsigned long long)n,
						    op_names[op],
						    key ? key : "");
	}
	*opn = k;
	return 0;
}

/* Does a rule of this kind fire at the k-th call of its operation? */
static int fires(const fault_backend *fb, int kind, uint64_t k)
{
	for (size_t i = 0; i < fb->nrules; i++)
		if (fb->rules[i].kind == kind && fb->rules[i].n == k)
			return 1;
	return 0;
}

/* ---- callbacks --------------------------------------------------------- */

static int fault_put(wstore_backend *b, const char *key, const void *data,
		     size_t len)
{
	fault_backend *fb = fb_of(b);
	wstore_backend *in = fb->inner;
	uint64_t k, sz;
	int rc = enter(fb, OP_PUT, key, &k);

	if (rc)
		return rc;
	if (fires(fb, R_FORGET, k))
		return 0;
	if (!fb->writeonce)
		return in->put(in, key, data, len);
	/* keep an existing value; put_new does that atomically */
	if (in->put_new) {
		rc = in->put_new(in, key, data, len);
		return rc == WSTORE_EEXISTS ? 0 : rc;
	}
	rc = in->size(in, key, &sz);
	if (rc == 0)
		return 0;
	if (rc != WSTORE_ENOTFOUND)
		return rc;
	return in->put(in, key, data, len);
}

static int fault_upsert(wstore_backend *b, const char *key, const void *data,
			size_t len)
{
	fault_backend *fb = fb_of(b);
	uint64_t k;
	int rc = enter(fb, OP_UPSERT, key, &k);

	return rc ? rc : fb->inner->upsert(fb->inner, key, data, len);
}

static int fault_put_new(wstore_backend *b, const char *key, const void *data,
			 size_t len)
{
	fault_backend *fb = fb_of(b);
	uint64_t k;
	int rc = enter(fb, OP_PUT_NEW, key, &k);

	return rc ? rc : fb->inner->put_new(fb->inner, key, data, len);
}

static int fault_get(wstore_backend *b, const char *key, void *buf, size_t cap,
		     size_t *out_len)
{
	fault_backend *fb = fb_of(b);
	uint64_t k;
	int rc = enter(fb, OP_GET, key, &k);

	if (rc)
		return rc;
	rc = fb->inner->get(fb->inner, key, buf, cap, out_len);
	if (rc == WSTORE_ENOTFOUND && fb->emptymissing) {
		*out_len = 0;
		return 0;
	}
	if (rc || *out_len == 0)
		return rc;
	if (fires(fb, R_SHORT, k))
		(*out_len)--;
	if (fires(fb, R_CORRUPT, k))
		((unsigned char *)buf)[*out_len / 2] ^= 0xff;
	return 0;
}

static int fault_get_range(wstore_backend *b, const char *key, uint64_t off,
			   void *buf, size_t len, size_t *out_n)
{
	fault_backend *fb = fb_of(b);
	uint64_t k;
	int rc = enter(fb, OP_GET_RANGE, key, &k);

	if (rc)
		return rc;
	rc = fb->inner->get_range(fb->inner, key, off, buf, len, out_n);
	if (rc == WSTORE_ENOTFOUND && fb->emptymissing) {
		*out_n = 0;
		return 0;
	}
	return rc;
}

/* Leases: counted and delayed as an upsert, then passed through. */
static int fault_put_ttl(wstore_backend *b, const char *key, const void *data,
			 size_t len, uint64_t ttl_ms)
{
	fault_backend *fb = fb_of(b);
	uint64_t k;
	int rc = enter(fb, OP_UPSERT, key, &k);

	return rc ? rc : fb->inner->put_ttl(fb->inner, key, data, len, ttl_ms);
}

static int fault_space(wstore_backend *b, uint64_t *out_capacity,
		       uint64_t *out_free)
{
	fault_backend *fb = fb_of(b);

	return fb->inner->space(fb->inner, out_capacity, out_free);
}

static int fault_size(wstore_backend *b, const char *key, uint64_t *out)
{
	fault_backend *fb = fb_of(b);
	uint64_t k;
	int rc = enter(fb, OP_SIZE, key, &k);

	if (rc)
		return rc;
	rc = fb->inner->size(fb->inner, key, out);
	if (rc == WSTORE_ENOTFOUND && fb->emptymissing) {
		*out = 0;
		return 0;
	}
	return rc;
}

static int fault_remove(wstore_backend *b, const char *key, int force)
{
	fault_backend *fb = fb_of(b);
	uint64_t k;
	int rc = enter(fb, OP_REMOVE, key, &k);

	return rc ? rc : fb->inner->remove(fb->inner, key, force);
}

static int fault_list(wstore_backend *b, const char *prefix, wstore_list_fn fn,
		      void *ctx)
{
	fault_backend *fb = fb_of(b);
	uint64_t k;
	int rc = enter(fb, OP_LIST, prefix, &k);

	return rc ? rc : fb->inner->list(fb->inner, prefix, fn, ctx);
}

static int fault_update(wstore_backend *b, const char *key, wstore_update_fn fn,
			void *ctx)
{
	fault_backend *fb = fb_of(b);
	uint64_t k;
	int rc = enter(fb, OP_UPDATE, key, &k);

	return rc ? rc : fb->inner->update(fb->inner, key, fn, ctx);
}

static int fault_sync(wstore_backend *b)
{
	fault_backend *fb = fb_of(b);
	uint64_t k;
	int rc = enter(fb, OP_SYNC, NULL, &k);

	return rc ? rc : fb->inner->sync(fb->inner);
}

/*
 * Data-file writes (the file store's begin_file, commit_file, abort_file),
 * with "files" in the spec: counted, failed and crashed at as any call.
 * The bytes go straight into the inner store's file (the caller writes
 * through the fd), so only the begin and the commit can fail; a failed
 * commit aborts the file, as the inner one does on its own failures.
 */
static int fault_begin_file(wstore_backend *b, const char *file_key,
			    uint64_t chunk_size, int *out_fd, void **out_handle)
{
	fault_backend *fb = fb_of(b);
	uint64_t k;
	int rc = enter(fb, OP_BEGIN_FILE, file_key, &k);

	return rc ? rc
		  : fb->inner->begin_file(fb->inner, file_key, chunk_size,
					  out_fd, out_handle);
}

static int fault_commit_file(wstore_backend *b, void *handle, uint64_t size)
{
	fault_backend *fb = fb_of(b);
	uint64_t k;
	int rc = enter(fb, OP_COMMIT_FILE, NULL, &k);

	if (rc) {
		fb->inner->abort_file(fb->inner, handle);
		return rc;
	}
	return fb->inner->commit_file(fb->inner, handle, size);
}

static void fault_abort_file(wstore_backend *b, void *handle)
{
	fault_backend *fb = fb_of(b);

	fb->inner->abort_file(fb->inner, handle);
}

static void fault_free(wstore_backend *b)
{
	fault_backend *fb = fb_of(b);

	if (!b)
		return;
	if (fb->inner)
		fb->inner->free(fb->inner);
	for (size_t i = 0; i < fb->nfailread; i++)
		free(fb->failread[i]);
	free(fb);
}

/* ---- construction ------------------------------------------------------ */

static void set_callbacks(fault_backend *fb)
{
	wstore_backend *in = fb->inner;

	fb->pub.version = WSTORE_BACKEND_VERSION;
	fb->pub.struct_size = sizeof(fb->pub);
	fb->pub.name = "fault";
	fb->pub.flags = in->flags;
	if (fb->writeonce)
		fb->pub.flags |= WSTORE_BACKEND_WRITE_ONCE;
	if (fb->emptymissing)
		fb->pub.flags |= WSTORE_BACKEND_EMPTY_MISSING;
	fb->pub.put = fault_put;
	fb->pub.upsert = in->upsert && !fb->writeonce ? fault_upsert : NULL;
	fb->pub.put_new = in->put_new ? fault_put_new : NULL;
	fb->pub.get = fault_get;
	fb->pub.get_range = in->get_range ? fault_get_range : NULL;
	fb->pub.size = fault_size;
	fb->pub.remove = fault_remove;
	fb->pub.list = in->list ? fault_list : NULL;
	fb->pub.update = in->update ? fault_update : NULL;
	fb->pub.sync = in->sync ? fault_sync : NULL;
	fb->pub.free = fault_free;
	/* callbacks after version 2 only where the inner struct has them */
#define INNER_HAS(f)                                                           \
	(offsetof(wstore_backend, f) + sizeof(in->f) <= in->struct_size &&     \
	 in->f)
	fb->pub.put_ttl = INNER_HAS(put_ttl) ? fault_put_ttl : NULL;
	fb->pub.space = INNER_HAS(space) ? fault_space : NULL;
	/* off unless asked: the bytes would bypass the put faults that
	 * most tests inject (imports then put chunks, as before) */
	if (fb->files && INNER_HAS(begin_file) && INNER_HAS(commit_file) &&
	    INNER_HAS(abort_file)) {
		fb->pub.begin_file = fault_begin_file;
		fb->pub.commit_file = fault_commit_file;
		fb->pub.abort_file = fault_abort_file;
	}
#undef INNER_HAS
	/* the inner store's calls still retry as long as they do */
	if (offsetof(wstore_backend, retry_ms) + sizeof(in->retry_ms) <=
	    in->struct_size)
		fb->pub.retry_ms = in->retry_ms;
}

int wstore__backend_fault_new(wstore_backend **out, wstore_backend *inner,
			      const char *spec)
{
	fault_backend *fb;
	int rc;

	*out = NULL;
	if (!inner)
		return wstore_backend_error(WSTORE_EINVAL,
					    "fault backend needs an inner "
					    "backend");
	fb = calloc(1, sizeof(*fb));
	if (!fb)
		return wstore__errc(-ENOMEM, "cannot create fault backend");
	rc = parse_spec(fb, spec);
	if (rc) {
		for (size_t i = 0; i < fb->nfailread; i++)
			free(fb->failread[i]);
		free(fb);
		return rc;
	}
	fb->inner = inner;
	set_callbacks(fb);
	*out = &fb->pub;
	return 0;
}

uint64_t wstore__backend_fault_calls(wstore_backend *b)
{
	if (!b || b->free != fault_free)
		return 0;
	return atomic_load(&fb_of(b)->calls);
}

/* ---- the kind store URLs name (backends/table.c) ------------------------ */

/* "fault+<inner URL>": the faults come from $WSTORE_FAULTS. */
static int fault_kind_wrap(wstore_backend **out, wstore_backend *inner,
			   const wstore_config *cfg)
{
	const char *spec = getenv("WSTORE_FAULTS");

	(void)cfg;
	return wstore__backend_fault_new(out, inner, spec ? spec : "");
}

const wstore__backend_kind wstore__kind_fault = {
	.name = "fault",
	.schemes = { "fault+*" },
	.wrap = fault_kind_wrap,
};
