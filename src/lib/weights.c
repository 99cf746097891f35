/*
 * weights.c - what the read API knows about weight formats, on top of the
 * file handles of read.c and the pure parsers of safetensors.c and gguf.c:
 * the public safetensors handle (header and tensors read straight from the
 * store), GGUF headers of store files, per-file summaries for inspect, and
 * the structure checks verify adds (safetensors headers, the shard index).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "error.h"
#include "gguf.h"
#include "manifest.h"
#include "readv.h"
#include "safetensors.h"

static wstore_manifest *ckm(wstore_checkpoint *ck)
{
	return (wstore_manifest *)wstore_checkpoint_manifest(ck);
}

/* ---- the public handle -------------------------------------------------- */

struct wstore_safetensors {
	wstore_file *f;
	wstore__st *st;
};

int wstore_safetensors_open(wstore_safetensors **out, wstore_file *f)
{
	const char *what = wstore_file_path(f);
	uint64_t size = wstore_file_size(f), len;
	unsigned char prefix[8];
	wstore_safetensors *ws;
	size_t got = 0;
	char *buf;
	int rc;

	*out = NULL;
	if (size < 8)
		return wstore__err(
			WSTORE_ECORRUPT,
			"safetensors file '%s': truncated: %" PRIu64
			" bytes, shorter than the 8-byte header length",
			what, size);
	if ((rc = wstore_file_pread(f, prefix, 8, 0, &got)) < 0 ||
	    (rc = wstore__safetensors_header_len(&len, prefix, size, what)) < 0)
		return rc;
	if (!(buf = malloc(len + 8)) || !(ws = calloc(1, sizeof(*ws)))) {
		free(buf);
		return wstore__errc(-ENOMEM, "cannot read '%s'", what);
	}
	rc = wstore_file_pread(f, buf, len + 8, 0, &got);
	if (rc == 0)
		rc = wstore__safetensors_parse(&ws->st, buf, got, size, what);
	free(buf);
	if (rc < 0) {
		free(ws);
		return rc;
	}
	ws->f = f;
	*out = ws;
	return 0;
}

void wstore_safetensors_free(wstore_safetensors *ws)
{
	if (!ws)
		return;
	wstore__st_free(ws->st);
	free(ws);
}

/* Detach the table from a handle and free the handle. */
static wstore__st *safetensors_take(wstore_safetensors *ws)
{
	wstore__st *st = ws->st;

	free(ws);
	return st;
}

uint64_t wstore_safetensors_header_size(const wstore_safetensors *ws)
{
	return ws->st->header_len;
}

size_t wstore_safetensors_count(const wstore_safetensors *ws)
{
	return ws->st->n;
}

int wstore_safetensors_tensor(wstore_tensor_info *out,
			      const wstore_safetensors *ws, size_t i)
{
	const wstore__st_tensor *t;

	if (i >= ws->st->n)
		return wstore__err(WSTORE_ERANGE,
				   "tensor index %zu out of "
				   "range (%zu tensors)",
				   i, ws->st->n);
	t = &ws->st->t[i];
	out->name = t->name;
	out->dtype = t->dtype;
	out->ndim = t->ndim;
	out->shape = t->shape;
	out->offset = ws->st->data_start + t->begin;
	out->nbytes = t->end - t->begin;
	return 0;
}

int64_t wstore_safetensors_find(const wstore_safetensors *ws, const char *name)
{
	return name ? wstore__st_find(ws->st, name) : -1;
}

const char *wstore_safetensors_metadata(const wstore_safetensors *ws,
					const char *key)
{
	for (size_t i = 0; key && i < ws->st->nmeta; i++)
		if (strcmp(ws->st->meta[2 * i], key) == 0)
			return ws->st->meta[2 * i + 1];
	return NULL;
}

