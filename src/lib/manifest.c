/*
 * manifest.c - the checkpoint manifest (docs/format.md, "Manifest"): build,
 * serialise, parse and validate, read from a store, accessors.
 *
 * Serialisation does not go through jansson: the contract wants the exact
 * bytes of Python's json.dumps(sort_keys=True, separators=(",", ":"),
 * ensure_ascii=False), and jansson writes control characters as "\u001F"
 * where Python writes "\u001f".  The key order is fixed, so a small emitter
 * writes it directly.  Parsing uses jansson (64-bit integers kept exactly,
 * duplicate keys refused).
 *
 * Invariants of a wstore_manifest: files sorted by path (bytewise), paths
 * unique; every string non-NULL except error.  The arrays files and
 * f->chunks grow in powers of two: their capacity is derived from the count
 * (grow_cap), so only this file's helpers may append to them.
 *
 * Parse policy: unknown keys (top level and file records) are tolerated and
 * dropped; schema_version 1 and 2 are accepted; a record without "chunks"
 * gets [key], without "chunk_size" gets 0.  A READY record with chunk_size
 * 0 may have any number of chunks (legacy); readers that map offsets must
 * refuse a multi-chunk file with chunk_size 0.  In a FAILED manifest sha256
 * may be "" and the chunk list may be partial; its total_size is not
 * checked.  A READY manifest's "error" is ignored (read as NULL).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "error.h"
#include "manifest.h"
#include "names.h"
#include "util.h"

/* ---- building ----------------------------------------------------------- */

/* Capacity for n elements: 0 or the next power of two >= n. */
static size_t grow_cap(size_t n)
{
	size_t c = 1;

	if (n == 0)
		return 0;
	while (c < n)
		c <<= 1;
	return c;
}

/* Make room for one more element in an array of n elements of size sz. */
static int grow(void **arr, size_t n, size_t sz)
{
	void *p;
	size_t cap = grow_cap(n);

	if (n < cap)
		return 0;
	cap = cap ? cap * 2 : 1;
	p = realloc(*arr, cap * sz);
	if (!p)
		return wstore__errc(-ENOMEM, "cannot grow manifest");
	*arr = p;
	return 0;
}

wstore_manifest *wstore__manifest_new(void)
{
	wstore_manifest *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	if (wstore__set_str(&m->checkpoint_id, "") ||
	    wstore__set_str(&m->model_id, "") ||
	    wstore__set_str(&m->revision, "") ||
	    wstore__set_str(&m->status, "FAILED") ||
	    wstore__set_str(&m->source_uri, "")) {
		wstore_manifest_free(m);
		return NULL;
	}
	return m;
}

static void file_clear(wstore__file_rec *f)
{
	free(f->path);
	free(f->type);
	free(f->key);
	free(f->sha256);
	for (uint64_t j = 0; j < f->nchunks; j++)
		free(f->chunks[j]);
	free(f->chunks);
}

wstore__file_rec *wstore__manifest_add_file(wstore_manifest *m,
					    const char *path)
{
	wstore__file_rec *f;

	if (grow((void **)&m->files, m->nfiles, sizeof(*m->files)))
		return NULL;
	f = &m->files[m->nfiles];
	memset(f, 0, sizeof(*f));
	if (wstore__set_str(&f->path, path) ||
	    wstore__set_str(&f->type, wstore__file_type(path)) ||
	    wstore__set_str(&f->key, "") || wstore__set_str(&f->sha256, "")) {
		file_clear(f);
		return NULL;
	}
	m->nfiles++;
	return f;
}

int wstore__file_rec_add_chunk(wstore__file_rec *f, const char *key)
{
	char *copy;
	int rc;

	if ((rc = grow((void **)&f->chunks, f->nchunks, sizeof(*f->chunks))))
		return rc;
	if (!(copy = strdup(key)))
		return wstore__errc(-ENOMEM, "cannot copy chunk key");
	f->chunks[f->nchunks++] = copy;
	return 0;
}

