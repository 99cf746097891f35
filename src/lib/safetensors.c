/*
 * safetensors.c - safetensors headers (docs/format.md, "Weight files"): the
 * pure parser (bytes -> validated tensor table, shared by the read API, import
 * validation and the fuzzer) and the public wstore_safetensors_* handle
 * that reads a header and tensors straight from the store.
 *
 * Layout of a file: u64 LE N, then N bytes of JSON (may end in spaces),
 * then the tensor data.  A valid table, sorted by begin offset, tiles the
 * data exactly: first begin 0, each begin the previous end, last end + 8 +
 * N = file size; each span is product(shape) * bits / 8 bytes, a whole
 * number.  The table keeps tensors in file order plus a name index.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "safetensors.h"
#include "error.h"

static const struct {
	const char *name;
	unsigned bits;
} dtypes[] = {
	{ "BOOL", 8 },	      { "F4", 4 },	    { "F6_E2M3", 6 },
	{ "F6_E3M2", 6 },     { "U8", 8 },	    { "I8", 8 },
	{ "F8_E5M2", 8 },     { "F8_E4M3", 8 },	    { "F8_E8M0", 8 },
	{ "F8_E4M3FNUZ", 8 }, { "F8_E5M2FNUZ", 8 }, { "I16", 16 },
	{ "U16", 16 },	      { "F16", 16 },	    { "BF16", 16 },
	{ "I32", 32 },	      { "U32", 32 },	    { "F32", 32 },
	{ "C64", 64 },	      { "F64", 64 },	    { "I64", 64 },
	{ "U64", 64 },
};

static int dtype_lookup(const char *name, const char **out_name)
{
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(*dtypes); i++) {
		if (strcmp(dtypes[i].name, name) == 0) {
			*out_name = dtypes[i].name;
			return (int)dtypes[i].bits;
		}
	}
	return 0;
}

unsigned wstore__st_dtype_bits(const char *dtype)
{
	const char *name;

	return (unsigned)dtype_lookup(dtype, &name);
}

/* Set a WSTORE_ECORRUPT error "safetensors file 'what': <fmt>". */
__attribute__((format(printf, 2, 3))) static int bad(const char *what,
						     const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return wstore__err(WSTORE_ECORRUPT, "safetensors file '%s': %s", what,
			   msg);
}

void wstore__st_free(wstore__st *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->n; i++) {
		free(st->t[i].name);
		free(st->t[i].shape);
	}
	for (size_t i = 0; i < 2 * st->nmeta; i++)
		free(st->meta[i]);
	free(st->t);
	free(st->by_name);
	free(st->meta);
	free(st);
}

int wstore__safetensors_header_len(uint64_t *out, const void *prefix8,
				   uint64_t file_size, const char *what)
{
	const unsigned char *p = prefix8;
	uint64_t n = 0;

	if (file_size < 8)
		return bad(what,
			   "truncated: %" PRIu64
			   " bytes, shorter than the 8-byte header length",
			   file_size);
	for (int i = 7; i >= 0; i--)
		n = (n << 8) | p[i];
	if (n > WSTORE__ST_MAX_HEADER)
		return bad(what,
			   "header length %" PRIu64
			   " exceeds the limit of 100000000",
			   n);
	if (n + 8 > file_size)
		return bad(what,
			   "header length %" PRIu64
			   " exceeds the file size %" PRIu64,
			   n, file_size);
	if (n < 2)
		return bad(what,
			   "header length %" PRIu64
			   " is too small for a JSON object",
			   n);
	*out = n;
	return 0;
}

