/*
 * gguf.c - a bounds-checked walk over a GGUF header (docs/format.md,
 * "Weight files") for inspect and verify: magic, version, counts, every
 * key/value pair (skipped, except general.alignment) and every tensor info
 * (name, dims, ggml type, offset).  Tensor data is not read.
 *
 * Layout (little-endian): "GGUF", u32 version, u64 tensor count, u64 kv
 * count; kv = string key, u32 type, value; string = u64 length + bytes;
 * array = u32 element type, u64 count, elements.  Tensor info = string
 * name, u32 n_dims (<= 4), u64 dims[n_dims], u32 type, u64 offset
 * (relative to the data, a multiple of the alignment).  Data starts at the
 * end of the infos rounded up to the alignment (general.alignment, 32).
 *
 * Every count is checked against the bytes left before anything is
 * allocated or looped over, so a hostile header costs at most a walk over
 * its own bytes.  Bytes come through a read callback: memory, or a store
 * file through a window buffer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "error.h"

#define MAX_DIMS 4
#define MAX_DEPTH 8
#define MAX_NAME 256 /* kept for messages; longer names are skipped */

enum {
	T_U8,
	T_I8,
	T_U16,
	T_I16,
	T_U32,
	T_I32,
	T_F32,
	T_BOOL,
	T_STRING,
	T_ARRAY,
	T_U64,
	T_I64,
	T_F64,
	T_COUNT
};

struct gg {
	wstore__read_fn read;
	void *ctx;
	uint64_t size, pos;
	const char *what;
};

static const char *const type_names[] = {
	[0] = "F32",	  [1] = "F16",	   [2] = "Q4_0",     [3] = "Q4_1",
	[6] = "Q5_0",	  [7] = "Q5_1",	   [8] = "Q8_0",     [9] = "Q8_1",
	[10] = "Q2_K",	  [11] = "Q3_K",   [12] = "Q4_K",    [13] = "Q5_K",
	[14] = "Q6_K",	  [15] = "Q8_K",   [16] = "IQ2_XXS", [17] = "IQ2_XS",
	[18] = "IQ3_XXS", [19] = "IQ1_S",  [20] = "IQ4_NL",  [21] = "IQ3_S",
	[22] = "IQ2_S",	  [23] = "IQ4_XS", [24] = "I8",	     [25] = "I16",
	[26] = "I32",	  [27] = "I64",	   [28] = "F64",     [29] = "IQ1_M",
	[30] = "BF16",	  [34] = "TQ1_0",  [35] = "TQ2_0",   [39] = "MXFP4",
};

const char *wstore__gguf_type_name(unsigned t)
{
	return t < sizeof(type_names) / sizeof(*type_names) ? type_names[t]
							    : NULL;
}

__attribute__((format(printf, 2, 3))) static int bad(struct gg *g,
						     const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return wstore__err(WSTORE_ECORRUPT, "gguf file '%s': %s", g->what, msg);
}

static uint64_t left(const struct gg *g)
{
	return g->size - g->pos;
}

static int take(struct gg *g, void *buf, size_t len)
{
	int rc;

	if (len > left(g))
		return bad(g, "truncated at byte %" PRIu64, g->size);
	if ((rc = g->read(g->ctx, g->pos, buf, len)) < 0)
		return rc;
	g->pos += len;
	return 0;
}

static int skip(struct gg *g, uint64_t len)
{
	if (len > left(g))
		return bad(g, "truncated at byte %" PRIu64, g->size);
	g->pos += len;
	return 0;
}

static int u32(struct gg *g, uint32_t *out)
{
	unsigned char b[4];
	int rc = take(g, b, 4);

	*out = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
	       (uint32_t)b[3] << 24;
	return rc;
}

static int u64(struct gg *g, uint64_t *out)
{
	uint32_t lo = 0, hi = 0;
	int rc;

	if ((rc = u32(g, &lo)) < 0 || (rc = u32(g, &hi)) < 0)
		return rc;
	*out = (uint64_t)hi << 32 | lo;
	return 0;
}

/* A string: its first cap-1 bytes into out (NUL-terminated), if out. */
static int string(struct gg *g, char *out, size_t cap)
{
	uint64_t len, keep;
	int rc;

	if ((rc = u64(g, &len)) < 0)
		return rc;
	if (len > left(g))
		return bad(g,
			   "string of %" PRIu64 " bytes at byte %" PRIu64
			   " runs past the end",
			   len, g->pos - 8);
	keep = out ? (len < cap - 1 ? len : cap - 1) : 0;
	if (out) {
		if ((rc = take(g, out, (size_t)keep)) < 0)
			return rc;
		out[keep] = '\0';
	}
	return skip(g, len - keep);
}

static unsigned scalar_size(uint32_t type)
{
	static const unsigned sizes[T_COUNT] = {
		1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8,
	};

	return type < T_COUNT ? sizes[type] : 0;
}

static int value(struct gg *g, uint32_t type, int depth);

static int array(struct gg *g, int depth)
{
	uint32_t et;
	uint64_t count;
	unsigned es;
	int rc;

	if ((rc = u32(g, &et)) < 0 || (rc = u64(g, &count)) < 0)
		return rc;
	if (depth >= MAX_DEPTH)
		return bad(g, "arrays nested too deeply");
	if (et >= T_COUNT)
		return bad(g, "unknown array element type %" PRIu32, et);
	es = scalar_size(et);
	if (es) {
		if (count > left(g) / es)
			return bad(g,
				   "array of %" PRIu64 " elements runs past "
				   "the end",
				   count);
		return skip(g, count * es);
	}
	/* strings take at least 8 bytes, arrays at least 12 */
	if (count > left(g) / 8)
		return bad(g, "array of %" PRIu64 " elements runs past the end",
			   count);
	for (uint64_t i = 0; i < count; i++)
		if ((rc = value(g, et, depth + 1)) < 0)
			return rc;
	return 0;
}