int wstore_safetensors_read(wstore_safetensors *ws, const char *const *names,
			    void *const *bufs, const uint64_t *caps, size_t n)
{
	const char *what = wstore_file_path(ws->f);
	wstore__seg *segs;
	size_t ns = 0;
	int rc = 0;

	if (!(segs = malloc((n ? n : 1) * sizeof(*segs))))
		return wstore__errc(-ENOMEM, "cannot read tensors of '%s'",
				    what);
	for (size_t i = 0; i < n && rc == 0; i++) {
		int64_t k = wstore__st_find(ws->st, names[i] ? names[i] : "");
		const wstore__st_tensor *t;

		if (k < 0) {
			rc = wstore__err(WSTORE_ENOTFOUND,
					 "no tensor '%.200s' "
					 "in '%s'",
					 names[i] ? names[i] : "", what);
			break;
		}
		t = &ws->st->t[k];
		if (caps[i] < t->end - t->begin) {
			rc = wstore__err(WSTORE_ERANGE,
					 "buffer for tensor "
					 "'%.200s' of '%s' holds %" PRIu64
					 " bytes, needs %" PRIu64,
					 t->name, what, caps[i],
					 t->end - t->begin);
			break;
		}
		if (t->end == t->begin)
			continue;
		segs[ns].off = ws->st->data_start + t->begin;
		segs[ns].len = t->end - t->begin;
		segs[ns++].dst = bufs[i];
	}
	if (rc == 0)
		rc = wstore__file_readv(ws->f, segs, ns);
	free(segs);
	return rc;
}

/* A window over a store file, aligned to multiples of its size. */
struct window {
	wstore_file *f;
	char *buf;
	size_t cap, n;
	uint64_t start;
};

static int win_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	struct window *w = ctx;
	char *dst = buf;
	int rc;

	while (len) {
		size_t k;

		if (off < w->start || off >= w->start + w->n) {
			w->start = off - off % w->cap;
			if ((rc = wstore_file_pread(w->f, w->buf, w->cap,
						    w->start, &w->n)) < 0)
				return rc;
			if (off >= w->start + w->n)
				return wstore__err(WSTORE_ECORRUPT,
						   "gguf file "
						   "'%s': truncated",
						   wstore_file_path(w->f));
		}
		k = w->start + w->n - off;
		k = k < len ? k : len;
		memcpy(dst, w->buf + (off - w->start), k);
		dst += k;
		off += k;
		len -= k;
	}
	return 0;
}

/* Walk the GGUF header of a file of the store (buffered reads). */
static int gguf_parse_file(wstore__gguf_info *out, wstore_file *f)
{
	struct window w = { f, NULL, wstore__file_window(f), 0, 0 };
	int rc;

	if (!(w.buf = malloc(w.cap)))
		return wstore__errc(-ENOMEM, "cannot read '%s'",
				    wstore_file_path(f));
	rc = wstore__gguf_parse(out, win_read, &w, wstore_file_size(f),
				wstore_file_path(f));
	free(w.buf);
	return rc;
}

/* ---- summaries ----------------------------------------------------------- */

static int has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Join names, sorted and without duplicates, as "A,B" into out. */
static void join_names(char *out, size_t cap, const char **names, size_t n)
{
	size_t len = 0;

	out[0] = '\0';
	qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		size_t k = strlen(names[i]);

		if (i && strcmp(names[i], names[i - 1]) == 0)
			continue;
		if (len + k + 2 > cap)
			break;
		if (len)
			out[len++] = ',';
		memcpy(out + len, names[i], k + 1);
		len += k;
	}
}

static int summary_safetensors(wstore_file_summary_info *out, wstore_file *f)
{
	const char *names[32];
	wstore_safetensors *ws;
	wstore_tensor_info ti;
	size_t nn = 0;
	int rc;

	if ((rc = wstore_safetensors_open(&ws, f)) < 0)
		return rc;
	out->format = "safetensors";
	out->tensor_count = wstore_safetensors_count(ws);
	for (size_t i = 0; i < out->tensor_count; i++) {
		uint64_t ne = 1;
		size_t k;

		wstore_safetensors_tensor(&ti, ws, i);
		for (uint32_t d = 0; d < ti.ndim; d++)
			ne *= (uint64_t)ti.shape[d];
		out->param_count += ne;
		for (k = 0; k < nn && names[k] != ti.dtype; k++)
			;
		if (k == nn && nn < 32)
			names[nn++] = ti.dtype;
	}
	join_names(out->dtypes, sizeof(out->dtypes), names, nn);
	wstore_safetensors_free(ws);
	return 0;
}

