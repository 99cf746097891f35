/*
 * safetensors.h - internal interface of the weight-format modules:
 * safetensors header parsing (safetensors.c), GGUF header parsing (gguf.c)
 * and the scatter reader of the read API (read.c) they use.  Not installed.
 */
#ifndef WSTORE_SAFETENSORS_H
#define WSTORE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "wstore/read.h"

/* ---- safetensors.c ----------------------------------------------------- */

/* Largest header the contract allows (N). */
#define WSTORE__ST_MAX_HEADER 100000000ull

typedef struct wstore__st_tensor {
	char *name;
	const char *dtype; /* static, from the dtype table */
	uint32_t ndim;
	int64_t *shape;
	uint64_t begin, end; /* relative to the start of the data */
	uint64_t nelem;	     /* product of the shape */
} wstore__st_tensor;

typedef struct wstore__st {
	uint64_t header_len;  /* N */
	uint64_t data_start;  /* 8 + N */
	wstore__st_tensor *t; /* sorted by begin (file order) */
	size_t n;
	size_t *by_name; /* indices into t, sorted by name */
	char **meta;	 /* key, value, key, value... (2 * nmeta) */
	size_t nmeta;
} wstore__st;

/*
 * Check the 8-byte length prefix: N <= 100,000,000 and 8 + N <= file_size.
 * what names the file in messages.
 */
int wstore__safetensors_header_len(uint64_t *out, const void *prefix8,
				   uint64_t file_size, const char *what);
/*
 * Parse and validate a safetensors header from memory.  hdr holds the
 * first n bytes of a file of file_size bytes (at least 8 + N of them are
 * needed).  WSTORE_ECORRUPT with a message naming what on any violation
 * of docs/format.md, "Weight files".  Free the table with wstore__st_free().
 */
int wstore__safetensors_parse(wstore__st **out, const void *hdr, size_t n,
			      uint64_t file_size, const char *what);
/*
 * Validate the safetensors file open on fd (its header against its size),
 * e.g. a source shard before import publishes it.  out may be NULL; else
 * it gets the table.
 */
int wstore__safetensors_check_file(wstore__st **out, int fd, const char *what);
/* Index of name in st, or -1. */
int64_t wstore__st_find(const wstore__st *st, const char *name);
void wstore__st_free(wstore__st *st);
/* Detach the table from a public handle and free the handle. */
wstore__st *wstore__safetensors_take(wstore_safetensors *ws);
/* Bits per element of a dtype name, 0 if unknown. */
unsigned wstore__st_dtype_bits(const char *dtype);

/* ---- gguf.c ------------------------------------------------------------- */

typedef struct wstore__gguf_info {
	uint32_t version;
	uint64_t tensor_count;
	uint64_t kv_count;
	uint64_t param_count;
	uint32_t alignment;
	uint64_t data_start;   /* offset of the tensor data */
	uint64_t type_mask[2]; /* bit t: some tensor has ggml type t */
} wstore__gguf_info;

/* Random-access reader the GGUF parser pulls bytes through: read exactly
 * len bytes at off (off + len <= the size given to the parser). */
typedef int (*wstore__read_fn)(void *ctx, uint64_t off, void *buf, size_t len);

/* Walk a GGUF header (magic, version, counts, every key/value pair and
 * tensor info) with bounds checks.  WSTORE_ECORRUPT naming what. */
int wstore__gguf_parse(wstore__gguf_info *out, wstore__read_fn read, void *ctx,
		       uint64_t file_size, const char *what);
/* Same, over memory (for tests and the fuzzer). */
int wstore__gguf_parse_mem(wstore__gguf_info *out, const void *data, size_t n,
			   const char *what);
/* Same, over a file of the store (buffered reads through pread). */
int wstore__gguf_parse_file(wstore__gguf_info *out, wstore_file *f);
/* Name of ggml type t ("F32", "Q4_K", ...) or NULL if unknown. */
const char *wstore__gguf_type_name(unsigned t);

/* ---- read.c: scatter reads ---------------------------------------------- */

/* One destination range of a scatter read. */
typedef struct wstore__seg {
	uint64_t off; /* offset in the file */
	uint64_t len;
	void *dst;
} wstore__seg;

/*
 * Read every segment of f (all inside the file; any order, may overlap)
 * reading each chunk needed at most once.  segs is reordered.
 */
int wstore__file_readv(wstore_file *f, wstore__seg *segs, size_t n);
/* A good size for sequential buffered reads of f: small when the backend
 * reads ranges, else the chunk size (so each chunk is fetched once). */
size_t wstore__file_window(const wstore_file *f);

#endif