static int cmp_file(const void *a, const void *b)
{
	return strcmp(((const wstore__file_rec *)a)->path,
		      ((const wstore__file_rec *)b)->path);
}

void wstore__manifest_sort(wstore_manifest *m)
{
	uint64_t total = 0;

	if (m->nfiles > 1)
		qsort(m->files, m->nfiles, sizeof(*m->files), cmp_file);
	for (size_t i = 0; i < m->nfiles; i++)
		total += m->files[i].size;
	m->total_size = total;
}

void wstore_manifest_free(wstore_manifest *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nfiles; i++)
		file_clear(&m->files[i]);
	free(m->files);
	free(m->checkpoint_id);
	free(m->model_id);
	free(m->revision);
	free(m->status);
	free(m->source_uri);
	free(m->error);
	free(m);
}

/* ---- serialising --------------------------------------------------------- */

struct buf {
	char *p;
	size_t len, cap;
	int err;
};

static void put_mem(struct buf *b, const char *s, size_t n)
{
	if (b->err)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		char *p;

		while (cap < b->len + n + 1)
			cap *= 2;
		if (!(p = realloc(b->p, cap))) {
			b->err = -ENOMEM;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void put_s(struct buf *b, const char *s)
{
	put_mem(b, s, strlen(s));
}

/* Length of the valid UTF-8 sequence at s, or 0 (no overlongs, surrogates
 * or code points above U+10FFFF). */
static size_t utf8_seq(const unsigned char *s)
{
	unsigned c = s[0], n, min, cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, min = 0x80, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, min = 0x800, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, min = 0x10000, cp = c & 0x07;
	else
		return 0;
	for (unsigned i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* A JSON string as Python's ensure_ascii=False writes it. */
static void put_json_str(struct buf *b, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");
	char esc[8];

	put_s(b, "\"");
	while (*s) {
		size_t n = utf8_seq(s);

		if (n == 0) {
			if (!b->err)
				b->err = WSTORE_EINVAL;
			return;
		}
		if (*s == '"' || *s == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*s;
			put_mem(b, esc, 2);
		} else if (*s < 0x20) {
			const char *named = NULL;

			switch (*s) {
			case '\b': named = "\\b"; break;
			case '\f': named = "\\f"; break;
			case '\n': named = "\\n"; break;
			case '\r': named = "\\r"; break;
			case '\t': named = "\\t"; break;
			}
			if (!named) {
				snprintf(esc, sizeof(esc), "\\u%04x", *s);
				named = esc;
			}
			put_s(b, named);
		} else {
			put_mem(b, (const char *)s, n);
		}
		s += n;
	}
	put_s(b, "\"");
}

static void put_key_str(struct buf *b, const char *key, const char *val)
{
	put_json_str(b, key);
	put_s(b, ":");
	put_json_str(b, val);
}

static void put_key_int(struct buf *b, const char *key, int64_t v)
{
	char num[32];

	snprintf(num, sizeof(num), "%" PRId64, v);
	put_json_str(b, key);
	put_s(b, ":");
	put_s(b, num);
}

static void put_file(struct buf *b, const wstore__file_rec *f)
{
	put_s(b, "{");
	put_key_int(b, "chunk_size", (int64_t)f->chunk_size);
	put_s(b, ",\"chunks\":[");
	for (uint64_t j = 0; j < f->nchunks; j++) {
		if (j)
			put_s(b, ",");
		put_json_str(b, f->chunks[j]);
	}
	put_s(b, "],");
	put_key_str(b, "key", f->key);
	put_s(b, ",");
	put_key_str(b, "path", f->path);
	put_s(b, ",");
	put_key_str(b, "sha256", f->sha256);
	put_s(b, ",");
	put_key_int(b, "size", (int64_t)f->size);
	put_s(b, ",");
	put_key_str(b, "type", f->type);
	put_s(b, "}");
}

static int cmp_file_ptr(const void *a, const void *b)
{
	return strcmp((*(wstore__file_rec *const *)a)->path,
		      (*(wstore__file_rec *const *)b)->path);
}

/* Check what the emitter cannot: status, integer ranges; total of sizes. */
static int serialize_check(const wstore_manifest *m, uint64_t *total)
{
	const char *st = m->status ? m->status : "";

	if (strcmp(st, "READY") != 0 && strcmp(st, "FAILED") != 0)
		return wstore__err(
			WSTORE_EINVAL,
			"cannot serialize manifest: invalid status '%s'", st);
	*total = 0;
	for (size_t i = 0; i < m->nfiles; i++) {
		const wstore__file_rec *f = &m->files[i];

		if (f->size > INT64_MAX || f->chunk_size > INT64_MAX ||
		    f->size > INT64_MAX - *total)
			return wstore__err(
				WSTORE_EINVAL,
				"cannot serialize manifest: file '%s': size too large",
				f->path ? f->path : "");
		*total += f->size;
	}
	return 0;
}

static void put_manifest(struct buf *b, const wstore_manifest *m,
			 wstore__file_rec **sorted, uint64_t total)
{
	int ready = strcmp(m->status, "READY") == 0;

	put_s(b, "{");
	put_key_str(b, "checkpoint_id", m->checkpoint_id);
	put_s(b, ",");
	put_key_int(b, "created_at", m->created_at);
	put_s(b, ",\"error\":");
	if (ready || !m->error)
		put_s(b, "null");
	else
		put_json_str(b, m->error);
	put_s(b, ",\"files\":[");
	for (size_t i = 0; i < m->nfiles; i++) {
		if (i)
			put_s(b, ",");
		put_file(b, sorted[i]);
	}
	put_s(b, "],");
	put_key_str(b, "model_id", m->model_id);
	put_s(b, ",");
	put_key_str(b, "revision", m->revision);
	put_s(b, ",");
	put_key_int(b, "schema_version", 2);
	put_s(b, ",");
	put_key_str(b, "source_uri", m->source_uri);
	put_s(b, ",");
	put_key_str(b, "status", m->status);
	put_s(b, ",");
	put_key_int(b, "total_size", (int64_t)total);
	put_s(b, ",");
	put_key_int(b, "updated_at", m->updated_at);
	put_s(b, "}");
}

int wstore_manifest_serialize(char **out, size_t *out_len,
			      const wstore_manifest *m)
{
	struct buf b = { 0 };
	wstore__file_rec **sorted;
	uint64_t total = 0;
	int rc;

	if (!out || !m)
		return wstore__err(WSTORE_EINVAL,
				   "cannot serialize manifest: no manifest");
	if ((rc = serialize_check(m, &total)))
		return rc;
	sorted = malloc((m->nfiles ? m->nfiles : 1) * sizeof(*sorted));
	if (!sorted)
		return wstore__errc(-ENOMEM, "cannot serialize manifest");
	for (size_t i = 0; i < m->nfiles; i++)
		sorted[i] = &m->files[i];
	qsort(sorted, m->nfiles, sizeof(*sorted), cmp_file_ptr);
	put_manifest(&b, m, sorted, total);
	free(sorted);
	if (b.err) {
		free(b.p);
		if (b.err == WSTORE_EINVAL)
			return wstore__err(
				WSTORE_EINVAL,
				"cannot serialize manifest of '%s': a string is not valid UTF-8",
				m->checkpoint_id ? m->checkpoint_id : "");
		return wstore__errc(b.err, "cannot serialize manifest");
	}
	*out = b.p;
	if (out_len)
		*out_len = b.len;
	return 0;
}

/* ---- parsing ------------------------------------------------------------- */

#define CORRUPT(...)                                                           \
	wstore__err(WSTORE_ECORRUPT, "invalid manifest: " __VA_ARGS__)

/* Look up key in obj; what names the record for messages ("" or
 * "file 'x': "). */
static int need(json_t **out, json_t *obj, const char *key, const char *what)
{
	*out = json_object_get(obj, key);
	if (!*out)
		return CORRUPT("%smissing key '%s'", what, key);
	return 0;
}

static int get_str(char **out, json_t *obj, const char *key, const char *what)
{
	json_t *v;
	int rc;

	if ((rc = need(&v, obj, key, what)))
		return rc;
	if (!json_is_string(v))
		return CORRUPT("%skey '%s' must be a string", what, key);
	return wstore__set_str(out, json_string_value(v));
}

/* An integer >= min. */
static int get_int(int64_t *out, json_t *obj, const char *key, const char *what,
		   int64_t min)
{
	json_t *v;
	int rc;

	if ((rc = need(&v, obj, key, what)))
		return rc;
	if (!json_is_integer(v))
		return CORRUPT("%skey '%s' must be an integer", what, key);
	*out = json_integer_value(v);
	if (*out < min)
		return CORRUPT("%s%s is negative", what, key);
	return 0;
}

/* Keys of the contract are printable ASCII, fit key buffers and are
 * '/'-separated with no empty, "." or ".." segment: a hostile manifest
 * must not name a key a store could map outside its namespace (the file
 * store refuses them, which also made such a checkpoint undeletable). */
static int key_ok(const char *k)
{
	size_t n = strlen(k);
	const char *seg = k;

	if (n == 0 || n >= WSTORE__KEY_MAX)
		return 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && (k[i] < 0x20 || k[i] > 0x7e))
			return 0;
		if (i == n || k[i] == '/') {
			size_t len = (size_t)(k + i - seg);

			if (len == 0 || (len == 1 && seg[0] == '.') ||
			    (len == 2 && seg[0] == '.' && seg[1] == '.'))
				return 0;
			seg = k + i + 1;
		}
	}
	return 1;
}

static int parse_chunks(wstore__file_rec *f, json_t *rec, const char *what)
{
	json_t *arr = json_object_get(rec, "chunks"), *v;
	size_t j;
	int rc;

	if (!arr)
		return wstore__file_rec_add_chunk(f, f->key);
	if (!json_is_array(arr))
		return CORRUPT("%skey 'chunks' must be an array", what);
	json_array_foreach(arr, j, v)
	{
		if (!json_is_string(v) || !key_ok(json_string_value(v)))
			return CORRUPT("%schunk %zu is not a valid key", what,
				       j);
		if ((rc = wstore__file_rec_add_chunk(f, json_string_value(v))))
			return rc;
	}
	return 0;
}

/* Checks that hold for a READY record. */
static int check_ready_file(const wstore__file_rec *f, const char *what)
{
	uint64_t want;

	if (!wstore__is_hex(f->sha256, 64))
		return CORRUPT("%ssha256 is not 64 lower-case hex digits",
			       what);
	if (f->chunk_size == 0) {
		if (f->size > 0 && f->nchunks == 0)
			return CORRUPT("%shas no chunks but size %" PRIu64,
				       what, f->size);
		return 0;
	}
	want = f->size / f->chunk_size + (f->size % f->chunk_size != 0);
	if (f->nchunks != want)
		return CORRUPT("%shas %" PRIu64 " chunks, expected %" PRIu64
			       " for size %" PRIu64 " and chunk_size %" PRIu64,
			       what, f->nchunks, want, f->size, f->chunk_size);
	return 0;
}

static int parse_file_fields(wstore__file_rec *f, json_t *rec, const char *what,
			     int ready)
{
	json_t *cs = json_object_get(rec, "chunk_size");
	int64_t v;
	int rc;

	if ((rc = get_str(&f->type, rec, "type", what)) ||
	    (rc = get_str(&f->key, rec, "key", what)) ||
	    (rc = get_str(&f->sha256, rec, "sha256", what)))
		return rc;
	if (strcmp(f->type, "WEIGHT") != 0 && strcmp(f->type, "METADATA") != 0)
		return CORRUPT("%sinvalid type '%.40s'", what, f->type);
	if (!key_ok(f->key))
		return CORRUPT("%sinvalid key '%.80s'", what, f->key);
	if (*f->sha256 && !wstore__is_hex(f->sha256, 64))
		return CORRUPT("%ssha256 is not 64 lower-case hex digits",
			       what);
	if ((rc = get_int(&v, rec, "size", what, 0)))
		return rc;
	f->size = (uint64_t)v;
	if (cs) {
		if ((rc = get_int(&v, rec, "chunk_size", what, 0)))
			return rc;
		f->chunk_size = (uint64_t)v;
	}
	if ((rc = parse_chunks(f, rec, what)))
		return rc;
	return ready ? check_ready_file(f, what) : 0;
}

static int parse_file(wstore_manifest *m, json_t *rec, size_t i, int ready)
{
	char what[300];
	json_t *p;
	wstore__file_rec *f;

	if (!json_is_object(rec))
		return CORRUPT("file #%zu is not an object", i);
	p = json_object_get(rec, "path");
	if (!p)
		return CORRUPT("file #%zu: missing key 'path'", i);
	if (!json_is_string(p))
		return CORRUPT("file #%zu: key 'path' must be a string", i);
	if (wstore_validate_path(json_string_value(p)))
		return CORRUPT("%s", wstore_last_error());
	snprintf(what, sizeof(what), "file '%.200s': ", json_string_value(p));
	if (!(f = wstore__manifest_add_file(m, json_string_value(p))))
		return wstore__errc(-ENOMEM, "cannot parse manifest");
	return parse_file_fields(f, rec, what, ready);
}

static int parse_files(wstore_manifest *m, json_t *root, int ready)
{
	json_t *arr, *rec;
	uint64_t total = 0;
	size_t i;
	int rc;

	if ((rc = need(&arr, root, "files", "")))
		return rc;
	if (!json_is_array(arr))
		return CORRUPT("key 'files' must be an array");
	json_array_foreach(arr, i, rec)
	{
		if ((rc = parse_file(m, rec, i, ready)))
			return rc;
	}
	if (m->nfiles > 1)
		qsort(m->files, m->nfiles, sizeof(*m->files), cmp_file);
	for (i = 0; i < m->nfiles; i++) {
		if (i && strcmp(m->files[i].path, m->files[i - 1].path) == 0)
			return CORRUPT("duplicate file path '%.200s'",
				       m->files[i].path);
		if (m->files[i].size > INT64_MAX - total)
			return CORRUPT("sum of file sizes overflows");
		total += m->files[i].size;
	}
	if (ready && total != m->total_size)
		return CORRUPT("total_size is %" PRIu64
			       " but the files add up to %" PRIu64,
			       m->total_size, total);
	return 0;
}

static int parse_header(wstore_manifest *m, json_t *root)
{
	json_t *err;
	int64_t v;
	int rc;

	if ((rc = get_int(&v, root, "schema_version", "", INT64_MIN)))
		return rc;
	if (v != 1 && v != 2)
		return CORRUPT("unsupported schema_version %" PRId64, v);
	if ((rc = get_str(&m->checkpoint_id, root, "checkpoint_id", "")))
		return rc;
	if (wstore_validate_checkpoint_id(m->checkpoint_id))
		return CORRUPT("%s", wstore_last_error());
	if ((rc = get_str(&m->status, root, "status", "")))
		return rc;
	if (strcmp(m->status, "READY") != 0 && strcmp(m->status, "FAILED") != 0)
		return CORRUPT("invalid status '%.40s'", m->status);
	if ((rc = get_str(&m->model_id, root, "model_id", "")) ||
	    (rc = get_str(&m->revision, root, "revision", "")) ||
	    (rc = get_str(&m->source_uri, root, "source_uri", "")) ||
	    (rc = get_int(&m->created_at, root, "created_at", "", INT64_MIN)) ||
	    (rc = get_int(&m->updated_at, root, "updated_at", "", INT64_MIN)) ||
	    (rc = get_int(&v, root, "total_size", "", 0)) ||
	    (rc = need(&err, root, "error", "")))
		return rc;
	m->total_size = (uint64_t)v;
	if (!json_is_string(err) && !json_is_null(err))
		return CORRUPT("key 'error' must be a string or null");
	if (json_is_string(err) && strcmp(m->status, "FAILED") == 0)
		return wstore__set_str(&m->error, json_string_value(err));
	return 0;
}

int wstore_manifest_parse(wstore_manifest **out, const void *json, size_t len)
{
	json_error_t jerr;
	json_t *root;
	wstore_manifest *m;
	int rc;

	*out = NULL;
	root = json_loadb(json ? json : "", json ? len : 0,
			  JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return CORRUPT("line %d column %d: %s", jerr.line, jerr.column,
			       jerr.text);
	if (!json_is_object(root)) {
		json_decref(root);
		return CORRUPT("not a JSON object");
	}
	if (!(m = wstore__manifest_new())) {
		json_decref(root);
		return wstore__errc(-ENOMEM, "cannot parse manifest");
	}
	rc = parse_header(m, root);
	if (!rc)
		rc = parse_files(m, root, strcmp(m->status, "READY") == 0);
	json_decref(root);
	if (rc) {
		wstore_manifest_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

/* ---- accessors ----------------------------------------------------------- */

const char *wstore_manifest_checkpoint_id(const wstore_manifest *m)
{
	return m->checkpoint_id;
}

const char *wstore_manifest_model_id(const wstore_manifest *m)
{
	return m->model_id;
}

const char *wstore_manifest_revision(const wstore_manifest *m)
{
	return m->revision;
}

const char *wstore_manifest_status(const wstore_manifest *m)
{
	return m->status;
}

const char *wstore_manifest_source_uri(const wstore_manifest *m)
{
	return m->source_uri;
}

const char *wstore_manifest_error(const wstore_manifest *m)
{
	if (m->status && strcmp(m->status, "READY") == 0)
		return NULL;
	return m->error;
}

int64_t wstore_manifest_created_at(const wstore_manifest *m)
{
	return m->created_at;
}

int64_t wstore_manifest_updated_at(const wstore_manifest *m)
{
	return m->updated_at;
}

uint64_t wstore_manifest_total_size(const wstore_manifest *m)
{
	return m->total_size;
}

size_t wstore_manifest_file_count(const wstore_manifest *m)
{
	return m->nfiles;
}

int wstore_manifest_file(wstore_file_info *out, const wstore_manifest *m,
			 size_t i)
{
	const wstore__file_rec *f;

	if (i >= m->nfiles)
		return wstore__err(
			WSTORE_ERANGE,
			"file index %zu out of range (checkpoint '%s' has %zu files)",
			i, m->checkpoint_id, m->nfiles);
	f = &m->files[i];
	out->path = f->path;
	out->type = f->type;
	out->key = f->key;
	out->sha256 = f->sha256;
	out->size = f->size;
	out->chunk_size = f->chunk_size;
	out->chunk_count = f->nchunks;
	return 0;
}

const char *wstore_manifest_chunk_key(const wstore_manifest *m, size_t i,
				      uint64_t j)
{
	if (i >= m->nfiles || j >= m->files[i].nchunks)
		return NULL;
	return m->files[i].chunks[j];
}

int64_t wstore_manifest_find(const wstore_manifest *m, const char *path)
{
	size_t lo = 0, hi = m->nfiles;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(m->files[mid].path, path);

		if (c == 0)
			return (int64_t)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}