static int summary_gguf(wstore_file_summary_info *out, wstore_file *f)
{
	const char *names[128];
	wstore__gguf_info gi;
	size_t nn = 0;
	int rc;

	if ((rc = gguf_parse_file(&gi, f)) < 0)
		return rc;
	out->format = "gguf";
	out->tensor_count = gi.tensor_count;
	out->param_count = gi.param_count;
	out->kv_count = gi.kv_count;
	out->gguf_version = gi.version;
	for (unsigned t = 0; t < 128; t++)
		if ((gi.type_mask[t / 64] >> (t % 64)) & 1)
			names[nn++] = wstore__gguf_type_name(t);
	join_names(out->dtypes, sizeof(out->dtypes), names, nn);
	return 0;
}

int wstore_file_summary(wstore_file_summary_info *out, wstore_file *f)
{
	memset(out, 0, sizeof(*out));
	out->format = "other";
	if (has_suffix(wstore_file_path(f), ".safetensors"))
		return summary_safetensors(out, f);
	if (has_suffix(wstore_file_path(f), ".gguf"))
		return summary_gguf(out, f);
	return 0;
}

/* ---- structure checks ---------------------------------------------------- */

struct check {
	wstore_checkpoint *ck;
	wstore_verify_file_fn cb;
	void *ctx;
	wstore__st **st; /* parsed header per manifest file, or NULL */
	size_t problems;
	char first[1024];
};

static void problem(struct check *c, const char *path, int code,
		    const char *msg)
{
	if (!c->problems++)
		snprintf(c->first, sizeof(c->first), "%s", msg);
	if (c->cb)
		c->cb(path, code, msg, c->ctx);
}

/* Parse the header of manifest file i when it is a weight format.  A bad
 * header is a problem; a failure to read is returned. */
static int check_header(struct check *c, size_t i)
{
	const wstore__file_rec *r = &ckm(c->ck)->files[i];
	wstore_safetensors *ws;
	wstore__gguf_info gi;
	wstore_file *f;
	int rc;

	if (!has_suffix(r->path, ".safetensors") &&
	    !has_suffix(r->path, ".gguf"))
		return 0;
	if ((rc = wstore_file_open(&f, c->ck, r->path)) < 0)
		return rc;
	if (has_suffix(r->path, ".gguf"))
		rc = gguf_parse_file(&gi, f);
	else if ((rc = wstore_safetensors_open(&ws, f)) == 0)
		c->st[i] = safetensors_take(ws); /* for the index */
	wstore_file_free(f);
	if (rc == WSTORE_ECORRUPT)
		problem(c, r->path, rc, wstore_last_error());
	return rc == WSTORE_ECORRUPT || rc == WSTORE_EUNSUPPORTED ? 0 : rc;
}

/* Read a whole (small) file into a NUL-terminated malloc'ed buffer. */
static int read_whole(char **out, wstore_file *f)
{
	uint64_t size = wstore_file_size(f);
	char *buf;
	int rc;

	*out = NULL;
	if (size > (256u << 20))
		return wstore__err(WSTORE_ECORRUPT,
				   "file '%s' is too large "
				   "for a shard index (%" PRIu64 " bytes)",
				   wstore_file_path(f), size);
	if (!(buf = malloc(size + 1)))
		return wstore__errc(-ENOMEM, "cannot read '%s'",
				    wstore_file_path(f));
	if ((rc = wstore_file_pread(f, buf, size, 0, NULL)) < 0) {
		free(buf);
		return rc;
	}
	buf[size] = '\0';
	*out = buf;
	return 0;
}

#define MAX_TENSOR_PROBLEMS 20

