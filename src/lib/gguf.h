/*
 * gguf.h - the GGUF header walker (gguf.c).
 *
 * Owns: the bounds-checked walk over a GGUF header (docs/format.md,
 * "Weight files").  Pure: it pulls bytes through a read function; reading
 * from a store is weights.c's.
 */
#ifndef WSTORE_GGUF_H
#define WSTORE_GGUF_H

#include <stddef.h>
#include <stdint.h>

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
/* Name of ggml type t ("F32", "Q4_K", ...) or NULL if unknown. */
const char *wstore__gguf_type_name(unsigned t);

#endif