/* Non-negative JSON integer. */
static int get_uint(const json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int parse_shape(wstore__st_tensor *t, const json_t *shape,
		       const char *what)
{
	size_t nd;
	uint64_t prod = 1;

	if (!json_is_array(shape))
		return bad(what, "tensor '%.200s': shape is not an array",
			   t->name);
	nd = json_array_size(shape);
	if (nd > UINT32_MAX)
		return bad(what, "tensor '%.200s': too many dimensions",
			   t->name);
	t->ndim = (uint32_t)nd;
	t->shape = malloc((nd ? nd : 1) * sizeof(*t->shape));
	if (!t->shape)
		return wstore__errc(-ENOMEM, "cannot parse '%s'", what);
	for (size_t i = 0; i < nd; i++) {
		uint64_t d;

		if (get_uint(json_array_get(shape, i), &d) < 0)
			return bad(what,
				   "tensor '%.200s': shape entry %zu is "
				   "not a non-negative integer",
				   t->name, i);
		t->shape[i] = (int64_t)d;
		if (prod && d && prod > UINT64_MAX / d)
			return bad(what,
				   "tensor '%.200s': shape product "
				   "overflows",
				   t->name);
		prod *= d;
	}
	t->nelem = prod;
	return 0;
}

static int parse_offsets(wstore__st_tensor *t, const json_t *offs,
			 const char *what)
{
	if (!json_is_array(offs) || json_array_size(offs) != 2 ||
	    get_uint(json_array_get(offs, 0), &t->begin) < 0 ||
	    get_uint(json_array_get(offs, 1), &t->end) < 0)
		return bad(what,
			   "tensor '%.200s': data_offsets is not "
			   "[begin, end] of non-negative integers",
			   t->name);
	if (t->end < t->begin)
		return bad(what,
			   "tensor '%.200s': data_offsets end %" PRIu64
			   " before begin %" PRIu64,
			   t->name, t->end, t->begin);
	return 0;
}

/* Fill t from one header entry and check its size against its shape. */
static int parse_tensor(wstore__st_tensor *t, const char *name, const json_t *v,
			const char *what)
{
	const json_t *dt = json_object_get(v, "dtype");
	unsigned __int128 bits;
	int b, rc;

	if (!(t->name = strdup(name)))
		return wstore__errc(-ENOMEM, "cannot parse '%s'", what);
	if (!json_is_object(v))
		return bad(what, "tensor '%.200s': entry is not an object",
			   name);
	if (!json_is_string(dt))
		return bad(what, "tensor '%.200s': missing dtype", name);
	b = dtype_lookup(json_string_value(dt), &t->dtype);
	if (!b)
		return bad(what, "tensor '%.200s': unknown dtype '%.40s'", name,
			   json_string_value(dt));
	if ((rc = parse_shape(t, json_object_get(v, "shape"), what)) < 0 ||
	    (rc = parse_offsets(t, json_object_get(v, "data_offsets"), what)) <
		    0)
		return rc;
	bits = (unsigned __int128)t->nelem * (unsigned)b;
	if (bits % 8)
		return bad(what,
			   "tensor '%.200s': %" PRIu64 " elements of %s "
			   "are not a whole number of bytes",
			   name, t->nelem, t->dtype);
	if (bits / 8 != t->end - t->begin)
		return bad(what,
			   "tensor '%.200s': data_offsets span %" PRIu64
			   " bytes but shape and dtype %s need %.0f",
			   name, t->end - t->begin, t->dtype,
			   (double)(bits / 8));
	return 0;
}

static int parse_metadata(wstore__st *st, const json_t *v, const char *what)
{
	const char *k;
	json_t *val;
	size_t i = 0;

	if (!json_is_object(v))
		return bad(what, "__metadata__ is not an object");
	st->meta = calloc(2 * json_object_size(v) + 1, sizeof(char *));
	if (!st->meta)
		return wstore__errc(-ENOMEM, "cannot parse '%s'", what);
	json_object_foreach((json_t *)v, k, val)
	{
		if (!json_is_string(val))
			return bad(what,
				   "__metadata__ value of '%.200s' is "
				   "not a string",
				   k);
		st->meta[2 * i] = strdup(k);
		st->meta[2 * i + 1] = strdup(json_string_value(val));
		st->nmeta = ++i;
		if (!st->meta[2 * i - 2] || !st->meta[2 * i - 1])
			return wstore__errc(-ENOMEM, "cannot parse '%s'", what);
	}
	return 0;
}

static int cmp_offset(const void *a, const void *b)
{
	const wstore__st_tensor *x = a, *y = b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmp_name(const void *a, const void *b, void *ctx)
{
	const wstore__st *st = ctx;

	return strcmp(st->t[*(const size_t *)a].name,
		      st->t[*(const size_t *)b].name);
}

/* Sorted by begin, the tensors must tile [0, file_size - 8 - N). */
static int check_layout(wstore__st *st, uint64_t file_size, const char *what)
{
	uint64_t pos = 0;

	qsort(st->t, st->n, sizeof(*st->t), cmp_offset);
	for (size_t i = 0; i < st->n; i++) {
		const wstore__st_tensor *t = &st->t[i];

		if (t->begin > pos)
			return bad(what,
				   "gap in tensor data: bytes %" PRIu64
				   "..%" PRIu64 " before tensor '%.200s' "
				   "belong to no tensor",
				   pos, t->begin, t->name);
		if (t->begin < pos)
			return bad(what,
				   "tensor '%.200s' overlaps the "
				   "previous tensor (begins at %" PRIu64
				   ", previous ends at %" PRIu64 ")",
				   t->name, t->begin, pos);
		pos = t->end;
	}
	if (pos != file_size - st->data_start)
		return bad(what,
			   "tensor data ends at %" PRIu64 " but the file "
			   "size is %" PRIu64,
			   st->data_start + pos, file_size);
	st->by_name = malloc((st->n ? st->n : 1) * sizeof(size_t));
	if (!st->by_name)
		return wstore__errc(-ENOMEM, "cannot parse '%s'", what);
	for (size_t i = 0; i < st->n; i++)
		st->by_name[i] = i;
	qsort_r(st->by_name, st->n, sizeof(size_t), cmp_name, st);
	return 0;
}

static int parse_entries(wstore__st *st, json_t *root, const char *what)
{
	const char *k;
	json_t *v;
	int rc;

	st->t = calloc(json_object_size(root) + 1, sizeof(*st->t));
	if (!st->t)
		return wstore__errc(-ENOMEM, "cannot parse '%s'", what);
	json_object_foreach(root, k, v)
	{
		if (strcmp(k, "__metadata__") == 0) {
			if ((rc = parse_metadata(st, v, what)) < 0)
				return rc;
			continue;
		}
		rc = parse_tensor(&st->t[st->n++], k, v, what);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int wstore__safetensors_parse(wstore__st **out, const void *hdr, size_t n,
			      uint64_t file_size, const char *what)
{
	const char *p = hdr;
	json_error_t jerr;
	json_t *root;
	wstore__st *st;
	uint64_t len;
	int rc;

	*out = NULL;
	if (n < 8)
		return bad(what,
			   "truncated: %zu bytes, shorter than the "
			   "8-byte header length",
			   n);
	if ((rc = wstore__safetensors_header_len(&len, p, file_size, what)) < 0)
		return rc;
	if (n < len + 8)
		return bad(what,
			   "truncated header: %" PRIu64 " bytes announced"
			   ", %zu available",
			   len, n - 8);
	if (p[8] != '{')
		return bad(what, "header is not a JSON object");
	root = json_loadb(p + 8, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return bad(what, "header is not valid JSON: %s (byte %d)",
			   jerr.text, jerr.position);
	if (!(st = calloc(1, sizeof(*st)))) {
		json_decref(root);
		return wstore__errc(-ENOMEM, "cannot parse '%s'", what);
	}
	st->header_len = len;
	st->data_start = len + 8;
	rc = json_is_object(root) ? parse_entries(st, root, what)
				  : bad(what, "header is not a JSON object");
	json_decref(root);
	if (rc == 0)
		rc = check_layout(st, file_size, what);
	if (rc < 0) {
		wstore__st_free(st);
		return rc;
	}
	*out = st;
	return 0;
}

static int pread_full(int fd, void *buf, size_t len, uint64_t off,
		      const char *what)
{
	char *p = buf;

	while (len) {
		ssize_t r = pread(fd, p, len, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return wstore__errc(-errno, "cannot read '%s'", what);
		if (r == 0)
			return bad(what, "file shrank while being read");
		p += r;
		off += (uint64_t)r;
		len -= (size_t)r;
	}
	return 0;
}

int wstore__safetensors_check_file(wstore__st **out, int fd, const char *what)
{
	unsigned char prefix[8];
	struct stat stb;
	wstore__st *st = NULL;
	uint64_t len, size;
	char *buf;
	int rc;

	if (out)
		*out = NULL;
	if (fstat(fd, &stb) < 0)
		return wstore__errc(-errno, "cannot stat '%s'", what);
	size = (uint64_t)stb.st_size;
	if (size < 8)
		return bad(what,
			   "truncated: %" PRIu64 " bytes, shorter than "
			   "the 8-byte header length",
			   size);
	if ((rc = pread_full(fd, prefix, 8, 0, what)) < 0 ||
	    (rc = wstore__safetensors_header_len(&len, prefix, size, what)) < 0)
		return rc;
	if (!(buf = malloc(len + 8)))
		return wstore__errc(-ENOMEM, "cannot read '%s'", what);
	rc = pread_full(fd, buf, len + 8, 0, what);
	if (rc == 0)
		rc = wstore__safetensors_parse(&st, buf, len + 8, size, what);
	free(buf);
	if (rc == 0 && out)
		*out = st;
	else
		wstore__st_free(st);
	return rc;
}

int64_t wstore__st_find(const wstore__st *st, const char *name)
{
	size_t lo = 0, hi = st->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(st->t[st->by_name[mid]].name, name);

		if (c == 0)
			return (int64_t)st->by_name[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}