/* Check one weight_map entry: its file exists, the tensor is in it. */
static void check_entry(struct check *c, const char *index, const char *dir,
			const char *tensor, const json_t *file,
			json_t *reported, size_t *missing)
{
	char msg[1024], *full = NULL;
	const wstore__st *st;
	int64_t k;

	if (!json_is_string(file)) {
		snprintf(msg, sizeof(msg),
			 "index '%s': weight_map entry of "
			 "'%.200s' is not a file name",
			 index, tensor);
		problem(c, index, WSTORE_ECORRUPT, msg);
		return;
	}
	if (asprintf(&full, "%s%s", dir, json_string_value(file)) < 0)
		return;
	k = wstore_manifest_find(ckm(c->ck), full);
	if (k < 0 && !json_object_get(reported, full)) {
		json_object_set_new(reported, full, json_true());
		snprintf(msg, sizeof(msg),
			 "index '%s' names file '%s', which "
			 "is not in the checkpoint",
			 index, full);
		problem(c, index, WSTORE_ECORRUPT, msg);
	}
	st = k >= 0 ? c->st[k] : NULL;
	if (st && wstore__st_find(st, tensor) < 0 &&
	    (*missing)++ < MAX_TENSOR_PROBLEMS) {
		snprintf(msg, sizeof(msg),
			 "index '%s': tensor '%.200s' is not "
			 "in '%s'",
			 index, tensor, full);
		problem(c, index, WSTORE_ECORRUPT, msg);
	}
	free(full);
}

static int check_index(struct check *c, size_t i)
{
	const char *path = ckm(c->ck)->files[i].path, *slash, *tensor;
	json_t *root, *map, *file, *reported;
	size_t missing = 0;
	char msg[1024], *text, *dir;
	json_error_t jerr;
	wstore_file *f;
	int rc;

	if ((rc = wstore_file_open(&f, c->ck, path)) < 0)
		return rc;
	rc = read_whole(&text, f);
	wstore_file_free(f);
	if (rc < 0)
		return rc == WSTORE_EUNSUPPORTED ? 0 : rc;
	root = json_loads(text, 0, &jerr);
	free(text);
	map = json_object_get(root, "weight_map");
	if (!json_is_object(map)) {
		snprintf(msg, sizeof(msg), "index '%s': %s", path,
			 root ? "no weight_map object" : jerr.text);
		problem(c, path, WSTORE_ECORRUPT, msg);
		json_decref(root);
		return 0;
	}
	slash = strrchr(path, '/');
	dir = strndup(path, slash ? (size_t)(slash - path + 1) : 0);
	reported = json_object();
	json_object_foreach(map, tensor, file) if (dir && reported)
		check_entry(c, path, dir, tensor, file, reported, &missing);
	if (missing > MAX_TENSOR_PROBLEMS) {
		snprintf(msg, sizeof(msg),
			 "index '%s': %zu more tensors "
			 "missing from their files",
			 path, missing - MAX_TENSOR_PROBLEMS);
		problem(c, path, WSTORE_ECORRUPT, msg);
	}
	json_decref(reported);
	json_decref(root);
	free(dir);
	return 0;
}

int wstore_check_structure(wstore_checkpoint *ck,
			   wstore_verify_file_fn on_problem, void *ctx)
{
	struct check c = { ck, on_problem, ctx, NULL, 0, "" };
	size_t n = ckm(ck)->nfiles;
	int rc = 0;

	if (!(c.st = calloc(n ? n : 1, sizeof(*c.st))))
		return wstore__errc(-ENOMEM, "cannot check checkpoint '%s'",
				    ckm(ck)->checkpoint_id);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = check_header(&c, i);
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (has_suffix(ckm(ck)->files[i].path,
			       ".safetensors.index.json"))
			rc = check_index(&c, i);
	for (size_t i = 0; i < n; i++)
		wstore__st_free(c.st[i]);
	free(c.st);
	if (rc == 0 && c.problems)
		rc = wstore__err(WSTORE_EVERIFY, "%s%s", c.first,
				 c.problems > 1 ? " (and more problems)" : "");
	return rc;
}