static int value(struct gg *g, uint32_t type, int depth)
{
	if (type == T_STRING)
		return string(g, NULL, 0);
	if (type == T_ARRAY)
		return array(g, depth);
	if (type >= T_COUNT)
		return bad(g, "unknown value type %" PRIu32 " at byte %" PRIu64,
			   type, g->pos - 4);
	return skip(g, scalar_size(type));
}

static int kv(struct gg *g, wstore__gguf_info *out)
{
	char key[128];
	uint32_t type, align;
	int rc;

	if ((rc = string(g, key, sizeof(key))) < 0 || (rc = u32(g, &type)) < 0)
		return rc;
	if (strcmp(key, "general.alignment") != 0)
		return value(g, type, 0);
	if (type != T_U32)
		return bad(g, "general.alignment is not a u32");
	if ((rc = u32(g, &align)) < 0)
		return rc;
	if (align == 0 || (align & (align - 1)))
		return bad(g,
			   "general.alignment %" PRIu32 " is not a power "
			   "of two",
			   align);
	out->alignment = align;
	return 0;
}

static int tensor_info(struct gg *g, wstore__gguf_info *out, uint64_t *offs)
{
	char name[MAX_NAME];
	uint32_t nd, type;
	uint64_t prod = 1, d;
	int rc;

	if ((rc = string(g, name, sizeof(name))) < 0 || (rc = u32(g, &nd)) < 0)
		return rc;
	if (nd > MAX_DIMS)
		return bad(g,
			   "tensor '%.200s' has %" PRIu32 " dimensions "
			   "(at most 4)",
			   name, nd);
	for (uint32_t i = 0; i < nd; i++) {
		if ((rc = u64(g, &d)) < 0)
			return rc;
		if (d > INT64_MAX || (d && prod > UINT64_MAX / d))
			return bad(g, "tensor '%.200s': dimensions overflow",
				   name);
		prod *= d;
	}
	if ((rc = u32(g, &type)) < 0 || (rc = u64(g, offs)) < 0)
		return rc;
	if (!wstore__gguf_type_name(type))
		return bad(g, "tensor '%.200s' has unknown type %" PRIu32, name,
			   type);
	out->type_mask[type / 64] |= 1ull << (type % 64);
	out->param_count = prod > UINT64_MAX - out->param_count
				   ? UINT64_MAX
				   : out->param_count + prod;
	return 0;
}

static int header(struct gg *g, wstore__gguf_info *out)
{
	char magic[4];
	int rc;

	if ((rc = take(g, magic, 4)) < 0)
		return rc;
	if (memcmp(magic, "GGUF", 4) != 0)
		return bad(g, "bad magic (not a GGUF file)");
	if ((rc = u32(g, &out->version)) < 0)
		return rc;
	if (out->version != 2 && out->version != 3)
		return bad(g, "unsupported version %" PRIu32, out->version);
	if ((rc = u64(g, &out->tensor_count)) < 0 ||
	    (rc = u64(g, &out->kv_count)) < 0)
		return rc;
	/* a kv pair takes at least 13 bytes, a tensor info at least 24 */
	if (out->kv_count > left(g) / 13)
		return bad(g,
			   "%" PRIu64 " key/value pairs cannot fit in the "
			   "file",
			   out->kv_count);
	if (out->tensor_count > left(g) / 24)
		return bad(g, "%" PRIu64 " tensor infos cannot fit in the file",
			   out->tensor_count);
	return 0;
}

int wstore__gguf_parse(wstore__gguf_info *out, wstore__read_fn read, void *ctx,
		       uint64_t file_size, const char *what)
{
	struct gg g = { read, ctx, file_size, 0, what };
	uint64_t off = 0, pad;
	int rc;

	memset(out, 0, sizeof(*out));
	out->alignment = 32;
	if ((rc = header(&g, out)) < 0)
		return rc;
	for (uint64_t i = 0; i < out->kv_count; i++)
		if ((rc = kv(&g, out)) < 0)
			return rc;
	if (out->tensor_count > left(&g) / 24)
		return bad(&g,
			   "%" PRIu64 " tensor infos cannot fit in the "
			   "file",
			   out->tensor_count);
	for (uint64_t i = 0; i < out->tensor_count; i++) {
		if ((rc = tensor_info(&g, out, &off)) < 0)
			return rc;
		if (off % out->alignment)
			return bad(&g,
				   "tensor %" PRIu64 " offset %" PRIu64
				   " is not aligned to %" PRIu32,
				   i, off, out->alignment);
		if (off > file_size)
			return bad(&g,
				   "tensor %" PRIu64 " offset %" PRIu64
				   " is past the end of the file",
				   i, off);
	}
	pad = (out->alignment - g.pos % out->alignment) % out->alignment;
	out->data_start = g.pos + pad;
	if (out->tensor_count && out->data_start > file_size)
		return bad(&g,
			   "tensor data would start at %" PRIu64 ", past "
			   "the end",
			   out->data_start);
	return 0;
}

/* ---- readers ------------------------------------------------------------- */

static int mem_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	memcpy(buf, (const char *)ctx + off, len);
	return 0;
}

int wstore__gguf_parse_mem(wstore__gguf_info *out, const void *data, size_t n,
			   const char *what)
{
	return wstore__gguf_parse(out, mem_read, (void *)data, n, what);
}
