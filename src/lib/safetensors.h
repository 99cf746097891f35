/*
 * safetensors.h - the safetensors header parser (safetensors.c).
 *
 * Owns: the rules of docs/format.md, "Weight files", for safetensors: the
 * header length, the JSON header and the tensor table that must tile the
 * data.  Pure: bytes or a local fd in, a validated table out; reading
 * from a store is weights.c's.
 */
#ifndef WSTORE_SAFETENSORS_H
#define WSTORE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

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
/* Bits per element of a dtype name, 0 if unknown. */
unsigned wstore__st_dtype_bits(const char *dtype);

#endif
